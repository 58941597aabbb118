//! `zkfle join` against real Java ZooKeeper servers of every release line (3.4.14, 3.6.3,
//! 3.8.0, 3.9.5), and mixed-version ensembles as in a rolling upgrade. `scripts/matrix.sh` runs
//! these one by one and prints the version x capability table.
//!
//! The jars come from `scripts/zk-fetch.sh` (3.8.0: Debian's package). These tests never
//! download: `scripts/test.sh` fetches first. A version that is not cached is skipped, and
//! says so on stdout (`SKIPPED: ...`) and stderr, never silently.
//!
//! Every test uses servers on 127.0.0.1-3 with the fixed ports, so the tests are serialized
//! with the machine-wide file lock `$TMPDIR/zkfle-loopback-ensemble.lock`.

mod common;
use common::join;

use std::process::Command;
use std::time::Duration;

use join::{Ensemble, Native, ZKFLE, cached_jars, decided, lock_loopback, wait_for};
use serde_json::Value;

/// The jars of every version, or prints the skip and returns None.
fn need(versions: &[&str]) -> Option<Vec<String>> {
    versions.iter().map(|v| cached_jars(v)).collect()
}

/// `zkfle join` in election-only mode (a claimed vote, no Zab follow): these tests are about
/// the election port, and every version's leader is not a Zab peer zkfle can follow.
fn start_native(e: &Ensemble, myid: i64, extra: &[&str]) -> Native {
    let mut args = vec!["--zxid", "0", "--peer-epoch", "0"];
    args.extend_from_slice(extra);
    Native::start_in(&e.dir, &e.zoo_cfg(), myid, &args)
}

/// Every `Notification:` receipt line server `sid` logged about a message from `from`,
/// as (message format version, leader). Both wordings (3.4 and 3.5+).
fn notifications_from(e: &Ensemble, sid: i64, from: i64) -> Vec<(i64, i64)> {
    e.log(sid)
        .lines()
        .filter(|l| l.contains("] - Notification: "))
        .filter_map(|l| {
            if l.ends_with("(my state)") {
                let f = |name: &str| -> Option<String> {
                    let end = l.find(&format!(" ({name})"))?;
                    let start = l[..end].rfind([' ', ','])? + 1;
                    Some(l[start..end].to_string())
                };
                (f("n.sid")?.parse::<i64>().ok()? == from).then_some(())?;
                Some((
                    i64::from_str_radix(&f("message format version")?, 16).ok()?,
                    f("n.leader")?.parse().ok()?,
                ))
            } else {
                let f = |key: &str| -> Option<String> {
                    let at = l.find(key)? + key.len();
                    let r = &l[at..];
                    Some(r[..r.find(',').unwrap_or(r.len())].trim().to_string())
                };
                (f("n.sid:")?.parse::<i64>().ok()? == from).then_some(())?;
                Some((
                    i64::from_str_radix(f("message format version:")?.trim_start_matches("0x"), 16)
                        .ok()?,
                    f("n.leader:")?.parse().ok()?,
                ))
            }
        })
        .collect()
}

/// The leader `ensemble.sh status` names.
fn status_leader(e: &Ensemble) -> Option<i64> {
    let out = e.cmd(&["status"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("LEADING"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

fn is_34(version: &str) -> bool {
    version.starts_with("3.4.")
}

/// Java 2 and 3 of `version` elect a leader; native 1 joins late (`--once`, `--wire auto`) and
/// follows it, learning the leader from their FOLLOWING/LEADING replies.
fn join_late(version: &str) {
    let Some(j) = need(&[version]) else { return };
    let _l = lock_loopback();
    let jars = vec![j[0].clone(), j[0].clone(), j[0].clone()];
    let e = Ensemble::start_with_jars(
        &format!("late-{version}"),
        "1:participant:external,2:participant,3:participant",
        &jars,
        &["--tick", "200"],
    );
    e.wait_stable_within(45);
    let leader = status_leader(&e).expect("a Java leader");
    let n = start_native(&e, 1, &[]);
    wait_for(
        &format!("native FOLLOWING {leader}"),
        Duration::from_secs(20),
        || {
            n.events()
                .iter()
                .any(|v| decided(v, "FOLLOWING", leader))
                .then_some(())
        },
    );
    // The native vote reached the Java servers and was read: they logged it.
    wait_for(
        "Java logs the native notification",
        Duration::from_secs(10),
        || {
            (!notifications_from(&e, 2, 1).is_empty() || !notifications_from(&e, 3, 1).is_empty())
                .then_some(())
        },
    );
    if is_34(version) {
        assert!(
            n.log().contains("speaking 3.4 to it"),
            "auto did not switch to the 3.4 form:\n{}",
            n.log()
        );
    }
}

/// Native 3 (highest sid) starts first, Java 1 and 2 of `version` after it: both follow the
/// native node, so they read its initial message and notifications (with `wire`) and keep its
/// connections. Returns the format versions Java 1 logged for native 3's notifications.
fn native_leads_from_start(version: &str, wire: &str) -> Option<Vec<i64>> {
    let j = need(&[version])?;
    let _l = lock_loopback();
    let jars = vec![j[0].clone(), j[0].clone()];
    let e = Ensemble::start_with_jars(
        &format!("start-{version}-{wire}"),
        "1:participant,2:participant,3:participant:external",
        &jars,
        &["--tick", "100", "--init-limit", "20", "--no-start"],
    );
    let n = start_native(&e, 3, &["--wire", wire]);
    for sid in [1, 2] {
        e.start_node(sid);
    }
    for sid in [1, 2] {
        wait_for(
            &format!("Java {sid} ({version}) FOLLOWING native 3"),
            // A JVM's start on a machine busy with other ensembles can take most of 20 s.
            Duration::from_secs(60),
            || {
                e.decisions(sid, 0)
                    .iter()
                    .any(|(l, s)| *l == 3 && s == "FOLLOWING")
                    .then_some(())
            },
        );
    }
    wait_for("native LEADING", Duration::from_secs(5), || {
        n.events()
            .iter()
            .any(|v| decided(v, "LEADING", 3))
            .then_some(())
    });
    Some(
        notifications_from(&e, 1, 3)
            .into_iter()
            .map(|(v, _)| v)
            .collect(),
    )
}

fn join_from_start(version: &str) {
    let Some(versions) = native_leads_from_start(version, "auto") else {
        return;
    };
    assert!(!versions.is_empty(), "Java 1 logged no notification from 3");
    if is_34(version) {
        // 3.4 logs the version field it read. auto speaks the 3.4 form (version 1) to a peer
        // once it has heard that peer's legacy form; in a fast election the native leader's
        // only notifications can go out before that (3.4.14 reads the current form too, see
        // accepts_current_form), so both are fine here. join_late checks the switch itself.
        assert!(versions.iter().all(|v| *v == 1 || *v == 2), "{versions:?}");
    }
}

/// What 3.4.14 accepts from newer peers: with `--wire current`, native 3 sends the V1 initial
/// message and 44+N-byte version-2 notifications; 3.4.14 skips the V1 header (3.4.6+), reads
/// the first 40 bytes and the version field, ignores the config, and follows.
fn accepts_current_form(version: &str) {
    let Some(versions) = native_leads_from_start(version, "current") else {
        return;
    };
    assert!(versions.iter().all(|v| *v == 2), "{versions:?}");
}

/// `--wire legacy` everywhere: the 3.4 form (sid-only initial message, 40 bytes) is read by
/// every version (3.5+ log 40-byte messages as format version 0: they do not read the field).
fn accepts_legacy_form(version: &str) {
    let Some(versions) = native_leads_from_start(version, "legacy") else {
        return;
    };
    let expect = if is_34(version) { 1 } else { 0 };
    assert!(versions.iter().all(|v| *v == expect), "{versions:?}");
}

/// A rolling-upgrade ensemble: Java `old` as sid 2, Java `new` as sid 3, native as sid 1
/// started just before them. Once the Java servers are stable (the follower synced with the
/// leader: broadcast phase, or `srvr` serving for 3.4), every member's last decision names the
/// same leader, and each Java server read the other's notifications and the native ones.
/// (Native first: 3.6.3 logs a notification it reads only while it is LOOKING itself, from
/// `lookForLeader`, where 3.9.5 logs in its receiver whatever its state, so a native member
/// that came after the Java pair had decided, as one on a busy machine did, left nothing in
/// 3.6.3's log to check.)
fn mixed(old: &str, new: &str) {
    let Some(j) = need(&[old, new]) else { return };
    let _l = lock_loopback();
    let jars = vec![j[0].clone(), j[0].clone(), j[1].clone()];
    let e = Ensemble::start_with_jars(
        &format!("mixed-{old}-{new}"),
        "1:participant:external,2:participant,3:participant",
        &jars,
        &["--tick", "200", "--no-start"],
    );
    let n = start_native(&e, 1, &[]);
    for sid in [2, 3] {
        e.start_node(sid);
    }
    e.wait_stable_within(45);
    let leader = status_leader(&e).expect("a Java leader");
    wait_for(
        &format!("native FOLLOWING {leader}"),
        Duration::from_secs(20),
        || {
            n.events()
                .last()
                .is_some_and(|v| decided(v, "FOLLOWING", leader))
                .then_some(())
        },
    );
    for sid in [2, 3] {
        let d = e.decisions(sid, 0);
        assert!(
            d.last().is_some_and(|(l, _)| *l == leader),
            "Java {sid}: {d:?}, leader {leader}"
        );
    }
    for (sid, from) in [(2, 3), (3, 2), (2, 1), (3, 1)] {
        assert!(
            !notifications_from(&e, sid, from).is_empty(),
            "Java {sid} logged no notification from {from}"
        );
    }
}

/// `zkfle probe` of each server of an elected ensemble of `version` reports the state and
/// leader the server itself is in (3.4 answers carry no config: `config_version` null).
fn probe(version: &str) {
    let Some(j) = need(&[version]) else { return };
    let _l = lock_loopback();
    let jars = vec![j[0].clone(), j[0].clone(), j[0].clone()];
    let e = Ensemble::start_with_jars(
        &format!("probe-{version}"),
        "1:participant,2:participant,3:participant",
        &jars,
        &["--tick", "200"],
    );
    e.wait_stable_within(45);
    let leader = status_leader(&e).expect("a Java leader");
    let out = Command::new(ZKFLE)
        .args(["probe", "--format", "json"])
        .args(["127.0.0.1:3888", "127.0.0.2:3888", "127.0.0.3:3888"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3, "{answers:?}");
    for (i, a) in answers.iter().enumerate() {
        let sid = i as i64 + 1;
        let want = if sid == leader {
            "LEADING"
        } else {
            "FOLLOWING"
        };
        assert_eq!(a["state"], want, "server {sid}: {a}");
        assert_eq!(a["leader"], leader, "server {sid}: {a}");
        assert_eq!(a["config_version"].is_null(), is_34(version), "{a}");
    }
}

macro_rules! version_tests {
    ($m:ident, $v:expr) => {
        mod $m {
            #[test]
            fn join_late() {
                super::join_late($v);
            }
            #[test]
            fn join_from_start() {
                super::join_from_start($v);
            }
            #[test]
            fn accepts_current_form() {
                super::accepts_current_form($v);
            }
            #[test]
            fn accepts_legacy_form() {
                super::accepts_legacy_form($v);
            }
            #[test]
            fn probe() {
                super::probe($v);
            }
        }
    };
}

version_tests!(v3_4_14, "3.4.14");
version_tests!(v3_6_3, "3.6.3");
version_tests!(v3_8_0, "3.8.0");
version_tests!(v3_9_5, "3.9.5");

#[test]
fn mixed_3_4_14_and_3_8_0() {
    mixed("3.4.14", "3.8.0");
}

#[test]
fn mixed_3_6_3_and_3_9_5() {
    mixed("3.6.3", "3.9.5");
}
