//! Votes, the total order on proposals (TOP) and Java's vote equality (reference D).

use crate::wire::ServerState;

use super::quorum::QuorumVerifier;

/// A vote as Java's `Vote` holds it.
///
/// `version` is the notification format version as the receiver read it: 0 for 28- and
/// 40-byte messages and for votes built locally, 2 for current messages. It only matters for
/// [`Vote::java_eq`] between two non-LOOKING votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vote {
    pub leader: i64,
    pub zxid: i64,
    pub election_epoch: i64,
    pub peer_epoch: i64,
    pub state: ServerState,
    pub version: i32,
}

impl Vote {
    /// A LOOKING vote of version 0 (Java's four-argument constructor).
    pub fn looking(leader: i64, zxid: i64, election_epoch: i64, peer_epoch: i64) -> Self {
        Vote {
            leader,
            zxid,
            election_epoch,
            peer_epoch,
            state: ServerState::Looking,
            version: 0,
        }
    }

    /// Java's `Vote.equals`, used by the quorum tests:
    /// - if either side is LOOKING: leader, zxid, election epoch and peer epoch must match;
    /// - otherwise the leader must match, and the peer epoch too unless exactly one side has
    ///   version > 0 (ZOOKEEPER-1805/1732). Zxid and election epoch are ignored.
    pub fn java_eq(&self, other: &Vote) -> bool {
        if self.state == ServerState::Looking || other.state == ServerState::Looking {
            self.leader == other.leader
                && self.zxid == other.zxid
                && self.election_epoch == other.election_epoch
                && self.peer_epoch == other.peer_epoch
        } else if (self.version > 0) ^ (other.version > 0) {
            self.leader == other.leader
        } else {
            self.leader == other.leader && self.peer_epoch == other.peer_epoch
        }
    }
}

/// What a server proposes while LOOKING: `(proposedLeader, proposedZxid, proposedEpoch)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Proposal {
    pub leader: i64,
    pub zxid: i64,
    pub peer_epoch: i64,
}

/// Java's `totalOrderPredicate(newId, newZxid, newEpoch, curId, curZxid, curEpoch)`: whether
/// the new proposal beats the current one. A zero-weight leader never wins; otherwise the higher
/// peer epoch, then the higher zxid, then the higher sid wins. All comparisons are signed.
pub fn total_order_predicate(q: &QuorumVerifier, new: Proposal, cur: Proposal) -> bool {
    q.weight(new.leader) != 0 && beats(new, cur)
}

/// The total order itself, for a leader that may win: the higher peer epoch, then the higher
/// zxid, then the higher sid (the story of a capture, which may not know the weights, checks
/// who may win its own way).
pub fn beats(new: Proposal, cur: Proposal) -> bool {
    (new.peer_epoch, new.zxid, new.leader) > (cur.peer_epoch, cur.zxid, cur.leader)
}

/// Whether a server's own proposal carries newer data than its last one: a new `lookForLeader`
/// whatever its round, for a server proposes its own data only as an election begins (after a
/// reconfig the logical clock starts from 0, so the round alone does not tell). The one rule
/// the summary and replay read a capture's elections by. `own`: its last own proposal as
/// `(peer epoch, zxid)`.
pub fn newer_own_proposal(proposal: Proposal, sender: i64, own: Option<(i64, i64)>) -> bool {
    proposal.leader == sender && own.is_some_and(|o| (proposal.peer_epoch, proposal.zxid) > o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(leader: i64, zxid: i64, peer_epoch: i64) -> Proposal {
        Proposal {
            leader,
            zxid,
            peer_epoch,
        }
    }

    #[test]
    fn fle_predicate_test() {
        // E.5 FLEPredicateTest: (newId,newZxid,newEpoch, curId,curZxid,curEpoch).
        let q = QuorumVerifier::majority(&[0, 1, 2], &[]);
        assert!(!total_order_predicate(&q, p(4, 0, 0), p(3, 0, 2)));
        assert!(total_order_predicate(&q, p(0, 0, 1), p(1, 0, 0)));
        assert!(total_order_predicate(&q, p(0, 1, 0), p(1, 0, 0)));
        assert!(total_order_predicate(&q, p(1, 1, 0), p(0, 1, 0)));
        // Equal is not better; signed comparisons: MIN loses to everything.
        assert!(!total_order_predicate(&q, p(1, 0, 0), p(1, 0, 0)));
        assert!(total_order_predicate(
            &q,
            p(0, 0, 0),
            p(i64::MIN, i64::MIN, i64::MIN)
        ));
        assert!(!total_order_predicate(&q, p(2, -1, 0), p(1, 0, 0)));
    }

    #[test]
    fn equality_rules() {
        let f = |version, leader, zxid, ee, pe, state| Vote {
            leader,
            zxid,
            election_epoch: ee,
            peer_epoch: pe,
            state,
            version,
        };
        use ServerState::*;
        // Non-LOOKING: zxid and ee ignored; peer epoch compared when versions agree on > 0.
        let target = f(0, 4, 0x2_0000_0001, 2, 2, Following);
        assert!(target.java_eq(&f(1, 4, 0x1_0000_0001, 1, 2, Following)));
        assert!(target.java_eq(&f(1, 4, 0x1_0000_0001, 1, 1, Following)));
        assert!(target.java_eq(&f(0, 4, 0x1, 9, 2, Leading)));
        assert!(!target.java_eq(&f(0, 4, 0x1, 9, 3, Leading)));
        assert!(!target.java_eq(&f(2, 5, 0x1, 9, 2, Leading)));
        // LOOKING on either side: all four.
        let l = f(0, 4, 0x2_0000_0001, 2, 2, Looking);
        assert!(l.java_eq(&f(2, 4, 0x2_0000_0001, 2, 2, Following)));
        assert!(!l.java_eq(&f(0, 4, 0x2_0000_0001, 3, 2, Following)));
    }

    /// E.3 FLEOutOfElectionTest: 5 voters {0..4}; does `target` have a quorum of equal votes?
    #[test]
    fn fle_out_of_election_rows() {
        use ServerState::*;
        use std::collections::{BTreeMap, BTreeSet};
        let q = QuorumVerifier::majority(&[0, 1, 2, 3, 4], &[]);
        let quorum = |votes: &[(i64, Vote)], target: Vote| {
            let votes: BTreeMap<i64, Vote> = votes.iter().copied().collect();
            let acks: BTreeSet<i64> = votes
                .iter()
                .filter(|(s, v)| q.is_voter(**s) && target.java_eq(v))
                .map(|(s, _)| *s)
                .collect();
            q.contains_quorum(&acks)
        };
        let v = |version, leader, zxid, ee, pe, state| Vote {
            leader,
            zxid,
            election_epoch: ee,
            peer_epoch: pe,
            state,
            version,
        };
        // testIgnoringZxidElectionEpoch
        let votes = [
            (0, v(1, 4, 0x1_0000_0001, 1, 2, Following)),
            (1, v(1, 4, 0x1_0000_0002, 1, 2, Following)),
            (3, v(1, 4, 0x2_0000_0001, 2, 2, Following)),
            (4, v(1, 4, 0x2_0000_0001, 2, 2, Leading)),
        ];
        assert!(quorum(&votes, v(0, 4, 0x2_0000_0001, 2, 2, Following)));
        // testElectionWIthDifferentVersion
        let votes = [
            (0, v(1, 4, 0x1_0000_0001, 1, 1, Following)),
            (1, v(1, 4, 0x1_0000_0001, 1, 1, Following)),
            (3, v(0, 4, 0x2_0000_0001, 2, 2, Following)),
            (4, v(0, 4, 0x2_0000_0001, 2, 2, Leading)),
        ];
        assert!(quorum(&votes, v(0, 4, 0x2_0000_0001, 2, 2, Following)));
        // testLookingNormal
        let l = v(0, 4, 0x2_0000_0001, 1, 1, Looking);
        let votes = [
            (0, l),
            (1, l),
            (3, l),
            (4, v(0, 4, 0x2_0000_0001, 1, 1, Leading)),
        ];
        assert!(quorum(&votes, l));
        // testLookingDiffRounds
        let votes = [
            (0, v(0, 4, 0x1_0000_0001, 1, 1, Looking)),
            (1, v(0, 4, 0x2_0000_0001, 2, 2, Looking)),
            (3, v(0, 4, 0x2_0000_0001, 3, 2, Looking)),
            (4, v(0, 4, 0x2_0000_0001, 3, 2, Leading)),
        ];
        assert!(!quorum(&votes, v(0, 4, 0x2_0000_0001, 2, 2, Looking)));
        // testOutofElection: sid 5 is no member and not counted; {1,2,4} is a quorum.
        let votes = [
            (1, v(0, 5, 0xf_0000_0000, 0xa, 0x17, Following)),
            (2, v(0, 5, 0xf_0000_0000, 0xa, 0x17, Following)),
            (4, v(1, 5, 0xf_0000_0000, 0xa, 0x18, Following)),
            (5, v(1, 5, 0xf_0000_0000, 0xa, 0x18, Leading)),
        ];
        assert!(quorum(&votes, v(1, 5, 0xf_0000_0000, 0xa, 0x18, Leading)));
        assert!(!quorum(
            &votes[2..],
            v(1, 5, 0xf_0000_0000, 0xa, 0x18, Leading)
        ));
    }
}
