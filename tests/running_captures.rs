//! Captures started on a running ensemble (fixtures/running/, recorded by
//! `LATE=1 SCENARIO=... scripts/record-multihost.sh`): the captures begin after the ensemble
//! formed, so they hold no initial message of the connections open then. Who is who comes
//! from the configs and the addresses, the story from the first packet; every decision the
//! servers logged after the capture began is checked against the summary, as
//! tests/decode_fixtures.rs checks the fixtures captured from the start.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use zkfle::decode::{Body, Record};
use zkfle::story::{Cause, LeaderFate, RoundKind, Summarizer, Summary};

/// How far a reported decision may be from the server's `About to leave FLE instance`.
const DECISION_TOLERANCE_SECS: f64 = 0.1;

/// The fixtures of captures begun on a running ensemble (the version matrix checks one version
/// at a time).
fn running_fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/running");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/running exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !host_captures(p).is_empty() || capture_file(p).is_some())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty());
    if let Ok(v) = std::env::var("ZKFLE_FIXTURE_VERSION") {
        dirs.retain(|d| fixture_version(d).as_deref() == Some(v.as_str()));
    }
    dirs
}

/// A fixture's capture, or its host captures decoded as one (3.4 ones with the zoo.cfg, as
/// `--config` gives).
fn decode(dir: &Path) -> Vec<Record> {
    decode_fixture(dir)
}

/// The summary `zkfle decode --summary` gives (3.4 ones with `--config`).
fn summarize(dir: &Path, records: &[Record]) -> Summary {
    let mut s = if needs_config(dir) {
        Summarizer::with_config(&zoo_cfg(dir).quorum)
    } else {
        Summarizer::new(Default::default())
    };
    for r in records {
        s.add(r);
    }
    s.finish()
}

/// The fixtures of one scenario (its name in theirs), with their summaries.
fn scenario(name: &str) -> Vec<(PathBuf, Summary)> {
    running_fixtures()
        .into_iter()
        .filter(|d| d.to_string_lossy().contains(name))
        .map(|dir| {
            let summary = summarize(&dir, &decode(&dir));
            (dir, summary)
        })
        .collect()
}

/// The first election of a fixture's summary.
fn first_election<'a>(dir: &Path, summary: &'a Summary) -> &'a zkfle::story::Round {
    summary
        .rounds
        .iter()
        .find(|r| r.kind == RoundKind::Election)
        .unwrap_or_else(|| panic!("{}: no election", dir.display()))
}

fn first_time(records: &[Record]) -> f64 {
    records
        .iter()
        .map(|r| r.time.as_secs_f64())
        .fold(f64::INFINITY, f64::min)
}

/// Each logged decision after the capture began: (sid, time, state, leader).
fn logged_after(dir: &Path, start: f64, end: f64) -> Vec<(i64, f64, String, i64)> {
    let mut out = Vec::new();
    for sid in fixture_sids(dir) {
        for (t, state, leader) in logged_story(dir, sid).decisions {
            if t > start && t <= end {
                out.push((sid, t, state, leader));
            }
        }
    }
    out
}

#[test]
fn decisions_logged_after_the_capture_began_are_reported() {
    let mut found = 0;
    let mut total = 0;
    let mut report = Vec::new();
    for dir in running_fixtures() {
        let records = decode(&dir);
        let summary = summarize(&dir, &records);
        let start = first_time(&records);
        let decisions: Vec<_> = summary
            .rounds
            .iter()
            .flat_map(|r| r.decisions.iter())
            .collect();
        let logged = logged_after(&dir, start, summary.end);
        let mut missed = Vec::new();
        for (sid, t, state, leader) in &logged {
            let hit = decisions.iter().any(|d| {
                d.sid == *sid
                    && d.state.name() == state
                    && d.leader == *leader
                    && (d.time - t).abs() <= DECISION_TOLERANCE_SECS
            });
            if hit {
                found += 1;
            } else {
                missed.push(format!("sid {sid} {state} (leader {leader}) at {t:.3}"));
            }
            total += 1;
        }
        if !missed.is_empty() {
            report.push(format!(
                "{}: missed {}\n{}",
                dir.display(),
                missed.join(", "),
                summary.text(start, false)
            ));
        }
    }
    assert!(total > 0);
    eprintln!(
        "{found} of {total} logged decisions reported\n{}",
        report.join("\n\n")
    );
    // The bar: at least 95% of the logged decisions, each within 0.1 s.
    assert!(
        found * 100 >= total * 95,
        "{found} of {total} logged decisions reported:\n{}",
        report.join("\n\n")
    );
}

#[test]
fn the_story_starts_from_the_leader_the_capture_shows() {
    for dir in running_fixtures() {
        let records = decode(&dir);
        let summary = summarize(&dir, &records);
        let name = dir.display();
        let at_start = summary
            .at_start
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no leader at the capture's start"));
        // The leader the servers logged last before the capture began.
        let start = first_time(&records);
        let leader = fixture_sids(&dir)
            .into_iter()
            .flat_map(|sid| logged_story(&dir, sid).decisions)
            .filter(|(t, _, _)| *t < start)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, _, l)| l)
            .unwrap();
        assert_eq!(at_start.leader, leader, "{name}");
        // Every server's first decision after the start belongs to a failover or a rejoin,
        // never to "servers starting".
        for r in &summary.rounds {
            if r.kind == RoundKind::Election {
                assert_ne!(r.cause, Cause::ServersStarted, "{name}: {r:?}");
            }
        }
    }
}

#[test]
fn sids_without_initial_messages_say_how_they_were_learned() {
    for dir in running_fixtures() {
        let records = decode(&dir);
        let name = dir.display();
        for r in records
            .iter()
            .filter(|r| matches!(r.body, Body::Notification(_)))
        {
            // Every sender and receiver is named (3.5+ without --config, 3.4 with it).
            assert!(r.from_sid.is_some() && r.to_sid.is_some(), "{name}: {r:?}");
        }
        // The leader's PINGs before anything else: its quorum address is in the configs, its
        // learners (each on a host of its own) are the one member on their hosts; on one host
        // (loopback, where every server dials from 127.0.0.1) the learners are not named.
        let first_ping = records
            .iter()
            .find(|r| matches!(&r.body, Body::Quorum(q) if q.type_name() == "PING" && q.data_len.is_none()))
            .unwrap_or_else(|| panic!("{name}: no PING"));
        let config = if needs_config(&dir) {
            "config"
        } else {
            "notification_config"
        };
        assert_eq!(
            (
                first_ping.from_sid_source.and_then(|s| s.name()),
                first_ping.to_sid_source.and_then(|s| s.name())
            ),
            (
                Some(config),
                (!host_captures(&dir).is_empty()).then_some("address")
            ),
            "{name}: {first_ping:?}"
        );
        let named = records
            .iter()
            .filter(|r| r.from_sid_source.is_some() || r.to_sid_source.is_some())
            .count();
        assert!(named > 0, "{name}");
    }
}

#[test]
fn probes_are_not_elections() {
    for (dir, summary) in scenario("probes") {
        let name = dir.display();
        let members: Vec<i64> = fixture_sids(&dir);
        assert!(
            !summary.non_members.is_empty(),
            "{name}: the probes are listed"
        );
        for n in &summary.non_members {
            assert!(!members.contains(&n.sid), "{name}");
            assert!(!n.asked.is_empty(), "{name}");
        }
        for r in &summary.rounds {
            for sid in &r.participants {
                assert!(members.contains(sid), "{name}: non-member {sid} in {r:?}");
            }
            assert!(
                r.still_looking.iter().all(|s| members.contains(&s.sid)),
                "{name}"
            );
        }
    }
}

/// A leader left without its quorum: the outage runs from the follower's leaving (its quorum
/// connection's close) to the leader's `Have quorum of supporters` after the new election;
/// the leader's `Not sufficient followers synced` comes within a tick of the close.
#[test]
fn a_lost_quorum_is_dated_from_the_follower_that_left() {
    for (dir, summary) in scenario("quorumloss") {
        let name = dir.display();
        let r = summary
            .rounds
            .iter()
            .find(|r| r.cause == Cause::QuorumLost)
            .unwrap_or_else(|| panic!("{name}: no lost quorum in {:?}", summary.rounds));
        let winner = r.winner.unwrap();
        let log = std::fs::read_to_string(dir.join(format!("server.{winner}.log"))).unwrap();
        let gave_up = log
            .lines()
            .find(|l| l.contains("Not sufficient followers synced"))
            .map(log_time)
            .unwrap();
        let served = logged_story(&dir, winner)
            .supporters
            .into_iter()
            .find(|t| *t > gave_up)
            .unwrap();
        let lost = r.leader_lost.unwrap();
        let tick = 2.0;
        assert!(
            lost <= gave_up && lost >= gave_up - tick - 0.2,
            "{name}: lost at {lost:.3}, the leader gave up at {gave_up:.3}"
        );
        let serving = r.serving.unwrap();
        assert!(
            (serving - served).abs() <= 0.2,
            "{name}: serving {serving:.3}, logged {served:.3}"
        );
        let unavailable = r.unavailable.unwrap();
        assert!((unavailable - (served - lost)).abs() <= 0.2, "{name}");
    }
}

/// Each failover's cause is the one its scenario made: a killed leader's connections close; a
/// cut-off one falls silent; a frozen one falls silent and comes back still LEADING.
#[test]
fn causes_are_the_scenarios() {
    for (name, cause) in [
        ("kill3", Cause::LeaderLost),
        ("stop3", Cause::LeaderLost),
        ("restart3", Cause::LeaderLost),
        ("loopback3", Cause::LeaderLost),
        ("probes3", Cause::LeaderLost),
        ("partition", Cause::LeaderSilent),
        ("freeze3", Cause::LeaderFrozen),
        ("quorumloss3", Cause::QuorumLost),
    ] {
        let fixtures = scenario(name);
        assert!(!fixtures.is_empty() || std::env::var("ZKFLE_FIXTURE_VERSION").is_ok());
        for (dir, summary) in fixtures {
            let first = first_election(&dir, &summary);
            assert_eq!(first.cause, cause, "{}: {first:?}", dir.display());
            assert_eq!(
                first.leader_resumed.is_some(),
                cause == Cause::LeaderFrozen,
                "{}",
                dir.display()
            );
        }
    }
}

/// What became of the old leader, by scenario: a leader whose process ended (kill -9 or
/// SIGTERM: the wire shows them alike) and came back later is `restarted`, back when its new
/// process began looking (its log's `New election`); cut off, frozen and a lost quorum are
/// named as such.
#[test]
fn the_leaders_fate_is_the_scenarios() {
    for (name, fate) in [
        ("kill3", LeaderFate::Restarted),
        ("loopback3", LeaderFate::Restarted),
        ("probes3", LeaderFate::Restarted),
        ("stop3", LeaderFate::Restarted),
        ("restart3", LeaderFate::Restarted),
        ("partition", LeaderFate::CutOff),
        ("freeze3", LeaderFate::Frozen),
        ("quorumloss3", LeaderFate::LostQuorum),
    ] {
        let fixtures = scenario(name);
        assert!(!fixtures.is_empty() || std::env::var("ZKFLE_FIXTURE_VERSION").is_ok());
        for (dir, summary) in fixtures {
            let first = first_election(&dir, &summary);
            assert_eq!(first.fate, Some(fate), "{}: {first:?}", dir.display());
            let Some(back) = first.leader_back else {
                assert_ne!(fate, LeaderFate::Restarted, "{}", dir.display());
                continue;
            };
            // The old leader: the sid whose log has a `New election` within a second of it.
            let logged = fixture_sids(&dir)
                .into_iter()
                .flat_map(|sid| logged_story(&dir, sid).new_elections)
                .filter(|t| *t > first.started)
                .map(|t| (t - back).abs())
                .fold(f64::INFINITY, f64::min);
            assert!(
                logged <= 0.1,
                "{}: back at {back:.3}, {logged:.3} s from the log",
                dir.display()
            );
        }
    }
}

/// The same captures cut before the old leader came back: its process ended, killed or
/// stopped, and no `leader_back`.
#[test]
fn a_leader_that_never_came_back_was_killed_or_stopped() {
    for name in ["kill3", "stop3", "restart3"] {
        for (dir, summary) in scenario(name) {
            let first = first_election(&dir, &summary);
            let back = first.leader_back.unwrap();
            let records: Vec<Record> = decode(&dir)
                .into_iter()
                .filter(|r| r.time.as_secs_f64() < back - 0.5)
                .collect();
            let cut = summarize(&dir, &records);
            let first = first_election(&dir, &cut);
            assert_eq!(first.cause, Cause::LeaderLost, "{}", dir.display());
            assert_eq!(
                first.fate,
                Some(LeaderFate::KilledOrStopped),
                "{}: {first:?}",
                dir.display()
            );
            assert_eq!(first.leader_back, None);
            let text = cut.text(first_time(&records), false);
            assert!(
                text.contains("(its process ended: killed or stopped)"),
                "{text}"
            );
        }
    }
}

/// A frozen leader that never comes back in the capture is told from a cut-off one by TCP:
/// its kernel still acknowledges what its followers send it, where a cut-off one's peers wait
/// for acknowledgements. The freeze and partition captures, cut before the leader resumed or
/// the cut healed, end with the same silence; the verdicts differ.
#[test]
fn a_frozen_leader_that_never_returns_is_told_from_a_cut_off_one() {
    for (name, cause, fate) in [
        ("freeze3", Cause::LeaderFrozen, LeaderFate::Frozen),
        ("partition", Cause::LeaderSilent, LeaderFate::CutOff),
    ] {
        for (dir, whole) in scenario(name) {
            let first = first_election(&dir, &whole);
            // Ten seconds after the election began: the leader still silent, the new one
            // serving.
            let end = first.started + 10.0;
            let records = decode_fixture_until(&dir, end);
            let cut = summarize(&dir, &records);
            let r = first_election(&dir, &cut);
            assert_eq!(r.cause, cause, "{}: {r:?}", dir.display());
            assert_eq!(r.fate, Some(fate), "{}: {r:?}", dir.display());
            assert_eq!(r.leader_resumed, None, "{}", dir.display());
            assert_eq!(r.leader_lost, first.leader_lost, "{}", dir.display());
            let text = cut.text(first_time(&records), false);
            let says = match fate {
                LeaderFate::Frozen => "its host still acknowledging what its followers sent",
                _ => "unacknowledged (cut off from its followers)",
            };
            assert!(text.contains(says), "{}:\n{text}", dir.display());
        }
    }
}

/// A leader that removes itself by `reconfig` hands over to the designated leader with no
/// election (docs/java-behaviour.md): the summary tells a handover from the commit, names the
/// designated leader its servers logged (`Suggested leader`), and the next failover is the
/// designated leader's, dated from when its followers lost it (`Exception when following the
/// leader`), not from the removed leader's stop.
#[test]
fn a_leader_removed_by_reconfig_hands_over_without_an_election() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let dirs = [
        root.join("v3.8.0-reconfig-leader4"),
        root.join("running/v3.9.5-reconfig-leader4"),
    ];
    for dir in dirs {
        if std::env::var("ZKFLE_FIXTURE_VERSION")
            .is_ok_and(|v| fixture_version(&dir).as_deref() != Some(v.as_str()))
        {
            continue;
        }
        let name = dir.display();
        let summary = summarize(&dir, &decode(&dir));
        let handovers: Vec<_> = summary
            .rounds
            .iter()
            .filter(|r| r.kind == RoundKind::Handover)
            .collect();
        assert_eq!(handovers.len(), 1, "{name}: {:?}", summary.rounds);
        let h = handovers[0];
        let stories: Vec<_> = fixture_sids(&dir)
            .into_iter()
            .map(|sid| (sid, logged_story(&dir, sid)))
            .collect();
        let (committer, committed) = stories
            .iter()
            .find_map(|(sid, s)| s.handed_over.first().map(|t| (*sid, *t)))
            .unwrap_or_else(|| panic!("{name}: no logged handover"));
        assert_eq!(h.cause, Cause::Reconfig, "{name}");
        assert_eq!(h.fate, Some(LeaderFate::HandedOver), "{name}");
        assert_eq!(h.old_leader, Some(committer), "{name}");
        assert!((h.started - committed).abs() <= 0.1, "{name}: {h:?}");
        // The designated leader: the one the servers logged LEADING after the commit.
        let designated = stories
            .iter()
            .find(|(sid, s)| {
                s.decisions
                    .iter()
                    .any(|(t, state, l)| *t > committed && state == "LEADING" && l == sid)
            })
            .map(|(sid, _)| *sid)
            .unwrap();
        assert_eq!(h.winner, Some(designated), "{name}");
        assert!(h.serving.is_some(), "{name}: {h:?}");
        // The next failover is the designated leader's.
        let next = summary
            .rounds
            .iter()
            .find(|r| r.kind == RoundKind::Election && r.started > h.started)
            .unwrap_or_else(|| panic!("{name}: no failover after the handover"));
        assert_eq!(next.old_leader, Some(designated), "{name}: {next:?}");
        let lost_logged = stories
            .iter()
            .flat_map(|(_, s)| s.left_leader.iter().copied())
            .filter(|t| *t > committed + 1.0)
            .fold(f64::INFINITY, f64::min);
        let lost = next.leader_lost.unwrap();
        assert!(
            (lost - lost_logged).abs() <= 0.1,
            "{name}: leader lost at {lost:.3}, its followers logged losing it at {lost_logged:.3}"
        );
    }
}
