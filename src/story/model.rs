//! What the story of a capture says: the types every view reads.

use crate::wire::{Notification, ServerState};
use std::collections::{BTreeMap, BTreeSet};

/// A vote as compared for agreement: leader, zxid, round, peer epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VoteKey {
    pub leader: i64,
    pub zxid: i64,
    pub round: i64,
    pub peer_epoch: i64,
}

impl VoteKey {
    /// The vote as Java's tally holds it, in `state`, with the message's `version`.
    pub(crate) fn java(self, state: ServerState, version: i32) -> crate::election::Vote {
        crate::election::Vote {
            leader: self.leader,
            zxid: self.zxid,
            election_epoch: self.round,
            peer_epoch: self.peer_epoch,
            state,
            version,
        }
    }

    /// What it proposes, for the total order.
    pub(crate) fn proposal(self) -> crate::election::Proposal {
        crate::election::Proposal {
            leader: self.leader,
            zxid: self.zxid,
            peer_epoch: self.peer_epoch,
        }
    }

    pub(crate) fn of(n: &Notification) -> Self {
        VoteKey {
            leader: n.leader,
            zxid: n.zxid,
            round: n.election_epoch,
            peer_epoch: n.effective_peer_epoch(),
        }
    }
}

/// One change of a server's vote.
#[derive(Debug, Clone, PartialEq)]
pub struct VoteChange {
    pub time: f64,
    pub sid: i64,
    pub vote: VoteKey,
}

/// What shows that a server decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Only its own later FOLLOWING/LEADING/OBSERVING notification: the decision was no later
    /// than that message.
    OwnNotification,
    /// A quorum answered it FOLLOWING/LEADING for one leader, that leader LEADING: Java's
    /// out-of-election rule decides at once (the time of the completing answer).
    QuorumReplies,
    /// Its vote held a quorum of its round's votes: decided finalizeWait after the last
    /// notification it received from then on.
    ConvergedVotes,
    /// It started a new round of its own (no peer had shown it that round): it must have
    /// decided in the round before, on its last vote there.
    NewRound,
    /// A committed reconfig designated another leader than the one in office
    /// (COMMITANDACTIVATE): Java's servers take it with no election. The time is when the
    /// server closed its connection to the old leader, where the capture names it, else its
    /// first packet of its sync with the new one (for the new leader, the first that reached
    /// it).
    Reconfig,
}

impl Evidence {
    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::OwnNotification => "own_notification",
            Evidence::QuorumReplies => "quorum_replies",
            Evidence::ConvergedVotes => "converged_votes",
            Evidence::NewRound => "new_round",
            Evidence::Reconfig => "reconfig",
        }
    }
}

/// How a learner synced with its leader on the quorum port.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncInfo {
    /// The leader's sid.
    pub leader: Option<i64>,
    /// `DIFF`, `SNAP` or `TRUNC`, as the leader sent it.
    pub mode: Option<&'static str>,
    /// FOLLOWERINFO/OBSERVERINFO sent.
    pub started: f64,
    /// When the sync packet (DIFF/SNAP/TRUNC) came.
    pub sync_time: Option<f64>,
    /// NEWLEADER received.
    pub newleader: Option<f64>,
    /// The learner's ACK of NEWLEADER.
    pub newleader_ack: Option<f64>,
    /// UPTODATE received: the learner serves from here on.
    pub uptodate: Option<f64>,
    /// The NEWLEADER zxid (the new epoch in its high 32 bits).
    pub newleader_zxid: Option<i64>,
}

/// How a server left LOOKING.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub sid: i64,
    pub state: ServerState,
    pub leader: i64,
    /// The round it decided in.
    pub election_epoch: i64,
    /// When it decided, estimated as Java decides (see the module docs).
    pub time: f64,
    pub evidence: Evidence,
    /// When it began looking: its first LOOKING vote of this election on the wire, or the end
    /// of its Zab session when its votes were held back (see `session_end_before_vote`).
    pub looking_since: f64,
    /// From `looking_since` to `time`, as Java logs `LEADER ELECTION TOOK`.
    pub took: f64,
    /// `took` is a lower bound: just before `looking_since`, someone dialled peers that were
    /// not listening yet (refused connections name no sid), perhaps this server, whose
    /// election then began before the capture can show it.
    pub took_at_least: bool,
    /// Its sync with the leader on the quorum port, when the capture has it.
    pub sync: Option<SyncInfo>,
    /// A state it held before the capture began (its first message answered with it, on an
    /// ensemble the capture joined running): known, and no decision of the capture's.
    pub before_capture: bool,
}

/// What a round is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RoundKind {
    /// Servers elected a leader (or tried to).
    #[default]
    Election,
    /// A server learned an established leader from its answers.
    Rejoin,
    /// A committed reconfig designated a new leader and the servers took it without an
    /// election (Java's `reconfigFlag`: the leader was removed, or made an observer).
    Handover,
}

/// Why an election began, as the wire shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cause {
    /// Servers starting (the first election, or servers never seen before).
    #[default]
    ServersStarted,
    /// The leader's connections closed or were reset, or it fell silent.
    LeaderLost,
    /// The leader itself went LOOKING: it lost its quorum of followers.
    QuorumLost,
    /// The leader stopped sending on the quorum port (no PING, nothing) well before the
    /// election, its connections still open: cut off from its followers, which gave up on it
    /// after `syncLimit` ticks. `leader_lost` is its last packet.
    LeaderSilent,
    /// As `LeaderSilent`, and the leader came back still LEADING in the round it had led (a
    /// leader cut off goes LOOKING when its followers are gone), or never came back while its
    /// kernel acknowledged what its followers sent: its process had stopped (a GC pause, a
    /// stopped VM, SIGSTOP), not its network. `leader_resumed` is its first answer, if any.
    LeaderFrozen,
    /// A committed reconfig designated another leader (a [`RoundKind::Handover`]);
    /// `leader_lost` is the commit's first COMMITANDACTIVATE.
    Reconfig,
}

/// What TCP showed of a silent leader's host, which tells a cut-off leader from a frozen one
/// that does not come back in the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilenceEvidence {
    /// Bytes between it and its peers waited a second or more for an acknowledgement.
    Unreachable,
    /// It answered a non-member (a probe) while its followers heard nothing: running, and
    /// out of their reach.
    AnsweredOutsider,
    /// Its kernel acknowledged what its followers sent it, and its process left it unanswered.
    Acknowledged,
    /// The capture holds nothing sent to it, or between it and its peers, to tell.
    None,
}

/// What became of the old leader, as far as the wire tells: the finer cause of an election
/// beside [`Cause`], whose values keep their meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderFate {
    /// Its process ended: its host closed its connections (FIN or RST) and it did not come
    /// back in the capture. Killed, crashed or stopped: Java does nothing of its own on
    /// SIGTERM (no shutdown hook closes a socket), so a stop looks on the wire as `kill -9`
    /// does (recorded on 3.9.5: a stop and a kill leave the same FINs within 60 µs).
    KilledOrStopped,
    /// As `KilledOrStopped`, and back later in the capture: a new process of the same sid
    /// looked again (`leader_back`).
    Restarted,
    /// Silent since before the election, its connections still open, never back LEADING,
    /// and what went to or from it waited for TCP acknowledgements: its network failed it
    /// (a partition, a pulled cable).
    CutOff,
    /// Silent, and back LEADING in the round it had led, or never back while its kernel
    /// acknowledged its followers' votes: its process had stopped.
    Frozen,
    /// It went LOOKING itself: fewer than a quorum of followers stayed with it.
    LostQuorum,
    /// Its followers left it with no sign on the wire of why, or it fell silent with nothing
    /// in the capture for TCP to tell cut off from frozen.
    Unknown,
    /// It committed a reconfig that designated another leader, and stepped down to follow it
    /// (a [`RoundKind::Handover`]).
    HandedOver,
}

impl LeaderFate {
    pub fn name(self) -> &'static str {
        match self {
            LeaderFate::KilledOrStopped => "killed_or_stopped",
            LeaderFate::Restarted => "restarted",
            LeaderFate::CutOff => "cut_off",
            LeaderFate::Frozen => "frozen",
            LeaderFate::LostQuorum => "lost_quorum",
            LeaderFate::Unknown => "unknown",
            LeaderFate::HandedOver => "handed_over",
        }
    }
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::ServersStarted => "servers_started",
            Cause::LeaderLost => "leader_lost",
            Cause::QuorumLost => "quorum_lost",
            Cause::LeaderSilent => "leader_silent",
            Cause::LeaderFrozen => "leader_frozen",
            Cause::Reconfig => "reconfig",
        }
    }
}

/// Why a server is still LOOKING, from the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct StillLooking {
    pub sid: i64,
    /// When it began looking.
    pub since: f64,
    /// Its vote, when it sent one.
    pub vote: Option<VoteKey>,
    /// How many voters' votes (its own included) agree with it, and how many it needs (`None`
    /// under a hierarchical config, where what counts is which groups they are from).
    pub agreeing: usize,
    pub needs: Option<usize>,
    /// The votes of its round it holds: sid -> leader.
    pub holds: BTreeMap<i64, i64>,
    /// Members it has no working connection to (nothing went both ways on an open one).
    pub unconnected: Vec<i64>,
    /// Larger sids it dialled that dropped its connection (the sid tie-break).
    pub dropped_by: Vec<i64>,
}

/// One election, or one rejoin.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Round {
    pub kind: RoundKind,
    /// The election epoch the election ended in (the largest seen in it).
    pub election_epoch: i64,
    pub started: f64,
    /// Servers that looked in it.
    pub participants: BTreeSet<i64>,
    pub changes: Vec<VoteChange>,
    pub decisions: Vec<Decision>,
    /// The participant that led (never an observer's choice); `None` when the sids are not
    /// known (a 3.4 capture without `--config`) or nobody led.
    pub winner: Option<i64>,
    /// From `started` (its first server began looking) to the last decision.
    pub duration: Option<f64>,
    /// Whether a participant decided.
    pub settled: bool,
    pub cause: Cause,
    /// The leader in office before it, when the capture shows one.
    pub old_leader: Option<i64>,
    /// What became of the old leader (`None` when there was none: servers starting).
    pub fate: Option<LeaderFate>,
    /// A killed or stopped leader's first look after it started again
    /// ([`LeaderFate::Restarted`]).
    pub leader_back: Option<f64>,
    /// When the old leader was lost (its connections closed), or the election began.
    pub leader_lost: Option<f64>,
    /// `leader_lost` is when the old leader's connections closed, as the capture shows (at
    /// or before the election began).
    pub leader_closed: bool,
    /// A frozen leader's first answer after it resumed ([`Cause::LeaderFrozen`]), when it
    /// came back in the capture.
    pub leader_resumed: Option<f64>,
    /// For a leader silent and never back LEADING: what TCP showed of its host.
    pub silence: Option<SilenceEvidence>,
    /// When the new leader held NEWLEADER ACKs from a quorum (Java: `Have quorum of
    /// supporters`).
    pub serving: Option<f64>,
    /// `serving - leader_lost`.
    pub unavailable: Option<f64>,
    /// From leader lost to the new leader's decision (how long there was no leader).
    pub no_leader: Option<f64>,
    /// How it ended.
    pub end: RoundEnd,
    pub still_looking: Vec<StillLooking>,
    /// For a rejoin: its leader was already being replaced, so the decision was stale.
    pub stale: Option<StaleRejoin>,
    /// The config version in force when it began (the newest the capture had shown by then),
    /// when the notifications carry configs.
    pub config_version: Option<u64>,
}

/// A config the capture showed first at `time`, newer than every one before it (a
/// `reconfig`); the first config seen is one too, with nothing added or removed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigChange {
    pub time: f64,
    pub version: u64,
    pub voters: Vec<i64>,
    pub observers: Vec<i64>,
    pub added: Vec<i64>,
    pub removed: Vec<i64>,
}

/// A rejoin whose leader an election was already replacing when the server decided: Java's
/// observers and followers can take a dead leader from answers sent before it died, then give
/// it up when they cannot connect to it (an observer took a killed leader and left it 0.4 s
/// later, logging "Exception when observing the leader").
#[derive(Debug, Clone, PartialEq)]
pub struct StaleRejoin {
    /// When the election replacing the leader began.
    pub election_started: f64,
    /// The server's next decision, for another leader: when and which.
    pub left_at: Option<f64>,
    pub next_leader: Option<i64>,
}

/// How a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RoundEnd {
    #[default]
    Decided,
    /// Unfinished: the capture ended during it.
    CaptureEnd,
    /// Unfinished: the servers shut down (their connections closed).
    Shutdown,
}

impl RoundEnd {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            RoundEnd::Decided => "decided",
            RoundEnd::CaptureEnd => "capture_end",
            RoundEnd::Shutdown => "shutdown",
        }
    }
}

/// Something worth a look: when (if it has one moment), and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Anomaly {
    pub time: Option<f64>,
    pub kind: AnomalyKind,
}

/// What an anomaly is, with what the capture showed of it (`output/` words it).
#[derive(Debug, Clone, PartialEq)]
pub enum AnomalyKind {
    /// Two statements named one election address as different sids.
    AddressConflict(crate::decode::identity::AddressConflict),
    /// A vote for a sid no config in force names; `removed_by`: the config that removed it.
    VoteForNonMember {
        from: i64,
        leader: i64,
        removed_by: Option<u64>,
    },
    /// The same vote re-sent with growing gaps: Java's poll timing out.
    NotificationTimeouts {
        from: i64,
        to: i64,
        /// `i64::MIN` for an observer's vote (no leader).
        leader: i64,
        round: i64,
        gaps: Vec<f64>,
    },
    /// Connections to a larger sid that it dropped (the sid tie-break).
    TieBreakDrop { from: i64, to: i64, times: u32 },
    /// LOOKING votes of a decided round that arrived `late` seconds after their sender decided.
    DelayedVotes {
        from: i64,
        to: i64,
        count: u32,
        round: i64,
        late: f64,
    },
    /// A server refused a learner's quorum SASL authentication.
    SaslRefused {
        server: Option<i64>,
        learner: Option<i64>,
        user: Option<String>,
        times: u32,
    },
    /// Messages of one malformed kind (the decoder's description of it).
    Malformed { what: String, count: u32 },
    /// A member that sent no notification in the capture.
    SilentMember { sid: i64 },
    /// LOOKING votes that were decided servers' last messages re-sent on new connections.
    ResentLastMessage { count: u64 },
    /// Notifications between servers beyond the `bound` sids followed.
    TooManyServers { count: u64, bound: usize },
    /// Notifications with an unknown sender or receiver.
    UnknownSender { count: u64 },
}

impl AnomalyKind {
    /// Its name in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            AnomalyKind::AddressConflict(_) => "address_conflict",
            AnomalyKind::VoteForNonMember { .. } => "vote_for_non_member",
            AnomalyKind::NotificationTimeouts { .. } => "notification_timeouts",
            AnomalyKind::TieBreakDrop { .. } => "tie_break_drop",
            AnomalyKind::DelayedVotes { .. } => "delayed_votes",
            AnomalyKind::SaslRefused { .. } => "sasl_refused",
            AnomalyKind::Malformed { .. } => "malformed",
            AnomalyKind::SilentMember { .. } => "silent_member",
            AnomalyKind::ResentLastMessage { .. } => "resent_last_message",
            AnomalyKind::TooManyServers { .. } => "too_many_servers",
            AnomalyKind::UnknownSender { .. } => "unknown_sender",
        }
    }
}

/// The summary of a capture.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The ensemble as it stood when the capture began, when it began on a running one.
    pub at_start: Option<AtStart>,
    /// Non-members that asked the servers for their votes (probes), in sid order.
    pub non_members: Vec<NonMember>,
    pub rounds: Vec<Round>,
    pub anomalies: Vec<Anomaly>,
    /// Whether the capture has quorum-port (2888) traffic: without it there is no sync.
    pub quorum_port: bool,
    /// Sids could not be told (3.4 without `--config`/`--sid-map`): no winner is named.
    pub sids_unknown: bool,
    /// The capture's last record.
    pub end: f64,
    /// When the servers shut down: every election connection had closed by the end of the
    /// capture, from this time on (the first close after the last message).
    pub shutdown: Option<f64>,
    /// The configs the notifications (and NEWLEADER packets) carried, each newer than the last.
    pub configs: Vec<ConfigChange>,
    /// Notifications cut by the capture's snap length that were counted from the vote in
    /// their first bytes (their configs unknown).
    pub cut_votes: u64,
    /// Notifications cut before the end of their vote: not counted.
    pub cut_votes_lost: u64,
    /// How often each rule of inference decided something ([`super::rules`]).
    pub rules: super::rules::Fired,
    /// Every election a server entered with a vote of its own on the wire, in the order they
    /// began (each server's in time order): what `zkfle replay` runs again.
    pub lookings: Vec<Looking>,
}

/// One server's election (a `lookForLeader`) whose votes are on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Looking {
    pub sid: i64,
    /// When its election (`lookForLeader`) began: its first connection attempt since its
    /// previous notification (sending its first vote opens its connections), if before its
    /// first vote. Its decision's `looking_since` is no later.
    pub began: f64,
    /// When it turned LOOKING: its election's beginning, or (after a decision in the same
    /// process) the first LOOKING vote it left unanswered, if earlier. Java turns LOOKING
    /// before its election begins (a follower shuts down first) and queues what it receives
    /// meanwhile: a replay's election starts here to read it.
    pub looking: f64,
    /// Its first vote on the wire.
    pub first_vote: f64,
    /// That vote's round.
    pub round: i64,
    /// A new process: its round went down since its last vote (the logical clock starts
    /// again at 0).
    pub restart: bool,
    /// The config version its first vote carried (3.5 and later).
    pub config_version: Option<u64>,
    /// The first proposal for itself it sent in this election (its initial vote), if any.
    pub own_vote: Option<VoteKey>,
    /// When its election before this one stopped: LOOKING, it was sent a newer config, which
    /// Java takes, restarting its election; what came until this one began was dropped.
    pub config_stopped: Option<f64>,
}

/// A span of one server's state, as the summary tells it: the page draws these bands.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSpan {
    pub sid: i64,
    pub state: ServerState,
    pub from: f64,
    pub to: f64,
}

impl Summary {
    /// Each server's states over the capture, from what the summary found and nothing else:
    /// LOOKING from when a server began looking to its decision, then the decided state until
    /// it next looks. A capture begun on a running ensemble starts with the leader and the
    /// learners found on the quorum port. No span where the summary knows no state: a leader
    /// from when its connections closed (the cause of the next election) until it looks
    /// again, and every server once all election connections closed (shut down).
    pub fn states(&self) -> Vec<StateSpan> {
        let mut events: BTreeMap<i64, Vec<(f64, Option<ServerState>)>> = BTreeMap::new();
        let mut push = |sid: i64, t: f64, state: Option<ServerState>| {
            events.entry(sid).or_default().push((t, state));
        };
        let observers: BTreeSet<i64> = self
            .configs
            .iter()
            .flat_map(|c| c.observers.iter().copied())
            .chain(
                self.rounds
                    .iter()
                    .flat_map(|r| &r.decisions)
                    .filter(|d| d.state == ServerState::Observing)
                    .map(|d| d.sid),
            )
            .collect();
        if let Some(a) = &self.at_start {
            push(a.leader, a.since, Some(ServerState::Leading));
            for &l in &a.learners {
                let state = if observers.contains(&l) {
                    ServerState::Observing
                } else {
                    ServerState::Following
                };
                push(l, a.since, Some(state));
            }
        }
        let mut prev_leader = self.at_start.as_ref().map(|a| a.leader);
        for r in &self.rounds {
            if r.kind == RoundKind::Election
                && r.cause == Cause::LeaderLost
                && r.leader_closed
                && let (Some(old), Some(t)) = (prev_leader, r.leader_lost)
            {
                push(old, t, None);
            }
            for d in &r.decisions {
                // (Servers handed over by a reconfig never look.)
                if !d.before_capture && d.evidence != Evidence::Reconfig {
                    push(d.sid, d.looking_since, Some(ServerState::Looking));
                }
                push(d.sid, d.time, Some(d.state));
            }
            for w in &r.still_looking {
                push(w.sid, w.since, Some(ServerState::Looking));
            }
            if matches!(r.kind, RoundKind::Election | RoundKind::Handover)
                && let Some(w) = r.winner
            {
                prev_leader = Some(w);
            }
        }
        if let Some(t) = self.shutdown {
            for evs in events.values_mut() {
                evs.push((t, None));
            }
        }
        let mut spans = Vec::new();
        for (sid, mut evs) in events {
            // A decision and the next looking at the same time: the decision first.
            evs.sort_by(|a, b| {
                a.0.total_cmp(&b.0).then_with(|| {
                    (a.1 == Some(ServerState::Looking)).cmp(&(b.1 == Some(ServerState::Looking)))
                })
            });
            let mut open: Option<StateSpan> = None;
            for (t, state) in evs {
                if open.as_ref().is_some_and(|o| Some(o.state) == state) {
                    continue;
                }
                if let Some(mut o) = open.take() {
                    o.to = t;
                    spans.push(o);
                }
                open = state.map(|state| StateSpan {
                    sid,
                    state,
                    from: t,
                    to: t,
                });
            }
            if let Some(mut o) = open {
                o.to = self.end.max(o.from);
                spans.push(o);
            }
        }
        spans
    }
}

/// A sid outside every config the capture showed (or `--config` gave) that exchanged
/// notifications with members: `zkfle probe`, `doctor` or `repro`, or anything else that asked
/// the servers for their vote. Its exchanges are not an election.
#[derive(Debug, Clone, PartialEq)]
pub struct NonMember {
    pub sid: i64,
    /// Notifications it sent or was sent.
    pub notifications: u64,
    /// The members it sent notifications to.
    pub asked: Vec<i64>,
    pub first: f64,
    pub last: f64,
}

/// What the capture shows of an ensemble already running when it began: the leader whose
/// quorum connections were open before it, heard before any election the capture holds.
#[derive(Debug, Clone, PartialEq)]
pub struct AtStart {
    pub leader: i64,
    /// When its first packet was captured.
    pub since: f64,
    /// The learners of its connections open before the capture, where known.
    pub learners: Vec<i64>,
    /// Its epoch, from the zxids it sent.
    pub epoch: Option<i64>,
}
