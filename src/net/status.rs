//! What `zkfle join` is doing now, as monitoring asks for it on the client port (four-letter
//! words, `src/net/client_port.rs`): the node and its Zab sessions write it, the client port
//! reads it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::storage::tree::WriteStat;
use crate::wire::ServerState;
use crate::zab::leader::LeaderGauges;

/// The member's state and its data tree's figures, shared.
#[derive(Debug, Clone)]
pub struct StatusBoard(Arc<Mutex<MemberStatus>>);

/// One reading of the board.
#[derive(Debug, Clone)]
pub struct MemberStatus {
    /// The election's state: LOOKING until a decision, then the decided role.
    pub state: ServerState,
    /// The decided leader (LOOKING: none).
    pub leader: Option<i64>,
    /// Synced with the leader (following or observing), or a quorum synced (leading): a Java
    /// server in that state serves, so monitoring sees it as running.
    pub synced: bool,
    /// The last zxid its data tree processed.
    pub last_zxid: i64,
    /// The data tree's node count as Java counts it (the root twice: `nodes` holds it under
    /// "" and "/").
    pub node_count: u64,
    pub ephemerals: u64,
    /// Bytes of paths and data, as Java's `approximateDataSize`.
    pub data_size: u64,
    /// When the process started, for `uptime`.
    pub started: Instant,
    /// When the figures that walk the tree (ephemerals, data size) were last taken.
    walked: Option<Instant>,
    /// Java's ServerMetrics that zkfle has the quantity for (the metrics endpoint).
    pub metrics: MemberMetrics,
    /// When the current election began.
    looking_since: Option<Instant>,
    /// Leading: the leader's gauges, and since when its epoch is established (Java's
    /// `leader_uptime` counts from there).
    pub leading: Option<LeaderGauges>,
    pub leading_since: Option<Instant>,
}

/// Counts and timings a Java member keeps in `ServerMetrics`, where zkfle has them.
#[derive(Debug, Clone, Default)]
pub struct MemberMetrics {
    /// Times the member went LOOKING (`looking_count`).
    pub looking_count: u64,
    /// Milliseconds from LOOKING to each decision (`election_time`).
    pub election_time: Samples,
    /// Milliseconds from a learner's connect to UPTODATE (`follower_sync_time`).
    pub follower_sync_time: Samples,
    /// PROPOSALs and COMMITs received while following, after the sync
    /// (`learner_proposal_received_count`, `learner_commit_received_count`).
    pub proposals_received: u64,
    pub commits_received: u64,
    /// Txns whose digest disagreed with the tree's (`digest_mismatches_count`).
    pub digest_mismatches: u64,
    /// The data tree's writes per top-level znode (`write_per_namespace`).
    pub writes_per_namespace: imbl::OrdMap<Arc<str>, WriteStat>,
}

/// A summary's observations: count and sum since start, and the values of the last ten
/// minutes (Java's Prometheus summaries' window) for quantiles, at most [`Samples::KEPT`].
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub count: u64,
    pub sum: f64,
    /// The least and greatest values since start (Java's `AvgMinMaxCounter`).
    least: f64,
    greatest: f64,
    recent: std::collections::VecDeque<(Instant, f64)>,
}

impl Samples {
    pub const KEPT: usize = 1024;
    const WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

    pub fn add(&mut self, v: f64) {
        if self.count == 0 || v < self.least {
            self.least = v;
        }
        if self.count == 0 || v > self.greatest {
            self.greatest = v;
        }
        self.count += 1;
        self.sum += v;
        if self.recent.len() == Self::KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((Instant::now(), v));
    }

    /// The least value since start, 0 without any (as Java's `min_` in `mntr`).
    pub fn min(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.least }
    }

    /// The greatest value since start, 0 without any.
    pub fn max(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.greatest }
    }

    /// The `q` quantile of the last ten minutes' values (NaN without any, as Java's).
    pub fn quantile(&self, q: f64) -> f64 {
        let mut v: Vec<f64> = self
            .recent
            .iter()
            .filter(|(t, _)| t.elapsed() < Self::WINDOW)
            .map(|(_, v)| *v)
            .collect();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i]
    }
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard(Arc::new(Mutex::new(MemberStatus {
            state: ServerState::Looking,
            leader: None,
            synced: false,
            last_zxid: 0,
            node_count: 0,
            ephemerals: 0,
            data_size: 0,
            started: Instant::now(),
            walked: None,
            metrics: MemberMetrics::default(),
            looking_since: None,
            leading: None,
            leading_since: None,
        })))
    }
}

impl StatusBoard {
    /// The board now.
    pub fn read(&self) -> MemberStatus {
        self.lock().clone()
    }

    /// The election started: LOOKING, not serving.
    pub fn looking(&self) {
        let mut s = self.lock();
        s.state = ServerState::Looking;
        s.leader = None;
        s.synced = false;
        s.leading = None;
        s.leading_since = None;
        s.metrics.looking_count += 1;
        s.looking_since = Some(Instant::now());
    }

    /// The election decided `state` with `leader`; serving only once synced.
    pub fn decided(&self, state: ServerState, leader: i64) {
        let mut s = self.lock();
        s.state = state;
        s.leader = Some(leader);
        s.synced = false;
        s.leading = None;
        s.leading_since = None;
        if let Some(t) = s.looking_since.take() {
            s.metrics.election_time.add(t.elapsed().as_millis() as f64);
        }
    }

    /// Synced (a follower's UPTODATE after `sync_ms` from its connect, a leader's quorum of
    /// NEWLEADER ACKs).
    pub fn synced(&self, sync_ms: Option<u64>) {
        let mut s = self.lock();
        s.synced = true;
        if let Some(ms) = sync_ms {
            s.metrics.follower_sync_time.add(ms as f64);
        }
    }

    /// The leader's gauges now; `established`: its epoch is (from then on, `leader_uptime`).
    pub fn leader_gauges(&self, gauges: LeaderGauges, established: bool) {
        let mut s = self.lock();
        s.leading = Some(gauges);
        if established && s.leading_since.is_none() {
            s.leading_since = Some(Instant::now());
        }
    }

    /// A PROPOSAL (`commit` false) or COMMIT received while following, after the sync.
    pub fn received(&self, commit: bool) {
        let mut s = self.lock();
        if commit {
            s.metrics.commits_received += 1;
        } else {
            s.metrics.proposals_received += 1;
        }
    }

    /// The data tree's figures after the txns applied so far: the zxid and node count each
    /// time, what needs a walk of the tree at most once a second.
    pub fn tree(&self, tree: &crate::storage::tree::DataTree) {
        let mut s = self.lock();
        s.last_zxid = tree.last_processed_zxid;
        s.metrics.digest_mismatches = tree.digest_mismatches;
        s.metrics.writes_per_namespace = tree.writes_per_namespace.clone();
        // zkfle keeps the root once; Java's map holds it under "" and "/".
        s.node_count = tree.node_count() as u64 + 1;
        if s.walked
            .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1))
        {
            s.ephemerals = tree.ephemeral_count() as u64;
            s.data_size = tree.approximate_data_size();
            s.walked = Some(Instant::now());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemberStatus> {
        // A writer that panicked left a whole reading behind: still good to read.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
