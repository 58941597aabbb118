//! zkfle elected leader of real Java ZooKeeper servers (3.8.0, and 3.9.5 with `ZK_JARS`):
//! it leads Zab's discovery and synchronization from its own log, then hands leadership over
//! to a Java server (docs/lead.md). Serialized with the loopback lock; every process is
//! stopped by a Drop guard. Helpers: tests/common/zab.rs.

#[path = "common/zab.rs"]
mod zab;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zab::*;

/// The files of a data directory's `version-2` whose names start with `prefix`.
fn files(v2: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(v2)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(prefix)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// ZooKeeper's TxnLogToolkit reads every txn log of each data directory without a CRC error;
/// returns all the dumps.
fn toolkit_reads(dirs: &[PathBuf]) -> String {
    let mut all = String::new();
    for d in dirs {
        let logs = files(&d.join("version-2"), "log.");
        for l in &logs {
            let dump = zk_tool(
                "org.apache.zookeeper.server.persistence.TxnLogToolkit",
                &["--dump", l.to_str().unwrap()],
            );
            assert!(
                !dump.contains("CRC ERROR") && !dump.contains("Exception"),
                "{}: {dump}",
                l.display()
            );
            all.push_str(&dump);
        }
    }
    all
}

/// Zab states of a Java server from its log: the bare state lines, in order.
fn states(e: &Ensemble, sid: i64, skip: usize) -> Vec<String> {
    e.log(sid)[skip..]
        .lines()
        .filter_map(|l| {
            ["LEADING", "FOLLOWING", "LOOKING"]
                .into_iter()
                .find(|s| l.ends_with(&format!("- {s}")))
                .map(str::to_string)
        })
        .collect()
}

/// SIGSTOPs Java server `sid` and waits until `leader` has closed its connection to it
/// (syncLimit*tickTime without a reply: `GOODBYE`).
fn pause_until_dropped(e: &Ensemble, sid: i64, leader: i64) {
    let mark = e.log(leader).len();
    e.signal(sid, "-STOP");
    wait_for("the leader drops the paused follower", Duration::from_secs(15), || {
        e.log(leader)[mark..].contains("GOODBYE").then_some(())
    });
}

/// zkfle's log lines about its leadership, for the test's output.
fn print_leadership(log: &str) {
    for l in log.lines().filter(|l| {
        [
            "LEADING",
            "Synchronizing",
            "Have quorum",
            "hand-over",
            "handing",
            "sent the snapshot",
            "learner sid",
            "epoch ",
        ]
        .iter()
        .any(|k| l.contains(k))
    }) {
        eprintln!("  zkfle: {}", l.split("zkfle::").nth(1).unwrap_or(l));
    }
}

fn serves(sid: i64, path: &str) -> bool {
    read(sid, path).is_some()
}

/// The scenario: zkfle 1, Java F following, Java L leading. F is paused (SIGSTOP)
/// while writes commit with L and zkfle; L is killed and F resumes. zkfle, the only holder of
/// the writes among the living, is elected, brings F up to date by DIFF from its own log,
/// hands over, and F leads with the writes and accepts a new one. Then the old leader comes
/// back (it follows, with its extra history truncated or not as Java decides), and zkfle
/// holding several txns more than the survivor is the same story.
#[test]
fn zkfle_elected_leads_the_sync_and_hands_over() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "lead",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200"],
    );
    e.run(&["wait-stable", "--timeout", "30"]);
    let n = Native::start(&e, 1);
    let leader = wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let f = 5 - leader;
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    write_all(leader, &paths("a", 3), Duration::from_secs(10));

    // F pauses; once the leader has dropped it (so that no proposal waits in F's socket
    // buffer, to be read after SIGCONT), writes commit on the leader's and zkfle's ACKs.
    pause_until_dropped(&e, f, leader);
    write_all(leader, &paths("w", 5), Duration::from_secs(10));
    let fmark = e.log(f).len();
    let nmark = n.log().len();
    let killed = Instant::now();
    e.signal(leader, "-9");
    e.signal(f, "-CONT");

    // F serves the committed writes and accepts a new one.
    wait_for("F serves /w4", Duration::from_secs(30), || {
        serves(f, "/w4").then_some(())
    });
    write_all(f, &paths("x", 1), Duration::from_secs(20));
    let serving_ms = killed.elapsed().as_millis();
    eprintln!("leader killed -> F serves the writes and accepts one: {serving_ms} ms");

    let nlog = n.log()[nmark..].to_string();
    print_leadership(&nlog);
    assert!(nlog.contains("LEADING on"), "{nlog}");
    assert!(
        nlog.contains(&format!("Synchronizing with Learner sid: {f} ")) && nlog.contains("Sending DIFF"),
        "{nlog}"
    );
    assert!(nlog.contains("handing leadership over"), "{nlog}");
    let flog = e.log(f)[fmark..].to_string();
    assert!(flog.contains("Getting a diff from the leader"), "{flog}");
    // F followed zkfle once, then led: no election loop.
    let st = states(&e, f, fmark);
    assert!(st.iter().filter(|s| *s == "FOLLOWING").count() == 1, "{st:?}");
    assert_eq!(st.last().map(String::as_str), Some("LEADING"), "{st:?}");
    assert_eq!(count(&nlog, "LEADING on"), 1, "{nlog}");
    wait_for("zkfle follows F", Duration::from_secs(10), || {
        (following(&n, 0) == Some(f)).then_some(())
    });

    // The old leader comes back and follows; everyone has everything.
    e.run(&["start-node", &leader.to_string()]);
    wait_for("old leader serves /x0", Duration::from_secs(30), || {
        serves(leader, "/x0").then_some(())
    });
    assert!(serves(leader, "/w4"));

    let dumps = toolkit_reads(&[
        e.dir.join("native1"),
        e.dir.join(format!("{f}/data")),
        e.dir.join(format!("{leader}/data")),
    ]);
    assert!(dumps.contains("create /w4"), "{dumps}");
}
