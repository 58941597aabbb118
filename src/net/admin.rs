//! `zkfle join`'s AdminServer: Java's HTTP command interface (`JettyAdminServer`), at
//! `admin.serverAddress`:`admin.serverPort` (0.0.0.0:8080 by default) under `admin.commandURL`
//! (`/commands`), on unless `admin.enableServer=false`, as on a Java member. Each
//! `/commands/NAME` (GET or POST) answers the JSON object `src/output/admin.rs` makes;
//! `/commands` itself lists the commands.
//!
//! HTTP by `super::http`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use hyper::{Method, Response, StatusCode};

use super::http::{self, Body};
use super::status::StatusBoard;
use crate::output::admin::{self, AdminView};
use crate::output::fourlw::MemberSetup;

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

/// Serves the AdminServer until the process ends.
pub async fn serve(cfg: AdminConfig, board: StatusBoard) {
    let listen = cfg.listen;
    http::serve(
        listen,
        "AdminServer",
        "admin.serverPort, or admin.enableServer=false",
        move |method, path| answer(method, path, &cfg, &board),
    )
    .await
}

/// One request's response.
fn answer(method: &Method, path: &str, cfg: &AdminConfig, board: &StatusBoard) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::POST | Method::HEAD) {
        return http::response(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n",
        );
    }
    let base = cfg.command_url.trim_end_matches('/');
    let Some(rest) = path.strip_prefix(base) else {
        return http::response(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    };
    let name = rest.trim_start_matches('/');
    if name.is_empty() {
        return http::response(
            StatusCode::OK,
            "text/html;charset=utf-8",
            admin::command_list(base),
        );
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
    http::response(StatusCode::OK, "application/json", text)
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
