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

use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};

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

/// What a walked snapshot held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    pub sessions: u64,
    pub acl_lists: u64,
    pub nodes: u64,
    /// The largest czxid, mzxid or pzxid of any node.
    pub max_stat_zxid: i64,
    /// Bytes of the body: sessions, ACL cache and nodes up to and including the `"/"` end
    /// marker (what a snapshot file holds between its header and its seal).
    pub body_bytes: u64,
}

/// The jute string that ends a streamed snapshot (`LearnerHandler.java:583`).
pub const SNAPSHOT_SIGNATURE: &[u8] = b"BenWasHere";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SnapStep {
    SessionCount,
    AclCount,
    AclRef,
    AclVecLen,
    AclPerms,
    AclScheme,
    AclIdStr,
    Path,
    PathByte,
    NodeData,
    NodeStat,
    SigLen,
    SigBytes,
    Done,
}

impl SnapStep {
    fn width(self) -> usize {
        match self {
            SnapStep::AclRef => 8,
            SnapStep::PathByte => 1,
            SnapStep::NodeStat => 60,
            SnapStep::SigBytes => SNAPSHOT_SIGNATURE.len(),
            SnapStep::Done => 0,
            _ => 4,
        }
    }

    fn field(self) -> &'static str {
        match self {
            SnapStep::SessionCount => "snapshot session count",
            SnapStep::AclCount => "snapshot acl map size",
            SnapStep::AclRef => "snapshot acl ref",
            SnapStep::AclVecLen => "snapshot acl list length",
            SnapStep::AclPerms => "snapshot acl perms",
            SnapStep::AclScheme => "snapshot acl scheme",
            SnapStep::AclIdStr => "snapshot acl id",
            SnapStep::Path => "snapshot node path",
            SnapStep::PathByte => "snapshot node path",
            SnapStep::NodeData => "snapshot node data",
            SnapStep::NodeStat => "snapshot node stat",
            SnapStep::SigLen => "snapshot signature",
            SnapStep::SigBytes => "snapshot signature",
            SnapStep::Done => "snapshot",
        }
    }
}

/// How much of the bytes offered to [`SnapshotWalker::feed`] it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotProgress {
    /// Bytes consumed from the input.
    pub consumed: usize,
    /// How many of those (a prefix) belong to the body; the rest is the signature.
    pub body: usize,
    /// The signature has been read: the snapshot is complete.
    pub done: bool,
}

/// A streaming parser of the snapshot a leader writes after SNAP (§B.5): sessions, the ACL
/// cache, the nodes in pre-order up to the path `"/"`, then the string `"BenWasHere"`. It
/// keeps at most 10 bytes of its own and skips node data and stats by their lengths, so a
/// snapshot of any size streams through in constant memory.
#[derive(Debug, Clone)]
pub struct SnapshotWalker {
    step: SnapStep,
    scratch: [u8; 60],
    have: usize,
    skip: u64,
    maps_left: i64,
    acls_left: i64,
    /// Stream offset (from the snapshot's first byte) of the next byte.
    pos: u64,
    /// Offset of the start of the field being read.
    field_at: u64,
    summary: SnapshotSummary,
    body_done: bool,
}

impl Default for SnapshotWalker {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotWalker {
    pub fn new() -> Self {
        SnapshotWalker {
            step: SnapStep::SessionCount,
            scratch: [0; 60],
            have: 0,
            skip: 0,
            maps_left: 0,
            acls_left: 0,
            pos: 0,
            field_at: 0,
            summary: SnapshotSummary::default(),
            body_done: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.step == SnapStep::Done
    }

    pub fn summary(&self) -> SnapshotSummary {
        self.summary
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Consumes from `input` up to the end of the snapshot. Errors carry offsets from the
    /// snapshot's first byte.
    pub fn feed(&mut self, input: &[u8]) -> Result<SnapshotProgress, WireError> {
        let mut i = 0;
        let mut body = 0;
        while i < input.len() && self.step != SnapStep::Done {
            let before = i;
            if self.skip > 0 {
                let n = (self.skip.min((input.len() - i) as u64)) as usize;
                self.skip -= n as u64;
                i += n;
            } else {
                if self.have == 0 {
                    self.field_at = self.pos;
                }
                let w = self.step.width();
                let n = (w - self.have).min(input.len() - i);
                self.scratch[self.have..self.have + n].copy_from_slice(&input[i..i + n]);
                self.have += n;
                i += n;
                if self.have == w {
                    self.have = 0;
                    // Count the byte(s) before deciding, so body accounting includes "/".
                    self.pos += (i - before) as u64;
                    if !self.body_done {
                        body = i;
                    }
                    self.complete_field()?;
                    continue;
                }
            }
            self.pos += (i - before) as u64;
            if !self.body_done {
                body = i;
            }
        }
        Ok(SnapshotProgress {
            consumed: i,
            body,
            done: self.step == SnapStep::Done,
        })
    }

    fn err(&self, kind: ErrorKind) -> WireError {
        WireError {
            field: self.step.field(),
            offset: self.field_at,
            kind,
        }
    }

    fn int(&self) -> i32 {
        i32::from_be_bytes([
            self.scratch[0],
            self.scratch[1],
            self.scratch[2],
            self.scratch[3],
        ])
    }

    /// A ustring or buffer length: -1 (null) when `nullable`, else 0..=MAX_BUFFER.
    fn length(&self, nullable: bool) -> Result<u64, WireError> {
        let v = i64::from(self.int());
        let min: i64 = if nullable { -1 } else { 0 };
        if v < min || v > MAX_BUFFER as i64 {
            return Err(self.err(out_of_range(v, min, MAX_BUFFER as i64)));
        }
        Ok(v.max(0) as u64)
    }

    fn after_map(&mut self) {
        self.maps_left -= 1;
        self.summary.acl_lists += 1;
        self.step = if self.maps_left > 0 {
            SnapStep::AclRef
        } else {
            SnapStep::Path
        };
    }

    fn complete_field(&mut self) -> Result<(), WireError> {
        match self.step {
            SnapStep::SessionCount => {
                // Java: `while (count > 0)`, so a negative count means none.
                let n = self.int().max(0) as u64;
                self.summary.sessions = n;
                self.skip = n * 12;
                self.step = SnapStep::AclCount;
            }
            SnapStep::AclCount => {
                self.maps_left = self.int().max(0).into();
                self.step = if self.maps_left > 0 {
                    SnapStep::AclRef
                } else {
                    SnapStep::Path
                };
            }
            SnapStep::AclRef => self.step = SnapStep::AclVecLen,
            SnapStep::AclVecLen => {
                let n = self.int();
                if n < 0 {
                    // Java: "Incorrent format of InputArchive ... missing acls".
                    return Err(self.err(out_of_range(n.into(), 0, i32::MAX.into())));
                }
                self.acls_left = n.into();
                if n > 0 {
                    self.step = SnapStep::AclPerms;
                } else {
                    self.after_map();
                }
            }
            SnapStep::AclPerms => self.step = SnapStep::AclScheme,
            SnapStep::AclScheme => {
                self.skip = self.length(true)?;
                self.step = SnapStep::AclIdStr;
            }
            SnapStep::AclIdStr => {
                self.skip = self.length(true)?;
                self.acls_left -= 1;
                if self.acls_left > 0 {
                    self.step = SnapStep::AclPerms;
                } else {
                    self.after_map();
                }
            }
            SnapStep::Path => {
                let len = self.length(false)?;
                if len == 1 {
                    self.step = SnapStep::PathByte;
                } else {
                    self.skip = len;
                    self.step = SnapStep::NodeData;
                }
            }
            SnapStep::PathByte => {
                if self.scratch[0] == b'/' {
                    self.body_done = true;
                    self.summary.body_bytes = self.pos;
                    self.step = SnapStep::SigLen;
                } else {
                    self.step = SnapStep::NodeData;
                }
            }
            SnapStep::NodeData => {
                // data and the i64 acl ref are skipped, then the 60-byte StatPersisted.
                self.skip = self.length(true)? + 8;
                self.summary.nodes += 1;
                self.step = SnapStep::NodeStat;
            }
            SnapStep::NodeStat => {
                let at = |i: usize| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&self.scratch[i..i + 8]);
                    i64::from_be_bytes(b)
                };
                // czxid at 0, mzxid at 8, pzxid at 52.
                let m = at(0).max(at(8)).max(at(52));
                self.summary.max_stat_zxid = self.summary.max_stat_zxid.max(m);
                self.step = SnapStep::Path;
            }
            SnapStep::SigLen => {
                let n = self.int();
                if n as usize != SNAPSHOT_SIGNATURE.len() {
                    return Err(self.err(ErrorKind::Inconsistent(
                        "missing signature: expected the 10-byte string BenWasHere",
                    )));
                }
                self.step = SnapStep::SigBytes;
            }
            SnapStep::SigBytes => {
                if &self.scratch[..SNAPSHOT_SIGNATURE.len()] != SNAPSHOT_SIGNATURE {
                    return Err(self.err(ErrorKind::Inconsistent(
                        "missing signature: expected BenWasHere",
                    )));
                }
                self.step = SnapStep::Done;
            }
            SnapStep::Done => {}
        }
        Ok(())
    }
}

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
}

impl QuorumStreamDecoder {
    pub fn new() -> Self {
        Self::default()
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
                    if packet.ptype == ptype::SNAP {
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
        let mut s = QuorumPacket::new(ptype::SNAP, 0x1_0000_0015, None)
            .encode()
            .unwrap();
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
                    }
                }
                assert!(input.is_empty());
            }
            assert_eq!(kinds, ["SNAP", "END", "NEWLEADER"], "piece {piece}");
            assert_eq!(snap_bytes, &snap[..body]);
        }
    }
}
