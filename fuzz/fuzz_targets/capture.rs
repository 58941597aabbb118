#![no_main]
//! Any file as a capture: reading, reassembly and the election and quorum decoders never panic or hang,
//! and stay within their bounds.
use libfuzzer_sys::fuzz_target;
use zkfle::capture::TcpSegments;
use zkfle::decode::{DecodeOptions, Decoder};

fuzz_target!(|data: &[u8]| {
    let Ok(segments) = TcpSegments::from_reader(std::io::Cursor::new(data.to_vec())) else {
        return;
    };
    let options = DecodeOptions {
        ports: vec![3888, 0],
        quorum_ports: vec![2888, 1],
        ..DecodeOptions::default()
    };
    let mut writer = zkfle::output::json::JsonWriter::new();
    let mut line = Vec::new();
    for record in Decoder::new(segments, options) {
        line.clear();
        writer.record(&mut line, &record);
    }
});
