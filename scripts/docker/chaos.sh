#!/usr/bin/env bash
# chaos.sh: the short `zkfle chaos campaign` CI runs, with fixed seeds, on the images
# scripts/docker/build-images.sh built (conformance.sh builds them first in scripts/test.sh).
#
# Usage: scripts/docker/chaos.sh [--version 3.9.5]
#
#   1. four voters, three Java servers of VERSION and one `zkfle join`, three random schedules
#      from seed 1 (12 s of workload each): every schedule must run (no error) and be valid;
#   2. the composed disk-loss plan (--destructive) on three Java voters: the campaign must
#      catch it (exit 1), as lost acknowledged writes (missing at the end, or not linearizable);
#   3. a user's compose file: scripts/docker/compose.yml (zkfle's zoo1 and three Java servers
#      of VERSION, its own tickTime 2 s) run with --compose on a bridge of its own, two random
#      schedules from seed 1: each valid, zkfle's replica (copied out of its container) among
#      the final reads, and nothing of the project left afterwards.
#
# ZKFLE_PROFILE=debug uses target/debug/zkfle (as scripts/test.sh builds it); release by
# default. Without a Docker engine it says so loudly and exits 0. Output in
# ${ZKFLE_CHAOS_DIR:-$TMPDIR/zkfle-chaos}.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=3.9.5
while [ $# -gt 0 ]; do
  case "$1" in
    --version) VERSION=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "chaos: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! docker info >/dev/null 2>&1; then
  echo "!! SKIPPED chaos campaigns: no Docker engine here" >&2
  exit 0
fi
ZKFLE=${CARGO_TARGET_DIR:-$PWD/target}/${ZKFLE_PROFILE:-release}/zkfle
OUT=${ZKFLE_CHAOS_DIR:-${TMPDIR:-/tmp}/zkfle-chaos}
rm -rf "$OUT"
mkdir -p "$OUT"
for image in "zkfle/zookeeper:$VERSION" zkfle/zkfle:latest; do
  docker image inspect "$image" >/dev/null 2>&1 ||
    { echo "chaos: no image $image: run scripts/docker/build-images.sh first" >&2; exit 1; }
done

echo "chaos: 3 random schedules from seed 1 on 3 x $VERSION + zkfle"
status=0
"$ZKFLE" chaos campaign --voters 4 --zkfle-voters 1 --version "$VERSION" --schedules 3 \
  --seed 1 --window 12 --out "$OUT/random" --format json >"$OUT/random.json" || status=$?
jq -r '"chaos: \(.schedules) schedules: \(.valid) valid, \(.invalid) invalid, \(.unknown) unknown, \(.errors) errors, \(.not_recovered) not whole again, \(.seconds) s"' "$OUT/random.json"
if [ "$status" -ne 0 ] || [ "$(jq '.valid' "$OUT/random.json")" -ne 3 ]; then
  echo "chaos: the random schedules did not all pass (exit $status); see $OUT/random" >&2
  jq -c '.failing[] | {schedule, seed, verdict, error, actions}' "$OUT/random.json" >&2 || true
  exit 1
fi
# zkfle's replica, read from its data directory, is among every schedule's final reads.
with_zkfle=$(jq -s '[.[] | select(any(.report.finals.servers[]; contains("zkfle")))] | length' "$OUT/random/campaign.jsonl")
if [ "$with_zkfle" -ne 3 ]; then
  echo "chaos: zkfle's replica was compared in $with_zkfle of 3 schedules" >&2
  exit 1
fi
echo "chaos: zkfle's replica (its data directory) agreed with the Java servers' in all 3"

echo "chaos: the disk-loss plan on 3 x $VERSION (must be caught)"
status=0
"$ZKFLE" chaos campaign --voters 3 --version "$VERSION" --plan disk-loss --destructive \
  --schedules 1 --seed 1 --window 16 --replays 0 --out "$OUT/disk-loss" --format json \
  >"$OUT/disk-loss.json" || status=$?
# Caught as acknowledged writes missing at the end, or, when the workload's later writes to
# the same keys hid that (more so on a busy machine, whose timings move), as an acknowledged
# write the history's order cannot hold (not linearizable).
lost=$(jq '[.failing[].report.finals.lost | length] | add // 0' "$OUT/disk-loss.json")
unordered=$(jq '[.failing[].report.writes | select(.linearizable == false) | .violations | length] | add // 0' "$OUT/disk-loss.json")
if [ "$status" -ne 1 ] || [ "$(jq '.invalid' "$OUT/disk-loss.json")" -ne 1 ] || [ $((lost + unordered)) -eq 0 ]; then
  echo "chaos: the disk-loss plan was not caught as lost writes (exit $status, $lost lost, $unordered keys not linearizable)" >&2
  exit 1
fi
echo "chaos: disk loss caught: $lost acknowledged writes lost at the end, $unordered keys whose acknowledged writes are not linearizable"

echo "chaos: 2 random schedules from seed 1 on a compose file (scripts/docker/compose.yml)"
status=0
ZK_IMAGE="zkfle/zookeeper:$VERSION" ZKFLE_RELEASE="$VERSION" ZKFLE_DOCKER_SUBNET=172.28.3 \
  ZKFLE_DOCKER_BRIDGE=br-zkfle-chaos "$ZKFLE" chaos campaign --compose scripts/docker/compose.yml \
  --schedules 2 --seed 1 --window 15 --recovery 60 --out "$OUT/compose" --format json \
  >"$OUT/compose.json" 2>"$OUT/compose.err" || status=$?
jq -r '"chaos: \(.schedules) schedules on \(.images | join(", ")) (tickTime \(.tick_ms) ms): \(.valid) valid, \(.invalid) invalid, \(.unknown) unknown, \(.errors) errors, \(.seconds) s"' "$OUT/compose.json" || true
if [ "$status" -ne 0 ] || [ "$(jq '.valid' "$OUT/compose.json")" -ne 2 ]; then
  echo "chaos: the compose campaign did not pass (exit $status); see $OUT/compose" >&2
  cat "$OUT/compose.err" >&2
  jq -c '.failing[] | {schedule, seed, verdict, error, actions}' "$OUT/compose.json" >&2 || true
  exit 1
fi
with_zkfle=$(jq -s '[.[] | select(any(.report.finals.servers[]; contains("zkfle")))] | length' "$OUT/compose/campaign.jsonl")
if [ "$with_zkfle" -ne 2 ]; then
  echo "chaos: zkfle's replica was compared in $with_zkfle of 2 compose schedules" >&2
  exit 1
fi
left=$(docker ps -aq --filter label=com.docker.compose.project | xargs -r docker inspect --format '{{index .Config.Labels "com.docker.compose.project"}}' | grep -c '^zkfle-chaos-' || true)
if [ "$left" -ne 0 ] || docker network ls --format '{{.Name}}' | grep -q '^zkfle-chaos-'; then
  echo "chaos: the compose campaign left containers or networks behind" >&2
  exit 1
fi
echo "chaos: the compose file's ensemble: both schedules valid, zkfle's replica agreed, nothing left"
