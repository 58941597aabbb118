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
            assert_ne!(p.severity, Severity::Error, "-s {snaplen}: {}", p.message);
            let ProblemKind::Cut {
                partial: Some(part),
                ..
            } = &p.kind
            else {
                continue;
            };
            assert!(p.message.contains("tcpdump -s 0"), "{}", p.message);
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
