#![no_main]
//! Several captures through the capture reader, reassembly and election decoder, as `decode`
//! handles one after another (decode has no multi-file merge yet: this covers the pipeline
//! over several inputs, and one summary of all their records). The input is split at the
//! bytes "\xff--\xff" into up to four files. No panic, no hang; the JSON of every record
//! parses.
use libfuzzer_sys::fuzz_target;
use zkfle::capture::TcpSegments;
use zkfle::decode::summary::Summarizer;
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
    for file in split(data) {
        let Ok(segments) = TcpSegments::from_reader(std::io::Cursor::new(file.to_vec())) else {
            continue;
        };
        let options = DecodeOptions {
            ports: vec![3888, 0],
            ..DecodeOptions::default()
        };
        for record in Decoder::new(segments, options) {
            let json = serde_json::to_string(&zkfle::json::RecordJson(&record)).unwrap();
            let _: serde_json::Value = serde_json::from_str(&json).unwrap();
            summary.add(&record);
        }
    }
    let s = summary.finish();
    let _: serde_json::Value = serde_json::from_str(&s.to_json().to_string()).unwrap();
    let _ = s.to_text(0.0);
});
