//! The nemesis's plan: which faults a schedule injects, on whom and when, drawn from a seed.
//! Pure: the same seed and ensemble size give the same plan (the outcome may differ: the
//! servers' timing is theirs), and the plan names servers by their role when the schedule
//! begins, not by sid, so a replay hits the leader whichever server leads then.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// A server, named by role: `Role(0)` is whoever leads when the schedule begins, `Role(1..)`
/// the others in sid order; `Leader` is whoever leads when the fault starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Role(usize),
    Leader,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `kill -9` of the container; started again at the heal.
    Kill(Target),
    /// `docker pause` (every process frozen, the kernel still answering TCP); unpaused at the
    /// heal.
    Pause(Target),
    /// The server cut off from every other server (both directions); the clients still
    /// reach it.
    Isolate(Target),
    /// These roles on one side, the rest on the other.
    Split(Vec<usize>),
    /// Two sides that cannot reach each other and one server (`bridge`) that reaches both.
    Bridge {
        left: Vec<usize>,
        right: Vec<usize>,
        bridge: usize,
    },
    /// Every server restarted in turn (stop, start, next), once; nothing to heal.
    RollingRestart,
    /// Destructive: the server killed, its data directory (snapshots, txn logs, epochs)
    /// wiped, and started again empty.
    Wipe(Target),
    /// A zkfle voter (the `zkfle`-th of them) misbehaving from inside: the line of its
    /// `--chaos-faults` file ([`crate::net::faults`]); removed at the heal, and the member
    /// started again if it crashed.
    Member { zkfle: usize, fault: String },
}

/// The faults a zkfle voter can inject into itself, as its fault file says them.
pub const MEMBER_FAULTS: &[&str] = &[
    "crash-before-ack",
    "crash-after-newleader-ack",
    "drop-votes 500",
    "delay-votes 400",
    "slow-read 200",
];

/// One fault and its window, in seconds since the schedule began.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub at: f64,
    pub heal_at: f64,
    pub fault: Fault,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub seed: u64,
    pub steps: Vec<Step>,
}

impl Target {
    pub fn describe(self) -> String {
        match self {
            Target::Leader => "the leader".into(),
            Target::Role(0) => "the first leader".into(),
            Target::Role(i) => format!("follower {i}"),
        }
    }
}

fn roles(list: &[usize]) -> String {
    list.iter()
        .map(|&r| Target::Role(r).describe())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Fault {
    /// One line: "kill -9 the leader".
    pub fn describe(&self) -> String {
        match self {
            Fault::Kill(t) => format!("kill -9 {}", t.describe()),
            Fault::Pause(t) => format!("pause {}", t.describe()),
            Fault::Isolate(t) => format!("isolate {}", t.describe()),
            Fault::Split(side) => format!("split {} from the rest", roles(side)),
            Fault::Bridge {
                left,
                right,
                bridge,
            } => format!(
                "bridge: {} | {} apart, {} sees both",
                roles(left),
                roles(right),
                Target::Role(*bridge).describe()
            ),
            Fault::RollingRestart => "restart every server in turn".into(),
            Fault::Wipe(t) => format!("wipe the data of {} (destructive)", t.describe()),
            Fault::Member { zkfle, fault } => format!("zkfle voter {zkfle}: {fault}"),
        }
    }

    /// A short name for counts ("kill", "pause", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Kill(_) => "kill",
            Fault::Pause(_) => "pause",
            Fault::Isolate(_) => "isolate",
            Fault::Split(_) => "split",
            Fault::Bridge { .. } => "bridge",
            Fault::RollingRestart => "rolling-restart",
            Fault::Wipe(_) => "wipe",
            Fault::Member { .. } => "member",
        }
    }
}

impl Step {
    pub fn describe(&self) -> String {
        format!(
            "{:>5.1}s-{:>5.1}s  {}",
            self.at,
            self.heal_at,
            self.fault.describe()
        )
    }
}

/// A plan of one to three faults for `voters` servers, `zkfle_voters` of them zkfle, within
/// `window` seconds (each healed at least 2 s before the window ends). Wipes only when
/// `destructive`; a zkfle voter's own faults only when there is one.
pub fn plan(seed: u64, voters: usize, zkfle_voters: usize, window: f64, destructive: bool) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let window = window.max(8.0);
    let count = rng.random_range(1..=3usize);
    let mut steps = Vec::with_capacity(count);
    for _ in 0..count {
        let at = 1.0 + rng.random_range(0.0..(window * 0.5));
        let latest = (window - 2.0).max(at + 1.0);
        let heal_at = (at + rng.random_range(2.0..8.0)).min(latest);
        let target = |rng: &mut StdRng| {
            if rng.random_bool(0.5) {
                Target::Leader
            } else {
                Target::Role(rng.random_range(0..voters))
            }
        };
        // Kinds 0-5 always; 6 a zkfle voter's own fault when there is one; 7 a wipe.
        let kind = loop {
            let k = rng.random_range(0..8);
            if (k != 6 || zkfle_voters > 0) && (k != 7 || destructive) {
                break k;
            }
        };
        let fault = match kind {
            0 => Fault::Kill(target(&mut rng)),
            1 => Fault::Pause(target(&mut rng)),
            2 => Fault::Isolate(target(&mut rng)),
            3 => {
                let mut all: Vec<usize> = (0..voters).collect();
                shuffle(&mut rng, &mut all);
                // A strict minority: one server of three, one or two of five.
                let minority = rng.random_range(1..=((voters - 1) / 2).max(1));
                let mut side: Vec<usize> = all[..minority].to_vec();
                side.sort_unstable();
                Fault::Split(side)
            }
            4 if voters >= 3 => {
                let mut all: Vec<usize> = (0..voters).collect();
                shuffle(&mut rng, &mut all);
                let bridge = all[0];
                let rest = &all[1..];
                let cut = rest.len() / 2;
                let (mut left, mut right) = (rest[..cut].to_vec(), rest[cut..].to_vec());
                left.sort_unstable();
                right.sort_unstable();
                Fault::Bridge {
                    left,
                    right,
                    bridge,
                }
            }
            4 | 5 => Fault::RollingRestart,
            6 => Fault::Member {
                zkfle: rng.random_range(0..zkfle_voters.max(1)),
                fault: MEMBER_FAULTS[rng.random_range(0..MEMBER_FAULTS.len())].to_string(),
            },
            _ => Fault::Wipe(target(&mut rng)),
        };
        steps.push(Step { at, heal_at, fault });
    }
    steps.sort_by(|a, b| a.at.total_cmp(&b.at));
    Plan { seed, steps }
}

/// The composed disk-loss schedule (issue 46's): cut off follower 2, let writes reach the
/// leader and follower 1, kill the leader, wipe follower 1, heal: follower 1 (empty) and
/// follower 2 (stale) form a quorum without the writes. Needs three voters or more.
pub fn disk_loss(seed: u64, window: f64) -> Plan {
    let window = window.max(16.0);
    Plan {
        seed,
        steps: vec![
            Step {
                at: 1.0,
                heal_at: window - 4.0,
                fault: Fault::Isolate(Target::Role(2)),
            },
            Step {
                at: window * 0.4,
                heal_at: window,
                fault: Fault::Kill(Target::Role(0)),
            },
            Step {
                at: window * 0.4 + 1.0,
                heal_at: window * 0.4 + 1.0,
                fault: Fault::Wipe(Target::Role(1)),
            },
        ],
    }
}

fn shuffle(rng: &mut StdRng, list: &mut [usize]) {
    for i in (1..list.len()).rev() {
        list.swap(i, rng.random_range(0..=i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_plan() {
        for seed in 0..200 {
            let a = plan(seed, 5, 0, 30.0, false);
            assert_eq!(a, plan(seed, 5, 0, 30.0, false));
            assert!((1..=3).contains(&a.steps.len()));
            for s in &a.steps {
                assert!(
                    s.at >= 1.0 && s.heal_at >= s.at && s.heal_at <= 28.0,
                    "{s:?}"
                );
                assert!(
                    !matches!(s.fault, Fault::Wipe(_) | Fault::Member { .. }),
                    "{s:?}"
                );
                match &s.fault {
                    Fault::Split(side) => assert!(!side.is_empty() && side.len() < 5),
                    Fault::Bridge { left, right, .. } => {
                        assert_eq!(left.len() + right.len(), 4)
                    }
                    Fault::Kill(Target::Role(r)) | Fault::Pause(Target::Role(r)) => {
                        assert!(*r < 5)
                    }
                    _ => {}
                }
            }
        }
        let kinds: std::collections::BTreeSet<&str> = (0..200)
            .flat_map(|s| plan(s, 3, 1, 30.0, true).steps)
            .map(|s| s.fault.kind())
            .collect();
        assert_eq!(kinds.len(), 8, "{kinds:?}");
    }
}
