//! The driver: one tokio task that runs an [`Election`] over a [`Manager`], and the rules for
//! what a decided node does without Zab (see `docs/join.md`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::{info, warn};

use super::follow::{AckStats, Activated, ConfigNews, FollowConfig, FollowEnd, ReconfigIo, follow};
use super::lead::{LeadConfig, LeadEnd, lead};
use super::manager::{Manager, NetConfig, Received};
use crate::election::decided::{AfterDecision, Limits};
use crate::election::{Election, ElectionConfig, Event, Network, NewConfig};
use crate::storage::Storage;
use crate::wire::{Notification, ServerState};
use crate::zab::{LearnerConfig, ReconfigState};

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
    /// Follow a decided leader on its quorum port (Zab), with this durable state.
    pub zab: Option<ZabConfig>,
    /// With `reconfigEnabled=true`: the zoo.cfg that activated configs are written beside
    /// (`zoo.cfg.dynamic.<version>`) and into (docs/reconfig.md).
    pub reconfig_cfg_path: Option<PathBuf>,
    /// The client port to answer four-letter words on, when the config names one.
    pub client_port: Option<super::client_port::ClientPortConfig>,
    /// The AdminServer, unless `admin.enableServer=false`.
    pub admin: Option<super::admin::AdminConfig>,
    /// The Prometheus endpoint, when `metricsProvider.className` names Java's provider.
    pub metrics: Option<super::metrics::MetricsConfig>,
    /// What the node is doing, for the client port.
    pub status: super::status::StatusBoard,
}

/// What following a leader needs.
#[derive(Debug, Clone)]
pub struct ZabConfig {
    /// The data directory (its `version-2` holds the log, snapshot and epoch files).
    pub data_dir: PathBuf,
    /// When to snapshot and purge (`snapCount`, `autopurge.*`), the config node's text.
    pub snap: crate::storage::db::SnapConfig,
    /// New log files grow in steps of this many bytes (`zookeeper.preAllocSize`).
    pub prealloc: u64,
    /// The quorum address of every other voter.
    pub quorum_addrs: BTreeMap<i64, SocketAddr>,
    /// My own quorum addresses (several with multi-address), where I listen when elected
    /// (docs/lead.md).
    pub my_quorum_addrs: Vec<SocketAddr>,
    pub learner: LearnerConfig,
}

/// How a Zab session (following or leading) ended; the storage comes back with it.
enum ZabEnd {
    Follow(Storage, AckStats, FollowEnd),
    Lead(Storage, LeadEnd),
}

type ZabTask = tokio::task::JoinHandle<ZabEnd>;

/// A state change, as printed by `--once` and `--events`.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    let storage = match &cfg.zab {
        Some(z) => {
            let mut st = Storage::open(&z.data_dir)?;
            st.set_prealloc(z.prealloc);
            st.set_snap_config(z.snap.clone())?;
            info!(
                target: super::STATE_LOG,
                "data dir {}: acceptedEpoch {}, currentEpoch {}, last zxid 0x{:x}",
                st.dir().display(),
                st.accepted_epoch(),
                st.current_epoch(),
                st.last_zxid()
            );
            cfg.status.tree(st.tree());
            Some(st)
        }
        None => None,
    };
    if let Some(port) = cfg.client_port.clone() {
        tokio::spawn(super::client_port::serve(port, cfg.status.clone()));
    }
    if let Some(admin) = cfg.admin.clone() {
        tokio::spawn(super::admin::serve(admin, cfg.status.clone()));
    }
    if let Some(metrics) = cfg.metrics.clone() {
        tokio::spawn(super::metrics::serve(metrics, cfg.status.clone()));
    }
    let mut election = cfg.election.clone();
    if let Some(st) = &storage {
        election.last_zxid = st.last_zxid();
        election.current_epoch = st.current_epoch();
    }
    let (mgr, rx) = Manager::start(cfg.net.clone()).await?;
    let after = AfterDecision::new(Limits {
        leader_gone_ms: cfg.leader_gone_ms,
        leader_sync_ms: cfg.leader_sync_ms,
    });
    let (activated_tx, mut activated_rx) = mpsc::unbounded_channel();
    let mut node = Node {
        activated_tx,
        el: Election::new(election),
        after,
        mgr,
        rx,
        cfg,
        epoch0: Instant::now(),
        started_at: 0,
        events,
        storage,
        ack_stats: AckStats::default(),
        unsynced_ends: 0,
        start_follow: None,
        start_lead: None,
        established_epoch: Arc::new(AtomicI64::new(-1)),
    };
    node.start();
    let mut task: Option<ZabTask> = None;
    loop {
        node.take_established_epoch();
        if node.flush() {
            return Ok(());
        }
        if let Some(fc) = node.start_follow.take()
            && let Some(mut st) = node.storage.take()
        {
            let epoch0 = node.epoch0;
            let mut stats = std::mem::take(&mut node.ack_stats);
            let pause = failed_follow_pause(node.unsynced_ends);
            task = Some(tokio::spawn(async move {
                let end = follow(fc, &mut st, &mut stats, move || {
                    epoch0.elapsed().as_millis() as u64
                })
                .await;
                if !end.synced {
                    tokio::time::sleep(pause).await;
                }
                ZabEnd::Follow(st, stats, end)
            }));
        }
        if let Some(lc) = node.start_lead.take()
            && let Some(mut st) = node.storage.take()
        {
            let epoch0 = node.epoch0;
            task = Some(tokio::spawn(async move {
                let end = lead(lc, &mut st, move || epoch0.elapsed().as_millis() as u64).await;
                ZabEnd::Lead(st, end)
            }));
        }
        let wait = match node.el.next_deadline() {
            Some(at) => Duration::from_millis(at.saturating_sub(node.now())),
            None => CHECK_EVERY,
        };
        tokio::select! {
            r = node.rx.recv() => match r {
                Some(r) => node.on_received(r),
                None => return Ok(()),
            },
            Some(news) = activated_rx.recv() => node.on_config_news(news),
            r = async { task.as_mut().expect("guarded").await }, if task.is_some() => {
                task = None;
                // What the session reported before it ended comes first: the next election
                // runs under the config it activated (select! picks among ready branches at
                // random; zkfle once began its election as a participant, then took the
                // demotion that had ended the session).
                while let Ok(news) = activated_rx.try_recv() {
                    node.on_config_news(news);
                }
                match r {
                    Ok(ZabEnd::Follow(st, stats, end)) => node.on_follow_end(st, stats, end),
                    Ok(ZabEnd::Lead(st, end)) => node.on_lead_end(st, end),
                    Err(e) => return Err(std::io::Error::other(format!("Zab task: {e}"))),
                }
            }
            _ = tokio::time::sleep(wait) => node.on_tick(),
        }
    }
}

/// How long a follow session that ends unsynced waits before the election starts again,
/// after `before` such sessions in a row: nothing the first time (a leader that just went
/// away), then 50 ms doubling to 2 s (a leader that fails every session).
fn failed_follow_pause(before: u32) -> Duration {
    match before {
        0 => Duration::ZERO,
        n => Duration::from_millis(50u64 << (n - 1).min(6)).min(Duration::from_secs(2)),
    }
}

struct Node {
    /// Where follow sessions report the configs they see and activate.
    activated_tx: mpsc::UnboundedSender<ConfigNews>,
    el: Election,
    mgr: Manager,
    /// What the connection manager received.
    rx: mpsc::Receiver<Received>,
    cfg: NodeConfig,
    epoch0: Instant,
    started_at: u64,
    /// The post-decision rules (docs/join.md).
    after: AfterDecision,
    events: mpsc::UnboundedSender<StateEvent>,
    /// The durable state; `None` without Zab or while a follow session holds it.
    storage: Option<Storage>,
    ack_stats: AckStats,
    /// Follow sessions in a row that ended before syncing (a leader that fails every
    /// session at once would otherwise be re-elected and redialled hundreds of times a
    /// second).
    unsynced_ends: u32,
    /// A follow session to start (set on a FOLLOWING decision).
    start_follow: Option<FollowConfig>,
    /// A leadership to start (set on a LEADING decision).
    start_lead: Option<LeadConfig>,
    /// The epoch the follow session established at UPTODATE, -1 when none is pending.
    established_epoch: Arc<AtomicI64>,
}

impl Node {
    fn now(&self) -> u64 {
        self.epoch0.elapsed().as_millis() as u64
    }

    /// Once Zab is up to date with the leader, the vote carries the new epoch, as Java's
    /// `updateElectionVote` does (ZOOKEEPER-1732): a server joining later counts a FOLLOWING
    /// vote only when its peer epoch equals the leader's, so without this zkfle's vote would
    /// not count towards a joiner's quorum after any election zkfle took part in.
    fn take_established_epoch(&mut self) {
        let epoch = self.established_epoch.swap(-1, Ordering::AcqRel);
        if epoch >= 0
            && matches!(
                self.el.state(),
                ServerState::Following | ServerState::Observing
            )
        {
            self.el.set_peer_epoch(epoch);
        }
    }

    /// Zab is following or leading: the election-port rules do not apply.
    fn zab_following(&self) -> bool {
        self.cfg.zab.is_some() && self.storage.is_none()
    }

    fn on_follow_end(&mut self, st: Storage, stats: AckStats, end: FollowEnd) {
        let (n, p50, p99, max) = stats.summary();
        let s = st.stats();
        info!(
            "follow session ended ({}synced): {}; ACK latency over {n} proposals p50 {p50} us p99 {p99} us max {max} us; {} fsyncs, {} txns, mean {} us, max {} us",
            if end.synced { "" } else { "never " },
            end.reason,
            s.syncs,
            s.txns,
            s.total.as_micros() / u128::from(s.syncs.max(1)),
            s.max.as_micros()
        );
        self.storage = Some(st);
        self.ack_stats = stats;
        if end.synced {
            self.unsynced_ends = 0;
            info!(
                target: super::STATE_LOG,
                "FOLLOWING: {}; looking for a leader again",
                end.reason
            );
        } else {
            self.unsynced_ends = self.unsynced_ends.saturating_add(1);
            // Java warns too ("Exception when following the leader").
            warn!(
                "FOLLOWING: never synced: {}; looking for a leader again{}",
                end.reason,
                match failed_follow_pause(self.unsynced_ends).as_millis() {
                    0 => String::new(),
                    ms => format!(" (the next failed session pauses {ms} ms)"),
                }
            );
        }
        self.start();
    }

    fn on_lead_end(&mut self, st: Storage, end: LeadEnd) {
        info!(
            target: super::STATE_LOG,
            "LEADING: {}{}; acceptedEpoch {}, currentEpoch {}, last zxid 0x{:x}; looking for a leader again",
            end.reason,
            if end.handed_over {
                " (handed over)"
            } else {
                ""
            },
            st.accepted_epoch(),
            st.current_epoch(),
            st.last_zxid()
        );
        self.storage = Some(st);
        self.start();
    }

    fn start(&mut self) {
        if let Some(st) = &self.storage {
            self.el.set_log_state(st.last_zxid(), st.current_epoch());
        }
        let now = self.now();
        self.started_at = now;
        self.after.reset();
        self.el.start(now);
        self.cfg.status.looking();
        let p = self.el.proposal();
        info!(
            target: super::STATE_LOG,
            "LOOKING (round 0x{:x}), voting for {} (zxid 0x{:x}, peerEpoch 0x{:x})",
            self.el.logical_clock(),
            p.leader,
            p.zxid,
            p.peer_epoch
        );
        let _ = self.events.send(StateEvent {
            leader: p.leader,
            state: ServerState::Looking.name(),
            election_epoch: self.el.logical_clock(),
            zxid: p.zxid,
            peer_epoch: p.peer_epoch,
            took_ms: 0,
        });
    }

    /// Carries out the election's work (a config to adopt, then the sends), then acts on
    /// its events; true when the node should stop.
    fn flush(&mut self) -> bool {
        let ready = self.el.ready();
        if let Some(NewConfig { config, activation }) = ready.config {
            if let Some(path) = &self.cfg.reconfig_cfg_path {
                match crate::zoocfg::activate_config(path, &config, self.el.my_id()) {
                    Ok(p) => info!(
                        "activated config version 0x{:x} from the election: {}",
                        config.version(),
                        p.display()
                    ),
                    Err(e) => warn!(
                        "cannot write config version 0x{:x} beside {}: {e}",
                        config.version(),
                        path.display()
                    ),
                }
            }
            self.apply_config(&config, activation.role);
        }
        match ready.network {
            Some(Network::Halt) => {
                let left = self
                    .el
                    .next_deadline()
                    .map_or(0, |d| d.saturating_sub(self.now()));
                info!(
                    "election connections and port closed; a new election starts when this one's wait ends, in {left} ms (as Java's does)"
                );
                self.mgr.shutdown();
            }
            Some(Network::Restart) => {
                // What the old connections delivered is not the new election's.
                while self.rx.try_recv().is_ok() {}
                self.mgr.restart();
            }
            None => {}
        }
        for (to, notification) in &ready.send {
            self.send(*to, notification);
        }
        while let Some(ev) = self.el.poll_event() {
            match ev {
                Event::Decided { state, vote, lc } => {
                    self.cfg.status.decided(state, vote.leader);
                    let now = self.now();
                    self.after.decided(now);
                    let took_ms = now - self.started_at;
                    if state == ServerState::Observing {
                        // Java's observers log no `LEADER ELECTION TOOK` line; tools that
                        // read it count followers and leaders only.
                        info!(
                            target: super::STATE_LOG,
                            "OBSERVING: the election took {took_ms} ms (leader {}, round 0x{lc:x})",
                            vote.leader
                        );
                    } else {
                        info!(
                            target: super::STATE_LOG,
                            "{} - LEADER ELECTION TOOK - {took_ms} MS (leader {}, round 0x{lc:x})",
                            state.name(),
                            vote.leader
                        );
                    }
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
                    if let Some(z) = &self.cfg.zab {
                        if state == ServerState::Leading {
                            match z.my_quorum_addrs.clone() {
                                listen if !listen.is_empty() => {
                                    self.start_lead = Some(LeadConfig {
                                        my_sid: self.el.my_id(),
                                        listen,
                                        quorum: self.cfg.election.quorum.clone(),
                                        config: self.cfg.election.quorum.config().clone(),
                                        tick_ms: z.learner.tick_ms,
                                        init_limit: z.learner.init_limit,
                                        sync_limit: z.learner.sync_limit,
                                        tls: self.cfg.net.tls.clone(),
                                        sasl: self.cfg.net.sasl.clone(),
                                        status: self.cfg.status.clone(),
                                    })
                                }
                                _ => warn!(
                                    "elected LEADER, but my server line has no quorum address to listen on: stepping down after initLimit*tickTime = {} ms",
                                    self.cfg.leader_sync_ms
                                ),
                            }
                        } else if matches!(state, ServerState::Following | ServerState::Observing) {
                            match z.quorum_addrs.get(&vote.leader) {
                                Some(addr) => {
                                    let mut learner = z.learner.clone();
                                    // The leader's vote: the epoch the ensemble has reached,
                                    // which bounds the epoch its LEADERINFO may announce.
                                    learner.known_epoch = vote.peer_epoch;
                                    learner.config_version = self.el.quorum().version() as i64;
                                    // My learner type now, not at start: a reconfig may have
                                    // promoted or demoted me. (A promoted observer that still
                                    // sent OBSERVERINFO was an observer to the leader: its
                                    // ACKs were never counted, docs/reconfig.md.)
                                    learner.observer = state == ServerState::Observing;
                                    let reconfig =
                                        self.cfg.reconfig_cfg_path.clone().map(|cfg_path| {
                                            learner.reconfig = Some(ReconfigState {
                                                config: self.el.quorum().config().clone(),
                                                role: self.el.role(),
                                                leader_sid: vote.leader,
                                            });
                                            ReconfigIo {
                                                cfg_path,
                                                news: self.activated_tx.clone(),
                                            }
                                        });
                                    self.start_follow = Some(FollowConfig {
                                        leader_sid: vote.leader,
                                        leader_addr: *addr,
                                        learner,
                                        established_epoch: self.established_epoch.clone(),
                                        reconfig,
                                        tls: self.cfg.net.tls.clone(),
                                        sasl: self.cfg.net.sasl.clone(),
                                        status: self.cfg.status.clone(),
                                    })
                                }
                                None => warn!(
                                    "leader {} has no quorum address in the config; not following it",
                                    vote.leader
                                ),
                            }
                        }
                    }
                }
            }
        }
        false
    }

    fn on_config_news(&mut self, news: ConfigNews) {
        match news {
            ConfigNews::Activated(a) => self.on_activated(a),
            ConfigNews::Seen(c) => match crate::election::QuorumVerifier::from_config(&c) {
                Ok(q) => self.el.set_next_config(q),
                Err(e) => warn!("last seen config 0x{:x} is not usable: {e}", c.version()),
            },
        }
    }

    /// A follow session activated a config (its files are written): the election, the
    /// connections and Zab run under it from now on. Java restarts its election (idle while
    /// following) with a new connection manager; zkfle keeps its connections to the members
    /// that stay, connects to the new ones and drops the removed ones. Like Java's new
    /// election, ours counts its rounds from 0 again when the membership changed: else a
    /// LOOKING zkfle observer one round ahead of a LOOKING Java voter answers each of its
    /// votes as a lagging voter's, the voter answers each of a non-voter's, and the two
    /// exchange hundreds of notifications a second (seen in a recording of zkfle demoted to
    /// observer by reconfig).
    fn on_activated(&mut self, a: Activated) {
        if a.config.version() <= self.el.quorum().version() {
            return;
        }
        self.apply_config(&a.config, a.activation.role);
        if a.activation.members_changed {
            self.el.restart_logical_clock();
        }
        if let Some(d) = a.designated_leader
            && a.activation.leader_changed
        {
            info!("Suggested leader: {d}");
        }
    }

    fn apply_config(&mut self, config: &crate::wire::QuorumConfig, role: crate::wire::Role) {
        let quorum = match crate::election::QuorumVerifier::from_config(config) {
            Ok(q) => q,
            Err(e) => {
                warn!("config 0x{:x} is not usable: {e}", config.version());
                return;
            }
        };
        let me = self.el.my_id();
        let old: Vec<i64> = self
            .cfg
            .election
            .quorum
            .config()
            .servers()
            .map(|s| s.id)
            .collect();
        for s in config.servers().filter(|s| s.id != me) {
            self.mgr
                .set_peer(s.id, s.addresses.iter().map(|a| a.election()).collect());
            if let Some(z) = &mut self.cfg.zab
                && let Some(addr) = s.addresses.iter().find_map(|a| a.quorum_socket_addr())
            {
                z.quorum_addrs.insert(s.id, addr);
            }
        }
        for sid in old.into_iter().filter(|sid| config.server(*sid).is_none()) {
            self.mgr.remove_peer(sid);
            if let Some(z) = &mut self.cfg.zab {
                z.quorum_addrs.remove(&sid);
            }
        }
        info!(
            "config 0x{:x} in force: voters {:?}, observers {:?}; I am {}",
            config.version(),
            quorum.voters().collect::<Vec<_>>(),
            quorum.observers().collect::<Vec<_>>(),
            crate::reconfig::Membership::of(config, me).name()
        );
        self.cfg.election.quorum = quorum.clone();
        self.cfg.election.role = role;
        self.el.reconfigure(quorum, role);
        for sid in self.cfg.election.quorum.voters().filter(|s| *s != me) {
            self.mgr.connect_one(sid);
        }
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
        let faults = super::faults::get();
        if faults.drop_vote() {
            // Lost on the way, not never sent: the connection layer still connects and keeps
            // its slot for `to`, as after a real send. Without a slot for any peer
            // `haveDelivered()` is false and `connectAll()` dials nobody: the election would
            // never send again (the first 100-schedule campaign found that state).
            tracing::debug!("chaos fault: notification to {to} dropped");
            self.mgr.connect_one(to);
            return;
        }
        match (n.encode(), faults.vote_delay()) {
            (Ok(bytes), None) => self.mgr.to_send(to, bytes),
            (Ok(bytes), Some(delay)) => self.mgr.to_send_later(to, bytes, delay),
            (Err(e), _) => warn!("Not sending a notification to {to}: {e}"),
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
            self.after
                .on_notification(r.from, &n, self.el.logical_clock());
            self.check_decided();
        }
    }

    fn on_tick(&mut self) {
        let now = self.now();
        if self.el.state() == ServerState::Looking {
            if self.el.next_deadline().is_some_and(|d| now >= d) {
                let delivered = self.mgr.have_delivered();
                // A halted election's poll end restarts it over a fresh manager, which dials
                // whom the new election sends to; the old queues are not redialled.
                let halted = self.el.halted();
                self.el.on_timer(now, delivered);
                if !delivered && !halted {
                    self.mgr.connect_all();
                }
            }
            return;
        }
        self.check_decided();
    }

    /// The post-decision rules (docs/join.md), unless Zab runs or is about to.
    fn check_decided(&mut self) {
        if self.zab_following() || self.start_follow.is_some() || self.start_lead.is_some() {
            return;
        }
        let state = self.el.state();
        let leader = self.el.current_vote().leader;
        let check = self.after.check(
            self.now(),
            state,
            leader,
            self.mgr.is_connected(leader),
            &self.cfg.election.quorum,
        );
        if check.dial_leader {
            self.mgr.connect_one(leader);
        }
        if let Some(why) = check.look_again {
            info!(
                target: super::STATE_LOG,
                "{}: {why}; looking for a leader again",
                state.name()
            );
            self.start();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_follow_sessions_pause_longer_each_time_up_to_two_seconds() {
        let ms = |n| failed_follow_pause(n).as_millis();
        assert_eq!(
            (0..9).map(ms).collect::<Vec<_>>(),
            [0, 50, 100, 200, 400, 800, 1600, 2000, 2000]
        );
        assert_eq!(ms(u32::MAX), 2000);
    }
}
