//! `zkfle probe` against real Java ZooKeeper 3.8 servers (scripts/ensemble.sh), and its
//! failures (refused, silent) without Java.
//!
//! The Java tests use servers on 127.0.0.1-4 with fixed ports and take the machine-wide lock
//! that every loopback-ensemble test takes. Ensembles are stopped by a Drop guard.

#[path = "common/join.rs"]
mod join;

use std::process::Command;
use std::time::{Duration, Instant};

use join::{Ensemble, ZKFLE, lock_loopback};
use serde_json::Value;

/// Runs `zkfle probe ARGS --format json`: (exit code, one object per line).
fn probe(args: &[&str]) -> (i32, Vec<Value>, Duration) {
    let start = Instant::now();
    let out = Command::new(ZKFLE)
        .arg("probe")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let took = start.elapsed();
    let rows = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    (out.status.code().unwrap_or(-1), rows, took)
}

fn addr(sid: i64) -> String {
    format!("127.0.0.{sid}:3888")
}

/// Followers, the leader and an observer report their states and the leader, 30 probes later
/// no server has gone LOOKING again, and `--all` finds every member from one answer.
#[test]
fn probes_report_states_and_do_not_disturb_a_running_ensemble() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "stable",
        "1:participant,2:participant,3:participant,4:observer",
        &[],
    );
    e.wait_stable();
    let sids = [1i64, 2, 3, 4];
    let before: Vec<usize> = sids.iter().map(|&s| e.lookings(s)).collect();
    let (leader, _) = e.last_decision(1).expect("server 1 decided");
    let targets: Vec<String> = sids.iter().map(|&s| addr(s)).collect();
    let t: Vec<&str> = targets.iter().map(String::as_str).collect();
    let (code, rows, _) = probe(&t);
    assert_eq!(code, 0, "{rows:?}");
    assert_eq!(rows.len(), 4);
    for (sid, row) in sids.iter().zip(&rows) {
        let (logged_leader, logged_state) = e.last_decision(*sid).unwrap();
        assert_eq!(row["state"], logged_state.as_str(), "sid {sid}: {row}");
        assert_eq!(row["leader"], logged_leader, "sid {sid}: {row}");
        assert_eq!(row["leader"], leader);
        for key in ["zxid", "election_epoch", "peer_epoch", "config_version"] {
            assert!(row[key].is_i64() || row[key].is_u64(), "{key} in {row}");
        }
    }
    assert_eq!(
        rows.iter().filter(|r| r["state"] == "LEADING").count(),
        1,
        "{rows:?}"
    );
    assert_eq!(rows[3]["state"], "OBSERVING");
    // 30 probes in all (one more above, 25 single ones and one --all of four).
    for i in 0..25 {
        let (code, rows, _) = probe(&[&addr(sids[i % 4])]);
        assert_eq!(code, 0, "{rows:?}");
    }
    let (code, rows, _) = probe(&[&addr(2), "--all"]);
    assert_eq!(code, 0, "{rows:?}");
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (sid, row) in sids.iter().zip(&rows) {
        assert_eq!(row["sid"], *sid);
        assert!(row.get("disagrees").is_none(), "{row}");
    }
    std::thread::sleep(Duration::from_secs(2));
    let after: Vec<usize> = sids.iter().map(|&s| e.lookings(s)).collect();
    assert_eq!(before, after, "a server went LOOKING again");
    for s in sids {
        assert_eq!(e.last_decision(s).unwrap().0, leader);
    }
}

/// A server alone in a three-member ensemble keeps LOOKING and says so; with `--all`, its
/// silent peers are reported per server as refusals, with a non-zero exit.
#[test]
fn a_looking_server_and_absent_peers() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "looking",
        "1:participant,2:participant:external,3:participant:external",
        &[],
    );
    let row = {
        let start = Instant::now();
        loop {
            let (code, rows, _) = probe(&[&addr(1)]);
            if code == 0 {
                break rows[0].clone();
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "server 1 never answered"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert_eq!(row["state"], "LOOKING", "{row}");
    // Never decided: the current vote is its own initial one.
    assert_eq!(row["leader"], 1, "{row}");
    assert!(row["election_epoch"].as_i64().unwrap() >= 1, "{row}");
    let (code, rows, took) = probe(&[&addr(1), "--all", "--timeout", "2"]);
    assert_ne!(code, 0);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0]["state"], "LOOKING");
    for r in &rows[1..] {
        assert_eq!(r["error"], "connection refused", "{r}");
        assert_eq!(r["disagrees"], true);
    }
    assert_eq!(e.lookings(1), 1);
}

/// A refused connection and a server that accepts but never answers: each reported on its
/// own line, a non-zero exit, no hang.
#[test]
fn refusals_and_time_outs_are_reported_per_server() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let (code, rows, took) = probe(&[&silent_addr, &refused, "--timeout", "1"]);
    assert_eq!(code, 1);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["server"], silent_addr.as_str());
    assert!(
        rows[0]["error"].as_str().unwrap().starts_with("timed out"),
        "{rows:?}"
    );
    assert_eq!(rows[1]["error"], "connection refused");
    drop(silent);
}
