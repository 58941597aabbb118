//! Notifications: the election's one message, the payload of every frame (reference A.2).
//!
//! | generation | size | layout |
//! |---|---|---|
//! | <= 3.3 | 28 | `i32 state, i64 leader, i64 zxid, i64 electionEpoch` |
//! | 3.4.0-3.4.5 | 36 | `+ i64 peerEpoch` |
//! | 3.4.6-3.4.14 | 40 | `+ i32 version` (1) |
//! | 3.5+ | 44+N | `+ i32 configLength, N bytes config` (version 2) |
//!
//! [`Notification`] records which fields were on the wire (so every size re-encodes byte for
//! byte, including bytes a receiver ignores) and [`Notification::java_view`] says how a current
//! Java receiver (3.5 to 3.9) reads it: which fields it uses, or why it drops the message.

use std::borrow::Cow;

use super::cursor::Cursor;
use super::error::{ErrorKind, WireError};

/// Bytes before the peer epoch: state, leader, zxid, election epoch.
pub const BASE_BYTES: usize = 28;
/// The 3.4.0-3.4.5 size: with peer epoch, without version.
pub const WITH_PEER_EPOCH_BYTES: usize = 36;
/// The 3.4.6+ size without config: with version.
pub const WITH_VERSION_BYTES: usize = 40;
/// The smallest current (version >= 2) message: with a config length.
pub const WITH_CONFIG_BYTES: usize = 44;
/// The version current servers send.
pub const CURRENT_VERSION: i32 = 2;

/// A server state code (`ServerState.ordinal()`). Unknown codes decode (and re-encode) but are
/// flagged: Java drops them from voters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerState {
    Looking,
    Following,
    Leading,
    Observing,
    /// Any other code.
    Unknown(i32),
}

impl ServerState {
    /// The state for a wire code.
    pub fn from_code(code: i32) -> Self {
        match code {
            0 => ServerState::Looking,
            1 => ServerState::Following,
            2 => ServerState::Leading,
            3 => ServerState::Observing,
            other => ServerState::Unknown(other),
        }
    }

    /// The wire code.
    pub fn code(self) -> i32 {
        match self {
            ServerState::Looking => 0,
            ServerState::Following => 1,
            ServerState::Leading => 2,
            ServerState::Observing => 3,
            ServerState::Unknown(c) => c,
        }
    }

    /// The name ZooKeeper's logs use (`LOOKING`, ...); `UNKNOWN` for other codes.
    pub fn name(self) -> &'static str {
        match self {
            ServerState::Looking => "LOOKING",
            ServerState::Following => "FOLLOWING",
            ServerState::Leading => "LEADING",
            ServerState::Observing => "OBSERVING",
            ServerState::Unknown(_) => "UNKNOWN",
        }
    }

    /// The state for a name as [`ServerState::name`] writes it.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "LOOKING" => ServerState::Looking,
            "FOLLOWING" => ServerState::Following,
            "LEADING" => ServerState::Leading,
            "OBSERVING" => ServerState::Observing,
            _ => return None,
        })
    }
}

/// One notification, with exactly the fields its sender put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The sender's state when it sent this.
    pub state: ServerState,
    /// The proposed (or, when not LOOKING, the followed) leader's sid.
    pub leader: i64,
    /// The proposed leader's last zxid (`epoch << 32 | counter`).
    pub zxid: i64,
    /// The sender's round (`logicalclock`).
    pub election_epoch: i64,
    /// The proposed leader's epoch; absent in the 28-byte form.
    pub peer_epoch: Option<i64>,
    /// The format version field; absent in the 28- and 36-byte forms.
    pub version: Option<i32>,
    /// The config bytes (UTF-8 text of `QuorumVerifier.toString()`), present when the message
    /// carries a config length, i.e. version >= 2 and at least 44 bytes.
    pub config: Option<Vec<u8>>,
    /// Bytes after everything a receiver reads; Java ignores them. Empty in real traffic.
    pub trailing: Vec<u8>,
}

/// The fields at the start of a notification whose end is missing (a capture cut by a small
/// snap length): each `None` when its bytes are not all there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialNotification {
    pub state: Option<ServerState>,
    pub leader: Option<i64>,
    pub zxid: Option<i64>,
    pub election_epoch: Option<i64>,
    pub peer_epoch: Option<i64>,
    /// Payload bytes present.
    pub captured: usize,
    /// Payload bytes the frame declared.
    pub size: usize,
}

impl PartialNotification {
    /// Reads what `prefix` (the first bytes of a `size`-byte notification payload) holds.
    pub fn decode(prefix: &[u8], size: usize) -> PartialNotification {
        let i64_at = |at: usize| {
            prefix
                .get(at..at + 8)
                .map(|b| i64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
        };
        PartialNotification {
            state: prefix
                .get(..4)
                .map(|b| ServerState::from_code(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))),
            leader: i64_at(4),
            zxid: i64_at(12),
            election_epoch: i64_at(20),
            peer_epoch: if size > 28 { i64_at(28) } else { None },
            captured: prefix.len(),
            size,
        }
    }
}

/// How a current Java receiver (3.5-3.9) reads a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JavaView {
    /// Accepted, with the fields Java uses.
    Accepted {
        /// `zxid >> 32` for the 28-byte form.
        peer_epoch: i64,
        /// 0 for the 28- and 40-byte forms (Java does not read a 40-byte message's version).
        version: i32,
        /// Whether Java will look at the config (version >= 2).
        has_config: bool,
    },
    /// Dropped without any reply; the reason as Java would log it.
    Dropped(&'static str),
}

impl Notification {
    /// A current-format (version 2) notification carrying `config`.
    pub fn current(
        state: ServerState,
        leader: i64,
        zxid: i64,
        election_epoch: i64,
        peer_epoch: i64,
        config: impl Into<Vec<u8>>,
    ) -> Self {
        Notification {
            state,
            leader,
            zxid,
            election_epoch,
            peer_epoch: Some(peer_epoch),
            version: Some(CURRENT_VERSION),
            config: Some(config.into()),
            trailing: Vec::new(),
        }
    }

    /// The 40-byte form with version 1: Java reads no config from it (reference A.2), so it
    /// can never make a receiver restart its election over a config.
    pub fn without_config(
        state: ServerState,
        leader: i64,
        zxid: i64,
        election_epoch: i64,
        peer_epoch: i64,
    ) -> Self {
        Notification {
            version: Some(1),
            config: None,
            ..Notification::current(state, leader, zxid, election_epoch, peer_epoch, Vec::new())
        }
    }

    /// Decodes a frame payload. Sizes that no sender produces and Java cannot read (29-35,
    /// 37-39, 41-43 with version >= 2, a bad config length) are errors; every size Java or an
    /// older sender produced decodes.
    pub fn decode(payload: &[u8]) -> Result<Self, WireError> {
        Notification::decode_copying(payload, <[u8]>::to_vec)
    }

    /// [`Notification::decode`], the config's bytes copied out by `copy` (a decoder of
    /// millions of notifications copies them into buffers it reuses).
    pub fn decode_copying(
        payload: &[u8],
        copy: impl FnOnce(&[u8]) -> Vec<u8>,
    ) -> Result<Self, WireError> {
        let mut c = Cursor::new(payload);
        let state = ServerState::from_code(c.i32("state")?);
        let leader = c.i64("leader")?;
        let zxid = c.i64("zxid")?;
        let election_epoch = c.i64("election epoch")?;
        let mut n = Notification {
            state,
            leader,
            zxid,
            election_epoch,
            peer_epoch: None,
            version: None,
            config: None,
            trailing: Vec::new(),
        };
        if c.remaining() == 0 {
            return Ok(n);
        }
        n.peer_epoch = Some(c.i64("peer epoch")?);
        if c.remaining() == 0 {
            return Ok(n);
        }
        let version = c.i32("version")?;
        n.version = Some(version);
        // Java reads no version from a 40-byte message, and a config length only after version >= 2.
        if version >= CURRENT_VERSION && c.remaining() > 0 {
            let at = c.pos();
            let len = c.i32("config length")?;
            if len < 0 || len as usize > payload.len() {
                return Err(WireError::new(
                    "config length",
                    at,
                    ErrorKind::OutOfRange {
                        value: i64::from(len),
                        min: 0,
                        max: (payload.len() - WITH_CONFIG_BYTES) as i64,
                    },
                ));
            }
            n.config = Some(copy(c.take("config", len as usize)?));
        }
        n.trailing = c.rest().to_vec();
        Ok(n)
    }

    /// The exact bytes. Fails for field combinations that would decode differently (a version
    /// without a peer epoch, a config without version >= 2, trailing bytes a receiver would read
    /// as fields).
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        self.check_layout()?;
        let mut out = Vec::with_capacity(self.size());
        out.extend_from_slice(&self.state.code().to_be_bytes());
        out.extend_from_slice(&self.leader.to_be_bytes());
        out.extend_from_slice(&self.zxid.to_be_bytes());
        out.extend_from_slice(&self.election_epoch.to_be_bytes());
        if let Some(pe) = self.peer_epoch {
            out.extend_from_slice(&pe.to_be_bytes());
        }
        if let Some(v) = self.version {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if let Some(config) = &self.config {
            out.extend_from_slice(&(config.len() as i32).to_be_bytes());
            out.extend_from_slice(config);
        }
        out.extend_from_slice(&self.trailing);
        Ok(out)
    }

    /// The first `len` bytes of this notification's encoding: a partial notification, as a
    /// sender cut short would frame it (`zkfle repro ZOOKEEPER-3769`). `len` is capped at the
    /// full size.
    pub fn encode_truncated(&self, len: usize) -> Result<Vec<u8>, WireError> {
        let mut out = self.encode()?;
        out.truncate(len);
        Ok(out)
    }

    /// The payload size in bytes.
    pub fn size(&self) -> usize {
        BASE_BYTES
            + self.peer_epoch.map_or(0, |_| 8)
            + self.version.map_or(0, |_| 4)
            + self.config.as_ref().map_or(0, |c| 4 + c.len())
            + self.trailing.len()
    }

    fn check_layout(&self) -> Result<(), WireError> {
        let fail =
            |field, offset, why| Err(WireError::new(field, offset, ErrorKind::Inconsistent(why)));
        match (self.peer_epoch, self.version, &self.config) {
            (None, Some(_), _) | (None, _, Some(_)) => {
                return fail(
                    "peer epoch",
                    BASE_BYTES,
                    "a version or config needs a peer epoch",
                );
            }
            (_, None, Some(_)) => {
                return fail("version", WITH_PEER_EPOCH_BYTES, "a config needs a version");
            }
            (_, Some(v), Some(_)) if v < CURRENT_VERSION => {
                return fail(
                    "version",
                    WITH_PEER_EPOCH_BYTES,
                    "a config needs version >= 2",
                );
            }
            (_, Some(v), None) if v >= CURRENT_VERSION && !self.trailing.is_empty() => {
                return fail(
                    "trailing",
                    WITH_VERSION_BYTES,
                    "version >= 2 makes the next bytes a config length",
                );
            }
            (_, None, _) if !self.trailing.is_empty() => {
                return fail(
                    "trailing",
                    BASE_BYTES,
                    "bytes after a 28- or 36-byte message would be read as fields",
                );
            }
            _ => {}
        }
        if let Some(config) = &self.config
            && config.len() > super::frame::MAX_FRAME_BYTES
        {
            return Err(WireError::new(
                "config length",
                WITH_VERSION_BYTES,
                ErrorKind::OutOfRange {
                    value: config.len() as i64,
                    min: 0,
                    max: super::frame::MAX_FRAME_BYTES as i64,
                },
            ));
        }
        Ok(())
    }

    /// The peer epoch a current receiver uses: the one sent, or `zxid >> 32` (arithmetic) for
    /// the 28-byte form.
    pub fn effective_peer_epoch(&self) -> i64 {
        self.peer_epoch.unwrap_or(self.zxid >> 32)
    }

    /// The config as text (lossy where it is not UTF-8, as Java's decoder is).
    pub fn config_text(&self) -> Option<Cow<'_, str>> {
        self.config.as_deref().map(String::from_utf8_lossy)
    }

    /// The `version=<hex>` of the carried config, when it has a readable one.
    pub fn config_version(&self) -> Option<u64> {
        super::config::version_of_bytes(self.config.as_deref()?)
    }

    /// How a current Java receiver reads this message (reference A.2, "How a current receiver
    /// interprets each size"; state validation is the receiver's, per sender, and not here).
    pub fn java_view(&self) -> JavaView {
        match (self.peer_epoch, self.version) {
            (None, _) => JavaView::Accepted {
                peer_epoch: self.zxid >> 32,
                version: 0,
                has_config: false,
            },
            (Some(_), None) => JavaView::Dropped(
                "36-byte (3.4.0-3.4.5) format: current servers drop it as partial / malformed",
            ),
            (Some(pe), Some(v)) => {
                let forty = self.config.is_none() && self.trailing.is_empty();
                JavaView::Accepted {
                    peer_epoch: pe,
                    version: if forty { 0 } else { v },
                    has_config: self.config.is_some(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(state: i32, leader: i64, zxid: i64, ee: i64) -> Vec<u8> {
        let mut b = state.to_be_bytes().to_vec();
        for v in [leader, zxid, ee] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b
    }

    fn roundtrip(bytes: &[u8]) -> Notification {
        let n = Notification::decode(bytes).unwrap();
        assert_eq!(n.encode().unwrap(), bytes);
        assert_eq!(n.size(), bytes.len());
        n
    }

    #[test]
    fn every_historical_size() {
        let b28 = base(0, 1, 0x5_0000_0003, 7);
        let n = roundtrip(&b28);
        assert_eq!((n.peer_epoch, n.effective_peer_epoch()), (None, 5));
        assert!(matches!(
            n.java_view(),
            JavaView::Accepted {
                peer_epoch: 5,
                version: 0,
                ..
            }
        ));

        let mut b36 = b28.clone();
        b36.extend_from_slice(&9i64.to_be_bytes());
        let n = roundtrip(&b36);
        assert_eq!(n.peer_epoch, Some(9));
        assert!(matches!(n.java_view(), JavaView::Dropped(_)));

        let mut b40 = b36.clone();
        b40.extend_from_slice(&7i32.to_be_bytes());
        let n = roundtrip(&b40);
        assert_eq!(n.version, Some(7));
        // Java does not read a 40-byte message's version.
        assert!(matches!(
            n.java_view(),
            JavaView::Accepted { version: 0, .. }
        ));

        let config = b"server.1=127.0.0.1:2888:3888:participant\nversion=0";
        let mut b44 = b36.clone();
        b44.extend_from_slice(&2i32.to_be_bytes());
        b44.extend_from_slice(&(config.len() as i32).to_be_bytes());
        b44.extend_from_slice(config);
        let n = roundtrip(&b44);
        assert_eq!(n.config.as_deref(), Some(&config[..]));
        assert_eq!(n.config_version(), Some(0));
        assert!(matches!(
            n.java_view(),
            JavaView::Accepted {
                version: 2,
                has_config: true,
                ..
            }
        ));

        // 41 bytes with v1: accepted, trailing ignored. 44 with N=0: accepted.
        let mut b41 = b36.clone();
        b41.extend_from_slice(&1i32.to_be_bytes());
        b41.push(0xaa);
        assert_eq!(roundtrip(&b41).trailing, vec![0xaa]);
        let mut b44_empty = b36.clone();
        b44_empty.extend_from_slice(&2i32.to_be_bytes());
        b44_empty.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(roundtrip(&b44_empty).config, Some(vec![]));
        // Trailing bytes after a config are ignored by Java and kept by us.
        let mut extra = b44.clone();
        extra.extend_from_slice(b"xyz");
        assert_eq!(roundtrip(&extra).trailing, b"xyz".to_vec());
    }

    #[test]
    fn unknown_state_decodes_flagged() {
        let n = roundtrip(&base(7, 1, 0, 1));
        assert_eq!(n.state, ServerState::Unknown(7));
        assert_eq!(n.state.name(), "UNKNOWN");
    }

    #[test]
    fn malformed_sizes_name_the_field() {
        let b = base(0, 0, 0, 0);
        let e = Notification::decode(&b[..12]).unwrap_err();
        assert_eq!((e.field, e.offset), ("zxid", 12));
        let mut b30 = b.clone();
        b30.extend_from_slice(&[0, 0]);
        let e = Notification::decode(&b30).unwrap_err();
        assert_eq!((e.field, e.offset), ("peer epoch", 28));
        let mut b38 = b.clone();
        b38.extend_from_slice(&[0; 10]);
        assert_eq!(Notification::decode(&b38).unwrap_err().field, "version");
        let mut b41 = b.clone();
        b41.extend_from_slice(&0i64.to_be_bytes());
        b41.extend_from_slice(&2i32.to_be_bytes());
        b41.push(0);
        let e = Notification::decode(&b41).unwrap_err();
        assert_eq!((e.field, e.offset), ("config length", 40));
        // Negative and over-capacity config lengths (FLEMalformedNotificationMessageTest).
        for (len, body) in [
            (-123i32, &b"\0\0\0\0"[..]),
            (10000, &b"my very invalid config string"[..]),
            (10, &b"abc"[..]),
        ] {
            let mut m = b.clone();
            m.extend_from_slice(&0i64.to_be_bytes());
            m.extend_from_slice(&2i32.to_be_bytes());
            m.extend_from_slice(&len.to_be_bytes());
            m.extend_from_slice(body);
            let e = Notification::decode(&m).unwrap_err();
            assert!(
                e.field == "config length" || e.field == "config",
                "{len}: {e}"
            );
        }
    }

    #[test]
    fn encode_refuses_layouts_that_would_not_decode_back() {
        let mut n = Notification::current(ServerState::Looking, 1, 0, 1, 0, b"version=0".to_vec());
        n.version = Some(1);
        assert!(n.encode().is_err());
        let n = Notification {
            version: Some(2),
            config: None,
            trailing: vec![1, 2, 3, 4],
            ..Notification::current(ServerState::Looking, 1, 0, 1, 0, vec![])
        };
        assert!(n.encode().is_err());
        let n = Notification {
            peer_epoch: None,
            version: None,
            config: None,
            trailing: vec![1],
            ..n
        };
        assert!(n.encode().is_err());
    }

    #[test]
    fn a_truncated_notification_is_a_prefix_of_the_whole() {
        let n = Notification::current(ServerState::Looking, 1, 2, 3, 4, b"version=0".to_vec());
        let whole = n.encode().unwrap();
        assert_eq!(n.encode_truncated(30).unwrap(), whole[..30]);
        assert_eq!(n.encode_truncated(1000).unwrap(), whole);
    }
}
