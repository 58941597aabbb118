#![no_main]
//! Chaos histories: any bytes as a history never panic the reader; and, so that the checks
//! are reached and not only the JSON parser, every 4 bytes also make one event of a
//! well-formed-looking history (process, type, f, key, version, value, final reads) that is
//! read and checked (every check, a small search budget) and reported as text and JSON.
use libfuzzer_sys::fuzz_target;
use zkfle::chaos::{check, history, linearizable::Budget};

fn check_and_report(h: &history::History) {
    let report = check::check(h, Budget { configurations: 2_000 });
    let _ = report.to_text();
    let _ = report.to_json().to_string();
}

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = history::read(data) {
        check_and_report(&h);
    }
    let mut text = String::new();
    for e in data.chunks_exact(4) {
        let (p, kind, key, n) = (e[0] % 6, e[1] % 9, e[2] % 3, e[3] % 8);
        let f = ["create", "set", "get", "sync-get"][(e[2] / 3 % 4) as usize];
        let line = match kind {
            0 | 1 => format!(
                r#"{{"process":{p},"type":"invoke","f":"{f}","key":"/k{key}","value":"v{n}","version":{}}}"#,
                n as i32 - 2
            ),
            2 | 3 => format!(
                r#"{{"process":{p},"type":"ok","value":"v{n}","version":{},"zxid":{}}}"#,
                n as i32 - 1,
                e[3]
            ),
            4 => format!(
                r#"{{"process":{p},"type":"fail","error":"{}"}}"#,
                ["NoNode", "NodeExists", "BadVersion", "Other"][(n % 4) as usize]
            ),
            5 => format!(r#"{{"process":{p},"type":"info"}}"#),
            6 => format!(r#"{{"type":"final","server":"s{p}","key":"/k{key}","value":"v{n}","version":{n}}}"#),
            7 => format!(r#"{{"type":"final","server":"s{p}","key":"/k{key}","value":null}}"#),
            _ => format!("INFO  jepsen.util - {p}\t:invoke\t:cas\t[{n} {key}]"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    if let Ok(h) = history::read(text.as_bytes()) {
        check_and_report(&h);
    }
});
