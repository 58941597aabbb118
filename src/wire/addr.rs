//! `host:port` election addresses as Java writes and parses them.
//!
//! Java writes `getHostString()` then `:port`, bracketing IPv6 literals and writing them
//! uncompressed (`[0:0:0:0:0:0:0:1]:3888`); captures and users write `[::1]:3888`. An
//! [`ElectionAddress`] keeps the text exactly as sent and compares by socket address where the
//! host is an IP literal, so both spellings are the same endpoint.

use std::net::{IpAddr, SocketAddr};

use super::error::{ErrorKind, WireError};

/// One election address from an initial message or a config line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ElectionAddress {
    /// The element exactly as sent, e.g. `[0:0:0:0:0:0:0:1]:3882`.
    pub text: String,
    /// The host without brackets, as Java's parser extracts it.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl ElectionAddress {
    /// Parses one `host:port` element the way `InitialMessage.parse` does (via
    /// `ConfigUtils.getHostAndPort` and `Integer.parseInt`). `offset` is where the element
    /// starts, for the error.
    pub fn parse(text: &str, offset: usize) -> Result<Self, WireError> {
        // The common form, `host:port` with one colon and a port in range, read directly
        // (what the general reading below gives for it, without its intermediate strings).
        if let Some((host, port)) = text.split_once(':')
            && !host.is_empty()
            && !host.starts_with('[')
            && (1..=5).contains(&port.len())
            && port.bytes().all(|b| b.is_ascii_digit())
            && let Ok(port) = port.parse::<u16>()
        {
            return Ok(ElectionAddress {
                text: text.to_string(),
                host: host.to_string(),
                port,
            });
        }
        Self::parse_general(text, offset)
    }

    /// [`ElectionAddress::parse`] for every form: a bracketed IPv6 host, signs, bad ports.
    fn parse_general(text: &str, offset: usize) -> Result<Self, WireError> {
        let bad = |reason| {
            WireError::new(
                "address",
                offset,
                ErrorKind::BadAddress {
                    text: text.to_string(),
                    reason,
                },
            )
        };
        let parts = host_and_port(text).map_err(bad)?;
        let [host, port] = <[String; 2]>::try_from(parts)
            .map_err(|_| bad("expected exactly one host and one port"))?;
        let port_value = java_parse_int(&port)
            .ok_or_else(|| WireError::new("address", offset, ErrorKind::BadPort(port.clone())))?;
        let port = u16::try_from(port_value).map_err(|_| {
            WireError::new(
                "address",
                offset,
                ErrorKind::PortOutOfRange(i64::from(port_value)),
            )
        })?;
        Ok(ElectionAddress {
            text: text.to_string(),
            host,
            port,
        })
    }

    /// Builds an address from a socket address, written the way Java writes it.
    pub fn from_socket_addr(addr: SocketAddr) -> Self {
        let host = java_host_string(addr.ip());
        ElectionAddress {
            text: format_host_port(&host, addr.port()),
            host,
            port: addr.port(),
        }
    }

    /// The socket address, when the host is an IP literal (names are not resolved here).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let host = self.host.split('%').next().unwrap_or("");
        host.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, self.port))
    }

    /// `0.0.0.0` and `::`: Java drops these from an initial message's address list.
    pub fn is_wildcard(&self) -> bool {
        self.socket_addr().is_some_and(|a| a.ip().is_unspecified())
    }
}

/// Whether a host is written bracketed: Java brackets a host that contains `:`; zkfle also
/// brackets one that starts with `[`, or with a char Java's trim removes (which only a
/// bracketed form can yield at the start of a config value), so that what it prints parses
/// back to the same host. Java would print such a host bare, and fail to read it back (found by
/// the `config` fuzz target: `server.9=[[h]00:4`). A host with `]` is never bracketed for that
/// last reason: it cannot be (the bracketed form ends at the first `]`), and it only comes
/// from a bare host after `|` or `;`, where nothing trims it (fuzz target, too).
pub(crate) fn needs_brackets(host: &str) -> bool {
    let starts_trimmed = host.chars().next().is_some_and(is_java_trimmed);
    host.contains(':') || host.starts_with('[') || (starts_trimmed && !host.contains(']'))
}

/// The chars Java's `String.trim` removes: every char up to `' '`, control chars included, and
/// no other (unlike Rust's `str::trim`, which keeps `\0` but removes Unicode spaces).
fn is_java_trimmed(c: char) -> bool {
    c <= ' '
}

/// Java's `String.trim`.
pub(crate) fn java_trim(s: &str) -> &str {
    s.trim_matches(is_java_trimmed)
}

/// `NetUtils.formatInetAddr`: `host:port`, with the host bracketed when it contains `:`.
pub fn format_host_port(host: &str, port: u16) -> String {
    if needs_brackets(host) {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Java's `InetAddress.getHostAddress()` text: IPv6 uncompressed, without leading zeros.
pub fn java_host_string(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            s.iter()
                .map(|g| format!("{g:x}"))
                .collect::<Vec<_>>()
                .join(":")
        }
    }
}

/// Java's `String.split(sep)` for a one-character literal separator: trailing empty strings
/// are removed (so `"a:1|"` has one element and `"|"` none), leading ones are kept.
pub(crate) fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.is_empty() && s.is_empty() {
        // "".split(x) is [""] in Java: the empty input itself, not a trailing element.
        parts.push("");
    }
    parts
}

/// `ConfigUtils.getHostAndPort`: a bracketed IPv6 host up to the first `]`, with the rest
/// after `]` and one more character (which Java does not check) split on `:`; otherwise a
/// plain split on `:`.
pub(crate) fn host_and_port(s: &str) -> Result<Vec<String>, &'static str> {
    if let Some(inner) = s.strip_prefix('[') {
        let close = inner
            .find(']')
            .ok_or("starts with '[' but has no matching ']'")?;
        let i = close + 1; // index of ']' in s
        let host = &s[1..i];
        if i + 2 == s.len() {
            return Err("doesn't have a port after colon");
        }
        if i + 2 < s.len() {
            // Java skips the character after ']' by index; it may not be a char boundary.
            let rest = s.get(i + 2..).ok_or("not a character boundary after ']'")?;
            let mut out = vec![host.to_string()];
            out.extend(java_split(rest, ':').into_iter().map(str::to_string));
            return Ok(out);
        }
        Ok(vec![s.replace(['[', ']'], "")])
    } else {
        Ok(java_split(s, ':').into_iter().map(str::to_string).collect())
    }
}

/// `Integer.parseInt` for ASCII input: optional sign, decimal digits, within i32.
pub(crate) fn java_parse_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i32>().ok()
}

/// `Long.parseLong(s, radix)` for ASCII text: an optional sign, then at least one digit,
/// within 64 bits.
pub(crate) fn java_parse_long(s: &str, radix: u32) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    i64::from_str_radix(s, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_common_form_reads_as_the_general_reading_does(
            host in "[0-9a-z.:\\[\\]+-]{0,12}",
            port in "[0-9+-]{0,7}",
            sep in prop::sample::select(vec![":", "::", ""]),
        ) {
            let text = format!("{host}{sep}{port}");
            prop_assert_eq!(
                ElectionAddress::parse(&text, 3),
                ElectionAddress::parse_general(&text, 3)
            );
        }
    }

    #[test]
    fn ipv6_spellings_compare_equal() {
        let java = ElectionAddress::parse("[0:0:0:0:0:0:0:1]:3882", 0).unwrap();
        let short = ElectionAddress::parse("[::1]:3882", 0).unwrap();
        assert_eq!(java.text, "[0:0:0:0:0:0:0:1]:3882");
        assert_eq!(java.host, "0:0:0:0:0:0:0:1");
        assert_eq!(java.socket_addr(), short.socket_addr());
        assert_eq!(java.socket_addr(), "[::1]:3882".parse().ok());
    }

    #[test]
    fn java_writes_ipv6_uncompressed() {
        let a = ElectionAddress::from_socket_addr("[::1]:3882".parse().unwrap());
        assert_eq!(a.text, "[0:0:0:0:0:0:0:1]:3882");
        let b = ElectionAddress::from_socket_addr("127.0.0.3:3888".parse().unwrap());
        assert_eq!(b.text, "127.0.0.3:3888");
    }

    #[test]
    fn split_follows_java() {
        assert_eq!(java_split("a:1|", '|'), vec!["a:1"]);
        assert_eq!(java_split("|a:1", '|'), vec!["", "a:1"]);
        assert_eq!(java_split("|", '|'), Vec::<&str>::new());
        assert_eq!(java_split("", '|'), vec![""]);
    }

    #[test]
    fn rejects_like_java() {
        for bad in [
            "what is this",
            "127.0.0.1",
            "[::1",
            "[::1]:",
            "a:1:2",
            "host:",
        ] {
            assert!(
                matches!(
                    ElectionAddress::parse(bad, 7).unwrap_err().kind,
                    ErrorKind::BadAddress { .. }
                ),
                "{bad}"
            );
        }
        assert_eq!(
            ElectionAddress::parse("127.0.0.1:abc", 0).unwrap_err().kind,
            ErrorKind::BadPort("abc".into())
        );
        assert_eq!(
            ElectionAddress::parse("127.0.0.1:70000", 0)
                .unwrap_err()
                .kind,
            ErrorKind::PortOutOfRange(70000)
        );
        assert_eq!(ElectionAddress::parse("h:+80", 0).unwrap().port, 80);
        assert!(
            ElectionAddress::parse("0.0.0.0:3888", 0)
                .unwrap()
                .is_wildcard()
        );
    }
}
