//! The checks of a history, for what ZooKeeper promises and nothing more (docs/chaos.md):
//!
//! - **writes are linearizable**: each znode's creates, setData and conditional setData, with
//!   their unknown outcomes, have one order that respects real time and the znode's versions;
//! - **reads are sequentially consistent per session**: a session never reads a znode older
//!   than it read or wrote it before, never reads a value no write had been asked to write,
//!   and its replies' zxids never go back;
//! - **sync then read** is reported apart: a read older than a write acknowledged before the
//!   sync began is what ZOOKEEPER-1675 allows across a leader change, not a violation;
//! - **no acknowledged write is lost**: what each server holds at the end (the `final` reads)
//!   is at least the newest acknowledged version;
//! - **replicas agree**: every server holds the same at the end.
//!
//! Jepsen's cas-register histories get the write check alone, on the register's model (its
//! reads are linearizable by that model's definition).

use rustc_hash::FxHashMap;

use super::history::{FinalRead, History, Op, Outcome, Request};
use super::linearizable::{self, Budget, Interval};

/// The JIRA issue that says a sync is not guaranteed across a leader change.
pub const SYNC_JIRA: &str = "ZOOKEEPER-1675";

/// Everything the checks found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// A Jepsen cas-register history: every operation is checked for linearizability.
    pub register: bool,
    pub operations: usize,
    pub processes: usize,
    pub keys: usize,
    /// Operations whose outcome is unknown.
    pub unknown: usize,
    pub writes: WriteCheck,
    pub sessions: SessionCheck,
    pub sync_reads: SyncCheck,
    pub finals: FinalCheck,
}

#[derive(Debug, Clone, Default)]
pub struct WriteCheck {
    /// Writes checked (those that failed without effect on the model are left out).
    pub writes: usize,
    pub keys: usize,
    pub violations: Vec<NotLinearizable>,
    /// Keys whose search met its budget, with the configurations it had explored.
    pub gave_up: Vec<(String, u64)>,
}

/// One key's writes have no linearization.
#[derive(Debug, Clone)]
pub struct NotLinearizable {
    pub key: String,
    pub writes: usize,
    /// The longest valid order found from the start.
    pub longest: usize,
    /// The write no extension of that order could place.
    pub stuck: Op,
    /// The writes concurrent with it (at most 8).
    pub concurrent: Vec<Op>,
    /// The state the longest order ends in, described.
    pub state: String,
}

#[derive(Debug, Clone, Default)]
pub struct SessionCheck {
    pub reads: usize,
    pub violations: Vec<SessionViolation>,
}

#[derive(Debug, Clone)]
pub struct SessionViolation {
    pub op: Op,
    /// What it contradicts, described ("version 5, written by this session at line 40").
    pub why: String,
}

#[derive(Debug, Clone, Default)]
pub struct SyncCheck {
    pub checked: usize,
    /// Reads after a sync that missed a write acknowledged before the sync began.
    pub stale: Vec<SessionViolation>,
}

#[derive(Debug, Clone, Default)]
pub struct FinalCheck {
    /// Servers read at the end.
    pub servers: Vec<String>,
    pub lost: Vec<LostWrite>,
    pub disagreements: Vec<Disagreement>,
}

/// A server holds less than a write that was acknowledged.
#[derive(Debug, Clone)]
pub struct LostWrite {
    pub read: FinalRead,
    /// The newest acknowledged write of the key.
    pub acknowledged: Op,
    pub acknowledged_version: i32,
}

/// Servers hold different things for one key.
#[derive(Debug, Clone)]
pub struct Disagreement {
    pub key: String,
    pub reads: Vec<FinalRead>,
}

impl Report {
    /// `Some(true)`: every check passed; `Some(false)`: a violation; `None`: nothing violated
    /// but some key's search gave up, so linearizability is not known.
    pub fn valid(&self) -> Option<bool> {
        if !self.writes.violations.is_empty()
            || !self.sessions.violations.is_empty()
            || !self.finals.lost.is_empty()
            || !self.finals.disagreements.is_empty()
        {
            Some(false)
        } else if !self.writes.gave_up.is_empty() {
            None
        } else {
            Some(true)
        }
    }
}

/// Runs every check on `history`.
pub fn check(history: &History, budget: Budget) -> Report {
    let mut keys: Vec<&str> = history.ops.iter().map(|o| o.request.key()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut processes: Vec<u64> = history.ops.iter().map(|o| o.process).collect();
    processes.sort_unstable();
    processes.dedup();
    let mut report = Report {
        register: history.register,
        operations: history.ops.len(),
        processes: processes.len(),
        keys: keys.len(),
        unknown: history
            .ops
            .iter()
            .filter(|o| o.outcome == Outcome::Unknown)
            .count(),
        ..Report::default()
    };
    report.writes = check_writes(history, &keys, budget);
    if !history.register {
        report.sessions = check_sessions(history);
        report.sync_reads = check_sync_reads(history);
        report.finals = check_finals(history);
    }
    report
}

/// Whether a write belongs in the linearizability check: a failure that says nothing of the
/// object (anything but the model's own refusals) did not happen and constrains nothing.
fn checked_write(op: &Op) -> bool {
    if !op.request.is_write() && op.request != Request::Read {
        return false;
    }
    match (&op.request, &op.outcome) {
        // A read of unknown outcome returned nothing to check.
        (Request::Read, Outcome::Unknown) | (Request::Read, Outcome::Fail(_)) => false,
        (Request::Create { .. }, Outcome::Fail(e)) => e == "NodeExists",
        (Request::Set { .. }, Outcome::Fail(e)) => e == "BadVersion" || e == "NoNode",
        (Request::Write(_), Outcome::Fail(_)) => false,
        // Jepsen's failed cas is the compare's refusal.
        _ => true,
    }
}

fn check_writes(history: &History, keys: &[&str], budget: Budget) -> WriteCheck {
    let mut out = WriteCheck::default();
    for &key in keys {
        let ops: Vec<&Op> = history
            .ops
            .iter()
            .filter(|o| o.request.key() == key && checked_write(o))
            .collect();
        if ops.is_empty() {
            continue;
        }
        out.keys += 1;
        out.writes += ops.len();
        let intervals: Vec<Interval> = ops
            .iter()
            .map(|o| Interval {
                call: o.call,
                ret: o.ret,
            })
            .collect();
        // Values as small numbers, so a state is cheap to copy and compare.
        let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
        let mut names: Vec<&str> = Vec::new();
        let value_ids: Vec<u32> = ops
            .iter()
            .map(|o| match &o.request {
                Request::Create { value, .. } | Request::Set { value, .. } => {
                    *ids.entry(value.as_str()).or_insert_with(|| {
                        names.push(value);
                        names.len() as u32 - 1
                    })
                }
                _ => 0,
            })
            .collect();
        let outcome = if history.register {
            linearizable::check(&intervals, None, |s, i| register_step(*s, ops[i]), budget)
        } else {
            linearizable::check(
                &intervals,
                None,
                |s, i| znode_step(*s, ops[i], value_ids[i]),
                budget,
            )
        };
        match outcome {
            linearizable::Outcome::Linearizable { .. } => {}
            linearizable::Outcome::GaveUp { explored } => {
                out.gave_up.push((key.to_string(), explored));
            }
            linearizable::Outcome::NotLinearizable { longest, stuck } => {
                let stuck_op = ops[stuck];
                let end = stuck_op.ret.unwrap_or(u64::MAX);
                let concurrent = ops
                    .iter()
                    .enumerate()
                    .filter(|&(i, o)| {
                        i != stuck && o.call < end && o.ret.is_none_or(|r| r > stuck_op.call)
                    })
                    .take(8)
                    .map(|(_, o)| (*o).clone())
                    .collect();
                let state = if history.register {
                    let end = longest
                        .iter()
                        .fold(None, |s, &i| register_step(s, ops[i]).unwrap_or(s));
                    end.map_or("nil".into(), |v| format!("value {v}"))
                } else {
                    let end = longest.iter().fold(None, |s, &i| {
                        znode_step(s, ops[i], value_ids[i]).unwrap_or(s)
                    });
                    match end {
                        None => "absent".into(),
                        Some((value, version)) => {
                            format!("{:?} at version {version}", names[value as usize])
                        }
                    }
                };
                out.violations.push(NotLinearizable {
                    key: key.to_string(),
                    writes: ops.len(),
                    longest: longest.len(),
                    stuck: stuck_op.clone(),
                    concurrent,
                    state,
                });
            }
        }
    }
    out
}

/// A znode: absent, or (value, data version). `value` is the write's value's number.
type Znode = Option<(u32, i32)>;

fn znode_step(state: Znode, op: &Op, value: u32) -> Option<Znode> {
    let reply_version = match &op.outcome {
        Outcome::Ok(r) => r.version,
        _ => None,
    };
    match (&op.request, &op.outcome) {
        (Request::Create { .. }, Outcome::Ok(_)) => match state {
            None if reply_version.is_none_or(|v| v == 0) => Some(Some((value, 0))),
            _ => None,
        },
        (Request::Create { .. }, Outcome::Fail(_)) => state.map(|_| state),
        (Request::Create { .. }, Outcome::Unknown) => Some(state.or(Some((value, 0)))),
        (Request::Set { version, .. }, Outcome::Ok(_)) => match state {
            Some((_, current))
                if (*version == -1 || *version == current)
                    && reply_version.is_none_or(|v| v == current + 1) =>
            {
                Some(Some((value, current + 1)))
            }
            _ => None,
        },
        (Request::Set { version, .. }, Outcome::Fail(e)) => match state {
            None if e == "NoNode" => Some(None),
            Some((_, current)) if e == "BadVersion" && *version != -1 && *version != current => {
                Some(state)
            }
            _ => None,
        },
        (Request::Set { version, .. }, Outcome::Unknown) => Some(match state {
            Some((_, current)) if *version == -1 || *version == current => {
                Some((value, current + 1))
            }
            _ => state,
        }),
        _ => Some(state),
    }
}

/// Jepsen's cas register, as Knossos and Porcupine model it (`None` is nil).
fn register_step(state: Option<i64>, op: &Op) -> Option<Option<i64>> {
    match (&op.request, &op.outcome) {
        (Request::Read, Outcome::Ok(r)) => {
            let read = r.value.as_deref().and_then(|v| v.parse::<i64>().ok());
            (read == state).then_some(state)
        }
        (Request::Write(v), _) => Some(Some(*v)),
        (Request::Cas(from, to), Outcome::Ok(_)) => (state == Some(*from)).then_some(Some(*to)),
        (Request::Cas(from, _), Outcome::Fail(_)) => (state != Some(*from)).then_some(state),
        (Request::Cas(from, to), Outcome::Unknown) => Some(if state == Some(*from) {
            Some(*to)
        } else {
            state
        }),
        _ => Some(state),
    }
}

/// The version an ok write left its znode at, where known.
fn written_version(op: &Op) -> Option<i32> {
    match (&op.request, &op.outcome) {
        (Request::Create { .. }, Outcome::Ok(_)) => Some(0),
        (Request::Set { .. }, Outcome::Ok(r)) => r.version,
        _ => None,
    }
}

fn check_sessions(history: &History) -> SessionCheck {
    let mut out = SessionCheck::default();
    // Per key, the values writes were asked to write, with the position each was asked at.
    let mut asked: FxHashMap<(&str, &str), u64> = FxHashMap::default();
    for op in &history.ops {
        if let Request::Create { key, value } | Request::Set { key, value, .. } = &op.request {
            asked.entry((key, value)).or_insert(op.call);
        }
    }
    struct Session<'a> {
        /// Per key: the newest version seen, and the op that showed it.
        seen: FxHashMap<&'a str, (i32, &'a Op)>,
        zxid: Option<(i64, &'a Op)>,
    }
    let mut sessions: FxHashMap<u64, Session> = FxHashMap::default();
    for op in &history.ops {
        let s = sessions.entry(op.process).or_insert_with(|| Session {
            seen: FxHashMap::default(),
            zxid: None,
        });
        let key = op.request.key();
        let reply = match &op.outcome {
            Outcome::Ok(r) => Some(r),
            _ => None,
        };
        if let Some(zxid) = reply.and_then(|r| r.zxid) {
            if let Some((last, by)) = s.zxid.filter(|(last, _)| zxid < *last) {
                out.violations.push(SessionViolation {
                    op: op.clone(),
                    why: format!(
                        "its reply's zxid 0x{zxid:x} is older than 0x{last:x}, the zxid of this \
                         session's reply at line {}",
                        by.line
                    ),
                });
            } else {
                s.zxid = Some((zxid, op));
            }
        }
        let read = matches!(op.request, Request::Get { .. } | Request::SyncGet { .. });
        if read && op.outcome != Outcome::Unknown {
            out.reads += 1;
        }
        let seen = s.seen.get(key).copied();
        let observed = match (&op.request, &op.outcome) {
            (_, Outcome::Ok(_)) if op.request.is_write() => written_version(op),
            (Request::Get { .. } | Request::SyncGet { .. }, Outcome::Ok(r)) => {
                if let Some(value) = &r.value {
                    let asked_at = asked.get(&(key, value.as_str()));
                    if asked_at.is_none_or(|&at| op.ret.is_some_and(|ret| at > ret)) {
                        out.violations.push(SessionViolation {
                            op: op.clone(),
                            why: format!(
                                "no write had been asked to write {value:?} to {key} before \
                                 this read returned"
                            ),
                        });
                    }
                }
                r.version
            }
            (Request::Get { .. } | Request::SyncGet { .. }, Outcome::Fail(e)) if e == "NoNode" => {
                if let Some((version, by)) = seen {
                    out.violations.push(SessionViolation {
                        op: op.clone(),
                        why: format!(
                            "{key} was absent, after this session saw it at version {version} \
                             (line {})",
                            by.line
                        ),
                    });
                }
                None
            }
            _ => None,
        };
        let Some(version) = observed else { continue };
        match seen {
            Some((newest, by)) if read && version < newest => {
                out.violations.push(SessionViolation {
                    op: op.clone(),
                    why: format!(
                        "it read version {version}, older than version {newest}, which this \
                         session {} at line {}",
                        if by.request.is_write() {
                            "wrote"
                        } else {
                            "read"
                        },
                        by.line
                    ),
                });
            }
            Some((newest, _)) if version <= newest => {}
            _ => {
                s.seen.insert(key, (version, op));
            }
        }
    }
    out
}

fn check_sync_reads(history: &History) -> SyncCheck {
    let mut out = SyncCheck::default();
    // Acknowledged writes per key by completion position, to find the newest acknowledged
    // before each sync began.
    let mut acked: FxHashMap<&str, Vec<(u64, i32, &Op)>> = FxHashMap::default();
    for op in &history.ops {
        if let (Some(ret), Some(version)) = (op.ret, written_version(op)) {
            acked
                .entry(op.request.key())
                .or_default()
                .push((ret, version, op));
        }
    }
    for list in acked.values_mut() {
        list.sort_unstable_by_key(|&(ret, _, _)| ret);
    }
    for op in &history.ops {
        let Request::SyncGet { key } = &op.request else {
            continue;
        };
        let read = match &op.outcome {
            Outcome::Ok(r) => r.version,
            Outcome::Fail(e) if e == "NoNode" => Some(-1),
            _ => continue,
        };
        out.checked += 1;
        let Some(read) = read else { continue };
        let newest = acked.get(key.as_str()).and_then(|list| {
            list.iter()
                .take_while(|&&(ret, _, _)| ret < op.call)
                .max_by_key(|&&(_, v, _)| v)
        });
        if let Some(&(_, version, by)) = newest.filter(|&&(_, v, _)| read < v) {
            let held = if read < 0 {
                "absent".to_string()
            } else {
                format!("version {read}")
            };
            out.stale.push(SessionViolation {
                op: op.clone(),
                why: format!(
                    "it read {key} {held}, though version {version} was acknowledged (line {}) \
                     before the sync began",
                    by.line
                ),
            });
        }
    }
    out
}

fn check_finals(history: &History) -> FinalCheck {
    let mut out = FinalCheck::default();
    let mut servers: Vec<String> = history.finals.iter().map(|f| f.server.clone()).collect();
    servers.sort();
    servers.dedup();
    out.servers = servers;
    let mut by_key: FxHashMap<&str, Vec<&FinalRead>> = FxHashMap::default();
    for f in &history.finals {
        by_key.entry(&f.key).or_default().push(f);
    }
    let mut keys: Vec<&str> = by_key.keys().copied().collect();
    keys.sort_unstable();
    for key in keys {
        let reads = &by_key[key];
        let newest = history
            .ops
            .iter()
            .filter(|o| o.request.key() == key)
            .filter_map(|o| written_version(o).map(|v| (v, o)))
            .max_by_key(|&(v, _)| v);
        if let Some((version, op)) = newest {
            for read in reads {
                if read.version.is_none_or(|held| held < version) {
                    out.lost.push(LostWrite {
                        read: (*read).clone(),
                        acknowledged: op.clone(),
                        acknowledged_version: version,
                    });
                }
            }
        }
        let first = reads[0];
        if reads
            .iter()
            .any(|r| (&r.value, r.version) != (&first.value, first.version))
        {
            out.disagreements.push(Disagreement {
                key: key.to_string(),
                reads: reads.iter().map(|r| (*r).clone()).collect(),
            });
        }
    }
    out
}

/// An operation in one line: `line 12, process 3: set /k1 "17" if version 4 -> ok, version 5`.
pub fn describe(op: &Op) -> String {
    let request = match &op.request {
        Request::Create { key, value } => format!("create {key} {value:?}"),
        Request::Set {
            key,
            value,
            version,
        } if *version == -1 => format!("set {key} {value:?}"),
        Request::Set {
            key,
            value,
            version,
        } => format!("set {key} {value:?} if version {version}"),
        Request::Get { key } => format!("get {key}"),
        Request::SyncGet { key } => format!("sync + get {key}"),
        Request::Read => "read".into(),
        Request::Write(v) => format!("write {v}"),
        Request::Cas(from, to) => format!("cas {from} -> {to}"),
    };
    let outcome = match &op.outcome {
        Outcome::Ok(r) => {
            let mut s = "ok".to_string();
            if let Some(v) = &r.value {
                // The register's values are numbers; a znode's are strings.
                if op.request == Request::Read {
                    s += &format!(" {v}");
                } else {
                    s += &format!(" {v:?}");
                }
            } else if op.request == Request::Read {
                s += " nil";
            }
            if let Some(v) = r.version {
                s += &format!(", version {v}");
            }
            s
        }
        Outcome::Fail(e) => format!("failed {e}"),
        Outcome::Unknown => "unknown".into(),
    };
    format!(
        "line {}, process {}: {request} -> {outcome}",
        op.line, op.process
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::history::read;

    fn report(text: &str) -> Report {
        check(&read(text.as_bytes()).unwrap(), Budget::default())
    }

    const CLEAN: &str = r#"{"process":0,"type":"invoke","f":"create","key":"/k","value":"a"}
{"process":0,"type":"ok","zxid":2}
{"process":0,"type":"invoke","f":"set","key":"/k","value":"b","version":0}
{"process":1,"type":"invoke","f":"set","key":"/k","value":"c","version":0}
{"process":0,"type":"ok","version":1,"zxid":3}
{"process":1,"type":"fail","error":"BadVersion"}
{"process":1,"type":"invoke","f":"get","key":"/k"}
{"process":1,"type":"ok","value":"b","version":1}
{"process":2,"type":"invoke","f":"set","key":"/k","value":"d"}
{"process":2,"type":"info","error":"ConnectionLoss"}
{"type":"final","server":"zk1","key":"/k","value":"d","version":2}
{"type":"final","server":"zk2","key":"/k","value":"d","version":2}
"#;

    #[test]
    fn a_clean_history_is_valid() {
        let r = report(CLEAN);
        assert_eq!(r.valid(), Some(true), "{r:?}");
        assert_eq!(r.writes.writes, 4);
        assert_eq!(r.unknown, 1);
        assert_eq!(r.sessions.reads, 1);
        assert_eq!(r.finals.servers, ["zk1", "zk2"]);
    }

    #[test]
    fn two_conditional_sets_of_one_version_cannot_both_succeed() {
        let r = report(&CLEAN.replace(r#""type":"fail","error":"BadVersion""#, r#""type":"ok""#));
        assert_eq!(r.valid(), Some(false));
        assert_eq!(r.writes.violations.len(), 1, "{r:?}");
    }

    #[test]
    fn a_lost_acknowledged_write_is_found() {
        let r = report(&CLEAN.replace(
            r#""server":"zk2","key":"/k","value":"d","version":2"#,
            r#""server":"zk2","key":"/k","value":"a","version":0"#,
        ));
        assert_eq!(r.finals.lost.len(), 1, "{r:?}");
        assert_eq!(r.finals.lost[0].acknowledged_version, 1);
        assert_eq!(r.finals.disagreements.len(), 1);
    }

    #[test]
    fn a_session_that_reads_back_in_time_is_caught() {
        let text = format!(
            "{CLEAN}{}",
            r#"{"process":0,"type":"invoke","f":"get","key":"/k"}
{"process":0,"type":"ok","value":"a","version":0}
"#
        );
        let r = report(&text);
        assert_eq!(r.sessions.violations.len(), 1, "{r:?}");
        assert!(
            r.sessions.violations[0]
                .why
                .contains("which this session wrote at line 3")
        );
    }

    #[test]
    fn a_stale_read_after_sync_is_reported_apart() {
        let text = format!(
            "{CLEAN}{}",
            r#"{"process":3,"type":"invoke","f":"sync-get","key":"/k"}
{"process":3,"type":"ok","value":"a","version":0}
"#
        );
        let r = report(&text);
        assert_eq!(r.sync_reads.stale.len(), 1, "{r:?}");
        assert_eq!(r.valid(), Some(true));
    }
}
