//! `zkfle decode --format html`: one self-contained page that draws the capture's elections.
//!
//! The page is `page/timeline.html` with its stylesheet, script and the data inlined: the
//! records in the JSON-lines contract and the summary's JSON, so it works offline and shows
//! every field the decode and the summary have. The script draws on a canvas (one lane per
//! server, state bands, one arrow per message, decisions and anomalies) and aggregates
//! messages per pixel column when more are in view than can be told apart.

use std::io::{self, Write};

use serde_json::Value;

use super::is_message;
use crate::decode::{Body, Record};
use crate::json::RecordLineWriter;

const TEMPLATE: &str = include_str!("page/timeline.html");
const STYLE: &str = include_str!("page/timeline.css");
const SCRIPT: &str = include_str!("page/timeline.js");

/// Writes the page for `records` and `summary` (the summary's JSON object) to `out`.
pub fn write_page(
    out: &mut impl Write,
    title: &str,
    records: &[Record],
    summary: &Value,
) -> io::Result<()> {
    let mut data = Vec::with_capacity(records.len() * 320 + 4096);
    data.extend_from_slice(b"{\"title\":");
    data.extend_from_slice(serde_json::to_string(title).unwrap_or_default().as_bytes());
    data.extend_from_slice(b",\"summary\":");
    serde_json::to_writer(&mut data, summary).map_err(io::Error::other)?;
    data.extend_from_slice(b",\"records\":[");
    let mut lines = RecordLineWriter::new();
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            data.push(b',');
        }
        lines.write(&mut data, r);
    }
    data.extend_from_slice(b"]}");
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
        .replace("{{TITLE}}", &html_escape(title))
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
        let summary = serde_json::json!({"type": "summary", "rounds": [], "anomalies": [{"message": "</script><b>"}]});
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
}
