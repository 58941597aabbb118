//! `zkfle replay --target HOST:PORT` against a real Java ZooKeeper 3.8 server configured as
//! the recorded server: fixture basic3 replayed as sid 1, zkfle impersonating sids 2 and 3.
//! Takes the machine-wide loopback-ensemble lock; the server is stopped by a Drop guard.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const ZKFLE: &str = env!("CARGO_BIN_EXE_zkfle");

struct LoopbackLock(#[allow(dead_code)] File);

fn lock_loopback() -> LoopbackLock {
    let f = File::create(std::env::temp_dir().join("zkfle-loopback-ensemble.lock")).unwrap();
    f.lock().unwrap();
    LoopbackLock(f)
}

fn script(args: &[&str]) -> std::process::Output {
    Command::new(Path::new(ROOT).join("scripts/ensemble.sh"))
        .args(args)
        .output()
        .expect("scripts/ensemble.sh runs")
}

struct Ensemble(PathBuf);

impl Drop for Ensemble {
    fn drop(&mut self) {
        let _ = script(&["stop", self.0.to_str().unwrap()]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            eprintln!("ensemble kept in {}", self.0.display());
        }
    }
}

#[test]
fn basic3_replayed_into_a_java_server_as_sid_1() {
    let _l = lock_loopback();
    let dir = std::env::temp_dir().join(format!("zkfle-replay-java-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let out = script(&[
        "start",
        &d,
        "--servers",
        "1:participant,2:participant:external,3:participant:external",
        "--no-start",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = Ensemble(dir.clone());
    // zkfle listens as 2 and 3 first, then the Java server as 1 starts.
    let capture = Path::new(ROOT).join("fixtures/basic3/capture.pcap");
    let start = Instant::now();
    let mut child = Command::new("timeout")
        .args(["120", ZKFLE, "replay", capture.to_str().unwrap()])
        .args([
            "--as",
            "1",
            "--target",
            "127.0.0.1:3888",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = script(&["start-node", &d, "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}: {stdout}{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["sid"], 1);
    assert_eq!(v["match"], true, "{v}");
    let pairs = |k: &str| -> Vec<(String, i64)> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["state"].as_str().unwrap().to_string(),
                    d["leader"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let expected = vec![("FOLLOWING".to_string(), 3), ("FOLLOWING".to_string(), 2)];
    assert_eq!(pairs("recorded"), expected);
    assert_eq!(pairs("replayed"), expected);
    // The Java server's own log agrees with what the probes saw.
    let log = std::fs::read_to_string(dir.join("1/server.log")).unwrap();
    let logged: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("About to leave FLE instance"))
        .collect();
    assert!(logged.len() >= 2, "{logged:?}");
    assert!(logged[0].contains("leader=3,") && logged[0].contains("FOLLOWING"));
    assert!(logged[1].contains("leader=2,") && logged[1].contains("FOLLOWING"));
    eprintln!("replay took {:?}", start.elapsed());
    drop(e);
}
