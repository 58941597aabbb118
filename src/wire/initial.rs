//! The connection's initial message: what the initiator of an election connection sends once,
//! before any frame. Three forms (reference A.1):
//!
//! | form | bytes |
//! |---|---|
//! | legacy (3.4.x) | `i64 sid` (>= 0) |
//! | V1, -65536 | `i64 -65536, i64 sid, i32 len, len bytes "host:port"` |
//! | V2, -65535 | as V1, addresses joined by `\|` |

use std::sync::Arc;

use super::addr::{ElectionAddress, java_split};
use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};

/// `PROTOCOL_VERSION_V1`: one election address.
pub const PROTOCOL_VERSION_V1: i64 = -65536;
/// `PROTOCOL_VERSION_V2`: all election addresses, joined by `|` (multi-address enabled).
pub const PROTOCOL_VERSION_V2: i64 = -65535;
/// Java's `maxBuffer`: the address text may be 1..=2048 bytes.
pub const MAX_ADDRESS_BYTES: usize = 2048;
/// The fixed header of a V1/V2 message: version, sid, length.
pub const VERSIONED_HEADER_BYTES: usize = 20;
/// `QuorumPeer.OBSERVER_ID`: the sid 3.3-era observers sent; Java remaps it.
pub const OBSERVER_ID: i64 = i64::MAX;

/// Which of the three forms a message uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// The sid alone (all 3.4.x senders).
    Legacy,
    /// -65536: one address.
    V1,
    /// -65535: addresses joined by `|`.
    V2,
}

impl ProtocolVersion {
    /// The value on the wire, `None` for legacy.
    pub fn code(self) -> Option<i64> {
        match self {
            ProtocolVersion::Legacy => None,
            ProtocolVersion::V1 => Some(PROTOCOL_VERSION_V1),
            ProtocolVersion::V2 => Some(PROTOCOL_VERSION_V2),
        }
    }

    /// The form for a wire value; `None` for an unknown negative one (legacy is any sid >= 0).
    pub fn from_code(code: Option<i64>) -> Option<Self> {
        match code {
            None => Some(ProtocolVersion::Legacy),
            Some(PROTOCOL_VERSION_V1) => Some(ProtocolVersion::V1),
            Some(PROTOCOL_VERSION_V2) => Some(ProtocolVersion::V2),
            Some(_) => None,
        }
    }
}

/// A decoded initial message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialMessage {
    /// Which form was sent.
    pub protocol: ProtocolVersion,
    /// The initiator's server id.
    pub sid: i64,
    /// The address text exactly as sent (empty for legacy). Kept because Java's split drops
    /// trailing empty elements, so `addresses` alone cannot always re-create the bytes.
    pub address_text: String,
    /// The `|`-separated elements, parsed; wildcard hosts included (see
    /// [`ElectionAddress::is_wildcard`]: Java drops them from its dial-back list).
    pub addresses: Vec<ElectionAddress>,
}

/// Result of looking at the start of a stream for an initial message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A whole message of this many bytes is there.
    Complete(usize),
    /// At least this many bytes in total are needed to know.
    NeedAtLeast(usize),
}

/// The initial messages decoded last, by their bytes. Each member sends the same initial
/// message on every connection it dials, so a capture of an ensemble that keeps reconnecting
/// holds a few messages many times: the decoded message is shared (an `Arc`), not decoded, nor
/// copied with its strings, again. Bounded: [`INITIAL_CACHE_ENTRIES`] messages of at most
/// [`INITIAL_CACHE_BYTES`] bytes.
#[derive(Debug, Default)]
pub struct InitialCache {
    entries: Vec<(Vec<u8>, Arc<InitialMessage>)>,
    /// The entry replaced next once the cache is full.
    next: usize,
}

/// How many messages an [`InitialCache`] keeps.
pub const INITIAL_CACHE_ENTRIES: usize = 16;
/// The largest message an [`InitialCache`] keeps (an ensemble's are a few tens of bytes).
pub const INITIAL_CACHE_BYTES: usize = 512;

impl InitialCache {
    /// [`InitialMessage::decode`], from the cache when these bytes were decoded before.
    pub fn decode(&mut self, raw: &[u8]) -> Result<Arc<InitialMessage>, WireError> {
        if let Some((_, message)) = self.entries.iter().find(|(r, _)| r == raw) {
            return Ok(Arc::clone(message));
        }
        let message = Arc::new(InitialMessage::decode(raw)?);
        if raw.len() <= INITIAL_CACHE_BYTES {
            let entry = (raw.to_vec(), Arc::clone(&message));
            if self.entries.len() < INITIAL_CACHE_ENTRIES {
                self.entries.push(entry);
            } else {
                self.entries[self.next] = entry;
                self.next = (self.next + 1) % INITIAL_CACHE_ENTRIES;
            }
        }
        Ok(message)
    }
}

impl InitialMessage {
    /// The sender's sid from the first bytes of an initial message cut short (a capture's snap
    /// length), when they reach it: the first 8 bytes for the legacy form, bytes 8-16 after a
    /// V1/V2 version.
    pub fn partial_sid(prefix: &[u8]) -> Option<i64> {
        let first = i64::from_be_bytes(prefix.get(..8)?.try_into().ok()?);
        if first >= 0 {
            return Some(first);
        }
        ProtocolVersion::from_code(Some(first))?;
        Some(i64::from_be_bytes(prefix.get(8..16)?.try_into().ok()?))
    }

    /// A legacy message.
    pub fn legacy(sid: i64) -> Self {
        InitialMessage {
            protocol: ProtocolVersion::Legacy,
            sid,
            address_text: String::new(),
            addresses: Vec::new(),
        }
    }

    /// A V1 or V2 message announcing `addresses` (V1 sends only the first, as Java does).
    pub fn versioned(protocol: ProtocolVersion, sid: i64, addresses: Vec<ElectionAddress>) -> Self {
        let addresses = match protocol {
            ProtocolVersion::Legacy => Vec::new(),
            ProtocolVersion::V1 => addresses.into_iter().take(1).collect(),
            ProtocolVersion::V2 => addresses,
        };
        let address_text = addresses
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join("|");
        InitialMessage {
            protocol,
            sid,
            address_text,
            addresses,
        }
    }

    /// A V1 or V2 message carrying `text` as its address text verbatim, whether or not it
    /// parses (a port out of range, non-ASCII, a wildcard): for scripting a misbehaving peer
    /// (`zkfle repro`). [`InitialMessage::encode`] writes it as given.
    pub fn with_address_text(protocol: ProtocolVersion, sid: i64, text: &str) -> Self {
        InitialMessage {
            protocol,
            sid,
            address_text: text.to_string(),
            addresses: Vec::new(),
        }
    }

    /// A V1 or V2 message carrying `text`, checked as a receiver checks it: the message
    /// [`InitialMessage::decode`] makes of the bytes a sender of `text` writes (the legacy form
    /// carries no text, so `text` is ignored for it).
    pub fn parse_versioned(
        protocol: ProtocolVersion,
        sid: i64,
        text: &str,
    ) -> Result<Self, WireError> {
        if protocol == ProtocolVersion::Legacy {
            return Ok(InitialMessage::legacy(sid));
        }
        let mut bytes = Vec::with_capacity(VERSIONED_HEADER_BYTES + text.len());
        bytes.extend_from_slice(&protocol.code().unwrap_or(0).to_be_bytes());
        bytes.extend_from_slice(&sid.to_be_bytes());
        bytes.extend_from_slice(&(text.len().min(i32::MAX as usize) as i32).to_be_bytes());
        bytes.extend_from_slice(text.as_bytes());
        InitialMessage::decode(&bytes)
    }

    /// How many bytes the message at the start of `buf` occupies, validating the header on the
    /// way (so a stream decoder never waits for more than [`MAX_ADDRESS_BYTES`] + 20 bytes).
    pub fn probe(buf: &[u8]) -> Result<Probe, WireError> {
        let mut c = Cursor::new(buf);
        let Ok(first) = c.i64("protocol version") else {
            return Ok(Probe::NeedAtLeast(8));
        };
        if first >= 0 {
            return Ok(Probe::Complete(8));
        }
        check_version(first)?;
        if c.remaining() < 12 {
            return Ok(Probe::NeedAtLeast(VERSIONED_HEADER_BYTES));
        }
        c.i64("sid")?;
        let len = check_len(c.i32("address length")?)?;
        let total = VERSIONED_HEADER_BYTES + len;
        Ok(if buf.len() >= total {
            Probe::Complete(total)
        } else {
            Probe::NeedAtLeast(total)
        })
    }

    /// Decodes a whole message; `buf` must hold exactly one (trailing bytes are an error, so that
    /// a caller cannot silently lose the start of the first frame).
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut c = Cursor::new(buf);
        let first = c.i64("protocol version")?;
        let msg = if first >= 0 {
            InitialMessage::legacy(first)
        } else {
            let protocol = check_version(first)?;
            let sid = c.i64("sid")?;
            let len = check_len(c.i32("address length")?)?;
            let text_at = c.pos();
            let raw = c.take("addresses", len)?;
            let text = std::str::from_utf8(raw)
                .map_err(|_| WireError::new("addresses", text_at, ErrorKind::NotUtf8))?;
            let mut addresses = Vec::new();
            let mut at = text_at;
            for element in java_split(text, '|') {
                addresses.push(ElectionAddress::parse(element, at)?);
                at += element.len() + 1;
            }
            InitialMessage {
                protocol,
                sid,
                address_text: text.to_string(),
                addresses,
            }
        };
        if c.remaining() > 0 {
            return Err(WireError::new(
                "end of initial message",
                c.pos(),
                ErrorKind::Inconsistent("bytes after the initial message"),
            ));
        }
        Ok(msg)
    }

    /// The exact bytes. Fails when the message could not decode back to itself (a negative
    /// legacy sid, address text outside 1..=2048 bytes).
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let len = self.encoded_len()?;
        match self.protocol {
            ProtocolVersion::Legacy => Ok(self.sid.to_be_bytes().to_vec()),
            ProtocolVersion::V1 | ProtocolVersion::V2 => {
                let text = self.address_text.as_bytes();
                let mut out = Vec::with_capacity(len);
                out.extend_from_slice(&self.protocol.code().unwrap_or(0).to_be_bytes());
                out.extend_from_slice(&self.sid.to_be_bytes());
                out.extend_from_slice(&(text.len() as i32).to_be_bytes());
                out.extend_from_slice(text);
                Ok(out)
            }
        }
    }

    /// How many bytes [`InitialMessage::encode`] gives, or its error, without encoding.
    pub fn encoded_len(&self) -> Result<usize, WireError> {
        match self.protocol {
            ProtocolVersion::Legacy if self.sid < 0 => Err(WireError::new(
                "sid",
                0,
                ErrorKind::Inconsistent("a legacy sid must be >= 0"),
            )),
            ProtocolVersion::Legacy => Ok(8),
            ProtocolVersion::V1 | ProtocolVersion::V2 => {
                let text = self.address_text.len();
                check_len(i32::try_from(text).unwrap_or(i32::MAX))?;
                Ok(VERSIONED_HEADER_BYTES + text)
            }
        }
    }

    /// The addresses Java would dial back: the parsed ones minus wildcards.
    pub fn dial_back_addresses(&self) -> impl Iterator<Item = &ElectionAddress> {
        self.addresses.iter().filter(|a| !a.is_wildcard())
    }
}

fn check_version(code: i64) -> Result<ProtocolVersion, WireError> {
    ProtocolVersion::from_code(Some(code)).ok_or_else(|| {
        WireError::new(
            "protocol version",
            0,
            ErrorKind::UnknownProtocolVersion(code),
        )
    })
}

fn check_len(len: i32) -> Result<usize, WireError> {
    if len <= 0 || len as usize > MAX_ADDRESS_BYTES {
        return Err(WireError::new(
            "address length",
            16,
            ErrorKind::OutOfRange {
                value: i64::from(len),
                min: 1,
                max: MAX_ADDRESS_BYTES as i64,
            },
        ));
    }
    Ok(len as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: i64, sid: i64, text: &[u8]) -> Vec<u8> {
        let mut b = version.to_be_bytes().to_vec();
        b.extend_from_slice(&sid.to_be_bytes());
        b.extend_from_slice(&(text.len() as i32).to_be_bytes());
        b.extend_from_slice(text);
        b
    }

    /// The cache gives what decoding gives, errors included, for repeated and new messages,
    /// and keeps at most its bound of them.
    #[test]
    fn the_cache_decodes_as_decode_does() {
        let mut cache = InitialCache::default();
        let mut inputs: Vec<Vec<u8>> = (0..40)
            .map(|i| v(-65536, i % 20, format!("10.0.0.{}:3888", i % 20).as_bytes()))
            .collect();
        inputs.push(v(-65536, 1, b"10.0.0.1:99999"));
        inputs.push(v(-65536, 1, b"10.0.0.1:99999"));
        inputs.push(v(-65535, 1, "x".repeat(INITIAL_CACHE_BYTES + 1).as_bytes()));
        inputs.push(5i64.to_be_bytes().to_vec());
        for raw in inputs.iter().chain(inputs.iter().rev()) {
            assert_eq!(
                cache.decode(raw).map(Arc::unwrap_or_clone),
                InitialMessage::decode(raw),
                "{raw:02x?}"
            );
            assert!(cache.entries.len() <= INITIAL_CACHE_ENTRIES);
            assert!(
                cache
                    .entries
                    .iter()
                    .all(|(r, _)| r.len() <= INITIAL_CACHE_BYTES)
            );
        }
    }

    #[test]
    fn an_address_text_that_does_not_parse_is_written_verbatim() {
        let m = InitialMessage::with_address_text(ProtocolVersion::V1, 7, "127.0.0.1:70000");
        let bytes = m.encode().unwrap();
        assert_eq!(bytes, v(PROTOCOL_VERSION_V1, 7, b"127.0.0.1:70000"));
        let e = InitialMessage::decode(&bytes).unwrap_err();
        assert!(e.to_string().contains("70000"), "{e}");
    }

    #[test]
    fn java_v1_bytes_from_the_reference() {
        let text = hex::encode("127.0.0.1:33888");
        let bytes = hex::decode(format!("ffffffffffff0000{:016x}0000000f{text}", 1)).unwrap();
        assert_eq!(bytes.len(), 35);
        let m = InitialMessage::decode(&bytes).unwrap();
        assert_eq!(m.protocol, ProtocolVersion::V1);
        assert_eq!(m.sid, 1);
        assert_eq!(m.addresses[0].text, "127.0.0.1:33888");
        assert_eq!(m.encode().unwrap(), bytes);
        assert_eq!(InitialMessage::probe(&bytes).unwrap(), Probe::Complete(35));
        assert_eq!(
            InitialMessage::probe(&bytes[..30]).unwrap(),
            Probe::NeedAtLeast(35)
        );
        assert_eq!(
            InitialMessage::probe(&bytes[..9]).unwrap(),
            Probe::NeedAtLeast(20)
        );
    }

    proptest::proptest! {
        /// The length is the encoding's, and fails where the encoding fails.
        #[test]
        fn encoded_len_is_the_encodings(
            protocol in 0usize..3,
            sid in proptest::prelude::any::<i64>(),
            text_len in 0usize..2100,
        ) {
            let protocol = [ProtocolVersion::Legacy, ProtocolVersion::V1, ProtocolVersion::V2][protocol];
            let m = InitialMessage::with_address_text(protocol, sid, &"1".repeat(text_len));
            proptest::prop_assert_eq!(m.encoded_len().ok(), m.encode().ok().map(|b| b.len()));
        }
    }

    #[test]
    fn legacy_and_v2() {
        let m = InitialMessage::decode(&3i64.to_be_bytes()).unwrap();
        assert_eq!(m, InitialMessage::legacy(3));
        let b = v(
            PROTOCOL_VERSION_V2,
            5,
            b"1.1.1.1:9999|2.2.2.2:8888|3.3.3.3:7777",
        );
        let m = InitialMessage::decode(&b).unwrap();
        assert_eq!(m.sid, 5);
        let ports: Vec<u16> = m.addresses.iter().map(|a| a.port).collect();
        assert_eq!(ports, [9999, 8888, 7777]);
        assert_eq!(m.encode().unwrap(), b);
        // A trailing '|' is dropped by Java's split but kept in the text, so bytes survive.
        let b = v(PROTOCOL_VERSION_V2, 5, b"1.1.1.1:9999|");
        let m = InitialMessage::decode(&b).unwrap();
        assert_eq!(m.addresses.len(), 1);
        assert_eq!(m.encode().unwrap(), b);
    }

    #[test]
    fn rejections_name_field_and_offset() {
        let e = InitialMessage::decode(&v(-65530, 5, b"10.0.0.2:3888")).unwrap_err();
        assert_eq!((e.field, e.offset), ("protocol version", 0));
        assert_eq!(e.kind, ErrorKind::UnknownProtocolVersion(-65530));
        for len in [0i32, -1, 2049, 1_048_576] {
            let mut b = v(PROTOCOL_VERSION_V1, 5, b"");
            b[16..20].copy_from_slice(&len.to_be_bytes());
            let e = InitialMessage::decode(&b).unwrap_err();
            assert_eq!((e.field, e.offset), ("address length", 16), "{len}");
            assert!(InitialMessage::probe(&b).is_err());
        }
        let e = InitialMessage::decode(&v(PROTOCOL_VERSION_V1, 5, b"what's going on here?"))
            .unwrap_err();
        assert_eq!((e.field, e.offset), ("address", 20));
        let e =
            InitialMessage::decode(&v(PROTOCOL_VERSION_V2, 5, b"1.1.1.1:9|2.2.2.2:x")).unwrap_err();
        assert_eq!((e.field, e.offset), ("address", 30));
        let e =
            InitialMessage::decode(&v(PROTOCOL_VERSION_V1, 5, &[0xff, b':', b'1'])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotUtf8);
        let mut b = v(PROTOCOL_VERSION_V1, 5, b"a:1");
        b.truncate(22);
        let e = InitialMessage::decode(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("addresses", 20));
        let e = InitialMessage::decode(&[0xff; 5]).unwrap_err();
        assert_eq!(e.field, "protocol version");
        assert!(InitialMessage::legacy(-1).encode().is_err());
    }

    #[test]
    fn v1_announces_only_the_first_address() {
        let a = ElectionAddress::parse("127.0.0.1:3888", 0).unwrap();
        let b = ElectionAddress::parse("127.0.1.1:3889", 0).unwrap();
        let m = InitialMessage::versioned(ProtocolVersion::V1, 2, vec![a.clone(), b.clone()]);
        assert_eq!(m.address_text, "127.0.0.1:3888");
        let m = InitialMessage::versioned(ProtocolVersion::V2, 2, vec![a, b]);
        assert_eq!(m.address_text, "127.0.0.1:3888|127.0.1.1:3889");
        assert_eq!(InitialMessage::decode(&m.encode().unwrap()).unwrap(), m);
    }
}
