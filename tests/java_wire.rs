//! zkfle's codec against a live Java ZooKeeper server (whatever `scripts/zk-env.sh` finds; the
//! Debian package 3.8.0 here). One server, sid 1, runs alone in a config that also lists
//! participants 2 and 3 and observer 4, which are never started: the test speaks for them
//! (and for sids 0 and 9, which the config does not know) over raw TCP, building every
//! message with `zkfle::wire` and decoding every byte Java sends with it. Each case checks both
//! what comes back on the socket and what the server logged. The behaviour checked is Java's
//! QuorumCnxManager and FastLeaderElection (their source, read for behaviour); what the source
//! does not make plain is in docs/java-behaviour.md.
//!
//! Java stays LOOKING throughout: every vote sent for a voter is "worse" than its own
//! (leader 2, zxid 0, peer epoch -5 against its (1, 0, 0)), so it never reaches a quorum, but a
//! higher round still makes it jump to that round and broadcast (D.4.2), which is how a case
//! sees that a message was accepted.

mod common;
use common::java;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use java::{End, Ensemble, Peer, Received, lock_loopback};
use zkfle::wire::{
    Direction, ElectionAddress, InitialMessage, JavaView, Notification, ProtocolVersion,
    QuorumConfig, Role, ServerState, StreamDecoder,
};

/// Java's election address (sid 1 of the default layout).
const JAVA: &str = "127.0.0.1:3888";
const JAVA_SID: i64 = 1;
/// How long a reply Java sends "at once" may take on a loaded two-core machine.
const PROMPT: Duration = Duration::from_secs(2);
/// The worse vote's peer epoch: below Java's 0, so Java never adopts it.
const WORSE_EPOCH: i64 = -5;

fn java_addr() -> SocketAddr {
    JAVA.parse().unwrap()
}

struct Ctx {
    ens: Ensemble,
    /// The config text Java sends; our current-format messages carry it back.
    config: Vec<u8>,
    /// Java's round (logicalclock) as last seen.
    lc: i64,
    /// Sids Java has written to (or queued a message for) since it started.
    wrote_to: BTreeSet<i64>,
}

impl Ctx {
    /// A round above anything Java has seen.
    fn next_round(&self) -> i64 {
        self.lc + 10
    }

    /// A current-format LOOKING vote from a voter that Java will not adopt.
    fn worse(&self, round: i64) -> Notification {
        Notification::current(
            ServerState::Looking,
            2,
            0,
            round,
            WORSE_EPOCH,
            self.config.clone(),
        )
    }

    /// Connects as `sid` with `initial` (a V1 message when `None`). Java's SendWorker for a
    /// new connection first writes what it had queued for that sid or, with nothing queued,
    /// re-sends its last message to that sid (reference B.5); so when Java has written to `sid`
    /// before, this waits for that one notification and returns it, before anything is sent
    /// that could race with it.
    fn open(&mut self, sid: i64, initial: Option<InitialMessage>) -> (Peer, Option<Notification>) {
        let initial = initial.unwrap_or_else(|| v1(sid));
        let mut peer = Peer::handshake(java_addr(), &initial, &[]);
        let greeting = self.wrote_to.contains(&sid).then(|| {
            peer.wait_for(PROMPT, |_| true).unwrap_or_else(|| {
                panic!("Java did not re-send its last message on a new connection from {sid}")
            })
        });
        (peer, greeting)
    }

    /// [`Ctx::open`] for voter `sid`.
    /// Java's last message to a voter is its own LOOKING vote in its current round (a
    /// broadcast or an answer), so that is what the new connection opens with.
    fn voter(&mut self, sid: i64) -> (Peer, Notification) {
        let (peer, greeting) = self.open(sid, None);
        let greeting = greeting.expect("Java always has a message for a voter");
        assert_eq!(
            (greeting.state, greeting.leader, greeting.election_epoch),
            (ServerState::Looking, JAVA_SID, self.lc),
            "Java's first message to voter {sid} on a new connection"
        );
        (peer, greeting)
    }

    /// Asks Java for its round the way that disturbs nothing: a non-voter (sid 9) gets an
    /// immediate reply carrying `ee = logicalclock` (reference C row 1).
    fn probe_round(&mut self) -> i64 {
        let (mut peer, _) = self.open(9, None);
        peer.send(&forty(ServerState::Looking, 9, 0, 0, 1));
        let reply = peer
            .wait_for(PROMPT, |_| true)
            .expect("Java answers a non-voter at once");
        self.wrote_to.insert(9);
        self.lc = reply.election_epoch;
        reply.election_epoch
    }

    /// Asserts that Java logged, after `mark`, a `Notification:` line with the fields Java
    /// reads from `n` (as zkfle's `java_view` predicts them) coming from `sid`.
    fn expect_logged(&self, mark: usize, sid: i64, n: &Notification) -> String {
        let JavaView::Accepted {
            peer_epoch,
            version,
            ..
        } = n.java_view()
        else {
            panic!("expect_logged on a message zkfle says Java drops: {n:?}")
        };
        let fields = format!(
            "n.sid:{sid}, n.state:{}, n.leader:{}, n.round:0x{:x}, n.peerEpoch:0x{:x}, n.zxid:0x{:x}, message format version:0x{:x}, ",
            n.state.name(),
            n.leader,
            n.election_epoch,
            peer_epoch,
            n.zxid,
            version
        );
        self.ens
            .wait_log(
                JAVA_SID,
                mark,
                &["Notification: my state:LOOKING; ", &fields],
                PROMPT,
            )
            .unwrap_or_else(|| {
                panic!(
                    "no log line with `{fields}`; logged since:\n{}",
                    tail(&self.ens.log_since(JAVA_SID, mark))
                )
            })
    }

    /// Sends `payload` (which carries round `round`) from voter 2 and checks that Java accepted
    /// it: it jumps to `round` and broadcasts its own vote in that round, and logs it.
    fn expect_accepted(&mut self, what: &str, payload: &[u8], round: i64) -> Notification {
        let n = Notification::decode(payload).expect("an accepted size decodes");
        assert!(
            matches!(n.java_view(), JavaView::Accepted { .. }),
            "{what}: zkfle says Java drops it"
        );
        let mark = self.ens.log_mark(JAVA_SID);
        let (mut peer, _) = self.voter(2);
        peer.send_payload(payload);
        let jump = peer
            .wait_for(PROMPT, |m| m.election_epoch == round)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: Java did not jump to round {round}; got {:?}; log:\n{}",
                    peer.notifications(),
                    tail(&self.ens.log_since(JAVA_SID, mark))
                )
            });
        self.lc = round;
        assert_eq!(
            (jump.state, jump.leader, jump.zxid, jump.peer_epoch),
            (ServerState::Looking, JAVA_SID, 0, Some(0)),
            "{what}: Java keeps its own vote"
        );
        self.expect_logged(mark, 2, &n);
        n
    }

    /// Sends `payload` (carrying round `round`) from voter 2, then a LOOKING vote from an old
    /// round, which Java answers at once with its round (reference C row 3). The connection
    /// keeps the order, so that answer shows Java did not take `round`. Returns what Java
    /// logged meanwhile.
    fn expect_dropped(&mut self, what: &str, payload: &[u8], round: i64) -> String {
        let before = self.lc;
        let mark = self.ens.log_mark(JAVA_SID);
        let (mut peer, _) = self.voter(2);
        peer.send_payload(payload);
        peer.send(&self.worse(0));
        let answer = peer.wait_for(PROMPT, |_| true).unwrap_or_else(|| {
            panic!(
                "{what}: Java did not answer the old-round vote behind it (connection {:?}); log:\n{}",
                peer.end,
                tail(&self.ens.log_since(JAVA_SID, mark))
            )
        });
        assert_eq!(answer.election_epoch, before, "{what}: Java's round moved");
        // Nothing in `round` follows either.
        let late = peer.wait_for(Duration::from_millis(300), |m| m.election_epoch == round);
        assert!(late.is_none(), "{what}: Java broadcast round {round}");
        assert_eq!(peer.end, None, "{what}: Java closed the connection");
        let logged = self.ens.log_since(JAVA_SID, mark);
        assert!(
            !logged.contains(&format!("n.round:0x{round:x},")),
            "{what}: Java logged a notification of round {round}:\n{}",
            tail(&logged)
        );
        logged
    }
}

fn v1(sid: i64) -> InitialMessage {
    let addr = ElectionAddress::parse(&format!("127.0.0.{}:3888", sid.clamp(0, 255)), 0).unwrap();
    InitialMessage::versioned(ProtocolVersion::V1, sid, vec![addr])
}

/// The 3.4.6-3.4.14 40-byte form with version `version`.
fn forty(state: ServerState, leader: i64, zxid: i64, round: i64, version: i32) -> Notification {
    Notification {
        state,
        leader,
        zxid,
        election_epoch: round,
        peer_epoch: Some(WORSE_EPOCH),
        version: Some(version),
        config: None,
        trailing: Vec::new(),
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

// ------------------------------------------------------------------------------- cases

/// A non-voter (unknown sid 9, observer 4) gets an immediate reply with Java's current vote and
/// round, whatever state code it sends, and no `Notification:` line (reference C row 1).
fn non_voters_get_the_current_vote(ctx: &mut Ctx) {
    let lc = ctx.probe_round();
    for (sid, state) in [
        (9, ServerState::Looking),
        (9, ServerState::Observing),
        (9, ServerState::Unknown(42)),
        (4, ServerState::Looking),
        (4, ServerState::Observing),
    ] {
        let mark = ctx.ens.log_mark(JAVA_SID);
        let (mut peer, greeting) = ctx.open(sid, None);
        if let Some(g) = greeting {
            // The re-sent last reply: the same vote, in the round of that reply.
            assert_eq!(
                (g.state, g.leader, g.election_epoch),
                (ServerState::Looking, JAVA_SID, lc)
            );
        }
        let sent = Instant::now();
        peer.send(&Notification::current(
            state,
            sid,
            0,
            lc + 100,
            0,
            ctx.config.clone(),
        ));
        let reply = peer
            .wait_for(PROMPT, |_| true)
            .unwrap_or_else(|| panic!("sid {sid} ({state:?}) got no reply"));
        let took = sent.elapsed();
        ctx.wrote_to.insert(sid);
        assert_eq!(
            (
                reply.state,
                reply.leader,
                reply.zxid,
                reply.election_epoch,
                reply.peer_epoch,
                reply.version
            ),
            (ServerState::Looking, JAVA_SID, 0, lc, Some(0), Some(2)),
            "reply to sid {sid} ({state:?})"
        );
        assert_eq!(reply.config.as_deref(), Some(ctx.config.as_slice()));
        assert!(took < Duration::from_secs(1), "reply took {took:?}");
        // Only one reply: the message was not enqueued, so Java did not jump to its round.
        assert!(
            peer.wait_for(Duration::from_millis(200), |_| true)
                .is_none(),
            "a second message to non-voter {sid}"
        );
        assert!(
            !ctx.ens
                .log_since(JAVA_SID, mark)
                .contains(&format!("n.sid:{sid},")),
            "Java logged a notification from non-voter {sid}"
        );
        // The next case reconnects as the same sid: first let Java tear this connection down.
        // Otherwise the old connection's end can drop the new one's sender (seen once in
        // CI: `Removing entry from senderWorkerMap sid=9` right after the new connection's
        // handshake, and the reply never sent), a race of Java's, not what is tested here.
        let closing = ctx.ens.log_mark(JAVA_SID);
        drop(peer);
        let _ = ctx.ens.wait_log(
            JAVA_SID,
            closing,
            &[&format!("Removing entry from senderWorkerMap sid={sid}")],
            Duration::from_secs(2),
        );
    }
    assert_eq!(ctx.probe_round(), lc, "non-voters moved Java's round");
}

/// Legacy (8-byte sid 3), V1 (sid 2) and V2 (sid 3, two addresses) initial messages from
/// larger sids are accepted; a frame sent in the same write is read, and Java jumps to its
/// round (reference A.1, D.4.2).
fn initial_message_forms_are_accepted(ctx: &mut Ctx) {
    let v2 = InitialMessage::versioned(
        ProtocolVersion::V2,
        3,
        vec![
            ElectionAddress::parse("127.0.0.3:3888", 0).unwrap(),
            ElectionAddress::parse("127.0.1.3:3889", 0).unwrap(),
        ],
    );
    for (what, initial) in [
        ("legacy sid 3", InitialMessage::legacy(3)),
        ("V1 sid 2", v1(2)),
        ("V2 sid 3", v2.clone()),
        (
            "V2 sid 2",
            InitialMessage {
                sid: 2,
                ..v2.clone()
            },
        ),
    ] {
        let bytes = initial.encode().unwrap();
        assert_eq!(
            bytes.len(),
            match initial.protocol {
                ProtocolVersion::Legacy => 8,
                _ => 20 + initial.address_text.len(),
            }
        );
        let round = ctx.next_round();
        let vote = ctx.worse(round);
        let mark = ctx.ens.log_mark(JAVA_SID);
        let mut peer = Peer::handshake(java_addr(), &initial, &[vote.encode().unwrap()]);
        let jump = peer
            .wait_for(PROMPT, |n| n.election_epoch == round)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: no broadcast in round {round}; got {:?}, end {:?}; log:\n{}",
                    peer.notifications(),
                    peer.end,
                    tail(&ctx.ens.log_since(JAVA_SID, mark))
                )
            });
        ctx.lc = round;
        assert_eq!(
            (jump.state, jump.leader, jump.zxid, jump.peer_epoch),
            (ServerState::Looking, JAVA_SID, 0, Some(0)),
            "{what}"
        );
        ctx.expect_logged(mark, initial.sid, &vote);
        // The legacy form has no initial-message object, so no line about it.
        if initial.protocol != ProtocolVersion::Legacy {
            let addresses = initial
                .addresses
                .iter()
                .map(|a| format!("/{}", a.text))
                .collect::<Vec<_>>()
                .join(", ");
            let parsed = format!(
                "Initial message parsed by {JAVA_SID}: InitialMessage{{sid={}, electionAddr=[{addresses}]}}",
                initial.sid
            );
            ctx.ens
                .wait_log(JAVA_SID, mark, &[&parsed], PROMPT)
                .unwrap_or_else(|| panic!("{what}: no `{parsed}` line"));
        }
    }
}

/// Initial messages Java refuses: the connection is closed and nothing is sent back
/// (reference A.1 checks 2, 3, 6-7).
fn bad_initial_messages_are_closed(ctx: &mut Ctx) {
    let header = |version: i64, sid: i64, len: i32| {
        let mut b = version.to_be_bytes().to_vec();
        b.extend(sid.to_be_bytes());
        b.extend(len.to_be_bytes());
        b
    };
    // Deliberately malformed, so written by hand except where the codec can express it.
    let mut unknown_version = header(-65530, 2, 14);
    unknown_version.extend(b"127.0.0.2:3888");
    let garbage = InitialMessage {
        protocol: ProtocolVersion::V1,
        sid: 2,
        address_text: "what is this".into(),
        addresses: Vec::new(),
    }
    .encode()
    .unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "protocol version -65530",
            unknown_version,
            "Got unrecognized protocol version",
        ),
        (
            "address length 0",
            header(-65536, 2, 0),
            "Unreasonable buffer length",
        ),
        (
            "address length 5000",
            header(-65536, 2, 5000),
            "Unreasonable buffer length",
        ),
        ("address `what is this`", garbage, "Badly formed address"),
    ];
    for (what, bytes, why) in cases {
        assert!(
            InitialMessage::decode(&bytes).is_err(),
            "{what}: zkfle decodes it"
        );
        let mark = ctx.ens.log_mark(JAVA_SID);
        let mut peer = Peer::connect(java_addr());
        peer.send_raw(&bytes);
        let end = peer.read_to_end(PROMPT);
        assert!(
            matches!(end, End::Closed | End::Reset),
            "{what}: connection {end:?}"
        );
        assert!(
            peer.received.is_empty(),
            "{what}: Java sent {:?}",
            peer.received
        );
        ctx.ens
            .wait_log(JAVA_SID, mark, &[why], PROMPT)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: no `{why}` in the log:\n{}",
                    tail(&ctx.ens.log_since(JAVA_SID, mark))
                )
            });
    }
    // The listener survived all of them.
    ctx.probe_round();
}

/// 28 bytes: accepted, the peer epoch taken from the zxid's high half, format version 0.
fn notification_28_bytes(ctx: &mut Ctx) {
    let round = ctx.next_round();
    let n = Notification {
        state: ServerState::Looking,
        leader: 2,
        zxid: WORSE_EPOCH << 32,
        election_epoch: round,
        peer_epoch: None,
        version: None,
        config: None,
        trailing: Vec::new(),
    };
    let bytes = n.encode().unwrap();
    assert_eq!(bytes.len(), 28);
    let n = ctx.expect_accepted("28 bytes", &bytes, round);
    assert_eq!(n.effective_peer_epoch(), WORSE_EPOCH);
}

/// 36 bytes (3.4.0-3.4.5): dropped as partial / malformed.
fn notification_36_bytes(ctx: &mut Ctx) {
    let round = ctx.next_round();
    let n = Notification {
        version: None,
        ..forty(ServerState::Looking, 2, 0, round, 1)
    };
    let bytes = n.encode().unwrap();
    assert_eq!(bytes.len(), 36);
    assert!(matches!(n.java_view(), JavaView::Dropped(_)));
    let log = ctx.expect_dropped("36 bytes", &bytes, round);
    assert!(
        log.lines()
            .any(|l| l.contains("partial / malformed") && l.contains("length: 36")),
        "36 bytes: no `partial / malformed ... length: 36` line:\n{}",
        tail(&log)
    );
}

/// 40 bytes with version 7: accepted; Java does not read the version (logs 0).
fn notification_40_bytes_version_7(ctx: &mut Ctx) {
    let round = ctx.next_round();
    let bytes = forty(ServerState::Looking, 2, 0, round, 7)
        .encode()
        .unwrap();
    assert_eq!(bytes.len(), 40);
    ctx.expect_accepted("40 bytes, version 7", &bytes, round);
}

/// 41 bytes: version 1 accepted (the extra byte ignored); version 2 dropped (no room for the
/// config length).
fn notification_41_bytes(ctx: &mut Ctx) {
    let round = ctx.next_round();
    let v1 = Notification {
        trailing: vec![0xab],
        ..forty(ServerState::Looking, 2, 0, round, 1)
    };
    let bytes = v1.encode().unwrap();
    assert_eq!(bytes.len(), 41);
    ctx.expect_accepted("41 bytes, version 1", &bytes, round);

    let round = ctx.next_round();
    let mut bytes = forty(ServerState::Looking, 2, 0, round, 2)
        .encode()
        .unwrap();
    bytes.push(0xab);
    assert!(Notification::decode(&bytes).is_err(), "zkfle decodes it");
    let log = ctx.expect_dropped("41 bytes, version 2", &bytes, round);
    assert!(
        log.lines()
            .any(|l| l.contains("partial / malformed") && l.contains("length: 41")),
        "41 bytes v2: no `partial / malformed ... length: 41` line:\n{}",
        tail(&log)
    );
}

/// 44 bytes, version 2 with an empty config: accepted.
fn notification_44_bytes_empty_config(ctx: &mut Ctx) {
    let round = ctx.next_round();
    let n = Notification::current(ServerState::Looking, 2, 0, round, WORSE_EPOCH, Vec::new());
    let bytes = n.encode().unwrap();
    assert_eq!(bytes.len(), 44);
    ctx.expect_accepted("44 bytes, config length 0", &bytes, round);
}

/// A negative config length, and one larger than the message: dropped.
fn notification_bad_config_length(ctx: &mut Ctx) {
    // 48 bytes: version 2, config length -123, four more bytes.
    let round = ctx.next_round();
    let mut bytes = Notification::current(ServerState::Looking, 2, 0, round, WORSE_EPOCH, vec![])
        .encode()
        .unwrap();
    bytes[40..44].copy_from_slice(&(-123i32).to_be_bytes());
    bytes.extend([0; 4]);
    assert!(Notification::decode(&bytes).is_err(), "zkfle decodes it");
    let log = ctx.expect_dropped("config length -123", &bytes, round);
    assert!(
        log.contains("partial / malformed response message sent by sid=2 (message length: 48)")
            && log.contains("Invalid configLength in notification message! sid=2, capacity=48, version=2, configLength=-123"),
        "config length -123: nothing about it in the log:\n{}",
        tail(&log)
    );

    // 77 bytes: config length 10000, 29 bytes of text.
    let round = ctx.next_round();
    let mut bytes = Notification::current(
        ServerState::Looking,
        2,
        0,
        round,
        WORSE_EPOCH,
        b"my very invalid config string".to_vec(),
    )
    .encode()
    .unwrap();
    assert_eq!(bytes.len(), 73);
    bytes[40..44].copy_from_slice(&10000i32.to_be_bytes());
    assert!(Notification::decode(&bytes).is_err(), "zkfle decodes it");
    let log = ctx.expect_dropped("config length 10000", &bytes, round);
    assert!(
        log.contains("partial / malformed response message sent by sid=2 (message length: 73)")
            && log.contains("Invalid configLength in notification message! sid=2, capacity=73, version=2, configLength=10000"),
        "config length 10000: nothing about it in the log:\n{}",
        tail(&log)
    );
}

/// A voter's message with an unknown state code is dropped without a word (reference C row 2).
fn unknown_state_from_a_voter(ctx: &mut Ctx) {
    for code in [7, -1] {
        let round = ctx.next_round();
        let n = Notification {
            state: ServerState::Unknown(code),
            ..ctx.worse(round)
        };
        let bytes = n.encode().unwrap();
        assert_eq!(Notification::decode(&bytes).unwrap(), n);
        ctx.expect_dropped(&format!("state {code}"), &bytes, round);
    }
}

/// Frame lengths 0, -20 and 524289 make Java close the connection (reference A.3).
fn bad_frame_lengths_close(ctx: &mut Ctx) {
    for len in [0i32, -20, 524_289] {
        let mut decoder = StreamDecoder::at_frame_boundary(0);
        let prefix = len.to_be_bytes();
        assert!(
            decoder.decode(&mut &prefix[..]).is_err(),
            "zkfle takes {len}"
        );
        let mark = ctx.ens.log_mark(JAVA_SID);
        let (mut peer, _) = ctx.voter(2);
        peer.send_raw(&prefix);
        let end = peer.read_to_end(PROMPT);
        assert!(
            matches!(end, End::Closed | End::Reset),
            "frame length {len}: connection {end:?}; log:\n{}",
            tail(&ctx.ens.log_since(JAVA_SID, mark))
        );
        ctx.ens
            .wait_log(
                JAVA_SID,
                mark,
                &[&format!(
                    "IOException: Received packet with invalid packet: {len}"
                )],
                PROMPT,
            )
            .unwrap_or_else(|| panic!("frame length {len}: no `invalid packet` line"));
    }
    ctx.probe_round();
}

/// A connection from a smaller sid (0, unknown to the config) announcing a listener of ours:
/// Java closes it and dials back, opening with a V1 initial message that carries its own
/// election address; then it answers sid 0, a non-voter, on that connection (reference B.1,
/// B.2).
fn java_dials_back_a_smaller_sid(ctx: &mut Ctx) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let ours = listener.local_addr().unwrap();
    let initial = InitialMessage::versioned(
        ProtocolVersion::V1,
        0,
        vec![ElectionAddress::from_socket_addr(ours)],
    );
    let (mut peer, _) = ctx.open(0, Some(initial));
    let end = peer.read_to_end(PROMPT);
    assert!(
        matches!(end, End::Closed | End::Reset) && peer.received.is_empty(),
        "Java kept sid 0's connection ({end:?}, {:?})",
        peer.received
    );
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "Java did not dial back {ours}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let mut back = Peer::wrap(stream, Direction::FromInitiator);
    let Some(Received::Initial(m, raw)) = back.next(PROMPT) else {
        panic!("Java's dial-back did not open with an initial message")
    };
    assert_eq!(m.protocol, ProtocolVersion::V1);
    assert_eq!(m.sid, JAVA_SID);
    assert_eq!(m.address_text, JAVA);
    assert_eq!(m.addresses.len(), 1);
    assert_eq!(m.addresses[0].socket_addr(), Some(java_addr()));
    assert_eq!(raw.len(), 20 + JAVA.len());
    // Nothing queued for sid 0, so Java says nothing until spoken to; then it answers the
    // non-voter at once.
    back.send(&ctx.worse(0));
    let reply = back
        .wait_for(PROMPT, |_| true)
        .expect("Java answers sid 0 on its own connection");
    assert_eq!(
        (reply.state, reply.leader, reply.election_epoch),
        (ServerState::Looking, JAVA_SID, ctx.lc)
    );
    assert_eq!(
        back.received.len(),
        2,
        "Java sent more than its initial message and one reply"
    );
}

// ------------------------------------------------------------------------------- driver

#[test]
fn java_speaks_our_wire() {
    let started = Instant::now();
    let _lock = lock_loopback();
    let ens = Ensemble::start(
        "java-wire",
        "1:participant,2:participant:external,3:participant:external,4:observer:external",
        &[],
    );
    let boot = started.elapsed();
    let mut ctx = Ctx {
        ens,
        config: Vec::new(),
        lc: 0,
        // Java's first broadcast went to the voters' queues (nobody listens there).
        wrote_to: BTreeSet::from([2, 3]),
    };
    // First contact: learn Java's round and its config text (and check that text).
    {
        let mut peer = Peer::handshake(java_addr(), &v1(9), &[]);
        peer.send(&forty(ServerState::Looking, 9, 0, 0, 1));
        let reply = peer
            .wait_for(Duration::from_secs(5), |_| true)
            .expect("Java answers a non-voter");
        ctx.wrote_to.insert(9);
        ctx.lc = reply.election_epoch;
        ctx.config = reply.config.clone().expect("Java sends its config");
        let text = reply.config_text().unwrap().into_owned();
        let cfg = QuorumConfig::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let roles: Vec<(i64, Role)> = cfg.servers().map(|s| (s.id, s.role())).collect();
        assert_eq!(
            roles,
            [
                (1, Role::Participant),
                (2, Role::Participant),
                (3, Role::Participant),
                (4, Role::Observer)
            ]
        );
        assert_eq!(reply.config_version(), Some(0));
        assert_eq!(
            cfg.server(1).unwrap().addresses[0].election().text,
            JAVA,
            "{text}"
        );
    }

    type Case = fn(&mut Ctx);
    let cases: [(&str, Case); 11] = [
        (
            "non_voters_get_the_current_vote",
            non_voters_get_the_current_vote,
        ),
        (
            "initial_message_forms_are_accepted",
            initial_message_forms_are_accepted,
        ),
        (
            "bad_initial_messages_are_closed",
            bad_initial_messages_are_closed,
        ),
        ("notification_28_bytes", notification_28_bytes),
        ("notification_36_bytes", notification_36_bytes),
        (
            "notification_40_bytes_version_7",
            notification_40_bytes_version_7,
        ),
        ("notification_41_bytes", notification_41_bytes),
        (
            "notification_44_bytes_empty_config",
            notification_44_bytes_empty_config,
        ),
        (
            "notification_bad_config_length",
            notification_bad_config_length,
        ),
        ("unknown_state_from_a_voter", unknown_state_from_a_voter),
        ("bad_frame_lengths_close", bad_frame_lengths_close),
    ];
    let mut failed = Vec::new();
    let mut run = |name: &str, case: &dyn Fn(&mut Ctx), ctx: &mut Ctx| {
        let t = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| case(ctx)));
        eprintln!(
            "{name}: {} in {:.2?}",
            if result.is_ok() { "ok" } else { "FAILED" },
            t.elapsed()
        );
        if result.is_err() {
            failed.push(name.to_string());
            // Whatever the case left half done, learn the round again.
            let _ = catch_unwind(AssertUnwindSafe(|| ctx.probe_round()));
        }
    };
    for (name, case) in cases {
        run(name, &case, &mut ctx);
    }
    run(
        "java_dials_back_a_smaller_sid",
        &java_dials_back_a_smaller_sid,
        &mut ctx,
    );
    // Still alive and still LOOKING: no case made it decide.
    assert!(
        !ctx.ens
            .log(JAVA_SID)
            .lines()
            .any(|l| l.contains("About to leave FLE instance")),
        "Java decided during the test"
    );
    eprintln!(
        "Java up in {boot:.2?}; all cases in {:.2?}",
        started.elapsed()
    );
    // Panic with the ensemble still alive, so its directory (logs) is kept.
    assert!(failed.is_empty(), "failed: {failed:?}");
}
