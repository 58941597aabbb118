//! The driver: one tokio task that runs an [`Election`] over a [`Manager`], and the rules for
//! what a decided node does without Zab (see `docs/join.md`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::manager::{Manager, NetConfig, Received};
use crate::election::{Election, ElectionConfig, Output};
use crate::wire::{Notification, ServerState};

/// Everything a node runs with.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub election: ElectionConfig,
    pub net: NetConfig,
    /// A follower whose election connection to its leader stays down this long looks again
    /// (tickTime * syncLimit, a Java follower's read timeout on its leader).
    pub leader_gone_ms: u64,
    /// A leader nobody syncs with steps down after this long (initLimit * tickTime).
    pub leader_sync_ms: u64,
    /// Stop after the first decision.
    pub once: bool,
}

/// A state change, as printed by `--once` and `--events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateEvent {
    /// The decided leader (LOOKING: my proposal).
    pub leader: i64,
    pub state: &'static str,
    pub election_epoch: i64,
    pub zxid: i64,
    pub peer_epoch: i64,
    /// Milliseconds since this election started (0 for LOOKING).
    pub took_ms: u64,
}

/// How often a decided node checks on its leader or followers.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Runs the node until the first decision (`once`) or forever, sending every state change to
/// `events`. Fails only when the election address cannot be bound.
pub async fn run(
    cfg: NodeConfig,
    events: mpsc::UnboundedSender<StateEvent>,
) -> std::io::Result<()> {
    let (mgr, mut rx) = Manager::start(cfg.net.clone()).await?;
    let mut node = Node {
        el: Election::new(cfg.election.clone()),
        mgr,
        cfg,
        epoch0: Instant::now(),
        started_at: 0,
        decided_at: 0,
        leader_down_since: None,
        newer_looking: BTreeMap::new(),
        events,
    };
    node.start();
    loop {
        if node.flush() {
            return Ok(());
        }
        let wait = match node.el.next_deadline() {
            Some(at) => Duration::from_millis(at.saturating_sub(node.now())),
            None => CHECK_EVERY,
        };
        tokio::select! {
            r = rx.recv() => match r {
                Some(r) => node.on_received(r),
                None => return Ok(()),
            },
            _ = tokio::time::sleep(wait) => node.on_tick(),
        }
    }
}

struct Node {
    el: Election,
    mgr: Manager,
    cfg: NodeConfig,
    epoch0: Instant,
    started_at: u64,
    decided_at: u64,
    leader_down_since: Option<u64>,
    /// Voters whose latest notification, since my decision, is LOOKING in a newer round.
    newer_looking: BTreeMap<i64, i64>,
    events: mpsc::UnboundedSender<StateEvent>,
}

impl Node {
    fn now(&self) -> u64 {
        self.epoch0.elapsed().as_millis() as u64
    }

    fn start(&mut self) {
        let now = self.now();
        self.started_at = now;
        self.leader_down_since = None;
        self.newer_looking.clear();
        self.el.start(now);
        let p = self.el.proposal();
        let _ = self.events.send(StateEvent {
            leader: p.leader,
            state: ServerState::Looking.name(),
            election_epoch: self.el.logical_clock(),
            zxid: p.zxid,
            peer_epoch: p.peer_epoch,
            took_ms: 0,
        });
    }

    /// Carries out the election's outputs; true when the node should stop.
    fn flush(&mut self) -> bool {
        while let Some(o) = self.el.poll_output() {
            match o {
                Output::Send { to, notification } => self.send(to, &notification),
                Output::SetTimer { .. } => {} // the loop sleeps until next_deadline()
                Output::Decided { state, vote, lc } => {
                    self.decided_at = self.now();
                    let took_ms = self.decided_at - self.started_at;
                    info!(
                        "{} - LEADER ELECTION TOOK - {took_ms} MS (leader {}, round 0x{lc:x})",
                        state.name(),
                        vote.leader
                    );
                    let _ = self.events.send(StateEvent {
                        leader: vote.leader,
                        state: state.name(),
                        election_epoch: vote.election_epoch,
                        zxid: vote.zxid,
                        peer_epoch: vote.peer_epoch,
                        took_ms,
                    });
                    if self.cfg.once {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn send(&self, to: i64, n: &Notification) {
        info!(
            "Sending Notification: {} (n.leader), 0x{:x} (n.zxid), 0x{:x} (n.round), {to} (recipient), {} (myid), 0x{:x} (n.peerEpoch), state {}",
            n.leader,
            n.zxid,
            n.election_epoch,
            self.el.my_id(),
            n.effective_peer_epoch(),
            n.state.name()
        );
        match n.encode() {
            Ok(bytes) => self.mgr.to_send(to, bytes),
            Err(e) => warn!("Not sending a notification to {to}: {e}"),
        }
    }

    fn on_received(&mut self, r: Received) {
        let n = match Notification::decode(&r.payload) {
            Ok(n) => n,
            Err(e) => {
                warn!(
                    "Skipping the processing of a partial / malformed response message sent by sid={} ({}), length {}: {e}",
                    r.from,
                    r.addr,
                    r.payload.len()
                );
                return;
            }
        };
        let decided = self.el.state() != ServerState::Looking;
        // Whatever the election logs about this message names the peer's sid and address.
        let span = tracing::warn_span!("peer", sid = r.from, addr = %r.addr);
        span.in_scope(|| self.el.on_notification(self.now(), r.from, &n));
        if decided && self.cfg.election.quorum.is_voter(r.from) {
            if n.state == ServerState::Looking && n.election_epoch > self.el.logical_clock() {
                self.newer_looking.insert(r.from, n.election_epoch);
            } else {
                self.newer_looking.remove(&r.from);
            }
            self.check_decided();
        }
    }

    fn on_tick(&mut self) {
        let now = self.now();
        if self.el.state() == ServerState::Looking {
            if self.el.next_deadline().is_some_and(|d| now >= d) {
                let delivered = self.mgr.have_delivered();
                self.el.on_timer(now, delivered);
                if !delivered {
                    self.mgr.connect_all();
                }
            }
            return;
        }
        self.check_decided();
    }

    /// The post-decision rules (docs/join.md).
    fn check_decided(&mut self) {
        let now = self.now();
        let state = self.el.state();
        let leader = self.el.current_vote().leader;
        let why = if self.newer_looking.contains_key(&leader) {
            Some(format!("leader {leader} is LOOKING in a newer round"))
        } else if !self.newer_looking.is_empty()
            && self
                .cfg
                .election
                .quorum
                .contains_quorum(&self.newer_looking.keys().copied().collect())
        {
            Some(format!(
                "a quorum of voters {:?} is LOOKING in a newer round",
                self.newer_looking.keys().collect::<Vec<_>>()
            ))
        } else if state == ServerState::Leading
            && now.saturating_sub(self.decided_at) >= self.cfg.leader_sync_ms
        {
            Some(format!(
                "no follower synced within initLimit*tickTime = {} ms",
                self.cfg.leader_sync_ms
            ))
        } else if state != ServerState::Leading {
            if self.mgr.is_connected(leader) {
                self.leader_down_since = None;
                None
            } else {
                let since = *self.leader_down_since.get_or_insert(now);
                self.mgr.connect_one(leader);
                (now.saturating_sub(since) >= self.cfg.leader_gone_ms).then(|| {
                    format!(
                        "the election connection to leader {leader} has been down for {} ms",
                        now - since
                    )
                })
            }
        } else {
            None
        };
        if let Some(why) = why {
            info!("{}: {why}; looking for a leader again", state.name());
            self.start();
        }
    }
}
