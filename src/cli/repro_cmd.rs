//! `zkfle repro`: trigger a known election bug against a live server and give a verdict.

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::CliError;
use crate::repro::matrix::{MATRIX, VERSIONS};
use crate::repro::{self, REPROS, ReproOptions, Target, Verdict};

#[derive(Debug, Args)]
pub struct ReproArgs {
    /// The repro to run (see --list), e.g. port-out-of-range or ZOOKEEPER-3769.
    #[arg(value_name = "NAME", required_unless_present = "list")]
    pub name: Option<String>,
    /// The server's election address, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "list", value_parser = super::host_port)]
    pub target: Option<String>,
    /// List every repro, what it sends and what it breaks.
    #[arg(long)]
    pub list: bool,
    /// Allow a repro that breaks a vulnerable target (each says what).
    #[arg(long)]
    pub destructive: bool,
    /// The member zkfle stands in for: ZOOKEEPER-3769 against 3.4, a member's sid above the
    /// target's (zkfle takes over that member's election connection to the target);
    /// ZOOKEEPER-3109/4685, a member whose server is down (zkfle listens on its election
    /// address); ZOOKEEPER-2201, a member whose server is down (zkfle follows as it).
    #[arg(long, value_name = "SID")]
    pub peer_sid: Option<i64>,
    /// The ensemble's zoo.cfg, for repros that need the members when the target's answers
    /// carry no config (3.4 servers; the member repros).
    #[arg(long, value_name = "ZOO.CFG")]
    pub config: Option<std::path::PathBuf>,
    /// The leader's client address for ZOOKEEPER-2201's writes, when the config carries none
    /// (3.4 servers, static configs).
    #[arg(long, value_name = "HOST:PORT", value_parser = super::host_port)]
    pub client: Option<String>,
    /// Output format: text, or one JSON object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Seconds to wait for each probe and each answer.
    #[arg(long, default_value_t = 3.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub tls: super::tls_args::TlsArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: ReproArgs) -> Result<(), CliError> {
    if args.list {
        list(args.format);
        return Ok(());
    }
    let name = args.name.as_deref().unwrap_or_default();
    let Some(r) = repro::find(name) else {
        let names: Vec<&str> = REPROS.iter().map(|r| r.name).collect();
        return Err(CliError::input(format!(
            "repro: no repro named {name:?} (known: {})",
            names.join(", ")
        )));
    };
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(CliError::input(
            "--timeout must be a positive number of seconds",
        ));
    }
    if let (Some(breaks), false) = (r.breaks, args.destructive) {
        return Err(CliError::input(format!(
            "repro {}: destructive, needs --destructive: on a vulnerable server it breaks {breaks}",
            r.name
        )));
    }
    let target_text = args.target.as_deref().unwrap_or_default();
    let target =
        Target::resolve(target_text).map_err(|e| CliError::input(format!("--target: {e}")))?;
    let zoo_cfg = match &args.config {
        Some(path) => Some(
            crate::zoocfg::ZooCfg::read(path)
                .map_err(|e| CliError::input(format!("--config: {e}")))?,
        ),
        None => None,
    };
    let tls = args.tls.build(zoo_cfg.as_ref())?;
    let sasl = args.tls.sasl(zoo_cfg.as_ref())?;
    let config = zoo_cfg.map(|c| c.quorum);
    let client = match &args.client {
        Some(text) => Some(
            Target::resolve(text)
                .map_err(|e| CliError::input(format!("--client: {e}")))?
                .addr,
        ),
        None => None,
    };
    let opts = ReproOptions {
        client,
        timeout: Duration::from_secs_f64(args.timeout),
        peer_sid: args.peer_sid,
        config,
        tls,
        sasl,
    };
    let report = repro::run(r, &target, &opts);
    match args.format {
        Format::Json => println!("{}", report.to_json()),
        Format::Text => print!("{}", report.to_text()),
    }
    match report.verdict {
        Verdict::NotVulnerable => Ok(()),
        Verdict::Vulnerable => Err(CliError::failure(format!(
            "repro {}: {} is vulnerable",
            r.name, target.text
        ))),
        Verdict::Inconclusive => Err(CliError::failure(format!(
            "repro {}: inconclusive against {}",
            r.name, target.text
        ))),
    }
}

/// The verdicts measured on each release (the repro matrix), as a JSON object and as text.
fn measured(name: &str) -> (serde_json::Value, String) {
    let Some((_, row)) = MATRIX.iter().find(|(n, _)| *n == name) else {
        return (serde_json::Value::Null, "not measured".to_string());
    };
    let object = VERSIONS
        .iter()
        .zip(row)
        .map(|(v, verdict)| (v.to_string(), json!(verdict.name())))
        .collect();
    let text = VERSIONS
        .iter()
        .zip(row)
        .map(|(v, verdict)| format!("{v} {}", verdict.name()))
        .collect::<Vec<_>>()
        .join(", ");
    (serde_json::Value::Object(object), text)
}

fn list(format: Format) {
    for r in REPROS {
        let (measured_json, measured_text) = measured(r.name);
        match format {
            Format::Json => println!(
                "{}",
                json!({
                    "name": r.name,
                    "destructive": r.destructive(),
                    "trigger": r.trigger,
                    "symptom": r.symptom,
                    "breaks": r.breaks,
                    "measured": measured_json,
                })
            ),
            Format::Text => {
                println!(
                    "{}{}",
                    r.name,
                    if r.destructive() {
                        "  (destructive: needs --destructive)"
                    } else {
                        ""
                    }
                );
                println!("    sends:    {}", r.trigger);
                println!("    symptom:  {}", r.symptom);
                if let Some(b) = r.breaks {
                    println!("    breaks:   {b}");
                }
                println!("    measured: {measured_text}");
            }
        }
    }
}
