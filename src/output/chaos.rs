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
