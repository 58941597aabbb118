//! Live capture from a network interface through libpcap (loaded when a capture starts,
//! `capture::libpcap`).
//!
//! [`LiveSegments`] is a [`SegmentSource`] like a capture file: packets go through the same
//! [`super::with_tcp_segment`], counted alike, so a live capture decodes exactly as the file `tcpdump -w` would have
//! written. It polls with a short timeout so that a stop request (Ctrl-C) is seen even when
//! the wire is quiet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::libpcap::{Capture, ERROR_PERM_DENIED, Read};
use super::{
    CaptureError, CaptureStats, PacketRef, SegmentSource, TcpSegmentRef, Timestamp,
    with_counted_segment,
};

/// How long one poll of libpcap waits for a packet, milliseconds.
const POLL_MS: i32 = 100;

/// Why a live capture could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Opening the interface was refused for lack of privileges.
    #[error(
        "cannot capture on {iface}: {detail}; live capture needs root or the CAP_NET_RAW capability (run with sudo, or `sudo setcap cap_net_raw+ep $(which zkfle)`), or capture with tcpdump and decode the file"
    )]
    Permission { iface: String, detail: String },
    /// Any other libpcap failure (not installed, no such interface, a bad filter).
    #[error("cannot capture on {iface}: {detail}")]
    Pcap { iface: String, detail: String },
}

/// TCP segments captured live.
pub struct LiveSegments {
    capture: Capture,
    /// The descriptor polled while no packet waits (-1: none, sleep instead).
    fd: i32,
    linktype: u16,
    records: u64,
    stop: Arc<AtomicBool>,
    stats: CaptureStats,
}

impl LiveSegments {
    /// Opens `iface` with the BPF `filter`; reading ends when `stop` is set.
    pub fn open(iface: &str, filter: &str, stop: Arc<AtomicBool>) -> Result<Self, LiveError> {
        // A large kernel buffer: an election is bursty, and a loaded machine may not schedule
        // the decoder at once. Non-blocking, polled here with a timeout: libpcap's own timeout
        // does not end a blocking read on a quiet Linux interface (TPACKET_V3), and Ctrl-C
        // must be seen.
        let capture = Capture::open(iface, 65_535, 32 << 20, POLL_MS, filter).map_err(|e| {
            let lower = e.message.to_ascii_lowercase();
            if e.status == ERROR_PERM_DENIED
                || lower.contains("permission")
                || lower.contains("operation not permitted")
            {
                LiveError::Permission {
                    iface: iface.to_string(),
                    detail: e.message,
                }
            } else {
                LiveError::Pcap {
                    iface: iface.to_string(),
                    detail: e.message,
                }
            }
        })?;
        let linktype = u16::try_from(capture.datalink()).unwrap_or(u16::MAX);
        Ok(LiveSegments {
            fd: capture.selectable_fd(),
            capture,
            linktype,
            records: 0,
            stop,
            stats: CaptureStats::default(),
        })
    }

    /// Counters of everything captured and skipped so far.
    pub fn stats(&self) -> &CaptureStats {
        &self.stats
    }

    /// libpcap's own counters: packets the filter passed, and those dropped for lack of
    /// buffer space (by the kernel or the interface).
    pub fn drops(&mut self) -> Option<(u32, u32)> {
        self.capture.stats()
    }
}

/// The BPF filter for the election and quorum ports given.
pub fn port_filter(ports: &[u16]) -> String {
    let parts: Vec<String> = ports.iter().map(|p| format!("port {p}")).collect();
    format!("tcp and ({})", parts.join(" or "))
}

impl SegmentSource for LiveSegments {
    fn next_segment<F: FnMut(&TcpSegmentRef<'_>)>(
        &mut self,
        mut f: F,
    ) -> Option<Result<(), CaptureError>> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let fd = self.fd;
            let packet = match self.capture.read() {
                Ok(Read::Packet(p)) => p,
                Ok(Read::Empty) => {
                    let mut pollfd = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    if fd < 0 {
                        std::thread::sleep(std::time::Duration::from_millis(POLL_MS as u64));
                    } else {
                        // SAFETY: one valid pollfd, for the duration of the call.
                        unsafe { libc::poll(&mut pollfd, 1, POLL_MS) };
                    }
                    continue;
                }
                Ok(Read::End) => return None,
                Err(e) => {
                    return Some(Err(CaptureError::Read {
                        offset: 0,
                        source: std::io::Error::other(e),
                    }));
                }
            };
            self.records += 1;
            self.stats.packets += 1;
            let ts = packet.header.ts;
            let pref = PacketRef {
                record: self.records,
                offset: 0,
                time: Timestamp::from_fraction(
                    ts.tv_sec,
                    u64::try_from(ts.tv_usec).unwrap_or(0),
                    1_000_000,
                ),
                linktype: self.linktype,
                data: packet.data,
                orig_len: packet.header.len,
            };
            let counted = with_counted_segment(&pref, &mut self.stats, |seg| {
                f(seg);
                Some(())
            });
            if counted.is_some() {
                return Some(Ok(()));
            }
        }
    }
}
