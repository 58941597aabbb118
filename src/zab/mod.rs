//! Zab, the follower side, sans-I/O.
//!
//! [`Learner`] is the protocol a Java 3.8/3.9 leader expects from a follower on its quorum
//! port (reference `zab-learner-wire.md` §B-§D), as a state machine in the style of raft-rs:
//! the driver feeds it the leader's packets ([`Learner::on_packet`]), the end of a streamed
//! snapshot ([`Learner::on_snapshot_end`]) and timer expiries ([`Learner::on_timer`]) with the
//! time in milliseconds, and takes a [`Ready`]: first the [`Persist`] actions, which it must
//! carry out **and make durable** (fsync), then the packets to send, in order. That order is
//! the honesty rule: an ACK leaves only after the txns and epochs it vouches for are on disk.
//! The driver also stores the snapshot bytes that follow SNAP (they never enter the machine).

//!
//! [`leader::Leader`] is the other side, for when the election makes zkfle the leader: Zab's
//! discovery and synchronization from zkfle's own log, then the hand-over (docs/lead.md).

pub mod leader;
pub mod learner;

pub use learner::{
    DEFAULT_MAX_SYNC_BYTES, Event, Learner, LearnerConfig, MAX_EPOCH_JUMP, Persist, Phase, Ready,
    ReconfigState, SyncKind,
};
