#![no_main]
//! Config text: parsing never panics, and what parses prints to text that parses the same.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::QuorumConfig;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(c) = QuorumConfig::parse(text) {
            let again = QuorumConfig::parse(&c.to_string()).unwrap();
            assert_eq!(again, c);
        }
    }
});
