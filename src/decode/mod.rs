//! Decoding a capture's election traffic: from TCP segments to messages with who sent them.
//!
//! [`Decoder`] is a streaming iterator: segments go through [`Reassembler`], each direction of
//! each election connection through a [`StreamDecoder`], and out come [`Record`]s (initial
//! messages, notifications, problems) in capture order, each with its sender's and receiver's
//! sid where they can be known ([`identity`]). Memory is bounded by the open connections.
//!
//! Which connections: those whose acceptor listens on an election port (3888 unless told
//! otherwise), and any other connection whose initiator opens with a valid initial message
//! followed by a plausible notification. Connections picked up mid-stream, and directions
//! after a gap, are resynchronised on the first plausible frame boundary, and a warning says
//! how many bytes were skipped.
//!
//! The quorum port (Zab, 2888 unless told otherwise) is decoded too: connections to it, and any
//! other connection whose initiator opens with a valid FOLLOWERINFO or OBSERVERINFO packet,
//! give one [`Body::Quorum`] record per packet (a streamed snapshot is walked, not kept). The
//! learner's sid comes from its LearnerInfo, the leader's from the quorum addresses in configs.
//! Connections closed by FIN or RST give a [`Body::Closed`] record.

pub mod identity;
mod record;

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::capture::reassembly::ConnTable;
use std::net::SocketAddr;

use crate::capture::CloseKind;
use crate::capture::{
    CaptureError, ConnId, Direction as CapDir, OwnedSegments, Reassembler, ReassemblyConfig,
    SegmentSource, StreamEvent, TcpSegment, TcpSegments, Timestamp,
};
use crate::wire::frame::{LENGTH_BYTES, MAX_FRAME_BYTES};
use crate::wire::quorum::{QuorumItem, QuorumStreamDecoder, ptype};
use crate::wire::quorum_auth::AuthStatus;
use crate::wire::resync::{
    FrameSearch, Recognition, find_frame_start, find_packet_start, frame_prefix, recognise,
    tls_record_start,
};
use crate::wire::{
    Direction, InitialCache, InitialMessage, Notification, PartialNotification, StreamDecoder,
    StreamItem,
};

pub use identity::{AddressBook, SidSource};
pub use record::{
    Body, Boundary, MalformedUnit, Problem, ProblemKind, QuorumMessage, Record, SaslJudge, Severity,
};

/// The default election port.
pub const DEFAULT_ELECTION_PORT: u16 = 3888;
/// The default quorum (Zab) port.
pub const DEFAULT_QUORUM_PORT: u16 = 2888;

/// Bytes held while looking for a packet boundary in a quorum stream joined mid-way (most
/// packets are small; a stream of only large proposals is picked up at the next small one).
const MAX_QUORUM_HUNT_BYTES: usize = 256 * 1024;

/// Bytes held while looking for a frame boundary in a stream joined mid-way; a frame can be
/// 512 KiB, so twice that always contains one whole frame after any start.
const MAX_HUNT_BYTES: usize = 2 * (LENGTH_BYTES + MAX_FRAME_BYTES);

/// What to decode and what is known beforehand.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Election ports; connections to them are decoded from their first byte.
    pub ports: Vec<u16>,
    /// Quorum (Zab) ports; connections to them are decoded as Zab packets.
    pub quorum_ports: Vec<u16>,
    /// Whether closed connections give [`Body::Closed`] records (the summary needs them; a
    /// message stream need not carry them).
    pub closes: bool,
    /// Addresses known before reading (from `--config`, `--sid-map`).
    pub book: AddressBook,
    /// Reassembly limits.
    pub reassembly: ReassemblyConfig,
    /// Hand each record out as soon as it decodes (live capture, a pipe), naming the sids
    /// known at that moment, instead of waiting up to `RESOLVE_WINDOW_SECS` of capture
    /// time for sids learned a little later.
    pub streaming: bool,
    /// Whether each record keeps its message's exact bytes in [`Record::raw`]. Re-encoding
    /// and byte-level checks need them; printing does not, and without them a notification
    /// is decoded straight from the captured segment, never copied whole.
    pub keep_raw: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            ports: vec![DEFAULT_ELECTION_PORT],
            quorum_ports: vec![DEFAULT_QUORUM_PORT],
            closes: true,
            book: AddressBook::default(),
            reassembly: ReassemblyConfig::default(),
            streaming: false,
            keep_raw: true,
        }
    }
}

/// Streaming decoder over TCP segments.
///
/// The segments come from a [`SegmentSource`]: a capture file ([`Decoder::from_capture`])
/// lends each segment's payload from its read buffer, and reassembly lends in-order bytes on
/// to the stream decoders, so a payload is copied at most once, into the record that holds it
/// (without [`DecodeOptions::keep_raw`], only what a record needs of it: a config's text).
pub struct Decoder<S> {
    segments: S,
    reassembler: Reassembler,
    state: State,
    /// The oldest waiting record was lent by [`Decoder::next_record`]: it goes at the next call.
    lent: bool,
}

/// Everything but the segment source and reassembly, split off so that reassembly can hand
/// its events to it while it works.
struct State {
    ports: Vec<u16>,
    quorum_ports: Vec<u16>,
    closes: bool,
    book: AddressBook,
    configs: identity::ConfigCache,
    /// Initial messages decoded before, by their bytes.
    initials: InitialCache,
    /// The connections being decoded (dense, see [`ConnTable`]).
    conns: ConnTable<ConnId, Conn>,
    /// The slot in `conns` found last, tried first (checked before use: removals move
    /// entries): a segment's events, and the records they make, are mostly of one connection,
    /// and a notification's length and payload come in two segments in a row.
    last_slot: std::cell::Cell<usize>,
    /// A connection opened by the last event, not yet in `conns`: most dials of an ensemble
    /// with servers down are refused, their `Closed` the very next event, and such a
    /// connection never needs a table entry (nor does it give a record, unless closes are
    /// reported).
    opened: Option<(ConnId, SocketAddr, SocketAddr)>,
    /// Connections to tell reassembly to ignore, once it has finished the current segment.
    ignore: Vec<ConnId>,
    out: Waiting,
    /// Whether `out` changed (or the input ended) since `front_ready` last found nothing ready:
    /// a record's readiness depends only on the records behind it, so between pushes there is
    /// nothing new to check (most segments push nothing).
    out_changed: bool,
    finished: bool,
    streaming: bool,
    keep_raw: bool,
    /// The segment being reassembled was cut by the snap length: TCP payload bytes captured.
    cut: Option<usize>,
    /// Scratch lists for `data`, kept so their memory is reused.
    items: Vec<(u64, StreamItem)>,
    problems: Vec<(u64, Problem)>,
    /// Byte buffers of records already handed out, for the next records' payloads and
    /// configs: most records are notifications, two small buffers each (at most
    /// [`SPARE_BUFFERS`] of at most [`SPARE_BUFFER_BYTES`] are kept).
    spare: Vec<Vec<u8>>,
}

/// The smallest buffer kept for reuse, and the size of a new one: big enough for a
/// notification of a small ensemble or its config, so that a reused buffer seldom grows.
const SPARE_MIN_BYTES: usize = 512;

/// A copy of `bytes`, in a buffer from `spare` when there is one.
fn copy_into_spare(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut buf = spare
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(SPARE_MIN_BYTES));
    buf.clear();
    buf.extend_from_slice(bytes);
    buf
}

/// How many buffers of written-out records are kept for reuse.
const SPARE_BUFFERS: usize = 64;
/// The largest buffer kept for reuse (a notification is about 250 bytes; larger ones are rare).
const SPARE_BUFFER_BYTES: usize = 4096;

/// A record waiting for its sids: the acceptor's sid is often learned a little later (from the
/// config in the next notification, or the acceptor's own initial message elsewhere), so
/// records wait up to [`RESOLVE_WINDOW_SECS`] of capture time (and at most
/// [`RESOLVE_WINDOW_RECORDS`]) before they are handed out.
struct Pending {
    record: Record,
    /// What the record waits for, if a sid is still unknown.
    acceptor: Option<SidWait>,
}

/// The ends of a record's connection whose sids are still unknown, to be looked up once the
/// record's wait is over.
#[derive(Debug, Clone, Copy)]
struct SidWait {
    /// The acceptor's address, if its sid is unknown.
    acceptor: Option<SocketAddr>,
    /// The initiator's IP, if its sid is unknown (no initial message or LearnerInfo named it).
    initiator: Option<std::net::IpAddr>,
    /// The acceptor's sid, if known (the initiator is never it).
    acceptor_sid: Option<i64>,
    /// Whether the record was sent by the initiator.
    from_initiator: bool,
    /// Whether the connection is on a quorum port.
    quorum: bool,
}

/// The records waiting to be handed out, oldest first. A record handed out by
/// [`Decoder::next_record`] is retired where it lies and dropped with [`RETIRED_BATCH`] others
/// at once, rather than moved out of the queue to be dropped (a record is a few hundred bytes).
#[derive(Default)]
struct Waiting {
    queue: VecDeque<Pending>,
    /// How many records at the front of `queue` were handed out.
    retired: usize,
}

/// How many retired records are kept before they are dropped together.
const RETIRED_BATCH: usize = 64;

impl Waiting {
    fn oldest(&self) -> Option<&Pending> {
        self.queue.get(self.retired)
    }

    fn oldest_mut(&mut self) -> Option<&mut Pending> {
        self.queue.get_mut(self.retired)
    }

    fn newest(&self) -> Option<&Pending> {
        (self.queue.len() > self.retired)
            .then(|| self.queue.back())
            .flatten()
    }

    /// How many wait.
    fn len(&self) -> usize {
        self.queue.len() - self.retired
    }

    fn push(&mut self, pending: Pending) {
        self.queue.push_back(pending);
    }

    /// The oldest, handed out, stays until the batch it is in is dropped.
    fn retire_oldest(&mut self) {
        if self.retired < self.queue.len() {
            self.retired += 1;
        }
        if self.retired >= RETIRED_BATCH {
            self.queue.drain(..self.retired);
            self.retired = 0;
        }
    }

    /// The oldest, moved out.
    fn pop_oldest(&mut self) -> Option<Pending> {
        self.queue.drain(..self.retired);
        self.retired = 0;
        self.queue.pop_front()
    }
}

/// How long, in capture time, a record waits for its sids to become known.
const RESOLVE_WINDOW_SECS: i64 = 2;
/// How long records wait while no config has named the members at all: a capture begun on a
/// running 3.5+ ensemble learns who is who from the configs in the notifications of its first
/// election, which can come long after the quorum traffic that shows who led (a follower
/// gives a frozen or cut-off leader `syncLimit` ticks, 10 s by default). Still bounded by
/// [`RESOLVE_WINDOW_RECORDS`].
const UNNAMED_WINDOW_SECS: i64 = 120;
/// How many records may wait at once.
const RESOLVE_WINDOW_RECORDS: usize = 4096;

struct Conn {
    initiator: SocketAddr,
    acceptor: SocketAddr,
    /// Reassembly guessed the initiator of a mid-stream connection wrong (the election port
    /// says otherwise): its directions are the other way round.
    flipped: bool,
    /// Still deciding whether a connection on another port is election traffic.
    recognising: Option<Vec<u8>>,
    initiator_sid: Option<i64>,
    /// How `initiator_sid` was learned when not from the connection's own initial message or
    /// LearnerInfo.
    initiator_source: Option<SidSource>,
    /// Whether the initiator's first notification was seen (its vote can name it once).
    initiator_voted: bool,
    dirs: [DirState; 2],
    /// `Some` for a quorum-port connection: its directions are decoded as Zab packets (and
    /// `dirs` is unused).
    quorum: Option<Box<[QuorumDir; 2]>>,
    /// Whether the connection speaks TLS: `None` until its first bytes are seen.
    tls: Option<bool>,
    /// The user a quorum SASL learner answered as, for the server's verdict.
    sasl_user: Option<String>,
    /// The acceptor's sid as the address book last answered it: (the book's version, whether
    /// asked as a quorum connection, the answer). Every record of the connection needs it.
    acceptor_sid: std::cell::Cell<Option<(u64, bool, Option<NamedSid>)>>,
    /// The book's version when this connection's ends were last checked against the hosts
    /// configured (see [`AddressBook::learn_accepted`]).
    hosts_checked: u64,
}

impl Conn {
    /// A reassembly direction in terms of our initiator and acceptor.
    fn our_dir(&self, dir: CapDir) -> CapDir {
        if self.flipped { dir.reverse() } else { dir }
    }
}

/// A sid and how it was learned.
type NamedSid = (i64, SidSource);

/// A connection as its `Opened` event describes it, before its decoding state is made.
struct Opening {
    initiator: SocketAddr,
    acceptor: SocketAddr,
    flipped: bool,
    on_port: bool,
    quorum: bool,
    mid_stream: bool,
}

impl Opening {
    fn conn(&self) -> Conn {
        let mid_stream = self.mid_stream;
        Conn {
            initiator: self.initiator,
            acceptor: self.acceptor,
            flipped: self.flipped,
            recognising: (!self.on_port).then(Vec::new),
            initiator_sid: None,
            initiator_source: None,
            initiator_voted: false,
            sasl_user: None,
            acceptor_sid: std::cell::Cell::new(None),
            hosts_checked: u64::MAX,
            dirs: [
                DirState::new(Direction::FromInitiator, mid_stream),
                DirState::new(Direction::FromAcceptor, mid_stream),
            ],
            quorum: self
                .quorum
                .then(|| Box::new([QuorumDir::new(mid_stream), QuorumDir::new(mid_stream)])),
            tls: None,
        }
    }
}

/// One direction of a quorum-port connection.
#[derive(Default)]
struct QuorumDir {
    decoder: QuorumStreamDecoder,
    /// Stream offset where `decoder` started (after a resynchronisation).
    base: u64,
    /// `Some` while looking for a packet boundary.
    hunt: Option<Hunt>,
    /// The SNAP packet whose snapshot is streaming: its record, and the snapshot bytes so far.
    snap: Option<(Record, u64)>,
}

impl QuorumDir {
    fn new(mid_stream: bool) -> Self {
        QuorumDir {
            hunt: mid_stream.then(|| Hunt::at(0)),
            ..QuorumDir::default()
        }
    }
}

struct DirState {
    decoder: StreamDecoder,
    /// `Some` while looking for a frame boundary.
    hunt: Option<Hunt>,
}

/// A search for the next frame or packet boundary in one direction of a stream.
struct Hunt {
    /// The bytes held: those that may still start one.
    held: Vec<u8>,
    /// The stream offset of `held[0]`.
    start: u64,
    /// Where the search began: what is skipped, if a boundary is found, is counted from here
    /// (bytes ruled out on the way are dropped from `held`, not from the count).
    from: u64,
    /// Where each piece of `held` begins in the stream, and when it came (at most
    /// [`MAX_HUNT_ARRIVALS`], the newest): a packet found in held bytes is dated by the
    /// segment that completed it, not by the later one that confirmed the boundary.
    arrivals: Vec<(u64, Timestamp)>,
}

/// The pieces of held bytes whose arrival times a [`Hunt`] keeps.
const MAX_HUNT_ARRIVALS: usize = 64;

impl Hunt {
    fn at(offset: u64) -> Hunt {
        Hunt::holding(Vec::new(), offset)
    }

    fn holding(held: Vec<u8>, start: u64) -> Hunt {
        Hunt {
            held,
            start,
            from: start,
            arrivals: Vec::new(),
        }
    }

    /// Holds `bytes`, which came at `time`.
    fn hold(&mut self, bytes: &[u8], time: Timestamp) {
        if self.arrivals.len() >= MAX_HUNT_ARRIVALS {
            self.arrivals.remove(0);
        }
        self.arrivals
            .push((self.start + self.held.len() as u64, time));
        self.held.extend_from_slice(bytes);
    }

    /// The warning for the bytes skipped before a boundary found at `at` in `held`, if any.
    fn skipped(&self, at: usize, to: Boundary) -> Option<(u64, Problem)> {
        let skipped = self.start + at as u64 - self.from;
        (skipped > 0).then(|| {
            (
                self.from,
                Problem::new(ProblemKind::Resynced { skipped, to }),
            )
        })
    }

    /// Drops the held bytes before `at`, which cannot start a boundary, and any beyond the
    /// newest `bound`.
    fn rule_out(&mut self, at: usize, bound: usize) {
        let at = at.max(self.held.len().saturating_sub(bound));
        self.held.drain(..at);
        self.start += at as u64;
        // The pieces wholly before the new start are not needed to date anything.
        let first_needed = self
            .arrivals
            .iter()
            .rposition(|&(offset, _)| offset <= self.start)
            .unwrap_or(0);
        self.arrivals.drain(..first_needed);
    }
}

/// When the stream byte at `offset` came, from the arrivals of a finished [`Hunt`].
fn arrival_of(arrivals: &[(u64, Timestamp)], offset: u64) -> Option<Timestamp> {
    arrivals
        .iter()
        .rev()
        .find(|&&(start, _)| start <= offset)
        .map(|&(_, time)| time)
}

impl DirState {
    fn new(dir: Direction, mid_stream: bool) -> Self {
        DirState {
            decoder: StreamDecoder::new(dir),
            hunt: mid_stream.then(|| Hunt::at(0)),
        }
    }
}

fn index(dir: CapDir) -> usize {
    match dir {
        CapDir::FromInitiator => 0,
        CapDir::FromAcceptor => 1,
    }
}

impl<I> Decoder<OwnedSegments<I>>
where
    I: Iterator<Item = Result<TcpSegment, CaptureError>>,
{
    /// A decoder over any iterator of owned segments (e.g. [`crate::capture::open`]; for a
    /// capture, [`Decoder::from_capture`] is faster).
    pub fn new(segments: I, options: DecodeOptions) -> Self {
        Decoder::with_source(OwnedSegments(segments), options)
    }
}

impl Decoder<TcpSegments> {
    /// A decoder over a capture, without copying payloads on the way.
    pub fn from_capture(segments: TcpSegments, options: DecodeOptions) -> Self {
        Decoder::with_source(segments, options)
    }
}

impl<S: SegmentSource> Decoder<S> {
    /// A decoder over any segment source.
    pub fn with_source(segments: S, mut options: DecodeOptions) -> Self {
        if options.ports.is_empty() {
            options.ports.push(DEFAULT_ELECTION_PORT);
        }
        Decoder {
            segments,
            reassembler: Reassembler::new(options.reassembly),
            state: State {
                ports: options.ports,
                quorum_ports: options.quorum_ports,
                closes: options.closes,
                book: options.book,
                configs: identity::ConfigCache::default(),
                initials: InitialCache::default(),
                conns: ConnTable::default(),
                last_slot: std::cell::Cell::new(0),
                opened: None,
                ignore: Vec::new(),
                out: Waiting::default(),
                out_changed: false,
                finished: false,
                streaming: options.streaming,
                keep_raw: options.keep_raw,
                cut: None,
                items: Vec::new(),
                problems: Vec::new(),
                spare: Vec::new(),
            },
            lent: false,
        }
    }

    /// The next record, lent until the next call: [`Iterator::next`] without moving it out
    /// (records are a few hundred bytes, and a decode hands out millions).
    pub fn next_record(&mut self) -> Option<&Record> {
        if self.wait_ready() {
            self.lent = true;
            self.state.out.oldest().map(|p| &p.record)
        } else {
            None
        }
    }

    /// Reads on until the oldest waiting record is ready to be handed out; false at the end.
    fn wait_ready(&mut self) -> bool {
        if std::mem::take(&mut self.lent) {
            // Its buffers are taken where it lies, rather than the whole record moved out.
            let state = &mut self.state;
            if let Some(p) = state.out.oldest_mut() {
                let raw = std::mem::take(&mut p.record.raw);
                let config = match &mut p.record.body {
                    Body::Notification(n) => n.config.take(),
                    _ => None,
                };
                state.keep_spare(raw);
                if let Some(config) = config {
                    state.keep_spare(config);
                }
                state.out.retire_oldest();
            }
            state.out_changed = true;
        }
        loop {
            if self.state.front_ready() {
                return true;
            }
            // Once the input has ended every waiting record is ready, so nothing is left.
            if self.state.finished {
                return false;
            }
            self.step();
        }
    }

    /// Ends the input here, as if the source had ended: connections still open end with the
    /// capture, and the records still waiting for sids are handed out by
    /// [`Decoder::next_record`] with what is known (Ctrl-C on a live or streamed decode).
    pub fn end_input(&mut self) {
        self.finish();
    }

    /// The segment source (for its statistics).
    pub fn segments(&self) -> &S {
        &self.segments
    }

    /// The segment source, mutably (a live capture's counters need it).
    pub fn segments_mut(&mut self) -> &mut S {
        &mut self.segments
    }

    fn step(&mut self) {
        let Decoder {
            segments,
            reassembler,
            state,
            ..
        } = self;
        // Segments are pushed until one changes what waits to be handed out (most change
        // nothing: a record needs a few segments, and many carry none).
        let next = segments.segments_while(|seg| {
            state.cut = (seg.missing > 0).then_some(seg.payload.len());
            reassembler.push_with(seg, &mut |e| state.handle(e));
            if !state.ignore.is_empty() {
                for conn in state.ignore.drain(..) {
                    reassembler.ignore(conn);
                }
            }
            !state.out_changed
        });
        match next {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                // What reassembly still holds is reported first; the damage ends the output.
                self.finish();
                let state = &mut self.state;
                let time = state
                    .out
                    .newest()
                    .map(|p| p.record.time)
                    .unwrap_or_default();
                state.push_record(Record {
                    time,
                    conn: None,
                    src: None,
                    dst: None,
                    from_sid: None,
                    to_sid: None,
                    from_sid_source: None,
                    to_sid_source: None,
                    offset: file_offset(&e),
                    raw: Vec::new(),
                    body: Body::Problem(Problem::new(ProblemKind::Capture {
                        detail: e.to_string(),
                    })),
                });
            }
            None => self.finish(),
        }
    }

    fn finish(&mut self) {
        if self.state.finished {
            return;
        }
        self.state.finished = true;
        self.state.out_changed = true;
        let state = &mut self.state;
        self.reassembler.finish_with(&mut |e| state.handle(e));
        state.ignore.clear();
    }
}

impl State {
    /// The slot of `conn` in `conns`, the last one found tried first.
    fn slot(&self, conn: ConnId) -> Option<usize> {
        let last = self.last_slot.get();
        if self.conns.get_index(last).is_some_and(|(k, _)| *k == conn) {
            return Some(last);
        }
        let slot = self.conns.get_index_of(&conn)?;
        self.last_slot.set(slot);
        Some(slot)
    }

    fn conn(&self, conn: ConnId) -> Option<&Conn> {
        self.slot(conn).map(|i| &self.conns[i])
    }

    fn conn_mut(&mut self, conn: ConnId) -> Option<&mut Conn> {
        self.slot(conn).map(|i| &mut self.conns[i])
    }

    /// What a connection reassembly opened is: election or quorum traffic, on a known port or
    /// still to be recognised, and which side initiated it.
    fn opening(&self, initiator: SocketAddr, acceptor: SocketAddr, mid_stream: bool) -> Opening {
        // A quorum port, or a member's quorum address named by a config.
        let quorum = self.quorum_ports.contains(&acceptor.port())
            || (mid_stream && self.quorum_ports.contains(&initiator.port()))
            || self.book.quorum_sid_of(acceptor).is_some();
        let ports = if quorum {
            &self.quorum_ports
        } else {
            &self.ports
        };
        let on_port = quorum
            || self.ports.contains(&acceptor.port())
            || (mid_stream && self.ports.contains(&initiator.port()));
        // A mid-stream guess of who initiated can be wrong; the listening port decides.
        let flipped =
            mid_stream && ports.contains(&initiator.port()) && !ports.contains(&acceptor.port());
        let (initiator, acceptor) = if flipped {
            (acceptor, initiator)
        } else {
            (initiator, acceptor)
        };
        Opening {
            initiator,
            acceptor,
            flipped,
            on_port,
            quorum,
            mid_stream,
        }
    }

    fn handle(&mut self, event: StreamEvent<&[u8]>) {
        if let Some((id, initiator, acceptor)) = self.opened.take() {
            match event {
                StreamEvent::Closed { conn, .. } if conn == id && !self.closes => return,
                _ => {
                    let opening = self.opening(initiator, acceptor, false);
                    self.conns.insert(id, opening.conn());
                }
            }
        }
        match event {
            StreamEvent::Opened {
                conn,
                initiator,
                acceptor,
                time,
                mid_stream,
            } => {
                if !mid_stream {
                    // What it is is worked out with its next event, which is mostly its close.
                    self.opened = Some((conn, initiator, acceptor));
                    return;
                }
                let opening = self.opening(initiator, acceptor, true);
                if !opening.on_port {
                    self.ignore.push(conn);
                    return;
                }
                let (initiator, acceptor) = (opening.initiator, opening.acceptor);
                self.conns.insert(conn, opening.conn());
                let problem = Problem::new(ProblemKind::MidStream {
                    initiator,
                    acceptor,
                });
                let r = self.problem(conn, CapDir::FromInitiator, time, 0, problem);
                self.push(r);
            }
            StreamEvent::Data {
                conn,
                dir,
                time,
                bytes,
                ..
            } => {
                // One lookup of the connection for both (a connection not decoded is none).
                let Some(slot) = self.slot(conn) else {
                    return;
                };
                let dir = self.conns[slot].our_dir(dir);
                self.data_at(slot, conn, dir, time, bytes)
            }
            StreamEvent::Gap {
                conn,
                dir,
                time,
                offset,
                missing,
            } => {
                let Some(slot) = self.slot(conn) else {
                    return;
                };
                let dir = self.conns[slot].our_dir(dir);
                let c = &mut self.conns[slot];
                if c.recognising.is_some() {
                    self.conns.swap_remove(&conn);
                    self.ignore.push(conn);
                    return;
                }
                let (partial, partial_sid) = if let Some(q) = &mut c.quorum {
                    let d = &mut q[index(dir)];
                    d.hunt = Some(Hunt::at(offset + missing));
                    d.snap = None;
                    (None, None)
                } else {
                    let d = &mut c.dirs[index(dir)];
                    // What the cut message's first bytes still tell: a notification's first
                    // fields, an initial message's sid. A stream already resynchronising holds
                    // bytes from where the last gap ended, normally a frame's start.
                    let partial = match &d.hunt {
                        None => d
                            .decoder
                            .partial_frame()
                            .map(|(prefix, size)| PartialNotification::decode(prefix, size)),
                        Some(h) => frame_prefix(&h.held)
                            .map(|(prefix, size)| PartialNotification::decode(prefix, size)),
                    };
                    let partial_sid = d
                        .hunt
                        .is_none()
                        .then(|| d.decoder.partial_initial())
                        .flatten()
                        .and_then(InitialMessage::partial_sid);
                    if self.cut.is_some()
                        && let Some(sid) = partial_sid
                    {
                        c.initiator_sid.get_or_insert(sid);
                    }
                    let d = &mut c.dirs[index(dir)];
                    d.hunt = Some(Hunt::at(offset + missing));
                    (partial, partial_sid)
                };
                let kind = match self.cut {
                    // Cut by the snap length: with what was captured.
                    Some(kept) => ProblemKind::Cut {
                        missing,
                        kept: kept as u64,
                        partial,
                        initial_sid: partial_sid.filter(|_| partial.is_none()),
                    },
                    None => ProblemKind::Gap { missing },
                };
                // A cut notification is reported where its frame starts, as a whole one is.
                let at = partial.map_or(offset, |p| {
                    offset.saturating_sub((p.captured + LENGTH_BYTES) as u64)
                });
                let r = self.problem(conn, dir, time, at, Problem::new(kind));
                self.push(r);
            }
            StreamEvent::Unacknowledged {
                conn,
                dir,
                since,
                time,
                acked,
            } => {
                let Some(slot) = self.slot(conn) else {
                    return;
                };
                let dir = self.conns[slot].our_dir(dir);
                let problem = Problem::new(ProblemKind::Unacknowledged { since, acked });
                let r = self.record(conn, dir, time, None, Body::Problem(problem));
                self.push(r);
            }
            StreamEvent::Closed { conn, time, how } => self.closed(conn, time, how),
        }
    }

    fn data(&mut self, conn: ConnId, dir: CapDir, time: Timestamp, bytes: &[u8]) {
        if let Some(slot) = self.slot(conn) {
            self.data_at(slot, conn, dir, time, bytes);
        }
    }

    /// [`State::data`] for the connection at `slot` in `conns`.
    fn data_at(&mut self, slot: usize, conn: ConnId, dir: CapDir, time: Timestamp, bytes: &[u8]) {
        self.check_hosts(slot);
        let c = &mut self.conns[slot];
        // On an election or quorum port, the first bytes tell TLS from plaintext; a TLS
        // connection is reported once and its bytes skipped.
        if c.recognising.is_none() && !bytes.is_empty() {
            match c.tls {
                Some(true) => return,
                Some(false) => {}
                None => {
                    let tls = tls_record_start(bytes);
                    c.tls = Some(tls.is_some());
                    if let Some(seen) = tls {
                        let problem = Problem::new(ProblemKind::Encrypted {
                            initiator: c.initiator,
                            acceptor: c.acceptor,
                            seen,
                        });
                        let r = self.problem(conn, dir, time, 0, problem);
                        self.push(r);
                        return;
                    }
                }
            }
        }
        if let Some(held) = &mut c.recognising {
            if dir == CapDir::FromAcceptor {
                // The acceptor of an election connection speaks only after the initial message.
                if held.is_empty() {
                    self.conns.swap_remove(&conn);
                    self.ignore.push(conn);
                }
                return;
            }
            held.extend_from_slice(bytes);
            match recognise(held) {
                Recognition::Wait => return,
                Recognition::No => {
                    self.conns.swap_remove(&conn);
                    self.ignore.push(conn);
                    return;
                }
                Recognition::Quorum => {
                    let held = c.recognising.take().unwrap_or_default();
                    c.quorum = Some(Box::new([QuorumDir::new(false), QuorumDir::new(false)]));
                    return self.data(conn, dir, time, &held);
                }
                Recognition::Yes => {
                    let held = c.recognising.take().unwrap_or_default();
                    return self.data(conn, dir, time, &held);
                }
            }
        }
        if c.quorum.is_some() {
            return self.quorum_data(conn, dir, time, bytes);
        }
        // Whole frames at the start of the bytes, nearly all of them, go straight to records;
        // what is left (a partial frame, an initial message, a problem) takes the general way.
        // (Making a record does not change the table, so the connection's slot stays put.)
        let mut bytes = bytes;
        if c.dirs[index(dir)].hunt.is_none() {
            while let Some((_, c)) = self.conns.get_index_mut(slot)
                && let Some((at, payload)) = c.dirs[index(dir)].decoder.whole_frame(&mut bytes)
            {
                self.frame_record(conn, dir, time, at, Cow::Borrowed(payload));
            }
            // Then the next frame's length, which comes alone as often as its payload does.
            if bytes.is_empty()
                || self.conns[slot].dirs[index(dir)]
                    .decoder
                    .frame_length(&mut bytes)
            {
                return;
            }
        }
        let Some((_, c)) = self.conns.get_index_mut(slot) else {
            return;
        };
        let mut items = std::mem::take(&mut self.items);
        let mut problems = std::mem::take(&mut self.problems);
        {
            // While hunting for a frame boundary the decoder is not fed: after an error it
            // would only repeat that error.
            let d = &mut c.dirs[index(dir)];
            let initials = &mut self.initials;
            if d.hunt.is_some() {
                hunt(d, bytes, initials, &mut items, &mut problems);
            } else {
                decode_all(d, bytes, initials, &mut items, &mut problems);
            }
        }
        // Problems and items are reported in stream order (a problem first at a tie: a
        // resynchronisation's warning precedes the frame it found).
        let mut problems_in_order = problems.drain(..).peekable();
        for (at, item) in items.drain(..) {
            self.push_problems_up_to(conn, dir, time, &mut problems_in_order, at);
            let (body, raw) = match item {
                StreamItem::Initial { message, raw, .. } => {
                    self.book.learn_initial(&message);
                    self.report_conflicts(conn, dir, time, at);
                    if let Some(slot) = self.slot(conn) {
                        let c = &mut self.conns[slot];
                        c.initiator_sid = Some(message.sid);
                        self.book.learn_dialler(message.sid, c.initiator.ip());
                    }
                    (
                        Body::Initial(message),
                        if self.keep_raw { raw } else { Vec::new() },
                    )
                }
                StreamItem::Frame { payload, .. } => {
                    self.frame_record(conn, dir, time, at, Cow::Owned(payload));
                    continue;
                }
                StreamItem::Auth { packet, raw, .. } => {
                    let Some(c) = self.conn_mut(conn) else {
                        continue;
                    };
                    let accepted = match packet.status {
                        AuthStatus::InProgress => {
                            if let Some(user) =
                                crate::sasl::digest_md5::response_user(&packet.token)
                            {
                                c.sasl_user = Some(user);
                            }
                            continue;
                        }
                        AuthStatus::Success => true,
                        AuthStatus::Error => false,
                    };
                    let user = c.sasl_user.clone();
                    let body = Body::Problem(Problem::new(ProblemKind::Sasl {
                        accepted,
                        user,
                        by: SaslJudge::Server,
                    }));
                    (body, raw)
                }
            };
            let mut r = self.record(conn, dir, time, Some(at), body);
            r.record.raw = raw;
            self.push(r);
        }
        self.push_problems_up_to(conn, dir, time, &mut problems_in_order, u64::MAX);
        drop(problems_in_order);
        self.items = items;
        self.problems = problems;
    }

    /// Keeps a buffer of a record that has been handed out, for the next records.
    fn keep_spare(&mut self, buf: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS
            && (SPARE_MIN_BYTES..=SPARE_BUFFER_BYTES).contains(&buf.capacity())
        {
            self.spare.push(buf);
        }
    }

    /// Records the notification framed at stream offset `at` (or why it is malformed). An owned
    /// payload becomes the record's bytes as it is; a lent one is copied, if they are kept.
    fn frame_record(
        &mut self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        at: u64,
        payload: Cow<'_, [u8]>,
    ) {
        let body =
            match Notification::decode_copying(&payload, |b| copy_into_spare(&mut self.spare, b)) {
                Ok(n) => {
                    if let Some(raw) = &n.config
                        && let Some(cfg) = self.configs.new_config(raw)
                    {
                        self.book
                            .learn_config(&cfg, identity::SidSource::NotificationConfig);
                        self.report_conflicts(conn, dir, time, at);
                    }
                    if dir == CapDir::FromInitiator {
                        self.initiator_vote(conn, &n);
                    }
                    Body::Notification(n)
                }
                Err(e) => {
                    let e = e.at(at + LENGTH_BYTES as u64);
                    Body::Problem(Problem::new(ProblemKind::Malformed {
                        error: e,
                        unit: MalformedUnit::Notification {
                            bytes: payload.len(),
                        },
                    }))
                }
            };
        let mut r = self.record(conn, dir, time, Some(at), body);
        if self.keep_raw {
            r.record.raw = match payload {
                Cow::Owned(owned) => owned,
                Cow::Borrowed(lent) => copy_into_spare(&mut self.spare, lent),
            };
        }
        self.push(r);
    }

    /// Decodes bytes of a quorum-port connection.
    fn quorum_data(&mut self, conn: ConnId, dir: CapDir, time: Timestamp, bytes: &[u8]) {
        let Some(q) = self.conn_mut(conn).and_then(|c| c.quorum.as_mut()) else {
            return;
        };
        let d = &mut q[index(dir)];
        let mut out: Vec<(u64, Timestamp, QuorumMessage)> = Vec::new();
        let mut problems = Vec::new();
        let mut snap_done: Option<(Record, u64)> = None;
        let mut input: &[u8] = bytes;
        let held: Vec<u8>;
        let mut arrivals = Vec::new();
        if let Some(h) = &mut d.hunt {
            h.hold(bytes, time);
            match find_packet_start(&h.held) {
                FrameSearch::Found(at) => {
                    problems.extend(h.skipped(at, Boundary::QuorumPacket));
                    d.base = h.start + at as u64;
                    d.decoder = QuorumStreamDecoder::new();
                    held = h.held.split_off(at);
                    arrivals = std::mem::take(&mut h.arrivals);
                    d.hunt = None;
                }
                FrameSearch::NotBefore(at) => {
                    h.rule_out(at, MAX_QUORUM_HUNT_BYTES);
                    return;
                }
            }
            input = &held;
        }
        loop {
            match d.decoder.decode(&mut input) {
                Ok(Some(QuorumItem::Packet { offset, packet })) => {
                    // Dated by the piece holding its last byte (held bytes came earlier).
                    let last = (d.base + d.decoder.position()).saturating_sub(1);
                    let at = arrival_of(&arrivals, last).unwrap_or(time);
                    out.push((d.base + offset, at, QuorumMessage::of(&packet)));
                }
                Ok(Some(QuorumItem::SnapshotData { bytes, .. })) => {
                    if let Some((_, n)) = &mut d.snap {
                        *n += bytes.len() as u64;
                    }
                }
                Ok(Some(QuorumItem::SnapshotEnd { .. })) => {
                    snap_done = d.snap.take();
                }
                Ok(Some(QuorumItem::Auth { offset, packet, .. })) => {
                    // The server's verdict is the one record; the learner's user is named on
                    // the election port.
                    let accepted = match packet.status {
                        AuthStatus::InProgress => continue,
                        AuthStatus::Success => true,
                        AuthStatus::Error => false,
                    };
                    problems.push((
                        d.base + offset,
                        Problem::new(ProblemKind::Sasl {
                            accepted,
                            user: None,
                            by: SaslJudge::Leader,
                        }),
                    ));
                }
                Ok(None) => break,
                Err(e) => {
                    let at = d.base + e.offset;
                    problems.push((
                        at,
                        Problem::new(ProblemKind::Malformed {
                            error: e.clone(),
                            unit: MalformedUnit::QuorumPacket,
                        }),
                    ));
                    d.hunt = Some(Hunt::holding(input.to_vec(), d.base + d.decoder.position()));
                    d.snap = None;
                    break;
                }
            }
        }
        let learner = out.iter().find_map(|(_, _, m)| m.learner.map(|l| l.sid));
        if let Some(sid) = learner
            && let Some(slot) = self.slot(conn)
        {
            let c = &mut self.conns[slot];
            c.initiator_sid = Some(sid);
            self.book.learn_dialler(sid, c.initiator.ip());
        }
        // A snapshot ends before anything else this piece holds; then problems and packets
        // in stream order, as for the election port.
        if let Some((mut r, n)) = snap_done {
            if let Body::Quorum(m) = &mut r.body {
                m.snapshot_bytes = Some(n);
            }
            self.push_record(r);
        }
        let mut problems_in_order = problems.into_iter().peekable();
        for (at, packet_time, m) in out {
            self.push_problems_up_to(conn, dir, time, &mut problems_in_order, at);
            let snap = m.ptype == ptype::SNAP;
            let r = self.record(conn, dir, packet_time, Some(at), Body::Quorum(m));
            if snap && let Some(q) = self.conn_mut(conn).and_then(|c| c.quorum.as_mut()) {
                // Handed out once the snapshot has streamed, with its size.
                q[index(dir)].snap = Some((r.record, 0));
                continue;
            }
            self.push(r);
        }
        self.push_problems_up_to(conn, dir, time, &mut problems_in_order, u64::MAX);
    }

    /// Warns of each address conflict the message at `at` made (see
    /// [`identity::AddressConflict`]), before its own record.
    fn report_conflicts(&mut self, conn: ConnId, dir: CapDir, time: Timestamp, at: u64) {
        for conflict in self.book.take_conflicts() {
            let problem = Problem::new(ProblemKind::AddressConflict(conflict));
            let r = self.problem(conn, dir, time, at, problem);
            self.push(r);
        }
    }

    /// A connection ended: a record for FIN/RST, and a warning for a message left unfinished.
    fn closed(&mut self, conn: ConnId, time: Timestamp, how: CloseKind) {
        let Some(slot) = self.slot(conn) else {
            return;
        };
        let c = &self.conns[slot];
        let mut unfinished = Vec::new();
        for dir in [CapDir::FromInitiator, CapDir::FromAcceptor] {
            let i = index(dir);
            let pending = match &c.quorum {
                Some(q) => {
                    if let Some((r, n)) = &q[i].snap {
                        Some((r.offset.unwrap_or(0), *n + 1))
                    } else {
                        let b = q[i].decoder.buffered() as u64;
                        (b > 0).then(|| (q[i].base + q[i].decoder.position() - b, b))
                    }
                }
                None => {
                    let b = c.dirs[i].decoder.buffered() as u64;
                    (b > 0 && c.dirs[i].hunt.is_none())
                        .then(|| (c.dirs[i].decoder.position() - b, b))
                }
            };
            if let Some((at, bytes)) = pending {
                unfinished.push((dir, at, bytes));
            }
        }
        let close = self.closes
            && matches!(how, CloseKind::Fin | CloseKind::Rst)
            && c.recognising.is_none();
        {
            for (dir, at, bytes) in unfinished {
                let r = self.problem(
                    conn,
                    dir,
                    time,
                    at,
                    Problem::new(ProblemKind::Unfinished {
                        bytes,
                        capture_ended: how == CloseKind::CaptureEnd,
                    }),
                );
                self.push(r);
            }
        }
        if close {
            let r = self.record(
                conn,
                CapDir::FromInitiator,
                time,
                None,
                Body::Closed {
                    reset: how == CloseKind::Rst,
                    quorum: self.conns[slot].quorum.is_some(),
                },
            );
            self.push(r);
        }
        // Making records does not change the table: the slot still holds the connection.
        self.conns.swap_remove_index(slot);
    }

    /// The sid listening on a connection's acceptor address, and how it was learned.
    fn acceptor_sid(&self, c: &Conn) -> Option<NamedSid> {
        let (version, quorum) = (self.book.version(), c.quorum.is_some());
        if let Some((v, q, sid)) = c.acceptor_sid.get()
            && (v, q) == (version, quorum)
        {
            return sid;
        }
        let sid = if quorum {
            self.book.quorum_sid_source_of(c.acceptor)
        } else {
            self.book.sid_source_of(c.acceptor)
        };
        c.acceptor_sid.set(Some((version, quorum, sid)));
        sid
    }

    /// Names a connection's unnamed initiator by its first notification (see
    /// [`SidSource::Vote`]): a LOOKING vote for a member larger than the acceptor, on a
    /// connection whose dialler's address names nobody. A server's first vote of a round goes
    /// to every peer before any other (its send queues empty), and proposes itself.
    fn initiator_vote(&mut self, conn: ConnId, n: &Notification) {
        let Some(slot) = self.slot(conn) else {
            return;
        };
        let c = &self.conns[slot];
        if c.initiator_sid.is_some() || c.initiator_voted {
            return;
        }
        // A decided follower's answers (the state it holds, as it answers a LOOKING peer) name
        // only its leader: its first LOOKING vote still names it. A leader's name itself.
        let state = n.state;
        if matches!(
            state,
            crate::wire::ServerState::Following | crate::wire::ServerState::Observing
        ) {
            return;
        }
        let acceptor = self.acceptor_sid(c).map(|(sid, _)| sid);
        let ip = c.initiator.ip();
        self.conns[slot].initiator_voted = true;
        let Some(acceptor) = acceptor else {
            return;
        };
        let proposer = n.leader;
        let votes = self
            .book
            .members()
            .get(&proposer)
            .is_some_and(|r| *r == crate::wire::Role::Participant);
        if !matches!(
            state,
            crate::wire::ServerState::Looking | crate::wire::ServerState::Leading
        ) || !votes
            || proposer <= acceptor
            || self.book.dialler_of(ip, Some(acceptor)).is_some()
        {
            return;
        }
        let c = &mut self.conns[slot];
        c.initiator_sid = Some(proposer);
        c.initiator_source = Some(SidSource::Vote);
        // The connection's records already waiting are named now: they are not named later
        // if the connection closes first (a capture's end closes them all).
        let retired = self.out.retired;
        for p in self.out.queue.iter_mut().skip(retired) {
            if p.record.conn == Some(conn)
                && let Some(wait) = p.acceptor.take()
            {
                fill_sids(
                    &self.book,
                    &mut p.record,
                    wait,
                    Some((proposer, SidSource::Vote)),
                );
            }
        }
    }

    /// A connection whose initiator did not name itself tells the book that its initiator's
    /// host is not its acceptor's alone (once a book change could make that news).
    fn check_hosts(&mut self, slot: usize) {
        let version = self.book.version();
        let c = &self.conns[slot];
        if c.initiator_sid.is_some() || c.hosts_checked == version {
            return;
        }
        let acceptor = self.acceptor_sid(c).map(|(sid, _)| sid);
        let ip = c.initiator.ip();
        if let Some(sid) = acceptor {
            self.book.learn_accepted(ip, sid);
        }
        self.conns[slot].hosts_checked = self.book.version();
    }

    fn push(&mut self, mut pending: Pending) {
        // A stream names the sids known when the record decodes, not when the reader next
        // drains its output: a pipe read in large chunks and a live capture read packet by
        // packet must print the same records.
        if self.streaming
            && let Some(wait) = pending.acceptor.take()
        {
            let by_vote = pending
                .record
                .conn
                .and_then(|id| self.conns.get(&id))
                .and_then(|c| Some((c.initiator_sid?, c.initiator_source?)));
            fill_sids(&self.book, &mut pending.record, wait, by_vote);
        }
        self.out.push(pending);
        self.out_changed = true;
    }

    /// Pushes a record made elsewhere (its wait for sids worked out here).
    fn push_record(&mut self, record: Record) {
        let acceptor = record
            .conn
            .and_then(|c| self.conn(c))
            .and_then(|c| waits_for(&record, c));
        self.push(Pending { record, acceptor });
    }

    /// Whether the oldest record's wait for sids is over; if so, the sid it waited for is
    /// filled in, where known by now.
    fn front_ready(&mut self) -> bool {
        if !self.out_changed {
            return false;
        }
        self.out_changed = false;
        let (Some(newest), Some(oldest)) = (self.out.newest(), self.out.oldest()) else {
            return false;
        };
        let waited = newest.record.time.secs - oldest.record.time.secs;
        // A record that waits for no sid goes out at once: nothing later can change it.
        let ready = self.finished
            || self.streaming
            || oldest.acceptor.is_none()
            || self.out.len() > RESOLVE_WINDOW_RECORDS
            || waited > UNNAMED_WINDOW_SECS
            || (waited > RESOLVE_WINDOW_SECS
                && (oldest.acceptor.is_none() || !self.book.members().is_empty()));
        if !ready {
            return false;
        }
        // The next may be ready too.
        self.out_changed = true;
        let Some(Pending { record, acceptor }) = self.out.oldest_mut() else {
            return false;
        };
        if let Some(wait) = acceptor.take() {
            let by_vote = record
                .conn
                .and_then(|id| self.conns.get(&id))
                .and_then(|c| Some((c.initiator_sid?, c.initiator_source?)));
            fill_sids(&self.book, record, wait, by_vote);
        }
        true
    }

    /// A record of `conn` in direction `dir`, with its envelope, as it waits to be handed out.
    fn record(
        &self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        offset: Option<u64>,
        body: Body,
    ) -> Pending {
        let mut record = Record {
            time,
            conn: Some(conn),
            src: None,
            dst: None,
            from_sid: None,
            to_sid: None,
            from_sid_source: None,
            to_sid_source: None,
            offset,
            raw: Vec::new(),
            body,
        };
        let Some(c) = self.conn(conn) else {
            return Pending {
                record,
                acceptor: None,
            };
        };
        let acceptor = self.acceptor_sid(c);
        let (acceptor_sid, acceptor_source) = (
            acceptor.map(|(sid, _)| sid),
            acceptor.and_then(|(_, source)| named_by(source)),
        );
        (
            record.src,
            record.dst,
            record.from_sid,
            record.to_sid,
            record.from_sid_source,
            record.to_sid_source,
        ) = match dir {
            CapDir::FromInitiator => (
                Some(c.initiator),
                Some(c.acceptor),
                c.initiator_sid,
                acceptor_sid,
                c.initiator_source,
                acceptor_source,
            ),
            CapDir::FromAcceptor => (
                Some(c.acceptor),
                Some(c.initiator),
                acceptor_sid,
                c.initiator_sid,
                acceptor_source,
                c.initiator_source,
            ),
        };
        Pending {
            acceptor: waits_for(&record, c),
            record,
        }
    }

    /// Pushes the records of the problems (in stream order) at or before stream offset `at`,
    /// so that they come before the message decoded there.
    fn push_problems_up_to(
        &mut self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        problems: &mut std::iter::Peekable<impl Iterator<Item = (u64, Problem)>>,
        at: u64,
    ) {
        while let Some((p_at, problem)) = problems.next_if(|(p_at, _)| *p_at <= at) {
            let r = self.problem(conn, dir, time, p_at, problem);
            self.push(r);
        }
    }

    fn problem(
        &self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        offset: u64,
        problem: Problem,
    ) -> Pending {
        self.record(conn, dir, time, Some(offset), Body::Problem(problem))
    }
}

/// What a record of connection `c` waits for: only one with an end whose sid is still unknown
/// waits for it to be learned. The initiator's sid, when no initial message gave it, is only
/// ever looked up when the wait is over: what names it by its IP can be ruled out by what
/// comes a little later (see [`AddressBook::dialler_of`]).
fn waits_for(record: &Record, c: &Conn) -> Option<SidWait> {
    let from_initiator = record.src == Some(c.initiator);
    let (initiator_sid, acceptor_sid) = if from_initiator {
        (record.from_sid, record.to_sid)
    } else {
        (record.to_sid, record.from_sid)
    };
    if initiator_sid.is_some() && acceptor_sid.is_some() {
        return None;
    }
    Some(SidWait {
        acceptor: acceptor_sid.is_none().then_some(c.acceptor),
        initiator: initiator_sid.is_none().then_some(c.initiator.ip()),
        acceptor_sid,
        from_initiator,
        quorum: c.quorum.is_some(),
    })
}

/// The source a record names, `None` for an initial message's (not written).
fn named_by(source: SidSource) -> Option<SidSource> {
    source.name().map(|_| source)
}

/// Fills in the sids a record waited for, as far as the book knows them now (or, for the
/// initiator, as its connection's later vote named it).
fn fill_sids(
    book: &AddressBook,
    record: &mut Record,
    wait: SidWait,
    initiator_by_vote: Option<NamedSid>,
) {
    let mut acceptor_sid = wait.acceptor_sid;
    let (acceptor_slot, initiator_slot) = if wait.from_initiator {
        (
            (&mut record.to_sid, &mut record.to_sid_source),
            (&mut record.from_sid, &mut record.from_sid_source),
        )
    } else {
        (
            (&mut record.from_sid, &mut record.from_sid_source),
            (&mut record.to_sid, &mut record.to_sid_source),
        )
    };
    if let Some(addr) = wait.acceptor
        && let Some((sid, source)) = if wait.quorum {
            book.quorum_sid_source_of(addr)
        } else {
            book.sid_source_of(addr)
        }
    {
        *acceptor_slot.0 = Some(sid);
        *acceptor_slot.1 = named_by(source);
        acceptor_sid = Some(sid);
    }
    if let Some(ip) = wait.initiator
        && let Some((sid, source)) = book.dialler_of(ip, acceptor_sid).or(initiator_by_vote)
    {
        *initiator_slot.0 = Some(sid);
        *initiator_slot.1 = named_by(source);
    }
}

/// Adds `input` to a direction that is looking for a frame boundary; once one is found, decodes
/// from there on.
fn hunt(
    d: &mut DirState,
    input: &[u8],
    initials: &mut InitialCache,
    items: &mut Vec<(u64, StreamItem)>,
    problems: &mut Vec<(u64, Problem)>,
) {
    let Some(h) = &mut d.hunt else {
        return;
    };
    h.held.extend_from_slice(input);
    match find_frame_start(&h.held) {
        FrameSearch::Found(at) => {
            let resume = h.start + at as u64;
            let rest = h.held.split_off(at);
            problems.extend(h.skipped(at, Boundary::Frame));
            d.hunt = None;
            d.decoder.resync(resume);
            decode_all(d, &rest, initials, items, problems);
        }
        // Offsets before `at` cannot start a frame: forget them, which also keeps the buffer
        // within one frame's size.
        FrameSearch::NotBefore(at) => h.rule_out(at, MAX_HUNT_BYTES),
    }
}

fn decode_all(
    d: &mut DirState,
    mut input: &[u8],
    initials: &mut InitialCache,
    items: &mut Vec<(u64, StreamItem)>,
    problems: &mut Vec<(u64, Problem)>,
) {
    loop {
        match d.decoder.decode_with(&mut input, initials) {
            Ok(Some(item)) => {
                let at = match &item {
                    StreamItem::Initial { offset, .. }
                    | StreamItem::Frame { offset, .. }
                    | StreamItem::Auth { offset, .. } => *offset,
                };
                items.push((at, item));
            }
            Ok(None) => return,
            Err(e) => {
                problems.push((
                    e.offset,
                    Problem::new(ProblemKind::Malformed {
                        error: e.clone(),
                        unit: MalformedUnit::Frame,
                    }),
                ));
                // What follows in this piece is hunted through like any resync.
                d.hunt = Some(Hunt::at(d.decoder.position()));
                return hunt(d, input, initials, items, problems);
            }
        }
    }
}

/// Where in the file a read error happened, when it says.
fn file_offset(e: &CaptureError) -> Option<u64> {
    match e {
        CaptureError::Read { offset, .. }
        | CaptureError::Malformed { offset, .. }
        | CaptureError::Truncated { offset, .. }
        | CaptureError::TooLarge { offset, .. }
        | CaptureError::Joined { offset, .. } => Some(*offset),
        CaptureError::NotACapture { .. } | CaptureError::Empty => Some(0),
        CaptureError::Open { .. } | CaptureError::SameFile { .. } => None,
        CaptureError::InFile { source, .. } => file_offset(source),
    }
}

impl<S: SegmentSource> Iterator for Decoder<S> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        self.wait_ready()
            .then(|| self.state.out.pop_oldest().map(|p| p.record))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{TcpSegment, Timestamp};
    use crate::wire::quorum::{LearnerInfo, QuorumPacket};
    use crate::wire::{ProtocolVersion, QuorumConfig, ServerState};

    fn seg(src: &str, dst: &str, seq: u32, syn: bool, payload: Vec<u8>) -> TcpSegment {
        TcpSegment {
            time: Timestamp {
                secs: 1_000,
                nanos: seq,
            },
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            ack: (!syn || src.ends_with(":2888") || src.ends_with(":5000")).then_some(1),
            syn,
            fin: false,
            rst: false,
            payload,
            missing: 0,
            record: 0,
        }
    }

    fn packet(t: i32, zxid: i64, data: Option<Vec<u8>>) -> Vec<u8> {
        QuorumPacket::new(t, zxid, data).encode().unwrap()
    }

    /// A learner's sync with its leader: FOLLOWERINFO, LEADERINFO, ACKEPOCH, DIFF, NEWLEADER,
    /// ACK, UPTODATE, as segments on `port`, optionally without their start.
    fn sync_segments(port: u16, from: usize) -> Vec<TcpSegment> {
        let learner = "127.0.0.1:40000";
        let leader = format!("127.0.0.2:{port}");
        let info = LearnerInfo {
            sid: 1,
            protocol_version: 0x10000,
            config_version: 0,
        };
        let up = [
            QuorumPacket::follower_info(1, &info).encode().unwrap(),
            QuorumPacket::ack_epoch(0x100000003, 1).encode().unwrap(),
            QuorumPacket::ack(0x200000000).encode().unwrap(),
        ];
        let down = [
            packet(
                ptype::LEADERINFO,
                0x200000000,
                Some(0x10000i32.to_be_bytes().to_vec()),
            ),
            packet(ptype::DIFF, 0x100000003, None),
            packet(ptype::NEWLEADER, 0x200000000, Some(Vec::new())),
            packet(ptype::UPTODATE, -1, None),
        ];
        let mut out = Vec::new();
        if from == 0 {
            out.push(seg(learner, &leader, 0, true, Vec::new()));
            out.push(seg(&leader, learner, 0, true, Vec::new()));
        }
        let (mut a, mut b) = (1u32, 1u32);
        let order = [
            (0, true),
            (0, false),
            (1, true),
            (1, false),
            (2, false),
            (2, true),
            (3, false),
        ];
        for (i, up_side) in order {
            let (bytes, seq, src, dst) = if up_side {
                (&up[i], &mut a, learner, leader.as_str())
            } else {
                (&down[i], &mut b, leader.as_str(), learner)
            };
            out.push(seg(src, dst, *seq, false, bytes.clone()));
            *seq += bytes.len() as u32;
            // Acknowledge what the other side sent so far, as TCP does.
            let ack = if up_side { b } else { a };
            if let Some(last) = out.last_mut() {
                last.ack = Some(ack);
            }
        }
        out.split_off(from.min(out.len()))
    }

    fn decode(segments: Vec<TcpSegment>, options: DecodeOptions) -> Vec<Record> {
        Decoder::new(segments.into_iter().map(Ok), options).collect()
    }

    fn types(records: &[Record]) -> Vec<&'static str> {
        records
            .iter()
            .filter_map(|r| match &r.body {
                Body::Quorum(q) => Some(q.type_name()),
                _ => None,
            })
            .collect()
    }

    /// Quorum TLS on both ports: each connection is one `encrypted` warning, its bytes
    /// skipped; no malformed frames. A plaintext election connection beside them decodes.
    #[test]
    fn tls_connections_are_reported_as_encrypted() {
        // A ClientHello's record header and a little of it, then the server's answer and
        // application data: what any TLS connection carries first.
        let hello = [
            0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c, 0x03, 0x03,
        ]
        .to_vec();
        let answer = [0x16, 0x03, 0x03, 0x00, 0x30, 0x02, 0x00, 0x00].to_vec();
        let data = [0x17, 0x03, 0x03, 0x00, 0x20, 0xde, 0xad, 0xbe, 0xef].to_vec();
        let mut segments = Vec::new();
        for port in [3888, 2888] {
            let (a, b) = (format!("127.0.0.1:4{port}"), format!("127.0.0.2:{port}"));
            segments.push(seg(&a, &b, 0, true, Vec::new()));
            let mut syn_ack = seg(&b, &a, 0, true, Vec::new());
            syn_ack.ack = Some(1);
            segments.push(syn_ack);
            segments.push(seg(&a, &b, 1, false, hello.clone()));
            segments.push(seg(&b, &a, 1, false, answer.clone()));
            segments.push(seg(&a, &b, 1 + hello.len() as u32, false, data.clone()));
        }
        // A TLS connection whose start the capture missed: application data.
        segments.push(seg(
            "127.0.0.3:40001",
            "127.0.0.2:3888",
            500,
            false,
            data.clone(),
        ));
        use crate::wire::TlsRecord;
        let records = decode(segments, DecodeOptions::default());
        let encrypted: Vec<TlsRecord> = records
            .iter()
            .filter_map(|r| match &r.body {
                Body::Problem(Problem {
                    kind: ProblemKind::Encrypted { seen, .. },
                    ..
                }) => Some(*seen),
                _ => None,
            })
            .collect();
        assert_eq!(encrypted.len(), 3, "{records:#?}");
        assert_eq!(encrypted[0], TlsRecord::Handshake);
        assert_eq!(encrypted[2], TlsRecord::ApplicationData);
        assert!(
            !records
                .iter()
                .any(|r| matches!(&r.body, Body::Problem(p) if p.severity() == Severity::Error)),
            "{records:#?}"
        );
        assert!(
            !records
                .iter()
                .any(|r| matches!(r.body, Body::Notification(_) | Body::Quorum(_))),
            "{records:#?}"
        );
    }

    #[test]
    fn quorum_port_packets_with_sids() {
        let mut book = AddressBook::default();
        book.learn_config(
            &QuorumConfig::parse(
                "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant",
            )
            .unwrap(),
            SidSource::Config,
        );
        let options = DecodeOptions {
            book,
            ..DecodeOptions::default()
        };
        let records = decode(sync_segments(2888, 0), options);
        assert_eq!(
            types(&records),
            [
                "FOLLOWERINFO",
                "LEADERINFO",
                "ACKEPOCH",
                "DIFF",
                "NEWLEADER",
                "ACK",
                "UPTODATE"
            ]
        );
        for r in records.iter().filter(|r| matches!(r.body, Body::Quorum(_))) {
            let sids = (r.from_sid, r.to_sid);
            assert!(
                sids == (Some(1), Some(2)) || sids == (Some(2), Some(1)),
                "{r:?}"
            );
        }
        let Body::Quorum(fi) = &records[0].body else {
            panic!()
        };
        assert_eq!(fi.learner.map(|l| l.sid), Some(1));
    }

    #[test]
    fn followerinfo_on_another_port_is_recognised() {
        let records = decode(sync_segments(5000, 0), DecodeOptions::default());
        assert_eq!(types(&records).len(), 7, "{records:?}");
        // Without the FOLLOWERINFO start, a connection to an unknown port is not taken.
        let records = decode(sync_segments(5001, 2), DecodeOptions::default());
        assert!(types(&records).is_empty());
    }

    proptest::proptest! {
        /// Any bytes on a quorum connection, in any pieces, joined mid-way or not: no panic,
        /// and what is held while hunting stays within its bound.
        #[test]
        fn any_quorum_bytes_decode_within_bounds(
            pieces in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..300), 0..12),
            mid in proptest::bool::ANY,
        ) {
            let mut segs = Vec::new();
            if !mid {
                segs.push(seg("127.0.0.1:40000", "127.0.0.2:2888", 0, true, Vec::new()));
                segs.push(seg("127.0.0.2:2888", "127.0.0.1:40000", 0, true, Vec::new()));
            }
            let mut seq = 1u32;
            for p in pieces {
                let n = p.len() as u32;
                segs.push(seg("127.0.0.2:2888", "127.0.0.1:40000", seq, false, p));
                seq += n;
            }
            let mut d = Decoder::new(segs.into_iter().map(Ok), DecodeOptions::default());
            while d.next().is_some() {
                for c in d.state.conns.values() {
                    if let Some(q) = &c.quorum {
                        for dir in q.iter() {
                            let held = dir.hunt.as_ref().map_or(0, |h| h.held.len());
                            proptest::prop_assert!(held <= MAX_QUORUM_HUNT_BYTES + 4096);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn quorum_stream_joined_mid_way_resynchronises() {
        // The capture starts after the handshake and the FOLLOWERINFO.
        let records = decode(sync_segments(2888, 3), DecodeOptions::default());
        // The leader's side is picked up at the first of two packets in a row; the learner's
        // lone ACK cannot be told from noise and is not guessed at.
        let t = types(&records);
        assert_eq!(t, ["DIFF", "NEWLEADER", "UPTODATE"]);
        assert!(records.iter().any(|r| matches!(
            &r.body,
            Body::Problem(p) if matches!(p.kind, ProblemKind::MidStream { .. })
        )));
    }

    /// An election connection: SYN, SYN-ACK, then `stream` from the initiator in `pieces`
    /// segments of about equal size.
    fn election_stream(stream: &[u8], pieces: usize) -> Vec<TcpSegment> {
        let (a, b) = ("127.0.0.1:40000", "127.0.0.2:3888");
        let mut syn_ack = seg(b, a, 0, true, Vec::new());
        syn_ack.ack = Some(1);
        let mut out = vec![seg(a, b, 0, true, Vec::new()), syn_ack];
        let size = stream.len().div_ceil(pieces.max(1)).max(1);
        for (i, chunk) in stream.chunks(size).enumerate() {
            out.push(seg(a, b, 1 + (i * size) as u32, false, chunk.to_vec()));
        }
        out
    }

    /// What a record is, with its offset: for comparing decodes.
    fn shape(records: &[Record]) -> Vec<(String, Option<u64>)> {
        records
            .iter()
            .map(|r| {
                let what = match &r.body {
                    Body::Initial(m) => format!("initial {}", m.sid),
                    Body::Notification(n) => format!("notification {}", n.leader),
                    Body::Problem(Problem {
                        kind: ProblemKind::Malformed { .. },
                        ..
                    }) => "malformed".to_string(),
                    Body::Problem(p) => format!("{:?}", p.kind),
                    other => format!("{other:?}"),
                };
                (what, r.offset)
            })
            .collect()
    }

    /// Sid 2's initial message, and a notification frame of its vote for 7.
    fn initial_and_frame() -> (Vec<u8>, Vec<u8>) {
        let initial = InitialMessage::with_address_text(ProtocolVersion::V2, 2, "127.0.0.2:3888")
            .encode()
            .unwrap();
        let notification = Notification::current(ServerState::Looking, 7, 0, 1, 0, Vec::new())
            .encode()
            .unwrap();
        (initial, crate::wire::encode_frame(&notification).unwrap())
    }

    /// After a malformed frame, the bytes that follow are hunted through for the next frame,
    /// however many segments they take: the error is reported once, the skip once, and the
    /// frame found at its true offset. Before, each later segment repeated the error and
    /// restarted the hunt at the error's offset.
    /// Held bytes keep when each piece came, so that what is found in them is dated by its
    /// own segment; pieces wholly ruled out are forgotten, and at most the newest
    /// [`MAX_HUNT_ARRIVALS`] are kept.
    #[test]
    fn a_hunt_dates_held_bytes_by_their_segments() {
        let at = |secs| Timestamp { secs, nanos: 0 };
        let mut h = Hunt::at(100);
        h.hold(b"abc", at(1));
        h.hold(b"defg", at(2));
        assert_eq!(h.arrivals, vec![(100, at(1)), (103, at(2))]);
        assert_eq!(arrival_of(&h.arrivals, 102), Some(at(1)));
        assert_eq!(arrival_of(&h.arrivals, 106), Some(at(2)));
        assert_eq!(arrival_of(&h.arrivals, 99), None);
        h.rule_out(4, usize::MAX);
        assert_eq!((h.start, &h.held[..]), (104, &b"efg"[..]));
        assert_eq!(h.arrivals, vec![(103, at(2))]);
        for i in 0..200 {
            h.hold(b"x", at(10 + i));
        }
        assert_eq!(h.arrivals.len(), MAX_HUNT_ARRIVALS);
        assert_eq!(
            arrival_of(&h.arrivals, h.start + h.held.len() as u64 - 1),
            Some(at(209))
        );
    }

    #[test]
    fn a_resynchronisation_spans_segments() {
        let (initial, frame) = initial_and_frame();
        let mut stream = initial.clone();
        stream.extend_from_slice(&(-1i32).to_be_bytes());
        let junk = 3000;
        stream.extend(std::iter::repeat_n(0xabu8, junk));
        let found_at = stream.len() as u64;
        stream.extend_from_slice(&frame);
        stream.extend_from_slice(&frame);
        let whole = shape(&decode(
            election_stream(&stream, 1),
            DecodeOptions::default(),
        ));
        let at = initial.len() as u64;
        // The bad length's four bytes are read, then the hunt skips the junk.
        let skipped = ProblemKind::Resynced {
            skipped: junk as u64,
            to: Boundary::Frame,
        };
        assert_eq!(
            whole
                .iter()
                .map(|(w, o)| (w.as_str(), *o))
                .collect::<Vec<_>>(),
            [
                ("initial 2", Some(0)),
                ("malformed", Some(at)),
                (format!("{skipped:?}").as_str(), Some(at + 4)),
                ("notification 7", Some(found_at)),
                ("notification 7", Some(found_at + frame.len() as u64)),
            ]
        );
        for pieces in [2, 7, 40, stream.len()] {
            let split = shape(&decode(
                election_stream(&stream, pieces),
                DecodeOptions::default(),
            ));
            assert_eq!(split, whole, "in {pieces} segments");
        }
    }

    /// Records of one segment come in stream order: a frame decoded before a malformed one is
    /// reported before the error.
    #[test]
    fn an_error_follows_what_came_before_it_in_the_segment() {
        let (initial, frame) = initial_and_frame();
        let mut stream = initial.clone();
        stream.extend_from_slice(&frame);
        stream.extend_from_slice(&0i32.to_be_bytes());
        let records = decode(election_stream(&stream, 1), DecodeOptions::default());
        let after = (initial.len() + frame.len()) as u64;
        assert_eq!(
            shape(&records),
            [
                ("initial 2".to_string(), Some(0)),
                ("notification 7".to_string(), Some(initial.len() as u64)),
                ("malformed".to_string(), Some(after)),
            ]
        );
        // The error knows the sender's sid, learned from the initial message before it.
        assert_eq!(records[2].from_sid, Some(2));
    }
}
