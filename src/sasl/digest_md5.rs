//! SASL DIGEST-MD5 (RFC 2831) as Java's `com.sun.security.sasl.digest` speaks it for quorum
//! SASL: authentication only (qop `auth`), algorithm `md5-sess`, charset utf-8, protocol
//! `zookeeper-quorum` and server name `zk-quorum-sasl-md5` (so the realm and digest-uri are
//! fixed), the authorization id equal to the user name. Pure: the nonces are given, the bytes
//! go in and out as values.
//!
//! No crate speaks DIGEST-MD5 (rsasl and others dropped it with RFC 6331), so it is written
//! here; MD5 comes from RustCrypto's `md-5`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use md5::{Digest, Md5};

/// `QuorumAuth.QUORUM_SERVER_PROTOCOL_NAME`.
pub const PROTOCOL: &str = "zookeeper-quorum";
/// `QuorumAuth.QUORUM_SERVER_SASL_DIGEST`: the server name, and so Java's default realm.
pub const SERVER_NAME: &str = "zk-quorum-sasl-md5";
/// What Java's client writes as `maxbuf` (its default receive buffer).
const MAXBUF: u32 = 65536;

/// Why an exchange failed, in words an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("DIGEST-MD5 {what}: {why}")]
    Malformed { what: &'static str, why: String },
    #[error("the learner's user {0:?} is not in the server's JAAS section (no user_{0} option)")]
    UnknownUser(String),
    #[error("wrong password for user {0:?} (the response digest does not match)")]
    WrongPassword(String),
    #[error("the server's rspauth does not match: it does not know our password")]
    BadRspauth,
    #[error("authorization id {authzid:?} differs from user {user:?}, which Java refuses")]
    NotAuthorized { user: String, authzid: String },
}

fn malformed(what: &'static str, why: impl Into<String>) -> DigestError {
    DigestError::Malformed {
        what,
        why: why.into(),
    }
}

/// A learner's side: one response to the server's challenge, then the check of its rspauth.
#[derive(Debug, Clone)]
pub struct DigestClient {
    username: String,
    password: String,
    cnonce: String,
    /// Set once the response is sent: the rspauth the server must answer with.
    expected_rspauth: Option<String>,
}

impl DigestClient {
    /// `cnonce`: a fresh random token of printable characters without quotes or backslashes.
    pub fn new(username: &str, password: &str, cnonce: &str) -> Self {
        DigestClient {
            username: username.to_string(),
            password: password.to_string(),
            cnonce: cnonce.to_string(),
            expected_rspauth: None,
        }
    }

    /// The response to the server's challenge, byte for byte as Java's `DigestMD5Client`.
    pub fn respond(&mut self, challenge: &[u8]) -> Result<Vec<u8>, DigestError> {
        let d = parse_directives(challenge)?;
        let one = |k: &str| d.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let nonce = one("nonce").ok_or_else(|| malformed("challenge", "no nonce"))?;
        let algorithm = one("algorithm").unwrap_or("");
        if !algorithm.eq_ignore_ascii_case("md5-sess") {
            return Err(malformed(
                "challenge",
                format!("algorithm {algorithm:?}, expected md5-sess"),
            ));
        }
        let qops = one("qop").unwrap_or("auth");
        if !qops.split(',').any(|q| q.trim() == "auth") {
            return Err(malformed(
                "challenge",
                format!("qop {qops:?} does not offer auth"),
            ));
        }
        let utf8 = one("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
        // Java's client takes the first realm offered (its callback's default).
        let realm = one("realm").map(str::to_string);
        let digest_uri = format!("{PROTOCOL}/{SERVER_NAME}");
        let exchange = Exchange {
            method: "AUTHENTICATE",
            digest_uri: &digest_uri,
            username: &self.username,
            realm: realm.as_deref().unwrap_or(""),
            password: &self.password,
            nonce,
            cnonce: &self.cnonce,
            authzid: &self.username,
            utf8,
        };
        let response = response_value(&exchange);
        // The server's rspauth is the same digest with an empty method.
        self.expected_rspauth = Some(response_value(&Exchange {
            method: "",
            ..exchange
        }));
        let mut out = String::new();
        if utf8 {
            out.push_str("charset=utf-8,");
        }
        let _ = write!(out, "username=\"{}\",", quote(&self.username));
        if let Some(r) = &realm {
            let _ = write!(out, "realm=\"{}\",", quote(r));
        }
        let _ = write!(
            out,
            "nonce=\"{}\",nc=00000001,cnonce=\"{}\",digest-uri=\"{digest_uri}\",maxbuf={MAXBUF},response={response},qop=auth,authzid=\"{}\"",
            quote(nonce),
            quote(&self.cnonce),
            quote(&self.username)
        );
        Ok(out.into_bytes())
    }

    /// Checks the server's final token (`rspauth=...`): it proves the server knew the password.
    pub fn verify_rspauth(&self, token: &[u8]) -> Result<(), DigestError> {
        let expected = self
            .expected_rspauth
            .as_deref()
            .ok_or_else(|| malformed("rspauth", "received before any challenge"))?;
        let d = parse_directives(token)?;
        match d.iter().find(|(k, _)| k == "rspauth") {
            Some((_, v)) if v.eq_ignore_ascii_case(expected) => Ok(()),
            Some(_) => Err(DigestError::BadRspauth),
            None => Err(malformed(
                "rspauth",
                "the server's last token has no rspauth",
            )),
        }
    }
}

/// A server's side: the challenge, then the check of the learner's response.
#[derive(Debug, Clone)]
pub struct DigestServer {
    nonce: String,
}

/// A learner the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub user: String,
    /// The final token, sent with status SUCCESS.
    pub rspauth: Vec<u8>,
}

impl DigestServer {
    /// `nonce`: a fresh random token of printable characters without quotes or backslashes.
    pub fn new(nonce: &str) -> Self {
        DigestServer {
            nonce: nonce.to_string(),
        }
    }

    /// The challenge, byte for byte as Java's `DigestMD5Server` with quorum SASL's settings.
    pub fn challenge(&self) -> Vec<u8> {
        format!(
            "realm=\"{SERVER_NAME}\",nonce=\"{}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess",
            quote(&self.nonce)
        )
        .into_bytes()
    }

    /// Checks a learner's response against `users` (user name to password, the
    /// `user_NAME="password"` options of the server's JAAS section).
    pub fn check(
        &self,
        response: &[u8],
        users: &BTreeMap<String, String>,
    ) -> Result<Accepted, DigestError> {
        let d = parse_directives(response)?;
        let one = |k: &str| d.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let need = |k: &'static str| one(k).ok_or_else(|| malformed("response", format!("no {k}")));
        let user = need("username")?;
        let nonce = need("nonce")?;
        if nonce != self.nonce {
            return Err(malformed("response", "its nonce is not the one we sent"));
        }
        let nc = need("nc")?;
        if u32::from_str_radix(nc, 16) != Ok(1) {
            return Err(malformed(
                "response",
                format!("nonce count {nc}, expected 00000001"),
            ));
        }
        let qop = one("qop").unwrap_or("auth");
        if qop != "auth" {
            return Err(malformed(
                "response",
                format!("qop {qop:?}: zkfle, like quorum SASL, offers auth only"),
            ));
        }
        let uri = need("digest-uri")?;
        let mut parts = uri.splitn(3, '/');
        let (service, host) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if !service.eq_ignore_ascii_case(PROTOCOL) || !host.eq_ignore_ascii_case(SERVER_NAME) {
            return Err(malformed(
                "response",
                format!("digest-uri {uri:?}, expected {PROTOCOL}/{SERVER_NAME}"),
            ));
        }
        let realm = one("realm").unwrap_or("");
        let cnonce = need("cnonce")?;
        let authzid = one("authzid").unwrap_or(user);
        let Some(password) = users.get(user) else {
            return Err(DigestError::UnknownUser(user.to_string()));
        };
        let utf8 = one("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
        let exchange = Exchange {
            method: "AUTHENTICATE",
            digest_uri: uri,
            username: user,
            realm,
            password,
            nonce,
            cnonce,
            authzid: one("authzid").unwrap_or(""),
            utf8,
        };
        let expected = response_value(&exchange);
        if !need("response")?.eq_ignore_ascii_case(&expected) {
            return Err(DigestError::WrongPassword(user.to_string()));
        }
        // Java's SaslQuorumServerCallbackHandler: DIGEST-MD5 learners are authorized when the
        // authorization id is the user itself.
        if authzid != user {
            return Err(DigestError::NotAuthorized {
                user: user.to_string(),
                authzid: authzid.to_string(),
            });
        }
        let rspauth = response_value(&Exchange {
            method: "",
            ..exchange
        });
        Ok(Accepted {
            user: user.to_string(),
            rspauth: format!("rspauth={rspauth}").into_bytes(),
        })
    }
}

/// The inputs of one response value (RFC 2831 2.1.2.1).
#[derive(Clone, Copy)]
struct Exchange<'a> {
    /// "AUTHENTICATE" for the client's response, "" for the server's rspauth.
    method: &'a str,
    digest_uri: &'a str,
    username: &'a str,
    realm: &'a str,
    password: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    /// Empty: not sent.
    authzid: &'a str,
    utf8: bool,
}

/// The user name a learner's response names (`username="..."`), for decoding captures.
pub fn response_user(token: &[u8]) -> Option<String> {
    parse_directives(token)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == "username")
        .map(|(_, v)| v)
}

/// HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2)))), as Java's
/// `DigestMD5Base.generateResponseValue`.
fn response_value(x: &Exchange<'_>) -> String {
    let h_a2 = hex::encode(Md5::digest(format!("{}:{}", x.method, x.digest_uri)));
    let mut user_realm_pass = Md5::new();
    user_realm_pass.update(latin1_or_utf8(x.username, x.utf8));
    user_realm_pass.update(b":");
    user_realm_pass.update(latin1_or_utf8(x.realm, x.utf8));
    user_realm_pass.update(b":");
    user_realm_pass.update(latin1_or_utf8(x.password, x.utf8));
    let mut a1 = Md5::new();
    a1.update(user_realm_pass.finalize());
    a1.update(format!(":{}:{}", x.nonce, x.cnonce));
    if !x.authzid.is_empty() {
        a1.update(b":");
        a1.update(x.authzid.as_bytes());
    }
    let h_a1 = hex::encode(a1.finalize());
    hex::encode(Md5::digest(format!(
        "{h_a1}:{}:00000001:{}:auth:{h_a2}",
        x.nonce, x.cnonce
    )))
}

/// Java's `stringToByte_8859_1`: ISO 8859-1 when every char fits in it (always without
/// charset=utf-8), UTF-8 otherwise.
fn latin1_or_utf8(s: &str, utf8: bool) -> Vec<u8> {
    if s.chars().all(|c| (c as u32) <= 0xff) || !utf8 {
        s.chars().map(|c| (c as u32).min(0xff) as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

/// A quoted-string's content with `"` and `\` escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `key=value` directives separated by commas; a value is a token or a quoted string with
/// backslash escapes. Keys are lower-cased, as RFC 2831 makes them case-insensitive.
fn parse_directives(token: &[u8]) -> Result<Vec<(String, String)>, DigestError> {
    let text = std::str::from_utf8(token).map_err(|_| malformed("token", "not UTF-8"))?;
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars
            .peek()
            .is_some_and(|c| c.is_ascii_whitespace() || *c == ',')
        {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' || c.is_ascii_whitespace() {
                break;
            }
            key.push(c.to_ascii_lowercase());
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(malformed(
                "token",
                format!("directive {key:?} has no value"),
            ));
        }
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(malformed("token", "unterminated quoted string")),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(malformed("token", "unterminated quoted string")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value.truncate(value.trim_end().len());
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, String> {
        BTreeMap::from([("test".to_string(), "secret".to_string())])
    }

    #[test]
    fn rfc_2831_example_response() {
        // RFC 2831 section 4's IMAP example (qop auth, no authzid, no charset).
        let x = Exchange {
            method: "AUTHENTICATE",
            digest_uri: "imap/elwood.innosoft.com",
            username: "chris",
            realm: "elwood.innosoft.com",
            password: "secret",
            nonce: "OA6MG9tEQGm2hh",
            cnonce: "OA6MHXh6VqTrRk",
            authzid: "",
            utf8: false,
        };
        assert_eq!(response_value(&x), "d388dad90d4bbd760a152321f2143af7");
        let x = Exchange { method: "", ..x };
        assert_eq!(response_value(&x), "ea40f60335c427b5527b84dbabcdfffd");
    }

    #[test]
    fn client_and_server_agree_and_the_client_writes_javas_form() {
        let server = DigestServer::new("srvnonce");
        let challenge = server.challenge();
        assert_eq!(
            String::from_utf8_lossy(&challenge),
            "realm=\"zk-quorum-sasl-md5\",nonce=\"srvnonce\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
        );
        let mut client = DigestClient::new("test", "secret", "cli\"nonce");
        let response = client.respond(&challenge).unwrap();
        let text = String::from_utf8(response.clone()).unwrap();
        assert!(
            text.starts_with("charset=utf-8,username=\"test\",realm=\"zk-quorum-sasl-md5\",nonce=\"srvnonce\",nc=00000001,cnonce=\"cli\\\"nonce\",digest-uri=\"zookeeper-quorum/zk-quorum-sasl-md5\",maxbuf=65536,response="),
            "{text}"
        );
        assert!(text.ends_with(",qop=auth,authzid=\"test\""), "{text}");
        let accepted = server.check(&response, &users()).unwrap();
        assert_eq!(accepted.user, "test");
        client.verify_rspauth(&accepted.rspauth).unwrap();
    }

    #[test]
    fn wrong_password_unknown_user_and_forged_rspauth_are_refused() {
        let server = DigestServer::new("n1");
        let mut wrong = DigestClient::new("test", "guess", "c1");
        let r = wrong.respond(&server.challenge()).unwrap();
        assert_eq!(
            server.check(&r, &users()),
            Err(DigestError::WrongPassword("test".into()))
        );
        let mut stranger = DigestClient::new("eve", "secret", "c1");
        let r = stranger.respond(&server.challenge()).unwrap();
        assert_eq!(
            server.check(&r, &users()),
            Err(DigestError::UnknownUser("eve".into()))
        );
        let mut client = DigestClient::new("test", "secret", "c2");
        client.respond(&server.challenge()).unwrap();
        assert_eq!(
            client.verify_rspauth(b"rspauth=00000000000000000000000000000000"),
            Err(DigestError::BadRspauth)
        );
    }

    #[test]
    fn hostile_tokens_are_errors_not_panics() {
        for bad in [
            &b"nonce=\"abc"[..],
            b"nonce",
            b"\xff\xfe",
            b"realm=x,algorithm=md5",
            b"algorithm=md5-sess",
        ] {
            assert!(DigestClient::new("u", "p", "c").respond(bad).is_err());
            assert!(DigestServer::new("n").check(bad, &users()).is_err());
        }
    }
}
