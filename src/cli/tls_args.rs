//! The quorum TLS flags of the commands that talk to election ports without being a member
//! (`probe`, `doctor`, `repro`, `replay --target`): the same `sslQuorum` and `ssl.quorum.*`
//! keys `join` reads from zoo.cfg (docs/tls.md), one way to build the connector.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::CliError;
use crate::net::QuorumTls;
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
}
