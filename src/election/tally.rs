//! The votes a server holds, Java's `recvset` and `outofelection`: one vote per sid, and who
//! agrees with a vote by Java's `Vote.equals` ([`Vote::java_eq`]). The election and the story
//! of a capture count votes with this one type, so both decide by the same rule.
//!
//! A server holds one vote per voter, a handful: those are kept in a small list and matched
//! by scanning it. Past [`SMALL_VOTES`] (a crafted capture, thousands of sids) the tally
//! moves to maps with counts kept as votes change, so a large tally costs the same per
//! message. The counts follow `java_eq` exactly: a LOOKING target matches votes equal in
//! leader, zxid, round and peer epoch; a FOLLOWING/LEADING one matches LOOKING votes that
//! way, and decided votes by leader, and by peer epoch too when both or neither have a
//! version (ZOOKEEPER-1805/1732).

use std::collections::{BTreeSet, HashMap};

use super::Vote;
use crate::wire::ServerState;

/// Votes held in the small list before a [`Tally`] switches to maps.
pub const SMALL_VOTES: usize = 16;

/// One vote per sid, counted by [`Vote::java_eq`].
#[derive(Debug, Default, Clone)]
pub struct Tally {
    small: Vec<(i64, Vote)>,
    big: Option<Box<Counted>>,
}

/// A large [`Tally`]: the votes, and counts kept as they change.
#[derive(Debug, Default, Clone)]
struct Counted {
    votes: HashMap<i64, Vote>,
    /// By leader, zxid, round and peer epoch: every vote, and the LOOKING ones.
    full: HashMap<(i64, i64, i64, i64), (u32, u32)>,
    /// FOLLOWING/LEADING votes by leader and whether they have a version.
    decided: HashMap<(i64, bool), u32>,
    /// FOLLOWING/LEADING votes by leader, peer epoch and whether they have a version.
    decided_epoch: HashMap<(i64, i64, bool), u32>,
}

fn full_key(v: &Vote) -> (i64, i64, i64, i64) {
    (v.leader, v.zxid, v.election_epoch, v.peer_epoch)
}

fn looking(v: &Vote) -> bool {
    v.state == ServerState::Looking
}

fn dec<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u32>, key: K) {
    if let Some(c) = map.get_mut(&key) {
        *c -= 1;
        if *c == 0 {
            map.remove(&key);
        }
    }
}

impl Counted {
    fn count(&mut self, v: &Vote, add: bool) {
        let looking = looking(v);
        let key = full_key(v);
        if add {
            let c = self.full.entry(key).or_default();
            c.0 += 1;
            c.1 += u32::from(looking);
        } else if let Some(c) = self.full.get_mut(&key) {
            c.0 -= 1;
            c.1 -= u32::from(looking);
            if c.0 == 0 {
                self.full.remove(&key);
            }
        }
        if !looking {
            let versioned = v.version > 0;
            let by_leader = (v.leader, versioned);
            let by_epoch = (v.leader, v.peer_epoch, versioned);
            if add {
                *self.decided.entry(by_leader).or_default() += 1;
                *self.decided_epoch.entry(by_epoch).or_default() += 1;
            } else {
                dec(&mut self.decided, by_leader);
                dec(&mut self.decided_epoch, by_epoch);
            }
        }
    }

    fn insert(&mut self, sid: i64, vote: Vote) {
        if let Some(old) = self.votes.insert(sid, vote) {
            self.count(&old, false);
        }
        self.count(&vote, true);
    }

    fn matching(&self, target: &Vote) -> usize {
        let (all, looking_only) = self.full.get(&full_key(target)).copied().unwrap_or((0, 0));
        if looking(target) {
            return all as usize;
        }
        let versioned = target.version > 0;
        let other_kind = self
            .decided
            .get(&(target.leader, !versioned))
            .copied()
            .unwrap_or(0);
        let same_kind = self
            .decided_epoch
            .get(&(target.leader, target.peer_epoch, versioned))
            .copied()
            .unwrap_or(0);
        (looking_only + other_kind + same_kind) as usize
    }
}

impl Tally {
    pub fn clear(&mut self) {
        self.small.clear();
        self.big = None;
    }

    /// `sid`'s vote, replacing the one it had.
    pub fn insert(&mut self, sid: i64, vote: Vote) {
        if let Some(big) = &mut self.big {
            return big.insert(sid, vote);
        }
        match self.small.iter_mut().find(|e| e.0 == sid) {
            Some(e) => e.1 = vote,
            None => self.small.push((sid, vote)),
        }
        if self.small.len() > SMALL_VOTES {
            let mut big = Box::<Counted>::default();
            for (sid, vote) in self.small.drain(..) {
                big.insert(sid, vote);
            }
            self.big = Some(big);
        }
    }

    pub fn get(&self, sid: i64) -> Option<&Vote> {
        match &self.big {
            Some(big) => big.votes.get(&sid),
            None => self.small.iter().find(|e| e.0 == sid).map(|e| &e.1),
        }
    }

    /// Every vote held: (sid, vote).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (i64, &Vote)> + '_> {
        match &self.big {
            Some(big) => Box::new(big.votes.iter().map(|(k, v)| (*k, v))),
            None => Box::new(self.small.iter().map(|(k, v)| (*k, v))),
        }
    }

    /// How many votes `target` matches by [`Vote::java_eq`].
    pub fn matching(&self, target: &Vote) -> usize {
        match &self.big {
            Some(big) => big.matching(target),
            None => self.small.iter().filter(|e| target.java_eq(&e.1)).count(),
        }
    }

    /// The sids whose votes `target` matches (for a quorum that weighs who they are).
    pub fn matching_sids(&self, target: &Vote) -> BTreeSet<i64> {
        self.iter()
            .filter(|(_, v)| target.java_eq(v))
            .map(|(sid, _)| sid)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vote(leader: i64, zxid: i64, round: i64, peer_epoch: i64, state: u8, version: i32) -> Vote {
        Vote {
            leader,
            zxid,
            election_epoch: round,
            peer_epoch,
            state: match state % 3 {
                0 => ServerState::Looking,
                1 => ServerState::Following,
                _ => ServerState::Leading,
            },
            version,
        }
    }

    fn small_vote() -> impl Strategy<Value = Vote> {
        (
            0i64..3,
            0i64..2,
            0i64..2,
            0i64..2,
            0u8..3,
            prop_oneof![Just(0), Just(2)],
        )
            .prop_map(|(l, z, r, e, s, v)| vote(l, z, r, e, s, v))
    }

    proptest! {
        /// Counted or scanned, a tally matches what Java's `Vote.equals` matches, also
        /// after votes are replaced, past the switch to maps.
        #[test]
        fn matches_java_equality(
            inserts in proptest::collection::vec((0i64..40, small_vote()), 0..120),
            targets in proptest::collection::vec(small_vote(), 1..8),
        ) {
            let mut tally = Tally::default();
            let mut naive: HashMap<i64, Vote> = HashMap::new();
            for (sid, v) in inserts {
                tally.insert(sid, v);
                naive.insert(sid, v);
                for t in &targets {
                    let expected: BTreeSet<i64> = naive
                        .iter()
                        .filter(|(_, v)| t.java_eq(v))
                        .map(|(s, _)| *s)
                        .collect();
                    prop_assert_eq!(tally.matching(t), expected.len());
                    prop_assert_eq!(tally.matching_sids(t), expected);
                }
            }
        }
    }

    #[test]
    fn a_decided_vote_matches_by_leader_across_versions_and_by_epoch_within_one() {
        let mut t = Tally::default();
        t.insert(1, vote(3, 5, 1, 1, 1, 0));
        t.insert(2, vote(3, 6, 2, 2, 1, 2));
        // A current (versioned) FOLLOWING target: sid 1 (no version) by leader alone, sid 2
        // (versioned) only with its peer epoch.
        assert_eq!(t.matching(&vote(3, 0, 0, 1, 1, 2)), 1);
        assert_eq!(t.matching(&vote(3, 0, 0, 2, 1, 2)), 2);
        // A LOOKING target: every field.
        assert_eq!(t.matching(&vote(3, 5, 1, 1, 0, 0)), 1);
    }
}
