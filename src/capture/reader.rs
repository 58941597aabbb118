//! Streaming reader for legacy pcap and pcapng captures.
//!
//! Built on pcap-parser's circular-buffer readers: memory is one buffer (64 KiB, grown on
//! demand for big blocks up to [`MAX_BLOCK`]), whatever the file size. The input is any
//! [`Read`], so stdin works as well as a file.

use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{Block, LegacyPcapReader, PcapBlockOwned, PcapError, PcapNGReader};

use super::packet::{CaptureStats, Packet, PacketRef, Timestamp};

/// Initial size of the read buffer.
pub const INITIAL_BUFFER: usize = 64 * 1024;
/// Largest block (pcap record or pcapng block) the reader accepts; a bigger one ends the
/// capture with [`CaptureError::TooLarge`]. Bounds memory on hostile length fields.
pub const MAX_BLOCK: usize = 16 * 1024 * 1024;
/// Most pcapng interfaces remembered per section; packets on later ones are counted as
/// `unknown_interface`. Bounds memory on files made of interface blocks.
pub const MAX_INTERFACES: usize = 4096;

/// Why reading a capture failed. Every error ends the packet stream.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The capture file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// Reading the input failed.
    #[error("read error at byte offset {offset}: {source}")]
    Read {
        /// Bytes of the input consumed before the failure.
        offset: u64,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// The input is empty.
    #[error("empty input: not a pcap or pcapng capture")]
    Empty,
    /// The input does not start with a pcap or pcapng magic number (nor gzip's or zstd's,
    /// whose content is read as a capture).
    #[error("not a pcap or pcapng capture (starts with {magic:02x?}){}", hint_text(.magic))]
    NotACapture {
        /// The first (up to eight) bytes.
        magic: Vec<u8>,
    },
    /// A block or record could not be parsed; the rest of the file cannot be trusted.
    #[error("malformed capture at byte offset {offset} (after packet record {record}): {detail}")]
    Malformed {
        /// Byte offset of the block that failed.
        offset: u64,
        /// Number of packet records read before it.
        record: u64,
        /// What went wrong.
        detail: String,
    },
    /// The input ends in the middle of a block (a capture cut short while being written).
    #[error(
        "capture truncated: incomplete block at byte offset {offset} (after packet record {record})"
    )]
    Truncated {
        /// Byte offset of the incomplete block.
        offset: u64,
        /// Number of complete packet records read.
        record: u64,
    },
    /// An error in one of several captures read together.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: String,
        /// What went wrong in it.
        source: Box<CaptureError>,
    },
    /// One file given twice to be merged (under the same or another name).
    #[error("{path} is the same file as {first}: give each capture once")]
    SameFile {
        /// The file as given the second time.
        path: String,
        /// The same file as given first.
        first: String,
    },
    /// A second pcap file header where a packet record should be: files joined end to end.
    #[error(
        "a second pcap file header at byte offset {offset} (after packet record {record}): this file is captures joined end to end (as `cat a.pcap b.pcap` makes); give zkfle the files themselves, which it reads as one capture, or join them with `mergecap -w joined.pcap a.pcap b.pcap`"
    )]
    Joined {
        /// Byte offset of the header.
        offset: u64,
        /// Number of packet records read before it.
        record: u64,
    },
    /// A block is larger than [`MAX_BLOCK`].
    #[error("block at byte offset {offset} (after packet record {record}) exceeds {limit} bytes")]
    TooLarge {
        /// Byte offset of the block.
        offset: u64,
        /// Number of packet records read before it.
        record: u64,
        /// The limit, [`MAX_BLOCK`].
        limit: usize,
    },
}

/// The capture format, once the file header has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Unknown,
    Legacy {
        linktype: u16,
        nanos: bool,
        be: bool,
    },
    Ng {
        be: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u16,
    /// Timestamp units per second.
    units: u64,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset_secs: i64,
    snaplen: u32,
}

/// Reader state other than pcap-parser's reader, split off so a block borrowed from the
/// reader can be handled while this is mutated.
struct State {
    format: Format,
    interfaces: Vec<Interface>,
    records: u64,
    last_time: Timestamp,
    stats: CaptureStats,
}

/// Streaming reader yielding the packets of a pcap or pcapng capture in file order.
///
/// Legacy pcap: both byte orders, micro- and nanosecond timestamps (and the "modified"
/// Kuznetzov format). pcapng: any number of sections and interfaces, each with its own link
/// type, `if_tsresol` and `if_tsoffset`; simple packet blocks (which carry no timestamp) get
/// the previous packet's time.
///
/// End of input: a clean end after the last complete block ends the iteration (`None`). An
/// input that stops in the middle of a block yields one final [`CaptureError::Truncated`] (the
/// packets before it have all been delivered), so that a cut-off capture is never mistaken
/// for a complete one. After any error the iterator is finished.
pub struct CaptureReader {
    inner: Box<dyn PcapReaderIterator + Send>,
    state: State,
    capacity: usize,
    io_error: Arc<Mutex<Option<io::Error>>>,
    done: bool,
}

impl CaptureReader {
    /// Probes the input's magic number and prepares the matching pcap-parser reader.
    ///
    /// gzip and zstd input (files or streams, recognised by their magic bytes) is decompressed
    /// on the fly; byte offsets in errors are then offsets in the decompressed capture.
    pub fn new<R: Read + Send + 'static>(input: R) -> Result<CaptureReader, CaptureError> {
        Self::new_at_depth(Box::new(input), 0)
    }

    fn new_at_depth(
        mut input: Box<dyn Read + Send>,
        depth: u8,
    ) -> Result<CaptureReader, CaptureError> {
        // Twelve bytes: a pcapng's byte-order magic too, which says how to read the length of
        // its section header block.
        let mut first = Vec::with_capacity(12);
        read_up_to(&mut input, &mut first, 12)
            .map_err(|source| CaptureError::Read { offset: 0, source })?;
        if first.is_empty() {
            return Err(CaptureError::Empty);
        }
        let magic = first[..first.len().min(8)].to_vec();
        let header_bytes = header_bytes(&first);
        let head = io::Cursor::new(first).chain(input);
        // One level of compression only: a gzip inside a gzip is not a capture habit, and the
        // bound keeps a crafted file from nesting decoders.
        if depth == 0
            && let Some(compression) = Compression::of(&magic)
        {
            let decoder = compression
                .decoder(head)
                .map_err(|source| CaptureError::Read { offset: 0, source })?;
            return Self::new_at_depth(decoder, 1);
        }
        let io_error = Arc::new(Mutex::new(None));
        let src = Greedy {
            inner: head,
            greedy_left: header_bytes,
            pending: None,
            error: Arc::clone(&io_error),
        };
        let built = match &magic[..magic.len().min(4)] {
            [0x0a, 0x0d, 0x0d, 0x0a] => PcapNGReader::new(INITIAL_BUFFER, src)
                .map(|r| Box::new(r) as Box<dyn PcapReaderIterator + Send>),
            m if is_legacy_magic(m) => LegacyPcapReader::new(INITIAL_BUFFER, src)
                .map(|r| Box::new(r) as Box<dyn PcapReaderIterator + Send>),
            _ => return Err(CaptureError::NotACapture { magic }),
        };
        let inner = built.map_err(|e| match e {
            PcapError::Incomplete(_) | PcapError::UnexpectedEof | PcapError::Eof => {
                CaptureError::Truncated {
                    offset: 0,
                    record: 0,
                }
            }
            PcapError::ReadError => CaptureError::Read {
                offset: 0,
                source: take_io_error(&io_error),
            },
            other => CaptureError::Malformed {
                offset: 0,
                record: 0,
                detail: describe(&other),
            },
        })?;
        Ok(CaptureReader {
            inner,
            state: State {
                format: Format::Unknown,
                interfaces: Vec::new(),
                records: 0,
                last_time: Timestamp::default(),
                stats: CaptureStats::default(),
            },
            capacity: INITIAL_BUFFER,
            io_error,
            done: false,
        })
    }

    /// What has been read so far (and, via [`super::TcpSegments`], decoded).
    pub fn stats(&self) -> &CaptureStats {
        &self.state.stats
    }

    /// Bytes of the input consumed so far.
    pub fn offset(&self) -> u64 {
        self.inner.consumed() as u64
    }

    fn fail<T>(&mut self, err: CaptureError) -> Option<Result<T, CaptureError>> {
        self.done = true;
        Some(Err(err))
    }

    /// Reads packets until `f` returns `Some` for one, and returns that; the packet's bytes
    /// are lent from the read buffer, so nothing is copied. `f` also gets the counters, for
    /// decoders layered on top. `None` at the end of the capture; an error ends it.
    pub fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&PacketRef<'_>, &mut CaptureStats) -> Option<T>,
    ) -> Option<Result<T, CaptureError>> {
        if self.done {
            return None;
        }
        loop {
            let offset = self.inner.consumed() as u64;
            let record = self.state.records;
            // pcap-parser 0.17 subtracts before it checks on some block types (a process
            // information block shorter than 12 bytes panics), so lengths too short for any
            // block are refused here, before it sees them.
            if let Some(len) = short_ng_block(self.state.format, self.inner.data()) {
                let detail = format!(
                    "pcapng block declares a total length of {len} bytes, fewer than the 12 of any block's type and lengths"
                );
                return self.fail(CaptureError::Malformed {
                    offset,
                    record,
                    detail,
                });
            }
            let step = match self.inner.next() {
                Ok((_, PcapBlockOwned::Legacy(b))) if is_joined_header(b.ts_sec, b.caplen) => {
                    Step::Fail(CaptureError::Joined { offset, record })
                }
                Ok((len, block)) => {
                    let packet = handle_block(&mut self.state, block, offset);
                    Step::Block(len, packet.and_then(|p| f(&p, &mut self.state.stats)))
                }
                Err(PcapError::Eof) => Step::End,
                Err(PcapError::Incomplete(_)) => Step::Refill,
                Err(PcapError::BufferTooSmall) => Step::Grow,
                // pcap-parser reports this also when the buffer is merely empty at the end
                // of input (its EOF test requires the buffer to be shifted), so check.
                Err(PcapError::UnexpectedEof) => {
                    if self.inner.data().is_empty() {
                        Step::End
                    } else {
                        // A block whose lengths are wrong can look cut short: say which.
                        Step::Fail(block_failure(
                            self.state.format,
                            self.inner.data(),
                            offset,
                            record,
                            CaptureError::Truncated { offset, record },
                        ))
                    }
                }
                Err(PcapError::ReadError) => Step::Fail(CaptureError::Read {
                    offset,
                    source: take_io_error(&self.io_error),
                }),
                Err(other) => {
                    let detail = describe(&other);
                    Step::Fail(block_failure(
                        self.state.format,
                        self.inner.data(),
                        offset,
                        record,
                        CaptureError::Malformed {
                            offset,
                            record,
                            detail,
                        },
                    ))
                }
            };
            match step {
                Step::Block(len, packet) => {
                    self.inner.consume(len);
                    if let Some(p) = packet {
                        return Some(Ok(p));
                    }
                }
                Step::End => {
                    self.done = true;
                    return None;
                }
                Step::Fail(e) => return self.fail(e),
                Step::Refill => {
                    let before = self.inner.data().len();
                    if self.inner.refill().is_err() {
                        let source = take_io_error(&self.io_error);
                        return self.fail(CaptureError::Read { offset, source });
                    }
                    // A refill into a full buffer reads nothing; without growing we would
                    // ask pcap-parser the same question forever.
                    if self.inner.data().len() == before
                        && !self.inner.reader_exhausted()
                        && !self.grow_for_block()
                    {
                        return self.fail(CaptureError::TooLarge {
                            offset,
                            record,
                            limit: MAX_BLOCK,
                        });
                    }
                }
                Step::Grow => {
                    if !self.grow_for_block() {
                        return self.fail(CaptureError::TooLarge {
                            offset,
                            record,
                            limit: MAX_BLOCK,
                        });
                    }
                }
            }
        }
    }

    /// Grows the buffer so the pending block fits, reading its declared length rather than
    /// doubling blindly: a hostile length is refused at once instead of after allocating
    /// [`MAX_BLOCK`]. Returns false when the block may not be buffered.
    fn grow_for_block(&mut self) -> bool {
        let needed = match declared_len(self.state.format, self.inner.data()) {
            Some(n) if n > MAX_BLOCK => return false,
            Some(n) => n,
            // Header not even buffered yet (cannot happen with a 64 KiB buffer): double.
            None => self.capacity.saturating_mul(2),
        };
        // pcap-parser wants strictly more room than the block needs.
        let new = needed
            .saturating_add(1)
            .max(self.capacity.saturating_mul(2));
        let new = new.min(MAX_BLOCK + 1);
        if new <= self.capacity {
            return false;
        }
        self.inner.grow(new);
        self.capacity = new;
        true
    }
}

impl Iterator for CaptureReader {
    type Item = Result<Packet, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(|p, _| Some(p.to_packet()))
    }
}

enum Step<T> {
    Block(usize, Option<T>),
    End,
    Refill,
    Grow,
    Fail(CaptureError),
}

/// Interprets one block; returns a packet for packet records.
/// Whether a legacy packet record is in fact another pcap file's header (its magic, in either
/// byte order, where the time stamp is, and its zero `thiszone` where the captured length
/// is): what `cat a.pcap b.pcap` leaves.
pub(super) fn is_joined_header(ts_sec: u32, caplen: u32) -> bool {
    caplen == 0 && matches!(ts_sec, 0xa1b2c3d4 | 0xa1b23c4d | 0xd4c3b2a1 | 0x4d3cb2a1)
}

fn handle_block<'a>(
    st: &mut State,
    block: PcapBlockOwned<'a>,
    offset: u64,
) -> Option<PacketRef<'a>> {
    match block {
        PcapBlockOwned::LegacyHeader(h) => {
            st.format = Format::Legacy {
                // Upper bits of the field carry FCS information, not the link type.
                linktype: (h.network.0 as u32 & 0xffff) as u16,
                nanos: h.is_nanosecond_precision(),
                be: h.is_bigendian(),
            };
            None
        }
        PcapBlockOwned::Legacy(b) => {
            let (linktype, nanos) = match st.format {
                Format::Legacy {
                    linktype, nanos, ..
                } => (linktype, nanos),
                // pcap-parser always yields the header first; be defensive anyway.
                _ => (0, false),
            };
            st.records += 1;
            st.stats.packets += 1;
            let units = if nanos { 1_000_000_000 } else { 1_000_000 };
            let time = Timestamp::from_fraction(i64::from(b.ts_sec), u64::from(b.ts_usec), units);
            st.last_time = time;
            Some(PacketRef {
                record: st.records,
                offset,
                time,
                linktype,
                data: b.data,
                orig_len: b.origlen,
            })
        }
        PcapBlockOwned::NG(block) => handle_ng(st, block, offset),
    }
}

fn handle_ng<'a>(st: &mut State, block: Block<'a>, offset: u64) -> Option<PacketRef<'a>> {
    match block {
        Block::SectionHeader(shb) => {
            st.format = Format::Ng {
                be: shb.big_endian(),
            };
            // Interface ids are per section.
            st.interfaces.clear();
            None
        }
        Block::InterfaceDescription(idb) => {
            if st.interfaces.len() < MAX_INTERFACES {
                let units = ts_units(idb.if_tsresol).unwrap_or_else(|| {
                    st.stats.bad_ts_resolution += 1;
                    1_000_000
                });
                st.interfaces.push(Interface {
                    linktype: (idb.linktype.0 as u32 & 0xffff) as u16,
                    units,
                    offset_secs: idb.if_tsoffset,
                    snaplen: idb.snaplen,
                });
            }
            None
        }
        Block::EnhancedPacket(epb) => {
            st.records += 1;
            st.stats.packets += 1;
            let Some(iface) = usize::try_from(epb.if_id)
                .ok()
                .and_then(|i| st.interfaces.get(i))
            else {
                st.stats.unknown_interface += 1;
                return None;
            };
            let ts = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
            let secs = i64::try_from(ts / iface.units)
                .unwrap_or(i64::MAX)
                .saturating_add(iface.offset_secs);
            let time = Timestamp::from_fraction(secs, ts % iface.units, iface.units);
            st.last_time = time;
            Some(PacketRef {
                record: st.records,
                offset,
                time,
                linktype: iface.linktype,
                data: lent_data(epb.data, epb.caplen as usize),
                orig_len: epb.origlen,
            })
        }
        Block::SimplePacket(spb) => {
            st.records += 1;
            st.stats.packets += 1;
            let Some(iface) = st.interfaces.first() else {
                st.stats.unknown_interface += 1;
                return None;
            };
            let mut data = lent_data(spb.data, spb.origlen as usize);
            if iface.snaplen != 0 {
                let snap = usize::try_from(iface.snaplen).unwrap_or(usize::MAX);
                data = &data[..data.len().min(snap)];
            }
            Some(PacketRef {
                record: st.records,
                offset,
                time: st.last_time,
                linktype: iface.linktype,
                data,
                orig_len: spb.origlen,
            })
        }
        _ => {
            st.stats.other_blocks += 1;
            None
        }
    }
}

/// A packet block's captured bytes, as pcap-parser's `packet_data` cuts them, but keeping the
/// buffer's lifetime (pcap-parser's accessor ties it to the block value).
fn lent_data(data: &[u8], caplen: usize) -> &[u8] {
    &data[..caplen.min(data.len())]
}

/// Total length the block at the start of `data` declares, from its header.
fn declared_len(format: Format, data: &[u8]) -> Option<usize> {
    let word = |at: usize, be: bool| usize::try_from(word_at(data, at, be)?).ok();
    let shb_magic = data.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a][..]);
    match format {
        // Record header: ts_sec ts_frac caplen origlen, then caplen bytes. (The rare
        // "modified" format has 8 more header bytes; the slack covers them.)
        Format::Legacy { be, .. } => word(8, be)?.checked_add(24),
        Format::Ng { be } if !shb_magic => word(4, be),
        // A section header block: its byte-order magic decides how to read its length.
        _ => {
            let be = data.get(8..12)? == [0x1a, 0x2b, 0x3c, 0x4d];
            word(4, be)
        }
    }
}

/// The declared length of the pcapng block at the start of `data` when it is less than the 12
/// bytes every block's type and two lengths take (a section header block's own shortness is
/// left to the parser, which checks it, and its byte order may be a new one).
fn short_ng_block(format: Format, data: &[u8]) -> Option<u32> {
    let Format::Ng { be } = format else {
        return None;
    };
    if data.get(..4)? == [0x0a, 0x0d, 0x0d, 0x0a] {
        return None;
    }
    word_at(data, 4, be).filter(|&len| len < 12)
}

/// The 32-bit word at `at` in `data`, in the given byte order; `None` past the end.
fn word_at(data: &[u8], at: usize, be: bool) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if be {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

/// The magic numbers of legacy pcap files (both byte orders; microseconds, nanoseconds, and
/// Kuznetzov's modified format).
fn is_legacy_magic(magic: &[u8]) -> bool {
    matches!(
        magic,
        [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
            | [0x34, 0xcd, 0xb2, 0xa1]
    )
}

/// The error for a pcapng block that cannot be read, at the start of `data`: a legacy pcap
/// file header there is files joined end to end; a block's wrong lengths are named;
/// anything else is `otherwise`.
fn block_failure(
    format: Format,
    data: &[u8],
    offset: u64,
    record: u64,
    otherwise: CaptureError,
) -> CaptureError {
    if matches!(format, Format::Ng { .. }) && data.get(..4).is_some_and(is_legacy_magic) {
        return CaptureError::Joined { offset, record };
    }
    match block_problem(format, data) {
        Some(detail) => CaptureError::Malformed {
            offset,
            record,
            detail,
        },
        None => otherwise,
    }
}

/// What is wrong with the framing of the pcapng block at the start of `data`, in words (the
/// parser's own error names only the combinator that failed).
fn block_problem(format: Format, data: &[u8]) -> Option<String> {
    let Format::Ng { be } = format else {
        return None;
    };
    let word = |at: usize| word_at(data, at, be);
    let kind = word(0)?;
    // The block types a capture's packets come in, and the least each one's fields take.
    let (block, least) = match kind {
        0x0a0d_0d0a => ("pcapng section header block".to_string(), 28),
        1 => ("pcapng interface description block".to_string(), 20),
        3 => ("pcapng simple packet block".to_string(), 16),
        6 => ("pcapng enhanced packet block".to_string(), 32),
        _ => (format!("pcapng block of type 0x{kind:08x}"), 12),
    };
    let len = word(4)?;
    if len < least {
        return Some(format!(
            "{block} declares a total length of {len} bytes, fewer than the {least} of its own fields"
        ));
    }
    if len % 4 != 0 {
        return Some(format!(
            "{block} declares a total length of {len} bytes, not a multiple of 4"
        ));
    }
    let tail = word(usize::try_from(len).ok()? - 4)?;
    if tail != len {
        return Some(format!(
            "{block} declares a total length of {len} bytes at its start and {tail} at its end"
        ));
    }
    // An enhanced packet block's captured length must fit in it.
    let captured = word(20)?;
    (kind == 6 && captured > len - 32).then(|| {
        format!(
            "{block} of {len} bytes declares {captured} captured bytes, more than the {} it holds",
            len - 32
        )
    })
}

/// Timestamp units per second for a pcapng `if_tsresol` value: `10^v`, or `2^(v & 0x7f)` when
/// the top bit is set. pcap-parser's own `build_ts_resolution` rejects every binary
/// resolution, hence this.
fn ts_units(tsresol: u8) -> Option<u64> {
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(u32::from(tsresol))
    } else {
        1u64.checked_shl(u32::from(tsresol & 0x7f))
    }
}

/// Renders a pcap-parser error without its input bytes (which can be a whole buffer).
fn describe<I>(e: &PcapError<I>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("unparseable block ({kind:?})")
        }
        PcapError::HeaderNotRecognized => "header not recognised".to_string(),
        PcapError::Eof | PcapError::UnexpectedEof | PcapError::Incomplete(_) => {
            "unexpected end of input".to_string()
        }
        PcapError::BufferTooSmall => "block too large".to_string(),
        PcapError::ReadError => "read error".to_string(),
    }
}

fn take_io_error(slot: &Mutex<Option<io::Error>>) -> io::Error {
    slot.lock()
        .ok()
        .and_then(|mut s| s.take())
        .unwrap_or_else(|| io::Error::other("read failed"))
}

/// Reads until `buf` holds `want` bytes or the input ends.
/// Compressions read transparently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Zstd,
}

impl Compression {
    /// The compression a stream's first bytes announce.
    pub fn of(magic: &[u8]) -> Option<Compression> {
        match magic {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// A reader of `input`'s decompressed bytes.
    pub fn decoder(self, input: impl Read + Send + 'static) -> io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
        })
    }
}

/// What an input that is not a capture looks like, for the error message: other
/// compressions and archives, other capture formats, text.
pub fn magic_hint(magic: &[u8]) -> Option<&'static str> {
    let hint = match magic {
        [b'B', b'Z', b'h', ..] => {
            "bzip2-compressed: decompress it first (bunzip2 -c FILE | zkfle decode -)"
        }
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => {
            "xz-compressed: decompress it first (xz -dc FILE | zkfle decode -)"
        }
        [0x04, 0x22, 0x4d, 0x18, ..] => {
            "lz4-compressed: decompress it first (lz4 -dc FILE | zkfle decode -)"
        }
        [0x5d, 0x00, 0x00, ..] => {
            "looks lzma-compressed: decompress it first (xz --format=lzma -dc FILE | zkfle decode -)"
        }
        [b'P', b'K', 3, 4, ..] => "a zip archive: unzip it and pass the capture inside",
        [b'7', b'z', 0xbc, 0xaf, ..] => "a 7-Zip archive: extract the capture inside",
        [b's', b'n', b'o', b'o', b'p', 0, ..] => {
            "a Solaris snoop capture: convert it with `editcap -F pcap`"
        }
        [0x1f, 0x9d, ..] => {
            "compress(1) (.Z) data: decompress it first (gzip -dc FILE | zkfle decode -)"
        }
        [b'u', b's', b't', b'a', b'r', ..] => "a tar archive: extract the capture inside",
        [b'{', ..] | [b'[', ..] => {
            "looks like JSON text (zkfle reads the capture itself, not a decoder's output)"
        }
        m if !m.is_empty()
            && m.iter()
                .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) =>
        {
            "looks like text (tcpdump's printed output?): capture with `tcpdump -w FILE`"
        }
        _ => return None,
    };
    Some(hint)
}

fn hint_text(magic: &[u8]) -> String {
    magic_hint(magic).map_or_else(String::new, |h| format!(": {h}"))
}

fn read_up_to<R: Read>(input: &mut R, buf: &mut Vec<u8>, want: usize) -> io::Result<()> {
    let mut chunk = [0u8; 64];
    while buf.len() < want {
        let n = want.saturating_sub(buf.len()).min(chunk.len());
        match input.read(&mut chunk[..n]) {
            Ok(0) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How many bytes pcap-parser needs from its first read (see [`Greedy`]): a legacy pcap's
/// file header, or a pcapng's section header block, whose length is read in the byte order of
/// its byte-order magic. At most [`INITIAL_BUFFER`], the first read's buffer.
fn header_bytes(first: &[u8]) -> usize {
    const PCAP_HEADER: usize = 24;
    let shb = match *first {
        [0x0a, 0x0d, 0x0d, 0x0a, a, b, c, d, 0x4d, 0x3c, 0x2b, 0x1a] => {
            u32::from_le_bytes([a, b, c, d]) as usize
        }
        [0x0a, 0x0d, 0x0d, 0x0a, a, b, c, d, 0x1a, 0x2b, 0x3c, 0x4d] => {
            u32::from_be_bytes([a, b, c, d]) as usize
        }
        // Not a pcapng header pcap-parser can read: its error comes from what there is.
        [0x0a, 0x0d, 0x0d, 0x0a, ..] => first.len(),
        _ => PCAP_HEADER,
    };
    shb.clamp(first.len(), INITIAL_BUFFER)
}

/// Read adapter between the input and pcap-parser.
///
/// pcap-parser parses the file header (for pcapng a whole section header block, options
/// included) from the result of a *single* `read`, so a pipe returning a few bytes at a time
/// would fail. The header's bytes are therefore read greedily (until they are all there or the
/// input ends); after that, reads pass straight through, so that a live pipe
/// (`tcpdump -w - | zkfle ... -`) is not held back: a record is decoded as soon as its bytes
/// arrive. pcap-parser also reduces I/O errors to a bare `ReadError`; the real error is kept
/// here for [`CaptureError::Read`].
struct Greedy<R> {
    inner: R,
    greedy_left: usize,
    /// An error met after some bytes were read: those bytes are handed over first, and the
    /// error on the next read (a decompressor reports a bad checksum once, after the data).
    pending: Option<io::Error>,
    error: Arc<Mutex<Option<io::Error>>>,
}

impl<R: Read> Greedy<R> {
    fn fail(&mut self, e: io::Error) -> io::Error {
        let kind = e.kind();
        if let Ok(mut slot) = self.error.lock() {
            *slot = Some(e);
        }
        io::Error::from(kind)
    }
}

impl<R: Read> Read for Greedy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.pending.take() {
            return Err(self.fail(e));
        }
        let mut filled = 0;
        loop {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => return Ok(filled),
                Ok(n) => {
                    filled += n;
                    self.greedy_left = self.greedy_left.saturating_sub(n);
                    if self.greedy_left == 0 || filled == buf.len() {
                        return Ok(filled);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if filled > 0 => {
                    self.pending = Some(e);
                    return Ok(filled);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }
}
