//! Quorum TLS (`sslQuorum=true`, `portUnification=true`): the key and trust stores and TLS
//! options read from Java's own properties (`ssl.quorum.*` in zoo.cfg, or
//! `-Dzookeeper.ssl.quorum.*` in JVMFLAGS/SERVER_JVMFLAGS), and the one way every command wraps
//! a TCP connection to an election or quorum port in rustls.
//!
//! What Java 3.8/3.9 does, from `X509Util`, `SSLContextAndOptions`, `ZKTrustManager` and
//! `UnifiedServerSocket` (docs/tls.md): TLSv1.2 only unless `ssl.quorum.protocol` or
//! `ssl.quorum.enabledProtocols` say otherwise; client certificates required (`clientAuth`
//! NEED); hostname verification on in both directions (a server checks its client's
//! certificate against the client's IP address too); store type from `.type` or the file's
//! extension (`.jks`, `.pem`, `.p12`, `.bcfks`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::deadline::Deadline;
use crate::zoocfg::ZooCfg;

/// The prefix of Java's quorum TLS system properties (`QuorumX509Util.getConfigPrefix`);
/// in zoo.cfg the keys are written without `zookeeper.`.
const JAVA_PREFIX: &str = "zookeeper.ssl.quorum.";
/// Java's `X509Util.DEFAULT_PROTOCOL`.
const DEFAULT_PROTOCOL: &str = "TLSv1.2";
/// Java 9+'s default cipher suites (`X509Util.DEFAULT_CIPHERS_JAVA9`); rustls has the GCM ones
/// and none of the CBC ones.
const JAVA_DEFAULT_CIPHERS: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];
/// The first byte of a TLS handshake record: what a port-unified listener tells TLS from
/// plaintext by (a plaintext election connection starts with 0xff or a sid's high byte, a
/// quorum connection with a packet length's high byte).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Quorum TLS as configured: connectors for both directions.
pub struct QuorumTls {
    client: Arc<rustls::ClientConfig>,
    server: Arc<rustls::ServerConfig>,
    /// Peers' reverse-DNS names, for certificates that name hosts rather than addresses.
    names: Arc<ReverseNames>,
    /// `ssl.quorum.hostnameVerification`.
    hostname_verification: bool,
    /// `ssl.quorum.hostnameVerification`: also check a client's certificate against the
    /// address it connects from, as Java's `ZKTrustManager.checkClientTrusted` does.
    verify_client_address: bool,
    /// `sslQuorum`: connect with TLS (else plaintext; only `portUnification` was set).
    pub connect_with_tls: bool,
    /// `portUnification`: accept plaintext connections too.
    pub accept_plaintext: bool,
}

impl std::fmt::Debug for QuorumTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumTls")
            .field("connect_with_tls", &self.connect_with_tls)
            .field("accept_plaintext", &self.accept_plaintext)
            .field("verify_client_address", &self.verify_client_address)
            .finish_non_exhaustive()
    }
}

/// `ssl.quorum.clientAuth`, as Java's `X509Util.ClientAuth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    None,
    Want,
    Need,
}

/// Java's `Boolean.parseBoolean`.
fn java_bool(v: &str) -> bool {
    v.eq_ignore_ascii_case("true")
}

/// A store's file type, as Java's `KeyStoreFileType.fromPropertyValueOrFileName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    Pem,
    Pkcs12,
}

/// Looks up a Java property by its name without the prefix.
type Lookup<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// The options that build a [`QuorumTls`], by their Java property names without the prefix
/// (`keyStore.location`, `protocol`, ...).
pub struct TlsOptions<'a> {
    lookup: Lookup<'a>,
    /// How a key is written in errors (`ssl.quorum.` for zoo.cfg).
    shown_prefix: &'static str,
}

impl<'a> TlsOptions<'a> {
    /// Java's properties as a server with this zoo.cfg sees them.
    pub fn from_zoocfg(cfg: &'a ZooCfg) -> Self {
        TlsOptions {
            lookup: Box::new(move |k| cfg.java_property(&format!("{JAVA_PREFIX}{k}"))),
            shown_prefix: "ssl.quorum.",
        }
    }

    fn get(&self, key: &str) -> Option<String> {
        (self.lookup)(key)
    }

    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.shown_prefix)
    }

    /// `X509Util.getPasswordFromConfigPropertyOrFile`: `.passwordPath`, when set, wins over
    /// `.password`; the file's content less one trailing newline (`SecretUtils.readSecret`).
    fn password(&self, store: &str) -> Result<String, String> {
        let path_key = format!("{store}.passwordPath");
        match self.get(&path_key).filter(|p| !p.is_empty()) {
            Some(path) => std::fs::read_to_string(&path)
                .map(|s| s.strip_suffix('\n').unwrap_or(&s).to_string())
                .map_err(|e| format!("{}={path}: {e}", self.name(&path_key))),
            None => Ok(self.get(&format!("{store}.password")).unwrap_or_default()),
        }
    }

    fn store_type(&self, store: &str, location: &str) -> Result<StoreType, String> {
        let key = self.name(&format!("{store}.type"));
        let convert = |what: &str| {
            format!(
                "{what}: zkfle reads PEM and PKCS12 stores only; convert with `keytool -importkeystore -srckeystore {location} -destkeystore {}.p12 -deststoretype PKCS12` and point {} at it",
                Path::new(location)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "store".into()),
                self.name(&format!("{store}.location"))
            )
        };
        match self.get(&format!("{store}.type")).filter(|t| !t.is_empty()) {
            Some(t) => match t.to_ascii_uppercase().as_str() {
                "PEM" => Ok(StoreType::Pem),
                "PKCS12" => Ok(StoreType::Pkcs12),
                "JKS" | "BCFKS" => Err(convert(&format!("{key}={t}"))),
                _ => Err(format!(
                    "{key}={t}: not a store type Java knows (JKS, PEM, PKCS12, BCFKS)"
                )),
            },
            None => match Path::new(location).extension().and_then(|e| e.to_str()) {
                Some("pem") => Ok(StoreType::Pem),
                Some("p12") => Ok(StoreType::Pkcs12),
                Some("jks") | Some("bcfks") => Err(convert(&format!(
                    "{}={location}",
                    self.name(&format!("{store}.location"))
                ))),
                _ => Err(format!(
                    "{}={location}: cannot tell the store type from the file name (Java knows .jks, .pem, .p12, .bcfks); set {key}",
                    self.name(&format!("{store}.location"))
                )),
            },
        }
    }
}

/// The private key and certificate chain of a key store.
fn load_key_store(
    path: &Path,
    kind: StoreType,
    password: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    use rustls::pki_types::pem::PemObject;
    let data = read_store(path)?;
    match kind {
        StoreType::Pem => {
            if data
                .windows(b"ENCRYPTED PRIVATE KEY".len())
                .any(|w| w == b"ENCRYPTED PRIVATE KEY")
            {
                return Err("an encrypted PEM private key: zkfle reads unencrypted PEM keys only; use a PKCS12 store (`openssl pkcs12 -export`) or decrypt the key (`openssl pkcs8 -topk8 -nocrypt`)".into());
            }
            let certs = CertificateDer::pem_slice_iter(&data)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("PEM certificates: {e}"))?;
            if certs.is_empty() {
                return Err("no CERTIFICATE in the PEM key store".into());
            }
            let key = PrivateKeyDer::from_pem_slice(&data)
                .map_err(|e| format!("PEM private key: {e}"))?;
            Ok((certs, key))
        }
        StoreType::Pkcs12 => {
            let ks = p12_keystore::KeyStore::from_pkcs12(
                &data,
                password,
                p12_keystore::Pkcs12ImportPolicy::Strict,
            )
            .map_err(|e| format!("PKCS12: {e} (wrong password?)"))?;
            let (_, chain) = ks
                .private_key_chain()
                .ok_or("no private key with its certificate in the PKCS12 key store")?;
            let certs = chain
                .certs()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            let key = PrivateKeyDer::try_from(chain.key().as_der().to_vec())
                .map_err(|e| format!("PKCS12 private key: {e}"))?;
            Ok((certs, key))
        }
    }
}

/// The trusted certificates of a trust store.
fn load_trust_store(
    path: &Path,
    kind: StoreType,
    password: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let data = read_store(path)?;
    let certs: Vec<CertificateDer<'static>> = match kind {
        StoreType::Pem => CertificateDer::pem_slice_iter(&data)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("PEM certificates: {e}"))?,
        StoreType::Pkcs12 => {
            let ks = p12_keystore::KeyStore::from_pkcs12(
                &data,
                password,
                p12_keystore::Pkcs12ImportPolicy::Strict,
            )
            .map_err(|e| format!("PKCS12: {e} (wrong password?)"))?;
            ks.entries()
                .filter_map(|(_, e)| match e {
                    p12_keystore::KeyStoreEntry::Certificate(c) => {
                        Some(CertificateDer::from(c.as_der().to_vec()))
                    }
                    _ => None,
                })
                .collect()
        }
    };
    if certs.is_empty() {
        return Err(match kind {
            StoreType::Pem => "no CERTIFICATE in the PEM trust store".into(),
            StoreType::Pkcs12 => "no trusted certificate entry in the PKCS12 trust store (Java, and zkfle, trust only entries keytool -importcert made; openssl pkcs12 -export makes none)".into(),
        });
    }
    Ok(certs)
}

/// Stores are small: refuse anything past 4 MiB rather than read it whole.
const MAX_STORE_BYTES: u64 = 4 << 20;

fn read_store(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_STORE_BYTES {
        return Err(format!(
            "{} bytes; a key or trust store has at most {MAX_STORE_BYTES}",
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

impl QuorumTls {
    /// The quorum TLS a Java server with this zoo.cfg would use: `None` when neither
    /// `sslQuorum` nor `portUnification` is true. Errors name the key.
    pub fn from_zoocfg(cfg: &ZooCfg) -> Result<Option<Arc<QuorumTls>>, String> {
        let flag = |k: &str| cfg.other.get(k).is_some_and(|v| java_bool(v));
        let (ssl, unified) = (flag("sslQuorum"), flag("portUnification"));
        if !ssl && !unified {
            return Ok(None);
        }
        QuorumTls::build(&TlsOptions::from_zoocfg(cfg), ssl, unified).map(|t| Some(Arc::new(t)))
    }

    /// Builds the connectors. `connect_with_tls` is `sslQuorum`, `accept_plaintext`
    /// `portUnification`.
    pub fn build(
        opts: &TlsOptions<'_>,
        connect_with_tls: bool,
        accept_plaintext: bool,
    ) -> Result<QuorumTls, String> {
        let location = |store: &str| {
            opts.get(&format!("{store}.location"))
                .filter(|l| !l.is_empty())
                .ok_or_else(|| {
                    format!(
                        "{} is not set: quorum TLS needs a key store and a trust store",
                        opts.name(&format!("{store}.location"))
                    )
                })
        };
        let key_path = location("keyStore")?;
        let key_kind = opts.store_type("keyStore", &key_path)?;
        let (chain, key) =
            load_key_store(Path::new(&key_path), key_kind, &opts.password("keyStore")?)
                .map_err(|e| format!("{}={key_path}: {e}", opts.name("keyStore.location")))?;
        let trust_path = location("trustStore")?;
        let trust_kind = opts.store_type("trustStore", &trust_path)?;
        let trusted = load_trust_store(
            Path::new(&trust_path),
            trust_kind,
            &opts.password("trustStore")?,
        )
        .map_err(|e| format!("{}={trust_path}: {e}", opts.name("trustStore.location")))?;
        let mut roots = RootCertStore::empty();
        for c in trusted {
            roots.add(c).map_err(|e| {
                format!(
                    "{}={trust_path}: a certificate rustls cannot use: {e}",
                    opts.name("trustStore.location")
                )
            })?;
        }
        let roots = Arc::new(roots);

        let hostname_verification = opts
            .get("hostnameVerification")
            .is_none_or(|v| java_bool(v.trim()));
        let client_auth = match opts.get("clientAuth").filter(|v| !v.is_empty()) {
            None => ClientAuth::Need,
            Some(v) => match v.to_ascii_uppercase().as_str() {
                "NONE" => ClientAuth::None,
                "WANT" => ClientAuth::Want,
                "NEED" => ClientAuth::Need,
                _ => {
                    return Err(format!(
                        "{}={v}: not NONE, WANT or NEED",
                        opts.name("clientAuth")
                    ));
                }
            },
        };
        let versions = protocol_versions(opts)?;
        let provider = Arc::new(cipher_suites(opts)?);

        let names = Arc::new(ReverseNames::default());
        let server_verifier = Arc::new(QuorumServerVerifier {
            names: names.clone(),
            inner: rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots.clone(),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("{}: {e}", opts.name("trustStore.location")))?,
            hostname_verification,
        });
        let client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("{}: {e}", opts.name("protocol")))?
            .dangerous()
            .with_custom_certificate_verifier(server_verifier)
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("{}={key_path}: {e}", opts.name("keyStore.location")))?;

        let server_builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("{}: {e}", opts.name("protocol")))?;
        let server_builder = match client_auth {
            ClientAuth::None => server_builder.with_no_client_auth(),
            ClientAuth::Want | ClientAuth::Need => {
                let mut b = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots.clone(),
                    provider.clone(),
                );
                if client_auth == ClientAuth::Want {
                    b = b.allow_unauthenticated();
                }
                server_builder.with_client_cert_verifier(
                    b.build()
                        .map_err(|e| format!("{}: {e}", opts.name("trustStore.location")))?,
                )
            }
        };
        let server = server_builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("{}={key_path}: {e}", opts.name("keyStore.location")))?;
        Ok(QuorumTls {
            client: Arc::new(client),
            server: Arc::new(server),
            names,
            hostname_verification,
            verify_client_address: hostname_verification && client_auth != ClientAuth::None,
            connect_with_tls,
            accept_plaintext,
        })
    }

    /// Wraps an outgoing connection to `peer`: TLS when `sslQuorum` is on, the server's
    /// certificate checked against the address connected to.
    pub async fn connect(&self, tcp: TcpStream, peer: SocketAddr) -> io::Result<QuorumStream> {
        if !self.connect_with_tls {
            return Ok(QuorumStream::Plain(tcp));
        }
        if self.hostname_verification {
            // Looked up before the handshake, whose certificate check cannot wait for it.
            self.names.lookup(peer.ip()).await;
        }
        let connector = tokio_rustls::TlsConnector::from(self.client.clone());
        let name = ServerName::IpAddress(peer.ip().into());
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| explain(e, "server"))?;
        Ok(QuorumStream::Tls(Box::new(tls.into())))
    }

    /// Wraps an accepted connection from `peer`: TLS, or plaintext too under
    /// `portUnification` (told apart by the first byte, as Java's `UnifiedServerSocket`).
    pub async fn accept(&self, tcp: TcpStream, peer: SocketAddr) -> io::Result<QuorumStream> {
        if self.accept_plaintext {
            let mut first = [0u8; 1];
            let n = tcp.peek(&mut first).await?;
            if n == 0 || first[0] != TLS_HANDSHAKE_RECORD {
                return Ok(QuorumStream::Plain(tcp));
            }
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(self.server.clone());
        let tls = acceptor
            .accept(tcp)
            .await
            .map_err(|e| explain(e, "client"))?;
        if self.verify_client_address
            && let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first())
        {
            let by_name = match check_address(cert, peer.ip()) {
                Ok(()) => Ok(()),
                Err(e) => match self.names.lookup(peer.ip()).await {
                    Some(host) => check_host(cert, &host).map_err(|_| e),
                    None => Err(e),
                },
            };
            by_name.map_err(|e| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the client's certificate is not valid for its address {} ({e}; Java's ssl.quorum.hostnameVerification, on by default, checks it too)",
                        peer.ip()
                    ),
                )
            })?;
        }
        Ok(QuorumStream::Tls(Box::new(tls.into())))
    }
}

/// A failed handshake, said so that an operator knows which side's store to look at.
fn explain(e: io::Error, other_side: &str) -> io::Error {
    let text = e.to_string();
    let hint = if text.contains("UnknownIssuer") {
        format!(": the {other_side}'s certificate is not signed by a CA in ssl.quorum.trustStore")
    } else if text.contains("NotValidForName") {
        format!(
            ": the {other_side}'s certificate does not name the address connected to (ssl.quorum.hostnameVerification)"
        )
    } else if text.contains("alert") {
        format!(
            ": the {other_side} refused the handshake (is zkfle's certificate signed by a CA in the {other_side}'s trust store, and valid for the address zkfle connects from? Java 3.8 logs only \"Exception reading or writing challenge\")"
        )
    } else {
        String::new()
    };
    io::Error::new(e.kind(), format!("TLS handshake: {text}{hint}"))
}

/// Whether `cert` names `ip` (an IP address SAN), as `ZKHostnameVerifier` checks a host
/// address first.
fn check_address(cert: &CertificateDer<'_>, ip: IpAddr) -> Result<(), String> {
    let ee = webpki::EndEntityCert::try_from(cert).map_err(|e| format!("{e:?}"))?;
    ee.verify_is_valid_for_subject_name(&ServerName::IpAddress(ip.into()))
        .map_err(|e| format!("{e:?}"))
}

/// Whether `cert` names the host `host`.
fn check_host(cert: &CertificateDer<'_>, host: &str) -> Result<(), String> {
    let ee = webpki::EndEntityCert::try_from(cert).map_err(|e| format!("{e:?}"))?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| format!("{e:?}"))?;
    ee.verify_is_valid_for_subject_name(&name)
        .map_err(|e| format!("{e:?}"))
}

/// Peers' reverse-DNS names, as Java's `ZKTrustManager` falls back to them: a certificate
/// that does not name the peer's address is checked against the name its address resolves
/// to (`InetAddress.getHostName`). Bounded; a failed lookup is remembered too.
#[derive(Debug, Default)]
struct ReverseNames(std::sync::Mutex<std::collections::HashMap<IpAddr, Option<String>>>);

/// Entries kept before the cache starts afresh.
const MAX_REVERSE_NAMES: usize = 1024;
/// A lookup that takes longer counts as failed (it goes on in the background).
const REVERSE_LOOKUP_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

impl ReverseNames {
    fn cached(&self, ip: IpAddr) -> Option<Option<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&ip)
            .cloned()
    }

    fn remember(&self, ip: IpAddr, name: Option<String>) {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.len() >= MAX_REVERSE_NAMES {
            m.clear();
        }
        m.insert(ip, name);
    }

    /// The name `ip` resolves to, looked up off the runtime's threads, at most once per
    /// address.
    async fn lookup(&self, ip: IpAddr) -> Option<String> {
        if let Some(known) = self.cached(ip) {
            return known;
        }
        let found = tokio::time::timeout(
            REVERSE_LOOKUP_LIMIT,
            tokio::task::spawn_blocking(move || reverse_name(ip)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
        self.remember(ip, found.clone());
        found
    }

    /// [`ReverseNames::lookup`], blocking.
    fn lookup_blocking(&self, ip: IpAddr) -> Option<String> {
        if let Some(known) = self.cached(ip) {
            return known;
        }
        let found = reverse_name(ip);
        self.remember(ip, found.clone());
        found
    }
}

/// `ip`'s name by reverse DNS (or the hosts file); `None` when it has none.
fn reverse_name(ip: IpAddr) -> Option<String> {
    let name = dns_lookup::lookup_addr(&ip).ok()?;
    // getnameinfo answers with the address itself when there is no name.
    (name.parse::<IpAddr>().is_err()).then_some(name)
}

/// rustls's protocol versions for `ssl.quorum.enabledProtocols`, else `ssl.quorum.protocol`
/// (Java's default: TLSv1.2 alone).
fn protocol_versions(
    opts: &TlsOptions<'_>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let (key, list) = match opts.get("enabledProtocols") {
        Some(v) => ("enabledProtocols", v),
        None => (
            "protocol",
            opts.get("protocol")
                .unwrap_or_else(|| DEFAULT_PROTOCOL.to_string()),
        ),
    };
    let mut versions = Vec::new();
    for p in list.split(',') {
        let v: &[&'static rustls::SupportedProtocolVersion] = match p.trim() {
            "TLSv1.2" => &[&rustls::version::TLS12],
            "TLSv1.3" => &[&rustls::version::TLS13],
            "TLS" => &[&rustls::version::TLS13, &rustls::version::TLS12],
            other => {
                return Err(format!(
                    "{}={list}: zkfle speaks TLSv1.2 and TLSv1.3 only, not {other:?}",
                    opts.name(key)
                ));
            }
        };
        for x in v {
            if !versions.contains(x) {
                versions.push(*x);
            }
        }
    }
    Ok(versions)
}

/// The ring provider with the cipher suites `ssl.quorum.ciphersuites` names (Java's names are
/// the IANA names rustls uses), else Java's defaults that rustls has, plus TLS 1.3's.
fn cipher_suites(opts: &TlsOptions<'_>) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let configured = opts.get("ciphersuites");
    let wanted: Vec<String> = match &configured {
        Some(v) => v.split(',').map(|s| s.trim().to_string()).collect(),
        None => JAVA_DEFAULT_CIPHERS.iter().map(|s| s.to_string()).collect(),
    };
    provider.cipher_suites.retain(|s| {
        let name = s.suite().as_str().unwrap_or("");
        wanted.iter().any(|w| w == name)
            || (configured.is_none() && s.version() == &rustls::version::TLS13)
    });
    if provider.cipher_suites.is_empty() {
        return Err(format!(
            "{}={}: none of these cipher suites is one zkfle has (TLS_ECDHE_{{RSA,ECDSA}}_WITH_AES_{{128,256}}_GCM_*, *_CHACHA20_POLY1305_SHA256, TLS_AES_*)",
            opts.name("ciphersuites"),
            configured.unwrap_or_default()
        ));
    }
    Ok(provider)
}

/// rustls's web PKI check of a server's certificate, with the address check skipped when
/// `ssl.quorum.hostnameVerification=false`.
#[derive(Debug)]
struct QuorumServerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    hostname_verification: bool,
    /// Filled before each handshake (`QuorumTls::connect`).
    names: Arc<ReverseNames>,
}

impl ServerCertVerifier for QuorumServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.hostname_verification => Ok(ServerCertVerified::assertion()),
            // As Java: failing the address, the name the address resolves to.
            Err(
                e @ rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ),
            ) => match server_name {
                ServerName::IpAddress(ip) => match self.names.cached(IpAddr::from(*ip)).flatten() {
                    Some(host) if check_host(end_entity, &host).is_ok() => {
                        Ok(ServerCertVerified::assertion())
                    }
                    _ => Err(e),
                },
                _ => Err(e),
            },
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A connection to an election or quorum port: plaintext or TLS.
pub enum QuorumStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl QuorumStream {
    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        matches!(self, QuorumStream::Tls(_))
    }
}

impl AsyncRead for QuorumStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            QuorumStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for QuorumStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            QuorumStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            QuorumStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumStream::Plain(s) => Pin::new(s).poll_flush(cx),
            QuorumStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            QuorumStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl QuorumStream {
    /// Splits into halves a reader and a writer task own: a plaintext stream as
    /// `TcpStream::into_split` (no lock between them), a TLS one with `tokio::io::split`
    /// (one rustls session, so the halves share a lock).
    pub fn into_split(self) -> (QuorumReadHalf, QuorumWriteHalf) {
        match self {
            QuorumStream::Plain(s) => {
                let (r, w) = s.into_split();
                (QuorumReadHalf::Plain(r), QuorumWriteHalf::Plain(w))
            }
            tls => {
                let (r, w) = tokio::io::split(tls);
                (QuorumReadHalf::Tls(r), QuorumWriteHalf::Tls(w))
            }
        }
    }
}

/// The read half of a [`QuorumStream`].
pub enum QuorumReadHalf {
    Plain(tokio::net::tcp::OwnedReadHalf),
    Tls(tokio::io::ReadHalf<QuorumStream>),
}

/// The write half of a [`QuorumStream`].
pub enum QuorumWriteHalf {
    Plain(tokio::net::tcp::OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<QuorumStream>),
}

impl AsyncRead for QuorumReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumReadHalf::Plain(s) => Pin::new(s).poll_read(cx, buf),
            QuorumReadHalf::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for QuorumWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            QuorumWriteHalf::Plain(s) => Pin::new(s).poll_write(cx, buf),
            QuorumWriteHalf::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumWriteHalf::Plain(s) => Pin::new(s).poll_flush(cx),
            QuorumWriteHalf::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            QuorumWriteHalf::Plain(s) => Pin::new(s).poll_shutdown(cx),
            QuorumWriteHalf::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Connects the way the ensemble speaks: plaintext without quorum TLS.
pub async fn wrap_outgoing(
    tls: Option<&QuorumTls>,
    tcp: TcpStream,
    peer: SocketAddr,
) -> io::Result<QuorumStream> {
    match tls {
        Some(t) => t.connect(tcp, peer).await,
        None => Ok(QuorumStream::Plain(tcp)),
    }
}

/// Accepts the way the ensemble speaks: plaintext without quorum TLS.
pub async fn wrap_incoming(
    tls: Option<&QuorumTls>,
    tcp: TcpStream,
    peer: SocketAddr,
) -> io::Result<QuorumStream> {
    match tls {
        Some(t) => t.accept(tcp, peer).await,
        None => Ok(QuorumStream::Plain(tcp)),
    }
}

/// A blocking connection to an election port (`probe`, `doctor`, `repro`, `replay`):
/// plaintext or TLS.
pub enum BlockingQuorumStream {
    Plain(std::net::TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TimedTcp>>),
}

impl BlockingQuorumStream {
    /// The TCP socket beneath (timeouts, addresses, shutdown).
    pub fn tcp(&self) -> &std::net::TcpStream {
        match self {
            BlockingQuorumStream::Plain(s) => s,
            BlockingQuorumStream::Tls(s) => &s.get_ref().tcp,
        }
    }
}

/// Runs one call on a TLS stream within the socket's timeout as a whole (its read timeout for
/// a read, its write timeout for a write, as the caller set them), as one call on a plain
/// socket is: rustls reads until a record is complete, and a peer trickling it a byte at a
/// time would otherwise stretch the call a timeout per byte. The socket's timeouts are as they
/// were afterwards.
fn within_timeout<T>(
    s: &mut rustls::StreamOwned<rustls::ClientConnection, TimedTcp>,
    reading: bool,
    call: impl FnOnce(&mut rustls::StreamOwned<rustls::ClientConnection, TimedTcp>) -> io::Result<T>,
) -> io::Result<T> {
    let saved = s.get_mut().begin(reading)?;
    let result = call(s);
    s.get_mut().end(saved)?;
    result
}

impl io::Read for BlockingQuorumStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlockingQuorumStream::Plain(s) => s.read(buf),
            BlockingQuorumStream::Tls(s) => within_timeout(s, true, |s| s.read(buf)),
        }
    }
}

impl io::Write for BlockingQuorumStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BlockingQuorumStream::Plain(s) => s.write(buf),
            // Each write goes out whole: callers write a message and then wait for an answer.
            BlockingQuorumStream::Tls(s) => within_timeout(s, false, |s| {
                let n = s.write(buf)?;
                s.flush()?;
                Ok(n)
            }),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            BlockingQuorumStream::Plain(s) => s.flush(),
            BlockingQuorumStream::Tls(s) => within_timeout(s, false, |s| s.flush()),
        }
    }
}

/// The socket beneath a blocking TLS stream: while a deadline is set, every read and write
/// ends by it (rustls's `complete_io` loops over reads itself until a handshake or a record is
/// done, so a bound per read is no bound on the whole).
pub struct TimedTcp {
    tcp: std::net::TcpStream,
    deadline: Option<Deadline>,
}

/// A socket's read and write timeouts, as its caller set them.
type Timeouts = (Option<std::time::Duration>, Option<std::time::Duration>);

impl TimedTcp {
    /// Sets the deadline from the socket's read timeout (`reading`) or write timeout; returns
    /// both, for [`TimedTcp::end`].
    fn begin(&mut self, reading: bool) -> io::Result<Timeouts> {
        let saved = (self.tcp.read_timeout()?, self.tcp.write_timeout()?);
        let limit = if reading { saved.0 } else { saved.1 };
        self.deadline = limit
            .map(|l| Deadline::after(l, "the server did not finish its TLS record or handshake"));
        Ok(saved)
    }

    /// Clears the deadline and gives the socket back its timeouts.
    fn end(&mut self, (read, write): Timeouts) -> io::Result<()> {
        self.deadline = None;
        self.tcp.set_read_timeout(read)?;
        self.tcp.set_write_timeout(write)
    }

    /// Sets the socket's timeouts to what is left of the deadline, if one is set.
    fn arm(&mut self) -> io::Result<()> {
        match &self.deadline {
            Some(d) => d.arm(&self.tcp),
            None => Ok(()),
        }
    }
}

impl io::Read for TimedTcp {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        io::Read::read(&mut self.tcp, buf)
    }
}

impl io::Write for TimedTcp {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        io::Write::write(&mut self.tcp, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::Write::flush(&mut self.tcp)
    }
}

/// Connects the way the ensemble speaks, blocking: the TLS handshake is completed here so that
/// a refused certificate is reported as such. The socket's read timeout, as the caller set it,
/// bounds the whole handshake (a server trickling its records a byte at a time would otherwise
/// stretch it a read timeout per byte); the socket's timeouts are as they were afterwards.
pub fn wrap_outgoing_blocking(
    tls: Option<&QuorumTls>,
    tcp: std::net::TcpStream,
    peer: SocketAddr,
) -> io::Result<BlockingQuorumStream> {
    let Some(t) = tls.filter(|t| t.connect_with_tls) else {
        return Ok(BlockingQuorumStream::Plain(tcp));
    };
    if t.hostname_verification {
        t.names.lookup_blocking(peer.ip());
    }
    let name = ServerName::IpAddress(peer.ip().into());
    let mut conn = rustls::ClientConnection::new(t.client.clone(), name)
        .map_err(|e| explain(io::Error::other(e), "server"))?;
    let mut timed = TimedTcp {
        tcp,
        deadline: None,
    };
    let saved = timed.begin(true)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut timed)
            .map_err(|e| explain(e, "server"))?;
    }
    timed.end(saved)?;
    Ok(BlockingQuorumStream::Tls(Box::new(
        rustls::StreamOwned::new(conn, timed),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> ZooCfg {
        let mut c = ZooCfg::default();
        for (k, v) in pairs {
            c.other.insert(k.to_string(), v.to_string());
        }
        c
    }

    #[test]
    fn off_unless_asked_and_missing_stores_are_named() {
        assert!(
            QuorumTls::from_zoocfg(&cfg(&[("sslQuorum", "false")]))
                .unwrap()
                .is_none()
        );
        for key in ["sslQuorum", "portUnification"] {
            let e = QuorumTls::from_zoocfg(&cfg(&[(key, "TRUE")])).unwrap_err();
            assert!(
                e.starts_with("ssl.quorum.keyStore.location is not set"),
                "{e}"
            );
        }
    }

    #[test]
    fn store_types_as_java_tells_them() {
        let c = cfg(&[("ssl.quorum.trustStore.type", "pkcs12")]);
        let o = TlsOptions::from_zoocfg(&c);
        assert_eq!(o.store_type("keyStore", "a.pem"), Ok(StoreType::Pem));
        assert_eq!(o.store_type("keyStore", "a.p12"), Ok(StoreType::Pkcs12));
        assert_eq!(o.store_type("trustStore", "a.pem"), Ok(StoreType::Pkcs12));
        let e = o.store_type("keyStore", "/etc/zk/a.jks").unwrap_err();
        assert!(e.contains("keytool -importkeystore -srckeystore /etc/zk/a.jks -destkeystore a.p12 -deststoretype PKCS12"), "{e}");
        let e = o.store_type("keyStore", "a.pfx").unwrap_err();
        assert!(e.contains("set ssl.quorum.keyStore.type"), "{e}");
    }

    #[test]
    fn protocols_and_ciphers_as_java_reads_them() {
        let v = |pairs: &[(&str, &str)]| protocol_versions(&TlsOptions::from_zoocfg(&cfg(pairs)));
        assert_eq!(v(&[]).unwrap(), vec![&rustls::version::TLS12]);
        assert_eq!(
            v(&[
                ("ssl.quorum.protocol", "TLSv1.3"),
                ("ssl.quorum.enabledProtocols", "TLSv1.2,TLSv1.3")
            ])
            .unwrap(),
            vec![&rustls::version::TLS12, &rustls::version::TLS13]
        );
        assert!(
            v(&[("ssl.quorum.protocol", "TLSv1.1")])
                .unwrap_err()
                .contains("ssl.quorum.protocol=TLSv1.1")
        );
        let c = cfg(&[]);
        let p = cipher_suites(&TlsOptions::from_zoocfg(&c)).unwrap();
        assert!(
            p.cipher_suites
                .iter()
                .any(|s| s.suite().as_str() == Some("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"))
        );
        assert!(
            !p.cipher_suites
                .iter()
                .any(|s| s.suite().as_str() == Some("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"))
        );
        let c = cfg(&[(
            "ssl.quorum.ciphersuites",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        )]);
        let e = cipher_suites(&TlsOptions::from_zoocfg(&c)).unwrap_err();
        assert!(
            e.starts_with("ssl.quorum.ciphersuites=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: none"),
            "{e}"
        );
    }
}
