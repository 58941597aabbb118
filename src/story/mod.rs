//! The election's story, from decoded records: each server's decisions with their time and
//! evidence, elections and rejoins with their causes, and the sync on the quorum port.
//!
//! **Decisions as Java makes them.** Every server's part is replayed from the notifications it
//! receives (what is on the wire to it is what its receiver thread queues; loopback delivers in
//! well under a millisecond) and the ones it sends (its own vote, which it also delivers to
//! itself). FastLeaderElection decides in two ways, and so does this model:
//!
//! - its vote holds a quorum of the votes of its round: it then waits finalizeWait (200 ms)
//!   for a better vote; every notification that is not better restarts the wait, so it decides
//!   finalizeWait after the last notification it received once its vote had a quorum
//!   ([`Evidence::ConvergedVotes`]);
//! - a quorum has answered it FOLLOWING/LEADING for one leader, the leader itself LEADING: it
//!   follows at once ([`Evidence::QuorumReplies`]).
//!
//! A decided server's later FOLLOWING/LEADING answers confirm a decision but are not its time;
//! they are the evidence only when nothing else on the wire shows the decision
//! ([`Evidence::OwnNotification`], an upper bound).
//!
//! **Elections and rejoins.** Decisions for one leader in one round form an election; a
//! server that learns an established leader (from its LEADING answer) after that leader had
//! decided rejoins it, which is not an election. Observers' decisions are reported, but only
//! participants make a winner.
//!
//! **Cost.** Each record is handled in O(1) amortised (vote counts are kept per vote, pending
//! decisions in a heap), so the summary is linear in messages and servers.
//!
//! **Elections entered.** Each election a server entered with a vote of its own is a
//! [`Looking`]: when it began (its first dial, [`rules::Rule::DialBeforeVote`]), when it turned
//! LOOKING, its round, restart and config. A decision's `looking_since` is that beginning, and
//! `zkfle replay` runs these elections again.
//!
//! **Layout.** [`model`]: what the story says (rounds, decisions, causes, anomalies), read by
//! every view in [`crate::output`] and by replay; [`rules`]: what the wire cannot show, inferred by named
//! rules, each with its constant; `track`: each server's election followed through the
//! messages; `summarizer`: the [`Summarizer`] that builds a [`Summary`] from records.

pub mod model;
pub mod rules;
mod summarizer;
mod track;

pub use model::*;
pub use rules::FINALIZE_WAIT_SECS;
pub use summarizer::Summarizer;
