//! The config text notifications carry: `QuorumVerifier.toString()` (reference A.2).
//!
//! ```text
//! server.1=127.0.0.1:2888:3888:participant
//! server.4=127.0.0.4:2888:3888|127.0.1.4:2889:3889:observer;127.0.0.4:2181
//! group.1=1:2:3
//! weight.1=1
//! version=100000000
//! ```
//!
//! One line a member (several `host:quorumPort:electionPort` joined by `|`, the role once at the
//! end, the client address after `;` only when it came from a dynamic config), then `group.`
//! and `weight.` lines for hierarchical quorums, then `version=<hex>` with no newline.
//! [`QuorumConfig`] keeps the lines in order, so printing it gives back Java's bytes.

use std::fmt;
use std::net::SocketAddr;

use super::addr::{
    ElectionAddress, format_host_port, host_and_port, java_parse_int, java_parse_long, java_split,
    java_trim,
};
use super::error::{ErrorKind, WireError};

/// A member's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Participant,
    Observer,
}

impl Role {
    /// The word used in config lines.
    pub fn name(self) -> &'static str {
        match self {
            Role::Participant => "participant",
            Role::Observer => "observer",
        }
    }
}

/// One `host:quorumPort:electionPort` of a member (the election address shares the host).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerAddress {
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
}

impl ServerAddress {
    /// The election address (`host:electionPort`).
    pub fn election(&self) -> ElectionAddress {
        let text = format_host_port(&self.host, self.election_port);
        ElectionAddress {
            text,
            host: self.host.clone(),
            port: self.election_port,
        }
    }

    /// The quorum (Zab) address, when the host is an IP literal.
    pub fn quorum_socket_addr(&self) -> Option<SocketAddr> {
        ElectionAddress {
            text: String::new(),
            host: self.host.clone(),
            port: self.quorum_port,
        }
        .socket_addr()
    }
}

/// A `server.N=...` line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerLine {
    pub id: i64,
    /// One or more addresses (several only with multi-address).
    pub addresses: Vec<ServerAddress>,
    /// The role, when written (Java always writes it).
    pub role: Option<Role>,
    /// The client address after `;`: host (absent when only a port was written) and port.
    pub client: Option<(Option<String>, u16)>,
}

impl ServerLine {
    /// The member's role, participant unless it says otherwise.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::Participant)
    }

    /// Parses the value of a `server.N` line the way `QuorumServer` does.
    pub fn parse_value(id: i64, value: &str) -> Result<Self, String> {
        let parts = java_split(value, ';');
        if parts.len() > 2 || parts.is_empty() {
            return Err("expected address[;client]".into());
        }
        let client = match parts.get(1) {
            None => None,
            Some(client) => {
                let cp = host_and_port(client).map_err(str::to_string)?;
                let (host, port) = match cp.as_slice() {
                    [port] => (None, port),
                    [host, port] => (Some(host.clone()), port),
                    _ => return Err(format!("bad client address {client:?}")),
                };
                Some((host, parse_port(port)?))
            }
        };
        let mut role = None;
        let mut addresses = Vec::new();
        for address in java_split(parts[0], '|') {
            let p = host_and_port(address).map_err(str::to_string)?;
            if !(3..=4).contains(&p.len()) {
                return Err(format!("{address:?} is not host:port:port[:type]"));
            }
            if let Some(t) = p.get(3) {
                let this = match t.to_ascii_lowercase().as_str() {
                    "participant" => Role::Participant,
                    "observer" => Role::Observer,
                    _ => return Err(format!("unrecognised peer type {t:?}")),
                };
                if role.is_some_and(|r| r != this) {
                    return Err("multiple addresses should have similar roles".into());
                }
                role = Some(this);
            }
            let quorum_port = parse_port(&p[1])?;
            let election_port = parse_port(&p[2])?;
            if quorum_port == election_port {
                return Err("quorum and election port must differ".into());
            }
            addresses.push(ServerAddress {
                host: p[0].clone(),
                quorum_port,
                election_port,
            });
        }
        if addresses.is_empty() {
            // `server.6=|`: Java's split leaves no address at all.
            return Err("no address".into());
        }
        Ok(ServerLine {
            id,
            addresses,
            role,
            client,
        })
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    let v = java_parse_int(text).ok_or_else(|| format!("bad port number {text:?}"))?;
    u16::try_from(v).map_err(|_| format!("port out of range: {v}"))
}

impl fmt::Display for ServerLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server.{}=", self.id)?;
        for (i, a) in self.addresses.iter().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            let host = if super::addr::needs_brackets(&a.host) {
                format!("[{}]", a.host)
            } else {
                a.host.clone()
            };
            write!(f, "{host}:{}:{}", a.quorum_port, a.election_port)?;
        }
        if let Some(role) = self.role {
            write!(f, ":{}", role.name())?;
        }
        match &self.client {
            Some((Some(host), port)) => write!(f, ";{}", format_host_port(host, *port)),
            Some((None, port)) => write!(f, ";{port}"),
            None => Ok(()),
        }
    }
}

/// One line of a config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConfigLine {
    Server(ServerLine),
    /// `group.N=a:b:c`.
    Group {
        id: i64,
        members: Vec<i64>,
    },
    /// `weight.N=w`.
    Weight {
        id: i64,
        weight: i64,
    },
    /// `version=<hex>`.
    Version(u64),
}

impl fmt::Display for ConfigLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigLine::Server(s) => s.fmt(f),
            ConfigLine::Group { id, members } => {
                let m: Vec<String> = members.iter().map(i64::to_string).collect();
                write!(f, "group.{id}={}", m.join(":"))
            }
            ConfigLine::Weight { id, weight } => write!(f, "weight.{id}={weight}"),
            ConfigLine::Version(v) => write!(f, "version={v:x}"),
        }
    }
}

/// A parsed config, lines in the order sent. `to_string()` is Java's text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct QuorumConfig {
    pub lines: Vec<ConfigLine>,
}

impl QuorumConfig {
    /// Parses config text as `QuorumPeerConfig.parseDynamicConfig` accepts it. Errors carry the
    /// byte offset of the offending line within `text`.
    pub fn parse(text: &str) -> Result<Self, WireError> {
        let mut lines = Vec::new();
        let mut offset = 0;
        for raw in text.split('\n') {
            let at = offset;
            offset += raw.len() + 1;
            let line = java_trim(raw);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| {
                WireError::new(
                    "config line",
                    at,
                    ErrorKind::BadConfigLine {
                        line: raw.to_string(),
                        reason,
                    },
                )
            };
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad("expected key=value".into()))?;
            let (key, value) = (java_trim(key), java_trim(value));
            let id = |prefix: &str| -> Result<i64, WireError> {
                key[prefix.len()..]
                    .parse::<i64>()
                    .map_err(|_| bad(format!("bad id in {key:?}")))
            };
            let parsed = if key.starts_with("server.") {
                ConfigLine::Server(ServerLine::parse_value(id("server.")?, value).map_err(bad)?)
            } else if key.starts_with("group.") {
                let members = value
                    .split(':')
                    .map(|m| java_trim(m).parse::<i64>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| bad("bad group member".into()))?;
                ConfigLine::Group {
                    id: id("group.")?,
                    members,
                }
            } else if key.starts_with("weight.") {
                ConfigLine::Weight {
                    id: id("weight.")?,
                    weight: value.parse().map_err(|_| bad("bad weight".into()))?,
                }
            } else if key == "version" {
                ConfigLine::Version(
                    u64::from_str_radix(value, 16).map_err(|_| bad("bad hex version".into()))?,
                )
            } else {
                return Err(bad(format!("unrecognised key {key:?}")));
            };
            lines.push(parsed);
        }
        Ok(QuorumConfig { lines })
    }

    /// The `server.N` lines.
    pub fn servers(&self) -> impl Iterator<Item = &ServerLine> {
        self.lines.iter().filter_map(|l| match l {
            ConfigLine::Server(s) => Some(s),
            _ => None,
        })
    }

    /// The member with this sid.
    pub fn server(&self, id: i64) -> Option<&ServerLine> {
        self.servers().find(|s| s.id == id)
    }

    /// The config version (`version=` line), 0 when absent.
    pub fn version(&self) -> u64 {
        self.lines
            .iter()
            .find_map(|l| match l {
                ConfigLine::Version(v) => Some(*v),
                _ => None,
            })
            .unwrap_or(0)
    }
}

impl fmt::Display for QuorumConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            line.fmt(f)?;
        }
        Ok(())
    }
}

/// The `version=<hex>` of config text, without parsing the rest.
pub fn version_of(text: &str) -> Option<u64> {
    version_of_bytes(text.as_bytes())
}

/// [`version_of`] on raw bytes. Java writes the version line last, so the search runs from the
/// end: this is on the path of every decoded notification.
pub fn version_of_bytes(text: &[u8]) -> Option<u64> {
    text.rsplit(|b| *b == b'\n')
        .filter_map(|l| java_trim(std::str::from_utf8(l).ok()?).strip_prefix("version="))
        .find_map(|v| u64::from_str_radix(java_trim(v), 16).ok())
}

/// Why Java's config parser (`QuorumPeerConfig.parseDynamicConfig`) throws a
/// `NumberFormatException` on this config text, if it does: a `server.` key whose id is not a
/// number, or a `version` that is not hexadecimal. Nothing catches it in a 3.5+ server's
/// election receiver (reference: "A RuntimeException from the parser is not caught"), whose
/// thread dies: the server then answers no notification until it restarts. Other parse errors
/// (`ConfigException`) are caught and the message is processed without its config. Cheap: on
/// the path of every notification printed as text.
pub fn java_parse_dies(text: &[u8]) -> Option<String> {
    for raw in text.split(|b| *b == b'\n') {
        let Ok(line) = std::str::from_utf8(raw) else {
            continue;
        };
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = java_trim(key);
        // Java's digits include other scripts' (`Character.digit`): only ASCII is judged.
        if !line.is_ascii() {
            continue;
        }
        if let Some(id) = key.strip_prefix("server.") {
            if java_parse_long(id, 10).is_none() {
                return Some(format!(
                    "its config's key {key:?} has no numeric id: Java's parser throws NumberFormatException, which kills a 3.5+ server's election receiver thread (it then answers no notification until restarted)"
                ));
            }
        } else if key == "version" && java_parse_long(java_trim(value), 16).is_none() {
            return Some(format!(
                "its config's version {:?} is not hexadecimal: Java's parser throws NumberFormatException, which kills a 3.5+ server's election receiver thread (it then answers no notification until restarted)",
                java_trim(value)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_that_kill_javas_receiver_are_named() {
        let ok = b"server.1=127.0.0.1:2888:3888:participant\nversion=100000000";
        assert_eq!(java_parse_dies(ok), None);
        // A ConfigException (caught by Java), not a NumberFormatException.
        assert_eq!(java_parse_dies(b"my very invalid config string"), None);
        assert_eq!(java_parse_dies(b"server.1=nonsense\nversion=-1a"), None);
        for bad in [
            &b"server.x=a:1:2:participant\nversion=0"[..],
            b"server.=a:1:2",
            b"server.1=a:1:2\nversion=zz",
            b"server.99999999999999999999=a:1:2",
            b" server.+ =a:1:2",
        ] {
            let why = java_parse_dies(bad).unwrap_or_else(|| panic!("{bad:?}"));
            assert!(why.contains("NumberFormatException"), "{why}");
        }
    }

    /// A bracketed host that itself starts with `[` (found by the `config` fuzz target) prints
    /// bracketed, so it parses back to the same config.
    #[test]
    fn a_host_starting_with_a_bracket_prints_bracketed() {
        let c = QuorumConfig::parse("\nserver.9=[[roup\u{5}\0\0\u{5}]00:4").unwrap();
        let printed = c.to_string();
        assert!(printed.starts_with("server.9=[[roup"), "{printed:?}");
        assert_eq!(QuorumConfig::parse(&printed).unwrap(), c);
        // A bracketed host that starts with a char Java's trim removes (fuzz target, too).
        let c = QuorumConfig::parse("server.8=[\u{c}\0\u{1}]08:4").unwrap();
        assert_eq!(QuorumConfig::parse(&c.to_string()).unwrap(), c);
        // Java's trim keeps Unicode spaces (Rust's removes them): a host starting with one
        // prints bare and parses back whole.
        let c = QuorumConfig::parse("server.7=[\u{3000}h]:1:2\nversion=\u{a0}1").unwrap_err();
        assert!(matches!(c.kind, ErrorKind::BadConfigLine { .. }), "{c:?}");
        let c = QuorumConfig::parse("server.7=[\u{3000}h]:1:2").unwrap();
        assert_eq!(c.server(7).unwrap().addresses[0].host, "\u{3000}h");
        assert_eq!(QuorumConfig::parse(&c.to_string()).unwrap(), c);
        assert_eq!(version_of("server.1=h:1:2\n\0version=a\0"), Some(10));
        // A host is never at the end of a line (ports follow), so a trailing char trim would
        // remove stays bare; a bare host with `]` cannot be bracketed (fuzz target).
        for text in [
            "server.7\u{16}=\0\0]\0+ighp.\0\x0001\0:2222:222",
            "server.7=h:1:2|\0]x:3:4",
            "server.7=h:1:2|\0x:3:4;\0]c:5",
        ] {
            let c = QuorumConfig::parse(text).unwrap();
            assert_eq!(QuorumConfig::parse(&c.to_string()).unwrap(), c, "{text:?}");
        }
    }

    #[test]
    fn java_text_round_trips() {
        let texts = [
            "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:participant\nserver.3=127.0.0.3:2888:3888:participant\nserver.4=127.0.0.4:2888:3888:observer\nversion=0",
            "server.1=127.0.0.1:2888:3888|127.0.1.1:2889:3889:participant\nversion=100000000",
            "server.1=[0:0:0:0:0:0:0:1]:2881:3881:participant;0.0.0.0:2181\nversion=1",
            "server.0=h0:1:2:participant\nserver.1=h1:1:2:participant\ngroup.1=0:1\nweight.0=1\nweight.1=0\nversion=ffffffffffffffff",
        ];
        for t in texts {
            let c = QuorumConfig::parse(t).unwrap();
            assert_eq!(c.to_string(), t);
        }
        let c = QuorumConfig::parse(texts[1]).unwrap();
        assert_eq!(c.version(), 0x1_0000_0000);
        let s = c.server(1).unwrap();
        assert_eq!(s.addresses.len(), 2);
        assert_eq!(s.addresses[1].election().text, "127.0.1.1:3889");
        let v6 = QuorumConfig::parse(texts[2]).unwrap();
        let e = v6.server(1).unwrap().addresses[0].election();
        assert_eq!(e.text, "[0:0:0:0:0:0:0:1]:3881");
        assert_eq!(e.socket_addr(), "[::1]:3881".parse().ok());
    }

    #[test]
    fn rejections_carry_the_line_offset() {
        let e = QuorumConfig::parse("server.1=a:1:2:participant\nmy very invalid config string")
            .unwrap_err();
        assert_eq!((e.field, e.offset), ("config line", 27));
        for bad in [
            "server.x=a:1:2",
            "server.1=a:1",
            "server.1=a:1:1",
            "version=zz",
            "server.1=a:1:2:boss",
            "server.1=a:1:2:participant|b:1:2:observer",
        ] {
            assert!(QuorumConfig::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(version_of("server.1=a:1:2\nversion=1a"), Some(0x1a));
    }
}
