//! `zkfle join` input errors: one line on stderr, exit status 2.

use std::process::Command;

const ZKFLE: &str = env!("CARGO_BIN_EXE_zkfle");

fn join(args: &[&str]) -> (i32, String) {
    let out = Command::new(ZKFLE).arg("join").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("zkfle-join-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=data\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let cfg2 = dir.join("nodata.cfg");
    std::fs::write(
        &cfg2,
        "tickTime=100\ninitLimit=10\nsyncLimit=5\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n",
    )
    .unwrap();
    let c2 = cfg2.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--config", "/nonexistent/zoo.cfg", "--myid", "1"],
            "/nonexistent/zoo.cfg",
        ),
        (
            vec!["--config", c, "--myid", "7"],
            "server id 7 is not a member",
        ),
        (vec!["--config", c], "myid"),
        (vec!["--config", c2, "--myid", "1"], "--data-dir"),
    ] {
        let (code, err) = join(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        // clap's own usage errors keep clap's multi-line format (src/cli/mod.rs).
        if err.starts_with("zkfle:") {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Quorum TLS without its stores, quorum SASL without its JAAS file, and the SASL switches
/// Java itself refuses are refused by name (exit 2), in one line: zkfle must not talk
/// plaintext or unauthenticated to servers that expect otherwise.
#[test]
fn secured_quorum_configs_are_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("zkfle-join-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for line in [
        "sslQuorum=true",
        "portUnification=TRUE",
        "quorum.auth.enableSasl=true",
        "quorum.auth.learnerRequireSasl=true",
        "quorum.auth.serverRequireSasl=true",
    ] {
        let cfg = dir.join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!("tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=data\n{line}\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"),
        )
        .unwrap();
        let (code, err) = join(&["--config", cfg.to_str().unwrap(), "--myid", "1"]);
        let key = line.split('=').next().unwrap();
        assert_eq!(code, 2, "{line}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{line}: {err}");
        let needle = match key {
            "quorum.auth.enableSasl" => "needs a JAAS file",
            // QuorumPeerConfig's own words.
            "quorum.auth.learnerRequireSasl" | "quorum.auth.serverRequireSasl" => {
                "quorum.auth.enableSasl is disabled, so cannot enable"
            }
            _ => "ssl.quorum.keyStore.location is not set",
        };
        assert!(err.contains(needle), "{line}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Log lines written to a pipe or a file carry no ANSI colour codes.
#[test]
fn logs_to_a_pipe_have_no_colour() {
    let dir = std::env::temp_dir().join(format!("zkfle-join-ansi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // My election port is taken: join warns while retrying the bind, then fails (exit 1).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!("tickTime=100\ninitLimit=10\nsyncLimit=5\nserver.1=127.0.0.1:2888:{port}\nserver.2=127.0.0.2:2888:3888\n"),
    )
    .unwrap();
    let (code, err) = join(&[
        "--config",
        cfg.to_str().unwrap(),
        "--myid",
        "1",
        "--data-dir",
        dir.join("data").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("WARN"), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Values Java refuses are refused, in Java's words, naming the file and line, exit 2: no
/// typo quietly becomes a default. The same file read by `doctor` and `probe --all` is
/// refused the same way.
#[test]
fn values_java_refuses_are_refused_with_its_words() {
    let dir = std::env::temp_dir().join(format!("zkfle-join-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let members = "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n";
    for (lines, needle) in [
        (
            "tickTime=20O0\ninitLimit=10\nsyncLimit=5\n",
            "zoo.cfg:1: tickTime=20O0",
        ),
        (
            "tickTime=20O0\ninitLimit=10\nsyncLimit=5\n",
            "For input string: \"20O0\"",
        ),
        (
            "tickTime=2000\ninitLimit=10\nsyncLimit=5\nclientPort=2181x\n",
            "zoo.cfg:4:",
        ),
        (
            "tickTime=0\ninitLimit=10\nsyncLimit=5\n",
            "tickTime is not set",
        ),
        ("tickTime=2000\nsyncLimit=5\n", "initLimit is not set"),
        ("tickTime=2000\ninitLimit=10\n", "syncLimit is not set"),
        (
            "tickTime=2000\ninitLimit=10\nsyncLimit=5\nquorumListenOnAllIPs=yes\n",
            "Invalid option yes for quorumListenOnAllIPs. Choose 'true' or 'false.'",
        ),
    ] {
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, format!("{lines}dataDir=data\n{members}")).unwrap();
        let (code, err) = join(&["--config", cfg.to_str().unwrap(), "--myid", "1"]);
        assert_eq!(code, 2, "{lines}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{lines}: {err}");
        assert!(err.contains(needle), "{lines}: {err}");
    }
    let cfg = dir.join("zoo.cfg");
    std::fs::write(&cfg, format!("tickTime=20O0\n{members}")).unwrap();
    for cmd in [
        &["doctor", "--config"][..],
        &["probe", "--all", "127.0.0.1:3888", "--tls-config"],
    ] {
        let out = Command::new(ZKFLE).args(cmd).arg(&cfg).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(err.contains("For input string"), "{cmd:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without RUST_LOG, `join` is quiet while healthy but not silent: a start line, one line per
/// change of state in Java's words, and a stop line on SIGTERM; none of the chatter of
/// `RUST_LOG=info` (every notification sent and received).
#[test]
fn join_tells_its_states_and_nothing_else_by_default() {
    let dir = std::env::temp_dir().join(format!("zkfle-join-states-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports: Vec<u16> = (0..3)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    let cfg = dir.join("zoo.cfg");
    let members: String = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("server.{}=127.0.0.1:{}:{p}\n", i + 1, 20000 + i))
        .collect();
    std::fs::write(
        &cfg,
        format!("tickTime=100\ninitLimit=10\nsyncLimit=5\n{members}"),
    )
    .unwrap();
    let logs: Vec<std::path::PathBuf> = (1..=3).map(|i| dir.join(format!("{i}.log"))).collect();
    let mut nodes: Vec<std::process::Child> = (1..=3)
        .map(|i| {
            Command::new(ZKFLE)
                .args([
                    "join",
                    "--config",
                    cfg.to_str().unwrap(),
                    "--myid",
                    &i.to_string(),
                ])
                // Election only: a claimed vote, no data directory.
                .args(["--zxid", "0", "--peer-epoch", "0"])
                .env_remove("RUST_LOG")
                .stderr(std::fs::File::create(&logs[i - 1]).unwrap())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = std::time::Instant::now();
    let decided = |l: &std::path::PathBuf| {
        std::fs::read_to_string(l)
            .unwrap_or_default()
            .contains("LEADER ELECTION TOOK")
    };
    while !logs.iter().all(decided) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "no decision"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for n in &mut nodes {
        Command::new("kill")
            .args(["-TERM", &n.id().to_string()])
            .status()
            .unwrap();
        let status = n.wait().unwrap();
        assert!(status.success(), "{status:?}");
    }
    for (i, l) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(l).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The first state line is the start (warnings about the options may come before it).
        let first = lines.iter().find(|l| l.contains("zkfle::state")).unwrap();
        assert!(
            first.contains(&format!(
                "zkfle join {} starting: sid {}",
                env!("CARGO_PKG_VERSION"),
                i + 1
            )),
            "{text}"
        );
        assert!(text.contains("LOOKING (round 0x1)"), "{text}");
        assert!(text.contains("LEADER ELECTION TOOK"), "{text}");
        assert!(
            lines
                .last()
                .unwrap()
                .contains("zkfle join stopping: SIGTERM"),
            "{text}"
        );
        assert!(!text.contains("Notification:"), "{text}");
        for line in &lines {
            assert!(
                line.contains("WARN") || line.contains("zkfle::state"),
                "{line}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
