//! Framing (reference A.3) and an incremental decoder for one direction of a connection.
//!
//! After the initial message, both directions carry frames: a 4-byte big-endian length in
//! 1..=512 KiB, then that many bytes. [`StreamDecoder`] takes bytes in whatever pieces TCP
//! delivers them and hands out whole items; it consumes from the caller's slice only what the
//! current item needs, so it never buffers more than one item (at most 4 + 512 KiB).

use super::error::{ErrorKind, WireError};
use std::sync::Arc;

use super::initial::{InitialCache, InitialMessage, Probe};
use super::quorum_auth::{QuorumAuthPacket, auth_packet_len, may_open_auth_packet};

/// `QuorumCnxManager.PACKETMAXSIZE`: the largest frame payload Java accepts.
pub const MAX_FRAME_BYTES: usize = 512 * 1024;
/// Size of the length prefix.
pub const LENGTH_BYTES: usize = 4;

/// The frame for `payload`: length prefix, then the bytes. Fails when the length is outside
/// what a Java receiver accepts.
pub fn encode_frame(payload: &[u8]) -> Result<Vec<u8>, WireError> {
    check_frame_len(payload.len() as i64, 0)?;
    let mut out = Vec::with_capacity(LENGTH_BYTES + payload.len());
    out.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

fn check_frame_len(len: i64, offset: u64) -> Result<usize, WireError> {
    if len <= 0 || len > MAX_FRAME_BYTES as i64 {
        return Err(WireError::new(
            "frame length",
            0,
            ErrorKind::OutOfRange {
                value: len,
                min: 1,
                max: MAX_FRAME_BYTES as i64,
            },
        )
        .at(offset));
    }
    Ok(len as usize)
}

/// Which way bytes flow within a connection, and so which direction a decoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the side that connected (sent the SYN): an initial message, then frames.
    FromInitiator,
    /// From the side that accepted back to the initiator: frames only.
    FromAcceptor,
}

impl Direction {
    /// 0 and 1, for tables indexed by direction.
    pub fn index(self) -> usize {
        match self {
            Direction::FromInitiator => 0,
            Direction::FromAcceptor => 1,
        }
    }

    /// The other direction.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::FromInitiator => Direction::FromAcceptor,
            Direction::FromAcceptor => Direction::FromInitiator,
        }
    }
}

/// One item of a direction's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    /// The initial message, its exact bytes, and the stream offset where it started.
    Initial {
        offset: u64,
        /// Shared: an ensemble's members send the same message on every connection they dial.
        message: Arc<InitialMessage>,
        raw: Vec<u8>,
    },
    /// A frame's payload (decode it with `Notification::decode`), and the stream offset of its
    /// length prefix; the payload starts 4 bytes later.
    Frame { offset: u64, payload: Vec<u8> },
    /// A quorum SASL packet (`quorum.auth.enableSasl`): after the initial message from the
    /// initiator, at the start of the acceptor's direction (`super::quorum_auth`).
    Auth {
        offset: u64,
        packet: QuorumAuthPacket,
        raw: Vec<u8>,
    },
}

/// Incremental decoder for one direction of an election connection.
///
/// Feed it with [`StreamDecoder::decode`] until that returns `Ok(None)`, then feed more bytes.
/// After an error the stream cannot be trusted (Java closes the connection); the decoder keeps
/// returning that error until [`StreamDecoder::resync`] is called.
#[derive(Debug)]
pub struct StreamDecoder {
    expect_initial: bool,
    /// Bytes of the item being assembled (never more than that item's size).
    pending: Vec<u8>,
    /// Stream offset of `pending[0]`.
    offset: u64,
    /// Boxed: rare, and a connection holds two decoders.
    failed: Option<Box<WireError>>,
}

impl StreamDecoder {
    /// A decoder for a direction read from its first byte.
    pub fn new(direction: Direction) -> Self {
        StreamDecoder {
            expect_initial: direction == Direction::FromInitiator,
            pending: Vec::new(),
            offset: 0,
            failed: None,
        }
    }

    /// A decoder that starts on a frame boundary at `offset`, for a stream picked up after its
    /// start (the initial message, if any, is not expected).
    pub fn at_frame_boundary(offset: u64) -> Self {
        StreamDecoder {
            expect_initial: false,
            pending: Vec::new(),
            offset,
            failed: None,
        }
    }

    /// Stream offset of the next byte the decoder will consume.
    pub fn position(&self) -> u64 {
        self.offset + self.pending.len() as u64
    }

    /// Bytes held for an incomplete item.
    pub fn buffered(&self) -> usize {
        self.pending.len()
    }

    /// The frame being assembled, when the stream stops in its middle: the payload bytes held
    /// so far and the payload size its length prefix declared. `None` for an initial message
    /// or while the length itself is incomplete.
    pub fn partial_frame(&self) -> Option<(&[u8], usize)> {
        if self.expect_initial || self.failed.is_some() || self.pending.len() < LENGTH_BYTES {
            return None;
        }
        let len = i32::from_be_bytes([
            self.pending[0],
            self.pending[1],
            self.pending[2],
            self.pending[3],
        ]);
        let size = check_frame_len(i64::from(len), self.offset).ok()?;
        Some((&self.pending[LENGTH_BYTES..], size))
    }

    /// The bytes of an initial message being assembled when the stream stops in its middle.
    pub fn partial_initial(&self) -> Option<&[u8]> {
        (self.expect_initial && self.failed.is_none() && !self.pending.is_empty())
            .then_some(&self.pending[..])
    }

    /// Forgets the partial item and any error, and continues at a frame boundary at `offset`
    /// (after a gap in a capture, for example).
    pub fn resync(&mut self, offset: u64) {
        *self = StreamDecoder::at_frame_boundary(offset);
    }

    /// Consumes bytes from `input` (advancing it) until one item is complete, and returns it;
    /// `Ok(None)` when `input` is used up first.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<StreamItem>, WireError> {
        self.decode_with(input, &mut InitialCache::default())
    }

    /// [`StreamDecoder::decode`], taking an initial message from `initials` when its bytes
    /// were decoded before.
    pub fn decode_with(
        &mut self,
        input: &mut &[u8],
        initials: &mut InitialCache,
    ) -> Result<Option<StreamItem>, WireError> {
        if let Some(e) = &self.failed {
            return Err((**e).clone());
        }
        let result = self.decode_inner(input, initials);
        if let Err(e) = &result {
            self.failed = Some(Box::new(e.clone()));
        }
        result
    }

    /// The frame completed by the start of `input`, when its whole payload is there: either a
    /// whole frame, or the payload of a frame whose length alone is pending (Java writes the
    /// length and the payload separately, so most payloads arrive in a segment of their own).
    /// Gives its stream offset and its payload, borrowed from `input`, which advances past it.
    /// `None` when the next item is anything else (a partial payload, an initial message, a bad
    /// length, an earlier error), with nothing consumed: [`StreamDecoder::decode`] takes it.
    pub fn whole_frame<'a>(&mut self, input: &mut &'a [u8]) -> Option<(u64, &'a [u8])> {
        if self.failed.is_some() || self.expect_initial {
            return None;
        }
        let (head, start) = match self.pending.len() {
            0 => (*input.first_chunk::<LENGTH_BYTES>()?, LENGTH_BYTES),
            LENGTH_BYTES => (*self.pending.first_chunk::<LENGTH_BYTES>()?, 0),
            _ => return None,
        };
        // (The first word of an auth packet is out of a frame length's range.)
        let len = check_frame_len(i64::from(i32::from_be_bytes(head)), self.offset).ok()?;
        let payload = input.get(start..start + len)?;
        let offset = self.offset;
        self.offset += (LENGTH_BYTES + len) as u64;
        self.pending.clear();
        *input = &input[start + len..];
        Some((offset, payload))
    }

    /// Takes a frame's length arriving alone (Java writes it apart from the payload) when
    /// nothing is pending: true, with `input` consumed and the stream as the general path would
    /// leave it (the length pending, its payload awaited). False, with nothing consumed, for
    /// anything else, including a length out of range.
    pub fn frame_length(&mut self, input: &mut &[u8]) -> bool {
        if self.failed.is_some() || self.expect_initial || !self.pending.is_empty() {
            return false;
        }
        let Some(head) = input.first_chunk::<LENGTH_BYTES>() else {
            return false;
        };
        if input.len() != LENGTH_BYTES
            || may_open_auth_packet(head)
            || check_frame_len(i64::from(i32::from_be_bytes(*head)), self.offset).is_err()
        {
            return false;
        }
        self.pending.extend_from_slice(head);
        *input = &[];
        true
    }

    fn decode_inner(
        &mut self,
        input: &mut &[u8],
        initials: &mut InitialCache,
    ) -> Result<Option<StreamItem>, WireError> {
        // A frame whose payload is whole at the start of the input: take the payload straight
        // from the input rather than through `pending`; likewise a length arriving alone.
        // (Anything else, including a bad length, takes the byte-by-byte path below, which
        // also decides how much input an error consumes.)
        if let Some((offset, payload)) = self.whole_frame(input) {
            return Ok(Some(StreamItem::Frame {
                offset,
                payload: payload.to_vec(),
            }));
        }
        if self.frame_length(input) {
            return Ok(None);
        }
        // Likewise a whole initial message (a connection's first segment, mostly).
        if self.pending.is_empty()
            && self.expect_initial
            && let Ok(Probe::Complete(size)) = InitialMessage::probe(input)
            && let Ok(message) = initials.decode(&input[..size])
        {
            let item = StreamItem::Initial {
                offset: self.offset,
                message,
                raw: input[..size].to_vec(),
            };
            self.expect_initial = false;
            self.offset += size as u64;
            *input = &input[size..];
            return Ok(Some(item));
        }
        loop {
            let need = self.needed()?;
            if self.pending.len() >= need {
                return Ok(Some(self.take_item(need, initials)?));
            }
            if input.is_empty() {
                return Ok(None);
            }
            let n = (need - self.pending.len()).min(input.len());
            // Room grows with the bytes that came (doubling, up to what the item needs), not
            // with what its length claims: a peer's or a capture's 512 KiB length prefix,
            // on thousands of connections, allocates nothing it does not send.
            let room = n.max(self.pending.len()).min(need - self.pending.len());
            self.pending.reserve_exact(room);
            self.pending.extend_from_slice(&input[..n]);
            *input = &input[n..];
        }
    }

    /// Total bytes the current item needs, as far as the pending bytes tell.
    fn needed(&self) -> Result<usize, WireError> {
        if self.expect_initial {
            return match InitialMessage::probe(&self.pending).map_err(|e| e.at(self.offset))? {
                Probe::Complete(n) | Probe::NeedAtLeast(n) => Ok(n),
            };
        }
        if self.pending.len() < LENGTH_BYTES {
            return Ok(LENGTH_BYTES);
        }
        if may_open_auth_packet(&self.pending) {
            return auth_packet_len(&self.pending).map_err(|e| e.at(self.offset));
        }
        let len = i32::from_be_bytes([
            self.pending[0],
            self.pending[1],
            self.pending[2],
            self.pending[3],
        ]);
        Ok(LENGTH_BYTES + check_frame_len(i64::from(len), self.offset)?)
    }

    fn take_item(
        &mut self,
        size: usize,
        initials: &mut InitialCache,
    ) -> Result<StreamItem, WireError> {
        let offset = self.offset;
        let item = if self.expect_initial {
            let raw = self.pending[..size].to_vec();
            let message = initials.decode(&raw).map_err(|e| e.at(offset))?;
            self.expect_initial = false;
            StreamItem::Initial {
                offset,
                message,
                raw,
            }
        } else if may_open_auth_packet(&self.pending) {
            let raw = self.pending[..size].to_vec();
            let (packet, _) = QuorumAuthPacket::decode(&raw)
                .map_err(|e| e.at(offset))?
                .ok_or_else(|| {
                    WireError::new(
                        "auth token",
                        size,
                        ErrorKind::Truncated {
                            needed: size,
                            available: raw.len(),
                        },
                    )
                    .at(offset)
                })?;
            StreamItem::Auth {
                offset,
                packet,
                raw,
            }
        } else {
            StreamItem::Frame {
                offset,
                payload: self.pending[LENGTH_BYTES..size].to_vec(),
            }
        };
        self.pending.clear();
        self.offset += size as u64;
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::initial::ProtocolVersion;

    #[test]
    fn a_long_frame_takes_room_for_the_bytes_that_came() {
        // A 512 KiB length prefix and a byte, on each of thousands of connections, must not
        // take 512 KiB each.
        let mut d = StreamDecoder::new(Direction::FromAcceptor);
        let mut input: &[u8] = &[0, 8, 0, 0, 7];
        assert!(d.decode(&mut input).unwrap().is_none());
        assert!(d.pending.capacity() < 64, "{}", d.pending.capacity());
        // The frame still comes whole, in room that grows with it.
        let rest = vec![7u8; 512 * 1024 - 1];
        let mut items = Vec::new();
        for chunk in rest.chunks(1000) {
            let mut input = chunk;
            items.extend(d.decode(&mut input).unwrap());
            assert!(d.pending.capacity() <= 2 * (LENGTH_BYTES + 512 * 1024));
        }
        assert!(
            matches!(&items[..], [StreamItem::Frame { offset: 0, payload }] if payload.len() == 512 * 1024 && payload.iter().all(|&b| b == 7))
        );
    }

    #[test]
    fn quorum_sasl_packets_are_items_of_their_own() {
        let (s, at, auth) = stream_with_auth();
        for split in [1usize, 3, 7, 1000] {
            let mut d = StreamDecoder::new(Direction::FromInitiator);
            let mut items = Vec::new();
            for chunk in s.chunks(split) {
                let mut input = chunk;
                while let Some(item) = d.decode(&mut input).unwrap() {
                    items.push(item);
                }
            }
            assert_eq!(items.len(), 4, "split {split}");
            assert!(
                matches!(&items[1], StreamItem::Auth { packet, offset, .. } if *packet == auth && *offset == at as u64),
                "{:?}",
                items[1]
            );
            assert!(matches!(&items[2], StreamItem::Frame { payload, .. } if payload.len() == 40));
        }
    }

    /// As the capture decoder reads a stream: whole frames borrowed where `whole_frame` finds
    /// them, everything else through `decode`. The same items at the same offsets, however
    /// the stream is cut (the length alone, then the payload, is how Java writes).
    #[test]
    fn whole_frames_taken_from_the_input_match_decode() {
        let (s, _, _) = stream_with_auth();
        let whole = |chunks: &mut dyn Iterator<Item = &[u8]>, borrow: bool| {
            let mut d = StreamDecoder::new(Direction::FromInitiator);
            let mut items = Vec::new();
            for chunk in chunks {
                let mut input = chunk;
                loop {
                    if borrow && let Some((offset, payload)) = d.whole_frame(&mut input) {
                        items.push(format!("frame {offset} {payload:?}"));
                        continue;
                    }
                    if borrow && d.frame_length(&mut input) {
                        continue;
                    }
                    match d.decode(&mut input).unwrap() {
                        Some(StreamItem::Frame { offset, payload }) => {
                            items.push(format!("frame {offset} {payload:?}"))
                        }
                        Some(other) => items.push(format!("{other:?}")),
                        None => break,
                    }
                }
            }
            items
        };
        let expected = whole(&mut std::iter::once(&s[..]), false);
        assert_eq!(expected.len(), 4);
        for split in 1..s.len() {
            let (a, b) = s.split_at(split);
            assert_eq!(
                whole(&mut [a, b].into_iter(), true),
                expected,
                "split at {split}"
            );
        }
        for size in [1usize, 4, 5, 40] {
            assert_eq!(
                whole(&mut s.chunks(size), true),
                expected,
                "chunks of {size}"
            );
        }
    }

    /// A length alone is taken only when it is in range: an out-of-range one is left to
    /// `decode`, which reports it where the general path does.
    #[test]
    fn a_lone_length_out_of_range_is_left_to_decode() {
        let bad = (MAX_FRAME_BYTES as i32 + 1).to_be_bytes();
        let mut d = StreamDecoder::new(Direction::FromAcceptor);
        let mut input = &bad[..];
        assert!(!d.frame_length(&mut input));
        assert_eq!(input.len(), 4);
        let mut reference = StreamDecoder::new(Direction::FromAcceptor);
        let one_by_one: Vec<_> = bad
            .chunks(1)
            .map(|b| reference.decode(&mut &b[..]))
            .collect();
        assert_eq!(Some(&d.decode(&mut input)), one_by_one.last());
        let mut d = StreamDecoder::new(Direction::FromAcceptor);
        let mut input = &40i32.to_be_bytes()[..];
        assert!(d.frame_length(&mut input));
        assert!(input.is_empty());
        assert_eq!(d.buffered(), 4);
    }

    /// [`stream`] with a quorum SASL packet before its two frames: the stream, where the
    /// packet starts, the packet.
    fn stream_with_auth() -> (Vec<u8>, usize, QuorumAuthPacket) {
        use crate::wire::quorum_auth::AuthStatus;
        let mut s = stream();
        let at = s.len() - (4 + 40) - (4 + 28);
        let auth = QuorumAuthPacket::new(AuthStatus::InProgress, b"charset=utf-8".to_vec());
        s.splice(at..at, auth.encode());
        (s, at, auth)
    }

    fn stream() -> Vec<u8> {
        let mut s = InitialMessage::versioned(
            ProtocolVersion::V1,
            3,
            vec![crate::wire::ElectionAddress::parse("127.0.0.3:3888", 0).unwrap()],
        )
        .encode()
        .unwrap();
        s.extend(encode_frame(&[1u8; 40]).unwrap());
        s.extend(encode_frame(&[2u8; 28]).unwrap());
        s
    }

    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<StreamItem> {
        let mut d = StreamDecoder::new(Direction::FromInitiator);
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            let mut input = chunk;
            while let Some(item) = d.decode(&mut input).unwrap() {
                out.push(item);
            }
            assert!(input.is_empty());
            assert!(d.buffered() <= 4 + MAX_FRAME_BYTES);
        }
        out
    }

    #[test]
    fn any_split_gives_the_same_items() {
        let s = stream();
        let whole = decode_in_pieces(&s, s.len());
        assert_eq!(whole.len(), 3);
        assert!(
            matches!(&whole[2], StreamItem::Frame { offset, payload } if *offset == 34 + 44 && payload.len() == 28)
        );
        for piece in 1..s.len() {
            assert_eq!(decode_in_pieces(&s, piece), whole, "piece {piece}");
        }
    }

    #[test]
    fn frame_length_limits() {
        for bad in [0i32, -20, 524_289] {
            let mut d = StreamDecoder::at_frame_boundary(100);
            let bytes = bad.to_be_bytes();
            let e = d.decode(&mut &bytes[..]).unwrap_err();
            assert_eq!((e.field, e.offset), ("frame length", 100));
            // The error sticks until resync.
            assert!(d.decode(&mut &[0u8; 4][..]).is_err());
            d.resync(104);
            assert_eq!(d.position(), 104);
        }
        let max = vec![0u8; MAX_FRAME_BYTES];
        assert!(encode_frame(&max).is_ok());
        assert!(encode_frame(&[0u8; MAX_FRAME_BYTES + 1]).is_err());
        assert!(encode_frame(&[]).is_err());
    }

    #[test]
    fn never_consumes_past_the_item() {
        let s = stream();
        let mut d = StreamDecoder::new(Direction::FromInitiator);
        let mut input = &s[..];
        assert!(matches!(
            d.decode(&mut input).unwrap(),
            Some(StreamItem::Initial { .. })
        ));
        assert_eq!(input.len(), s.len() - 34);
    }
}
