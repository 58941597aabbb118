//! Finding election and quorum traffic in bytes that do not start at a message: a stream on an
//! unknown port (is it a ZooKeeper connection at all?), a capture joined mid-way or a gap
//! (where does the next whole frame or packet start?), and a frame cut short (what of it is
//! there?). Heuristics over the layouts the codecs know; the decoder decides what to do with
//! their answers.

use super::frame::{LENGTH_BYTES, MAX_FRAME_BYTES};
use super::initial::Probe;
use super::notification::{
    BASE_BYTES, WITH_CONFIG_BYTES, WITH_PEER_EPOCH_BYTES, WITH_VERSION_BYTES,
};
use super::quorum::{LearnerInfo, QuorumPacket, ptype};
use super::{ErrorKind, InitialMessage, Notification, ProtocolVersion, ServerState, WireError};

/// A first frame larger than this does not count as evidence that an unknown port carries
/// election traffic (real notifications are a few hundred bytes).
pub const MAX_RECOGNITION_FRAME: usize = 64 * 1024;

/// The payload prefix and declared payload size of a frame cut short, from bytes starting at
/// its length prefix; `None` unless the length is that of a notification.
pub fn frame_prefix(held: &[u8]) -> Option<(&[u8], usize)> {
    let len = i32::from_be_bytes(held.get(..LENGTH_BYTES)?.try_into().ok()?);
    let size = usize::try_from(len).ok()?;
    let payload = &held[LENGTH_BYTES..];
    ((BASE_BYTES..=MAX_RECOGNITION_FRAME).contains(&size)
        && !payload.is_empty()
        && payload.len() < size)
        .then_some((payload, size))
}

pub enum Recognition {
    Wait,
    Yes,
    /// A quorum-port connection: it opens with FOLLOWERINFO/OBSERVERINFO.
    Quorum,
    No,
}

/// Whether a stream opens with a learner's FOLLOWERINFO or OBSERVERINFO: a valid packet of
/// that type whose LearnerInfo names Zab's protocol version.
fn recognise_learner(held: &[u8]) -> Option<Recognition> {
    let t = i32::from_be_bytes(held.get(..4)?.try_into().ok()?);
    if t != ptype::FOLLOWERINFO && t != ptype::OBSERVERINFO {
        return None;
    }
    match QuorumPacket::decode(held) {
        Ok((p, _)) => {
            let info = p.data.as_deref().map(LearnerInfo::decode_any);
            Some(match info {
                Some(Ok(i)) if i.protocol_version & 0xffff0000u32 as i32 == 0x10000 => {
                    Recognition::Quorum
                }
                _ => Recognition::No,
            })
        }
        Err(WireError {
            kind: ErrorKind::Truncated { .. },
            ..
        }) if held.len() < MAX_RECOGNITION_FRAME => Some(Recognition::Wait),
        Err(_) => Some(Recognition::No),
    }
}

/// Whether the start of a stream on a non-election port is election traffic: a V1/V2 initial
/// message is specific enough alone; a legacy one (any non-negative long) needs a plausible
/// notification behind it. A learner's first packet makes it quorum traffic.
pub fn recognise(held: &[u8]) -> Recognition {
    if let Some(r) = recognise_learner(held) {
        return r;
    }
    let size = match InitialMessage::probe(held) {
        Err(_) => return Recognition::No,
        Ok(Probe::NeedAtLeast(_)) => return Recognition::Wait,
        Ok(Probe::Complete(n)) => n,
    };
    let Ok(initial) = InitialMessage::decode(&held[..size]) else {
        return Recognition::No;
    };
    if initial.protocol != ProtocolVersion::Legacy {
        return Recognition::Yes;
    }
    let rest = &held[size..];
    if rest.len() < LENGTH_BYTES {
        return Recognition::Wait;
    }
    let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if len <= 0 || len as usize > MAX_RECOGNITION_FRAME {
        return Recognition::No;
    }
    if rest.len() < LENGTH_BYTES + len as usize {
        return Recognition::Wait;
    }
    if plausible_notification(&rest[LENGTH_BYTES..LENGTH_BYTES + len as usize]) {
        Recognition::Yes
    } else {
        Recognition::No
    }
}

/// What a TLS record at the start of `bytes` is, if one is: a handshake record (a
/// connection's first bytes under TLS), or application data (a TLS connection joined mid-way).
/// Plaintext election and quorum streams cannot start so: an initial message starts with a
/// negative protocol version or a sid, a quorum packet with a length far below 0x16030000.
pub fn tls_record_start(bytes: &[u8]) -> Option<TlsRecord> {
    match bytes {
        [0x16, 0x03, 0x00..=0x04, ..] => Some(TlsRecord::Handshake),
        [0x17, 0x03, 0x03, ..] => Some(TlsRecord::ApplicationData),
        _ => None,
    }
}

/// The TLS record a connection opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsRecord {
    /// A handshake record (ClientHello, or a ServerHello when the capture joined late).
    Handshake,
    /// Application data (the capture joined after the handshake).
    ApplicationData,
}

/// A payload that is a notification as some real server sent one: a known state, and exactly
/// one of the historical sizes (or a config filling the rest).
pub fn plausible_notification(payload: &[u8]) -> bool {
    match Notification::decode(payload) {
        Ok(n) => {
            !matches!(n.state, ServerState::Unknown(_))
                && n.trailing.is_empty()
                && (n.config.is_some()
                    || matches!(
                        payload.len(),
                        BASE_BYTES | WITH_PEER_EPOCH_BYTES | WITH_VERSION_BYTES
                    ))
        }
        Err(_) => false,
    }
}

/// Whether the first bytes of a payload of `len` bytes can still be a plausible notification
/// (so that a random length prefix does not hold up the search until its end arrives).
fn can_start_frame(head: &[u8], len: usize) -> bool {
    let int = |at: usize| {
        head.get(at..at + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if int(0).is_some_and(|state| !(0..=3).contains(&state)) {
        return false;
    }
    if matches!(len, BASE_BYTES | WITH_PEER_EPOCH_BYTES | WITH_VERSION_BYTES) {
        return true;
    }
    if len < WITH_CONFIG_BYTES {
        return false;
    }
    // The version field, then the config length, of a notification of 44 bytes or more.
    match (int(WITH_PEER_EPOCH_BYTES), int(WITH_VERSION_BYTES)) {
        (Some(version), _) if version < 2 => false,
        (_, Some(config_len)) => config_len >= 0 && config_len as usize == len - WITH_CONFIG_BYTES,
        _ => true,
    }
}

pub enum FrameSearch {
    /// A whole plausible frame starts here.
    Found(usize),
    /// No frame starts before this offset; later ones need more bytes to tell.
    NotBefore(usize),
}

/// Looks for the first offset in `buf` where a whole plausible frame starts.
pub fn find_frame_start(buf: &[u8]) -> FrameSearch {
    for i in 0..buf.len().saturating_sub(LENGTH_BYTES - 1) {
        let len = i32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if !(BASE_BYTES as i32..=MAX_FRAME_BYTES as i32).contains(&len) {
            continue;
        }
        let end = i + LENGTH_BYTES + len as usize;
        if end > buf.len() {
            if can_start_frame(&buf[i + LENGTH_BYTES..], len as usize) {
                // Undecided until its end arrives, and nothing after it can be found first.
                // Returning here (not scanning on) keeps a hunt linear: the caller keeps the
                // bytes from here, and the next call starts with this offset.
                return FrameSearch::NotBefore(i);
            }
            continue;
        }
        if plausible_notification(&buf[i + LENGTH_BYTES..end]) {
            return FrameSearch::Found(i);
        }
    }
    FrameSearch::NotBefore(buf.len().saturating_sub(LENGTH_BYTES - 1))
}

/// Whether a quorum packet of a plausible type, with null authinfo (what Java sends), decodes
/// whole at the front of `buf`: `Some(len)`, `None` when not, `Err` when more bytes are needed.
fn plausible_packet(buf: &[u8]) -> Result<Option<usize>, ()> {
    if buf.len() < 4 {
        return Err(());
    }
    let t = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if !(ptype::REQUEST..=ptype::INFORMANDACTIVATE).contains(&t) {
        return Ok(None);
    }
    match QuorumPacket::decode(buf) {
        Ok((p, n)) if p.authinfo.is_none() => Ok(Some(n)),
        Ok(_) => Ok(None),
        Err(WireError {
            kind: ErrorKind::Truncated { .. },
            ..
        }) => Err(()),
        Err(_) => Ok(None),
    }
}

/// The first offset in `buf` where a quorum packet starts that is followed by the start of
/// another (or by the end of the bytes so far): two in a row make a random match unlikely.
pub fn find_packet_start(buf: &[u8]) -> FrameSearch {
    for i in 0..buf.len().saturating_sub(3) {
        match plausible_packet(&buf[i..]) {
            Ok(None) => continue,
            Err(()) => return FrameSearch::NotBefore(i),
            Ok(Some(n)) => match plausible_packet(&buf[i + n..]) {
                Ok(Some(_)) => return FrameSearch::Found(i),
                Err(()) if buf.len() - (i + n) < 4 => return FrameSearch::NotBefore(i),
                Err(()) => return FrameSearch::Found(i),
                Ok(None) => continue,
            },
        }
    }
    FrameSearch::NotBefore(buf.len().saturating_sub(3))
}
