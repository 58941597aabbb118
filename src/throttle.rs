//! Rate-limited warnings: a peer that can make us log once per connection or per message
//! could otherwise fill a disk with one line each. The first warning of a kind is logged; then
//! at most one per [`WINDOW_MS`], saying how many like it were left out in between.
//! Pure: the caller supplies the clock (milliseconds), so sans-I/O state machines can use it.

use std::collections::HashMap;

/// At most one line per kind in this many milliseconds.
pub const WINDOW_MS: u64 = 10_000;

#[derive(Debug, Default)]
pub struct LogThrottle {
    /// Per kind: when it was last logged, and how many were suppressed since.
    kinds: HashMap<&'static str, (u64, u64)>,
}

impl LogThrottle {
    pub fn new() -> Self {
        LogThrottle::default()
    }

    /// Whether a warning of `kind` may be logged at `now_ms`. `Some(n)`: log it, adding
    /// [`suppressed`]`(n)`; `None`: it is counted and left out.
    pub fn allow(&mut self, kind: &'static str, now_ms: u64) -> Option<u64> {
        match self.kinds.get_mut(kind) {
            None => {
                self.kinds.insert(kind, (now_ms, 0));
                Some(0)
            }
            Some((last, n)) if now_ms.saturating_sub(*last) >= WINDOW_MS => {
                let left_out = *n;
                *last = now_ms;
                *n = 0;
                Some(left_out)
            }
            Some((_, n)) => {
                *n += 1;
                None
            }
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
    fn one_line_per_window_with_the_count() {
        let mut t = LogThrottle::new();
        assert_eq!(t.allow("a", 0), Some(0));
        assert_eq!(t.allow("b", 1), Some(0), "kinds are separate");
        for ms in 1..1000 {
            assert_eq!(t.allow("a", ms), None);
        }
        assert_eq!(t.allow("a", WINDOW_MS), Some(999));
        assert_eq!(t.allow("a", WINDOW_MS + 1), None);
        assert_eq!(suppressed(0), "");
        assert!(suppressed(3).contains("3 more"));
    }
}
