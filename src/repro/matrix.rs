//! The repro matrix: each repro's verdict against each release this project runs, as
//! `tests/repro_java.rs` observed it on local Java servers (docs/repro.md has the table and
//! the evidence). `zkfle doctor` turns it into advice for the versions it finds.

use super::Verdict::{self, Inconclusive, NotVulnerable, Vulnerable};

/// The releases tested.
pub const VERSIONS: [&str; 4] = ["3.4.14", "3.6.3", "3.8.0", "3.9.5"];

/// Per repro, its verdict on each of [`VERSIONS`], in that order.
pub const MATRIX: &[(&str, [Verdict; 4])] = &[
    (
        "port-out-of-range",
        [NotVulnerable, Vulnerable, Vulnerable, Vulnerable],
    ),
    (
        "bad-config-server-id",
        [NotVulnerable, Vulnerable, Vulnerable, Vulnerable],
    ),
    (
        "ZOOKEEPER-3769",
        [Vulnerable, NotVulnerable, NotVulnerable, NotVulnerable],
    ),
    (
        "ZOOKEEPER-2164",
        [NotVulnerable, NotVulnerable, NotVulnerable, NotVulnerable],
    ),
    (
        "ZOOKEEPER-4787",
        [NotVulnerable, Inconclusive, Inconclusive, Inconclusive],
    ),
    // With the servers' default config: the fix is off unless
    // zookeeper.leader.maxTimeToWaitForEpoch is set (then 3.6.3+ are not vulnerable).
    (
        "ZOOKEEPER-3109",
        [Vulnerable, Vulnerable, Vulnerable, Vulnerable],
    ),
    (
        "ZOOKEEPER-4685",
        [Vulnerable, Vulnerable, Vulnerable, Vulnerable],
    ),
];

/// The measured column for `version`: an exact release, else one of the same line
/// (`3.8.x` uses 3.8.0's), else `3.5+` / `3.4` as the wire shows them (the newest measured
/// release of 3.5+, 3.9.5, would be optimistic: the 3.5+ advice lists what any 3.5+ release
/// measured was vulnerable to).
fn columns(version: &str) -> (Vec<usize>, String) {
    if let Some(i) = VERSIONS.iter().position(|v| *v == version) {
        return (vec![i], VERSIONS[i].to_string());
    }
    let line = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    if let Some(i) = VERSIONS.iter().position(|v| line(v) == line(version)) {
        return (
            vec![i],
            format!("{} (measured on {})", line(version), VERSIONS[i]),
        );
    }
    match version {
        "3.4" => (vec![0], "3.4 (measured on 3.4.14)".into()),
        _ => (
            vec![1, 2, 3],
            "3.5+ (measured on 3.6.3, 3.8.0, 3.9.5)".into(),
        ),
    }
}

/// Advice for a server of `version` (`3.8.0`, `3.8.4`, `3.4`, `3.5+`): the repros it is (or
/// may be) vulnerable to.
pub fn advice(version: &str) -> Vec<String> {
    let (cols, shown) = columns(version);
    MATRIX
        .iter()
        .filter(|(_, v)| cols.iter().any(|&c| v[c] == Vulnerable))
        .map(|(name, _)| {
            // The member repros need a voting member's seat; the others only the port.
            let how = if matches!(*name, "ZOOKEEPER-3109" | "ZOOKEEPER-4685") {
                "a voting member that misbehaves"
            } else {
                "anyone who reaches its election port"
            };
            format!(
                "ZooKeeper {shown} was measured vulnerable to `zkfle repro {name}` ({how} can trigger it; docs/repro.md)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_by_release_and_line() {
        assert!(advice("3.8.0")[0].contains("port-out-of-range"));
        assert!(advice("3.8.4")[0].contains("measured on 3.8.0"));
        let old = advice("3.4.14");
        assert!(old.iter().any(|a| a.contains("ZOOKEEPER-3769")), "{old:?}");
        assert!(
            !old.iter().any(|a| a.contains("port-out-of-range")),
            "{old:?}"
        );
        assert!(!advice("3.5+").is_empty());
        for (name, _) in MATRIX {
            assert!(super::super::find(name).is_some(), "{name}");
        }
    }
}
