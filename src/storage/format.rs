//! ZooKeeper's on-disk formats, pure: the txn log (`FileTxnLog`), the snapshot file's header
//! and seal (`FileSnap`, `SnapStream`), file names (`Util.makeLogName`), Adler-32.
//!
//! Txn log file: `FileHeader { int magic "ZKLG"; int version 2; long dbid 0 }`, then entries
//! `{ long adler32(txn); buffer txn; byte 'B' }` where `txn` is `TxnHeader ‖ record ‖
//! [TxnDigest]` (exactly a PROPOSAL's data), then zero padding (an entry of length 0 is the end).
//! Snapshot file: `FileHeader { "ZKSN", 2, -1 }`, the body a leader streams after SNAP up to
//! and including the `"/"` end marker, then the seal `{ long adler32(everything before);
//! ustring "/" }`.

/// `FileTxnLog.TXNLOG_MAGIC`: "ZKLG".
pub const TXNLOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// `FileSnap.SNAP_MAGIC`: "ZKSN".
pub const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
pub const FORMAT_VERSION: i32 = 2;
/// `FileTxnLog.dbId`.
pub const LOG_DBID: i64 = 0;
/// `FileSnap.dbId`.
pub const SNAP_DBID: i64 = -1;
pub const FILE_HEADER_LEN: usize = 16;
/// End-of-record byte after each txn entry.
pub const EOR: u8 = b'B';
/// `FilePadding.preAllocSize` default: 64 MiB.
pub const PREALLOC: u64 = 64 * 1024 * 1024;
/// The seal's path string (`SnapStream.sealStream`).
pub const SEAL_TAIL: [u8; 5] = [0, 0, 0, 1, b'/'];

/// `FileHeader` bytes.
pub fn file_header(magic: i32, dbid: i64) -> [u8; FILE_HEADER_LEN] {
    let mut b = [0u8; FILE_HEADER_LEN];
    b[..4].copy_from_slice(&magic.to_be_bytes());
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    b[8..].copy_from_slice(&dbid.to_be_bytes());
    b
}

/// Checks a `FileHeader`; `Err` says what is wrong.
pub fn check_header(b: &[u8], magic: i32) -> Result<(), &'static str> {
    if b.len() < FILE_HEADER_LEN {
        return Err("file shorter than its header");
    }
    if b[..4] != magic.to_be_bytes() {
        return Err("bad magic");
    }
    if b[4..8] != FORMAT_VERSION.to_be_bytes() {
        return Err("unsupported version");
    }
    Ok(())
}

/// One txn log entry for `txn` (a PROPOSAL's data).
pub fn log_entry(txn: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(txn.len() + 13);
    out.extend_from_slice(&(i64::from(adler32(1, txn))).to_be_bytes());
    out.extend_from_slice(&(txn.len() as i32).to_be_bytes());
    out.extend_from_slice(txn);
    out.push(EOR);
    out
}

/// `FilePadding.calculateFileSizeWithPadding`: when within 4 KiB of the known end, grow to the
/// next multiple of `prealloc` past `position`.
pub fn padded_size(position: u64, file_size: u64, prealloc: u64) -> u64 {
    if prealloc > 0 && position + 4096 >= file_size {
        if position > file_size {
            position + prealloc - position % prealloc
        } else {
            file_size + prealloc
        }
    } else {
        file_size
    }
}

/// Adler-32 continuing from `adler` (start with 1), as `java.util.zip.Adler32`.
pub fn adler32(adler: u32, data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let mut a = adler & 0xffff;
    let mut b = adler >> 16;
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// `log.<hex zxid>`.
pub fn log_name(zxid: i64) -> String {
    format!("log.{:x}", zxid)
}

/// `snapshot.<hex zxid>`.
pub fn snapshot_name(zxid: i64) -> String {
    format!("snapshot.{:x}", zxid)
}

/// The zxid in `prefix.<hex>` (`Util.getZxidFromName`); None for other names.
pub fn zxid_from_name(name: &str, prefix: &str) -> Option<i64> {
    let mut parts = name.split('.');
    if parts.next()? != prefix {
        return None;
    }
    u64::from_str_radix(parts.next()?, 16)
        .ok()
        .map(|v| v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler_matches_known_values() {
        assert_eq!(adler32(1, b""), 1);
        assert_eq!(adler32(1, b"Wikipedia"), 0x11E6_0398);
        let big = vec![0xffu8; 100_000];
        let whole = adler32(1, &big);
        let split = adler32(adler32(1, &big[..777]), &big[777..]);
        assert_eq!(whole, split);
    }

    #[test]
    fn names_and_padding() {
        assert_eq!(log_name(0x1_0000_0001), "log.100000001");
        assert_eq!(zxid_from_name("snapshot.1a", "snapshot"), Some(0x1a));
        assert_eq!(zxid_from_name("tmp.snapshot.1a", "snapshot"), None);
        assert_eq!(padded_size(16, 16, PREALLOC), 16 + PREALLOC);
        assert_eq!(padded_size(100, PREALLOC, PREALLOC), PREALLOC);
        assert_eq!(padded_size(PREALLOC - 10, PREALLOC, PREALLOC), 2 * PREALLOC);
        assert_eq!(&file_header(TXNLOG_MAGIC, 0)[..4], b"ZKLG");
    }
}
