//! The JSON forms of election messages: a contract that scripts rely on (the README documents
//! every field). `zkfle wire decode` prints them, `zkfle wire encode` reads them back, and
//! `zkfle decode --format jsonl` adds its envelope (time, addresses, sids) around them
//! ([`record_to_json`]).
//!
//! Conversions from JSON are written by hand rather than derived so that an error names the
//! field that was wrong.

use serde_json::{Map, Value, json};

use crate::decode::{Body, ProblemKind, Record, Severity};

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

/// The JSON object of a notification.
///
/// `peer_epoch` is what a current receiver uses (`zxid >> 32` for the 28-byte form, which has
/// none); `version` is the field on the wire, null when the form has none; `size` is the
/// payload size, which tells which historical form was sent.
pub fn notification_to_json(n: &Notification) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("notification"));
    m.insert("state".into(), json!(n.state.name()));
    m.insert("state_code".into(), json!(n.state.code()));
    m.insert("leader".into(), json!(n.leader));
    m.insert("zxid".into(), json!(n.zxid));
    m.insert("election_epoch".into(), json!(n.election_epoch));
    m.insert("peer_epoch".into(), json!(n.effective_peer_epoch()));
    m.insert("version".into(), json!(n.version));
    let text = n
        .config
        .as_deref()
        .and_then(|c| std::str::from_utf8(c).ok());
    m.insert("config".into(), json!(n.config_text()));
    m.insert("config_version".into(), json!(n.config_version()));
    m.insert("size".into(), json!(n.size()));
    if let (Some(raw), None) = (&n.config, text) {
        m.insert("config_hex".into(), json!(hex::encode(raw)));
    }
    if !n.trailing.is_empty() {
        m.insert("trailing".into(), json!(hex::encode(&n.trailing)));
    }
    let (accepts, note) = match (n.java_view(), n.state) {
        (JavaView::Dropped(why), _) => (false, Some(why.to_string())),
        (JavaView::Accepted { .. }, ServerState::Unknown(code)) => (
            true,
            Some(format!(
                "unknown state code {code}: Java drops it from voters, answers it from non-voters"
            )),
        ),
        (JavaView::Accepted { .. }, _) if n.size() == 40 => (
            true,
            Some("40-byte form: current servers ignore its version field".into()),
        ),
        (JavaView::Accepted { .. }, _) if n.size() == 28 => (
            true,
            Some("28-byte form: current servers take the peer epoch from the zxid".into()),
        ),
        _ => (true, None),
    };
    m.insert("java_accepts".into(), json!(accepts));
    if let Some(note) = note {
        m.insert("note".into(), json!(note));
    }
    m
}

/// The JSON object of an initial message. `addresses` are the elements as sent;
/// `address_text` is the whole text (it can differ from joining them: Java drops trailing
/// empty elements).
pub fn initial_to_json(msg: &InitialMessage) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("initial"));
    m.insert("protocol_version".into(), json!(msg.protocol.code()));
    m.insert("sid".into(), json!(msg.sid));
    let addrs: Vec<&str> = msg.addresses.iter().map(|a| a.text.as_str()).collect();
    m.insert("addresses".into(), json!(addrs));
    if msg.protocol != ProtocolVersion::Legacy && msg.address_text != addrs.join("|") {
        m.insert("address_text".into(), json!(msg.address_text));
    }
    m.insert("size".into(), json!(msg.encode().map(|b| b.len()).ok()));
    m
}

/// The JSON object of either kind.
pub fn message_to_json(msg: &Message) -> Map<String, Value> {
    match msg {
        Message::Initial(m) => initial_to_json(m),
        Message::Notification(n) => notification_to_json(n),
    }
}

/// Reads a message back from its JSON object (as printed by [`message_to_json`]; fields that
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
    // Decoding our own bytes validates the addresses exactly as a receiver would.
    let mut bytes = protocol.code().unwrap_or(0).to_be_bytes().to_vec();
    bytes.extend_from_slice(&sid.to_be_bytes());
    bytes.extend_from_slice(&(text.len().min(i32::MAX as usize) as i32).to_be_bytes());
    bytes.extend_from_slice(text.as_bytes());
    InitialMessage::decode(&bytes).map_err(|e| err("addresses", e.to_string()))
}

/// One JSON line: the envelope (`type`, `time`, `src`, `dst`, `from_sid`, `to_sid`, `connection`,
/// `offset`), then the message's own fields.
pub fn record_to_json(r: &Record) -> Map<String, Value> {
    let mut m = Map::new();
    let body = match &r.body {
        Body::Initial(msg) => initial_to_json(msg),
        Body::Notification(n) => notification_to_json(n),
        Body::Problem(p) => {
            let mut e = Map::new();
            e.insert("type".into(), json!("error"));
            e.insert(
                "severity".into(),
                json!(match p.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                }),
            );
            let (kind, extra) = match &p.kind {
                ProblemKind::Malformed(w) => (
                    "malformed",
                    json!({"field": w.field, "field_offset": w.offset}),
                ),
                ProblemKind::Gap { missing } => ("gap", json!({"missing": missing})),
                ProblemKind::Resynced { skipped } => ("resynced", json!({"skipped": skipped})),
                ProblemKind::MidStream => ("mid_stream", json!({})),
                ProblemKind::Capture => ("capture", json!({})),
            };
            e.insert("kind".into(), json!(kind));
            if let Value::Object(extra) = extra {
                e.extend(extra);
            }
            e.insert("what".into(), json!(p.message));
            e
        }
    };
    m.insert("type".into(), body["type"].clone());
    m.insert("time".into(), json!(r.time.as_secs_f64()));
    m.insert("src".into(), json!(r.src.map(|a| a.to_string())));
    m.insert("dst".into(), json!(r.dst.map(|a| a.to_string())));
    m.insert("from_sid".into(), json!(r.from_sid));
    m.insert("to_sid".into(), json!(r.to_sid));
    m.insert("connection".into(), json!(r.conn.map(|c| c.0)));
    m.insert("offset".into(), json!(r.offset));
    for (k, v) in body {
        if k != "type" {
            m.insert(k, v);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(n: &Notification) -> Notification {
        let v = Value::Object(notification_to_json(n));
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
            let v = Value::Object(initial_to_json(&m));
            assert_eq!(message_from_json(&v).unwrap(), Message::Initial(m));
        }
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
