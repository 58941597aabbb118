//! The workload of a campaign: concurrent client sessions working on a few znodes (create,
//! setData with and without a version, getData, sync then getData) against a live ensemble,
//! every operation recorded as it is invoked and as it completes, in the history format
//! [`super::history`] reads. Faults come from elsewhere (the nemesis, or the user).
//!
//! Each client is a sequence of processes: a session is one process, and once an operation's
//! outcome is unknown (a time-out, a lost connection, an error that does not say whether the
//! write happened) the session is dropped and the next one is a new process, as Jepsen does.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use crate::net::client::Client;
use crate::wire::client::ReplyHeader;

/// What the workload does.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    /// The servers' client ports; client `i` starts on server `i % n` and moves on after a
    /// failure.
    pub servers: Vec<SocketAddr>,
    pub clients: usize,
    pub keys: usize,
    pub duration: Duration,
    pub seed: u64,
    /// How long one operation may take before its outcome is unknown.
    pub op_timeout: Duration,
    /// The session timeout asked for.
    pub session_ms: i32,
    /// The parent znode of the keys, created if missing (`/zkfle-chaos/SEED-UNIXTIME`).
    pub root: String,
}

/// The bounds of a workload: a campaign's schedule is a minute; a user's run is bounded too.
pub const MAX_CLIENTS: usize = 64;
pub const MAX_KEYS: usize = 64;

/// Counts of what ran.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkloadStats {
    pub operations: u64,
    pub unknown: u64,
    pub sessions: u64,
    /// Connection attempts that failed before a session opened (no operation recorded).
    pub refused: u64,
}

/// Writes history lines as events happen: an invocation before its request is sent, a
/// completion after its reply came, so line order is real-time order.
pub struct Recorder {
    out: Mutex<Box<dyn Write + Send>>,
    start: Instant,
}

impl Recorder {
    pub fn new(out: Box<dyn Write + Send>) -> Recorder {
        Recorder {
            out: Mutex::new(out),
            start: Instant::now(),
        }
    }

    /// Writes `event` with its time (seconds since the recorder began).
    pub fn record(&self, mut event: Value) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        event["time"] = json!((self.start.elapsed().as_secs_f64() * 1e6).round() / 1e6);
        writeln!(out, "{event}")
    }

    pub fn flush(&self) -> std::io::Result<()> {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// `KeeperException.Code` names; the first three say the request did not take effect, any
/// other error leaves its outcome unknown.
fn code_name(err: i32) -> (String, bool) {
    let (name, definite) = match err {
        -101 => ("NoNode", true),
        -110 => ("NodeExists", true),
        -103 => ("BadVersion", true),
        -4 => ("ConnectionLoss", false),
        -7 => ("OperationTimeout", false),
        -112 => ("SessionExpired", false),
        -118 => ("SessionMoved", false),
        -119 => ("NotReadOnly", false),
        -13 => ("NewConfigNoQuorum", false),
        -14 => ("ReconfigInProgress", false),
        other => return (format!("code {other}"), false),
    };
    (name.to_string(), definite)
}

/// The path of key `i`.
pub fn key_path(root: &str, i: usize) -> String {
    format!("{root}/k{i}")
}

/// One operation's completion, as recorded.
fn completion(h: &ReplyHeader, ok: Value) -> (Value, bool) {
    if h.err == 0 {
        let mut v = ok;
        v["type"] = json!("ok");
        v["zxid"] = json!(format!("0x{:x}", h.zxid));
        return (v, false);
    }
    let (name, definite) = code_name(h.err);
    let kind = if definite { "fail" } else { "info" };
    (json!({"type": kind, "error": name}), !definite)
}

/// Creates `root` and its parents (existing ones are fine) through any server that answers,
/// trying for up to `within`: a server that has just elected may not serve clients until it
/// has synced.
pub fn prepare(opts: &WorkloadOptions, within: Duration) -> Result<(), String> {
    let end = Instant::now() + within;
    loop {
        match prepare_once(opts) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= end => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn prepare_once(opts: &WorkloadOptions) -> Result<(), String> {
    let mut last = String::from("no server given");
    for &server in &opts.servers {
        let mut c = match Client::connect(server, opts.session_ms, opts.op_timeout) {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let mut path = String::new();
        let mut failed = None;
        for part in opts.root.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            match c.create(&path, b"") {
                Ok(0 | -110) => {}
                Ok(err) => failed = Some(format!("creating {path}: {}", code_name(err).0)),
                Err(e) => failed = Some(e),
            }
            if failed.is_some() {
                break;
            }
        }
        c.close();
        match failed {
            None => return Ok(()),
            Some(e) => last = format!("{server}: {e}"),
        }
    }
    Err(last)
}

/// Runs the workload for its duration, recording into `recorder`.
pub fn run(opts: &WorkloadOptions, recorder: &Recorder) -> Result<WorkloadStats, String> {
    let deadline = Instant::now() + opts.duration;
    let next_process = AtomicU64::new(0);
    let stats = Mutex::new(WorkloadStats::default());
    let failure: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for client in 0..opts.clients {
            let (next_process, stats, failure) = (&next_process, &stats, &failure);
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(
                    opts.seed ^ (client as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                );
                let mut mine = WorkloadStats::default();
                if let Err(e) = client_loop(
                    opts,
                    recorder,
                    client,
                    &mut rng,
                    next_process,
                    deadline,
                    &mut mine,
                ) {
                    failure
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
                let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                s.operations += mine.operations;
                s.unknown += mine.unknown;
                s.sessions += mine.sessions;
                s.refused += mine.refused;
            });
        }
    });
    recorder
        .flush()
        .map_err(|e| format!("writing the history: {e}"))?;
    match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(stats.into_inner().unwrap_or_else(|e| e.into_inner())),
    }
}

/// One client: sessions one after another until the deadline. Only writing the history can
/// fail it; every server failure is an outcome.
fn client_loop(
    opts: &WorkloadOptions,
    recorder: &Recorder,
    client: usize,
    rng: &mut StdRng,
    next_process: &AtomicU64,
    deadline: Instant,
    stats: &mut WorkloadStats,
) -> Result<(), String> {
    let record = |v: Value| {
        recorder
            .record(v)
            .map_err(|e| format!("writing the history: {e}"))
    };
    let mut attempt = client;
    let mut sequence = 0u64;
    while Instant::now() < deadline {
        let server = opts.servers[attempt % opts.servers.len()];
        attempt += 1;
        let mut session = match Client::connect(server, opts.session_ms, opts.op_timeout) {
            Ok(c) => c,
            Err(_) => {
                stats.refused += 1;
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        stats.sessions += 1;
        let process = next_process.fetch_add(1, Ordering::Relaxed);
        // The versions this session last saw, for its conditional sets.
        let mut versions = vec![None::<i32>; opts.keys];
        let mut lost = false;
        while !lost && Instant::now() < deadline {
            let k = rng.random_range(0..opts.keys);
            let key = key_path(&opts.root, k);
            sequence += 1;
            let value = format!("c{client}-{sequence}");
            let pick = rng.random_range(0..100u32);
            let base = json!({"process": process, "key": key, "server": server.to_string()});
            let invoke = |mut v: Value, f: &str| {
                v["type"] = json!("invoke");
                v["f"] = json!(f);
                v
            };
            let (f, result) = match pick {
                0..15 => {
                    let mut v = invoke(base.clone(), "create");
                    v["value"] = json!(value);
                    record(v)?;
                    let r = session
                        .create_one(&key, value.as_bytes())
                        .map(|h| completion(&h, json!({"version": 0})));
                    if matches!(r, Ok((ref v, _)) if v["type"] == "ok") {
                        versions[k] = Some(0);
                    }
                    ("create", r)
                }
                15..65 => {
                    // Half of the sets are conditional on the version this session last saw
                    // (or a guess), so both outcomes of a compare come up.
                    let version = if pick < 40 {
                        -1
                    } else {
                        versions[k].unwrap_or_else(|| rng.random_range(0..3))
                    };
                    let mut v = invoke(base.clone(), "set");
                    v["value"] = json!(value);
                    v["version"] = json!(version);
                    record(v)?;
                    let r = session
                        .set_data(&key, value.as_bytes(), version)
                        .map(|(h, stat)| {
                            let new = stat.map(|s| s.version);
                            if h.err == 0 {
                                versions[k] = new;
                            }
                            completion(&h, json!({"version": new}))
                        });
                    ("set", r)
                }
                65..90 => {
                    record(invoke(base.clone(), "get"))?;
                    let r = get(&mut session, &key, &mut versions[k]);
                    ("get", r)
                }
                _ => {
                    record(invoke(base.clone(), "sync-get"))?;
                    let r = session.sync(&key).and_then(|h| {
                        if h.err != 0 && !code_name(h.err).1 {
                            return Ok(completion(&h, json!({})));
                        }
                        get(&mut session, &key, &mut versions[k])
                    });
                    ("sync-get", r)
                }
            };
            let (mut done, unknown) = match result {
                Ok(x) => x,
                Err(e) => (json!({"type": "info", "error": e}), true),
            };
            done["process"] = json!(process);
            done["f"] = json!(f);
            record(done)?;
            stats.operations += 1;
            if unknown {
                stats.unknown += 1;
                lost = true;
            }
        }
        if !lost {
            session.close();
        }
    }
    Ok(())
}

/// getData of `key`: ok with the value and version, or the failure.
fn get(
    session: &mut Client,
    key: &str,
    version: &mut Option<i32>,
) -> Result<(Value, bool), String> {
    let (h, data) = session.get_data(key)?;
    let ok = match &data {
        Some((bytes, stat)) => {
            *version = Some(stat.version);
            json!({"value": String::from_utf8_lossy(bytes), "version": stat.version})
        }
        None => json!({}),
    };
    Ok(completion(&h, ok))
}

/// After the faults healed: each server, through a session of its own, syncs and reads every
/// key; each read is recorded as a `final` line. A server that cannot be read yet (still
/// recovering from the faults) is tried again every 500 ms for up to `within`; one never
/// read is returned with the reason, and has no final lines.
/// A `final` line of the history: what `server` holds for `key` at the end.
fn final_line(server: &str, key: &str, value: Value, version: Value) -> Value {
    json!({"type": "final", "server": server, "key": key, "value": value, "version": version})
}

/// The zxid a server's `srvr` states (its data tree's last processed txn), or why not.
fn srvr_zxid(server: SocketAddr, timeout: Duration) -> Result<i64, String> {
    use std::io::Read;
    let mut s =
        std::net::TcpStream::connect_timeout(&server, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.write_all(b"srvr").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    text.lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .and_then(|z| i64::from_str_radix(z.trim(), 16).ok())
        .ok_or_else(|| format!("srvr says no zxid: {:?}", text.lines().next().unwrap_or("")))
}

/// A zkfle voter's replica, as `final` lines: zkfle serves no client, so the keys are read
/// from the data directory it writes (the one `data_dir` gives, holding `version-2`; asked
/// for only then), once its `srvr` (at `client`) states at least the newest zxid the other
/// servers' do, within `within`.
/// `server` names it in the history. Its files are only read, while it runs.
pub fn final_from_data_dir(
    opts: &WorkloadOptions,
    recorder: &Recorder,
    server: &str,
    client: SocketAddr,
    data_dir: impl FnOnce() -> Result<std::path::PathBuf, String>,
    within: Duration,
) -> Result<(), String> {
    let give_up = Instant::now() + within;
    let newest = |timeout| {
        opts.servers
            .iter()
            .filter_map(|s| srvr_zxid(*s, timeout).ok())
            .max()
    };
    let target = newest(opts.op_timeout).ok_or("no other server states its zxid")?;
    loop {
        match srvr_zxid(client, opts.op_timeout) {
            Ok(z) if z >= target => break,
            Ok(z) if Instant::now() >= give_up => {
                return Err(format!(
                    "its replica did not catch up: zxid 0x{z:x}, the others' 0x{target:x}"
                ));
            }
            Err(e) if Instant::now() >= give_up => return Err(format!("srvr: {e}")),
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    // Read once it caught up (a copy of a container's directory is taken only now).
    let data_dir = data_dir()?;
    let loaded = crate::storage::db::load_tree(&data_dir.join("version-2"))
        .map_err(|e| format!("reading {}: {e}", data_dir.display()))?;
    for k in 0..opts.keys {
        let key = key_path(&opts.root, k);
        let (value, version) = match loaded.tree.get(&key) {
            Some(node) => (
                json!(String::from_utf8_lossy(
                    node.data.as_deref().unwrap_or_default()
                )),
                json!(node.stat.version),
            ),
            None => (Value::Null, Value::Null),
        };
        recorder
            .record(final_line(server, &key, value, version))
            .map_err(|e| format!("writing the history: {e}"))?;
    }
    Ok(())
}

pub fn final_reads(
    opts: &WorkloadOptions,
    recorder: &Recorder,
    within: Duration,
) -> Vec<(SocketAddr, String)> {
    let give_up = Instant::now() + within;
    let mut pending = opts.servers.clone();
    loop {
        let unread = final_reads_once(&pending, opts, recorder);
        if unread.is_empty() || Instant::now() >= give_up {
            return unread;
        }
        pending = unread.iter().map(|(s, _)| *s).collect();
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn final_reads_once(
    servers: &[SocketAddr],
    opts: &WorkloadOptions,
    recorder: &Recorder,
) -> Vec<(SocketAddr, String)> {
    let mut unread = Vec::new();
    for &server in servers {
        let read = || -> Result<Vec<Value>, String> {
            let mut c = Client::connect(server, opts.session_ms, opts.op_timeout)?;
            let h = c.sync(&opts.root)?;
            if h.err != 0 {
                return Err(format!("sync: {}", code_name(h.err).0));
            }
            let mut lines = Vec::new();
            for k in 0..opts.keys {
                let key = key_path(&opts.root, k);
                let (h, data) = c.get_data(&key)?;
                let (value, version) = match data {
                    Some((bytes, stat)) => {
                        (json!(String::from_utf8_lossy(&bytes)), json!(stat.version))
                    }
                    None if h.err == -101 => (Value::Null, Value::Null),
                    None => return Err(format!("getData {key}: {}", code_name(h.err).0)),
                };
                lines.push(final_line(&server.to_string(), &key, value, version));
            }
            c.close();
            Ok(lines)
        };
        match read() {
            Ok(lines) => {
                for line in lines {
                    if let Err(e) = recorder.record(line) {
                        unread.push((server, format!("writing the history: {e}")));
                        break;
                    }
                }
            }
            Err(e) => unread.push((server, e)),
        }
    }
    let _ = recorder.flush();
    unread
}
