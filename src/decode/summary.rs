//! Election rounds, decisions and anomalies, from decoded records.
//!
//! What the election port shows, and what it does not: every vote a LOOKING server sends is on
//! the wire, but a decision is only visible when the decided server later answers someone with
//! a FOLLOWING/LEADING notification. So a decision is reported as **observed** when such a
//! notification appears, and otherwise as **inferred** when the server's last vote agrees with
//! a quorum (it decided no earlier than its last vote change plus finalizeWait, 200 ms).
//!
//! An election ("round" in the output, named by the election epoch it ended in) starts with a
//! LOOKING notification after the previous one settled, and settles when a quorum agrees and
//! votes stop changing for [`SETTLE_SECS`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};

use super::{Body, Record, Severity};
use crate::wire::{Notification, Role, ServerState};

/// Votes that do not change for this long after a quorum agrees end an election.
pub const SETTLE_SECS: f64 = 1.0;
/// Java's finalizeWait: a server decides no earlier than this after its quorum formed.
pub const FINALIZE_WAIT_SECS: f64 = 0.2;

/// A vote as compared for agreement: leader, zxid, round, peer epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VoteKey {
    pub leader: i64,
    pub zxid: i64,
    pub round: i64,
    pub peer_epoch: i64,
}

impl VoteKey {
    fn of(n: &Notification) -> Self {
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
    /// It sent a FOLLOWING/LEADING/OBSERVING notification (the time is that message's).
    OwnNotification,
    /// A quorum answered it FOLLOWING/LEADING for one leader, that leader among them as
    /// LEADING: Java's out-of-election rule decides then (the time of the completing answer).
    QuorumReplies,
    /// A quorum's LOOKING votes agreed; decided no earlier than its last vote change plus
    /// finalizeWait.
    ConvergedVotes,
    /// It started a new round of its own (no peer had shown it that round): it must have
    /// decided in the round before, on its last vote there, and then lost that leader.
    NewRound,
}

impl Evidence {
    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::OwnNotification => "own_notification",
            Evidence::QuorumReplies => "quorum_replies",
            Evidence::ConvergedVotes => "converged_votes",
            Evidence::NewRound => "new_round",
        }
    }
}

/// How a server left LOOKING.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub sid: i64,
    pub state: ServerState,
    pub leader: i64,
    /// The round it decided in.
    pub election_epoch: i64,
    /// When, as far as the evidence tells.
    pub time: f64,
    pub evidence: Evidence,
}

/// One election.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Round {
    /// The election epoch the election ended in (the largest seen in it).
    pub election_epoch: i64,
    pub started: f64,
    /// Servers that sent LOOKING notifications in it.
    pub participants: BTreeSet<i64>,
    pub changes: Vec<VoteChange>,
    pub decisions: Vec<Decision>,
    pub winner: Option<i64>,
    /// From the first LOOKING notification to the last decision.
    pub duration: Option<f64>,
    /// Whether a quorum agreed.
    pub settled: bool,
}

/// Something worth a look.
#[derive(Debug, Clone, PartialEq)]
pub struct Anomaly {
    pub kind: &'static str,
    pub time: Option<f64>,
    pub message: String,
}

/// The summary of a capture.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub rounds: Vec<Round>,
    pub anomalies: Vec<Anomaly>,
}

/// Builds a [`Summary`] from records fed in capture order.
#[derive(Debug, Default)]
pub struct Summarizer {
    members: HashMap<i64, Role>,
    open: Option<Open>,
    rounds: Vec<Round>,
    anomalies: Vec<Anomaly>,
    heard_from: BTreeSet<i64>,
    /// (from, to) -> (vote, times) of consecutive identical LOOKING notifications.
    repeats: HashMap<(i64, i64), (VoteKey, Vec<f64>)>,
    tie_breaks: BTreeMap<(i64, i64), u32>,
    /// Each server's last decided round and the vote it decided on.
    decided: HashMap<i64, (i64, Evidence)>,
    /// Each server's last LOOKING vote.
    last_vote: HashMap<i64, VoteKey>,
    resent: u64,
    configs: super::identity::ConfigCache,
    malformed: BTreeMap<String, u32>,
    unknown_sids: u64,
}

#[derive(Debug)]
struct Open {
    round: Round,
    /// Each participant's latest LOOKING vote and when it last changed.
    latest: BTreeMap<i64, (VoteKey, f64)>,
    last_change: f64,
    decided: BTreeSet<i64>,
    /// Non-LOOKING answers each participant received: sender -> (leader, state).
    told: HashMap<i64, HashMap<i64, (i64, ServerState)>>,
    /// The highest round each participant has been sent.
    heard_round: HashMap<i64, i64>,
}

impl Summarizer {
    /// A summarizer that knows the ensemble's members (from `--config` or carried configs).
    pub fn new(members: HashMap<i64, Role>) -> Self {
        Summarizer {
            members,
            ..Summarizer::default()
        }
    }

    fn quorum(&self, participants: &BTreeSet<i64>) -> usize {
        let voters = self
            .members
            .values()
            .filter(|r| **r == Role::Participant)
            .count();
        let n = if voters > 0 {
            voters
        } else {
            participants.len()
        };
        n / 2 + 1
    }

    /// Whether `sid` counts toward a quorum: not an observer (when the members are known).
    fn votes(&self, sid: i64) -> bool {
        self.members.get(&sid) != Some(&Role::Observer)
    }

    /// Feeds one record.
    pub fn add(&mut self, r: &Record) {
        let time = r.time.as_secs_f64();
        match &r.body {
            Body::Initial(m) => {
                if let (Some(from), Some(to)) = (r.from_sid, r.to_sid)
                    && from < to
                {
                    *self.tie_breaks.entry((from, to)).or_default() += 1;
                }
                let _ = m;
            }
            Body::Problem(p) => {
                if p.severity == Severity::Error {
                    let key = match &p.kind {
                        super::ProblemKind::Malformed(e) => format!("malformed {}", e.field),
                        super::ProblemKind::Gap { .. } => "bytes missing from the capture".into(),
                        super::ProblemKind::Capture => "damaged capture file".into(),
                        other => format!("{other:?}"),
                    };
                    *self.malformed.entry(key).or_default() += 1;
                }
            }
            Body::Notification(n) => self.notification(time, r.from_sid, r.to_sid, n),
        }
    }

    fn notification(&mut self, time: f64, from: Option<i64>, to: Option<i64>, n: &Notification) {
        if let crate::wire::JavaView::Dropped(why) = n.java_view() {
            *self.malformed.entry(why.to_string()).or_default() += 1;
        }
        if let Some(raw) = &n.config
            && let Some(cfg) = self.configs.new_config(raw)
        {
            for s in cfg.servers() {
                self.members.insert(s.id, s.role());
            }
        }
        if let (Some(open), Some(to)) = (&mut self.open, to) {
            let heard = open.heard_round.entry(to).or_insert(i64::MIN);
            *heard = (*heard).max(n.election_epoch);
        }
        let Some(from) = from else {
            self.unknown_sids += 1;
            return;
        };
        self.heard_from.insert(from);
        if !self.members.is_empty()
            && n.state == ServerState::Looking
            && n.leader != i64::MIN
            && !self.members.contains_key(&n.leader)
        {
            self.anomalies.push(Anomaly {
                kind: "vote_for_non_member",
                time: Some(time),
                message: format!("sid {from} votes for {}, which is not a member", n.leader),
            });
        }
        match n.state {
            ServerState::Looking => {
                let vote = VoteKey::of(n);
                // A decided server's queues hold, and re-send on every new connection
                // (QuorumCnxManager), the last vote it had for each peer: a LOOKING vote from a
                // round it already decided in is such a stale message, not a new election (a
                // new election has a higher round). Only a decision read from others' answers
                // is tentative: then just the very same vote again counts as an echo.
                let stale = match self.decided.get(&from) {
                    Some((round, evidence)) if vote.round <= *round => {
                        *evidence != Evidence::QuorumReplies
                            || self.last_vote.get(&from) == Some(&vote)
                    }
                    _ => false,
                };
                if stale {
                    self.resent += 1;
                    return;
                }
                self.last_vote.insert(from, vote);
                if let Some(to) = to {
                    let e = self.repeats.entry((from, to)).or_insert((vote, Vec::new()));
                    if e.0 != vote {
                        *e = (vote, Vec::new());
                    }
                    e.1.push(time);
                }
                self.looking(time, from, vote);
            }
            ServerState::Following | ServerState::Leading | ServerState::Observing => {
                self.decide(
                    from,
                    n.state,
                    n.leader,
                    n.election_epoch,
                    time,
                    Evidence::OwnNotification,
                );
                if let Some(to) = to {
                    self.told(time, from, to, n);
                }
            }
            ServerState::Unknown(_) => {}
        }
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
        let Some(open) = &mut self.open else {
            return;
        };
        if !open.round.participants.contains(&sid) || open.decided.contains(&sid) {
            return;
        }
        open.decided.insert(sid);
        self.decided.insert(sid, (round, evidence));
        open.round.decisions.push(Decision {
            sid,
            state,
            leader,
            election_epoch: round,
            time,
            evidence,
        });
    }

    /// Java's out-of-election rule, seen from outside: a LOOKING server that hears
    /// FOLLOWING/LEADING for one leader from a quorum, the leader itself LEADING, follows it.
    fn told(&mut self, time: f64, from: i64, to: i64, n: &Notification) {
        let need = match &self.open {
            Some(open) => self.quorum(&open.round.participants),
            None => return,
        };
        let Some(open) = &mut self.open else {
            return;
        };
        if !open.round.participants.contains(&to) || open.decided.contains(&to) {
            return;
        }
        let told = open.told.entry(to).or_default();
        told.insert(from, (n.leader, n.state));
        let members = &self.members;
        let backers = told
            .iter()
            .filter(|(sid, (l, _))| *l == n.leader && members.get(sid) != Some(&Role::Observer))
            .count();
        let leader_says = told.get(&n.leader).map(|(_, s)| *s);
        if backers >= need && leader_says == Some(ServerState::Leading) {
            let state = match self.members.get(&to) {
                Some(Role::Observer) => ServerState::Observing,
                _ => ServerState::Following,
            };
            self.decide(
                to,
                state,
                n.leader,
                n.election_epoch,
                time,
                Evidence::QuorumReplies,
            );
        }
    }

    fn looking(&mut self, time: f64, from: i64, vote: VoteKey) {
        // A decision read from others' answers is tentative: Java processes its queue in order,
        // and a LOOKING vote from that server in a round up to the decided one shows it was
        // still looking. Take the decision back; the election goes on.
        if let Some(open) = &mut self.open
            && let Some(at) = open.round.decisions.iter().position(|d| {
                d.sid == from
                    && d.evidence != Evidence::OwnNotification
                    && vote.round <= d.election_epoch
            })
        {
            open.round.decisions.remove(at);
            open.decided.remove(&from);
            self.decided.remove(&from);
        }
        let changed = self
            .open
            .as_ref()
            .is_none_or(|o| o.latest.get(&from).map(|l| l.0) != Some(vote));
        let over = self.open.as_ref().is_some_and(|o| {
            let complete = o.round.participants.iter().all(|p| o.decided.contains(p));
            let settled = time - o.last_change >= SETTLE_SECS && self.agreement(o).is_some();
            complete || settled
        });
        if over && changed {
            self.close();
        }
        self.new_round(time, from, vote);
        let open = self.open.get_or_insert_with(|| Open {
            round: Round {
                started: time,
                ..Round::default()
            },
            latest: BTreeMap::new(),
            last_change: time,
            decided: BTreeSet::new(),
            told: HashMap::new(),
            heard_round: HashMap::new(),
        });
        open.round.participants.insert(from);
        open.round.election_epoch = open.round.election_epoch.max(vote.round);
        if changed {
            open.latest.insert(from, (vote, time));
            open.last_change = time;
            open.round.changes.push(VoteChange {
                time,
                sid: from,
                vote,
            });
        }
    }

    /// A server that moves to a round nobody showed it left its previous round decided (Java
    /// only raises its own round when `lookForLeader` starts again). Records that decision,
    /// and lets it decide again.
    fn new_round(&mut self, time: f64, from: i64, vote: VoteKey) {
        let Some(open) = &mut self.open else {
            return;
        };
        let Some((last, at)) = open.latest.get(&from).copied() else {
            return;
        };
        let heard = open.heard_round.get(&from).copied().unwrap_or(i64::MIN);
        if vote.round <= last.round || vote.round <= heard {
            return;
        }
        if open.decided.remove(&from) {
            // Already decided in the last round (seen otherwise): it is looking again.
            return;
        }
        let state = match self.members.get(&from) {
            Some(Role::Observer) => ServerState::Observing,
            _ if last.leader == from => ServerState::Leading,
            _ => ServerState::Following,
        };
        open.round.decisions.push(Decision {
            sid: from,
            state,
            leader: last.leader,
            election_epoch: last.round,
            time: (at + FINALIZE_WAIT_SECS).min(time),
            evidence: Evidence::NewRound,
        });
    }

    /// The vote a quorum of the open election's participants holds, if any.
    fn agreement(&self, open: &Open) -> Option<VoteKey> {
        let need = self.quorum(&open.round.participants);
        let mut counts: HashMap<VoteKey, usize> = HashMap::new();
        for (sid, (vote, _)) in &open.latest {
            if self.votes(*sid) {
                *counts.entry(*vote).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter(|(_, c)| *c >= need)
            .map(|(v, _)| v)
            .next()
    }

    fn close(&mut self) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        let agreed = self.agreement(&open);
        if let Some(vote) = agreed {
            open.round.settled = true;
            for (sid, (v, at)) in &open.latest {
                if *v == vote && !open.decided.contains(sid) {
                    self.decided
                        .insert(*sid, (v.round, Evidence::ConvergedVotes));
                    let state = match self.members.get(sid) {
                        Some(Role::Observer) => ServerState::Observing,
                        _ if *sid == vote.leader => ServerState::Leading,
                        _ => ServerState::Following,
                    };
                    open.round.decisions.push(Decision {
                        sid: *sid,
                        state,
                        leader: vote.leader,
                        election_epoch: vote.round,
                        time: at + FINALIZE_WAIT_SECS,
                        evidence: Evidence::ConvergedVotes,
                    });
                }
            }
        }
        let r = &mut open.round;
        r.decisions.sort_by(|a, b| a.time.total_cmp(&b.time));
        let mut leaders: HashMap<i64, usize> = HashMap::new();
        for d in &r.decisions {
            *leaders.entry(d.leader).or_default() += 1;
        }
        r.winner = agreed.map(|v| v.leader).or_else(|| {
            leaders
                .into_iter()
                .max_by_key(|(l, c)| (*c, *l))
                .map(|(l, _)| l)
        });
        r.duration = r.decisions.last().map(|d| d.time - r.started);
        if !r.settled && r.decisions.is_empty() {
            self.anomalies.push(Anomaly {
                kind: "no_quorum",
                time: Some(r.started),
                message: format!(
                    "election in round {:#x} never reached a quorum in the capture",
                    r.election_epoch
                ),
            });
        }
        self.rounds.push(open.round);
    }

    /// Ends the input and returns the summary.
    pub fn finish(mut self) -> Summary {
        self.close();
        for ((from, to), (vote, times)) in &self.repeats {
            let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
            // Java re-sends an unchanged vote when its poll times out, doubling the wait.
            let doubling = gaps.windows(2).filter(|g| g[1] > g[0] * 1.5).count();
            if times.len() >= 4 && doubling + 1 >= gaps.len().saturating_sub(1) {
                let g: Vec<String> = gaps.iter().map(|g| format!("{g:.1}")).collect();
                self.anomalies.push(Anomaly {
                    kind: "notification_timeouts",
                    time: times.first().copied(),
                    message: format!(
                        "sid {from} sent sid {to} the same vote (leader {}, round {:#x}) {} times, gaps {} s: it timed out waiting for notifications",
                        vote.leader,
                        vote.round,
                        times.len(),
                        g.join(", ")
                    ),
                });
            }
        }
        for ((from, to), n) in &self.tie_breaks {
            self.anomalies.push(Anomaly {
                kind: "tie_break_drop",
                time: None,
                message: format!(
                    "sid {from} connected to larger sid {to} {n} time(s) and {to} dropped it (the sid tie-break: only connections initiated by the larger sid are kept; {to} dials back)"
                ),
            });
        }
        for (what, n) in &self.malformed {
            self.anomalies.push(Anomaly {
                kind: "malformed",
                time: None,
                message: format!("{n} x {what}"),
            });
        }
        for sid in self.members.keys() {
            if !self.heard_from.contains(sid) {
                self.anomalies.push(Anomaly {
                    kind: "silent_member",
                    time: None,
                    message: format!("member sid {sid} never sent a notification in the capture"),
                });
            }
        }
        if self.resent > 0 {
            self.anomalies.push(Anomaly {
                kind: "resent_last_message",
                time: None,
                message: format!(
                    "{} LOOKING notification(s) from already-decided servers were their last message re-sent on a new connection (not new elections)",
                    self.resent
                ),
            });
        }
        if self.unknown_sids > 0 {
            self.anomalies.push(Anomaly {
                kind: "unknown_sender",
                time: None,
                message: format!(
                    "{} notifications have an unknown sender (no initial message or address for it in the capture; give --config or --sid-map)",
                    self.unknown_sids
                ),
            });
        }
        self.anomalies.sort_by(|a, b| {
            a.time
                .unwrap_or(f64::MAX)
                .total_cmp(&b.time.unwrap_or(f64::MAX))
                .then(a.kind.cmp(b.kind))
                .then(a.message.cmp(&b.message))
        });
        Summary {
            rounds: self.rounds,
            anomalies: self.anomalies,
        }
    }
}

impl Summary {
    /// The summary as one JSON object; times are seconds since the epoch.
    pub fn to_json(&self) -> Value {
        let rounds: Vec<Value> = self
            .rounds
            .iter()
            .map(|r| {
                json!({
                    "election_epoch": r.election_epoch,
                    "started": r.started,
                    "participants": r.participants,
                    "vote_changes": r.changes.iter().map(|c| json!({
                        "time": c.time, "sid": c.sid, "leader": c.vote.leader, "zxid": c.vote.zxid,
                        "election_epoch": c.vote.round, "peer_epoch": c.vote.peer_epoch,
                    })).collect::<Vec<_>>(),
                    "decisions": r.decisions.iter().map(|d| json!({
                        "sid": d.sid, "state": d.state.name(), "leader": d.leader,
                        "election_epoch": d.election_epoch, "time": d.time,
                        "evidence": d.evidence.name(),
                    })).collect::<Vec<_>>(),
                    "winner": r.winner,
                    "duration": r.duration,
                    "settled": r.settled,
                })
            })
            .collect();
        let anomalies: Vec<Value> = self
            .anomalies
            .iter()
            .map(|a| json!({"kind": a.kind, "time": a.time, "message": a.message}))
            .collect();
        json!({"type": "summary", "rounds": rounds, "anomalies": anomalies})
    }

    /// The summary for people; times relative to `t0`.
    pub fn to_text(&self, t0: f64) -> String {
        let mut s = String::new();
        for (i, r) in self.rounds.iter().enumerate() {
            let ids: Vec<String> = r.participants.iter().map(i64::to_string).collect();
            s.push_str(&format!(
                "election {} at +{:.3}s, round {:#x}, participants {}\n",
                i + 1,
                r.started - t0,
                r.election_epoch,
                ids.join(", ")
            ));
            for c in &r.changes {
                if c.vote.leader == i64::MIN {
                    s.push_str(&format!(
                        "  +{:.3}s  sid {} proposes no leader (a non-voter), round {:#x}\n",
                        c.time - t0,
                        c.sid,
                        c.vote.round
                    ));
                    continue;
                }
                s.push_str(&format!(
                    "  +{:.3}s  sid {} votes leader {} (zxid {:#x}, round {:#x}, peerEpoch {:#x})\n",
                    c.time - t0,
                    c.sid,
                    c.vote.leader,
                    c.vote.zxid,
                    c.vote.round,
                    c.vote.peer_epoch
                ));
            }
            for d in &r.decisions {
                s.push_str(&format!(
                    "  +{:.3}s  sid {} {} (leader {}){}\n",
                    d.time - t0,
                    d.sid,
                    d.state.name(),
                    d.leader,
                    match d.evidence {
                        Evidence::OwnNotification => "",
                        Evidence::QuorumReplies => "  [a quorum answered it FOLLOWING/LEADING]",
                        Evidence::ConvergedVotes =>
                            "  [votes converged; the decision itself is not on the election port]",
                        Evidence::NewRound => "  [it began a new round of its own afterwards]",
                    }
                ));
            }
            match (r.winner, r.duration) {
                (Some(w), Some(d)) => {
                    s.push_str(&format!("  winner: sid {w}, decided in {:.3}s\n", d))
                }
                _ => s.push_str("  no decision in the capture\n"),
            }
        }
        if !self.anomalies.is_empty() {
            s.push_str("anomalies:\n");
            for a in &self.anomalies {
                match a.time {
                    Some(t) => s.push_str(&format!("  +{:.3}s  {}\n", t - t0, a.message)),
                    None => s.push_str(&format!("  {}\n", a.message)),
                }
            }
        }
        s
    }
}
