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
    /// Its data directory in the container (`/data`, or a zkfle voter's `--data-dir`).
    pub data_dir: String,
    /// The host directories of its `/data` and `/datalog` that the campaign created (its own
    /// directories, or volumes its compose project made): only these are ever wiped.
    pub wipeable: Vec<PathBuf>,
    /// The host file a zkfle voter reads its own faults from (`join --chaos-faults` on a
    /// path the host reaches); `None`: its faults cannot be set.
    pub fault_file: Option<PathBuf>,
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
    /// A compose file of the user's to run instead of `images` (its services are the voters).
    pub compose: Option<PathBuf>,
}

/// A compose project the campaign started: `docker-compose -p PROJECT -f FILE -f OVERRIDE`.
struct Compose {
    command: Vec<String>,
    project: String,
    file: PathBuf,
    /// The labels the campaign adds to every service (see [`LABEL`]).
    overlay: PathBuf,
}

pub struct DockerEnsemble {
    pub voters: Vec<Voter>,
    pub network: String,
    /// The bridge's interface on the host, for tcpdump.
    pub bridge: String,
    /// tickTime (ms), initLimit and syncLimit (ticks) the voters run with.
    pub timing: (u32, u32, u32),
    label: String,
    compose: Option<Compose>,
}

const LABEL: &str = "zkfle.chaos";
/// A campaign's compose project is named this and its process id.
const COMPOSE_PREFIX: &str = "zkfle-chaos-";
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

/// Runs `command ARGS` (a compose command): its stdout, or an error with its stderr.
fn run(command: &[String], args: &[&str]) -> Result<String, String> {
    let (program, first) = command.split_first().ok_or("no compose command")?;
    let out = Command::new(program)
        .args(first)
        .args(args)
        .output()
        .map_err(|e| format!("running {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{} {}: {}",
            command.join(" "),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `docker compose` (the plugin) or `docker-compose`, whichever answers.
fn compose_command() -> Result<Vec<String>, String> {
    let answers = |c: &[&str]| {
        Command::new(c[0])
            .args(&c[1..])
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if answers(&["docker", "compose"]) {
        Ok(vec!["docker".into(), "compose".into()])
    } else if answers(&["docker-compose"]) {
        Ok(vec!["docker-compose".into()])
    } else {
        Err("--compose needs `docker compose` or `docker-compose`, and neither answers here".into())
    }
}

fn path_str(p: &Path) -> Result<String, String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{}: not UTF-8", p.display()))
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
    // A compose campaign's networks and volumes carry its project's name, not the label.
    for what in ["network", "volume"] {
        let listed = docker(&[
            what,
            "ls",
            "--filter",
            "label=com.docker.compose.project",
            "--format",
            "{{.Name}} {{.Label \"com.docker.compose.project\"}}",
        ])
        .unwrap_or_default();
        for line in listed.lines() {
            let mut f = line.split_whitespace();
            let (Some(name), Some(project)) = (f.next(), f.next()) else {
                continue;
            };
            if project
                .strip_prefix(COMPOSE_PREFIX)
                .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && which(pid))
            {
                let _ = docker(&[what, "rm", name]);
            }
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
    /// Creates the bridge and starts every voter (or the user's compose file).
    pub fn start(spec: &EnsembleSpec) -> Result<DockerEnsemble, String> {
        if let Some(file) = &spec.compose {
            return Self::start_compose(file, &spec.dir);
        }
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
            timing: (spec.tick_ms, spec.init_limit, spec.sync_limit),
            label,
            compose: None,
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
                data_dir: "/data".into(),
                wipeable: vec![data.join("data"), data.join("datalog")],
                fault_file: zkfle.then(|| data.join("data").join(MEMBER_FAULT_FILE)),
            });
            docker(&args)?;
        }
        Ok(ensemble)
    }

    /// Runs the user's compose file as its own project, with the campaign's label added to
    /// every service, and finds the voters in it: each container's sid (`ZOO_MY_ID`, the
    /// official image's interface), address on the network they share, and what of it the
    /// campaign may touch.
    fn start_compose(file: &Path, dir: &Path) -> Result<DockerEnsemble, String> {
        remove_stale();
        let command = compose_command()?;
        let pid = std::process::id();
        let project = format!("{COMPOSE_PREFIX}{pid}");
        let file = std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let services = run(&command, &["-f", &path_str(&file)?, "config", "--services"])?;
        let services: Vec<&str> = services.lines().filter(|l| !l.is_empty()).collect();
        if services.is_empty() {
            return Err(format!("{}: no services", file.display()));
        }
        let overlay = dir.join("compose-labels.yml");
        let mut text = String::from(
            "# The campaign's label on every service (zkfle chaos campaign --compose).\nservices:\n",
        );
        for s in &services {
            text.push_str(&format!(
                "  {s:?}:\n    labels:\n      {LABEL}: \"{pid}\"\n"
            ));
        }
        std::fs::write(&overlay, text).map_err(|e| format!("{}: {e}", overlay.display()))?;
        let mut ensemble = DockerEnsemble {
            voters: Vec::new(),
            network: String::new(),
            bridge: String::new(),
            timing: (2000, 5, 2),
            label: pid.to_string(),
            compose: Some(Compose {
                command,
                project,
                file,
                overlay,
            }),
        };
        // From here on, dropping the ensemble takes the project down, whatever failed.
        ensemble.compose_run(&["up", "-d"])?;
        let ids = ensemble.compose_run(&["ps", "-q"])?;
        let mut found = Vec::new();
        // Services without ZOO_MY_ID are not voters (a client, a monitor): left to run.
        let mut others = Vec::new();
        for id in ids.lines().filter(|l| !l.is_empty()) {
            let text = docker(&["inspect", id])?;
            let info: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("docker inspect {id}: {e}"))?;
            match ensemble.compose_voter(&info[0])? {
                Some(voter) => found.push(voter),
                None => others.push(
                    info[0]["Name"]
                        .as_str()
                        .unwrap_or(id)
                        .trim_start_matches('/')
                        .to_string(),
                ),
            }
        }
        if !(3..=7).contains(&found.len()) {
            return Err(format!(
                "{} voters in the compose file (services with ZOO_MY_ID, each voter's sid as the official image takes it){}: a campaign runs 3 to 7",
                found.len(),
                if others.is_empty() {
                    String::new()
                } else {
                    format!("; not voters: {}", others.join(", "))
                }
            ));
        }
        // The network every voter is on: the campaign's bridge.
        let mut shared: Option<Vec<(String, Ipv4Addr)>> = None;
        for (_, nets, _) in &found {
            shared = Some(match shared {
                None => nets.clone(),
                Some(s) => s
                    .into_iter()
                    .filter(|(n, _)| nets.iter().any(|(m, _)| m == n))
                    .collect(),
            });
        }
        let mut shared = shared.unwrap_or_default();
        shared.sort();
        let network = shared
            .first()
            .map(|(n, _)| n.clone())
            .ok_or("the compose file's voters share no network")?;
        for (mut voter, nets, timing) in found {
            voter.ip = nets
                .iter()
                .find(|(n, _)| *n == network)
                .map(|(_, ip)| *ip)
                .unwrap_or(voter.ip);
            if let Some(t) = timing {
                ensemble.timing = t;
            }
            ensemble.voters.push(voter);
        }
        ensemble.voters.sort_by_key(|v| v.sid);
        let sids: std::collections::BTreeSet<u64> = ensemble.voters.iter().map(|v| v.sid).collect();
        if sids.len() != ensemble.voters.len() {
            return Err("two services have the same ZOO_MY_ID".into());
        }
        if ensemble.voters.iter().all(|v| v.zkfle) {
            return Err(
                "every voter is zkfle: at least one Java server must serve the clients".into(),
            );
        }
        let bridge = docker(&[
            "network",
            "inspect",
            "--format",
            "{{index .Options \"com.docker.network.bridge.name\"}} {{.Id}}",
            &network,
        ])?;
        let mut parts = bridge.split_whitespace();
        let (name, id) = match (parts.next(), parts.next()) {
            (Some(id), None) => (None, id),
            (Some(name), Some(id)) => (Some(name), id),
            _ => return Err(format!("docker network inspect {network}: no id")),
        };
        ensemble.bridge = match name.filter(|n| *n != "<no" && !n.is_empty()) {
            Some(n) => n.to_string(),
            None => format!("br-{}", &id[..id.len().min(12)]),
        };
        ensemble.network = network;
        Ok(ensemble)
    }

    /// `docker-compose -p PROJECT -f FILE -f OVERLAY ARGS`.
    fn compose_run(&self, args: &[&str]) -> Result<String, String> {
        let c = self.compose.as_ref().ok_or("not a compose ensemble")?;
        let mut all = vec![
            "-p".to_string(),
            c.project.clone(),
            "-f".into(),
            path_str(&c.file)?,
            "-f".into(),
            path_str(&c.overlay)?,
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run(&c.command, &all)
    }

    /// One voter of a compose project from its container's `docker inspect`: the voter, its
    /// networks with its address on each, and the timing its environment gives (Java's);
    /// `None` for a container without `ZOO_MY_ID` (not a voter).
    #[allow(clippy::type_complexity)]
    fn compose_voter(
        &self,
        info: &serde_json::Value,
    ) -> Result<Option<(Voter, Vec<(String, Ipv4Addr)>, Option<(u32, u32, u32)>)>, String> {
        let container = info["Name"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches('/')
            .to_string();
        let env: Vec<&str> = info["Config"]["Env"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let var = |k: &str| {
            env.iter()
                .find_map(|e| e.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
        };
        let Some(sid) = var("ZOO_MY_ID") else {
            return Ok(None);
        };
        let sid: u64 = sid
            .trim()
            .parse()
            .map_err(|_| format!("{container}: ZOO_MY_ID {sid:?} is not a sid"))?;
        let image = info["Config"]["Image"].as_str().unwrap_or("").to_string();
        let args: Vec<&str> = std::iter::once(info["Path"].as_str().unwrap_or(""))
            .chain(
                info["Args"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>())
                    .unwrap_or_default(),
            )
            .collect();
        let zkfle = is_zkfle_image(&image)
            || args
                .windows(2)
                .any(|w| w[0].ends_with("zkfle") && w[1] == "join");
        let after = |flag: &str| {
            args.windows(2)
                .find(|w| w[0] == flag)
                .map(|w| w[1].to_string())
        };
        let data_dir = if zkfle {
            after("--data-dir").unwrap_or_else(|| "/data".into())
        } else {
            "/data".into()
        };
        // Mounts: (container path, host path, created by this project).
        let mounts: Vec<(String, PathBuf, bool)> = info["Mounts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| {
                        let dest = m["Destination"].as_str()?.to_string();
                        let source = PathBuf::from(m["Source"].as_str()?);
                        let ours = m["Type"] == "volume"
                            && m["Name"].as_str().is_some_and(|n| self.volume_is_ours(n));
                        Some((dest, source, ours))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let on_host = |path: &str| {
            mounts
                .iter()
                .filter(|(dest, _, _)| path == dest || path.starts_with(&format!("{dest}/")))
                .max_by_key(|(dest, _, _)| dest.len())
                .map(|(dest, source, ours)| {
                    (
                        source.join(path[dest.len()..].trim_start_matches('/')),
                        *ours,
                    )
                })
        };
        let wipeable: Vec<PathBuf> = [data_dir.as_str(), "/datalog"]
            .iter()
            .filter_map(|p| on_host(p))
            .filter(|(_, ours)| *ours)
            .map(|(p, _)| p)
            .collect();
        let fault_file = after("--chaos-faults")
            .and_then(|f| on_host(&f))
            .map(|(p, _)| p);
        let nets: Vec<(String, Ipv4Addr)> = info["NetworkSettings"]["Networks"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(name, n)| {
                        Some((name.clone(), n["IPAddress"].as_str()?.parse().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ip = nets
            .first()
            .map(|(_, ip)| *ip)
            .ok_or_else(|| format!("{container}: no IPv4 address"))?;
        let num = |k: &str, default: u32| {
            var(k)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let timing = (!zkfle).then(|| {
            (
                num("ZOO_TICK_TIME", 2000),
                num("ZOO_INIT_LIMIT", 5),
                num("ZOO_SYNC_LIMIT", 2),
            )
        });
        Ok(Some((
            Voter {
                sid,
                image,
                zkfle,
                container,
                ip,
                data_dir,
                wipeable,
                fault_file,
            },
            nets,
            timing,
        )))
    }

    /// Whether volume `name` was made by this campaign's compose project (named in its file,
    /// or anonymous: made with a container of the project).
    fn volume_is_ours(&self, name: &str) -> bool {
        let Some(c) = &self.compose else { return false };
        docker(&[
            "volume",
            "inspect",
            "--format",
            "{{index .Labels \"com.docker.compose.project\"}}|{{index .Labels \"com.docker.volume.anonymous\"}}",
            name,
        ])
        .is_ok_and(|labels| {
            let (project, anonymous) = labels.split_once('|').unwrap_or((&labels, ""));
            project == c.project
                || (anonymous != "<no value>" && !anonymous.is_empty())
                || (name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()))
        })
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
        let v = &self.voters[i];
        if v.wipeable.is_empty() {
            return Err(format!(
                "z{}'s data is not the campaign's to wipe (a bind mount or no volume): only directories the campaign created are",
                v.sid
            ));
        }
        let _ = self.kill(i);
        for dir in &v.wipeable {
            let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
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
        let v = &self.voters[i];
        let path = v.fault_file.as_ref().ok_or_else(|| {
            format!(
                "z{} runs without `--chaos-faults` on a path the host reaches: its own faults cannot be set",
                v.sid
            )
        })?;
        let done = match faults {
            Some(text) => std::fs::write(path, format!("{text}\n")),
            None => match std::fs::remove_file(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        };
        done.map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The zkfle voters whose own faults can be set ([`Voter::fault_file`]), by index.
    pub fn faultable(&self) -> Vec<usize> {
        (0..self.voters.len())
            .filter(|&i| self.voters[i].zkfle && self.voters[i].fault_file.is_some())
            .collect()
    }

    /// Voter `i`'s data directory, readable on the host: where it lives when the campaign made
    /// it, else a copy (`docker cp`) in `scratch`.
    pub fn data_on_host(&self, i: usize, scratch: &Path) -> Result<PathBuf, String> {
        let v = &self.voters[i];
        if self.compose.is_none()
            && let Some(dir) = v.wipeable.first()
        {
            return Ok(dir.clone());
        }
        let copy = scratch.join(format!("z{}-data", v.sid));
        let _ = std::fs::remove_dir_all(&copy);
        docker(&[
            "cp",
            &format!("{}:{}", v.container, v.data_dir),
            &path_str(&copy)?,
        ])?;
        Ok(copy)
    }

    /// Voter `i`'s output since `since` (Unix seconds), both streams.
    pub fn log_since(&self, i: usize, since: &str) -> Result<String, String> {
        self.docker_logs(i, &["--since", since])
    }

    /// Every voter's output so far (the servers log to stdout in these images), with
    /// Docker's timestamps; what went wrong in its place when it cannot be had.
    pub fn logs(&self, i: usize) -> String {
        self.docker_logs(i, &["--timestamps"])
            .unwrap_or_else(|why| why)
    }

    /// `docker logs OPTIONS CONTAINER` of voter `i`: stdout, then stderr.
    fn docker_logs(&self, i: usize, options: &[&str]) -> Result<String, String> {
        let container = &self.voters[i].container;
        let o = Command::new("docker")
            .arg("logs")
            .args(options)
            .arg(container)
            .output()
            .map_err(|e| format!("docker logs: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "docker logs {container}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&o.stderr));
        Ok(text)
    }
}

impl Drop for DockerEnsemble {
    fn drop(&mut self) {
        if self.compose.is_some() {
            // Its containers, networks and the volumes it made (never a bind mount).
            let _ = self.compose_run(&["down", "-v", "--remove-orphans"]);
            return;
        }
        for v in &self.voters {
            let _ = docker(&["rm", "-f", "-v", &v.container]);
        }
        let _ = docker(&["network", "rm", &self.network]);
    }
}
