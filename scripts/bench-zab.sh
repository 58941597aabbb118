#!/usr/bin/env bash
# bench-zab.sh: zkfle as a Zab follower next to a Java follower, in one run. A benchmark, not a
# test: it prints figures, it does not judge them.
#
# Usage: scripts/bench-zab.sh [--secs 10] [--znodes 100000] [--keep]
#
# Two 3-node ensembles on the loopback layout of scripts/ensemble.sh (tickTime 2000, Java
# 3.8 from scripts/zk-env.sh), one after the other, with the same client load:
#   java    Java 1, 2, 3 (leader 3: the highest sid among equal votes)
#   zkfle   zkfle 1 (release build, its own data dir), Java 2, 3 (leader 3)
# For each, with all three up and then with Java 2 stopped (so that follower 1, Java or zkfle,
# is the only one the leader can commit with), the client (examples/zk_load.rs, release) runs
# setData of 1 KiB round-robin over 1,000 znodes on the leader for --secs seconds, with 1 and
# with 64 requests in flight (setData, not create, so that the servers' 256 MB heaps do not
# fill up over the runs):
#   commit latency   request written to reply read, p50/p90/p99 (us); throughput ops/s.
#   ACK latency      per follower, from a tcpdump capture of the quorum port (2888) on lo
#                    taken from before the ensemble starts (examples/ack_latency.rs: zkfle's
#                    reassembly and quorum codec): the leader's PROPOSAL(zxid) seen on the
#                    wire to that follower's ACK(zxid) seen on the wire (it includes the
#                    follower's log append and fsync), by the run the PROPOSAL falls in.
# Then, in the zkfle ensemble, --znodes znodes of 100 bytes are created (64 in flight) while
# zkfle follows; its resident memory (VmRSS, VmHWM) is read; then zkfle is restarted with an
# empty data dir and takes them by SNAP: VmRSS/VmHWM again.
#
# Needs tcpdump (run as root, or with capture rights), python3, the release builds (cargo
# build --release --bin zkfle --example zk_load --example ack_latency; CARGO_TARGET_DIR) and a Java
# ZooKeeper. Holds the loopback-ensemble lock ($TMPDIR/zkfle-loopback-ensemble.lock).

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
ENS=$HERE/ensemble.sh

SECS=10
ZNODES=100000
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) SECS=${2:?}; shift 2 ;;
    --znodes) ZNODES=${2:?}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
ZKFLE=${ZKFLE:-$TARGET/release/zkfle}
LOAD=${ZK_LOAD:-$TARGET/release/examples/zk_load}
ACK=${ACK_LATENCY:-$TARGET/release/examples/ack_latency}
for b in "$ZKFLE" "$LOAD" "$ACK"; do
  [ -x "$b" ] || { echo "no release binary $b: cargo build --release --bin zkfle --example zk_load --example ack_latency" >&2; exit 1; }
done
for t in tcpdump python3; do command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }; done

OUT=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-bench-zab.XXXXXX")
ZKFLE_PID=
TCPDUMP_PID=
DIRS=()
cleanup() {
  if [ -n "$ZKFLE_PID" ]; then kill -9 "$ZKFLE_PID" 2>/dev/null || true; wait "$ZKFLE_PID" 2>/dev/null || true; fi
  [ -n "$TCPDUMP_PID" ] && kill "$TCPDUMP_PID" 2>/dev/null || true
  local d
  for d in ${DIRS[@]+"${DIRS[@]}"}; do "$ENS" stop "$d" >/dev/null 2>&1 || true; done
  if [ "$KEEP" = 1 ]; then echo "kept $OUT" >&2; else rm -rf "$OUT"; fi
}
trap cleanup EXIT

exec 9>"${TMPDIR:-/tmp}/zkfle-loopback-ensemble.lock"
flock 9

LEADER=3
CLIENT=127.0.0.$LEADER:2181

load_runs() {
  local name=$1 phase=$2 dir=$3 w
  for w in 1 64; do
    printf '  %-6s %-18s window %-3s ' "$name" "$phase" "$w"
    "$LOAD" "$CLIENT" load --prefix "l$phase$w" --count 1000 --secs "$SECS" --size 1024 --window "$w" |
      python3 -c '
import sys, json
r = json.load(sys.stdin)
print("%8.0f ops/s  p50=%6d us  p90=%6d us  p99=%6d us  max=%7d us  errors=%d" % (r["ops_per_sec"], r["p50_us"], r["p90_us"], r["p99_us"], r["max_us"], r["errors"]))
with open(sys.argv[1], "a") as f:
    f.write("%s %.6f %.6f\n" % (sys.argv[2], r["t_start"], r["t_end"]))
' "$dir/runs.txt" "$phase/w$w"
  done
}

rss() { awk '/^VmRSS|^VmHWM/ {printf "%s %s kB  ", $1, $2}' "/proc/$1/status"; echo; }

synced_count() {
  local c
  c=$(grep -c "synced with leader" "$1/native1.log" 2>/dev/null || true)
  echo "${c:-0}"
}

start_zkfle() {
  local dir=$1 before
  before=$(synced_count "$dir")
  RUST_LOG=info "$ZKFLE" join --config "$dir/zoo.cfg" --myid 1 --data-dir "$dir/native1" \
    --events-file "$dir/native1.events" 2>>"$dir/native1.log" &
  ZKFLE_PID=$!
  local i
  for i in $(seq 1 600); do
    [ "$(synced_count "$dir")" -gt "$before" ] && return 0
    sleep 0.1
  done
  echo "zkfle did not sync" >&2
  tail -20 "$dir/native1.log" >&2
  exit 1
}

run_config() {
  local name=$1 dir=$OUT/$1
  DIRS+=("$dir")
  mkdir -p "$dir"
  # Captured from before the quorum connections open, so that every stream is whole.
  tcpdump -i lo -s 0 -B 262144 -U -w "$dir/quorum.pcap" 'tcp port 2888' 2>"$dir/tcpdump.log" &
  TCPDUMP_PID=$!
  sleep 1
  if [ "$name" = java ]; then
    "$ENS" start "$dir" --servers "1:participant,2:participant,3:participant" >/dev/null
    "$ENS" wait-stable "$dir" --timeout 60 >/dev/null
  else
    "$ENS" start "$dir" --servers "1:participant:external,2:participant,3:participant" >/dev/null
    "$ENS" wait-stable "$dir" --timeout 60 >/dev/null
    start_zkfle "$dir"
  fi
  grep -q -- "- LEADING$" "$dir/$LEADER/server.log" || { echo "$name: 3 does not lead" >&2; exit 1; }
  "$LOAD" "$CLIENT" fill --prefix warm --count 2000 --size 1024 --window 64 >/dev/null
  echo "$name: followers 1 ($([ "$name" = java ] && echo Java || echo zkfle)) and 2 (Java), leader 3 (Java)"
  load_runs "$name" "all-up" "$dir"
  "$ENS" stop-node "$dir" 2 >/dev/null
  load_runs "$name" "2-stopped" "$dir"
  sleep 1
  kill "$TCPDUMP_PID"; wait "$TCPDUMP_PID" 2>/dev/null || true; TCPDUMP_PID=
  echo "  ACK latency, PROPOSAL on the wire to ACK on the wire, by run (tcpdump: $(grep -h 'dropped by kernel' "$dir/tcpdump.log" || echo '?')):"
  "$ACK" "$dir/quorum.pcap" "$dir/runs.txt"
  [ "$KEEP" = 1 ] || rm -f "$dir/quorum.pcap"
  "$ENS" start-node "$dir" 2 >/dev/null
}

echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(uname -r); $SECS s per run, setData of 1 KiB"
run_config java
"$ENS" stop "$OUT/java" >/dev/null
run_config zkfle

echo "zkfle memory:"
printf '  following, before %s znodes:   ' "$ZNODES"; rss "$ZKFLE_PID"
printf '  created: '
"$LOAD" "$CLIENT" fill --prefix m --count "$ZNODES" --size 100 --window 64
sleep 2
printf '  following, after %s creates: ' "$ZNODES"; rss "$ZKFLE_PID"
kill -9 "$ZKFLE_PID"; wait "$ZKFLE_PID" 2>/dev/null || true; ZKFLE_PID=
rm -rf "$OUT/zkfle/native1"
start_zkfle "$OUT/zkfle"
sleep 2
printf '  after a SNAP of them:          '; rss "$ZKFLE_PID"
grep "snapshot received" "$OUT/zkfle/native1.log" | tail -1 | sed 's/.*snapshot received/  snapshot received/'
