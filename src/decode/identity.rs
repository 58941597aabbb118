//! Who is who: which sid owns which election address.
//!
//! A connection's initiator names itself in its initial message; the acceptor never does, so
//! its sid comes from the election addresses the ensemble announces: the addresses in initial
//! messages (`-65536`/`-65535`), the `server.N` lines of configs carried in notifications, and
//! what the user supplies (`--config zoo.cfg`, `--sid-map ADDR=SID`). Addresses are compared as
//! socket addresses, so Java's `[0:0:0:0:0:0:0:1]:3888` matches a capture's `[::1]:3888`.

use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddr;

use crate::wire::{ElectionAddress, InitialMessage, QuorumConfig};

/// Election addresses known so far, with the sid that owns each.
#[derive(Debug, Default, Clone)]
pub struct AddressBook {
    by_socket: HashMap<SocketAddr, i64>,
    /// Addresses whose host is a name, not an IP literal (matched by name and port).
    by_name: Vec<(ElectionAddress, i64)>,
    /// Sids the user or a config made known, with their roles.
    members: HashMap<i64, crate::wire::Role>,
    /// Quorum (Zab) addresses from configs, with the sid that owns each.
    quorum: HashMap<SocketAddr, i64>,
}

impl AddressBook {
    /// Records that `sid` listens on `addr`. The newest statement wins.
    pub fn learn(&mut self, sid: i64, addr: &ElectionAddress) {
        if addr.is_wildcard() {
            return;
        }
        match addr.socket_addr() {
            Some(sa) => {
                self.by_socket.insert(sa, sid);
            }
            None => {
                self.by_name.retain(|(a, _)| !a.same_endpoint(addr));
                self.by_name.push((addr.clone(), sid));
            }
        }
    }

    /// Learns the addresses an initial message announces.
    pub fn learn_initial(&mut self, msg: &InitialMessage) {
        for a in &msg.addresses {
            self.learn(msg.sid, a);
        }
    }

    /// Learns every member's election addresses and role from a config.
    pub fn learn_config(&mut self, config: &QuorumConfig) {
        for server in config.servers() {
            self.members.insert(server.id, server.role());
            for a in &server.addresses {
                self.learn(server.id, &a.election());
                if let Some(q) = a.quorum_socket_addr() {
                    self.quorum.insert(q, server.id);
                }
            }
        }
    }

    /// The sid listening on `addr`, if known.
    pub fn sid_of(&self, addr: SocketAddr) -> Option<i64> {
        self.by_socket.get(&addr).copied().or_else(|| {
            let probe = ElectionAddress::from_socket_addr(addr);
            self.by_name
                .iter()
                .find(|(a, _)| a.same_endpoint(&probe))
                .map(|(_, sid)| *sid)
        })
    }

    /// The sid whose quorum (Zab) port is `addr`, if a config named it.
    pub fn quorum_sid_of(&self, addr: SocketAddr) -> Option<i64> {
        self.quorum.get(&addr).copied()
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
        book.learn_config(&cfg);
        assert_eq!(book.sid_of("[::1]:3881".parse().unwrap()), Some(1));
        assert_eq!(book.sid_of("127.0.1.2:3889".parse().unwrap()), Some(2));
        assert_eq!(book.sid_of("127.0.0.2:2888".parse().unwrap()), None);
    }
}
