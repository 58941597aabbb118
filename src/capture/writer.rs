//! Writing TCP segments as a legacy pcap file (link type RAW: IPv4 or IPv6 with no link
//! header), for generated and re-segmented captures in tests and benchmarks.

use std::io::{self, Write};
use std::net::IpAddr;

use super::TcpSegment;
use super::linktype;

/// A pcap writer; the file header is written on creation.
pub struct PcapWriter<W: Write> {
    out: W,
    packet: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Starts a capture (microsecond timestamps, little-endian) on `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&262_144u32.to_le_bytes())?;
        out.write_all(&u32::from(linktype::RAW).to_le_bytes())?;
        Ok(PcapWriter {
            out,
            packet: Vec::with_capacity(2048),
        })
    }

    /// Writes one segment as an IP packet; returns the bytes written. Segments whose two
    /// addresses are of different families cannot be written and are an error.
    pub fn write(&mut self, s: &TcpSegment) -> io::Result<usize> {
        let builder = match (s.src.ip(), s.dst.ip()) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                etherparse::PacketBuilder::ipv4(a.octets(), b.octets(), 64)
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                etherparse::PacketBuilder::ipv6(a.octets(), b.octets(), 64)
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "source and destination of different address families",
                ));
            }
        };
        let mut tcp = builder.tcp(s.src.port(), s.dst.port(), s.seq, 65535);
        if s.syn {
            tcp = tcp.syn();
        }
        if s.fin {
            tcp = tcp.fin();
        }
        if s.rst {
            tcp = tcp.rst();
        }
        if let Some(ack) = s.ack {
            tcp = tcp.ack(ack);
        }
        self.packet.clear();
        tcp.write(&mut self.packet, &s.payload)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let len = self.packet.len() as u32;
        for v in [s.time.secs as u32, s.time.nanos / 1000, len, len] {
            self.out.write_all(&v.to_le_bytes())?;
        }
        self.out.write_all(&self.packet)?;
        Ok(16 + self.packet.len())
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{TcpSegments, Timestamp};

    #[test]
    fn what_is_written_reads_back() {
        let seg = TcpSegment {
            time: Timestamp {
                secs: 1_700_000_000,
                nanos: 123_000,
            },
            src: "[::1]:40000".parse().unwrap(),
            dst: "[::1]:3888".parse().unwrap(),
            seq: 7,
            ack: Some(9),
            syn: false,
            fin: true,
            rst: false,
            payload: b"hello".to_vec(),
            missing: 0,
            record: 1,
        };
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(&seg).unwrap();
        let bytes = w.finish().unwrap();
        let back: Vec<TcpSegment> = TcpSegments::from_reader(std::io::Cursor::new(bytes))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, vec![seg]);
    }
}
