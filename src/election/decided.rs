//! What a decided node does when Zab is not running (docs/join.md), sans-I/O: the rules that
//! send a FOLLOWING or LEADING node back to LOOKING. The driver feeds it the notifications it
//! receives and asks it, on every tick, whether the decision still stands; the answer says why
//! not, and whether to dial the leader.
//!
//! - Leader or a quorum of voters LOOKING in a newer round: they have moved on without us.
//! - LEADING without Zab: nobody can sync with us; after `initLimit * tickTime` we step down,
//!   as a Java leader without a quorum of synced followers does.
//! - FOLLOWING (or OBSERVING) with the election connection to the leader down for
//!   `tickTime * syncLimit` (a Java follower's read time-out on its leader): look again.

use std::collections::BTreeMap;
use std::fmt;

use super::quorum::QuorumVerifier;
use crate::wire::{Notification, ServerState};

/// The time limits of the rules, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A follower whose connection to its leader stays down this long looks again.
    pub leader_gone_ms: u64,
    /// A leader nobody syncs with steps down after this long.
    pub leader_sync_ms: u64,
}

/// Why a decided node looks for a leader again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    LeaderLookingNewer { leader: i64 },
    QuorumLookingNewer { voters: Vec<i64> },
    NoFollowerSynced { limit_ms: u64 },
    LeaderUnreachable { leader: i64, down_ms: u64 },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::LeaderLookingNewer { leader } => {
                write!(f, "leader {leader} is LOOKING in a newer round")
            }
            Why::QuorumLookingNewer { voters } => {
                let list: Vec<String> = voters.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "a quorum of voters ({}) is LOOKING in a newer round",
                    list.join(", ")
                )
            }
            Why::NoFollowerSynced { limit_ms } => write!(
                f,
                "no follower synced within initLimit*tickTime = {limit_ms} ms"
            ),
            Why::LeaderUnreachable { leader, down_ms } => write!(
                f,
                "the election connection to leader {leader} has been down for {down_ms} ms"
            ),
        }
    }
}

/// What the driver does after a check.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Check {
    /// The election connection to the leader is down: dial it.
    pub dial_leader: bool,
    /// The decision no longer stands: start a new election.
    pub look_again: Option<Why>,
}

/// The state the rules keep between a decision and the next election.
#[derive(Debug, Clone)]
pub struct AfterDecision {
    limits: Limits,
    decided_at: u64,
    leader_down_since: Option<u64>,
    /// Voters whose latest notification, since the decision, is LOOKING in a newer round.
    newer_looking: BTreeMap<i64, i64>,
}

impl AfterDecision {
    pub fn new(limits: Limits) -> Self {
        AfterDecision {
            limits,
            decided_at: 0,
            leader_down_since: None,
            newer_looking: BTreeMap::new(),
        }
    }

    /// A new election starts: forget what the last decision saw.
    pub fn reset(&mut self) {
        self.leader_down_since = None;
        self.newer_looking.clear();
    }

    /// The node decided at `now`.
    pub fn decided(&mut self, now: u64) {
        self.decided_at = now;
    }

    /// A notification from voter `from`, received while decided with logical clock `my_round`.
    pub fn on_notification(&mut self, from: i64, n: &Notification, my_round: i64) {
        if n.state == ServerState::Looking && n.election_epoch > my_round {
            self.newer_looking.insert(from, n.election_epoch);
        } else {
            self.newer_looking.remove(&from);
        }
    }

    /// Whether the decision (`state`, backing `leader`) still stands at `now`;
    /// `leader_connected`: whether the election connection to the leader is up.
    pub fn check(
        &mut self,
        now: u64,
        state: ServerState,
        leader: i64,
        leader_connected: bool,
        quorum: &QuorumVerifier,
    ) -> Check {
        let mut check = Check::default();
        check.look_again = if self.newer_looking.contains_key(&leader) {
            Some(Why::LeaderLookingNewer { leader })
        } else if !self.newer_looking.is_empty()
            && quorum.contains_quorum(&self.newer_looking.keys().copied().collect())
        {
            Some(Why::QuorumLookingNewer {
                voters: self.newer_looking.keys().copied().collect(),
            })
        } else if state == ServerState::Leading
            && now.saturating_sub(self.decided_at) >= self.limits.leader_sync_ms
        {
            Some(Why::NoFollowerSynced {
                limit_ms: self.limits.leader_sync_ms,
            })
        } else if state != ServerState::Leading {
            if leader_connected {
                self.leader_down_since = None;
                None
            } else {
                let since = *self.leader_down_since.get_or_insert(now);
                check.dial_leader = true;
                (now.saturating_sub(since) >= self.limits.leader_gone_ms).then(|| {
                    Why::LeaderUnreachable {
                        leader,
                        down_ms: now - since,
                    }
                })
            }
        } else {
            None
        };
        check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::QuorumConfig;

    const LIMITS: Limits = Limits {
        leader_gone_ms: 2000,
        leader_sync_ms: 10_000,
    };

    fn three() -> QuorumVerifier {
        let text = "server.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2\nversion=0";
        QuorumVerifier::from_config(&QuorumConfig::parse(text).unwrap()).unwrap()
    }

    fn looking(round: i64) -> Notification {
        Notification::current(ServerState::Looking, 1, 0, round, 0, Vec::new())
    }

    #[test]
    fn a_leader_looking_in_a_newer_round_ends_the_decision() {
        let mut a = AfterDecision::new(LIMITS);
        a.decided(100);
        // The same round is not newer.
        a.on_notification(2, &looking(5), 5);
        let c = a.check(200, ServerState::Following, 2, true, &three());
        assert_eq!(c, Check::default());
        a.on_notification(2, &looking(6), 5);
        let c = a.check(200, ServerState::Following, 2, true, &three());
        assert_eq!(c.look_again, Some(Why::LeaderLookingNewer { leader: 2 }));
        // A later notification of its that is not LOOKING clears it.
        let following = Notification::current(ServerState::Following, 3, 0, 6, 0, Vec::new());
        a.on_notification(2, &following, 5);
        assert_eq!(
            a.check(200, ServerState::Following, 2, true, &three())
                .look_again,
            None
        );
    }

    #[test]
    fn a_quorum_looking_newer_ends_even_a_leaders_decision() {
        let mut a = AfterDecision::new(LIMITS);
        a.decided(0);
        a.on_notification(2, &looking(9), 5);
        assert_eq!(
            a.check(1, ServerState::Leading, 1, true, &three())
                .look_again,
            None
        );
        a.on_notification(3, &looking(9), 5);
        let why = a
            .check(1, ServerState::Leading, 1, true, &three())
            .look_again;
        assert_eq!(why, Some(Why::QuorumLookingNewer { voters: vec![2, 3] }));
        assert_eq!(
            why.unwrap().to_string(),
            "a quorum of voters (2, 3) is LOOKING in a newer round"
        );
    }

    #[test]
    fn a_leader_without_zab_steps_down_after_init_limit() {
        let mut a = AfterDecision::new(LIMITS);
        a.decided(1000);
        assert_eq!(
            a.check(10_999, ServerState::Leading, 1, false, &three()),
            Check::default()
        );
        let c = a.check(11_000, ServerState::Leading, 1, false, &three());
        assert_eq!(
            c.look_again,
            Some(Why::NoFollowerSynced { limit_ms: 10_000 })
        );
        assert!(!c.dial_leader, "a leader dials nobody");
    }

    #[test]
    fn a_follower_dials_its_leader_and_gives_up_after_the_limit() {
        let mut a = AfterDecision::new(LIMITS);
        a.decided(0);
        let c = a.check(100, ServerState::Following, 2, false, &three());
        assert_eq!((c.dial_leader, c.look_again), (true, None));
        // Back up: the clock restarts.
        assert_eq!(
            a.check(1000, ServerState::Following, 2, true, &three()),
            Check::default()
        );
        assert!(
            a.check(1100, ServerState::Following, 2, false, &three())
                .look_again
                .is_none()
        );
        let c = a.check(3100, ServerState::Following, 2, false, &three());
        assert_eq!(
            c.look_again,
            Some(Why::LeaderUnreachable {
                leader: 2,
                down_ms: 2000
            })
        );
        assert!(c.dial_leader);
        // A new election forgets the outage.
        a.reset();
        assert!(
            a.check(3200, ServerState::Following, 2, false, &three())
                .look_again
                .is_none()
        );
    }
}
