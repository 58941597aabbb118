//! `zkfle join`'s AdminServer: Java's HTTP command interface (`JettyAdminServer`), at
//! `admin.serverAddress`:`admin.serverPort` (0.0.0.0:8080 by default) under `admin.commandURL`
//! (`/commands`), on unless `admin.enableServer=false`, as on a Java member. Each
//! `/commands/NAME` (GET or POST) answers the JSON object `src/output/admin.rs` makes;
//! `/commands` itself lists the commands.
//!
//! HTTP/1.1 by hyper; bounded as the other ports are: at most [`MAX_CONNECTIONS`] at a time,
//! each closed after [`IDLE_CLOSE`] without a request, request heads bounded by hyper and
//! bodies never read.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::status::StatusBoard;
use crate::output::admin::{self, AdminView};
use crate::output::fourlw::MemberSetup;

/// AdminServer connections served at a time; more are closed at once.
pub const MAX_CONNECTIONS: usize = 32;
/// A connection that sends no request for this long is closed (Jetty's idle timeout is 30 s).
pub const IDLE_CLOSE: Duration = Duration::from_secs(30);
/// Request heads beyond this are refused by hyper (431).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Where and what the AdminServer answers.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// `admin.commandURL`, e.g. `/commands`.
    pub command_url: String,
    pub setup: MemberSetup,
    /// The membership and this member's client address; the data directory's figures are
    /// measured at each request.
    pub view: AdminView,
    pub data_dir: Option<PathBuf>,
}

/// Serves the AdminServer until the process ends. A port that cannot be bound is warned about
/// and the member goes on without it, as a Java member does.
pub async fn serve(cfg: AdminConfig, board: StatusBoard) {
    let listener = match TcpListener::bind(cfg.listen).await {
        Ok(l) => l,
        Err(e) => {
            warn!(
                "AdminServer {}: cannot listen ({e}): its commands will not reach this member (admin.serverPort or admin.enableServer=false to move or turn it off); it votes and follows all the same",
                cfg.listen
            );
            return;
        }
    };
    debug!("AdminServer on {}{}", cfg.listen, cfg.command_url);
    let cfg = Arc::new(cfg);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                debug!("AdminServer {}: accept: {e}", cfg.listen);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!("AdminServer: {MAX_CONNECTIONS} connections busy, closing {peer}'s");
            continue;
        };
        let cfg = cfg.clone();
        let board = board.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answer = answer(&req, &cfg, &board);
                async move { Ok::<_, Infallible>(answer) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE_CLOSE)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                debug!("AdminServer: {peer}: {e}");
            }
        });
    }
}

/// One request's response.
fn answer(
    req: &Request<Incoming>,
    cfg: &AdminConfig,
    board: &StatusBoard,
) -> Response<Full<Bytes>> {
    if !matches!(*req.method(), Method::GET | Method::POST | Method::HEAD) {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let base = cfg.command_url.trim_end_matches('/');
    let path = req.uri().path();
    let Some(rest) = path.strip_prefix(base) else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    let name = rest.trim_start_matches('/');
    if name.is_empty() {
        return Response::builder()
            .header("Content-Type", "text/html;charset=utf-8")
            .body(Full::new(Bytes::from(admin::command_list(base))))
            .unwrap_or_default();
    }
    let mut view = cfg.view.clone();
    if let Some(d) = &cfg.data_dir {
        let version_2 = d.join("version-2");
        view.dir_size = dir_size(&version_2);
        view.last_snapshot = last_snapshot(&version_2);
    }
    let body = admin::response(name, &board.read(), &cfg.setup, &view);
    let mut text = serde_json::to_string_pretty(&body).unwrap_or_default();
    text.push('\n');
    Response::builder()
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(text)))
        .unwrap_or_default()
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "text/plain")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .unwrap_or_default()
}

/// Bytes of the files in `dir` (Java's `getDataDirSize`).
pub fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok()?.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    })
}

/// The newest `snapshot.ZXID` in `dir`: its zxid and modification time in seconds.
fn last_snapshot(dir: &Path) -> Option<(i64, i64)> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name();
            let zxid = name.to_str()?.strip_prefix("snapshot.")?;
            let zxid = u64::from_str_radix(zxid, 16).ok()? as i64;
            let time = e
                .metadata()
                .ok()?
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_secs() as i64;
            Some((zxid, time))
        })
        .max()
}
