//! A workload's history: what each client process asked of ZooKeeper and what came back, in
//! real-time order. Two forms are read:
//!
//! - zkfle's own, one JSON object a line (docs/chaos.md, "History format"):
//!   `{"process":3,"type":"invoke","f":"set","key":"/k1","value":"17","version":-1}` then
//!   `{"process":3,"type":"ok","f":"set","key":"/k1","version":5,"zxid":"0x100000007"}`, and
//!   `final` lines for what each server holds at the end;
//! - Jepsen's cas-register log (`INFO jepsen.util - 3 :invoke :cas [1 4]`), the form of the
//!   published histories Knossos and Porcupine are tested on.
//!
//! A line's position is its time: a history is written as things happen, so an operation
//! whose completion comes before another's invocation precedes it in real time.

use std::io::BufRead;

use serde_json::Value;

/// The longest line read: an operation is a few hundred bytes.
pub const MAX_LINE_BYTES: usize = 64 << 10;
/// The most events read: a campaign's schedule records thousands.
pub const MAX_EVENTS: usize = 10_000_000;

/// What a process asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Create the znode `key` holding `value` (absent before).
    Create {
        key: String,
        value: String,
    },
    /// setData on `key`; `version` -1 sets whatever the version, otherwise only that version.
    Set {
        key: String,
        value: String,
        version: i32,
    },
    /// getData on `key`, served by the session's server (sequentially consistent, not
    /// linearizable).
    Get {
        key: String,
    },
    /// sync on `key`'s path, then getData once the sync returned.
    SyncGet {
        key: String,
    },
    /// Jepsen's cas register: read, write, compare-and-set.
    Read,
    Write(i64),
    Cas(i64, i64),
}

impl Request {
    /// The key the request is about (the register's is "").
    pub fn key(&self) -> &str {
        match self {
            Request::Create { key, .. }
            | Request::Set { key, .. }
            | Request::Get { key }
            | Request::SyncGet { key } => key,
            Request::Read | Request::Write(_) | Request::Cas(..) => "",
        }
    }

    /// The name of its kind in the history format.
    pub fn f(&self) -> &'static str {
        match self {
            Request::Create { .. } => "create",
            Request::Set { .. } => "set",
            Request::Get { .. } => "get",
            Request::SyncGet { .. } => "sync-get",
            Request::Read => "read",
            Request::Write(_) => "write",
            Request::Cas(..) => "cas",
        }
    }

    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create { .. } | Request::Set { .. } | Request::Write(_) | Request::Cas(..)
        )
    }
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok(Reply),
    /// It did not take effect; the error says why (ZooKeeper's code name, e.g. `BadVersion`).
    Fail(String),
    /// Nobody knows: a time-out or a lost connection (`info`), or no completion at all.
    Unknown,
}

/// An ok completion's data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// What a read returned (`None`: the register's nil).
    pub value: Option<String>,
    /// The znode's data version after a write, or as read.
    pub version: Option<i32>,
    /// The reply header's zxid.
    pub zxid: Option<i64>,
}

/// One operation, invocation and completion joined.
#[derive(Debug, Clone)]
pub struct Op {
    pub process: u64,
    pub request: Request,
    pub outcome: Outcome,
    /// Positions in the history of the invocation and completion (`None`: unknown outcome).
    pub call: u64,
    pub ret: Option<u64>,
    /// The invocation's line in the file, for reports.
    pub line: usize,
    /// Seconds, as recorded (optional in the format).
    pub time: Option<f64>,
    pub ret_time: Option<f64>,
}

/// What one server holds for one key at the end, read after the faults healed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalRead {
    pub server: String,
    pub key: String,
    /// `None`: the znode does not exist there.
    pub value: Option<String>,
    pub version: Option<i32>,
    pub line: usize,
}

/// A whole history.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub finals: Vec<FinalRead>,
    /// True for Jepsen's cas-register logs.
    pub register: bool,
}

/// A history that cannot be read, with the line at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct HistoryError {
    pub line: usize,
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, HistoryError> {
    Err(HistoryError {
        line,
        message: message.into(),
    })
}

/// One event as read, before invocations and completions are joined.
enum Event {
    Invoke(Request, Option<f64>),
    Complete(Outcome, Option<&'static str>, Option<f64>),
    Final(FinalRead),
}

/// Reads a history in either form (told apart by its first line).
pub fn read(input: impl BufRead) -> Result<History, HistoryError> {
    let mut builder = Builder::default();
    let mut format: Option<bool> = None; // Some(true): Jepsen's log
    for_each_line(input, |n, line| {
        let line = line.trim();
        if line.is_empty() {
            return Ok(());
        }
        let jepsen = *format.get_or_insert(!line.starts_with('{'));
        let parsed = if jepsen {
            jepsen_line(n, line)?
        } else {
            Some(json_line(n, line)?)
        };
        match parsed {
            Some((process, event)) => builder.push(n, process, event),
            None => Ok(()),
        }
    })?;
    let mut history = builder.finish();
    history.register = format == Some(true);
    Ok(history)
}

/// Calls `f` with each line and its number, every line bounded.
fn for_each_line(
    mut input: impl BufRead,
    mut f: impl FnMut(usize, &str) -> Result<(), HistoryError>,
) -> Result<(), HistoryError> {
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        n += 1;
        let read = std::io::Read::take(&mut input, MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| HistoryError {
                line: n,
                message: e.to_string(),
            })?;
        if read == 0 {
            return Ok(());
        }
        if buf.len() > MAX_LINE_BYTES {
            return err(n, format!("longer than {MAX_LINE_BYTES} bytes"));
        }
        let text = std::str::from_utf8(&buf).or_else(|_| err(n, "not UTF-8"))?;
        f(n, text)?;
    }
}

#[derive(Default)]
struct Builder {
    ops: Vec<Op>,
    finals: Vec<FinalRead>,
    /// Each process's operation awaiting its completion.
    pending: rustc_hash::FxHashMap<u64, usize>,
    /// Processes whose last operation ended unknown: they may not invoke again.
    crashed: rustc_hash::FxHashMap<u64, usize>,
    position: u64,
}

impl Builder {
    fn push(&mut self, line: usize, process: u64, event: Event) -> Result<(), HistoryError> {
        self.position += 1;
        if self.position as usize > MAX_EVENTS {
            return err(line, format!("more than {MAX_EVENTS} events"));
        }
        match event {
            Event::Invoke(request, time) => {
                if let Some(&i) = self.pending.get(&process) {
                    return err(
                        line,
                        format!(
                            "process {process} invokes while its operation of line {} is pending",
                            self.ops[i].line
                        ),
                    );
                }
                if let Some(&at) = self.crashed.get(&process) {
                    return err(
                        line,
                        format!(
                            "process {process} invokes after its operation of line {at} ended unknown \
                             (a process whose outcome is unknown must not be reused: give the next \
                             operation a new process)"
                        ),
                    );
                }
                self.pending.insert(process, self.ops.len());
                self.ops.push(Op {
                    process,
                    request,
                    outcome: Outcome::Unknown,
                    call: self.position,
                    ret: None,
                    line,
                    time,
                    ret_time: None,
                });
            }
            Event::Complete(outcome, f, time) => {
                let Some(i) = self.pending.remove(&process) else {
                    return err(
                        line,
                        format!("process {process} completes an operation it never invoked"),
                    );
                };
                let op = &mut self.ops[i];
                if let Some(f) = f.filter(|&f| f != op.request.f()) {
                    return err(
                        line,
                        format!(
                            "process {process} completes a {f}, but invoked a {} at line {}",
                            op.request.f(),
                            op.line
                        ),
                    );
                }
                if outcome == Outcome::Unknown {
                    self.crashed.insert(process, op.line);
                } else {
                    op.ret = Some(self.position);
                    op.ret_time = time;
                }
                op.outcome = outcome;
            }
            Event::Final(read) => self.finals.push(read),
        }
        Ok(())
    }

    /// Operations never completed are unknown, as if their process crashed.
    fn finish(self) -> History {
        History {
            ops: self.ops,
            finals: self.finals,
            register: false,
        }
    }
}

fn json_line(n: usize, line: &str) -> Result<(u64, Event), HistoryError> {
    let v: Value = serde_json::from_str(line).or_else(|e| err(n, format!("not JSON: {e}")))?;
    let Value::Object(o) = v else {
        return err(n, "not a JSON object");
    };
    let string = |name: &str| -> Result<Option<String>, HistoryError> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => err(n, format!("\"{name}\" is {other}, not a string")),
        }
    };
    let integer = |name: &str| -> Result<Option<i64>, HistoryError> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(x)) => x.as_i64().map(Some).ok_or_else(|| HistoryError {
                line: n,
                message: format!("\"{name}\" is {x}, not an integer"),
            }),
            // zxids are often written in hex, as ZooKeeper logs them.
            Some(Value::String(s)) if name == "zxid" => {
                let hex = s.strip_prefix("0x").unwrap_or(s);
                i64::from_str_radix(hex, 16)
                    .map(Some)
                    .or_else(|_| err(n, format!("\"zxid\" {s:?} is neither a number nor hex")))
            }
            Some(other) => err(n, format!("\"{name}\" is {other}, not an integer")),
        }
    };
    let version = |name: &str| -> Result<Option<i32>, HistoryError> {
        integer(name)?
            .map(|v| {
                i32::try_from(v).or_else(|_| err(n, format!("\"{name}\" {v} is not a version")))
            })
            .transpose()
    };
    let time = match o.get("time") {
        Some(Value::Number(x)) => x.as_f64(),
        _ => None,
    };
    let Some(kind) = string("type")? else {
        return err(n, "no \"type\" (invoke, ok, fail, info or final)");
    };
    let key = || -> Result<String, HistoryError> {
        string("key")?.ok_or_else(|| HistoryError {
            line: n,
            message: "no \"key\"".into(),
        })
    };
    if kind == "final" {
        let server = string("server")?.ok_or_else(|| HistoryError {
            line: n,
            message: "a final read names no \"server\"".into(),
        })?;
        let value = string("value")?;
        let version = version("version")?;
        if value.is_some() != version.is_some() {
            return err(
                n,
                "a final read has both \"value\" and \"version\", or neither (the znode is absent)",
            );
        }
        return Ok((
            0,
            Event::Final(FinalRead {
                server,
                key: key()?,
                value,
                version,
                line: n,
            }),
        ));
    }
    let process = match o.get("process") {
        Some(Value::Number(x)) => x.as_u64(),
        _ => None,
    }
    .ok_or_else(|| HistoryError {
        line: n,
        message: "no \"process\" (a number from 0)".into(),
    })?;
    let f = string("f")?;
    let event = match kind.as_str() {
        "invoke" => {
            let f = f.clone().ok_or_else(|| HistoryError {
                line: n,
                message: "an invocation names no \"f\"".into(),
            })?;
            let value = || -> Result<String, HistoryError> {
                string("value")?.ok_or_else(|| HistoryError {
                    line: n,
                    message: format!("a {f} names no \"value\""),
                })
            };
            let request = match f.as_str() {
                "create" => Request::Create {
                    key: key()?,
                    value: value()?,
                },
                "set" => Request::Set {
                    key: key()?,
                    value: value()?,
                    version: version("version")?.unwrap_or(-1),
                },
                "get" => Request::Get { key: key()? },
                "sync-get" => Request::SyncGet { key: key()? },
                other => {
                    return err(
                        n,
                        format!("unknown \"f\" {other:?} (create, set, get or sync-get)"),
                    );
                }
            };
            Event::Invoke(request, time)
        }
        "ok" => Event::Complete(
            Outcome::Ok(Reply {
                value: string("value")?,
                version: version("version")?,
                zxid: integer("zxid")?,
            }),
            None,
            time,
        ),
        "fail" => Event::Complete(
            Outcome::Fail(string("error")?.ok_or_else(|| HistoryError {
                line: n,
                message: "a fail names no \"error\"".into(),
            })?),
            None,
            time,
        ),
        "info" => Event::Complete(Outcome::Unknown, None, time),
        other => {
            return err(
                n,
                format!("unknown \"type\" {other:?} (invoke, ok, fail, info or final)"),
            );
        }
    };
    // A completion may repeat its f; when it does it must be the invocation's.
    let event = match (event, f) {
        (Event::Complete(o, _, t), Some(f)) => {
            let f = ["create", "set", "get", "sync-get"]
                .into_iter()
                .find(|&k| k == f)
                .ok_or_else(|| HistoryError {
                    line: n,
                    message: format!("unknown \"f\" {f:?}"),
                })?;
            Event::Complete(o, Some(f), t)
        }
        (event, _) => event,
    };
    Ok((process, event))
}

/// One line of Jepsen's log: `[INFO  jepsen.util - ]PROCESS :TYPE :F VALUE`. Lines of other
/// actors (the nemesis) and other loggers are skipped.
fn jepsen_line(n: usize, line: &str) -> Result<Option<(u64, Event)>, HistoryError> {
    let body = match line.find("jepsen.util - ") {
        Some(at) => &line[at + "jepsen.util - ".len()..],
        None if line.starts_with(|c: char| c.is_ascii_digit()) => line,
        None => return Ok(None),
    };
    let mut fields = body.split_whitespace();
    let Some(Ok(process)) = fields.next().map(str::parse::<u64>) else {
        return Ok(None);
    };
    let (Some(kind), Some(f)) = (fields.next(), fields.next()) else {
        return err(n, "expected PROCESS :TYPE :F VALUE");
    };
    let value: Vec<&str> = fields.collect();
    let value = value.join(" ");
    let number = |s: &str| -> Result<i64, HistoryError> {
        s.parse()
            .or_else(|_| err(n, format!("{s:?} is not an integer")))
    };
    let pair = |s: &str| -> Result<(i64, i64), HistoryError> {
        let inner = s
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .ok_or_else(|| HistoryError {
                line: n,
                message: format!("{s:?} is not a pair [FROM TO]"),
            })?;
        let mut it = inner.split_whitespace();
        match (it.next(), it.next(), it.next()) {
            (Some(a), Some(b), None) => Ok((number(a)?, number(b)?)),
            _ => err(n, format!("{s:?} is not a pair [FROM TO]")),
        }
    };
    let f_name = match f {
        ":read" => "read",
        ":write" => "write",
        ":cas" => "cas",
        other => {
            return err(
                n,
                format!("unknown function {other} (:read, :write or :cas)"),
            );
        }
    };
    let event = match kind {
        ":invoke" => Event::Invoke(
            match f_name {
                "read" => Request::Read,
                "write" => Request::Write(number(&value)?),
                _ => {
                    let (from, to) = pair(&value)?;
                    Request::Cas(from, to)
                }
            },
            None,
        ),
        ":ok" => {
            let read = (f_name == "read" && value != "nil").then(|| value.clone());
            if let Some(v) = &read {
                number(v)?;
            }
            Event::Complete(
                Outcome::Ok(Reply {
                    value: read,
                    ..Reply::default()
                }),
                Some(f_name),
                None,
            )
        }
        // A failed read or write did nothing; Jepsen marks time-outs `:info`, though older
        // logs put `:fail ... :timed-out` on reads, which is the same for a read.
        ":fail" => Event::Complete(Outcome::Fail(value.clone()), Some(f_name), None),
        ":info" => Event::Complete(Outcome::Unknown, Some(f_name), None),
        other => {
            return err(
                n,
                format!("unknown type {other} (:invoke, :ok, :fail, :info)"),
            );
        }
    };
    Ok(Some((process, event)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_join_invocations_and_completions() {
        let text = r#"{"process":0,"type":"invoke","f":"create","key":"/k","value":"a","time":0.5}
{"process":1,"type":"invoke","f":"set","key":"/k","value":"b","version":0}
{"process":0,"type":"ok","f":"create","zxid":"0x100000002"}
{"process":1,"type":"info","error":"ConnectionLoss"}
{"type":"final","server":"zk1","key":"/k","value":"b","version":1}
"#;
        let h = read(text.as_bytes()).unwrap();
        assert_eq!(h.ops.len(), 2);
        assert_eq!(h.ops[0].call, 1);
        assert_eq!(h.ops[0].ret, Some(3));
        assert_eq!(
            h.ops[0].outcome,
            Outcome::Ok(Reply {
                zxid: Some(0x100000002),
                ..Reply::default()
            })
        );
        assert_eq!(h.ops[1].outcome, Outcome::Unknown);
        assert_eq!(h.ops[1].ret, None);
        assert_eq!(h.finals[0].version, Some(1));
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            (
                "{\"process\":0,\"type\":\"ok\"}\n",
                "line 1: process 0 completes",
            ),
            ("{\"type\":\"invoke\"}\n", "line 1: no \"process\""),
            (
                "{\"process\":0,\"type\":\"invoke\",\"f\":\"delete\",\"key\":\"/k\"}\n",
                "unknown \"f\"",
            ),
            ("{\"process\":0\n", "line 1: not JSON"),
            (
                "{\"process\":0,\"type\":\"invoke\",\"f\":\"get\",\"key\":\"/k\"}\n\
                 {\"process\":0,\"type\":\"info\"}\n\
                 {\"process\":0,\"type\":\"invoke\",\"f\":\"get\",\"key\":\"/k\"}\n",
                "line 3: process 0 invokes after its operation of line 1 ended unknown",
            ),
            (
                "{\"process\":0,\"type\":\"invoke\",\"f\":\"get\",\"key\":\"/k\"}\n\
                 {\"process\":0,\"type\":\"ok\",\"f\":\"set\"}\n",
                "completes a set, but invoked a get",
            ),
        ];
        for (text, want) in cases {
            let e = read(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
        let long = format!("{}\n", "x".repeat(MAX_LINE_BYTES + 10));
        assert!(
            read(long.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }

    #[test]
    fn jepsen_logs_are_read() {
        let text = "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n\
                    INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]\n\
                    INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n\
                    INFO  jepsen.util - 0\t:ok\t:read\t3\n\
                    INFO  jepsen.util - 2\t:fail\t:cas\t[3 0]\n";
        let h = read(text.as_bytes()).unwrap();
        assert!(h.register);
        assert_eq!(h.ops[0].request, Request::Read);
        assert_eq!(h.ops[1].request, Request::Cas(3, 0));
        assert!(matches!(&h.ops[0].outcome, Outcome::Ok(r) if r.value.as_deref() == Some("3")));
        assert!(matches!(h.ops[1].outcome, Outcome::Fail(_)));
    }
}
