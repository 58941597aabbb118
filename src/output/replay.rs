//! `zkfle replay`'s report as JSON (docs/replay-probe.md) and as text.

use serde_json::{Value, json};

use crate::replay::{Decided, Report};
use crate::wire::Notification;

impl Report {
    /// The JSON form (docs/replay-probe.md).
    pub fn to_json(&self) -> Value {
        let decisions = |v: &[Decided]| -> Value {
            v.iter()
                .map(|d| {
                    json!({
                        "leader": d.leader,
                        "state": d.state.name(),
                        "round": d.round,
                        "at_ms": d.at_ms,
                    })
                })
                .collect()
        };
        let note = |n: &Option<Notification>| -> Value {
            n.as_ref().map(notification_json).unwrap_or(Value::Null)
        };
        json!({
            "sid": self.sid,
            "target": self.target,
            "recorded": decisions(&self.recorded),
            "replayed": decisions(&self.replayed),
            "match": self.matches(),
            "differences": self.differences.iter().map(|d| json!({
                "to": d.to,
                "index": d.index,
                "recorded": note(&d.recorded),
                "replayed": note(&d.replayed),
            })).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }

    /// The text form.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let line = |d: &Decided| {
            format!(
                "{} leader={} round={:#x} at {} ms",
                d.state.name(),
                d.leader,
                d.round,
                d.at_ms
            )
        };
        let _ = writeln!(s, "replay of sid {} into {}", self.sid, self.target);
        let n = self.recorded.len().max(self.replayed.len());
        for i in 0..n {
            let r = self.recorded.get(i).map(line).unwrap_or_else(|| "-".into());
            let p = self.replayed.get(i).map(line).unwrap_or_else(|| "-".into());
            let mark = match (self.recorded.get(i), self.replayed.get(i)) {
                (Some(a), Some(b)) if (a.state, a.leader) == (b.state, b.leader) => "=",
                _ => "≠",
            };
            let _ = writeln!(s, "  decision {}: recorded {r} {mark} replayed {p}", i + 1);
        }
        let _ = writeln!(
            s,
            "decisions {}",
            if self.matches() { "match" } else { "DIFFER" }
        );
        for d in &self.differences {
            let show = |n: &Option<Notification>| {
                n.as_ref()
                    .map(|n| {
                        format!(
                            "{} leader={} zxid={:#x} round={:#x} peerEpoch={:#x}",
                            n.state.name(),
                            n.leader,
                            n.zxid,
                            n.election_epoch,
                            n.effective_peer_epoch()
                        )
                    })
                    .unwrap_or_else(|| "nothing".into())
            };
            let _ = writeln!(
                s,
                "  to {}: notification #{} recorded {} / replayed {}",
                d.to,
                d.index + 1,
                show(&d.recorded),
                show(&d.replayed)
            );
        }
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        s
    }
}

/// A notification's fields as JSON (state by name).
pub fn notification_json(n: &Notification) -> Value {
    json!({
        "state": n.state.name(),
        "leader": n.leader,
        "zxid": n.zxid,
        "election_epoch": n.election_epoch,
        "peer_epoch": n.effective_peer_epoch(),
        "config_version": n.config_version(),
    })
}
