#!/usr/bin/env bash
# matrix.sh: run zkfle against every ZooKeeper release line and print a version x capability
# table (pass, FAIL, or skipped with the reason).
#
# Usage:
#   scripts/matrix.sh [--no-fetch] [--versions "3.4.14 3.6.3 3.8.0 3.9.5"] [--out FILE] [--jobs N]
#   scripts/matrix.sh -h
#
#   --no-fetch   use only what is cached (scripts/zk-fetch.sh --cached); a version that is
#                not is reported as skipped
#   --out FILE   also write the table (markdown) to FILE
#   --jobs N     run N cells at a time, each in a network namespace of its own
#                (scripts/own-loopback.sh; needs root); default 1, one after the other
#
# Rows: each version, then the mixed-version ensembles (rolling upgrades):
#   3.4.14+3.8.0  Java 3.4.14 (sid 2), Java 3.8.0 (sid 3), zkfle (sid 1)
#   3.6.3+3.9.5   Java 3.6.3 (sid 2), Java 3.9.5 (sid 3), zkfle (sid 1)
# Columns:
#   fetch        the jars are on this machine (scripts/zk-fetch.sh; 3.8.0: Debian)
#   decode       the version's fixtures (fixtures/*/README.md names the version) decode with
#                every field equal to the servers' own logs (tests/decode_fixtures.rs)
#   join late    zkfle joins an elected 3-node ensemble and follows its leader
#   join start   zkfle (highest sid) starts first; the Java servers follow it
#   3.5+ form    the version reads zkfle's V1 initial message + 44+N-byte notifications
#   3.4 form     the version reads zkfle's legacy initial message + 40-byte notifications
#   replay       every participant of the version's fixtures replays into the native target
#                with its recorded decisions (zkfle replay --as SID; --config for 3.4)
#   probe        zkfle probe reports each server's state and leader (tests/versions.rs)
#   TLS          zkfle follows an sslQuorum=true ensemble of the version and is counted, and a
#                foreign certificate is refused (tests/tls_java.rs, ZK_JARS; TLS came in 3.5.5)
#   SASL         zkfle follows a quorum SASL (DIGEST-MD5) ensemble of the version and is
#                counted, a wrong password is refused, the capture decodes (tests/sasl_java.rs)
# A second table: each `zkfle repro` against each version (tests/repro_java.rs, two
# ensembles per version): vulnerable / not_vulnerable / inconclusive, or FAIL when the verdict
# differs from the matrix in src/repro/matrix.rs (docs/repro.md); one more row,
# ZOOKEEPER-3109(maxTimeToWaitForEpoch=0), for servers with that fix switched on.
# Mixed rows: `join` = every member decides the same leader and the Java follower syncs.
# Each cell runs one test of tests/versions.rs; its output is kept in $MATRIX_LOGS
# (default: a temp dir, printed at the end). Exit status 1 if any cell failed.

set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

VERSIONS="3.4.14 3.6.3 3.8.0 3.9.5"
FETCH=1
OUT=""
JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --no-fetch) FETCH=0; shift ;;
    --versions) VERSIONS=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --jobs) JOBS=${2:?}; shift 2 ;;
    *) echo "matrix.sh: unknown option '$1' (see -h)" >&2; exit 2 ;;
  esac
done
LOGS=${MATRIX_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/zkfle-matrix.XXXXXX")}
mkdir -p "$LOGS"

declare -A CELL
FAILED=0
SKIP_VERSIONS=""

# ---------------------------------------------------------------- fetch
for v in $VERSIONS; do
  if [ $FETCH = 1 ]; then
    out=$("$HERE/zk-fetch.sh" "$v" 2>"$LOGS/fetch-$v.log"); rc=$?
  else
    out=$("$HERE/zk-fetch.sh" --cached "$v" 2>"$LOGS/fetch-$v.log"); rc=$?
  fi
  if [ $rc = 0 ]; then
    CELL[$v,fetch]="pass"
  else
    why=$(grep -v '^\s*$' "$LOGS/fetch-$v.log" | tail -n1)
    [ $FETCH = 0 ] && why="not cached (--no-fetch)"
    CELL[$v,fetch]="skipped: ${why:-zk-fetch.sh exit $rc}"
    SKIP_VERSIONS+="$v "
    echo "SKIPPED: ZooKeeper $v: ${why:-zk-fetch.sh exit $rc}" >&2
  fi
done
export ZKFLE_SKIP_VERSIONS=$SKIP_VERSIONS

echo "== building the tests" >&2
if ! cargo test --no-run --test versions --test decode_fixtures --test repro_java --test tls_java --test sasl_java >"$LOGS/build.log" 2>&1; then
  tail -n 30 "$LOGS/build.log" >&2
  echo "matrix.sh: the tests do not build" >&2
  exit 1
fi

# run_cell KEY LOGNAME cargo-args...: one cell, one test (`cargo test ARGS -- --exact`). With
# --jobs 1 it runs at once; with more, in the background, in a network namespace of its own
# (scripts/own-loopback.sh: its own 127.0.0.x, its own loopback lock), at most JOBS at a time.
# Its verdict is read from its log and exit status by settle_cells, after every cell ran.
QUEUED=()
run_cell() {
  local key=$1 name=$2
  shift 2
  QUEUED+=("$key|$name")
  echo "== $key" >&2
  if [ "$JOBS" = 1 ]; then
    cell_job "$name" "$@"
  else
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    cell_job "$name" "$@" &
  fi
}
cell_job() {
  local name=$1 rc=0 within=()
  shift
  [ "$JOBS" = 1 ] || within=("$HERE/own-loopback.sh")
  ${within[@]+"${within[@]}"} cargo test "$@" -- --exact --nocapture >"$LOGS/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$LOGS/$name.rc"
}
# pass / FAIL / skipped: reason (from SKIPPED: lines), for every queued cell.
settle_cells() {
  local q key name log
  wait
  for q in "${QUEUED[@]}"; do
    key=${q%%|*} name=${q#*|} log="$LOGS/$name.log"
    if [ "$(cat "$LOGS/$name.rc" 2>/dev/null)" = 0 ]; then
      if grep -q '^SKIPPED: ' "$log"; then
        CELL[$key]="skipped: $(grep -m1 '^SKIPPED: ' "$log" | sed 's/^SKIPPED: //')"
      elif grep -qE 'test result: ok\. [1-9]' "$log"; then
        CELL[$key]="pass"
      else
        CELL[$key]="FAIL: no test ran (see $log)"
        FAILED=1
      fi
    else
      CELL[$key]="FAIL (see $log)"
      FAILED=1
    fi
  done
}

ZKFLE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/zkfle"
cargo build -q --bin zkfle >>"$LOGS/build.log" 2>&1 || { echo "matrix.sh: zkfle does not build" >&2; exit 1; }
has_subcommand() {
  "$ZKFLE_BIN" --help 2>/dev/null | grep -qE "^\s+$1\b"
}

mod_of() { echo "v${1//./_}"; }

# replay: every participant of every fixture of VERSION, replayed into the native target with
# `zkfle replay --as SID` (3.4 captures with --config, they carry none), makes the decisions
# its Java server made.
replay_cell() {
  local v=$1 d sid n=0 bad="" cfgopt
  if ! has_subcommand replay; then
    CELL[$v,replay]="skipped: zkfle replay not yet on main"
    return
  fi
  for d in fixtures/*/; do
    grep -q "ZooKeeper \*\*$v\*\*" "$d/README.md" 2>/dev/null || continue
    # A partition's lagging receivers are not replayed (docs/replay-probe.md, Limits).
    [[ "$d" == *partition* ]] && continue
    cfgopt=()
    [[ "+$v+" =~ \+3\.4\. ]] && cfgopt=(--config "$d/zoo.cfg")
    for sid in $(sed -n 's/^server\.\([0-9]*\)=.*:participant.*/\1/p' "$d/zoo.cfg"); do
      n=$((n + 1))
      if ! "$ZKFLE_BIN" replay "$d"*.pcap* --as "$sid" --format json "${cfgopt[@]}" \
        >"$LOGS/replay-$v-$(basename "$d")-$sid.json" 2>&1 ||
        ! grep -q '"match":true' "$LOGS/replay-$v-$(basename "$d")-$sid.json"; then
        bad+=" $(basename "$d")/sid$sid"
      fi
    done
  done
  if [ $n = 0 ]; then
    CELL[$v,replay]="skipped: no fixture recorded with $v"
  elif [ -z "$bad" ]; then
    CELL[$v,replay]="pass"
  else
    CELL[$v,replay]="FAIL:$bad (see $LOGS/replay-*)"
    FAILED=1
  fi
}

# TLS and SASL: each version's servers with quorum TLS and with quorum SASL, zkfle following.
security_cells() {
  local v=$1 jars=""
  if [[ "${CELL[$v,fetch]}" == skipped* ]]; then
    CELL[$v,tls]="skipped: ZooKeeper $v not on this machine"
    CELL[$v,sasl]="skipped: ZooKeeper $v not on this machine"
    return
  fi
  # 3.8.0 is Debian's package: no ZK_JARS.
  [ "$v" = 3.8.0 ] || jars=$("$HERE/zk-fetch.sh" --cached "$v" 2>/dev/null | tail -n1)
  if [[ "$v" == 3.4.* ]]; then
    CELL[$v,tls]="skipped: quorum TLS came in 3.5.5"
  else
    ZK_JARS=$jars run_cell "$v,tls" "tls-$v" --test tls_java \
      zkfle_follows_a_tls_ensemble_and_a_foreign_certificate_is_refused
  fi
  ZK_JARS=$jars run_cell "$v,sasl" "sasl-$v" --test sasl_java \
    zkfle_follows_a_sasl_ensemble_and_a_wrong_password_is_refused
}

for v in $VERSIONS; do
  m=$(mod_of "$v")
  # decode: only if a fixture of that version exists
  if grep -lq "ZooKeeper \*\*$v\*\*" fixtures/*/README.md 2>/dev/null; then
    ZKFLE_FIXTURE_VERSION=$v run_cell "$v,decode" "decode-$v" --test decode_fixtures
  else
    CELL[$v,decode]="skipped: no fixture recorded with $v"
  fi
  if [[ "${CELL[$v,fetch]}" == skipped* ]]; then
    for c in join_late join_from_start accepts_current_form accepts_legacy_form; do
      CELL[$v,$c]="skipped: ZooKeeper $v not on this machine"
    done
  else
    for c in join_late join_from_start accepts_current_form accepts_legacy_form; do
      run_cell "$v,$c" "$c-$v" --test versions "$m::$c"
    done
  fi
  replay_cell "$v"
  if ! has_subcommand probe; then
    CELL[$v,probe]="skipped: zkfle probe not yet on main"
  elif [[ "${CELL[$v,fetch]}" == skipped* ]]; then
    CELL[$v,probe]="skipped: ZooKeeper $v not on this machine"
  else
    run_cell "$v,probe" "probe-$v" --test versions "$m::probe"
  fi
  security_cells "$v"
done

# repros: one test per version; its VERDICT lines fill the second table.
declare -A VERDICT
REPRO_NAMES=""
if has_subcommand repro; then
  REPRO_NAMES=$("$ZKFLE_BIN" repro --list | grep -v '^ ' | awk '{print $1}' | tr '\n' ' ')
  # tests/repro_java.rs also runs ZOOKEEPER-3109 against servers with the fix switched on.
  [[ " $REPRO_NAMES " == *" ZOOKEEPER-3109 "* ]] && REPRO_NAMES+="ZOOKEEPER-3109(maxTimeToWaitForEpoch=0) "
fi
for v in $VERSIONS; do
  m=$(mod_of "$v")
  if [ -z "$REPRO_NAMES" ]; then
    CELL[$v,repros]="skipped: zkfle repro not yet on main"
  elif [[ "${CELL[$v,fetch]}" == skipped* ]]; then
    CELL[$v,repros]="skipped: ZooKeeper $v not on this machine"
  else
    run_cell "$v,repros" "repros-$v" --test repro_java "$m::repros"
  fi
done

MIXED=""
for pair in "3.4.14+3.8.0" "3.6.3+3.9.5"; do
  a=${pair%+*}; b=${pair#*+}
  [[ " $VERSIONS " == *" $a "* ]] && [[ " $VERSIONS " == *" $b "* ]] || continue
  MIXED+="$pair "
  CELL[$pair,fetch]="${CELL[$a,fetch]%%:*}/${CELL[$b,fetch]%%:*}"
  [ "${CELL[$pair,fetch]}" = pass/pass ] && CELL[$pair,fetch]=pass
  if grep -lq "ZooKeeper \*\*$pair\*\*" fixtures/*/README.md 2>/dev/null; then
    ZKFLE_FIXTURE_VERSION=$pair run_cell "$pair,decode" "decode-$pair" --test decode_fixtures
  else
    CELL[$pair,decode]="skipped: no fixture recorded with $pair"
  fi
  run_cell "$pair,join_late" "mixed-$pair" --test versions "mixed_${a//./_}_and_${b//./_}"
  for c in join_from_start accepts_current_form accepts_legacy_form; do
    CELL[$pair,$c]="-"
  done
  replay_cell "$pair"
  CELL[$pair,probe]="-"
  CELL[$pair,tls]="-"
  CELL[$pair,sasl]="-"
done

settle_cells
for v in $VERSIONS; do
  for r in $REPRO_NAMES; do
    got=$(sed -n "s/.*VERDICT $r \([a-z_]*\)\$/\1/p" "$LOGS/repros-$v.log" 2>/dev/null | head -n1)
    case "${CELL[$v,repros]}" in
      pass) VERDICT[$r,$v]=${got:-?} ;;
      skipped*) VERDICT[$r,$v]="skipped" ;;
      *) VERDICT[$r,$v]="${got:-?} (FAIL, see $LOGS/repros-$v.log)" ;;
    esac
  done
done
for pair in $MIXED; do
  [ "${CELL[$pair,join_late]}" = pass ] && CELL[$pair,join_late]="pass (all 3 decide one leader; Java follower synced)"
done

# ---------------------------------------------------------------- table
COLS="fetch decode join_late join_from_start accepts_current_form accepts_legacy_form replay probe tls sasl"
title() {
  case "$1" in
    join_late) echo "join late" ;;
    join_from_start) echo "join start" ;;
    accepts_current_form) echo "3.5+ form" ;;
    accepts_legacy_form) echo "3.4 form" ;;
    tls) echo "TLS" ;;
    sasl) echo "SASL" ;;
    *) echo "$1" ;;
  esac
}
{
  printf '| version |'
  for c in $COLS; do printf ' %s |' "$(title "$c")"; done
  printf '\n|---|'
  for c in $COLS; do printf -- '---|'; done
  printf '\n'
  for row in $VERSIONS $MIXED; do
    printf '| %s |' "$row"
    for c in $COLS; do printf ' %s |' "${CELL[$row,$c]:--}"; done
    printf '\n'
  done
  if [ -n "$REPRO_NAMES" ]; then
    printf '\n| repro |'
    for v in $VERSIONS; do printf ' %s |' "$v"; done
    printf '\n|---|'
    for v in $VERSIONS; do printf -- '---|'; done
    printf '\n'
    for r in $REPRO_NAMES; do
      printf '| %s |' "$r"
      for v in $VERSIONS; do printf ' %s |' "${VERDICT[$r,$v]:--}"; done
      printf '\n'
    done
  fi
} | tee "${OUT:-/dev/null}"
echo
echo "logs: $LOGS"
exit $FAILED
