//! Leading on the quorum port: a [`Leader`] driven over tokio. One accept loop, one reader
//! and one writer task per learner; the machine, the epoch files and the decisions stay on
//! the driver's task. Writers read the logged txns and the snapshot from disk as they send
//! them, so a large DIFF or SNAP is never held in memory.

use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpListener;

use super::QuorumStream;
use super::tls::{QuorumReadHalf, QuorumWriteHalf};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::election::QuorumVerifier;
use crate::storage::Storage;
use crate::storage::format::FILE_HEADER_LEN;
use crate::storage::history::History;
use crate::wire::QuorumConfig;
use crate::wire::quorum::{
    QuorumItem, QuorumPacket, QuorumStreamDecoder, SnapshotWalker, ptype, snapshot_signature,
};
use crate::zab::Persist;
use crate::zab::leader::{ConnId, Event, Leader, LeaderConfig, LeaderLog, Out, Phase};

/// What leading needs.
#[derive(Debug, Clone)]
pub struct LeadConfig {
    pub my_sid: i64,
    /// Where to listen: the quorum addresses of my own server line (Java's leader binds
    /// them all; its learners use the first that connects).
    pub listen: Vec<SocketAddr>,
    pub quorum: QuorumVerifier,
    pub config: QuorumConfig,
    pub tick_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
    /// Quorum TLS (`sslQuorum`, `portUnification`): how learners' connections are accepted.
    pub tls: Option<Arc<super::QuorumTls>>,
    /// Quorum SASL: learners authenticate before FOLLOWERINFO.
    pub sasl: Option<Arc<crate::sasl::QuorumSasl>>,
    /// Told when a quorum has synced (the leader serves from then on).
    pub status: super::status::StatusBoard,
}

/// How a leadership ended.
#[derive(Debug)]
pub struct LeadEnd {
    pub reason: String,
    /// A quorum holds the whole history and a Java server the hand-over txn.
    pub handed_over: bool,
}

enum FromLearner {
    Packet(QuorumPacket),
    Closed(String),
}

struct Conn {
    tx: mpsc::UnboundedSender<Out>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

impl Conn {
    /// Stops reading; lets the writer send what is queued (at most 200 ms more), which also
    /// closes the socket.
    fn close(self) {
        let Conn {
            tx,
            reader,
            mut writer,
        } = self;
        drop(tx);
        reader.abort();
        tokio::spawn(async move {
            if tokio::time::timeout(Duration::from_millis(200), &mut writer)
                .await
                .is_err()
            {
                writer.abort();
            }
        });
    }
}

/// Decodes `input` and forwards its packets; false when the connection is done.
fn forward_packets(
    conn: ConnId,
    dec: &mut QuorumStreamDecoder,
    mut input: &[u8],
    tx: &mpsc::UnboundedSender<(ConnId, FromLearner)>,
) -> bool {
    loop {
        match dec.decode(&mut input) {
            Ok(Some(QuorumItem::Packet { packet, .. })) => {
                if tx.send((conn, FromLearner::Packet(packet))).is_err() {
                    return false;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return true,
            Err(e) => {
                let _ = tx.send((
                    conn,
                    FromLearner::Closed(format!("malformed quorum packet: {e}")),
                ));
                return false;
            }
        }
    }
}

/// Reads a learner's packets; `already_read` holds bytes read before (a SASL peek's).
async fn read_learner(
    conn: ConnId,
    mut rd: QuorumReadHalf,
    already_read: Vec<u8>,
    tx: mpsc::UnboundedSender<(ConnId, FromLearner)>,
) {
    let mut dec = QuorumStreamDecoder::packets_only();
    if !forward_packets(conn, &mut dec, &already_read, &tx) {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match rd.read(&mut buf).await {
            Ok(0) => {
                let _ = tx.send((
                    conn,
                    FromLearner::Closed("the learner closed the connection".into()),
                ));
                return;
            }
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send((conn, FromLearner::Closed(format!("read: {e}"))));
                return;
            }
        };
        if !forward_packets(conn, &mut dec, &buf[..n], &tx) {
            return;
        }
    }
}

/// Reads logged txns in order, keeping the current file open.
struct TxnReader {
    file: Option<(u32, BufReader<std::fs::File>, u64)>,
}

impl TxnReader {
    fn read(&mut self, h: &History, at: &crate::storage::history::TxnAt) -> io::Result<Vec<u8>> {
        let reuse = matches!(&self.file, Some((f, _, pos)) if *f == at.file && *pos == at.offset);
        if !reuse {
            let mut r =
                BufReader::with_capacity(1 << 16, std::fs::File::open(&h.files[at.file as usize])?);
            r.seek(SeekFrom::Start(at.offset))?;
            self.file = Some((at.file, r, at.offset));
        }
        let (_, r, pos) = self.file.as_mut().expect("set above");
        let mut head = [0u8; 12];
        r.read_exact(&mut head)?;
        let len = i32::from_be_bytes(head[8..12].try_into().unwrap_or([0; 4]));
        if len < 32 || len as usize > crate::wire::quorum::MAX_BUFFER {
            self.file = None;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad txn length {len} at byte {}", at.offset + 8),
            ));
        }
        let mut txn = vec![0u8; len as usize];
        r.read_exact(&mut txn)?;
        let mut eor = [0u8; 1];
        r.read_exact(&mut eor)?;
        *pos = at.offset + 12 + len as u64 + 1;
        Ok(txn)
    }
}

/// Streams the snapshot file's body (walked to its `"/"` end marker) and the signature.
async fn send_snapshot(
    w: &mut BufWriter<QuorumWriteHalf>,
    path: &std::path::Path,
) -> io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(FILE_HEADER_LEN as u64))?;
    let mut walker = SnapshotWalker::body_only();
    let mut buf = vec![0u8; 1 << 16];
    let mut sent = 0u64;
    while !walker.is_body_done() {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: the snapshot body has no end marker", path.display()),
            ));
        }
        let p = walker.feed(&buf[..n]).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        w.write_all(&buf[..p.body]).await?;
        sent += p.body as u64;
    }
    w.write_all(&snapshot_signature()).await?;
    Ok(sent)
}

fn encode(p: &QuorumPacket) -> io::Result<Vec<u8>> {
    p.encode().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", p.type_name()),
        )
    })
}

async fn write_learner(
    conn: ConnId,
    wr: QuorumWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Out>,
    history: Arc<History>,
    back: mpsc::UnboundedSender<(ConnId, FromLearner)>,
) {
    let mut w = BufWriter::with_capacity(1 << 16, wr);
    let mut reader = TxnReader { file: None };
    let fail = |why: String| {
        let _ = back.send((conn, FromLearner::Closed(why)));
    };
    while let Some(out) = rx.recv().await {
        let r: io::Result<()> = async {
            match out {
                Out::Packet(p) => w.write_all(&encode(&p)?).await?,
                Out::LoggedPairs { after, upto } => {
                    let start = history.txns.partition_point(|t| t.zxid <= after);
                    for at in history.txns[start..].iter().take_while(|t| t.zxid <= upto) {
                        let txn = reader.read(&history, at)?;
                        let p = QuorumPacket::new(ptype::PROPOSAL, at.zxid, Some(txn));
                        w.write_all(&encode(&p)?).await?;
                        let c = QuorumPacket::op(ptype::COMMIT, at.zxid);
                        w.write_all(&encode(&c)?).await?;
                    }
                }
                Out::Snapshot => {
                    let Some((z, path)) = &history.snapshot else {
                        return Err(io::Error::other("no snapshot to send"));
                    };
                    let n = send_snapshot(&mut w, path).await?;
                    info!(
                        "sent the snapshot of 0x{z:x} ({n} bytes) from {}",
                        path.display()
                    );
                }
            }
            if rx.is_empty() {
                w.flush().await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = r {
            return fail(format!("write: {e}"));
        }
    }
}

/// Leads until the leadership ends: handed over, or failed as Java's would (no quorum in
/// time, quorum lost). `now` is the driver's clock in milliseconds.
pub async fn lead(cfg: LeadConfig, storage: &mut Storage, now: impl Fn() -> u64) -> LeadEnd {
    let end = |reason: String, handed_over| LeadEnd {
        reason,
        handed_over,
    };
    if let Err(e) = storage.sync() {
        return end(format!("storage: {e}"), false);
    }
    let history = match storage.history() {
        Ok(h) => Arc::new(h),
        Err(e) => return end(format!("cannot read the log: {e}"), false),
    };
    let (atx, mut accepted) = mpsc::unbounded_channel::<(QuorumStream, SocketAddr, Vec<u8>)>();
    let mut acceptors: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    for addr in &cfg.listen {
        let listener = match bind(*addr, cfg.tick_ms * cfg.init_limit).await {
            Ok(l) => l,
            Err(e) => {
                for a in acceptors {
                    a.abort();
                }
                return end(
                    format!("cannot listen on the quorum port {addr}: {e}"),
                    false,
                );
            }
        };
        let atx = atx.clone();
        let tls = cfg.tls.clone();
        let sasl = cfg.sasl.clone();
        let handshake_limit = Duration::from_millis(cfg.tick_ms * cfg.init_limit);
        acceptors.push(tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((tcp, peer)) => {
                        let _ = tcp.set_nodelay(true);
                        if tls.is_none() && sasl.is_none() {
                            if atx.send((QuorumStream::Plain(tcp), peer, Vec::new())).is_err() {
                                return;
                            }
                            continue;
                        }
                        // Handshakes off the accept loop: a silent connector holds up no one.
                        let (tls, sasl, atx) = (tls.clone(), sasl.clone(), atx.clone());
                        tokio::spawn(async move {
                            let handshake = async {
                                let mut s = super::tls::wrap_incoming(tls.as_deref(), tcp, peer)
                                    .await?;
                                let mut already_read = Vec::new();
                                // As LearnerHandler.run: the learner authenticates before
                                // FOLLOWERINFO.
                                if let Some(sasl) = sasl.as_deref() {
                                    super::sasl::authenticate_server(&mut s, &mut already_read, sasl)
                                        .await?
                                        .log(&format!("at {peer}"));
                                }
                                Ok::<_, std::io::Error>((s, already_read))
                            };
                            match tokio::time::timeout(handshake_limit, handshake).await {
                                Ok(Ok((s, already_read))) => {
                                    let _ = atx.send((s, peer, already_read));
                                }
                                Ok(Err(e)) => warn!(
                                    "Server failed to authenticate quorum learner, addr: {peer}, closing connection: {e}"
                                ),
                                Err(_) => warn!(
                                    "learner connection from {peer}: no TLS handshake or SASL exchange within initLimit*tickTime"
                                ),
                            }
                        });
                    }
                    Err(e) => {
                        warn!("accept on the quorum port: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    let listen: Vec<String> = cfg.listen.iter().map(|a| a.to_string()).collect();
    let log = LeaderLog {
        base: history.base(),
        has_snapshot: history.snapshot.is_some(),
        txns: history.txns.iter().map(|t| t.zxid).collect(),
    };
    info!(
        "LEADING on {}: acceptedEpoch {}, currentEpoch {}, history 0x{:x}..0x{:x} ({} logged txns{})",
        listen.join(" "),
        storage.accepted_epoch(),
        storage.current_epoch(),
        log.base,
        log.last_zxid(),
        log.txns.len(),
        if log.has_snapshot {
            ", after a snapshot"
        } else {
            ""
        }
    );
    let mut leader = Leader::new(
        LeaderConfig {
            my_sid: cfg.my_sid,
            quorum: cfg.quorum.clone(),
            tick_ms: cfg.tick_ms,
            init_limit: cfg.init_limit,
            sync_limit: cfg.sync_limit,
        },
        cfg.config.clone(),
        log,
        storage.accepted_epoch(),
        storage.current_epoch(),
        now(),
    );
    let (tx, mut rx) = mpsc::unbounded_channel::<(ConnId, FromLearner)>();
    let mut conns: std::collections::BTreeMap<ConnId, Conn> = Default::default();
    let mut next_id: ConnId = 1;
    let mut sids: std::collections::BTreeMap<ConnId, i64> = Default::default();
    let result = 'lead: loop {
        // Persist, then send, then close.
        let ready = leader.ready();
        for p in ready.persist {
            let r = match p {
                Persist::AcceptedEpoch(e) => storage.set_accepted_epoch(e),
                Persist::CurrentEpoch(e) => storage.set_current_epoch(e),
                other => Err(io::Error::other(format!("unexpected persist {other:?}"))),
            };
            if let Err(e) = r {
                break 'lead end(format!("storage: {e}"), false);
            }
        }
        for (c, out) in ready.send {
            if let Some(conn) = conns.get(&c) {
                let _ = conn.tx.send(out);
            }
        }
        for c in ready.close {
            if let Some(conn) = conns.remove(&c) {
                conn.close();
            }
        }
        while let Some(ev) = leader.poll_event() {
            match ev {
                Event::LearnerInfo {
                    conn,
                    sid,
                    observer,
                } => {
                    sids.insert(conn, sid);
                    info!(
                        "{} sid: {sid} connected",
                        if observer { "Observer" } else { "Follower" }
                    );
                }
                Event::EpochProposed { epoch, sids } => {
                    info!("epoch {epoch} accepted by a quorum {sids:?}: sending LEADERINFO")
                }
                Event::Sync {
                    sid,
                    kind,
                    zxid,
                    peer_last_zxid,
                    pairs,
                } => info!(
                    "Synchronizing with Learner sid: {sid} peerLastZxid=0x{peer_last_zxid:x}: Sending {} 0x{zxid:x} and {pairs} PROPOSAL+COMMIT pairs",
                    kind.name()
                ),
                Event::Established { epoch, sids } => {
                    cfg.status.synced(None);
                    info!(
                    target: super::STATE_LOG,
                    "Have quorum of supporters, sids: [ {sids:?} ]; epoch {epoch} established: proposing the hand-over txn 0x{:x}",
                    (epoch << 32) | 1
                    );
                }
                Event::HandoverAck { sid } => info!("sid {sid} acknowledged the hand-over txn"),
                Event::LearnerClosed { sid, why } => match sid {
                    Some(s) => info!("learner sid {s} closed: {why}"),
                    None => info!("learner closed: {why}"),
                },
                Event::Ended {
                    handed_over,
                    reason,
                } => {
                    let dropped = leader.dropped_requests();
                    if dropped > 0 {
                        info!("dropped {dropped} forwarded client requests (zkfle serves none)");
                    }
                    break 'lead end(reason, handed_over);
                }
            }
        }
        cfg.status
            .leader_gauges(leader.gauges(), leader.phase() == Phase::Broadcast);
        let wait = leader
            .next_deadline()
            .map(|d| d.saturating_sub(now()))
            .unwrap_or(1000);
        tokio::select! {
            a = accepted.recv() => {
                // The acceptors' sender lives as long as this function: never None.
                let Some((stream, peer, already_read)) = a else { continue };
                let id = next_id;
                next_id += 1;
                let (rd, wr) = stream.into_split();
                let (otx, orx) = mpsc::unbounded_channel();
                let reader = tokio::spawn(read_learner(id, rd, already_read, tx.clone()));
                let writer = tokio::spawn(write_learner(id, wr, orx, history.clone(), tx.clone()));
                conns.insert(id, Conn { tx: otx, reader, writer });
                info!("learner connection {id} from {peer}");
                leader.on_connect(now(), id);
            }
            m = rx.recv() => {
                let Some((c, m)) = m else { continue };
                match m {
                    FromLearner::Packet(p) => leader.on_packet(now(), c, p),
                    FromLearner::Closed(why) => {
                        if let Some(conn) = conns.remove(&c) {
                            conn.close();
                        }
                        leader.on_disconnect(c, why);
                    }
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(wait)) => leader.on_timer(now()),
        }
    };
    for (_, conn) in conns {
        conn.close();
    }
    // The listeners close with their tasks: the port is free for the next leadership.
    for a in acceptors {
        a.abort();
    }
    result
}

/// Binds the quorum port, retrying while it is still held (a previous leadership's sockets
/// closing) for up to `limit_ms`.
async fn bind(addr: SocketAddr, limit_ms: u64) -> io::Result<TcpListener> {
    let start = std::time::Instant::now();
    loop {
        let sock = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        match sock.bind(addr).and_then(|_| sock.listen(64)) {
            Ok(l) => return Ok(l),
            Err(e) if start.elapsed() < Duration::from_millis(limit_ms) => {
                warn!("cannot bind the quorum port {addr} yet: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
