//! Per-follower ACK latency from a capture of a leader's quorum port, for
//! scripts/bench-zab.sh: the time from a PROPOSAL(zxid) seen on the wire (leader to follower)
//! to that follower's ACK(zxid) seen on the wire. Both directions of every quorum connection
//! are reassembled with zkfle's capture module and decoded with its quorum codec (so a SNAP's
//! snapshot is walked, not guessed at); followers are named by the sid of their FOLLOWERINFO.
//!
//! ```sh
//! ack_latency quorum.pcap runs.txt [PORT]   # runs.txt: lines "label start end" (epoch s)
//! ```
//!
//! Prints one line per (run, follower): n, p50, p90, p99, max in microseconds, by the run in
//! which the PROPOSAL was seen.

use std::collections::{BTreeMap, HashMap};

use zkfle::capture::{self, ConnId, Direction, Reassembler, ReassemblyConfig, StreamEvent};
use zkfle::wire::quorum::{LearnerInfo, QuorumItem, QuorumStreamDecoder, ptype};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: ack_latency CAPTURE RUNS [PORT]");
        std::process::exit(2);
    }
    let port: u16 = args.get(3).and_then(|p| p.parse().ok()).unwrap_or(2888);
    let runs: Vec<(String, f64, f64)> = std::fs::read_to_string(&args[2])
        .expect("runs file")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_string(),
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
            ))
        })
        .collect();
    let run_of = |t: f64| runs.iter().position(|(_, a, b)| *a <= t && t <= *b);

    let mut segs = capture::open(&args[1]).expect("capture");
    let mut re = Reassembler::new(ReassemblyConfig::default());
    // Per connection: whether the leader is the acceptor (it always is, on its quorum port).
    let mut leader_accepts: HashMap<ConnId, bool> = HashMap::new();
    let mut decoders: HashMap<(ConnId, Direction), QuorumStreamDecoder> = HashMap::new();
    let mut broken: HashMap<(ConnId, Direction), String> = HashMap::new();
    let mut sid: HashMap<ConnId, i64> = HashMap::new();
    let mut proposed: HashMap<(ConnId, i64), f64> = HashMap::new();
    let mut lat: BTreeMap<(usize, i64), Vec<f64>> = BTreeMap::new();
    let mut on_event = |e: StreamEvent<&[u8]>| match e {
        StreamEvent::Opened { conn, acceptor, .. } => {
            leader_accepts.insert(conn, acceptor.port() == port);
        }
        StreamEvent::Gap { conn, dir, .. } => {
            broken.insert((conn, dir), "a gap in the capture".into());
        }
        StreamEvent::Data {
            conn,
            dir,
            time,
            bytes,
            ..
        } => {
            if broken.contains_key(&(conn, dir))
                || !leader_accepts.get(&conn).copied().unwrap_or(false)
            {
                return;
            }
            let t = time.as_secs_f64();
            let from_leader = dir == Direction::FromAcceptor;
            let dec = decoders.entry((conn, dir)).or_default();
            let mut input = bytes;
            loop {
                match dec.decode(&mut input) {
                    Ok(Some(QuorumItem::Packet { packet: p, .. })) => {
                        match (from_leader, p.ptype) {
                            (false, ptype::FOLLOWERINFO) => {
                                if let Some(li) =
                                    p.data.as_deref().and_then(|d| LearnerInfo::decode(d).ok())
                                {
                                    sid.insert(conn, li.sid);
                                }
                            }
                            (true, ptype::PROPOSAL) => {
                                proposed.insert((conn, p.zxid), t);
                            }
                            (false, ptype::ACK) => {
                                if let Some(t0) = proposed.remove(&(conn, p.zxid))
                                    && let Some(r) = run_of(t0)
                                {
                                    let s = sid.get(&conn).copied().unwrap_or(-1);
                                    lat.entry((r, s)).or_default().push((t - t0) * 1e6);
                                }
                            }
                            _ => {}
                        }
                    }
                    Ok(Some(_)) => {} // snapshot bytes
                    Ok(None) => break,
                    Err(e) => {
                        broken.insert((conn, dir), e.to_string());
                        break;
                    }
                }
            }
        }
        StreamEvent::Unacknowledged { .. } | StreamEvent::Closed { .. } => {}
    };
    while let Some(r) = segs.next_with(|seg| re.push_with(seg, &mut on_event)) {
        if let Err(e) = r {
            eprintln!("ack_latency: {e}");
            break;
        }
    }
    re.finish_with(&mut on_event);
    for ((conn, dir), why) in &broken {
        eprintln!("ack_latency: stream {conn:?} {dir:?} not decoded past: {why}");
    }
    for ((r, s), mut v) in lat {
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        println!(
            "  ack {:<16} follower sid {s}  n={:<6} p50={:>6.0} us  p90={:>6.0} us  p99={:>6.0} us  max={:>6.0} us",
            runs[r].0,
            v.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            v[v.len() - 1]
        );
    }
}
