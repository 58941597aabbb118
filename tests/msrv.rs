//! The oldest Rust zkfle builds with (`rust-version` in Cargo.toml) is what its dependencies
//! need and what the docs say. Clippy's `incompatible_msrv` (in the test command's
//! `cargo clippy -D warnings`) checks zkfle's own calls into the standard library against it.

use std::collections::{HashMap, HashSet};
use std::process::Command;

use serde_json::Value;

fn version(text: &str) -> Vec<u64> {
    text.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

fn ours() -> String {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    toml.lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml has a rust-version")
        .trim_matches('"')
        .to_string()
}

#[test]
fn rust_version_covers_every_dependency_built_with_zkfle() {
    // This platform's dependencies only: others' (Windows' anstyle-wincon) are never
    // downloaded here, and --offline could not read them.
    let host = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rust_version: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["rust_version"].as_str()?)))
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    // What a build of zkfle compiles: normal and build dependencies, transitively (not the
    // dev-dependencies of the tests and benchmarks).
    let root = meta["resolve"]["root"].as_str().unwrap();
    let mut seen = HashSet::from([root]);
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let built = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            let dep_id = dep["pkg"].as_str().unwrap();
            if built && seen.insert(dep_id) {
                todo.push(dep_id);
            }
        }
    }
    let ours = ours();
    let needed = seen
        .iter()
        .filter(|id| **id != root)
        .filter_map(|id| Some((*id, *rust_version.get(id)?)))
        .max_by_key(|(_, v)| version(v))
        .unwrap();
    assert_eq!(
        version(&ours),
        version(needed.1),
        "Cargo.toml says rust-version {ours}; the newest a dependency needs is {} ({})",
        needed.1,
        needed.0
    );
}

#[test]
fn the_docs_name_the_same_rust() {
    let ours = ours();
    for doc in ["README.md", "docs/guide.md"] {
        let text =
            std::fs::read_to_string(format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(
            text.contains(&format!("Rust {ours} or newer"))
                || text.contains(&format!("Rust ({ours} or newer)")),
            "{doc} does not say `Rust {ours} or newer`"
        );
    }
}
