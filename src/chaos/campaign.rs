//! A campaign: schedule after schedule on one Docker ensemble, each a seeded fault plan run
//! while the workload records its history, then healed, read at every server and checked.
//! A schedule that fails keeps its directory: the plan, the nemesis's log, the history and
//! every server's output; one that passes keeps only its line in `campaign.jsonl`.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::check::{self, Report};
use super::docker::{DockerEnsemble, EnsembleSpec};
use super::history;
use super::linearizable::Budget;
use super::nemesis::{self, Fault, Plan, Target};
use super::safety::{self, ElectionCheck};
use super::server_logs;
use super::workload::{self, Recorder, WorkloadOptions, WorkloadStats};
use crate::wire::ServerState;

/// Which plans the schedules run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// One to three faults drawn from each schedule's seed.
    Random,
    /// The composed disk-loss schedule ([`nemesis::disk_loss`]).
    DiskLoss,
}

/// The plan a schedule of `seed` runs.
pub fn plan_for(
    kind: PlanKind,
    seed: u64,
    voters: usize,
    zkfle_voters: usize,
    window: f64,
    destructive: bool,
) -> Plan {
    match kind {
        PlanKind::Random => nemesis::plan(seed, voters, zkfle_voters, window, destructive),
        PlanKind::DiskLoss => nemesis::disk_loss(seed, window),
    }
}

#[derive(Debug, Clone)]
pub struct CampaignOptions {
    pub spec: EnsembleSpec,
    pub schedules: u64,
    /// Schedule `i` runs seed `seed + i`.
    pub seed: u64,
    pub plan: PlanKind,
    /// Seconds of workload per schedule; the faults fall within it.
    pub window: f64,
    pub clients: usize,
    pub keys: usize,
    pub destructive: bool,
    /// How long the ensemble may take to be whole again after a heal.
    pub recovery: Duration,
    pub budget: Budget,
    /// Keep every schedule's directory, not only the failing ones'.
    pub keep_all: bool,
    /// Replays of an invalid schedule, to confirm it (and per smaller plan when shrinking).
    pub replays: u32,
    pub shrink: bool,
}

/// One schedule's outcome.
#[derive(Debug)]
pub struct ScheduleResult {
    pub index: u64,
    pub seed: u64,
    pub plan: Plan,
    /// `valid`, `invalid`, `unknown` (the search gave up), or `error` (the schedule could not
    /// run: see `error`).
    pub verdict: &'static str,
    pub report: Option<Report>,
    pub error: Option<String>,
    pub stats: WorkloadStats,
    /// Seconds from the heal until every voter followed one leader; `None`: not within the
    /// recovery bound (a liveness finding, reported beside the verdict).
    pub recovered_in: Option<f64>,
    /// Servers that could not be read at the end.
    pub unread: Vec<String>,
    /// Log lines in which a server's own digest check found its tree disagreeing with a txn's
    /// digest during the schedule (`zN: line`): a replica's tree passed through a state the
    /// leader's never had. Reported beside the verdict: ZooKeeper promises replicas that agree
    /// when they serve, which the final reads check, and a replica replaying txns its tree
    /// already holds (a fuzzy snapshot, a doubled log) mismatches until it has caught up.
    pub digest_mismatches: Vec<String>,
    /// Known Java bugs whose signature a server logged during the schedule (`zN`, the bug).
    pub known_bugs: Vec<(String, server_logs::KnownBug)>,
    /// The longest time, in seconds of the history, in which no write was acknowledged: how
    /// long the clients could not write.
    pub write_gap: Option<f64>,
    pub seconds: f64,
    pub dir: PathBuf,
    /// The nemesis's actions with their times.
    pub actions: Vec<String>,
    /// One leader per epoch and the elections, from the bridge's capture (`None`: no
    /// tcpdump, or the capture could not be read: see `capture_error`).
    pub election: Option<ElectionCheck>,
    pub capture_error: Option<String>,
    /// An invalid schedule replayed: in how many of how many replays it failed again.
    pub confirmed: Option<(u32, u32)>,
    /// The fewest faults of the plan that still failed, when fewer than the plan's.
    pub shrunk: Option<Plan>,
    /// Where the smallest failing run's evidence is.
    pub shrunk_dir: Option<PathBuf>,
    /// Runs of smaller plans tried.
    pub shrink_tries: u32,
}

impl ScheduleResult {
    /// A server's own digest check failed: a finding beside the verdict, kept with its
    /// evidence.
    pub fn flagged(&self) -> bool {
        !self.digest_mismatches.is_empty()
    }

    /// The servers whose digest check failed (`zN`), in order.
    pub fn digest_failed_on(&self) -> Vec<&str> {
        let servers: std::collections::BTreeSet<&str> = self
            .digest_mismatches
            .iter()
            .filter_map(|l| l.split(':').next())
            .collect();
        servers.into_iter().collect()
    }

    /// Not valid, or not whole again after the heal: the campaign fails.
    pub fn failed(&self) -> bool {
        self.verdict != "valid" || self.recovered_in.is_none()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "schedule": self.index,
            "seed": self.seed,
            "verdict": self.verdict,
            "faults": steps_json(&self.plan),
            "actions": self.actions,
            "operations": self.stats.operations,
            "unknown": self.stats.unknown,
            "recovered_in": self.recovered_in,
            "unread": self.unread,
            "digest_mismatches": self.digest_mismatches,
            "known_bugs": self.known_bugs.iter().map(|(server, k)| json!({
                "server": server, "jira": k.jira, "name": k.name, "what": k.what, "line": k.line, "count": k.count,
            })).collect::<Vec<_>>(),
            "longest_write_gap": self.write_gap.map(|g| (g * 1000.0).round() / 1000.0),
            "seconds": (self.seconds * 10.0).round() / 10.0,
            "error": self.error,
            "dir": self.dir,
            "report": self.report.as_ref().map(|r| r.to_json()),
            "election": self.election.as_ref().map(|e| e.to_json()),
            "confirmed": self.confirmed.map(|(k, n)| json!({"failed_again": k, "replays": n})),
            "shrunk": self.shrunk.as_ref().map(steps_json),
            "shrunk_dir": self.shrunk_dir,
            "shrink_tries": self.shrink_tries,
            "capture_error": self.capture_error,
        })
    }
}

/// A plan's faults as JSON.
fn steps_json(plan: &Plan) -> Value {
    plan.steps
        .iter()
        .map(|s| {
            json!({
                "at": s.at, "heal_at": s.heal_at, "kind": s.fault.kind(), "text": s.fault.describe(),
            })
        })
        .collect()
}

/// The running campaign: its ensemble and where it writes.
pub struct Campaign {
    pub opts: CampaignOptions,
    pub ensemble: DockerEnsemble,
    out: std::fs::File,
    /// Runs so far, replays included: each works under a root of its own.
    runs: std::sync::atomic::AtomicU64,
}

impl Campaign {
    /// Starts the ensemble and waits for it to elect.
    pub fn start(opts: CampaignOptions) -> Result<Campaign, String> {
        std::fs::create_dir_all(&opts.spec.dir)
            .map_err(|e| format!("{}: {e}", opts.spec.dir.display()))?;
        let path = opts.spec.dir.join("campaign.jsonl");
        let out = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        super::docker::remove_on_signal();
        let ensemble = DockerEnsemble::start(&opts.spec)?;
        ensemble.wait_stable(Duration::from_secs(90))?;
        Ok(Campaign {
            opts,
            ensemble,
            out,
            runs: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Runs schedule `index` and records its line in `campaign.jsonl`. A schedule found
    /// invalid is replayed `replays` times to confirm it, then shrunk: faults are dropped one
    /// at a time while the rest still fails in one of `replays` runs (at least one run).
    pub fn run_schedule(&mut self, index: u64) -> ScheduleResult {
        let seed = self.opts.seed.wrapping_add(index);
        let plan = plan_for(
            self.opts.plan,
            seed,
            self.ensemble.voters.len(),
            self.ensemble.faultable().len(),
            self.opts.window,
            self.opts.destructive,
        );
        let dir = self.opts.spec.dir.join(format!("schedule-{index:03}"));
        let mut result = self.attempt(index, seed, plan, &dir);
        if result.verdict == "invalid" && self.opts.replays > 0 {
            let mut recurred = 0;
            for r in 0..self.opts.replays {
                let again = self.attempt(
                    index,
                    seed,
                    result.plan.clone(),
                    &dir.join(format!("replay-{r}")),
                );
                recurred += u32::from(again.verdict == "invalid");
                self.discard(&again);
            }
            result.confirmed = Some((recurred, self.opts.replays));
            if self.opts.shrink {
                self.shrink(&mut result);
            }
        }
        if result.failed() || result.flagged() {
            self.save_evidence(&dir, &result);
        } else if !self.opts.keep_all {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = writeln!(self.out, "{}", result.to_json());
        let _ = self.out.flush();
        result
    }

    /// Drops faults from `result`'s plan while what is left still fails; the smallest failing
    /// run keeps its evidence in `shrunk-N` beside the schedule's.
    fn shrink(&mut self, result: &mut ScheduleResult) {
        let mut smallest = result.plan.clone();
        let mut tries = 0;
        loop {
            let mut reduced = false;
            for i in 0..smallest.steps.len() {
                let mut candidate = smallest.clone();
                candidate.steps.remove(i);
                tries += 1;
                let dir = result.dir.join(format!("shrunk-{tries}"));
                let mut failing = None;
                for _ in 0..self.opts.replays.max(1) {
                    let run = self.attempt(result.index, result.seed, candidate.clone(), &dir);
                    if run.verdict == "invalid" {
                        failing = Some(run);
                        break;
                    }
                    self.discard(&run);
                }
                if let Some(run) = failing {
                    self.save_evidence(&dir, &run);
                    if let Some(previous) = &result.shrunk_dir {
                        let _ = std::fs::remove_dir_all(previous);
                    }
                    result.shrunk_dir = Some(dir);
                    smallest = candidate;
                    reduced = true;
                    break;
                }
            }
            if !reduced {
                break;
            }
        }
        result.shrink_tries = tries;
        if smallest.steps.len() < result.plan.steps.len() {
            result.shrunk = Some(smallest);
        }
    }

    /// Removes a run's directory unless every run is kept.
    fn discard(&self, run: &ScheduleResult) {
        if !self.opts.keep_all {
            let _ = std::fs::remove_dir_all(&run.dir);
        }
    }

    /// One run of `plan`, its files in `dir`.
    fn attempt(&self, index: u64, seed: u64, plan: Plan, dir: &std::path::Path) -> ScheduleResult {
        let started = Instant::now();
        let mut result = ScheduleResult {
            index,
            seed,
            plan: plan.clone(),
            verdict: "error",
            report: None,
            error: None,
            stats: WorkloadStats::default(),
            recovered_in: None,
            unread: Vec::new(),
            digest_mismatches: Vec::new(),
            known_bugs: Vec::new(),
            write_gap: None,
            seconds: 0.0,
            dir: dir.to_path_buf(),
            actions: Vec::new(),
            election: None,
            capture_error: None,
            confirmed: None,
            shrunk: None,
            shrunk_dir: None,
            shrink_tries: 0,
        };
        if let Err(e) = self.schedule(&plan, dir, &mut result) {
            result.error = Some(e);
        }
        result.seconds = started.elapsed().as_secs_f64();
        result
    }

    fn schedule(
        &self,
        plan: &Plan,
        dir: &std::path::Path,
        result: &mut ScheduleResult,
    ) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // The servers' logs are read from here (a second early, in Docker's whole seconds):
        // a voter restarted below replays its log, and that is this schedule's to report.
        let logs_since = format!(
            "{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                .saturating_sub(1)
        );
        let e = &self.ensemble;
        let first = match e.wait_stable(self.opts.recovery) {
            Ok(l) => l,
            Err(_) => {
                // Whatever the last schedule left (it was reported there): everything started
                // and healed once more, and a voter still neither leading nor following
                // restarted, so that one stuck member does not fail every schedule after it.
                self.heal_all();
                for (i, state) in e.states().into_iter().enumerate() {
                    if !matches!(
                        state,
                        Some((ServerState::Leading | ServerState::Following, _))
                    ) {
                        let _ = e.kill(i);
                        let _ = e.start_voter(i);
                    }
                }
                e.wait_stable(self.opts.recovery).map_err(|why| {
                    format!("the ensemble is not whole before the schedule: {why}")
                })?
            }
        };
        // Roles: the leader first, then the others in sid order.
        let mut roles = vec![first];
        roles.extend((0..e.voters.len()).filter(|&i| i != first));
        let wopts = WorkloadOptions {
            servers: e.client_addrs(),
            clients: self.opts.clients,
            keys: self.opts.keys,
            duration: Duration::from_secs_f64(self.opts.window),
            seed: result.seed,
            op_timeout: Duration::from_secs(2),
            session_ms: 10_000,
            // A replay must not find the znodes of the run before it.
            root: format!(
                "/zkfle-chaos/{}-{}-{}",
                self.opts.seed,
                result.index,
                self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        };
        workload::prepare(&wopts, self.opts.recovery)
            .map_err(|e| format!("creating {}: {e}", wopts.root))?;
        let history_path = dir.join("history.jsonl");
        let file = std::fs::File::create(&history_path)
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        let recorder = Recorder::new(Box::new(std::io::BufWriter::new(file)));
        let capture_path = dir.join("capture.pcap");
        let mut capture = Capture::start(&e.bridge, &capture_path);
        let origin = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let start = Instant::now();
        let stats = std::thread::scope(|scope| {
            let load = scope.spawn(|| workload::run(&wopts, &recorder));
            self.play(plan, &roles, start, &mut result.actions);
            load.join()
                .unwrap_or_else(|_| Err("the workload panicked".into()))
        })?;
        result.stats = stats;
        self.heal_all();
        result.actions.push(format!(
            "{:>5.1}s  heal everything",
            start.elapsed().as_secs_f64()
        ));
        let healed = Instant::now();
        if self.ensemble.wait_stable(self.opts.recovery).is_ok() {
            result.recovered_in = Some(healed.elapsed().as_secs_f64());
        }
        // Final reads: each server once it answers, within the recovery bound.
        result.unread = workload::final_reads(&wopts, &recorder, self.opts.recovery)
            .iter()
            .map(|(s, why)| format!("{s}: {why}"))
            .collect();
        // zkfle voters' replicas, from their data directories.
        for (i, v) in e.voters.iter().enumerate().filter(|(_, v)| v.zkfle) {
            let client = std::net::SocketAddr::from((v.ip, 2181));
            let name = format!("{client} (zkfle sid {}, its data directory)", v.sid);
            let read = workload::final_from_data_dir(
                &wopts,
                &recorder,
                &name,
                client,
                || e.data_on_host(i, dir),
                self.opts.recovery,
            );
            if let Err(why) = read {
                result.unread.push(format!("{name}: {why}"));
            }
        }
        drop(recorder);
        // What each server's own log says: its digest check, known Java bugs.
        for (i, v) in e.voters.iter().enumerate() {
            let found = match e.log_since(i, &logs_since) {
                Ok(text) => server_logs::scan(&text),
                Err(why) => {
                    result.unread.push(format!("z{}'s log: {why}", v.sid));
                    continue;
                }
            };
            let server = format!("z{}", v.sid);
            let more = found.digest_lines - found.digest_mismatches.len();
            result.digest_mismatches.extend(
                found
                    .digest_mismatches
                    .iter()
                    .map(|l| format!("{server}: {l}")),
            );
            if more > 0 {
                result
                    .digest_mismatches
                    .push(format!("{server}: {more} more such lines"));
            }
            result
                .known_bugs
                .extend(found.known_bugs.into_iter().map(|k| (server.clone(), k)));
        }
        match capture.as_mut().map(Capture::stop) {
            Some(Ok(())) => {
                match safety::check_capture(&capture_path, &self.ensemble.config(), origin) {
                    Ok(c) => result.election = Some(c),
                    Err(why) => result.capture_error = Some(why),
                }
            }
            Some(Err(why)) => result.capture_error = Some(why),
            None => result.capture_error = Some("no tcpdump here: elections not checked".into()),
        }
        let file = std::fs::File::open(&history_path)
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        let h = history::read(std::io::BufReader::new(file))
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        result.write_gap = longest_write_gap(&h, self.opts.window);
        let report = check::check(&h, self.opts.budget);
        let two_leaders = result
            .election
            .as_ref()
            .is_some_and(|c| !c.violations.is_empty());
        result.verdict = match report.valid() {
            _ if two_leaders => "invalid",
            Some(true) if result.unread.is_empty() => "valid",
            Some(true) => "unknown",
            Some(false) => "invalid",
            None => "unknown",
        };
        result.report = Some(report);
        Ok(())
    }

    /// Runs the plan's faults and heals at their times (a fault that cannot be applied is
    /// logged and skipped: a server already down cannot be paused).
    fn play(&self, plan: &Plan, roles: &[usize], start: Instant, log: &mut Vec<String>) {
        let e = &self.ensemble;
        let n = e.voters.len();
        // (time, step, is_heal), in time order; a heal before a start at the same time.
        let mut events: Vec<(f64, usize, bool)> = plan
            .steps
            .iter()
            .enumerate()
            .flat_map(|(i, s)| [(s.at, i, false), (s.heal_at, i, true)])
            .collect();
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.2.cmp(&a.2)));
        // What each started step did to whom.
        let mut hit: Vec<Option<usize>> = vec![None; plan.steps.len()];
        let mut cuts: Vec<Option<Vec<(usize, usize)>>> = vec![None; plan.steps.len()];
        for (at, i, heal) in events {
            let wait = at - start.elapsed().as_secs_f64();
            if wait > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(wait));
            }
            let step = &plan.steps[i];
            let t = start.elapsed().as_secs_f64();
            let resolve = |target: Target| match target {
                Target::Role(r) => roles[r % n],
                Target::Leader => e.leader().unwrap_or(roles[0]),
            };
            let name = |v: usize| format!("z{}", e.voters[v].sid);
            let done: Result<String, String> = if !heal {
                match &step.fault {
                    Fault::Kill(target) => {
                        let v = resolve(*target);
                        hit[i] = Some(v);
                        e.kill(v).map(|()| format!("kill -9 {}", name(v)))
                    }
                    Fault::Pause(target) => {
                        let v = resolve(*target);
                        hit[i] = Some(v);
                        e.pause(v).map(|()| format!("pause {}", name(v)))
                    }
                    Fault::Isolate(target) => {
                        let v = resolve(*target);
                        let pairs: Vec<(usize, usize)> =
                            (0..n).filter(|&o| o != v).map(|o| (v, o)).collect();
                        cuts[i] = Some(pairs);
                        self.apply_cuts(&cuts)
                            .map(|()| format!("isolate {}", name(v)))
                    }
                    Fault::Split(side) => {
                        let side: Vec<usize> = side.iter().map(|&r| roles[r % n]).collect();
                        let pairs = side
                            .iter()
                            .flat_map(|&a| {
                                (0..n).filter(|b| !side.contains(b)).map(move |b| (a, b))
                            })
                            .collect();
                        cuts[i] = Some(pairs);
                        let names: Vec<String> = side.iter().map(|&v| name(v)).collect();
                        self.apply_cuts(&cuts)
                            .map(|()| format!("split {} from the rest", names.join(",")))
                    }
                    Fault::Bridge {
                        left,
                        right,
                        bridge,
                    } => {
                        let left: Vec<usize> = left.iter().map(|&r| roles[r % n]).collect();
                        let right: Vec<usize> = right.iter().map(|&r| roles[r % n]).collect();
                        let pairs = left
                            .iter()
                            .flat_map(|&a| right.iter().map(move |&b| (a, b)))
                            .collect();
                        cuts[i] = Some(pairs);
                        self.apply_cuts(&cuts).map(|()| {
                            format!(
                                "bridge {} | {} via {}",
                                left.iter().map(|&v| name(v)).collect::<Vec<_>>().join(","),
                                right.iter().map(|&v| name(v)).collect::<Vec<_>>().join(","),
                                name(roles[*bridge % n])
                            )
                        })
                    }
                    Fault::RollingRestart => {
                        // Each server stopped and started, and given up to 10 s to rejoin
                        // before the next; one that is down already is just started.
                        let mut r = Ok(());
                        for v in 0..n {
                            let _ = e.kill(v);
                            r = r.and(e.start_voter(v));
                            let rejoin = Instant::now() + Duration::from_secs(10);
                            while Instant::now() < rejoin
                                && !matches!(
                                    e.states()[v],
                                    Some((ServerState::Leading | ServerState::Following, _))
                                )
                            {
                                std::thread::sleep(Duration::from_millis(250));
                            }
                        }
                        r.map(|()| "restarted every server in turn".into())
                    }
                    Fault::Wipe(target) => {
                        let v = resolve(*target);
                        e.wipe(v)
                            .map(|()| format!("wiped {} and started it empty", name(v)))
                    }
                    Fault::Member { zkfle, fault } => match e.faultable().get(*zkfle).copied() {
                        Some(v) => {
                            hit[i] = Some(v);
                            e.member_faults(v, Some(fault))
                                .map(|()| format!("{}: {fault}", name(v)))
                        }
                        None => Err(format!("no zkfle voter {zkfle}")),
                    },
                }
            } else {
                match &step.fault {
                    Fault::Kill(_) => hit[i].map_or(Ok(String::new()), |v| {
                        e.start_voter(v).map(|()| format!("start {}", name(v)))
                    }),
                    Fault::Pause(_) => hit[i].map_or(Ok(String::new()), |v| {
                        e.unpause(v).map(|()| format!("unpause {}", name(v)))
                    }),
                    Fault::Isolate(_) | Fault::Split(_) | Fault::Bridge { .. } => {
                        cuts[i] = None;
                        self.apply_cuts(&cuts)
                            .map(|()| "heal that partition".into())
                    }
                    Fault::Member { .. } => hit[i].map_or(Ok(String::new()), |v| {
                        let crashed = !e.is_running(v);
                        e.member_faults(v, None)
                            .and_then(|()| e.start_voter(v))
                            .map(|()| {
                                if crashed {
                                    format!(
                                        "{}: faults off; it had crashed: started again",
                                        name(v)
                                    )
                                } else {
                                    format!("{}: faults off", name(v))
                                }
                            })
                    }),
                    Fault::RollingRestart | Fault::Wipe(_) => Ok(String::new()),
                }
            };
            match done {
                Ok(text) if text.is_empty() => {}
                Ok(text) => log.push(format!("{t:>5.1}s  {text}")),
                Err(why) => log.push(format!("{t:>5.1}s  could not: {why}")),
            }
        }
    }

    /// The network as the partitions still in force make it: every rule flushed, then theirs.
    fn apply_cuts(&self, cuts: &[Option<Vec<(usize, usize)>>]) -> Result<(), String> {
        self.ensemble.heal_network();
        for &(a, b) in cuts.iter().flatten().flatten() {
            self.ensemble.cut(a, b)?;
        }
        Ok(())
    }

    /// Every voter running, unpaused, and reachable.
    fn heal_all(&self) {
        for i in 0..self.ensemble.voters.len() {
            if self.ensemble.voters[i].zkfle {
                let _ = self.ensemble.member_faults(i, None);
            }
            let _ = self.ensemble.start_voter(i);
            let _ = self.ensemble.unpause(i);
        }
        self.ensemble.heal_network();
    }

    /// A failing schedule's evidence beside its history: the plan, what the nemesis did, the
    /// report, and every server's output.
    fn save_evidence(&self, dir: &std::path::Path, result: &ScheduleResult) {
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(
            dir.join("schedule.json"),
            format!("{:#}\n", result.to_json()),
        );
        if let Some(r) = &result.report {
            let _ = std::fs::write(dir.join("report.txt"), r.to_text());
        }
        for (i, v) in self.ensemble.voters.iter().enumerate() {
            let _ = std::fs::write(dir.join(format!("z{}.log", v.sid)), self.ensemble.logs(i));
        }
        if result.verdict == "invalid" || result.flagged() {
            let _ = std::fs::write(dir.join("issue.md"), result.issue_draft(&self.setting()));
        }
    }

    /// What the schedules run on, and the command that runs one again.
    fn setting(&self) -> crate::output::chaos::ScheduleSetting<'_> {
        let o = &self.opts;
        let e = &self.ensemble;
        let ensemble = match &o.spec.compose {
            Some(file) => format!("--compose {}", file.display()),
            None => format!(
                "--images {} --tick {}",
                e.voters
                    .iter()
                    .map(|v| v.image.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                e.timing.0
            ),
        };
        let plan = match o.plan {
            PlanKind::Random => "",
            PlanKind::DiskLoss => " --plan disk-loss",
        };
        crate::output::chaos::ScheduleSetting {
            voters: e
                .voters
                .iter()
                .map(|v| (v.sid, v.image.as_str(), v.zkfle))
                .collect(),
            timing: e.timing,
            clients: o.clients,
            keys: o.keys,
            window: o.window,
            rerun: format!(
                "zkfle chaos campaign {ensemble}{plan}{} --window {} --clients {} --keys {}",
                if o.destructive { " --destructive" } else { "" },
                o.window,
                o.clients,
                o.keys,
            ),
        }
    }
}

/// The longest stretch of the workload's `window` seconds with no write acknowledged (from
/// its start, between acknowledgements, and to its end), from the history's times.
fn longest_write_gap(h: &history::History, window: f64) -> Option<f64> {
    let mut acks: Vec<f64> = h
        .ops
        .iter()
        .filter(|o| o.request.is_write() && matches!(o.outcome, history::Outcome::Ok(_)))
        .filter_map(|o| o.ret_time)
        .collect();
    let start = h.ops.first()?.time?;
    acks.sort_by(f64::total_cmp);
    let mut last = start;
    let mut gap: f64 = 0.0;
    for t in acks.iter().copied().chain([start + window]) {
        gap = gap.max(t - last);
        last = last.max(t);
    }
    Some(gap)
}

/// Whether tcpdump runs here: without it a campaign checks no election.
pub fn tcpdump_available() -> bool {
    std::process::Command::new("tcpdump")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// tcpdump on the campaign's bridge, election and quorum ports, for the schedule.
struct Capture {
    child: std::process::Child,
}

impl Capture {
    /// Starts it, or `None` when there is no tcpdump.
    fn start(bridge: &str, path: &std::path::Path) -> Option<Capture> {
        let child = std::process::Command::new("tcpdump")
            .args(["-i", bridge, "-U", "-s", "0", "-w"])
            .arg(path)
            .args(["tcp", "and", "(port", "2888", "or", "port", "3888)"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        // tcpdump opens the interface before it writes the file's header.
        let up = Instant::now() + Duration::from_secs(3);
        while !path.exists() && Instant::now() < up {
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Capture { child })
    }

    /// Stops it (SIGTERM: it writes what it holds) and waits.
    fn stop(&mut self) -> Result<(), String> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child
            .wait()
            .map(drop)
            .map_err(|e| format!("tcpdump: {e}"))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_gap_counts_from_the_start_between_acks_and_to_the_end() {
        let text = r#"{"process":0,"type":"invoke","f":"set","key":"/k","value":"a","time":1.0}
{"process":0,"type":"ok","version":1,"time":1.5}
{"process":0,"type":"invoke","f":"get","key":"/k","time":2.0}
{"process":0,"type":"ok","value":"a","version":1,"time":6.0}
{"process":0,"type":"invoke","f":"set","key":"/k","value":"b","time":6.0}
{"process":0,"type":"ok","version":2,"time":7.0}
"#;
        let h = history::read(text.as_bytes()).unwrap();
        // Acks at 1.5 and 7.0 (the read does not count); the window ends at 1.0 + 10.
        assert_eq!(longest_write_gap(&h, 10.0), Some(5.5));
        assert_eq!(longest_write_gap(&h, 6.0), Some(5.5));
        assert_eq!(longest_write_gap(&history::History::default(), 10.0), None);
    }
}
