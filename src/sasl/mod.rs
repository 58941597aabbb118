//! Quorum SASL (`quorum.auth.enableSasl=true`): who authenticates to whom, with which
//! credentials, and the exchange itself as two small state machines (no I/O: `net::sasl`
//! drives them over sockets).
//!
//! What Java does (QuorumPeerConfig, QuorumPeer.initialize, SaslQuorumAuthLearner,
//! SaslQuorumAuthServer, QuorumCnxManager, Learner, LearnerHandler; docs/sasl.md):
//! - Every connection's *initiator* is the learner: on the election port after its initial
//!   message (also on a connection it is about to drop for having the smaller sid), on the
//!   quorum port before FOLLOWERINFO. It authenticates only with
//!   `quorum.auth.learnerRequireSasl=true`.
//! - The *acceptor* is the server: it peeks at the next eight bytes; the auth magic starts the
//!   exchange, anything else passes unless `quorum.auth.serverRequireSasl=true`. A failed
//!   exchange closes the connection only when SASL is required.
//! - Credentials come from a JAAS file (`-Djava.security.auth.login.config`): the learner
//!   section (`quorum.auth.learner.saslLoginContext`, default `QuorumLearner`) gives
//!   `username`/`password`, the server section (`quorum.auth.server.saslLoginContext`, default
//!   `QuorumServer`) gives `user_NAME="password"` pairs. Both must exist when SASL is on.
//! - DIGEST-MD5 only here; a section with Kerberos (Krb5LoginModule) is refused, named.

pub mod digest_md5;
pub mod jaas;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::wire::quorum_auth::{AuthStatus, QuorumAuthPacket};
use crate::zoocfg::ZooCfg;
pub use digest_md5::{DigestClient, DigestError, DigestServer};
pub use jaas::JaasConfig;

/// The login module of DIGEST-MD5 quorum SASL.
pub const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";
/// The Java system property naming the JAAS file.
pub const JAAS_PROPERTY: &str = "java.security.auth.login.config";

const ENABLE: &str = "quorum.auth.enableSasl";
const LEARNER_REQUIRED: &str = "quorum.auth.learnerRequireSasl";
const SERVER_REQUIRED: &str = "quorum.auth.serverRequireSasl";
const LEARNER_CONTEXT: &str = "quorum.auth.learner.saslLoginContext";
const SERVER_CONTEXT: &str = "quorum.auth.server.saslLoginContext";

/// Quorum SASL as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSasl {
    /// `quorum.auth.learnerRequireSasl`: authenticate on the connections we open.
    pub learner_required: bool,
    /// `quorum.auth.serverRequireSasl`: refuse connections that do not authenticate.
    pub server_required: bool,
    /// The learner section's user and password (`None` for a learner-only user such as
    /// `probe` that was given no such section).
    pub learner: Option<(String, String)>,
    /// The server section's users and passwords (empty when we only connect).
    pub users: BTreeMap<String, String>,
    /// Where the credentials came from, for messages.
    pub jaas: PathBuf,
}

/// Which sections a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// A member (`join`): both, as a Java server.
    LearnerAndServer,
    /// A command that mostly opens connections (`probe`, `doctor`, `repro`): the server
    /// section is read when present (a repro standing in for a member accepts connections).
    LearnerOnly,
}

fn parse_bool(cfg: &ZooCfg, key: &str) -> Result<bool, String> {
    match cfg.other.get(key).map(|v| v.trim()) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        // QuorumPeerConfig.parseBoolean.
        Some(v) => Err(format!(
            "Invalid option {v} for {key}. Choose 'true' or 'false.'"
        )),
    }
}

impl QuorumSasl {
    /// Quorum SASL from zoo.cfg's `quorum.auth.*` keys, with the JAAS file `jaas` (a command's
    /// flag) or, failing that, `-Djava.security.auth.login.config=` in JVMFLAGS or
    /// SERVER_JVMFLAGS. `None` when zoo.cfg does not enable it. Errors name the key or file,
    /// with Java's own words where Java refuses the same config.
    pub fn from_zoocfg(
        cfg: &ZooCfg,
        jaas: Option<&Path>,
        roles: Roles,
    ) -> Result<Option<QuorumSasl>, String> {
        let enabled = parse_bool(cfg, ENABLE)?;
        let learner_required = parse_bool(cfg, LEARNER_REQUIRED)?;
        let server_required = parse_bool(cfg, SERVER_REQUIRED)?;
        for (on, key) in [
            (server_required, SERVER_REQUIRED),
            (learner_required, LEARNER_REQUIRED),
        ] {
            if on && !enabled {
                return Err(format!("{ENABLE} is disabled, so cannot enable {key}"));
            }
        }
        if server_required && !learner_required {
            return Err(format!(
                "{LEARNER_REQUIRED} is disabled, so cannot enable {SERVER_REQUIRED}"
            ));
        }
        if !enabled {
            return Ok(None);
        }
        // X509Util.getFipsMode: in FIPS mode Java will not use DIGEST-MD5 (3.9 defaults to
        // it; zkfle cannot know the servers' version, so only an explicit setting is refused).
        if cfg
            .java_property("zookeeper.fips-mode")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        {
            return Err(
                "fips-mode=true: in FIPS mode Java will not use DIGEST-MD5 for quorum SASL, so no server of this ensemble can authenticate; set fips-mode=false (3.9 defaults to true)"
                    .into(),
            );
        }
        let path = match jaas {
            Some(p) => p.to_path_buf(),
            None => cfg.java_property(JAAS_PROPERTY).map(PathBuf::from).ok_or_else(|| {
                format!(
                    "{ENABLE}=true needs a JAAS file with the {} and {} sections: give it with --jaas FILE, or as -D{JAAS_PROPERTY}=FILE in SERVER_JVMFLAGS or JVMFLAGS as Java reads it",
                    context(cfg, LEARNER_CONTEXT, "QuorumLearner"),
                    context(cfg, SERVER_CONTEXT, "QuorumServer"),
                )
            })?,
        };
        let file = JaasConfig::read(&path).map_err(|e| format!("JAAS file {e}"))?;
        let learner_name = context(cfg, LEARNER_CONTEXT, "QuorumLearner");
        let server_name = context(cfg, SERVER_CONTEXT, "QuorumServer");
        let learner = match file.section(&learner_name) {
            Some(entries) => Some(learner_credentials(entries, &learner_name, &path)?),
            None if roles == Roles::LearnerOnly && !learner_required => None,
            None => return Err(missing_section(&path, &learner_name)),
        };
        let users = match (file.section(&server_name), roles) {
            (Some(entries), _) => server_users(entries, &server_name, &path)?,
            (None, Roles::LearnerAndServer) => return Err(missing_section(&path, &server_name)),
            (None, Roles::LearnerOnly) => BTreeMap::new(),
        };
        Ok(Some(QuorumSasl {
            learner_required,
            server_required,
            learner,
            users,
            jaas: path,
        }))
    }
}

fn context(cfg: &ZooCfg, key: &str, default: &str) -> String {
    cfg.other
        .get(key)
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| default.to_string())
}

fn missing_section(path: &Path, name: &str) -> String {
    // SaslQuorumAuthLearner/Server's own words.
    format!(
        "JAAS file {}: SASL-authentication failed because the specified JAAS configuration section '{name}' could not be found.",
        path.display()
    )
}

fn digest_only(entries: &[jaas::LoginModule], name: &str, path: &Path) -> Result<(), String> {
    for e in entries {
        if e.class != DIGEST_LOGIN_MODULE {
            let what = if e.class.contains("Krb5LoginModule") {
                "Kerberos (GSSAPI) quorum SASL, which zkfle does not speak"
            } else {
                "a login module zkfle does not know"
            };
            return Err(format!(
                "JAAS file {}: section '{name}' uses {}: {what}; zkfle speaks DIGEST-MD5 ({DIGEST_LOGIN_MODULE}) only",
                path.display(),
                e.class
            ));
        }
    }
    Ok(())
}

fn learner_credentials(
    entries: &[jaas::LoginModule],
    name: &str,
    path: &Path,
) -> Result<(String, String), String> {
    digest_only(entries, name, path)?;
    // DigestLoginModule puts username and password in the subject; Java uses the first.
    entries
        .iter()
        .find_map(|e| {
            let user = e.options.get("username")?;
            Some((
                user.clone(),
                e.options.get("password").cloned().unwrap_or_default(),
            ))
        })
        .ok_or_else(|| {
            format!(
                "JAAS file {}: section '{name}' has no username=\"...\" password=\"...\" options",
                path.display()
            )
        })
}

fn server_users(
    entries: &[jaas::LoginModule],
    name: &str,
    path: &Path,
) -> Result<BTreeMap<String, String>, String> {
    digest_only(entries, name, path)?;
    Ok(entries
        .iter()
        .flat_map(|e| &e.options)
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
        .collect())
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes (one encoded packet) and read the next packet.
    Send(Vec<u8>),
    /// The exchange is over, and succeeded.
    Done,
}

/// The learner's side of one connection's exchange.
#[derive(Debug)]
pub struct LearnerExchange {
    client: DigestClient,
    answered: bool,
}

impl LearnerExchange {
    /// The exchange and its first packet (IN_PROGRESS with an empty token: DIGEST-MD5 has no
    /// initial response).
    pub fn start(user: &str, password: &str, cnonce: &str) -> (LearnerExchange, Vec<u8>) {
        (
            LearnerExchange {
                client: DigestClient::new(user, password, cnonce),
                answered: false,
            },
            QuorumAuthPacket::new(AuthStatus::InProgress, Vec::new()).encode(),
        )
    }

    /// The server's next packet.
    pub fn on_packet(&mut self, p: &QuorumAuthPacket) -> Result<Step, String> {
        match p.status {
            AuthStatus::Error => Err(
                "the server refused SASL authentication (status ERROR): is our QuorumLearner user and password in its QuorumServer section?"
                    .into(),
            ),
            AuthStatus::InProgress if !self.answered => {
                let response = self.client.respond(&p.token).map_err(|e| e.to_string())?;
                self.answered = true;
                Ok(Step::Send(
                    QuorumAuthPacket::new(AuthStatus::InProgress, response).encode(),
                ))
            }
            AuthStatus::InProgress => {
                Err("the server sent a second challenge; DIGEST-MD5 has one".into())
            }
            AuthStatus::Success if self.answered => {
                self.client
                    .verify_rspauth(&p.token)
                    .map_err(|e| e.to_string())?;
                Ok(Step::Done)
            }
            AuthStatus::Success => {
                Err("the server reported SUCCESS before any challenge".into())
            }
        }
    }
}

/// How a server's side ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOutcome {
    Authenticated(String),
    /// The exchange failed: with `serverRequireSasl` the connection closes, otherwise Java
    /// keeps it ("Maintaining learner connection despite SASL authentication failure").
    Failed(String),
}

/// The server's side of one connection's exchange, from the learner's first packet.
#[derive(Debug)]
pub struct ServerExchange {
    server: DigestServer,
    challenged: bool,
}

impl ServerExchange {
    pub fn new(nonce: &str) -> ServerExchange {
        ServerExchange {
            server: DigestServer::new(nonce),
            challenged: false,
        }
    }

    /// The learner's next packet: what to send, and the outcome once there is one.
    pub fn on_packet(
        &mut self,
        p: &QuorumAuthPacket,
        users: &BTreeMap<String, String>,
    ) -> (Vec<u8>, Option<ServerOutcome>) {
        let refuse = |why: String| {
            (
                QuorumAuthPacket::new(AuthStatus::Error, Vec::new()).encode(),
                Some(ServerOutcome::Failed(why)),
            )
        };
        if !self.challenged {
            if !p.token.is_empty() {
                return refuse(
                    "DIGEST-MD5 has no initial response, but the learner sent one".into(),
                );
            }
            self.challenged = true;
            let c = QuorumAuthPacket::new(AuthStatus::InProgress, self.server.challenge());
            return (c.encode(), None);
        }
        match self.server.check(&p.token, users) {
            Ok(a) => (
                QuorumAuthPacket::new(AuthStatus::Success, a.rspauth).encode(),
                Some(ServerOutcome::Authenticated(a.user)),
            ),
            Err(e) => refuse(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: &str) -> ZooCfg {
        let mut c = ZooCfg::default();
        for l in lines.lines() {
            if let Some((k, v)) = l.split_once('=') {
                c.other.insert(k.into(), v.into());
            }
        }
        c
    }

    fn jaas_file(text: &str) -> tempfile_path::TempPath {
        tempfile_path::TempPath::with(text)
    }

    /// A file removed when dropped.
    mod tempfile_path {
        pub struct TempPath(pub std::path::PathBuf);
        impl TempPath {
            pub fn with(text: &str) -> TempPath {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let p = std::env::temp_dir().join(format!(
                    "zkfle-jaas-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                std::fs::write(&p, text).unwrap();
                TempPath(p)
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    const BOTH: &str = r#"QuorumServer { org.apache.zookeeper.server.auth.DigestLoginModule required user_test="test" user_zk="pw"; };
QuorumLearner { org.apache.zookeeper.server.auth.DigestLoginModule required username="test" password="test"; };"#;

    #[test]
    fn config_as_java_reads_it() {
        let f = jaas_file(BOTH);
        assert_eq!(
            QuorumSasl::from_zoocfg(&cfg(""), None, Roles::LearnerAndServer),
            Ok(None)
        );
        let s = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\nquorum.auth.serverRequireSasl=TRUE"),
            Some(&f.0),
            Roles::LearnerAndServer,
        )
        .unwrap()
        .unwrap();
        assert!(s.learner_required && s.server_required);
        assert_eq!(s.learner, Some(("test".into(), "test".into())));
        assert_eq!(s.users.len(), 2);

        let e = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.serverRequireSasl=true"),
            None,
            Roles::LearnerAndServer,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "quorum.auth.enableSasl is disabled, so cannot enable quorum.auth.serverRequireSasl"
        );
        let e = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.enableSasl=true\nquorum.auth.serverRequireSasl=true"),
            None,
            Roles::LearnerAndServer,
        )
        .unwrap_err();
        assert!(
            e.starts_with("quorum.auth.learnerRequireSasl is disabled"),
            "{e}"
        );
        let e = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.enableSasl=yes"),
            None,
            Roles::LearnerAndServer,
        )
        .unwrap_err();
        assert!(e.contains("Invalid option yes"), "{e}");
        let e = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.enableSasl=true"),
            None,
            Roles::LearnerAndServer,
        )
        .unwrap_err();
        assert!(e.contains("--jaas"), "{e}");
        let e = QuorumSasl::from_zoocfg(
            &cfg("quorum.auth.enableSasl=true\nfips-mode=true"),
            Some(&f.0),
            Roles::LearnerAndServer,
        )
        .unwrap_err();
        assert!(e.starts_with("fips-mode=true"), "{e}");
    }

    #[test]
    fn missing_sections_and_kerberos_are_named() {
        let learner_only = jaas_file(
            r#"QuorumLearner { org.apache.zookeeper.server.auth.DigestLoginModule required username="a" password="b"; };"#,
        );
        let on = cfg("quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true");
        let e = QuorumSasl::from_zoocfg(&on, Some(&learner_only.0), Roles::LearnerAndServer)
            .unwrap_err();
        assert!(e.contains("'QuorumServer' could not be found"), "{e}");
        assert!(QuorumSasl::from_zoocfg(&on, Some(&learner_only.0), Roles::LearnerOnly).is_ok());
        let krb = jaas_file(
            r#"QuorumServer { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };
QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };"#,
        );
        let e = QuorumSasl::from_zoocfg(&on, Some(&krb.0), Roles::LearnerAndServer).unwrap_err();
        assert!(
            e.contains("Kerberos (GSSAPI)") && e.contains("QuorumLearner"),
            "{e}"
        );
        let renamed =
            cfg("quorum.auth.enableSasl=true\nquorum.auth.learner.saslLoginContext=Other");
        let both = jaas_file(BOTH);
        let e =
            QuorumSasl::from_zoocfg(&renamed, Some(&both.0), Roles::LearnerAndServer).unwrap_err();
        assert!(e.contains("'Other'"), "{e}");
    }

    #[test]
    fn learner_and_server_exchanges_meet() {
        let users = BTreeMap::from([("test".to_string(), "test".to_string())]);
        let (mut learner, first) = LearnerExchange::start("test", "test", "cn");
        let mut server = ServerExchange::new("sn");
        let decode = |b: &[u8]| QuorumAuthPacket::decode(b).unwrap().unwrap().0;
        let (challenge, outcome) = server.on_packet(&decode(&first), &users);
        assert_eq!(outcome, None);
        let Step::Send(response) = learner.on_packet(&decode(&challenge)).unwrap() else {
            panic!("a response")
        };
        let (last, outcome) = server.on_packet(&decode(&response), &users);
        assert_eq!(outcome, Some(ServerOutcome::Authenticated("test".into())));
        assert_eq!(learner.on_packet(&decode(&last)).unwrap(), Step::Done);

        // A wrong password: the server answers ERROR, the learner says so.
        let (mut learner, first) = LearnerExchange::start("test", "nope", "cn");
        let mut server = ServerExchange::new("sn");
        let (challenge, _) = server.on_packet(&decode(&first), &users);
        let Step::Send(response) = learner.on_packet(&decode(&challenge)).unwrap() else {
            panic!("a response")
        };
        let (last, outcome) = server.on_packet(&decode(&response), &users);
        assert!(
            matches!(outcome, Some(ServerOutcome::Failed(ref w)) if w.contains("wrong password"))
        );
        assert!(
            learner
                .on_packet(&decode(&last))
                .unwrap_err()
                .contains("refused")
        );
    }
}
