//! The decoder against real captures of Java ZooKeeper ensembles (fixtures/, recorded by
//! scripts/record-fixture.sh with the servers' logs beside them): byte-exact round trips, and
//! agreement with what the Java servers themselves logged.

mod common;

use std::collections::HashMap;

use common::*;
use zkfle::decode::{Body, Severity};
use zkfle::output::json::{JsonWriter, Message, message_from_json, record_value};
use zkfle::story::{Evidence, Summarizer};
use zkfle::wire::{InitialMessage, JavaView, Notification};

#[test]
fn every_message_round_trips_byte_exactly() {
    for dir in all_fixtures() {
        let records = decode_fixture(&dir);
        let mut messages = 0;
        for r in &records {
            let msg = match &r.body {
                Body::Initial(m) => {
                    assert_eq!(InitialMessage::decode(&r.raw).as_ref(), Ok(&**m));
                    Message::Initial(InitialMessage::clone(m))
                }
                Body::Notification(n) => {
                    assert_eq!(Notification::decode(&r.raw).as_ref(), Ok(n));
                    Message::Notification(n.clone())
                }
                Body::Quorum(_) | Body::Closed { .. } => continue,
                Body::Problem(p) => {
                    assert_ne!(
                        p.severity(),
                        Severity::Error,
                        "{}: {}",
                        dir.display(),
                        zkfle::output::problem_words(p, r.time)
                    );
                    continue;
                }
            };
            messages += 1;
            assert_eq!(msg.encode().unwrap(), r.raw, "{}", dir.display());
            // The JSON contract carries everything needed to re-encode.
            let json = record_value(&mut JsonWriter::new(), r);
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
/// that log line, so for those the log only has to be a subsequence.
///
/// A captured message may go unlogged only when its receiver never read it: it came after the
/// receiver's last log line (the receiver was stopping), or it was the last message on a
/// connection that the receiver then closed (Java replaces a connection when the same peer
/// connects again, and the unread message is re-sent on the new one). Lines logged before the
/// capture ended must all have been captured.
#[test]
fn decoded_notifications_match_java_logs() {
    for dir in all_fixtures() {
        let cfg = zoo_cfg(&dir);
        let records = decode_fixture(&dir);
        let capture_end = records
            .iter()
            .map(|r| r.time.as_secs_f64())
            .fold(0.0, f64::max);
        // Connections closed by each side: (closing side, other side).
        let closed_by: std::collections::HashSet<_> = segments(&dir)
            .iter()
            .filter(|s| s.fin || s.rst)
            .map(|s| (s.src, s.dst))
            .collect();
        let mut checked = 0;
        for m in fixture_sids(&dir) {
            // A 3.4 receiver reads the version field of a 40-byte message (3.5+ does not) and
            // logs no config version.
            let receiver_34 = logs_in_34_wording(&dir, m);
            let all = logged_notifications(&dir, m);
            let took_configs = logged_config_takes(&dir, m);
            let last_logged = all.iter().map(|l| l.time).fold(0.0, f64::max);
            let mut by_sender: HashMap<i64, Vec<Logged>> = HashMap::new();
            for l in all.into_iter().filter(|l| l.sender != m) {
                by_sender.entry(l.sender).or_default().push(l);
            }
            for (s, logged) in by_sender {
                let sender_votes = cfg
                    .servers()
                    .any(|x| x.id == s && x.role() == zkfle::wire::Role::Participant);
                // What M was sent by S, as M would log it, with where it travelled.
                let wire: Vec<(Logged, &zkfle::decode::Record)> = records
                    .iter()
                    .filter(|r| r.from_sid == Some(s) && r.to_sid == Some(m))
                    .filter_map(|r| match &r.body {
                        Body::Notification(n) => match n.java_view() {
                            _ if receiver_34 => Some((
                                Logged {
                                    time: r.time.as_secs_f64(),
                                    receiver: m,
                                    sender: s,
                                    state: n.state.name().to_string(),
                                    leader: n.leader,
                                    round: n.election_epoch,
                                    peer_epoch: n.effective_peer_epoch(),
                                    zxid: n.zxid,
                                    version: i64::from(n.version.unwrap_or(0)),
                                    config_version: 0,
                                },
                                r,
                            )),
                            JavaView::Accepted {
                                version,
                                peer_epoch,
                                ..
                            } => Some((
                                Logged {
                                    time: r.time.as_secs_f64(),
                                    receiver: m,
                                    sender: s,
                                    state: n.state.name().to_string(),
                                    leader: n.leader,
                                    round: n.election_epoch,
                                    peer_epoch,
                                    zxid: n.zxid,
                                    version: i64::from(version),
                                    config_version: n.config_version().unwrap_or(0) as i64,
                                },
                                r,
                            )),
                            JavaView::Dropped(_) => None,
                        },
                        _ => None,
                    })
                    .collect();
                let same = |a: &Logged, b: &Logged| {
                    Logged {
                        time: 0.0,
                        ..a.clone()
                    } == Logged {
                        time: 0.0,
                        ..b.clone()
                    }
                };
                // Which decoded messages may have gone unread.
                let unread: Vec<bool> = wire
                    .iter()
                    .enumerate()
                    .map(|(i, (w, r))| {
                        let last_on_connection =
                            wire[i + 1..].iter().all(|(_, later)| later.conn != r.conn);
                        let receiver_closed = matches!(
                            (r.dst, r.src),
                            (Some(to), Some(from)) if closed_by.contains(&(to, from))
                        );
                        // A LOOKING receiver sent a newer config takes it and restarts its
                        // election instead (`Received version: V my version: ...`).
                        let took_config = took_configs
                            .iter()
                            .any(|(t, v)| *v == w.config_version && (t - w.time).abs() <= 0.3);
                        !sender_votes
                            || w.time >= last_logged
                            || (last_on_connection && receiver_closed)
                            || took_config
                    })
                    .collect();
                // reach[j]: the decoded messages so far can account for the first j log lines
                // (each decoded message is either the next logged line or an unread one).
                let mut reach = vec![false; logged.len() + 1];
                reach[0] = true;
                for (i, (w, _)) in wire.iter().enumerate() {
                    let mut next = vec![false; logged.len() + 1];
                    for j in 0..=logged.len() {
                        if !reach[j] {
                            continue;
                        }
                        if unread[i] {
                            next[j] = true;
                        }
                        if j < logged.len() && same(w, &logged[j]) {
                            next[j + 1] = true;
                        }
                    }
                    assert!(
                        next.iter().any(|r| *r),
                        "{}: {s} -> {m}: decoded {w:?} is neither the next logged line nor unread",
                        dir.display()
                    );
                    reach = next;
                }
                let in_capture = logged.iter().filter(|l| l.time <= capture_end).count();
                let next = reach.iter().rposition(|r| *r).unwrap_or(0);
                assert!(
                    next >= in_capture,
                    "{}: {s} -> {m}: logged {:?} not decoded",
                    dir.display(),
                    logged.get(next)
                );
                checked += next;
            }
        }
        assert!(checked > 10, "{}: only {checked} log lines", dir.display());
    }
}

/// How far a summary time may be from the moment the server logged it.
const LOG_TOLERANCE_SECS: f64 = 0.3;

fn summarize(records: &[zkfle::decode::Record]) -> zkfle::story::Summary {
    let mut summarizer = Summarizer::new(HashMap::new());
    for r in records {
        summarizer.add(r);
    }
    summarizer.finish()
}

/// The summary's story against what each server logged: every decision (state, leader, and
/// within 0.3 s of `About to leave FLE instance`), in order; its `took` against `LEADER
/// ELECTION TOOK`; each winner led; no observer wins; and where the capture has the quorum
/// port, each sync's mode against `Getting a diff/snapshot`, its UPTODATE against `Learner
/// received UPTODATE message`, and each serving time against the winner's `Have quorum of
/// supporters`.
#[test]
fn summary_story_matches_java_logs() {
    use zkfle::story::RoundKind;
    let near = |a: f64, b: f64| (a - b).abs() <= LOG_TOLERANCE_SECS;
    let mut failures: Vec<String> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    macro_rules! check {
        ($cond:expr, $($fmt:tt)*) => {
            if !$cond {
                failures.push(format!($($fmt)*));
            }
        };
    }
    for dir in all_fixtures() {
        let cfg = zoo_cfg(&dir);
        let records = decode_fixture(&dir);
        let capture_end = records
            .iter()
            .map(|r| r.time.as_secs_f64())
            .fold(0.0, f64::max);
        let summary = summarize(&records);
        let t0 = records.first().map_or(0.0, |r| r.time.as_secs_f64());
        texts.push(format!("{}:\n{}", dir.display(), summary.text(t0, false)));
        let name = dir.display();
        let quorum = has_quorum_port(&dir);
        assert_eq!(summary.quorum_port, quorum, "{name}");
        let observers: Vec<i64> = cfg
            .servers()
            .filter(|s| s.role() == zkfle::wire::Role::Observer)
            .map(|s| s.id)
            .collect();
        for sid in fixture_sids(&dir) {
            let logged = logged_story(&dir, sid);
            let mut ours: Vec<_> = summary
                .rounds
                .iter()
                .flat_map(|r| r.decisions.iter())
                .filter(|d| d.sid == sid)
                .collect();
            ours.sort_by(|a, b| a.time.total_cmp(&b.time));
            let theirs: Vec<_> = logged
                .decisions
                .iter()
                .filter(|d| d.0 <= capture_end)
                .collect();
            let a = ours
                .iter()
                .map(|d| (d.state.name().to_string(), d.leader))
                .collect::<Vec<_>>();
            let b = theirs
                .iter()
                .map(|d| (d.1.clone(), d.2))
                .collect::<Vec<_>>();
            check!(a == b, "{name}: sid {sid} decided {a:?}, logged {b:?}");
            if a != b {
                continue;
            }
            for (d, l) in ours.iter().zip(&theirs) {
                check!(
                    near(d.time, l.0),
                    "{name}: sid {sid} decided {} (leader {}) at {:.3}, logged {:.3}",
                    d.state.name(),
                    d.leader,
                    d.time,
                    l.0
                );
            }
            // Followers and leaders log how long the election took, in decision order.
            let took: Vec<_> = ours
                .iter()
                .filter(|d| d.state.name() != "OBSERVING")
                .collect();
            for (d, (t, state, secs)) in took.iter().zip(&logged.took) {
                check!(d.state.name() == state, "{name}: sid {sid} at {t}");
                // A reconfig's handover skips FLE, and Java's number then counts from the
                // server's last election (docs/java-behaviour.md): the summary's is from the
                // commit.
                if d.evidence == Evidence::Reconfig {
                    continue;
                }
                // Where the server's election began before the capture can show it, `took` is
                // a lower bound, and says so.
                check!(
                    (d.took - secs).abs() <= LOG_TOLERANCE_SECS
                        || (d.took_at_least && d.took <= secs + LOG_TOLERANCE_SECS),
                    "{name}: sid {sid} took {:.3} s, logged {secs:.3} s (at {t})",
                    d.took
                );
            }
            if !quorum {
                continue;
            }
            // Each sync the learner logged within the capture is in the summary.
            // Both sides leave out what the capture's last moments may cut.
            let syncs: Vec<_> = ours
                .iter()
                .filter_map(|d| d.sync.as_ref())
                .filter(|s| s.sync_time.unwrap_or(s.started) + LOG_TOLERANCE_SECS <= capture_end)
                .collect();
            let logged_syncs: Vec<_> = logged
                .syncs
                .iter()
                .filter(|(t, _)| *t + LOG_TOLERANCE_SECS <= capture_end)
                .collect();
            let a = syncs
                .iter()
                .map(|s| s.mode.unwrap_or("?"))
                .collect::<Vec<_>>();
            let b = logged_syncs.iter().map(|s| s.1).collect::<Vec<_>>();
            check!(a == b, "{name}: sid {sid} synced {a:?}, logged {b:?}");
            for (s, (t, mode)) in syncs.iter().zip(&logged_syncs) {
                let at = s.sync_time.unwrap_or(s.started);
                check!(
                    near(at, *t),
                    "{name}: sid {sid} {mode} at {at:.3}, logged {t:.3}"
                );
                let up = logged.uptodate.iter().find(|u| **u >= *t).copied();
                match (s.uptodate, up) {
                    (Some(a), Some(b)) => check!(
                        near(a, b),
                        "{name}: sid {sid} UPTODATE at {a:.3}, logged {b:.3}"
                    ),
                    (a, b) => check!(
                        b.is_none_or(|b| b > capture_end),
                        "{name}: sid {sid} UPTODATE {a:?}, logged {b:?}"
                    ),
                }
            }
            // Each time this server served as leader, an election says so.
            for t in logged.supporters.iter().filter(|t| **t <= capture_end) {
                check!(
                    summary
                        .rounds
                        .iter()
                        .any(|r| r.winner == Some(sid) && r.serving.is_some_and(|s| near(s, *t))),
                    "{name}: sid {sid} had a quorum of supporters at {t:.3}"
                );
            }
        }
        // A stale rejoin: the server logged giving that leader up before its next decision.
        for r in summary.rounds.iter().filter(|r| r.stale.is_some()) {
            let d = &r.decisions[0];
            let left_at = r.stale.as_ref().and_then(|s| s.left_at).unwrap();
            let logged = logged_story(&dir, d.sid);
            check!(
                logged.left_leader.iter().any(
                    |t| *t + LOG_TOLERANCE_SECS >= d.time && *t <= left_at + LOG_TOLERANCE_SECS
                ),
                "{name}: sid {} marked stale for leader {} at {:.3}, but logged no loss of it",
                d.sid,
                d.leader,
                d.time
            );
        }
        for r in &summary.rounds {
            if let Some(w) = r.winner {
                check!(r.kind != RoundKind::Rejoin, "{name}");
                check!(!observers.contains(&w), "{name}: observer {w} won");
                check!(
                    r.decisions
                        .iter()
                        .any(|d| d.sid == w && d.state.name() == "LEADING"),
                    "{name}: winner {w} did not lead"
                );
            }
        }
        // Each reconfig that handed a leader's office over is a handover from its commit, and
        // every handover is one the old leader logged.
        let mut handed_over: Vec<(i64, f64)> = fixture_sids(&dir)
            .into_iter()
            .flat_map(|sid| {
                logged_story(&dir, sid)
                    .handed_over
                    .into_iter()
                    .map(move |t| (sid, t))
            })
            .filter(|(_, t)| *t <= capture_end)
            .collect();
        handed_over.sort_by(|a, b| a.1.total_cmp(&b.1));
        let handovers: Vec<_> = summary
            .rounds
            .iter()
            .filter(|r| r.kind == RoundKind::Handover)
            .collect();
        check!(
            handovers.len() == handed_over.len(),
            "{name}: {} handover(s), {} logged",
            handovers.len(),
            handed_over.len()
        );
        for (r, (sid, t)) in handovers.iter().zip(&handed_over) {
            check!(
                near(r.started, *t) && r.old_leader == Some(*sid),
                "{name}: handover from {:?} at {:.3}, logged by {sid} at {t:.3}",
                r.old_leader,
                r.started
            );
        }
        // Time order.
        let starts: Vec<f64> = summary.rounds.iter().map(|r| r.started).collect();
        check!(starts.windows(2).all(|w| w[0] <= w[1]), "{name}");
    }
    assert!(
        failures.is_empty(),
        "{} disagreement(s) with the logs:\n{}\n\n{}",
        failures.len(),
        failures.join("\n"),
        texts.join("\n")
    );
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
                _ => {}
            }
        }
        assert!(initials > 0, "{}", dir.display());
        assert!(unknown > 0, "{}: sids known without config?", dir.display());
    }
}

/// fixtures/v3.9.5-lagging3: the leader is killed twice, and server 1, left alone with the
/// newer data, wins against the higher sid 3 restarted with older data. Server 1 went LOOKING
/// when its leader died; its votes had nowhere to go until 3 came back 4.6 s later, and Java
/// logged `LEADER ELECTION TOOK - 4857 MS`: its `took` counts from its Zab session's end, not
/// from its first vote on the wire, and is no lower bound.
#[test]
fn an_election_won_by_newer_data_counts_from_the_lost_session() {
    use zkfle::story::{Cause, RoundKind};
    use zkfle::wire::ServerState;
    let Some(dir) = all_fixtures()
        .into_iter()
        .find(|d| d.ends_with("v3.9.5-lagging3"))
    else {
        assert!(
            std::env::var("ZKFLE_FIXTURE_VERSION").is_ok(),
            "fixtures/v3.9.5-lagging3 missing"
        );
        return; // scripts/matrix.sh checking another version
    };
    let records = decode_segments(segments(&dir), options(&dir));
    let summary = summarize(&records);
    let elections: Vec<_> = summary
        .rounds
        .iter()
        .filter(|r| r.kind == RoundKind::Election)
        .collect();
    let winners: Vec<_> = elections.iter().map(|r| r.winner).collect();
    assert_eq!(winners[..3], [Some(3), Some(2), Some(1)], "{winners:?}");
    let third = elections[2];
    assert_eq!(third.cause, Cause::LeaderLost);
    assert!(third.leader_closed);
    let one = third
        .decisions
        .iter()
        .find(|d| d.sid == 1)
        .expect("sid 1 decided");
    assert_eq!(one.state, ServerState::Leading);
    assert!(!one.took_at_least, "{one:?}");
    assert!((one.took - 4.857).abs() <= LOG_TOLERANCE_SECS, "{one:?}");
    // Its election began when its session with leader 2 ended, which is when it lost 2.
    assert_eq!(Some(one.looking_since), third.leader_lost);
}

/// A Docker ensemble's leader cut off by iptables, then another paused, captured on the host
/// (fixtures/v3.9.5-docker4-faults): the cut-off leader answered the probes while its
/// followers heard nothing (cut off, though it answered LEADING once healed); the paused one
/// left its followers' votes unanswered, its kernel acknowledging them (frozen); the votes
/// queued for the cut-off leader and delivered at the heal are delayed votes, not a new
/// election: each election begins when the followers' logs say they left their leader.
#[test]
fn faults_in_docker_are_told_as_the_logs_tell() {
    use zkfle::story::{AnomalyKind, Cause, LeaderFate, RoundKind};
    let Some(dir) = all_fixtures()
        .into_iter()
        .find(|d| d.ends_with("v3.9.5-docker4-faults"))
    else {
        assert!(
            std::env::var("ZKFLE_FIXTURE_VERSION").is_ok(),
            "fixtures/v3.9.5-docker4-faults missing"
        );
        return; // scripts/matrix.sh checking another version
    };
    let summary = summarize(&decode_fixture(&dir));
    let elections: Vec<_> = summary
        .rounds
        .iter()
        .filter(|r| r.kind == RoundKind::Election)
        .collect();
    assert_eq!(elections.len(), 3, "{elections:#?}");
    let left: Vec<f64> = fixture_sids(&dir)
        .into_iter()
        .flat_map(|sid| logged_story(&dir, sid).left_leader)
        .collect();
    for e in &elections[1..] {
        let nearest = left
            .iter()
            .map(|t| (t - e.started).abs())
            .fold(f64::INFINITY, f64::min);
        assert!(
            nearest <= 0.3,
            "election at {:.3}: {nearest:.3} s from a logged exit",
            e.started
        );
    }
    let (cut, paused) = (elections[1], elections[2]);
    assert_eq!(
        (cut.cause, cut.fate),
        (Cause::LeaderSilent, Some(LeaderFate::CutOff))
    );
    assert_eq!(
        (paused.cause, paused.fate),
        (Cause::LeaderFrozen, Some(LeaderFate::Frozen))
    );
    assert!(paused.leader_resumed.is_some());
    let delayed: Vec<(i64, i64)> = summary
        .anomalies
        .iter()
        .filter_map(|a| match a.kind {
            AnomalyKind::DelayedVotes { from, to, .. } => Some((from, to)),
            _ => None,
        })
        .collect();
    assert_eq!(delayed.len(), 2, "{delayed:?}");
    for from in [1, 2] {
        assert!(delayed.contains(&(from, 4)), "{delayed:?}");
    }
}

/// Each election the story finds a Java server in began when its log says `New election`: at
/// its first dial since its previous notification, or when its Zab session ended, or at its
/// first vote (within [`LOG_TOLERANCE_SECS`]). Not a server's first election of the capture:
/// a process just started may have begun before the wire shows anything of it (its `took` is
/// then a lower bound). `zkfle replay` starts its elections from these.
#[test]
fn each_election_begins_where_java_logged_new_election() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in all_fixtures() {
        let summary = summarize(&decode_fixture(&dir));
        for sid in fixture_sids(&dir) {
            let logged = logged_story(&dir, sid).new_elections;
            if logged.is_empty() {
                // Not a Java server's log (zkfle's), or none kept.
                continue;
            }
            for l in summary.lookings.iter().filter(|l| l.sid == sid).skip(1) {
                checked += 1;
                let nearest = logged
                    .iter()
                    .copied()
                    .min_by(|a, b| (a - l.began).abs().total_cmp(&(b - l.began).abs()))
                    .expect("logged");
                if (nearest - l.began).abs() > LOG_TOLERANCE_SECS {
                    failures.push(format!(
                        "{}: sid {sid}: an election began at {:.3} (first vote {:.3}); the nearest `New election` is at {nearest:.3}",
                        dir.display(),
                        l.began,
                        l.first_vote
                    ));
                }
            }
        }
    }
    // (scripts/matrix.sh checks one version's fixtures at a time: fewer elections.)
    if std::env::var("ZKFLE_FIXTURE_VERSION").is_err() {
        assert!(checked >= 50, "only {checked} elections checked");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
