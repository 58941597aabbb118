//! [`Manager`]: QuorumCnxManager over tokio. Listeners, handshakes, connects, one reader and one
//! writer task per connection; every decision is taken by [`super::core`].

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use super::core::{self, ConnId, Incoming, Next, SendQueues};
use super::dialect::{Dialects, PeerForm, WireDialect};
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
    pub fn to_send(&self, sid: i64, payload: Vec<u8>) {
        let connect = {
            let mut st = lock(&self.shared.state);
            let connect = st.queues.queue(sid, payload);
            wake(&st, sid);
            connect
        };
        if connect {
            self.shared.spawn_connect(sid, None);
        }
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
enum Handshake {
    Io(io::Error),
    Eof(usize),
    Bad(WireError),
    Timeout,
}

impl std::fmt::Display for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handshake::Io(e) => write!(f, "{e}"),
            Handshake::Eof(n) => write!(f, "connection closed after {n} bytes"),
            Handshake::Bad(e) => write!(f, "bad initial message: {e}"),
            Handshake::Timeout => write!(f, "no initial message within the socket timeout"),
        }
    }
}

/// Reads the initial message (at most 2068 bytes are buffered). Returns it, the decoder
/// positioned after it, and the bytes read past it (the start of the first frame).
async fn read_initial(
    stream: &mut TcpStream,
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
            Some(StreamItem::Initial { message, .. }) => return Ok((message, dec, s.to_vec())),
            Some(StreamItem::Frame { .. }) => unreachable!("frames come after the initial message"),
            None => {}
        }
    }
}

impl Shared {
    fn my_sid(&self) -> i64 {
        self.cfg.my_sid
    }

    async fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    // Unlike Java's listener, handshakes run concurrently: a silent connector
                    // stalls nobody else.
                    let s = self.clone();
                    tokio::spawn(async move { s.handle_incoming(stream, peer).await });
                }
                Err(e) => {
                    warn!("Exception while accepting election connections: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn handle_incoming(self: Arc<Self>, mut stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let hs = tokio::time::timeout(self.cfg.socket_timeout, read_initial(&mut stream)).await;
        let (msg, dec, leftover) = match hs.unwrap_or(Err(Handshake::Timeout)) {
            Ok(x) => x,
            Err(e) => {
                warn!("Exception reading or writing challenge from {peer}: {e}; closing");
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
        match lock(&self.dialects).saw_initial(sid, &msg) {
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
        let configured = lock(&self.peers).get(&sid).cloned().unwrap_or_default();
        match core::on_incoming(self.my_sid(), &msg, sid, &configured) {
            Incoming::Keep => self.establish(sid, stream, dec, leftover, peer),
            Incoming::OwnId => {
                warn!(
                    "We got a connection request from a server with our own ID ({sid}) at {peer}; closing"
                );
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
                if lock(&self.state).queues.want_connect(sid) {
                    self.clone().spawn_connect(sid, Some(addrs));
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
            let kept = s.connect(sid, addrs).await;
            if !kept {
                lock(&s.state).queues.connect_done(sid);
            }
        });
    }

    /// Dials `sid` and sends the initial message; returns whether the connection was kept.
    async fn connect(self: &Arc<Self>, sid: i64, addrs: Option<Vec<ElectionAddress>>) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        let addrs = match addrs {
            Some(a) => a,
            None => lock(&self.peers).get(&sid).cloned().unwrap_or_default(),
        };
        if addrs.is_empty() {
            warn!("Invalid server id: {sid} (no election address known)");
            return false;
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
            let mut stream = match tokio::time::timeout(
                self.cfg.cnx_timeout,
                TcpStream::connect(target),
            )
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
            let _ = stream.set_nodelay(true);
            // The whole initial message in one write (Java reads the address with one read()).
            let initial = match lock(&self.dialects).form_for(sid) {
                PeerForm::Current => &self.initial,
                PeerForm::Legacy => &self.initial_legacy,
            };
            if let Err(e) = stream.write_all(initial).await {
                warn!("Exception writing the initial message to {sid} at {target}: {e}");
                continue;
            }
            if !core::keep_outgoing(self.my_sid(), sid) {
                info!(
                    "Have smaller server identifier, so dropping the connection: (myId:{} --> sid:{sid})",
                    self.my_sid()
                );
                return false;
            }
            self.establish(
                sid,
                stream,
                StreamDecoder::new(Direction::FromAcceptor),
                Vec::new(),
                target,
            );
            return true;
        }
        false
    }

    /// Makes `stream` the connection to `sid` (closing the one it replaces) and starts its
    /// reader and writer.
    fn establish(
        self: &Arc<Self>,
        sid: i64,
        stream: TcpStream,
        dec: StreamDecoder,
        leftover: Vec<u8>,
        peer: SocketAddr,
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
        let r = tokio::spawn(self.clone().reader(sid, id, rd, dec, leftover, peer));
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
    }

    async fn writer(
        self: Arc<Self>,
        sid: i64,
        id: ConnId,
        mut wr: OwnedWriteHalf,
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
                    if let Err(e) = wr.write_all(&frame).await {
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

    async fn reader(
        self: Arc<Self>,
        sid: i64,
        id: ConnId,
        mut rd: OwnedReadHalf,
        mut dec: StreamDecoder,
        leftover: Vec<u8>,
        peer: SocketAddr,
    ) {
        let mut buf = vec![0u8; 8192];
        let mut pending = leftover;
        'conn: loop {
            let mut s = &pending[..];
            loop {
                match dec.decode(&mut s) {
                    Ok(Some(StreamItem::Frame { payload, .. })) => {
                        match lock(&self.dialects).saw_payload(sid, &payload) {
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
                    Ok(None) => break,
                    Err(e) => {
                        warn!(
                            "Connection broken for id {sid} ({peer}), my id = {}: {e}; closing",
                            self.my_sid()
                        );
                        break 'conn;
                    }
                }
            }
            match rd.read(&mut buf).await {
                Ok(0) if dec.buffered() > 0 => {
                    warn!(
                        "Connection broken for id {sid} ({peer}), my id = {}: closed by the peer in the middle of a message ({} bytes of it received)",
                        self.my_sid(),
                        dec.buffered()
                    );
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
        self.conn_ended(sid, id);
    }
}

fn close_conn(st: &mut State, id: ConnId) {
    if let Some(c) = st.conns.remove(&id) {
        debug!("Closing connection #{id} to {}", c.sid);
        for a in c.aborts {
            a.abort();
        }
    }
}
