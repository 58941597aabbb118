//! Decisions as they become known while a capture streams in (`zkfle decode --summary` on a
//! live interface or stdin): printed at once, before the full summary at the end.

use std::collections::BTreeMap;

use crate::decode::{Body, Record};
use crate::wire::ServerState;

/// Decisions as they become known, for a live `--summary`. Two kinds of evidence, both seen
/// as they arrive: a server's own notification saying it is FOLLOWING, LEADING or OBSERVING;
/// and a quorum of servers whose latest LOOKING notifications carry the same vote in the
/// same round (FastLeaderElection decides on exactly that, after finalizeWait). The full
/// summary at the end weighs all the evidence again.
#[derive(Debug, Default)]
pub struct LiveDecisions {
    /// sid → (state, leader, round) last printed.
    printed: BTreeMap<i64, (i32, i64, i64)>,
    /// sid → its latest LOOKING vote (leader, zxid, peer epoch, round).
    votes: BTreeMap<i64, (i64, i64, i64, i64)>,
    /// Voting members, from the configs notifications carry.
    voters: Option<usize>,
}

/// One decision known live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveDecision {
    pub sid: i64,
    /// LEADING, FOLLOWING or OBSERVING.
    pub state: &'static str,
    pub leader: i64,
    pub round: i64,
    /// `own_notification` or `converged_votes`.
    pub evidence: &'static str,
}

impl LiveDecisions {
    /// The decisions `r` makes known (each printed once).
    pub fn see(&mut self, r: &Record) -> Vec<LiveDecision> {
        let Body::Notification(n) = &r.body else {
            return Vec::new();
        };
        if let Some(text) = n.config_text() {
            let voters = text
                .lines()
                .filter(|l| l.starts_with("server.") && !l.trim_end().ends_with(":observer"))
                .count();
            if voters > 0 {
                self.voters = Some(voters);
            }
        }
        let Some(sid) = r.from_sid else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if n.state != ServerState::Looking {
            self.votes.remove(&sid);
            let key = (n.state.code(), n.leader, n.election_epoch);
            if self.printed.insert(sid, key) != Some(key) {
                out.push(LiveDecision {
                    sid,
                    state: n.state.name(),
                    leader: n.leader,
                    round: n.election_epoch,
                    evidence: "own_notification",
                });
            }
            return out;
        }
        // A decided server's last LOOKING message re-sent on a new connection changes nothing;
        // another vote or a later round means it is looking again.
        if let Some(&(_, leader, round)) = self.printed.get(&sid)
            && (leader != n.leader || n.election_epoch > round)
        {
            self.printed.remove(&sid);
        }
        let vote = (n.leader, n.zxid, n.effective_peer_epoch(), n.election_epoch);
        self.votes.insert(sid, vote);
        let agreeing: Vec<i64> = self
            .votes
            .iter()
            .filter(|(_, v)| **v == vote)
            .map(|(s, _)| *s)
            .collect();
        let voters = self.voters.unwrap_or(self.votes.len()).max(1);
        if agreeing.len() < voters / 2 + 1 {
            return out;
        }
        for s in agreeing {
            let state = if s == n.leader {
                ServerState::Leading
            } else {
                ServerState::Following
            };
            let key = (state.code(), n.leader, n.election_epoch);
            if self.printed.insert(s, key) != Some(key) {
                out.push(LiveDecision {
                    sid: s,
                    state: state.name(),
                    leader: n.leader,
                    round: n.election_epoch,
                    evidence: "converged_votes",
                });
            }
        }
        out
    }
}
