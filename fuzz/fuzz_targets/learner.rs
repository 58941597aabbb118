#![no_main]
//! The quorum-port follower path: any bytes as a leader's stream, decoded and fed to the
//! learner state machine (packets, snapshot bytes and ends, timers), with its durable state
//! from the input's first bytes. No panic; and what it asks the driver to persist is never
//! what issue 14 forbids: an acceptedEpoch far beyond the known epochs, a zxid beyond the
//! leader's epoch, log appends out of order, more staged or snapshot bytes than the limits.
use libfuzzer_sys::fuzz_target;
use zkfle::wire::quorum::{QuorumItem, QuorumStreamDecoder};
use zkfle::zab::{Event, Learner, LearnerConfig, MAX_EPOCH_JUMP, Persist};

const MAX_DIFF: u64 = 4096;
const MAX_SNAP: u64 = 8192;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let accepted = i64::from(data[0] % 8);
    let current = accepted - i64::from(data[1] % 2).min(accepted);
    let known = i64::from(data[2] % 16);
    let last_zxid = current << 32 | i64::from(data[1] >> 4);
    let cfg = LearnerConfig {
        my_sid: 1,
        config_version: 0,
        tick_ms: 10,
        init_limit: 10,
        sync_limit: 5,
        max_diff_bytes: MAX_DIFF,
        max_snapshot_bytes: MAX_SNAP,
        known_epoch: known,
        observer: false,
        reconfig: None,
    };
    let mut l = Learner::new(cfg, accepted, current, last_zxid, 0);
    let mut logged = last_zxid;
    let mut staged: Option<i64> = None;
    let mut staged_zxids: Vec<i64> = Vec::new();
    let mut staged_bytes = 0u64;
    let mut epoch_cap = accepted.max(known) + MAX_EPOCH_JUMP;
    let mut dec = QuorumStreamDecoder::new();
    let mut now = 0u64;
    let mut input = &data[3..];
    let mut check = |l: &mut Learner| {
        let r = l.ready();
        for p in r.persist {
            match p {
                Persist::AcceptedEpoch(e) => {
                    assert!(e <= epoch_cap, "acceptedEpoch {e} beyond {epoch_cap}");
                    epoch_cap = epoch_cap.max(e);
                }
                Persist::CurrentEpoch(e) => assert!(e <= epoch_cap),
                Persist::Append { zxid, .. } => {
                    assert!(zxid > logged, "append 0x{zxid:x} after 0x{logged:x}");
                    assert!(
                        zxid >> 32 <= l.epoch(),
                        "0x{zxid:x} beyond epoch {}",
                        l.epoch()
                    );
                    logged = zxid;
                }
                Persist::Stage { zxid, txn } => {
                    assert!(staged.is_none_or(|s| zxid > s));
                    assert!(zxid >> 32 <= l.epoch());
                    staged = Some(zxid);
                    staged_zxids.push(zxid);
                    staged_bytes += txn.len() as u64;
                    assert!(staged_bytes <= MAX_DIFF);
                }
                Persist::AppendStaged { skip } => {
                    // Only staged proposals are skipped (uncommitted hand-over txns).
                    assert!(skip.iter().all(|z| staged_zxids.contains(z)));
                    if let Some(s) = staged_zxids.iter().filter(|z| !skip.contains(z)).max() {
                        logged = logged.max(*s);
                    }
                }
                Persist::Truncate(z) => {
                    assert!(z >> 32 <= l.epoch());
                    logged = logged.min(z);
                }
                Persist::InstallSnapshot(z) => {
                    assert!(z >> 32 <= l.epoch());
                    logged = z;
                }
                // A leader's config (NEWLEADER's, or a reconfig txn's): parsed, so bounded by
                // its frame.
                Persist::NextConfig(_) | Persist::ActivateConfig(_) => {}
            }
        }
        assert!(r.send.len() < 100_000);
        while let Some(ev) = l.poll_event() {
            if let Event::Closed(why) = ev {
                assert!(!why.is_empty());
            }
        }
    };
    check(&mut l);
    let mut snap_bytes = 0u64;
    loop {
        match dec.decode(&mut input) {
            Ok(Some(QuorumItem::Packet { packet, .. })) => {
                now += u64::from(packet.zxid as u8 % 4);
                l.on_packet(now, packet);
                l.on_timer(now);
            }
            Ok(Some(QuorumItem::SnapshotData { bytes, .. })) => {
                snap_bytes += bytes.len() as u64;
                l.on_snapshot_bytes(now, bytes.len());
                if snap_bytes > MAX_SNAP {
                    assert_eq!(l.phase(), zkfle::zab::Phase::Closed);
                }
            }
            Ok(Some(QuorumItem::SnapshotEnd { .. })) => l.on_snapshot_end(now),
            // As the follow driver: a SASL packet after the handshake ends the session.
            Ok(Some(QuorumItem::Auth { .. })) | Ok(None) | Err(_) => break,
        }
        check(&mut l);
    }
    l.on_disconnect("end of input".into());
    check(&mut l);
});
