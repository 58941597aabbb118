//! The [`Summarizer`]: records in, the story out.

use super::model::*;
use super::rules::*;
use super::track::*;
use crate::capture::ConnId;
use crate::decode::{Body, Record, Severity};
use crate::wire::quorum::ptype;
use crate::wire::{Notification, Role, ServerState};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// What the model says of an election at `from`'s first vote in it, `n` at `time`, `s` being
/// `from` before this vote; `queued`, what reached it before; `dialled`, its first dial since
/// its previous notification to a voter, sent at `notified`.
fn first_looking(
    from: i64,
    n: &Notification,
    time: f64,
    s: &Server,
    queued: &[(f64, i64, ServerState, VoteKey, i32)],
    (dialled, notified): (Option<f64>, Option<f64>),
) -> Looking {
    let vote = VoteKey::of(n);
    // Within a process a logical clock only goes up.
    let restart = s.last_sent.is_some_and(|l| vote.round < l.round);
    let began = dialled
        .filter(|d| *d <= time && *d >= time - Rule::DialBeforeVote.secs())
        .unwrap_or(time);
    let mut looking = began;
    // A decided server answers a LOOKING vote at once: one it left unanswered since its last
    // notification reached it LOOKING (Java turns LOOKING a little before it votes). Not in a
    // process's first election: a server just started hears before its election begins.
    if s.last_sent.is_some() && !restart {
        let after = notified.unwrap_or(f64::NEG_INFINITY);
        if let Some(first) = queued
            .iter()
            .filter(|q| q.0 > after && q.0 >= time - Rule::QueueWindow.secs())
            .filter(|q| q.2 == ServerState::Looking)
            .map(|q| q.0)
            .reduce(f64::min)
        {
            looking = looking.min(first);
        }
    }
    Looking {
        sid: from,
        began,
        looking,
        first_vote: time,
        round: vote.round,
        restart,
        config_version: n.config_version(),
        own_vote: (vote.leader == from).then_some(vote),
        config_stopped: None,
    }
}

/// Builds a [`Summary`] from records fed in capture order.
#[derive(Debug, Default)]
pub struct Summarizer {
    members: HashMap<i64, Role>,
    /// The members' quorum rule when it is not a plain majority (`group.`/`weight.` lines:
    /// Java's QuorumHierarchical); `None` counts a majority of the voters.
    hierarchy: Option<crate::election::QuorumVerifier>,
    /// Distinct senders of LOOKING votes (the quorum size when no config names the members).
    lookers: usize,
    servers: ServerTable,
    heap: BinaryHeap<Reverse<(Time, i64, u64)>>,
    decisions: Vec<Decision>,
    episodes: Vec<Episode>,
    /// The episodes' elections with a vote on the wire ([`Looking`]), in the order of their
    /// first votes.
    lookings: Vec<Looking>,
    changes: Vec<VoteChange>,
    anomalies: Vec<Anomaly>,
    /// (from, to) -> its slot in `runs`: the vote and times of consecutive identical LOOKING
    /// notifications (side by side in the order first seen, as `servers`).
    repeats: HashMap<(i64, i64), u32>,
    runs: Vec<((i64, i64), VoteKey, Repeats)>,
    tie_breaks: BTreeMap<(i64, i64), u32>,
    /// (lower sid, higher sid) whose dial the higher one has yet to answer by dialling back.
    dial_backs: HashSet<(i64, i64)>,
    /// Quorum SASL refusals: (server sid, learner sid) -> how many; the text of the first
    /// (it names the learner's user when the capture shows it).
    sasl_refused: BTreeMap<SidPair, (u32, Option<String>)>,
    /// Each newer config the notifications carried (at most [`MAX_CONFIG_CHANGES`]).
    config_changes: Vec<ConfigChange>,
    /// (voter, voted-for) pairs already flagged for voting for a non-member.
    flagged_votes: HashSet<(i64, i64)>,
    resent: u64,
    configs: crate::decode::identity::ConfigCache,
    malformed: BTreeMap<String, u32>,
    unknown_sids: u64,
    notifications: u64,
    /// Notifications cut by the capture's snap length whose vote was read from the bytes
    /// captured (see [`cut_vote`]).
    cut_votes: u64,
    /// Cut notifications whose vote was not all captured (not counted).
    cut_votes_lost: u64,
    /// The rules of inference that decided something, counted.
    fired: Fired,
    /// How many of `decisions` [`Summarizer::take_new_decisions`] has handed out.
    handed_out: usize,
    /// Election connections: the two sids, and whether each direction carried a message.
    links: ConnMap<Link>,
    /// Open election connections per pair (min, max): working ones (traffic both ways).
    working: HashMap<(i64, i64), u32>,
    /// Closed connections: (time, sid a, sid b, quorum leader side).
    closes: Vec<(f64, Option<i64>, Option<i64>, bool)>,
    quorum: HashMap<ConnId, QuorumConn>,
    syncs: Vec<SyncInfo>,
    sync_learners: Vec<(i64, bool)>,
    /// (leader, epoch) -> NEWLEADER ACKs from voters, and when a quorum was first reached.
    acks: HashMap<(i64, i64), (BTreeSet<i64>, Option<f64>)>,
    quorum_packets: u64,
    /// Per leader sid: its last quorum-port packet to a learner, and its silences (from, to)
    /// of more than [`Rule::LeaderSilence`] between packets, the newest [`MAX_SILENCES`].
    leader_heard: HashMap<i64, (f64, Vec<(f64, f64)>)>,
    /// Bytes that waited a second or more for a TCP acknowledgement: (since, until, sender,
    /// receiver). A leader whose peers' bytes wait so is unreachable, not frozen.
    unacked: Vec<(f64, f64, Option<i64>, Option<i64>)>,
    /// Notifications sent to a leader silent on the quorum port for over
    /// [`Rule::LeaderSilence`]: (time, leader, whether it sent anything within a second after).
    /// Acknowledged (none in `unacked`) and unanswered, they show its host alive while its
    /// process said nothing: frozen.
    sent_to_silent: Vec<(f64, i64, bool)>,
    /// Notifications sent by a leader silent on the quorum port for over [`Rule::LeaderSilence`]:
    /// (time, leader, whether to a member). One to a non-member (a probe) before any to a
    /// member shows its process running while its followers heard nothing: cut off.
    sent_by_silent: Vec<(f64, i64, bool)>,
    /// Address conflicts listed among the anomalies (at most [`MAX_ADDRESS_CONFLICTS`]).
    address_conflicts: usize,
    /// LOOKING votes delivered late, per (sender, receiver): see [`Summarizer::delayed_vote`].
    delayed: BTreeMap<(i64, i64), DelayedVotes>,
    /// The leader established before the capture began (see [`AtStart`]).
    at_start: Option<AtStart>,
    /// Answers of servers stating they lead: (time, sid, round), for a frozen leader's return.
    leading_answers: Vec<(f64, i64, i64)>,
    /// Reconfigs that handed the leadership over (at most [`MAX_CONFIG_CHANGES`]).
    handovers: Vec<Handover>,
    /// The version of the config `--config` gave: a newer one in the notifications (a
    /// reconfig since that file was written) replaces its members.
    given_config_version: Option<u64>,
    /// Whether a server decided in the capture (not counting states held before it).
    decided_in_capture: bool,
    /// Whether the capture began on a running ensemble: connections open before it, joined
    /// before any decision of its own.
    mid_run: bool,
    /// Sids that exchanged notifications while no config in force named them (at most
    /// [`MAX_SERVERS`]): those no config ever names are non-members (probes, doctors).
    strangers: HashMap<i64, NonMember>,
    now: f64,
    /// Members that vote (participants) among `members`.
    participants: usize,
    /// Notifications between servers beyond [`MAX_SERVERS`], not followed.
    beyond_bound: u64,
    /// The last election message (initial or notification).
    last_message: f64,
    /// Times of refused election-port dials (no message, reset): the dialler is unknown.
    refused: Vec<f64>,
}

/// An f64 time ordered for the heap (times are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Summarizer {
    /// A summarizer that knows the ensemble's members (from `--config` or carried configs).
    pub fn new(members: std::collections::HashMap<i64, Role>) -> Self {
        let mut s = Summarizer::default();
        for (sid, role) in members {
            s.set_member(sid, role);
        }
        s
    }

    /// A summarizer that knows the ensemble's config (from `--config`): its members, and its
    /// quorum rule when the config has groups or weights.
    pub fn with_config(config: &crate::wire::QuorumConfig) -> Self {
        let mut s = Summarizer::new(config.servers().map(|m| (m.id, m.role())).collect());
        s.hierarchy = hierarchy_of(config);
        s.given_config_version = Some(config.version());
        s
    }

    /// Records a member and its role, keeping the count of voting members.
    fn set_member(&mut self, sid: i64, role: Role) {
        if let Some(old) = self.members.insert(sid, role)
            && old == Role::Participant
        {
            self.participants -= 1;
        }
        if role == Role::Participant {
            self.participants += 1;
        }
    }

    fn voters(&self) -> usize {
        if self.participants > 0 {
            self.participants
        } else {
            self.lookers
        }
    }

    /// Votes needed for a quorum (a majority of the voters).
    fn need(&self) -> usize {
        self.voters() / 2 + 1
    }

    /// Whether the `count` votes from `sids` make a quorum: a majority of the voters, or
    /// under a hierarchical config, more than half of the groups each with more than half of
    /// its weight (Java's QuorumHierarchical).
    fn is_quorum(&self, count: usize, sids: impl FnOnce() -> BTreeSet<i64>) -> bool {
        match &self.hierarchy {
            Some(q) => q.contains_quorum(&sids()),
            None => count >= self.need(),
        }
    }

    /// Whether `sid` is known not to be a member: configs are known and none names it.
    fn is_non_member(&self, sid: i64) -> bool {
        (!self.members.is_empty() || !self.config_changes.is_empty())
            && !self.members.contains_key(&sid)
            && !self
                .config_changes
                .iter()
                .any(|c| c.voters.contains(&sid) || c.observers.contains(&sid))
    }

    /// Whether `sid` counts toward a quorum: not an observer (when the members are known).
    fn votes(&self, sid: i64) -> bool {
        match self.members.get(&sid) {
            Some(r) => *r == Role::Participant,
            None => self.participants == 0,
        }
    }

    /// Java's totalOrderPredicate: whether `new` beats `cur` (a non-voter never wins).
    fn better(&self, new: &VoteKey, cur: Option<&VoteKey>) -> bool {
        if new.leader == i64::MIN || !self.votes(new.leader) {
            return false;
        }
        let Some(cur) = cur else { return true };
        crate::election::beats(new.proposal(), cur.proposal())
    }

    /// Feeds one record.
    pub fn add(&mut self, r: &Record) {
        let time = r.time.as_secs_f64();
        self.now = self.now.max(time);
        self.advance(time);
        match &r.body {
            Body::Initial(_) => {
                if let (Some(from), Some(to)) = (r.from_sid, r.to_sid)
                    && from < to
                    && (self.tie_breaks.len() < MAX_PAIRS
                        || self.tie_breaks.contains_key(&(from, to)))
                {
                    *self.tie_breaks.entry((from, to)).or_default() += 1;
                }
                // A server dialled by a lower sid drops that connection and dials back
                // (QuorumCnxManager), whatever it is doing: only other dials show it looking.
                let dial_back = match (r.from_sid, r.to_sid) {
                    (Some(from), Some(to)) if from < to => {
                        if self.dial_backs.len() < MAX_PAIRS {
                            self.dial_backs.insert((from, to));
                        }
                        false
                    }
                    (Some(from), Some(to)) => self.dial_backs.remove(&(to, from)),
                    _ => false,
                };
                if let Some(from) = r.from_sid
                    && (self.servers.len() < MAX_SERVERS || self.servers.contains_key(&from))
                {
                    let s = self.servers.entry(from);
                    s.last_active = time;
                    if !dial_back {
                        s.dialled.get_or_insert((time, r.conn));
                    }
                }
                self.link(r);
            }
            Body::Problem(p) => {
                if matches!(p.kind, crate::decode::ProblemKind::MidStream { .. })
                    && !self.decided_in_capture
                {
                    self.mid_run = true;
                }
                if let crate::decode::ProblemKind::AddressConflict(c) = &p.kind
                    && self.address_conflicts < MAX_ADDRESS_CONFLICTS
                {
                    self.address_conflicts += 1;
                    self.anomalies.push(Anomaly {
                        time: Some(time),
                        kind: AnomalyKind::AddressConflict(c.clone()),
                    });
                }
                if let crate::decode::ProblemKind::Unacknowledged { since, .. } = p.kind {
                    let entry = (since.as_secs_f64(), time, r.from_sid, r.to_sid);
                    bounded_push(&mut self.unacked, entry);
                }
                if let crate::decode::ProblemKind::Sasl {
                    accepted: false,
                    user,
                    ..
                } = &p.kind
                    && (self.sasl_refused.len() < MAX_PAIRS
                        || self.sasl_refused.contains_key(&(r.from_sid, r.to_sid)))
                {
                    let e = self
                        .sasl_refused
                        .entry((r.from_sid, r.to_sid))
                        .or_insert_with(|| (0, user.clone()));
                    e.0 += 1;
                }
                if p.severity() == Severity::Error {
                    let key = match &p.kind {
                        crate::decode::ProblemKind::Malformed { error: e, .. } => {
                            format!("malformed {}", e.field)
                        }
                        crate::decode::ProblemKind::Gap { .. } => {
                            "bytes missing from the capture".into()
                        }
                        crate::decode::ProblemKind::Capture { .. } => "damaged capture file".into(),
                        other => format!("{other:?}"),
                    };
                    *self.malformed.entry(key).or_default() += 1;
                }
                if let crate::decode::ProblemKind::Cut {
                    partial: Some(p), ..
                } = &p.kind
                {
                    // A message all the same: the servers were still talking.
                    self.last_message = time;
                    self.link(r);
                    match cut_vote(p) {
                        Some(n) => {
                            self.cut_votes += 1;
                            self.notification(time, r.conn, r.from_sid, r.to_sid, &n);
                        }
                        None => self.cut_votes_lost += 1,
                    }
                }
            }
            Body::Notification(n) => {
                self.last_message = time;
                let silent = |sid: Option<i64>| {
                    sid.filter(|s| {
                        self.leader_heard
                            .get(s)
                            .is_some_and(|(last, _)| time - last > Rule::LeaderSilence.secs())
                    })
                };
                if let Some(to) = silent(r.to_sid) {
                    bounded_push(&mut self.sent_to_silent, (time, to, false));
                }
                if let Some(from) = silent(r.from_sid) {
                    // What was sent to it in the second before is answered.
                    for e in self.sent_to_silent.iter_mut().rev() {
                        if e.0 < time - Rule::LeaderSilence.secs() {
                            break;
                        }
                        if e.1 == from {
                            e.2 = true;
                        }
                    }
                    let to_member = r.to_sid.is_some_and(|to| !self.is_non_member(to));
                    bounded_push(&mut self.sent_by_silent, (time, from, to_member));
                }
                self.link(r);
                self.notification(time, r.conn, r.from_sid, r.to_sid, n);
            }
            Body::Quorum(q) => self.quorum_packet(time, r, q),
            Body::Closed { .. } => self.closed(time, r),
        }
    }

    /// Keeps a closed connection, forgetting the oldest past the bound.
    fn push_close(&mut self, close: (f64, Option<i64>, Option<i64>, bool)) {
        bounded_push(&mut self.closes, close);
    }

    /// Tracks which election connections work (carried messages both ways).
    fn link(&mut self, r: &Record) {
        let Some(conn) = r.conn else { return };
        if self.links.len() >= MAX_TRACKED && !self.links.contains_key(&conn) {
            // Connections that never closed in the capture (evicted by reassembly) are not
            // followed past the bound.
            return;
        }
        let e = self.links.entry(conn).or_insert(Link {
            a: r.from_sid,
            b: r.to_sid,
            a_sent: false,
            b_sent: false,
            runs: [NO_RUN; 2],
            slots: [NO_SLOT; 2],
        });
        let before = e.a_sent && e.b_sent;
        // Direction: the first record's sender is side a.
        if e.a.is_none() {
            e.a = r.from_sid;
        }
        if e.b.is_none() {
            e.b = r.to_sid;
        }
        if r.from_sid == e.a {
            e.a_sent = true;
        } else {
            e.b_sent = true;
        }
        if !before
            && e.a_sent
            && e.b_sent
            && let (Some(a), Some(b)) = (e.a, e.b)
        {
            *self.working.entry((a.min(b), a.max(b))).or_default() += 1;
            for s in [a, b] {
                self.servers.entry(s).open += 1;
            }
        }
        // The two servers' slots, found once per connection.
        let e = self.links.get_mut(&conn).expect("just added");
        for (k, sid) in [e.a, e.b].into_iter().enumerate() {
            let Some(sid) = sid else {
                self.servers.near[k] = (0, NO_SLOT);
                continue;
            };
            if e.slots[k] == NO_SLOT {
                e.slots[k] = self.servers.slot.get(&sid).map_or(NO_SLOT, |&i| i);
            }
            self.servers.near[k] = (sid, e.slots[k]);
        }
    }

    /// The slot in `runs` of `from`'s repeated votes to `to`, when followed: kept on the
    /// connection, so the table of pairs is searched once per connection and direction.
    fn run_slot(&mut self, conn: Option<ConnId>, from: i64, to: i64) -> Option<usize> {
        let link = conn.and_then(|c| self.links.get_mut(&c));
        let side = link.as_ref().map(|l| usize::from(l.a != Some(from)));
        if let (Some(l), Some(side)) = (&link, side) {
            let i = l.runs[side];
            if i != NO_RUN && self.runs[i as usize].0 == (from, to) {
                return Some(i as usize);
            }
        }
        if self.repeats.len() >= MAX_PAIRS && !self.repeats.contains_key(&(from, to)) {
            return None;
        }
        let next = self.runs.len() as u32;
        let i = *self.repeats.entry((from, to)).or_insert(next);
        if i == next {
            self.runs
                .push(((from, to), VoteKey::default(), Repeats::default()));
        }
        if let (Some(l), Some(side)) = (link, side) {
            l.runs[side] = i;
        }
        Some(i as usize)
    }

    fn closed(&mut self, time: f64, r: &Record) {
        let Some(conn) = r.conn else { return };
        if let Some(q) = self.quorum.remove(&conn) {
            self.push_close((time, q.leader, q.learner, true));
            for sid in [q.leader, q.learner].into_iter().flatten() {
                self.assume_before_capture(sid, time);
            }
            // A session with a leader it has since left for another (a connection to a leader
            // cut off, closed only when the cut heals) ends nothing it is in now.
            let stale = q.learner.zip(q.leader).is_some_and(|(l, leader)| {
                self.servers
                    .get(&l)
                    .and_then(|s| s.decision)
                    .is_some_and(|d| self.decisions[d].leader != leader)
            });
            if !stale
                && let Some(l) = q.learner
                && let Some(s) = self.servers.get_mut(&l)
            {
                s.left_zab = Some(time);
            }
            // Its last connection of either port closed: the process is gone, or all its
            // peers are (an answer from it shows which, below in `sender`).
            for sid in [q.leader, q.learner].into_iter().flatten() {
                if !self.in_zab(sid)
                    && let Some(s) = self.servers.get_mut(&sid)
                    && s.phase == Phase::Decided
                    && s.open == 0
                {
                    s.phase = Phase::Gone;
                }
            }
            return;
        }
        let (reset, quorum_port) = match r.body {
            Body::Closed { reset, quorum } => (reset, quorum),
            _ => (false, false),
        };
        if reset && !self.links.contains_key(&conn) {
            match r.from_sid {
                // A learner dialling a leader not listening yet is decided, not looking.
                Some(_) if quorum_port => {}
                None => bounded_push(&mut self.refused, time),
                Some(dialler)
                    if self.servers.contains_key(&dialler) || self.servers.len() < MAX_SERVERS =>
                {
                    let s = self.servers.entry(dialler);
                    s.first_dial.get_or_insert(time);
                    s.dialled.get_or_insert((time, None));
                }
                Some(_) => {}
            }
        }
        let link = self.links.remove(&conn);
        // A dial to a lower sid closed before its dialler sent a vote on it carried no election
        // (a reconfig makes Java dial the new config's members, then restart its election,
        // which closes those connections).
        if let Some(Link {
            a: Some(a),
            b: Some(b),
            ..
        }) = link
            && a > b
            && let Some(s) = self.servers.get_mut(&a)
            && s.dialled.is_some_and(|d| d.1 == Some(conn))
        {
            s.dialled = None;
        }
        if link.is_none() && !reset && (r.from_sid.is_some() || r.to_sid.is_some()) {
            // An idle connection open before the capture (a steady ensemble's election
            // connections carry nothing): its close tells who went.
            self.push_close((time, r.from_sid, r.to_sid, false));
        }
        if let Some(Link {
            a,
            b,
            a_sent: x,
            b_sent: y,
            ..
        }) = link
        {
            self.push_close((time, a, b, false));
            if x && y
                && let (Some(a), Some(b)) = (a, b)
            {
                if let Some(w) = self.working.get_mut(&(a.min(b), a.max(b))) {
                    *w = w.saturating_sub(1);
                }
                for sid in [a, b] {
                    // A server still in a Zab session only restarted its election machinery
                    // (Java does on a new config: `restartLeaderElection`), it did not go.
                    let in_zab = self.in_zab(sid);
                    let s = self.servers.entry(sid);
                    s.open = s.open.saturating_sub(1);
                    if s.open == 0 && s.phase == Phase::Decided && !in_zab {
                        s.phase = Phase::Gone;
                    }
                }
            }
        }
    }

    /// Whether `sid` has an open quorum-port connection, as leader or learner.
    fn in_zab(&self, sid: i64) -> bool {
        self.quorum
            .values()
            .any(|c| c.leader == Some(sid) || c.learner == Some(sid))
    }

    /// Resolves every pending decision whose finalizeWait ran out before `t`.
    fn advance(&mut self, t: f64) {
        while let Some(Reverse((Time(deadline), sid, generation))) = self.heap.peek().copied() {
            if deadline > t {
                break;
            }
            self.heap.pop();
            let Some(s) = self.servers.get(&sid) else {
                continue;
            };
            if s.generation != generation || s.pending != Some(deadline) || !s.phase.is_looking() {
                continue;
            }
            let Some(vote) = s.vote else { continue };
            let state = self.state_for(sid, vote.leader);
            self.decide(
                sid,
                state,
                vote.leader,
                vote.round,
                deadline,
                Evidence::ConvergedVotes,
            );
        }
    }

    fn state_for(&self, sid: i64, leader: i64) -> ServerState {
        match self.members.get(&sid) {
            Some(Role::Observer) => ServerState::Observing,
            _ if leader == sid => ServerState::Leading,
            _ => ServerState::Following,
        }
    }

    fn schedule(&mut self, sid: i64, deadline: f64) {
        let s = self.servers.entry(sid);
        s.generation += 1;
        s.pending = Some(deadline);
        self.heap.push(Reverse((Time(deadline), sid, s.generation)));
    }

    fn decide(
        &mut self,
        sid: i64,
        state: ServerState,
        leader: i64,
        round: i64,
        time: f64,
        evidence: Evidence,
    ) {
        let index = self.decisions.len();
        let session_end = self.session_end_before_vote(sid);
        let s = self.servers.entry(sid);
        if s.phase.is_looking() {
            s.phase = Phase::Decided;
        }
        s.pending = None;
        s.decision = Some(index);
        let mut since = s.since.min(time);
        // Only a server that just started can have begun before the wire shows it.
        let mut started = s.episode.is_some_and(|e| self.episodes[e].started);
        if let Some(end) = session_end.filter(|end| *end < since) {
            since = end;
            started = false;
            self.fired.note(Rule::HeldVote);
        }
        // Its election began before its first vote could leave (its dials show it).
        if let Some(began) = s
            .episode
            .and_then(|e| self.episodes[e].looking)
            .map(|l| self.lookings[l as usize].began)
            .filter(|b| *b < since)
        {
            since = began;
        }
        // Its dials refused before its first vote reached anyone: it was looking by then (a
        // leader that lost its quorum, alone, logs `LEADER ELECTION TOOK` counted from its
        // first refused dial).
        if let Some(dial) = s.first_dial.take().filter(|d| *d < since) {
            since = dial;
            started = false;
        }
        if let Some(e) = s.episode {
            let episode = &mut self.episodes[e];
            episode.decision = Some(index);
            // What the decision found of its beginning is the election's.
            if let Some(l) = episode.looking.map(|l| &mut self.lookings[l as usize]) {
                l.began = l.began.min(since);
                l.looking = l.looking.min(since);
            }
        }
        let took_at_least = started && {
            let at = self
                .refused
                .partition_point(|t| *t < since - Rule::RefusedDials.secs());
            self.refused.get(at).is_some_and(|t| *t < since)
        };
        if took_at_least {
            self.fired.note(Rule::RefusedDials);
        }
        if evidence == Evidence::ConvergedVotes {
            self.fired.note(Rule::FinalizeWait);
        }
        self.decisions.push(Decision {
            sid,
            state,
            leader,
            election_epoch: round,
            time,
            evidence,
            looking_since: since,
            took: time - since,
            took_at_least,
            sync: None,
            before_capture: false,
        });
        self.decided_in_capture = true;
    }

    /// Whether `from`'s answer, its first message, states what it was before the capture began:
    /// on an ensemble the capture joined running, it names the leader the quorum port showed
    /// then (as that leader, or one of its learners), in a round older than any decision of
    /// the capture.
    fn held_before_capture(&self, from: i64, n: &Notification) -> bool {
        // Without the quorum port, only that the capture joined connections already open.
        let leader = match &self.at_start {
            Some(a) => a.leader,
            None if self.mid_run => n.leader,
            None => return false,
        };
        // (A round no decision of the capture reached: a frozen leader resumed answers with
        // the round it led in, older than the election that replaced it.)
        n.leader == leader
            && !self
                .decisions
                .iter()
                .any(|d| !d.before_capture && d.election_epoch <= n.election_epoch)
            && match n.state {
                ServerState::Leading => from == leader,
                ServerState::Following | ServerState::Observing => from != leader,
                _ => false,
            }
    }

    /// Records `from`'s state from before the capture (see [`Self::held_before_capture`]), or
    /// completes the one assumed for it with the round its answer names.
    fn before_capture(&mut self, from: i64, n: &Notification, time: f64) {
        if let Some(d) = self.servers.get(&from).and_then(|s| s.decision)
            && self.decisions[d].before_capture
        {
            let d = &mut self.decisions[d];
            (d.state, d.leader, d.election_epoch) = (n.state, n.leader, n.election_epoch);
            self.servers.entry(from).round = n.election_epoch;
            return;
        }
        self.assume_state(from, n.state, n.leader, n.election_epoch, time);
    }

    /// A server the capture has not heard from yet, of an ensemble it joined running, that the
    /// quorum port showed leading or following: it holds that state from before the capture
    /// until its messages say otherwise (its round unknown until it answers), not one that
    /// just started. Returns whether it was so assumed.
    fn assume_before_capture(&mut self, sid: i64, time: f64) -> bool {
        let Some(a) = &self.at_start else {
            return false;
        };
        if self.decided_in_capture
            || self
                .servers
                .get(&sid)
                .is_some_and(|s| s.phase != Phase::Unseen)
        {
            return false;
        }
        let state = if sid == a.leader {
            ServerState::Leading
        } else if a.learners.contains(&sid) {
            match self.members.get(&sid) {
                Some(Role::Observer) => ServerState::Observing,
                _ => ServerState::Following,
            }
        } else {
            return false;
        };
        let leader = a.leader;
        self.assume_state(sid, state, leader, UNKNOWN_ROUND, time);
        true
    }

    fn assume_state(&mut self, sid: i64, state: ServerState, leader: i64, round: i64, time: f64) {
        let index = self.decisions.len();
        let since = self.at_start.as_ref().map_or(time, |a| a.since.min(time));
        let s = self.servers.entry(sid);
        if s.phase != Phase::Gone {
            s.phase = Phase::Decided;
        }
        s.pending = None;
        s.decision = Some(index);
        s.since = since;
        s.round = round;
        s.first_dial = None;
        self.decisions.push(Decision {
            sid,
            state,
            leader,
            election_epoch: round,
            time: since,
            evidence: Evidence::OwnNotification,
            looking_since: since,
            took: 0.0,
            took_at_least: false,
            sync: None,
            before_capture: true,
        });
    }

    /// When `s`'s Zab session as a learner ended, if after its last decision.
    fn zab_end_since_decision(&self, s: &Server) -> Option<f64> {
        let decided = self.decisions[s.decision?].time;
        s.left_zab.filter(|t| *t > decided)
    }

    /// When `sid`'s election began, if not at its first vote on the wire: a learner goes
    /// LOOKING the moment its Zab session ends, and when its first vote comes more than
    /// [`Rule::HeldVote`] later, its votes had nowhere to go (no peer listening) and waited
    /// for one (a server alone after its leader died voted 4.6 s later, when the old leader
    /// came back, and Java logged `LEADER ELECTION TOOK - 4857 MS`).
    /// A server taken for gone (all its connections closed) qualifies only if its first vote
    /// continues its last round: a restarted JVM counts rounds from 1 again, and reaches a
    /// later round only from a peer.
    fn session_end_before_vote(&self, sid: i64) -> Option<f64> {
        let s = self.servers.get(&sid)?;
        let episode = &self.episodes[s.episode?];
        let last = &self.decisions[s.decision?];
        let end = self.zab_end_since_decision(s)?;
        if s.since - end <= Rule::HeldVote.secs() {
            return None;
        }
        let continued = episode.first_vote.is_some_and(|(round, heard)| {
            last.election_epoch >= 1 && round == last.election_epoch + 1 && heard < round
        });
        (!episode.started || continued).then_some(end)
    }

    /// When an episode's election began: at its first vote on the wire, or earlier where the
    /// model found it ([`Looking::began`]).
    fn episode_began(&self, e: &Episode) -> f64 {
        e.looking
            .map_or(e.since, |l| self.lookings[l as usize].began.min(e.since))
    }

    /// A server begins looking (a new `lookForLeader`).
    fn begin(&mut self, sid: i64, time: f64, round: i64) {
        let phase = self.servers.get(&sid).map_or(Phase::Unseen, |s| s.phase);
        let (first, gone) = (phase == Phase::Unseen, phase == Phase::Gone);
        let episode = self.episodes.len();
        self.episodes.push(Episode {
            sid,
            since: time,
            round,
            decision: None,
            first,
            started: first || gone,
            first_vote: None,
            looking: None,
        });
        let s = self.servers.entry(sid);
        s.phase = Phase::Queuing;
        s.since = time;
        s.round = round;
        s.pending = None;
        s.episode = Some(episode);
        s.recv.clear();
        s.out.clear();
    }

    /// Records a LOOKING vote of `from` in `to`'s round.
    fn put_vote(&mut self, to: i64, from: i64, vote: VoteKey) {
        if !self.votes(from) {
            return;
        }
        let s = self.servers.entry(to);
        s.recv.insert(from, vote.java(ServerState::Looking, 0));
    }

    /// Clears a server's votes for a new round.
    fn new_round(&mut self, sid: i64, round: i64) {
        let s = self.servers.entry(sid);
        s.round = round;
        s.pending = None;
        s.recv.clear();
    }

    /// Whether `sid`'s current vote holds a quorum; schedules its decision if so.
    fn check_quorum(&mut self, sid: i64, time: f64) {
        let Some(s) = self.servers.get(&sid) else {
            return;
        };
        let Some(vote) = s.vote else { return };
        if vote.leader == i64::MIN || !s.phase.is_looking() {
            return;
        }
        let target = vote.java(ServerState::Looking, 0);
        if self.is_quorum(s.recv.matching(&target), || s.recv.matching_sids(&target)) {
            self.schedule(sid, time + Rule::FinalizeWait.secs());
        }
    }

    fn notification(
        &mut self,
        time: f64,
        conn: Option<ConnId>,
        from: Option<i64>,
        to: Option<i64>,
        n: &Notification,
    ) {
        self.notifications += 1;
        if let crate::wire::JavaView::Dropped(why) = n.java_view() {
            *self.malformed.entry(why.to_string()).or_default() += 1;
            return;
        }
        if let Some(raw) = &n.config
            && let Some(cfg) = self.configs.new_config(raw)
        {
            self.config_seen(time, &cfg);
        }
        let (Some(from), Some(to)) = (from, to) else {
            self.unknown_sids += 1;
            return;
        };
        for (sid, peer) in [(from, to), (to, from)] {
            if !self.members.contains_key(&sid)
                && (self.strangers.len() < MAX_SERVERS || self.strangers.contains_key(&sid))
            {
                let e = self.strangers.entry(sid).or_insert_with(|| NonMember {
                    sid,
                    notifications: 0,
                    asked: Vec::new(),
                    first: time,
                    last: time,
                });
                e.notifications += 1;
                e.last = time;
                if sid == from && !e.asked.contains(&peer) && e.asked.len() < MAX_SERVERS {
                    e.asked.push(peer);
                    e.asked.sort_unstable();
                }
            }
        }
        if self.servers.len() >= MAX_SERVERS
            && !(self.servers.contains_key(&from) && self.servers.contains_key(&to))
        {
            self.beyond_bound += 1;
            return;
        }
        if !self.members.is_empty()
            && n.state == ServerState::Looking
            && n.leader != i64::MIN
            && !self.members.contains_key(&n.leader)
            && self.flagged_votes.len() < MAX_PAIRS
            && self.flagged_votes.insert((from, n.leader))
        {
            let removed_by = self
                .config_changes
                .iter()
                .rev()
                .find(|c| c.removed.contains(&n.leader))
                .map(|c| c.version);
            self.anomalies.push(Anomaly {
                time: Some(time),
                kind: AnomalyKind::VoteForNonMember {
                    from,
                    leader: n.leader,
                    removed_by,
                },
            });
        }
        let version = n.config_version();
        if let Some(v) = version {
            let s = self.servers.entry(from);
            s.config_version = Some(s.config_version.map_or(v, |c| c.max(v)));
        }
        // A re-sent last vote tells nothing of its sender, but its receiver reads it all the
        // same.
        self.sender(time, conn, from, to, n);
        if self.takes_newer_config(to, version, time) {
            return;
        }
        self.receiver(time, from, to, n);
    }

    /// Whether `to`, LOOKING, is sent a config newer than its own: Java's receiver takes it
    /// and restarts the election (`restarting leader election`) instead of counting the
    /// message, and drops what follows until the new election begins
    /// (a server started late, sent version 0x100000000 by the running ensemble). True when
    /// the message is not counted.
    fn takes_newer_config(&mut self, to: i64, version: Option<u64>, time: f64) -> bool {
        let Some(s) = self.servers.get_mut(&to) else {
            return false;
        };
        if s.phase == Phase::Restarting {
            return true;
        }
        let newer = matches!((version, s.config_version), (Some(v), Some(mine)) if v > mine);
        if !(newer && s.phase == Phase::Looking) {
            return false;
        }
        s.config_version = version;
        s.phase = Phase::Restarting;
        s.config_taken = Some(time);
        true
    }

    /// A config first seen at `time`: the first one joins the members known (from `--config`
    /// or earlier); a newer version (a reconfig) replaces them, and is kept as a change.
    fn config_seen(&mut self, time: f64, cfg: &crate::wire::QuorumConfig) {
        let version = cfg.version();
        let newest = self.config_changes.last().map(|c| c.version);
        if newest.is_some_and(|v| version <= v) {
            return;
        }
        let (mut voters, mut observers): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
        for s in cfg.servers() {
            match s.role() {
                crate::wire::Role::Observer => observers.push(s.id),
                _ => voters.push(s.id),
            }
        }
        voters.sort_unstable();
        observers.sort_unstable();
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        // The members before it: the last config seen, or a `--config` older than it.
        let given = (self.config_changes.is_empty()
            && self.given_config_version.is_some_and(|g| version > g))
        .then(|| {
            let mut voters: Vec<i64> = Vec::new();
            let mut observers: Vec<i64> = Vec::new();
            for (sid, role) in &self.members {
                match role {
                    Role::Observer => observers.push(*sid),
                    _ => voters.push(*sid),
                }
            }
            ConfigChange {
                voters,
                observers,
                ..ConfigChange::default()
            }
        });
        if let Some(prev) = self.config_changes.last().or(given.as_ref()) {
            let was = |sid: &i64| prev.voters.contains(sid) || prev.observers.contains(sid);
            let is = |sid: &i64| voters.contains(sid) || observers.contains(sid);
            added = voters
                .iter()
                .chain(&observers)
                .filter(|s| !was(s))
                .copied()
                .collect();
            removed = prev
                .voters
                .iter()
                .chain(&prev.observers)
                .filter(|s| !is(s))
                .copied()
                .collect();
            added.sort_unstable();
            removed.sort_unstable();
            // A reconfig: the new config's members replace the old.
            self.members.clear();
            self.participants = 0;
        }
        for s in cfg.servers() {
            self.set_member(s.id, s.role());
        }
        self.hierarchy = hierarchy_of(cfg);
        let change = ConfigChange {
            time,
            version,
            voters,
            observers,
            added,
            removed,
        };
        if self.config_changes.len() < MAX_CONFIG_CHANGES {
            self.config_changes.push(change);
        } else if let Some(last) = self.config_changes.last_mut() {
            *last = change;
        }
    }

    /// A LOOKING vote of a round its sender had already decided, delivered a second or more
    /// after the decision, and one it had sent before deciding: a copy queued while it could
    /// not reach `to` (a partition) and delivered when it could (its retransmission, or its
    /// queue on a new connection). Not a new election; listed among the anomalies. (A server
    /// just gone LOOKING can answer with its decided round's vote, one it never proposed: not
    /// delayed.)
    fn delayed_vote(&mut self, time: f64, from: i64, to: i64, vote: VoteKey) {
        let Some(decided_at) = self.servers[&from].decision.map(|d| self.decisions[d].time) else {
            return;
        };
        if time - decided_at < Rule::DelayedVote.secs()
            || (self.delayed.len() >= MAX_PAIRS && !self.delayed.contains_key(&(from, to)))
        {
            return;
        }
        let sent_before = self
            .changes
            .iter()
            .rev()
            .take(DELAYED_VOTE_LOOKBACK)
            .any(|c| c.sid == from && c.vote == vote && c.time < decided_at);
        if !sent_before {
            return;
        }
        self.fired.note(Rule::DelayedVote);
        let d = self.delayed.entry((from, to)).or_insert(DelayedVotes {
            count: 0,
            round: vote.round,
            decided_at,
            first: time,
        });
        d.count += 1;
    }

    /// The sender's side: what its message says about its own state. Returns whether the
    /// message is a decided server's last vote re-sent.
    fn sender(
        &mut self,
        time: f64,
        conn: Option<ConnId>,
        from: i64,
        to: i64,
        n: &Notification,
    ) -> bool {
        let first_message = !self.servers.get(&from).is_some_and(|s| s.sent);
        if n.state == ServerState::Leading && n.leader == from {
            bounded_push(&mut self.leading_answers, (time, from, n.election_epoch));
        }
        let to_voter = self.votes(to);
        // Its first dial since its previous notification to a voter, and that notification.
        let (dialled, notified) = {
            let s = self.servers.entry(from);
            s.last_active = time;
            s.sent = true;
            if to_voter {
                (s.dialled.take().map(|d| d.0), s.notified.replace(time))
            } else {
                (None, s.notified)
            }
        };
        match n.state {
            ServerState::Looking if n.election_epoch == 0 || !to_voter => {
                // Java sends its proposals to voters only. To a non-voter it answers with its
                // current (last decided) vote, in round 0 before its first election: not a
                // proposal.
                false
            }
            ServerState::Looking => {
                let vote = VoteKey::of(n);
                if self.votes(from) {
                    let s = self.servers.entry(from);
                    if !s.looker {
                        s.looker = true;
                        self.lookers += 1;
                    }
                }
                let (seen, looking, decided, last_sent, round, heard, gone, own, left_zab) = {
                    let s = &self.servers[&from];
                    (
                        s.phase != Phase::Unseen,
                        s.phase.is_looking(),
                        s.decision.map(|d| self.decisions[d].election_epoch),
                        s.last_sent,
                        s.round,
                        s.heard_round,
                        s.phase == Phase::Gone,
                        s.own,
                        // Its Zab session ended since it decided: LOOKING again, in a new
                        // election (after a reconfig, from round 1 again: a voter demoted to
                        // observer).
                        self.zab_end_since_decision(s).is_some(),
                    )
                };
                // Its own proposal with a newer zxid or epoch than its last one: a new
                // lookForLeader even in a round it had reached. A reconfig restarts Java's
                // election (a new FastLeaderElection, its logical clock back to 0), so the
                // next election can be round 0x1 again.
                let advanced = left_zab
                    || crate::election::newer_own_proposal(
                        vote.proposal(),
                        from,
                        own.map(|o| (o.peer_epoch, o.zxid)),
                    );
                if self.servers[&from].phase == Phase::Queuing
                    && last_sent == Some(vote)
                    && decided.is_some_and(|r| vote.round <= r)
                    && !advanced
                {
                    // Taken for gone (all its connections closed), it re-sends on a new
                    // connection the last vote it had sent: a decided server's queue, not a
                    // restart, whose first vote would be a new proposal.
                    self.resent += 1;
                    return true;
                }
                if looking && self.servers[&from].phase == Phase::Restarting {
                    // Its new election after taking a newer config (logical clock from 0).
                    self.begin(from, time, vote.round);
                } else if seen && !looking {
                    // A decided server re-sends the last vote it had for a peer on every new
                    // connection (QuorumCnxManager), and votes it queued before deciding go
                    // out after: not a new election, which would have a higher round (unless
                    // the process restarted, which resets its round).
                    if decided.is_some_and(|r| vote.round <= r) && !gone && !advanced {
                        if last_sent == Some(vote) {
                            self.resent += 1;
                        } else {
                            self.delayed_vote(time, from, to, vote);
                        }
                        return true;
                    }
                    self.begin(from, time, vote.round);
                } else if !seen {
                    self.begin(from, time, vote.round);
                } else if self.servers[&from].phase == Phase::Queuing {
                    // Looking since a message reached it; its election began with its own
                    // first vote.
                    let s = self.servers.get_mut(&from).expect("seen");
                    s.since = time;
                    if let Some(e) = s.episode {
                        self.episodes[e].since = time;
                    }
                    if vote.round > round {
                        self.new_round(from, vote.round);
                    }
                } else if vote.round > round && vote.round > heard {
                    // A round nobody showed it: a new lookForLeader, so the last one ended
                    // decided on its vote then.
                    let pending = self.servers[&from].pending;
                    if let Some(old) = self.servers[&from].vote {
                        let state = self.state_for(from, old.leader);
                        let at = pending.unwrap_or(time).min(time);
                        self.decide(from, state, old.leader, old.round, at, Evidence::NewRound);
                    }
                    self.begin(from, time, vote.round);
                } else if vote.round > round {
                    self.new_round(from, vote.round);
                }
                if let Some(i) = self.run_slot(conn, from, to) {
                    let e = &mut self.runs[i];
                    if e.1 != vote || e.2.len == 0 {
                        (e.1, e.2) = (vote, Repeats::default());
                    }
                    e.2.push(time);
                }
                let s = self.servers.get_mut(&from).expect("begun");
                let queued = if s.phase == Phase::Queuing {
                    std::mem::take(&mut s.queued)
                } else {
                    Vec::new()
                };
                // Only a lag seen just before (a receiver behind long ago says nothing now).
                let lag = match s.answer_lag {
                    (answered, lag) if answered >= time - Rule::QueueWindow.secs() => lag,
                    _ => 0.0,
                };
                // Whether it had not decided before this election (it just started).
                let was_fresh = s.decision.is_none_or(|d| self.decisions[d].time >= s.since);
                if s.phase == Phase::Queuing
                    && let Some(e) = s.episode
                    && self.episodes[e].first_vote.is_none()
                {
                    self.episodes[e].first_vote = Some((vote.round, s.heard_round));
                    let mut looking = first_looking(from, n, time, s, &queued, (dialled, notified));
                    looking.config_stopped = s.config_taken.take();
                    if looking.began < time {
                        self.fired.note(Rule::DialBeforeVote);
                    }
                    self.episodes[e].looking = Some(self.lookings.len() as u32);
                    self.lookings.push(looking);
                }
                if s.phase == Phase::Queuing {
                    s.phase = Phase::Looking;
                }
                if s.last_sent != Some(vote) {
                    self.changes.push(VoteChange {
                        time,
                        sid: from,
                        vote,
                    });
                }
                s.last_sent = Some(vote);
                if vote.leader == from {
                    s.own = Some(vote);
                    if let Some(e) = s.episode
                        && let Some(l) = self.episodes[e].looking
                    {
                        let l = &mut self.lookings[l as usize];
                        l.own_vote.get_or_insert(vote);
                    }
                }
                // Within a round a proposal only gets better: a worse one on the wire was
                // queued before the server took the better one that the model already saw.
                let held = s.vote;
                let current = held.filter(|c| c.round == vote.round);
                let stale_proposal = current.is_some_and(|c| c != vote)
                    && !self.better(&vote, current.as_ref())
                    || held.is_some_and(|c| c.round > vote.round);
                let s = self.servers.get_mut(&from).expect("begun");
                if !stale_proposal {
                    s.vote = Some(vote);
                }
                let vote = s.vote.unwrap_or(vote);
                // It delivers its own vote to itself too: a notification it receives.
                let pending = s.pending;
                self.put_vote(from, from, vote);
                if pending.is_some() {
                    self.schedule(from, time + Rule::FinalizeWait.secs());
                } else {
                    self.check_quorum(from, time);
                }
                // Its leader's connections had all closed: it was no longer following, so what
                // it did not answer it had queued (after a reconfig: a vote queued 3 ms
                // before the server's own first vote).
                let leader_gone = self.servers[&from]
                    .decision
                    .map(|d| self.decisions[d].leader)
                    .is_some_and(|l| {
                        l != from && self.servers.get(&l).is_some_and(|s| s.phase == Phase::Gone)
                    });
                // What reached it before its election began, it reads now.
                for (at, peer, state, v, version) in queued {
                    // A decided server answers what it hears and drops it; only what came
                    // after it turned LOOKING (just before its election began) waits for it.
                    // An answer is missing from the wire also when the server's first vote
                    // to that peer followed within milliseconds: Java's per-peer send queue
                    // holds one message, and the vote replaced the unsent answer.
                    // Not when its receiver was further behind the wire than that: a message
                    // that came less than that lag before the vote was still unread when the
                    // server turned LOOKING (a partitioned leader's followers: their answers
                    // left 40 ms after what they answered, and what came after was logged
                    // read LOOKING).
                    let replaced = !was_fresh
                        && !leader_gone
                        && at > time - Rule::AnswerReplaced.secs()
                        && at <= time - lag;
                    if replaced {
                        self.fired.note(Rule::AnswerReplaced);
                    } else if at >= time - Rule::QueueWindow.secs() {
                        self.fired.note(Rule::QueueWindow);
                        self.receive(time, peer, from, state, v, version);
                    }
                }
                false
            }
            ServerState::Following | ServerState::Leading | ServerState::Observing
                if !self.votes(to) =>
            {
                // An answer to a non-voter carries the current vote, which Java updates a
                // moment after the state: not evidence of a decision.
                false
            }
            ServerState::Following | ServerState::Leading | ServerState::Observing => {
                let (looking, pending, current) = {
                    let s = self.servers.entry(from);
                    // Java's receiver reads its queue in order: the answer is to the oldest
                    // message from that peer it holds, and what came before was read while
                    // decided too. What came after may have been read once it was LOOKING
                    // (the Docker capture of docs/java-behaviour.md: sid 2 answered sid 1's
                    // first vote FOLLOWING, then counted 1's and 3's next votes, which had
                    // reached it before that answer left). With nothing from that peer held,
                    // everything held was read while decided.
                    // (What is older than the queue window is never read as queued.)
                    s.queued.retain(|q| q.0 >= time - Rule::QueueWindow.secs());
                    match s.queued.iter().position(|q| q.1 == to) {
                        Some(answered) => {
                            s.answer_lag = (time, time - s.queued[answered].0);
                            // Except another peer's LOOKING vote: one read while decided has
                            // an answer of its own, and without one it may have been read
                            // after (each peer's connection has its own reader thread, and
                            // a busy server's can fall behind: a partitioned leader's
                            // follower answered 2's vote of .431, then logged 4's of .422
                            // read LOOKING, and counted it).
                            let mut i = 0;
                            s.queued.retain(|q| {
                                i += 1;
                                i > answered + 1 || (q.1 != to && q.2 == ServerState::Looking)
                            });
                        }
                        None => s.queued.clear(),
                    }
                    (
                        matches!(s.phase, Phase::Unseen) || s.phase.is_looking(),
                        s.pending,
                        s.decision,
                    )
                };
                if first_message && self.held_before_capture(from, n) {
                    self.before_capture(from, n, time);
                    return false;
                }
                if let Some(d) = current.map(|d| &self.decisions[d])
                    && d.before_capture
                    && d.election_epoch == UNKNOWN_ROUND
                    && d.leader == n.leader
                    && d.state == n.state
                {
                    // The state assumed for it, now with its round.
                    self.before_capture(from, n, time);
                    return false;
                }
                let current = current.map(|d| &self.decisions[d]);
                let same = current.is_some_and(|d| {
                    d.leader == n.leader
                        && d.state == n.state
                        && d.election_epoch == n.election_epoch
                });
                let s = &self.servers[&from];
                if same
                    && s.phase.is_voting()
                    && s.pending.is_none()
                    && time - s.since <= Rule::AnswerReplaced.secs()
                {
                    self.fired.note(Rule::AnswerReplaced);
                    // Its old decision, just after its first vote and on nothing the model
                    // saw: an answer it built while still decided, which left after the vote
                    // (a partitioned leader's follower answered 2's vote FOLLOWING at .418,
                    // voted at .421, and the answer went out at .422, after the vote).
                    return false;
                }
                if same && s.phase == Phase::Queuing {
                    // Taken for gone when all its connections closed, it answers with the
                    // decision it had and no vote of its own came first: its peers went, it
                    // did not (a leader whose only follower was killed).
                    let s = self.servers.entry(from);
                    s.phase = Phase::Decided;
                    s.pending = None;
                    return false;
                }
                if looking || !same {
                    if self.servers[&from].phase == Phase::Unseen {
                        self.begin(from, time, n.election_epoch);
                    }
                    // Decided earlier than the model could tell, or on something the wire
                    // does not show: the answer bounds the decision.
                    let at = pending.unwrap_or(time).min(time);
                    let evidence = if pending.is_some() && looking {
                        Evidence::ConvergedVotes
                    } else {
                        Evidence::OwnNotification
                    };
                    if !looking {
                        // A decision the model did not foresee: a new episode ended in it.
                        self.begin(from, time, n.election_epoch);
                    }
                    self.decide(from, n.state, n.leader, n.election_epoch, at, evidence);
                }
                false
            }
            ServerState::Unknown(_) => false,
        }
    }

    /// The receiver's side: Java's `lookForLeader` handling one received notification.
    fn receiver(&mut self, time: f64, from: i64, to: i64, n: &Notification) {
        let version = match n.java_view() {
            crate::wire::JavaView::Accepted { version, .. } => version,
            crate::wire::JavaView::Dropped(_) => return,
        };
        self.receive(time, from, to, n.state, VoteKey::of(n), version);
    }

    /// `vote` in `state`, as `to` reads it; `version`, the message's as Java reads it (only a
    /// FOLLOWING/LEADING answer's matters, [`crate::election::Vote::java_eq`]).
    fn receive(
        &mut self,
        time: f64,
        from: i64,
        to: i64,
        state: ServerState,
        vote: VoteKey,
        version: i32,
    ) {
        if from == to || !self.votes(from) {
            // Non-voters' messages are answered before the election loop sees them.
            return;
        }
        self.assume_before_capture(to, time);
        {
            let s = self.servers.entry(to);
            if state == ServerState::Looking {
                s.heard_round = s.heard_round.max(vote.round);
            }
            if matches!(s.phase, Phase::Unseen | Phase::Gone) {
                // A server just started (or restarted) is looking, before its own first vote
                // shows.
                self.begin(to, time, 0);
            }
        }
        {
            let s = self.servers.get_mut(&to).expect("seen");
            // A decided server answers at once; one that does not is already LOOKING and its
            // election has not begun: the message waits in its queue until it does (an answer
            // it sends shows it was still decided, and clears this).
            if !s.phase.is_voting() {
                // Its election has not begun: the message waits in its queue.
                if s.queued.len() < MAX_QUEUED {
                    s.queued.push((time, from, state, vote, version));
                }
                return;
            }
        }
        let (looking, pending, cur) = {
            let s = &self.servers[&to];
            (s.phase.is_looking(), s.pending, s.vote)
        };
        if !looking {
            return;
        }
        if pending.is_some() {
            // In finalizeWait: a better vote ends the wait; any other restarts it.
            if self.better(&vote, cur.as_ref()) {
                self.servers.get_mut(&to).expect("seen").pending = None;
            } else {
                self.schedule(to, time + Rule::FinalizeWait.secs());
                return;
            }
        }
        match state {
            ServerState::Looking => {
                let round = self.servers[&to].round;
                if vote.round > round {
                    self.new_round(to, vote.round);
                    let own = self.servers[&to].own;
                    let mine = own.map(|o| VoteKey {
                        round: vote.round,
                        ..o
                    });
                    let next = match mine {
                        Some(m) if !self.better(&vote, Some(&m)) => m,
                        _ => vote,
                    };
                    self.servers.get_mut(&to).expect("seen").vote = Some(next);
                    self.put_vote(to, to, next);
                } else if vote.round < round {
                    return;
                } else if self.better(&vote, cur.as_ref()) {
                    self.servers.get_mut(&to).expect("seen").vote = Some(vote);
                    self.put_vote(to, to, vote);
                }
                self.put_vote(to, from, vote);
                self.check_quorum(to, time);
            }
            ServerState::Following | ServerState::Leading => {
                // Java's tally: the answer as the message has it (the target and the
                // out-of-election entry), and without its version in the round's votes.
                let target = vote.java(state, version);
                let round = self.servers[&to].round;
                if vote.round == round {
                    let s = self.servers.get_mut(&to).expect("seen");
                    s.recv.insert(from, vote.java(state, 0));
                    let s = &self.servers[&to];
                    let have =
                        self.is_quorum(s.recv.matching(&target), || s.recv.matching_sids(&target));
                    let leader_ok = if vote.leader == to {
                        true
                    } else {
                        s.recv.get(vote.leader).map(|v| v.state) == Some(ServerState::Leading)
                    };
                    if have && leader_ok {
                        let state = self.state_for(to, vote.leader);
                        self.decide(
                            to,
                            state,
                            vote.leader,
                            vote.round,
                            time,
                            Evidence::QuorumReplies,
                        );
                        return;
                    }
                }
                let s = self.servers.get_mut(&to).expect("seen");
                s.out.insert(from, target);
                let s = &self.servers[&to];
                let have = self.is_quorum(s.out.matching(&target), || s.out.matching_sids(&target));
                let leader_ok = if vote.leader == to {
                    s.round == vote.round
                } else {
                    s.out.get(vote.leader).map(|v| v.state) == Some(ServerState::Leading)
                };
                if have && leader_ok {
                    self.servers.get_mut(&to).expect("seen").round = vote.round;
                    let state = self.state_for(to, vote.leader);
                    self.decide(
                        to,
                        state,
                        vote.leader,
                        vote.round,
                        time,
                        Evidence::QuorumReplies,
                    );
                }
            }
            _ => {}
        }
    }

    /// What TCP says of a leader silent since `from` whose followers began an election at
    /// `started`: whether what went between it and its peers from then on waited for
    /// acknowledgements (its host unreachable), or what its followers sent it was
    /// acknowledged (its host alive, its process stopped).
    fn silence_evidence(&self, leader: i64, from: f64, started: f64) -> SilenceEvidence {
        let until = started + Rule::CauseWindow.secs();
        let unreachable = self.unacked.iter().any(|&(since, end, a, b)| {
            (a == Some(leader) || b == Some(leader)) && end >= from && since <= until
        });
        // A send is known acknowledged when the capture went on long enough after it for a
        // wait to have been reported; left unanswered a second, its receiver's process was
        // not running.
        let acknowledged = self.sent_to_silent.iter().any(|&(at, to, answered)| {
            to == leader
                && !answered
                && at >= from + Rule::LeaderSilence.secs()
                && at <= until
                && at <= self.now - crate::capture::reassembly::UNACKNOWLEDGED_SECS
        });
        // Its first words after falling silent went to a non-member (a probe): it was running,
        // and its followers could not hear it.
        let answered_outsider = self
            .sent_by_silent
            .iter()
            .find(|&&(at, sid, _)| {
                sid == leader && at >= from + Rule::LeaderSilence.secs() && at <= until
            })
            .is_some_and(|&(_, _, to_member)| !to_member);
        if unreachable {
            SilenceEvidence::Unreachable
        } else if answered_outsider {
            SilenceEvidence::AnsweredOutsider
        } else if acknowledged {
            SilenceEvidence::Acknowledged
        } else {
            SilenceEvidence::None
        }
    }

    /// When `leader` last sent on the quorum port before `at`, if it had then been silent for
    /// more than [`Rule::LeaderSilence`] (and had been heard at all).
    fn silent_since(&self, leader: i64, at: f64) -> Option<f64> {
        let (last, silences) = self.leader_heard.get(&leader)?;
        if *last <= at - Rule::LeaderSilence.secs() {
            return Some(*last);
        }
        silences
            .iter()
            .find(|&&(from, to)| from <= at - Rule::LeaderSilence.secs() && to >= at)
            .map(|&(from, _)| from)
    }

    fn quorum_packet(&mut self, time: f64, r: &Record, q: &crate::decode::QuorumMessage) {
        self.quorum_packets += 1;
        let Some(conn) = r.conn else { return };
        if self.quorum.len() >= MAX_TRACKED && !self.quorum.contains_key(&conn) {
            return;
        }
        let c = self.quorum.entry(conn).or_default();
        if let Some(l) = &q.learner {
            c.learner = Some(l.sid);
            c.observer = q.ptype == ptype::OBSERVERINFO;
            c.leader_end = r.dst;
            c.sync = SyncInfo {
                started: time,
                ..SyncInfo::default()
            };
        }
        if c.leader_end.is_none()
            && let Some(by_leader) = sent_by_leader(q)
        {
            // Joined mid-way: the packet's type tells which end leads.
            c.leader_end = if by_leader { r.src } else { r.dst };
            c.mid_stream = true;
        }
        let Some(leader_end) = c.leader_end else {
            return;
        };
        let from_learner = r.src != Some(leader_end);
        let (leader_sid, learner_sid) = if from_learner {
            (r.to_sid, r.from_sid)
        } else {
            (r.from_sid, r.to_sid)
        };
        if c.leader.is_none() {
            c.leader = leader_sid;
        }
        if c.learner.is_none() {
            c.learner = learner_sid;
        }
        if !from_learner {
            let first_heard = *c.first_heard.get_or_insert(time);
            if c.mid_stream
                && let Some(leader) = c.leader
                && !self.decided_in_capture
            {
                let learner = c.learner;
                let at_start = self.at_start.get_or_insert(AtStart {
                    leader,
                    since: first_heard,
                    learners: Vec::new(),
                    epoch: None,
                });
                if at_start.leader == leader {
                    at_start.since = at_start.since.min(first_heard);
                    if let Some(l) = learner
                        && !at_start.learners.contains(&l)
                        && at_start.learners.len() < MAX_SERVERS
                    {
                        at_start.learners.push(l);
                        at_start.learners.sort_unstable();
                    }
                    if q.zxid > 0 {
                        at_start.epoch = at_start.epoch.max(Some(q.zxid >> 32));
                    }
                }
            }
            if let Some(leader) = c.leader
                && (self.leader_heard.len() < MAX_SERVERS
                    || self.leader_heard.contains_key(&leader))
            {
                let (last, silences) = self
                    .leader_heard
                    .entry(leader)
                    .or_insert((time, Vec::new()));
                if time - *last > Rule::LeaderSilence.secs() {
                    if silences.len() >= MAX_SILENCES {
                        silences.remove(0);
                    }
                    silences.push((*last, time));
                }
                *last = last.max(time);
            }
        }
        if !from_learner
            && let Some(to) = q.designated_leader
            && c.leader != Some(to)
            && !self.handovers.iter().any(|h| h.zxid == q.zxid)
            && self.handovers.len() < MAX_CONFIG_CHANGES
        {
            self.handovers.push(Handover {
                time,
                from: c.leader,
                to,
                zxid: q.zxid,
            });
        }
        match q.ptype {
            ptype::DIFF | ptype::SNAP | ptype::TRUNC if !from_learner && c.sync.mode.is_none() => {
                c.sync.mode = Some(q.type_name());
                c.sync.sync_time = Some(time);
            }
            ptype::NEWLEADER if !from_learner => {
                c.sync.newleader.get_or_insert(time);
                c.sync.newleader_zxid.get_or_insert(q.zxid);
                // The config it leads under counts its NEWLEADER ACKs (a reconfig's designated
                // leader: the activated one, before any notification carries it).
                if let Some(raw) = &q.config
                    && let Some(cfg) = self.configs.new_config(raw)
                {
                    self.config_seen(time, &cfg);
                }
            }
            ptype::ACK
                if from_learner
                    && c.sync.newleader_ack.is_none()
                    && c.sync.newleader.is_some()
                    && c.sync.newleader_zxid == Some(q.zxid) =>
            {
                c.sync.newleader_ack = Some(time);
                let (leader, learner, observer) = (c.leader, c.learner, c.observer);
                if let (Some(leader), Some(learner)) = (leader, learner)
                    && !observer
                    && self.votes(learner)
                {
                    let key = (leader, q.zxid >> 32);
                    self.acks.entry(key).or_default().0.insert(learner);
                    let (acked, reached) = &self.acks[&key];
                    // The leader counts itself.
                    let quorum = reached.is_none()
                        && self.is_quorum(acked.len() + 1, || {
                            acked.iter().copied().chain([leader]).collect()
                        });
                    if quorum {
                        self.acks.get_mut(&key).expect("just added").1 = Some(time);
                    }
                }
            }
            ptype::UPTODATE if !from_learner && c.sync.uptodate.is_none() => {
                c.sync.uptodate = Some(time);
                let mut sync = c.sync.clone();
                sync.leader = c.leader;
                let learner = c.learner;
                let observer = c.observer;
                if let Some(l) = learner {
                    self.syncs.push(sync);
                    self.sync_learners.push((l, observer));
                }
            }
            _ => {}
        }
    }

    /// Ends the input and returns the summary.
    /// The decisions made since the last call, for a live `--summary` that prints each as it
    /// becomes known: the servers' own, not the states assumed from before the capture. One
    /// whose vote converged is known once a record after its finalizeWait arrives. The full
    /// summary at the end weighs all the evidence again.
    pub fn take_new_decisions(&mut self) -> impl Iterator<Item = &Decision> {
        let from = std::mem::replace(&mut self.handed_out, self.decisions.len());
        self.decisions[from..].iter().filter(|d| !d.before_capture)
    }

    pub fn finish(mut self) -> Summary {
        self.advance(f64::INFINITY);
        // Syncs that never reached UPTODATE still tell their mode.
        let mut open: Vec<(i64, bool, SyncInfo)> = self
            .quorum
            .values()
            .filter(|c| c.sync.uptodate.is_none() && c.sync.started > 0.0)
            .filter_map(|c| {
                let mut s = c.sync.clone();
                s.leader = c.leader;
                c.learner.map(|l| (l, c.observer, s))
            })
            .collect();
        // In the order they began, whatever the table's order.
        open.sort_by(|a, b| a.2.started.total_cmp(&b.2.started));
        for (l, o, s) in open {
            self.syncs.push(s);
            self.sync_learners.push((l, o));
        }
        self.attach_syncs();
        // Most notifications between servers the capture does not name: the model cannot
        // tell who won. A few unnamed ones (votes to a leader that died before it was named,
        // in a capture begun on a running ensemble) do not hide what the named servers
        // decided; they are an anomaly of their own.
        let sids_unknown = self.unknown_sids * 2 > self.notifications;
        let mut rounds = self.build_rounds(sids_unknown);
        rounds.sort_by(|a, b| a.started.total_cmp(&b.started));
        for r in rounds.iter_mut().filter(|r| r.kind != RoundKind::Handover) {
            // The newest config shown by the round's start (the first, if it began before any).
            // (A handover's is the one it activated.)
            r.config_version = self
                .config_changes
                .iter()
                .rev()
                .find(|c| c.time <= r.started)
                .or(self.config_changes.first())
                .map(|c| c.version);
        }
        self.finish_anomalies();
        let shutdown = if self.links.is_empty() && !self.closes.is_empty() {
            let after = self
                .closes
                .iter()
                .map(|c| c.0)
                .find(|t| *t >= self.last_message);
            after.or(self.closes.last().map(|c| c.0))
        } else {
            None
        };
        let mut non_members: Vec<NonMember> = std::mem::take(&mut self.strangers)
            .into_values()
            .filter(|n| self.is_non_member(n.sid))
            .collect();
        non_members.sort_by_key(|n| n.sid);
        Summary {
            non_members,
            at_start: self.at_start.take(),
            rounds,
            anomalies: self.anomalies,
            quorum_port: self.quorum_packets > 0,
            cut_votes: self.cut_votes,
            cut_votes_lost: self.cut_votes_lost,
            sids_unknown,
            end: self.now,
            shutdown,
            configs: self.config_changes,
            rules: self.fired,
            lookings: self.lookings,
        }
    }

    /// Each server's decisions (indices into `decisions`, in the order they were made).
    fn decisions_by_sid(&self) -> HashMap<i64, SidDecisions> {
        let mut by_sid: HashMap<i64, Vec<usize>> = HashMap::default();
        for (i, d) in self.decisions.iter().enumerate() {
            by_sid.entry(d.sid).or_default().push(i);
        }
        by_sid
            .into_iter()
            .map(|(sid, list)| (sid, SidDecisions::new(&self.decisions, list)))
            .collect()
    }

    /// Gives each sync to the learner's decision it follows from.
    fn attach_syncs(&mut self) {
        let by_sid = self.decisions_by_sid();
        for (sync, (learner, _)) in self.syncs.iter().zip(&self.sync_learners) {
            let Some(list) = by_sid.get(learner) else {
                continue;
            };
            // The learner's last decision for that leader before it dialled it, or else the
            // first one just after (a decision estimated late).
            let fits = |i: usize| {
                let d = &self.decisions[i];
                sync.leader.is_none_or(|l| l == d.leader) && d.state != ServerState::Leading
            };
            let before = list.last_until(sync.started).filter(|&i| fits(i));
            let late = || {
                list.first_within(sync.started, sync.started + Rule::LateSync.secs())
                    .filter(|&i| fits(i))
            };
            let Some(i) = before.or_else(late) else {
                continue;
            };
            if before.is_none() {
                self.fired.note(Rule::LateSync);
            }
            let d = &mut self.decisions[i];
            {
                d.sync = Some(SyncInfo {
                    leader: Some(d.leader),
                    ..sync.clone()
                });
            }
        }
    }

    fn build_rounds(&mut self, sids_unknown: bool) -> Vec<Round> {
        // Elections: decisions grouped by (leader, round).
        let mut groups: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
        for (i, d) in self.decisions.iter().enumerate() {
            if d.before_capture {
                continue;
            }
            groups
                .entry((d.leader, d.election_epoch))
                .or_default()
                .push(i);
        }
        let mut rounds = Vec::new();
        let mut elections: Vec<Round> = Vec::new();
        for ((leader, epoch), list) in groups {
            // The leader established itself when it decided LEADING.
            let led = list
                .iter()
                .map(|&i| &self.decisions[i])
                .filter(|d| d.sid == leader && d.state == ServerState::Leading)
                .map(|d| d.time)
                .fold(f64::INFINITY, f64::min);
            let voters_decided = list.iter().any(|&i| {
                let d = &self.decisions[i];
                self.votes(d.sid)
                    && (d.evidence != Evidence::QuorumReplies
                        || d.looking_since < led + Rule::RejoinGrace.secs())
            });
            let mut election = Round {
                kind: RoundKind::Election,
                election_epoch: epoch,
                started: f64::INFINITY,
                ..Round::default()
            };
            for &i in &list {
                let d = self.decisions[i].clone();
                // Servers that began looking within Rule::RejoinGrace.secs() of the leader's
                // decision started with the election (servers started together).
                // Learned from answers, with no LEADING decision in this round: the leader
                // was established before (a server started late as a non-voter is answered
                // in the leader's round 0).
                // One that began with the election but learned the leader from answers more
                // than that after it decided was cut off meanwhile (a partitioned old leader,
                // back 13 s later): it rejoins, and the election's duration is the others'.
                let rejoin = !voters_decided
                    || (matches!(
                        d.evidence,
                        Evidence::QuorumReplies | Evidence::OwnNotification
                    ) && (led.is_infinite()
                        || d.looking_since >= led + Rule::RejoinGrace.secs()))
                    || (d.evidence == Evidence::QuorumReplies
                        && d.time >= led + Rule::RejoinGrace.secs());
                if rejoin {
                    if voters_decided && led.is_finite() {
                        self.fired.note(Rule::RejoinGrace);
                    }
                    rounds.push(Round {
                        kind: RoundKind::Rejoin,
                        election_epoch: epoch,
                        started: d.looking_since,
                        participants: [d.sid].into(),
                        duration: Some(d.time - d.looking_since),
                        settled: true,
                        end: RoundEnd::Decided,
                        winner: None,
                        serving: d.sync.as_ref().and_then(|s| s.uptodate),
                        decisions: vec![d],
                        ..Round::default()
                    });
                } else {
                    election.started = election.started.min(d.looking_since);
                    election.participants.insert(d.sid);
                    election.decisions.push(d);
                }
            }
            if !election.decisions.is_empty() {
                election.winner = (!sids_unknown).then_some(leader);
                election.settled = true;
                election.end = RoundEnd::Decided;
                elections.push(election);
            }
        }
        // Servers still looking at the end: the election they are in.
        let still: Vec<Episode> = self
            .episodes
            .iter()
            .filter(|e| e.decision.is_none())
            // A probe's question is not an election.
            .filter(|e| !self.is_non_member(e.sid))
            .filter(|e| {
                self.servers
                    .get(&e.sid)
                    .is_some_and(|s| s.phase.is_looking() && s.episode.is_some())
            })
            .filter(|e| {
                self.servers[&e.sid]
                    .episode
                    .is_some_and(|x| self.episodes[x].since == e.since)
            })
            .cloned()
            .collect();
        // Every member (or every server seen voting), for "no working connection to".
        let mut others: Vec<i64> = if self.members.is_empty() {
            self.servers
                .slot
                .iter()
                .filter(|(_, i)| self.servers.states[**i as usize].looker)
                .map(|(sid, _)| *sid)
                .collect()
        } else {
            self.members.keys().copied().collect()
        };
        others.sort_unstable();
        let mut unfinished: Option<Round> = None;
        elections.sort_by(|a, b| a.started.total_cmp(&b.started));
        let ends: Vec<f64> = elections
            .iter()
            .map(|r| r.decisions.iter().map(|d| d.time).fold(r.started, f64::max))
            .collect();
        for e in &still {
            let since = self.episode_began(e);
            // One that began while an election was still deciding belongs to it (the latest
            // one begun before it).
            let at = elections.partition_point(|r| r.started <= since);
            let into = at
                .checked_sub(1)
                .filter(|&i| since <= ends[i])
                .map(|i| &mut elections[i]);
            let why = self.why_looking(e.sid, since, &others);
            match into {
                Some(r) => {
                    r.participants.insert(e.sid);
                    r.still_looking.push(why);
                }
                None => {
                    let r = unfinished.get_or_insert_with(|| Round {
                        kind: RoundKind::Election,
                        started: since,
                        ..Round::default()
                    });
                    r.started = r.started.min(since);
                    r.election_epoch = r.election_epoch.max(e.round);
                    r.participants.insert(e.sid);
                    r.still_looking.push(why);
                }
            }
        }
        if let Some(mut r) = unfinished {
            let shutdown = r
                .participants
                .iter()
                .all(|s| self.servers.get(s).is_none_or(|s| s.open == 0));
            r.end = if shutdown {
                RoundEnd::Shutdown
            } else {
                RoundEnd::CaptureEnd
            };
            elections.push(r);
        }
        let mut first_seen: HashMap<i64, f64> = HashMap::default();
        for e in self.episodes.iter().filter(|e| e.first) {
            first_seen.entry(e.sid).or_insert(e.since);
        }
        // Vote changes, causes and times.
        elections.sort_by(|a, b| a.started.total_cmp(&b.started));
        let mut changes = std::mem::take(&mut self.changes);
        changes.sort_by(|a, b| a.time.total_cmp(&b.time));
        // A capture begun on a running ensemble starts with the leader its traffic shows: on
        // the quorum port, or else in the answers of servers decided before it began.
        let mut prev_leader: Option<(i64, f64)> = self
            .at_start
            .as_ref()
            .map(|a| a.leader)
            .or_else(|| {
                let mut leaders: Vec<i64> = self
                    .decisions
                    .iter()
                    .filter(|d| d.before_capture)
                    .map(|d| d.leader)
                    .collect();
                leaders.sort_unstable();
                leaders.dedup();
                match leaders.as_slice() {
                    [one] => Some(*one),
                    _ => None,
                }
            })
            .map(|l| (l, f64::NEG_INFINITY));
        let handovers = self.handover_rounds(sids_unknown);
        for (h, _) in &handovers {
            for _ in h
                .decisions
                .iter()
                .filter(|d| d.state != ServerState::Leading)
            {
                self.fired.note(Rule::HandoverWindow);
            }
        }
        let mut next_handover = 0;
        for i in 0..elections.len() {
            let next_start = elections.get(i + 1).map_or(f64::INFINITY, |r| r.started);
            let r = &mut elections[i];
            // A handover before the election put its designated leader in office.
            while let Some((h, to)) = handovers
                .get(next_handover)
                .filter(|(h, _)| h.started < r.started)
            {
                let led = h
                    .decisions
                    .iter()
                    .find(|d| d.state == ServerState::Leading)
                    .map_or(h.started, |d| d.time);
                prev_leader = Some((*to, led));
                next_handover += 1;
            }
            r.old_leader = prev_leader.map(|(l, _)| l);
            let end = r
                .decisions
                .iter()
                .map(|d| d.time)
                .fold(r.started, f64::max)
                .max(if r.end == RoundEnd::Decided {
                    r.started
                } else {
                    next_start.min(self.now)
                });
            let from = changes.partition_point(|c| c.time < r.started);
            r.changes = changes[from..]
                .iter()
                .take_while(|c| c.time <= end && c.time < next_start)
                .filter(|c| r.participants.contains(&c.sid))
                .cloned()
                .collect();
            // The round is the voters': an observer keeps a logical clock of its own, which
            // runs ahead of theirs after a failover (voters elect in round 0x2 while an
            // observer votes in 0x3). Observers name it only when no voter does.
            let voters_round = |observers: bool| {
                r.decisions
                    .iter()
                    .filter(|d| {
                        observers || (d.state != ServerState::Observing && self.votes(d.sid))
                    })
                    .map(|d| d.election_epoch)
                    .chain(
                        r.changes
                            .iter()
                            .filter(|c| observers || self.votes(c.sid))
                            .map(|c| c.vote.round),
                    )
                    .max()
            };
            if let Some(round) = voters_round(false).or_else(|| voters_round(true)) {
                r.election_epoch = r.election_epoch.max(round);
            }
            r.decisions.sort_by(|a, b| a.time.total_cmp(&b.time));
            r.duration = r.decisions.last().map(|d| d.time - r.started);
            // The cause, from the wire.
            // (On a capture begun on a running ensemble, a server first heard in an election was
            // there all along.)
            let firsts = r
                .participants
                .iter()
                .filter(|sid| {
                    !self.mid_run
                        && first_seen
                            .get(*sid)
                            .is_some_and(|t| (t - r.started).abs() < Rule::StartedTogether.secs())
                })
                .count();
            match prev_leader {
                None => {
                    r.cause = Cause::ServersStarted;
                    r.leader_lost = None;
                }
                Some((old, old_decided)) => {
                    // The old leader's connections that closed last before the election (a
                    // killed process closes all of them at once); quorum-port ones first,
                    // since followers notice those.
                    // Closes are in capture order.
                    let from = self
                        .closes
                        .partition_point(|c| c.0 < r.started - Rule::CauseWindow.secs());
                    // A leader heard on the quorum port after a close was not lost by it (the
                    // stale connections of a healed partition close while it leads).
                    let silent_from = self.silent_since(old, r.started);
                    let closes: Vec<(f64, bool)> = self.closes[from..]
                        .iter()
                        .take_while(|c| c.0 <= r.started + Rule::CloseAfterStart.secs())
                        .filter(|(t, a, b, _)| {
                            *t >= r.started - Rule::CauseWindow.secs()
                                && *t > old_decided
                                && silent_from
                                    .is_none_or(|s| *t >= s - Rule::CloseBeforeSilence.secs())
                                && (*a == Some(old) || *b == Some(old))
                        })
                        .map(|(t, _, _, q)| (*t, *q))
                        .collect();
                    let quorum_only = closes.iter().any(|c| c.1);
                    let last = closes
                        .iter()
                        .filter(|c| c.1 || !quorum_only)
                        .map(|c| c.0)
                        .fold(f64::NEG_INFINITY, f64::max);
                    let lost = closes
                        .iter()
                        .filter(|c| (c.1 || !quorum_only) && c.0 >= last - Rule::CloseBurst.secs())
                        .map(|c| c.0)
                        .fold(f64::INFINITY, f64::min);
                    // The old leader voting from the start lost its quorum; one whose first
                    // vote came later, after its connections had closed, was stopped and
                    // restarted (its follower looked at once, the restarted old leader voted
                    // 2.6 s later).
                    // (Or its first refused dial, which its decision counts from.)
                    let old_first_vote = r
                        .changes
                        .iter()
                        .filter(|c| c.sid == old)
                        .map(|c| c.time)
                        .chain(
                            r.decisions
                                .iter()
                                .filter(|d| d.sid == old)
                                .map(|d| d.looking_since),
                        )
                        .fold(f64::INFINITY, f64::min);
                    let restarted =
                        lost.is_finite() && old_first_vote > r.started + Rule::LateFirstVote.secs();
                    // Still connected but silent since before the election (a partition): its
                    // followers gave up on it, whatever it did after.
                    let silent = self
                        .silent_since(old, r.started)
                        .filter(|t| *t > old_decided && !quorum_only);
                    if let Some(t) = silent {
                        r.cause = Cause::LeaderSilent;
                        r.leader_lost = Some(t);
                        let evidence = self.silence_evidence(old, t, r.started);
                        // Back still LEADING in an older round: it had stopped, not been cut
                        // off (SIGSTOP for 35 s), unless
                        // what went to it waited for acknowledgements: a leader cut off for
                        // less than it takes to notice answers LEADING once the cut heals
                        // (Docker, iptables in its network namespace for 5 s).
                        let back = self.leading_answers.iter().find(|(at, sid, round)| {
                            *sid == old && *at > r.started && *round < r.election_epoch
                        });
                        r.silence = Some(evidence);
                        self.fired.note(Rule::LeaderSilence);
                        if evidence == SilenceEvidence::Acknowledged {
                            r.cause = Cause::LeaderFrozen;
                            r.leader_resumed = back.map(|b| b.0);
                        }
                    } else if r.participants.contains(&old) && !restarted {
                        r.cause = Cause::QuorumLost;
                        // Writes stopped when the follower it needed left: the last of its
                        // followers' quorum connections to close before the election (the
                        // leader gives up within a tick: `Not sufficient followers synced`).
                        let left = self.closes[from..]
                            .iter()
                            .filter(|(t, leader, _, quorum)| {
                                *quorum
                                    && *leader == Some(old)
                                    && *t > old_decided
                                    && *t <= r.started
                            })
                            .map(|c| c.0)
                            .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))));
                        r.leader_lost = Some(left.unwrap_or(r.started));
                    } else if lost.is_finite() {
                        r.cause = Cause::LeaderLost;
                        r.leader_lost = Some(lost.min(r.started));
                        r.leader_closed = lost <= r.started;
                        self.fired.note(Rule::CauseWindow);
                        if restarted && r.participants.contains(&old) {
                            self.fired.note(Rule::LateFirstVote);
                        }
                        if lost > r.started {
                            self.fired.note(Rule::CloseAfterStart);
                        }
                        if lost < last {
                            self.fired.note(Rule::CloseBurst);
                        }
                        if silent_from.is_some_and(|s| lost < s) {
                            self.fired.note(Rule::CloseBeforeSilence);
                        }
                    } else if firsts * 2 > r.participants.len() {
                        r.cause = Cause::ServersStarted;
                        self.fired.note(Rule::StartedTogether);
                    } else {
                        r.cause = Cause::LeaderLost;
                        r.leader_lost = Some(r.started);
                    }
                    r.fate = match r.cause {
                        Cause::ServersStarted => None,
                        Cause::QuorumLost => Some(LeaderFate::LostQuorum),
                        Cause::LeaderFrozen => Some(LeaderFate::Frozen),
                        Cause::LeaderSilent
                            if matches!(
                                r.silence,
                                Some(
                                    SilenceEvidence::Unreachable
                                        | SilenceEvidence::AnsweredOutsider
                                )
                            ) =>
                        {
                            Some(LeaderFate::CutOff)
                        }
                        Cause::LeaderSilent => Some(LeaderFate::Unknown),
                        Cause::LeaderLost if lost.is_finite() => {
                            // Back: a new process of its sid began looking after the close.
                            r.leader_back = self
                                .episodes
                                .iter()
                                .filter(|e| e.sid == old && e.started && e.since >= lost)
                                .map(|e| self.episode_began(e))
                                .reduce(f64::min);
                            Some(if r.leader_back.is_some() {
                                LeaderFate::Restarted
                            } else {
                                LeaderFate::KilledOrStopped
                            })
                        }
                        Cause::LeaderLost => Some(LeaderFate::Unknown),
                        Cause::Reconfig => Some(LeaderFate::HandedOver),
                    };
                }
            }
            if let Some(w) = r.winner.or_else(|| {
                r.decisions
                    .iter()
                    .find(|d| d.state == ServerState::Leading)
                    .map(|d| d.sid)
            }) {
                let lead = r
                    .decisions
                    .iter()
                    .find(|d| d.sid == w && d.state == ServerState::Leading)
                    .map(|d| d.time);
                let epoch = r
                    .decisions
                    .iter()
                    .filter_map(|d| d.sync.as_ref().and_then(|s| s.newleader_zxid))
                    .map(|z| z >> 32)
                    .next();
                // Keyed by (leader, epoch): with the epoch known, one look-up.
                let acks: Vec<_> = match epoch {
                    Some(e) => self.acks.get(&(w, e)).into_iter().collect(),
                    None => self
                        .acks
                        .iter()
                        .filter(|((l, _), _)| *l == w)
                        .map(|(_, a)| a)
                        .collect(),
                };
                r.serving = acks
                    .into_iter()
                    .filter_map(|(_, t)| *t)
                    .filter(|t| {
                        *t >= r.started
                            && lead.is_none_or(|l| *t >= l - Rule::ServingEarly.secs())
                            && *t < next_start + Rule::ServingLate.secs()
                    })
                    .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
                if let Some(t) = r.serving {
                    if lead.is_some_and(|l| t < l) {
                        self.fired.note(Rule::ServingEarly);
                    }
                    if t >= next_start {
                        self.fired.note(Rule::ServingLate);
                    }
                }
                let lost = r.leader_lost.unwrap_or(r.started);
                r.no_leader = lead.map(|l| l - lost);
                r.unavailable = r.serving.map(|s| s - lost);
                if r.end == RoundEnd::Decided {
                    prev_leader = Some((w, lead.unwrap_or(r.started)));
                }
            }
        }
        self.mark_stale_rejoins(&mut rounds, &elections);
        rounds.extend(elections);
        rounds.extend(handovers.into_iter().map(|(h, _)| h));
        rounds
    }

    /// When `sid` took the leader a handover designated, at the latest `by`: when it left the
    /// old leader (Java's learner closes its connection as it leaves, the designated leader
    /// too), where the capture names that connection; its first sync packet can come later,
    /// after dials refused while the new leader was not listening yet.
    ///
    /// Where the capture names no learner of the old leader's connections (one host, every
    /// learner dialling from one address), each of them closed one of those: the last such
    /// close bounds them all (not the old leader itself, which takes the new one only once it
    /// has stopped leading; nor anyone when the old leader is not named).
    fn left_for_handover(&self, h: &Handover, sid: i64, by: f64) -> f64 {
        if h.from.is_none_or(|from| from == sid) {
            return by;
        }
        let closes = || {
            self.closes.iter().filter(|(t, leader, _, quorum)| {
                *quorum && *leader == h.from && *t >= h.time && *t <= by
            })
        };
        let own = closes()
            .filter(|c| c.2 == Some(sid))
            .map(|c| c.0)
            .reduce(f64::min);
        let unnamed = closes()
            .filter(|c| c.2.is_none())
            .map(|c| c.0)
            .reduce(f64::max);
        own.or(unnamed).map_or(by, |t| t.min(by))
    }

    /// The handovers, each with its designated leader, in time order: the learners that
    /// began a sync with that leader within [`Rule::HandoverWindow`] after the commit follow
    /// it (the old leader among them, as a non-voter), and the leader led by the first of
    /// those syncs.
    fn handover_rounds(&self, sids_unknown: bool) -> Vec<(Round, i64)> {
        let mut handovers = self.handovers.clone();
        handovers.sort_by(|a, b| a.time.total_cmp(&b.time));
        handovers
            .iter()
            .filter_map(|h| {
                // The round of the old leader's election: Java's servers keep it.
                let round = self
                    .decisions
                    .iter()
                    .filter(|d| Some(d.leader) == h.from && d.time <= h.time)
                    .max_by(|a, b| a.time.total_cmp(&b.time))
                    .map_or(UNKNOWN_ROUND, |d| d.election_epoch);
                // A server's switch to the designated leader: no election, so no round of its own.
                let switch =
                    |sid: i64, state: ServerState, time: f64, sync: Option<SyncInfo>| Decision {
                        sid,
                        state,
                        leader: h.to,
                        election_epoch: round,
                        time,
                        evidence: Evidence::Reconfig,
                        looking_since: h.time,
                        took: time - h.time,
                        took_at_least: false,
                        sync,
                        before_capture: false,
                    };
                let mut decisions: Vec<Decision> = Vec::new();
                for (sync, &(learner, observer)) in self.syncs.iter().zip(&self.sync_learners) {
                    if sync.leader != Some(h.to)
                        || sync.started < h.time
                        || sync.started > h.time + Rule::HandoverWindow.secs()
                        || decisions.iter().any(|d| d.sid == learner)
                    {
                        continue;
                    }
                    let state = if observer {
                        ServerState::Observing
                    } else {
                        ServerState::Following
                    };
                    let left = self.left_for_handover(h, learner, sync.started);
                    decisions.push(switch(learner, state, left, Some(sync.clone())));
                }
                // With the committer unnamed, only learners moving to the designated leader
                // show that it was not the committer itself.
                if h.from.is_none() && decisions.is_empty() {
                    return None;
                }
                // The new leader led by the time the first of those syncs reached it.
                let led = decisions
                    .iter()
                    .filter_map(|d| d.sync.as_ref())
                    .map(|y| y.started)
                    .reduce(f64::min)
                    .map(|reached| self.left_for_handover(h, h.to, reached));
                if let Some(t) = led {
                    decisions.push(switch(h.to, ServerState::Leading, t, None));
                }
                decisions.sort_by(|a, b| a.time.total_cmp(&b.time));
                let epoch = decisions
                    .iter()
                    .filter_map(|d| d.sync.as_ref()?.newleader_zxid)
                    .map(|z| z >> 32)
                    .next();
                let serving = epoch
                    .and_then(|e| self.acks.get(&(h.to, e)))
                    .and_then(|(_, reached)| *reached);
                let round = Round {
                    kind: RoundKind::Handover,
                    election_epoch: round,
                    started: h.time,
                    participants: decisions.iter().map(|d| d.sid).collect(),
                    winner: (!sids_unknown).then_some(h.to),
                    duration: decisions.last().map(|d| d.time - h.time),
                    settled: led.is_some(),
                    cause: Cause::Reconfig,
                    old_leader: h.from,
                    fate: Some(LeaderFate::HandedOver),
                    leader_lost: Some(h.time),
                    serving,
                    unavailable: serving.map(|t| t - h.time),
                    no_leader: led.map(|t| t - h.time),
                    end: if led.is_some() {
                        RoundEnd::Decided
                    } else {
                        RoundEnd::CaptureEnd
                    },
                    config_version: u64::try_from(h.zxid).ok(),
                    decisions,
                    ..Round::default()
                };
                Some((round, h.to))
            })
            .collect()
    }

    /// Marks rejoins made while an election was replacing their leader (stale decisions),
    /// when the server's next decision is for another leader.
    fn mark_stale_rejoins(&mut self, rejoins: &mut [Round], elections: &[Round]) {
        if rejoins.is_empty() {
            return;
        }
        let by_sid = self.decisions_by_sid();
        // `elections` are by start. An election can replace a rejoin's leader until a second
        // after its last decision; the latest such time among the first i elections bounds
        // where the first one that can still be replacing at a given time may be.
        let reach: Vec<f64> = elections
            .iter()
            .scan(f64::NEG_INFINITY, |latest, e| {
                if let Some(last) = e.decisions.last() {
                    *latest = latest.max(last.time + Rule::StaleReach.secs());
                }
                Some(*latest)
            })
            .collect();
        for r in rejoins.iter_mut() {
            let Some(d) = r.decisions.first() else {
                continue;
            };
            let begun = elections.partition_point(|e| e.started <= d.time);
            let reaching = reach.partition_point(|t| *t < d.time).min(begun);
            let replacing = elections[reaching..begun].iter().find(|e| {
                e.winner.is_some_and(|w| w != d.leader)
                    && e.decisions
                        .last()
                        .is_some_and(|last| d.time <= last.time + Rule::StaleReach.secs())
            });
            let Some(e) = replacing else {
                continue;
            };
            let next = by_sid
                .get(&d.sid)
                .and_then(|list| list.next_other_leader(d.time, d.leader))
                .map(|i| &self.decisions[i]);
            if let Some(next) = next {
                self.fired.note(Rule::StaleReach);
                r.stale = Some(StaleRejoin {
                    election_started: e.started,
                    left_at: Some(next.time),
                    next_leader: Some(next.leader),
                });
            }
        }
    }

    /// Why `sid` is still LOOKING, from what the wire showed it.
    fn why_looking(&self, sid: i64, since: f64, others: &[i64]) -> StillLooking {
        let s = &self.servers[&sid];
        let need = self.need();
        let agreeing = s
            .vote
            .map_or(0, |v| s.recv.matching(&v.java(ServerState::Looking, 0)));
        let holds: BTreeMap<i64, i64> = s
            .recv
            .iter()
            .filter(|(k, _)| *k != sid)
            .take(MAX_LISTED)
            .map(|(k, v)| (k, v.leader))
            .collect();
        let unconnected: Vec<i64> = others
            .iter()
            .copied()
            .filter(|o| *o != sid)
            .filter(|o| {
                self.working
                    .get(&(sid.min(*o), sid.max(*o)))
                    .is_none_or(|w| *w == 0)
            })
            .take(MAX_LISTED)
            .collect();
        let dropped_by: Vec<i64> = self
            .tie_breaks
            .range((sid, i64::MIN)..=(sid, i64::MAX))
            .map(|((_, to), _)| *to)
            .take(MAX_LISTED)
            .collect();
        StillLooking {
            sid,
            since,
            vote: s.vote,
            agreeing,
            needs: self.hierarchy.is_none().then_some(need),
            holds,
            unconnected,
            dropped_by,
        }
    }

    fn finish_anomalies(&mut self) {
        for (&(from, to), &i) in &self.repeats {
            let (_, vote, times) = &self.runs[i as usize];
            let times = times.as_slice();
            let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
            // Java re-sends an unchanged vote when its poll times out, doubling the wait.
            let doubling = gaps
                .windows(2)
                .filter(|g| g[1] > g[0] * Rule::ResendBackoff.secs())
                .count();
            if times.len() >= 4 && doubling + 1 >= gaps.len().saturating_sub(1) {
                self.fired.note(Rule::ResendBackoff);
                self.anomalies.push(Anomaly {
                    time: times.first().copied(),
                    kind: AnomalyKind::NotificationTimeouts {
                        from,
                        to,
                        leader: vote.leader,
                        round: vote.round,
                        gaps,
                    },
                });
            }
        }
        for ((from, to), n) in &self.tie_breaks {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::TieBreakDrop {
                    from: *from,
                    to: *to,
                    times: *n,
                },
            });
        }
        for ((from, to), d) in &self.delayed {
            self.anomalies.push(Anomaly {
                time: Some(d.first),
                kind: AnomalyKind::DelayedVotes {
                    from: *from,
                    to: *to,
                    count: d.count,
                    round: d.round,
                    late: d.first - d.decided_at,
                },
            });
        }
        for ((server, learner), (n, user)) in &self.sasl_refused {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::SaslRefused {
                    server: *server,
                    learner: *learner,
                    user: user.clone(),
                    times: *n,
                },
            });
        }
        for (what, n) in &self.malformed {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::Malformed {
                    what: what.clone(),
                    count: *n,
                },
            });
        }
        let mut silent: Vec<i64> = self
            .members
            .keys()
            .filter(|sid| !self.servers.get(sid).is_some_and(|s| s.last_active > 0.0))
            .copied()
            .collect();
        silent.sort_unstable();
        for sid in silent {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::SilentMember { sid },
            });
        }
        if self.resent > 0 {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::ResentLastMessage { count: self.resent },
            });
        }
        if self.beyond_bound > 0 {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::TooManyServers {
                    count: self.beyond_bound,
                    bound: MAX_SERVERS,
                },
            });
        }
        if self.unknown_sids > 0 {
            self.anomalies.push(Anomaly {
                time: None,
                kind: AnomalyKind::UnknownSender {
                    count: self.unknown_sids,
                },
            });
        }
        // Stable: of one kind at one time, in the order found (by sid where they are listed).
        self.anomalies.sort_by(|a, b| {
            a.time
                .unwrap_or(f64::MAX)
                .total_cmp(&b.time.unwrap_or(f64::MAX))
                .then(a.kind.name().cmp(b.kind.name()))
        });
    }
}

/// A config's quorum rule when it is not a plain majority (`group.`/`weight.` lines).
fn hierarchy_of(config: &crate::wire::QuorumConfig) -> Option<crate::election::QuorumVerifier> {
    crate::election::QuorumVerifier::from_config(config)
        .ok()
        .filter(|q| q.is_hierarchical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{ConnId, Timestamp};
    use crate::decode::{Body, Record};
    use crate::wire::Notification;

    proptest::proptest! {
        /// The time-ordered look-ups give what a scan of the decisions in the order they were
        /// made gives, also when their times go back (estimated decisions) or repeat.
        #[test]
        fn sid_decisions_look_ups_match_a_scan(
            made in proptest::collection::vec((0u8..20, 0i64..3), 0..40),
            t in 0u8..22,
            leader in 0i64..3,
        ) {
            let decisions: Vec<Decision> = made
                .iter()
                .map(|&(time, leader)| Decision {
                    sid: 1,
                    state: ServerState::Following,
                    leader,
                    election_epoch: 1,
                    time: f64::from(time) / 4.0,
                    evidence: Evidence::OwnNotification,
                    looking_since: 0.0,
                    took: 0.0,
                    took_at_least: false,
                    sync: None,
                    before_capture: false,
                })
                .collect();
            let t = f64::from(t) / 4.0;
            let list = SidDecisions::new(&decisions, (0..decisions.len()).collect());
            let scan_last = (0..decisions.len()).rev().find(|&i| decisions[i].time <= t);
            proptest::prop_assert_eq!(list.last_until(t), scan_last);
            let scan_first =
                (0..decisions.len()).find(|&i| decisions[i].time > t && decisions[i].time <= t + 0.5);
            proptest::prop_assert_eq!(list.first_within(t, t + 0.5), scan_first);
            let scan_next = (0..decisions.len())
                .filter(|&i| decisions[i].time > t && decisions[i].leader != leader)
                .min_by(|a, b| decisions[*a].time.total_cmp(&decisions[*b].time));
            proptest::prop_assert_eq!(list.next_other_leader(t, leader), scan_next);
        }
    }

    /// Six voters in three groups of two (`group.1=1:2` ...), or a plain majority of six.
    fn config(groups: bool) -> Vec<u8> {
        let mut text: String = (1..=6)
            .map(|s| format!("server.{s}=10.0.0.{s}:2888:3888:participant\n"))
            .collect();
        if groups {
            text.push_str("group.1=1:2\ngroup.2=3:4\ngroup.3=5:6\n");
        }
        text.push_str("version=0");
        text.into_bytes()
    }

    /// `from`'s LOOKING vote for 6 (zxid 0, round 1) to `to`, at `ms`.
    fn vote(ms: u64, from: i64, to: i64, groups: bool) -> Record {
        let n = Notification {
            state: ServerState::Looking,
            leader: 6,
            zxid: 0,
            election_epoch: 1,
            peer_epoch: Some(0),
            version: Some(2),
            config: Some(config(groups)),
            trailing: Vec::new(),
        };
        Record {
            time: Timestamp {
                secs: 1000 + (ms / 1000) as i64,
                nanos: (ms % 1000) as u32 * 1_000_000,
            },
            conn: Some(ConnId((from * 10 + to) as u64)),
            src: None,
            dst: None,
            from_sid: Some(from),
            to_sid: Some(to),
            from_sid_source: None,
            to_sid_source: None,
            offset: None,
            raw: Vec::new(),
            body: Body::Notification(n),
        }
    }

    /// The summary once sid 6 has voted for itself and `voters` voted for it.
    fn summary_of(voters: &[i64], groups: bool) -> Summary {
        let mut s = Summarizer::new(std::collections::HashMap::new());
        for to in 1..=5 {
            s.add(&vote(0, 6, to, groups));
        }
        for (i, from) in voters.iter().enumerate() {
            s.add(&vote(10 + i as u64, *from, 6, groups));
        }
        s.finish()
    }

    /// Sid 6's decisions once it has voted for itself and `voters` voted for it.
    fn decisions_of_6(voters: &[i64], groups: bool) -> Vec<ServerState> {
        summary_of(voters, groups)
            .rounds
            .iter()
            .flat_map(|r| &r.decisions)
            .filter(|d| d.sid == 6)
            .map(|d| d.state)
            .collect()
    }

    #[test]
    fn a_hierarchical_config_counts_groups_not_heads() {
        // 1, 3, 5 and 6 are four of six (a majority), but a majority of only one group.
        assert_eq!(decisions_of_6(&[1, 3, 5], false), [ServerState::Leading]);
        assert_eq!(decisions_of_6(&[1, 3, 5], true), []);
        // With 2, groups 1 and 3 hold a majority each: two of three groups.
        assert_eq!(decisions_of_6(&[1, 3, 5, 2], true), [ServerState::Leading]);
        // Still LOOKING, it is not said to need a number of votes.
        let summary = summary_of(&[1, 3, 5], true);
        let still = summary
            .rounds
            .iter()
            .flat_map(|r| &r.still_looking)
            .find(|w| w.sid == 6)
            .expect("sid 6 still looking");
        assert_eq!((still.agreeing, still.needs), (4, None));
        assert!(
            still.words().contains("not a majority of the groups"),
            "{}",
            still.words()
        );
    }

    /// Records of a made-up ensemble (sid N at 127.0.0.N), for the rules no recorded capture
    /// makes fire.
    mod made_up {
        use super::*;
        use crate::decode::QuorumMessage;
        use crate::wire::quorum::LearnerInfo;

        fn record(ms: u64, conn: u64, from: i64, to: i64, body: Body, leader_port: bool) -> Record {
            let addr =
                |sid: i64, port: u16| std::net::SocketAddr::from(([127, 0, 0, sid as u8], port));
            // The learner dials the leader's quorum port from an ephemeral one.
            let (from_port, to_port) = if leader_port {
                (2888, 40000)
            } else {
                (40000, 2888)
            };
            Record {
                time: Timestamp {
                    secs: 1000 + (ms / 1000) as i64,
                    nanos: (ms % 1000) as u32 * 1_000_000,
                },
                conn: Some(ConnId(conn)),
                src: Some(addr(from, from_port)),
                dst: Some(addr(to, to_port)),
                from_sid: Some(from),
                to_sid: Some(to),
                from_sid_source: None,
                to_sid_source: None,
                offset: None,
                raw: Vec::new(),
                body,
            }
        }

        /// `from`'s LOOKING vote for `leader` in `round`, to `to`.
        pub(super) fn looking(ms: u64, from: i64, to: i64, leader: i64, round: i64) -> Record {
            let n = Notification {
                state: ServerState::Looking,
                leader,
                zxid: 0,
                election_epoch: round,
                peer_epoch: Some(0),
                version: Some(2),
                config: None,
                trailing: Vec::new(),
            };
            let conn = (from.min(to) * 10 + from.max(to)) as u64;
            record(ms, conn, from, to, Body::Notification(n), false)
        }

        /// A quorum-port packet between `leader` and `learner`.
        pub(super) fn zab(ms: u64, leader: i64, learner: i64, ptype: i32, zxid: i64) -> Record {
            let by_leader = !matches!(
                ptype,
                crate::wire::quorum::ptype::FOLLOWERINFO | crate::wire::quorum::ptype::ACK
            );
            let q = QuorumMessage {
                ptype,
                zxid,
                data_len: Some(0),
                learner: (ptype == crate::wire::quorum::ptype::FOLLOWERINFO).then_some(
                    LearnerInfo {
                        sid: learner,
                        protocol_version: 0x10000,
                        config_version: 0,
                    },
                ),
                designated_leader: None,
                config: None,
                snapshot_bytes: None,
            };
            let conn = 1000 + learner as u64;
            let (from, to) = if by_leader {
                (leader, learner)
            } else {
                (learner, leader)
            };
            record(ms, conn, from, to, Body::Quorum(q), by_leader)
        }

        /// The quorum-port connection of `learner` to `leader` closes.
        pub(super) fn zab_closed(ms: u64, leader: i64, learner: i64) -> Record {
            let body = Body::Closed {
                reset: false,
                quorum: true,
            };
            record(ms, 1000 + learner as u64, learner, leader, body, false)
        }

        pub(super) fn summary(servers: i64, records: &[Record]) -> Summary {
            let members = (1..=servers).map(|sid| (sid, Role::Participant)).collect();
            let mut s = Summarizer::new(members);
            for r in records {
                s.add(r);
            }
            s.finish()
        }

        /// Every server of `voters` votes for `leader` in `round` at `ms`.
        pub(super) fn election(ms: u64, voters: &[i64], leader: i64, round: i64) -> Vec<Record> {
            let mut out = Vec::new();
            for &from in voters {
                for &to in voters.iter().filter(|to| **to != from) {
                    out.push(looking(ms + from as u64, from, to, leader, round));
                }
            }
            out
        }
    }

    /// NEWLEADER ACKs seen before the leader's estimated decision (its decision is dated
    /// finalizeWait after its last notification; the ACKs are seen) still date the serving.
    #[test]
    fn rule_serving_early_counts_acks_just_before_the_leaders_decision() {
        use crate::wire::quorum::ptype;
        let mut records = made_up::election(0, &[1, 2, 3], 3, 1);
        let epoch = 1i64 << 32;
        records.push(made_up::zab(100, 3, 1, ptype::FOLLOWERINFO, 0));
        records.push(made_up::zab(110, 3, 1, ptype::NEWLEADER, epoch));
        records.push(made_up::zab(120, 3, 1, ptype::ACK, epoch));
        records.push(made_up::zab(1000, 3, 1, ptype::PING, 0));
        let summary = made_up::summary(3, &records);
        assert_eq!(summary.rules.count(Rule::ServingEarly), 1, "{summary:?}");
        let r = &summary.rounds[0];
        assert_eq!(r.winner, Some(3));
        assert!((r.serving.unwrap() - 1000.120).abs() < 1e-6, "{r:?}");
    }

    /// A quorum connection of the old leader closing just before its last quorum packet (a
    /// dying leader's closes and its last pings cross on the wire) dates its loss: the election
    /// that follows is a lost leader's, not a silent one's.
    #[test]
    fn rule_close_before_silence_counts_a_close_crossing_the_last_ping() {
        use crate::wire::quorum::ptype;
        let mut records = made_up::election(0, &[1, 2, 3, 4, 5], 5, 1);
        for learner in 1..=4 {
            records.push(made_up::zab(
                300 + learner as u64,
                5,
                learner,
                ptype::FOLLOWERINFO,
                0,
            ));
        }
        // Learner 1's session closes at 4.6 s, the leader's last PINGs to the others leave at
        // 4.9 s; the others look at 7 s.
        for tick in 0..10u64 {
            for learner in 2..=4 {
                records.push(made_up::zab(400 + tick * 500, 5, learner, ptype::PING, 0));
            }
        }
        records.push(made_up::zab_closed(4600, 5, 1));
        records.sort_by_key(|r| r.time);
        records.extend(made_up::election(7000, &[2, 3, 4], 4, 2));
        let summary = made_up::summary(5, &records);
        assert_eq!(
            summary.rules.count(Rule::CloseBeforeSilence),
            1,
            "{summary:?}"
        );
        let r = summary.rounds.last().unwrap();
        assert_eq!((r.cause, r.winner), (Cause::LeaderLost, Some(4)), "{r:?}");
        assert!((r.leader_lost.unwrap() - 1004.6).abs() < 1e-6, "{r:?}");
    }
}
