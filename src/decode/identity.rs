//! Who is who: which sid owns which election address.
//!
//! A connection's initiator names itself in its initial message; the acceptor never does, so
//! its sid comes from the election addresses the ensemble announces: the addresses in initial
//! messages (`-65536`/`-65535`), the `server.N` lines of configs carried in notifications, and
//! what the user supplies (`--config zoo.cfg`, `--sid-map ADDR=SID`). Addresses are compared as
//! socket addresses, so Java's `[0:0:0:0:0:0:0:1]:3888` matches a capture's `[::1]:3888`.
//!
//! # Ensembles configured by host name
//!
//! Docker and Kubernetes ensembles name their members by host name (`server.2=zoo2:2888:3888`),
//! and those names reach the wire as written: the capture's addresses are IPs that the
//! decoding machine cannot resolve. What the capture does show is where each sid dials from:
//! the initiator of a connection names its sid (initial message, or a learner's LearnerInfo on
//! the quorum port) and the packet names its IP. So an address `IP:port` no IP literal names
//! is the sid that dials from that IP and is named, by host name, with that port: the one
//! such sid, never a guess among several. One IP per host (containers, pods, hosts) gives each
//! its sid; several servers on one host (`localhost:3888`, `localhost:3889`) are told apart by
//! their ports; an IP that several sids dial from with the same port (a NAT) names none.
//!
//! # Captures started on a running ensemble
//!
//! Election connections live as long as the servers do, so a capture started on a running
//! ensemble holds no initial message: no connection's initiator names itself. Its acceptor is
//! still named by its listening address; its initiator is named by the IP it dials from,
//! when the configs (or `--sid-map`) put exactly one member on that host. Every loopback
//! address is one host (a loopback ensemble dials from 127.0.0.1 whoever calls), and a host
//! is never named once the capture shows another sid dialling from it, or the one member
//! there dialling itself (Java never does): two servers on one host are not told apart by
//! their IPs. Each record says where a sid that no initial message gave came from
//! ([`SidSource`]).

use rustc_hash::FxHashMap as HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::wire::{ElectionAddress, InitialMessage, QuorumConfig};

/// How a record's sid was learned, when no initial message of its connection gave it; in
/// JSON as `from_sid_source` and `to_sid_source`. Where several apply, the first in this
/// order wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SidSource {
    /// An initial message announced the address (or the connection's initiator named itself):
    /// the record carries no source.
    Initial,
    /// `--sid-map ADDR=SID`.
    SidMap,
    /// `--config zoo.cfg`.
    Config,
    /// The config carried in a notification (3.5+).
    NotificationConfig,
    /// The IP a connection was dialled from, the one member's host.
    Address,
    /// The connection's first vote: a LOOKING server's first notification of a round proposes
    /// itself, and a LEADING one's names itself (a FOLLOWING server's answers, which name only
    /// its leader, are passed over); only a larger sid's connection carries notifications
    /// (Java's tie-break).
    Vote,
}

impl SidSource {
    /// The name in JSON of any source, [`SidSource::Initial`] included (`initial`).
    pub fn key(self) -> &'static str {
        self.name().unwrap_or("initial")
    }

    /// The name in JSON; `None` for [`SidSource::Initial`], which is not written.
    pub fn name(self) -> Option<&'static str> {
        match self {
            SidSource::Initial => None,
            SidSource::SidMap => Some("sid_map"),
            SidSource::Config => Some("config"),
            SidSource::NotificationConfig => Some("notification_config"),
            SidSource::Address => Some("address"),
            SidSource::Vote => Some("vote"),
        }
    }
}

/// Election addresses known so far, with the sid that owns each.
#[derive(Debug, Default, Clone)]
pub struct AddressBook {
    by_socket: HashMap<SocketAddr, (i64, SidSource)>,
    /// Addresses whose host is a name, not an IP literal, by name (ASCII lowercase, as Java
    /// compares host names) and port.
    by_name: HashMap<(String, u16), (i64, SidSource)>,
    /// How many of `by_name`'s entries name each (sid, port).
    named_ports: HashMap<(i64, u16), u32>,
    /// Sids the user or a config made known, with their roles.
    members: HashMap<i64, crate::wire::Role>,
    /// Quorum (Zab) addresses from configs, with the sid that owns each.
    quorum: HashMap<SocketAddr, (i64, SidSource)>,
    /// Quorum addresses whose host is a name: (sid, port), with their source.
    quorum_by_name: HashMap<(i64, u16), SidSource>,
    /// The members whose election or quorum address (written as an IP) is on each host, keyed
    /// by [`host_key`] (at most [`MAX_DIALLER_IPS`] hosts).
    hosts: HashMap<IpAddr, HostMembers>,
    /// The sids seen dialling from each IP (at most [`MAX_DIALLER_IPS`] IPs).
    diallers: HashMap<IpAddr, Diallers>,
    /// Counts the changes that can change an answer of `sid_of` or `quorum_sid_of`, so that
    /// an answer can be kept until the next (see [`AddressBook::version`]).
    version: u64,
    /// Host names the user resolved (`--hosts`, /etc/hosts form), lowercase, to their IPs.
    names: HashMap<String, Vec<IpAddr>>,
    /// Conflicts found and not yet taken ([`AddressBook::take_conflicts`]).
    conflicts: Vec<AddressConflict>,
    /// Conflicts already found, (address, sid before, sid after), each reported once.
    conflicts_seen: rustc_hash::FxHashSet<(String, i64, i64)>,
}

/// Two statements naming different sids at one election address: a server announcing an
/// address its config gives another sid (a wrong `myid`), two servers announcing one address,
/// or the user's `--config` or `--sid-map` disagreeing with the wire. Reported, never
/// resolved silently: the newest statement names the address from then on, as Java's own
/// view changes with what it is told last. Configs carried in notifications that move an
/// address from one sid to another are a reconfig, not a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressConflict {
    /// The address as the statements wrote it (`IP:port`, or `host:port`).
    pub address: String,
    /// The sid it named before, and how that was learned.
    pub was: (i64, SidSource),
    /// The sid it names now, and how that was learned.
    pub now: (i64, SidSource),
}

/// Conflicts remembered, so that each is reported once.
const MAX_CONFLICTS: usize = 1024;

/// Addresses remembered (by socket, by name and quorum addresses, each): an ensemble has a few
/// a member; a crafted capture announcing more is not remembered beyond this.
const MAX_ADDRESSES: usize = 65_536;
/// IPs whose diallers are remembered: a capture of one ensemble has one or a few a member.
const MAX_DIALLER_IPS: usize = 4096;
/// Sids remembered dialling from one IP; more (a NAT, or a crafted capture) and the IP names
/// none.
const MAX_DIALLERS_PER_IP: usize = 64;

/// The sids that dialled from one IP, or `None` once there were too many to tell apart.
#[derive(Debug, Clone)]
struct Diallers(Option<Vec<i64>>);

/// The members configured on one host, and whether the capture showed that its IP does not
/// name them (another sid dialled from it, or its one member dialled itself).
#[derive(Debug, Clone, Default)]
struct HostMembers {
    /// `None` once more than [`MAX_DIALLERS_PER_IP`].
    sids: Option<Vec<i64>>,
    shared: bool,
}

/// The host an IP belongs to: every loopback address is one host (the kernel dials from
/// 127.0.0.1 to any 127.0.0.x), and an IPv4-mapped IPv6 address is its IPv4 address.
pub fn host_key(ip: IpAddr) -> IpAddr {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if ip.is_loopback() {
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    } else {
        ip
    }
}

/// The source to keep for `sid` when `known` is what a table holds: the better of the two when
/// it already names `sid`, else `source` (the newest statement wins).
fn best_source(known: Option<&(i64, SidSource)>, sid: i64, source: SidSource) -> SidSource {
    match known {
        Some(&(s, k)) if s == sid => k.min(source),
        _ => source,
    }
}

/// Inserts into a table of at most [`MAX_ADDRESSES`] entries: a key already there is updated,
/// a new one beyond the bound is dropped (`None`). `Some` of the old value when inserted.
fn insert_bounded<K: std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
) -> Option<Option<V>> {
    if map.len() >= MAX_ADDRESSES && !map.contains_key(&key) {
        return None;
    }
    Some(map.insert(key, value))
}

impl AddressBook {
    /// Takes the user's table of host names (`--hosts FILE`, as /etc/hosts writes it): a
    /// config's member named by host name is then also at each of its name's IPs. Give it
    /// before the configs it resolves.
    pub fn resolve_names(&mut self, table: &[(IpAddr, String)]) {
        for (ip, name) in table {
            if self.names.len() >= MAX_ADDRESSES {
                break;
            }
            let ips = self.names.entry(name.to_ascii_lowercase()).or_default();
            if !ips.contains(ip) && ips.len() < MAX_DIALLERS_PER_IP {
                ips.push(*ip);
            }
        }
    }

    /// The IPs the user's table gives a host name.
    fn resolved(&self, host: &str) -> Vec<IpAddr> {
        if self.names.is_empty() {
            return Vec::new();
        }
        self.names
            .get(&host.to_ascii_lowercase())
            .cloned()
            .unwrap_or_default()
    }

    /// Records that `sid` listens on `addr`, as `source` says. The newest statement wins; of
    /// statements of one sid, the best source is kept.
    pub fn learn(&mut self, sid: i64, addr: &ElectionAddress, source: SidSource) {
        // The host is read once (`is_wildcard` would read it again).
        let socket = addr.socket_addr();
        if socket.is_some_and(|a| a.ip().is_unspecified()) {
            return;
        }
        match socket {
            Some(sa) => self.learn_socket(sid, sa, source),
            None => {
                for ip in self.resolved(&addr.host) {
                    self.learn_socket(sid, SocketAddr::new(ip, addr.port), source);
                }
                let key = (addr.host.to_ascii_lowercase(), addr.port);
                let source = best_source(self.by_name.get(&key), sid, source);
                let Some(replaced) = insert_bounded(&mut self.by_name, key, (sid, source)) else {
                    return;
                };
                if replaced == Some((sid, source)) {
                    return;
                }
                self.version += 1;
                if let Some(was) = replaced {
                    self.note_conflict(
                        || format!("{}:{}", addr.host, addr.port),
                        was,
                        (sid, source),
                    );
                }
                let replaced = replaced.map(|(old, _)| old);
                if replaced == Some(sid) {
                    return;
                }
                if let Some(old) = replaced
                    && let Some(n) = self.named_ports.get_mut(&(old, addr.port))
                {
                    *n -= 1;
                    if *n == 0 {
                        self.named_ports.remove(&(old, addr.port));
                    }
                }
                *self.named_ports.entry((sid, addr.port)).or_default() += 1;
            }
        }
    }

    /// Records that `sid` listens on the socket address `sa`.
    fn learn_socket(&mut self, sid: i64, sa: SocketAddr, source: SidSource) {
        self.learn_host(sid, sa.ip());
        let source = best_source(self.by_socket.get(&sa), sid, source);
        let Some(old) = insert_bounded(&mut self.by_socket, sa, (sid, source)) else {
            return;
        };
        if old != Some((sid, source)) {
            self.version += 1;
        }
        if let Some(was) = old {
            self.note_conflict(|| sa.to_string(), was, (sid, source));
        }
    }

    /// Keeps a conflict between what an address was and what it is now, if they name
    /// different sids and are not two configs from the wire (a reconfig).
    fn note_conflict(
        &mut self,
        address: impl FnOnce() -> String,
        was: (i64, SidSource),
        now: (i64, SidSource),
    ) {
        // `--sid-map` overrides on purpose.
        if was.0 == now.0
            || now.1 == SidSource::SidMap
            || (was.1 == SidSource::NotificationConfig && now.1 == SidSource::NotificationConfig)
            || self.conflicts_seen.len() >= MAX_CONFLICTS
        {
            return;
        }
        let address = address();
        if self.conflicts_seen.insert((address.clone(), was.0, now.0)) {
            self.conflicts.push(AddressConflict { address, was, now });
        }
    }

    /// The conflicts found since the last call (see [`AddressConflict`]).
    pub fn take_conflicts(&mut self) -> Vec<AddressConflict> {
        std::mem::take(&mut self.conflicts)
    }

    /// Records that `sid`'s quorum (Zab) port is the socket address `q`.
    fn learn_quorum_socket(&mut self, sid: i64, q: SocketAddr, source: SidSource) {
        self.learn_host(sid, q.ip());
        let source = best_source(self.quorum.get(&q), sid, source);
        if insert_bounded(&mut self.quorum, q, (sid, source))
            .is_some_and(|old| old != Some((sid, source)))
        {
            self.version += 1;
        }
    }

    /// Records that `sid` dialled a connection from `ip` (the initiator of an election or
    /// quorum connection that named itself), for members named by host name.
    pub fn learn_dialler(&mut self, sid: i64, ip: IpAddr) {
        if self.diallers.len() >= MAX_DIALLER_IPS && !self.diallers.contains_key(&ip) {
            return;
        }
        let entry = self
            .diallers
            .entry(ip)
            .or_insert_with(|| Diallers(Some(Vec::new())));
        if let Some(sids) = &mut entry.0
            && !sids.contains(&sid)
        {
            self.version += 1;
            if sids.len() == MAX_DIALLERS_PER_IP {
                entry.0 = None;
            } else {
                sids.push(sid);
            }
        }
    }

    /// Records that `sid` is configured on the host of `ip`.
    fn learn_host(&mut self, sid: i64, ip: IpAddr) {
        let key = host_key(ip);
        if self.hosts.len() >= MAX_DIALLER_IPS && !self.hosts.contains_key(&key) {
            return;
        }
        let host = self.hosts.entry(key).or_insert_with(|| HostMembers {
            sids: Some(Vec::new()),
            shared: false,
        });
        let Some(sids) = &mut host.sids else {
            return;
        };
        if sids.contains(&sid) {
            return;
        }
        if sids.len() == MAX_DIALLERS_PER_IP {
            host.sids = None;
        } else {
            sids.push(sid);
        }
        self.version += 1;
    }

    /// Records that a connection from `ip` was accepted by `acceptor`: when `acceptor` is the
    /// one member configured on that host, the host's IP names nobody (Java never dials
    /// itself; the kernel dialled from another server's address).
    pub fn learn_accepted(&mut self, ip: IpAddr, acceptor: i64) {
        if let Some(host) = self.hosts.get_mut(&host_key(ip))
            && !host.shared
            && host
                .sids
                .as_ref()
                .is_some_and(|sids| sids.as_slice() == [acceptor])
        {
            host.shared = true;
            self.version += 1;
        }
    }

    /// The sid that dialled from `ip`, when no initial message of the connection named it: the
    /// one member configured on its host, unless the capture showed otherwise (see the
    /// module's documentation). Never `acceptor`: nobody dials itself. Non-members dialling
    /// from a member's host (a `zkfle probe` run there) take nothing from it.
    pub fn dialler_of(&self, ip: IpAddr, acceptor: Option<i64>) -> Option<(i64, SidSource)> {
        let key = host_key(ip);
        let host = self.hosts.get(&key)?;
        if host.shared {
            return None;
        }
        let [sid] = host.sids.as_deref()? else {
            return None;
        };
        let other_member_dialled = |ip: &IpAddr| {
            self.diallers.get(ip).is_some_and(|d| {
                d.0.as_ref().is_none_or(|seen| {
                    seen.iter()
                        .any(|s| s != sid && self.members.contains_key(s))
                })
            })
        };
        if other_member_dialled(&ip) || (key != ip && other_member_dialled(&key)) {
            return None;
        }
        (Some(*sid) != acceptor).then_some((*sid, SidSource::Address))
    }

    /// The one sid that dials from `addr`'s IP among those `named` by host name with its port.
    fn by_dialler(&self, addr: SocketAddr, named: impl Fn(i64, u16) -> bool) -> Option<i64> {
        let sids = self.diallers.get(&addr.ip())?.0.as_ref()?;
        let mut found = None;
        for &sid in sids {
            if !named(sid, addr.port()) {
                continue;
            }
            if found.is_some() {
                return None;
            }
            found = Some(sid);
        }
        found
    }

    /// Learns the addresses an initial message announces.
    pub fn learn_initial(&mut self, msg: &InitialMessage) {
        for a in &msg.addresses {
            self.learn(msg.sid, a, SidSource::Initial);
        }
    }

    /// Learns every member's election addresses and role from a config (`source` says whose:
    /// the user's, or one carried in a notification).
    pub fn learn_config(&mut self, config: &QuorumConfig, source: SidSource) {
        for server in config.servers() {
            self.members.insert(server.id, server.role());
            for a in &server.addresses {
                self.learn(server.id, &a.election(), source);
                let changed = match a.quorum_socket_addr() {
                    Some(q) => {
                        self.learn_quorum_socket(server.id, q, source);
                        false
                    }
                    None => {
                        for ip in self.resolved(&a.host) {
                            let q = SocketAddr::new(ip, a.quorum_port);
                            self.learn_quorum_socket(server.id, q, source);
                        }
                        let key = (server.id, a.quorum_port);
                        let known = self.quorum_by_name.get(&key).copied();
                        if known.is_some_and(|k| k <= source)
                            || (known.is_none() && self.quorum_by_name.len() >= MAX_ADDRESSES)
                        {
                            false
                        } else {
                            self.quorum_by_name.insert(key, source);
                            true
                        }
                    }
                };
                if changed {
                    self.version += 1;
                }
            }
        }
    }

    /// Changes with every change that can change what `sid_of` or `quorum_sid_of` answers (and
    /// only with such changes): an answer got at one version holds while it stays.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The sid listening on `addr`, if known: named by that address, or dialling from its IP
    /// and named by host name with its port (see the module's documentation). (`by_name` holds
    /// only hosts that do not parse as IPs, so no entry of it is `addr` spelt out.)
    pub fn sid_of(&self, addr: SocketAddr) -> Option<i64> {
        self.sid_source_of(addr).map(|(sid, _)| sid)
    }

    /// [`AddressBook::sid_of`], with how it was learned.
    pub fn sid_source_of(&self, addr: SocketAddr) -> Option<(i64, SidSource)> {
        self.by_socket.get(&addr).copied().or_else(|| {
            if self.named_ports.is_empty() {
                return None;
            }
            let sid = self.by_dialler(addr, |sid, port| {
                self.named_ports.contains_key(&(sid, port))
            })?;
            Some((sid, self.name_source(sid, addr.port())))
        })
    }

    /// The best source that named `sid` by host name with `port`.
    fn name_source(&self, sid: i64, port: u16) -> SidSource {
        self.by_name
            .iter()
            .filter(|((_, p), (s, _))| *p == port && *s == sid)
            .map(|(_, (_, source))| *source)
            .min()
            .unwrap_or(SidSource::Initial)
    }

    /// The sid whose quorum (Zab) port is `addr`, if a config named it (by address, or by
    /// host name and port as [`AddressBook::sid_of`] finds it).
    pub fn quorum_sid_of(&self, addr: SocketAddr) -> Option<i64> {
        self.quorum_sid_source_of(addr).map(|(sid, _)| sid)
    }

    /// [`AddressBook::quorum_sid_of`], with how it was learned.
    pub fn quorum_sid_source_of(&self, addr: SocketAddr) -> Option<(i64, SidSource)> {
        self.quorum.get(&addr).copied().or_else(|| {
            if self.quorum_by_name.is_empty() {
                return None;
            }
            let sid = self.by_dialler(addr, |sid, port| {
                self.quorum_by_name.contains_key(&(sid, port))
            })?;
            let source = self.quorum_by_name[&(sid, addr.port())];
            Some((sid, source))
        })
    }

    /// Members named by configs seen so far, with their roles.
    pub fn members(&self) -> &HashMap<i64, crate::wire::Role> {
        &self.members
    }

    /// Whether anything is known at all.
    pub fn is_empty(&self) -> bool {
        self.by_socket.is_empty() && self.by_name.is_empty()
    }
}

/// The last few distinct config texts seen. Nearly every notification carries the same config,
/// so this keeps decoding from parsing it again for each one.
#[derive(Debug, Default, Clone)]
pub struct ConfigCache {
    recent: std::collections::VecDeque<Vec<u8>>,
}

impl ConfigCache {
    /// How many distinct texts are remembered.
    const SIZE: usize = 8;

    /// The parsed config when `raw` was not among the recent texts (and parses); `None` when it
    /// was seen lately or does not parse.
    pub fn new_config(&mut self, raw: &[u8]) -> Option<QuorumConfig> {
        if self.recent.iter().any(|r| r.as_slice() == raw) {
            return None;
        }
        if self.recent.len() == Self::SIZE {
            self.recent.pop_front();
        }
        self.recent.push_back(raw.to_vec());
        QuorumConfig::parse(std::str::from_utf8(raw).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_and_capture_spellings_meet() {
        let mut book = AddressBook::default();
        let cfg = QuorumConfig::parse(
            "server.1=[0:0:0:0:0:0:0:1]:2881:3881:participant\nserver.2=127.0.0.2:2888:3888|127.0.1.2:2889:3889:participant\nversion=0",
        )
        .unwrap();
        book.learn_config(&cfg, SidSource::Config);
        assert_eq!(book.sid_of("[::1]:3881".parse().unwrap()), Some(1));
        assert_eq!(book.sid_of("127.0.1.2:3889".parse().unwrap()), Some(2));
        assert_eq!(book.sid_of("127.0.0.2:2888".parse().unwrap()), None);
    }

    fn book_of(config: &str) -> AddressBook {
        let mut book = AddressBook::default();
        book.learn_config(&QuorumConfig::parse(config).unwrap(), SidSource::Config);
        book
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn members_named_by_host_name_are_found_by_the_ip_they_dial_from() {
        // Docker and Kubernetes: one IP a member, the config names them.
        let mut book = book_of(
            "server.1=zoo1:2888:3888:participant\nserver.2=zoo2:2888:3888:participant\nserver.3=zoo3:2888:3888:participant",
        );
        assert_eq!(book.sid_of(at("172.28.0.12:3888")), None);
        book.learn_dialler(2, ip("172.28.0.12"));
        book.learn_dialler(3, ip("172.28.0.13"));
        assert_eq!(book.sid_of(at("172.28.0.12:3888")), Some(2));
        assert_eq!(book.quorum_sid_of(at("172.28.0.13:2888")), Some(3));
        // Not a port the member is named with, nor an IP no member dials from.
        assert_eq!(book.sid_of(at("172.28.0.12:3889")), None);
        assert_eq!(book.sid_of(at("172.28.0.11:3888")), None);
    }

    #[test]
    fn members_of_one_host_are_told_apart_by_their_ports() {
        let mut book = book_of(
            "server.1=localhost:2888:3888:participant\nserver.2=localhost:2889:3889:participant\nserver.3=localhost:2890:3890:participant",
        );
        for sid in 1..=3 {
            book.learn_dialler(sid, ip("127.0.0.1"));
        }
        assert_eq!(book.sid_of(at("127.0.0.1:3889")), Some(2));
        assert_eq!(book.quorum_sid_of(at("127.0.0.1:2890")), Some(3));
    }

    #[test]
    fn an_ip_several_members_dial_from_on_one_port_names_none() {
        // A NAT: two members seen from one address.
        let mut book =
            book_of("server.2=zoo2:2888:3888:participant\nserver.3=zoo3:2888:3888:participant");
        book.learn_dialler(2, ip("10.0.0.1"));
        book.learn_dialler(3, ip("10.0.0.1"));
        assert_eq!(book.sid_of(at("10.0.0.1:3888")), None);
        // Too many sids from one IP to tell apart: none, even with distinct ports.
        let mut lines = String::new();
        for sid in 0..=MAX_DIALLERS_PER_IP as i64 {
            lines.push_str(&format!(
                "server.{sid}=h{sid}:{}:{}:participant\n",
                2000 + sid,
                4000 + sid
            ));
        }
        let mut book = book_of(&lines);
        for sid in 0..=MAX_DIALLERS_PER_IP as i64 {
            book.learn_dialler(sid, ip("10.0.0.2"));
        }
        assert_eq!(book.sid_of(at("10.0.0.2:4001")), None);
    }

    #[test]
    fn announced_names_are_bounded_and_the_newest_owner_wins() {
        // A crafted capture announcing a new name in every initial message: remembered up to
        // the bound (in constant time each: this was a scan of every name, 38 s for 20,000).
        let mut book = AddressBook::default();
        for i in 0..MAX_ADDRESSES + 100 {
            let addr = ElectionAddress::parse(&format!("h{i}.example:3888"), 0).unwrap();
            book.learn(i as i64, &addr, SidSource::Initial);
        }
        assert_eq!(book.by_name.len(), MAX_ADDRESSES);
        // A name already known still changes hands, case-insensitively as Java compares.
        let zoo = ElectionAddress::parse("ZOO2:3888", 0).unwrap();
        let zoo_lower = ElectionAddress::parse("zoo2:3888", 0).unwrap();
        let mut book = AddressBook::default();
        book.learn(2, &zoo, SidSource::Initial);
        book.learn(5, &zoo_lower, SidSource::Initial);
        book.learn_dialler(2, ip("10.0.0.2"));
        book.learn_dialler(5, ip("10.0.0.5"));
        assert_eq!(book.sid_of(at("10.0.0.5:3888")), Some(5));
        assert_eq!(book.sid_of(at("10.0.0.2:3888")), None);
    }

    #[test]
    fn names_the_user_resolved_name_both_ends_without_initial_messages() {
        // Docker: the config names zoo1..zoo3, the capture shows 172.28.0.1x; `--hosts` says
        // which is which, so a capture begun on the running ensemble names every end.
        let mut book = AddressBook::default();
        let table: Vec<(IpAddr, String)> = (1..=3)
            .map(|i| (ip(&format!("172.28.0.1{i}")), format!("ZOO{i}")))
            .collect();
        book.resolve_names(&table);
        book.learn_config(
            &QuorumConfig::parse(
                "server.1=zoo1:2888:3888:participant\nserver.2=zoo2:2888:3888:participant\nserver.3=zoo3:2888:3888:participant",
            )
            .unwrap(),
            SidSource::NotificationConfig,
        );
        assert_eq!(
            book.sid_source_of(at("172.28.0.12:3888")),
            Some((2, SidSource::NotificationConfig))
        );
        assert_eq!(book.quorum_sid_of(at("172.28.0.13:2888")), Some(3));
        assert_eq!(
            book.dialler_of(ip("172.28.0.11"), Some(2)),
            Some((1, SidSource::Address))
        );
        // A name not in the table stays a name.
        assert_eq!(book.sid_of(at("172.28.0.14:3888")), None);
    }

    #[test]
    fn addresses_written_as_ips_are_not_overridden_by_diallers() {
        // Loopback ensembles dial from 127.0.0.1 whoever calls.
        let mut book = book_of(
            "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant",
        );
        book.learn_dialler(2, ip("127.0.0.1"));
        assert_eq!(book.sid_of(at("127.0.0.1:3888")), Some(1));
        assert_eq!(book.sid_of(at("127.0.0.1:3889")), None);
    }
}
