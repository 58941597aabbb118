//! `zkfle chaos`: the history checker against published histories (Porcupine's etcd logs, with
//! their verdicts) and against histories of our own, through the binary as users run it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

fn histories() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories")
}

/// Every committed Jepsen etcd log gets Porcupine's verdict: exit 0 and `valid` when it is
/// linearizable, exit 1 and `invalid` when not.
#[test]
fn published_histories_get_their_published_verdicts() {
    let dir = histories().join("jepsen-etcd");
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    let mut checked = 0;
    for line in expected.lines() {
        let (n, linearizable) = line.split_once(' ').unwrap();
        let path = dir.join(format!("etcd_{:03}.log", n.parse::<u32>().unwrap()));
        let out = zkfle(
            &["chaos", "check", path.to_str().unwrap(), "--format", "json"],
            b"",
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = linearizable == "true";
        assert_eq!(out.status.code(), Some(if want { 0 } else { 1 }), "{line}");
        assert_eq!(report["writes"]["linearizable"], want, "{line}");
        assert_eq!(report["verdict"], if want { "valid" } else { "invalid" });
        if !want {
            let v = &report["writes"]["violations"][0];
            assert!(v["longest_order"].as_u64().unwrap() < v["writes"].as_u64().unwrap());
            assert!(v["stuck"]["text"].as_str().unwrap().starts_with("line "));
        }
        checked += 1;
    }
    assert!(checked >= 10);
}

const LOST: &str = r#"{"process":0,"type":"invoke","f":"create","key":"/k0","value":"0","time":0.01}
{"process":0,"type":"ok","f":"create","key":"/k0","zxid":"0x100000002","time":0.02}
{"process":1,"type":"invoke","f":"set","key":"/k0","value":"1","version":0,"time":0.03}
{"process":1,"type":"ok","f":"set","key":"/k0","version":1,"zxid":"0x100000003","time":0.04}
{"type":"final","server":"zk1","key":"/k0","value":"1","version":1}
{"type":"final","server":"zk2","key":"/k0","value":"0","version":0}
"#;

/// A history of our own format, read from stdin and from a gzip file, with a lost write.
#[test]
fn a_lost_write_is_reported_from_stdin_and_from_a_compressed_file() {
    let out = zkfle(&["chaos", "check", "-"], LOST.as_bytes());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "zk2 holds /k0 \"0\" at version 0; version 1 was acknowledged: line 3, process 1"
        ),
        "{text}"
    );
    assert!(text.contains("replicas DISAGREE on 1 key"), "{text}");
    assert!(text.ends_with("verdict: invalid\n"), "{text}");

    let dir = std::env::temp_dir().join(format!("zkfle-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("history.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(LOST.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let out = zkfle(
        &["chaos", "check", gz.to_str().unwrap(), "--format", "json"],
        b"",
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["finals"]["lost"][0]["read"]["server"], "zk2");
    assert_eq!(report["finals"]["lost"][0]["acknowledged_version"], 1);
    let _ = std::fs::remove_dir_all(&dir);

    let fixed = LOST.replace(
        r#""server":"zk2","key":"/k0","value":"0","version":0"#,
        r#""server":"zk2","key":"/k0","value":"1","version":1"#,
    );
    let out = zkfle(&["chaos", "check", "-"], fixed.as_bytes());
    assert_eq!(out.status.code(), Some(0));
}

/// A malformed history is an error naming the file and line (exit 1, as a damaged capture).
#[test]
fn a_malformed_history_names_its_line() {
    let bad = LOST.replace(
        r#""version":0,"time":0.03"#,
        r#""version":"zero","time":0.03"#,
    );
    let out = zkfle(&["chaos", "check", "-"], bad.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim(),
        "zkfle: -: line 3: \"version\" is \"zero\", not an integer"
    );
    let out = zkfle(&["chaos", "check", "/nonexistent/history"], b"");
    assert_eq!(out.status.code(), Some(1));
    let out = zkfle(&["chaos", "check", "-"], b"\n\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("holds no operations")
    );
}

/// `chaos campaign --compose` refuses, before touching Docker, what it cannot do: a file
/// that is not there, a dry run (the voters are known only once the file runs), and the
/// options that describe an ensemble of its own.
#[test]
fn a_compose_campaign_refuses_what_it_cannot_do_before_docker() {
    let out = zkfle(
        &["chaos", "campaign", "--compose", "/nonexistent/compose.yml"],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/compose.yml: no such file"),
        "{err}"
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/docker/compose.yml");
    let file = file.to_str().unwrap();
    let out = zkfle(&["chaos", "campaign", "--compose", file, "--dry-run"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--dry-run needs the voters"), "{err}");
    let out = zkfle(
        &["chaos", "campaign", "--compose", file, "--images", "a,b,c"],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
}

/// `--images` names every voter: a count or a version beside it is refused, not ignored.
#[test]
fn images_and_a_voter_count_are_refused_together() {
    let out = zkfle(
        &[
            "chaos",
            "campaign",
            "--images",
            "a,b,c",
            "--zkfle-voters",
            "1",
            "--dry-run",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
}

/// The composed disk-loss schedule on a real Java ensemble, by hand: with server 3 down, the
/// workload's writes reach 1 and 2; then 1 and 2 are killed, 2's data directory is wiped, and
/// 2 and 3 form a quorum without the writes, to which 1, restarted, syncs. `chaos run` must
/// report the acknowledged writes lost at every server, and exit 1.
#[test]
fn a_wiped_quorum_loses_acknowledged_writes_and_chaos_run_sees_it() {
    use common::join::{Ensemble, lock_loopback};
    use std::time::Duration;
    let _l = lock_loopback();
    let e = Ensemble::start(
        "chaos-loss",
        "1:participant,2:participant,3:participant",
        &["--tick", "500"],
    );
    e.wait_stable();
    e.run(&["stop-node", "3", "--kill"]);
    let history = e.dir.join("history.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_zkfle"))
        .args([
            "chaos",
            "run",
            "--server",
            "127.0.0.1:2181,127.0.0.2:2181,127.0.0.3:2181",
            "--duration",
            "14",
            "--seed",
            "46",
            "--timeout",
            "2",
            "--final-timeout",
            "60",
            "--format",
            "json",
            "--history",
            history.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(5));
    e.run(&["stop-node", "1", "--kill"]);
    e.run(&["stop-node", "2", "--kill"]);
    std::fs::remove_dir_all(e.dir.join("2/data/version-2")).unwrap();
    e.run(&["start-node", "2"]);
    e.run(&["start-node", "3"]);
    e.wait_stable_within(60);
    e.run(&["start-node", "1"]);
    e.wait_stable_within(60);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(report["verdict"], "invalid", "{report}");
    assert_eq!(
        report["finals"]["servers"].as_array().unwrap().len(),
        3,
        "{stderr}"
    );
    let lost = report["finals"]["lost"].as_array().unwrap();
    let servers: std::collections::BTreeSet<&str> = lost
        .iter()
        .map(|l| l["read"]["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers.len(), 3, "{report}");
    // Every lost write was acknowledged before the wipe: at most 5 s into the run.
    for l in lost {
        assert_eq!(l["acknowledged"]["outcome"], "ok");
    }
}
