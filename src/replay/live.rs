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
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::net::probe::{self, ProbeOptions};
use crate::wire::{InitialMessage, Notification, ProtocolVersion, ServerState, encode_frame};

use super::{Decided, Recording, Report, Sent};

const POLL: Duration = Duration::from_millis(50);
const SETTLE: Duration = Duration::from_millis(1500);
/// How long to wait for the target to enter its next election.
const WAIT_TARGET: Duration = Duration::from_secs(60);
/// How long to wait, by default, for the target to answer at all (a server being started).
pub const DEFAULT_WAIT_ANSWER: Duration = Duration::from_secs(10);

struct Shared {
    begin: Instant,
    stop: AtomicBool,
    conns: Mutex<HashMap<i64, TcpStream>>,
    sent: Mutex<Vec<Sent>>,
}

impl Shared {
    fn ms(&self) -> u64 {
        self.begin.elapsed().as_millis() as u64
    }
}

/// Replays `rec` into the live server whose election address is `target`.
/// `wait_answer`: how long the target may take to answer its first probe (refused
/// connections and silence alike) before the replay fails.
pub fn replay(
    rec: &Recording,
    target: &str,
    speed: f64,
    wait_answer: Duration,
) -> Result<Report, String> {
    let target_addr: SocketAddr = target
        .parse()
        .map_err(|_| format!("{target}: expected an IP address and port"))?;
    let shared = Arc::new(Shared {
        begin: Instant::now(),
        stop: AtomicBool::new(false),
        conns: Mutex::new(HashMap::new()),
        sent: Mutex::new(Vec::new()),
    });
    let peers: Vec<i64> = rec.peers();
    let mut initials: HashMap<i64, Vec<u8>> = HashMap::new();
    let mut threads = Vec::new();
    for &p in &peers {
        let addr = rec
            .quorum
            .config()
            .server(p)
            .and_then(|s| s.addresses.first())
            .map(|a| a.election())
            .ok_or_else(|| format!("peer {p} has no address in the config"))?;
        let initial = match rec.peer_initials.get(&p) {
            Some(m) => m.encode().map_err(|e| e.to_string())?,
            None => InitialMessage::versioned(ProtocolVersion::V1, p, vec![addr.clone()])
                .encode()
                .map_err(|e| e.to_string())?,
        };
        initials.insert(p, initial);
        let sock = addr
            .socket_addr()
            .ok_or_else(|| format!("peer {p}: {} is not an IP address", addr.text))?;
        let listener =
            TcpListener::bind(sock).map_err(|e| format!("listening as {p} on {sock}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
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
    for s in shared.conns.lock().unwrap().values() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    for t in threads {
        let _ = t.join();
    }
    let replayed = result?;
    let mut sent = shared.sent.lock().unwrap().clone();
    sent.sort_by_key(|s| s.at_ms);
    Ok(Report::new(rec, target, replayed, &sent))
}

/// Accepts the target's connections to peer `p`: kept when `p` is smaller than the target's
/// sid (the target keeps its own connection then), read and dropped otherwise.
fn accept_loop(sh: Arc<Shared>, listener: TcpListener, p: i64, sid: i64) {
    while !sh.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let sh = sh.clone();
                std::thread::spawn(move || {
                    let mut s = s;
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let Some(m) = read_initial(&mut s) else {
                        return;
                    };
                    if m.sid != sid || p > sid {
                        // The target closes its own connection to a larger sid.
                        return;
                    }
                    attach(&sh, p, s);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn read_initial(s: &mut TcpStream) -> Option<InitialMessage> {
    let mut buf = vec![0u8; 8];
    s.read_exact(&mut buf).ok()?;
    if i64::from_be_bytes(buf[..8].try_into().ok()?) >= 0 {
        return InitialMessage::decode(&buf).ok();
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    buf.extend_from_slice(&head);
    let len = i32::from_be_bytes(head[8..12].try_into().ok()?);
    if !(1..=2048).contains(&len) {
        return None;
    }
    let mut rest = vec![0u8; len as usize];
    s.read_exact(&mut rest).ok()?;
    buf.extend_from_slice(&rest);
    InitialMessage::decode(&buf).ok()
}

/// Makes `s` peer `p`'s connection and reads what the target sends on it.
fn attach(sh: &Arc<Shared>, p: i64, s: TcpStream) {
    let Ok(reader) = s.try_clone() else { return };
    let _ = reader.set_read_timeout(None);
    if let Some(old) = sh.conns.lock().unwrap().insert(p, s) {
        let _ = old.shutdown(std::net::Shutdown::Both);
    }
    let sh = sh.clone();
    std::thread::spawn(move || {
        let mut r = reader;
        loop {
            let mut len = [0u8; 4];
            if r.read_exact(&mut len).is_err() {
                break;
            }
            let len = i32::from_be_bytes(len);
            if len <= 0 || len as usize > crate::wire::frame::MAX_FRAME_BYTES {
                break;
            }
            let mut payload = vec![0u8; len as usize];
            if r.read_exact(&mut payload).is_err() {
                break;
            }
            if let Ok(n) = Notification::decode(&payload) {
                let at_ms = sh.ms();
                sh.sent.lock().unwrap().push(Sent {
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
) -> Result<(), String> {
    let frame = encode_frame(&n.encode().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    for _ in 0..2 {
        if let Some(s) = sh.conns.lock().unwrap().get_mut(&p)
            && s.write_all(&frame).is_ok()
        {
            return Ok(());
        }
        sh.conns.lock().unwrap().remove(&p);
        // Dial as p: kept by the target when p is larger; otherwise it closes and dials back.
        let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(5))
            .map_err(|e| format!("connecting as {p}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.write_all(initial)
            .map_err(|e| format!("connecting as {p}: {e}"))?;
        if p > sid {
            attach(sh, p, s);
        } else {
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline && !sh.conns.lock().unwrap().contains_key(&p) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    Err(format!("no connection to the target as {p}"))
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
) -> Result<Vec<Decided>, String> {
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
            Ok(a) => {
                return Err(format!(
                    "the target is {} already; start it afresh for the replay",
                    a.state.name()
                ));
            }
            Err(e) if wait_start.elapsed() >= wait_answer => {
                return Err(format!(
                    "the target does not answer within {:.1} s: {e}",
                    wait_answer.as_secs_f64()
                ));
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
