#![no_main]
//! A connection's byte stream fed in pieces whose sizes come from the input itself: bounded
//! buffering, no panic, and the same items as feeding it whole.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::frame::MAX_FRAME_BYTES;
use zkfle::wire::{Direction, StreamDecoder};

fn items(data: &[u8], piece: usize) -> Vec<String> {
    let mut d = StreamDecoder::new(Direction::FromInitiator);
    let mut out = Vec::new();
    for chunk in data.chunks(piece.max(1)) {
        let mut input = chunk;
        loop {
            match d.decode(&mut input) {
                Ok(Some(item)) => out.push(format!("{item:?}")),
                Ok(None) => break,
                Err(e) => {
                    out.push(format!("{e}"));
                    return out;
                }
            }
            assert!(d.buffered() <= 4 + MAX_FRAME_BYTES);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let piece = data.first().copied().unwrap_or(1) as usize;
    assert_eq!(items(data, piece), items(data, data.len()));
});
