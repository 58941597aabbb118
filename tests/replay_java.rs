//! `zkfle replay --target HOST:PORT` against a real Java ZooKeeper 3.8 server configured as
//! the recorded server: fixture basic3 replayed as sid 1, zkfle impersonating sids 2 and 3.
//! Takes the machine-wide loopback-ensemble lock; the server is stopped by a Drop guard.

mod common;
use common::join;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use join::{Ensemble, ROOT, ZKFLE, lock_loopback};
use serde_json::Value;

#[test]
fn basic3_replayed_into_a_java_server_as_sid_1() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "replay",
        "1:participant,2:participant:external,3:participant:external",
        &["--no-start"],
    );
    let start = Instant::now();
    let out = join::replay_basic3_into_server_1(&e, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let status = out.status;
    assert!(status.success(), "{status}: {stdout}{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["sid"], 1);
    assert_eq!(v["match"], true, "{v}");
    let pairs = |k: &str| -> Vec<(String, i64)> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["state"].as_str().unwrap().to_string(),
                    d["leader"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let expected = vec![("FOLLOWING".to_string(), 3), ("FOLLOWING".to_string(), 2)];
    assert_eq!(pairs("recorded"), expected);
    assert_eq!(pairs("replayed"), expected);
    // The Java server's own log agrees with what the probes saw.
    let logged = e.decisions(1, 0);
    assert!(logged.len() >= 2, "{logged:?}");
    assert_eq!(logged[0], (3, "FOLLOWING".to_string()));
    assert_eq!(logged[1], (2, "FOLLOWING".to_string()));
    eprintln!("replay took {:?}", start.elapsed());
    drop(e);
}

/// A live target that is not there fails the replay in seconds (exit 1, one line naming it),
/// not after the minute a target may take to enter its next election.
#[test]
fn a_dead_target_fails_in_seconds() {
    let _l = lock_loopback(); // the replay listens as sids 2 and 3 on 127.0.0.2-3:3888
    let capture = Path::new(ROOT).join("fixtures/basic3/capture.pcap");
    let start = Instant::now();
    let out = Command::new(ZKFLE)
        .args(["replay", capture.to_str().unwrap(), "--as", "1"])
        .args(["--target", "127.0.0.1:9", "--wait-target", "2"])
        .output()
        .unwrap();
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("127.0.0.1:9") && err.contains("does not answer within 2.0 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
