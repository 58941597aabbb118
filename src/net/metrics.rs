//! `zkfle join`'s Prometheus endpoint, when `metricsProvider.className` names Java's
//! `PrometheusMetricsProvider`: `/metrics` at `metricsProvider.httpHost`:`httpPort`
//! (0.0.0.0:7000), as Java's (GET, HEAD or POST; every other path 404). The text is
//! `src/output/prometheus.rs`'s; HTTP by `super::http`.

use std::net::SocketAddr;

use hyper::{Method, Response, StatusCode};

use super::http::{self, Body};
use super::status::StatusBoard;
use crate::output::fourlw::MemberSetup;
use crate::output::prometheus::{self, Process};

/// Where and what the metrics endpoint answers.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    pub listen: SocketAddr,
    pub setup: MemberSetup,
    /// `metricsProvider.exportJvmInfo`: the process's figures too (zkfle has no JVM's).
    pub process: bool,
}

/// Serves the endpoint until the process ends.
pub async fn serve(cfg: MetricsConfig, board: StatusBoard) {
    let listen = cfg.listen;
    http::serve(
        listen,
        "metrics endpoint",
        "metricsProvider.httpPort, or no metricsProvider.className",
        move |method, path| answer(method, path, &cfg, &board),
    )
    .await
}

fn answer(method: &Method, path: &str, cfg: &MetricsConfig, board: &StatusBoard) -> Response<Body> {
    if path != "/metrics" {
        return http::response(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    }
    if !matches!(*method, Method::GET | Method::POST | Method::HEAD) {
        return http::response(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n",
        );
    }
    let process = cfg.process.then(process);
    let text = prometheus::exposition(&board.read(), &cfg.setup, process.as_ref());
    http::response(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        text,
    )
}

/// This process's figures from /proc (Linux); absent elsewhere.
fn process() -> Process {
    let ticks = 100.0; // USER_HZ on Linux
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which may hold spaces: it ends at the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    // In `rest`, field 0 is the state (stat's 3rd): utime is stat's 14th, so index 11.
    let cpu = field(11).zip(field(12)).map(|(u, s)| (u + s) / ticks);
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    let start = field(19).zip(boot).map(|(st, b)| b + st / ticks);
    let page = 4096.0;
    Process {
        cpu_seconds: cpu,
        start_time_seconds: start,
        open_fds: super::manager::open_files().map(|n| n as f64),
        max_fds: super::manager::open_files_limit().map(|n| n as f64),
        virtual_memory_bytes: field(20),
        resident_memory_bytes: field(21).map(|pages| pages * page),
    }
}
