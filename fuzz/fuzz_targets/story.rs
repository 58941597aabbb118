#![no_main]
//! The story of an election from any sequence of notifications: the summary (text, verbose
//! text, JSON), the page, Mermaid and ShiViz views of it, and a native replay as each server.
//! A capture-level fuzzer rarely gets past the framing; here every 10 input bytes are one
//! notification between sids 1..=5 (or an unnamed end, a close, an initial message), so the
//! inputs reach the summary's and replay's rules directly. No panic, no hang.
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use zkfle::capture::{ConnId, Timestamp};
use zkfle::story::Summarizer;
use zkfle::decode::{Body, Record};
use zkfle::replay::{Recording, native};
use zkfle::wire::{InitialMessage, Notification, ProtocolVersion, ServerState};

const SIDS: i64 = 5;
const CONFIG: &str = "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant\nserver.3=127.0.0.3:2888:3888:participant\nserver.4=127.0.0.4:2888:3888:participant\nserver.5=127.0.0.5:2888:3888:observer\nversion=0";

fn addr(sid: i64) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, sid as u8)), 3888)
}

fn sid_of(b: u8) -> Option<i64> {
    // 0 is an end the capture does not name.
    let s = (b % (SIDS as u8 + 1)) as i64;
    (s > 0).then_some(s)
}

fn record(at_us: u64, from: Option<i64>, to: Option<i64>, body: Body) -> Record {
    Record {
        time: Timestamp {
            secs: 1_700_000_000 + (at_us / 1_000_000) as i64,
            nanos: (at_us % 1_000_000) as u32 * 1000,
        },
        conn: Some(ConnId(
            from.unwrap_or(0) as u64 * 8 + to.unwrap_or(0) as u64,
        )),
        src: from.map(addr),
        dst: to.map(addr),
        from_sid: from,
        to_sid: to,
        from_sid_source: None,
        to_sid_source: None,
        offset: Some(0),
        raw: Vec::new(),
        body,
    }
}

fn records(data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at_us = 0u64;
    for c in data.chunks_exact(10).take(2000) {
        // Up to ~16 s between records, mostly short gaps.
        at_us +=
            u64::from(u16::from_le_bytes([c[0], c[1]])) * if c[2] & 0x80 != 0 { 250 } else { 1 };
        let (from, to) = (sid_of(c[3]), sid_of(c[4]));
        let body = match c[2] & 0x0f {
            0 => Body::Closed {
                reset: c[5] & 1 == 1,
                quorum: false,
            },
            1 => Body::Initial(Arc::new(match from {
                Some(sid) if c[5] & 1 == 0 => InitialMessage::with_address_text(
                    ProtocolVersion::V2,
                    sid,
                    &addr(sid).to_string(),
                ),
                _ => InitialMessage::legacy(from.unwrap_or(0)),
            })),
            k => Body::Notification(Notification {
                state: match c[5] % 5 {
                    0 | 4 => ServerState::Looking,
                    1 => ServerState::Following,
                    2 => ServerState::Leading,
                    _ => ServerState::Observing,
                },
                leader: match c[6] {
                    0xff => i64::MIN,
                    l => (l % (SIDS as u8 + 2)) as i64,
                },
                zxid: i64::from(c[7] & 0x0f) << 32 | i64::from(c[8] & 0x0f),
                election_epoch: i64::from(c[9] & 0x07),
                peer_epoch: Some(i64::from(c[7] >> 4)),
                version: (k != 2).then_some(2),
                config: (k > 3).then(|| CONFIG.as_bytes().to_vec()),
                trailing: Vec::new(),
            }),
        };
        out.push(record(at_us, from, to, body));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let records = records(data);
    let mut summarizer = Summarizer::new(Default::default());
    for r in &records {
        summarizer.add(r);
    }
    let summary = summarizer.finish();
    let _ = summary.text(1_700_000_000.0, true);
    let json = summary.to_json();
    let _ = zkfle::output::mermaid::diagram(&records, &json, zkfle::output::mermaid::Choice::First);
    let _ = zkfle::output::shiviz::log(&records, &json);
    let mut page = Vec::new();
    let _ = zkfle::output::html::write_page(&mut page, "fuzz", &records, &summary);
    for sid in 1..=SIDS {
        if let Ok(rec) = Recording::from_records(&records, sid, None) {
            let _ = native::replay(&rec).to_text();
        }
    }
});
