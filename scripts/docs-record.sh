#!/usr/bin/env bash
# Records what the docs show of live servers: the operator's guide's walkthrough (docs/guide.md,
# section 4), run for real against Java ZooKeeper on loopback, with zkfle as member 1.
#
# Then runs three tests with ZKFLE_DOCS_RECORD=1, which keep zkfle's log of leading the sync,
# of refused TLS certificates and of a refused SASL password as docs/recorded/{lead,tls,sasl}.txt.
#
# Writes docs/recorded/walkthrough.txt (each command as `$ CMD`, then what it printed; `#`
# lines say what ran where and when) and docs/recorded/walkthrough/ (the capture and every
# server's log, zkfle's included). tests/docs.rs checks the docs' blocks tagged
# `<!-- recorded: docs/recorded/walkthrough.txt -->` for the shape of this recording, and the
# blocks that decode the capture byte for byte.
#
# `--no-tests` records the walkthrough only.
#
# Needs root (tcpdump on lo) and Java ZooKeeper (scripts/zk-env.sh); runs this tree's zkfle
# (a debug build made here), or ZKFLE=path.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZKFLE:-}" ]; then
  cargo build --quiet --bin zkfle
  ZKFLE=${CARGO_TARGET_DIR:-$PWD/target}/debug/zkfle
fi
command -v tcpdump >/dev/null || { echo "docs-record: needs tcpdump" >&2; exit 2; }
export PATH="$(dirname "$ZKFLE"):$PATH"

WALK=${TMPDIR:-/tmp}/walk
OUT=docs/recorded/walkthrough.txt
KEEP=docs/recorded/walkthrough
rm -rf "$WALK" "$KEEP"
mkdir -p "$KEEP"
scripts/ensemble.sh stop "$WALK" >/dev/null 2>&1 || true

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/ensemble.sh stop "$WALK" >/dev/null 2>&1 || true
}
trap cleanup EXIT

rec=$(mktemp)
# Shows a command as the guide does, runs it, and records both.
step() {
  echo "\$ $*" >>"$rec"
  "$@" 2>&1 | tee -a "$rec" || true
}
# The lines a background command printed since the last look.
seen=0
news() {
  local n
  n=$(wc -l <"$1")
  tail -n +"$((seen + 1))" "$1" | head -n "$((n - seen))" >>"$rec"
  seen=$n
}

tcpdump -i lo -s 0 -U -w "$KEEP/capture.pcap" 'tcp port 3888 or tcp port 2888' 2>"$WALK.tcpdump.err" &
tcpdump_pid=$!
pids+=($!)
for _ in $(seq 50); do grep -q "listening on" "$WALK.tcpdump.err" 2>/dev/null && break; sleep 0.1; done

step scripts/ensemble.sh start "$WALK" --servers "1:participant:external,2:participant,3:participant" --tick 200
step scripts/ensemble.sh wait-stable "$WALK"

echo "\$ zkfle join --config $WALK/external-1.cfg --myid 1 --data-dir $WALK/zkfle --events jsonl &" >>"$rec"
zkfle join --config "$WALK/external-1.cfg" --myid 1 --data-dir "$WALK/zkfle" --events jsonl \
  >"$WALK.events" 2>"$KEEP/zkfle.log" &
pids+=($!)
for _ in $(seq 100); do grep -q FOLLOWING "$WALK.events" 2>/dev/null && break; sleep 0.1; done
news "$WALK.events"

step zkfle probe --all 127.0.0.2:3888
step zkfle doctor --config "$WALK/zoo.cfg"
echo "\$ echo srvr | nc 127.0.0.1 2181" >>"$rec"
echo "# (sent with bash's /dev/tcp, which needs no nc: the same four bytes)" >>"$rec"
exec 3<>/dev/tcp/127.0.0.1/2181 && printf srvr >&3 && cat <&3 >>"$rec"; exec 3<&-
step scripts/ensemble.sh cli "$WALK" 2 create /hello world
leader=$(zkfle probe 127.0.0.2:3888 --format json | sed -n 's/.*"leader": *\([0-9]*\).*/\1/p' | head -n1)
step scripts/ensemble.sh stop-node "$WALK" "$leader" --kill
for _ in $(seq 100); do [ "$(grep -c FOLLOWING "$WALK.events")" -ge 2 ] && break; sleep 0.1; done
news "$WALK.events"
step zkfle probe --all --format json 127.0.0.2:3888
step scripts/ensemble.sh cli "$WALK" 2 create /after-the-kill acked-by-zkfle
step ls "$WALK/zkfle/version-2"

# The capture ends here, as the guide's does; what follows breaks server 2 on purpose.
kill "$tcpdump_pid"
wait "$tcpdump_pid" 2>/dev/null || true
echo "# the capture ends; zkfle and server 2 run on" >>"$rec"
step zkfle repro port-out-of-range --destructive --target 127.0.0.2:3888 --format json
step zkfle doctor --config "$WALK/zoo.cfg"
step zkfle doctor --config "$WALK/zoo.cfg" --format json
step scripts/ensemble.sh stop "$WALK"
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()
for n in 1 2 3; do
  [ -f "$WALK/$n/server.log" ] && cp "$WALK/$n/server.log" "$KEEP/server.$n.log"
done

{
  echo "# scripts/docs-record.sh: the walkthrough of docs/guide.md, section 4, run for real"
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(zkfle --version 2>/dev/null || echo zkfle), ZooKeeper $(scripts/zk-env.sh --print 2>/dev/null | sed -n "s/^version: *//p")"
  echo "# the capture and the servers' logs: $KEEP/"
  cat "$rec"
  echo "# zkfle join's log (its stderr, RUST_LOG unset), as $KEEP/zkfle.log keeps it"
  cat "$KEEP/zkfle.log"
} >"$OUT"
rm -f "$rec"
echo "docs-record: wrote $OUT and $KEEP/" >&2

# zkfle's own log lines the docs show, from the tests that make them happen.
[ "${1:-}" = "--no-tests" ] && exit 0
export ZKFLE_DOCS_RECORD=1
cargo test --test lead_java -- --exact zkfle_elected_leads_the_sync_and_hands_over
cargo test --test tls_java -- --exact zkfle_follows_a_tls_ensemble_and_a_foreign_certificate_is_refused
cargo test --test sasl_java -- --exact zkfle_follows_a_sasl_ensemble_and_a_wrong_password_is_refused
