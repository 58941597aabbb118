//! zkfle as a Zab follower of real Java ZooKeeper 3.8 leaders (scripts/ensemble.sh), with a
//! tiny Java-free ZooKeeper client for the writes. Serialized with the loopback lock, like
//! tests/join_java.rs; every process is stopped by a Drop guard.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

struct Ensemble {
    dir: PathBuf,
}

impl Ensemble {
    fn start(name: &str, servers: &str, extra: &[&str]) -> Ensemble {
        let dir = std::env::temp_dir().join(format!("zkfle-zab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = Ensemble { dir };
        let d = e.dir.to_str().unwrap().to_string();
        let mut args = vec!["start", &d, "--servers", servers];
        args.extend_from_slice(extra);
        let out = script(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        e
    }

    fn cmd(&self, args: &[&str]) {
        let d = self.dir.to_str().unwrap();
        let mut a = vec![args[0], d];
        a.extend_from_slice(&args[1..]);
        let out = script(&a);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn log(&self, sid: i64) -> String {
        std::fs::read_to_string(self.dir.join(sid.to_string()).join("server.log"))
            .unwrap_or_default()
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let d = self.dir.to_str().unwrap().to_string();
        let _ = script(&["stop", &d]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("ensemble kept in {}", self.dir.display());
        }
    }
}

/// A running `zkfle join` with its data dir, killed (SIGKILL) on drop.
struct Native {
    child: Child,
    events: PathBuf,
    log: PathBuf,
}

impl Native {
    fn start(e: &Ensemble, myid: i64) -> Native {
        let events = e.dir.join(format!("native{myid}.events.jsonl"));
        let log = e.dir.join(format!("native{myid}.log"));
        let logf = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(ZKFLE)
            .args(["join", "--config", e.dir.join("zoo.cfg").to_str().unwrap()])
            .args(["--myid", &myid.to_string()])
            .args(["--events-file", events.to_str().unwrap()])
            .arg("--data-dir")
            .arg(e.dir.join(format!("native{myid}")))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .unwrap();
        Native { child, events, log }
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// A minimal ZooKeeper client: session, create, getData.
struct Zk {
    s: TcpStream,
    xid: i32,
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as i32).to_be_bytes());
    b.extend(s);
}

impl Zk {
    fn connect(addr: &str) -> std::io::Result<Zk> {
        let s = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut zk = Zk { s, xid: 0 };
        let mut b = Vec::new();
        b.extend(0i32.to_be_bytes()); // protocolVersion
        b.extend(0i64.to_be_bytes()); // lastZxidSeen
        b.extend(6000i32.to_be_bytes()); // timeOut
        b.extend(0i64.to_be_bytes()); // sessionId
        put_str(&mut b, &[0u8; 16]); // passwd
        b.push(0); // readOnly
        zk.send(&b)?;
        let r = zk.recv()?;
        if r.len() < 16 || i64::from_be_bytes(r[8..16].try_into().unwrap()) == 0 {
            return Err(std::io::Error::other("no session"));
        }
        Ok(zk)
    }

    fn send(&mut self, body: &[u8]) -> std::io::Result<()> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend(body);
        self.s.write_all(&f)
    }

    fn recv(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = [0u8; 4];
        self.s.read_exact(&mut l)?;
        let mut b = vec![0u8; i32::from_be_bytes(l) as usize];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }

    /// Sends a request; returns (err, body) of its reply (skipping watch events, xid -1).
    fn call(&mut self, op: i32, body: &[u8]) -> std::io::Result<(i32, Vec<u8>)> {
        self.xid += 1;
        let mut b = self.xid.to_be_bytes().to_vec();
        b.extend(op.to_be_bytes());
        b.extend(body);
        self.send(&b)?;
        loop {
            let r = self.recv()?;
            let xid = i32::from_be_bytes(r[0..4].try_into().unwrap());
            if xid == self.xid {
                let err = i32::from_be_bytes(r[12..16].try_into().unwrap());
                return Ok((err, r[16..].to_vec()));
            }
        }
    }

    fn create(&mut self, path: &str, data: &[u8]) -> std::io::Result<i32> {
        let mut b = Vec::new();
        put_str(&mut b, path.as_bytes());
        put_str(&mut b, data);
        b.extend(1i32.to_be_bytes()); // one ACL: ALL world:anyone
        b.extend(31i32.to_be_bytes());
        put_str(&mut b, b"world");
        put_str(&mut b, b"anyone");
        b.extend(0i32.to_be_bytes()); // flags
        Ok(self.call(1, &b)?.0)
    }

    fn get(&mut self, path: &str) -> std::io::Result<Option<Vec<u8>>> {
        let mut b = Vec::new();
        put_str(&mut b, path.as_bytes());
        b.push(0);
        let (err, body) = self.call(4, &b)?;
        if err != 0 || body.len() < 4 {
            return Ok(None);
        }
        let n = i32::from_be_bytes(body[0..4].try_into().unwrap()).max(0) as usize;
        Ok(Some(body[4..4 + n].to_vec()))
    }
}

impl Drop for Zk {
    fn drop(&mut self) {
        self.xid += 1;
        let mut b = self.xid.to_be_bytes().to_vec();
        b.extend((-11i32).to_be_bytes());
        let _ = self.send(&b);
    }
}

fn client(sid: i64) -> String {
    format!("127.0.0.{sid}:2181")
}

/// Creates `paths` through server `sid`, retrying while the ensemble is unavailable.
fn write_all(sid: i64, paths: &[String], timeout: Duration) {
    let start = Instant::now();
    let mut i = 0;
    while i < paths.len() {
        assert!(
            start.elapsed() < timeout,
            "writes through {sid} did not commit ({i} of {})",
            paths.len()
        );
        let Ok(mut zk) = Zk::connect(&client(sid)) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        while i < paths.len() {
            match zk.create(&paths[i], paths[i].as_bytes()) {
                Ok(0) | Ok(-110) => i += 1, // ok, node exists (a retried write)
                _ => {
                    std::thread::sleep(Duration::from_millis(100));
                    break;
                }
            }
        }
    }
}

fn read(sid: i64, path: &str) -> Option<Vec<u8>> {
    Zk::connect(&client(sid)).ok()?.get(path).ok()?
}

fn paths(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/{prefix}{i}")).collect()
}

fn java_classpath() -> String {
    let out = Command::new(Path::new(ROOT).join("scripts/zk-env.sh"))
        .arg("--print")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("classpath:"))
        .skip(1)
        .map(|l| l.trim().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs one of ZooKeeper's own tools on a file.
fn zk_tool(class: &str, args: &[&str]) -> String {
    let out = Command::new("java")
        .args(["-cp", &java_classpath(), class])
        .args(args)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn following(n: &Native, from: usize) -> Option<i64> {
    n.events()
        .get(from..)?
        .iter()
        .rev()
        .find(|v| v["state"] != "LOOKING")
        .filter(|v| v["state"] == "FOLLOWING")
        .and_then(|v| v["leader"].as_i64())
}

/// Scenarios 1, 2 and 5 (small), the log format, leader loss: zkfle (sid 1) joins Java 2 and
/// 3 by SNAP, is counted (writes commit with the Java follower stopped), logs the txns in a
/// file ZooKeeper's TxnLogToolkit reads, rejoins after kill -9 by DIFF, and leaves a killed
/// leader at once and follows the survivor, with which writes keep committing.
#[test]
fn zkfle_is_a_counted_durable_follower() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "follow",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200"],
    );
    e.cmd(&["wait-stable", "--timeout", "30"]);
    let n = Native::start(&e, 1);
    let leader = wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let other = 5 - leader;
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    assert!(n.log().contains("Getting a SNAP"), "fresh zkfle gets SNAP");
    write_all(leader, &paths("a", 5), Duration::from_secs(10));

    // 1. The Java follower stops: writes commit on the leader's and zkfle's ACKs.
    e.cmd(&["stop-node", &other.to_string()]);
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
    e.cmd(&["start-node", &other.to_string()]);
    write_all(leader, &paths("c", 5), Duration::from_secs(15));
    drop(n);
    write_all(leader, &paths("d", 5), Duration::from_secs(10));
    let before = e.log(leader).len();
    let n = Native::start(&e, 1);
    wait_for("zkfle synced again", Duration::from_secs(15), || {
        (count(&n.log(), "synced with leader") >= 2).then_some(())
    });
    let sync = e.log(leader)[before..].to_string();
    assert!(
        sync.contains("Synchronizing with Learner sid: 1 "),
        "{sync}"
    );
    assert!(!sync.contains("Sending snapshot"), "{sync}");
    assert!(count(&n.log(), "Getting a DIFF") >= 1, "{}", n.log());
    e.cmd(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("e", 5), Duration::from_secs(10));

    // Leader loss: zkfle is LOOKING at once, then follows the survivor; writes commit.
    e.cmd(&["start-node", &other.to_string()]);
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
/// and zkfle must not elect A (zkfle's vote carries the higher zxid from its log, and zkfle
/// cannot lead); once B is back the ensemble serves and W is on A.
#[test]
fn no_lost_writes_when_the_java_server_with_them_is_down() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "nolost",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--init-limit", "5"],
    );
    e.cmd(&["wait-stable", "--timeout", "30"]);
    let n = Native::start(&e, 1);
    let b = wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let a = 5 - b;
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    e.cmd(&["stop-node", &a.to_string()]);
    write_all(b, &paths("w", 10), Duration::from_secs(10));
    e.cmd(&["stop-node", &b.to_string()]);
    let alog = e.log(a).len();
    e.cmd(&["start-node", &a.to_string()]);
    // For several seconds, A never serves: it must not lead with its stale data.
    std::thread::sleep(Duration::from_secs(4));
    let since = e.log(a)[alog..].to_string();
    assert!(
        !since.contains("- LEADING"),
        "A led without the writes: {since}"
    );
    assert!(read(a, "/w9").is_none());
    assert!(n.log().contains("zkfle cannot lead") || !n.log().contains("LEADING"));
    e.cmd(&["start-node", &b.to_string()]);
    wait_for("W readable on A", Duration::from_secs(30), || {
        read(a, "/w9")
    });
    assert_eq!(read(b, "/w0").as_deref(), Some(&b"/w0"[..]));
}
