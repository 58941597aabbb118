//! Rate-limited warnings: a peer that can make us log once per connection or per message
//! could otherwise fill a disk with one line each. Per kind, the first [`BURST`] warnings of a
//! [`WINDOW_MS`] window are logged; the rest are counted, and the next line logged says how
//! many were left out. Pure: the caller supplies the clock (milliseconds), so sans-I/O state
//! machines can use it.

use std::collections::HashMap;

/// The window, in milliseconds.
pub const WINDOW_MS: u64 = 10_000;
/// Lines per kind and window.
pub const BURST: u32 = 20;

#[derive(Debug, Default)]
pub struct LogThrottle {
    /// Per kind: the window's start, lines logged in it, lines left out since the last one.
    kinds: HashMap<&'static str, (u64, u32, u64)>,
}

impl LogThrottle {
    pub fn new() -> Self {
        LogThrottle::default()
    }

    /// Whether a warning of `kind` may be logged at `now_ms`. `Some(n)`: log it, adding
    /// [`suppressed`]`(n)`; `None`: it is counted and left out.
    pub fn allow(&mut self, kind: &'static str, now_ms: u64) -> Option<u64> {
        let (start, logged, left_out) = self.kinds.entry(kind).or_insert((now_ms, 0, 0));
        if now_ms.saturating_sub(*start) >= WINDOW_MS {
            *start = now_ms;
            *logged = 0;
        }
        if *logged < BURST {
            *logged += 1;
            Some(std::mem::take(left_out))
        } else {
            *left_out += 1;
            None
        }
    }
}

/// The suffix for a warning after `n` were left out: empty for none.
pub fn suppressed(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(
            " ({n} more like it in the last {} s not logged)",
            WINDOW_MS / 1000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_window_then_the_count() {
        let mut t = LogThrottle::new();
        for ms in 0..u64::from(BURST) {
            assert_eq!(t.allow("a", ms), Some(0));
        }
        assert_eq!(t.allow("b", 1), Some(0), "kinds are separate");
        for ms in 0..1000 {
            assert_eq!(t.allow("a", 100 + ms), None);
        }
        assert_eq!(t.allow("a", WINDOW_MS), Some(1000));
        assert_eq!(t.allow("a", WINDOW_MS + 1), Some(0));
        assert_eq!(suppressed(0), "");
        assert!(suppressed(3).contains("3 more"));
    }
}
