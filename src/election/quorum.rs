//! Quorum verifiers (reference D, "Quorum functions"): who votes, how much a vote weighs, and
//! which sets of sids make a quorum. Built from the [`QuorumConfig`] a server runs with.
//!
//! - Majority (`QuorumMaj`): voters are the participants; a quorum is more than half of them;
//!   every sid weighs 1.
//! - Hierarchical (`QuorumHierarchical`), chosen when the config has `group.`/`weight.` lines:
//!   voters are still the participants, each must be in exactly one group, weights default to 1
//!   for participants. A group is satisfied when its acked weight is more than half its weight
//!   (integer division); a quorum needs more than half of the groups of non-zero weight.

use std::collections::{BTreeMap, BTreeSet};

use crate::wire::QuorumConfig;
use crate::wire::config::ConfigLine;

/// Why a config cannot back a verifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuorumError {
    /// Hierarchical: a participant in no `group.` line.
    #[error("server {0} is not in a group")]
    NotInGroup(i64),
    /// Hierarchical: a sid in two `group.` lines.
    #[error("server {0} is in multiple groups")]
    MultipleGroups(i64),
    /// A notification to every voter carries the whole config: too many voters times too
    /// long a text (a peer's config of 10,000 members in 460 KB would take gigabytes).
    #[error(
        "the config names {voters} voters in {bytes} bytes: a notification to each would take {} bytes, more than {MAX_FANOUT_BYTES}",
        .voters * .bytes
    )]
    TooLarge {
        /// Its voting members.
        voters: usize,
        /// The length of its text.
        bytes: usize,
    },
}

/// The most bytes one round of notifications (one to each voter, each with the config) may
/// take. Real ensembles are far below it (100 voters and a 5 KB config take 500 KB).
pub const MAX_FANOUT_BYTES: usize = 32 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Majority,
    Hierarchical {
        /// sid -> group id.
        group_of: BTreeMap<i64, i64>,
        /// sid -> weight (participants default to 1; other sids only when configured).
        weight: BTreeMap<i64, i64>,
        /// group id -> summed weight of its members.
        group_weight: BTreeMap<i64, i64>,
        /// Number of `group.` lines minus groups of weight 0.
        num_groups: i64,
    },
}

/// A quorum verifier over one config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVerifier {
    config: QuorumConfig,
    text: String,
    voters: BTreeSet<i64>,
    observers: BTreeSet<i64>,
    kind: Kind,
}

impl QuorumVerifier {
    /// A majority verifier, or a hierarchical one when the config has `group.` or `weight.`
    /// lines.
    pub fn from_config(config: &QuorumConfig) -> Result<Self, QuorumError> {
        let mut voters = BTreeSet::new();
        let mut observers = BTreeSet::new();
        for s in config.servers() {
            match s.role() {
                crate::wire::Role::Participant => voters.insert(s.id),
                crate::wire::Role::Observer => observers.insert(s.id),
            };
        }
        let hierarchical = config
            .lines
            .iter()
            .any(|l| matches!(l, ConfigLine::Group { .. } | ConfigLine::Weight { .. }));
        let kind = if !hierarchical {
            Kind::Majority
        } else {
            let mut group_of = BTreeMap::new();
            let mut weight = BTreeMap::new();
            let mut num_groups = 0i64;
            for line in &config.lines {
                match line {
                    ConfigLine::Group { id, members } => {
                        num_groups += 1;
                        for &sid in members {
                            if group_of.insert(sid, *id).is_some() {
                                return Err(QuorumError::MultipleGroups(sid));
                            }
                        }
                    }
                    ConfigLine::Weight { id, weight: w } => {
                        weight.insert(*id, *w);
                    }
                    _ => {}
                }
            }
            for &sid in &voters {
                if !group_of.contains_key(&sid) {
                    return Err(QuorumError::NotInGroup(sid));
                }
                weight.entry(sid).or_insert(1);
            }
            let mut group_weight = BTreeMap::new();
            for (sid, gid) in &group_of {
                // Java unboxes a missing weight here; a grouped non-participant without a
                // weight line counts 0. Java's long sums wrap, and so do these: a peer's
                // config with weights near i64::MAX is Java's to judge, not a reason to stop.
                let sum = group_weight.entry(*gid).or_insert(0i64);
                *sum = sum.wrapping_add(weight.get(sid).copied().unwrap_or(0));
            }
            num_groups -= group_weight.values().filter(|&&w| w == 0).count() as i64;
            Kind::Hierarchical {
                group_of,
                weight,
                group_weight,
                num_groups,
            }
        };
        let text = config.to_string();
        if voters.len().saturating_mul(text.len()) > MAX_FANOUT_BYTES {
            return Err(QuorumError::TooLarge {
                voters: voters.len(),
                bytes: text.len(),
            });
        }
        Ok(QuorumVerifier {
            text,
            config: config.clone(),
            voters,
            observers,
            kind,
        })
    }

    /// A majority verifier for these participants and observers on made-up local addresses
    /// (for tests and simulations).
    pub fn majority(voters: &[i64], observers: &[i64]) -> Self {
        let text = synthetic_text(voters, observers, "");
        let config = QuorumConfig::parse(&text).expect("synthetic config parses");
        Self::from_config(&config).expect("a majority config always builds")
    }

    /// Whether `sid` is a voting member (a participant).
    pub fn is_voter(&self, sid: i64) -> bool {
        self.voters.contains(&sid)
    }

    /// The voting members, ascending.
    pub fn voters(&self) -> impl Iterator<Item = i64> + '_ {
        self.voters.iter().copied()
    }

    /// The observers, ascending.
    pub fn observers(&self) -> impl Iterator<Item = i64> + '_ {
        self.observers.iter().copied()
    }

    /// A sid's weight: always 1 for majority; the configured weight (participants default to 1)
    /// for hierarchical. An unknown sid weighs 0 under hierarchical (Java throws a
    /// NullPointerException there, see the module docs of `election`).
    pub fn weight(&self, sid: i64) -> i64 {
        match &self.kind {
            Kind::Majority => 1,
            Kind::Hierarchical { weight, .. } => weight.get(&sid).copied().unwrap_or(0),
        }
    }

    /// Whether these sids form a quorum. Callers pass voting members only (as Java's
    /// `SyncedLearnerTracker` does); other sids count for majority and are skipped by
    /// hierarchical.
    pub fn contains_quorum(&self, set: &BTreeSet<i64>) -> bool {
        match &self.kind {
            Kind::Majority => set.len() > self.voters.len() / 2,
            Kind::Hierarchical {
                group_of,
                weight,
                group_weight,
                num_groups,
            } => {
                if set.is_empty() {
                    return false;
                }
                let mut acked: BTreeMap<i64, i64> = BTreeMap::new();
                for sid in set {
                    if let Some(gid) = group_of.get(sid) {
                        let sum = acked.entry(*gid).or_insert(0i64);
                        *sum = sum.wrapping_add(weight.get(sid).copied().unwrap_or(0));
                    }
                }
                let satisfied = acked
                    .iter()
                    .filter(|(gid, w)| **w > group_weight.get(*gid).copied().unwrap_or(0) / 2)
                    .count() as i64;
                satisfied > num_groups / 2
            }
        }
    }

    /// Whether this is a hierarchical verifier.
    pub fn is_hierarchical(&self) -> bool {
        matches!(self.kind, Kind::Hierarchical { .. })
    }

    /// The config version (`version=`).
    pub fn version(&self) -> u64 {
        self.config.version()
    }

    /// The config this verifier was built from.
    pub fn config(&self) -> &QuorumConfig {
        &self.config
    }

    /// The text notifications carry: the config as Java prints it.
    pub fn config_text(&self) -> &str {
        &self.text
    }
}

/// Config text for participants and observers on made-up addresses, plus `extra` lines
/// (`group.`/`weight.`, newline-terminated), then `version=0`.
pub(crate) fn synthetic_text(voters: &[i64], observers: &[i64], extra: &str) -> String {
    let mut text = String::new();
    let mut ids: Vec<(i64, &str)> = voters.iter().map(|&v| (v, "participant")).collect();
    ids.extend(observers.iter().map(|&o| (o, "observer")));
    ids.sort();
    for (id, role) in ids {
        let port = 10000 + 2 * (id.rem_euclid(20000)) as u32;
        text.push_str(&format!(
            "server.{id}=127.0.0.1:{}:{}:{role}\n",
            port,
            port + 1
        ));
    }
    text.push_str(extra);
    text.push_str("version=0");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn majority_counts_participants_only() {
        let q = QuorumVerifier::majority(&[1, 2, 3], &[4]);
        assert!(q.is_voter(1) && !q.is_voter(4) && !q.is_voter(9));
        assert!(!q.contains_quorum(&set(&[1])));
        assert!(q.contains_quorum(&set(&[1, 3])));
        assert_eq!(q.weight(9), 1);
        assert_eq!(q.version(), 0);
        assert!(
            q.config_text()
                .ends_with("server.4=127.0.0.1:10008:10009:observer\nversion=0")
        );
        let q4 = QuorumVerifier::majority(&[1, 2, 3, 4], &[]);
        assert!(!q4.contains_quorum(&set(&[1, 2])));
        assert!(q4.contains_quorum(&set(&[1, 2, 3])));
    }

    /// A peer's config with weights whose sums overflow builds a verifier (the sums wrap, as
    /// Java's longs do) instead of panicking: any peer can send one in a notification.
    #[test]
    fn overflowing_weights_wrap_as_java_longs_do() {
        let max = i64::MAX;
        let extra = format!("group.1=1:2:3\nweight.1={max}\nweight.2={max}\n");
        let text = synthetic_text(&[1, 2, 3], &[], &extra);
        let q = QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap()).unwrap();
        // The group weighs max + max + 1 = 0 (wrapped): a group of weight 0 does not count,
        // so no set is a quorum, as in Java.
        assert!(!q.contains_quorum(&set(&[1, 2, 3])));
        assert!(!q.contains_quorum(&set(&[1, 2])));
    }

    /// A config whose round of notifications would not fit [`MAX_FANOUT_BYTES`] is refused,
    /// so that one peer's notification cannot make the election queue gigabytes.
    #[test]
    fn a_config_too_large_to_send_to_every_voter_is_refused() {
        let voters: Vec<i64> = (1..=10_000).collect();
        let text = synthetic_text(&voters, &[], "");
        let config = QuorumConfig::parse(&text).unwrap();
        let err = QuorumVerifier::from_config(&config).unwrap_err();
        assert!(
            matches!(err, QuorumError::TooLarge { voters: 10_000, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("more than 33554432"), "{err}");
        let voters: Vec<i64> = (1..=255).collect();
        let text = synthetic_text(&voters, &[], "");
        assert!(QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap()).is_ok());
    }

    #[test]
    fn hierarchical_zero_weight_groups() {
        // FLEZeroWeightTest: three groups, only group 1 has weight.
        let extra = "group.1=0:1:2\ngroup.2=3:4:5\ngroup.3=6:7:8\nweight.0=1\nweight.1=1\nweight.2=1\nweight.3=0\nweight.4=0\nweight.5=0\nweight.6=0\nweight.7=0\nweight.8=0\n";
        let text = synthetic_text(&[0, 1, 2, 3, 4, 5, 6, 7, 8], &[], extra);
        let q = QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap()).unwrap();
        assert!(q.is_hierarchical());
        assert_eq!(q.config_text(), text);
        assert_eq!((q.weight(2), q.weight(5), q.weight(99)), (1, 0, 0));
        assert!(q.contains_quorum(&set(&[0, 1])));
        assert!(!q.contains_quorum(&set(&[0, 3, 4, 5, 6, 7, 8])));
        assert!(!q.contains_quorum(&set(&[])));
        // Default weight 1 and two real groups: both must be satisfied (2 > 2/2).
        let text = synthetic_text(&[1, 2, 3, 4], &[], "group.1=1:2\ngroup.2=3:4\n");
        let q = QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap()).unwrap();
        assert!(!q.contains_quorum(&set(&[1, 2])));
        assert!(q.contains_quorum(&set(&[1, 2, 3, 4])));
        assert!(!q.contains_quorum(&set(&[1, 3]))); // 1 is not > 2/2
        let bad = synthetic_text(&[1, 2], &[], "group.1=1\n");
        assert_eq!(
            QuorumVerifier::from_config(&QuorumConfig::parse(&bad).unwrap()),
            Err(QuorumError::NotInGroup(2))
        );
        let bad = synthetic_text(&[1, 2], &[], "group.1=1:2\ngroup.2=2\n");
        assert_eq!(
            QuorumVerifier::from_config(&QuorumConfig::parse(&bad).unwrap()),
            Err(QuorumError::MultipleGroups(2))
        );
    }
}
