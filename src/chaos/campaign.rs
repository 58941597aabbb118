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
    /// The longest time, in seconds of the history, in which no write was acknowledged: how
    /// long the clients could not write.
    pub write_gap: Option<f64>,
    pub seconds: f64,
    pub dir: PathBuf,
    /// The nemesis's actions with their times.
    pub actions: Vec<String>,
}

impl ScheduleResult {
    pub fn to_json(&self) -> Value {
        json!({
            "schedule": self.index,
            "seed": self.seed,
            "verdict": self.verdict,
            "faults": self.plan.steps.iter().map(|s| json!({
                "at": s.at, "heal_at": s.heal_at, "kind": s.fault.kind(), "text": s.fault.describe(),
            })).collect::<Vec<_>>(),
            "actions": self.actions,
            "operations": self.stats.operations,
            "unknown": self.stats.unknown,
            "recovered_in": self.recovered_in,
            "unread": self.unread,
            "longest_write_gap": self.write_gap.map(|g| (g * 1000.0).round() / 1000.0),
            "seconds": (self.seconds * 10.0).round() / 10.0,
            "error": self.error,
            "dir": self.dir,
            "report": self.report.as_ref().map(|r| r.to_json()),
        })
    }
}

/// The running campaign: its ensemble and where it writes.
pub struct Campaign {
    pub opts: CampaignOptions,
    pub ensemble: DockerEnsemble,
    out: std::fs::File,
}

impl Campaign {
    /// Starts the ensemble and waits for it to elect.
    pub fn start(opts: CampaignOptions) -> Result<Campaign, String> {
        std::fs::create_dir_all(&opts.spec.dir)
            .map_err(|e| format!("{}: {e}", opts.spec.dir.display()))?;
        let path = opts.spec.dir.join("campaign.jsonl");
        let out = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let ensemble = DockerEnsemble::start(&opts.spec)?;
        ensemble.wait_stable(Duration::from_secs(90))?;
        Ok(Campaign {
            opts,
            ensemble,
            out,
        })
    }

    /// Runs schedule `index` and records its line in `campaign.jsonl`.
    pub fn run_schedule(&mut self, index: u64) -> ScheduleResult {
        let seed = self.opts.seed.wrapping_add(index);
        let plan = match self.opts.plan {
            PlanKind::Random => nemesis::plan(
                seed,
                self.ensemble.voters.len(),
                self.opts.window,
                self.opts.destructive,
            ),
            PlanKind::DiskLoss => nemesis::disk_loss(seed, self.opts.window),
        };
        let dir = self.opts.spec.dir.join(format!("schedule-{index:03}"));
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
            write_gap: None,
            seconds: 0.0,
            dir: dir.clone(),
            actions: Vec::new(),
        };
        if let Err(e) = self.schedule(&plan, &dir, &mut result) {
            result.error = Some(e);
        }
        result.seconds = started.elapsed().as_secs_f64();
        let failed = result.verdict != "valid" || result.recovered_in.is_none();
        if failed {
            self.save_evidence(&dir, &result);
        } else if !self.opts.keep_all {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = writeln!(self.out, "{}", result.to_json());
        let _ = self.out.flush();
        result
    }

    fn schedule(
        &self,
        plan: &Plan,
        dir: &std::path::Path,
        result: &mut ScheduleResult,
    ) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let e = &self.ensemble;
        let first = match e.wait_stable(self.opts.recovery) {
            Ok(l) => l,
            Err(_) => {
                // Whatever the last schedule left: everything started and healed, once more.
                self.heal_all();
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
            root: format!("/zkfle-chaos/{}-{}", self.opts.seed, result.index),
        };
        workload::prepare(&wopts).map_err(|e| format!("creating {}: {e}", wopts.root))?;
        let history_path = dir.join("history.jsonl");
        let file = std::fs::File::create(&history_path)
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        let recorder = Recorder::new(Box::new(std::io::BufWriter::new(file)));
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
        let give_up = Instant::now() + self.opts.recovery;
        let mut pending = wopts.servers.clone();
        while !pending.is_empty() {
            let these = WorkloadOptions {
                servers: pending.clone(),
                ..wopts.clone()
            };
            let unread = workload::final_reads(&these, &recorder);
            pending = unread.iter().map(|(s, _)| *s).collect();
            if pending.is_empty() || Instant::now() >= give_up {
                result.unread = unread
                    .iter()
                    .map(|(s, why)| format!("{s}: {why}"))
                    .collect();
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        drop(recorder);
        let file = std::fs::File::open(&history_path)
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        let h = history::read(std::io::BufReader::new(file))
            .map_err(|e| format!("{}: {e}", history_path.display()))?;
        result.write_gap = longest_write_gap(&h, self.opts.window);
        let report = check::check(&h, self.opts.budget);
        result.verdict = match report.valid() {
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
