//! Helpers for the tests against real Java servers (join, probe, replay, and through
//! tests/common/zab.rs the Zab tests): the loopback-ensemble lock, a Java ensemble run by
//! scripts/ensemble.sh and stopped on drop, and a `zkfle join` process killed on drop.
//!
//! Include it with `#[path = "common/join.rs"] mod join;`.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub const ZKFLE: &str = env!("CARGO_BIN_EXE_zkfle");

/// Holds the machine-wide lock for loopback ensembles.
pub struct LoopbackLock(#[allow(dead_code)] File);

pub fn lock_loopback() -> LoopbackLock {
    let f = File::create(std::env::temp_dir().join("zkfle-loopback-ensemble.lock")).unwrap();
    f.lock().unwrap();
    LoopbackLock(f)
}

/// A Java ensemble in a temp dir, stopped on drop.
pub struct Ensemble {
    pub dir: PathBuf,
}

pub fn script(args: &[&str]) -> std::process::Output {
    Command::new(Path::new(ROOT).join("scripts/ensemble.sh"))
        .args(args)
        .output()
        .expect("scripts/ensemble.sh runs")
}

impl Ensemble {
    pub fn start(name: &str, servers: &str, extra: &[&str]) -> Ensemble {
        let dir =
            std::env::temp_dir().join(format!("zkfle-ensemble-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = Ensemble { dir };
        let d = e.dir.to_str().unwrap().to_string();
        let mut args = vec!["start", &d, "--servers", servers];
        args.extend_from_slice(extra);
        let out = script(&args);
        assert!(
            out.status.success(),
            "ensemble start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        e
    }

    pub fn cmd(&self, args: &[&str]) -> std::process::Output {
        let d = self.dir.to_str().unwrap();
        let mut a = vec![args[0], d];
        a.extend_from_slice(&args[1..]);
        script(&a)
    }

    /// Runs an ensemble.sh command on this ensemble and asserts that it succeeded.
    pub fn run(&self, args: &[&str]) {
        let out = self.cmd(args);
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The pid of Java server `sid`.
    pub fn pid(&self, sid: i64) -> String {
        std::fs::read_to_string(self.dir.join(format!("{sid}/pid")))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Sends `signal` (e.g. "-STOP", "-CONT", "-9") to Java server `sid`.
    pub fn signal(&self, sid: i64, signal: &str) {
        let ok = Command::new("kill")
            .args([signal, &self.pid(sid)])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {signal} {sid}");
    }

    /// Which Java server of `sids` leads (from its log's last state line).
    pub fn leader(&self, sids: &[i64]) -> Option<i64> {
        sids.iter().copied().find(|s| {
            self.log(*s)
                .lines()
                .rev()
                .find(|l| {
                    l.ends_with("- LEADING")
                        || l.ends_with("- FOLLOWING")
                        || l.ends_with("- LOOKING")
                })
                .is_some_and(|l| l.ends_with("- LEADING"))
        })
    }

    pub fn wait_stable(&self) {
        let out = self.cmd(&["wait-stable", "--timeout", "30"]);
        assert!(
            out.status.success(),
            "not stable: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    pub fn log(&self, sid: i64) -> String {
        std::fs::read_to_string(self.dir.join(sid.to_string()).join("server.log"))
            .unwrap_or_default()
    }

    /// Lines of Java's `About to leave FLE instance: leader=L, ..., my state=S` after `skip` bytes.
    pub fn decisions(&self, sid: i64, skip: usize) -> Vec<(i64, String)> {
        let log = self.log(sid);
        log.get(skip..)
            .unwrap_or("")
            .lines()
            .filter_map(|l| {
                let rest = l.split("About to leave FLE instance: leader=").nth(1)?;
                let leader = rest.split(',').next()?.parse().ok()?;
                let state = rest.rsplit("my state=").next()?.trim().to_string();
                Some((leader, state))
            })
            .collect()
    }

    /// The last decision `sid` logged: (leader, state).
    pub fn last_decision(&self, sid: i64) -> Option<(i64, String)> {
        self.decisions(sid, 0).pop()
    }

    /// How many times server `sid` went LOOKING (QuorumPeer's `- LOOKING` line).
    pub fn lookings(&self, sid: i64) -> usize {
        self.log(sid)
            .lines()
            .filter(|l| l.trim_end().ends_with("] - LOOKING"))
            .count()
    }

    pub fn zoo_cfg(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }

    /// Appends `lines` to the shared zoo.cfg (the one `zkfle join` reads) and to every
    /// server's own zoo.cfg (which embeds the shared part). Only before the servers start
    /// (`--no-start`).
    pub fn append_config(&self, lines: &str) {
        use std::io::Write;
        let mut paths = vec![self.zoo_cfg()];
        for entry in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let p = entry.path().join("zoo.cfg");
            if entry.path().is_dir() && p.exists() {
                paths.push(p);
            }
        }
        for p in paths {
            let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
            f.write_all(lines.as_bytes()).unwrap();
        }
    }

    /// Starts server `sid` of a `--no-start` ensemble (returns once it logged a state).
    pub fn start_node(&self, sid: i64) {
        let out = self.cmd(&["start-node", &sid.to_string()]);
        assert!(
            out.status.success(),
            "start-node {sid}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until Java server `sid` logged a decision `(leader, state)` after `skip` bytes.
    pub fn wait_decision(&self, sid: i64, skip: usize, leader: i64, state: &str) {
        wait_for(
            &format!("Java {sid} {state} {leader}"),
            Duration::from_secs(20),
            || {
                self.decisions(sid, skip)
                    .iter()
                    .any(|(l, s)| *l == leader && s == state)
                    .then_some(())
            },
        );
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let _ = self.cmd(&["stop"]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("ensemble kept in {}", self.dir.display());
        }
    }
}

/// A running `zkfle join`, killed on drop.
pub struct Native {
    pub child: Child,
    pub events: PathBuf,
}

impl Native {
    pub fn start(e: &Ensemble, myid: i64, extra: &[&str]) -> Native {
        let events = e.dir.join(format!("native{myid}.events.jsonl"));
        let log = File::create(e.dir.join(format!("native{myid}.log"))).unwrap();
        let child = Command::new(ZKFLE)
            .args(["join", "--config", e.zoo_cfg().to_str().unwrap()])
            .args(["--myid", &myid.to_string()])
            .args(["--events-file", events.to_str().unwrap()])
            .args([
                "--data-dir",
                e.dir.join(format!("native{myid}")).to_str().unwrap(),
            ])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Native { child, events }
    }

    /// Waits until the node's events include a decision `(state, leader)`; returns its index.
    pub fn wait_decision(&self, state: &str, leader: i64) -> usize {
        wait_for(
            &format!("native {state} {leader}"),
            Duration::from_secs(20),
            || self.events().iter().position(|v| decided(v, state, leader)),
        )
    }

    /// The node's log (stderr) so far.
    pub fn log(&self) -> String {
        let name = self.events.file_name().unwrap().to_str().unwrap();
        let log = name.replace(".events.jsonl", ".log");
        std::fs::read_to_string(self.events.with_file_name(log)).unwrap_or_default()
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn decided(ev: &Value, state: &str, leader: i64) -> bool {
    ev["state"] == state && ev["leader"] == leader
}

/// The jars of ZooKeeper `version` for `scripts/ensemble.sh --jars N=...` (`debian` for
/// 3.8.0), or `None` after printing `SKIPPED: why` (on stdout, for scripts/matrix.sh, and
/// stderr) when the version is not on this machine or is listed in ZKFLE_SKIP_VERSIONS.
/// Tests never download: scripts/test.sh fetches first.
pub fn cached_jars(version: &str) -> Option<String> {
    let skip = |why: String| {
        println!("SKIPPED: {why}");
        eprintln!("SKIPPED: {why}");
        None
    };
    if std::env::var("ZKFLE_SKIP_VERSIONS")
        .unwrap_or_default()
        .split([',', ' '])
        .any(|v| v == version)
    {
        return skip(format!("ZooKeeper {version} listed in ZKFLE_SKIP_VERSIONS"));
    }
    let out = Command::new(Path::new(ROOT).join("scripts/zk-fetch.sh"))
        .args(["--cached", version])
        .output()
        .expect("scripts/zk-fetch.sh runs");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        return skip(format!(
            "ZooKeeper {version} not fetched on this machine (run scripts/zk-fetch.sh {version}; scripts/test.sh does)"
        ));
    }
    if text == "debian" && !Path::new("/usr/share/java/zookeeper.jar").exists() {
        return skip(format!(
            "ZooKeeper {version}: Debian package zookeeper not installed"
        ));
    }
    Some(text)
}

/// `--jars N=JARS` for servers 1..=n, for `Ensemble::start`'s extra arguments.
pub fn jars_args(jars: &str, n: i64) -> Vec<String> {
    (1..=n)
        .flat_map(|sid| ["--jars".to_string(), format!("{sid}={jars}")])
        .collect()
}
