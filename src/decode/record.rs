//! What the decoder hands out: one [`Record`] per decoded thing (an initial message, a
//! notification, a quorum packet, a close, a problem), with when, where and between whom.

use std::net::SocketAddr;

use crate::capture::{ConnId, Timestamp};
use crate::decode::identity::SidSource;
use crate::wire::quorum::{LearnerInfo, QuorumPacket, ptype};
use crate::wire::{InitialMessage, Notification, PartialNotification, WireError};

/// One decoded thing, in capture order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Capture time of the segment that completed it.
    pub time: Timestamp,
    /// The connection; `None` for problems with the file itself.
    pub conn: Option<ConnId>,
    /// Sender's socket address.
    pub src: Option<SocketAddr>,
    /// Receiver's socket address.
    pub dst: Option<SocketAddr>,
    /// Sender's sid, when known.
    pub from_sid: Option<i64>,
    /// Receiver's sid, when known.
    pub to_sid: Option<i64>,
    /// How `from_sid` was learned, when no initial message gave it.
    pub from_sid_source: Option<SidSource>,
    /// How `to_sid` was learned, when no initial message gave it.
    pub to_sid_source: Option<SidSource>,
    /// Offset in the sender's byte stream of this connection (in the file, for file problems).
    pub offset: Option<u64>,
    /// The message's exact bytes (a notification's frame payload); empty for problems, and
    /// when the decoder was asked not to keep them ([`crate::decode::DecodeOptions::keep_raw`]).
    pub raw: Vec<u8>,
    /// What it is.
    pub body: Body,
}

/// The content of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Shared with the other records of the same message (see [`crate::wire::InitialCache`]).
    Initial(std::sync::Arc<InitialMessage>),
    Notification(Notification),
    /// A packet on the quorum (Zab) port.
    Quorum(QuorumMessage),
    /// The connection was closed (both FINs, or a RST).
    Closed {
        reset: bool,
        /// A quorum-port (Zab) connection, not an election one.
        quorum: bool,
    },
    Problem(Problem),
}

/// A quorum-port packet as decoded: its type, zxid and, for FOLLOWERINFO/OBSERVERINFO, the
/// learner's [`LearnerInfo`]. The data itself is not kept (a PROPOSAL can be 2 MB), but for
/// what the story needs of a few types: a NEWLEADER's config text and the designated leader of
/// COMMITANDACTIVATE/INFORMANDACTIVATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMessage {
    /// The packet type code (`ptype`), named by [`QuorumMessage::type_name`].
    pub ptype: i32,
    pub zxid: i64,
    /// Bytes of data; `None` for jute's null buffer.
    pub data_len: Option<u32>,
    /// FOLLOWERINFO/OBSERVERINFO: who the learner is.
    pub learner: Option<LearnerInfo>,
    /// COMMITANDACTIVATE/INFORMANDACTIVATE: the sid the activated config designates to lead.
    pub designated_leader: Option<i64>,
    /// NEWLEADER from a 3.5+ leader: the config text it leads under (its data), when no
    /// longer than [`MAX_NEWLEADER_CONFIG`].
    pub config: Option<Box<[u8]>>,
    /// The bytes of the snapshot streamed after a SNAP packet (set on the SNAP record once the
    /// snapshot has ended; `None` otherwise).
    pub snapshot_bytes: Option<u64>,
}

/// The longest NEWLEADER config text kept (Java's is a line per member).
pub const MAX_NEWLEADER_CONFIG: usize = 64 * 1024;

impl QuorumMessage {
    pub(super) fn of(p: &QuorumPacket) -> Self {
        let learner = match p.ptype {
            ptype::FOLLOWERINFO | ptype::OBSERVERINFO => p
                .data
                .as_deref()
                .and_then(|d| LearnerInfo::decode_any(d).ok()),
            _ => None,
        };
        QuorumMessage {
            ptype: p.ptype,
            zxid: p.zxid,
            data_len: p.data.as_ref().map(|d| d.len() as u32),
            learner,
            designated_leader: p.designated_leader().map(|(sid, _)| sid),
            config: p
                .data
                .as_deref()
                .filter(|d| {
                    p.ptype == ptype::NEWLEADER && !d.is_empty() && d.len() <= MAX_NEWLEADER_CONFIG
                })
                .map(Box::from),
            snapshot_bytes: None,
        }
    }

    /// The type's name as Java logs it (`UNKNOWN` for codes Java does not define).
    pub fn type_name(&self) -> &'static str {
        ptype::name(self.ptype)
    }
}

/// Something that could not be decoded, or a caveat about what follows. Its words are
/// [`crate::output::problem_words`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
}

impl Problem {
    pub fn new(kind: ProblemKind) -> Problem {
        Problem { kind }
    }

    /// How bad it is, by its kind: bytes lost or undecodable, or a damaged file, are errors;
    /// the rest are caveats.
    pub fn severity(&self) -> Severity {
        match self.kind {
            ProblemKind::Malformed { .. }
            | ProblemKind::Gap { .. }
            | ProblemKind::Capture { .. } => Severity::Error,
            _ => Severity::Warning,
        }
    }
}

/// How bad a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Bytes that could not be decoded, or a damaged file.
    Error,
    /// A caveat: decoding went on (a connection joined mid-way, a resynchronisation).
    Warning,
}

/// What a malformed message was, which tells what Java does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedUnit {
    /// The election connection's framing (a length or an initial message): Java closes the
    /// connection.
    Frame,
    /// A notification of this many bytes: Java drops it and reads on.
    Notification { bytes: usize },
    /// A quorum-port packet.
    QuorumPacket,
}

/// What a resynchronisation found after skipping bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// An election frame boundary.
    Frame,
    /// A quorum packet's start.
    QuorumPacket,
}

/// Which side of a quorum SASL authentication gave the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslJudge {
    /// The server answering a learner's connection (the election port's SASL exchange).
    Server,
    /// The leader, on the quorum port.
    Leader,
}

/// The kinds of [`Problem`], for programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// A message Java rejects; `error` names field and offset within the message.
    Malformed {
        error: WireError,
        unit: MalformedUnit,
    },
    /// Bytes missing from the capture.
    Gap { missing: u64 },
    /// A packet cut short by the capture's snap length: `missing` bytes of its payload were
    /// not recorded after the `kept` that were, and the fields of the notification they
    /// belonged to that were (`partial`), or the sid of the initial message they cut
    /// (`initial_sid`).
    Cut {
        missing: u64,
        kept: u64,
        partial: Option<PartialNotification>,
        initial_sid: Option<i64>,
    },
    /// Joined a stream at a boundary after skipping bytes.
    Resynced { skipped: u64, to: Boundary },
    /// The connection from `initiator` to `acceptor` started before the capture.
    MidStream {
        initiator: SocketAddr,
        acceptor: SocketAddr,
    },
    /// The capture file itself is damaged; `detail` is the capture reader's error.
    Capture { detail: String },
    /// The capture ended (`capture_ended`), or the connection closed, in the middle of a
    /// message: these bytes of it were never completed.
    Unfinished { bytes: u64, capture_ended: bool },
    /// The connection from `initiator` to `acceptor` speaks TLS (quorum TLS,
    /// `sslQuorum=true`): a TLS record (`seen`) opens it, and its bytes are encrypted, so they
    /// are skipped, not decoded.
    Encrypted {
        initiator: SocketAddr,
        acceptor: SocketAddr,
        seen: crate::wire::TlsRecord,
    },
    /// The verdict of a quorum SASL authentication (`quorum.auth.enableSasl`) on a learner:
    /// the one record a connection's authentication makes (the exchange's other packets make
    /// none).
    Sasl {
        accepted: bool,
        /// The user the learner answered as, when the capture shows its response.
        user: Option<String>,
        by: SaslJudge,
    },
    /// Bytes this direction sent waited a second or more for the other end's TCP
    /// acknowledgement, from `since` to the record's time: its host was unreachable (cut off,
    /// powered off), where a stopped process's kernel still acknowledges. `acked`: an
    /// acknowledgement came at last; otherwise the connection or the capture ended first.
    Unacknowledged {
        since: crate::capture::Timestamp,
        acked: bool,
    },
    /// What this record's message said of an election address names another sid than what
    /// was known of it (see [`super::identity::AddressConflict`]).
    AddressConflict(super::identity::AddressConflict),
}
