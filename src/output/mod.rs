//! The output layer: every format zkfle prints. The domain modules return data (records,
//! summaries, reports); this layer alone turns them into text and JSON, as ripgrep's printer
//! does.
//!
//! - [`json`]: the JSON objects of messages and records (`zkfle wire decode`, `zkfle decode
//!   --format jsonl`), written by one hand-made writer, and read back (`zkfle wire encode`).
//! - [`text`]: the text timeline of `zkfle decode`, in ZooKeeper's log words.
//! - [`summary`]: `--summary` as JSON and as text.
//! - [`merge`]: clock offsets and capture losses of per-host captures.
//! - [`probe`], [`replay`], [`doctor`], [`repro`]: those commands' reports; [`join`]: the
//!   events of `zkfle join`.
//! - [`html`], [`mermaid`], [`shiviz`], [`wireshark`]: the drawn and exported formats: the
//!   timeline page (`--format html`), Mermaid sequence diagrams, ShiViz logs, the generated
//!   Wireshark dissector (`zkfle wireshark-dissector`). They are built from the decode's
//!   [`Record`]s and the summary's JSON ([`crate::decode::summary::Summary::to_json`]), so
//!   fields the summary gains show up there without changes.
//!
//! The reports' `to_json`/`to_text` are inherent methods of the domain types, defined here.

pub mod doctor;
pub mod html;
pub mod join;
pub mod json;
pub mod merge;
pub mod mermaid;
pub mod probe;
pub mod replay;
pub mod repro;
pub mod shiviz;
pub mod summary;
pub mod text;
pub mod wireshark;

use std::fmt;

use crate::decode::{Body, Record};

/// At most this many records are held for one drawing: a page or diagram of more could not be
/// read by a browser anyway (about 330 bytes a record in the page).
pub const MAX_RECORDS: usize = 1_000_000;

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
                "more than {MAX_RECORDS} records: too many to draw; cut the capture first (editcap -A/-B, or tcpdump -r with a filter)"
            )));
        }
        self.records.push(r);
        Ok(())
    }
}

/// Who a message's endpoint is, for lanes and hosts: `sid N` when known, else the address.
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
