//! Data-driven scenarios (raft-rs style): `testdata/*.txt`, one machine under test each.
//!
//! ```text
//! # comment
//! voters 0 1 2                  participants (a majority config on made-up addresses)
//! observers 4                   observers
//! extra group.1=0:1:2 weight.0=1  extra config lines (hierarchical)
//! me 1 zxid 0 epoch 0 [observer] [min 200] [max 60000]
//! start @0                      lookForLeader()
//! recv 2 @5 v2 LOOKING leader=2 zxid=0 round=1 pe=0 [cfg="text"]
//!                               formats: v2 (current, our config unless cfg=), v40 (version 1),
//!                               v28 (no peer epoch), v36, v41 (v1 + one byte); the state is a
//!                               name or a number
//! recvhex 1 @5 0000...          raw payload; a codec error means it never reaches the machine
//! timer @250 [undelivered]      on_timer (have_delivered defaults to true)
//! setpe 1                       set_peer_epoch
//! expect send 2 LOOKING leader=1 zxid=0 round=1 pe=0   next send (fields optional)
//! expect send * LOOKING ...     a broadcast: one send to every other voter
//! expect decided LEADING leader=1 round=1 lc=1
//! expect network halt|restart   the connection manager goes down / comes back afresh
//! expect nothing                no sends or decisions pending
//! expect timer @450             the last timer asked for
//! expect codec-error            the last recvhex did not decode
//! expect state|lc|proposal|vote ...
//! ```
//!
//! Numbers: decimal, `-5`, `0x1f` (two's complement for 16 digits), `min`/`max` for i64.

use std::collections::VecDeque;

use crate::wire::{Notification, QuorumConfig, Role, ServerState};

use super::quorum::{QuorumVerifier, synthetic_text};
use super::{Election, ElectionConfig, Network, Output};

fn num(s: &str) -> i64 {
    match s {
        "min" => i64::MIN,
        "max" => i64::MAX,
        _ => {
            if let Some(h) = s.strip_prefix("0x") {
                u64::from_str_radix(h, 16).expect("hex") as i64
            } else if let Some(h) = s.strip_prefix("-0x") {
                -(i64::from_str_radix(h, 16).expect("hex"))
            } else {
                s.parse().unwrap_or_else(|_| panic!("bad number {s:?}"))
            }
        }
    }
}

fn state(s: &str) -> ServerState {
    ServerState::from_name(s).unwrap_or_else(|| ServerState::from_code(num(s) as i32))
}

/// Splits on spaces, keeping `key="a b"` together (quotes removed, `\n` unescaped).
fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter().map(|t| t.replace("\\n", "\n")).collect()
}

fn at(tok: &str) -> u64 {
    tok.strip_prefix('@')
        .unwrap_or_else(|| panic!("expected @time, got {tok:?}"))
        .parse()
        .expect("time")
}

fn field<'a>(toks: &'a [String], key: &str) -> Option<&'a str> {
    toks.iter()
        .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
}

struct Harness {
    voters: Vec<i64>,
    observers: Vec<i64>,
    extra: String,
    election: Option<Election>,
    pending: VecDeque<Output>,
    last_timer: Option<u64>,
    codec_error: bool,
    now: u64,
}

impl Harness {
    fn e(&mut self) -> &mut Election {
        self.election.as_mut().expect("`me` line first")
    }

    fn collect(&mut self) {
        let Some(e) = self.election.as_mut() else {
            return;
        };
        self.pending.extend(e.take_outputs());
        if let Some(at) = e.next_deadline() {
            self.last_timer = Some(at);
        }
    }

    fn time(&mut self, t: u64) -> Result<(), String> {
        if t < self.now {
            return Err(format!("time goes backwards: @{t} after @{}", self.now));
        }
        self.now = t;
        Ok(())
    }

    fn check_notification(&self, n: &Notification, toks: &[String]) -> Result<(), String> {
        let want_state = state(&toks[0]);
        if n.state != want_state {
            return Err(format!("state {:?}, want {want_state:?}", n.state));
        }
        let have = [
            ("leader", n.leader),
            ("zxid", n.zxid),
            ("round", n.election_epoch),
            ("pe", n.peer_epoch.unwrap_or(i64::MIN)),
        ];
        for (k, v) in have {
            if let Some(w) = field(toks, k)
                && num(w) != v
            {
                return Err(format!("{k}={v:#x}, want {w}"));
            }
        }
        let cfg = self.election.as_ref().unwrap().config_text().as_bytes();
        if n.version != Some(2) || n.config.as_deref() != Some(cfg) {
            return Err("not a version-2 notification carrying our config".into());
        }
        Ok(())
    }

    fn step(&mut self, toks: &[String]) -> Result<(), String> {
        let args = &toks[1..];
        match toks[0].as_str() {
            "voters" => self.voters = args.iter().map(|a| num(a)).collect(),
            "observers" => self.observers = args.iter().map(|a| num(a)).collect(),
            "extra" => {
                for a in args {
                    self.extra.push_str(a);
                    self.extra.push('\n');
                }
            }
            "me" => {
                // A new machine: a fresh clock; everything of the old one must have been checked.
                if let Some(o) = self.pending.front() {
                    return Err(format!("unchecked output of the previous machine: {o:?}"));
                }
                self.now = 0;
                self.last_timer = None;
                let text = synthetic_text(&self.voters, &self.observers, &self.extra);
                let q = QuorumVerifier::from_config(&QuorumConfig::parse(&text).unwrap())
                    .map_err(|e| e.to_string())?;
                let mut cfg = ElectionConfig::new(num(&args[0]), q);
                let mut i = 1;
                while i < args.len() {
                    match args[i].as_str() {
                        "zxid" => cfg.last_zxid = num(&args[i + 1]),
                        "epoch" => cfg.current_epoch = num(&args[i + 1]),
                        "min" => cfg.min_notification_interval_ms = num(&args[i + 1]) as u64,
                        "max" => cfg.max_notification_interval_ms = num(&args[i + 1]) as u64,
                        "observer" => {
                            cfg.role = Role::Observer;
                            i += 1;
                            continue;
                        }
                        other => return Err(format!("unknown `me` option {other}")),
                    }
                    i += 2;
                }
                self.election = Some(Election::new(cfg));
            }
            "start" => {
                self.time(at(&args[0]))?;
                let now = self.now;
                self.e().start(now);
            }
            "timer" => {
                self.time(at(&args[0]))?;
                let delivered = args.get(1).map(String::as_str) != Some("undelivered");
                let now = self.now;
                self.e().on_timer(now, delivered);
            }
            "setpe" => {
                let pe = num(&args[0]);
                self.e().set_peer_epoch(pe);
            }
            "recv" => {
                let from = num(&args[0]);
                self.time(at(&args[1]))?;
                let fmt = args[2].as_str();
                let rest = &args[3..];
                let st = state(&rest[0]);
                let get = |k: &str| field(rest, k).map(num).unwrap_or(0);
                let (leader, zxid, ee, pe) = (get("leader"), get("zxid"), get("round"), get("pe"));
                let mut n = Notification::current(st, leader, zxid, ee, pe, vec![]);
                match fmt {
                    "v2" => {
                        let cfg = field(rest, "cfg")
                            .map(str::to_string)
                            .unwrap_or_else(|| self.e().config_text().to_string());
                        n.config = Some(cfg.into_bytes());
                    }
                    "v40" | "v41" => {
                        n.version = Some(1);
                        n.config = None;
                        if fmt == "v41" {
                            n.trailing = vec![0];
                        }
                    }
                    "v36" => {
                        n.version = None;
                        n.config = None;
                    }
                    "v28" => {
                        n.peer_epoch = None;
                        n.version = None;
                        n.config = None;
                    }
                    other => return Err(format!("unknown format {other}")),
                }
                // Through the codec both ways, as a driver would.
                let bytes = n.encode().map_err(|e| e.to_string())?;
                let n = Notification::decode(&bytes).map_err(|e| e.to_string())?;
                let now = self.now;
                self.e().on_notification(now, from, &n);
            }
            "recvhex" => {
                let from = num(&args[0]);
                self.time(at(&args[1]))?;
                let bytes = hex::decode(args[2..].concat()).map_err(|e| e.to_string())?;
                match Notification::decode(&bytes) {
                    Ok(n) => {
                        self.codec_error = false;
                        let now = self.now;
                        self.e().on_notification(now, from, &n);
                    }
                    Err(_) => self.codec_error = true,
                }
            }
            "expect" => {
                self.collect();
                return self.expect(args);
            }
            other => return Err(format!("unknown command {other}")),
        }
        self.collect();
        Ok(())
    }

    fn expect(&mut self, args: &[String]) -> Result<(), String> {
        let what = args[0].as_str();
        let rest = &args[1..];
        match what {
            "send" => {
                let me = self.election.as_ref().unwrap().my_id();
                let targets: Vec<i64> = if rest[0] == "*" {
                    self.voters.iter().copied().filter(|&v| v != me).collect()
                } else {
                    vec![num(&rest[0])]
                };
                for want in targets {
                    match self.pending.pop_front() {
                        Some(Output::Send { to, notification }) => {
                            if to != want {
                                return Err(format!("send to {to}, want {want}: {notification:?}"));
                            }
                            self.check_notification(&notification, &rest[1..])
                                .map_err(|e| format!("send to {to}: {e}"))?;
                        }
                        other => return Err(format!("want a send to {want}, got {other:?}")),
                    }
                }
            }
            "decided" => match self.pending.pop_front() {
                Some(Output::Decided { state: s, vote, lc }) => {
                    if s != state(&rest[0]) {
                        return Err(format!("decided {s:?} ({vote:?})"));
                    }
                    let have = [
                        ("leader", vote.leader),
                        ("zxid", vote.zxid),
                        ("round", vote.election_epoch),
                        ("pe", vote.peer_epoch),
                        ("lc", lc),
                    ];
                    for (k, v) in have {
                        if let Some(w) = field(rest, k)
                            && num(w) != v
                        {
                            return Err(format!("decided {k}={v:#x}, want {w}"));
                        }
                    }
                }
                other => return Err(format!("want a decision, got {other:?}")),
            },
            "network" => {
                let want = match rest[0].as_str() {
                    "halt" => Network::Halt,
                    "restart" => Network::Restart,
                    other => return Err(format!("unknown network change {other}")),
                };
                match self.pending.pop_front() {
                    Some(Output::Network(n)) if n == want => {}
                    other => return Err(format!("want network {want:?}, got {other:?}")),
                }
            }
            "nothing" => {
                if let Some(o) = self.pending.front() {
                    return Err(format!("pending output {o:?}"));
                }
            }
            "timer" => {
                let want = at(&rest[0]);
                if self.last_timer != Some(want) {
                    return Err(format!("timer {:?}, want @{want}", self.last_timer));
                }
            }
            "codec-error" => {
                if !self.codec_error {
                    return Err("the last recvhex decoded".into());
                }
            }
            "state" => {
                let s = self.e().state();
                if s != state(&rest[0]) {
                    return Err(format!("state {s:?}"));
                }
            }
            "lc" => {
                let lc = self.e().logical_clock();
                if lc != num(&rest[0]) {
                    return Err(format!("lc {lc}"));
                }
            }
            "proposal" => {
                let p = self.e().proposal();
                for (k, v) in [("leader", p.leader), ("zxid", p.zxid), ("pe", p.peer_epoch)] {
                    if let Some(w) = field(rest, k)
                        && num(w) != v
                    {
                        return Err(format!("proposal {p:?}, want {k}={w}"));
                    }
                }
            }
            "vote" => {
                let v = self.e().current_vote();
                let have = [
                    ("leader", v.leader),
                    ("zxid", v.zxid),
                    ("round", v.election_epoch),
                    ("pe", v.peer_epoch),
                ];
                for (k, x) in have {
                    if let Some(w) = field(rest, k)
                        && num(w) != x
                    {
                        return Err(format!("vote {v:?}, want {k}={w}"));
                    }
                }
            }
            other => return Err(format!("unknown expectation {other}")),
        }
        Ok(())
    }
}

fn run(name: &str, text: &str) {
    let mut h = Harness {
        voters: vec![],
        observers: vec![],
        extra: String::new(),
        election: None,
        pending: VecDeque::new(),
        last_timer: None,
        codec_error: false,
        now: 0,
    };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split(" #").next().unwrap().trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let toks = tokens(line);
        if let Err(e) = h.step(&toks) {
            panic!("{name}:{}: `{line}`: {e}\npending: {:#?}", i + 1, h.pending);
        }
    }
    h.collect();
    if !h.pending.is_empty() {
        panic!("{name}: unchecked outputs at the end: {:#?}", h.pending);
    }
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run(
                    concat!("src/election/testdata/", stringify!($name), ".txt"),
                    include_str!(concat!("testdata/", stringify!($name), ".txt")),
                );
            }
        )*
    };
}

scenarios!(
    receiver_table,
    e1_malformed,
    e2_lost_message,
    e3_out_of_election,
    e4_backward_round,
    e6_new_epoch,
    e7_restart,
    e8_join,
    e9_zero_weight,
    e12_probes,
    backoff,
    finalize_wait,
    observers_and_zxid,
);
