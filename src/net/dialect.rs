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

use crate::wire::{InitialMessage, Notification, ProtocolVersion};

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
    use crate::wire::{ElectionAddress, ServerState};

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
