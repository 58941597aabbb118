//! Helpers of the Zab tests against real Java ZooKeeper 3.8 (tests/zab_java*.rs): the Java
//! ensemble (scripts/ensemble.sh) under the loopback lock, `zkfle join` processes, a tiny
//! Java-free ZooKeeper client for the writes, and ZooKeeper's own tools.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// The ensemble, its lock and the scripts are the other Java tests' (tests/common/join.rs).
// Each test binary uses a part of these.
#[allow(unused_imports)]
pub use super::join::{
    Capture, Ensemble, Native, ROOT, ZKFLE, lock_loopback, replay_basic3_into_server_1, status_kb,
    wait_for,
};

pub fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// A minimal ZooKeeper client: session, create, getData.
pub struct Zk {
    pub s: TcpStream,
    pub xid: i32,
}

pub fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as i32).to_be_bytes());
    b.extend(s);
}

impl Zk {
    pub fn connect(addr: &str) -> std::io::Result<Zk> {
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

    pub fn send(&mut self, body: &[u8]) -> std::io::Result<()> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend(body);
        self.s.write_all(&f)
    }

    pub fn recv(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = [0u8; 4];
        self.s.read_exact(&mut l)?;
        let mut b = vec![0u8; i32::from_be_bytes(l) as usize];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }

    /// Sends a request; returns (err, body) of its reply (skipping watch events, xid -1).
    pub fn call(&mut self, op: i32, body: &[u8]) -> std::io::Result<(i32, Vec<u8>)> {
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

    pub fn create(&mut self, path: &str, data: &[u8]) -> std::io::Result<i32> {
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

    /// Creates `paths` (each with `data`), pipelined: up to `window` requests in flight.
    /// Returns how many succeeded (or existed).
    pub fn create_many(
        &mut self,
        paths: &[String],
        data: &[u8],
        window: usize,
    ) -> std::io::Result<usize> {
        let mut sent = 0;
        let mut done = 0;
        let mut ok = 0;
        while done < paths.len() {
            let mut out = Vec::new();
            while sent < paths.len() && sent - done < window {
                self.xid += 1;
                let mut b = self.xid.to_be_bytes().to_vec();
                b.extend(1i32.to_be_bytes());
                put_str(&mut b, paths[sent].as_bytes());
                put_str(&mut b, data);
                b.extend(1i32.to_be_bytes());
                b.extend(31i32.to_be_bytes());
                put_str(&mut b, b"world");
                put_str(&mut b, b"anyone");
                b.extend(0i32.to_be_bytes());
                out.extend((b.len() as i32).to_be_bytes());
                out.extend(b);
                sent += 1;
            }
            self.s.write_all(&out)?;
            let r = self.recv()?;
            if i32::from_be_bytes(r[0..4].try_into().unwrap()) < 0 {
                continue; // a watch event or ping
            }
            let err = i32::from_be_bytes(r[12..16].try_into().unwrap());
            if err == 0 || err == -110 {
                ok += 1;
            }
            done += 1;
        }
        Ok(ok)
    }

    pub fn get(&mut self, path: &str) -> std::io::Result<Option<Vec<u8>>> {
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

impl Zk {
    /// `reconfig` (op 16, ReconfigRequest): incremental with `joining`/`leaving` (comma
    /// separated), any config version. Returns the error code and, on success, the new
    /// config's text.
    pub fn reconfig(
        &mut self,
        joining: Option<&str>,
        leaving: Option<&str>,
    ) -> std::io::Result<(i32, String)> {
        let mut b = Vec::new();
        for s in [joining, leaving, None] {
            match s {
                Some(s) => put_str(&mut b, s.as_bytes()),
                None => b.extend((-1i32).to_be_bytes()),
            }
        }
        b.extend((-1i64).to_be_bytes());
        let (err, body) = self.call(16, &b)?;
        if err != 0 || body.len() < 4 {
            return Ok((err, String::new()));
        }
        let n = i32::from_be_bytes(body[0..4].try_into().unwrap()).max(0) as usize;
        Ok((
            0,
            String::from_utf8_lossy(body.get(4..4 + n).unwrap_or_default()).into_owned(),
        ))
    }
}

/// Runs a reconfig through server `sid`, retrying while the ensemble is unavailable (or a
/// reconfig is in progress); returns the new config's text.
pub fn reconfig(
    sid: i64,
    joining: Option<&str>,
    leaving: Option<&str>,
    timeout: Duration,
) -> String {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < timeout {
        match Zk::connect(&client(sid)).and_then(|mut zk| zk.reconfig(joining, leaving)) {
            Ok((0, text)) => return text,
            other => last = Some(format!("{other:?}")),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("reconfig {joining:?} {leaving:?} through {sid} failed: {last:?}");
}

pub fn client(sid: i64) -> String {
    format!("127.0.0.{sid}:2181")
}

/// Creates `paths` through server `sid`, retrying while the ensemble is unavailable.
pub fn write_all(sid: i64, paths: &[String], timeout: Duration) {
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

/// `path`'s data on server `sid`; None when it has no such node, or when it takes no session
/// or answers no read for 5 s (a server on a busy machine can be slow to, so a failed attempt
/// is made again until then).
pub fn read(sid: i64, path: &str) -> Option<Vec<u8>> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match Zk::connect(&client(sid)).and_then(|mut zk| zk.get(path)) {
            Ok(data) => return data,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(200)),
            Err(_) => return None,
        }
    }
}

pub fn paths(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/{prefix}{i}")).collect()
}

/// The Java ZooKeeper's classpath (scripts/zk-env.sh, asked once per test binary).
pub fn java_classpath() -> String {
    static CP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CP.get_or_init(java_classpath_uncached).clone()
}

fn java_classpath_uncached() -> String {
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
pub fn zk_tool(class: &str, args: &[&str]) -> String {
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

/// Issue 18's scenario with Java servers 2 and 3 and zkfle `n` (sid 1): zkfle follows B;
/// W (`/w0`..`/w9`) commits on B with zkfle's ACKs while A is down; B stops; A restarts, and
/// zkfle, holding W, is elected and leads A until W is readable on A. Returns A's log since its
/// restart.
pub fn zkfle_leads_after_its_leader_stops(e: &Ensemble, n: &Native) -> String {
    let b = wait_synced(n, Duration::from_secs(15));
    let a = 5 - b;
    e.run(&["stop-node", &a.to_string()]);
    write_all(b, &paths("w", 10), Duration::from_secs(10));
    e.run(&["stop-node", &b.to_string()]);
    let alog = e.log(a).len();
    e.run(&["start-node", &a.to_string()]);
    wait_for("W readable on A without B", Duration::from_secs(30), || {
        read(a, "/w9")
    });
    e.log(a)[alog..].to_string()
}

/// The leader of the node's last decision from event `from` on, when it was `state`.
fn last_decision_as(n: &Native, from: usize, state: &str) -> Option<i64> {
    n.events()
        .get(from..)?
        .iter()
        .rev()
        .find(|v| v["state"] != "LOOKING")
        .filter(|v| v["state"] == state)
        .and_then(|v| v["leader"].as_i64())
}

/// The leader of the node's last decision from event `from` on, when it was OBSERVING.
pub fn observing(n: &Native, from: usize) -> Option<i64> {
    last_decision_as(n, from, "OBSERVING")
}

/// The leader of the node's last decision from event `from` on, when it was FOLLOWING.
pub fn following(n: &Native, from: usize) -> Option<i64> {
    last_decision_as(n, from, "FOLLOWING")
}

/// Java servers per `servers` (ensemble.sh's `--servers`; zkfle's sids external), tickTime
/// 200 ms and `extra`, returned once every Java server has decided.
pub fn java_ensemble(name: &str, servers: &str, extra: &[&str]) -> Ensemble {
    let mut args = vec!["--tick", "200"];
    args.extend_from_slice(extra);
    let e = Ensemble::start(name, servers, &args);
    e.run(&["wait-stable", "--timeout", "30"]);
    e
}

/// Waits until zkfle `n` follows a leader (within `within`) and has synced with it (within
/// 10 s more); the leader's sid.
pub fn wait_synced(n: &Native, within: Duration) -> i64 {
    let leader = wait_for("zkfle FOLLOWING", within, || following(n, 0));
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    leader
}

/// The common start of the Zab tests: Java servers 2 and 3 (tickTime 200 ms and `extra`), and
/// zkfle as sid 1 following their leader, synced. (ensemble, zkfle, the leader's sid).
pub fn zkfle_beside_two_java(name: &str, extra: &[&str]) -> (Ensemble, Native, i64) {
    let e = java_ensemble(
        name,
        "1:participant:external,2:participant,3:participant",
        extra,
    );
    let n = Native::start(&e, 1, &[]);
    let leader = wait_synced(&n, Duration::from_secs(15));
    (e, n, leader)
}

/// A txn no Java server has: `create /injected` at `zxid` (a leader that logged a proposal and
/// died before sending it leaves one).
pub fn injected_txn(zxid: i64) -> Vec<u8> {
    create_txn(zxid, b"/injected", b"x")
}

/// `create path` with `data` at `zxid`, open ACL: a valid txn for ZooKeeper's tools.
pub fn create_txn(zxid: i64, path: &[u8], data: &[u8]) -> Vec<u8> {
    let h = zkfle::wire::quorum::TxnHeader {
        client_id: 0x1234,
        cxid: 1,
        zxid,
        time: 0,
        op: 1,
    };
    let mut t = h.encode().to_vec();
    put_str(&mut t, path);
    put_str(&mut t, data);
    t.extend(1i32.to_be_bytes());
    t.extend(31i32.to_be_bytes());
    put_str(&mut t, b"world");
    put_str(&mut t, b"anyone");
    t.push(0);
    t.extend(0i32.to_be_bytes());
    t
}
