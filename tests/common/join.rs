//! The one harness of the tests against real Java servers (join, probe, replay, versions,
//! java_wire, and through tests/common/zab.rs the Zab tests): the loopback-ensemble lock, a
//! Java ensemble run by scripts/ensemble.sh and stopped on drop, a `zkfle join` process killed
//! on drop, and `wait_for`, the one way to wait for a condition.
//!
//! Use it with `mod common;` and `use common::join;`, as every helper of `tests/common/`
//! (tests/common/zab.rs and tests/common/java.rs re-export its parts).
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

/// A Java ensemble in a temp dir, stopped on drop. The caller holds [`lock_loopback`] for
/// as long as it lives. Dropping it keeps the directory (and prints its path) when the test
/// failed or `KEEP_WORKDIR=1`.
pub struct Ensemble {
    pub dir: PathBuf,
    /// `None`: the script sees the test's environment. `Some(jars)`: the script's ZK_* variables
    /// are cleared, and `ZK_JARS` is `jars` when given (the versions tests pin each server's jars).
    pinned_jars: Option<Option<String>>,
}

/// Runs `scripts/ensemble.sh ARGS` in the test's environment.
pub fn script(args: &[&str]) -> std::process::Output {
    script_with(args, None)
}

fn script_with(args: &[&str], pinned_jars: Option<&Option<String>>) -> std::process::Output {
    let mut c = Command::new(Path::new(ROOT).join("scripts/ensemble.sh"));
    c.args(args);
    if let Some(jars) = pinned_jars {
        for v in [
            "ZK_CLASSPATH",
            "ZK_VERSION",
            "ZK_LOG_BACKEND",
            "ZK_HOME",
            "ZK_JARS",
        ] {
            c.env_remove(v);
        }
        if let Some(j) = jars {
            c.env("ZK_JARS", j);
        }
    }
    c.output().expect("scripts/ensemble.sh runs")
}

impl Ensemble {
    pub fn start(name: &str, servers: &str, extra: &[&str]) -> Ensemble {
        Ensemble::start_pinned(name, servers, extra, None)
    }

    /// An ensemble whose server `i + 1` runs `jars[i]` (`debian`: the installed 3.8.0), the
    /// script's environment cleared of ZK_* variables (servers listed as external in
    /// `servers` are not started).
    pub fn start_with_jars(name: &str, servers: &str, jars: &[String], extra: &[&str]) -> Ensemble {
        let mut args: Vec<String> = Vec::new();
        for (i, j) in jars.iter().enumerate() {
            args.push("--jars".into());
            args.push(format!("{}={j}", i + 1));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let default_jars = jars.first().filter(|j| *j != "debian").cloned();
        Ensemble::start_pinned(name, servers, &args, Some(default_jars))
    }

    fn start_pinned(
        name: &str,
        servers: &str,
        extra: &[&str],
        pinned_jars: Option<Option<String>>,
    ) -> Ensemble {
        let dir =
            std::env::temp_dir().join(format!("zkfle-ensemble-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The guard exists before anything runs, so a half-started ensemble is stopped too.
        let e = Ensemble { dir, pinned_jars };
        let d = e.dir.to_str().unwrap().to_string();
        let mut args = vec!["start", &d, "--servers", servers];
        args.extend_from_slice(extra);
        let out = script_with(&args, e.pinned_jars.as_ref());
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
        script_with(&a, self.pinned_jars.as_ref())
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
        self.wait_stable_within(30);
    }

    /// Waits up to `secs` seconds for every server to have decided (`ensemble.sh wait-stable`).
    pub fn wait_stable_within(&self, secs: u32) {
        let out = self.cmd(&["wait-stable", "--timeout", &secs.to_string()]);
        assert!(
            out.status.success(),
            "not stable: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Path of server `sid`'s log.
    pub fn log_path(&self, sid: i64) -> PathBuf {
        self.dir.join(sid.to_string()).join("server.log")
    }

    /// Server `sid`'s whole log so far.
    pub fn log(&self, sid: i64) -> String {
        std::fs::read(self.log_path(sid))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// A mark for [`Ensemble::log_since`]: the log's current length.
    pub fn log_mark(&self, sid: i64) -> usize {
        std::fs::metadata(self.log_path(sid)).map_or(0, |m| m.len() as usize)
    }

    /// What server `sid` logged after `mark`.
    pub fn log_since(&self, sid: i64, mark: usize) -> String {
        let log = std::fs::read(self.log_path(sid)).unwrap_or_default();
        String::from_utf8_lossy(log.get(mark..).unwrap_or_default()).into_owned()
    }

    /// Waits up to `timeout` for a line logged after `mark` that contains every one of
    /// `needles`; returns it.
    pub fn wait_log(
        &self,
        sid: i64,
        mark: usize,
        needles: &[&str],
        timeout: Duration,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.log_since(sid, mark);
            if let Some(line) = text.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                return Some(line.to_string());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
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
        let out = self.cmd(&["stop"]);
        if !out.status.success() {
            eprintln!(
                "ensemble.sh stop {} failed:\n{}{}",
                self.dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if std::thread::panicking() || std::env::var("KEEP_WORKDIR").as_deref() == Ok("1") {
            eprintln!("ensemble kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// With `ZKFLE_DOCS_RECORD` set (scripts/docs-record.sh), keeps `text` as
/// `docs/recorded/NAME.txt`, headed by `what` ran and when: the docs show its lines, and
/// tests/docs.rs checks them for this recording's shape.
pub fn record_for_docs(name: &str, what: &str, text: &str) {
    if std::env::var_os("ZKFLE_DOCS_RECORD").is_none() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/recorded")
        .join(format!("{name}.txt"));
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let text = format!(
        "# {what}, {date}; recorded with ZKFLE_DOCS_RECORD=1 (scripts/docs-record.sh)\n{text}"
    );
    std::fs::write(&path, text).unwrap();
    eprintln!("recorded {}", path.display());
}

/// A running `zkfle join`, killed (SIGKILL) on drop. Its events and log are files in the
/// ensemble's directory; the log is appended to, so a restart keeps the earlier run's lines.
pub struct Native {
    pub child: Child,
    pub events: PathBuf,
    pub log: PathBuf,
}

impl Native {
    /// `zkfle join` of the ensemble's zoo.cfg as `myid`, a voter with its data directory
    /// `native<myid>`, then `extra` arguments.
    pub fn start(e: &Ensemble, myid: i64, extra: &[&str]) -> Native {
        let data = e.dir.join(format!("native{myid}"));
        let mut args = vec!["--data-dir", data.to_str().unwrap()];
        args.extend_from_slice(extra);
        Native::spawn(&e.dir, &e.zoo_cfg(), myid, &args, &[])
    }

    /// As [`Native::start`], run through `wrapper` (a command and its arguments, such as
    /// `prlimit --nofile=64:64`).
    pub fn start_wrapped(e: &Ensemble, myid: i64, wrapper: &[&str]) -> Native {
        let data = e.dir.join(format!("native{myid}"));
        let args = ["--data-dir", data.to_str().unwrap()];
        Native::spawn(&e.dir, &e.zoo_cfg(), myid, &args, wrapper)
    }

    /// `zkfle join` of `cfg` as `myid`, its files in `dir`; with `extra` arguments (none:
    /// a voter with its data directory `dir/native<myid>`).
    pub fn start_in(dir: &Path, cfg: &Path, myid: i64, extra: &[&str]) -> Native {
        if extra.is_empty() {
            let data = dir.join(format!("native{myid}"));
            Native::spawn(dir, cfg, myid, &["--data-dir", data.to_str().unwrap()], &[])
        } else {
            Native::spawn(dir, cfg, myid, extra, &[])
        }
    }

    fn spawn(dir: &Path, cfg: &Path, myid: i64, args: &[&str], wrapper: &[&str]) -> Native {
        let events = dir.join(format!("native{myid}.events.jsonl"));
        let log = dir.join(format!("native{myid}.log"));
        let logf = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut c = Command::new(program);
                c.args(wrapper_args).arg(ZKFLE);
                c
            }
            None => Command::new(ZKFLE),
        };
        let child = command
            .args(["join", "--config", cfg.to_str().unwrap()])
            .args(["--myid", &myid.to_string()])
            .args(["--events-file", events.to_str().unwrap()])
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .unwrap();
        Native { child, events, log }
    }

    /// Waits until the node's events include a decision `(state, leader)`; returns its index.
    pub fn wait_decision(&self, state: &str, leader: i64) -> usize {
        wait_for(
            &format!("native {state} {leader}"),
            Duration::from_secs(20),
            || self.events().iter().position(|v| decided(v, state, leader)),
        )
    }

    /// Keeps the node's log so far for the docs ([`record_for_docs`]).
    pub fn record_for_docs(&self, name: &str, what: &str) {
        record_for_docs(
            name,
            &format!("zkfle join's log (RUST_LOG=info) in {what}"),
            &self.log(),
        );
    }

    /// The node's log (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Peak resident set (VmHWM) so far, in kB.
    pub fn peak_rss_kb(&self) -> u64 {
        status_kb(self.child.id(), "VmHWM:")
    }

    /// Resident set (VmRSS) now, in kB.
    pub fn rss_kb(&self) -> u64 {
        status_kb(self.child.id(), "VmRSS:")
    }

    /// Sends `signal` (e.g. "-STOP", "-CONT") to the node.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {signal} zkfle");
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `/proc/PID/status` value in kB.
pub fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

impl Drop for Native {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (polling every 50 ms) until `f` gives a value; fails the test after `timeout`.
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

/// tcpdump of the election and quorum ports (2888, 3888) of some loopback hosts, while a
/// test runs (other tests that start servers wait for the loopback lock).
pub struct Capture {
    child: std::process::Child,
    path: PathBuf,
}

impl Capture {
    /// Starts capturing to `path` the traffic of `hosts` (a tcpdump host expression such as
    /// `127.0.0.2 or host 127.0.0.3`); returns once tcpdump listens.
    pub fn start(path: &Path, hosts: &str) -> Capture {
        let err = path.with_extension("err");
        let child = Command::new("tcpdump")
            // Immediate mode: without it the kernel hands packets over in blocks, and the
            // last block (up to a second of traffic) is lost when tcpdump is interrupted.
            .args(["-i", "lo", "-s", "0", "-U", "-n", "--immediate-mode", "-w"])
            .arg(path)
            .arg(format!(
                "tcp and (port 2888 or port 3888) and (host {hosts})"
            ))
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("tcpdump (scripts/test.sh installs it)");
        wait_for("tcpdump listening", Duration::from_secs(10), || {
            std::fs::read_to_string(&err)
                .ok()?
                .contains("listening on")
                .then_some(())
        });
        Capture {
            child,
            path: path.to_path_buf(),
        }
    }

    /// Stops the capture (SIGINT: tcpdump writes what it has) and returns its file.
    pub fn stop(mut self) -> PathBuf {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        self.path.clone()
    }
}

/// Where a test run is kept as a fixture: `ZKFLE_RECORD_DIR`, set by
/// `scripts/record-zkfle-fixture.sh`, which runs one test with it and makes the fixture.
pub fn recording_dir() -> Option<PathBuf> {
    std::env::var_os("ZKFLE_RECORD_DIR").map(PathBuf::from)
}

impl Capture {
    /// Stops the capture and, when [`recording_dir`] is set, copies there the capture
    /// (`capture.pcap`), the ensemble's shared `zoo.cfg`, every Java server's log
    /// (`java.<sid>.log`) and every zkfle's (`zkfle.<sid>.log`, the `native<sid>.log` files
    /// in the ensemble's directory and its subdirectories). Returns the capture's path.
    pub fn stop_and_keep(self, e: &Ensemble) -> PathBuf {
        let pcap = self.stop();
        let Some(out) = recording_dir() else {
            return pcap;
        };
        std::fs::create_dir_all(&out).unwrap();
        std::fs::copy(&pcap, out.join("capture.pcap")).unwrap();
        std::fs::copy(e.zoo_cfg(), out.join("zoo.cfg")).unwrap();
        let mut dirs = vec![e.dir.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name.parse::<i64>().is_ok() && path.join("server.log").is_file() {
                        std::fs::copy(
                            path.join("server.log"),
                            out.join(format!("java.{name}.log")),
                        )
                        .unwrap();
                    }
                    dirs.push(path);
                } else if let Some(sid) = name
                    .strip_prefix("native")
                    .and_then(|n| n.strip_suffix(".log"))
                    .filter(|n| n.parse::<i64>().is_ok())
                {
                    std::fs::copy(&path, out.join(format!("zkfle.{sid}.log"))).unwrap();
                }
            }
        }
        pcap
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `zkfle replay` of fixture basic3 as sid 1 (`--format json`) into Java server 1 of `e`, a
/// `--no-start` ensemble with 2 and 3 external: zkfle listens as 2 and 3 first, then server 1
/// starts. `extra`: more replay arguments (a `--config`, security flags).
pub fn replay_basic3_into_server_1(e: &Ensemble, extra: &[&str]) -> std::process::Output {
    let capture = Path::new(ROOT).join("fixtures/basic3/capture.pcap");
    let child = Command::new("timeout")
        .args(["120", ZKFLE, "replay", capture.to_str().unwrap()])
        .args([
            "--as",
            "1",
            "--target",
            "127.0.0.1:3888",
            "--format",
            "json",
        ])
        .args(["--wait-target", "60"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    e.start_node(1);
    child.wait_with_output().unwrap()
}
