//! `zkfle probe`: ask live servers for their state and vote over the election port.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::net::probe::{self, ProbeOptions, Row};
use crate::wire::ServerState;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Election addresses to probe, `HOST:PORT` (`[::1]:3888` for IPv6).
    #[arg(value_name = "HOST:PORT", required = true, value_parser = super::host_port)]
    pub servers: Vec<String>,
    /// Also probe every member named in the config the answers carry, and print the ensemble
    /// as a table, flagging servers that disagree or do not answer.
    #[arg(long)]
    pub all: bool,
    /// Output format: text, or one JSON object per server per line.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Seconds to wait for each server (connect and answer together).
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// The sid to announce; it must be above every member's sid (checked first with a probe
    /// under the default sid: a member's sid, or one below it, is refused).
    #[arg(long, default_value_t = probe::PROBE_SID)]
    pub sid: i64,
    #[command(flatten)]
    pub tls: super::tls_args::TlsArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: ProbeArgs) -> Result<(), CliError> {
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(CliError::input(
            "--timeout must be a positive number of seconds",
        ));
    }
    let opts = ProbeOptions {
        sid: args.sid,
        timeout: Duration::from_secs_f64(args.timeout),
        tls: args.tls.build(None)?,
        sasl: args.tls.sasl(None)?,
        ..ProbeOptions::default()
    };
    if opts.sid != probe::PROBE_SID {
        check_sid(&args.servers, &opts)?;
    }
    let results = probe::probe_all(&args.servers, &opts);
    let mut rows: Vec<Row> = args
        .servers
        .iter()
        .cloned()
        .zip(results)
        .map(|(server, result)| Row {
            server,
            sid: None,
            result,
            disagrees: false,
        })
        .collect();
    if args.all {
        // The newest config among the answers names the members.
        let config = rows
            .iter()
            .filter_map(|r| r.result.as_ref().ok()?.config.clone())
            .max_by_key(|c| c.version());
        if let Some(config) = config {
            let members = probe::members(&config);
            let known: Vec<String> = rows.iter().map(|r| r.server.clone()).collect();
            let mut extra: Vec<String> = Vec::new();
            for (_, a) in &members {
                if !known.contains(a) && !extra.contains(a) {
                    extra.push(a.clone());
                }
            }
            if extra.len() > probe::MAX_MEMBERS_DIALED {
                eprintln!(
                    "zkfle: warning: probe --all: the config names {} other members; probing only the first {}",
                    extra.len(),
                    probe::MAX_MEMBERS_DIALED
                );
                extra.truncate(probe::MAX_MEMBERS_DIALED);
            }
            let results = probe::probe_all(&extra, &opts);
            rows.extend(extra.into_iter().zip(results).map(|(server, result)| Row {
                server,
                sid: None,
                result,
                disagrees: false,
            }));
            for r in rows.iter_mut() {
                r.sid = members
                    .iter()
                    .find(|(_, a)| *a == r.server)
                    .map(|(sid, _)| *sid);
            }
            rows.sort_by_key(|r| (r.sid.is_none(), r.sid));
        }
        probe::flag_disagreements(&mut rows);
    }
    for r in &rows {
        match args.format {
            Format::Json => println!("{}", r.to_json()),
            Format::Text => println!("{}", r.to_text()),
        }
    }
    let failed = rows.iter().filter(|r| r.result.is_err()).count();
    if failed > 0 {
        return Err(CliError::failure(format!(
            "probe: {failed} of {} server(s) gave no readable answer (each one's line says why)",
            rows.len()
        )));
    }
    let unknown: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.result {
            Ok(a) if matches!(a.state, ServerState::Unknown(_)) => {
                Some(format!("{} ({})", r.server, a.state.name()))
            }
            _ => None,
        })
        .collect();
    if !unknown.is_empty() {
        return Err(CliError::failure(format!(
            "probe: answered with a state that is none of LOOKING, FOLLOWING, LEADING, OBSERVING: {}",
            unknown.join(", ")
        )));
    }
    Ok(())
}

/// Refuses a `--sid` that a member has, or that is below a member's: with a member's sid the
/// probe would replace that member's connection and its notification would count as that
/// member's vote; below a member's, the server drops the connection and dials back. Checked
/// with a probe under the default sid, whose answers carry the members (3.5+).
fn check_sid(servers: &[String], opts: &ProbeOptions) -> Result<(), CliError> {
    let safe = ProbeOptions {
        sid: probe::PROBE_SID,
        ..opts.clone()
    };
    for (server, result) in servers.iter().zip(probe::probe_all(servers, &safe)) {
        let Ok(answer) = result else { continue };
        let Some(config) = &answer.config else {
            return Err(CliError::input(format!(
                "--sid {}: cannot check it is not a member's: {server}'s answer carries no config (a 3.4 server); leave --sid out",
                opts.sid
            )));
        };
        if let Some(member) = config
            .servers()
            .map(|s| s.id)
            .filter(|&id| id >= opts.sid)
            .max()
        {
            return Err(CliError::input(format!(
                "--sid {}: {server}'s config has member {member}; a probe must announce a sid above every member's",
                opts.sid
            )));
        }
    }
    Ok(())
}
