//! Builders for in-memory captures and segments, for tests.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use etherparse::{IpHeaders, PacketBuilder, PacketBuilderStep, TcpHeader, VlanId};

use super::{ConnId, Direction, StreamEvent, TcpSegment, Timestamp, linktype};

/// A segment with everything but addressing defaulted.
pub fn seg(src: &str, dst: &str, seq: u32, payload: &[u8]) -> TcpSegment {
    TcpSegment {
        time: Timestamp::default(),
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        seq,
        ack: Some(1),
        syn: false,
        fin: false,
        rst: false,
        payload: payload.to_vec(),
        missing: 0,
        record: 0,
    }
}

fn tcp_header(s: &TcpSegment) -> TcpHeader {
    let mut h = TcpHeader::new(s.src.port(), s.dst.port(), s.seq, 65535);
    h.syn = s.syn;
    h.fin = s.fin;
    h.rst = s.rst;
    if let Some(a) = s.ack {
        h.ack = true;
        h.acknowledgment_number = a;
    }
    h
}

fn finish(step: PacketBuilderStep<IpHeaders>, s: &TcpSegment) -> Vec<u8> {
    let mut v = Vec::new();
    step.tcp_header(tcp_header(s))
        .write(&mut v, &s.payload)
        .unwrap();
    v
}

/// The segment as an IP packet (v4 or v6 after its addresses).
pub fn raw_ip(s: &TcpSegment) -> Vec<u8> {
    let step = match (s.src.ip(), s.dst.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => PacketBuilder::ipv4(a.octets(), b.octets(), 64),
        (IpAddr::V6(a), IpAddr::V6(b)) => PacketBuilder::ipv6(a.octets(), b.octets(), 64),
        _ => panic!("mixed families"),
    };
    finish(step, s)
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// The segment in an Ethernet frame, optionally VLAN-tagged.
pub fn ethernet(s: &TcpSegment, vlan: Option<u16>) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(MAC_A, MAC_B);
    let step = match (vlan, s.src.ip(), s.dst.ip()) {
        (None, IpAddr::V4(a), IpAddr::V4(b)) => eth.ipv4(a.octets(), b.octets(), 64),
        (None, IpAddr::V6(a), IpAddr::V6(b)) => eth.ipv6(a.octets(), b.octets(), 64),
        (Some(id), IpAddr::V4(a), IpAddr::V4(b)) => eth
            .single_vlan(VlanId::try_new(id).unwrap())
            .ipv4(a.octets(), b.octets(), 64),
        (Some(id), IpAddr::V6(a), IpAddr::V6(b)) => eth
            .single_vlan(VlanId::try_new(id).unwrap())
            .ipv6(a.octets(), b.octets(), 64),
        _ => panic!("mixed families"),
    };
    finish(step, s)
}

fn ethertype(s: &TcpSegment) -> u16 {
    if s.src.is_ipv4() { 0x0800 } else { 0x86dd }
}

/// Link layers the tests cover.
#[derive(Clone, Copy, Debug)]
pub enum Link {
    Ethernet,
    Vlan(u16),
    Sll,
    Sll2,
    NullLe,
    NullBe,
    Loop,
    Raw(u16),
}

/// The link type number and frame for `s` on `link`.
pub fn frame(link: Link, s: &TcpSegment) -> (u16, Vec<u8>) {
    let ip = raw_ip(s);
    let fam: u32 = if s.src.is_ipv4() { 2 } else { 30 };
    match link {
        Link::Ethernet => (linktype::ETHERNET, ethernet(s, None)),
        Link::Vlan(id) => (linktype::ETHERNET, ethernet(s, Some(id))),
        Link::Sll => {
            let mut v = Vec::new();
            v.extend_from_slice(&0u16.to_be_bytes()); // packet type: to us
            v.extend_from_slice(&772u16.to_be_bytes()); // ARPHRD_LOOPBACK
            v.extend_from_slice(&6u16.to_be_bytes());
            v.extend_from_slice(&[0; 8]);
            v.extend_from_slice(&ethertype(s).to_be_bytes());
            v.extend_from_slice(&ip);
            (linktype::LINUX_SLL, v)
        }
        Link::Sll2 => {
            let mut v = Vec::new();
            v.extend_from_slice(&ethertype(s).to_be_bytes());
            v.extend_from_slice(&0u16.to_be_bytes());
            v.extend_from_slice(&1u32.to_be_bytes()); // ifindex
            v.extend_from_slice(&772u16.to_be_bytes());
            v.push(0);
            v.push(6);
            v.extend_from_slice(&[0; 8]);
            v.extend_from_slice(&ip);
            (linktype::LINUX_SLL2, v)
        }
        Link::NullLe => (linktype::NULL, [fam.to_le_bytes().to_vec(), ip].concat()),
        Link::NullBe => (linktype::NULL, [fam.to_be_bytes().to_vec(), ip].concat()),
        Link::Loop => (linktype::LOOP, [fam.to_be_bytes().to_vec(), ip].concat()),
        Link::Raw(lt) => (lt, ip),
    }
}

/// One record of a legacy pcap file.
pub struct Rec {
    pub secs: u32,
    pub frac: u32,
    pub data: Vec<u8>,
    pub orig_len: u32,
}

impl Rec {
    pub fn new(secs: u32, frac: u32, data: Vec<u8>) -> Rec {
        let orig_len = data.len() as u32;
        Rec {
            secs,
            frac,
            data,
            orig_len,
        }
    }

    /// A record of `data` whose last `cut` bytes the capture did not keep (a snap length).
    pub fn cut(secs: u32, frac: u32, mut data: Vec<u8>, cut: usize) -> Rec {
        let orig_len = data.len() as u32;
        data.truncate(data.len() - cut);
        Rec {
            secs,
            frac,
            data,
            orig_len,
        }
    }
}

fn put32(v: &mut Vec<u8>, be: bool, x: u32) {
    v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
}

fn put16(v: &mut Vec<u8>, be: bool, x: u16) {
    v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
}

/// A legacy pcap file.
pub fn pcap(be: bool, nanos: bool, lt: u16, recs: &[Rec]) -> Vec<u8> {
    let mut v = Vec::new();
    put32(&mut v, be, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    put16(&mut v, be, 2);
    put16(&mut v, be, 4);
    put32(&mut v, be, 0);
    put32(&mut v, be, 0);
    put32(&mut v, be, 262144);
    put32(&mut v, be, u32::from(lt));
    for r in recs {
        put32(&mut v, be, r.secs);
        put32(&mut v, be, r.frac);
        put32(&mut v, be, r.data.len() as u32);
        put32(&mut v, be, r.orig_len);
        v.extend_from_slice(&r.data);
    }
    v
}

/// A pcapng interface: link type and optional `if_tsresol`.
pub struct Iface {
    pub linktype: u16,
    pub tsresol: Option<u8>,
}

/// A pcapng enhanced packet: interface, raw timestamp (in the interface's units), data.
pub struct Epb {
    pub if_id: u32,
    pub ts: u64,
    pub data: Vec<u8>,
    pub orig_len: u32,
}

impl Epb {
    pub fn new(if_id: u32, ts: u64, data: Vec<u8>) -> Epb {
        let orig_len = data.len() as u32;
        Epb {
            if_id,
            ts,
            data,
            orig_len,
        }
    }
}

fn block(v: &mut Vec<u8>, be: bool, ty: u32, body: &[u8]) {
    let len = 12 + body.len() as u32;
    put32(v, be, ty);
    put32(v, be, len);
    v.extend_from_slice(body);
    put32(v, be, len);
}

/// A pcapng section header block.
pub fn shb(v: &mut Vec<u8>, be: bool) {
    let mut b = Vec::new();
    put32(&mut b, be, 0x1A2B_3C4D);
    put16(&mut b, be, 1);
    put16(&mut b, be, 0);
    b.extend_from_slice(&[0xff; 8]); // section length unknown
    block(v, be, 0x0A0D_0D0A, &b);
}

/// A pcapng interface description block.
pub fn idb(v: &mut Vec<u8>, be: bool, i: &Iface) {
    let mut b = Vec::new();
    put16(&mut b, be, i.linktype);
    put16(&mut b, be, 0);
    put32(&mut b, be, 0);
    if let Some(r) = i.tsresol {
        put16(&mut b, be, 9);
        put16(&mut b, be, 1);
        b.extend_from_slice(&[r, 0, 0, 0]);
        put16(&mut b, be, 0);
        put16(&mut b, be, 0);
    }
    block(v, be, 1, &b);
}

/// A pcapng enhanced packet block.
pub fn epb(v: &mut Vec<u8>, be: bool, p: &Epb) {
    let mut b = Vec::new();
    put32(&mut b, be, p.if_id);
    put32(&mut b, be, (p.ts >> 32) as u32);
    put32(&mut b, be, p.ts as u32);
    put32(&mut b, be, p.data.len() as u32);
    put32(&mut b, be, p.orig_len);
    b.extend_from_slice(&p.data);
    while b.len() % 4 != 0 {
        b.push(0);
    }
    block(v, be, 6, &b);
}

/// A one-section pcapng file.
pub fn pcapng(be: bool, ifaces: &[Iface], packets: &[Epb]) -> Vec<u8> {
    let mut v = Vec::new();
    shb(&mut v, be);
    for i in ifaces {
        idb(&mut v, be, i);
    }
    for p in packets {
        epb(&mut v, be, p);
    }
    v
}

/// Concatenated bytes per (connection, direction), checking along the way that Data and Gap
/// events tile each stream without holes or overlaps. Gaps are filled with nothing; the
/// number of gap bytes is returned alongside.
pub fn streams(events: &[StreamEvent]) -> HashMap<(ConnId, Direction), (Vec<u8>, u64)> {
    let mut m: HashMap<(ConnId, Direction), (Vec<u8>, u64)> = HashMap::new();
    let mut next: HashMap<(ConnId, Direction), u64> = HashMap::new();
    for e in events {
        match e {
            StreamEvent::Data {
                conn,
                dir,
                offset,
                bytes,
                ..
            } => {
                let n = next.entry((*conn, *dir)).or_default();
                assert_eq!(*offset, *n, "data does not continue the stream: {e:?}");
                *n += bytes.len() as u64;
                m.entry((*conn, *dir))
                    .or_default()
                    .0
                    .extend_from_slice(bytes);
            }
            StreamEvent::Gap {
                conn,
                dir,
                offset,
                missing,
                ..
            } => {
                let n = next.entry((*conn, *dir)).or_default();
                assert_eq!(*offset, *n, "gap does not continue the stream: {e:?}");
                *n += missing;
                m.entry((*conn, *dir)).or_default().1 += missing;
            }
            _ => {}
        }
    }
    m
}

/// Parses "a.b.c.d:p".
pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}
