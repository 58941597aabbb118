//! The output layer for the drawn and exported formats of `zkfle decode`: the timeline page
//! (`--format html`), Mermaid sequence diagrams, ShiViz logs, and the generated Wireshark
//! dissector (`zkfle wireshark-dissector`).
//!
//! Each format is built from the decode's [`Record`]s and the summary's JSON
//! ([`crate::decode::summary::Summary::to_json`]), so fields the summary gains show up here
//! without changes. (The text and JSON-lines formats still live in `cli::decode_cmd` and
//! `json`; they are to move here so that one layer owns every format.)

pub mod html;
pub mod mermaid;
pub mod shiviz;
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
