//! A data directory zkfle made itself reopens without a warning: the `snapshot.0` of a fresh
//! tree carries digest 0 at zxid 0, as Java writes it, and such a digest is not compared
//! (Java's `DataTree.deserializeZxidDigest` skips it), so every restart of a new member used
//! to warn "digest 0 in the snapshot, ... computed".

mod common;
use common::logs::Logs;

use zkfle::storage::Storage;

#[test]
fn a_fresh_data_directory_reopens_without_a_digest_warning() {
    let dir = std::env::temp_dir().join(format!("zkfle-fresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (logs, _guard) = Logs::warnings();
    drop(Storage::open(&dir).unwrap());
    assert!(dir.join("version-2/snapshot.0").exists() || dir.join("snapshot.0").exists());
    drop(Storage::open(&dir).unwrap());
    assert!(
        logs.lines_with("digest").is_empty(),
        "{:?}",
        logs.lines_with("WARN")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
