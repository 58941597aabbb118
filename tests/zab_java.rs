//! zkfle as a Zab follower of real Java ZooKeeper 3.8 leaders (scripts/ensemble.sh), with a
//! tiny Java-free ZooKeeper client for the writes. Serialized with the loopback lock, like
//! tests/join_java.rs; every process is stopped by a Drop guard. Helpers: tests/common/zab.rs.

mod common;
use common::zab;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use zab::*;
/// Scenarios 1, 2 and 5 (small), the log format, leader loss: zkfle (sid 1) joins Java 2 and
/// 3 by SNAP, is counted (writes commit with the Java follower stopped), logs the txns in a
/// file ZooKeeper's TxnLogToolkit reads, rejoins after kill -9 by DIFF, and leaves a killed
/// leader at once and follows the survivor, with which writes keep committing.
#[test]
fn zkfle_is_a_counted_durable_follower() {
    let _l = lock_loopback();
    let (e, n, leader) = zkfle_beside_two_java("follow", &[]);
    let other = 5 - leader;
    assert!(
        n.log().contains("Getting a snapshot from leader"),
        "fresh zkfle gets SNAP"
    );
    write_all(leader, &paths("a", 5), Duration::from_secs(10));

    // 1. The Java follower stops: writes commit on the leader's and zkfle's ACKs.
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("b", 20), Duration::from_secs(10));
    assert_eq!(read(leader, "/b19").as_deref(), Some(&b"/b19"[..]));
    let llog = e.log(leader);
    assert!(
        llog.contains("Synchronizing with Learner sid: 1 "),
        "leader synced sid 1"
    );
    assert!(!n.log().contains("follow session ended"), "{}", n.log());

    // ZooKeeper's own tool reads zkfle's txn log, checksums included.
    let v2 = e.dir.join("native1/version-2");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&v2)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .collect();
    logs.sort();
    let dump = zk_tool(
        "org.apache.zookeeper.server.persistence.TxnLogToolkit",
        &["--dump", logs.last().unwrap().to_str().unwrap()],
    );
    assert!(dump.contains("create /b19"), "{dump}");
    assert!(!dump.contains("CRC ERROR"), "{dump}");
    let snaps: Vec<PathBuf> = std::fs::read_dir(&v2)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("snapshot.")
        })
        .collect();
    let snap = zk_tool(
        "org.apache.zookeeper.server.SnapshotFormatter",
        &[snaps[0].to_str().unwrap()],
    );
    assert!(snap.contains("/zookeeper"), "{snap}");

    // 2. kill -9 zkfle, write on (leader + Java follower), restart: DIFF, not SNAP.
    e.run(&["start-node", &other.to_string()]);
    write_all(leader, &paths("c", 5), Duration::from_secs(15));
    drop(n);
    write_all(leader, &paths("d", 5), Duration::from_secs(10));
    let before = e.log(leader).len();
    let n = Native::start(&e, 1, &[]);
    wait_for("zkfle synced again", Duration::from_secs(15), || {
        (count(&n.log(), "synced with leader") >= 2).then_some(())
    });
    let sync = e.log(leader)[before..].to_string();
    assert!(
        sync.contains("Synchronizing with Learner sid: 1 "),
        "{sync}"
    );
    assert!(!sync.contains("Sending snapshot"), "{sync}");
    assert!(
        count(&n.log(), "Getting a diff from the leader") >= 1,
        "{}",
        n.log()
    );
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("e", 5), Duration::from_secs(10));

    // Leader loss: zkfle is LOOKING at once, then follows the survivor; writes commit.
    e.run(&["start-node", &other.to_string()]);
    wait_for("Java follower back", Duration::from_secs(15), || {
        read(other, "/e4").map(|_| ())
    });
    let ev_before = n.events().len();
    let pid = std::fs::read_to_string(e.dir.join(format!("{leader}/pid"))).unwrap();
    let t = Instant::now();
    let k = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(k.success());
    wait_for("zkfle LOOKING", Duration::from_secs(5), || {
        n.events()[ev_before..]
            .iter()
            .any(|v| v["state"] == "LOOKING")
            .then_some(())
    });
    let looking_ms = t.elapsed().as_millis();
    assert!(looking_ms < 500, "LOOKING after {looking_ms} ms");
    wait_for(
        "zkfle follows the survivor",
        Duration::from_secs(20),
        || (following(&n, ev_before) == Some(other)).then_some(()),
    );
    write_all(other, &paths("f", 10), Duration::from_secs(20));
    assert_eq!(read(other, "/a0").as_deref(), Some(&b"/a0"[..]));
    eprintln!("zkfle LOOKING {looking_ms} ms after the leader was killed");
}

/// Scenario 3, no lost writes: W commits on B with zkfle's ACKs while A is down; B stops; A
/// restarts. zkfle's vote carries the higher zxid from its log, so A must not lead with its
/// stale data: zkfle is elected, brings A up to date from its own log (DIFF), and hands
/// leadership over to it (docs/lead.md); A then serves W without B.
#[test]
fn no_lost_writes_when_the_java_server_with_them_is_down() {
    let _l = lock_loopback();
    let (e, n, b) = zkfle_beside_two_java("nolost", &["--init-limit", "5"]);
    let since = zkfle_leads_after_its_leader_stops(&e, &n);
    // A followed zkfle (and got W by DIFF) before it ever led.
    let first = since
        .lines()
        .find(|l| l.ends_with("- LEADING") || l.ends_with("- FOLLOWING"))
        .unwrap_or_default();
    assert!(first.ends_with("- FOLLOWING"), "{since}");
    assert!(since.contains("Getting a diff from the leader"), "{since}");
    assert!(n.log().contains("handing leadership over"), "{}", n.log());
    e.run(&["start-node", &b.to_string()]);
    wait_for("B serves", Duration::from_secs(30), || read(b, "/w0"));
}

/// After an election zkfle takes part in, its FOLLOWING vote carries the new epoch once it is
/// up to date, as Java's `updateElectionVote` does (ZOOKEEPER-1732): a server that joins an
/// established ensemble counts out-of-election votes as one only when their peer epochs match.
/// With the election's (older) epoch in zkfle's vote, a 3.9.5 server cut off and healed in a
/// four-voter ensemble stayed LOOKING for good (scripts/docker/conformance.sh, split-majority:
/// it needed three matching votes, zkfle's among them). Here, three voters on 3.8.0: the
/// returning server serves, and the vote zkfle answers it with has the leader's epoch (this
/// assertion fails without the fix).
#[test]
fn zkfles_following_vote_carries_the_established_epoch() {
    let _l = lock_loopback();
    let (e, n, first) = zkfle_beside_two_java("epochvote", &[]);
    // A new epoch decided with zkfle's vote: the leader stops, zkfle and the other elect.
    let other = 5 - first;
    let ev = n.events().len();
    e.run(&["stop-node", &first.to_string()]);
    wait_for(
        "zkfle follows the survivor",
        Duration::from_secs(20),
        || (following(&n, ev) == Some(other)).then_some(()),
    );
    wait_for("zkfle synced again", Duration::from_secs(15), || {
        (count(&n.log(), "synced with leader") >= 2).then_some(())
    });
    write_all(other, &paths("g", 3), Duration::from_secs(10));
    // The old leader returns: it hears LEADING from `other` and FOLLOWING from zkfle.
    let before = e.log(first).len();
    e.run(&["start-node", &first.to_string()]);
    wait_for(
        "the returning server serves",
        Duration::from_secs(20),
        || read(first, "/g2"),
    );
    let since = e.log(first)[before..].to_string();
    let epoch_of = |sid: i64, state: &str| {
        let key = format!("n.sid:{sid}, n.state:{state}, n.leader:{other}, ");
        let line = since.lines().find(|l| l.contains(&key))?;
        let pe = line.split("n.peerEpoch:").nth(1)?.split(',').next()?;
        Some(pe.to_string())
    };
    let leader_epoch = epoch_of(other, "LEADING").expect("the leader's LEADING notification");
    assert_eq!(
        epoch_of(1, "FOLLOWING").as_deref(),
        Some(leader_epoch.as_str()),
        "zkfle's FOLLOWING vote carries the leader's epoch: {since}"
    );
}
