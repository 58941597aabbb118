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

pub mod identity;
pub mod summary;

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddr;

use crate::capture::{
    CaptureError, ConnId, Direction as CapDir, OwnedSegments, Reassembler, ReassemblyConfig,
    SegmentSource, StreamEvent, TcpSegment, TcpSegments, Timestamp,
};
use crate::wire::frame::{LENGTH_BYTES, MAX_FRAME_BYTES};
use crate::wire::initial::Probe;
use crate::wire::{
    Direction, InitialMessage, Notification, PartialNotification, ProtocolVersion, ServerState,
    StreamDecoder, StreamItem, WireError,
};

pub use identity::AddressBook;

/// The default election port.
pub const DEFAULT_ELECTION_PORT: u16 = 3888;

/// Bytes held while looking for a frame boundary in a stream joined mid-way; a frame can be
/// 512 KiB, so twice that always contains one whole frame after any start.
const MAX_HUNT_BYTES: usize = 2 * (LENGTH_BYTES + MAX_FRAME_BYTES);

/// A first frame larger than this does not count as evidence that an unknown port carries
/// election traffic (real notifications are a few hundred bytes).
const MAX_RECOGNITION_FRAME: usize = 64 * 1024;

/// What to decode and what is known beforehand.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Election ports; connections to them are decoded from their first byte.
    pub ports: Vec<u16>,
    /// Addresses known before reading (from `--config`, `--sid-map`).
    pub book: AddressBook,
    /// Reassembly limits.
    pub reassembly: ReassemblyConfig,
    /// Hand each record out as soon as it decodes (live capture, a pipe), naming the sids
    /// known at that moment, instead of waiting up to [`RESOLVE_WINDOW_SECS`] of capture
    /// time for sids learned a little later.
    pub streaming: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            ports: vec![DEFAULT_ELECTION_PORT],
            book: AddressBook::default(),
            reassembly: ReassemblyConfig::default(),
            streaming: false,
        }
    }
}

/// One decoded thing, in capture order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Capture time of the segment that completed it.
    pub time: Timestamp,
    /// The connection; `None` for problems with the file itself.
    pub conn: Option<ConnId>,
    /// Sender's socket address.
    pub src: Option<SocketAddr>,
    /// Receiver's socket address.
    pub dst: Option<SocketAddr>,
    /// Sender's sid, when known.
    pub from_sid: Option<i64>,
    /// Receiver's sid, when known.
    pub to_sid: Option<i64>,
    /// Offset in the sender's byte stream of this connection (in the file, for file problems).
    pub offset: Option<u64>,
    /// The message's exact bytes (a notification's frame payload); empty for problems.
    pub raw: Vec<u8>,
    /// What it is.
    pub body: Body,
}

/// The content of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Initial(InitialMessage),
    Notification(Notification),
    Problem(Problem),
}

/// Something that could not be decoded, or a caveat about what follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub kind: ProblemKind,
    /// One line for people.
    pub message: String,
}

/// How bad a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Bytes that could not be decoded, or a damaged file.
    Error,
    /// A caveat: decoding went on (a connection joined mid-way, a resynchronisation).
    Warning,
}

/// The kinds of [`Problem`], for programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// A message Java rejects; `error` names field and offset within the message.
    Malformed(WireError),
    /// Bytes missing from the capture.
    Gap { missing: u64 },
    /// A packet cut short by the capture's snap length: `missing` bytes of its payload were
    /// not recorded, and the fields of the notification they belonged to that were (partial).
    Cut {
        missing: u64,
        partial: Option<PartialNotification>,
    },
    /// Joined a stream at a frame boundary after skipping bytes.
    Resynced { skipped: u64 },
    /// The connection started before the capture.
    MidStream,
    /// The capture file itself is damaged.
    Capture,
}

/// Streaming decoder over TCP segments.
///
/// The segments come from a [`SegmentSource`]: a capture file ([`Decoder::from_capture`])
/// lends each segment's payload from its read buffer, and reassembly lends in-order bytes on
/// to the stream decoders, so a payload is copied once, into the record that holds it.
pub struct Decoder<S> {
    segments: S,
    reassembler: Reassembler,
    state: State,
}

/// Everything but the segment source and reassembly, split off so that reassembly can hand
/// its events to it while it works.
struct State {
    ports: Vec<u16>,
    book: AddressBook,
    configs: identity::ConfigCache,
    conns: HashMap<ConnId, Conn>,
    /// Connections to tell reassembly to ignore, once it has finished the current segment.
    ignore: Vec<ConnId>,
    out: VecDeque<Pending>,
    finished: bool,
    streaming: bool,
    /// The segment being reassembled was cut by the snap length: TCP payload bytes captured.
    cut: Option<usize>,
    /// Scratch lists for `data`, kept so their memory is reused.
    items: Vec<(u64, StreamItem)>,
    problems: Vec<(u64, Severity, ProblemKind, String)>,
}

/// A record waiting for its sids: the acceptor's sid is often learned a little later (from the
/// config in the next notification, or the acceptor's own initial message elsewhere), so
/// records wait up to [`RESOLVE_WINDOW_SECS`] of capture time (and at most
/// [`RESOLVE_WINDOW_RECORDS`]) before they are handed out.
struct Pending {
    record: Record,
    /// The acceptor's address, and whether the record was sent by the initiator.
    acceptor: Option<(SocketAddr, bool)>,
}

/// How long, in capture time, a record waits for its sids to become known.
const RESOLVE_WINDOW_SECS: i64 = 2;
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
    dirs: [DirState; 2],
}

struct DirState {
    decoder: StreamDecoder,
    /// `Some` while looking for a frame boundary: the bytes held and the offset of the first.
    hunt: Option<(Vec<u8>, u64)>,
}

impl DirState {
    fn new(dir: Direction, mid_stream: bool) -> Self {
        DirState {
            decoder: StreamDecoder::new(dir),
            hunt: mid_stream.then(|| (Vec::new(), 0)),
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
                book: options.book,
                configs: identity::ConfigCache::default(),
                conns: HashMap::default(),
                ignore: Vec::new(),
                out: VecDeque::new(),
                finished: false,
                streaming: options.streaming,
                cut: None,
                items: Vec::new(),
                problems: Vec::new(),
            },
        }
    }

    /// What has been learned about addresses so far.
    pub fn address_book(&self) -> &AddressBook {
        &self.state.book
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
        } = self;
        let next = segments.next_segment(|seg| {
            state.cut = (seg.missing > 0).then_some(seg.payload.len());
            reassembler.push_with(seg, &mut |e| state.handle(e));
        });
        for conn in state.ignore.drain(..) {
            reassembler.ignore(conn);
        }
        match next {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                let state = &mut self.state;
                let time = state.out.back().map(|p| p.record.time).unwrap_or_default();
                state.push(Record {
                    time,
                    conn: None,
                    src: None,
                    dst: None,
                    from_sid: None,
                    to_sid: None,
                    offset: file_offset(&e),
                    raw: Vec::new(),
                    body: Body::Problem(Problem {
                        severity: Severity::Error,
                        kind: ProblemKind::Capture,
                        message: e.to_string(),
                    }),
                });
                self.finish();
            }
            None => self.finish(),
        }
    }

    fn finish(&mut self) {
        if self.state.finished {
            return;
        }
        self.state.finished = true;
        let state = &mut self.state;
        self.reassembler.finish_with(&mut |e| state.handle(e));
        state.ignore.clear();
    }
}

impl State {
    fn handle(&mut self, event: StreamEvent<&[u8]>) {
        match event {
            StreamEvent::Opened {
                conn,
                initiator,
                acceptor,
                time,
                mid_stream,
            } => {
                let on_port = self.ports.contains(&acceptor.port())
                    || (mid_stream && self.ports.contains(&initiator.port()));
                // A mid-stream guess of who initiated can be wrong; the election port decides.
                let flipped = mid_stream
                    && self.ports.contains(&initiator.port())
                    && !self.ports.contains(&acceptor.port());
                let (initiator, acceptor) = if flipped {
                    (acceptor, initiator)
                } else {
                    (initiator, acceptor)
                };
                if !on_port && mid_stream {
                    self.ignore.push(conn);
                    return;
                }
                self.conns.insert(
                    conn,
                    Conn {
                        initiator,
                        acceptor,
                        flipped,
                        recognising: (!on_port).then(Vec::new),
                        initiator_sid: None,
                        dirs: [
                            DirState::new(Direction::FromInitiator, mid_stream),
                            DirState::new(Direction::FromAcceptor, mid_stream),
                        ],
                    },
                );
                if mid_stream {
                    let r = self.problem(
                        conn,
                        CapDir::FromInitiator,
                        time,
                        0,
                        Severity::Warning,
                        ProblemKind::MidStream,
                        format!(
                            "connection {initiator} -> {acceptor} started before the capture; joining it at the first frame boundary"
                        ),
                    );
                    self.push(r);
                }
            }
            StreamEvent::Data {
                conn,
                dir,
                time,
                bytes,
                ..
            } => {
                let dir = self.our_dir(conn, dir);
                self.data(conn, dir, time, bytes)
            }
            StreamEvent::Gap {
                conn,
                dir,
                time,
                offset,
                missing,
            } => {
                let dir = self.our_dir(conn, dir);
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                if c.recognising.is_some() {
                    self.conns.remove(&conn);
                    self.ignore.push(conn);
                    return;
                }
                let d = &mut c.dirs[index(dir)];
                // What the cut message's first bytes still tell: a notification's first
                // fields, an initial message's sid. A stream already resynchronising holds
                // bytes from where the last gap ended, normally a frame's start.
                let partial = match &d.hunt {
                    None => d
                        .decoder
                        .partial_frame()
                        .map(|(prefix, size)| PartialNotification::decode(prefix, size)),
                    Some((held, _)) => frame_prefix(held)
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
                d.hunt = Some((Vec::new(), offset + missing));
                let (severity, kind, what) = match self.cut {
                    // Cut by the snap length: say so plainly, with what was captured.
                    Some(kept) => (
                        Severity::Warning,
                        ProblemKind::Cut { missing, partial },
                        format!(
                            "packet cut by the capture's snap length after {kept} payload bytes, {missing} bytes not captured (capture whole packets: tcpdump -s 0){}",
                            match (partial, partial_sid) {
                                (Some(p), _) => format!(
                                    "; partial notification ({} of {} bytes): {}",
                                    p.captured,
                                    p.size,
                                    partial_words(&p)
                                ),
                                (None, Some(sid)) =>
                                    format!("; partial initial message: sid {sid}"),
                                (None, None) => String::new(),
                            }
                        ),
                    ),
                    None => (
                        Severity::Error,
                        ProblemKind::Gap { missing },
                        format!("{missing} bytes missing from the capture; resynchronising"),
                    ),
                };
                // A cut notification is reported where its frame starts, as a whole one is.
                let at = partial.map_or(offset, |p| {
                    offset.saturating_sub((p.captured + LENGTH_BYTES) as u64)
                });
                let r = self.problem(conn, dir, time, at, severity, kind, what);
                self.push(r);
            }
            StreamEvent::Closed { conn, .. } => {
                self.conns.remove(&conn);
            }
        }
    }

    /// A reassembly direction in terms of our initiator and acceptor.
    fn our_dir(&self, conn: ConnId, dir: CapDir) -> CapDir {
        match self.conns.get(&conn) {
            Some(c) if c.flipped => dir.reverse(),
            _ => dir,
        }
    }

    fn data(&mut self, conn: ConnId, dir: CapDir, time: Timestamp, bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(held) = &mut c.recognising {
            if dir == CapDir::FromAcceptor {
                // The acceptor of an election connection speaks only after the initial message.
                if held.is_empty() {
                    self.conns.remove(&conn);
                    self.ignore.push(conn);
                }
                return;
            }
            held.extend_from_slice(bytes);
            match recognise(held) {
                Recognition::Wait => return,
                Recognition::No => {
                    self.conns.remove(&conn);
                    self.ignore.push(conn);
                    return;
                }
                Recognition::Yes => {
                    let held = c.recognising.take().unwrap_or_default();
                    return self.data(conn, dir, time, &held);
                }
            }
        }
        let mut items = std::mem::take(&mut self.items);
        let mut problems = std::mem::take(&mut self.problems);
        {
            let d = &mut c.dirs[index(dir)];
            let mut input = bytes;
            if d.hunt.is_some() {
                input = &[];
                hunt(d, bytes, &mut items, &mut problems);
            }
            decode_all(d, input, &mut items, &mut problems);
        }
        for (at, severity, kind, message) in problems.drain(..) {
            let r = self.problem(conn, dir, time, at, severity, kind, message);
            self.push(r);
        }
        for (at, item) in items.drain(..) {
            let (body, raw) = match item {
                StreamItem::Initial { message, raw, .. } => {
                    self.book.learn_initial(&message);
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.initiator_sid = Some(message.sid);
                    }
                    (Body::Initial(message), raw)
                }
                StreamItem::Frame { payload, .. } => {
                    let body = match Notification::decode(&payload) {
                        Ok(n) => {
                            if let Some(raw) = &n.config
                                && let Some(cfg) = self.configs.new_config(raw)
                            {
                                self.book.learn_config(&cfg);
                            }
                            Body::Notification(n)
                        }
                        Err(e) => {
                            let e = e.at(at + LENGTH_BYTES as u64);
                            Body::Problem(Problem {
                                severity: Severity::Error,
                                message: format!(
                                    "malformed notification ({} bytes), Java drops it: {e}",
                                    payload.len()
                                ),
                                kind: ProblemKind::Malformed(e),
                            })
                        }
                    };
                    (body, payload)
                }
            };
            let mut r = self.record(conn, dir, time, Some(at), body);
            r.raw = raw;
            self.push(r);
        }
        self.items = items;
        self.problems = problems;
    }

    fn push(&mut self, record: Record) {
        let acceptor = record.conn.and_then(|c| self.conns.get(&c)).map(|c| {
            let from_initiator = record.src == Some(c.initiator);
            (c.acceptor, from_initiator)
        });
        self.out.push_back(Pending { record, acceptor });
    }

    /// The oldest record, once its wait for sids is over.
    fn pop_ready(&mut self) -> Option<Record> {
        let newest = self.out.back()?.record.time;
        let oldest = &self.out.front()?.record;
        let ready = self.finished
            || self.streaming
            || self.out.len() > RESOLVE_WINDOW_RECORDS
            || newest.secs - oldest.time.secs > RESOLVE_WINDOW_SECS;
        if !ready {
            return None;
        }
        let Pending {
            mut record,
            acceptor,
        } = self.out.pop_front()?;
        if let Some((addr, from_initiator)) = acceptor
            && let Some(sid) = self.book.sid_of(addr)
        {
            let slot = if from_initiator {
                &mut record.to_sid
            } else {
                &mut record.from_sid
            };
            slot.get_or_insert(sid);
        }
        Some(record)
    }

    fn sids(&self, conn: ConnId, dir: CapDir) -> (Option<i64>, Option<i64>) {
        let Some(c) = self.conns.get(&conn) else {
            return (None, None);
        };
        let acceptor = self.book.sid_of(c.acceptor);
        match dir {
            CapDir::FromInitiator => (c.initiator_sid, acceptor),
            CapDir::FromAcceptor => (acceptor, c.initiator_sid),
        }
    }

    fn record(
        &self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        offset: Option<u64>,
        body: Body,
    ) -> Record {
        let (src, dst) = match self.conns.get(&conn) {
            Some(c) if dir == CapDir::FromInitiator => (Some(c.initiator), Some(c.acceptor)),
            Some(c) => (Some(c.acceptor), Some(c.initiator)),
            None => (None, None),
        };
        let (from_sid, to_sid) = self.sids(conn, dir);
        Record {
            time,
            conn: Some(conn),
            src,
            dst,
            from_sid,
            to_sid,
            offset,
            raw: Vec::new(),
            body,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn problem(
        &self,
        conn: ConnId,
        dir: CapDir,
        time: Timestamp,
        offset: u64,
        severity: Severity,
        kind: ProblemKind,
        message: String,
    ) -> Record {
        let body = Body::Problem(Problem {
            severity,
            kind,
            message,
        });
        self.record(conn, dir, time, Some(offset), body)
    }
}

/// Adds `input` to a direction that is looking for a frame boundary; once one is found, decodes
/// from there on.
fn hunt(
    d: &mut DirState,
    input: &[u8],
    items: &mut Vec<(u64, StreamItem)>,
    problems: &mut Vec<(u64, Severity, ProblemKind, String)>,
) {
    let Some((held, start)) = &mut d.hunt else {
        return;
    };
    held.extend_from_slice(input);
    match find_frame_start(held) {
        FrameSearch::Found(at) => {
            let resume = *start + at as u64;
            let rest = held.split_off(at);
            if at > 0 {
                problems.push((
                    *start,
                    Severity::Warning,
                    ProblemKind::Resynced { skipped: at as u64 },
                    format!("skipped {at} bytes to the next frame boundary"),
                ));
            }
            d.hunt = None;
            d.decoder.resync(resume);
            decode_all(d, &rest, items, problems);
        }
        FrameSearch::NotBefore(at) => {
            // Offsets before `at` cannot start a frame: forget them, which also keeps the
            // buffer within one frame's size.
            let at = at.max(held.len().saturating_sub(MAX_HUNT_BYTES));
            held.drain(..at);
            *start += at as u64;
        }
    }
}

fn decode_all(
    d: &mut DirState,
    mut input: &[u8],
    items: &mut Vec<(u64, StreamItem)>,
    problems: &mut Vec<(u64, Severity, ProblemKind, String)>,
) {
    loop {
        match d.decoder.decode(&mut input) {
            Ok(Some(item)) => {
                let at = match &item {
                    StreamItem::Initial { offset, .. } | StreamItem::Frame { offset, .. } => {
                        *offset
                    }
                };
                items.push((at, item));
            }
            Ok(None) => return,
            Err(e) => {
                problems.push((
                    e.offset,
                    Severity::Error,
                    ProblemKind::Malformed(e.clone()),
                    format!("{e}; Java closes the connection here; resynchronising"),
                ));
                // What follows in this piece is hunted through like any resync.
                d.hunt = Some((Vec::new(), d.decoder.position()));
                return hunt(d, input, items, problems);
            }
        }
    }
}

/// The payload prefix and declared payload size of a frame cut short, from bytes starting at
/// its length prefix; `None` unless the length is that of a notification.
fn frame_prefix(held: &[u8]) -> Option<(&[u8], usize)> {
    let len = i32::from_be_bytes(held.get(..LENGTH_BYTES)?.try_into().ok()?);
    let size = usize::try_from(len).ok()?;
    let payload = &held[LENGTH_BYTES..];
    ((28..=MAX_RECOGNITION_FRAME).contains(&size) && !payload.is_empty() && payload.len() < size)
        .then_some((payload, size))
}

/// The fields of a cut notification in the words of ZooKeeper's log, `?` where missing.
pub fn partial_words(p: &PartialNotification) -> String {
    let num = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let hex = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| format!("{v:#x}"));
    format!(
        "n.state:{}, n.leader:{}, n.zxid:{}, n.round:{}",
        p.state.map_or("?", |s| s.name()),
        num(p.leader),
        hex(p.zxid),
        hex(p.election_epoch)
    )
}

/// Where in the file a read error happened, when it says.
fn file_offset(e: &CaptureError) -> Option<u64> {
    match e {
        CaptureError::Read { offset, .. }
        | CaptureError::Malformed { offset, .. }
        | CaptureError::Truncated { offset, .. }
        | CaptureError::TooLarge { offset, .. } => Some(*offset),
        CaptureError::NotACapture { .. } | CaptureError::Empty => Some(0),
        CaptureError::Open { .. } => None,
        CaptureError::InFile { source, .. } => file_offset(source),
    }
}

enum Recognition {
    Wait,
    Yes,
    No,
}

/// Whether the start of a stream on a non-election port is election traffic: a V1/V2 initial
/// message is specific enough alone; a legacy one (any non-negative long) needs a plausible
/// notification behind it.
fn recognise(held: &[u8]) -> Recognition {
    let size = match InitialMessage::probe(held) {
        Err(_) => return Recognition::No,
        Ok(Probe::NeedAtLeast(_)) => return Recognition::Wait,
        Ok(Probe::Complete(n)) => n,
    };
    let Ok(initial) = InitialMessage::decode(&held[..size]) else {
        return Recognition::No;
    };
    if initial.protocol != ProtocolVersion::Legacy {
        return Recognition::Yes;
    }
    let rest = &held[size..];
    if rest.len() < LENGTH_BYTES {
        return Recognition::Wait;
    }
    let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if len <= 0 || len as usize > MAX_RECOGNITION_FRAME {
        return Recognition::No;
    }
    if rest.len() < LENGTH_BYTES + len as usize {
        return Recognition::Wait;
    }
    if plausible_notification(&rest[LENGTH_BYTES..LENGTH_BYTES + len as usize]) {
        Recognition::Yes
    } else {
        Recognition::No
    }
}

/// A payload that is a notification as some real server sent one: a known state, and exactly
/// one of the historical sizes (or a config filling the rest).
fn plausible_notification(payload: &[u8]) -> bool {
    match Notification::decode(payload) {
        Ok(n) => {
            !matches!(n.state, ServerState::Unknown(_))
                && n.trailing.is_empty()
                && (n.config.is_some() || matches!(payload.len(), 28 | 36 | 40))
        }
        Err(_) => false,
    }
}

/// Whether the first bytes of a payload of `len` bytes can still be a plausible notification
/// (so that a random length prefix does not hold up the search until its end arrives).
fn can_start_frame(head: &[u8], len: usize) -> bool {
    let int = |at: usize| {
        head.get(at..at + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if int(0).is_some_and(|state| !(0..=3).contains(&state)) {
        return false;
    }
    if matches!(len, 28 | 36 | 40) {
        return true;
    }
    if len < 44 {
        return false;
    }
    match (int(36), int(40)) {
        (Some(version), _) if version < 2 => false,
        (_, Some(config_len)) => config_len >= 0 && config_len as usize == len - 44,
        _ => true,
    }
}

enum FrameSearch {
    /// A whole plausible frame starts here.
    Found(usize),
    /// No frame starts before this offset; later ones need more bytes to tell.
    NotBefore(usize),
}

/// Looks for the first offset in `buf` where a whole plausible frame starts.
fn find_frame_start(buf: &[u8]) -> FrameSearch {
    let mut undecided = None;
    for i in 0..buf.len().saturating_sub(LENGTH_BYTES - 1) {
        let len = i32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if !(28..=MAX_FRAME_BYTES as i32).contains(&len) {
            continue;
        }
        let end = i + LENGTH_BYTES + len as usize;
        if end > buf.len() {
            if can_start_frame(&buf[i + LENGTH_BYTES..], len as usize) {
                undecided.get_or_insert(i);
            }
            continue;
        }
        if undecided.is_none() && plausible_notification(&buf[i + LENGTH_BYTES..end]) {
            return FrameSearch::Found(i);
        }
    }
    FrameSearch::NotBefore(undecided.unwrap_or(buf.len().saturating_sub(LENGTH_BYTES - 1)))
}

impl<S: SegmentSource> Iterator for Decoder<S> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            if let Some(r) = self.state.pop_ready() {
                return Some(r);
            }
            if self.state.finished {
                return None;
            }
            self.step();
        }
    }
}
