//! Asking a live server for its state and vote over the election port (`zkfle probe`).
//!
//! The probe connects as a non-member: a sid above any real one, so that the server keeps the
//! connection (the larger sid's connection survives, reference B.1) and treats the sender as a
//! non-voter. A server answers a non-voter's notification at once with its state, its current
//! vote (the last election's result while it is LOOKING), its logical clock and its config
//! (reference C, row 1).
//!
//! The first frame on a new connection is not always that answer: Java's SendWorker first
//! re-sends the last message it sent to the same sid (QuorumCnxManager's `lastMessageSent`,
//! kept per sid for the life of the process), or one left in that sid's send queue by an
//! earlier connection; a probe with the same sid a minute earlier made that message, so it
//! shows the server's state of a minute ago. At most one such stale frame comes, and always
//! before any answer. So the probe sends its notification, reads one frame, sends the
//! notification again and reads one more: the second frame is always an answer to one of ours
//! (if the first was stale, the second answers the first notification; if not, it answers the
//! second). The cost is one more round trip.
//!
//! Java's `lookForLeader` sets the server's state before `QuorumPeer` sets its vote, so an
//! answer that lands in between reads FOLLOWING or LEADING with the vote of the election
//! before (docs/java-behaviour.md). A decided answer therefore counts once the next answer
//! repeats it: one more round trip for a decided server, up to three while its answers keep
//! changing.
//!
//! The notification is the 40-byte form with version 1: Java reads no config from it, so it can
//! never make a LOOKING server restart its election (reference A.2), and, coming from a
//! non-voter, it never enters the election. Blocking sockets with time-outs: no probe hangs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::deadline::Deadline;
use super::tls::BlockingQuorumStream;

use crate::wire::{
    Direction, ElectionAddress, FrameReader, InitialMessage, Notification, ProtocolVersion,
    QuorumConfig, ReadError, ServerState, encode_frame,
};

/// The default sid a probe announces: above any real one.
pub const PROBE_SID: i64 = i64::MAX - 1;

/// What a server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub state: ServerState,
    /// The leader its current vote backs.
    pub leader: i64,
    pub zxid: i64,
    /// Its logical clock (round).
    pub election_epoch: i64,
    pub peer_epoch: i64,
    /// The version of the config it carries, when it carries one.
    pub config_version: Option<u64>,
    /// The config it carries, parsed, when readable.
    pub config: Option<QuorumConfig>,
    /// The answer's size in bytes: 40 from 3.4 servers, 44 and more (with a config) from 3.5+.
    pub size: usize,
    /// Round-trip time of the probe.
    pub elapsed: Duration,
}

/// Why a probe got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("connection refused")]
    Refused,
    #[error("timed out {0}")]
    Timeout(&'static str),
    #[error("closed by the server before answering")]
    Closed,
    #[error("{0}")]
    Io(String),
    #[error("bad answer: {0}")]
    BadAnswer(String),
}

/// How to probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub sid: i64,
    pub timeout: Duration,
    /// The initial message's form: V1 (every 3.4.14+ and 3.5+ server reads it) or V2 (3.6+
    /// and 3.4; 3.5.x before 3.5.8 refuse it, ZOOKEEPER-3720).
    pub protocol: ProtocolVersion,
    /// Quorum TLS, when the ensemble speaks it (`sslQuorum`).
    pub tls: Option<std::sync::Arc<super::QuorumTls>>,
    /// Quorum SASL, when the ensemble requires it: the probe authenticates as a learner.
    pub sasl: Option<std::sync::Arc<crate::sasl::QuorumSasl>>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            sid: PROBE_SID,
            timeout: Duration::from_secs(5),
            protocol: ProtocolVersion::V1,
            tls: None,
            sasl: None,
        }
    }
}

fn io_error(e: std::io::Error, what: &'static str) -> ProbeError {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => ProbeError::Refused,
        TimedOut | WouldBlock => ProbeError::Timeout(what),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => ProbeError::Closed,
        _ => ProbeError::Io(e.to_string()),
    }
}

/// The notification a probe sends: LOOKING, a non-voting proposal, the 40-byte form with
/// version 1 (Java reads no config from it).
pub fn probe_notification() -> Notification {
    Notification::without_config(ServerState::Looking, i64::MIN, i64::MIN, 0, i64::MIN)
}

/// The framed probe notification.
fn framed_probe_notification() -> Vec<u8> {
    let n = probe_notification()
        .encode()
        .expect("the probe notification encodes");
    encode_frame(&n).expect("40 bytes frame")
}

/// The bytes a probe sends first: an initial message (V1 or V2) naming our local address, then
/// one framed probe notification.
pub fn request(protocol: ProtocolVersion, sid: i64, local: SocketAddr) -> Vec<u8> {
    let mut out = initial_message(protocol, sid, local);
    out.extend_from_slice(&framed_probe_notification());
    out
}

/// The initial message a probe opens with.
fn initial_message(protocol: ProtocolVersion, sid: i64, local: SocketAddr) -> Vec<u8> {
    let addr = ElectionAddress::from_socket_addr(local);
    InitialMessage::versioned(protocol, sid, vec![addr])
        .encode()
        .expect("a local address encodes")
}

/// Resolves `target` (`host:port`) and connects within `timeout`.
pub fn connect(target: &str, timeout: Duration) -> Result<TcpStream, ProbeError> {
    let addrs: Vec<SocketAddr> = target
        .to_socket_addrs()
        .map_err(|_| ProbeError::Resolve(target.to_string()))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| ProbeError::Resolve(target.to_string()))?;
    let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| io_error(e, "connecting"))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| io_error(e, "configuring"))?;
    Ok(s)
}

/// [`connect`] to an election port, then TLS when `tls` says the ensemble speaks it.
pub fn connect_election(
    target: &str,
    timeout: Duration,
    tls: Option<&super::QuorumTls>,
) -> Result<BlockingQuorumStream, ProbeError> {
    let s = connect(target, timeout)?;
    let peer = s.peer_addr().map_err(|e| io_error(e, "connecting"))?;
    super::tls::wrap_outgoing_blocking(tls, s, peer).map_err(|e| ProbeError::Io(e.to_string()))
}

/// Probes one server at `target` (`host:port`).
pub fn probe(target: &str, opts: &ProbeOptions) -> Result<Answer, ProbeError> {
    let start = std::time::Instant::now();
    let deadline = Deadline::after(opts.timeout, "no answer");
    let s = connect_election(target, opts.timeout, opts.tls.as_deref())?;
    let local = s
        .tcp()
        .local_addr()
        .map_err(|e| io_error(e, "connecting"))?;
    let mut r = reader(s, deadline);
    match opts.sasl.as_deref() {
        // With quorum SASL the learner authenticates between its initial message and its
        // first notification.
        Some(sasl) => {
            r.get_mut()
                .send(&initial_message(opts.protocol, opts.sid, local))
                .map_err(|e| io_error(e, "sending"))?;
            super::sasl::authenticate_learner_blocking(r.get_mut(), sasl).map_err(|e| {
                ProbeError::Io(format!(
                    "SASL authentication: {e}{}",
                    super::sasl::refused_hint(&e, sasl)
                ))
            })?;
            r.get_mut()
                .send(&framed_probe_notification())
                .map_err(|e| io_error(e, "sending"))?;
        }
        None => r
            .get_mut()
            .send(&request(opts.protocol, opts.sid, local))
            .map_err(|e| io_error(e, "sending"))?,
    }
    // The first frame may be a stale re-send (see the module's comment); the one after our
    // second notification is an answer.
    let first = read_frame(&mut r)?;
    Notification::decode(&first).map_err(|e| ProbeError::BadAnswer(e.to_string()))?;
    r.get_mut()
        .send(&framed_probe_notification())
        .map_err(|e| io_error(e, "sending"))?;
    let payload = read_frame(&mut r)?;
    let mut n = Notification::decode(&payload).map_err(|e| ProbeError::BadAnswer(e.to_string()))?;
    // A decided server may have set its state a moment before its vote (see the module's
    // comment): a decision counts once the next answer repeats it.
    for _ in 1..MAX_ANSWERS {
        if n.state == ServerState::Looking {
            break;
        }
        let again = r
            .get_mut()
            .send(&framed_probe_notification())
            .ok()
            .and_then(|()| read_frame(&mut r).ok())
            .and_then(|p| Notification::decode(&p).ok());
        match again {
            Some(next) if same_vote(&next, &n) => break,
            Some(next) => n = next,
            // The answer in hand is the best there is.
            None => break,
        }
    }
    let _ = r.get_ref().stream.tcp().shutdown(std::net::Shutdown::Both);
    // A config that does not parse is left out (`--all` then dials nobody from it), and said.
    let config = n.config_text().and_then(|t| match QuorumConfig::parse(&t) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!("{target}: the config in its answer does not parse ({e}): left out");
            None
        }
    });
    Ok(Answer {
        state: n.state,
        leader: n.leader,
        zxid: n.zxid,
        election_epoch: n.election_epoch,
        peer_epoch: n.effective_peer_epoch(),
        config_version: n.config_version(),
        config,
        size: n.size(),
        elapsed: start.elapsed(),
    })
}

/// The most answers a probe reads while a decided server's answers keep changing.
const MAX_ANSWERS: usize = 4;

/// Two answers give the same state and vote.
fn same_vote(a: &Notification, b: &Notification) -> bool {
    (
        a.state,
        a.leader,
        a.zxid,
        a.election_epoch,
        a.effective_peer_epoch(),
    ) == (
        b.state,
        b.leader,
        b.zxid,
        b.election_epoch,
        b.effective_peer_epoch(),
    )
}

/// An election connection we initiated (plain or TLS) whose reads end by its deadline: no
/// sequence of slow reads outlasts it.
pub struct TimedStream {
    pub stream: BlockingQuorumStream,
    pub deadline: Deadline,
}

impl TimedStream {
    /// Writes all of `bytes` (within the socket's write time-out).
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }
}

impl Write for TimedStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

impl Read for TimedStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.deadline.arm_read(self.stream.tcp())?;
        self.stream.read(buf)
    }
}

/// The frames the server sends on `s` (a connection we initiated), read by `deadline`.
pub fn reader(s: BlockingQuorumStream, deadline: Deadline) -> FrameReader<TimedStream> {
    FrameReader::new(
        TimedStream {
            stream: s,
            deadline,
        },
        Direction::FromAcceptor,
    )
}

/// Reads one frame's payload before the reader's deadline.
pub fn read_frame(r: &mut FrameReader<TimedStream>) -> Result<Vec<u8>, ProbeError> {
    match r.next_frame() {
        Ok(Some(payload)) => Ok(payload),
        Ok(None) | Err(ReadError::Truncated) => Err(ProbeError::Closed),
        Err(ReadError::Wire(e)) => Err(ProbeError::BadAnswer(e.to_string())),
        Err(ReadError::Io(e)) => Err(io_error(e, "waiting for the answer")),
    }
}

/// How many probes run at once.
pub const MAX_PARALLEL: usize = 32;

/// The most addresses `probe --all` (and `doctor`) dial beyond those the user named: a reply's
/// config is the server's word, and a hostile or broken one may list thousands of members.
pub const MAX_MEMBERS_DIALED: usize = 256;

/// Probes several servers, at most [`MAX_PARALLEL`] at once; results in the order given.
pub fn probe_all(targets: &[String], opts: &ProbeOptions) -> Vec<Result<Answer, ProbeError>> {
    let mut out = Vec::with_capacity(targets.len());
    for chunk in targets.chunks(MAX_PARALLEL) {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|t| scope.spawn(move || probe(t, opts)))
                .collect();
            out.extend(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ProbeError::Io("probe thread panicked".into())))
            }));
        });
    }
    out
}

/// What the answer's format shows of the server's version: `3.4` for the 40-byte form without
/// a config (3.4.x servers), `3.5+` for answers carrying a config.
pub fn version_hint(a: &Answer) -> &'static str {
    if a.config_version.is_some() || a.size > 40 {
        "3.5+"
    } else {
        "3.4"
    }
}

/// One line of output: a server, the sid it has in a config (when known), its answer.
#[derive(Debug, Clone)]
pub struct Row {
    pub server: String,
    pub sid: Option<i64>,
    pub result: Result<Answer, ProbeError>,
    /// Set by [`flag_disagreements`]: it backs another leader than most, or did not answer.
    pub disagrees: bool,
}

impl Row {}

/// Marks rows that did not answer, or back a leader other than the one most of the others
/// back, or are LOOKING while others are not.
pub fn flag_disagreements(rows: &mut [Row]) {
    let mut counts: std::collections::BTreeMap<i64, usize> = Default::default();
    for r in rows.iter() {
        if let Ok(a) = &r.result
            && a.state != ServerState::Looking
        {
            *counts.entry(a.leader).or_default() += 1;
        }
    }
    let majority = counts.iter().max_by_key(|(_, c)| **c).map(|(l, _)| *l);
    for r in rows.iter_mut() {
        r.disagrees = match &r.result {
            Err(_) => true,
            Ok(a) => a.state == ServerState::Looking || Some(a.leader) != majority,
        };
    }
}

/// The election addresses (first of each) of every member of `config`, with their sids.
pub fn members(config: &QuorumConfig) -> Vec<(i64, String)> {
    config
        .servers()
        .filter_map(|s| s.addresses.first().map(|a| (s.id, a.election().text)))
        .collect()
}
