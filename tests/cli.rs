//! The `zkfle` binary as users run it: exit codes, one-line errors, and round trips through
//! the JSON contract.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;
use zkfle::decode::Body;

/// `zkfle ARGS` with its three streams piped.
fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zkfle"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkfle runs")
}

fn zkfle(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = spawn(args);
    // Written beside the reading: `wire encode` answers as it reads, and with both pipes full
    // neither side would move.
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
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
        // Election messages only: warnings (type "error"), closed connections and quorum
        // packets are not election messages.
        let messages: Vec<&str> = std::str::from_utf8(&decoded.stdout)
            .unwrap()
            .lines()
            .filter(|l| {
                l.starts_with(r#"{"type":"initial""#) || l.starts_with(r#"{"type":"notification""#)
            })
            .collect();
        let encoded = zkfle(&["wire", "encode"], messages.join("\n").as_bytes());
        assert!(encoded.status.success(), "{}", text(&encoded.stderr));
        let want: Vec<String> = decode_fixture(&dir)
            .iter()
            .filter(|r| matches!(r.body, Body::Initial(_) | Body::Notification(_)))
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
                _ => continue,
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
        (
            &["wireshark-dissector", "--election-port", "0"],
            "",
            "port 0 is no port",
        ),
        (
            &[
                "wireshark-dissector",
                "--election-port",
                "3888",
                "--quorum-port",
                "3888",
            ],
            "",
            "port 3888 is given as both",
        ),
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

/// `wire encode` prints each object's hex as soon as the object has come, before stdin ends
/// (a live `decode -i` piped into it), and refuses an object it would have to buffer without
/// end.
#[test]
fn wire_encode_streams_and_bounds_an_object() {
    use std::io::{BufRead, BufReader};
    let mut child = spawn(&["wire", "encode"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let vote = r#"{"type":"notification","state":"LOOKING","leader":1,"zxid":0,"election_epoch":1,"peer_epoch":0,"version":2,"config":"server.1=127.0.0.1:2888:3888:participant\nversion=0"}"#;
    for _ in 0..2 {
        writeln!(stdin, "{vote}").unwrap();
        stdin.flush().unwrap();
        // Read with stdin still open: a line comes only if it was printed as it came.
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("00000000"), "{line}");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());

    let mut big = vec![b'['; 1];
    big.resize(17 << 20, b' ');
    // zkfle stops reading at the bound; `zkfle` lets the rest go untaken.
    let out = zkfle(&["wire", "encode"], &big);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("more than 16 MiB of input without a whole JSON object"),
        "{err}"
    );
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

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// `--summary --format jsonl` on a capture with the quorum port: each election names its cause,
/// its serving time and each follower's sync, as the README's contract says.
#[test]
fn summary_json_carries_sync_serving_and_cause() {
    let cap = fixture("late3").join("capture.pcap");
    let out = zkfle(
        &[
            "decode",
            "--summary",
            "--format",
            "jsonl",
            cap.to_str().unwrap(),
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "summary");
    assert_eq!(v["quorum_port"], true);
    let rounds = v["rounds"].as_array().unwrap();
    let elections: Vec<_> = rounds.iter().filter(|r| r["kind"] == "election").collect();
    let rejoins: Vec<_> = rounds.iter().filter(|r| r["kind"] == "rejoin").collect();
    assert_eq!(elections.len(), 2, "{v:#}");
    assert_eq!(rejoins.len(), 2, "late server 3, restarted server 2: {v:#}");
    assert_eq!(elections[0]["cause"], "servers_started");
    assert_eq!(elections[1]["cause"], "leader_lost");
    for e in &elections {
        let serving = e["serving"].as_f64().unwrap();
        let lost = e["leader_lost"]
            .as_f64()
            .unwrap_or(e["started"].as_f64().unwrap());
        if e["cause"] == "leader_lost" {
            assert!((e["unavailable"].as_f64().unwrap() - (serving - lost)).abs() < 1e-9);
        }
        let follower = e["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["state"] == "FOLLOWING")
            .unwrap();
        let sync = &follower["sync"];
        assert_eq!(sync["mode"], "DIFF", "{v:#}");
        assert!(sync["newleader"].as_f64().unwrap() <= sync["uptodate"].as_f64().unwrap());
        assert!(follower["took"].as_f64().unwrap() > 0.0);
    }
    let modes: Vec<&str> = rejoins
        .iter()
        .map(|r| r["decisions"][0]["sync"]["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["SNAP", "DIFF"]);
    // Times run forward.
    let starts: Vec<f64> = rounds
        .iter()
        .map(|r| r["started"].as_f64().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]));
}

/// The text is for operators: one header per election with its cause and times, decisions and
/// syncs in time order; `--verbose` adds the vote changes; a capture of the election port
/// alone says that the sync is not in it.
#[test]
fn summary_text_for_operators() {
    let cap = fixture("late3").join("capture.pcap");
    let out = zkfle(&["decode", "--summary", cap.to_str().unwrap()], b"");
    let s = text(&out.stdout);
    assert!(s.contains("election 2 at +"), "{s}");
    assert!(s.contains("the leader's connections closed at +"), "{s}");
    assert!(s.contains("syncs with 2 by SNAP"), "{s}");
    assert!(s.contains("rejoin at +"), "{s}");
    assert!(!s.contains("votes leader"), "{s}");
    let verbose = zkfle(
        &["decode", "--summary", "--verbose", cap.to_str().unwrap()],
        b"",
    );
    assert!(text(&verbose.stdout).contains("votes leader"));
    let cap = fixture("basic3").join("capture.pcap");
    let out = zkfle(&["decode", "--summary", cap.to_str().unwrap()], b"");
    let s = text(&out.stdout);
    assert!(
        s.starts_with("the quorum port (2888) is not in this capture"),
        "{s}"
    );
    assert!(!s.contains("never reached a quorum"), "{s}");

    // `--time absolute` writes the summary's times as the timeline and the logs do: the
    // election's start at sid 2's first dial (its initial message to 3), the leader's decision
    // at the time of the timeline's record that shows it, to the µs.
    let out = zkfle(
        &[
            "decode",
            "--summary",
            "--time",
            "absolute",
            cap.to_str().unwrap(),
        ],
        b"",
    );
    let s = text(&out.stdout);
    assert!(
        s.contains("election 1 at 2026-11-29 17:29:56,195207, round 0x1"),
        "{s}"
    );
    assert!(
        s.contains("  2026-11-29 17:29:56,436163  sid 3 LEADING (leader 3)"),
        "{s}"
    );
    assert!(s.ends_with("(times in UTC)\n"), "{s}");
    assert!(!s.contains(" +0."), "{s}");
}

/// A 3.4 capture without --config says at the top that the sids are unknown and names no
/// winner.
#[test]
fn legacy_capture_without_config_names_no_winner() {
    let dir = fixture("v3.4.14-basic3");
    let cap = dir.join("capture.pcap");
    let out = zkfle(&["decode", "--summary", cap.to_str().unwrap()], b"");
    let s = text(&out.stdout);
    assert!(s.starts_with("sids unknown"), "{s}");
    assert!(!s.contains("winner sid"), "{s}");
    let cfg = dir.join("zoo.cfg");
    let args = [
        "decode",
        "--summary",
        "--config",
        cfg.to_str().unwrap(),
        cap.to_str().unwrap(),
    ];
    let s = text(&zkfle(&args, b"").stdout);
    assert!(s.contains("winner sid"), "{s}");
}

/// Nothing to decode: said on stderr. An unsupported link type: an error naming it.
#[test]
fn captures_without_election_traffic_say_so() {
    let tmp = std::env::temp_dir().join(format!("zkfle-cli-none-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // Decoding `file` fails on its data (exit 1), saying `expected`.
    let fails_saying = |file: &std::path::Path, expected: &str| {
        let out = zkfle(&["decode", file.to_str().unwrap()], b"");
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains(expected),
            "{}",
            text(&out.stderr)
        );
    };
    let web = tmp.join("web.pcap");
    let s = zkfle::capture::TcpSegment {
        time: zkfle::capture::Timestamp {
            secs: 1_000_000,
            nanos: 0,
        },
        src: "10.0.0.1:40000".parse().unwrap(),
        dst: "10.0.0.2:80".parse().unwrap(),
        seq: 1,
        ack: Some(1),
        syn: false,
        fin: false,
        rst: false,
        payload: b"GET / HTTP/1.0\r\n\r\n".to_vec(),
        missing: 0,
        record: 0,
    };
    write_pcap(&web, std::slice::from_ref(&s));
    fails_saying(&web, "no election traffic found");

    // Traffic on the election port that never decodes is not "no election traffic": the
    // message says what went wrong with it.
    let noise = tmp.join("noise.pcap");
    let s = zkfle::capture::TcpSegment {
        dst: "10.0.0.2:3888".parse().unwrap(),
        payload: vec![0xab; 600],
        ..s
    };
    write_pcap(&noise, &[s]);
    fails_saying(
        &noise,
        "no election message could be decoded; first problem: connection 10.0.0.1:40000 -> 10.0.0.2:3888 started before the capture",
    );

    // A pcap of 802.11 radiotap frames (link type 127).
    let radio = tmp.join("radiotap.pcap");
    std::fs::write(&radio, one_packet_pcap(127, &[0u8; 8])).unwrap();
    fails_saying(&radio, "unsupported link type 127 (IEEE802_11_RADIOTAP)");

    // Packets to the election port whose TCP header cannot be read (data offset 4): the
    // capture has traffic, damaged, and says so rather than only that none was found.
    let mut packet = vec![
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    packet.extend_from_slice(&[0x9c, 0x40, 0x0f, 0x30, 0, 0, 0, 1, 0, 0, 0, 0, 0x40, 0x02]);
    packet.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    let damaged = tmp.join("damaged.pcap");
    std::fs::write(&damaged, one_packet_pcap(101, &packet)).unwrap();
    fails_saying(
        &damaged,
        "1 packet(s) with IP or TCP headers that could not be read (damaged, or not what their link type says); skipped",
    );
    std::fs::remove_dir_all(&tmp).ok();
}

/// A little-endian pcap (version 2.4, snap length 65535) of link type `linktype` holding
/// `packet` as its one record, written by hand: for link types and headers zkfle's own
/// writer does not make.
fn one_packet_pcap(linktype: u32, packet: &[u8]) -> Vec<u8> {
    let len = packet.len() as u32;
    let mut pcap = Vec::new();
    for v in [
        0xa1b2c3d4u32,
        0x0004_0002,
        0,
        0,
        65535,
        linktype,
        1_000_000,
        0,
        len,
        len,
    ] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    pcap.extend_from_slice(packet);
    pcap
}

/// A capture that ends in the middle of a message reports the unfinished message.
#[test]
fn unfinished_frames_at_the_end_are_reported() {
    let tmp = std::env::temp_dir().join(format!("zkfle-cli-cut-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut segs = segments(&fixture("basic3"));
    let last = segs.iter().rposition(|s| s.payload.len() > 8).unwrap();
    segs.truncate(last + 1);
    let half = segs[last].payload.len() / 2;
    segs[last].payload.truncate(half);
    let cut = tmp.join("cut.pcap");
    write_pcap(&cut, &segs);
    let out = zkfle(&["decode", "--format", "jsonl", cut.to_str().unwrap()], b"");
    let s = text(&out.stdout);
    assert!(s.contains(r#""kind":"unfinished""#), "{s}");
    assert!(
        s.contains("the capture ended in the middle of a message"),
        "{s}"
    );
    std::fs::remove_dir_all(&tmp).ok();
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

/// A 3.4 capture names no election addresses, so without the ensemble's zoo.cfg no
/// notification is known to be the replayed server's: replay says so and what to pass,
/// rather than that the server sent nothing.
#[test]
fn replay_of_a_capture_without_addresses_asks_for_the_config() {
    let capture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/v3.4.14-basic3/capture.pcap"
    );
    let out = zkfle(&["replay", "--as", "1", capture], b"");
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("no notification in the capture is known to be sid 1's")
            && err.contains("pass --config zoo.cfg"),
        "{err}"
    );
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/v3.4.14-basic3/zoo.cfg"
    );
    let out = zkfle(&["replay", "--as", "1", "--config", config, capture], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A --config that names no servers (a standalone server's zoo.cfg, or the wrong file) is a
/// usage error naming the file, for decode and replay alike, not a silent empty ensemble.
#[test]
fn a_config_without_servers_is_refused() {
    let tmp = std::env::temp_dir().join(format!("zkfle-cli-noservers-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let cfg = tmp.join("zoo.cfg");
    std::fs::write(
        &cfg,
        "tickTime=2000\ndataDir=/var/lib/zookeeper\nclientPort=2181\n",
    )
    .unwrap();
    let capture = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/basic3/capture.pcap");
    for args in [
        vec!["decode", "--config", cfg.to_str().unwrap(), capture],
        vec![
            "replay",
            "--as",
            "1",
            "--config",
            cfg.to_str().unwrap(),
            capture,
        ],
    ] {
        let out = zkfle(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("names no servers (no server.N= lines"),
            "{err}"
        );
        assert!(err.contains(cfg.to_str().unwrap()), "{err}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn text_times_are_the_captures_own_microseconds() {
    // A float of seconds since the epoch holds no exact microseconds: truncating one printed
    // about half of all times a microsecond early. The JSON's time is written from the
    // capture's own microseconds, so each text line's fraction must be its record's.
    for name in ["basic3", "staggered5", "v3.9.5-basic3", "pcapng"] {
        let capture = std::fs::read_dir(fixture(name))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
            .unwrap();
        let capture = capture.to_str().unwrap();
        let timeline = text(&zkfle(&["decode", capture], b"").stdout);
        let jsonl = text(&zkfle(&["decode", "--format", "jsonl", "--closes", capture], b"").stdout);
        let text_fractions: Vec<&str> = timeline.lines().map(|l| &l[20..26]).collect();
        let json_fractions: Vec<String> = jsonl
            .lines()
            .map(|l| {
                let time = l.split("\"time\":").nth(1).unwrap();
                let time = &time[..time.find(',').unwrap()];
                let fraction = time.split_once('.').map_or("", |(_, f)| f);
                format!("{fraction:0<6}")
            })
            .collect();
        assert_eq!(text_fractions, json_fractions, "{name}");
    }
}

/// A malformed `HOST:PORT` is a wrong argument (exit 2, saying what is wrong), not a server
/// that failed to answer (exit 1), in every command that takes one.
#[test]
fn malformed_addresses_are_wrong_arguments() {
    for (args, needle) in [
        (&["probe", "127.0.0.1"][..], "has no port"),
        (&["probe", "127.0.0.1:99999"], "is not a port"),
        (&["probe", "127.0.0.1:0"], "is not a port"),
        (&["probe", "::1:3888"], "in brackets"),
        (&["doctor", "127.0.0.1"], "has no port"),
        (
            &["repro", "ZOOKEEPER-2164", "--target", "localhost:3888x"],
            "is not a port",
        ),
    ] {
        let out = zkfle(args, b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A config that puts sids at addresses the servers themselves announce for others (a wrong
/// `myid`, a stale zoo.cfg): each address the wire contradicts is reported once, in the JSON
/// lines and among the summary's anomalies, naming both sids and who said which, and no
/// fixture's own config makes one.
#[test]
fn address_conflicts_are_reported_not_guessed() {
    let dir = fixture("basic3");
    let cap = capture_file(&dir).unwrap();
    let cap = cap.to_str().unwrap();
    let own = dir.join("zoo.cfg");
    let decoded = zkfle(
        &[
            "decode",
            "--format",
            "jsonl",
            "--config",
            own.to_str().unwrap(),
            cap,
        ],
        b"",
    );
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    assert!(!text(&decoded.stdout).contains("address_conflict"));

    let tmp = std::env::temp_dir().join(format!("zkfle-cli-conflict-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let swapped = tmp.join("zoo.cfg");
    std::fs::write(
        &swapped,
        "server.1=127.0.0.1:2888:3888:participant\n\
         server.2=127.0.0.3:2888:3888:participant\n\
         server.3=127.0.0.2:2888:3888:participant\n",
    )
    .unwrap();
    let swapped = swapped.to_str().unwrap();
    let decoded = zkfle(
        &["decode", "--format", "jsonl", "--config", swapped, cap],
        b"",
    );
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    let conflicts: Vec<serde_json::Value> = text(&decoded.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "address_conflict")
        .collect();
    let mut seen: Vec<(String, i64, String, i64, String)> = conflicts
        .iter()
        .map(|v| {
            assert_eq!(v["severity"], "warning");
            (
                v["address"].as_str().unwrap().to_string(),
                v["was_sid"].as_i64().unwrap(),
                v["was_source"].as_str().unwrap().to_string(),
                v["sid"].as_i64().unwrap(),
                v["source"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (
                "127.0.0.2:3888".into(),
                3,
                "config".into(),
                2,
                "initial".into()
            ),
            (
                "127.0.0.3:3888".into(),
                2,
                "config".into(),
                3,
                "initial".into()
            ),
        ]
    );
    let summary = zkfle(&["decode", "--summary", "--config", swapped, cap], b"");
    let out = text(&summary.stdout);
    assert!(
        out.contains(
            "election address 127.0.0.2:3888 is sid 3 by --config and sid 2 by an initial message; sid 2 is used from here on"
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
