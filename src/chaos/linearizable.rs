//! Is a history of one object linearizable? Wing & Gong's search with Lowe's memoisation, as
//! Knossos and Porcupine run it: walk the operations in real-time order, try to linearize each
//! one whose call comes before the earliest pending return, remember every (set of linearized
//! operations, state) reached so that no configuration is explored twice, and backtrack when a
//! return is met whose operation could not be placed.
//!
//! Written here (no Rust crate implements it) over any model given as a step function, so the
//! same search checks ZooKeeper's znodes and the published cas-register histories it is tested
//! against. The search is bounded: past `budget` configurations it gives up and says so.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

/// One operation's place in real time: `call` and `ret` are positions in the history, and an
/// operation whose outcome is unknown (it never returned) has `ret: None` and may take effect
/// at any point after its call, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub call: u64,
    pub ret: Option<u64>,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An order exists: the operations (indices into the input) in one valid order.
    Linearizable { order: Vec<usize> },
    /// No order exists. `longest` is the longest valid order found from the start; `stuck` is
    /// the first operation (by return) that no extension of it could place.
    NotLinearizable { longest: Vec<usize>, stuck: usize },
    /// The search met its budget of configurations before an answer.
    GaveUp { explored: u64 },
}

/// Bounds of one search.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Configurations (linearized set, state) remembered at most; each costs about n/8 bytes.
    pub configurations: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            configurations: 4_000_000,
        }
    }
}

const NIL: usize = usize::MAX;

/// A set of operation indices.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
    fn has(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// Searches for a linearization of `ops` from `init`, where `step(state, i)` is the state after
/// operation `i` takes effect in `state`, or `None` when its recorded outcome is impossible
/// there. Unknown outcomes must be accepted by `step` in any state where the operation could
/// run (their effect is applied; never taking effect is the search's business).
pub fn check<S, F>(ops: &[Interval], init: S, step: F, budget: Budget) -> Outcome
where
    S: Clone + Eq + Hash,
    F: Fn(&S, usize) -> Option<S>,
{
    let n = ops.len();
    if n == 0 {
        return Outcome::Linearizable { order: Vec::new() };
    }
    // Entries: 2i is operation i's call, 2i+1 its return. Unknown returns go after every
    // known one (they constrain nothing), in call order.
    let time = |e: usize| -> (u64, u8, u64) {
        let op = &ops[e / 2];
        if e.is_multiple_of(2) {
            (op.call, 0, 0)
        } else {
            match op.ret {
                Some(r) => (r, 1, 0),
                None => (u64::MAX, 1, op.call),
            }
        }
    };
    let mut order: Vec<usize> = (0..2 * n).collect();
    // At equal positions calls come first: operations that touch are concurrent.
    order.sort_by_key(|&e| time(e));
    // A doubly linked list over the entries; node 2n is the head.
    let head = 2 * n;
    let mut next = vec![NIL; 2 * n + 1];
    let mut prev = vec![NIL; 2 * n + 1];
    let mut last = head;
    for &e in &order {
        next[last] = e;
        prev[e] = last;
        last = e;
    }

    let mut linearized = Bits::new(n);
    let mut state = init;
    // The operations placed so far, with the state before each.
    let mut placed: Vec<(usize, S)> = Vec::new();
    let mut seen: FxHashMap<u64, Vec<(Bits, S)>> = FxHashMap::default();
    let mut remembered: u64 = 0;
    let mut longest: Vec<usize> = Vec::new();

    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, call: usize| {
        for e in [call, call + 1] {
            let (p, nx) = (prev[e], next[e]);
            next[p] = nx;
            if nx != NIL {
                prev[nx] = p;
            }
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, call: usize| {
        for e in [call + 1, call] {
            let (p, nx) = (prev[e], next[e]);
            next[p] = e;
            if nx != NIL {
                prev[nx] = e;
            }
        }
    };

    let mut entry = next[head];
    while next[head] != NIL {
        // Every call's return lies after it in the list, so the walk meets a return first.
        debug_assert!(entry != NIL);
        if entry.is_multiple_of(2) {
            let i = entry / 2;
            if let Some(after) = step(&state, i) {
                let mut with = linearized.clone();
                with.set(i);
                let mut h = FxHasher::default();
                with.hash(&mut h);
                after.hash(&mut h);
                let bucket = seen.entry(h.finish()).or_default();
                if !bucket.iter().any(|(b, s)| *b == with && *s == after) {
                    bucket.push((with, after.clone()));
                    remembered += 1;
                    if remembered > budget.configurations {
                        return Outcome::GaveUp {
                            explored: remembered,
                        };
                    }
                    placed.push((i, std::mem::replace(&mut state, after)));
                    linearized.set(i);
                    lift(&mut next, &mut prev, entry);
                    if placed.len() > longest.len() {
                        longest = placed.iter().map(|(i, _)| *i).collect();
                    }
                    entry = next[head];
                    continue;
                }
            }
            entry = next[entry];
        } else {
            // A return whose operation is not placed: undo the last placement and try the
            // entry after it.
            let Some((i, before)) = placed.pop() else {
                // The operation that had to be placed by the earliest return and never was.
                let mut found = Bits::new(n);
                longest.iter().for_each(|&i| found.set(i));
                let stuck = (0..n)
                    .filter(|&i| !found.has(i))
                    .min_by_key(|&i| (ops[i].ret.unwrap_or(u64::MAX), ops[i].call))
                    .unwrap_or(0);
                return Outcome::NotLinearizable { longest, stuck };
            };
            state = before;
            linearized.clear(i);
            unlift(&mut next, &mut prev, 2 * i);
            entry = next[2 * i];
        }
    }
    debug_assert!((0..n).all(|i| linearized.has(i)));
    Outcome::Linearizable {
        order: placed.into_iter().map(|(i, _)| i).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register's operation: call, return (None: unknown), the value written, the value
    /// read.
    type RegisterOp = (u64, Option<u64>, Option<i64>, Option<i64>);

    fn register(ops: &[RegisterOp]) -> Outcome {
        register_with(ops, Budget::default())
    }

    /// A register from 0: a write always takes effect; a read must see the state, unless its
    /// outcome is unknown.
    fn register_with(ops: &[RegisterOp], budget: Budget) -> Outcome {
        let intervals: Vec<Interval> = ops
            .iter()
            .map(|&(call, ret, _, _)| Interval { call, ret })
            .collect();
        check(
            &intervals,
            0i64,
            |s, i| match ops[i] {
                (_, _, Some(v), _) => Some(v),
                (_, ret, None, Some(r)) if ret.is_none() || r == *s => Some(*s),
                (_, _, None, Some(_)) => None,
                _ => Some(*s),
            },
            budget,
        )
    }

    #[test]
    fn porcupine_register_examples() {
        // Porcupine's TestRegisterModel: put(100) || get -> 100 || get -> 0 is linearizable.
        let ok = register(&[
            (0, Some(100), Some(100), None),
            (25, Some(75), None, Some(100)),
            (30, Some(60), None, Some(0)),
        ]);
        assert!(matches!(ok, Outcome::Linearizable { .. }), "{ok:?}");
        // put(200) || get -> 200 ... get -> 0 after it returned: not linearizable.
        let bad = register(&[
            (0, Some(100), Some(200), None),
            (10, Some(30), None, Some(200)),
            (40, Some(90), None, Some(0)),
        ]);
        assert!(matches!(bad, Outcome::NotLinearizable { .. }), "{bad:?}");
    }

    #[test]
    fn an_unknown_write_may_take_effect_late_or_never() {
        // write(1) never returns; a read after sees 0, a later read sees 1: both fine.
        let ok = register(&[
            (0, None, Some(1), None),
            (1, Some(2), None, Some(0)),
            (3, Some(4), None, Some(1)),
        ]);
        assert!(matches!(ok, Outcome::Linearizable { .. }), "{ok:?}");
        // Seen 1, then 0 again: no single point for the write.
        let bad = register(&[
            (0, None, Some(1), None),
            (1, Some(2), None, Some(1)),
            (3, Some(4), None, Some(0)),
        ]);
        match bad {
            Outcome::NotLinearizable { stuck, .. } => assert_eq!(stuck, 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_budget_bounds_the_search() {
        let ops: Vec<_> = (0..40)
            .map(|i| (0, Some(100 + i), Some(i as i64), None))
            .collect();
        let mut ops = ops;
        ops.push((200, Some(201), None, Some(-1)));
        let out = register_with(
            &ops,
            Budget {
                configurations: 1000,
            },
        );
        assert!(matches!(out, Outcome::GaveUp { .. }), "{out:?}");
    }
}
