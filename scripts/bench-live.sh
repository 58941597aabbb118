#!/usr/bin/env bash
# bench-live.sh: does a live `zkfle decode -i lo --summary` hold bounded memory over a long
# stretch of real election traffic?
#
# Usage: scripts/bench-live.sh [-h]
#
# A three-server Java ensemble on loopback (scripts/ensemble.sh) elects again every PERIOD
# seconds: its leader is killed (kill -9) and started again, so every election port carries
# a failover's notifications and every quorum port a new sync. Meanwhile a client writes
# (one zkCli session, twice a second: `zkfle chaos run`'s workload would keep both cores busy
# for the hour). `zkfle decode -i lo --summary --format jsonl` runs the whole time; its VmRSS is
# sampled every SAMPLE seconds, and at the end it is stopped with SIGINT, as an operator's
# Ctrl-C, and its final summary read.
#
# Environment:
#   DURATION=3600   seconds of traffic
#   PERIOD=120      seconds between leader kills
#   SAMPLE=60       seconds between RSS samples
#   OUT=DIR         where the ensemble, the samples (rss.tsv) and the output go
#                   (default: ${TMPDIR:-/tmp}/zkfle-bench-live)
#   ZKFLE=PATH      the binary (default: target/release/zkfle, built when missing)
#
# Prints: the RSS samples, the peak, the RSS in the first and the last tenth, how many
# decisions the live output printed and how many elections the final summary holds.
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
fi

cd "$(dirname "$0")/.."
DURATION=${DURATION:-3600}
PERIOD=${PERIOD:-120}
SAMPLE=${SAMPLE:-60}
OUT=${OUT:-${TMPDIR:-/tmp}/zkfle-bench-live}
ZKFLE=${ZKFLE:-target/release/zkfle}
[ -x "$ZKFLE" ] || cargo build --release --quiet
rm -rf "$OUT"
mkdir -p "$OUT"
ENS=$OUT/ensemble

decoder=
writer=
cleanup() {
    [ -n "$writer" ] && pkill -P "$writer" 2>/dev/null; [ -n "$writer" ] && kill "$writer" 2>/dev/null
    [ -n "$decoder" ] && kill -INT "$decoder" 2>/dev/null || true
    scripts/ensemble.sh stop "$ENS" >/dev/null 2>&1 || true
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

"$ZKFLE" decode -i lo --summary --format jsonl >"$OUT/live.jsonl" 2>"$OUT/live.err" &
decoder=$!
sleep 2
if ! kill -0 "$decoder" 2>/dev/null; then
    decoder=
    echo "bench-live: the live decoder ended at once:" >&2
    cat "$OUT/live.err" >&2
    exit 1
fi
scripts/ensemble.sh start "$ENS" >/dev/null
scripts/ensemble.sh wait-stable "$ENS" --timeout 90 >/dev/null

leader() {
    scripts/ensemble.sh status "$ENS" | awk '$3 != "-" && $NF == "LEADING" {print $1; exit}'
}

# One client session writes twice a second (zkCli reading its commands from a pipe; it moves
# to another server when its own is killed): zxids move, the followers ack.
# shellcheck source=scripts/zk-env.sh
. scripts/zk-env.sh
{
    echo "create /bench-live 0"
    i=0
    while :; do
        i=$((i + 1))
        echo "set /bench-live $i"
        sleep 0.5
    done
} | zk_cli 127.0.0.1:2181,127.0.0.2:2181,127.0.0.3:2181 >"$OUT/client.log" 2>&1 &
writer=$!

start=$(date +%s)
next_kill=$((start + PERIOD))
next_sample=$start
printf 'seconds\trss_kb\n' >"$OUT/rss.tsv"
while :; do
    now=$(date +%s)
    elapsed=$((now - start))
    [ "$elapsed" -ge "$DURATION" ] && break
    if [ "$now" -ge "$next_sample" ]; then
        printf '%d\t%d\n' "$elapsed" "$(rss_kb "$decoder")" >>"$OUT/rss.tsv"
        next_sample=$((next_sample + SAMPLE))
    fi
    if [ "$now" -ge "$next_kill" ]; then
        l=$(leader || true)
        if [ -n "$l" ]; then
            scripts/ensemble.sh stop-node "$ENS" "$l" --kill >/dev/null 2>&1 || true
            sleep 3
            scripts/ensemble.sh start-node "$ENS" "$l" >/dev/null 2>&1 || true
        fi
        next_kill=$((next_kill + PERIOD))
    fi
    sleep 1
done
printf '%d\t%d\n' "$DURATION" "$(rss_kb "$decoder")" >>"$OUT/rss.tsv"
kill -INT "$decoder"
wait "$decoder" || true
decoder=

samples=$(tail -n +2 "$OUT/rss.tsv")
count=$(echo "$samples" | wc -l)
tenth=$(((count + 9) / 10))
peak=$(echo "$samples" | awk '{ if ($2 > m) m = $2 } END { print m }')
first=$(echo "$samples" | head -n "$tenth" | awk '{ if ($2 > m) m = $2 } END { print m }')
last=$(echo "$samples" | tail -n "$tenth" | awk '{ if ($2 > m) m = $2 } END { print m }')
decisions=$(grep -c '"type":"decision"' "$OUT/live.jsonl" || true)
rounds=$(tail -n 1 "$OUT/live.jsonl" | jq '[.rounds[] | select(.kind == "election")] | length')
echo "samples (seconds, VmRSS kB):"
echo "$samples"
echo "peak ${peak} kB; first tenth ${first} kB; last tenth ${last} kB"
echo "live decision lines ${decisions}; elections in the final summary ${rounds}"
