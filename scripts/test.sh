#!/usr/bin/env bash
# The test command. On a fresh machine it installs what the tests need: a Java ZooKeeper
# 3.8.0 (Debian's `zookeeper`, through scripts/zk-env.sh) and the jars of 3.4.14, 3.6.3 and
# 3.9.5 (scripts/zk-fetch.sh: PyPI's pyspark source packages, cached under
# ${ZKFLE_CACHE:-~/.cache/zkfle} so later runs download nothing), and Debian's chromium and
# tshark (scripts/viewers-env.sh, for tests/visual.rs and tests/wireshark.rs). Then it runs the format
# check, the lints, every test, every fuzz target for 200,000 inputs from a fixed seed (scripts/fuzz.sh, which installs
# cargo-fuzz when missing), the version matrix (scripts/matrix.sh: tests/versions.rs,
# against real Java servers of every version and mixed ensembles, one test at a time), and the
# Docker conformance scenarios (scripts/docker/conformance.sh; it builds its images, installing
# debootstrap and tcpdump with apt-get where missing, and is skipped loudly without Docker).
#
# A version this machine cannot get is skipped loudly: the tests of that version print
# SKIPPED and this script lists it at the end. ZKFLE_SKIP_VERSIONS="3.9.5 ..." skips on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
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

stage "ZooKeeper release lines (scripts/zk-fetch.sh)"
SKIPPED=${ZKFLE_SKIP_VERSIONS:-}
fetch_start=$SECONDS
pids=()
for v in 3.4.14 3.6.3 3.9.5; do
  [[ " $SKIPPED " == *" $v "* ]] && continue
  # The three downloads (200-460 MB each) run side by side.
  scripts/zk-fetch.sh "$v" >"${TMPDIR:-/tmp}/zkfle-fetch-$v.out" 2>&1 &
  pids+=("$v:$!")
done
for p in "${pids[@]}"; do
  v=${p%%:*}
  if wait "${p#*:}"; then
    echo "ZooKeeper $v: $(tail -n1 "${TMPDIR:-/tmp}/zkfle-fetch-$v.out")"
  else
    echo "!! SKIPPED: ZooKeeper $v cannot be had on this machine:" >&2
    sed 's/^/!!   /' "${TMPDIR:-/tmp}/zkfle-fetch-$v.out" >&2
    SKIPPED="$SKIPPED $v"
  fi
done
echo "fetch: $((SECONDS - fetch_start)) s"
export ZKFLE_SKIP_VERSIONS=$SKIPPED

stage "Chromium and tshark for the page and dissector tests (scripts/viewers-env.sh)"
scripts/viewers-env.sh

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy"
cargo clippy --all-targets -- -D warnings

stage "cargo test (the per-version tests of tests/versions.rs and tests/repro_java.rs run next, in the matrix)"
cargo test --all-targets -- --skip v3_ --skip mixed_

stage "fuzz targets, 200,000 inputs each from a fixed seed, two at a time (scripts/fuzz.sh; fuzz/README.md)"
scripts/fuzz.sh --runs 200000

if [[ " $SKIPPED " != *" 3.9.5 "* ]]; then
  stage "zkfle as a Zab follower, elected leader and reconfigured member of ZooKeeper 3.9.5, plaintext, over quorum TLS and with quorum SASL, and the election restart on a newer config (tests/zab_java.rs, tests/zab_datadir.rs, tests/lead_java.rs, tests/tls_java.rs, tests/sasl_java.rs, tests/reconfig_java.rs, tests/reconfig_restart.rs with ZK_JARS)"
  ZK_JARS=$(scripts/zk-fetch.sh 3.9.5 | tail -n1) cargo test --test zab_java --test zab_datadir --test lead_java --test tls_java --test sasl_java --test reconfig_java --test reconfig_restart

fi
if [[ " $SKIPPED " != *" 3.6.3 "* ]]; then
  stage "zkfle added by reconfig to ZooKeeper 3.6.3, and the election restart on a newer config (tests/reconfig_java.rs, tests/reconfig_restart.rs with ZK_JARS, ~80 s)"
  ZK_JARS=$(scripts/zk-fetch.sh 3.6.3 | tail -n1) cargo test --test reconfig_java --test reconfig_restart
fi

stage "version matrix (scripts/matrix.sh --no-fetch: tests/versions.rs one by one, replay, decode, quorum TLS and SASL, and the repros of tests/repro_java.rs per version)"
scripts/matrix.sh --no-fetch

# Docker: images built once (cached by their inputs), every fault scenario on 3.9.5, the others'
# start with capture and probe checks, the rolling upgrade 3.4.14 -> 3.9.5 with zkfle voting.
# Without a Docker engine it prints !! SKIPPED and passes; the local-process tests above ran.
stage "ZooKeeper in Docker (scripts/docker/conformance.sh --ci)"
docker_versions=""
for v in 3.4.14 3.6.3 3.8.0 3.9.5; do
  [[ " $SKIPPED " == *" $v "* ]] || docker_versions="$docker_versions $v"
done
ZKFLE_PROFILE=debug scripts/docker/conformance.sh --ci --versions "${docker_versions# }"

if [[ " $SKIPPED " != *" 3.9.5 "* ]]; then
  stage "chaos campaigns in Docker, fixed seeds: random schedules with zkfle inside, and the disk-loss plan caught (scripts/docker/chaos.sh)"
  ZKFLE_PROFILE=debug scripts/docker/chaos.sh --version 3.9.5
fi

if [ -n "${SKIPPED// /}" ]; then
  echo "!! SKIPPED ZooKeeper versions (their tests passed without running):$SKIPPED" >&2
fi
stage_done
echo "== stages:"
for i in "${!stage_names[@]}"; do
  printf '   %5s s  %s\n' "${stage_secs[$i]}" "${stage_names[$i]%% (*}"
done
echo "== done in $(mmss $SECONDS)"
