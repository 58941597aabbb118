//! Faults `zkfle join` injects into itself when a chaos campaign asks (`--chaos-faults FILE`):
//! the member misbehaves from inside the ensemble, at points no network fault reaches.
//!
//! The file holds one fault a line; the campaign's nemesis writes it into the member's data
//! directory and removes it at the heal. It is read every 200 ms, so a fault takes effect
//! within that. Without the flag nothing is read and every hook is one relaxed atomic load.
//!
//! | line | effect |
//! |---|---|
//! | `crash-before-ack` | the process aborts after logging a proposal durably, before its ACK is sent |
//! | `crash-after-newleader-ack` | the process aborts right after its ACK of NEWLEADER is sent, before UPTODATE |
//! | `drop-votes PERMILLE` | that many of each thousand election notifications are not sent |
//! | `delay-votes MS` | every election notification is sent MS milliseconds late |
//! | `slow-read MS` | the follower waits MS milliseconds before each read of the leader's stream |

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

/// The faults in force.
#[derive(Debug, Default)]
pub struct MemberFaults {
    pub crash_before_ack: AtomicBool,
    pub crash_after_newleader_ack: AtomicBool,
    pub drop_votes_permille: AtomicU32,
    pub delay_votes_ms: AtomicU32,
    pub slow_read_ms: AtomicU32,
}

static FAULTS: MemberFaults = MemberFaults {
    crash_before_ack: AtomicBool::new(false),
    crash_after_newleader_ack: AtomicBool::new(false),
    drop_votes_permille: AtomicU32::new(0),
    delay_votes_ms: AtomicU32::new(0),
    slow_read_ms: AtomicU32::new(0),
};

/// The faults in force in this process.
pub fn get() -> &'static MemberFaults {
    &FAULTS
}

/// The longest delay or slow read a file may ask for.
const MAX_MS: u32 = 60_000;
/// The largest fault file read.
const MAX_FILE_BYTES: u64 = 4096;

impl MemberFaults {
    /// Sets the faults `text` names (every other one off). Unknown lines are returned, to be
    /// logged once.
    pub fn apply(&self, text: &str) -> Vec<String> {
        let mut unknown = Vec::new();
        let (mut crash_ack, mut crash_newleader) = (false, false);
        let (mut drop, mut delay, mut slow) = (0, 0, 0);
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let mut f = line.split_whitespace();
            let name = f.next().unwrap_or("");
            let arg = f.next().and_then(|a| a.parse::<u32>().ok());
            match (name, arg) {
                ("crash-before-ack", _) => crash_ack = true,
                ("crash-after-newleader-ack", _) => crash_newleader = true,
                ("drop-votes", Some(p)) => drop = p.min(1000),
                ("delay-votes", Some(ms)) => delay = ms.min(MAX_MS),
                ("slow-read", Some(ms)) => slow = ms.min(MAX_MS),
                _ => unknown.push(line.to_string()),
            }
        }
        self.crash_before_ack.store(crash_ack, Ordering::Relaxed);
        self.crash_after_newleader_ack
            .store(crash_newleader, Ordering::Relaxed);
        self.drop_votes_permille.store(drop, Ordering::Relaxed);
        self.delay_votes_ms.store(delay, Ordering::Relaxed);
        self.slow_read_ms.store(slow, Ordering::Relaxed);
        unknown
    }

    /// Whether this notification is to be dropped (`drop-votes`), by a counter, not chance:
    /// PERMILLE of every thousand in a row.
    pub fn drop_vote(&self) -> bool {
        static SENT: AtomicU32 = AtomicU32::new(0);
        let p = self.drop_votes_permille.load(Ordering::Relaxed);
        p > 0 && SENT.fetch_add(1, Ordering::Relaxed) % 1000 < p
    }

    pub fn vote_delay(&self) -> Option<Duration> {
        let ms = self.delay_votes_ms.load(Ordering::Relaxed);
        (ms > 0).then(|| Duration::from_millis(ms.into()))
    }

    pub fn read_delay(&self) -> Option<Duration> {
        let ms = self.slow_read_ms.load(Ordering::Relaxed);
        (ms > 0).then(|| Duration::from_millis(ms.into()))
    }

    /// Aborts the process, as a crash does (no destructor runs, nothing more is written),
    /// when `armed`.
    pub fn crash_if(&self, armed: &AtomicBool, at: &str) {
        if armed.load(Ordering::Relaxed) {
            tracing::warn!("chaos fault: crashing {at}");
            std::process::abort();
        }
    }
}

/// Reads `path` every 200 ms and applies it (a missing file: no faults), on a thread of its
/// own for the life of the process.
pub fn watch(path: PathBuf) {
    std::thread::spawn(move || {
        let mut last = String::new();
        loop {
            let text = std::fs::File::open(&path)
                .and_then(|f| {
                    use std::io::Read;
                    let mut s = String::new();
                    f.take(MAX_FILE_BYTES).read_to_string(&mut s)?;
                    Ok(s)
                })
                .unwrap_or_default();
            if text != last {
                for line in get().apply(&text) {
                    tracing::warn!("chaos fault file {}: unknown line {line:?}", path.display());
                }
                tracing::warn!(
                    "chaos faults now: {}",
                    if text.trim().is_empty() {
                        "none"
                    } else {
                        text.trim()
                    }
                );
                last = text;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_sets_the_faults_it_names_and_clears_the_rest() {
        let f = MemberFaults::default();
        let unknown = f.apply("drop-votes 250\nslow-read 70000\nbogus 1\ncrash-before-ack\n");
        assert_eq!(unknown, ["bogus 1"]);
        assert!(f.crash_before_ack.load(Ordering::Relaxed));
        assert_eq!(f.read_delay(), Some(Duration::from_millis(60_000)));
        let dropped = (0..1000).filter(|_| f.drop_vote()).count();
        assert_eq!(dropped, 250);
        f.apply("");
        assert!(!f.crash_before_ack.load(Ordering::Relaxed));
        assert_eq!(f.read_delay(), None);
        assert!(!f.drop_vote());
    }
}
