#!/usr/bin/env bash
# bench-lead.sh: how long an ensemble takes to serve again after its leader dies, when the
# only survivor holding the newest committed writes is zkfle (which leads the sync and hands
# over, docs/lead.md), side by side with the same scenario where a Java server stands in
# zkfle's place. A benchmark, not a test: it prints figures, it does not judge them.
#
# Usage: scripts/bench-lead.sh [--runs N]     (default 3 runs of each, alternating)
#
# The scenario (issue 18), 3 voters on the loopback layout of scripts/ensemble.sh, tickTime
# 200, initLimit 10, syncLimit 5: slot 1 is zkfle (release build) or Java 1; Java F follows,
# Java L leads. F is paused (SIGSTOP) until L drops it; 5 writes commit with L and slot 1;
# L is killed (-9) and F resumed (SIGCONT). Measured: from the kill to F serving the last
# write and accepting a new one (a client polling F every 10 ms).
#
# Uses tests/lead_java.rs `bench_leader_death_to_serving` (ignored in normal runs), release
# build. Holds the loopback-ensemble lock. ZK_JARS selects another ZooKeeper (zk-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
out=$(LEAD_BENCH_RUNS=$RUNS cargo test --release --test lead_java -- --ignored --nocapture \
  bench_leader_death_to_serving 2>/dev/null | grep '^BENCH ')
echo "$out"
python3 - "$out" <<'PY'
import sys, statistics
rows = {}
for line in sys.argv[1].splitlines():
    f = dict(kv.split("=") for kv in line.split()[1:])
    rows.setdefault(f["slot1"], []).append(int(f["leader_death_to_serving_ms"]))
for k in ("java", "zkfle"):
    v = sorted(rows.get(k, []))
    if v:
        print(f"{k:6} runs={len(v)} median={statistics.median(v):.0f} ms min={v[0]} max={v[-1]} all={v}")
if rows.get("java") and rows.get("zkfle"):
    d = statistics.median(rows["zkfle"]) - statistics.median(rows["java"])
    print(f"zkfle - java (medians): {d:+.0f} ms")
PY
