//! One blocking reader of an election connection's items over any [`Read`]: the
//! [`StreamDecoder`] does the framing, this only feeds it. Every blocking reader in zkfle (the
//! probe, `zkfle repro`, the live replay) reads through it, so framing is written once.
//!
//! Time-outs belong to the reader it wraps (a `TcpStream`'s read time-out, or a wrapper that
//! sets one from a deadline before each read).

use std::io::{ErrorKind as IoKind, Read};

use super::error::WireError;
use super::frame::{Direction, StreamDecoder, StreamItem};

/// Bytes read from the socket at a time; what the decoder does not take yet stays here.
const CHUNK_BYTES: usize = 8 * 1024;

/// Why [`FrameReader::next_item`] returned no item.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The stream ended in the middle of an item.
    #[error("closed in the middle of a message")]
    Truncated,
    /// The bytes are not what the protocol allows (a bad frame length, a bad initial message).
    #[error("{0}")]
    Wire(#[from] WireError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads whole items (the initial message, then frames) from `R`, blocking.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    decoder: StreamDecoder,
    /// Bytes read but not yet consumed by the decoder: `buf[start..end]`.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl<R: Read> FrameReader<R> {
    /// A reader of `direction` from its first byte.
    pub fn new(inner: R, direction: Direction) -> Self {
        FrameReader {
            inner,
            decoder: StreamDecoder::new(direction),
            buf: vec![0u8; CHUNK_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// The next item; `Ok(None)` when the stream ends cleanly between items.
    pub fn next_item(&mut self) -> Result<Option<StreamItem>, ReadError> {
        loop {
            let mut input = &self.buf[self.start..self.end];
            let before = input.len();
            let item = self.decoder.decode(&mut input)?;
            self.start += before - input.len();
            if let Some(item) = item {
                return Ok(Some(item));
            }
            self.start = 0;
            self.end = 0;
            match self.inner.read(&mut self.buf) {
                Ok(0) if self.decoder.buffered() == 0 => return Ok(None),
                Ok(0) => return Err(ReadError::Truncated),
                Ok(n) => self.end = n,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// The next frame's payload (an initial message, on a stream read from its initiator, is
    /// skipped); `Ok(None)` when the stream ends cleanly between frames.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        loop {
            match self.next_item()? {
                Some(StreamItem::Frame { payload, .. }) => return Ok(Some(payload)),
                Some(StreamItem::Initial { .. } | StreamItem::Auth { .. }) => {}
                None => return Ok(None),
            }
        }
    }

    /// The reader it reads from.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The reader it reads from, to change its time-out for example. Reading from it directly
    /// skips whatever this reader holds.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ElectionAddress, InitialMessage, ProtocolVersion, encode_frame};

    /// Hands out its bytes a few at a time, as TCP may.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn stream() -> Vec<u8> {
        let addr = ElectionAddress::parse("127.0.0.3:3888", 0).unwrap();
        let mut s = InitialMessage::versioned(ProtocolVersion::V1, 3, vec![addr])
            .encode()
            .unwrap();
        s.extend(encode_frame(&[1u8; 40]).unwrap());
        s.extend(encode_frame(&vec![2u8; 20_000]).unwrap());
        s
    }

    #[test]
    fn items_in_any_pieces_then_a_clean_end() {
        let s = stream();
        for piece in [1, 3, 7, 4096, s.len()] {
            let mut r = FrameReader::new(Trickle(&s, piece), Direction::FromInitiator);
            let Some(StreamItem::Initial { message, .. }) = r.next_item().unwrap() else {
                panic!("piece {piece}: no initial message");
            };
            assert_eq!(message.sid, 3);
            assert_eq!(r.next_frame().unwrap(), Some(vec![1u8; 40]));
            assert_eq!(r.next_frame().unwrap(), Some(vec![2u8; 20_000]));
            assert!(r.next_frame().unwrap().is_none());
        }
    }

    #[test]
    fn an_end_mid_frame_and_a_bad_length_are_errors() {
        let s = stream();
        let mut r = FrameReader::new(Trickle(&s[..s.len() - 1], 64), Direction::FromInitiator);
        r.next_item().unwrap();
        r.next_frame().unwrap();
        assert!(matches!(r.next_frame(), Err(ReadError::Truncated)));
        let bad = 0i32.to_be_bytes();
        let mut r = FrameReader::new(&bad[..], Direction::FromAcceptor);
        assert!(matches!(r.next_frame(), Err(ReadError::Wire(e)) if e.field == "frame length"));
    }
}
