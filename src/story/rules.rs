//! The rules of inference: what the wire cannot show, and how the story infers it.
//!
//! Every time window and threshold the story uses is a row of [`RULES`]: its value, why it
//! is that, and the field of the output it decides. The summarizer counts each rule when it
//! decides something ([`Fired`]), and `decode --summary --verbose` lists the rules that fired,
//! so a reader can tell an inferred time from a seen one. A new scenario adds a row here,
//! never a branch with a number of its own.

/// A rule of inference, named by what it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    FinalizeWait,
    CauseWindow,
    CloseAfterStart,
    CloseBurst,
    CloseBeforeSilence,
    RejoinGrace,
    QueueWindow,
    HeldVote,
    RefusedDials,
    AnswerReplaced,
    LeaderSilence,
    HandoverWindow,
    DelayedVote,
    LateSync,
    StartedTogether,
    LateFirstVote,
    ServingEarly,
    ServingLate,
    StaleReach,
    ResendBackoff,
    DialBeforeVote,
}

/// One rule: its value, and the output it leaves (a JSON path of the summary).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleRow {
    pub rule: Rule,
    /// The rule's identifier in `--verbose` and JSON.
    pub name: &'static str,
    /// Seconds, except [`Rule::ResendBackoff`] (a ratio of two gaps).
    pub value: f64,
    /// Where its decision shows in the summary's JSON.
    pub evidence: &'static str,
}

/// The rules, in [`Rule`]'s order. Why each value is what it is:
pub const RULES: [RuleRow; 21] = [
    // Java's finalizeWait (FastLeaderElection): once its vote has a quorum, a server waits
    // this long for a better vote, and every notification that is not better restarts it.
    row(
        Rule::FinalizeWait,
        "finalize_wait",
        crate::election::FINALIZE_WAIT_MS as f64 / 1000.0,
        "decisions[].evidence=converged_votes",
    ),
    // How far before an election's first LOOKING vote a closed connection of the old leader
    // counts as its cause: Java notices a closed quorum connection at once, a silent leader
    // only after syncLimit ticks (20 s at the defaults, plus the election's own start).
    row(
        Rule::CauseWindow,
        "cause_window",
        30.0,
        "rounds[].cause, rounds[].leader_lost",
    ),
    // The old leader's closes this long after the first LOOKING vote still count: a killed
    // process's sockets close in one burst, which a follower's vote can overtake by a few
    // hundred milliseconds on a loaded host.
    row(
        Rule::CloseAfterStart,
        "close_after_start",
        0.5,
        "rounds[].leader_lost",
    ),
    // A killed process closes all its connections within this long of each other: the loss
    // is dated from the first close of that last burst, not from older ones.
    row(Rule::CloseBurst, "close_burst", 1.0, "rounds[].leader_lost"),
    // A close this long before the old leader's last quorum packet still counts: its last
    // ping and its sockets' close cross on the wire; one earlier, followed by more pings,
    // was a stale connection closing while it led (a healed partition).
    row(
        Rule::CloseBeforeSilence,
        "close_before_silence",
        0.5,
        "rounds[].leader_lost",
    ),
    // A server that began looking this soon after the leader decided started with the
    // election (servers started together come up a few hundred milliseconds apart); later,
    // it rejoins.
    row(
        Rule::RejoinGrace,
        "rejoin_grace",
        1.0,
        "rounds[].kind=rejoin",
    ),
    // How long before a server's first vote a message it did not answer counts as waiting in
    // its queue (a server goes LOOKING just before its election begins).
    row(
        Rule::QueueWindow,
        "queue_window",
        0.5,
        "decisions[].looking_since",
    ),
    // A learner's first vote this long after its Zab session ended was held back (its
    // election began when the session ended); sooner, the vote's own time is the closer
    // measure (Java shuts the learner down, some milliseconds, before its election begins).
    row(
        Rule::HeldVote,
        "held_vote",
        0.5,
        "decisions[].looking_since",
    ),
    // Refused dials this long before a server's first vote make its `took` a lower bound:
    // a refused dial names no sid, and the dialler may be the server whose election began
    // before the capture shows it.
    row(
        Rule::RefusedDials,
        "refused_dials",
        2.0,
        "decisions[].took_at_least",
    ),
    // An unanswered message this soon before a decided server's first vote may have been
    // answered, the answer replaced in Java's one-message send queue by that vote.
    row(
        Rule::AnswerReplaced,
        "answer_replaced",
        0.02,
        "decisions[].evidence",
    ),
    // A leader that sent nothing on the quorum port for this long before an election began
    // had fallen silent: it pings every learner each half tick.
    row(
        Rule::LeaderSilence,
        "leader_silence",
        1.0,
        "rounds[].cause=leader_silent, rounds[].silence",
    ),
    // A learner that began its sync with the designated leader this long after the reconfig
    // that handed over to it took part in the handover (Java's learners dial it at once).
    row(
        Rule::HandoverWindow,
        "handover_window",
        10.0,
        "decisions[].evidence=reconfig",
    ),
    // A LOOKING vote of the decided round arriving this long after its sender decided was
    // delayed on the way (a vote queued just before deciding goes out milliseconds after).
    row(
        Rule::DelayedVote,
        "delayed_vote",
        1.0,
        "anomalies[].kind=delayed_votes",
    ),
    // A sync that began this soon before the learner's decision as estimated belongs to it:
    // a decision from its own later answer is an upper bound, and the learner dials the
    // leader at once.
    row(Rule::LateSync, "late_sync", 0.5, "decisions[].sync"),
    // A participant first heard this close to an election's start (before or after) came up
    // with it: most participants so make the cause servers_started.
    row(
        Rule::StartedTogether,
        "started_together",
        5.0,
        "rounds[].cause=servers_started",
    ),
    // An old leader whose first vote came this long after the election began had been
    // stopped and restarted (its followers look at once; a restarted JVM takes seconds).
    row(
        Rule::LateFirstVote,
        "late_first_vote",
        1.0,
        "rounds[].leader_fate=restarted",
    ),
    // NEWLEADER ACKs count for serving from this long before the leader's decision (its
    // decision is estimated; the ACKs are seen).
    row(Rule::ServingEarly, "serving_early", 0.5, "rounds[].serving"),
    // ... and up to this long past the next election's start (a sync that slow still
    // serves the round it began in).
    row(Rule::ServingLate, "serving_late", 60.0, "rounds[].serving"),
    // An election can replace a rejoin's leader until this long after its last decision:
    // a rejoin then is stale.
    row(Rule::StaleReach, "stale_reach", 1.0, "rounds[].stale"),
    // Java re-sends an unchanged vote when its poll times out, doubling the wait: gaps that
    // each grow by more than this factor are those timeouts.
    row(
        Rule::ResendBackoff,
        "resend_backoff",
        1.5,
        "anomalies[].kind=notification_timeouts",
    ),
    // A server's first dial this soon before its first vote opened its election's connections,
    // so its election (and `LEADER ELECTION TOOK`) began there: Java sends the first vote as
    // soon as a connection is up, and a larger sid that drops the dial dials back within
    // milliseconds (the fixtures' longest gap is 0.24 s). An older dial was for something else.
    row(
        Rule::DialBeforeVote,
        "dial_before_vote",
        1.0,
        "decisions[].looking_since",
    ),
];

const fn row(rule: Rule, name: &'static str, value: f64, evidence: &'static str) -> RuleRow {
    RuleRow {
        rule,
        name,
        value,
        evidence,
    }
}

impl Rule {
    /// Every rule, in table order.
    pub const ALL: [Rule; RULES.len()] = {
        let mut all = [Rule::FinalizeWait; RULES.len()];
        let mut i = 0;
        while i < RULES.len() {
            all[i] = RULES[i].rule;
            i += 1;
        }
        all
    };

    /// Its row of [`RULES`].
    pub const fn row(self) -> &'static RuleRow {
        &RULES[self as usize]
    }

    /// Its value: seconds, or a ratio for [`Rule::ResendBackoff`].
    pub const fn secs(self) -> f64 {
        self.row().value
    }

    pub const fn name(self) -> &'static str {
        self.row().name
    }
}

/// Java's finalizeWait, for the model's users.
pub const FINALIZE_WAIT_SECS: f64 = Rule::FinalizeWait.secs();

/// How often each rule decided something, in [`Rule`]'s order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fired([u64; RULES.len()]);

impl Fired {
    pub fn note(&mut self, rule: Rule) {
        self.0[rule as usize] += 1;
    }

    pub fn count(&self, rule: Rule) -> u64 {
        self.0[rule as usize]
    }

    /// The rules that fired, with their counts, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (Rule, u64)> + '_ {
        Rule::ALL
            .iter()
            .map(|r| (*r, self.count(*r)))
            .filter(|(_, n)| *n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_rule_order_with_distinct_names() {
        for (i, row) in RULES.iter().enumerate() {
            assert_eq!(row.rule as usize, i, "{row:?}");
            assert!(row.value > 0.0 && row.value.is_finite(), "{row:?}");
            assert!(!row.evidence.is_empty(), "{row:?}");
        }
        let names: std::collections::BTreeSet<_> = RULES.iter().map(|r| r.name).collect();
        assert_eq!(names.len(), RULES.len());
    }
}
