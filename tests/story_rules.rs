//! Every rule of inference in `story::rules` fires on a capture that needs it: each row names
//! a recorded capture (decoded as a user would, `decode --summary --format jsonl`) whose story
//! uses the rule, as its JSON's `rules` counts and `--summary --verbose` says.

use std::process::Command;

use zkfle::story::rules::Rule;

const ZKFLE: &str = env!("CARGO_BIN_EXE_zkfle");

/// Where each rule fires: the capture files of a fixture, or the unit test in
/// `src/story/summarizer.rs` that builds its records (no recorded capture needs those).
enum FiresOn {
    Capture(&'static [&'static str]),
    MadeUp(&'static str),
}

const WHERE: &[(Rule, FiresOn)] = &[
    (
        Rule::FinalizeWait,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::CauseWindow,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::CloseAfterStart,
        FiresOn::Capture(&["fixtures/big/capture.pcap"]),
    ),
    (
        Rule::CloseBurst,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::CloseBeforeSilence,
        FiresOn::MadeUp("rule_close_before_silence_counts_a_close_crossing_the_last_ping"),
    ),
    (
        Rule::RejoinGrace,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::QueueWindow,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::HeldVote,
        FiresOn::Capture(&["fixtures/multihost3/host.2.pcap"]),
    ),
    (
        Rule::RefusedDials,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::AnswerReplaced,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
    (
        Rule::LeaderSilence,
        FiresOn::Capture(&["fixtures/v3.9.5-docker4-faults/capture.pcap"]),
    ),
    (
        Rule::HandoverWindow,
        FiresOn::Capture(&["fixtures/v3.8.0-reconfig-leader4/capture.pcap"]),
    ),
    (
        Rule::DelayedVote,
        FiresOn::Capture(&["fixtures/v3.9.5-docker4-faults/capture.pcap"]),
    ),
    (
        Rule::LateSync,
        FiresOn::Capture(&["fixtures/v3.6.3-multihost5-names/host.4.pcap"]),
    ),
    (
        Rule::StartedTogether,
        FiresOn::Capture(&["fixtures/multihost3/host.1.pcap"]),
    ),
    (
        Rule::LateFirstVote,
        FiresOn::Capture(&["fixtures/v3.6.3-multihost3-names/host.3.pcap"]),
    ),
    (
        Rule::ServingEarly,
        FiresOn::MadeUp("rule_serving_early_counts_acks_just_before_the_leaders_decision"),
    ),
    (
        Rule::ServingLate,
        FiresOn::Capture(&["fixtures/multihost3/host.1.pcap"]),
    ),
    (
        Rule::StaleReach,
        FiresOn::Capture(&["fixtures/big/capture.pcap"]),
    ),
    (
        Rule::ResendBackoff,
        FiresOn::Capture(&["fixtures/big/capture.pcap"]),
    ),
    (
        Rule::DialBeforeVote,
        FiresOn::Capture(&["fixtures/basic3/capture.pcap"]),
    ),
];

fn decode(files: &[&str], args: &[&str]) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(ZKFLE)
        .current_dir(root)
        .args(["decode", "--summary"])
        .args(args)
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_rule_has_a_place_where_it_fires() {
    for rule in Rule::ALL {
        assert_eq!(
            WHERE.iter().filter(|(r, _)| *r == rule).count(),
            1,
            "{rule:?} needs one row"
        );
    }
    let unit_tests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/story/summarizer.rs"
    ))
    .unwrap();
    for (rule, on) in WHERE {
        if let FiresOn::MadeUp(test) = on {
            assert!(
                unit_tests.contains(&format!("fn {test}(")),
                "{rule:?}: no unit test {test} in src/story/summarizer.rs"
            );
        }
    }
}

#[test]
fn each_rule_fires_on_its_capture_and_verbose_names_it() {
    for (rule, on) in WHERE {
        let FiresOn::Capture(files) = on else {
            continue;
        };
        let json = decode(files, &["--format", "jsonl"]);
        let summary: serde_json::Value = json
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .expect("a summary object");
        let count = summary["rules"][rule.name()].as_u64().unwrap_or(0);
        assert!(count > 0, "{rule:?} on {files:?}: {}", summary["rules"]);
        let text = decode(files, &["--verbose"]);
        let listed = text
            .split("rules that inferred what the wire does not show")
            .nth(1)
            .unwrap_or_else(|| panic!("no rules in --verbose on {files:?}:\n{text}"));
        assert!(
            listed
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{} ", rule.name()))
                    && l.contains(&format!("{count}x"))),
            "{rule:?} on {files:?}:\n{listed}"
        );
    }
}

/// Without `--verbose`, the text summary does not list the rules (operators read it first).
#[test]
fn the_plain_summary_lists_no_rules() {
    let text = decode(&["fixtures/basic3/capture.pcap"], &[]);
    assert!(!text.contains("rules that inferred"), "{text}");
}

/// docs/summary.md's table of rules has each rule with its value, and no other.
#[test]
fn the_docs_table_matches_the_rules() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.md")).unwrap();
    let table = docs
        .split("## Rules")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), Rule::ALL.len(), "{table}");
    for rule in Rule::ALL {
        let value = rule.secs();
        let unit = if rule == Rule::ResendBackoff {
            ""
        } else {
            " s"
        };
        let cell = format!("| `{}` | {value}{unit} |", rule.name());
        assert!(
            rows.iter().any(|r| r.starts_with(&cell)),
            "{cell} not in docs/summary.md"
        );
    }
}
