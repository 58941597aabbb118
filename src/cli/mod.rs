//! The `zkfle` command line: parsing with clap, one submodule a command, errors printed as one
//! line on stderr (`zkfle: <what>: <why>`).
//!
//! The exit-status rule (README, "Exit status"), the same for every command: 2 when what the
//! user wrote is wrong -- arguments, values, hex or JSON given to `wire`, a config file named by
//! a flag (unreadable, malformed, or asking for what zkfle cannot do), an `--as SID` the capture
//! cannot replay; 1 when the operation fails on the data or the network it works on -- a capture
//! that is missing, unreadable, empty or damaged, errors in the traffic, a peer or target that
//! fails, storage, a replay whose decisions differ.

mod chaos_cmd;
mod decode_cmd;
mod decode_time;
mod doctor_cmd;
pub mod join_cmd;
mod probe_cmd;
mod replay_cmd;
mod repro_cmd;
mod tls_args;
mod wire_cmd;
mod wireshark_cmd;

use clap::{Parser, Subcommand};

/// A ZooKeeper leader-election protocol toolkit.
#[derive(Debug, Parser)]
#[command(name = "zkfle", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode the election traffic in pcap/pcapng captures (one per host, merged) or live.
    Decode(decode_cmd::DecodeArgs),
    /// Join a real ensemble's leader election as a native voter.
    Join(join_cmd::JoinArgs),
    /// Re-run a recorded election as one of its servers, against zkfle or a live server.
    Replay(replay_cmd::ReplayArgs),
    /// Ask live servers for their state and vote over the election port.
    Probe(probe_cmd::ProbeArgs),
    /// Trigger a known election bug against a live server and give a verdict.
    Repro(repro_cmd::ReproArgs),
    /// Check a live ensemble's election health (non-destructive).
    Doctor(doctor_cmd::DoctorArgs),
    /// Conformance campaigns: check a workload's history against what ZooKeeper promises.
    #[command(subcommand)]
    Chaos(chaos_cmd::ChaosCommand),
    /// Decode and encode single election-port messages.
    #[command(subcommand)]
    Wire(wire_cmd::WireCommand),
    /// Print a Wireshark Lua dissector for the election and quorum ports.
    WiresharkDissector(wireshark_cmd::WiresharkArgs),
}

/// An error for the user: printed as one line, then the process exits with `status`.
#[derive(Debug)]
pub struct CliError {
    pub status: i32,
    pub message: String,
}

impl CliError {
    /// What the user wrote is wrong (exit status 2; see the module docs).
    pub fn input(message: impl Into<String>) -> Self {
        CliError {
            status: 2,
            message: message.into(),
        }
    }

    /// Whoever read our output went away (`zkfle decode x | head`): stop quietly, status 0.
    pub fn closed_pipe() -> Self {
        CliError {
            status: 0,
            message: String::new(),
        }
    }

    /// An error writing the output: a closed pipe ends it quietly, anything else fails.
    pub fn writing(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::closed_pipe();
        }
        CliError::failure(format!("writing output: {e}"))
    }

    /// The operation failed on its data or network (exit status 1; see the module docs).
    pub fn failure(message: impl Into<String>) -> Self {
        CliError {
            status: 1,
            message: message.into(),
        }
    }
}

/// Reads the zoo.cfg a `--config` names for its members: a file that names none (a
/// standalone server's config, or not a zoo.cfg at all) is an error, not an empty ensemble.
/// clap's parser of a `HOST:PORT` argument: a host, then a port from 1 to 65535 (`[::1]:3888`
/// for IPv6). A malformed address is a wrong argument (exit 2), told apart from a host that
/// does not resolve (exit 1, when it is used).
pub(crate) fn host_port(text: &str) -> Result<String, String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} has no port: give HOST:PORT, e.g. 127.0.0.1:3888"))?;
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if host.is_empty() || (bare.is_none() && host.contains(':')) {
        return Err(format!(
            "{text:?} is not HOST:PORT (an IPv6 address goes in brackets: [::1]:3888)"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(text.to_string()),
        _ => Err(format!(
            "{text:?}: the port {port:?} is not a port (1-65535)"
        )),
    }
}

fn members_config(path: &std::path::Path) -> Result<crate::zoocfg::ZooCfg, CliError> {
    let cfg =
        crate::zoocfg::ZooCfg::read(path).map_err(|e| CliError::input(format!("--config {e}")))?;
    if cfg.quorum.servers().next().is_none() {
        return Err(CliError::input(format!(
            "--config {}: names no servers (no server.N= lines, here or in a dynamicConfigFile)",
            path.display()
        )));
    }
    Ok(cfg)
}

/// The largest `--hosts` file read: an /etc/hosts of a large cluster is a few hundred KB.
const MAX_HOSTS_FILE_BYTES: u64 = 16 << 20;

/// Reads a `--hosts` file, /etc/hosts form: each line an IP, then its names; `#` starts a
/// comment. A line whose first field is not an IP is an error naming the file and line.
fn hosts_file(path: &std::path::Path) -> Result<Vec<(std::net::IpAddr, String)>, CliError> {
    use std::io::Read;
    let what = |e: std::io::Error| CliError::input(format!("--hosts {}: {e}", path.display()));
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(what)?;
    let read = file
        .take(MAX_HOSTS_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(what)?;
    if read as u64 > MAX_HOSTS_FILE_BYTES {
        return Err(CliError::input(format!(
            "--hosts {}: larger than {} MiB, not a hosts file",
            path.display(),
            MAX_HOSTS_FILE_BYTES >> 20
        )));
    }
    let mut table = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        // An IPv6 address may carry a zone (`fe80::1%eth0`): the address is what counts.
        let ip: std::net::IpAddr =
            first
                .split('%')
                .next()
                .unwrap_or(first)
                .parse()
                .map_err(|_| {
                    CliError::input(format!(
                        "--hosts {}:{}: {first:?} is not an IP address (expected `IP NAME...`)",
                        path.display(),
                        n + 1
                    ))
                })?;
        table.extend(fields.map(|name| (ip, name.to_string())));
    }
    Ok(table)
}

/// Runs the command line and returns the process exit status.
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Decode(args) => decode_cmd::run(args),
        Command::Join(args) => join_cmd::run(args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Probe(args) => probe_cmd::run(args),
        Command::Repro(args) => repro_cmd::run(args),
        Command::Doctor(args) => doctor_cmd::run(args),
        Command::Chaos(cmd) => chaos_cmd::run(cmd),
        Command::Wire(cmd) => wire_cmd::run(cmd),
        Command::WiresharkDissector(args) => wireshark_cmd::run(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) if e.status == 0 => 0,
        Err(e) => {
            eprintln!("zkfle: {}", e.message);
            e.status
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_reads_as_etc_hosts_and_names_its_bad_line() {
        let dir = std::env::temp_dir().join(format!("zkfle-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hosts");
        std::fs::write(
            &path,
            "# docker network inspect\n172.28.0.11 zoo1 zoo1.local  # the first\n\n\tfe80::1%eth0 zoo2\n",
        )
        .unwrap();
        let table = hosts_file(&path).unwrap();
        let names: Vec<(String, &str)> = table
            .iter()
            .map(|(ip, n)| (ip.to_string(), n.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("172.28.0.11".to_string(), "zoo1"),
                ("172.28.0.11".to_string(), "zoo1.local"),
                ("fe80::1".to_string(), "zoo2"),
            ]
        );
        std::fs::write(&path, "172.28.0.11 zoo1\nzoo2 172.28.0.12\n").unwrap();
        let e = hosts_file(&path).unwrap_err();
        assert_eq!(e.status, 2);
        assert!(
            e.message
                .ends_with("hosts:2: \"zoo2\" is not an IP address (expected `IP NAME...`)"),
            "{}",
            e.message
        );
        let e = hosts_file(&dir.join("missing")).unwrap_err();
        assert!(e.message.starts_with("--hosts "), "{}", e.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
