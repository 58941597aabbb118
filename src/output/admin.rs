//! The answers of `zkfle join`'s AdminServer (`src/net/admin.rs`): Java's `/commands/NAME`
//! JSON objects (`org.apache.zookeeper.server.admin.Commands`, 3.8), each ending with its
//! primary name as `command` and `error` (null, or why it did not run), so that scripts,
//! Kubernetes probes and dashboards that read a Java member's AdminServer read zkfle's.
//!
//! As on the client port, what counts client requests is 0 (zkfle serves none), and commands
//! that need a running server answer Java's `This ZooKeeper instance is not currently serving
//! requests` until zkfle has synced.

use serde_json::{Map, Value, json};

use super::fourlw::{self, MemberSetup, NOT_SERVING};
use crate::net::status::MemberStatus;
use crate::wire::ServerState;

/// Java's commands: primary name, other names, and whether it needs a running server
/// (`CommandBase.serverRequired`, but for `monitor`).
pub const COMMANDS: &[(&str, &[&str], bool)] = &[
    ("configuration", &["conf", "config"], true),
    ("connection_stat_reset", &["crst"], true),
    ("connections", &["cons"], true),
    ("dirs", &[], true),
    ("dump", &[], true),
    ("environment", &["env", "envi"], false),
    ("get_trace_mask", &["gtmk"], false),
    ("hash", &[], true),
    ("initial_configuration", &["icfg"], true),
    ("is_read_only", &["isro"], true),
    ("last_snapshot", &["lsnp"], true),
    ("leader", &["lead"], true),
    // Java's says false, and throws (HTTP 500, a NullPointerException) without a running
    // server in 3.8.0: zkfle answers it as the commands that need one.
    ("monitor", &["mntr"], true),
    ("observer_connection_stat_reset", &["orst"], true),
    ("observers", &["obsr"], true),
    ("ruok", &[], true),
    ("server_stats", &["srvr"], true),
    ("stat_reset", &["srst"], true),
    ("stats", &["stat"], true),
    ("system_properties", &["sysp"], false),
    ("voting_view", &[], true),
    ("watch_summary", &["wchs"], true),
    ("watches", &["wchc"], true),
    ("watches_by_path", &["wchp"], true),
    ("zabstate", &[], false),
];

/// A server of the membership, for `voting_view` and `leader`.
#[derive(Debug, Clone, Default)]
pub struct MemberAddresses {
    pub sid: i64,
    /// `host:port` of each quorum address.
    pub quorum: Vec<String>,
    /// `host:port` of each election address.
    pub election: Vec<String>,
    /// `host:port` of its client address when its server line names one ("" otherwise, as
    /// Java shows a client address it did not learn from the dynamic config).
    pub client: String,
    pub observer: bool,
}

/// What the AdminServer answers from besides the member's status and setup.
#[derive(Debug, Clone, Default)]
pub struct AdminView {
    /// The membership, in sid order.
    pub members: Vec<MemberAddresses>,
    /// This member's client address as it listens (`host:port`), "" without a client port.
    pub client_address: String,
    /// The last snapshot in the data directory: its zxid and modification time (seconds).
    pub last_snapshot: Option<(i64, i64)>,
    /// Bytes in the data directory's `version-2` (data and log directory are one for zkfle).
    pub dir_size: u64,
}

/// The primary name of the command called `name` (a primary name or another of its names).
pub fn primary(name: &str) -> Option<(&'static str, bool)> {
    COMMANDS
        .iter()
        .find(|(p, others, _)| *p == name || others.contains(&name))
        .map(|(p, _, needs_server)| (*p, *needs_server))
}

/// The response object for `name`, as Java's `Commands.runCommand` makes it.
pub fn response(
    name: &str,
    s: &MemberStatus,
    setup: &MemberSetup,
    view: &AdminView,
) -> Map<String, Value> {
    let mut out = Map::new();
    let Some((command, needs_server)) = primary(name) else {
        out.insert("command".into(), name.into());
        out.insert("error".into(), format!("Unknown command: {name}").into());
        return out;
    };
    let running = s.synced;
    if needs_server && !running {
        out.insert("command".into(), command.into());
        out.insert("error".into(), NOT_SERVING.into());
        return out;
    }
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    match command {
        "configuration" => {
            put("client_port", setup.client_port.into());
            put("data_dir", setup.data_dir.clone().into());
            put("data_log_dir", setup.data_log_dir.clone().into());
            put("tick_time", setup.tick_time.into());
            put("max_client_cnxns", setup.max_client_cnxns.into());
            put("min_session_timeout", setup.min_session_timeout.into());
            put("max_session_timeout", setup.max_session_timeout.into());
            put("server_id", setup.server_id.into());
            put("client_port_listen_backlog", (-1).into());
        }
        "connections" => {
            put("connections", json!([]));
            put("secure_connections", json!([]));
        }
        "dirs" => {
            put("datadir_size", view.dir_size.into());
            put("logdir_size", view.dir_size.into());
        }
        "dump" => {
            put("expiry_time_to_session_ids", json!({}));
            put("session_id_to_ephemeral_paths", json!({}));
        }
        "environment" => {
            put("zookeeper.version", setup.version().into());
            for (k, v) in fourlw::environment() {
                put(k, v.into());
            }
        }
        // Java's default trace mask (ZooTrace's CLIENT_REQUEST_TRACE_MASK | ...): 306.
        "get_trace_mask" => put("tracemask", 306.into()),
        "hash" => put("digests", json!([])),
        "initial_configuration" => put("initial_configuration", Value::Null),
        "is_read_only" => put("read_only", false.into()),
        "last_snapshot" => {
            let (zxid, time) = view.last_snapshot.unwrap_or((-1, -1));
            put("zxid", format!("{:x}", zxid as u64).into());
            put("timestamp", time.into());
        }
        "leader" => {
            let leader = s.leader.unwrap_or(-1);
            put("is_leader", (s.state == ServerState::Leading).into());
            put("leader_id", leader.into());
            let ip = view
                .members
                .iter()
                .find(|m| m.sid == leader)
                .and_then(|m| m.quorum.first())
                .map(|a| host_of(a).to_string())
                .unwrap_or_default();
            put("leader_ip", ip.into());
        }
        "monitor" => {
            for (k, v) in fourlw::monitor_values(s, setup) {
                put(&k, typed(&v));
            }
        }
        "observers" => {
            put("synced_observers", 0.into());
            put("observers", json!([]));
        }
        "server_stats" | "stats" => {
            put("version", setup.version().into());
            put("read_only", false.into());
            put(
                "server_stats",
                json!({
                    "packets_sent": 0,
                    "packets_received": 0,
                    "fsync_threshold_exceed_count": 0,
                    "client_response_stats": client_response(),
                    "provider_null": false,
                    "server_state": fourlw::mode(s.state),
                    "outstanding_requests": 0,
                    "min_latency": 0,
                    "avg_latency": 0.0,
                    "max_latency": 0,
                    "data_dir_size": view.dir_size,
                    "log_dir_size": view.dir_size,
                    "last_processed_zxid": s.last_zxid,
                    "num_alive_client_connections": 0,
                    "uptime": s.started.elapsed().as_millis() as u64,
                    "auth_failed_count": 0,
                    "non_mtlsremote_conn_count": 0,
                    "non_mtlslocal_conn_count": 0,
                }),
            );
            put("client_response", client_response());
            if s.state == ServerState::Leading {
                put(
                    "proposal_stats",
                    json!({"last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1}),
                );
            }
            put("node_count", s.node_count.into());
            if command == "stats" {
                put("connections", json!([]));
                put("secure_connections", json!([]));
            }
        }
        "voting_view" => {
            let mut config = Map::new();
            for m in &view.members {
                config.insert(
                    m.sid.to_string(),
                    json!({
                        "server_addresses": m.quorum,
                        "election_addresses": m.election,
                        "client_address": if m.sid == setup.server_id {
                            view.client_address.clone()
                        } else {
                            m.client.clone()
                        },
                        "learner_type": if m.observer { "observer" } else { "participant" },
                    }),
                );
            }
            put("current_config", Value::Object(config));
        }
        "watch_summary" => {
            put("num_connections", 0.into());
            put("num_paths", 0.into());
            put("num_total_watches", 0.into());
        }
        "watches" => put("session_id_to_watched_paths", json!({})),
        "watches_by_path" => put("path_to_session_ids", json!({})),
        "zabstate" if !running || s.state == ServerState::Looking => {
            put("voting", false.into());
            put("zabstate", "".into());
        }
        "zabstate" => {
            let me = view.members.iter().find(|m| m.sid == setup.server_id);
            put("myid", setup.server_id.into());
            put("is_leader", (s.state == ServerState::Leading).into());
            if let Some(me) = me {
                put("quorum_address", multiple_addresses(&me.quorum));
                put("election_address", multiple_addresses(&me.election));
            }
            put("client_address", view.client_address.clone().into());
            put("voting", me.is_some_and(|m| !m.observer).into());
            put("last_zxid", format!("0x{:x}", s.last_zxid).into());
            put("zab_epoch", (s.last_zxid >> 32).into());
            put("zab_counter", (s.last_zxid & 0xffff_ffff).into());
            put("zabstate", "broadcast".into());
        }
        // ruok, the resets, system_properties (zkfle has no Java system properties): the
        // command and its error alone.
        _ => {}
    }
    out.insert("command".into(), command.into());
    out.insert("error".into(), Value::Null);
    out
}

/// The page at the command URL itself: one link per primary name, as Java's.
pub fn command_list(url: &str) -> String {
    let base = url.trim_end_matches('/');
    let mut names: Vec<&str> = COMMANDS.iter().map(|(p, _, _)| *p).collect();
    names.sort_unstable();
    names
        .iter()
        .map(|n| format!("<a href=\"{base}/{n}\">{n}</a>\n<br/>\n"))
        .collect()
}

/// A `mntr` value as the JSON Java's monitor gives: numbers as numbers, the rest as text.
fn typed(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return i.into();
    }
    if v.contains('.')
        && let Ok(f) = v.parse::<f64>()
    {
        return json!(f);
    }
    v.into()
}

fn client_response() -> Value {
    json!({"last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1})
}

/// The host of `host:port` (brackets kept off an IPv6 literal).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Java's `MultipleAddresses` as Jackson writes it (its bean getters).
fn multiple_addresses(addrs: &[String]) -> Value {
    let ports: Vec<u16> = addrs
        .iter()
        .filter_map(|a| a.rsplit_once(':')?.1.parse().ok())
        .collect();
    let hosts: Vec<&str> = addrs.iter().map(|a| host_of(a)).collect();
    let one = addrs.first().cloned().unwrap_or_default();
    json!({
        "empty": addrs.is_empty(),
        "all_addresses": addrs,
        "all_reachable_addresses": addrs,
        "one": one,
        "reachable_address": one,
        "wildcard_addresses": ports.iter().map(|p| format!("0.0.0.0:{p}")).collect::<Vec<_>>(),
        "all_ports": ports,
        "all_host_strings": hosts,
        "all_reachable_addresses_or_all": addrs,
        "reachable_or_one": one,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ServerState, synced: bool) -> MemberStatus {
        let mut s = crate::net::status::StatusBoard::default().read();
        s.state = state;
        s.leader = Some(2);
        s.synced = synced;
        s.last_zxid = 0x1_0000_0002;
        s.node_count = 5;
        s
    }

    fn view() -> AdminView {
        AdminView {
            members: (1..=3)
                .map(|sid| MemberAddresses {
                    sid,
                    quorum: vec![format!("127.0.0.{sid}:2888")],
                    election: vec![format!("127.0.0.{sid}:3888")],
                    client: String::new(),
                    observer: false,
                })
                .collect(),
            client_address: "127.0.0.1:2181".into(),
            last_snapshot: Some((0x1_0000_0000, 1_700_000_000)),
            dir_size: 591,
        }
    }

    fn setup() -> MemberSetup {
        MemberSetup {
            server_id: 1,
            speaks: crate::net::dialect::JavaRelease::new(3, 8, 0),
            ..MemberSetup::default()
        }
    }

    #[test]
    fn names_aliases_and_unknown_commands_answer_as_javas() {
        let s = status(ServerState::Following, true);
        let r = response("lead", &s, &setup(), &view());
        assert_eq!(r["command"], "leader");
        assert_eq!(r["leader_id"], 2);
        assert_eq!(r["leader_ip"], "127.0.0.2");
        assert_eq!(r["is_leader"], false);
        assert_eq!(r["error"], Value::Null);
        // The command and the error come last, as Jackson writes Java's map.
        let keys: Vec<&String> = r.keys().collect();
        assert_eq!(keys[keys.len() - 2..], ["command", "error"]);
        let r = response("nosuch", &s, &setup(), &view());
        assert_eq!(r["error"], "Unknown command: nosuch");
        assert_eq!(r["command"], "nosuch");
    }

    #[test]
    fn before_it_serves_only_what_java_answers_then_is_answered() {
        let s = status(ServerState::Following, false);
        for name in ["ruok", "leader", "stats", "monitor", "voting_view"] {
            let r = response(name, &s, &setup(), &view());
            assert_eq!(r["error"], NOT_SERVING, "{name}");
        }
        let r = response("zabstate", &s, &setup(), &view());
        assert_eq!(r["voting"], false);
        assert_eq!(r["zabstate"], "");
        assert_eq!(r["error"], Value::Null);
        let r = response("env", &s, &setup(), &view());
        assert_eq!(r["command"], "environment");
        assert!(
            r["zookeeper.version"]
                .as_str()
                .unwrap()
                .starts_with("3.8.0-zkfle-")
        );
    }

    #[test]
    fn monitor_values_are_typed() {
        let s = status(ServerState::Following, true);
        let r = response("mntr", &s, &setup(), &view());
        assert_eq!(r["server_state"], "follower");
        assert_eq!(r["znode_count"], 5);
        assert_eq!(r["avg_latency"], 0.0);
        assert!(r["version"].is_string());
        let r = response("zabstate", &s, &setup(), &view());
        assert_eq!(r["last_zxid"], "0x100000002");
        assert_eq!(r["zab_epoch"], 1);
        assert_eq!(r["zab_counter"], 2);
        assert_eq!(r["quorum_address"]["one"], "127.0.0.1:2888");
        let r = response("lsnp", &s, &setup(), &view());
        assert_eq!(r["zxid"], "100000000");
    }

    #[test]
    fn the_command_page_links_every_primary_name() {
        let page = command_list("/commands");
        assert!(page.starts_with("<a href=\"/commands/configuration\">configuration</a>\n<br/>\n"));
        assert_eq!(page.matches("<a href").count(), COMMANDS.len());
    }
}
