//! Election safety from a capture of the campaign's bridge, decoded by zkfle: at most one
//! leader per epoch (Zab's promise), and each election's time as the summary tells it.
//!
//! A leader states its epoch on the quorum port twice per learner: LEADERINFO and NEWLEADER
//! carry `epoch << 32` as their zxid, and only the leader of that epoch sends them. Two
//! servers sending them for one epoch are two leaders of one epoch. Proposals and commits are
//! not used: a leader syncing a learner by DIFF resends older epochs' txns.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::decode::{Body, DecodeOptions, Decoder, SidSource};
use crate::story::{RoundKind, Summarizer};
use crate::wire::QuorumConfig;
use crate::wire::quorum::packet::ptype;

/// What the capture showed.
#[derive(Debug, Clone, Default)]
pub struct ElectionCheck {
    /// Per epoch, the sids that sent LEADERINFO or NEWLEADER for it, with the first time.
    pub leaders: BTreeMap<i64, BTreeMap<i64, f64>>,
    /// Epochs with more than one leader.
    pub violations: Vec<String>,
    /// The elections of the capture (not the rejoins): when, the winner, how long.
    pub elections: Vec<ElectionTime>,
    pub records: u64,
}

#[derive(Debug, Clone)]
pub struct ElectionTime {
    /// Seconds since `origin` (the schedule's start).
    pub at: f64,
    pub winner: Option<i64>,
    /// From the first server looking to the last decision.
    pub took: Option<f64>,
    /// How long no leader served, as the summary measures it.
    pub unavailable: Option<f64>,
    pub cause: &'static str,
}

impl ElectionCheck {
    pub fn to_json(&self) -> Value {
        json!({
            "one_leader_per_epoch": self.violations.is_empty(),
            "violations": self.violations,
            "epochs": self.leaders.iter().map(|(epoch, sids)| json!({
                "epoch": epoch,
                "leaders": sids.keys().collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "elections": self.elections.iter().map(|e| json!({
                "at": (e.at * 1000.0).round() / 1000.0,
                "winner": e.winner,
                "took": e.took.map(|t| (t * 1000.0).round() / 1000.0),
                "unavailable": e.unavailable.map(|t| (t * 1000.0).round() / 1000.0),
                "cause": e.cause,
            })).collect::<Vec<_>>(),
            "records": self.records,
        })
    }
}

/// Decodes `path` (election and quorum ports) with the members of `config` known, and checks
/// it. `origin`: the schedule's start, in the capture's clock (seconds since the epoch).
pub fn check_capture(
    path: &Path,
    config: &QuorumConfig,
    origin: f64,
) -> Result<ElectionCheck, String> {
    let name = path.display().to_string();
    let segments = crate::capture::open(&name).map_err(|e| format!("{name}: {e}"))?;
    let mut options = DecodeOptions {
        keep_raw: false,
        ..DecodeOptions::default()
    };
    options.book.learn_config(config, SidSource::Config);
    let by_ip: BTreeMap<IpAddr, i64> = config
        .servers()
        .filter_map(|s| {
            s.addresses
                .first()
                .and_then(|a| a.host.parse::<IpAddr>().ok())
                .map(|ip| (ip, s.id))
        })
        .collect();
    let mut summary = Summarizer::with_config(config);
    let mut out = ElectionCheck::default();
    for record in Decoder::new(segments, options) {
        out.records += 1;
        summary.add(&record);
        let Body::Quorum(q) = &record.body else {
            continue;
        };
        if q.ptype != ptype::LEADERINFO && q.ptype != ptype::NEWLEADER {
            continue;
        }
        let Some(sid) = record
            .from_sid
            .or_else(|| record.src.and_then(|a| by_ip.get(&a.ip()).copied()))
        else {
            continue;
        };
        let t = record.time.as_secs_f64() - origin;
        out.leaders
            .entry(q.zxid >> 32)
            .or_default()
            .entry(sid)
            .or_insert(t);
    }
    for (epoch, sids) in &out.leaders {
        if sids.len() > 1 {
            let who: Vec<String> = sids
                .iter()
                .map(|(sid, t)| format!("z{sid} from {t:.3} s"))
                .collect();
            out.violations.push(format!(
                "epoch {epoch} had {} leaders: {}",
                sids.len(),
                who.join(", ")
            ));
        }
    }
    let summary = summary.finish();
    out.elections = summary
        .rounds
        .iter()
        .filter(|r| r.kind == RoundKind::Election)
        .map(|r| ElectionTime {
            at: r.started - origin,
            winner: r.winner,
            took: r.duration,
            unavailable: r.unavailable,
            cause: r.cause.name(),
        })
        .collect();
    Ok(out)
}
