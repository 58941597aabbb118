//! Writes a large, realistic election capture for benchmarks: the real traffic of a recorded
//! fixture, repeated with each copy moved in time and onto its own client ports, until the
//! file reaches the requested size.
//!
//! ```sh
//! cargo run --release --example gen_capture -- fixtures/staggered5/capture.pcap 1G /tmp/big.pcap
//! for i in 1 2 3; do     # one large capture per host, consistent with each other
//!   SPAN_SECS=30 cargo run --release --example gen_capture -- fixtures/multihost3/host.$i.pcap 128M /tmp/host.$i.pcap
//! done
//! ```

use std::io::{BufWriter, Write};

use zkfle::capture::{self, PcapWriter, TcpSegment, Timestamp};

fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'G' | 'g' => (&s[..s.len() - 1], 1u64 << 30),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'K' | 'k' => (&s[..s.len() - 1], 1 << 10),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// `gen_capture --syn-only N OUT`: N connections that never get past their SYN (a port scan,
/// dials to a dead server), one SYN each, for the reassembly memory benchmark.
fn syn_only(n: u32, out: &str) {
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(out).unwrap());
    let mut w = PcapWriter::new(file).unwrap();
    for i in 0..n {
        let src = std::net::SocketAddr::from((
            [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            (40_000 + i % 20_000) as u16,
        ));
        let seg = TcpSegment {
            time: Timestamp {
                secs: 1_700_000_000 + i64::from(i / 100_000),
                nanos: (i % 100_000) * 10_000,
            },
            src,
            dst: ([10, 255, 0, 1], 3888).into(),
            seq: i.wrapping_mul(7919),
            ack: None,
            syn: true,
            fin: false,
            rst: false,
            payload: Vec::new(),
            missing: 0,
            record: 0,
        };
        w.write(&seg).unwrap();
    }
    w.finish().unwrap().flush().unwrap();
    eprintln!("{out}: {n} SYN-only connections");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, n, out] = args.as_slice()
        && flag == "--syn-only"
    {
        let Ok(n) = n.parse() else {
            eprintln!("usage: gen_capture --syn-only N OUT.pcap");
            std::process::exit(2);
        };
        return syn_only(n, out);
    }
    let usage = "usage: gen_capture SOURCE.pcap SIZE OUT.pcap";
    let [_, source, size, out] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(size) = parse_size(size) else {
        eprintln!("{usage}: bad size {size:?}");
        std::process::exit(2);
    };
    let segments: Vec<TcpSegment> = capture::open(source)
        .unwrap_or_else(|e| {
            eprintln!("{source}: {e}");
            std::process::exit(1)
        })
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| {
            eprintln!("{source}: {e}");
            std::process::exit(1)
        });
    let first = segments.first().map(|s| s.time).unwrap_or_default();
    let last = segments.last().map(|s| s.time).unwrap_or_default();
    // SPAN_SECS fixes the time between copies, so that the captures of several hosts of one
    // recording (fixtures/multihost3/host.N.pcap) stay consistent with each other.
    let span = std::env::var("SPAN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or((last.secs - first.secs + 2) as u32);
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(out).unwrap());
    let mut w = PcapWriter::new(file).unwrap();
    let mut written = 24u64;
    let mut copy = 0u32;
    while written < size {
        for s in &segments {
            // Each copy: later in time, and the client side on ports of its own, so every
            // connection is new (as in a long capture of an ensemble that keeps re-electing).
            let shift = |mut a: std::net::SocketAddr| {
                if a.port() >= 10000 {
                    a.set_port(10000 + ((u32::from(a.port()) + copy * 7919) % 55000) as u16);
                }
                a
            };
            let moved = TcpSegment {
                src: shift(s.src),
                dst: shift(s.dst),
                time: Timestamp {
                    secs: s.time.secs + i64::from(copy) * i64::from(span),
                    nanos: s.time.nanos,
                },
                ..s.clone()
            };
            written += w.write(&moved).unwrap() as u64;
        }
        copy += 1;
    }
    w.finish().unwrap().flush().unwrap();
    eprintln!("{out}: {written} bytes, {copy} copies of {source}");
}
