//! The answers of `zkfle join`'s client port to four-letter words, in Java's formats
//! (`org.apache.zookeeper.server.command.*`, 3.8), so that `zkServer.sh status`, `echo ruok |
//! nc`, `srvr` and `mntr` checks read zkfle as the member it is.
//!
//! zkfle serves no client requests, so what counts requests (latencies, packets, connections,
//! watches) is 0, as on a Java member nobody has connected to. Java's server is "running" for
//! these commands once it serves (synced); before that the commands that need it answer
//! `This ZooKeeper instance is not currently serving requests`, as Java's do.

use std::fmt::Write;

use crate::net::status::MemberStatus;
use crate::wire::ServerState;

/// What Java answers when its server is not running yet.
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// The four-letter words Java knows (`FourLetterCommands.cmd2String`).
pub const KNOWN: &[&str] = &[
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat",
    "wchc", "wchp", "wchs", "mntr", "isro", "hash",
];

/// What a member is, for the answers that describe its setup (`conf`, `envi`, `dirs`).
#[derive(Debug, Clone, Default)]
pub struct MemberSetup {
    pub server_id: i64,
    pub client_port: u16,
    pub data_dir: String,
    pub data_log_dir: String,
    pub tick_time: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
    pub max_client_cnxns: i64,
    pub min_session_timeout: i64,
    pub max_session_timeout: i64,
    pub election_ports: Vec<u16>,
    pub quorum_ports: Vec<u16>,
    /// 0 participant, 1 observer (Java's `LearnerType.ordinal()`).
    pub peer_type: u8,
    /// The membership as Java's `QuorumVerifier.toString()` writes it.
    pub membership: String,
    /// The release line zkfle speaks to the ensemble, for the version line.
    pub speaks: String,
}

impl MemberSetup {
    /// Java's `Version.getFullVersion()` form, which tools parse up to the first `-`:
    /// the release zkfle speaks, then zkfle's own name and version.
    pub fn version(&self) -> String {
        format!(
            "{}-zkfle-{}, built on zkfle",
            self.speaks,
            env!("CARGO_PKG_VERSION")
        )
    }
}

/// Java's `ServerStats.getServerState()` for a quorum member.
pub fn mode(state: ServerState) -> &'static str {
    match state {
        ServerState::Looking => "leaderelection",
        ServerState::Following => "follower",
        ServerState::Leading => "leader",
        ServerState::Observing => "observer",
        _ => "unknown",
    }
}

/// The answer to `cmd` (a whitelisted, known word), Java's bytes.
pub fn answer(cmd: &str, s: &MemberStatus, setup: &MemberSetup, dirs: (u64, u64)) -> String {
    let running = s.synced;
    let mut out = String::new();
    let not_serving = |out: &mut String| {
        out.push_str(NOT_SERVING);
        out.push('\n');
    };
    match cmd {
        "ruok" => out.push_str("imok"),
        "isro" => out.push_str(if running { "rw" } else { "null" }),
        "srvr" | "stat" if !running => not_serving(&mut out),
        "srvr" | "stat" => {
            let _ = writeln!(out, "Zookeeper version: {}", setup.version());
            if cmd == "stat" {
                out.push_str("Clients:\n\n");
            }
            out.push_str("Latency min/avg/max: 0/0.0/0\n");
            out.push_str("Received: 0\nSent: 0\nConnections: 0\nOutstanding: 0\n");
            let _ = writeln!(out, "Zxid: 0x{:x}", s.last_zxid);
            let _ = writeln!(out, "Mode: {}", mode(s.state));
            let _ = writeln!(out, "Node count: {}", s.node_count);
            if s.state == ServerState::Leading {
                out.push_str("Proposal sizes last/min/max: -1/-1/-1\n");
            }
        }
        "mntr" if !running => not_serving(&mut out),
        "mntr" => {
            for (k, v) in monitor_values(s, setup) {
                let _ = writeln!(out, "zk_{k}\t{v}");
            }
        }
        "conf" if !running => not_serving(&mut out),
        "conf" => {
            let ports = |p: &[u16]| p.iter().map(u16::to_string).collect::<Vec<_>>().join("|");
            let _ = writeln!(out, "clientPort={}", setup.client_port);
            out.push_str("secureClientPort=-1\n");
            let _ = writeln!(out, "dataDir={}", setup.data_dir);
            let _ = writeln!(out, "dataDirSize={}", dirs.0);
            let _ = writeln!(out, "dataLogDir={}", setup.data_log_dir);
            let _ = writeln!(out, "dataLogSize={}", dirs.1);
            let _ = writeln!(out, "tickTime={}", setup.tick_time);
            let _ = writeln!(out, "maxClientCnxns={}", setup.max_client_cnxns);
            let _ = writeln!(out, "minSessionTimeout={}", setup.min_session_timeout);
            let _ = writeln!(out, "maxSessionTimeout={}", setup.max_session_timeout);
            out.push_str("clientPortListenBacklog=-1\n");
            let _ = writeln!(out, "serverId={}", setup.server_id);
            let _ = writeln!(out, "initLimit={}", setup.init_limit);
            let _ = writeln!(out, "syncLimit={}", setup.sync_limit);
            out.push_str("electionAlg=3\n");
            let _ = writeln!(out, "electionPort={}", ports(&setup.election_ports));
            let _ = writeln!(out, "quorumPort={}", ports(&setup.quorum_ports));
            let _ = writeln!(out, "peerType={}", setup.peer_type);
            out.push_str("membership: \n");
            out.push_str(&setup.membership);
        }
        "envi" => {
            out.push_str("Environment:\n");
            let _ = writeln!(out, "zookeeper.version={}", setup.version());
            for (k, v) in environment() {
                let _ = writeln!(out, "{k}={v}");
            }
        }
        "dirs" if !running => not_serving(&mut out),
        "dirs" => {
            let _ = writeln!(out, "datadir_size: {}", dirs.0);
            let _ = writeln!(out, "logdir_size: {}", dirs.1);
        }
        "wchs" | "wchc" | "wchp" if !running => not_serving(&mut out),
        "wchs" => out.push_str("0 connections watching 0 paths\nTotal watches:0\n"),
        "wchc" | "wchp" => out.push('\n'),
        "cons" if !running => not_serving(&mut out),
        "cons" => out.push('\n'),
        "crst" if !running => not_serving(&mut out),
        "crst" => out.push_str("Connection stats reset.\n"),
        "srst" if !running => not_serving(&mut out),
        "srst" => out.push_str("Server stats reset.\n"),
        // dump, gtmk, stmk, hash: whitelisted by `*` but nothing zkfle keeps to report.
        _ if !running => not_serving(&mut out),
        _ => out.push('\n'),
    }
    out
}

/// `mntr`'s values that zkfle has: Java's `dumpMonitorValues` and the gauges of its default
/// metrics provider that describe a member (docs/join.md lists what is left out and why).
pub fn monitor_values(s: &MemberStatus, setup: &MemberSetup) -> Vec<(&'static str, String)> {
    let (open_fds, max_fds) = file_descriptors();
    let mut v = vec![
        ("version", setup.version()),
        ("server_state", mode(s.state).to_string()),
        ("avg_latency", "0.0".to_string()),
        ("max_latency", "0".to_string()),
        ("min_latency", "0".to_string()),
        ("packets_received", "0".to_string()),
        ("packets_sent", "0".to_string()),
        ("num_alive_connections", "0".to_string()),
        ("outstanding_requests", "0".to_string()),
        ("znode_count", s.node_count.to_string()),
        ("watch_count", "0".to_string()),
        ("ephemerals_count", s.ephemerals.to_string()),
        ("approximate_data_size", s.data_size.to_string()),
        ("open_file_descriptor_count", open_fds.to_string()),
        ("max_file_descriptor_count", max_fds.to_string()),
        ("uptime", s.started.elapsed().as_millis().to_string()),
        (
            "peer_state",
            format!(
                "{} - {}",
                s.state.name().to_ascii_lowercase(),
                if s.synced {
                    "broadcast"
                } else {
                    "synchronization"
                }
            ),
        ),
    ];
    if s.state == ServerState::Looking {
        v.last_mut().unwrap().1 = "looking".to_string();
    }
    // The gauges Java's LeaderZooKeeperServer and FollowerZooKeeperServer register, in their
    // order. zkfle serves no client, so no SYNC is ever pending; observers never sync from it
    // while it follows (it is no observer master).
    match (s.state, &s.leading) {
        (ServerState::Leading, Some(g)) => {
            let uptime = s.leading_since.map_or(0, |t| t.elapsed().as_millis());
            v.extend([
                ("learners", g.learners.to_string()),
                ("synced_followers", g.synced_followers.to_string()),
                (
                    "synced_non_voting_followers",
                    g.synced_non_voting_followers.to_string(),
                ),
                ("synced_observers", g.synced_observers.to_string()),
                ("pending_syncs", "0".to_string()),
                ("leader_uptime", uptime.to_string()),
                ("last_proposal_size", g.last_proposal_size.to_string()),
                ("max_proposal_size", g.max_proposal_size.to_string()),
                ("min_proposal_size", g.min_proposal_size.to_string()),
            ]);
        }
        (ServerState::Following, _) => v.push(("synced_observers", "0".to_string())),
        _ => {}
    }
    v
}

/// The gauges a leader adds to [`monitor_values`], after those every member has.
pub const LEADER_GAUGES: &[&str] = &[
    "learners",
    "synced_followers",
    "synced_non_voting_followers",
    "pending_syncs",
    "leader_uptime",
    "last_proposal_size",
    "max_proposal_size",
    "min_proposal_size",
];

/// Open and allowed file descriptors of this process (Java's
/// `UnixOperatingSystemMXBean`), 0 where the system does not say.
fn file_descriptors() -> (u64, u64) {
    use crate::net::manager::{open_files, open_files_limit};
    (open_files().unwrap_or(0), open_files_limit().unwrap_or(0))
}

/// `envi`'s lines after the version: the host and the process, in Java's keys where zkfle
/// has the value.
pub fn environment() -> Vec<(&'static str, String)> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    vec![
        ("host.name", host),
        ("os.name", std::env::consts::OS.to_string()),
        ("os.arch", std::env::consts::ARCH.to_string()),
        ("user.dir", cwd),
        ("process.id", std::process::id().to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ServerState, synced: bool) -> MemberStatus {
        let mut s = crate::net::status::StatusBoard::default().read();
        s.state = state;
        s.leader = Some(3);
        s.synced = synced;
        s.last_zxid = 0x1_0000_0002;
        s.node_count = 5;
        s.data_size = 40;
        s
    }

    fn setup() -> MemberSetup {
        MemberSetup {
            speaks: "3.8.0".into(),
            ..MemberSetup::default()
        }
    }

    #[test]
    fn srvr_is_javas_for_a_synced_follower_and_not_serving_before() {
        let s = status(ServerState::Following, true);
        let text = answer("srvr", &s, &setup(), (0, 0));
        assert_eq!(
            text,
            format!(
                "Zookeeper version: 3.8.0-zkfle-{}, built on zkfle\nLatency min/avg/max: 0/0.0/0\nReceived: 0\nSent: 0\nConnections: 0\nOutstanding: 0\nZxid: 0x100000002\nMode: follower\nNode count: 5\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let s = status(ServerState::Following, false);
        assert_eq!(
            answer("srvr", &s, &setup(), (0, 0)),
            format!("{NOT_SERVING}\n")
        );
        assert_eq!(answer("ruok", &s, &setup(), (0, 0)), "imok");
        assert_eq!(answer("isro", &s, &setup(), (0, 0)), "null");
    }

    #[test]
    fn a_leader_adds_javas_leader_gauges() {
        let mut s = status(ServerState::Leading, true);
        s.leading = Some(crate::zab::leader::LeaderGauges {
            learners: 3,
            synced_followers: 2,
            synced_non_voting_followers: 0,
            synced_observers: 1,
            last_proposal_size: 52,
            min_proposal_size: 52,
            max_proposal_size: 52,
        });
        let text = answer("mntr", &s, &setup(), (0, 0));
        for line in [
            "zk_server_state\tleader",
            "zk_learners\t3",
            "zk_synced_followers\t2",
            "zk_synced_non_voting_followers\t0",
            "zk_synced_observers\t1",
            "zk_pending_syncs\t0",
            "zk_leader_uptime\t0",
            "zk_last_proposal_size\t52",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in {text}");
        }
        let follower = answer(
            "mntr",
            &status(ServerState::Following, true),
            &setup(),
            (0, 0),
        );
        assert!(
            follower.contains("\nzk_synced_observers\t0\n"),
            "{follower}"
        );
        assert!(!follower.contains("zk_synced_followers"), "{follower}");
    }

    #[test]
    fn mntr_is_tab_separated_with_the_state() {
        let s = status(ServerState::Following, true);
        let text = answer("mntr", &s, &setup(), (0, 0));
        assert!(text.starts_with("zk_version\t3.8.0-zkfle-"), "{text}");
        assert!(text.contains("\nzk_server_state\tfollower\n"), "{text}");
        assert!(text.contains("\nzk_znode_count\t5\n"), "{text}");
        assert!(
            text.lines()
                .all(|l| l.starts_with("zk_") && l.contains('\t'))
        );
    }
}
