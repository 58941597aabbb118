//! The connection layer in-process: two managers, or a manager and a hand-driven fake peer, on
//! 127.0.0.1 with ports picked by the kernel.

mod common;
use common::logs;

use std::net::SocketAddr;
use std::time::Duration;

use logs::Logs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;
use zkfle::net::{Manager, NetConfig, Received};
use zkfle::wire::{ElectionAddress, InitialMessage, ProtocolVersion};

const T: Duration = Duration::from_secs(5);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn ea(a: SocketAddr) -> ElectionAddress {
    ElectionAddress::from_socket_addr(a)
}

fn cfg(sid: i64, peers: &[(i64, SocketAddr)]) -> NetConfig {
    NetConfig {
        my_sid: sid,
        listen: vec![any_port()],
        announce: vec![],
        multi_address: false,
        peers: peers.iter().map(|(s, a)| (*s, vec![ea(*a)])).collect(),
        cnx_timeout: Duration::from_millis(1000),
        socket_timeout: Duration::from_millis(400),
        dialect: zkfle::net::WireDialect::Auto,
        limits: Default::default(),
        strict_peers: false,
        tls: None,
        sasl: None,
    }
}

/// A manager listening on a kernel-picked port (and announcing it).
async fn manager(
    sid: i64,
    peers: &[(i64, SocketAddr)],
) -> (Manager, mpsc::Receiver<Received>, SocketAddr) {
    let (m, rx) = Manager::start(cfg(sid, peers)).await.unwrap();
    let addr = m.local_addrs()[0];
    (m, rx, addr)
}

fn v1(sid: i64, addr: &str) -> Vec<u8> {
    InitialMessage::versioned(
        ProtocolVersion::V1,
        sid,
        vec![ElectionAddress::parse(addr, 0).unwrap()],
    )
    .encode()
    .unwrap()
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

async fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    timeout(T, s.read_exact(&mut len)).await.unwrap().unwrap();
    let mut p = vec![0u8; i32::from_be_bytes(len) as usize];
    timeout(T, s.read_exact(&mut p)).await.unwrap().unwrap();
    p
}

async fn read_initial(s: &mut TcpStream) -> InitialMessage {
    let mut head = [0u8; 20];
    timeout(T, s.read_exact(&mut head)).await.unwrap().unwrap();
    let len = i32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; len];
    timeout(T, s.read_exact(&mut rest)).await.unwrap().unwrap();
    let mut all = head.to_vec();
    all.extend(rest);
    InitialMessage::decode(&all).unwrap()
}

/// Waits for the peer to close: EOF or reset.
async fn expect_closed(s: &mut TcpStream) {
    let mut b = [0u8; 64];
    loop {
        match timeout(T, s.read(&mut b)).await.expect("peer closes") {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn recv(rx: &mut mpsc::Receiver<Received>) -> Received {
    timeout(T, rx.recv()).await.expect("a message").unwrap()
}

#[tokio::test]
async fn tie_break_and_dial_back_between_two_managers() {
    // Sid 1 knows 2's address and 2 learns 1's from the initial message.
    let (m2, mut rx2, a2) = manager(2, &[]).await;
    let (m1, mut rx1, _a1) = manager(1, &[(2, a2)]).await;
    // 1 dials 2 (larger): sends its initial message and drops; 2 dials back; 1 then sends.
    m1.to_send(2, b"from-1".to_vec());
    let r = recv(&mut rx2).await;
    assert_eq!((r.from, r.payload.as_slice()), (1, &b"from-1"[..]));
    // The dial-back connection carries both directions.
    m2.to_send(1, b"from-2".to_vec());
    let r = recv(&mut rx1).await;
    assert_eq!((r.from, r.payload.as_slice()), (2, &b"from-2"[..]));
    assert!(m1.is_connected(2) && m2.is_connected(1));
}

#[tokio::test]
async fn larger_sid_is_kept_and_smaller_is_dialled_back() {
    let (m, mut rx, addr) = manager(2, &[]).await;
    // Sid 3 (larger): kept; frames sent right behind the initial message are delivered.
    let mut s3 = TcpStream::connect(addr).await.unwrap();
    let mut bytes = v1(3, "127.0.0.1:1");
    bytes.extend(frame(b"hello"));
    s3.write_all(&bytes).await.unwrap();
    let r = recv(&mut rx).await;
    assert_eq!((r.from, r.payload.as_slice()), (3, &b"hello"[..]));
    m.to_send(3, b"reply".to_vec());
    assert_eq!(read_frame(&mut s3).await, b"reply");
    // A second connection from 3: the newest wins, the old one is closed.
    let mut s3b = TcpStream::connect(addr).await.unwrap();
    s3b.write_all(&v1(3, "127.0.0.1:1")).await.unwrap();
    expect_closed(&mut s3).await;
    // It re-sends the last message on the new connection.
    assert_eq!(read_frame(&mut s3b).await, b"reply");

    // Sid 1 (smaller) announcing its listener: closed, then dialled back there.
    let back = TcpListener::bind(any_port()).await.unwrap();
    let back_addr = back.local_addr().unwrap();
    let mut s1 = TcpStream::connect(addr).await.unwrap();
    s1.write_all(&v1(1, &back_addr.to_string())).await.unwrap();
    expect_closed(&mut s1).await;
    let (mut d, _) = timeout(T, back.accept()).await.unwrap().unwrap();
    let init = read_initial(&mut d).await;
    assert_eq!(init.sid, 2);
    assert_eq!(init.protocol, ProtocolVersion::V1);
    assert_eq!(init.addresses, vec![ea(addr)]);
    d.write_all(&frame(b"on the dial-back")).await.unwrap();
    let r = recv(&mut rx).await;
    assert_eq!(
        (r.from, r.payload.as_slice()),
        (1, &b"on the dial-back"[..])
    );
}

#[tokio::test]
async fn send_queue_keeps_the_newest_and_resends_the_last_on_reconnect() {
    // Peer 1 is configured at a port where nothing listens yet.
    let free = TcpListener::bind(any_port()).await.unwrap();
    let peer_addr = free.local_addr().unwrap();
    drop(free);
    let (m, _rx, _) = manager(2, &[(1, peer_addr)]).await;
    for msg in [&b"a"[..], b"b", b"c"] {
        m.to_send(1, msg.to_vec());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!m.have_delivered(), "c is still queued");
    let peer = TcpListener::bind(peer_addr).await.unwrap();
    m.connect_all();
    let (mut s, _) = timeout(T, peer.accept()).await.unwrap().unwrap();
    assert_eq!(read_initial(&mut s).await.sid, 2);
    assert_eq!(read_frame(&mut s).await, b"c", "only the newest survives");
    let mut b = [0u8; 1];
    assert!(
        timeout(Duration::from_millis(300), s.read(&mut b))
            .await
            .is_err(),
        "nothing more"
    );
    assert!(m.have_delivered());
    // The peer drops the connection; a reconnect re-sends the last message.
    drop(s);
    tokio::time::sleep(Duration::from_millis(100)).await;
    m.connect_all();
    let (mut s, _) = timeout(T, peer.accept()).await.unwrap().unwrap();
    read_initial(&mut s).await;
    assert_eq!(read_frame(&mut s).await, b"c");
}

#[tokio::test]
async fn malformed_peers_are_closed_logged_once_and_the_node_goes_on() {
    let (logs, _g) = Logs::warnings();
    let (m, mut rx, addr) = manager(2, &[]).await;

    let mut bad_version = (-65530i64).to_be_bytes().to_vec();
    bad_version.extend(3i64.to_be_bytes());
    bad_version.extend(13i32.to_be_bytes());
    bad_version.extend(b"127.0.0.1:100");
    let mut bad_len = (-65536i64).to_be_bytes().to_vec();
    bad_len.extend(3i64.to_be_bytes());
    bad_len.extend(5000i32.to_be_bytes());
    let mut zero_len = (-65536i64).to_be_bytes().to_vec();
    zero_len.extend(3i64.to_be_bytes());
    zero_len.extend(0i32.to_be_bytes());
    let neg_frame = [v1(3, "127.0.0.1:1"), (-20i32).to_be_bytes().to_vec()].concat();
    let zero_frame = [v1(3, "127.0.0.1:1"), 0i32.to_be_bytes().to_vec()].concat();
    let huge_frame = [v1(3, "127.0.0.1:1"), 524_289i32.to_be_bytes().to_vec()].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("unknown protocol version", bad_version),
        ("address length 5000", bad_len),
        ("address length 0", zero_len),
        (
            "header without its address",
            v1(3, "127.0.0.1:1")[..20].to_vec(),
        ), // stalls
        ("badly formed address", {
            let mut b = (-65536i64).to_be_bytes().to_vec();
            b.extend(3i64.to_be_bytes());
            b.extend(12i32.to_be_bytes());
            b.extend(b"what is this");
            b
        }),
        ("port out of range", {
            let mut b = (-65536i64).to_be_bytes().to_vec();
            b.extend(3i64.to_be_bytes());
            b.extend(15i32.to_be_bytes());
            b.extend(b"127.0.0.1:70000");
            b
        }),
        ("negative frame length", neg_frame),
        ("zero frame length", zero_frame),
        ("huge frame", huge_frame),
        (
            "half an initial message",
            v1(3, "127.0.0.1:1")[..10].to_vec(),
        ),
    ];
    for (what, bytes) in cases {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let local = s.local_addr().unwrap().to_string();
        s.write_all(&bytes).await.unwrap();
        expect_closed(&mut s).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            logs.lines_with(&local).len(),
            1,
            "{what}: logged once with the peer's address"
        );
        assert!(!logs.lines_with("WARN").is_empty());
    }
    // Half a frame after a good initial message: Java waits forever (read timeout 0 after the
    // handshake); the stalled connection blocks nobody.
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(&[v1(4, "127.0.0.1:1"), vec![0, 0, 0, 40, 1, 2]].concat())
        .await
        .unwrap();
    // A short (5-byte) frame is delivered: deciding it is too short is the election's job.
    let mut ok = TcpStream::connect(addr).await.unwrap();
    ok.write_all(&[v1(3, "127.0.0.1:1"), frame(&[1, 2, 3, 4, 5])].concat())
        .await
        .unwrap();
    let r = recv(&mut rx).await;
    assert_eq!((r.from, r.payload.len()), (3, 5));
    // The listener survived everything (including the out-of-range port, which kills Java's).
    m.to_send(3, b"still here".to_vec());
    assert_eq!(read_frame(&mut ok).await, b"still here");
    drop(stalled);
}

/// Three native nodes in one process elect the highest sid; after the leader stops, the two
/// survivors agree on the next highest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_native_ensemble_of_three_elects_and_reelects() {
    use zkfle::election::{ElectionConfig, QuorumVerifier};
    use zkfle::net::{NodeConfig, StateEvent, run};
    use zkfle::wire::QuorumConfig;

    let ports = common::native_addresses(3);
    let text = ports
        .iter()
        .enumerate()
        .map(|(i, a)| format!("server.{}={}:1:{}:participant\n", i + 1, a.ip(), a.port()))
        .collect::<String>()
        + "version=0";
    let quorum = QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap()).unwrap();
    let mut nodes = Vec::new();
    let mut events = Vec::new();
    for sid in 1..=3i64 {
        let peers: Vec<(i64, SocketAddr)> = (1..=3i64)
            .filter(|s| *s != sid)
            .map(|s| (s, ports[s as usize - 1]))
            .collect();
        let mut net = cfg(sid, &peers);
        net.listen = vec![ports[sid as usize - 1]];
        let node = NodeConfig {
            election: ElectionConfig::new(sid, quorum.clone()),
            net,
            leader_gone_ms: 300,
            leader_sync_ms: 60_000,
            once: false,
            zab: None,
            reconfig_cfg_path: None,
            client_port: None,
            admin: None,
            metrics: None,
            status: Default::default(),
        };
        let (tx, rx) = mpsc::unbounded_channel::<StateEvent>();
        nodes.push(tokio::spawn(run(node, tx)));
        events.push(rx);
    }
    async fn decision(rx: &mut mpsc::UnboundedReceiver<StateEvent>) -> StateEvent {
        loop {
            let e = timeout(T, rx.recv()).await.expect("a decision").unwrap();
            if e.state != "LOOKING" {
                return e;
            }
        }
    }
    for (i, rx) in events.iter_mut().enumerate() {
        let e = decision(rx).await;
        assert_eq!(e.leader, 3);
        assert_eq!(e.state, if i == 2 { "LEADING" } else { "FOLLOWING" });
    }
    // The leader stops: its connections close, and 1 and 2 elect 2.
    nodes[2].abort();
    let _ = (&mut nodes[2]).await;
    let e2 = decision(&mut events[1]).await;
    let e1 = decision(&mut events[0]).await;
    assert_eq!((e2.leader, e2.state), (2, "LEADING"));
    assert_eq!((e1.leader, e1.state), (2, "FOLLOWING"));
    assert!(e1.election_epoch > 1 && e1.election_epoch == e2.election_epoch);
    for n in &nodes {
        n.abort();
    }
}

// ----- issue 14: the election port under abuse -----

/// A connection from the source address `from` (any 127.0.0.x: the kernel routes the whole
/// /8 to loopback), for guests from many addresses.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    timeout(T, sock.connect(to)).await.unwrap().unwrap()
}

/// Whether the peer has closed `s` (within `wait`).
async fn is_closed(s: &mut TcpStream, wait: Duration) -> bool {
    let mut b = [0u8; 64];
    matches!(timeout(wait, s.read(&mut b)).await, Ok(Ok(0) | Err(_)))
}

/// Answers every frame as the election would answer a non-member: with a message back.
fn reply_to_all(m: std::sync::Arc<Manager>, mut rx: mpsc::Receiver<Received>) {
    tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            m.to_send(r.from, b"my vote".to_vec());
        }
    });
}

#[tokio::test]
async fn a_non_members_state_goes_with_its_connection() {
    let (m, rx, addr) = manager(1, &[(2, "127.0.0.2:3888".parse().unwrap())]).await;
    let m = std::sync::Arc::new(m);
    reply_to_all(m.clone(), rx);
    for sid in 100..1100i64 {
        let mut s = connect_from(&format!("127.0.1.{}", sid % 200 + 1), addr).await;
        let mut bytes = v1(sid, "127.0.0.1:1");
        bytes.extend(frame(b"hello"));
        s.write_all(&bytes).await.unwrap();
        if sid % 100 == 0 {
            // The reply arrives: the non-member was answered while connected.
            assert_eq!(read_frame(&mut s).await, b"my vote");
        }
    }
    // Every connection is closed: nothing of those 1,000 sids is kept.
    let start = std::time::Instant::now();
    while m.tracked_sids() > 0 {
        assert!(
            start.elapsed() < T,
            "{} sids still tracked",
            m.tracked_sids()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A message for a non-member without a connection is dropped, not queued.
    m.to_send(5000, b"x".to_vec());
    assert_eq!(m.tracked_sids(), 0);
}

#[tokio::test]
async fn guests_are_bounded_per_address_and_in_total() {
    let mut c = cfg(1, &[]);
    c.socket_timeout = Duration::from_secs(30);
    c.limits.max_guests = 4;
    c.limits.max_guests_per_address = 2;
    let (_m, _rx) = Manager::start(c.clone()).await.unwrap();
    let (m, _rx2) = Manager::start(c).await.unwrap();
    let addr = m.local_addrs()[0];
    // Two silent connections from .9; a third from .9 closes the oldest of them.
    let mut a1 = connect_from("127.0.0.9", addr).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut a2 = connect_from("127.0.0.9", addr).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut a3 = connect_from("127.0.0.9", addr).await;
    assert!(is_closed(&mut a1, T).await, "the oldest from .9 is closed");
    assert!(!is_closed(&mut a2, Duration::from_millis(200)).await);
    // Two more from .10 fill the table (4); a fifth, from .11, closes the oldest of all (a2).
    let mut b1 = connect_from("127.0.0.10", addr).await;
    let _b2 = connect_from("127.0.0.10", addr).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut c1 = connect_from("127.0.0.11", addr).await;
    assert!(is_closed(&mut a2, T).await, "the oldest of all is closed");
    for s in [&mut a3, &mut b1, &mut c1] {
        assert!(!is_closed(s, Duration::from_millis(100)).await);
    }
    // A member's connection is not a guest: once identified, it stays whatever follows.
    let (mm, mut rx3) = Manager::start({
        let mut c = cfg(1, &[(7, "127.0.0.7:3888".parse().unwrap())]);
        c.limits.max_guests = 2;
        c.limits.max_guests_per_address = 2;
        c
    })
    .await
    .unwrap();
    let maddr = mm.local_addrs()[0];
    let mut member = connect_from("127.0.0.7", maddr).await;
    member.write_all(&v1(7, "127.0.0.7:3888")).await.unwrap();
    let mut floods = Vec::new();
    for i in 0..20 {
        floods.push(connect_from(&format!("127.0.2.{}", i + 1), maddr).await);
    }
    member.write_all(&frame(b"still here")).await.unwrap();
    let r = recv(&mut rx3).await;
    assert_eq!((r.from, r.payload.as_slice()), (7, &b"still here"[..]));
}

#[tokio::test]
async fn a_stalled_frame_is_closed_and_the_buffer_budget_holds() {
    let mut c = cfg(1, &[]);
    c.socket_timeout = Duration::from_millis(500);
    c.limits.buffer_allowance = 16 << 10;
    c.limits.max_buffered_total = 100 << 10;
    let (m, _rx) = Manager::start(c).await.unwrap();
    let addr = m.local_addrs()[0];
    // 120 KiB of a 200 KiB frame: 104 KiB beyond the allowance, more than the whole budget.
    let mut big = TcpStream::connect(addr).await.unwrap();
    let mut bytes = v1(50, "127.0.0.1:1");
    bytes.extend((200i32 << 10).to_be_bytes());
    bytes.extend(vec![0u8; 120 << 10]);
    big.write_all(&bytes).await.unwrap();
    let t = std::time::Instant::now();
    assert!(is_closed(&mut big, T).await);
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "closed by the budget, not the deadline"
    );
    // 10 bytes of a frame, then nothing: closed after the socket timeout.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let mut bytes = v1(51, "127.0.0.1:1");
    bytes.extend(100i32.to_be_bytes());
    bytes.extend([0u8; 10]);
    slow.write_all(&bytes).await.unwrap();
    let t = std::time::Instant::now();
    assert!(is_closed(&mut slow, T).await);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // An idle connection between frames stays (Java has no read timeout there either).
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut bytes = v1(52, "127.0.0.1:1");
    bytes.extend(frame(b"one"));
    idle.write_all(&bytes).await.unwrap();
    assert!(!is_closed(&mut idle, Duration::from_millis(1200)).await);
}

#[tokio::test]
async fn strict_peers_accept_a_members_sid_only_from_its_addresses() {
    let member: SocketAddr = "127.0.0.3:3888".parse().unwrap();
    for strict in [false, true] {
        let mut c = cfg(1, &[(3, member)]);
        c.strict_peers = strict;
        let (m, mut rx) = Manager::start(c).await.unwrap();
        let addr = m.local_addrs()[0];
        // Sid 3 claimed from .9, which the config does not name for it.
        let mut s = connect_from("127.0.0.9", addr).await;
        let mut bytes = v1(3, "127.0.0.3:3888");
        bytes.extend(frame(b"impostor"));
        s.write_all(&bytes).await.unwrap();
        if strict {
            assert!(is_closed(&mut s, T).await);
            assert!(
                timeout(Duration::from_millis(300), rx.recv())
                    .await
                    .is_err()
            );
        } else {
            // As Java: anyone may claim any sid.
            assert_eq!(recv(&mut rx).await.payload, b"impostor");
        }
        // From the configured address it is accepted in both modes.
        let mut s = connect_from("127.0.0.3", addr).await;
        let mut bytes = v1(3, "127.0.0.3:3888");
        bytes.extend(frame(b"member"));
        s.write_all(&bytes).await.unwrap();
        let r = recv(&mut rx).await;
        assert_eq!((r.from, r.payload.as_slice()), (3, &b"member"[..]));
    }
}

/// As Java 3.5+ does, a non-member that asks in the 3.4 form (a probe's 40-byte
/// notification) is answered in the 3.5+ form, with the config: tools such as `doctor` tell a
/// 3.4 server from a 3.5+ one by that answer. A member that speaks 3.4 gets the 3.4 form.
#[tokio::test]
async fn a_non_member_asking_in_the_3_4_form_gets_the_config() {
    use zkfle::wire::{Notification, ServerState};
    let current = Notification::current(
        ServerState::Following,
        2,
        0x1_0000_0000,
        1,
        1,
        "server.1=127.0.0.1:2888:3888:participant\nversion=0",
    )
    .encode()
    .unwrap();
    let (m, mut rx, addr) = manager(1, &[(2, "127.0.0.2:3888".parse().unwrap())]).await;
    let m = std::sync::Arc::new(m);
    let legacy_probe =
        Notification::without_config(ServerState::Looking, i64::MIN, i64::MIN, 0, i64::MIN)
            .encode()
            .unwrap();
    for (sid, from) in [(i64::MAX - 1, "127.0.0.9"), (2, "127.0.0.2")] {
        let mut s = connect_from(from, addr).await;
        let mut bytes = v1(sid, &format!("{from}:1"));
        bytes.extend(frame(&legacy_probe));
        s.write_all(&bytes).await.unwrap();
        let r = recv(&mut rx).await;
        assert_eq!(r.from, sid);
        m.to_send(sid, current.clone());
        let answer = Notification::decode(&read_frame(&mut s).await).unwrap();
        if sid == 2 {
            assert_eq!(answer.size(), 40, "a 3.4 member gets the 3.4 form");
        } else {
            assert!(
                answer.config.is_some(),
                "a non-member gets the config: {answer:?}"
            );
        }
    }
}
