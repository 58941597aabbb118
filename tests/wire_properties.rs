//! Property tests for every decoder: valid values round-trip byte for byte, and arbitrary bytes
//! never panic, loop or over-allocate.

use proptest::prelude::*;
use zkfle::wire::frame::MAX_FRAME_BYTES;
use zkfle::wire::quorum_auth::{AuthStatus, QuorumAuthPacket};
use zkfle::wire::{
    Direction, ElectionAddress, InitialMessage, Notification, ProtocolVersion, QuorumConfig,
    ServerState, StreamDecoder, StreamItem, encode_frame,
};

fn state() -> impl Strategy<Value = ServerState> {
    prop_oneof![
        (0i32..4).prop_map(ServerState::from_code),
        any::<i32>().prop_map(ServerState::from_code),
    ]
}

/// Notifications of every historical form, with the fields each form has.
fn notification() -> impl Strategy<Value = Notification> {
    (
        state(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        0u8..6,
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..64),
        proptest::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(
            |(state, leader, zxid, ee, pe, form, version, config, trailing)| {
                let base = Notification {
                    state,
                    leader,
                    zxid,
                    election_epoch: ee,
                    peer_epoch: Some(pe),
                    version: Some(version),
                    config: None,
                    trailing: Vec::new(),
                };
                match form {
                    0 => Notification {
                        peer_epoch: None,
                        version: None,
                        ..base
                    },
                    1 => Notification {
                        version: None,
                        ..base
                    },
                    2 => base,
                    3 => Notification {
                        version: Some(version.min(1)),
                        trailing,
                        ..base
                    },
                    4 => Notification {
                        version: Some(version.max(2)),
                        config: Some(config),
                        trailing,
                        ..base
                    },
                    _ => Notification::current(state, leader, zxid, ee, pe, config),
                }
            },
        )
}

fn address() -> impl Strategy<Value = ElectionAddress> {
    (
        any::<[u8; 4]>(),
        any::<[u16; 8]>(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(|(v4, v6, port, six)| {
            let ip: std::net::IpAddr = if six { v6.into() } else { v4.into() };
            ElectionAddress::from_socket_addr((ip, port).into())
        })
}

fn initial() -> impl Strategy<Value = InitialMessage> {
    prop_oneof![
        (0i64..=i64::MAX).prop_map(InitialMessage::legacy),
        (
            any::<i64>(),
            proptest::collection::vec(address(), 1..4),
            any::<bool>()
        )
            .prop_map(|(sid, addrs, v2)| {
                let p = if v2 {
                    ProtocolVersion::V2
                } else {
                    ProtocolVersion::V1
                };
                InitialMessage::versioned(p, sid, addrs)
            }),
    ]
}

proptest! {
    #[test]
    fn notifications_round_trip(n in notification()) {
        let bytes = n.encode().unwrap();
        prop_assert_eq!(bytes.len(), n.size());
        prop_assert_eq!(Notification::decode(&bytes).unwrap(), n);
    }

    #[test]
    fn initial_messages_round_trip(m in initial()) {
        let bytes = m.encode().unwrap();
        prop_assert_eq!(InitialMessage::decode(&bytes).unwrap(), m);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(n) = Notification::decode(&bytes) {
            prop_assert_eq!(n.encode().unwrap(), bytes.clone());
        }
        if let Ok(m) = InitialMessage::decode(&bytes) {
            prop_assert_eq!(m.encode().unwrap(), bytes.clone());
        }
        let _ = QuorumConfig::parse(&String::from_utf8_lossy(&bytes));
        if let Ok(Some((p, used))) = QuorumAuthPacket::decode(&bytes) {
            prop_assert!(used <= bytes.len());
            prop_assert_eq!(QuorumAuthPacket::decode(&p.encode()).unwrap().unwrap().0, p);
        }
        let mut d = StreamDecoder::new(Direction::FromInitiator);
        let mut input = &bytes[..];
        while let Ok(Some(_)) = d.decode(&mut input) {}
        prop_assert!(d.buffered() <= 4 + MAX_FRAME_BYTES);
    }

    #[test]
    fn quorum_auth_packets_round_trip_and_take_their_place_in_a_stream(
        status in prop_oneof![
            Just(AuthStatus::InProgress),
            Just(AuthStatus::Success),
            Just(AuthStatus::Error),
        ],
        token in proptest::collection::vec(any::<u8>(), 0..300),
        m in initial(),
        n in notification(),
        cut in 1usize..40,
    ) {
        let p = QuorumAuthPacket::new(status, token);
        let bytes = p.encode();
        prop_assert_eq!(QuorumAuthPacket::decode(&bytes).unwrap(), Some((p.clone(), bytes.len())));
        // A learner's election stream with quorum SASL: initial message, the packet, a frame.
        let mut stream = m.encode().unwrap();
        stream.extend(&bytes);
        stream.extend(encode_frame(&n.encode().unwrap()).unwrap());
        let mut d = StreamDecoder::new(Direction::FromInitiator);
        let mut items = Vec::new();
        for piece in stream.chunks(cut) {
            let mut piece = piece;
            while let Some(item) = d.decode(&mut piece).unwrap() {
                items.push(item);
            }
        }
        prop_assert_eq!(items.len(), 3);
        let is_auth = matches!(&items[1], StreamItem::Auth { packet, .. } if *packet == p);
        prop_assert!(is_auth);
        let is_frame = matches!(&items[2], StreamItem::Frame { payload, .. } if Notification::decode(payload).unwrap() == n);
        prop_assert!(is_frame);
    }

    #[test]
    fn streams_decode_the_same_in_any_pieces(
        m in initial(),
        ns in proptest::collection::vec(notification(), 0..5),
        cuts in proptest::collection::vec(1usize..50, 1..20),
    ) {
        let mut stream = m.encode().unwrap();
        for n in &ns {
            stream.extend(encode_frame(&n.encode().unwrap()).unwrap());
        }
        let mut d = StreamDecoder::new(Direction::FromInitiator);
        let mut items = Vec::new();
        let mut rest = &stream[..];
        let mut cut = cuts.iter().cycle();
        while !rest.is_empty() {
            let k = (*cut.next().unwrap()).min(rest.len());
            let mut piece = &rest[..k];
            while let Some(item) = d.decode(&mut piece).unwrap() {
                items.push(item);
            }
            rest = &rest[k..];
        }
        prop_assert_eq!(items.len(), ns.len() + 1);
        let first_is_initial = matches!(&items[0], StreamItem::Initial { message, .. } if **message == m);
        prop_assert!(first_is_initial);
        for (item, n) in items[1..].iter().zip(&ns) {
            match item {
                StreamItem::Frame { payload, .. } => {
                    prop_assert_eq!(&Notification::decode(payload).unwrap(), n)
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
