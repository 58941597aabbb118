//! What merging per-host captures found, as text and JSON: each file's clock offset, and the
//! segments a file lacks that another holds (capture losses).

use serde_json::{Value, json};

use crate::capture::merge::{ClockOffset, Loss};

/// Nanoseconds as seconds. A division, not a product with 1e-9, so that a whole number of
/// microseconds prints as itself in JSON (`2e-6`, not `2.0000000000000003e-6`).
fn seconds(nanos: i64) -> f64 {
    nanos as f64 / 1e9
}

/// The clock offset of each file (`"clocks"` in the summary's JSON).
pub fn clocks_json(clocks: &[(String, ClockOffset)]) -> Value {
    Value::Array(
        clocks
            .iter()
            .enumerate()
            .map(|(i, (file, c))| match c {
                ClockOffset::Estimated { offset, error } => json!({
                    "file": file, "offset": seconds(*offset), "error": seconds(*error),
                    "status": if i == 0 && *offset == 0 && *error == 0 { "reference" } else { "estimated" },
                }),
                ClockOffset::Fixed { offset } => json!({
                    "file": file, "offset": seconds(*offset), "error": 0.0, "status": "given",
                }),
                ClockOffset::Unaligned => json!({
                    "file": file, "offset": null, "error": null, "status": "unaligned",
                }),
                ClockOffset::Continues { file: before, offset } => json!({
                    "file": file, "offset": seconds(*offset), "error": null, "status": "continues",
                    "continues": clocks.get(*before).map(|c| c.0.as_str()),
                }),
            })
            .collect(),
    )
}

/// The clock offsets, for people.
pub fn clocks_text(clocks: &[(String, ClockOffset)]) -> String {
    let mut s = String::from(
        "clocks (seconds added to each file's times to put them on one clock, from segments the files share):\n",
    );
    for (i, (file, c)) in clocks.iter().enumerate() {
        let what = match c {
            ClockOffset::Estimated { offset: 0, error: 0 } if i == 0 => "reference".to_string(),
            ClockOffset::Estimated { offset, error } => format!(
                "{:+.6} s ± {:.6} s",
                seconds(*offset),
                seconds(*error)
            ),
            ClockOffset::Fixed { offset } => {
                format!("{:+.6} s (given with --clock-offset)", seconds(*offset))
            }
            ClockOffset::Unaligned => "unaligned: shares no segments (both ways) with the other files; its times are as recorded".to_string(),
            ClockOffset::Continues { file: before, .. } => format!(
                "continues {} (the same host's capture, cut into files: read after it, on its clock)",
                clocks.get(*before).map_or("?", |c| c.0.as_str())
            ),
        };
        s.push_str(&format!("  {file}: {what}\n"));
    }
    s
}

/// The capture losses (`"capture_losses"` in the summary's JSON).
pub fn losses_json(losses: &[Loss], clocks: &[(String, ClockOffset)]) -> Value {
    Value::Array(
        losses
            .iter()
            .map(|l| {
                json!({
                    "file": clocks.get(l.file).map(|c| c.0.as_str()),
                    "src": l.src.to_string(), "dst": l.dst.to_string(),
                    "segments": l.segments, "bytes": l.bytes,
                })
            })
            .collect(),
    )
}

/// The capture losses, a line each.
pub fn losses_text(losses: &[Loss], clocks: &[(String, ClockOffset)]) -> String {
    let mut s = String::new();
    for l in losses {
        let file = clocks.get(l.file).map_or("?", |c| c.0.as_str());
        s.push_str(&format!(
            "capture loss: {file} lacks {} segment(s) ({} bytes) of {} -> {} that another file holds\n",
            l.segments, l.bytes, l.src, l.dst
        ));
    }
    s
}
