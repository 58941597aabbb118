//! zkfle: Apache ZooKeeper's leader-election protocol (the election port, 3888), byte for byte.
//!
//! # Layout
//!
//! - [`wire`]: the pure codec. The only place that knows byte layouts: the connection's initial
//!   message, notifications of every historical size, framing and the config text they carry.
//!   No I/O, no clocks; every rejection is a typed error naming the field and byte offset.
//! - [`election`]: the FastLeaderElection state machine, sans-I/O: quorum verifiers, votes and
//!   the total order, the receiver's replies and `lookForLeader`, driven by calls and a clock
//!   value.
//! - [`capture`]: reading pcap/pcapng captures and reassembling their TCP streams, per direction.
//!   Knows packets and streams, not ZooKeeper.
//! - [`cli`]: the `zkfle` command line; `main.rs` only calls [`cli::run`].
pub mod capture;
pub mod cli;
pub mod election;
pub mod wire;
