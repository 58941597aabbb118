//! Following a leader on its quorum port: a [`Learner`] driven over a tokio TCP stream, with
//! [`Storage`] carrying out its persist actions (fsync before any send of the same batch).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::QuorumStream;
use tracing::{info, warn};

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::storage::Storage;
use crate::storage::staging::Staging;
use crate::wire::WireError;
use crate::wire::quorum::{QuorumItem, QuorumStreamDecoder, ptype};
use crate::zab::{Event, Learner, LearnerConfig, Persist, SyncKind};

/// Connect attempts to a new leader's quorum port (100 ms apart) that may fail before it is
/// a warning: the leader opens the port a little after it decides.
const QUIET_CONNECT_TRIES: u32 = 3;

/// Where and how to follow.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    pub leader_sid: i64,
    pub leader_addr: SocketAddr,
    pub learner: LearnerConfig,
    /// Set to the new epoch at UPTODATE, for the node to put into its election vote (Java's
    /// `updateElectionVote`, ZOOKEEPER-1732): servers that join later count a FOLLOWING vote
    /// only when its peer epoch is the leader's (`Vote.equals` outside LOOKING).
    pub established_epoch: Arc<AtomicI64>,
    /// Quorum TLS (`sslQuorum`): the leader's quorum port speaks TLS.
    pub tls: Option<Arc<super::QuorumTls>>,
    /// Quorum SASL: we authenticate to the leader before FOLLOWERINFO.
    pub sasl: Option<Arc<crate::sasl::QuorumSasl>>,
    /// With reconfig enabled: the zoo.cfg whose dynamic config files activation writes, and
    /// where to tell the node about each config activated.
    pub reconfig: Option<ReconfigIo>,
    /// Told when the session has synced, and of the data tree as txns commit.
    pub status: super::status::StatusBoard,
}

/// Where a follow session writes configs and reports activations.
#[derive(Debug, Clone)]
pub struct ReconfigIo {
    pub cfg_path: std::path::PathBuf,
    pub news: tokio::sync::mpsc::UnboundedSender<ConfigNews>,
}

/// What a follow session tells the node about configs (after writing their files).
#[derive(Debug, Clone)]
pub enum ConfigNews {
    /// A reconfig was proposed (or NEWLEADER carried a config): the last seen config.
    Seen(crate::wire::QuorumConfig),
    Activated(Activated),
}

/// A config the follow session activated (its files are written).
#[derive(Debug, Clone)]
pub struct Activated {
    pub config: crate::wire::QuorumConfig,
    pub activation: crate::reconfig::Activation,
    pub designated_leader: Option<i64>,
}

/// How many of the latest latencies [`AckStats`] keeps for its percentiles.
const ACK_SAMPLES: usize = 1 << 16;

/// Proposal-received to ACK-sent latencies, in microseconds: the count and maximum of all of
/// them, percentiles over the latest `ACK_SAMPLES` (a ring, so that a follower that runs for
/// months does not grow by 4 bytes a proposal).
#[derive(Debug, Clone, Default)]
pub struct AckStats {
    micros: Vec<u32>,
    next: usize,
    count: usize,
    max: u32,
}

impl AckStats {
    /// Records `n` ACKs that took `us` each.
    pub fn record(&mut self, us: u32, n: usize) {
        for _ in 0..n {
            if self.micros.len() < ACK_SAMPLES {
                self.micros.push(us);
            } else {
                self.micros[self.next] = us;
                self.next = (self.next + 1) % ACK_SAMPLES;
            }
        }
        self.count += n;
        if n > 0 {
            self.max = self.max.max(us);
        }
    }

    /// (count, p50, p99, max) in microseconds.
    pub fn summary(&self) -> (usize, u32, u32, u32) {
        let mut v = self.micros.clone();
        v.sort_unstable();
        let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q) as usize).copied();
        (
            self.count,
            at(0.5).unwrap_or(0),
            at(0.99).unwrap_or(0),
            self.max,
        )
    }
}

/// Why a follow session ended.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("cannot connect to leader {sid} at {addr}: {source}")]
    Connect {
        sid: i64,
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Logging, syncing or installing what the leader sent failed.
    #[error("storage: {0}")]
    Storage(std::io::Error),
    #[error("cannot encode {packet}: {source}")]
    Encode {
        packet: &'static str,
        source: WireError,
    },
    #[error("write to leader: {0}")]
    Write(std::io::Error),
    /// The learner closed the session: the leader went away, a time-out, a protocol error
    /// (its reason, as the learner words it).
    #[error("{0}")]
    Closed(String),
}

/// How a follow session ended.
#[derive(Debug)]
pub struct FollowEnd {
    pub reason: FollowError,
    /// Whether UPTODATE was reached.
    pub synced: bool,
}

async fn connect(cfg: &FollowConfig, limit: Duration) -> std::io::Result<QuorumStream> {
    let start = Instant::now();
    let mut tries = 0;
    loop {
        match tokio::time::timeout(limit, TcpStream::connect(cfg.leader_addr)).await {
            Ok(Ok(s)) => {
                s.set_nodelay(true)?;
                // A failed TLS handshake or SASL exchange is not retried: the certificates
                // and passwords will not change.
                let left = limit.saturating_sub(start.elapsed());
                let handshake = async {
                    let mut s =
                        super::tls::wrap_outgoing(cfg.tls.as_deref(), s, cfg.leader_addr).await?;
                    // As Learner.connectToLeader: authenticate before FOLLOWERINFO.
                    if let Some(sasl) = cfg.sasl.as_deref() {
                        super::sasl::authenticate_learner(&mut s, sasl)
                            .await
                            .map_err(|e| {
                                std::io::Error::new(
                                    e.kind(),
                                    format!(
                                        "SASL authentication: {e}{}",
                                        super::sasl::refused_hint(&e, sasl)
                                    ),
                                )
                            })?;
                    }
                    Ok(s)
                };
                return match tokio::time::timeout(left, handshake).await {
                    Ok(r) => r,
                    Err(_) => Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "TLS handshake or SASL exchange timed out",
                    )),
                };
            }
            Ok(Err(e)) if start.elapsed() + Duration::from_millis(100) < limit => {
                // Java warns at every try. A new leader opens its quorum port a little after
                // its decision, so the first tries of an ordinary re-election fail: those are
                // told at INFO, and a leader still refusing after them is warned about.
                let remaining = limit.saturating_sub(start.elapsed()).as_millis();
                if tries < QUIET_CONNECT_TRIES {
                    info!(
                        "Unexpected exception, tries={tries}, remaining init limit={remaining}, connecting to {}: {e}",
                        cfg.leader_addr
                    );
                } else {
                    warn!(
                        "Unexpected exception, tries={tries}, remaining init limit={remaining}, connecting to {}: {e}",
                        cfg.leader_addr
                    );
                }
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                ));
            }
        }
    }
}

/// With reconfig enabled: the zoo.cfg, my sid, and where to report configs.
type ConfigFiles<'a> = Option<(
    &'a std::path::Path,
    i64,
    &'a tokio::sync::mpsc::UnboundedSender<ConfigNews>,
)>;

/// Carries out a Ready's persists durably; true when something was appended.
fn persist(
    storage: &mut Storage,
    staging: &mut Staging,
    actions: Vec<Persist>,
    snapshot_max_zxid: i64,
    files: ConfigFiles<'_>,
) -> std::io::Result<bool> {
    let mut appended = false;
    for a in actions {
        match a {
            Persist::AcceptedEpoch(e) => storage.set_accepted_epoch(e)?,
            Persist::CurrentEpoch(e) => {
                storage.sync()?;
                storage.set_current_epoch(e)?
            }
            Persist::Truncate(z) => {
                info!("Truncating log to get in sync with the leader 0x{z:x}");
                storage.truncate(z)?
            }
            Persist::InstallSnapshot(z) => {
                storage.finish_snapshot(snapshot_max_zxid)?;
                info!(
                    "installed the snapshot of 0x{z:x} as of zxid 0x{:x}",
                    storage.last_zxid()
                );
            }
            Persist::Append { zxid, txn } => {
                storage.append(zxid, &txn)?;
                appended = true;
            }
            Persist::Stage { zxid, txn } => staging.stage(zxid, &txn)?,
            Persist::AppendStaged { skip } => {
                let n = staging.append_to(storage, &skip)?;
                info!("logged {n} proposals of the DIFF");
            }
            Persist::NextConfig(c) => {
                if let Some((path, _, news)) = files {
                    crate::zoocfg::write_next_config(path, &c)?;
                    info!(
                        "last seen config: version 0x{:x}, written to {}",
                        c.version(),
                        crate::zoocfg::next_config_path(path).display()
                    );
                    let _ = news.send(ConfigNews::Seen(c));
                }
            }
            Persist::ActivateConfig(c) => {
                if let Some((path, my_id, _)) = files {
                    // As Java's processReconfig: the log holds the reconfig txn already.
                    storage.sync()?;
                    let written = crate::zoocfg::activate_config(path, &c, my_id)?;
                    info!(
                        "activated config version 0x{:x}: {}",
                        c.version(),
                        written.display()
                    );
                }
            }
        }
    }
    if appended {
        storage.sync()?;
    }
    Ok(appended)
}

/// Takes the learner's Ready: persists durably, then sends. Returns how many proposal ACKs
/// were sent.
async fn flush(
    learner: &mut Learner,
    storage: &mut Storage,
    staging: &mut Staging,
    stream: &mut QuorumStream,
    snapshot_max_zxid: i64,
    files: ConfigFiles<'_>,
    synced: bool,
) -> Result<usize, FollowError> {
    if !learner.has_ready() {
        return Ok(0);
    }
    let ready = learner.ready();
    persist(storage, staging, ready.persist, snapshot_max_zxid, files)
        .map_err(FollowError::Storage)?;
    let faults = super::faults::get();
    if ready
        .send
        .iter()
        .any(|p| p.ptype == ptype::ACK && p.zxid & 0xffff_ffff != 0)
    {
        faults.crash_if(
            &faults.crash_before_ack,
            "after logging a proposal, before its ACK",
        );
    }
    let mut out = Vec::new();
    let mut acks = 0;
    for p in &ready.send {
        if p.ptype == ptype::ACK && p.zxid & 0xffff_ffff != 0 {
            acks += 1;
        }
        out.extend_from_slice(&p.encode().map_err(|source| FollowError::Encode {
            packet: p.type_name(),
            source,
        })?);
    }
    if !out.is_empty() {
        stream.write_all(&out).await.map_err(FollowError::Write)?;
        stream.flush().await.map_err(FollowError::Write)?;
    }
    // Before UPTODATE, an ACK of an epoch's first zxid is NEWLEADER's.
    if !synced
        && ready
            .send
            .iter()
            .any(|p| p.ptype == ptype::ACK && p.zxid & 0xffff_ffff == 0)
    {
        faults.crash_if(
            &faults.crash_after_newleader_ack,
            "after ACKing NEWLEADER, before UPTODATE",
        );
    }
    Ok(acks)
}

/// Follows the leader until the session ends (leader gone, timeout, protocol error).
/// `now` gives the driver's clock in milliseconds.
pub async fn follow(
    cfg: FollowConfig,
    storage: &mut Storage,
    stats: &mut AckStats,
    now: impl Fn() -> u64,
) -> FollowEnd {
    let end = follow_session(cfg, storage, stats, now).await;
    // As Java's fastForwardDataBase: every logged txn is in the tree when the session is over.
    storage.fast_forward();
    end
}

async fn follow_session(
    cfg: FollowConfig,
    storage: &mut Storage,
    stats: &mut AckStats,
    now: impl Fn() -> u64,
) -> FollowEnd {
    let lc = &cfg.learner;
    let limit = Duration::from_millis(lc.tick_ms * lc.init_limit);
    let mut stream = match connect(&cfg, limit).await {
        Ok(s) => s,
        Err(source) => {
            return FollowEnd {
                reason: FollowError::Connect {
                    sid: cfg.leader_sid,
                    addr: cfg.leader_addr,
                    source,
                },
                synced: false,
            };
        }
    };
    info!(
        "following leader {} at {} (acceptedEpoch {}, currentEpoch {}, last zxid 0x{:x})",
        cfg.leader_sid,
        cfg.leader_addr,
        storage.accepted_epoch(),
        storage.current_epoch(),
        storage.last_zxid()
    );
    let mut learner = Learner::new(
        cfg.learner.clone(),
        storage.accepted_epoch(),
        storage.current_epoch(),
        storage.last_zxid(),
        now(),
    );
    let mut decoder = QuorumStreamDecoder::new();
    // Dropped (its file removed) when the session ends, however it ends.
    let mut staging = Staging::new(storage.dir());
    let mut buf = vec![0u8; 1 << 16];
    let mut sync = SyncProgress {
        synced: false,
        kind: None,
        since: std::time::Instant::now(),
    };
    let mut snap_max = 0i64;
    let end = |reason: FollowError, synced| FollowEnd { reason, synced };
    let files = cfg
        .reconfig
        .as_ref()
        .map(|r| (r.cfg_path.as_path(), lc.my_sid, &r.news));
    loop {
        match flush(
            &mut learner,
            storage,
            &mut staging,
            &mut stream,
            snap_max,
            files,
            sync.synced,
        )
        .await
        {
            Ok(_) => {
                cfg.status.tree(storage.tree());
                learner.resume(now())
            }
            Err(e) => {
                storage.abort_snapshot();
                return end(e, sync.synced);
            }
        }
        if let Some(why) = report_events(&mut learner, &cfg, &mut sync) {
            storage.abort_snapshot();
            return end(FollowError::Closed(why), sync.synced);
        }
        let Some(n) = read_leader(&mut stream, &mut buf, &mut learner, &now).await else {
            continue;
        };
        let t_read = Instant::now();
        let t = now();
        let proposals = feed(
            &mut decoder,
            &buf[..n],
            &mut learner,
            storage,
            (t, &cfg.status),
            &mut snap_max,
        );
        // Persist, then send; measure proposal-received to ACK-sent for this batch.
        match flush(
            &mut learner,
            storage,
            &mut staging,
            &mut stream,
            snap_max,
            files,
            sync.synced,
        )
        .await
        {
            Ok(acks) if proposals > 0 && sync.synced => {
                let us = t_read.elapsed().as_micros().min(u32::MAX as u128) as u32;
                stats.record(us, acks);
                learner.resume(now());
            }
            Ok(_) => learner.resume(now()),
            Err(e) => {
                storage.abort_snapshot();
                return end(e, sync.synced);
            }
        }
    }
}

/// Reads from the leader until the learner's deadline: the bytes read, or `None` when the
/// deadline passed or the connection ended (the learner has been told either way).
async fn read_leader(
    stream: &mut QuorumStream,
    buf: &mut [u8],
    learner: &mut Learner,
    now: &impl Fn() -> u64,
) -> Option<usize> {
    if let Some(delay) = super::faults::get().read_delay() {
        tokio::time::sleep(delay).await;
    }
    let wait = learner
        .next_deadline()
        .map(|d| d.saturating_sub(now()))
        .unwrap_or(1000);
    tokio::select! {
        r = stream.read(buf) => match r {
            Ok(0) => {
                learner.on_disconnect("the leader closed the connection".into());
                None
            }
            Ok(n) => Some(n),
            Err(e) => {
                learner.on_disconnect(format!("read from leader: {e}"));
                None
            }
        },
        _ = tokio::time::sleep(Duration::from_millis(wait)) => {
            learner.on_timer(now());
            None
        }
    }
}

/// Logs what the learner reports (in Java's words where Java logs it) and passes config news
/// on; the reason, when the learner closed the session.
/// How far the session's sync has come: for its state line, the mode and its start.
struct SyncProgress {
    synced: bool,
    kind: Option<SyncKind>,
    since: std::time::Instant,
}

fn report_events(
    learner: &mut Learner,
    cfg: &FollowConfig,
    sync: &mut SyncProgress,
) -> Option<String> {
    let lc = &cfg.learner;
    while let Some(ev) = learner.poll_event() {
        match ev {
            // Java's words (Learner.syncWithLeader) for each sync mode: the SNAP and TRUNC
            // lines are logged where the snapshot and the truncation begin.
            Event::SyncStarted { kind, zxid } => {
                sync.kind = Some(kind);
                if kind == SyncKind::Diff {
                    info!("Getting a diff from the leader 0x{zxid:x}")
                }
            }
            Event::UpToDate { epoch } => {
                sync.synced = true;
                cfg.status
                    .synced(Some(sync.since.elapsed().as_millis() as u64));
                info!("Learner received UPTODATE message");
                cfg.established_epoch.store(epoch, Ordering::Release);
                info!(
                    target: super::STATE_LOG,
                    "synced with leader {} in epoch {epoch} by {} in {} ms (last zxid 0x{:x})",
                    cfg.leader_sid,
                    sync.kind.map_or("DIFF", SyncKind::name),
                    sync.since.elapsed().as_millis(),
                    learner.last_zxid()
                );
            }
            Event::Activated {
                config,
                activation,
                designated_leader,
            } => {
                info!(
                    "reconfig: config 0x{:x} in force, I am {}{}{}",
                    config.version(),
                    crate::reconfig::Membership::of(&config, lc.my_sid).name(),
                    if activation.role_changed {
                        " (role changed)"
                    } else {
                        ""
                    },
                    if activation.leader_changed {
                        format!(" (leader now {designated_leader:?})")
                    } else {
                        String::new()
                    }
                );
                if let Some(r) = &cfg.reconfig {
                    let _ = r.news.send(ConfigNews::Activated(Activated {
                        config,
                        activation,
                        designated_leader,
                    }));
                }
            }
            Event::Closed(why) => return Some(why),
        }
    }
    None
}

/// Feeds what was read from the leader to the learner (and a snapshot's bytes to storage);
/// the number of proposals in it.
fn feed(
    decoder: &mut QuorumStreamDecoder,
    mut input: &[u8],
    learner: &mut Learner,
    storage: &mut Storage,
    (t, status): (u64, &super::status::StatusBoard),
    snap_max: &mut i64,
) -> u32 {
    let mut proposals = 0u32;
    loop {
        match decoder.decode(&mut input) {
            Ok(Some(QuorumItem::Packet { packet, .. })) => {
                if packet.ptype == ptype::SNAP {
                    info!("Getting a snapshot from leader 0x{:x}", packet.zxid);
                    if let Err(e) = storage.begin_snapshot(packet.zxid) {
                        learner.on_disconnect(format!("storage: {e}"));
                        break;
                    }
                }
                if packet.ptype == ptype::PROPOSAL {
                    proposals += 1;
                }
                // Java counts what a synced follower receives (Follower.processPacket).
                if learner.phase() == crate::zab::Phase::Broadcast
                    && matches!(packet.ptype, ptype::PROPOSAL | ptype::COMMIT)
                {
                    status.received(packet.ptype == ptype::COMMIT);
                }
                // An observer's INFORMs are committed txns.
                let commit = matches!(
                    packet.ptype,
                    ptype::COMMIT
                        | ptype::COMMITANDACTIVATE
                        | ptype::INFORM
                        | ptype::INFORMANDACTIVATE
                )
                .then_some(packet.zxid);
                learner.on_packet(t, packet);
                if let Some(z) = commit {
                    // The data tree applies logged txns up to z (or when they are logged).
                    storage.commit(z);
                }
            }
            Ok(Some(QuorumItem::SnapshotData { bytes, .. })) => {
                learner.on_snapshot_bytes(t, bytes.len());
                if learner.phase() == crate::zab::Phase::Closed {
                    break;
                }
                if let Err(e) = storage.snapshot_data(&bytes) {
                    learner.on_disconnect(format!("storage: {e}"));
                    break;
                }
            }
            Ok(Some(QuorumItem::SnapshotEnd { summary, .. })) => {
                info!(
                    "snapshot received: {} sessions, {} ACL lists, {} nodes, {} bytes",
                    summary.sessions, summary.acl_lists, summary.nodes, summary.body_bytes
                );
                *snap_max = summary.max_stat_zxid;
                learner.on_snapshot_end(t);
            }
            Ok(Some(QuorumItem::Auth { offset, .. })) => {
                // The exchange is over before FOLLOWERINFO: a leader sending another is
                // broken (Java's learner would read it as a packet of an unknown type).
                learner.on_disconnect(format!(
                    "a quorum SASL packet at byte {offset} after the handshake"
                ));
                break;
            }
            Ok(None) => break,
            Err(e) => {
                learner.on_disconnect(format!("malformed quorum packet: {e}"));
                break;
            }
        }
    }
    proposals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_stats_stay_bounded() {
        let mut s = AckStats::default();
        for i in 0..(ACK_SAMPLES as u32 + 1000) {
            s.record(i % 100, 1);
        }
        s.record(5000, 2);
        assert_eq!(s.micros.len(), ACK_SAMPLES);
        let (n, p50, _, max) = s.summary();
        assert_eq!((n, max), (ACK_SAMPLES + 1002, 5000));
        assert!((40..60).contains(&p50));
    }
}
