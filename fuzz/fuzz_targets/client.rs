#![no_main]
//! Any bytes as a client-port reply: the session answer, reply header and frame-length decoders
//! never panic, allocate beyond their bounds, or decode what does not re-encode to the input.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::client::{ConnectResponse, MAX_FRAME, ReplyHeader, frame_len};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ConnectResponse::decode(data) {
        assert_eq!(r.encode(), data);
    }
    if let Ok(h) = ReplyHeader::decode(data) {
        let mut b = Vec::new();
        h.encode_into(&mut b);
        assert_eq!(&b[..], &data[..ReplyHeader::LEN]);
    }
    if let Ok(Some(n)) = frame_len(data) {
        assert!(n <= MAX_FRAME);
    }
});
