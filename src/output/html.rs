//! `zkfle decode --format html`: one self-contained page that draws the capture's elections.
//!
//! The page is `page/timeline.html` with its stylesheet, script and the data inlined: the
//! records in the JSON-lines contract and the summary's JSON, so it works offline and shows
//! every field the decode and the summary have. The script draws on a canvas (one lane per
//! server, state bands, one arrow per message, decisions and anomalies) and aggregates
//! messages per pixel column when more are in view than can be told apart.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::Value;

use super::is_message;
use super::json::{JsonWriter, record_value};
use crate::decode::{Body, Record};
use crate::story::Summary;

/// Distinct config texts kept once each; more than this (never seen) stay in their records.
const MAX_SHARED_CONFIGS: usize = 4096;

const TEMPLATE: &str = include_str!("page/timeline.html");
const STYLE: &str = include_str!("page/timeline.css");
const SCRIPT: &str = include_str!("page/timeline.js");

/// Writes the page for `records` and their `summary` to `out`. `title` names the captures
/// (their paths, space-separated): the page shows their file names, the paths on hover.
pub fn write_page(
    out: &mut impl Write,
    title: &str,
    records: &[Record],
    summary: &Summary,
) -> io::Result<()> {
    // The text summary's anchor: its lines' relative times are the page's.
    let t0 = records.first().map_or(0.0, |r| r.time.as_secs_f64());
    let round_texts = summary.round_texts(&|t: f64| format!("+{:.3}s", t - t0), false);
    let short = short_title(title);
    let mut data = Vec::with_capacity(records.len() * 320 + 4096);
    data.extend_from_slice(b"{\"title\":");
    data.extend_from_slice(serde_json::to_string(&short).unwrap_or_default().as_bytes());
    data.extend_from_slice(b",\"t0\":");
    serde_json::to_writer(&mut data, &t0).map_err(io::Error::other)?;
    data.extend_from_slice(b",\"round_texts\":");
    serde_json::to_writer(&mut data, &round_texts).map_err(io::Error::other)?;
    data.extend_from_slice(b",\"summary\":");
    let mut summary = summary.to_json();
    exact_sids(&mut summary, false);
    serde_json::to_writer(&mut data, &summary).map_err(io::Error::other)?;
    data.extend_from_slice(b",\"records\":[");
    // Every notification carries the ensemble's config text, most of a record's bytes; the
    // page keeps each distinct text once (`configs`) and the records point at it
    // (`config_ref`); the script puts the text back before anything reads the records.
    let mut configs: Vec<String> = Vec::new();
    let mut config_index: HashMap<String, usize> = HashMap::new();
    let mut writer = JsonWriter::new();
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            data.push(b',');
        }
        let mut v = record_value(&mut writer, r);
        exact_sids(&mut v, false);
        if let Some(Value::String(text)) = v.get("config") {
            let at = match config_index.get(text.as_str()) {
                Some(&at) => Some(at),
                None if configs.len() < MAX_SHARED_CONFIGS => {
                    configs.push(text.clone());
                    config_index.insert(text.clone(), configs.len() - 1);
                    Some(configs.len() - 1)
                }
                None => None,
            };
            if let (Some(at), Value::Object(m)) = (at, &mut v) {
                m.insert("config".into(), Value::Null);
                m.insert("config_ref".into(), at.into());
            }
        }
        serde_json::to_writer(&mut data, &v).map_err(io::Error::other)?;
    }
    data.extend_from_slice(b"],\"configs\":");
    serde_json::to_writer(&mut data, &configs).map_err(io::Error::other)?;
    data.extend_from_slice(b"}");
    let messages = records.iter().filter(|r| is_message(r)).count();
    let problems = records
        .iter()
        .filter(|r| matches!(r.body, Body::Problem(_)))
        .count();
    let decisions: usize = summary["rounds"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| r["decisions"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    let page = TEMPLATE
        .replace("{{TITLE}}", &html_escape(&short))
        .replace("{{PATHS}}", &html_escape(title))
        .replace("{{MESSAGES}}", &messages.to_string())
        .replace("{{PROBLEMS}}", &problems.to_string())
        .replace("{{DECISIONS}}", &decisions.to_string())
        .replace("{{STYLE}}", STYLE);
    let (head, tail) = page
        .split_once("{{SCRIPT}}")
        .ok_or_else(|| io::Error::other("page template has no script slot"))?;
    let (before_data, after_data) = head
        .split_once("{{DATA}}")
        .ok_or_else(|| io::Error::other("page template has no data slot"))?;
    out.write_all(before_data.as_bytes())?;
    // `<` only occurs inside JSON strings, where `\u003c` means the same; so no `</script>`
    // in a config or address can end the data early.
    let mut from = 0;
    for (i, b) in data.iter().enumerate() {
        if *b == b'<' {
            out.write_all(&data[from..i])?;
            out.write_all(b"\\u003c")?;
            from = i + 1;
        }
    }
    out.write_all(&data[from..])?;
    out.write_all(after_data.as_bytes())?;
    out.write_all(SCRIPT.as_bytes())?;
    out.write_all(tail.as_bytes())
}

/// Server ids beyond 2^53 (zkfle probe's Long.MAX_VALUE - 1, say) cannot be JavaScript
/// numbers without two of them becoming one: the page gets them as strings, exactly. Only
/// fields that name servers are touched; zxids and the rest stay numbers.
fn exact_sids(v: &mut Value, names_a_server: bool) {
    const EXACT: u64 = 1 << 53;
    match v {
        Value::Number(n) if names_a_server => {
            if let Some(i) = n.as_i64()
                && i.unsigned_abs() > EXACT
            {
                *v = Value::String(i.to_string());
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| exact_sids(x, names_a_server)),
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                let server = k.ends_with("sid")
                    || k.ends_with("sids")
                    || matches!(
                        k.as_str(),
                        "leader" | "winner" | "server" | "learner" | "participants" | "members"
                    );
                exact_sids(x, server);
            }
        }
        _ => {}
    }
}

/// The captures' file names without their folders (`/data/host.1.pcap x/host.2.pcap` is
/// `host.1.pcap host.2.pcap`), so that several fit on the header's one line.
fn short_title(title: &str) -> String {
    title
        .split(' ')
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .collect::<Vec<_>>()
        .join(" ")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_the_script() {
        let summary = Summary {
            anomalies: vec![crate::story::Anomaly {
                time: None,
                kind: crate::story::AnomalyKind::Malformed {
                    what: "</script><b>".into(),
                    count: 1,
                },
            }],
            ..Summary::default()
        };
        let mut out = Vec::new();
        write_page(&mut out, "a <title>", &[], &summary).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert_eq!(page.matches("</script>").count(), 2, "only the page's own");
        assert!(page.contains("\\u003c/script>\\u003cb>"));
        assert!(page.contains("a &lt;title&gt;"));
        assert!(!page.contains("{{"));
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "offline"
        );
    }

    #[test]
    fn sids_beyond_2_pow_53_stay_exact() {
        let mut v = serde_json::json!({"from_sid": 9223372036854775806i64, "to_sid": 1,
            "zxid": 9223372036854775806i64, "rounds": [{"participants": [9223372036854775805i64, 2],
            "decisions": [{"sid": 9223372036854775805i64, "leader": 3}]}]});
        exact_sids(&mut v, false);
        assert_eq!(v["from_sid"], "9223372036854775806");
        assert_eq!(v["to_sid"], 1);
        assert_eq!(v["zxid"], 9223372036854775806i64, "not a server id");
        assert_eq!(v["rounds"][0]["participants"][0], "9223372036854775805");
        assert_eq!(v["rounds"][0]["decisions"][0]["sid"], "9223372036854775805");
        assert_eq!(v["rounds"][0]["decisions"][0]["leader"], 3);
    }

    #[test]
    fn each_config_text_is_stored_once() {
        use crate::capture::Timestamp;
        use crate::wire::{Notification, ServerState};
        let config = "server.1=127.0.0.1:2888:3888:participant\nversion=0";
        let r = Record {
            time: Timestamp { secs: 1, nanos: 0 },
            conn: None,
            src: None,
            dst: None,
            from_sid: Some(1),
            to_sid: Some(2),
            from_sid_source: None,
            to_sid_source: None,
            offset: Some(0),
            raw: Vec::new(),
            body: Body::Notification(Notification::current(
                ServerState::Looking,
                1,
                0,
                1,
                0,
                config,
            )),
        };
        let mut out = Vec::new();
        write_page(&mut out, "t", &[r.clone(), r], &Summary::default()).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert_eq!(page.matches("server.1=127.0.0.1").count(), 1);
        assert_eq!(page.matches("\"config_ref\":0").count(), 2);
    }
}
