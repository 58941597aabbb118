#!/usr/bin/env bash
# The test command. On a fresh machine it installs what the tests need (a Java ZooKeeper,
# through scripts/zk-env.sh: ZK_JARS, ZK_HOME or Debian's `zookeeper` package), then runs
# the format check, the lints and every test, including those against real Java servers.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Java ZooKeeper"
scripts/zk-env.sh --print

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --all-targets -- -D warnings

echo "== cargo test"
cargo test --all-targets
