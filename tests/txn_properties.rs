//! Property tests for the txn and snapshot records (src/wire/txn.rs): every record round-trips
//! byte for byte, a snapshot decodes to the same items in any pieces, and arbitrary bytes never
//! panic.

use proptest::prelude::*;
use zkfle::wire::quorum::{Id, TxnHeader};
use zkfle::wire::txn::{
    Acl, SnapItem, SnapshotDecoder, StatPersisted, Txn, TxnDigest, TxnRecord, decode_txn,
    encode_snap_item, encode_txn, opcode,
};

fn bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16))
}

fn path() -> impl Strategy<Value = String> {
    "/[a-z0-9/]{0,12}"
}

fn acls() -> impl Strategy<Value = Option<Vec<Acl>>> {
    proptest::option::of(proptest::collection::vec(
        (any::<i32>(), bytes(), bytes()).prop_map(|(perms, scheme, id)| Acl {
            perms,
            id: Id { scheme, id },
        }),
        0..3,
    ))
}

fn record() -> impl Strategy<Value = (i32, TxnRecord)> {
    prop_oneof![
        (path(), bytes(), acls(), any::<bool>(), any::<i32>()).prop_map(
            |(path, data, acl, e, p)| (
                opcode::CREATE,
                TxnRecord::Create {
                    path,
                    data,
                    acl,
                    ephemeral: e,
                    parent_cversion: p
                }
            )
        ),
        (path(), bytes(), acls(), any::<i32>(), any::<i64>()).prop_map(
            |(path, data, acl, p, ttl)| (
                opcode::CREATE_TTL,
                TxnRecord::CreateTtl {
                    path,
                    data,
                    acl,
                    parent_cversion: p,
                    ttl
                }
            )
        ),
        path().prop_map(|path| (opcode::DELETE, TxnRecord::Delete { path })),
        (path(), bytes(), any::<i32>()).prop_map(|(path, data, version)| (
            opcode::SET_DATA,
            TxnRecord::SetData {
                path,
                data,
                version
            }
        )),
        (path(), acls(), any::<i32>()).prop_map(|(path, acl, version)| (
            opcode::SET_ACL,
            TxnRecord::SetAcl { path, acl, version }
        )),
        any::<i32>()
            .prop_map(|timeout| (opcode::CREATE_SESSION, TxnRecord::CreateSession { timeout })),
        proptest::option::of(proptest::collection::vec(path(), 0..3))
            .prop_map(|paths| (opcode::CLOSE_SESSION, TxnRecord::CloseSession { paths })),
        any::<i32>().prop_map(|err| (opcode::ERROR, TxnRecord::Error { err })),
        proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..8)),
            0..3
        )
        .prop_map(|v| (opcode::MULTI, TxnRecord::Multi(v))),
    ]
}

proptest! {
    #[test]
    fn txns_round_trip(
        (op, rec) in record(),
        zxid in any::<i64>(),
        digest in proptest::option::of((any::<i32>(), any::<i64>())),
    ) {
        let t = Txn {
            header: TxnHeader { client_id: 1, cxid: 2, zxid, time: 3, op },
            record: Some(rec),
            digest: digest.map(|(version, tree_digest)| TxnDigest { version, tree_digest }),
        };
        let b = encode_txn(&t).unwrap();
        prop_assert_eq!(decode_txn(&b).unwrap(), t);
    }

    #[test]
    fn snapshots_decode_in_any_pieces(
        // A node's path is never "/" alone: that is the end marker.
        nodes in proptest::collection::vec(("/[a-z0-9]{1,8}", bytes(), any::<i64>(), any::<i64>()), 0..6),
        piece in 1usize..40,
    ) {
        let mut items = vec![SnapItem::SessionCount(1), SnapItem::Session { id: 9, timeout: 4000 }, SnapItem::AclCount(0)];
        for (p, data, acl, czxid) in nodes {
            items.push(SnapItem::Node { path: p, data, acl, stat: StatPersisted { czxid, ..Default::default() } });
        }
        items.push(SnapItem::End);
        items.push(SnapItem::Seal(5));
        let mut b = Vec::new();
        for i in &items {
            encode_snap_item(&mut b, i).unwrap();
        }
        let mut d = SnapshotDecoder::new();
        let mut got = Vec::new();
        let mut buf = Vec::new();
        for chunk in b.chunks(piece) {
            buf.extend_from_slice(chunk);
            while let Some((i, n)) = d.next(&buf).unwrap() {
                got.push(i);
                buf.drain(..n);
            }
        }
        prop_assert!(d.finish().is_ok());
        prop_assert_eq!(got, items);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_txn(&data);
        let mut d = SnapshotDecoder::new();
        let mut at = 0;
        while let Ok(Some((_, n))) = d.next(&data[at..]) {
            at += n;
        }
    }
}
