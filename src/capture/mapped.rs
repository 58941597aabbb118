//! Legacy pcap files read in place from a memory map: the fast path for the commonest input.
//!
//! A legacy pcap file is a 24-byte header and records of a 16-byte header and the packet. Read
//! through [`super::CaptureReader`], every byte is copied from the kernel into a buffer and then
//! parsed record by record by pcap-parser; mapped, the packets are lent straight from the
//! file's pages. The results and errors are the reader's: the same packets, counters, record
//! numbers and offsets, [`CaptureError::Truncated`] for a file that stops inside a record and
//! [`CaptureError::TooLarge`] for a record longer than [`MAX_BLOCK`].
//!
//! Only regular, uncompressed legacy pcap files (both byte orders, micro- and nanosecond
//! timestamps) take this path; pcapng, the "modified" format, compressed files and streams
//! keep the reader. Written here rather than through a crate: the format is four fields.

use super::packet::CaptureStats;
use super::packet::PacketRef;
use super::reader::MAX_BLOCK;
use super::{CaptureError, Timestamp};

const HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// A mapped legacy pcap file.
pub struct MappedPcap {
    map: memmap2::Mmap,
    pos: usize,
    be: bool,
    nanos: bool,
    linktype: u16,
    records: u64,
    stats: CaptureStats,
    done: bool,
    /// Pages before this offset were handed back (they are never read again).
    released: usize,
}

/// Pages read are handed back in steps of this much, so that resident memory stays bounded
/// by it rather than growing with the file (they stay in the page cache).
const RELEASE_STEP: usize = 4 << 20;

impl MappedPcap {
    /// Maps `file` when it is a legacy pcap capture (by its magic); `None` otherwise, or when
    /// it cannot be mapped: the caller reads it as a stream.
    pub fn open(file: &std::fs::File) -> Option<MappedPcap> {
        let meta = file.metadata().ok()?;
        // A file shorter than its header is left to the stream reader and its errors.
        if !meta.is_file() || meta.len() < HEADER as u64 {
            return None;
        }
        // SAFETY: the map is only read. A file truncated by another process while mapped
        // would fault (SIGBUS); captures are not rewritten in place while being decoded, and
        // a file still being appended to (tcpdump running) is read up to its size at open.
        let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
        let (be, nanos) = match map.get(..4)? {
            [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
            [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
            [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
            [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
            _ => return None,
        };
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        let mut m = MappedPcap {
            map,
            pos: HEADER,
            be,
            nanos,
            linktype: 0,
            records: 0,
            stats: CaptureStats::default(),
            done: false,
            released: 0,
        };
        if m.map.len() >= HEADER {
            // Upper bits of the field carry FCS information, not the link type.
            m.linktype = (m.u32_at(20) & 0xffff) as u16;
        }
        Some(m)
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b: [u8; 4] = self.map[at..at + 4].try_into().unwrap_or([0; 4]);
        if self.be {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// The mapped file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Counters so far.
    pub fn stats(&self) -> &CaptureStats {
        &self.stats
    }

    /// As [`super::CaptureReader::next_with`].
    pub fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&PacketRef<'_>, &mut CaptureStats) -> Option<T>,
    ) -> Option<Result<T, CaptureError>> {
        if self.done {
            return None;
        }
        if self.map.len() < HEADER {
            self.done = true;
            return Some(Err(CaptureError::Truncated {
                offset: 0,
                record: 0,
            }));
        }
        loop {
            if self.pos - self.released >= RELEASE_STEP {
                let upto = self.pos & !(4096 - 1);
                // SAFETY: a read-only shared file mapping: MADV_DONTNEED drops these pages
                // from this process, and a later read (there is none: the reader only moves
                // forward, and no packet already handed to `f` is still lent out) would fault
                // them back in from the file.
                let _ = unsafe {
                    self.map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        self.released,
                        upto - self.released,
                    )
                };
                self.released = upto;
            }
            let at = self.pos;
            let len = self.map.len();
            if at == len {
                self.done = true;
                return None;
            }
            // Built only when needed: an error value made and dropped for every packet cost
            // about 1% of a decode.
            let truncated = |records| CaptureError::Truncated {
                offset: at as u64,
                record: records,
            };
            if len - at < RECORD_HEADER {
                self.done = true;
                return Some(Err(truncated(self.records)));
            }
            // The record header's four words, in the file's byte order (one branch on it for
            // the four).
            let header: [u8; RECORD_HEADER] = self.map[at..at + RECORD_HEADER]
                .try_into()
                .unwrap_or([0; RECORD_HEADER]);
            let word = |i: usize| {
                u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]])
            };
            let mut words = [word(0), word(4), word(8), word(12)];
            if self.be {
                words = words.map(u32::swap_bytes);
            }
            let [secs, frac, caplen, orig_len] = words;
            let caplen = caplen as usize;
            // The reader's bound on one block (its header counted with 8 bytes of slack),
            // checked before the end of the file, as the reader does.
            if caplen + 24 > MAX_BLOCK {
                self.done = true;
                return Some(Err(CaptureError::TooLarge {
                    offset: at as u64,
                    record: self.records,
                    limit: MAX_BLOCK,
                }));
            }
            if caplen == 0 && super::reader::is_joined_header(secs, 0) {
                self.done = true;
                return Some(Err(CaptureError::Joined {
                    offset: at as u64,
                    record: self.records,
                }));
            }
            let end = at + RECORD_HEADER + caplen;
            prefetch_ahead(&self.map, at, end);
            if end > len {
                self.done = true;
                return Some(Err(truncated(self.records)));
            }
            self.pos = end;
            self.records += 1;
            self.stats.packets += 1;
            let units = if self.nanos { 1_000_000_000 } else { 1_000_000 };
            let packet = PacketRef {
                record: self.records,
                offset: at as u64,
                time: Timestamp::from_fraction(i64::from(secs), u64::from(frac), units),
                linktype: self.linktype,
                data: &self.map[at + RECORD_HEADER..end],
                orig_len,
            };
            if let Some(t) = f(&packet, &mut self.stats) {
                return Some(Ok(t));
            }
        }
    }
}

/// How far ahead of the packet being read the file is asked into the cache. The hardware's
/// own prefetcher stops at every 4 KiB page of the mapping, and each packet's bytes are
/// otherwise first read from memory where the decoder needs them.
const PREFETCH_DISTANCE: usize = 2048;

/// The most cache lines asked for one packet: a big packet's tail is left to the hardware.
const PREFETCH_LINES: usize = 8;

/// Asks into the cache the lines [`PREFETCH_DISTANCE`] ahead of the packet at `at..end`, so
/// that packet by packet every line of the file is asked for once, ahead of its use.
#[inline(always)]
fn prefetch_ahead(map: &[u8], at: usize, end: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let from = at + PREFETCH_DISTANCE;
        let to = (end + PREFETCH_DISTANCE)
            .min(map.len())
            .min(from + 64 * PREFETCH_LINES);
        let mut line = from;
        while line < to {
            // SAFETY: `line` is within the mapping (`to` is at most its length), and a
            // prefetch is a hint that reads nothing and cannot fault.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    map.as_ptr().add(line).cast(),
                )
            };
            line += 64;
        }
    }
}
