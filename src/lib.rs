//! zkfle: Apache ZooKeeper's leader-election protocol (the election port, 3888), byte for byte.
//!
//! # Layout
//!
//! - [`wire`]: the pure codec. The only place that knows byte layouts: the connection's initial
//!   message, notifications of every historical size, framing and the config text they carry;
//!   the quorum port's packets and snapshots; txn and client-port records. No sockets, no
//!   clocks (its one blocking reader, [`wire::FrameReader`], reads any `std::io::Read` the
//!   caller owns); every rejection is a typed error naming the field and byte offset.
//! - [`election`]: the FastLeaderElection state machine, sans-I/O: quorum verifiers, votes and
//!   the total order, the receiver's replies and `lookForLeader`, driven by calls and a clock
//!   value; and the post-decision rules of a node without Zab ([`election::decided`]).
//! - [`reconfig`]: dynamic reconfiguration as Java's `processReconfig` applies a new config.
//! - [`capture`]: reading pcap/pcapng captures and reassembling their TCP streams, per direction.
//!   Knows packets and streams, not ZooKeeper.
//! - [`decode`]: a capture's election traffic as messages with their senders' and receivers'
//!   sids (who is who).
//! - [`story`]: the story of each election, pure: records in, one model out (decisions with
//!   their evidence, causes, syncs, anomalies, the rules of inference that decided what the
//!   wire does not show), which every view in [`output`] reads.
//! - [`net`]: the connection layer (QuorumCnxManager over tokio, its decisions sans-I/O) and the
//!   driver that runs an [`election::Election`] on it: `zkfle join`.
//! - [`storage`]: a follower's durable state in ZooKeeper's own on-disk formats (txn log,
//!   snapshot, epoch files).
//! - [`zab`]: Zab's learner (follower, observer) and leader as state machines, sans-I/O.
//! - [`replay`]: a capture's elections replayed into the native [`election::Election`] on a
//!   virtual clock, or into a live server.
//! - [`sasl`]: quorum SASL (DIGEST-MD5) for both ports, and the JAAS files that configure it.
//! - [`throttle`]: log lines that hostile or broken peers could repeat, one per window.
//! - [`output`]: every format zkfle prints: the JSON contract of messages and records, the
//!   text timeline, the summary, the reports of probe, replay, doctor and repro, the timeline
//!   page, Mermaid, ShiViz and the generated Wireshark dissector.
//! - [`repro`]: known election bugs triggered against a live server (`zkfle repro`), and the
//!   health checks of `zkfle doctor`.
//! - [`chaos`]: conformance campaigns: a client workload against a live ensemble recorded as a
//!   history, and the checks of what ZooKeeper promises on it (linearizable writes, sessions
//!   in order, no acknowledged write lost).
//! - [`zoocfg`]: reading a server's `zoo.cfg`.
//! - [`cli`]: the `zkfle` command line; `main.rs` only calls [`cli::run`].
//!
//! Every protocol machine ([`election::Election`], [`zab::Learner`], the Zab leader) is driven
//! the same way: the driver feeds it inputs with the time, then takes its work (`ready()`:
//! what to persist or adopt, then what to send) and its events (`poll_event()`), and calls it
//! again at the deadline it asks for (`next_deadline()`).
pub mod capture;
pub mod chaos;
pub mod cli;
pub mod decode;
pub mod election;
pub mod net;
pub mod output;
pub mod reconfig;
pub mod replay;
pub mod repro;
pub mod sasl;
pub mod storage;
pub mod story;
pub mod throttle;
pub mod wire;
pub mod zab;
pub mod zoocfg;
