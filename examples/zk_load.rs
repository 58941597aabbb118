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

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as i32).to_be_bytes());
    b.extend(s);
}

struct Zk {
    s: TcpStream,
    xid: i32,
}

impl Zk {
    fn connect(addr: &str) -> std::io::Result<Zk> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut zk = Zk { s, xid: 0 };
        let mut b = Vec::new();
        b.extend(0i32.to_be_bytes());
        b.extend(0i64.to_be_bytes());
        b.extend(30000i32.to_be_bytes());
        b.extend(0i64.to_be_bytes());
        put_str(&mut b, &[0u8; 16]);
        b.push(0);
        zk.send(&b)?;
        let r = zk.recv()?;
        if r.len() < 16 || i64::from_be_bytes(r[8..16].try_into().unwrap()) == 0 {
            return Err(std::io::Error::other("no session"));
        }
        Ok(zk)
    }

    fn send(&mut self, body: &[u8]) -> std::io::Result<()> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend(body);
        self.s.write_all(&f)
    }

    fn recv(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = [0u8; 4];
        self.s.read_exact(&mut l)?;
        let mut b = vec![0u8; i32::from_be_bytes(l) as usize];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }

    fn set_frame(&mut self, path: &str, data: &[u8]) -> Vec<u8> {
        self.xid += 1;
        let mut b = self.xid.to_be_bytes().to_vec();
        b.extend(5i32.to_be_bytes()); // setData
        put_str(&mut b, path.as_bytes());
        put_str(&mut b, data);
        b.extend((-1i32).to_be_bytes()); // any version
        let mut f = (b.len() as i32).to_be_bytes().to_vec();
        f.extend(b);
        f
    }

    fn create_frame(&mut self, path: &str, data: &[u8]) -> Vec<u8> {
        self.xid += 1;
        let mut b = self.xid.to_be_bytes().to_vec();
        b.extend(1i32.to_be_bytes());
        put_str(&mut b, path.as_bytes());
        put_str(&mut b, data);
        b.extend(1i32.to_be_bytes());
        b.extend(31i32.to_be_bytes());
        put_str(&mut b, b"world");
        put_str(&mut b, b"anyone");
        b.extend(0i32.to_be_bytes());
        let mut f = (b.len() as i32).to_be_bytes().to_vec();
        f.extend(b);
        f
    }

    /// Writes request `i` (`frame(self, i)`) while `more(i)`, `window` in flight; returns the
    /// latencies (us) of the successful ones and the number of errors.
    fn run(
        &mut self,
        window: usize,
        mut frame: impl FnMut(&mut Zk, u64) -> Vec<u8>,
        mut more: impl FnMut(u64) -> bool,
    ) -> std::io::Result<(Vec<u32>, u64)> {
        let mut inflight: VecDeque<Instant> = VecDeque::new();
        let mut lat = Vec::new();
        let mut errors = 0;
        let mut i = 0u64;
        loop {
            let mut out = Vec::new();
            while inflight.len() < window && more(i) {
                out.extend(frame(self, i));
                inflight.push_back(Instant::now());
                i += 1;
            }
            if !out.is_empty() {
                self.s.write_all(&out)?;
            }
            if inflight.is_empty() {
                return Ok((lat, errors));
            }
            let r = self.recv()?;
            if i32::from_be_bytes(r[0..4].try_into().unwrap()) < 0 {
                continue;
            }
            let t = inflight
                .pop_front()
                .expect("a reply to a request in flight");
            if i32::from_be_bytes(r[12..16].try_into().unwrap()) == 0 {
                lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
            } else {
                errors += 1;
            }
        }
    }
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
    let mut zk = Zk::connect(&args[1]).unwrap_or_else(|e| {
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
            zk.run(
                window,
                |zk, i| zk.create_frame(&format!("/{prefix}{i}"), &data),
                |i| i < count,
            )
        }
        "load" => {
            let count: u64 = arg(&args, "--count", 1000).max(1);
            let secs: f64 = arg(&args, "--secs", 10.0);
            let create = |zk: &mut Zk, i: u64| zk.create_frame(&format!("/{prefix}{i}"), &data);
            zk.run(64, create, |i| i < count)
                .and_then(|_| {
                    let start = Instant::now();
                    let until = start + Duration::from_secs_f64(secs);
                    let r = zk.run(
                        window,
                        |zk, i| zk.set_frame(&format!("/{prefix}{}", i % count), &data),
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
