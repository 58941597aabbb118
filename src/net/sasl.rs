//! Quorum SASL over a connection: drives `crate::sasl`'s exchanges on a socket, as a learner
//! (the connection's initiator) and as a server (its acceptor), async for `join` and blocking
//! for `probe`, `doctor` and `repro`.
//!
//! Reads take exactly a packet's bytes: what follows the exchange (the server's first
//! notification, say) stays in the socket for the frame reader.

use std::io::{self, Read, Write};

use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::sasl::{LearnerExchange, QuorumSasl, ServerExchange, ServerOutcome, Step};
use crate::wire::quorum_auth::{HEADER_LEN, QuorumAuthPacket, auth_packet_len, opens_auth_packet};

/// A fresh nonce: 16 random bytes as hex (no quotes or backslashes to escape).
fn nonce() -> io::Result<String> {
    let mut b = [0u8; 16];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| io::Error::other("no system randomness for a SASL nonce"))?;
    Ok(hex::encode(b))
}

fn protocol_error(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.into())
}

/// Where to look when an exchange was refused: the JAAS file the credentials came from.
pub fn refused_hint(e: &io::Error, sasl: &QuorumSasl) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied {
        format!(" (credentials from the JAAS file {})", sasl.jaas.display())
    } else {
        String::new()
    }
}

/// The learner's credentials, when this connection must authenticate.
fn learner_credentials(sasl: &QuorumSasl) -> Option<(&str, &str)> {
    if !sasl.learner_required {
        // SaslQuorumAuthLearner: "Skipping SASL authentication as
        // quorum.auth.learnerRequireSasl=false".
        return None;
    }
    sasl.learner.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
}

fn decode_packet(head: &[u8], token: &[u8]) -> io::Result<QuorumAuthPacket> {
    let mut whole = head.to_vec();
    whole.extend_from_slice(token);
    match QuorumAuthPacket::decode(&whole) {
        Ok(Some((p, _))) => Ok(p),
        Ok(None) => Err(io::ErrorKind::UnexpectedEof.into()),
        Err(e) => Err(protocol_error(format!("SASL packet: {e}"))),
    }
}

/// The token length a packet's header announces (magic, status and bounds checked).
fn token_len(head: &[u8; HEADER_LEN]) -> io::Result<usize> {
    auth_packet_len(head)
        .map(|whole| whole - HEADER_LEN)
        .map_err(|e| protocol_error(format!("SASL packet: {e}")))
}

async fn read_packet<S: AsyncRead + Unpin>(s: &mut S) -> io::Result<QuorumAuthPacket> {
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head).await?;
    let mut token = vec![0u8; token_len(&head)?];
    s.read_exact(&mut token).await?;
    decode_packet(&head, &token)
}

fn read_packet_blocking<S: Read>(s: &mut S) -> io::Result<QuorumAuthPacket> {
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head)?;
    let mut token = vec![0u8; token_len(&head)?];
    s.read_exact(&mut token)?;
    decode_packet(&head, &token)
}

/// Authenticates a connection we opened, when `quorum.auth.learnerRequireSasl` says so. An
/// error of kind `PermissionDenied` is the exchange failing (wrong password, refused); others
/// are the connection's.
pub async fn authenticate_learner<S>(s: &mut S, sasl: &QuorumSasl) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some((user, password)) = learner_credentials(sasl) else {
        return Ok(());
    };
    let (mut exchange, first) = LearnerExchange::start(user, password, &nonce()?);
    s.write_all(&first).await?;
    s.flush().await?;
    loop {
        let p = read_packet(s).await?;
        match exchange.on_packet(&p).map_err(protocol_error)? {
            Step::Send(bytes) => {
                s.write_all(&bytes).await?;
                s.flush().await?;
            }
            Step::Done => return Ok(()),
        }
    }
}

/// [`authenticate_learner`], blocking (the socket's own time-outs bound it).
pub fn authenticate_learner_blocking<S: Read + Write>(
    s: &mut S,
    sasl: &QuorumSasl,
) -> io::Result<()> {
    let Some((user, password)) = learner_credentials(sasl) else {
        return Ok(());
    };
    let (mut exchange, first) = LearnerExchange::start(user, password, &nonce()?);
    s.write_all(&first)?;
    s.flush()?;
    loop {
        let p = read_packet_blocking(s)?;
        match exchange.on_packet(&p).map_err(protocol_error)? {
            Step::Send(bytes) => {
                s.write_all(&bytes)?;
                s.flush()?;
            }
            Step::Done => return Ok(()),
        }
    }
}

/// How a connection we accepted came through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// It authenticated as this user.
    User(String),
    /// It did not try, and SASL is not required.
    Unauthenticated,
    /// Its exchange failed, and SASL is not required: Java keeps such a connection.
    FailedButKept(String),
}

impl Admitted {
    /// Logs how the learner `who` ("sid 2 at 127.0.0.1:40512", "at ...") came through.
    pub fn log(&self, who: &str) {
        match self {
            Admitted::User(user) => {
                tracing::info!("Successfully authenticated learner {who} as {user:?} (SASL)")
            }
            Admitted::Unauthenticated => tracing::debug!(
                "Learner {who} did not authenticate; let through (quorum.auth.serverRequireSasl=false)"
            ),
            Admitted::FailedButKept(why) => tracing::warn!(
                "Failed to authenticate learner {who} using SASL ({why}); maintaining the connection (quorum.auth.serverRequireSasl=false)"
            ),
        }
    }
}

/// The server's side on a connection we accepted: `buffered` holds what was already read past
/// the previous message (the initial message's leftover); on return it holds what follows the
/// exchange. Peeks at the next eight bytes as Java's `QuorumAuth.nextPacketIsAuth`. An error
/// means the connection must close; kind `PermissionDenied` for a refused learner.
pub async fn authenticate_server<S>(
    s: &mut S,
    buffered: &mut Vec<u8>,
    sasl: &QuorumSasl,
) -> io::Result<Admitted>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while buffered.len() < 8 {
        let mut chunk = [0u8; 8];
        let n = s.read(&mut chunk[..8 - buffered.len()]).await?;
        if n == 0 {
            // Closed before a packet: a learner that dropped its losing connection. Java's
            // readLong fails; without required SASL the connection is still let through (and
            // its sid's challenge is decided).
            if sasl.server_required {
                return Err(protocol_error(
                    "the learner closed the connection before authenticating",
                ));
            }
            return Ok(Admitted::Unauthenticated);
        }
        buffered.extend_from_slice(&chunk[..n]);
    }
    if !opens_auth_packet(buffered) {
        if sasl.server_required {
            return Err(protocol_error(
                "Learner not trying to authenticate and authentication is required",
            ));
        }
        return Ok(Admitted::Unauthenticated);
    }
    let mut exchange = ServerExchange::new(&nonce()?);
    loop {
        let p = loop {
            match QuorumAuthPacket::decode(buffered) {
                Ok(Some((p, used))) => {
                    buffered.drain(..used);
                    break p;
                }
                Ok(None) => {
                    let mut chunk = [0u8; 4096];
                    let n = s.read(&mut chunk).await?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    buffered.extend_from_slice(&chunk[..n]);
                }
                Err(e) => return Err(protocol_error(format!("SASL packet: {e}"))),
            }
        };
        let (reply, outcome) = exchange.on_packet(&p, &sasl.users);
        s.write_all(&reply).await?;
        s.flush().await?;
        match outcome {
            None => {}
            Some(ServerOutcome::Authenticated(user)) => return Ok(Admitted::User(user)),
            Some(ServerOutcome::Failed(why)) if sasl.server_required => {
                return Err(protocol_error(why));
            }
            Some(ServerOutcome::Failed(why)) => return Ok(Admitted::FailedButKept(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn sasl(password: &str) -> QuorumSasl {
        QuorumSasl {
            learner_required: true,
            server_required: true,
            learner: Some(("zk".into(), password.into())),
            users: BTreeMap::from([("zk".to_string(), "pw".to_string())]),
            jaas: "jaas.conf".into(),
        }
    }

    #[tokio::test]
    async fn a_learner_and_a_server_meet_over_a_socket_and_leave_what_follows() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let server = tokio::spawn(async move {
            let mut buffered = Vec::new();
            let r = authenticate_server(&mut b, &mut buffered, &sasl("pw")).await;
            let mut rest = [0u8; 5];
            let n = buffered.len();
            rest[..n].copy_from_slice(&buffered);
            b.read_exact(&mut rest[n..]).await.unwrap();
            (r.unwrap(), rest)
        });
        authenticate_learner(&mut a, &sasl("pw")).await.unwrap();
        a.write_all(b"after").await.unwrap();
        let (admitted, rest) = server.await.unwrap();
        assert_eq!(admitted, Admitted::User("zk".into()));
        assert_eq!(&rest, b"after");
    }

    #[tokio::test]
    async fn a_wrong_password_is_refused_on_both_sides() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let server =
            tokio::spawn(
                async move { authenticate_server(&mut b, &mut Vec::new(), &sasl("pw")).await },
            );
        let e = authenticate_learner(&mut a, &sasl("bad"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let e = server.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("wrong password"), "{e}");
    }

    #[tokio::test]
    async fn a_learner_that_does_not_authenticate_passes_only_when_not_required() {
        let mut lax = sasl("pw");
        lax.server_required = false;
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(&[0, 0, 0, 40, 1, 2, 3, 4, 5]).await.unwrap();
        let mut buffered = Vec::new();
        let r = authenticate_server(&mut b, &mut buffered, &lax)
            .await
            .unwrap();
        assert_eq!(r, Admitted::Unauthenticated);
        assert_eq!(buffered, [0, 0, 0, 40, 1, 2, 3, 4], "the peeked bytes stay");
        let mut buffered = vec![0, 0, 0, 40, 0, 0, 0, 0];
        let e = authenticate_server(&mut b, &mut buffered, &sasl("pw"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not trying to authenticate"), "{e}");
    }
}
