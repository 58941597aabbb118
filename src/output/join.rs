//! `zkfle join`'s events (`--events`, `--once`) as JSON lines.

use serde_json::json;

use crate::net::StateEvent;

/// One `--events` line: the event with `time` first, the wall-clock time it was reported in
/// seconds since the epoch (as `zkfle decode` writes capture times), so it lines up with
/// captures and server logs; then `leader`, `state`, `election_epoch`, `zxid`, `peer_epoch`,
/// `took_ms`.
pub fn event_line(ev: &StateEvent) -> String {
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    json!({
        "time": (time * 1e6).round() / 1e6,
        "leader": ev.leader,
        "state": ev.state,
        "election_epoch": ev.election_epoch,
        "zxid": ev.zxid,
        "peer_epoch": ev.peer_epoch,
        "took_ms": ev.took_ms,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_the_time_first() {
        let ev = StateEvent {
            leader: 3,
            state: "FOLLOWING",
            election_epoch: 1,
            zxid: 0,
            peer_epoch: 1,
            took_ms: 15,
        };
        let line = event_line(&ev);
        assert!(line.starts_with("{\"time\":"), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!((v["time"].as_f64().unwrap() - now).abs() < 60.0);
        assert_eq!(v["leader"], 3);
        assert_eq!(v["took_ms"], 15);
    }
}
