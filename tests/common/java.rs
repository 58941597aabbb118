//! Raw election-port connections to a real Java ZooKeeper that speak through zkfle's own
//! codec; the ensemble itself is tests/common/join.rs's [`Ensemble`].
//!
//! Use it with `mod common;` and `use common::java;`, as every helper of `tests/common/`.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use zkfle::wire::{
    Direction, InitialMessage, Notification, StreamDecoder, StreamItem, WireError, encode_frame,
};

// The ensemble and its lock are the other Java tests' (tests/common/join.rs).
#[allow(unused_imports)]
pub use super::join::{Ensemble, lock_loopback};

/// How a connection ended while we read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The peer closed it (EOF).
    Closed,
    /// The peer reset it.
    Reset,
    /// Nothing happened within the time allowed: it is still open.
    StillOpen,
}

/// One message read from a connection, with its exact bytes.
#[derive(Debug, Clone)]
pub enum Received {
    Initial(InitialMessage, Vec<u8>),
    Notification(Notification, Vec<u8>),
}

/// An election connection on our side, reading the peer with zkfle's [`StreamDecoder`]. Every
/// message read is checked to decode and re-encode byte for byte.
pub struct Peer {
    pub stream: TcpStream,
    decoder: StreamDecoder,
    buf: Vec<u8>,
    /// Everything read from the peer so far, in order.
    pub received: Vec<Received>,
    pub end: Option<End>,
}

impl Peer {
    /// Connects to `addr` (nothing is sent yet); the peer is the acceptor, so it sends frames
    /// only.
    pub fn connect(addr: SocketAddr) -> Peer {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        Peer::wrap(stream, Direction::FromAcceptor)
    }

    /// Wraps an accepted or connected stream; `direction` is the peer's role.
    pub fn wrap(stream: TcpStream, direction: Direction) -> Peer {
        stream
            .set_write_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        Peer {
            stream,
            decoder: StreamDecoder::new(direction),
            buf: Vec::new(),
            received: Vec::new(),
            end: None,
        }
    }

    /// Connects and sends `initial` followed by `frames` (payloads) in a single write, as Java
    /// requires for the initial message (reference A.1 check 4).
    pub fn handshake(addr: SocketAddr, initial: &InitialMessage, frames: &[Vec<u8>]) -> Peer {
        let mut peer = Peer::connect(addr);
        let mut bytes = initial.encode().expect("initial message encodes");
        for f in frames {
            bytes.extend(encode_frame(f).expect("frame encodes"));
        }
        peer.send_raw(&bytes);
        peer
    }

    /// Sends raw bytes (for deliberately malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to Java");
    }

    /// Sends one notification, encoded by zkfle.
    pub fn send(&mut self, n: &Notification) {
        let payload = n.encode().expect("notification encodes");
        self.send_raw(&encode_frame(&payload).unwrap());
    }

    /// Sends one frame around an arbitrary payload.
    pub fn send_payload(&mut self, payload: &[u8]) {
        self.send_raw(&encode_frame(payload).unwrap());
    }

    /// Reads until one more message is decoded, the connection ends, or `timeout` passes.
    pub fn next(&mut self, timeout: Duration) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut input: &[u8] = &self.buf;
            let item = self.decoder.decode(&mut input);
            let used = self.buf.len() - input.len();
            self.buf.drain(..used);
            match item {
                Ok(Some(item)) => {
                    let r = check_round_trip(item);
                    self.received.push(r.clone());
                    return Some(r);
                }
                Ok(None) => {}
                Err(e) => panic!("undecodable bytes from Java: {e}"),
            }
            if self.end.is_some() {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => self.end = Some(End::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => self.end = Some(End::Reset),
                Err(e) => panic!("read from Java: {e}"),
            }
        }
    }

    /// The next notification that satisfies `want`, skipping others (Java's re-sent last
    /// message, re-broadcasts); `None` on timeout or close.
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        want: impl Fn(&Notification) -> bool,
    ) -> Option<Notification> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left)? {
                Received::Notification(n, _) if want(&n) => return Some(n),
                _ => {}
            }
        }
    }

    /// Reads (and decodes) everything until the peer closes or resets the connection, or
    /// `timeout` passes; says which.
    pub fn read_to_end(&mut self, timeout: Duration) -> End {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.next(left).is_none() {
                return self.end.unwrap_or(End::StillOpen);
            }
        }
    }

    /// Notifications read so far.
    pub fn notifications(&self) -> Vec<&Notification> {
        self.received
            .iter()
            .filter_map(|r| match r {
                Received::Notification(n, _) => Some(n),
                Received::Initial(..) => None,
            })
            .collect()
    }
}

/// Decodes a stream item and checks that zkfle re-encodes it to the very bytes Java sent.
fn check_round_trip(item: StreamItem) -> Received {
    match item {
        StreamItem::Initial { message, raw, .. } => {
            assert_eq!(
                message.encode().as_deref(),
                Ok(raw.as_slice()),
                "Java's initial message re-encodes byte for byte"
            );
            Received::Initial(std::sync::Arc::unwrap_or_clone(message), raw)
        }
        StreamItem::Frame { payload, .. } => {
            let n = Notification::decode(&payload)
                .unwrap_or_else(|e: WireError| panic!("Java's notification decodes: {e}"));
            assert_eq!(
                n.encode().as_deref(),
                Ok(payload.as_slice()),
                "Java's notification re-encodes byte for byte"
            );
            Received::Notification(n, payload)
        }
        // These peers never enable quorum SASL.
        StreamItem::Auth { offset, .. } => panic!("a quorum SASL packet at byte {offset}"),
    }
}
