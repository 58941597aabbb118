//! The text `zkfle join`'s metrics endpoint serves (`src/net/metrics.rs`): what Java's
//! `PrometheusMetricsProvider` (3.8, Prometheus simpleclient 0.9.0) exports for a follower,
//! in its format (text format 0.0.4; HELP equal to the name; values as Java's
//! `Double.toString`; labels with a trailing comma), with zkfle's values where it has the
//! quantity and Java's idle values (0, NaN) where it counts what zkfle never does (client
//! requests, Java's request pipeline). Names and types: Java's `ServerMetrics` and
//! `ZooKeeperServer.registerMetrics` (docs/join.md, "Monitoring: Prometheus").

use std::fmt::Write;

use super::fourlw::{self, MemberSetup};
use super::server_metrics::{self, Kind::*, SERVING_GAUGES};
use crate::net::status::{MemberStatus, Samples};

/// The quota gauges, labelled by namespace: HELP and TYPE only on a tree without quotas.
const QUOTA_GAUGE_SETS: &[&str] = &[
    "quota_count_limit_per_namespace",
    "quota_bytes_limit_per_namespace",
    "quota_count_usage_per_namespace",
    "quota_bytes_usage_per_namespace",
];

/// The process's figures (Prometheus' standard `process_*` families), where the system has
/// them; Java exports them with its JVM's (`exportJvmInfo`).
#[derive(Debug, Clone, Default)]
pub struct Process {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
}

/// The page at `/metrics`. `quorum_size` is the number of voters; `process` is written when
/// `metricsProvider.exportJvmInfo` is on (Java's default).
pub fn exposition(s: &MemberStatus, setup: &MemberSetup, process: Option<&Process>) -> String {
    let mut out = String::with_capacity(24 * 1024);
    if s.synced {
        let monitor = fourlw::monitor_values(s, setup);
        let value_of = |name: &str| {
            monitor
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        for name in SERVING_GAUGES {
            family(&mut out, name, "gauge");
            sample(&mut out, name, "", value_of(name));
        }
        if s.leading.is_some() {
            for name in fourlw::LEADER_GAUGES {
                family(&mut out, name, "gauge");
                sample(&mut out, name, "", value_of(name));
            }
        }
        for name in QUOTA_GAUGE_SETS {
            family(&mut out, name, "gauge");
        }
    }
    let empty = Samples::default();
    for (name, kind) in server_metrics::families(setup.speaks) {
        match kind {
            Counter => {
                family(&mut out, name, "counter");
                sample(&mut out, name, "", server_metrics::counter(name, s) as f64);
            }
            Basic | Advanced => {
                let samples = server_metrics::samples(name, s).unwrap_or(&empty);
                family(&mut out, name, "summary");
                let quantiles: &[f64] = if *kind == Basic {
                    &[0.5]
                } else {
                    &[0.5, 0.9, 0.99]
                };
                for q in quantiles {
                    let v = samples.quantile(*q);
                    sample(&mut out, name, &format!("quantile=\"{q}\","), v);
                }
                sample(&mut out, &format!("{name}_count"), "", samples.count as f64);
                sample(&mut out, &format!("{name}_sum"), "", samples.sum);
            }
            SummarySet => {
                family(&mut out, name, "summary");
                if *name == "write_per_namespace" {
                    for (namespace, w) in &s.metrics.writes_per_namespace {
                        let key = format!("key=\"{}\",", label_value(namespace));
                        sample(
                            &mut out,
                            name,
                            &format!("{key}quantile=\"0.5\","),
                            w.median(),
                        );
                        sample(&mut out, &format!("{name}_count"), &key, w.count as f64);
                        sample(&mut out, &format!("{name}_sum"), &key, w.sum as f64);
                    }
                }
            }
            CounterSet => family(&mut out, name, "counter"),
        }
    }
    if let Some(p) = process {
        let standard: [(&str, &str, &str, Option<f64>); 6] = [
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                p.cpu_seconds,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds,
            ),
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                p.open_fds,
            ),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                p.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                p.virtual_memory_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                p.resident_memory_bytes,
            ),
        ];
        for (name, ty, help, v) in standard {
            if let Some(v) = v {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {ty}");
                sample(&mut out, name, "", v);
            }
        }
    }
    out
}

/// A label value in the text format: `\`, `"` and newlines escaped (a znode name may hold
/// the first two).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, ty: &str) {
    let _ = writeln!(out, "# HELP {name} {name}\n# TYPE {name} {ty}");
}

fn sample(out: &mut String, name: &str, labels: &str, v: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {}", java_double(v));
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {}", java_double(v));
    }
}

/// A value as Java's `Double.toString` writes it, which simpleclient uses: `5.0`, `NaN`,
/// `+Inf`, `1.0E7` from 10^7 up and below 10^-3.
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let t = format!("{v}");
        return if t.contains('.') { t } else { format!("{t}.0") };
    }
    // Scientific: Java's mantissa always has a fraction digit, and its exponent a capital E.
    let t = format!("{v:e}");
    let (mantissa, exp) = t.split_once('e').unwrap_or((&t, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::server_metrics::SERVER_METRICS;
    use crate::wire::ServerState;

    #[test]
    fn values_are_written_as_java_writes_doubles() {
        assert_eq!(java_double(5.0), "5.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(-1.0), "-1.0");
        assert_eq!(java_double(0.25), "0.25");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(12345678.0), "1.2345678E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::INFINITY), "+Inf");
    }

    fn status(synced: bool) -> MemberStatus {
        let board = crate::net::status::StatusBoard::default();
        board.looking();
        board.decided(ServerState::Following, 2);
        if synced {
            board.synced(Some(15));
        }
        board.received(false);
        board.received(true);
        let mut s = board.read();
        s.node_count = 5;
        s
    }

    #[test]
    fn a_synced_follower_has_javas_families_and_a_looking_one_no_gauges() {
        let setup = MemberSetup {
            speaks: crate::net::dialect::JavaRelease::new(3, 8, 0),
            voters: 3,
            ..MemberSetup::default()
        };
        let text = exposition(&status(true), &setup, None);
        assert!(
            text.contains(
                "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 5.0\n"
            ),
            "{text}"
        );
        assert!(text.contains("\nquorum_size 3.0\n"));
        assert!(text.contains("\nlooking_count 1.0\n"));
        assert!(text.contains("\nlearner_commit_received_count 1.0\n"));
        assert!(text.contains("\nfollower_sync_time{quantile=\"0.5\",} 15.0\nfollower_sync_time_count 1.0\nfollower_sync_time_sum 15.0\n"), "{text}");
        assert!(text.contains("\nreadlatency{quantile=\"0.99\",} NaN\n"));
        let families = text.matches("# TYPE ").count();
        assert_eq!(
            families,
            SERVER_METRICS.len() + SERVING_GAUGES.len() + QUOTA_GAUGE_SETS.len()
        );
        let looking = exposition(&status(false), &setup, None);
        assert!(!looking.contains("znode_count"));
        assert_eq!(looking.matches("# TYPE ").count(), SERVER_METRICS.len());
    }
}
