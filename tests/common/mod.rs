//! Helpers shared by the integration tests: the recorded fixtures, their servers' logs, and a
//! pcap writer for re-segmented captures.
#![allow(dead_code)]
//!
//! Every test includes the helpers one way, `mod common;`; the Java tests then `use
//! common::join` (the ensemble, the loopback lock, `zkfle join` processes), `common::zab` (the
//! Zab tests' client and common start), `common::java` (raw election-port peers) or
//! `common::logs` (captured tracing output).

pub mod java;
pub mod join;
pub mod logs;
pub mod zab;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use zkfle::capture::{self, TcpSegment};
use zkfle::decode::{AddressBook, Body, DecodeOptions, Decoder, Record};
use zkfle::zoocfg::ZooCfg;

/// `n` election addresses for an in-process native ensemble, sid i at the i-th:
/// `127.A.B.i:3888`, with A.B unique to this process and call. All of 127.0.0.0/8 is this
/// host's and the Java tests use 127.0.0.x and 127.0.1.x, so nothing else binds them; no port
/// is bound and released for the nodes to take (which another process could take first).
pub fn native_addresses(n: usize) -> Vec<std::net::SocketAddr> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let call = NEXT.fetch_add(1, Ordering::Relaxed);
    let a = 100 + (std::process::id() % 100) as u8;
    let b = (call % 256) as u8;
    (1..=n)
        .map(|sid| std::net::SocketAddr::from(([127, a, b, sid as u8], 3888)))
        .collect()
}

/// Every recorded fixture directory (those with a capture and logs).
pub fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| capture_file(p).is_some() && p.join("zoo.cfg").exists())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no fixtures under {}", root.display());
    // scripts/matrix.sh checks one version at a time.
    if let Ok(v) = std::env::var("ZKFLE_FIXTURE_VERSION") {
        dirs.retain(|d| fixture_version(d).as_deref() == Some(v.as_str()));
        assert!(!dirs.is_empty(), "no fixture recorded with ZooKeeper {v}");
    }
    dirs
}

/// Fixtures recorded one capture per host (`scripts/record-multihost.sh`: `host.N.pcap`).
pub fn multihost_fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !host_captures(p).is_empty() && p.join("zoo.cfg").exists())
        .collect();
    dirs.sort();
    if let Ok(v) = std::env::var("ZKFLE_FIXTURE_VERSION") {
        dirs.retain(|d| fixture_version(d).as_deref() == Some(v.as_str()));
    }
    dirs
}

/// A multi-host fixture's captures, `host.1.pcap`, `host.2.pcap`, ... (empty for others).
pub fn host_captures(dir: &Path) -> Vec<String> {
    (1..)
        .map(|i| dir.join(format!("host.{i}.pcap")))
        .take_while(|p| p.exists())
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// Every fixture: single captures, then multi-host ones (decoded merged).
pub fn all_fixtures() -> Vec<PathBuf> {
    let mut v = fixtures();
    v.extend(multihost_fixtures());
    v
}

/// The capture in a fixture directory (pcap or pcapng).
pub fn capture_file(dir: &Path) -> Option<PathBuf> {
    ["capture.pcap", "capture.pcapng"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
}

/// The servers of a fixture: those of its zoo.cfg, and those added later by `reconfig` whose
/// log it keeps (`server.<sid>.log`).
pub fn fixture_sids(dir: &Path) -> Vec<i64> {
    let mut sids: BTreeSet<i64> = zoo_cfg(dir).servers().map(|s| s.id).collect();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(sid) = name
            .strip_prefix("server.")
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse().ok())
        {
            sids.insert(sid);
        }
    }
    sids.into_iter().collect()
}

/// The fixture's zoo.cfg.
pub fn zoo_cfg(dir: &Path) -> ZooCfg {
    ZooCfg::read(&dir.join("zoo.cfg")).expect("fixture zoo.cfg parses")
}

/// Election ports named in the fixture's zoo.cfg.
pub fn election_ports(dir: &Path) -> Vec<u16> {
    let ports: BTreeSet<u16> = zoo_cfg(dir)
        .servers()
        .flat_map(|s| s.addresses.iter().map(|a| a.election_port))
        .collect();
    ports.into_iter().collect()
}

/// Quorum (Zab) ports named in the fixture's zoo.cfg.
pub fn quorum_ports(dir: &Path) -> Vec<u16> {
    let ports: BTreeSet<u16> = zoo_cfg(dir)
        .servers()
        .flat_map(|s| s.addresses.iter().map(|a| a.quorum_port))
        .collect();
    ports.into_iter().collect()
}

/// The ZooKeeper version a fixture was recorded with (its README: `Java ZooKeeper **X**`).
pub fn fixture_version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("README.md")).ok()?;
    let at = text.find("ZooKeeper **")? + "ZooKeeper **".len();
    let rest = &text[at..];
    Some(rest[..rest.find("**")?].to_string())
}

/// Whether some of the fixture's servers are 3.4 (legacy initial messages, no addresses on
/// the wire). Mixed-version fixtures name their versions joined by `+`, e.g. `3.4.14+3.8.0`.
pub fn is_legacy_fixture(dir: &Path) -> bool {
    fixture_version(dir).is_some_and(|v| v.split('+').any(|v| v.starts_with("3.4.")))
}

/// Whether a fixture is decoded with `--config` (its zoo.cfg): 3.4 captures, which name no
/// addresses, and those whose README says `Decode it with --config zoo.cfg` (a server that no
/// config on the wire names, on a host whose address others share).
pub fn needs_config(dir: &Path) -> bool {
    is_legacy_fixture(dir)
        || std::fs::read_to_string(dir.join("README.md"))
            .is_ok_and(|t| t.contains("Decode it with `--config zoo.cfg`"))
}

/// Whether all of the fixture's servers are 3.4.
pub fn is_pure_legacy_fixture(dir: &Path) -> bool {
    fixture_version(dir).is_some_and(|v| v.split('+').all(|v| v.starts_with("3.4.")))
}

/// Decoding options for a fixture: its election ports; nothing known beforehand, except for
/// 3.4 captures, which name no addresses: those get the fixture's zoo.cfg, as
/// `zkfle decode --config` would.
pub fn options(dir: &Path) -> DecodeOptions {
    let mut book = AddressBook::default();
    if needs_config(dir) {
        book.learn_config(&zoo_cfg(dir).quorum, zkfle::decode::SidSource::Config);
    }
    DecodeOptions {
        ports: election_ports(dir),
        quorum_ports: quorum_ports(dir),
        book,
        ..DecodeOptions::default()
    }
}

/// Decoding options with nothing known beforehand, whatever the version.
pub fn options_without_config(dir: &Path) -> DecodeOptions {
    DecodeOptions {
        ports: election_ports(dir),
        book: AddressBook::default(),
        ..DecodeOptions::default()
    }
}

/// Decodes a list of segments.
pub fn decode_segments(segments: Vec<TcpSegment>, options: DecodeOptions) -> Vec<Record> {
    Decoder::new(segments.into_iter().map(Ok), options).collect()
}

/// Decodes a fixture's capture file (a multi-host fixture's captures merged, as
/// `zkfle decode host.*.pcap` reads them).
pub fn decode_fixture(dir: &Path) -> Vec<Record> {
    let hosts = host_captures(dir);
    if !hosts.is_empty() {
        let fixed = vec![None; hosts.len()];
        let (merged, _) = capture::merge::open_files(&hosts, &fixed).expect("captures open");
        return Decoder::with_source(merged, options(dir)).collect();
    }
    let path = capture_file(dir).unwrap();
    let segments = capture::open(path.to_str().unwrap()).expect("capture opens");
    Decoder::new(segments, options(dir)).collect()
}

/// A fixture's capture as if it had ended at `end` (seconds since the epoch): its segments
/// up to then, every host's merged as [`decode_fixture`] merges them, decoded to the end, so
/// what was waiting then is reported as a capture's end reports it.
pub fn decode_fixture_until(dir: &Path, end: f64) -> Vec<Record> {
    use zkfle::capture::SegmentSource;
    let hosts = host_captures(dir);
    let mut kept = Vec::new();
    if !hosts.is_empty() {
        let fixed = vec![None; hosts.len()];
        let (mut merged, _) = capture::merge::open_files(&hosts, &fixed).expect("captures open");
        while let Some(r) = merged.next_segment(|s| {
            if s.time.as_secs_f64() <= end {
                kept.push(s.to_segment());
            }
        }) {
            r.expect("segment");
        }
    } else {
        kept = segments(dir)
            .into_iter()
            .filter(|s| s.time.as_secs_f64() <= end)
            .collect();
    }
    Decoder::new(kept.into_iter().map(Ok), options(dir)).collect()
}

/// The capture's TCP segments (of every host's capture, for a multi-host fixture).
pub fn segments(dir: &Path) -> Vec<TcpSegment> {
    let hosts = host_captures(dir);
    if !hosts.is_empty() {
        return hosts
            .iter()
            .flat_map(|p| capture::open(p).unwrap().map(|s| s.expect("segment")))
            .collect();
    }
    let path = capture_file(dir).unwrap();
    capture::open(path.to_str().unwrap())
        .unwrap()
        .map(|s| s.expect("segment"))
        .collect()
}

/// Notifications in records: (from, to, notification, capture time).
pub fn notifications(
    records: &[Record],
) -> Vec<(Option<i64>, Option<i64>, &zkfle::wire::Notification, f64)> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Notification(n) => Some((r.from_sid, r.to_sid, n, r.time.as_secs_f64())),
            _ => None,
        })
        .collect()
}

/// A `Notification:` line a server logged on receipt (3.5+ or 3.4 wording).
///
/// 3.5+: `Notification: my state:LOOKING; n.sid:1, n.state:LOOKING, n.leader:1, n.round:0x1,
/// n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0`
///
/// 3.4.6+: `Notification: 1 (message format version), 3 (n.leader), 0x0 (n.zxid), 0x1
/// (n.round), LOOKING (n.state), 3 (n.sid), 0x0 (n.peerEpoch) LOOKING (my state)`: no config
/// version (`config_version` is 0), and the version is the field as sent (3.4 reads it from a
/// 40-byte message, where 3.5+ does not).
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    /// When it was logged (seconds since the epoch; the logs are in UTC).
    pub time: f64,
    pub receiver: i64,
    pub sender: i64,
    pub state: String,
    pub leader: i64,
    pub round: i64,
    pub peer_epoch: i64,
    pub zxid: i64,
    pub version: i64,
    pub config_version: i64,
}

fn field<'a>(line: &'a str, key: &str, end: char) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    Some(rest[..rest.find(end).unwrap_or(rest.len())].trim())
}

fn hex(s: &str) -> i64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex field") as i64
}

/// The value before ` (NAME)` in a 3.4 `Notification:` line.
fn field34<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let end = line.find(&format!(" ({name})"))?;
    let start = line[..end].rfind([' ', ','])? + 1;
    Some(&line[start..end])
}

/// Parses a 3.4 `Notification:` receipt line.
pub fn parse_logged_34(line: &str, receiver: i64) -> Option<Logged> {
    let body = &line[line.find("] - Notification: ")?..];
    if !body.ends_with("(my state)") {
        return None;
    }
    Some(Logged {
        time: log_time(line),
        receiver,
        sender: field34(body, "n.sid")?.parse().ok()?,
        state: field34(body, "n.state")?.to_string(),
        leader: field34(body, "n.leader")?.parse().ok()?,
        round: hex(field34(body, "n.round")?),
        peer_epoch: hex(field34(body, "n.peerEpoch")?),
        zxid: hex(field34(body, "n.zxid")?),
        version: hex(field34(body, "message format version")?),
        config_version: 0,
    })
}

/// Whether `server.<sid>.log` is in 3.4 wording (its `Notification:` lines end in `(my state)`).
pub fn logs_in_34_wording(dir: &Path, sid: i64) -> bool {
    std::fs::read_to_string(dir.join(format!("server.{sid}.log")))
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("] - Notification: ") && l.ends_with("(my state)"))
}

/// Parses every `Notification:` receipt line of `server.<receiver>.log`, in either wording.
pub fn logged_notifications(dir: &Path, receiver: i64) -> Vec<Logged> {
    let text =
        std::fs::read_to_string(dir.join(format!("server.{receiver}.log"))).unwrap_or_default();
    let mut out: Vec<Logged> = text
        .lines()
        .filter_map(|l| parse_logged_34(l, receiver))
        .collect();
    out.extend(
        text.lines()
            // Java's `... - Notification: my state:...` and zkfle's, in the same words.
            .filter(|l| l.contains(" Notification: my state:"))
            .map(|l| Logged {
                time: log_time(l),
                receiver,
                sender: field(l, "n.sid:", ',').unwrap().parse().unwrap(),
                state: field(l, "n.state:", ',').unwrap().to_string(),
                leader: field(l, "n.leader:", ',').unwrap().parse().unwrap(),
                round: hex(field(l, "n.round:", ',').unwrap()),
                peer_epoch: hex(field(l, "n.peerEpoch:", ',').unwrap()),
                zxid: hex(field(l, "n.zxid:", ',').unwrap()),
                version: hex(field(l, "message format version:", ',').unwrap()),
                config_version: hex(field(l, "n.config version:", '\n').unwrap()),
            }),
    );
    out
}

/// `N Received version: V my version: M` lines of `server.<receiver>.log` (Java's and
/// zkfle's words): a LOOKING server sent a newer config, which it takes instead of counting
/// the message. As (time, V).
pub fn logged_config_takes(dir: &Path, receiver: i64) -> Vec<(f64, i64)> {
    let text =
        std::fs::read_to_string(dir.join(format!("server.{receiver}.log"))).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let v = field(l, "Received version: ", ' ')?;
            Some((log_time(l), i64::from_str_radix(v, 16).ok()?))
        })
        .collect()
}

/// The time at the start of a log4j line, `2026-11-29 17:29:56,430`, read as UTC.
pub fn log_time(line: &str) -> f64 {
    let n = |a: usize, b: usize| line[a..b].parse::<i64>().expect("log timestamp");
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    secs as f64 + n(20, 23) as f64 / 1000.0
}

/// `About to leave FLE instance: leader=L, zxid=Z, my id=M, my state=S` lines: each decision
/// server `sid` logged, as (state, leader).
pub fn logged_decisions(dir: &Path, sid: i64) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(dir.join(format!("server.{sid}.log"))).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("About to leave FLE instance:"))
        .map(|l| {
            (
                field(l, "my state=", '\n').unwrap().to_string(),
                field(l, "leader=", ',').unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Writes segments as a pcap file.
pub fn write_pcap(path: &Path, segments: &[TcpSegment]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = zkfle::capture::PcapWriter::new(file).unwrap();
    for s in segments {
        w.write(s).unwrap();
    }
    w.finish().unwrap();
}

/// What a server's log says about its elections and syncs, with the log's times.
#[derive(Debug, Default, Clone)]
pub struct LoggedStory {
    /// `About to leave FLE instance: leader=L, ... my state=S`: (time, state, leader); and
    /// the handovers of a reconfig, which skip FLE: `Suggested leader: L` (the designated
    /// leader), then `QuorumPeer@N - S` as the server enters state S.
    pub decisions: Vec<(f64, String, i64)>,
    /// `FOLLOWING|LEADING - LEADER ELECTION TOOK - N MS`: (time, state, seconds).
    pub took: Vec<(f64, String, f64)>,
    /// `Getting a diff from the leader` / `Getting a snapshot from leader` / `Truncating log`:
    /// (time, DIFF|SNAP|TRUNC).
    pub syncs: Vec<(f64, &'static str)>,
    /// `Learner received UPTODATE message`.
    pub uptodate: Vec<f64>,
    /// `Have quorum of supporters` (the leader serves from here).
    pub supporters: Vec<f64>,
    /// `Exception when following the leader` / `Exception when observing the leader`: the
    /// learner gave its leader up.
    pub left_leader: Vec<f64>,
    /// `New election. My id = N`: the server began looking (a process's first one is its
    /// start).
    pub new_elections: Vec<f64>,
    /// `this leader is not the designated leader anymore`: as leader, it committed a reconfig
    /// that hands its leadership over.
    pub handed_over: Vec<f64>,
}

/// Reads `server.<sid>.log` for [`LoggedStory`].
pub fn logged_story(dir: &Path, sid: i64) -> LoggedStory {
    let text = std::fs::read_to_string(dir.join(format!("server.{sid}.log"))).unwrap_or_default();
    let mut s = LoggedStory::default();
    // A designated leader not yet taken (QuorumPeer.updateVote).
    let mut suggested: Option<i64> = None;
    for l in text.lines() {
        if l.len() < 23 || !l.as_bytes()[0].is_ascii_digit() {
            continue;
        }
        let t = log_time(l);
        // (The state line is looked for only while a designated leader waits.)
        let entered = || {
            ["LEADING", "FOLLOWING", "OBSERVING"]
                .into_iter()
                .find(|state| {
                    l.contains("QuorumPeer@")
                        && l.strip_suffix(state).is_some_and(|r| r.ends_with("] - "))
                })
        };
        if let Some(at) = l.find(" - Suggested leader: ") {
            suggested = l[at + " - Suggested leader: ".len()..].trim().parse().ok();
        } else if let Some(leader) = suggested
            && let Some(state) = entered()
        {
            s.decisions.push((t, state.to_string(), leader));
            suggested = None;
        }
        if l.contains("this leader is not the designated leader anymore") {
            s.handed_over.push(t);
        }
        if l.contains(" - New election. My id = ") {
            s.new_elections.push(t);
        } else if l.contains("About to leave FLE instance:") {
            suggested = None;
            s.decisions.push((
                t,
                field(l, "my state=", '\n').unwrap().to_string(),
                field(l, "leader=", ',').unwrap().parse().unwrap(),
            ));
        } else if let Some(at) = l.find(" - LEADER ELECTION TOOK - ") {
            let state = l[..at].rsplit(' ').next().unwrap().to_string();
            let ms: f64 = l[at + " - LEADER ELECTION TOOK - ".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            s.took.push((t, state, ms / 1000.0));
        } else if l.contains("Getting a diff from the leader") {
            s.syncs.push((t, "DIFF"));
        } else if l.contains("Getting a snapshot from leader") {
            s.syncs.push((t, "SNAP"));
        } else if l.contains("Truncating log to get in sync with the leader") {
            s.syncs.push((t, "TRUNC"));
        } else if l.contains("Learner received UPTODATE message") {
            s.uptodate.push(t);
        } else if l.contains("Have quorum of supporters") {
            s.supporters.push(t);
        } else if l.contains("Exception when following the leader")
            || l.contains("Exception when observing the leader")
        {
            s.left_leader.push(t);
        }
    }
    s
}

/// Whether a fixture's capture has the quorum port (recorded without `--election-only`).
pub fn has_quorum_port(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("README.md"))
        .unwrap_or_default()
        .contains("(election and quorum ports)")
}
