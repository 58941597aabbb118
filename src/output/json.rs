//! The JSON forms of election messages and decoded records: a contract that scripts rely on
//! (the README documents every field). `zkfle wire decode` prints messages, `zkfle wire
//! encode` reads them back ([`message_from_json`]), and `zkfle decode --format jsonl` prints
//! records: the envelope (time, addresses, sids) around a message's fields.
//!
//! [`JsonWriter`] is the one writer of these objects. It writes bytes by hand rather than
//! through serde: millions of lines stream through it, and nearly all of their keys are
//! constants, their integers go through `itoa` and their config text (the same on most
//! notifications) is escaped once.
//!
//! Conversions from JSON are written by hand rather than derived so that an error names the
//! field that was wrong.

use serde_json::{Map, Value};

use crate::capture::Timestamp;
use crate::decode::{Body, ProblemKind, QuorumMessage, Record, Severity};

use crate::wire::{InitialMessage, JavaView, Notification, ProtocolVersion, ServerState};

/// A message of either kind, as the JSON `type` field says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Initial(InitialMessage),
    Notification(Notification),
}

impl Message {
    /// The exact bytes on the wire (a notification without its frame length prefix).
    pub fn encode(&self) -> Result<Vec<u8>, crate::wire::WireError> {
        match self {
            Message::Initial(m) => m.encode(),
            Message::Notification(n) => n.encode(),
        }
    }
}

/// A JSON value that does not describe a message; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {problem}")]
pub struct JsonError {
    pub field: String,
    pub problem: String,
}

fn err(field: &str, problem: impl Into<String>) -> JsonError {
    JsonError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// Writes the JSON objects of records and messages.
///
/// A message's object: `type` (`notification` or `initial`), then its fields. A notification's
/// `peer_epoch` is what a current receiver uses (`zxid >> 32` for the 28-byte form, which has
/// none); `version` is the field on the wire, null when the form has none; `size` is the
/// payload size, which tells which historical form was sent. An initial message's `addresses`
/// are the elements as sent; `address_text` appears only when the whole text differs from
/// joining them (Java drops trailing empty elements).
///
/// A record's object (one `zkfle decode --format jsonl` line): `type`, the envelope (`time`,
/// `src`, `dst`, `from_sid`, `to_sid`, `connection`, `offset`; then `from_sid_source` and
/// `to_sid_source` where a sid was not learned from an initial message: `sid_map`, `config`,
/// `notification_config` or `address`), then the message's own fields;
/// for quorum packets `packet`, `packet_type`, `zxid`, `data_bytes` and what identifies the
/// packet; for closes `reset` and `quorum_port`; for problems `severity`, `kind`, details and `what`.
#[derive(Default)]
pub struct JsonWriter {
    /// The config text seen last (its bytes), its JSON string and its `version=`.
    config: Vec<u8>,
    config_json: Vec<u8>,
    config_version: Option<u64>,
    config_valid: bool,
    /// Why Java's receiver thread dies on that config ([`crate::wire::config::java_parse_dies`]).
    config_kills: Option<String>,
    /// `,"src":…,"dst":…` for the last few address pairs (a connection's two directions,
    /// mostly).
    addrs: super::AddrPairs,
    /// The seconds of the last time written, as text.
    seconds: SecondsText,
}

impl JsonWriter {
    /// A writer with an empty config cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `m`'s JSON object to `out`.
    pub fn message(&mut self, out: &mut Vec<u8>, m: &Message) {
        match m {
            Message::Initial(m) => {
                out.extend_from_slice(b"{\"type\":\"initial\"");
                write_initial(out, m);
            }
            Message::Notification(n) => {
                out.extend_from_slice(b"{\"type\":\"notification\"");
                self.write_notification(out, n);
            }
        }
        out.push(b'}');
    }

    /// Appends `r`'s JSON object (without a newline) to `out`.
    pub fn record(&mut self, out: &mut Vec<u8>, r: &Record) {
        // Each arm appends its own literal: copies of a length known at compile time are a few
        // moves, where one of several lengths is a call to `memcpy`.
        match &r.body {
            Body::Initial(_) => out.extend_from_slice(b"{\"type\":\"initial\",\"time\":"),
            Body::Notification(_) => out.extend_from_slice(b"{\"type\":\"notification\",\"time\":"),
            Body::Quorum(_) => out.extend_from_slice(b"{\"type\":\"quorum\",\"time\":"),
            Body::Closed { .. } => out.extend_from_slice(b"{\"type\":\"closed\",\"time\":"),
            Body::Problem(_) => out.extend_from_slice(b"{\"type\":\"error\",\"time\":"),
        }
        json_time(out, r.time, &mut self.seconds);
        self.write_envelope(out, r);
        out.extend_from_slice(b",\"offset\":");
        json_opt_int(out, r.offset);
        // How a sid no initial message gave was learned (rare: not in the envelope's text kept).
        for (key, source) in [
            (&b",\"from_sid_source\":\""[..], r.from_sid_source),
            (&b",\"to_sid_source\":\""[..], r.to_sid_source),
        ] {
            if let Some(name) = source.and_then(|s| s.name()) {
                out.extend_from_slice(key);
                out.extend_from_slice(name.as_bytes());
                out.push(b'"');
            }
        }
        match &r.body {
            Body::Initial(m) => write_initial(out, m),
            Body::Notification(n) => self.write_notification(out, n),
            Body::Quorum(q) => write_quorum(out, q),
            Body::Closed { reset, quorum } => {
                out.extend_from_slice(if *reset {
                    b",\"reset\":true"
                } else {
                    b",\"reset\":false"
                });
                out.extend_from_slice(if *quorum {
                    b",\"quorum_port\":true"
                } else {
                    b",\"quorum_port\":false"
                });
            }
            Body::Problem(p) => write_problem(out, p, r.time),
        }
        out.push(b'}');
    }

    /// Addresses, sids and connection: the same for most of a connection direction's records,
    /// so kept as text (see [`super::AddrPairs`]).
    fn write_envelope(&mut self, out: &mut Vec<u8>, r: &Record) {
        let (conn, src, dst) = (r.conn, r.src, r.dst);
        let sids = (r.from_sid, r.to_sid);
        out.extend_from_slice(self.addrs.text(conn, src, dst, sids, |json| {
            json.extend_from_slice(b",\"src\":");
            json_addr(json, src);
            json.extend_from_slice(b",\"dst\":");
            json_addr(json, dst);
            json.extend_from_slice(b",\"from_sid\":");
            json_opt_int(json, sids.0);
            json.extend_from_slice(b",\"to_sid\":");
            json_opt_int(json, sids.1);
            json.extend_from_slice(b",\"connection\":");
            json_opt_int(json, conn.map(|c| c.0));
        }));
    }

    fn write_notification(&mut self, out: &mut Vec<u8>, n: &Notification) {
        // `ServerState::name` and `code`, written as one literal per state (a copy of known
        // length, as in `record`); the read-back tests hold the two to each other.
        match n.state {
            ServerState::Looking => {
                out.extend_from_slice(b",\"state\":\"LOOKING\",\"state_code\":0")
            }
            ServerState::Following => {
                out.extend_from_slice(b",\"state\":\"FOLLOWING\",\"state_code\":1")
            }
            ServerState::Leading => {
                out.extend_from_slice(b",\"state\":\"LEADING\",\"state_code\":2")
            }
            ServerState::Observing => {
                out.extend_from_slice(b",\"state\":\"OBSERVING\",\"state_code\":3")
            }
            ServerState::Unknown(code) => {
                out.extend_from_slice(b",\"state\":\"UNKNOWN\",\"state_code\":");
                json_int(out, code);
            }
        }
        out.extend_from_slice(b",\"leader\":");
        json_int(out, n.leader);
        out.extend_from_slice(b",\"zxid\":");
        json_int(out, n.zxid);
        out.extend_from_slice(b",\"election_epoch\":");
        json_int(out, n.election_epoch);
        out.extend_from_slice(b",\"peer_epoch\":");
        json_int(out, n.effective_peer_epoch());
        out.extend_from_slice(b",\"version\":");
        json_opt_int(out, n.version);
        out.extend_from_slice(b",\"config\":");
        let (valid, version) = match &n.config {
            None => {
                out.extend_from_slice(b"null");
                (true, None)
            }
            Some(raw) => {
                if self.config_json.is_empty() || self.config != *raw {
                    self.config.clear();
                    self.config.extend_from_slice(raw);
                    self.config_json.clear();
                    // Lossy for invalid UTF-8, exactly as `config_text` (and the reference).
                    let _ =
                        serde_json::to_writer(&mut self.config_json, &String::from_utf8_lossy(raw));
                    self.config_valid = std::str::from_utf8(raw).is_ok();
                    self.config_version = n.config_version();
                    self.config_kills = crate::wire::config::java_parse_dies(raw);
                }
                out.extend_from_slice(&self.config_json);
                (self.config_valid, self.config_version)
            }
        };
        out.extend_from_slice(b",\"config_version\":");
        json_opt_int(out, version);
        out.extend_from_slice(b",\"size\":");
        json_int(out, n.size());
        if let (Some(raw), false) = (&n.config, valid) {
            out.extend_from_slice(b",\"config_hex\":\"");
            out.extend_from_slice(hex::encode(raw).as_bytes());
            out.push(b'"');
        }
        if !n.trailing.is_empty() {
            out.extend_from_slice(b",\"trailing\":\"");
            out.extend_from_slice(hex::encode(&n.trailing).as_bytes());
            out.push(b'"');
        }
        let kills = n.config.is_some() && self.config_kills.is_some();
        if !kills && matches!(n.java_view(), JavaView::Accepted { .. }) {
            out.extend_from_slice(b",\"java_accepts\":true");
        } else {
            out.extend_from_slice(b",\"java_accepts\":false");
        }
        if let (true, Some(why)) = (kills, &self.config_kills) {
            out.extend_from_slice(b",\"note\":");
            json_str(out, why);
        } else if let Some(note) = notification_note(n) {
            out.extend_from_slice(b",\"note\":");
            json_str(out, &note);
        }
    }
}

/// What a reader of a notification's JSON should know about how Java takes it.
fn notification_note(n: &Notification) -> Option<std::borrow::Cow<'static, str>> {
    match (n.java_view(), n.state) {
        (JavaView::Dropped(why), _) => Some(why.into()),
        (JavaView::Accepted { .. }, ServerState::Unknown(code)) => Some(
            format!(
                "unknown state code {code}: Java drops it from voters, answers it from non-voters"
            )
            .into(),
        ),
        (JavaView::Accepted { .. }, _) if n.size() == 40 => {
            Some("40-byte form: current servers ignore its version field".into())
        }
        (JavaView::Accepted { .. }, _) if n.size() == 28 => {
            Some("28-byte form: current servers take the peer epoch from the zxid".into())
        }
        _ => None,
    }
}

/// A problem's entries: `severity`, `kind` and its details, `what`.
fn write_problem(out: &mut Vec<u8>, p: &crate::decode::Problem, time: crate::capture::Timestamp) {
    out.extend_from_slice(match p.severity() {
        Severity::Error => b",\"severity\":\"error\",\"kind\":",
        Severity::Warning => b",\"severity\":\"warning\",\"kind\":",
    });
    match &p.kind {
        ProblemKind::Malformed { error: w, .. } => {
            out.extend_from_slice(b"\"malformed\",\"field\":");
            json_str(out, w.field);
            out.extend_from_slice(b",\"field_offset\":");
            json_int(out, w.offset);
        }
        ProblemKind::Gap { missing } => {
            out.extend_from_slice(b"\"gap\",\"missing\":");
            json_int(out, *missing);
        }
        ProblemKind::Cut {
            missing, partial, ..
        } => {
            out.extend_from_slice(b"\"cut\",\"missing\":");
            json_int(out, *missing);
            if let Some(p) = partial {
                out.extend_from_slice(b",\"partial\":");
                let _ = serde_json::to_writer(
                    &mut *out,
                    &serde_json::json!({
                        "state": p.state.map(|s| s.name()),
                        "leader": p.leader,
                        "zxid": p.zxid,
                        "election_epoch": p.election_epoch,
                        "peer_epoch": p.peer_epoch,
                        "captured": p.captured,
                        "size": p.size,
                    }),
                );
            }
        }
        ProblemKind::Resynced { skipped, .. } => {
            out.extend_from_slice(b"\"resynced\",\"skipped\":");
            json_int(out, *skipped);
        }
        ProblemKind::MidStream { .. } => out.extend_from_slice(b"\"mid_stream\""),
        ProblemKind::Capture { .. } => out.extend_from_slice(b"\"capture\""),
        ProblemKind::Unfinished { bytes, .. } => {
            out.extend_from_slice(b"\"unfinished\",\"bytes\":");
            json_int(out, *bytes);
        }
        ProblemKind::Encrypted { .. } => out.extend_from_slice(b"\"encrypted\""),
        ProblemKind::AddressConflict(c) => {
            out.extend_from_slice(b"\"address_conflict\",\"address\":");
            json_str(out, &c.address);
            out.extend_from_slice(b",\"was_sid\":");
            json_int(out, c.was.0);
            out.extend_from_slice(b",\"was_source\":");
            json_str(out, c.was.1.key());
            out.extend_from_slice(b",\"sid\":");
            json_int(out, c.now.0);
            out.extend_from_slice(b",\"source\":");
            json_str(out, c.now.1.key());
        }
        ProblemKind::Unacknowledged { since, acked } => {
            out.extend_from_slice(b"\"unacknowledged\",\"since\":");
            let _ = serde_json::to_writer(&mut *out, &since.as_secs_f64());
            out.extend_from_slice(if *acked {
                b",\"acked\":true"
            } else {
                b",\"acked\":false"
            });
        }
        ProblemKind::Sasl { accepted, user, .. } => {
            out.extend_from_slice(b"\"sasl\",\"accepted\":");
            out.extend_from_slice(if *accepted { b"true" } else { b"false" });
            out.extend_from_slice(b",\"user\":");
            match user {
                Some(u) => json_str(out, u),
                None => out.extend_from_slice(b"null"),
            }
        }
    }
    out.extend_from_slice(b",\"what\":");
    json_str(out, &super::problem_words(p, time));
}

/// A record's JSON object as a value (for outputs that add to it).
pub fn record_value(w: &mut JsonWriter, r: &Record) -> Value {
    let mut out = Vec::new();
    w.record(&mut out, r);
    serde_json::from_slice(&out).unwrap_or(Value::Null)
}

fn write_initial(out: &mut Vec<u8>, msg: &InitialMessage) {
    out.extend_from_slice(b",\"protocol_version\":");
    json_opt_int(out, msg.protocol.code());
    out.extend_from_slice(b",\"sid\":");
    json_int(out, msg.sid);
    out.extend_from_slice(b",\"addresses\":[");
    for (i, a) in msg.addresses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, &a.text);
    }
    out.push(b']');
    if msg.protocol != ProtocolVersion::Legacy && !is_joined(&msg.address_text, msg) {
        out.extend_from_slice(b",\"address_text\":");
        json_str(out, &msg.address_text);
    }
    out.extend_from_slice(b",\"size\":");
    json_opt_int(out, msg.encoded_len().ok());
}

/// Whether `text` is the addresses joined with `|` (without joining them).
fn is_joined(text: &str, msg: &InitialMessage) -> bool {
    let mut rest = text;
    for (i, a) in msg.addresses.iter().enumerate() {
        if i > 0 {
            match rest.strip_prefix('|') {
                Some(r) => rest = r,
                None => return false,
            }
        }
        match rest.strip_prefix(a.text.as_str()) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// A quorum packet's entries.
fn write_quorum(out: &mut Vec<u8>, q: &QuorumMessage) {
    out.extend_from_slice(b",\"packet\":");
    json_str(out, q.type_name());
    out.extend_from_slice(b",\"packet_type\":");
    json_int(out, q.ptype);
    out.extend_from_slice(b",\"zxid\":");
    json_int(out, q.zxid);
    out.extend_from_slice(b",\"data_bytes\":");
    json_opt_int(out, q.data_len);
    if let Some(l) = &q.learner {
        out.extend_from_slice(b",\"sid\":");
        json_int(out, l.sid);
        out.extend_from_slice(b",\"protocol_version\":");
        json_int(out, l.protocol_version);
        out.extend_from_slice(b",\"config_version\":");
        json_int(out, l.config_version);
    }
    if let Some(sid) = q.designated_leader {
        out.extend_from_slice(b",\"designated_leader\":");
        json_int(out, sid);
    }
    if let Some(n) = q.snapshot_bytes {
        out.extend_from_slice(b",\"snapshot_bytes\":");
        json_int(out, n);
    }
}

/// A capture time as the JSON number serde_json writes for [`Timestamp::as_secs_f64`]: the
/// shortest decimal that reads back as that float.
///
/// Most times are whole microseconds of a date between 2004 and 2106 (seconds in 2^30..2^32).
/// There the float's step (2^-22 or 2^-21 s) is finer than a microsecond, so a decimal of at most
/// six fraction digits that reads back as the float is the shortest one, and no other of as few
/// digits does: the seconds, a point and the microseconds without trailing zeros. Whether the
/// microseconds read back (the float is the sum of two roundings, so it may be a step away from
/// the nearest) is checked exactly, in integers. Anything else takes serde_json's own way.
fn json_time(out: &mut Vec<u8>, time: Timestamp, seconds: &mut SecondsText) {
    let x = time.as_secs_f64();
    if (1 << 30..1 << 32).contains(&time.secs) && time.nanos.is_multiple_of(1000) {
        let micros = time.nanos / 1000;
        // The float's step is 2^-steps seconds; the fraction (exact: x is within a second of
        // the seconds) is a whole number of steps.
        let steps: u32 = if time.secs < 1 << 31 { 22 } else { 21 };
        let fraction = x - time.secs as f64;
        if (0.0..1.0).contains(&fraction) {
            let in_steps = (fraction * f64::from(1u32 << steps)) as u64;
            // |micros/10^6 - in_steps/2^steps| < half a step, in units of 2^-steps/10^6.
            let distance = (u64::from(micros) << steps).abs_diff(in_steps * 1_000_000);
            if distance < 500_000 {
                // Seconds in this range have ten digits: `ssssssssss.uuuuuu`, composed whole
                // (the seconds' digits kept from the last time: records come seconds apart at
                // most) and appended at once (a copy of known length), then its trailing zeros
                // cut (one kept after the point).
                let mut text = *b"0000000000.000000";
                text[..10].copy_from_slice(seconds.digits(time.secs as u64));
                let mut rest = micros as usize;
                for pair in text[11..].rchunks_exact_mut(2) {
                    let at = 2 * (rest % 100);
                    pair.copy_from_slice(&DIGIT_PAIRS[at..at + 2]);
                    rest /= 100;
                }
                let mut kept = text.len();
                while kept > 12 && text[kept - 1] == b'0' {
                    kept -= 1;
                }
                out.extend_from_slice(&text);
                out.truncate(out.len() - (text.len() - kept));
                return;
            }
        }
    }
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &x);
}

/// `00` to `99`, two bytes each.
const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The ten digits of a time's whole seconds, kept for the next time with the same seconds.
#[derive(Default)]
struct SecondsText {
    secs: u64,
    digits: [u8; 10],
}

impl SecondsText {
    /// The ten digits of `secs` (below 10^10).
    fn digits(&mut self, secs: u64) -> &[u8; 10] {
        if self.secs != secs || self.digits[0] == 0 {
            let mut rest = secs;
            for d in self.digits.iter_mut().rev() {
                *d = b'0' + (rest % 10) as u8;
                rest /= 10;
            }
            self.secs = secs;
        }
        &self.digits
    }
}

fn json_int<I: itoa::Integer + Copy + TryInto<u8>>(out: &mut Vec<u8>, v: I) {
    // One digit (most sids, states, versions and epochs) is one byte pushed: a copy of itoa's
    // text is a call to `memcpy` for a byte or two. (Pushing up to four digits one by one
    // cost more than itoa: docs/benchmarks.md, "Decode speed".)
    match v.try_into() {
        Ok(d) if d < 10 => out.push(b'0' + d),
        _ => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
    }
}

fn json_opt_int<I: itoa::Integer + Copy + TryInto<u8>>(out: &mut Vec<u8>, v: Option<I>) {
    match v {
        Some(v) => json_int(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

/// A socket address as a JSON string, `null` for none. Its text never needs escaping (an
/// IPv6 scope is a number).
fn json_addr(out: &mut Vec<u8>, addr: Option<std::net::SocketAddr>) {
    match addr {
        None => out.extend_from_slice(b"null"),
        Some(a) => super::write_addr(out, a, true),
    }
}

/// A JSON string: copied as is when serde_json would not escape any of it (no `"`, `\` or
/// control characters), else written by serde_json.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Reads a message back from its JSON object (as [`JsonWriter::message`] writes it; fields that
/// can be derived may be left out).
pub fn message_from_json(v: &Value) -> Result<Message, JsonError> {
    let obj = v
        .as_object()
        .ok_or_else(|| err("(top)", "expected a JSON object"))?;
    match obj.get("type").and_then(Value::as_str) {
        Some("notification") => notification_from_json(obj).map(Message::Notification),
        Some("initial") => initial_from_json(obj).map(Message::Initial),
        Some(other) => Err(err("type", format!("unknown type {other:?}"))),
        None => Err(err(
            "type",
            "missing; expected \"notification\" or \"initial\"",
        )),
    }
}

fn int(obj: &Map<String, Value>, field: &str) -> Result<Option<i64>, JsonError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| err(field, format!("expected a 64-bit integer, got {v}"))),
    }
}

fn required(obj: &Map<String, Value>, field: &str) -> Result<i64, JsonError> {
    int(obj, field)?.ok_or_else(|| err(field, "missing"))
}

fn i32_field(obj: &Map<String, Value>, field: &str) -> Result<Option<i32>, JsonError> {
    int(obj, field)?
        .map(|v| i32::try_from(v).map_err(|_| err(field, format!("{v} does not fit in 32 bits"))))
        .transpose()
}

fn hex_field(obj: &Map<String, Value>, field: &str) -> Result<Option<Vec<u8>>, JsonError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => hex::decode(s)
            .map(Some)
            .map_err(|e| err(field, format!("bad hex: {e}"))),
        Some(v) => Err(err(field, format!("expected a hex string, got {v}"))),
    }
}

/// A notification from its JSON object. `size` picks the historical form (28, 36, 40, or
/// larger); without it, the current form when `config` is given, else the 40-byte form.
pub fn notification_from_json(obj: &Map<String, Value>) -> Result<Notification, JsonError> {
    let state = match (i32_field(obj, "state_code")?, obj.get("state")) {
        (Some(code), _) => ServerState::from_code(code),
        (None, Some(Value::String(name))) => ServerState::from_name(name).ok_or_else(|| {
            err(
                "state",
                format!("unknown state {name:?}; give state_code for unknown codes"),
            )
        })?,
        (None, _) => return Err(err("state", "missing")),
    };
    let config = match (hex_field(obj, "config_hex")?, obj.get("config")) {
        (Some(raw), _) => Some(raw),
        (None, None | Some(Value::Null)) => None,
        (None, Some(Value::String(s))) => Some(s.clone().into_bytes()),
        (None, Some(v)) => {
            return Err(err("config", format!("expected a string or null, got {v}")));
        }
    };
    let trailing = hex_field(obj, "trailing")?.unwrap_or_default();
    let version = i32_field(obj, "version")?;
    let size = int(obj, "size")?;
    let mut n = Notification {
        state,
        leader: required(obj, "leader")?,
        zxid: required(obj, "zxid")?,
        election_epoch: required(obj, "election_epoch")?,
        peer_epoch: int(obj, "peer_epoch")?,
        version,
        config,
        trailing,
    };
    match size {
        Some(28) => {
            n.peer_epoch = None;
            n.version = None;
        }
        Some(36) => n.version = None,
        Some(40) => {
            n.version =
                Some(version.ok_or_else(|| err("version", "missing (needed for 40 bytes)"))?);
        }
        Some(_) | None => {
            if n.version.is_none() {
                n.version = Some(if n.config.is_some() { 2 } else { 1 });
            }
        }
    }
    if matches!(size, Some(36) | Some(40) | None) || size.is_some_and(|s| s > 40) {
        n.peer_epoch = Some(n.peer_epoch.ok_or_else(|| err("peer_epoch", "missing"))?);
    }
    if matches!(size, Some(28) | Some(36) | Some(40)) && n.config.is_some() {
        return Err(err(
            "config",
            "a 28-, 36- or 40-byte notification carries no config",
        ));
    }
    if let Some(size) = size
        && size != n.size() as i64
    {
        return Err(err(
            "size",
            format!(
                "{size} does not match the fields given ({} bytes)",
                n.size()
            ),
        ));
    }
    Ok(n)
}

/// An initial message from its JSON object.
pub fn initial_from_json(obj: &Map<String, Value>) -> Result<InitialMessage, JsonError> {
    let protocol = ProtocolVersion::from_code(int(obj, "protocol_version")?).ok_or_else(|| {
        err(
            "protocol_version",
            "expected -65536, -65535 or null (legacy)",
        )
    })?;
    let sid = required(obj, "sid")?;
    if protocol == ProtocolVersion::Legacy {
        return Ok(InitialMessage::legacy(sid));
    }
    let text = match (obj.get("address_text"), obj.get("addresses")) {
        (Some(Value::String(t)), _) => t.clone(),
        (_, Some(Value::Array(list))) => list
            .iter()
            .map(|a| {
                a.as_str()
                    .ok_or_else(|| err("addresses", "expected strings"))
            })
            .collect::<Result<Vec<_>, _>>()?
            .join("|"),
        _ => {
            return Err(err(
                "addresses",
                "missing; expected a list of \"host:port\"",
            ));
        }
    };
    // Validates the addresses exactly as a receiver would.
    InitialMessage::parse_versioned(protocol, sid, &text)
        .map_err(|e| err("addresses", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message's JSON object as a value.
    fn message_value(m: &Message) -> Value {
        let mut out = Vec::new();
        JsonWriter::new().message(&mut out, m);
        serde_json::from_slice(&out).unwrap()
    }

    fn back(n: &Notification) -> Notification {
        let v = message_value(&Message::Notification(n.clone()));
        match message_from_json(&v).unwrap() {
            Message::Notification(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_form_survives_json() {
        let cur = Notification::current(
            ServerState::Leading,
            3,
            0x1_0000_0002,
            4,
            1,
            b"version=0".to_vec(),
        );
        let forms = [
            Notification {
                peer_epoch: None,
                version: None,
                config: None,
                ..cur.clone()
            },
            Notification {
                version: None,
                config: None,
                ..cur.clone()
            },
            Notification {
                version: Some(7),
                config: None,
                ..cur.clone()
            },
            Notification {
                version: Some(1),
                config: None,
                trailing: vec![1, 2],
                ..cur.clone()
            },
            Notification {
                config: Some(vec![0xff, 0xfe]),
                trailing: vec![9],
                ..cur.clone()
            },
            Notification {
                state: ServerState::Unknown(42),
                ..cur.clone()
            },
            cur,
        ];
        for n in forms {
            assert_eq!(back(&n), n);
            assert_eq!(back(&n).encode().unwrap(), n.encode().unwrap());
        }
    }

    /// Each state's literal says what `ServerState::name` and `code` say.
    #[test]
    fn states_are_written_by_name_and_code() {
        for state in [
            ServerState::Looking,
            ServerState::Following,
            ServerState::Leading,
            ServerState::Observing,
            ServerState::Unknown(7),
        ] {
            let n = Notification::current(state, 3, 1, 4, 1, "version=0");
            let v = message_value(&Message::Notification(n));
            assert_eq!(v["state"], state.name(), "{state:?}");
            assert_eq!(v["state_code"], state.code(), "{state:?}");
        }
    }

    #[test]
    fn initial_messages_survive_json() {
        let b = InitialMessage::decode(&{
            let mut b = (-65535i64).to_be_bytes().to_vec();
            b.extend_from_slice(&7i64.to_be_bytes());
            b.extend_from_slice(&(13i32).to_be_bytes());
            b.extend_from_slice(b"h:1|[::1]:2|");
            b.push(b'|');
            b
        })
        .unwrap();
        for m in [b, InitialMessage::legacy(3)] {
            let v = message_value(&Message::Initial(m.clone()));
            assert_eq!(message_from_json(&v).unwrap(), Message::Initial(m));
        }
    }

    /// A record's line, checked to be one JSON object whose keys begin with the envelope's.
    fn line(w: &mut JsonWriter, r: &Record) -> Value {
        let mut out = Vec::new();
        w.record(&mut out, r);
        let v: Value = serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys[..8],
            [
                "type",
                "time",
                "src",
                "dst",
                "from_sid",
                "to_sid",
                "connection",
                "offset"
            ],
            "{v}"
        );
        if let Body::Initial(_) | Body::Notification(_) = r.body {
            // Everything needed to re-encode the message is in its line.
            let back = message_from_json(&v).unwrap_or_else(|e| panic!("{e}: {v}"));
            let raw = match &r.body {
                Body::Initial(m) => m.encode(),
                Body::Notification(n) => n.encode(),
                _ => unreachable!(),
            };
            assert_eq!(back.encode().ok(), raw.ok(), "{v}");
        }
        v
    }

    fn record(body: Body) -> Record {
        Record {
            time: crate::capture::Timestamp {
                secs: 1_795_973_517,
                nanos: 526_146_000,
            },
            conn: Some(crate::capture::ConnId(21)),
            src: Some("127.0.0.1:57136".parse().unwrap()),
            dst: Some("[::1]:3888".parse().unwrap()),
            from_sid: Some(2),
            to_sid: None,
            from_sid_source: None,
            to_sid_source: None,
            offset: Some(34),
            raw: Vec::new(),
            body,
        }
    }

    #[test]
    fn addresses_are_written_as_display_does() {
        for a in [
            "0.0.0.0:0",
            "1.22.203.9:65535",
            "255.255.255.255:3888",
            "10.100.99.100:10",
            "[::1]:3888",
            "[fe80::1%7]:2888",
        ] {
            let addr: std::net::SocketAddr = a.parse().unwrap();
            let mut out = Vec::new();
            json_addr(&mut out, Some(addr));
            assert_eq!(out, serde_json::to_vec(&addr.to_string()).unwrap(), "{a}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_ipv4_address_is_written_as_display_does(ip in proptest::prelude::any::<u32>(), port in proptest::prelude::any::<u16>()) {
            let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::from_bits(ip), port));
            let mut out = Vec::new();
            json_addr(&mut out, Some(addr));
            proptest::prop_assert_eq!(out, serde_json::to_vec(&addr.to_string()).unwrap());
        }

        #[test]
        fn every_integer_is_written_as_display_does(
            wide in proptest::prelude::any::<i64>(),
            digits in 0u32..20,
            unsigned in proptest::prelude::any::<u64>(),
            narrow in proptest::prelude::any::<i32>(),
        ) {
            // Every length of text, both signs, and the extremes.
            let short = wide.signum() * (wide.unsigned_abs() % 10u64.pow(digits)) as i64;
            for v in [wide, short, i64::MIN, i64::MAX, 0, -1, 9, 10, -10, 99, 100] {
                let mut out = b"x".to_vec();
                json_int(&mut out, v);
                proptest::prop_assert_eq!(out, format!("x{v}").into_bytes());
            }
            for v in [unsigned, unsigned >> (3 * digits), u64::MAX] {
                let mut out = Vec::new();
                json_int(&mut out, v);
                proptest::prop_assert_eq!(out, v.to_string().into_bytes());
            }
            let mut out = Vec::new();
            json_int(&mut out, narrow);
            json_int(&mut out, i32::MIN);
            proptest::prop_assert_eq!(out, format!("{narrow}{}", i32::MIN).into_bytes());
        }

        #[test]
        fn every_time_is_written_as_serde_json_writes_its_float(
            secs in proptest::prop_oneof![0i64..1 << 33, (1i64 << 30) - 2..(1 << 30) + 2, (1i64 << 31) - 2..(1 << 31) + 2, (1i64 << 32) - 2..(1 << 32) + 2, proptest::prelude::any::<i64>()],
            micros in proptest::prop_oneof![0u32..1_000_000, 0u32..10, 999_990u32..1_000_000, proptest::strategy::Strategy::prop_map(0u32..10_000, |m| m * 100)],
            nanos in 0u32..1_000,
            whole_micros in proptest::prelude::any::<bool>(),
        ) {
            let time = Timestamp { secs, nanos: micros * 1000 + if whole_micros { 0 } else { nanos } };
            let mut out = Vec::new();
            json_time(&mut out, time, &mut SecondsText::default());
            proptest::prop_assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&time.as_secs_f64()).unwrap()
            );
        }
    }

    proptest::proptest! {
        /// Times in a row, as a decode writes them, share the kept seconds' text.
        #[test]
        fn times_in_a_row_are_written_as_serde_json_writes_their_floats(
            times in proptest::collection::vec(
                (proptest::prop_oneof![1_795_973_510i64..1_795_973_520, 0i64..1 << 33], 0u32..1_000_000),
                1..50,
            ),
        ) {
            let mut seconds = SecondsText::default();
            for (secs, micros) in times {
                let time = Timestamp { secs, nanos: micros * 1000 };
                let mut out = Vec::new();
                json_time(&mut out, time, &mut seconds);
                proptest::prop_assert_eq!(
                    String::from_utf8(out).unwrap(),
                    serde_json::to_string(&time.as_secs_f64()).unwrap()
                );
            }
        }
    }

    /// Every whole microsecond of a few seconds at each end of the fast path's range, and of
    /// one second in the middle, as serde_json writes it.
    #[test]
    fn whole_microseconds_are_written_as_serde_json_writes_their_float() {
        for secs in [
            1i64 << 30,
            (1 << 31) - 1,
            1 << 31,
            1_795_973_517,
            (1 << 32) - 1,
        ] {
            let mut out = Vec::new();
            let mut seconds = SecondsText::default();
            for micros in 0..1_000_000u32 {
                let time = Timestamp {
                    secs,
                    nanos: micros * 1000,
                };
                out.clear();
                json_time(&mut out, time, &mut seconds);
                assert_eq!(
                    std::str::from_utf8(&out).unwrap(),
                    serde_json::to_string(&time.as_secs_f64()).unwrap(),
                    "{secs} s {micros} us"
                );
            }
        }
    }

    #[test]
    fn every_form_writes_one_object_that_reads_back() {
        let cur = Notification::current(
            ServerState::Leading,
            3,
            -0x1_0000_0002,
            4,
            1,
            b"server.1=a:1:2\nversion=1f".to_vec(),
        );
        let mut bodies = vec![
            Body::Notification(Notification {
                peer_epoch: None,
                version: None,
                config: None,
                ..cur.clone()
            }),
            Body::Notification(Notification {
                version: None,
                config: None,
                ..cur.clone()
            }),
            Body::Notification(Notification {
                version: Some(7),
                config: None,
                ..cur.clone()
            }),
            Body::Notification(Notification {
                version: Some(1),
                config: None,
                trailing: vec![1, 2],
                ..cur.clone()
            }),
            Body::Notification(Notification {
                config: Some(vec![0xff, 0xfe, b'"', b'\n']),
                trailing: vec![9],
                ..cur.clone()
            }),
            Body::Notification(Notification {
                config: Some(b"\"quoted\"\t\\\x01\x7f\xc3\xa9 version=2".to_vec()),
                ..cur.clone()
            }),
            Body::Notification(Notification {
                state: ServerState::Unknown(-42),
                ..cur.clone()
            }),
            Body::Notification(cur.clone()),
            Body::Notification(cur),
            Body::Initial(InitialMessage::legacy(3).into()),
            Body::Initial(InitialMessage::legacy(-3).into()),
            Body::Problem(crate::decode::Problem::new(ProblemKind::Resynced {
                skipped: 3,
                to: crate::decode::Boundary::Frame,
            })),
            // A capture reader's words, escaped.
            Body::Problem(crate::decode::Problem::new(ProblemKind::Capture {
                detail: "skipped \"3\" bytes\t\u{1}".into(),
            })),
        ];
        for (ptype, data_len, learner, snapshot_bytes, designated_leader) in [
            (11, Some(20), Some((3, 0x10000, 0x1_0000_0002)), None, None),
            (11, Some(4), Some((-1, -7, -1)), Some(0), None),
            (15, None, None, Some(123_456), None),
            (2, Some(0), None, None, None),
            (9, Some(8), None, None, Some(-9)),
            (99, None, None, None, None),
            (-5, Some(2_000_000), None, None, None),
        ] {
            bodies.push(Body::Quorum(QuorumMessage {
                ptype,
                zxid: -0x1_0000_0002,
                data_len,
                learner: learner.map(|(sid, protocol_version, config_version)| {
                    crate::wire::quorum::LearnerInfo {
                        sid,
                        protocol_version,
                        config_version,
                    }
                }),
                designated_leader,
                config: None,
                snapshot_bytes,
            }));
        }
        bodies.push(Body::Closed {
            reset: true,
            quorum: false,
        });
        bodies.push(Body::Closed {
            reset: false,
            quorum: true,
        });
        for text in ["h:1|[::1]:2||", "a\"b:1|c\\d:2", "x:1", "0.0.0.0:3888|h:2"] {
            let mut b = (-65535i64).to_be_bytes().to_vec();
            b.extend_from_slice(&7i64.to_be_bytes());
            b.extend_from_slice(&(text.len() as i32).to_be_bytes());
            b.extend_from_slice(text.as_bytes());
            if let Ok(m) = InitialMessage::decode(&b) {
                bodies.push(Body::Initial(m.into()));
            }
        }
        let mut w = JsonWriter::new();
        for body in bodies {
            for r in [
                record(body.clone()),
                Record {
                    time: crate::capture::Timestamp { secs: 0, nanos: 1 },
                    conn: None,
                    src: None,
                    dst: None,
                    from_sid: None,
                    to_sid: Some(-1),
                    from_sid_source: None,
                    to_sid_source: None,
                    offset: None,
                    ..record(body)
                },
            ] {
                let v = line(&mut w, &r);
                assert_eq!(v["time"].as_f64(), Some(r.time.as_secs_f64()), "{v}");
                assert_eq!(
                    v["src"],
                    serde_json::json!(r.src.map(|a| a.to_string())),
                    "{v}"
                );
                assert_eq!(v["to_sid"], serde_json::json!(r.to_sid), "{v}");
            }
        }
    }

    /// Every record of every fixture capture, as `zkfle decode --format jsonl` decodes it.
    #[test]
    fn every_fixture_record_writes_one_object_that_reads_back() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
        let mut lines = 0;
        let mut quorum = 0;
        // Every capture of every fixture: the election-port ones and the per-host ones of
        // the quorum port (with closes, so that those lines are compared too).
        for d in std::fs::read_dir(dir).unwrap().flatten() {
            for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                let path = f.path();
                if path.extension().is_none_or(|e| e != "pcap") {
                    continue;
                }
                let segments = crate::capture::open(path.to_str().unwrap()).unwrap();
                let decoder = crate::decode::Decoder::from_capture(
                    segments,
                    crate::decode::DecodeOptions {
                        closes: true,
                        ..crate::decode::DecodeOptions::default()
                    },
                );
                let mut w = JsonWriter::new();
                for r in decoder {
                    line(&mut w, &r);
                    lines += 1;
                    quorum += usize::from(matches!(r.body, Body::Quorum(_)));
                }
            }
        }
        assert!(lines > 500, "{lines} lines");
        assert!(quorum > 100, "{quorum} quorum lines");
    }

    #[test]
    fn errors_name_the_field() {
        let v: Value =
            serde_json::from_str(r#"{"type":"notification","state":"LOOKING","leader":"x"}"#)
                .unwrap();
        assert_eq!(message_from_json(&v).unwrap_err().field, "leader");
        let v: Value = serde_json::from_str(r#"{"type":"notification","state":"LOOKING","leader":1,"zxid":0,"election_epoch":1,"peer_epoch":0,"size":99}"#).unwrap();
        assert_eq!(message_from_json(&v).unwrap_err().field, "size");
    }
}
