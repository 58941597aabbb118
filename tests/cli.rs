//! The `zkfle` binary as users run it: exit codes, one-line errors, and round trips through
//! the JSON contract.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;
use zkfle::decode::Body;

fn zkfle(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkfle"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkfle runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `zkfle decode --format jsonl | zkfle wire encode` gives back every message's exact bytes,
/// for every fixture.
#[test]
fn decode_then_encode_gives_back_every_message() {
    for dir in fixtures() {
        let cap = capture_file(&dir).unwrap();
        let mut args = vec!["decode", "--format", "jsonl"];
        let ports: Vec<String> = election_ports(&dir).iter().map(u16::to_string).collect();
        for p in &ports {
            args.extend(["--port", p]);
        }
        args.push(cap.to_str().unwrap());
        let decoded = zkfle(&args, b"");
        assert!(decoded.status.success(), "{}", text(&decoded.stderr));
        // Warnings (type "error", severity "warning") are not messages.
        let messages: Vec<&str> = std::str::from_utf8(&decoded.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.contains(r#""type":"error""#))
            .collect();
        let encoded = zkfle(&["wire", "encode"], messages.join("\n").as_bytes());
        assert!(encoded.status.success(), "{}", text(&encoded.stderr));
        let want: Vec<String> = decode_fixture(&dir)
            .iter()
            .filter(|r| !matches!(r.body, Body::Problem(_)))
            .map(|r| hex::encode(&r.raw))
            .collect();
        let got: Vec<String> = text(&encoded.stdout).lines().map(str::to_string).collect();
        assert_eq!(got, want, "{}", dir.display());
    }
}

/// `zkfle wire decode HEX | zkfle wire encode` is the identity on real messages.
#[test]
fn wire_decode_encode_round_trip() {
    for dir in fixtures() {
        for r in decode_fixture(&dir).iter().take(12) {
            let kind = match r.body {
                Body::Initial(_) => "initial",
                Body::Notification(_) => "notification",
                Body::Problem(_) => continue,
            };
            let h = hex::encode(&r.raw);
            let json = zkfle(&["wire", "decode", "--kind", kind, &h], b"");
            assert!(json.status.success(), "{}", text(&json.stderr));
            let back = zkfle(&["wire", "encode"], &json.stdout);
            assert_eq!(text(&back.stdout).trim(), h);
        }
    }
}

#[test]
fn bad_input_exits_2_with_one_line_naming_field_and_offset() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["wire", "decode", "abc"], "", "odd number of digits"),
        (
            &["wire", "decode", "zz"],
            "",
            "invalid character 'z' at digit 0",
        ),
        (
            &["wire", "decode", "0000"],
            "",
            "state at byte 0: truncated",
        ),
        (
            &[
                "wire",
                "decode",
                "00000000000000000000000100000000000000000000000000000001ffff",
            ],
            "",
            "peer epoch at byte 28",
        ),
        (
            &[
                "wire",
                "decode",
                "--kind",
                "initial",
                "ffffffffffff00000000000000000001000000000000",
            ],
            "",
            "address length at byte 16: 0 is outside 1..=2048",
        ),
        (
            &["wire", "decode", "--kind", "initial", "ffffffffffff0006"],
            "",
            "protocol version at byte 0",
        ),
        (&["wire", "encode"], "{", "stdin line 1"),
        (
            &["wire", "encode"],
            r#"{"type":"notification","state":"LOOKING"}"#,
            "field `leader`: missing",
        ),
        (&["wire", "encode"], "", "no JSON object"),
    ];
    for (args, stdin, want) in cases {
        let out = zkfle(args, stdin.as_bytes());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("zkfle: ") && err.contains(want),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn bad_capture_files_are_reported_with_offsets() {
    let tmp = std::env::temp_dir().join(format!("zkfle-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let real = std::fs::read(capture_file(&fixtures()[0]).unwrap()).unwrap();

    let not_a_capture = tmp.join("garbage.pcap");
    std::fs::write(&not_a_capture, b"this is not a capture at all").unwrap();
    let out = zkfle(&["decode", not_a_capture.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not a pcap or pcapng capture"),
        "{}",
        text(&out.stderr)
    );

    // Cut in the middle of a record: everything before it decodes, then the error, exit 1.
    let truncated = tmp.join("truncated.pcap");
    std::fs::write(&truncated, &real[..real.len() * 2 / 3]).unwrap();
    let out = zkfle(
        &["decode", "--format", "jsonl", truncated.to_str().unwrap()],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .lines()
            .filter(|l| l.contains(r#""type":"notification""#))
            .count()
            > 5
    );
    let last = stdout.lines().last().unwrap();
    assert!(
        last.contains(r#""kind":"capture""#) && last.contains("truncated"),
        "{last}"
    );
    assert!(
        text(&out.stderr).contains("byte offset"),
        "{}",
        text(&out.stderr)
    );

    // Garbage inside a valid capture: reported as errors, no panic, exit 1. (Java writes a
    // frame's length and its payload separately, so the 4-byte segments are length prefixes;
    // all-0xee payloads alone would still be notifications, of an unknown state.)
    let mut segments = segments(&fixtures()[0]);
    for s in segments
        .iter_mut()
        .filter(|s| !s.payload.is_empty())
        .step_by(3)
    {
        s.payload.fill(0xee);
    }
    let garbled = tmp.join("garbled.pcap");
    write_pcap(&garbled, &segments);
    let out = zkfle(
        &["decode", "--format", "jsonl", garbled.to_str().unwrap()],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(r#""type":"error""#));
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// The exit-status rule (README): a capture that is missing, empty or garbage is a failed
/// operation (1) for every command that reads one; a wrong argument is 2.
#[test]
fn unreadable_captures_exit_1_everywhere() {
    let tmp = std::env::temp_dir().join(format!("zkfle-cli-exit-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let empty = tmp.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let garbage = tmp.join("garbage.pcap");
    std::fs::write(&garbage, b"GARBAGE GARBAGE GARBAGE GARBAGE").unwrap();
    let missing = tmp.join("missing.pcap");
    for file in [&empty, &garbage, &missing] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["decode", f],
            vec!["decode", "--summary", f],
            vec!["replay", f, "--as", "1"],
        ] {
            let out = zkfle(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.starts_with("zkfle: ") && err.contains(f),
                "{args:?}: {err}"
            );
        }
    }
    // A wrong argument stays 2.
    let real = capture_file(&fixtures()[0]).unwrap();
    let out = zkfle(&["replay", real.to_str().unwrap(), "--as", "99"], b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&tmp).unwrap();
}
