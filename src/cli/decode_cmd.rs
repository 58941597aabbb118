//! `zkfle decode`: a capture's election traffic as a timeline, JSON lines, or a summary.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::capture;
use crate::decode::summary::Summarizer;
use crate::decode::{AddressBook, Body, DecodeOptions, Decoder, Record, Severity};
use crate::json::RecordLineWriter;
use crate::wire::{ElectionAddress, Notification};
use crate::zoocfg::ZooCfg;

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// A pcap or pcapng file, or `-` for standard input.
    pub capture: String,
    /// Election port to decode (repeatable); replaces the default 3888. Connections on other
    /// ports are decoded too when they open with a valid initial message.
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Print a summary of each election instead of every message.
    #[arg(long)]
    pub summary: bool,
    /// A zoo.cfg naming the members' election addresses (for captures that carry none, 3.4).
    #[arg(long, value_name = "ZOO_CFG")]
    pub config: Option<PathBuf>,
    /// Who listens where: `ADDR=SID`, e.g. `127.0.0.1:3888=1` (repeatable).
    #[arg(long = "sid-map", value_name = "ADDR=SID")]
    pub sid_map: Vec<String>,
    /// With `--format mermaid`: the election to draw, by its round (election epoch, as the
    /// summary names it: decimal or 0x hex); the first election when not given.
    #[arg(long, value_name = "N", value_parser = parse_round, conflicts_with = "election")]
    pub round: Option<i64>,
    /// With `--format mermaid`: the election to draw, by its number in the summary (1, 2, ...),
    /// for when several elections ended in the same round.
    #[arg(long, value_name = "K")]
    pub election: Option<usize>,
}

fn parse_round(s: &str) -> Result<i64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a round number (decimal or 0x hex)"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Jsonl,
    /// One self-contained page drawing the elections (open it in a browser).
    Html,
    /// A Mermaid sequenceDiagram of one election (`--round`).
    Mermaid,
    /// A ShiViz log with vector clocks, its parser regex on the first line.
    Shiviz,
}

pub fn run(args: DecodeArgs) -> Result<(), CliError> {
    let mut book = AddressBook::default();
    let mut members = std::collections::HashMap::new();
    if let Some(path) = &args.config {
        let cfg = ZooCfg::read(path).map_err(|e| CliError::input(format!("--config {e}")))?;
        book.learn_config(&cfg.quorum);
        members.extend(book.members().iter().map(|(k, v)| (*k, *v)));
    }
    for entry in &args.sid_map {
        let (addr, sid) = entry
            .rsplit_once('=')
            .ok_or_else(|| CliError::input(format!("--sid-map {entry:?}: expected ADDR=SID")))?;
        let sid: i64 = sid
            .parse()
            .map_err(|_| CliError::input(format!("--sid-map {entry:?}: bad sid {sid:?}")))?;
        let addr = ElectionAddress::parse(addr, 0)
            .map_err(|e| CliError::input(format!("--sid-map {entry:?}: {}", e.kind)))?;
        book.learn(sid, &addr);
    }
    let segments = open_with_progress(&args.capture)?;
    let options = DecodeOptions {
        ports: args.ports.clone(),
        book,
        ..DecodeOptions::default()
    };
    let decoder = Decoder::from_capture(segments, options);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut summarizer = Summarizer::new(members);
    let mut t0: Option<f64> = None;
    let mut lines = RecordLineWriter::new();
    let mut line = Vec::with_capacity(1 << 17);
    let mut errors = 0u64;
    let mut first_error = None;
    let drawing = matches!(args.format, Format::Html | Format::Mermaid | Format::Shiviz);
    if (args.round.is_some() || args.election.is_some()) && args.format != Format::Mermaid {
        return Err(CliError::input(
            "--round and --election apply to --format mermaid only",
        ));
    }
    let mut collected = crate::output::Collected::default();
    for record in decoder {
        let time = record.time.as_secs_f64();
        let start = *t0.get_or_insert(time);
        if let Body::Problem(p) = &record.body
            && p.severity == Severity::Error
        {
            errors += 1;
            first_error.get_or_insert_with(|| p.message.clone());
        }
        if args.summary || drawing {
            summarizer.add(&record);
            if drawing {
                collected
                    .add(record)
                    .map_err(|e| CliError::failure(format!("{}: {e}", args.capture)))?;
            }
            continue;
        }
        match args.format {
            Format::Jsonl => {
                // Lines are written straight into one buffer, handed to the output whole.
                lines.write(&mut line, &record);
                line.push(b'\n');
                if line.len() >= 1 << 16 {
                    let r = out.write_all(&line);
                    line.clear();
                    r
                } else {
                    Ok(())
                }
            }
            Format::Text => writeln!(out, "{}", record_text(&record, start)),
            Format::Html | Format::Mermaid | Format::Shiviz => Ok(()),
        }
        .map_err(broken_pipe_or)?;
    }
    out.write_all(&line).map_err(broken_pipe_or)?;
    if drawing {
        let summary = summarizer.finish().to_json();
        let records = &collected.records;
        match args.format {
            Format::Html => {
                crate::output::html::write_page(&mut out, &args.capture, records, &summary)
            }
            Format::Mermaid => {
                use crate::output::mermaid::Choice;
                let choice = match (args.round, args.election) {
                    (Some(r), _) => Choice::Round(r),
                    (None, Some(k)) => Choice::Number(k),
                    (None, None) => Choice::First,
                };
                let text = crate::output::mermaid::diagram(records, &summary, choice)
                    .map_err(|e| CliError::input(format!("{}: {e}", args.capture)))?;
                out.write_all(text.as_bytes())
            }
            _ => out.write_all(crate::output::shiviz::log(records, &summary).as_bytes()),
        }
        .map_err(broken_pipe_or)?;
    } else if args.summary {
        let summary = summarizer.finish();
        match args.format {
            Format::Jsonl => writeln!(out, "{}", summary.to_json()),
            _ => out.write_all(summary.to_text(t0.unwrap_or(0.0)).as_bytes()),
        }
        .map_err(broken_pipe_or)?;
    }
    out.flush().map_err(broken_pipe_or)?;
    if errors > 0 {
        return Err(CliError::failure(format!(
            "{}: {errors} error(s) in the capture; first: {}",
            args.capture,
            first_error.unwrap_or_default()
        )));
    }
    Ok(())
}

/// A closed pipe (`zkfle decode x | head`) ends the output quietly.
fn broken_pipe_or(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    CliError::failure(format!("writing output: {e}"))
}

fn open_with_progress(path: &str) -> Result<capture::TcpSegments, CliError> {
    let open_err = |e: capture::CaptureError| CliError::failure(format!("{path}: {e}"));
    if path == "-" {
        return capture::open(path).map_err(open_err);
    }
    let file = std::fs::File::open(path).map_err(|e| CliError::failure(format!("{path}: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    // A progress bar only for people watching a large file.
    if std::io::stderr().is_terminal() && len > 64 << 20 {
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        return capture::TcpSegments::from_reader(bar.wrap_read(file)).map_err(open_err);
    }
    capture::TcpSegments::from_reader(file).map_err(open_err)
}

fn sid(s: Option<i64>) -> String {
    s.map_or_else(|| "?".to_string(), |s| s.to_string())
}

/// One timeline line, in the words ZooKeeper's own logs use.
pub fn record_text(r: &Record, t0: f64) -> String {
    let addrs = match (r.src, r.dst) {
        (Some(s), Some(d)) => format!("{s} -> {d}"),
        _ => "-".to_string(),
    };
    let what = match &r.body {
        Body::Initial(m) => format!(
            "initial message: protocol {}, sid {}{}",
            m.protocol
                .code()
                .map_or_else(|| "legacy".to_string(), |c| c.to_string()),
            m.sid,
            if m.address_text.is_empty() {
                String::new()
            } else {
                format!(", address {}", m.address_text)
            }
        ),
        Body::Notification(n) => notification_words(n),
        Body::Problem(p) => format!(
            "{}: {}",
            match p.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            p.message
        ),
    };
    format!(
        "{:>+12.6}  {:<44} {:>3} -> {:<3} {}",
        r.time.as_secs_f64() - t0,
        addrs,
        sid(r.from_sid),
        sid(r.to_sid),
        what
    )
}

/// A notification as ZooKeeper 3.5+ logs it on receipt (`Notification: ...`).
pub fn notification_words(n: &Notification) -> String {
    let mut s = format!(
        "Notification: n.state:{}, n.leader:{}, n.round:{:#x}, n.peerEpoch:{:#x}, n.zxid:{:#x}",
        n.state.name(),
        n.leader,
        n.election_epoch,
        n.effective_peer_epoch(),
        n.zxid
    );
    if let crate::wire::JavaView::Accepted { version, .. } = n.java_view() {
        s.push_str(&format!(", message format version:{version:#x}"));
    }
    match n.config_version() {
        Some(v) => s.push_str(&format!(", n.config version:{v:#x}")),
        None => s.push_str(&format!(" ({} bytes, no config)", n.size())),
    }
    if let crate::wire::JavaView::Dropped(why) = n.java_view() {
        s.push_str(&format!("  [{why}]"));
    }
    s
}
