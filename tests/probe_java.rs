//! `zkfle probe` against real Java ZooKeeper 3.8 servers (scripts/ensemble.sh), and its
//! failures (refused, silent) without Java.
//!
//! The Java tests use servers on 127.0.0.1-4 with fixed ports and take the machine-wide lock
//! that every loopback-ensemble test takes. Ensembles are stopped by a Drop guard.

mod common;
use common::join;

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

/// A server re-sends its last message to the probe's sid on every new connection: the LOOKING
/// answer to a probe made while it was alone. Right after the election the probe must still
/// report the new state (it reads past that stale frame), for every server, with `--all`
/// flagging nobody.
#[test]
fn a_probe_after_an_election_reports_the_new_state_not_the_stale_resend() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "stale",
        "1:participant,2:participant,3:participant",
        &["--no-start", "--tick", "200"],
    );
    e.start_node(1);
    let start = Instant::now();
    loop {
        let (code, rows, _) = probe(&[&addr(1)]);
        if code == 0 && rows[0]["state"] == "LOOKING" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{rows:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    e.start_node(2);
    e.wait_stable();
    let (leader, _) = e.last_decision(1).expect("server 1 decided");
    for sid in [1, 2] {
        let (code, rows, _) = probe(&[&addr(sid)]);
        assert_eq!(code, 0, "{rows:?}");
        let (_, state) = e.last_decision(sid).unwrap();
        assert_eq!(rows[0]["state"], state.as_str(), "sid {sid}: {rows:?}");
        assert_eq!(rows[0]["leader"], leader, "sid {sid}: {rows:?}");
    }
    let (_, rows, _) = probe(&[&addr(1), "--all", "--timeout", "2"]);
    for r in rows.iter().filter(|r| r["sid"] != 3) {
        assert!(r.get("disagrees").is_none(), "{rows:?}");
    }
    // --sid: a member's sid, or one below a member's, is refused before anything is sent as it.
    for sid in ["1", "3"] {
        let (code, rows, _) = probe(&[&addr(1), "--sid", sid]);
        assert_eq!(code, 2, "--sid {sid}: {rows:?}");
        assert!(rows.is_empty());
    }
    let (code, rows, _) = probe(&[&addr(1), "--sid", "1000"]);
    assert_eq!(code, 0, "{rows:?}");
}

/// A fake election port that answers each notification a connection sends, as a server
/// answers a non-voter: the i-th with `answers[i]`, the last one again after that.
fn fake_server(answers: Vec<zkfle::wire::Notification>) -> String {
    use std::io::{Read, Write};
    use zkfle::wire::{Direction, StreamDecoder, StreamItem, encode_frame};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap().to_string();
    let frames: Vec<Vec<u8>> = answers
        .iter()
        .map(|a| encode_frame(&a.encode().unwrap()).unwrap())
        .collect();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let frames = frames.clone();
            std::thread::spawn(move || {
                let mut dec = StreamDecoder::new(Direction::FromInitiator);
                let mut answered = 0;
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    let mut input = &buf[..n];
                    while let Ok(Some(item)) = dec.decode(&mut input) {
                        if let StreamItem::Frame { .. } = item {
                            let _ = s.write_all(&frames[answered.min(frames.len() - 1)]);
                            answered += 1;
                        }
                    }
                }
            });
        }
    });
    at
}

/// A server caught between setting its state and its vote answers FOLLOWING with the vote of
/// the election before; the probe reports a decision only once the next answer repeats it.
#[test]
fn a_decision_counts_once_the_next_answer_repeats_it() {
    use zkfle::wire::{Notification, ServerState};
    let answer =
        |state, leader| Notification::current(state, leader, 0, 2, 1, b"version=0".to_vec());
    let at = fake_server(vec![
        answer(ServerState::Looking, 2),
        answer(ServerState::Following, 1),
        answer(ServerState::Following, 3),
    ]);
    let (code, rows, took) = probe(&[&at, "--timeout", "5"]);
    assert_eq!(code, 0, "{rows:?}");
    assert_eq!(
        (rows[0]["state"].as_str(), rows[0]["leader"].as_i64()),
        (Some("FOLLOWING"), Some(3)),
        "{rows:?}"
    );
    assert!(took < Duration::from_secs(3), "the probe waited: {took:?}");
}

/// An answer whose config lists 11,000 members makes `--all` dial at most 256 of them, with a
/// warning; every member's address is a closed port on 127.0.2.x.
#[test]
fn probe_all_dials_a_bounded_number_of_members() {
    use zkfle::wire::{Notification, ServerState};
    let mut config = String::new();
    for sid in 1..=11_000 {
        // 127.0.2.x, ports 3001..: nothing listens there, each dial is refused at once.
        config.push_str(&format!(
            "server.{sid}=127.0.2.{}:2888:{}:participant\n",
            sid % 250 + 1,
            sid + 3000
        ));
    }
    config.push_str("version=0");
    let at = fake_server(vec![Notification::current(
        ServerState::Following,
        1,
        0,
        1,
        1,
        config.into_bytes(),
    )]);
    let out = Command::new(ZKFLE)
        .args(["probe", "--all", "--format", "json", "--timeout", "2", &at])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows = stdout.lines().count();
    assert_eq!(
        rows,
        1 + 256,
        "one row per address dialed: {}{}",
        &stdout[..stdout.len().min(2000)],
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("names 11000 other members"));
}

/// A state code that is none of the four is printed as UNKNOWN and exits 1.
#[test]
fn an_unknown_state_exits_non_zero() {
    use zkfle::wire::{Notification, ServerState};
    let at = fake_server(vec![Notification::current(
        ServerState::Unknown(7),
        1,
        0,
        1,
        1,
        b"version=0".to_vec(),
    )]);
    let (code, rows, _) = probe(&[&at, "--timeout", "2"]);
    assert_eq!(code, 1, "{rows:?}");
    assert_eq!(rows[0]["state"], "UNKNOWN", "{rows:?}");
}
