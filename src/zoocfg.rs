//! Reading a server's `zoo.cfg` (and the `dynamicConfigFile` it may point to): the ensemble's
//! members, as Java's `QuorumPeerConfig` reads them. Keys zkfle has no use for are kept so
//! callers can log them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::wire::ErrorKind;
use crate::wire::config::{ConfigLine, QuorumConfig, ServerLine};

/// A parsed `zoo.cfg`.
#[derive(Debug, Clone, Default)]
pub struct ZooCfg {
    /// Members, groups, weights and version, from the file or its dynamic config file.
    pub quorum: QuorumConfig,
    /// Every other `key=value`, in file order.
    pub other: BTreeMap<String, String>,
    /// Where each of `other`'s keys was set: file and line, for errors.
    set_at: BTreeMap<String, (String, usize)>,
    /// The file read.
    pub path: PathBuf,
    /// The last config seen proposed but not yet activated (`<zoo.cfg>.dynamic.next`, read
    /// only beside a `dynamicConfigFile`, as Java reads it).
    pub next: Option<QuorumConfig>,
}

/// Which part of a config a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// zoo.cfg without `dynamicConfigFile`: everything (Java's backward-compatible mode).
    All,
    /// zoo.cfg with `dynamicConfigFile`: no members.
    Static,
    /// The dynamic file: members only, no `version` (it is in the name).
    Dynamic,
}

/// `<zoo.cfg>.dynamic.next`: the config last seen proposed (Java's
/// `QuorumPeer.getNextDynamicConfigFilename`).
pub fn next_config_path(cfg_path: &Path) -> PathBuf {
    let mut s = cfg_path.as_os_str().to_owned();
    s.push(".dynamic.next");
    PathBuf::from(s)
}

/// `<zoo.cfg>.dynamic.<hex version>` (`QuorumPeer.makeDynamicConfigFilename`).
pub fn dynamic_config_path(cfg_path: &Path, version: u64) -> PathBuf {
    let mut s = cfg_path.as_os_str().to_owned();
    s.push(format!(".dynamic.{version:x}"));
    PathBuf::from(s)
}

/// Writes `bytes` to `path` durably and atomically (`<path>.tmp`, fsync, rename, fsync of the
/// directory), as Java's `AtomicFileWritingIdiom` replaces config files.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

/// Writes the config last seen proposed to `<zoo.cfg>.dynamic.next`, version included
/// (`QuorumPeer.setLastSeenQuorumVerifier`).
pub fn write_next_config(cfg_path: &Path, config: &QuorumConfig) -> std::io::Result<()> {
    write_atomic(
        &next_config_path(cfg_path),
        crate::reconfig::dynamic_config_text(config, true).as_bytes(),
    )
}

/// Activates `config` on disk as `QuorumPeer.setQuorumVerifier(qv, true)` does: writes
/// `<zoo.cfg>.dynamic.<version>` (members only), rewrites zoo.cfg without its member lines,
/// `peerType` (and `clientPort`/`clientPortAddress` when my server line has a client address)
/// and pointing `dynamicConfigFile` at the new file (absolute path), and removes
/// `.dynamic.next` when it is this version. Returns the dynamic file's path.
pub fn activate_config(
    cfg_path: &Path,
    config: &QuorumConfig,
    my_id: i64,
) -> std::io::Result<PathBuf> {
    let dynamic = dynamic_config_path(cfg_path, config.version());
    write_atomic(
        &dynamic,
        crate::reconfig::dynamic_config_text(config, false).as_bytes(),
    )?;
    let erase_client = config.server(my_id).is_some_and(|s| s.client.is_some());
    let old = std::fs::read_to_string(cfg_path)?;
    let mut out = String::new();
    for raw in old.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else {
            continue;
        };
        let key = key.trim();
        if key.starts_with("server.")
            || key.starts_with("group")
            || key.starts_with("weight")
            || key.starts_with("dynamicConfigFile")
            || key.starts_with("peerType")
            || key == "version"
            || (erase_client && key.starts_with("clientPort"))
        {
            continue;
        }
        out.push_str(&format!("{key}={}\n", value.trim()));
    }
    let absolute = std::fs::canonicalize(&dynamic)?;
    out.push_str(&format!("dynamicConfigFile={}\n", absolute.display()));
    write_atomic(cfg_path, out.as_bytes())?;
    let next = next_config_path(cfg_path);
    if let Ok(text) = std::fs::read_to_string(&next)
        && crate::wire::config::version_of(&text).is_none_or(|v| v <= config.version())
    {
        std::fs::remove_file(&next)?;
    }
    Ok(dynamic)
}

/// The settings `QuorumPeerConfig` reads with `Integer.parseInt`.
const JAVA_INTS: &[&str] = &[
    "clientPort",
    "secureClientPort",
    "observerMasterPort",
    "clientPortListenBacklog",
    "tickTime",
    "maxClientCnxns",
    "minSessionTimeout",
    "maxSessionTimeout",
    "initLimit",
    "syncLimit",
    "connectToLearnerMasterLimit",
    "electionAlg",
    "autopurge.snapRetainCount",
    "quorum.cnxn.threads.size",
    "multiAddress.reachabilityCheckTimeoutMs",
];

/// The settings `QuorumPeerConfig` reads with its strict `parseBoolean`.
const JAVA_BOOLEANS: &[&str] = &[
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "quorumListenOnAllIPs",
    "syncEnabled",
    "standaloneEnabled",
    "reconfigEnabled",
    "sslQuorum",
    "portUnification",
    "sslQuorumReloadCertFiles",
    "quorum.auth.enableSasl",
    "quorum.auth.serverRequireSasl",
    "quorum.auth.learnerRequireSasl",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckEnabled",
];

/// `Integer.parseInt`: an optional sign and decimal digits, within 32 bits.
fn java_int(text: &str) -> Option<i32> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `QuorumPeerConfig.parseBoolean`: `true` or `false`, in any case.
fn java_boolean(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A `zoo.cfg` that could not be read; names the file and line.
#[derive(Debug, thiserror::Error)]
pub enum ZooCfgError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {problem}")]
    Line {
        path: String,
        line: usize,
        problem: String,
    },
}

impl ZooCfg {
    /// Reads `path` and, when it names one, its `dynamicConfigFile`.
    pub fn read(path: &Path) -> Result<Self, ZooCfgError> {
        let mut cfg = ZooCfg {
            path: path.to_path_buf(),
            ..ZooCfg::default()
        };
        let has_dynamic = std::fs::read_to_string(path)
            .map(|t| {
                t.lines().any(|l| {
                    l.trim()
                        .split_once(['=', ':'])
                        .is_some_and(|(k, _)| k.trim() == "dynamicConfigFile")
                })
            })
            .unwrap_or(false);
        cfg.read_lines(path, if has_dynamic { Part::Static } else { Part::All })?;
        if let Some(dynamic) = cfg.other.get("dynamicConfigFile").cloned() {
            let dynamic = path.parent().unwrap_or(Path::new(".")).join(dynamic);
            cfg.read_lines(&dynamic, Part::Dynamic)?;
            // The version is in the file's name (QuorumPeerConfig.getVersionFromFilename).
            let version = crate::reconfig::version_from_filename(
                &dynamic.file_name().unwrap_or_default().to_string_lossy(),
            )
            .unwrap_or(0);
            cfg.quorum.lines.push(ConfigLine::Version(version));
            let next = next_config_path(path);
            if next.exists() {
                let text = std::fs::read_to_string(&next).map_err(|source| ZooCfgError::Io {
                    path: next.display().to_string(),
                    source,
                })?;
                let parsed = QuorumConfig::parse(&text).map_err(|e| ZooCfgError::Line {
                    path: next.display().to_string(),
                    line: text[..e.offset.min(text.len() as u64) as usize]
                        .matches('\n')
                        .count()
                        + 1,
                    problem: e.to_string(),
                })?;
                cfg.next = Some(parsed);
            }
        }
        cfg.check_values()?;
        Ok(cfg)
    }

    /// Refuses, in Java's words, the values `QuorumPeerConfig.parseProperties` refuses: an
    /// integer setting `Integer.parseInt` cannot read (`tickTime=20O0`), a boolean setting
    /// that is neither `true` nor `false` (any case), and `tickTime=0`.
    fn check_values(&self) -> Result<(), ZooCfgError> {
        for (key, value) in &self.other {
            let problem = if JAVA_INTS.contains(&key.as_str()) && java_int(value).is_none() {
                Some(format!(
                    "{key}={value}: For input string: \"{value}\" (Java refuses the file: NumberFormatException, an integer is needed)"
                ))
            } else if JAVA_BOOLEANS.contains(&key.as_str()) && java_boolean(value).is_none() {
                Some(format!(
                    "Invalid option {value} for {key}. Choose 'true' or 'false.'"
                ))
            } else if key == "tickTime" && java_int(value) == Some(0) {
                Some("tickTime is not set (Java refuses the file: tickTime=0)".to_string())
            } else {
                None
            };
            if let Some(problem) = problem {
                let (path, line) = self.set_at.get(key).cloned().unwrap_or_default();
                return Err(ZooCfgError::Line {
                    path,
                    line,
                    problem,
                });
            }
        }
        Ok(())
    }

    /// An integer setting, as Java reads it (`read` has refused one Java cannot read).
    pub fn int(&self, key: &str) -> Option<i32> {
        self.other.get(key).and_then(|v| java_int(v))
    }

    /// A boolean setting, as Java reads it.
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.other.get(key).and_then(|v| java_boolean(v))
    }

    /// Copies the file to `<file>.bak` (Java's `backupOldConfig`, done at each start of a
    /// server with reconfig enabled whose members are still in zoo.cfg).
    pub fn backup_old_config(&self) -> std::io::Result<()> {
        let mut bak = self.path.as_os_str().to_owned();
        bak.push(".bak");
        write_atomic(Path::new(&bak), &std::fs::read(&self.path)?)
    }

    /// `reconfigEnabled` (Java's default false).
    pub fn reconfig_enabled(&self) -> bool {
        self.other
            .get("reconfigEnabled")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// `standaloneEnabled` (Java's default true).
    pub fn standalone_enabled(&self) -> bool {
        !self
            .other
            .get("standaloneEnabled")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    }

    fn read_lines(&mut self, path: &Path, part: Part) -> Result<(), ZooCfgError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ZooCfgError::Io {
            path: shown.clone(),
            source,
        })?;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let bad = |problem: String| ZooCfgError::Line {
                path: shown.clone(),
                line: i + 1,
                problem,
            };
            let Some((key, value)) = line.split_once(['=', ':']) else {
                return Err(bad(format!("expected key=value, got {line:?}")));
            };
            let (key, value) = (key.trim(), value.trim());
            let membership = key.starts_with("server.")
                || key.starts_with("group")
                || key.starts_with("weight")
                || key == "version";
            match part {
                Part::Static if membership => {
                    return Err(bad(format!(
                        "parameter: {key} must be in a separate dynamic config file"
                    )));
                }
                Part::Dynamic if key == "version" => {
                    return Err(bad("dynamic file shouldn't have version inside".into()));
                }
                Part::Dynamic if !membership => {
                    return Err(bad(format!("Unrecognised parameter: {key}")));
                }
                _ => {}
            }
            if membership {
                let parsed = QuorumConfig::parse(&format!("{key}={value}")).map_err(|e| {
                    bad(match e.kind {
                        ErrorKind::BadConfigLine { reason, .. } => reason,
                        other => other.to_string(),
                    })
                })?;
                self.quorum.lines.extend(parsed.lines);
            } else {
                self.other.insert(key.to_string(), value.to_string());
                self.set_at.insert(key.to_string(), (shown.clone(), i + 1));
            }
        }
        Ok(())
    }

    /// A Java system property as a Java server with this file sees it: zoo.cfg's keys that
    /// `QuorumPeerConfig` does not know become `zookeeper.<key>` (`snapCount` →
    /// `zookeeper.snapCount`) and win over `-D<name>=<value>` in the `SERVER_JVMFLAGS` or
    /// `JVMFLAGS` environment variables (where `conf/java.env` puts them for `zkServer.sh`).
    pub fn java_property(&self, name: &str) -> Option<String> {
        if let Some(key) = name.strip_prefix("zookeeper.")
            && let Some(v) = self.other.get(key)
        {
            return Some(v.clone());
        }
        let flag = format!("-D{name}=");
        let mut found = None;
        for var in ["JVMFLAGS", "SERVER_JVMFLAGS"] {
            if let Ok(flags) = std::env::var(var) {
                for f in flags.split_whitespace() {
                    if let Some(v) = f.strip_prefix(&flag) {
                        found = Some(v.to_string());
                    }
                }
            }
        }
        found
    }

    /// The `server.N` lines.
    pub fn servers(&self) -> impl Iterator<Item = &ServerLine> {
        self.quorum.servers()
    }

    /// The config text a Java server with this file puts in its notifications
    /// (`QuorumServer.toString()`): members in sid order (Java keeps them in a
    /// `HashMap<Long, _>`, which iterates small ids in order), each with its addresses sorted
    /// by host, its role written out, and a client part given as a port alone written with
    /// the host Java gives it, `0.0.0.0` (seen in a 3.8.0 server's notifications in Docker:
    /// `;2181` in its zoo.cfg, `;0.0.0.0:2181` on the wire); then `version=`.
    pub fn quorum_text(&self) -> String {
        let mut servers: Vec<ServerLine> = self.servers().cloned().collect();
        servers.sort_by_key(|s| s.id);
        let mut lines: Vec<ConfigLine> = servers
            .into_iter()
            .map(|mut s| {
                s.role = Some(s.role());
                s.addresses.sort_by(|a, b| a.host.cmp(&b.host));
                if let Some((host @ None, _)) = &mut s.client {
                    *host = Some("0.0.0.0".to_string());
                }
                ConfigLine::Server(s)
            })
            .collect();
        lines.extend(
            self.quorum
                .lines
                .iter()
                .filter(|l| matches!(l, ConfigLine::Group { .. } | ConfigLine::Weight { .. }))
                .cloned(),
        );
        lines.push(ConfigLine::Version(self.quorum.version()));
        QuorumConfig { lines }.to_string()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn integers_and_booleans_are_read_as_java_reads_them() {
        assert_eq!(java_int("2000"), Some(2000));
        assert_eq!(java_int("+5"), Some(5));
        assert_eq!(java_int("-1"), Some(-1));
        for bad in ["20O0", "", "+", "2000 ms", "0x10", "2147483648", "1.5"] {
            assert_eq!(java_int(bad), None, "{bad}");
        }
        assert_eq!(java_boolean("TRUE"), Some(true));
        assert_eq!(java_boolean("False"), Some(false));
        assert_eq!(java_boolean("yes"), None);
        assert_eq!(java_boolean("1"), None);
    }
    use super::*;

    #[test]
    fn reads_static_members_and_keeps_other_keys() {
        let dir = std::env::temp_dir().join(format!("zkfle-zoocfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("zoo.cfg");
        std::fs::write(
            &p,
            "tickTime=2000\n# comment\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888:observer;2181\n",
        )
        .unwrap();
        let cfg = ZooCfg::read(&p).unwrap();
        assert_eq!(cfg.servers().count(), 2);
        assert_eq!(cfg.int("tickTime"), Some(2000));
        assert_eq!(
            cfg.quorum_text(),
            "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:observer;0.0.0.0:2181\nversion=0"
        );
        // Multiple addresses are written sorted by host, as QuorumServer.toString() sorts them.
        std::fs::write(
            &p,
            "server.1=127.0.0.9:2888:3888|127.0.0.1:2889:3889;127.0.0.1:2181\n",
        )
        .unwrap();
        assert_eq!(
            ZooCfg::read(&p).unwrap().quorum_text(),
            "server.1=127.0.0.1:2889:3889|127.0.0.9:2888:3888:participant;127.0.0.1:2181\nversion=0"
        );
        std::fs::write(&p, "server.x=1\n").unwrap();
        let e = ZooCfg::read(&p).unwrap_err().to_string();
        assert!(e.ends_with(":1: bad id in \"server.x\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dynamic_files_are_read_and_written_as_java_does() {
        let dir = std::env::temp_dir().join(format!("zkfle-zoocfg-dyn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("zoo.cfg");
        std::fs::write(
            &p,
            "tickTime=200\nreconfigEnabled=true\nclientPort=2181\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n",
        )
        .unwrap();
        let cfg = ZooCfg::read(&p).unwrap();
        assert!(cfg.reconfig_enabled() && cfg.standalone_enabled());
        assert_eq!(cfg.quorum.version(), 0);
        // Activation: the dynamic file without version, zoo.cfg without members and (my line
        // has a client address) without clientPort, pointing at the file.
        let new = QuorumConfig::parse("server.1=127.0.0.1:2888:3888:participant;2181\nserver.2=127.0.0.2:2888:3888:participant\nversion=100000003").unwrap();
        write_next_config(&p, &new).unwrap();
        assert!(next_config_path(&p).exists());
        assert_eq!(
            ZooCfg::read(&p).unwrap().next,
            None,
            "read only beside a dynamic file"
        );
        let written = activate_config(&p, &new, 1).unwrap();
        assert_eq!(written, dir.join("zoo.cfg.dynamic.100000003"));
        assert!(
            !next_config_path(&p).exists(),
            "the activated version's .next is removed"
        );
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            !text.contains("server.") && !text.contains("clientPort"),
            "{text}"
        );
        assert!(text.ends_with(&format!(
            "dynamicConfigFile={}\n",
            std::fs::canonicalize(&written).unwrap().display()
        )));
        assert_eq!(
            std::fs::read_to_string(&written).unwrap(),
            "server.1=127.0.0.1:2888:3888:participant;2181\nserver.2=127.0.0.2:2888:3888:participant"
        );
        // A restart reads the activated config, its version from the file name.
        let cfg = ZooCfg::read(&p).unwrap();
        assert_eq!(cfg.quorum.version(), 0x1_0000_0003);
        assert_eq!(cfg.servers().count(), 2);
        assert!(cfg.quorum_text().ends_with("version=100000003"));
        // A proposed, not activated config is read back as the last seen one.
        let newer =
            QuorumConfig::parse("server.1=127.0.0.1:2888:3888:participant\nversion=100000005")
                .unwrap();
        write_next_config(&p, &newer).unwrap();
        assert_eq!(ZooCfg::read(&p).unwrap().next, Some(newer));
        // As Java refuses: members beside dynamicConfigFile, a version in the dynamic file.
        std::fs::write(&p, format!("{text}server.3=127.0.0.3:2888:3888\n")).unwrap();
        let e = ZooCfg::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("must be in a separate dynamic config file"),
            "{e}"
        );
        std::fs::write(&p, &text).unwrap();
        std::fs::write(&written, "server.1=127.0.0.1:2888:3888\nversion=1\n").unwrap();
        let e = ZooCfg::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("dynamic file shouldn't have version inside"),
            "{e}"
        );
        std::fs::write(&p, "reconfigEnabled=yes\nserver.1=127.0.0.1:2888:3888\n").unwrap();
        assert!(ZooCfg::read(&p).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
