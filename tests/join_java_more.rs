//! More `zkfle join` against real Java ZooKeeper 3.8 servers: the native node as an observer,
//! multi-address (initial message -65535) on both sides, and a hierarchical config in which the
//! native node has weight 0.
//!
//! Like tests/join_java.rs, every test holds the machine-wide loopback-ensemble lock
//! (`$TMPDIR/zkfle-loopback-ensemble.lock`) because the layout's addresses are fixed.

mod common;
use common::join;

use std::process::Command;

use common::zab::observing;
use join::{Ensemble, Native, ZKFLE, lock_loopback, wait_for};
use serde_json::Value;

/// Java 1-3 have elected a leader (3, unless 1 and 2 were up and done before 3 on a loaded
/// machine); native observer 4 joins and decides OBSERVING that leader (an observer proposes
/// nobody and learns the leader from the voters' replies).
#[test]
fn native_observer_observes_the_java_leader() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "observer",
        "1:participant,2:participant,3:participant,4:observer:external",
        &["--tick", "200"],
    );
    e.wait_stable();
    // The leader in office now: a loaded machine can re-elect once before the ensemble is
    // stable, so a voter's earlier decisions may name another.
    let leader = (1..=3)
        .find(|sid| {
            e.decisions(*sid, 0)
                .last()
                .is_some_and(|(_, s)| s == "LEADING")
        })
        .expect("a Java leader");
    let log_at: Vec<usize> = (1..=3).map(|sid| e.log(sid).len()).collect();
    let out = Command::new("timeout")
        .args(["20", ZKFLE, "join", "--config"])
        .arg(e.zoo_cfg())
        .args(["--myid", "4", "--once"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "OBSERVING", "{v}");
    assert_eq!(v["leader"], leader, "{v}");
    // The voters stayed where they were: nobody re-elected because of the observer.
    for sid in [1, 2, 3] {
        let d = e.decisions(sid, log_at[sid as usize - 1]);
        assert!(
            d.iter().all(|(l, _)| *l == leader),
            "Java {sid}: {d:?} (leader {leader})"
        );
    }
}

/// An observer with a data directory through an election its peers hold: native observer 4
/// observes and syncs with the Java leader; the leader is killed; the Java voters elect
/// another, and the observer, which counts in no quorum, decides OBSERVING the new leader and
/// syncs with it again.
#[test]
fn native_observer_follows_an_election_of_its_peers() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "observer-election",
        "1:participant,2:participant,3:participant,4:observer:external",
        &["--tick", "200"],
    );
    e.wait_stable();
    let n = Native::start(&e, 4, &[]);
    let first = wait_for("zkfle observes", std::time::Duration::from_secs(15), || {
        observing(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    let ev = n.events().len();
    e.run(&["stop-node", &first.to_string(), "--kill"]);
    let next = wait_for(
        "zkfle observes the new leader",
        std::time::Duration::from_secs(20),
        || {
            observing(&n, ev)
                .filter(|l| *l != first)
                .filter(|_| n.log().matches("synced with leader").count() >= 2)
        },
    );
    // The Java voters agree: the observer took the leader they elected.
    let others: Vec<i64> = (1..=3).filter(|s| *s != first).collect();
    wait_for(
        "the Java voters' leader",
        std::time::Duration::from_secs(10),
        || (e.leader(&others) == Some(next)).then_some(()),
    );
}

/// Multi-address on both sides: every server has two election addresses (127.0.0.N:3888 and
/// 127.0.1.N:3889) and speaks initial message -65535; native 3 (`--multi-address`) and Java 1,
/// 2 agree that 3 leads.
#[test]
fn multi_address_native_and_java_agree_on_the_leader() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "multi",
        "1:participant,2:participant,3:participant:external",
        &[
            "--multi-address",
            "--tick",
            "100",
            "--init-limit",
            "30",
            "--no-start",
        ],
    );
    // Election only: with its data directory native 3 would sync Java 1 and hand over before
    // Java 2 is up (tests/lead_java.rs), and Java 2 would follow Java 1.
    let n = Native::start(
        &e,
        3,
        &["--multi-address", "--zxid", "0", "--peer-epoch", "0"],
    );
    e.start_node(1);
    e.start_node(2);
    e.wait_decision(1, 0, 3, "FOLLOWING");
    e.wait_decision(2, 0, 3, "FOLLOWING");
    n.wait_decision("LEADING", 3);
    // Java parsed our V2 initial message with both of our addresses, e.g.
    // `Initial message parsed by 2: InitialMessage{sid=3, electionAddr=[/127.0.0.3:3888, /127.0.1.3:3889]}`.
    let parsed = |log: &str| {
        log.lines().any(|l| {
            l.contains("InitialMessage{sid=3,")
                && l.contains("127.0.0.3:3888")
                && l.contains("127.0.1.3:3889")
        })
    };
    assert!(
        parsed(&e.log(1)) || parsed(&e.log(2)),
        "no Java server parsed a V2 initial message from 3 with both addresses"
    );
}

/// A hierarchical quorum (one group, weights 1, 1, 0): native 3 has weight 0, so although it
/// has the highest sid and the newest zxid and epoch it never leads; Java 2 leads and native 3
/// follows it.
#[test]
fn zero_weight_native_never_leads_and_follows() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "weight0",
        "1:participant,2:participant,3:participant:external",
        &["--tick", "200", "--no-start"],
    );
    e.append_config("group.1=1:2:3\nweight.1=1\nweight.2=1\nweight.3=0\n");
    let n = Native::start(&e, 3, &["--zxid", "0x100000005", "--peer-epoch", "1"]);
    e.start_node(1);
    e.start_node(2);
    e.wait_decision(2, 0, 2, "LEADING");
    e.wait_decision(1, 0, 2, "FOLLOWING");
    n.wait_decision("FOLLOWING", 2);
    assert!(
        n.events()
            .iter()
            .all(|v| v["state"] != "LEADING" && (v["state"] == "LOOKING" || v["leader"] == 2)),
        "{:?}",
        n.events()
    );
    for sid in [1, 2] {
        let d = e.decisions(sid, 0);
        assert!(d.iter().all(|(l, _)| *l == 2), "Java {sid}: {d:?}");
    }
}
