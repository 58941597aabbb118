//! `zkfle doctor`'s report as JSON (its contract) and as text.

use serde_json::{Value, json};

use crate::repro::doctor::Report;

impl Report {
    pub fn to_json(&self) -> Value {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .map(|s| {
                let (state, leader) = match &s.answer {
                    Ok(a) => (json!(a.state.name()), json!(a.leader)),
                    Err(_) => (Value::Null, Value::Null),
                };
                json!({
                    "address": s.member.address,
                    "sid": s.member.sid,
                    "client": s.member.client,
                    "state": state,
                    "leader": leader,
                    "version": s.version,
                    "problems": s.problems,
                    "advice": s.advice,
                })
            })
            .collect();
        let advice: Vec<Value> = self
            .advice()
            .into_iter()
            .map(|(text, servers)| json!({"advice": text, "servers": servers}))
            .collect();
        json!({"servers": servers, "advice": advice, "healthy": self.healthy()})
    }

    /// Each piece of advice once, with the servers it concerns (their addresses), in the
    /// order first given.
    pub fn advice(&self) -> Vec<(&str, Vec<&str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        for s in &self.servers {
            for a in &s.advice {
                match out.iter_mut().find(|(t, _)| *t == a.as_str()) {
                    Some((_, servers)) => servers.push(&s.member.address),
                    None => out.push((a, vec![&s.member.address])),
                }
            }
        }
        out
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            let sid = s
                .member
                .sid
                .map(|v| format!("sid {v:<3} "))
                .unwrap_or_default();
            let what = match &s.answer {
                Ok(a) => format!(
                    "{:<9} leader={} round={:#x} peerEpoch={:#x}",
                    a.state.name(),
                    a.leader,
                    a.election_epoch,
                    a.peer_epoch
                ),
                Err(e) => format!("no answer: {e}"),
            };
            let version = s
                .version
                .as_deref()
                .map(|v| format!("  version {v}"))
                .unwrap_or_default();
            let mark = if s.problems.is_empty() {
                "ok"
            } else {
                "PROBLEM"
            };
            out.push_str(&format!(
                "{mark:<7} {:<22} {sid}{what}{version}\n",
                s.member.address
            ));
            for p in &s.problems {
                out.push_str(&format!("        problem: {p}\n"));
            }
        }
        let advice = self.advice();
        if !advice.is_empty() {
            out.push_str("advice:\n");
            for (text, servers) in advice {
                out.push_str(&format!("  {}: {text}\n", servers.join(", ")));
            }
        }
        let n = self
            .servers
            .iter()
            .filter(|s| !s.problems.is_empty())
            .count();
        if n == 0 {
            out.push_str(&format!("healthy: {} server(s)\n", self.servers.len()));
        } else {
            out.push_str(&format!(
                "unhealthy: {n} of {} server(s) with problems\n",
                self.servers.len()
            ));
        }
        out
    }
}
