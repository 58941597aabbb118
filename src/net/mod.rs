//! The connection layer and the driver of `zkfle join`: a native FastLeaderElection
//! participant on real sockets.
//!
//! - [`core`]: QuorumCnxManager's decisions, sans-I/O: the tie-break (the connection initiated
//!   by the larger sid survives), the dial-back address, and the per-peer send queues of
//!   capacity 1 with the last message re-sent on every new connection (reference B).
//! - [`manager`]: [`Manager`], those decisions applied over tokio: listeners, bounded
//!   handshakes (timeout tickTime * syncLimit), asynchronous connects (5000 ms timeout), one
//!   reader and one writer task per connection, frames of at most 512 KiB. No election logic.
//! - [`dialect`]: which protocol generation to speak to each peer (3.5+ or 3.4), fixed or
//!   learned from what the peer sends.
//! - [`node`]: the driver task feeding [`crate::election::Election`] with received
//!   notifications and timer expiries and sending its outputs through the [`Manager`], plus the
//!   rules for a decided node without Zab (`docs/join.md`).
//! - [`lead`]: leading on the quorum port when the election makes zkfle the leader: a
//!   [`crate::zab::leader::Leader`] over tokio, then the hand-over (`docs/lead.md`).
//! - [`client_port`] and [`status`]: the member's client port, answering four-letter words
//!   from the state the node and its Zab sessions keep on a [`status::StatusBoard`].
//! - [`client`]: a small blocking ZooKeeper client (session, create, setData, pipelined;
//!   getData, conditional setData and sync).
//! - [`faults`]: the faults a chaos campaign asks the member to inject into itself
//!   (`--chaos-faults`).
//! - [`tls`] and [`sasl`]: quorum TLS around a connection, and quorum SASL at its start
//!   (docs/tls.md, docs/sasl.md).
//! - [`probe`]: asking a live server for its state and vote as a non-member (`zkfle probe`).

pub mod admin;
pub mod client;
pub mod client_port;
pub mod core;
pub mod deadline;
pub mod dialect;
pub mod faults;
pub mod follow;
pub mod http;
pub mod lead;
pub mod manager;
pub mod metrics;
pub mod node;
pub mod probe;
pub mod sasl;
pub mod status;
pub mod tls;

/// The log target of `zkfle join`'s state lines: its start and stop, each election's start
/// and decision, each sync and each end of following or leading, in Java's words. `join`
/// shows them (at INFO) when `RUST_LOG` is unset, with every warning; `RUST_LOG=info` shows
/// everything else too.
pub const STATE_LOG: &str = "zkfle::state";

pub use dialect::WireDialect;
pub use manager::{Manager, NetConfig, PeerLimits, Received};
pub use node::{NodeConfig, StateEvent, ZabConfig, run};
pub use tls::{QuorumStream, QuorumTls};
