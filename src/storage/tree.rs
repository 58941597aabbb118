//! ZooKeeper's data tree as a follower keeps it (`DataTree`, `DataNode`,
//! `ReferenceCountedACLCache`), applied from committed txns exactly as `DataTree.processTxn`
//! applies them, and read from / written to snapshots in ZooKeeper's format.
//!
//! - Nodes live in a persistent ordered map (`imbl::OrdMap`) keyed by path, the root under
//!   `""` (Java's alias for `"/"`). A parent sorts before all its descendants, so the map's
//!   order is a valid snapshot order, and a clone is O(1): a snapshot is written from a frozen
//!   copy on another thread while the follower goes on applying txns.
//! - The ACL cache maps lists to ids counted from 1 with reference counts, as Java's; the
//!   snapshot stores the ids. `-1` is `world:anyone ALL` (`OPEN_ACL_UNSAFE`), never stored.
//! - Sessions with their timeouts (created by createSession, removed by closeSession) and
//!   ephemerals by owner, for closeSession.
//! - The tree digest (`DigestCalculator` version 2: the sum of CRC-32s of path, data and
//!   stat of every node outside `/zookeeper/`), checked against the digest each txn of a 3.6+
//!   leader carries, and written into snapshots after the first seal as Java 3.6+ does.
//! - Quotas: the `/zookeeper/quota` stat nodes are updated as Java updates them (locally, not
//!   by txns).
//!
//! Where 3.8 and 3.9 differ: a multi's `create2` sub-txn is applied (3.9; 3.8 stops the multi
//! there), and a create that finds its node existing leaves that node's ACL (3.8; 3.9 points
//! it at the new list). Both arise only from fuzzy snapshots Java leaders send.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use imbl::OrdMap;

use crate::wire::WireError;
use crate::wire::quorum::{Id, TxnHeader};
use crate::wire::txn::{
    Acl, SnapItem, StatPersisted, Txn, TxnRecord, decode_record, encode_node, encode_snap_item,
    opcode,
};

/// `KeeperException.Code` values processTxn produces.
pub mod code {
    pub const OK: i32 = 0;
    pub const RUNTIME_INCONSISTENCY: i32 = -2;
    pub const NO_NODE: i32 = -101;
    pub const NODE_EXISTS: i32 = -110;
}

/// `DigestCalculator.DIGEST_VERSION`.
pub const DIGEST_VERSION: i32 = 2;
/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`.
pub const CONTAINER_OWNER: i64 = i64::MIN;
const EXTENDED_MASK: i64 = 0xff00_0000_0000_0000u64 as i64;
const ZOOKEEPER: &str = "/zookeeper";
const QUOTA: &str = "/zookeeper/quota";
const CONFIG: &str = "/zookeeper/config";
const LIMIT_NODE: &str = "zookeeper_limits";
const STAT_NODE: &str = "zookeeper_stats";
const OPEN_ACL: i64 = -1;

/// One znode: data, ACL id in the cache, persisted stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub data: Option<Arc<[u8]>>,
    pub acl: i64,
    pub stat: StatPersisted,
}

impl Node {
    fn empty() -> Node {
        Node {
            data: Some(Arc::from(&[][..])),
            acl: OPEN_ACL,
            stat: StatPersisted::default(),
        }
    }

    fn data_len(&self) -> i64 {
        self.data.as_ref().map_or(0, |d| d.len() as i64)
    }
}

/// `ReferenceCountedACLCache`.
#[derive(Debug, Clone, Default)]
pub struct AclCache {
    by_id: OrdMap<i64, Arc<Vec<Acl>>>,
    by_list: HashMap<Arc<Vec<Acl>>, i64>,
    refs: HashMap<i64, i64>,
    index: i64,
}

impl AclCache {
    /// `convertAcls`: the id of this list, added if new, its count incremented.
    pub fn convert(&mut self, acls: Option<&Vec<Acl>>) -> i64 {
        let Some(acls) = acls else {
            return OPEN_ACL;
        };
        let id = match self.by_list.get(acls) {
            Some(id) => *id,
            None => {
                self.index += 1;
                let list = Arc::new(acls.clone());
                self.by_id.insert(self.index, list.clone());
                self.by_list.insert(list, self.index);
                self.index
            }
        };
        self.add_usage(id);
        id
    }

    fn add_usage(&mut self, id: i64) {
        if id == OPEN_ACL || !self.by_id.contains_key(&id) {
            return;
        }
        *self.refs.entry(id).or_insert(0) += 1;
    }

    fn remove_usage(&mut self, id: i64) {
        if id == OPEN_ACL || !self.by_id.contains_key(&id) {
            return;
        }
        let n = self.refs.entry(id).or_insert(0);
        *n -= 1;
        if *n <= 0 {
            self.refs.remove(&id);
            if let Some(list) = self.by_id.remove(&id) {
                self.by_list.remove(&list);
            }
        }
    }

    fn purge_unused(&mut self) {
        let unused: Vec<i64> = self
            .by_id
            .keys()
            .filter(|id| self.refs.get(id).copied().unwrap_or(0) <= 0)
            .copied()
            .collect();
        for id in unused {
            self.refs.remove(&id);
            if let Some(list) = self.by_id.remove(&id) {
                self.by_list.remove(&list);
            }
        }
    }

    /// The list an id stands for (`convertLong`); `-1` is world:anyone ALL.
    pub fn get(&self, id: i64) -> Option<Vec<Acl>> {
        if id == OPEN_ACL {
            return Some(vec![Acl::world(31)]);
        }
        self.by_id.get(&id).map(|l| (**l).clone())
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// A frozen copy of a tree, cheap to make, to be written as a snapshot.
#[derive(Clone)]
pub struct TreeSnapshot {
    nodes: OrdMap<Arc<str>, Node>,
    acls: OrdMap<i64, Arc<Vec<Acl>>>,
    sessions: OrdMap<i64, i32>,
    /// The zxid and digest written after the first seal.
    pub zxid: i64,
    pub digest: i64,
}

impl TreeSnapshot {
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Writes the body (sessions, ACL cache, nodes, `"/"`) in pieces to `out`, each piece at
    /// most about 64 KiB plus one node.
    pub fn write_body(
        &self,
        out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let wire = |e: WireError| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let mut buf = Vec::with_capacity(1 << 17);
        encode_snap_item(
            &mut buf,
            &SnapItem::SessionCount(self.sessions.len() as i32),
        )
        .map_err(wire)?;
        for (id, timeout) in &self.sessions {
            encode_snap_item(
                &mut buf,
                &SnapItem::Session {
                    id: *id,
                    timeout: *timeout,
                },
            )
            .map_err(wire)?;
            flush_if_big(&mut buf, out)?;
        }
        encode_snap_item(&mut buf, &SnapItem::AclCount(self.acls.len() as i32)).map_err(wire)?;
        for (id, acls) in &self.acls {
            encode_snap_item(
                &mut buf,
                &SnapItem::AclEntry {
                    id: *id,
                    acls: (**acls).clone(),
                },
            )
            .map_err(wire)?;
            flush_if_big(&mut buf, out)?;
        }
        for (path, n) in &self.nodes {
            encode_node(&mut buf, path, n.data.as_deref(), n.acl, &n.stat).map_err(wire)?;
            flush_if_big(&mut buf, out)?;
        }
        encode_snap_item(&mut buf, &SnapItem::End).map_err(wire)?;
        out(&buf)
    }
}

fn flush_if_big(
    buf: &mut Vec<u8>,
    out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if buf.len() >= 1 << 16 {
        out(buf)?;
        buf.clear();
    }
    Ok(())
}

/// The data tree.
#[derive(Clone)]
pub struct DataTree {
    nodes: OrdMap<Arc<str>, Node>,
    acls: AclCache,
    sessions: OrdMap<i64, i32>,
    ephemerals: HashMap<i64, HashSet<Arc<str>>>,
    /// Paths with a quota (`pTrie`).
    quotas: BTreeSet<String>,
    digest: i64,
    /// `lastProcessedZxid`.
    pub last_processed_zxid: i64,
    /// Digest mismatches seen against the digests txns carry.
    pub digest_mismatches: u64,
    /// The first such mismatch (zxid), for the log.
    pub first_mismatch: Option<i64>,
    /// Bytes written by each create, delete and setData, per top-level znode (Java's
    /// `WRITE_PER_NAMESPACE`, `DataTree.updateWriteStat`), for monitoring.
    pub writes_per_namespace: OrdMap<Arc<str>, WriteStat>,
}

/// The writes of one namespace: Java's `AvgMinMaxCounter` (count, sum, least, greatest), and
/// the last [`WriteStat::KEPT`] sizes for a median.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteStat {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    recent: Vec<u64>,
}

impl WriteStat {
    pub const KEPT: usize = 64;
    /// Namespaces counted at most: past them, writes to new ones are not counted.
    pub const NAMESPACES: usize = 1024;

    fn add(&mut self, bytes: u64) {
        if self.count == 0 || bytes < self.min {
            self.min = bytes;
        }
        self.max = self.max.max(bytes);
        if self.recent.len() == Self::KEPT {
            self.recent.remove(0);
        }
        self.recent.push(bytes);
        self.count += 1;
        self.sum += bytes;
    }

    /// The median of the last [`WriteStat::KEPT`] writes.
    pub fn median(&self) -> f64 {
        let mut v = self.recent.clone();
        v.sort_unstable();
        v.get(v.len().saturating_sub(1) / 2)
            .map_or(f64::NAN, |m| *m as f64)
    }
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

/// Java's `path.substring(0, lastSlash)` and `substring(lastSlash + 1)`.
fn split_path(path: &str) -> Option<(&str, &str)> {
    let i = path.rfind('/')?;
    Some((&path[..i], &path[i + 1..]))
}

/// The map key of a path: `"/"` is the root's alias `""`.
fn key(path: &str) -> &str {
    if path == "/" { "" } else { path }
}

/// `DigestCalculator.calculateDigest`.
fn node_digest(path: &str, n: &Node) -> i64 {
    if path.starts_with("/zookeeper/") {
        return 0;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(key(path).as_bytes());
    if let Some(d) = &n.data {
        h.update(d);
    }
    h.update(&n.stat.digest_bytes());
    i64::from(h.finalize())
}

/// `EphemeralType.get`: (container, ttl, ephemeral session).
fn owner_kind(owner: i64) -> (bool, bool) {
    if owner == CONTAINER_OWNER {
        return (true, false);
    }
    if owner & EXTENDED_MASK == EXTENDED_MASK && (owner >> 40) & 0xffff == 0 {
        return (false, true);
    }
    (false, false)
}

/// `StatsTrack` for a quota stat node: updates `count` and `bytes`, keeps other keys.
fn stats_track_update(data: &[u8], count_diff: i64, bytes_diff: i64) -> Vec<u8> {
    let text = String::from_utf8_lossy(data);
    let mut stats: Vec<(String, i64)> = Vec::new();
    for pair in text.split([',', ';']).filter(|s| !s.is_empty()) {
        let mut kv = pair.split('=');
        let k = kv.next().unwrap_or("").to_string();
        let v = kv
            .next()
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1);
        stats.retain(|(x, _)| *x != k);
        stats.push((k, v));
    }
    let get = |k: &str| stats.iter().find(|(x, _)| x == k).map_or(-1, |(_, v)| *v);
    let count = get("count") + count_diff;
    let bytes = get("bytes") + bytes_diff;
    stats_track_text(count, bytes, &stats)
}

fn stats_track_text(count: i64, bytes: i64, others: &[(String, i64)]) -> Vec<u8> {
    let mut s = format!("count={count},bytes={bytes}");
    let mut rest: Vec<&(String, i64)> = others
        .iter()
        .filter(|(k, _)| k != "count" && k != "bytes")
        .collect();
    if !rest.is_empty() {
        s.push('=');
        rest.sort();
        for (k, v) in rest {
            s.push_str(&format!(";{k}={v}"));
        }
    }
    s.into_bytes()
}

impl DataTree {
    /// The tree of a new server: `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config`
    /// (read-only for world, aversion -1), empty data.
    pub fn new() -> DataTree {
        let mut t = DataTree {
            nodes: OrdMap::new(),
            acls: AclCache::default(),
            sessions: OrdMap::new(),
            ephemerals: HashMap::new(),
            quotas: BTreeSet::new(),
            digest: 0,
            last_processed_zxid: 0,
            digest_mismatches: 0,
            first_mismatch: None,
            writes_per_namespace: OrdMap::new(),
        };
        for p in ["", ZOOKEEPER, QUOTA, CONFIG] {
            t.put(p, Node::empty());
        }
        let read = Some(vec![Acl::world(1)]);
        let _ = t.set_acl(CONFIG, read.as_ref(), -1);
        t
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Ephemeral nodes, all sessions together (`DataTree.getEphemeralsCount`).
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(HashSet::len).sum()
    }

    /// Bytes of every node's path and data (`DataTree.approximateDataSize`). Walks the
    /// tree: for monitoring, not for every txn.
    pub fn approximate_data_size(&self) -> u64 {
        self.nodes
            .iter()
            .map(|(path, n)| (path.len() + n.data.as_ref().map_or(0, |d| d.len())) as u64)
            .sum()
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    pub fn acl_cache(&self) -> &AclCache {
        &self.acls
    }

    /// The tree digest (`NodeHashMap.getDigest`).
    pub fn digest(&self) -> i64 {
        self.digest
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(key(path))
    }

    /// Every node, parents first.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Node)> {
        self.nodes.iter()
    }

    pub fn sessions(&self) -> impl Iterator<Item = (i64, i32)> + '_ {
        self.sessions.iter().map(|(a, b)| (*a, *b))
    }

    /// The names of a node's children (scanning its subtree's keys).
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = format!("{}/", key(path));
        self.nodes
            .range::<_, str>((
                std::ops::Bound::Excluded(prefix.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| !k[prefix.len()..].contains('/'))
            .map(|(k, _)| k[prefix.len()..].to_string())
            .collect()
    }

    pub fn snapshot(&self) -> TreeSnapshot {
        TreeSnapshot {
            nodes: self.nodes.clone(),
            acls: self.acls.by_id.clone(),
            sessions: self.sessions.clone(),
            zxid: self.last_processed_zxid,
            digest: if self.last_processed_zxid > 0 {
                self.digest
            } else {
                0
            },
        }
    }

    fn put(&mut self, path: &str, n: Node) {
        self.digest = self.digest.wrapping_add(node_digest(path, &n));
        if let Some(old) = self.nodes.insert(Arc::from(key(path)), n) {
            self.digest = self.digest.wrapping_sub(node_digest(path, &old));
        }
    }

    /// Changes a node in place, keeping the digest (`preChange`/`postChange`).
    fn change<R>(&mut self, path: &str, f: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let n = self.nodes.get_mut(key(path))?;
        let before = node_digest(path, n);
        let r = f(n);
        let after = node_digest(path, n);
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
        Some(r)
    }

    /// `createNode`. Errors are `code::NO_NODE` / `code::NODE_EXISTS`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_node(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: Option<&Vec<Acl>>,
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time: i64,
    ) -> Result<(), i32> {
        let (parent, child) = split_path(path).ok_or(code::NO_NODE)?;
        if self.get(parent).is_none() {
            return Err(code::NO_NODE);
        }
        let acl_id = self.acls.convert(acl);
        if self.nodes.contains_key(key(path)) || path == "/" {
            return Err(code::NODE_EXISTS);
        }
        self.change(parent, |p| {
            let pcv = if parent_cversion == -1 {
                p.stat.cversion.wrapping_add(1)
            } else {
                parent_cversion
            };
            if pcv > p.stat.cversion {
                p.stat.cversion = pcv;
                p.stat.pzxid = zxid;
            }
        });
        let node = Node {
            data: data.map(Arc::from),
            acl: acl_id,
            stat: StatPersisted {
                czxid: zxid,
                mzxid: zxid,
                ctime: time,
                mtime: time,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: owner,
                pzxid: zxid,
            },
        };
        let bytes = node.data_len();
        self.put(path, node);
        let (container, ttl) = owner_kind(owner);
        if !container && !ttl && owner != 0 {
            self.ephemerals
                .entry(owner)
                .or_default()
                .insert(Arc::from(path));
        }
        if let Some(real) = parent.strip_prefix(QUOTA) {
            if child == LIMIT_NODE && !real.is_empty() {
                self.quotas.insert(real.to_string());
            }
            if child == STAT_NODE {
                self.update_quota_for_path(real);
            }
        }
        if let Some(prefix) = self.max_prefix_with_quota(path) {
            self.update_quota_stat(&prefix, bytes, 1);
        }
        self.count_write(path, bytes as u64);
        Ok(())
    }

    /// `updateWriteStat`: the path's length in UTF-16 units and the data's bytes, under the
    /// path's first component (none for `/`).
    fn count_write(&mut self, path: &str, bytes: u64) {
        let Some(namespace) = path.split('/').nth(1).filter(|n| !n.is_empty()) else {
            return;
        };
        let written = path.encode_utf16().count() as u64 + bytes;
        if let Some(stat) = self.writes_per_namespace.get_mut(namespace) {
            stat.add(written);
        } else if self.writes_per_namespace.len() < WriteStat::NAMESPACES {
            let mut stat = WriteStat::default();
            stat.add(written);
            self.writes_per_namespace.insert(Arc::from(namespace), stat);
        }
    }

    /// `deleteNode`.
    pub fn delete_node(&mut self, path: &str, zxid: i64) -> Result<(), i32> {
        let (parent, child) = split_path(path).ok_or(code::NO_NODE)?;
        self.change(parent, |p| {
            if zxid > p.stat.pzxid {
                p.stat.pzxid = zxid;
            }
        })
        .ok_or(code::NO_NODE)?;
        let Some(node) = self.nodes.remove(key(path)) else {
            return Err(code::NO_NODE);
        };
        self.digest = self.digest.wrapping_sub(node_digest(path, &node));
        self.acls.remove_usage(node.acl);
        let owner = node.stat.ephemeral_owner;
        let (container, ttl) = owner_kind(owner);
        if !container
            && !ttl
            && owner != 0
            && let Some(set) = self.ephemerals.get_mut(&owner)
        {
            set.remove(path);
        }
        if parent.starts_with(ZOOKEEPER) && child == LIMIT_NODE && parent.len() >= QUOTA.len() {
            let real = &parent[QUOTA.len()..];
            self.quotas
                .retain(|q| q != real && !q.starts_with(&format!("{real}/")));
        }
        if let Some(prefix) = self.max_prefix_with_quota(path) {
            self.update_quota_stat(&prefix, -node.data_len(), -1);
        }
        self.count_write(path, 0);
        Ok(())
    }

    /// `setData`.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        version: i32,
        zxid: i64,
        time: i64,
    ) -> Result<(), i32> {
        let data: Option<Arc<[u8]>> = data.map(Arc::from);
        let new_len = data.as_ref().map_or(0, |d| d.len() as i64);
        let old_len = self
            .change(path, |n| {
                let old = n.data_len();
                n.data = data;
                n.stat.mtime = time;
                n.stat.mzxid = zxid;
                n.stat.version = version;
                old
            })
            .ok_or(code::NO_NODE)?;
        if let Some(prefix) = self.max_prefix_with_quota(path) {
            self.update_quota_stat(&prefix, new_len - old_len, 0);
        }
        self.count_write(path, new_len as u64);
        Ok(())
    }

    /// `setACL`.
    pub fn set_acl(&mut self, path: &str, acl: Option<&Vec<Acl>>, version: i32) -> Result<(), i32> {
        let old = self.get(path).ok_or(code::NO_NODE)?.acl;
        self.acls.remove_usage(old);
        let id = self.acls.convert(acl);
        self.change(path, |n| {
            n.stat.aversion = version;
            n.acl = id;
        });
        Ok(())
    }

    /// `setCversionPzxid`.
    fn set_cversion_pzxid(&mut self, path: &str, cversion: i32, zxid: i64) -> Result<(), i32> {
        let path = path.strip_suffix('/').unwrap_or(path);
        self.change(path, |n| {
            let cv = if cversion == -1 {
                n.stat.cversion.wrapping_add(1)
            } else {
                cversion
            };
            if cv > n.stat.cversion {
                n.stat.cversion = cv;
                n.stat.pzxid = zxid;
            }
        })
        .ok_or(code::NO_NODE)
    }

    /// `killSession`: the txn's paths, then the session's other ephemerals.
    fn kill_session(&mut self, session: i64, zxid: i64, in_txn: Option<&Vec<String>>) {
        let local = self.ephemerals.remove(&session);
        if let Some(paths) = in_txn {
            for p in paths {
                let _ = self.delete_node(p, zxid);
            }
        }
        let Some(mut local) = local else {
            return;
        };
        if let Some(paths) = in_txn {
            for p in paths {
                local.remove(p.as_str());
            }
            if !local.is_empty() {
                tracing::warn!(
                    "Unexpected extra paths under session 0x{session:x} which are not in txn 0x{zxid:x}: {local:?}"
                );
            }
        }
        for p in local {
            let _ = self.delete_node(&p, zxid);
        }
    }

    /// `getMaxPrefixWithQuota`.
    fn max_prefix_with_quota(&self, path: &str) -> Option<String> {
        if self.quotas.is_empty() {
            return None;
        }
        let parts: Vec<&str> = path.split('/').filter(|s| !s.trim().is_empty()).collect();
        let mut best = None;
        let mut cur = String::new();
        for p in parts {
            cur.push('/');
            cur.push_str(p);
            if self.quotas.contains(&cur) {
                best = Some(cur.clone());
            }
        }
        best.filter(|b| b != "/")
    }

    /// `updateQuotaStat`: the stat node's data changes; its stat does not.
    fn update_quota_stat(&mut self, prefix: &str, bytes: i64, count: i32) {
        let stat_path = format!("{QUOTA}{prefix}/{STAT_NODE}");
        let Some(n) = self.nodes.get_mut(stat_path.as_str()) else {
            tracing::error!("Missing node for stat {stat_path}");
            return;
        };
        let d = stats_track_update(n.data.as_deref().unwrap_or(&[]), count.into(), bytes);
        n.data = Some(Arc::from(d));
    }

    /// `updateQuotaForPath`: count the subtree, write `count=N,bytes=M`.
    fn update_quota_for_path(&mut self, path: &str) {
        let (mut count, mut bytes) = (0i64, 0i64);
        if let Some(n) = self.get(path) {
            count += 1;
            bytes += n.data_len();
            let prefix = format!("{}/", key(path));
            for (_, n) in self
                .nodes
                .range::<_, str>((
                    std::ops::Bound::Excluded(prefix.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(&prefix))
            {
                count += 1;
                bytes += n.data_len();
            }
        }
        let stat_path = format!("{QUOTA}{path}/{STAT_NODE}");
        let text = stats_track_text(count, bytes, &[]);
        if self
            .change(&stat_path, |n| n.data = Some(Arc::from(text)))
            .is_none()
        {
            tracing::warn!("Missing quota stat node {stat_path}");
        }
    }

    /// `setupQuota` after loading a snapshot.
    fn setup_quota(&mut self) {
        let suffix = format!("/{LIMIT_NODE}");
        let limits: Vec<String> = self
            .nodes
            .keys()
            .filter(|k| k.starts_with(&format!("{QUOTA}/")) && k.ends_with(&suffix))
            .map(|k| k[QUOTA.len()..k.len() - suffix.len()].to_string())
            .collect();
        for real in limits {
            // Java counts only limit nodes that are leaves.
            if !self
                .children(&format!("{QUOTA}{real}/{LIMIT_NODE}"))
                .is_empty()
            {
                continue;
            }
            self.update_quota_for_path(&real);
            if !real.is_empty() {
                self.quotas.insert(real);
            }
        }
    }

    /// `ZKDatabase.initConfigInZKDatabase`: the config node holds the quorum config text.
    pub fn set_config(&mut self, text: &[u8], version: i64, time: i64) {
        if self.get(CONFIG).is_none() {
            self.put(CONFIG, Node::empty());
            let read = Some(vec![Acl::world(1)]);
            let _ = self.set_acl(CONFIG, read.as_ref(), -1);
        }
        let _ = self.set_data(CONFIG, Some(text), -1, version, time);
    }

    /// Takes the config node out as if it had never been added: a 3.4 tree has none (3.5's
    /// `DataTree` constructor adds it with `addConfigNode`, which changes no stat of
    /// `/zookeeper`).
    pub fn drop_config_node(&mut self) {
        if let Some(node) = self.nodes.remove(key(CONFIG)) {
            self.digest = self.digest.wrapping_sub(node_digest(CONFIG, &node));
            self.acls.remove_usage(node.acl);
        }
    }

    /// Applies a txn as a Java follower applies a committed one (`ZKDatabase.processTxn`:
    /// sessions, then `DataTree.processTxn`). Returns the error code (0 for success), which
    /// Java ignores but logs at debug level. A digest the txn carries is compared with the
    /// tree's afterwards.
    pub fn process(&mut self, txn: &Txn) -> i32 {
        let h = &txn.header;
        match &txn.record {
            Some(TxnRecord::CreateSession { timeout }) if h.op == opcode::CREATE_SESSION => {
                self.sessions.insert(h.client_id, *timeout);
            }
            _ if h.op == opcode::CLOSE_SESSION => {
                self.sessions.remove(&h.client_id);
            }
            _ => {}
        }
        let rc = self.process_txn(h, txn.record.as_ref(), false);
        if let Some(d) = txn.digest
            && d.version == DIGEST_VERSION
            && d.tree_digest != self.digest
        {
            self.digest_mismatches += 1;
            if self.first_mismatch.is_none() {
                self.first_mismatch = Some(h.zxid);
                tracing::error!(
                    "First digest mismatch on txn 0x{:x} ({}): expected digest {}, actual digest {}",
                    h.zxid,
                    opcode::name(h.op),
                    d.tree_digest,
                    self.digest
                );
            }
        }
        rc
    }

    fn process_txn(&mut self, h: &TxnHeader, rec: Option<&TxnRecord>, sub: bool) -> i32 {
        use opcode::*;
        let zxid = h.zxid;
        let mut path_for_fixup = None;
        let rc = match (h.op, rec) {
            (
                CREATE | CREATE2,
                Some(TxnRecord::Create {
                    path,
                    data,
                    acl,
                    ephemeral,
                    parent_cversion,
                }),
            ) => {
                if h.op == CREATE {
                    path_for_fixup = Some((path.clone(), *parent_cversion));
                }
                let owner = if *ephemeral { h.client_id } else { 0 };
                self.create_node(
                    path,
                    data.as_deref(),
                    acl.as_ref(),
                    owner,
                    *parent_cversion,
                    zxid,
                    h.time,
                )
            }
            (
                CREATE_TTL,
                Some(TxnRecord::CreateTtl {
                    path,
                    data,
                    acl,
                    parent_cversion,
                    ttl,
                }),
            ) => {
                // EphemeralType.TTL.toEphemeralOwner
                let owner = EXTENDED_MASK | ttl;
                self.create_node(
                    path,
                    data.as_deref(),
                    acl.as_ref(),
                    owner,
                    *parent_cversion,
                    zxid,
                    h.time,
                )
            }
            (
                CREATE_CONTAINER,
                Some(TxnRecord::CreateContainer {
                    path,
                    data,
                    acl,
                    parent_cversion,
                }),
            ) => self.create_node(
                path,
                data.as_deref(),
                acl.as_ref(),
                CONTAINER_OWNER,
                *parent_cversion,
                zxid,
                h.time,
            ),
            (DELETE | DELETE_CONTAINER, Some(TxnRecord::Delete { path })) => {
                self.delete_node(path, zxid)
            }
            (
                SET_DATA | RECONFIG,
                Some(TxnRecord::SetData {
                    path,
                    data,
                    version,
                }),
            ) => self.set_data(path, data.as_deref(), *version, zxid, h.time),
            (SET_ACL, Some(TxnRecord::SetAcl { path, acl, version })) => {
                self.set_acl(path, acl.as_ref(), *version)
            }
            (CLOSE_SESSION, r) => {
                let paths = match r {
                    Some(TxnRecord::CloseSession { paths }) => paths.as_ref(),
                    _ => None,
                };
                self.kill_session(h.client_id, zxid, paths);
                Ok(())
            }
            (ERROR, Some(TxnRecord::Error { err })) => Err(*err),
            (MULTI, Some(TxnRecord::Multi(subs))) => Err(self.process_multi(h, subs)),
            _ => Ok(()),
        };
        let mut err = match rc {
            Ok(()) => code::OK,
            Err(e) => e,
        };
        if err == code::NODE_EXISTS
            && let Some((path, pcv)) = path_for_fixup
            && let Some((parent, _)) = split_path(&path)
            && self.set_cversion_pzxid(parent, pcv, zxid).is_err()
        {
            tracing::error!("Failed to set parent cversion for: {parent}");
            err = code::NO_NODE;
        }
        if !sub && zxid > self.last_processed_zxid {
            self.last_processed_zxid = zxid;
        }
        err
    }

    /// The multi branch of `processTxn`: the first sub-txn's error (0 if none).
    fn process_multi(&mut self, h: &TxnHeader, subs: &[(i32, Vec<u8>)]) -> i32 {
        use opcode::*;
        let failed = subs.iter().any(|(t, _)| *t == ERROR);
        let mut post_failed = false;
        let mut err = 0;
        for (t, data) in subs {
            if !matches!(
                *t,
                CREATE
                    | CREATE2
                    | CREATE_TTL
                    | CREATE_CONTAINER
                    | DELETE
                    | DELETE_CONTAINER
                    | SET_DATA
                    | ERROR
                    | CHECK
            ) {
                // Java: IOException "Invalid type of op", the rest of the multi is skipped.
                tracing::debug!("multi 0x{:x}: invalid type of op {t}", h.zxid);
                return err;
            }
            if *t == ERROR {
                post_failed = true;
            }
            let (mut op, mut rec) = match decode_record(*t, data) {
                Ok((Some(r), _)) => (*t, r),
                _ => {
                    tracing::debug!("multi 0x{:x}: malformed sub-txn of type {t}", h.zxid);
                    return err;
                }
            };
            if failed && op != ERROR {
                op = ERROR;
                rec = TxnRecord::Error {
                    err: if post_failed {
                        code::RUNTIME_INCONSISTENCY
                    } else {
                        code::OK
                    },
                };
            }
            let sub_h = TxnHeader { op, ..*h };
            let e = self.process_txn(&sub_h, Some(&rec), true);
            if e != 0 && err == 0 {
                err = e;
            }
        }
        err
    }

    /// Builds a tree from snapshot items (`FileSnap.deserialize`), checking structure.
    pub fn from_items(
        items: impl IntoIterator<Item = Result<SnapItem, String>>,
    ) -> Result<(DataTree, Option<(i64, i64)>), String> {
        let mut b = TreeBuilder::new();
        for item in items {
            b.push(item?)?;
        }
        b.finish()
    }

    /// The same node data, stats and ACL lists (ids may differ: each server numbers its own
    /// cache), and the same sessions. For tests and checks.
    pub fn same_as(&self, other: &DataTree) -> Result<(), String> {
        if self.nodes.len() != other.nodes.len() {
            return Err(format!(
                "{} nodes vs {}",
                self.nodes.len(),
                other.nodes.len()
            ));
        }
        for (p, a) in &self.nodes {
            let b = other.nodes.get(p).ok_or_else(|| format!("{p:?} missing"))?;
            if a.data != b.data || a.stat != b.stat {
                return Err(format!("{p:?}: {a:?} vs {b:?}"));
            }
            if self.acls.get(a.acl) != other.acls.get(b.acl) {
                return Err(format!("{p:?}: ACL differs"));
            }
        }
        if self.sessions != other.sessions {
            return Err("sessions differ".into());
        }
        Ok(())
    }
}

/// Builds a [`DataTree`] from snapshot items as they are read (`DataTree.deserialize`).
pub struct TreeBuilder {
    t: DataTree,
    digest: Option<(i64, i64)>,
}

impl Default for TreeBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TreeBuilder {
    pub fn new() -> TreeBuilder {
        TreeBuilder {
            t: DataTree {
                nodes: OrdMap::new(),
                acls: AclCache::default(),
                sessions: OrdMap::new(),
                ephemerals: HashMap::new(),
                quotas: BTreeSet::new(),
                digest: 0,
                last_processed_zxid: 0,
                digest_mismatches: 0,
                first_mismatch: None,
                writes_per_namespace: OrdMap::new(),
            },
            digest: None,
        }
    }

    pub fn push(&mut self, item: SnapItem) -> Result<(), String> {
        let t = &mut self.t;
        match item {
            SnapItem::Session { id, timeout } => {
                t.sessions.insert(id, timeout);
            }
            SnapItem::AclEntry { id, acls } => {
                if t.acls.index < id {
                    t.acls.index = id;
                }
                let list = Arc::new(acls);
                t.acls.by_id.insert(id, list.clone());
                t.acls.by_list.insert(list, id);
                t.acls.refs.insert(id, 0);
            }
            SnapItem::Node {
                path,
                data,
                acl,
                stat,
            } => {
                if !path.is_empty() {
                    let (parent, _) = split_path(&path)
                        .ok_or_else(|| format!("node path {path:?} has no '/'"))?;
                    if !t.nodes.contains_key(parent) {
                        return Err(format!(
                            "Invalid Datatree, unable to find parent {parent} of path {path}"
                        ));
                    }
                    let owner = stat.ephemeral_owner;
                    let (c, ttl) = owner_kind(owner);
                    if !c && !ttl && owner != 0 {
                        t.ephemerals
                            .entry(owner)
                            .or_default()
                            .insert(Arc::from(path.as_str()));
                    }
                }
                t.acls.add_usage(acl);
                t.put(
                    &path,
                    Node {
                        data: data.map(Arc::from),
                        acl,
                        stat,
                    },
                );
            }
            SnapItem::Digest {
                zxid,
                version,
                digest,
            } if version == DIGEST_VERSION => self.digest = Some((zxid, digest)),
            _ => {}
        }
        Ok(())
    }

    /// The tree (quotas set up, unused ACLs dropped) and the digest the snapshot held.
    pub fn finish(mut self) -> Result<(DataTree, Option<(i64, i64)>), String> {
        if !self.t.nodes.contains_key("") {
            return Err("the snapshot has no root node".into());
        }
        self.t.setup_quota();
        self.t.acls.purge_unused();
        Ok((self.t, self.digest))
    }
}

/// `world:anyone`.
pub fn anyone() -> Id {
    Id {
        scheme: Some(b"world".to_vec()),
        id: Some(b"anyone".to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::txn::{TxnDigest, encode_record};

    fn txn(zxid: i64, op: i32, rec: Option<TxnRecord>) -> Txn {
        Txn {
            header: TxnHeader {
                client_id: 0x77,
                cxid: 1,
                zxid,
                time: 1000 + zxid,
                op,
            },
            record: rec,
            digest: None,
        }
    }

    fn create(zxid: i64, path: &str, eph: bool, pcv: i32) -> Txn {
        txn(
            zxid,
            opcode::CREATE,
            Some(TxnRecord::Create {
                path: path.into(),
                data: Some(path.as_bytes().to_vec()),
                acl: Some(vec![Acl::world(31)]),
                ephemeral: eph,
                parent_cversion: pcv,
            }),
        )
    }

    /// Java's `updateWriteStat`: a create, a setData and a delete under `/app` count the path's
    /// length plus the data's; `/zookeeper/config`, set at start, counts under `zookeeper`.
    #[test]
    fn writes_are_counted_per_namespace() {
        let mut t = DataTree::new();
        t.set_config(b"server.1=a:1:2:participant\nversion=0", 0, 1);
        t.create_node("/app", Some(b"12345"), None, 0, -1, 1, 1)
            .unwrap();
        t.set_data("/app", Some(b"1"), 1, 2, 2).unwrap();
        t.delete_node("/app", 3).unwrap();
        assert!(t.create_node("/app/x", None, None, 0, -1, 4, 4).is_err());
        let app = &t.writes_per_namespace["app"];
        assert_eq!((app.count, app.sum, app.min, app.max), (3, 9 + 5 + 4, 4, 9));
        assert_eq!(app.median(), 5.0);
        let zk = &t.writes_per_namespace["zookeeper"];
        assert_eq!((zk.count, zk.sum), (1, 17 + 36));
    }

    #[test]
    fn create_delete_stats_and_digest() {
        let mut t = DataTree::new();
        assert_eq!(t.node_count(), 4);
        assert_eq!(
            t.acl_cache().get(t.get(CONFIG).unwrap().acl).unwrap()[0].perms,
            1
        );
        assert_eq!(t.get(CONFIG).unwrap().stat.aversion, -1);
        // Digest of the 3.8 capture's `create /x y` on a fresh tree: 0x1d7936b7b.
        let mut c = create(0x1_0000_0002, "/x", false, 1);
        if let Some(TxnRecord::Create { data, .. }) = &mut c.record {
            *data = Some(b"y".to_vec());
        }
        c.header = TxnHeader {
            client_id: 0x010000193d7d0000,
            cxid: 1,
            zxid: 0x1_0000_0002,
            time: 0x1a228322f99,
            op: 1,
        };
        c.digest = Some(TxnDigest {
            version: 2,
            tree_digest: 0x1_d793_6b7b,
        });
        assert_eq!(t.process(&c), 0);
        assert_eq!(t.digest_mismatches, 0, "digest {:x}", t.digest());
        let root = t.get("/").unwrap();
        assert_eq!((root.stat.cversion, root.stat.pzxid), (1, 0x1_0000_0002));
        // Ephemeral + closeSession.
        assert_eq!(t.process(&create(0x1_0000_0003, "/x/e", true, -1)), 0);
        assert_eq!(t.get("/x").unwrap().stat.cversion, 1);
        assert_eq!(
            t.process(&txn(0x1_0000_0004, opcode::CLOSE_SESSION, None)),
            0
        );
        assert!(t.get("/x/e").is_none());
        assert_eq!(t.get("/x").unwrap().stat.pzxid, 0x1_0000_0004);
        // Existing node: NODEEXISTS, parent cversion fixed up from the txn.
        assert_eq!(
            t.process(&create(0x1_0000_0005, "/x", false, 7)),
            code::NODE_EXISTS
        );
        assert_eq!(t.get("/").unwrap().stat.cversion, 7);
        assert_eq!(t.last_processed_zxid, 0x1_0000_0005);
        // Digest from scratch equals the running one.
        let (u, _) = DataTree::from_items(snapshot_items(&t)).unwrap();
        assert_eq!(u.digest(), t.digest());
        t.same_as(&u).unwrap();
    }

    fn snapshot_items(t: &DataTree) -> Vec<Result<SnapItem, String>> {
        let mut bytes = Vec::new();
        t.snapshot()
            .write_body(&mut |b| {
                bytes.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        let mut d = crate::wire::txn::SnapshotDecoder::new();
        let mut out = Vec::new();
        let mut at = 0;
        while let Some((i, n)) = d.next(&bytes[at..]).unwrap() {
            at += n;
            let end = i == SnapItem::End;
            out.push(Ok(i));
            if end {
                break;
            }
        }
        out
    }

    #[test]
    fn multi_failed_is_all_errors_and_acl_refs() {
        let mut t = DataTree::new();
        let sub = |op, r: &TxnRecord| (op, encode_record(r).unwrap());
        let c = TxnRecord::Create {
            path: "/m".into(),
            data: None,
            acl: Some(vec![Acl::world(3)]),
            ephemeral: false,
            parent_cversion: 1,
        };
        let ok = txn(
            5,
            opcode::MULTI,
            Some(TxnRecord::Multi(vec![sub(opcode::CREATE, &c)])),
        );
        assert_eq!(t.process(&ok), 0);
        assert_eq!(t.acl_cache().len(), 2);
        let failed = txn(
            6,
            opcode::MULTI,
            Some(TxnRecord::Multi(vec![
                sub(opcode::DELETE, &TxnRecord::Delete { path: "/m".into() }),
                sub(opcode::ERROR, &TxnRecord::Error { err: -101 }),
            ])),
        );
        assert_eq!(t.process(&failed), -101);
        assert!(t.get("/m").is_some());
        assert_eq!(
            t.process(&txn(
                7,
                opcode::DELETE,
                Some(TxnRecord::Delete { path: "/m".into() })
            )),
            0
        );
        assert_eq!(t.acl_cache().len(), 1, "the list's last user is gone");
        assert_eq!(
            t.process(&txn(
                8,
                opcode::DELETE,
                Some(TxnRecord::Delete { path: "/m".into() })
            )),
            code::NO_NODE
        );
        assert_eq!(t.get("/").unwrap().stat.pzxid, 8);
    }

    #[test]
    fn quota_stats_follow_writes() {
        let mut t = DataTree::new();
        let mk = |t: &mut DataTree, z, p: &str, d: &[u8]| {
            t.create_node(p, Some(d), None, 0, -1, z, 0).unwrap();
        };
        mk(&mut t, 1, "/q", b"ab");
        mk(&mut t, 2, "/zookeeper/quota/q", b"");
        mk(
            &mut t,
            3,
            "/zookeeper/quota/q/zookeeper_limits",
            b"count=10,bytes=-1",
        );
        mk(
            &mut t,
            4,
            "/zookeeper/quota/q/zookeeper_stats",
            b"count=0,bytes=0",
        );
        assert_eq!(
            &*t.get("/zookeeper/quota/q/zookeeper_stats")
                .unwrap()
                .data
                .clone()
                .unwrap(),
            b"count=1,bytes=2"
        );
        mk(&mut t, 5, "/q/c", b"xyz");
        assert_eq!(
            &*t.get("/zookeeper/quota/q/zookeeper_stats")
                .unwrap()
                .data
                .clone()
                .unwrap(),
            b"count=2,bytes=5"
        );
        assert_eq!(
            stats_track_update(b"count=1,bytes=2=;byteHardLimit=5", 1, 1),
            b"count=2,bytes=3=;byteHardLimit=5"
        );
    }
}
