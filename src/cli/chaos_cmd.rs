//! `zkfle chaos`: conformance campaigns against ZooKeeper ensembles; `chaos check` checks a
//! recorded history on its own (docs/chaos.md).

use std::io::{BufReader, IsTerminal, Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};

use super::CliError;
use crate::capture::reader::Compression;
use crate::chaos::{campaign, check, history, linearizable::Budget, workload};

#[derive(Debug, Subcommand)]
pub enum ChaosCommand {
    /// Run a recorded workload against a live ensemble (faults are yours to inject meanwhile),
    /// read every server at the end, and check the history.
    Run(RunArgs),
    /// Run seeded fault schedules on a Docker ensemble of its own (3-7 voters, Java and
    /// zkfle), each with the recorded workload, healed, read at every server and checked.
    Campaign(CampaignArgs),
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

#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// Voters (3-7), all of `--version` but the last `--zkfle-voters`.
    #[arg(long, default_value_t = 3)]
    pub voters: usize,
    /// The Java servers' ZooKeeper version: image zkfle/zookeeper:VERSION
    /// (scripts/docker/build-images.sh builds them; nothing is pulled).
    #[arg(long, default_value = "3.9.5")]
    pub version: String,
    /// How many of the voters are `zkfle join` (zkfle/zkfle:latest); they vote and follow
    /// but serve no clients.
    #[arg(long = "zkfle-voters", default_value_t = 0)]
    pub zkfle_voters: usize,
    /// Every voter's image, comma-separated, instead of --voters/--version/--zkfle-voters
    /// (any image with the official zookeeper image's interface; zkfle/zkfle:* runs zkfle).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["voters", "zkfle_voters", "version"])]
    pub images: Vec<String>,
    /// Run this compose file's services as the ensemble instead (3-7 voters, each with
    /// ZOO_MY_ID; zkfle/zkfle:* images or `zkfle join` commands are zkfle voters), as its own
    /// project: taken down with the volumes it made at the end. Its timing is its own
    /// (--tick is not used); wipes touch only volumes the project made.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["images", "voters", "zkfle_voters", "version", "tick"])]
    pub compose: Option<PathBuf>,
    /// Schedules to run.
    #[arg(long, default_value_t = 10)]
    pub schedules: u64,
    /// Schedule i runs seed SEED+i; the same seed replays the same fault plan (default: from
    /// the clock, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The faults: `random` (one to three drawn from the seed) or `disk-loss` (the composed
    /// schedule that loses writes; needs --destructive).
    #[arg(long, value_enum, default_value_t = PlanArg::Random)]
    pub plan: PlanArg,
    /// Allow faults that wipe a voter's data directory (only directories the campaign made).
    #[arg(long)]
    pub destructive: bool,
    /// Seconds of workload per schedule; the faults fall within it.
    #[arg(long, default_value_t = 20.0)]
    pub window: f64,
    /// Concurrent client sessions.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Znodes worked on.
    #[arg(long, default_value_t = 3)]
    pub keys: usize,
    /// tickTime of the ensemble, ms (initLimit 10, syncLimit 5 ticks).
    #[arg(long, default_value_t = 500)]
    pub tick: u32,
    /// Seconds the ensemble may take to be whole again after a heal.
    #[arg(long, default_value_t = 30.0)]
    pub recovery: f64,
    /// Where the campaign writes: campaign.jsonl, and a directory per failing schedule
    /// (default zkfle-campaign-SEED).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Keep every schedule's directory, not only the failing ones'.
    #[arg(long = "keep-all")]
    pub keep_all: bool,
    /// Replays of an invalid schedule: it is confirmed when it fails again in some of them,
    /// and each smaller plan tried while shrinking gets as many (0: neither).
    #[arg(long, default_value_t = 2)]
    pub replays: u32,
    /// Do not shrink an invalid schedule to the fewest faults that still fail.
    #[arg(long = "no-shrink")]
    pub no_shrink: bool,
    /// Print each schedule's fault plan and stop: no Docker, nothing run.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Output format of the campaign's report.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Configurations the linearizability search may remember per key before it gives up.
    #[arg(long, default_value_t = Budget::default().configurations)]
    pub budget: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanArg {
    Random,
    DiskLoss,
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
        ChaosCommand::Campaign(args) => run_campaign(args),
    }
}

fn run_campaign(args: CampaignArgs) -> Result<(), CliError> {
    let images: Vec<String> = if let Some(file) = &args.compose {
        if args.dry_run {
            return Err(CliError::input(
                "--dry-run needs the voters before anything runs: give --images or --voters, not --compose",
            ));
        }
        if !file.is_file() {
            return Err(CliError::input(format!(
                "--compose {}: no such file",
                file.display()
            )));
        }
        Vec::new()
    } else if args.images.is_empty() {
        if args.zkfle_voters >= args.voters {
            return Err(CliError::input(
                "--zkfle-voters must leave at least one Java server (zkfle serves no clients)",
            ));
        }
        (0..args.voters)
            .map(|i| {
                if i >= args.voters - args.zkfle_voters {
                    "zkfle/zkfle:latest".to_string()
                } else {
                    format!("zkfle/zookeeper:{}", args.version)
                }
            })
            .collect()
    } else {
        args.images.clone()
    };
    if args.compose.is_none() && !(3..=7).contains(&images.len()) {
        return Err(CliError::input(format!(
            "{} voters: a campaign runs 3 to 7",
            images.len()
        )));
    }
    if args.compose.is_none()
        && images
            .iter()
            .all(|i| crate::chaos::docker::is_zkfle_image(i))
    {
        return Err(CliError::input(
            "every voter is zkfle: at least one Java server must serve the clients",
        ));
    }
    if args.plan == PlanArg::DiskLoss && !args.destructive {
        return Err(CliError::input(
            "--plan disk-loss wipes a voter's data: give --destructive to allow it",
        ));
    }
    if args.schedules == 0 || !(1..=workload::MAX_CLIENTS).contains(&args.clients) {
        return Err(CliError::input(format!(
            "--schedules must be at least 1 and --clients 1 to {}",
            workload::MAX_CLIENTS
        )));
    }
    if !(1..=workload::MAX_KEYS).contains(&args.keys) || args.budget == 0 || args.tick < 10 {
        return Err(CliError::input(format!(
            "--keys must be 1 to {}, --budget at least 1, --tick at least 10 ms",
            workload::MAX_KEYS
        )));
    }
    seconds("--window", args.window)?;
    let recovery = seconds("--recovery", args.recovery)?;
    let plan_kind = match args.plan {
        PlanArg::Random => campaign::PlanKind::Random,
        PlanArg::DiskLoss => campaign::PlanKind::DiskLoss,
    };
    if args.dry_run {
        let seed = args.seed.unwrap_or(0);
        let zkfles = images
            .iter()
            .filter(|i| crate::chaos::docker::is_zkfle_image(i))
            .count();
        let mut text = String::new();
        for i in 0..args.schedules {
            let s = seed.wrapping_add(i);
            let plan = campaign::plan_for(
                plan_kind,
                s,
                images.len(),
                zkfles,
                args.window,
                args.destructive,
            );
            text.push_str(&format!("schedule {i} (seed {s}):\n"));
            for step in &plan.steps {
                text.push_str(&format!("  {}\n", step.describe()));
            }
        }
        return print(&text);
    }
    let mut missing: Vec<&String> = images
        .iter()
        .filter(|i| !crate::chaos::docker::image_exists(i))
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        return Err(CliError::failure(format!(
            "no image {} here (nothing is pulled): scripts/docker/build-images.sh builds zkfle's \
             (ZKFLE_DOCKER_VERSIONS picks the ZooKeeper versions), or load your own",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let seed = args.seed.unwrap_or_else(clock_seed);
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("zkfle-campaign-{seed}")));
    let dir = std::path::absolute(&dir)
        .map_err(|e| CliError::failure(format!("{}: {e}", dir.display())))?;
    let opts = campaign::CampaignOptions {
        spec: crate::chaos::docker::EnsembleSpec {
            images: images.clone(),
            tick_ms: args.tick,
            init_limit: 10,
            sync_limit: 5,
            dir: dir.clone(),
            compose: args.compose.clone(),
        },
        schedules: args.schedules,
        seed,
        plan: plan_kind,
        window: args.window,
        clients: args.clients,
        keys: args.keys,
        destructive: args.destructive,
        recovery,
        budget: Budget {
            configurations: args.budget,
        },
        keep_all: args.keep_all,
        replays: args.replays.min(10),
        shrink: !args.no_shrink,
    };
    match &args.compose {
        None => eprintln!(
            "zkfle chaos campaign: seed {seed}, {} schedules of {:.0} s on {} (tickTime {} ms, initLimit 10, syncLimit 5); writing {}",
            args.schedules,
            args.window,
            images.join(", "),
            args.tick,
            dir.display()
        ),
        Some(file) => eprintln!(
            "zkfle chaos campaign: seed {seed}, {} schedules of {:.0} s on the services of {}; writing {}",
            args.schedules,
            args.window,
            file.display(),
            dir.display()
        ),
    }
    if !campaign::tcpdump_available() {
        eprintln!(
            "zkfle chaos campaign: warning: no tcpdump here: elections will not be checked (one leader per epoch, failover times); install tcpdump for them"
        );
    }
    let started = Instant::now();
    let mut c = campaign::Campaign::start(opts)
        .map_err(|e| CliError::failure(format!("chaos campaign: {e}")))?;
    let (tick, init_limit, sync_limit) = c.ensemble.timing;
    let images: Vec<String> = c.ensemble.voters.iter().map(|v| v.image.clone()).collect();
    if args.compose.is_some() {
        let voters: Vec<String> = c
            .ensemble
            .voters
            .iter()
            .map(|v| {
                format!(
                    "z{} {} ({}{})",
                    v.sid,
                    v.container,
                    v.image,
                    if v.zkfle { ", zkfle" } else { "" }
                )
            })
            .collect();
        eprintln!(
            "voters: {}; tickTime {tick} ms, initLimit {init_limit}, syncLimit {sync_limit}; bridge {}",
            voters.join(", "),
            c.ensemble.bridge
        );
    }
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(args.schedules);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} schedules, eta {eta} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let mut results = Vec::new();
    for i in 0..args.schedules {
        let r = c.run_schedule(i);
        let line = format!(
            "schedule {i} (seed {}): {}{}, {} operations, {} unknown, writes stalled {:.1} s at most, {}",
            r.seed,
            r.verdict,
            r.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            r.stats.operations,
            r.stats.unknown,
            r.write_gap.unwrap_or(0.0),
            match r.recovered_in {
                Some(s) => format!("whole again {s:.1} s after the heal"),
                None => "NOT whole again within the recovery bound".into(),
            }
        );
        let known: Vec<String> = r
            .known_bugs
            .iter()
            .map(|(server, k)| format!("{} on {server}", k.name))
            .collect();
        let line = if r.flagged() {
            format!(
                "{line}; FLAGGED: the digest check failed on {}",
                r.digest_failed_on().join(", ")
            )
        } else {
            line
        };
        let line = if known.is_empty() {
            line
        } else {
            format!("{line}; servers logged: {}", known.join(", "))
        };
        match &bar {
            Some(b) => {
                b.set_message(format!("last: {}", r.verdict));
                b.inc(1);
                if r.failed() || r.flagged() || !known.is_empty() {
                    b.println(&line);
                }
            }
            None => eprintln!("{line}"),
        }
        results.push(r);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    drop(c);
    let count = |v: &str| results.iter().filter(|r| r.verdict == v).count();
    let stuck = results.iter().filter(|r| r.recovered_in.is_none()).count();
    let failing: Vec<&campaign::ScheduleResult> = results.iter().filter(|r| r.failed()).collect();
    // Failing, or flagged by a server's digest check: listed with their evidence.
    let listed: Vec<&campaign::ScheduleResult> = results
        .iter()
        .filter(|r| r.failed() || r.flagged())
        .collect();
    let flagged = results.iter().filter(|r| r.flagged()).count();
    // Known bugs the servers logged: in how many schedules each.
    let mut known: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in &results {
        let mut names: Vec<&str> = r.known_bugs.iter().map(|(_, k)| k.name).collect();
        names.sort_unstable();
        names.dedup();
        for n in names {
            *known.entry(n).or_default() += 1;
        }
    }
    let known_text: String = known
        .iter()
        .map(|(n, k)| {
            format!(
                "; {n} logged in {k} schedule{}",
                if *k == 1 { "" } else { "s" }
            )
        })
        .collect();
    let checked: Vec<&crate::chaos::safety::ElectionCheck> =
        results.iter().filter_map(|r| r.election.as_ref()).collect();
    let elections_text = if checked.is_empty() {
        "elections not checked (no capture)".to_string()
    } else {
        let elections: usize = checked.iter().map(|e| e.elections.len()).sum();
        let two_leaders: usize = checked.iter().map(|e| e.violations.len()).sum();
        format!(
            "{elections} elections captured in {} schedules, {two_leaders} epochs with two leaders",
            checked.len()
        )
    };
    let summary = format!(
        "campaign seed {seed}: {} schedules in {:.0} s: {} valid, {} invalid, {} unknown, {} errors; {} not whole again after the heal; {flagged} with a server's digest check failing{known_text}; {elections_text}; {}",
        results.len(),
        started.elapsed().as_secs_f64(),
        count("valid"),
        count("invalid"),
        count("unknown"),
        count("error"),
        stuck,
        dir.join("campaign.jsonl").display()
    );
    let text = match args.format {
        Format::Json => format!(
            "{}\n",
            serde_json::json!({
                "seed": seed,
                "images": images,
                "tick_ms": tick,
                "init_limit": init_limit,
                "sync_limit": sync_limit,
                "window": args.window,
                "schedules": results.len(),
                "valid": count("valid"),
                "invalid": count("invalid"),
                "unknown": count("unknown"),
                "errors": count("error"),
                "not_recovered": stuck,
                "digest_flagged": flagged,
                "known_bugs": known,
                "seconds": started.elapsed().as_secs_f64().round(),
                "dir": dir,
                "failing": failing.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
                "flagged": listed
                    .iter()
                    .filter(|r| !r.failed())
                    .map(|r| r.to_json())
                    .collect::<Vec<_>>(),
            })
        ),
        Format::Text => {
            let mut t = String::new();
            for r in &listed {
                t.push_str(&format!(
                    "schedule {} (seed {}): {}{}; replay: zkfle chaos campaign --seed {} --schedules 1 ...; evidence in {}\n",
                    r.index,
                    r.seed,
                    r.verdict,
                    if r.flagged() { ", flagged: a server's digest check failed" } else { "" },
                    r.seed,
                    r.dir.display()
                ));
                for step in &r.plan.steps {
                    t.push_str(&format!("  plan    {}\n", step.describe()));
                }
                for a in &r.actions {
                    t.push_str(&format!("  did   {a}\n"));
                }
                if let Some((k, n)) = r.confirmed {
                    t.push_str(&format!("  failed again in {k} of {n} replays\n"));
                }
                match &r.shrunk {
                    Some(p) => {
                        t.push_str(&format!(
                            "  shrunk to {} of {} faults ({} smaller plans tried; evidence in {}):\n",
                            p.steps.len(),
                            r.plan.steps.len(),
                            r.shrink_tries,
                            r.shrunk_dir.as_deref().map(|d| d.display().to_string()).unwrap_or_default()
                        ));
                        for step in &p.steps {
                            t.push_str(&format!("  plan    {}\n", step.describe()));
                        }
                    }
                    None if r.shrink_tries > 0 => t.push_str(&format!(
                        "  no smaller plan failed ({} tried)\n",
                        r.shrink_tries
                    )),
                    None => {}
                }
                if let Some(e) = &r.election {
                    for v in &e.violations {
                        t.push_str(&format!("  TWO LEADERS: {v}\n"));
                    }
                }
                for m in &r.digest_mismatches {
                    t.push_str(&format!("  DIGEST MISMATCH: {m}\n"));
                }
                for (server, k) in &r.known_bugs {
                    t.push_str(&format!(
                        "  known: {} on {server} ({} lines): {}\n    first: {}\n",
                        k.name, k.count, k.what, k.line
                    ));
                }
                if let Some(e) = &r.error {
                    t.push_str(&format!("  error: {e}\n"));
                }
            }
            t.push_str(&summary);
            t.push('\n');
            t
        }
    };
    print(&text)?;
    if failing.is_empty() {
        Ok(())
    } else {
        Err(CliError::failure(format!(
            "chaos campaign: {} of {} schedules failed",
            failing.len(),
            results.len()
        )))
    }
}

/// A seed from the clock, for runs not given one (printed, so they can be replayed).
fn clock_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    now.as_nanos() as u64 % 1_000_000_000
}

/// Writes `text` to stdout whole (a closed pipe ends quietly).
fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::writing)
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
    let seed = args.seed.unwrap_or_else(clock_seed);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
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
    workload::prepare(&opts, Duration::from_secs(10))
        .map_err(|e| CliError::failure(format!("creating {}: {e}", opts.root)))?;
    let stats =
        workload::run(&opts, &recorder).map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    // The final reads wait for servers still recovering from the faults, each read once.
    let unread = workload::final_reads(&opts, &recorder, final_timeout);
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
    print(&text)?;
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
