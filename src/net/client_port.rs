//! `zkfle join`'s client port: four-letter words answered as a Java member answers them
//! (`src/output/fourlw.rs` words them), so that `zkServer.sh status`, `echo ruok | nc`,
//! Kubernetes probes and `mntr` scrapers see zkfle as the member it is. zkfle serves no client
//! requests: a client's connection is closed at once, as a Java server that is not serving
//! closes it, so client libraries move on to another server.
//!
//! Bounded as the election port is: at most [`MAX_CONNECTIONS`] at a time, each given
//! [`ANSWER_WITHIN`] to send its four bytes and take the answer.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use super::status::StatusBoard;
use crate::output::fourlw::{self, MemberSetup};

/// Client-port connections served at a time; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a connection may take to send its word and read the answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Which four-letter words are answered (`4lw.commands.whitelist`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Whitelist(BTreeSet<String>);

impl Whitelist {
    /// Java's rules (`FourLetterCommands.isEnabled`): the comma-separated words of the
    /// `zookeeper.4lw.commands.whitelist` property (`*` for all), plus `srvr` always (its
    /// `zkServer.sh` needs it) and `isro` in read-only mode.
    pub fn new(property: Option<&str>, read_only: bool) -> Whitelist {
        let mut words = BTreeSet::new();
        for word in property.unwrap_or_default().split(',').map(str::trim) {
            if word == "*" {
                words.extend(fourlw::KNOWN.iter().map(|w| w.to_string()));
                break;
            }
            if !word.is_empty() {
                words.insert(word.to_string());
            }
        }
        if read_only {
            words.insert("isro".into());
        }
        words.insert("srvr".into());
        Whitelist(words)
    }

    pub fn allows(&self, word: &str) -> bool {
        self.0.contains(word)
    }
}

/// Where and how the client port answers.
#[derive(Debug, Clone)]
pub struct ClientPortConfig {
    pub listen: SocketAddr,
    pub whitelist: Whitelist,
    pub setup: MemberSetup,
    /// Measured for `conf` and `dirs` (its `version-2`).
    pub data_dir: Option<PathBuf>,
}

/// Serves the client port until the process ends. A port that cannot be bound is warned
/// about and the member goes on without it (it still votes and follows).
pub async fn serve(cfg: ClientPortConfig, board: StatusBoard) {
    let listener = match TcpListener::bind(cfg.listen).await {
        Ok(l) => l,
        Err(e) => {
            warn!(
                "client port {}: cannot listen ({e}): four-letter words (srvr, ruok, mntr) will not reach this member; it votes and follows all the same",
                cfg.listen
            );
            return;
        }
    };
    debug!("client port {}: answering four-letter words", cfg.listen);
    let cfg = Arc::new(cfg);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and the like: wait rather than spin.
                debug!("client port {}: accept: {e}", cfg.listen);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!("client port: {MAX_CONNECTIONS} connections busy, closing {peer}'s");
            continue;
        };
        let cfg = cfg.clone();
        let board = board.clone();
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = tokio::time::timeout(ANSWER_WITHIN, answer(stream, &cfg, &board))
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            {
                debug!("client port: {peer}: {e}");
            }
        });
    }
}

/// One connection: a known word gets its answer (or Java's refusal when not whitelisted);
/// anything else (a client's ConnectRequest) is closed unanswered.
async fn answer(
    mut stream: TcpStream,
    cfg: &ClientPortConfig,
    board: &StatusBoard,
) -> std::io::Result<()> {
    let mut word = [0u8; 4];
    stream.read_exact(&mut word).await?;
    let Some(word) = std::str::from_utf8(&word)
        .ok()
        .filter(|w| fourlw::KNOWN.contains(w))
    else {
        return Ok(());
    };
    let text = if cfg.whitelist.allows(word) {
        let dirs = match (word, &cfg.data_dir) {
            ("conf" | "dirs", Some(d)) => {
                let size = super::admin::dir_size(&d.join("version-2"));
                (size, size)
            }
            _ => (0, 0),
        };
        fourlw::answer(word, &board.read(), &cfg.setup, dirs)
    } else {
        format!("{word} is not executed because it is not in the whitelist.\n")
    };
    stream.write_all(text.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whitelist_follows_javas_rules() {
        let default = Whitelist::new(None, false);
        assert!(default.allows("srvr"));
        assert!(!default.allows("ruok") && !default.allows("mntr") && !default.allows("isro"));
        assert!(Whitelist::new(None, true).allows("isro"));
        let some = Whitelist::new(Some(" ruok , mntr,"), false);
        assert!(some.allows("ruok") && some.allows("mntr") && some.allows("srvr"));
        assert!(!some.allows("conf"));
        let all = Whitelist::new(Some("stat, *"), false);
        assert!(fourlw::KNOWN.iter().all(|w| all.allows(w)));
    }
}
