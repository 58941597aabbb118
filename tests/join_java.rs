//! `zkfle join` against real Java ZooKeeper 3.8 servers (scripts/ensemble.sh).
//!
//! Every test uses servers on 127.0.0.1-3 with the fixed ports, so the tests are serialized
//! with a file lock (also against other test binaries on this machine using the same lock).
//! Each ensemble and each zkfle process is stopped by a Drop guard, even on panic.

mod common;
use common::join;

use std::process::Command;
use std::time::Duration;

use join::{Ensemble, Native, ZKFLE, decided, lock_loopback, wait_for};
use serde_json::Value;

/// (a) Java 2 and 3 have elected 3; native 1 joins late and learns the leader from replies.
#[test]
fn native_joins_late_and_follows_the_java_leader() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "late",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200"],
    );
    e.wait_stable();
    let out = Command::new("timeout")
        .args([
            "20",
            ZKFLE,
            "join",
            "--config",
            e.zoo_cfg().to_str().unwrap(),
        ])
        .args(["--myid", "1", "--once", "--data-dir"])
        .arg(e.dir.join("native1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one JSON object: {stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["leader"], 3);
    assert_eq!(v["state"], "FOLLOWING");
    for key in ["election_epoch", "zxid", "peer_epoch", "took_ms"] {
        assert!(v[key].is_i64() || v[key].is_u64(), "{key} in {v}");
    }
}

/// (b) Sid 3 is never started: Java 2 reaches a quorum only with native 1's vote.
#[test]
fn java_needs_the_native_vote_to_lead() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "quorum",
        "1:participant:external,2:participant,3:participant:external",
        &["--tick", "200"],
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(e.decisions(2, 0).is_empty(), "Java 2 cannot decide alone");
    let n = Native::start(&e, 1, &[]);
    wait_for("Java 2 LEADING", Duration::from_secs(20), || {
        e.decisions(2, 0)
            .iter()
            .any(|(l, s)| *l == 2 && s == "LEADING")
            .then_some(())
    });
    wait_for("native FOLLOWING 2", Duration::from_secs(10), || {
        n.events()
            .iter()
            .any(|v| decided(v, "FOLLOWING", 2))
            .then_some(())
    });
}

/// (c) Native 3 (the highest sid) and Java 1, 2 start together: the Java servers follow 3;
/// election-only (`--zxid 0 --peer-epoch 0`), the native leader steps down after
/// initLimit*tickTime since nobody syncs. (With its data directory it would sync them and
/// hand over at once, before Java 2 is up: tests/lead_java.rs.)
#[test]
fn java_follows_the_native_leader() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "lead",
        "1:participant,2:participant,3:participant:external",
        &["--tick", "100", "--init-limit", "10", "--no-start"],
    );
    let n = Native::start(&e, 3, &["--zxid", "0", "--peer-epoch", "0"]);
    for sid in [1, 2] {
        e.start_node(sid);
    }
    for sid in [1, 2] {
        wait_for(
            &format!("Java {sid} FOLLOWING 3"),
            Duration::from_secs(20),
            || {
                e.decisions(sid, 0)
                    .iter()
                    .any(|(l, s)| *l == 3 && s == "FOLLOWING")
                    .then_some(())
            },
        );
    }
    let lead_at = wait_for("native LEADING", Duration::from_secs(5), || {
        n.events().iter().position(|v| decided(v, "LEADING", 3))
    });
    // initLimit*tickTime = 1 s: then the native leader looks again.
    wait_for("native steps down", Duration::from_secs(10), || {
        n.events()[lead_at + 1..]
            .iter()
            .any(|v| v["state"] == "LOOKING")
            .then_some(())
    });
}

/// (d) The Java leader (3) is killed: native 1 takes part in the re-election with Java 2 and
/// both agree on 2.
#[test]
fn native_takes_part_in_reelection_after_leader_dies() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "reelect",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200"],
    );
    e.wait_stable();
    let n = Native::start(&e, 1, &[]);
    wait_for("native FOLLOWING 3", Duration::from_secs(10), || {
        n.events()
            .iter()
            .any(|v| decided(v, "FOLLOWING", 3))
            .then_some(())
    });
    let before = n.events().len();
    let log_at = e.log(2).len();
    let out = e.cmd(&["stop-node", "3", "--kill"]);
    assert!(out.status.success());
    wait_for("native FOLLOWING 2", Duration::from_secs(20), || {
        n.events()[before..]
            .iter()
            .any(|v| decided(v, "FOLLOWING", 2))
            .then_some(())
    });
    wait_for("Java 2 LEADING", Duration::from_secs(20), || {
        e.decisions(2, log_at)
            .iter()
            .any(|(l, s)| *l == 2 && s == "LEADING")
            .then_some(())
    });
    // Every decision after the kill, on both sides, names 2.
    assert!(e.decisions(2, log_at).iter().all(|(l, _)| *l == 2));
    assert!(
        n.events()[before..]
            .iter()
            .filter(|v| v["state"] != "LOOKING")
            .all(|v| v["leader"] == 2)
    );
}
