//! How the summary scales with the number of servers: a crafted capture of N distinct sids,
//! each sending 20 notifications to a hub (and getting 20 answers), for N = 1,000 and 8,000,
//! measured in one run. A benchmark, not a timed assertion: run it with
//!
//! ```sh
//! cargo test --release --test summary_scale -- --ignored --nocapture
//! ```
//!
//! and read the ratio it prints (the target: 8,000 sids take at most 12 times as long as 1,000);
//! with `ZKFLE_SCALE_CURVE=1` it also prints the cost per record from 500 to 16,000 sids.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use zkfle::capture::{TcpSegment, Timestamp};
use zkfle::decode::summary::Summarizer;
use zkfle::decode::{DecodeOptions, Decoder, Record};
use zkfle::wire::{
    ElectionAddress, InitialMessage, Notification, ProtocolVersion, ServerState, encode_frame,
};

const NOTIFICATIONS: usize = 20;
const HUB: i64 = 1;

fn addr(sid: i64, port: u16) -> SocketAddr {
    let s = sid as u32;
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, (s >> 16) as u8, (s >> 8) as u8, s as u8)),
        port,
    )
}

fn seg(
    time: u64,
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    syn: bool,
    payload: Vec<u8>,
) -> TcpSegment {
    TcpSegment {
        time: Timestamp {
            secs: 1_000_000 + (time / 1_000_000) as i64,
            nanos: (time % 1_000_000) as u32 * 1000,
        },
        src,
        dst,
        seq,
        // The opening SYN carries no ACK; everything else does.
        ack: (!syn || src.port() == 3888).then_some(1),
        syn,
        fin: false,
        rst: false,
        payload,
        missing: 0,
        record: 0,
    }
}

fn vote(leader: i64, zxid: i64, round: i64) -> Vec<u8> {
    let n = Notification {
        state: ServerState::Looking,
        leader,
        zxid,
        election_epoch: round,
        peer_epoch: Some(0),
        version: Some(2),
        config: Some(b"version=0".to_vec()),
        trailing: Vec::new(),
    };
    encode_frame(&n.encode().unwrap()).unwrap()
}

/// N servers (sids 2..=N+1), each dialling the hub, sending its initial message and 20 LOOKING
/// votes (for itself, then for the largest sid), interleaved in time; the hub answers each.
fn crafted(n: i64) -> Vec<TcpSegment> {
    let hub = addr(HUB, 3888);
    let mut out = Vec::new();
    let mut t = 0u64;
    let mut seqs = vec![(1u32, 1u32); n as usize + 2];
    for sid in 2..=n + 1 {
        let me = addr(sid, 40000);
        out.push(seg(t, me, hub, 0, true, Vec::new()));
        out.push(seg(t, hub, me, 0, true, Vec::new()));
        let initial = InitialMessage::versioned(
            ProtocolVersion::V1,
            sid,
            vec![ElectionAddress::parse(&addr(sid, 3888).to_string(), 0).unwrap()],
        )
        .encode()
        .unwrap();
        let (a, _) = &mut seqs[sid as usize];
        out.push(seg(t, me, hub, *a, false, initial.clone()));
        *a += initial.len() as u32;
        t += 10;
    }
    for k in 0..NOTIFICATIONS {
        for sid in 2..=n + 1 {
            let me = addr(sid, 40000);
            let leader = if k < NOTIFICATIONS / 2 { sid } else { n + 1 };
            let (a, b) = &mut seqs[sid as usize];
            let mine = vote(leader, 0, 1);
            out.push(seg(t, me, hub, *a, false, mine.clone()));
            *a += mine.len() as u32;
            let answer = vote(n + 1, 0, 1);
            out.push(seg(t + 5, hub, me, *b, false, answer.clone()));
            *b += answer.len() as u32;
            t += 10;
        }
    }
    out
}

/// CPU time of this thread so far, in seconds (Linux `/proc/thread-self/schedstat`, in
/// nanoseconds): other work on a shared machine does not count, as wall time would.
fn cpu_secs() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    let ns: u64 = text.split_whitespace().next().unwrap().parse().unwrap();
    ns as f64 / 1e9
}

/// The hub's address is known, as `--sid-map 10.0.0.1:3888=1` would tell it.
fn options() -> DecodeOptions {
    let mut options = DecodeOptions::default();
    let hub = ElectionAddress::parse(&addr(HUB, 3888).to_string(), 0).unwrap();
    options.book.learn(HUB, &hub);
    options
}

/// Seconds to decode and to summarize the crafted capture of `n` sids.
fn measure(n: i64) -> (f64, f64, usize) {
    let segments = crafted(n);
    // CPU time, the least of several runs: the machine is shared (caches too).
    let mut decoded = f64::INFINITY;
    let mut records: Vec<Record> = Vec::new();
    for _ in 0..3 {
        let segments = segments.clone();
        let started = cpu_secs();
        records = Decoder::new(segments.into_iter().map(Ok), options()).collect();
        decoded = decoded.min(cpu_secs() - started);
    }
    let mut summarized = f64::INFINITY;
    let mut still = 0;
    for _ in 0..7 {
        let started = cpu_secs();
        let mut summarizer = Summarizer::new(Default::default());
        for r in &records {
            summarizer.add(r);
        }
        let summary = summarizer.finish();
        summarized = summarized.min(cpu_secs() - started);
        still = summary.rounds.iter().map(|r| r.still_looking.len()).sum();
    }
    // Only the hub hears a quorum (for the largest sid): the other servers are still LOOKING,
    // each with its reason.
    assert!(still + 2 >= n as usize, "{still} of {n} still LOOKING");
    (decoded, summarized, records.len())
}

/// Writes the crafted captures as files, for timing the command itself:
/// `ZKFLE_SCALE_DIR=/tmp/scale cargo test --release --test summary_scale write -- --ignored`,
/// then `zkfle decode --summary --sid-map 10.0.0.1:3888=1 /tmp/scale/sids-8000.pcap`.
#[test]
#[ignore = "writes the benchmark's captures where ZKFLE_SCALE_DIR says"]
fn write_crafted_captures() {
    let Ok(dir) = std::env::var("ZKFLE_SCALE_DIR") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for n in [1_000, 8_000] {
        let path = std::path::Path::new(&dir).join(format!("sids-{n}.pcap"));
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = zkfle::capture::PcapWriter::new(file).unwrap();
        for s in crafted(n) {
            w.write(&s).unwrap();
        }
        w.finish().unwrap();
        println!("{}", path.display());
    }
}

#[test]
#[ignore = "a benchmark: run with --release -- --ignored --nocapture"]
fn summary_time_is_near_linear_in_sids() {
    // Warm up allocators and caches once.
    measure(200);
    if std::env::var("ZKFLE_SCALE_CURVE").is_ok() {
        for n in [500, 1_000, 2_000, 4_000, 8_000, 16_000] {
            let (d, s, r) = measure(n);
            println!(
                "{n} sids: {r} records, decode {d:.3} s, summary {s:.4} s, {:.0} ns/record",
                s / r as f64 * 1e9
            );
        }
    }
    let (d1, s1, r1) = measure(1_000);
    let (d8, s8, r8) = measure(8_000);
    println!("1,000 sids: {r1} records, decode {d1:.3} s, summary {s1:.4} s");
    println!("8,000 sids: {r8} records, decode {d8:.3} s, summary {s8:.4} s");
    println!(
        "ratio 8,000 / 1,000: summary {:.1}x, decode + summary {:.1}x (target: at most 12x)",
        s8 / s1,
        (d8 + s8) / (d1 + s1)
    );
}
