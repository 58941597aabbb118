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
# creates of 1 KiB on the leader for --secs seconds with 1 and with 64 requests in flight:
#   commit latency   request written to reply read, p50/p90/p99 (us); throughput ops/s.
#   ACK latency      per follower, from a tcpdump capture of the quorum port (2888) on lo:
#                    the leader's PROPOSAL(zxid) seen on the wire to that follower's ACK(zxid)
#                    seen on the wire (it includes the follower's log append and fsync).
# Then, in the zkfle ensemble, --znodes znodes of 100 bytes are created (64 in flight) while
# zkfle follows; its resident memory (VmRSS, VmHWM) is read; then zkfle is restarted with an
# empty data dir and takes them by SNAP: VmRSS/VmHWM again.
#
# Needs tcpdump and tshark (run as root, or with capture rights), python3, the release builds
# (cargo build --release --bin zkfle --example zk_load; CARGO_TARGET_DIR honoured) and a Java
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
for b in "$ZKFLE" "$LOAD"; do
  [ -x "$b" ] || { echo "no release binary $b: cargo build --release --bin zkfle --example zk_load" >&2; exit 1; }
done
for t in tcpdump tshark python3; do command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }; done

OUT=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-bench-zab.XXXXXX")
ZKFLE_PID=
TCPDUMP_PID=
DIRS=()
cleanup() {
  [ -n "$ZKFLE_PID" ] && kill -9 "$ZKFLE_PID" 2>/dev/null || true
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

# ACK latency per follower from a capture: PROPOSAL leader->follower to ACK follower->leader.
ack_latency() {
  local pcap=$1 runs=$2
  tshark -r "$pcap" -Y 'tcp.port == 2888 && tcp.len > 0' -T fields \
    -e frame.time_epoch -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport -e tcp.payload 2>/dev/null |
    python3 -c '
import sys, struct, collections
runs = [l.split() for l in open(sys.argv[1])]   # label start end (epoch seconds)
def run_of(t):
    for label, a, b in runs:
        if float(a) <= t <= float(b): return label
    return None
streams = collections.defaultdict(bytearray)   # (src, sport, dst, dport) -> pending bytes
prop = {}                                      # (follower ip:port, zxid) -> time
sid = {}                                       # follower ip:port -> sid (FOLLOWERINFO)
snap = set()                                   # streams inside a snapshot
lat = collections.defaultdict(list)
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 6 or not f[5]:
        continue
    t = float(f[0]); key = (f[1], f[2], f[3], f[4])
    buf = streams[key]; buf += bytes.fromhex(f[5].replace(":", ""))
    while True:   # QuorumPacket: type i32, zxid i64, data buffer, authinfo vector
        if key in snap:
            # After SNAP the leader writes a raw snapshot. Skipped here up to its signature:
            # good enough for this benchmark only, where zkfle joins before any client data
            # exists (the snapshot holds the 4 system znodes), never a way to parse one.
            at = buf.find(b"\x00\x00\x00\x0aBenWasHere")
            if at < 0: break
            del buf[:at + 14]; snap.discard(key)
        if len(buf) < 16: break
        typ, zxid, dl = struct.unpack(">iqi", buf[:16])
        n = 16 + max(dl, 0)
        if len(buf) < n + 4: break
        cnt = struct.unpack(">i", buf[n:n+4])[0]; n += 4
        ok = True
        for _ in range(max(cnt, 0)):
            for _ in range(2):
                if len(buf) < n + 4: ok = False; break
                l = struct.unpack(">i", buf[n:n+4])[0]; n += 4 + max(l, 0)
            if not ok: break
        if not ok or len(buf) < n: break
        buf_pkt = bytes(buf[:n])
        del buf[:n]
        # Followers connect from 127.0.0.1 whatever their own address: tell them apart by
        # their connection (ip:port) and name them by the sid of their FOLLOWERINFO.
        if f[4] == "2888" and typ == 11 and dl >= 8:
            sid[f[1] + ":" + f[2]] = struct.unpack(">q", buf_pkt[16:24])[0]
        if f[2] == "2888" and typ == 15:
            snap.add(key)
        if f[2] == "2888" and typ == 2:          # PROPOSAL from the leader
            prop[(f[3] + ":" + f[4], zxid)] = t
        elif f[4] == "2888" and typ == 3:        # ACK to the leader
            k = (f[1] + ":" + f[2], zxid)
            if k in prop:
                t0 = prop.pop(k); r = run_of(t0)
                if r: lat[(r, "sid %s" % sid.get(k[0], "?"))].append((t - t0) * 1e6)
order = [l[0] for l in runs]
for (r, ip), v in sorted(lat.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
    v.sort(); q = lambda p: v[round((len(v) - 1) * p)]
    print("  ack %-22s follower %-7s n=%-6d p50=%6.0f us  p90=%6.0f us  p99=%6.0f us  max=%6.0f us" % (r, ip, len(v), q(.5), q(.9), q(.99), v[-1]))
' "$runs"
}

load_runs() {
  local name=$1 phase=$2 dir=$3 w t0
  for w in 1 64; do
    printf '  %-6s %-18s window %-3s ' "$name" "$phase" "$w"
    t0=$(date +%s.%N)
    "$LOAD" "$CLIENT" load --prefix "l$phase$w" --secs "$SECS" --size 1024 --window "$w" |
      python3 -c 'import sys,json; r=json.load(sys.stdin); print("%8.0f ops/s  p50=%6d us  p90=%6d us  p99=%6d us  max=%7d us  errors=%d" % (r["ops_per_sec"], r["p50_us"], r["p90_us"], r["p99_us"], r["max_us"], r["errors"]))'
    echo "$phase/w$w $t0 $(date +%s.%N)" >>"$dir/runs.txt"
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
  ack_latency "$dir/quorum.pcap" "$dir/runs.txt"
  [ "$KEEP" = 1 ] || rm -f "$dir/quorum.pcap"
  "$ENS" start-node "$dir" 2 >/dev/null
}

echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(uname -r); $SECS s per run, creates of 1 KiB"
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
