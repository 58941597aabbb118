//! Per-connection, per-direction TCP stream reassembly.
//!
//! Each direction of a connection is an independent byte stream with its own sequence space.
//! Sequence numbers are mapped to 64-bit stream offsets (offset 0 = the byte after the SYN, or
//! the first byte seen for a connection picked up mid-stream) by taking the 32-bit difference
//! to the next expected byte as a signed number, so wrap-around past `u32::MAX` is invisible.
//!
//! Out-of-order data is held in a per-direction map of non-overlapping chunks keyed by stream
//! offset. Overlaps are resolved **first-seen wins**: a retransmission only contributes bytes
//! not already buffered or delivered (delivered bytes can never change anyway, and holding to
//! one rule keeps buffered and delivered data consistent).

use std::collections::{BTreeMap, VecDeque};

// Connection tables are looked up for every segment; Fx hashing is several times cheaper
// than SipHash there, and the keys (addresses from the capture) do not need DoS resistance
// beyond the table bounds already enforced.
use rustc_hash::FxHashMap as HashMap;

/// A hash table whose entries sit side by side in a dense list (entries removed by swapping
/// the last one in): for the per-connection states that every segment reaches.
pub(crate) type ConnTable<K, V> = indexmap::IndexMap<K, V, rustc_hash::FxBuildHasher>;
use std::net::SocketAddr;

use super::packet::{TcpSegment, TcpSegmentRef, Timestamp};

/// Identifies one connection for the lifetime of a [`Reassembler`]. Ids are never reused,
/// even when a 4-tuple is (port reuse gives the new connection a new id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// Which way bytes flow within a connection: the one `Direction`, [`crate::wire`]'s (the
/// election codec decodes each direction differently, so it names them first).
pub use crate::wire::Direction;

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseKind {
    /// Both sides sent FIN (the connection is closed once both streams reach their FIN, or at
    /// capture end if holes remained before a FIN).
    Fin,
    /// A RST was seen from either side.
    Rst,
    /// The capture ended while the connection was open (possibly half-closed by one FIN).
    CaptureEnd,
    /// Dropped to stay within [`ReassemblyConfig::max_connections`] (least recently used).
    Evicted,
    /// A SYN with a new initial sequence number arrived on the same 4-tuple: the old
    /// connection ends here and a new one (with a new id) starts.
    Reused,
}

/// What reassembly reports, in an order consistent with capture time.
///
/// Every `Opened` is followed, eventually, by exactly one `Closed` for the same connection
/// (even for [ignored](Reassembler::ignore) connections), the last time `finish` is called at
/// the latest. Between them, per direction, `Data` and `Gap` events tile the stream: each
/// starts at the offset where the previous one ended.
///
/// `B` is how `Data` holds its bytes: owned (`Vec<u8>`, the default, from
/// [`Reassembler::push`]) or lent (`&[u8]`, from [`Reassembler::push_with`], which hands
/// in-order payloads straight from the segment without copying them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent<B = Vec<u8>> {
    /// A new connection.
    Opened {
        /// Its id.
        conn: ConnId,
        /// The side that sent the SYN (or our guess, see `mid_stream`).
        initiator: SocketAddr,
        /// The other side.
        acceptor: SocketAddr,
        /// Time of the first segment seen.
        time: Timestamp,
        /// No SYN was seen: the connection started before the capture. The initiator is then
        /// guessed to be the side with the higher port (the ephemeral one) and each direction
        /// starts at the first byte seen, so earlier bytes are absent without a `Gap`.
        mid_stream: bool,
    },
    /// In-order bytes of one direction.
    Data {
        /// The connection.
        conn: ConnId,
        /// Which direction.
        dir: Direction,
        /// Time of the segment that made these bytes contiguous.
        time: Timestamp,
        /// Stream offset of `bytes[0]` in this direction.
        offset: u64,
        /// The bytes.
        bytes: B,
    },
    /// Bytes of one direction that will never be delivered (lost from the capture, beyond the
    /// snap length, or given up on because the out-of-order buffer filled).
    Gap {
        /// The connection.
        conn: ConnId,
        /// Which direction.
        dir: Direction,
        /// When the gap was declared.
        time: Timestamp,
        /// Stream offset where the gap starts.
        offset: u64,
        /// Number of missing bytes.
        missing: u64,
    },
    /// Bytes one direction sent waited [`UNACKNOWLEDGED_SECS`] or more for the other end's
    /// acknowledgement: a host cut off, powered off or gone, seen from the side still
    /// sending. Reported when an acknowledgement finally came (`acked`), or when the
    /// connection ended with them still waiting. A stopped process (SIGSTOP, a GC pause) is
    /// not one: its kernel still acknowledges.
    Unacknowledged {
        /// The connection.
        conn: ConnId,
        /// The direction whose bytes waited.
        dir: Direction,
        /// Since when: the first byte waiting, or the last acknowledgement that moved.
        since: Timestamp,
        /// When the wait ended: the acknowledgement, or the connection's end.
        time: Timestamp,
        /// Whether an acknowledgement ended it.
        acked: bool,
    },
    /// The connection ended; its id will not appear again.
    Closed {
        /// The connection.
        conn: ConnId,
        /// When.
        time: Timestamp,
        /// Why.
        how: CloseKind,
    },
}

impl StreamEvent<&[u8]> {
    /// The event with its bytes copied.
    pub fn to_owned_event(&self) -> StreamEvent {
        match *self {
            StreamEvent::Opened {
                conn,
                initiator,
                acceptor,
                time,
                mid_stream,
            } => StreamEvent::Opened {
                conn,
                initiator,
                acceptor,
                time,
                mid_stream,
            },
            StreamEvent::Data {
                conn,
                dir,
                time,
                offset,
                bytes,
            } => StreamEvent::Data {
                conn,
                dir,
                time,
                offset,
                bytes: bytes.to_vec(),
            },
            StreamEvent::Gap {
                conn,
                dir,
                time,
                offset,
                missing,
            } => StreamEvent::Gap {
                conn,
                dir,
                time,
                offset,
                missing,
            },
            StreamEvent::Unacknowledged {
                conn,
                dir,
                since,
                time,
                acked,
            } => StreamEvent::Unacknowledged {
                conn,
                dir,
                since,
                time,
                acked,
            },
            StreamEvent::Closed { conn, time, how } => StreamEvent::Closed { conn, time, how },
        }
    }
}

/// How long sent bytes may wait for their acknowledgement before
/// [`StreamEvent::Unacknowledged`] reports them: far above an ACK's usual delay (Linux delays
/// one at most 200 ms) and below the seconds a ZooKeeper server waits before giving up on a
/// peer (`syncLimit` ticks).
pub const UNACKNOWLEDGED_SECS: f64 = 1.0;

/// Limits for a [`Reassembler`]. Memory use is about
/// `max_connections * 2 * max_buffered_bytes` in the worst case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReassemblyConfig {
    /// Out-of-order bytes held per direction before the first hole is declared a gap.
    pub max_buffered_bytes: usize,
    /// Out-of-order chunks held per direction (bounds bookkeeping for tiny segments).
    pub max_buffered_chunks: usize,
    /// Open connections; opening one more evicts the least recently used.
    pub max_connections: usize,
    /// Recently closed 4-tuples remembered, so late retransmissions and the final ACKs of a
    /// closed connection do not open phantom mid-stream connections.
    pub max_closed_remembered: usize,
    /// How long (in capture time) a close is remembered at least, unless
    /// `max_closed_remembered` closes came after it; it is forgotten after at most twice
    /// this. Late segments of a closed connection come within TIME_WAIT (60 s on Linux, at
    /// most 2 MSL, 240 s, by RFC 9293); a tuple quiet for longer is free to carry a new
    /// connection, whose SYN may be missing from the capture.
    pub closed_remembered_for: std::time::Duration,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            max_buffered_bytes: 1024 * 1024,
            max_buffered_chunks: 4096,
            max_connections: 65536,
            max_closed_remembered: 65536,
            closed_remembered_for: std::time::Duration::from_secs(240),
        }
    }
}

/// Per-direction counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamInfo {
    /// Bytes delivered as `Data`.
    pub delivered: u64,
    /// Number of `Gap` events.
    pub gaps: u64,
    /// Bytes reported missing by `Gap` events.
    pub missing: u64,
    /// A FIN was seen in this direction.
    pub fin: bool,
}

/// What is known about an open connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    /// Its id.
    pub id: ConnId,
    /// The side that sent the SYN (or the guess, see [`StreamEvent::Opened`]).
    pub initiator: SocketAddr,
    /// The other side.
    pub acceptor: SocketAddr,
    /// Time of the first segment.
    pub opened: Timestamp,
    /// Time of the latest segment.
    pub last_seen: Timestamp,
    /// No SYN was seen; see [`StreamEvent::Opened`].
    pub mid_stream: bool,
    /// The caller asked to [`ignore`](Reassembler::ignore) it.
    pub ignored: bool,
    /// Counters, indexed by [`ConnInfo::stream`].
    streams: [StreamInfo; 2],
}

impl ConnInfo {
    /// Counters of one direction.
    pub fn stream(&self, dir: Direction) -> &StreamInfo {
        &self.streams[dir.index()]
    }
}

/// Reassembler-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Segments pushed.
    pub segments: u64,
    /// Connections opened.
    pub connections: u64,
    /// Segments that brought nothing new (duplicates, retransmissions of delivered bytes).
    pub duplicates: u64,
    /// Segments without payload or SYN on an unknown 4-tuple (e.g. a lone ACK); dropped.
    pub stray: u64,
    /// Segments on a recently closed 4-tuple without SYN; dropped.
    pub after_close: u64,
    /// SYNs that made no sense for the connection's state (e.g. a SYN-ACK with a new ISN
    /// from the side that sent the SYN); dropped.
    pub odd_syn: u64,
    /// Connections evicted to respect `max_connections`.
    pub evicted: u64,
}

/// A connection's 4-tuple, normalised so both directions map to the same key: the lower
/// endpoint (in the order of `SocketAddr`: address, then port) first. An IPv4 tuple, nearly
/// every one, is two words, both addresses in one and both ports in the other: built, compared
/// and hashed as two words, where a pair of `SocketAddr`s is 64 bytes and a match on their
/// variants. (A `SocketAddrV6`'s flow label and scope id are not part of a TCP tuple, and a
/// captured packet has none.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    V4 {
        /// The first endpoint's address above the second's.
        ips: u64,
        /// The first endpoint's port above the second's.
        ports: u32,
    },
    /// Two IPv6 endpoints, or one of each (from segments not read from a packet).
    Other {
        ips: [[u8; 16]; 2],
        ports: [u16; 2],
        /// Which endpoints are IPv4 addresses (bit 0 the first), kept as mapped IPv6 ones.
        v4: u8,
    },
}

/// Hashes the words that tell keys apart (consistent with `Eq`): the derived impl feeds the
/// hasher the variant and each field, and a key is hashed for every segment.
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            Key::V4 { ips, ports } => {
                h.write_u64(*ips);
                h.write_u32(*ports);
            }
            Key::Other { ips, ports, v4 } => {
                for ip in ips {
                    let b = u128::from_be_bytes(*ip);
                    h.write_u64((b as u64) ^ ((b >> 64) as u64).rotate_left(29));
                }
                h.write_u32((u32::from(ports[0]) << 16) | u32::from(ports[1]));
                h.write_u8(*v4 | 4);
            }
        }
    }
}

/// An IPv4 endpoint as one word, address above port: ordered as `SocketAddr` orders them.
fn v4_word(v: std::net::SocketAddrV4) -> u64 {
    (u64::from(v.ip().to_bits()) << 16) | u64::from(v.port())
}

impl Key {
    fn new(a: &SocketAddr, b: &SocketAddr) -> Key {
        if let (SocketAddr::V4(x), SocketAddr::V4(y)) = (a, b) {
            let (x, y) = (*x, *y);
            // Two IPv4 endpoints compared as words: the order of `SocketAddr`.
            let (first, second) = if v4_word(x) <= v4_word(y) {
                (x, y)
            } else {
                (y, x)
            };
            return Key::V4 {
                ips: (u64::from(first.ip().to_bits()) << 32) | u64::from(second.ip().to_bits()),
                ports: (u32::from(first.port()) << 16) | u32::from(second.port()),
            };
        }
        let (first, second) = if a <= b { (*a, *b) } else { (*b, *a) };
        let ip = |s: SocketAddr| match s.ip() {
            std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(v) => v.octets(),
        };
        Key::Other {
            ips: [ip(first), ip(second)],
            ports: [first.port(), second.port()],
            v4: u8::from(first.is_ipv4()) | (u8::from(second.is_ipv4()) << 1),
        }
    }

    /// The lower endpoint, or the higher one.
    fn endpoint(&self, second: bool) -> SocketAddr {
        match *self {
            Key::V4 { ips, ports } => {
                let (ip, port) = if second {
                    (ips as u32, ports as u16)
                } else {
                    ((ips >> 32) as u32, (ports >> 16) as u16)
                };
                SocketAddr::from((std::net::Ipv4Addr::from_bits(ip), port))
            }
            Key::Other { ips, ports, v4 } => {
                let i = usize::from(second);
                let ip = std::net::Ipv6Addr::from(ips[i]);
                match ip.to_ipv4_mapped() {
                    Some(ip4) if v4 & (1 << i) != 0 => SocketAddr::from((ip4, ports[i])),
                    _ => SocketAddr::from((ip, ports[i])),
                }
            }
        }
    }

    /// Whether `a` is the lower endpoint (compared packed, rather than unpacked into an
    /// address: a SYN-only connection asks it of every SYN).
    fn is_first(&self, a: &SocketAddr) -> bool {
        match (self, a) {
            (Key::V4 { ips, ports }, SocketAddr::V4(a)) => {
                a.ip().to_bits() == (ips >> 32) as u32 && a.port() == (ports >> 16) as u16
            }
            _ => self.first() == *a,
        }
    }

    /// The lower endpoint.
    fn first(&self) -> SocketAddr {
        self.endpoint(false)
    }

    /// The higher endpoint.
    #[cfg(test)]
    fn second(&self) -> SocketAddr {
        self.endpoint(true)
    }

    /// An IPv4 tuple in 12 bytes: both addresses in one word, both ports in the other.
    fn packed(&self) -> Option<(u64, u32)> {
        match *self {
            Key::V4 { ips, ports } => Some((ips, ports)),
            Key::Other { .. } => None,
        }
    }

    /// The key [`Key::packed`] was made from.
    fn unpacked((ips, ports): (u64, u32)) -> Key {
        Key::V4 { ips, ports }
    }
}

/// A table keyed by 4-tuple for the big tables (the closed tuples, the SYN-only connections):
/// IPv4 tuples packed in 12 bytes instead of a 64-byte [`Key`], so that an entry is about half
/// as big and the tables, touched once per connection and often cache-cold, stay small.
struct TupleMap<V> {
    v4: HashMap<(u64, u32), V>,
    /// Everything else (IPv6, mixed).
    other: HashMap<Key, V>,
}

impl<V> Default for TupleMap<V> {
    fn default() -> Self {
        TupleMap {
            v4: HashMap::default(),
            other: HashMap::default(),
        }
    }
}

impl<V> TupleMap<V> {
    fn get(&self, key: &Key) -> Option<&V> {
        match key.packed() {
            Some(k) => self.v4.get(&k),
            None => self.other.get(key),
        }
    }

    fn insert(&mut self, key: Key, value: V) {
        match key.packed() {
            Some(k) => self.v4.insert(k, value),
            None => self.other.insert(key, value),
        };
    }

    fn remove(&mut self, key: &Key) -> Option<V> {
        match key.packed() {
            Some(k) => self.v4.remove(&k),
            None => self.other.remove(key),
        }
    }

    fn len(&self) -> usize {
        self.v4.len() + self.other.len()
    }

    fn clear(&mut self) {
        self.v4.clear();
        self.other.clear();
    }
}

/// The SYN-only connections in arrival order, IPv4 tuples packed as in [`TupleMap`]: two
/// queues, merged by connection id (ids only grow) when popped.
#[derive(Default)]
struct SynOrder {
    v4: VecDeque<(ConnId, (u64, u32))>,
    other: VecDeque<(ConnId, Key)>,
}

impl SynOrder {
    fn push_back(&mut self, id: ConnId, key: Key) {
        match key.packed() {
            Some(k) => self.v4.push_back((id, k)),
            None => self.other.push_back((id, key)),
        }
    }

    /// The oldest entry.
    fn pop_front(&mut self) -> Option<(ConnId, Key)> {
        let v4_first = match (self.v4.front(), self.other.front()) {
            (Some(a), Some(b)) => a.0 < b.0,
            (a, _) => a.is_some(),
        };
        if v4_first {
            self.v4.pop_front().map(|(id, k)| (id, Key::unpacked(k)))
        } else {
            self.other.pop_front()
        }
    }

    fn len(&self) -> usize {
        self.v4.len() + self.other.len()
    }

    fn retain(&mut self, mut keep: impl FnMut(ConnId, &Key) -> bool) {
        self.v4.retain(|(id, k)| keep(*id, &Key::unpacked(*k)));
        self.other.retain(|(id, k)| keep(*id, k));
    }

    fn clear(&mut self) {
        self.v4.clear();
        self.other.clear();
    }
}

/// How many of the newest SYN-only connections wait in [`SynOnlyTable`]'s short list.
const RECENT_SYNS: usize = 8;

/// The connections seen only as a SYN so far, oldest dropped first beyond a cap. The newest
/// [`RECENT_SYNS`] wait in a short list before the table: a refused dial's reset follows its
/// SYN within a few other SYNs, and finds it there, so most SYN-only connections cost neither
/// an insert into the table nor a removal from it (a churn that leaves the table's tombstones
/// to rehash, and the table is cache-cold once big). Every entry of the list is newer than
/// every entry of the table, so dropping the table's oldest first, then the list's (the lowest
/// id), drops them in arrival order.
#[derive(Default)]
struct SynOnlyTable {
    /// The newest entries' [`tuple_tag`]s, scanned before their keys are compared.
    recent_tags: Vec<u64>,
    /// The newest entries, in no order (ids tell their age), beside their tags.
    recent: Vec<(Key, SynOnly)>,
    table: TupleMap<SynOnly>,
    /// `table`'s entries in arrival order (stale entries skipped).
    order: SynOrder,
}

/// A word that differs for most keys that differ, compared before the keys themselves.
fn tuple_tag(key: &Key) -> u64 {
    match key.packed() {
        Some((ips, ports)) => ips ^ u64::from(ports).rotate_left(32),
        None => u64::MAX,
    }
}

impl SynOnlyTable {
    fn len(&self) -> usize {
        self.recent.len() + self.table.len()
    }

    /// Takes out the entry of `key`, with whether it was in the short list.
    fn remove(&mut self, key: &Key) -> Option<(SynOnly, bool)> {
        let tag = tuple_tag(key);
        for (i, t) in self.recent_tags.iter().enumerate() {
            if *t == tag && self.recent[i].0 == *key {
                self.recent_tags.swap_remove(i);
                return Some((self.recent.swap_remove(i).1, true));
            }
        }
        if self.table.len() == 0 {
            return None;
        }
        self.table.remove(key).map(|s| (s, false))
    }

    /// Puts back where it was an entry [`SynOnlyTable::remove`] took out (the table's order
    /// still holds it).
    fn restore(&mut self, key: Key, s: SynOnly, recent: bool) {
        if recent {
            self.recent_tags.push(tuple_tag(&key));
            self.recent.push((key, s));
        } else {
            self.table.insert(key, s);
        }
    }

    /// The oldest entry of the short list, taken out of it.
    fn pop_oldest_recent(&mut self) -> Option<(Key, SynOnly)> {
        let (i, _) = self
            .recent
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, s))| s.id)?;
        self.recent_tags.swap_remove(i);
        Some(self.recent.swap_remove(i))
    }

    /// Adds the newest entry (for a key it does not hold), first dropping the oldest while it
    /// holds `cap` or more; returns how many were dropped.
    fn insert(&mut self, key: Key, s: SynOnly, cap: usize) -> u64 {
        let mut dropped = 0;
        while self.len() >= cap {
            if let Some((id, old)) = self.order.pop_front() {
                if self.table.get(&old).is_some_and(|s| s.id == id) {
                    self.table.remove(&old);
                    dropped += 1;
                }
            } else if self.pop_oldest_recent().is_some() {
                dropped += 1;
            } else {
                break;
            }
        }
        if self.recent.len() >= RECENT_SYNS
            && let Some((old, first)) = self.pop_oldest_recent()
        {
            self.order.push_back(first.id, old);
            self.table.insert(old, first);
            // Stale entries (opened or replaced since) are swept when they dominate.
            if self.order.len() > 2 * self.table.len() + 1024 {
                let table = &self.table;
                self.order
                    .retain(|id, k| table.get(k).is_some_and(|s| s.id == id));
            }
        }
        self.recent_tags.push(tuple_tag(&key));
        self.recent.push((key, s));
        dropped
    }

    fn clear(&mut self) {
        self.recent_tags.clear();
        self.recent.clear();
        self.table.clear();
        self.order.clear();
    }
}

/// An out-of-order range of one direction: bytes, or bytes known to be lost (snap length).
#[derive(Debug)]
enum Chunk {
    Data(Vec<u8>),
    Missing(u64),
}

impl Chunk {
    fn len(&self) -> u64 {
        match self {
            Chunk::Data(d) => d.len() as u64,
            Chunk::Missing(n) => *n,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Chunk::Data(d) => d.len(),
            Chunk::Missing(_) => 0,
        }
    }
}

/// Output of draining a direction, before it becomes events.
enum Piece {
    Data(u64, Vec<u8>),
    Gap(u64, u64),
}

/// One direction of a connection.
#[derive(Default)]
struct Half {
    /// Sequence number of stream offset 0; `None` until the direction is first seen.
    base: Option<u32>,
    /// Sequence number of the SYN, when seen.
    isn: Option<u32>,
    /// Offset of the next byte to deliver.
    offset: u64,
    /// Out-of-order chunks, all starting at or after `offset`, non-overlapping.
    pending: BTreeMap<u64, Chunk>,
    pending_bytes: usize,
    /// Stream offset of the FIN, once seen.
    fin_at: Option<u64>,
    /// What this direction sent and the other end acknowledged.
    acks: AckState,
}

/// A direction's acknowledgements, by raw sequence number (so a connection joined mid-stream
/// needs no base): the end of what it sent, the highest acknowledgement of it, and since when
/// bytes have waited for one.
#[derive(Default)]
struct AckState {
    sent_end: Option<u32>,
    acked: Option<u32>,
    waiting_since: Option<Timestamp>,
}

/// Whether `from` to `to` is [`UNACKNOWLEDGED_SECS`] or more (in integers: this is asked of
/// most acknowledgements).
fn waited_long(from: Timestamp, to: Timestamp) -> bool {
    const WHOLE: i64 = UNACKNOWLEDGED_SECS as i64;
    const _: () = assert!(WHOLE as f64 == UNACKNOWLEDGED_SECS);
    let secs = to.secs - from.secs;
    secs > WHOLE || (secs == WHOLE && to.nanos >= from.nanos)
}

/// Whether sequence number `a` is after `b` (32-bit serial arithmetic).
fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Follows what each direction of `conn` sent and the other acknowledged, reporting bytes
/// that waited [`UNACKNOWLEDGED_SECS`] or more once an acknowledgement moves.
fn track_acks<S: FnMut(StreamEvent<&[u8]>)>(
    conn: &mut Conn,
    dir: Direction,
    seg: &TcpSegmentRef<'_>,
    sink: &mut S,
) {
    let len = seg.payload.len() as u64 + u64::from(seg.missing) + u64::from(seg.fin);
    if len > 0 && !seg.rst {
        let end = seg.seq.wrapping_add(len as u32);
        let a = &mut conn.halves[dir.index()].acks;
        if a.sent_end.is_none_or(|e| seq_after(end, e)) {
            a.sent_end = Some(end);
        }
        // Already acknowledged (a retransmission, or an ACK placed first by a merge of two
        // hosts' clocks) waits for nothing.
        if a.waiting_since.is_none() && a.acked.is_none_or(|k| seq_after(end, k)) {
            a.waiting_since = Some(seg.time);
        }
    }
    let Some(ack) = seg.ack else { return };
    let other = match dir {
        Direction::FromInitiator => Direction::FromAcceptor,
        Direction::FromAcceptor => Direction::FromInitiator,
    };
    let a = &mut conn.halves[other.index()].acks;
    if a.acked.is_some_and(|k| !seq_after(ack, k)) {
        return;
    }
    a.acked = Some(ack);
    let Some(since) = a.waiting_since else { return };
    if waited_long(since, seg.time) {
        sink(StreamEvent::Unacknowledged {
            conn: conn.info.id,
            dir: other,
            since,
            time: seg.time,
            acked: true,
        });
    }
    a.waiting_since = match a.sent_end {
        Some(end) if seq_after(end, ack) => Some(seg.time),
        _ => None,
    };
}

impl Half {
    /// Maps a sequence number to a stream offset, taking the signed 32-bit distance to the
    /// next expected byte (so anything up to 2 GiB behind counts as old, not as far ahead).
    fn locate(&self, base: u32, seq: u32) -> i64 {
        let expected = base.wrapping_add(self.offset as u32);
        self.offset as i64 + i64::from(seq.wrapping_sub(expected) as i32)
    }

    fn fin_reached(&self) -> bool {
        self.fin_at.is_some_and(|f| self.offset >= f)
    }

    /// Buffers `[start, end)` where not already covered; first-seen bytes win.
    fn insert(&mut self, start: u64, end: u64, mut make: impl FnMut(u64, u64) -> Chunk) {
        let end = match self.fin_at {
            // Nothing exists past the FIN; anything claiming to is bogus.
            Some(f) => end.min(f),
            None => end,
        };
        let mut cur = start.max(self.offset);
        if let Some((&s, c)) = self.pending.range(..cur).next_back() {
            cur = cur.max(s + c.len());
        }
        if cur >= end {
            return;
        }
        let mut pieces = Vec::new();
        for (&s, c) in self.pending.range(cur..end) {
            if s > cur {
                pieces.push((cur, s));
            }
            cur = cur.max(s + c.len());
        }
        if cur < end {
            pieces.push((cur, end));
        }
        for (s, e) in pieces {
            let chunk = make(s, e);
            self.pending_bytes += chunk.bytes();
            self.pending.insert(s, chunk);
        }
    }

    /// Delivers contiguous chunks from `offset`. With `force`, holes become gaps and the
    /// whole buffer is delivered, up to the FIN if one was seen.
    fn drain(&mut self, force: bool, out: &mut Vec<Piece>) {
        while let Some(entry) = self.pending.first_entry() {
            let s = *entry.key();
            if s > self.offset {
                if !force {
                    break;
                }
                out.push(Piece::Gap(self.offset, s - self.offset));
                self.offset = s;
            }
            let chunk = entry.remove();
            self.pending_bytes -= chunk.bytes();
            self.emit(s, chunk, out);
        }
        if force && let Some(f) = self.fin_at.filter(|&f| f > self.offset) {
            out.push(Piece::Gap(self.offset, f - self.offset));
            self.offset = f;
        }
    }

    /// Declares the first hole a gap and delivers what follows it.
    fn skip_hole(&mut self, out: &mut Vec<Piece>) {
        if let Some((&s, _)) = self.pending.first_key_value()
            && s > self.offset
        {
            out.push(Piece::Gap(self.offset, s - self.offset));
            self.offset = s;
        }
        self.drain(false, out);
    }

    fn emit(&mut self, s: u64, chunk: Chunk, out: &mut Vec<Piece>) {
        let e = s + chunk.len();
        if e <= self.offset {
            return;
        }
        let skip = (self.offset - s) as usize;
        match chunk {
            Chunk::Data(mut d) => {
                let bytes = if skip == 0 { d } else { d.split_off(skip) };
                // Coalesce with the previous piece when contiguous: one Data event per push.
                match out.last_mut() {
                    Some(Piece::Data(o, prev)) if *o + prev.len() as u64 == self.offset => {
                        prev.extend_from_slice(&bytes)
                    }
                    _ => out.push(Piece::Data(self.offset, bytes)),
                }
            }
            Chunk::Missing(_) => out.push(Piece::Gap(self.offset, e - self.offset)),
        }
        self.offset = e;
    }

    fn clear(&mut self) {
        self.pending.clear();
        self.pending_bytes = 0;
    }
}

struct Conn {
    info: ConnInfo,
    halves: [Half; 2],
    /// When it was last used: the reassembler's clock at its latest touch (LRU eviction).
    tick: u64,
}

impl Conn {
    fn dir_of(&self, src: SocketAddr) -> Direction {
        if src == self.info.initiator {
            Direction::FromInitiator
        } else {
            Direction::FromAcceptor
        }
    }
}

/// Turns [`TcpSegment`]s, in capture order, into per-direction byte streams.
///
/// See the [module documentation](super) for the model. Bounded: at most
/// `max_connections` open connections, each buffering at most `max_buffered_bytes` and
/// `max_buffered_chunks` out-of-order data per direction (plus one segment transiently).
pub struct Reassembler {
    config: ReassemblyConfig,
    /// The open connections, side by side in a dense list behind a small index (IndexMap):
    /// a capture's segments visit its open connections in turn, and with thousands open, a
    /// hash table of ~440-byte entries spread them over more memory than the caches hold.
    conns: ConnTable<Key, Conn>,
    /// The slot in `conns` of the last segment's connection (checked before use: removals
    /// move entries).
    last_slot: Option<usize>,
    ids: HashMap<ConnId, Key>,
    /// The next connections to evict, least recently used last: the oldest eighth of the open
    /// connections by `tick` when last chosen. An entry is live while its connection is open
    /// and still has that tick; every connection outside the list has been used since the
    /// oldest live one in it, so popping live entries evicts in exact LRU order. A touch costs
    /// a tick, and choosing costs a pass over the table for every eighth of it evicted.
    victims: Vec<(u64, Key)>,
    /// The tick of the latest touch: each touch of another connection advances it.
    clock: u64,
    next_id: u64,
    /// Recently closed tuples.
    closed: ClosedTuples,
    /// Connections seen only as a SYN so far. One that never gets further (a scan, a refused
    /// or timed-out dial) costs this entry, not a full [`Conn`], and produces no events; the
    /// first other segment of its tuple opens it as if the SYN had just been seen. At most
    /// `max_connections`, oldest dropped first.
    syn_only: SynOnlyTable,
    /// Latest capture time seen; the time of events produced by `finish`.
    now: Timestamp,
    stats: ReassemblyStats,
}

impl Reassembler {
    /// A reassembler with the given limits.
    pub fn new(config: ReassemblyConfig) -> Reassembler {
        Reassembler {
            config,
            conns: ConnTable::default(),
            last_slot: None,
            ids: HashMap::default(),
            victims: Vec::new(),
            clock: 0,
            next_id: 1,
            closed: ClosedTuples::default(),
            syn_only: SynOnlyTable::default(),
            now: Timestamp::default(),
            stats: ReassemblyStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &ReassemblyStats {
        &self.stats
    }

    /// What is known about an open connection; `None` once it has closed.
    pub fn info(&self, conn: ConnId) -> Option<&ConnInfo> {
        self.ids
            .get(&conn)
            .and_then(|k| self.conns.get(k))
            .map(|c| &c.info)
    }

    /// Number of open connections.
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// Stops delivering a connection the caller has no interest in: its buffers are dropped
    /// and its later segments produce no `Data`/`Gap`, but it is still tracked so that its
    /// end (and any reuse of its 4-tuple) is recognised; its `Closed` event is still emitted.
    pub fn ignore(&mut self, conn: ConnId) {
        if let Some(c) = self.ids.get(&conn).and_then(|k| self.conns.get_mut(k)) {
            c.info.ignored = true;
            for h in &mut c.halves {
                h.clear();
            }
        }
    }

    /// Feeds one segment; events it causes are appended to `out`.
    pub fn push(&mut self, seg: TcpSegment, out: &mut Vec<StreamEvent>) {
        self.push_with(&seg.as_ref(), &mut |e: StreamEvent<&[u8]>| {
            out.push(e.to_owned_event())
        });
    }

    /// Feeds one segment; the events it causes are handed to `sink` as they happen, in the
    /// same order [`Reassembler::push`] would list them. In-order payload is lent straight
    /// from the segment, without a copy.
    pub fn push_with<S: FnMut(StreamEvent<&[u8]>)>(
        &mut self,
        seg: &TcpSegmentRef<'_>,
        sink: &mut S,
    ) {
        self.stats.segments += 1;
        self.now = self.now.max(seg.time);
        let key = Key::new(&seg.src, &seg.dst);
        // Segments of one connection mostly come in runs (data, then its ACK): the slot of the
        // last one is tried first, by comparing keys, before the table is searched.
        let slot = match self.last_slot {
            Some(i) if self.conns.get_index(i).is_some_and(|(k, _)| *k == key) => Some(i),
            _ => self.conns.get_index_of(&key),
        };
        if let Some((_, conn)) = slot.and_then(|i| self.conns.get_index_mut(i)) {
            self.last_slot = slot;
            if !(seg.syn && starts_new(conn, seg)) {
                if conn.tick != self.clock {
                    // Not already the most recently used: now it is.
                    self.clock += 1;
                    conn.tick = self.clock;
                }
                if is_bare_ack(seg) {
                    if !conn.info.ignored {
                        track_acks(conn, conn.dir_of(seg.src), seg, sink);
                    }
                    // A third of a capture's segments. It places nothing and ends nothing: an
                    // open connection is one whose FINs have not all been reached, and this
                    // moves no stream.
                    conn.info.last_seen = seg.time;
                    return;
                }
                if let Some(how) = handle(conn, seg, &self.config, &mut self.stats, sink) {
                    self.close(key, how, seg.time, sink);
                }
                return;
            }
            self.close(key, CloseKind::Reused, seg.time, sink);
        }
        if let Some((first, recent)) = self.syn_only.remove(&key) {
            if is_bare_syn(seg) && seg.seq == first.seq && first.same_sender(&key, seg) {
                // The SYN again (a retransmission): still nothing more.
                self.syn_only.restore(key, first, recent);
                return;
            }
            if seg.rst && !seg.syn && seg.payload.is_empty() && seg.missing == 0 {
                return self.refused(key, &first, seg, sink);
            }
            if !is_bare_syn(seg) {
                // Past its SYN: open it as the SYN would have, then take this segment.
                let syn = first.segment(&key, seg);
                self.open_as(key, &syn, Some(first.id), sink);
                if let Some(conn) = self.conns.get_mut(&key) {
                    let _ = handle(conn, &syn, &self.config, &mut self.stats, sink);
                }
                self.stats.segments -= 1;
                return self.push_with(seg, sink);
            }
            // A SYN with another sequence number: a new connection on the tuple, below.
        }
        if is_bare_syn(seg) {
            self.note_syn(key, seg);
            return;
        }
        // A SYN reopens a closed tuple. Its entry is not looked up (and removed) here but
        // replaced when the new connection closes with FIN or RST, or removed when it ends
        // otherwise (see `close`): while the connection is open the table is not consulted,
        // so the result is the same, and most SYNs cost no lookup in the big table.
        if !seg.syn
            && self
                .closed
                .contains(&key, ClosedLimits::of(&self.config), self.now.secs)
        {
            self.stats.after_close += 1;
            return;
        }
        if seg.syn || !seg.payload.is_empty() || seg.missing > 0 {
            self.open(key, seg, sink);
            if let Some(conn) = self.conns.get_mut(&key)
                && let Some(how) = handle(conn, seg, &self.config, &mut self.stats, sink)
            {
                self.close(key, how, seg.time, sink);
            }
        } else {
            self.stats.stray += 1;
        }
    }

    /// Ends the capture: flushes every open connection (holes become gaps) and closes it with
    /// [`CloseKind::CaptureEnd`] (or [`CloseKind::Fin`] if both FINs were seen), in order of
    /// connection id.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.finish_with(&mut |e: StreamEvent<&[u8]>| out.push(e.to_owned_event()));
    }

    /// [`Reassembler::finish`], handing the events to `sink`.
    pub fn finish_with<S: FnMut(StreamEvent<&[u8]>)>(&mut self, sink: &mut S) {
        let mut open: Vec<(ConnId, Key)> = self.ids.iter().map(|(&i, &k)| (i, k)).collect();
        open.sort();
        for (_, key) in open {
            let both_fin = self
                .conns
                .get(&key)
                .is_some_and(|c| c.info.streams.iter().all(|s| s.fin));
            let how = if both_fin {
                CloseKind::Fin
            } else {
                CloseKind::CaptureEnd
            };
            self.close(key, how, self.now, sink);
        }
        self.closed.clear();
        self.victims.clear();
        self.syn_only.clear();
    }

    /// The least recently used open connection, taken off the victims list.
    fn pop_lru(&mut self) -> Option<Key> {
        if let Some(key) = self.pop_live_victim() {
            return Some(key);
        }
        self.choose_victims();
        self.pop_live_victim()
    }

    /// The first entry of the victims list whose connection is open and unused since.
    fn pop_live_victim(&mut self) -> Option<Key> {
        while let Some((tick, key)) = self.victims.pop() {
            if self.conns.get(&key).is_some_and(|c| c.tick == tick) {
                return Some(key);
            }
        }
        None
    }

    /// Lists the oldest eighth of the open connections (at least one), oldest last.
    fn choose_victims(&mut self) {
        self.victims.clear();
        self.victims
            .extend(self.conns.iter().map(|(key, c)| (c.tick, *key)));
        let keep = (self.victims.len() / 8).max(1).min(self.victims.len());
        if keep < self.victims.len() {
            self.victims
                .select_nth_unstable_by_key(keep, |(tick, _)| *tick);
            self.victims.truncate(keep);
        }
        self.victims
            .sort_unstable_by_key(|(tick, _)| std::cmp::Reverse(*tick));
    }

    /// A SYN-only connection ended by a bare reset (a refused dial, most connections of an
    /// ensemble with servers down): the events, counters and remembered tuple of opening it at
    /// its SYN and handling the reset (which buffers and delivers nothing), without making and
    /// dropping a table entry.
    fn refused<S: FnMut(StreamEvent<&[u8]>)>(
        &mut self,
        key: Key,
        first: &SynOnly,
        rst: &TcpSegmentRef<'_>,
        sink: &mut S,
    ) {
        if self.conns.len() >= self.config.max_connections.max(1)
            && let Some(victim) = self.pop_lru()
        {
            self.stats.evicted += 1;
            self.close(victim, CloseKind::Evicted, first.time, sink);
        }
        let (initiator, acceptor) = first.endpoints(&key, rst);
        sink(StreamEvent::Opened {
            conn: first.id,
            initiator,
            acceptor,
            time: first.time,
            mid_stream: false,
        });
        sink(StreamEvent::Closed {
            conn: first.id,
            time: rst.time,
            how: CloseKind::Rst,
        });
        self.closed
            .insert(key, ClosedLimits::of(&self.config), self.now.secs);
    }

    /// Remembers a connection's bare SYN in the compact table.
    fn note_syn(&mut self, key: Key, seg: &TcpSegmentRef<'_>) {
        let cap = self.config.max_connections.max(1);
        let id = ConnId(self.next_id);
        self.next_id += 1;
        self.stats.connections += 1;
        let first = SynOnly {
            id,
            seq: seg.seq,
            time: seg.time,
            record: seg.record,
            from_first: key.is_first(&seg.src),
        };
        self.stats.evicted += self.syn_only.insert(key, first, cap);
    }

    fn open<S: FnMut(StreamEvent<&[u8]>)>(
        &mut self,
        key: Key,
        seg: &TcpSegmentRef<'_>,
        sink: &mut S,
    ) {
        self.open_as(key, seg, None, sink);
    }

    /// Opens a connection; `id` is the one its SYN was given, if it waited in `syn_only`.
    fn open_as<S: FnMut(StreamEvent<&[u8]>)>(
        &mut self,
        key: Key,
        seg: &TcpSegmentRef<'_>,
        id: Option<ConnId>,
        sink: &mut S,
    ) {
        if self.conns.len() >= self.config.max_connections.max(1)
            && let Some(victim) = self.pop_lru()
        {
            self.stats.evicted += 1;
            self.close(victim, CloseKind::Evicted, seg.time, sink);
        }
        let (initiator, acceptor, mid_stream) = if seg.syn {
            if seg.ack.is_none() {
                (seg.src, seg.dst, false)
            } else {
                // A SYN-ACK comes from the acceptor; the SYN itself was missed but its
                // acknowledgement tells where the initiator's stream starts.
                (seg.dst, seg.src, false)
            }
        } else if seg.dst.port() > seg.src.port() {
            // Mid-stream guess: the higher port is the ephemeral one, i.e. the initiator's.
            (seg.dst, seg.src, true)
        } else {
            (seg.src, seg.dst, true)
        };
        let id = id.unwrap_or_else(|| {
            self.next_id += 1;
            self.stats.connections += 1;
            ConnId(self.next_id - 1)
        });
        let mut halves = [Half::default(), Half::default()];
        if seg.syn
            && let Some(ack) = seg.ack
        {
            halves[Direction::FromInitiator.index()].base = Some(ack);
        }
        self.clock += 1;
        let tick = self.clock;
        self.ids.insert(id, key);
        self.conns.insert(
            key,
            Conn {
                info: ConnInfo {
                    id,
                    initiator,
                    acceptor,
                    opened: seg.time,
                    last_seen: seg.time,
                    mid_stream,
                    ignored: false,
                    streams: Default::default(),
                },
                halves,
                tick,
            },
        );
        sink(StreamEvent::Opened {
            conn: id,
            initiator,
            acceptor,
            time: seg.time,
            mid_stream,
        });
    }

    /// Removes a connection: flushes its buffers as data and gaps, emits `Closed`, and
    /// remembers the tuple when the close was a real one.
    fn close<S: FnMut(StreamEvent<&[u8]>)>(
        &mut self,
        key: Key,
        how: CloseKind,
        time: Timestamp,
        sink: &mut S,
    ) {
        let Some(mut conn) = self.conns.swap_remove(&key) else {
            return;
        };
        self.ids.remove(&conn.info.id);
        let id = conn.info.id;
        if !conn.info.ignored {
            for dir in [Direction::FromInitiator, Direction::FromAcceptor] {
                let d = dir.index();
                let half = &mut conn.halves[d];
                if half.base.is_none() {
                    continue;
                }
                let mut pieces = Vec::new();
                half.drain(true, &mut pieces);
                push_pieces(&mut conn.info.streams[d], id, dir, time, pieces, sink);
                if let Some(since) = half.acks.waiting_since
                    && waited_long(since, time)
                {
                    sink(StreamEvent::Unacknowledged {
                        conn: id,
                        dir,
                        since,
                        time,
                        acked: false,
                    });
                }
            }
        }
        sink(StreamEvent::Closed {
            conn: id,
            time,
            how,
        });
        if matches!(how, CloseKind::Fin | CloseKind::Rst) {
            self.closed
                .insert(key, ClosedLimits::of(&self.config), self.now.secs);
        } else if how != CloseKind::CaptureEnd {
            // Forget an entry left by a SYN that reopened the tuple (see `push_with`).
            self.closed.remove(&key);
        }
    }
}

/// A connection's bare SYN, waiting in [`Reassembler`]'s compact table.
struct SynOnly {
    id: ConnId,
    seq: u32,
    time: Timestamp,
    record: u64,
    /// The SYN was sent by the key's first address.
    from_first: bool,
}

impl SynOnly {
    /// Whether `seg`, a later segment of the same tuple, comes from the SYN's sender.
    fn same_sender(&self, key: &Key, seg: &TcpSegmentRef<'_>) -> bool {
        key.is_first(&seg.src) == self.from_first
    }

    /// The SYN's source and destination, taken from `seg`, a later segment of the same tuple
    /// (rather than unpacked from the key, an address rebuilt byte by byte).
    fn endpoints(&self, key: &Key, seg: &TcpSegmentRef<'_>) -> (SocketAddr, SocketAddr) {
        if self.same_sender(key, seg) {
            (seg.src, seg.dst)
        } else {
            (seg.dst, seg.src)
        }
    }

    /// The SYN as a segment again (see [`SynOnly::endpoints`]).
    fn segment(&self, key: &Key, seg: &TcpSegmentRef<'_>) -> TcpSegmentRef<'static> {
        let (src, dst) = self.endpoints(key, seg);
        TcpSegmentRef {
            time: self.time,
            src,
            dst,
            seq: self.seq,
            ack: None,
            syn: true,
            fin: false,
            rst: false,
            payload: &[],
            missing: 0,
            record: self.record,
        }
    }
}

/// A segment with no payload (none missing either) and no SYN, FIN or RST: an acknowledgement
/// alone, or a keepalive.
fn is_bare_ack(seg: &TcpSegmentRef<'_>) -> bool {
    !(seg.syn || seg.fin || seg.rst) && seg.payload.is_empty() && seg.missing == 0
}

/// A SYN without ACK, payload, FIN or RST: the first segment of a dial.
fn is_bare_syn(seg: &TcpSegmentRef<'_>) -> bool {
    seg.syn
        && seg.ack.is_none()
        && !seg.fin
        && !seg.rst
        && seg.payload.is_empty()
        && seg.missing == 0
}

/// The recently closed tuples: the generation (count of closes so far) of each one's latest
/// close. A tuple is remembered while that generation is among the last `cap`, exactly as a
/// queue of the last `cap` closes would say, and for at least `window` of capture time (see
/// [`ReassemblyConfig::closed_remembered_for`]). So a close costs one insert (not an insert, a
/// queue push and an eviction lookup), and an IPv4 tuple takes 12 bytes instead of 64.
///
/// Two tables take the inserts in turn: `current` takes about `cap` of them, or those of one
/// `window`, then becomes `previous` (the old `previous` emptied to be the new `current`).
/// Between them they hold every one of the last `cap` closes of the last `window`, a tuple's
/// latest in `current` if it is there. Entries are never deleted one by one: deletions leave
/// tombstones in a hash table, and a table of tombstones is rehashed in place, a pass of random
/// accesses over all of it, which cost more than all the inserts together.
///
/// The time bound keeps the tables as small as the closes of a few minutes: a capture of hours
/// of steady reconnects has tables that stay in the cache, where one bounded by the count
/// alone grows to megabytes, and every close is a cache miss in it. A table emptied for reuse
/// is sized for what the last one took, so emptying it does not sweep megabytes either.
///
/// Tables bigger than the caches make every close an insert at a random place. Closes are
/// therefore gathered in a short list and inserted [`CLOSE_BATCH`] at a time: independent
/// inserts in a row wait for their cache misses together, where one at a time amid a segment's
/// work each waited alone (a tenth of a decode's time on the benchmark's refused dials).
/// Lookups are rare (only segments of no open connection), and look in the list first.
///
/// The tables hold a generation's low 32 bits (an IPv4 entry of 16 bytes instead of 24, a third
/// fewer cache lines): every entry is younger than about `2 * cap` closes, so its age, taken
/// modulo 2^32, is exact for any `cap` below [`MAX_CLOSED_CAP`].
#[derive(Default)]
struct ClosedTuples {
    current: Generations,
    previous: Generations,
    /// Inserts into `current` since it was emptied.
    in_current: usize,
    /// Inserts the last table took before it became `previous`: what `current` is sized for.
    in_last: usize,
    /// The capture times (whole seconds) of the oldest and the newest close in each table.
    current_span: Option<(i64, i64)>,
    previous_span: Option<(i64, i64)>,
    /// Closes not yet in `current`, oldest first, with their generations and times (seconds).
    recent: Vec<(Key, u64, i64)>,
    generation: u64,
}

/// How many closes and how long [`ClosedTuples`] remembers them: the caller's
/// [`ReassemblyConfig`], in the units the table keeps.
#[derive(Clone, Copy, Debug)]
struct ClosedLimits {
    cap: usize,
    /// Whole seconds; `i64::MAX` for no bound in time.
    window: i64,
}

impl ClosedLimits {
    fn of(config: &ReassemblyConfig) -> ClosedLimits {
        ClosedLimits {
            cap: config.max_closed_remembered.min(MAX_CLOSED_CAP),
            window: i64::try_from(config.closed_remembered_for.as_secs())
                .unwrap_or(i64::MAX)
                .max(1),
        }
    }

    /// Whether a close at `then` is older than the window at `now`.
    fn expired(self, then: i64, now: i64) -> bool {
        then.saturating_add(self.window) <= now
    }
}

/// Closes gathered before they go into the table.
const CLOSE_BATCH: usize = 32;

/// The most closes a table is sized for before it fills (the default cap): a table that needs
/// more grows as it fills.
const PRESIZED_CLOSES: usize = 1 << 16;

/// The most closes [`ClosedTuples`] remembers, whatever it is asked: ages modulo 2^32 stay
/// exact below it (and its tables would take tens of GB long before).
const MAX_CLOSED_CAP: usize = 1 << 30;

impl ClosedTuples {
    /// Whether `key` is remembered closed at capture time `now` (seconds).
    fn contains(&self, key: &Key, limits: ClosedLimits, now: i64) -> bool {
        let live =
            |span: Option<(i64, i64)>| span.is_some_and(|(_, newest)| !limits.expired(newest, now));
        let latest = match self.recent.iter().rev().find(|(k, _, _)| k == key) {
            Some(&(_, g, then)) => (!limits.expired(then, now)).then_some(g as u32),
            None => live(self.current_span)
                .then(|| self.current.get(key))
                .flatten()
                .or_else(|| {
                    live(self.previous_span)
                        .then(|| self.previous.get(key))
                        .flatten()
                }),
        };
        // Closes since, modulo 2^32 (exact: see the type).
        latest.is_some_and(|g| (self.generation as u32).wrapping_sub(g) < limits.cap as u32)
    }

    fn remove(&mut self, key: &Key) {
        self.recent.retain(|(k, _, _)| k != key);
        // Entries are not deleted (see the type): an entry made older than any `cap` reads as
        // absent (its age stays below 2^32 for the table's life, at most 2 * MAX_CLOSED_CAP
        // more closes).
        let forgotten = (self.generation as u32).wrapping_sub(MAX_CLOSED_CAP as u32);
        self.current.overwrite(key, forgotten);
        self.previous.overwrite(key, forgotten);
    }

    /// Remembers `key` closed at capture time `now` (seconds, never going back: the
    /// reassembler's clock).
    fn insert(&mut self, key: Key, limits: ClosedLimits, now: i64) {
        if limits.cap == 0 {
            return;
        }
        self.generation += 1;
        self.recent.push((key, self.generation, now));
        // A batch goes in when full, or once its oldest close has passed the window (it is
        // dropped then, below), so that the list does not keep expired closes.
        if self.recent.len() < CLOSE_BATCH && !limits.expired(self.recent[0].2, now) {
            return;
        }
        let full = self.in_current >= limits.cap;
        let old = self
            .current_span
            .is_some_and(|(oldest, _)| limits.expired(oldest, now));
        if full || old {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.previous_span = self.current_span.take();
            self.in_last = self.in_current;
            self.in_current = 0;
            // Sized for what the last table took (and a batch), up to the default cap's; one
            // that needs more grows as it fills.
            self.current
                .reset(self.in_last.min(PRESIZED_CLOSES) + CLOSE_BATCH);
        }
        // Closes already older than the window are not remembered at all.
        self.recent
            .retain(|&(_, _, then)| !limits.expired(then, now));
        let Some(&(_, _, oldest)) = self.recent.first() else {
            return;
        };
        let span = self.current_span.get_or_insert((oldest, now));
        span.1 = now;
        self.in_current += self.recent.len();
        let size = self.in_last.max(self.in_current).min(PRESIZED_CLOSES) + CLOSE_BATCH;
        self.current.insert_all(self.recent.drain(..), size);
    }

    /// Forgets every close, and the tables' memory.
    fn clear(&mut self) {
        *self = ClosedTuples {
            generation: self.generation,
            ..ClosedTuples::default()
        };
    }
}

/// One of [`ClosedTuples`]' tables: a tuple's latest close generation (its low 32 bits).
#[derive(Default)]
struct Generations {
    v4: V4Generations,
    /// IPv6 and mixed tuples, and the one IPv4 tuple `V4Generations` cannot hold.
    other: HashMap<Key, u32>,
}

impl Generations {
    fn get(&self, key: &Key) -> Option<u32> {
        match key.packed().filter(|&k| k != V4Generations::EMPTY) {
            Some((ips, ports)) => self.v4.get(ips, ports),
            None => self.other.get(key).copied(),
        }
    }

    /// Sets the generation of a tuple already held; nothing for one not held.
    fn overwrite(&mut self, key: &Key, generation: u32) {
        match key.packed().filter(|&k| k != V4Generations::EMPTY) {
            Some((ips, ports)) => {
                if self.v4.get(ips, ports).is_some() {
                    self.v4.insert(ips, ports, generation);
                }
            }
            None => {
                if let Some(g) = self.other.get_mut(key) {
                    *g = generation;
                }
            }
        }
    }

    /// Inserts closes in order (a tuple's latest generation wins). The IPv4 tuples' slots are
    /// asked into the cache first, so that their misses overlap instead of coming one by one.
    fn insert_all(&mut self, closes: impl ExactSizeIterator<Item = (Key, u64, i64)>, size: usize) {
        self.v4
            .reserve(closes.len().max(size.saturating_sub(self.v4.len)));
        let mut batch = [(0u64, 0u32, 0u32); CLOSE_BATCH];
        let mut n = 0;
        for (key, generation, _) in closes {
            match key.packed().filter(|&k| k != V4Generations::EMPTY) {
                Some((ips, ports)) if n < CLOSE_BATCH => {
                    self.v4.prefetch(ips, ports);
                    batch[n] = (ips, ports, generation as u32);
                    n += 1;
                }
                Some((ips, ports)) => self.v4.insert(ips, ports, generation as u32),
                None => {
                    self.other.insert(key, generation as u32);
                }
            }
        }
        for &(ips, ports, generation) in &batch[..n] {
            self.v4.insert(ips, ports, generation);
        }
    }

    /// Empties the table, keeping room for about `expected` inserts.
    fn reset(&mut self, expected: usize) {
        self.v4.reset(expected);
        self.other.clear();
    }
}

/// IPv4 tuples (packed as [`Key::packed`]) and their generations, in an open-addressing table
/// with linear probing, at most 5/8 full, whose entries are never deleted (a table is emptied
/// whole). Written here rather than taken from hashbrown because [`Generations::insert_all`]
/// prefetches an insert's slot before making it, which needs the slot's address: the table is
/// bigger than the caches, and a close lands at a random place in it.
#[derive(Default)]
struct V4Generations {
    /// `(ips, ports, generation)`; [`V4Generations::EMPTY`] marks a free slot. A power of two
    /// long, or empty.
    slots: Vec<(u64, u32, u32)>,
    len: usize,
}

impl V4Generations {
    /// The tuple of a free slot (0.0.0.0:0 both ways, kept by [`Generations::other`]).
    const EMPTY: (u64, u32) = (0, 0);

    fn home(&self, ips: u64, ports: u32) -> usize {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let h = (ips.wrapping_mul(K) ^ u64::from(ports)).wrapping_mul(K);
        // The high bits are the best mixed.
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    fn get(&self, ips: u64, ports: u32) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(ips, ports);
        loop {
            let (a, p, g) = self.slots[i];
            if (a, p) == (ips, ports) {
                return Some(g);
            }
            if (a, p) == Self::EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn prefetch(&self, ips: u64, ports: u32) {
        #[cfg(target_arch = "x86_64")]
        if !self.slots.is_empty() {
            let slot = &self.slots[self.home(ips, ports)];
            // SAFETY: a prefetch is a hint that reads nothing and cannot fault, and SSE, which
            // it needs, is part of every x86_64 CPU.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    (slot as *const (u64, u32, u32)).cast(),
                )
            };
        }
    }

    /// Room for `more` inserts with the table at most 5/8 full (linear probing then looks at
    /// about four slots for a tuple it does not hold).
    fn reserve(&mut self, more: usize) {
        let needed = (self.len + more).saturating_mul(8).div_ceil(5);
        if needed <= self.slots.len() {
            return;
        }
        let old = std::mem::replace(
            &mut self.slots,
            vec![(0, 0, 0); Self::slots_for(self.len + more)],
        );
        self.len = 0;
        for (ips, ports, g) in old {
            if (ips, ports) != Self::EMPTY {
                self.insert(ips, ports, g);
            }
        }
    }

    /// The table length for `entries` at most 5/8 full.
    fn slots_for(entries: usize) -> usize {
        entries
            .saturating_mul(8)
            .div_ceil(5)
            .next_power_of_two()
            .max(64)
    }

    fn insert(&mut self, ips: u64, ports: u32, generation: u32) {
        self.reserve(1);
        let mask = self.slots.len() - 1;
        let mut i = self.home(ips, ports);
        loop {
            let slot = &mut self.slots[i];
            if (slot.0, slot.1) == (ips, ports) {
                slot.2 = generation;
                return;
            }
            if (slot.0, slot.1) == Self::EMPTY {
                *slot = (ips, ports, generation);
                self.len += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Empties the table, keeping room for about `expected` inserts: a table much bigger is
    /// replaced by a smaller one rather than swept whole.
    fn reset(&mut self, expected: usize) {
        let fits = Self::slots_for(expected);
        if self.slots.len() > 2 * fits {
            self.slots = vec![(0, 0, 0); fits];
            self.len = 0;
        } else if self.len > 0 {
            self.slots.fill((0, 0, 0));
            self.len = 0;
        }
    }
}

/// Whether a SYN on an open tuple starts a new connection (port reuse) rather than being
/// a retransmission: it does when it carries an initial sequence number different from
/// the one recorded for that side, or when that side was already sending without a SYN.
fn starts_new(conn: &Conn, seg: &TcpSegmentRef<'_>) -> bool {
    let dir = conn.dir_of(seg.src);
    let half = &conn.halves[dir.index()];
    if half.isn == Some(seg.seq) {
        return false;
    }
    if half.isn.is_none() && half.base == Some(seg.seq.wrapping_add(1)) {
        // This side's own SYN, seen after the peer's SYN-ACK acknowledged it.
        return false;
    }
    if seg.ack.is_none() {
        // A bare SYN only ever opens a connection.
        return true;
    }
    // SYN-ACK: normal if this side has not been seen yet, otherwise a new connection
    // whose SYN we missed — unless it comes from the side that sent this connection's
    // SYN, which no reuse explains; `handle` drops it.
    half.base.is_some() && !(dir == Direction::FromInitiator && half.isn.is_some())
}

/// Learns a direction's start from its SYN (and the other's from a SYN-ACK's ack); false for
/// a SYN that contradicts what is known (`odd_syn`).
#[inline]
fn learn_syn(conn: &mut Conn, d: usize, seg: &TcpSegmentRef<'_>) -> bool {
    let half = &mut conn.halves[d];
    match (half.isn, half.base) {
        (None, None) => {
            half.isn = Some(seg.seq);
            half.base = Some(seg.seq.wrapping_add(1));
        }
        // The other side's SYN-ACK told us where this side starts; now its SYN agrees.
        (None, Some(b)) if b == seg.seq.wrapping_add(1) => {
            half.isn = Some(seg.seq);
        }
        (Some(isn), _) if isn == seg.seq => {}
        _ => return false,
    }
    if let Some(ack) = seg.ack {
        let other = &mut conn.halves[1 - d];
        if other.base.is_none() {
            other.base = Some(ack);
        }
    }
    true
}

/// Buffers a segment that is not simply the next bytes (out of order, after a hole, partly
/// repeated, or cut by the snap length) and returns what is now deliverable in order; when
/// the buffer outgrows its bounds the oldest hole is skipped.
fn buffer(
    half: &mut Half,
    seg: &TcpSegmentRef<'_>,
    start: i64,
    end: i64,
    config: &ReassemblyConfig,
    stats: &mut ReassemblyStats,
) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let len = seg.payload.len();
    let seq_len = len as u64 + u64::from(seg.missing);
    if end <= half.offset as i64 && !(seg.fin && half.fin_at.is_none()) {
        if seq_len > 0 || seg.fin {
            stats.duplicates += 1;
        }
    } else {
        let s = start.max(0) as u64;
        let data_end = (start + len as i64).max(0) as u64;
        let payload = seg.payload;
        half.insert(s, data_end, |a, b| {
            let from = (a as i64 - start) as usize;
            let to = (b as i64 - start) as usize;
            Chunk::Data(payload[from..to].to_vec())
        });
        if seg.missing > 0 {
            half.insert(data_end, end.max(0) as u64, |a, b| Chunk::Missing(b - a));
        }
        if seg.fin && half.fin_at.is_none() {
            half.fin_at = Some(end.max(0) as u64);
        }
        half.drain(false, &mut pieces);
        while half.pending_bytes > config.max_buffered_bytes
            || half.pending.len() > config.max_buffered_chunks
        {
            half.skip_hole(&mut pieces);
        }
    }
    pieces
}

/// Applies one segment to its connection; returns how the connection ends if it does.
fn handle<S: FnMut(StreamEvent<&[u8]>)>(
    conn: &mut Conn,
    seg: &TcpSegmentRef<'_>,
    config: &ReassemblyConfig,
    stats: &mut ReassemblyStats,
    sink: &mut S,
) -> Option<CloseKind> {
    conn.info.last_seen = seg.time;
    let dir = conn.dir_of(seg.src);
    let d = dir.index();
    if seg.rst {
        return Some(CloseKind::Rst);
    }
    if seg.fin {
        conn.info.streams[d].fin = true;
    }
    if conn.info.ignored {
        return conn
            .info
            .streams
            .iter()
            .all(|s| s.fin)
            .then_some(CloseKind::Fin);
    }
    if !seg.syn {
        track_acks(conn, dir, seg, sink);
    }
    if seg.syn && !learn_syn(conn, d, seg) {
        stats.odd_syn += 1;
        return None;
    }
    let data_seq = if seg.syn {
        seg.seq.wrapping_add(1)
    } else {
        seg.seq
    };
    let len = seg.payload.len() as u64;
    let seq_len = len + u64::from(seg.missing);
    let half = &mut conn.halves[d];
    let base = match half.base {
        Some(b) => b,
        None if seq_len > 0 || seg.fin => {
            // First sight of this direction mid-stream: its stream starts here.
            half.base = Some(data_seq);
            data_seq
        }
        None => return None,
    };
    let start = half.locate(base, data_seq);
    let end = start + seq_len as i64;
    let id = conn.info.id;
    if len > 0
        && seg.missing == 0
        && start == half.offset as i64
        && half.pending.is_empty()
        && half.fin_at.is_none()
    {
        // The common case: the next bytes, in order, nothing buffered. Deliver them from the
        // segment itself (what buffering and draining would deliver, without the copies).
        half.offset = end as u64;
        if seg.fin {
            half.fin_at = Some(half.offset);
        }
        let info = &mut conn.info.streams[d];
        info.delivered += len;
        sink(StreamEvent::Data {
            conn: id,
            dir,
            time: seg.time,
            offset: start as u64,
            bytes: seg.payload,
        });
    } else if seq_len > 0 || seg.fin {
        let pieces = buffer(half, seg, start, end, config, stats);
        push_pieces(&mut conn.info.streams[d], id, dir, seg.time, pieces, sink);
    }
    // Otherwise a bare ACK (or a SYN without data): nothing to place, and buffering it would
    // change nothing (no bytes, no FIN, the buffer already drained).
    conn.halves
        .iter()
        .all(Half::fin_reached)
        .then_some(CloseKind::Fin)
}

impl Default for Reassembler {
    fn default() -> Self {
        Reassembler::new(ReassemblyConfig::default())
    }
}

fn push_pieces<S: FnMut(StreamEvent<&[u8]>)>(
    info: &mut StreamInfo,
    conn: ConnId,
    dir: Direction,
    time: Timestamp,
    pieces: Vec<Piece>,
    sink: &mut S,
) {
    for p in pieces {
        match p {
            Piece::Data(offset, bytes) => {
                if bytes.is_empty() {
                    continue;
                }
                info.delivered += bytes.len() as u64;
                sink(StreamEvent::Data {
                    conn,
                    dir,
                    time,
                    offset,
                    bytes: &bytes,
                });
            }
            Piece::Gap(offset, missing) => {
                if missing == 0 {
                    continue;
                }
                info.gaps += 1;
                info.missing += missing;
                sink(StreamEvent::Gap {
                    conn,
                    dir,
                    time,
                    offset,
                    missing,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn key_of(a: SocketAddr, b: SocketAddr) -> Key {
        Key::new(&a, &b)
    }

    proptest! {
        /// The recently closed tuples, batched, remember exactly what a queue of the last
        /// `cap` closes would, when time does not bound them.
        #[test]
        fn closed_tuples_remember_the_last_closes(
            cap in 1usize..80,
            ops in proptest::collection::vec((0u8..3, 0u16..60), 1..600),
            // Where the count of closes starts: at 0, or just before the tables' 32-bit
            // generations wrap around.
            start in prop_oneof![Just(0u64), (u64::from(u32::MAX) - 700)..u64::from(u32::MAX)],
        ) {
            let limits = ClosedLimits { cap, window: i64::MAX };
            let mut closed = ClosedTuples { generation: start, ..ClosedTuples::default() };
            // The model: every close in order, a removal forgetting the tuple's earlier ones.
            let mut model: Vec<Option<u16>> = Vec::new();
            for (op, port) in ops {
                let key = key_of(v4([10, 0, 0, 1], 40_000 + port), v4([10, 0, 0, 2], 3888));
                match op {
                    0 => {
                        closed.insert(key, limits, 0);
                        model.push(Some(port));
                    }
                    1 => {
                        closed.remove(&key);
                        for m in model.iter_mut().filter(|m| **m == Some(port)) {
                            *m = None;
                        }
                    }
                    _ => {
                        let start = model.len().saturating_sub(cap);
                        let expected = model[start..].contains(&Some(port));
                        prop_assert_eq!(closed.contains(&key, limits, 0), expected);
                    }
                }
            }
        }

        /// With a window in time as well, a close among the last `cap` is remembered while it
        /// is younger than the window, and forgotten once twice the window has passed.
        #[test]
        fn closed_tuples_remember_a_window_of_time(
            cap in 1usize..200,
            window in 1i64..8,
            ops in proptest::collection::vec((0u8..4, 0u16..40), 1..800),
        ) {
            let limits = ClosedLimits { cap, window };
            let mut closed = ClosedTuples::default();
            let mut now = 1_000_000i64;
            // The model: every close in order with its time, a removal forgetting the tuple's
            // earlier ones.
            let mut model: Vec<Option<(u16, i64)>> = Vec::new();
            for (op, port) in ops {
                let key = key_of(v4([10, 0, 0, 1], 40_000 + port), v4([10, 0, 0, 2], 3888));
                match op {
                    0 => {
                        closed.insert(key, limits, now);
                        model.push(Some((port, now)));
                    }
                    1 => {
                        closed.remove(&key);
                        for m in model.iter_mut().filter(|m| m.is_some_and(|(p, _)| p == port)) {
                            *m = None;
                        }
                    }
                    2 => now += i64::from(port % 5),
                    _ => {
                        let start = model.len().saturating_sub(cap);
                        let latest = model[start..]
                            .iter()
                            .rev()
                            .find_map(|m| m.filter(|&(p, _)| p == port).map(|(_, t)| t));
                        let found = closed.contains(&key, limits, now);
                        match latest {
                            Some(t) if now - t < window => prop_assert!(found, "forgot a close {}s old", now - t),
                            Some(t) if now - t < 2 * window => {}
                            _ => prop_assert!(!found, "remembered {:?} at {}", latest, now),
                        }
                    }
                }
            }
        }

        /// A table of generations holds what a map would, for IPv4 tuples (the all-zero one
        /// too, which marks a free slot), IPv6 ones, and however many (it grows).
        #[test]
        fn generations_hold_what_a_map_holds(
            ops in proptest::collection::vec((0u8..4, 0u16..300, any::<u32>()), 1..800),
        ) {
            let mut table = Generations::default();
            let mut model: std::collections::HashMap<Key, u32> = Default::default();
            let key = |n: u16| match n % 7 {
                0 => key_of(v4([0, 0, 0, 0], 0), v4([0, 0, 0, 0], 0)),
                1 => key_of(
                    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, n)),
                    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 3888)),
                ),
                _ => key_of(v4([10, 0, (n >> 8) as u8, n as u8], n), v4([10, 0, 0, 2], 3888)),
            };
            for (op, n, g) in ops {
                let k = key(n);
                match op {
                    0 | 1 => {
                        table.insert_all([(k, u64::from(g), 0)].into_iter(), 0);
                        model.insert(k, g);
                    }
                    2 => {
                        table.overwrite(&k, g);
                        if let Some(m) = model.get_mut(&k) {
                            *m = g;
                        }
                    }
                    _ if n == 299 => {
                        table.reset(0);
                        model.clear();
                    }
                    _ => {}
                }
                prop_assert_eq!(table.get(&k), model.get(&k).copied());
            }
            for n in 0..300 {
                prop_assert_eq!(table.get(&key(n)), model.get(&key(n)).copied());
            }
        }

        /// The SYN-only table holds, and drops first, what a list in arrival order capped at
        /// `cap` would, whether its entries sit in the short list or the table (IPv6 keys too).
        #[test]
        fn syn_only_table_drops_the_oldest_first(
            cap in 1usize..24,
            ops in proptest::collection::vec((0u8..3, 0u16..40), 1..400),
        ) {
            let mut table = SynOnlyTable::default();
            // The model: live entries in arrival order.
            let mut model: Vec<(u16, u64)> = Vec::new();
            let mut next_id = 0;
            // Every third port an IPv6 tuple.
            let key = |port: u16| {
                if port.is_multiple_of(3) {
                    key_of(
                        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 40_000 + port)),
                        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 3888)),
                    )
                } else {
                    key_of(v4([10, 0, 0, 1], 40_000 + port), v4([10, 0, 0, 2], 3888))
                }
            };
            let entry = |id: u64| SynOnly {
                id: ConnId(id),
                seq: id as u32,
                time: Timestamp::default(),
                record: id,
                from_first: true,
            };
            for (op, port) in ops {
                let k = key(port);
                match op {
                    0 => {
                        if model.iter().any(|(p, _)| *p == port) {
                            continue;
                        }
                        next_id += 1;
                        let mut dropped = 0;
                        while model.len() >= cap {
                            model.remove(0);
                            dropped += 1;
                        }
                        model.push((port, next_id));
                        prop_assert_eq!(table.insert(k, entry(next_id), cap), dropped);
                    }
                    1 => {
                        let expected = model.iter().position(|(p, _)| *p == port);
                        let got = table.remove(&k);
                        prop_assert_eq!(got.as_ref().map(|(s, _)| s.id.0), expected.map(|i| model[i].1));
                        if let Some(i) = expected {
                            model.remove(i);
                        }
                    }
                    _ => {
                        // Taken out and put back, as for a retransmitted SYN: nothing changes.
                        if let Some((s, recent)) = table.remove(&k) {
                            table.restore(k, s, recent);
                        }
                    }
                }
                prop_assert_eq!(table.len(), model.len());
            }
            // Then each insert at the table's size drops the oldest entry, in arrival order.
            for (i, (port, _)) in model.iter().enumerate() {
                next_id += 1;
                let n = table.len();
                prop_assert_eq!(table.insert(key(1000 + i as u16), entry(next_id), n), 1);
                prop_assert!(table.remove(&key(*port)).is_none());
            }
        }

        #[test]
        fn packed_ipv4_tuples_unpack_to_the_same_key(
            a in any::<[u8; 4]>(), pa in any::<u16>(), b in any::<[u8; 4]>(), pb in any::<u16>()
        ) {
            let key = key_of(v4(a, pa), v4(b, pb));
            let packed = key.packed().unwrap();
            prop_assert_eq!(Key::unpacked(packed), key);
            prop_assert_eq!(key_of(v4(b, pb), v4(a, pa)).packed(), Some(packed));
        }

        /// A key puts the lower address first, in the order of `SocketAddr`.
        #[test]
        fn keys_order_their_addresses_as_socket_addr_does(
            a in any::<[u8; 4]>(), pa in any::<u16>(), b in any::<[u8; 4]>(), pb in any::<u16>()
        ) {
            let (x, y) = (v4(a, pa), v4(b, pb));
            let key = key_of(x, y);
            prop_assert_eq!((key.first(), key.second()), (x.min(y), x.max(y)));
            prop_assert_eq!(key_of(y, x), key);
        }

        /// Any two endpoints, IPv4 or IPv6 or one of each, make the same key in either order,
        /// and give it back in the order of `SocketAddr`.
        #[test]
        fn keys_of_any_families_give_their_endpoints_back(
            a in any::<(bool, [u8; 16], u16)>(), b in any::<(bool, [u8; 16], u16)>()
        ) {
            let addr = |(four, ip, port): (bool, [u8; 16], u16)| {
                if four {
                    v4([ip[0], ip[1], ip[2], ip[3]], port)
                } else {
                    SocketAddr::from((std::net::Ipv6Addr::from(ip), port))
                }
            };
            let (x, y) = (addr(a), addr(b));
            let key = key_of(x, y);
            prop_assert_eq!(key_of(y, x), key);
            prop_assert_eq!((key.first(), key.second()), (x.min(y), x.max(y)));
            prop_assert_eq!(key.packed().is_some(), x.is_ipv4() && y.is_ipv4());
            prop_assert_eq!((key.is_first(&x), key.is_first(&y)), (x <= y, y <= x));
        }

        /// The two queues pop in the order entries were pushed, whatever their families.
        #[test]
        fn syn_order_pops_in_push_order(v6 in proptest::collection::vec(any::<bool>(), 0..40)) {
            let mut order = SynOrder::default();
            let keys: Vec<Key> = v6
                .iter()
                .enumerate()
                .map(|(i, &six)| {
                    let port = i as u16 + 1;
                    if six {
                        key_of(
                            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
                            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 3888)),
                        )
                    } else {
                        key_of(v4([127, 0, 0, 1], port), v4([127, 0, 0, 2], 3888))
                    }
                })
                .collect();
            for (i, k) in keys.iter().enumerate() {
                order.push_back(ConnId(i as u64), *k);
            }
            prop_assert_eq!(order.len(), keys.len());
            for (i, k) in keys.iter().enumerate() {
                prop_assert_eq!(order.pop_front(), Some((ConnId(i as u64), *k)));
            }
            prop_assert_eq!(order.pop_front(), None);
        }
    }

    /// A caller's cap far above the default does not allocate for it up front.
    #[test]
    fn a_huge_cap_grows_its_table_as_it_fills() {
        let limits = ClosedLimits {
            cap: MAX_CLOSED_CAP,
            window: i64::MAX,
        };
        let mut closed = ClosedTuples::default();
        for port in 0..100 {
            let key = key_of(v4([10, 0, 0, 1], 40_000 + port), v4([10, 0, 0, 2], 3888));
            closed.insert(key, limits, 0);
        }
        assert!(closed.current.v4.slots.len() <= 2 * (PRESIZED_CLOSES + CLOSE_BATCH));
        let key = key_of(v4([10, 0, 0, 1], 40_007), v4([10, 0, 0, 2], 3888));
        assert!(closed.contains(&key, limits, 0));
    }

    /// Steady closes over hours keep tables the size of a window's closes, however big the
    /// count cap: the tables stay in the cache.
    #[test]
    fn a_window_of_time_keeps_the_tables_small() {
        let limits = ClosedLimits {
            cap: 65536,
            window: 240,
        };
        let mut closed = ClosedTuples::default();
        // One close a second for ten hours, on ever new tuples.
        for i in 0..36_000u32 {
            let key = key_of(
                v4([10, 0, (i >> 16) as u8, 1], i as u16),
                v4([10, 0, 0, 2], 3888),
            );
            closed.insert(key, limits, 1_000_000 + i64::from(i));
        }
        assert!(
            closed.current.v4.slots.len() <= 1024,
            "{}",
            closed.current.v4.slots.len()
        );
        assert!(
            closed.previous.v4.slots.len() <= 1024,
            "{}",
            closed.previous.v4.slots.len()
        );
        let recent = key_of(v4([10, 0, 0, 1], 35_900), v4([10, 0, 0, 2], 3888));
        assert!(closed.contains(&recent, limits, 1_036_000));
        let old = key_of(v4([10, 0, 0, 1], 30_000), v4([10, 0, 0, 2], 3888));
        assert!(!closed.contains(&old, limits, 1_036_000));
    }

    #[test]
    fn tuple_map_keeps_ipv4_and_ipv6_apart() {
        let mut m = TupleMap::default();
        let k4 = key_of(v4([10, 0, 0, 1], 40000), v4([10, 0, 0, 2], 3888));
        let k6 = key_of(
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 40000)),
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 3888)),
        );
        m.insert(k4, 4);
        m.insert(k6, 6);
        assert_eq!((m.get(&k4), m.get(&k6), m.len()), (Some(&4), Some(&6), 2));
        assert_eq!((m.remove(&k4), m.get(&k4), m.len()), (Some(4), None, 1));
        assert_eq!((m.remove(&k6), m.len()), (Some(6), 0));
    }
}
