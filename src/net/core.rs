//! The connection layer's decisions, sans-I/O: the tie-break (reference B.1), the dial-back
//! address (B.2, B.3) and the per-peer send queues with the re-send of the last message (B.5).
//! [`super::Manager`] applies them to sockets; here they are plain functions and a table, so
//! they can be tested without a network.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::wire::{ElectionAddress, InitialMessage};

/// A connection's identity within one manager (never reused).
pub type ConnId = u64;

/// What to do with a connection we accepted, once its initial message is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// The initiator's sid is larger than mine: keep it; it replaces any connection to that sid
    /// (the newest connection wins).
    Keep,
    /// The initiator's sid is smaller: close it (and any existing connection to that sid) and
    /// dial back at these addresses, in order of preference.
    DialBack(Vec<ElectionAddress>),
    /// Smaller sid, but no usable address announced and none configured: Java logs "Invalid
    /// server id" and does not dial back.
    InvalidServerId,
    /// A connection from a server with my own id: Java logs it and leaves the socket unused.
    OwnId,
}

/// The acceptor's tie-break (`handleConnection`): `configured` is the address the config gives
/// for the initiator's sid, if any.
pub fn on_incoming(
    my_sid: i64,
    msg: &InitialMessage,
    remote_sid: i64,
    configured: &[ElectionAddress],
) -> Incoming {
    use std::cmp::Ordering::*;
    match remote_sid.cmp(&my_sid) {
        Greater => Incoming::Keep,
        Equal => Incoming::OwnId,
        Less => {
            let announced: Vec<ElectionAddress> = msg.dial_back_addresses().cloned().collect();
            if !announced.is_empty() {
                Incoming::DialBack(announced)
            } else if !configured.is_empty() {
                Incoming::DialBack(configured.to_vec())
            } else {
                Incoming::InvalidServerId
            }
        }
    }
}

/// The initiator's tie-break (`startConnection`): after sending the initial message, keep the
/// connection only when the remote sid is smaller than mine; otherwise close it and wait for the
/// larger side to dial back.
pub fn keep_outgoing(my_sid: i64, remote_sid: i64) -> bool {
    remote_sid < my_sid
}

/// How long after our dial to a larger sid was dropped by the tie-break a message queued for it
/// waits for that sid's dial back instead of dialling again. The dial back comes within
/// milliseconds (30 ms at most in Docker); a second dial meanwhile makes the acceptor close
/// the dial back it just opened, and Java's acceptor may then dial no more, leaving the
/// message for the next notification timeout (docs/java-behaviour.md, "A smaller sid's second
/// dial"). Java's `toSend` dials again at once; `connectAll` (a poll timeout) dials here too.
pub const DIAL_BACK_WAIT: Duration = Duration::from_millis(100);

/// One peer's send state.
#[derive(Debug, Default, Clone)]
struct Slot {
    /// The send queue: capacity 1, the newest message wins (Java's `CircularBlockingQueue(1)`).
    queued: Option<Vec<u8>>,
    /// `lastMessageSent[sid]`: never cleared.
    last_sent: Option<Vec<u8>>,
    /// The live connection, if any.
    conn: Option<ConnId>,
    /// Whether the connection's sender has started (and so has had its chance to re-send).
    started: bool,
    /// An outgoing connect is in progress (`inprogressConnections`).
    connecting: bool,
    /// When our last dial was dropped by the tie-break (the peer's sid is larger: it dials
    /// back), until its dial back arrives.
    dropped_at: Option<Instant>,
}

/// The per-peer send queues and connections of one manager.
#[derive(Debug, Default, Clone)]
pub struct SendQueues {
    slots: BTreeMap<i64, Slot>,
}

/// What a connection's sender should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Write these payload bytes (already recorded as the last message sent).
    Send(Vec<u8>),
    /// Nothing to send: wait to be woken.
    Wait,
    /// The connection is no longer the peer's connection: stop.
    Stop,
}

impl SendQueues {
    pub fn new() -> Self {
        SendQueues::default()
    }

    /// `toSend(sid, m)` at `now`: queue `m` (replacing a pending one) and say whether a connect
    /// is needed (no connection, none in progress, and no dial back awaited: see
    /// [`DIAL_BACK_WAIT`]). Marks the connect as in progress when so.
    pub fn queue(&mut self, sid: i64, payload: Vec<u8>, now: Instant) -> bool {
        let slot = self.slots.entry(sid).or_default();
        slot.queued = Some(payload);
        if slot
            .dropped_at
            .is_some_and(|t| now.saturating_duration_since(t) < DIAL_BACK_WAIT)
        {
            return false;
        }
        Self::claim_connect(slot)
    }

    fn claim_connect(slot: &mut Slot) -> bool {
        if slot.conn.is_none() && !slot.connecting {
            slot.connecting = true;
            true
        } else {
            false
        }
    }

    /// `connectOne(sid)` outside a send: whether a connect should start now (and marks it).
    pub fn want_connect(&mut self, sid: i64) -> bool {
        Self::claim_connect(self.slots.entry(sid).or_default())
    }

    /// `connectAll()`: the sids that have a queue and need a connect (each marked in progress).
    pub fn connect_all(&mut self) -> Vec<i64> {
        self.slots
            .iter_mut()
            .filter_map(|(sid, slot)| Self::claim_connect(slot).then_some(*sid))
            .collect()
    }

    /// An outgoing connect ended without a kept connection: failed, or (`dropped` at that
    /// time) dropped by the tie-break, the peer to dial back.
    pub fn connect_done(&mut self, sid: i64, dropped: Option<Instant>) {
        if let Some(slot) = self.slots.get_mut(&sid) {
            slot.connecting = false;
            slot.dropped_at = dropped;
        }
    }

    /// A connection to `sid` is established (kept by the tie-break): it becomes the peer's
    /// connection. Returns the connection it replaces, which the caller must close.
    pub fn attach(&mut self, sid: i64, conn: ConnId) -> Option<ConnId> {
        let slot = self.slots.entry(sid).or_default();
        slot.connecting = false;
        slot.started = false;
        slot.dropped_at = None;
        slot.conn.replace(conn).filter(|old| *old != conn)
    }

    /// The connection ended; forget it if it is still the peer's connection. Returns whether it
    /// was.
    pub fn detach(&mut self, sid: i64, conn: ConnId) -> bool {
        match self.slots.get_mut(&sid) {
            Some(slot) if slot.conn == Some(conn) => {
                slot.conn = None;
                slot.started = false;
                true
            }
            _ => false,
        }
    }

    /// Closes whatever connection `sid` has (an acceptor closing a smaller sid finishes the
    /// existing connection too). Returns it.
    pub fn detach_any(&mut self, sid: i64) -> Option<ConnId> {
        let slot = self.slots.get_mut(&sid)?;
        slot.started = false;
        slot.conn.take()
    }

    /// Forgets everything about `sid` (a non-member whose connection ended: nothing of it is
    /// kept after its connection).
    pub fn forget(&mut self, sid: i64) {
        self.slots.remove(&sid);
    }

    /// How many sids have state here.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The sender of `conn` asks for its next message. On a new connection with an empty
    /// queue, the last message sent is re-sent first (`SendWorker.run`).
    pub fn next(&mut self, sid: i64, conn: ConnId) -> Next {
        let Some(slot) = self.slots.get_mut(&sid) else {
            return Next::Stop;
        };
        if slot.conn != Some(conn) {
            return Next::Stop;
        }
        let first = !slot.started;
        slot.started = true;
        if let Some(m) = slot.queued.take() {
            slot.last_sent = Some(m.clone());
            return Next::Send(m);
        }
        if first && let Some(m) = &slot.last_sent {
            return Next::Send(m.clone());
        }
        Next::Wait
    }

    /// `haveDelivered()`: some peer's queue is empty.
    pub fn have_delivered(&self) -> bool {
        self.slots.values().any(|s| s.queued.is_none())
    }

    /// The connection to `sid`, if any.
    pub fn connection(&self, sid: i64) -> Option<ConnId> {
        self.slots.get(&sid).and_then(|s| s.conn)
    }

    /// The message waiting for `sid`, if any.
    pub fn queued(&self, sid: i64) -> Option<&[u8]> {
        self.slots.get(&sid).and_then(|s| s.queued.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ProtocolVersion;

    fn addr(t: &str) -> ElectionAddress {
        ElectionAddress::parse(t, 0).unwrap()
    }

    #[test]
    fn tie_break_keeps_the_larger_initiator() {
        let m = InitialMessage::versioned(ProtocolVersion::V1, 3, vec![addr("127.0.0.3:3888")]);
        assert_eq!(on_incoming(2, &m, 3, &[]), Incoming::Keep);
        assert_eq!(on_incoming(3, &m, 3, &[]), Incoming::OwnId);
        assert_eq!(
            on_incoming(5, &m, 3, &[addr("10.0.0.1:1")]),
            Incoming::DialBack(vec![addr("127.0.0.3:3888")])
        );
        assert!(keep_outgoing(5, 3));
        assert!(!keep_outgoing(3, 5));
        assert!(!keep_outgoing(3, 3));
    }

    #[test]
    fn dial_back_falls_back_to_config_then_gives_up() {
        let legacy = InitialMessage::legacy(1);
        assert_eq!(
            on_incoming(2, &legacy, 1, &[addr("127.0.0.1:3888")]),
            Incoming::DialBack(vec![addr("127.0.0.1:3888")])
        );
        assert_eq!(on_incoming(2, &legacy, 1, &[]), Incoming::InvalidServerId);
        let wildcard =
            InitialMessage::versioned(ProtocolVersion::V1, 1, vec![addr("0.0.0.0:3888")]);
        assert_eq!(on_incoming(2, &wildcard, 1, &[]), Incoming::InvalidServerId);
    }

    #[test]
    fn queue_has_capacity_one_and_last_message_is_resent() {
        let now = Instant::now();
        let mut q = SendQueues::new();
        assert!(
            q.queue(2, b"a".to_vec(), now),
            "first send starts a connect"
        );
        assert!(
            !q.queue(2, b"b".to_vec(), now),
            "connect already in progress"
        );
        assert!(!q.have_delivered());
        assert_eq!(q.queued(2), Some(&b"b"[..]), "newest wins");
        assert_eq!(q.attach(2, 10), None);
        assert_eq!(q.next(2, 10), Next::Send(b"b".to_vec()));
        assert_eq!(q.next(2, 10), Next::Wait);
        assert!(q.have_delivered());
        // A new connection replaces the old one and re-sends the last message.
        assert_eq!(q.attach(2, 11), Some(10));
        assert_eq!(q.next(2, 10), Next::Stop);
        assert_eq!(q.next(2, 11), Next::Send(b"b".to_vec()));
        assert_eq!(q.next(2, 11), Next::Wait);
        // Queued while connected: sent, no re-send before it.
        q.queue(2, b"c".to_vec(), now);
        assert_eq!(q.next(2, 11), Next::Send(b"c".to_vec()));
        // Disconnected: a send asks for a connect; connectAll does not ask twice.
        assert!(q.detach(2, 11));
        assert!(!q.detach(2, 11));
        assert!(q.queue(2, b"d".to_vec(), now));
        assert!(q.connect_all().is_empty());
        q.connect_done(2, None);
        assert_eq!(q.connect_all(), vec![2]);
        // On the next connection the queued message goes first, then nothing more.
        q.attach(2, 12);
        assert_eq!(q.next(2, 12), Next::Send(b"d".to_vec()));
        assert_eq!(q.next(2, 12), Next::Wait);
    }

    /// Our dial to a larger sid is dropped by the tie-break, and that sid dials back: a message
    /// queued meanwhile waits for the dial back (a second dial would make the acceptor close
    /// it), for at most DIAL_BACK_WAIT; a poll timeout's connectAll dials all the same.
    #[test]
    fn a_message_waits_for_the_dial_back_of_a_dropped_dial() {
        let t0 = Instant::now();
        let mut q = SendQueues::new();
        assert!(q.queue(4, b"a".to_vec(), t0));
        q.connect_done(4, Some(t0));
        let soon = t0 + DIAL_BACK_WAIT / 2;
        assert!(!q.queue(4, b"b".to_vec(), soon), "waits for the dial back");
        assert_eq!(q.attach(4, 20), None);
        assert_eq!(q.next(4, 20), Next::Send(b"b".to_vec()));
        // No dial back within the wait: the next send dials again.
        assert!(q.detach(4, 20));
        q.connect_done(4, Some(soon));
        assert!(!q.queue(4, b"c".to_vec(), soon));
        assert!(q.queue(4, b"d".to_vec(), soon + DIAL_BACK_WAIT));
        // And connectAll does not wait.
        q.connect_done(4, Some(soon + DIAL_BACK_WAIT));
        assert_eq!(q.connect_all(), vec![4]);
        // A failed dial awaits nothing.
        q.connect_done(4, None);
        assert!(q.queue(4, b"e".to_vec(), soon + DIAL_BACK_WAIT));
    }
}
