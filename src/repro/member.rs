//! The repros in which zkfle is a voting member of the target's ensemble, standing in for a
//! member whose server is down (`--peer-sid`): it votes a LOOKING target into LEADING through
//! the connection manager of `zkfle join` ([`crate::net::manager`], listening on the member's
//! election address, since the target dials a lower sid back), then misbehaves.
//!
//! - ZOOKEEPER-3109, a disloyal voter: never follows, goes LOOKING again. A leader then waits
//!   for followers that never come, up to initLimit x tickTime. The fix (3.5.10/3.6+) lets a
//!   leader quit as soon as a voter it counted reports LOOKING, but only when
//!   `zookeeper.leader.maxTimeToWaitForEpoch` is set (default -1: off).
//! - ZOOKEEPER-4685: follows on the quorum port with a history the leader completes by DIFF,
//!   and ACKs the first PROPOSAL of the DIFF before it ACKs NEWLEADER (what a Java follower
//!   whose log flush overtakes its NEWLEADER ACK does). A leader establishing its epoch takes
//!   that ACK for the NEWLEADER ACK, logs "NEWLEADER ACK ... is from a different epoch",
//!   misses its quorum and shuts down.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Target, Verdict};
use crate::net::deadline::{Deadline, timed_out};
use crate::net::dialect::WireDialect;
use crate::net::manager::{Manager, NetConfig};
use crate::net::probe::{self, Answer, ProbeOptions};
use crate::net::tls::BlockingQuorumStream;
use crate::wire::quorum::{
    LearnerInfo, PROTOCOL_VERSION, QuorumItem, QuorumPacket, QuorumStreamDecoder, ptype,
};
use crate::wire::{Notification, QuorumConfig, ServerState};

/// How long a leader may take to quit after its voter went LOOKING and still count as having
/// quit because of it (the fix acts on the next notification; zkfle re-sends every 200 ms).
const QUIT_PROMPTLY: Duration = Duration::from_millis(1500);
/// How long zkfle watches a leader that does not quit.
const WATCH_LIMIT: Duration = Duration::from_secs(60);

/// What the member-based repros need: the member zkfle plays, the target's sid, the config.
struct Member {
    config: QuorumConfig,
    me: i64,
    leader: i64,
    my_addr: SocketAddr,
}

/// Checks the preconditions shared by the repros in which zkfle is a member.
fn member(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Option<Member> {
    if before.state != ServerState::Looking {
        ev.push(format!(
            "the target is {}: this repro needs a server that is LOOKING because its ensemble lacks the vote of a member whose server is down (zkfle gives that vote)",
            before.state.name()
        ));
        return None;
    }
    let Some(config) = before.config.clone().or_else(|| opts.config.clone()) else {
        ev.push("the target's answer carries no config (3.4): give the ensemble's members with --config zoo.cfg".into());
        return None;
    };
    let Some(me) = opts.peer_sid else {
        ev.push(
            "needs --peer-sid SID: the member whose server is down, whose vote zkfle gives".into(),
        );
        return None;
    };
    let Some(leader) = config
        .servers()
        .find(|s| {
            s.addresses
                .iter()
                .any(|a| a.election().socket_addr() == Some(target.addr))
        })
        .map(|s| s.id)
    else {
        ev.push(format!(
            "no member of the config has the election address {}",
            target.addr
        ));
        return None;
    };
    let Some(my_addr) = config
        .server(me)
        .and_then(|s| s.addresses.first())
        .and_then(|a| a.election().socket_addr())
    else {
        ev.push(format!(
            "member {me} is not in the config, or its election address is not an IP address"
        ));
        return None;
    };
    if me == leader {
        ev.push("--peer-sid is the target's own sid".into());
        return None;
    }
    Some(Member {
        config,
        me,
        leader,
        my_addr,
    })
}

fn runtime(ev: &mut Vec<String>) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            ev.push(format!("cannot start the runtime: {e}"));
            None
        }
    }
}

/// The election side of a member: the connection manager and the votes it sends.
struct Voter {
    manager: Manager,
    drain: tokio::task::JoinHandle<()>,
    legacy: bool,
    config_text: String,
    zxid: i64,
    round: i64,
    peer_epoch: i64,
}

impl Voter {
    fn vote(&self, state: ServerState, for_sid: i64) -> Vec<u8> {
        let n = if self.legacy {
            Notification {
                state,
                leader: for_sid,
                zxid: self.zxid,
                election_epoch: self.round,
                peer_epoch: Some(self.peer_epoch),
                version: Some(1),
                config: None,
                trailing: Vec::new(),
            }
        } else {
            Notification::current(
                state,
                for_sid,
                self.zxid,
                self.round,
                self.peer_epoch,
                self.config_text.as_bytes(),
            )
        };
        n.encode().expect("a vote encodes")
    }

    fn stop(self) {
        self.manager.shutdown();
        self.drain.abort();
    }
}

/// The target's state by a probe (1 s), `None` when it did not answer.
fn state_of(target: &Target) -> Option<ServerState> {
    let opts = ProbeOptions {
        timeout: Duration::from_secs(1),
        ..ProbeOptions::default()
    };
    probe::probe(&target.text, &opts).ok().map(|a| a.state)
}

/// Starts the member's election side, learns the target's own proposal from the notification
/// it sends zkfle (a probe shows only the last election's result while LOOKING), hands it to
/// `check`, then votes for the target with that proposal until it leads (10 s at most).
/// `Some((voter, when it led))`, or `None` with the evidence.
/// How long zkfle's member votes for the target before calling the trigger failed: its
/// finalizeWait is 200 ms, but a JVM on a busy machine can take seconds to act on a vote.
const LEADING_WAIT: Duration = Duration::from_secs(20);

async fn vote_into_leading(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    m: &Member,
    check: impl Fn(&Notification) -> Result<(), String>,
    ev: &mut Vec<String>,
) -> Option<(Voter, Instant)> {
    let legacy = super::is_34(before);
    let mut peers = BTreeMap::new();
    peers.insert(
        m.leader,
        vec![crate::wire::ElectionAddress::from_socket_addr(target.addr)],
    );
    let net = NetConfig {
        my_sid: m.me,
        listen: vec![m.my_addr],
        announce: Vec::new(),
        multi_address: false,
        peers,
        cnx_timeout: opts.timeout,
        socket_timeout: opts.timeout,
        dialect: if legacy {
            WireDialect::Legacy
        } else {
            WireDialect::Current
        },
        limits: Default::default(),
        strict_peers: false,
        tls: opts.tls.clone(),
        sasl: opts.sasl.clone(),
    };
    let (manager, mut rx) = match Manager::start(net).await {
        Ok(x) => x,
        Err(e) => {
            ev.push(format!(
                "cannot listen on member {}'s election address {} ({e}): its server must be down and on this host",
                m.me, m.my_addr
            ));
            return None;
        }
    };
    // Keep the target's latest notification; reading also keeps its connection from backing up.
    let latest: Arc<Mutex<Option<Notification>>> = Arc::default();
    let drain = {
        let latest = latest.clone();
        let leader = m.leader;
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                if r.from == leader
                    && let Ok(n) = Notification::decode(&r.payload)
                {
                    *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(n);
                }
            }
        })
    };
    let mut voter = Voter {
        manager,
        drain,
        legacy,
        config_text: m.config.to_string(),
        zxid: i64::MIN,
        round: before.election_epoch,
        peer_epoch: i64::MIN,
    };
    // 1. Learn the target's proposal: a vote for zkfle's member that loses to anything.
    let start = Instant::now();
    let proposal = loop {
        let seen = latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|n| n.state == ServerState::Looking);
        if let Some(n) = seen {
            break Some(n);
        }
        if start.elapsed() > Duration::from_secs(5) {
            break None;
        }
        voter
            .manager
            .to_send(m.leader, voter.vote(ServerState::Looking, m.me));
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let Some(proposal) = proposal else {
        ev.push(format!(
            "the target sent member {} no LOOKING notification within 5 s",
            m.me
        ));
        voter.stop();
        return None;
    };
    if proposal.leader != m.leader {
        ev.push(format!(
            "the target proposes {} (zxid {:#x}), not itself: zkfle's vote cannot make it lead",
            proposal.leader, proposal.zxid
        ));
        voter.stop();
        return None;
    }
    if let Err(why) = check(&proposal) {
        ev.push(why);
        voter.stop();
        return None;
    }
    voter.zxid = proposal.zxid;
    voter.round = proposal.election_epoch;
    voter.peer_epoch = proposal.effective_peer_epoch();
    // 2. Vote for it until it leads. A target that started a new round meanwhile (its
    // election timed out on a slow machine) ignores votes of the old one: follow its round.
    let start = Instant::now();
    while start.elapsed() < LEADING_WAIT {
        if let Some(n) = latest.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && n.state == ServerState::Looking
            && n.leader == m.leader
            && n.election_epoch > voter.round
        {
            voter.round = n.election_epoch;
            voter.zxid = n.zxid;
            voter.peer_epoch = n.effective_peer_epoch();
        }
        voter
            .manager
            .to_send(m.leader, voter.vote(ServerState::Looking, m.leader));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = target.clone();
        let state = tokio::task::spawn_blocking(move || state_of(&t))
            .await
            .ok()
            .flatten();
        if state == Some(ServerState::Leading) {
            ev.push(format!(
                "trigger: voted for {} as member {} (its own proposal: zxid {:#x}, round {:#x}); the target became LEADING {} ms later",
                m.leader,
                m.me,
                voter.zxid,
                voter.round,
                start.elapsed().as_millis()
            ));
            return Some((voter, Instant::now()));
        }
    }
    ev.push(format!(
        "trigger: voted LOOKING for {} as member {} (zxid {:#x}, round {:#x}) for {} s; the target never became LEADING",
        m.leader,
        m.me,
        voter.zxid,
        voter.round,
        LEADING_WAIT.as_secs()
    ));
    voter.stop();
    None
}

pub(super) fn zookeeper_3109(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let Some(m) = member(target, opts, before, ev) else {
        return Verdict::Inconclusive;
    };
    let Some(rt) = runtime(ev) else {
        return Verdict::Inconclusive;
    };
    let Some((voter, led_at)) =
        rt.block_on(vote_into_leading(target, opts, before, &m, |_| Ok(()), ev))
    else {
        return Verdict::Inconclusive;
    };
    ev.push("zkfle never connects to the leader's quorum port".into());
    // Change its mind: LOOKING, voting for itself, re-sent as a LOOKING Java server would.
    let disloyal_at = Instant::now();
    let mut left_at = None;
    while disloyal_at.elapsed() < WATCH_LIMIT {
        voter
            .manager
            .to_send(m.leader, voter.vote(ServerState::Looking, m.me));
        std::thread::sleep(Duration::from_millis(200));
        // A probe that fails (a busy JVM) says nothing; only an answer other than LEADING does.
        if state_of(target).is_some_and(|s| s != ServerState::Leading) {
            left_at = Some(Instant::now());
            break;
        }
    }
    rt.block_on(async { voter.stop() });
    ev.push(format!(
        "trigger: then went LOOKING voting for itself ({}), every 200 ms",
        m.me
    ));
    match left_at {
        Some(t) if t.duration_since(disloyal_at) <= QUIT_PROMPTLY => {
            ev.push(format!(
                "after: the target quit leading {} ms after its voter went LOOKING ({} ms after it began to lead)",
                t.duration_since(disloyal_at).as_millis(),
                t.duration_since(led_at).as_millis()
            ));
            Verdict::NotVulnerable
        }
        Some(t) => {
            ev.push(format!(
                "after: the target stayed LEADING without followers for {} ms after its only other voter went LOOKING, and quit {} ms after it began to lead (initLimit x tickTime: waiting for a quorum that could not come)",
                t.duration_since(disloyal_at).as_millis(),
                t.duration_since(led_at).as_millis()
            ));
            Verdict::Vulnerable
        }
        None => {
            ev.push(format!(
                "after: the target was still LEADING without followers {} s after its only other voter went LOOKING",
                WATCH_LIMIT.as_secs()
            ));
            Verdict::Vulnerable
        }
    }
}

/// The quorum-port session of ZOOKEEPER-4685, blocking with time-outs.
struct Learner {
    s: BlockingQuorumStream,
    decoder: QuorumStreamDecoder,
    /// Bytes read but not yet decoded.
    pending: Vec<u8>,
}

/// A learner's connection to a leader's quorum port, as the ensemble speaks: TLS when it
/// says `sslQuorum`, then the quorum SASL exchange before FOLLOWERINFO.
fn secure_learner(
    s: std::net::TcpStream,
    quorum: SocketAddr,
    opts: &super::ReproOptions,
) -> Result<BlockingQuorumStream, String> {
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(opts.timeout));
    let _ = s.set_read_timeout(Some(opts.timeout));
    let mut s = crate::net::tls::wrap_outgoing_blocking(opts.tls.as_deref(), s, quorum)
        .map_err(|e| format!("TLS handshake: {e}"))?;
    if let Some(sasl) = opts.sasl.as_deref() {
        crate::net::sasl::authenticate_learner_blocking(&mut s, sasl).map_err(|e| {
            format!(
                "SASL authentication: {e}{}",
                crate::net::sasl::refused_hint(&e, sasl)
            )
        })?;
    }
    Ok(s)
}

/// The most packets zkfle reads while waiting for one (a DIFF of the leader's committed log
/// holds at most 500 proposals and as many commits).
const MAX_SYNC_PACKETS: usize = 10_000;

/// How long ZOOKEEPER-2201's check reads back what the leader queued (at most 64 MiB, seconds
/// at loopback speed) before it calls the connection kept.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

impl Learner {
    fn send(&mut self, p: &QuorumPacket) -> Result<(), String> {
        use std::io::Write;
        let bytes = p.encode().map_err(|e| e.to_string())?;
        self.s
            .write_all(&bytes)
            .map_err(|e| format!("writing {}: {e}", p.type_name()))
    }

    /// The next packet within `timeout` (snapshot bytes are skipped); `Ok(None)` on time-out.
    fn next(&mut self, timeout: Duration) -> Result<Option<QuorumPacket>, String> {
        use std::io::Read;
        let deadline = Deadline::after(timeout, "no packet");
        loop {
            let mut input = &self.pending[..];
            let item = self.decoder.decode(&mut input);
            let used = self.pending.len() - input.len();
            self.pending.drain(..used);
            match item {
                Ok(Some(QuorumItem::Packet { packet, .. })) => return Ok(Some(packet)),
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => return Err(format!("malformed packet from the leader: {e}")),
            }
            if deadline.arm_read(self.s.tcp()).is_err() {
                return Ok(None);
            }
            let mut buf = [0u8; 64 * 1024];
            match self.s.read(&mut buf) {
                Ok(0) => return Err("the leader closed the connection".into()),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if timed_out(&e) => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading from the leader: {e}")),
            }
        }
    }

    /// Reads until a packet of type `want`, replying to PINGs; the packets read, that one
    /// included, by type and zxid only: their data is dropped, so that a leader streaming
    /// large packets holds one at a time, not [`MAX_SYNC_PACKETS`] of them.
    fn until(&mut self, want: i32, timeout: Duration) -> Result<Vec<QuorumPacket>, String> {
        let deadline = Deadline::after(timeout, "no packet");
        let mut seen = Vec::new();
        while seen.len() < MAX_SYNC_PACKETS {
            let left = deadline.left().unwrap_or_default();
            let Some(p) = self.next(left)? else {
                return Err(format!(
                    "no {} within {} s",
                    ptype::name(want),
                    timeout.as_secs()
                ));
            };
            if p.ptype == ptype::PING {
                self.send(&QuorumPacket::ping_reply(p.zxid))?;
            }
            let done = p.ptype == want;
            seen.push(QuorumPacket::new(p.ptype, p.zxid, None));
            if done {
                return Ok(seen);
            }
        }
        Err(format!(
            "more than {MAX_SYNC_PACKETS} packets before {}",
            ptype::name(want)
        ))
    }
}

pub(super) fn zookeeper_4685(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let Some(m) = member(target, opts, before, ev) else {
        return Verdict::Inconclusive;
    };
    let Some(quorum) = m
        .config
        .server(m.leader)
        .and_then(|s| s.addresses.first())
        .and_then(|a| a.quorum_socket_addr())
    else {
        ev.push("the target's quorum address is not an IP address in the config".into());
        return Verdict::Inconclusive;
    };
    let Some(rt) = runtime(ev) else {
        return Verdict::Inconclusive;
    };
    // A history the leader completes by DIFF: its last epoch's first transaction. The leader
    // then sends the rest of that epoch as PROPOSAL + COMMIT pairs before NEWLEADER.
    let enough = |n: &Notification| {
        if n.zxid & 0xffff_ffff < 2 {
            Err(format!(
                "the target's last zxid is {:#x}: fewer than 2 transactions in its last epoch, so no DIFF could carry a PROPOSAL before NEWLEADER (write to the ensemble, then stop the member zkfle stands in for); zkfle did not vote for it",
                n.zxid
            ))
        } else {
            Ok(())
        }
    };
    let Some((voter, led_at)) =
        rt.block_on(vote_into_leading(target, opts, before, &m, enough, ev))
    else {
        return Verdict::Inconclusive;
    };
    let epoch = voter.zxid >> 32;
    let claimed = (epoch << 32) | 1;
    let verdict = follow_badly(target, opts, &m, quorum, epoch, claimed, led_at, ev);
    rt.block_on(async { voter.stop() });
    verdict
}

#[allow(clippy::too_many_arguments)]
fn follow_badly(
    target: &Target,
    opts: &super::ReproOptions,
    m: &Member,
    quorum: SocketAddr,
    epoch: i64,
    claimed: i64,
    led_at: Instant,
    ev: &mut Vec<String>,
) -> Verdict {
    // A leader opens its quorum port just after it says LEADING: retry for a while, as a
    // Java learner does.
    let start = Instant::now();
    let s = loop {
        match std::net::TcpStream::connect_timeout(&quorum, opts.timeout) {
            Ok(s) => break s,
            Err(_) if start.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                ev.push(format!(
                    "cannot connect to the leader's quorum port {quorum} for 5 s: {e}"
                ));
                return Verdict::Inconclusive;
            }
        }
    };
    let s = match secure_learner(s, quorum, opts) {
        Ok(s) => s,
        Err(e) => {
            ev.push(format!("leader's quorum port {quorum}: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let mut l = Learner {
        s,
        decoder: QuorumStreamDecoder::new(),
        pending: Vec::new(),
    };
    let info = LearnerInfo {
        sid: m.me,
        protocol_version: PROTOCOL_VERSION,
        config_version: m.config.version() as i64,
    };
    // The handshake, then the sync up to NEWLEADER, within initLimit-ish bounds.
    let sync_limit = Duration::from_secs(10);
    let handshake = (|| -> Result<(i64, Vec<QuorumPacket>), String> {
        l.send(&QuorumPacket::follower_info(epoch, &info))?;
        let leader_info = l.until(ptype::LEADERINFO, sync_limit)?;
        let new_epoch = leader_info.last().map_or(0, |p| p.zxid >> 32);
        l.send(&QuorumPacket::ack_epoch(claimed, epoch as i32))?;
        let sync = l.until(ptype::NEWLEADER, sync_limit)?;
        Ok((new_epoch, sync))
    })();
    let (new_epoch, sync) = match handshake {
        Ok(x) => x,
        Err(e) => {
            ev.push(format!(
                "quorum port: as member {} with last zxid {claimed:#x}: {e}",
                m.me
            ));
            return Verdict::Inconclusive;
        }
    };
    let kind = sync
        .iter()
        .find(|p| matches!(p.ptype, ptype::DIFF | ptype::SNAP | ptype::TRUNC))
        .map_or("no sync packet", |p| p.type_name());
    let proposals: Vec<i64> = sync
        .iter()
        .filter(|p| p.ptype == ptype::PROPOSAL)
        .map(|p| p.zxid)
        .collect();
    let newleader = sync.last().map_or(0, |p| p.zxid);
    let Some(&first) = proposals.first() else {
        ev.push(format!(
            "quorum port: the leader synced member {} (last zxid {claimed:#x}) by {kind} with no PROPOSAL before NEWLEADER: nothing to ACK early",
            m.me
        ));
        return Verdict::Inconclusive;
    };
    // The misbehaviour: the first proposal's ACK, then NEWLEADER's.
    let sent = l
        .send(&QuorumPacket::ack(first))
        .and_then(|()| l.send(&QuorumPacket::ack(newleader)));
    if let Err(e) = sent {
        ev.push(format!("quorum port: {e}"));
        return Verdict::Inconclusive;
    }
    ev.push(format!(
        "trigger: on the quorum port as member {} (last zxid {claimed:#x}), the leader proposed epoch {new_epoch} and synced by {kind} with {} PROPOSAL(s) before NEWLEADER {newleader:#x}; zkfle ACKed PROPOSAL {first:#x}, then NEWLEADER",
        m.me,
        proposals.len()
    ));
    // Follow (answering PINGs) and watch the leader, for up to WATCH_LIMIT.
    let acked_at = Instant::now();
    let mut uptodate_at = None;
    let mut why_left = None;
    while acked_at.elapsed() < WATCH_LIMIT {
        match l.next(Duration::from_millis(200)) {
            Ok(Some(p)) if p.ptype == ptype::PING => {
                let _ = l.send(&QuorumPacket::ping_reply(p.zxid));
            }
            Ok(Some(p)) if p.ptype == ptype::UPTODATE => {
                uptodate_at.get_or_insert_with(Instant::now);
            }
            Ok(Some(p)) if p.ptype == ptype::PROPOSAL => {
                let _ = l.send(&QuorumPacket::ack(p.zxid));
            }
            Ok(_) => {}
            Err(e) => {
                why_left = Some(e);
                break;
            }
        }
        if let Some(at) = uptodate_at
            && at.elapsed() > Duration::from_secs(3)
        {
            break;
        }
        if state_of(target).is_some_and(|s| s != ServerState::Leading) {
            why_left = Some("its election port answers LOOKING".into());
            break;
        }
    }
    let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
    match (why_left, uptodate_at) {
        (Some(why), _) => {
            ev.push(format!(
                "after: the leader left: {why}, {} ms after the early ACK ({} ms after it began to lead){}",
                acked_at.elapsed().as_millis(),
                led_at.elapsed().as_millis(),
                if uptodate_at.is_some() {
                    ""
                } else {
                    "; it never sent UPTODATE"
                }
            ));
            Verdict::Vulnerable
        }
        (None, Some(_)) => {
            ev.push("after: the leader sent UPTODATE and was still LEADING 3 s later".into());
            Verdict::NotVulnerable
        }
        (None, None) => {
            ev.push(format!(
                "after: the leader neither left nor sent UPTODATE within {} s",
                WATCH_LIMIT.as_secs()
            ));
            Verdict::Inconclusive
        }
    }
}

/// The values ZOOKEEPER-2201's load writes: half of Java's default jute.maxbuffer (0xfffff).
const LOAD_VALUE_BYTES: usize = 512 * 1024;
/// How many: 16 MiB, more than a loopback connection's socket buffers on both ends hold.
const LOAD_WRITES: u64 = 32;
/// A write whose reply takes longer has stalled (the leader commits in milliseconds here).
const WRITE_STALL: Duration = Duration::from_secs(10);
/// How long zkfle keeps not reading after the load, writing a small value every 500 ms.
const AFTER_LOAD: Duration = Duration::from_secs(6);

/// Bytes waiting unread in `s`'s receive buffer (FIONREAD).
fn unread_bytes(s: &std::net::TcpStream) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which lives for the call.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    (rc == 0).then_some(n.max(0) as usize)
}

/// ZOOKEEPER-2201: zkfle follows the leader as member --peer-sid, then stops reading its
/// quorum socket while client writes fill it.
pub(super) fn zookeeper_2201(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let Some(config) = before.config.clone().or_else(|| opts.config.clone()) else {
        ev.push("the target's answer carries no config (3.4): give the ensemble's members with --config zoo.cfg".into());
        return Verdict::Inconclusive;
    };
    let Some(me) = opts.peer_sid else {
        ev.push(
            "needs --peer-sid SID: the member whose server is down, as which zkfle follows".into(),
        );
        return Verdict::Inconclusive;
    };
    let target_sid = config
        .servers()
        .find(|s| {
            s.addresses
                .iter()
                .any(|a| a.election().socket_addr() == Some(target.addr))
        })
        .map(|s| s.id);
    let leader = match before.state {
        ServerState::Leading => target_sid,
        ServerState::Following => Some(before.leader),
        _ => None,
    };
    let Some(leader) = leader else {
        ev.push(format!(
            "the target is {} (or not in the config): this repro needs an ensemble with a leader",
            before.state.name()
        ));
        return Verdict::Inconclusive;
    };
    if leader == me {
        ev.push(format!("--peer-sid {me} is the leader"));
        return Verdict::Inconclusive;
    }
    let line = config.server(leader);
    let Some(quorum) = line
        .and_then(|s| s.addresses.first())
        .and_then(|a| a.quorum_socket_addr())
    else {
        ev.push(format!(
            "the leader ({leader})'s quorum address is not an IP address in the config"
        ));
        return Verdict::Inconclusive;
    };
    let client = opts.client.or_else(|| {
        let (host, port) = line?.client.clone()?;
        let ip = match host {
            Some(h) => h.parse().ok()?,
            None => quorum.ip(),
        };
        Some(SocketAddr::new(ip, port))
    });
    let Some(client) = client else {
        ev.push(format!(
            "no client address for the leader ({leader}): its config line has no `;clientPort` (3.4, or a static config); give --client HOST:PORT"
        ));
        return Verdict::Inconclusive;
    };
    // 1. Follow: handshake and sync, as a Java follower with an empty log.
    let s = match std::net::TcpStream::connect_timeout(&quorum, opts.timeout) {
        Ok(s) => s,
        Err(e) => {
            ev.push(format!(
                "cannot connect to the leader's quorum port {quorum}: {e}"
            ));
            return Verdict::Inconclusive;
        }
    };
    let s = match secure_learner(s, quorum, opts) {
        Ok(s) => s,
        Err(e) => {
            ev.push(format!("leader's quorum port {quorum}: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let mut l = Learner {
        s,
        decoder: QuorumStreamDecoder::new(),
        pending: Vec::new(),
    };
    let info = LearnerInfo {
        sid: me,
        protocol_version: PROTOCOL_VERSION,
        config_version: config.version() as i64,
    };
    let limit = Duration::from_secs(10);
    let synced = (|| -> Result<(i64, &'static str), String> {
        l.send(&QuorumPacket::follower_info(0, &info))?;
        let leader_info = l.until(ptype::LEADERINFO, limit)?;
        let new_epoch = leader_info.last().map_or(0, |p| p.zxid >> 32);
        l.send(&QuorumPacket::ack_epoch(0, 0))?;
        let sync = l.until(ptype::NEWLEADER, limit)?;
        let kind = sync
            .iter()
            .find(|p| matches!(p.ptype, ptype::DIFF | ptype::SNAP | ptype::TRUNC))
            .map_or("no sync packet", |p| p.type_name());
        let newleader = sync.last().map_or(0, |p| p.zxid);
        l.send(&QuorumPacket::ack(newleader))?;
        l.until(ptype::UPTODATE, limit)?;
        l.send(&QuorumPacket::ack(new_epoch << 32))?;
        Ok((new_epoch, kind))
    })();
    let (new_epoch, kind) = match synced {
        Ok(x) => x,
        Err(e) => {
            ev.push(format!(
                "quorum port {quorum}: following as member {me}: {e}"
            ));
            return Verdict::Inconclusive;
        }
    };
    let stopped_at = Instant::now();
    ev.push(format!(
        "trigger: followed leader {leader} on its quorum port {quorum} as member {me} (epoch {new_epoch}, synced by {kind}, UPTODATE); then stopped reading, keeping the connection open"
    ));
    // 2. The load, through the leader's client port.
    let mut zk = match crate::net::client::Client::connect(client, 30_000, WRITE_STALL) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("load: {e}"));
            let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
            return Verdict::Inconclusive;
        }
    };
    let path = "/zkfle-2201";
    if let Err(e) = zk.create(path, b"") {
        ev.push(format!("load: creating {path} through {client}: {e}"));
        let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
        return Verdict::Inconclusive;
    }
    let value = vec![b'x'; LOAD_VALUE_BYTES];
    let mut replies = Vec::new();
    let load_at = Instant::now();
    let loaded = zk.pipeline(
        4,
        |c, _| c.set_data_frame(path, &value),
        |i| i < LOAD_WRITES,
        |r| replies.push(r),
    );
    let load_secs = load_at.elapsed().as_secs_f64();
    let unread = unread_bytes(l.s.tcp()).unwrap_or(0);
    let ok = replies.iter().filter(|r| r.err == 0).count();
    let slowest = replies.iter().map(|r| r.latency).max().unwrap_or_default();
    let mb = |n: f64| n / (1024.0 * 1024.0);
    if let Err(e) = loaded {
        ev.push(format!(
            "after: {ok} of {LOAD_WRITES} setData of {} KiB through {client} committed, then the next reply did not come ({e}) {:.1} s after the load began, while zkfle's quorum socket held {:.1} MiB unread: the leader stalled",
            LOAD_VALUE_BYTES / 1024,
            load_secs,
            mb(unread as f64)
        ));
        let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
        return Verdict::Vulnerable;
    }
    ev.push(format!(
        "load: {ok} of {LOAD_WRITES} setData of {} KiB ({:.0} MiB) through {client} committed in {load_secs:.1} s (slowest reply {} ms) while zkfle read nothing; zkfle's quorum socket then held {:.1} MiB unread in its receive buffer",
        LOAD_VALUE_BYTES / 1024,
        mb((LOAD_WRITES as usize * LOAD_VALUE_BYTES) as f64),
        slowest.as_millis(),
        mb(unread as f64)
    ));
    // 3. Keep not reading; the leader must go on committing (and drop zkfle).
    let mut small = Vec::new();
    let after = zk.pipeline(
        1,
        |c, _| {
            std::thread::sleep(Duration::from_millis(500));
            c.set_data_frame(path, b"y")
        },
        |i| i < (AFTER_LOAD.as_millis() / 500) as u64,
        |r| small.push(r),
    );
    zk.close();
    let small_slowest = small.iter().map(|r| r.latency).max().unwrap_or_default();
    if let Err(e) = after {
        ev.push(format!(
            "after: {} small writes committed, then a reply did not come ({e}), {:.1} s after zkfle stopped reading: the leader stalled",
            small.len(),
            stopped_at.elapsed().as_secs_f64()
        ));
        let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
        return Verdict::Vulnerable;
    }
    // 4. Now read: does the stream end (the leader dropped zkfle) after what was queued?
    let mut drained = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    // Within an overall bound too: a leader trickling a byte every second would keep a
    // per-read timeout from ever expiring.
    let drain = Deadline::after(DRAIN_LIMIT, "no end of the stream");
    let end = loop {
        use std::io::Read;
        let Some(left) = drain.left() else {
            break "";
        };
        let _ =
            l.s.tcp()
                .set_read_timeout(Some(left.min(Duration::from_secs(2))));
        match l.s.read(&mut buf) {
            Ok(0) => break "the leader had closed the connection",
            Ok(n) => drained += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                break "the leader had reset the connection";
            }
            Err(_) => break "",
        }
        if drained > 64 * 1024 * 1024 {
            break "";
        }
    };
    let _ = l.s.tcp().shutdown(std::net::Shutdown::Both);
    let watched = stopped_at.elapsed().as_secs_f64();
    if end.is_empty() {
        ev.push(format!(
            "after: {} small writes committed over {:.0} s (slowest {} ms), but {watched:.1} s after zkfle stopped reading the leader still kept its connection ({:.1} MiB read back when zkfle read again)",
            small.len(),
            AFTER_LOAD.as_secs_f64(),
            small_slowest.as_millis(),
            mb(drained as f64)
        ));
        // Writes went on committing: the leader did not block; it is only slow to drop us.
        return Verdict::NotVulnerable;
    }
    ev.push(format!(
        "after: {} small writes committed over {:.0} s (slowest {} ms); when zkfle read again, {:.1} MiB that had waited in the sockets' buffers came and then {end}, i.e. it dropped zkfle within {watched:.1} s of zkfle's last read",
        small.len(),
        AFTER_LOAD.as_secs_f64(),
        small_slowest.as_millis(),
        mb(drained as f64)
    ));
    Verdict::NotVulnerable
}
