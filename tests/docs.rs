//! The docs cannot go stale: every output block in README.md and docs/ says what made it, and is
//! checked against that.
//!
//! A fenced block is an *output* unless its info string names an input kind (a shell command,
//! a config file, a listing: [`INPUT_KINDS`]). The line before an output block is its tag:
//!
//! - `<!-- output: CMD -->`: CMD run by `sh -c` in the repository, with this build's `zkfle`
//!   first on PATH; the block must be its stdout byte for byte (after a first line
//!   `$ CMD`, when the block shows the command). Such blocks come from bundled fixtures.
//!   `scripts/docs.sh` rewrites them (this test with `ZKFLE_DOCS_WRITE=1`).
//! - `<!-- recorded: docs/recorded/NAME.txt -->`: output that needs live servers (`join`,
//!   `probe`, `doctor`, Docker). The file is a real run's output, with `#` lines saying what
//!   ran where and when; the block must have its shape: each line, with its numbers masked,
//!   is a line of the recording in the same order (a line `...` leaves lines out).
//!
//! An untagged output block fails, as does a tag whose command or recording is missing.
//! Blocks of kind `usage` (a command's synopsis) name only options `zkfle CMD --help` lists.

use std::path::{Path, PathBuf};
use std::process::Command;

const ZKFLE: &str = env!("CARGO_BIN_EXE_zkfle");

/// Info strings of blocks that are not program output: what a reader types or writes.
const INPUT_KINDS: &[&str] = &[
    "sh",         // commands to run
    "properties", // zoo.cfg and other Java properties
    "jaas",       // a JAAS login file
    "yaml",       // compose files
    "html",       // a page to embed
    "regex",      // a parser's pattern (ShiViz)
    "layout",     // a message layout, written by hand from the codec
    "usage",      // a command's synopsis, checked against its --help
    "diagram",    // a drawing of the architecture
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut dirs = vec![repo().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[derive(Debug)]
enum Tag {
    Output(String),
    Recorded(String),
}

/// One fenced block: its info string, its tag, and where its body's lines are.
#[derive(Debug)]
struct Block {
    info: String,
    tag: Option<Tag>,
    /// The fence's line (0-based).
    fence: usize,
    /// The body: lines `fence + 1 .. close`.
    close: usize,
    /// The fence's indentation, stripped from the body.
    indent: usize,
}

fn parse_tag(line: &str) -> Option<Tag> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(cmd) = inner.strip_prefix("output:") {
        Some(Tag::Output(cmd.trim().to_string()))
    } else {
        inner
            .strip_prefix("recorded:")
            .map(|file| Tag::Recorded(file.trim().to_string()))
    }
}

fn blocks(lines: &[&str]) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let close = (i + 1..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .ok_or_else(|| format!("line {}: a fence that never closes", i + 1))?;
            let tag = i.checked_sub(1).and_then(|p| parse_tag(lines[p]));
            out.push(Block {
                info: info.trim().to_string(),
                tag,
                fence: i,
                close,
                indent,
            });
            i = close;
        }
        i += 1;
    }
    Ok(out)
}

fn body(lines: &[&str], b: &Block) -> String {
    let mut s = String::new();
    for line in &lines[b.fence + 1..b.close] {
        s.push_str(line.get(b.indent..).unwrap_or(line.trim_start()));
        s.push('\n');
    }
    s
}

fn run(cmd: &str) -> String {
    let bin = Path::new(ZKFLE).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(repo())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What `$ CMD` plus the output of CMD looks like in a block that shows its command.
fn expected_output(cmd: &str, shown: &str) -> String {
    let output = run(cmd);
    let prompt = format!("$ {cmd}\n");
    if shown.starts_with("$ ") {
        prompt + &output
    } else {
        output
    }
}

/// A line's shape: numbers (decimal, hex, with fractions) become `#`, runs of blanks one.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            // 0x1f, 12.5, 1,234 and 2026-12-06 each become one `#`.
            while let Some(&n) = chars.peek() {
                let next_is_digit = |cs: &std::iter::Peekable<std::str::Chars>| {
                    cs.clone().nth(1).is_some_and(|d| d.is_ascii_hexdigit())
                };
                if n.is_ascii_hexdigit()
                    || n == 'x'
                    || ((n == '.' || n == ',' || n == ':' || n == '-') && next_is_digit(&chars))
                {
                    chars.next();
                } else {
                    break;
                }
            }
            out.push('#');
        } else if c.is_whitespace() {
            while chars.peek().is_some_and(|n| n.is_whitespace()) {
                chars.next();
            }
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the block's lines, shaped, are the recording's in order (`...` skips lines). The
/// block may begin anywhere in the recording; every place is tried.
fn has_shape_of(block: &str, recording: &str) -> Result<(), String> {
    let recorded: Vec<String> = recording
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(shape)
        .collect();
    // Runs of block lines that must be consecutive in the recording, separated by `...`.
    let mut runs: Vec<Vec<(String, &str)>> = vec![Vec::new()];
    for line in block.lines() {
        if line.trim() == "..." {
            runs.push(Vec::new());
        } else {
            runs.last_mut().unwrap().push((shape(line), line));
        }
    }
    runs.retain(|r| !r.is_empty());
    // Each run at its earliest place after the previous one: a greedy match of consecutive
    // runs is the leftmost, so it fails only when no placement exists.
    let mut at = 0;
    for run in &runs {
        let found = (at..=recorded.len().saturating_sub(run.len())).find(|&p| {
            run.iter()
                .enumerate()
                .all(|(k, (want, _))| recorded.get(p + k) == Some(want))
        });
        match found {
            Some(p) => at = p + run.len(),
            None => {
                // Name the first line of the run that has no place.
                let line = run
                    .iter()
                    .find(|(want, _)| !recorded[at..].contains(want))
                    .map_or(run[0].1, |(_, l)| *l);
                return Err(format!(
                    "the lines from {:?} are not, in this shape and order, in the recording (first without a place: {line:?})",
                    run[0].1
                ));
            }
        }
    }
    Ok(())
}

/// Each `--option` a synopsis names is one `zkfle CMD --help` lists.
fn check_usage(text: &str) -> Result<(), String> {
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("zkfle ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let sub: Vec<&str> = words
            .iter()
            .take_while(|w| {
                !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            })
            .take(2)
            .copied()
            .collect();
        let mut args = sub.clone();
        args.push("--help");
        let out = Command::new(ZKFLE).args(&args).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!("`zkfle {}` has no help", args.join(" ")));
        }
        for option in options(rest) {
            if !help.contains(&option) {
                return Err(format!(
                    "`zkfle {} --help` does not list {option}",
                    sub.join(" ")
                ));
            }
        }
    }
    Ok(())
}

/// The `--long` options a synopsis line names, continuation lines included by the caller.
fn options(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

/// Tools the tagged commands use besides zkfle (scripts/test.sh installs them).
const TOOLS: &[&str] = &["jq", "editcap"];

#[test]
fn every_output_block_in_the_docs_is_what_its_command_prints() {
    for tool in TOOLS {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "the docs' commands need {tool}: scripts/test.sh installs it (jq; editcap comes with tshark)"
        );
    }
    let write = std::env::var_os("ZKFLE_DOCS_WRITE").is_some();
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let found = match blocks(&lines) {
            Ok(found) => found,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        // Replacements for write mode: (fence, close, new body).
        let mut rewrites: Vec<(usize, usize, String)> = Vec::new();
        for b in &found {
            let at = format!("{name}:{}", b.fence + 1);
            let kind = b.info.split_whitespace().next().unwrap_or("");
            let shown = body(&lines, b);
            if kind == "usage" {
                // A synopsis may wrap: its continuation lines belong to the command above.
                let joined = shown.replace("\n ", " ");
                if let Err(e) = check_usage(&joined) {
                    failures.push(format!("{at}: {e}"));
                }
                checked += 1;
                continue;
            }
            if INPUT_KINDS.contains(&kind) {
                if b.tag.is_some() {
                    failures.push(format!(
                        "{at}: a ```{kind} block is input, not output: untag it or change its kind"
                    ));
                }
                continue;
            }
            checked += 1;
            match &b.tag {
                None => failures.push(format!(
                    "{at}: an output block (```{kind}) without `<!-- output: CMD -->` or `<!-- recorded: FILE -->` on the line before it"
                )),
                Some(Tag::Output(cmd)) => {
                    let want = expected_output(cmd, &shown);
                    if want != shown {
                        if write {
                            rewrites.push((b.fence, b.close, want));
                        } else {
                            failures.push(format!(
                                "{at}: `{cmd}` now prints something else (scripts/docs.sh rewrites it):\n--- the doc\n{shown}--- the command\n{want}"
                            ));
                        }
                    }
                }
                Some(Tag::Recorded(path)) => match std::fs::read_to_string(repo().join(path)) {
                    Err(e) => failures.push(format!("{at}: recording {path}: {e}")),
                    Ok(recording) => {
                        if !recording.lines().any(|l| l.starts_with("# ")) {
                            failures.push(format!("{at}: recording {path} does not say what ran (a `# ` line)"));
                        }
                        if !shown.lines().any(|l| !l.starts_with("$ ") && l.trim() != "...") {
                            failures.push(format!("{at}: a recorded block with no output line"));
                        }
                        if let Err(e) = has_shape_of(&shown, &recording) {
                            failures.push(format!("{at}: not the shape of {path}: {e}"));
                        }
                    }
                },
            }
        }
        if write && !rewrites.is_empty() {
            let mut out: Vec<String> = Vec::new();
            let mut next = 0;
            for (fence, close, new) in rewrites {
                out.extend(lines[next..=fence].iter().map(|l| l.to_string()));
                out.extend(new.lines().map(str::to_string));
                next = close;
            }
            out.extend(lines[next..].iter().map(|l| l.to_string()));
            std::fs::write(&file, out.join("\n") + "\n").unwrap();
            eprintln!("rewrote {name}");
        }
    }
    assert!(checked > 0, "no output block found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn shapes_mask_numbers_and_keep_words() {
    assert_eq!(
        shape("  +10.496s  sid 1 FOLLOWING (leader 3), took 204 ms"),
        " +#s sid # FOLLOWING (leader #), took # ms"
    );
    assert_eq!(shape("zxid=0x10000000c round=0x1"), "zxid=# round=#");
    assert_eq!(shape("2026-11-29 17:29:56,213682 x"), "# # x");
    assert_eq!(shape("127.0.0.1:3888"), "#");
    let recording = "# ran: zkfle probe\nok 1 LEADING\nok 2 FOLLOWING\nok 3 FOLLOWING\n";
    assert!(has_shape_of("ok 7 LEADING\n...\nok 9 FOLLOWING\n", recording).is_ok());
    assert!(has_shape_of("ok 7 LEADING\nok 9 LOOKING\n", recording).is_err());
    assert!(has_shape_of("ok 7 FOLLOWING\nok 7 LEADING\n", recording).is_err());
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and
/// `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_leads_somewhere() {
    let mut failures = Vec::new();
    for file in doc_files() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_fence = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            }
            if in_fence {
                continue;
            }
            // Inline code is not a link, whatever brackets it holds.
            let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            for part in prose.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, fragment) = match target.split_once('#') {
                    Some((p, f)) => (p, Some(f)),
                    None => (target, None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !dest.exists() {
                    failures.push(format!("{name}:{}: {target}: no such file", n + 1));
                    continue;
                }
                if let Some(fragment) = fragment
                    && dest.extension().is_some_and(|e| e == "md")
                    && !anchors(&std::fs::read_to_string(&dest).unwrap())
                        .iter()
                        .any(|a| a == fragment)
                {
                    failures.push(format!("{name}:{}: {target}: no such heading", n + 1));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
