//! Zab's `QuorumPacket` and the jute records it carries (reference `zab-learner-wire.md` §A).

use crate::wire::cursor::Cursor;
use crate::wire::error::{ErrorKind, WireError};

/// Java's default limit for one buffer or string: 0xfffff + 0xfffff bytes.
pub const MAX_BUFFER: usize = 0xfffff + 0xfffff;
/// The most ids an authinfo vector may hold here (Java sets no limit; leaders send none).
pub const MAX_AUTHINFO: usize = 64;
/// The largest packet the decoder buffers.
pub const MAX_PACKET_BYTES: usize = 20 + MAX_BUFFER + 4096;
/// Zab 1.0, the protocol version in LearnerInfo and LEADERINFO.
pub const PROTOCOL_VERSION: i32 = 0x10000;

/// Packet type codes (`Leader.java`).
pub mod ptype {
    pub const REQUEST: i32 = 1;
    pub const PROPOSAL: i32 = 2;
    pub const ACK: i32 = 3;
    pub const COMMIT: i32 = 4;
    pub const PING: i32 = 5;
    pub const REVALIDATE: i32 = 6;
    pub const SYNC: i32 = 7;
    pub const INFORM: i32 = 8;
    pub const COMMITANDACTIVATE: i32 = 9;
    pub const NEWLEADER: i32 = 10;
    pub const FOLLOWERINFO: i32 = 11;
    pub const UPTODATE: i32 = 12;
    pub const DIFF: i32 = 13;
    pub const TRUNC: i32 = 14;
    pub const SNAP: i32 = 15;
    pub const OBSERVERINFO: i32 = 16;
    pub const LEADERINFO: i32 = 17;
    pub const ACKEPOCH: i32 = 18;
    pub const INFORMANDACTIVATE: i32 = 19;

    /// The name Java logs for a type code.
    pub fn name(t: i32) -> &'static str {
        match t {
            REQUEST => "REQUEST",
            PROPOSAL => "PROPOSAL",
            ACK => "ACK",
            COMMIT => "COMMIT",
            PING => "PING",
            REVALIDATE => "REVALIDATE",
            SYNC => "SYNC",
            INFORM => "INFORM",
            COMMITANDACTIVATE => "COMMITANDACTIVATE",
            NEWLEADER => "NEWLEADER",
            FOLLOWERINFO => "FOLLOWERINFO",
            UPTODATE => "UPTODATE",
            DIFF => "DIFF",
            TRUNC => "TRUNC",
            SNAP => "SNAP",
            OBSERVERINFO => "OBSERVERINFO",
            LEADERINFO => "LEADERINFO",
            ACKEPOCH => "ACKEPOCH",
            INFORMANDACTIVATE => "INFORMANDACTIVATE",
            _ => "UNKNOWN",
        }
    }
}

/// jute `Id { ustring scheme; ustring id; }`; `None` is a null string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id {
    pub scheme: Option<Vec<u8>>,
    pub id: Option<Vec<u8>>,
}

/// jute `QuorumPacket { int type; long zxid; buffer data; vector<Id> authinfo; }`.
/// `None` is jute's null (length -1), distinct from an empty buffer or vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    pub ptype: i32,
    pub zxid: i64,
    pub data: Option<Vec<u8>>,
    pub authinfo: Option<Vec<Id>>,
}

impl QuorumPacket {
    /// A packet with null authinfo.
    pub fn new(ptype: i32, zxid: i64, data: Option<Vec<u8>>) -> Self {
        QuorumPacket {
            ptype,
            zxid,
            data,
            authinfo: None,
        }
    }

    /// COMMITANDACTIVATE's and INFORMANDACTIVATE's designated leader: the sid that leads
    /// under the config they activate, the long their data opens with (`Leader.java`
    /// `commitAndActivate`, `buildInformAndActivePacket`), and the bytes after it (an
    /// INFORMANDACTIVATE's committed txn). `None` for other types, or data too short for it.
    pub fn designated_leader(&self) -> Option<(i64, &[u8])> {
        if !matches!(
            self.ptype,
            ptype::COMMITANDACTIVATE | ptype::INFORMANDACTIVATE
        ) {
            return None;
        }
        let data = self.data.as_deref()?;
        let (sid, rest) = data.split_first_chunk::<8>()?;
        Some((i64::from_be_bytes(*sid), rest))
    }

    /// FOLLOWERINFO: `zxid = acceptedEpoch << 32`, data = [`LearnerInfo`].
    pub fn follower_info(accepted_epoch: i64, info: &LearnerInfo) -> Self {
        Self::new(
            ptype::FOLLOWERINFO,
            accepted_epoch << 32,
            Some(info.encode().to_vec()),
        )
    }

    /// ACKEPOCH: `zxid` = last logged zxid, data = `i32 epoch_field` (current epoch or -1).
    pub fn ack_epoch(last_zxid: i64, epoch_field: i32) -> Self {
        Self::new(
            ptype::ACKEPOCH,
            last_zxid,
            Some(epoch_field.to_be_bytes().to_vec()),
        )
    }

    /// ACK of `zxid`, null data.
    pub fn ack(zxid: i64) -> Self {
        Self::new(ptype::ACK, zxid, None)
    }

    /// A learner's PING reply: same zxid, an empty (never null) touch table.
    pub fn ping_reply(zxid: i64) -> Self {
        Self::new(ptype::PING, zxid, Some(Vec::new()))
    }

    /// LEADERINFO (leader to learner): `zxid = epoch << 32`, data = the protocol version.
    pub fn leader_info(epoch: i64) -> Self {
        Self::new(
            ptype::LEADERINFO,
            epoch << 32,
            Some(PROTOCOL_VERSION.to_be_bytes().to_vec()),
        )
    }

    /// NEWLEADER: `zxid = epoch << 32`, data = the config text (3.5+ leaders send the
    /// last-seen quorum verifier's text, `LearnerHandler.java`).
    pub fn new_leader(epoch: i64, config: &str) -> Self {
        Self::new(
            ptype::NEWLEADER,
            epoch << 32,
            Some(config.as_bytes().to_vec()),
        )
    }

    /// A packet of this type and zxid with null data (DIFF, TRUNC, SNAP, COMMIT, UPTODATE,
    /// and the leader's PING).
    pub fn op(ptype: i32, zxid: i64) -> Self {
        Self::new(ptype, zxid, None)
    }

    /// The type's name as Java logs it.
    pub fn type_name(&self) -> &'static str {
        ptype::name(self.ptype)
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        let mut n = 4 + 8 + 4 + self.data.as_ref().map_or(0, Vec::len) + 4;
        for id in self.authinfo.iter().flatten() {
            n += 8 + id.scheme.as_ref().map_or(0, Vec::len) + id.id.as_ref().map_or(0, Vec::len);
        }
        n
    }

    /// The bytes Java's `BinaryOutputArchive.writeRecord` produces. Fails when a buffer,
    /// string or the vector exceeds what a Java reader (or this decoder) accepts.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.ptype.to_be_bytes());
        out.extend_from_slice(&self.zxid.to_be_bytes());
        put_buffer(&mut out, "data", self.data.as_deref())?;
        match &self.authinfo {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(ids) => {
                if ids.len() > MAX_AUTHINFO {
                    return Err(WireError::new(
                        "authinfo count",
                        out.len(),
                        out_of_range(ids.len() as i64, -1, MAX_AUTHINFO as i64),
                    ));
                }
                out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
                for id in ids {
                    put_buffer(&mut out, "authinfo scheme", id.scheme.as_deref())?;
                    put_buffer(&mut out, "authinfo id", id.id.as_deref())?;
                }
            }
        }
        if out.len() > MAX_PACKET_BYTES {
            return Err(WireError::new(
                "packet",
                0,
                out_of_range(out.len() as i64, 20, MAX_PACKET_BYTES as i64),
            ));
        }
        Ok(out)
    }

    /// Decodes one packet from the front of `buf`; returns it and the bytes it used. A packet
    /// that does not fit in `buf` gives [`ErrorKind::Truncated`] for the first missing field.
    pub fn decode(buf: &[u8]) -> Result<(QuorumPacket, usize), WireError> {
        let mut c = Cursor::new(buf);
        let ptype = c.i32("type")?;
        let zxid = c.i64("zxid")?;
        let data = get_buffer(&mut c, "data")?;
        let at = c.pos();
        let count = c.i32("authinfo count")?;
        let authinfo = if count == -1 {
            None
        } else if count < 0 || count as usize > MAX_AUTHINFO {
            return Err(WireError::new(
                "authinfo count",
                at,
                out_of_range(count.into(), -1, MAX_AUTHINFO as i64),
            ));
        } else {
            let mut ids = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let scheme = get_buffer(&mut c, "authinfo scheme")?;
                let id = get_buffer(&mut c, "authinfo id")?;
                ids.push(Id { scheme, id });
            }
            Some(ids)
        };
        if c.pos() > MAX_PACKET_BYTES {
            return Err(WireError::new(
                "packet",
                0,
                out_of_range(c.pos() as i64, 20, MAX_PACKET_BYTES as i64),
            ));
        }
        Ok((
            QuorumPacket {
                ptype,
                zxid,
                data,
                authinfo,
            },
            c.pos(),
        ))
    }

    /// The data of a LEADERINFO (protocol version) or ACKEPOCH (epoch field): its first i32.
    pub fn data_i32(&self, field: &'static str) -> Result<i32, WireError> {
        let d = self
            .data
            .as_deref()
            .ok_or_else(|| WireError::new(field, 12, ErrorKind::Inconsistent("null data")))?;
        Cursor::new(d).i32(field).map_err(|e| e.at(16))
    }
}

pub(crate) fn out_of_range(value: i64, min: i64, max: i64) -> ErrorKind {
    ErrorKind::OutOfRange { value, min, max }
}

pub(crate) fn put_buffer(
    out: &mut Vec<u8>,
    field: &'static str,
    b: Option<&[u8]>,
) -> Result<(), WireError> {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            if b.len() > MAX_BUFFER {
                return Err(WireError::new(
                    field,
                    out.len(),
                    out_of_range(b.len() as i64, -1, MAX_BUFFER as i64),
                ));
            }
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

pub(crate) fn get_buffer(
    c: &mut Cursor<'_>,
    field: &'static str,
) -> Result<Option<Vec<u8>>, WireError> {
    let at = c.pos();
    let len = c.i32(field)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > MAX_BUFFER {
        return Err(WireError::new(
            field,
            at,
            out_of_range(len.into(), -1, MAX_BUFFER as i64),
        ));
    }
    Ok(Some(c.take(field, len as usize)?.to_vec()))
}

/// jute `LearnerInfo { long serverid; int protocolVersion; long configVersion; }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerInfo {
    pub sid: i64,
    pub protocol_version: i32,
    pub config_version: i64,
}

impl LearnerInfo {
    pub fn encode(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..8].copy_from_slice(&self.sid.to_be_bytes());
        b[8..12].copy_from_slice(&self.protocol_version.to_be_bytes());
        b[12..].copy_from_slice(&self.config_version.to_be_bytes());
        b
    }

    /// Decodes the record as any version sends it: 3.5+ sends 20 bytes, 3.4 only 12 (no
    /// `configVersion`, read as 0). Trailing bytes are ignored, as Java ignores them.
    pub fn decode_any(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() >= 20 {
            return Self::decode(buf);
        }
        let mut c = Cursor::new(buf);
        Ok(LearnerInfo {
            sid: c.i64("serverid")?,
            protocol_version: c.i32("protocolVersion")?,
            config_version: 0,
        })
    }

    /// Decodes the 20-byte record (trailing bytes are ignored, as Java ignores them).
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(buf);
        Ok(LearnerInfo {
            sid: c.i64("serverid")?,
            protocol_version: c.i32("protocolVersion")?,
            config_version: c.i64("configVersion")?,
        })
    }
}

/// jute `TxnHeader { long clientId; int cxid; long zxid; long time; int type; }`, the first 32
/// bytes of a PROPOSAL's data and of every txn log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnHeader {
    pub client_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    pub time: i64,
    pub op: i32,
}

impl TxnHeader {
    pub const LEN: usize = 32;

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(buf);
        Ok(TxnHeader {
            client_id: c.i64("txn clientId")?,
            cxid: c.i32("txn cxid")?,
            zxid: c.i64("txn zxid")?,
            time: c.i64("txn time")?,
            op: c.i32("txn type")?,
        })
    }

    pub fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&self.client_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.cxid.to_be_bytes());
        b[12..20].copy_from_slice(&self.zxid.to_be_bytes());
        b[20..28].copy_from_slice(&self.time.to_be_bytes());
        b[28..].copy_from_slice(&self.op.to_be_bytes());
        b
    }
}

/// `OpCode.error`: the txn type of a failed write (`ErrorTxn`), which changes no state.
pub const OP_ERROR: i32 = -1;
/// The cxid that marks zkfle's hand-over txn ("zkfl").
pub const HANDOVER_CXID: i32 = i32::from_be_bytes(*b"zkfl");

/// The txn zkfle proposes, and never logs or commits itself, when it hands leadership over:
/// `TxnHeader { clientId 0, cxid "zkfl", zxid, time, type error }` + `ErrorTxn { err 0 }`.
/// Java followers log and acknowledge it like any proposal; applied, it changes nothing
/// (ZooKeeper logs a failed write the same way). See docs/lead.md.
pub fn handover_txn(zxid: i64, time_ms: i64) -> Vec<u8> {
    let h = TxnHeader {
        client_id: 0,
        cxid: HANDOVER_CXID,
        zxid,
        time: time_ms,
        op: OP_ERROR,
    };
    let mut t = h.encode().to_vec();
    t.extend_from_slice(&0i32.to_be_bytes());
    t
}

/// Whether a txn is zkfle's hand-over txn ([`handover_txn`]).
pub fn is_handover_txn(txn: &[u8]) -> bool {
    txn.len() == TxnHeader::LEN + 4
        && TxnHeader::decode(txn)
            .is_ok_and(|h| h.client_id == 0 && h.cxid == HANDOVER_CXID && h.op == OP_ERROR)
}
