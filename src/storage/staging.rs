//! The proposals of a DIFF, kept on disk between the DIFF and NEWLEADER.
//!
//! A follower logs a DIFF's proposals only when NEWLEADER arrives (3.8.5+/3.9 order; before
//! that they are not part of the history it acknowledges). Java holds them in memory, so a
//! leader can make it hold any amount; zkfle writes them to `version-2/sync.staging.tmp`
//! (not a ZooKeeper file; `*.tmp` files are removed on open) and streams them into the log at
//! NEWLEADER, so memory stays bounded whatever the DIFF's size. The file is transient: it is
//! neither fsynced nor kept after the session.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::Storage;

/// Write the log (and fsync it) after this many staged bytes while appending them, so the
/// log's own buffer stays small.
const APPEND_BATCH: usize = 4 << 20;

/// A session's staged sync proposals: `[zxid i64][len i32][txn]` records.
pub struct Staging {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    count: u64,
}

impl Staging {
    /// Staging in `dir` (a storage's `version-2`); the file is created on the first proposal.
    pub fn new(dir: &Path) -> Staging {
        Staging {
            path: dir.join("sync.staging.tmp"),
            out: None,
            count: 0,
        }
    }

    fn err(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.path.display()))
    }

    /// Keeps one proposal aside.
    pub fn stage(&mut self, zxid: i64, txn: &[u8]) -> io::Result<()> {
        if self.out.is_none() {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&self.path)
                .map_err(|e| self.err(e))?;
            self.out = Some(BufWriter::with_capacity(1 << 16, f));
        }
        let len = i32::try_from(txn.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "txn too large"))?;
        let out = self.out.as_mut().expect("opened above");
        let r = out
            .write_all(&zxid.to_be_bytes())
            .and_then(|_| out.write_all(&len.to_be_bytes()))
            .and_then(|_| out.write_all(txn));
        r.map_err(|e| self.err(e))?;
        self.count += 1;
        Ok(())
    }

    /// Appends every staged proposal above the storage's last zxid to its log, durably, then
    /// removes the staging file. Returns how many were appended.
    pub fn append_to(&mut self, storage: &mut Storage, skip: &[i64]) -> io::Result<u64> {
        let Some(out) = self.out.take() else {
            return Ok(0);
        };
        let mut f = out.into_inner().map_err(|e| self.err(e.into_error()))?;
        f.seek(SeekFrom::Start(0)).map_err(|e| self.err(e))?;
        let mut r = BufReader::with_capacity(1 << 16, f);
        let mut appended = 0;
        let mut pending = 0usize;
        let mut txn = Vec::new();
        for _ in 0..self.count {
            let mut head = [0u8; 12];
            r.read_exact(&mut head).map_err(|e| self.err(e))?;
            let zxid = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
            let len = i32::from_be_bytes(head[8..].try_into().expect("4 bytes"));
            txn.resize(usize::try_from(len).unwrap_or(0), 0);
            r.read_exact(&mut txn).map_err(|e| self.err(e))?;
            if zxid > storage.last_zxid() && !skip.contains(&zxid) {
                storage.append(zxid, &txn)?;
                appended += 1;
                pending += txn.len();
                if pending >= APPEND_BATCH {
                    storage.sync()?;
                    pending = 0;
                }
            }
        }
        storage.sync()?;
        self.discard();
        Ok(appended)
    }

    /// Forgets the staged proposals (the session ended before NEWLEADER).
    pub fn discard(&mut self) {
        self.out = None;
        self.count = 0;
        let _ = fs::remove_file(&self.path);
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.discard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(zxid: i64) -> Vec<u8> {
        let h = crate::wire::quorum::TxnHeader {
            client_id: 1,
            cxid: 2,
            zxid,
            time: 3,
            op: 1,
        };
        let mut t = h.encode().to_vec();
        t.extend([7u8; 100]);
        t
    }

    #[test]
    fn staged_proposals_reach_the_log_once_and_the_file_goes() {
        let d = std::env::temp_dir().join(format!("zkfle-staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(1 << 16);
        s.append(0x1_0000_0001, &txn(0x1_0000_0001)).unwrap();
        s.sync().unwrap();
        let mut st = Staging::new(s.dir());
        for z in 1..=50 {
            st.stage(0x1_0000_0000 | z, &txn(0x1_0000_0000 | z))
                .unwrap();
        }
        assert!(s.dir().join("sync.staging.tmp").exists());
        assert_eq!(
            st.append_to(&mut s, &[]).unwrap(),
            49,
            "the first was logged already"
        );
        assert!(!s.dir().join("sync.staging.tmp").exists());
        drop(s);
        let s = Storage::open(&d).unwrap();
        assert_eq!(s.last_zxid(), 0x1_0000_0032);
        let zxids: Vec<i64> = s
            .logs()
            .unwrap()
            .iter()
            .flat_map(|l| l.entries.iter().map(|(z, _)| *z))
            .collect();
        assert_eq!(
            zxids,
            (1..=50).map(|z| 0x1_0000_0000 | z).collect::<Vec<_>>()
        );
        let _ = fs::remove_dir_all(&d);
    }
}
