//! The rules of inference: what the wire cannot show.

/// Java's finalizeWait: a server decides this long after the last notification it received
/// once its vote had a quorum.
pub const FINALIZE_WAIT_SECS: f64 = 0.2;

/// How far before an election's first LOOKING vote a closed connection of the old leader
/// counts as its cause (Java notices a closed quorum connection at once; a silent leader only
/// after syncLimit ticks).
pub(super) const CAUSE_WINDOW_SECS: f64 = 30.0;

/// A server that began looking this soon after the leader decided started with the election
/// (servers started together come up a few hundred milliseconds apart); later, it rejoins.
pub(super) const REJOIN_GRACE_SECS: f64 = 1.0;

/// How long before a server's first vote a message it did not answer counts as waiting in its
/// queue (a server goes LOOKING just before its election begins).
pub(super) const QUEUE_WINDOW_SECS: f64 = 0.5;

/// A learner's first vote this long after its Zab session ended was held back (its election
/// began when the session ended); sooner, the vote's own time is the closer measure (Java
/// shuts the learner down, some milliseconds, before its election begins).
pub(super) const HELD_VOTE_SECS: f64 = 0.5;

/// Refused dials this long before a server's first vote make its `took` a lower bound.
pub(super) const REFUSED_WINDOW_SECS: f64 = 2.0;

/// An unanswered message this soon before a decided server's first vote may have been
/// answered, the answer replaced in Java's one-message send queue by that vote.
pub(super) const ANSWER_REPLACED_SECS: f64 = 0.02;

/// A leader that sent nothing on the quorum port for this long before an election began had
/// fallen silent (it pings every learner each half tick).
pub(super) const SILENCE_SECS: f64 = 1.0;

/// A learner that began its sync with the designated leader this long after the reconfig
/// that handed over to it took part in the handover (Java's learners dial it at once).
pub(super) const HANDOVER_WINDOW_SECS: f64 = 10.0;

/// How long after its sender decided a LOOKING vote of the decided round must arrive to be
/// told as delayed (a vote queued just before deciding goes out milliseconds after).
pub(super) const DELAYED_VOTE_SECS: f64 = 1.0;
