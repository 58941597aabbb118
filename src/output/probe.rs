//! `zkfle probe`'s rows as JSON (one object per server, docs/replay-probe.md) and as text
//! (one line per server).

use serde_json::{Value, json};

use crate::net::probe::Row;

impl Row {
    /// The JSON object (docs/replay-probe.md).
    pub fn to_json(&self) -> Value {
        let mut v = match &self.result {
            Ok(a) => json!({
                "server": self.server,
                "state": a.state.name(),
                "leader": a.leader,
                "zxid": a.zxid,
                "election_epoch": a.election_epoch,
                "peer_epoch": a.peer_epoch,
                "config_version": a.config_version,
                "elapsed_ms": a.elapsed.as_secs_f64() * 1000.0,
            }),
            Err(e) => json!({
                "server": self.server,
                "error": e.to_string(),
            }),
        };
        if let Some(sid) = self.sid {
            v["sid"] = json!(sid);
        }
        if self.disagrees {
            v["disagrees"] = json!(true);
        }
        v
    }

    /// One line of text.
    pub fn to_text(&self) -> String {
        let sid = self.sid.map(|s| format!("sid {s:<3} ")).unwrap_or_default();
        let flag = if self.disagrees { "  <- disagrees" } else { "" };
        match &self.result {
            Ok(a) => format!(
                "{:<24} {sid}{:<9} leader={} zxid={:#x} peerEpoch={:#x} round={:#x} config={}{flag}",
                self.server,
                a.state.name(),
                a.leader,
                a.zxid,
                a.peer_epoch,
                a.election_epoch,
                a.config_version
                    .map(|v| format!("{v:#x}"))
                    .unwrap_or_else(|| "-".into()),
            ),
            Err(e) => format!("{:<24} {sid}error: {e}{flag}", self.server),
        }
    }
}
