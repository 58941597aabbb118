#![no_main]
//! Txn records and snapshot items from arbitrary bytes: no panic; a decoded txn re-encodes to
//! bytes that decode to the same txn; the snapshot decoder gives the same items in any pieces
//! and never needs more than MAX_ITEM_BYTES for one item.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::txn::{MAX_ITEM_BYTES, SnapshotDecoder, decode_txn, encode_txn};

fn items(data: &[u8], piece: usize) -> Vec<String> {
    let mut d = SnapshotDecoder::new();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for chunk in data.chunks(piece.max(1)) {
        buf.extend_from_slice(chunk);
        loop {
            match d.next(&buf) {
                Ok(Some((item, n))) => {
                    out.push(format!("{item:?}"));
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(e) => {
                    out.push(e.to_string());
                    return out;
                }
            }
        }
        assert!(buf.len() <= MAX_ITEM_BYTES + piece);
    }
    out.push(format!("{:?}", d.finish()));
    out
}

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = decode_txn(data) {
        if let Ok(b) = encode_txn(&t) {
            assert_eq!(decode_txn(&b).unwrap(), t);
        }
    }
    let piece = data.first().copied().unwrap_or(1) as usize;
    assert_eq!(items(data, piece), items(data, data.len().max(1)));
});
