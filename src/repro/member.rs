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
use crate::net::dialect::WireDialect;
use crate::net::manager::{Manager, NetConfig};
use crate::net::probe::{self, Answer, ProbeOptions};
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
    // 2. Vote for it until it leads.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
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
        "trigger: voted LOOKING for {} as member {} (zxid {:#x}, round {:#x}) for 10 s; the target never became LEADING",
        m.leader, m.me, voter.zxid, voter.round
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
    s: std::net::TcpStream,
    decoder: QuorumStreamDecoder,
    /// Bytes read but not yet decoded.
    pending: Vec<u8>,
}

/// The most packets zkfle reads while waiting for one (a DIFF of the leader's committed log
/// holds at most 500 proposals and as many commits).
const MAX_SYNC_PACKETS: usize = 10_000;

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
        let end = Instant::now() + timeout;
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
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let _ = self.s.set_read_timeout(Some(left));
            let mut buf = [0u8; 64 * 1024];
            match self.s.read(&mut buf) {
                Ok(0) => return Err("the leader closed the connection".into()),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading from the leader: {e}")),
            }
        }
    }

    /// Reads until a packet of type `want`, replying to PINGs; the packets skipped.
    fn until(&mut self, want: i32, timeout: Duration) -> Result<Vec<QuorumPacket>, String> {
        let end = Instant::now() + timeout;
        let mut seen = Vec::new();
        while seen.len() < MAX_SYNC_PACKETS {
            let left = end.saturating_duration_since(Instant::now());
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
            seen.push(p);
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
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(opts.timeout));
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
    let _ = l.s.shutdown(std::net::Shutdown::Both);
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
