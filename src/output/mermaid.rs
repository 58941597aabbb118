//! `zkfle decode --format mermaid [--round N]`: one election as a Mermaid `sequenceDiagram`,
//! for pasting into a GitHub issue or a Markdown document.
//!
//! The election is the first that ended in round N (election epoch), or the Kth of the
//! capture with `--election K` (as the summary numbers them), or the first; its messages are
//! those from its start up to the start of the next round begun after its last decision (the
//! first election also takes the connections opened before it). Each message is one arrow,
//! solid for a LOOKING vote and dashed for a decided server's answer, with the time since the
//! election began; each decision is a note over its server.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::{OutputError, endpoint_name, is_message, leader_text};
use crate::decode::{Body, Record};

/// Which election to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The first.
    First,
    /// The first that ended in this round (election epoch).
    Round(i64),
    /// The Nth of the capture, from 1, as the summary numbers them.
    Number(usize),
}

/// The records that belong to the chosen election, that election's JSON object from the
/// summary, and its index.
pub fn election_window<'a>(
    records: &'a [Record],
    summary: &'a Value,
    choice: Choice,
) -> Result<(Vec<&'a Record>, &'a Value, usize), OutputError> {
    let rounds = summary["rounds"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let available = || {
        let r: Vec<String> = rounds
            .iter()
            .map(|r| format!("{:#x}", r["election_epoch"].as_i64().unwrap_or(0)))
            .collect();
        if r.is_empty() {
            "the capture has no election".to_string()
        } else {
            format!("elections in the capture: round {}", r.join(", "))
        }
    };
    let index = match choice {
        _ if rounds.is_empty() => return Err(OutputError(available())),
        Choice::First => 0,
        Choice::Round(n) => rounds
            .iter()
            .position(|r| r["election_epoch"].as_i64() == Some(n))
            .ok_or_else(|| OutputError(format!("no election in round {n:#x}; {}", available())))?,
        Choice::Number(k) if (1..=rounds.len()).contains(&k) => k - 1,
        Choice::Number(k) => {
            return Err(OutputError(format!(
                "no election {k}: the capture has {} (numbered from 1)",
                rounds.len()
            )));
        }
    };
    let start = if index == 0 {
        f64::NEG_INFINITY
    } else {
        rounds[index]["started"]
            .as_f64()
            .unwrap_or(f64::NEG_INFINITY)
    };
    // Up to the next round begun after this one's last decision: a rejoin that begins while
    // the election is still deciding (a server restarted mid-failover) does not cut it short.
    let last_decision = rounds[index]["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["time"].as_f64())
        .fold(start, f64::max);
    let end = rounds[index + 1..]
        .iter()
        .filter_map(|r| r["started"].as_f64())
        .find(|&t| t > last_decision)
        .unwrap_or(f64::INFINITY);
    let window = records
        .iter()
        .filter(|r| is_message(r))
        .filter(|r| {
            let t = r.time.as_secs_f64();
            t >= start && t < end
        })
        .collect();
    Ok((window, &rounds[index], index))
}

/// The diagram text.
pub fn diagram(records: &[Record], summary: &Value, choice: Choice) -> Result<String, OutputError> {
    let (window, election, index) = election_window(records, summary, choice)?;
    let started = election["started"].as_f64().unwrap_or(0.0);
    // Participants in sid order, then unknown addresses; ids are plain words Mermaid accepts.
    let mut names: BTreeMap<(bool, i64, String), String> = BTreeMap::new();
    let mut key = |sid: Option<i64>, addr: Option<std::net::SocketAddr>| {
        let k = (sid.is_none(), sid.unwrap_or(0), endpoint_name(sid, addr));
        let id = match sid {
            Some(s) if s >= 0 => format!("S{s}"),
            Some(s) => format!("Sm{}", s.unsigned_abs()),
            None => format!("A{}", names.len()),
        };
        names.entry(k).or_insert(id).clone()
    };
    let mut lines = Vec::with_capacity(window.len());
    for r in &window {
        let from = key(r.from_sid, r.src);
        let to = key(r.to_sid, r.dst);
        let at = r.time.as_secs_f64() - started;
        let (arrow, text) = match &r.body {
            Body::Notification(n) => (
                if n.state == crate::wire::ServerState::Looking {
                    "->>"
                } else {
                    "-->>"
                },
                format!(
                    "{} leader {} zxid {:#x} round {:#x} peerEpoch {:#x} at {:+.6}s",
                    n.state.name(),
                    leader_text(n.leader),
                    n.zxid,
                    n.election_epoch,
                    n.effective_peer_epoch(),
                    at
                ),
            ),
            Body::Initial(m) => (
                "->>",
                format!(
                    "initial message sid {} protocol {} at {:+.6}s",
                    m.sid,
                    m.protocol
                        .code()
                        .map_or_else(|| "legacy".to_string(), |c| c.to_string()),
                    at
                ),
            ),
            // Drawn are the election messages; quorum packets and closes are not.
            Body::Problem(_) | Body::Quorum(_) | Body::Closed { .. } => continue,
        };
        lines.push(format!("    {from}{arrow}{to}: {text}"));
    }
    let mut notes = Vec::new();
    for d in election["decisions"].as_array().into_iter().flatten() {
        let sid = d["sid"].as_i64();
        let id = key(sid, None);
        let mut text = format!(
            "{} leader {} at {:+.6}s",
            d["state"].as_str().unwrap_or("?"),
            d["leader"],
            d["time"].as_f64().unwrap_or(started) - started
        );
        if let Some(e) = d["evidence"].as_str() {
            write!(text, " evidence {e}").ok();
        }
        if let Some(c) = d.get("cause").filter(|c| !c.is_null()) {
            write!(text, " cause {}", mermaid_text(&plain(c))).ok();
        }
        notes.push((
            d["time"].as_f64().unwrap_or(started),
            format!("    Note over {id}: {text}"),
        ));
    }
    let mut out = String::from("sequenceDiagram\n");
    writeln!(
        out,
        "    %% zkfle: election {} of the capture, round {:#x}, winner {}, {} messages",
        index + 1,
        election["election_epoch"].as_i64().unwrap_or(0),
        election["winner"],
        lines.len()
    )
    .ok();
    if let Some(c) = election.get("cause").filter(|c| !c.is_null()) {
        writeln!(out, "    %% cause: {}", plain(c)).ok();
    }
    for ((_, _, label), id) in &names {
        writeln!(out, "    participant {id} as {}", mermaid_text(label)).ok();
    }
    // Notes go after the last message sent at or before their time.
    let times: Vec<f64> = window.iter().map(|r| r.time.as_secs_f64()).collect();
    let mut notes_iter = notes.into_iter().peekable();
    for (line, t) in lines.iter().zip(&times) {
        while let Some((nt, _)) = notes_iter.peek() {
            if nt < t {
                out.push_str(&notes_iter.next().unwrap().1);
                out.push('\n');
            } else {
                break;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    for (_, n) in notes_iter {
        out.push_str(&n);
        out.push('\n');
    }
    Ok(out)
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Mermaid ends a statement at `;` and reads `#` as an entity; neither may appear in text.
fn mermaid_text(s: &str) -> String {
    s.replace([';', '#', '\n'], " ")
}
