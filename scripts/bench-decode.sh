#!/usr/bin/env bash
# bench-decode.sh: how fast `zkfle decode --format jsonl` is, next to
# `tshark -r FILE -T fields -e tcp.payload` on the same capture, in the same run.
#
# Usage: scripts/bench-decode.sh [-h]
#
# Environment:
#   SIZE=1G            size of the benchmark capture (examples/gen_capture: the real traffic
#                      of fixtures/staggered5 repeated with shifted ports and times)
#   CAPTURE=PATH       where it is kept (default: ${TMPDIR:-/tmp}/zkfle-bench-$SIZE.pcap);
#                      generated when missing
#   RUNS=3             zkfle runs on the full capture; the table shows the median
#   TSHARK_SIZE=64M    tshark reads a prefix of this size (the first copies of the same
#                      traffic: gen_capture is deterministic), because on the full 1 GiB it
#                      takes minutes of CPU and several GB of memory. TSHARK_SIZE=$SIZE for
#                      the whole file.
#   HOST_SIZE=128M     size of each of the three per-host captures for the merge figure
#                      (fixtures/multihost3/host.N.pcap repeated consistently, SPAN_SECS=30)
#   SYN_CONNS=200000   SYN-only connections in the reassembly-memory capture
#   CARGO_TARGET_DIR   as usual
#
# Also measured: the text timeline and `zkfle decode --summary` on the full capture; merging
# three per-host captures (`zkfle decode host.1 host.2 host.3`) against decoding each alone,
# CPU time summed; and the peak RSS of decoding a capture of SYN_CONNS connections that never
# get past their SYN.
#
# Figures are CPU time (user + system, from /usr/bin/time), not wall time, so that other load
# on the machine does not count. MB = 10^6 bytes of capture file. "records" are JSON lines for
# zkfle and output lines (one a frame) for tshark. Output goes through a pipe to `wc -l`, as a
# consumer would read it. Peak RSS is the maximum resident set size; zkfle's is also shown on
# the tshark prefix, to show it does not grow with the file.
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
fi

cd "$(dirname "$0")/.."
SIZE=${SIZE:-1G}
TSHARK_SIZE=${TSHARK_SIZE:-64M}
RUNS=${RUNS:-3}
DIR=${TMPDIR:-/tmp}
CAPTURE=${CAPTURE:-$DIR/zkfle-bench-$SIZE.pcap}
PREFIX=$DIR/zkfle-bench-$TSHARK_SIZE.pcap
SOURCE=fixtures/staggered5/capture.pcap
TARGET=${CARGO_TARGET_DIR:-target}

[[ -x /usr/bin/time ]] || { echo "bench-decode: needs GNU time (/usr/bin/time)" >&2; exit 1; }
command -v tshark >/dev/null || {
    echo "bench-decode: tshark missing (DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)" >&2
    exit 1
}

cargo build --release --quiet --bin zkfle --example gen_capture
ZKFLE=$TARGET/release/zkfle
GEN=$TARGET/release/examples/gen_capture
[[ -s "$CAPTURE" ]] || "$GEN" "$SOURCE" "$SIZE" "$CAPTURE"
[[ -s "$PREFIX" ]] || "$GEN" "$SOURCE" "$TSHARK_SIZE" "$PREFIX"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME FILE CMD...: one measured run; prints "cpu_s rss_kb records bytes".
run() {
    local file=$1
    shift
    local lines
    lines=$(/usr/bin/time -f '%U %S %M' -o "$tmp/time" "$@" 2>/dev/null | wc -l)
    read -r user sys rss < <(tail -n 1 "$tmp/time")
    echo "$(echo "$user + $sys" | bc -l) $rss $lines $(stat -c %s "$file")"
}

row() { # tool file cpu rss records bytes
    awk -v tool="$1" -v file="$2" -v cpu="$3" -v rss="$4" -v rec="$5" -v bytes="$6" 'BEGIN {
        printf "%-8s %-26s %9.1f %10.1f %12.0f %8.2f %9.1f\n", tool, file, bytes / 1e6,
            bytes / 1e6 / cpu, rec / cpu, cpu, rss / 1024 }'
}

echo "zkfle decode --format jsonl: $RUNS runs on $CAPTURE" >&2
results=()
for _ in $(seq "$RUNS"); do
    r=$(run "$CAPTURE" "$ZKFLE" decode --format jsonl "$CAPTURE")
    echo "  cpu ${r%% *} s" >&2
    results+=("$r")
done
median=$(printf '%s\n' "${results[@]}" | sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }')
echo "zkfle on the tshark prefix $PREFIX" >&2
small=$(run "$PREFIX" "$ZKFLE" decode --format jsonl "$PREFIX")
echo "tshark -T fields -e tcp.payload on $PREFIX (this takes a while)" >&2
tshark=$(run "$PREFIX" tshark -r "$PREFIX" -T fields -e tcp.payload)

echo
printf "%-8s %-26s %9s %10s %12s %8s %9s\n" tool capture MB "MB/s" "records/s" "CPU s" "RSS MB"
read -r cpu rss rec bytes <<<"$median"
row zkfle "$(basename "$CAPTURE")" "$cpu" "$rss" "$rec" "$bytes"
zk_mbs=$(echo "$bytes / 1000000 / $cpu" | bc -l)
read -r cpu rss rec bytes <<<"$small"
row zkfle "$(basename "$PREFIX")" "$cpu" "$rss" "$rec" "$bytes"
read -r cpu rss rec bytes <<<"$tshark"
row tshark "$(basename "$PREFIX")" "$cpu" "$rss" "$rec" "$bytes"
ts_mbs=$(echo "$bytes / 1000000 / $cpu" | bc -l)
lo=$(printf '%s\n' "${results[@]}" | sort -n | head -n 1 | cut -d' ' -f1)
hi=$(printf '%s\n' "${results[@]}" | sort -n | tail -n 1 | cut -d' ' -f1)
echo
awk -v lo="$lo" -v hi="$hi" -v bytes="$(stat -c %s "$CAPTURE")" -v runs="$RUNS" 'BEGIN {
    printf "zkfle on %s: %d runs, CPU %.2f-%.2f s, %.0f-%.0f MB/s\n", "the full capture", runs, lo, hi,
        bytes / 1e6 / hi, bytes / 1e6 / lo }'
awk -v z="$zk_mbs" -v t="$ts_mbs" -v runs="$RUNS" 'BEGIN {
    printf "zkfle/tshark throughput: %.0fx   (CPU time, user+sys; zkfle: median of %d runs; target: 1 GB/s per core)\n", z / t, runs }'

# The text timeline, decode's default format (closes included, as text shows them).
read -r cpu rss rec bytes <<<"$(run "$CAPTURE" "$ZKFLE" decode "$CAPTURE")"
awk -v cpu="$cpu" -v rss="$rss" -v rec="$rec" -v bytes="$bytes" 'BEGIN {
    printf "zkfle decode (text) on the full capture: %.2f s CPU, %.0f MB/s, %d lines, %.1f MB RSS\n",
        cpu, bytes / 1e6 / cpu, rec, rss / 1024 }'

# The summary of the same capture: 17,922 re-runs of one election story, so every server's
# decisions number in the tens of thousands (as in a capture of days); its cost must grow with
# the capture, not with its square.
read -r cpu rss rec bytes <<<"$(run "$CAPTURE" "$ZKFLE" decode --summary "$CAPTURE")"
awk -v cpu="$cpu" -v rss="$rss" -v rec="$rec" -v bytes="$bytes" 'BEGIN {
    printf "zkfle decode --summary on the full capture: %.2f s CPU, %.0f MB/s, %d lines, %.1f MB RSS\n",
        cpu, bytes / 1e6 / cpu, rec, rss / 1024 }'

# Merging per-host captures against decoding each alone.
HOST_SIZE=${HOST_SIZE:-128M}
hosts=()
for i in 1 2 3; do
    h=$DIR/zkfle-bench-host$i-$HOST_SIZE.pcap
    [[ -s "$h" ]] || SPAN_SECS=30 "$GEN" "fixtures/multihost3/host.$i.pcap" "$HOST_SIZE" "$h"
    hosts+=("$h")
done
alone=0
alone_rec=0
for h in "${hosts[@]}"; do
    read -r cpu rss rec bytes <<<"$(run "$h" "$ZKFLE" decode --format jsonl "$h")"
    alone=$(echo "$alone + $cpu" | bc -l)
    alone_rec=$((alone_rec + rec))
done
merged=$( { /usr/bin/time -f '%U %S %M' -o "$tmp/time" "$ZKFLE" decode --format jsonl "${hosts[@]}" 2>/dev/null | wc -l; } )
read -r user sys mrss < <(tail -n 1 "$tmp/time")
mcpu=$(echo "$user + $sys" | bc -l)
awk -v a="$alone" -v m="$mcpu" -v ar="$alone_rec" -v mr="$merged" -v rss="$mrss" -v size="$HOST_SIZE" 'BEGIN {
    printf "merge of 3 per-host captures of %s: each alone %.2f s CPU in all (%d records), merged %.2f s (%d records, %.1f MB RSS): %.2fx\n",
        size, a, ar, m, mr, rss / 1024, m / a }'

# Memory of connections that never get past their SYN.
SYN_CONNS=${SYN_CONNS:-200000}
syn=$DIR/zkfle-bench-syn-$SYN_CONNS.pcap
[[ -s "$syn" ]] || "$GEN" --syn-only "$SYN_CONNS" "$syn"
/usr/bin/time -f '%U %S %M' -o "$tmp/time" "$ZKFLE" decode --format jsonl "$syn" >/dev/null 2>&1 || true
read -r user sys srss < <(tail -n 1 "$tmp/time")
awk -v n="$SYN_CONNS" -v rss="$srss" 'BEGIN { printf "%d SYN-only connections: peak RSS %.1f MB (target: 40 MB)\n", n, rss / 1024 }'
