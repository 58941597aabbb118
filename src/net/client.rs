//! A small blocking ZooKeeper client over the codec of [`crate::wire::client`]: one session,
//! creates and setData pipelined with a bounded window, and single getData, conditional
//! setData and sync for `zkfle chaos`'s workload. Written here rather than taken from a
//! crate because zkfle needs only these writes, blocking with time-outs, and the Rust
//! ZooKeeper clients are async runtimes of their own; used by `zkfle repro ZOOKEEPER-2201`
//! and examples/zk_load.rs.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::deadline::{Deadline, timed_out};
use crate::wire::client::{
    ConnectRequest, ConnectResponse, CreateRequest, MAX_FRAME, NOTIFICATION_XID, PING_XID,
    ReplyHeader, SetDataRequest, Stat, decode_get_data_reply, frame, frame_len, header_only_frame,
    opcode, path_request_frame,
};

/// A reply to one request of a pipelined run.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    /// The request's index in the run.
    pub index: u64,
    /// When the reply came, after the request was written.
    pub latency: Duration,
    pub zxid: i64,
    /// 0, or the `KeeperException.Code`.
    pub err: i32,
}

/// A znode's data and its Stat, as getData returns them.
pub type DataAndStat = (Vec<u8>, Stat);

/// One session on a server's client port.
pub struct Client {
    s: TcpStream,
    xid: i32,
    pub session_id: i64,
    /// How long a frame, or the reply to a request, may take to arrive whole.
    timeout: Duration,
}

impl Client {
    /// Connects and opens a session (`session_ms` requested); each read waits `timeout` at most.
    pub fn connect(addr: SocketAddr, session_ms: i32, timeout: Duration) -> Result<Client, String> {
        let s = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("connecting to the client port {addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .and_then(|()| s.set_write_timeout(Some(timeout)))
            .map_err(|e| e.to_string())?;
        let mut c = Client {
            s,
            xid: 0,
            session_id: 0,
            timeout,
        };
        c.write(&frame(&ConnectRequest::new_session(session_ms).encode()))?;
        let body = c.read_frame()?;
        let r = ConnectResponse::decode(&body)
            .map_err(|e| format!("the session answer from {addr}: {e}"))?;
        if r.session_id == 0 {
            return Err(format!("{addr} refused the session"));
        }
        c.session_id = r.session_id;
        Ok(c)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s
            .write_all(bytes)
            .map_err(|e| format!("writing to the client port: {e}"))
    }

    /// One frame's body (at most [`MAX_FRAME`] bytes), whole within the timeout: a server
    /// trickling a byte at a time cannot stretch it a read timeout per byte.
    fn read_frame(&mut self) -> Result<Vec<u8>, String> {
        let deadline = Deadline::after(self.timeout, "no whole frame");
        let mut prefix = [0u8; 4];
        self.read_exact_by(&mut prefix, deadline)?;
        let len = frame_len(&prefix)
            .map_err(|e| e.to_string())?
            .unwrap_or(MAX_FRAME);
        let mut body = vec![0u8; len];
        self.read_exact_by(&mut body, deadline)?;
        Ok(body)
    }

    fn read_exact_by(&mut self, mut buf: &mut [u8], deadline: Deadline) -> Result<(), String> {
        let failed = |e: std::io::Error| format!("reading from the client port: {e}");
        while !buf.is_empty() {
            deadline.arm_read(&self.s).map_err(failed)?;
            match self.s.read(buf) {
                Ok(0) => {
                    return Err(failed(std::io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if timed_out(&e) => return Err(failed(deadline.passed())),
                Err(e) => return Err(failed(e)),
            }
        }
        Ok(())
    }

    fn next_xid(&mut self) -> i32 {
        self.xid = self.xid.wrapping_add(1).max(1);
        self.xid
    }

    /// Writes request `i` (a frame from `request(self, i)`) while `more(i)`, at most `window`
    /// without reply, calling `on_reply` for each reply in order. Stops at the first read that
    /// times out or fails (the error, after the replies before it).
    pub fn pipeline(
        &mut self,
        window: usize,
        mut request: impl FnMut(&mut Client, u64) -> Vec<u8>,
        mut more: impl FnMut(u64) -> bool,
        mut on_reply: impl FnMut(Reply),
    ) -> Result<(), String> {
        let mut inflight: VecDeque<(u64, Instant)> = VecDeque::new();
        let mut i = 0u64;
        loop {
            let mut out = Vec::new();
            while inflight.len() < window.max(1) && more(i) {
                out.extend(request(self, i));
                inflight.push_back((i, Instant::now()));
                i += 1;
            }
            if !out.is_empty() {
                self.write(&out)?;
            }
            let Some(&(index, sent)) = inflight.front() else {
                return Ok(());
            };
            let body = self.read_frame()?;
            let h = ReplyHeader::decode(&body).map_err(|e| format!("a reply: {e}"))?;
            if h.xid == PING_XID || h.xid == NOTIFICATION_XID {
                // Pings and watch events do not answer the request: it still waits, within
                // the same bound as any read.
                if sent.elapsed() >= self.timeout {
                    return Err(format!(
                        "no reply to request {index} within {:.1} s (only pings or watch events came)",
                        self.timeout.as_secs_f64()
                    ));
                }
                continue;
            }
            inflight.pop_front();
            on_reply(Reply {
                index,
                latency: sent.elapsed(),
                zxid: h.zxid,
                err: h.err,
            });
        }
    }

    /// The frame of a create of `path` (persistent, open ACL).
    pub fn create_frame(&mut self, path: &str, data: &[u8]) -> Vec<u8> {
        let xid = self.next_xid();
        CreateRequest { path, data }.frame(xid)
    }

    /// The frame of a setData of `path`, any version.
    pub fn set_data_frame(&mut self, path: &str, data: &[u8]) -> Vec<u8> {
        let xid = self.next_xid();
        SetDataRequest {
            path,
            data,
            version: -1,
        }
        .frame(xid)
    }

    /// Sends one request and waits for its reply (pings and watch events skipped, within the
    /// timeout): the reply's header and its whole body.
    fn call(&mut self, request: Vec<u8>) -> Result<(ReplyHeader, Vec<u8>), String> {
        let xid = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
        let sent = Instant::now();
        self.write(&request)?;
        loop {
            let body = self.read_frame()?;
            let h = ReplyHeader::decode(&body).map_err(|e| format!("a reply: {e}"))?;
            if h.xid == xid {
                return Ok((h, body));
            }
            if h.xid != PING_XID && h.xid != NOTIFICATION_XID {
                return Err(format!("a reply to xid {} where {xid} was awaited", h.xid));
            }
            if sent.elapsed() >= self.timeout {
                return Err(format!(
                    "no reply within {:.1} s (only pings or watch events came)",
                    self.timeout.as_secs_f64()
                ));
            }
        }
    }

    /// getData of `path` (no watch): the reply's header, and the data and Stat when it is 0.
    pub fn get_data(&mut self, path: &str) -> Result<(ReplyHeader, Option<DataAndStat>), String> {
        let xid = self.next_xid();
        let (h, body) = self.call(path_request_frame(xid, opcode::GET_DATA, path))?;
        if h.err != 0 {
            return Ok((h, None));
        }
        let (data, stat) =
            decode_get_data_reply(&body).map_err(|e| format!("a getData reply: {e}"))?;
        Ok((h, Some((data.unwrap_or_default(), stat))))
    }

    /// setData of `path` if its version is `version` (-1: any): the header, and the new Stat.
    pub fn set_data(
        &mut self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<(ReplyHeader, Option<Stat>), String> {
        let xid = self.next_xid();
        let (h, body) = self.call(
            SetDataRequest {
                path,
                data,
                version,
            }
            .frame(xid),
        )?;
        if h.err != 0 {
            return Ok((h, None));
        }
        let stat = Stat::decode_reply(&body).map_err(|e| format!("a setData reply: {e}"))?;
        Ok((h, Some(stat)))
    }

    /// Creates `path` holding `data`: the reply's header (err -110 when it exists).
    pub fn create_one(&mut self, path: &str, data: &[u8]) -> Result<ReplyHeader, String> {
        let frame = self.create_frame(path, data);
        Ok(self.call(frame)?.0)
    }

    /// sync of `path`: once it returns, this session's server has applied what the leader
    /// had committed when it processed the sync.
    pub fn sync(&mut self, path: &str) -> Result<ReplyHeader, String> {
        let xid = self.next_xid();
        Ok(self.call(path_request_frame(xid, opcode::SYNC, path))?.0)
    }

    /// Creates `path`; `Ok(err)` with the server's code (0, or -110 when it exists).
    pub fn create(&mut self, path: &str, data: &[u8]) -> Result<i32, String> {
        Ok(self.create_one(path, data)?.err)
    }

    /// Ends the session (best effort).
    pub fn close(mut self) {
        let xid = self.next_xid();
        let _ = self.write(&header_only_frame(xid, opcode::CLOSE_SESSION));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::client::ReplyHeader;

    /// A server that opens the session, then answers every request with pings only: the
    /// request's reply is waited for within the client's timeout, not for ever.
    #[test]
    fn a_reply_that_never_comes_past_pings_is_an_error_in_time() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let session = ConnectResponse {
                protocol_version: 0,
                timeout_ms: 30_000,
                session_id: 7,
                password: vec![0; 16],
                read_only: Some(false),
            };
            s.write_all(&frame(&session.encode())).unwrap();
            let mut ping = Vec::new();
            ReplyHeader {
                xid: PING_XID,
                zxid: 0,
                err: 0,
            }
            .encode_into(&mut ping);
            let ping = frame(&ping);
            for _ in 0..40 {
                if s.write_all(&ping).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut c = Client::connect(addr, 30_000, Duration::from_millis(700)).unwrap();
        let start = Instant::now();
        let e = c
            .pipeline(1, |c, _| c.create_frame("/x", b""), |i| i < 1, |_| {})
            .unwrap_err();
        assert!(e.contains("no reply to request 0"), "{e}");
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        drop(c);
        server.join().unwrap();
    }
}
