//! What `zkfle join` is doing now, as monitoring asks for it on the client port (four-letter
//! words, `src/net/client_port.rs`): the node and its Zab sessions write it, the client port
//! reads it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::wire::ServerState;

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
    }

    /// The election decided `state` with `leader`; serving only once synced.
    pub fn decided(&self, state: ServerState, leader: i64) {
        let mut s = self.lock();
        s.state = state;
        s.leader = Some(leader);
        s.synced = false;
    }

    /// Synced (a follower's UPTODATE, a leader's quorum of NEWLEADER ACKs).
    pub fn synced(&self) {
        self.lock().synced = true;
    }

    /// The data tree's figures after the txns applied so far: the zxid and node count each
    /// time, what needs a walk of the tree at most once a second.
    pub fn tree(&self, tree: &crate::storage::tree::DataTree) {
        let mut s = self.lock();
        s.last_zxid = tree.last_processed_zxid;
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
