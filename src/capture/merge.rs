//! Several captures of one ensemble, one per host, read as one capture.
//!
//! Operators capture on every host; the hosts' clocks differ. Reading them as one needs:
//!
//! 1. **Clock offsets.** A segment captured on both its sender's and its receiver's host
//!    cannot have been received before it was sent. For two files A and B, every shared
//!    segment gives `d = t_B - t_A`: `d >= c` when A's host sent it and `d <= c` when B's
//!    host did, where `c` is how far B's clock is ahead of A's. Both directions together bound
//!    `c` from both sides, as NTP does; the estimate is the middle of the bounds and the error
//!    half their width. Pair estimates are chained from a reference file (the first one, or
//!    those given with a fixed offset) along the most precise pairs. A file that shares no
//!    segment (in both directions) with the aligned ones is reported as unaligned, not
//!    guessed. [`SegmentIndex`] collects the shared segments in a first pass, bounded by
//!    sampling (the same fingerprints are kept in every file, so samples still meet).
//! 2. **One copy per segment.** [`MergedSegments`] reads the files together in corrected
//!    time order and passes on the first copy of a segment; a copy of the same segment from
//!    another file within [`DEDUP_WINDOW_NANOS`] is dropped. A segment that one file has and
//!    another file covering the same connection (at that time) lacks is counted as that
//!    file's capture loss ([`Loss`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use rustc_hash::{FxHashMap, FxHasher};

use super::{CaptureError, SegmentSource, TcpSegment, TcpSegmentRef, TcpSegments, Timestamp};

/// Most fingerprints one file's index holds; beyond it the index keeps a sample (half as
/// many fingerprints each time it fills up).
pub const INDEX_CAPACITY: usize = 1 << 17;

/// A copy of a segment from another file is recognised within this much corrected time of
/// the first copy: transit time plus what the clock estimate may still be off by.
pub const DEDUP_WINDOW_NANOS: i64 = 1_000_000_000;

/// Most segments remembered for deduplication at once (a bound on memory when a capture
/// carries more than this many segments in [`DEDUP_WINDOW_NANOS`]).
pub const DEDUP_CAPACITY: usize = 1 << 20;

/// Most connections whose coverage (which files see them) is remembered.
pub const COVERAGE_CAPACITY: usize = 1 << 16;

/// Connections remembered before the coverage table is first swept of quiet ones.
const COVERAGE_SWEEP_FIRST: usize = 1 << 10;

/// Segments (with data, SYN or FIN) of each file read for the clock estimate before the
/// first try.
pub const INDEX_FIRST: u64 = 1 << 13;

/// Pass 1 reads twice as far while the estimate still improves (its worst error shrinks
/// by a tenth or more), up to this many segments of each file; beyond it only while a file
/// stays unaligned.
pub const INDEX_BUDGET: u64 = 1 << 18;

/// Most files merged at once (file sets are bit masks).
pub const MAX_FILES: usize = 64;

/// Nanoseconds since the epoch.
pub fn nanos(t: Timestamp) -> i64 {
    t.secs
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(t.nanos))
}

/// The timestamp of `n` nanoseconds since the epoch.
pub fn from_nanos(n: i64) -> Timestamp {
    Timestamp {
        secs: n.div_euclid(1_000_000_000),
        nanos: n.rem_euclid(1_000_000_000) as u32,
    }
}

/// `t` moved by `offset` nanoseconds: its corrected time in nanoseconds and as a timestamp.
/// The same as `nanos(t).saturating_add(offset)` and [`from_nanos`] of that, without a 64-bit
/// division per segment (`offset` comes split too, as `from_nanos(offset)`) unless the times
/// are far enough out to saturate.
fn shift(t: Timestamp, offset: i64, split: Timestamp) -> (i64, Timestamp) {
    let (whole, part) = (split.secs, split.nanos);
    // Below this, neither `nanos(t)` nor the sum can saturate.
    const BOUND: u64 = 1 << 32;
    let at = nanos(t).saturating_add(offset);
    if t.secs.unsigned_abs() >= BOUND || whole.unsigned_abs() >= BOUND {
        return (at, from_nanos(at));
    }
    let sum = t.nanos + part;
    let carry = sum >= 1_000_000_000;
    let shifted = Timestamp {
        secs: t.secs + whole + i64::from(carry),
        nanos: if carry { sum - 1_000_000_000 } else { sum },
    };
    (at, shifted)
}

/// What identifies one TCP segment in every capture that holds it: addresses, sequence and
/// acknowledgement numbers, flags and length on the wire (so a copy cut by a snap length still
/// matches). `None` for segments that carry neither data nor SYN/FIN/RST: pure ACKs repeat
/// (a RST is one segment, as a SYN is: a refused dial is its SYN and its RST).
pub fn fingerprint(seg: &TcpSegmentRef<'_>) -> Option<u64> {
    let len = seg.payload.len() as u64 + u64::from(seg.missing);
    if len == 0 && !seg.syn && !seg.fin && !seg.rst {
        return None;
    }
    // Plain words mixed by splitmix: cheaper than a hasher walking the address enums, and the
    // low bits are good (sampling uses them).
    let flags = u64::from(seg.syn) | u64::from(seg.fin) << 1 | u64::from(seg.rst) << 2;
    let ack = seg.ack.map_or(1 << 32, u64::from);
    let mut x = splitmix(addr_word(&seg.src) ^ 0x9e37_79b9_7f4a_7c15);
    x = splitmix(x ^ addr_word(&seg.dst));
    x = splitmix(x ^ (u64::from(seg.seq) << 32 | (len & 0xffff_ffff)));
    Some(splitmix(x ^ ack ^ flags << 40))
}

/// An address and port as one word (IPv6 folded).
fn addr_word(a: &SocketAddr) -> u64 {
    let port = u64::from(a.port());
    match a {
        SocketAddr::V4(v) => (u64::from(v.ip().to_bits()) << 16) | port,
        SocketAddr::V6(v) => {
            let b = v.ip().to_bits();
            splitmix((b as u64) ^ splitmix((b >> 64) as u64)) ^ (port << 48) ^ 1
        }
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Which way between two hosts a segment went, as a hash of (source IP, destination IP).
fn host_direction(src: IpAddr, dst: IpAddr) -> u64 {
    let mut h = FxHasher::default();
    (src, dst).hash(&mut h);
    h.finish()
}

/// One file's shared-segment candidates: fingerprint → (capture time, host direction).
#[derive(Debug, Default)]
pub struct SegmentIndex {
    entries: FxHashMap<u64, (i64, u64)>,
    /// Only fingerprints whose low `shift` bits are zero are kept.
    shift: u32,
    /// Segments with a fingerprint added so far. A fingerprint seen again in this file (a
    /// retransmission) keeps its first copy's time, which the other file's first copy pairs
    /// with.
    pub segments: u64,
    /// How many of those segments each address was an end of (at most [`MAX_HOSTS`]
    /// addresses), to tell the capturing host's own ([`SegmentIndex::own_hosts`]).
    hosts: FxHashMap<IpAddr, u64>,
    /// The segments counted in `hosts` (the first [`INDEX_FIRST`]).
    hosted: u64,
    /// The first and last capture times indexed (nanoseconds), of any segment.
    span: Option<(i64, i64)>,
}

/// Addresses counted per file for [`SegmentIndex::own_hosts`].
const MAX_HOSTS: usize = 256;

impl SegmentIndex {
    /// Notes a segment of this file.
    pub fn add(&mut self, seg: &TcpSegmentRef<'_>) {
        let t = nanos(seg.time);
        self.span = Some(self.span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        let Some(fp) = fingerprint(seg) else { return };
        self.segments += 1;
        // The first segments tell the host as well as all of them would.
        if self.segments <= INDEX_FIRST {
            self.hosted += 1;
            for ip in [seg.src.ip(), seg.dst.ip()] {
                if self.hosts.len() < MAX_HOSTS || self.hosts.contains_key(&ip) {
                    *self.hosts.entry(ip).or_default() += 1;
                }
                if seg.src.ip() == seg.dst.ip() {
                    break;
                }
            }
        }
        if fp & self.mask() != 0 {
            return;
        }
        self.entries
            .entry(fp)
            .or_insert((nanos(seg.time), host_direction(seg.src.ip(), seg.dst.ip())));
        if self.entries.len() >= INDEX_CAPACITY {
            self.shift += 1;
            let mask = self.mask();
            self.entries.retain(|fp, _| fp & mask == 0);
        }
    }

    /// The capturing host's own address: the one address at an end of three in four of the
    /// file's segments or more (a per-host capture's address is at an end of all of them but
    /// the copies a switch or bridge floods to every port; a peer's, of its share of the
    /// connections). None when no address or several are (a capture of a whole ensemble on
    /// loopback or a mirror port, a host with two), or the file is too short to tell.
    pub fn own_hosts(&self) -> Vec<IpAddr> {
        if self.hosted < 32 {
            return Vec::new();
        }
        let own: Vec<IpAddr> = self
            .hosts
            .iter()
            .filter(|&(_, &n)| n * 4 >= self.hosted * 3)
            .map(|(&ip, _)| ip)
            .collect();
        if own.len() == 1 { own } else { Vec::new() }
    }

    /// Takes in the index of the file that continues this one's capture (see
    /// [`rotation_chains`]): one capture, one clock.
    fn absorb(&mut self, next: SegmentIndex) {
        for (fp, entry) in next.entries {
            if fp & self.mask() == 0 && self.entries.len() < INDEX_CAPACITY {
                self.entries.entry(fp).or_insert(entry);
            }
        }
        self.segments += next.segments;
        self.span = match (self.span, next.span) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (s, None) | (None, s) => s,
        };
    }

    fn mask(&self) -> u64 {
        if self.shift >= 64 {
            u64::MAX
        } else {
            (1u64 << self.shift) - 1
        }
    }

    /// Fingerprints held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// How far file B's clock is ahead of file A's, from the segments both hold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairEstimate {
    /// `t_B - t_A` for one instant, nanoseconds.
    pub ahead: i64,
    /// Half the width of the interval the bounds leave, nanoseconds.
    pub error: i64,
    /// Shared segments the estimate rests on.
    pub shared: usize,
}

impl PairEstimate {
    /// The middle of the bounds `lower <= ahead <= upper` (crossed bounds, as when a clock
    /// stepped, give their middle and half their distance).
    fn between(lower: i64, upper: i64, shared: usize) -> PairEstimate {
        PairEstimate {
            ahead: lower / 2 + upper / 2 + (lower % 2 + upper % 2) / 2,
            error: (upper.saturating_sub(lower) / 2).abs(),
            shared,
        }
    }
}

/// Estimates how far `b`'s clock is ahead of `a`'s; `None` unless segments in both directions
/// between the two hosts are in both files.
pub fn estimate_pair(a: &SegmentIndex, b: &SegmentIndex) -> Option<PairEstimate> {
    let mask = a.mask().max(b.mask());
    let (small, large, flip) = if a.len() <= b.len() {
        (a, b, false)
    } else {
        (b, a, true)
    };
    // Per host direction: (min d, max d), d = t_B - t_A.
    let mut groups: FxHashMap<u64, (i64, i64)> = FxHashMap::default();
    let mut shared = 0;
    for (fp, &(t_small, dir)) in &small.entries {
        if fp & mask != 0 {
            continue;
        }
        let Some(&(t_large, _)) = large.entries.get(fp) else {
            continue;
        };
        let d = if flip {
            t_small.saturating_sub(t_large)
        } else {
            t_large.saturating_sub(t_small)
        };
        shared += 1;
        let g = groups.entry(dir).or_insert((i64::MAX, i64::MIN));
        g.0 = g.0.min(d);
        g.1 = g.1.max(d);
    }
    // With each file's own host known, what each host sent the other bounds the offset, and
    // nothing else does: a copy of a third host's segment that a bridge flooded to both ports
    // reached both at about the same time, on either side of the offset (on a partition such
    // copies moved the estimate 48 µs off a shared clock, beyond its stated error).
    if let ([own_a], [own_b]) = (a.own_hosts().as_slice(), b.own_hosts().as_slice())
        && own_a != own_b
        && let Some(&(_, lower)) = groups.get(&host_direction(*own_b, *own_a))
        && let Some(&(upper, _)) = groups.get(&host_direction(*own_a, *own_b))
    {
        return Some(PairEstimate::between(lower, upper, shared));
    }
    let mut groups: Vec<(i64, i64)> = groups.into_values().collect();
    if groups.len() < 2 {
        return None;
    }
    // Segments A's host sent all have d >= c, those B's host sent d <= c: split the host
    // directions (ordered by their least d) where the bounds fit best.
    groups.sort_unstable();
    let mut best: Option<(i64, i64, i64)> = None; // (violation, lower, upper)
    for split in 1..groups.len() {
        let lower = groups[..split]
            .iter()
            .map(|g| g.1)
            .max()
            .unwrap_or(i64::MIN);
        let upper = groups[split..]
            .iter()
            .map(|g| g.0)
            .min()
            .unwrap_or(i64::MAX);
        let violation = lower.saturating_sub(upper).max(0);
        if best.is_none_or(|b| violation < b.0) {
            best = Some((violation, lower, upper));
        }
    }
    let (_, lower, upper) = best?;
    Some(PairEstimate::between(lower, upper, shared))
}

/// One file's clock correction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockOffset {
    /// Added to the file's times to put them on the reference clock, and how far it may be
    /// off (nanoseconds).
    Estimated { offset: i64, error: i64 },
    /// Given by the user.
    Fixed { offset: i64 },
    /// Shares nothing with the aligned files: left as recorded.
    Unaligned,
    /// The rest of file `file`'s capture, cut into several by tcpdump (`-C`/`-W`, `-G`): read
    /// after it, on its clock (see [`rotation_chains`]).
    Continues { file: usize, offset: i64 },
}

impl ClockOffset {
    /// Nanoseconds to add to the file's times.
    pub fn nanos(self) -> i64 {
        match self {
            ClockOffset::Estimated { offset, .. }
            | ClockOffset::Fixed { offset }
            | ClockOffset::Continues { offset, .. } => offset,
            ClockOffset::Unaligned => 0,
        }
    }
}

/// Every file's offset: files with a fixed offset (or, without any, the first file) are the
/// reference; the others are reached through pair estimates, each along the path whose summed
/// error is least.
pub fn align(indexes: &[SegmentIndex], fixed: &[Option<i64>]) -> Vec<ClockOffset> {
    let n = indexes.len();
    let mut pairs = vec![vec![None; n]; n];
    for i in 0..n {
        for j in i + 1..n {
            if let Some(e) = estimate_pair(&indexes[i], &indexes[j]) {
                pairs[i][j] = Some(e);
                pairs[j][i] = Some(PairEstimate {
                    ahead: -e.ahead,
                    ..e
                });
            }
        }
    }
    align_pairs(&pairs, fixed)
}

/// [`align`] from pair estimates: `pairs[i][j]` says how far j's clock is ahead of i's.
pub fn align_pairs(pairs: &[Vec<Option<PairEstimate>>], fixed: &[Option<i64>]) -> Vec<ClockOffset> {
    let n = pairs.len();
    // (offset, summed error) per file; Dijkstra on the summed error (n is small).
    let mut best: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut done = vec![false; n];
    let any_fixed = fixed.iter().any(Option::is_some);
    for (slot, f) in best.iter_mut().zip(fixed) {
        if let Some(o) = f {
            *slot = Some((*o, 0));
        }
    }
    if !any_fixed && n > 0 {
        best[0] = Some((0, 0));
    }
    loop {
        let next = (0..n)
            .filter(|&i| !done[i])
            .filter_map(|i| best[i].map(|b| (b.1, i)))
            .min();
        let Some((_, i)) = next else { break };
        done[i] = true;
        let (offset_i, err_i) = best[i].unwrap_or((0, 0));
        for j in 0..n {
            if done[j] || matches!(fixed.get(j), Some(Some(_))) {
                continue;
            }
            let Some(e) = pairs[i][j] else { continue };
            // j's clock is `ahead` of i's: subtract it, then apply i's correction.
            let cand = (
                offset_i.saturating_sub(e.ahead),
                err_i.saturating_add(e.error),
            );
            if best[j].is_none_or(|b| cand.1 < b.1) {
                best[j] = Some(cand);
            }
        }
    }
    (0..n)
        .map(|i| match (fixed.get(i).copied().flatten(), best[i]) {
            (Some(offset), _) => ClockOffset::Fixed { offset },
            (None, Some((offset, error))) => ClockOffset::Estimated { offset, error },
            (None, None) => ClockOffset::Unaligned,
        })
        .collect()
}

/// Segments of one connection direction that one file lacks and another covering file has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// The file that lacks them (the first of several that are one capture).
    pub file: usize,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// Segments missing.
    pub segments: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
}

struct Head {
    seg: TcpSegment,
    /// Corrected time, nanoseconds.
    at: i64,
    /// Where the payload lies in the file when it is memory-mapped (then `seg.payload` is
    /// empty: nothing is copied).
    in_map: Option<(usize, usize)>,
}

struct Input {
    name: String,
    segments: TcpSegments,
    offset: i64,
    /// `offset` as seconds and nanoseconds, as [`shift`] takes it.
    offset_split: Timestamp,
    /// The next segment when `live`; kept when not, so that its memory serves the next one.
    head: Option<Head>,
    /// `head` holds a segment; false once the file has ended (or failed).
    live: bool,
    /// Corrected time of the first and latest segment.
    first: Option<i64>,
    last: i64,
    /// A read error, handed out once when this file's turn comes.
    error: Option<CaptureError>,
    /// The connection whose coverage this file last noted: consecutive segments of one
    /// connection skip the table.
    noted: u64,
    /// The capturing host's addresses (empty: unknown, every connection is its own).
    own: Vec<IpAddr>,
    /// The last acknowledgement it passed to the coverage table: connection, sent by the
    /// higher address, value.
    acked: (u64, bool, u32),
}

impl Input {
    /// `f` of the head segment, its payload lent from the map or from its copy (lent where it
    /// is made: returned, the segment was moved twice for every segment of every file).
    fn with_head<R>(&self, f: impl FnOnce(&TcpSegmentRef<'_>) -> R) -> Option<R> {
        let head = self.head.as_ref().filter(|_| self.live)?;
        let mut seg = head.seg.as_ref();
        if let (Some((start, end)), Some(map)) = (head.in_map, self.segments.mapped_bytes()) {
            seg.payload = map.get(start..end)?;
        }
        Some(f(&seg))
    }

    /// The corrected time of the head segment, if there is one.
    fn head_at(&self) -> Option<i64> {
        self.head.as_ref().filter(|_| self.live).map(|h| h.at)
    }

    /// Reads the next segment into `head`, in place: a segment is a few hundred bytes, and
    /// every segment of every file passes through here.
    fn advance(&mut self) {
        let Input {
            segments,
            offset,
            offset_split,
            head,
            live,
            first,
            last,
            error,
            ..
        } = self;
        let (offset, offset_split) = (*offset, *offset_split);
        let map = segments
            .mapped_bytes()
            .map(|m| (m.as_ptr() as usize, m.len()));
        let read = segments.next_with(|seg| {
            // A payload inside the mapped file is remembered by position, not copied.
            let at_ptr = seg.payload.as_ptr() as usize;
            let in_map = map.and_then(|(base, len)| {
                let start = at_ptr.checked_sub(base)?;
                (start + seg.payload.len() <= len).then_some((start, start + seg.payload.len()))
            });
            let copied: &[u8] = if in_map.is_some() { &[] } else { seg.payload };
            let (at, time) = shift(seg.time, offset, offset_split);
            match head {
                Some(h) => {
                    let s = &mut h.seg;
                    s.payload.clear();
                    s.payload.extend_from_slice(copied);
                    s.time = time;
                    s.src = seg.src;
                    s.dst = seg.dst;
                    s.seq = seg.seq;
                    s.ack = seg.ack;
                    s.syn = seg.syn;
                    s.fin = seg.fin;
                    s.rst = seg.rst;
                    s.missing = seg.missing;
                    s.record = seg.record;
                    h.at = at;
                    h.in_map = in_map;
                }
                None => {
                    *head = Some(Head {
                        seg: TcpSegmentRef {
                            payload: copied,
                            time,
                            ..*seg
                        }
                        .to_segment(),
                        at,
                        in_map,
                    })
                }
            }
            at
        });
        *live = matches!(read, Some(Ok(_)));
        match read {
            Some(Ok(at)) => {
                first.get_or_insert(at);
                *last = (*last).max(at);
            }
            Some(Err(e)) => *error = Some(e),
            None => {}
        }
    }
}

/// A segment's first copy, while copies from other files may still come.
struct Seen {
    at: i64,
    /// Files that held it (bit per file).
    files: u64,
    /// The file whose copy came first, and how many of its copies were passed on (a
    /// retransmission captured in every file is one copy more in each).
    first: usize,
    kept: u32,
    /// Copies seen so far in (up to three) other files.
    others: [(u8, u32); 3],
    conn: u64,
    /// It went from the connection's higher address to its lower (see [`Coverage`]).
    reverse: bool,
    bytes: u64,
    /// The sequence number after it: its receiver acknowledging this far got it.
    end: u32,
}

/// Which files hold segments of a connection, when it was last seen, and its two addresses
/// (lower first), kept once per connection rather than in every segment's [`Seen`].
struct Coverage {
    files: u64,
    latest: i64,
    lo: SocketAddr,
    hi: SocketAddr,
    /// The highest acknowledgement each side sent (`lo`'s first), in any file.
    acked: [Option<u32>; 2],
}

/// Whether an acknowledgement up to `ack` covers the sequence number `end` (sequence numbers
/// wrap).
fn acks(ack: Option<u32>, end: u32) -> bool {
    ack.is_some_and(|a| a.wrapping_sub(end) as i32 >= 0)
}

/// Several captures read as one, in corrected time order, one copy of each segment.
pub struct MergedSegments {
    inputs: Vec<Input>,
    /// (corrected time, file) of each file's head.
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    /// The head that comes next, when it is known without the heap: a file whose next segment
    /// is still the earliest (runs of one file's segments skip a push and a pop each).
    next: Option<(i64, usize)>,
    seen: FxHashMap<u64, Seen>,
    expiry: VecDeque<(i64, u64)>,
    /// Canonical connection hash → its coverage.
    coverage: FxHashMap<u64, Coverage>,
    /// Size at which `coverage` is next swept of connections gone quiet: twice what the last
    /// sweep kept, so the table stays near the number of live connections (and in cache)
    /// rather than filling up to [`COVERAGE_CAPACITY`] with finished ones.
    coverage_sweep_at: usize,
    losses: FxHashMap<(usize, SocketAddr, SocketAddr), (u64, u64)>,
    /// Copies dropped because another file had them first.
    pub duplicates: u64,
    /// Each input's first file, as an index into the files given to [`open_files`] (an input
    /// is several files when they are one capture cut into several).
    heads: Vec<usize>,
}

fn connection_hash(a: SocketAddr, b: SocketAddr) -> u64 {
    let (x, y) = (addr_word(&a), addr_word(&b));
    let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
    splitmix(splitmix(lo) ^ hi)
}

impl MergedSegments {
    /// Merges `files` (name, segments, offset; at most [`MAX_FILES`]), each corrected by its
    /// offset.
    pub fn new(files: Vec<(String, TcpSegments, ClockOffset)>) -> MergedSegments {
        let mut inputs: Vec<Input> = files
            .into_iter()
            .take(MAX_FILES)
            .map(|(name, segments, offset)| Input {
                name,
                segments,
                offset: offset.nanos(),
                offset_split: from_nanos(offset.nanos()),
                head: None,
                live: false,
                first: None,
                last: i64::MIN,
                error: None,
                noted: 0,
                own: Vec::new(),
                acked: (0, false, 0),
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, input) in inputs.iter_mut().enumerate() {
            input.advance();
            if let Some(at) = input.head_at() {
                heap.push(Reverse((at, i)));
            }
        }
        MergedSegments {
            inputs,
            heap,
            next: None,
            seen: FxHashMap::default(),
            expiry: VecDeque::new(),
            coverage: FxHashMap::default(),
            coverage_sweep_at: COVERAGE_SWEEP_FIRST,
            losses: FxHashMap::default(),
            duplicates: 0,
            heads: Vec::new(),
        }
    }

    /// Each input's statistics, with the index of its first file among those given to
    /// [`open_files`] (its own index when merged with [`MergedSegments::new`]).
    pub fn file_stats(&self) -> Vec<(usize, super::CaptureStats)> {
        self.inputs
            .iter()
            .enumerate()
            .map(|(i, input)| (self.head_file(i), *input.segments.stats()))
            .collect()
    }

    /// The given file an input begins with.
    fn head_file(&self, input: usize) -> usize {
        self.heads.get(input).copied().unwrap_or(input)
    }

    /// Tells each file's capturing host's addresses, in the order of the files (see
    /// [`SegmentIndex::own_hosts`]). A file covers only connections with an end among them:
    /// a copy of another hosts' segment flooded to its port is passed on like any other, but
    /// the segments of that connection it lacks are not its capture's loss.
    pub fn set_own_hosts(&mut self, own: Vec<Vec<IpAddr>>) {
        for (input, own) in self.inputs.iter_mut().zip(own) {
            input.own = own;
        }
    }

    /// Capture losses found so far (complete once the merge has ended), per file and
    /// connection direction.
    pub fn losses(&self) -> Vec<Loss> {
        let mut v: Vec<Loss> = self
            .losses
            .iter()
            .map(|(&(file, src, dst), &(segments, bytes))| Loss {
                file: self.head_file(file),
                src,
                dst,
                segments,
                bytes,
            })
            .collect();
        v.sort_by_key(|l| (l.file, l.src, l.dst));
        v
    }

    /// Forgets segments older than the window before `now`, counting those a covering file
    /// lacked.
    fn expire(&mut self, now: i64) {
        while let Some(&(at, fp)) = self.expiry.front() {
            if at > now.saturating_sub(DEDUP_WINDOW_NANOS) && self.expiry.len() < DEDUP_CAPACITY {
                break;
            }
            self.expiry.pop_front();
            let Some(seen) = self.seen.remove(&fp) else {
                continue;
            };
            let Some(c) = self.coverage.get(&seen.conn) else {
                continue;
            };
            // Files that cover the connection but hold no copy (usually none). One holding
            // fewer copies of a retransmitted segment than another is not charged: the
            // network, not its capture, most likely lost the copy it lacks (which is why the
            // segment was sent again).
            let lacking = c.files & !seen.files;
            if lacking == 0 {
                continue;
            }
            let (src, dst) = if seen.reverse {
                (c.hi, c.lo)
            } else {
                (c.lo, c.hi)
            };
            // Its receiver acknowledged it (in any file): it arrived.
            let delivered = acks(c.acked[usize::from(!seen.reverse)], seen.end);
            for (i, input) in self.inputs.iter().enumerate() {
                if lacking & (1u64 << i) == 0 {
                    continue;
                }
                // The receiver's own capture lacks what the receiver never acknowledged: the
                // network lost it (sent into a partition), not the capture.
                if !delivered && input.own.contains(&dst.ip()) {
                    continue;
                }
                // Only while that file was capturing.
                let capturing =
                    input.first.is_some_and(|f| f <= seen.at) && (input.last >= seen.at);
                if capturing {
                    let e = self.losses.entry((i, src, dst)).or_default();
                    e.0 += 1;
                    e.1 += seen.bytes;
                }
            }
        }
    }

    fn note_coverage(
        &mut self,
        conn: u64,
        file: usize,
        at: i64,
        (src, dst): (SocketAddr, SocketAddr),
    ) {
        let own = &self.inputs[file].own;
        let covers = own.is_empty() || own.contains(&src.ip()) || own.contains(&dst.ip());
        let e = self.coverage.entry(conn).or_insert_with(|| Coverage {
            files: 0,
            latest: at,
            lo: src.min(dst),
            hi: src.max(dst),
            acked: [None; 2],
        });
        if covers {
            e.files |= 1 << file;
        }
        e.latest = at;
        if self.coverage.len() > self.coverage_sweep_at {
            let horizon = at.saturating_sub(10 * DEDUP_WINDOW_NANOS);
            self.coverage.retain(|_, c| c.latest >= horizon);
            // Entries may have gone: every file notes its next segment's connection again.
            for input in &mut self.inputs {
                input.noted = 0;
            }
            if self.coverage.len() > COVERAGE_CAPACITY / 2 {
                self.coverage.clear();
            }
            self.coverage_sweep_at =
                (2 * self.coverage.len()).clamp(COVERAGE_SWEEP_FIRST, COVERAGE_CAPACITY);
        }
    }

    /// The next segment to pass on, or an error, or the end.
    fn next_head(&mut self) -> Option<Result<(usize, bool), CaptureError>> {
        let Some((at, i)) = self.next.take().or_else(|| self.heap.pop().map(|r| r.0)) else {
            self.expire(i64::MAX);
            // A file that ended with an error (say, cut short) does not stop the others:
            // its error comes after everything else, naming the file.
            for input in &mut self.inputs {
                if let Some(e) = input.error.take() {
                    return Some(Err(CaptureError::InFile {
                        path: input.name.clone(),
                        source: Box::new(e),
                    }));
                }
            }
            return None;
        };
        self.expire(at);
        let input = &self.inputs[i];
        let (fp, conn, note, reverse, bytes, end, ack) = input.with_head(|seg| {
            let fp = fingerprint(seg);
            // Pure ACKs are neither compared nor counted (coverage comes from the others),
            // but what they acknowledge is kept.
            let own_ack =
                seg.ack.is_some() && (input.own.is_empty() || input.own.contains(&seg.src.ip()));
            let conn = if fp.is_some() || own_ack {
                connection_hash(seg.src, seg.dst)
            } else {
                0
            };
            // The addresses are copied out only when the coverage table needs them.
            let note = (fp.is_some() && input.noted != conn).then_some((seg.src, seg.dst));
            let bytes = seg.payload.len() as u64 + u64::from(seg.missing);
            let end = seg
                .seq
                .wrapping_add(bytes as u32)
                .wrapping_add(u32::from(seg.syn) + u32::from(seg.fin));
            // An acknowledgement is taken from its sender's own capture, where there is one
            // (it is in the receiver's too), and only when it moved.
            let reverse = seg.src > seg.dst;
            let ack = seg
                .ack
                .filter(|&a| own_ack && input.acked != (conn, reverse, a));
            (fp, conn, note, reverse, bytes, end, ack)
        })?;
        if let Some(ack) = ack {
            self.inputs[i].acked = (conn, reverse, ack);
            if let Some(c) = self.coverage.get_mut(&conn) {
                let side = &mut c.acked[usize::from(reverse)];
                if !acks(*side, ack) {
                    *side = Some(ack);
                }
            }
        }
        let keep = match fp {
            None => true,
            Some(fp) => match self.seen.get_mut(&fp) {
                Some(s) if s.first == i => {
                    s.kept += 1;
                    true
                }
                Some(s) => {
                    s.files |= 1 << i;
                    // The n-th copy in another file is the n-th copy passed on; one
                    // beyond those is a retransmission the first file did not hold.
                    let slot = s
                        .others
                        .iter()
                        .position(|o| o.0 as usize == i && o.1 > 0)
                        .or_else(|| s.others.iter().position(|o| o.1 == 0));
                    match slot {
                        Some(k) => {
                            s.others[k] = (i as u8, s.others[k].1 + 1);
                            if s.others[k].1 > s.kept {
                                s.kept += 1;
                                true
                            } else {
                                false
                            }
                        }
                        None => false,
                    }
                }
                None => {
                    self.seen.insert(
                        fp,
                        Seen {
                            at,
                            files: 1 << i,
                            first: i,
                            kept: 1,
                            others: [(0, 0); 3],
                            conn,
                            reverse,
                            bytes,
                            end,
                        },
                    );
                    self.expiry.push_back((at, fp));
                    true
                }
            },
        };
        if let Some(addrs) = note {
            self.inputs[i].noted = conn;
            self.note_coverage(conn, i, at, addrs);
        }
        if !keep {
            self.duplicates += 1;
        }
        Some(Ok((i, keep)))
    }
}

impl SegmentSource for MergedSegments {
    fn next_segment<F: FnMut(&TcpSegmentRef<'_>)>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        self.segments_while(|seg| {
            f(seg);
            false
        })
    }

    fn segments_while<F: FnMut(&TcpSegmentRef<'_>) -> bool>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        loop {
            let (i, keep) = match self.next_head()? {
                Ok(x) => x,
                Err(e) => return Some(Err(e)),
            };
            let input = &mut self.inputs[i];
            // A copy dropped as a duplicate is skipped; a kept segment ends the loop unless
            // `f` wants more.
            let more = !keep || input.with_head(&mut f).unwrap_or(false);
            input.advance();
            if let Some(at) = input.head_at() {
                let head = (at, i);
                if self.heap.peek().is_none_or(|Reverse(top)| head <= *top) {
                    self.next = Some(head);
                } else {
                    self.heap.push(Reverse(head));
                }
            }
            if !more {
                return Some(Ok(()));
            }
        }
    }
}

/// A file given twice (a shell glob and a name, a link, `./` before it) would be merged with
/// itself: the same story, at several times the cost of reading it once. Files that cannot be
/// looked at are left to the open that follows, and its error.
fn refuse_same_file(paths: &[String]) -> Result<(), CaptureError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mut seen: Vec<((u64, u64), &String)> = Vec::with_capacity(paths.len());
        for path in paths {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let id = (meta.dev(), meta.ino());
            if let Some((_, first)) = seen.iter().find(|(seen_id, _)| *seen_id == id) {
                return Err(CaptureError::SameFile {
                    path: path.clone(),
                    first: (*first).clone(),
                });
            }
            seen.push((id, path));
        }
    }
    Ok(())
}

/// The files that are one capture cut into several, as chains of file indices in order: a
/// ring of `tcpdump -C`/`-W` or `-G` files of one host. A file continues another when both
/// were read to their end, it shares no segment with it, has the same capturing host (or
/// one of them tells none, as on loopback), and begins after the other ends; of several, the latest to
/// end. Every other file is a chain of its own. Chains come in the order of their first
/// given file. `ended[i]`: file i was indexed whole.
pub fn rotation_chains(indexes: &[SegmentIndex], ended: &[bool]) -> Vec<Vec<usize>> {
    let n = indexes.len();
    let mut by_start: Vec<usize> = (0..n).filter(|&i| indexes[i].span.is_some()).collect();
    by_start.sort_by_key(|&i| indexes[i].span.map(|s| s.0));
    let mut next: Vec<Option<usize>> = vec![None; n];
    let mut continues = vec![false; n];
    for &j in &by_start {
        if !ended[j] {
            continue;
        }
        let Some((start, _)) = indexes[j].span else {
            continue;
        };
        let own = indexes[j].own_hosts();
        let before = by_start
            .iter()
            .copied()
            .filter(|&i| {
                i != j
                    && ended[i]
                    && next[i].is_none()
                    && {
                        let theirs = indexes[i].own_hosts();
                        theirs == own || theirs.is_empty() || own.is_empty()
                    }
                    && indexes[i].span.is_some_and(|(_, end)| end <= start)
                    && estimate_pair(&indexes[i], &indexes[j]).is_none()
            })
            .max_by_key(|&i| indexes[i].span.map(|s| s.1));
        if let Some(i) = before {
            next[i] = Some(j);
            continues[j] = true;
        }
    }
    let mut chains = Vec::new();
    for (i, _) in continues.iter().enumerate().filter(|(_, c)| !**c) {
        let mut chain = vec![i];
        let mut at = i;
        while let Some(j) = next[at] {
            chain.push(j);
            at = j;
        }
        chains.push(chain);
    }
    // The chain of the first file given is the reference, as the first file is otherwise.
    chains.sort_by_key(|c| c.iter().copied().min());
    chains
}

/// Reads every file once to index its segments (pass 1), aligns the clocks, and opens them
/// again merged (pass 2). `fixed[i]` overrides file i's offset (nanoseconds). A file that
/// fails part-way is indexed up to the failure; its error comes out of the merge.
pub fn open_files(
    paths: &[String],
    fixed: &[Option<i64>],
) -> Result<(MergedSegments, Vec<ClockOffset>), CaptureError> {
    if paths.len() > MAX_FILES {
        return Err(CaptureError::InFile {
            path: paths[MAX_FILES].clone(),
            source: Box::new(CaptureError::Open {
                path: paths[MAX_FILES].clone(),
                source: std::io::Error::other(format!("at most {MAX_FILES} files are merged")),
            }),
        });
    }
    refuse_same_file(paths)?;
    let in_file = |path: &String, e: CaptureError| CaptureError::InFile {
        path: path.clone(),
        source: Box::new(e),
    };
    // Pass 1 reads only as much of each file as the alignment needs: the offsets are constants
    // per file, so a prefix shared by the files tells them as well as the whole would. It reads
    // twice as far each round while the estimate improves (an error bound cannot shrink
    // below the hosts' round-trip time, however many segments are read), and files that stay
    // unaligned to their end if need be.
    let mut readers = Vec::with_capacity(paths.len());
    for path in paths {
        readers.push(Some(super::open(path).map_err(|e| in_file(path, e))?));
    }
    let mut indexes: Vec<SegmentIndex> = paths.iter().map(|_| SegmentIndex::default()).collect();
    let mut ended = vec![false; paths.len()];
    let mut budget = INDEX_FIRST;
    let mut worst_before: Option<i64> = None;
    let offsets = loop {
        for ((reader, index), ended) in readers.iter_mut().zip(&mut indexes).zip(&mut ended) {
            let Some(segments) = reader else { continue };
            while index.segments < budget {
                match segments.next_with(|seg| index.add(seg)) {
                    Some(Ok(())) => {}
                    // The end, or an error the merge will report: this file is read.
                    _ => {
                        *reader = None;
                        *ended = true;
                        break;
                    }
                }
            }
        }
        let offsets = align(&indexes, fixed);
        if readers.iter().all(Option::is_none) {
            break offsets;
        }
        // An unaligned file may meet the others further on in any file still open.
        if !offsets.contains(&ClockOffset::Unaligned) {
            let worst = offsets
                .iter()
                .map(|o| match o {
                    ClockOffset::Estimated { error, .. } => *error,
                    _ => 0,
                })
                .max()
                .unwrap_or(0);
            let settled = worst_before.is_some_and(|before| worst * 10 > before * 9);
            if worst == 0 || settled || budget >= INDEX_BUDGET {
                break offsets;
            }
            worst_before = Some(worst);
        }
        budget = budget.saturating_mul(2);
    };
    drop(readers);
    // Files that stayed unaligned were read to their end: one host's capture cut into several
    // is read as one, aligned as one.
    let chains = if offsets.contains(&ClockOffset::Unaligned) {
        rotation_chains(&indexes, &ended)
    } else {
        (0..paths.len()).map(|i| vec![i]).collect()
    };
    let (offsets, indexes) = if chains.len() < paths.len() {
        let mut slots: Vec<Option<SegmentIndex>> = indexes.into_iter().map(Some).collect();
        let mut joined = Vec::with_capacity(chains.len());
        let mut chain_fixed = Vec::with_capacity(chains.len());
        for chain in &chains {
            let mut index = slots[chain[0]].take().unwrap_or_default();
            for &j in &chain[1..] {
                index.absorb(slots[j].take().unwrap_or_default());
            }
            joined.push(index);
            chain_fixed.push(fixed.get(chain[0]).copied().flatten());
        }
        let chain_offsets = align(&joined, &chain_fixed);
        let mut offsets = vec![ClockOffset::Unaligned; paths.len()];
        for (chain, offset) in chains.iter().zip(&chain_offsets) {
            offsets[chain[0]] = *offset;
            for pair in chain.windows(2) {
                offsets[pair[1]] = ClockOffset::Continues {
                    file: pair[0],
                    offset: offset.nanos(),
                };
            }
        }
        (offsets, joined)
    } else {
        (offsets, indexes)
    };
    let mut files = Vec::with_capacity(chains.len());
    for chain in &chains {
        let head = &paths[chain[0]];
        let segments = if chain.len() == 1 {
            super::open(head).map_err(|e| in_file(head, e))?
        } else {
            let parts: Vec<String> = chain.iter().map(|&i| paths[i].clone()).collect();
            TcpSegments::chain(&parts)?
        };
        files.push((head.clone(), segments, offsets[chain[0]]));
    }
    let mut merged = MergedSegments::new(files);
    merged.set_own_hosts(indexes.iter().map(SegmentIndex::own_hosts).collect());
    merged.heads = chains.iter().map(|c| c[0]).collect();
    Ok((merged, offsets))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::io::Cursor;

    use proptest::prelude::*;

    use super::*;
    use crate::capture::testutil::{Link, Rec, frame, pcap, seg};

    /// A conversation between two hosts: (sent by A?, send time ns, one-way delay ns), sends
    /// 6 to 50 ms apart, longer than any transit, so that which file was capturing when is
    /// clear despite the clock error.
    fn exchange() -> impl Strategy<Value = Vec<(bool, i64, i64)>> {
        exchange_of(4..60)
    }

    /// [`exchange`] of so many messages.
    fn exchange_of(
        messages: std::ops::Range<usize>,
    ) -> impl Strategy<Value = Vec<(bool, i64, i64)>> {
        proptest::collection::vec(
            (any::<bool>(), 6_000_000i64..50_000_000, 1i64..5_000_000),
            messages,
        )
        .prop_map(|v| {
            let mut at = 0;
            v.into_iter()
                .map(|(a, gap, delay)| {
                    at += gap;
                    (a, at, delay)
                })
                .collect()
        })
    }

    /// The segments of `msgs` as each host's capture records them: A's clock true, B's
    /// `ahead` ns ahead. Both hosts see every segment, sender at sending, receiver later.
    fn captures(msgs: &[(bool, i64, i64)], ahead: i64) -> (Vec<TcpSegment>, Vec<TcpSegment>) {
        let base = 1_700_000_000_000_000_000i64;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (i, &(from_a, sent, delay)) in msgs.iter().enumerate() {
            let (src, dst) = if from_a {
                ("10.0.0.1:40000", "10.0.0.2:3888")
            } else {
                ("10.0.0.2:3888", "10.0.0.1:40000")
            };
            let mut s = seg(src, dst, 1000 + 10 * i as u32, &[i as u8; 10]);
            let (t_a, t_b) = if from_a {
                (sent, sent + delay)
            } else {
                (sent + delay, sent)
            };
            s.time = from_nanos(base + t_a);
            a.push(s.clone());
            s.time = from_nanos(base + t_b + ahead);
            b.push(s);
        }
        a.sort_by_key(|s| s.time);
        b.sort_by_key(|s| s.time);
        (a, b)
    }

    fn index(segs: &[TcpSegment]) -> SegmentIndex {
        let mut i = SegmentIndex::default();
        for s in segs {
            i.add(&s.as_ref());
        }
        i
    }

    fn file(segs: &[TcpSegment]) -> Vec<u8> {
        let recs: Vec<Rec> = segs
            .iter()
            .map(|s| {
                let (_, data) = frame(Link::Ethernet, s);
                Rec::new(s.time.secs as u32, s.time.nanos / 1000, data)
            })
            .collect();
        pcap(false, false, 1, &recs)
    }

    fn open(bytes: Vec<u8>) -> TcpSegments {
        TcpSegments::from_reader(Cursor::new(bytes)).unwrap()
    }

    proptest! {
        /// Shifting a time without a division gives what the plain arithmetic gives,
        /// saturation included.
        #[test]
        fn shift_is_plain_arithmetic(
            secs in prop_oneof![-(1i64 << 33)..(1i64 << 33), any::<i64>()],
            part in 0u32..1_000_000_000,
            offset in prop_oneof![-(1i64 << 62)..(1i64 << 62), any::<i64>()],
        ) {
            let t = Timestamp { secs, nanos: part };
            let at = nanos(t).saturating_add(offset);
            prop_assert_eq!(shift(t, offset, from_nanos(offset)), (at, from_nanos(at)));
        }

        /// The true offset always lies within the estimate's error bounds, and the bounds are
        /// no wider than the slowest transit.
        #[test]
        fn pair_estimate_brackets_the_true_offset(
            msgs in exchange(),
            ahead in -1_000_000_000i64..1_000_000_000,
        ) {
            prop_assume!(msgs.iter().any(|m| m.0) && msgs.iter().any(|m| !m.0));
            let (a, b) = captures(&msgs, ahead);
            let e = estimate_pair(&index(&a), &index(&b)).expect("both directions shared");
            prop_assert!((e.ahead - ahead).abs() <= e.error + 1, "{e:?} vs {ahead}");
            let slowest = msgs.iter().map(|m| m.2).max().unwrap();
            prop_assert!(e.error <= slowest);
            prop_assert_eq!(e.shared, msgs.len());
            // And the other way round.
            let back = estimate_pair(&index(&b), &index(&a)).unwrap();
            prop_assert!((back.ahead + ahead).abs() <= back.error + 1);
        }

        /// Copies of a third host's segments that a bridge flooded to both hosts' ports (each
        /// captured by both within a transit of the other) do not move the estimate: only
        /// what the two hosts sent each other bounds it, once each file's own host is known.
        #[test]
        fn flooded_copies_do_not_move_the_estimate(
            msgs in exchange_of(32..60),
            ahead in -1_000_000_000i64..1_000_000_000,
            flooded in proptest::collection::vec((0i64..1_000_000_000, -2_000_000i64..2_000_000), 1..8),
        ) {
            prop_assume!(msgs.iter().any(|m| m.0) && msgs.iter().any(|m| !m.0));
            let (mut a, mut b) = captures(&msgs, ahead);
            // Each host also talks to a peer of its own, as in an ensemble, so that its own
            // address is at an end of more of its file's segments than the other's.
            for (file, own, peer) in [(&mut a, "10.0.0.1:40001", "10.0.0.5:3888"), (&mut b, "10.0.0.2:40001", "10.0.0.6:3888")] {
                let own_talk: Vec<TcpSegment> = file
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let mut t = seg(own, peer, 90_000 + 10 * i as u32, b"own");
                        t.time = s.time;
                        t
                    })
                    .collect();
                file.extend(own_talk);
            }
            let base = 1_700_000_000_000_000_000i64;
            for (i, &(at, skew)) in flooded.iter().enumerate() {
                let mut s = seg("10.0.0.3:40000", "10.0.0.4:3888", 50_000 + 10 * i as u32, b"flooded");
                s.time = from_nanos(base + at);
                a.push(s.clone());
                s.time = from_nanos(base + at + ahead + skew);
                b.push(s);
            }
            a.sort_by_key(|s| s.time);
            b.sort_by_key(|s| s.time);
            let e = estimate_pair(&index(&a), &index(&b)).expect("both directions shared");
            prop_assert!((e.ahead - ahead).abs() <= e.error + 1, "{e:?} vs {ahead}");
            let slowest = msgs.iter().map(|m| m.2).max().unwrap();
            prop_assert!(e.error <= slowest);
        }

        /// Merging two hosts' captures (each missing some segments, clocks apart) gives every
        /// segment once, in true-time order, and counts what each file lacked.
        #[test]
        fn merge_gives_each_segment_once_and_counts_losses(
            msgs in exchange(),
            ahead in -300_000_000i64..300_000_000,
            lost_a in proptest::collection::vec(any::<bool>(), 60),
            lost_b in proptest::collection::vec(any::<bool>(), 60),
        ) {
            let n = msgs.len();
            prop_assume!(msgs.iter().any(|m| m.0) && msgs.iter().any(|m| !m.0));
            let (a, b) = captures(&msgs, ahead);
            // Each copy may be lost in one file, not in both; the first and last of each file
            // stay (a loss is only counted while the file was capturing), and so does enough
            // of both directions for the offset.
            let key = |s: &TcpSegment| s.seq;
            let drop_a: HashSet<u32> = a.iter().enumerate()
                .filter(|(i, _)| *i > 1 && *i + 2 < n && lost_a[*i] && *i % 3 != 0)
                .map(|(_, s)| key(s)).collect();
            let drop_b: HashSet<u32> = b.iter().enumerate()
                .filter(|(i, s)| *i > 1 && *i + 2 < n && lost_b[*i] && *i % 3 != 1 && !drop_a.contains(&key(s)))
                .map(|(_, s)| key(s)).collect();
            let fa: Vec<TcpSegment> = a.iter().filter(|s| !drop_a.contains(&key(s))).cloned().collect();
            let fb: Vec<TcpSegment> = b.iter().filter(|s| !drop_b.contains(&key(s))).cloned().collect();
            let offsets = align(&[index(&fa), index(&fb)], &[None, None]);
            let mut merged = MergedSegments::new(vec![
                ("a".into(), open(file(&fa)), offsets[0]),
                ("b".into(), open(file(&fb)), offsets.get(1).copied().unwrap_or(ClockOffset::Unaligned)),
            ]);
            let mut out = Vec::new();
            while let Some(r) = merged.next_segment(|s| out.push(s.to_segment())) {
                r.unwrap();
            }
            let mut seqs: Vec<u32> = out.iter().map(key).collect();
            seqs.sort_unstable();
            let want: Vec<u32> = (0..n as u32).map(|i| 1000 + 10 * i).collect();
            prop_assert_eq!(seqs, want);
            if let ClockOffset::Estimated { error, .. } = offsets[1] {
                // Within the clock error, times never go backwards.
                for w in out.windows(2) {
                    prop_assert!(nanos(w[1].time) + error >= nanos(w[0].time));
                }
            }
            // Losses are counted while a file was capturing, which needs the clocks aligned
            // (the drops may leave one direction unshared).
            if matches!(offsets[1], ClockOffset::Estimated { .. }) {
                let losses = merged.losses();
                let lost = |f: usize| {
                    losses.iter().filter(|l| l.file == f).map(|l| l.segments).sum::<u64>()
                };
                prop_assert_eq!(lost(0), drop_a.len() as u64);
                prop_assert_eq!(lost(1), drop_b.len() as u64);
            }
        }

        /// gzip and zstd captures read exactly as the plain file.
        #[test]
        fn compressed_captures_read_as_plain(msgs in exchange(), level in 1i32..9) {
            use std::io::Write;
            let (a, _) = captures(&msgs, 0);
            let plain = file(&a);
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level as u32));
            gz.write_all(&plain).unwrap();
            let gz = gz.finish().unwrap();
            let zst = zstd::encode_all(Cursor::new(plain.clone()), level).unwrap();
            let read = |bytes: Vec<u8>| -> Vec<TcpSegment> {
                open(bytes).map(|s| s.unwrap()).collect()
            };
            let want = read(plain);
            prop_assert_eq!(read(gz), want.clone());
            prop_assert_eq!(read(zst), want);
        }

        /// Noise after a gzip or zstd magic is an error (or an empty capture), never a panic.
        #[test]
        fn noise_after_compression_magic_never_panics(
            noise in proptest::collection::vec(any::<u8>(), 0..400),
            zstd_magic in any::<bool>(),
        ) {
            let mut bytes = if zstd_magic { vec![0x28, 0xb5, 0x2f, 0xfd] } else { vec![0x1f, 0x8b] };
            bytes.extend_from_slice(&noise);
            if let Ok(it) = TcpSegments::from_reader(Cursor::new(bytes)) {
                for _ in it {}
            }
        }
    }

    /// A segment its receiver's capture lacks is that capture's loss when the receiver
    /// acknowledged it (it arrived), and the network's when it never did (sent into a
    /// partition): only the first is reported.
    #[test]
    fn what_the_receiver_never_acknowledged_is_not_its_capture_loss() {
        let base = 1_700_000_000_000_000_000i64;
        for acked in [true, false] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            // A request/answer exchange, 10 ms apart, 1 ms each way; B acknowledges what A
            // sent with each answer. One of A's requests is missing from B's capture: B
            // acknowledged it (`acked`) or never got it.
            let mut a_next = 1000u32;
            let mut b_next = 5000u32;
            // Without it, B's acknowledgements stay at the hole (TCP's are cumulative).
            let mut hole = None;
            for i in 0..40i64 {
                let mut q = seg("10.0.0.1:40000", "10.0.0.2:3888", a_next, &[i as u8; 10]);
                q.ack = Some(b_next);
                q.time = from_nanos(base + i * 20_000_000);
                a.push(q.clone());
                if i == 20 {
                    hole = (!acked).then_some(a_next);
                } else {
                    q.time = from_nanos(base + i * 20_000_000 + 1_000_000);
                    b.push(q);
                }
                a_next += 10;
                let mut r = seg("10.0.0.2:3888", "10.0.0.1:40000", b_next, &[i as u8; 12]);
                r.ack = Some(hole.unwrap_or(a_next));
                b_next += 12;
                r.time = from_nanos(base + i * 20_000_000 + 10_000_000);
                b.push(r.clone());
                r.time = from_nanos(base + i * 20_000_000 + 11_000_000);
                a.push(r);
                // Each host talks with a third too, so that its own address is the one at
                // an end of everything its capture holds.
                for (file, host) in [(&mut a, "10.0.0.1:41000"), (&mut b, "10.0.0.2:41000")] {
                    let mut c = seg(host, "10.0.0.3:3888", 9000 + 7 * i as u32, &[7; 7]);
                    c.time = from_nanos(base + i * 20_000_000 + 15_000_000);
                    file.push(c);
                }
            }
            let offsets = align(&[index(&a), index(&b)], &[None, None]);
            let mut merged = MergedSegments::new(vec![
                ("a".into(), open(file(&a)), offsets[0]),
                ("b".into(), open(file(&b)), offsets[1]),
            ]);
            merged.set_own_hosts(vec![index(&a).own_hosts(), index(&b).own_hosts()]);
            while let Some(r) = merged.next_segment(|_| {}) {
                r.unwrap();
            }
            let lost: u64 = merged.losses().iter().map(|l| l.segments).sum();
            assert_eq!(lost, u64::from(acked), "acked: {acked}");
        }
    }

    /// A per-host capture's own address is the one at an end of most segments, copies of
    /// other hosts' segments flooded to it (a bridge forgetting a cut-off host) included; a
    /// capture of a whole ensemble has none, and neither has one too short to tell.
    #[test]
    fn a_per_host_capture_tells_its_own_address() {
        let index = |segs: &[(&str, &str)]| {
            let mut index = SegmentIndex::default();
            for (i, (src, dst)) in segs.iter().enumerate() {
                index.add(&seg(src, dst, i as u32, b"x").as_ref());
            }
            index
        };
        let mut host1 = Vec::new();
        for i in 0..40 {
            let peer = ["10.0.0.2:3888", "10.0.0.3:3888", "10.0.0.4:3888"][i % 3];
            host1.push(if i % 2 == 0 {
                ("10.0.0.1:40000", peer)
            } else {
                (peer, "10.0.0.1:40000")
            });
        }
        // Flooded copies of a 2-3 connection: a tenth of what it holds.
        host1.extend([("10.0.0.2:50000", "10.0.0.3:3888"); 4]);
        let own: Vec<IpAddr> = vec!["10.0.0.1".parse().unwrap()];
        assert_eq!(index(&host1).own_hosts(), own);

        let mut all = Vec::new();
        for i in 0..60 {
            let pair = [
                ("10.0.0.1:40000", "10.0.0.2:3888"),
                ("10.0.0.2:40000", "10.0.0.3:3888"),
                ("10.0.0.3:40000", "10.0.0.1:3888"),
            ][i % 3];
            all.push(pair);
        }
        assert_eq!(index(&all).own_hosts(), Vec::<IpAddr>::new());
        assert_eq!(index(&host1[..20]).own_hosts(), Vec::<IpAddr>::new());
    }

    #[test]
    fn a_file_sharing_nothing_is_unaligned() {
        let msgs = [(true, 0, 1000), (false, 5000, 1000), (true, 9000, 1000)];
        let (a, b) = captures(&msgs, 42);
        let (c, _) = captures(&msgs, 0);
        // c is another conversation: other sequence numbers.
        let c: Vec<TcpSegment> = c
            .into_iter()
            .map(|mut s| {
                s.seq += 7;
                s
            })
            .collect();
        let offsets = align(&[index(&a), index(&b), index(&c)], &[None, None, None]);
        assert!(matches!(
            offsets[0],
            ClockOffset::Estimated {
                offset: 0,
                error: 0
            }
        ));
        assert!(matches!(offsets[1], ClockOffset::Estimated { .. }));
        assert_eq!(offsets[2], ClockOffset::Unaligned);
        // A given offset is a reference too.
        let offsets = align(&[index(&a), index(&b), index(&c)], &[None, Some(-42), None]);
        assert_eq!(offsets[1], ClockOffset::Fixed { offset: -42 });
        assert!(
            matches!(offsets[0], ClockOffset::Estimated { offset, .. } if offset.abs() <= 1000)
        );
    }

    #[test]
    fn hints_name_other_formats() {
        use crate::capture::reader::magic_hint;
        assert!(magic_hint(b"BZh91AY&").unwrap().contains("bzip2"));
        assert!(
            magic_hint(&[0xfd, b'7', b'z', b'X', b'Z', 0, 0, 0])
                .unwrap()
                .contains("xz")
        );
        assert!(magic_hint(b"PK\x03\x04").unwrap().contains("zip"));
        assert!(magic_hint(b"12:00:01").unwrap().contains("text"));
        assert_eq!(magic_hint(&[0, 1, 2, 3]), None);
    }
}
