//! The drawn and exported formats of `zkfle decode` against every fixture: the timeline page
//! in a real headless Chromium (Debian's `chromium`, installed by scripts/test.sh), and the
//! Mermaid and ShiViz exports parsed back and compared with the decode.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn zkfle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zkfle"))
}

/// The decode arguments for a fixture: its election ports, and its zoo.cfg for 3.4 captures.
fn decode_args(dir: &Path) -> Vec<String> {
    let mut args = vec![
        "decode".to_string(),
        capture_file(dir).unwrap().display().to_string(),
    ];
    for p in election_ports(dir) {
        args.push("--port".into());
        args.push(p.to_string());
    }
    if needs_config(dir) {
        args.push("--config".into());
        args.push(dir.join("zoo.cfg").display().to_string());
    }
    args
}

fn run(dir: &Path, extra: &[&str]) -> String {
    let out = zkfle().args(decode_args(dir)).args(extra).output().unwrap();
    assert!(
        out.status.success(),
        "{} {extra:?}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The decode's messages (initial messages and notifications) in the JSON-lines contract.
fn messages(dir: &Path) -> Vec<Value> {
    run(dir, &["--format", "jsonl"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        // The election messages (quorum packets are not drawn as messages).
        .filter(|v| v["type"] == "initial" || v["type"] == "notification")
        .collect()
}

/// The messages the page draws: not those of non-members (probes: `v3.9.5-observer` holds
/// zkfle probe's, sids Long.MAX_VALUE - 1 and - 2), which get no lane of their own.
fn drawn(msgs: Vec<Value>, s: &Value) -> Vec<Value> {
    let outsiders: BTreeSet<String> = s["non_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["sid"].to_string())
        .collect();
    msgs.into_iter()
        .filter(|m| {
            !outsiders.contains(&m["from_sid"].to_string())
                && !outsiders.contains(&m["to_sid"].to_string())
        })
        .collect()
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&run(dir, &["--summary", "--format", "jsonl"])).unwrap()
}

fn decisions(s: &Value) -> usize {
    s["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["decisions"].as_array().unwrap().len())
        .sum()
}

/// Lanes: one per known sid, one per address whose sid is unknown.
fn lanes(msgs: &[Value], s: &Value) -> usize {
    let mut l = BTreeSet::new();
    for m in msgs {
        for (sid, addr) in [("from_sid", "src"), ("to_sid", "dst")] {
            // Sids above 2^53 reach the page as exact strings: each has its own lane.
            l.insert(match m[sid].as_i64() {
                Some(s) => format!("s{s}"),
                None => format!("a{}", m[addr]),
            });
        }
    }
    for r in s["rounds"].as_array().unwrap() {
        for d in r["decisions"].as_array().unwrap() {
            l.insert(format!("s{}", d["sid"].as_i64().unwrap()));
        }
    }
    l.len()
}

/// A vote's leader as the drawn formats write it: an observer's Long.MIN_VALUE is "none".
fn leader_text(leader: &Value) -> String {
    match leader.as_i64() {
        Some(i64::MIN) => "none".to_string(),
        _ => leader.to_string(),
    }
}

fn chromium() -> PathBuf {
    for c in ["chromium", "chromium-browser"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            && out.status.success()
        {
            return PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        }
    }
    panic!("chromium is not installed: scripts/test.sh installs it (apt-get install chromium)");
}

fn browser_args(profile: &Path) -> Vec<String> {
    vec![
        "--headless".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--hide-scrollbars".into(),
        "--no-first-run".into(),
        format!("--user-data-dir={}", profile.display()),
        "--virtual-time-budget=10000".into(),
        "--window-size=1400,760".into(),
    ]
}

/// The page after its script ran, as Chromium's DOM dump: the counts element's attributes.
fn page_counts(page: &Path, profile: &Path) -> BTreeMap<String, String> {
    page_counts_at(&page.display().to_string(), page, profile)
}

fn page_counts_at(url: &str, page: &Path, profile: &Path) -> BTreeMap<String, String> {
    counts_in(&page_dom(url, profile), page)
}

/// The page's DOM after its script ran.
fn page_dom(url: &str, profile: &Path) -> String {
    let out = Command::new(chromium())
        .args(browser_args(profile))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The counts element's attributes in a DOM dump.
fn counts_in(dom: &str, page: &Path) -> BTreeMap<String, String> {
    let at = dom
        .find("<div id=\"zkfle-counts\"")
        .unwrap_or_else(|| panic!("no counts element in the DOM of {}", page.display()));
    let tag = &dom[at..at + dom[at..].find('>').unwrap()];
    let mut attrs = BTreeMap::new();
    for part in tag.split(" data-").skip(1) {
        let (k, v) = part.split_once("=\"").unwrap();
        attrs.insert(k.to_string(), v[..v.find('"').unwrap()].to_string());
    }
    assert_eq!(
        attrs["ready"],
        "true",
        "{}: the script did not finish",
        page.display()
    );
    attrs
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn timeline_page_in_chromium_draws_every_message_server_and_decision() {
    let dir = scratch("visual-html");
    let profile = dir.join("profile");
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().to_string();
        let page = dir.join(format!("{name}.html"));
        let html = run(&fixture, &["--format", "html"]);
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{name}: offline"
        );
        std::fs::write(&page, html).unwrap();
        let s = summary(&fixture);
        let all = messages(&fixture);
        let embedded = all.len();
        let msgs = drawn(all, &s);
        let dom = page_dom(&format!("file://{}#drawlog", page.display()), &profile);
        let c = counts_in(&dom, &page);
        check_drawing(&name, &dom, &s);
        assert_eq!(c["arrows"], msgs.len().to_string(), "{name}: arrows");
        // Every message is in the page's data; the non-members' are not drawn.
        assert_eq!(c["messages"], embedded.to_string(), "{name}: messages");
        assert_eq!(c["lanes"], lanes(&msgs, &s).to_string(), "{name}: lanes");
        assert_eq!(
            c["decisions"],
            decisions(&s).to_string(),
            "{name}: decisions"
        );
        assert_eq!(
            c["listed-decisions"],
            decisions(&s).to_string(),
            "{name}: side panel"
        );
        assert_eq!(
            c["rounds"],
            s["rounds"].as_array().unwrap().len().to_string()
        );
        // Zoomed out to the whole capture, small fixtures show every arrow.
        assert_eq!(c["aggregated"], "false", "{name}");
        assert_eq!(c["drawn-arrows"], msgs.len().to_string(), "{name}: drawn");
    }
    // Filters and hover, exercised by the page itself (`#selftest`) on a capture with a
    // kill and a restart: each server's filter shows the messages to and from it, each
    // round's the notifications of that round, and hovering an arrow shows every field.
    for name in ["basic3", "staggered5"] {
        let fixture = fixtures().into_iter().find(|d| d.ends_with(name)).unwrap();
        let msgs = messages(&fixture);
        let page = dir.join(format!("{name}.html"));
        let url = format!("file://{}#selftest", page.display());
        let c = page_counts_at(&url, &page, &profile);
        let mut lanes_expected = Vec::new();
        let sids: BTreeSet<i64> = msgs
            .iter()
            .flat_map(|m| {
                [
                    m["from_sid"].as_i64().unwrap(),
                    m["to_sid"].as_i64().unwrap(),
                ]
            })
            .collect();
        for sid in &sids {
            let n = msgs
                .iter()
                .filter(|m| m["from_sid"] == *sid || m["to_sid"] == *sid)
                .count();
            lanes_expected.push(format!("sid {sid}={n}"));
        }
        assert_eq!(c["selftest-lanes"], lanes_expected.join(";"), "{name}");
        let epochs: BTreeSet<i64> = msgs
            .iter()
            .filter_map(|m| m["election_epoch"].as_i64())
            .collect();
        let rounds_expected: Vec<String> = epochs
            .iter()
            .map(|e| {
                let n = msgs.iter().filter(|m| m["election_epoch"] == *e).count();
                format!("{e}={n}")
            })
            .collect();
        assert_eq!(c["selftest-rounds"], rounds_expected.join(";"), "{name}");
        assert_eq!(c["selftest-hover"], "every field", "{name}");
    }
    // The picture: a real screenshot of one page.
    let shot = dir.join("basic3.png");
    let out = Command::new(chromium())
        .args(browser_args(&profile))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(dir.join("basic3.html"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    println!("screenshot: {}", shot.display());
}

/// 100,000 messages (the `big` fixture's traffic repeated, shifted in time): the page loads,
/// builds every arrow, and aggregates when zoomed out. Its draw time is printed, not asserted
/// (figures are measured in docs/visual.md, not in timed tests).
#[test]
fn timeline_page_holds_100k_messages() {
    use zkfle::decode::{Body, Record};
    use zkfle::story::Summarizer;
    let big = fixtures().into_iter().find(|d| d.ends_with("big")).unwrap();
    let base: Vec<Record> = decode_fixture(&big)
        .into_iter()
        .filter(|r| matches!(r.body, Body::Initial(_) | Body::Notification(_)))
        .collect();
    let span = base.last().unwrap().time.secs - base[0].time.secs + 1;
    let mut records = Vec::with_capacity(100_000);
    let mut copy = 0;
    while records.len() < 100_000 {
        for r in &base {
            if records.len() == 100_000 {
                break;
            }
            let mut r = r.clone();
            r.time.secs += copy * span;
            records.push(r);
        }
        copy += 1;
    }
    let mut summarizer = Summarizer::default();
    for r in &records {
        summarizer.add(r);
    }
    let model = summarizer.finish();
    let s = model.to_json();
    let dir = scratch("visual-100k");
    let page = dir.join("100k.html");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&page).unwrap());
    zkfle::output::html::write_page(&mut out, "100k", &records, &model).unwrap();
    drop(out);
    let c = page_counts(&page, &dir.join("profile"));
    assert_eq!(c["arrows"], "100000");
    assert_eq!(c["decisions"], decisions(&s).to_string());
    assert_eq!(c["aggregated"], "true");
    println!(
        "100,000 messages: {} MB page, draw of the whole capture {} ms (aggregated: {})",
        std::fs::metadata(&page).unwrap().len() / 1_000_000,
        c["draw-ms"],
        c["draw-parts"]
    );
}

/// The page draws the summary's sync phases (one per decision with a quorum-port sync) and
/// serving times (one per round whose new leader had its quorum), on a real quorum-port
/// capture; its side panel is the text summary's lines, its anomalies the summary's.
#[test]
fn timeline_page_shows_the_summarys_syncs_serving_and_anomalies() {
    for name in ["observer-zab", "v3.9.5-lagging3"] {
        let fixture = fixtures().into_iter().find(|d| d.ends_with(name)).unwrap();
        let s = summary(&fixture);
        let rounds = s["rounds"].as_array().unwrap();
        let syncs: usize = rounds
            .iter()
            .flat_map(|r| r["decisions"].as_array().unwrap())
            .filter(|d| d["sync"]["started"].is_number())
            .count();
        let serving = rounds
            .iter()
            .filter(|r| r["serving"].is_number() && r["winner"].is_number())
            .count();
        assert!(syncs > 0 && serving > 0, "{name}: a capture with syncs");
        let causes = rounds
            .iter()
            .filter(|r| r["kind"] == "election" && r["cause"].is_string())
            .count();
        let dir = scratch(&format!("visual-sync-{name}"));
        let page = dir.join("page.html");
        let html = run(&fixture, &["--format", "html"]);
        std::fs::write(&page, html).unwrap();
        let c = page_counts(&page, &dir.join("profile"));
        assert_eq!(c["phases"], (syncs + serving).to_string(), "{name}");
        assert_eq!(c["causes"], causes.to_string(), "{name}");
        assert_eq!(
            c["anomalies"],
            s["anomalies"].as_array().unwrap().len().to_string(),
            "{name}"
        );
    }
}

/// `--format mermaid --round N` for every election of every fixture: one participant per
/// server, one arrow per message of that election with its fields, one note per decision.
#[test]
fn mermaid_parses_back_to_the_decode() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().to_string();
        let msgs = messages(&fixture);
        let s = summary(&fixture);
        let rounds = s["rounds"].as_array().unwrap();
        let mut seen_epochs = BTreeSet::new();
        for (i, round) in rounds.iter().enumerate() {
            let epoch = round["election_epoch"].as_i64().unwrap();
            let text = run(
                &fixture,
                &["--format", "mermaid", "--election", &(i + 1).to_string()],
            );
            // --round picks the first election that ended in that round.
            if seen_epochs.insert(epoch) {
                let by_round = run(
                    &fixture,
                    &["--format", "mermaid", "--round", &format!("{epoch:#x}")],
                );
                assert_eq!(by_round, text, "{name}: --round {epoch:#x}");
            }
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("sequenceDiagram"));
            let start = if i == 0 {
                f64::NEG_INFINITY
            } else {
                round["started"].as_f64().unwrap()
            };
            // Up to the next round begun after this one's last decision.
            let last = round["decisions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["time"].as_f64().unwrap())
                .fold(start, f64::max);
            let end = rounds[i + 1..]
                .iter()
                .map(|r| r["started"].as_f64().unwrap())
                .find(|&t| t > last)
                .unwrap_or(f64::INFINITY);
            let expected: Vec<&Value> = msgs
                .iter()
                .filter(|m| {
                    let t = m["time"].as_f64().unwrap();
                    t >= start && t < end
                })
                .collect();
            let mut participants = BTreeMap::new();
            let mut arrows = Vec::new();
            let mut notes = 0;
            for line in lines {
                let line = line.trim();
                if let Some(p) = line.strip_prefix("participant ") {
                    let (id, label) = p.split_once(" as ").unwrap();
                    participants.insert(id.to_string(), label.to_string());
                } else if line.starts_with("Note over ") {
                    notes += 1;
                } else if let Some((head, text)) = line.split_once(": ") {
                    if head.starts_with("%%") {
                        continue;
                    }
                    let (from, to) = head.split_once("->>").unwrap();
                    let from = from.trim_end_matches('-');
                    arrows.push((
                        participants[from].clone(),
                        participants[to].clone(),
                        text.to_string(),
                    ));
                }
            }
            assert_eq!(arrows.len(), expected.len(), "{name} round {epoch}");
            for ((from, to, text), m) in arrows.iter().zip(&expected) {
                let who = |sid: &Value, addr: &Value| match sid.as_i64() {
                    Some(s) => format!("sid {s}"),
                    None => addr.as_str().unwrap().to_string(),
                };
                assert_eq!(from, &who(&m["from_sid"], &m["src"]), "{name}: {text}");
                assert_eq!(to, &who(&m["to_sid"], &m["dst"]), "{name}: {text}");
                let words: Vec<&str> = text.split(' ').collect();
                if m["type"] == "notification" {
                    let hex = |v: &Value| format!("{:#x}", v.as_i64().unwrap());
                    assert_eq!(words[0], m["state"].as_str().unwrap());
                    assert_eq!(words[2], leader_text(&m["leader"]));
                    assert_eq!(words[4], hex(&m["zxid"]));
                    assert_eq!(words[6], hex(&m["election_epoch"]));
                    assert_eq!(words[8], hex(&m["peer_epoch"]));
                } else {
                    assert_eq!(&words[..3], ["initial", "message", "sid"]);
                    assert_eq!(words[3], m["sid"].to_string());
                }
            }
            assert_eq!(
                notes,
                round["decisions"].as_array().unwrap().len(),
                "{name}"
            );
        }
    }
}

/// `--format shiviz`: the regex line, then two events a message (send, receive) and one a
/// decision, with vector clocks that tick once per event of their host and never run behind
/// what a received message carried.
#[test]
fn shiviz_log_parses_back_with_consistent_vector_clocks() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().to_string();
        let msgs = messages(&fixture);
        let s = summary(&fixture);
        let text = run(&fixture, &["--format", "shiviz"]);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(zkfle::output::shiviz::REGEX));
        assert_eq!(lines.next(), Some(""));
        let rest: Vec<&str> = lines.collect();
        assert_eq!(rest.len() % 2, 0);
        let events: Vec<(&str, &str, BTreeMap<String, u64>)> = rest
            .chunks(2)
            .map(|e| {
                let (host, clock) = e[1].split_once(' ').unwrap();
                (e[0], host, serde_json::from_str(clock).unwrap())
            })
            .collect();
        assert_eq!(events.len(), 2 * msgs.len() + decisions(&s), "{name}");
        let mut own: BTreeMap<String, u64> = BTreeMap::new();
        for (_, host, clock) in &events {
            let n = own.entry(host.to_string()).or_default();
            *n += 1;
            assert_eq!(clock[*host], *n, "{name}: {host} ticks once an event");
        }
        let sends: Vec<_> = events.iter().filter(|e| e.0.starts_with("send ")).collect();
        let receives: Vec<_> = events
            .iter()
            .filter(|e| e.0.starts_with("receive "))
            .collect();
        assert_eq!(sends.len(), msgs.len());
        for ((send, recv), m) in sends.iter().zip(&receives).zip(&msgs) {
            let host = |sid: &Value, addr: &Value| match sid.as_i64() {
                Some(s) => format!("sid{s}"),
                None => addr.as_str().unwrap().to_string(),
            };
            assert_eq!(send.1, host(&m["from_sid"], &m["src"]));
            assert_eq!(recv.1, host(&m["to_sid"], &m["dst"]));
            for (k, v) in &send.2 {
                assert!(
                    recv.2.get(k).copied().unwrap_or(0) >= *v,
                    "{name}: receive behind send"
                );
            }
            let words: Vec<&str> = send.0.split(' ').collect();
            if m["type"] == "notification" {
                assert_eq!(words[1], m["state"].as_str().unwrap());
                assert_eq!(words[3], leader_text(&m["leader"]));
                assert_eq!(words[5], format!("{:#x}", m["zxid"].as_i64().unwrap()));
                assert_eq!(
                    words[7],
                    format!("{:#x}", m["election_epoch"].as_i64().unwrap())
                );
                assert_eq!(words[11], m["size"].to_string());
            } else {
                assert_eq!(words[4], m["sid"].to_string());
            }
            assert_eq!(
                &recv.0["receive ".len()..recv.0.rfind(" from ").unwrap()],
                &send.0["send ".len()..send.0.rfind(" to ").unwrap()]
            );
        }
    }
}

/// The recorded drawing calls of a page opened with `#drawlog` (`pre#zkfle-drawlog`).
fn drawlog_in(dom: &str) -> Value {
    let at = dom
        .find("<pre id=\"zkfle-drawlog\"")
        .expect("the page kept its drawing calls");
    let text = &dom[at..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</pre>").unwrap()];
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap()
}

/// What the page drew, rebuilt from its canvas calls, against the summary it was given:
/// every lane a server, every state band a span of the summary's `states` and every span
/// drawn, a diamond at every decision, a triangle at every timed anomaly, a strip at every
/// sync, each within 1 ms of the model's time; lanes fill at least 90% of the plot's height;
/// no text on the canvas or beside it reads "undefined", "null" or a raw epoch time.
fn check_drawing(name: &str, dom: &str, s: &Value) {
    const MS: f64 = 0.001;
    let log = drawlog_in(dom);
    let v = &log["view"];
    let f = |k: &str| v[k].as_f64().unwrap();
    let (left, top, bottom, w, h, v0, v1, lane_h) = (
        f("LEFT"),
        f("TOP"),
        f("BOTTOM"),
        f("W"),
        f("H"),
        f("v0"),
        f("v1"),
        f("laneH"),
    );
    let time_of = |x: f64| v0 + (x - left) / (w - left - 10.0) * (v1 - v0);
    let px = (v1 - v0) / (w - left - 10.0);
    let calls = log["calls"].as_array().unwrap();
    let args = |c: &Value| -> Vec<f64> {
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect()
    };
    // Lanes: the labels at the left edge, one per server, and their rows' centres.
    let mut lane_at: Vec<(f64, String)> = Vec::new();
    for c in calls.iter().filter(|c| c["op"] == "fillText") {
        let a = c["args"].as_array().unwrap();
        if a[1].as_f64() == Some(6.0) {
            lane_at.push((
                a[2].as_f64().unwrap() - 4.0,
                a[0].as_str().unwrap().to_string(),
            ));
        }
    }
    let lanes = v["lanes"].as_f64().unwrap();
    assert!(
        lane_h * lanes >= 0.9 * (h - top - bottom),
        "{name}: {lanes} lanes of {lane_h} px fill less than 90% of {} px",
        h - top - bottom
    );
    let lane_of = |y: f64| -> String {
        lane_at
            .iter()
            .min_by(|a, b| (a.0 - y).abs().total_cmp(&(b.0 - y).abs()))
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    // State bands: rectangles in the states' colours.
    let colours: BTreeMap<&str, &str> = [
        ("#f2c744", "LOOKING"),
        ("#6aa5e8", "FOLLOWING"),
        ("#3f8f4f", "LEADING"),
        ("#b48ad8", "OBSERVING"),
    ]
    .into_iter()
    .collect();
    let mut bands: Vec<(String, String, f64, f64, f64)> = Vec::new();
    let mut strips: Vec<(String, f64, f64)> = Vec::new();
    for c in calls.iter().filter(|c| c["op"] == "fillRect") {
        let a = args(c);
        let fill = c["fill"].as_str().unwrap();
        if let Some(state) = colours.get(fill) {
            bands.push((
                lane_of(a[1] + a[3] / 2.0),
                state.to_string(),
                time_of(a[0]),
                time_of(a[0] + a[2]),
                a[2],
            ));
        } else if fill == "#8c564b" {
            strips.push((
                lane_of(a[1] - lane_h.min(40.0) / 8.0),
                time_of(a[0]),
                time_of(a[0] + a[2]),
            ));
        }
    }
    let spans = s["states"].as_array().unwrap();
    assert_eq!(
        bands.len(),
        spans.len(),
        "{name}: bands drawn vs the summary's states"
    );
    for st in spans {
        let (lane, state) = (format!("sid {}", st["sid"]), st["state"].as_str().unwrap());
        let (from, to) = (st["from"].as_f64().unwrap(), st["to"].as_f64().unwrap());
        let found = bands.iter().any(|(l, s, a, b, width)| {
            *l == lane
                && s == state
                && (a - from).abs() < MS
                // A span shorter than 2 px is drawn 2 px wide.
                && ((b - to).abs() < MS || (*width <= 2.0 + 1e-9 && to - from < 2.0 * px))
        });
        assert!(found, "{name}: no band for {st} among {bands:?}");
    }
    // Decisions: diamonds, each a path from (x, y - 7); decisions within 2 px of another on
    // the same lane share one.
    let mut diamonds: Vec<(String, f64)> = Vec::new();
    for pair in calls.windows(2) {
        let (m, l) = (&pair[0], &pair[1]);
        if m["on"] == 0 || m["op"] != "moveTo" || l["op"] != "lineTo" || l["on"] != m["on"] {
            continue;
        }
        let (a, b) = (args(m), args(l));
        // The diamond's first two corners: (x, y - 7) then (x + 7, y).
        if (b[0] - a[0] - 7.0).abs() < 1e-9 && (b[1] - a[1] - 7.0).abs() < 1e-9 {
            diamonds.push((lane_of(a[1] + 7.0), time_of(a[0])));
        }
    }
    let mut decided: Vec<(String, f64)> = s["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["decisions"].as_array().unwrap())
        .map(|d| (format!("sid {}", d["sid"]), d["time"].as_f64().unwrap()))
        .collect();
    decided.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (lane, t) in &decided {
        let found = diamonds
            .iter()
            .any(|(l, x)| l == lane && ((x - t).abs() < MS || (x - t).abs() < 2.0 * px));
        assert!(found, "{name}: no diamond for {lane}'s decision at {t}");
    }
    assert!(
        diamonds.len() <= decided.len(),
        "{name}: more diamonds than decisions"
    );
    // Anomalies: red triangles from (x, TOP - 12).
    let triangles: Vec<f64> = calls
        .iter()
        .filter(|c| c["on"] == 0 && c["op"] == "moveTo" && c["fill"] == "#cc0000")
        .filter(|c| (args(c)[1] - (top - 12.0)).abs() < 1e-9)
        .map(|c| time_of(args(c)[0]))
        .collect();
    let timed: Vec<f64> = s["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["time"].as_f64())
        .collect();
    assert_eq!(triangles.len(), timed.len(), "{name}: anomalies drawn");
    for t in &timed {
        assert!(
            triangles.iter().any(|x| (x - t).abs() < MS),
            "{name}: anomaly at {t}"
        );
    }
    // Syncs: one strip per decision with a sync, from its start.
    let syncs: Vec<(String, f64)> = s["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["decisions"].as_array().unwrap())
        .filter_map(|d| Some((format!("sid {}", d["sid"]), d["sync"]["started"].as_f64()?)))
        .collect();
    for (lane, t) in &syncs {
        assert!(
            strips.iter().any(|(_, a, _)| (a - t).abs() < MS),
            "{name}: no sync strip for {lane} at {t}"
        );
    }
    // Words: nothing undefined, null, or an epoch time in seconds.
    let epoch = |t: &str| {
        t.split(|c: char| !c.is_ascii_digit())
            .any(|d| d.len() == 10 && d.starts_with('1'))
    };
    let texts: Vec<String> = calls
        .iter()
        .filter(|c| c["op"] == "fillText")
        .map(|c| c["args"][0].as_str().unwrap_or_default().to_string())
        .collect();
    let side = &dom[dom.find("<aside").unwrap()..dom.find("</aside>").unwrap()];
    let mut side_text = String::new();
    let mut in_tag = false;
    for ch in side.chars() {
        match ch {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                side_text.push(' ');
            }
            c if !in_tag => side_text.push(c),
            _ => {}
        }
    }
    for t in texts.iter().chain(std::iter::once(&side_text)) {
        assert!(
            !t.contains("undefined") && !t.contains("null") && !epoch(t),
            "{name}: {t}"
        );
    }
}

/// The README's screenshot (docs/img/timeline-basic3.png, drawn by scripts/docs.sh) is of the
/// page as it draws today: its canvas calls (shapes and colours; text is left out, its
/// placement follows the fonts' metrics) equal those recorded beside the image when it was
/// drawn (docs/img/timeline-basic3.draws). `ZKFLE_DOCS_WRITE=1` (scripts/docs.sh) rewrites it.
#[test]
fn the_readme_image_is_of_todays_page() {
    let fixture = fixtures()
        .into_iter()
        .find(|d| d.ends_with("basic3"))
        .unwrap();
    let dir = scratch("visual-readme");
    let page = dir.join("basic3.html");
    std::fs::write(&page, run(&fixture, &["--format", "html"])).unwrap();
    let dom = page_dom(
        &format!("file://{}#drawlog", page.display()),
        &dir.join("profile"),
    );
    let log = drawlog_in(&dom);
    let mut drawn = String::new();
    for c in log["calls"].as_array().unwrap() {
        if c["op"] == "fillText" {
            continue;
        }
        let args: Vec<String> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| match a.as_f64() {
                Some(v) => format!("{v:.2}"),
                None => a.to_string(),
            })
            .collect();
        drawn.push_str(&format!(
            "{} {} {} {}\n",
            c["on"],
            c["op"].as_str().unwrap(),
            c["fill"].as_str().unwrap(),
            args.join(" ")
        ));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img/timeline-basic3.draws");
    if std::env::var_os("ZKFLE_DOCS_WRITE").is_some() {
        std::fs::write(&path, &drawn).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        recorded == drawn,
        "docs/img/timeline-basic3.png is not of today's page ({} calls recorded, {} drawn): run scripts/docs.sh",
        recorded.lines().count(),
        drawn.lines().count()
    );
}
