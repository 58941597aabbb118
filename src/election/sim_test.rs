//! Several machines wired through a deterministic virtual network (seeded delays, reordering
//! and drops, every message through the codec both ways).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use proptest::prelude::*;

use crate::wire::{Notification, Role, ServerState};

use super::{Election, ElectionConfig, Output, QuorumVerifier};

/// initLimit x tickTime of the simulated ensemble (10 x 2000 ms, Java's usual).
const INIT_LIMIT_MS: u64 = 20_000;

/// How long a follower tries to reach its leader's quorum port before looking again.
const FOLLOWER_CONNECT_MS: u64 = 1_000;

/// (deliver at, sequence, from, to, payload).
type InFlight = (u64, u64, i64, i64, Vec<u8>);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

struct Params {
    voters: usize,
    observers: usize,
    max_delay: u64,
    drop_percent: u64,
    start_spread: u64,
    /// Start the highest voter this late (a joiner), if set.
    late_start: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decision {
    state: ServerState,
    leader: i64,
    lc: i64,
}

fn simulate(seed: u64, p: &Params) -> BTreeMap<i64, Decision> {
    let mut rng = Rng(seed);
    let voters: Vec<i64> = (0..p.voters as i64).collect();
    let observers: Vec<i64> = (0..p.observers as i64).map(|i| 100 + i).collect();
    let q = QuorumVerifier::majority(&voters, &observers);
    let mut nodes: BTreeMap<i64, Election> = BTreeMap::new();
    let mut starts: Vec<(u64, i64)> = Vec::new();
    for &id in voters.iter().chain(&observers) {
        let mut cfg = ElectionConfig::new(id, q.clone());
        if id >= 100 {
            cfg.role = Role::Observer;
        }
        nodes.insert(id, Election::new(cfg));
        let late = p.late_start.filter(|_| id == p.voters as i64 - 1);
        starts.push((late.unwrap_or_else(|| rng.below(p.start_spread + 1)), id));
    }
    starts.sort();
    let mut timers: BTreeMap<i64, u64> = BTreeMap::new();
    // (deliver at, seq) -> (from, to, bytes)
    let mut net: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut decided: BTreeMap<i64, Decision> = BTreeMap::new();
    let mut now = 0u64;
    let mut next_start = 0usize;
    let limit = 600_000;
    // Zab, reduced to what the election needs: a leader that has not gathered a quorum of
    // followers within initLimit x tickTime gives up, and its followers with it; all of them
    // look again in a new round (as QuorumPeer does when Zab fails).
    let mut zab_checks: BTreeMap<i64, u64> = BTreeMap::new();
    // And a follower (or observer) whose leader is not leading cannot connect to it, and looks
    // again soon (Java gives up after a few connection attempts).
    let mut follow_checks: BTreeMap<i64, u64> = BTreeMap::new();
    while (decided.len() < nodes.len() || !zab_checks.is_empty() || !follow_checks.is_empty())
        && now < limit
    {
        // The next event: a start, a delivery, a timer or a leader's sync deadline.
        let t_start = starts.get(next_start).map(|s| s.0);
        let t_net = net.peek().map(|Reverse(m)| m.0);
        let t_timer = timers.values().min().copied();
        let t_zab = zab_checks.values().min().copied();
        let t_follow = follow_checks.values().min().copied();
        let Some(t) = [t_start, t_net, t_timer, t_zab, t_follow]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        now = t;
        let mut touched = Vec::new();
        if t_follow == Some(t) {
            let (&id, _) = follow_checks.iter().find(|(_, d)| **d == t).unwrap();
            follow_checks.remove(&id);
            let leader = decided.get(&id).map(|d| d.leader);
            let leading = leader
                .and_then(|l| decided.get(&l))
                .is_some_and(|d| d.state == ServerState::Leading);
            if leader.is_some() && !leading {
                decided.remove(&id);
                nodes.get_mut(&id).unwrap().start(now);
                touched.push(id);
            }
        } else if t_zab == Some(t) {
            let (&leader, _) = zab_checks.iter().find(|(_, d)| **d == t).unwrap();
            zab_checks.remove(&leader);
            let group: Vec<i64> = decided
                .iter()
                .filter(|(_, d)| d.leader == leader && d.state != ServerState::Observing)
                .map(|(id, _)| *id)
                .collect();
            let synced = group
                .iter()
                .filter(|id| q.is_voter(**id))
                .copied()
                .collect();
            if !q.contains_quorum(&synced) {
                for id in decided
                    .iter()
                    .filter(|(_, d)| d.leader == leader)
                    .map(|(id, _)| *id)
                    .collect::<Vec<_>>()
                {
                    decided.remove(&id);
                    nodes.get_mut(&id).unwrap().start(now);
                    touched.push(id);
                }
            }
        } else if t_start == Some(t) {
            let id = starts[next_start].1;
            next_start += 1;
            nodes.get_mut(&id).unwrap().start(now);
            touched.push(id);
        } else if t_net == Some(t) {
            let Reverse((_, _, from, to, bytes)) = net.pop().unwrap();
            let n = Notification::decode(&bytes).expect("we send decodable notifications");
            nodes.get_mut(&to).unwrap().on_notification(now, from, &n);
            touched.push(to);
        } else {
            let (&id, _) = timers.iter().find(|(_, d)| **d == t).unwrap();
            timers.remove(&id);
            nodes.get_mut(&id).unwrap().on_timer(now, true);
            touched.push(id);
        }
        for id in touched {
            let node = nodes.get_mut(&id).unwrap();
            for o in node.take_outputs() {
                match o {
                    Output::Send { to, notification } => {
                        assert_ne!(to, id, "loopback must stay inside");
                        if rng.below(100) < p.drop_percent {
                            continue;
                        }
                        let at = now + 1 + rng.below(p.max_delay);
                        seq += 1;
                        net.push(Reverse((at, seq, id, to, notification.encode().unwrap())));
                    }
                    Output::NewConfig { .. } | Output::Network(_) => {
                        unreachable!("every node runs under one config here")
                    }
                    Output::Decided { state, vote, lc } => {
                        assert_eq!(state, node.state());
                        let d = Decision {
                            state,
                            leader: vote.leader,
                            lc,
                        };
                        assert!(decided.insert(id, d).is_none(), "{id} decided twice");
                        if state == ServerState::Leading {
                            zab_checks.insert(id, now + INIT_LIMIT_MS);
                        } else {
                            follow_checks.insert(id, now + FOLLOWER_CONNECT_MS);
                        }
                    }
                }
            }
            // The one timer each machine wants, asked as quinn's `poll_timeout` is.
            match node.next_deadline() {
                Some(at) => timers.insert(id, at),
                None => timers.remove(&id),
            };
        }
    }
    decided
}

fn check_agreement(p: &Params, decided: &BTreeMap<i64, Decision>, expect_leader: Option<i64>) {
    let total = p.voters + p.observers;
    assert_eq!(decided.len(), total, "not everyone decided: {decided:?}");
    let leaders: Vec<i64> = decided
        .iter()
        .filter(|(_, d)| d.state == ServerState::Leading)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(leaders.len(), 1, "exactly one LEADING: {decided:?}");
    let leader = leaders[0];
    if let Some(want) = expect_leader {
        assert_eq!(leader, want, "{decided:?}");
    }
    for (id, d) in decided {
        assert_eq!(d.leader, leader, "{id} disagrees: {decided:?}");
        let want = if *id == leader {
            ServerState::Leading
        } else if *id >= 100 {
            ServerState::Observing
        } else {
            ServerState::Following
        };
        assert_eq!(d.state, want, "{id}: {decided:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Delays below finalizeWait, starts within 50 ms, no loss: everyone agrees on the highest
    /// sid (equal zxids and epochs), exactly one LEADING, observers OBSERVING.
    #[test]
    fn prompt_network_elects_the_highest_sid(seed in any::<u64>(), voters in 1usize..=7, observers in 0usize..=2) {
        let p = Params { voters, observers, max_delay: 150, drop_percent: 0, start_spread: 50, late_start: None };
        let decided = simulate(seed, &p);
        check_agreement(&p, &decided, Some(voters as i64 - 1));
    }

    /// A lossy, slow network: FLE alone can leave a minority behind a leader that lacks a
    /// quorum (found by this test: seed 7775702969839968049, 4 voters); with Zab's step-down
    /// modelled, every server ends up deciding, all for the same voter.
    #[test]
    fn lossy_network_terminates(seed in any::<u64>(), voters in 3usize..=5) {
        let p = Params { voters, observers: 1, max_delay: 500, drop_percent: 15, start_spread: 300, late_start: None };
        let decided = simulate(seed, &p);
        prop_assert_eq!(decided.len(), voters + 1, "{:?}", decided);
        for d in decided.values() {
            prop_assert!((0..voters as i64).contains(&d.leader), "{:?}", decided);
        }
        check_agreement(&p, &decided, None);
    }

    /// testJoin in simulation: the highest sid starts after the others decided; it follows their
    /// leader and never leads.
    #[test]
    fn late_highest_sid_joins_as_follower(seed in any::<u64>(), voters in 3usize..=7) {
        let p = Params { voters, observers: 0, max_delay: 100, drop_percent: 0, start_spread: 50, late_start: Some(20_000) };
        let decided = simulate(seed, &p);
        check_agreement(&p, &decided, Some(voters as i64 - 2));
    }
}
