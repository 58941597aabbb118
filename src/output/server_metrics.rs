//! Java 3.8's `ServerMetrics` and the gauges its server registers: the names and kinds that
//! `mntr`, the AdminServer's `monitor` and the Prometheus endpoint report alike, and zkfle's
//! value for each where it has the quantity (the rest stay idle: zkfle serves no clients).

use crate::net::dialect::JavaRelease;
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
pub const SERVING_GAUGES: &[&str] = &[
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

/// The families 3.9.0 added (the AdminServer's snapshot and restore commands, ZOOKEEPER-4570).
pub const SERVER_METRICS_SINCE_3_9: &[(&str, Kind)] = &[
    ("restore_time", Basic),
    ("restore_error_count", Counter),
    ("restore_rate_limited_count", Counter),
    ("snapshot_error_count", Counter),
    ("snapshot_rate_limited_count", Counter),
];

/// The `ServerMetrics` families of `release` (3.8's for 3.8 and older; zkfle's tests compare
/// 3.8.0's and 3.9.5's).
pub fn families(release: JavaRelease) -> impl Iterator<Item = &'static (&'static str, Kind)> {
    let since_3_9: &[(&str, Kind)] = if release >= JavaRelease::new(3, 9, 0) {
        SERVER_METRICS_SINCE_3_9
    } else {
        &[]
    };
    SERVER_METRICS.iter().chain(since_3_9)
}

/// zkfle's count for a `Counter` family (0 for what it never does).
pub fn counter(name: &str, s: &MemberStatus) -> u64 {
    let m = &s.metrics;
    match name {
        "looking_count" => m.looking_count,
        "learner_proposal_received_count" => m.proposals_received,
        "learner_commit_received_count" => m.commits_received,
        "digest_mismatches_count" => m.digest_mismatches,
        _ => 0,
    }
}

/// zkfle's observations for a summary family (`Basic`, `Advanced`); none for what it never
/// measures.
pub fn samples<'a>(name: &str, s: &'a MemberStatus) -> Option<&'a Samples> {
    let m = &s.metrics;
    match name {
        "election_time" => Some(&m.election_time),
        // A leader's sync of its learners is not its own sync with a leader.
        "follower_sync_time" if s.state != ServerState::Leading => Some(&m.follower_sync_time),
        _ => None,
    }
}
