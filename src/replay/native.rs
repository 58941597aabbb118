//! The native target: an [`Election`] standing in for SID on a virtual clock, fed the recorded
//! peers' notifications at their recorded times and SID's election starts at theirs. No
//! sockets, no sleeping: a replay of a minute-long capture takes milliseconds.

use crate::election::{Election, ElectionConfig};
use crate::wire::Notification;

use super::{Decided, Recording, Report, Sent};

enum Event<'a> {
    /// SID's election stops (it took a newer config): deliveries are dropped until the next
    /// start.
    Stop,
    Start(super::Start),
    Deliver(i64, &'a Notification),
}

/// Replays `rec` into a native participant and compares.
pub fn replay(rec: &Recording) -> Report {
    let mut events: Vec<(u64, usize, Event)> = Vec::new();
    // Starts sort before deliveries of the same millisecond.
    for s in &rec.starts {
        if let Some(at) = s.stopped_ms {
            events.push((at, 0, Event::Stop));
        }
        events.push((s.at_ms, 0, Event::Start(*s)));
    }
    for (i, t) in rec.inbound.iter().enumerate() {
        events.push((t.at_ms, i + 1, Event::Deliver(t.from, &t.notification)));
    }
    events.sort_by_key(|(at, seq, _)| (*at, *seq));

    let new_election = |s: &super::Start| {
        let quorum = s
            .config
            .and_then(|v| rec.configs.get(&v))
            .unwrap_or(&rec.quorum);
        let mut cfg = ElectionConfig::new(rec.sid, quorum.clone());
        cfg.role = rec.role;
        cfg.last_zxid = s.last_zxid;
        cfg.current_epoch = s.current_epoch;
        Election::new(cfg)
    };
    let mut election: Option<Election> = None;
    let mut stopped = false;
    let mut decided = Vec::new();
    let mut sent = Vec::new();
    let drain = |e: &mut Election, now: u64, decided: &mut Vec<Decided>, sent: &mut Vec<Sent>| {
        // Replay runs with reconfig disabled (ElectionConfig's default): no config to adopt.
        // A halt (a newer config with other members) needs nothing here: the election itself
        // ignores what is delivered until it restarts, and there are no connections.
        let ready = e.ready();
        sent.extend(ready.send.into_iter().map(|(to, notification)| Sent {
            at_ms: now,
            to,
            notification,
        }));
        while let Some(crate::election::Event::Decided { state, vote, lc }) = e.poll_event() {
            decided.push(Decided {
                state,
                leader: vote.leader,
                round: lc,
                at_ms: now,
            });
        }
    };
    // Timers that fall due before `until`.
    let run_timers =
        |e: &mut Election, until: u64, decided: &mut Vec<Decided>, sent: &mut Vec<Sent>| {
            while let Some(d) = e.next_deadline() {
                if d > until {
                    break;
                }
                e.on_timer(d, true);
                drain(e, d, decided, sent);
            }
        };
    for (at, _, ev) in events {
        if let Some(e) = election.as_mut() {
            run_timers(e, at, &mut decided, &mut sent);
        }
        match ev {
            Event::Stop => {
                election = None;
                stopped = true;
            }
            Event::Start(s) => {
                stopped = false;
                let e = match election.as_mut() {
                    // A process restart, or a reconfig (Java's election restarts under the new
                    // config, its logical clock at 0): a new election.
                    Some(e) if !s.restart && s.config.is_none() => {
                        e.set_log_state(s.last_zxid, s.current_epoch);
                        e
                    }
                    _ => election.insert(new_election(&s)),
                };
                e.start(at);
                drain(e, at, &mut decided, &mut sent);
            }
            Event::Deliver(_, _) if stopped => {}
            Event::Deliver(from, n) => {
                // Before SID's first election its process may not be up; Java queues what
                // arrives before lookForLeader, and so does Election.
                // A Recording always has a start (RecordingBuilder::finish refuses one without).
                let Some(first) = rec.starts.first() else {
                    break;
                };
                let e = election.get_or_insert_with(|| new_election(first));
                e.on_notification(at, from, n);
                drain(e, at, &mut decided, &mut sent);
            }
        }
    }
    if let Some(e) = election.as_mut() {
        run_timers(e, rec.end_ms, &mut decided, &mut sent);
    }
    Report::new(rec, "native", decided, &sent)
}
