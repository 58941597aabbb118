//! `zkfle decode --format shiviz`: the capture as a ShiViz log (<https://bestchai.bitbucket.io/shiviz/>).
//!
//! ShiViz draws a space-time diagram from events that carry vector clocks. Each message in
//! the capture is two events: its send on the sender's host and its receipt on the
//! receiver's, with clocks from that send/receive pair (the receiver takes the component-wise
//! maximum and then ticks); each decision in the summary is a local event of its server.
//! Hosts are `sid<N>`, or the address when the sid is unknown.
//!
//! The output's first line is the regular expression ShiViz parses the log with, then an empty
//! line, then the log: two lines an event, its description and then `host {clock}`.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::is_message;
use crate::decode::{Body, Record};

/// The parser expression for ShiViz's "log parsing regular expression" box.
pub const REGEX: &str = r"(?<event>.*)\n(?<host>\S*) (?<clock>{.*})";

fn host(sid: Option<i64>, addr: Option<std::net::SocketAddr>) -> String {
    match (sid, addr) {
        (Some(s), _) => format!("sid{s}"),
        (None, Some(a)) => a.to_string(),
        (None, None) => "unknown".to_string(),
    }
}

fn describe(r: &Record) -> String {
    match &r.body {
        Body::Notification(n) => format!(
            "{} leader {} zxid {:#x} round {:#x} peerEpoch {:#x} size {} time {:.6}",
            n.state.name(),
            super::leader_text(n.leader),
            n.zxid,
            n.election_epoch,
            n.effective_peer_epoch(),
            n.size(),
            r.time.as_secs_f64()
        ),
        Body::Initial(m) => format!(
            "initial message sid {} protocol {} time {:.6}",
            m.sid,
            m.protocol
                .code()
                .map_or_else(|| "legacy".to_string(), |c| c.to_string()),
            r.time.as_secs_f64()
        ),
        Body::Quorum(q) => format!(
            "{} zxid {:#x} time {:.6}",
            q.type_name(),
            q.zxid,
            r.time.as_secs_f64()
        ),
        Body::Closed { reset, .. } => format!(
            "connection {} time {:.6}",
            if *reset { "reset" } else { "closed" },
            r.time.as_secs_f64()
        ),
        Body::Problem(p) => super::problem_words(p, r.time),
    }
}

type Clock = BTreeMap<String, u64>;

/// One event on host `h`: merge the clock of the message received, if any, then tick.
fn tick(clocks: &mut BTreeMap<String, Clock>, h: &str, merge: Option<&Clock>) -> Clock {
    let c = clocks.entry(h.to_string()).or_default();
    if let Some(m) = merge {
        for (k, v) in m {
            let e = c.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }
    *c.entry(h.to_string()).or_default() += 1;
    c.clone()
}

fn clock_json(clock: &BTreeMap<String, u64>) -> String {
    serde_json::to_string(clock).unwrap_or_default()
}

/// The whole output: regex, empty line, log.
pub fn log(records: &[Record], summary: &Value) -> String {
    let mut decisions: Vec<(f64, String, String)> = Vec::new();
    for round in summary["rounds"].as_array().into_iter().flatten() {
        for d in round["decisions"].as_array().into_iter().flatten() {
            let mut text = format!(
                "decided {} leader {} round {:#x} evidence {} time {:.6}",
                d["state"].as_str().unwrap_or("?"),
                d["leader"],
                d["election_epoch"].as_i64().unwrap_or(0),
                d["evidence"].as_str().unwrap_or("?"),
                d["time"].as_f64().unwrap_or(0.0)
            );
            if let Some(c) = d.get("cause").filter(|c| !c.is_null()) {
                write!(text, " cause {}", c.to_string().replace('\n', " ")).ok();
            }
            decisions.push((
                d["time"].as_f64().unwrap_or(0.0),
                host(d["sid"].as_i64(), None),
                text,
            ));
        }
    }
    decisions.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut clocks: BTreeMap<String, Clock> = BTreeMap::new();
    let mut out = String::with_capacity(records.len() * 200);
    out.push_str(REGEX);
    out.push_str("\n\n");
    let mut next_decision = decisions.into_iter().peekable();
    for r in records.iter().filter(|r| is_message(r)) {
        let t = r.time.as_secs_f64();
        while let Some((dt, _, _)) = next_decision.peek() {
            if *dt > t {
                break;
            }
            let (_, h, text) = next_decision.next().unwrap();
            let c = tick(&mut clocks, &h, None);
            writeln!(out, "{text}\n{h} {}", clock_json(&c)).ok();
        }
        let from = host(r.from_sid, r.src);
        let to = host(r.to_sid, r.dst);
        let what = describe(r);
        let sent = tick(&mut clocks, &from, None);
        writeln!(out, "send {what} to {to}\n{from} {}", clock_json(&sent)).ok();
        let got = tick(&mut clocks, &to, Some(&sent));
        writeln!(out, "receive {what} from {from}\n{to} {}", clock_json(&got)).ok();
    }
    for (_, h, text) in next_decision {
        let c = tick(&mut clocks, &h, None);
        writeln!(out, "{text}\n{h} {}", clock_json(&c)).ok();
    }
    out
}
