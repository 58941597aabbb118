//! Typed errors for everything the codec rejects.
//!
//! Every rejection names the field that was being read and the byte offset where that field
//! starts, relative to the start of the buffer handed to the decoder (callers that decode a
//! message inside a larger stream add their own base offset with [`WireError::at`]).

use std::fmt;

/// A rejected message: which field, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} at byte {offset}: {kind}")]
pub struct WireError {
    /// The field being read, named as in the reference tables (`frame length`, `address`, ...).
    pub field: &'static str,
    /// Byte offset of that field.
    pub offset: u64,
    /// What was wrong with it.
    pub kind: ErrorKind,
}

impl WireError {
    pub(crate) fn new(field: &'static str, offset: usize, kind: ErrorKind) -> Self {
        WireError {
            field,
            offset: offset as u64,
            kind,
        }
    }

    /// The same error with `base` added to its offset, for a message found `base` bytes into a
    /// stream.
    pub fn at(mut self, base: u64) -> Self {
        self.offset += base;
        self
    }
}

/// Why a field was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ends before the field does.
    Truncated { needed: usize, available: usize },
    /// A length or count outside the range Java accepts.
    OutOfRange { value: i64, min: i64, max: i64 },
    /// A negative first long that is neither -65536 nor -65535.
    UnknownProtocolVersion(i64),
    /// Bytes that are not UTF-8 where text is required.
    NotUtf8,
    /// An address that Java's `ConfigUtils.getHostAndPort` or `InitialMessage.parse` rejects.
    BadAddress { text: String, reason: &'static str },
    /// A port that is not a decimal integer (Java: "Bad port number").
    BadPort(String),
    /// A port outside 0..=65535. Java does not catch this one: its election listener thread
    /// ends and the server refuses later election connections.
    PortOutOfRange(i64),
    /// Field combinations that would not decode back to the same message.
    Inconsistent(&'static str),
    /// A config line that ZooKeeper's dynamic-config parser rejects.
    BadConfigLine { line: String, reason: String },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} available")
            }
            ErrorKind::OutOfRange { value, min, max } => {
                write!(f, "{value} is outside {min}..={max}")
            }
            ErrorKind::UnknownProtocolVersion(v) => {
                write!(
                    f,
                    "unrecognized protocol version {v} (expected -65536 or -65535)"
                )
            }
            ErrorKind::NotUtf8 => write!(f, "not valid UTF-8"),
            ErrorKind::BadAddress { text, reason } => {
                write!(f, "badly formed address {text:?}: {reason}")
            }
            ErrorKind::BadPort(p) => write!(f, "bad port number {p:?}"),
            ErrorKind::PortOutOfRange(p) => write!(f, "port out of range: {p}"),
            ErrorKind::Inconsistent(why) => write!(f, "{why}"),
            ErrorKind::BadConfigLine { line, reason } => write!(f, "{reason} in {line:?}"),
        }
    }
}
