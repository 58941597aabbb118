//! Several captures of one ensemble, one per host (fixtures recorded by
//! scripts/record-multihost.sh: each Java server in its own network namespace, one tcpdump
//! each), read as one capture. The merged decode against the servers' logs is checked in
//! tests/decode_fixtures.rs with every other fixture; here: clock offsets recovered from
//! captures shifted by known amounts, one copy per connection, capture losses, sids across
//! files, and the command line.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use zkfle::capture::merge::{ClockOffset, open_files};
use zkfle::decode::{Body, Decoder, ProblemKind, Record};

fn zkfle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zkfle"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zkfle-multihost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// One pcap record: its 16-byte header and the packet.
type PcapRecord = (Vec<u8>, Vec<u8>);

/// A little-endian microsecond pcap's file header and records.
fn pcap_records(bytes: &[u8]) -> (Vec<u8>, Vec<PcapRecord>) {
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "tcpdump's LE pcap");
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push((
            bytes[at..at + 16].to_vec(),
            bytes[at + 16..at + 16 + incl].to_vec(),
        ));
        at += 16 + incl;
    }
    (bytes[..24].to_vec(), out)
}

fn write_pcap(path: &Path, header: &[u8], records: &[PcapRecord]) {
    let mut bytes = header.to_vec();
    for (h, p) in records {
        bytes.extend_from_slice(h);
        bytes.extend_from_slice(p);
    }
    std::fs::write(path, bytes).unwrap();
}

/// A copy of `src` whose clock reads `shift_us` microseconds later.
fn shifted(src: &str, shift_us: i64, name: &str) -> String {
    let (header, mut records) = pcap_records(&std::fs::read(src).unwrap());
    for (h, _) in &mut records {
        let secs = i64::from(u32::from_le_bytes(h[0..4].try_into().unwrap()));
        let us = i64::from(u32::from_le_bytes(h[4..8].try_into().unwrap()));
        let t = secs * 1_000_000 + us + shift_us;
        h[0..4].copy_from_slice(&(t.div_euclid(1_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&(t.rem_euclid(1_000_000) as u32).to_le_bytes());
    }
    let path = tmp(name);
    write_pcap(&path, &header, &records);
    path.to_string_lossy().into_owned()
}

fn decode(paths: &[String], dir: &Path) -> (Vec<Record>, Vec<ClockOffset>) {
    let (merged, offsets) = open_files(paths, &vec![None; paths.len()]).unwrap();
    (
        Decoder::with_source(merged, options(dir)).collect(),
        offsets,
    )
}

/// Each connection direction's records without their times, in order.
fn per_direction(records: &[Record]) -> BTreeMap<String, Vec<Record>> {
    let mut out: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for r in timeless(records) {
        out.entry(format!("{:?} -> {:?}", r.src, r.dst))
            .or_default()
            .push(r);
    }
    out
}

/// Records without their times, to compare decodes whose clocks differ.
fn timeless(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .map(|r| Record {
            time: Default::default(),
            ..r.clone()
        })
        .collect()
}

#[test]
fn shifted_clocks_are_recovered_within_5_ms() {
    for dir in multihost_fixtures() {
        let hosts = host_captures(&dir);
        let (reference, _) = decode(&hosts, &dir);
        // Hosts whose clocks run late and early by tens to hundreds of milliseconds.
        let shifts_us = [0i64, 150_000, -320_000, 87_500, -45_000];
        let copies: Vec<String> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| shifted(h, shifts_us[i], &format!("shifted.{i}.pcap")))
            .collect();
        let (records, offsets) = decode(&copies, &dir);
        for (i, o) in offsets.iter().enumerate() {
            let ClockOffset::Estimated { offset, error } = *o else {
                panic!("{}: file {i} not aligned: {o:?}", dir.display());
            };
            // The offset puts file i back on file 0's clock.
            let want = -(shifts_us[i] - shifts_us[0]) * 1000;
            assert!(
                (offset - want).abs() <= 5_000_000,
                "{}: file {i}: offset {offset} ns, expected {want} ns",
                dir.display()
            );
            assert!(error <= 5_000_000, "error {error} ns");
        }
        // Once aligned, the merged decode is the one of the unshifted captures.
        assert_eq!(
            timeless(&records),
            timeless(&reference),
            "{}",
            dir.display()
        );
        for (a, b) in records.iter().zip(&reference) {
            let d = (a.time.as_secs_f64() - b.time.as_secs_f64()).abs();
            assert!(d < 0.005, "{}: time off by {d} s", dir.display());
        }
    }
}

/// The fixtures' namespaces share the machine's clock, so every file's true offset is 0: the
/// stated error must cover it, on the partition too, where a bridge that lost track of a
/// cut-off host flooded copies of other hosts' segments to every port (they are no bound on
/// the offset: once they moved two files 48 µs off, with a stated error of 3-4 µs).
#[test]
fn the_stated_error_covers_the_true_offset() {
    for dir in multihost_fixtures() {
        let hosts = host_captures(&dir);
        let (_, offsets) = open_files(&hosts, &vec![None; hosts.len()]).unwrap();
        for (i, o) in offsets.iter().enumerate() {
            let ClockOffset::Estimated { offset, error } = *o else {
                panic!("{}: file {i} not aligned: {o:?}", dir.display());
            };
            assert!(
                offset.abs() <= error,
                "{}: file {i}: offset {offset} ns ± {error} ns, but the clocks are one",
                dir.display()
            );
        }
    }
}

/// The fixtures in which every segment reached its receiver and no host captured another's
/// traffic. A partition (`v3.9.5-partition5`) breaks both: segments are lost in the network
/// (so removing one from a capture is not always that capture's loss), and frames for a
/// cut-off host are flooded to every port (a bystander's file, decoded alone, picks those
/// connections up mid-stream, at offsets counted from its first copy: 7 such records, each at
/// its true offset in the merge). Its own test checks its story.
fn unpartitioned_fixtures() -> Vec<std::path::PathBuf> {
    multihost_fixtures()
        .into_iter()
        .filter(|d| !d.to_string_lossy().contains("partition"))
        .collect()
}

#[test]
fn each_connection_is_reported_once_with_sids_from_every_file() {
    for dir in unpartitioned_fixtures() {
        let hosts = host_captures(&dir);
        let (merged, _) = decode(&hosts, &dir);
        // No message twice: (connection, direction's sender, offset) is unique.
        // Messages (closes are per connection, not per message).
        let messages = |records: Vec<Record>| -> Vec<Record> {
            records
                .into_iter()
                .filter(|r| !matches!(r.body, Body::Closed { .. }))
                .collect()
        };
        let merged = messages(merged);
        let mut seen = HashSet::new();
        for r in &merged {
            // A message its sender cut short is in the traffic itself, not made by the merge
            // (3.6.3: a length prefix written, then the peer's RST; the union check below
            // finds it in a single file too). Nothing else may be reported.
            if let Body::Problem(p) = &r.body {
                assert!(
                    matches!(p.kind, ProblemKind::Unfinished { .. }),
                    "{}: {}",
                    dir.display(),
                    zkfle::output::problem_words(p, r.time)
                );
            }
            assert!(
                seen.insert((r.src, r.dst, r.offset)),
                "{}: twice: {r:?}",
                dir.display()
            );
            assert!(r.from_sid.is_some() && r.to_sid.is_some(), "{r:?}");
        }
        // Everything any single file holds is in the merge, once.
        let mut union = HashSet::new();
        for h in &hosts {
            let (one, _) = decode(std::slice::from_ref(h), &dir);
            for r in messages(one) {
                union.insert((r.src, r.dst, r.offset, r.raw.clone()));
            }
        }
        let merged_keys: HashSet<_> = merged
            .iter()
            .map(|r| (r.src, r.dst, r.offset, r.raw.clone()))
            .collect();
        assert_eq!(merged_keys, union, "{}", dir.display());
        assert_eq!(merged.len(), union.len());
    }
}

/// Segments one host's capture lost are filled from another's and reported as its loss.
#[test]
fn a_lost_segment_is_filled_and_reported() {
    for dir in unpartitioned_fixtures() {
        let hosts = host_captures(&dir);
        let (reference, _) = decode(&hosts, &dir);
        let (header, records) = pcap_records(&std::fs::read(&hosts[1]).unwrap());
        // A packet's TCP header and payload length (IPv4 in Ethernet).
        let tcp_of = |p: &[u8]| -> (usize, usize) {
            let ihl = usize::from(p[14] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([p[16], p[17]]));
            let doff = usize::from(p[14 + ihl + 12] >> 4) * 4;
            (14 + ihl, total - ihl - doff)
        };
        // Drop every 7th packet that carries data, SYN or FIN; pure ACKs repeat and are not
        // compared.
        let carries = |p: &[u8]| {
            let (tcp, len) = tcp_of(p);
            len > 0 || p[tcp + 13] & 0x03 != 0
        };
        // A segment is its addresses, sequence and acknowledgement numbers, flags and length:
        // a retransmission is the same segment again.
        let segment = |p: &[u8]| {
            let (tcp, len) = tcp_of(p);
            let mut id = p[26..34].to_vec();
            id.extend_from_slice(&p[tcp..tcp + 14]);
            id.extend_from_slice(&len.to_be_bytes());
            id
        };
        let mut n = 0;
        let mut dropped = Vec::new();
        let kept: Vec<_> = records
            .into_iter()
            .filter(|(_, p)| {
                if !carries(p) {
                    return true;
                }
                n += 1;
                let drop = n % 7 == 0;
                if drop {
                    dropped.push(segment(p));
                }
                !drop
            })
            .collect();
        assert!(dropped.len() > 3);
        // Only a segment the file then holds no copy of is its capture loss: one copy of a
        // retransmission missing looks like the network's loss, which is not charged.
        let held: HashSet<Vec<u8>> = kept.iter().map(|(_, p)| segment(p)).collect();
        let lost_here = dropped.iter().filter(|s| !held.contains(*s)).count();
        let lossy = tmp("lossy.pcap");
        write_pcap(&lossy, &header, &kept);
        let mut paths = hosts.clone();
        paths[1] = lossy.to_string_lossy().into_owned();
        let (merged, offsets) = open_files(&paths, &vec![None; paths.len()]).unwrap();
        let mut decoder = Decoder::with_source(merged, options(&dir));
        let records: Vec<Record> = decoder.by_ref().collect();
        assert!(
            offsets
                .iter()
                .all(|o| matches!(o, ClockOffset::Estimated { .. }))
        );
        // A segment taken from the other end's capture has that end's time, a transit later,
        // so records of different connections may interleave differently; each direction's
        // records are the same, in the same order.
        assert_eq!(
            per_direction(&records),
            per_direction(&reference),
            "{}",
            dir.display()
        );
        let losses = decoder.segments().losses();
        let lost: u64 = losses
            .iter()
            .filter(|l| l.file == 1)
            .map(|l| l.segments)
            .sum();
        assert_eq!(lost, lost_here as u64, "{losses:?}");
        assert!(losses.iter().all(|l| l.file == 1), "{losses:?}");
    }
}

#[test]
fn cli_prints_clocks_and_takes_overrides() {
    for dir in multihost_fixtures() {
        let hosts = host_captures(&dir);
        let late = shifted(&hosts[1], 250_000, "late.pcap");
        let gz = tmp("host1.pcap.gz");
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("gzip -c {} > {}", hosts[0], gz.display()))
            .status()
            .unwrap();
        assert!(status.success());
        let mut files = vec![gz.to_string_lossy().into_owned(), late.clone()];
        files.extend(hosts[2..].iter().cloned());
        // 3.4 names no election addresses: its operators give the config.
        let config: Vec<String> = if needs_config(&dir) {
            vec!["--config".into(), dir.join("zoo.cfg").display().to_string()]
        } else {
            Vec::new()
        };
        let out = zkfle()
            .args(["decode", "--summary", "--format", "jsonl"])
            .args(&config)
            .args(&files)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let clocks = v["clocks"].as_array().unwrap();
        assert_eq!(clocks.len(), files.len());
        assert_eq!(clocks[0]["status"], "reference");
        let offset = clocks[1]["offset"].as_f64().unwrap();
        assert!((offset + 0.25).abs() < 0.005, "{offset}");
        assert!(clocks[1]["error"].as_f64().unwrap() < 0.005);
        assert_eq!(v["capture_losses"], serde_json::json!([]));
        assert!(!v["rounds"].as_array().unwrap().is_empty());

        // An override replaces the estimate (given by file name).
        let out = zkfle()
            .args(["decode", "--summary", "--format", "jsonl", "--clock-offset"])
            .arg("late.pcap=-0.2")
            .args(&config)
            .args(&files)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["clocks"][1]["status"], "given");
        assert_eq!(v["clocks"][1]["offset"], -0.2);

        // A capture of another ensemble shares nothing: unaligned, not guessed.
        let other = capture_file(&fixtures()[0]).unwrap();
        let out = zkfle()
            .args(["decode", &hosts[0]])
            .arg(&other)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines()
                .any(|l| l.contains(other.to_str().unwrap()) && l.contains("unaligned")),
            "{text}"
        );

        // One file given twice, under another name: refused, naming both, for decode and
        // replay alike.
        let again = format!(
            "{}/./{}",
            dir.display(),
            hosts[0].rsplit('/').next().unwrap()
        );
        for command in [&["decode"][..], &["replay", "--as", "1"][..]] {
            let out = zkfle()
                .args(command)
                .args([&hosts[0], &hosts[1], &again])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command:?}: {err}");
            assert!(
                err.contains(&format!(
                    "{again} is the same file as {}: give each capture once",
                    hosts[0]
                )),
                "{command:?}: {err}"
            );
        }
    }
}

#[test]
fn filters_and_wall_clock_times() {
    let dir = &multihost_fixtures()[0];
    let hosts = host_captures(dir);
    let lines = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = zkfle()
            .args(["decode", "--format", "jsonl"])
            .args(args)
            .args(&hosts)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let all = lines(&[]);
    let sid2 = lines(&["--sid", "2"]);
    assert!(!sid2.is_empty() && sid2.len() < all.len());
    assert!(sid2.iter().all(|v| v["from_sid"] == 2 || v["to_sid"] == 2));
    let initial = lines(&["--type", "initial"]);
    assert!(!initial.is_empty() && initial.iter().all(|v| v["type"] == "initial"));
    // The fixture has the quorum port too.
    let quorum = lines(&["--type", "quorum"]);
    assert!(!quorum.is_empty() && quorum.iter().all(|v| v["type"] == "quorum"));
    let t0 = all[0]["time"].as_f64().unwrap();
    let late = lines(&["--since", "+5", "--until", "+8"]);
    assert!(!late.is_empty());
    assert!(late.iter().all(|v| {
        let t = v["time"].as_f64().unwrap();
        t >= t0 + 5.0 && t <= t0 + 8.0
    }));

    // The text timeline's wall-clock time is the servers' log time: each notification a
    // server logged on receipt appears within 1 s after the capture's time for it.
    let out = zkfle()
        .args(["decode", "--time", "absolute"])
        .args(&hosts)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .lines()
        .find(|l| l.contains("Notification:"))
        .unwrap()
        .to_string();
    let stamp = &first[..23];
    let when = log_time(stamp);
    let logged: Vec<f64> = (1..=hosts.len() as i64)
        .flat_map(|sid| logged_notifications(dir, sid))
        .map(|l| l.time)
        .collect();
    assert!(
        logged.iter().any(|t| (t - when).abs() < 1.0),
        "{first}: no log line near {stamp}"
    );

    // --local prints the local zone's wall clock (as the servers' logs do): 5:30 ahead here.
    let out = zkfle()
        .env("TZ", "IST-5:30")
        .args(["decode", "--local"])
        .args(&hosts)
        .output()
        .unwrap();
    let local = String::from_utf8_lossy(&out.stdout);
    let first_local = local.lines().find(|l| l.contains("Notification:")).unwrap();
    let shifted = log_time(&first_local[..23]) - when;
    assert!(
        (shifted - 5.5 * 3600.0).abs() < 0.01,
        "{first_local} vs {first}"
    );
}

/// A 5-host 3.9.5 ensemble whose leader, then two followers, were cut off for 15 s each
/// (fixtures/v3.9.5-partition5/README.md), merged, against the servers' logs: every server
/// of the failover decides in it, at the time it logged; the cut-off leader rejoins; the
/// cause is the leader's silence; and nothing the network lost, or a bridge flooded to a
/// bystander, is reported as capture loss.
#[test]
fn a_partitioned_leader_is_told_as_the_logs_tell_it() {
    let dir = multihost_fixtures()
        .into_iter()
        .find(|d| d.ends_with("v3.9.5-partition5"))
        .expect("fixture");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zkfle"))
        .args(["decode", "--summary", "--format", "jsonl"])
        .args(host_captures(&dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["capture_losses"], serde_json::json!([]), "{v}");
    let rounds = v["rounds"].as_array().unwrap();
    assert!(rounds.iter().all(|r| r["stale"].is_null()), "{v}");
    let failover = rounds
        .iter()
        .find(|r| r["kind"] == "election" && r["election_epoch"] == 2)
        .expect("the failover");
    assert_eq!(failover["winner"], 4);
    assert_eq!(failover["cause"], "leader_silent");
    let started = failover["started"].as_f64().unwrap();
    let lost = failover["leader_lost"].as_f64().unwrap();
    // The followers give up after syncLimit (5) ticks of 1 s: the leader's last packet is
    // seconds before the election.
    assert!(
        started - lost > 4.0,
        "leader lost {lost}, election {started}"
    );
    // Each server's decision at the time its log says it left FastLeaderElection.
    let logged = |sid: i64| -> f64 {
        let log = std::fs::read_to_string(dir.join(format!("server.{sid}.log"))).unwrap();
        let line = log
            .lines()
            .find(|l| l.contains("About to leave FLE instance: leader=4"))
            .unwrap_or_else(|| panic!("server.{sid}.log: no decision for 4"));
        log_time(line)
    };
    let mut sids = Vec::new();
    for d in failover["decisions"].as_array().unwrap() {
        let sid = d["sid"].as_i64().unwrap();
        let at = d["time"].as_f64().unwrap();
        assert!(
            (at - logged(sid)).abs() < 0.1,
            "sid {sid}: decided at {at}, logged {}",
            logged(sid)
        );
        sids.push(sid);
    }
    sids.sort();
    assert_eq!(sids, [1, 2, 3, 4], "{failover}");
    // The cut-off leader comes back 13 s later: a rejoin, not part of the failover.
    assert!(
        rounds.iter().any(|r| r["kind"] == "rejoin"
            && r["decisions"][0]["sid"] == 5
            && r["decisions"][0]["leader"] == 4),
        "{v}"
    );
}

/// One host's capture cut into several files (`tcpdump -C`/`-W` or `-G` rings, as
/// docs/guide.md recommends) is read as that one capture, in order and on its clock: the same
/// records as the whole file, whatever order the files are named in.
#[test]
fn a_capture_cut_into_files_reads_as_one() {
    let dirs = [
        fixtures_dir("basic3"),
        fixtures_dir("running/v3.9.5-loopback3"),
    ];
    for dir in dirs {
        let whole = capture_file(&dir).unwrap();
        let whole = whole.to_string_lossy().into_owned();
        let (header, records) = pcap_records(&std::fs::read(&whole).unwrap());
        let name = dir.file_name().unwrap().to_string_lossy().replace('/', "-");
        let thirds = records.len() / 3;
        let mut parts = Vec::new();
        for (i, chunk) in [
            &records[..thirds],
            &records[thirds..2 * thirds],
            &records[2 * thirds..],
        ]
        .into_iter()
        .enumerate()
        {
            let path = tmp(&format!("{name}.ring{i}.pcap"));
            write_pcap(&path, &header, chunk);
            parts.push(path.to_string_lossy().into_owned());
        }
        // Named out of order: the files' times give the order.
        parts.rotate_left(1);
        let (merged, offsets) = open_files(&parts, &vec![None; parts.len()]).unwrap();
        let cut: Vec<Record> = Decoder::with_source(merged, options(&dir)).collect();
        let segments = zkfle::capture::open(&whole).unwrap();
        let all: Vec<Record> = Decoder::new(segments, options(&dir)).collect();
        assert_eq!(cut, all, "{}", dir.display());
        // The first in time is the reference; each of the others continues the one before.
        assert!(
            matches!(offsets[2], ClockOffset::Estimated { offset: 0, .. }),
            "{offsets:?}"
        );
        assert_eq!(
            offsets[0],
            ClockOffset::Continues { file: 2, offset: 0 },
            "{offsets:?}"
        );
        assert_eq!(
            offsets[1],
            ClockOffset::Continues { file: 0, offset: 0 },
            "{offsets:?}"
        );
        // And the command line says so.
        let out = zkfle()
            .args(["decode", "--summary"])
            .args(&parts)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{}: continues", parts[0])), "{text}");
    }
}

fn fixtures_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}
