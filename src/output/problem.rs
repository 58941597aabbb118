//! The words of the decoder's problems: one line for people per [`Problem`], as the text
//! timeline, the JSON `what`, ShiViz and the commands' errors print it.

use crate::capture::Timestamp;
use crate::decode::identity::{AddressConflict, SidSource};
use crate::decode::{Boundary, MalformedUnit, Problem, ProblemKind, SaslJudge};
use crate::wire::{PartialNotification, TlsRecord};

/// One line for people: what happened, and what the decoder did about it. `time` is the
/// time of the problem's record (an unacknowledged wait ends there).
pub fn problem_words(p: &Problem, time: Timestamp) -> String {
    match &p.kind {
        ProblemKind::Malformed { error, unit } => match unit {
            MalformedUnit::Frame => {
                format!("{error}; Java closes the connection here; resynchronising")
            }
            MalformedUnit::Notification { bytes } => {
                format!("malformed notification ({bytes} bytes), Java drops it: {error}")
            }
            MalformedUnit::QuorumPacket => {
                format!("malformed quorum packet: {error}; resynchronising")
            }
        },
        ProblemKind::Gap { missing } => {
            format!("{missing} bytes missing from the capture; resynchronising")
        }
        ProblemKind::Cut {
            missing,
            kept,
            partial,
            initial_sid,
        } => {
            let what = match (partial, initial_sid) {
                (Some(p), _) => format!(
                    "; partial notification ({} of {} bytes): {}",
                    p.captured,
                    p.size,
                    partial_words(p)
                ),
                (None, Some(sid)) => format!("; partial initial message: sid {sid}"),
                (None, None) => String::new(),
            };
            format!(
                "packet cut by the capture's snap length after {kept} payload bytes, {missing} bytes not captured (capture whole packets: tcpdump -s 0){what}"
            )
        }
        ProblemKind::Resynced { skipped, to } => {
            let to = match to {
                Boundary::Frame => "frame boundary",
                Boundary::QuorumPacket => "quorum packet",
            };
            format!("skipped {skipped} bytes to the next {to}")
        }
        ProblemKind::MidStream {
            initiator,
            acceptor,
        } => format!(
            "connection {initiator} -> {acceptor} started before the capture; joining it at the first frame boundary"
        ),
        ProblemKind::Capture { detail } => detail.clone(),
        ProblemKind::Unfinished {
            bytes,
            capture_ended,
        } => {
            let end = if *capture_ended {
                "the capture ended"
            } else {
                "the connection closed"
            };
            format!("{end} in the middle of a message ({bytes} bytes of it captured)")
        }
        ProblemKind::Encrypted {
            initiator,
            acceptor,
            seen,
        } => {
            let seen = match seen {
                TlsRecord::Handshake => "a TLS handshake record",
                TlsRecord::ApplicationData => "TLS application data",
            };
            format!(
                "connection {initiator} -> {acceptor} speaks TLS ({seen} seen; quorum TLS, sslQuorum=true): its bytes are encrypted and skipped"
            )
        }
        ProblemKind::Sasl { accepted, user, by } => {
            let by = match by {
                SaslJudge::Server => "server",
                SaslJudge::Leader => "leader",
            };
            let named = user
                .as_ref()
                .map_or(String::new(), |u| format!(" user {u:?}"));
            if *accepted {
                format!("quorum SASL: the {by} accepted the learner{named}")
            } else {
                format!(
                    "quorum SASL: the {by} refused the learner{named} (status ERROR: wrong password, unknown user, or a failed exchange)"
                )
            }
        }
        ProblemKind::Unacknowledged { since, acked } => {
            let waited = time.as_secs_f64() - since.as_secs_f64();
            if *acked {
                format!(
                    "bytes sent waited {waited:.3} s for an acknowledgement, which came now: the other end's host was unreachable"
                )
            } else {
                format!(
                    "bytes sent were still unacknowledged {waited:.3} s later, when the connection or the capture ended: the other end's host was unreachable"
                )
            }
        }
        ProblemKind::AddressConflict(c) => address_conflict_words(c),
    }
}

/// The fields of a cut notification in the words of ZooKeeper's log, `?` where missing.
pub fn partial_words(p: &PartialNotification) -> String {
    let num = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let hex = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| format!("{v:#x}"));
    format!(
        "n.state:{}, n.leader:{}, n.zxid:{}, n.round:{}",
        p.state.map_or("?", |s| s.name()),
        num(p.leader),
        hex(p.zxid),
        hex(p.election_epoch)
    )
}

/// An address conflict in one line: both statements, and which is used from here on.
pub fn address_conflict_words(c: &AddressConflict) -> String {
    format!(
        "election address {} is sid {} by {} and sid {} by {}; sid {} is used from here on",
        c.address,
        c.was.0,
        sid_source_words(c.was.1),
        c.now.0,
        sid_source_words(c.now.1),
        c.now.0
    )
}

/// What said a sid, for people.
pub fn sid_source_words(source: SidSource) -> &'static str {
    match source {
        SidSource::Initial => "an initial message",
        SidSource::SidMap => "--sid-map",
        SidSource::Config => "--config",
        SidSource::NotificationConfig => "the config carried in notifications",
        SidSource::Address => "the IP it dialled from",
        SidSource::Vote => "its first vote",
    }
}
