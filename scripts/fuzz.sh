#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS each (default 60), two at a time, at
# `nice -n 19`; fails if any target finds a crash (its input is left in fuzz/artifacts/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# cargo-fuzz needs nightly flags (-Zsanitizer); with the one stable toolchain here,
# RUSTC_BOOTSTRAP=1 allows them. cargo-fuzz itself is installed from crates.io when missing
# (once, into ~/.cargo/bin); the targets' build is kept in fuzz/target and their corpora in
# fuzz/corpus, so later runs rebuild only what changed and start from what earlier runs found.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-60}
shift || true
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
  cargo install cargo-fuzz --locked
fi

targets=("$@")
build_start=$SECONDS
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
  nice -n 19 cargo fuzz build
else
  for t in "${targets[@]}"; do nice -n 19 cargo fuzz build "$t"; done
fi
echo "fuzz build: $((SECONDS - build_start)) s"

out=${TMPDIR:-/tmp}/zkfle-fuzz-$$
mkdir -p "$out"
failed=()
run() {
  local t=$1
  if nice -n 19 cargo fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
    >"$out/$t.log" 2>&1; then
    echo "fuzz $t: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$out/$t.log" | tail -n1), clean"
  else
    echo "!! fuzz $t FOUND A PROBLEM:" >&2
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$out/$t.log" | head -n 20 | sed 's/^/!!   /' >&2
    return 1
  fi
}
i=0
while [ $i -lt ${#targets[@]} ]; do
  pids=()
  for t in "${targets[@]:i:2}"; do
    run "$t" &
    pids+=("$t:$!")
  done
  for p in "${pids[@]}"; do
    wait "${p#*:}" || failed+=("${p%%:*}")
  done
  i=$((i + 2))
done
rm -rf "$out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "!! fuzz targets with findings: ${failed[*]}" >&2
  exit 1
fi
