//! Tests for the capture module: reader, link decoding, reassembly.

use std::io::{self, Read};

use proptest::prelude::*;

use super::testutil::*;
use super::*;

const A: &str = "10.0.0.1:40000";
const B: &str = "10.0.0.2:3888";

fn segs_of(bytes: Vec<u8>) -> (Vec<Result<TcpSegment, CaptureError>>, CaptureStats) {
    let mut it = TcpSegments::from_reader(io::Cursor::new(bytes)).expect("capture opens");
    let v: Vec<_> = it.by_ref().collect();
    (v, *it.stats())
}

fn ok_segs(bytes: Vec<u8>) -> Vec<TcpSegment> {
    segs_of(bytes)
        .0
        .into_iter()
        .map(|r| r.expect("no error"))
        .collect()
}

fn sample(src: &str, dst: &str) -> TcpSegment {
    let mut s = seg(src, dst, 0x1234_5678, b"hello zookeeper");
    s.ack = Some(42);
    s.fin = true;
    s
}

// ---------------------------------------------------------------- reader & link layers

#[test]
fn every_link_type_yields_the_segment() {
    let v4 = sample(A, B);
    let v6 = sample("[fd00::1]:40000", "[fd00::2]:3888");
    let cases = [
        (Link::Ethernet, &v4),
        (Link::Ethernet, &v6),
        (Link::Vlan(7), &v4),
        (Link::Vlan(4000), &v6),
        (Link::Sll, &v4),
        (Link::Sll, &v6),
        (Link::Sll2, &v4),
        (Link::Sll2, &v6),
        (Link::NullLe, &v4),
        (Link::NullBe, &v4),
        (Link::NullLe, &v6),
        (Link::Loop, &v4),
        (Link::Loop, &v6),
        (Link::Raw(linktype::RAW), &v4),
        (Link::Raw(linktype::RAW), &v6),
        (Link::Raw(linktype::IPV4), &v4),
        (Link::Raw(linktype::IPV6), &v6),
        (Link::Raw(linktype::RAW_BSD12), &v4),
        (Link::Raw(linktype::RAW_BSD14), &v6),
    ];
    for (link, s) in cases {
        let (lt, data) = frame(link, s);
        let got = ok_segs(pcap(
            false,
            false,
            lt,
            &[Rec::new(1_700_000_000, 250_000, data)],
        ));
        assert_eq!(got.len(), 1, "{link:?}");
        let g = &got[0];
        assert_eq!(g.src, s.src, "{link:?}");
        assert_eq!(g.dst, s.dst, "{link:?}");
        assert_eq!(g.seq, s.seq);
        assert_eq!(g.ack, Some(42));
        assert!(g.fin && !g.syn && !g.rst);
        assert_eq!(g.payload, s.payload, "{link:?}");
        assert_eq!(g.missing, 0);
        assert_eq!(g.record, 1);
        assert_eq!(
            g.time,
            Timestamp {
                secs: 1_700_000_000,
                nanos: 250_000_000
            }
        );
    }
}

#[test]
fn pcap_big_endian_and_nanoseconds() {
    let s = sample(A, B);
    for (be, nanos) in [(false, false), (false, true), (true, false), (true, true)] {
        let (lt, data) = frame(Link::Ethernet, &s);
        let recs = [Rec::new(10, 5, data.clone()), Rec::new(11, 999_999, data)];
        let got = ok_segs(pcap(be, nanos, lt, &recs));
        assert_eq!(got.len(), 2);
        let unit = if nanos { 1 } else { 1000 };
        assert_eq!(
            got[0].time,
            Timestamp {
                secs: 10,
                nanos: 5 * unit
            }
        );
        assert_eq!(
            got[1].time,
            Timestamp {
                secs: 11,
                nanos: 999_999 * unit
            }
        );
        assert_eq!(got[1].record, 2);
    }
}

#[test]
fn pcapng_interfaces_with_own_link_types_and_resolutions() {
    let s = sample(A, B);
    let (lt0, eth) = frame(Link::Ethernet, &s);
    let (lt1, sll2) = frame(Link::Sll2, &s);
    let (lt2, raw) = frame(Link::Raw(linktype::RAW), &s);
    for be in [false, true] {
        let file = pcapng(
            be,
            &[
                Iface {
                    linktype: lt0,
                    tsresol: None,
                }, // microseconds
                Iface {
                    linktype: lt1,
                    tsresol: Some(9),
                }, // nanoseconds
                Iface {
                    linktype: lt2,
                    tsresol: Some(0x80 | 10),
                }, // 1/1024 s
            ],
            &[
                Epb::new(0, 1_700_000_000_123_456, eth.clone()),
                Epb::new(1, 1_700_000_000_123_456_789, sll2.clone()),
                Epb::new(2, 5 * 1024 + 512, raw.clone()),
                Epb::new(7, 0, eth.clone()), // no such interface
            ],
        );
        let (got, stats) = segs_of(file);
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0].time,
            Timestamp {
                secs: 1_700_000_000,
                nanos: 123_456_000
            }
        );
        assert_eq!(
            got[1].time,
            Timestamp {
                secs: 1_700_000_000,
                nanos: 123_456_789
            }
        );
        assert_eq!(
            got[2].time,
            Timestamp {
                secs: 5,
                nanos: 500_000_000
            }
        );
        assert_eq!([got[0].record, got[1].record, got[2].record], [1, 2, 3]);
        assert!(got.iter().all(|g| g.payload == s.payload));
        assert_eq!(stats.unknown_interface, 1);
        assert_eq!(stats.packets, 4);
    }
}

#[test]
fn pcapng_new_section_resets_interfaces() {
    let s = sample(A, B);
    let (_, eth) = frame(Link::Ethernet, &s);
    let (_, raw) = frame(Link::Raw(linktype::RAW), &s);
    let mut v = Vec::new();
    shb(&mut v, false);
    idb(
        &mut v,
        false,
        &Iface {
            linktype: linktype::ETHERNET,
            tsresol: None,
        },
    );
    epb(&mut v, false, &Epb::new(0, 1, eth));
    // Second section, big-endian, whose interface 0 is raw IP.
    shb(&mut v, true);
    idb(
        &mut v,
        true,
        &Iface {
            linktype: linktype::RAW,
            tsresol: None,
        },
    );
    epb(&mut v, true, &Epb::new(0, 2, raw));
    let got = ok_segs(v);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].record, 2);
    assert_eq!(got[1].payload, s.payload);
}

/// Hands out input one byte per `read`, like a slow pipe.
struct Trickle(io::Cursor<Vec<u8>>);
impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(1);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn short_reads_are_fine() {
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let ng = pcapng(
        false,
        &[Iface {
            linktype: lt,
            tsresol: None,
        }],
        &(0..50)
            .map(|i| Epb::new(0, i, data.clone()))
            .collect::<Vec<_>>(),
    );
    let legacy = pcap(
        false,
        false,
        lt,
        &(0..50)
            .map(|i| Rec::new(i, 0, data.clone()))
            .collect::<Vec<_>>(),
    );
    for file in [ng, legacy] {
        let it = TcpSegments::from_reader(Trickle(io::Cursor::new(file))).unwrap();
        let got: Vec<_> = it.map(Result::unwrap).collect();
        assert_eq!(got.len(), 50);
    }
}

/// A pipe that has delivered only `open` bytes so far: reading more fails the test, the way a
/// live `tcpdump -w -` would block until its next packet.
struct Pipe {
    data: Vec<u8>,
    at: usize,
    open: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}
impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let open = self.open.load(std::sync::atomic::Ordering::Relaxed);
        let open = open.min(self.data.len());
        assert!(
            self.at < open || open == self.data.len(),
            "read past what the pipe has"
        );
        let n = buf.len().min(open - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn each_packet_is_handed_over_as_soon_as_its_bytes_arrive() {
    // A quiet `tcpdump -U -w - | zkfle decode -` must not wait for more input (64 KiB once)
    // before decoding what has come.
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let legacy = pcap(
        false,
        false,
        lt,
        &(0..3)
            .map(|i| Rec::new(i, 0, data.clone()))
            .collect::<Vec<_>>(),
    );
    let iface = || Iface {
        linktype: lt,
        tsresol: None,
    };
    let epbs: Vec<_> = (0..3).map(|i| Epb::new(0, i, data.clone())).collect();
    for file in [
        legacy,
        pcapng(false, &[iface()], &epbs),
        pcapng(true, &[iface()], &epbs),
    ] {
        let open = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let header = first_header(&file);
        let packet = (file.len() - header) / 3;
        let pipe = Pipe {
            data: file.clone(),
            at: 0,
            open: open.clone(),
        };
        let arrived = |n| open.store(header + n * packet, std::sync::atomic::Ordering::Relaxed);
        arrived(1);
        let mut segments = TcpSegments::from_reader(pipe).unwrap();
        assert!(segments.next().unwrap().is_ok());
        arrived(2);
        assert!(segments.next().unwrap().is_ok());
        arrived(3);
        assert!(segments.next().unwrap().is_ok());
        assert!(segments.next().is_none());
    }
}

/// The bytes before the first packet of a file written by `pcap` or `pcapng` (with one
/// interface): the file header, or the section header and interface description blocks.
fn first_header(file: &[u8]) -> usize {
    if file[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let be = file[8] == 0x1a;
        let len = |at: usize| {
            let b = [file[at], file[at + 1], file[at + 2], file[at + 3]];
            (if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }) as usize
        };
        let shb = len(4);
        shb + len(shb + 4)
    } else {
        24
    }
}

#[test]
fn a_pcapng_block_with_bad_lengths_is_named_with_what_is_wrong() {
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let iface = Iface {
        linktype: lt,
        tsresol: None,
    };
    let good = pcapng(false, &[iface], &[Epb::new(0, 1, data)]);
    let at = first_header(&good);
    let len = good.len() - at;
    let with = |opening: usize, closing: usize| {
        let mut file = good.clone();
        file[at + 4..at + 8].copy_from_slice(&(opening as u32).to_le_bytes());
        let end = file.len();
        file[end - 4..].copy_from_slice(&(closing as u32).to_le_bytes());
        file
    };
    for (file, expected) in [
        (
            with(12, len),
            "pcapng enhanced packet block declares a total length of 12 bytes, fewer than the 32 of its own fields",
        ),
        (with(len - 2, len), "not a multiple of 4"),
        (
            with(len, len + 4),
            &format!(
                "declares a total length of {len} bytes at its start and {} at its end",
                len + 4
            ),
        ),
    ] {
        let (got, _) = segs_of(file);
        match got.last() {
            Some(Err(e @ CaptureError::Malformed { .. })) => {
                assert!(e.to_string().contains(expected), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
    // A legacy pcap after it (`cat a.pcapng b.pcap`): files joined end to end.
    let mut joined = good.clone();
    joined.extend(pcap(false, false, lt, &[Rec::new(0, 0, vec![0; 40])]));
    let (got, _) = segs_of(joined);
    assert!(
        matches!(
            got.last(),
            Some(Err(CaptureError::Joined { record: 1, .. }))
        ),
        "{got:?}"
    );
}

#[test]
fn every_prefix_of_a_file_header_is_an_error_not_a_panic() {
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let iface = || Iface {
        linktype: lt,
        tsresol: None,
    };
    for file in [
        pcap(false, false, lt, &[Rec::new(0, 0, data.clone())]),
        pcapng(false, &[iface()], &[Epb::new(0, 1, data.clone())]),
        pcapng(true, &[iface()], &[Epb::new(0, 1, data.clone())]),
    ] {
        for end in 0..64.min(file.len()) {
            let mut it = match TcpSegments::from_reader(io::Cursor::new(file[..end].to_vec())) {
                Ok(it) => it,
                Err(_) => continue,
            };
            while let Some(Ok(_)) = it.next() {}
        }
    }
    // A pcapng magic then a byte-order magic where the length should be, cut anywhere (found
    // by fuzzing).
    let odd = [
        0x0a, 0x0d, 0x0d, 0x0a, 0x4d, 0x3c, 0x2b, 0x1a, 0x4d, 0x3c, 0x2b, 0x1a,
    ];
    for end in 0..=odd.len() {
        if let Ok(mut it) = TcpSegments::from_reader(io::Cursor::new(odd[..end].to_vec())) {
            while let Some(Ok(_)) = it.next() {}
        }
    }
}

#[test]
fn a_pcapng_block_shorter_than_its_lengths_is_refused_not_a_panic() {
    // pcap-parser panics on a process information block (type 0x80000001) declaring fewer
    // than 12 bytes (found by fuzzing); every block type is refused before it is parsed.
    for kind in [0x8000_0001u32, 0x0000_0002, 0x1234_5678, 6] {
        for len in [0u32, 4, 8, 11] {
            for be in [false, true] {
                let ethernet = Iface {
                    linktype: 1,
                    tsresol: None,
                };
                let mut file = pcapng(be, &[ethernet], &[]);
                let word = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
                file.extend_from_slice(&word(kind));
                file.extend_from_slice(&word(len));
                file.extend_from_slice(&[0; 24]);
                let got: Vec<_> = TcpSegments::from_reader(io::Cursor::new(file))
                    .unwrap()
                    .collect();
                match got.last() {
                    Some(Err(CaptureError::Malformed { detail, .. })) => assert!(
                        detail.contains(&format!("total length of {len} bytes")),
                        "{detail}"
                    ),
                    other => panic!("type {kind:#x} length {len}: {other:?}"),
                }
            }
        }
    }
    // The fuzzer's own input.
    let found = [
        0x0a, 0x0d, 0x0d, 0x0a, 0x63, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, 0x41, 0x0d, 0x0d,
        0x0d, 0x0a, 0x0d, 0x0d, 0x2b, 0xf0, 0x2c, 0xc3, 0xf2, 0x0a, 0x0d, 0x1a, 0x5c, 0x5d, 0x5d,
        0x5d, 0x4d, 0xff, 0x0a, 0x0d, 0x1a, 0x2b, 0x3c, 0xf4, 0x4d, 0x00, 0x77, 0x00, 0x00, 0x08,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3c, 0x2b, 0x1a, 0x41,
        0x0d, 0x0d, 0x0d, 0x0a, 0x0d, 0x0d, 0x2b, 0x3c, 0xd3, 0x0d, 0x0d, 0x0a, 0x0d, 0x1a, 0x2b,
        0x3c, 0xd3, 0x3c, 0x0d, 0x5d, 0x4d, 0xff, 0x0a, 0x0d, 0x1a, 0x2b, 0x3c, 0x00, 0xff, 0x09,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x80, 0x04, 0x00,
        0x00, 0x00, 0x80, 0x4d, 0x48,
    ];
    if let Ok(mut it) = TcpSegments::from_reader(io::Cursor::new(found.to_vec())) {
        while let Some(Ok(_)) = it.next() {}
    }
}

#[test]
fn a_bad_gzip_checksum_is_reported_after_a_small_capture() {
    use std::io::Write as _;
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let file = pcap(false, false, lt, &[Rec::new(1, 0, data)]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&file).unwrap();
    let mut gz = gz.finish().unwrap();
    // The CRC-32 of the data is the trailer's first four bytes.
    let crc = gz.len() - 8;
    gz[crc] ^= 0xff;
    let got: Vec<_> = TcpSegments::from_reader(io::Cursor::new(gz))
        .unwrap()
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].is_ok());
    match &got[1] {
        Err(CaptureError::Read { source, .. }) => {
            assert!(source.to_string().contains("checksum"), "{source}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn large_records_grow_the_buffer() {
    let mut s = sample(A, B);
    s.payload = vec![7; 60_000];
    let (lt, data) = frame(Link::Raw(linktype::RAW), &s);
    let file = pcapng(
        false,
        &[Iface {
            linktype: lt,
            tsresol: None,
        }],
        &(0..5)
            .map(|i| Epb::new(0, i, data.clone()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(ok_segs(file).len(), 5);
    // A legacy record claiming 4 GiB stops at the block limit, without reading it all.
    let mut file = pcap(false, false, lt, &[Rec::new(0, 0, data)]);
    file.extend_from_slice(&[
        0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]);
    file.extend_from_slice(&[0; 100]);
    let (got, _) = segs_of(file);
    assert_eq!(got.len(), 2);
    assert!(
        matches!(got[1], Err(CaptureError::TooLarge { record: 1, .. })),
        "{:?}",
        got[1]
    );
}

#[test]
fn truncated_final_record_is_an_error_after_the_good_ones() {
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    let mut legacy = pcap(
        false,
        false,
        lt,
        &[Rec::new(1, 0, data.clone()), Rec::new(2, 0, data.clone())],
    );
    legacy.truncate(legacy.len() - 5);
    let mut ng = pcapng(
        false,
        &[Iface {
            linktype: lt,
            tsresol: None,
        }],
        &[Epb::new(0, 1, data.clone()), Epb::new(0, 2, data)],
    );
    ng.truncate(ng.len() - 5);
    for file in [legacy, ng] {
        let (got, _) = segs_of(file);
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok());
        match &got[1] {
            Err(e @ CaptureError::Truncated { record: 1, offset }) => {
                assert!(*offset > 0);
                assert!(e.to_string().contains("truncated"));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn header_only_and_bad_magic() {
    let file = pcap(false, false, 1, &[]);
    assert!(ok_segs(file).is_empty());
    assert!(matches!(
        TcpSegments::from_reader(io::empty()),
        Err(CaptureError::Empty)
    ));
    assert!(matches!(
        TcpSegments::from_reader(io::Cursor::new(b"GET / HTTP/1.1".to_vec())),
        Err(CaptureError::NotACapture { .. })
    ));
    let mut short = pcap(false, false, 1, &[]);
    short.truncate(10);
    assert!(matches!(
        TcpSegments::from_reader(io::Cursor::new(short)),
        Err(CaptureError::Truncated { offset: 0, .. })
    ));
    assert!(matches!(
        open("/nonexistent/x.pcap"),
        Err(CaptureError::Open { .. })
    ));
}

#[test]
fn snaplen_truncation_marks_missing_payload() {
    let mut s = sample(A, B);
    s.payload = (0..100).collect();
    let (lt, data) = frame(Link::Ethernet, &s);
    let got = ok_segs(pcap(false, false, lt, &[Rec::cut(0, 0, data, 30)]));
    assert_eq!(got[0].payload, s.payload[..70]);
    assert_eq!(got[0].missing, 30);
}

#[test]
fn an_ip_length_beyond_what_the_capture_cut_claims_no_bytes() {
    // The record says the packet was captured whole; its IP header claims 4000 bytes more. A
    // lie (or damage), not a snap length: nothing is missing, and no hole is made.
    let mut s = sample(A, B);
    s.payload = (0..100).collect();
    let (lt, mut data) = frame(Link::Ethernet, &s);
    let ip = 14;
    let total = u16::from_be_bytes([data[ip + 2], data[ip + 3]]) + 4000;
    data[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
    let got = ok_segs(pcap(false, false, lt, &[Rec::new(0, 0, data.clone())]));
    assert_eq!(got[0].payload, s.payload);
    assert_eq!(got[0].missing, 0);
    // Cut by 30 bytes at capture: 30 missing, whatever the header claims.
    let got = ok_segs(pcap(false, false, lt, &[Rec::cut(0, 0, data, 30)]));
    assert_eq!(got[0].missing, 30);
}

#[test]
fn non_tcp_is_counted_not_an_error() {
    let s = sample(A, B);
    let mut recs = Vec::new();
    // UDP
    let mut udp = Vec::new();
    PacketBuilder_udp(&mut udp);
    recs.push(Rec::new(0, 0, udp));
    // ARP-ish EtherType
    let (_, mut eth) = frame(Link::Ethernet, &s);
    eth[12] = 0x08;
    eth[13] = 0x06;
    recs.push(Rec::new(0, 0, eth));
    // IPv4 fragment: set "more fragments"
    let (_, mut frag) = frame(Link::Ethernet, &s);
    frag[14 + 6] |= 0x20;
    recs.push(Rec::new(0, 0, frag));
    // Ethernet header cut short
    recs.push(Rec::new(0, 0, vec![1, 2, 3]));
    // and a good one
    recs.push(Rec::new(0, 0, frame(Link::Ethernet, &s).1));
    let (got, stats) = segs_of(pcap(false, false, linktype::ETHERNET, &recs));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap().record, 5);
    assert_eq!(stats.packets, 5);
    assert_eq!(stats.tcp, 1);
    assert_eq!(stats.not_tcp, 1);
    assert_eq!(stats.not_ip, 1);
    assert_eq!(stats.fragments, 1);
    assert_eq!(stats.malformed, 1);
    let (got, stats) = segs_of(pcap(false, false, 147, &[Rec::new(0, 0, vec![0; 40])]));
    assert!(got.is_empty());
    assert_eq!(stats.unsupported_link_type, 1);
}

#[allow(non_snake_case)]
fn PacketBuilder_udp(out: &mut Vec<u8>) {
    etherparse::PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(1, 2)
        .write(out, b"x")
        .unwrap();
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(it) = TcpSegments::from_reader(io::Cursor::new(bytes.clone())) {
            for _ in it {}
        }
        // Also behind valid file headers, so the block parsers see the noise.
        let mut legacy = pcap(false, false, 1, &[]);
        legacy.extend_from_slice(&bytes);
        let mut ng = pcapng(false, &[Iface { linktype: 1, tsresol: Some(0xff) }], &[]);
        ng.extend_from_slice(&bytes);
        for file in [legacy, ng] {
            if let Ok(it) = TcpSegments::from_reader(io::Cursor::new(file)) {
                for _ in it {}
            }
        }
    }

    #[test]
    fn mutated_captures_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), ng in any::<bool>(), lt in 0usize..8) {
        let links = [Link::Ethernet, Link::Vlan(3), Link::Sll, Link::Sll2, Link::NullLe, Link::Loop, Link::Raw(101), Link::Raw(229)];
        let s = if lt == 7 { sample("[::1]:1", "[::1]:2") } else { sample(A, B) };
        let (l, data) = frame(links[lt], &s);
        let mut file = if ng {
            pcapng(false, &[Iface { linktype: l, tsresol: Some(9) }], &[Epb::new(0, 1, data.clone()), Epb::new(0, 2, data)])
        } else {
            pcap(false, false, l, &[Rec::new(1, 0, data.clone()), Rec::new(2, 0, data)])
        };
        for (at, x) in flips {
            let i = at % file.len();
            file[i] ^= x;
        }
        if let Ok(it) = TcpSegments::from_reader(io::Cursor::new(file)) {
            let mut r = Reassembler::default();
            let mut out = Vec::new();
            for s in it.flatten() {
                r.push(s, &mut out);
            }
            r.finish(&mut out);
        }
    }
}

// ---------------------------------------------------------------- reassembly

fn t(ms: i64) -> Timestamp {
    Timestamp {
        secs: ms / 1000,
        nanos: (ms % 1000) as u32 * 1_000_000,
    }
}

fn syn(src: &str, dst: &str, isn: u32) -> TcpSegment {
    let mut s = seg(src, dst, isn, b"");
    s.syn = true;
    s.ack = None;
    s
}

fn synack(src: &str, dst: &str, isn: u32, ack: u32) -> TcpSegment {
    let mut s = seg(src, dst, isn, b"");
    s.syn = true;
    s.ack = Some(ack);
    s
}

fn fin(src: &str, dst: &str, seq: u32) -> TcpSegment {
    let mut s = seg(src, dst, seq, b"");
    s.fin = true;
    s
}

fn run(segs: Vec<TcpSegment>) -> Vec<StreamEvent> {
    run_with(ReassemblyConfig::default(), segs)
}

fn run_with(cfg: ReassemblyConfig, segs: Vec<TcpSegment>) -> Vec<StreamEvent> {
    let mut r = Reassembler::new(cfg);
    let mut out = Vec::new();
    for (i, mut s) in segs.into_iter().enumerate() {
        if s.time == Timestamp::default() {
            s.time = t(i as i64 + 1);
        }
        r.push(s, &mut out);
    }
    r.finish(&mut out);
    assert_eq!(r.open_connections(), 0);
    out
}

fn closes(ev: &[StreamEvent]) -> Vec<(ConnId, CloseKind)> {
    ev.iter()
        .filter_map(|e| match e {
            StreamEvent::Closed { conn, how, .. } => Some((*conn, *how)),
            _ => None,
        })
        .collect()
}

fn opens(ev: &[StreamEvent]) -> Vec<(ConnId, std::net::SocketAddr, bool)> {
    ev.iter()
        .filter_map(|e| match e {
            StreamEvent::Opened {
                conn,
                initiator,
                mid_stream,
                ..
            } => Some((*conn, *initiator, *mid_stream)),
            _ => None,
        })
        .collect()
}

fn stream(ev: &[StreamEvent], conn: u64, dir: Direction) -> (Vec<u8>, u64) {
    streams(ev).remove(&(ConnId(conn), dir)).unwrap_or_default()
}

const I: Direction = Direction::FromInitiator;
const R: Direction = Direction::FromAcceptor;

fn handshake(isn_a: u32, isn_b: u32) -> Vec<TcpSegment> {
    vec![syn(A, B, isn_a), synack(B, A, isn_b, isn_a.wrapping_add(1))]
}

#[test]
fn in_order_conversation() {
    let mut v = handshake(100, 500);
    v.push(seg(A, B, 101, b"hello "));
    v.push(seg(B, A, 501, b"hi"));
    v.push(seg(A, B, 107, b"world"));
    v.push(fin(A, B, 112));
    v.push(fin(B, A, 503));
    v.push(seg(A, B, 113, b"")); // final ACK after close: no phantom connection
    let ev = run(v);
    assert_eq!(opens(&ev), vec![(ConnId(1), addr(A), false)]);
    assert_eq!(stream(&ev, 1, I), (b"hello world".to_vec(), 0));
    assert_eq!(stream(&ev, 1, R), (b"hi".to_vec(), 0));
    assert_eq!(closes(&ev), vec![(ConnId(1), CloseKind::Fin)]);
    // Closed at the second FIN, i.e. before finish.
    assert!(matches!(ev.last(), Some(StreamEvent::Closed { time, .. }) if *time == t(7)));
    // Data time is that of the segment that completed it; offsets per direction.
    assert!(ev.contains(&StreamEvent::Data {
        conn: ConnId(1),
        dir: I,
        time: t(5),
        offset: 6,
        bytes: b"world".to_vec()
    }));
}

#[test]
fn reversed_order_is_delivered_when_the_hole_fills() {
    let mut v = handshake(1000, 1);
    let data: Vec<u8> = (0..50).collect();
    let mut chunks: Vec<TcpSegment> = data
        .chunks(10)
        .enumerate()
        .map(|(i, c)| seg(A, B, 1001 + 10 * i as u32, c))
        .collect();
    chunks.reverse();
    v.extend(chunks);
    let ev = run(v);
    assert_eq!(stream(&ev, 1, I), (data, 0));
    let datas: Vec<_> = ev
        .iter()
        .filter(|e| matches!(e, StreamEvent::Data { .. }))
        .collect();
    assert_eq!(
        datas.len(),
        1,
        "one coalesced delivery when the first chunk arrives"
    );
    assert!(matches!(datas[0], StreamEvent::Data { time, .. } if *time == t(7)));
    assert_eq!(closes(&ev), vec![(ConnId(1), CloseKind::CaptureEnd)]);
}

#[test]
fn duplicates_and_overlaps_first_seen_wins() {
    let mut v = handshake(0, 0);
    v.push(seg(A, B, 1, b"abcd"));
    v.push(seg(A, B, 1, b"abcd")); // duplicate
    v.push(seg(A, B, 9, b"ijkl")); // out of order
    v.push(seg(A, B, 11, b"KLMN")); // overlaps buffered "kl": keeps "kl", adds "mn"
    v.push(seg(A, B, 3, b"CDEFGHIJ")); // overlaps delivered "cd" and buffered "ij"
    let mut r = Reassembler::default();
    let mut out = Vec::new();
    for s in v {
        r.push(s, &mut out);
    }
    assert_eq!(r.stats().duplicates, 1);
    r.finish(&mut out);
    assert_eq!(stream(&out, 1, I), (b"abcdEFGHijklMN".to_vec(), 0));
}

#[test]
fn sequence_wrap_around() {
    let isn = u32::MAX - 5;
    let mut v = handshake(isn, 7);
    let data: Vec<u8> = (0..40).collect();
    let mut chunks: Vec<TcpSegment> = data
        .chunks(8)
        .enumerate()
        .map(|(i, c)| seg(A, B, isn.wrapping_add(1 + 8 * i as u32), c))
        .collect();
    chunks.swap(0, 3);
    v.extend(chunks);
    v.push(fin(A, B, isn.wrapping_add(41)));
    v.push(fin(B, A, 8));
    let ev = run(v);
    assert_eq!(stream(&ev, 1, I), (data, 0));
    assert_eq!(closes(&ev), vec![(ConnId(1), CloseKind::Fin)]);
}

#[test]
fn mid_stream_start_guesses_initiator_by_port() {
    // First segment seen goes from the well-known port to the ephemeral one.
    let v = vec![
        seg(B, A, 9000, b"from server"),
        seg(A, B, 7000, b"from client"),
        seg(B, A, 9011, b"!"),
    ];
    let ev = run(v);
    assert_eq!(opens(&ev), vec![(ConnId(1), addr(A), true)]);
    assert_eq!(stream(&ev, 1, I).0, b"from client");
    assert_eq!(stream(&ev, 1, R).0, b"from server!");
    // A lone ACK on an unknown tuple opens nothing.
    let ev = run(vec![seg(A, B, 5, b"")]);
    assert!(ev.is_empty());
}

#[test]
fn syn_ack_without_syn_is_not_mid_stream() {
    let v = vec![
        synack(B, A, 50, 11),
        seg(A, B, 11, b"req"),
        seg(B, A, 51, b"resp"),
    ];
    let ev = run(v);
    assert_eq!(opens(&ev), vec![(ConnId(1), addr(A), false)]);
    assert_eq!(stream(&ev, 1, I).0, b"req");
    assert_eq!(stream(&ev, 1, R).0, b"resp");
}

#[test]
fn gap_then_resync_at_capture_end() {
    let mut v = handshake(0, 0);
    v.push(seg(A, B, 1, b"aaaa"));
    v.push(seg(A, B, 9, b"cccc")); // bytes 5..9 never captured
    v.push(seg(A, B, 13, b"dd"));
    let ev = run(v);
    let gaps: Vec<_> = ev
        .iter()
        .filter(|e| matches!(e, StreamEvent::Gap { .. }))
        .cloned()
        .collect();
    assert_eq!(
        gaps,
        vec![StreamEvent::Gap {
            conn: ConnId(1),
            dir: I,
            time: t(5),
            offset: 4,
            missing: 4
        }]
    );
    assert_eq!(stream(&ev, 1, I), (b"aaaaccccdd".to_vec(), 4));
}

#[test]
fn buffer_cap_declares_gap() {
    let cfg = ReassemblyConfig {
        max_buffered_bytes: 10,
        ..Default::default()
    };
    let mut v = handshake(0, 0);
    v.push(seg(A, B, 1, b"a"));
    v.push(seg(A, B, 3, b"cccccc")); // hole at offset 1
    v.push(seg(A, B, 9, b"dddddd")); // 12 bytes buffered > 10: give up on the hole
    v.push(seg(A, B, 2, b"b")); // too late, already skipped
    v.push(seg(A, B, 15, b"e"));
    let ev = run_with(cfg, v.clone());
    assert_eq!(stream(&ev, 1, I), (b"accccccdddddde".to_vec(), 1));
    assert!(ev.contains(&StreamEvent::Gap {
        conn: ConnId(1),
        dir: I,
        time: t(5),
        offset: 1,
        missing: 1
    }));
    let cfg = ReassemblyConfig {
        max_buffered_chunks: 1,
        ..Default::default()
    };
    let ev = run_with(cfg, v);
    assert_eq!(stream(&ev, 1, I).1, 1);
}

#[test]
fn fin_one_side_other_side_continues_then_rst() {
    let mut v = handshake(0, 0);
    v.push(seg(A, B, 1, b"bye"));
    v.push(fin(A, B, 4));
    v.push(seg(B, A, 1, b"still talking"));
    v.push(seg(B, A, 30, b"after a hole"));
    let mut rst = seg(A, B, 5, b"");
    rst.rst = true;
    v.push(rst);
    v.push(seg(B, A, 14, b"late")); // after RST: swallowed, no phantom
    let ev = run(v);
    assert_eq!(stream(&ev, 1, I).0, b"bye");
    assert_eq!(
        stream(&ev, 1, R),
        (b"still talkingafter a hole".to_vec(), 16)
    );
    assert_eq!(closes(&ev), vec![(ConnId(1), CloseKind::Rst)]);
    assert_eq!(opens(&ev).len(), 1);
}

#[test]
fn port_reuse_after_close_and_on_open_tuple() {
    let mut v = handshake(10, 20);
    v.push(seg(A, B, 11, b"one"));
    v.push(fin(A, B, 14));
    v.push(fin(B, A, 21));
    v.extend(handshake(5000, 6000)); // same tuple, after FIN/FIN
    v.push(seg(A, B, 5001, b"two"));
    v.push(syn(A, B, 5000)); // retransmitted SYN: same connection
    v.push(syn(A, B, 900_000)); // new ISN on an open tuple
    v.push(seg(A, B, 900_001, b"three"));
    let ev = run(v);
    assert_eq!(
        opens(&ev).iter().map(|o| o.0).collect::<Vec<_>>(),
        vec![ConnId(1), ConnId(2), ConnId(3)]
    );
    assert_eq!(
        closes(&ev),
        vec![
            (ConnId(1), CloseKind::Fin),
            (ConnId(2), CloseKind::Reused),
            (ConnId(3), CloseKind::CaptureEnd)
        ]
    );
    assert_eq!(stream(&ev, 1, I).0, b"one");
    assert_eq!(stream(&ev, 2, I).0, b"two");
    assert_eq!(stream(&ev, 3, I).0, b"three");
}

#[test]
fn syn_seen_after_syn_ack_is_the_same_connection() {
    let v = vec![synack(B, A, 50, 11), syn(A, B, 10), seg(A, B, 11, b"x")];
    let ev = run(v);
    assert_eq!(opens(&ev).len(), 1);
    assert_eq!(stream(&ev, 1, I).0, b"x");
}

#[test]
fn truncated_payload_becomes_an_immediate_gap() {
    let mut v = handshake(0, 0);
    let mut s = seg(A, B, 1, b"abc");
    s.missing = 7;
    v.push(s);
    v.push(seg(A, B, 11, b"k"));
    let mut r = Reassembler::default();
    let mut out = Vec::new();
    for s in v {
        r.push(s, &mut out);
    }
    // Delivered without waiting for the capture end.
    assert_eq!(stream(&out, 1, I), (b"abck".to_vec(), 7));
}

#[test]
fn ignore_swallows_until_close_and_still_reports_close() {
    let mut r = Reassembler::default();
    let mut out = Vec::new();
    for s in handshake(0, 0) {
        r.push(s, &mut out);
    }
    r.push(seg(A, B, 1, b"first"), &mut out);
    r.push(seg(A, B, 20, b"buffered"), &mut out);
    let info = r.info(ConnId(1)).unwrap();
    assert_eq!(info.stream(I).delivered, 5);
    assert_eq!(info.initiator, addr(A));
    r.ignore(ConnId(1));
    assert!(r.info(ConnId(1)).unwrap().ignored);
    let before = out.len();
    r.push(seg(A, B, 6, b"more"), &mut out);
    r.push(fin(A, B, 28), &mut out);
    assert_eq!(out.len(), before);
    r.push(fin(B, A, 1), &mut out);
    assert_eq!(
        out[before..],
        [StreamEvent::Closed {
            conn: ConnId(1),
            time: Timestamp::default(),
            how: CloseKind::Fin
        }]
    );
    assert!(r.info(ConnId(1)).is_none());
}

#[test]
fn eviction_keeps_connection_count_bounded() {
    let cfg = ReassemblyConfig {
        max_connections: 2,
        ..Default::default()
    };
    let v = vec![
        seg("10.0.0.1:41001", B, 1, b"a"),
        seg("10.0.0.1:41002", B, 1, b"b"),
        seg("10.0.0.1:41001", B, 2, b"a"), // 41001 now more recent than 41002
        seg("10.0.0.1:41003", B, 1, b"c"),
    ];
    let ev = run_with(cfg, v);
    assert_eq!(closes(&ev)[0], (ConnId(2), CloseKind::Evicted));
    assert_eq!(stream(&ev, 1, I).0, b"aa");
}

proptest! {
    /// Evictions follow exact least-recently-used order, as a plain ordered list says.
    #[test]
    fn eviction_is_least_recently_used_first(
        max in 1usize..24,
        touches in proptest::collection::vec(0u16..40, 1..400),
    ) {
        let cfg = ReassemblyConfig { max_connections: max, ..Default::default() };
        let mut next_seq = [1u32; 40];
        let mut model: Vec<u16> = Vec::new();
        let mut expected = Vec::new();
        let mut v = Vec::new();
        for &p in &touches {
            let src = format!("10.0.0.1:{}", 41000 + p);
            v.push(seg(&src, B, next_seq[usize::from(p)], b"x"));
            next_seq[usize::from(p)] += 1;
            if let Some(at) = model.iter().position(|&q| q == p) {
                model.remove(at);
            } else if model.len() >= max {
                expected.push(model.remove(0));
            }
            model.push(p);
        }
        let ev = run_with(cfg, v);
        let port_of: std::collections::HashMap<ConnId, u16> = opens(&ev)
            .into_iter()
            .map(|(id, addr, _)| (id, addr.port() - 41000))
            .collect();
        let evicted: Vec<u16> = closes(&ev)
            .into_iter()
            .filter(|(_, how)| *how == CloseKind::Evicted)
            .map(|(id, _)| port_of[&id])
            .collect();
        prop_assert_eq!(evicted, expected);
    }
}

#[test]
fn events_are_in_time_order() {
    let mut v = handshake(0, 0);
    v.push(seg(A, B, 5, b"later"));
    v.push(seg(B, A, 1, b"x"));
    v.push(seg(A, B, 1, b"abcd"));
    let ev = run(v);
    let times: Vec<Timestamp> = ev
        .iter()
        .map(|e| match e {
            StreamEvent::Opened { time, .. }
            | StreamEvent::Data { time, .. }
            | StreamEvent::Gap { time, .. }
            | StreamEvent::Unacknowledged { time, .. }
            | StreamEvent::Closed { time, .. } => *time,
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

proptest! {
    /// Any permutation (with duplicates and overlapping retransmissions) of a stream's
    /// segments, after the handshake, reassembles to the original bytes when nothing is lost.
    #[test]
    fn permutations_reassemble(
        data in proptest::collection::vec(any::<u8>(), 1..3000),
        isn in any::<u32>(),
        cuts in proptest::collection::vec(1usize..400, 1..40),
        extra in proptest::collection::vec((any::<usize>(), 1usize..300), 0..10),
        order in proptest::collection::vec(any::<u64>(), 60),
        with_fin in any::<bool>(),
    ) {
        let base = isn.wrapping_add(1);
        let mut segs = Vec::new();
        let mut at = 0;
        for c in cuts.iter().cycle() {
            if at >= data.len() { break; }
            let end = (at + c).min(data.len());
            segs.push(seg(A, B, base.wrapping_add(at as u32), &data[at..end]));
            at = end;
        }
        for (start, len) in extra {
            let s = start % data.len();
            let e = (s + len).min(data.len());
            segs.push(seg(A, B, base.wrapping_add(s as u32), &data[s..e]));
        }
        if with_fin {
            segs.push(fin(A, B, base.wrapping_add(data.len() as u32)));
            segs.push(fin(B, A, 1));
        }
        // Shuffle by sorting on random keys.
        let mut keyed: Vec<_> = segs.into_iter().enumerate().map(|(i, s)| (order[i % order.len()].wrapping_mul(i as u64 + 1), s)).collect();
        keyed.sort_by_key(|(k, _)| *k);
        let mut v = vec![syn(A, B, isn), synack(B, A, 0, base)];
        v.extend(keyed.into_iter().map(|(_, s)| s));
        let ev = run(v);
        let (got, gaps) = stream(&ev, 1, I);
        prop_assert_eq!(gaps, 0);
        prop_assert_eq!(got, data);
        prop_assert_eq!(closes(&ev).len(), 1);
        if with_fin {
            prop_assert_eq!(closes(&ev)[0].1, CloseKind::Fin);
        }
    }
}

/// Election ports named by a fixture's zoo.cfg (`server.N=host:quorum:election[:role]`,
/// several addresses separated by `|`); 3888 when there is none.
fn election_ports(cfg: Option<String>) -> Vec<u16> {
    let mut ports = Vec::new();
    for line in cfg.unwrap_or_default().lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if !k.trim().starts_with("server.") {
            continue;
        }
        for a in v.split('|') {
            let rest = match a.trim().strip_prefix('[') {
                Some(r) => r.split_once("]:").map(|x| x.1),
                None => a.split_once(':').map(|x| x.1),
            };
            if let Some(p) = rest
                .and_then(|r| r.split(':').nth(1))
                .and_then(|p| p.parse().ok())
            {
                ports.push(p);
            }
        }
    }
    if ports.is_empty() {
        ports.push(3888);
    }
    ports
}

/// Real captures, when some exist (they are recorded elsewhere; the test does not need them):
/// `fixtures/*/capture.pcap`, or under `$ZKFLE_FIXTURES`.
#[test]
fn real_fixture_captures_if_present() {
    let dir = std::env::var("ZKFLE_FIXTURES")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures").to_string());
    let Ok(dirs) = std::fs::read_dir(dir) else {
        return;
    };
    for d in dirs.flatten() {
        let path = d.path().join("capture.pcap");
        if !path.exists() {
            continue;
        }
        let ports = election_ports(std::fs::read_to_string(d.path().join("zoo.cfg")).ok());
        let mut it = open(path.to_str().unwrap()).unwrap();
        let segs: Vec<_> = it.by_ref().collect::<Result<_, _>>().unwrap();
        assert!(
            segs.iter()
                .any(|s| ports.contains(&s.src.port()) || ports.contains(&s.dst.port())),
            "{path:?}: no traffic on election ports {ports:?}"
        );
        let mut r = Reassembler::default();
        let mut ev = Vec::new();
        for s in segs.iter().cloned() {
            r.push(s, &mut ev);
        }
        r.finish(&mut ev);
        let gaps: u64 = streams(&ev).values().map(|(_, g)| *g).sum();
        assert_eq!(gaps, 0, "{path:?}: loopback captures lose nothing");
        assert_eq!(opens(&ev).len(), closes(&ev).len());
        eprintln!(
            "{path:?}: {} segments, {} connections, {:?}, {:?}",
            segs.len(),
            opens(&ev).len(),
            it.stats(),
            r.stats()
        );
    }
}

/// `decode_tcp_ref` reads plain IPv4 TCP packets itself; on every packet of the fixture
/// captures, and on those packets with any header byte changed, cut short or padded, under
/// every link type the fast path takes, it must say exactly what etherparse's lax slicer says.
#[test]
fn plain_ipv4_fast_path_agrees_with_etherparse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let mut ips: Vec<Vec<u8>> = Vec::new();
    for d in std::fs::read_dir(dir).unwrap().flatten() {
        let path = d.path().join("capture.pcap");
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut reader = CaptureReader::new(file).unwrap();
        while let Some(p) = reader.next_with(|p, _| Some(p.to_packet())) {
            let p = p.unwrap();
            let ip = match p.linktype {
                linktype::ETHERNET => p.data[14..].to_vec(),
                linktype::NULL | linktype::LOOP => p.data[4..].to_vec(),
                linktype::LINUX_SLL => p.data[16..].to_vec(),
                linktype::LINUX_SLL2 => p.data[20..].to_vec(),
                _ => p.data.clone(),
            };
            ips.push(ip);
        }
    }
    assert!(ips.len() > 1000);
    let mut variants: Vec<Vec<u8>> = Vec::new();
    for ip in ips.iter().step_by(7).take(300) {
        for at in 0..ip.len().min(64) {
            for v in [0u8, 1, 5, 6, 0x20, 0x40, 0x45, 0x46, 0x50, 0x60, 0xf0, 0xff] {
                let mut m = ip.clone();
                m[at] = v;
                variants.push(m);
            }
        }
        for cut in [0, 1, 19, 20, 21, 39, 40, 41, ip.len().saturating_sub(1)] {
            variants.push(ip[..cut.min(ip.len())].to_vec());
        }
        let mut padded = ip.clone();
        padded.extend_from_slice(&[0; 6]);
        variants.push(padded);
    }
    variants.extend(ips);
    let mut fast = 0;
    for ip in &variants {
        let framed = [
            (linktype::RAW, Vec::new()),
            (linktype::IPV4, Vec::new()),
            (linktype::ETHERNET, [[0u8; 12].as_slice(), &[8, 0]].concat()),
            (
                linktype::ETHERNET,
                [[0u8; 12].as_slice(), &[0x86, 0xdd]].concat(),
            ),
            (
                linktype::LINUX_SLL,
                [[0u8; 14].as_slice(), &[8, 0]].concat(),
            ),
            (
                linktype::LINUX_SLL2,
                [[8u8, 0].as_slice(), &[0; 18]].concat(),
            ),
            (linktype::NULL, 2u32.to_le_bytes().to_vec()),
        ];
        for (linktype, head) in framed {
            let data = [head.as_slice(), ip].concat();
            let packet = PacketRef {
                record: 9,
                offset: 99,
                time: Timestamp { secs: 5, nanos: 7 },
                linktype,
                data: &data,
                orig_len: data.len() as u32,
            };
            let got = decode_tcp_ref(&packet);
            assert_eq!(got, packet::decode_tcp_lax(&packet), "{linktype} {ip:02x?}");
            fast += usize::from(got.is_ok());
        }
    }
    assert!(fast > 10_000, "{fast}");
}

/// A connection that never gets past its SYN produces no events and costs only a compact
/// entry; one that does opens with its SYN's id and time, as if opened at the SYN.
#[test]
fn syn_only_connections_are_cheap_and_open_later_as_at_their_syn() {
    let mut r = Reassembler::new(ReassemblyConfig {
        max_connections: 1000,
        ..ReassemblyConfig::default()
    });
    let mut out = Vec::new();
    let syn = |port: u16, t: i64| {
        let mut s = seg(&format!("10.0.0.1:{port}"), "10.0.0.2:3888", 100, &[]);
        s.syn = true;
        s.ack = None;
        s.time = Timestamp { secs: t, nanos: 0 };
        s
    };
    // Many scans: nothing comes out, and the table stays within its bound.
    for i in 0..5000u16 {
        r.push(syn(10_000 + i, 1), &mut out);
    }
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(r.open_connections(), 0);
    // One dial goes on: SYN-ACK, then data.
    r.push(syn(50_000, 2), &mut out);
    r.push(syn(50_000, 2), &mut out); // retransmitted SYN
    let mut synack = seg("10.0.0.2:3888", "10.0.0.1:50000", 500, &[]);
    synack.syn = true;
    synack.ack = Some(101);
    synack.time = Timestamp { secs: 3, nanos: 0 };
    r.push(synack, &mut out);
    r.push(
        seg("10.0.0.1:50000", "10.0.0.2:3888", 101, b"hello"),
        &mut out,
    );
    match &out[0] {
        StreamEvent::Opened {
            conn,
            initiator,
            time,
            mid_stream,
            ..
        } => {
            assert_eq!(*conn, ConnId(5001));
            assert_eq!(initiator.port(), 50_000);
            assert_eq!(time.secs, 2);
            assert!(!mid_stream);
        }
        other => panic!("{other:?}"),
    }
    assert!(out.iter().any(|e| matches!(
        e,
        StreamEvent::Data { offset: 0, bytes, .. } if bytes == b"hello"
    )));
    assert_eq!(r.stats().connections, 5001);
    assert!(r.stats().evicted >= 4000);
}

/// A dial refused with a reset opens at its SYN and closes at the reset, its tuple remembered
/// as closed, with nothing left open (the short way `Reassembler` takes for it).
#[test]
fn refused_dial_opens_at_its_syn_and_closes_at_the_reset() {
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let mut out = Vec::new();
    let mut syn = seg("10.0.0.1:40000", "10.0.0.2:3888", 100, &[]);
    syn.syn = true;
    syn.ack = None;
    syn.time = Timestamp { secs: 1, nanos: 5 };
    let mut rst = seg("10.0.0.2:3888", "10.0.0.1:40000", 0, &[]);
    rst.rst = true;
    rst.ack = Some(101);
    rst.time = Timestamp { secs: 2, nanos: 7 };
    r.push(syn.clone(), &mut out);
    r.push(rst.clone(), &mut out);
    assert_eq!(
        out,
        vec![
            StreamEvent::Opened {
                conn: ConnId(1),
                initiator: syn.src,
                acceptor: syn.dst,
                time: syn.time,
                mid_stream: false,
            },
            StreamEvent::Closed {
                conn: ConnId(1),
                time: rst.time,
                how: CloseKind::Rst,
            },
        ]
    );
    assert_eq!(r.open_connections(), 0);
    assert_eq!((r.stats().connections, r.stats().segments), (1, 2));
    // A late segment of the refused tuple opens nothing.
    out.clear();
    r.push(seg("10.0.0.1:40000", "10.0.0.2:3888", 101, b"x"), &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(r.stats().after_close, 1);
}

/// Everything a capture yields, errors as text, and the counters.
fn everything(mut segs: TcpSegments) -> (Vec<Result<TcpSegment, String>>, CaptureStats) {
    let mut out = Vec::new();
    while let Some(r) = segs.next_with(|s| s.to_segment()) {
        out.push(r.map_err(|e| e.to_string()));
    }
    (out, *segs.stats())
}

/// `cat a.pcap b.pcap` is not a capture: both readers stop at the second file's header, at
/// its offset, with an error that says what the file is, whatever the two files' byte order
/// and time resolution.
#[test]
fn captures_joined_end_to_end_are_named_as_such() {
    let s = sample(A, B);
    let (lt, data) = frame(Link::Ethernet, &s);
    for (be, nanos) in [(false, false), (true, false), (false, true), (true, true)] {
        let first = pcap(false, false, lt, &[Rec::new(1, 0, data.clone())]);
        let mut joined = first.clone();
        joined.extend(pcap(be, nanos, lt, &[Rec::new(2, 0, data.clone())]));
        let path = std::env::temp_dir().join(format!("zkfle-joined-{}.pcap", std::process::id()));
        std::fs::write(&path, &joined).unwrap();
        let mapped =
            everything(TcpSegments::from_file(std::fs::File::open(&path).unwrap()).unwrap());
        let _ = std::fs::remove_file(&path);
        let (stream, _) = segs_of(joined);
        let at = first.len() as u64;
        assert!(
            matches!(stream[..], [Ok(_), Err(CaptureError::Joined { offset, record: 1 })] if offset == at),
            "{stream:?}"
        );
        assert_eq!(mapped.0.len(), 2, "{:?}", mapped.0);
        let mapped_error = mapped.0[1].as_ref().unwrap_err();
        assert!(
            mapped_error.contains(&format!("a second pcap file header at byte offset {at}"))
                && mapped_error.contains("mergecap"),
            "{:?}",
            mapped.0
        );
    }
}

proptest! {
    /// A legacy pcap file read in place from a memory map gives exactly what the stream reader
    /// gives: packets, counters, and the same error (truncated, too large) at the same offset.
    #[test]
    fn mapped_file_reads_as_the_stream(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20),
        be in any::<bool>(),
        nanos in any::<bool>(),
        cut in any::<proptest::sample::Index>(),
        do_cut in any::<bool>(),
        flip in proptest::option::of((any::<proptest::sample::Index>(), any::<u8>())),
    ) {
        let recs: Vec<Rec> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let s = seg("10.0.0.1:40000", "10.0.0.2:3888", 1000 + i as u32 * 300, p);
                let (_, data) = frame(Link::Ethernet, &s);
                Rec::new(1_700_000_000 + i as u32, i as u32 * 1000, data)
            })
            .collect();
        let mut bytes = pcap(be, nanos, 1, &recs);
        if let Some((at, x)) = flip {
            // Damage anywhere past the magic (a record length, a header, the data).
            let at = 4 + at.index(bytes.len() - 4);
            bytes[at] ^= x;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let path = std::env::temp_dir().join(format!(
            "zkfle-mapped-{}-{:?}.pcap",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, &bytes).unwrap();
        let mapped = TcpSegments::from_file(std::fs::File::open(&path).unwrap());
        let stream = TcpSegments::from_reader(io::Cursor::new(bytes.clone()));
        let _ = std::fs::remove_file(&path);
        match (mapped, stream) {
            (Ok(m), Ok(s)) => prop_assert_eq!(everything(m), everything(s)),
            (Err(m), Err(s)) => prop_assert_eq!(m.to_string(), s.to_string()),
            (m, s) => prop_assert!(false, "mapped {:?} vs stream {:?}", m.is_ok(), s.is_ok()),
        }
    }
}

proptest! {
    /// The usual resolutions' shortcut agrees with the general conversion.
    #[test]
    fn timestamps_convert_as_the_general_formula_does(
        secs in any::<i64>(),
        frac in any::<u64>(),
        units in prop::sample::select(vec![1_000_000u64, 1_000_000_000]),
        small in any::<bool>(),
    ) {
        let frac = if small { frac % units } else { frac };
        let t = Timestamp::from_fraction(secs, frac, units);
        let whole = secs.saturating_add(i64::try_from(frac / units).unwrap_or(i64::MAX));
        let nanos = (u128::from(frac % units) * 1_000_000_000 / u128::from(units)) as u32;
        prop_assert_eq!(t, Timestamp { secs: whole, nanos });
    }
}

/// A closed tuple is remembered through TIME_WAIT (a late segment a minute after the close
/// opens nothing), and forgotten after twice `closed_remembered_for`: data on the tuple ten
/// minutes later is a new connection whose SYN the capture missed.
#[test]
fn a_closed_tuple_is_forgotten_after_its_window() {
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let mut out = Vec::new();
    let at = |mut s: TcpSegment, ms: i64, r: &mut Reassembler, out: &mut Vec<StreamEvent>| {
        s.time = t(ms);
        r.push(s, out);
    };
    for (i, s) in handshake(100, 500).into_iter().enumerate() {
        at(s, i as i64, &mut r, &mut out);
    }
    at(fin(A, B, 101), 10, &mut r, &mut out);
    at(fin(B, A, 501), 11, &mut r, &mut out);
    assert_eq!(r.open_connections(), 0);
    out.clear();
    at(seg(A, B, 102, b"late"), 60_000, &mut r, &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(r.stats().after_close, 1);
    at(seg(A, B, 9000, b"new"), 600_000, &mut r, &mut out);
    assert!(
        matches!(
            out.first(),
            Some(StreamEvent::Opened {
                mid_stream: true,
                ..
            })
        ),
        "{out:?}"
    );
    assert_eq!(r.stats().after_close, 1);
}

/// A segment at `ms` milliseconds, acknowledging `ack` when given.
fn seg_at(ms: i64, src: &str, dst: &str, seq: u32, payload: &[u8], ack: Option<u32>) -> TcpSegment {
    let mut s = seg(src, dst, seq, payload);
    s.time = t(ms);
    s.ack = ack;
    s
}

fn unacknowledged(ev: &[StreamEvent]) -> Vec<(Direction, Timestamp, Timestamp, bool)> {
    ev.iter()
        .filter_map(|e| match e {
            StreamEvent::Unacknowledged {
                dir,
                since,
                time,
                acked,
                ..
            } => Some((*dir, *since, *time, *acked)),
            _ => None,
        })
        .collect()
}

#[test]
fn bytes_acknowledged_late_are_reported_when_the_acknowledgement_comes() {
    let mut v = vec![
        {
            let mut s = syn(A, B, 100);
            s.time = t(1);
            s
        },
        {
            let mut s = synack(B, A, 500, 101);
            s.time = t(2);
            s
        },
    ];
    // Acknowledged at once: nothing to report.
    v.push(seg_at(10, A, B, 101, b"vote", Some(501)));
    v.push(seg_at(12, B, A, 501, b"", Some(105)));
    // Then a wait of 2.5 s, with retransmissions, before the acknowledgement.
    v.push(seg_at(1000, A, B, 105, b"again", Some(501)));
    v.push(seg_at(1400, A, B, 105, b"again", Some(501)));
    v.push(seg_at(3500, B, A, 501, b"", Some(110)));
    // A retransmission of acknowledged bytes waits for nothing.
    v.push(seg_at(3600, A, B, 105, b"again", Some(501)));
    let ev = run(v);
    assert_eq!(
        unacknowledged(&ev),
        vec![(Direction::FromInitiator, t(1000), t(3500), true)]
    );
}

#[test]
fn bytes_never_acknowledged_are_reported_at_the_end() {
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let mut out = Vec::new();
    // Joined mid-stream (no handshake): sequence numbers alone are followed.
    r.push(seg_at(1000, A, B, 7000, b"ping", Some(9000)), &mut out);
    r.push(seg_at(1001, B, A, 9000, b"", Some(7004)), &mut out);
    // B stops acknowledging; its acknowledgements that move nothing change nothing.
    r.push(seg_at(2000, A, B, 7004, b"ping", Some(9000)), &mut out);
    r.push(seg_at(2500, B, A, 9000, b"", Some(7004)), &mut out);
    r.push(seg_at(4000, A, B, 7008, b"ping", Some(9000)), &mut out);
    // Progress after a wait is reported, and the wait starts again from it.
    r.push(seg_at(4500, B, A, 9000, b"", Some(7008)), &mut out);
    r.push(seg_at(4600, A, B, 7008, b"ping", Some(9000)), &mut out);
    r.push(seg_at(9000, A, B, 7012, b"ping", Some(9000)), &mut out);
    r.finish(&mut out);
    assert_eq!(
        unacknowledged(&out),
        vec![
            (Direction::FromInitiator, t(2000), t(4500), true),
            (Direction::FromInitiator, t(4500), t(9000), false),
        ]
    );
    // Reported before the connection's close.
    assert!(matches!(out.last(), Some(StreamEvent::Closed { .. })));
}

#[test]
fn a_short_wait_is_not_reported() {
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let mut out = Vec::new();
    r.push(seg_at(1000, A, B, 7000, b"ping", Some(9000)), &mut out);
    r.push(seg_at(1900, B, A, 9000, b"", Some(7004)), &mut out);
    r.push(seg_at(2000, A, B, 7004, b"ping", Some(9000)), &mut out);
    r.finish(&mut out);
    // The capture ended 0 s after the last bytes: too soon to say.
    assert_eq!(unacknowledged(&out), vec![]);
}
