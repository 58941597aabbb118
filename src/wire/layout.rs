//! The byte layouts of every message form, as data.
//!
//! The codecs in [`super::initial`], [`super::notification`] and [`super::quorum`] are the
//! implementation; this table describes the same layouts field by field so that tools outside
//! Rust can be generated from it (`zkfle wireshark-dissector` writes a Lua dissector from it).
//! The tests below encode messages with the codecs and read every field back through the table,
//! so the table cannot drift from the codec.

/// How a field's bytes are read. All integers are big-endian (Java's `DataOutputStream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    I32,
    I64,
    /// Bytes whose count is the value of the named earlier `I32` field (jute `buffer`/`ustring`,
    /// -1 meaning null). Shown as text when `text` is true.
    Counted {
        count: &'static str,
        text: bool,
    },
}

/// One field of a message form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// A short identifier, unique within its port (`election.<id>`, `quorum.<id>` in Wireshark).
    pub id: &'static str,
    /// What ZooKeeper calls it.
    pub label: &'static str,
    pub ty: FieldType,
}

impl Field {
    /// Fixed width in bytes; `None` for counted fields.
    pub fn width(&self) -> Option<usize> {
        match self.ty {
            FieldType::I32 => Some(4),
            FieldType::I64 => Some(8),
            FieldType::Counted { .. } => None,
        }
    }
}

const fn i32f(id: &'static str, label: &'static str) -> Field {
    Field {
        id,
        label,
        ty: FieldType::I32,
    }
}

const fn i64f(id: &'static str, label: &'static str) -> Field {
    Field {
        id,
        label,
        ty: FieldType::I64,
    }
}

/// One message form: its fields in order, and how it is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// An identifier (`notification_40`, ...).
    pub id: &'static str,
    /// For people.
    pub title: &'static str,
    /// How it is recognised on the wire.
    pub when: Recognise,
    pub fields: &'static [Field],
}

/// How a form is told from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recognise {
    /// An initial message whose first i64 is this protocol version.
    InitialVersion(i64),
    /// A legacy initial message: the first i64 is the sid itself, >= 0.
    InitialLegacy,
    /// A notification frame payload of exactly this many bytes.
    NotificationSize(usize),
    /// A notification payload of at least this many bytes whose version field is >= 2.
    NotificationWithConfig(usize),
    /// Every quorum packet.
    QuorumPacket,
    /// The data of quorum packets of these types.
    QuorumData(&'static [i32]),
}

const STATE: Field = i32f("state", "state");
const LEADER: Field = i64f("leader", "leader");
const ZXID: Field = i64f("zxid", "zxid");
const ELECTION_EPOCH: Field = i64f("election_epoch", "election epoch (round)");
const PEER_EPOCH: Field = i64f("peer_epoch", "peer epoch");
const VERSION: Field = i32f("version", "version");

/// The election port's initial messages (the initiator's first bytes).
pub const INITIAL_FORMS: &[Form] = &[
    Form {
        id: "initial_v1",
        title: "initial message, protocol -65536 (one address)",
        when: Recognise::InitialVersion(super::initial::PROTOCOL_VERSION_V1),
        fields: VERSIONED_INITIAL,
    },
    Form {
        id: "initial_v2",
        title: "initial message, protocol -65535 (addresses joined by |)",
        when: Recognise::InitialVersion(super::initial::PROTOCOL_VERSION_V2),
        fields: VERSIONED_INITIAL,
    },
    Form {
        id: "initial_legacy",
        title: "initial message, legacy (sid only, 3.4)",
        when: Recognise::InitialLegacy,
        fields: &[i64f("sid", "sid")],
    },
];

const VERSIONED_INITIAL: &[Field] = &[
    i64f("protocol_version", "protocol version"),
    i64f("sid", "sid"),
    i32f("address_length", "address length"),
    Field {
        id: "addresses",
        label: "election addresses",
        ty: FieldType::Counted {
            count: "address_length",
            text: true,
        },
    },
];

/// The frame around each notification.
pub const FRAME_LENGTH: Field = i32f("frame_length", "frame length");

/// Notification payloads, by size (the historical forms, reference A.2).
pub const NOTIFICATION_FORMS: &[Form] = &[
    Form {
        id: "notification_28",
        title: "notification, 28 bytes (no peer epoch, 3.3 and earlier)",
        when: Recognise::NotificationSize(super::notification::BASE_BYTES),
        fields: &[STATE, LEADER, ZXID, ELECTION_EPOCH],
    },
    Form {
        id: "notification_36",
        title: "notification, 36 bytes (no version; current servers drop it)",
        when: Recognise::NotificationSize(super::notification::WITH_PEER_EPOCH_BYTES),
        fields: &[STATE, LEADER, ZXID, ELECTION_EPOCH, PEER_EPOCH],
    },
    Form {
        id: "notification_40",
        title: "notification, 40 bytes (3.4)",
        when: Recognise::NotificationSize(super::notification::WITH_VERSION_BYTES),
        fields: &[STATE, LEADER, ZXID, ELECTION_EPOCH, PEER_EPOCH, VERSION],
    },
    Form {
        id: "notification_config",
        title: "notification, 44+N bytes with config (3.5+)",
        when: Recognise::NotificationWithConfig(super::notification::WITH_CONFIG_BYTES),
        fields: &[
            STATE,
            LEADER,
            ZXID,
            ELECTION_EPOCH,
            PEER_EPOCH,
            VERSION,
            i32f("config_length", "config length"),
            Field {
                id: "config",
                label: "config",
                ty: FieldType::Counted {
                    count: "config_length",
                    text: true,
                },
            },
        ],
    },
];

/// The quorum port: jute `QuorumPacket` (no framing; packets follow each other). The authinfo
/// vector that ends it is described by [`QUORUM_AUTHINFO_ID`].
pub const QUORUM_PACKET: Form = Form {
    id: "packet",
    title: "QuorumPacket",
    when: Recognise::QuorumPacket,
    fields: &[
        i32f("type", "type"),
        i64f("zxid", "zxid"),
        i32f("data_length", "data length"),
        Field {
            id: "data",
            label: "data",
            ty: FieldType::Counted {
                count: "data_length",
                text: false,
            },
        },
        i32f("authinfo_count", "authinfo count"),
    ],
};

/// One jute `Id` of a packet's authinfo vector.
pub const QUORUM_AUTHINFO_ID: &[Field] = &[
    i32f("scheme_length", "scheme length"),
    Field {
        id: "scheme",
        label: "scheme",
        ty: FieldType::Counted {
            count: "scheme_length",
            text: true,
        },
    },
    i32f("id_length", "id length"),
    Field {
        id: "id",
        label: "id",
        ty: FieldType::Counted {
            count: "id_length",
            text: true,
        },
    },
];

/// What some packet types carry in their data.
pub const QUORUM_DATA_FORMS: &[Form] = &[
    Form {
        id: "learner_info",
        title: "LearnerInfo",
        when: Recognise::QuorumData(&[
            super::quorum::ptype::FOLLOWERINFO,
            super::quorum::ptype::OBSERVERINFO,
        ]),
        fields: &[
            i64f("learner_sid", "serverid"),
            i32f("learner_protocol_version", "protocolVersion"),
            i64f("learner_config_version", "configVersion"),
        ],
    },
    Form {
        id: "leader_info",
        title: "LEADERINFO protocol version",
        when: Recognise::QuorumData(&[super::quorum::ptype::LEADERINFO]),
        fields: &[i32f("leader_protocol_version", "protocol version")],
    },
    Form {
        id: "ack_epoch",
        title: "ACKEPOCH current epoch",
        when: Recognise::QuorumData(&[super::quorum::ptype::ACKEPOCH]),
        fields: &[i32f("ack_epoch", "current epoch (-1: none)")],
    },
    Form {
        id: "txn_header",
        title: "TxnHeader",
        when: Recognise::QuorumData(&[super::quorum::ptype::PROPOSAL]),
        fields: &[
            i64f("txn_client_id", "clientId"),
            i32f("txn_cxid", "cxid"),
            i64f("txn_zxid", "zxid"),
            i64f("txn_time", "time"),
            i32f("txn_type", "type"),
        ],
    },
];

/// Packet type codes and the names Java logs, for the dissector's value strings.
pub fn quorum_packet_types() -> Vec<(i32, &'static str)> {
    (1..=19)
        .map(|t| (t, super::quorum::ptype::name(t)))
        .collect()
}

/// Server state codes and names, for the dissector's value strings.
pub fn server_states() -> Vec<(i32, &'static str)> {
    (0..=3)
        .map(|c| (c, super::ServerState::from_code(c).name()))
        .collect()
}

/// A value read through the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bytes(Option<Vec<u8>>),
}

/// Reads `fields` from the front of `buf` as the table describes them: each field's id and
/// value, and the bytes used. `None` when `buf` is too short or a count is negative other
/// than -1. For checking the table against the codec and for tools; not the codec itself.
pub fn read_fields(fields: &[Field], buf: &[u8]) -> Option<(Vec<(&'static str, Value)>, usize)> {
    let mut at = 0usize;
    let mut out: Vec<(&'static str, Value)> = Vec::with_capacity(fields.len());
    for f in fields {
        match f.ty {
            FieldType::I32 => {
                let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
                out.push((f.id, Value::Int(i32::from_be_bytes(b).into())));
                at += 4;
            }
            FieldType::I64 => {
                let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
                out.push((f.id, Value::Int(i64::from_be_bytes(b))));
                at += 8;
            }
            FieldType::Counted { count, .. } => {
                let n = out.iter().find_map(|(id, v)| match v {
                    Value::Int(n) if *id == count => Some(*n),
                    _ => None,
                })?;
                if n == -1 {
                    out.push((f.id, Value::Bytes(None)));
                } else {
                    let n = usize::try_from(n).ok()?;
                    let bytes = buf.get(at..at.checked_add(n)?)?;
                    out.push((f.id, Value::Bytes(Some(bytes.to_vec()))));
                    at += n;
                }
            }
        }
    }
    Some((out, at))
}

#[cfg(test)]
mod tests {
    use super::super::quorum::{LearnerInfo, QuorumPacket, TxnHeader, ptype};
    use super::super::{ElectionAddress, InitialMessage, Notification, ProtocolVersion};
    use super::*;

    fn int(v: &[(&str, Value)], id: &str) -> i64 {
        match v.iter().find(|(i, _)| *i == id) {
            Some((_, Value::Int(n))) => *n,
            other => panic!("{id}: {other:?}"),
        }
    }

    fn bytes(v: &[(&str, Value)], id: &str) -> Option<Vec<u8>> {
        match v.iter().find(|(i, _)| *i == id) {
            Some((_, Value::Bytes(b))) => b.clone(),
            other => panic!("{id}: {other:?}"),
        }
    }

    fn form(forms: &[Form], id: &str) -> Form {
        *forms.iter().find(|f| f.id == id).unwrap()
    }

    #[test]
    fn initial_forms_match_the_codec() {
        let addrs = vec![
            ElectionAddress::parse("127.0.0.1:3888", 0).unwrap(),
            ElectionAddress::parse("127.0.1.1:3889", 0).unwrap(),
        ];
        for (pv, id) in [
            (ProtocolVersion::V1, "initial_v1"),
            (ProtocolVersion::V2, "initial_v2"),
        ] {
            let m = InitialMessage::versioned(pv, 7, addrs.clone());
            let bytes_ = m.encode().unwrap();
            let f = form(INITIAL_FORMS, id);
            assert_eq!(f.when, Recognise::InitialVersion(pv.code().unwrap()));
            let (v, used) = read_fields(f.fields, &bytes_).unwrap();
            assert_eq!(used, bytes_.len());
            assert_eq!(int(&v, "protocol_version"), pv.code().unwrap());
            assert_eq!(int(&v, "sid"), 7);
            assert_eq!(
                bytes(&v, "addresses").unwrap(),
                InitialMessage::decode(&bytes_)
                    .unwrap()
                    .address_text
                    .into_bytes()
            );
        }
        let legacy = InitialMessage::legacy(3).encode().unwrap();
        let (v, used) = read_fields(form(INITIAL_FORMS, "initial_legacy").fields, &legacy).unwrap();
        assert_eq!((int(&v, "sid"), used), (3, legacy.len()));
    }

    #[test]
    fn notification_forms_match_the_codec() {
        let full = Notification::current(
            crate::wire::ServerState::Following,
            3,
            0x1_0000_0005,
            2,
            1,
            "server.1=127.0.0.1:2888:3888:participant\nversion=0",
        );
        let mut n36 = full.clone();
        n36.version = None;
        n36.config = None;
        let mut n40 = n36.clone();
        n40.version = Some(1);
        let mut n28 = n36.clone();
        n28.peer_epoch = None;
        for (n, id) in [
            (n28, "notification_28"),
            (n36, "notification_36"),
            (n40, "notification_40"),
            (full, "notification_config"),
        ] {
            let b = n.encode().unwrap();
            let f = form(NOTIFICATION_FORMS, id);
            match f.when {
                Recognise::NotificationSize(s) => assert_eq!(s, b.len()),
                Recognise::NotificationWithConfig(min) => assert!(b.len() >= min),
                w => panic!("{w:?}"),
            }
            let (v, used) = read_fields(f.fields, &b).unwrap();
            assert_eq!(used, b.len(), "{id}");
            let d = Notification::decode(&b).unwrap();
            assert_eq!(int(&v, "state"), i64::from(d.state.code()));
            assert_eq!(int(&v, "leader"), d.leader);
            assert_eq!(int(&v, "zxid"), d.zxid);
            assert_eq!(int(&v, "election_epoch"), d.election_epoch);
            if let Some(pe) = d.peer_epoch {
                assert_eq!(int(&v, "peer_epoch"), pe);
            }
            if let Some(ver) = d.version {
                assert_eq!(int(&v, "version"), i64::from(ver));
            }
            if d.config.is_some() {
                assert_eq!(bytes(&v, "config"), d.config);
            }
        }
    }

    #[test]
    fn quorum_forms_match_the_codec() {
        let info = LearnerInfo {
            sid: 4,
            protocol_version: 0x10000,
            config_version: 0x2_0000_0000,
        };
        let mut p = QuorumPacket::follower_info(5, &info);
        p.authinfo = Some(vec![super::super::quorum::Id {
            scheme: Some(b"digest".to_vec()),
            id: None,
        }]);
        let b = p.encode().unwrap();
        let (v, used) = read_fields(QUORUM_PACKET.fields, &b).unwrap();
        assert_eq!(int(&v, "type"), i64::from(ptype::FOLLOWERINFO));
        assert_eq!(int(&v, "zxid"), 5 << 32);
        assert_eq!(bytes(&v, "data"), p.data);
        assert_eq!(int(&v, "authinfo_count"), 1);
        let (ids, used2) = read_fields(QUORUM_AUTHINFO_ID, &b[used..]).unwrap();
        assert_eq!(used + used2, b.len());
        assert_eq!(bytes(&ids, "scheme").as_deref(), Some(&b"digest"[..]));
        assert_eq!(bytes(&ids, "id"), None);
        assert_eq!(QuorumPacket::decode(&b).unwrap().1, b.len());

        let (li, _) = read_fields(
            form(QUORUM_DATA_FORMS, "learner_info").fields,
            p.data.as_ref().unwrap(),
        )
        .unwrap();
        assert_eq!(int(&li, "learner_sid"), info.sid);
        assert_eq!(
            int(&li, "learner_protocol_version"),
            i64::from(info.protocol_version)
        );
        assert_eq!(int(&li, "learner_config_version"), info.config_version);

        let ack = QuorumPacket::ack_epoch(0x1_0000_0003, -1);
        let (ae, _) = read_fields(
            form(QUORUM_DATA_FORMS, "ack_epoch").fields,
            ack.data.as_ref().unwrap(),
        )
        .unwrap();
        assert_eq!(int(&ae, "ack_epoch"), -1);

        let h = TxnHeader {
            client_id: 0x1234,
            cxid: 7,
            zxid: 0x1_0000_0009,
            time: 1_700_000_000_000,
            op: 1,
        };
        let (th, _) =
            read_fields(form(QUORUM_DATA_FORMS, "txn_header").fields, &h.encode()).unwrap();
        assert_eq!(int(&th, "txn_client_id"), h.client_id);
        assert_eq!(int(&th, "txn_cxid"), i64::from(h.cxid));
        assert_eq!(int(&th, "txn_zxid"), h.zxid);
        assert_eq!(int(&th, "txn_time"), h.time);
        assert_eq!(int(&th, "txn_type"), i64::from(h.op));
    }

    proptest::proptest! {
        /// Reading any bytes through any form's table never panics and never reads past them.
        #[test]
        fn read_fields_is_total(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96)) {
            let all = INITIAL_FORMS
                .iter()
                .chain(NOTIFICATION_FORMS)
                .chain(QUORUM_DATA_FORMS)
                .chain([&QUORUM_PACKET]);
            for f in all {
                if let Some((_, used)) = read_fields(f.fields, &bytes) {
                    proptest::prop_assert!(used <= bytes.len());
                }
            }
            if let Some((_, used)) = read_fields(QUORUM_AUTHINFO_ID, &bytes) {
                proptest::prop_assert!(used <= bytes.len());
            }
        }
    }

    #[test]
    fn value_strings_are_the_codec_names() {
        assert_eq!(quorum_packet_types()[0], (1, "REQUEST"));
        assert_eq!(server_states()[2], (2, "LEADING"));
    }
}
