//! The live target: zkfle impersonates every other recorded peer towards a live server
//! configured as SID (a Java one from scripts/ensemble.sh, or `zkfle join`).
//!
//! - For each recorded peer P it listens on P's election address (from the config), and it
//!   dials the target as P when P's sid is larger than SID (the larger sid's connection
//!   survives, reference B.1); for a smaller P it lets the target dial P (dialling first makes
//!   the target close and dial back). Every connection opens with P's recorded initial message.
//! - The recording is cut into SID's elections ([`super::Start`]). The messages of an election
//!   are sent at their recorded offsets from its start (divided by `--speed`), starting with
//!   the first election once the target answers a probe LOOKING. A live server enters its next
//!   election for its own reasons (here: its leader's synchronisation port does not answer),
//!   so the next election's messages start when the target is seen LOOKING again.
//! - The target's state is read with [`crate::net::probe`] every 50 ms: a change from LOOKING
//!   that the next probe confirms is a decision. Notifications it sends to the impersonated
//!   peers are kept for comparison.
//!
//! The replay stops after the last recorded election's messages and a settling 1.5 s (up to
//! 10 s while the target is still LOOKING in an election the recording has it decide: a busy
//! server, its handshakes slow, can decide seconds later than it did when recorded), when the
//! target starts an election the recording does not have, or after a deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::net::manager::read_initial;
use crate::net::probe::{self, ProbeError, ProbeOptions};
use crate::net::sasl::{authenticate_learner, authenticate_server};
use crate::net::tls::{wrap_incoming, wrap_outgoing};
use crate::net::{QuorumStream, QuorumTls};
use crate::sasl::QuorumSasl;
use crate::wire::{
    Direction, InitialMessage, Notification, ProtocolVersion, ServerState, StreamDecoder,
    StreamItem, WireError, encode_frame,
};

use super::{Decided, Recording, Report, Sent};

const POLL: Duration = Duration::from_millis(50);
const SETTLE: Duration = Duration::from_millis(1500);
/// How long after the last message a target still LOOKING is given to decide, when the
/// recording has it decide in its last election.
const WAIT_DECISION: Duration = Duration::from_secs(10);
/// How long to wait for the target to enter its next election.
const WAIT_TARGET: Duration = Duration::from_secs(60);
/// How long to wait, by default, for the target to answer at all (a server being started).
pub const DEFAULT_WAIT_ANSWER: Duration = Duration::from_secs(10);
/// How long the target may take to send its initial message on a connection it opened.
const WAIT_INITIAL: Duration = Duration::from_secs(5);
/// How long to wait for the target to dial back a smaller peer whose connection it closed.
const WAIT_DIAL_BACK: Duration = Duration::from_secs(2);
/// How long dialling the target as a peer may take, handshakes (TLS, SASL) included.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a live replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}: expected an IP address and port")]
    BadTarget(String),
    #[error("peer {0} has no address in the config")]
    NoAddress(i64),
    #[error("peer {sid}: {text} is not an IP address")]
    NotAnIp { sid: i64, text: String },
    #[error("listening as {sid} on {addr}: {source}")]
    Listen {
        sid: i64,
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A recorded message zkfle cannot send (it would not decode back to itself).
    #[error("{0}")]
    Encode(#[from] WireError),
    #[error("connecting as {sid}: {source}")]
    Connect { sid: i64, source: std::io::Error },
    #[error("no connection to the target as {0}")]
    NoConnection(i64),
    #[error("the target is {0} already; start it afresh for the replay")]
    NotLooking(&'static str),
    #[error(
        "the target answered with state code {0}, which is no ZooKeeper state (0-3): is it a ZooKeeper election port?"
    )]
    BadState(i32),
    #[error("the target does not answer within {secs:.1} s: {source}")]
    NoAnswer { secs: f64, source: ProbeError },
    #[error("starting the connections' runtime: {source}")]
    Runtime { source: std::io::Error },
}

/// How the ensemble secures its election connections (`sslQuorum`, quorum SASL): the
/// impersonated peers speak the same.
#[derive(Clone, Default)]
pub struct Security {
    pub tls: Option<Arc<QuorumTls>>,
    pub sasl: Option<Arc<QuorumSasl>>,
}

struct Shared {
    begin: Instant,
    /// The connection each impersonated peer sends on (its writer task's queue); `attached` is
    /// notified on every insert.
    conns: Mutex<HashMap<i64, mpsc::UnboundedSender<Vec<u8>>>>,
    attached: Condvar,
    sent: Mutex<KeptSent>,
    security: Security,
}

/// What the target sent, as the comparison needs it: a notification repeating the one before
/// it to the same peer (in the fields compared) is not kept, since the report collapses such
/// runs anyway; and the whole is bounded, because the target is not trusted to stop.
#[derive(Default)]
struct KeptSent {
    list: Vec<Sent>,
    /// The last kept notification's compared fields, per peer.
    last: HashMap<i64, super::Compared>,
    /// The bytes of the configs kept.
    config_bytes: usize,
    /// Set once a bound was reached (reported with the outcome).
    overflowed: bool,
}

/// The most distinct notifications kept from the target, and the most config bytes in them:
/// a replay's elections need a few hundred; a target sending more is flooding.
const MAX_SENT_KEPT: usize = 100_000;
const MAX_SENT_CONFIG_BYTES: usize = 64 << 20;

impl Shared {
    fn ms(&self) -> u64 {
        self.begin.elapsed().as_millis() as u64
    }

    /// Keeps `n`, sent by the target to peer `p`, unless it repeats the last one kept for `p`;
    /// false when the bound is reached (nothing more is kept from anyone).
    fn keep_sent(&self, p: i64, n: Notification) -> bool {
        let at_ms = self.ms();
        let mut kept = lock(&self.sent);
        if kept.overflowed {
            return false;
        }
        let key = super::compared(&n);
        if kept.last.get(&p) == Some(&key) {
            return true;
        }
        let bytes = n.config.as_ref().map_or(0, Vec::len);
        if kept.list.len() >= MAX_SENT_KEPT || kept.config_bytes + bytes > MAX_SENT_CONFIG_BYTES {
            kept.overflowed = true;
            return false;
        }
        kept.config_bytes += bytes;
        kept.last.insert(p, key);
        kept.list.push(Sent {
            at_ms,
            to: p,
            notification: n,
        });
        true
    }
}

/// The lock's data even when a task panicked while holding it: the map and the list stay
/// consistent after any single insert or push.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Replays `rec` into the live server whose election address is `target`.
/// `wait_answer`: how long the target may take to answer its first probe (refused
/// connections and silence alike) before the replay fails.
pub fn replay(
    rec: &Recording,
    target: &str,
    speed: f64,
    wait_answer: Duration,
    security: Security,
) -> Result<Report, LiveError> {
    let target_addr: SocketAddr = target
        .parse()
        .map_err(|_| LiveError::BadTarget(target.to_string()))?;
    // The connections run on their own threads; the schedule below stays plain blocking code.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| LiveError::Runtime { source })?;
    let shared = Arc::new(Shared {
        begin: Instant::now(),
        conns: Mutex::new(HashMap::new()),
        attached: Condvar::new(),
        sent: Mutex::new(KeptSent::default()),
        security,
    });
    let peers: Vec<i64> = rec.peers();
    let mut initials: HashMap<i64, Vec<u8>> = HashMap::new();
    for &p in &peers {
        let addr = rec
            .quorum
            .config()
            .server(p)
            .and_then(|s| s.addresses.first())
            .map(|a| a.election())
            .ok_or(LiveError::NoAddress(p))?;
        let initial = match rec.peer_initials.get(&p) {
            Some(m) => m.encode()?,
            None => {
                InitialMessage::versioned(ProtocolVersion::V1, p, vec![addr.clone()]).encode()?
            }
        };
        initials.insert(p, initial);
        let sock = addr.socket_addr().ok_or_else(|| LiveError::NotAnIp {
            sid: p,
            text: addr.text.clone(),
        })?;
        let listener =
            rt.block_on(TcpListener::bind(sock))
                .map_err(|source| LiveError::Listen {
                    sid: p,
                    addr: sock,
                    source,
                })?;
        rt.spawn(accept_loop(shared.clone(), listener, p, rec.sid));
    }
    let result = drive(
        rec,
        (target, target_addr),
        speed,
        wait_answer,
        &shared,
        &initials,
        &rt,
    );
    // Dropping the runtime ends the listeners and every connection's tasks.
    lock(&shared.conns).clear();
    rt.shutdown_timeout(Duration::from_secs(1));
    let replayed = result?;
    let (mut sent, overflowed) = {
        let mut kept = lock(&shared.sent);
        (std::mem::take(&mut kept.list), kept.overflowed)
    };
    sent.sort_by_key(|s| s.at_ms);
    let mut report = Report::new(rec, target, replayed, &sent);
    if overflowed {
        report.notes.push(format!(
            "the target sent more than {MAX_SENT_KEPT} distinct notifications or {} MiB of configs; \
             the rest were not kept, and the connections that sent them were dropped",
            MAX_SENT_CONFIG_BYTES >> 20
        ));
    }
    Ok(report)
}

/// Accepts the target's connections to peer `p`: kept when `p` is smaller than the target's
/// sid (the target keeps its own connection then), read and dropped otherwise.
async fn accept_loop(sh: Arc<Shared>, listener: TcpListener, p: i64, sid: i64) {
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let handshake = async {
                let mut s = wrap_incoming(sh.security.tls.as_deref(), tcp, peer)
                    .await
                    .ok()?;
                let (message, dec, mut leftover) = read_initial(&mut s).await.ok()?;
                if let Some(sasl) = sh.security.sasl.as_deref() {
                    authenticate_server(&mut s, &mut leftover, sasl)
                        .await
                        .ok()?;
                }
                Some((s, message, dec, leftover))
            };
            let Ok(Some((s, message, dec, leftover))) =
                tokio::time::timeout(WAIT_INITIAL, handshake).await
            else {
                return;
            };
            if message.sid != sid || p > sid {
                // The target closes its own connection to a larger sid.
                return;
            }
            attach(&sh, p, s, dec, leftover);
        });
    }
}

/// Makes `s` peer `p`'s connection: a writer task sends what `send_as` queues, a reader task
/// keeps what the target sends, decoded by `dec` (`leftover`: bytes already read).
fn attach(sh: &Arc<Shared>, p: i64, s: QuorumStream, mut dec: StreamDecoder, leftover: Vec<u8>) {
    let (mut rd, mut wr) = s.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    lock(&sh.conns).insert(p, tx);
    sh.attached.notify_all();
    tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() || wr.flush().await.is_err() {
                return;
            }
        }
    });
    let sh = sh.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut input = leftover;
        loop {
            let mut rest = &input[..];
            loop {
                match dec.decode(&mut rest) {
                    Ok(Some(StreamItem::Frame { payload, .. })) => {
                        if let Ok(n) = Notification::decode(&payload)
                            && !sh.keep_sent(p, n)
                        {
                            // Past the bound: this connection is flooding; stop reading it.
                            return;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => input = buf[..n].to_vec(),
            }
        }
    });
}

/// Sends `n` to the target as peer `p`, connecting first if needed.
fn send_as(
    sh: &Arc<Shared>,
    rt: &tokio::runtime::Runtime,
    target: SocketAddr,
    sid: i64,
    p: i64,
    initial: &[u8],
    n: &Notification,
) -> Result<(), LiveError> {
    let frame = encode_frame(&n.encode()?)?;
    for _ in 0..2 {
        if let Some(tx) = lock(&sh.conns).get(&p)
            && tx.send(frame.clone()).is_ok()
        {
            return Ok(());
        }
        lock(&sh.conns).remove(&p);
        // Dial as p: kept by the target when p is larger; otherwise it closes and dials back.
        let connect = |source| LiveError::Connect { sid: p, source };
        // The whole handshake (TCP, TLS, initial message, SASL) within one bound: a target
        // that accepts and then stalls must not hold the replay.
        let s = rt
            .block_on(async {
                let dial = async {
                    let tcp = TcpStream::connect(target).await?;
                    let _ = tcp.set_nodelay(true);
                    let mut s = wrap_outgoing(sh.security.tls.as_deref(), tcp, target).await?;
                    s.write_all(initial).await?;
                    s.flush().await?;
                    if let Some(sasl) = sh.security.sasl.as_deref() {
                        authenticate_learner(&mut s, sasl).await?;
                    }
                    Ok::<_, std::io::Error>(s)
                };
                tokio::time::timeout(DIAL_TIMEOUT, dial)
                    .await
                    .map_err(|_| {
                        std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "no connection and handshake within {} s",
                                DIAL_TIMEOUT.as_secs()
                            ),
                        )
                    })?
            })
            .map_err(connect)?;
        if p > sid {
            let _guard = rt.enter();
            attach(
                sh,
                p,
                s,
                StreamDecoder::new(Direction::FromAcceptor),
                Vec::new(),
            );
        } else {
            drop(s);
            let conns = lock(&sh.conns);
            let _ = sh
                .attached
                .wait_timeout_while(conns, WAIT_DIAL_BACK, |c| !c.contains_key(&p))
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
    Err(LiveError::NoConnection(p))
}

/// Each election's messages with their offsets (divided by `speed`) from its start.
fn schedule(rec: &Recording, speed: f64) -> Vec<Vec<(u64, &super::Timed)>> {
    (0..rec.starts.len())
        .map(|k| {
            let from = if k == 0 { 0 } else { rec.starts[k].at_ms };
            let to = rec.starts.get(k + 1).map(|s| s.at_ms).unwrap_or(u64::MAX);
            rec.inbound
                .iter()
                .filter(|t| t.at_ms >= from && t.at_ms < to)
                .map(|t| {
                    let off = t.at_ms.saturating_sub(rec.starts[k].at_ms) as f64 / speed;
                    (off as u64, t)
                })
                .collect()
        })
        .collect()
}

/// Waits for the target to answer a probe LOOKING (at most `wait_answer` for any answer).
fn wait_looking(
    target: &str,
    opts: &ProbeOptions,
    wait_answer: Duration,
) -> Result<ServerState, LiveError> {
    let wait_start = Instant::now();
    loop {
        match probe::probe(target, opts) {
            Ok(a) if a.state == ServerState::Looking => return Ok(a.state),
            Ok(a) => {
                return Err(match a.state {
                    ServerState::Unknown(code) => LiveError::BadState(code),
                    other => LiveError::NotLooking(other.name()),
                });
            }
            Err(source) if wait_start.elapsed() >= wait_answer => {
                return Err(LiveError::NoAnswer {
                    secs: wait_answer.as_secs_f64(),
                    source,
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The replay proper: schedules, probes, decisions.
fn drive(
    rec: &Recording,
    (target, target_addr): (&str, SocketAddr),
    speed: f64,
    wait_answer: Duration,
    sh: &Arc<Shared>,
    initials: &HashMap<i64, Vec<u8>>,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<Decided>, LiveError> {
    let episodes = schedule(rec, speed);
    let opts = ProbeOptions {
        timeout: Duration::from_secs(1),
        tls: sh.security.tls.clone(),
        sasl: sh.security.sasl.clone(),
        ..ProbeOptions::default()
    };
    let mut watch = Watch::new(wait_looking(target, &opts, wait_answer)?);
    // Whether the recording has SID decide after its last election began.
    let decides_last = rec
        .starts
        .last()
        .is_some_and(|s| rec.decisions.iter().any(|d| d.at_ms >= s.at_ms));
    let mut episode = 0usize;
    let mut ep_start = Instant::now();
    let mut next = 0usize;
    let mut last_probe = Instant::now();
    let mut done_at: Option<Instant> = None;
    let mut waiting_since: Option<Instant> = None;
    loop {
        // Due messages of the current election.
        let elapsed = ep_start.elapsed().as_millis() as u64;
        while let Some((off, t)) = episodes.get(episode).and_then(|e| e.get(next)) {
            if *off > elapsed {
                break;
            }
            send_as(
                sh,
                rt,
                target_addr,
                rec.sid,
                t.from,
                &initials[&t.from],
                &t.notification,
            )?;
            next += 1;
        }
        let finished_episode = episodes.get(episode).is_none_or(|e| next >= e.len());
        if finished_episode && episode + 1 >= episodes.len() && done_at.is_none() {
            done_at = Some(Instant::now());
        }
        if let Some(done) = done_at
            && done.elapsed() > SETTLE
            && !(watch.state == ServerState::Looking
                && decides_last
                && done.elapsed() < WAIT_DECISION)
        {
            break;
        }
        if last_probe.elapsed() >= POLL {
            last_probe = Instant::now();
            if let Ok(a) = probe::probe(target, &opts)
                && watch.see(&a, sh.ms())
            {
                // The target entered its next election.
                if episode + 1 >= episodes.len() {
                    break;
                }
                episode += 1;
                next = 0;
                ep_start = Instant::now();
                waiting_since = None;
            }
        }
        if finished_episode && episode + 1 < episodes.len() {
            let w = *waiting_since.get_or_insert_with(Instant::now);
            if w.elapsed() > WAIT_TARGET {
                break;
            }
        }
        // Until the next message is due or the next probe, whichever comes first.
        let next_due = episodes
            .get(episode)
            .and_then(|e| e.get(next))
            .map(|(off, _)| {
                Duration::from_millis(off.saturating_sub(ep_start.elapsed().as_millis() as u64))
            });
        let next_probe = POLL.saturating_sub(last_probe.elapsed());
        std::thread::sleep(next_due.map_or(next_probe, |d| d.min(next_probe)));
    }
    Ok(watch.decisions)
}

/// The target's state as probes read it, and the decisions they show.
struct Watch {
    state: ServerState,
    /// A decision seen once, waiting for the next probe to confirm it.
    unconfirmed: Option<Decided>,
    decisions: Vec<Decided>,
}

impl Watch {
    fn new(state: ServerState) -> Watch {
        Watch {
            state,
            unconfirmed: None,
            decisions: Vec::new(),
        }
    }

    /// Takes a probe's answer at `at_ms`; true when the target went back to LOOKING (its next
    /// election).
    ///
    /// Java sets its state before its vote: until its election returns, a decided server
    /// answers with the vote it held before (its own, or the previous election's). Only an
    /// answer the next probe repeats is a decision; it is timed from its first sighting.
    fn see(&mut self, a: &probe::Answer, at_ms: u64) -> bool {
        let looking = a.state == ServerState::Looking;
        match (self.state == ServerState::Looking, looking) {
            (true, false) => {
                let seen = Decided {
                    state: a.state,
                    leader: a.leader,
                    round: a.election_epoch,
                    at_ms,
                };
                match self.unconfirmed.take() {
                    Some(first)
                        if (first.state, first.leader, first.round)
                            == (seen.state, seen.leader, seen.round) =>
                    {
                        self.decisions.push(first);
                        self.state = a.state;
                    }
                    _ => self.unconfirmed = Some(seen),
                }
                false
            }
            (true, true) => {
                self.unconfirmed = None;
                false
            }
            (false, now_looking) => {
                self.state = a.state;
                now_looking
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            begin: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            attached: Condvar::new(),
            sent: Mutex::new(KeptSent::default()),
            security: Security::default(),
        }
    }

    fn vote(leader: i64, config: usize) -> Notification {
        Notification {
            state: ServerState::Looking,
            leader,
            zxid: 0,
            election_epoch: 1,
            peer_epoch: Some(0),
            version: Some(2),
            config: Some(vec![b'x'; config]),
            trailing: Vec::new(),
        }
    }

    /// A target repeating itself costs nothing; one sending ever new votes is cut at the bound,
    /// and the report says so.
    #[test]
    fn what_a_live_target_sends_is_kept_collapsed_and_bounded() {
        let sh = shared();
        for _ in 0..1000 {
            assert!(sh.keep_sent(2, vote(1, 512 << 10)));
        }
        assert!(sh.keep_sent(3, vote(1, 0)));
        assert!(sh.keep_sent(2, vote(2, 0)));
        assert_eq!(lock(&sh.sent).list.len(), 3);
        // Distinct votes with big configs: refused once 64 MiB of configs are kept.
        let mut leader = 10;
        while sh.keep_sent(2, vote(leader, 1 << 20)) {
            leader += 1;
            assert!(leader < 1000, "no bound");
        }
        let kept = lock(&sh.sent);
        assert!(kept.overflowed);
        assert!(kept.config_bytes <= MAX_SENT_CONFIG_BYTES);
    }

    fn answer(state: ServerState, leader: i64, round: i64) -> probe::Answer {
        probe::Answer {
            state,
            leader,
            zxid: 0,
            election_epoch: round,
            peer_epoch: 0,
            config_version: Some(0),
            config: None,
            size: 53,
            elapsed: Duration::from_millis(1),
        }
    }

    /// Java sets its state before its vote: the first answer after a decision can pair the
    /// new state with the old vote (server 1 `FOLLOWING, leader 1`, as a CI run read). Only an
    /// answer the next probe repeats is a decision, timed from its first sighting.
    #[test]
    fn a_decision_is_an_answer_the_next_probe_repeats() {
        let mut w = Watch::new(ServerState::Looking);
        assert!(!w.see(&answer(ServerState::Looking, 1, 1), 0));
        assert!(!w.see(&answer(ServerState::Following, 1, 1), 50));
        assert!(!w.see(&answer(ServerState::Following, 3, 1), 100));
        assert!(w.decisions.is_empty());
        assert!(!w.see(&answer(ServerState::Following, 3, 1), 150));
        assert_eq!(
            w.decisions,
            vec![Decided {
                state: ServerState::Following,
                leader: 3,
                round: 1,
                at_ms: 100,
            }]
        );
        // Decided: the same answers change nothing; LOOKING again is the next election.
        assert!(!w.see(&answer(ServerState::Following, 3, 1), 200));
        assert!(w.see(&answer(ServerState::Looking, 2, 2), 250));
        assert_eq!(w.decisions.len(), 1);
        // A one-off answer between LOOKING ones is no decision.
        assert!(!w.see(&answer(ServerState::Leading, 2, 2), 300));
        assert!(!w.see(&answer(ServerState::Looking, 2, 2), 350));
        assert!(!w.see(&answer(ServerState::Following, 1, 2), 400));
        assert!(!w.see(&answer(ServerState::Following, 1, 2), 450));
        assert_eq!(w.decisions.len(), 2);
        assert_eq!(w.decisions[1].at_ms, 400);
    }
}
