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
    /// The file read.
    pub path: PathBuf,
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
        cfg.read_lines(path)?;
        if let Some(dynamic) = cfg.other.get("dynamicConfigFile").cloned() {
            let dynamic = path.parent().unwrap_or(Path::new(".")).join(dynamic);
            cfg.read_lines(&dynamic)?;
        }
        Ok(cfg)
    }

    fn read_lines(&mut self, path: &Path) -> Result<(), ZooCfgError> {
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
            if key.starts_with("server.")
                || key.starts_with("group.")
                || key.starts_with("weight.")
                || key == "version"
            {
                let parsed = QuorumConfig::parse(&format!("{key}={value}")).map_err(|e| {
                    bad(match e.kind {
                        ErrorKind::BadConfigLine { reason, .. } => reason,
                        other => other.to_string(),
                    })
                })?;
                self.quorum.lines.extend(parsed.lines);
            } else {
                self.other.insert(key.to_string(), value.to_string());
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

    /// A setting, parsed.
    pub fn get<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.other.get(key).and_then(|v| v.parse().ok())
    }

    /// The config text a Java server with this file puts in its notifications: members in
    /// sid order (Java keeps them in a `HashMap<Long, _>`, which iterates small ids in order),
    /// each with its role written out, then `version=`.
    pub fn quorum_text(&self) -> String {
        let mut servers: Vec<ServerLine> = self.servers().cloned().collect();
        servers.sort_by_key(|s| s.id);
        let mut lines: Vec<ConfigLine> = servers
            .into_iter()
            .map(|mut s| {
                s.role = Some(s.role());
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
        assert_eq!(cfg.get::<u64>("tickTime"), Some(2000));
        assert_eq!(
            cfg.quorum_text(),
            "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.2:2888:3888:observer;2181\nversion=0"
        );
        std::fs::write(&p, "server.x=1\n").unwrap();
        let e = ZooCfg::read(&p).unwrap_err().to_string();
        assert!(e.ends_with(":1: bad id in \"server.x\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
