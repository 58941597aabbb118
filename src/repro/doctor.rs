//! `zkfle doctor`: a live ensemble's election health, from the outside and without disturbing
//! it.
//!
//! What it sends: probes (`zkfle probe`'s non-member notification) with a V1 and with a V2
//! initial message to every member's election port, and, to each member's client port, one
//! `srvr` four-letter word (whitelisted by default since 3.5.3; a refusal is a normal answer
//! there). None of these is logged by a server as an error.
//!
//! What it checks:
//! - every member's election port accepts both handshakes and answers with a vote;
//! - a member whose election port does not answer while its client port does: its election
//!   listener (connection refused) or its election receiver thread (no answer) is dead, as
//!   `zkfle repro port-out-of-range` / `bad-config-server-id` leave a vulnerable server;
//! - the votes agree: one leader, LEADING itself, followed by every other member, with the same
//!   round, peer epoch and config version;
//! - the addresses in the configs the servers carry are not wildcards and resolve;
//! - each server's version (from `srvr`, else what the answer's format shows), with advice
//!   from the repro matrix ([`super::matrix`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::net::probe::{self, Answer, ProbeError, ProbeOptions};
use crate::wire::{ProtocolVersion, QuorumConfig, ServerState};

/// How long `doctor` waits before asking again a server that answered V1 and not V2.
const V2_RETRY_PAUSE: Duration = Duration::from_millis(300);

/// One server to examine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its election address, `host:port`.
    pub address: String,
    pub sid: Option<i64>,
    /// Its client address, `host:port`, when known.
    pub client: Option<String>,
}

/// How to examine.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub timeout: Duration,
    /// Quorum TLS, when the ensemble speaks it (`sslQuorum`).
    pub tls: Option<std::sync::Arc<crate::net::QuorumTls>>,
    /// Quorum SASL, when the ensemble requires it.
    pub sasl: Option<std::sync::Arc<crate::sasl::QuorumSasl>>,
}

/// What was found about one server.
#[derive(Debug, Clone)]
pub struct ServerReport {
    pub member: Member,
    /// The V1 probe's answer.
    pub answer: Result<Answer, ProbeError>,
    /// The version: `srvr`'s (e.g. `3.8.0`), else the wire's hint (`3.4`, `3.5+`).
    pub version: Option<String>,
    pub problems: Vec<String>,
    pub advice: Vec<String>,
}

/// The whole examination: the JSON contract of `zkfle doctor --format json`.
#[derive(Debug, Clone)]
pub struct Report {
    pub servers: Vec<ServerReport>,
}

impl Report {
    pub fn healthy(&self) -> bool {
        self.servers.iter().all(|s| s.problems.is_empty())
    }
}

/// Examines `members` and the members named in the configs they carry (at most
/// [`probe::MAX_MEMBERS_DIALED`] more). `config`: the members from a zoo.cfg, when given.
pub fn examine(mut members: Vec<Member>, opts: &DoctorOptions) -> Report {
    let v1 = ProbeOptions {
        timeout: opts.timeout,
        tls: opts.tls.clone(),
        sasl: opts.sasl.clone(),
        ..ProbeOptions::default()
    };
    let addresses: Vec<String> = members.iter().map(|m| m.address.clone()).collect();
    let mut answers = probe::probe_all(&addresses, &v1);
    // Members named in the newest config the answers carry.
    let newest = answers
        .iter()
        .filter_map(|a| a.as_ref().ok()?.config.clone())
        .max_by_key(|c| c.version());
    // Members the given config puts at another election address than the ensemble's own
    // config does: (index in `members`, the ensemble's address).
    let mut elsewhere: Vec<(usize, String)> = Vec::new();
    if let Some(config) = &newest {
        let mut extra: Vec<Member> = Vec::new();
        for line in config.servers() {
            let Some(addr) = line.addresses.first() else {
                continue;
            };
            let election = addr.election().text;
            let client = client_of(line.client.as_ref(), &addr.host);
            if let Some(i) = members
                .iter()
                .position(|m| m.sid == Some(line.id) && !same_address(&m.address, &election))
            {
                // The same member, named by the config given at another address: examined
                // at the given one, and told apart from a dead listener below.
                elsewhere.push((i, election));
                continue;
            }
            match members
                .iter_mut()
                .find(|m| same_address(&m.address, &election))
            {
                Some(m) => {
                    m.sid = m.sid.or(Some(line.id));
                    m.client = m.client.clone().or(client);
                }
                // A config naming one address many times is dialled once.
                None if extra.iter().any(|m| same_address(&m.address, &election)) => {}
                None if extra.len() < probe::MAX_MEMBERS_DIALED => extra.push(Member {
                    address: election,
                    sid: Some(line.id),
                    client,
                }),
                None => {}
            }
        }
        let more: Vec<String> = extra.iter().map(|m| m.address.clone()).collect();
        answers.extend(probe::probe_all(&more, &v1));
        members.extend(extra);
    }
    // A member no config describes: its client port is assumed to be its host's 2181.
    for m in members.iter_mut().filter(|m| m.client.is_none()) {
        if let Ok(a) = crate::wire::ElectionAddress::parse(&m.address, 0) {
            m.client = client_of(None, &a.host);
        }
    }
    let v2 = ProbeOptions {
        protocol: ProtocolVersion::V2,
        ..v1.clone()
    };
    let mut v2_answers = probe::probe_all(&addresses_of(&members), &v2);
    // A server that answered V1 and not V2 is asked again once: the V2 dial comes right after
    // the V1 one from the same sid, and Java, still tearing that connection down, can drop the
    // new one (tests/doctor_java.rs saw a 3.8.0 server do so once, in a CI run).
    let again: Vec<usize> = (0..members.len())
        .filter(|&i| answers[i].is_ok() && v2_answers[i].is_err())
        .collect();
    if !again.is_empty() {
        std::thread::sleep(V2_RETRY_PAUSE);
        let addresses: Vec<String> = again.iter().map(|&i| members[i].address.clone()).collect();
        for (i, answer) in again.into_iter().zip(probe::probe_all(&addresses, &v2)) {
            v2_answers[i] = answer;
        }
    }
    let versions = srvr_all(&members, opts.timeout);
    // Where the given address does not answer, whether the ensemble's does.
    let elsewhere_answers: Vec<(usize, String, Option<Answer>)> = elsewhere
        .into_iter()
        .filter(|(i, _)| answers[*i].is_err())
        .map(|(i, addr)| {
            let answer = probe::probe_all(std::slice::from_ref(&addr), &v1)
                .pop()
                .and_then(Result::ok);
            (i, addr, answer)
        })
        .collect();

    let mut servers: Vec<ServerReport> = members
        .into_iter()
        .zip(answers)
        .zip(v2_answers)
        .zip(versions)
        .enumerate()
        .map(|(i, (((member, answer), v2), srvr))| {
            let mut problems = Vec::new();
            let moved = elsewhere_answers.iter().find(|(j, ..)| *j == i);
            match (&answer, &srvr) {
                (Err(e), _) if moved.is_some_and(|(.., a)| a.is_some()) => {
                    let (_, there, a) = moved.unwrap();
                    let state = a.as_ref().map_or("", |a| a.state.name());
                    problems.push(format!(
                        "the config given names {} for sid {}, which does not answer ({e}), but the ensemble's own config names {there}, which answers {state}: the config given is wrong or stale, not the server",
                        member.address,
                        member.sid.unwrap_or_default(),
                    ));
                }
                (Ok(_), _) => {
                    if let Err(e) = &v2 {
                        problems.push(format!(
                            "answers the V1 handshake but not the V2 (multi-address) one: {e}; 3.6+ peers with multi-address cannot reach it"
                        ));
                    }
                }
                (Err(e), Ok(_)) => problems.push(dead_election_port(e, &member)),
                (Err(e), Err(why)) => problems.push(format!(
                    "the election port does not answer ({e}), nor the client port ({why}): the server is down or unreachable"
                )),
            }
            let version = srvr
                .ok()
                .flatten()
                .or_else(|| answer.as_ref().ok().map(|a| probe::version_hint(a).to_string()));
            // zkfle members run none of Java's code: the matrix says nothing about them.
            let advice = version
                .as_deref()
                .filter(|v| !v.starts_with("zkfle"))
                .map(super::matrix::advice)
                .unwrap_or_default();
            ServerReport {
                member,
                answer,
                version,
                problems,
                advice,
            }
        })
        .collect();
    for s in servers.iter_mut() {
        if s.member.sid.is_none() && s.answer.as_ref().is_ok_and(|a| a.config.is_none()) {
            s.advice.push(
                "its answer carries no config (a 3.4 server): give --config zoo.cfg to examine every member".into(),
            );
        }
    }
    servers.sort_by_key(|s| (s.member.sid.is_none(), s.member.sid));
    check_agreement(&mut servers);
    check_addresses(&mut servers, opts.timeout);
    Report { servers }
}

fn addresses_of(members: &[Member]) -> Vec<String> {
    members.iter().map(|m| m.address.clone()).collect()
}

fn dead_election_port(e: &ProbeError, member: &Member) -> String {
    let client = member.client.as_deref().unwrap_or("?");
    match e {
        ProbeError::Refused => format!(
            "the client port {client} answers but the election port refuses connections: its election listener is dead (the process runs on; it cannot take part in the next election). Seen after `zkfle repro port-out-of-range`; restart the server"
        ),
        ProbeError::Timeout(_) | ProbeError::Closed => format!(
            "the client port {client} answers but the election port accepts and never answers a notification ({e}): its election receiver thread is dead (it counts no vote in the next election). Seen after `zkfle repro bad-config-server-id`; restart the server"
        ),
        _ => format!("the client port {client} answers but the election port does not ({e})"),
    }
}

/// The client address for a member: the config's `;client` part, else the member's host and
/// port 2181.
pub fn client_of(client: Option<&(Option<String>, u16)>, host: &str) -> Option<String> {
    let (h, port) = match client {
        Some((h, p)) => (h.clone(), *p),
        None => (None, 2181),
    };
    let h = h
        .filter(|h| !is_wildcard_host(h))
        .unwrap_or_else(|| host.to_string());
    Some(crate::wire::addr::format_host_port(&h, port))
}

fn is_wildcard_host(host: &str) -> bool {
    host.trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}

fn same_address(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let parse = |s: &str| s.parse::<SocketAddr>().ok();
    matches!((parse(a), parse(b)), (Some(x), Some(y)) if x == y)
}

/// `srvr` on every member's client port: `Ok(Some(version))`, `Ok(None)` when the port
/// answered without a version (the word is not whitelisted), `Err` when it did not answer.
fn srvr_all(members: &[Member], timeout: Duration) -> Vec<Result<Option<String>, String>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .map(|m| {
                scope.spawn(move || match &m.client {
                    Some(c) => srvr(c, timeout),
                    None => Err("client address unknown".to_string()),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    })
}

/// The most bytes of a `srvr` answer read (it is a few hundred).
const SRVR_MAX_BYTES: usize = 16 * 1024;

fn srvr(client: &str, timeout: Duration) -> Result<Option<String>, String> {
    let start = Instant::now();
    let mut s = probe::connect(client, timeout).map_err(|e| e.to_string())?;
    s.write_all(b"srvr").map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() || text.len() >= SRVR_MAX_BYTES {
            break;
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => text.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Ok(parse_srvr_version(&String::from_utf8_lossy(&text)))
}

/// `Zookeeper version: 3.8.0-5a02a05e..., built on ...` -> `3.8.0`; a zkfle member's
/// `3.9.5-zkfle-0.1.0, ...` -> `zkfle 0.1.0`.
pub fn parse_srvr_version(text: &str) -> Option<String> {
    let at = text.find("Zookeeper version: ")? + "Zookeeper version: ".len();
    let line = text[at..].lines().next().unwrap_or_default();
    if let Some(z) = line.find("-zkfle-") {
        let v: String = line[z + "-zkfle-".len()..]
            .chars()
            .take_while(|c| !matches!(c, ',' | ' '))
            .collect();
        return Some(format!("zkfle {v}"));
    }
    let v: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The most common value among `values`, when there is one.
fn majority<T: Ord + Copy>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts.into_iter().max_by_key(|(_, c)| *c).map(|(v, _)| v)
}

/// One leader, LEADING itself, followed by every other member, all in the same round and peer
/// epoch and carrying the same config version.
fn check_agreement(servers: &mut [ServerReport]) {
    let decided: Vec<(Option<i64>, Answer)> = servers
        .iter()
        .filter_map(|s| {
            let a = s.answer.as_ref().ok()?;
            (a.state != ServerState::Looking).then(|| (s.member.sid, a.clone()))
        })
        .collect();
    let answered = servers.iter().filter(|s| s.answer.is_ok()).count();
    if answered > 0 && decided.is_empty() {
        for s in servers.iter_mut().filter(|s| s.answer.is_ok()) {
            s.problems
                .push("LOOKING, and so is every server that answered: no leader".into());
        }
        return;
    }
    let leader = majority(decided.iter().map(|(_, a)| a.leader));
    let round = majority(decided.iter().map(|(_, a)| a.election_epoch));
    let epoch = majority(decided.iter().map(|(_, a)| a.peer_epoch));
    let config = majority(decided.iter().map(|(_, a)| a.config_version));
    let leading: Vec<Option<i64>> = decided
        .iter()
        .filter(|(_, a)| a.state == ServerState::Leading)
        .map(|(sid, _)| *sid)
        .collect();
    for s in servers.iter_mut() {
        let Ok(a) = &s.answer else { continue };
        let Some(leader) = leader else { continue };
        match a.state {
            ServerState::Looking => s
                .problems
                .push(format!("LOOKING while the others follow leader {leader}")),
            ServerState::Unknown(code) => s
                .problems
                .push(format!("answers an unknown state (code {code})")),
            _ => {
                if a.leader != leader {
                    s.problems.push(format!(
                        "follows leader {} while most follow {leader}",
                        a.leader
                    ));
                }
                if a.state == ServerState::Leading
                    && s.member.sid.is_some_and(|sid| sid != a.leader)
                {
                    s.problems.push(format!(
                        "LEADING but its vote is for {}, not itself",
                        a.leader
                    ));
                }
                if a.state != ServerState::Leading && s.member.sid == Some(a.leader) {
                    s.problems
                        .push(format!("{} while its vote is for itself", a.state.name()));
                }
                if round.is_some_and(|r| r != a.election_epoch) {
                    s.problems.push(format!(
                        "round {:#x} while most are in round {:#x}",
                        a.election_epoch,
                        round.unwrap_or_default()
                    ));
                }
                if epoch.is_some_and(|e| e != a.peer_epoch) {
                    s.problems.push(format!(
                        "peer epoch {:#x} while most have {:#x}",
                        a.peer_epoch,
                        epoch.unwrap_or_default()
                    ));
                }
            }
        }
        if config.is_some_and(|c| c != a.config_version) {
            s.problems.push(format!(
                "carries config version {} while most carry {}",
                show_version(a.config_version),
                show_version(config.flatten())
            ));
        }
        if a.state == ServerState::Leading && leading.len() > 1 {
            s.problems.push(format!(
                "one of {} servers that answer LEADING",
                leading.len()
            ));
        }
    }
    // The leader most follow must be LEADING. When it was examined its own row says what is
    // wrong with it. When every examined server has a sid (the membership is known) and none
    // is the leader's, the followers say so; with the membership unknown (a 3.4 server named
    // alone), nothing can be said.
    if let Some(leader) = leader {
        let examined = servers.iter().any(|s| s.member.sid == Some(leader));
        let membership_known = servers.iter().all(|s| s.member.sid.is_some());
        if membership_known && !examined {
            for s in servers.iter_mut().filter(|s| {
                s.answer
                    .as_ref()
                    .is_ok_and(|a| a.state != ServerState::Looking && a.leader == leader)
            }) {
                s.problems.push(format!(
                    "follows leader {leader}, which is not a member this ensemble's config names"
                ));
            }
        }
    }
}

fn show_version(v: Option<u64>) -> String {
    v.map(|v| format!("{v:#x}"))
        .unwrap_or_else(|| "none".into())
}

/// The addresses in the configs the servers carry: no wildcard, every host name resolves.
/// Servers mostly carry the same config: each distinct one is examined once.
fn check_addresses(servers: &mut [ServerReport], timeout: Duration) {
    let mut examined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in servers.iter_mut() {
        let Ok(a) = &s.answer else { continue };
        let Some(config) = &a.config else { continue };
        let problems = examined
            .entry(config.to_string())
            .or_insert_with(|| address_problems(config, timeout));
        s.problems.extend(problems.iter().cloned());
    }
}

/// Host names one config may have looked up: each lookup can wait on a resolver, and a
/// server's config (a peer's answer) can name thousands.
const MAX_LOOKUPS: usize = 16;
/// Address problems listed per config; the rest are counted in one more line.
const MAX_ADDRESS_PROBLEMS: usize = 12;

/// The problems with one config's addresses. Host names are looked up side by side, each
/// given `timeout`; a name without an answer by then is said to be so.
pub fn address_problems(config: &QuorumConfig, timeout: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let mut named: Vec<(i64, String, u16)> = Vec::new();
    for line in config.servers() {
        for addr in &line.addresses {
            let election = addr.election();
            if election.is_wildcard() {
                out.push(format!(
                    "its config gives server.{} the wildcard address {}: peers cannot dial it (ZOOKEEPER-2164)",
                    line.id, election.text
                ));
            } else if election.socket_addr().is_none() {
                named.push((line.id, addr.host.clone(), addr.election_port));
            }
        }
    }
    let lookups = look_up(&named, timeout);
    let mut not_looked_up = 0usize;
    for (id, host, _) in &named {
        match lookups.get(host) {
            Some(Some(true)) => {}
            Some(Some(false)) => out.push(format!(
                "its config gives server.{id} the host {host:?}, which does not resolve here"
            )),
            Some(None) => out.push(format!(
                "its config gives server.{id} the host {host:?}, which did not resolve within {} s",
                timeout.as_secs_f64()
            )),
            None => not_looked_up += 1,
        }
    }
    if out.len() > MAX_ADDRESS_PROBLEMS {
        let more = out.len() - MAX_ADDRESS_PROBLEMS;
        out.truncate(MAX_ADDRESS_PROBLEMS);
        out.push(format!(
            "and {more} more address problem(s) in the same config"
        ));
    }
    if not_looked_up > 0 {
        out.push(format!(
            "its config names {not_looked_up} more server(s) by host names beyond the first {MAX_LOOKUPS} distinct ones, not looked up"
        ));
    }
    out
}

/// Whether each of the first [`MAX_LOOKUPS`] distinct hosts resolves: `Some(true|false)`, or
/// `None` when the resolver gave no answer within `timeout` (its thread is left to finish).
fn look_up(named: &[(i64, String, u16)], timeout: Duration) -> BTreeMap<String, Option<bool>> {
    let mut hosts: Vec<(&str, u16)> = Vec::new();
    for (_, host, port) in named {
        if hosts.len() == MAX_LOOKUPS {
            break;
        }
        if !hosts.iter().any(|(h, _)| h == host) {
            hosts.push((host, *port));
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for (host, port) in &hosts {
        let (tx, host, port) = (tx.clone(), host.to_string(), *port);
        std::thread::spawn(move || {
            let resolves = (host.as_str(), port)
                .to_socket_addrs()
                .is_ok_and(|mut a| a.next().is_some());
            let _ = tx.send((host, resolves));
        });
    }
    drop(tx);
    let mut out: BTreeMap<String, Option<bool>> =
        hosts.iter().map(|(h, _)| (h.to_string(), None)).collect();
    let deadline = Instant::now() + timeout;
    for _ in 0..hosts.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((host, resolves)) => {
                out.insert(host, Some(resolves));
            }
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srvr_version() {
        let text = "Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49 UTC\nLatency min/avg/max: 0/0.0/0\nMode: follower\n";
        assert_eq!(parse_srvr_version(text).as_deref(), Some("3.8.0"));
        assert_eq!(
            parse_srvr_version("srvr is not executed because it is not in the whitelist."),
            None
        );
        assert_eq!(
            parse_srvr_version(
                "Zookeeper version: 3.9.5-zkfle-0.1.0, built on zkfle\nMode: follower\n"
            )
            .as_deref(),
            Some("zkfle 0.1.0")
        );
    }

    #[test]
    fn wildcard_addresses_are_problems() {
        // (No host name here: resolving one would leave the machine.)
        let c = QuorumConfig::parse(
            "server.1=0.0.0.0:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant\nversion=0",
        )
        .unwrap();
        let p = address_problems(&c, Duration::from_secs(1));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("server.1") && p[0].contains("wildcard"));
    }

    /// A config (a peer's answer) naming thousands of bad addresses gives a bounded list.
    #[test]
    fn address_problems_are_listed_up_to_a_bound() {
        let mut text: String = (1..=2000)
            .map(|i| format!("server.{i}=0.0.0.0:2888:3888:participant\n"))
            .collect();
        text.push_str("version=0");
        let p = address_problems(&QuorumConfig::parse(&text).unwrap(), Duration::from_secs(1));
        assert_eq!(p.len(), MAX_ADDRESS_PROBLEMS + 1, "{p:?}");
        assert_eq!(
            p.last().unwrap(),
            "and 1988 more address problem(s) in the same config"
        );
    }

    fn answered(sid: i64, state: ServerState, leader: i64, round: i64) -> ServerReport {
        ServerReport {
            member: Member {
                address: format!("127.0.0.{sid}:3888"),
                sid: Some(sid),
                client: None,
            },
            answer: Ok(Answer {
                state,
                leader,
                zxid: 0,
                election_epoch: round,
                peer_epoch: 1,
                config_version: Some(0),
                config: None,
                size: 53,
                elapsed: Duration::ZERO,
            }),
            version: None,
            problems: Vec::new(),
            advice: Vec::new(),
        }
    }

    #[test]
    fn agreement() {
        use ServerState::*;
        let mut ok = vec![
            answered(1, Following, 3, 1),
            answered(2, Following, 3, 1),
            answered(3, Leading, 3, 1),
        ];
        check_agreement(&mut ok);
        assert!(ok.iter().all(|s| s.problems.is_empty()), "{ok:?}");

        let mut bad = vec![
            answered(1, Looking, 1, 2),
            answered(2, Following, 3, 1),
            answered(3, Leading, 3, 1),
            answered(4, Following, 2, 1),
            answered(5, Following, 3, 7),
        ];
        check_agreement(&mut bad);
        assert!(bad[0].problems[0].contains("LOOKING while the others follow leader 3"));
        assert!(bad[1].problems.is_empty() && bad[2].problems.is_empty());
        assert!(bad[3].problems[0].contains("follows leader 2 while most follow 3"));
        assert!(bad[4].problems[0].contains("round 0x7 while most are in round 0x1"));

        // A 3.4 server named alone: no sid, no config; nothing to hold against it.
        let mut alone = vec![answered(1, Following, 3, 1)];
        alone[0].member.sid = None;
        check_agreement(&mut alone);
        assert!(alone[0].problems.is_empty(), "{alone:?}");

        let mut nobody = vec![answered(1, Looking, 1, 1), answered(2, Looking, 2, 1)];
        check_agreement(&mut nobody);
        assert!(nobody.iter().all(|s| s.problems[0].contains("no leader")));
    }

    #[test]
    fn client_addresses() {
        assert_eq!(
            client_of(Some(&(Some("0.0.0.0".into()), 2182)), "127.0.0.2").as_deref(),
            Some("127.0.0.2:2182")
        );
        assert_eq!(
            client_of(None, "127.0.0.2").as_deref(),
            Some("127.0.0.2:2181")
        );
    }
}
