//! [`Manager`]: QuorumCnxManager over tokio. Listeners, handshakes, connects, one reader and one
//! writer task per connection; every decision is taken by [`super::core`].

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;
use tracing::{debug, error, info, warn};

use super::core::{self, ConnId, Incoming, Next, SendQueues};
use super::dialect::{Dialects, PeerForm, WireDialect};
use super::sasl::{authenticate_learner, authenticate_server, refused_hint};
use super::tls::{
    QuorumReadHalf, QuorumStream, QuorumTls, QuorumWriteHalf, wrap_incoming, wrap_outgoing,
};
use crate::sasl::QuorumSasl;
use crate::throttle::{LogThrottle, suppressed};
use crate::wire::initial::OBSERVER_ID;
use crate::wire::{
    Direction, ElectionAddress, InitialMessage, ProtocolVersion, StreamDecoder, StreamItem,
    WireError, encode_frame,
};

/// How the connection layer runs.
#[derive(Debug, Clone)]
pub struct NetConfig {
    pub my_sid: i64,
    /// Where to listen (port 0 picks one; see [`Manager::local_addrs`]).
    pub listen: Vec<SocketAddr>,
    /// The addresses announced in our initial message (V1 sends the first only); empty: the
    /// addresses listened on.
    pub announce: Vec<ElectionAddress>,
    /// V2 (all addresses, `|`-joined) instead of V1.
    pub multi_address: bool,
    /// Election addresses of the other members, by sid.
    pub peers: BTreeMap<i64, Vec<ElectionAddress>>,
    /// `zookeeper.cnxTimeout`: connect timeout (Java default 5000 ms).
    pub cnx_timeout: Duration,
    /// Handshake read timeout: `zookeeper.quorumCnxnTimeoutMs`, else tickTime * syncLimit.
    pub socket_timeout: Duration,
    /// The protocol generation to speak (3.5+ or 3.4), fixed or per peer (`super::dialect`).
    pub dialect: WireDialect,
    /// Bounds on what connecting peers can make us hold.
    pub limits: PeerLimits,
    /// Accept a member's sid only from the IP addresses its configured election addresses
    /// resolve to (`--strict-peers`); Java accepts any sid from anyone.
    pub strict_peers: bool,
    /// Quorum TLS (`sslQuorum`, `portUnification`): how connections are wrapped.
    pub tls: Option<Arc<QuorumTls>>,
    /// Quorum SASL (`quorum.auth.enableSasl`): the exchange at each connection's start.
    pub sasl: Option<Arc<QuorumSasl>>,
}

/// Bounds on the election port against peers that are not (or not yet) members.
///
/// A *guest* is an accepted connection that is not bound to a member: in its handshake, or
/// identified by a sid that is not in the config. Members' connections are bounded by the
/// config itself (one per sid, the newest wins) and are not guests. When a new connection would
/// exceed a guest limit, the oldest guest (from that address, else any) is closed to make room:
/// a member's handshake takes one round trip, so flooding connections cannot keep it out, and
/// the file descriptors in use stay bounded.
#[derive(Debug, Clone)]
pub struct PeerLimits {
    /// Guests at a time, in total.
    pub max_guests: usize,
    /// Guests at a time from one source IP address.
    pub max_guests_per_address: usize,
    /// Bytes of unfinished frames that all connections together may hold beyond each one's
    /// [`PeerLimits::buffer_allowance`]; a connection that needs more while the total is spent
    /// is closed.
    pub max_buffered_total: usize,
    /// Bytes any connection may buffer whatever the total (a notification with the config of a
    /// large ensemble is a few KiB).
    pub buffer_allowance: usize,
}

impl PeerLimits {
    /// The defaults, with fewer guests when the process may open few files: guests take at
    /// most half of what the descriptor limit leaves after 32 for everything else (members,
    /// the quorum connection, the log), so guests alone never exhaust the descriptors.
    pub fn for_open_files_limit(limit: Option<u64>) -> PeerLimits {
        let mut l = PeerLimits::default();
        if let Some(n) = limit {
            let room = usize::try_from(n.saturating_sub(32) / 2).unwrap_or(usize::MAX);
            l.max_guests = l.max_guests.min(room.max(2));
            l.max_guests_per_address = l.max_guests_per_address.min(l.max_guests);
        }
        l
    }
}

/// The soft limit on open files (`ulimit -n`) of this process, from `/proc/self/limits`.
/// Descriptors this process has open now, where the system says (Linux's /proc).
pub fn open_files() -> Option<u64> {
    std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64)
}

pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Default for PeerLimits {
    fn default() -> Self {
        PeerLimits {
            max_guests: 64,
            max_guests_per_address: 8,
            max_buffered_total: 8 << 20,
            buffer_allowance: 64 << 10,
        }
    }
}

/// A frame received from a peer: the payload (a notification, to be decoded by the caller).
#[derive(Debug, Clone)]
pub struct Received {
    /// The sid bound to the connection by its initial message.
    pub from: i64,
    /// The peer's socket address.
    pub addr: SocketAddr,
    pub payload: Vec<u8>,
}

/// Java's receive queue holds 100 messages.
const RECV_QUEUE: usize = 100;
/// Dial-backs to non-members (smaller sids not in the config) at a time.
const MAX_GUEST_DIALS: usize = 8;
/// Listener bind attempts (`zookeeper.electionPortBindRetry`, default 3), 1 s apart.
const BIND_RETRIES: u32 = 3;

struct ConnTasks {
    sid: i64,
    wake: Arc<Notify>,
    aborts: Vec<AbortHandle>,
}

struct State {
    queues: SendQueues,
    conns: HashMap<ConnId, ConnTasks>,
}

/// One guest connection (see [`PeerLimits`]).
struct Guest {
    ip: IpAddr,
    /// Closes the connection (its handshake or reader waits on it).
    evict: Arc<Notify>,
}

#[derive(Default)]
struct Guests {
    /// By admission order (ids increase), so the first entry from an address is its oldest.
    table: BTreeMap<u64, Guest>,
    per_ip: HashMap<IpAddr, usize>,
    next: u64,
}

/// A guest's place; leaving it (drop) frees the place.
struct GuestPass {
    shared: Arc<Shared>,
    id: u64,
    evict: Arc<Notify>,
}

impl Drop for GuestPass {
    fn drop(&mut self) {
        let mut g = lock(&self.shared.guests);
        if let Some(guest) = g.table.remove(&self.id)
            && let Some(n) = g.per_ip.get_mut(&guest.ip)
        {
            *n -= 1;
            if *n == 0 {
                g.per_ip.remove(&guest.ip);
            }
        }
    }
}

struct Shared {
    cfg: NetConfig,
    initial: Vec<u8>,
    /// The legacy initial message (the sid alone), for peers spoken to in the 3.4 form.
    initial_legacy: Vec<u8>,
    dialects: Mutex<Dialects>,
    peers: Mutex<BTreeMap<i64, Vec<ElectionAddress>>>,
    state: Mutex<State>,
    next_conn: AtomicU64,
    next_observer: AtomicI64,
    closed: AtomicBool,
    tx: mpsc::Sender<Received>,
    listeners: Mutex<Vec<AbortHandle>>,
    local: Vec<SocketAddr>,
    guests: Mutex<Guests>,
    /// Bytes of unfinished frames held beyond the per-connection allowance, all connections.
    buffered: AtomicUsize,
    /// Dial-backs to non-members in progress.
    guest_dials: AtomicUsize,
    throttle: Mutex<LogThrottle>,
    epoch: Instant,
}

/// The connection manager. Dropping it (or [`Manager::shutdown`]) closes every socket.
pub struct Manager {
    shared: Arc<Shared>,
}

impl Manager {
    /// Binds the listeners and starts accepting. Returns the manager and the stream of
    /// received frames (capacity 100; readers wait when it is full).
    pub async fn start(cfg: NetConfig) -> io::Result<(Manager, mpsc::Receiver<Received>)> {
        let protocol = if cfg.multi_address {
            ProtocolVersion::V2
        } else {
            ProtocolVersion::V1
        };
        let mut bound = Vec::new();
        for addr in &cfg.listen {
            bound.push(bind(*addr).await?);
        }
        let local = bound
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<Vec<_>>>()?;
        let announce = if cfg.announce.is_empty() {
            local
                .iter()
                .map(|a| ElectionAddress::from_socket_addr(*a))
                .collect()
        } else {
            cfg.announce.clone()
        };
        let initial = InitialMessage::versioned(protocol, cfg.my_sid, announce)
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let initial_legacy = InitialMessage::legacy(cfg.my_sid)
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let (tx, rx) = mpsc::channel(RECV_QUEUE);
        let shared = Arc::new(Shared {
            peers: Mutex::new(cfg.peers.clone()),
            dialects: Mutex::new(Dialects::new(cfg.dialect)),
            cfg,
            initial,
            initial_legacy,
            state: Mutex::new(State {
                queues: SendQueues::new(),
                conns: HashMap::new(),
            }),
            next_conn: AtomicU64::new(1),
            next_observer: AtomicI64::new(-1),
            closed: AtomicBool::new(false),
            tx,
            listeners: Mutex::new(Vec::new()),
            local,
            guests: Mutex::new(Guests::default()),
            buffered: AtomicUsize::new(0),
            guest_dials: AtomicUsize::new(0),
            throttle: Mutex::new(LogThrottle::new()),
            epoch: Instant::now(),
        });
        for listener in bound {
            let s = shared.clone();
            let h = tokio::spawn(async move { s.accept_loop(listener).await });
            lock(&shared.listeners).push(h.abort_handle());
        }
        Ok((Manager { shared }, rx))
    }

    /// The addresses actually listened on.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.shared.local.clone()
    }

    /// `toSend(sid, payload)`: queue it (newest wins) and connect if there is no connection.
    /// A non-member without a connection cannot be dialled: the message is dropped rather than
    /// kept for it (Java keeps a queue per sid ever seen).
    pub fn to_send(&self, sid: i64, payload: Vec<u8>) {
        self.shared.to_send(sid, payload);
    }

    /// [`Manager::to_send`] after `delay` (a chaos campaign's `delay-votes`), from a task of
    /// its own: the driver goes on meanwhile.
    pub fn to_send_later(&self, sid: i64, payload: Vec<u8>, delay: std::time::Duration) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            shared.to_send(sid, payload);
        });
    }

    /// `connectOne(sid)`: connect to `sid` unless connected or connecting.
    pub fn connect_one(&self, sid: i64) {
        if lock(&self.shared.state).queues.want_connect(sid) {
            self.shared.spawn_connect(sid, None);
        }
    }

    /// `connectAll()`: reconnect every peer that has a send queue and no connection.
    pub fn connect_all(&self) {
        let sids = lock(&self.shared.state).queues.connect_all();
        for sid in sids {
            self.shared.spawn_connect(sid, None);
        }
    }

    /// `haveDelivered()`: some peer's queue is empty.
    pub fn have_delivered(&self) -> bool {
        lock(&self.shared.state).queues.have_delivered()
    }

    /// How many sids the connection layer keeps state for (members, and non-members while
    /// connected).
    pub fn tracked_sids(&self) -> usize {
        lock(&self.shared.state).queues.len()
    }

    /// Whether there is a connection to `sid`.
    pub fn is_connected(&self, sid: i64) -> bool {
        lock(&self.shared.state).queues.connection(sid).is_some()
    }

    /// The form (3.5+ or 3.4) to send `sid` in: fixed by [`NetConfig::dialect`], or what the
    /// peer itself was seen to speak.
    pub fn form_for(&self, sid: i64) -> PeerForm {
        lock(&self.shared.dialects).form_for(sid)
    }

    /// Sets (or changes) the election addresses of `sid`.
    pub fn set_peer(&self, sid: i64, addrs: Vec<ElectionAddress>) {
        lock(&self.shared.peers).insert(sid, addrs);
    }

    /// `sid` is no longer a member (a reconfig removed it): its connection is closed and its
    /// queue forgotten. If it connects again it is answered as any non-member.
    pub fn remove_peer(&self, sid: i64) {
        lock(&self.shared.peers).remove(&sid);
        let mut st = lock(&self.shared.state);
        if let Some(id) = st.queues.detach_any(sid) {
            close_conn(&mut st, id);
        }
        st.queues.forget(sid);
    }

    /// Java's new QuorumCnxManager of a restarted election (reference A.2): whatever is still
    /// open is closed ([`Manager::shutdown`]), then it listens again on the same addresses,
    /// with no connections and no send queues. The members are those set last
    /// ([`Manager::set_peer`]).
    pub fn restart(&self) {
        self.shutdown();
        let shared = &self.shared;
        lock(&shared.state).queues = SendQueues::new();
        shared.closed.store(false, Ordering::SeqCst);
        let mut listeners = lock(&shared.listeners);
        for addr in shared.local.clone() {
            let s = shared.clone();
            let h = tokio::spawn(async move {
                match bind(addr).await {
                    Ok(listener) => s.accept_loop(listener).await,
                    Err(e) => error!("{e}: this server can no longer be reached for elections"),
                }
            });
            listeners.push(h.abort_handle());
        }
    }

    /// Closes the listeners and every connection.
    pub fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        for h in lock(&self.shared.listeners).drain(..) {
            h.abort();
        }
        let mut st = lock(&self.shared.state);
        for (_, c) in st.conns.drain() {
            for a in c.aborts {
                a.abort();
            }
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn wake(st: &State, sid: i64) {
    if let Some(c) = st.queues.connection(sid).and_then(|id| st.conns.get(&id)) {
        c.wake.notify_one();
    }
}

async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match TcpListener::bind(addr).await {
            Ok(l) => {
                info!("{addr} is accepting connections now, my election bind port: {addr}");
                return Ok(l);
            }
            Err(e) if attempt < BIND_RETRIES => {
                warn!("Exception while listening to address {addr}: {e}; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("binding election address {addr}: {e}"),
                ));
            }
        }
    }
}

/// Why a handshake failed.
#[derive(Debug)]
pub(crate) enum Handshake {
    Io(io::Error),
    Tls(io::Error),
    Sasl(io::Error),
    Eof(usize),
    Bad(WireError),
    Timeout,
}

impl std::fmt::Display for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handshake::Io(e) => write!(f, "{e}"),
            Handshake::Tls(e) => write!(f, "{e}"),
            Handshake::Sasl(e) => write!(f, "SASL authentication: {e}"),
            Handshake::Eof(n) => write!(f, "connection closed after {n} bytes"),
            Handshake::Bad(e) => write!(f, "bad initial message: {e}"),
            Handshake::Timeout => write!(f, "no initial message within the socket timeout"),
        }
    }
}

/// Reads the initial message (at most 2068 bytes are buffered). Returns it, the decoder
/// positioned after it, and the bytes read past it (the start of the first frame).
pub(crate) async fn read_initial(
    stream: &mut QuorumStream,
) -> Result<(InitialMessage, StreamDecoder, Vec<u8>), Handshake> {
    let mut dec = StreamDecoder::new(Direction::FromInitiator);
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await.map_err(Handshake::Io)?;
        if n == 0 {
            return Err(Handshake::Eof(total));
        }
        total += n;
        let mut s = &buf[..n];
        match dec.decode(&mut s).map_err(Handshake::Bad)? {
            Some(StreamItem::Initial { message, .. }) => {
                return Ok((std::sync::Arc::unwrap_or_clone(message), dec, s.to_vec()));
            }
            Some(StreamItem::Frame { .. } | StreamItem::Auth { .. }) => {
                unreachable!("frames and auth packets come after the initial message")
            }
            None => {}
        }
    }
}

/// How a dial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dial {
    /// The connection is the peer's now.
    Kept,
    /// Dropped by the tie-break after the initial message: the peer (a larger sid) dials back.
    Dropped,
    /// No connection (refused, unresolved, timed out, or shut down).
    Failed,
}

impl Shared {
    /// [`Manager::to_send`]'s work, shared with the delayed sends.
    fn to_send(self: &Arc<Self>, sid: i64, payload: Vec<u8>) {
        let connect = {
            let mut st = lock(&self.state);
            if st.queues.connection(sid).is_none() && !self.is_member(sid) {
                debug!("Not queueing a message for non-member {sid}: no connection");
                return;
            }
            let connect = st.queues.queue(sid, payload, std::time::Instant::now());
            wake(&st, sid);
            connect
        };
        if connect {
            self.spawn_connect(sid, None);
        }
    }

    fn my_sid(&self) -> i64 {
        self.cfg.my_sid
    }

    fn is_member(&self, sid: i64) -> bool {
        lock(&self.peers).contains_key(&sid)
    }

    /// A rate-limited warning of `kind`: `Some(suffix)` when it may be logged now.
    fn may_warn(&self, kind: &'static str) -> Option<String> {
        let now = self.epoch.elapsed().as_millis() as u64;
        lock(&self.throttle).allow(kind, now).map(suppressed)
    }

    async fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        let mut backoff = Duration::from_millis(10);
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    backoff = Duration::from_millis(10);
                    let pass = self.admit_guest(peer.ip());
                    // Unlike Java's listener, handshakes run concurrently: a silent connector
                    // stalls nobody else.
                    let s = self.clone();
                    tokio::spawn(async move { s.handle_incoming(stream, peer, pass).await });
                }
                Err(e) => {
                    // Out of file descriptors (EMFILE, ENFILE) or buffers: the pending
                    // connection stays in the backlog. Free a guest's descriptor and back off
                    // (up to 1 s) instead of spinning on accept.
                    let evicted = self.evict_oldest_guest(None);
                    if let Some(more) = self.may_warn("accept") {
                        warn!(
                            "Exception while accepting election connections: {e}; retrying in {} ms{}{more}",
                            backoff.as_millis(),
                            if evicted {
                                ", closed the oldest guest connection"
                            } else {
                                ""
                            }
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// Registers a new connection from `ip` as a guest, closing the oldest guest from that
    /// address, else the oldest of all, when a limit is reached.
    fn admit_guest(self: &Arc<Self>, ip: IpAddr) -> GuestPass {
        let limits = &self.cfg.limits;
        let from_ip = lock(&self.guests).per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= limits.max_guests_per_address.max(1) {
            self.evict_oldest_guest(Some(ip));
            if let Some(more) = self.may_warn("guests per address") {
                warn!(
                    "{from_ip} connections from {ip} not bound to a member (limit {}): closing its oldest{more}",
                    limits.max_guests_per_address
                );
            }
        } else if lock(&self.guests).table.len() >= limits.max_guests.max(1) {
            self.evict_oldest_guest(None);
            if let Some(more) = self.may_warn("guests") {
                warn!(
                    "{} connections not bound to a member (limit {}): closing the oldest{more}",
                    lock(&self.guests).table.len(),
                    limits.max_guests
                );
            }
        }
        let evict = Arc::new(Notify::new());
        let mut g = lock(&self.guests);
        let id = g.next;
        g.next += 1;
        g.table.insert(
            id,
            Guest {
                ip,
                evict: evict.clone(),
            },
        );
        *g.per_ip.entry(ip).or_default() += 1;
        GuestPass {
            shared: self.clone(),
            id,
            evict,
        }
    }

    /// Asks the oldest guest (from `ip`, or any) to close; it leaves the table when its task
    /// ends. Returns whether there was one.
    fn evict_oldest_guest(&self, ip: Option<IpAddr>) -> bool {
        let mut g = lock(&self.guests);
        let victim = g
            .table
            .iter()
            .find(|(_, guest)| ip.is_none_or(|ip| guest.ip == ip))
            .map(|(id, _)| *id);
        match victim.and_then(|id| g.table.remove(&id)) {
            Some(guest) => {
                if let Some(n) = g.per_ip.get_mut(&guest.ip) {
                    *n -= 1;
                    if *n == 0 {
                        g.per_ip.remove(&guest.ip);
                    }
                }
                guest.evict.notify_one();
                true
            }
            None => false,
        }
    }

    /// With `--strict-peers`: whether `ip` is one of the addresses `sid`'s configured election
    /// addresses resolve to.
    async fn address_may_claim(&self, sid: i64, ip: IpAddr) -> bool {
        let configured = lock(&self.peers).get(&sid).cloned().unwrap_or_default();
        let canon = |ip: IpAddr| ip.to_canonical();
        for a in &configured {
            if let Some(sa) = a.socket_addr() {
                if canon(sa.ip()) == canon(ip) {
                    return true;
                }
            } else if let Ok(addrs) = tokio::net::lookup_host((a.host.as_str(), a.port)).await
                && addrs.into_iter().any(|sa| canon(sa.ip()) == canon(ip))
            {
                return true;
            }
        }
        false
    }

    async fn handle_incoming(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, pass: GuestPass) {
        let _ = tcp.set_nodelay(true);
        let evict = pass.evict.clone();
        // The TLS handshake (if any) and the initial message share the socket timeout.
        let handshake = async {
            let mut stream = wrap_incoming(self.cfg.tls.as_deref(), tcp, peer)
                .await
                .map_err(Handshake::Tls)?;
            let (msg, dec, mut leftover) = read_initial(&mut stream).await?;
            // As QuorumCnxManager.handleConnection: the learner authenticates after its
            // initial message, before the sid challenge.
            if let Some(sasl) = self.cfg.sasl.as_deref() {
                authenticate_server(&mut stream, &mut leftover, sasl)
                    .await
                    .map_err(Handshake::Sasl)?
                    .log(&format!("sid {} at {peer}", msg.sid));
            }
            Ok((stream, msg, dec, leftover))
        };
        let hs = tokio::select! {
            r = tokio::time::timeout(self.cfg.socket_timeout, handshake) => {
                r.unwrap_or(Err(Handshake::Timeout))
            }
            _ = evict.notified() => {
                debug!("Closing a connection from {peer} in its handshake to make room");
                return;
            }
        };
        let (stream, msg, dec, leftover) = match hs {
            Ok(x) => x,
            Err(Handshake::Sasl(e)) => {
                if let Some(more) = self.may_warn("sasl") {
                    warn!(
                        "Failed to authenticate a learner at {peer} using SASL: {e}; closing{more}"
                    );
                }
                return;
            }
            Err(e) => {
                if let Some(more) = self.may_warn("handshake") {
                    warn!("Exception reading or writing challenge from {peer}: {e}; closing{more}");
                }
                return;
            }
        };
        let mut sid = msg.sid;
        if sid == OBSERVER_ID {
            sid = self.next_observer.fetch_sub(1, Ordering::SeqCst);
        }
        debug!(
            "Initial message parsed by {}: sid {sid}, protocol {:?}, addresses {:?}, from {peer}",
            self.my_sid(),
            msg.protocol,
            msg.address_text
        );
        let member = self.is_member(sid);
        if member && self.cfg.strict_peers && !self.address_may_claim(sid, peer.ip()).await {
            if let Some(more) = self.may_warn("strict peers") {
                warn!(
                    "Refusing a connection claiming sid {sid} from {peer}: not an address of server.{sid} in the config (--strict-peers){more}"
                );
            }
            return;
        }
        // Only members are spoken to in their own generation's form: Java 3.5+ answers a
        // non-member (a probe, a doctor) with its config whatever the form it asked in, and
        // tools tell 3.4 from 3.5+ by that answer.
        let switched = if member {
            lock(&self.dialects).saw_initial(sid, &msg)
        } else {
            None
        };
        match switched {
            Some(PeerForm::Legacy) => {
                info!("Server {sid} sent a legacy initial message (3.4): speaking 3.4 to it")
            }
            Some(PeerForm::Current) => {
                info!(
                    "Server {sid} sent a {:?} initial message (3.5+): speaking 3.5+ to it again",
                    msg.protocol
                )
            }
            None => {}
        }
        // A member's connection is bounded by the config (one per sid): it stops being a
        // guest. A non-member's stays one, and its state goes with the connection.
        let pass = if member { None } else { Some(pass) };
        let configured = lock(&self.peers).get(&sid).cloned().unwrap_or_default();
        match core::on_incoming(self.my_sid(), &msg, sid, &configured) {
            Incoming::Keep => self.establish(sid, stream, dec, leftover, peer, pass),
            Incoming::OwnId => {
                if let Some(more) = self.may_warn("own id") {
                    warn!(
                        "We got a connection request from a server with our own ID ({sid}) at {peer}; closing{more}"
                    );
                }
            }
            Incoming::InvalidServerId => {
                info!(
                    "Received connection request from server {sid} at {peer} with a smaller id and no address: Invalid server id, not dialling back"
                );
                self.close_peer(sid);
            }
            Incoming::DialBack(addrs) => {
                debug!(
                    "Create new connection to server: {sid} (smaller id, dialling back {:?})",
                    addrs.iter().map(|a| a.text.as_str()).collect::<Vec<_>>()
                );
                drop(stream);
                self.close_peer(sid);
                if !member {
                    // Anyone may ask to be dialled back at any address: few such dials at a
                    // time, so that connecting cannot make us hold sockets without bound.
                    if self.guest_dials.load(Ordering::SeqCst) >= MAX_GUEST_DIALS {
                        if let Some(more) = self.may_warn("guest dial back") {
                            warn!(
                                "Not dialling back non-member {sid} at {peer}: {MAX_GUEST_DIALS} such dials already in progress{more}"
                            );
                        }
                        return;
                    }
                    self.guest_dials.fetch_add(1, Ordering::SeqCst);
                }
                if lock(&self.state).queues.want_connect(sid) {
                    self.clone().spawn_connect(sid, Some(addrs));
                } else if !member {
                    self.guest_dials.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn close_peer(&self, sid: i64) {
        let mut st = lock(&self.state);
        if let Some(old) = st.queues.detach_any(sid) {
            close_conn(&mut st, old);
        }
    }

    fn spawn_connect(self: &Arc<Self>, sid: i64, addrs: Option<Vec<ElectionAddress>>) {
        let s = self.clone();
        tokio::spawn(async move {
            let guest_dial = addrs.is_some() && !s.is_member(sid);
            let dial = s.connect(sid, addrs).await;
            if guest_dial {
                s.guest_dials.fetch_sub(1, Ordering::SeqCst);
            }
            if dial != Dial::Kept {
                let dropped = (dial == Dial::Dropped).then(std::time::Instant::now);
                let mut st = lock(&s.state);
                st.queues.connect_done(sid, dropped);
                // A non-member (dialled back at the address it announced) keeps no state
                // without a connection.
                if st.queues.connection(sid).is_none() && !s.is_member(sid) {
                    st.queues.forget(sid);
                }
            }
        });
    }

    /// Dials `sid` and sends the initial message; returns whether the connection was kept.
    async fn connect(self: &Arc<Self>, sid: i64, addrs: Option<Vec<ElectionAddress>>) -> Dial {
        if self.closed.load(Ordering::SeqCst) {
            return Dial::Failed;
        }
        let addrs = match addrs {
            Some(a) => a,
            None => lock(&self.peers).get(&sid).cloned().unwrap_or_default(),
        };
        if addrs.is_empty() {
            warn!("Invalid server id: {sid} (no election address known)");
            return Dial::Failed;
        }
        for addr in &addrs {
            let target = match addr.socket_addr() {
                Some(a) => Some(a),
                None => tokio::net::lookup_host((addr.host.as_str(), addr.port))
                    .await
                    .ok()
                    .and_then(|mut it| it.next()),
            };
            let Some(target) = target else {
                warn!(
                    "Cannot open channel to {sid} at election address {}: unresolved",
                    addr.text
                );
                continue;
            };
            let tcp = match tokio::time::timeout(self.cfg.cnx_timeout, TcpStream::connect(target))
                .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    warn!("Cannot open channel to {sid} at election address {target}: {e}");
                    continue;
                }
                Err(_) => {
                    warn!(
                        "Cannot open channel to {sid} at election address {target}: connect timed out"
                    );
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let tls = self.cfg.tls.as_deref();
            let mut stream = match tokio::time::timeout(
                self.cfg.socket_timeout,
                wrap_outgoing(tls, tcp, target),
            )
            .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    warn!("Cannot open secure channel to {sid} at election address {target}: {e}");
                    continue;
                }
                Err(_) => {
                    warn!(
                        "Cannot open secure channel to {sid} at election address {target}: no TLS handshake within the socket timeout"
                    );
                    continue;
                }
            };
            // The whole initial message in one write (Java reads the address with one read()).
            let initial = match lock(&self.dialects).form_for(sid) {
                PeerForm::Current => &self.initial,
                PeerForm::Legacy => &self.initial_legacy,
            };
            if let Err(e) = write_flushed(&mut stream, initial).await {
                warn!("Exception writing the initial message to {sid} at {target}: {e}");
                continue;
            }
            // As QuorumCnxManager.startConnection: authenticate after the initial message, even
            // on a connection about to be dropped for the smaller sid.
            if let Some(sasl) = self.cfg.sasl.as_deref() {
                let auth = tokio::time::timeout(
                    self.cfg.socket_timeout,
                    authenticate_learner(&mut stream, sasl),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer within the socket timeout",
                    ))
                });
                if let Err(e) = auth {
                    warn!(
                        "SASL authentication to {sid} at election address {target} failed: {e}{}",
                        refused_hint(&e, sasl)
                    );
                    continue;
                }
            }
            if !core::keep_outgoing(self.my_sid(), sid) {
                info!(
                    "Have smaller server identifier, so dropping the connection: (myId:{} --> sid:{sid})",
                    self.my_sid()
                );
                return Dial::Dropped;
            }
            self.establish(
                sid,
                stream,
                StreamDecoder::new(Direction::FromAcceptor),
                Vec::new(),
                target,
                None,
            );
            return Dial::Kept;
        }
        Dial::Failed
    }

    /// Makes `stream` the connection to `sid` (closing the one it replaces) and starts its
    /// reader and writer.
    fn establish(
        self: &Arc<Self>,
        sid: i64,
        stream: QuorumStream,
        dec: StreamDecoder,
        leftover: Vec<u8>,
        peer: SocketAddr,
        guest: Option<GuestPass>,
    ) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let id = self.next_conn.fetch_add(1, Ordering::SeqCst);
        let (rd, wr) = stream.into_split();
        let wake = Arc::new(Notify::new());
        let mut st = lock(&self.state);
        if let Some(old) = st.queues.attach(sid, id) {
            debug!("Replacing the connection to {sid}: the newest wins");
            close_conn(&mut st, old);
        }
        let w = tokio::spawn(self.clone().writer(sid, id, wr, wake.clone()));
        let r = tokio::spawn(self.clone().reader(sid, id, rd, dec, leftover, peer, guest));
        st.conns.insert(
            id,
            ConnTasks {
                sid,
                wake,
                aborts: vec![w.abort_handle(), r.abort_handle()],
            },
        );
        debug!("Connection to {sid} at {peer} established (#{id})");
    }

    fn conn_ended(&self, sid: i64, id: ConnId) {
        let mut st = lock(&self.state);
        st.queues.detach(sid, id);
        close_conn(&mut st, id);
        if !self.is_member(sid) && st.queues.connection(sid).is_none() {
            st.queues.forget(sid);
            lock(&self.dialects).forget(sid);
        }
    }

    async fn writer(
        self: Arc<Self>,
        sid: i64,
        id: ConnId,
        mut wr: QuorumWriteHalf,
        wake: Arc<Notify>,
    ) {
        loop {
            let next = lock(&self.state).queues.next(sid, id);
            match next {
                Next::Send(m) => {
                    let m = lock(&self.dialects).adapt(sid, m);
                    let frame = match encode_frame(&m) {
                        Ok(f) => f,
                        Err(e) => {
                            warn!("Not sending a message to {sid}: {e}");
                            continue;
                        }
                    };
                    if let Err(e) = write_flushed(&mut wr, &frame).await {
                        warn!(
                            "Exception when using channel: for id {sid} my id = {}: {e}",
                            self.my_sid()
                        );
                        break;
                    }
                }
                Next::Wait => wake.notified().await,
                Next::Stop => return,
            }
        }
        self.conn_ended(sid, id);
    }

    #[allow(clippy::too_many_arguments)]
    async fn reader(
        self: Arc<Self>,
        sid: i64,
        id: ConnId,
        rd: QuorumReadHalf,
        dec: StreamDecoder,
        leftover: Vec<u8>,
        peer: SocketAddr,
        guest: Option<GuestPass>,
    ) {
        let mut charged = 0usize;
        let evict = guest.as_ref().map(|g| g.evict.clone());
        self.read_frames(sid, rd, dec, leftover, peer, &mut charged, evict)
            .await;
        self.buffered.fetch_sub(charged, Ordering::SeqCst);
        drop(guest);
        self.conn_ended(sid, id);
    }

    /// Charges the bytes `dec` holds beyond the allowance to the shared budget; false when
    /// the budget is spent (the connection must close).
    fn charge(&self, dec: &StreamDecoder, charged: &mut usize) -> bool {
        let over = dec
            .buffered()
            .saturating_sub(self.cfg.limits.buffer_allowance);
        if over > *charged {
            let more = over - *charged;
            let total = self.buffered.fetch_add(more, Ordering::SeqCst) + more;
            *charged = over;
            total <= self.cfg.limits.max_buffered_total
        } else {
            self.buffered.fetch_sub(*charged - over, Ordering::SeqCst);
            *charged = over;
            true
        }
    }

    /// Reads frames until the connection ends, is evicted (a guest), overruns the buffer
    /// budget or stalls in the middle of a frame.
    #[allow(clippy::too_many_arguments)]
    async fn read_frames(
        &self,
        sid: i64,
        mut rd: QuorumReadHalf,
        mut dec: StreamDecoder,
        leftover: Vec<u8>,
        peer: SocketAddr,
        charged: &mut usize,
        evict: Option<Arc<Notify>>,
    ) {
        let mut buf = vec![0u8; 8192];
        let mut pending = leftover;
        // When the unfinished frame in `dec` began.
        let mut frame_since: Option<Instant> = None;
        'conn: loop {
            let mut s = &pending[..];
            loop {
                match dec.decode(&mut s) {
                    Ok(Some(StreamItem::Frame { payload, .. })) => {
                        let switched = if self.is_member(sid) {
                            lock(&self.dialects).saw_payload(sid, &payload)
                        } else {
                            None
                        };
                        match switched {
                            Some(PeerForm::Legacy) => info!(
                                "Server {sid} sent a notification without config ({} bytes, 3.4): speaking 3.4 to it",
                                payload.len()
                            ),
                            Some(PeerForm::Current) => info!(
                                "Server {sid} sent a notification with a config ({} bytes, 3.5+): speaking 3.5+ to it again",
                                payload.len()
                            ),
                            None => {}
                        }
                        let r = Received {
                            from: sid,
                            addr: peer,
                            payload,
                        };
                        if self.tx.send(r).await.is_err() {
                            break 'conn;
                        }
                    }
                    Ok(Some(StreamItem::Initial { .. })) => {}
                    Ok(Some(StreamItem::Auth { offset, .. })) => {
                        // The exchange is over before a connection is established; Java's
                        // RecvWorker would read the magic as a frame length and close.
                        if let Some(more) = self.may_warn("broken") {
                            warn!(
                                "Connection broken for id {sid} ({peer}), my id = {}: a quorum SASL packet at byte {offset} after the handshake; closing{more}",
                                self.my_sid()
                            );
                        }
                        break 'conn;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        if let Some(more) = self.may_warn("broken") {
                            warn!(
                                "Connection broken for id {sid} ({peer}), my id = {}: {e}; closing{more}",
                                self.my_sid()
                            );
                        }
                        break 'conn;
                    }
                }
            }
            if !self.charge(&dec, charged) {
                if let Some(more) = self.may_warn("buffer budget") {
                    warn!(
                        "Closing the connection of {sid} ({peer}): its unfinished frame ({} bytes so far) would exceed the {} bytes all connections may buffer{more}",
                        dec.buffered(),
                        self.cfg.limits.max_buffered_total
                    );
                }
                break;
            }
            // A frame that has started must finish within the socket timeout (Java would wait
            // for ever): a stalled peer cannot hold its buffer.
            let deadline = if dec.buffered() > 0 {
                let since = *frame_since.get_or_insert_with(Instant::now);
                Some(since + self.cfg.socket_timeout)
            } else {
                frame_since = None;
                None
            };
            let read = async {
                match deadline {
                    Some(d) => tokio::time::timeout_at(d.into(), rd.read(&mut buf))
                        .await
                        .ok(),
                    None => Some(rd.read(&mut buf).await),
                }
            };
            let evicted = async {
                match &evict {
                    Some(e) => e.notified().await,
                    None => std::future::pending().await,
                }
            };
            let r = tokio::select! {
                r = read => r,
                _ = evicted => {
                    debug!("Closing the connection of non-member {sid} ({peer}) to make room");
                    break;
                }
            };
            let Some(r) = r else {
                if let Some(more) = self.may_warn("stalled") {
                    warn!(
                        "Closing the connection of {sid} ({peer}): a frame started {} ms ago is still incomplete ({} bytes of it received){more}",
                        self.cfg.socket_timeout.as_millis(),
                        dec.buffered()
                    );
                }
                break;
            };
            match r {
                Ok(0) if dec.buffered() > 0 => {
                    if let Some(more) = self.may_warn("broken") {
                        warn!(
                            "Connection broken for id {sid} ({peer}), my id = {}: closed by the peer in the middle of a message ({} bytes of it received){more}",
                            self.my_sid(),
                            dec.buffered()
                        );
                    }
                    break;
                }
                Ok(0) => {
                    debug!("Connection to {sid} ({peer}) closed by the peer");
                    break;
                }
                Ok(n) => pending = buf[..n].to_vec(),
                Err(e) => {
                    debug!("Connection to {sid} ({peer}) broken: {e}");
                    break;
                }
            }
        }
    }
}

/// Writes `bytes` and flushes them: a TLS stream holds written bytes in its record layer
/// until flushed.
async fn write_flushed<W: AsyncWriteExt + Unpin>(w: &mut W, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}

fn close_conn(st: &mut State, id: ConnId) {
    if let Some(c) = st.conns.remove(&id) {
        debug!("Closing connection #{id} to {}", c.sid);
        for a in c.aborts {
            a.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_leave_room_under_a_low_descriptor_limit() {
        assert_eq!(PeerLimits::for_open_files_limit(None).max_guests, 64);
        assert_eq!(PeerLimits::for_open_files_limit(Some(1024)).max_guests, 64);
        let l = PeerLimits::for_open_files_limit(Some(64));
        assert_eq!((l.max_guests, l.max_guests_per_address), (16, 8));
        assert_eq!(PeerLimits::for_open_files_limit(Some(10)).max_guests, 2);
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }
}
