//! Log capture for tests that check what a node logs: a `tracing_subscriber` writer that
//! keeps every line in memory.
//!
//! Use it with `mod common;` and `use common::logs;`, as every helper of `tests/common/`.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// The captured log; clones share it (hand one to the subscriber's `with_writer`).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's WARN and ERROR lines (without colours) until the guard drops.
    pub fn warnings() -> (Logs, tracing::subscriber::DefaultGuard) {
        // tracing-core 0.1.36 caches a callsite's interest from the thread that first reaches
        // it when only one dispatcher exists in the process (tokio-rs/tracing#3611): a span
        // first entered by a node of another test, on a thread with no subscriber, would be
        // disabled for this thread too, and our lines would lose its fields (sid, address).
        // A second dispatcher, alive for the whole process, makes every thread's subscriber
        // count.
        static SECOND_DISPATCH: OnceLock<tracing::Dispatch> = OnceLock::new();
        SECOND_DISPATCH
            .get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
        let logs = Logs::default();
        let writer = logs.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(sub))
    }

    /// The captured lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}
