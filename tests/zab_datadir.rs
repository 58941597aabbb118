//! A long-running voter's data directory against real Java ZooKeeper (issue 18, item 4): with
//! a small snapCount zkfle rolls its log, writes snapshots and purges as Java does; ZooKeeper's
//! SnapshotFormatter and TxnLogToolkit read every file; zkfle's tree equals a Java follower's
//! (both restored from disk) and matched the digest of every txn the Java leader sent; a
//! restart loads snapshot + logs and gets a DIFF. Helpers: tests/common/zab.rs.

mod common;
use common::zab;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use zab::*;
use zkfle::storage::Storage;
use zkfle::storage::tree::DataTree;

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// The tree a data directory restores to, read from a copy (opening writes epoch files).
fn restored(data_dir: &Path, name: &str) -> DataTree {
    let copy = std::env::temp_dir().join(format!("zkfle-datadir-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    let st = std::process::Command::new("cp")
        .args(["-r", data_dir.join("version-2").to_str().unwrap()])
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    let s = Storage::open(&copy).unwrap();
    let t = s.tree().clone();
    drop(s);
    let _ = std::fs::remove_dir_all(&copy);
    t
}

/// path -> (data, ACL list, stat) with the config node's mtime left out (each server sets it
/// when it loads).
fn nodes(t: &DataTree) -> BTreeMap<String, String> {
    t.iter()
        .map(|(p, n)| {
            let mut stat = n.stat;
            if &**p == "/zookeeper/config" {
                stat.mtime = 0;
            }
            (
                p.to_string(),
                format!("{:?} {:?} {stat:?}", n.data, t.acl_cache().get(n.acl)),
            )
        })
        .collect()
}

/// SnapshotFormatter's `path` blocks: path -> the lines of its block (cZxid, mZxid, ...).
fn formatter_nodes(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    let mut cur: Option<String> = None;
    for l in out.lines() {
        if l.starts_with('/') {
            cur = Some(l.trim().to_string());
            m.insert(l.trim().to_string(), Vec::new());
        } else if l.starts_with("  ") && l.contains(" = ") {
            if let Some(c) = &cur {
                m.get_mut(c).unwrap().push(l.trim().to_string());
            }
        } else {
            cur = None;
        }
    }
    m
}

#[test]
fn a_long_running_voter_rolls_snapshots_purges_and_restarts() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "datadir",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--no-start"],
    );
    e.append_config(
        "snapCount=200\nautopurge.snapRetainCount=3\nautopurge.purgeInterval=1\npreAllocSize=256\n",
    );
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    let data = e.dir.join("native1");
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--autopurge-every",
        "1",
    ];
    let n = Native::start_in(&e.dir, &e.zoo_cfg(), 1, &args);
    let leader = wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let other = 5 - leader;
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });

    // 3,000 creates (pipelined) and a few sessions: ~15-30 snapshots at snapCount 200.
    let mut zk = Zk::connect(&client(leader)).unwrap();
    let ok = zk.create_many(&paths("n", 3000), &[7u8; 100], 64).unwrap();
    assert_eq!(ok, 3000);
    // setData, delete, ephemerals (one session closed, one still open), a failed multi-free
    // error txn (a delete of a missing node), so every kind of txn reaches the trees.
    let call = |zk: &mut Zk, op: i32, path: &str, tail: &[u8]| {
        let mut b = Vec::new();
        put_str(&mut b, path.as_bytes());
        b.extend_from_slice(tail);
        zk.call(op, &b).unwrap().0
    };
    let ephemeral = |zk: &mut Zk, path: &str| {
        let mut tail = Vec::new();
        put_str(&mut tail, b"e");
        tail.extend(1i32.to_be_bytes());
        tail.extend(31i32.to_be_bytes());
        put_str(&mut tail, b"world");
        put_str(&mut tail, b"anyone");
        tail.extend(1i32.to_be_bytes()); // EPHEMERAL
        call(zk, 1, path, &tail)
    };
    for i in 0..50 {
        let mut tail = Vec::new();
        put_str(&mut tail, b"changed");
        tail.extend((-1i32).to_be_bytes());
        assert_eq!(call(&mut zk, 5, &format!("/n{i}"), &tail), 0, "setData");
        assert_eq!(
            call(
                &mut zk,
                2,
                &format!("/n{}", 2999 - i),
                &(-1i32).to_be_bytes()
            ),
            0
        );
    }
    assert_eq!(call(&mut zk, 2, "/missing", &(-1i32).to_be_bytes()), -101);
    assert_eq!(ephemeral(&mut zk, "/n0/gone-with-its-session"), 0);
    drop(zk);
    // A session left to expire (4 s at tickTime 200): the leader closes it.
    let mut expiring = Zk::connect(&client(other)).unwrap();
    assert_eq!(ephemeral(&mut expiring, "/n1/expires"), 0);
    write_all(other, &paths("w", 20), Duration::from_secs(10));
    // A purge is due every second; it runs with the next write.
    std::thread::sleep(Duration::from_millis(1200));
    write_all(leader, &paths("p", 5), Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    // The expiring session's closeSession is a txn too, and may roll a snapshot and purge:
    // the files are examined once it has landed, not while it can remove one.
    wait_for("the session expired", Duration::from_secs(20), || {
        read(leader, "/n1/expires").is_none().then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));

    let v2 = data.join("version-2");
    let log = n.log();
    let taken = count(&log, "Snapshot 0x");
    // Every roll of the log takes a snapshot unless the last one is still being written, when
    // it is skipped as Java skips it ("Too busy to snap"): more are on a busy machine.
    let skipped = count(&log, "Too busy to snap, skipping");
    assert!(
        taken + skipped >= 10 && taken > 3,
        "{taken} snapshots taken, {skipped} skipped:\n{log}"
    );
    assert!(log.contains("Removing file:"), "purged:\n{log}");
    assert!(!log.contains("digest mismatch"), "{log}");
    let snaps = files(&v2, "snapshot.");
    let logs = files(&v2, "log.");
    assert!(
        (3..=4).contains(&snaps.len()),
        "snapRetainCount 3 (+1 being written): {snaps:?}"
    );
    // PurgeTxnLog's rule: of the logs older than the oldest kept snapshot, only the one that
    // holds its next txns stays. (Rolls whose snapshot was skipped, "Too busy to snap", as
    // Java skips them, leave more logs than snapshots after it.)
    let zxid = |p: &PathBuf| {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        i64::from_str_radix(n.rsplit('.').next().unwrap(), 16).unwrap()
    };
    let least = zxid(&snaps[0]);
    assert!(
        logs.iter().filter(|l| zxid(l) < least).count() <= 1,
        "{logs:?} for {snaps:?}"
    );
    let disk: u64 = files(&v2, "")
        .iter()
        .map(|p| p.metadata().unwrap().len())
        .sum();
    eprintln!(
        "zkfle data dir after 3,025 txns: {} snapshots, {} logs, {disk} bytes; {taken} snapshots taken",
        snaps.len(),
        logs.len()
    );

    // ZooKeeper's tools read every file.
    for p in &logs {
        let dump = zk_tool(
            "org.apache.zookeeper.server.persistence.TxnLogToolkit",
            &["--dump", p.to_str().unwrap()],
        );
        assert!(
            !dump.contains("CRC ERROR") && !dump.contains("Exception"),
            "{dump}"
        );
    }
    let newest = snaps.last().unwrap();
    let mut formatted = String::new();
    for p in &snaps {
        let out = zk_tool(
            "org.apache.zookeeper.server.SnapshotFormatter",
            &[p.to_str().unwrap()],
        );
        assert!(out.contains("/zookeeper/config"), "{out}");
        assert!(!out.contains("Exception"), "{out}");
        if p == newest {
            formatted = out;
        }
    }
    // SnapshotFormatter sees in zkfle's newest snapshot the nodes zkfle wrote.
    let f = formatter_nodes(&formatted);
    let (mine, _) = zkfle::storage::db::read_snapshot(newest).unwrap();
    assert_eq!(f.len(), mine.node_count(), "{formatted}");
    for (p, node) in mine.iter() {
        let shown = if p.is_empty() { "/" } else { p };
        let lines = f.get(shown).unwrap_or_else(|| panic!("{shown} not shown"));
        let st = &node.stat;
        let hex = |v: i64| format!("{v:#016x}");
        for want in [
            format!("cZxid = 0x{:014x}", st.czxid),
            format!("mZxid = 0x{:014x}", st.mzxid),
            format!("pZxid = 0x{:014x}", st.pzxid),
            format!("cversion = {}", st.cversion),
            format!("dataVersion = {}", st.version),
            format!("aclVersion = {}", st.aversion),
            format!("ephemeralOwner = {}", hex(st.ephemeral_owner)),
            format!("dataLength = {}", node.data.as_ref().map_or(0, |d| d.len())),
        ] {
            assert!(lines.contains(&want), "{shown}: {want} not in {lines:?}");
        }
    }

    // zkfle's tree equals the Java follower's, both restored from their data directories.
    drop(n);
    let java_follower = if other != leader { other } else { 2 };
    e.run(&["stop-node", &java_follower.to_string()]);
    let zk_tree = restored(&data, "zkfle");
    let java_tree = restored(&e.dir.join(format!("{java_follower}/data")), "java");
    assert_eq!(zk_tree.last_processed_zxid, java_tree.last_processed_zxid);
    let (a, b) = (nodes(&zk_tree), nodes(&java_tree));
    assert_eq!(a.len(), b.len());
    for (p, v) in &a {
        assert_eq!(Some(v), b.get(p), "{p}");
    }
    assert_eq!(zk_tree.digest(), java_tree.digest());
    assert!(zk_tree.get("/n0/gone-with-its-session").is_none());
    assert!(zk_tree.get("/n1/expires").is_none());
    assert!(zk_tree.get("/n2999").is_none());
    assert_eq!(zk_tree.session_count(), java_tree.session_count());
    drop(expiring);
    e.run(&["start-node", &java_follower.to_string()]);

    // Restart: snapshot + logs, then a DIFF from the leader.
    write_all(leader, &paths("r", 5), Duration::from_secs(15));
    let n = Native::start_in(&e.dir, &e.zoo_cfg(), 1, &args);
    wait_for("zkfle synced again", Duration::from_secs(15), || {
        (count(&n.log(), "synced with leader") >= 2).then_some(())
    });
    let log = n.log();
    let restart = &log[log.rfind("data tree of").unwrap()..];
    assert!(restart.contains("loaded from snapshot 0x"), "{restart}");
    assert!(
        log[log.rfind("following leader").unwrap()..].contains("Getting a diff from the leader"),
        "{log}"
    );
}
