//! `zkfle wire decode|encode`: one message between hex and JSON.

use std::io::{Read, Write};

use clap::{Subcommand, ValueEnum};

use super::CliError;
use crate::output::json::{JsonWriter, Message, message_from_json};
use crate::wire::{InitialMessage, Notification};

#[derive(Debug, Subcommand)]
pub enum WireCommand {
    /// Print a message given as hex as one JSON object.
    Decode {
        /// What the bytes are.
        #[arg(long, value_enum, default_value_t = Kind::Notification)]
        kind: Kind,
        /// The message bytes in hex (a notification without its 4-byte frame length).
        hex: String,
    },
    /// Read messages' JSON objects on stdin (one, or a stream such as `zkfle decode --format
    /// jsonl` prints) and print the hex of each one's exact bytes, a line each.
    Encode,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    Notification,
    Initial,
}

pub fn run(cmd: WireCommand) -> Result<(), CliError> {
    match cmd {
        WireCommand::Decode { kind, hex } => {
            let bytes = parse_hex(&hex)?;
            let msg = match kind {
                Kind::Notification => Notification::decode(&bytes).map(Message::Notification),
                Kind::Initial => InitialMessage::decode(&bytes).map(Message::Initial),
            }
            .map_err(|e| CliError::input(format!("wire decode: {e}")))?;
            let mut line = Vec::new();
            JsonWriter::new().message(&mut line, &msg);
            println!("{}", String::from_utf8_lossy(&line));
            Ok(())
        }
        WireCommand::Encode => {
            // Streamed: each object is encoded as soon as it has come whole (`zkfle decode -i
            // ... | zkfle wire encode` prints as it goes), and one object may not take more
            // than MAX_OBJECT_BYTES of input.
            let taken = std::rc::Rc::new(std::cell::Cell::new(0u64));
            let input = BoundedInput {
                inner: std::io::stdin().lock(),
                taken: taken.clone(),
            };
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let mut count = 0;
            // One object, or a stream of them (e.g. `zkfle decode --format jsonl` output):
            // one line of hex each.
            for (i, value) in serde_json::Deserializer::from_reader(input)
                .into_iter::<serde_json::Value>()
                .enumerate()
            {
                taken.set(0);
                let value = value.map_err(|e| {
                    if e.is_io() {
                        CliError::failure(format!("wire encode: reading stdin: {e}"))
                    } else {
                        CliError::input(format!(
                            "wire encode: stdin line {} column {}: {e}",
                            e.line(),
                            e.column()
                        ))
                    }
                })?;
                let at = |e: &dyn std::fmt::Display| {
                    CliError::input(format!("wire encode: object {}: {e}", i + 1))
                };
                let msg = message_from_json(&value).map_err(|e| at(&e))?;
                let bytes = msg.encode().map_err(|e| at(&e))?;
                writeln!(out, "{}", hex::encode(bytes)).map_err(CliError::writing)?;
                count += 1;
            }
            if count == 0 {
                return Err(CliError::input("wire encode: no JSON object on stdin"));
            }
            Ok(())
        }
    }
}

/// The most input one JSON object may take (a notification's config is at most 512 KiB, 1 MiB
/// as hex): more is refused instead of buffered.
const MAX_OBJECT_BYTES: u64 = 16 << 20;

/// Stdin, refusing to give more than [`MAX_OBJECT_BYTES`] since `taken` was last reset.
struct BoundedInput<R> {
    inner: R,
    taken: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for BoundedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.taken.get() >= MAX_OBJECT_BYTES {
            return Err(std::io::Error::other(format!(
                "more than {} MiB of input without a whole JSON object",
                MAX_OBJECT_BYTES >> 20
            )));
        }
        let n = self.inner.read(buf)?;
        self.taken.set(self.taken.get() + n as u64);
        Ok(n)
    }
}

/// Hex digits, optionally with a `0x` prefix and whitespace between bytes.
fn parse_hex(text: &str) -> Result<Vec<u8>, CliError> {
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(&digits).map_err(|e| {
        CliError::input(match e {
            hex::FromHexError::InvalidHexCharacter { c, index } => {
                format!("hex: invalid character {c:?} at digit {index}")
            }
            hex::FromHexError::OddLength => {
                format!("hex: odd number of digits ({})", digits.len())
            }
            other => format!("hex: {other}"),
        })
    })
}
