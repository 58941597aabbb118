//! The text `zkfle join`'s metrics endpoint serves (`src/net/metrics.rs`): what Java's
//! `PrometheusMetricsProvider` (3.8, Prometheus simpleclient 0.9.0) exports for a follower,
//! in its format (text format 0.0.4; HELP equal to the name; values as Java's
//! `Double.toString`; labels with a trailing comma), with zkfle's values where it has the
//! quantity and Java's idle values (0, NaN) where it counts what zkfle never does (client
//! requests, Java's request pipeline). Names and types: Java's `ServerMetrics` and
//! `ZooKeeperServer.registerMetrics` (docs/join.md, "Monitoring: Prometheus").

use std::fmt::Write;

use super::fourlw::{self, MemberSetup};
use crate::net::status::{MemberStatus, Samples};
use crate::wire::ServerState;

/// A `ServerMetrics` family's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    /// A summary with the 0.5 quantile (Java's `DetailLevel.BASIC`).
    Basic,
    /// A summary with the 0.5, 0.9 and 0.99 quantiles (`DetailLevel.ADVANCED`).
    Advanced,
    /// Labelled by `key`, with no samples until a key is used: HELP and TYPE only.
    SummarySet,
    CounterSet,
}

use Kind::*;

/// Java 3.8's `ServerMetrics`, created at start whatever the server's state.
pub const SERVER_METRICS: &[(&str, Kind)] = &[
    // Election and sync.
    ("election_time", Basic),
    ("follower_sync_time", Basic),
    ("looking_count", Counter),
    ("unavailable_time", Basic),
    ("leader_unavailable_time", Basic),
    // Replication.
    ("learner_proposal_received_count", Counter),
    ("learner_commit_received_count", Counter),
    ("proposal_latency", Advanced),
    ("proposal_ack_creation_latency", Advanced),
    ("commit_propagation_latency", Advanced),
    ("om_proposal_process_time_ms", Advanced),
    ("om_commit_process_time_ms", Advanced),
    // Disk and start.
    ("fsynctime", Basic),
    ("snapshottime", Basic),
    ("dbinittime", Basic),
    ("startup_txns_loaded", Basic),
    ("startup_txns_load_time", Basic),
    ("startup_snap_load_time", Basic),
    // The sync request processor.
    ("sync_processor_queue_and_flush_time_ms", Advanced),
    ("sync_processor_queue_time_ms", Advanced),
    ("sync_processor_queue_flush_time_ms", Advanced),
    ("sync_processor_queue_size", Basic),
    ("sync_process_time", Basic),
    ("sync_processor_batch_size", Basic),
    ("sync_processor_request_queued", Counter),
    // The commit processor.
    ("commit_process_time", Basic),
    ("write_batch_time_in_commit_processor", Basic),
    ("commit_commit_proc_req_queued", Basic),
    ("read_commit_proc_req_queued", Basic),
    ("write_commit_proc_req_queued", Basic),
    ("read_commit_proc_issued", Basic),
    ("write_commit_proc_issued", Basic),
    ("concurrent_request_processing_in_commit_processor", Basic),
    ("time_waiting_empty_pool_in_commit_processor_read_ms", Basic),
    ("read_commitproc_time_ms", Advanced),
    ("write_commitproc_time_ms", Advanced),
    ("local_write_committed_time_ms", Advanced),
    ("server_write_committed_time_ms", Advanced),
    ("read_final_proc_time_ms", Advanced),
    ("write_final_proc_time_ms", Advanced),
    ("request_commit_queued", Counter),
    // Other server-side.
    ("propagation_latency", Advanced),
    ("learner_request_processor_queue_size", Basic),
    ("skip_learner_request_to_next_processor_count", Counter),
    ("digest_mismatches_count", Counter),
    ("jvm_pause_time_ms", Advanced),
    ("socket_closing_time", Basic),
    ("unrecoverable_error_count", Counter),
    ("ensemble_auth_success", Counter),
    ("ensemble_auth_fail", Counter),
    ("ensemble_auth_skip", Counter),
    // A leader's (idle on a follower).
    ("diff_count", Counter),
    ("snap_count", Counter),
    ("commit_count", Counter),
    ("inflight_snap_count", Basic),
    ("inflight_diff_count", Basic),
    ("observer_sync_time", Basic),
    ("quorum_ack_latency", Advanced),
    ("proposal_count", Counter),
    ("quit_leading_due_to_disloyal_voter", Counter),
    ("revalidate_count", Counter),
    ("requests_not_forwarded_to_commit_processor", Counter),
    ("ack_latency", SummarySet),
    ("learner_handler_qp_size", SummarySet),
    ("learner_handler_qp_time_ms", SummarySet),
    // Clients' (idle: zkfle serves none).
    ("readlatency", Advanced),
    ("updatelatency", Advanced),
    ("dead_watchers_cleaner_latency", Advanced),
    ("prep_processor_queue_time_ms", Advanced),
    ("close_session_prep_time", Advanced),
    ("request_throttle_queue_time_ms", Advanced),
    ("connection_token_deficit", Basic),
    ("node_created_watch_count", Basic),
    ("node_deleted_watch_count", Basic),
    ("node_changed_watch_count", Basic),
    ("node_children_watch_count", Basic),
    ("prep_processor_queue_size", Basic),
    ("prep_process_time", Basic),
    ("proposal_process_time", Basic),
    ("requests_in_session_queue", Basic),
    ("pending_session_queue_size", Basic),
    ("reads_after_write_in_session_queue", Basic),
    ("reads_issued_from_session_queue", Basic),
    ("session_queues_drained", Basic),
    ("netty_queued_buffer_capacity", Basic),
    ("connection_request_count", Counter),
    ("connection_rejected", Counter),
    ("bytes_received_count", Counter),
    ("add_dead_watcher_stall_time", Counter),
    ("dead_watchers_queued", Counter),
    ("dead_watchers_cleared", Counter),
    ("response_packet_cache_hits", Counter),
    ("response_packet_cache_misses", Counter),
    ("response_packet_get_children_cache_hits", Counter),
    ("response_packet_get_children_cache_misses", Counter),
    ("prep_processor_request_queued", Counter),
    ("outstanding_changes_queued", Counter),
    ("outstanding_changes_removed", Counter),
    ("connection_drop_count", Counter),
    ("connection_revalidate_count", Counter),
    ("sessionless_connections_expired", Counter),
    ("stale_sessions_expired", Counter),
    ("throttled_ops", Counter),
    ("stale_requests", Counter),
    ("stale_requests_dropped", Counter),
    ("stale_replies", Counter),
    ("request_throttle_wait_count", Counter),
    ("large_requests_rejected", Counter),
    ("unsuccessful_handshake", Counter),
    ("insecure_admin_count", Counter),
    ("tls_handshake_exceeded", Counter),
    ("cnxn_closed_without_zk_server_running", Counter),
    ("response_bytes", Counter),
    ("watch_bytes", Counter),
    ("write_per_namespace", SummarySet),
    ("read_per_namespace", SummarySet),
    ("quota_exceeded_error_per_namespace", CounterSet),
];

/// The gauges Java's server registers once it serves (`ZooKeeperServer.registerMetrics`, and a
/// quorum server's `quorum_size` and a follower's `synced_observers`), gone while LOOKING.
const SERVING_GAUGES: &[&str] = &[
    "avg_latency",
    "max_latency",
    "min_latency",
    "packets_received",
    "packets_sent",
    "num_alive_connections",
    "outstanding_requests",
    "uptime",
    "znode_count",
    "watch_count",
    "ephemerals_count",
    "approximate_data_size",
    "global_sessions",
    "local_sessions",
    "open_file_descriptor_count",
    "max_file_descriptor_count",
    "connection_drop_probability",
    "last_client_response_size",
    "max_client_response_size",
    "min_client_response_size",
    "outstanding_tls_handshake",
    "auth_failed_count",
    "non_mtls_remote_conn_count",
    "non_mtls_local_conn_count",
    "quorum_size",
    "synced_observers",
];

/// The quota gauges, labelled by namespace: HELP and TYPE only on a tree without quotas.
const QUOTA_GAUGE_SETS: &[&str] = &[
    "quota_count_limit_per_namespace",
    "quota_bytes_limit_per_namespace",
    "quota_count_usage_per_namespace",
    "quota_bytes_usage_per_namespace",
];

/// The process's figures (Prometheus' standard `process_*` families), where the system has
/// them; Java exports them with its JVM's (`exportJvmInfo`).
#[derive(Debug, Clone, Default)]
pub struct Process {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
}

/// The page at `/metrics`. `quorum_size` is the number of voters; `process` is written when
/// `metricsProvider.exportJvmInfo` is on (Java's default).
pub fn exposition(
    s: &MemberStatus,
    setup: &MemberSetup,
    quorum_size: usize,
    process: Option<&Process>,
) -> String {
    let mut out = String::with_capacity(24 * 1024);
    if s.synced {
        let monitor: Vec<(&str, String)> = fourlw::monitor_values(s, setup);
        let value_of = |name: &str| {
            monitor
                .iter()
                .find(|(k, _)| *k == name)
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        for name in SERVING_GAUGES {
            let value = match *name {
                "quorum_size" => quorum_size as f64,
                "max_client_response_size"
                | "min_client_response_size"
                | "last_client_response_size" => -1.0,
                n => value_of(n),
            };
            family(&mut out, name, "gauge");
            sample(&mut out, name, "", value);
        }
        if s.leading.is_some() {
            for name in fourlw::LEADER_GAUGES {
                family(&mut out, name, "gauge");
                sample(&mut out, name, "", value_of(name));
            }
        }
        for name in QUOTA_GAUGE_SETS {
            family(&mut out, name, "gauge");
        }
    }
    let m = &s.metrics;
    for (name, kind) in SERVER_METRICS {
        match kind {
            Counter => {
                let v = match *name {
                    "looking_count" => m.looking_count,
                    "learner_proposal_received_count" => m.proposals_received,
                    "learner_commit_received_count" => m.commits_received,
                    _ => 0,
                };
                family(&mut out, name, "counter");
                sample(&mut out, name, "", v as f64);
            }
            Basic | Advanced => {
                let empty = Samples::default();
                let samples = match *name {
                    "election_time" => &m.election_time,
                    "follower_sync_time" if s.state != ServerState::Leading => {
                        &m.follower_sync_time
                    }
                    _ => &empty,
                };
                family(&mut out, name, "summary");
                let quantiles: &[f64] = if *kind == Basic {
                    &[0.5]
                } else {
                    &[0.5, 0.9, 0.99]
                };
                for q in quantiles {
                    let v = samples.quantile(*q);
                    sample(&mut out, name, &format!("quantile=\"{q}\","), v);
                }
                sample(&mut out, &format!("{name}_count"), "", samples.count as f64);
                sample(&mut out, &format!("{name}_sum"), "", samples.sum);
            }
            SummarySet => family(&mut out, name, "summary"),
            CounterSet => family(&mut out, name, "counter"),
        }
    }
    if let Some(p) = process {
        let standard: [(&str, &str, &str, Option<f64>); 6] = [
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                p.cpu_seconds,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds,
            ),
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                p.open_fds,
            ),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                p.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                p.virtual_memory_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                p.resident_memory_bytes,
            ),
        ];
        for (name, ty, help, v) in standard {
            if let Some(v) = v {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {ty}");
                sample(&mut out, name, "", v);
            }
        }
    }
    out
}

fn family(out: &mut String, name: &str, ty: &str) {
    let _ = writeln!(out, "# HELP {name} {name}\n# TYPE {name} {ty}");
}

fn sample(out: &mut String, name: &str, labels: &str, v: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {}", java_double(v));
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {}", java_double(v));
    }
}

/// A value as Java's `Double.toString` writes it, which simpleclient uses: `5.0`, `NaN`,
/// `+Inf`, `1.0E7` from 10^7 up and below 10^-3.
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let t = format!("{v}");
        return if t.contains('.') { t } else { format!("{t}.0") };
    }
    // Scientific: Java's mantissa always has a fraction digit, and its exponent a capital E.
    let t = format!("{v:e}");
    let (mantissa, exp) = t.split_once('e').unwrap_or((&t, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_as_java_writes_doubles() {
        assert_eq!(java_double(5.0), "5.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(-1.0), "-1.0");
        assert_eq!(java_double(0.25), "0.25");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(12345678.0), "1.2345678E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::INFINITY), "+Inf");
    }

    fn status(synced: bool) -> MemberStatus {
        let board = crate::net::status::StatusBoard::default();
        board.looking();
        board.decided(ServerState::Following, 2);
        if synced {
            board.synced(Some(15));
        }
        board.received(false);
        board.received(true);
        let mut s = board.read();
        s.node_count = 5;
        s
    }

    #[test]
    fn a_synced_follower_has_javas_families_and_a_looking_one_no_gauges() {
        let setup = MemberSetup {
            speaks: "3.8.0".into(),
            ..MemberSetup::default()
        };
        let text = exposition(&status(true), &setup, 3, None);
        assert!(
            text.contains(
                "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 5.0\n"
            ),
            "{text}"
        );
        assert!(text.contains("\nquorum_size 3.0\n"));
        assert!(text.contains("\nlooking_count 1.0\n"));
        assert!(text.contains("\nlearner_commit_received_count 1.0\n"));
        assert!(text.contains("\nfollower_sync_time{quantile=\"0.5\",} 15.0\nfollower_sync_time_count 1.0\nfollower_sync_time_sum 15.0\n"), "{text}");
        assert!(text.contains("\nreadlatency{quantile=\"0.99\",} NaN\n"));
        let families = text.matches("# TYPE ").count();
        assert_eq!(
            families,
            SERVER_METRICS.len() + SERVING_GAUGES.len() + QUOTA_GAUGE_SETS.len()
        );
        let looking = exposition(&status(false), &setup, 3, None);
        assert!(!looking.contains("znode_count"));
        assert_eq!(looking.matches("# TYPE ").count(), SERVER_METRICS.len());
    }
}
