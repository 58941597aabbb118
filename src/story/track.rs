//! Each server followed through the messages: votes, phases, connections.

use super::model::*;
use crate::capture::ConnId;
use crate::wire::quorum::ptype;
use crate::wire::{Notification, ServerState};
use rustc_hash::FxHashMap as HashMap;

/// Messages kept for a server whose election has not begun yet.
pub(super) const MAX_QUEUED: usize = 256;

/// The silences kept per leader (the newest).
pub(super) const MAX_SILENCES: usize = 64;

/// At most this many sids are named in one "why still LOOKING" list.
pub(super) const MAX_LISTED: usize = 12;

/// One server's decisions ordered by time, for the look-ups that pair a sync or a rejoin with
/// the server's other decisions without a scan each (a capture of days holds thousands).
pub(super) struct SidDecisions {
    /// Indices into the decisions, by time; equal times in index order.
    pub(super) by_time: Vec<usize>,
    /// `by_time`'s times.
    pub(super) times: Vec<f64>,
    /// The leaders they decided for.
    pub(super) leaders: Vec<i64>,
    /// The largest index among `by_time[..=k]`.
    pub(super) latest_index: Vec<usize>,
    /// For each position, the next one whose leader differs from its own (`len` if none).
    pub(super) next_other: Vec<usize>,
}

impl SidDecisions {
    pub(super) fn new(decisions: &[Decision], mut list: Vec<usize>) -> SidDecisions {
        // Stable: equal times stay in index order.
        list.sort_by(|a, b| decisions[*a].time.total_cmp(&decisions[*b].time));
        let times: Vec<f64> = list.iter().map(|&i| decisions[i].time).collect();
        let leaders: Vec<i64> = list.iter().map(|&i| decisions[i].leader).collect();
        let latest_index = list
            .iter()
            .scan(0, |latest, &i| {
                *latest = i.max(*latest);
                Some(*latest)
            })
            .collect();
        let mut next_other = vec![list.len(); list.len()];
        for k in (0..list.len().saturating_sub(1)).rev() {
            next_other[k] = if leaders[k + 1] != leaders[k] {
                k + 1
            } else {
                next_other[k + 1]
            };
        }
        SidDecisions {
            by_time: list,
            times,
            leaders,
            latest_index,
            next_other,
        }
    }

    /// The last decision (in the order they were made) at or before `t`.
    pub(super) fn last_until(&self, t: f64) -> Option<usize> {
        let k = self.times.partition_point(|x| *x <= t);
        k.checked_sub(1).map(|k| self.latest_index[k])
    }

    /// The first decision (in the order they were made) after `from`, up to `to`.
    pub(super) fn first_within(&self, from: f64, to: f64) -> Option<usize> {
        let a = self.times.partition_point(|x| *x <= from);
        let b = self.times.partition_point(|x| *x <= to).max(a);
        self.by_time[a..b].iter().copied().min()
    }

    /// The earliest decision after `t` for a leader other than `leader` (of equal times, the
    /// first made).
    pub(super) fn next_other_leader(&self, t: f64, leader: i64) -> Option<usize> {
        let k = self.times.partition_point(|x| *x <= t);
        let k = match self.leaders.get(k) {
            Some(l) if *l == leader => self.next_other[k],
            _ => k,
        };
        self.by_time.get(k).copied()
    }
}

/// A committed reconfig that designated another leader than the one that committed it: the
/// first COMMITANDACTIVATE (or INFORMANDACTIVATE) saying so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Handover {
    pub(super) time: f64,
    /// The leader that committed it, when the capture names it (else the handover stands
    /// only if learners then synced with `to`: see [`Summarizer::handover_rounds`]).
    pub(super) from: Option<i64>,
    pub(super) to: i64,
    /// The reconfig txn's zxid: the version of the config it activates.
    pub(super) zxid: i64,
}

/// The vote of a notification cut by the capture's snap length, when its first bytes hold
/// all of it (state, leader, zxid, round, and the peer epoch of the forms that carry one):
/// a capture made with `-s 128` has them, so its elections can still be told. The config,
/// further on, is missing: the message is taken as one without (Java reads such a 40-byte
/// form the same way). `None` when a field the election needs was cut.
pub(super) fn cut_vote(p: &crate::wire::PartialNotification) -> Option<Notification> {
    let peer_epoch = match p.size {
        ..28 => return None,
        28 => None,
        _ => Some(p.peer_epoch?),
    };
    Some(Notification {
        state: p.state?,
        leader: p.leader?,
        zxid: p.zxid?,
        election_epoch: p.election_epoch?,
        peer_epoch,
        // The 36-byte form has no version (current servers drop it, as for a whole one).
        version: (p.size >= 40).then_some(0),
        config: None,
        trailing: Vec::new(),
    })
}

/// Connections, closes and refused dials the summary follows at most (reassembly follows
/// as many connections at once).
pub(super) const MAX_TRACKED: usize = 65536;

/// How many of the newest vote changes a delayed vote is looked for among.
pub(super) const DELAYED_VOTE_LOOKBACK: usize = 4096;

/// LOOKING votes of a decided round that one sender's queue delivered to one receiver late.
#[derive(Debug, Clone)]
pub(super) struct DelayedVotes {
    pub(super) count: u32,
    pub(super) round: i64,
    /// When the sender decided in that round.
    pub(super) decided_at: f64,
    /// When the first arrived.
    pub(super) first: f64,
}

/// Address conflicts listed (the decoder reports each conflict once): a capture crafted to
/// make more gets no longer a list.
pub(super) const MAX_ADDRESS_CONFLICTS: usize = 64;

/// Servers (distinct sids) followed at most; a real ensemble has a few dozen.
pub(super) const MAX_SERVERS: usize = 65536;

/// Pairs of servers followed at most for repeated votes and tie-break drops.
pub(super) const MAX_PAIRS: usize = 1 << 18;

/// Appends to a time-ordered list, dropping its older half once it holds twice the bound.
pub(super) fn bounded_push<T>(list: &mut Vec<T>, item: T) {
    if list.len() >= 2 * MAX_TRACKED {
        list.drain(..MAX_TRACKED);
    }
    list.push(item);
}

/// The times of consecutive identical votes from one server to another, kept inline (one per
/// pair of servers): time-outs double from 200 ms to 60 s, so a dozen shows the pattern.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Repeats {
    pub(super) times: [f64; 12],
    pub(super) len: u8,
}

impl Repeats {
    pub(super) fn push(&mut self, t: f64) {
        if (self.len as usize) < self.times.len() {
            self.times[self.len as usize] = t;
            self.len += 1;
        }
    }

    pub(super) fn as_slice(&self) -> &[f64] {
        &self.times[..self.len as usize]
    }
}

/// Every server the model follows, in the order first seen: one small index from sid to slot,
/// and the states side by side. A capture's messages visit the same servers over and over;
/// kept in one array (not each in its own allocation behind a hash table), their states stay
/// few cache lines apart, so the cost per message holds as the servers grow to thousands.
#[derive(Debug)]
pub(super) struct ServerTable {
    pub(super) slot: HashMap<i64, u32>,
    pub(super) states: Vec<Server>,
    /// The slots of the two servers of the record at hand (from its connection), so that the
    /// dozen lookups one record makes do not each search the table.
    pub(super) near: [(i64, u32); 2],
}

impl Default for ServerTable {
    fn default() -> Self {
        ServerTable {
            slot: HashMap::default(),
            states: Vec::new(),
            near: [(0, NO_SLOT); 2],
        }
    }
}

impl ServerTable {
    pub(super) fn len(&self) -> usize {
        self.states.len()
    }

    pub(super) fn slot_of(&self, sid: i64) -> Option<usize> {
        match self.near {
            [(s, i), _] | [_, (s, i)] if s == sid && i != NO_SLOT => Some(i as usize),
            _ => self.slot.get(&sid).map(|&i| i as usize),
        }
    }

    pub(super) fn contains_key(&self, sid: &i64) -> bool {
        self.slot_of(*sid).is_some()
    }

    pub(super) fn get(&self, sid: &i64) -> Option<&Server> {
        self.slot_of(*sid).map(|i| &self.states[i])
    }

    pub(super) fn get_mut(&mut self, sid: &i64) -> Option<&mut Server> {
        self.slot_of(*sid).map(|i| &mut self.states[i])
    }

    /// The server's slot, a fresh state when it was not followed yet.
    pub(super) fn slot_or_insert(&mut self, sid: i64) -> usize {
        if let Some(i) = self.slot_of(sid) {
            return i;
        }
        let next = self.states.len() as u32;
        self.slot.insert(sid, next);
        self.states.push(Server::default());
        next as usize
    }

    /// The server's state, a fresh one when it was not followed yet.
    pub(super) fn entry(&mut self, sid: i64) -> &mut Server {
        let i = self.slot_or_insert(sid);
        &mut self.states[i]
    }
}

/// No slot known.
pub(super) const NO_SLOT: u32 = u32::MAX;

impl std::ops::Index<&i64> for ServerTable {
    type Output = Server;
    fn index(&self, sid: &i64) -> &Server {
        self.get(sid).expect("a followed server")
    }
}

/// Where a server is in its elections, as the wire shows it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Nothing from or to it yet.
    #[default]
    Unseen,
    /// LOOKING as the wire first showed it: a voter's message it left unanswered, or its
    /// (re)start, before its own first vote of the election. What reaches it waits in its
    /// queue (`Server::queued`) until that vote, and the election is dated from it.
    Queuing,
    /// LOOKING (`lookForLeader`), its own votes on the wire, since `Server::since`.
    Looking,
    /// LOOKING, and sent a config newer than its own: Java takes it and restarts its election
    /// (shuts the election and its connections down), so what else reaches it is lost until
    /// its new election's first vote.
    Restarting,
    /// FOLLOWING, LEADING or OBSERVING (its decision is `Server::decision`), or assumed so
    /// from before the capture.
    Decided,
    /// Decided, then every connection it had closed: the process is gone (a LOOKING vote
    /// from it now is a restart, even in an old round).
    Gone,
}

impl Phase {
    pub(super) fn is_looking(self) -> bool {
        matches!(self, Phase::Queuing | Phase::Looking | Phase::Restarting)
    }

    /// LOOKING with its own votes on the wire (its election has begun).
    pub(super) fn is_voting(self) -> bool {
        matches!(self, Phase::Looking | Phase::Restarting)
    }
}

/// One server as the model sees it.
#[derive(Debug, Default)]
pub(super) struct Server {
    pub(super) phase: Phase,
    /// Whether it sent a notification in the capture.
    pub(super) sent: bool,
    pub(super) since: f64,
    pub(super) round: i64,
    /// Its current proposal.
    pub(super) vote: Option<VoteKey>,
    /// Its own vote (for itself), as last sent.
    pub(super) own: Option<VoteKey>,
    /// Its last LOOKING vote on the wire.
    pub(super) last_sent: Option<VoteKey>,
    /// The highest round a peer showed it.
    pub(super) heard_round: i64,
    /// LOOKING votes of its round, from voters (itself included), and their counts.
    /// (Java's `recvset`, with LOOKING votes and FOLLOWING/LEADING answers of its round.)
    pub(super) recv: crate::election::Tally,
    /// FOLLOWING/LEADING answers from other rounds (Java's `outofelection`).
    pub(super) out: crate::election::Tally,
    /// The decision deadline while its vote holds a quorum, and its generation in the heap.
    pub(super) pending: Option<f64>,
    pub(super) generation: u64,
    /// Its current or last decision (index into `decisions`).
    pub(super) decision: Option<usize>,
    /// Its latest episode of looking (index into `episodes`).
    pub(super) episode: Option<usize>,
    /// Open election connections with it.
    pub(super) open: u32,
    /// Last time it sent anything.
    pub(super) last_active: f64,
    /// Messages that reached it before its own first vote (it reads them once it looks).
    pub(super) queued: Vec<(f64, i64, ServerState, VoteKey, i32)>,
    /// When it last answered decided, and how far its receiver was behind the wire then:
    /// from the answered message's arrival to the answer.
    pub(super) answer_lag: (f64, f64),
    /// It sent a LOOKING proposal (counted in `lookers`).
    pub(super) looker: bool,
    /// The newest config version it is known to hold (from its own notifications, or one it
    /// was sent while LOOKING and so took).
    pub(super) config_version: Option<u64>,
    /// When its last session as a learner ended (its quorum-port connection to a leader
    /// closed).
    pub(super) left_zab: Option<f64>,
    /// Its first refused election-port dial since its last decision (the capture names the
    /// dialler by its address): it was looking by then, its votes going nowhere.
    pub(super) first_dial: Option<f64>,
    /// Its first connection attempt (a dial, answered or refused) since its last notification
    /// to a voter, and the connection: a server begins looking a little before its first vote
    /// can leave.
    pub(super) dialled: Option<(f64, Option<crate::capture::ConnId>)>,
    /// When it last sent a notification to a voter.
    pub(super) notified: Option<f64>,
    /// When, LOOKING, it was sent a newer config, which stopped its election.
    pub(super) config_taken: Option<f64>,
}

#[derive(Debug, Clone)]
pub(super) struct Episode {
    pub(super) sid: i64,
    pub(super) since: f64,
    pub(super) round: i64,
    pub(super) decision: Option<usize>,
    /// First seen in the capture with this episode.
    pub(super) first: bool,
    /// The server (re)started with this episode: first seen, or back after all its
    /// connections closed.
    pub(super) started: bool,
    /// Its first own vote's round, and the highest round a peer had shown it before.
    pub(super) first_vote: Option<(i64, i64)>,
    /// What the model says of this election once its first vote is on the wire (index into
    /// the summarizer's `lookings`).
    pub(super) looking: Option<u32>,
}

/// A quorum-port connection's sync, as it happens.
#[derive(Debug, Default)]
pub(super) struct QuorumConn {
    pub(super) learner: Option<i64>,
    pub(super) leader: Option<i64>,
    pub(super) observer: bool,
    pub(super) sync: SyncInfo,
    /// The leader's end, once known: from the LearnerInfo's direction, or (on a connection
    /// the capture joined mid-way) from the first packet only a leader sends or only a
    /// learner does.
    pub(super) leader_end: Option<std::net::SocketAddr>,
    /// No LearnerInfo: the connection was open before the capture.
    pub(super) mid_stream: bool,
    /// When the leader's end first sent (sids can be learned only later).
    pub(super) first_heard: Option<f64>,
}

/// Whether a packet of this type was sent by the leader (`Some(true)`) or by a learner
/// (`Some(false)`) on the quorum port (`Leader.java`, `Learner.java`); `None` for REVALIDATE,
/// which goes both ways. A PING goes both ways too, but the leader's carries no data (jute's
/// null buffer) and a learner's answer always carries its sessions (an empty buffer when it
/// has none): a steady ensemble sends nothing else.
pub(super) fn sent_by_leader(q: &crate::decode::QuorumMessage) -> Option<bool> {
    match q.ptype {
        ptype::PING => Some(q.data_len.is_none()),
        ptype::PROPOSAL
        | ptype::COMMIT
        | ptype::INFORM
        | ptype::COMMITANDACTIVATE
        | ptype::NEWLEADER
        | ptype::UPTODATE
        | ptype::DIFF
        | ptype::TRUNC
        | ptype::SNAP
        | ptype::LEADERINFO
        | ptype::INFORMANDACTIVATE
        | ptype::SYNC => Some(true),
        ptype::REQUEST
        | ptype::ACK
        | ptype::FOLLOWERINFO
        | ptype::OBSERVERINFO
        | ptype::ACKEPOCH => Some(false),
        _ => None,
    }
}

/// The round of a state held from before the capture, until the server's answer names it.
pub(super) const UNKNOWN_ROUND: i64 = -1;

/// An election connection: its two sids, whether each direction carried a message, and the
/// slots in `runs` of each direction's repeated votes (found once, not per message).
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub(super) a: Option<i64>,
    pub(super) b: Option<i64>,
    pub(super) a_sent: bool,
    pub(super) b_sent: bool,
    pub(super) runs: [u32; 2],
    /// The slots in `servers` of a and b, once known.
    pub(super) slots: [u32; 2],
}

/// Config changes kept; later ones are counted in the last.
pub(super) const MAX_CONFIG_CHANGES: usize = 256;

/// (server, learner) of a connection, as far as the capture tells.
pub(super) type SidPair = (Option<i64>, Option<i64>);

/// No slot in `runs` yet.
pub(super) const NO_RUN: u32 = u32::MAX;

/// Connection ids count up as reassembly meets connections (the capture cannot choose them),
/// so those open at one time are mostly neighbours: hashed to their own value in the low bits
/// (which pick the bucket) and mixed in the top seven (which the table compares first), they
/// take neighbouring buckets, and a capture's messages, which visit the open connections in
/// turn, find them a few cache lines apart however many there are, not scattered over a
/// table larger than the caches.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ConnHasher(u64);

impl std::hash::Hasher for ConnHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) & 0xfe00_0000_0000_0000)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A table keyed by connection id, hashed by [`ConnHasher`].
pub(super) type ConnMap<V> =
    std::collections::HashMap<ConnId, V, std::hash::BuildHasherDefault<ConnHasher>>;
