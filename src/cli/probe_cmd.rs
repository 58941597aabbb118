//! `zkfle probe`: ask live servers for their state and vote over the election port.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::net::probe::{self, ProbeOptions, Row};

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Election addresses to probe, `HOST:PORT` (`[::1]:3888` for IPv6).
    #[arg(value_name = "HOST:PORT", required = true)]
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
    /// The sid to announce; it must be above every member's sid.
    #[arg(long, default_value_t = probe::PROBE_SID)]
    pub sid: i64,
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
    };
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
            let extra: Vec<String> = members
                .iter()
                .map(|(_, a)| a.clone())
                .filter(|a| !known.contains(a))
                .collect();
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
            "probe: {failed} of {} server(s) did not answer",
            rows.len()
        )));
    }
    Ok(())
}
