//! Link-layer decoding: from one captured packet to (at most) one TCP segment.
//!
//! Header parsing is done by etherparse's *lax* slicer, so that packets cut short by the
//! capture's snap length still yield the bytes that were recorded. The only hand-written
//! parsing is the fixed-size pseudo-headers etherparse does not accept (see [`decode_tcp`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TransportSlice, ip_number};

/// A capture timestamp: seconds and nanoseconds since the Unix epoch (UTC).
///
/// Ordered by time, so it can be compared and used to keep events in time order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Whole seconds since the epoch.
    pub secs: i64,
    /// Nanoseconds within the second, always `< 1_000_000_000`.
    pub nanos: u32,
}

impl Timestamp {
    /// Seconds since the epoch as a float (microsecond precision survives for current dates).
    pub fn as_secs_f64(self) -> f64 {
        self.secs as f64 + f64::from(self.nanos) * 1e-9
    }

    /// The timestamp of a float of seconds since the epoch, to the microsecond (what a float
    /// holds exactly for current dates).
    pub fn from_secs_f64(t: f64) -> Timestamp {
        let secs = t.floor();
        let micros = (((t - secs) * 1e6).round() as u64).min(999_999);
        Timestamp::from_fraction(secs as i64, micros, 1_000_000)
    }

    /// Builds a timestamp from seconds and a sub-second count of `units_per_sec` units,
    /// normalising an out-of-range fraction (malformed captures) into the seconds.
    pub fn from_fraction(secs: i64, frac: u64, units_per_sec: u64) -> Timestamp {
        // The usual resolutions, in range: no 128-bit division (it is a library call).
        match (units_per_sec, frac < units_per_sec) {
            (1_000_000, true) => {
                return Timestamp {
                    secs,
                    nanos: frac as u32 * 1000,
                };
            }
            (1_000_000_000, true) => {
                return Timestamp {
                    secs,
                    nanos: frac as u32,
                };
            }
            _ => {}
        }
        let units = units_per_sec.max(1);
        let secs = secs.saturating_add(i64::try_from(frac / units).unwrap_or(i64::MAX));
        // u128 so that `frac * 1e9` cannot overflow for any resolution up to 2^64.
        let nanos = (u128::from(frac % units) * 1_000_000_000 / u128::from(units)) as u32;
        Timestamp { secs, nanos }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.secs, self.nanos)
    }
}

/// Link types (the `network` field of a pcap header, `LinkType` of a pcapng interface) that
/// [`decode_tcp`] understands. Numbers are from <https://www.tcpdump.org/linktypes.html>.
pub mod linktype {
    /// BSD loopback: 4-byte address family in the *capturing host's* byte order.
    pub const NULL: u16 = 0;
    /// Ethernet II, optionally with 802.1Q / QinQ VLAN tags.
    pub const ETHERNET: u16 = 1;
    /// Raw IP on some BSDs (DLT_RAW's historical value 12 written to files).
    pub const RAW_BSD12: u16 = 12;
    /// Raw IP on BSD/OS (DLT_RAW's historical value 14 written to files).
    pub const RAW_BSD14: u16 = 14;
    /// Raw IPv4 or IPv6, version taken from the first nibble.
    pub const RAW: u16 = 101;
    /// OpenBSD loopback: like [`NULL`] but the family is always in network byte order.
    pub const LOOP: u16 = 108;
    /// Linux cooked capture v1 (`tcpdump -i any` before libpcap 1.10).
    pub const LINUX_SLL: u16 = 113;
    /// Raw IPv4.
    pub const IPV4: u16 = 228;
    /// Raw IPv6.
    pub const IPV6: u16 = 229;
    /// Linux cooked capture v2 (`tcpdump -i any` with libpcap >= 1.10).
    pub const LINUX_SLL2: u16 = 276;
}

/// One TCP segment taken from a captured packet: addressing, sequencing, flags and payload.
/// The payload is owned (`Vec<u8>`, the default) or borrowed from the packet it came from
/// ([`TcpSegmentRef`]: what the fast path, reader → reassembly → decoder, passes around,
/// without a copy per segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment<P = Vec<u8>> {
    /// When the packet was captured.
    pub time: Timestamp,
    /// Sender address and port.
    pub src: SocketAddr,
    /// Receiver address and port.
    pub dst: SocketAddr,
    /// Sequence number of the first byte (or of the SYN/FIN flag when there is no payload).
    pub seq: u32,
    /// Acknowledgement number, present exactly when the ACK flag is set.
    pub ack: Option<u32>,
    /// SYN flag: the segment opens a direction and consumes one sequence number.
    pub syn: bool,
    /// FIN flag: the sender has finished; consumes one sequence number after the payload.
    pub fin: bool,
    /// RST flag: the connection is aborted.
    pub rst: bool,
    /// The payload bytes that were captured.
    pub payload: P,
    /// Payload bytes the sender sent but the capture did not record (snap length shorter than
    /// the packet). They follow `payload` in sequence space; reassembly reports them as a gap.
    pub missing: u32,
    /// 1-based number of the packet record in the capture file (as Wireshark numbers frames).
    pub record: u64,
}

/// A [`TcpSegment`] whose payload is borrowed.
pub type TcpSegmentRef<'a> = TcpSegment<&'a [u8]>;

impl<P: AsRef<[u8]>> TcpSegment<P> {
    /// The same segment with another payload.
    fn with_payload<Q>(&self, payload: Q) -> TcpSegment<Q> {
        TcpSegment {
            time: self.time,
            src: self.src,
            dst: self.dst,
            seq: self.seq,
            ack: self.ack,
            syn: self.syn,
            fin: self.fin,
            rst: self.rst,
            payload,
            missing: self.missing,
            record: self.record,
        }
    }

    /// The segment with its payload borrowed.
    pub fn as_ref(&self) -> TcpSegmentRef<'_> {
        self.with_payload(self.payload.as_ref())
    }

    /// An owned copy.
    pub fn to_segment(&self) -> TcpSegment {
        self.with_payload(self.payload.as_ref().to_vec())
    }
}

/// One captured packet: link-layer bytes plus where and when it was captured. The bytes are
/// owned (`Vec<u8>`, the default) or borrowed from the reader's buffer ([`PacketRef`], see
/// [`super::CaptureReader::next_with`]: no copy per packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<D = Vec<u8>> {
    /// 1-based packet number in the file.
    pub record: u64,
    /// Byte offset of the record (pcap record header / pcapng block) in the file.
    pub offset: u64,
    /// Capture time.
    pub time: Timestamp,
    /// Link type of the interface it was captured on (see [`linktype`]).
    pub linktype: u16,
    /// The captured bytes (possibly fewer than `orig_len`).
    pub data: D,
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

/// A [`Packet`] whose bytes are borrowed.
pub type PacketRef<'a> = Packet<&'a [u8]>;

impl<D: AsRef<[u8]>> Packet<D> {
    /// The same packet with other bytes.
    fn with_data<E>(&self, data: E) -> Packet<E> {
        Packet {
            record: self.record,
            offset: self.offset,
            time: self.time,
            linktype: self.linktype,
            data,
            orig_len: self.orig_len,
        }
    }

    /// The packet as borrowed bytes.
    pub fn as_ref(&self) -> PacketRef<'_> {
        self.with_data(self.data.as_ref())
    }

    /// An owned copy.
    pub fn to_packet(&self) -> Packet {
        self.with_data(self.data.as_ref().to_vec())
    }
}

/// Why a packet produced no [`TcpSegment`]. Not an error: captures hold all kinds of traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The link type is not one [`decode_tcp`] knows.
    UnsupportedLinkType(u16),
    /// Not IPv4/IPv6 (ARP, LLDP, an unknown loopback family, ...).
    NotIp,
    /// IP, but not TCP.
    NotTcp,
    /// An IP fragment; ZooKeeper election traffic is not fragmented, so no defragmentation.
    Fragment,
    /// Headers too short or inconsistent to find a TCP header.
    Malformed,
}

/// Counters of what a capture contained, kept by the reader and by [`super::TcpSegments`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Packet records read (pcap records, pcapng enhanced/simple packet blocks).
    pub packets: u64,
    /// Packets that yielded a TCP segment.
    pub tcp: u64,
    /// Of those, segments whose payload was cut short by the snap length.
    pub truncated_tcp: u64,
    /// The most bytes kept of any packet cut short: the capture's snap length, as far as
    /// the cut packets tell (0 when none was cut).
    pub cut_at: u32,
    /// Packets with a link type [`decode_tcp`] does not know.
    pub unsupported_link_type: u64,
    /// The first such link type, to name it.
    pub first_unsupported_link_type: Option<u16>,
    /// Non-IP packets.
    pub not_ip: u64,
    /// IP packets that are not TCP.
    pub not_tcp: u64,
    /// IP fragments, skipped.
    pub fragments: u64,
    /// Packets whose headers could not be parsed.
    pub malformed: u64,
    /// pcapng packet blocks naming an interface that was never described; skipped.
    pub unknown_interface: u64,
    /// pcapng interfaces with an unusable `if_tsresol`, read as microseconds instead.
    pub bad_ts_resolution: u64,
    /// pcapng blocks that carry no packet (statistics, name resolution, custom, ...).
    pub other_blocks: u64,
}

impl CaptureStats {
    /// The counts of two captures read one after the other.
    pub fn plus(&self, other: &CaptureStats) -> CaptureStats {
        CaptureStats {
            packets: self.packets + other.packets,
            tcp: self.tcp + other.tcp,
            truncated_tcp: self.truncated_tcp + other.truncated_tcp,
            cut_at: self.cut_at.max(other.cut_at),
            unsupported_link_type: self.unsupported_link_type + other.unsupported_link_type,
            first_unsupported_link_type: self
                .first_unsupported_link_type
                .or(other.first_unsupported_link_type),
            not_ip: self.not_ip + other.not_ip,
            not_tcp: self.not_tcp + other.not_tcp,
            fragments: self.fragments + other.fragments,
            malformed: self.malformed + other.malformed,
            unknown_interface: self.unknown_interface + other.unknown_interface,
            bad_ts_resolution: self.bad_ts_resolution + other.bad_ts_resolution,
            other_blocks: self.other_blocks + other.other_blocks,
        }
    }

    /// Counts a packet that [`decode_tcp`] skipped.
    pub fn note(&mut self, skip: Skip) {
        match skip {
            Skip::UnsupportedLinkType(t) => {
                self.unsupported_link_type += 1;
                self.first_unsupported_link_type.get_or_insert(t);
            }
            Skip::NotIp => self.not_ip += 1,
            Skip::NotTcp => self.not_tcp += 1,
            Skip::Fragment => self.fragments += 1,
            Skip::Malformed => self.malformed += 1,
        }
    }
}

/// BSD `AF_INET` and the various `AF_INET6` values (Linux, Net/OpenBSD, FreeBSD, Darwin).
fn is_ip_family(family: u32) -> bool {
    matches!(family, 2 | 10 | 24 | 28 | 30)
}

/// Decodes the packet's link layer and returns its TCP segment, or why there is none.
///
/// etherparse does all header parsing except two fixed pseudo-headers:
/// - Linux cooked v1 (16 bytes) is read by hand because etherparse's `LinuxSllSlice` rejects
///   every ARPHRD type but a handful, including `ARPHRD_LOOPBACK` (772), which is exactly what
///   `tcpdump -i any` records for the loopback interface; and it has no SLL2 at all. Both
///   headers just end in an EtherType, which is then handed to etherparse.
/// - The 4-byte loopback family word (NULL/LOOP) is not a header etherparse knows.
pub fn decode_tcp(packet: &Packet) -> Result<TcpSegment, Skip> {
    decode_tcp_ref(&packet.as_ref()).map(|s| s.to_segment())
}

/// [`decode_tcp`] without copying: the segment's payload is borrowed from the packet.
pub fn decode_tcp_ref<'a>(packet: &PacketRef<'a>) -> Result<TcpSegmentRef<'a>, Skip> {
    with_tcp_segment(packet, |seg| *seg)
}

/// `f` of the packet's TCP segment (its payload borrowed from the packet), or why there is
/// none. Inlined into the readers' loops, the segment (over 100 bytes) is built where `f` reads
/// it: returned, wrapped in an `Option` and then a `Result`, it was moved twice for every packet.
#[inline(always)]
pub fn with_tcp_segment<'a, T>(
    packet: &PacketRef<'a>,
    f: impl FnOnce(&TcpSegmentRef<'a>) -> T,
) -> Result<T, Skip> {
    let data = packet.data;
    let ip = match packet.linktype {
        linktype::RAW
        | linktype::IPV4
        | linktype::IPV6
        | linktype::RAW_BSD12
        | linktype::RAW_BSD14 => Some(data),
        linktype::ETHERNET if data.get(12..14) == Some(&[0x08, 0x00]) => data.get(14..),
        linktype::LINUX_SLL if data.get(14..16) == Some(&[0x08, 0x00]) => data.get(16..),
        linktype::LINUX_SLL2 if data.get(..2) == Some(&[0x08, 0x00]) => data.get(20..),
        _ => None,
    };
    let seg = if let Some(ip) = ip
        && let Some(tcp_len) = plain_ipv4_tcp(ip)
    {
        const IP: usize = 20;
        let tcp = &ip[IP..];
        let word = |at: usize| u32::from_be_bytes([tcp[at], tcp[at + 1], tcp[at + 2], tcp[at + 3]]);
        let addr = |at: usize| std::net::Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
        let flags = tcp[13];
        TcpSegmentRef {
            time: packet.time,
            src: SocketAddr::new(IpAddr::V4(addr(12)), u16::from_be_bytes([tcp[0], tcp[1]])),
            dst: SocketAddr::new(IpAddr::V4(addr(16)), u16::from_be_bytes([tcp[2], tcp[3]])),
            seq: word(4),
            ack: (flags & 0x10 != 0).then(|| word(8)),
            syn: flags & 0x02 != 0,
            fin: flags & 0x01 != 0,
            rst: flags & 0x04 != 0,
            payload: &tcp[tcp_len..],
            missing: 0,
            record: packet.record,
        }
    } else {
        decode_tcp_lax(packet)?
    };
    // One call of `f`, so that it is inlined here however big it is.
    Ok(f(&seg))
}

/// The common case read directly: an IPv4 packet without options or fragmentation, carrying
/// TCP, whose total length is exactly the bytes captured (nothing cut off, no padding): the
/// TCP header's length. `None` for anything else, which etherparse's lax slicer then reads in
/// full; for the packets this accepts, the segment is the same as the slicer's (checked by
/// `capture::tests::plain_ipv4_fast_path_agrees_with_etherparse`).
#[inline(always)]
fn plain_ipv4_tcp(ip: &[u8]) -> Option<usize> {
    const IP: usize = 20;
    if ip.len() < IP + 20 || ip[0] != 0x45 || ip[9] != ip_number::TCP.0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    let tcp_len = usize::from(ip[IP + 12] >> 4) * 4;
    if total != ip.len() || fragment != 0 || tcp_len < 20 || IP + tcp_len > total {
        return None;
    }
    Some(tcp_len)
}

/// [`decode_tcp_ref`] with every packet read by etherparse's lax slicer (no fast path).
/// Kept out of line: it is the rare path of the inlined [`decode_tcp_ref`].
#[doc(hidden)]
#[inline(never)]
pub fn decode_tcp_lax<'a>(packet: &PacketRef<'a>) -> Result<TcpSegmentRef<'a>, Skip> {
    let data = packet.data;
    let sliced = match packet.linktype {
        linktype::ETHERNET => LaxSlicedPacket::from_ethernet(data).map_err(|_| Skip::Malformed)?,
        linktype::LINUX_SLL => {
            // pkttype(2) hatype(2) halen(2) addr(8) protocol(2)
            let proto = be16(data, 14).ok_or(Skip::Malformed)?;
            LaxSlicedPacket::from_ether_type(EtherType(proto), &data[16..])
        }
        linktype::LINUX_SLL2 => {
            // protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8)
            if data.len() < 20 {
                return Err(Skip::Malformed);
            }
            let proto = be16(data, 0).ok_or(Skip::Malformed)?;
            LaxSlicedPacket::from_ether_type(EtherType(proto), &data[20..])
        }
        linktype::NULL | linktype::LOOP => {
            let word: [u8; 4] = data
                .get(..4)
                .and_then(|w| w.try_into().ok())
                .ok_or(Skip::Malformed)?;
            // NULL is in the writer's host order, which the file does not record: accept
            // either order. The IP version nibble then decides v4 vs v6.
            let ip = if packet.linktype == linktype::LOOP {
                is_ip_family(u32::from_be_bytes(word))
            } else {
                is_ip_family(u32::from_le_bytes(word)) || is_ip_family(u32::from_be_bytes(word))
            };
            if !ip {
                return Err(Skip::NotIp);
            }
            LaxSlicedPacket::from_ip(&data[4..]).map_err(|_| Skip::Malformed)?
        }
        linktype::RAW
        | linktype::IPV4
        | linktype::IPV6
        | linktype::RAW_BSD12
        | linktype::RAW_BSD14 => LaxSlicedPacket::from_ip(data).map_err(|_| Skip::Malformed)?,
        other => return Err(Skip::UnsupportedLinkType(other)),
    };
    segment_from(packet, &sliced)
}

fn be16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

fn segment_from<'a>(
    packet: &PacketRef<'a>,
    sliced: &LaxSlicedPacket<'a>,
) -> Result<TcpSegmentRef<'a>, Skip> {
    let net = match &sliced.net {
        Some(net @ (LaxNetSlice::Ipv4(_) | LaxNetSlice::Ipv6(_))) => net,
        Some(LaxNetSlice::Arp(_)) => return Err(Skip::NotIp),
        None => {
            // An error while slicing the IP header means IP that is broken, otherwise the
            // link layer simply carried something else.
            return Err(if sliced.stop_err.is_some() {
                Skip::Malformed
            } else {
                Skip::NotIp
            });
        }
    };
    let (src_ip, dst_ip, ip_payload, declared_payload) = match net {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            let p = v4.payload();
            // Bytes from the start of the IP header to the payload (header, options, AH).
            let hdrs = ptr_distance(h.slice(), p.payload);
            let declared = usize::from(h.total_len()).saturating_sub(hdrs);
            (
                IpAddr::V4(h.source_addr()),
                IpAddr::V4(h.destination_addr()),
                p,
                declared,
            )
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            let p = v6.payload();
            let hdrs = ptr_distance(h.slice(), p.payload);
            let declared = (40 + usize::from(h.payload_length())).saturating_sub(hdrs);
            (
                IpAddr::V6(h.source_addr()),
                IpAddr::V6(h.destination_addr()),
                p,
                declared,
            )
        }
        LaxNetSlice::Arp(_) => return Err(Skip::NotIp),
    };
    if ip_payload.fragmented {
        return Err(Skip::Fragment);
    }
    if ip_payload.ip_number != ip_number::TCP {
        return Err(Skip::NotTcp);
    }
    let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
        return Err(Skip::Malformed);
    };
    let payload = tcp.payload();
    // Bytes the IP header says there are and the capture lacks: at most what the capture
    // says it cut (its record's original length). An IP total length beyond that is the
    // header's error, not a snap length, and claims no bytes.
    let missing = if ip_payload.incomplete {
        let tcp_declared = declared_payload.saturating_sub(tcp.header_slice().len());
        let cut = (packet.orig_len as usize).saturating_sub(packet.data.len());
        u32::try_from(tcp_declared.saturating_sub(payload.len()).min(cut)).unwrap_or(u32::MAX)
    } else {
        0
    };
    Ok(TcpSegmentRef {
        time: packet.time,
        src: SocketAddr::new(src_ip, tcp.source_port()),
        dst: SocketAddr::new(dst_ip, tcp.destination_port()),
        seq: tcp.sequence_number(),
        ack: tcp.ack().then(|| tcp.acknowledgment_number()),
        syn: tcp.syn(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        payload,
        missing,
        record: packet.record,
    })
}

/// Distance in bytes from the start of `outer` to the start of `inner`, a sub-slice of the
/// same packet buffer (etherparse hands out sub-slices, not offsets).
fn ptr_distance(outer: &[u8], inner: &[u8]) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}
