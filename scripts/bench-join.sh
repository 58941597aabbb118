#!/usr/bin/env bash
# bench-join.sh: election speed and memory of all-native (zkfle join) and all-Java (ZooKeeper)
# ensembles, side by side in one run. A benchmark, not a test: it prints figures, it does not
# judge them.
#
# Usage: scripts/bench-join.sh [--sizes "3 5"] [--reps 3] [--keep]
#
# For each size N and each repetition, on the loopback layout of scripts/ensemble.sh
# (127.0.0.N:3888, tickTime 200, initLimit 100, syncLimit 5):
#   java    `ensemble.sh start` launches N Java servers at once;
#   native  N `zkfle join` processes (release build) are launched at once from this script.
# Then the leader (sid N) is killed with SIGKILL. Measured:
#   start->all   from the moment the last node was launched until every node has decided
#                (Java: the `About to leave FLE instance` line; native: the `LEADER ELECTION
#                TOOK` line; both carry millisecond timestamps). For Java also from the last
#                server's first LOOKING line (i.e. without the JVM's start-up).
#   kill->all    from the SIGKILL until every survivor has decided again.
#   took_ms      each node's own figure (native: took_ms of --events-file; Java: LEADER
#                ELECTION TOOK).
#   finalize     native only: per node, decision time minus the last notification received
#                before it (FLE decides finalizeWait = 200 ms after the last message it needs).
#   RSS          resident memory per node (VmRSS) once every node has decided.
#
# Needs the release binary ($CARGO_TARGET_DIR or target/, built with `cargo build --release`,
# or ZKFLE=path) and a Java ZooKeeper (scripts/zk-env.sh). Holds the loopback-ensemble lock
# ($TMPDIR/zkfle-loopback-ensemble.lock) for the whole run, like the tests.

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
ENS=$HERE/ensemble.sh

SIZES="3 5"
REPS=3
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES=${2:?}; shift 2 ;;
    --reps) REPS=${2:?}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

ZKFLE=${ZKFLE:-${CARGO_TARGET_DIR:-$ROOT/target}/release/zkfle}
[ -x "$ZKFLE" ] || { echo "no release binary at $ZKFLE: cargo build --release" >&2; exit 1; }
ENSEMBLE_OPTS=(--tick 200 --init-limit 100 --sync-limit 5)

if [ -n "${BENCH_ANALYSE_ONLY:-}" ]; then
  OUT=$BENCH_ANALYSE_ONLY # only the analysis, of a run kept with --keep
  KEEP=1
else
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-bench-join.XXXXXX")
fi
NATIVE_PIDS=()
JAVA_DIRS=()
cleanup() {
  local p d
  for p in ${NATIVE_PIDS[@]+"${NATIVE_PIDS[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for d in ${JAVA_DIRS[@]+"${JAVA_DIRS[@]}"}; do "$ENS" stop "$d" >/dev/null 2>&1 || true; done
  if [ "$KEEP" = 1 ]; then echo "kept $OUT" >&2; else rm -rf "$OUT"; fi
}
trap cleanup EXIT

exec 9>"${TMPDIR:-/tmp}/zkfle-loopback-ensemble.lock"
flock 9

now() { date +%s.%N; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# wait_until TIMEOUT_S CMD...: polls CMD every 50 ms.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || { echo "timed out: $*" >&2; return 1; }
    sleep 0.05
  done
}

# java_decided DIR SIDS MIN: every server in SIDS logged >= MIN decisions.
java_decided() {
  local dir=$1 sids=$2 min=$3 s
  for s in $sids; do
    [ "$(grep -c 'About to leave FLE instance' "$dir/$s/server.log" 2>/dev/null || true)" -ge "$min" ] || return 1
  done
}

# native_decided DIR SIDS MIN: every node in SIDS logged >= MIN decisions.
native_decided() {
  local dir=$1 sids=$2 min=$3 s
  for s in $sids; do
    [ "$(grep -c 'LEADER ELECTION TOOK' "$dir/n$s.log" 2>/dev/null || true)" -ge "$min" ] || return 1
  done
}

run_java() {
  local n=$1 rep=$2 dir=$OUT/java-$1-$2 servers="" s t0 tk leader
  for s in $(seq 1 "$n"); do servers+="${servers:+,}$s:participant"; done
  JAVA_DIRS+=("$dir")
  t0=$(now)
  "$ENS" start "$dir" --servers "$servers" "${ENSEMBLE_OPTS[@]}" >/dev/null
  wait_until 60 java_decided "$dir" "$(seq 1 "$n")" 1
  : >"$dir/rss"
  for s in $(seq 1 "$n"); do echo "$s $(rss_kb "$(cat "$dir/$s/pid")")" >>"$dir/rss"; done
  "$ENS" wait-stable "$dir" --timeout 60 >/dev/null
  # The leader is usually N, but under load the first servers up may elect before N starts.
  leader=$(grep -l 'About to leave FLE instance: .*my state=LEADING' "$dir"/*/server.log | head -n 1)
  leader=$(basename "$(dirname "$leader")")
  tk=$(now)
  "$ENS" stop-node "$dir" "$leader" --kill >/dev/null
  wait_until 60 java_decided "$dir" "$(seq 1 "$n" | grep -vx "$leader")" 2
  "$ENS" stop "$dir" >/dev/null
  printf 'start %s\nkill %s\nleader %s\n' "$t0" "$tk" "$leader" >"$dir/times"
}

run_native() {
  local n=$1 rep=$2 dir=$OUT/native-$1-$2 servers="" s t0 tl tk leader pids=()
  for s in $(seq 1 "$n"); do servers+="${servers:+,}$s:participant:external"; done
  "$ENS" start "$dir" --servers "$servers" "${ENSEMBLE_OPTS[@]}" --no-start >/dev/null
  t0=$(now)
  for s in $(seq 1 "$n"); do
    NO_COLOR=1 RUST_LOG=info "$ZKFLE" join --config "$dir/zoo.cfg" --myid "$s" \
      --events-file "$dir/n$s.jsonl" >/dev/null 2>"$dir/n$s.log" &
    pids+=($!)
    NATIVE_PIDS+=($!)
  done
  tl=$(now)
  wait_until 60 native_decided "$dir" "$(seq 1 "$n")" 1
  : >"$dir/rss"
  for s in $(seq 1 "$n"); do echo "$s $(rss_kb "${pids[$((s - 1))]}")" >>"$dir/rss"; done
  sleep 1
  leader=$(grep -l '"state":"LEADING"' "$dir"/n*.jsonl | head -n 1)
  leader=$(basename "$leader" .jsonl)
  leader=${leader#n}
  tk=$(now)
  kill -9 "${pids[$((leader - 1))]}"
  wait "${pids[$((leader - 1))]}" 2>/dev/null || true
  wait_until 60 native_decided "$dir" "$(seq 1 "$n" | grep -vx "$leader")" 2
  for s in "${pids[@]}"; do kill -9 "$s" 2>/dev/null || true; wait "$s" 2>/dev/null || true; done
  printf 'start %s\nlast %s\nkill %s\nleader %s\n' "$t0" "$tl" "$tk" "$leader" >"$dir/times"
}

if [ -z "${BENCH_ANALYSE_ONLY:-}" ]; then
echo "zkfle bench-join: sizes $SIZES, $REPS repetitions, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for n in $SIZES; do
  for rep in $(seq 1 "$REPS"); do
    echo "  java   N=$n rep $rep" >&2
    run_java "$n" "$rep"
    echo "  native N=$n rep $rep" >&2
    run_native "$n" "$rep"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
fi

python3 - "$OUT" "$SIZES" "$REPS" <<'EOF'
import calendar, glob, json, os, re, statistics, sys
from datetime import datetime

out, sizes, reps = sys.argv[1], [int(s) for s in sys.argv[2].split()], int(sys.argv[3])

def java_time(line):  # 2026-11-29 17:29:56,672 (UTC)
    d = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return calendar.timegm(d.timetuple()) + d.microsecond / 1e6

def native_time(line):  # 2026-11-29T18:07:36.086101Z
    d = datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f")
    return calendar.timegm(d.timetuple()) + d.microsecond / 1e6

def times(d):
    return {k: float(v) for k, v in (l.split() for l in open(os.path.join(d, "times")))}

def rss(d):
    return [int(l.split()[1]) for l in open(os.path.join(d, "rss"))]

def java_run(d, n):
    t = times(d)
    first_dec, kill_dec, took, looking = [], [], [], []
    for s in range(1, n + 1):
        lines = open(os.path.join(d, str(s), "server.log"), errors="replace").read().splitlines()
        dec = [java_time(l) for l in lines if "About to leave FLE instance" in l]
        first_dec.append(dec[0])
        if s != t["leader"]:
            kill_dec.append(min(x for x in dec if x > t["kill"]))
        took += [int(m.group(1)) for l in lines for m in [re.search(r"LEADER ELECTION TOOK - (\d+) MS", l)] if m][:1]
        looking.append(next(java_time(l) for l in lines if re.search(r":QuorumPeer@\d+\] - LOOKING$", l)))
    return {
        "start": (max(first_dec) - t["start"]) * 1000,
        "election": (max(first_dec) - max(looking)) * 1000,
        "kill": (max(kill_dec) - t["kill"]) * 1000,
        "took": max(took),
        "rss": rss(d),
    }

def native_run(d, n):
    t = times(d)
    first_dec, kill_dec, took, fin = [], [], [], []
    for s in range(1, n + 1):
        text = open(os.path.join(d, f"n{s}.log"), errors="replace").read()
        lines = re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()
        decs = [i for i, l in enumerate(lines) if "LEADER ELECTION TOOK" in l]
        first = decs[0]
        first_dec.append(native_time(lines[first]))
        notes = [native_time(l) for l in lines[:first] if "Notification: my state:" in l]
        if notes:
            fin.append((native_time(lines[first]) - max(notes)) * 1000)
        if s != t["leader"]:
            kill_dec.append(min(native_time(lines[i]) for i in decs if native_time(lines[i]) > t["kill"]))
        ev = [json.loads(l) for l in open(os.path.join(d, f"n{s}.jsonl"))]
        took.append(next(e["took_ms"] for e in ev if e["state"] != "LOOKING"))
    return {
        "start": (max(first_dec) - t["last"]) * 1000,
        "kill": (max(kill_dec) - t["kill"]) * 1000,
        "took": max(took),
        "finalize": fin,
        "rss": rss(d),
    }

med = lambda xs: statistics.median(xs)
print("| N | ensemble | last start -> all decided (ms) | kill leader -> all decided (ms) | max took_ms | RSS per node (MiB) |")
print("|---|---|---|---|---|---|")
fins = []
for n in sizes:
    j = [java_run(os.path.join(out, f"java-{n}-{r}"), n) for r in range(1, reps + 1)]
    v = [native_run(os.path.join(out, f"native-{n}-{r}"), n) for r in range(1, reps + 1)]
    fmt = lambda xs: f"{med(xs):.0f} (" + ", ".join(f"{x:.0f}" for x in xs) + ")"
    mib = lambda runs: (lambda a: f"{med(a) / 1024:.1f} (max {max(a) / 1024:.1f})")([k for r in runs for k in r["rss"]])
    print(f"| {n} | Java 3.8 | {fmt([r['start'] for r in j])}; from the last LOOKING line: {fmt([r['election'] for r in j])} | {fmt([r['kill'] for r in j])} | {fmt([r['took'] for r in j])} | {mib(j)} |")
    print(f"| {n} | zkfle | {fmt([r['start'] for r in v])} | {fmt([r['kill'] for r in v])} | {fmt([r['took'] for r in v])} | {mib(v)} |")
    fins += [f for r in v for f in r["finalize"]]
print()
print(f"native decision minus the last notification received before it, every node of every run "
      f"({len(fins)} decisions): min {min(fins):.1f} ms, median {med(fins):.1f} ms, max {max(fins):.1f} ms "
      f"(finalizeWait 200 ms; target <= 220 ms)")
EOF
