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
//! `ZKFLE_SCALE_ONE=N` with the `one_size` test decodes and summarizes one size once, for
//! instruction counts (`valgrind --tool=callgrind --toggle-collect='*Summarizer*'`) and peak
//! memory.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use zkfle::capture::{TcpSegment, Timestamp};
use zkfle::decode::{DecodeOptions, Decoder, Record};
use zkfle::story::Summarizer;
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

/// CPU time of this thread so far, in seconds (`CLOCK_THREAD_CPUTIME_ID`, to the nanosecond):
/// other work on a shared machine does not count, as wall time would. (The scheduler's
/// `/proc/thread-self/schedstat`, used before, moves only at scheduler ticks: too coarse for
/// the few milliseconds of the smaller capture.)
fn cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The hub's address is known, as `--sid-map 10.0.0.1:3888=1` would tell it.
fn options() -> DecodeOptions {
    let mut options = DecodeOptions::default();
    let hub = ElectionAddress::parse(&addr(HUB, 3888).to_string(), 0).unwrap();
    options
        .book
        .learn(HUB, &hub, zkfle::decode::SidSource::SidMap);
    options
}

/// Seconds of CPU to decode the crafted capture of `n` sids, to summarize the decoded records,
/// and to do both streamed as `zkfle decode --summary` does; and the number of records.
///
/// The summary is timed over records decoded beforehand into one list, and each run starts
/// with the caches emptied: otherwise the 41,000 records of the smaller capture, read again
/// and again, stay in the processor's shared cache while the 328,000 of the larger one come
/// from memory every time, and the ratio would measure that. (Streamed, each record is
/// summarized while the decoder has it in cache; the summary's share of that run is too small
/// beside the decode's to tell apart on a shared machine.)
fn measure(n: i64) -> Measured {
    let segments = crafted(n);
    // CPU time, the least of several runs: the machine is shared (caches too).
    let mut decoded = f64::INFINITY;
    let mut streamed = f64::INFINITY;
    let mut records: Vec<Record> = Vec::new();
    for _ in 0..5 {
        let input = segments.clone();
        let started = cpu_secs();
        records = Decoder::new(input.into_iter().map(Ok), options()).collect();
        decoded = decoded.min(cpu_secs() - started);
        let input = segments.clone();
        let started = cpu_secs();
        let mut summarizer = Summarizer::new(Default::default());
        for r in Decoder::new(input.into_iter().map(Ok), options()) {
            summarizer.add(&r);
        }
        let summary = summarizer.finish();
        streamed = streamed.min(cpu_secs() - started);
        drop(summary);
    }
    let mut summarized = f64::INFINITY;
    let mut still = 0;
    let mut evict = vec![0u8; EVICT_BYTES];
    for round in 0..7u8 {
        // Every run starts with the records out of the caches, as they are for the larger
        // capture anyway: otherwise the smaller one's records, read again and again, stay in
        // the shared cache and only the larger capture pays for reading them from memory.
        evict.iter_mut().for_each(|b| *b = b.wrapping_add(round));
        std::hint::black_box(&evict);
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
    Measured {
        decode: decoded,
        summary: summarized,
        streamed,
        records: records.len(),
    }
}

/// More than the processor's caches hold (2 MiB of L2, 32 MiB of L3 on the machine measured).
const EVICT_BYTES: usize = 96 << 20;

struct Measured {
    decode: f64,
    summary: f64,
    streamed: f64,
    records: usize,
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

/// One size alone, decoded and summarized once, for instruction counts and peak memory:
/// `ZKFLE_SCALE_ONE=8000 valgrind --tool=callgrind --toggle-collect='*Summarizer*' \
/// target/release/deps/summary_scale-* one_size --ignored`.
#[test]
#[ignore = "a benchmark: one size, where ZKFLE_SCALE_ONE says"]
fn one_size() {
    let Some(n) = std::env::var("ZKFLE_SCALE_ONE")
        .ok()
        .and_then(|n| n.parse::<i64>().ok())
    else {
        return;
    };
    let records: Vec<Record> = Decoder::new(crafted(n).into_iter().map(Ok), options()).collect();
    let mut summarizer = Summarizer::new(Default::default());
    for r in &records {
        summarizer.add(r);
    }
    let summary = summarizer.finish();
    println!(
        "{n} sids: {} records, {} rounds",
        records.len(),
        summary.rounds.len()
    );
}

#[test]
#[ignore = "a benchmark: run with --release -- --ignored --nocapture"]
fn summary_time_is_near_linear_in_sids() {
    // Warm up allocators and caches once.
    measure(200);
    if std::env::var("ZKFLE_SCALE_CURVE").is_ok() {
        for n in [500, 1_000, 2_000, 4_000, 8_000, 16_000] {
            let m = measure(n);
            println!(
                "{n} sids: {} records, decode {:.3} s, summary {:.4} s ({:.0} ns/record), decode and summary streamed {:.3} s",
                m.records,
                m.decode,
                m.summary,
                m.summary / m.records as f64 * 1e9,
                m.streamed,
            );
        }
    }
    let one = measure(1_000);
    let eight = measure(8_000);
    for (n, m) in [("1,000", &one), ("8,000", &eight)] {
        println!(
            "{n} sids: {} records, decode {:.4} s, summary {:.4} s ({:.0} ns/record), decode and summary streamed {:.4} s",
            m.records,
            m.decode,
            m.summary,
            m.summary / m.records as f64 * 1e9,
            m.streamed,
        );
    }
    println!(
        "ratio 8,000 / 1,000: summary {:.1}x (target: at most 12x), decode {:.1}x, decode and summary streamed {:.1}x",
        eight.summary / one.summary,
        eight.decode / one.decode,
        eight.streamed / one.streamed,
    );
}
