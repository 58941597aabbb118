//! The FastLeaderElection state machine: Java's `WorkerReceiver` (reference C) and
//! `lookForLeader` (reference D) over one explicit receive queue, driven by calls.

use std::collections::{BTreeSet, VecDeque};

use crate::throttle::{LogThrottle, suppressed};

use tracing::{debug, info, warn};

use crate::wire::{ConfigLine, JavaView, Notification, QuorumConfig, Role, ServerState};

use super::java_log_line;
use super::quorum::QuorumVerifier;
use super::tally::Tally;
use super::vote::{Proposal, Vote, total_order_predicate};

/// What a server runs the election with.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub my_id: i64,
    /// Participant or observer (Java's learner type).
    pub role: Role,
    pub quorum: QuorumVerifier,
    /// The last logged zxid; -1 means an untrusted empty database (ZOOKEEPER-261).
    pub last_zxid: i64,
    /// The current (accepted) epoch.
    pub current_epoch: i64,
    /// `zookeeper.fastleader.minNotificationInterval`, Java default 200.
    pub min_notification_interval_ms: u64,
    /// `zookeeper.fastleader.maxNotificationInterval`, Java default 60000.
    pub max_notification_interval_ms: u64,
    /// `finalizeWait`, a constant 200 in Java.
    pub finalize_wait_ms: u64,
    /// `reconfigEnabled`: a newer config in a notification is taken (docs/reconfig.md).
    pub reconfig_enabled: bool,
    /// The last seen config (`zoo.cfg.dynamic.next`), see [`Election::set_next_config`].
    pub next_quorum: Option<QuorumVerifier>,
    /// My client address as Java fills it in from `clientPort` (and `clientPortAddress`) when
    /// my server line has none (`QuorumPeerConfig.setupClientPort`): host (none: every
    /// address) and port. Java never writes it into a config it sends, and its
    /// `QuorumServer.equals` compares client addresses, so a newer config from a peer is
    /// unequal to mine even with the same members, and restarts the election.
    pub static_client: Option<(Option<String>, u16)>,
}

/// Java's `finalizeWait` (a constant in `FastLeaderElection`): how long a server whose vote
/// has a quorum waits for a better one. The story of a capture decides by the same wait.
pub const FINALIZE_WAIT_MS: u64 = 200;

impl ElectionConfig {
    /// Java's defaults: participant, zxid 0, epoch 0, intervals 200/60000, finalize wait 200.
    pub fn new(my_id: i64, quorum: QuorumVerifier) -> Self {
        ElectionConfig {
            my_id,
            role: Role::Participant,
            quorum,
            last_zxid: 0,
            current_epoch: 0,
            min_notification_interval_ms: 200,
            max_notification_interval_ms: 60000,
            finalize_wait_ms: FINALIZE_WAIT_MS,
            reconfig_enabled: false,
            next_quorum: None,
            static_client: None,
        }
    }
}

/// Work for the driver, taken with [`Election::ready`] after each input, as the Zab machines'
/// ([`crate::zab::Ready`]): first adopt `config`, then send; then take the events
/// ([`Election::poll_event`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ready {
    /// A peer's notification carried a newer config and I was LOOKING (reconfig enabled): it
    /// is now mine. The driver writes it to disk (`zoo.cfg.dynamic.<version>`) and connects
    /// to its members before it sends (the notifications may be for members it adds); when
    /// the membership changed, the election has restarted under it (round 1), as Java's does.
    pub config: Option<NewConfig>,
    /// The connection manager's fate, taken after `config` and before `send`.
    pub network: Option<Network>,
    /// Notifications to send, in order (never to myself: those loop back internally).
    pub send: Vec<(i64, Notification)>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.network.is_none() && self.send.is_empty()
    }
}

/// What a newer config with other members does to the election's connections (reference
/// A.2): Java's receiver shuts the election and its QuorumCnxManager down at once, and a new
/// manager starts only when `lookForLeader`'s current poll has returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Close every election connection and stop listening; what arrives meanwhile is lost.
    Halt,
    /// Listen again and start afresh (no connections, no send queues), before the sends.
    Restart,
}

/// A newer config taken from a peer's notification (see [`Ready::config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConfig {
    pub config: QuorumConfig,
    pub activation: crate::reconfig::Activation,
}

/// What happened, for the driver to act on once the work of [`Election::ready`] is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `lookForLeader` returned: my state is now `state` (LEADING, FOLLOWING or OBSERVING),
    /// `vote` is the returned vote (it becomes the current vote) and `lc` my logical clock.
    Decided {
        state: ServerState,
        vote: Vote,
        lc: i64,
    },
}

/// A notification as Java's receiver hands it to `lookForLeader` (FLE's `Notification`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Received {
    sid: i64,
    state: ServerState,
    leader: i64,
    zxid: i64,
    election_epoch: i64,
    peer_epoch: i64,
    version: i32,
}

impl Received {
    fn proposal(&self) -> Proposal {
        Proposal {
            leader: self.leader,
            zxid: self.zxid,
            peer_epoch: self.peer_epoch,
        }
    }

    fn vote(&self) -> Vote {
        Vote {
            leader: self.leader,
            zxid: self.zxid,
            election_epoch: self.election_epoch,
            peer_epoch: self.peer_epoch,
            state: self.state,
            version: self.version,
        }
    }
}

/// Where `lookForLeader` is waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `recvqueue.poll(notTimeout)` in the main loop.
    Polling,
    /// `recvqueue.poll(finalizeWait)` after a LOOKING quorum.
    Finalizing,
}

/// One server's FastLeaderElection. See the module docs of [`crate::election`].
#[derive(Debug)]
pub struct Election {
    cfg: ElectionConfig,
    config_bytes: Vec<u8>,
    state: ServerState,
    /// Whether `lookForLeader` is running (between `start` and a decision).
    running: bool,
    lc: i64,
    proposal: Proposal,
    current_vote: Vote,
    recvset: Tally,
    outofelection: Tally,
    throttle: LogThrottle,
    /// Java's `recvqueue`.
    queue: VecDeque<Received>,
    phase: Phase,
    not_timeout: u64,
    deadline: Option<u64>,
    ready: Ready,
    events: VecDeque<Event>,
    /// A peer sent a newer config with other members while I was LOOKING: my receiver and
    /// connections are down ([`Network::Halt`]) and `lookForLeader` waits out its poll. A poll
    /// that times out restarts the election; a finalize wait that times out still decides
    /// (Java's inner loop does not look at `stop`), and the next [`Election::start`] restarts.
    halted: bool,
    /// The last seen config when it is newer than the one in force (a reconfig proposed,
    /// not yet committed): its voters are voters too, and a quorum must hold in it as well.
    next: Option<QuorumVerifier>,
}

impl Election {
    /// A LOOKING server whose election has not started: lc = 0, current vote
    /// `(myid, lastZxid, currentEpoch)` with election epoch -1 (Java's `startLeaderElection`).
    /// Notifications from voters received before [`Election::start`] are queued, as Java's
    /// receiver does, and processed after the start broadcast.
    pub fn new(cfg: ElectionConfig) -> Self {
        let config_bytes = cfg.quorum.config_text().as_bytes().to_vec();
        let current_vote = Vote {
            leader: cfg.my_id,
            zxid: cfg.last_zxid,
            election_epoch: -1,
            peer_epoch: cfg.current_epoch,
            state: ServerState::Looking,
            version: 0,
        };
        let not_timeout = cfg.min_notification_interval_ms;
        let mut e = Election {
            cfg,
            config_bytes,
            state: ServerState::Looking,
            running: false,
            lc: 0,
            // Java's constructor sets proposedLeader = proposedZxid = -1 (epoch 0).
            proposal: Proposal {
                leader: -1,
                zxid: -1,
                peer_epoch: 0,
            },
            current_vote,
            recvset: Tally::default(),
            outofelection: Tally::default(),
            throttle: LogThrottle::new(),
            queue: VecDeque::new(),
            phase: Phase::Polling,
            not_timeout,
            deadline: None,
            ready: Ready::default(),
            events: VecDeque::new(),
            halted: false,
            next: None,
        };
        if let Some(n) = e.cfg.next_quorum.clone() {
            e.set_next_config(n);
        }
        e
    }

    /// The last seen config (Java's `lastSeenQuorumVerifier`: a reconfig proposed and not yet
    /// committed). While it is newer than the config in force, its voters count as voters
    /// (`getCurrentAndNextConfigVoters`: they get my notifications and theirs are processed)
    /// and a decision needs a quorum of both (`SyncedLearnerTracker.hasAllQuorums`).
    pub fn set_next_config(&mut self, next: QuorumVerifier) {
        if next.version() > self.cfg.quorum.version()
            && self
                .next
                .as_ref()
                .is_none_or(|n| next.version() > n.version())
        {
            self.next = Some(next);
        }
    }

    /// Whether the election is halted (see [`Network::Halt`]): until it restarts, nothing is
    /// received and what its timers would send or dial goes nowhere.
    pub fn halted(&self) -> bool {
        self.halted
    }

    /// Whether `sid` votes in the config in force or in the last seen one.
    fn valid_voter(&self, sid: i64) -> bool {
        self.cfg.quorum.is_voter(sid) || self.next.as_ref().is_some_and(|n| n.is_voter(sid))
    }

    /// Runs under a new config from now on (a reconfig Zab activated, or one taken from a
    /// peer): its members are the voters, its text goes in every notification, `role` is my
    /// learner type in it. The election is not restarted here.
    pub fn reconfigure(&mut self, quorum: QuorumVerifier, role: Role) {
        if self
            .next
            .as_ref()
            .is_some_and(|n| n.version() <= quorum.version())
        {
            self.next = None;
        }
        self.config_bytes = quorum.config_text().as_bytes().to_vec();
        self.cfg.quorum = quorum;
        self.cfg.role = role;
        // Java's QuorumPeer takes the new config's entry for me as it is (setQuorumVerifier):
        // no client address filled in any more.
        self.cfg.static_client = None;
    }

    /// Java's `restartLeaderElection` after a reconfig that changed the membership, outside an
    /// election: a new FastLeaderElection, whose logical clock starts at 0, so the next
    /// election is round 1 again.
    pub fn restart_logical_clock(&mut self) {
        if !self.running {
            self.lc = 0;
        }
    }

    /// The config in force.
    pub fn quorum(&self) -> &QuorumVerifier {
        &self.cfg.quorum
    }

    /// My learner type.
    pub fn role(&self) -> Role {
        self.cfg.role
    }

    /// `lookForLeader()`: state LOOKING, lc += 1, fresh vote sets, propose my initial vote and
    /// broadcast it to every voter (D.1); then process what is queued, my own vote last.
    /// After a halt this is Java's `startLeaderElection` first: a new election (logical clock
    /// from 0) over a new connection manager.
    pub fn start(&mut self, now_ms: u64) {
        if std::mem::take(&mut self.halted) {
            // The queue was emptied at the halt and nothing was received since.
            self.lc = 0;
            self.ready.network = Some(Network::Restart);
        }
        self.state = ServerState::Looking;
        self.running = true;
        self.recvset.clear();
        self.outofelection.clear();
        self.not_timeout = self.cfg.min_notification_interval_ms;
        self.phase = Phase::Polling;
        // Java's `logicalclock.incrementAndGet()` wraps: a peer may have pushed the round to
        // i64::MAX.
        self.lc = self.lc.wrapping_add(1);
        self.proposal = self.init_proposal();
        info!(
            "New election. My id = {}, proposed zxid=0x{:x}",
            self.cfg.my_id, self.proposal.zxid
        );
        self.send_notifications();
        self.deadline = Some(now_ms + self.not_timeout);
        self.drain(now_ms);
    }

    /// A notification from `from` (the sid bound to its connection): the receiver's rules
    /// (reference C) run at once, then, while the election runs, `lookForLeader` processes the
    /// queue (D.3-D.6).
    pub fn on_notification(&mut self, now_ms: u64, from: i64, n: &Notification) {
        self.receive(from, n);
        if self.running && !self.halted {
            self.drain(now_ms);
        }
    }

    /// The timer fired (the time [`Election::next_deadline`] gave has come). `have_delivered` is QCM's
    /// `haveDelivered()`: whether any peer's send queue is empty. On a poll timeout the proposal
    /// is re-broadcast only if it is true (otherwise the driver should reconnect), and the poll
    /// interval doubles up to the maximum. On a finalize timeout the election decides.
    /// Early or stale calls are ignored.
    pub fn on_timer(&mut self, now_ms: u64, have_delivered: bool) {
        if !self.running || self.state != ServerState::Looking {
            return;
        }
        match self.deadline {
            Some(d) if now_ms >= d => {}
            _ => return,
        }
        match self.phase {
            Phase::Finalizing => {
                let p = self.proposal;
                let vote = Vote::looking(p.leader, p.zxid, self.lc, p.peer_epoch);
                self.decide(vote);
            }
            Phase::Polling => {
                // Halted, what the poll's end sends goes nowhere.
                if have_delivered && !self.halted {
                    self.send_notifications();
                }
                self.not_timeout =
                    (self.not_timeout * 2).min(self.cfg.max_notification_interval_ms);
                info!("Notification time out: {} ms", self.not_timeout);
                if self.halted {
                    // The loop sees `stop` and QuorumPeer starts the new election.
                    self.start(now_ms);
                } else {
                    self.deadline = Some(now_ms + self.not_timeout);
                    self.drain(now_ms);
                }
            }
        }
    }

    /// Takes the pending work.
    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.ready)
    }

    /// The next event, once the work is done.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Election::on_timer`] wants to be called, if at all.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.running { self.deadline } else { None }
    }

    /// My state: LOOKING until a decision, then LEADING, FOLLOWING or OBSERVING until
    /// [`Election::start`] is called again.
    pub fn state(&self) -> ServerState {
        self.state
    }

    /// `QuorumPeer.currentVote`: the last election's result (initially my own vote).
    pub fn current_vote(&self) -> Vote {
        self.current_vote
    }

    /// My logical clock (round).
    pub fn logical_clock(&self) -> i64 {
        self.lc
    }

    /// My current proposal (`getVote()`).
    pub fn proposal(&self) -> Proposal {
        self.proposal
    }

    /// My id.
    pub fn my_id(&self) -> i64 {
        self.cfg.my_id
    }

    /// Zab sets the current vote's peer epoch once the leader is established.
    pub fn set_peer_epoch(&mut self, epoch: i64) {
        self.current_vote.peer_epoch = epoch;
    }

    /// The database state the next election's initial vote uses (Java reads the last logged
    /// zxid and the current epoch afresh at each `lookForLeader`).
    pub fn set_log_state(&mut self, last_zxid: i64, current_epoch: i64) {
        self.cfg.last_zxid = last_zxid;
        self.cfg.current_epoch = current_epoch;
    }

    /// The config text carried in every notification we send.
    pub fn config_text(&self) -> &str {
        self.cfg.quorum.config_text()
    }

    // ----- the receiver (reference C) -----

    fn receive(&mut self, from: i64, n: &Notification) {
        if self.halted {
            // The receiver has exited; the driver's connections are down.
            return;
        }
        let (peer_epoch, version) = match n.java_view() {
            JavaView::Dropped(why) => {
                warn!(
                    "Skipping the processing of a partial / malformed response message sent by sid={from}, length {}: {why}",
                    n.size()
                );
                return;
            }
            JavaView::Accepted {
                peer_epoch,
                version,
                has_config,
            } => {
                if has_config {
                    self.look_at_config(from, n);
                    if self.halted {
                        // The message that carried the config is not processed.
                        return;
                    }
                }
                (peer_epoch, version)
            }
        };
        if !self.valid_voter(from) {
            // Row 1: non-voters get the current vote at once, with ee = lc and my state.
            let cv = self.current_vote;
            let reply = self.notification(self.state, cv.leader, cv.zxid, self.lc, cv.peer_epoch);
            self.send(from, reply);
            return;
        }
        let state = match n.state {
            ServerState::Unknown(code) => {
                // Row 2: Java drops it silently; we say so once.
                warn!(
                    "Dropping a notification from voter sid={from} with unknown state code {code}"
                );
                return;
            }
            s => s,
        };
        info!("{}", java_log_line(self.state, from, n));
        let r = Received {
            sid: from,
            state,
            leader: n.leader,
            zxid: n.zxid,
            election_epoch: n.election_epoch,
            peer_epoch,
            version,
        };
        if self.state == ServerState::Looking {
            self.queue.push_back(r);
            if state == ServerState::Looking && r.election_epoch < self.lc {
                // Row 3: a lagging LOOKING voter gets my proposal at once.
                let p = self.proposal;
                let reply = self.notification(
                    ServerState::Looking,
                    p.leader,
                    p.zxid,
                    self.lc,
                    p.peer_epoch,
                );
                self.send(from, reply);
            }
        } else if state == ServerState::Looking {
            // Row 6: tell a LOOKING voter what I decided. (A leader would also report the sid
            // to Zab; that is the driver's business.)
            let cv = self.current_vote;
            let reply = self.notification(
                self.state,
                cv.leader,
                cv.zxid,
                cv.election_epoch,
                cv.peer_epoch,
            );
            self.send(from, reply);
        }
        // Row 7: both not LOOKING: ignored.
    }

    fn look_at_config(&mut self, from: i64, n: &Notification) {
        let text = n.config_text().unwrap_or_default();
        // Java's configFromString: a config that does not parse, or has no usable quorum, is
        // "something wrong" and the message is processed without it.
        let parsed = QuorumConfig::parse(&text).map_err(|e| e.to_string());
        let (rqv, quorum) = match parsed.and_then(|c| {
            QuorumVerifier::from_config(&c)
                .map(|q| (c, q))
                .map_err(|e| e.to_string())
        }) {
            Ok(both) => both,
            Err(e) => {
                warn!("Something went wrong while processing config received from {from}: {e}");
                return;
            }
        };
        if rqv.version() <= self.cfg.quorum.version() {
            return;
        }
        info!(
            "{} Received version: {:x} my version: {:x}",
            self.cfg.my_id,
            rqv.version(),
            self.cfg.quorum.version()
        );
        if self.state != ServerState::Looking {
            debug!("Skip processReconfig(), state: {}", self.state.name());
            return;
        }
        // `!rqv.equals(curQV)`, with the config in force before processReconfig as Java holds
        // it: my entry with the client address it filled in.
        let mut held = self.cfg.quorum.config().clone();
        if let Some(client) = &self.cfg.static_client
            && let Some(me) = held.lines.iter_mut().find_map(|l| match l {
                ConfigLine::Server(s) if s.id == self.cfg.my_id && s.client.is_none() => Some(s),
                _ => None,
            })
        {
            me.client = Some(client.clone());
        }
        let other_members = !crate::reconfig::same_members(&held, &rqv);
        if self.cfg.reconfig_enabled {
            let a = crate::reconfig::process_reconfig(
                true,
                self.cfg.quorum.config(),
                &rqv,
                self.cfg.my_id,
                self.cfg.role,
                self.current_vote.leader,
                None,
            );
            self.reconfigure(quorum, a.role);
            // A newer config replaces one not yet taken: the last is the one in force.
            self.ready.config = Some(NewConfig {
                config: rqv,
                activation: a,
            });
        } else if other_members {
            // processReconfig is a no-op, yet the election restarts (reference A.2): under
            // the old config, until the peer's next notification restarts it again.
            warn!(
                "{from} sent config version {:x} with other members; reconfigEnabled is false, so it is not adopted, and the election restarts under version {:x} as Java's does",
                rqv.version(),
                self.cfg.quorum.version()
            );
        }
        if other_members {
            info!("restarting leader election");
            self.halted = true;
            self.queue.clear();
            self.ready.network = Some(Network::Halt);
        }
    }

    // ----- lookForLeader (reference D) -----

    fn drain(&mut self, now_ms: u64) {
        while let Some(r) = self.queue.pop_front() {
            if !self.running || self.state != ServerState::Looking {
                self.queue.clear();
                return;
            }
            match self.phase {
                Phase::Polling => {
                    self.process(now_ms, r);
                    if self.running && self.phase == Phase::Polling {
                        // Each poll that returns restarts the wait; the interval itself keeps
                        // its backoff.
                        self.deadline = Some(now_ms + self.not_timeout);
                    }
                }
                Phase::Finalizing => {
                    if total_order_predicate(&self.cfg.quorum, r.proposal(), self.proposal) {
                        // A better vote: back at the tail, back to the main loop.
                        debug!(
                            "finalizeWait aborted by a better notification from {}",
                            r.sid
                        );
                        self.queue.push_back(r);
                        self.phase = Phase::Polling;
                    } else {
                        self.deadline = Some(now_ms + self.cfg.finalize_wait_ms);
                    }
                }
            }
        }
    }

    fn process(&mut self, now_ms: u64, n: Received) {
        if !(self.valid_voter(n.sid) && self.valid_voter(n.leader)) {
            // Anyone can send these: one line per window, with a count (crate::throttle).
            if !self.valid_voter(n.leader)
                && let Some(more) = self.throttle.allow("non-member vote", now_ms)
            {
                warn!(
                    "Ignoring notification for non-cluster member sid {} from sid {}{}",
                    n.leader,
                    n.sid,
                    suppressed(more)
                );
            }
            if !self.valid_voter(n.sid)
                && let Some(more) = self.throttle.allow("non-member sender", now_ms)
            {
                warn!(
                    "Ignoring notification for sid {} from non-quorum member sid {}{}",
                    n.leader,
                    n.sid,
                    suppressed(more)
                );
            }
            return;
        }
        match n.state {
            ServerState::Looking => self.process_looking(now_ms, n),
            ServerState::Observing => debug!("Notification from observer: {}", n.sid),
            ServerState::Following | ServerState::Leading => self.process_following(n),
            ServerState::Unknown(_) => {}
        }
    }

    fn process_looking(&mut self, now_ms: u64, n: Received) {
        if self.init_proposal().zxid == -1 {
            debug!("Ignoring notification as our zxid is -1");
            return;
        }
        if n.zxid == -1 {
            debug!("Ignoring notification from member with -1 zxid {}", n.sid);
            return;
        }
        if n.election_epoch > self.lc {
            self.lc = n.election_epoch;
            self.recvset.clear();
            let init = self.init_proposal();
            self.proposal = if total_order_predicate(&self.cfg.quorum, n.proposal(), init) {
                n.proposal()
            } else {
                init
            };
            self.send_notifications();
        } else if n.election_epoch < self.lc {
            debug!(
                "Notification election epoch is smaller than logicalclock. n.electionEpoch = 0x{:x}, logicalclock=0x{:x}",
                n.election_epoch, self.lc
            );
            return;
        } else if total_order_predicate(&self.cfg.quorum, n.proposal(), self.proposal) {
            self.proposal = n.proposal();
            self.send_notifications();
        }
        self.recvset.insert(
            n.sid,
            Vote::looking(n.leader, n.zxid, n.election_epoch, n.peer_epoch),
        );
        let p = self.proposal;
        let target = Vote::looking(p.leader, p.zxid, self.lc, p.peer_epoch);
        if self.has_quorum(&self.recvset, &target) {
            self.phase = Phase::Finalizing;
            self.deadline = Some(now_ms + self.cfg.finalize_wait_ms);
        }
    }

    fn process_following(&mut self, n: Received) {
        let target = n.vote();
        let result = Vote::looking(n.leader, n.zxid, n.election_epoch, n.peer_epoch);
        if n.election_epoch == self.lc {
            self.recvset.insert(
                n.sid,
                Vote {
                    version: 0,
                    ..target
                },
            );
            if self.has_quorum(&self.recvset, &target)
                && self.check_leader(&self.recvset, n.leader, n.election_epoch)
            {
                self.decide(result);
                return;
            }
        }
        self.outofelection.insert(n.sid, target);
        if self.has_quorum(&self.outofelection, &target)
            && self.check_leader(&self.outofelection, n.leader, n.election_epoch)
        {
            self.lc = n.election_epoch;
            self.decide(result);
        }
    }

    fn has_quorum(&self, votes: &Tally, target: &Vote) -> bool {
        let matching = votes.matching_sids(target);
        let quorum_of = |q: &QuorumVerifier| {
            let acks: BTreeSet<i64> = matching
                .iter()
                .copied()
                .filter(|sid| q.is_voter(*sid))
                .collect();
            q.contains_quorum(&acks)
        };
        quorum_of(&self.cfg.quorum) && self.next.as_ref().is_none_or(quorum_of)
    }

    fn check_leader(&self, votes: &Tally, leader: i64, election_epoch: i64) -> bool {
        if leader != self.cfg.my_id {
            votes
                .get(leader)
                .is_some_and(|v| v.state == ServerState::Leading)
        } else {
            self.lc == election_epoch
        }
    }

    fn decide(&mut self, vote: Vote) {
        self.state = if vote.leader == self.cfg.my_id {
            ServerState::Leading
        } else if self.cfg.role == Role::Participant {
            ServerState::Following
        } else {
            ServerState::Observing
        };
        // Java's words to the letter (FastLeaderElection.leaveInstance), so that what reads a
        // Java server's log reads ours; the round is in the `LEADER ELECTION TOOK` line.
        info!(
            "About to leave FLE instance: leader={}, zxid=0x{:x}, my id={}, my state={}",
            vote.leader,
            vote.zxid,
            self.cfg.my_id,
            self.state.name()
        );
        self.current_vote = vote;
        self.running = false;
        self.queue.clear();
        self.phase = Phase::Polling;
        self.deadline = None;
        self.events.push_back(Event::Decided {
            state: self.state,
            vote,
            lc: self.lc,
        });
    }

    fn init_proposal(&self) -> Proposal {
        let participant = self.cfg.role == Role::Participant;
        Proposal {
            leader: if self.cfg.quorum.is_voter(self.cfg.my_id) {
                self.cfg.my_id
            } else {
                i64::MIN
            },
            zxid: if participant {
                self.cfg.last_zxid
            } else {
                i64::MIN
            },
            peer_epoch: if participant {
                self.cfg.current_epoch
            } else {
                i64::MIN
            },
        }
    }

    /// `sendNotifications()`: my proposal, ee = lc, LOOKING, to every voter; mine loops back
    /// through the receiver into the tail of the queue, as QCM's `toSend(mySid)` does.
    fn send_notifications(&mut self) {
        let p = self.proposal;
        let n = self.notification(
            ServerState::Looking,
            p.leader,
            p.zxid,
            self.lc,
            p.peer_epoch,
        );
        let mut voters: BTreeSet<i64> = self.cfg.quorum.voters().collect();
        if let Some(n) = &self.next {
            voters.extend(n.voters());
        }
        for sid in voters {
            if sid == self.cfg.my_id {
                self.receive(sid, &n);
            } else {
                self.send(sid, n.clone());
            }
        }
    }

    fn notification(
        &self,
        state: ServerState,
        leader: i64,
        zxid: i64,
        election_epoch: i64,
        peer_epoch: i64,
    ) -> Notification {
        Notification::current(
            state,
            leader,
            zxid,
            election_epoch,
            peer_epoch,
            self.config_bytes.clone(),
        )
    }

    fn send(&mut self, to: i64, notification: Notification) {
        self.ready.send.push((to, notification));
    }
}

/// The work and events of the inputs so far, flattened in the order a driver carries them
/// out: the tests' view of [`Election::ready`] and [`Election::poll_event`].
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    NewConfig {
        config: QuorumConfig,
        activation: crate::reconfig::Activation,
    },
    Network(Network),
    Send {
        to: i64,
        notification: Notification,
    },
    Decided {
        state: ServerState,
        vote: Vote,
        lc: i64,
    },
}

#[cfg(test)]
impl Election {
    pub(crate) fn take_outputs(&mut self) -> Vec<Output> {
        let ready = self.ready();
        let mut out: Vec<Output> = ready
            .config
            .map(|c| Output::NewConfig {
                config: c.config,
                activation: c.activation,
            })
            .into_iter()
            .collect();
        out.extend(ready.network.map(Output::Network));
        out.extend(
            ready
                .send
                .into_iter()
                .map(|(to, notification)| Output::Send { to, notification }),
        );
        out.extend(std::iter::from_fn(|| self.poll_event()).map(|e| match e {
            Event::Decided { state, vote, lc } => Output::Decided { state, vote, lc },
        }));
        out
    }
}

#[cfg(test)]
mod reconfig_tests {
    use super::*;
    use crate::election::quorum::synthetic_text;

    fn newer(voters: &[i64], version: &str) -> QuorumConfig {
        let text = synthetic_text(voters, &[], "").replace("version=0", version);
        QuorumConfig::parse(&text).unwrap()
    }

    fn election(reconfig_enabled: bool) -> Election {
        let mut cfg = ElectionConfig::new(4, QuorumVerifier::majority(&[1, 2, 3, 4], &[]));
        cfg.reconfig_enabled = reconfig_enabled;
        let mut e = Election::new(cfg);
        e.start(0);
        e.take_outputs();
        e
    }

    fn from_peer(config: &QuorumConfig) -> Notification {
        Notification::current(
            ServerState::Following,
            3,
            0x1_0000_0002,
            1,
            1,
            config.to_string().into_bytes(),
        )
    }

    fn sends(out: &[Output]) -> Vec<(i64, i64)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send { to, notification } => Some((*to, notification.leader)),
                _ => None,
            })
            .collect()
    }

    /// A peer can push the round to i64::MAX; the next election's round then wraps to
    /// i64::MIN, as Java's `logicalclock.incrementAndGet()` does, instead of panicking.
    #[test]
    fn the_round_wraps_past_i64_max_as_javas_does() {
        let mut e = election(false);
        let looking = Notification::current(ServerState::Looking, 4, 0, i64::MAX, 0, Vec::new());
        e.on_notification(10, 1, &looking);
        assert_eq!(e.logical_clock(), i64::MAX);
        e.start(20);
        assert_eq!(e.logical_clock(), i64::MIN);
    }

    /// Java fills in a server's client address from `clientPort` when its server line has none,
    /// and never writes that address into a config it sends: the config it holds is unequal to
    /// any newer one from a peer, even with the same members, and the election restarts
    /// (3.8.0: a server started late with a static config logged `restarting leader election`
    /// on the ensemble's version 0x100000000 of the same three servers). Without such an
    /// address, only other members restart it.
    #[test]
    fn a_newer_config_of_the_same_members_restarts_a_server_whose_client_address_is_from_client_port()
     {
        for (static_client, halts) in [(Some((None, 2181)), true), (None, false)] {
            let mut cfg = ElectionConfig::new(4, QuorumVerifier::majority(&[1, 2, 3, 4], &[]));
            cfg.static_client = static_client.clone();
            let mut e = Election::new(cfg);
            e.start(0);
            e.take_outputs();
            let c = newer(&[1, 2, 3, 4], "version=100000000");
            e.on_notification(5, 1, &from_peer(&c));
            let out = e.take_outputs();
            assert_eq!(
                out.contains(&Output::Network(Network::Halt)),
                halts,
                "{static_client:?}: {out:?}"
            );
        }
    }

    /// Java's FastLeaderElection takes a newer config from a notification while LOOKING, shuts
    /// the election and its connections down, and starts a new one under it when the current
    /// poll returns; a server the config does not list votes for nobody.
    #[test]
    fn a_newer_config_restarts_the_election_under_it_when_the_poll_returns() {
        let mut e = election(true);
        let c = newer(&[1, 2, 3], "version=100000000");
        e.on_notification(5, 1, &from_peer(&c));
        let out: Vec<Output> = e.take_outputs();
        assert!(
            matches!(&out[0], Output::NewConfig { config, activation } if *config == c && activation.members_changed)
        );
        assert_eq!(out[1..], [Output::Network(Network::Halt)]);
        assert_eq!(e.quorum().version(), 0x1_0000_0000);
        // Deaf until the poll started at 0 returns, at 200.
        let looking =
            Notification::current(ServerState::Looking, 1, 9, 1, 1, b"version=0".to_vec());
        e.on_notification(50, 2, &looking);
        assert_eq!(e.take_outputs(), []);
        assert_eq!(e.next_deadline(), Some(200));
        e.on_timer(199, true);
        assert_eq!(e.take_outputs(), []);
        e.on_timer(200, true);
        let out = e.take_outputs();
        assert_eq!(out[0], Output::Network(Network::Restart));
        assert_eq!(e.logical_clock(), 1, "a new election, its clock from 0");
        // Broadcast to the new voters only, voting for nobody (I am not listed).
        assert_eq!(
            sends(&out),
            vec![(1, i64::MIN), (2, i64::MIN), (3, i64::MIN)]
        );
        assert_eq!(
            e.next_deadline(),
            Some(400),
            "the new election's first poll"
        );
        // Its text is what my notifications carry now.
        assert_eq!(e.config_text(), c.to_string());
        // The same version again: nothing.
        e.on_notification(206, 2, &from_peer(&c));
        assert!(
            e.take_outputs()
                .into_iter()
                .all(|o| !matches!(o, Output::NewConfig { .. } | Output::Network(_)))
        );
    }

    /// A newer config that only renumbers the version (same members) is taken without a
    /// restart (`rqv.equals(curQV)`).
    #[test]
    fn a_newer_config_with_the_same_members_does_not_restart() {
        let mut e = election(true);
        let c = newer(&[1, 2, 3, 4], "version=100000000");
        e.on_notification(5, 1, &from_peer(&c));
        let out = e.take_outputs();
        assert!(matches!(&out[0], Output::NewConfig { .. }));
        assert!(!out.iter().any(|o| matches!(o, Output::Network(_))));
        assert_eq!(e.quorum().version(), 0x1_0000_0000);
    }

    /// In the finalize wait Java's inner loop does not look at `stop`: the wait still ends in
    /// a decision, over no connections; the next election starts afresh.
    #[test]
    fn a_halt_in_the_finalize_wait_still_decides_and_the_next_start_restarts() {
        let mut e = election(true);
        let looking = |leader| {
            Notification::current(ServerState::Looking, leader, 0, 1, 0, b"version=0".to_vec())
        };
        // 4 proposes itself; 1 and 2 agree: a quorum of {1,2,3,4}, the finalize wait begins.
        e.on_notification(10, 1, &looking(4));
        e.on_notification(11, 2, &looking(4));
        e.take_outputs();
        assert_eq!(e.next_deadline(), Some(211));
        e.on_notification(
            20,
            3,
            &from_peer(&newer(&[1, 2, 3, 4, 5], "version=100000000")),
        );
        assert!(e.take_outputs().contains(&Output::Network(Network::Halt)));
        e.on_timer(211, true);
        let out = e.take_outputs();
        assert!(
            matches!(
                out[..],
                [Output::Decided {
                    state: ServerState::Leading,
                    ..
                }]
            ),
            "{out:?}"
        );
        e.start(5000);
        let out = e.take_outputs();
        assert_eq!(out[0], Output::Network(Network::Restart));
        assert_eq!(e.logical_clock(), 1);
        assert_eq!(sends(&out).len(), 4, "to 1, 2, 3 and 5");
    }

    /// With reconfig disabled processReconfig does nothing, yet Java's receiver still shuts
    /// the election down when the members differ: it restarts under the old config.
    #[test]
    fn without_reconfig_enabled_a_newer_config_restarts_under_the_old_one() {
        let mut e = election(false);
        e.on_notification(5, 1, &from_peer(&newer(&[1, 2, 3], "version=100000000")));
        assert_eq!(e.take_outputs(), [Output::Network(Network::Halt)]);
        assert_eq!(e.quorum().version(), 0);
        e.on_timer(200, true);
        let out = e.take_outputs();
        assert_eq!(out[0], Output::Network(Network::Restart));
        assert_eq!(sends(&out).len(), 3, "to 1, 2 and 3 of the old config");
    }

    /// During a reconfig (a last seen config newer than the one in force) the members of
    /// both are voters and a decision needs a quorum in each (Java's SyncedLearnerTracker).
    #[test]
    fn a_last_seen_config_adds_voters_and_a_second_quorum() {
        let mut cfg = ElectionConfig::new(1, QuorumVerifier::majority(&[1, 2, 3], &[]));
        cfg.reconfig_enabled = true;
        cfg.next_quorum = Some(
            QuorumVerifier::from_config(&newer(&[1, 2, 3, 4, 5], "version=100000001")).unwrap(),
        );
        let mut e = Election::new(cfg);
        e.start(0);
        let to: Vec<i64> = e
            .take_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Send { to, .. } => Some(to),
                _ => None,
            })
            .collect();
        assert_eq!(
            to,
            vec![2, 3, 4, 5],
            "the proposed members get my notifications too"
        );
        // 1 and 2 are a quorum of {1,2,3} but not of {1,...,5}: no decision yet.
        let looking = |leader| {
            Notification::current(ServerState::Looking, leader, 0, 1, 0, b"version=0".to_vec())
        };
        e.on_notification(1, 2, &looking(1));
        e.on_timer(1000, true);
        assert_eq!(e.state(), ServerState::Looking);
        e.on_notification(1001, 4, &looking(1));
        e.on_timer(2000, true);
        assert_eq!(e.state(), ServerState::Leading);
        // Activating the config clears it.
        e.reconfigure(
            QuorumVerifier::from_config(&newer(&[1, 2, 3, 4, 5], "version=100000001")).unwrap(),
            Role::Participant,
        );
        assert!(e.next.is_none());
    }
}
