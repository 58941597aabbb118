//! The text timeline of `zkfle decode`: one line per record, in the words ZooKeeper's own
//! logs use.

use std::io::Write;
use std::net::SocketAddr;

use super::{AddrPairs, write_addr, write_hex, write_printable};
use crate::capture::ConnId;
use crate::decode::{Body, QuorumMessage, Record, Severity};
use crate::wire::{JavaView, Notification};

/// Writes timeline lines, one a record, in the words ZooKeeper's own logs use. A decode prints
/// millions, so the writer keeps what repeats: the padded address pairs of the last few
/// connections.
#[derive(Debug, Default)]
pub struct TextWriter {
    /// The padded `src -> dst` of the last few address pairs.
    addrs: AddrPairs,
}

/// The column of `src -> dst`, in characters.
const ADDRS_WIDTH: usize = 44;

impl TextWriter {
    /// Appends `r`'s line (without a newline) after the time `stamp` to `out`.
    pub fn record(&mut self, out: &mut Vec<u8>, r: &Record, stamp: &str) {
        out.extend_from_slice(stamp.as_bytes());
        out.extend_from_slice(b"  ");
        self.write_addrs(out, r.conn, r.src, r.dst);
        out.push(b' ');
        write_sid(out, r.from_sid, true);
        out.extend_from_slice(b" -> ");
        write_sid(out, r.to_sid, false);
        out.push(b' ');
        // Writing to a Vec cannot fail.
        let _ = match &r.body {
            Body::Initial(m) => {
                let _ = match m.protocol.code() {
                    Some(c) => write!(out, "initial message: protocol {c}, sid {}", m.sid),
                    None => write!(out, "initial message: protocol legacy, sid {}", m.sid),
                };
                if !m.address_text.is_empty() {
                    out.extend_from_slice(b", address ");
                    write_printable(out, &m.address_text);
                }
                Ok(())
            }
            Body::Notification(n) => {
                write_notification_words(out, n);
                Ok(())
            }
            Body::Quorum(q) => {
                write_quorum_words(out, q);
                Ok(())
            }
            Body::Closed { reset: true, .. } => write!(out, "connection reset (RST)"),
            Body::Closed { reset: false, .. } => write!(out, "connection closed (FIN)"),
            Body::Problem(p) => {
                out.extend_from_slice(match p.severity() {
                    Severity::Error => b"error: ",
                    Severity::Warning => b"warning: ",
                });
                write_printable(out, &super::problem_words(p, r.time));
                Ok(())
            }
        };
    }

    /// `src -> dst` padded to [`ADDRS_WIDTH`] characters (`-` when unknown).
    fn write_addrs(
        &mut self,
        out: &mut Vec<u8>,
        conn: Option<ConnId>,
        src: Option<SocketAddr>,
        dst: Option<SocketAddr>,
    ) {
        out.extend_from_slice(self.addrs.text(conn, src, dst, (None, None), |text| {
            match (src, dst) {
                (Some(s), Some(d)) => {
                    write_addr(text, s, false);
                    text.extend_from_slice(b" -> ");
                    write_addr(text, d, false);
                }
                _ => text.push(b'-'),
            }
            // Addresses are ASCII: bytes are characters.
            text.resize(text.len().max(ADDRS_WIDTH), b' ');
        }));
    }
}

/// A sid (`?` when unknown) in three columns, right- or left-aligned.
fn write_sid(out: &mut Vec<u8>, sid: Option<i64>, right: bool) {
    let mut digits = itoa::Buffer::new();
    let text = match sid {
        Some(s) => digits.format(s),
        None => "?",
    };
    let pad = 3usize.saturating_sub(text.len());
    if right {
        out.extend(std::iter::repeat_n(b' ', pad));
    }
    out.extend_from_slice(text.as_bytes());
    if !right {
        out.extend(std::iter::repeat_n(b' ', pad));
    }
}

/// A notification as ZooKeeper 3.5+ logs it on receipt (`Notification: ...`).
fn write_notification_words(out: &mut Vec<u8>, n: &Notification) {
    // Written piece by piece rather than through `write!`: a decode prints millions.
    let mut leader = itoa::Buffer::new();
    out.extend_from_slice(b"Notification: n.state:");
    out.extend_from_slice(n.state.name().as_bytes());
    out.extend_from_slice(b", n.leader:");
    out.extend_from_slice(leader.format(n.leader).as_bytes());
    out.extend_from_slice(b", n.round:");
    write_hex(out, n.election_epoch as u64);
    out.extend_from_slice(b", n.peerEpoch:");
    write_hex(out, n.effective_peer_epoch() as u64);
    out.extend_from_slice(b", n.zxid:");
    write_hex(out, n.zxid as u64);
    let view = n.java_view();
    if let JavaView::Accepted { version, .. } = view {
        out.extend_from_slice(b", message format version:");
        write_hex(out, u64::from(version as u32));
    }
    match n.config_version() {
        Some(v) => {
            out.extend_from_slice(b", n.config version:");
            write_hex(out, v);
        }
        None => {
            // Writing to a Vec cannot fail.
            let _ = write!(out, " ({} bytes, no config)", n.size());
        }
    }
    if let JavaView::Dropped(why) = view {
        let _ = write!(out, "  [{why}]");
    } else if let Some(why) = n
        .config
        .as_deref()
        .and_then(crate::wire::config::java_parse_dies)
    {
        let _ = write!(out, "  [{why}]");
    }
}

/// A quorum packet: its type as Java names it, its zxid, and what else identifies it.
fn write_quorum_words(out: &mut Vec<u8>, q: &QuorumMessage) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{} zxid:{:#x}", q.type_name(), q.zxid);
    if q.type_name() == "UNKNOWN" {
        let _ = write!(out, " (type {})", q.ptype);
    }
    if let Some(l) = &q.learner {
        let _ = write!(
            out,
            ", sid {}, protocol {:#x}, config version {:#x}",
            l.sid, l.protocol_version, l.config_version
        );
    }
    if let Some(sid) = q.designated_leader {
        let _ = write!(out, ", designated leader {sid}");
    }
    if let Some(n) = q.snapshot_bytes {
        let _ = write!(out, ", snapshot of {n} bytes followed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Body;

    fn closed(src: Option<&str>, dst: Option<&str>, from_sid: Option<i64>) -> Record {
        Record {
            time: Default::default(),
            conn: None,
            src: src.map(|a| a.parse().unwrap()),
            dst: dst.map(|a| a.parse().unwrap()),
            from_sid,
            to_sid: None,
            from_sid_source: None,
            to_sid_source: None,
            offset: None,
            raw: Vec::new(),
            body: Body::Closed {
                reset: false,
                quorum: false,
            },
        }
    }

    /// The columns are those of `format!("{stamp}  {addrs:<44} {from:>3} -> {to:<3} {what}")`,
    /// whatever the addresses' form and length, and whichever pairs the writer has kept.
    #[test]
    fn columns_are_as_format_pads_them() {
        let pairs = [
            (Some("10.0.0.1:3888"), Some("10.0.0.2:40000")),
            (Some("[::1]:3888"), Some("[fe80::1%7]:51234")),
            (
                Some("[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
                Some("255.255.255.255:65535"),
            ),
            (None, Some("10.0.0.2:3888")),
            (None, None),
        ];
        let mut writer = TextWriter::default();
        for round in 0..3 {
            for (k, (src, dst)) in pairs.iter().enumerate() {
                let sid = [None, Some(1), Some(1234)][(k + round) % 3];
                let r = closed(*src, *dst, sid);
                let addrs = match (r.src, r.dst) {
                    (Some(s), Some(d)) => format!("{s} -> {d}"),
                    _ => "-".to_string(),
                };
                let from = sid.map_or("?".to_string(), |s| s.to_string());
                let expected = format!(
                    "T  {addrs:<44} {from:>3} -> {:<3} connection closed (FIN)",
                    "?"
                );
                let mut line = Vec::new();
                writer.record(&mut line, &r, "T");
                assert_eq!(String::from_utf8(line).unwrap(), expected);
            }
        }
    }

    /// A peer advertises any bytes as its address: the line stays one line, and no escape
    /// sequence reaches the reader's terminal.
    #[test]
    fn a_peers_address_cannot_break_the_line_or_drive_the_terminal() {
        let mut r = closed(Some("10.0.0.1:40000"), Some("10.0.0.2:3888"), Some(2));
        r.body = Body::Initial(
            crate::wire::InitialMessage::with_address_text(
                crate::wire::ProtocolVersion::V2,
                2,
                "evil\n2026-12-01 fake line\u{1b}[2J:3888",
            )
            .into(),
        );
        let mut line = Vec::new();
        TextWriter::default().record(&mut line, &r, "T");
        let line = String::from_utf8(line).unwrap();
        assert!(
            line.ends_with("address evil\\n2026-12-01 fake line\\u{1b}[2J:3888"),
            "{line}"
        );
        assert!(!line.chars().any(char::is_control), "{line}");
    }
}
