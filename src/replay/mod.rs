//! Replaying a recorded election from one server's point of view (`zkfle replay`).
//!
//! A [`Recording`] is what a capture tells about one recorded server SID: every notification the
//! other servers sent it, with its time; every notification SID sent; the moments SID entered a
//! new election ([`Start`]) with the initial vote it proposed there; and the decisions SID made
//! (from [`crate::story`], whose decisions are checked against the Java servers' own
//! logs by the fixture tests).
//!
//! The moments SID entered an election are the story's ([`crate::story::Looking`]): it began
//! at its first connection attempt since its previous notification, or (after a decision in
//! the same process) at the first LOOKING vote it left unanswered, whichever came before its
//! first vote; a round that went down is a new process, and a newer config its votes carry
//! starts the election again under that config (Java's logical clock back at 0), the one before
//! stopped when the config reached it. The initial vote (zxid, peer epoch) is the one SID
//! proposed for itself in that election, else the previous election's.
//!
//! Targets: [`native::replay`] runs an [`crate::election::Election`] on a virtual clock;
//! [`live::replay`] impersonates every other recorded peer towards a live server over TCP.
//! Both produce a [`Report`].

pub mod live;
pub mod native;

use std::collections::{BTreeMap, HashMap};

use crate::decode::{Body, Record};
use crate::election::QuorumVerifier;
use crate::story::Summarizer;
use crate::wire::{InitialMessage, Notification, QuorumConfig, Role, ServerState};

/// A notification in a recording: when (ms after the recording's first record), between whom.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    pub at_ms: u64,
    /// Its place in the capture among SID's messages both ways: what came first within one
    /// millisecond.
    pub order: u64,
    pub from: i64,
    pub to: i64,
    pub notification: Notification,
}

/// SID entering `lookForLeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub at_ms: u64,
    /// A new process (its round went down): a fresh election with logical clock 0.
    pub restart: bool,
    /// The initial vote's zxid and peer epoch.
    pub last_zxid: i64,
    pub current_epoch: i64,
    /// The round SID's first notification of this election carried.
    pub round: i64,
    /// The version of a newer config this election began under (a reconfig, which restarts
    /// Java's election with its logical clock at 0): its quorum is in
    /// [`Recording::configs`].
    pub config: Option<u64>,
    /// When the election before stopped, sent a newer config (Java drops what it receives
    /// from then until this one begins).
    pub stopped_ms: Option<u64>,
}

/// A decision: the state SID left LOOKING for and the leader it backs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub state: ServerState,
    pub leader: i64,
    pub round: i64,
    pub at_ms: u64,
}

/// What a capture tells about one server's elections.
#[derive(Debug, Clone)]
pub struct Recording {
    pub sid: i64,
    pub role: Role,
    pub quorum: QuorumVerifier,
    /// Capture time of the first record, seconds since the epoch.
    pub t0: f64,
    /// Notifications other servers sent SID, in capture order.
    pub inbound: Vec<Timed>,
    /// Notifications SID sent, in capture order.
    pub outbound: Vec<Timed>,
    pub starts: Vec<Start>,
    /// SID's decisions, in order.
    pub decisions: Vec<Decided>,
    /// When SID was last seen (its last message, sent or received, or decision).
    pub end_ms: u64,
    /// The initial message each peer opened its connections with (the first seen).
    pub peer_initials: BTreeMap<i64, InitialMessage>,
    /// The quorums of the newer configs elections began under, by version.
    pub configs: BTreeMap<u64, QuorumVerifier>,
}

/// Why a capture cannot be replayed as SID.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("sid {0} sent no notification in the capture")]
    Silent(i64),
    #[error(
        "no notification in the capture is known to be sid {0}'s: {1} are between servers whose sids it does not name (ZooKeeper 3.4 sends no election addresses); pass --config zoo.cfg"
    )]
    PeersUnnamed(i64, usize),
    #[error("no readable config in sid {0}'s notifications; pass --config")]
    NoConfig(i64),
    #[error("the config: {0}")]
    Quorum(String),
    #[error("sid {0} is not a member of the config")]
    NotMember(i64),
    #[error(
        "sid {sid} looked for no leader in the capture: it only answered as {state}, so its election was over before the capture began; nothing to replay"
    )]
    NeverLooking { sid: i64, state: &'static str },
}

fn ms(t: f64, t0: f64) -> u64 {
    ((t - t0).max(0.0) * 1000.0).round() as u64
}

/// Learns SID's recording record by record, in capture order, so that a capture is never held
/// whole: only SID's own notifications and the peers' first initial messages are kept.
pub struct RecordingBuilder {
    sid: i64,
    t0: Option<f64>,
    inbound: Vec<Timed>,
    outbound: Vec<Timed>,
    peer_initials: BTreeMap<i64, InitialMessage>,
    summarizer: Summarizer,
    last_seen: u64,
    /// Notifications with an end whose sid is unknown (any of them may be SID's).
    unnamed: usize,
}

impl RecordingBuilder {
    pub fn new(sid: i64) -> Self {
        RecordingBuilder {
            sid,
            t0: None,
            inbound: Vec::new(),
            outbound: Vec::new(),
            peer_initials: BTreeMap::new(),
            summarizer: Summarizer::new(HashMap::new()),
            last_seen: 0,
            unnamed: 0,
        }
    }

    /// The next decoded record.
    pub fn add(&mut self, r: &Record) {
        let sid = self.sid;
        self.summarizer.add(r);
        let t0 = *self.t0.get_or_insert(r.time.as_secs_f64());
        let at_ms = ms(r.time.as_secs_f64(), t0);
        match (&r.body, r.from_sid, r.to_sid) {
            (Body::Initial(m), Some(from), _) if from != sid => {
                self.peer_initials
                    .entry(from)
                    .or_insert_with(|| InitialMessage::clone(m));
            }
            (Body::Notification(n), Some(from), Some(to))
                if from != to && (to == sid || from == sid) =>
            {
                self.last_seen = at_ms;
                let t = Timed {
                    at_ms,
                    order: (self.inbound.len() + self.outbound.len()) as u64,
                    from,
                    to,
                    notification: n.clone(),
                };
                if to == sid {
                    self.inbound.push(t);
                } else {
                    self.outbound.push(t);
                }
            }
            (Body::Notification(_), None, _) | (Body::Notification(_), _, None) => {
                self.unnamed += 1;
            }
            _ => {}
        }
    }

    /// The recording. `config` overrides the config carried in SID's notifications.
    pub fn finish(self, config: Option<&QuorumConfig>) -> Result<Recording, RecordingError> {
        let RecordingBuilder {
            sid,
            t0,
            inbound,
            outbound,
            peer_initials,
            summarizer,
            last_seen,
            unnamed,
        } = self;
        let t0 = t0.unwrap_or(0.0);
        if outbound.is_empty() {
            return Err(if unnamed > 0 {
                RecordingError::PeersUnnamed(sid, unnamed)
            } else {
                RecordingError::Silent(sid)
            });
        }
        let config = match config {
            Some(c) => c.clone(),
            None => outbound
                .iter()
                .filter_map(|t| t.notification.config_text())
                .find_map(|text| QuorumConfig::parse(&text).ok())
                .ok_or(RecordingError::NoConfig(sid))?,
        };
        let quorum = QuorumVerifier::from_config(&config)
            .map_err(|e| RecordingError::Quorum(e.to_string()))?;
        let role = config
            .server(sid)
            .map(|s| s.role())
            .ok_or(RecordingError::NotMember(sid))?;
        let summary = summarizer.finish();
        let mut own: Vec<&crate::story::Decision> = summary
            .rounds
            .iter()
            .flat_map(|r| r.decisions.iter())
            // (A reconfig's handover is no election: nothing to replay.)
            .filter(|d| d.sid == sid && d.evidence != crate::story::Evidence::Reconfig)
            .collect();
        // Rounds and rejoins are listed by when they began; decisions go in time order.
        own.sort_by(|a, b| a.time.total_cmp(&b.time));
        let decisions: Vec<Decided> = own
            .into_iter()
            .map(|d| Decided {
                state: d.state,
                leader: d.leader,
                round: d.election_epoch,
                at_ms: ms(d.time, t0),
            })
            .collect();
        let end_ms = decisions.iter().map(|d| d.at_ms).fold(last_seen, u64::max);
        let (starts, configs) = starts_of(sid, &quorum, &summary.lookings, &outbound, t0);
        if starts.is_empty() {
            // Every notification SID sent answers from a decided state (or goes to a
            // non-voter): there is no election of SID's in the capture to run again.
            let state = outbound
                .iter()
                .map(|t| t.notification.state)
                .find(|s| *s != ServerState::Looking)
                .unwrap_or(ServerState::Looking);
            return Err(RecordingError::NeverLooking {
                sid,
                state: state.name(),
            });
        }
        Ok(Recording {
            sid,
            role,
            quorum,
            t0,
            inbound,
            outbound,
            starts,
            decisions,
            end_ms,
            peer_initials,
            configs,
        })
    }
}

impl Recording {
    /// Learns SID's recording from decoded records (in capture order). `config` overrides the
    /// config carried in SID's notifications.
    pub fn from_records(
        records: &[Record],
        sid: i64,
        config: Option<&QuorumConfig>,
    ) -> Result<Self, RecordingError> {
        let mut builder = RecordingBuilder::new(sid);
        for r in records {
            builder.add(r);
        }
        builder.finish(config)
    }

    /// The recorded peers SID heard from or sent to (not SID).
    pub fn peers(&self) -> Vec<i64> {
        let mut p: Vec<i64> = self
            .inbound
            .iter()
            .map(|t| t.from)
            .chain(self.outbound.iter().map(|t| t.to))
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }
}

/// SID's elections, as the story found them, with the quorum each runs under: a newer config
/// than the one before starts Java's election again (its logical clock at 0), under that
/// config's quorum.
fn starts_of(
    sid: i64,
    quorum: &QuorumVerifier,
    lookings: &[crate::story::Looking],
    outbound: &[Timed],
    t0: f64,
) -> (Vec<Start>, BTreeMap<u64, QuorumVerifier>) {
    // The quorums of the configs SID's notifications carried, by version.
    let mut known: BTreeMap<u64, QuorumVerifier> = BTreeMap::new();
    for t in outbound {
        if let Some(v) = t.notification.config_version()
            && v > quorum.version()
            && !known.contains_key(&v)
            && let Some(q) = t
                .notification
                .config_text()
                .and_then(|text| QuorumConfig::parse(&text).ok())
                .and_then(|c| QuorumVerifier::from_config(&c).ok())
        {
            known.insert(v, q);
        }
    }
    let mut version = quorum.version();
    let mut configs = BTreeMap::new();
    let mut starts: Vec<Start> = Vec::new();
    for l in lookings.iter().filter(|l| l.sid == sid) {
        let config = l
            .config_version
            .filter(|v| *v > version)
            .and_then(|v| known.get(&v).map(|q| (v, q)))
            .map(|(v, q)| {
                version = v;
                configs.insert(v, q.clone());
                v
            });
        // Its initial vote: the first it proposed for itself here, else the election before's.
        let (last_zxid, current_epoch) = match (l.own_vote, starts.last()) {
            (Some(v), _) => (v.zxid, v.peer_epoch),
            (None, Some(prev)) => (prev.last_zxid, prev.current_epoch),
            (None, None) => (0, 0),
        };
        starts.push(Start {
            at_ms: ms(l.looking, t0),
            restart: l.restart,
            last_zxid,
            current_epoch,
            round: l.round,
            config,
            stopped_ms: l.config_stopped.map(|t| ms(t, t0)),
        });
    }
    (starts, configs)
}

/// A notification a target sent, for comparison with the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub at_ms: u64,
    pub to: i64,
    pub notification: Notification,
}

/// The first place where what the target sent to one peer differs from what SID sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub to: i64,
    /// Position in the list of distinct consecutive notifications to that peer.
    pub index: usize,
    pub recorded: Option<Notification>,
    pub replayed: Option<Notification>,
}

/// The outcome of a replay.
#[derive(Debug, Clone)]
pub struct Report {
    pub sid: i64,
    pub target: String,
    pub recorded: Vec<Decided>,
    pub replayed: Vec<Decided>,
    pub differences: Vec<Difference>,
    /// What limits the comparison (a target that sent more than was kept).
    pub notes: Vec<String>,
}

impl Report {
    /// Builds a report: decisions compared by (state, leader), notifications per peer with
    /// consecutive duplicates collapsed (QCM re-sends and capacity-1 queues make those vary).
    pub fn new(rec: &Recording, target: &str, replayed: Vec<Decided>, sent: &[Sent]) -> Report {
        let mut differences = Vec::new();
        for peer in rec.peers() {
            let a = distinct(
                rec.outbound
                    .iter()
                    .filter(|t| t.to == peer)
                    .map(|t| &t.notification),
            );
            let b = distinct(
                sent.iter()
                    .filter(|s| s.to == peer)
                    .map(|s| &s.notification),
            );
            let n = a.len().max(b.len());
            if let Some(index) = (0..n).find(|&i| a.get(i).map(|k| k.0) != b.get(i).map(|k| k.0)) {
                differences.push(Difference {
                    to: peer,
                    index,
                    recorded: a.get(index).map(|k| k.1.clone()),
                    replayed: b.get(index).map(|k| k.1.clone()),
                });
            }
        }
        Report {
            sid: rec.sid,
            target: target.to_string(),
            recorded: rec.decisions.clone(),
            replayed,
            differences,
            notes: Vec::new(),
        }
    }

    /// Whether the target made the decisions SID made (state and leader, in order).
    pub fn matches(&self) -> bool {
        let key = |d: &Decided| (d.state, d.leader);
        self.recorded
            .iter()
            .map(key)
            .eq(self.replayed.iter().map(key))
    }
}

/// The fields of a notification a replay compares: state, leader, zxid, round, peer epoch.
pub(crate) type Compared = (ServerState, i64, i64, i64, i64);

pub(crate) fn compared(n: &Notification) -> Compared {
    (
        n.state,
        n.leader,
        n.zxid,
        n.election_epoch,
        n.effective_peer_epoch(),
    )
}

type Key = (Compared, Notification);

fn distinct<'a>(it: impl Iterator<Item = &'a Notification>) -> Vec<Key> {
    let mut out: Vec<Key> = Vec::new();
    for n in it {
        let k = compared(n);
        if out.last().map(|l| l.0) != Some(k) {
            out.push((k, n.clone()));
        }
    }
    out
}
