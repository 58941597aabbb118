//! Quorum TLS against real Java ZooKeeper 3.8 (`sslQuorum=true`): certificates and stores made
//! here with openssl and keytool, Java servers on PKCS12 stores, zkfle on PKCS12 and on PEM.
//! zkfle joins, follows and is counted; a certificate from another CA is refused with a clear
//! error on zkfle's side. Serialized with the loopback lock; helpers: tests/common/zab.rs.

mod common;
use common::zab;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use zab::*;

const PASSWORD: &str = "quorum-secret";

fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA `name` and one server certificate it signs, valid for every loopback address the
/// ensembles use (Java checks a client's certificate against the address it connects from,
/// 127.0.0.1 for every server on loopback). Writes `name-ca.pem`, `name.pem` (key and
/// certificate, PEM key store), `name.p12` (PKCS12 key store) and `name-trust.p12` (PKCS12
/// trust store made by keytool, as Java needs).
fn make_stores(dir: &Path, name: &str) {
    make_stores_for(
        dir,
        name,
        "IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,IP:127.0.0.4,DNS:localhost",
    );
}

/// [`make_stores`] with the certificate's subjectAltName `san`.
fn make_stores_for(dir: &Path, name: &str, san: &str) {
    let ca = format!("{name}-ca");
    run(
        dir,
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={ca}"),
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.pem"),
        ],
    );
    let ext = dir.join(format!("{name}.ext"));
    std::fs::write(
        &ext,
        format!("subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n"),
    )
    .unwrap();
    run(
        dir,
        "openssl",
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    run(
        dir,
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
    let pem = [
        std::fs::read_to_string(dir.join(format!("{name}.key"))).unwrap(),
        std::fs::read_to_string(dir.join(format!("{name}.crt"))).unwrap(),
    ]
    .concat();
    std::fs::write(dir.join(format!("{name}.pem")), pem).unwrap();
    run(
        dir,
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-inkey",
            &format!("{name}.key"),
            "-in",
            &format!("{name}.crt"),
            "-name",
            name,
            "-passout",
            &format!("pass:{PASSWORD}"),
            "-out",
            &format!("{name}.p12"),
        ],
    );
    run(
        dir,
        "keytool",
        &[
            "-importcert",
            "-noprompt",
            "-alias",
            &ca,
            "-file",
            &format!("{ca}.pem"),
            "-storetype",
            "PKCS12",
            "-storepass",
            PASSWORD,
            "-keystore",
            &format!("{name}-trust.p12"),
        ],
    );
}

fn pkcs12_lines(certs: &Path, name: &str) -> String {
    format!(
        "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password={PASSWORD}\nssl.quorum.trustStore.location={}\nssl.quorum.trustStore.password={PASSWORD}\n",
        certs.join(format!("{name}.p12")).display(),
        certs.join(format!("{name}-trust.p12")).display(),
    )
}

/// A copy of the ensemble's zoo.cfg for zkfle, with `lines` overriding (later keys win, in
/// Java's `Properties` as in zkfle).
fn zkfle_cfg(e: &Ensemble, file: &str, lines: &str) -> PathBuf {
    let p = e.dir.join(file);
    let mut text = std::fs::read_to_string(e.zoo_cfg()).unwrap();
    text.push_str(lines);
    std::fs::write(&p, text).unwrap();
    p
}

/// zkfle follows a TLS ensemble (PKCS12 stores, then PEM ones) and is counted; with a
/// certificate of another CA it is refused, and says why.
#[test]
fn zkfle_follows_a_tls_ensemble_and_a_foreign_certificate_is_refused() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "tls",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores(&certs, "quorum");
    make_stores(&certs, "rogue");
    e.append_config(&format!(
        "sslQuorum=true\n{}",
        pkcs12_lines(&certs, "quorum")
    ));
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    assert!(
        e.log(2).contains("Creating TLS-only quorum server socket"),
        "Java listens with TLS"
    );

    // PKCS12 stores, from the ensemble's own zoo.cfg.
    let n = Native::start(&e, 1, &[]);
    let leader = wait_for("zkfle FOLLOWING over TLS", Duration::from_secs(15), || {
        following(&n, 0)
    });
    let other = 5 - leader;
    wait_for("zkfle synced over TLS", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    // probe and doctor speak TLS with the same keys: from --tls-config, or doctor's --config.
    let cfg = e.zoo_cfg();
    let cfg = cfg.to_str().unwrap();
    let probe = Command::new(ZKFLE)
        .args([
            "probe",
            "127.0.0.2:3888",
            "127.0.0.3:3888",
            "--format",
            "json",
        ])
        .args(["--tls-config", cfg])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    assert_eq!(out.matches("\"state\":\"LEADING\"").count(), 1, "{out}");
    let plain = Command::new(ZKFLE)
        .args(["probe", "127.0.0.2:3888", "--timeout", "2"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(1), "plaintext gets no answer");
    let doctor = Command::new(ZKFLE)
        .args(["doctor", "--config", cfg, "--format", "json"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(!out.contains("TLS handshake"), "{out}");
    assert_eq!(out.matches("\"state\":\"FOLLOWING\"").count(), 2, "{out}");

    // Counted: with the Java follower stopped, writes commit on the leader's and zkfle's ACKs.
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("a", 10), Duration::from_secs(10));
    assert_eq!(read(leader, "/a9").as_deref(), Some(&b"/a9"[..]));
    e.run(&["start-node", &other.to_string()]);
    drop(n);

    // PEM stores: the key and certificate in one file, the CA in another.
    let pem = zkfle_cfg(
        &e,
        "zkfle-pem.cfg",
        &format!(
            "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password=\nssl.quorum.trustStore.location={}\nssl.quorum.trustStore.type=PEM\n",
            certs.join("quorum.pem").display(),
            certs.join("quorum-ca.pem").display()
        ),
    );
    let (n, mark) = restart(&e, &pem);
    wait_for(
        "zkfle synced with PEM stores",
        Duration::from_secs(15),
        || n.log()[mark..].contains("synced with leader").then_some(()),
    );
    write_all(leader, &paths("b", 5), Duration::from_secs(10));
    drop(n);

    // zkfle trusts another CA only: it refuses Java's certificate, and says so.
    let rogue = zkfle_cfg(&e, "zkfle-rogue.cfg", &pkcs12_lines(&certs, "rogue"));
    let (n, mark) = restart(&e, &rogue);
    let line = wait_for(
        "zkfle refuses the foreign CA",
        Duration::from_secs(10),
        || {
            n.log()[mark..]
                .lines()
                .find(|l| l.contains("Cannot open secure channel to"))
                .map(str::to_string)
        },
    );
    assert!(
        line.contains("not signed by a CA in ssl.quorum.trustStore"),
        "{line}"
    );
    drop(n);

    // zkfle trusts the ensemble's CA but presents another CA's certificate: Java refuses it
    // (alert certificate_unknown), and zkfle says the server refused the handshake.
    let foreign_key = zkfle_cfg(
        &e,
        "zkfle-foreign-key.cfg",
        &format!(
            "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password={PASSWORD}\n",
            certs.join("rogue.p12").display()
        ),
    );
    let java_mark = e.log(leader).len();
    let (n, mark) = restart(&e, &foreign_key);
    let line = wait_for(
        "Java refuses zkfle's certificate",
        Duration::from_secs(10),
        || {
            n.log()[mark..]
                .lines()
                .find(|l| l.contains("Cannot open secure channel to"))
                .map(str::to_string)
        },
    );
    assert!(line.contains("refused the handshake"), "{line}");
    // Java 3.8 does not log the reason: its UnifiedSocket closes the socket on the failed
    // handshake, and the election listener logs the closed socket.
    wait_for(
        "Java logs the closed handshake",
        Duration::from_secs(5),
        || {
            e.log(leader)[java_mark..]
                .contains("Exception reading or writing challenge")
                .then_some(())
        },
    );
    assert!(!n.log()[mark..].contains("FOLLOWING"), "{}", n.log());
    n.record_for_docs(
        "tls",
        "tests/tls_java.rs, zkfle_follows_a_tls_ensemble_and_a_foreign_certificate_is_refused",
    );
}

/// zkfle leads over TLS: W commits on B with zkfle's ACKs while A is down; B stops; A
/// restarts. zkfle holds W, is elected, and A follows zkfle on zkfle's TLS quorum port (DIFF)
/// before zkfle hands leadership over to it (docs/lead.md).
#[test]
fn zkfle_leads_a_java_follower_over_tls() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "tls-lead",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--init-limit", "5", "--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores(&certs, "quorum");
    e.append_config(&format!(
        "sslQuorum=true\n{}",
        pkcs12_lines(&certs, "quorum")
    ));
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    let n = Native::start(&e, 1, &[]);
    let since = zkfle_leads_after_its_leader_stops(&e, &n);
    assert!(since.contains("Getting a diff from the leader"), "{since}");
    assert!(n.log().contains("handing leadership over"), "{}", n.log());
    assert!(
        !n.log().contains("learner connection from"),
        "no failed TLS accept: {}",
        n.log()
    );
}

/// The middle of a rolling switch to TLS: Java servers with `portUnification=true` (they
/// accept TLS and plaintext, and still connect in plaintext), zkfle already on
/// `sslQuorum=true` with `portUnification=true` (it connects with TLS and accepts both).
/// zkfle follows and is counted; Java accepted zkfle's TLS and zkfle Java's plaintext.
#[test]
fn zkfle_on_tls_follows_a_port_unified_plaintext_ensemble() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "tls-unified",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores(&certs, "quorum");
    e.append_config(&format!(
        "portUnification=true\n{}",
        pkcs12_lines(&certs, "quorum")
    ));
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    assert!(
        e.log(2)
            .contains("Creating TLS-enabled quorum server socket")
    );
    let cfg = zkfle_cfg(&e, "zkfle-tls.cfg", "sslQuorum=true\n");
    let n = Native::start_in(
        &e.dir,
        &cfg,
        1,
        &["--data-dir", e.dir.join("native1").to_str().unwrap()],
    );
    let leader = wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    let other = 5 - leader;
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("u", 5), Duration::from_secs(10));
    // The leader took zkfle's election and quorum connections as TLS.
    let tls_from_zkfle = e
        .log(leader)
        .lines()
        .filter(|l| l.contains("Accepted TLS connection from /127.0.0.1"))
        .count();
    assert!(tls_from_zkfle >= 2, "{}", e.log(leader));
    assert!(!n.log().contains("TLS handshake"), "{}", n.log());
}

/// `zkfle join` of sid 1 again with config `cfg` and the same data directory; the mark in
/// its log (which each start appends to) where this start begins.
fn restart(e: &Ensemble, cfg: &Path) -> (Native, usize) {
    let mark = std::fs::metadata(e.dir.join("native1.log")).map_or(0, |m| m.len() as usize);
    let n = Native::start_in(
        &e.dir,
        cfg,
        1,
        &["--data-dir", e.dir.join("native1").to_str().unwrap()],
    );
    (n, mark)
}

/// A PKCS12 key store with the wrong password and a JKS store are refused at start, by key
/// (exit 2): nothing is spoken.
#[test]
fn bad_stores_are_refused_by_key() {
    let dir = std::env::temp_dir().join(format!("zkfle-tls-stores-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    make_stores(&dir, "quorum");
    let base = "tickTime=200\nsslQuorum=true\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n";
    let p12 = dir.join("quorum.p12");
    let trust = dir.join("quorum-trust.p12");
    for (extra, needle) in [
        (
            format!(
                "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password=wrong\n",
                p12.display()
            ),
            "ssl.quorum.keyStore.location=",
        ),
        (
            format!(
                "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password={PASSWORD}\nssl.quorum.trustStore.location={}/t.jks\n",
                p12.display(),
                dir.display()
            ),
            "-deststoretype PKCS12",
        ),
        (
            format!(
                "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password={PASSWORD}\nssl.quorum.trustStore.location={}\nssl.quorum.trustStore.password={PASSWORD}\nssl.quorum.protocol=TLSv1.1\n",
                p12.display(),
                trust.display()
            ),
            "ssl.quorum.protocol=TLSv1.1",
        ),
    ] {
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, format!("{base}{extra}")).unwrap();
        let out = Command::new(ZKFLE)
            .args([
                "join",
                "--config",
                cfg.to_str().unwrap(),
                "--myid",
                "1",
                "--zxid",
                "0",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
        assert!(err.contains(needle), "{extra}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `zkfle replay --target` against a Java server on quorum TLS: fixture basic3 replayed into
/// sid 1, zkfle impersonating sids 2 and 3 over TLS in both directions (the stores and
/// `sslQuorum` from the replay's `--config`). The server decides as recorded.
#[test]
fn a_replay_speaks_tls_as_the_peers_it_impersonates() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "tls-replay",
        "1:participant,2:participant:external,3:participant:external",
        &["--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores(&certs, "quorum");
    e.append_config(&format!(
        "sslQuorum=true\n{}",
        pkcs12_lines(&certs, "quorum")
    ));
    let out = replay_basic3_into_server_1(&e, &["--config", e.zoo_cfg().to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"match\":true"), "{stdout}");
    assert!(
        e.log(1).contains("Accepted TLS connection from"),
        "{}",
        e.log(1)
    );
}

/// A rolling switch of a running ensemble to TLS, as ZooKeeper's admin guide describes it
/// (portUnification on everywhere, then sslQuorum, then portUnification off), one server at a
/// time, zkfle voting throughout: while each Java server is down for its restart, writes commit
/// only with zkfle's ACKs, so every phase proves zkfle speaks what its peers accept.
#[test]
fn a_rolling_switch_to_tls_with_zkfle_voting_throughout() {
    let _l = lock_loopback();
    let e = Ensemble::start(
        "tls-rolling",
        "1:participant:external,2:participant,3:participant",
        &["--tick", "200", "--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores(&certs, "quorum");
    e.start_node(2);
    e.start_node(3);
    e.run(&["wait-stable", "--timeout", "30"]);
    let zcfg = zkfle_cfg(&e, "zkfle-rolling.cfg", "");
    let (mut n, _) = restart(&e, &zcfg);
    wait_for("zkfle synced in plaintext", Duration::from_secs(15), || {
        n.log().contains("synced with leader").then_some(())
    });
    let append = |path: &Path, lines: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(lines.as_bytes()).unwrap();
    };
    let phases = [
        (
            "portUnification",
            format!("portUnification=true\n{}", pkcs12_lines(&certs, "quorum")),
        ),
        ("sslQuorum", "sslQuorum=true\n".to_string()),
        ("TLS only", "portUnification=false\n".to_string()),
    ];
    for (phase, lines) in &phases {
        for sid in [2i64, 3] {
            let other = 5 - sid;
            e.run(&["stop-node", &sid.to_string()]);
            // Server `other` and zkfle are the quorum now.
            write_all(
                other,
                &paths(&format!("{}{sid}", phase.replace(' ', "")), 3),
                Duration::from_secs(20),
            );
            append(&e.dir.join(format!("{sid}/zoo.cfg")), lines);
            e.run(&["start-node", &sid.to_string()]);
            e.run(&["wait-stable", "--timeout", "30"]);
        }
        append(&zcfg, lines);
        drop(n);
        write_all(
            2,
            &paths(&format!("{}z", phase.replace(' ', "")), 3),
            Duration::from_secs(20),
        );
        let (again, mark) = restart(&e, &zcfg);
        n = again;
        wait_for(
            &format!("zkfle synced after {phase}"),
            Duration::from_secs(20),
            || n.log()[mark..].contains("synced with leader").then_some(()),
        );
    }
    // The end state: TLS only, and zkfle's connections were TLS.
    assert!(e.log(2).contains("Creating TLS-only quorum server socket"));
    let leader = wait_for("a leader", Duration::from_secs(10), || e.leader(&[2, 3]));
    let tls_from_zkfle = e
        .log(leader)
        .lines()
        .filter(|l| l.contains("Accepted TLS connection from /127.0.0.1"))
        .count();
    assert!(tls_from_zkfle >= 1, "{}", e.log(leader));
    let other = 5 - leader;
    e.run(&["stop-node", &other.to_string()]);
    write_all(leader, &paths("final", 3), Duration::from_secs(20));
    assert_eq!(read(leader, "/final2").as_deref(), Some(&b"/final2"[..]));
}

/// Certificates that name a host, not the address: Java then checks the name the address
/// resolves to (ZKTrustManager's reverse-DNS fallback), and so does zkfle, in both
/// directions. The certificate names 127.0.0.2-4 and `localhost` but not 127.0.0.1, where Java
/// server 1 listens and whence every loopback connection comes: zkfle's connection to server
/// 1 and the Java servers' connections to zkfle pass only through `localhost`.
#[test]
fn certificates_naming_hosts_are_checked_by_reverse_dns() {
    let _l = lock_loopback();
    assert_eq!(
        dns_lookup_localhost(),
        "localhost",
        "this test needs 127.0.0.1 to resolve to localhost (/etc/hosts)"
    );
    let e = Ensemble::start(
        "tls-dns",
        "1:participant,2:participant,3:participant,4:participant:external",
        &["--tick", "200", "--no-start"],
    );
    let certs = e.dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_stores_for(
        &certs,
        "quorum",
        "IP:127.0.0.2,IP:127.0.0.3,IP:127.0.0.4,DNS:localhost",
    );
    e.append_config(&format!(
        "sslQuorum=true\n{}",
        pkcs12_lines(&certs, "quorum")
    ));
    for sid in 1..=3 {
        e.start_node(sid);
    }
    e.run(&["wait-stable", "--timeout", "30"]);
    let n = Native::start(&e, 4, &[]);
    wait_for("zkfle FOLLOWING", Duration::from_secs(15), || {
        following(&n, 0)
    });
    wait_for("zkfle synced", Duration::from_secs(10), || {
        n.log().contains("synced with leader").then_some(())
    });
    // zkfle reached server 1 (127.0.0.1, named only as localhost) and took the Java servers'
    // connections (from 127.0.0.1) without a certificate error.
    std::thread::sleep(Duration::from_secs(1));
    let log = n.log();
    assert!(!log.contains("Cannot open secure channel"), "{log}");
    assert!(!log.contains("certificate"), "{log}");
    let probe = Command::new(ZKFLE)
        .args(["probe", "127.0.0.1:3888", "--tls-config"])
        .arg(e.zoo_cfg())
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "{}",
        String::from_utf8_lossy(&probe.stderr)
    );
}

/// What 127.0.0.1 resolves to here.
fn dns_lookup_localhost() -> String {
    let out = Command::new("getent")
        .args(["hosts", "127.0.0.1"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string()
}
