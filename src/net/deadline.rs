//! A bound on a whole exchange over a blocking socket.
//!
//! A socket's read timeout bounds one read, so a peer trickling a byte at a time stretches an
//! exchange by a timeout per byte. A [`Deadline`] sets each read's (and write's) timeout to
//! what is left of the whole, and fails once nothing is. Every blocking exchange with a peer,
//! a leader or a client port that must end in time goes through it.

use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// When a whole exchange must be done by, and what is missing if it is not.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    end: Instant,
    whole: Duration,
    /// What the error says did not come, as in "no answer" (followed by "within 2.0 s").
    missing: &'static str,
}

impl Deadline {
    /// `whole` from now.
    pub fn after(whole: Duration, missing: &'static str) -> Deadline {
        Deadline {
            end: Instant::now() + whole,
            whole,
            missing,
        }
    }

    /// The same bound, again from now.
    pub fn renewed(self) -> Deadline {
        Deadline::after(self.whole, self.missing)
    }

    /// What is left; `None` once it has passed.
    pub fn left(&self) -> Option<Duration> {
        let left = self.end.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Sets `tcp`'s read timeout to what is left; the [`Deadline::passed`] error once nothing is.
    pub fn arm_read(&self, tcp: &TcpStream) -> io::Result<()> {
        tcp.set_read_timeout(Some(self.left().ok_or_else(|| self.passed())?))
    }

    /// Sets both of `tcp`'s timeouts to what is left; the [`Deadline::passed`] error once
    /// nothing is.
    pub fn arm(&self, tcp: &TcpStream) -> io::Result<()> {
        let left = self.left().ok_or_else(|| self.passed())?;
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))
    }

    /// The error of a deadline passed: `TimedOut`, saying what did not come within what bound.
    pub fn passed(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{} within {:.1} s", self.missing, self.whole.as_secs_f64()),
        )
    }
}

/// Whether a read ended because its timeout did (`WouldBlock` on Unix, `TimedOut` elsewhere
/// and from [`Deadline::passed`]).
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A peer writing a byte every 100 ms keeps every read under a 300 ms read timeout; the
    /// deadline still ends the exchange at its bound.
    #[test]
    fn a_trickling_peer_cannot_stretch_a_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            for _ in 0..40 {
                if std::io::Write::write_all(&mut s, b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut s = TcpStream::connect(addr).unwrap();
        let d = Deadline::after(Duration::from_millis(700), "no whole frame");
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let err = loop {
            if let Err(e) = d.arm_read(&s) {
                break e;
            }
            match s.read(&mut buf) {
                Ok(0) => panic!("the peer closed early"),
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        let took = start.elapsed();
        assert!(timed_out(&err), "{err}");
        assert!(took < Duration::from_millis(1500), "took {took:?}");
        drop(s);
        writer.join().unwrap();
        assert_eq!(
            d.passed().to_string(),
            "no whole frame within 0.7 s",
            "the error says what did not come and the bound"
        );
    }

    #[test]
    fn left_is_none_once_passed() {
        let d = Deadline::after(Duration::ZERO, "no answer");
        assert!(d.left().is_none());
        assert!(d.renewed().left().is_none());
        let d = Deadline::after(Duration::from_secs(60), "no answer");
        assert!(d.left().unwrap() > Duration::from_secs(59));
    }
}
