//! Captures cut by a small snap length (`tcpdump -s 96`, `-s 128`): every cut message is
//! reported as cut (a warning naming `-s 0`), not as damage, and the fields a cut notification
//! still holds are the ones the whole capture decodes.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::*;
use zkfle::decode::{Body, Decoder, ProblemKind, Severity};

/// The fixture's capture with every packet cut to `snaplen` bytes.
fn cut(bytes: &[u8], snaplen: usize) -> Vec<u8> {
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "tcpdump's LE pcap");
    let mut out = bytes[..24].to_vec();
    out[16..20].copy_from_slice(&(snaplen as u32).to_le_bytes());
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let keep = incl.min(snaplen);
        out.extend_from_slice(&bytes[at..at + 8]);
        out.extend_from_slice(&(keep as u32).to_le_bytes());
        out.extend_from_slice(&bytes[at + 12..at + 16]);
        out.extend_from_slice(&bytes[at + 16..at + 16 + keep]);
        at += 16 + incl;
    }
    out
}

#[test]
fn cut_captures_say_so_and_keep_the_fields_present() {
    let dir = fixtures()
        .into_iter()
        .find(|d| d.ends_with("basic3"))
        .unwrap();
    let whole = decode_fixture(&dir);
    let by_place: HashMap<_, _> = whole
        .iter()
        .filter_map(|r| match &r.body {
            Body::Notification(n) => Some(((r.src, r.dst, r.offset), n)),
            _ => None,
        })
        .collect();
    let bytes = std::fs::read(capture_file(&dir).unwrap()).unwrap();
    for snaplen in [96, 128] {
        let path = std::env::temp_dir().join(format!(
            "zkfle-snaplen-{snaplen}-{}.pcap",
            std::process::id()
        ));
        std::fs::write(&path, cut(&bytes, snaplen)).unwrap();
        let segments = zkfle::capture::open(path.to_str().unwrap()).unwrap();
        let records: Vec<_> = Decoder::new(segments, options(&dir)).collect();
        let mut partial = 0;
        for r in &records {
            let Body::Problem(p) = &r.body else { continue };
            let words = zkfle::output::problem_words(p, r.time);
            assert_ne!(p.severity(), Severity::Error, "-s {snaplen}: {words}");
            let ProblemKind::Cut {
                partial: Some(part),
                ..
            } = &p.kind
            else {
                continue;
            };
            assert!(words.contains("tcpdump -s 0"), "{words}");
            // The frame's payload starts 4 bytes after the problem's offset.
            let n = by_place[&(r.src, r.dst, r.offset)];
            assert_eq!(part.state, Some(n.state));
            assert_eq!(part.leader, Some(n.leader));
            assert_eq!(part.zxid, Some(n.zxid));
            if part.captured >= 28 {
                assert_eq!(part.election_epoch, Some(n.election_epoch));
            }
            partial += 1;
        }
        assert!(
            partial > 10,
            "-s {snaplen}: only {partial} partial notifications"
        );

        // The command line says it once more at the end, and exits 0.
        let out = Command::new(env!("CARGO_BIN_EXE_zkfle"))
            .args(["decode", "--config"])
            .arg(dir.join("zoo.cfg"))
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!("cut at {snaplen} bytes")) && err.contains("-s 0"),
            "{err}"
        );
        let _ = std::fs::remove_file(&path);
    }
}

/// `zkfle decode --summary --format jsonl` of a capture file.
fn summary_json(capture: &std::path::Path, zoo_cfg: &std::path::Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_zkfle"))
        .args(["decode", "--summary", "--format", "jsonl", "--config"])
        .arg(zoo_cfg)
        .arg(capture)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A decision as the summary gives it: the round's kind, sid, state, leader, round, time
/// (µs) and its sync's UPTODATE time (µs).
type Told = (String, i64, String, i64, i64, i64, Option<i64>);

/// Each round's decisions, in order.
fn story(summary: &serde_json::Value) -> Vec<Told> {
    let us = |v: &serde_json::Value| v.as_f64().map(|t| (t * 1e6).round() as i64);
    summary["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r["decisions"].as_array().unwrap().iter().map(move |d| {
                (
                    r["kind"].as_str().unwrap().to_string(),
                    d["sid"].as_i64().unwrap(),
                    d["state"].as_str().unwrap().to_string(),
                    d["leader"].as_i64().unwrap(),
                    d["election_epoch"].as_i64().unwrap(),
                    us(&d["time"]).unwrap(),
                    us(&d["sync"]["uptodate"]),
                )
            })
        })
        .collect()
}

/// `-s 128` keeps a notification's whole vote (its config is cut, so the sids of the servers
/// that accepted connections come from `--config`, as for ZooKeeper 3.4): the summary tells the same
/// elections as the whole capture, at the same times, and dates the quorum packets found
/// again after each cut by when they came (not by the later packet that confirmed them).
/// `-s 96` cuts the round: the summary says the elections cannot be told, and does not claim
/// that the servers shut down while they were still voting.
#[test]
fn a_capture_cut_at_128_bytes_tells_the_same_elections() {
    for name in ["late3", "v3.9.5-late3"] {
        let dir = fixtures().into_iter().find(|d| d.ends_with(name)).unwrap();
        let file = capture_file(&dir).unwrap();
        let whole = summary_json(&file, &dir.join("zoo.cfg"));
        let bytes = std::fs::read(&file).unwrap();
        let path = std::env::temp_dir().join(format!(
            "zkfle-snaplen-story-{name}-{}.pcap",
            std::process::id()
        ));
        std::fs::write(&path, cut(&bytes, 128)).unwrap();
        let cut128 = summary_json(&path, &dir.join("zoo.cfg"));
        let expected = story(&whole);
        assert!(expected.len() >= 4, "{name}: {expected:?}");
        assert!(expected.iter().any(|d| d.6.is_some()), "{name}: no sync");
        assert_eq!(story(&cut128), expected, "{name}");
        assert!(cut128["cut_votes"].as_u64().unwrap() > 10, "{name}");
        assert_eq!(cut128["cut_votes_lost"], 0, "{name}");
        assert_eq!(whole["cut_votes"], 0, "{name}");

        std::fs::write(&path, cut(&bytes, 96)).unwrap();
        let cut96 = summary_json(&path, &dir.join("zoo.cfg"));
        assert!(cut96["cut_votes_lost"].as_u64().unwrap() > 10, "{name}");
        let last_vote = expected.iter().map(|d| d.5).max().unwrap();
        if let Some(t) = cut96["shutdown"].as_f64() {
            assert!((t * 1e6) as i64 > last_vote, "{name}: shutdown at {t}");
        }
        let _ = std::fs::remove_file(&path);
    }
}
