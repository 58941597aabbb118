//! A LOOKING server sent a newer config with other members (reference A.2): Java's receiver
//! takes the config and shuts the election and its connection manager down at once (every
//! election connection closed, the election port no longer listening); a new election, its
//! logical clock from 0 and under the new config, begins only when `lookForLeader`'s current
//! poll returns. The same probe runs against Java (whatever `scripts/zk-env.sh` finds) and
//! against `zkfle join` in the same place, and both must answer alike.
//!
//! Sid 1 runs alone in a config of voters 1, 2 and 3 with `reconfigEnabled=true`; the test
//! speaks for 3 (and for non-voter 9) over raw TCP. Serialized with the loopback lock.

mod common;
use common::java;
use common::join::{Native, wait_for};

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use java::{End, Ensemble, Peer, lock_loopback};
use zkfle::wire::{ElectionAddress, InitialMessage, Notification, ProtocolVersion, ServerState};

const SERVER: &str = "127.0.0.1:3888";
const RECONFIG_KEYS: &str = "reconfigEnabled=true\n";
/// How long something the server does "at once" may take on a loaded two-core machine.
const PROMPT: Duration = Duration::from_secs(2);
/// The poll the config lands in: sent as soon as the server logged that its next poll waits
/// this long.
const POLL_MS: u64 = 1600;
/// The newer config's version.
const NEW_VERSION: u64 = 0x5_0000_0000;

fn server() -> SocketAddr {
    SERVER.parse().unwrap()
}

fn v1(sid: i64) -> InitialMessage {
    let addr = ElectionAddress::parse(&format!("127.0.0.{sid}:3888"), 0).unwrap();
    InitialMessage::versioned(ProtocolVersion::V1, sid, vec![addr])
}

/// What the server under test did.
#[derive(Debug)]
struct Seen {
    /// From the log line announcing the poll to the election port listening again.
    back_after: Duration,
    /// Connection attempts refused while the port was down.
    refused: usize,
}

/// Runs the probe against the server on 127.0.0.1:3888, whose log `log` returns.
fn probe(who: &str, log: &dyn Fn() -> String) -> Seen {
    wait_for(
        &format!("{who}: listening on {SERVER}"),
        Duration::from_secs(20),
        || TcpStream::connect(server()).ok(),
    );
    // The config text the server sends, from its answer to a non-voter (reference C row 1).
    let mut peer = Peer::handshake(server(), &v1(9), &[]);
    let looking = |leader, config: Vec<u8>| {
        Notification::current(ServerState::Looking, leader, 0, 1, 0, config)
    };
    peer.send(&looking(9, b"version=0".to_vec()));
    let answer = peer
        .wait_for(PROMPT * 5, |_| true)
        .unwrap_or_else(|| panic!("{who}: no answer to a non-voter"));
    let text = answer.config_text().expect("a config").into_owned();
    drop(peer);
    let new_config = text
        .lines()
        .filter(|l| !l.starts_with("version="))
        .chain([
            "server.4=127.0.0.4:2888:3888:participant",
            &format!("version={NEW_VERSION:x}"),
        ])
        .collect::<Vec<_>>()
        .join("\n");

    // Send it just after a poll of POLL_MS began.
    let polled = |l: &str| l.contains(&format!("Notification time out: {POLL_MS}"));
    let mark = log().len();
    wait_for(
        &format!("{who}: a poll of {POLL_MS} ms"),
        Duration::from_secs(20),
        || log()[mark..].lines().any(polled).then_some(()),
    );
    let poll_began = Instant::now();
    let mut three = Peer::handshake(
        server(),
        &v1(3),
        &[looking(3, new_config.into_bytes()).encode().unwrap()],
    );
    let end = three.read_to_end(PROMPT);
    assert!(
        matches!(end, End::Closed | End::Reset),
        "{who}: the connection that brought the config is still open"
    );

    // Down, then back when the poll returns.
    let mut refused = 0;
    let stream = loop {
        match TcpStream::connect_timeout(&server(), Duration::from_millis(200)) {
            Ok(s) => break s,
            Err(_) => refused += 1,
        }
        assert!(
            poll_began.elapsed() < Duration::from_millis(POLL_MS) + PROMPT * 2,
            "{who}: the election port did not come back"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let back_after = poll_began.elapsed();
    stream.set_nodelay(true).unwrap();
    let mut three = Peer::wrap(stream, zkfle::wire::Direction::FromAcceptor);
    three.send_raw(&v1(3).encode().unwrap());
    let first = three
        .wait_for(PROMPT, |_| true)
        .unwrap_or_else(|| panic!("{who}: nothing on a connection after the restart"));
    assert_eq!(
        (
            first.state,
            first.leader,
            first.election_epoch,
            first.config_version()
        ),
        (ServerState::Looking, 1, 1, Some(NEW_VERSION)),
        "{who}: a new election (round 1) under the new config"
    );
    let logged = log()[mark..].to_string();
    assert!(
        logged.contains("restarting leader election"),
        "{who}: no `restarting leader election` line"
    );
    Seen {
        back_after,
        refused,
    }
}

/// The shared checks: the port went down, and came back only when the poll returned.
fn check(who: &str, seen: &Seen) {
    eprintln!("{who}: {seen:?}");
    assert!(seen.refused > 0, "{who}: the election port kept listening");
    // The poll began before the log line was read, so a little earlier than `poll_began`.
    assert!(
        seen.back_after >= Duration::from_millis(POLL_MS - 500),
        "{who}: restarted {:?} into a poll of {POLL_MS} ms",
        seen.back_after
    );
}

#[test]
fn java_and_zkfle_restart_their_election_when_the_poll_returns() {
    let _lock = lock_loopback();
    {
        let e = Ensemble::start(
            "restart-java",
            "1:participant,2:participant:external,3:participant:external",
            &["--no-start"],
        );
        e.append_config(RECONFIG_KEYS);
        e.start_node(1);
        let seen = probe("Java", &|| e.log(1));
        check("Java", &seen);
    }
    {
        let e = Ensemble::start(
            "restart-zkfle",
            "1:participant:external,2:participant:external,3:participant:external",
            &["--no-start"],
        );
        e.append_config(RECONFIG_KEYS);
        let n = Native::start(&e, 1, &[]);
        let seen = probe("zkfle", &|| n.log());
        check("zkfle", &seen);
    }
}
