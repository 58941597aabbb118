//! The codecs of the election port (3888) and the quorum port (2888): pure, no I/O, and the
//! only place in zkfle that knows byte layouts.
//!
//! - [`initial`]: the initial message a connection's initiator sends (legacy, -65536, -65535).
//! - [`notification`]: notifications of every historical size (28, 36, 40, 44+N bytes).
//! - [`frame`]: length-prefixed framing and the incremental [`StreamDecoder`].
//! - [`reader`]: [`FrameReader`], the one blocking reader of items over any `std::io::Read`
//!   (it only feeds a [`StreamDecoder`]; the socket and its time-outs stay the caller's).
//! - [`config`]: the config text notifications carry, typed, printed back as Java prints it.
//! - [`layout`]: every message form's fields as data, for generated tools (the Wireshark
//!   dissector); checked against the codecs.
//! - [`client`]: the client port's records (session, create, setData, reply headers).
//! - [`quorum`]: the quorum port (2888): Zab's packets ([`quorum`]'s `packet` part) and the
//!   snapshot a leader streams after SNAP (its `snapshot` part), with their stream decoder.
//! - [`quorum_auth`]: quorum SASL's `QuorumAuthPacket`, exchanged at the start of a
//!   connection on both ports when `quorum.auth.enableSasl=true`.
//! - [`txn`]: the records a txn log entry, a PROPOSAL and a snapshot file carry.
//! - [`addr`]: `host:port` election addresses as Java parses and writes them.
//! - [`resync`]: where election or quorum traffic starts in bytes that do not begin at a
//!   message (an unknown port, a capture joined mid-way, a gap), and what a cut frame holds.
//!
//! Limits are Java's: election frames of 1..=512 KiB, address text of 1..=2048 bytes, ports 0..=65535.
//! Decoders never allocate more than those limits and never panic; every rejection is a
//! [`WireError`] naming the field and byte offset.

pub mod addr;
pub mod client;
pub mod config;
mod cursor;
pub mod error;
pub mod frame;
pub mod initial;
pub mod layout;
pub mod notification;
pub mod quorum;
pub mod quorum_auth;
pub mod reader;
pub mod resync;
pub mod txn;

pub use addr::ElectionAddress;
pub use config::{ConfigLine, QuorumConfig, Role, ServerLine};
pub use error::{ErrorKind, WireError};
pub use frame::{Direction, StreamDecoder, StreamItem, encode_frame};
pub use initial::{InitialCache, InitialMessage, ProtocolVersion};
pub use notification::{JavaView, Notification, PartialNotification, ServerState};
pub use reader::{FrameReader, ReadError};
pub use resync::TlsRecord;
