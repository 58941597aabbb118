//! Dynamic reconfiguration, sans-I/O: what activating a new config means for a server, as
//! Java's `QuorumPeer.processReconfig` decides it, and the text of the files Java writes for
//! it (`QuorumPeerConfig.writeDynamicConfig`). The Zab learner ([`crate::zab::Learner`]) and
//! the election ([`crate::election::Election`]) call these; `src/net` writes the files.
//! docs/reconfig.md tells the whole story.

use crate::wire::{ConfigLine, QuorumConfig, Role};

/// What a server is in a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    Participant,
    Observer,
    /// Not listed: Java's "non-voting participant" (it syncs as a follower, never counts,
    /// and votes for nobody).
    NotListed,
}

impl Membership {
    pub fn of(config: &QuorumConfig, sid: i64) -> Membership {
        match config.server(sid).map(|s| s.role()) {
            Some(Role::Participant) => Membership::Participant,
            Some(Role::Observer) => Membership::Observer,
            None => Membership::NotListed,
        }
    }

    /// The learner type Java keeps for it (`updateLearnerType`): an unlisted server is a
    /// participant that does not vote.
    pub fn learner_role(self) -> Role {
        match self {
            Membership::Observer => Role::Observer,
            _ => Role::Participant,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Membership::Participant => "participant",
            Membership::Observer => "observer",
            Membership::NotListed => "not a member",
        }
    }
}

/// Whether two configs have the same members (Java's `QuorumMaj.equals` /
/// `QuorumHierarchical.equals`: the servers with their addresses and roles, and the groups and
/// weights; the version and the order of lines do not matter).
pub fn same_members(a: &QuorumConfig, b: &QuorumConfig) -> bool {
    fn key(c: &QuorumConfig) -> Vec<String> {
        let mut v: Vec<String> = c
            .lines
            .iter()
            .filter(|l| !matches!(l, ConfigLine::Version(_)))
            .map(|l| match l {
                ConfigLine::Server(s) => {
                    let mut s = s.clone();
                    s.role = Some(s.role());
                    s.to_string()
                }
                other => other.to_string(),
            })
            .collect();
        v.sort();
        v
    }
    key(a) == key(b)
}

/// The outcome of [`process_reconfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    /// The config is newer than the current one: it becomes current and is written to disk.
    pub activate: bool,
    /// The membership changed: the election restarts under the new config (new members are
    /// connected, removed ones dropped).
    pub members_changed: bool,
    /// My learner role after it, and whether it changed ("Becoming an observer", ...).
    pub role: Role,
    pub role_changed: bool,
    /// The leader I follow is no longer the one to follow.
    pub leader_changed: bool,
}

impl Activation {
    /// Java's `majorChange`: the Zab session ends (a follower or observer goes back to
    /// LOOKING).
    pub fn major(&self) -> bool {
        self.role_changed || self.leader_changed
    }
}

/// `QuorumPeer.processReconfig(qv, suggestedLeaderId, zxid, restartLE)` for a server `my_id`
/// with learner role `my_role` whose current config is `current` and whose current vote is
/// for `current_leader`. `designated_leader` is COMMITANDACTIVATE's (`None` at UPTODATE and
/// in the election). With reconfig disabled nothing is activated (Java's early return).
pub fn process_reconfig(
    reconfig_enabled: bool,
    current: &QuorumConfig,
    new: &QuorumConfig,
    my_id: i64,
    my_role: Role,
    current_leader: i64,
    designated_leader: Option<i64>,
) -> Activation {
    let unchanged = Activation {
        activate: false,
        members_changed: false,
        role: my_role,
        role_changed: false,
        leader_changed: false,
    };
    // setQuorumVerifier ignores a config that is not newer; processReconfig then sees
    // prevQV == the current one and reports no change.
    if !reconfig_enabled || new.version() <= current.version() {
        return unchanged;
    }
    if same_members(current, new) {
        return Activation {
            activate: true,
            ..unchanged
        };
    }
    let role = Membership::of(new, my_id).learner_role();
    let leader_changed = match designated_leader {
        Some(d) => d != current_leader,
        None => {
            // Without a designated leader: the leader must be a voter of both configs at the
            // same quorum address.
            let addr = |c: &QuorumConfig| {
                c.server(current_leader)
                    .filter(|s| s.role() == Role::Participant)
                    .map(|s| s.addresses.clone())
            };
            match (addr(current), addr(new)) {
                (Some(a), Some(b)) => a
                    .iter()
                    .map(|x| (&x.host, x.quorum_port))
                    .ne(b.iter().map(|x| (&x.host, x.quorum_port))),
                _ => true,
            }
        }
    };
    Activation {
        activate: true,
        members_changed: true,
        role,
        role_changed: role != my_role,
        leader_changed,
    }
}

/// The text of a dynamic config file as `QuorumPeerConfig.writeDynamicConfig` writes it:
/// `key=value` lines sorted as strings, joined by `\n` with no newline at the end; the
/// `version` line only in the `.next` file (`keep_version`), the version being in the file's
/// name otherwise (`zoo.cfg.dynamic.<hex version>`).
pub fn dynamic_config_text(config: &QuorumConfig, keep_version: bool) -> String {
    let mut lines: Vec<String> = config
        .lines
        .iter()
        .filter(|l| keep_version || !matches!(l, ConfigLine::Version(_)))
        .map(ToString::to_string)
        .collect();
    if keep_version
        && !config
            .lines
            .iter()
            .any(|l| matches!(l, ConfigLine::Version(_)))
    {
        lines.push(ConfigLine::Version(config.version()).to_string());
    }
    lines.sort();
    lines.dedup();
    lines.join("\n")
}

/// The version a dynamic config file's name carries (`getVersionFromFilename`: the part after
/// the last `.`, when it reads as hex), else `None` (version 0).
pub fn version_from_filename(name: &str) -> Option<u64> {
    let (_, version) = name.rsplit_once('.')?;
    u64::from_str_radix(version, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> QuorumConfig {
        QuorumConfig::parse(text).unwrap()
    }

    const OLD: &str = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nserver.2=127.0.0.2:2888:3888:participant;127.0.0.2:2181\nserver.3=127.0.0.3:2888:3888:participant;127.0.0.3:2181\nversion=100000000";

    #[test]
    fn adding_me_makes_me_a_voter_without_a_major_change_for_the_same_leader() {
        let old = cfg(OLD);
        let new = cfg(&format!(
            "{}\nserver.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181\nversion=100000004",
            OLD.rsplit_once('\n').unwrap().0
        ));
        let a = process_reconfig(true, &old, &new, 4, Role::Participant, 3, Some(3));
        assert!(a.activate && a.members_changed && !a.major(), "{a:?}");
        // Designated leader differs: major.
        let a = process_reconfig(true, &old, &new, 4, Role::Participant, 3, Some(1));
        assert!(a.leader_changed && a.major());
        // Disabled, or not newer: nothing.
        assert!(!process_reconfig(false, &old, &new, 4, Role::Participant, 3, Some(3)).activate);
        assert!(!process_reconfig(true, &new, &old, 4, Role::Participant, 3, Some(3)).activate);
        // As an observer promoted: a role change.
        let a = process_reconfig(true, &old, &new, 4, Role::Observer, 3, Some(3));
        assert!(a.role_changed && a.role == Role::Participant && a.major());
    }

    #[test]
    fn the_leader_removed_without_designation_is_a_leader_change() {
        let old = cfg(OLD);
        let new = cfg(
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nserver.3=127.0.0.3:2888:3888:participant;127.0.0.3:2181\nversion=100000005",
        );
        let a = process_reconfig(true, &old, &new, 1, Role::Participant, 2, None);
        assert!(a.leader_changed);
        let a = process_reconfig(true, &old, &new, 1, Role::Participant, 3, None);
        assert!(!a.leader_changed && a.members_changed);
        assert_eq!(Membership::of(&new, 2), Membership::NotListed);
        // Same members, other version and order: not a membership change.
        let reordered = cfg(
            "server.3=127.0.0.3:2888:3888:participant;127.0.0.3:2181\nserver.1=127.0.0.1:2888:3888;127.0.0.1:2181\nversion=100000009",
        );
        assert!(same_members(&new, &reordered));
        let a = process_reconfig(true, &new, &reordered, 1, Role::Participant, 3, None);
        assert!(a.activate && !a.members_changed && !a.major());
    }

    /// Removed from the config, a participant stays in its Zab session as a non-voting
    /// participant (Java's updateLearnerType keeps PARTICIPANT) and votes for nobody.
    #[test]
    fn removing_me_is_not_a_major_change() {
        let old = cfg(OLD);
        let new = cfg(
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nserver.3=127.0.0.3:2888:3888:participant;127.0.0.3:2181\nversion=100000005",
        );
        let a = process_reconfig(true, &old, &new, 2, Role::Participant, 3, Some(3));
        assert!(a.activate && a.members_changed && !a.major(), "{a:?}");
        assert_eq!(Membership::of(&new, 2), Membership::NotListed);
        assert_eq!(a.role, Role::Participant);
        // An observer removed becomes a non-voting participant: a role change.
        let a = process_reconfig(true, &old, &new, 2, Role::Observer, 3, Some(3));
        assert!(a.role_changed && a.major());
    }

    #[test]
    fn dynamic_files_as_java_writes_them() {
        let c = cfg(
            "server.2=b:1:2:participant;2181\nserver.10=c:1:2:observer\nserver.1=a:1:2:participant\nversion=100000004",
        );
        assert_eq!(
            dynamic_config_text(&c, false),
            // Sorted as whole lines, as Java's Collections.sort: '0' < '='.
            "server.10=c:1:2:observer\nserver.1=a:1:2:participant\nserver.2=b:1:2:participant;2181"
        );
        assert!(dynamic_config_text(&c, true).ends_with("\nversion=100000004"));
        assert_eq!(
            version_from_filename("zoo.cfg.dynamic.100000004"),
            Some(0x1_0000_0004)
        );
        assert_eq!(version_from_filename("zoo.cfg.dynamic"), None);
        assert_eq!(version_from_filename("zoo.cfg.dynamic.next"), None);
        assert_eq!(version_from_filename("dyn.cfg"), None);
        assert_eq!(version_from_filename("dyn.cafe"), Some(0xcafe));
    }
}
