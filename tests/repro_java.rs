//! `zkfle repro` against real Java ZooKeeper servers of every release line the project runs
//! (3.4.14, 3.6.3, 3.8.0, 3.9.5): each repro's verdict must be the one in the repro matrix
//! (`src/repro/matrix.rs`, docs/repro.md), and the servers' own logs must show what the
//! verdict says. Two ensembles per version: in the first, the non-destructive repros and
//! ZOOKEEPER-3769 run against server 1, port-out-of-range against server 2,
//! bad-config-server-id against server 3, so that no destructive repro meets a server an
//! earlier one broke; the second is for the repros in which zkfle is a member
//! ([`member_repros`]).
//!
//! Each test prints `VERDICT <name> <verdict>` lines, which scripts/matrix.sh collects into the
//! repro table. These tests are named `v3_*` and run from scripts/matrix.sh, like
//! tests/versions.rs.

// The Java ensemble helpers (tests/common/join.rs) through the Zab helpers, whose tiny
// client makes the writes ZOOKEEPER-4685 needs.
mod common;
use common::zab;

use std::process::Command;

use common::join::{cached_jars, jars_args};
use serde_json::Value;
use zab::{Ensemble, ZKFLE, lock_loopback, wait_for};
use zkfle::repro::matrix::{MATRIX, VERSIONS};

/// (repro, target sid, extra arguments).
const PLAN: &[(&str, i64, &[&str])] = &[
    ("ZOOKEEPER-2164", 1, &[]),
    ("ZOOKEEPER-4787", 1, &[]),
    // 3.4 reads notifications only from voters: zkfle stands in for member 3.
    ("ZOOKEEPER-3769", 1, &["--destructive", "--peer-sid", "3"]),
    ("port-out-of-range", 2, &["--destructive"]),
    ("bad-config-server-id", 3, &["--destructive"]),
];

/// Runs `zkfle repro NAME --target 127.0.0.SID:3888 --format json`: (exit code, the object).
fn repro(name: &str, sid: i64, extra: &[&str]) -> (i32, Value) {
    let out = Command::new(ZKFLE)
        .args(["repro", name, "--format", "json", "--timeout", "1.5"])
        .args(["--target", &format!("127.0.0.{sid}:3888")])
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{name}: not one JSON object ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn logs(e: &Ensemble, sid: i64) -> String {
    // The JVM's stdout has what the logger did not catch (a thread's uncaught exception).
    let stdout = std::fs::read_to_string(e.dir.join(format!("{sid}/stdout.log")));
    e.log(sid) + &stdout.unwrap_or_default()
}

fn repros(version: &str) {
    let Some(jars) = cached_jars(version) else {
        return;
    };
    let column = VERSIONS.iter().position(|v| *v == version).unwrap();
    let _l = lock_loopback();
    let mut extra = vec!["--tick".to_string(), "200".to_string()];
    extra.extend(jars_args(&jars, 3));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let e = Ensemble::start(
        &format!("repro-{version}"),
        "1:participant,2:participant,3:participant",
        &extra,
    );
    e.wait_stable();
    let mut failures = Vec::new();
    for (name, sid, args) in PLAN {
        let (code, v) = repro(name, *sid, args);
        let verdict = v["verdict"].as_str().unwrap_or("?").to_string();
        println!("VERDICT {name} {verdict}");
        println!("{v}");
        assert_eq!(v["name"], *name, "{v}");
        assert_eq!(v["target"], format!("127.0.0.{sid}:3888"), "{v}");
        let evidence = v["evidence"].as_array().expect("evidence is a list");
        assert!(evidence.len() >= 2, "{v}");
        assert!(evidence.iter().all(Value::is_string), "{v}");
        let wire = if version.starts_with("3.4.") {
            "3.4"
        } else {
            "3.5+"
        };
        assert_eq!(v["server_version"], wire, "{v}");
        assert_eq!(
            code,
            i32::from(verdict != "not_vulnerable"),
            "exit status: {v}"
        );
        let want = MATRIX
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, row)| row[column].name())
            .unwrap();
        if verdict != want {
            failures.push(format!("{name}: {verdict}, the matrix says {want}"));
        }
    }
    // The servers' own words for what the verdicts say.
    let log = |sid| logs(&e, sid);
    let vulnerable = |name: &str| {
        MATRIX.iter().find(|(n, _)| *n == name).unwrap().1[column]
            == zkfle::repro::Verdict::Vulnerable
    };
    if vulnerable("port-out-of-range") {
        assert!(log(2).contains("port out of range:70000"), "server 2's log");
    }
    if vulnerable("bad-config-server-id") {
        assert!(
            log(3).contains("NumberFormatException: For input string: \"x\""),
            "server 3's log"
        );
    }
    if vulnerable("ZOOKEEPER-3769") {
        assert!(
            log(1).contains("Exception in thread \"WorkerReceiver"),
            "server 1's log"
        );
    } else {
        // Caught and logged, the thread lives on.
        assert!(
            log(1).contains("BufferUnderflowException"),
            "server 1's log"
        );
    }
    assert!(failures.is_empty(), "ZooKeeper {version}: {failures:?}");
    drop(e);
    member_repros(version, &jars, column);
}

/// The verdict the matrix has for `name` on `column`.
fn expected(name: &str, column: usize) -> &'static str {
    MATRIX
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{name} in the matrix"))
        .1[column]
        .name()
}

/// Waits until server 2 answers probes LOOKING.
fn wait_looking() {
    wait_for(
        "server 2 LOOKING",
        std::time::Duration::from_secs(30),
        || {
            let out = Command::new(ZKFLE)
                .args(["probe", "--format", "json", "127.0.0.2:3888"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains("\"LOOKING\"")
                .then_some(())
        },
    );
}

/// Runs a member repro against server 2 as `peer`: its verdict.
fn member_repro(name: &str, peer: &str, cfg: &str, label: &str) -> String {
    let args = ["--destructive", "--peer-sid", peer, "--config", cfg];
    let (_, v) = repro(name, 2, &args);
    let verdict = v["verdict"].as_str().unwrap_or("?").to_string();
    println!("VERDICT {label} {verdict}");
    println!("{v}");
    verdict
}

/// The repros in which zkfle is a member, in one ensemble whose member 1 is listed but never
/// started: servers 2 and 3 commit some writes, server 3 stops, and server 2, LOOKING with
/// those writes in its committed log, needs member 1's vote.
/// - ZOOKEEPER-4685: zkfle (member 1) votes it into LEADING, follows it claiming the epoch's
///   first zxid, and ACKs the DIFF's first PROPOSAL before NEWLEADER.
/// - ZOOKEEPER-3109: zkfle (member 1, below server 2: server 2 dials it back) votes it into
///   LEADING and goes LOOKING again. With the default config every version waits initLimit x
///   tickTime (here 10 x 500 ms). Then again as member 3 after server 2 restarted with
///   `leader.maxTimeToWaitForEpoch=0` in zoo.cfg (the system property
///   `zookeeper.leader.maxTimeToWaitForEpoch`): 3.6+ quit at once.
/// - ZOOKEEPER-2201: server 3 starts again, servers 2 and 3 elect a leader; zkfle (member 1)
///   follows it, stops reading, and writes 16 MiB through server 2's client port.
fn member_repros(version: &str, jars: &str, column: usize) {
    let mut extra = vec!["--tick".to_string(), "500".to_string()];
    extra.extend(jars_args(jars, 3));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let e = Ensemble::start(
        &format!("repro-member-{version}"),
        "1:participant:external,2:participant,3:participant",
        &extra,
    );
    e.wait_stable();
    zab::write_all(
        2,
        &zab::paths("zkfle-4685-", 5),
        std::time::Duration::from_secs(30),
    );
    e.run(&["stop-node", "3"]);
    // Server 2 notices it lost its quorum (syncLimit x tickTime), then LOOKs.
    wait_looking();
    let cfg = e.zoo_cfg();
    let cfg = cfg.to_str().unwrap();
    let since = |mark: usize| e.log(2)[mark..].to_string();

    let mark = e.log(2).len();
    let verdict = member_repro("ZOOKEEPER-4685", "1", cfg, "ZOOKEEPER-4685");
    assert_eq!(verdict, expected("ZOOKEEPER-4685", column), "{version}");
    if verdict == "vulnerable" {
        let log = since(mark);
        assert!(log.contains("is from a different epoch"), "server 2's log");
        // 3.4: "Not sufficient followers synced, only synced with sids"; 3.6+: "Waiting for a
        // quorum of followers, only synced with sids".
        assert!(log.contains("only synced with sids"), "server 2's log");
    }

    wait_looking();
    let mark = e.log(2).len();
    let verdict = member_repro("ZOOKEEPER-3109", "1", cfg, "ZOOKEEPER-3109");
    assert_eq!(verdict, expected("ZOOKEEPER-3109", column), "{version}");
    if verdict == "vulnerable" {
        assert!(
            since(mark).contains("Timeout while waiting for epoch from quorum"),
            "server 2's log"
        );
    }

    e.run(&["stop-node", "2"]);
    e.append_config("leader.maxTimeToWaitForEpoch=0");
    e.start_node(2);
    wait_looking();
    let mark = e.log(2).len();
    let verdict = member_repro(
        "ZOOKEEPER-3109",
        "3",
        cfg,
        "ZOOKEEPER-3109(maxTimeToWaitForEpoch=0)",
    );
    if version.starts_with("3.4.") {
        assert_eq!(verdict, "vulnerable", "{version}");
    } else {
        assert_eq!(verdict, "not_vulnerable", "{version}");
        assert!(
            since(mark).contains("Quit leading due to voter changed mind"),
            "server 2's log"
        );
    }

    // ZOOKEEPER-2201: servers 2 and 3 elect a leader again; zkfle follows it as member 1,
    // stops reading, and writes 16 MiB through server 2's client port.
    let section = std::time::Instant::now();
    e.start_node(3);
    wait_for(
        "servers 2 and 3 with a leader",
        std::time::Duration::from_secs(30),
        || {
            let out = Command::new(ZKFLE)
                .args(["probe", "--format", "json", "127.0.0.2:3888"])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            (text.contains("\"LEADING\"") || text.contains("\"FOLLOWING\"")).then_some(())
        },
    );
    let marks: Vec<usize> = [2, 3].iter().map(|&s| e.log(s).len()).collect();
    let args = [
        "--destructive",
        "--peer-sid",
        "1",
        "--config",
        cfg,
        "--client",
        "127.0.0.2:2181",
    ];
    let (code, v) = repro("ZOOKEEPER-2201", 2, &args);
    let verdict = v["verdict"].as_str().unwrap_or("?").to_string();
    println!("VERDICT ZOOKEEPER-2201 {verdict}");
    println!("{v}");
    assert_eq!(code, i32::from(verdict != "not_vulnerable"), "{v}");
    assert_eq!(
        verdict,
        expected("ZOOKEEPER-2201", column),
        "{version}: {v}"
    );
    // The leader's own words for dropping the stalled follower.
    let leader_log: String = [2, 3]
        .iter()
        .zip(&marks)
        .map(|(&s, &m)| e.log(s)[m..].to_string())
        .collect();
    for line in leader_log.lines().filter(|l| {
        l.contains("WARN")
            || l.contains("ERROR")
            || l.contains("sid: 1")
            || l.contains("Exception:")
    }) {
        println!("LOG {line}");
    }
    println!(
        "ZOOKEEPER-2201 took {:.1} s with server 3's restart",
        section.elapsed().as_secs_f64()
    );
    if verdict == "not_vulnerable" {
        // The leader's LearnerHandler gives up on zkfle's socket (a read time-out after
        // syncLimit x tickTime) and says goodbye: every version logs it.
        assert!(leader_log.contains("GOODBYE"), "the leader's log");
        assert!(
            v["evidence"].to_string().contains("closed the connection")
                || v["evidence"].to_string().contains("reset the connection"),
            "{v}"
        );
    }
}

/// `--list` names every repro of the matrix and says which are destructive; a destructive
/// repro without `--destructive` is refused (exit 2) before anything is sent.
#[test]
fn list_and_the_destructive_guard() {
    let out = Command::new(ZKFLE)
        .args(["repro", "--list", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (name, _) in MATRIX {
        let r = listed.iter().find(|r| r["name"] == *name).expect(name);
        assert_eq!(r["destructive"], r["breaks"].is_string(), "{r}");
    }
    // Nothing listens on 127.0.0.1:9 here; the guard answers before any connection.
    let out = Command::new(ZKFLE)
        .args(["repro", "port-out-of-range", "--target", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--destructive"));
    let out = Command::new(ZKFLE)
        .args(["repro", "ZOOKEEPER-0", "--target", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

macro_rules! version_tests {
    ($m:ident, $v:expr) => {
        mod $m {
            #[test]
            fn repros() {
                super::repros($v);
            }
        }
    };
}

version_tests!(v3_4_14, "3.4.14");
version_tests!(v3_6_3, "3.6.3");
version_tests!(v3_8_0, "3.8.0");
version_tests!(v3_9_5, "3.9.5");
