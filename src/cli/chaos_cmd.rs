//! `zkfle chaos`: conformance campaigns against ZooKeeper ensembles; `chaos check` checks a
//! recorded history on its own (docs/chaos.md).

use std::io::{BufReader, Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};

use super::CliError;
use crate::capture::reader::Compression;
use crate::chaos::{check, history, linearizable::Budget, workload};

#[derive(Debug, Subcommand)]
pub enum ChaosCommand {
    /// Run a recorded workload against a live ensemble (faults are yours to inject meanwhile),
    /// read every server at the end, and check the history.
    Run(RunArgs),
    /// Check a history: linearizable writes, sessions in order, sync reads, no acknowledged
    /// write lost, replicas that agree. Exit 0 valid, 1 invalid or not known.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The history: zkfle's JSON lines or Jepsen's cas-register log, plain, gzip or zstd;
    /// `-` reads stdin.
    #[arg(value_name = "HISTORY")]
    pub history: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Configurations the linearizability search may remember per key before it gives up.
    #[arg(long, default_value_t = Budget::default().configurations)]
    pub budget: u64,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The servers' client ports, `HOST:PORT` (repeatable, or comma-separated).
    #[arg(long = "server", value_name = "HOST:PORT", required = true, value_delimiter = ',',
          value_parser = super::host_port)]
    pub servers: Vec<String>,
    /// Concurrent client sessions.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Znodes worked on.
    #[arg(long, default_value_t = 3)]
    pub keys: usize,
    /// Seconds the workload runs.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// The seed of the clients' choices (default: from the clock; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Seconds an operation may take before its outcome is unknown.
    #[arg(long, default_value_t = 3.0)]
    pub timeout: f64,
    /// The session timeout asked of the servers, in seconds.
    #[arg(long = "session-timeout", default_value_t = 10.0)]
    pub session_timeout: f64,
    /// Seconds to keep trying the final reads of servers that do not answer yet (recovering
    /// from the faults).
    #[arg(long = "final-timeout", default_value_t = 30.0)]
    pub final_timeout: f64,
    /// The parent znode of the keys (default /zkfle-chaos/SEED-UNIXTIME; created if missing).
    #[arg(long)]
    pub root: Option<String>,
    /// Where the history is written (default zkfle-chaos-SEED.jsonl).
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Configurations the linearizability search may remember per key before it gives up.
    #[arg(long, default_value_t = Budget::default().configurations)]
    pub budget: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(cmd: ChaosCommand) -> Result<(), CliError> {
    match cmd {
        ChaosCommand::Check(args) => run_check(args),
        ChaosCommand::Run(args) => run_workload(args),
    }
}

fn seconds(name: &str, value: f64) -> Result<Duration, CliError> {
    if value > 0.0 && value.is_finite() && value <= 86_400.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(CliError::input(format!(
            "{name} must be a positive number of seconds (at most a day)"
        )))
    }
}

fn run_workload(args: RunArgs) -> Result<(), CliError> {
    if !(1..=workload::MAX_CLIENTS).contains(&args.clients) {
        return Err(CliError::input(format!(
            "--clients must be 1 to {}",
            workload::MAX_CLIENTS
        )));
    }
    if !(1..=workload::MAX_KEYS).contains(&args.keys) {
        return Err(CliError::input(format!(
            "--keys must be 1 to {}",
            workload::MAX_KEYS
        )));
    }
    if args.budget == 0 {
        return Err(CliError::input("--budget must be at least 1"));
    }
    let duration = seconds("--duration", args.duration)?;
    let op_timeout = seconds("--timeout", args.timeout)?;
    let session = seconds("--session-timeout", args.session_timeout)?;
    let final_timeout = seconds("--final-timeout", args.final_timeout)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seed = args.seed.unwrap_or(now.as_nanos() as u64 % 1_000_000_000);
    let root = args
        .root
        .unwrap_or_else(|| format!("/zkfle-chaos/{seed}-{}", now.as_secs()));
    if !root.starts_with('/') || root.ends_with('/') || root.contains("//") {
        return Err(CliError::input(format!(
            "--root {root:?} is not a znode path (/a/b)"
        )));
    }
    let mut servers = Vec::new();
    for s in &args.servers {
        let addr = s
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| CliError::failure(format!("--server {s}: does not resolve")))?;
        servers.push(addr);
    }
    let opts = workload::WorkloadOptions {
        servers,
        clients: args.clients,
        keys: args.keys,
        duration,
        seed,
        op_timeout,
        session_ms: session.as_millis().min(i32::MAX as u128) as i32,
        root,
    };
    let path = args
        .history
        .unwrap_or_else(|| PathBuf::from(format!("zkfle-chaos-{seed}.jsonl")));
    let name = path.display().to_string();
    let file =
        std::fs::File::create(&path).map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    let recorder = workload::Recorder::new(Box::new(std::io::BufWriter::new(file)));
    eprintln!(
        "zkfle chaos run: seed {seed}, {} clients on {} keys under {} for {:.0} s; history in {name}",
        opts.clients,
        opts.keys,
        opts.root,
        duration.as_secs_f64()
    );
    workload::prepare(&opts)
        .map_err(|e| CliError::failure(format!("creating {}: {e}", opts.root)))?;
    let stats =
        workload::run(&opts, &recorder).map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    // The final reads wait for servers still recovering from the faults, each read once.
    let give_up = Instant::now() + final_timeout;
    let mut pending = opts.servers.clone();
    let mut unread = Vec::new();
    while !pending.is_empty() {
        let these = workload::WorkloadOptions {
            servers: pending.clone(),
            ..opts.clone()
        };
        unread = workload::final_reads(&these, &recorder);
        pending = unread.iter().map(|(s, _)| *s).collect();
        if pending.is_empty() || Instant::now() >= give_up {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(recorder);
    for (server, why) in &unread {
        eprintln!("zkfle chaos run: {server} could not be read at the end: {why}");
    }
    eprintln!(
        "zkfle chaos run: {} operations in {} sessions ({} outcomes unknown, {} connections refused)",
        stats.operations, stats.sessions, stats.unknown, stats.refused
    );
    let file = std::fs::File::open(&path).map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    let history = history::read(BufReader::new(file))
        .map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    report(&name, &history, args.format, args.budget)?;
    if unread.is_empty() {
        Ok(())
    } else {
        Err(CliError::failure(format!(
            "chaos run: {} of {} servers could not be read at the end",
            unread.len(),
            opts.servers.len()
        )))
    }
}

fn run_check(args: CheckArgs) -> Result<(), CliError> {
    if args.budget == 0 {
        return Err(CliError::input("--budget must be at least 1"));
    }
    let name = args.history.display().to_string();
    let input: Box<dyn Read + Send> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&args.history)
                .map_err(|e| CliError::failure(format!("{name}: {e}")))?,
        )
    };
    let input = decompressed(input).map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    let history = history::read(BufReader::new(input))
        .map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    report(&name, &history, args.format, args.budget)
}

/// Checks `history` and prints the report; the exit status says the verdict.
fn report(
    name: &str,
    history: &history::History,
    format: Format,
    budget: u64,
) -> Result<(), CliError> {
    if history.ops.is_empty() {
        return Err(CliError::failure(format!(
            "{name}: holds no operations (expected JSON lines or a Jepsen log; docs/chaos.md)"
        )));
    }
    let report = check::check(
        history,
        Budget {
            configurations: budget,
        },
    );
    let text = match format {
        Format::Text => report.to_text(),
        Format::Json => format!("{}\n", report.to_json()),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::writing)?;
    match report.valid() {
        Some(true) => Ok(()),
        Some(false) => Err(CliError::failure(format!("chaos check: {name} is invalid"))),
        None => Err(CliError::failure(format!(
            "chaos check: {name}: linearizability not known (the search gave up)"
        ))),
    }
}

/// `input`, decompressed when its first bytes announce gzip or zstd.
fn decompressed(mut input: Box<dyn Read + Send>) -> std::io::Result<Box<dyn Read + Send>> {
    let mut magic = Vec::with_capacity(4);
    (&mut input).take(4).read_to_end(&mut magic)?;
    let whole = Box::new(std::io::Cursor::new(magic.clone()).chain(input));
    match Compression::of(&magic) {
        Some(c) => c.decoder(whole),
        None => Ok(whole),
    }
}
