//! Dynamic reconfiguration against real Java ZooKeeper (docs/reconfig.md): zkfle (sid 4) is
//! added to a running Java ensemble with `reconfig -add`, a Java server is removed, and
//! zkfle's vote and ACKs are then what the ensemble needs: writes commit with a Java server
//! down, and after the Java leader restarts the two re-elect and commit again. Serialized
//! with the loopback lock; every process is stopped by a Drop guard. Java from ZK_JARS,
//! ZK_HOME or Debian's 3.8.0 (scripts/zk-env.sh).

mod common;
use common::zab;

use std::path::PathBuf;
use std::time::Duration;

use zab::*;

/// The zoo.cfg keys every server (Java and zkfle) runs with: reconfiguration on, and ACLs
/// skipped so that the test's client may run `reconfig` without a superuser.
const RECONFIG_KEYS: &str = "reconfigEnabled=true\nskipACL=yes\n";

/// Three Java servers running with [`RECONFIG_KEYS`], elected, and the directory and zoo.cfg
/// of zkfle sid 4: the ensemble as its zoo.cfg lists it, plus zkfle itself as `role`; and the
/// capture of all four, from before the servers start (`scripts/record-zkfle-fixture.sh`
/// keeps it as a fixture).
fn reconfig_ensemble(
    name: &str,
    role: &str,
    extra: &[&str],
) -> (Ensemble, PathBuf, PathBuf, Capture) {
    let mut args = vec!["--tick", "200", "--no-start"];
    args.extend_from_slice(extra);
    let e = Ensemble::start(name, "1:participant,2:participant,3:participant", &args);
    let capture = Capture::start(
        &e.dir.join(format!("{name}.pcap")),
        "127.0.0.1 or host 127.0.0.2 or host 127.0.0.3 or host 127.0.0.4",
    );
    for sid in 1..=3 {
        let p = e.dir.join(format!("{sid}/zoo.cfg"));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}\n{RECONFIG_KEYS}")).unwrap();
        e.run(&["start-node", &sid.to_string()]);
    }
    e.run(&["wait-stable", "--timeout", "30"]);

    // zkfle's own config: the ensemble as its zoo.cfg lists it, plus itself.
    let zdir = e.dir.join("zkfle");
    std::fs::create_dir_all(&zdir).unwrap();
    let cfg = zdir.join("zoo.cfg");
    let common = std::fs::read_to_string(e.dir.join("zoo.cfg")).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "{common}\nserver.4=127.0.0.4:2888:3888:{role}\n{RECONFIG_KEYS}dataDir={}\n",
            zdir.join("data").display()
        ),
    )
    .unwrap();
    (e, zdir, cfg, capture)
}

/// zkfle (sid 4, not in the Java servers' config) starts and follows as a non-voting
/// participant; `reconfig -add` makes it a voter, then a Java follower is removed; with both
/// Java followers stopped, writes commit on the leader's and zkfle's ACKs; the Java leader
/// restarts and it and zkfle re-elect under the last config; zkfle restarts with the
/// activated config. The capture's summary tells the membership story.
#[test]
fn zkfle_added_by_reconfig_then_a_java_server_removed_is_needed_for_quorum() {
    let _l = lock_loopback();
    let t0 = std::time::Instant::now();
    let (e, zdir, cfg, capture) = reconfig_ensemble("reconfig", "participant", &[]);
    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    let t_join = std::time::Instant::now();
    // Not yet a member of the ensemble's config: zkfle takes it (version 0x1<epoch>00000000)
    // from the Java servers' notifications and follows as a non-voting participant.
    let leader = wait_for("zkfle follows", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    eprintln!(
        "zkfle synced as a non-voting follower {:?} after it started",
        t_join.elapsed()
    );
    assert!(n.log().contains("activated config version"), "{}", n.log());
    // The leader syncs it though its config does not list it (Java's non-voting follower).
    assert!(
        e.log(leader).contains("Synchronizing with Learner sid: 4 "),
        "{}",
        e.log(leader)
    );
    write_all(leader, &paths("a", 3), Duration::from_secs(10));

    // reconfig -add: zkfle logs the proposal, acknowledges it, activates on COMMITANDACTIVATE
    // and stays in the session.
    let text = add_zkfle_as_participant(leader, &n);
    assert!(
        text.contains("server.4=127.0.0.4:2888:3888:participant"),
        "{text}"
    );
    // Then a Java server other than the leader is removed.
    let removed = [1, 2, 3].into_iter().find(|s| *s != leader).unwrap();
    let kept = 6 - leader - removed;
    let text = reconfig(
        leader,
        None,
        Some(&removed.to_string()),
        Duration::from_secs(20),
    );
    assert!(!text.contains(&format!("server.{removed}=")), "{text}");
    wait_for(
        "zkfle activates the removal",
        Duration::from_secs(10),
        || (count(&n.log(), "reconfig: config") >= 2).then_some(()),
    );
    assert!(!n.log().contains("follow session ended"), "{}", n.log());
    // Written as Java writes it: the dynamic file, zoo.cfg pointing at it.
    let zoo = std::fs::read_to_string(&cfg).unwrap();
    assert!(zoo.contains("dynamicConfigFile="), "{zoo}");
    assert!(!zoo.contains("server."), "{zoo}");
    let members = dynamic_members(&cfg).unwrap();
    assert!(members.contains("server.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181"));
    assert!(
        !members.contains(&format!("server.{removed}=")),
        "{members}"
    );

    // With config {kept, leader, 4}: the removed server and the other Java voter down, the
    // leader commits only with zkfle's ACKs.
    e.run(&["stop-node", &removed.to_string()]);
    e.run(&["stop-node", &kept.to_string()]);
    write_all(leader, &paths("b", 5), Duration::from_secs(10));
    assert_eq!(read(leader, "/b4").as_deref(), Some(&b"/b4"[..]));

    // The leader restarts: it and zkfle are a quorum of {kept, leader, 4} only together.
    let ev = n.events().len();
    e.run(&["stop-node", &leader.to_string()]);
    let t_restart = std::time::Instant::now();
    e.run(&["start-node", &leader.to_string()]);
    wait_for(
        "the leader's ensemble is back",
        Duration::from_secs(30),
        || {
            Zk::connect(&client(leader))
                .ok()
                .and_then(|mut zk| (zk.create("/c", b"c").ok()? == 0).then_some(()))
        },
    );
    eprintln!(
        "leader {leader} stopped; a write committed again {:?} later",
        t_restart.elapsed()
    );
    assert_eq!(read(leader, "/b4").as_deref(), Some(&b"/b4"[..]));
    assert!(n.events().len() > ev, "zkfle took part in the new election");
    let java = e.log(leader);
    assert!(
        java.contains("Synchronizing with Learner sid: 4") || java.contains("LEADING"),
        "{java}"
    );
    // A restart of zkfle comes back with the activated config.
    let (ev, skip) = (n.events().len(), n.log().len());
    drop(n);
    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    wait_for("zkfle follows again", Duration::from_secs(20), || {
        following(&n, ev).filter(|_| n.log()[skip..].contains("synced with leader"))
    });
    let log = n.log()[skip..].to_string();
    assert!(
        !log.contains("activated config"),
        "no newer config to take: {log}"
    );
    write_all(leader, &paths("d", 3), Duration::from_secs(10));
    eprintln!(
        "ensemble to end: {:?} (after the loopback lock)",
        t0.elapsed()
    );

    // The capture tells the membership story: the add, the removal, and the election after the
    // leader's restart counted under the last config.
    let pcap = capture.stop_and_keep(&e);
    let out = std::process::Command::new(ZKFLE)
        .args(["decode", "--summary", "--format", "jsonl"])
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("{text}"));
    let configs = summary["configs"].as_array().unwrap();
    let added = configs
        .iter()
        .find(|c| c["added"] == serde_json::json!([4]));
    let removal = configs
        .iter()
        .find(|c| c["removed"] == serde_json::json!([removed]))
        .unwrap_or_else(|| panic!("{configs:?}"));
    assert!(added.is_some(), "{configs:?}");
    let mut voters = vec![kept, leader, 4];
    voters.sort();
    assert_eq!(removal["voters"], serde_json::json!(voters));
    let last = removal["version"].as_u64().unwrap();
    let after_restart = summary["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|r| r["kind"] == "election")
        .unwrap();
    assert_eq!(
        after_restart["config_version"].as_u64(),
        Some(last),
        "{after_restart}"
    );
    let human = std::process::Command::new(ZKFLE)
        .args(["decode", "--summary"])
        .arg(&pcap)
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains(&format!("removed {removed}")), "{human}");
    assert!(
        human.contains(&format!("counted under config {last:#x}")),
        "{human}"
    );
}

/// `reconfig -add` of zkfle (sid 4) as a participant through `leader`, once zkfle has
/// activated it; the new config's text.
fn add_zkfle_as_participant(leader: i64, n: &Native) -> String {
    let text = reconfig(
        leader,
        Some("server.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181"),
        None,
        Duration::from_secs(20),
    );
    wait_for("zkfle activates the add", Duration::from_secs(10), || {
        n.log().contains("reconfig: config").then_some(())
    });
    text
}

/// The members in the dynamic file zoo.cfg `cfg` points at (`None` before it points at one).
fn dynamic_members(cfg: &std::path::Path) -> Option<String> {
    let zoo = std::fs::read_to_string(cfg).ok()?;
    let dynamic = zoo
        .lines()
        .find_map(|l| l.strip_prefix("dynamicConfigFile="))?;
    std::fs::read_to_string(dynamic).ok()
}

/// Whether a create of `path` through `sid` commits within `wait`.
fn commits_within(sid: i64, path: &str, wait: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        if let Ok(mut zk) = Zk::connect(&client(sid))
            && zk.create(path, b"v").ok() == Some(0)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Removed from the config, zkfle stays what Java's docs call a non-voting follower: it keeps
/// its Zab session (it still sees and ACKs proposals) and its config file drops it, but it is
/// counted in no quorum: with both Java followers stopped, nothing commits on the leader.
#[test]
fn zkfle_removed_from_the_config_stays_a_non_voting_follower() {
    let _l = lock_loopback();
    let (e, zdir, cfg, capture) = reconfig_ensemble("reconfig-self", "participant", &[]);
    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    let leader = wait_for("zkfle follows", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    add_zkfle_as_participant(leader, &n);
    let text = reconfig(leader, None, Some("4"), Duration::from_secs(20));
    assert!(!text.contains("server.4="), "{text}");
    wait_for(
        "zkfle activates its removal",
        Duration::from_secs(10),
        || (count(&n.log(), "reconfig: config") >= 2).then_some(()),
    );
    // Still following, in the same session, and its files say it is no member.
    write_all(leader, &paths("r", 3), Duration::from_secs(10));
    assert!(!n.log().contains("follow session ended"), "{}", n.log());
    let members = dynamic_members(&cfg).unwrap();
    assert!(!members.contains("server.4="), "{members}");
    for s in (1..=3).filter(|s| *s != leader) {
        e.run(&["stop-node", &s.to_string()]);
    }
    assert!(
        !commits_within(leader, "/after-removal", Duration::from_secs(4)),
        "a removed member's ACK made a quorum"
    );
    capture.stop_and_keep(&e);
}

/// zkfle added as an observer by `reconfig` (a role change: its session ends and it observes):
/// it syncs with OBSERVERINFO and logs the leader's INFORMs (TxnLogToolkit reads them);
/// `reconfig` then promotes it (a role change again) and it follows as a participant, counted:
/// with a Java follower stopped, writes commit; demoted back to observer, it is not: with
/// both Java followers stopped, nothing commits (and the leader, without a quorum, looks for
/// one with the observer).
#[test]
fn zkfle_added_as_observer_then_promoted() {
    let _l = lock_loopback();
    let t0 = std::time::Instant::now();
    let (e, zdir, cfg, capture) = reconfig_ensemble("reconfig-obs", "observer", &[]);
    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    let leader = wait_for("zkfle follows", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    reconfig(
        leader,
        Some("server.4=127.0.0.4:2888:3888:observer;127.0.0.4:2181"),
        None,
        Duration::from_secs(20),
    );
    // A role change: the session ends, zkfle observes the same leader.
    wait_for("zkfle observes", Duration::from_secs(20), || {
        observing(&n, 0).filter(|l| *l == leader)
    });
    wait_for(
        "zkfle synced as an observer",
        Duration::from_secs(10),
        || (count(&n.log(), "synced with leader") >= 2).then_some(()),
    );
    write_all(leader, &paths("o", 3), Duration::from_secs(10));
    // The observer logged the INFORMs (ZooKeeper's own tool reads its log).
    wait_for("zkfle logged /o2", Duration::from_secs(10), || {
        let v2 = zdir.join("native4/version-2");
        let mut logs: Vec<_> = std::fs::read_dir(&v2)
            .ok()?
            .map(|d| d.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
            .collect();
        logs.sort();
        let dump = zk_tool(
            "org.apache.zookeeper.server.persistence.TxnLogToolkit",
            &["--dump", logs.last()?.to_str()?],
        );
        dump.contains("create /o2").then_some(())
    });
    assert!(
        e.log(leader)
            .contains("Follower sid: 4 : info : 127.0.0.4:2888:3888:observer"),
        "{}",
        e.log(leader)
    );

    // Promoted: a role change again.
    let ev = n.events().len();
    reconfig(
        leader,
        Some("server.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181"),
        None,
        Duration::from_secs(20),
    );
    wait_for(
        "zkfle follows as a participant",
        Duration::from_secs(20),
        || following(&n, ev).filter(|_| count(&n.log(), "synced with leader") >= 3),
    );
    write_all(leader, &paths("q", 3), Duration::from_secs(10));
    assert_eq!(
        count(
            &e.log(leader),
            "Follower sid: 4 : info : 127.0.0.4:2888:3888:participant"
        ),
        1,
        "one session as a participant after the promotion"
    );
    // Counted: with a Java follower stopped, 3 of the 4 voters are the leader, the other Java
    // follower and zkfle. (zkfle used to keep the learner type of its start, OBSERVERINFO,
    // so the leader fed it INFORMs and never counted it: docs/reconfig.md.)
    let other = (1..=3).find(|s| *s != leader).unwrap();
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("x", 3), Duration::from_secs(15));
    assert_eq!(read(leader, "/x2").as_deref(), Some(&b"/x2"[..]));
    e.run(&["start-node", &other.to_string()]);
    write_all(leader, &paths("y", 3), Duration::from_secs(15));

    // Demoted back: a role change again, zkfle observes, and is not counted: with both Java
    // followers stopped the leader has 1 of 3 voters, and nothing commits.
    let ev = n.events().len();
    reconfig(
        leader,
        Some("server.4=127.0.0.4:2888:3888:observer;127.0.0.4:2181"),
        None,
        Duration::from_secs(20),
    );
    wait_for("zkfle observes again", Duration::from_secs(20), || {
        observing(&n, ev)
    });
    wait_for(
        "zkfle synced as an observer again",
        Duration::from_secs(10),
        || (count(&n.log(), "synced with leader") >= 4).then_some(()),
    );
    for s in (1..=3).filter(|s| *s != leader) {
        e.run(&["stop-node", &s.to_string()]);
    }
    assert!(
        !commits_within(leader, "/z", Duration::from_secs(4)),
        "an observer's ACK made a quorum"
    );
    eprintln!(
        "observer test: {:?} (after the loopback lock)",
        t0.elapsed()
    );
    capture.stop_and_keep(&e);
}

/// kill -9 of zkfle between a reconfig's PROPOSAL and its COMMITANDACTIVATE: zkfle (a voter of
/// {L, J1, J2, 4}) has logged and acknowledged `reconfig -remove J2` while J1, stopped with
/// SIGSTOP, holds the commit back; zkfle is stopped in turn, J1 resumes and the reconfig
/// commits, and zkfle is killed with the commit unread. Restarted, zkfle comes back from its
/// disk (the proposed config as the last seen), syncs, and runs under the committed config
/// {L, J1, 4}: with J1 stopped, writes commit on the leader's and zkfle's ACKs.
///
/// zkfle is stopped, not killed, until the commit: while the reconfig is pending the leader
/// needs a synced quorum of the old config too, {L, J1, J2, 4} with J2 down, and checks it
/// every tick. Killed at once, zkfle's handler ends with its socket and the leader, left with
/// L and J1, may give up before J1's ACK commits the reconfig (CI, twice).
#[test]
fn zkfle_killed_between_a_reconfig_proposal_and_its_commit() {
    let _l = lock_loopback();
    // syncLimit 50 ticks (10 s): the leader keeps the stopped J1, then the stopped zkfle, as
    // synced while the test waits on them.
    let (e, zdir, cfg, capture) =
        reconfig_ensemble("reconfig-kill", "participant", &["--sync-limit", "50"]);
    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    let leader = wait_for("zkfle follows", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    add_zkfle_as_participant(leader, &n);
    let mut java = (1..=3).filter(|s| *s != leader);
    let (j1, j2) = (java.next().unwrap(), java.next().unwrap());
    e.run(&["stop-node", &j2.to_string()]);
    write_all(leader, &paths("k", 3), Duration::from_secs(10));
    let next = zkfle::zoocfg::next_config_path(&cfg);
    let _ = std::fs::remove_file(&next);

    // The client's session first: creating it is a proposal too, which J1's silence would hold.
    let mut zk = Zk::connect(&client(leader)).unwrap();
    e.signal(j1, "-STOP");
    let remove = std::thread::spawn(move || zk.reconfig(None, Some(&j2.to_string())));
    // zkfle has the proposal on disk: the config last seen proposed.
    // (20 s: on a busy machine the reconfig's way through the leader took more than 5.)
    wait_for("zkfle logs the proposal", Duration::from_secs(20), || {
        std::fs::read_to_string(&next)
            .ok()
            .filter(|t| t.contains("version=") && !t.contains(&format!("server.{j2}=")))
            .map(|_| ())
    });
    // zkfle acknowledges once the proposal is durable, just after writing the file.
    std::thread::sleep(Duration::from_millis(500));
    n.signal("-STOP");
    e.signal(j1, "-CONT");
    let (err, text) = remove.join().unwrap().unwrap();
    assert_eq!(err, 0, "reconfig -remove {j2}");
    assert!(!text.contains(&format!("server.{j2}=")), "{text}");
    n.kill();

    let n = Native::start_in(&zdir, &cfg, 4, &[]);
    wait_for("zkfle follows again", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    wait_for(
        "zkfle runs under the committed config",
        Duration::from_secs(10),
        || {
            let members = dynamic_members(&cfg)?;
            (!members.contains(&format!("server.{j2}="))).then_some(())
        },
    );
    e.run(&["stop-node", &j1.to_string()]);
    write_all(leader, &paths("after", 3), Duration::from_secs(15));
    assert_eq!(read(leader, "/after2").as_deref(), Some(&b"/after2"[..]));
    capture.stop_and_keep(&e);
}

/// zkfle started late as sid 3 of a static zoo.cfg (version 0, its client address from
/// `clientPort`) into servers 1 and 2, whose first leader made the config dynamic (version
/// 0x1<epoch>00000000 of the same three members): the first answer carrying that config
/// restarts its election, as it restarts Java's (docs/java-behaviour.md: `QuorumServer.equals`
/// compares the client address Java filled in, which no config on the wire carries); the new
/// election's votes carry the ensemble's config, and zkfle follows.
#[test]
fn zkfle_started_late_restarts_its_election_on_the_ensembles_first_dynamic_config() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "late-dynamic",
        "1:participant,2:participant,3:participant:external",
        &["--tick", "200", "--no-start"],
    );
    for sid in 1..=2 {
        let p = e.dir.join(format!("{sid}/zoo.cfg"));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}\n{RECONFIG_KEYS}")).unwrap();
        e.run(&["start-node", &sid.to_string()]);
    }
    e.run(&["wait-stable", "--timeout", "30"]);
    let leader = [1, 2]
        .into_iter()
        .find(|s| e.log(*s).contains("LEADING - LEADER ELECTION TOOK"))
        .expect("a Java leader");
    let zdir = e.dir.join("zkfle");
    std::fs::create_dir_all(&zdir).unwrap();
    let cfg = zdir.join("zoo.cfg");
    let own = std::fs::read_to_string(e.dir.join("external-3.cfg")).unwrap();
    assert!(own.contains("clientPort="), "{own}");
    std::fs::write(
        &cfg,
        format!(
            "{own}\n{RECONFIG_KEYS}dataDir={}\n",
            zdir.join("data").display()
        ),
    )
    .unwrap();
    let n = Native::start_in(&zdir, &cfg, 3, &[]);
    let followed = wait_for("zkfle follows", Duration::from_secs(20), || {
        following(&n, 0).filter(|_| n.log().contains("synced with leader"))
    });
    assert_eq!(followed, leader);
    let log = n.log();
    assert!(log.contains("restarting leader election"), "{log}");
    assert!(log.contains("activated config version"), "{log}");
}
