//! Issue 6 scenarios 4 to 6 against real Java ZooKeeper 3.8: five nodes with two zkfle
//! followers; a fresh zkfle streaming a 50 MB SNAP in bounded memory (with its first leader
//! killed mid-sync); zkfle killed (-9) under load, a stalled (SIGSTOPped) Java leader, and a
//! TRUNC from a live leader; and a fake leader written here (handshake, then garbage, a stall,
//! a refused port, a snapshot cut short). Every test holds the loopback lock
//! (`$TMPDIR/zkfle-loopback-ensemble.lock`): the addresses are fixed. Helpers:
//! tests/common/zab.rs.

mod common;
use common::zab;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zab::*;
use zkfle::wire::quorum::{LearnerInfo, PROTOCOL_VERSION, QuorumPacket, ptype};

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The zxids in zkfle's logs, oldest first, checked to be a gap-free history after its
/// snapshot: +1 within an epoch, counter 1 at the start of a newer epoch. Also runs
/// TxnLogToolkit on every log file (no CRC errors) and SnapshotFormatter on every snapshot
/// (read to its end without an exception). Returns the zxids and the dumps.
fn check_log(v2: &Path) -> (Vec<i64>, String) {
    let snap = files(v2, "snapshot.")
        .iter()
        .filter_map(|p| i64::from_str_radix(p.extension()?.to_str()?, 16).ok())
        .max();
    let mut zxids = Vec::new();
    let mut dumps = String::new();
    for l in files(v2, "log.") {
        let (entries, torn) = zkfle::storage::scan_log(&l).unwrap();
        assert_eq!(torn, None, "{} has a torn entry", l.display());
        zxids.extend(entries.iter().map(|(z, _)| *z));
        let d = zk_tool(
            "org.apache.zookeeper.server.persistence.TxnLogToolkit",
            &["--dump", l.to_str().unwrap()],
        );
        assert!(!d.contains("CRC ERROR"), "{d}");
        dumps.push_str(&d);
    }
    for p in files(v2, "snapshot.") {
        let d = zk_tool(
            "org.apache.zookeeper.server.SnapshotFormatter",
            &[p.to_str().unwrap()],
        );
        assert!(
            !d.contains("Exception") && d.contains("/zookeeper"),
            "{}: {d}",
            p.display()
        );
    }
    let mut prev = snap;
    for z in &zxids {
        if let Some(p) = prev {
            let ok = if z >> 32 == p >> 32 {
                *z == p + 1
            } else {
                z >> 32 > p >> 32 && z & 0xffff_ffff == 1
            };
            assert!(
                ok,
                "log gap or disorder: 0x{p:x} then 0x{z:x} in {zxids:x?}"
            );
        }
        prev = Some(*z);
    }
    (zxids, dumps)
}

/// Scenario 4: five voters, zkfle 1 and 2 (the lowest sids) beside Java 3, 4 and 5. With two
/// Java servers stopped, the Java leader and the two zkfle nodes are a quorum of 3 and keep
/// committing writes.
#[test]
fn five_voters_two_zkfle_keep_committing_with_one_java_server() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "five",
        "1:participant:external,2:participant:external,3:participant,4:participant,5:participant",
        &["--tick", "200"],
    );
    e.run(&["wait-stable", "--timeout", "30"]);
    let n1 = Native::start(&e, 1, &[]);
    let n2 = Native::start(&e, 2, &[]);
    for n in [&n1, &n2] {
        wait_for("zkfle synced", Duration::from_secs(20), || {
            n.log().contains("synced with leader").then_some(())
        });
    }
    let leader = following(&n1, 0).unwrap();
    assert_eq!(following(&n2, 0), Some(leader));
    write_all(leader, &paths("a", 5), Duration::from_secs(10));
    for s in [3, 4, 5].into_iter().filter(|s| *s != leader) {
        e.run(&["stop-node", &s.to_string()]);
    }
    write_all(leader, &paths("b", 20), Duration::from_secs(15));
    assert_eq!(read(leader, "/b19").as_deref(), Some(&b"/b19"[..]));
    assert_eq!(read(leader, "/a4").as_deref(), Some(&b"/a4"[..]));
    let llog = e.log(leader);
    for sid in [1, 2] {
        assert!(
            llog.contains(&format!("Synchronizing with Learner sid: {sid} ")),
            "leader synced sid {sid}"
        );
    }
    for n in [&n1, &n2] {
        assert!(!n.log().contains("follow session ended"), "{}", n.log());
    }
    for sid in [1, 2] {
        let (zxids, dump) = check_log(&e.dir.join(format!("native{sid}/version-2")));
        assert!(zxids.len() >= 20, "{zxids:x?}");
        assert!(dump.contains("create /b19"), "{dump}");
    }
}

const SNAP_NODES: usize = 5200;
const SNAP_NODE_BYTES: usize = 10 * 1024;

/// Scenario 5 and a leader killed mid-sync: Java 2 and 3 hold 5,200 znodes of 10 KiB (a
/// snapshot over 50 MB). A fresh zkfle gets SNAP; the moment the snapshot starts streaming the
/// Java leader is killed (-9). zkfle leaves, keeps no partial snapshot, follows the survivor,
/// receives the whole snapshot by SNAP and is counted (the survivor and zkfle are the only
/// quorum). The snapshot streams to disk; zkfle's peak RSS is its data tree (the 53.7 MB of
/// node data) plus a bounded overhead, not a second copy of the snapshot.
#[test]
fn fresh_zkfle_streams_a_50_mb_snapshot_after_its_leader_dies_mid_sync() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "snap50",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--init-limit", "40"],
    );
    e.run(&["wait-stable", "--timeout", "30"]);
    let leader = e.leader(&[2, 3]).expect("a Java leader");
    let other = 5 - leader;
    let t = Instant::now();
    let data = vec![b'z'; SNAP_NODE_BYTES];
    let ps = paths("n", SNAP_NODES);
    let mut zk = Zk::connect(&client(leader)).unwrap();
    zk.s.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(zk.create_many(&ps, &data, 256).unwrap(), SNAP_NODES);
    drop(zk);
    eprintln!(
        "created {SNAP_NODES} znodes of {SNAP_NODE_BYTES} bytes in {} ms",
        t.elapsed().as_millis()
    );

    let n = Native::start(&e, 1, &[]);
    let t = Instant::now();
    while !n.log().contains("Getting a snapshot from leader") {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no SNAP: {}",
            n.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    e.signal(leader, "-9");
    wait_for("zkfle leaves", Duration::from_secs(10), || {
        n.log().contains("follow session ended").then_some(())
    });
    let first = n.log();
    let cut_short = !first
        .split("follow session ended")
        .next()
        .unwrap()
        .contains("snapshot received");
    eprintln!("first SNAP cut short by the leader's death: {cut_short}");
    wait_for(
        "zkfle synced by the survivor",
        Duration::from_secs(60),
        || {
            (following(&n, 0) == Some(other) && n.log().contains("synced with leader"))
                .then_some(())
        },
    );
    let log = n.log();
    let got = log
        .lines()
        .rfind(|l| l.contains("snapshot received"))
        .unwrap()
        .to_string();
    let bytes: u64 = got
        .split(" nodes, ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(bytes >= 50_000_000, "{got}");
    // Counted: the leader is dead, so the survivor commits only with zkfle's ACKs.
    write_all(other, &paths("after", 5), Duration::from_secs(20));
    assert_eq!(read(other, "/after4").as_deref(), Some(&b"/after4"[..]));
    let peak = n.peak_rss_kb();
    eprintln!("snapshot {bytes} bytes; zkfle peak RSS {peak} kB");
    assert!(
        peak > 0 && peak < 25_000 + bytes / 1024 * 3 / 2,
        "peak RSS {peak} kB for a {bytes}-byte tree"
    );
    let v2 = e.dir.join("native1/version-2");
    assert!(files(&v2, "tmp.").is_empty());
    let snaps = files(&v2, "snapshot.");
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    assert!(std::fs::metadata(&snaps[0]).unwrap().len() >= 50_000_000);
    check_log(&v2);
}

/// Writes through `sid` until `stop`, a few at a time (about 250/s at most), so that a
/// follower that was away for a second is still synchronised by DIFF.
fn load(
    sid: i64,
    stop: Arc<AtomicBool>,
    progress: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut zk) = Zk::connect(&client(sid)) else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            while !stop.load(Ordering::Relaxed) {
                let ps: Vec<String> = (i..i + 5).map(|k| format!("/load{k}")).collect();
                match zk.create_many(&ps, b"v", 5) {
                    Ok(_) => {
                        i += 5;
                        progress.store(i, Ordering::Relaxed);
                    }
                    Err(_) => break,
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        i
    })
}

/// Scenario 6 against Java, and TRUNC: zkfle is killed (-9) under a write load and restarted
/// (consistent log, DIFF); the Java leader is stopped (SIGSTOP) and zkfle leaves it within
/// syncLimit*tickTime; then zkfle, down, is given a logged proposal no Java server has (as a
/// leader that died after sending it to zkfle alone would leave), the Java servers move to a
/// new epoch (without writes yet), and on rejoining the leader TRUNCs zkfle's log, after
/// which zkfle is counted.
#[test]
fn zkfle_killed_under_load_a_stalled_leader_and_a_trunc() {
    let _l = lock_loopback();
    let (e, n, leader) = zkfle_beside_two_java("faults", &[]);
    let v2 = e.dir.join("native1/version-2");

    // kill -9 under load, restart: a consistent log and a DIFF.
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicUsize::new(0));
    let h = load(leader, stop.clone(), progress.clone());
    // Killed in the middle of the load: once a hundred writes have committed with its ACKs.
    wait_for("100 writes under load", Duration::from_secs(20), || {
        (progress.load(Ordering::Relaxed) >= 100).then_some(())
    });
    n.kill();
    std::thread::sleep(Duration::from_millis(300));
    let mark = e.log(leader).len();
    let n = Native::start(&e, 1, &[]);
    wait_for("zkfle synced again", Duration::from_secs(15), || {
        (count(&n.log(), "synced with leader") >= 2).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let written = h.join().unwrap();
    let sync = e.log(leader)[mark..].to_string();
    assert!(
        sync.contains("Synchronizing with Learner sid: 1 "),
        "{sync}"
    );
    assert!(!sync.contains("Sending snapshot"), "{sync}");
    assert!(
        n.log().contains("Getting a diff from the leader"),
        "{}",
        n.log()
    );
    write_all(leader, &paths("k", 3), Duration::from_secs(10));
    let (zxids, _) = check_log(&v2);
    eprintln!("{written} load writes; zkfle logged {} txns", zxids.len());
    assert!(
        zxids.len() >= written.min(50),
        "{written} writes, {zxids:x?}"
    );

    // A stalled leader: SIGSTOP; zkfle is LOOKING within syncLimit*tickTime (1 s) and a bit.
    let ev = n.events().len();
    let t = Instant::now();
    e.signal(leader, "-STOP");
    wait_for("zkfle LOOKING", Duration::from_secs(5), || {
        n.events()[ev..]
            .iter()
            .any(|v| v["state"] == "LOOKING")
            .then_some(())
    });
    let stalled_ms = t.elapsed().as_millis();
    e.signal(leader, "-CONT");
    assert!(stalled_ms < 2500, "LOOKING {stalled_ms} ms after SIGSTOP");
    assert!(n.log().contains("nothing from the leader"), "{}", n.log());
    eprintln!("zkfle LOOKING {stalled_ms} ms after the leader was stopped");
    let l2 = wait_for("zkfle follows again", Duration::from_secs(30), || {
        let f = following(&n, ev)?;
        (count(&n.log(), "synced with leader") >= 3).then_some(f)
    });
    write_all(l2, &paths("s", 3), Duration::from_secs(20));
    // Let the last txns (the clients' closeSession) reach zkfle: the injected zxid below must
    // be one no Java server has.
    std::thread::sleep(Duration::from_millis(1500));

    // TRUNC: zkfle (down) holds a proposal nobody else has; the Java servers start a new
    // epoch without it; the leader truncates zkfle's log when it rejoins.
    n.kill();
    let injected = {
        let mut st = zkfle::storage::Storage::open(&e.dir.join("native1")).unwrap();
        let z = st.last_zxid() + 1;
        st.append(z, &injected_txn(z)).unwrap();
        st.sync().unwrap();
        z
    };
    e.run(&["stop-node", &l2.to_string()]);
    e.run(&["start-node", &l2.to_string()]);
    e.run(&["wait-stable", "--timeout", "30"]);
    let l3 = e.leader(&[2, 3]).expect("a Java leader");
    // No write in the new epoch before zkfle is back: Java 3.8 TRUNCs a learner ahead of its
    // committed log only then; with newer-epoch txns after it, it sends a SNAP instead
    // ("Cannot send TRUNC to peer sid: 1 peer zxid is from different epoch").
    let mark = e.log(l3).len();
    let n = Native::start(&e, 1, &[]);
    wait_for("zkfle synced after TRUNC", Duration::from_secs(20), || {
        (count(&n.log(), "synced with leader") >= 4).then_some(())
    });
    let sync = e.log(l3)[mark..].to_string();
    assert!(
        n.log().contains("Truncating log to get in sync"),
        "{}\n{sync}",
        n.log()
    );
    assert!(
        sync.contains("Synchronizing with Learner sid: 1 "),
        "{sync}"
    );
    assert!(!sync.contains("Sending snapshot"), "{sync}");
    write_all(l3, &paths("t", 5), Duration::from_secs(20));
    e.run(&["stop-node", &(5 - l3).to_string()]);
    write_all(l3, &paths("u", 5), Duration::from_secs(15));
    n.kill();
    let (zxids, dump) = check_log(&v2);
    assert!(!zxids.contains(&injected), "0x{injected:x} still logged");
    assert!(!dump.contains("/injected"), "{dump}");
    assert!(
        dump.contains("create /u4") && dump.contains("create /t4"),
        "{dump}"
    );
    eprintln!("TRUNC dropped 0x{injected:x}");
}

// ---------------------------------------------------------------- a fake leader

/// The test's side of a quorum connection: a leader that says what the test wants.
struct Fake {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Fake {
    fn accept(l: &TcpListener, timeout: Duration) -> Fake {
        let t = Instant::now();
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    return Fake { s, buf: Vec::new() };
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(t.elapsed() < timeout, "zkfle never connected");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// The newest connection from zkfle: older ones waiting in the backlog are sessions it
    /// already gave up (the test was busy).
    fn accept_newest(l: &TcpListener) -> Fake {
        let mut f = Fake::accept(l, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(50));
        while let Ok((s, _)) = l.accept() {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            f = Fake { s, buf: Vec::new() };
        }
        f
    }

    fn send(&mut self, p: QuorumPacket) {
        self.s.write_all(&p.encode().unwrap()).unwrap();
    }

    fn recv(&mut self) -> QuorumPacket {
        self.try_recv().expect("zkfle closed the connection")
    }

    /// The next packet; `None` when zkfle closed or reset the connection.
    fn try_recv(&mut self) -> Option<QuorumPacket> {
        loop {
            if let Ok((p, n)) = QuorumPacket::decode(&self.buf) {
                self.buf.drain(..n);
                return Some(p);
            }
            let mut b = [0u8; 4096];
            match self.s.read(&mut b) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read from zkfle: {e}"),
            }
        }
    }

    /// Accepts zkfle's newest connection and does the handshake with `epoch`. A connection
    /// zkfle has already given up is dropped for the next: while the test was busy it waited
    /// initLimit*tickTime (1 s here) for LEADERINFO, then closed it and dialled again.
    fn handshake_newest(l: &TcpListener, epoch: i64) -> (Fake, (i64, i64, i32)) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut f = Fake::accept_newest(l);
            if let Some(h) = f.try_handshake(epoch) {
                return (f, h);
            }
            assert!(
                Instant::now() < deadline,
                "no handshake with zkfle within 30 s"
            );
        }
    }

    /// Waits for zkfle to close the connection; returns how long that took.
    fn closed_within(&mut self, timeout: Duration) -> Duration {
        let t = Instant::now();
        self.s.set_read_timeout(Some(timeout)).unwrap();
        let mut b = [0u8; 4096];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => break,
                Ok(_) => {} // ping replies etc.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("zkfle did not close within {timeout:?}: {e}"),
            }
        }
        let took = t.elapsed();
        assert!(took < timeout, "closed after {took:?}");
        took
    }
    /// FOLLOWERINFO in; LEADERINFO(epoch) out; ACKEPOCH in: (acceptedEpoch, last zxid,
    /// epoch field).
    fn handshake(&mut self, epoch: i64) -> (i64, i64, i32) {
        self.try_handshake(epoch)
            .expect("zkfle closed the connection")
    }

    /// [`Fake::handshake`]; `None` when zkfle closed the connection first.
    fn try_handshake(&mut self, epoch: i64) -> Option<(i64, i64, i32)> {
        let fi = self.try_recv()?;
        assert_eq!(fi.ptype, ptype::FOLLOWERINFO);
        let li = LearnerInfo::decode(fi.data.as_deref().unwrap()).unwrap();
        assert_eq!(li.sid, 1);
        self.send(QuorumPacket::new(
            ptype::LEADERINFO,
            epoch << 32,
            Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
        ));
        let ae = self.try_recv()?;
        assert_eq!(ae.ptype, ptype::ACKEPOCH);
        Some((fi.zxid >> 32, ae.zxid, ae.data_i32("epoch").unwrap()))
    }

    /// DIFF at `zxid`, NEWLEADER, UPTODATE, with their ACKs.
    fn diff_sync(&mut self, epoch: i64, zxid: i64) {
        self.send(QuorumPacket::new(ptype::DIFF, zxid, None));
        self.send(QuorumPacket::new(ptype::NEWLEADER, epoch << 32, None));
        assert_eq!(self.recv(), QuorumPacket::ack(epoch << 32));
        self.send(QuorumPacket::new(ptype::UPTODATE, -1, None));
        assert_eq!(self.recv(), QuorumPacket::ack(epoch << 32));
    }
}

/// Scenario 6 with a leader written here: zkfle 1 and an election-only zkfle 2 that claims the
/// newest data (so it wins, and the test serves its quorum port 127.0.0.2:2888; sid 3 is
/// absent). Session 1: a clean sync, three proposals logged and ACKed, then a malformed
/// packet. Session 2: zkfle reports those three (its log is intact), syncs, then the leader
/// stalls. Session 3: the quorum port is refused. Session 4: SNAP, half a snapshot, and the
/// leader dies. Session 5: the log is still the three proposals; no snapshot was kept.
#[test]
fn fake_leader_garbage_stall_refusal_and_death_mid_snapshot() {
    let _l = lock_loopback();
    let dir = std::env::temp_dir().join(format!("zkfle-zab-fake-{}", std::process::id()));
    let (l, n, _claimer) = fake_leader_setup(&dir, &[], 9);
    let t0 = Instant::now();

    // 1. A clean sync and three proposals, then a packet whose data length is 1 GiB.
    let mut f = Fake::accept(&l, Duration::from_secs(20));
    assert_eq!(f.handshake(5), (0, 0, 0));
    f.diff_sync(5, 0);
    for i in 1..=3 {
        let z = (5 << 32) | i;
        f.send(QuorumPacket::new(ptype::PROPOSAL, z, Some(injected_txn(z))));
        assert_eq!(f.recv(), QuorumPacket::ack(z));
        f.send(QuorumPacket::new(ptype::COMMIT, z, None));
    }
    let mut garbage = 2i32.to_be_bytes().to_vec();
    garbage.extend(((5i64 << 32) | 4).to_be_bytes());
    garbage.extend(0x4000_0000i32.to_be_bytes());
    garbage.extend([0xab; 64]);
    f.s.write_all(&garbage).unwrap();
    f.closed_within(Duration::from_secs(2));
    wait_for("malformed logged", Duration::from_secs(2), || {
        n.log().contains("malformed quorum packet").then_some(())
    });

    // 2. The log is intact: acceptedEpoch 5, currentEpoch 5, last zxid 5:3. Then a stall.
    let mut f = Fake::accept(&l, Duration::from_secs(20));
    assert_eq!(f.handshake(6), (5, (5 << 32) | 3, 5));
    f.diff_sync(6, (5 << 32) | 3);
    let took = f.closed_within(Duration::from_secs(3));
    assert!(
        took >= Duration::from_millis(400),
        "left a live leader after {took:?}"
    );
    wait_for("stall logged", Duration::from_secs(2), || {
        n.log().contains("nothing from the leader").then_some(())
    });
    eprintln!(
        "zkfle left the stalled leader after {} ms",
        took.as_millis()
    );

    // 3. The quorum port is refused.
    drop(l);
    let ended = count(&n.log(), "follow session ended");
    wait_for("refused", Duration::from_secs(20), || {
        (count(&n.log(), "follow session ended") > ended
            && n.log().contains("cannot connect to leader 2"))
        .then_some(())
    });
    let l = TcpListener::bind("127.0.0.2:2888").unwrap();
    l.set_nonblocking(true).unwrap();

    // 4. SNAP, a few bytes of snapshot, and the leader is gone.
    let mut f = Fake::accept(&l, Duration::from_secs(20));
    let (acc, last, _) = f.handshake(7);
    assert_eq!((acc, last), (6, (5 << 32) | 3));
    f.send(QuorumPacket::new(ptype::SNAP, (7 << 32) | 9, None));
    f.s.write_all(&[0, 0, 0, 0, 0, 0, 0, 1]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        files(&dir.join("native1/version-2"), "tmp.snapshot.").len(),
        1,
        "the snapshot streams to a temporary file"
    );
    drop(f);

    // 5. Nothing of it was kept.
    let mut f = Fake::accept(&l, Duration::from_secs(20));
    let (acc, last, cur) = f.handshake(8);
    assert_eq!((acc, last, cur), (7, (5 << 32) | 3, 6));
    drop(f);
    n.kill();
    let v2 = dir.join("native1/version-2");
    assert!(files(&v2, "tmp.").is_empty());
    // Only the empty tree's snapshot.0 (written when the data dir was new), not 0x700000009.
    assert_eq!(
        files(&v2, "snapshot.")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        ["snapshot.0"]
    );
    let (zxids, dump) = check_log(&v2);
    assert_eq!(zxids, vec![(5 << 32) | 1, (5 << 32) | 2, (5 << 32) | 3]);
    assert!(dump.contains("/injected"), "{dump}");
    eprintln!("fake-leader scenarios in {} ms", t0.elapsed().as_millis());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `create /big` with `size` bytes of data: a valid txn for ZooKeeper's tools. (Only the
/// first of them creates the node in the data tree, so the tree stays small.)
fn big_txn(zxid: i64, size: usize) -> Vec<u8> {
    create_txn(zxid, b"/big", &vec![b'd'; size])
}

/// The setup of the fake-leader tests: a config with sids 1-3, the quorum port of 2 served by
/// the test, zkfle 1 with `extra` arguments (its data dir among them) and an election-only
/// zkfle 2 that claims epoch `claim_epoch` so that it wins whatever zkfle 1 logs.
fn fake_leader_setup(
    dir: &Path,
    extra: &[&str],
    claim_epoch: i64,
) -> (TcpListener, Native, Native) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        "tickTime=100\ninitLimit=10\nsyncLimit=5\nclientPort=2181\n\
         server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\nserver.3=127.0.0.3:2888:3888\n",
    )
    .unwrap();
    let l = TcpListener::bind("127.0.0.2:2888").unwrap();
    l.set_nonblocking(true).unwrap();
    let n = Native::start_in(dir, &cfg, 1, extra);
    let claimer = Native::start_in(
        dir,
        &cfg,
        2,
        &[
            "--zxid",
            &format!("{:#x}", claim_epoch << 32),
            "--peer-epoch",
            &claim_epoch.to_string(),
        ],
    );
    (l, n, claimer)
}

/// Waits for zkfle's log to say `why` in a session end, after `ended` earlier session ends.
fn session_ended(n: &Native, ended: usize, why: &str) {
    wait_for(why, Duration::from_secs(10), || {
        let log = n.log();
        (count(&log, "follow session ended") > ended && log.contains(why)).then_some(())
    });
}

/// Issue 14, a leader that would brick its follower (zkfle 1 follows the test's fake leader,
/// the data dir on disk): an epoch of 0x7FFFFFFF, a DIFF proposal of epoch 0x7fffffff, a DIFF
/// over --max-diff-bytes and a snapshot over --max-snapshot-bytes are each refused with the
/// reason and nothing of them persisted; a 64 MiB DIFF is staged on disk, not held in memory,
/// and logged; ZooKeeper's TxnLogToolkit reads the log after each step.
#[test]
fn a_leader_that_would_brick_the_follower_is_refused() {
    let _l = lock_loopback();
    let dir = std::env::temp_dir().join(format!("zkfle-zab-brick-{}", std::process::id()));
    let data = dir.join("native1");
    let (l, n, _claimer) = fake_leader_setup(
        &dir,
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--max-diff-bytes",
            "80000000",
            "--max-snapshot-bytes",
            "100000",
        ],
        100,
    );
    let v2 = data.join("version-2");
    let epoch_file = |name: &str| std::fs::read_to_string(v2.join(name)).unwrap();

    // 1. LEADERINFO with epoch 0x7FFFFFFF: refused, acceptedEpoch stays 0.
    let mut f = Fake::accept_newest(&l);
    let fi = f.recv();
    assert_eq!(fi.ptype, ptype::FOLLOWERINFO);
    f.send(QuorumPacket::new(
        ptype::LEADERINFO,
        0x7FFF_FFFFi64 << 32,
        Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
    ));
    f.closed_within(Duration::from_secs(3));
    session_ended(
        &n,
        0,
        "LEADERINFO epoch 2147483647 (0x7fffffff) is far beyond",
    );
    assert_eq!(epoch_file("acceptedEpoch"), "0");

    // 2. A DIFF proposal with zxid 0x7fffffff00000001: refused, not logged.
    let (mut f, handshake) = Fake::handshake_newest(&l, 10);
    assert_eq!(handshake, (0, 0, 0));
    f.send(QuorumPacket::new(ptype::DIFF, 0, None));
    let z = 0x7fff_ffff_0000_0001i64;
    f.send(QuorumPacket::new(ptype::PROPOSAL, z, Some(injected_txn(z))));
    f.closed_within(Duration::from_secs(3));
    session_ended(
        &n,
        1,
        "sync PROPOSAL 0x7fffffff00000001 is in epoch 2147483647",
    );
    assert!(files(&v2, "log.").is_empty(), "nothing logged");

    // 3. A DIFF over --max-diff-bytes (80 MB): refused, nothing logged, the staging file gone.
    let (mut f, handshake) = Fake::handshake_newest(&l, 11);
    assert_eq!(handshake, (10, 0, 0));
    let ended = count(&n.log(), "follow session ended");
    f.send(QuorumPacket::new(ptype::DIFF, 0xa_0000_0000 | 200, None));
    for i in 1..=200i64 {
        let z = 0xa_0000_0000 | i;
        // zkfle closes mid-way: the writes may fail then.
        if f.s
            .write_all(
                &QuorumPacket::new(ptype::PROPOSAL, z, Some(big_txn(z, 512 << 10)))
                    .encode()
                    .unwrap(),
            )
            .is_err()
        {
            break;
        }
    }
    f.closed_within(Duration::from_secs(10));
    session_ended(&n, ended, "the leader's DIFF exceeds 80000000 bytes");
    assert!(files(&v2, "log.").is_empty());
    assert!(
        files(&v2, "sync.").is_empty(),
        "the staging file is removed"
    );

    // 4. A 64 MiB DIFF (128 proposals of 512 KiB): staged on disk, logged at NEWLEADER, in
    //    bounded memory.
    let rss_before = n.peak_rss_kb();
    let (mut f, handshake) = Fake::handshake_newest(&l, 12);
    assert_eq!(handshake, (11, 0, 0));
    f.send(QuorumPacket::new(ptype::DIFF, 0xa_0000_0000 | 128, None));
    for i in 1..=128i64 {
        let z = 0xa_0000_0000 | i;
        f.send(QuorumPacket::new(
            ptype::PROPOSAL,
            z,
            Some(big_txn(z, 512 << 10)),
        ));
        f.send(QuorumPacket::new(ptype::COMMIT, z, None));
    }
    f.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    f.send(QuorumPacket::new(ptype::NEWLEADER, 12 << 32, None));
    assert_eq!(f.recv(), QuorumPacket::ack(12 << 32));
    f.send(QuorumPacket::new(ptype::UPTODATE, -1, None));
    assert_eq!(f.recv(), QuorumPacket::ack(12 << 32));
    let peak = n.peak_rss_kb();
    eprintln!("64 MiB DIFF: zkfle peak RSS {rss_before} -> {peak} kB");
    assert!(peak < 48 * 1024, "peak RSS {peak} kB for a 64 MiB DIFF");
    let (zxids, _) = check_log(&v2);
    assert_eq!(
        zxids,
        (1..=128).map(|i| 0xa_0000_0000 | i).collect::<Vec<i64>>()
    );
    assert!(files(&v2, "sync.").is_empty());
    drop(f);

    // 5. A snapshot over --max-snapshot-bytes (100 kB): 100,000 sessions of 12 bytes each.
    let (mut f, handshake) = Fake::handshake_newest(&l, 13);
    assert_eq!(handshake, (12, 0xa_0000_0080, 12));
    let ended = count(&n.log(), "follow session ended");
    f.send(QuorumPacket::new(ptype::SNAP, 0xc_0000_0001, None));
    let mut body = 100_000i32.to_be_bytes().to_vec();
    for i in 0..100_000i64 {
        body.extend(i.to_be_bytes());
        body.extend(30_000i32.to_be_bytes());
    }
    let _ = f.s.write_all(&body);
    f.closed_within(Duration::from_secs(5));
    session_ended(&n, ended, "the leader's snapshot exceeds 100000 bytes");
    let (f, handshake) = Fake::handshake_newest(&l, 14);
    assert_eq!(handshake, (13, 0xa_0000_0080, 12), "the log is as it was");
    drop(f);
    n.kill();
    assert!(files(&v2, "tmp.").is_empty());
    assert!(
        files(&v2, "snapshot.c").is_empty(),
        "the refused snapshot is not kept"
    );
    let (zxids, dump) = check_log(&v2);
    assert_eq!(
        zxids,
        (1..=128).map(|i| 0xa_0000_0000 | i).collect::<Vec<i64>>()
    );
    assert!(dump.contains("/big"), "{dump}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small tmpfs mounted for a test, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    /// None when this machine cannot mount one (not root).
    fn mount(path: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(path).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(path.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 14, a full disk: zkfle's data dir on a 2 MiB tmpfs, proposals of 64 KiB until the
/// disk is full. zkfle ends the session with the error (no ACK for what it could not log),
/// goes back to LOOKING, its log has no torn entry and ZooKeeper's TxnLogToolkit reads it,
/// and in the next session it reports the last proposal it acknowledged.
#[test]
fn a_full_disk_ends_the_session_cleanly() {
    let _l = lock_loopback();
    let dir = std::env::temp_dir().join(format!("zkfle-zab-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("small");
    let Some(_disk) = SmallDisk::mount(&data, "2m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let (l, n, _claimer) = fake_leader_setup(&dir, &["--data-dir", data.to_str().unwrap()], 100);
    let v2 = data.join("version-2");
    let mut f = Fake::accept(&l, Duration::from_secs(20));
    assert_eq!(f.handshake(5), (0, 0, 0));
    f.diff_sync(5, 0);
    let mut acked = 0;
    for i in 1..=100i64 {
        let z = (5 << 32) | i;
        if f.s
            .write_all(
                &QuorumPacket::new(ptype::PROPOSAL, z, Some(big_txn(z, 64 << 10)))
                    .encode()
                    .unwrap(),
            )
            .is_err()
        {
            break;
        }
        let mut got = None;
        f.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 4096];
        loop {
            if let Ok((p, used)) = QuorumPacket::decode(&f.buf) {
                f.buf.drain(..used);
                got = Some(p);
                break;
            }
            match f.s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(k) => f.buf.extend_from_slice(&b[..k]),
            }
        }
        match got {
            Some(p) => {
                assert_eq!(p, QuorumPacket::ack(z));
                acked = z;
            }
            None => break,
        }
    }
    assert!(
        acked > 5 << 32 && acked < (5 << 32) | 100,
        "acked up to 0x{acked:x}"
    );
    session_ended(&n, 0, "No space left on device");
    let lookings = |n: &Native| {
        n.events()
            .iter()
            .filter(|v| v["state"] == "LOOKING")
            .count()
    };
    let before = lookings(&n);
    wait_for("back to LOOKING", Duration::from_secs(5), || {
        (lookings(&n) > before || n.log().contains("FOLLOWING: storage:")).then_some(())
    });
    // The next session: zkfle reports exactly what it acknowledged.
    let (f, handshake) = Fake::handshake_newest(&l, 6);
    assert_eq!(handshake, (5, acked, 5));
    drop(f);
    n.kill();
    let (zxids, _) = check_log(&v2);
    assert_eq!(zxids.last(), Some(&acked));
    eprintln!(
        "full disk: {} proposals acknowledged and logged before ENOSPC",
        zxids.len()
    );
    drop(_disk);
    let _ = std::fs::remove_dir_all(&dir);
}
