//! The text timeline of `zkfle decode`: one line per record, in the words ZooKeeper's own
//! logs use.

use crate::decode::{Body, QuorumMessage, Record, Severity};
use crate::wire::{JavaView, Notification};

/// One timeline line, in the words ZooKeeper's own logs use, after the time `stamp`.
pub fn record_text(r: &Record, stamp: &str) -> String {
    let addrs = match (r.src, r.dst) {
        (Some(s), Some(d)) => format!("{s} -> {d}"),
        _ => "-".to_string(),
    };
    let what = match &r.body {
        Body::Initial(m) => format!(
            "initial message: protocol {}, sid {}{}",
            m.protocol
                .code()
                .map_or_else(|| "legacy".to_string(), |c| c.to_string()),
            m.sid,
            if m.address_text.is_empty() {
                String::new()
            } else {
                format!(", address {}", m.address_text)
            }
        ),
        Body::Notification(n) => notification_words(n),
        Body::Quorum(q) => quorum_words(q),
        Body::Closed { reset } => {
            if *reset {
                "connection reset (RST)".to_string()
            } else {
                "connection closed (FIN)".to_string()
            }
        }
        Body::Problem(p) => format!(
            "{}: {}",
            match p.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            p.message
        ),
    };
    format!(
        "{stamp}  {:<44} {:>3} -> {:<3} {}",
        addrs,
        sid(r.from_sid),
        sid(r.to_sid),
        what
    )
}

/// A notification as ZooKeeper 3.5+ logs it on receipt (`Notification: ...`).
pub fn notification_words(n: &Notification) -> String {
    let mut s = format!(
        "Notification: n.state:{}, n.leader:{}, n.round:{:#x}, n.peerEpoch:{:#x}, n.zxid:{:#x}",
        n.state.name(),
        n.leader,
        n.election_epoch,
        n.effective_peer_epoch(),
        n.zxid
    );
    if let JavaView::Accepted { version, .. } = n.java_view() {
        s.push_str(&format!(", message format version:{version:#x}"));
    }
    match n.config_version() {
        Some(v) => s.push_str(&format!(", n.config version:{v:#x}")),
        None => s.push_str(&format!(" ({} bytes, no config)", n.size())),
    }
    if let JavaView::Dropped(why) = n.java_view() {
        s.push_str(&format!("  [{why}]"));
    }
    s
}

/// A quorum packet: its type as Java names it, its zxid, and what else identifies it.
pub fn quorum_words(q: &QuorumMessage) -> String {
    let mut s = format!("{} zxid:{:#x}", q.type_name(), q.zxid);
    if q.type_name() == "UNKNOWN" {
        s.push_str(&format!(" (type {})", q.ptype));
    }
    if let Some(l) = &q.learner {
        s.push_str(&format!(
            ", sid {}, protocol {:#x}, config version {:#x}",
            l.sid, l.protocol_version, l.config_version
        ));
    }
    if let Some(n) = q.snapshot_bytes {
        s.push_str(&format!(", snapshot of {n} bytes followed"));
    }
    s
}

fn sid(s: Option<i64>) -> String {
    s.map_or_else(|| "?".to_string(), |s| s.to_string())
}
