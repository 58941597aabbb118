//! `zkfle decode --interface`: a live capture (libpcap) of a Java ensemble electing, on the
//! loopback of a network namespace of the test's own, gives the records that decoding the
//! same traffic from tcpdump's file gives. Needs root (namespaces, capture).

mod common;
use common::join;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use join::{Ensemble, ZKFLE, lock_loopback};
use serde_json::Value;

/// A network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(name: &str) -> Netns {
        let ns = format!("{name}-{}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &ns])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add {ns}");
        let ok = Command::new("ip")
            .args(["-n", &ns, "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(ok.success());
        Netns(ns)
    }

    fn spawn(&self, program: &str, args: &[&str], stdout: PathBuf, stderr: PathBuf) -> Proc {
        Proc(
            Command::new("ip")
                .args(["netns", "exec", &self.0, program])
                .args(args)
                .stdout(std::fs::File::create(stdout).unwrap())
                .stderr(std::fs::File::create(stderr).unwrap())
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

/// A child process, killed on drop (a failed test leaves no capture running).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn wait_file_contains(path: &PathBuf, needle: &str) {
    let start = Instant::now();
    while !std::fs::read_to_string(path)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} never said {needle:?}: {}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn interrupt(proc: &mut Proc) {
    let child = &mut proc.0;
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn live_capture_equals_decoding_the_file() {
    // The ensemble runs in a namespace of its own, but the lock keeps to the rule for every
    // test that starts Java servers.
    let _lock = lock_loopback();
    let ns = Netns::new("zkfle-live");
    let dir = std::env::temp_dir().join(format!("zkfle-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n);

    let mut live = ns.spawn(
        ZKFLE,
        &["decode", "-i", "lo", "--format", "jsonl"],
        p("live.jsonl"),
        p("live.err"),
    );
    let mut live_summary = ns.spawn(
        ZKFLE,
        &[
            "decode",
            "--interface",
            "lo",
            "--summary",
            "--time",
            "relative",
        ],
        p("summary.txt"),
        p("summary.err"),
    );
    let pcap = p("capture.pcap");
    let mut tcpdump = ns.spawn(
        "tcpdump",
        &[
            "-i",
            "lo",
            "-s",
            "0",
            "-U",
            "-n",
            "-w",
            pcap.to_str().unwrap(),
            "tcp and (port 2888 or port 3888)",
        ],
        p("tcpdump.out"),
        p("tcpdump.err"),
    );
    wait_file_contains(&p("live.err"), "capturing on lo");
    wait_file_contains(&p("summary.err"), "capturing on lo");
    wait_file_contains(&p("tcpdump.err"), "listening on");

    let netns: Vec<String> = (1..=3).map(|i| format!("{i}={}", ns.0)).collect();
    let mut extra = Vec::new();
    for n in &netns {
        extra.extend(["--netns", n.as_str()]);
    }
    extra.extend(["--tick", "500"]);
    let ensemble = Ensemble::start("live", "1:participant,2:participant,3:participant", &extra);
    ensemble.wait_stable();
    // Decisions are printed while the capture runs, before Ctrl-C.
    wait_file_contains(&p("summary.txt"), "LEADING");
    ensemble.run(&["stop"]);
    std::thread::sleep(Duration::from_millis(500));
    interrupt(&mut live);
    interrupt(&mut live_summary);
    interrupt(&mut tcpdump);

    let live_text = std::fs::read_to_string(p("live.jsonl")).unwrap();
    let live_records = jsonl(&live_text);
    assert!(
        live_records
            .iter()
            .filter(|r| r["type"] == "notification")
            .count()
            >= 6,
        "{live_text}"
    );

    // The file through a pipe is streamed as the live capture is: the same lines.
    let piped = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat {} | {ZKFLE} decode --format jsonl -",
            pcap.display()
        ))
        .output()
        .unwrap();
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    // Two packet sockets (libpcap's and tcpdump's) may stamp a packet a microsecond apart,
    // and may see the SYNs of two connections opened at the same instant (a server dialling
    // two peers from two threads) in either order. Connection ids are given in the order
    // connections are first seen, so the two decodes may number such connections the other
    // way round: records are matched without their ids, then the ids must correspond one to
    // one (`same_connections`).
    let untimed = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("time");
        v.as_object_mut().unwrap().remove("connection");
        v
    };
    let piped_records = jsonl(&String::from_utf8_lossy(&piped.stdout));
    // A difference here is a packet the live capture lost; zkfle says so on stderr.
    let live_err = std::fs::read_to_string(p("live.err")).unwrap_or_default();
    assert_eq!(
        piped_records.len(),
        live_records.len(),
        "live capture stderr: {live_err}"
    );
    let pairs = pair_up(&live_records, &piped_records, |l, f| {
        untimed(l) == untimed(f)
    });
    same_connections(&pairs);
    for (l, f) in pairs {
        let dt = l["time"].as_f64().unwrap() - f["time"].as_f64().unwrap();
        assert!(dt.abs() < 0.001, "{l} vs {f}");
    }

    // Read as a file, sids learned later are filled in too; everything else is the same.
    let file = Command::new(ZKFLE)
        .args(["decode", "--format", "jsonl"])
        .arg(&pcap)
        .output()
        .unwrap();
    let file_records = jsonl(&String::from_utf8_lossy(&file.stdout));
    assert_eq!(
        file_records.len(),
        live_records.len(),
        "live capture stderr: {live_err}"
    );
    // The sids and how they were learned: a sid learned from a config in a notification is
    // named from the moment that notification is decoded, and the two captures can order
    // packets of different connections sent at the same instant differently; the live side
    // may name fewer, never others.
    const NAMING: [&str; 4] = ["from_sid", "to_sid", "from_sid_source", "to_sid_source"];
    let strip = |v: &Value| {
        let mut v = untimed(v);
        for key in NAMING {
            v.as_object_mut().unwrap().remove(key);
        }
        v
    };
    let pairs = pair_up(&live_records, &file_records, |l, f| strip(l) == strip(f));
    same_connections(&pairs);
    for (l, f) in pairs {
        for (sid, source) in [("from_sid", "from_sid_source"), ("to_sid", "to_sid_source")] {
            assert!(
                l[sid].is_null() || (l[sid] == f[sid] && l[source] == f[source]),
                "{l} vs {f}"
            );
        }
    }

    // The live summary: decisions as they came, then the whole summary at Ctrl-C.
    let summary = std::fs::read_to_string(p("summary.txt")).unwrap();
    let leader = ensemble_leader(&summary);
    let decided_at = summary.find(&format!("sid {leader} LEADING")).unwrap();
    let full_at = summary
        .find("election 1 at")
        .expect("full summary at the end");
    assert!(decided_at < full_at, "{summary}");
    assert!(summary.contains("winner sid"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `decode -i` started on an ensemble that formed before it: the live summary starts from the
/// leader the quorum port shows, and tells its kill as a failover (the leader's process ended),
/// never as servers starting, as `decode` does with captures begun on a running ensemble.
#[test]
fn a_live_capture_begun_on_a_running_ensemble_tells_the_failover() {
    let _lock = lock_loopback();
    let ns = Netns::new("zkfle-live-late");
    let dir = std::env::temp_dir().join(format!("zkfle-live-late-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n);
    let netns: Vec<String> = (1..=3).map(|i| format!("{i}={}", ns.0)).collect();
    let mut extra = Vec::new();
    for n in &netns {
        extra.extend(["--netns", n.as_str()]);
    }
    extra.extend(["--tick", "500"]);
    let ensemble = Ensemble::start(
        "live-late",
        "1:participant,2:participant,3:participant",
        &extra,
    );
    ensemble.wait_stable();
    let old = ensemble.leader(&[1, 2, 3]).expect("a leader");

    // The captures start now, on the running ensemble.
    let mut text = ns.spawn(
        ZKFLE,
        &["decode", "-i", "lo", "--summary", "--time", "relative"],
        p("summary.txt"),
        p("summary.err"),
    );
    let mut json = ns.spawn(
        ZKFLE,
        &["decode", "-i", "lo", "--summary", "--format", "jsonl"],
        p("summary.jsonl"),
        p("summary-json.err"),
    );
    // tcpdump's file beside the live summaries, kept when the test fails, to decode again.
    let pcap = p("capture.pcap");
    let mut tcpdump = ns.spawn(
        "tcpdump",
        &[
            "-i",
            "lo",
            "-s",
            "0",
            "-U",
            "-n",
            "-w",
            pcap.to_str().unwrap(),
            "tcp",
        ],
        p("tcpdump.out"),
        p("tcpdump.err"),
    );
    wait_file_contains(&p("tcpdump.err"), "listening on");
    wait_file_contains(&p("summary.err"), "capturing on lo");
    wait_file_contains(&p("summary-json.err"), "capturing on lo");
    // The leader's PINGs on the quorum port name it (one every half tick).
    std::thread::sleep(Duration::from_secs(2));
    ensemble.signal(old, "-9");
    let others: Vec<i64> = [1, 2, 3].into_iter().filter(|s| *s != old).collect();
    let new = join::wait_for("a new leader", Duration::from_secs(30), || {
        ensemble.leader(&others)
    });
    std::thread::sleep(Duration::from_secs(1));
    interrupt(&mut text);
    interrupt(&mut json);
    interrupt(&mut tcpdump);

    let summary = std::fs::read_to_string(p("summary.txt")).unwrap();
    let began = summary
        .lines()
        .find(|l| l.starts_with("the capture began on a running ensemble: at +"))
        .unwrap_or_else(|| panic!("no leader at the start: {summary}"));
    assert!(
        began.contains(&format!("s sid {old} was leading")),
        "{summary}"
    );
    let election = summary
        .lines()
        .find(|l| l.starts_with("election 1 at"))
        .unwrap_or_else(|| panic!("no election: {summary}"));
    assert!(
        election.contains("the leader's connections closed at")
            && election.contains("(its process ended: killed or stopped)")
            && election.ends_with(&format!("winner sid {new}")),
        "{summary}"
    );
    assert!(!summary.contains("servers starting"), "{summary}");

    let json_text = std::fs::read_to_string(p("summary.jsonl")).unwrap();
    let whole: Value = jsonl(&json_text)
        .into_iter()
        .find(|v| v.get("rounds").is_some())
        .unwrap_or_else(|| panic!("no summary object: {json_text}"));
    assert_eq!(whole["at_start"]["leader"], old, "{json_text}");
    let first = &whole["rounds"][0];
    assert_eq!(first["kind"], "election", "{json_text}");
    assert_eq!(first["cause"], "leader_lost", "{json_text}");
    assert_eq!(first["leader_fate"], "killed_or_stopped", "{json_text}");
    assert_eq!(first["winner"], new, "{json_text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pairs each record of `live` with an equal one of `other` near the same place.
///
/// Two packet sockets (zkfle's and tcpdump's) can see packets sent at the same instant by two
/// threads in different orders, e.g. a leader's PINGs to two followers, so the match may lie a
/// few records away. Panics naming the first record with no match.
fn pair_up<'a>(
    live: &'a [Value],
    other: &'a [Value],
    same: impl Fn(&Value, &Value) -> bool,
) -> Vec<(&'a Value, &'a Value)> {
    const WINDOW: usize = 8;
    let mut used = vec![false; other.len()];
    let mut pairs = Vec::with_capacity(live.len());
    for (i, l) in live.iter().enumerate() {
        let range = i.saturating_sub(WINDOW)..(i + WINDOW + 1).min(other.len());
        let found = range
            .clone()
            .find(|&j| !used[j] && same(l, &other[j]))
            .unwrap_or_else(|| {
                panic!(
                    "record {i} has no match in records {range:?}: {l}\nnearest: {}",
                    other.get(i).map_or("none".into(), |v| v.to_string())
                )
            });
        used[found] = true;
        pairs.push((l, &other[found]));
    }
    pairs
}

/// Checks that paired records' connection ids correspond one to one: each connection of one
/// decode is one connection of the other, whatever its number.
fn same_connections(pairs: &[(&Value, &Value)]) {
    let mut there = std::collections::HashMap::new();
    let mut back = std::collections::HashMap::new();
    for (l, f) in pairs {
        let (a, b) = (l["connection"].clone(), f["connection"].clone());
        let seen = there.entry(a.to_string()).or_insert_with(|| b.clone());
        assert_eq!(
            *seen, b,
            "connection {a} is two connections of the other decode: {l} vs {f}"
        );
        let seen = back.entry(b.to_string()).or_insert_with(|| a.clone());
        assert_eq!(
            *seen, a,
            "connection {b} is two connections of the live decode: {l} vs {f}"
        );
    }
}

/// The sid a live summary saw leading first.
fn ensemble_leader(summary: &str) -> i64 {
    let line = summary.lines().find(|l| l.contains(" LEADING (")).unwrap();
    let at = line.find("sid ").unwrap() + 4;
    line[at..].split(' ').next().unwrap().parse().unwrap()
}

/// Without root or CAP_NET_RAW, the error says what is needed.
#[test]
fn live_capture_without_privileges_says_so() {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            ZKFLE,
            "decode",
            "-i",
            "lo",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CAP_NET_RAW") && err.contains("root"), "{err}");
}
