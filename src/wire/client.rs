//! The client port's codec (2181): the records of ZooKeeper's client protocol that zkfle's
//! small client ([`crate::net::client`]) sends and reads, in jute's big-endian layout.
//!
//! Every frame is a 4-byte length and a body. A session starts with a [`ConnectRequest`]
//! answered by a [`ConnectResponse`] (neither has a header); then each request is a
//! [`RequestHeader`] and its record ([`CreateRequest`], [`SetDataRequest`], a path for getData
//! and sync), and each reply a [`ReplyHeader`] and its record (decoded for setData's and
//! getData's [`Stat`] and data; other replies need only the error code).
//! Frames are bounded by Java's default `jute.maxbuffer` (0xfffff bytes).

use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};

/// The largest frame body Java accepts by default (`jute.maxbuffer`).
pub const MAX_FRAME: usize = 0xfffff;
/// The longest password a server hands out (16 bytes in every release; bounded for safety).
const MAX_PASSWORD: usize = 64;

/// Operation codes (`ZooDefs.OpCode`).
pub mod opcode {
    pub const CREATE: i32 = 1;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const CLOSE_SESSION: i32 = -11;
}

/// The xid of the server's replies to pings.
pub const PING_XID: i32 = -2;
/// The xid of watch notifications.
pub const NOTIFICATION_XID: i32 = -1;

fn put_buffer(b: &mut Vec<u8>, data: &[u8]) {
    b.extend((data.len() as i32).to_be_bytes());
    b.extend(data);
}

/// Prefixes `body` with its length.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(body.len() + 4);
    f.extend((body.len() as i32).to_be_bytes());
    f.extend(body);
    f
}

/// The length of the frame starting `buf`, once its 4-byte prefix is there: `Ok(None)` while
/// fewer than 4 bytes, an error when outside 0..=[`MAX_FRAME`].
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len < 0 || len as usize > MAX_FRAME {
        return Err(WireError::new(
            "frame length",
            0,
            ErrorKind::OutOfRange {
                value: len.into(),
                min: 0,
                max: MAX_FRAME as i64,
            },
        ));
    }
    Ok(Some(len as usize))
}

/// A session request: protocol version 0, no previous session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    /// Sent by 3.4+ clients; 3.4 servers read it when present.
    pub read_only: bool,
}

impl ConnectRequest {
    /// A new session with `timeout_ms`.
    pub fn new_session(timeout_ms: i32) -> Self {
        ConnectRequest {
            last_zxid_seen: 0,
            timeout_ms,
            session_id: 0,
            password: vec![0; 16],
            read_only: false,
        }
    }

    /// The body (without the length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(45);
        b.extend(0i32.to_be_bytes()); // protocolVersion
        b.extend(self.last_zxid_seen.to_be_bytes());
        b.extend(self.timeout_ms.to_be_bytes());
        b.extend(self.session_id.to_be_bytes());
        put_buffer(&mut b, &self.password);
        b.push(u8::from(self.read_only));
        b
    }
}

/// The server's answer to a [`ConnectRequest`]; a session id of 0 means refused (expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    /// Absent from servers before 3.4.
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(self.protocol_version.to_be_bytes());
        b.extend(self.timeout_ms.to_be_bytes());
        b.extend(self.session_id.to_be_bytes());
        put_buffer(&mut b, &self.password);
        if let Some(r) = self.read_only {
            b.push(u8::from(r));
        }
        b
    }

    /// Decodes a frame body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(body);
        let protocol_version = c.i32("protocolVersion")?;
        let timeout_ms = c.i32("timeOut")?;
        let session_id = c.i64("sessionId")?;
        let at = c.pos();
        let len = c.i32("passwd length")?;
        if len < 0 || len as usize > MAX_PASSWORD {
            return Err(WireError::new(
                "passwd length",
                at,
                ErrorKind::OutOfRange {
                    value: len.into(),
                    min: 0,
                    max: MAX_PASSWORD as i64,
                },
            ));
        }
        let password = c.take("passwd", len as usize)?.to_vec();
        let read_only = match c.rest() {
            [] => None,
            [b] => Some(*b != 0),
            _ => {
                return Err(WireError::new(
                    "readOnly",
                    at + 4 + len as usize,
                    ErrorKind::Inconsistent("bytes after readOnly"),
                ));
            }
        };
        Ok(ConnectResponse {
            protocol_version,
            timeout_ms,
            session_id,
            password,
            read_only,
        })
    }
}

/// What precedes every request after the session's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub xid: i32,
    pub opcode: i32,
}

impl RequestHeader {
    pub fn encode_into(&self, b: &mut Vec<u8>) {
        b.extend(self.xid.to_be_bytes());
        b.extend(self.opcode.to_be_bytes());
    }
}

/// What precedes every reply: `err` is 0 or a `KeeperException.Code` (e.g. -110 node exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
}

impl ReplyHeader {
    /// The encoded size.
    pub const LEN: usize = 16;

    pub fn encode_into(&self, b: &mut Vec<u8>) {
        b.extend(self.xid.to_be_bytes());
        b.extend(self.zxid.to_be_bytes());
        b.extend(self.err.to_be_bytes());
    }

    /// Decodes the header at the start of a reply's body (the record after it is ignored).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(body);
        Ok(ReplyHeader {
            xid: c.i32("xid")?,
            zxid: c.i64("zxid")?,
            err: c.i32("err")?,
        })
    }
}

/// Creates a persistent znode readable and writable by anyone (`world:anyone`, all perms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    pub path: &'a str,
    pub data: &'a [u8],
}

impl CreateRequest<'_> {
    /// A whole frame: header and record.
    pub fn frame(&self, xid: i32) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.path.len() + self.data.len() + 64);
        RequestHeader {
            xid,
            opcode: opcode::CREATE,
        }
        .encode_into(&mut b);
        put_buffer(&mut b, self.path.as_bytes());
        put_buffer(&mut b, self.data);
        b.extend(1i32.to_be_bytes()); // one ACL
        b.extend(31i32.to_be_bytes()); // Perms.ALL
        put_buffer(&mut b, b"world");
        put_buffer(&mut b, b"anyone");
        b.extend(0i32.to_be_bytes()); // flags: persistent
        frame(&b)
    }
}

/// Sets a znode's data if its data version is `version`, or whatever it is (-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDataRequest<'a> {
    pub path: &'a str,
    pub data: &'a [u8],
    pub version: i32,
}

impl SetDataRequest<'_> {
    /// A whole frame: header and record.
    pub fn frame(&self, xid: i32) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.path.len() + self.data.len() + 32);
        RequestHeader {
            xid,
            opcode: opcode::SET_DATA,
        }
        .encode_into(&mut b);
        put_buffer(&mut b, self.path.as_bytes());
        put_buffer(&mut b, self.data);
        b.extend(self.version.to_be_bytes());
        frame(&b)
    }
}

/// A request of a path alone: getData without a watch (opcode [`opcode::GET_DATA`]), or sync
/// ([`opcode::SYNC`]), which carries no watch flag.
pub fn path_request_frame(xid: i32, op: i32, path: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(path.len() + 16);
    RequestHeader { xid, opcode: op }.encode_into(&mut b);
    put_buffer(&mut b, path.as_bytes());
    if op == opcode::GET_DATA {
        b.push(0); // watch: false
    }
    frame(&b)
}

/// The parts of a znode's jute `Stat` (68 bytes) a client checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub mzxid: i64,
    pub version: i32,
}

impl Stat {
    pub const LEN: usize = 68;

    fn decode(c: &mut Cursor<'_>) -> Result<Self, WireError> {
        let _czxid = c.i64("stat czxid")?;
        let mzxid = c.i64("stat mzxid")?;
        c.take("stat ctime, mtime", 16)?;
        let version = c.i32("stat version")?;
        c.take("stat cversion .. pzxid", 32)?;
        Ok(Stat { mzxid, version })
    }

    /// A setData reply's record, after its header.
    pub fn decode_reply(body: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(body);
        c.take("reply header", ReplyHeader::LEN)?;
        Stat::decode(&mut c)
    }
}

/// A getData reply's record, after its header: the data (bounded by the frame) and its Stat.
pub fn decode_get_data_reply(body: &[u8]) -> Result<(Option<Vec<u8>>, Stat), WireError> {
    let mut c = Cursor::new(body);
    c.take("reply header", ReplyHeader::LEN)?;
    let data = super::quorum::packet::get_buffer(&mut c, "data")?;
    Ok((data, Stat::decode(&mut c)?))
}

/// A request with no record (ping, closeSession).
pub fn header_only_frame(xid: i32, opcode: i32) -> Vec<u8> {
    let mut b = Vec::with_capacity(8);
    RequestHeader { xid, opcode }.encode_into(&mut b);
    frame(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_request_layout() {
        let b = ConnectRequest::new_session(30_000).encode();
        assert_eq!(b.len(), 4 + 8 + 4 + 8 + 4 + 16 + 1);
        assert_eq!(&b[12..16], &30_000i32.to_be_bytes());
        assert_eq!(&b[24..28], &16i32.to_be_bytes());
    }

    #[test]
    fn connect_response_round_trip_and_3_3_form() {
        let r = ConnectResponse {
            protocol_version: 0,
            timeout_ms: 4000,
            session_id: 0x1000_0000_0000_0001,
            password: vec![7; 16],
            read_only: Some(false),
        };
        assert_eq!(ConnectResponse::decode(&r.encode()).unwrap(), r);
        let old = ConnectResponse {
            read_only: None,
            ..r.clone()
        };
        assert_eq!(ConnectResponse::decode(&old.encode()).unwrap(), old);
        let e = ConnectResponse::decode(&r.encode()[..18]).unwrap_err();
        assert_eq!(e.field, "passwd length");
    }

    #[test]
    fn huge_password_rejected_before_allocation() {
        let mut b = vec![0u8; 16];
        b.extend(i32::MAX.to_be_bytes());
        let e = ConnectResponse::decode(&b).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::OutOfRange { .. }), "{e}");
    }

    #[test]
    fn reply_header_and_requests() {
        let h = ReplyHeader {
            xid: 3,
            zxid: 0x2_0000_0005,
            err: -110,
        };
        let mut b = Vec::new();
        h.encode_into(&mut b);
        b.extend([0u8; 68]); // a Stat, ignored
        assert_eq!(ReplyHeader::decode(&b).unwrap(), h);
        let f = SetDataRequest {
            path: "/a",
            data: b"xy",
            version: -1,
        }
        .frame(9);
        assert_eq!(frame_len(&f).unwrap(), Some(f.len() - 4));
        assert_eq!(&f[4..12], &[0, 0, 0, 9, 0, 0, 0, 5]);
        assert_eq!(&f[f.len() - 4..], &(-1i32).to_be_bytes());
        // A getData reply: header, data "xy", Stat with mzxid 0x105 and version 4.
        let mut g = Vec::new();
        h.encode_into(&mut g);
        put_buffer(&mut g, b"xy");
        let mut stat = vec![0u8; Stat::LEN];
        stat[8..16].copy_from_slice(&0x105i64.to_be_bytes());
        stat[32..36].copy_from_slice(&4i32.to_be_bytes());
        g.extend(&stat);
        let (data, st) = decode_get_data_reply(&g).unwrap();
        assert_eq!(data.as_deref(), Some(&b"xy"[..]));
        assert_eq!(
            st,
            Stat {
                mzxid: 0x105,
                version: 4
            }
        );
        assert!(decode_get_data_reply(&g[..g.len() - 1]).is_err());
        let c = CreateRequest {
            path: "/a",
            data: b"",
        }
        .frame(1);
        assert_eq!(&c[8..12], &1i32.to_be_bytes());
        assert_eq!(frame_len(&[0, 0]).unwrap(), None);
        assert!(frame_len(&(-1i32).to_be_bytes()).is_err());
        assert!(frame_len(&(MAX_FRAME as i32 + 1).to_be_bytes()).is_err());
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Arbitrary bytes never panic the decoders; what decodes re-encodes to the input.
            #[test]
            fn decoders_total(body in proptest::collection::vec(any::<u8>(), 0..96)) {
                if let Ok(r) = ConnectResponse::decode(&body) {
                    prop_assert_eq!(r.encode(), body.clone());
                }
                if let Ok(h) = ReplyHeader::decode(&body) {
                    let mut b = Vec::new();
                    h.encode_into(&mut b);
                    prop_assert_eq!(&b[..], &body[..ReplyHeader::LEN]);
                }
                let _ = decode_get_data_reply(&body);
                let _ = Stat::decode_reply(&body);
                if let Ok(Some(n)) = frame_len(&body) {
                    prop_assert!(n <= MAX_FRAME);
                }
            }

            #[test]
            fn connect_response_round_trips(
                pv in any::<i32>(), t in any::<i32>(), sid in any::<i64>(),
                pw in proptest::collection::vec(any::<u8>(), 0..=MAX_PASSWORD),
                ro in proptest::option::of(any::<bool>()),
            ) {
                let r = ConnectResponse { protocol_version: pv, timeout_ms: t, session_id: sid, password: pw, read_only: ro };
                prop_assert_eq!(ConnectResponse::decode(&r.encode()).unwrap(), r);
            }
        }
    }
}
