//! `zkfle doctor`: a live ensemble's election health.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::repro::doctor::{self, DoctorOptions, Member};
use crate::zoocfg::ZooCfg;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Election addresses, `HOST:PORT`; the members the answers' configs name are examined too.
    #[arg(value_name = "HOST:PORT", required_unless_present = "config", value_parser = super::host_port)]
    pub servers: Vec<String>,
    /// The ensemble's zoo.cfg: every member it names (and its client port).
    #[arg(long, value_name = "ZOO.CFG")]
    pub config: Option<PathBuf>,
    /// Output format: text, or one JSON object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Seconds to wait for each server (connect and answer together).
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub tls: super::tls_args::TlsArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: DoctorArgs) -> Result<(), CliError> {
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(CliError::input(
            "--timeout must be a positive number of seconds",
        ));
    }
    let mut members: Vec<Member> = args
        .servers
        .iter()
        .map(|s| Member {
            address: s.clone(),
            sid: None,
            client: None,
        })
        .collect();
    let cfg = match &args.config {
        Some(path) => {
            Some(ZooCfg::read(path).map_err(|e| CliError::input(format!("--config: {e}")))?)
        }
        None => None,
    };
    let tls = args.tls.build(cfg.as_ref())?;
    let sasl = args.tls.sasl(cfg.as_ref())?;
    if let (Some(path), Some(cfg)) = (&args.config, &cfg) {
        let client_port: Option<u16> = cfg.int("clientPort").and_then(|p| u16::try_from(p).ok());
        for line in cfg.servers() {
            let Some(addr) = line.addresses.first() else {
                continue;
            };
            let client = match (&line.client, client_port) {
                (Some(c), _) => doctor::client_of(Some(c), &addr.host),
                (None, Some(p)) => doctor::client_of(Some(&(None, p)), &addr.host),
                (None, None) => doctor::client_of(None, &addr.host),
            };
            let address = addr.election().text;
            match members.iter_mut().find(|m| m.address == address) {
                Some(m) => {
                    m.sid = Some(line.id);
                    m.client = client;
                }
                None => members.push(Member {
                    address,
                    sid: Some(line.id),
                    client,
                }),
            }
        }
        if members.is_empty() {
            return Err(CliError::input(format!(
                "--config {}: names no server",
                path.display()
            )));
        }
    }
    let report = doctor::examine(
        members,
        &DoctorOptions {
            timeout: Duration::from_secs_f64(args.timeout),
            tls,
            sasl,
        },
    );
    match args.format {
        Format::Json => println!("{}", report.to_json()),
        Format::Text => print!("{}", report.to_text()),
    }
    if report.healthy() {
        Ok(())
    } else {
        let n = report
            .servers
            .iter()
            .filter(|s| !s.problems.is_empty())
            .count();
        Err(CliError::failure(format!(
            "doctor: {n} of {} server(s) with problems",
            report.servers.len()
        )))
    }
}
