//! The summary of `zkfle decode --summary` as JSON (the contract documented in the README)
//! and as text for people: per election a header (cause, time without a leader, serving
//! again, winner), then its decisions and syncs in time order.

use serde_json::{Value, json};

use crate::output::printable;
use crate::story::rules::Rule;
use crate::story::{
    Anomaly, AnomalyKind, Cause, Decision, Evidence, RoundEnd, RoundKind, SilenceEvidence,
    StillLooking, Summary, SyncInfo,
};

fn sync_json(s: &SyncInfo) -> Value {
    json!({
        "mode": s.mode, "newleader": s.newleader, "uptodate": s.uptodate,
        "newleader_ack": s.newleader_ack, "started": s.started, "leader": s.leader,
    })
}

fn still_json(s: &StillLooking) -> Value {
    json!({
        "sid": s.sid,
        "since": s.since,
        "leader": s.vote.map(|v| v.leader),
        "election_epoch": s.vote.map(|v| v.round),
        "agreeing": s.agreeing,
        "needs": s.needs,
        "holds": s.holds.iter().map(|(k, v)| json!({"sid": k, "leader": v})).collect::<Vec<_>>(),
        "unconnected": s.unconnected,
        "dropped_by": s.dropped_by,
        "why": s.words(),
    })
}

impl Evidence {
    /// The evidence in words, for people.
    pub fn words(self) -> &'static str {
        match self {
            Evidence::OwnNotification => "its own later answer shows it (no later than this)",
            Evidence::QuorumReplies => "a quorum answered it FOLLOWING/LEADING",
            Evidence::ConvergedVotes => {
                "its vote had a quorum; finalizeWait after the last notification it got"
            }
            Evidence::NewRound => "it began a new round of its own afterwards",
            Evidence::Reconfig => {
                "a committed reconfig designated this leader: it left the old one (or began its sync)"
            }
        }
    }
}

impl StillLooking {
    /// Why it is still LOOKING, in one line.
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        match self.vote {
            Some(v) if v.leader != i64::MIN => parts.push(match self.needs {
                Some(needs) => format!(
                    "its vote (leader {}, round {:#x}) has {} of the {needs} votes it needs",
                    v.leader, v.round, self.agreeing
                ),
                None => format!(
                    "its vote (leader {}, round {:#x}) has {} votes, not a majority of the groups' weight (group./weight. config)",
                    v.leader, v.round, self.agreeing
                ),
            }),
            Some(_) => parts.push("it proposes no leader (a non-voter)".to_string()),
            None => parts.push("it sent no vote".to_string()),
        }
        if !self.holds.is_empty() {
            let h: Vec<String> = self
                .holds
                .iter()
                .map(|(s, l)| format!("{s}->{l}"))
                .collect();
            parts.push(format!("holds votes {}", h.join(", ")));
        }
        if !self.unconnected.is_empty() {
            let u: Vec<String> = self.unconnected.iter().map(i64::to_string).collect();
            parts.push(format!("no working connection to {}", u.join(", ")));
        }
        if !self.dropped_by.is_empty() {
            let u: Vec<String> = self.dropped_by.iter().map(i64::to_string).collect();
            parts.push(format!(
                "its dials were dropped by {} (sid tie-break)",
                u.join(", ")
            ));
        }
        parts.join("; ")
    }
}

/// A round's "no leader for ...; serving at ... (unavailable ...)".
fn outage(r: &crate::story::Round, rel: &dyn Fn(f64) -> String) -> String {
    let mut s = String::new();
    if let Some(x) = r.no_leader {
        s.push_str(&format!("; no leader for {x:.3}s"));
    }
    if let Some(t) = r.serving {
        s.push_str(&format!("; serving at {}", rel(t)));
        if let Some(u) = r.unavailable {
            s.push_str(&format!(" (unavailable {u:.3}s)"));
        }
    }
    s
}

impl Summary {
    /// The summary as one JSON object; times are seconds since the epoch.
    pub fn to_json(&self) -> Value {
        let rounds: Vec<Value> = self
            .rounds
            .iter()
            .map(|r| {
                json!({
                    "kind": match r.kind {
                        RoundKind::Election => "election",
                        RoundKind::Rejoin => "rejoin",
                        RoundKind::Handover => "handover",
                    },
                    "election_epoch": r.election_epoch,
                    "started": r.started,
                    "participants": r.participants,
                    "cause": (r.kind != RoundKind::Rejoin).then(|| r.cause.name()),
                    "leader_lost": r.leader_lost,
                    "old_leader": r.old_leader,
                    "leader_fate": r.fate.map(|f| f.name()),
                    "leader_resumed": r.leader_resumed,
                    "leader_back": r.leader_back,
                    "no_leader": r.no_leader,
                    "serving": r.serving,
                    "unavailable": r.unavailable,
                    "vote_changes": r.changes.iter().map(|c| json!({
                        "time": c.time, "sid": c.sid, "leader": c.vote.leader, "zxid": c.vote.zxid,
                        "election_epoch": c.vote.round, "peer_epoch": c.vote.peer_epoch,
                    })).collect::<Vec<_>>(),
                    "decisions": r.decisions.iter().map(|d| json!({
                        "sid": d.sid, "state": d.state.name(), "leader": d.leader,
                        "election_epoch": d.election_epoch, "time": d.time,
                        "evidence": d.evidence.name(), "looking_since": d.looking_since,
                        "took": d.took,
                        "took_at_least": d.took_at_least,
                        "sync": d.sync.as_ref().map(sync_json),
                    })).collect::<Vec<_>>(),
                    "winner": r.winner,
                    "stale": r.stale.as_ref().map(|st| json!({
                        "election_started": st.election_started,
                        "left_at": st.left_at,
                        "next_leader": st.next_leader,
                    })),
                    "duration": r.duration,
                    "settled": r.settled,
                    "end": r.end.name(),
                    "still_looking": r.still_looking.iter().map(still_json).collect::<Vec<_>>(),
                    "config_version": r.config_version,
                })
            })
            .collect();
        let anomalies: Vec<Value> = self
            .anomalies
            .iter()
            .map(|a| json!({"kind": a.kind.name(), "time": a.time, "message": a.words()}))
            .collect();
        json!({
            "type": "summary",
            "at_start": self.at_start.as_ref().map(|a| json!({
                "leader": a.leader, "since": a.since, "learners": a.learners, "epoch": a.epoch,
            })),
            "non_members": self.non_members.iter().map(|n| json!({
                "sid": n.sid, "notifications": n.notifications, "asked": n.asked,
                "first": n.first, "last": n.last,
            })).collect::<Vec<_>>(),
            "end": self.end,
            "shutdown": self.shutdown,
            "quorum_port": self.quorum_port,
            "sids_unknown": self.sids_unknown,
            "cut_votes": self.cut_votes,
            "cut_votes_lost": self.cut_votes_lost,
            "rounds": rounds,
            "states": self.states().iter().map(|st| json!({
                "sid": st.sid, "state": st.state.name(), "from": st.from, "to": st.to,
            })).collect::<Vec<_>>(),
            "anomalies": anomalies,
            "rules": self.rules.iter().map(|(r, n)| (r.name().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "configs": self.configs.iter().map(|c| json!({
                "time": c.time, "version": c.version, "voters": c.voters,
                "observers": c.observers, "added": c.added, "removed": c.removed,
            })).collect::<Vec<_>>(),
        })
    }

    /// The summary for people; times relative to `t0`. `verbose` adds every vote change.
    pub fn to_text(&self, t0: f64) -> String {
        self.text(t0, false)
    }

    /// The summary for people; `verbose` adds every vote change.
    pub fn text(&self, t0: f64, verbose: bool) -> String {
        self.text_stamped(&|t: f64| format!("+{:.3}s", t - t0), verbose)
    }

    /// The summary for people, each time written by `stamp` (relative, or a wall-clock time).
    pub fn text_stamped(&self, stamp: &dyn Fn(f64) -> String, verbose: bool) -> String {
        let mut s = String::new();
        let rel = stamp;
        if self.sids_unknown {
            s.push_str("sids unknown: most notifications are between servers the capture does not name (3.4 servers advertise no election addresses, ");
            if self.cut_votes + self.cut_votes_lost > 0 {
                s.push_str("a capture started after the connections opened misses the initial messages that do, and a capture cut by its snap length misses the configs that map addresses to sids");
            } else {
                s.push_str("and a capture started after the connections opened misses the initial messages that do");
            }
            s.push_str("); decisions and winners need --config zoo.cfg or --sid-map ADDR=SID\n");
        }
        if self.cut_votes > 0 {
            s.push_str(&format!(
                "the capture's snap length cut {} notification(s): their votes are read from the bytes captured (state, leader, zxid, round), their configs are unknown; capture whole packets with `tcpdump -s 0`\n",
                self.cut_votes
            ));
        }
        if self.cut_votes_lost > 0 {
            s.push_str(&format!(
                "the capture's snap length cut {} notification(s) before the end of their vote: they are not counted, and the elections they belong to cannot be told; capture whole packets with `tcpdump -s 0`\n",
                self.cut_votes_lost
            ));
        }
        if let Some(a) = &self.at_start {
            s.push_str(&format!(
                "the capture began on a running ensemble: at {} sid {} was leading{}{} (quorum connections open before the capture)\n",
                rel(a.since),
                a.leader,
                a.epoch.map_or(String::new(), |e| format!(" in epoch {e:#x}")),
                if a.learners.is_empty() {
                    String::new()
                } else {
                    format!(", followed by {}", join_sids(&a.learners))
                },
            ));
        }
        if !self.quorum_port && !self.rounds.is_empty() {
            s.push_str("the quorum port (2888) is not in this capture: sync and serving times are not in it\n");
        }
        for text in self.round_texts(stamp, verbose) {
            s.push_str(&text);
        }
        match self.shutdown {
            Some(t) => s.push_str(&format!(
                "the servers shut down: every election connection closed from {} on; the capture ends at {}\n",
                rel(t),
                rel(self.end)
            )),
            None if !self.rounds.is_empty() => {
                s.push_str(&format!("the capture ends at {}\n", rel(self.end)))
            }
            None => {}
        }
        // (One config is worth listing when it changed the members `--config` gave.)
        if self.configs.len() > 1
            || self
                .configs
                .iter()
                .any(|c| !c.added.is_empty() || !c.removed.is_empty())
        {
            s.push_str("membership (configs the notifications and NEWLEADER packets carried):\n");
            for c in &self.configs {
                let mut line = format!(
                    "  {}  config {:#x}: voters {}",
                    rel(c.time),
                    c.version,
                    join_sids(&c.voters)
                );
                if !c.observers.is_empty() {
                    line.push_str(&format!("; observers {}", join_sids(&c.observers)));
                }
                if !c.added.is_empty() {
                    line.push_str(&format!("; added {}", join_sids(&c.added)));
                }
                if !c.removed.is_empty() {
                    line.push_str(&format!("; removed {}", join_sids(&c.removed)));
                }
                s.push_str(&line);
                s.push('\n');
            }
        }
        if !self.non_members.is_empty() {
            s.push_str("non-members asked for votes (probes, doctors: not elections):\n");
            for n in &self.non_members {
                s.push_str(&format!(
                    "  {}  sid {} asked {} ({} notification(s){})\n",
                    rel(n.first),
                    n.sid,
                    if n.asked.is_empty() {
                        "nobody".to_string()
                    } else {
                        join_sids(&n.asked)
                    },
                    n.notifications,
                    if n.last > n.first {
                        format!(", until {}", rel(n.last))
                    } else {
                        String::new()
                    },
                ));
            }
        }
        if !self.anomalies.is_empty() {
            s.push_str("anomalies:\n");
            for a in &self.anomalies {
                match a.time {
                    Some(t) => s.push_str(&format!("  {}  {}\n", rel(t), printable(&a.words()))),
                    None => s.push_str(&format!("  {}\n", printable(&a.words()))),
                }
            }
        }
        if verbose && self.rules.iter().next().is_some() {
            s.push_str(
                "rules that inferred what the wire does not show (docs/summary.md#rules):\n",
            );
            for (rule, n) in self.rules.iter() {
                s.push_str(&format!(
                    "  {:<20} {:>5}x  {}\n",
                    rule.name(),
                    n,
                    rule_words(rule)
                ));
            }
        }
        s
    }

    /// What the text summary says of each round, one block of lines per round, in the order
    /// of `rounds` (the page shows them beside its drawing).
    pub fn round_texts(&self, stamp: &dyn Fn(f64) -> String, verbose: bool) -> Vec<String> {
        let mut n = 0;
        self.rounds
            .iter()
            .map(|r| {
                if r.kind == RoundKind::Election {
                    n += 1;
                }
                self.round_text(r, n, stamp, verbose)
            })
            .collect()
    }

    /// One round's lines; `n` numbers it among the elections.
    fn round_text(
        &self,
        r: &crate::story::Round,
        n: usize,
        rel: &dyn Fn(f64) -> String,
        verbose: bool,
    ) -> String {
        let mut s = String::new();
        match r.kind {
            RoundKind::Handover => {
                let mut head = format!("handover at {}", rel(r.started));
                if r.election_epoch >= 0 {
                    head.push_str(&format!(", round {:#x}", r.election_epoch));
                }
                head.push_str(": a reconfig");
                if let Some(v) = r.config_version {
                    head.push_str(&format!(" (config {v:#x})"));
                }
                match r.old_leader {
                    Some(old) => head.push_str(&format!(" committed by leader {old}")),
                    None => head.push_str(" committed by the leader"),
                }
                let whom = r
                    .winner
                    .map_or("another".to_string(), |w| format!("sid {w}"));
                head.push_str(&format!(
                    " designated {whom} to lead, and the servers took it with no election"
                ));
                head.push_str(&outage(r, rel));
                if r.decisions.is_empty() {
                    head.push_str("; no sync with the new leader in the capture");
                }
                s.push_str(&head);
                s.push('\n');
            }
            RoundKind::Rejoin => {
                let d = &r.decisions[0];
                let took = format!(
                    "took {}{:.0} ms",
                    if d.took_at_least { "at least " } else { "" },
                    d.took * 1000.0
                );
                match &r.stale {
                    None => s.push_str(&format!(
                        "rejoin at {}: sid {} learned the established leader {} (round {:#x}), {took}\n",
                        rel(r.started),
                        d.sid,
                        d.leader,
                        d.election_epoch,
                    )),
                    Some(st) => s.push_str(&format!(
                        "stale rejoin at {}: sid {} took leader {} (round {:#x}), which the election begun at {} was replacing; {took}{}\n",
                        rel(r.started),
                        d.sid,
                        d.leader,
                        d.election_epoch,
                        rel(st.election_started),
                        match (st.left_at, st.next_leader) {
                            (Some(t), Some(l)) =>
                                format!("; it left it at {} for leader {l}", rel(t)),
                            _ => String::new(),
                        }
                    )),
                }
            }
            RoundKind::Election => {
                let cause = match r.cause {
                    Cause::ServersStarted => "servers starting".to_string(),
                    Cause::LeaderLost => match (r.leader_lost, r.leader_back) {
                        (Some(t), Some(back)) if r.leader_closed => format!(
                            "the leader's connections closed at {} (its process ended; restarted, it began looking again at {})",
                            rel(t),
                            rel(back)
                        ),
                        (Some(t), None) if r.leader_closed => format!(
                            "the leader's connections closed at {} (its process ended: killed or stopped)",
                            rel(t)
                        ),
                        _ => "the leader fell silent".to_string(),
                    },
                    Cause::QuorumLost => match r.leader_lost {
                        Some(t) if t < r.started => format!(
                            "the leader lost its quorum (the last follower it needed left at {})",
                            rel(t)
                        ),
                        _ => "the leader lost its quorum".to_string(),
                    },
                    Cause::LeaderFrozen => match r.leader_resumed {
                        Some(back) => format!(
                            "the leader froze (its process stopped: a GC pause, a stopped VM, SIGSTOP): its last quorum-port packet was at {}, its connections still open; it answered again at {}, still LEADING in the round it had led",
                            r.leader_lost.map_or("?".to_string(), rel),
                            rel(back),
                        ),
                        None => format!(
                            "the leader froze (its process stopped: a GC pause, a stopped VM, SIGSTOP): its last quorum-port packet was at {}, its connections still open, its host still acknowledging what its followers sent; it did not answer again in the capture",
                            r.leader_lost.map_or("?".to_string(), rel),
                        ),
                    },
                    Cause::Reconfig => "a reconfig".to_string(),
                    Cause::LeaderSilent => match (r.leader_lost, r.silence) {
                        (Some(t), Some(SilenceEvidence::Unreachable)) => format!(
                            "the leader's last quorum-port packet was at {}, its connections still open, what went to and from it unacknowledged (cut off from its followers)",
                            rel(t)
                        ),
                        (Some(t), Some(SilenceEvidence::AnsweredOutsider)) => format!(
                            "the leader's last quorum-port packet was at {}, its connections still open, while it answered a non-member (cut off from its followers)",
                            rel(t)
                        ),
                        (Some(t), _) => format!(
                            "the leader's last quorum-port packet was at {}, its connections still open (cut off or frozen: the capture holds nothing sent to it that TCP would tell by)",
                            rel(t)
                        ),
                        (None, _) => "the leader fell silent".to_string(),
                    },
                };
                let mut head = format!(
                    "election {n} at {}, round {:#x}: {cause}",
                    rel(r.started),
                    r.election_epoch
                );
                head.push_str(&outage(r, rel));
                match (r.winner, self.sids_unknown) {
                    (Some(w), _) => head.push_str(&format!("; winner sid {w}")),
                    (None, true) => head.push_str("; winner unknown (sids unknown)"),
                    (None, false) => {}
                }
                // Under which members the votes counted, when a reconfig is in the capture.
                if self.configs.len() > 1
                    && let Some(v) = r.config_version
                    && let Some(c) = self.configs.iter().find(|c| c.version == v)
                {
                    head.push_str(&format!(
                        "; counted under config {v:#x} (voters {})",
                        join_sids(&c.voters)
                    ));
                }
                s.push_str(&head);
                s.push('\n');
            }
        }
        let mut lines: Vec<(f64, String)> = Vec::new();
        if verbose {
            for c in &r.changes {
                let what = if c.vote.leader == i64::MIN {
                    format!(
                        "sid {} proposes no leader (a non-voter), round {:#x}",
                        c.sid, c.vote.round
                    )
                } else {
                    format!(
                        "sid {} votes leader {} (zxid {:#x}, round {:#x}, peerEpoch {:#x})",
                        c.sid, c.vote.leader, c.vote.zxid, c.vote.round, c.vote.peer_epoch
                    )
                };
                lines.push((c.time, what));
            }
        }
        for d in &r.decisions {
            lines.push((
                d.time,
                format!(
                    "sid {} {} (leader {}), took {}{:.0} ms  [{}]",
                    d.sid,
                    d.state.name(),
                    d.leader,
                    if d.took_at_least { "at least " } else { "" },
                    d.took * 1000.0,
                    d.evidence.words()
                ),
            ));
            if let Some(y) = &d.sync {
                let at = y.sync_time.unwrap_or(y.started);
                let mut l = match y.mode {
                    Some(mode) => format!("sid {} syncs with {} by {mode}", d.sid, d.leader),
                    None => format!(
                        "sid {} syncs with {} (its sync packet is not in the capture)",
                        d.sid, d.leader
                    ),
                };
                if let Some(t) = y.newleader {
                    l.push_str(&format!(", NEWLEADER {}", rel(t)));
                }
                if let Some(t) = y.uptodate {
                    l.push_str(&format!(", UPTODATE {}", rel(t)));
                } else {
                    l.push_str(", no UPTODATE in the capture");
                }
                lines.push((at, l));
            }
        }
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (t, l) in lines {
            s.push_str(&format!("  {}  {l}\n", rel(t)));
        }
        for w in &r.still_looking {
            s.push_str(&format!("  sid {} still LOOKING: {}\n", w.sid, w.words()));
        }
        match r.end {
            RoundEnd::CaptureEnd => s.push_str("  the capture ended during this election\n"),
            RoundEnd::Shutdown => s.push_str(
                "  the servers shut down during this election (their connections closed)\n",
            ),
            RoundEnd::Decided => {}
        }
        s
    }
}

impl Anomaly {
    /// The anomaly in one line, for people.
    pub fn words(&self) -> String {
        match &self.kind {
            AnomalyKind::AddressConflict(c) => super::problem::address_conflict_words(c),
            AnomalyKind::VoteForNonMember {
                from,
                leader,
                removed_by: Some(v),
            } => format!("sid {from} votes for {leader}, which config {v:#x} removed"),
            AnomalyKind::VoteForNonMember {
                from,
                leader,
                removed_by: None,
            } => format!("sid {from} votes for {leader}, which is not a member"),
            AnomalyKind::NotificationTimeouts {
                from,
                to,
                leader,
                round,
                gaps,
            } => {
                let g: Vec<String> = gaps.iter().map(|g| format!("{g:.1}")).collect();
                // An observer proposes Long.MIN_VALUE: no leader.
                let leader = match *leader {
                    i64::MIN => "no leader".to_string(),
                    l => format!("leader {l}"),
                };
                format!(
                    "sid {from} sent sid {to} the same vote ({leader}, round {round:#x}) {} times, gaps {} s: it timed out waiting for notifications",
                    gaps.len() + 1,
                    g.join(", ")
                )
            }
            AnomalyKind::TieBreakDrop { from, to, times } => format!(
                "sid {from} connected to larger sid {to} {times} time(s) and {to} dropped it (the sid tie-break: only connections initiated by the larger sid are kept; {to} dials back)"
            ),
            AnomalyKind::DelayedVotes {
                from,
                to,
                count,
                round,
                late,
            } => format!(
                "sid {from}'s {count} LOOKING vote(s) of round {round:#x} reached sid {to} {late:.3} s after sid {from} had decided in that round: queued while sid {to} was out of reach, delivered when it came back (not a new election)"
            ),
            AnomalyKind::SaslRefused {
                server,
                learner,
                user,
                times,
            } => {
                let name = |sid: &Option<i64>| {
                    sid.map_or("an unknown server".into(), |s| format!("sid {s}"))
                };
                let user = user
                    .as_ref()
                    .map_or(String::new(), |u| format!(" as user {u:?}"));
                format!(
                    "{} refused {}'s quorum SASL authentication{user} {times} time(s) (wrong password or unknown user: that learner cannot connect)",
                    name(server),
                    name(learner)
                )
            }
            AnomalyKind::Malformed { what, count } => format!("{count} x {what}"),
            AnomalyKind::SilentMember { sid } => {
                format!("member sid {sid} never sent a notification in the capture")
            }
            AnomalyKind::ResentLastMessage { count } => format!(
                "{count} LOOKING notification(s) from already-decided servers were their last message re-sent on a new connection (not new elections)"
            ),
            AnomalyKind::TooManyServers { count, bound } => format!(
                "{count} notifications involve servers beyond the first {bound} sids and were not followed"
            ),
            AnomalyKind::UnknownSender { count } => format!(
                "{count} notifications have an unknown sender or receiver (no initial message or address for it in the capture; give --config or --sid-map)"
            ),
        }
    }
}

/// What a rule of inference decided, for `--summary --verbose`.
fn rule_words(rule: Rule) -> String {
    let v = rule.secs();
    match rule {
        Rule::FinalizeWait => format!(
            "a decision dated finalizeWait ({v} s) after the last notification its server received"
        ),
        Rule::CauseWindow => format!(
            "the old leader's closed connections, up to {v} s before the election, taken as its cause"
        ),
        Rule::CloseAfterStart => format!(
            "the old leader's connections closing up to {v} s after the first LOOKING vote counted as its loss"
        ),
        Rule::CloseBurst => format!(
            "a killed leader's loss dated from the first close of its last burst (closes within {v} s)"
        ),
        Rule::CloseBeforeSilence => format!(
            "a close up to {v} s before the old leader's last quorum packet counted as its loss"
        ),
        Rule::RejoinGrace => format!(
            "a server that began looking over {v} s after the leader decided told as a rejoin"
        ),
        Rule::QueueWindow => format!(
            "a message up to {v} s before a server's first vote read as waiting in its queue"
        ),
        Rule::HeldVote => format!(
            "a learner's election dated from its Zab session's end (its first vote over {v} s later)"
        ),
        Rule::RefusedDials => {
            format!("'took' a lower bound: refused dials within {v} s before the first vote")
        }
        Rule::AnswerReplaced => {
            format!("an answer missing from the wire taken as replaced by a vote within {v} s")
        }
        Rule::LeaderSilence => {
            format!("a leader silent on the quorum port for over {v} s taken as the cause")
        }
        Rule::HandoverWindow => format!(
            "a learner syncing with the designated leader within {v} s of the reconfig counted in the handover"
        ),
        Rule::DelayedVote => {
            format!("a LOOKING vote arriving over {v} s after its sender decided told as delayed")
        }
        Rule::LateSync => {
            format!("a sync given to a decision estimated up to {v} s after it began")
        }
        Rule::StartedTogether => {
            format!("most participants first heard within {v} s of the start: servers started")
        }
        Rule::LateFirstVote => {
            format!("an old leader voting over {v} s after the election began told as restarted")
        }
        Rule::ServingEarly => format!(
            "NEWLEADER ACKs up to {v} s before the leader's estimated decision counted for serving"
        ),
        Rule::ServingLate => {
            format!("NEWLEADER ACKs up to {v} s past the next election's start counted for serving")
        }
        Rule::StaleReach => format!(
            "a rejoin within {v} s of an election's last decision for another leader told as stale"
        ),
        Rule::ResendBackoff => {
            format!("re-sent votes whose gaps grow by over {v}x told as notification timeouts")
        }
        Rule::DialBeforeVote => {
            format!("an election dated from its server's first dial, up to {v} s before its vote")
        }
    }
}

/// Sids as a comma-separated list.
fn join_sids(sids: &[i64]) -> String {
    sids.iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Decision {
    /// The JSON line of a decision as a live `--summary` learns it; `time` when it decided.
    pub fn live_json(&self) -> Value {
        json!({"type": "decision", "time": self.time, "sid": self.sid, "state": self.state.name(),
               "leader": self.leader, "election_epoch": self.election_epoch,
               "evidence": self.evidence.name()})
    }

    /// The text line of a decision as a live `--summary` learns it, after the time `stamp`.
    pub fn live_text(&self, stamp: &str) -> String {
        format!(
            "{stamp}  sid {} {} (leader {}, round {:#x})  [{}]",
            self.sid,
            self.state.name(),
            self.leader,
            self.election_epoch,
            self.evidence.words()
        )
    }
}
