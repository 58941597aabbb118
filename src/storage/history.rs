//! What a leader reads back from the durable state to bring a learner up to date: the zxids
//! of the logged txns after the newest snapshot, where each one is, its bytes, and the newest
//! snapshot file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::Storage;
use super::format::{FILE_HEADER_LEN, snapshot_name};

/// One logged txn: its zxid and where its entry starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnAt {
    pub zxid: i64,
    /// Index into [`History::files`].
    pub file: u32,
    /// Offset of the entry (`adler32, length, txn, 'B'`) in that file.
    pub offset: u64,
}

/// The history a leader can send from.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The newest valid snapshot: its zxid and path.
    pub snapshot: Option<(i64, PathBuf)>,
    /// The log files the txns are in.
    pub files: Vec<PathBuf>,
    /// Every logged txn after the snapshot, in zxid order.
    pub txns: Vec<TxnAt>,
}

impl History {
    /// The zxid the history starts from: the snapshot's, or 0 (the empty tree) without one.
    pub fn base(&self) -> i64 {
        self.snapshot.as_ref().map_or(0, |(z, _)| *z)
    }

    /// The last zxid: the last logged txn's, else the base.
    pub fn last_zxid(&self) -> i64 {
        self.txns.last().map_or(self.base(), |t| t.zxid)
    }

    /// The bytes of one logged txn (a PROPOSAL's data).
    pub fn read_txn(&self, at: &TxnAt) -> io::Result<Vec<u8>> {
        let path = &self.files[at.file as usize];
        let mut f = File::open(path)?;
        f.seek(SeekFrom::Start(at.offset + 8))?;
        let mut len = [0u8; 4];
        f.read_exact(&mut len)?;
        let len = i32::from_be_bytes(len);
        if len < 32 || len as usize > crate::wire::quorum::MAX_BUFFER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: bad txn length {len} at byte {}",
                    path.display(),
                    at.offset + 8
                ),
            ));
        }
        let mut txn = vec![0u8; len as usize];
        f.read_exact(&mut txn)?;
        Ok(txn)
    }
}

impl Storage {
    /// Reads the history a leader sends from (the log is scanned, nothing is held but zxids
    /// and offsets). Call with nothing buffered (after [`Storage::sync`]).
    pub fn history(&self) -> io::Result<History> {
        let snapshot = self
            .snapshot_zxid()
            .map(|z| (z, self.dir().join(snapshot_name(z))));
        let base = snapshot.as_ref().map_or(0, |(z, _)| *z);
        let mut h = History {
            snapshot,
            ..History::default()
        };
        let mut last = base;
        for l in self.logs()? {
            let idx = h.files.len() as u32;
            let mut start = FILE_HEADER_LEN as u64;
            let mut used = false;
            for (zxid, end) in &l.entries {
                // Old logs beside a newer snapshot (a crash window) hold nothing new.
                if *zxid > last {
                    h.txns.push(TxnAt {
                        zxid: *zxid,
                        file: idx,
                        offset: start,
                    });
                    last = *zxid;
                    used = true;
                }
                start = *end;
            }
            if used {
                h.files.push(l.path);
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_reads_back_what_was_logged() {
        let d = std::env::temp_dir().join(format!("zkfle-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(0);
        let txn = |z: i64| {
            let mut t = crate::wire::quorum::TxnHeader {
                client_id: 1,
                cxid: 2,
                zxid: z,
                time: 3,
                op: 1,
            }
            .encode()
            .to_vec();
            t.extend([z as u8; 7]);
            t
        };
        for z in 1..=3 {
            s.append(0x1_0000_0000 + z, &txn(0x1_0000_0000 + z))
                .unwrap();
        }
        s.sync().unwrap();
        drop(s);
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(0);
        s.append(0x2_0000_0001, &txn(0x2_0000_0001)).unwrap();
        s.sync().unwrap();
        let h = s.history().unwrap();
        assert_eq!(h.base(), 0);
        assert_eq!(h.files.len(), 2);
        let zs: Vec<i64> = h.txns.iter().map(|t| t.zxid).collect();
        assert_eq!(
            zs,
            [0x1_0000_0001, 0x1_0000_0002, 0x1_0000_0003, 0x2_0000_0001]
        );
        for t in &h.txns {
            assert_eq!(h.read_txn(t).unwrap(), txn(t.zxid));
        }
        assert_eq!(h.last_zxid(), 0x2_0000_0001);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
