//! `zkfle doctor` against a real Java ZooKeeper 3.8 ensemble (scripts/ensemble.sh): a healthy
//! ensemble is healthy (exit 0) and logs no error because of it; after `zkfle repro
//! port-out-of-range` and `bad-config-server-id` have broken servers 2 and 3, those are
//! flagged with the client port answering and the election listener / receiver dead (exit 1).

mod common;
use common::join;

use std::process::Command;

use join::{Ensemble, ZKFLE, lock_loopback};
use serde_json::Value;

fn doctor(args: &[&str]) -> (i32, Value) {
    let out = Command::new(ZKFLE)
        .args(["doctor", "--format", "json", "--timeout", "2"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn errors_logged(e: &Ensemble, sid: i64) -> usize {
    e.log(sid)
        .lines()
        .filter(|l| l.contains(" - ERROR "))
        .count()
}

fn server(report: &Value, sid: i64) -> &Value {
    report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sid"] == sid)
        .unwrap_or_else(|| panic!("sid {sid} in {report}"))
}

#[test]
fn healthy_then_a_dead_listener_and_a_dead_receiver() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "doctor",
        "1:participant,2:participant,3:participant",
        &["--tick", "200"],
    );
    e.wait_stable();
    let cfg = e.zoo_cfg();
    let cfg = cfg.to_str().unwrap();
    let errors_before: Vec<usize> = (1..=3).map(|s| errors_logged(&e, s)).collect();

    // One address is enough: the others come from the config its answer carries.
    let (code, report) = doctor(&["127.0.0.1:3888"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["healthy"], true, "{report}");
    let servers = report["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{report}");
    let leader = servers[0]["leader"].clone();
    for (i, s) in servers.iter().enumerate() {
        let sid = i as i64 + 1;
        assert_eq!(s["sid"], sid, "{s}");
        assert_eq!(s["address"], format!("127.0.0.{sid}:3888"));
        assert_eq!(s["leader"], leader, "{s}");
        let want = if leader == sid {
            "LEADING"
        } else {
            "FOLLOWING"
        };
        assert_eq!(s["state"], want, "{s}");
        assert_eq!(s["problems"], serde_json::json!([]), "{s}");
        assert_eq!(s["version"], "3.8.0", "{s}");
        assert!(!s["advice"].as_array().unwrap().is_empty(), "{s}");
    }
    let (code, by_config) = doctor(&["--config", cfg]);
    assert_eq!(code, 0, "{by_config}");
    assert_eq!(by_config["servers"], report["servers"]);
    let text = Command::new(ZKFLE)
        .args(["doctor", "--config", cfg])
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("healthy: 3 server(s)"), "{text}");
    // Each piece of advice once, naming the servers it concerns.
    let advice = text.split("advice:\n").nth(1).unwrap_or_default();
    let lines: Vec<&str> = advice.lines().filter(|l| l.starts_with("  ")).collect();
    let unique: std::collections::BTreeSet<&str> = lines.iter().copied().collect();
    assert!(!lines.is_empty() && unique.len() == lines.len(), "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("  127.0.0.1:3888, 127.0.0.2:3888, 127.0.0.3:3888: ")),
        "{text}"
    );

    // A config whose election port for server 2 is a typo: the config is wrong, not the
    // server, and the ensemble still has three members.
    let typo = e.dir.join("typo.cfg");
    std::fs::write(
        &typo,
        std::fs::read_to_string(cfg)
            .unwrap()
            .replace("127.0.0.2:2888:3888", "127.0.0.2:2888:38888"),
    )
    .unwrap();
    let (code, report) = doctor(&["--config", typo.to_str().unwrap()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["servers"].as_array().unwrap().len(), 3, "{report}");
    let p = server(&report, 2)["problems"][0].as_str().unwrap();
    assert!(
        p.contains("127.0.0.2:38888") && p.contains("the config given is wrong"),
        "{p}"
    );
    assert!(!p.contains("restart the server"), "{p}");
    // Nothing the doctor sent was logged as an error.
    let errors_after: Vec<usize> = (1..=3).map(|s| errors_logged(&e, s)).collect();
    assert_eq!(
        errors_before, errors_after,
        "ERROR lines logged during doctor"
    );

    for (name, sid) in [("port-out-of-range", 2), ("bad-config-server-id", 3)] {
        let out = Command::new(ZKFLE)
            .args(["repro", name, "--destructive", "--timeout", "1.5"])
            .args(["--target", &format!("127.0.0.{sid}:3888")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: vulnerable");
    }
    let (code, report) = doctor(&["--config", cfg]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["healthy"], false);
    let listener = server(&report, 2);
    assert!(listener["state"].is_null(), "{listener}");
    let p = listener["problems"][0].as_str().unwrap();
    assert!(
        p.contains("client port 127.0.0.2:2181 answers") && p.contains("election listener is dead"),
        "{p}"
    );
    let receiver = server(&report, 3);
    let p = receiver["problems"][0].as_str().unwrap();
    assert!(p.contains("election receiver thread is dead"), "{p}");
    assert_eq!(server(&report, 1)["problems"], serde_json::json!([]));
}
