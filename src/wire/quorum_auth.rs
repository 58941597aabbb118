//! Quorum SASL's one message, `QuorumAuthPacket` (zookeeper.jute): what a learner and a
//! server exchange at the start of a connection when `quorum.auth.enableSasl=true`, on the
//! election port (after the initial message) and on the quorum port (before FOLLOWERINFO).
//!
//! ```text
//! long   magic    0x5f2435013501edcc (QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER, "-0xa0dbcafecafe1234L")
//! int    status   0 IN_PROGRESS, 1 SUCCESS, -1 ERROR
//! buffer token    int length (-1: null) and that many bytes: the SASL token
//! ```
//!
//! Written with `BinaryOutputArchive.writeRecord`: no length prefix for the record as a whole.
//! Java meant the magic to be negative, so that a server reading it as a frame length would
//! refuse it; it is positive (see [`QUORUM_AUTH_MAGIC`]), but its first four bytes read as a
//! length of 1.6 GB, which every frame limit refuses anyway.

use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};

/// `QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER`, written in Java as `-0xa0dbcafecafe1234L`. Java's
/// hex literal is already a negative long (its top bit is set), so negating it gives this
/// *positive* number, whatever the comment beside it says: bytes `5f 24 35 01 35 01 ed cc`.
pub const QUORUM_AUTH_MAGIC: i64 = 0x5f24_3501_3501_edcc;
/// The largest token zkfle reads. Java bounds it only by `jute.maxbuffer` (1 MiB); a
/// DIGEST-MD5 challenge or response is a few hundred bytes.
pub const MAX_TOKEN: usize = 64 * 1024;
/// Magic, status and token length.
pub const HEADER_LEN: usize = 16;

/// `QuorumAuth.Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStatus {
    InProgress,
    Success,
    Error,
}

impl AuthStatus {
    pub fn code(self) -> i32 {
        match self {
            AuthStatus::InProgress => 0,
            AuthStatus::Success => 1,
            AuthStatus::Error => -1,
        }
    }
}

/// One `QuorumAuthPacket`. A null token (length -1, which a Java server sends with a null
/// challenge) reads as empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumAuthPacket {
    pub status: AuthStatus,
    pub token: Vec<u8>,
}

impl QuorumAuthPacket {
    pub fn new(status: AuthStatus, token: impl Into<Vec<u8>>) -> Self {
        QuorumAuthPacket {
            status,
            token: token.into(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.token.len());
        out.extend_from_slice(&QUORUM_AUTH_MAGIC.to_be_bytes());
        out.extend_from_slice(&self.status.code().to_be_bytes());
        out.extend_from_slice(&(self.token.len() as i32).to_be_bytes());
        out.extend_from_slice(&self.token);
        out
    }

    /// Decodes one packet from the start of `buf`: the packet and the bytes it took, or
    /// `Ok(None)` when `buf` holds only part of one.
    pub fn decode(buf: &[u8]) -> Result<Option<(QuorumAuthPacket, usize)>, WireError> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut c = Cursor::new(buf);
        let magic = c.i64("auth magic")?;
        if magic != QUORUM_AUTH_MAGIC {
            return Err(WireError::new(
                "auth magic",
                0,
                ErrorKind::Inconsistent("not a QuorumAuthPacket (magic is not 0x5f2435013501edcc)"),
            ));
        }
        let status = match c.i32("auth status")? {
            0 => AuthStatus::InProgress,
            1 => AuthStatus::Success,
            -1 => AuthStatus::Error,
            other => {
                return Err(WireError::new(
                    "auth status",
                    8,
                    ErrorKind::OutOfRange {
                        value: other.into(),
                        min: -1,
                        max: 1,
                    },
                ));
            }
        };
        let len = c.i32("auth token length")?;
        if len < -1 || len > MAX_TOKEN as i32 {
            return Err(WireError::new(
                "auth token length",
                12,
                ErrorKind::OutOfRange {
                    value: len.into(),
                    min: -1,
                    max: MAX_TOKEN as i64,
                },
            ));
        }
        let len = len.max(0) as usize;
        if c.remaining() < len {
            return Ok(None);
        }
        let token = c.take("auth token", len)?.to_vec();
        Ok(Some((QuorumAuthPacket { status, token }, HEADER_LEN + len)))
    }
}

/// Whether `buf` may open a `QuorumAuthPacket`: its first four bytes (all a stream decoder
/// has at a frame's length) are the magic's. No election frame length or quorum packet type
/// has them, so a stream decoder can tell an auth packet from its own items by them.
pub fn may_open_auth_packet(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf[..4] == QUORUM_AUTH_MAGIC.to_be_bytes()[..4]
}

/// The whole length of the auth packet `buf` opens, as far as its bytes tell: [`HEADER_LEN`]
/// until the header is there, then the header and its token.
pub fn auth_packet_len(buf: &[u8]) -> Result<usize, WireError> {
    if buf.len() < HEADER_LEN {
        return Ok(HEADER_LEN);
    }
    match QuorumAuthPacket::decode(&buf[..HEADER_LEN])? {
        Some(_) => Ok(HEADER_LEN),
        None => Ok(HEADER_LEN + i32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]) as usize),
    }
}

/// Whether `first8` (the next eight bytes of a connection) open a `QuorumAuthPacket`, as
/// `QuorumAuth.nextPacketIsAuth` peeks.
pub fn opens_auth_packet(first8: &[u8]) -> bool {
    first8.len() >= 8 && first8[..8] == QUORUM_AUTH_MAGIC.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_first_packet_is_java_bytes() {
        // SaslQuorumAuthLearner.send(dout, new byte[0]): IN_PROGRESS, an empty token.
        let bytes = QuorumAuthPacket::new(AuthStatus::InProgress, Vec::new()).encode();
        assert_eq!(
            hex::encode(&bytes),
            "5f2435013501edcc0000000000000000",
            "magic, status 0, length 0"
        );
    }

    #[test]
    fn round_trip_and_partial_input() {
        let p = QuorumAuthPacket::new(AuthStatus::Success, b"rspauth=abc".to_vec());
        let bytes = p.encode();
        for cut in 0..bytes.len() {
            assert_eq!(QuorumAuthPacket::decode(&bytes[..cut]).unwrap(), None);
        }
        let mut more = bytes.clone();
        more.extend_from_slice(b"next");
        assert_eq!(
            QuorumAuthPacket::decode(&more).unwrap(),
            Some((p, bytes.len()))
        );
        assert!(opens_auth_packet(&bytes));
        assert!(!opens_auth_packet(&[0, 0, 0, 40, 0, 0, 0, 0]));
    }

    #[test]
    fn a_null_token_reads_as_empty_and_bad_fields_are_named() {
        let mut b = QUORUM_AUTH_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&0i32.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        let (p, n) = QuorumAuthPacket::decode(&b).unwrap().unwrap();
        assert_eq!(
            (p.status, p.token.len(), n),
            (AuthStatus::InProgress, 0, 16)
        );

        let mut bad = b.clone();
        bad[11] = 7;
        let e = QuorumAuthPacket::decode(&bad).unwrap_err();
        assert_eq!((e.field, e.offset), ("auth status", 8));
        let mut huge = b.clone();
        huge[12..16].copy_from_slice(&i32::MAX.to_be_bytes());
        let e = QuorumAuthPacket::decode(&huge).unwrap_err();
        assert_eq!(e.field, "auth token length");
        let e = QuorumAuthPacket::decode(&[0u8; 16]).unwrap_err();
        assert_eq!(e.field, "auth magic");
    }
}
