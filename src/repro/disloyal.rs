//! ZOOKEEPER-3109: a disloyal voter. zkfle stands in for a member whose server is down
//! (`--peer-sid`), votes the target into LEADING, never follows it, and goes LOOKING again.
//! A leader then waits for followers that never come: up to initLimit x tickTime before it
//! gives up. The fix (3.5.10/3.6+) lets a leader quit as soon as a voter it counted reports
//! LOOKING, but only when `zookeeper.leader.maxTimeToWaitForEpoch` is set (default -1: off).
//!
//! The election connections go through the connection manager of `zkfle join`
//! ([`crate::net::manager`]), listening on the member's election address, since the target
//! dials a lower sid back.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Target, Verdict, target_sid};
use crate::net::dialect::WireDialect;
use crate::net::manager::{Manager, NetConfig};
use crate::net::probe::{self, Answer, ProbeOptions};
use crate::wire::{Notification, QuorumConfig, ServerState};

/// How long a leader may take to quit after its voter went LOOKING and still count as having
/// quit because of it (the fix acts on the next notification; zkfle re-sends every 200 ms).
const QUIT_PROMPTLY: Duration = Duration::from_millis(1500);
/// How long zkfle watches a leader that does not quit.
const WATCH_LIMIT: Duration = Duration::from_secs(60);

pub(super) fn zookeeper_3109(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    ev: &mut Vec<String>,
) -> Verdict {
    if before.state != ServerState::Looking {
        ev.push(format!(
            "the target is {}: this repro needs a server that is LOOKING because its ensemble lacks the vote of a member whose server is down (zkfle gives that vote)",
            before.state.name()
        ));
        return Verdict::Inconclusive;
    }
    let Some(config) = before.config.clone().or_else(|| opts.config.clone()) else {
        ev.push("the target's answer carries no config (3.4): give the ensemble's members with --config zoo.cfg".into());
        return Verdict::Inconclusive;
    };
    let Some(me) = opts.peer_sid else {
        ev.push(
            "needs --peer-sid SID: the member whose server is down, whose vote zkfle gives".into(),
        );
        return Verdict::Inconclusive;
    };
    let Some(leader) = target_sid(target, before).or_else(|| {
        config
            .servers()
            .find(|s| {
                s.addresses
                    .iter()
                    .any(|a| a.election().socket_addr() == Some(target.addr))
            })
            .map(|s| s.id)
    }) else {
        ev.push(format!(
            "no member of the config has the election address {}",
            target.addr
        ));
        return Verdict::Inconclusive;
    };
    let Some(my_addr) = config
        .server(me)
        .and_then(|s| s.addresses.first())
        .and_then(|a| a.election().socket_addr())
    else {
        ev.push(format!(
            "member {me} is not in the config, or its election address is not an IP address"
        ));
        return Verdict::Inconclusive;
    };
    if me == leader {
        ev.push("--peer-sid is the target's own sid".into());
        return Verdict::Inconclusive;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            ev.push(format!("cannot start the runtime: {e}"));
            return Verdict::Inconclusive;
        }
    };
    runtime.block_on(run(target, opts, before, &config, me, leader, my_addr, ev))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    target: &Target,
    opts: &super::ReproOptions,
    before: &Answer,
    config: &QuorumConfig,
    me: i64,
    leader: i64,
    my_addr: SocketAddr,
    ev: &mut Vec<String>,
) -> Verdict {
    let legacy = super::is_34(before);
    let mut peers = BTreeMap::new();
    peers.insert(
        leader,
        vec![crate::wire::ElectionAddress::from_socket_addr(target.addr)],
    );
    let net = NetConfig {
        my_sid: me,
        listen: vec![my_addr],
        announce: Vec::new(),
        multi_address: false,
        peers,
        cnx_timeout: opts.timeout,
        socket_timeout: opts.timeout,
        dialect: if legacy {
            WireDialect::Legacy
        } else {
            WireDialect::Current
        },
    };
    let (manager, mut rx) = match Manager::start(net).await {
        Ok(m) => m,
        Err(e) => {
            ev.push(format!(
                "cannot listen on member {me}'s election address {my_addr} ({e}): its server must be down and on this host"
            ));
            return Verdict::Inconclusive;
        }
    };
    // Drain what the target sends (its votes), so that its connection never backs up.
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let config_text = config.to_string();
    let vote = |state: ServerState, for_sid: i64| -> Vec<u8> {
        let n = if legacy {
            Notification {
                state,
                leader: for_sid,
                zxid: before.zxid,
                election_epoch: before.election_epoch,
                peer_epoch: Some(before.peer_epoch),
                version: Some(1),
                config: None,
                trailing: Vec::new(),
            }
        } else {
            Notification::current(
                state,
                for_sid,
                before.zxid,
                before.election_epoch,
                before.peer_epoch,
                config_text.as_bytes(),
            )
        };
        n.encode().expect("a vote encodes")
    };
    let probe_opts = ProbeOptions {
        timeout: Duration::from_secs(1),
        ..ProbeOptions::default()
    };
    let state_of = || async {
        let t = target.text.clone();
        tokio::task::spawn_blocking(move || probe::probe(&t, &probe_opts))
            .await
            .ok()
            .and_then(Result::ok)
    };

    // 1. Vote for the target until it leads.
    let start = Instant::now();
    let mut led_at = None;
    while start.elapsed() < Duration::from_secs(10) {
        manager.to_send(leader, vote(ServerState::Looking, leader));
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(a) = state_of().await
            && a.state == ServerState::Leading
        {
            led_at = Some(Instant::now());
            break;
        }
    }
    let Some(led_at) = led_at else {
        ev.push(format!(
            "trigger: voted LOOKING for {leader} as member {me} (zxid {:#x}, round {:#x}) for 10 s; the target never became LEADING",
            before.zxid, before.election_epoch
        ));
        manager.shutdown();
        drain.abort();
        return Verdict::Inconclusive;
    };
    ev.push(format!(
        "trigger: voted for {leader} as member {me} (round {:#x}); the target became LEADING {} ms later, and zkfle never connected to its quorum port",
        before.election_epoch,
        led_at.duration_since(start).as_millis()
    ));

    // 2. Change its mind: LOOKING, voting for itself, re-sent as a LOOKING Java server would.
    let disloyal_at = Instant::now();
    let mut left_at = None;
    while disloyal_at.elapsed() < WATCH_LIMIT {
        manager.to_send(leader, vote(ServerState::Looking, me));
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A probe that fails (a busy JVM) says nothing; only an answer other than LEADING does.
        if let Some(a) = state_of().await
            && a.state != ServerState::Leading
        {
            left_at = Some(Instant::now());
            break;
        }
    }
    manager.shutdown();
    drain.abort();
    ev.push(format!(
        "trigger: then went LOOKING voting for itself ({me}), every 200 ms"
    ));
    match left_at {
        Some(t) if t.duration_since(disloyal_at) <= QUIT_PROMPTLY => {
            ev.push(format!(
                "after: the target quit leading {} ms after its voter went LOOKING ({} ms after it began to lead)",
                t.duration_since(disloyal_at).as_millis(),
                t.duration_since(led_at).as_millis()
            ));
            Verdict::NotVulnerable
        }
        Some(t) => {
            ev.push(format!(
                "after: the target stayed LEADING without followers for {} ms after its only other voter went LOOKING, and quit {} ms after it began to lead (initLimit x tickTime: waiting for a quorum that could not come)",
                t.duration_since(disloyal_at).as_millis(),
                t.duration_since(led_at).as_millis()
            ));
            Verdict::Vulnerable
        }
        None => {
            ev.push(format!(
                "after: the target was still LEADING without followers {} s after its only other voter went LOOKING",
                WATCH_LIMIT.as_secs()
            ));
            Verdict::Vulnerable
        }
    }
}
