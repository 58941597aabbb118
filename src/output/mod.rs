//! The output layer: every format zkfle prints. The domain modules return data (records,
//! summaries, reports); this layer alone turns them into text and JSON, as ripgrep's printer
//! does.
//!
//! - [`json`]: the JSON objects of messages and records (`zkfle wire decode`, `zkfle decode
//!   --format jsonl`), written by one hand-made writer, and read back (`zkfle wire encode`).
//! - [`text`]: the text timeline of `zkfle decode`, in ZooKeeper's log words.
//! - [`summary`]: `--summary` as JSON and as text.
//! - [`merge`]: clock offsets and capture losses of per-host captures.
//! - [`probe`], [`replay`], [`doctor`], [`repro`], [`chaos`]: those commands' reports; [`join`]: the
//!   events of `zkfle join`.
//! - [`html`], [`mermaid`], [`shiviz`], [`wireshark`]: the drawn and exported formats: the
//!   timeline page (`--format html`), Mermaid sequence diagrams, ShiViz logs, the generated
//!   Wireshark dissector (`zkfle wireshark-dissector`). They are built from the decode's
//!   [`Record`]s and the summary's JSON ([`crate::story::Summary::to_json`]), so
//!   fields the summary gains show up there without changes.
//!
//! The reports' `to_json`/`to_text` are inherent methods of the domain types, defined here.

pub mod admin;
pub mod chaos;
pub mod doctor;
pub mod fourlw;
pub mod html;
pub mod join;
pub mod json;
pub mod merge;
pub mod mermaid;
pub mod probe;
pub mod problem;
pub mod prometheus;
pub mod replay;
pub mod repro;
pub mod server_metrics;
pub mod shiviz;
pub mod summary;
pub mod text;
pub mod wireshark;

pub use problem::problem_words;

use std::fmt;
use std::net::SocketAddr;

use crate::capture::ConnId;
use crate::decode::{Body, Record};

/// At most this many records are held for one drawing: a page or diagram of more could not be
/// read by a browser anyway (about 330 bytes a record in the page, 66 MB at the bound), and
/// holding them takes about 600 bytes each (120 MB at the bound; the whole capture's elections
/// are a few thousand records).
pub const MAX_RECORDS: usize = 200_000;

/// An output that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputError(pub String);

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutputError {}

/// Records kept for a drawing, bounded by [`MAX_RECORDS`].
#[derive(Debug, Default)]
pub struct Collected {
    pub records: Vec<Record>,
}

impl Collected {
    /// Keeps a record; fails once [`MAX_RECORDS`] are held.
    pub fn add(&mut self, r: Record) -> Result<(), OutputError> {
        if self.records.len() >= MAX_RECORDS {
            return Err(OutputError(format!(
                "more than {MAX_RECORDS} records: too many to draw; draw a part with --since/--until or --sid, or cut the capture first (editcap -A/-B)"
            )));
        }
        self.records.push(r);
        Ok(())
    }
}

/// The text of the address pairs of recent connections (for the JSON lines, with the sids and
/// the connection beside them): each connection's records share the text of its two
/// directions, so a pair's text is mostly made once a connection and direction, not once a
/// record. A table indexed by connection id and direction (a connection reaches its slot at
/// once; records of the connections open at a time seldom share one) rather than a short list
/// searched in order: a capture interleaves the records of tens of connections.
#[derive(Debug)]
pub struct AddrPairs {
    slots: Vec<AddrPair>,
}

#[derive(Debug, Default)]
struct AddrPair {
    conn: Option<ConnId>,
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    sids: (Option<i64>, Option<i64>),
    text: Vec<u8>,
    /// Whether `text` was made for this slot's key (a fresh slot holds nothing).
    made: bool,
}

/// Slots of [`AddrPairs`] (a power of two).
const ADDR_PAIR_SLOTS: usize = 256;

impl Default for AddrPairs {
    fn default() -> Self {
        AddrPairs {
            slots: std::iter::repeat_with(AddrPair::default)
                .take(ADDR_PAIR_SLOTS)
                .collect(),
        }
    }
}

impl AddrPairs {
    /// The text of `src` and `dst` on connection `conn`, and of the sender's and receiver's
    /// `sids` for a writer that puts them beside (others pass `(None, None)`); `make` writes
    /// it (into an empty buffer) when not kept.
    pub fn text(
        &mut self,
        conn: Option<ConnId>,
        src: Option<SocketAddr>,
        dst: Option<SocketAddr>,
        sids: (Option<i64>, Option<i64>),
        make: impl FnOnce(&mut Vec<u8>),
    ) -> &[u8] {
        // A connection's two directions get neighbouring slots: the side with the lower port
        // first.
        let port = |a: Option<SocketAddr>| a.map_or(0, |a| a.port());
        let dir = usize::from(port(src) < port(dst));
        let id = conn.map_or(0, |c| c.0 as usize);
        let slot = &mut self.slots[(id.wrapping_mul(2) + dir) & (ADDR_PAIR_SLOTS - 1)];
        if !(slot.made
            && slot.conn == conn
            && slot.src == src
            && slot.dst == dst
            && slot.sids == sids)
        {
            slot.text.clear();
            make(&mut slot.text);
            (slot.conn, slot.src, slot.dst, slot.sids, slot.made) = (conn, src, dst, sids, true);
        }
        &slot.text
    }
}

/// The decimal text of each octet followed by a dot, padded to four bytes, and its length.
const OCTET_TEXT: [[u8; 5]; 256] = {
    let mut table = [[0u8; 5]; 256];
    let mut o = 0;
    while o < 256 {
        let v = o as u8;
        table[o] = if v >= 100 {
            [b'0' + v / 100, b'0' + v / 10 % 10, b'0' + v % 10, b'.', 4]
        } else if v >= 10 {
            [b'0' + v / 10, b'0' + v % 10, b'.', 0, 3]
        } else {
            [b'0' + v, b'.', 0, 0, 2]
        };
        o += 1;
    }
    table
};

/// Appends a socket address as `Display` writes it (`10.0.0.1:3888`, `[::1]:3888`). IPv4 is
/// composed without the formatting machinery: a decode writes millions, most of them once (a
/// new connection has a new port).
/// `quoted` puts it between double quotes (for JSON; its text never needs escaping).
pub fn write_addr(out: &mut Vec<u8>, addr: SocketAddr, quoted: bool) {
    match addr {
        SocketAddr::V4(v4) => {
            // Composed in a buffer of the longest form, `"255.255.255.255:65535"`, and appended
            // at once: a push per character checks the capacity every time.
            let mut text = [0u8; 23];
            let mut n = usize::from(quoted);
            text[0] = b'"';
            // Each octet's digits and the dot after it, from a table: four bytes written at
            // once, and the text's length advanced over.
            for o in v4.ip().octets() {
                let [a, b, c, d, len] = OCTET_TEXT[usize::from(o)];
                text[n..n + 4].copy_from_slice(&[a, b, c, d]);
                n += usize::from(len);
            }
            // The last dot is the port's colon.
            text[n - 1] = b':';
            let mut port = itoa::Buffer::new();
            let digits = port.format(v4.port()).as_bytes();
            text[n..n + digits.len()].copy_from_slice(digits);
            n += digits.len();
            if quoted {
                text[n] = b'"';
                n += 1;
            }
            out.extend_from_slice(&text[..n]);
        }
        a => {
            use std::io::Write as _;
            // Writing to a Vec cannot fail.
            let _ = match quoted {
                true => write!(out, "\"{a}\""),
                false => write!(out, "{a}"),
            };
        }
    }
}

/// Appends `v` as Rust's `{:#x}` writes it: `0x` and the hex digits without leading zeros.
/// (Signed values are given as their two's-complement bits, as `{:#x}` shows them.)
pub fn write_hex(out: &mut Vec<u8>, v: u64) {
    let mut text = [0u8; 18];
    let mut at = text.len();
    let mut rest = v;
    loop {
        at -= 1;
        text[at] = b"0123456789abcdef"[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    at -= 2;
    text[at..at + 2].copy_from_slice(b"0x");
    out.extend_from_slice(&text[at..]);
}

/// Whether a character must not reach a terminal as it is: a control character (a newline
/// would split a record's line, an escape drive the terminal) or a bidirectional override
/// (which reorders what is shown).
fn unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends text that may hold a peer's bytes (an advertised address, a SASL user, a message
/// quoting them) for a reader's terminal: characters [`unprintable`] there are written as
/// Rust escapes (`\n`, `\u{1b}`), everything else as it is.
pub fn write_printable(out: &mut Vec<u8>, text: &str) {
    if !text.chars().any(unprintable) {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if unprintable(c) {
            out.extend(c.escape_default().map(|e| e as u8));
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// [`write_printable`] into a `String`.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(unprintable) {
        return text.into();
    }
    let mut out = Vec::with_capacity(text.len() + 8);
    write_printable(&mut out, text);
    String::from_utf8(out)
        .expect("escapes and whole characters are UTF-8")
        .into()
}

/// Who a message's endpoint is, for lanes and hosts: `sid N` when known, else the address.
/// A vote's leader as the views write it: an observer proposes Long.MIN_VALUE, "none".
pub fn leader_text(leader: i64) -> String {
    match leader {
        i64::MIN => "none".to_string(),
        l => l.to_string(),
    }
}

pub fn endpoint_name(sid: Option<i64>, addr: Option<std::net::SocketAddr>) -> String {
    match (sid, addr) {
        (Some(s), _) => format!("sid {s}"),
        (None, Some(a)) => a.to_string(),
        (None, None) => "unknown".to_string(),
    }
}

/// Whether a record is a message (an initial message or a notification), not a problem.
pub fn is_message(r: &Record) -> bool {
    matches!(r.body, Body::Initial(_) | Body::Notification(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer's text cannot break a line or reach the terminal as control codes; printable
    /// text, UTF-8 included, is written as it is.
    #[test]
    fn printable_text_escapes_what_a_terminal_would_act_on() {
        assert_eq!(printable("127.0.0.2:3888"), "127.0.0.2:3888");
        assert_eq!(printable("höst:3888"), "höst:3888");
        assert_eq!(
            printable("ev\nil\u{1b}[31m\u{7}\u{85}\u{202e}:3888\t"),
            "ev\\nil\\u{1b}[31m\\u{7}\\u{85}\\u{202e}:3888\\t"
        );
    }

    proptest::proptest! {
        #[test]
        fn hex_is_written_as_format_writes_it(v in proptest::prelude::any::<i64>(), w in proptest::prelude::any::<i32>()) {
            let mut out = Vec::new();
            write_hex(&mut out, v as u64);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), format!("{v:#x}"));
            let mut out = Vec::new();
            write_hex(&mut out, u64::from(w as u32));
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), format!("{w:#x}"));
        }

        #[test]
        fn every_ipv4_address_is_written_as_display_does(ip in proptest::prelude::any::<u32>(), port in proptest::prelude::any::<u16>()) {
            let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::from_bits(ip), port));
            let mut out = Vec::new();
            write_addr(&mut out, addr, false);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), addr.to_string());
            let mut quoted = b"x".to_vec();
            write_addr(&mut quoted, addr, true);
            proptest::prop_assert_eq!(String::from_utf8(quoted).unwrap(), format!("x\"{addr}\""));
        }
    }

    #[test]
    fn zero_and_extremes_in_hex() {
        for (v, text) in [(0, "0x0"), (u64::MAX, "0xffffffffffffffff"), (0x10, "0x10")] {
            let mut out = Vec::new();
            write_hex(&mut out, v);
            assert_eq!(out, text.as_bytes());
        }
    }
}
