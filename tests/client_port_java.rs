//! zkfle's client port beside Java servers in one ensemble (scripts/ensemble.sh; 3.8.0 and,
//! where its jars are fetched, 3.9.5): the four-letter words monitoring uses answer as a Java
//! follower's do, so `zkServer.sh status` (`srvr`), `ruok` probes and `mntr` scrapers see zkfle
//! as a healthy follower; and its AdminServer and Prometheus endpoint beside a Java 3.8.0
//! follower's AdminServer.

mod common;
use common::join;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use join::{Ensemble, Native, ZKFLE, cached_jars, lock_loopback, wait_for};

/// Sends `word` to `addr` and reads the answer to its end ("" when nothing listens).
fn ask(addr: &str, word: &[u8]) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(word).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(name))
}

/// `mntr`'s keys.
fn keys(mntr: &str) -> Vec<&str> {
    mntr.lines().filter_map(|l| l.split('\t').next()).collect()
}

#[test]
fn zkfle_answers_four_letter_words_as_a_java_follower() {
    let _l = lock_loopback();
    // A mixed ensemble, as in a rolling upgrade, where 3.9.5's jars are fetched: server 2 runs
    // Debian's 3.8.0, server 3 runs 3.9.5 (all Debian's 3.8.0 otherwise).
    let newer = cached_jars("3.9.5");
    let mixed = newer.is_some();
    let newer = newer.unwrap_or_else(|| "debian".into());
    let e = Ensemble::start_with_jars(
        "fourlw",
        "1:participant:external,2:participant,3:participant",
        &["debian".into(), "debian".into(), newer],
        &["--tick", "200", "--no-start"],
    );
    // The Java servers answer every word, to compare with (zoo.cfg's key wins over a -D flag).
    for sid in [2, 3] {
        let own = e.dir.join(format!("{sid}/zoo.cfg"));
        let text = std::fs::read_to_string(&own).unwrap();
        std::fs::write(
            &own,
            text.replace("4lw.commands.whitelist=srvr", "4lw.commands.whitelist=*"),
        )
        .unwrap();
    }
    // zkfle's zoo.cfg: the ensemble's, with server 1's client address as ensemble.sh gives
    // each Java server its own; the whitelist stays ensemble.sh's (srvr only, Java's default).
    let text = std::fs::read_to_string(e.zoo_cfg()).unwrap();
    let cfg = e.dir.join("zkfle.cfg");
    std::fs::write(
        &cfg,
        format!("{text}\nclientPort=2181\nclientPortAddress=127.0.0.1\n"),
    )
    .unwrap();
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);

    // Java's default whitelist: srvr only, the rest refused in Java's words.
    let n = Native::start_in(&e.dir, &cfg, 1, &[]);
    let srvr = wait_for(
        "zkfle's srvr says follower",
        Duration::from_secs(20),
        || {
            let t = ask("127.0.0.1:2181", b"srvr");
            t.contains("Mode: follower").then_some(t)
        },
    );
    assert!(
        srvr.starts_with(&format!(
            "Zookeeper version: 3.9.5-zkfle-{}, built on zkfle\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{srvr}"
    );
    assert_eq!(
        ask("127.0.0.1:2181", b"ruok"),
        "ruok is not executed because it is not in the whitelist.\n"
    );
    // Debian's own zkServer.sh, as an operator runs it: it finds the client port in the
    // config and asks srvr through Java's FourLetterWordMain.
    let status = std::process::Command::new("/usr/share/zookeeper/bin/zkServer.sh")
        .arg("status")
        .arg(&cfg)
        .output()
        .expect("Debian's zkServer.sh (scripts/zk-env.sh installs the zookeeper package)");
    let said = String::from_utf8_lossy(&status.stdout).into_owned()
        + &String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "zkServer.sh status: {said}");
    assert!(
        said.contains("Mode: follower"),
        "zkServer.sh status: {said}"
    );
    // A client's ConnectRequest is closed unanswered, as by a server that does not serve.
    let mut connect = vec![0, 0, 0, 44];
    connect.extend([0u8; 44]);
    assert_eq!(ask("127.0.0.1:2181", &connect), "");
    drop(n);

    // With `4lw.commands.whitelist=*` in zkfle's zoo.cfg, as in the Java servers' flags.
    let all = e.dir.join("zkfle-4lw.cfg");
    std::fs::write(
        &all,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("4lw.commands.whitelist=srvr", "4lw.commands.whitelist=*"),
    )
    .unwrap();
    if mixed {
        assert!(
            ask("127.0.0.3:2181", b"srvr").starts_with("Zookeeper version: 3.9.5"),
            "server 3 runs 3.9.5"
        );
    }
    // Presenting as the Java follower's release (`--release`), its keys are that follower's.
    let java = (2..=3)
        .map(|s| format!("127.0.0.{s}:2181"))
        .find(|a| ask(a, b"srvr").contains("Mode: follower"))
        .expect("a Java follower");
    let release = field(&ask(&java, b"srvr"), "Zookeeper version: ")
        .and_then(|v| v.split('-').next())
        .expect("the Java follower's version line")
        .to_string();
    let data = e.dir.join("native1");
    let n = Native::start_in(
        &e.dir,
        &all,
        1,
        &["--data-dir", data.to_str().unwrap(), "--release", &release],
    );
    wait_for("zkfle synced again", Duration::from_secs(20), || {
        ask("127.0.0.1:2181", b"srvr")
            .contains("Mode: follower")
            .then_some(())
    });
    assert_eq!(ask("127.0.0.1:2181", b"ruok"), "imok");
    assert_eq!(ask("127.0.0.1:2181", b"isro"), "rw");
    // Same zxid and node count as the Java follower's.
    let same = wait_for("zxid and node count agree", Duration::from_secs(10), || {
        let (z, j) = (ask("127.0.0.1:2181", b"srvr"), ask(&java, b"srvr"));
        let pick = |t: &str| {
            (
                field(t, "Zxid: ").map(str::to_string),
                field(t, "Node count: ").map(str::to_string),
            )
        };
        (pick(&z) == pick(&j) && pick(&z).0.is_some()).then_some((z, j))
    });
    // srvr's lines are Java's, in Java's order.
    let names = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| l.split(':').next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        names(&same.0),
        names(&same.1),
        "{}\n---\n{}",
        same.0,
        same.1
    );
    // mntr: the same keys as the Java follower's, both ways (its gauges and every
    // ServerMetrics family, per-namespace writes included: both wrote /zookeeper/config), and
    // the same node count.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (mine, theirs) = loop {
        let (mine, theirs) = (ask("127.0.0.1:2181", b"mntr"), ask(&java, b"mntr"));
        let only = |a: &str, b: &str| -> Vec<String> {
            keys(a)
                .into_iter()
                .filter(|k| !keys(b).contains(k))
                .map(str::to_string)
                .collect()
        };
        let (zkfle_only, java_only) = (only(&mine, &theirs), only(&theirs, &mine));
        if zkfle_only.is_empty() && java_only.is_empty() {
            break (mine, theirs);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "mntr: zkfle has {zkfle_only:?} that Java's follower has not, and lacks {java_only:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(mine.contains("zk_server_state\tfollower\n"), "{mine}");
    // What zkfle adds while it leads is what a Java leader's mntr has, by name.
    let leader = (2..=3)
        .map(|s| format!("127.0.0.{s}:2181"))
        .find(|a| ask(a, b"srvr").contains("Mode: leader"))
        .expect("a Java leader");
    let leaders = ask(&leader, b"mntr");
    for g in zkfle::output::fourlw::LEADER_GAUGES
        .iter()
        .chain(&["synced_observers"])
    {
        assert!(
            keys(&leaders).contains(&format!("zk_{g}").as_str()),
            "zk_{g} is not in a Java leader's mntr: {leaders}"
        );
    }
    let count = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("zk_znode_count\t"))
            .map(str::to_string)
    };
    assert_eq!(count(&mine), count(&theirs));
    let conf = ask("127.0.0.1:2181", b"conf");
    assert!(
        conf.contains("\nserverId=1\n") && conf.contains("membership: \n"),
        "{conf}"
    );
    // The Java follower's conf has the same keys.
    let conf_keys = |t: &str| -> Vec<String> {
        t.lines()
            .take_while(|l| !l.starts_with("membership"))
            .map(|l| l.split('=').next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(conf_keys(&conf), conf_keys(&ask(&java, b"conf")));

    // doctor reads zkfle's version from its client port: zkfle, with no Java advice.
    let out = std::process::Command::new(ZKFLE)
        .args(["doctor", "--format", "json", "--config"])
        .arg(&all)
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let me = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sid"] == 1)
        .unwrap()
        .clone();
    assert_eq!(
        me["version"],
        format!("zkfle {}", env!("CARGO_PKG_VERSION")),
        "{report}"
    );
    assert_eq!(me["advice"], serde_json::json!([]), "{report}");
    assert_eq!(me["problems"], serde_json::json!([]), "{report}");
    drop(n);
}

/// `GET http://ADDR/commands/NAME`: the JSON body ("" when nothing answers).
/// Presenting as 3.4 (`--release 3.4.14`) among 3.4.14 servers, zkfle's `mntr` is 3.4's: the
/// same keys in the same order as a Java 3.4 follower's, and its tree has 3.4's nodes (no
/// `/zookeeper/config`, which 3.5 added), so `srvr`'s node count is the follower's.
#[test]
fn zkfle_answers_as_a_3_4_follower() {
    let Some(jars) = cached_jars("3.4.14") else {
        return;
    };
    let _l = lock_loopback();
    let e = Ensemble::start_with_jars(
        "fourlw34",
        "1:participant:external,2:participant,3:participant",
        &[jars.clone(), jars.clone(), jars],
        &["--tick", "200", "--no-start"],
    );
    for sid in [2, 3] {
        let own = e.dir.join(format!("{sid}/zoo.cfg"));
        let text = std::fs::read_to_string(&own).unwrap();
        std::fs::write(
            &own,
            text.replace("4lw.commands.whitelist=srvr", "4lw.commands.whitelist=*"),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string(e.zoo_cfg()).unwrap();
    let cfg = e.dir.join("zkfle.cfg");
    std::fs::write(
        &cfg,
        format!("{text}\nclientPort=2181\nclientPortAddress=127.0.0.1\n")
            .replace("4lw.commands.whitelist=srvr", "4lw.commands.whitelist=*"),
    )
    .unwrap();
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    let data = e.dir.join("native1");
    let _n = Native::start_in(
        &e.dir,
        &cfg,
        1,
        &["--data-dir", data.to_str().unwrap(), "--release", "3.4.14"],
    );
    wait_for("zkfle follows", Duration::from_secs(20), || {
        ask("127.0.0.1:2181", b"srvr")
            .contains("Mode: follower")
            .then_some(())
    });
    let java = (2..=3)
        .map(|s| format!("127.0.0.{s}:2181"))
        .find(|a| ask(a, b"srvr").contains("Mode: follower"))
        .expect("a Java follower");
    let theirs = ask(&java, b"mntr");
    assert!(theirs.starts_with("zk_version\t3.4.14"), "{theirs}");
    let mine = ask("127.0.0.1:2181", b"mntr");
    assert_eq!(
        keys(&mine),
        keys(&theirs),
        "zkfle:\n{mine}\nJava:\n{theirs}"
    );
    assert!(mine.contains("zk_server_state\tfollower\n"), "{mine}");
    let same = wait_for("node counts agree", Duration::from_secs(10), || {
        let (z, j) = (ask("127.0.0.1:2181", b"srvr"), ask(&java, b"srvr"));
        let count = |t: &str| field(t, "Node count: ").map(str::to_string);
        (count(&z) == count(&j)).then_some(count(&z))
    });
    assert!(same.is_some());
}

fn admin(addr: &str, name: &str) -> serde_json::Value {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return serde_json::Value::Null;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /commands/{name} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return serde_json::Value::Null;
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{name}: {head}");
    assert!(head.contains("application/json"), "{name}: {head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}: {body}"))
}

fn keys_of(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map_or(Vec::new(), |m| m.keys().cloned().collect());
    k.sort();
    k
}

/// zkfle's AdminServer beside Java 3.8 followers' (Debian's Jetty on their classpath,
/// `ensemble.sh --admin`): every command a monitoring tool reads answers with Java's keys,
/// and the values zkfle and a Java follower both know agree (leader, zxid, node count,
/// state, membership).
#[test]
fn zkfle_answers_admin_server_commands_as_a_java_follower() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "admin",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--admin"],
    );
    e.run(&["wait-stable", "--timeout", "30"]);
    let java = ["127.0.0.2:8080", "127.0.0.3:8080"]
        .into_iter()
        .find(|a| admin(a, "leader")["is_leader"] == false)
        .expect("a Java follower's AdminServer");
    // zkfle's config: the ensemble's for it, with Java's Prometheus provider named.
    let cfg = e.dir.join("zkfle-metrics.cfg");
    std::fs::write(
        &cfg,
        format!(
            "{}\nmetricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort=7000\n",
            std::fs::read_to_string(e.dir.join("external-1.cfg")).unwrap()
        ),
    )
    .unwrap();
    let data = e.dir.join("native1");
    let n = Native::start_in(
        &e.dir,
        &cfg,
        1,
        &["--data-dir", data.to_str().unwrap(), "--release", "3.8.0"],
    );
    let mine = "127.0.0.1:8080";
    wait_for(
        "zkfle's AdminServer says it serves",
        Duration::from_secs(20),
        || {
            let r = admin(mine, "ruok");
            (r["command"] == "ruok" && r["error"].is_null()).then_some(())
        },
    );
    for name in [
        "ruok",
        "leader",
        "server_stats",
        "stats",
        "is_read_only",
        "configuration",
        "dirs",
        "voting_view",
        "zabstate",
        "last_snapshot",
        "connections",
        "watch_summary",
        "watches",
        "observers",
        "dump",
        "hash",
        "initial_configuration",
    ] {
        let (z, j) = (admin(mine, name), admin(java, name));
        assert_eq!(keys_of(&z), keys_of(&j), "{name}:\n{z:#}\n---\n{j:#}");
        assert_eq!(z["command"], name);
        assert!(z["error"].is_null(), "{name}: {z:#}");
    }
    let (z, j) = (admin(mine, "leader"), admin(java, "leader"));
    assert_eq!(z, j, "leader");
    let (z, j) = (admin(mine, "voting_view"), admin(java, "voting_view"));
    for sid in ["1", "2", "3"] {
        for k in ["server_addresses", "election_addresses", "learner_type"] {
            assert_eq!(
                z["current_config"][sid][k], j["current_config"][sid][k],
                "{sid} {k}"
            );
        }
    }
    // Same zxid, node count and state once both have the same data.
    wait_for("stats agree", Duration::from_secs(10), || {
        let (z, j) = (admin(mine, "stats"), admin(java, "stats"));
        (z["node_count"] == j["node_count"]
            && z["server_stats"]["last_processed_zxid"] == j["server_stats"]["last_processed_zxid"])
            .then_some(())
    });
    let (z, j) = (admin(mine, "stats"), admin(java, "stats"));
    assert_eq!(keys_of(&z["server_stats"]), keys_of(&j["server_stats"]));
    assert_eq!(z["server_stats"]["server_state"], "follower");
    let (z, j) = (admin(mine, "zabstate"), admin(java, "zabstate"));
    for k in ["is_leader", "voting", "zabstate", "zab_epoch", "last_zxid"] {
        assert_eq!(z[k], j[k], "zabstate {k}");
    }
    // monitor (mntr): every key zkfle gives is one of Java's, typed as Java's.
    let (z, j) = (admin(mine, "monitor"), admin(java, "monitor"));
    for (k, v) in z.as_object().unwrap() {
        let theirs = &j[k.as_str()];
        assert!(
            !theirs.is_null() || v.is_null(),
            "monitor {k} is not Java's"
        );
        assert_eq!(
            (v.is_string(), v.is_number()),
            (theirs.is_string(), theirs.is_number()),
            "monitor {k}: {v} vs {theirs}"
        );
    }
    assert_eq!(z["server_state"], "follower");
    assert_eq!(z["znode_count"], j["znode_count"]);
    // Names Java does not know, and the command list.
    assert_eq!(
        admin(mine, "nosuch")["error"],
        "Unknown command: nosuch",
        "unknown"
    );
    assert_eq!(admin(mine, "mntr")["command"], "monitor", "an alias");

    // The Prometheus endpoint: Java's families, by the names and kinds the Java follower's
    // monitor lists (a counter by its name, a summary by avg_NAME), valid for promtool.
    let (head, text) = http_get("127.0.0.1:7000", "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let java = admin(java, "monitor");
    let mut families = 0;
    for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = line.split_once(' ').unwrap();
        // Labelled families with no key yet have no samples, and Java's monitor lists none.
        let sampled = text.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{', '_']))
        });
        if name.starts_with("process_") || name == "synced_observers" || !sampled {
            continue;
        }
        // A labelled summary (writes per namespace) by each key: avg_KEY_NAME.
        let labelled: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix("_count{key=\""))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        let keys: Vec<String> = if !labelled.is_empty() {
            labelled.iter().map(|k| format!("avg_{k}_{name}")).collect()
        } else if kind == "summary" {
            vec![format!("avg_{name}")]
        } else {
            vec![name.to_string()]
        };
        for key in keys {
            assert!(
                !java[key.as_str()].is_null(),
                "{name} ({kind}) is not in Java's monitor as {key}"
            );
        }
        families += 1;
    }
    assert!(families > 130, "{families} families");
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value("znode_count"), java["znode_count"].as_f64().unwrap());
    assert_eq!(value("quorum_size"), 3.0);
    assert!(value("looking_count") >= 1.0 && value("election_time_count") >= 1.0);
    assert!(value("follower_sync_time_count") >= 1.0);
    assert_eq!(
        http_get("127.0.0.1:7000", "/").0.split(' ').nth(1),
        Some("404")
    );
    let file = e.dir.join("metrics.txt");
    std::fs::write(&file, &text).unwrap();
    let check = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", file.display()))
        .output()
        .expect("promtool (scripts/test.sh installs Debian's prometheus)");
    // It parses (exit 1 and "error while linting" otherwise); what promtool's lint then says
    // is about Java's own names, which zkfle keeps: counters without `_total`, gauges ending
    // in `_count`, units like `_ms` (exit 3).
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        matches!(check.status.code(), Some(0 | 3)),
        "promtool: {said}"
    );
    for line in said.lines() {
        assert!(
            line.ends_with("counter metrics should have \"_total\" suffix")
                || line.ends_with(
                    "non-histogram and non-summary metrics should not have \"_count\" suffix"
                )
                || line.ends_with("metric names should not contain abbreviated units"),
            "promtool: {line}"
        );
    }
    drop(n);
}

/// `GET PATH` from `addr`: the response's head and body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}
