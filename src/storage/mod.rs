//! A follower's durable state in ZooKeeper's own layout, under `<dataDir>/version-2`:
//!
//! - `acceptedEpoch`, `currentEpoch`: ASCII decimal, no newline, replaced atomically
//!   (`name.tmp`, fsync, rename, fsync of the directory), as `QuorumPeer.writeLongToFile`.
//! - `log.<zxid>`: txn logs in `FileTxnLog`'s format ([`mod@format`]), preallocated in 64 MiB
//!   steps like Java's; a new file is started on the first append after opening, after a
//!   truncation and after a snapshot. ZooKeeper's `LogFormatter` and `TxnLogToolkit` read them.
//! - `snapshot.<zxid>`: a snapshot received by SNAP, stored as `FileSnap` writes one (header,
//!   the streamed body as-is, Adler-32 seal), written to `tmp.snapshot.<zxid>` first; and the
//!   follower's own snapshots of its data tree ([`db`], [`tree`]: loading, rolling,
//!   snapshotting and purging as Java does).
//!
//! Durability: [`Storage::append`] buffers; [`Storage::sync`] writes and `fdatasync`s (and
//! fsyncs the directory when a file was created). Epoch files, truncation and snapshot
//! installation are durable when their call returns. On open, a torn last entry of the newest
//! log (an append that was never synced, so never acknowledged) is cut off; any other damage
//! is an error.
//!
//! The last zxid is the larger of the newest valid snapshot's zxid and the last entry of the
//! logs. Installing a snapshot deletes every older log and snapshot after the new snapshot is
//! durable; a crash between the two leaves old logs beside the new snapshot, which only makes
//! us report history we did log (see docs/zab.md).

pub mod db;
pub mod format;
pub mod history;
pub mod staging;
pub mod tree;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use format::*;

/// Statistics of [`Storage::sync`] calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyncStats {
    pub syncs: u64,
    pub txns: u64,
    pub total: Duration,
    pub max: Duration,
}

struct LogWriter {
    file: File,
    /// Bytes written so far (the next entry's offset).
    pos: u64,
    /// Preallocated size.
    size: u64,
    new_file: bool,
}

struct SnapWriter {
    file: File,
    tmp: PathBuf,
    zxid: i64,
    adler: u32,
}

/// One log file found on disk.
#[derive(Debug, Clone)]
pub struct LogFileInfo {
    pub path: PathBuf,
    pub name_zxid: i64,
    /// (zxid, offset just past the entry) of every valid entry.
    pub entries: Vec<(i64, u64)>,
}

/// The durable state of a follower.
pub struct Storage {
    dir: PathBuf,
    accepted_epoch: i64,
    current_epoch: i64,
    last_zxid: i64,
    snapshot_zxid: Option<i64>,
    writer: Option<LogWriter>,
    buf: Vec<u8>,
    buf_txns: u64,
    snap: Option<SnapWriter>,
    stats: SyncStats,
    prealloc: u64,
    /// The data tree, its pending txns, snapshot and purge state (`db.rs`).
    db: db::Db,
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn read_i32(r: &mut impl Read) -> io::Result<Option<i32>> {
    let mut b = [0u8; 4];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(i32::from_be_bytes(b))),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// (zxid, offset just past the entry) of a log file's valid entries.
pub type LogEntries = Vec<(i64, u64)>;

/// Reads a log file's valid entries; the second value is the offset of a torn or corrupt
/// entry, if the file has one before its padding or end.
pub fn scan_log(path: &Path) -> io::Result<(LogEntries, Option<u64>)> {
    let mut r = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut hdr = [0u8; FILE_HEADER_LEN];
    if r.read_exact(&mut hdr).is_err() {
        return Ok((Vec::new(), Some(0)));
    }
    check_header(&hdr, TXNLOG_MAGIC).map_err(|e| corrupt(path, e))?;
    let mut pos = FILE_HEADER_LEN as u64;
    let mut entries = Vec::new();
    loop {
        let mut crc = [0u8; 8];
        match r.read_exact(&mut crc) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok((entries, None)),
            Err(e) => return Err(e),
        }
        let Some(len) = read_i32(&mut r)? else {
            return Ok((entries, Some(pos)));
        };
        if len == 0 && crc == [0; 8] {
            return Ok((entries, None)); // padding
        }
        if len < 32 || len as usize > crate::wire::quorum::MAX_BUFFER {
            return Ok((entries, Some(pos)));
        }
        let mut txn = vec![0u8; len as usize];
        if r.read_exact(&mut txn).is_err() {
            return Ok((entries, Some(pos)));
        }
        let mut eor = [0u8; 1];
        if r.read_exact(&mut eor).is_err() || eor[0] != EOR {
            return Ok((entries, Some(pos)));
        }
        if i64::from(adler32(1, &txn)) != i64::from_be_bytes(crc) {
            return Ok((entries, Some(pos)));
        }
        let zxid = i64::from_be_bytes(txn[12..20].try_into().unwrap_or([0; 8]));
        pos += 8 + 4 + len as u64 + 1;
        entries.push((zxid, pos));
    }
}

/// Whether a snapshot file ends with a seal (`FileSnap.isValidSnapshot`'s check) and has the
/// right header.
fn snapshot_looks_valid(path: &Path) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return false;
    };
    if len < (FILE_HEADER_LEN + 8 + 5) as u64 {
        return false;
    }
    let mut hdr = [0u8; FILE_HEADER_LEN];
    let mut tail = [0u8; 5];
    f.read_exact(&mut hdr).is_ok()
        && check_header(&hdr, SNAP_MAGIC).is_ok()
        && f.seek(SeekFrom::End(-5)).is_ok()
        && f.read_exact(&mut tail).is_ok()
        && tail == SEAL_TAIL
}

/// Writes one batch at `w.pos` (growing the preallocation first) and makes it durable.
fn write_batch(
    w: &mut LogWriter,
    buf: &[u8],
    end: u64,
    prealloc: u64,
    dir: &Path,
) -> io::Result<()> {
    while end + 4096 > w.size && prealloc > 0 {
        let n = padded_size(end, w.size, prealloc);
        if n == w.size {
            break;
        }
        w.file.write_at(&[0], n - 1)?;
        w.size = n;
    }
    w.file.write_all_at(buf, w.pos)?;
    w.file.sync_data()?;
    w.pos = end;
    if w.new_file {
        sync_dir(dir)?;
        w.new_file = false;
    }
    Ok(())
}

impl Storage {
    /// Opens (creating) `<data_dir>/version-2` and reads the state there.
    pub fn open(data_dir: &Path) -> io::Result<Storage> {
        let dir = data_dir.join("version-2");
        fs::create_dir_all(&dir)?;
        let mut s = Storage {
            dir,
            accepted_epoch: 0,
            current_epoch: 0,
            last_zxid: 0,
            snapshot_zxid: None,
            writer: None,
            buf: Vec::new(),
            buf_txns: 0,
            snap: None,
            stats: SyncStats::default(),
            prealloc: PREALLOC,
            db: db::Db::default(),
        };
        s.load()?;
        s.db_load()?;
        Ok(s)
    }

    /// Preallocation step for new log files (Java's `zookeeper.preAllocSize`).
    pub fn set_prealloc(&mut self, bytes: u64) {
        self.prealloc = bytes;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn load(&mut self) -> io::Result<()> {
        let mut snaps = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(z) = zxid_from_name(&name, "snapshot") {
                snaps.push(z);
            } else if name.starts_with("tmp.snapshot.") || name.ends_with(".tmp") {
                let _ = fs::remove_file(e.path());
            }
        }
        snaps.sort_unstable();
        self.snapshot_zxid = snaps
            .into_iter()
            .rev()
            .find(|z| snapshot_looks_valid(&self.dir.join(snapshot_name(*z))));
        let logs = self.logs()?;
        let mut last = self.snapshot_zxid.unwrap_or(0);
        let n = logs.len();
        for (i, l) in logs.iter().enumerate() {
            let (entries, torn) = scan_log(&l.path)?;
            if let Some(at) = torn {
                if i + 1 == n {
                    tracing::warn!(
                        "{}: cutting a torn entry at byte {at} (never synced, never acknowledged)",
                        l.path.display()
                    );
                    if at < FILE_HEADER_LEN as u64 {
                        fs::remove_file(&l.path)?;
                    } else {
                        let f = OpenOptions::new().write(true).open(&l.path)?;
                        f.set_len(at)?;
                        f.sync_all()?;
                    }
                } else {
                    return Err(corrupt(
                        &l.path,
                        format!("corrupt entry at byte {at} before the newest log"),
                    ));
                }
            }
            if let Some((z, _)) = entries.last() {
                last = last.max(*z);
            }
        }
        self.last_zxid = last;
        let from_zxid = (last >> 32) & 0xffff_ffff;
        self.current_epoch = match self.read_epoch("currentEpoch")? {
            Some(e) => e,
            None => {
                self.write_epoch("currentEpoch", from_zxid)?;
                from_zxid
            }
        };
        self.accepted_epoch = match self.read_epoch("acceptedEpoch")? {
            Some(e) => e,
            None => {
                self.write_epoch("acceptedEpoch", from_zxid)?;
                from_zxid
            }
        };
        if self.accepted_epoch < self.current_epoch {
            return Err(corrupt(
                &self.dir,
                format!(
                    "acceptedEpoch {} is less than currentEpoch {}",
                    self.accepted_epoch, self.current_epoch
                ),
            ));
        }
        Ok(())
    }

    /// The log files, oldest first, with their entries.
    pub fn logs(&self) -> io::Result<Vec<LogFileInfo>> {
        let mut logs = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(z) = zxid_from_name(&name, "log") {
                logs.push(LogFileInfo {
                    path: e.path(),
                    name_zxid: z,
                    entries: Vec::new(),
                });
            }
        }
        logs.sort_by_key(|l| l.name_zxid);
        for l in &mut logs {
            l.entries = scan_log(&l.path)?.0;
        }
        Ok(logs)
    }

    fn read_epoch(&self, name: &str) -> io::Result<Option<i64>> {
        let p = self.dir.join(name);
        match fs::read_to_string(&p) {
            Ok(t) => t
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| corrupt(&p, format!("not a number: {t:?}"))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_epoch(&self, name: &str, v: i64) -> io::Result<()> {
        let tmp = self.dir.join(format!("{name}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(v.to_string().as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.dir.join(name))?;
        sync_dir(&self.dir)
    }

    pub fn accepted_epoch(&self) -> i64 {
        self.accepted_epoch
    }

    pub fn current_epoch(&self) -> i64 {
        self.current_epoch
    }

    /// The last zxid logged (appended, synced or not) or covered by the snapshot.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    pub fn snapshot_zxid(&self) -> Option<i64> {
        self.snapshot_zxid
    }

    pub fn stats(&self) -> SyncStats {
        self.stats
    }

    /// Durably sets `acceptedEpoch`.
    pub fn set_accepted_epoch(&mut self, e: i64) -> io::Result<()> {
        self.write_epoch("acceptedEpoch", e)?;
        self.accepted_epoch = e;
        Ok(())
    }

    /// Durably sets `currentEpoch`.
    pub fn set_current_epoch(&mut self, e: i64) -> io::Result<()> {
        self.write_epoch("currentEpoch", e)?;
        self.current_epoch = e;
        Ok(())
    }

    /// Buffers one txn (a PROPOSAL's data, whose TxnHeader zxid is `zxid`); durable after
    /// [`Storage::sync`].
    pub fn append(&mut self, zxid: i64, txn: &[u8]) -> io::Result<()> {
        if self.writer.is_none() {
            let path = self.dir.join(log_name(zxid));
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            if let Err(e) = file.write_all(&file_header(TXNLOG_MAGIC, LOG_DBID)) {
                let _ = fs::remove_file(&path);
                return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
            }
            self.writer = Some(LogWriter {
                file,
                pos: FILE_HEADER_LEN as u64,
                size: FILE_HEADER_LEN as u64,
                new_file: true,
            });
        }
        self.buf.extend_from_slice(&log_entry(txn));
        self.buf_txns += 1;
        self.last_zxid = self.last_zxid.max(zxid);
        self.db_on_append(zxid, txn)
    }

    /// Writes what [`Storage::append`] buffered and makes it durable. Returns the time taken.
    pub fn sync(&mut self) -> io::Result<Duration> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(Duration::ZERO);
        };
        if self.buf.is_empty() && !w.new_file {
            return Ok(Duration::ZERO);
        }
        let t = Instant::now();
        let end = w.pos + self.buf.len() as u64;
        if let Err(e) = write_batch(w, &self.buf, end, self.prealloc, &self.dir) {
            return Err(self.cut_failed_batch(e));
        }
        let took = t.elapsed();
        self.stats.syncs += 1;
        self.stats.txns += self.buf_txns;
        self.stats.total += took;
        self.stats.max = self.stats.max.max(took);
        self.buf.clear();
        self.buf_txns = 0;
        self.db_after_sync()?;
        Ok(took)
    }

    /// A batch could not be written or synced (a full disk, a file-size limit, an I/O error):
    /// part of it may be in the file. Cuts the log back to its last durable entry (shrinking
    /// needs no space), forgets the batch (never acknowledged) and re-reads the state, so the
    /// log stays one that Java and zkfle read, and the next append starts a new file.
    fn cut_failed_batch(&mut self, e: io::Error) -> io::Error {
        let failed = self.writer.as_ref().map(|w| (w.pos, w.file.try_clone()));
        self.writer = None;
        self.buf.clear();
        self.buf_txns = 0;
        let mut what = format!("writing the txn log in {}: {e}", self.dir.display());
        if let Some((pos, Ok(f))) = failed
            && let Err(cut) = f.set_len(pos).and_then(|_| f.sync_all())
        {
            what.push_str(&format!(
                "; cutting it back to byte {pos} failed too ({cut}): the torn entry is cut on the next start"
            ));
        }
        // The data tree too: the failed batch's txns must not reach it (db.rs).
        if let Err(reload) = self.load().and_then(|_| self.db_load()) {
            what.push_str(&format!("; re-reading the data directory: {reload}"));
        }
        io::Error::new(e.kind(), what)
    }

    /// Drops every logged txn with a zxid above `zxid` (TRUNC), durably. Snapshots above it
    /// are deleted too.
    ///
    /// Truncating below the installed snapshot is refused (as Java's `FileTxnSnapLog.truncateLog`
    /// fails and the follower exits): the logs older than the snapshot were deleted when it was
    /// installed, so the history up to `zxid` cannot be rebuilt, and claiming it would be a lie.
    pub fn truncate(&mut self, zxid: i64) -> io::Result<()> {
        if let Some(s) = self.snapshot_zxid
            && zxid < s
        {
            return Err(io::Error::other(format!(
                "cannot truncate to 0x{zxid:x}: below the snapshot of 0x{s:x}"
            )));
        }
        self.sync()?;
        self.db_wait_snapshot();
        self.writer = None;
        for l in self.logs()? {
            let keep = l.entries.iter().take_while(|(z, _)| *z <= zxid).last();
            match keep {
                _ if l.entries.first().is_none_or(|(z, _)| *z > zxid) => {
                    fs::remove_file(&l.path)?;
                }
                Some((_, end)) if l.entries.last().is_some_and(|(z, _)| *z > zxid) => {
                    let f = OpenOptions::new().write(true).open(&l.path)?;
                    f.set_len(*end)?;
                    f.sync_all()?;
                }
                _ => {}
            }
        }
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            if zxid_from_name(&e.file_name().to_string_lossy(), "snapshot")
                .is_some_and(|z| z > zxid)
            {
                fs::remove_file(e.path())?;
            }
        }
        sync_dir(&self.dir)?;
        self.load()?;
        self.db_load()
    }

    /// Starts receiving a snapshot of the state at `zxid`.
    pub fn begin_snapshot(&mut self, zxid: i64) -> io::Result<()> {
        self.db_wait_snapshot();
        let tmp = self.dir.join(format!("tmp.{}", snapshot_name(zxid)));
        let mut file = File::create(&tmp)?;
        let hdr = file_header(SNAP_MAGIC, SNAP_DBID);
        file.write_all(&hdr)?;
        self.snap = Some(SnapWriter {
            file,
            tmp,
            zxid,
            adler: adler32(1, &hdr),
        });
        Ok(())
    }

    /// Body bytes of the snapshot being received.
    pub fn snapshot_data(&mut self, bytes: &[u8]) -> io::Result<()> {
        let s = self
            .snap
            .as_mut()
            .ok_or_else(|| io::Error::other("snapshot data without a snapshot"))?;
        s.adler = adler32(s.adler, bytes);
        s.file
            .write_all(bytes)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", s.tmp.display())))
    }

    /// Seals, syncs and installs the received snapshot, then deletes the older history.
    ///
    /// `max_stat_zxid` is the largest zxid in the snapshot's node stats. A snapshot taken at an
    /// epoch's start (`e<<32`: the leader had processed no txn of epoch e, it only set its
    /// counter) holds the state after the last txn of an earlier epoch, which Java followers
    /// synced by DIFF report as their last zxid; so such a snapshot is installed under the
    /// largest zxid it shows instead, lest zkfle's vote look ahead of Java servers that hold
    /// the same data (zkfle cannot lead).
    pub fn finish_snapshot(&mut self, max_stat_zxid: i64) -> io::Result<()> {
        let mut s = self
            .snap
            .take()
            .ok_or_else(|| io::Error::other("no snapshot in progress"))?;
        if s.zxid & 0xffff_ffff == 0 {
            s.zxid = s.zxid.min(max_stat_zxid.max(0));
        }
        let sealed = s
            .file
            .write_all(&i64::from(s.adler).to_be_bytes())
            .and_then(|_| s.file.write_all(&SEAL_TAIL))
            .and_then(|_| s.file.sync_all());
        drop(s.file);
        let name = snapshot_name(s.zxid);
        if let Err(e) = sealed.and_then(|_| fs::rename(&s.tmp, self.dir.join(&name))) {
            // A full disk, say: the unsealed file must not stay (nor be taken for a snapshot).
            let _ = fs::remove_file(&s.tmp);
            return Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", s.tmp.display()),
            ));
        }
        sync_dir(&self.dir)?;
        self.writer = None;
        self.buf.clear();
        self.buf_txns = 0;
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let n = e.file_name().to_string_lossy().into_owned();
            if zxid_from_name(&n, "log").is_some()
                || (zxid_from_name(&n, "snapshot").is_some() && n != name)
            {
                fs::remove_file(e.path())?;
            }
        }
        sync_dir(&self.dir)?;
        self.snapshot_zxid = Some(s.zxid);
        self.last_zxid = s.zxid;
        self.db_load()
    }

    /// Forgets a snapshot being received.
    pub fn abort_snapshot(&mut self) {
        if let Some(s) = self.snap.take() {
            let _ = fs::remove_file(&s.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(zxid: i64, fill: u8) -> Vec<u8> {
        let h = crate::wire::quorum::TxnHeader {
            client_id: 1,
            cxid: 2,
            zxid,
            time: 3,
            op: 1,
        };
        let mut t = h.encode().to_vec();
        t.extend([fill; 20]);
        t
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("zkfle-storage-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn append_sync_reopen_truncate() {
        let d = tmp("basic");
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(1 << 16);
        assert_eq!(
            (s.accepted_epoch(), s.current_epoch(), s.last_zxid()),
            (0, 0, 0)
        );
        s.set_accepted_epoch(1).unwrap();
        s.set_current_epoch(1).unwrap();
        for i in 1..=5 {
            s.append(0x1_0000_0000 + i, &txn(0x1_0000_0000 + i, i as u8))
                .unwrap();
        }
        s.sync().unwrap();
        drop(s);
        assert_eq!(
            fs::read_to_string(d.join("version-2/currentEpoch")).unwrap(),
            "1"
        );
        let mut s = Storage::open(&d).unwrap();
        assert_eq!(s.last_zxid(), 0x1_0000_0005);
        s.append(0x1_0000_0006, &txn(0x1_0000_0006, 6)).unwrap();
        s.sync().unwrap();
        assert_eq!(s.logs().unwrap().len(), 2);
        s.truncate(0x1_0000_0003).unwrap();
        assert_eq!(s.last_zxid(), 0x1_0000_0003);
        assert_eq!(s.logs().unwrap().len(), 1);
        drop(s);
        assert_eq!(Storage::open(&d).unwrap().last_zxid(), 0x1_0000_0003);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn torn_tail_is_cut() {
        let d = tmp("torn");
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(0);
        s.append(0x1_0000_0001, &txn(0x1_0000_0001, 1)).unwrap();
        s.append(0x1_0000_0002, &txn(0x1_0000_0002, 2)).unwrap();
        s.sync().unwrap();
        drop(s);
        let log = d.join("version-2/log.100000001");
        let len = fs::metadata(&log).unwrap().len();
        let f = OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(len - 3).unwrap();
        let s = Storage::open(&d).unwrap();
        assert_eq!(s.last_zxid(), 0x1_0000_0001);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn snapshot_install_replaces_history() {
        let d = tmp("snap");
        let mut s = Storage::open(&d).unwrap();
        s.append(0x1_0000_0001, &txn(0x1_0000_0001, 1)).unwrap();
        s.sync().unwrap();
        s.begin_snapshot(0x2_0000_0005).unwrap();
        tree::DataTree::new()
            .snapshot()
            .write_body(&mut |b| s.snapshot_data(b))
            .unwrap();
        s.finish_snapshot(0x2_0000_0005).unwrap();
        assert!(s.logs().unwrap().is_empty());
        drop(s);
        let s = Storage::open(&d).unwrap();
        assert_eq!(s.snapshot_zxid(), Some(0x2_0000_0005));
        assert_eq!(s.last_zxid(), 0x2_0000_0005);
        drop(s);
        let mut s = Storage::open(&d).unwrap();
        s.append(0x2_0000_0006, &txn(0x2_0000_0006, 6)).unwrap();
        s.sync().unwrap();
        assert!(s.truncate(0x2_0000_0004).is_err());
        assert_eq!(s.last_zxid(), 0x2_0000_0006);
        s.truncate(0x2_0000_0005).unwrap();
        assert_eq!(s.last_zxid(), 0x2_0000_0005);
        assert_eq!(s.snapshot_zxid(), Some(0x2_0000_0005));
        fs::remove_dir_all(&d).unwrap();
    }
}
