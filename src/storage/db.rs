//! The data tree beside the log (Java's `ZKDatabase` with `SyncRequestProcessor`'s snapshot
//! rule and `DatadirCleanupManager`'s purge), as more `impl Storage`:
//!
//! - **Restore** ([`Storage::open`], after TRUNC, after SNAP): the newest snapshot that reads
//!   whole (seals checked), then every logged txn above it (`FileTxnSnapLog.restore`). A new,
//!   empty data directory gets `snapshot.0` at once, as Java writes it.
//! - **Apply**: appended txns wait in memory until the leader's COMMIT ([`Storage::commit`]),
//!   then are applied to the tree in order; when a follow session ends, every logged txn is
//!   applied ([`Storage::fast_forward`], Java's `fastForwardDataBase`).
//! - **Roll and snapshot**: after each append, when the appends since the last roll pass
//!   `snapCount/2 + randRoll` or the log's (preallocated) size passes `snapSizeLimitInKb/2 +
//!   randSize`, the next append starts a new log and the tree is written to
//!   `snapshot.<lastProcessedZxid>` on a background thread (skipped if one is still running,
//!   "Too busy to snap"). The tree is a persistent map: the thread writes a frozen O(1) copy
//!   of it while the follower goes on applying and acknowledging.
//! - **Purge** (`autopurge.purgeInterval` > 0): at open and then every interval, keep the
//!   `autopurge.snapRetainCount` newest valid snapshots and the logs they need
//!   (`PurgeTxnLog.purge`).

use crate::throttle::{LogThrottle, suppressed};
use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::format::*;
use super::tree::{DataTree, TreeBuilder, TreeSnapshot};
use super::{Storage, snapshot_looks_valid, sync_dir};
use crate::wire::txn::{SnapItem, SnapshotDecoder, decode_txn};

/// `ZooKeeperServer.DEFAULT_SNAP_COUNT`.
pub const DEFAULT_SNAP_COUNT: i64 = 100_000;
/// `zookeeper.snapSizeLimitInKb` default: 4 GiB.
pub const DEFAULT_SNAP_SIZE_KB: i64 = 4_194_304;
/// `PurgeTxnLog`'s minimum (and `autopurge.snapRetainCount`'s default).
pub const MIN_SNAP_RETAIN: usize = 3;
/// Proposals logged but not yet committed that a follower keeps in memory (bytes). A leader
/// that leaves more than this uncommitted ends the session.
pub const MAX_PENDING_BYTES: usize = 256 << 20;
/// What one waiting proposal costs beside its bytes (its slot in the queue and its
/// allocation's header), charged against [`MAX_PENDING_BYTES`]: without it, a leader sending
/// millions of tiny proposals held 2.6 times the limit.
const PENDING_ENTRY_COST: usize = 64;

/// What a waiting proposal of these bytes is charged against [`MAX_PENDING_BYTES`].
fn pending_cost(txn: &[u8]) -> usize {
    txn.len() + PENDING_ENTRY_COST
}

/// When to snapshot and purge, from zoo.cfg and Java's system properties.
#[derive(Debug, Clone)]
pub struct SnapConfig {
    /// `zookeeper.snapCount` (at least 2).
    pub snap_count: i64,
    /// `zookeeper.snapSizeLimitInKb` in bytes; 0 or less turns the size rule off.
    pub snap_size_bytes: i64,
    /// `autopurge.snapRetainCount` (at least 3).
    pub retain: usize,
    /// `autopurge.purgeInterval`; None = no purging.
    pub purge_every: Option<Duration>,
    /// The quorum config text and version written into `/zookeeper/config` after every load
    /// (`initConfigInZKDatabase`).
    pub config_node: Option<(Vec<u8>, i64)>,
    /// No `/zookeeper/config` at all: a 3.4 member's tree (3.5 added the node).
    pub no_config_node: bool,
}

impl Default for SnapConfig {
    fn default() -> Self {
        SnapConfig {
            snap_count: DEFAULT_SNAP_COUNT,
            snap_size_bytes: DEFAULT_SNAP_SIZE_KB * 1024,
            retain: MIN_SNAP_RETAIN,
            purge_every: None,
            config_node: None,
            no_config_node: false,
        }
    }
}

/// What a finished background snapshot reports.
type SnapResult = io::Result<(i64, Duration, u64)>;

/// The tree and its bookkeeping, kept inside [`Storage`].
pub(super) struct Db {
    pub(super) tree: DataTree,
    cfg: SnapConfig,
    /// Logged txns not yet applied (not committed yet), oldest first.
    pending: VecDeque<(i64, Vec<u8>)>,
    pending_bytes: usize,
    /// The highest COMMIT seen this session.
    committed: i64,
    /// Appends since the last roll (`ZKDatabase.txnCount`).
    txn_count: i64,
    rand_roll: i64,
    rand_size: i64,
    roll_after_sync: bool,
    rng: u64,
    snap_thread: Option<JoinHandle<SnapResult>>,
    next_purge: Option<Instant>,
    /// Snapshots taken and skipped, for the log.
    pub(super) snapshots_taken: u64,
    pub(super) snapshots_skipped: u64,
    /// Txns a leader sent that do not decode are warned about at a bounded rate.
    unreadable: LogThrottle,
}

impl Default for Db {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ u64::from(std::process::id()) << 32;
        let mut db = Db {
            tree: DataTree::new(),
            cfg: SnapConfig::default(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            committed: 0,
            txn_count: 0,
            rand_roll: 0,
            rand_size: 0,
            roll_after_sync: false,
            rng: seed | 1,
            snap_thread: None,
            next_purge: None,
            snapshots_taken: 0,
            snapshots_skipped: 0,
            unreadable: LogThrottle::new(),
        };
        db.reset_snapshot_stats();
        db
    }
}

impl Db {
    fn next_rand(&mut self) -> u64 {
        // xorshift64: only spreads the snapshot points of servers apart, as Java's
        // ThreadLocalRandom does.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// `SyncRequestProcessor.resetSnapshotStats`.
    fn reset_snapshot_stats(&mut self) {
        let half = (self.cfg.snap_count / 2).max(1) as u64;
        self.rand_roll = (self.next_rand() % half) as i64;
        let half_size = (self.cfg.snap_size_bytes / 2).max(1) as u64;
        self.rand_size = (self.next_rand() % half_size) as i64;
    }

    fn apply_committed(&mut self) {
        while let Some((z, _)) = self.pending.front() {
            if *z > self.committed {
                break;
            }
            let Some((z, txn)) = self.pending.pop_front() else {
                break;
            };
            self.pending_bytes -= pending_cost(&txn);
            apply(&mut self.tree, z, &txn, &mut self.unreadable);
        }
    }
}

fn apply(tree: &mut DataTree, zxid: i64, txn: &[u8], unreadable: &mut LogThrottle) {
    match decode_txn(txn) {
        Ok(t) => {
            let rc = tree.process(&t);
            if rc != 0 {
                tracing::debug!("Ignoring processTxn failure 0x{zxid:x}: error {rc}");
            }
        }
        Err(e) => {
            // The learner checked the header; a record Java could not read either.
            // A leader can send millions of them: one line each would fill a disk.
            if let Some(left_out) = unreadable.allow("unreadable txn", now_ms().max(0) as u64) {
                tracing::warn!(
                    "txn 0x{zxid:x} not applied to the data tree: {e}{}",
                    suppressed(left_out)
                );
            }
            tree.last_processed_zxid = tree.last_processed_zxid.max(zxid);
        }
    }
}

/// Calls `f(zxid, txn)` for every valid entry of a log file, in order; stops at padding, the
/// end, or a torn entry (which [`Storage::open`] has already cut from the newest log).
pub fn for_each_log_entry(path: &Path, mut f: impl FnMut(i64, &[u8])) -> io::Result<()> {
    let mut r = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut hdr = [0u8; FILE_HEADER_LEN];
    if r.read_exact(&mut hdr).is_err() {
        return Ok(());
    }
    check_header(&hdr, TXNLOG_MAGIC).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })?;
    let mut txn = Vec::new();
    loop {
        let mut head = [0u8; 12];
        if r.read_exact(&mut head).is_err() {
            return Ok(());
        }
        let crc = i64::from_be_bytes(head[..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(head[8..].try_into().unwrap_or_default());
        if len < 32 || len as usize > crate::wire::quorum::MAX_BUFFER {
            return Ok(());
        }
        txn.resize(len as usize, 0);
        let mut eor = [0u8; 1];
        if r.read_exact(&mut txn).is_err()
            || r.read_exact(&mut eor).is_err()
            || eor[0] != EOR
            || i64::from(adler32(1, &txn)) != crc
        {
            return Ok(());
        }
        let zxid = i64::from_be_bytes(txn[12..20].try_into().unwrap_or_default());
        f(zxid, &txn);
    }
}

/// Reads a snapshot file into a tree (`FileSnap.deserialize`): header, body, seal, and the
/// digest with its seal when present. Returns the tree and the digest (zxid, value) the file
/// holds.
pub fn read_snapshot(path: &Path) -> io::Result<(DataTree, Option<(i64, i64)>)> {
    let bad = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    let mut f = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut hdr = [0u8; FILE_HEADER_LEN];
    f.read_exact(&mut hdr)?;
    check_header(&hdr, SNAP_MAGIC).map_err(|e| bad(e.to_string()))?;
    let mut adler = adler32(1, &hdr);
    let mut dec = SnapshotDecoder::new();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut start = 0usize;
    let mut eof = false;
    let mut builder = TreeBuilder::new();
    let mut seals = 0;
    loop {
        match dec.next(&buf[start..]).map_err(|e| bad(e.to_string()))? {
            Some((item, n)) => {
                if let SnapItem::Seal(v) = item {
                    if v != i64::from(adler) {
                        return Err(bad(format!(
                            "seal {seals} checksum {v:x} does not match {adler:x}"
                        )));
                    }
                    seals += 1;
                }
                adler = adler32(adler, &buf[start..start + n]);
                start += n;
                builder.push(item).map_err(bad)?;
                if dec.is_done() {
                    break;
                }
            }
            None if eof => {
                dec.finish().map_err(|e| bad(e.to_string()))?;
                break;
            }
            None => {
                buf.drain(..start);
                start = 0;
                let old = buf.len();
                buf.resize(old + (1 << 16), 0);
                let n = f.read(&mut buf[old..])?;
                buf.truncate(old + n);
                eof = n == 0;
            }
        }
    }
    builder.finish().map_err(bad)
}

/// Writes `snap` as `snapshot.<zxid>` in `dir` (via `tmp.snapshot.<zxid>`, fsynced, renamed):
/// header, body, seal, digest, seal, as Java 3.6+ writes it.
pub fn write_snapshot(dir: &Path, snap: &TreeSnapshot) -> io::Result<(PathBuf, u64)> {
    struct Checked {
        w: BufWriter<File>,
        adler: u32,
        size: u64,
    }
    impl Checked {
        fn put(&mut self, b: &[u8]) -> io::Result<()> {
            self.adler = adler32(self.adler, b);
            self.size += b.len() as u64;
            self.w.write_all(b)
        }
        fn item(&mut self, item: &SnapItem) -> io::Result<()> {
            let mut b = Vec::new();
            crate::wire::txn::encode_snap_item(&mut b, item)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            self.put(&b)
        }
        fn seal(&mut self) -> io::Result<()> {
            self.item(&SnapItem::Seal(i64::from(self.adler)))
        }
    }
    let name = snapshot_name(snap.zxid());
    let tmp = dir.join(format!("tmp.{name}"));
    let mut c = Checked {
        w: BufWriter::with_capacity(1 << 17, File::create(&tmp)?),
        adler: 1,
        size: 0,
    };
    c.put(&file_header(SNAP_MAGIC, SNAP_DBID))?;
    snap.write_body(&mut |b| c.put(b))?;
    c.seal()?;
    c.item(&SnapItem::Digest {
        zxid: snap.zxid,
        version: super::tree::DIGEST_VERSION,
        digest: snap.digest,
    })?;
    c.seal()?;
    let size = c.size;
    let file = c.w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    let path = dir.join(&name);
    fs::rename(&tmp, &path)?;
    sync_dir(dir)?;
    Ok((path, size))
}

/// The log files of a `version-2` directory by their first zxid.
fn logs_sorted(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut logs = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        if let Some(z) = zxid_from_name(&e.file_name().to_string_lossy(), "log") {
            logs.push((z, e.path()));
        }
    }
    logs.sort();
    Ok(logs)
}

/// A data tree as a data directory's files give it ([`load_tree`]).
pub struct Loaded {
    pub tree: DataTree,
    /// The zxid of the snapshot it started from (0 without one).
    pub from: i64,
    /// Txns applied from the logs after it.
    pub txns: u64,
    /// Snapshot and log files found.
    pub snapshots: usize,
    pub logs: usize,
}

/// Builds the data tree of a `version-2` directory as Java's `FileTxnSnapLog.restore` does:
/// the newest readable snapshot, then every logged txn after it. Reads only: it can look at
/// the directory of a member still running (a torn last entry ends its log, as
/// [`for_each_log_entry`] stops there).
pub fn load_tree(dir: &Path) -> io::Result<Loaded> {
    let mut snaps: Vec<i64> = Vec::new();
    for e in fs::read_dir(dir)? {
        if let Some(z) = zxid_from_name(&e?.file_name().to_string_lossy(), "snapshot") {
            snaps.push(z);
        }
    }
    snaps.sort_unstable_by(|a, b| b.cmp(a));
    let mut tree = None;
    let mut unreadable = Vec::new();
    for z in snaps.iter().take(100) {
        let p = dir.join(snapshot_name(*z));
        if !snapshot_looks_valid(&p) {
            continue;
        }
        match read_snapshot(&p) {
            Ok((mut t, digest)) => {
                t.last_processed_zxid = *z;
                // A digest written at zxid 0 (a fresh tree's snapshot.0, which carries
                // digest 0 as Java writes it) is not compared, as Java's
                // `deserializeZxidDigest` ignores it.
                if let Some((dz, d)) = digest
                    && dz > 0
                    && dz == *z
                    && d != t.digest()
                {
                    tracing::warn!(
                        "{}: digest {d} in the snapshot, {} computed",
                        p.display(),
                        t.digest()
                    );
                }
                tree = Some(t);
                break;
            }
            Err(e) => {
                tracing::warn!("problem reading snap file {}: {e}", p.display());
                unreadable.push(e.to_string());
            }
        }
    }
    if tree.is_none() && !unreadable.is_empty() {
        // FileSnap.deserialize: "Not able to find valid snapshots".
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: not able to find a valid snapshot: {}",
                dir.display(),
                unreadable.join("; ")
            ),
        ));
    }
    let logs = logs_sorted(dir)?;
    let mut tree = match tree {
        Some(t) => t,
        None => {
            if !logs.is_empty() {
                tracing::warn!(
                    "{}: no readable snapshot, but there are log entries: building the tree from an empty one and the logs (Java refuses to start here)",
                    dir.display()
                );
            }
            DataTree::new()
        }
    };
    let from = tree.last_processed_zxid;
    // The newest log starting at or before the snapshot, and every later one.
    let first = logs.iter().rposition(|(z, _)| *z <= from).unwrap_or(0);
    let mut n = 0u64;
    let mut unreadable = LogThrottle::new();
    for (_, p) in &logs[first..] {
        for_each_log_entry(p, |zxid, txn| {
            if zxid > from {
                apply(&mut tree, zxid, txn, &mut unreadable);
                n += 1;
            }
        })?;
    }
    Ok(Loaded {
        tree,
        from,
        txns: n,
        snapshots: snaps.len(),
        logs: logs.len(),
    })
}

impl Storage {
    /// Sets when to snapshot and purge, and the config node; purges at once when purging is
    /// on (Java's purge task starts with the server).
    pub fn set_snap_config(&mut self, cfg: SnapConfig) -> io::Result<()> {
        if let Some((text, version)) = &cfg.config_node {
            self.db.tree.set_config(text, *version, now_ms());
        }
        if cfg.no_config_node {
            self.db.tree.drop_config_node();
        }
        self.db.next_purge = cfg.purge_every.map(|_| Instant::now());
        self.db.cfg = cfg;
        self.db.reset_snapshot_stats();
        self.purge_if_due()
    }

    /// The data tree (committed txns applied).
    pub fn tree(&self) -> &DataTree {
        &self.db.tree
    }

    /// (taken, skipped) background snapshots since open.
    pub fn snapshot_counts(&self) -> (u64, u64) {
        (self.db.snapshots_taken, self.db.snapshots_skipped)
    }

    /// Loads the tree from the newest snapshot that reads whole and the logs after it.
    pub(super) fn db_load(&mut self) -> io::Result<()> {
        self.db_wait_snapshot();
        let t0 = Instant::now();
        let Loaded {
            mut tree,
            from,
            txns: n,
            snapshots,
            logs,
        } = load_tree(&self.dir)?;
        if let Some((text, version)) = &self.db.cfg.config_node {
            tree.set_config(text, *version, now_ms());
        }
        if self.db.cfg.no_config_node {
            tree.drop_config_node();
        }
        tracing::info!(
            "{}: data tree of {} nodes loaded from snapshot 0x{from:x} and {n} txns in {} ms (last processed 0x{:x})",
            self.dir.display(),
            tree.node_count(),
            t0.elapsed().as_millis(),
            tree.last_processed_zxid
        );
        self.db.tree = tree;
        self.db.pending.clear();
        self.db.pending_bytes = 0;
        self.db.committed = 0;
        if snapshots == 0 && logs == 0 {
            // FileTxnSnapLog.restore on an empty database: save snapshot.0 now.
            let (path, _) = write_snapshot(&self.dir, &self.db.tree.snapshot())?;
            tracing::info!("Snapshotting: 0x0 to {}", path.display());
            self.snapshot_zxid = Some(0);
        }
        Ok(())
    }

    /// A txn was appended: it waits for its COMMIT; the snapshot rule is checked.
    pub(super) fn db_on_append(&mut self, zxid: i64, txn: &[u8]) -> io::Result<()> {
        if self.db.pending_bytes + pending_cost(txn) > MAX_PENDING_BYTES {
            return Err(io::Error::other(format!(
                "more than {MAX_PENDING_BYTES} bytes of proposals logged and not committed by the leader"
            )));
        }
        self.db.pending.push_back((zxid, txn.to_vec()));
        self.db.pending_bytes += pending_cost(txn);
        self.db.apply_committed();
        self.db.txn_count += 1;
        let log_size = self.writer.as_ref().map_or(0, |w| w.size) as i64;
        let cfg = &self.db.cfg;
        if self.db.txn_count > cfg.snap_count / 2 + self.db.rand_roll
            || (cfg.snap_size_bytes > 0 && log_size > cfg.snap_size_bytes / 2 + self.db.rand_size)
        {
            self.db.reset_snapshot_stats();
            self.db.txn_count = 0;
            self.db.roll_after_sync = true;
        }
        Ok(())
    }

    /// The leader committed everything up to `zxid`: apply it to the tree.
    pub fn commit(&mut self, zxid: i64) {
        self.db.committed = self.db.committed.max(zxid);
        self.db.apply_committed();
    }

    /// The follow session ended: apply every logged txn (Java's `fastForwardDataBase`), so that
    /// the tree is what a restart would load.
    pub fn fast_forward(&mut self) {
        self.db.committed = i64::MAX;
        self.db.apply_committed();
        self.db.committed = 0;
    }

    /// After a sync: roll and snapshot if the rule said so; reap a finished snapshot; purge
    /// if due.
    pub(super) fn db_after_sync(&mut self) -> io::Result<()> {
        self.db_reap_snapshot(false);
        if self.db.roll_after_sync {
            self.db.roll_after_sync = false;
            // rollLog: the next append starts a new file.
            self.writer = None;
            if self.db.snap_thread.is_some() {
                self.db.snapshots_skipped += 1;
                tracing::warn!("Too busy to snap, skipping");
            } else {
                let snap = self.db.tree.snapshot();
                let dir = self.dir.clone();
                tracing::info!(
                    "Snapshotting: 0x{:x} to {}",
                    snap.zxid(),
                    dir.join(snapshot_name(snap.zxid())).display()
                );
                self.db.snap_thread = Some(
                    std::thread::Builder::new()
                        .name("snapshot".into())
                        .spawn(move || {
                            let t = Instant::now();
                            let (_, size) = write_snapshot(&dir, &snap)?;
                            Ok((snap.zxid(), t.elapsed(), size))
                        })?,
                );
            }
        }
        self.purge_if_due()
    }

    fn db_reap_snapshot(&mut self, wait: bool) {
        let done = self
            .db
            .snap_thread
            .as_ref()
            .is_some_and(|t| wait || t.is_finished());
        if !done {
            return;
        }
        let Some(t) = self.db.snap_thread.take() else {
            return;
        };
        match t.join() {
            Ok(Ok((zxid, took, size))) => {
                self.db.snapshots_taken += 1;
                tracing::info!(
                    "Snapshot 0x{zxid:x} taken in {} ms ({size} bytes)",
                    took.as_millis()
                );
                self.snapshot_zxid = Some(self.snapshot_zxid.map_or(zxid, |s| s.max(zxid)));
            }
            Ok(Err(e)) => {
                tracing::error!("snapshot failed: {e} (the txn log still holds every txn)")
            }
            Err(_) => tracing::error!("snapshot thread panicked"),
        }
    }

    /// Waits for a background snapshot (before the directory is rearranged).
    pub(super) fn db_wait_snapshot(&mut self) {
        self.db_reap_snapshot(true);
    }

    fn purge_if_due(&mut self) -> io::Result<()> {
        let (Some(at), Some(every)) = (self.db.next_purge, self.db.cfg.purge_every) else {
            return Ok(());
        };
        if Instant::now() < at {
            return Ok(());
        }
        self.db.next_purge = Some(Instant::now() + every);
        tracing::info!("Purge task started.");
        self.purge(self.db.cfg.retain)?;
        tracing::info!("Purge task completed.");
        Ok(())
    }

    /// `PurgeTxnLog.purge`: keeps the `retain` (at least 3) newest valid snapshots and the logs
    /// they need (the newest log starting at or before the oldest kept snapshot, and every
    /// later one); deletes older logs and snapshots. Returns the files deleted.
    pub fn purge(&mut self, retain: usize) -> io::Result<Vec<PathBuf>> {
        let retain = retain.max(MIN_SNAP_RETAIN);
        self.db_reap_snapshot(false);
        let mut snaps: Vec<i64> = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            if let Some(z) = zxid_from_name(&e?.file_name().to_string_lossy(), "snapshot") {
                snaps.push(z);
            }
        }
        snaps.sort_unstable_by(|a, b| b.cmp(a));
        let valid: Vec<i64> = snaps
            .iter()
            .copied()
            .filter(|z| snapshot_looks_valid(&self.dir.join(snapshot_name(*z))))
            .take(retain)
            .collect();
        let Some(&least) = valid.last() else {
            return Ok(Vec::new());
        };
        let logs = logs_sorted(&self.dir)?;
        let keep_from = logs
            .iter()
            .filter(|(z, _)| *z <= least)
            .map(|(z, _)| *z)
            .max()
            .unwrap_or(0);
        let mut gone = Vec::new();
        for (z, p) in &logs {
            if *z < least && *z < keep_from {
                gone.push(p.clone());
            }
        }
        for z in snaps.iter().filter(|z| **z < least) {
            gone.push(self.dir.join(snapshot_name(*z)));
        }
        for p in &gone {
            tracing::info!("Removing file: {}", p.display());
            match fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("Failed to remove {}: {e}", p.display()),
            }
        }
        Ok(gone)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::quorum::TxnHeader;
    use crate::wire::txn::{Acl, Txn, TxnRecord, encode_txn, opcode};

    fn create(zxid: i64, path: &str) -> Vec<u8> {
        encode_txn(&Txn {
            header: TxnHeader {
                client_id: 1,
                cxid: 1,
                zxid,
                time: zxid,
                op: opcode::CREATE,
            },
            record: Some(TxnRecord::Create {
                path: path.into(),
                data: Some(vec![7; 10]),
                acl: Some(vec![Acl::world(31)]),
                ephemeral: false,
                parent_cversion: -1,
            }),
            digest: None,
        })
        .unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("zkfle-db-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn names(dir: &Path, prefix: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn txns_apply_at_commit_and_at_session_end() {
        let d = tmp("commit");
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(0);
        let z = |i: i64| 0x1_0000_0000 + i;
        // A COMMIT may come before the proposal is logged (sync proposals wait for NEWLEADER).
        s.commit(z(1));
        s.append(z(1), &create(z(1), "/a")).unwrap();
        s.append(z(2), &create(z(2), "/b")).unwrap();
        s.sync().unwrap();
        assert!(s.tree().get("/a").is_some());
        assert!(s.tree().get("/b").is_none(), "not committed yet");
        s.commit(z(2));
        assert!(s.tree().get("/b").is_some());
        s.append(z(3), &create(z(3), "/c")).unwrap();
        s.sync().unwrap();
        s.fast_forward();
        assert!(
            s.tree().get("/c").is_some(),
            "logged txns are applied when the session ends"
        );
        assert_eq!(s.tree().last_processed_zxid, z(3));
        // TRUNC reloads the tree from the snapshot and what is left of the log.
        s.truncate(z(2)).unwrap();
        assert!(s.tree().get("/c").is_none());
        assert_eq!(s.tree().last_processed_zxid, z(2));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn roll_snapshot_purge_restore() {
        let d = tmp("roll");
        let mut s = Storage::open(&d).unwrap();
        s.set_prealloc(0);
        assert_eq!(names(s.dir(), "snapshot."), ["snapshot.0"]);
        s.set_snap_config(SnapConfig {
            snap_count: 10,
            retain: 3,
            purge_every: Some(Duration::ZERO),
            ..SnapConfig::default()
        })
        .unwrap();
        for i in 1..=100i64 {
            let z = 0x1_0000_0000 + i;
            s.append(z, &create(z, &format!("/n{i}"))).unwrap();
            s.commit(z);
            s.sync().unwrap();
            s.db_wait_snapshot();
        }
        let (taken, _) = s.snapshot_counts();
        assert!(taken >= 10, "{taken} snapshots for 100 txns, snapCount 10");
        let snaps = names(s.dir(), "snapshot.");
        assert!(snaps.len() <= 4, "{snaps:?}");
        assert!(names(s.dir(), "log.").len() <= 5);
        let tree = s.tree().clone();
        assert_eq!(tree.node_count(), 104);
        drop(s);
        let s = Storage::open(&d).unwrap();
        s.tree().same_as(&tree).unwrap();
        assert_eq!(s.tree().digest(), tree.digest());
        assert_eq!(s.tree().last_processed_zxid, 0x1_0000_0064);
        fs::remove_dir_all(&d).unwrap();
    }
}
