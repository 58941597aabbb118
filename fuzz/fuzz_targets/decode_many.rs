#![no_main]
//! Several captures through the capture reader, reassembly and election decoder: each alone,
//! and all of them through decode's multi-file merge (clock offsets estimated from shared
//! segments, one copy per segment, capture losses), as `zkfle decode a.pcap b.pcap` reads them;
//! one summary of all the records. The input is split at the bytes "\xff--\xff" into up to
//! four files. No panic, no hang; the JSON of every record parses.
use libfuzzer_sys::fuzz_target;
use zkfle::capture::TcpSegments;
use zkfle::capture::merge::{MergedSegments, SegmentIndex, align};
use zkfle::story::Summarizer;
use zkfle::decode::{DecodeOptions, Decoder};

const SEP: &[u8] = b"\xff--\xff";

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() < 3 {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

fuzz_target!(|data: &[u8]| {
    let mut summary = Summarizer::new(std::collections::HashMap::new());
    let mut writer = zkfle::output::json::JsonWriter::new();
    for file in split(data) {
        let Ok(segments) = TcpSegments::from_reader(std::io::Cursor::new(file.to_vec())) else {
            continue;
        };
        let options = DecodeOptions {
            ports: vec![3888, 0],
            ..DecodeOptions::default()
        };
        for record in Decoder::new(segments, options) {
            let mut line = Vec::new();
            writer.record(&mut line, &record);
            let _: serde_json::Value = serde_json::from_slice(&line).unwrap();
            summary.add(&record);
        }
    }
    // The merge, as `capture::merge::open_files` does it: index every file, align, merge.
    let files = split(data);
    let open = |f: &[u8]| TcpSegments::from_reader(std::io::Cursor::new(f.to_vec())).ok();
    let mut indexes = Vec::new();
    for f in &files {
        let mut index = SegmentIndex::default();
        if let Some(mut segments) = open(f) {
            while let Some(Ok(())) = segments.next_with(|seg| index.add(seg)) {}
        }
        indexes.push(index);
    }
    let offsets = align(&indexes, &vec![None; files.len()]);
    let inputs: Vec<_> = files
        .iter()
        .zip(offsets)
        .enumerate()
        .filter_map(|(i, (f, o))| open(f).map(|s| (format!("file{i}"), s, o)))
        .collect();
    let merged = MergedSegments::new(inputs);
    let options = DecodeOptions {
        ports: vec![3888, 0],
        ..DecodeOptions::default()
    };
    let mut decoder = Decoder::with_source(merged, options);
    for record in decoder.by_ref() {
        let mut line = Vec::new();
        writer.record(&mut line, &record);
        let _: serde_json::Value = serde_json::from_slice(&line).unwrap();
        summary.add(&record);
    }
    let _ = decoder.segments().losses();
    let s = summary.finish();
    let _: serde_json::Value = serde_json::from_str(&s.to_json().to_string()).unwrap();
    let _ = s.to_text(0.0);
});
