//! `zkfle replay` into the native target: every participant of every fixture capture makes the
//! decisions it made in the recording, which are the ones its Java server logged.

mod common;

use common::*;
use zkfle::replay::{Recording, native};

#[test]
fn every_fixture_participant_replays_natively() {
    let mut failures = Vec::new();
    // Not the partition: there a follower's reader threads lagged the wire by 40 ms, so Java
    // read as LOOKING votes that had arrived while it still followed the cut-off leader, and
    // decided on them. A replay delivers each vote at its capture time: the native
    // participant, still FOLLOWING then, answers them, and decides 37 s later
    // (docs/replay-probe.md, "Limits").
    for dir in all_fixtures()
        .into_iter()
        .filter(|d| !d.to_string_lossy().contains("partition"))
    {
        let records = decode_fixture(&dir);
        let cfg = zoo_cfg(&dir);
        // 3.4 notifications carry no config: the recording takes the fixture's zoo.cfg, as
        // `zkfle replay --config` would.
        let config = needs_config(&dir).then_some(&cfg.quorum);
        for server in cfg.servers() {
            let sid = server.id;
            let rec = Recording::from_records(&records, sid, config).unwrap();
            let report = native::replay(&rec);
            let logged = logged_decisions(&dir, sid);
            let recorded: Vec<(String, i64)> = report
                .recorded
                .iter()
                .map(|d| (d.state.name().to_string(), d.leader))
                .collect();
            assert_eq!(
                recorded,
                logged,
                "{}: sid {sid}: recording vs log",
                dir.display()
            );
            if !report.matches() {
                failures.push(format!(
                    "{}: sid {sid}\nstarts {:?}\n{}",
                    dir.display(),
                    rec.starts,
                    report.to_text()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A capture begun after SID's election (it only answers FOLLOWING) holds nothing of SID's to
/// replay: the recording says so, naming the state, and the command exits 2 (an `--as SID` the
/// capture cannot replay) instead of failing inside the replay.
#[test]
fn a_server_that_only_answers_has_nothing_to_replay() {
    use zkfle::decode::Body;
    use zkfle::wire::ServerState;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/basic3");
    let records: Vec<_> = decode_fixture(&dir)
        .into_iter()
        .filter(|r| {
            !(r.from_sid == Some(1)
                && matches!(&r.body, Body::Notification(n) if n.state == ServerState::Looking))
        })
        .collect();
    let err = Recording::from_records(&records, 1, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sid 1 looked for no leader in the capture: it only answered as FOLLOWING, so its \
         election was over before the capture began; nothing to replay"
    );
}
