#![no_main]
//! Any payload: decoding never panics, and what decodes re-encodes to the same bytes.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::Notification;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = Notification::decode(data) {
        assert_eq!(n.encode().unwrap(), data);
        let _ = n.java_view();
        let _ = n.config_version();
    }
});
