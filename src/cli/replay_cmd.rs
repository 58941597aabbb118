//! `zkfle replay`: re-run a recorded election as one of its servers, against the native
//! participant on a virtual clock or a live server over TCP.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::capture;
use crate::decode::{AddressBook, Body, DecodeOptions, Decoder, Record, Severity, SidSource};
use crate::replay::{RecordingBuilder, live, native};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A pcap or pcapng capture of the election (also gzip/zstd); several files, one per
    /// host, are read as one capture, as `zkfle decode` reads them.
    #[arg(required = true, value_name = "CAPTURE")]
    pub captures: Vec<String>,
    /// The recorded server to stand in for.
    #[arg(long = "as", value_name = "SID")]
    pub sid: i64,
    /// `native` (in-process, virtual clock) or the election address `HOST:PORT` of a live
    /// server configured as SID.
    #[arg(long, default_value = "native")]
    pub target: String,
    /// Seconds a live target may take to answer at all (it may still be starting) before the
    /// replay fails.
    #[arg(long = "wait-target", value_name = "SECS", default_value_t = live::DEFAULT_WAIT_ANSWER.as_secs_f64())]
    pub wait_target: f64,
    /// Scale recorded time for a live target: 2 replays twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Election port to decode (repeatable); default 3888, and any connection that opens with
    /// an initial message.
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// A zoo.cfg whose members replace the config carried in the capture (its quorum TLS and
    /// SASL keys are spoken to a live `--target` too).
    #[arg(long, value_name = "ZOO_CFG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub security: super::tls_args::TlsArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: ReplayArgs) -> Result<(), CliError> {
    if !(args.speed > 0.0 && args.speed.is_finite()) {
        return Err(CliError::input("--speed must be a positive number"));
    }
    if !(args.wait_target >= 0.0 && args.wait_target <= 86_400.0) {
        return Err(CliError::input(
            "--wait-target must be a number of seconds between 0 and 86400",
        ));
    }
    let mut book = AddressBook::default();
    let zoo_cfg = match &args.config {
        Some(path) => {
            let cfg = super::members_config(path)?;
            book.learn_config(&cfg.quorum, SidSource::Config);
            Some(cfg)
        }
        None => None,
    };
    let security = live::Security {
        tls: args.security.build(zoo_cfg.as_ref())?,
        sasl: args.security.sasl(zoo_cfg.as_ref())?,
    };
    let config = zoo_cfg.map(|c| c.quorum);
    let name = args.captures.join(" ");
    let options = DecodeOptions {
        ports: args.ports.clone(),
        book,
        ..DecodeOptions::default()
    };
    // Decoded record by record: only what the recording keeps is held, not the capture.
    let mut builder = RecordingBuilder::new(args.sid);
    let mut feed = |record: &Record| match &record.body {
        Body::Problem(p) if p.severity() == Severity::Error => Err(CliError::failure(format!(
            "{name}: {}",
            crate::output::problem_words(p, record.time)
        ))),
        _ => {
            builder.add(record);
            Ok(())
        }
    };
    if let [one] = args.captures.as_slice() {
        let segments = capture::open(one).map_err(|e| CliError::failure(format!("{one}: {e}")))?;
        let mut decoder = Decoder::from_capture(segments, options);
        while let Some(record) = decoder.next_record() {
            feed(record)?;
        }
    } else {
        let fixed = vec![None; args.captures.len()];
        let (merged, _) = capture::merge::open_files(&args.captures, &fixed)
            .map_err(|e| CliError::failure(e.to_string()))?;
        let mut decoder = Decoder::with_source(merged, options);
        while let Some(record) = decoder.next_record() {
            feed(record)?;
        }
    }
    let rec = builder
        .finish(config.as_ref())
        .map_err(|e| CliError::input(format!("{name}: {e}")))?;
    let report = if args.target == "native" {
        native::replay(&rec)
    } else {
        live::replay(
            &rec,
            &args.target,
            args.speed,
            std::time::Duration::from_secs_f64(args.wait_target),
            security,
        )
        .map_err(|e| CliError::failure(format!("replay into {}: {e}", args.target)))?
    };
    match args.format {
        Format::Json => println!("{}", report.to_json()),
        Format::Text => print!("{}", report.to_text()),
    }
    if !report.matches() {
        return Err(CliError::failure(format!(
            "sid {}: the target's decisions differ from the recorded ones",
            args.sid
        )));
    }
    Ok(())
}
