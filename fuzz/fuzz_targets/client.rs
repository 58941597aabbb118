#![no_main]
//! Any bytes as a client-port reply: the session answer, reply header and frame-length decoders
//! never panic, allocate beyond their bounds, or decode what does not re-encode to the input.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::client::{ConnectResponse, MAX_FRAME, ReplyHeader, frame_len};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ConnectResponse::decode(data) {
        let again = r.encode();
        assert_eq!(ConnectResponse::decode(&again).unwrap(), r);
        // Java's readBoolean takes any nonzero byte as true, as the decoder does: only a
        // readOnly byte other than 0 or 1 re-encodes differently (as 1).
        if r.read_only.is_none() || data.last().is_some_and(|b| *b <= 1) {
            assert_eq!(again, data);
        }
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
