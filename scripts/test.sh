#!/usr/bin/env bash
# The test command. On a fresh machine it installs what the tests need: a Java ZooKeeper
# 3.8.0 (Debian's `zookeeper`, through scripts/zk-env.sh) and the jars of 3.4.14, 3.6.3 and
# 3.9.5 (scripts/zk-fetch.sh: PyPI's pyspark source packages, cached under
# ${ZKFLE_CACHE:-~/.cache/zkfle} so later runs download nothing), and Debian's chromium and
# tshark (scripts/viewers-env.sh, for tests/visual.rs and tests/wireshark.rs). Then it runs the
# format check, the lints, every test, every fuzz target for 200,000 inputs from a fixed seed
# (scripts/fuzz.sh, which installs cargo-fuzz when missing), the ZK_JARS runs against 3.9.5
# and 3.6.3, the version matrix (scripts/matrix.sh: tests/versions.rs and tests/repro_java.rs
# against real Java servers of every version and mixed ensembles), the Docker conformance
# scenarios (scripts/docker/conformance.sh; it builds its images, installing debootstrap where
# missing, and is skipped loudly without Docker) and the chaos campaigns.
#
# What waits on Java and Docker runs side by side (below, "side by side"): each test target,
# ZK_JARS run and matrix cell in a network namespace of its own. docs/testing.md has the times.
#
# A version this machine cannot get is skipped loudly: the tests of that version print
# SKIPPED and this script lists it at the end. ZKFLE_SKIP_VERSIONS="3.9.5 ..." skips on purpose.
# ZKFLE_TEST_SLOTS (default 3) is how many test units of the pool run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build lives in the cache beside the jars and images (the fuzz targets' in its fuzz/), so
# that a clean clone on a machine that ran the tests before builds only what changed.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${ZKFLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkfle}/target}
# Each stage's heading says how far into the run it starts, the line after the last stage how
# long the one before it took, and the end lists every stage's share, so a slow stage shows in
# CI's log.
mmss() { echo "$(($1 / 60)) min $(($1 % 60)) s"; }
stage_names=()
stage_secs=()
stage_started=$SECONDS
stage_done() {
  [ ${#stage_names[@]} -gt 0 ] || return 0
  local took=$((SECONDS - stage_started))
  stage_secs+=("$took")
  echo "== took $(mmss "$took")"
}
stage() {
  stage_done
  stage_names+=("$1")
  stage_started=$SECONDS
  echo "== $1 [at $(mmss $SECONDS)]"
}

stage "system packages"
# tcpdump (and with it libpcap, which zkfle loads for live capture: decode --interface) and
# iproute2 (ip netns): the live-capture and multi-host tests. Building zkfle needs neither.
missing=()
command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# openssl: tests/tls_java.rs makes its certificates (keytool comes with zk-env.sh's Java).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# jq: tests/docs.rs runs the docs' commands, some of which pipe into it.
command -v jq >/dev/null 2>&1 || missing+=(jq)
if [ ${#missing[@]} -gt 0 ]; then
  # shellcheck source=scripts/zk-env.sh
  (. scripts/zk-env.sh && zk_apt_install "${missing[@]}")
fi
# Jetty, the servlet API and Jackson for Java's AdminServer beside zkfle's (ensemble.sh
# --admin), which neither Debian's zookeeper nor the fetched jars carry: installed here, not
# in the middle of a test.
# shellcheck source=scripts/zk-env.sh
(. scripts/zk-env.sh && zk_admin_classpath >/dev/null)
# promtool (Debian's prometheus package; no daemon is started): zkfle's metrics endpoint is
# checked with it.
if ! command -v promtool >/dev/null 2>&1; then
  # Without its recommends (node exporter and the like): promtool is all the tests use.
  # shellcheck source=scripts/zk-env.sh
  (. scripts/zk-env.sh && zk_apt update -qq && zk_apt install -y -qq --no-install-recommends prometheus >/dev/null)
fi
echo "tcpdump (libpcap), iproute2, openssl, jq, promtool, Jetty: present"

stage "Java ZooKeeper"
scripts/zk-env.sh --print

stage "ZooKeeper release lines (scripts/zk-fetch.sh), fetched in the background until the tests' build is done"
SKIPPED=${ZKFLE_SKIP_VERSIONS:-}
fetch_start=$SECONDS
fetch_pids=()
for v in 3.4.14 3.6.3 3.9.5; do
  [[ " $SKIPPED " == *" $v "* ]] && continue
  # The three downloads (200-460 MB each, the first time) run side by side.
  scripts/zk-fetch.sh "$v" >"${TMPDIR:-/tmp}/zkfle-fetch-$v.out" 2>&1 &
  fetch_pids+=("$v:$!")
done
# The fetches' outcome; a version that cannot be had is skipped loudly.
fetch_wait() {
  local p v
  for p in ${fetch_pids[@]+"${fetch_pids[@]}"}; do
    v=${p%%:*}
    if wait "${p#*:}"; then
      echo "ZooKeeper $v: $(tail -n1 "${TMPDIR:-/tmp}/zkfle-fetch-$v.out")"
    else
      echo "!! SKIPPED: ZooKeeper $v cannot be had on this machine:" >&2
      sed 's/^/!!   /' "${TMPDIR:-/tmp}/zkfle-fetch-$v.out" >&2
      SKIPPED="$SKIPPED $v"
    fi
  done
  echo "fetch: done $((SECONDS - fetch_start)) s after it started"
  export ZKFLE_SKIP_VERSIONS=$SKIPPED
}

stage "Chromium and tshark for the page and dissector tests (scripts/viewers-env.sh)"
scripts/viewers-env.sh

# ---------------------------------------------------------------- side by side
# Most of what follows waits: on election timeouts, Java's start, Docker. It runs side by side:
#   - the fuzz targets, in the background from the start, at nice 19 (scripts/fuzz.sh: their
#     optimised build is the one long stretch of CPU in the run);
#   - once the tests are built, the Docker conformance runs (two at a time, each on its own
#     bridge) and the chaos campaigns, in the background;
#   - and every test target, the ZK_JARS runs and the version matrix in a pool of POOL_SLOTS,
#     each in a network namespace of its own (scripts/own-loopback.sh: its own 127.0.0.x, its
#     own loopback lock), the longest first.
# Each ends with its output printed whole, under a heading with its time.
LANES=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-test.XXXXXX")
lane_names=()
lane_pids=()
lane_failed=()
# A run that stops early (a failed stage, Ctrl-C) takes the lanes still running with it.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'for p in ${lane_pids[@]+"${lane_pids[@]}"}; do kill_tree "$p"; done' EXIT
# lane NAME COMMAND...: COMMAND in the background, its output in $LANES/NAME.log, its exit
# status and start and end (seconds into the run) in $LANES/NAME.done.
lane() {
  local name=$1
  shift
  (
    start=$SECONDS rc=0
    "$@" >"$LANES/$name.log" 2>&1 </dev/null || rc=$?
    echo "$rc $start $SECONDS" >"$LANES/$name.done"
  ) &
  lane_names+=("$name")
  lane_pids+=("$!")
}
# The output of a lane that ended, under a heading that says how it went.
lane_report() {
  local name=$1 rc start end
  read -r rc start end <"$LANES/$name.done"
  echo "== $name: $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)"), $(mmss $((end - start))) (from $(mmss "$start") to $(mmss "$end"))"
  sed 's/^/   /' "$LANES/$name.log"
  [ "$rc" = 0 ] || lane_failed+=("$name")
}
# Waits for the lanes NAME... in the order they end, reporting each.
lanes_wait() {
  local pending=("$@") name rest
  while [ ${#pending[@]} -gt 0 ]; do
    rest=()
    for name in "${pending[@]}"; do
      if [ -e "$LANES/$name.done" ]; then lane_report "$name"; else rest+=("$name"); fi
    done
    pending=(${rest[@]+"${rest[@]}"})
    [ ${#pending[@]} -eq 0 ] || sleep 2
  done
}

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "the fuzz targets' build and runs start, in the background (scripts/fuzz.sh)"
lane fuzz scripts/fuzz.sh --runs 200000

stage "cargo clippy"
cargo clippy --all-targets -- -D warnings

stage "the tests' build (cargo test --all-targets --no-run)"
cargo test --all-targets --no-run

stage "the ZooKeeper release lines' fetch"
fetch_wait

docker_lane() {
  # Images built once (cached by their inputs); every fault scenario on 3.9.5, the others'
  # start and repro, hostname-join on 3.8.0, and the rolling upgrade 3.4.14 -> 3.9.5 with zkfle
  # voting, as two runs side by side (each its own project, bridge and /24). Without a Docker
  # engine conformance.sh prints !! SKIPPED and passes; the local-process tests ran.
  local others="" v rc=0 pid=""
  for v in 3.4.14 3.6.3 3.8.0; do
    [[ " $SKIPPED " == *" $v "* ]] || others="$others $v"
  done
  ZKFLE_PROFILE=debug scripts/docker/build-images.sh || return 1
  if [[ " $SKIPPED " != *" 3.9.5 "* ]]; then
    ZKFLE_PROFILE=debug ZKFLE_CONFORMANCE_DIR="$LANES/conformance-3.9.5" \
      scripts/docker/conformance.sh --ci --no-build --no-upgrade --versions 3.9.5 \
      >"$LANES/conformance-3.9.5.out" 2>&1 &
    pid=$!
  fi
  if [ -n "$others" ]; then
    ZKFLE_PROFILE=debug ZKFLE_CONFORMANCE_DIR="$LANES/conformance-others" \
      ZKFLE_CONFORMANCE_PROJECT=zkfle-conformance2 ZKFLE_DOCKER_SUBNET=172.28.1 ZKFLE_DOCKER_BRIDGE=br-zkfle2 \
      scripts/docker/conformance.sh --ci --no-build --versions "${others# }" || rc=1
  fi
  # The chaos campaigns pick a bridge of their own (172.29-31): beside 3.9.5's conformance run.
  if [[ " $SKIPPED " != *" 3.9.5 "* ]]; then
    echo "-- chaos campaigns in Docker, fixed seeds: random schedules with zkfle inside, and the disk-loss plan caught (scripts/docker/chaos.sh)"
    ZKFLE_PROFILE=debug scripts/docker/chaos.sh --version 3.9.5 || rc=1
  fi
  [ -z "$pid" ] || wait "$pid" || rc=1
  echo "-- conformance on 3.9.5 (every scenario):"
  cat "$LANES/conformance-3.9.5.out" 2>/dev/null || echo "(not run: 3.9.5 skipped)"
  return $rc
}

stage "side by side: Docker conformance and chaos, every test, the ZK_JARS runs and the version matrix (and the fuzz targets, since their start)"
lane docker docker_lane

# The pool's units, longest first: NAME|ENV|CARGO ARGS. The per-version tests of
# tests/versions.rs and tests/repro_java.rs run in the matrix (--skip v3_ --skip mixed_ here).
units=("matrix|-|-")
jars395=""
jars363=""
[[ " $SKIPPED " == *" 3.9.5 "* ]] || jars395=$(scripts/zk-fetch.sh --cached 3.9.5 | tail -n1)
[[ " $SKIPPED " == *" 3.6.3 "* ]] || jars363=$(scripts/zk-fetch.sh --cached 3.6.3 | tail -n1)
# zkfle as a Zab follower, elected leader and reconfigured member of 3.9.5 (plaintext, quorum
# TLS and SASL, the election restart on a newer config); reconfig against 3.6.3.
for t in tls_java reconfig_java lead_java sasl_java zab_java zab_datadir reconfig_restart; do
  [ -z "$jars395" ] || units+=("$t-3.9.5|ZK_JARS=$jars395|--test $t")
done
for t in reconfig_java reconfig_restart; do
  [ -z "$jars363" ] || units+=("$t-3.6.3|ZK_JARS=$jars363|--test $t")
done
for t in tls_java zab_java_faults reconfig_java lead_java sasl_java zab_java join_java_more \
  join_hostile chaos visual client_port_java doctor_java probe_java join_java live_capture \
  zab_datadir wireshark; do
  units+=("$t|-|--test $t -- --skip v3_ --skip mixed_")
done
for f in tests/*.rs; do
  t=$(basename "$f" .rs)
  [[ " ${units[*]} " == *"|--test $t -- "* ]] || units+=("$t|-|--test $t -- --skip v3_ --skip mixed_")
done
for t in lib bins examples benches; do
  units+=("$t|-|--$t -- --skip v3_ --skip mixed_")
done

# unit_run NAME: one unit of the pool, in a network namespace of its own.
unit_run() {
  local u=$1 name env args
  name=${u%%|*} u=${u#*|} env=${u%%|*} args=${u#*|}
  if [ "$name" = matrix ]; then
    # Its cells two at a time, each in a namespace of its own.
    scripts/matrix.sh --no-fetch --jobs 2
  elif [ "$env" = - ]; then
    # shellcheck disable=SC2086 # ARGS are words
    scripts/own-loopback.sh cargo test $args
  else
    # shellcheck disable=SC2086
    env "$env" scripts/own-loopback.sh cargo test $args
  fi
}
POOL_SLOTS=${ZKFLE_TEST_SLOTS:-3}
running=()
for u in "${units[@]}"; do
  while :; do
    still=()
    for n in ${running[@]+"${running[@]}"}; do
      if [ -e "$LANES/$n.done" ]; then lane_report "$n"; else still+=("$n"); fi
    done
    running=(${still[@]+"${still[@]}"})
    [ ${#running[@]} -ge "$POOL_SLOTS" ] || break
    sleep 1
  done
  lane "${u%%|*}" unit_run "$u"
  running+=("${u%%|*}")
done
lanes_wait ${running[@]+"${running[@]}"} fuzz docker

# A pool unit that failed side by side runs once more, alone, with the machine otherwise idle:
# one that passes then is listed loudly as flaky (it depends on the machine's load: a bug in
# the test to fix), one that fails again fails the run. The fuzz targets and Docker are not
# run again.
flaky=()
failed_side_by_side=(${lane_failed[@]+"${lane_failed[@]}"})
lane_failed=()
for name in ${failed_side_by_side[@]+"${failed_side_by_side[@]}"}; do
  u=""
  for v in "${units[@]}"; do [ "${v%%|*}" = "$name" ] && u=$v; done
  if [ -z "$u" ]; then
    lane_failed+=("$name")
    continue
  fi
  echo "== $name failed side by side: once more, alone"
  lane "$name-alone" unit_run "$u"
  lanes_wait "$name-alone"
  if [ ${#lane_failed[@]} -eq 0 ] || [ "${lane_failed[-1]}" != "$name-alone" ]; then
    flaky+=("$name")
  fi
done

if [ -n "${SKIPPED// /}" ]; then
  echo "!! SKIPPED ZooKeeper versions (their tests passed without running):$SKIPPED" >&2
fi
stage_done
echo "== stages:"
for i in "${!stage_names[@]}"; do
  printf '   %5s s  %s\n' "${stage_secs[$i]}" "${stage_names[$i]%% (*}"
done
echo "== side by side, each from its start (seconds into the run) to its end:"
for name in "${lane_names[@]}"; do
  read -r rc start end <"$LANES/$name.done"
  printf '   %5s s  %-22s %5s-%-5s %s\n' $((end - start)) "$name" "$start" "$end" "$([ "$rc" = 0 ] && echo ok || echo FAILED)"
done
rm -rf "$LANES"
echo "== done in $(mmss $SECONDS)"
if [ ${#flaky[@]} -gt 0 ]; then
  echo "!! FLAKY: failed side by side, passed alone (see each one's first output above): ${flaky[*]}" >&2
fi
if [ ${#lane_failed[@]} -gt 0 ]; then
  echo "!! failed: ${lane_failed[*]}" >&2
  exit 1
fi
