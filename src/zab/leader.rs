//! The leader side of Zab's discovery and synchronization, sans-I/O, and the hand-over that
//! ends it (docs/lead.md).
//!
//! Java's `Leader.lead()` and one `LearnerHandler` per learner, as one state machine over
//! connection ids: FOLLOWERINFO/OBSERVERINFO, the new epoch (`getEpochToPropose`), a quorum
//! of ACKEPOCHs (`waitForEpochAck`, with its "follower is ahead" check), DIFF/TRUNC/SNAP
//! chosen as `LearnerHandler.syncFollower` chooses, NEWLEADER and a quorum of its ACKs
//! (`waitForNewLeaderAck`), UPTODATE and PINGs. The leader itself counts in every quorum.
//!
//! zkfle does not serve (no request processing): once a quorum holds its whole history
//! (NEWLEADER acknowledged), it proposes one txn that changes nothing ([`handover_txn`], an
//! `ErrorTxn`) at `epoch<<32 | 1`, which it neither logs nor commits itself. A Java follower
//! that acknowledges it has logged (fsynced, in order) zkfle's whole history and one txn more,
//! so its vote in the next election beats zkfle's on the zxid whatever the sids; then the
//! leadership ends ([`Event::Ended`] with `handed_over`).
//!
//! Driver contract as for the learner: carry out every [`Persist`] of a [`Ready`] durably
//! before sending any of its packets; then send, then close the connections listed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::election::QuorumVerifier;
use crate::wire::QuorumConfig;
use crate::wire::config::ConfigLine;
use crate::wire::quorum::{LearnerInfo, PROTOCOL_VERSION, QuorumPacket, handover_txn, ptype};

use super::{Persist, SyncKind};

/// A learner connection, numbered by the driver.
pub type ConnId = u64;

/// The most learner connections held at once (Java sets no bound).
pub const MAX_LEARNERS: usize = 64;

/// What the leader needs to know about itself and the ensemble.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub my_sid: i64,
    pub quorum: QuorumVerifier,
    pub tick_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
}

/// The history the leader syncs from: zxids only (the driver reads the bytes).
#[derive(Debug, Clone, Default)]
pub struct LeaderLog {
    /// The newest snapshot's zxid, or 0 (the empty tree) without one.
    pub base: i64,
    pub has_snapshot: bool,
    /// The logged txns after `base`, in order.
    pub txns: Vec<i64>,
}

impl LeaderLog {
    pub fn last_zxid(&self) -> i64 {
        self.txns.last().copied().unwrap_or(self.base)
    }
}

/// One thing to send on a learner connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Packet(QuorumPacket),
    /// PROPOSAL (the logged txn) + COMMIT for every logged txn with `after < zxid <= upto`.
    LoggedPairs {
        after: i64,
        upto: i64,
    },
    /// The newest snapshot's body, then the `"BenWasHere"` signature (follows a SNAP packet).
    Snapshot,
}

/// Work for the driver: persist (durably), then send, then close.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ready {
    pub persist: Vec<Persist>,
    pub send: Vec<(ConnId, Out)>,
    pub close: Vec<ConnId>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.persist.is_empty() && self.send.is_empty() && self.close.is_empty()
    }
}

/// Things worth reporting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A learner said who it is.
    LearnerInfo {
        conn: ConnId,
        sid: i64,
        observer: bool,
    },
    /// A quorum joined the epoch: LEADERINFO goes out.
    EpochProposed { epoch: i64, sids: Vec<i64> },
    /// The sync chosen for a learner, as Java logs it.
    Sync {
        sid: i64,
        kind: SyncKind,
        zxid: i64,
        peer_last_zxid: i64,
        pairs: u64,
    },
    /// A quorum acknowledged NEWLEADER: it holds the whole history.
    Established { epoch: i64, sids: Vec<i64> },
    /// A learner acknowledged the hand-over txn.
    HandoverAck { sid: i64 },
    /// A learner connection was closed (by us or the peer).
    LearnerClosed { sid: Option<i64>, why: String },
    /// The leadership is over; the driver closes every connection and goes LOOKING.
    Ended { handed_over: bool, reason: String },
}

/// The leader's gauges as Java's `LeaderZooKeeperServer` registers them (`mntr`, the
/// AdminServer's `monitor`, Prometheus): learner connections, the learners being synced or
/// synced, and the proposals' sizes (-1 before the first, as Java's `BufferStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderGauges {
    /// Every learner connection (`getLearners`: added when its handler starts).
    pub learners: u64,
    /// Participants whose sync was chosen (`getForwardingFollowers`: `startForwarding`).
    pub synced_followers: u64,
    /// Of those, sids that are not voters in the config (`getNonVotingFollowers`).
    pub synced_non_voting_followers: u64,
    /// Observers whose sync was chosen (`getObservingLearners`).
    pub synced_observers: u64,
    pub last_proposal_size: i64,
    pub min_proposal_size: i64,
    pub max_proposal_size: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a quorum of FOLLOWERINFOs (`getEpochToPropose`).
    Discovery,
    /// LEADERINFO sent, waiting for a quorum of ACKEPOCHs.
    AwaitEpochAcks,
    /// Syncing, waiting for a quorum of NEWLEADER ACKs.
    AwaitNewLeaderAcks,
    /// Established: UPTODATE sent, the hand-over txn proposed, pinging.
    Broadcast,
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Connected, waiting for FOLLOWERINFO / OBSERVERINFO.
    AwaitInfo,
    /// Waiting for the epoch quorum before LEADERINFO.
    AwaitEpoch,
    /// LEADERINFO sent, waiting for ACKEPOCH.
    AwaitAckEpoch,
    /// ACKEPOCH received, waiting for the ACKEPOCH quorum.
    AwaitEpochQuorum,
    /// Sync and NEWLEADER sent, waiting for the ACK.
    AwaitNewLeaderAck,
    /// NEWLEADER acknowledged, waiting for the NEWLEADER quorum.
    AwaitEstablished,
    /// UPTODATE sent.
    Broadcast,
}

struct LearnerConn {
    sid: Option<i64>,
    /// A voter that sent FOLLOWERINFO: counted in the quorums.
    participant: bool,
    /// It sent OBSERVERINFO.
    observer: bool,
    stage: Stage,
    last_heard: u64,
    peer_last_zxid: i64,
    sent_handover: bool,
}

struct Handover {
    zxid: i64,
    txn: Vec<u8>,
    acks: BTreeSet<i64>,
    first_ack_at: Option<u64>,
}

/// A Zab leader's discovery, synchronization and hand-over (see the module docs).
pub struct Leader {
    cfg: LeaderConfig,
    config: QuorumConfig,
    log: LeaderLog,
    /// The leader's state summary (`leaderStateSummary`): current epoch and last zxid at start.
    summary: (i64, i64),
    epoch: i64,
    phase: Phase,
    phase_since: u64,
    connecting: BTreeSet<i64>,
    electing: BTreeSet<i64>,
    newleader_acks: BTreeSet<i64>,
    learners: BTreeMap<ConnId, LearnerConn>,
    handover: Option<Handover>,
    next_ping: u64,
    next_quorum_check: u64,
    /// Client requests forwarded by learners (REQUEST, REVALIDATE): zkfle serves none.
    dropped_requests: u64,
    ready: Ready,
    events: VecDeque<Event>,
}

impl Leader {
    /// A leader with this durable state and history, starting `lead()` at `now`.
    pub fn new(
        cfg: LeaderConfig,
        config: QuorumConfig,
        log: LeaderLog,
        accepted_epoch: i64,
        current_epoch: i64,
        now: u64,
    ) -> Leader {
        let summary = (current_epoch, log.last_zxid());
        let mut l = Leader {
            cfg,
            config,
            log,
            summary,
            // getEpochToPropose(myid, acceptedEpoch) with epoch = -1.
            epoch: accepted_epoch + 1,
            phase: Phase::Discovery,
            phase_since: now,
            connecting: BTreeSet::new(),
            electing: BTreeSet::new(),
            newleader_acks: BTreeSet::new(),
            learners: BTreeMap::new(),
            handover: None,
            next_ping: 0,
            next_quorum_check: 0,
            dropped_requests: 0,
            ready: Ready::default(),
            events: VecDeque::new(),
        };
        let me = l.cfg.my_sid;
        l.connecting.insert(me);
        l.check_epoch_quorum(now);
        l
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The epoch being established (or proposed so far).
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    pub fn dropped_requests(&self) -> u64 {
        self.dropped_requests
    }

    /// The gauges now ([`LeaderGauges`]).
    pub fn gauges(&self) -> LeaderGauges {
        let synced = |observer: bool| {
            self.learners.values().filter(move |l| {
                l.sid.is_some() && l.observer == observer && l.stage >= Stage::AwaitNewLeaderAck
            })
        };
        // zkfle proposes one txn, the hand-over, once the epoch is established.
        let proposal = self.handover.as_ref().map_or(-1, |h| h.txn.len() as i64);
        LeaderGauges {
            learners: self.learners.len() as u64,
            synced_followers: synced(false).count() as u64,
            synced_non_voting_followers: synced(false).filter(|l| !l.participant).count() as u64,
            synced_observers: synced(true).count() as u64,
            last_proposal_size: proposal,
            min_proposal_size: proposal,
            max_proposal_size: proposal,
        }
    }

    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.ready)
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn init_ms(&self) -> u64 {
        self.cfg.init_limit * self.cfg.tick_ms
    }

    fn sync_ms(&self) -> u64 {
        self.cfg.sync_limit * self.cfg.tick_ms
    }

    /// The data tree's last processed zxid as Java's leader has it: the last txn until the
    /// epoch is established, then `epoch<<32` (`startZkServer`).
    fn last_processed(&self) -> i64 {
        if self.phase == Phase::Broadcast {
            self.epoch << 32
        } else {
            self.log.last_zxid()
        }
    }

    fn last_proposed(&self) -> i64 {
        self.handover.as_ref().map_or(self.epoch << 32, |h| h.zxid)
    }

    /// The NEWLEADER config: Java's leader sends its last-seen quorum verifier, whose version
    /// it sets to `epoch<<32` when the config still has version 0 (ZOOKEEPER-1783).
    fn newleader_config(&self) -> String {
        let mut c = self.config.clone();
        if c.version() == 0 {
            c.lines.retain(|l| !matches!(l, ConfigLine::Version(_)));
            c.lines.push(ConfigLine::Version((self.epoch << 32) as u64));
        }
        c.to_string()
    }

    // ----- inputs -----

    /// A learner connected.
    pub fn on_connect(&mut self, now: u64, conn: ConnId) {
        if self.phase == Phase::Ended || self.learners.len() >= MAX_LEARNERS {
            self.ready.close.push(conn);
            return;
        }
        self.learners.insert(
            conn,
            LearnerConn {
                sid: None,
                participant: false,
                observer: false,
                stage: Stage::AwaitInfo,
                last_heard: now,
                peer_last_zxid: -1,
                sent_handover: false,
            },
        );
    }

    /// A learner's connection failed or was closed.
    pub fn on_disconnect(&mut self, conn: ConnId, why: String) {
        if let Some(l) = self.learners.remove(&conn) {
            self.events
                .push_back(Event::LearnerClosed { sid: l.sid, why });
        }
    }

    fn close_learner(&mut self, conn: ConnId, why: String) {
        if let Some(l) = self.learners.remove(&conn) {
            self.ready.send.retain(|(c, _)| *c != conn);
            self.ready.close.push(conn);
            self.events
                .push_back(Event::LearnerClosed { sid: l.sid, why });
        }
    }

    fn send(&mut self, conn: ConnId, p: QuorumPacket) {
        self.ready.send.push((conn, Out::Packet(p)));
    }

    pub fn on_packet(&mut self, now: u64, conn: ConnId, p: QuorumPacket) {
        if self.phase == Phase::Ended {
            return;
        }
        let Some(l) = self.learners.get_mut(&conn) else {
            return;
        };
        l.last_heard = now;
        match l.stage {
            Stage::AwaitInfo => self.on_info(now, conn, p),
            Stage::AwaitAckEpoch => self.on_ack_epoch(now, conn, p),
            Stage::AwaitNewLeaderAck => self.on_newleader_ack(now, conn, p),
            Stage::AwaitEpoch | Stage::AwaitEpochQuorum => {
                // Java's handler is blocked waiting for the quorum and reads nothing; a
                // learner has nothing to say here.
                let why = format!("unexpected {} while waiting for a quorum", p.type_name());
                self.close_learner(conn, why);
            }
            Stage::AwaitEstablished | Stage::Broadcast => self.on_broadcast_packet(now, conn, p),
        }
    }

    fn on_info(&mut self, now: u64, conn: ConnId, p: QuorumPacket) {
        if p.ptype != ptype::FOLLOWERINFO && p.ptype != ptype::OBSERVERINFO {
            return self.close_learner(
                conn,
                format!(
                    "First packet {} is not FOLLOWERINFO or OBSERVERINFO!",
                    p.type_name()
                ),
            );
        }
        // As Java reads it: the sid (8 bytes), then the protocol version and the config version
        // if present (a 3.4 learner sends 12 bytes, no config version).
        let info = match p.data.as_deref() {
            Some(d) if d.len() >= 20 => match LearnerInfo::decode(d) {
                Ok(i) => i,
                Err(e) => return self.close_learner(conn, format!("bad LearnerInfo: {e}")),
            },
            Some(d) if d.len() >= 12 => LearnerInfo {
                sid: i64::from_be_bytes(d[..8].try_into().unwrap_or_default()),
                protocol_version: i32::from_be_bytes(d[8..12].try_into().unwrap_or_default()),
                config_version: 0,
            },
            _ => {
                return self.close_learner(
                    conn,
                    "LearnerInfo without a sid and protocol version (pre-Zab 1.0 learners are not supported)".into(),
                );
            }
        };
        if info.protocol_version < PROTOCOL_VERSION {
            return self.close_learner(
                conn,
                format!(
                    "learner protocol 0x{:x} is older than Zab 1.0 (0x10000): not supported",
                    info.protocol_version
                ),
            );
        }
        if info.config_version > self.config.version() as i64 {
            return self.close_learner(
                conn,
                "Follower is ahead of the leader (has a later activated configuration)".into(),
            );
        }
        if info.sid == self.cfg.my_sid {
            return self.close_learner(conn, format!("learner claims my own sid {}", info.sid));
        }
        // A second connection from the same sid replaces the first (the learner restarted).
        let older: Vec<ConnId> = self
            .learners
            .iter()
            .filter(|(c, l)| **c != conn && l.sid == Some(info.sid))
            .map(|(c, _)| *c)
            .collect();
        for c in older {
            self.close_learner(c, format!("sid {} connected again", info.sid));
        }
        let observer = p.ptype == ptype::OBSERVERINFO;
        let participant = !observer && self.cfg.quorum.is_voter(info.sid);
        let accepted = p.zxid >> 32;
        if let Some(l) = self.learners.get_mut(&conn) {
            l.sid = Some(info.sid);
            l.participant = participant;
            l.observer = observer;
            l.stage = Stage::AwaitEpoch;
        }
        self.events.push_back(Event::LearnerInfo {
            conn,
            sid: info.sid,
            observer,
        });
        if self.phase == Phase::Discovery {
            if accepted >= self.epoch {
                self.epoch = accepted + 1;
            }
            if participant {
                self.connecting.insert(info.sid);
            }
            self.check_epoch_quorum(now);
        } else {
            self.send_leader_info(conn);
        }
    }

    fn send_leader_info(&mut self, conn: ConnId) {
        let e = self.epoch;
        if let Some(l) = self.learners.get_mut(&conn) {
            l.stage = Stage::AwaitAckEpoch;
        }
        self.send(conn, QuorumPacket::leader_info(e));
    }

    fn check_epoch_quorum(&mut self, now: u64) {
        if self.phase != Phase::Discovery || !self.cfg.quorum.contains_quorum(&self.connecting) {
            return;
        }
        // The quorum is there: the epoch is fixed and accepted, durably, before LEADERINFO.
        self.ready.persist.push(Persist::AcceptedEpoch(self.epoch));
        self.phase = Phase::AwaitEpochAcks;
        self.phase_since = now;
        self.events.push_back(Event::EpochProposed {
            epoch: self.epoch,
            sids: self.connecting.iter().copied().collect(),
        });
        let waiting: Vec<ConnId> = self
            .learners
            .iter()
            .filter(|(_, l)| l.stage == Stage::AwaitEpoch)
            .map(|(c, _)| *c)
            .collect();
        for c in waiting {
            self.send_leader_info(c);
        }
        let me = self.cfg.my_sid;
        self.electing.insert(me);
        self.check_epoch_ack_quorum(now);
    }

    fn on_ack_epoch(&mut self, now: u64, conn: ConnId, p: QuorumPacket) {
        if p.ptype != ptype::ACKEPOCH {
            return self.close_learner(conn, format!("{} is not ACKEPOCH", p.type_name()));
        }
        let field = match p.data_i32("ACKEPOCH epoch") {
            Ok(v) => i64::from(v),
            Err(e) => return self.close_learner(conn, format!("bad ACKEPOCH: {e}")),
        };
        let (sid, participant) = {
            let l = &self.learners[&conn];
            (l.sid.unwrap_or(-1), l.participant)
        };
        if let Some(l) = self.learners.get_mut(&conn) {
            l.peer_last_zxid = p.zxid;
        }
        if self.phase == Phase::AwaitEpochAcks {
            if field != -1 {
                let (ce, lz) = self.summary;
                if field > ce || (field == ce && p.zxid > lz) {
                    return self.close_learner(
                        conn,
                        format!(
                            "Follower is ahead of the leader, leader summary: {ce} (current epoch), {lz} (last zxid)"
                        ),
                    );
                }
                if p.zxid != -1 && participant {
                    self.electing.insert(sid);
                }
            }
            if let Some(l) = self.learners.get_mut(&conn) {
                l.stage = Stage::AwaitEpochQuorum;
            }
            self.check_epoch_ack_quorum(now);
        } else {
            self.sync(conn);
        }
    }

    fn check_epoch_ack_quorum(&mut self, now: u64) {
        if self.phase != Phase::AwaitEpochAcks || !self.cfg.quorum.contains_quorum(&self.electing) {
            return;
        }
        // `self.setCurrentEpoch(epoch)` after waitForEpochAck, before any sync goes out.
        self.ready.persist.push(Persist::CurrentEpoch(self.epoch));
        self.phase = Phase::AwaitNewLeaderAcks;
        self.phase_since = now;
        let waiting: Vec<ConnId> = self
            .learners
            .iter()
            .filter(|(_, l)| l.stage == Stage::AwaitEpochQuorum)
            .map(|(c, _)| *c)
            .collect();
        for c in waiting {
            self.sync(c);
        }
        let me = self.cfg.my_sid;
        self.newleader_acks.insert(me);
        self.check_newleader_quorum(now);
    }

    /// `LearnerHandler.syncFollower` and what follows it: the sync packets, the outstanding
    /// proposal, NEWLEADER.
    fn sync(&mut self, conn: ConnId) {
        let (sid, peer, participant) = {
            let l = &self.learners[&conn];
            (l.sid.unwrap_or(-1), l.peer_last_zxid, l.participant)
        };
        let plan = choose_sync(&self.log, self.last_processed(), peer);
        let (kind, op_zxid, pairs, current) = match plan {
            SyncPlan::Diff { zxid, pairs } => {
                (SyncKind::Diff, zxid, pairs, pairs.map_or(peer, |p| p.1))
            }
            SyncPlan::Trunc { zxid, pairs } => {
                (SyncKind::Trunc, zxid, pairs, pairs.map_or(zxid, |p| p.1))
            }
            SyncPlan::Snap => {
                if !self.log.has_snapshot {
                    return self.close_learner(
                        conn,
                        format!(
                            "sid {sid} (last zxid 0x{peer:x}) needs a snapshot (SNAP) and zkfle has none: its history starts at the empty tree"
                        ),
                    );
                }
                let base = self.log.base;
                let last = self.log.last_zxid();
                let pairs = (last > base).then_some((base, last));
                (SyncKind::Snap, base, pairs, last)
            }
        };
        let op = match kind {
            SyncKind::Diff => ptype::DIFF,
            SyncKind::Trunc => ptype::TRUNC,
            SyncKind::Snap => ptype::SNAP,
        };
        self.send(conn, QuorumPacket::op(op, op_zxid));
        if kind == SyncKind::Snap {
            self.ready.send.push((conn, Out::Snapshot));
        }
        let mut n = 0;
        if let Some((after, upto)) = pairs {
            n = self
                .log
                .txns
                .iter()
                .filter(|z| **z > after && **z <= upto)
                .count() as u64;
            if n > 0 {
                self.ready
                    .send
                    .push((conn, Out::LoggedPairs { after, upto }));
            }
        }
        self.events.push_back(Event::Sync {
            sid,
            kind,
            zxid: op_zxid,
            peer_last_zxid: peer,
            pairs: n,
        });
        // startForwarding: the outstanding proposal, to participants only.
        if participant
            && let Some(h) = &self.handover
            && h.zxid > current
        {
            let p = QuorumPacket::new(ptype::PROPOSAL, h.zxid, Some(h.txn.clone()));
            self.send(conn, p);
            if let Some(l) = self.learners.get_mut(&conn) {
                l.sent_handover = true;
            }
        }
        let nl = QuorumPacket::new_leader(self.epoch, &self.newleader_config());
        self.send(conn, nl);
        if let Some(l) = self.learners.get_mut(&conn) {
            l.stage = Stage::AwaitNewLeaderAck;
        }
    }

    fn on_newleader_ack(&mut self, now: u64, conn: ConnId, p: QuorumPacket) {
        if p.ptype != ptype::ACK {
            return self.close_learner(
                conn,
                format!(
                    "Next packet was supposed to be an ACK, but received packet: {} 0x{:x}",
                    p.type_name(),
                    p.zxid
                ),
            );
        }
        let (sid, participant) = {
            let l = &self.learners[&conn];
            (l.sid.unwrap_or(-1), l.participant)
        };
        if p.zxid < self.epoch << 32 {
            // A Java 3.8.0 learner logs the DIFF's txns at NEWLEADER on its SyncThread, whose
            // ACKs for them can overtake the NEWLEADER ACK (fixed in 3.8.5, reference F.4).
            // Java's leader takes the first ACK as the NEWLEADER ACK and does not count it;
            // zkfle skips them and waits for the real one (seen live: otherwise the epoch is
            // not established and the round times out after initLimit*tickTime).
            tracing::debug!(
                "sid {sid}: ACK 0x{:x} of a synced txn before the NEWLEADER ACK",
                p.zxid
            );
            return;
        }
        if self.phase == Phase::Broadcast {
            return self.uptodate(conn);
        }
        if p.zxid != self.epoch << 32 {
            // Java logs this and does not count the ACK; the learner still waits for UPTODATE.
            tracing::warn!(
                "NEWLEADER ACK from sid: {sid} is from a different epoch - current 0x{:x} received 0x{:x}",
                self.epoch << 32,
                p.zxid
            );
        } else if participant {
            self.newleader_acks.insert(sid);
        }
        if let Some(l) = self.learners.get_mut(&conn) {
            l.stage = Stage::AwaitEstablished;
        }
        self.check_newleader_quorum(now);
    }

    fn check_newleader_quorum(&mut self, now: u64) {
        if self.phase != Phase::AwaitNewLeaderAcks
            || !self.cfg.quorum.contains_quorum(&self.newleader_acks)
        {
            return;
        }
        self.phase = Phase::Broadcast;
        self.phase_since = now;
        self.next_ping = now;
        self.next_quorum_check = now + self.cfg.tick_ms;
        self.events.push_back(Event::Established {
            epoch: self.epoch,
            sids: self.newleader_acks.iter().copied().collect(),
        });
        let zxid = (self.epoch << 32) | 1;
        self.handover = Some(Handover {
            zxid,
            txn: handover_txn(zxid, now as i64),
            acks: BTreeSet::new(),
            first_ack_at: None,
        });
        let waiting: Vec<ConnId> = self
            .learners
            .iter()
            .filter(|(_, l)| l.stage == Stage::AwaitEstablished)
            .map(|(c, _)| *c)
            .collect();
        for c in waiting {
            self.uptodate(c);
        }
    }

    /// UPTODATE, then the hand-over proposal if this participant has not had it.
    fn uptodate(&mut self, conn: ConnId) {
        self.send(conn, QuorumPacket::op(ptype::UPTODATE, -1));
        let Some(l) = self.learners.get_mut(&conn) else {
            return;
        };
        l.stage = Stage::Broadcast;
        if l.participant
            && !l.sent_handover
            && let Some(h) = &self.handover
        {
            l.sent_handover = true;
            let p = QuorumPacket::new(ptype::PROPOSAL, h.zxid, Some(h.txn.clone()));
            self.send(conn, p);
        }
    }

    fn on_broadcast_packet(&mut self, now: u64, conn: ConnId, p: QuorumPacket) {
        match p.ptype {
            ptype::ACK => {
                let (sid, participant) = {
                    let l = &self.learners[&conn];
                    (l.sid.unwrap_or(-1), l.participant)
                };
                if let Some(h) = &mut self.handover
                    && p.zxid == h.zxid
                    && participant
                    && h.acks.insert(sid)
                {
                    h.first_ack_at.get_or_insert(now);
                    self.events.push_back(Event::HandoverAck { sid });
                    self.check_handover(now);
                }
            }
            ptype::PING => {} // session touches: zkfle tracks no sessions
            ptype::REQUEST | ptype::REVALIDATE => {
                // A client's write or session revalidation forwarded by a follower. zkfle has
                // no request processor to turn it into a txn; the client gets CONNECTIONLOSS when the
                // leadership ends moments later and retries on the next leader (docs/lead.md).
                self.dropped_requests += 1;
            }
            _ => tracing::warn!(
                "unexpected quorum packet, type: {} 0x{:x}",
                p.type_name(),
                p.zxid
            ),
        }
    }

    fn check_handover(&mut self, now: u64) {
        let Some(h) = &self.handover else {
            return;
        };
        let Some(first) = h.first_ack_at else {
            return;
        };
        let all = self
            .learners
            .values()
            .filter(|l| l.sent_handover && l.stage == Stage::Broadcast)
            .all(|l| l.sid.is_some_and(|s| h.acks.contains(&s)));
        if all || now >= first + self.cfg.tick_ms {
            let to: Vec<i64> = h.acks.iter().copied().collect();
            self.end(
                true,
                format!(
                    "handing leadership over: {to:?} hold the whole history and the hand-over txn 0x{:x}",
                    h.zxid
                ),
            );
        }
    }

    fn end(&mut self, handed_over: bool, reason: String) {
        if self.phase == Phase::Ended {
            return;
        }
        self.phase = Phase::Ended;
        self.ready.send.clear();
        let conns: Vec<ConnId> = self.learners.keys().copied().collect();
        self.ready.close.extend(conns);
        self.learners.clear();
        self.events.push_back(Event::Ended {
            handed_over,
            reason,
        });
    }

    /// When [`Leader::on_timer`] must be called next.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.phase == Phase::Ended {
            return None;
        }
        let mut d = Vec::new();
        match self.phase {
            Phase::Discovery | Phase::AwaitEpochAcks | Phase::AwaitNewLeaderAcks => {
                d.push(self.phase_since + self.init_ms())
            }
            Phase::Broadcast => {
                d.push(self.next_quorum_check);
                if let Some(f) = self.handover.as_ref().and_then(|h| h.first_ack_at) {
                    d.push(f + self.cfg.tick_ms);
                }
            }
            Phase::Ended => {}
        }
        if self
            .learners
            .values()
            .any(|l| l.stage >= Stage::AwaitNewLeaderAck)
        {
            d.push(self.next_ping);
        }
        for l in self.learners.values() {
            if let Some(limit) = self.learner_limit(l) {
                d.push(l.last_heard + limit);
            }
        }
        d.into_iter().min()
    }

    /// The read timeout of a learner we are waiting on: initLimit*tickTime until it has
    /// acknowledged NEWLEADER, then syncLimit*tickTime (Java's socket timeouts).
    fn learner_limit(&self, l: &LearnerConn) -> Option<u64> {
        match l.stage {
            Stage::AwaitInfo | Stage::AwaitAckEpoch | Stage::AwaitNewLeaderAck => {
                Some(self.init_ms())
            }
            Stage::Broadcast => Some(self.sync_ms()),
            Stage::AwaitEpoch | Stage::AwaitEpochQuorum | Stage::AwaitEstablished => None,
        }
    }

    pub fn on_timer(&mut self, now: u64) {
        if self.phase == Phase::Ended {
            return;
        }
        let timed_out: Vec<(ConnId, u64)> = self
            .learners
            .iter()
            .filter_map(|(c, l)| {
                let limit = self.learner_limit(l)?;
                (now >= l.last_heard + limit).then_some((*c, limit))
            })
            .collect();
        for (c, limit) in timed_out {
            self.close_learner(c, format!("Read timed out (nothing for {limit} ms)"));
        }
        let since = now.saturating_sub(self.phase_since);
        match self.phase {
            Phase::Discovery if since >= self.init_ms() => {
                return self.end(false, "Timeout while waiting for epoch from quorum".into());
            }
            Phase::AwaitEpochAcks if since >= self.init_ms() => {
                return self.end(
                    false,
                    "Timeout while waiting for epoch to be acked by quorum".into(),
                );
            }
            Phase::AwaitNewLeaderAcks if since >= self.init_ms() => {
                let sids: Vec<i64> = self.newleader_acks.iter().copied().collect();
                return self.end(
                    false,
                    format!(
                        "Waiting for a quorum of followers, only synced with sids: [ {sids:?} ]"
                    ),
                );
            }
            Phase::Broadcast => {
                self.check_handover(now);
                if self.phase == Phase::Ended {
                    return;
                }
                if now >= self.next_quorum_check {
                    self.next_quorum_check = now + self.cfg.tick_ms;
                    let mut synced = BTreeSet::from([self.cfg.my_sid]);
                    for l in self.learners.values() {
                        if l.participant
                            && l.stage == Stage::Broadcast
                            && now < l.last_heard + self.sync_ms()
                            && let Some(s) = l.sid
                        {
                            synced.insert(s);
                        }
                    }
                    if !self.cfg.quorum.contains_quorum(&synced) {
                        return self.end(
                            false,
                            format!(
                                "Not sufficient followers synced, only synced with sids: [ {synced:?} ]"
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
        if now >= self.next_ping {
            self.next_ping = now + (self.cfg.tick_ms / 2).max(1);
            let z = self.last_proposed();
            let conns: Vec<ConnId> = self
                .learners
                .iter()
                .filter(|(_, l)| l.stage >= Stage::AwaitNewLeaderAck)
                .map(|(c, _)| *c)
                .collect();
            for c in conns {
                self.send(c, QuorumPacket::op(ptype::PING, z));
            }
        }
    }
}

/// What `syncFollower` decided for a learner whose last zxid is `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPlan {
    /// DIFF(zxid), then PROPOSAL+COMMIT pairs for the logged txns in (after, upto].
    Diff {
        zxid: i64,
        pairs: Option<(i64, i64)>,
    },
    /// TRUNC(zxid), then pairs.
    Trunc {
        zxid: i64,
        pairs: Option<(i64, i64)>,
    },
    /// SNAP of the newest snapshot, then pairs for every logged txn after it.
    Snap,
}

/// `LearnerHandler.syncFollower` over zkfle's history. Java's `committedLog` and on-disk txn
/// log are both zkfle's log after its newest snapshot; the snapshot's zxid (or 0, the empty
/// tree, when zkfle has none and its log therefore starts at the ensemble's first txn) counts
/// as a zxid of the history, since a learner there holds exactly that state.
pub fn choose_sync(log: &LeaderLog, last_processed: i64, peer: i64) -> SyncPlan {
    let new_epoch_zxid = peer & 0xffff_ffff == 0;
    let (min, max) = if log.txns.is_empty() {
        (last_processed, last_processed)
    } else {
        (log.base, log.last_zxid())
    };
    if peer == last_processed {
        return SyncPlan::Diff {
            zxid: peer,
            pairs: None,
        };
    }
    if peer > max && !new_epoch_zxid {
        return SyncPlan::Trunc {
            zxid: max,
            pairs: None,
        };
    }
    if min <= peer && peer <= max {
        // queueCommittedProposals(committedLog, peer, null, max)
        let mut op: Option<SyncPlan> = None;
        let mut prev = -1i64;
        let mut first_pair: Option<i64> = None;
        let mut last_pair = peer;
        let entries = std::iter::once(log.base).chain(log.txns.iter().copied());
        for (i, z) in entries.enumerate() {
            if z < peer {
                prev = z;
                continue;
            }
            if op.is_none() {
                if z == peer {
                    op = Some(SyncPlan::Diff {
                        zxid: max,
                        pairs: None,
                    });
                    continue;
                }
                if new_epoch_zxid {
                    op = Some(SyncPlan::Diff {
                        zxid: max,
                        pairs: None,
                    });
                } else if z > peer {
                    if z >> 32 != peer >> 32 {
                        // "Cannot send TRUNC to peer sid: N peer zxid is from different epoch"
                        return SyncPlan::Snap;
                    }
                    op = Some(SyncPlan::Trunc {
                        zxid: prev,
                        pairs: None,
                    });
                }
            }
            if z <= last_pair || i == 0 {
                continue; // the base is a state, not a txn to send
            }
            first_pair.get_or_insert(z);
            last_pair = z;
        }
        if op.is_none() && new_epoch_zxid {
            op = Some(SyncPlan::Diff {
                zxid: max,
                pairs: None,
            });
        }
        let pairs = first_pair.map(|_| (peer, last_pair));
        return match op {
            Some(SyncPlan::Diff { zxid, .. }) => SyncPlan::Diff { zxid, pairs },
            Some(SyncPlan::Trunc { zxid, .. }) => SyncPlan::Trunc { zxid, pairs },
            // "Unhandled scenario ... fall back to use snapshot"
            _ => SyncPlan::Snap,
        };
    }
    SyncPlan::Snap
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(base: i64, snap: bool, txns: &[i64]) -> LeaderLog {
        LeaderLog {
            base,
            has_snapshot: snap,
            txns: txns.to_vec(),
        }
    }

    #[test]
    fn sync_choices_follow_java() {
        let l = log(0, false, &[0x1_0000_0001, 0x1_0000_0002, 0x2_0000_0001]);
        let last = l.last_zxid();
        // In sync: empty DIFF.
        assert_eq!(
            choose_sync(&l, last, last),
            SyncPlan::Diff {
                zxid: last,
                pairs: None
            }
        );
        // Found in the log: DIFF(max) + the txns after it.
        assert_eq!(
            choose_sync(&l, last, 0x1_0000_0001),
            SyncPlan::Diff {
                zxid: last,
                pairs: Some((0x1_0000_0001, last))
            }
        );
        // Fresh learner, history from the empty tree: DIFF of everything.
        assert_eq!(
            choose_sync(&l, last, 0),
            SyncPlan::Diff {
                zxid: last,
                pairs: Some((0, last))
            }
        );
        // A new-epoch zxid not in the log: DIFF from it.
        assert_eq!(
            choose_sync(&l, last, 0x2_0000_0000),
            SyncPlan::Diff {
                zxid: last,
                pairs: Some((0x2_0000_0000, last))
            }
        );
        // Ahead in the last epoch: TRUNC(max).
        assert_eq!(
            choose_sync(&l, last, 0x2_0000_0005),
            SyncPlan::Trunc {
                zxid: last,
                pairs: None
            }
        );
        // Not found, next txn in another epoch: SNAP.
        assert_eq!(choose_sync(&l, last, 0x1_0000_0003), SyncPlan::Snap);
        // Not found, next txn in the same epoch: TRUNC(previous) + pairs.
        let l2 = log(0, false, &[0x1_0000_0001, 0x1_0000_0003, 0x1_0000_0004]);
        assert_eq!(
            choose_sync(&l2, 0x1_0000_0004, 0x1_0000_0002),
            SyncPlan::Trunc {
                zxid: 0x1_0000_0001,
                pairs: Some((0x1_0000_0002, 0x1_0000_0004))
            }
        );
        // Below the snapshot: SNAP; at the snapshot: DIFF.
        let l3 = log(0x1_0000_0010, true, &[0x1_0000_0011, 0x1_0000_0012]);
        assert_eq!(
            choose_sync(&l3, 0x1_0000_0012, 0x1_0000_0005),
            SyncPlan::Snap
        );
        assert_eq!(
            choose_sync(&l3, 0x1_0000_0012, 0x1_0000_0010),
            SyncPlan::Diff {
                zxid: 0x1_0000_0012,
                pairs: Some((0x1_0000_0010, 0x1_0000_0012))
            }
        );
        // Established leader (lastProcessed = e<<32) and a learner at the last txn: DIFF.
        assert_eq!(
            choose_sync(&l3, 0x3_0000_0000, 0x1_0000_0012),
            SyncPlan::Diff {
                zxid: 0x1_0000_0012,
                pairs: None
            }
        );
    }

    fn cfg(voters: &[i64]) -> (LeaderConfig, QuorumConfig) {
        let q = QuorumVerifier::majority(voters, &[]);
        let c = q.config().clone();
        (
            LeaderConfig {
                my_sid: 1,
                quorum: q,
                tick_ms: 100,
                init_limit: 10,
                sync_limit: 5,
            },
            c,
        )
    }

    fn info(sid: i64, accepted: i64) -> QuorumPacket {
        QuorumPacket::follower_info(
            accepted,
            &LearnerInfo {
                sid,
                protocol_version: PROTOCOL_VERSION,
                config_version: 0,
            },
        )
    }

    fn sent(r: &Ready, conn: ConnId) -> Vec<(i32, i64)> {
        r.send
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, o)| match o {
                Out::Packet(p) => (p.ptype, p.zxid),
                Out::LoggedPairs { upto, .. } => (-2, *upto),
                Out::Snapshot => (-3, 0),
            })
            .collect()
    }

    #[test]
    fn discovery_sync_and_handover() {
        let (c, qc) = cfg(&[1, 2, 3]);
        let lg = log(0, false, &[0x1_0000_0001, 0x1_0000_0002]);
        let mut l = Leader::new(c, qc, lg, 1, 1, 0);
        assert!(l.ready().is_empty());
        l.on_connect(1, 7);
        assert_eq!((l.gauges().learners, l.gauges().synced_followers), (1, 0));
        assert_eq!(l.gauges().last_proposal_size, -1);
        l.on_packet(2, 7, info(2, 1));
        let r = l.ready();
        assert_eq!(r.persist, vec![Persist::AcceptedEpoch(2)]);
        assert_eq!(sent(&r, 7), vec![(ptype::LEADERINFO, 0x2_0000_0000)]);
        // The learner is behind by one txn: ACKEPOCH quorum, currentEpoch, DIFF + 1 pair.
        l.on_packet(3, 7, QuorumPacket::ack_epoch(0x1_0000_0001, 1));
        let r = l.ready();
        assert_eq!(r.persist, vec![Persist::CurrentEpoch(2)]);
        assert_eq!(
            sent(&r, 7),
            vec![
                (ptype::DIFF, 0x1_0000_0002),
                (-2, 0x1_0000_0002),
                (ptype::NEWLEADER, 0x2_0000_0000)
            ]
        );
        let Out::Packet(nl) = &r.send.last().unwrap().1 else {
            panic!()
        };
        assert!(String::from_utf8_lossy(nl.data.as_ref().unwrap()).ends_with("version=200000000"));
        // Its sync chosen, the follower counts as synced (Java's startForwarding).
        let g = l.gauges();
        assert_eq!(
            (g.learners, g.synced_followers, g.synced_observers),
            (1, 1, 0)
        );
        assert_eq!(g.synced_non_voting_followers, 0);
        // A 3.8.0 learner's ACK of a synced txn before the NEWLEADER ACK is skipped.
        l.on_packet(4, 7, QuorumPacket::ack(0x1_0000_0002));
        assert!(l.ready().send.is_empty());
        l.on_packet(4, 7, QuorumPacket::ack(0x2_0000_0000));
        let r = l.ready();
        assert_eq!(
            sent(&r, 7),
            vec![(ptype::UPTODATE, -1), (ptype::PROPOSAL, 0x2_0000_0001)]
        );
        assert_eq!(l.phase(), Phase::Broadcast);
        let Out::Packet(proposal) = &r.send.last().unwrap().1 else {
            panic!()
        };
        let size = proposal.data.as_ref().unwrap().len() as i64;
        let g = l.gauges();
        assert_eq!(
            (
                g.last_proposal_size,
                g.min_proposal_size,
                g.max_proposal_size
            ),
            (size, size, size)
        );
        l.on_timer(5);
        assert_eq!(sent(&l.ready(), 7), vec![(ptype::PING, 0x2_0000_0001)]);
        l.on_packet(6, 7, QuorumPacket::ack(0x2_0000_0000));
        l.on_packet(6, 7, QuorumPacket::ack(0x2_0000_0001));
        let r = l.ready();
        assert_eq!(r.close, vec![7]);
        let evs: Vec<Event> = std::iter::from_fn(|| l.poll_event()).collect();
        assert!(matches!(
            evs.last(),
            Some(Event::Ended {
                handed_over: true,
                ..
            })
        ));
    }

    proptest::proptest! {
        /// Whatever learners send, in any order, with connections coming and going: no panic,
        /// and the learner table stays bounded.
        #[test]
        fn any_learner_traffic_is_handled(
            steps in proptest::collection::vec(
                (0u8..4, 0u64..6, 0i32..20, proptest::prelude::any::<i64>(),
                 proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24))),
                0..200,
            )
        ) {
            let (c, qc) = cfg(&[1, 2, 3, 4, 5]);
            let mut l = Leader::new(c, qc, log(0, false, &[0x1_0000_0001]), 1, 1, 0);
            for (i, (kind, conn, t, zxid, data)) in steps.into_iter().enumerate() {
                let now = i as u64 * 37;
                match kind {
                    0 => l.on_connect(now, conn),
                    1 => l.on_disconnect(conn, "gone".into()),
                    2 => l.on_timer(now),
                    _ => {
                        let p = if t == ptype::FOLLOWERINFO && data.is_none() {
                            info(2 + (zxid & 3), zxid & 7)
                        } else if t == ptype::ACKEPOCH {
                            QuorumPacket::ack_epoch(zxid & 0x3_0000_000f, (zxid & 3) as i32 - 1)
                        } else {
                            QuorumPacket::new(t, zxid, data)
                        };
                        l.on_packet(now, conn, p);
                    }
                }
                l.ready();
                proptest::prop_assert!(l.learners.len() <= MAX_LEARNERS);
                while l.poll_event().is_some() {}
            }
        }
    }

    #[test]
    fn ahead_follower_and_timeouts() {
        let (c, qc) = cfg(&[1, 2, 3]);
        let mut l = Leader::new(c, qc, log(0, false, &[0x1_0000_0003]), 1, 1, 0);
        l.on_connect(0, 1);
        l.on_packet(0, 1, info(2, 1));
        l.on_packet(0, 1, QuorumPacket::ack_epoch(0x1_0000_0009, 1));
        assert_eq!(l.ready().close, vec![1]);
        assert!(matches!(
            std::iter::from_fn(|| l.poll_event()).last(),
            Some(Event::LearnerClosed { .. })
        ));
        assert_eq!(l.phase(), Phase::AwaitEpochAcks);
        l.on_timer(999);
        assert_eq!(l.phase(), Phase::AwaitEpochAcks);
        l.on_timer(1000);
        assert_eq!(l.phase(), Phase::Ended);
    }
}
