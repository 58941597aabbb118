//! The report of `zkfle chaos check`, as JSON (docs/chaos.md, "Report") and as text.

use serde_json::{Value, json};

use crate::chaos::check::{Report, SYNC_JIRA, SessionViolation, describe};
use crate::chaos::history::{FinalRead, Op, Outcome, Request};

fn op_json(op: &Op) -> Value {
    let mut o = json!({
        "line": op.line,
        "process": op.process,
        "f": op.request.f(),
        "key": op.request.key(),
        "outcome": match &op.outcome {
            Outcome::Ok(_) => "ok",
            Outcome::Fail(_) => "fail",
            Outcome::Unknown => "unknown",
        },
        "text": describe(op),
    });
    if let Outcome::Fail(e) = &op.outcome {
        o["error"] = json!(e);
    }
    if let Request::Set { version, .. } = &op.request {
        o["expected_version"] = json!(version);
    }
    o
}

fn final_json(f: &FinalRead) -> Value {
    json!({"server": f.server, "key": f.key, "value": f.value, "version": f.version, "line": f.line})
}

fn violations_json(list: &[SessionViolation]) -> Value {
    list.iter()
        .map(|v| json!({"op": op_json(&v.op), "why": v.why}))
        .collect()
}

/// `n` and its noun, singular or plural ("1 key", "3 keys").
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Items of one kind printed in the text report; JSON lists them all.
const SHOWN: usize = 5;

/// Prints the first [`SHOWN`] of `items`, then how many more there are.
fn some<T>(out: &mut String, items: &[T], each: impl Fn(&T) -> String) {
    for item in items.iter().take(SHOWN) {
        out.push_str(&each(item));
        out.push('\n');
    }
    if items.len() > SHOWN {
        out.push_str(&format!(
            "  ... and {} more (--format json lists them all)\n",
            items.len() - SHOWN
        ));
    }
}

impl Report {
    /// `valid`, `invalid`, or `unknown` (a search gave up and nothing else failed).
    pub fn verdict(&self) -> &'static str {
        match self.valid() {
            Some(true) => "valid",
            Some(false) => "invalid",
            None => "unknown",
        }
    }

    pub fn to_json(&self) -> Value {
        let w = &self.writes;
        let linearizable = if !w.violations.is_empty() {
            json!(false)
        } else if !w.gave_up.is_empty() {
            Value::Null
        } else {
            json!(true)
        };
        json!({
            "verdict": self.verdict(),
            "operations": self.operations,
            "processes": self.processes,
            "keys": self.keys,
            "unknown_outcomes": self.unknown,
            "writes": {
                "linearizable": linearizable,
                "keys": w.keys,
                "writes": w.writes,
                "violations": w.violations.iter().map(|v| json!({
                    "key": v.key,
                    "writes": v.writes,
                    "longest_order": v.longest,
                    "state": v.state,
                    "stuck": op_json(&v.stuck),
                    "concurrent": v.concurrent.iter().map(op_json).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "gave_up": w.gave_up.iter().map(|(key, explored)| json!({
                    "key": key, "configurations": explored,
                })).collect::<Vec<_>>(),
            },
            "sessions": {
                "reads": self.sessions.reads,
                "violations": violations_json(&self.sessions.violations),
            },
            "sync_reads": {
                "checked": self.sync_reads.checked,
                "stale": violations_json(&self.sync_reads.stale),
                "jira": SYNC_JIRA,
            },
            "finals": {
                "servers": self.finals.servers,
                "lost": self.finals.lost.iter().map(|l| json!({
                    "read": final_json(&l.read),
                    "acknowledged_version": l.acknowledged_version,
                    "acknowledged": op_json(&l.acknowledged),
                })).collect::<Vec<_>>(),
                "disagreements": self.finals.disagreements.iter().map(|d| json!({
                    "key": d.key,
                    "reads": d.reads.iter().map(final_json).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            },
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(
            &mut out,
            format!(
                "history: {} by {} on {}; {} unknown",
                count(self.operations, "operation", "operations"),
                count(self.processes, "process", "processes"),
                count(self.keys, "key", "keys"),
                count(self.unknown, "outcome", "outcomes")
            ),
        );
        let w = &self.writes;
        let verdict = if !w.violations.is_empty() {
            format!(
                "NOT linearizable on {} of {}",
                w.violations.len(),
                count(w.keys, "key", "keys")
            )
        } else if !w.gave_up.is_empty() {
            format!(
                "not known: the search gave up on {} of {}",
                w.gave_up.len(),
                count(w.keys, "key", "keys")
            )
        } else {
            format!(
                "linearizable ({}, {} checked)",
                count(w.keys, "key", "keys"),
                w.writes
            )
        };
        let what = if self.register {
            "operations"
        } else {
            "writes"
        };
        line(&mut out, format!("{what}: {verdict}"));
        for v in &w.violations {
            let key = if v.key.is_empty() {
                "the register"
            } else {
                &v.key
            };
            line(
                &mut out,
                format!(
                    "  {key}: no order of its {} {what} fits; the longest found takes {} (leaving {}) and has no place for:",
                    v.writes, v.longest, v.state
                ),
            );
            line(&mut out, format!("    {}", describe(&v.stuck)));
            if !v.concurrent.is_empty() {
                line(&mut out, "  concurrent with it:".into());
                for o in &v.concurrent {
                    line(&mut out, format!("    {}", describe(o)));
                }
            }
        }
        for (key, explored) in &w.gave_up {
            line(
                &mut out,
                format!("  {key}: gave up after {explored} configurations (raise --budget)"),
            );
        }
        if self.sessions.reads > 0 || !self.sessions.violations.is_empty() {
            let s = &self.sessions;
            if s.violations.is_empty() {
                line(
                    &mut out,
                    format!("session order: kept ({})", count(s.reads, "read", "reads")),
                );
            } else {
                line(
                    &mut out,
                    format!(
                        "session order: BROKEN {} ({})",
                        count(s.violations.len(), "time", "times"),
                        count(s.reads, "read", "reads")
                    ),
                );
                some(&mut out, &s.violations, |v| {
                    format!("  {}: {}", describe(&v.op), v.why)
                });
            }
        }
        if self.sync_reads.checked > 0 {
            let s = &self.sync_reads;
            if s.stale.is_empty() {
                line(
                    &mut out,
                    format!("sync + read: {} checked, none stale", s.checked),
                );
            } else {
                line(
                    &mut out,
                    format!(
                        "sync + read: {} of {} stale (allowed across a leader change: {SYNC_JIRA}; not counted as a violation)",
                        s.stale.len(),
                        s.checked
                    ),
                );
                some(&mut out, &s.stale, |v| {
                    format!("  {}: {}", describe(&v.op), v.why)
                });
            }
        }
        let f = &self.finals;
        if f.servers.is_empty() && !self.register {
            line(
                &mut out,
                "end: no server was read at the end (no final lines): lost writes and replicas not checked".into(),
            );
        }
        if !f.servers.is_empty() {
            let lost = if f.lost.is_empty() {
                "no acknowledged write lost".to_string()
            } else {
                format!(
                    "{} LOST",
                    count(f.lost.len(), "acknowledged write", "acknowledged writes")
                )
            };
            let agree = if f.disagreements.is_empty() {
                "replicas agree".to_string()
            } else {
                format!(
                    "replicas DISAGREE on {}",
                    count(f.disagreements.len(), "key", "keys")
                )
            };
            line(
                &mut out,
                format!(
                    "end: {} read ({}); {lost}; {agree}",
                    count(f.servers.len(), "server", "servers"),
                    f.servers.join(", ")
                ),
            );
            some(&mut out, &f.lost, |l| {
                let held = match (&l.read.value, l.read.version) {
                    (Some(v), Some(n)) => format!("{v:?} at version {n}"),
                    _ => "nothing (absent)".into(),
                };
                format!(
                    "  {} holds {} {held}; version {} was acknowledged: {}",
                    l.read.server,
                    l.read.key,
                    l.acknowledged_version,
                    describe(&l.acknowledged)
                )
            });
            for d in &f.disagreements {
                let each: Vec<String> = d
                    .reads
                    .iter()
                    .map(|r| match (&r.value, r.version) {
                        (Some(v), Some(n)) => format!("{} {v:?} v{n}", r.server),
                        _ => format!("{} absent", r.server),
                    })
                    .collect();
                line(&mut out, format!("  {}: {}", d.key, each.join(", ")));
            }
        }
        line(&mut out, format!("verdict: {}", self.verdict()));
        out
    }
}

/// What a campaign's schedule ran on, for its draft report.
pub struct ScheduleSetting<'a> {
    /// Each voter: sid, image, whether it is zkfle.
    pub voters: Vec<(u64, &'a str, bool)>,
    /// tickTime (ms), initLimit, syncLimit.
    pub timing: (u32, u32, u32),
    pub clients: usize,
    pub keys: usize,
    pub window: f64,
    /// The campaign's command, but for its seed and schedules.
    pub rerun: String,
}

impl crate::chaos::campaign::ScheduleResult {
    /// A failing schedule as a bug report, ready to file (`issue.md` beside its evidence):
    /// what ran, what was done, what was expected and what happened, and the known issues
    /// whose signatures the servers logged.
    pub fn issue_draft(&self, setting: &ScheduleSetting) -> String {
        let java: Vec<&str> = {
            let mut v: Vec<&str> = setting
                .voters
                .iter()
                .filter(|(_, _, zkfle)| !zkfle)
                .map(|(_, image, _)| image.rsplit(':').next().unwrap_or(image))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let faults: Vec<String> = self
            .shrunk
            .as_ref()
            .unwrap_or(&self.plan)
            .steps
            .iter()
            .map(|s| s.fault.describe())
            .collect();
        // What failed, each with its count (a check that found nothing is left out).
        let mut wrong: Vec<String> = self
            .report
            .iter()
            .flat_map(|r| {
                [
                    (
                        r.finals.lost.len(),
                        "acknowledged write lost",
                        "acknowledged writes lost",
                    ),
                    (
                        r.finals.disagreements.len(),
                        "key on which the replicas disagree",
                        "keys on which the replicas disagree",
                    ),
                    (
                        r.writes.violations.len(),
                        "key whose writes are not linearizable",
                        "keys whose writes are not linearizable",
                    ),
                    (
                        r.sessions.violations.len(),
                        "read older than its session had seen",
                        "reads older than their session had seen",
                    ),
                ]
            })
            .filter(|(n, _, _)| *n > 0)
            .map(|(n, one, many)| count(n, one, many))
            .collect();
        if let Some(e) = &self.election
            && !e.violations.is_empty()
        {
            wrong.push(count(
                e.violations.len(),
                "epoch with two leaders",
                "epochs with two leaders",
            ));
        }
        if self.flagged() {
            wrong.push(format!(
                "the digest check failed on {}",
                self.digest_failed_on().join(", ")
            ));
        }
        let mut jiras: Vec<&str> = self.known_bugs.iter().filter_map(|(_, k)| k.jira).collect();
        jiras.sort_unstable();
        jiras.dedup();
        let mut t = format!(
            "# ZooKeeper {}: {} after {}{}\n\n",
            java.join(" and "),
            if wrong.is_empty() {
                "a failed schedule".to_string()
            } else {
                wrong.join("; ")
            },
            faults.join(", then "),
            if jiras.is_empty() {
                String::new()
            } else {
                format!(" (known: {})", jiras.join(", "))
            },
        );
        t.push_str(&format!(
            "Found by `zkfle chaos campaign` (zkfle {}): schedule {}, seed {}.",
            env!("CARGO_PKG_VERSION"),
            self.index,
            self.seed
        ));
        if let Some((k, n)) = self.confirmed {
            t.push_str(&format!(
                " Replayed {n} times with the same faults: it failed again {k} times."
            ));
        }
        t.push_str("\n\n## Ensemble\n\n");
        for (sid, image, zkfle) in &setting.voters {
            t.push_str(&format!(
                "- server {sid}: {image}{}\n",
                if *zkfle {
                    " (`zkfle join`: votes and follows, serves no clients)"
                } else {
                    ""
                }
            ));
        }
        let (tick, init, sync) = setting.timing;
        t.push_str(&format!(
            "- tickTime {tick} ms, initLimit {init}, syncLimit {sync}; one Docker container per server on one bridge\n\n## Steps\n\n{} client sessions work on {} znodes for {} s (create, setData with and without a version, getData, sync then getData) while:\n\n",
            setting.clients, setting.keys, setting.window
        ));
        for a in &self.actions {
            t.push_str(&format!("    {}\n", a.trim_start()));
        }
        if self.shrunk.is_some() {
            t.push_str(&format!(
                "\nThe fewest faults that still failed: {}.\n",
                faults.join(", then ")
            ));
        }
        t.push_str(&format!(
            "\nTo run it again: `{} --seed {} --schedules 1`\n\n",
            setting.rerun, self.seed
        ));
        t.push_str("## Expected\n\nAfter the heal every server holds the same tree, ZooKeeper's digest check passes on every server, every acknowledged write is there, writes are linearizable, a session never reads older than it has seen, and each epoch has one leader.\n\n## Actual\n\n");
        if let Some(r) = &self.report {
            t.push_str(
                "The clients' history, checked (`zkfle chaos check history.jsonl`):\n\n```\n",
            );
            t.push_str(&r.to_text());
            t.push_str("```\n\n");
        }
        if let Some(e) = &self.election {
            for v in &e.violations {
                t.push_str(&format!("- two leaders: {v}\n"));
            }
        }
        if !self.digest_mismatches.is_empty() {
            t.push_str("Digest check, as the servers logged it:\n\n```\n");
            for l in &self.digest_mismatches {
                t.push_str(l);
                t.push('\n');
            }
            t.push_str("```\n\n");
        }
        t.push_str("## Known issues\n\n");
        if self.known_bugs.is_empty() {
            t.push_str("No known issue's signature is in the servers' logs.\n\n");
        }
        for (server, k) in &self.known_bugs {
            t.push_str(&format!(
                "- {} on {server} ({}): {}. First:\n\n      {}\n\n",
                k.jira.unwrap_or(k.name),
                count(k.count, "line", "lines"),
                k.what,
                k.line
            ));
        }
        let capture = match &self.capture_error {
            None => "`capture.pcap` (the election and quorum ports of the bridge), ".to_string(),
            Some(why) => format!("no capture ({why}), "),
        };
        t.push_str(&format!("## Attached\n\n`history.jsonl` (every operation, zkfle's history format), {capture}`zN.log` (each server's output), `report.txt`, `schedule.json`.\n"));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::ScheduleSetting;
    use crate::chaos::campaign::{PlanKind, ScheduleResult, plan_for};
    use crate::chaos::server_logs::scan;

    #[test]
    fn an_invalid_schedule_s_draft_names_what_ran_what_failed_and_the_known_issue() {
        let history = crate::chaos::history::read(std::io::Cursor::new(Vec::new())).unwrap();
        let log = "java.lang.NullPointerException: Cannot read field \"hdr\" because \"pif\" is null\n\
                   \tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:655)\n\
                   2026-12-07 16:40:45,045 [myid:2] - ERROR [main:DataTree@1818] - First digest mismatch on txn: 72057645893156871,782,34359744288,1796661620363,5\n";
        let found = scan(log);
        let plan = plan_for(PlanKind::Random, 2003, 4, 1, 15.0, false);
        let result = ScheduleResult {
            index: 3,
            seed: 2003,
            plan: plan.clone(),
            verdict: "invalid",
            report: Some(crate::chaos::check::check(&history, Default::default())),
            error: None,
            stats: Default::default(),
            recovered_in: Some(0.1),
            unread: Vec::new(),
            digest_mismatches: found
                .digest_mismatches
                .iter()
                .map(|l| format!("z2: {l}"))
                .collect(),
            known_bugs: found
                .known_bugs
                .into_iter()
                .map(|k| ("z2".to_string(), k))
                .collect(),
            write_gap: None,
            seconds: 16.0,
            dir: "/tmp/x".into(),
            actions: vec!["  5.8s  restarted every server in turn".into()],
            election: None,
            capture_error: None,
            confirmed: Some((2, 2)),
            shrunk: None,
            shrunk_dir: None,
            shrink_tries: 0,
        };
        let setting = ScheduleSetting {
            voters: vec![
                (1, "zkfle/zookeeper:3.8.0", false),
                (2, "zkfle/zookeeper:3.8.0", false),
                (3, "zkfle/zookeeper:3.8.0", false),
                (4, "zkfle/zkfle:latest", true),
            ],
            timing: (500, 10, 5),
            clients: 4,
            keys: 3,
            window: 15.0,
            rerun: "zkfle chaos campaign --images A --tick 500 --window 15 --clients 4 --keys 3"
                .into(),
        };
        let draft = result.issue_draft(&setting);
        let title = draft.lines().next().unwrap();
        assert!(
            title.starts_with("# ZooKeeper 3.8.0: the digest check failed on z2 after "),
            "{title}"
        );
        assert!(title.ends_with(" (known: ZOOKEEPER-4394)"), "{title}");
        assert!(draft.contains("failed again 2 times"));
        assert!(draft.contains("- server 4: zkfle/zkfle:latest (`zkfle join`"));
        assert!(draft.contains("5.8s  restarted every server in turn"));
        assert!(draft.contains("--keys 3 --seed 2003 --schedules 1`"));
        assert!(draft.contains("- ZOOKEEPER-4394 on z2 (1 line)"));
        assert!(draft.contains("First digest mismatch on txn: 72057645893156871"));
    }
}
