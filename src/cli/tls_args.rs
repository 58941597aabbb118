//! The quorum TLS and SASL flags of the commands that talk to election ports without being a
//! member (`probe`, `doctor`, `repro`, `replay --target`): the same `sslQuorum`,
//! `ssl.quorum.*` and `quorum.auth.*` keys `join` reads from zoo.cfg (docs/tls.md,
//! docs/sasl.md), one way to build the connector and the credentials.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::CliError;
use crate::net::QuorumTls;
use crate::sasl::{QuorumSasl, Roles};
use crate::zoocfg::ZooCfg;

#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// Speak quorum TLS as the servers with this zoo.cfg do: its `sslQuorum` and
    /// `ssl.quorum.*` keys (docs/tls.md). Commands with `--config` read that file's keys
    /// without this flag.
    #[arg(long = "tls-config", value_name = "ZOO_CFG")]
    pub tls_config: Option<PathBuf>,
    /// One `ssl.quorum.*` setting as zoo.cfg writes it, e.g.
    /// `--tls ssl.quorum.keyStore.location=/etc/zk/me.p12` (repeatable); turns quorum TLS on
    /// and wins over the config file's.
    #[arg(long = "tls", value_name = "KEY=VALUE")]
    pub tls: Vec<String>,
    /// Authenticate with quorum SASL (DIGEST-MD5) using this JAAS file's `QuorumLearner`
    /// section (docs/sasl.md). Without it, a config with `quorum.auth.enableSasl=true` takes
    /// the file from `-Djava.security.auth.login.config=` in SERVER_JVMFLAGS or JVMFLAGS.
    #[arg(long = "jaas", value_name = "JAAS_FILE")]
    pub jaas: Option<PathBuf>,
}

impl TlsArgs {
    /// The connector: `None` when neither the flags nor the config ask for quorum TLS.
    /// `config` is the command's own `--config`, already read.
    pub fn build(&self, config: Option<&ZooCfg>) -> Result<Option<Arc<QuorumTls>>, CliError> {
        let mut cfg = match &self.tls_config {
            Some(path) => {
                ZooCfg::read(path).map_err(|e| CliError::input(format!("--tls-config {e}")))?
            }
            None => config.cloned().unwrap_or_default(),
        };
        for pair in &self.tls {
            let (key, value) = pair
                .split_once('=')
                .filter(|(k, _)| k.starts_with("ssl.quorum.") || *k == "sslQuorum")
                .ok_or_else(|| {
                    CliError::input(format!(
                        "--tls {pair:?}: expected ssl.quorum.KEY=VALUE (as in zoo.cfg)"
                    ))
                })?;
            cfg.other
                .insert(key.trim().to_string(), value.trim().to_string());
        }
        if !self.tls.is_empty() && !cfg.other.contains_key("sslQuorum") {
            cfg.other.insert("sslQuorum".into(), "true".into());
        }
        QuorumTls::from_zoocfg(&cfg).map_err(|e| {
            let from = match (&self.tls_config, config) {
                (Some(p), _) => format!("--tls-config {}", p.display()),
                (None, Some(c)) if self.tls.is_empty() => format!("--config {}", c.path.display()),
                _ => "--tls".to_string(),
            };
            CliError::input(format!("{from}: {e}"))
        })
    }

    /// Quorum SASL credentials: `None` when neither `--jaas` nor the config's
    /// `quorum.auth.*` keys ask for it. `--jaas` alone turns SASL on, as a learner that must
    /// authenticate.
    pub fn sasl(&self, config: Option<&ZooCfg>) -> Result<Option<Arc<QuorumSasl>>, CliError> {
        let mut cfg = match &self.tls_config {
            Some(path) => {
                ZooCfg::read(path).map_err(|e| CliError::input(format!("--tls-config {e}")))?
            }
            None => config.cloned().unwrap_or_default(),
        };
        if self.jaas.is_some() && !cfg.other.contains_key("quorum.auth.enableSasl") {
            for key in ["quorum.auth.enableSasl", "quorum.auth.learnerRequireSasl"] {
                cfg.other.insert(key.into(), "true".into());
            }
        }
        QuorumSasl::from_zoocfg(&cfg, self.jaas.as_deref(), Roles::LearnerOnly)
            .map(|s| s.map(Arc::new))
            .map_err(|e| CliError::input(format!("quorum SASL: {e}")))
    }
}
