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
//!   is a decision. Notifications it sends to the impersonated peers are kept for comparison.
//!
//! The replay stops after the last recorded election's messages and a settling second, when the
//! target starts an election the recording does not have, or after a deadline.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::net::probe::{self, ProbeError, ProbeOptions};
use crate::wire::{
    Direction, FrameReader, InitialMessage, Notification, ProtocolVersion, ServerState, StreamItem,
    WireError, encode_frame,
};

use super::{Decided, Recording, Report, Sent};

const POLL: Duration = Duration::from_millis(50);
const SETTLE: Duration = Duration::from_millis(1500);
/// How long to wait for the target to enter its next election.
const WAIT_TARGET: Duration = Duration::from_secs(60);
/// How long to wait, by default, for the target to answer at all (a server being started).
pub const DEFAULT_WAIT_ANSWER: Duration = Duration::from_secs(10);
/// How long the target may take to send its initial message on a connection it opened.
const WAIT_INITIAL: Duration = Duration::from_secs(5);
/// How long to wait for the target to dial back a smaller peer whose connection it closed.
const WAIT_DIAL_BACK: Duration = Duration::from_secs(2);

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
    #[error("the target does not answer within {secs:.1} s: {source}")]
    NoAnswer { secs: f64, source: ProbeError },
}

struct Shared {
    begin: Instant,
    stop: AtomicBool,
    /// The connection each impersonated peer sends on; `attached` is notified on every insert.
    conns: Mutex<HashMap<i64, TcpStream>>,
    attached: Condvar,
    sent: Mutex<Vec<Sent>>,
}

impl Shared {
    fn ms(&self) -> u64 {
        self.begin.elapsed().as_millis() as u64
    }
}

/// The lock's data even when a reader thread panicked while holding it: the map and the list
/// stay consistent after any single insert or push.
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
) -> Result<Report, LiveError> {
    let target_addr: SocketAddr = target
        .parse()
        .map_err(|_| LiveError::BadTarget(target.to_string()))?;
    let shared = Arc::new(Shared {
        begin: Instant::now(),
        stop: AtomicBool::new(false),
        conns: Mutex::new(HashMap::new()),
        attached: Condvar::new(),
        sent: Mutex::new(Vec::new()),
    });
    let peers: Vec<i64> = rec.peers();
    let mut initials: HashMap<i64, Vec<u8>> = HashMap::new();
    let mut threads = Vec::new();
    let mut listening = Vec::new();
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
        let listener = TcpListener::bind(sock).map_err(|source| LiveError::Listen {
            sid: p,
            addr: sock,
            source,
        })?;
        listening.push(sock);
        let sh = shared.clone();
        let sid = rec.sid;
        threads.push(std::thread::spawn(move || {
            accept_loop(sh, listener, p, sid)
        }));
    }
    let result = drive(
        rec,
        target,
        target_addr,
        speed,
        wait_answer,
        &shared,
        &initials,
    );
    shared.stop.store(true, Ordering::SeqCst);
    // Each accept loop blocks in accept(): one connection of ours wakes it to see `stop`.
    for sock in listening {
        let _ = TcpStream::connect_timeout(&sock, Duration::from_secs(1));
    }
    for s in lock(&shared.conns).values() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    for t in threads {
        let _ = t.join();
    }
    let replayed = result?;
    let mut sent = lock(&shared.sent).clone();
    sent.sort_by_key(|s| s.at_ms);
    Ok(Report::new(rec, target, replayed, &sent))
}

/// Accepts the target's connections to peer `p`: kept when `p` is smaller than the target's
/// sid (the target keeps its own connection then), read and dropped otherwise.
fn accept_loop(sh: Arc<Shared>, listener: TcpListener, p: i64, sid: i64) {
    for s in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(s) = s else { continue };
        let sh = sh.clone();
        std::thread::spawn(move || {
            let _ = s.set_read_timeout(Some(WAIT_INITIAL));
            let Ok(read_half) = s.try_clone() else { return };
            let mut frames = FrameReader::new(read_half, Direction::FromInitiator);
            let Ok(Some(StreamItem::Initial { message, .. })) = frames.next_item() else {
                return;
            };
            if message.sid != sid || p > sid {
                // The target closes its own connection to a larger sid.
                return;
            }
            let _ = s.set_read_timeout(None);
            attach(&sh, p, s, frames);
        });
    }
}

/// Makes `s` peer `p`'s connection and keeps what the target sends on it, read by `frames`.
fn attach(sh: &Arc<Shared>, p: i64, s: TcpStream, mut frames: FrameReader<TcpStream>) {
    if let Some(old) = lock(&sh.conns).insert(p, s) {
        let _ = old.shutdown(std::net::Shutdown::Both);
    }
    sh.attached.notify_all();
    let sh = sh.clone();
    std::thread::spawn(move || {
        while let Ok(Some(payload)) = frames.next_frame() {
            if let Ok(n) = Notification::decode(&payload) {
                let at_ms = sh.ms();
                lock(&sh.sent).push(Sent {
                    at_ms,
                    to: p,
                    notification: n,
                });
            }
        }
    });
}

/// Sends `n` to the target as peer `p`, connecting first if needed.
fn send_as(
    sh: &Arc<Shared>,
    target: SocketAddr,
    sid: i64,
    p: i64,
    initial: &[u8],
    n: &Notification,
) -> Result<(), LiveError> {
    let frame = encode_frame(&n.encode()?)?;
    for _ in 0..2 {
        if let Some(s) = lock(&sh.conns).get_mut(&p)
            && s.write_all(&frame).is_ok()
        {
            return Ok(());
        }
        lock(&sh.conns).remove(&p);
        // Dial as p: kept by the target when p is larger; otherwise it closes and dials back.
        let connect = |source| LiveError::Connect { sid: p, source };
        let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(5)).map_err(connect)?;
        let _ = s.set_nodelay(true);
        s.write_all(initial).map_err(connect)?;
        if p > sid {
            let frames = FrameReader::new(s.try_clone().map_err(connect)?, Direction::FromAcceptor);
            attach(sh, p, s, frames);
        } else {
            let conns = lock(&sh.conns);
            let _ = sh
                .attached
                .wait_timeout_while(conns, WAIT_DIAL_BACK, |c| !c.contains_key(&p))
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
    Err(LiveError::NoConnection(p))
}

/// The replay proper: schedules, probes, decisions.
fn drive(
    rec: &Recording,
    target: &str,
    target_addr: SocketAddr,
    speed: f64,
    wait_answer: Duration,
    sh: &Arc<Shared>,
    initials: &HashMap<i64, Vec<u8>>,
) -> Result<Vec<Decided>, LiveError> {
    // Each election's messages with their offsets from its start.
    let episodes: Vec<Vec<(u64, &super::Timed)>> = (0..rec.starts.len())
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
        .collect();
    let opts = ProbeOptions {
        timeout: Duration::from_secs(1),
        ..ProbeOptions::default()
    };
    // Wait for the target to answer LOOKING.
    let wait_start = Instant::now();
    let mut state = loop {
        match probe::probe(target, &opts) {
            Ok(a) if a.state == ServerState::Looking => break a.state,
            Ok(a) => return Err(LiveError::NotLooking(a.state.name())),
            Err(source) if wait_start.elapsed() >= wait_answer => {
                return Err(LiveError::NoAnswer {
                    secs: wait_answer.as_secs_f64(),
                    source,
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let mut decisions = Vec::new();
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
        if done_at.is_some_and(|d| d.elapsed() > SETTLE) {
            break;
        }
        if last_probe.elapsed() >= POLL {
            last_probe = Instant::now();
            if let Ok(a) = probe::probe(target, &opts) {
                if state == ServerState::Looking && a.state != ServerState::Looking {
                    decisions.push(Decided {
                        state: a.state,
                        leader: a.leader,
                        round: a.election_epoch,
                        at_ms: sh.ms(),
                    });
                } else if state != ServerState::Looking && a.state == ServerState::Looking {
                    // The target entered its next election.
                    if episode + 1 >= episodes.len() {
                        break;
                    }
                    episode += 1;
                    next = 0;
                    ep_start = Instant::now();
                    waiting_since = None;
                }
                state = a.state;
            }
        }
        if finished_episode && episode + 1 < episodes.len() {
            let w = *waiting_since.get_or_insert_with(Instant::now);
            if w.elapsed() > WAIT_TARGET {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(decisions)
}
