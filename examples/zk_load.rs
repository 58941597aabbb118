//! A tiny ZooKeeper client load generator for scripts/bench-zab.sh (no Java needed): pipelined
//! `create` requests over one client connection, with per-request latency.
//!
//! ```sh
//! # fill: create N znodes /PREFIX<i> of SIZE bytes, WINDOW requests in flight
//! zk_load 127.0.0.3:2181 fill --prefix n --count 100000 --size 100 --window 256
//! # load: for SECS seconds, setData of SIZE bytes round-robin over the znodes /PREFIX0 ..
//! # /PREFIX<COUNT-1> (created first), WINDOW in flight; prints one JSON line. The database
//! # does not grow, so a long run does not fill the servers' heaps.
//! zk_load 127.0.0.3:2181 load --prefix l --count 1000 --secs 10 --size 1024 --window 1
//! ```
//!
//! Latency is request written to reply read (a write is committed when its reply comes).

use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use zkfle::net::client::Client;

/// Runs requests through `zk` (see [`Client::pipeline`]): the latencies (us) of the
/// successful ones and the number of errors.
fn run(
    zk: &mut Client,
    window: usize,
    frame: impl FnMut(&mut Client, u64) -> Vec<u8>,
    more: impl FnMut(u64) -> bool,
) -> Result<(Vec<u32>, u64), String> {
    let mut lat = Vec::new();
    let mut errors = 0;
    zk.pipeline(window, frame, more, |r| {
        if r.err == 0 {
            lat.push(r.latency.as_micros().min(u32::MAX as u128) as u32);
        } else {
            errors += 1;
        }
    })?;
    Ok((lat, errors))
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: zk_load HOST:PORT fill|load [--prefix P] [--count N] [--secs S] [--size B] [--window W]"
        );
        std::process::exit(2);
    }
    let prefix: String = arg(&args, "--prefix", "n".to_string());
    let size: usize = arg(&args, "--size", 100);
    let window: usize = arg(&args, "--window", 1);
    let data = vec![b'x'; size];
    let addr = args[1]
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| {
            eprintln!("zk_load: cannot resolve {}", args[1]);
            std::process::exit(2)
        });
    let mut zk = Client::connect(addr, 30_000, Duration::from_secs(30)).unwrap_or_else(|e| {
        eprintln!("zk_load: connect {}: {e}", args[1]);
        std::process::exit(1)
    });
    let epoch = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let mut start_at = Instant::now();
    let mut wall_start = epoch();
    let (mut lat, errors) = match args[2].as_str() {
        "fill" => {
            let count: u64 = arg(&args, "--count", 1000);
            run(
                &mut zk,
                window,
                |zk, i| zk.create_frame(&format!("/{prefix}{i}"), &data),
                |i| i < count,
            )
        }
        "load" => {
            let count: u64 = arg(&args, "--count", 1000).max(1);
            let secs: f64 = arg(&args, "--secs", 10.0);
            let create = |zk: &mut Client, i: u64| zk.create_frame(&format!("/{prefix}{i}"), &data);
            run(&mut zk, 64, create, |i| i < count)
                .and_then(|_| {
                    let start = Instant::now();
                    let until = start + Duration::from_secs_f64(secs);
                    let r = run(
                        &mut zk,
                        window,
                        |zk, i| zk.set_data_frame(&format!("/{prefix}{}", i % count), &data),
                        |_| Instant::now() < until,
                    );
                    r.map(|r| (r, start))
                })
                .map(|(r, s)| {
                    wall_start += start_at.elapsed().as_secs_f64() - s.elapsed().as_secs_f64();
                    start_at = s;
                    r
                })
        }
        other => {
            eprintln!("zk_load: unknown mode {other}");
            std::process::exit(2)
        }
    }
    .unwrap_or_else(|e| {
        eprintln!("zk_load: {e}");
        std::process::exit(1)
    });
    let secs = start_at.elapsed().as_secs_f64();
    let wall_end = epoch();
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "{{\"ops\":{},\"errors\":{errors},\"secs\":{secs:.3},\"ops_per_sec\":{:.1},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"max_us\":{},\"window\":{window},\"size\":{size},\"t_start\":{wall_start:.6},\"t_end\":{wall_end:.6}}}",
        lat.len(),
        lat.len() as f64 / secs,
        q(0.5),
        q(0.9),
        q(0.99),
        lat.last().copied().unwrap_or(0)
    );
}
