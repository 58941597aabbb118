//! A real Java ZooKeeper ensemble for integration tests, run by `scripts/ensemble.sh` in a
//! temporary directory and always stopped by [`Ensemble`]'s `Drop`, and raw election-port
//! connections that speak through zkfle's own codec.
//!
//! Include it with `#[path = "common/java.rs"] mod java;`.
#![allow(dead_code)]

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use zkfle::wire::{
    Direction, InitialMessage, Notification, StreamDecoder, StreamItem, WireError, encode_frame,
};

/// Servers started by `scripts/ensemble.sh start` in a fresh temporary directory. Dropping it
/// runs `ensemble.sh stop` (also while unwinding from a failed assertion) and removes the
/// directory, unless the test failed or `KEEP_WORKDIR=1`: then the logs stay and the path is
/// printed.
///
/// Every ensemble uses the fixed loopback layout (127.0.0.N:3888), so two at once would talk
/// to each other: it holds the machine-wide lock `$TMPDIR/zkfle-loopback-ensemble.lock` (the
/// one tests/join_java.rs takes) from before the start until after the stop.
pub struct Ensemble {
    pub dir: PathBuf,
    _lock: File,
}

/// Takes the machine-wide loopback-ensemble lock (blocking).
pub fn lock_loopback() -> File {
    let f = File::create(std::env::temp_dir().join("zkfle-loopback-ensemble.lock")).unwrap();
    f.lock().unwrap();
    f
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ensemble.sh")
}

impl Ensemble {
    /// Starts an ensemble with `ensemble.sh start DIR ARGS...`; returns once every started
    /// server has logged its first election state. Panics (after stopping whatever started)
    /// when the script fails.
    pub fn start(name: &str, args: &[&str]) -> Ensemble {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("zkfle-{name}-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The guard exists before anything runs, so a half-started ensemble is stopped too.
        let ensemble = Ensemble {
            dir,
            _lock: lock_loopback(),
        };
        let out = Command::new(script())
            .arg("start")
            .arg(&ensemble.dir)
            .args(args)
            .output()
            .expect("run scripts/ensemble.sh");
        assert!(
            out.status.success(),
            "ensemble.sh start {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensemble
    }

    /// Path of server `sid`'s log.
    pub fn log_path(&self, sid: i64) -> PathBuf {
        self.dir.join(sid.to_string()).join("server.log")
    }

    /// Server `sid`'s whole log so far.
    pub fn log(&self, sid: i64) -> String {
        std::fs::read(self.log_path(sid))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// A mark for [`Ensemble::log_since`]: the log's current length.
    pub fn log_mark(&self, sid: i64) -> usize {
        std::fs::metadata(self.log_path(sid)).map_or(0, |m| m.len() as usize)
    }

    /// What server `sid` logged after `mark`.
    pub fn log_since(&self, sid: i64, mark: usize) -> String {
        let log = std::fs::read(self.log_path(sid)).unwrap_or_default();
        String::from_utf8_lossy(log.get(mark..).unwrap_or_default()).into_owned()
    }

    /// Waits up to `timeout` for a line logged after `mark` that contains every one of
    /// `needles`; returns it.
    pub fn wait_log(
        &self,
        sid: i64,
        mark: usize,
        needles: &[&str],
        timeout: Duration,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.log_since(sid, mark);
            if let Some(line) = text.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                return Some(line.to_string());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let out = Command::new(script()).arg("stop").arg(&self.dir).output();
        if let Ok(out) = &out
            && !out.status.success()
        {
            eprintln!(
                "ensemble.sh stop {} failed:\n{}{}",
                self.dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if std::thread::panicking() || std::env::var("KEEP_WORKDIR").as_deref() == Ok("1") {
            eprintln!("ensemble directory kept: {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

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
            Received::Initial(message, raw)
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
    }
}
