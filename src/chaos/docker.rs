//! A campaign's ensemble in Docker: Java servers from any image with the official `zookeeper`
//! image's interface (`ZOO_MY_ID`, `ZOO_SERVERS`, ...), and `zkfle join` voters from zkfle's
//! image, on a bridge of their own; and the nemesis's hands on it (`docker kill`, `pause`,
//! iptables in a container's network namespace). Everything it creates carries the label
//! `zkfle.chaos` and is removed when it is dropped, whatever happened; containers left by a
//! campaign that died are removed by the next one.
//!
//! Docker is driven through its CLI, as a user's shell would: no client crate speaks to this
//! engine version without a registry, and the CLI's errors are the ones users know.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::net::probe::{self, ProbeOptions};
use crate::wire::ServerState;

/// One voter's container.
#[derive(Debug, Clone)]
pub struct Voter {
    pub sid: u64,
    pub image: String,
    /// `zkfle join` rather than a Java server (it answers no client requests).
    pub zkfle: bool,
    pub container: String,
    pub ip: Ipv4Addr,
    /// The host directory mounted at `/data` (and `/datalog` beside it).
    pub data: PathBuf,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct EnsembleSpec {
    /// One image per voter; `zkfle` ones run `zkfle join` (zkfle's image).
    pub images: Vec<String>,
    pub tick_ms: u32,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// Where the voters' data and configs live on the host.
    pub dir: PathBuf,
}

pub struct DockerEnsemble {
    pub voters: Vec<Voter>,
    pub network: String,
    /// The bridge's interface on the host, for tcpdump.
    pub bridge: String,
    label: String,
}

const LABEL: &str = "zkfle.chaos";
/// The fault file of a zkfle voter, in its data directory (`join --chaos-faults`).
const MEMBER_FAULT_FILE: &str = "zkfle-chaos-faults";

/// Runs `docker ARGS`: its stdout, or an error with its stderr.
pub fn docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("running docker: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "docker {}: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `image` runs `zkfle join` rather than a Java server.
pub fn is_zkfle_image(image: &str) -> bool {
    image.starts_with("zkfle/zkfle")
}

/// Whether an image is present (nothing is pulled: there may be no registry).
pub fn image_exists(image: &str) -> bool {
    docker(&["image", "inspect", "--format", "{{.Id}}", image]).is_ok()
}

/// Removes containers and networks of campaigns whose process is gone.
fn remove_stale() {
    remove_labelled(|pid| !Path::new(&format!("/proc/{pid}")).exists());
}

/// Removes this process's containers and bridge (a campaign interrupted: SIGINT, SIGTERM).
pub fn remove_own() {
    let me = std::process::id().to_string();
    remove_labelled(|pid| pid == me);
}

/// Removes the containers, then the networks, whose label (the campaign's process id) `which`
/// picks.
fn remove_labelled(which: impl Fn(&str) -> bool) {
    let listed = |what: &[&str]| -> Vec<(String, String)> {
        let format = format!("{{{{.{}}}}} {{{{.Label \"{LABEL}\"}}}}", what[0]);
        let mut args: Vec<&str> = what[1..].to_vec();
        let filter = format!("label={LABEL}");
        args.extend(["--filter", &filter, "--format", &format]);
        docker(&args)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?.to_string(), f.next()?.to_string()))
            })
            .collect()
    };
    for (id, pid) in listed(&["ID", "ps", "-a"]) {
        if which(&pid) {
            let _ = docker(&["rm", "-f", "-v", &id]);
        }
    }
    for (name, pid) in listed(&["Name", "network", "ls"]) {
        if which(&pid) {
            let _ = docker(&["network", "rm", &name]);
        }
    }
}

/// From now on, SIGINT or SIGTERM removes this process's containers and bridge before it
/// exits (130), as the end of a campaign does: a campaign leaves nothing behind, whatever
/// ends it (a SIGKILL's leftovers are removed by the next campaign).
pub fn remove_on_signal() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(remove_when_signalled);
    });
}

fn remove_when_signalled() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let signalled = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return false;
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.is_ok(),
            _ = term.recv() => true,
        }
    });
    if signalled {
        eprintln!("zkfle: chaos campaign interrupted: removing its containers and bridge");
        remove_own();
        std::process::exit(130);
    }
}

impl DockerEnsemble {
    /// Creates the bridge and starts every voter.
    pub fn start(spec: &EnsembleSpec) -> Result<DockerEnsemble, String> {
        if spec.images.len() < 3 || spec.images.len() > 7 {
            return Err(format!(
                "{} voters: a campaign runs 3 to 7",
                spec.images.len()
            ));
        }
        remove_stale();
        let pid = std::process::id();
        let label = pid.to_string();
        let network = format!("zkfle-chaos-{pid}");
        // An interface name has at most 15 characters.
        let bridge = format!("zkc{pid}");
        // A /24 of 172.29-31 no other bridge holds: tried in turn from one the pid picks.
        let mut subnet = None;
        for k in 0..64u32 {
            let third = (pid + k * 7) % 250 + 2;
            for second in [29u8, 30, 31] {
                let net = format!("172.{second}.{third}");
                let made = docker(&[
                    "network",
                    "create",
                    "--driver",
                    "bridge",
                    "--subnet",
                    &format!("{net}.0/24"),
                    "--label",
                    &format!("{LABEL}={label}"),
                    "-o",
                    &format!("com.docker.network.bridge.name={bridge}"),
                    &network,
                ]);
                if made.is_ok() {
                    subnet = Some(net);
                    break;
                }
            }
            if subnet.is_some() {
                break;
            }
        }
        let subnet = subnet.ok_or("no free 172.29-31.x.0/24 for the campaign's bridge")?;
        let mut ensemble = DockerEnsemble {
            voters: Vec::new(),
            network,
            bridge,
            label,
        };
        let n = spec.images.len();
        let servers: Vec<String> = (1..=n)
            .map(|sid| format!("server.{sid}=z{sid}:2888:3888;2181"))
            .collect();
        for (i, image) in spec.images.iter().enumerate() {
            let sid = i as u64 + 1;
            let zkfle = is_zkfle_image(image);
            let ip: Ipv4Addr = format!("{subnet}.{}", 10 + sid)
                .parse()
                .map_err(|e| format!("{e}"))?;
            let data = spec.dir.join(format!("z{sid}"));
            for sub in ["data", "datalog", "conf"] {
                std::fs::create_dir_all(data.join(sub))
                    .map_err(|e| format!("{}: {e}", data.display()))?;
            }
            let container = format!("{}-z{sid}", ensemble.network);
            let mut args: Vec<String> = vec![
                "run".into(),
                "-d".into(),
                "--name".into(),
                container.clone(),
                "--hostname".into(),
                format!("z{sid}"),
                "--network".into(),
                ensemble.network.clone(),
                "--ip".into(),
                ip.to_string(),
                "--label".into(),
                format!("{LABEL}={}", ensemble.label),
                "-v".into(),
                format!("{}:/data", data.join("data").display()),
                "-v".into(),
                format!("{}:/datalog", data.join("datalog").display()),
                "-e".into(),
                format!("ZOO_MY_ID={sid}"),
            ];
            if zkfle {
                let cfg = format!(
                    "tickTime={}\ninitLimit={}\nsyncLimit={}\ndataDir=/data\n{}\n",
                    spec.tick_ms,
                    spec.init_limit,
                    spec.sync_limit,
                    servers.join("\n")
                );
                let path = data.join("conf/zoo.cfg");
                std::fs::write(&path, cfg).map_err(|e| format!("{}: {e}", path.display()))?;
                args.extend([
                    "-v".into(),
                    format!("{}:/conf/zoo.cfg:ro", path.display()),
                    image.clone(),
                    "zkfle".into(),
                    "join".into(),
                    "--config".into(),
                    "/conf/zoo.cfg".into(),
                    "--data-dir".into(),
                    "/data".into(),
                    "--wire".into(),
                    "auto".into(),
                    "--chaos-faults".into(),
                    format!("/data/{MEMBER_FAULT_FILE}"),
                ]);
            } else {
                for (k, v) in [
                    ("ZOO_SERVERS", servers.join(" ")),
                    ("ZOO_TICK_TIME", spec.tick_ms.to_string()),
                    ("ZOO_INIT_LIMIT", spec.init_limit.to_string()),
                    ("ZOO_SYNC_LIMIT", spec.sync_limit.to_string()),
                    ("ZOO_STANDALONE_ENABLED", "false".into()),
                    ("ZOO_ADMINSERVER_ENABLED", "false".into()),
                    ("ZOO_4LW_COMMANDS_WHITELIST", "srvr,mntr,ruok".into()),
                ] {
                    args.extend(["-e".into(), format!("{k}={v}")]);
                }
                args.push(image.clone());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // Listed before it runs: a failure here removes what was made, this one too.
            ensemble.voters.push(Voter {
                sid,
                image: image.clone(),
                zkfle,
                container,
                ip,
                data,
            });
            docker(&args)?;
        }
        Ok(ensemble)
    }

    /// The members as a config (IP addresses), for decoding the bridge's capture.
    pub fn config(&self) -> crate::wire::QuorumConfig {
        let text: String = self
            .voters
            .iter()
            .map(|v| format!("server.{}={}:2888:3888:participant;2181\n", v.sid, v.ip))
            .collect();
        crate::wire::QuorumConfig::parse(&text).unwrap_or_default()
    }

    /// The Java servers' client ports (zkfle answers no client requests).
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.voters
            .iter()
            .filter(|v| !v.zkfle)
            .map(|v| SocketAddr::from((v.ip, 2181)))
            .collect()
    }

    /// Each voter's state and leader as its election port answers (None: no answer).
    pub fn states(&self) -> Vec<Option<(ServerState, i64)>> {
        let targets: Vec<String> = self
            .voters
            .iter()
            .map(|v| format!("{}:3888", v.ip))
            .collect();
        let opts = ProbeOptions {
            timeout: Duration::from_millis(1500),
            ..ProbeOptions::default()
        };
        probe::probe_all(&targets, &opts)
            .into_iter()
            .map(|r| r.ok().map(|a| (a.state, a.leader)))
            .collect()
    }

    /// The index of the voter leading now, when every answering voter agrees on it.
    pub fn leader(&self) -> Option<usize> {
        let states = self.states();
        let i = states
            .iter()
            .position(|s| matches!(s, Some((ServerState::Leading, _))))?;
        let sid = self.voters[i].sid as i64;
        states
            .iter()
            .flatten()
            .all(|&(_, leader)| leader == sid)
            .then_some(i)
    }

    /// Waits until every voter answers and all follow one leader: its index.
    pub fn wait_stable(&self, timeout: Duration) -> Result<usize, String> {
        let end = Instant::now() + timeout;
        loop {
            let states = self.states();
            let leading: Vec<usize> = states
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(s, Some((ServerState::Leading, _))))
                .map(|(i, _)| i)
                .collect();
            if let [l] = leading[..] {
                let sid = self.voters[l].sid as i64;
                if states.iter().all(|s| {
                    matches!(s, Some((ServerState::Leading | ServerState::Following, leader)) if *leader == sid)
                }) {
                    return Ok(l);
                }
            }
            if Instant::now() >= end {
                let seen: Vec<String> = states
                    .iter()
                    .zip(&self.voters)
                    .map(|(s, v)| match s {
                        Some((state, leader)) => format!("z{} {state:?} (leader {leader})", v.sid),
                        None => format!("z{} no answer", v.sid),
                    })
                    .collect();
                return Err(format!(
                    "not stable within {:.0} s: {}",
                    timeout.as_secs_f64(),
                    seen.join(", ")
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// A field of voter `i`'s container's state, as `docker inspect --format` prints it.
    fn inspect(&self, i: usize, format: &str) -> Result<String, String> {
        docker(&["inspect", "--format", format, &self.voters[i].container])
    }

    /// Whether voter `i`'s container runs (a paused one does).
    pub fn is_running(&self, i: usize) -> bool {
        self.inspect(i, "{{.State.Running}}")
            .is_ok_and(|s| s == "true")
    }

    pub fn kill(&self, i: usize) -> Result<(), String> {
        docker(&["kill", "-s", "KILL", &self.voters[i].container]).map(drop)
    }

    /// Starts voter `i` again (nothing when it runs).
    pub fn start_voter(&self, i: usize) -> Result<(), String> {
        docker(&["start", &self.voters[i].container]).map(drop)
    }

    pub fn pause(&self, i: usize) -> Result<(), String> {
        docker(&["pause", &self.voters[i].container]).map(drop)
    }

    /// Unpauses voter `i` when it is paused.
    pub fn unpause(&self, i: usize) -> Result<(), String> {
        if self.inspect(i, "{{.State.Paused}}")? == "true" {
            docker(&["unpause", &self.voters[i].container])?;
        }
        Ok(())
    }

    fn pid(&self, i: usize) -> Result<String, String> {
        let pid = self.inspect(i, "{{.State.Pid}}")?;
        if pid == "0" {
            return Err(format!("z{} is not running", self.voters[i].sid));
        }
        Ok(pid)
    }

    /// Runs iptables in voter `i`'s network namespace.
    fn iptables(&self, i: usize, args: &[&str]) -> Result<(), String> {
        let pid = self.pid(i)?;
        let out = Command::new("nsenter")
            .args(["-t", &pid, "-n", "iptables"])
            .args(args)
            .output()
            .map_err(|e| format!("running nsenter: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "iptables in z{}: {}",
                self.voters[i].sid,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Drops everything between voters `a` and `b`, both ways, in both namespaces. A voter
    /// that is not running is skipped (its rules would die with it).
    pub fn cut(&self, a: usize, b: usize) -> Result<(), String> {
        for (x, y) in [(a, b), (b, a)] {
            if self.pid(x).is_err() {
                continue;
            }
            let ip = self.voters[y].ip.to_string();
            self.iptables(x, &["-I", "INPUT", "-s", &ip, "-j", "DROP"])?;
            self.iptables(x, &["-I", "OUTPUT", "-d", &ip, "-j", "DROP"])?;
        }
        Ok(())
    }

    /// Removes every rule the nemesis added (the containers' own tables are otherwise empty).
    pub fn heal_network(&self) {
        for i in 0..self.voters.len() {
            let _ = self.iptables(i, &["-F"]);
        }
    }

    /// Kills voter `i`, empties its data directories (myid is written again from ZOO_MY_ID),
    /// and starts it.
    pub fn wipe(&self, i: usize) -> Result<(), String> {
        let _ = self.kill(i);
        for sub in ["data", "datalog"] {
            let dir = self.voters[i].data.join(sub);
            let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for e in entries.flatten() {
                let p = e.path();
                let removed = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                removed.map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
        self.start_voter(i)
    }

    /// Sets zkfle voter `i`'s own faults (`None`: none).
    pub fn member_faults(&self, i: usize, faults: Option<&str>) -> Result<(), String> {
        let path = self.voters[i].data.join("data").join(MEMBER_FAULT_FILE);
        let done = match faults {
            Some(text) => std::fs::write(&path, format!("{text}\n")),
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        };
        done.map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Every voter's output so far (the servers log to stdout in these images).
    pub fn logs(&self, i: usize) -> String {
        let out = Command::new("docker")
            .args(["logs", "--timestamps", &self.voters[i].container])
            .output();
        match out {
            Ok(o) => {
                let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
                s.push_str(&String::from_utf8_lossy(&o.stderr));
                s
            }
            Err(e) => format!("docker logs: {e}"),
        }
    }
}

impl Drop for DockerEnsemble {
    fn drop(&mut self) {
        for v in &self.voters {
            let _ = docker(&["rm", "-f", "-v", &v.container]);
        }
        let _ = docker(&["network", "rm", &self.network]);
    }
}
