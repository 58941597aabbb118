//! `zkfle decode`: a capture's election traffic as a timeline, JSON lines, or a summary.
//!
//! Input: one capture file or stream (`-`), several files read as one capture (one per host;
//! clocks aligned, one copy of each segment, see [`crate::capture::merge`]), or a live
//! interface. Files and pipes may be gzip- or zstd-compressed.

use std::collections::HashMap;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, ValueEnum};

use super::CliError;
use super::decode_time::{When, elapsed_text, format_wall, parse_when};
use crate::capture::merge::{ClockOffset, Loss, MergedSegments};
use crate::capture::{self, CaptureStats, SegmentSource, Timestamp};
use crate::decode::{AddressBook, Body, DecodeOptions, Decoder, Record, Severity, SidSource};
use crate::output::json::JsonWriter;
use crate::output::merge::{clocks_json, clocks_text, losses_json, losses_text};
use crate::output::printable;
use crate::output::problem_words;
use crate::output::text::TextWriter;
use crate::story::Summarizer;
use crate::wire::ElectionAddress;

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// pcap or pcapng files (also gzip- or zstd-compressed), or `-` for standard input.
    /// Several files (one per host) are read as one capture.
    #[arg(value_name = "CAPTURE", required_unless_present = "interface")]
    pub captures: Vec<String>,
    /// Capture live on this interface (libpcap; needs root or CAP_NET_RAW).
    #[arg(short = 'i', long, value_name = "IFACE", conflicts_with = "captures")]
    pub interface: Option<String>,
    /// BPF filter for --interface (default: TCP on the election ports and 2888).
    #[arg(long, value_name = "BPF", requires = "interface")]
    pub filter: Option<String>,
    /// Election port to decode (repeatable); replaces the default 3888. Connections on other
    /// ports are decoded too when they open with a valid initial message.
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Quorum (Zab) port to decode (repeatable); replaces the default 2888. Connections on
    /// other ports are decoded too when they open with a valid FOLLOWERINFO/OBSERVERINFO.
    #[arg(long = "quorum-port", value_name = "PORT")]
    pub quorum_ports: Vec<u16>,
    /// With --summary: every vote change too, not only decisions and syncs.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// With --format jsonl: also a `closed` object for each connection closed by FIN or RST
    /// (the text timeline and the summary always have them).
    #[arg(long)]
    pub closes: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Print a summary of each election instead of every message.
    #[arg(long)]
    pub summary: bool,
    /// A zoo.cfg naming the members' election addresses (for captures that carry none, 3.4).
    #[arg(long, value_name = "ZOO_CFG")]
    pub config: Option<PathBuf>,
    /// Who listens where: `ADDR=SID`, e.g. `127.0.0.1:3888=1` (repeatable).
    #[arg(long = "sid-map", value_name = "ADDR=SID")]
    pub sid_map: Vec<String>,
    /// Host names in /etc/hosts form (`IP NAME...`), for configs that name the members by
    /// host name (Docker, Kubernetes): a capture begun on a running ensemble then names every
    /// end (`docker network inspect` or `kubectl get pods -o wide` gives the IPs).
    #[arg(long, value_name = "HOSTS_FILE")]
    pub hosts: Option<PathBuf>,
    /// Seconds added to one file's times, replacing the estimate (repeatable).
    #[arg(
        long = "clock-offset",
        value_name = "FILE=SECONDS",
        allow_hyphen_values = true
    )]
    pub clock_offsets: Vec<String>,
    /// Times in the text timeline (default: absolute): wall clock, since the first record, or
    /// since the previous. The summary's times are relative unless `--time absolute` is given.
    #[arg(long, value_enum)]
    pub time: Option<TimeMode>,
    /// Wall-clock times in the local time zone (as the servers' logs print them) instead of UTC.
    #[arg(long)]
    pub local: bool,
    /// Keep only messages from or to this sid (repeatable).
    #[arg(long = "sid", value_name = "SID", allow_hyphen_values = true)]
    pub sids: Vec<i64>,
    /// Keep records from this time on: seconds since the epoch, `YYYY-MM-DD HH:MM:SS[.fff]`
    /// (UTC, or local with --local), or `+SECONDS` after the first record.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Keep records up to this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Keep only records of these types (repeatable); problems are always kept.
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub types: Vec<RecordType>,
    /// With `--format mermaid`: the election to draw, by its round (election epoch, as the
    /// summary names it: decimal or 0x hex); the first election when not given.
    #[arg(long, value_name = "N", value_parser = parse_round, conflicts_with = "election")]
    pub round: Option<i64>,
    /// With `--format mermaid`: the election to draw, by its number in the summary (1, 2, ...),
    /// for when several elections ended in the same round.
    #[arg(long, value_name = "K")]
    pub election: Option<usize>,
}

fn parse_round(s: &str) -> Result<i64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        // As Java logs it (`Long.toHexString`): a negative round's 64 bits, unsigned.
        Some(hex) => u64::from_str_radix(hex, 16).map(|r| r as i64),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a round number (decimal or 0x hex)"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Jsonl,
    /// One self-contained page drawing the elections (open it in a browser).
    Html,
    /// A Mermaid sequenceDiagram of one election (`--round`).
    Mermaid,
    /// A ShiViz log with vector clocks, its parser regex on the first line.
    Shiviz,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeMode {
    /// Wall-clock time, `2026-11-29 17:29:56,291123`, as ZooKeeper's logs print it.
    Absolute,
    /// Seconds since the first record.
    Relative,
    /// Seconds since the previous record printed.
    Delta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecordType {
    /// Initial messages (election port).
    Initial,
    /// Notifications (election port).
    Notification,
    /// Quorum-port (Zab) packets.
    Quorum,
}

/// The record's `type` as the JSON contract names it.
fn record_type(r: &Record) -> &'static str {
    match &r.body {
        Body::Initial(_) => "initial",
        Body::Notification(_) => "notification",
        Body::Problem(_) => "error",
        Body::Quorum(_) => "quorum",
        Body::Closed { .. } => "closed",
    }
}

/// How much output is handed to stdout at once: small enough that the kernel copies it out of
/// the L2 cache where it was just written (a 1 MiB chunk is not; 256 KiB took about 2% less
/// CPU), large enough that the writes are few.
const OUTPUT_CHUNK: usize = 256 << 10;

/// The pipe buffer asked for (see [`widen_stdout_pipe`]).
const PIPE_BYTES: usize = 1 << 20;

/// When stdout is a pipe, asks Linux for a pipe buffer of 1 MiB instead of 64 KiB. JSON lines
/// are more bytes than the capture they come from, and through a 64 KiB pipe the writer and
/// its reader (jq, wc) wake each other every 64 KiB: about a quarter of the CPU time of
/// `zkfle decode --format jsonl | ...` (docs/benchmarks.md). Best effort: a refused size
/// (above `/proc/sys/fs/pipe-max-size`) leaves the pipe as it is.
#[cfg(target_os = "linux")]
fn widen_stdout_pipe() {
    use std::os::fd::AsRawFd;
    let fd = std::io::stdout().as_raw_fd();
    // SAFETY: fstat fills a zeroed stat of the right type; fcntl takes an int argument.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO {
            libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES as libc::c_int);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn widen_stdout_pipe() {}

/// Set by SIGINT (Ctrl-C) during a live or streamed decode: finish and print the summary.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_sigint() -> Arc<AtomicBool> {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    // The live source polls a flag of its own; a watcher thread copies the global one in.
    let flag = Arc::new(AtomicBool::new(false));
    let copy = Arc::clone(&flag);
    std::thread::spawn(move || {
        while !STOP.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        copy.store(true, Ordering::Relaxed);
    });
    flag
}

pub fn run(args: DecodeArgs) -> Result<(), CliError> {
    let mut book = AddressBook::default();
    if let Some(path) = &args.hosts {
        book.resolve_names(&super::hosts_file(path)?);
    }
    // What --config tells the summary: the members, and a hierarchical quorum rule.
    let mut known: Option<crate::wire::QuorumConfig> = None;
    if let Some(path) = &args.config {
        let cfg = super::members_config(path)?;
        book.learn_config(&cfg.quorum, SidSource::Config);
        known = Some(cfg.quorum);
    }
    let members = || match &known {
        Some(cfg) => Summarizer::with_config(cfg),
        None => Summarizer::new(HashMap::new()),
    };
    for entry in &args.sid_map {
        let (addr, sid) = entry
            .rsplit_once('=')
            .ok_or_else(|| CliError::input(format!("--sid-map {entry:?}: expected ADDR=SID")))?;
        let sid: i64 = sid
            .parse()
            .map_err(|_| CliError::input(format!("--sid-map {entry:?}: bad sid {sid:?}")))?;
        let addr = ElectionAddress::parse(addr, 0)
            .map_err(|e| CliError::input(format!("--sid-map {entry:?}: {}", e.kind)))?;
        book.learn(sid, &addr, SidSource::SidMap);
    }
    if (args.round.is_some() || args.election.is_some()) && args.format != Format::Mermaid {
        return Err(CliError::input(
            "--round and --election apply to --format mermaid only",
        ));
    }
    let filter = RecordFilter {
        sids: args.sids.clone(),
        types: args.types.clone(),
        since: parse_bound("--since", args.since.as_deref(), args.local)?,
        until: parse_bound("--until", args.until.as_deref(), args.local)?,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && let (When::Absolute(a), When::Absolute(b)) | (When::Relative(a), When::Relative(b)) =
            (since, until)
        && a > b
    {
        return Err(CliError::input(format!(
            "--since {:?} is after --until {:?}: no record can be in between",
            args.since.as_deref().unwrap_or_default(),
            args.until.as_deref().unwrap_or_default()
        )));
    }
    let mut options = DecodeOptions {
        ports: args.ports.clone(),
        book,
        // No output prints a message's bytes.
        keep_raw: false,
        ..DecodeOptions::default()
    };
    if !args.quorum_ports.is_empty() {
        options.quorum_ports = args.quorum_ports.clone();
    }
    // The summary needs closed connections (and so do the drawings, built on it); the JSON lines
    // carry them only when asked.
    options.closes = args.summary || args.closes || args.format != Format::Jsonl;
    let name = args
        .interface
        .clone()
        .unwrap_or_else(|| args.captures.join(" "));

    if let Some(iface) = &args.interface {
        let stop = install_sigint();
        let mut ports = if args.ports.is_empty() {
            vec![crate::decode::DEFAULT_ELECTION_PORT]
        } else {
            args.ports.clone()
        };
        if args.quorum_ports.is_empty() {
            ports.push(crate::decode::DEFAULT_QUORUM_PORT);
        } else {
            ports.extend(&args.quorum_ports);
        }
        ports.sort_unstable();
        ports.dedup();
        let bpf = args
            .filter
            .clone()
            .unwrap_or_else(|| capture::live::port_filter(&ports));
        let live = capture::live::LiveSegments::open(iface, &bpf, stop)
            .map_err(|e| CliError::failure(e.to_string()))?;
        eprintln!("zkfle: capturing on {iface} ({bpf}); Ctrl-C ends it");
        // A summary holds records whose sids are not known yet (as a file's decode does), so
        // that a capture begun on a running ensemble names its leader from the config the
        // first election carries; records shown one by one go out as they decode.
        options.streaming = !args.summary;
        let mut out = Output::new(&args, filter, members(), true);
        let mut decoder = Decoder::with_source(live, options);
        out.consume(&mut decoder)?;
        let stats = *decoder.segments().stats();
        if let Some((received, dropped)) = decoder.segments_mut().drops()
            && dropped > 0
        {
            eprintln!(
                "zkfle: warning: {iface}: libpcap dropped {dropped} of {} packets (the decoder fell behind); gaps in the output come from these",
                u64::from(received) + u64::from(dropped)
            );
        }
        return out.finish(&name, &[], &[], &[(iface.clone(), stats)]);
    }

    let overrides = parse_clock_offsets(&args.clock_offsets, &args.captures)?;
    if args.captures.len() == 1 && overrides.iter().all(Option::is_none) {
        let path = &args.captures[0];
        // A pipe (`tcpdump -U -w - | zkfle decode -`) is streamed: records come out as they
        // decode. A file redirected to stdin is read like a file.
        let streaming = path == "-" && !stdin_is_regular_file();
        if streaming {
            install_sigint();
        }
        options.streaming = streaming && !args.summary;
        let segments = open_with_progress(path)?;
        let mut out = Output::new(&args, filter, members(), streaming);
        let mut decoder = Decoder::from_capture(segments, options);
        out.consume(&mut decoder)?;
        let stats = *decoder.segments().stats();
        return out.finish(&name, &[], &[], &[(path.clone(), stats)]);
    }

    if args.captures.iter().any(|c| c == "-") {
        return Err(CliError::input(
            "`-` (standard input) can only be read alone, not merged with other captures",
        ));
    }
    let (merged, offsets) = capture::merge::open_files(&args.captures, &overrides)
        .map_err(|e| CliError::failure(e.to_string()))?;
    let clocks: Vec<(String, ClockOffset)> = args.captures.iter().cloned().zip(offsets).collect();
    let mut out = Output::new(&args, filter, members(), false);
    out.clocks = clocks.clone();
    out.print_clocks()?;
    let mut decoder: Decoder<MergedSegments> = Decoder::with_source(merged, options);
    out.consume(&mut decoder)?;
    let merged = decoder.segments();
    let losses = merged.losses();
    // A capture cut into several files counts as one, under its first file's name.
    let stats: Vec<(String, CaptureStats)> = merged
        .file_stats()
        .into_iter()
        .map(|(file, s)| (args.captures[file].clone(), s))
        .collect();
    out.finish(&name, &clocks, &losses, &stats)
}

fn stdin_is_regular_file() -> bool {
    // SAFETY: fstat on fd 0 writes only into `st`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(0, &mut st) } == 0;
    ok && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
}

fn parse_bound(flag: &str, v: Option<&str>, local: bool) -> Result<Option<When>, CliError> {
    v.map(|s| parse_when(s, local).map_err(|e| CliError::input(format!("{flag} {e}"))))
        .transpose()
}

/// `--clock-offset FILE=SECONDS` per file (nanoseconds), FILE as given on the command line
/// or its file name.
fn parse_clock_offsets(entries: &[String], files: &[String]) -> Result<Vec<Option<i64>>, CliError> {
    let mut out = vec![None; files.len()];
    for entry in entries {
        let (file, secs) = entry.rsplit_once('=').ok_or_else(|| {
            CliError::input(format!("--clock-offset {entry:?}: expected FILE=SECONDS"))
        })?;
        let secs: f64 = secs
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && s.abs() < 1e9)
            .ok_or_else(|| {
                CliError::input(format!(
                    "--clock-offset {entry:?}: bad seconds {secs:?} (a number of seconds, below 10^9 either way)"
                ))
            })?;
        let base = |p: &str| {
            std::path::Path::new(p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        };
        let i = files
            .iter()
            .position(|f| f == file)
            .or_else(|| files.iter().position(|f| base(f).as_deref() == Some(file)))
            .ok_or_else(|| {
                CliError::input(format!(
                    "--clock-offset {entry:?}: {file:?} is not one of the captures given"
                ))
            })?;
        if out[i].is_some() {
            return Err(CliError::input(format!(
                "--clock-offset {entry:?}: {:?} has an offset already",
                files[i]
            )));
        }
        out[i] = Some((secs * 1e9).round() as i64);
    }
    Ok(out)
}

/// Which records to keep.
struct RecordFilter {
    sids: Vec<i64>,
    types: Vec<RecordType>,
    since: Option<When>,
    until: Option<When>,
}

impl RecordFilter {
    /// Whether any filter was asked for.
    fn is_active(&self) -> bool {
        !self.sids.is_empty()
            || !self.types.is_empty()
            || self.since.is_some()
            || self.until.is_some()
    }

    fn keeps(&self, r: &Record, t0: f64) -> bool {
        let t = r.time.as_secs_f64();
        if self.since.is_some_and(|w| t < w.resolve(t0)) {
            return false;
        }
        if self.until.is_some_and(|w| t > w.resolve(t0)) {
            return false;
        }
        let kind = record_type(r);
        if !self.types.is_empty()
            && kind != "error"
            && kind != "closed"
            && !self.types.iter().any(|t| {
                kind == match t {
                    RecordType::Initial => "initial",
                    RecordType::Notification => "notification",
                    RecordType::Quorum => "quorum",
                }
            })
        {
            return false;
        }
        if !self.sids.is_empty() {
            let named = [r.from_sid, r.to_sid];
            // Problems without sids (file damage) stay; messages must name a kept sid.
            let unnamed_problem = kind == "error" && named.iter().all(Option::is_none);
            if !unnamed_problem && !named.iter().flatten().any(|s| self.sids.contains(s)) {
                return false;
            }
        }
        true
    }
}

struct Output {
    format: Format,
    summary: bool,
    time: TimeMode,
    /// The summary's times as wall-clock times (`--time absolute` given), not relative.
    summary_wall_clock: bool,
    local: bool,
    streaming: bool,
    filter: RecordFilter,
    summarizer: Summarizer,
    /// The first record's time.
    first: Option<Timestamp>,
    /// The time of the previous record printed.
    previous: Option<Timestamp>,
    lines: JsonWriter,
    texts: TextWriter,
    /// The line's time, as text.
    stamp: String,
    /// The last second printed as a wall-clock time, and its text up to the seconds.
    wall_second: Option<(i64, String)>,
    line: Vec<u8>,
    out: BufWriter<std::io::Stdout>,
    errors: u64,
    first_error: Option<String>,
    clocks: Vec<(String, ClockOffset)>,
    /// A drawing format (html, mermaid, shiviz): records are kept and drawn at the end.
    drawing: bool,
    collected: crate::output::Collected,
    round: Option<i64>,
    election: Option<usize>,
    /// The captures' names (or the interface), for messages and the page's title.
    name: String,
    /// Records that are not problems.
    decoded: u64,
    /// Records the filters kept (problems included).
    kept: u64,
    /// The first problem of any severity, for the message when nothing decoded.
    first_problem: Option<String>,
    verbose: bool,
    /// Election ports asked for, for the message when nothing was found.
    ports: Vec<u16>,
}

impl Output {
    fn new(
        args: &DecodeArgs,
        filter: RecordFilter,
        summarizer: Summarizer,
        streaming: bool,
    ) -> Output {
        if !streaming {
            widen_stdout_pipe();
        }
        Output {
            format: args.format,
            summary: args.summary,
            time: args.time.unwrap_or(TimeMode::Absolute),
            summary_wall_clock: args.time == Some(TimeMode::Absolute),
            local: args.local,
            streaming,
            filter,
            summarizer,
            first: None,
            previous: None,
            lines: JsonWriter::new(),
            texts: TextWriter::default(),
            stamp: String::new(),
            wall_second: None,
            line: Vec::with_capacity(OUTPUT_CHUNK + (1 << 16)),
            out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
            errors: 0,
            first_error: None,
            clocks: Vec::new(),
            drawing: matches!(args.format, Format::Html | Format::Mermaid | Format::Shiviz),
            collected: crate::output::Collected::default(),
            round: args.round,
            election: args.election,
            name: args
                .interface
                .clone()
                .unwrap_or_else(|| args.captures.join(" ")),
            decoded: 0,
            kept: 0,
            first_problem: None,
            verbose: args.verbose,
            ports: args.ports.clone(),
        }
    }

    fn print_clocks(&mut self) -> Result<(), CliError> {
        if self.summary && self.format == Format::Jsonl {
            return Ok(()); // in the summary object
        }
        let text = clocks_text(&self.clocks);
        match self.format {
            Format::Text => self
                .out
                .write_all(text.as_bytes())
                .map_err(CliError::writing),
            _ => {
                eprint!("{text}");
                Ok(())
            }
        }
    }

    fn consume<S: SegmentSource>(&mut self, decoder: &mut Decoder<S>) -> Result<(), CliError> {
        while let Some(record) = decoder.next_record() {
            self.record(record)?;
            if self.streaming && STOP.load(Ordering::Relaxed) {
                // Read no more, but hand out what the decoder still holds (records waiting
                // for sids, what reassembly buffers).
                decoder.end_input();
                while let Some(record) = decoder.next_record() {
                    self.record(record)?;
                }
                break;
            }
        }
        Ok(())
    }

    fn record(&mut self, record: &Record) -> Result<(), CliError> {
        let first = *self.first.get_or_insert(record.time);
        let start = first.as_secs_f64();
        match &record.body {
            Body::Problem(p) => {
                if self.first_problem.is_none() {
                    self.first_problem =
                        Some(printable(&problem_words(p, record.time)).into_owned());
                }
            }
            _ => self.decoded += 1,
        }
        if let Body::Problem(p) = &record.body
            && p.severity() == Severity::Error
        {
            self.errors += 1;
            self.first_error
                .get_or_insert_with(|| printable(&problem_words(p, record.time)).into_owned());
        }
        if !self.filter.keeps(record, start) {
            return Ok(());
        }
        self.kept += 1;
        if self.drawing {
            self.summarizer.add(record);
            return self
                .collected
                .add(record.clone())
                .map_err(|e| CliError::failure(format!("{}: {e}", self.name)));
        }
        if self.summary {
            self.summarizer.add(record);
            if self.streaming {
                let decided: Vec<_> = self.summarizer.take_new_decisions().cloned().collect();
                for d in &decided {
                    match self.format {
                        Format::Jsonl => writeln!(self.out, "{}", d.live_json()),
                        _ => {
                            let stamp = self.stamp(Timestamp::from_secs_f64(d.time), first);
                            writeln!(self.out, "{}", d.live_text(&stamp))
                        }
                    }
                    .map_err(CliError::writing)?;
                }
                self.out.flush().map_err(CliError::writing)?;
            }
            return Ok(());
        }
        // Lines are written straight into one buffer, handed to the output whole.
        match self.format {
            Format::Jsonl => self.lines.record(&mut self.line, record),
            Format::Text => {
                let mut stamp = std::mem::take(&mut self.stamp);
                self.stamp_into(&mut stamp, record.time, first);
                self.texts.record(&mut self.line, record, &stamp);
                self.stamp = stamp;
            }
            // Kept for drawing, above.
            Format::Html | Format::Mermaid | Format::Shiviz => return Ok(()),
        }
        self.line.push(b'\n');
        if self.line.len() >= OUTPUT_CHUNK || self.streaming {
            self.out.write_all(&self.line).map_err(CliError::writing)?;
            self.line.clear();
        }
        self.previous = Some(record.time);
        if self.streaming {
            self.out.flush().map_err(CliError::writing)?;
        }
        Ok(())
    }

    fn stamp(&mut self, time: Timestamp, start: Timestamp) -> String {
        let mut stamp = String::new();
        self.stamp_into(&mut stamp, time, start);
        stamp
    }

    /// The time of a line, as `--time` asks, in `stamp` (emptied first). From the capture's
    /// own seconds and nanoseconds: a float of seconds since the epoch holds no exact
    /// microseconds.
    fn stamp_into(&mut self, stamp: &mut String, time: Timestamp, start: Timestamp) {
        stamp.clear();
        match self.time {
            TimeMode::Absolute => {
                // As `format_wall`, with the text up to the seconds kept from the last line:
                // lines come many to a second.
                let secs = time.secs;
                if self.wall_second.as_ref().is_none_or(|(s, _)| *s != secs) {
                    let text = format_wall(secs, 0, self.local);
                    let seconds = text.rsplit_once(',').map_or(&text[..], |(s, _)| s);
                    self.wall_second = Some((secs, seconds.to_string()));
                }
                let seconds = self.wall_second.as_ref().map_or("", |(_, t)| t);
                stamp.push_str(seconds);
                stamp.push(',');
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(time.nanos / 1000);
                stamp.extend(std::iter::repeat_n(
                    '0',
                    6usize.saturating_sub(digits.len()),
                ));
                stamp.push_str(digits);
            }
            TimeMode::Relative => elapsed_text(stamp, start, time),
            TimeMode::Delta => elapsed_text(stamp, self.previous.unwrap_or(start), time),
        }
    }

    fn finish(
        mut self,
        name: &str,
        clocks: &[(String, ClockOffset)],
        losses: &[Loss],
        stats: &[(String, CaptureStats)],
    ) -> Result<(), CliError> {
        self.out.write_all(&self.line).map_err(CliError::writing)?;
        self.line.clear();
        let loss_text = losses_text(losses, clocks);
        if self.drawing {
            let model = std::mem::take(&mut self.summarizer).finish();
            let summary = model.to_json();
            let records = &self.collected.records;
            match self.format {
                Format::Html => {
                    crate::output::html::write_page(&mut self.out, &self.name, records, &model)
                }
                Format::Mermaid => {
                    use crate::output::mermaid::Choice;
                    let choice = match (self.round, self.election) {
                        (Some(r), _) => Choice::Round(r),
                        (None, Some(k)) => Choice::Number(k),
                        (None, None) => Choice::First,
                    };
                    let text = crate::output::mermaid::diagram(records, &summary, choice)
                        .map_err(|e| CliError::input(format!("{}: {e}", self.name)))?;
                    self.out.write_all(text.as_bytes())
                }
                _ => self
                    .out
                    .write_all(crate::output::shiviz::log(records, &summary).as_bytes()),
            }
            .map_err(CliError::writing)?;
            if !loss_text.is_empty() {
                eprint!("{loss_text}");
            }
        } else if self.summary {
            let summary = std::mem::take(&mut self.summarizer).finish();
            match self.format {
                Format::Jsonl => {
                    let mut v = summary.to_json();
                    if !clocks.is_empty() {
                        v["clocks"] = clocks_json(clocks);
                        v["capture_losses"] = losses_json(losses, clocks);
                    }
                    writeln!(self.out, "{v}")
                }
                _ => {
                    let t0 = self.first.map_or(0.0, Timestamp::as_secs_f64);
                    let zone = if self.local { "local time" } else { "UTC" };
                    // The anchor of the relative times goes last: the summary's first lines
                    // are what an operator reads first.
                    let tail = match self.first {
                        None => "no election traffic in the capture\n".to_string(),
                        Some(_) if self.summary_wall_clock => format!("(times in {zone})\n"),
                        Some(first) => format!(
                            "(times relative to {} {zone})\n",
                            format_wall(first.secs, first.nanos, self.local),
                        ),
                    };
                    let text = if self.summary_wall_clock {
                        let local = self.local;
                        summary.text_stamped(
                            &|t: f64| {
                                let micros = (t * 1e6).round() as i64;
                                format_wall(
                                    micros.div_euclid(1_000_000),
                                    (micros.rem_euclid(1_000_000) * 1000) as u32,
                                    local,
                                )
                            },
                            self.verbose,
                        )
                    } else {
                        summary.text(t0, self.verbose)
                    };
                    write!(self.out, "{text}{loss_text}{tail}")
                }
            }
            .map_err(CliError::writing)?;
        } else if !loss_text.is_empty() {
            match self.format {
                Format::Text => self
                    .out
                    .write_all(loss_text.as_bytes())
                    .map_err(CliError::writing)?,
                _ => eprint!("{loss_text}"),
            }
        }
        self.out.flush().map_err(CliError::writing)?;
        for (file, s) in stats {
            if let Some(t) = s.first_unsupported_link_type {
                let what = format!(
                    "{file}: {} packet(s) of unsupported link type {t}{}; zkfle reads Ethernet (with VLAN tags), Linux cooked v1/v2, BSD loopback/null and raw IPv4/IPv6",
                    s.unsupported_link_type,
                    linktype_name(t).map_or_else(String::new, |n| format!(" ({n})")),
                );
                if self.decoded == 0 {
                    return Err(CliError::failure(what));
                }
                eprintln!("zkfle: warning: {what}");
            }
        }
        for (file, s) in stats {
            // Packets skipped unread: if election traffic was among them, this is why it is
            // missing from the story.
            for (count, what) in [
                (
                    s.malformed,
                    "with IP or TCP headers that could not be read (damaged, or not what their link type says)",
                ),
                (
                    s.unknown_interface,
                    "naming a pcapng interface that no interface description block describes",
                ),
                (
                    s.fragments,
                    "that are IP fragments (zkfle does not reassemble IP fragments)",
                ),
            ] {
                if count > 0 {
                    eprintln!("zkfle: warning: {file}: {count} packet(s) {what}; skipped");
                }
            }
            if s.truncated_tcp > 0 {
                eprintln!(
                    "zkfle: warning: {file}: {} packets were cut at {} bytes by the capture's snap length, so their messages are incomplete; capture whole packets with `tcpdump -s 0`",
                    s.truncated_tcp, s.cut_at
                );
            }
        }
        // Nothing to decode is a failure on the data (exit 1), as an empty capture is: the
        // capture was taken on the wrong port or interface, and a script must not read an
        // empty story as a healthy one.
        if self.decoded == 0
            && let Some(first) = &self.first_problem
        {
            // Election traffic was seen, but none of it decoded: say why, not that it is absent.
            return Err(CliError::failure(format!(
                "{name}: no election message could be decoded; first problem: {first}"
            )));
        }
        if self.decoded == 0 {
            return Err(CliError::failure(format!(
                "{name}: no election traffic found (no connection on the election ports {} or the quorum ports, and none opening with an initial message or FOLLOWERINFO)",
                if self.ports.is_empty() {
                    crate::decode::DEFAULT_ELECTION_PORT.to_string()
                } else {
                    self.ports
                        .iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        if self.kept == 0 && self.filter.is_active() {
            eprintln!(
                "zkfle: warning: {name}: none of the {} decoded records matched --sid, --type, --since or --until",
                self.decoded
            );
        }
        if self.errors > 0 {
            return Err(CliError::failure(format!(
                "{name}: {} error(s) in the capture; first: {}",
                self.errors,
                self.first_error.unwrap_or_default()
            )));
        }
        Ok(())
    }
}

/// The tcpdump name of some link types zkfle does not read, for the error that names them.
fn linktype_name(t: u16) -> Option<&'static str> {
    Some(match t {
        6 => "IEEE802_5",
        9 => "PPP",
        10 => "FDDI",
        50 => "PPP_HDLC",
        51 => "PPP_ETHER",
        105 => "IEEE802_11",
        119 => "IEEE802_11_PRISM",
        127 => "IEEE802_11_RADIOTAP",
        147..=162 => "USER",
        192 => "PPI",
        195 => "IEEE802_15_4",
        220 => "USB_LINUX_MMAPPED",
        _ => return None,
    })
}

fn open_with_progress(path: &str) -> Result<capture::TcpSegments, CliError> {
    let open_err = |e: capture::CaptureError| CliError::failure(format!("{path}: {e}"));
    if path == "-" {
        return capture::open(path).map_err(open_err);
    }
    let file = std::fs::File::open(path).map_err(|e| CliError::failure(format!("{path}: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    // A progress bar only for people watching a large file.
    if std::io::stderr().is_terminal() && len > 64 << 20 {
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        return capture::TcpSegments::from_reader(bar.wrap_read(file)).map_err(open_err);
    }
    capture::TcpSegments::from_file(file).map_err(open_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_parse_as_the_summary_and_java_print_them() {
        assert_eq!(parse_round("0x8000000000000000"), Ok(i64::MIN));
        assert_eq!(parse_round("0xffffffffffffffff"), Ok(-1));
        assert_eq!(parse_round("0x1a"), Ok(26));
        assert_eq!(parse_round("-9223372036854775808"), Ok(i64::MIN));
        assert!(parse_round("0x10000000000000000").is_err());
    }

    #[test]
    fn a_file_given_two_clock_offsets_is_refused() {
        let files = ["a/h1.pcap".to_string(), "h2.pcap".to_string()];
        let entries = ["h1.pcap=0.5".to_string(), "a/h1.pcap=2".to_string()];
        assert!(parse_clock_offsets(&entries, &files).is_err());
        let entries = ["h1.pcap=0.5".to_string(), "h2.pcap=-2".to_string()];
        assert_eq!(
            parse_clock_offsets(&entries, &files).unwrap(),
            [Some(500_000_000), Some(-2_000_000_000)]
        );
    }
}
