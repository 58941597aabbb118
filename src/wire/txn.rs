//! The records a txn log entry (or a PROPOSAL's data) carries after its [`TxnHeader`], and the
//! records of a snapshot file (`zookeeper.jute`, `SerializeUtils`, `DataTree.serialize`,
//! `ReferenceCountedACLCache.serialize`, `DataNode.serialize`).
//!
//! A txn is `TxnHeader ‖ record ‖ [TxnDigest]`; the record's layout is chosen by the header's
//! type, as `SerializeUtils.deserializeTxn` chooses it: a `create` too short for `CreateTxn`
//! is read as the older `CreateTxnV0` (parentCVersion -1), a `closeSession` without a body
//! has no record, and the digest is there when 12 more bytes are.
//!
//! A snapshot body is `int count, {long id, int timeout}*` (sessions), `int n, {long id,
//! vector<ACL>}*` (the ACL cache), `{ustring path, buffer data, long acl, StatPersisted}*`
//! in pre-order up to the path `"/"`; a file then has the seal `{long adler32, ustring "/"}`,
//! and since 3.6 the tree digest `{long zxid, int version, long digest}` and a second seal.
//! [`SnapshotDecoder`] reads one item at a time from the front of a buffer, so a reader keeps
//! at most one item (bounded by [`MAX_ITEM_BYTES`]) in memory.
//!
//! Paths are Java strings: bytes that are not UTF-8 become U+FFFD, as Java's decoder makes them.

use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};
use super::quorum::{Id, MAX_BUFFER, TxnHeader, get_buffer, out_of_range, put_buffer};

/// `ZooDefs.OpCode` values that can appear in a txn.
pub mod opcode {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;

    /// The name TxnLogToolkit prints for a type.
    pub fn name(op: i32) -> &'static str {
        match op {
            CREATE => "create",
            DELETE => "delete",
            SET_DATA => "setData",
            SET_ACL => "setACL",
            CHECK => "check",
            MULTI => "multi",
            CREATE2 => "create2",
            RECONFIG => "reconfig",
            CREATE_CONTAINER => "createContainer",
            DELETE_CONTAINER => "deleteContainer",
            CREATE_TTL => "createTTL",
            CREATE_SESSION => "createSession",
            CLOSE_SESSION => "closeSession",
            ERROR => "error",
            _ => "unknown",
        }
    }
}

/// The most entries one ACL list, one multi or one closeSession path list may hold here (Java
/// sets no limit; each entry takes at least 4 bytes of a buffer of at most [`MAX_BUFFER`]).
pub const MAX_VECTOR: usize = MAX_BUFFER / 4;
/// The largest snapshot item [`SnapshotDecoder`] needs in one piece: a node with a path and
/// data of [`MAX_BUFFER`] bytes each, or an ACL list of that size.
pub const MAX_ITEM_BYTES: usize = 2 * MAX_BUFFER + 256;

/// jute `ACL { int perms; Id id; }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    pub perms: i32,
    pub id: Id,
}

impl Acl {
    /// `world:anyone` with these permissions.
    pub fn world(perms: i32) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: Some(b"world".to_vec()),
                id: Some(b"anyone".to_vec()),
            },
        }
    }
}

/// A txn's record, by the header's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnRecord {
    /// `CreateTxn` (create, create2), or `CreateTxnV0` read with `parent_cversion` -1.
    Create {
        path: String,
        data: Option<Vec<u8>>,
        acl: Option<Vec<Acl>>,
        ephemeral: bool,
        parent_cversion: i32,
    },
    /// `CreateTTLTxn`.
    CreateTtl {
        path: String,
        data: Option<Vec<u8>>,
        acl: Option<Vec<Acl>>,
        parent_cversion: i32,
        ttl: i64,
    },
    /// `CreateContainerTxn`.
    CreateContainer {
        path: String,
        data: Option<Vec<u8>>,
        acl: Option<Vec<Acl>>,
        parent_cversion: i32,
    },
    /// `DeleteTxn` (delete, deleteContainer).
    Delete { path: String },
    /// `SetDataTxn` (setData, reconfig).
    SetData {
        path: String,
        data: Option<Vec<u8>>,
        version: i32,
    },
    /// `CheckVersionTxn`.
    CheckVersion { path: String, version: i32 },
    /// `SetACLTxn`.
    SetAcl {
        path: String,
        acl: Option<Vec<Acl>>,
        version: i32,
    },
    /// `CreateSessionTxn`.
    CreateSession { timeout: i32 },
    /// `CloseSessionTxn`: the session's ephemerals the leader knew of.
    CloseSession { paths: Option<Vec<String>> },
    /// `ErrorTxn`.
    Error { err: i32 },
    /// `MultiTxn`: `(type, data)` of each sub-txn, decoded by [`decode_record`].
    Multi(Vec<(i32, Vec<u8>)>),
}

/// jute `TxnDigest { int version; long treeDigest; }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnDigest {
    pub version: i32,
    pub tree_digest: i64,
}

/// A whole txn: header, record (None for a body-less closeSession or an unknown type) and
/// digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    pub header: TxnHeader,
    pub record: Option<TxnRecord>,
    pub digest: Option<TxnDigest>,
}

fn get_string(c: &mut Cursor<'_>, field: &'static str) -> Result<String, WireError> {
    Ok(get_buffer(c, field)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default())
}

fn get_count(c: &mut Cursor<'_>, field: &'static str) -> Result<Option<usize>, WireError> {
    let at = c.pos();
    let n = c.i32(field)?;
    if n == -1 {
        return Ok(None);
    }
    if n < 0 || n as usize > MAX_VECTOR {
        return Err(WireError::new(
            field,
            at,
            out_of_range(n.into(), -1, MAX_VECTOR as i64),
        ));
    }
    Ok(Some(n as usize))
}

fn get_bool(c: &mut Cursor<'_>, field: &'static str) -> Result<bool, WireError> {
    Ok(c.take(field, 1)?[0] != 0)
}

/// jute `vector<ACL>`; None for a null vector.
fn get_acls(c: &mut Cursor<'_>) -> Result<Option<Vec<Acl>>, WireError> {
    let Some(n) = get_count(c, "acl count")? else {
        return Ok(None);
    };
    let mut v = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let perms = c.i32("acl perms")?;
        let scheme = get_buffer(c, "acl scheme")?;
        let id = get_buffer(c, "acl id")?;
        v.push(Acl {
            perms,
            id: Id { scheme, id },
        });
    }
    Ok(Some(v))
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, field: &'static str, s: &str) -> Result<(), WireError> {
    put_buffer(out, field, Some(s.as_bytes()))
}

/// jute `vector<ACL>`.
pub fn put_acls(out: &mut Vec<u8>, acls: Option<&[Acl]>) -> Result<(), WireError> {
    match acls {
        None => put_i32(out, -1),
        Some(v) => {
            if v.len() > MAX_VECTOR {
                return Err(WireError::new(
                    "acl count",
                    out.len(),
                    out_of_range(v.len() as i64, -1, MAX_VECTOR as i64),
                ));
            }
            put_i32(out, v.len() as i32);
            for a in v {
                put_i32(out, a.perms);
                put_buffer(out, "acl scheme", a.id.scheme.as_deref())?;
                put_buffer(out, "acl id", a.id.id.as_deref())?;
            }
        }
    }
    Ok(())
}

/// Reads the record of a txn of type `op` from the front of `buf` (as `deserializeTxn`, and
/// as `DataTree.processTxn` reads a multi's sub-txns). Returns the record (None for a
/// closeSession without body or a type no record is known for) and the bytes used.
pub fn decode_record(op: i32, buf: &[u8]) -> Result<(Option<TxnRecord>, usize), WireError> {
    use opcode::*;
    let mut c = Cursor::new(buf);
    let rec = match op {
        CREATE | CREATE2 => {
            let path = get_string(&mut c, "create path")?;
            let data = get_buffer(&mut c, "create data")?;
            let acl = get_acls(&mut c)?;
            let ephemeral = get_bool(&mut c, "create ephemeral")?;
            let parent_cversion = match c.i32("create parentCVersion") {
                Ok(v) => v,
                // CreateTxnV0: no parentCVersion; -1 makes processTxn count it.
                Err(WireError {
                    kind: ErrorKind::Truncated { .. },
                    ..
                }) if op == CREATE => -1,
                Err(e) => return Err(e),
            };
            TxnRecord::Create {
                path,
                data,
                acl,
                ephemeral,
                parent_cversion,
            }
        }
        CREATE_TTL => TxnRecord::CreateTtl {
            path: get_string(&mut c, "createTTL path")?,
            data: get_buffer(&mut c, "createTTL data")?,
            acl: get_acls(&mut c)?,
            parent_cversion: c.i32("createTTL parentCVersion")?,
            ttl: c.i64("createTTL ttl")?,
        },
        CREATE_CONTAINER => TxnRecord::CreateContainer {
            path: get_string(&mut c, "createContainer path")?,
            data: get_buffer(&mut c, "createContainer data")?,
            acl: get_acls(&mut c)?,
            parent_cversion: c.i32("createContainer parentCVersion")?,
        },
        DELETE | DELETE_CONTAINER => TxnRecord::Delete {
            path: get_string(&mut c, "delete path")?,
        },
        SET_DATA | RECONFIG => TxnRecord::SetData {
            path: get_string(&mut c, "setData path")?,
            data: get_buffer(&mut c, "setData data")?,
            version: c.i32("setData version")?,
        },
        CHECK => TxnRecord::CheckVersion {
            path: get_string(&mut c, "check path")?,
            version: c.i32("check version")?,
        },
        SET_ACL => TxnRecord::SetAcl {
            path: get_string(&mut c, "setACL path")?,
            acl: get_acls(&mut c)?,
            version: c.i32("setACL version")?,
        },
        CREATE_SESSION => TxnRecord::CreateSession {
            timeout: c.i32("createSession timeOut")?,
        },
        CLOSE_SESSION => {
            if c.remaining() == 0 {
                return Ok((None, 0));
            }
            let paths = match get_count(&mut c, "closeSession path count")? {
                None => None,
                Some(n) => {
                    let mut v = Vec::with_capacity(n.min(64));
                    for _ in 0..n {
                        v.push(get_string(&mut c, "closeSession path")?);
                    }
                    Some(v)
                }
            };
            TxnRecord::CloseSession { paths }
        }
        ERROR => TxnRecord::Error {
            err: c.i32("error err")?,
        },
        MULTI => {
            let n = get_count(&mut c, "multi count")?.unwrap_or(0);
            let mut v = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                let t = c.i32("multi txn type")?;
                let d = get_buffer(&mut c, "multi txn data")?.unwrap_or_default();
                v.push((t, d));
            }
            TxnRecord::Multi(v)
        }
        _ => return Ok((None, 0)),
    };
    Ok((Some(rec), c.pos()))
}

/// Decodes a whole txn (a log entry's or PROPOSAL's bytes). Fails on a short header or a
/// malformed record; trailing bytes that are not a whole digest are ignored, as Java ignores
/// them.
pub fn decode_txn(buf: &[u8]) -> Result<Txn, WireError> {
    let header = TxnHeader::decode(buf)?;
    let body = &buf[TxnHeader::LEN..];
    let (record, used) = decode_record(header.op, body).map_err(|e| e.at(TxnHeader::LEN as u64))?;
    let mut c = Cursor::new(&body[used..]);
    let digest = match (c.i32("digest version"), c.i64("digest")) {
        (Ok(version), Ok(tree_digest)) if record.is_some() => Some(TxnDigest {
            version,
            tree_digest,
        }),
        _ => None,
    };
    Ok(Txn {
        header,
        record,
        digest,
    })
}

/// The bytes of a record.
pub fn encode_record(rec: &TxnRecord) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::new();
    match rec {
        TxnRecord::Create {
            path,
            data,
            acl,
            ephemeral,
            parent_cversion,
        } => {
            put_str(&mut out, "create path", path)?;
            put_buffer(&mut out, "create data", data.as_deref())?;
            put_acls(&mut out, acl.as_deref())?;
            out.push(u8::from(*ephemeral));
            put_i32(&mut out, *parent_cversion);
        }
        TxnRecord::CreateTtl {
            path,
            data,
            acl,
            parent_cversion,
            ttl,
        } => {
            put_str(&mut out, "createTTL path", path)?;
            put_buffer(&mut out, "createTTL data", data.as_deref())?;
            put_acls(&mut out, acl.as_deref())?;
            put_i32(&mut out, *parent_cversion);
            put_i64(&mut out, *ttl);
        }
        TxnRecord::CreateContainer {
            path,
            data,
            acl,
            parent_cversion,
        } => {
            put_str(&mut out, "createContainer path", path)?;
            put_buffer(&mut out, "createContainer data", data.as_deref())?;
            put_acls(&mut out, acl.as_deref())?;
            put_i32(&mut out, *parent_cversion);
        }
        TxnRecord::Delete { path } => put_str(&mut out, "delete path", path)?,
        TxnRecord::SetData {
            path,
            data,
            version,
        } => {
            put_str(&mut out, "setData path", path)?;
            put_buffer(&mut out, "setData data", data.as_deref())?;
            put_i32(&mut out, *version);
        }
        TxnRecord::CheckVersion { path, version } => {
            put_str(&mut out, "check path", path)?;
            put_i32(&mut out, *version);
        }
        TxnRecord::SetAcl { path, acl, version } => {
            put_str(&mut out, "setACL path", path)?;
            put_acls(&mut out, acl.as_deref())?;
            put_i32(&mut out, *version);
        }
        TxnRecord::CreateSession { timeout } => put_i32(&mut out, *timeout),
        TxnRecord::CloseSession { paths } => match paths {
            None => put_i32(&mut out, -1),
            Some(p) => {
                put_i32(&mut out, p.len() as i32);
                for s in p {
                    put_str(&mut out, "closeSession path", s)?;
                }
            }
        },
        TxnRecord::Error { err } => put_i32(&mut out, *err),
        TxnRecord::Multi(subs) => {
            put_i32(&mut out, subs.len() as i32);
            for (t, d) in subs {
                put_i32(&mut out, *t);
                put_buffer(&mut out, "multi txn data", Some(d))?;
            }
        }
    }
    Ok(out)
}

/// The bytes of a whole txn.
pub fn encode_txn(t: &Txn) -> Result<Vec<u8>, WireError> {
    let mut out = t.header.encode().to_vec();
    if let Some(r) = &t.record {
        out.extend(encode_record(r)?);
    }
    if let Some(d) = t.digest {
        put_i32(&mut out, d.version);
        put_i64(&mut out, d.tree_digest);
    }
    Ok(out)
}

/// jute `StatPersisted`, 60 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StatPersisted {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub pzxid: i64,
}

impl StatPersisted {
    pub const LEN: usize = 60;

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_i64(out, self.czxid);
        put_i64(out, self.mzxid);
        put_i64(out, self.ctime);
        put_i64(out, self.mtime);
        put_i32(out, self.version);
        put_i32(out, self.cversion);
        put_i32(out, self.aversion);
        put_i64(out, self.ephemeral_owner);
        put_i64(out, self.pzxid);
    }

    fn decode(c: &mut Cursor<'_>) -> Result<Self, WireError> {
        Ok(StatPersisted {
            czxid: c.i64("stat czxid")?,
            mzxid: c.i64("stat mzxid")?,
            ctime: c.i64("stat ctime")?,
            mtime: c.i64("stat mtime")?,
            version: c.i32("stat version")?,
            cversion: c.i32("stat cversion")?,
            aversion: c.i32("stat aversion")?,
            ephemeral_owner: c.i64("stat ephemeralOwner")?,
            pzxid: c.i64("stat pzxid")?,
        })
    }

    /// The 60 bytes `DigestCalculator` hashes: czxid, mzxid, pzxid, ctime, mtime, version,
    /// cversion, aversion, ephemeralOwner (not the serialized order).
    pub fn digest_bytes(&self) -> [u8; 60] {
        let mut b = [0u8; 60];
        b[0..8].copy_from_slice(&self.czxid.to_be_bytes());
        b[8..16].copy_from_slice(&self.mzxid.to_be_bytes());
        b[16..24].copy_from_slice(&self.pzxid.to_be_bytes());
        b[24..32].copy_from_slice(&self.ctime.to_be_bytes());
        b[32..40].copy_from_slice(&self.mtime.to_be_bytes());
        b[40..44].copy_from_slice(&self.version.to_be_bytes());
        b[44..48].copy_from_slice(&self.cversion.to_be_bytes());
        b[48..52].copy_from_slice(&self.aversion.to_be_bytes());
        b[52..60].copy_from_slice(&self.ephemeral_owner.to_be_bytes());
        b
    }
}

/// One item of a snapshot, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapItem {
    /// How many sessions follow (a negative count means none, as Java's `while (count > 0)`).
    SessionCount(i32),
    Session {
        id: i64,
        timeout: i32,
    },
    /// How many ACL cache entries follow.
    AclCount(i32),
    AclEntry {
        id: i64,
        acls: Vec<Acl>,
    },
    Node {
        path: String,
        data: Option<Vec<u8>>,
        acl: i64,
        stat: StatPersisted,
    },
    /// The path `"/"` that ends the nodes.
    End,
    /// A seal: the Adler-32 of every byte before it (checked by the caller, who has the
    /// bytes).
    Seal(i64),
    /// The tree digest after the first seal (3.6+).
    Digest {
        zxid: i64,
        version: i32,
        digest: i64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SnapStep {
    SessionCount,
    Sessions(i64),
    AclCount,
    Acls(i64),
    Nodes,
    FirstSeal,
    Digest,
    SecondSeal,
    Done,
}

/// Reads a snapshot body (after the file header), one [`SnapItem`] at a time, from the front
/// of whatever bytes the caller has. `Ok(None)` means the item is not complete in the bytes
/// given: give more (at most [`MAX_ITEM_BYTES`] are ever needed for one item). At the end of
/// the input call [`SnapshotDecoder::finish`].
#[derive(Debug, Clone)]
pub struct SnapshotDecoder {
    step: SnapStep,
    /// Offset (from the body's start) of the next item.
    pos: u64,
}

impl Default for SnapshotDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotDecoder {
    pub fn new() -> Self {
        SnapshotDecoder {
            step: SnapStep::SessionCount,
            pos: 0,
        }
    }

    /// Offset of the next item from the start of the body.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The whole snapshot has been read (through the digest's seal).
    pub fn is_done(&self) -> bool {
        self.step == SnapStep::Done
    }

    /// The tree and its first seal have been read (a snapshot without digest may end here).
    pub fn tree_done(&self) -> bool {
        matches!(
            self.step,
            SnapStep::Digest | SnapStep::SecondSeal | SnapStep::Done
        )
    }

    /// The input has ended: fine after the first seal (snapshots before 3.6 have no digest),
    /// an error before.
    pub fn finish(&mut self) -> Result<(), WireError> {
        match self.step {
            SnapStep::Digest | SnapStep::Done => {
                self.step = SnapStep::Done;
                Ok(())
            }
            _ => Err(WireError {
                field: "snapshot",
                offset: self.pos,
                kind: ErrorKind::Inconsistent("the snapshot ends before its seal"),
            }),
        }
    }

    /// Decodes the next item from the front of `buf`; returns it and the bytes it used.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<(SnapItem, usize)>, WireError> {
        let mut c = Cursor::new(buf);
        let r = self.item(&mut c);
        match r {
            Ok(Some(item)) => {
                let n = c.pos();
                self.pos += n as u64;
                Ok(Some((item, n)))
            }
            Ok(None) => Ok(None),
            Err(WireError {
                kind: ErrorKind::Truncated { .. },
                ..
            }) if buf.len() < MAX_ITEM_BYTES => Ok(None),
            Err(e) => Err(e.at(self.pos)),
        }
    }

    fn item(&mut self, c: &mut Cursor<'_>) -> Result<Option<SnapItem>, WireError> {
        Ok(Some(match self.step {
            SnapStep::SessionCount => {
                let n = c.i32("snapshot session count")?;
                self.step = if n > 0 {
                    SnapStep::Sessions(n.into())
                } else {
                    SnapStep::AclCount
                };
                SnapItem::SessionCount(n)
            }
            SnapStep::Sessions(left) => {
                let id = c.i64("snapshot session id")?;
                let timeout = c.i32("snapshot session timeout")?;
                self.step = if left > 1 {
                    SnapStep::Sessions(left - 1)
                } else {
                    SnapStep::AclCount
                };
                SnapItem::Session { id, timeout }
            }
            SnapStep::AclCount => {
                let n = c.i32("snapshot acl map size")?;
                self.step = if n > 0 {
                    SnapStep::Acls(n.into())
                } else {
                    SnapStep::Nodes
                };
                SnapItem::AclCount(n)
            }
            SnapStep::Acls(left) => {
                let id = c.i64("snapshot acl ref")?;
                let at = c.pos();
                let acls = get_acls(c)?.ok_or_else(|| {
                    // Java: "Incorrent format of InputArchive ... missing acls".
                    WireError::new(
                        "snapshot acl list length",
                        at,
                        ErrorKind::Inconsistent("missing acls"),
                    )
                })?;
                self.step = if left > 1 {
                    SnapStep::Acls(left - 1)
                } else {
                    SnapStep::Nodes
                };
                SnapItem::AclEntry { id, acls }
            }
            SnapStep::Nodes => {
                let at = c.pos();
                let path = get_buffer(c, "snapshot node path")?.ok_or_else(|| {
                    WireError::new(
                        "snapshot node path",
                        at,
                        ErrorKind::Inconsistent("null path"),
                    )
                })?;
                if path == b"/" {
                    self.step = SnapStep::FirstSeal;
                    return Ok(Some(SnapItem::End));
                }
                let data = get_buffer(c, "snapshot node data")?;
                let acl = c.i64("snapshot node acl")?;
                let stat = StatPersisted::decode(c)?;
                SnapItem::Node {
                    path: String::from_utf8_lossy(&path).into_owned(),
                    data,
                    acl,
                    stat,
                }
            }
            SnapStep::FirstSeal | SnapStep::SecondSeal => {
                let v = c.i64("snapshot seal checksum")?;
                let at = c.pos();
                let p = get_buffer(c, "snapshot seal path")?;
                if p.as_deref() != Some(&b"/"[..]) {
                    return Err(WireError::new(
                        "snapshot seal path",
                        at,
                        ErrorKind::Inconsistent("a seal ends with the path \"/\""),
                    ));
                }
                self.step = if self.step == SnapStep::FirstSeal {
                    SnapStep::Digest
                } else {
                    SnapStep::Done
                };
                SnapItem::Seal(v)
            }
            SnapStep::Digest => {
                let zxid = c.i64("snapshot digest zxid")?;
                let version = c.i32("snapshot digest version")?;
                if version < 2 {
                    return Err(WireError::new(
                        "snapshot digest version",
                        8,
                        ErrorKind::Inconsistent("digest versions before 2 are not read"),
                    ));
                }
                let digest = c.i64("snapshot digest")?;
                self.step = SnapStep::SecondSeal;
                SnapItem::Digest {
                    zxid,
                    version,
                    digest,
                }
            }
            SnapStep::Done => return Ok(None),
        }))
    }
}

/// The bytes of one snapshot item, as Java writes it.
pub fn encode_snap_item(out: &mut Vec<u8>, item: &SnapItem) -> Result<(), WireError> {
    match item {
        SnapItem::SessionCount(n) | SnapItem::AclCount(n) => put_i32(out, *n),
        SnapItem::Session { id, timeout } => {
            put_i64(out, *id);
            put_i32(out, *timeout);
        }
        SnapItem::AclEntry { id, acls } => {
            put_i64(out, *id);
            put_acls(out, Some(acls))?;
        }
        SnapItem::Node {
            path,
            data,
            acl,
            stat,
        } => encode_node(out, path, data.as_deref(), *acl, stat)?,
        SnapItem::End => put_str(out, "snapshot end", "/")?,
        SnapItem::Seal(v) => {
            put_i64(out, *v);
            put_str(out, "snapshot seal path", "/")?;
        }
        SnapItem::Digest {
            zxid,
            version,
            digest,
        } => {
            put_i64(out, *zxid);
            put_i32(out, *version);
            put_i64(out, *digest);
        }
    }
    Ok(())
}

/// One node of a snapshot, without copying its data first.
pub fn encode_node(
    out: &mut Vec<u8>,
    path: &str,
    data: Option<&[u8]>,
    acl: i64,
    stat: &StatPersisted,
) -> Result<(), WireError> {
    put_str(out, "snapshot node path", path)?;
    put_buffer(out, "snapshot node data", data)?;
    put_i64(out, acl);
    stat.encode(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s.replace([' ', '\n'], "")).unwrap()
    }

    #[test]
    fn create_from_a_capture() {
        // The PROPOSAL data of `create /x y` (world:anyone ALL) from a 3.8 capture.
        let t = hex(
            "010000193d7d0000 00000001 0000000100000002 000001a228322f99 00000001 00000002 2f78 00000001 79 00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65 00 00000001 00000002 00000001d7936b7b",
        );
        let txn = decode_txn(&t).unwrap();
        assert_eq!(
            txn.record,
            Some(TxnRecord::Create {
                path: "/x".into(),
                data: Some(b"y".to_vec()),
                acl: Some(vec![Acl::world(31)]),
                ephemeral: false,
                parent_cversion: 1,
            })
        );
        assert_eq!(
            txn.digest,
            Some(TxnDigest {
                version: 2,
                tree_digest: 0x1_d793_6b7b
            })
        );
        assert_eq!(encode_txn(&txn).unwrap(), t);
        // Without parentCVersion (and digest) it is a CreateTxnV0.
        let v0 = &t[..t.len() - 16];
        match decode_txn(v0).unwrap().record {
            Some(TxnRecord::Create {
                parent_cversion: -1,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn short_and_bodyless_records() {
        let h = |op| {
            TxnHeader {
                client_id: 5,
                cxid: 0,
                zxid: 7,
                time: 0,
                op,
            }
            .encode()
            .to_vec()
        };
        assert_eq!(decode_txn(&h(opcode::CLOSE_SESSION)).unwrap().record, None);
        let e = decode_txn(&h(opcode::SET_DATA)).unwrap_err();
        assert_eq!((e.field, e.offset), ("setData path", 32));
        let mut big = h(opcode::SET_ACL);
        big.extend(hex("00000001 2f 7fffffff"));
        let e = decode_txn(&big).unwrap_err();
        assert_eq!(e.field, "acl count");
    }

    #[test]
    fn snapshot_items_in_pieces() {
        let items = vec![
            SnapItem::SessionCount(1),
            SnapItem::Session {
                id: 0x1000,
                timeout: 30000,
            },
            SnapItem::AclCount(1),
            SnapItem::AclEntry {
                id: 1,
                acls: vec![Acl::world(31)],
            },
            SnapItem::Node {
                path: "".into(),
                data: None,
                acl: -1,
                stat: StatPersisted::default(),
            },
            SnapItem::Node {
                path: "/a".into(),
                data: Some(b"hello".to_vec()),
                acl: 1,
                stat: StatPersisted {
                    czxid: 3,
                    ..Default::default()
                },
            },
            SnapItem::End,
            SnapItem::Seal(77),
            SnapItem::Digest {
                zxid: 3,
                version: 2,
                digest: 9,
            },
            SnapItem::Seal(78),
        ];
        let mut bytes = Vec::new();
        for i in &items {
            encode_snap_item(&mut bytes, i).unwrap();
        }
        for cut in [bytes.len(), bytes.len() - 30] {
            let mut d = SnapshotDecoder::new();
            let mut got = Vec::new();
            let mut buf = Vec::new();
            for b in &bytes[..cut] {
                buf.push(*b);
                while let Some((item, n)) = d.next(&buf).unwrap() {
                    got.push(item);
                    buf.drain(..n);
                }
            }
            if cut == bytes.len() {
                assert_eq!(got, items);
                assert!(d.is_done());
            } else {
                assert_eq!(got.len(), 8);
                assert!(d.finish().is_ok(), "no digest is fine");
            }
        }
        let mut d = SnapshotDecoder::new();
        let (i, n) = d.next(&bytes).unwrap().unwrap();
        assert_eq!((i, n), (SnapItem::SessionCount(1), 4));
        assert!(d.finish().is_err());
    }
}
