//! Re-segmenting a real capture (tiny segments, swapped neighbours, duplicates, overlapping
//! retransmissions) does not change what is decoded.

mod common;

use common::*;
use zkfle::capture::{self, TcpSegment};
use zkfle::decode::{DecodeOptions, Decoder, Record};

/// What must not change: everything but capture times.
fn essence(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let what = match &r.body {
                zkfle::decode::Body::Problem(p) => zkfle::output::problem_words(p, r.time),
                _ => hex::encode(&r.raw),
            };
            format!(
                "{:?} -> {:?} ({:?} -> {:?}) @{:?}: {what}",
                r.src, r.dst, r.from_sid, r.to_sid, r.offset
            )
        })
        .collect()
}

/// Splits every payload into pieces of 1..=7 bytes, sends some pieces twice, some as an
/// overlapping retransmission covering the next piece too, and swaps neighbouring pieces of
/// the same direction.
fn mangle(segments: &[TcpSegment]) -> Vec<TcpSegment> {
    let mut out: Vec<TcpSegment> = Vec::new();
    let mut k = 0usize;
    for s in segments {
        if s.payload.is_empty() {
            out.push(s.clone());
            continue;
        }
        let mut at = 0;
        while at < s.payload.len() {
            k += 1;
            let n = (1 + k % 7).min(s.payload.len() - at);
            let piece = |from: usize, len: usize| TcpSegment {
                seq: s.seq.wrapping_add(from as u32),
                payload: s.payload[from..from + len].to_vec(),
                syn: false,
                fin: false,
                rst: false,
                ..s.clone()
            };
            out.push(piece(at, n));
            if k.is_multiple_of(5) {
                out.push(piece(at, n));
            }
            if k.is_multiple_of(11) {
                let longer = (n + 5).min(s.payload.len() - at);
                out.push(piece(at, longer));
            }
            at += n;
        }
        if s.fin || s.rst {
            out.push(TcpSegment {
                seq: s.seq.wrapping_add(s.payload.len() as u32),
                payload: Vec::new(),
                syn: false,
                ..s.clone()
            });
        }
    }
    // Swap neighbours that are both data of the same direction.
    let mut i = 0;
    while i + 1 < out.len() {
        let (a, b) = (&out[i], &out[i + 1]);
        let data = |s: &TcpSegment| !s.payload.is_empty() && !s.syn && !s.fin && !s.rst;
        if data(a) && data(b) && a.src == b.src && a.dst == b.dst && i.is_multiple_of(3) {
            out.swap(i, i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn resegmented_captures_decode_the_same() {
    let tmp = std::env::temp_dir().join(format!("zkfle-resegment-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for dir in fixtures() {
        let original = decode_fixture(&dir);
        let segments = segments(&dir);
        let mangled = mangle(&segments);
        assert!(mangled.len() > segments.len() * 3);
        let path = tmp.join("mangled.pcap");
        write_pcap(&path, &mangled);
        let decoded: Vec<Record> = Decoder::new(
            capture::open(path.to_str().unwrap()).unwrap(),
            options(&dir),
        )
        .collect();
        let (got, want) = (essence(&decoded), essence(&original));
        if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
            panic!(
                "{}: record {i} differs after re-segmenting ({} vs {} records)\n got: {:?}\nwant: {:?}",
                dir.display(),
                got.len(),
                want.len(),
                got.get(i),
                want.get(i)
            );
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A capture that starts in the middle of the election: connections already open are joined
/// at their next frame boundary (with a warning), and everything decoded from them is what the
/// whole capture decodes for the same bytes.
#[test]
fn captures_starting_mid_stream_resynchronise() {
    let tmp = std::env::temp_dir().join(format!("zkfle-midstream-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for dir in fixtures() {
        let whole = decode_fixture(&dir);
        let segments = segments(&dir);
        let cut = segments.len() / 3;
        let start = segments[cut].time;
        let path = tmp.join("late.pcap");
        write_pcap(&path, &segments[cut..]);
        let late: Vec<Record> = Decoder::new(
            capture::open(path.to_str().unwrap()).unwrap(),
            options(&dir),
        )
        .collect();
        let key = |r: &Record| (r.src, r.dst, r.raw.clone());
        let known: std::collections::HashSet<_> = whole
            .iter()
            .filter(|r| !matches!(r.body, zkfle::decode::Body::Problem(_)))
            .map(key)
            .collect();
        let mut recovered = 0;
        for r in &late {
            match &r.body {
                zkfle::decode::Body::Problem(p) => {
                    assert_eq!(
                        p.severity(),
                        zkfle::decode::Severity::Warning,
                        "{}: {}",
                        dir.display(),
                        zkfle::output::problem_words(p, r.time)
                    )
                }
                _ => {
                    assert!(
                        known.contains(&key(r)),
                        "{}: {:?} was not in the whole capture",
                        dir.display(),
                        r.body
                    );
                    recovered += 1;
                }
            }
        }
        let expected = whole
            .iter()
            .filter(|r| r.time >= start && !matches!(r.body, zkfle::decode::Body::Problem(_)))
            .count();
        // Only a message cut by the capture's start may be lost on each joined direction.
        assert!(
            recovered * 10 >= expected * 8,
            "{}: {recovered} of {expected}",
            dir.display()
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Lent records (`next_record`) are the iterator's, in the same order, however the two calls
/// are mixed.
#[test]
fn lent_records_are_the_iterators() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/staggered5/capture.pcap"
    );
    let open = || Decoder::from_capture(capture::open(path).unwrap(), DecodeOptions::default());
    let all: Vec<Record> = open().collect();
    assert!(all.len() > 100);
    let mut d = open();
    let mut mixed = Vec::new();
    for i in 0.. {
        let r = if i % 3 == 0 {
            d.next()
        } else {
            d.next_record().cloned()
        };
        match r {
            Some(r) => mixed.push(r),
            None => break,
        }
    }
    assert_eq!(mixed, all);
    assert!(d.next_record().is_none() && d.next().is_none());
}
