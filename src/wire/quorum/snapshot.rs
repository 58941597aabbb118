//! The raw snapshot a leader streams after a SNAP packet (reference `zab-learner-wire.md` §B.5),
//! walked in constant memory.

use super::packet::{MAX_BUFFER, out_of_range};
use crate::wire::error::{ErrorKind, WireError};

/// The jute string `"BenWasHere"` a leader writes after a streamed snapshot.
pub fn snapshot_signature() -> Vec<u8> {
    let mut b = (SNAPSHOT_SIGNATURE.len() as i32).to_be_bytes().to_vec();
    b.extend_from_slice(SNAPSHOT_SIGNATURE);
    b
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
    /// Stop at the `"/"` end marker (a snapshot file's body, followed by a seal, not the
    /// signature).
    body_only: bool,
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
            body_only: false,
        }
    }

    /// A walker of a snapshot body only: [`SnapshotWalker::feed`] consumes nothing after the
    /// `"/"` end marker (for a snapshot file, whose body is followed by its seal).
    pub fn body_only() -> Self {
        SnapshotWalker {
            body_only: true,
            ..Self::new()
        }
    }

    /// The `"/"` end marker has been read.
    pub fn is_body_done(&self) -> bool {
        self.body_done
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
        while i < input.len() && self.step != SnapStep::Done && !(self.body_only && self.body_done)
        {
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
