//! Property tests for the quorum-port codec: packets round-trip byte for byte, any split of a
//! stream (with a snapshot) gives the same items, and arbitrary bytes never panic or
//! over-buffer.

use proptest::prelude::*;
use zkfle::wire::quorum::{
    Id, MAX_PACKET_BYTES, QuorumItem, QuorumPacket, QuorumStreamDecoder, SnapshotWalker, ptype,
};

fn bytes(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max))
}

fn packet() -> impl Strategy<Value = QuorumPacket> {
    (
        any::<i32>(),
        any::<i64>(),
        bytes(64),
        proptest::option::of(proptest::collection::vec((bytes(8), bytes(8)), 0..3)),
    )
        .prop_map(|(t, zxid, data, auth)| QuorumPacket {
            ptype: if t == ptype::SNAP { ptype::PING } else { t },
            zxid,
            data,
            authinfo: auth.map(|v| {
                v.into_iter()
                    .map(|(scheme, id)| Id { scheme, id })
                    .collect()
            }),
        })
}

fn decode_all(s: &[u8], piece: usize) -> Result<Vec<QuorumItem>, String> {
    let mut d = QuorumStreamDecoder::new();
    let mut out = Vec::new();
    for chunk in s.chunks(piece.max(1)) {
        let mut input = chunk;
        loop {
            match d.decode(&mut input) {
                Ok(Some(QuorumItem::SnapshotData { bytes, .. })) => {
                    // Merge data items: their boundaries depend on the split.
                    if let Some(QuorumItem::SnapshotData { bytes: b, .. }) = out.last_mut() {
                        b.extend(bytes);
                    } else {
                        out.push(QuorumItem::SnapshotData { offset: 0, bytes });
                    }
                }
                Ok(Some(QuorumItem::SnapshotEnd { summary, .. })) => {
                    out.push(QuorumItem::SnapshotEnd { offset: 0, summary })
                }
                Ok(Some(item)) => out.push(item),
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            }
            assert!(d.buffered() <= MAX_PACKET_BYTES);
        }
    }
    Ok(out)
}

proptest! {
    #[test]
    fn packets_round_trip(p in packet()) {
        let b = p.encode().unwrap();
        prop_assert_eq!(b.len(), p.encoded_len());
        let (q, n) = QuorumPacket::decode(&b).unwrap();
        prop_assert_eq!(n, b.len());
        prop_assert_eq!(q, p);
    }

    #[test]
    fn any_split_gives_the_same_items(ps in proptest::collection::vec(packet(), 0..6),
                                      nodes in proptest::collection::vec(bytes(40), 0..5),
                                      piece in 1usize..64) {
        let mut s = Vec::new();
        for p in &ps { s.extend(p.encode().unwrap()); }
        // SNAP, a snapshot with these nodes, then the packets again.
        s.extend(QuorumPacket::new(ptype::SNAP, 7, None).encode().unwrap());
        s.extend(0i32.to_be_bytes());
        s.extend(0i32.to_be_bytes());
        for (i, d) in nodes.iter().enumerate() {
            let path = format!("/n{i}");
            s.extend((path.len() as i32).to_be_bytes());
            s.extend(path.as_bytes());
            match d {
                None => s.extend((-1i32).to_be_bytes()),
                Some(d) => { s.extend((d.len() as i32).to_be_bytes()); s.extend(d); }
            }
            s.extend([0u8; 68]);
        }
        s.extend([0, 0, 0, 1, b'/']);
        s.extend([0, 0, 0, 10]);
        s.extend(b"BenWasHere");
        for p in &ps { s.extend(p.encode().unwrap()); }
        let whole = decode_all(&s, s.len()).unwrap();
        prop_assert_eq!(whole.len(), 2 * ps.len() + 2 + usize::from(true));
        prop_assert_eq!(decode_all(&s, piece).unwrap(), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(s in proptest::collection::vec(any::<u8>(), 0..512), piece in 1usize..32) {
        let a = decode_all(&s, s.len());
        let b = decode_all(&s, piece);
        prop_assert_eq!(a, b);
        let mut w = SnapshotWalker::new();
        let _ = w.feed(&s);
    }
}
