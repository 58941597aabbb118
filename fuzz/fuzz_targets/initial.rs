#![no_main]
//! Any bytes as an initial message: probe and decode agree, never panic, round-trip.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::InitialMessage;
use zkfle::wire::initial::Probe;

fuzz_target!(|data: &[u8]| {
    let probe = InitialMessage::probe(data);
    if let Ok(m) = InitialMessage::decode(data) {
        assert_eq!(m.encode().unwrap(), data);
        assert_eq!(probe, Ok(Probe::Complete(data.len())));
    }
});
