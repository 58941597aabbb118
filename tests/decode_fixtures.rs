//! The decoder against real captures of Java ZooKeeper ensembles (fixtures/, recorded by
//! scripts/record-fixture.sh with the servers' logs beside them): byte-exact round trips, and
//! agreement with what the Java servers themselves logged.

mod common;

use std::collections::HashMap;

use common::*;
use zkfle::decode::summary::Summarizer;
use zkfle::decode::{Body, Severity};
use zkfle::json::{Message, RecordJson, message_from_json};
use zkfle::wire::{InitialMessage, JavaView, Notification};

#[test]
fn every_message_round_trips_byte_exactly() {
    for dir in fixtures() {
        let records = decode_fixture(&dir);
        let mut messages = 0;
        for r in &records {
            let msg = match &r.body {
                Body::Initial(m) => {
                    assert_eq!(InitialMessage::decode(&r.raw).as_ref(), Ok(m));
                    Message::Initial(m.clone())
                }
                Body::Notification(n) => {
                    assert_eq!(Notification::decode(&r.raw).as_ref(), Ok(n));
                    Message::Notification(n.clone())
                }
                Body::Problem(p) => {
                    assert_ne!(
                        p.severity,
                        Severity::Error,
                        "{}: {}",
                        dir.display(),
                        p.message
                    );
                    continue;
                }
            };
            messages += 1;
            assert_eq!(msg.encode().unwrap(), r.raw, "{}", dir.display());
            // The JSON contract carries everything needed to re-encode.
            let json = serde_json::to_value(RecordJson(r)).unwrap();
            assert_eq!(message_from_json(&json).unwrap().encode().unwrap(), r.raw);
            assert!(
                r.from_sid.is_some() && r.to_sid.is_some(),
                "{}: unknown sid in {json}",
                dir.display()
            );
        }
        assert!(messages > 20, "{}: only {messages} messages", dir.display());
    }
}

/// Every `Notification:` line that server M logged about a message from S (S != M) is a
/// decoded notification S -> M with the same fields, in the same order. Java logs every
/// message it accepts from a voter; messages from non-voters (observers) are answered before
/// that log line, so for those the log only has to be a subsequence. The capture stops before
/// the servers do, so lines logged after its last packet may be missing from it.
#[test]
fn decoded_notifications_match_java_logs() {
    for dir in fixtures() {
        let cfg = zoo_cfg(&dir);
        let records = decode_fixture(&dir);
        let decoded = notifications(&records);
        let capture_end = records
            .iter()
            .map(|r| r.time.as_secs_f64())
            .fold(0.0, f64::max);
        let mut checked = 0;
        for server in cfg.servers() {
            let m = server.id;
            // A 3.4 receiver reads the version field of a 40-byte message (3.5+ does not) and
            // logs no config version.
            let receiver_34 = logs_in_34_wording(&dir, m);
            let mut by_sender: HashMap<i64, Vec<Logged>> = HashMap::new();
            let all = logged_notifications(&dir, m);
            let last_logged = all.iter().map(|l| l.time).fold(0.0, f64::max);
            for l in all.into_iter().filter(|l| l.sender != m) {
                by_sender.entry(l.sender).or_default().push(l);
            }
            for (s, logged) in by_sender {
                let wire: Vec<Logged> = decoded
                    .iter()
                    .filter(|(from, to, _, _)| *from == Some(s) && *to == Some(m))
                    .filter_map(|(_, _, n, time)| match n.java_view() {
                        _ if receiver_34 => Some(Logged {
                            time: *time,
                            receiver: m,
                            sender: s,
                            state: n.state.name().to_string(),
                            leader: n.leader,
                            round: n.election_epoch,
                            peer_epoch: n.effective_peer_epoch(),
                            zxid: n.zxid,
                            version: i64::from(n.version.unwrap_or(0)),
                            config_version: 0,
                        }),
                        JavaView::Accepted {
                            version,
                            peer_epoch,
                            ..
                        } => Some(Logged {
                            time: *time,
                            receiver: m,
                            sender: s,
                            state: n.state.name().to_string(),
                            leader: n.leader,
                            round: n.election_epoch,
                            peer_epoch,
                            zxid: n.zxid,
                            version: i64::from(version),
                            config_version: n.config_version().unwrap_or(0) as i64,
                        }),
                        JavaView::Dropped(_) => None,
                    })
                    .collect();
                let sender_votes = cfg
                    .servers()
                    .any(|x| x.id == s && x.role() == zkfle::wire::Role::Participant);
                let same = |a: &Logged, b: &Logged| {
                    Logged {
                        time: 0.0,
                        ..a.clone()
                    } == Logged {
                        time: 0.0,
                        ..b.clone()
                    }
                };
                let in_capture = logged.iter().filter(|l| l.time <= capture_end).count();
                if sender_votes {
                    // Lines logged before the capture ended were all captured; messages
                    // captured after the receiver's last log line may never have been read.
                    assert!(
                        wire.len() >= in_capture,
                        "{}: {s} -> {m}: {} decoded, {} logged ({in_capture} before the capture ended)",
                        dir.display(),
                        wire.len(),
                        logged.len()
                    );
                    for extra in wire.iter().skip(logged.len()) {
                        assert!(
                            extra.time >= last_logged,
                            "{}: {s} -> {m}: {extra:?} decoded but not logged",
                            dir.display()
                        );
                    }
                    for (w, l) in wire.iter().zip(&logged) {
                        assert!(
                            same(w, l),
                            "{}: {s} -> {m}: decoded {w:?}, logged {l:?}",
                            dir.display()
                        );
                    }
                } else {
                    let mut it = wire.iter();
                    for l in logged.iter().filter(|l| l.time <= capture_end) {
                        assert!(
                            it.any(|w| same(w, l)),
                            "{}: {s} -> {m}: {l:?} not decoded",
                            dir.display()
                        );
                    }
                }
                checked += logged.len();
            }
        }
        assert!(checked > 10, "{}: only {checked} log lines", dir.display());
    }
}

/// The summary's decisions, per server and in order, are the ones each server logged
/// (`About to leave FLE instance: ... my state=...`).
#[test]
fn summary_decisions_match_java_logs() {
    for dir in fixtures() {
        let cfg = zoo_cfg(&dir);
        let records = decode_fixture(&dir);
        let mut summarizer = Summarizer::new(HashMap::new());
        for r in &records {
            summarizer.add(r);
        }
        let summary = summarizer.finish();
        for server in cfg.servers() {
            let logged = logged_decisions(&dir, server.id);
            let summarized: Vec<(String, i64)> = summary
                .rounds
                .iter()
                .flat_map(|r| r.decisions.iter())
                .filter(|d| d.sid == server.id)
                .map(|d| (d.state.name().to_string(), d.leader))
                .collect();
            assert_eq!(
                summarized,
                logged,
                "{}: sid {}\n{}",
                dir.display(),
                server.id,
                summary.to_text(0.0)
            );
        }
    }
}

/// A 3.4 capture names no addresses: without `--config`, the acceptor side of every connection
/// (and so the receiver or sender of its notifications) stays unknown; with it, every sid is
/// known (the round-trip test above decodes 3.4 fixtures with their zoo.cfg).
#[test]
fn legacy_captures_need_the_config_for_sids() {
    let legacy: Vec<_> = fixtures()
        .into_iter()
        .filter(|d| is_pure_legacy_fixture(d))
        .collect();
    if legacy.is_empty() && std::env::var("ZKFLE_FIXTURE_VERSION").is_ok() {
        return; // scripts/matrix.sh checking another version
    }
    assert!(
        !legacy.is_empty(),
        "no 3.4 fixture (fixtures/v3.4.14-basic3, recorded with scripts/zk-fetch.sh 3.4.14)"
    );
    for dir in legacy {
        let records = decode_segments(segments(&dir), options_without_config(&dir));
        let mut initials = 0;
        let mut unknown = 0;
        for r in &records {
            match &r.body {
                Body::Initial(m) => {
                    initials += 1;
                    assert_eq!(m.protocol, zkfle::wire::ProtocolVersion::Legacy);
                    assert!(m.addresses.is_empty());
                }
                Body::Notification(n) => {
                    assert_eq!(n.size(), 40, "{}: 3.4.14 sends 40 bytes", dir.display());
                    assert_eq!(n.version, Some(1));
                    if r.from_sid.is_none() || r.to_sid.is_none() {
                        unknown += 1;
                    }
                }
                Body::Problem(_) => {}
            }
        }
        assert!(initials > 0, "{}", dir.display());
        assert!(unknown > 0, "{}: sids known without config?", dir.display());
    }
}
