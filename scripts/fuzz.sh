#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS each (default 60), two at a time, at
# `nice -n 19`; fails if any target finds a crash (its input is left in fuzz/artifacts/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh --runs N [TARGET...]
#
# `--runs N` is the test command's form: N inputs per target from a fixed seed, so a run is
# the same on every machine and a finding reproduces (`-seed=1 -runs=N`). Open-ended search
# is a long timed run (fuzz/README.md records them), not the test command's job: a timed run
# in CI would fail by the luck of what it tried.
#
# cargo-fuzz needs nightly flags (-Zsanitizer); with the one stable toolchain here,
# RUSTC_BOOTSTRAP=1 allows them. cargo-fuzz itself is installed from crates.io when missing
# (once, into ~/.cargo/bin); the targets' build is kept in fuzz/target and their corpora in
# fuzz/corpus, so later runs rebuild only what changed and start from what earlier runs found.
#
# `--runs N` builds without AddressSanitizer (`--sanitizer none`): the fuzzed decoders are safe
# Rust, whose out-of-bounds accesses panic without it, and under ASan's allocator the targets
# ran 4-50 times slower (txn 273 s for 200,000 inputs, 5 s without) and built twice as long,
# a quarter of CI's time. Timed runs keep the default sanitizer.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
limit=(-max_total_time="${1:-60}")
sanitizer=()
if [ "${1:-}" = --runs ]; then
  limit=(-seed=1 -runs="$2")
  sanitizer=(--sanitizer none)
  shift 2
else
  shift || true
fi
export RUSTC_BOOTSTRAP=1
# The targets' own build directory: under CARGO_TARGET_DIR when that is set (scripts/test.sh
# keeps its build in the cache), else fuzz/target. Never the main build's own: its flags differ,
# and each build would undo the other's.
target_dir=(--target-dir "${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}")
[ -n "${CARGO_TARGET_DIR:-}" ] || target_dir=(--target-dir target)

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
  cargo install cargo-fuzz --locked
fi

targets=("$@")
build_start=$SECONDS
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
  nice -n 19 cargo fuzz build "${target_dir[@]}" "${sanitizer[@]}"
else
  for t in "${targets[@]}"; do nice -n 19 cargo fuzz build "${target_dir[@]}" "${sanitizer[@]}" "$t"; done
fi
echo "fuzz build: $((SECONDS - build_start)) s"

out=${TMPDIR:-/tmp}/zkfle-fuzz-$$
mkdir -p "$out"
failed=()
run() {
  local t=$1
  if nice -n 19 cargo fuzz run "${target_dir[@]}" "${sanitizer[@]}" "$t" -- "${limit[@]}" -rss_limit_mb=2048 \
    >"$out/$t.log" 2>&1; then
    echo "fuzz $t: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$out/$t.log" | tail -n1), clean"
  else
    echo "!! fuzz $t FOUND A PROBLEM:" >&2
    # The panic's message is on the lines after `panicked at`.
    grep -E -A3 'panicked' "$out/$t.log" | head -n 12 | sed 's/^/!!   /' >&2
    grep -E 'ERROR|SUMMARY|Test unit written|Base64' "$out/$t.log" | head -n 8 | sed 's/^/!!   /' >&2
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
