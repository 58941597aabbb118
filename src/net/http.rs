//! The HTTP servers of `zkfle join` (the AdminServer, the Prometheus endpoint): HTTP/1.1 by
//! hyper, bounded as the other ports are: at most [`MAX_CONNECTIONS`] at a time, each closed
//! after [`IDLE_CLOSE`] without a request, request heads bounded by hyper, bodies never read.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::{debug, warn};

/// Connections served at a time, per server; more are closed at once.
pub const MAX_CONNECTIONS: usize = 32;
/// A connection that sends no request for this long is closed (Jetty's idle timeout is 30 s).
pub const IDLE_CLOSE: Duration = Duration::from_secs(30);
/// Request heads beyond this are refused by hyper (431).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// A response body.
pub type Body = Full<Bytes>;

/// Serves `answer` (given the method and the path) at `listen` until the process ends. A port
/// that cannot be bound is warned about, naming `what` and `off` (how to move or turn it off),
/// and the member goes on without it, as a Java member does.
pub async fn serve<F>(listen: SocketAddr, what: &'static str, off: &'static str, answer: F)
where
    F: Fn(&Method, &str) -> Response<Body> + Send + Sync + 'static,
{
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            warn!(
                "{what} {listen}: cannot listen ({e}): it will not reach this member ({off}); it votes and follows all the same"
            );
            return;
        }
    };
    debug!("{what} on {listen}");
    let answer = Arc::new(answer);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and the like: wait rather than spin.
                debug!("{what} {listen}: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!("{what}: {MAX_CONNECTIONS} connections busy, closing {peer}'s");
            continue;
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let response = answer(req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE_CLOSE)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                debug!("{what}: {peer}: {e}");
            }
        });
    }
}

/// A response with `status`, `content_type` and `body`.
pub fn response(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("Content-Type", content_type)
        .body(Full::new(body.into()))
        .unwrap_or_default()
}
