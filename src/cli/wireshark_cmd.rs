//! `zkfle wireshark-dissector`: prints the Lua dissector generated from the codec's layouts.

use std::io::Write;

use clap::Args;

use super::CliError;

#[derive(Debug, Args)]
pub struct WiresharkArgs {
    /// Election port to register the dissector on (repeatable; default 3888).
    #[arg(long = "election-port", value_name = "PORT")]
    pub election_ports: Vec<u16>,
    /// Quorum (Zab) port to register the dissector on (repeatable; default 2888).
    #[arg(long = "quorum-port", value_name = "PORT")]
    pub quorum_ports: Vec<u16>,
}

pub fn run(args: WiresharkArgs) -> Result<(), CliError> {
    let all = || args.election_ports.iter().chain(&args.quorum_ports);
    if all().any(|&p| p == 0) {
        return Err(CliError::input(
            "wireshark-dissector: port 0 is no port a server listens on",
        ));
    }
    if let Some(p) = args
        .election_ports
        .iter()
        .find(|p| args.quorum_ports.contains(p))
    {
        return Err(CliError::input(format!(
            "wireshark-dissector: port {p} is given as both an election and a quorum port; Wireshark hands a port to one dissector"
        )));
    }
    let or = |v: Vec<u16>, d: u16| if v.is_empty() { vec![d] } else { v };
    let lua = crate::output::wireshark::dissector(
        &or(args.election_ports, 3888),
        &or(args.quorum_ports, 2888),
    );
    let mut out = std::io::stdout().lock();
    out.write_all(lua.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::writing)
}
