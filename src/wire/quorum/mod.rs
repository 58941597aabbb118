//! The quorum port (2888): Zab's `QuorumPacket`s as a Java 3.8/3.9 leader and its learners
//! write them (reference `zab-learner-wire.md` §A), the records they carry, and the raw
//! snapshot that follows a SNAP packet (§B.5).
//!
//! There is no framing: jute records follow each other on the stream. [`QuorumPacket::decode`]
//! reads one packet from the front of a slice; [`QuorumStreamDecoder`] takes the leader's
//! stream in whatever pieces TCP delivers and hands out packets, and after a SNAP packet the
//! snapshot's bytes as they come ([`QuorumItem::SnapshotData`]) until its end marker and
//! signature, walked by [`SnapshotWalker`] without holding the snapshot in memory.
//!
//! Limits: a `buffer` or `ustring` longer than Java's default reader limit
//! ([`MAX_BUFFER`], `jute.maxbuffer` + `zookeeper.jute.maxbuffer.extrasize`) or shorter than -1
//! is rejected, as Java's `BinaryInputArchive` rejects it; an authinfo vector holds at most
//! [`MAX_AUTHINFO`] ids and a whole packet at most [`MAX_PACKET_BYTES`]. Every rejection is a
//! [`WireError`] naming the field and its byte offset.
//!
//! [`packet`] holds the packets and the records they carry; [`snapshot`] the streamed
//! snapshot's walker; this module the stream decoder that hands out both.

pub mod packet;
pub mod snapshot;

pub use packet::*;
pub use snapshot::*;

use super::error::{ErrorKind, WireError};
use super::quorum_auth::{QuorumAuthPacket, auth_packet_len, may_open_auth_packet};

/// One item of the leader-to-learner stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumItem {
    /// A packet and the stream offset of its first byte.
    Packet { offset: u64, packet: QuorumPacket },
    /// Bytes of the snapshot body following a SNAP packet, in order (a file body as-is).
    SnapshotData { offset: u64, bytes: Vec<u8> },
    /// The snapshot's signature has been read; packets follow again.
    SnapshotEnd {
        offset: u64,
        summary: SnapshotSummary,
    },
    /// A quorum SASL packet (`quorum.auth.enableSasl`): a learner's and its leader's first
    /// bytes, before FOLLOWERINFO (`super::quorum_auth`).
    Auth {
        offset: u64,
        packet: QuorumAuthPacket,
        raw: Vec<u8>,
    },
}

/// Incremental decoder for the stream a leader sends a learner: packets, and after a SNAP
/// packet the raw snapshot. Buffers at most one packet ([`MAX_PACKET_BYTES`]); snapshot bytes
/// are handed out as they arrive. After an error the stream cannot be trusted and the error
/// sticks.
#[derive(Debug, Default)]
pub struct QuorumStreamDecoder {
    pending: Vec<u8>,
    offset: u64,
    snapshot: Option<SnapshotWalker>,
    failed: Option<WireError>,
    /// A learner's stream: packets only, a SNAP type code is just a packet.
    packets_only: bool,
}

impl QuorumStreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder for what a learner sends its leader: packets only (learners send no
    /// snapshot, so a packet of type SNAP is not followed by one).
    pub fn packets_only() -> Self {
        QuorumStreamDecoder {
            packets_only: true,
            ..Self::default()
        }
    }

    /// Bytes held for an incomplete packet.
    pub fn buffered(&self) -> usize {
        self.pending.len()
    }

    /// Stream offset of the next byte to consume.
    pub fn position(&self) -> u64 {
        self.offset + self.pending.len() as u64
    }

    /// Consumes bytes from `input` (advancing it) until one item is complete; `Ok(None)` when
    /// `input` is used up first.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<QuorumItem>, WireError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.decode_inner(input);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn decode_inner(&mut self, input: &mut &[u8]) -> Result<Option<QuorumItem>, WireError> {
        if let Some(w) = &mut self.snapshot {
            if w.is_done() {
                let summary = w.summary();
                self.snapshot = None;
                return Ok(Some(QuorumItem::SnapshotEnd {
                    offset: self.offset,
                    summary,
                }));
            }
            if input.is_empty() {
                return Ok(None);
            }
            let base = self.offset;
            let start = base - w.position();
            let p = w.feed(input).map_err(|e| e.at(start))?;
            let bytes = input[..p.body].to_vec();
            *input = &input[p.consumed..];
            self.offset += p.consumed as u64;
            if !bytes.is_empty() {
                return Ok(Some(QuorumItem::SnapshotData {
                    offset: base,
                    bytes,
                }));
            }
            // Only signature bytes: the end (if complete) is reported by the next call.
            return if p.done {
                self.decode_inner(input)
            } else {
                Ok(None)
            };
        }
        loop {
            let head = if self.pending.is_empty() {
                *input
            } else {
                &self.pending[..]
            };
            // No packet type has the auth magic's first four bytes.
            if may_open_auth_packet(head) {
                let size = auth_packet_len(head).map_err(|e| e.at(self.offset))?;
                if head.len() >= size {
                    let raw = head[..size].to_vec();
                    let Some((packet, _)) =
                        QuorumAuthPacket::decode(&raw).map_err(|e| e.at(self.offset))?
                    else {
                        return Err(WireError::new(
                            "auth token",
                            size,
                            ErrorKind::Inconsistent("an auth packet shorter than its length"),
                        )
                        .at(self.offset));
                    };
                    if self.pending.is_empty() {
                        *input = &input[size..];
                    } else {
                        self.pending.clear();
                    }
                    let offset = self.offset;
                    self.offset += size as u64;
                    return Ok(Some(QuorumItem::Auth {
                        offset,
                        packet,
                        raw,
                    }));
                }
                if input.is_empty() {
                    return Ok(None);
                }
                let n = (size - self.pending.len()).min(input.len());
                self.pending.extend_from_slice(&input[..n]);
                *input = &input[n..];
                continue;
            }
            let attempt = if self.pending.is_empty() {
                QuorumPacket::decode(input)
            } else {
                QuorumPacket::decode(&self.pending)
            };
            match attempt {
                Ok((packet, n)) => {
                    let offset = self.offset;
                    if self.pending.is_empty() {
                        *input = &input[n..];
                    } else {
                        self.pending.clear();
                    }
                    self.offset += n as u64;
                    if packet.ptype == ptype::SNAP && !self.packets_only {
                        self.snapshot = Some(SnapshotWalker::new());
                    }
                    return Ok(Some(QuorumItem::Packet { offset, packet }));
                }
                Err(WireError {
                    offset,
                    kind: ErrorKind::Truncated { needed, .. },
                    ..
                }) => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    // The first `offset + needed` bytes are needed before the next field
                    // can be judged.
                    let want = (offset as usize + needed).saturating_sub(self.pending.len());
                    let n = want.min(input.len()).max(1);
                    self.pending.extend_from_slice(&input[..n]);
                    *input = &input[n..];
                }
                Err(e) => return Err(e.at(self.offset)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s.replace([' ', '\n'], "")).unwrap()
    }

    #[test]
    fn capture_bytes() {
        // FOLLOWERINFO (sid 2, fresh), reference §A.4.
        let fi = hex(
            "0000000b 0000000000000000 00000014 0000000000000002 00010000 0000000000000000 ffffffff",
        );
        let (p, n) = QuorumPacket::decode(&fi).unwrap();
        assert_eq!(n, fi.len());
        assert_eq!(p.ptype, ptype::FOLLOWERINFO);
        let info = LearnerInfo::decode(p.data.as_ref().unwrap()).unwrap();
        assert_eq!(
            info,
            LearnerInfo {
                sid: 2,
                protocol_version: PROTOCOL_VERSION,
                config_version: 0
            }
        );
        assert_eq!(QuorumPacket::follower_info(0, &info).encode().unwrap(), fi);
        // NEWLEADER ACK and the PING reply of a learner without sessions.
        assert_eq!(
            QuorumPacket::ack(0x4_0000_0000).encode().unwrap(),
            hex("00000003 0000000400000000 ffffffff ffffffff")
        );
        assert_eq!(
            QuorumPacket::ping_reply(0x1_0000_0009).encode().unwrap(),
            hex("00000005 0000000100000009 00000000 ffffffff")
        );
        // REQUEST with one Id ("ip", "127.0.0.1").
        let req = hex(
            "00000001 ffffffffffffffff 0000003a 010000193d7d0000 00000001 00000001 000000022f78 00000001 79 00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65 00000000 00000001 00000002 6970 00000009 3132372e302e302e31",
        );
        let (p, n) = QuorumPacket::decode(&req).unwrap();
        assert_eq!(n, 97);
        assert_eq!(
            p.authinfo.as_ref().unwrap()[0].scheme.as_deref(),
            Some(&b"ip"[..])
        );
        assert_eq!(p.encode().unwrap(), req);
        // PROPOSAL for create /x y: the TxnHeader.
        let prop = hex(
            "00000002 0000000100000002 00000057 010000193d7d0000 00000001 0000000100000002 000001a228322f99 00000001 00000002 2f78 00000001 79 00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65 00 00000001 00000002 00000001d7936b7b ffffffff",
        );
        let (p, n) = QuorumPacket::decode(&prop).unwrap();
        assert_eq!(n, 107);
        let h = TxnHeader::decode(p.data.as_ref().unwrap()).unwrap();
        assert_eq!((h.zxid, h.op, h.cxid), (0x1_0000_0002, 1, 1));
        assert_eq!(&h.encode()[..], &p.data.as_ref().unwrap()[..32]);
    }

    #[test]
    fn leader_packets_and_handover_txn() {
        assert_eq!(
            QuorumPacket::leader_info(2).encode().unwrap(),
            hex("00000011 0000000200000000 00000004 00010000 ffffffff")
        );
        assert_eq!(
            QuorumPacket::op(ptype::UPTODATE, -1).encode().unwrap(),
            hex("0000000c ffffffffffffffff ffffffff ffffffff")
        );
        let t = handover_txn(0x3_0000_0001, 5);
        assert!(is_handover_txn(&t));
        let h = TxnHeader::decode(&t).unwrap();
        assert_eq!((h.zxid, h.op, h.client_id), (0x3_0000_0001, OP_ERROR, 0));
        let mut other = t.clone();
        other[8] ^= 1;
        assert!(!is_handover_txn(&other));
        assert_eq!(snapshot_signature(), hex("0000000a 42656e57617348657265"));
        // A learner's stream: SNAP is only a packet.
        let mut s = QuorumPacket::op(ptype::SNAP, 1).encode().unwrap();
        s.extend(QuorumPacket::ack(2).encode().unwrap());
        let mut d = QuorumStreamDecoder::packets_only();
        let mut input = &s[..];
        let mut n = 0;
        while let Some(QuorumItem::Packet { .. }) = d.decode(&mut input).unwrap() {
            n += 1;
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn malformed_fields_are_named() {
        let e = QuorumPacket::decode(&hex("00000005 0000000000000000 fffffffe")).unwrap_err();
        assert_eq!((e.field, e.offset), ("data", 12));
        let e =
            QuorumPacket::decode(&hex("00000005 0000000000000000 00000000 00001000")).unwrap_err();
        assert_eq!((e.field, e.offset), ("authinfo count", 16));
        let e = QuorumPacket::decode(&hex("00000005 00000000")).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::Truncated { .. }));
        assert_eq!(e.field, "zxid");
    }

    /// A small snapshot as Java streams it: 1 session, 1 ACL list, root and /a, end, signature.
    pub(crate) fn sample_snapshot() -> (Vec<u8>, usize) {
        let mut s = hex("00000001 020000193d730000 00002710");
        s.extend(hex(
            "00000001 0000000000000001 00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65",
        ));
        let stat = [0u8; 60];
        s.extend(hex("00000000 00000000 ffffffffffffffff"));
        s.extend(stat);
        s.extend(hex("00000002 2f61 00000005 68656c6c6f 0000000000000001"));
        s.extend(stat);
        s.extend(hex("00000001 2f"));
        let body = s.len();
        s.extend(hex("0000000a 42656e57617348657265"));
        (s, body)
    }

    #[test]
    fn snapshot_walk_in_any_pieces() {
        let (s, body) = sample_snapshot();
        for piece in 1..=s.len() {
            let mut w = SnapshotWalker::new();
            let mut got_body = 0;
            let mut total = 0;
            for chunk in s.chunks(piece) {
                let p = w.feed(chunk).unwrap();
                got_body += p.body;
                total += p.consumed;
            }
            assert!(w.is_done());
            assert_eq!((got_body, total), (body, s.len()), "piece {piece}");
            assert_eq!(
                w.summary(),
                SnapshotSummary {
                    sessions: 1,
                    acl_lists: 1,
                    nodes: 2,
                    max_stat_zxid: 0,
                    body_bytes: body as u64
                }
            );
        }
        // Body only: stops at the end marker.
        let mut w = SnapshotWalker::body_only();
        let p = w.feed(&s).unwrap();
        assert_eq!((p.consumed, p.body, w.is_body_done()), (body, body, true));
        // Never consumes past the signature.
        let mut more = s.clone();
        more.extend([9, 9, 9]);
        let p = SnapshotWalker::new().feed(&more).unwrap();
        assert_eq!(p.consumed, s.len());
        // A wrong signature is an error at its offset.
        let mut bad = s.clone();
        let n = bad.len();
        bad[n - 1] = b'X';
        let e = SnapshotWalker::new().feed(&bad).unwrap_err();
        assert_eq!(e.offset as usize, body + 4);
    }

    #[test]
    fn stream_with_snapshot_in_any_pieces() {
        let (snap, body) = sample_snapshot();
        // A leader's stream with quorum SASL opens with its verdict on the learner.
        let mut s = QuorumAuthPacket::new(
            super::super::quorum_auth::AuthStatus::Success,
            b"rspauth=0123".to_vec(),
        )
        .encode();
        s.extend(
            QuorumPacket::new(ptype::SNAP, 0x1_0000_0015, None)
                .encode()
                .unwrap(),
        );
        s.extend(&snap);
        s.extend(
            QuorumPacket::new(ptype::NEWLEADER, 0x2_0000_0000, Some(b"version=0".to_vec()))
                .encode()
                .unwrap(),
        );
        for piece in 1..=s.len() {
            let mut d = QuorumStreamDecoder::new();
            let mut kinds = Vec::new();
            let mut snap_bytes = Vec::new();
            for chunk in s.chunks(piece) {
                let mut input = chunk;
                while let Some(item) = d.decode(&mut input).unwrap() {
                    match item {
                        QuorumItem::Packet { packet, .. } => kinds.push(packet.type_name()),
                        QuorumItem::SnapshotData { bytes, .. } => snap_bytes.extend(bytes),
                        QuorumItem::SnapshotEnd { summary, .. } => {
                            assert_eq!(summary.nodes, 2);
                            kinds.push("END");
                        }
                        QuorumItem::Auth { .. } => kinds.push("AUTH"),
                    }
                }
                assert!(input.is_empty());
            }
            assert_eq!(kinds, ["AUTH", "SNAP", "END", "NEWLEADER"], "piece {piece}");
            assert_eq!(snap_bytes, &snap[..body]);
        }
    }
}
