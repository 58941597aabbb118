//! The learner state machine: handshake, sync (DIFF / TRUNC / SNAP), broadcast.

use std::collections::VecDeque;

use std::collections::BTreeMap;

use crate::reconfig::{Activation, process_reconfig};
use crate::wire::QuorumConfig;
use crate::wire::Role;
use crate::wire::quorum::{
    LearnerInfo, PROTOCOL_VERSION, QuorumPacket, TxnHeader, is_handover_txn, ptype,
};
use crate::wire::txn::{TxnRecord, decode_txn, opcode};

/// What a learner with `reconfigEnabled=true` needs to take part in reconfiguration.
#[derive(Debug, Clone)]
pub struct ReconfigState {
    /// The config in force (its version is FOLLOWERINFO's).
    pub config: QuorumConfig,
    /// My learner type: participant (voting or not) or observer.
    pub role: Role,
    /// The leader I follow (my current vote), for COMMITANDACTIVATE's designated leader.
    pub leader_sid: i64,
}

/// At most this many reconfig proposals wait for their COMMITANDACTIVATE (Java's leader has
/// at most one reconfig in flight).
pub const MAX_PENDING_RECONFIGS: usize = 64;

/// What the learner needs to know about itself and the ensemble's timing.
#[derive(Debug, Clone)]
pub struct LearnerConfig {
    pub my_sid: i64,
    /// The committed config version we know (0 for static configs).
    pub config_version: i64,
    pub tick_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
    /// The most bytes of proposals a DIFF may carry before NEWLEADER (staged on disk, not in
    /// memory); beyond it the session ends with an error.
    pub max_diff_bytes: u64,
    /// The most bytes a snapshot after SNAP may have.
    pub max_snapshot_bytes: u64,
    /// The highest epoch the ensemble is known to have reached: the elected leader's vote
    /// (its peer epoch). A LEADERINFO more than [`MAX_EPOCH_JUMP`] above both this and our
    /// own acceptedEpoch is refused rather than persisted.
    pub known_epoch: i64,
    /// Join as an observer: OBSERVERINFO, then INFORM/INFORMANDACTIVATE (logged, never
    /// acknowledged) instead of PROPOSAL/COMMIT.
    pub observer: bool,
    /// `reconfigEnabled=true`: follow reconfiguration (docs/reconfig.md). `None`: reconfig
    /// txns are logged as any txn and COMMITANDACTIVATE commits them, nothing more (Java's
    /// `processReconfig` with reconfig disabled).
    pub reconfig: Option<ReconfigState>,
}

/// How far a LEADERINFO's epoch may lie above every epoch we know of. A leader's new epoch
/// is one above the largest acceptedEpoch of its quorum, and an acceptedEpoch only runs ahead
/// of the ensemble by one a failed election round; persisting an epoch far beyond would make
/// this node refuse every real leader for ever after ("Leaders epoch, N is less than accepted
/// epoch"), so zkfle refuses it instead (Java persists it: docs/zab.md).
pub const MAX_EPOCH_JUMP: i64 = 1000;

/// Sync proposals waiting for their COMMIT (acknowledged after UPTODATE when none comes):
/// a real leader has at most its in-flight proposals uncommitted.
pub const MAX_UNCOMMITTED_SYNC: usize = 100_000;

/// Default of [`LearnerConfig::max_diff_bytes`] and [`LearnerConfig::max_snapshot_bytes`]:
/// far above any ensemble's data (a ZooKeeper server holds its tree in its heap), low enough
/// that a leader cannot fill any disk.
pub const DEFAULT_MAX_SYNC_BYTES: u64 = 16 << 30;

/// A change to durable state. The driver carries these out in order and makes them durable
/// before sending anything from the same [`Ready`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Persist {
    /// Write `acceptedEpoch`.
    AcceptedEpoch(i64),
    /// Write `currentEpoch`.
    CurrentEpoch(i64),
    /// Drop every logged txn above this zxid (TRUNC).
    Truncate(i64),
    /// Keep this sync proposal (DIFF) aside, on disk, until NEWLEADER.
    Stage { zxid: i64, txn: Vec<u8> },
    /// NEWLEADER: append the staged proposals above the last logged zxid to the log, in order,
    /// except those of `skip` (uncommitted hand-over txns, never logged: docs/lead.md).
    AppendStaged { skip: Vec<i64> },
    /// The snapshot that followed SNAP (whose bytes the driver stored) is complete: install it
    /// as the state at this zxid, replacing the older history.
    InstallSnapshot(i64),
    /// Append this txn (a PROPOSAL's data) to the log.
    Append { zxid: i64, txn: Vec<u8> },
    /// A config was proposed (a reconfig txn, or NEWLEADER's): keep it as the last seen
    /// config (`zoo.cfg.dynamic.next`).
    NextConfig(QuorumConfig),
    /// Activate this config (`zoo.cfg.dynamic.<version>`, zoo.cfg pointing at it).
    ActivateConfig(QuorumConfig),
}

/// Work for the driver: persist (durably), then send.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ready {
    pub persist: Vec<Persist>,
    pub send: Vec<QuorumPacket>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.persist.is_empty() && self.send.is_empty()
    }
}

/// How the leader synchronised us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    Diff,
    Trunc,
    Snap,
}

impl SyncKind {
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Diff => "DIFF",
            SyncKind::Trunc => "TRUNC",
            SyncKind::Snap => "SNAP",
        }
    }
}

/// Things worth reporting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The sync operation the leader chose, with its zxid.
    SyncStarted { kind: SyncKind, zxid: i64 },
    /// UPTODATE arrived and was acknowledged: we are a synced follower of `epoch`.
    UpToDate { epoch: i64 },
    /// A new config is in force (after its [`Persist::ActivateConfig`]): the election runs
    /// under it from now on. When `activation.major()` the session ends next.
    Activated {
        config: QuorumConfig,
        activation: Activation,
        /// COMMITANDACTIVATE's designated leader (None at UPTODATE).
        designated_leader: Option<i64>,
    },
    /// The session is over; the reason, for the log. Go back to LOOKING.
    Closed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// FOLLOWERINFO sent, waiting for LEADERINFO.
    AwaitLeaderInfo,
    /// ACKEPOCH sent, waiting for DIFF / TRUNC / SNAP.
    AwaitSync,
    /// SNAP received; the snapshot streams.
    Snapshot,
    /// Reading sync proposals until NEWLEADER.
    Syncing,
    /// NEWLEADER acknowledged, waiting for UPTODATE.
    AwaitUpToDate,
    /// Synced: acknowledging proposals and answering pings.
    Broadcast,
    Closed,
}

/// A Zab follower's protocol state (see the module docs of [`crate::zab`]).
pub struct Learner {
    cfg: LearnerConfig,
    accepted_epoch: i64,
    current_epoch: i64,
    last_zxid: i64,
    new_epoch: i64,
    phase: Phase,
    sync_kind: Option<SyncKind>,
    snap_zxid: i64,
    snap_bytes: u64,
    /// The last sync proposal staged, and the bytes staged.
    last_staged: Option<i64>,
    staged_bytes: u64,
    /// The last staged sync proposal that is not a hand-over txn, and the staged hand-over
    /// txns (a zkfle leader's; logged only if committed).
    last_staged_other: Option<i64>,
    staged_handovers: Vec<i64>,
    /// Staged sync proposals not (yet) committed, in zxid order.
    uncommitted: std::collections::BTreeSet<i64>,
    /// Proposals logged between NEWLEADER and UPTODATE, acknowledged after UPTODATE's ACK.
    deferred_acks: Vec<i64>,
    last_committed: i64,
    last_heard: u64,
    ready: Ready,
    events: VecDeque<Event>,
    /// Reconfig proposals waiting for COMMITANDACTIVATE, by zxid.
    pending_reconfigs: BTreeMap<i64, QuorumConfig>,
    /// NEWLEADER's config, activated at UPTODATE.
    newleader_config: Option<QuorumConfig>,
    /// The last config seen proposed (its version), so that each is written once.
    last_seen_version: u64,
}

impl Learner {
    /// A learner with this durable state; its first output is FOLLOWERINFO.
    pub fn new(
        cfg: LearnerConfig,
        accepted_epoch: i64,
        current_epoch: i64,
        last_zxid: i64,
        now: u64,
    ) -> Learner {
        let info = LearnerInfo {
            sid: cfg.my_sid,
            protocol_version: PROTOCOL_VERSION,
            config_version: cfg
                .reconfig
                .as_ref()
                .map_or(cfg.config_version, |r| r.config.version() as i64),
        };
        let last_seen_version = cfg.reconfig.as_ref().map_or(0, |r| r.config.version());
        let mut l = Learner {
            cfg,
            accepted_epoch,
            current_epoch,
            last_zxid,
            new_epoch: -1,
            phase: Phase::AwaitLeaderInfo,
            sync_kind: None,
            snap_zxid: 0,
            snap_bytes: 0,
            last_staged: None,
            last_staged_other: None,
            staged_handovers: Vec::new(),
            staged_bytes: 0,
            uncommitted: std::collections::BTreeSet::new(),
            deferred_acks: Vec::new(),
            last_committed: 0,
            last_heard: now,
            ready: Ready::default(),
            events: VecDeque::new(),
            pending_reconfigs: BTreeMap::new(),
            newleader_config: None,
            last_seen_version,
        };
        let mut first = QuorumPacket::follower_info(accepted_epoch, &info);
        if l.cfg.observer {
            first.ptype = ptype::OBSERVERINFO;
        }
        l.ready.send.push(first);
        l
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The last zxid this learner has logged (as far as its outputs go).
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    pub fn last_committed(&self) -> i64 {
        self.last_committed
    }

    /// The epoch being joined (after LEADERINFO), else -1.
    pub fn epoch(&self) -> i64 {
        self.new_epoch
    }

    /// Takes the pending work.
    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.ready)
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The read timeout in force: initLimit*tickTime until NEWLEADER is acknowledged, then
    /// syncLimit*tickTime (Java's learner socket timeouts).
    fn timeout_ms(&self) -> u64 {
        match self.phase {
            Phase::AwaitUpToDate | Phase::Broadcast => self.cfg.sync_limit * self.cfg.tick_ms,
            _ => self.cfg.init_limit * self.cfg.tick_ms,
        }
    }

    /// When [`Learner::on_timer`] must be called, if the session is open.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.phase != Phase::Closed).then(|| self.last_heard + self.timeout_ms())
    }

    /// `n` bytes of snapshot data arrived (not a packet): the leader is alive. The session
    /// ends when the snapshot exceeds [`LearnerConfig::max_snapshot_bytes`].
    pub fn on_snapshot_bytes(&mut self, now: u64, n: usize) {
        self.last_heard = now;
        self.snap_bytes += n as u64;
        if self.snap_bytes > self.cfg.max_snapshot_bytes {
            self.close(format!(
                "the leader's snapshot exceeds {} bytes (--max-snapshot-bytes); refusing it",
                self.cfg.max_snapshot_bytes
            ));
        }
    }

    /// The driver was busy until `now` carrying out what the leader sent (logging a large
    /// DIFF at NEWLEADER, say): the leader's silence counts from here, as Java's socket read
    /// timeout only runs while it waits to read.
    pub fn resume(&mut self, now: u64) {
        self.last_heard = self.last_heard.max(now);
    }

    /// A zxid from the leader whose epoch is above the one being joined: no real leader has
    /// it; logging it would poison the log and our vote (Java would: docs/zab.md).
    fn beyond_epoch(&mut self, what: &str, zxid: i64) -> bool {
        if zxid >> 32 > self.new_epoch {
            self.close(format!(
                "{what} 0x{zxid:x} is in epoch {}, beyond the leader's epoch {}; refusing it",
                zxid >> 32,
                self.new_epoch
            ));
            true
        } else {
            false
        }
    }

    pub fn on_timer(&mut self, now: u64) {
        if let Some(d) = self.next_deadline()
            && now >= d
        {
            self.close(format!(
                "nothing from the leader for {} ms (limit {} ms)",
                now - self.last_heard,
                self.timeout_ms()
            ));
        }
    }

    /// The connection failed or was closed (by either side).
    pub fn on_disconnect(&mut self, why: String) {
        self.close(why);
    }

    fn close(&mut self, why: String) {
        if self.phase != Phase::Closed {
            self.phase = Phase::Closed;
            // Never send after deciding to leave (reference §F.8): drop unsent packets. Pending
            // persists stay: they are txns we received, logging them is harmless.
            self.ready.send.clear();
            self.events.push_back(Event::Closed(why));
        }
    }

    fn unexpected(&mut self, p: &QuorumPacket) {
        let why = format!(
            "unexpected {} (type {}) zxid 0x{:x} in phase {:?}",
            p.type_name(),
            p.ptype,
            p.zxid,
            self.phase
        );
        self.close(why);
    }

    /// The snapshot after SNAP has been read to its signature (and stored by the driver).
    pub fn on_snapshot_end(&mut self, now: u64) {
        self.last_heard = now;
        if self.phase != Phase::Snapshot {
            return self.close(format!("snapshot end in phase {:?}", self.phase));
        }
        self.ready
            .persist
            .push(Persist::InstallSnapshot(self.snap_zxid));
        self.last_zxid = self.snap_zxid;
        self.phase = Phase::Syncing;
    }

    /// Checks a PROPOSAL's txn: a TxnHeader whose zxid is the packet's.
    fn proposal_txn(&mut self, p: &QuorumPacket) -> Option<Vec<u8>> {
        let Some(txn) = p.data.as_ref() else {
            self.close(format!("PROPOSAL 0x{:x} without data", p.zxid));
            return None;
        };
        match TxnHeader::decode(txn) {
            Ok(h) if h.zxid == p.zxid => Some(txn.clone()),
            Ok(h) => {
                self.close(format!(
                    "PROPOSAL 0x{:x} carries a txn for 0x{:x}",
                    p.zxid, h.zxid
                ));
                None
            }
            Err(e) => {
                self.close(format!("PROPOSAL 0x{:x}: malformed txn: {e}", p.zxid));
                None
            }
        }
    }

    /// A packet from the leader, handled by the step of the phase the session is in.
    pub fn on_packet(&mut self, now: u64, p: QuorumPacket) {
        if self.phase == Phase::Closed {
            return;
        }
        self.last_heard = now;
        if p.ptype == ptype::PROPOSAL
            && matches!(self.phase, Phase::AwaitUpToDate | Phase::Broadcast)
            && p.data.as_deref().is_some_and(is_handover_txn)
        {
            // A zkfle leader's hand-over txn is meant to make a Java server's vote beat the
            // leader's; a zkfle follower neither logs nor acknowledges it while it is only
            // proposed (committed history, in a DIFF, is logged as any txn) (docs/lead.md).
            tracing::debug!("ignoring the hand-over txn 0x{:x}", p.zxid);
            return;
        }
        match self.phase {
            Phase::AwaitLeaderInfo => self.step_leader_info(&p),
            Phase::AwaitSync => self.step_sync_start(&p),
            Phase::Snapshot => self.unexpected(&p),
            Phase::Syncing => self.step_syncing(&p),
            Phase::AwaitUpToDate => self.step_await_uptodate(&p),
            Phase::Broadcast => self.step_broadcast(&p),
            Phase::Closed => {}
        }
    }

    /// LEADERINFO: the new epoch, acknowledged with ACKEPOCH.
    fn step_leader_info(&mut self, p: &QuorumPacket) {
        if p.ptype != ptype::LEADERINFO {
            return self.unexpected(p);
        }
        let e = p.zxid >> 32;
        if let Ok(v) = p.data_i32("protocol version")
            && v < PROTOCOL_VERSION
        {
            return self.close(format!("leader speaks protocol 0x{v:x} < 0x10000"));
        }
        let known = self.accepted_epoch.max(self.cfg.known_epoch);
        if e > known.saturating_add(MAX_EPOCH_JUMP) || e >= i64::from(i32::MAX) {
            return self.close(format!(
                "LEADERINFO epoch {e} (0x{e:x}) is far beyond any epoch known here (acceptedEpoch {}, the leader's vote {}): refusing it rather than persisting an epoch no real leader could match",
                self.accepted_epoch, self.cfg.known_epoch
            ));
        }
        let field = if e > self.accepted_epoch {
            self.ready.persist.push(Persist::AcceptedEpoch(e));
            self.accepted_epoch = e;
            self.current_epoch as i32
        } else if e == self.accepted_epoch {
            -1
        } else {
            return self.close(format!(
                "Leaders epoch, {e} is less than accepted epoch, {}",
                self.accepted_epoch
            ));
        };
        self.new_epoch = e;
        self.ready
            .send
            .push(QuorumPacket::ack_epoch(self.last_zxid, field));
        self.phase = Phase::AwaitSync;
    }

    /// DIFF, TRUNC or SNAP: how the leader syncs us.
    fn step_sync_start(&mut self, p: &QuorumPacket) {
        if self.beyond_epoch(p.type_name(), p.zxid) {
            return;
        }
        let kind = match p.ptype {
            ptype::DIFF => SyncKind::Diff,
            ptype::TRUNC => {
                self.ready.persist.push(Persist::Truncate(p.zxid));
                self.last_zxid = p.zxid;
                SyncKind::Trunc
            }
            ptype::SNAP => {
                self.snap_zxid = p.zxid;
                SyncKind::Snap
            }
            _ => return self.unexpected(p),
        };
        self.sync_kind = Some(kind);
        self.events
            .push_back(Event::SyncStarted { kind, zxid: p.zxid });
        self.phase = if kind == SyncKind::Snap {
            Phase::Snapshot
        } else {
            Phase::Syncing
        };
    }

    /// The sync's proposals and commits, up to NEWLEADER (logged, then ACKed).
    fn step_syncing(&mut self, p: &QuorumPacket) {
        match p.ptype {
            ptype::PROPOSAL => self.stage_sync_proposal(p),
            ptype::COMMIT => {
                self.uncommitted.remove(&p.zxid);
                self.last_committed = self.last_committed.max(p.zxid);
            }
            ptype::PING => {} // Java's sync loop ignores pings
            ptype::COMMITANDACTIVATE => {
                self.uncommitted.remove(&p.zxid);
                self.last_committed = self.last_committed.max(p.zxid);
                self.commit_and_activate(p);
            }
            ptype::NEWLEADER => self.on_newleader(p),
            _ => self.unexpected(p),
        }
    }

    /// A sync PROPOSAL: staged (bounded in bytes and count) until NEWLEADER logs it.
    fn stage_sync_proposal(&mut self, p: &QuorumPacket) {
        let Some(txn) = self.proposal_txn(p) else {
            return;
        };
        if self.beyond_epoch("sync PROPOSAL", p.zxid) {
            return;
        }
        if let Some(last) = self.last_staged
            && last >= p.zxid
        {
            return self.close(format!("sync PROPOSAL 0x{:x} after 0x{last:x}", p.zxid));
        }
        self.staged_bytes += txn.len() as u64;
        if self.staged_bytes > self.cfg.max_diff_bytes {
            return self.close(format!(
                "the leader's DIFF exceeds {} bytes of proposals (--max-diff-bytes); refusing it",
                self.cfg.max_diff_bytes
            ));
        }
        if self.uncommitted.len() >= MAX_UNCOMMITTED_SYNC {
            return self.close(format!(
                "more than {MAX_UNCOMMITTED_SYNC} sync proposals without a COMMIT; refusing the DIFF"
            ));
        }
        self.last_staged = Some(p.zxid);
        if is_handover_txn(&txn) {
            if self.staged_handovers.len() >= MAX_UNCOMMITTED_SYNC {
                return self.close(format!(
                    "more than {MAX_UNCOMMITTED_SYNC} hand-over txns in one DIFF; refusing it"
                ));
            }
            self.staged_handovers.push(p.zxid);
        } else {
            self.last_staged_other = Some(p.zxid);
        }
        self.uncommitted.insert(p.zxid);
        if !self.note_reconfig(p.zxid, &txn) {
            return;
        }
        self.ready
            .persist
            .push(Persist::Stage { zxid: p.zxid, txn });
    }

    /// NEWLEADER: the staged proposals are logged, then currentEpoch, then ACKed.
    fn on_newleader(&mut self, p: &QuorumPacket) {
        let e = p.zxid >> 32;
        if e != self.new_epoch {
            return self.close(format!(
                "NEWLEADER for epoch {e}, LEADERINFO said {}",
                self.new_epoch
            ));
        }
        // 3.8.5+/3.9 order: log the sync proposals, then currentEpoch, then ACK.
        // An uncommitted hand-over txn (a zkfle leader's, sent to a late
        // learner) is neither logged nor acknowledged, as in broadcast.
        let skip: Vec<i64> = self
            .staged_handovers
            .iter()
            .copied()
            .filter(|z| self.uncommitted.remove(z))
            .collect();
        let kept = self
            .staged_handovers
            .iter()
            .copied()
            .filter(|z| !skip.contains(z))
            .chain(self.last_staged_other)
            .max();
        self.staged_handovers.clear();
        if self.last_staged.is_some() {
            self.ready.persist.push(Persist::AppendStaged { skip });
        }
        if let Some(last) = kept {
            self.last_zxid = self.last_zxid.max(last);
        }
        if self.cfg.reconfig.is_some()
            && let Some(text) = p.data.as_deref().filter(|d| d.len() > 1)
        {
            // Java logs a config it cannot parse and goes on without it.
            match std::str::from_utf8(text)
                .ok()
                .and_then(|t| QuorumConfig::parse(t).ok())
            {
                Some(c) => {
                    self.see_config(&c);
                    self.newleader_config = Some(c);
                }
                None => tracing::warn!("NEWLEADER carries no readable config"),
            }
        }
        self.ready.persist.push(Persist::CurrentEpoch(e));
        self.current_epoch = e;
        self.ready.send.push(QuorumPacket::ack(p.zxid));
        self.phase = Phase::AwaitUpToDate;
    }

    /// After NEWLEADER: proposals are logged, and UPTODATE starts broadcast.
    fn step_await_uptodate(&mut self, p: &QuorumPacket) {
        if self.log_or_commit(p, true) {
            return;
        }
        match p.ptype {
            ptype::PING => {}
            ptype::UPTODATE => {
                self.ready
                    .send
                    .push(QuorumPacket::ack(self.new_epoch << 32));
                // ACK, in zxid order, the sync proposals that were not committed, then the
                // ones logged since NEWLEADER.
                let mut acks: Vec<i64> =
                    std::mem::take(&mut self.uncommitted).into_iter().collect();
                acks.append(&mut self.deferred_acks);
                for z in acks {
                    self.ready.send.push(QuorumPacket::ack(z));
                }
                self.phase = Phase::Broadcast;
                self.events.push_back(Event::UpToDate {
                    epoch: self.new_epoch,
                });
                if let Some(c) = self.newleader_config.take() {
                    self.activate(c, None);
                }
            }
            _ => self.unexpected(p),
        }
    }

    /// Broadcast: proposals, commits, pings.
    fn step_broadcast(&mut self, p: &QuorumPacket) {
        if self.log_or_commit(p, false) {
            return;
        }
        match p.ptype {
            ptype::PING => self.ready.send.push(QuorumPacket::ping_reply(p.zxid)),
            ptype::SYNC | ptype::UPTODATE | ptype::INFORM | ptype::INFORMANDACTIVATE => {
                tracing::debug!("ignoring {} from the leader", p.type_name());
            }
            _ => self.unexpected(p),
        }
    }

    /// After NEWLEADER, what the leader proposes and commits: a PROPOSAL is logged (its ACK
    /// `deferred` to UPTODATE before broadcast), a COMMIT or COMMITANDACTIVATE moves the
    /// commit point, an observer's INFORM carries a committed txn. False for other packets.
    fn log_or_commit(&mut self, p: &QuorumPacket, deferred: bool) -> bool {
        match p.ptype {
            ptype::PROPOSAL => {
                if let Some(txn) = self.proposal_txn(p) {
                    self.append(p.zxid, txn, deferred);
                }
            }
            ptype::COMMIT => self.commit(p.zxid),
            ptype::COMMITANDACTIVATE => {
                self.commit(p.zxid);
                self.commit_and_activate(p);
            }
            ptype::INFORM | ptype::INFORMANDACTIVATE if self.cfg.observer => self.inform(p),
            _ => return false,
        }
        true
    }

    /// A COMMIT (or a COMMITANDACTIVATE's commit) after NEWLEADER. Java's `FollowerZooKeeperServer.commit` warns of a commit
    /// with nothing pending ("without seeing txn") and ignores it, and exits on one for
    /// another txn than the next pending. zkfle ignores, with that warning, a commit beyond
    /// every logged proposal: taken, it would commit proposals still to come before the
    /// leader commits them.
    fn commit(&mut self, zxid: i64) {
        if zxid > self.last_zxid {
            tracing::warn!(
                "Committing 0x{zxid:x} without seeing txn (the last logged is 0x{:x}): ignored",
                self.last_zxid
            );
            return;
        }
        self.last_committed = self.last_committed.max(zxid);
    }

    /// A reconfig txn among the proposals: its config becomes the last seen one (Java's
    /// `setLastSeenQuorumVerifier`) and waits for its COMMITANDACTIVATE. False when the
    /// session ended over it.
    fn note_reconfig(&mut self, zxid: i64, txn: &[u8]) -> bool {
        if self.cfg.reconfig.is_none() {
            return true;
        }
        let Ok(t) = decode_txn(txn) else {
            return true; // a txn whose body zkfle cannot read is logged as it is
        };
        if t.header.op != opcode::RECONFIG {
            return true;
        }
        let config = match &t.record {
            Some(TxnRecord::SetData { data: Some(d), .. }) => std::str::from_utf8(d)
                .ok()
                .and_then(|text| QuorumConfig::parse(text).ok()),
            _ => None,
        };
        let Some(config) = config else {
            self.close(format!(
                "reconfig PROPOSAL 0x{zxid:x} carries no readable config"
            ));
            return false;
        };
        if self.pending_reconfigs.len() >= MAX_PENDING_RECONFIGS {
            self.close(format!(
                "more than {MAX_PENDING_RECONFIGS} reconfig proposals without COMMITANDACTIVATE"
            ));
            return false;
        }
        tracing::info!(
            "reconfig proposed at 0x{zxid:x}: version 0x{:x}",
            config.version()
        );
        self.see_config(&config);
        self.pending_reconfigs.insert(zxid, config);
        true
    }

    fn see_config(&mut self, config: &QuorumConfig) {
        if config.version() > self.last_seen_version {
            self.last_seen_version = config.version();
            self.ready.persist.push(Persist::NextConfig(config.clone()));
        }
    }

    /// COMMITANDACTIVATE: the commit of a reconfig txn, with the designated leader.
    fn commit_and_activate(&mut self, p: &QuorumPacket) {
        if self.cfg.reconfig.is_none() {
            return; // a plain commit (Java's processReconfig returns at once)
        }
        let designated = match p.designated_leader() {
            Some((sid, _)) => sid,
            None => {
                return self.close(format!(
                    "COMMITANDACTIVATE 0x{:x} without a designated leader",
                    p.zxid
                ));
            }
        };
        // Older reconfig proposals were superseded (Java's pending queue head is this one).
        let Some(config) = self.pending_reconfigs.remove(&p.zxid) else {
            return self.close(format!(
                "COMMITANDACTIVATE 0x{:x} for no reconfig proposal",
                p.zxid
            ));
        };
        self.pending_reconfigs.retain(|z, _| *z > p.zxid);
        self.activate(config, Some(designated));
    }

    fn activate(&mut self, config: QuorumConfig, designated: Option<i64>) {
        let Some(r) = self.cfg.reconfig.as_mut() else {
            return;
        };
        let a = process_reconfig(
            true,
            &r.config,
            &config,
            self.cfg.my_sid,
            r.role,
            r.leader_sid,
            designated,
        );
        if !a.activate {
            return;
        }
        r.config = config.clone();
        r.role = a.role;
        if let Some(d) = designated {
            r.leader_sid = d;
        }
        self.ready
            .persist
            .push(Persist::ActivateConfig(config.clone()));
        self.cfg.observer = a.role == Role::Observer;
        let major = a.major();
        self.events.push_back(Event::Activated {
            config: config.clone(),
            activation: a,
            designated_leader: designated,
        });
        if major {
            self.close(format!(
                "changes proposed in reconfig (config 0x{:x})",
                config.version()
            ));
        }
    }

    /// An observer's INFORM (a committed txn) or INFORMANDACTIVATE (designated leader, then
    /// a committed reconfig txn): logged, never acknowledged (Java's `Observer.processPacket`).
    fn inform(&mut self, p: &QuorumPacket) {
        let (designated, txn) = if p.ptype == ptype::INFORMANDACTIVATE {
            match p.designated_leader() {
                Some((sid, txn)) => (Some(sid), txn),
                None => {
                    return self.close(format!(
                        "INFORMANDACTIVATE 0x{:x} without a designated leader",
                        p.zxid
                    ));
                }
            }
        } else {
            (None, p.data.as_deref().unwrap_or_default())
        };
        let txn = QuorumPacket::new(ptype::PROPOSAL, p.zxid, Some(txn.to_vec()));
        let Some(txn) = self.proposal_txn(&txn) else {
            return;
        };
        let config = designated.and(
            decode_txn(&txn)
                .ok()
                .and_then(|t| match t.record {
                    Some(TxnRecord::SetData { data: Some(d), .. })
                        if t.header.op == opcode::RECONFIG =>
                    {
                        String::from_utf8(d).ok()
                    }
                    _ => None,
                })
                .and_then(|text| QuorumConfig::parse(&text).ok()),
        );
        if designated.is_some() && config.is_none() {
            return self.close(format!(
                "INFORMANDACTIVATE 0x{:x} carries no readable config",
                p.zxid
            ));
        }
        self.append_unacked(p.zxid, txn);
        self.last_committed = self.last_committed.max(p.zxid);
        if let (Some(c), Some(d)) = (config, designated)
            && self.cfg.reconfig.is_some()
        {
            self.activate(c, Some(d));
        }
    }

    fn append_unacked(&mut self, zxid: i64, txn: Vec<u8>) {
        if zxid <= self.last_zxid || zxid >> 32 != self.new_epoch {
            return self.close(format!(
                "INFORM 0x{zxid:x} is not after the last logged 0x{:x} in epoch {}",
                self.last_zxid, self.new_epoch
            ));
        }
        self.ready.persist.push(Persist::Append { zxid, txn });
        self.last_zxid = zxid;
    }

    fn append(&mut self, zxid: i64, txn: Vec<u8>, defer_ack: bool) {
        if zxid <= self.last_zxid {
            return self.close(format!(
                "PROPOSAL 0x{zxid:x} is not after the last logged 0x{:x}",
                self.last_zxid
            ));
        }
        if zxid >> 32 != self.new_epoch {
            return self.close(format!(
                "PROPOSAL 0x{zxid:x} is not in epoch {}",
                self.new_epoch
            ));
        }
        if !self.note_reconfig(zxid, &txn) {
            return;
        }
        self.ready.persist.push(Persist::Append { zxid, txn });
        self.last_zxid = zxid;
        if defer_ack {
            self.deferred_acks.push(zxid);
        } else {
            self.ready.send.push(QuorumPacket::ack(zxid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LearnerConfig {
        LearnerConfig {
            my_sid: 1,
            config_version: 0,
            tick_ms: 200,
            init_limit: 10,
            sync_limit: 5,
            max_diff_bytes: DEFAULT_MAX_SYNC_BYTES,
            max_snapshot_bytes: DEFAULT_MAX_SYNC_BYTES,
            known_epoch: 0,
            observer: false,
            reconfig: None,
        }
    }

    fn proposal(zxid: i64) -> QuorumPacket {
        let h = TxnHeader {
            client_id: 7,
            cxid: 1,
            zxid,
            time: 0,
            op: 1,
        };
        QuorumPacket::new(ptype::PROPOSAL, zxid, Some(h.encode().to_vec()))
    }

    fn pk(t: i32, zxid: i64) -> QuorumPacket {
        QuorumPacket::new(t, zxid, None)
    }

    fn leader_info(e: i64) -> QuorumPacket {
        QuorumPacket::new(
            ptype::LEADERINFO,
            e << 32,
            Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
        )
    }

    #[test]
    fn diff_sync_then_broadcast() {
        let mut l = Learner::new(cfg(), 1, 1, 0x1_0000_0003, 0);
        let r = l.ready();
        assert_eq!(r.send[0].ptype, ptype::FOLLOWERINFO);
        assert_eq!(r.send[0].zxid, 0x1_0000_0000);
        l.on_packet(1, leader_info(2));
        let r = l.ready();
        assert_eq!(r.persist, vec![Persist::AcceptedEpoch(2)]);
        assert_eq!(r.send, vec![QuorumPacket::ack_epoch(0x1_0000_0003, 1)]);
        l.on_packet(2, pk(ptype::DIFF, 0x1_0000_0005));
        l.on_packet(2, proposal(0x1_0000_0004));
        l.on_packet(2, pk(ptype::COMMIT, 0x1_0000_0004));
        l.on_packet(2, proposal(0x1_0000_0005));
        let r = l.ready();
        assert!(matches!(
            r.persist[..],
            [
                Persist::Stage {
                    zxid: 0x1_0000_0004,
                    ..
                },
                Persist::Stage {
                    zxid: 0x1_0000_0005,
                    ..
                }
            ]
        ));
        l.on_packet(2, pk(ptype::NEWLEADER, 0x2_0000_0000));
        let r = l.ready();
        assert_eq!(
            r.persist,
            vec![
                Persist::AppendStaged { skip: vec![] },
                Persist::CurrentEpoch(2)
            ]
        );
        assert_eq!(l.last_zxid(), 0x1_0000_0005);
        assert_eq!(r.send, vec![QuorumPacket::ack(0x2_0000_0000)]);
        // A ping before UPTODATE is ignored; UPTODATE is acked, then the uncommitted one.
        l.on_packet(3, pk(ptype::PING, 0));
        l.on_packet(3, pk(ptype::UPTODATE, -1));
        let r = l.ready();
        assert_eq!(
            r.send,
            vec![
                QuorumPacket::ack(0x2_0000_0000),
                QuorumPacket::ack(0x1_0000_0005)
            ]
        );
        assert_eq!(l.phase(), Phase::Broadcast);
        l.on_packet(4, proposal(0x2_0000_0001));
        l.on_packet(4, pk(ptype::PING, 0x2_0000_0001));
        let r = l.ready();
        assert!(matches!(
            r.persist[0],
            Persist::Append {
                zxid: 0x2_0000_0001,
                ..
            }
        ));
        assert_eq!(
            r.send,
            vec![
                QuorumPacket::ack(0x2_0000_0001),
                QuorumPacket::ping_reply(0x2_0000_0001)
            ]
        );
        // Out of order: leave.
        l.on_packet(5, proposal(0x2_0000_0001));
        assert!(matches!(l.poll_event(), Some(Event::SyncStarted { .. })));
        assert!(matches!(l.poll_event(), Some(Event::UpToDate { epoch: 2 })));
        assert!(matches!(l.poll_event(), Some(Event::Closed(_))));
    }

    #[test]
    fn same_epoch_sends_minus_one_and_snap_installs() {
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.ready();
        l.on_packet(1, leader_info(2));
        assert_eq!(l.ready().send, vec![QuorumPacket::ack_epoch(0, -1)]);
        l.on_packet(1, pk(ptype::SNAP, 0x2_0000_0009));
        assert_eq!(l.phase(), Phase::Snapshot);
        l.on_snapshot_end(2);
        l.on_packet(2, pk(ptype::NEWLEADER, 0x2_0000_0000));
        let r = l.ready();
        assert_eq!(
            r.persist,
            vec![
                Persist::InstallSnapshot(0x2_0000_0009),
                Persist::CurrentEpoch(2)
            ]
        );
        assert_eq!(l.last_zxid(), 0x2_0000_0009);
    }

    #[test]
    fn timeouts_and_bad_epochs_close() {
        let mut l = Learner::new(cfg(), 3, 3, 0, 0);
        l.on_packet(1, leader_info(2));
        assert_eq!(l.phase(), Phase::Closed);
        let mut l = Learner::new(cfg(), 0, 0, 0, 0);
        assert_eq!(l.next_deadline(), Some(2000));
        l.on_timer(1999);
        assert_eq!(l.phase(), Phase::AwaitLeaderInfo);
        l.on_timer(2000);
        assert_eq!(l.phase(), Phase::Closed);
        assert!(l.ready().send.len() <= 1);
    }
}

#[cfg(test)]
mod hostile_leader_tests {
    use super::*;

    fn cfg() -> LearnerConfig {
        LearnerConfig {
            my_sid: 1,
            config_version: 0,
            tick_ms: 200,
            init_limit: 10,
            sync_limit: 5,
            max_diff_bytes: 1000,
            max_snapshot_bytes: 5000,
            known_epoch: 3,
            observer: false,
            reconfig: None,
        }
    }

    fn leader_info(e: i64) -> QuorumPacket {
        QuorumPacket::new(
            ptype::LEADERINFO,
            e << 32,
            Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
        )
    }

    fn proposal(zxid: i64, pad: usize) -> QuorumPacket {
        let h = TxnHeader {
            client_id: 7,
            cxid: 1,
            zxid,
            time: 0,
            op: 1,
        };
        let mut t = h.encode().to_vec();
        t.extend(vec![0u8; pad]);
        QuorumPacket::new(ptype::PROPOSAL, zxid, Some(t))
    }

    fn closed_with(l: &mut Learner, needle: &str) {
        assert_eq!(l.phase(), Phase::Closed);
        let why = std::iter::from_fn(|| l.poll_event())
            .find_map(|e| match e {
                Event::Closed(w) => Some(w),
                _ => None,
            })
            .expect("closed");
        assert!(why.contains(needle), "{why}");
    }

    fn synced_to_diff(e: i64) -> Learner {
        let mut l = Learner::new(cfg(), 2, 2, 0x2_0000_0001, 0);
        l.on_packet(1, leader_info(e));
        l.on_packet(1, QuorumPacket::new(ptype::DIFF, 0x2_0000_0001, None));
        l.ready();
        l
    }

    #[test]
    fn an_epoch_far_beyond_is_refused_not_persisted() {
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.ready();
        l.on_packet(1, leader_info(0x7FFF_FFFF));
        assert!(l.ready().persist.is_empty(), "nothing persisted");
        closed_with(&mut l, "far beyond");
        // Within reach of the leader's vote (3) + MAX_EPOCH_JUMP: accepted.
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.on_packet(1, leader_info(3 + MAX_EPOCH_JUMP));
        assert_eq!(l.phase(), Phase::AwaitSync);
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.on_packet(1, leader_info(4 + MAX_EPOCH_JUMP));
        closed_with(&mut l, "far beyond");
    }

    #[test]
    fn zxids_beyond_the_leaders_epoch_are_refused() {
        let mut l = synced_to_diff(3);
        l.on_packet(2, proposal(0x7fff_ffff_0000_0001, 0));
        assert!(l.ready().persist.is_empty());
        closed_with(&mut l, "beyond the leader's epoch 3");
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.on_packet(1, leader_info(3));
        l.on_packet(1, QuorumPacket::new(ptype::SNAP, 0x9_0000_0001, None));
        closed_with(&mut l, "SNAP 0x900000001 is in epoch 9");
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.on_packet(1, leader_info(3));
        l.on_packet(1, QuorumPacket::new(ptype::TRUNC, 0x9_0000_0001, None));
        assert!(
            !l.ready()
                .persist
                .iter()
                .any(|p| matches!(p, Persist::Truncate(_)))
        );
        closed_with(&mut l, "TRUNC");
    }

    #[test]
    fn a_diff_is_staged_and_bounded() {
        let mut l = synced_to_diff(3);
        // 28-byte header + 400 = 428 bytes each: two fit in 1000, the third does not.
        l.on_packet(2, proposal(0x2_0000_0002, 400));
        l.on_packet(2, proposal(0x2_0000_0003, 400));
        assert_eq!(l.ready().persist.len(), 2);
        assert_eq!(l.phase(), Phase::Syncing);
        l.on_packet(2, proposal(0x2_0000_0004, 400));
        closed_with(&mut l, "--max-diff-bytes");
    }

    #[test]
    fn a_snapshot_is_bounded() {
        let mut l = Learner::new(cfg(), 2, 2, 0, 0);
        l.on_packet(1, leader_info(3));
        l.on_packet(1, QuorumPacket::new(ptype::SNAP, 0x2_0000_0009, None));
        l.on_snapshot_bytes(2, 5000);
        assert_eq!(l.phase(), Phase::Snapshot);
        l.on_snapshot_bytes(2, 1);
        closed_with(&mut l, "--max-snapshot-bytes");
    }
}

#[cfg(test)]
mod reconfig_tests {
    use super::*;
    use crate::wire::txn::encode_record;

    const OLD: &str = "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant\nserver.3=127.0.0.3:2888:3888:participant\nversion=100000000";
    pub(super) const NEW: &str = "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant\nserver.3=127.0.0.3:2888:3888:participant\nserver.4=127.0.0.4:2888:3888:participant;2181\nversion=100000002";

    pub(super) fn cfg(role: Role) -> LearnerConfig {
        LearnerConfig {
            my_sid: 4,
            config_version: 0,
            tick_ms: 200,
            init_limit: 10,
            sync_limit: 5,
            max_diff_bytes: DEFAULT_MAX_SYNC_BYTES,
            max_snapshot_bytes: DEFAULT_MAX_SYNC_BYTES,
            known_epoch: 1,
            observer: role == Role::Observer,
            reconfig: Some(ReconfigState {
                config: QuorumConfig::parse(OLD).unwrap(),
                role,
                leader_sid: 3,
            }),
        }
    }

    pub(super) fn reconfig_proposal(zxid: i64, text: &str) -> QuorumPacket {
        let h = TxnHeader {
            client_id: 7,
            cxid: 1,
            zxid,
            time: 0,
            op: opcode::RECONFIG,
        };
        let mut t = h.encode().to_vec();
        t.extend(
            encode_record(&TxnRecord::SetData {
                path: "/zookeeper/config".into(),
                data: Some(text.as_bytes().to_vec()),
                version: -1,
            })
            .unwrap(),
        );
        QuorumPacket::new(ptype::PROPOSAL, zxid, Some(t))
    }

    fn commit_and_activate(zxid: i64, leader: i64) -> QuorumPacket {
        QuorumPacket::new(
            ptype::COMMITANDACTIVATE,
            zxid,
            Some(leader.to_be_bytes().to_vec()),
        )
    }

    /// LEADERINFO of `epoch`, an empty DIFF and NEWLEADER carrying `config`: the sync up to
    /// (not including) UPTODATE.
    pub(super) fn sync_to_newleader(l: &mut Learner, epoch: i64, config: Option<&str>) {
        l.on_packet(
            1,
            QuorumPacket::new(
                ptype::LEADERINFO,
                epoch << 32,
                Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
            ),
        );
        l.on_packet(1, QuorumPacket::new(ptype::DIFF, 0x1_0000_0000, None));
        let config = config.map(|c| c.as_bytes().to_vec());
        l.on_packet(1, QuorumPacket::new(ptype::NEWLEADER, epoch << 32, config));
    }

    fn broadcasting(role: Role) -> Learner {
        let mut l = Learner::new(cfg(role), 1, 1, 0x1_0000_0000, 0);
        // FOLLOWERINFO carries the config version in force.
        let fi = &l.ready().send[0];
        let data = fi.data.as_deref().unwrap();
        assert_eq!(&data[data.len() - 8..], &0x1_0000_0000i64.to_be_bytes());
        sync_to_newleader(&mut l, 1, Some(OLD));
        l.on_packet(1, QuorumPacket::new(ptype::UPTODATE, -1, None));
        l.ready();
        while l.poll_event().is_some() {}
        assert_eq!(l.phase(), Phase::Broadcast);
        l
    }

    #[test]
    fn a_reconfig_adding_me_is_seen_then_activated_without_leaving() {
        let mut l = broadcasting(Role::Participant);
        l.on_packet(2, reconfig_proposal(0x1_0000_0001, NEW));
        let r = l.ready();
        assert!(matches!(&r.persist[0], Persist::NextConfig(c) if c.version() == 0x1_0000_0002));
        assert!(matches!(
            r.persist[1],
            Persist::Append {
                zxid: 0x1_0000_0001,
                ..
            }
        ));
        assert_eq!(r.send, vec![QuorumPacket::ack(0x1_0000_0001)]);
        l.on_packet(3, commit_and_activate(0x1_0000_0001, 3));
        let r = l.ready();
        assert!(
            matches!(&r.persist[..], [Persist::ActivateConfig(c)] if c.version() == 0x1_0000_0002)
        );
        match l.poll_event() {
            Some(Event::Activated {
                activation,
                designated_leader: Some(3),
                ..
            }) => {
                assert!(activation.members_changed && !activation.major())
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(l.phase(), Phase::Broadcast);
    }

    #[test]
    fn a_new_designated_leader_or_role_ends_the_session_after_activating() {
        let mut l = broadcasting(Role::Participant);
        l.on_packet(2, reconfig_proposal(0x1_0000_0001, NEW));
        l.ready();
        l.on_packet(3, commit_and_activate(0x1_0000_0001, 1));
        let r = l.ready();
        assert!(matches!(&r.persist[..], [Persist::ActivateConfig(_)]));
        assert!(matches!(l.poll_event(), Some(Event::Activated { .. })));
        assert!(
            matches!(l.poll_event(), Some(Event::Closed(w)) if w.contains("changes proposed in reconfig"))
        );
        let mut l = broadcasting(Role::Observer);
        l.on_packet(2, reconfig_proposal(0x1_0000_0001, NEW));
        l.on_packet(3, commit_and_activate(0x1_0000_0001, 3));
        assert_eq!(l.phase(), Phase::Closed);
    }

    /// A hostile leader's COMMIT beyond every proposal would commit proposals still to come:
    /// it is ignored, and the commit point stays; commits below it change nothing.
    #[test]
    fn a_commit_beyond_every_proposal_is_ignored() {
        let commit = |zxid| QuorumPacket::new(ptype::COMMIT, zxid, None);
        let mut l = broadcasting(Role::Participant);
        let before = l.last_committed();
        for zxid in [i64::MAX, -1, i64::MIN] {
            l.on_packet(2, commit(zxid));
        }
        assert_eq!((l.phase(), l.last_committed()), (Phase::Broadcast, before));
        l.on_packet(3, reconfig_proposal(0x1_0000_0001, NEW));
        l.on_packet(4, commit(i64::MAX));
        assert_eq!(l.last_committed(), before);
        l.on_packet(5, commit(0x1_0000_0001));
        assert_eq!(l.last_committed(), 0x1_0000_0001);
        assert_eq!(l.phase(), Phase::Broadcast);
    }

    #[test]
    fn commitandactivate_without_its_proposal_ends_the_session() {
        let mut l = broadcasting(Role::Participant);
        l.on_packet(3, commit_and_activate(0x1_0000_0001, 3));
        assert_eq!(l.phase(), Phase::Closed);
        // Reconfig disabled: a plain commit.
        let mut c = cfg(Role::Participant);
        c.reconfig = None;
        let mut l = Learner::new(c, 1, 1, 0x1_0000_0000, 0);
        sync_to_newleader(&mut l, 1, Some(NEW));
        l.on_packet(1, QuorumPacket::new(ptype::UPTODATE, -1, None));
        l.on_packet(2, reconfig_proposal(0x1_0000_0001, NEW));
        l.on_packet(3, commit_and_activate(0x1_0000_0001, 3));
        assert_eq!(l.phase(), Phase::Broadcast);
        assert!(
            !l.ready()
                .persist
                .iter()
                .any(|p| matches!(p, Persist::NextConfig(_) | Persist::ActivateConfig(_)))
        );
    }

    #[test]
    fn newleaders_config_is_activated_at_uptodate() {
        let mut l = Learner::new(cfg(Role::Participant), 1, 1, 0x1_0000_0000, 0);
        sync_to_newleader(&mut l, 2, Some(NEW));
        assert!(
            l.ready()
                .persist
                .iter()
                .any(|p| matches!(p, Persist::NextConfig(_)))
        );
        l.on_packet(1, QuorumPacket::new(ptype::UPTODATE, -1, None));
        assert!(matches!(
            l.ready().persist[..],
            [Persist::ActivateConfig(_)]
        ));
        assert_eq!(l.phase(), Phase::Broadcast);
    }
}

#[cfg(test)]
mod observer_tests {
    use super::*;

    #[test]
    fn an_observer_logs_informs_without_acking_and_activates_informandactivate() {
        let mut c = reconfig_tests_cfg();
        c.observer = true;
        let mut l = Learner::new(c, 1, 1, 0x1_0000_0000, 0);
        assert_eq!(l.ready().send[0].ptype, ptype::OBSERVERINFO);
        super::reconfig_tests::sync_to_newleader(&mut l, 1, None);
        l.on_packet(1, QuorumPacket::new(ptype::UPTODATE, -1, None));
        l.ready();
        let h = TxnHeader {
            client_id: 7,
            cxid: 1,
            zxid: 0x1_0000_0001,
            time: 0,
            op: 1,
        };
        l.on_packet(
            2,
            QuorumPacket::new(ptype::INFORM, 0x1_0000_0001, Some(h.encode().to_vec())),
        );
        let r = l.ready();
        assert!(matches!(
            r.persist[..],
            [Persist::Append {
                zxid: 0x1_0000_0001,
                ..
            }]
        ));
        assert!(r.send.is_empty(), "an observer never acknowledges");
        // INFORMANDACTIVATE: the designated leader, then the reconfig txn; promoted: major.
        let p = super::reconfig_tests::reconfig_proposal(0x1_0000_0002, super::reconfig_tests::NEW);
        let mut data = 3i64.to_be_bytes().to_vec();
        data.extend(p.data.unwrap());
        l.on_packet(
            3,
            QuorumPacket::new(ptype::INFORMANDACTIVATE, 0x1_0000_0002, Some(data)),
        );
        let r = l.ready();
        assert!(matches!(
            r.persist[..],
            [Persist::Append { .. }, Persist::ActivateConfig(_)]
        ));
        assert!(
            std::iter::from_fn(|| l.poll_event()).any(
                |e| matches!(e, Event::Activated { activation, .. } if activation.role_changed)
            )
        );
        assert_eq!(l.phase(), Phase::Closed);
    }

    fn reconfig_tests_cfg() -> LearnerConfig {
        super::reconfig_tests::cfg(Role::Observer)
    }
}
