#!/usr/bin/env bash
# bench-datadir.sh: a long-running voter's data directory, zkfle next to a Java follower. A
# benchmark, not a test: it prints figures, it does not judge them.
#
# Usage: scripts/bench-datadir.sh [--txns 500000] [--znodes 100000] [--keep]
#
# One 3-node ensemble on the loopback layout of scripts/ensemble.sh (tickTime 2000, Java 3.8
# from scripts/zk-env.sh): zkfle 1 (release build) and Java 2, 3, with Java's defaults for the
# data directory (snapCount 100000, preAllocSize 64 MiB) and autopurge.snapRetainCount=3,
# autopurge.purgeInterval=1 (Java purges at start, then hourly). The client
# (examples/zk_load.rs) writes until the leader's zxid counter passes --txns: setData of 100
# bytes round-robin over 1,000 znodes, 64 in flight (setData, not create, so that the Java
# heaps do not fill). Then, for zkfle and for the Java follower:
#   data dir     files (snapshot.*, log.*) and bytes in version-2, before and after a restart
#   restart      kill -9, start again, time until synced with the leader (zkfle: its
#                "synced with leader" line; Java: "Learner received UPTODATE message"),
#                including the JVM's start for Java
#   memory       zkfle's VmRSS and VmHWM after the writes (the tree is in memory), and after
#                --znodes more znodes of 100 bytes are created (64 in flight)
#
# Needs the release builds (cargo build --release --bin zkfle --example zk_load) and a Java
# ZooKeeper. Holds the loopback-ensemble lock ($TMPDIR/zkfle-loopback-ensemble.lock).

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
ENS=$HERE/ensemble.sh

TXNS=500000
ZNODES=100000
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --txns) TXNS=${2:?}; shift 2 ;;
    --znodes) ZNODES=${2:?}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
ZKFLE=${ZKFLE:-$TARGET/release/zkfle}
LOAD=${ZK_LOAD:-$TARGET/release/examples/zk_load}
for b in "$ZKFLE" "$LOAD"; do
  [ -x "$b" ] || { echo "no release binary $b: cargo build --release --bin zkfle --example zk_load" >&2; exit 1; }
done

OUT=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-bench-datadir.XXXXXX")
DIR=$OUT/ens
ZKFLE_PID=
cleanup() {
  [ -n "$ZKFLE_PID" ] && kill -9 "$ZKFLE_PID" 2>/dev/null || true
  "$ENS" stop "$DIR" >/dev/null 2>&1 || true
  if [ $KEEP = 0 ]; then rm -rf "$OUT"; else echo "kept $OUT" >&2; fi
}
trap cleanup EXIT
exec 9>"${TMPDIR:-/tmp}/zkfle-loopback-ensemble.lock"
flock 9

now_ms() { date +%s%3N; }

start_zkfle() {
  RUST_LOG=info "$ZKFLE" join --config "$DIR/zoo.cfg" --myid 1 --data-dir "$OUT/zkfle" \
    --events-file "$OUT/zkfle.events" >/dev/null 2>>"$OUT/zkfle.log" &
  ZKFLE_PID=$!
}

wait_line() { # FILE NEEDLE COUNT TIMEOUT_S
  local end=$((SECONDS + $4))
  while [ $SECONDS -lt $end ]; do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
    sleep 0.05
  done
  echo "timed out waiting for '$2' x$3 in $1" >&2
  return 1
}

dir_figures() { # DIR -> "snapshots logs bytes"
  local v2=$1/version-2
  printf '%s %s %s' "$(ls "$v2" | grep -c '^snapshot\.' || true)" "$(ls "$v2" | grep -c '^log\.' || true)" \
    "$(du -sb "$v2" | cut -f1)"
}

"$ENS" start "$DIR" --servers "1:participant:external,2:participant,3:participant" --no-start >/dev/null
for f in "$DIR/zoo.cfg" "$DIR"/2/zoo.cfg "$DIR"/3/zoo.cfg; do
  printf 'autopurge.snapRetainCount=3\nautopurge.purgeInterval=1\n' >>"$f"
done
"$ENS" start-node "$DIR" 2 >/dev/null
"$ENS" start-node "$DIR" 3 >/dev/null
"$ENS" wait-stable "$DIR" --timeout 60 >/dev/null
start_zkfle
wait_line "$OUT/zkfle.log" "synced with leader" 1 60
LEADER=$(tail -n 1 "$OUT/zkfle.events" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["leader"])')
JAVA=$((5 - LEADER))
echo "zkfle 1 follows Java $LEADER; Java follower $JAVA" >&2

# Writes until the zxid counter passes TXNS (each run: 1,000 creates, then setData).
run=0
while :; do
  cnt=$(python3 -c '
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])] if sys.argv[1] else []
print(sum(r["ops"] + 1000 for r in runs))' "$([ -s "$OUT/load.jsonl" ] && echo "$OUT/load.jsonl")")
  [ "$cnt" -ge "$TXNS" ] && break
  run=$((run + 1))
  "$LOAD" "127.0.0.$LEADER:2181" load --prefix "r${run}_" --count 1000 --secs 20 --size 100 --window 64 \
    >>"$OUT/load.jsonl"
done
sleep 2
ZK_RSS=$(awk '/VmRSS/{print $2}' /proc/$ZKFLE_PID/status)
ZK_HWM=$(awk '/VmHWM/{print $2}' /proc/$ZKFLE_PID/status)
TAKEN=$(grep -c "Snapshot 0x" "$OUT/zkfle.log" || true)
SKIPPED=$(grep -c "Too busy to snap" "$OUT/zkfle.log" || true)
read -r zs zl zb <<<"$(dir_figures "$OUT/zkfle")"
read -r js jl jb <<<"$(dir_figures "$DIR/$JAVA/data")"

# Restarts.
kill -9 "$ZKFLE_PID"; wait "$ZKFLE_PID" 2>/dev/null || true
t0=$(now_ms); start_zkfle
wait_line "$OUT/zkfle.log" "synced with leader" 2 300
ZK_RESTART=$(( $(now_ms) - t0 ))
LOADED=$(grep -o 'data tree of .* ms' "$OUT/zkfle.log" | tail -n 1)
ZK_RSS2=$(awk '/VmRSS/{print $2}' /proc/$ZKFLE_PID/status)
before=$(grep -c "Learner received UPTODATE" "$DIR/$JAVA/server.log" || true)
"$ENS" stop-node "$DIR" "$JAVA" --kill >/dev/null
t0=$(now_ms); "$ENS" start-node "$DIR" "$JAVA" >/dev/null
wait_line "$DIR/$JAVA/server.log" "Learner received UPTODATE" $((before + 1)) 300
JAVA_RESTART=$(( $(now_ms) - t0 ))
sleep 1
read -r zs2 zl2 zb2 <<<"$(dir_figures "$OUT/zkfle")"
read -r js2 jl2 jb2 <<<"$(dir_figures "$DIR/$JAVA/data")"

"$LOAD" "127.0.0.$LEADER:2181" fill --prefix big --count "$ZNODES" --size 100 --window 64 >/dev/null
sleep 2
ZK_RSS3=$(awk '/VmRSS/{print $2}' /proc/$ZKFLE_PID/status)
ZK_HWM3=$(awk '/VmHWM/{print $2}' /proc/$ZKFLE_PID/status)

cat <<EOF
txns written: $cnt (creates and setData; $(wc -l <"$OUT/load.jsonl") load runs)
zkfle snapshots taken: $TAKEN, skipped (too busy): $SKIPPED
                 snapshots logs   bytes        after restart: snapshots logs bytes
zkfle            $zs          $zl      $zb        $zs2 $zl2 $zb2
Java follower    $js          $jl      $jb        $js2 $jl2 $jb2
restart to synced: zkfle $ZK_RESTART ms ($LOADED); Java $JAVA_RESTART ms (JVM start included)
zkfle memory after the writes: VmRSS $ZK_RSS kB, VmHWM $ZK_HWM kB; after restart VmRSS $ZK_RSS2 kB
zkfle memory with $ZNODES more znodes of 100 bytes: VmRSS $ZK_RSS3 kB, VmHWM $ZK_HWM3 kB
EOF
