//! The election state machine: ZooKeeper 3.8/3.9 FastLeaderElection (FLE), sans-I/O.
//!
//! No sockets, clocks, threads or tasks: a driver feeds [`Election`] notifications
//! ([`Election::on_notification`]) and timer expiries ([`Election::on_timer`]), with the time
//! as a number of milliseconds, then takes its work ([`Election::ready`]: a config to adopt,
//! messages to send) and its events ([`Election::poll_event`]: the decision), the idiom of
//! the Zab machines (raft-rs's `Ready`). The one timer is a deadline the driver asks for
//! ([`Election::next_deadline`]) after every call, as quinn-proto's `poll_timeout`; it is not
//! an output the driver must remember. The models are quinn-proto and raft-rs.
//!
//! - [`quorum`]: majority and hierarchical quorum verifiers built from a config.
//! - [`vote`]: votes, the total order predicate (TOP) and Java's vote equality.
//! - [`fle`]: the machine: Java's `WorkerReceiver` (reference C) and `lookForLeader` (D).
//! - [`decided`]: what a decided node does without Zab: the rules that send it back to
//!   LOOKING (its leader or a quorum looking in a newer round, no follower, leader gone).
//!
//! # Fidelity
//!
//! Java runs the receiver and `lookForLeader` on two threads joined by a queue. Here the
//! receiver's rules run when a notification arrives (immediate replies to non-voters, to
//! lagging LOOKING voters, and to LOOKING voters once decided), and the queue is kept
//! explicitly: what the receiver accepts goes to its tail and is processed at once, in order.
//! Our own broadcast loops back through the receiver into the tail of the same queue (QCM's
//! `toSend(mySid)`), so it is processed after everything that arrived before it. During
//! `finalizeWait` queued notifications that are not better are discarded (each restarting the
//! 200 ms wait) and a better one goes back to the tail and the main loop resumes, as in Java.
//! Notifications arriving before [`Election::start`] are queued and processed after the
//! start broadcast (Java's queue is not cleared when `lookForLeader` begins); the queue is
//! cleared on a decision.
//!
//! Timers: in the main loop the deadline is `notTimeout` after the last processed
//! notification (Java's `poll(notTimeout)` restarts each time it returns); `notTimeout`
//! starts at the minimum interval and doubles on every timeout up to the maximum, never reset
//! within one election. On a timeout the proposal is re-broadcast only when the driver says
//! `have_delivered` (QCM's `haveDelivered()`); otherwise nothing is sent and the driver should
//! reconnect (`connectAll()`).
//!
//! # Not modelled (deviations from Java)
//!
//! - Reconfiguration (docs/reconfig.md): with `reconfig_enabled`, a newer config in a
//!   notification while LOOKING is taken and, when the membership differs, the election
//!   restarts under it at once (Java restarts when its current poll returns). Without it the
//!   newer config is logged and ignored (Java restarts its election even then). The last seen
//!   (proposed, not yet committed) config is not consulted for voters or quorums (Java's
//!   `getCurrentAndNextConfigVoters`). A config whose parsing throws a `RuntimeException` in
//!   Java (which kills Java's receiver thread) is treated like any other parse error here:
//!   logged, message processed.
//! - QuorumOracleMaj (the two-voter oracle) and Zab's `reportLookingSid` on the leader.
//! - Hierarchical verifiers: a vote for a sid that has no weight makes Java's `getWeight`
//!   throw (restarting `lookForLeader`); here such a sid weighs 0 and never wins.
//! - Receive-queue capacity (Java drops the oldest of 100) and send-queue capacity 1 are the
//!   driver's concern.
//! - The decided [`Vote`] is Java's end vote: LOOKING state, version 0.

pub mod decided;
pub mod fle;
pub mod quorum;
pub mod tally;
pub mod vote;

#[cfg(test)]
mod scenario_test;
#[cfg(test)]
mod sim_test;

#[cfg(test)]
pub(crate) use fle::Output;
pub use fle::{Election, ElectionConfig, Event, FINALIZE_WAIT_MS, Network, NewConfig, Ready};
pub use quorum::{QuorumError, QuorumVerifier};
pub use tally::Tally;
pub use vote::{Proposal, Vote, beats, newer_own_proposal, total_order_predicate};

use crate::wire::{JavaView, Notification, ServerState};

/// The line Java 3.8 logs at INFO for every notification from a voter with a valid state
/// (`Notification: my state:LOOKING; n.sid:2, ...`). Numbers in hex are two's complement as
/// `Long.toHexString` prints them; the peer epoch and format version are as Java reads them
/// (`zxid >> 32` and 0 for 28 bytes, version 0 for 40 bytes); the config version is `0` when
/// there is no readable config.
pub fn java_log_line(my_state: ServerState, from: i64, n: &Notification) -> String {
    let (peer_epoch, version) = match n.java_view() {
        JavaView::Accepted {
            peer_epoch,
            version,
            ..
        } => (peer_epoch, version),
        JavaView::Dropped(_) => (n.effective_peer_epoch(), n.version.unwrap_or(0)),
    };
    let config_version = match n.version {
        Some(v) if v >= 2 => n
            .config_text()
            .and_then(|t| crate::wire::QuorumConfig::parse(&t).ok())
            .map(|c| format!("{:x}", c.version()))
            .unwrap_or_else(|| "0".into()),
        _ => "0".into(),
    };
    format!(
        "Notification: my state:{}; n.sid:{}, n.state:{}, n.leader:{}, n.round:0x{:x}, n.peerEpoch:0x{:x}, n.zxid:0x{:x}, message format version:0x{:x}, n.config version:0x{}",
        my_state.name(),
        from,
        n.state.name(),
        n.leader,
        n.election_epoch,
        peer_epoch,
        n.zxid,
        i64::from(version),
        config_version
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_line_matches_java() {
        let n = Notification::current(ServerState::Looking, 2, 0, 1, 0, b"version=0".to_vec());
        assert_eq!(
            java_log_line(ServerState::Looking, 2, &n),
            "Notification: my state:LOOKING; n.sid:2, n.state:LOOKING, n.leader:2, n.round:0x1, n.peerEpoch:0x0, n.zxid:0x0, message format version:0x2, n.config version:0x0"
        );
        // 28 bytes: peer epoch from the zxid (arithmetic shift), version 0; negative numbers
        // print as two's complement.
        let mut b = 0i32.to_be_bytes().to_vec();
        for v in [1i64, -0x5_0000_0000, -1] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        let n = Notification::decode(&b).unwrap();
        assert_eq!(
            java_log_line(ServerState::Following, 3, &n),
            "Notification: my state:FOLLOWING; n.sid:3, n.state:LOOKING, n.leader:1, n.round:0xffffffffffffffff, n.peerEpoch:0xfffffffffffffffb, n.zxid:0xfffffffb00000000, message format version:0x0, n.config version:0x0"
        );
        // A config with a hex version; an unreadable config reads as 0.
        let n = Notification::current(
            ServerState::Leading,
            1,
            0x1_0000_0002,
            0xa,
            1,
            b"server.1=a:1:2:participant\nversion=100000000".to_vec(),
        );
        assert!(java_log_line(ServerState::Looking, 1, &n).ends_with(
            "n.zxid:0x100000002, message format version:0x2, n.config version:0x100000000"
        ));
        let n = Notification::current(ServerState::Looking, 1, 0, 0, 0, b"my very".to_vec());
        assert!(java_log_line(ServerState::Looking, 1, &n).ends_with("n.config version:0x0"));
    }
}
