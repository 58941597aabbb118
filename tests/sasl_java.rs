//! Quorum SASL (DIGEST-MD5) against real Java ZooKeeper (`quorum.auth.enableSasl=true`,
//! learner and server SASL required): a JAAS file made here, the Java servers reading it
//! through `-Djava.security.auth.login.config` (ensemble.sh's DIR/server.jvmflags), zkfle
//! through `--jaas`. zkfle authenticates to Java and Java to zkfle on both ports; a wrong
//! password is refused on both sides with clear errors. Helpers: tests/common/zab.rs.

mod common;
use common::{join::record_for_docs, zab};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use zab::*;

const PASSWORD: &str = "quorum-pw";

/// The JAAS file Java and zkfle read: the server section knows user `zk`, the learner
/// section logs in as `zk` with `learner_password`.
fn jaas(dir: &Path, name: &str, learner_password: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"QuorumServer {{
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_zk="{PASSWORD}";
}};
QuorumLearner {{
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="zk"
       password="{learner_password}";
}};
"#
        ),
    )
    .unwrap();
    p
}

/// Servers 2 and 3 (Java) with quorum SASL required both ways; sid 1 is left for zkfle.
fn sasl_ensemble(name: &str, extra: &[&str]) -> (Ensemble, PathBuf) {
    let mut args = vec!["--tick", "200", "--no-start"];
    args.extend_from_slice(extra);
    let e = Ensemble::start(
        name,
        "1:participant:external,2:participant,3:participant",
        &args,
    );
    let good = require_sasl(&e);
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    (e, good)
}

/// Makes a `--no-start` ensemble require quorum SASL both ways, its servers reading the JAAS
/// file (`jaas.conf`, returned) through ensemble.sh's DIR/server.jvmflags.
fn require_sasl(e: &Ensemble) -> PathBuf {
    let good = jaas(&e.dir, "jaas.conf", PASSWORD);
    std::fs::write(
        e.dir.join("server.jvmflags"),
        format!("-Djava.security.auth.login.config={}\n", good.display()),
    )
    .unwrap();
    // fips-mode=false: 3.9 defaults to FIPS mode, in which Java will not use DIGEST-MD5 (its
    // learner then fails with a NullPointerException and no 3.9 server can authenticate);
    // older servers ignore the key (docs/sasl.md).
    e.append_config(
        "quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\nquorum.auth.serverRequireSasl=true\nfips-mode=false\n",
    );
    good
}

fn probe(target: &str, extra: &[&str]) -> std::process::Output {
    Command::new(ZKFLE)
        .args(["probe", target, "--format", "json", "--timeout", "3"])
        .args(extra)
        .output()
        .unwrap()
}

/// zkfle authenticates to Java (election and quorum ports), Java to zkfle (election port),
/// zkfle follows and is counted; probe authenticates with --jaas; a wrong password is
/// refused by Java and zkfle says so.
#[test]
fn zkfle_follows_a_sasl_ensemble_and_a_wrong_password_is_refused() {
    let _l = lock_loopback();
    let (e, good) = sasl_ensemble("sasl", &[]);
    assert!(
        e.log(2)
            .contains("Successfully completed the authentication using SASL"),
        "Java authenticates: {}",
        e.log(2)
    );

    let capture = Capture::start(&e.dir.join("sasl.pcap"), "127.0.0.2 or host 127.0.0.3");
    let n = Native::start(&e, 1, &["--jaas", good.to_str().unwrap()]);
    let leader = wait_for("zkfle FOLLOWING with SASL", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let other = 5 - leader;
    wait_for("zkfle synced with SASL", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    // Java authenticated zkfle as learner `zk` (its callback handler's line), on the election
    // port and on the leader's quorum port.
    let authenticated = |sid: i64| {
        e.log(sid)
            .matches("Successfully authenticated learner: authenticationID=zk")
            .count()
    };
    assert!(authenticated(leader) >= 2, "{}", e.log(leader));
    // The Java servers (larger sids) connected to zkfle's election port and authenticated.
    wait_for(
        "Java authenticated to zkfle",
        Duration::from_secs(5),
        || {
            (n.log()
                .matches("Successfully authenticated learner sid")
                .count()
                >= 2)
                .then_some(())
        },
    );

    // probe: with the JAAS file an answer; without, Java closes the connection (exit 1).
    let target = format!("127.0.0.{leader}:3888");
    let with = probe(&target, &["--jaas", good.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&with.stdout);
    assert!(
        with.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(out.contains("\"state\":\"LEADING\""), "{out}");
    assert_eq!(probe(&target, &[]).status.code(), Some(1));

    // Counted: with the Java follower stopped, writes commit on the leader's and zkfle's ACKs.
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("s", 10), Duration::from_secs(10));
    assert_eq!(read(leader, "/s9").as_deref(), Some(&b"/s9"[..]));
    e.run(&["start-node", &other.to_string()]);
    // The restarted follower serves (it synced) before zkfle leaves: else the leader, left
    // with no synced follower, loses its quorum and another election may move the leadership
    // (seen under load, with the test command's tests side by side).
    wait_for(
        "the restarted Java follower serves",
        Duration::from_secs(30),
        || read(other, "/s9"),
    );
    drop(n);

    // A wrong learner password: Java refuses it, and zkfle says the server refused.
    let bad = jaas(&e.dir, "wrong.conf", "not-the-password");
    let java_marks = [e.log(2).len(), e.log(3).len()];
    let mark = std::fs::metadata(e.dir.join("native1.log")).map_or(0, |m| m.len() as usize);
    let n = Native::start(&e, 1, &["--jaas", bad.to_str().unwrap()]);
    let line = wait_for("zkfle reports the refusal", Duration::from_secs(10), || {
        n.log()[mark..]
            .lines()
            .find(|l| l.contains("SASL authentication to"))
            .map(str::to_string)
    });
    assert!(
        line.contains("refused") && line.contains("wrong.conf"),
        "{line}"
    );
    // By the leader zkfle dialled: the one found above, or whoever leads by then.
    wait_for("Java logs the failed SASL", Duration::from_secs(5), || {
        [2, 3]
            .iter()
            .zip(java_marks)
            .any(|(sid, mark)| e.log(*sid)[mark..].contains("Failed to authenticate using SASL"))
            .then_some(())
    });
    // Its server password is right, so a Java server that dials it (one just restarted) is
    // let in, and zkfle may decide FOLLOWING; it never syncs.
    std::thread::sleep(Duration::from_secs(2));
    let log = n.log()[mark..].to_string();
    assert!(!log.contains("synced with leader"), "{log}");
    n.record_for_docs(
        "sasl",
        "tests/sasl_java.rs, zkfle_follows_a_sasl_ensemble_and_a_wrong_password_is_refused",
    );
    drop(n);

    // The capture of all this decodes without a malformed frame: each authentication is one
    // `sasl` record (the server's verdict, naming the learner's user), and the summary names
    // the refusals.
    let pcap = capture.stop();
    // --config: a 3.4 capture names no election addresses.
    let out = Command::new(ZKFLE)
        .args(["decode", "--format", "jsonl", "--config"])
        .arg(e.zoo_cfg())
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("malformed"), "{text}");
    let verdicts: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"sasl\""))
        .collect();
    assert!(
        verdicts
            .iter()
            .any(|l| l.contains("\"accepted\":true") && l.contains("\"user\":\"zk\"")),
        "{text}"
    );
    assert!(
        verdicts.iter().any(|l| l.contains("\"accepted\":false")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("\"type\":\"notification\""))
    );
    let summary = Command::new(ZKFLE)
        .args(["decode", "--summary", "--config"])
        .arg(e.zoo_cfg())
        .arg(&pcap)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&summary.stdout);
    // The server that refused it: the leader, or the one that leads by then (on a busy
    // machine the restarted follower can take the leadership with it).
    assert!(
        [2, 3].iter().any(|sid| summary.contains(&format!(
            "sid {sid} refused sid 1's quorum SASL authentication as user \"zk\""
        ))),
        "leader {leader}: {summary}"
    );
    record_for_docs(
        "sasl-capture",
        "the SASL records and the summary of the capture of tests/sasl_java.rs, zkfle_follows_a_sasl_ensemble_and_a_wrong_password_is_refused",
        &format!("{}\n{summary}", verdicts.join("\n")),
    );

    // repro authenticates before its notification: a verdict, not a refused connection.
    let out = Command::new(ZKFLE)
        .args([
            "repro",
            "bad-config-server-id",
            "--destructive",
            "--format",
            "json",
        ])
        .args(["--target", &format!("127.0.0.{other}:3888")])
        .args(["--jaas", good.to_str().unwrap(), "--config"])
        .arg(e.zoo_cfg())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!report.contains("\"inconclusive\""), "{report}");
    assert!(!report.contains("SASL authentication:"), "{report}");
}

/// zkfle leads with SASL: W commits on B with zkfle's ACKs while A is down; B stops; A
/// restarts, authenticates on zkfle's quorum port, follows zkfle (DIFF) and gets W, and zkfle
/// hands leadership over (docs/lead.md).
#[test]
fn zkfle_leads_a_java_follower_with_sasl() {
    let _l = lock_loopback();
    let (e, good) = sasl_ensemble("sasl-lead", &["--init-limit", "5"]);
    let n = Native::start(&e, 1, &["--jaas", good.to_str().unwrap()]);
    let since = zkfle_leads_after_its_leader_stops(&e, &n);
    assert!(since.contains("Getting a diff from the leader"), "{since}");
    assert!(
        n.log().contains("Successfully authenticated learner at"),
        "A authenticated on zkfle's quorum port: {}",
        n.log()
    );
    assert!(n.log().contains("handing leadership over"), "{}", n.log());
}

/// Configs Java refuses are refused with Java's words; a Kerberos JAAS section is named.
#[test]
fn sasl_configs_java_refuses_and_kerberos_are_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("zkfle-sasl-cfg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let krb = dir.join("krb.conf");
    std::fs::write(
        &krb,
        "QuorumServer { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=\"/k\" principal=\"zkquorum/host@R\"; };\nQuorumLearner { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };\n",
    )
    .unwrap();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        "tickTime=200\nquorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n",
    )
    .unwrap();
    let out = Command::new(ZKFLE)
        .args(["join", "--config", cfg.to_str().unwrap(), "--myid", "1"])
        .args(["--jaas", krb.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Kerberos (GSSAPI)"), "{err}");
    let out = Command::new(ZKFLE)
        .args(["probe", "127.0.0.2:3888", "--jaas"])
        .arg(dir.join("missing.conf"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.conf"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `zkfle replay --target` against a Java server that requires quorum SASL: fixture basic3
/// replayed into sid 1, zkfle impersonating sids 2 and 3, authenticating on the connections it
/// opens and authenticating the server's (the replay's `--config` carries the SASL keys, the
/// JAAS file comes with `--jaas`). The server decides as recorded.
#[test]
fn a_replay_authenticates_as_the_peers_it_impersonates() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "sasl-replay",
        "1:participant,2:participant:external,3:participant:external",
        &["--no-start"],
    );
    let good = require_sasl(&e);
    let out = replay_basic3_into_server_1(
        &e,
        &[
            "--config",
            e.zoo_cfg().to_str().unwrap(),
            "--jaas",
            good.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"match\":true"), "{stdout}");
    // The Java server authenticated zkfle's connections as user zk.
    assert!(
        e.log(1)
            .contains("Successfully authenticated learner: authenticationID=zk"),
        "{}",
        e.log(1)
    );
}
