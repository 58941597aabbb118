//! The answers of `zkfle join`'s client port to four-letter words, in Java's formats
//! (`org.apache.zookeeper.server.command.*`, 3.8), so that `zkServer.sh status`, `echo ruok |
//! nc`, `srvr` and `mntr` checks read zkfle as the member it is.
//!
//! zkfle serves no client requests, so what counts requests (latencies, packets, connections,
//! watches) is 0, as on a Java member nobody has connected to. Java's server is "running" for
//! these commands once it serves (synced); before that the commands that need it answer
//! `This ZooKeeper instance is not currently serving requests`, as Java's do.

use std::fmt::Write;

use crate::net::dialect::JavaRelease;
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
    /// The Java release zkfle presents as (`join --release`): the version line, and which
    /// release's metrics it reports.
    pub speaks: JavaRelease,
    /// Voters in the config (`quorum_size`).
    pub voters: usize,
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

/// `mntr`'s values, as Java 3.8's `MonitorCommand` dumps them: the state, then every gauge its
/// server registers and every `ServerMetrics` family (counters as one value, summaries as
/// `avg_`, `min_`, `max_`, `cnt_`, `sum_` and, for the detailed ones, `p50_` to `p999_`), with
/// zkfle's values where it has the quantity and Java's idle ones where it counts what zkfle
/// never does (client requests). The per-namespace sets have a summary per namespace used:
/// writes as the data tree applied them; reads and quota errors never (zkfle serves no
/// client).
pub fn monitor_values(s: &MemberStatus, setup: &MemberSetup) -> Vec<(String, String)> {
    use super::prometheus::java_double;
    use super::server_metrics::{self, Kind, SERVING_GAUGES};
    if setup.speaks < JavaRelease::new(3, 5, 0) {
        return monitor_values_3_4(s, setup);
    }
    let (open_fds, max_fds) = file_descriptors();
    let peer_state = match s.state {
        ServerState::Looking => "looking".to_string(),
        state => format!(
            "{} - {}",
            state.name().to_ascii_lowercase(),
            if s.synced {
                "broadcast"
            } else {
                "synchronization"
            }
        ),
    };
    let mut v: Vec<(String, String)> = Vec::with_capacity(512);
    let mut put = |k: &str, value: String| v.push((k.to_string(), value));
    put("version", setup.version());
    put("server_state", mode(s.state).to_string());
    put("peer_state", peer_state);
    for name in SERVING_GAUGES.iter().copied() {
        let value = match name {
            "znode_count" => s.node_count.to_string(),
            "ephemerals_count" => s.ephemerals.to_string(),
            "approximate_data_size" => s.data_size.to_string(),
            "open_file_descriptor_count" => open_fds.to_string(),
            "max_file_descriptor_count" => max_fds.to_string(),
            "uptime" => s.started.elapsed().as_millis().to_string(),
            "quorum_size" => setup.voters.to_string(),
            "avg_latency" | "connection_drop_probability" => "0.0".to_string(),
            "last_client_response_size"
            | "max_client_response_size"
            | "min_client_response_size" => "-1".to_string(),
            // A leader's gauge (below); a follower's is null unless it is an observer master,
            // and Java's mntr leaves null gauges out.
            "synced_observers" => continue,
            _ => "0".to_string(),
        };
        put(name, value);
    }
    // The gauges Java's LeaderZooKeeperServer registers, in its order. zkfle serves no client,
    // so no SYNC is ever pending.
    if let (ServerState::Leading, Some(g)) = (s.state, &s.leading) {
        let uptime = s.leading_since.map_or(0, |t| t.elapsed().as_millis());
        put("learners", g.learners.to_string());
        put("synced_followers", g.synced_followers.to_string());
        put(
            "synced_non_voting_followers",
            g.synced_non_voting_followers.to_string(),
        );
        put("synced_observers", g.synced_observers.to_string());
        put("pending_syncs", "0".to_string());
        put("leader_uptime", uptime.to_string());
        put("last_proposal_size", g.last_proposal_size.to_string());
        put("max_proposal_size", g.max_proposal_size.to_string());
        put("min_proposal_size", g.min_proposal_size.to_string());
    }
    for (name, kind) in server_metrics::families(setup.speaks) {
        match kind {
            Kind::Counter => put(name, server_metrics::counter(name, s).to_string()),
            Kind::Basic | Kind::Advanced => {
                let samples = server_metrics::samples(name, s);
                let (count, sum) = samples.map_or((0, 0.0), |m| (m.count, m.sum));
                let avg = if count == 0 { 0.0 } else { sum / count as f64 };
                let whole = |x: f64| if x.is_finite() { x as i64 } else { 0 };
                put(&format!("avg_{name}"), java_double(avg));
                put(
                    &format!("min_{name}"),
                    whole(samples.map_or(0.0, |m| m.min())).to_string(),
                );
                put(
                    &format!("max_{name}"),
                    whole(samples.map_or(0.0, |m| m.max())).to_string(),
                );
                put(&format!("cnt_{name}"), count.to_string());
                put(&format!("sum_{name}"), whole(sum).to_string());
                if *kind == Kind::Advanced {
                    for (p, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)] {
                        let value = samples.map_or(0.0, |m| m.quantile(q));
                        put(&format!("{p}_{name}"), whole(value).to_string());
                    }
                }
            }
            // Java's sets write one summary per key, `avg_KEY_NAME` and so on.
            Kind::SummarySet if *name == "write_per_namespace" => {
                for (namespace, w) in &s.metrics.writes_per_namespace {
                    let avg = w.sum as f64 / w.count.max(1) as f64;
                    put(&format!("avg_{namespace}_{name}"), java_double(avg));
                    put(&format!("min_{namespace}_{name}"), w.min.to_string());
                    put(&format!("max_{namespace}_{name}"), w.max.to_string());
                    put(&format!("cnt_{namespace}_{name}"), w.count.to_string());
                    put(&format!("sum_{namespace}_{name}"), w.sum.to_string());
                }
            }
            Kind::SummarySet | Kind::CounterSet => {}
        }
    }
    v
}

/// `mntr` as 3.4 answers it (`NIOServerCnxn.MonitorCommand`): its fixed list, in its order,
/// before 3.5's metrics system; a leader adds its learners and proposal sizes.
fn monitor_values_3_4(s: &MemberStatus, setup: &MemberSetup) -> Vec<(String, String)> {
    let (open_fds, max_fds) = file_descriptors();
    let mut v: Vec<(String, String)> = Vec::with_capacity(24);
    let mut put = |k: &str, value: String| v.push((k.to_string(), value));
    put("version", setup.version());
    put("avg_latency", "0".to_string());
    put("max_latency", "0".to_string());
    put("min_latency", "0".to_string());
    put("packets_received", "0".to_string());
    put("packets_sent", "0".to_string());
    put("num_alive_connections", "0".to_string());
    put("outstanding_requests", "0".to_string());
    put("server_state", mode(s.state).to_string());
    put("znode_count", s.node_count.to_string());
    put("watch_count", "0".to_string());
    put("ephemerals_count", s.ephemerals.to_string());
    put("approximate_data_size", s.data_size.to_string());
    put("open_file_descriptor_count", open_fds.to_string());
    put("max_file_descriptor_count", max_fds.to_string());
    put("fsync_threshold_exceed_count", "0".to_string());
    if let (ServerState::Leading, Some(g)) = (s.state, &s.leading) {
        put("followers", g.learners.to_string());
        put("synced_followers", g.synced_followers.to_string());
        put("pending_syncs", "0".to_string());
        put("last_proposal_size", g.last_proposal_size.to_string());
        put("max_proposal_size", g.max_proposal_size.to_string());
        put("min_proposal_size", g.min_proposal_size.to_string());
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
            speaks: crate::net::dialect::JavaRelease::new(3, 8, 0),
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
        // A follower that is no observer master: Java leaves its null gauge out.
        let follower = answer(
            "mntr",
            &status(ServerState::Following, true),
            &setup(),
            (0, 0),
        );
        assert!(!follower.contains("zk_synced_"), "{follower}");
    }

    #[test]
    fn mntr_dumps_server_metrics_as_javas_default_provider() {
        let board = crate::net::status::StatusBoard::default();
        board.looking();
        board.decided(ServerState::Following, 3);
        board.synced(Some(69));
        let text = answer("mntr", &board.read(), &setup(), (0, 0));
        for line in [
            "zk_quorum_size\t0",
            "zk_last_client_response_size\t-1",
            "zk_connection_drop_probability\t0.0",
            "zk_looking_count\t1",
            "zk_avg_follower_sync_time\t69.0",
            "zk_min_follower_sync_time\t69",
            "zk_max_follower_sync_time\t69",
            "zk_cnt_follower_sync_time\t1",
            "zk_sum_follower_sync_time\t69",
            "zk_avg_fsynctime\t0.0",
            "zk_cnt_fsynctime\t0",
            "zk_p999_readlatency\t0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in {text}");
        }
        assert!(!text.contains("per_namespace"), "{text}");
        assert!(!text.contains("restore_time"), "3.9's family: {text}");
        let as_3_9 = MemberSetup {
            speaks: JavaRelease::new(3, 9, 5),
            ..setup()
        };
        let text = answer("mntr", &board.read(), &as_3_9, (0, 0));
        assert!(text.contains("\nzk_cnt_restore_time\t0\n"), "{text}");
        assert!(text.contains("\nzk_snapshot_error_count\t0\n"), "{text}");
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
