//! pcap/pcapng reading and TCP reassembly.
//!
//! This module knows packets and TCP streams, not ZooKeeper. Three layers, each usable alone:
//!
//! 1. [`CaptureReader`] streams [`Packet`]s out of a legacy pcap or pcapng capture read from
//!    any [`std::io::Read`] (a file, stdin). It never holds more than one block in memory.
//! 2. [`decode_tcp`] turns a packet into a [`TcpSegment`] (Ethernet with VLAN tags, Linux
//!    cooked v1/v2, BSD loopback, raw IP); everything else is counted in [`CaptureStats`],
//!    not treated as an error. [`TcpSegments`] (and [`open`]) chains the two.
//! 3. [`Reassembler`] turns segments into [`StreamEvent`]s: connections opened and closed, and
//!    each direction's bytes in order, with explicit gaps where bytes are missing.
//!
//! # Why per direction
//!
//! A TCP connection is two independent byte streams, one per direction, each with its own
//! sequence numbers, its own losses and its own FIN. Protocol decoders (such as ZooKeeper's
//! election codec) parse each direction separately, so reassembly hands out
//! `(connection, direction, offset, bytes)` and never interleaves the two streams' bytes.
//!
//! # Why bounded
//!
//! Captures are untrusted input and can be huge. The reader buffers at most one block
//! ([`reader::MAX_BLOCK`]); reassembly buffers at most a configured number of out-of-order
//! bytes per direction and a configured number of open connections
//! ([`ReassemblyConfig`]). When a bound is hit, data is given up explicitly: the first hole
//! becomes a [`StreamEvent::Gap`], or the least recently used connection is closed with
//! [`CloseKind::Evicted`]. Nothing panics, nothing grows without limit, and every input is
//! consumed in one pass.
//!
//! # Mid-stream connections
//!
//! If no SYN (nor SYN-ACK) of a connection is in the capture, the connection started before
//! the capture did. It is reported with `mid_stream: true`: each direction's stream starts
//! at the first byte seen in that direction (offset 0), so a decoder must expect to join a
//! protocol in the middle of a message, and the initiator is only a guess (the side with
//! the higher port, normally the ephemeral one; the sender of the first segment on a tie).
//!
//! # Gaps
//!
//! A gap is declared when data lies beyond a hole and either the out-of-order buffer is
//! full, or the connection closes, or the capture ends; also immediately for payload bytes
//! the capture did not record (snap length). Delivery then continues after the hole.

mod libpcap;
pub mod live;
pub mod mapped;
pub mod merge;
pub mod packet;
pub mod reader;
pub mod reassembly;
pub mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use packet::{
    CaptureStats, Packet, PacketRef, Skip, TcpSegment, TcpSegmentRef, Timestamp, decode_tcp,
    decode_tcp_ref, linktype, with_tcp_segment,
};
pub use reader::{CaptureError, CaptureReader};
pub use reassembly::{
    CloseKind, ConnId, ConnInfo, Direction, Reassembler, ReassemblyConfig, ReassemblyStats,
    StreamEvent, StreamInfo,
};
pub use writer::PcapWriter;

/// The TCP segments of a capture, in file order: [`CaptureReader`] plus [`decode_tcp`].
///
/// Packets that are not TCP are counted in [`TcpSegments::stats`] and skipped. A read error
/// is yielded once and ends the iteration.
pub struct TcpSegments {
    reader: Source,
}

/// Where packets come from: a stream, a legacy pcap file mapped in memory, or several
/// files of one capture read one after the other.
enum Source {
    Reader(CaptureReader),
    Mapped(mapped::MappedPcap),
    Chain(Box<Chain>),
}

/// The files of one capture cut into several (a ring of `tcpdump -C`/`-W` or `-G` files), in
/// order: each is read as a stream to its end, then the next.
struct Chain {
    parts: std::collections::VecDeque<CaptureReader>,
    /// The counts of the files read to their end.
    done: CaptureStats,
    /// `done` plus the current file's counts.
    stats: CaptureStats,
}

impl Source {
    fn stats(&self) -> &CaptureStats {
        match self {
            Source::Reader(r) => r.stats(),
            Source::Mapped(m) => m.stats(),
            Source::Chain(c) => &c.stats,
        }
    }

    fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&PacketRef<'_>, &mut CaptureStats) -> Option<T>,
    ) -> Option<Result<T, CaptureError>> {
        match self {
            Source::Reader(r) => r.next_with(f),
            Source::Mapped(m) => m.next_with(f),
            Source::Chain(c) => loop {
                let part = c.parts.front_mut()?;
                match part.next_with(&mut f) {
                    Some(read) => {
                        c.stats = c.done.plus(part.stats());
                        return Some(read);
                    }
                    None => {
                        c.done = c.done.plus(part.stats());
                        c.stats = c.done;
                        c.parts.pop_front();
                    }
                }
            },
        }
    }
}

impl TcpSegments {
    /// Decodes the packets of `reader`.
    pub fn new(reader: CaptureReader) -> TcpSegments {
        TcpSegments {
            reader: Source::Reader(reader),
        }
    }

    /// Reads a capture file: a legacy pcap file in place from a memory map (see
    /// [`mapped`]), anything else (pcapng, compressed) as a stream.
    pub fn from_file(file: std::fs::File) -> Result<TcpSegments, CaptureError> {
        match mapped::MappedPcap::open(&file) {
            Some(m) => Ok(TcpSegments {
                reader: Source::Mapped(m),
            }),
            None => TcpSegments::from_reader(file),
        }
    }

    /// Reads the files of one capture cut into several (rotated by tcpdump), in the order
    /// given, as one: each to its end, then the next. Each file is opened now.
    pub fn chain(paths: &[String]) -> Result<TcpSegments, CaptureError> {
        let mut parts = std::collections::VecDeque::with_capacity(paths.len());
        for path in paths {
            let file = std::fs::File::open(path).map_err(|source| CaptureError::Open {
                path: path.clone(),
                source,
            })?;
            parts.push_back(CaptureReader::new(file).map_err(|e| CaptureError::InFile {
                path: path.clone(),
                source: Box::new(e),
            })?);
        }
        Ok(TcpSegments {
            reader: Source::Chain(Box::new(Chain {
                parts,
                done: CaptureStats::default(),
                stats: CaptureStats::default(),
            })),
        })
    }

    /// Reads a capture from any input.
    pub fn from_reader<R: std::io::Read + Send + 'static>(
        input: R,
    ) -> Result<TcpSegments, CaptureError> {
        CaptureReader::new(input).map(TcpSegments::new)
    }

    /// Counters of everything read and skipped so far.
    pub fn stats(&self) -> &CaptureStats {
        self.reader.stats()
    }

    /// The whole file, when it is read in place from a memory map: payloads lent by
    /// [`TcpSegments::next_with`] are slices of it, valid as long as `self`.
    pub fn mapped_bytes(&self) -> Option<&[u8]> {
        match &self.reader {
            Source::Mapped(m) => Some(m.bytes()),
            Source::Reader(_) | Source::Chain(_) => None,
        }
    }

    /// Calls `f` with the next TCP segment, its payload lent from the read buffer (no copy),
    /// and returns what `f` returned. `None` at the end; a read error is returned once and
    /// ends the capture.
    pub fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&TcpSegmentRef<'_>) -> T,
    ) -> Option<Result<T, CaptureError>> {
        self.reader
            .next_with(|packet, stats| with_counted_segment(packet, stats, |seg| Some(f(seg))))
    }
}

/// `f` of the TCP segment of `packet`, counted in `stats` (and as cut by the snap length when
/// it is); `None`, with why counted, for a packet that is not TCP. The segment is lent to `f`
/// where it is built (see [`with_tcp_segment`]).
#[inline(always)]
pub(crate) fn with_counted_segment<T>(
    packet: &PacketRef<'_>,
    stats: &mut CaptureStats,
    f: impl FnOnce(&TcpSegmentRef<'_>) -> Option<T>,
) -> Option<T> {
    let counted = with_tcp_segment(packet, |seg| {
        stats.tcp += 1;
        if seg.missing > 0 {
            stats.truncated_tcp += 1;
            stats.cut_at = stats.cut_at.max(packet.data.len() as u32);
        }
        f(seg)
    });
    match counted {
        Ok(t) => t,
        Err(skip) => {
            stats.note(skip);
            None
        }
    }
}

impl Iterator for TcpSegments {
    type Item = Result<TcpSegment, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(|seg| seg.to_segment())
    }
}

/// A source of TCP segments for [`crate::decode::Decoder`]: lends each segment to a callback,
/// so that a capture file is decoded without copying payloads ([`TcpSegments`]), while any
/// iterator of owned segments works too ([`OwnedSegments`]).
pub trait SegmentSource {
    /// Calls `f` with the next segment. `None` at the end; an error ends the source.
    fn next_segment<F: FnMut(&TcpSegmentRef<'_>)>(
        &mut self,
        f: F,
    ) -> Option<Result<(), CaptureError>>;

    /// Calls `f` with segment after segment until it returns false for one: `Some(Ok(()))`
    /// then. `None` when the source ends first; an error ends the source. A source may loop
    /// inside rather than return through its layers after each segment.
    fn segments_while<F: FnMut(&TcpSegmentRef<'_>) -> bool>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        loop {
            let mut more = true;
            match self.next_segment(|seg| more = f(seg))? {
                Ok(()) if more => {}
                done => return Some(done),
            }
        }
    }
}

impl SegmentSource for TcpSegments {
    fn next_segment<F: FnMut(&TcpSegmentRef<'_>)>(
        &mut self,
        f: F,
    ) -> Option<Result<(), CaptureError>> {
        self.next_with(f)
    }

    /// The packets are read in one loop, the reader's own: a segment `f` wants more after
    /// costs no return through the readers.
    fn segments_while<F: FnMut(&TcpSegmentRef<'_>) -> bool>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        self.reader.next_with(|packet, stats| {
            with_counted_segment(packet, stats, |seg| (!f(seg)).then_some(()))
        })
    }
}

/// Any iterator of owned segments as a [`SegmentSource`].
pub struct OwnedSegments<I>(pub I);

impl<I> SegmentSource for OwnedSegments<I>
where
    I: Iterator<Item = Result<TcpSegment, CaptureError>>,
{
    fn next_segment<F: FnMut(&TcpSegmentRef<'_>)>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        Some(self.0.next()?.map(|seg| f(&seg.as_ref())))
    }
}

/// Opens a capture file (`-` for stdin) and iterates over its TCP segments.
pub fn open(path: &str) -> Result<TcpSegments, CaptureError> {
    if path == "-" {
        return TcpSegments::from_reader(std::io::stdin());
    }
    let file = std::fs::File::open(path).map_err(|source| CaptureError::Open {
        path: path.to_string(),
        source,
    })?;
    TcpSegments::from_file(file)
}
