//! Asking a live server for its state and vote over the election port (`zkfle probe`).
//!
//! The probe connects as a non-member: a sid above any real one, so that the server keeps the
//! connection (the larger sid's connection survives, reference B.1) and treats the sender as a
//! non-voter. It sends, in one write, a V1 initial message and one notification, and reads one
//! frame back: a server answers a non-voter at once with its state, its current vote (the last
//! election's result while it is LOOKING), its logical clock and its config (reference C, row
//! 1). Then it closes.
//!
//! The notification is the 40-byte form with version 1: Java reads no config from it, so it can
//! never make a LOOKING server restart its election (reference A.2), and, coming from a
//! non-voter, it never enters the election. Blocking sockets with time-outs: no probe hangs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{Value, json};

use crate::wire::{
    ElectionAddress, InitialMessage, Notification, ProtocolVersion, QuorumConfig, ServerState,
    encode_frame,
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
#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    pub sid: i64,
    pub timeout: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            sid: PROBE_SID,
            timeout: Duration::from_secs(5),
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

/// The bytes a probe sends: a V1 initial message naming our local address, then one framed
/// 40-byte notification (LOOKING, non-voting proposal, version 1).
pub fn request(sid: i64, local: SocketAddr) -> Vec<u8> {
    let addr = ElectionAddress::from_socket_addr(local);
    let mut out = InitialMessage::versioned(ProtocolVersion::V1, sid, vec![addr])
        .encode()
        .expect("a local address encodes");
    let mut n = Vec::with_capacity(40);
    n.extend_from_slice(&ServerState::Looking.code().to_be_bytes());
    for v in [i64::MIN, i64::MIN, 0, i64::MIN] {
        n.extend_from_slice(&v.to_be_bytes());
    }
    n.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&encode_frame(&n).expect("40 bytes frame"));
    out
}

/// Probes one server at `target` (`host:port`).
pub fn probe(target: &str, opts: &ProbeOptions) -> Result<Answer, ProbeError> {
    let start = std::time::Instant::now();
    let addrs: Vec<SocketAddr> = target
        .to_socket_addrs()
        .map_err(|_| ProbeError::Resolve(target.to_string()))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| ProbeError::Resolve(target.to_string()))?;
    let mut s =
        TcpStream::connect_timeout(&addr, opts.timeout).map_err(|e| io_error(e, "connecting"))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(opts.timeout))
        .and_then(|()| s.set_write_timeout(Some(opts.timeout)))
        .map_err(|e| io_error(e, "configuring"))?;
    let local = s.local_addr().map_err(|e| io_error(e, "connecting"))?;
    s.write_all(&request(opts.sid, local))
        .map_err(|e| io_error(e, "sending"))?;
    // Read one frame, whatever the time-out left over.
    let mut len = [0u8; 4];
    read_exact(&mut s, &mut len, start, opts.timeout)?;
    let len = i32::from_be_bytes(len);
    if len <= 0 || len as usize > crate::wire::frame::MAX_FRAME_BYTES {
        return Err(ProbeError::BadAnswer(format!("frame length {len}")));
    }
    let mut payload = vec![0u8; len as usize];
    read_exact(&mut s, &mut payload, start, opts.timeout)?;
    let _ = s.shutdown(std::net::Shutdown::Both);
    let n = Notification::decode(&payload).map_err(|e| ProbeError::BadAnswer(e.to_string()))?;
    let config = n.config_text().and_then(|t| QuorumConfig::parse(&t).ok());
    Ok(Answer {
        state: n.state,
        leader: n.leader,
        zxid: n.zxid,
        election_epoch: n.election_epoch,
        peer_epoch: n.effective_peer_epoch(),
        config_version: n.config_version(),
        config,
        elapsed: start.elapsed(),
    })
}

fn read_exact(
    s: &mut TcpStream,
    buf: &mut [u8],
    start: std::time::Instant,
    timeout: Duration,
) -> Result<(), ProbeError> {
    let mut got = 0;
    while got < buf.len() {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(ProbeError::Timeout("waiting for the answer"));
        }
        s.set_read_timeout(Some(left))
            .map_err(|e| io_error(e, "waiting for the answer"))?;
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(ProbeError::Closed),
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, "waiting for the answer")),
        }
    }
    Ok(())
}

/// Probes several servers at once (one thread each); results in the order given.
pub fn probe_all(targets: &[String], opts: &ProbeOptions) -> Vec<Result<Answer, ProbeError>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|t| scope.spawn(move || probe(t, opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ProbeError::Io("probe thread panicked".into())))
            })
            .collect()
    })
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
