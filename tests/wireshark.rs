//! The generated Wireshark dissector (`zkfle wireshark-dissector`) in a real tshark (Debian's
//! `tshark`, installed by scripts/test.sh): on every fixture, every field it shows equals
//! zkfle's own decode of the same message; and on a quorum-port capture (packets written by
//! zkfle's codec, split across TCP segments anywhere, with a snapshot after SNAP), every
//! packet it shows is the one zkfle's quorum decoder reads.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;
use zkfle::capture::{TcpSegment, Timestamp};
use zkfle::decode::Body;
use zkfle::wire::quorum::{
    Id, LearnerInfo, QuorumItem, QuorumPacket, QuorumStreamDecoder, TxnHeader, ptype,
};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn dissector(dir: &Path, election_ports: &[u16], quorum_ports: &[u16]) -> PathBuf {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zkfle"));
    cmd.arg("wireshark-dissector");
    for p in election_ports {
        cmd.args(["--election-port", &p.to_string()]);
    }
    for p in quorum_ports {
        cmd.args(["--quorum-port", &p.to_string()]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("zookeeper.lua");
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// Each message tshark shows: (src, dst, field -> value) for the protocol `proto`.
fn tshark(
    lua: &Path,
    capture: &Path,
    proto: &str,
) -> Vec<(String, String, BTreeMap<String, String>)> {
    tshark_with(lua, capture, proto, &[])
}

/// tshark's output for `capture` read with the dissector `lua` and `args`; it must succeed
/// without a Lua error.
fn run_tshark(lua: &Path, capture: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("tshark")
        .args(args)
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(capture)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("tshark is not installed: scripts/test.sh installs it (apt-get install tshark)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark: {stderr}");
    assert!(!stderr.contains("Lua"), "tshark: {stderr}");
    out.stdout
}

/// [`tshark`] with more of tshark's options (`-d`, `-o`).
fn tshark_with(
    lua: &Path,
    capture: &Path,
    proto: &str,
    options: &[&str],
) -> Vec<(String, String, BTreeMap<String, String>)> {
    let layers = format!("ip ipv6 tcp {proto}");
    let mut args = options.to_vec();
    args.extend(["-T", "json", "--no-duplicate-keys", "-j", &layers]);
    let packets: Vec<Value> = serde_json::from_slice(&run_tshark(lua, capture, &args)).unwrap();
    let mut items = Vec::new();
    for p in packets {
        let l = &p["_source"]["layers"];
        let Some(pdus) = l.get(proto) else { continue };
        let ip = if l.get("ip").is_some() {
            &l["ip"]
        } else {
            &l["ipv6"]
        };
        let (src_ip, dst_ip) = if l.get("ip").is_some() {
            (
                ip["ip.src"].as_str().unwrap(),
                ip["ip.dst"].as_str().unwrap(),
            )
        } else {
            (
                ip["ipv6.src"].as_str().unwrap(),
                ip["ipv6.dst"].as_str().unwrap(),
            )
        };
        let addr = |ip: &str, port: &Value| -> String {
            let port: u16 = port.as_str().unwrap().parse().unwrap();
            SocketAddr::new(ip.parse().unwrap(), port).to_string()
        };
        let src = addr(src_ip, &l["tcp"]["tcp.srcport"]);
        let dst = addr(dst_ip, &l["tcp"]["tcp.dstport"]);
        let pdus = match pdus {
            Value::Array(a) => a.clone(),
            one => vec![one.clone()],
        };
        for pdu in pdus {
            let mut fields = BTreeMap::new();
            flatten(&pdu, proto, &mut fields);
            items.push((src.clone(), dst.clone(), fields));
        }
    }
    items
}

fn flatten(v: &Value, proto: &str, out: &mut BTreeMap<String, String>) {
    if let Value::Object(m) = v {
        for (k, v) in m {
            match v {
                Value::String(s) if k.starts_with(&format!("{proto}.")) => {
                    let name = k[proto.len() + 1..].to_string();
                    assert!(out.insert(name, s.clone()).is_none(), "{k} twice");
                }
                Value::Object(_) | Value::Array(_) => flatten(v, proto, out),
                _ => {}
            }
        }
    }
    if let Value::Array(a) = v {
        for x in a {
            flatten(x, proto, out);
        }
    }
}

/// tshark shows text fields with C escapes.
fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\\\", "\\")
}

fn canonical(src: &str, dst: &str, f: &BTreeMap<String, String>) -> String {
    let mut s = format!("{src} > {dst}");
    for (k, v) in f {
        s.push_str(&format!(" | {k}={}", unescape(v)));
    }
    s
}

#[test]
fn tshark_shows_every_fixture_field_as_zkfle_decodes_it() {
    let dir = scratch("wireshark-fixtures");
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().to_string();
        let lua = dissector(&dir, &election_ports(&fixture), &[2888]);
        let shown: Vec<String> = {
            let mut v: Vec<String> = tshark(&lua, &capture_file(&fixture).unwrap(), "zk_election")
                .iter()
                .map(|(s, d, f)| canonical(s, d, f))
                .collect();
            v.sort();
            v
        };
        let mut decoded = Vec::new();
        for r in decode_fixture(&fixture) {
            let mut f = BTreeMap::new();
            let mut put = |k: &str, v: String| {
                f.insert(k.to_string(), v);
            };
            match &r.body {
                Body::Initial(m) => {
                    match m.protocol.code() {
                        Some(code) => {
                            put(
                                "form",
                                if code == -65536 {
                                    "initial_v1"
                                } else {
                                    "initial_v2"
                                }
                                .into(),
                            );
                            put("protocol_version", code.to_string());
                            put("address_length", m.address_text.len().to_string());
                            put("addresses", m.address_text.clone());
                        }
                        None => put("form", "initial_legacy".into()),
                    }
                    put("sid", m.sid.to_string());
                }
                Body::Notification(n) => {
                    let form = match (n.peer_epoch, n.version, &n.config) {
                        (None, _, _) => "notification_28",
                        (Some(_), None, _) => "notification_36",
                        (Some(_), Some(_), None) => "notification_40",
                        (Some(_), Some(_), Some(_)) => "notification_config",
                    };
                    put("form", form.into());
                    put("frame_length", n.size().to_string());
                    put("state", n.state.code().to_string());
                    put("leader", n.leader.to_string());
                    put("zxid", hex_zxid(n.zxid));
                    put("election_epoch", n.election_epoch.to_string());
                    if let Some(pe) = n.peer_epoch {
                        put("peer_epoch", pe.to_string());
                    }
                    if let Some(v) = n.version {
                        put("version", v.to_string());
                    }
                    if let Some(c) = &n.config {
                        put("config_length", c.len().to_string());
                        put("config", String::from_utf8_lossy(c).into_owned());
                    }
                    if !n.trailing.is_empty() {
                        put("trailing", hex_colons(&n.trailing));
                    }
                }
                // The election port's messages only (the quorum port has its own test).
                Body::Problem(_) | Body::Quorum(_) | Body::Closed { .. } => continue,
            }
            decoded.push(canonical(
                &r.src.unwrap().to_string(),
                &r.dst.unwrap().to_string(),
                &f,
            ));
        }
        decoded.sort();
        assert!(decoded.len() > 20, "{name}");
        if shown != decoded {
            let only_shown: Vec<_> = shown
                .iter()
                .filter(|s| !decoded.contains(s))
                .take(3)
                .collect();
            let only_decoded: Vec<_> = decoded
                .iter()
                .filter(|s| !shown.contains(s))
                .take(3)
                .collect();
            panic!(
                "{name}: tshark showed {} messages, zkfle decoded {}\nonly tshark: {only_shown:#?}\nonly zkfle: {only_decoded:#?}",
                shown.len(),
                decoded.len()
            );
        }
    }
}

/// A zxid as the dissector shows it: in hex, as ZooKeeper logs it.
fn hex_zxid(zxid: i64) -> String {
    format!("{:#018x}", zxid as u64)
}

fn hex_colons(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A learner's sync with a leader on the quorum port, as the codec writes it: the leader's
/// stream (LEADERINFO, SNAP and a snapshot, NEWLEADER, UPTODATE, PROPOSAL, COMMIT, PING with
/// an authinfo) and the learner's (FOLLOWERINFO with LearnerInfo, ACKEPOCH, ACKs).
fn quorum_streams() -> (Vec<u8>, Vec<u8>) {
    let mut leader = Vec::new();
    let put = |out: &mut Vec<u8>, p: QuorumPacket| out.extend(p.encode().unwrap());
    put(
        &mut leader,
        QuorumPacket::new(
            ptype::LEADERINFO,
            2 << 32,
            Some(0x10000i32.to_be_bytes().to_vec()),
        ),
    );
    put(
        &mut leader,
        QuorumPacket::new(ptype::SNAP, 0x1_0000_0004, None),
    );
    // An empty data tree: no sessions, no ACLs, the "/" end marker, then the signature.
    leader.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'/']);
    leader.extend([0, 0, 0, 10]);
    leader.extend(b"BenWasHere");
    put(
        &mut leader,
        QuorumPacket::new(ptype::NEWLEADER, 2 << 32, Some(Vec::new())),
    );
    put(&mut leader, QuorumPacket::new(ptype::UPTODATE, 0, None));
    let header = TxnHeader {
        client_id: 0x1234_5678,
        cxid: 9,
        zxid: (2 << 32) | 1,
        time: 1_790_000_000_000,
        op: 1,
    };
    let mut data = header.encode().to_vec();
    data.extend(b"/node and some create txn body bytes");
    put(
        &mut leader,
        QuorumPacket::new(ptype::PROPOSAL, (2 << 32) | 1, Some(data)),
    );
    put(
        &mut leader,
        QuorumPacket::new(ptype::COMMIT, (2 << 32) | 1, None),
    );
    let mut ping = QuorumPacket::new(ptype::PING, (2 << 32) | 1, Some(vec![0; 12]));
    ping.authinfo = Some(vec![Id {
        scheme: Some(b"digest".to_vec()),
        id: Some(b"user:hash".to_vec()),
    }]);
    put(&mut leader, ping);
    let mut learner = Vec::new();
    let info = LearnerInfo {
        sid: 4,
        protocol_version: 0x10000,
        config_version: 0x1_0000_0000,
    };
    put(&mut learner, QuorumPacket::follower_info(1, &info));
    put(&mut learner, QuorumPacket::ack_epoch(0x1_0000_0004, 1));
    put(&mut learner, QuorumPacket::ack(2 << 32));
    put(&mut learner, QuorumPacket::ack((2 << 32) | 1));
    put(&mut learner, QuorumPacket::ping_reply((2 << 32) | 1));
    (leader, learner)
}

/// What zkfle's quorum decoder reads from one direction, as the dissector's field names.
fn zkfle_packets(stream: &[u8]) -> Vec<BTreeMap<String, String>> {
    let mut d = QuorumStreamDecoder::new();
    let mut input = stream;
    let mut out = Vec::new();
    // A killed server's stream may stop inside a packet: the decoder keeps that part.
    while let Ok(Some(item)) = d.decode(&mut input) {
        let QuorumItem::Packet { packet: p, .. } = item else {
            continue;
        };
        let mut f = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            f.insert(k.to_string(), v);
        };
        put("type", p.ptype.to_string());
        put("zxid", hex_zxid(p.zxid));
        put(
            "data_length",
            p.data.as_ref().map_or(-1, |d| d.len() as i64).to_string(),
        );
        if let Some(d) = p.data.as_ref().filter(|d| !d.is_empty()) {
            put("data", hex_colons(d));
        }
        put(
            "authinfo_count",
            p.authinfo
                .as_ref()
                .map_or(-1, |a| a.len() as i64)
                .to_string(),
        );
        for id in p.authinfo.iter().flatten() {
            let s = id.scheme.as_deref().unwrap();
            let i = id.id.as_deref().unwrap();
            put("scheme_length", s.len().to_string());
            put("scheme", String::from_utf8_lossy(s).into_owned());
            put("id_length", i.len().to_string());
            put("id", String::from_utf8_lossy(i).into_owned());
        }
        match p.ptype {
            ptype::FOLLOWERINFO | ptype::OBSERVERINFO => {
                let li = LearnerInfo::decode(p.data.as_deref().unwrap()).unwrap();
                put("learner_sid", li.sid.to_string());
                put("learner_protocol_version", li.protocol_version.to_string());
                put("learner_config_version", li.config_version.to_string());
            }
            ptype::LEADERINFO => put(
                "leader_protocol_version",
                p.data_i32("x").unwrap().to_string(),
            ),
            ptype::ACKEPOCH => put("ack_epoch", p.data_i32("x").unwrap().to_string()),
            ptype::PROPOSAL => {
                let h = TxnHeader::decode(p.data.as_deref().unwrap()).unwrap();
                put("txn_client_id", h.client_id.to_string());
                put("txn_cxid", h.cxid.to_string());
                put("txn_zxid", hex_zxid(h.zxid));
                put("txn_time", h.time.to_string());
                put("txn_type", h.op.to_string());
            }
            _ => {}
        }
        out.push(f);
    }
    out
}

#[test]
fn tshark_reads_quorum_packets_split_anywhere_as_zkfle_does() {
    let dir = scratch("wireshark-quorum");
    let (leader, learner) = quorum_streams();
    let l: SocketAddr = "127.0.0.2:2888".parse().unwrap();
    let f: SocketAddr = "127.0.0.1:40001".parse().unwrap();
    let mut segs = Vec::new();
    let mut t = 0i64;
    let mut seg = |src: SocketAddr, dst: SocketAddr, seq: u32, syn: bool, payload: &[u8]| {
        t += 1;
        segs.push(TcpSegment {
            time: Timestamp {
                secs: 1_790_000_000,
                nanos: (t * 1000) as u32,
            },
            src,
            dst,
            seq,
            ack: if syn && src == f { None } else { Some(1) },
            syn,
            fin: false,
            rst: false,
            payload: payload.to_vec(),
            missing: 0,
            record: 0,
        });
    };
    seg(f, l, 1000, true, &[]);
    seg(l, f, 5000, true, &[]);
    // Pieces of every size from 1 to 23 bytes, so boundaries fall inside every field.
    let (mut a, mut b, mut k) = (0usize, 0usize, 1usize);
    while a < learner.len() || b < leader.len() {
        let n = k % 23 + 1;
        if a < learner.len() {
            let e = (a + n).min(learner.len());
            seg(f, l, 1001 + a as u32, false, &learner[a..e]);
            a = e;
        }
        if b < leader.len() {
            let e = (b + n + 3).min(leader.len());
            seg(l, f, 5001 + b as u32, false, &leader[b..e]);
            b = e;
        }
        k += 1;
    }
    let pcap = dir.join("quorum.pcap");
    write_pcap(&pcap, &segs);
    let lua = dissector(&dir, &[3888], &[2888]);
    let shown = tshark(&lua, &pcap, "zk_quorum");
    let from = |who: SocketAddr| -> Vec<BTreeMap<String, String>> {
        shown
            .iter()
            .filter(|(s, _, _)| *s == who.to_string())
            .map(|(_, _, f)| f.clone())
            .filter(|f| f.contains_key("type"))
            .collect()
    };
    assert_eq!(from(f), zkfle_packets(&learner));
    assert_eq!(from(l), zkfle_packets(&leader));
    // The snapshot is shown as snapshot data, ended by its signature.
    assert!(
        shown
            .iter()
            .any(|(_, _, f)| f.get("snapshot_end").map(String::as_str) == Some("1"))
    );
}

use common::zab;

/// Real Java quorum traffic: a 3.8.0 ensemble captured on port 2888 from its start, through
/// writes, a leader kill, the re-election and the old leader's return (its sync by DIFF or
/// SNAP), every packet shown by tshark equals zkfle's quorum decode, direction by direction.
#[test]
fn tshark_reads_a_live_java_quorum_capture_as_zkfle_does() {
    use zkfle::capture::{Direction, Reassembler, ReassemblyConfig, StreamEvent};
    let dir = scratch("wireshark-live");
    let pcap = dir.join("quorum.pcap");
    let _lock = zab::lock_loopback();
    let tcpdump = Tcpdump(
        Command::new("tcpdump")
            .args(["-i", "lo", "-s", "0", "-U", "-n", "-w"])
            .arg(&pcap)
            .arg("tcp port 2888")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tcpdump (root) is needed for this test"),
    );
    std::thread::sleep(std::time::Duration::from_millis(800));
    {
        let e = zab::Ensemble::start(
            "wireshark",
            "1:participant,2:participant,3:participant",
            &["--tick", "200"],
        );
        e.run(&["wait-stable", "--timeout", "30"]);
        zab::write_all(1, &zab::paths("a", 20), std::time::Duration::from_secs(20));
        let leader = e.leader(&[1, 2, 3]).expect("a leader");
        e.run(&["stop-node", &leader.to_string(), "--kill"]);
        let other = if leader == 1 { 2 } else { 1 };
        zab::write_all(
            other,
            &zab::paths("b", 20),
            std::time::Duration::from_secs(30),
        );
        e.run(&["start-node", &leader.to_string()]);
        e.run(&["wait-stable", "--timeout", "30"]);
        zab::write_all(
            other,
            &zab::paths("c", 5),
            std::time::Duration::from_secs(20),
        );
        e.run(&["stop"]);
    }
    drop(tcpdump);

    // zkfle's side: each direction of each connection reassembled, then decoded.
    let mut streams: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut ends: BTreeMap<u64, (SocketAddr, SocketAddr)> = BTreeMap::new();
    let mut re = Reassembler::new(ReassemblyConfig::default());
    let mut events = Vec::new();
    for seg in zkfle::capture::open(pcap.to_str().unwrap()).unwrap() {
        re.push(seg.unwrap(), &mut events);
    }
    re.finish(&mut events);
    for ev in events {
        match ev {
            StreamEvent::Opened {
                conn,
                initiator,
                acceptor,
                ..
            } => {
                ends.insert(conn.0, (initiator, acceptor));
            }
            StreamEvent::Data {
                conn, dir, bytes, ..
            } => {
                let (i, a) = ends[&conn.0];
                let key = match dir {
                    Direction::FromInitiator => format!("{i} > {a} #{}", conn.0),
                    Direction::FromAcceptor => format!("{a} > {i} #{}", conn.0),
                };
                streams.entry(key).or_default().extend(bytes);
            }
            StreamEvent::Gap { .. } => panic!("a gap in the loopback capture"),
            _ => {}
        }
    }
    let mut decoded: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for (key, bytes) in &streams {
        let dir_key = key.split(" #").next().unwrap().to_string();
        decoded
            .entry(dir_key)
            .or_default()
            .extend(zkfle_packets(bytes));
    }
    // tshark's side.
    let lua = dissector(&dir, &[3888], &[2888]);
    let mut shown: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for (s, d, f) in tshark(&lua, &pcap, "zk_quorum") {
        if f.contains_key("type") {
            shown.entry(format!("{s} > {d}")).or_default().push(f);
        }
    }
    let total: usize = decoded.values().map(Vec::len).sum();
    assert!(total > 100, "only {total} packets captured");
    let types: BTreeSet<String> = decoded
        .values()
        .flatten()
        .map(|f| f["type"].clone())
        .collect();
    for t in [
        ptype::FOLLOWERINFO,
        ptype::LEADERINFO,
        ptype::ACKEPOCH,
        ptype::PROPOSAL,
        ptype::ACK,
        ptype::COMMIT,
        ptype::UPTODATE,
        ptype::NEWLEADER,
    ] {
        assert!(
            types.contains(&t.to_string()),
            "no packet of type {t} in {types:?}"
        );
    }
    assert_eq!(shown, decoded);
}

/// A running tcpdump, stopped the way Ctrl-C stops it (so it flushes its file) when dropped,
/// also when the test fails.
struct Tcpdump(std::process::Child);

impl Drop for Tcpdump {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Damaged traffic on both ports (random bytes, frames and packets with lengths out of range,
/// a SNAP followed by garbage): tshark finishes, with no Lua error, and flags what it cannot read.
#[test]
fn tshark_survives_damaged_traffic() {
    let dir = scratch("wireshark-damaged");
    let mut segs = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut add = |src: &str, dst: &str, seq: u32, payload: Vec<u8>, t: u32| {
        segs.push(TcpSegment {
            time: Timestamp {
                secs: 1_790_000_000,
                nanos: t * 1000,
            },
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            ack: Some(1),
            syn: false,
            fin: false,
            rst: false,
            payload,
            missing: 0,
            record: 0,
        });
    };
    let mut t = 0;
    for port in [3888u16, 2888] {
        for conn in 0..20u32 {
            let client = format!("127.0.0.1:{}", 40000 + conn + u32::from(port));
            let server = format!("127.0.0.2:{port}");
            let mut seq = 1000;
            let mut payload: Vec<u8> = match conn % 5 {
                // A frame or packet length far out of range.
                0 => vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
                // A versioned initial message with a negative address length.
                1 => [
                    (-65536i64).to_be_bytes().to_vec(),
                    1i64.to_be_bytes().to_vec(),
                    vec![0xff; 4],
                ]
                .concat(),
                // SNAP, then garbage that never ends the snapshot.
                2 => QuorumPacket::new(ptype::SNAP, 1, None).encode().unwrap(),
                _ => Vec::new(),
            };
            payload.extend((0..(rand() % 300)).map(|_| rand() as u8));
            for piece in payload.chunks(1 + (rand() % 40) as usize) {
                t += 1;
                add(&client, &server, seq, piece.to_vec(), t);
                seq += piece.len() as u32;
            }
        }
    }
    let pcap = dir.join("damaged.pcap");
    write_pcap(&pcap, &segs);
    let lua = dissector(&dir, &[3888], &[2888]);
    let out = Command::new("timeout")
        .arg("120")
        .arg("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("Lua Error"), "{text}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Lua"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("ZK election") && text.contains("ZK quorum"),
        "{text}"
    );
}

/// The fixture's messages, as the dissector generated for its ports shows them.
fn shown_sorted(lua: &Path, capture: &Path, options: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = tshark_with(lua, capture, "zk_election", options)
        .iter()
        .map(|(s, d, f)| canonical(s, d, f))
        .collect();
    v.sort();
    v
}

/// On ports the dissector was not generated for (the IPv6 fixture's 3881-3883), "Decode As"
/// and the `zk_election.ports` preference both show every message, initial messages included,
/// as the dissector generated for those ports does.
#[test]
fn decode_as_and_the_port_preference_read_other_ports() {
    let dir = scratch("wireshark-ports");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ipv6");
    let capture = capture_file(&fixture).unwrap();
    let ports = election_ports(&fixture);
    assert!(
        !ports.contains(&3888),
        "the fixture's ports are not the default"
    );
    let own = dissector(&dir.join("own"), &ports, &[2888]);
    let expected = shown_sorted(&own, &capture, &[]);
    assert!(
        expected.iter().any(|m| m.contains("form=initial_v")),
        "{expected:#?}"
    );
    let default = dissector(&dir.join("default"), &[], &[]);
    assert!(shown_sorted(&default, &capture, &[]).is_empty());
    let mut decode_as = Vec::new();
    for p in &ports {
        decode_as.push("-d".to_string());
        decode_as.push(format!("tcp.port=={p},zk_election"));
    }
    let decode_as: Vec<&str> = decode_as.iter().map(String::as_str).collect();
    assert_eq!(
        shown_sorted(&default, &capture, &decode_as),
        expected,
        "Decode As"
    );
    let range = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let pref = format!("zk_election.ports:{range}");
    assert_eq!(
        shown_sorted(&default, &capture, &["-o", &pref]),
        expected,
        "the ports preference"
    );
}

/// A second dissection of every frame (tshark -2, as the GUI re-dissects a frame on each
/// click) gives the same Info column as the first: each frame's first message replaces TCP's
/// text, and nothing is appended twice.
#[test]
fn the_info_column_is_the_same_when_frames_are_dissected_again() {
    let dir = scratch("wireshark-info");
    for name in ["basic3", "observer-zab", "v3.9.5-lagging3"] {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        let lua = dissector(&dir, &election_ports(&fixture), &quorum_ports(&fixture));
        let capture = capture_file(&fixture).unwrap();
        let info = |two_pass: bool| -> Vec<String> {
            let mut args = vec!["-T", "fields", "-e", "frame.number", "-e", "_ws.col.Info"];
            args.extend(["-Y", "zk_election or zk_quorum"]);
            if two_pass {
                args.push("-2");
            }
            String::from_utf8_lossy(&run_tshark(&lua, &capture, &args))
                .lines()
                .map(str::to_string)
                .collect()
        };
        let once = info(false);
        assert!(once.len() > 20, "{name}");
        for line in &once {
            assert!(
                !line.contains('→') && !line.contains("[PSH") && !line.contains("[ACK]"),
                "{name}: TCP's text left in Info: {line}"
            );
        }
        assert_eq!(info(true), once, "{name}");
    }
}
