#![no_main]
//! The leader-to-learner stream (packets, and the raw snapshot after SNAP) fed in pieces whose
//! sizes come from the input: no panic, bounded buffering, the same items as feeding it whole;
//! every decoded packet re-encodes to bytes that decode to the same packet.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::quorum::{MAX_PACKET_BYTES, QuorumItem, QuorumPacket, QuorumStreamDecoder};

fn items(data: &[u8], piece: usize) -> Vec<String> {
    let mut d = QuorumStreamDecoder::new();
    let mut out = Vec::new();
    let mut snap = Vec::new();
    for chunk in data.chunks(piece.max(1)) {
        let mut input = chunk;
        loop {
            match d.decode(&mut input) {
                Ok(Some(QuorumItem::SnapshotData { bytes, .. })) => snap.extend(bytes),
                Ok(Some(QuorumItem::Packet { packet, .. })) => {
                    let b = packet.encode().expect("a decoded packet encodes");
                    assert_eq!(QuorumPacket::decode(&b).unwrap().0, packet);
                    out.push(format!("{packet:?}"));
                }
                Ok(Some(item)) => out.push(format!("{item:?} {}", snap.len())),
                Ok(None) => break,
                Err(e) => {
                    out.push(format!("{e}"));
                    return out;
                }
            }
            assert!(d.buffered() <= MAX_PACKET_BYTES);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let piece = data.first().copied().unwrap_or(1) as usize;
    assert_eq!(items(data, piece), items(data, data.len()));
});
