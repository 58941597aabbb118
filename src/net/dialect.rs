//! Which generation of the election protocol zkfle speaks, per peer (docs/versions.md).
//!
//! - 3.5 and later send the V1 (or V2) initial message and version-2 notifications carrying the
//!   config (44 + N bytes).
//! - 3.4.6 to 3.4.14 send the legacy initial message (the sid alone, 8 bytes) and 40-byte
//!   notifications (format version 1, no config). 3.4.0-3.4.5 cannot parse V1/V2 initial
//!   messages at all.
//!
//! [`WireDialect::Auto`] starts with the current form and switches a peer to the 3.4 form as
//! soon as that peer shows it is a 3.4 server: a legacy initial message from it, or a
//! notification without a config (28, 36 or 40 bytes); and back to the current form when it
//! shows it is 3.5+ (a V1/V2 initial message, or a notification with a config): in a rolling
//! upgrade the server behind a sid changes version. Sans-I/O: the [`super::Manager`] feeds
//! it what it reads, picks the initial message by it, and rewrites each queued notification for
//! its peer when writing it ([`Dialects::adapt`]).

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::wire::{ElectionAddress, InitialMessage, Notification, ProtocolVersion};

/// The notification format version 3.4.6+ senders put in their 40-byte messages.
pub const LEGACY_NOTIFICATION_VERSION: i32 = 1;

/// What zkfle sends (`zkfle join --wire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WireDialect {
    /// Per peer: the form the peer was last seen speaking (3.5+ until it speaks 3.4).
    #[default]
    Auto,
    /// Always the 3.5+ form: V1/V2 initial message, notifications with the config.
    Current,
    /// Always the 3.4 form: legacy initial message, 40-byte notifications.
    Legacy,
}

/// The form used towards one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerForm {
    Current,
    Legacy,
}

/// The Java release zkfle presents itself as (`zkfle join --release`): the version line its
/// monitoring answers carry, and how its initial message writes its own address. Releases of
/// one generation differ there, not in the election's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct JavaRelease {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl JavaRelease {
    /// What zkfle presents as unless told: the newest release it is checked against.
    pub const CURRENT: JavaRelease = JavaRelease::new(3, 9, 5);
    /// What `--wire legacy` presents as unless told.
    pub const LEGACY: JavaRelease = JavaRelease::new(3, 4, 14);
    /// The first release whose `NetUtils.formatInetAddr` writes the configured host string
    /// instead of the resolved IP (ZOOKEEPER-3860; 3.8.1's still writes the IP).
    const ANNOUNCES_HOST_STRING: JavaRelease = JavaRelease::new(3, 8, 2);

    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        JavaRelease {
            major,
            minor,
            patch,
        }
    }

    /// `3.8.0`. Only 3.4.0 and later: earlier releases speak another election protocol.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a ZooKeeper release (3.4.0 or later, as 3.8.0)");
        let mut parts = text.split('.');
        let mut next = || -> Result<u32, String> {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let release = JavaRelease::new(next()?, next()?, next()?);
        if parts.next().is_some() || release.major != 3 || release.minor < 4 {
            return Err(bad());
        }
        Ok(release)
    }

    /// The address as this release's initial message writes it, `addr` being the member's
    /// configured election address and `resolved` what its host resolves to (None: it does not).
    ///
    /// 3.5.0-3.8.1 write the resolved IP (`InetAddress.getHostAddress()`, IPv6 unabbreviated),
    /// the host as configured only when it did not resolve; 3.8.2+ write the host as configured.
    /// Receivers dial a lower sid back at this address, so a name announced is looked up
    /// there: with Java's cached failed lookup (10 s) of a host that did not exist yet, the
    /// dial back fails where an IP would connect at once.
    pub fn announced(self, addr: &ElectionAddress, resolved: Option<IpAddr>) -> ElectionAddress {
        match resolved {
            Some(ip) if self < Self::ANNOUNCES_HOST_STRING => {
                ElectionAddress::from_socket_addr(std::net::SocketAddr::new(ip, addr.port))
            }
            _ => addr.clone(),
        }
    }
}

impl Default for JavaRelease {
    fn default() -> Self {
        JavaRelease::CURRENT
    }
}

impl std::fmt::Display for JavaRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl std::str::FromStr for JavaRelease {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        JavaRelease::parse(s)
    }
}

/// Per-peer choice of form.
#[derive(Debug, Clone, Default)]
pub struct Dialects {
    mode: WireDialect,
    /// Peers seen speaking 3.4 (only used in `Auto`).
    legacy_peers: BTreeSet<i64>,
}

impl Dialects {
    pub fn new(mode: WireDialect) -> Self {
        Dialects {
            mode,
            legacy_peers: BTreeSet::new(),
        }
    }

    pub fn mode(&self) -> WireDialect {
        self.mode
    }

    /// The form to use towards `sid`.
    pub fn form_for(&self, sid: i64) -> PeerForm {
        match self.mode {
            WireDialect::Current => PeerForm::Current,
            WireDialect::Legacy => PeerForm::Legacy,
            WireDialect::Auto if self.legacy_peers.contains(&sid) => PeerForm::Legacy,
            WireDialect::Auto => PeerForm::Current,
        }
    }

    /// An initial message from `sid` was read. Returns the new form when this switched the peer.
    pub fn saw_initial(&mut self, sid: i64, msg: &InitialMessage) -> Option<PeerForm> {
        self.mark(sid, msg.protocol == ProtocolVersion::Legacy)
    }

    /// A frame from `sid` was read (its payload). Notifications without a config (fewer than 44
    /// bytes, or a version below 2) come only from pre-3.5 senders, ones with a config only
    /// from 3.5+. Returns the new form when this switched the peer.
    pub fn saw_payload(&mut self, sid: i64, payload: &[u8]) -> Option<PeerForm> {
        match Notification::decode(payload) {
            Ok(n) if n.config.is_none() && n.version.is_none_or(|v| v < 2) => self.mark(sid, true),
            Ok(n) if n.config.is_some() => self.mark(sid, false),
            _ => None,
        }
    }

    /// The payload to write to `sid` now: a notification queued in the current form is
    /// rewritten in the 3.4 form when that is what `sid` gets (the choice is made at write time,
    /// so messages queued before the peer was recognized go out in its form too).
    pub fn adapt(&self, sid: i64, payload: Vec<u8>) -> Vec<u8> {
        if self.form_for(sid) == PeerForm::Current {
            return payload;
        }
        match Notification::decode(&payload) {
            Ok(n) if n.size() != 40 || n.version != Some(LEGACY_NOTIFICATION_VERSION) => {
                to_legacy(&n).encode().unwrap_or(payload)
            }
            _ => payload,
        }
    }

    fn mark(&mut self, sid: i64, legacy: bool) -> Option<PeerForm> {
        if self.mode != WireDialect::Auto {
            return None;
        }
        if legacy && self.legacy_peers.insert(sid) {
            Some(PeerForm::Legacy)
        } else if !legacy && self.legacy_peers.remove(&sid) {
            Some(PeerForm::Current)
        } else {
            None
        }
    }

    /// Forgets what `sid` was seen to speak (a non-member whose connection ended).
    pub fn forget(&mut self, sid: i64) {
        self.legacy_peers.remove(&sid);
    }
}

/// `n` as a 3.4.6+ sender would put it on the wire: 40 bytes, version 1, no config.
pub fn to_legacy(n: &Notification) -> Notification {
    Notification {
        peer_epoch: Some(n.effective_peer_epoch()),
        version: Some(LEGACY_NOTIFICATION_VERSION),
        config: None,
        trailing: Vec::new(),
        ..n.clone()
    }
}

/// The bytes of `n` in `form`.
pub fn encode_for(form: PeerForm, n: &Notification) -> Result<Vec<u8>, crate::wire::WireError> {
    match form {
        PeerForm::Current => n.encode(),
        PeerForm::Legacy => to_legacy(n).encode(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ServerState;

    #[test]
    fn releases_parse_as_java_numbers_them() {
        assert_eq!(JavaRelease::parse("3.8.0"), Ok(JavaRelease::new(3, 8, 0)));
        assert_eq!(JavaRelease::parse("3.4.14").unwrap().to_string(), "3.4.14");
        for bad in [
            "",
            "3.8",
            "3.8.0.1",
            "3.3.6",
            "4.0.0",
            "3.8.x",
            "3..0",
            "3.8.-1",
            "3.8.99999",
        ] {
            assert!(JavaRelease::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(JavaRelease::new(3, 8, 1) < JavaRelease::new(3, 8, 2));
        assert!(JavaRelease::new(3, 10, 0) > JavaRelease::CURRENT);
    }

    /// NetUtils.formatInetAddr before and after ZOOKEEPER-3860 (3.8.1's and 3.8.2's source).
    #[test]
    fn announced_address_is_the_ip_before_3_8_2_and_the_configured_host_after() {
        let named = ElectionAddress::parse("zoo3:3888", 0).unwrap();
        let ip: IpAddr = "172.28.0.13".parse().unwrap();
        let old = JavaRelease::new(3, 8, 1).announced(&named, Some(ip));
        assert_eq!(old.text, "172.28.0.13:3888");
        assert_eq!(
            JavaRelease::new(3, 8, 2).announced(&named, Some(ip)).text,
            "zoo3:3888"
        );
        // A name that does not resolve is written as configured by every release.
        assert_eq!(
            JavaRelease::new(3, 6, 3).announced(&named, None).text,
            "zoo3:3888"
        );
        // IPv6: getHostAddress() writes every group; 3.8.2+ the literal as configured.
        let v6 = ElectionAddress::parse("[::1]:3888", 0).unwrap();
        let lo: IpAddr = "::1".parse().unwrap();
        assert_eq!(
            JavaRelease::new(3, 5, 9).announced(&v6, Some(lo)).text,
            "[0:0:0:0:0:0:0:1]:3888"
        );
        assert_eq!(
            JavaRelease::CURRENT.announced(&v6, Some(lo)).text,
            "[::1]:3888"
        );
    }

    fn current() -> Notification {
        Notification::current(
            ServerState::Looking,
            3,
            0x1_0000_0002,
            4,
            1,
            b"version=0".to_vec(),
        )
    }

    #[test]
    fn legacy_form_is_forty_bytes_version_one() {
        let bytes = encode_for(PeerForm::Legacy, &current()).unwrap();
        assert_eq!(bytes.len(), 40);
        assert_eq!(&bytes[36..40], &1i32.to_be_bytes());
        let back = Notification::decode(&bytes).unwrap();
        assert_eq!(
            (back.leader, back.zxid, back.election_epoch),
            (3, 0x1_0000_0002, 4)
        );
        assert_eq!(back.peer_epoch, Some(1));
        assert_eq!(back.config, None);
        assert_eq!(
            encode_for(PeerForm::Current, &current()).unwrap().len(),
            44 + 9
        );
    }

    #[test]
    fn auto_switches_a_peer_on_legacy_signs_only() {
        let mut d = Dialects::new(WireDialect::Auto);
        assert_eq!(d.form_for(2), PeerForm::Current);
        let v1 = InitialMessage::versioned(
            ProtocolVersion::V1,
            2,
            vec![ElectionAddress::parse("127.0.0.2:3888", 0).unwrap()],
        );
        assert_eq!(d.saw_initial(2, &v1), None);
        assert_eq!(d.saw_payload(2, &current().encode().unwrap()), None);
        assert_eq!(d.form_for(2), PeerForm::Current);
        let legacy = to_legacy(&current()).encode().unwrap();
        assert_eq!(d.saw_payload(2, &legacy), Some(PeerForm::Legacy));
        assert_eq!(d.saw_payload(2, &legacy), None);
        assert_eq!(d.form_for(2), PeerForm::Legacy);
        assert_eq!(
            d.saw_initial(5, &InitialMessage::legacy(5)),
            Some(PeerForm::Legacy)
        );
        assert_eq!(d.form_for(5), PeerForm::Legacy);
        assert_eq!(d.form_for(3), PeerForm::Current);
        let queued = current().encode().unwrap();
        assert_eq!(d.adapt(5, queued.clone()).len(), 40);
        assert_eq!(d.adapt(3, queued.clone()), queued);
    }

    /// A rolling upgrade: sid 2 restarts as a 3.5+ server and is spoken to in its form again.
    #[test]
    fn auto_follows_a_peer_upgraded_from_3_4() {
        let mut d = Dialects::new(WireDialect::Auto);
        d.saw_initial(2, &InitialMessage::legacy(2));
        d.saw_initial(4, &InitialMessage::legacy(4));
        assert_eq!(d.form_for(2), PeerForm::Legacy);
        let v1 = InitialMessage::versioned(
            ProtocolVersion::V1,
            2,
            vec![ElectionAddress::parse("zoo2:3888", 0).unwrap()],
        );
        assert_eq!(d.saw_initial(2, &v1), Some(PeerForm::Current));
        assert_eq!(d.form_for(2), PeerForm::Current);
        assert_eq!(
            d.saw_payload(4, &current().encode().unwrap()),
            Some(PeerForm::Current)
        );
        assert_eq!(d.form_for(4), PeerForm::Current);
        // A 40-byte notification with version 2 and no config is not a sign either way.
        let mut ambiguous = to_legacy(&current());
        ambiguous.version = Some(2);
        assert_eq!(d.saw_payload(4, &ambiguous.encode().unwrap()), None);
    }

    #[test]
    fn fixed_modes_ignore_what_peers_send() {
        let mut d = Dialects::new(WireDialect::Current);
        assert_eq!(d.saw_initial(2, &InitialMessage::legacy(2)), None);
        assert_eq!(d.form_for(2), PeerForm::Current);
        let d = Dialects::new(WireDialect::Legacy);
        assert_eq!(d.form_for(7), PeerForm::Legacy);
    }
}
