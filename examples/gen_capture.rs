//! Writes a large, realistic election capture for benchmarks: the real traffic of a recorded
//! fixture, repeated with each copy moved in time and onto its own client ports, until the
//! file reaches the requested size.
//!
//! ```sh
//! cargo run --release --example gen_capture -- fixtures/staggered5/capture.pcap 1G /tmp/big.pcap
//! ```

use std::io::{BufWriter, Write};

use zkfle::capture::{self, TcpSegment};

fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'G' | 'g' => (&s[..s.len() - 1], 1u64 << 30),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'K' | 'k' => (&s[..s.len() - 1], 1 << 10),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
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
    let span = (last.secs - first.secs + 2) as u32;
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(out).unwrap());
    // Legacy pcap, link type RAW (IPv4/IPv6 without a link header).
    let header: [u32; 6] = [0xa1b2c3d4, 0x0004_0002, 0, 0, 262_144, 101];
    for (i, v) in header.iter().enumerate() {
        if i == 1 {
            w.write_all(&2u16.to_le_bytes()).unwrap();
            w.write_all(&4u16.to_le_bytes()).unwrap();
        } else {
            w.write_all(&v.to_le_bytes()).unwrap();
        }
    }
    let mut written = 24u64;
    let mut copy = 0u32;
    let mut packet = Vec::with_capacity(2048);
    while written < size {
        for s in &segments {
            // Each copy: later in time, and the client side on ports of its own, so every
            // connection is new (as in a long capture of an ensemble that keeps re-electing).
            let shift = |port: u16| {
                if port >= 10000 {
                    10000 + ((u32::from(port) + copy * 7919) % 55000) as u16
                } else {
                    port
                }
            };
            let (src, dst) = (s.src.port(), s.dst.port());
            let builder = match (s.src.ip(), s.dst.ip()) {
                (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
                    etherparse::PacketBuilder::ipv4(a.octets(), b.octets(), 64)
                }
                (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => {
                    etherparse::PacketBuilder::ipv6(a.octets(), b.octets(), 64)
                }
                _ => continue,
            };
            let mut tcp = builder.tcp(shift(src), shift(dst), s.seq, 65535);
            if s.syn {
                tcp = tcp.syn();
            }
            if s.fin {
                tcp = tcp.fin();
            }
            if s.rst {
                tcp = tcp.rst();
            }
            if let Some(ack) = s.ack {
                tcp = tcp.ack(ack);
            }
            packet.clear();
            tcp.write(&mut packet, &s.payload).unwrap();
            let secs = (s.time.secs as u32).wrapping_add(copy.wrapping_mul(span));
            for v in [
                secs,
                s.time.nanos / 1000,
                packet.len() as u32,
                packet.len() as u32,
            ] {
                w.write_all(&v.to_le_bytes()).unwrap();
            }
            w.write_all(&packet).unwrap();
            written += 16 + packet.len() as u64;
        }
        copy += 1;
    }
    w.flush().unwrap();
    eprintln!("{out}: {written} bytes, {copy} copies of {source}");
}
