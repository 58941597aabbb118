//! `zkfle join`: take part in a real ensemble's leader election as a native voter.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::election::{ElectionConfig, QuorumVerifier};
use crate::net::dialect::JavaRelease;
use crate::net::{NetConfig, NodeConfig, StateEvent, WireDialect};
use crate::wire::{ElectionAddress, QuorumConfig};
use crate::zoocfg::ZooCfg;

/// How `--events` writes state changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EventFormat {
    /// One JSON object a line.
    Jsonl,
}

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The zoo.cfg a Java server of the ensemble would use.
    #[arg(long, value_name = "ZOO_CFG")]
    pub config: PathBuf,
    /// The JAAS file with the quorum SASL sections (`QuorumServer`, `QuorumLearner`), when
    /// the config says `quorum.auth.enableSasl=true` (default: `-Djava.security.auth.login.config=`
    /// in SERVER_JVMFLAGS or JVMFLAGS, as Java reads it). docs/sasl.md.
    #[arg(long, value_name = "JAAS_FILE")]
    pub jaas: Option<PathBuf>,
    /// My server id (default: the number in dataDir/myid).
    #[arg(long)]
    pub myid: Option<i64>,
    /// The data directory: `version-2/` holds the txn log, snapshot and epoch files in
    /// ZooKeeper's formats (default: dataDir from the config). My vote carries its current
    /// epoch and last zxid.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Vote with this last zxid (decimal or 0x hex; -1 = untrusted empty database) instead of
    /// the data directory's. Such a vote claims data zkfle does not hold, so zkfle then only
    /// votes: it does not follow the leader on the quorum port (election-only mode).
    #[arg(long, value_parser = parse_i64)]
    pub zxid: Option<i64>,
    /// The peer epoch of that vote (election-only mode, like --zxid) [default: 0].
    #[arg(long = "peer-epoch", value_parser = parse_i64)]
    pub peer_epoch: Option<i64>,
    /// Print the first decision as one JSON object and exit.
    #[arg(long)]
    pub once: bool,
    /// Stream every state change to stdout in this format (`jsonl`: one JSON object a line).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub events: Option<EventFormat>,
    /// Append every state change as a JSON line to this file instead of stdout.
    #[arg(long = "events-file", value_name = "FILE")]
    pub events_file: Option<PathBuf>,
    /// Announce every election address (initial message -65535), as Java does with
    /// zookeeper.multiAddress.enabled=true.
    #[arg(long = "multi-address")]
    pub multi_address: bool,
    /// What to speak: `auto` (3.5+ form; the 3.4 form to each peer seen sending a legacy
    /// initial message or 40-byte notifications), `current` (always 3.5+: V1/V2 initial
    /// message, notifications with config) or `legacy` (always 3.4: the sid alone as initial
    /// message, 40-byte notifications).
    #[arg(long, value_enum, default_value_t = WireDialect::Auto)]
    pub wire: WireDialect,
    /// The Java release to present as, e.g. 3.8.0: the version line of the four-letter words
    /// and the AdminServer, and how the initial message writes zkfle's own address (the
    /// resolved IP up to 3.8.1, the configured host from 3.8.2 on, as each release does).
    /// Default: 3.9.5, or 3.4.14 with `--wire legacy`.
    #[arg(long, value_name = "X.Y.Z")]
    pub release: Option<JavaRelease>,
    /// Accept a member's sid on the election port only from the addresses the config gives
    /// for it (any of them, with multi-address). Java, and zkfle by default, accept any sid
    /// from anyone who can reach the port: anyone there can stand in for a member in the
    /// election. Strict mode stops that, but a member that connects from another address
    /// (NAT, a second interface, a hostname that resolves elsewhere) is refused.
    #[arg(long = "strict-peers")]
    pub strict_peers: bool,
    /// For conformance campaigns only: read faults to inject into this member from FILE,
    /// every 200 ms (crash before an ACK, after NEWLEADER's ACK, dropped or delayed votes, a
    /// slow read of the leader; docs/chaos.md). A missing file is no fault.
    #[arg(long = "chaos-faults", value_name = "FILE")]
    pub chaos_faults: Option<PathBuf>,
    /// The most bytes of proposals a leader's DIFF may carry (they are staged on disk until
    /// NEWLEADER); a larger DIFF ends the sync with an error.
    #[arg(long = "max-diff-bytes", value_name = "BYTES", default_value_t = crate::zab::DEFAULT_MAX_SYNC_BYTES)]
    pub max_diff_bytes: u64,
    /// The most bytes a leader's snapshot (SNAP) may have; a larger one ends the sync with an
    /// error.
    #[arg(long = "max-snapshot-bytes", value_name = "BYTES", default_value_t = crate::zab::DEFAULT_MAX_SYNC_BYTES)]
    pub max_snapshot_bytes: u64,
    /// zookeeper.fastleader.minNotificationInterval (ms).
    #[arg(
        long = "zookeeper.fastleader.minNotificationInterval",
        visible_alias = "min-notification-interval",
        default_value_t = 200
    )]
    pub min_notification_interval: u64,
    /// zookeeper.fastleader.maxNotificationInterval (ms).
    #[arg(
        long = "zookeeper.fastleader.maxNotificationInterval",
        visible_alias = "max-notification-interval",
        default_value_t = 60000
    )]
    pub max_notification_interval: u64,
    /// zookeeper.cnxTimeout: election connect timeout (ms).
    #[arg(
        long = "zookeeper.cnxTimeout",
        visible_alias = "cnx-timeout",
        default_value_t = 5000
    )]
    pub cnx_timeout: u64,
    /// zookeeper.quorumCnxnTimeoutMs: handshake read timeout (ms; default tickTime*syncLimit).
    #[arg(long = "zookeeper.quorumCnxnTimeoutMs")]
    pub quorum_cnxn_timeout: Option<u64>,
    /// Purge the data directory every SECS seconds (zkfle only; overrides zoo.cfg's
    /// autopurge.purgeInterval, which counts hours; 0 = off).
    #[arg(long = "autopurge-every", value_name = "SECS")]
    pub autopurge_every: Option<u64>,
}

/// Snapshot, purge and preallocation settings, read where Java reads them: `snapCount`,
/// `snapSizeLimitInKb` and `preAllocSize` (KiB) as the system properties `zookeeper.*` (from
/// zoo.cfg or -D flags in JVMFLAGS/SERVER_JVMFLAGS), `autopurge.snapRetainCount` (at least 3)
/// and `autopurge.purgeInterval` (hours, 0 = off) from zoo.cfg.
fn snap_config(
    cfg: &ZooCfg,
    autopurge_every: Option<u64>,
) -> Result<(crate::storage::db::SnapConfig, u64), String> {
    use crate::storage::db::{
        DEFAULT_SNAP_COUNT, DEFAULT_SNAP_SIZE_KB, MIN_SNAP_RETAIN, SnapConfig,
    };
    let prop = |name: &str| -> Result<Option<i64>, String> {
        cfg.java_property(name)
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{name}={v:?} is not an integer"))
            })
            .transpose()
    };
    let mut snap_count = prop("zookeeper.snapCount")?.unwrap_or(DEFAULT_SNAP_COUNT);
    if snap_count < 2 {
        tracing::warn!("SnapCount should be 2 or more. Now, snapCount is reset to 2");
        snap_count = 2;
    }
    let snap_kb = prop("zookeeper.snapSizeLimitInKb")?.unwrap_or(DEFAULT_SNAP_SIZE_KB);
    let prealloc = prop("zookeeper.preAllocSize")?
        .map(|kb| kb.max(0) as u64 * 1024)
        .unwrap_or(crate::storage::format::PREALLOC);
    let get = |key: &str| -> Result<Option<i64>, String> {
        cfg.other
            .get(key)
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{key}={v:?} is not an integer"))
            })
            .transpose()
    };
    let mut retain = get("autopurge.snapRetainCount")?.unwrap_or(MIN_SNAP_RETAIN as i64);
    if retain < MIN_SNAP_RETAIN as i64 {
        tracing::warn!(
            "Invalid autopurge.snapRetainCount: {retain}. Defaulting to {MIN_SNAP_RETAIN}"
        );
        retain = MIN_SNAP_RETAIN as i64;
    }
    let hours = get("autopurge.purgeInterval")?.unwrap_or(0);
    let purge_every = match autopurge_every {
        Some(0) => None,
        Some(secs) => Some(Duration::from_secs(secs)),
        None if hours > 0 => Some(Duration::from_secs(hours as u64 * 3600)),
        None => None,
    };
    Ok((
        SnapConfig {
            snap_count,
            snap_size_bytes: snap_kb.saturating_mul(1024),
            retain: retain as usize,
            purge_every,
            config_node: None,
            no_config_node: false,
        },
        prealloc,
    ))
}

/// Everything `join` derives from its arguments and the config file.
pub fn node_config(args: &JoinArgs) -> Result<NodeConfig, CliError> {
    let input = |m: String| CliError::input(format!("join: {m}"));
    let cfg = ZooCfg::read(&args.config).map_err(|e| input(format!("--config {e}")))?;
    let my_id = match args.myid {
        Some(id) => id,
        None => {
            let dir = cfg
                .other
                .get("dataDir")
                .ok_or_else(|| input("no --myid and no dataDir in the config".into()))?;
            let path = args
                .config
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(dir)
                .join("myid");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| input(format!("no --myid and {}: {e}", path.display())))?;
            text.trim().parse().map_err(|_| {
                input(format!(
                    "{}: not a server id: {:?}",
                    path.display(),
                    text.trim()
                ))
            })?
        }
    };
    let tls = crate::net::QuorumTls::from_zoocfg(&cfg)
        .map_err(|m| input(format!("--config {}: {m}", args.config.display())))?;
    let sasl = crate::sasl::QuorumSasl::from_zoocfg(
        &cfg,
        args.jaas.as_deref(),
        crate::sasl::Roles::LearnerAndServer,
    )
    .map_err(|m| {
        input(format!(
            "--config {}: quorum SASL: {m}",
            args.config.display()
        ))
    })?
    .map(Arc::new);
    for key in cfg.other.keys() {
        tracing::debug!("zoo.cfg key {key} ignored by zkfle join");
    }
    let quorum_cfg = QuorumConfig::parse(&cfg.quorum_text())
        .map_err(|e| input(format!("--config {}: {e}", args.config.display())))?;
    let quorum = QuorumVerifier::from_config(&quorum_cfg)
        .map_err(|e| input(format!("--config {}: {e}", args.config.display())))?;
    let me = quorum_cfg.server(my_id).ok_or_else(|| {
        input(format!(
            "server id {my_id} is not a member in {}",
            args.config.display()
        ))
    })?;
    let release = args.release.unwrap_or(if args.wire == WireDialect::Legacy {
        JavaRelease::LEGACY
    } else {
        JavaRelease::CURRENT
    });
    let all_ips = cfg.flag("quorumListenOnAllIPs").unwrap_or(false);
    let mut listen = Vec::new();
    let mut announce: Vec<ElectionAddress> = Vec::new();
    for a in me.addresses.iter().map(|a| a.election()) {
        let sa = resolve(&a)
            .ok_or_else(|| input(format!("my election address {} does not resolve", a.text)))?;
        announce.push(release.announced(&a, Some(sa.ip())));
        listen.push(if all_ips {
            SocketAddr::new(
                if sa.is_ipv4() {
                    std::net::Ipv4Addr::UNSPECIFIED.into()
                } else {
                    std::net::Ipv6Addr::UNSPECIFIED.into()
                },
                sa.port(),
            )
        } else {
            sa
        });
    }
    let peers = quorum_cfg
        .servers()
        .filter(|s| s.id != my_id)
        .map(|s| (s.id, s.addresses.iter().map(|a| a.election()).collect()))
        .collect();
    // Java's defaults: tickTime 3000; initLimit and syncLimit have none, and a distributed
    // config without them is refused (QuorumPeerConfig.checkValidity).
    let limit = |key: &str| match cfg.int(key) {
        Some(v) if v > 0 => Ok(v as u64),
        None | Some(0) => Err(input(format!(
            "--config {}: {key} is not set (Java refuses a config of several servers without it)",
            args.config.display()
        ))),
        Some(v) => Err(input(format!(
            "--config {}: {key}={v}: must be positive",
            args.config.display()
        ))),
    };
    let tick = cfg.int("tickTime").map_or(3000, |t| t.max(1) as u64);
    let init_limit = limit("initLimit")?;
    let sync_limit = limit("syncLimit")?;
    if args.min_notification_interval == 0 || args.max_notification_interval == 0 {
        return Err(input("notification intervals must be > 0".into()));
    }
    let participant = me.role() == crate::wire::Role::Participant;
    let claimed_vote = args.zxid.is_some() || args.peer_epoch.is_some();
    let lower: Vec<String> = quorum_cfg
        .servers()
        .filter(|s| s.id < my_id && s.role() == crate::wire::Role::Participant)
        .map(|s| s.id.to_string())
        .collect();
    if participant && !lower.is_empty() {
        let lower = lower.join(", ");
        tracing::warn!(
            "server id {my_id} is not lower than every other voter's ({lower}): on equal data the election goes to zkfle, which then syncs the ensemble and hands leadership over to a Java server, one extra election round (docs/lead.md); a lower sid avoids that"
        );
    }
    // A participant or observer that votes with its own data follows the leader (Zab) and
    // needs the data directory; a vote with a claimed zxid is election only.
    let config_dir = args.config.parent().unwrap_or(std::path::Path::new("."));
    let data_dir_given = args
        .data_dir
        .clone()
        .or_else(|| cfg.other.get("dataDir").map(|d| config_dir.join(d)));
    // An observer without a data directory only takes part in elections, as before observers
    // could sync.
    let observer_election_only = !participant && data_dir_given.is_none();
    if observer_election_only && !claimed_vote {
        tracing::warn!(
            "server {my_id} is an observer without --data-dir or dataDir: it takes part in the election as one, but does not sync with the leader"
        );
    }
    let zab = if !claimed_vote && !observer_election_only {
        let data_dir = data_dir_given
            .ok_or_else(|| {
                input("no --data-dir and no dataDir in the config: a voter needs a data directory for its txn log".into())
            })?;
        let mut quorum_addrs = std::collections::BTreeMap::new();
        for s in quorum_cfg.servers().filter(|s| s.id != my_id) {
            if let Some(a) = s.addresses.iter().find_map(|a| {
                a.quorum_socket_addr().or_else(|| {
                    use std::net::ToSocketAddrs;
                    (a.host.as_str(), a.quorum_port)
                        .to_socket_addrs()
                        .ok()?
                        .next()
                })
            }) {
                quorum_addrs.insert(s.id, a);
            }
        }
        let my_quorum_addrs: Vec<_> = me
            .addresses
            .iter()
            .filter_map(|a| {
                a.quorum_socket_addr().or_else(|| {
                    use std::net::ToSocketAddrs;
                    (a.host.as_str(), a.quorum_port)
                        .to_socket_addrs()
                        .ok()?
                        .next()
                })
            })
            .collect();
        let (mut snap, prealloc) =
            snap_config(&cfg, args.autopurge_every).map_err(|e| input(format!("--config {e}")))?;
        // A 3.4 tree has no config node; 3.5+ write the quorum config into it at every load.
        if release >= crate::net::dialect::JavaRelease::new(3, 5, 0) {
            snap.config_node = Some((cfg.quorum_text().into_bytes(), quorum_cfg.version() as i64));
        } else {
            snap.no_config_node = true;
        }
        Some(crate::net::ZabConfig {
            data_dir,
            snap,
            prealloc,
            quorum_addrs,
            my_quorum_addrs,
            learner: crate::zab::LearnerConfig {
                my_sid: my_id,
                config_version: quorum_cfg.version() as i64,
                tick_ms: tick,
                init_limit,
                sync_limit,
                max_diff_bytes: args.max_diff_bytes,
                max_snapshot_bytes: args.max_snapshot_bytes,
                known_epoch: 0,
                observer: !participant,
                reconfig: None,
            },
        })
    } else {
        None
    };
    if claimed_vote {
        tracing::warn!(
            "--zxid/--peer-epoch: voting with a claimed zxid and epoch; election only, not following any leader"
        );
    }
    let mut election = ElectionConfig::new(my_id, quorum);
    election.last_zxid = args.zxid.unwrap_or(0);
    election.current_epoch = args.peer_epoch.unwrap_or(0);
    election.role = me.role();
    election.reconfig_enabled = cfg.reconfig_enabled();
    if me.client.is_none()
        && let Some(port) = cfg.int("clientPort").and_then(|p| u16::try_from(p).ok())
    {
        election.static_client = Some((cfg.other.get("clientPortAddress").cloned(), port));
    }
    if cfg.reconfig_enabled() && !cfg.other.contains_key("dynamicConfigFile") {
        // As QuorumPeerConfig.backupOldConfig: the static file is kept as zoo.cfg.bak before
        // the first activation rewrites it.
        cfg.backup_old_config()
            .map_err(|e| input(format!("--config {}: {e}", args.config.display())))?;
    }
    if let Some(next) = &cfg.next
        && cfg.reconfig_enabled()
    {
        tracing::info!(
            "last seen config (not yet activated): version 0x{:x}",
            next.version()
        );
        election.next_quorum = QuorumVerifier::from_config(next).ok();
    }
    election.min_notification_interval_ms = args.min_notification_interval;
    election.max_notification_interval_ms = args
        .max_notification_interval
        .max(args.min_notification_interval);
    let socket_timeout = args
        .quorum_cnxn_timeout
        .filter(|t| *t > 0)
        .unwrap_or(tick * sync_limit);
    let (client_port, admin, metrics) = monitoring_config(
        &cfg,
        me,
        &ClientPortLimits {
            tick,
            init_limit,
            sync_limit,
            data_dir: zab.as_ref().map(|z| z.data_dir.clone()),
            speaks: release,
            membership: cfg.quorum_text(),
        },
    )?;
    Ok(NodeConfig {
        election,
        net: NetConfig {
            my_sid: my_id,
            listen,
            announce,
            multi_address: args.multi_address,
            peers,
            cnx_timeout: Duration::from_millis(args.cnx_timeout),
            socket_timeout: Duration::from_millis(socket_timeout.max(1)),
            dialect: args.wire,
            limits: crate::net::PeerLimits::for_open_files_limit(
                crate::net::manager::open_files_limit(),
            ),
            strict_peers: args.strict_peers,
            tls,
            sasl,
        },
        leader_gone_ms: tick * sync_limit,
        leader_sync_ms: tick * init_limit,
        once: args.once,
        zab,
        reconfig_cfg_path: cfg.reconfig_enabled().then(|| args.config.clone()),
        client_port,
        admin,
        metrics,
        status: Default::default(),
    })
}

/// What the client port's answers need that is not in zoo.cfg itself.
struct ClientPortLimits {
    tick: u64,
    init_limit: u64,
    sync_limit: u64,
    data_dir: Option<std::path::PathBuf>,
    /// The release named in the version line (`--release`).
    speaks: JavaRelease,
    membership: String,
}

/// What monitoring reads a member through: the client port, the AdminServer, the Prometheus
/// endpoint.
type Monitoring = (
    Option<crate::net::client_port::ClientPortConfig>,
    Option<crate::net::admin::AdminConfig>,
    Option<crate::net::metrics::MetricsConfig>,
);

/// The client port, the AdminServer and the Prometheus endpoint, as Java opens them.
///
/// The client port: the address after `;` in the member's server line, else
/// `clientPortAddress`:`clientPort`, else every address at `clientPort`; none when no port is
/// set (Java opens none then either). `secureClientPort` is refused: zkfle has no TLS client
/// port, and monitoring it would read as a dead server.
///
/// The AdminServer: on unless `admin.enableServer=false`, at `admin.serverAddress`
/// (0.0.0.0):`admin.serverPort` (8080) under `admin.commandURL` (`/commands`), each read
/// from zoo.cfg or a `-Dzookeeper.admin.*` flag in JVMFLAGS as Java reads them.
fn monitoring_config(
    cfg: &crate::zoocfg::ZooCfg,
    me: &crate::wire::config::ServerLine,
    l: &ClientPortLimits,
) -> Result<Monitoring, CliError> {
    use crate::net::client_port::{ClientPortConfig, Whitelist};
    if cfg.int("secureClientPort").is_some() {
        return Err(CliError::input(format!(
            "--config {}: secureClientPort: zkfle has no TLS client port (remove the key for zkfle's zoo.cfg)",
            cfg.path.display()
        )));
    }
    let port = match (&me.client, cfg.int("clientPort")) {
        (Some((_, p)), _) => Some(*p),
        (None, Some(p)) => Some(u16::try_from(p).map_err(|_| {
            CliError::input(format!(
                "--config {}: clientPort={p}: not a port",
                cfg.path.display()
            ))
        })?),
        (None, None) => None,
    };
    let listen = match port {
        None => None,
        Some(port) => {
            let host = me
                .client
                .as_ref()
                .and_then(|(h, _)| h.clone())
                .or_else(|| cfg.other.get("clientPortAddress").cloned())
                .unwrap_or_else(|| "0.0.0.0".into());
            listen_address(cfg, &host, port, "client address", "client port")?
        }
    };
    let tick = l.tick as i64;
    let setup = crate::output::fourlw::MemberSetup {
        server_id: me.id,
        client_port: port.unwrap_or(0),
        data_dir: l
            .data_dir
            .as_ref()
            .map(|d| d.join("version-2").display().to_string())
            .unwrap_or_default(),
        data_log_dir: l
            .data_dir
            .as_ref()
            .map(|d| d.join("version-2").display().to_string())
            .unwrap_or_default(),
        tick_time: l.tick,
        init_limit: l.init_limit,
        sync_limit: l.sync_limit,
        max_client_cnxns: cfg.int("maxClientCnxns").map_or(60, i64::from),
        min_session_timeout: cfg
            .int("minSessionTimeout")
            .filter(|v| *v != -1)
            .map_or(tick * 2, i64::from),
        max_session_timeout: cfg
            .int("maxSessionTimeout")
            .filter(|v| *v != -1)
            .map_or(tick * 20, i64::from),
        election_ports: me.addresses.iter().map(|a| a.election_port).collect(),
        quorum_ports: me.addresses.iter().map(|a| a.quorum_port).collect(),
        peer_type: u8::from(me.role() == crate::wire::Role::Observer),
        membership: l.membership.clone(),
        speaks: l.speaks,
        voters: cfg
            .quorum
            .servers()
            .filter(|s| s.role() == crate::wire::Role::Participant)
            .count(),
    };
    let client_port = listen.map(|listen| ClientPortConfig {
        listen,
        whitelist: Whitelist::new(
            cfg.java_property("zookeeper.4lw.commands.whitelist")
                .as_deref(),
            cfg.java_property("readonlymode.enabled").as_deref() == Some("true"),
        ),
        setup: setup.clone(),
        data_dir: l.data_dir.clone(),
    });
    let metrics = metrics_config(cfg, &setup)?;
    let admin = admin_config(cfg, setup, listen, l)?;
    Ok((client_port, admin, metrics))
}

/// Java's Prometheus provider's endpoint, when `metricsProvider.className` names it:
/// `metricsProvider.httpHost` (0.0.0.0), `metricsProvider.httpPort` (7000),
/// `metricsProvider.exportJvmInfo` (true). Another provider (Java's default one keeps its
/// metrics to `mntr`) opens nothing.
fn metrics_config(
    cfg: &crate::zoocfg::ZooCfg,
    setup: &crate::output::fourlw::MemberSetup,
) -> Result<Option<crate::net::metrics::MetricsConfig>, CliError> {
    let key = |k: &str| cfg.other.get(&format!("metricsProvider.{k}")).cloned();
    if !key("className").is_some_and(|c| c.trim().ends_with(".PrometheusMetricsProvider")) {
        return Ok(None);
    }
    let host = key("httpHost").unwrap_or_else(|| "0.0.0.0".into());
    let port = match key("httpPort") {
        None => 7000,
        Some(p) => p.trim().parse::<u16>().map_err(|_| {
            CliError::input(format!(
                "--config {}: metricsProvider.httpPort={p}: not a port",
                cfg.path.display()
            ))
        })?,
    };
    let Some(listen) = listen_address(cfg, &host, port, "metrics address", "metrics endpoint")?
    else {
        return Ok(None);
    };
    Ok(Some(crate::net::metrics::MetricsConfig {
        listen,
        setup: setup.clone(),
        process: !key("exportJvmInfo").is_some_and(|v| v.trim().eq_ignore_ascii_case("false")),
    }))
}

fn admin_config(
    cfg: &crate::zoocfg::ZooCfg,
    setup: crate::output::fourlw::MemberSetup,
    client: Option<SocketAddr>,
    l: &ClientPortLimits,
) -> Result<Option<crate::net::admin::AdminConfig>, CliError> {
    use crate::output::admin::{AdminView, MemberAddresses};
    let property = |key: &str| cfg.java_property(&format!("zookeeper.admin.{key}"));
    // Java's Boolean.parseBoolean: only "true" (any case) is true.
    if property("enableServer").is_some_and(|v| !v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let host = property("serverAddress").unwrap_or_else(|| "0.0.0.0".into());
    let port = match property("serverPort") {
        None => 8080,
        Some(p) => p.trim().parse::<u16>().map_err(|_| {
            CliError::input(format!(
                "--config {}: admin.serverPort={p}: not a port",
                cfg.path.display()
            ))
        })?,
    };
    let command_url = property("commandURL").unwrap_or_else(|| "/commands".into());
    if !command_url.starts_with('/') {
        return Err(CliError::input(format!(
            "--config {}: admin.commandURL={command_url}: not a path (it starts with /)",
            cfg.path.display()
        )));
    }
    let Some(listen) = listen_address(cfg, &host, port, "AdminServer address", "AdminServer")?
    else {
        return Ok(None);
    };
    let members = cfg
        .quorum
        .servers()
        .map(|s| MemberAddresses {
            sid: s.id,
            quorum: s
                .addresses
                .iter()
                .map(|a| format!("{}:{}", a.host, a.quorum_port))
                .collect(),
            election: s
                .addresses
                .iter()
                .map(|a| format!("{}:{}", a.host, a.election_port))
                .collect(),
            client: s
                .client
                .as_ref()
                .map(|(h, p)| format!("{}:{p}", h.as_deref().unwrap_or("0.0.0.0")))
                .unwrap_or_default(),
            observer: s.role() == crate::wire::Role::Observer,
        })
        .collect();
    Ok(Some(crate::net::admin::AdminConfig {
        listen,
        command_url,
        setup,
        view: AdminView {
            members,
            client_address: client.map(|a| a.to_string()).unwrap_or_default(),
            last_snapshot: None,
            dir_size: 0,
        },
        data_dir: l.data_dir.clone(),
    }))
}

/// Where a monitoring server (`what`) listens: `host:port` from the config, malformed an
/// error naming `field`; one that does not resolve is warned about and none is opened.
fn listen_address(
    cfg: &crate::zoocfg::ZooCfg,
    host: &str,
    port: u16,
    field: &str,
    what: &str,
) -> Result<Option<SocketAddr>, CliError> {
    let address = ElectionAddress::parse(&format!("{host}:{port}"), 0).map_err(|e| {
        CliError::input(format!(
            "--config {}: {field} {host}:{port}: {e}",
            cfg.path.display()
        ))
    })?;
    let listen = resolve(&address);
    if listen.is_none() {
        tracing::warn!("{field} {host}:{port} does not resolve: no {what}");
    }
    Ok(listen)
}

/// `a` resolved as Java's `InetAddress.getByName` does: an IPv4 address first when the name has
/// one (Java's default, `java.net.preferIPv6Addresses=false`), where getaddrinfo may put IPv6
/// first (`localhost`).
fn resolve(a: &ElectionAddress) -> Option<SocketAddr> {
    use std::net::ToSocketAddrs;
    a.socket_addr().or_else(|| {
        let all: Vec<SocketAddr> = (a.host.as_str(), a.port).to_socket_addrs().ok()?.collect();
        all.iter().find(|s| s.is_ipv4()).or(all.first()).copied()
    })
}

pub fn run(args: JoinArgs) -> Result<(), CliError> {
    use std::io::IsTerminal;
    // Colour only for a person at a terminal: log files and pipes get plain text.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                // Quiet while healthy, but not silent: warnings, and one line per change of
                // state (crate::net::STATE_LOG).
                tracing_subscriber::EnvFilter::new(format!("warn,{}=info", crate::net::STATE_LOG))
            }),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let cfg = node_config(&args)?;
    if let Some(path) = &args.chaos_faults {
        tracing::warn!(
            "chaos faults enabled: reading {} (not for production)",
            path.display()
        );
        crate::net::faults::watch(path.clone());
    }
    tracing::info!(
        target: crate::net::STATE_LOG,
        "zkfle join {} starting: sid {}, election {}, quorum {}, {}",
        env!("CARGO_PKG_VERSION"),
        cfg.net.my_sid,
        cfg.net
            .announce
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        cfg.zab.as_ref().map_or("-".to_string(), |z| z
            .my_quorum_addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" ")),
        cfg.zab.as_ref().map_or(
            "election only (no data directory)".to_string(),
            |z| format!("data dir {}", z.data_dir.display())
        ),
    );
    let mut events_out: Option<Box<dyn Write + Send>> = match (&args.events_file, args.events) {
        (Some(p), _) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| {
                    CliError::input(format!("join: --events-file {}: {e}", p.display()))
                })?,
        )),
        (None, Some(EventFormat::Jsonl)) => Some(Box::new(std::io::stdout())),
        (None, None) => None,
    };
    let once = args.once;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failure(format!("join: runtime: {e}")))?;
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StateEvent>();
        let node = tokio::spawn(crate::net::run(cfg, tx));
        let stop = stop_signal();
        tokio::pin!(stop);
        loop {
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                signal = &mut stop => {
                    tracing::info!(target: crate::net::STATE_LOG, "zkfle join stopping: {signal}");
                    return Ok(());
                }
            };
            let Some(ev) = ev else { break };
            let line = crate::output::join::event_line(&ev);
            if let Some(out) = events_out.as_mut() {
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            if once && ev.state != "LOOKING" {
                println!("{line}");
                return Ok(());
            }
        }
        match node.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(CliError::failure(format!("join: {e}"))),
            Err(e) => Err(CliError::failure(format!("join: {e}"))),
        }
    })
}

/// The signal that stops `join` (Ctrl-C, or SIGTERM as from `kill`, systemd or Docker), named.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// A 64-bit integer, decimal or `0x` hex (zxids are usually written in hex).
fn parse_i64(s: &str) -> Result<i64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok().map(|v| v as i64),
        None => s.parse::<i64>().ok(),
    };
    parsed.ok_or_else(|| format!("{s:?} is not a decimal or 0x-hex 64-bit integer"))
}
