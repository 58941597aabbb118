#!/usr/bin/env bash
# record-zkfle-fixture.sh: keep a run of one of zkfle's reconfiguration tests against real
# Java servers (tests/reconfig_java.rs) as a fixture: zkfle (sid 4) and three Java servers.
#
# Usage:
#   scripts/record-zkfle-fixture.sh NAME SCENARIO   write fixtures/NAME/ (replacing it)
#   scripts/record-zkfle-fixture.sh -h
#
# Scenarios (each a test of tests/reconfig_java.rs, run once with ZKFLE_RECORD_DIR set):
#   added     zkfle joins as a non-voting follower, `reconfig -add` makes it a participant,
#             a Java follower is removed, both Java followers stop, writes commit on
#             zkfle's ACKs, the Java leader restarts and re-elects with zkfle, zkfle restarts
#   observer  zkfle added as an observer, promoted to participant (counted with a Java
#             follower stopped), demoted back to observer
#   removed   zkfle added as a participant, then removes itself: a non-voting follower
#   killed    zkfle killed -9 between a reconfig's PROPOSAL and its COMMITANDACTIVATE, then
#             restarted under the committed config
#
# fixtures/NAME/ gets: capture.pcap (tcpdump -i lo -s 0 of the election and quorum ports of
# 127.0.0.1-4, from before the Java servers start), server.1-3.log (the Java servers' logs
# trimmed as scripts/record-fixture.sh trims them), server.4.log (zkfle's log, whole, at
# RUST_LOG=info: its `Notification:` and `About to leave FLE instance` lines are in Java's
# words), zoo.cfg (the Java servers' shared config: zkfle is not in it, the notifications carry
# the configs that add it) and README.md. Needs root for tcpdump. The Java ZooKeeper is
# the tests' (ZK_JARS, ZK_HOME or Debian's 3.8.0; scripts/zk-env.sh).

set -euo pipefail
trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=scripts/zk-env.sh
. "$HERE/zk-env.sh"

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { zk_die "$@"; }

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
[ $# -eq 2 ] || { usage >&2; exit 2; }
NAME=$1
SCENARIO=$2
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] || die "NAME must be a plain directory name, got '$NAME'"
case "$SCENARIO" in
  added) TEST=zkfle_added_by_reconfig_then_a_java_server_removed_is_needed_for_quorum ;;
  observer) TEST=zkfle_added_as_observer_then_promoted ;;
  removed) TEST=zkfle_removed_from_the_config_stays_a_non_voting_follower ;;
  killed) TEST=zkfle_killed_between_a_reconfig_proposal_and_its_commit ;;
  *) die "unknown scenario '$SCENARIO' (added, observer, removed, killed)" ;;
esac
[ "$(id -u)" = 0 ] || die "tcpdump on lo needs root"
command -v tcpdump >/dev/null 2>&1 || zk_apt_install tcpdump
zk_env_resolve

WORK=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-rec-$NAME.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "recording $SCENARIO ($TEST) into fixtures/$NAME (ZooKeeper $ZK_VERSION)"
(cd "$ROOT" && ZKFLE_RECORD_DIR="$WORK" cargo test -q --test reconfig_java -- --exact "$TEST" --nocapture) \
  >"$WORK/test.out" 2>&1 || { cat "$WORK/test.out" >&2; die "the test failed: nothing recorded"; }
[ -f "$WORK/capture.pcap" ] || die "the test kept no capture (ZKFLE_RECORD_DIR)"
# A fixture is whole: on a busy machine the kernel can drop a packet before tcpdump reads it.
(cd "$ROOT" && cargo run -q --release -- decode "$WORK/capture.pcap") >/dev/null 2>"$WORK/decode.err" ||
  die "the capture does not decode cleanly (a packet lost?): $(cat "$WORK/decode.err"); record again"

OUT="$ROOT/fixtures/$NAME"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$WORK/capture.pcap" "$OUT/capture.pcap"
grep -v '^#' "$WORK/zoo.cfg" >"$OUT/zoo.cfg"
# As scripts/record-fixture.sh: the election, peer and Zab lines of each Java server.
KEEP_RE=':(FastLeaderElection|QuorumCnxManager|QuorumPeer|Leader|Follower|Observer|Learner)(\$[A-Za-z]+)*@[0-9]+\] - '
notif_total=0
for f in "$WORK"/java.*.log "$WORK"/zkfle.*.log; do
  sid=${f##*/}; sid=${sid#*.}; sid=${sid%.log}
  case "$f" in
    */java.*) grep -E "$KEEP_RE" "$f" >"$OUT/server.$sid.log" || true ;;
    *) cp "$f" "$OUT/server.$sid.log" ;;
  esac
  n=$(grep -c 'Notification: my state:' "$OUT/server.$sid.log" || true)
  notif_total=$((notif_total + n))
done
packets=$(tcpdump -r "$OUT/capture.pcap" -nn 2>/dev/null | wc -l)
[ "$packets" -gt 0 ] || die "capture is empty"
size=$(wc -c <"$OUT/capture.pcap")
# The test's own words for what it does: its doc comment.
about=$(awk -v t="fn $TEST()" '/^\/\/\// { doc = doc substr($0, 5) "\n"; next } /^#\[/ { next } index($0, t) { printf "%s", doc; exit } { doc = "" }' "$ROOT/tests/reconfig_java.rs")

{
  echo "# Fixture \`$NAME\`: zkfle reconfigured in a Java ensemble (\`$SCENARIO\`)"
  echo
  echo "Recorded $(date -u +%Y-%m-%dT%H:%MZ) by \`scripts/record-zkfle-fixture.sh $NAME $SCENARIO\`"
  echo "against Java ZooKeeper **$ZK_VERSION** ($ZK_SOURCE, $(basename "$(readlink -f "$ZK_JAR")"),"
  echo "$("$JAVA" -version 2>&1 | head -n1), logging: $ZK_LOG_BACKEND) and zkfle $(git -C "$ROOT" rev-parse --short HEAD) as sid 4."
  if [ "$ZK_SOURCE" = ZK_JARS ] && [ -f "$ZK_JARS/SOURCE" ]; then
    echo "Jars: $(cat "$ZK_JARS/SOURCE") (scripts/zk-fetch.sh $ZK_VERSION)."
  fi
  echo
  echo "## What happened"
  echo
  echo "A run of \`$TEST\` (tests/reconfig_java.rs), with tickTime 200 ms:"
  echo
  printf '%s\n' "$about" | sed 's/^/> /'
  echo
  echo "## Files"
  echo
  echo "- \`capture.pcap\`: \`tcpdump -i lo -s 0 -U --immediate-mode -w\` of 127.0.0.1-4, ports 2888 and 3888"
  echo "  (election and quorum ports), from before the Java servers started; $packets packets, $size bytes."
  echo "- \`server.1.log\` ... \`server.3.log\`: the Java servers' logs, trimmed to FastLeaderElection,"
  echo "  QuorumCnxManager, QuorumPeer and Leader/Follower/Observer/Learner lines."
  echo "- \`server.4.log\`: zkfle's log (\`RUST_LOG=info\`), whole; a restart of zkfle appends to it."
  echo "  Its \`Notification:\`, \`About to leave FLE instance\`, \`LEADER ELECTION TOOK\` and sync lines"
  echo "  are in Java's words. $notif_total \`Notification:\` lines in all four logs."
  echo "- \`zoo.cfg\`: the Java servers' shared config at the start (reconfigEnabled and skipACL were"
  echo "  in each server's own file). zkfle is not in it: the configs that add it travel in the"
  echo "  notifications, and the summary's \`configs\` lists them."
} >"$OUT/README.md"

echo "fixtures/$NAME: $size bytes, $packets packets, $notif_total Notification: lines"
