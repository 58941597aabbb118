#!/usr/bin/env bash
# record-fixture.sh: record a real Java ZooKeeper election on loopback as a fixture.
#
# Usage:
#   scripts/record-fixture.sh [options] NAME SCENARIO   write fixtures/NAME/ (replacing it)
#   scripts/record-fixture.sh -h
#
# Options:
#   --iface lo|any   capture interface (default lo). `any` makes tcpdump write
#                    Linux cooked headers (SLL2 with libpcap >= 1.10, else SLL)
#                    instead of lo's zero-MAC Ethernet
#   --pcapng         convert the capture with `editcap -F pcapng` (wireshark-common,
#                    installed with the tshark package when missing) and keep only
#                    capture.pcapng
#   --election-only  capture the election ports only (how the older fixtures were
#                    recorded); by default the quorum (Zab) ports are captured too
#
# Scenarios (each: start, wait stable, client writes, kill -9 the leader, wait for
# the re-election, writes, restart the old leader, wait stable, stop):
#   basic3       3 participants
#   observer     3 participants + observer sid 4
#   multiaddr    3 participants, --multi-address (initial message version -65535,
#                addresses joined by '|')
#   ipv6         3 participants on [::1] (election ports 3881-3883)
#   staggered5   5 participants started one at a time, STAGGER_SECS (4) apart
#   mixed-34-38  rolling upgrade: servers 1, 2 run 3.4.14, server 3 runs 3.8.0 (Debian)
#   mixed-36-39  rolling upgrade: servers 1, 2 run 3.6.3, server 3 runs 3.9.5
#                (jars from scripts/zk-fetch.sh, which downloads them if not cached)
#   big          5 participants + observer sid 6, --multi-address
#   late3        3 participants; only 1 and 2 start, client writes, then 3 starts
#                late (an empty server: SNAP from the leader), then the usual kill
#                of the leader and its restart (DIFF)
#   lagging3     3 participants; after the usual kill of the first leader and the writes
#                that follow, the new leader is killed too, so the one server left has
#                newer data (epoch, zxid) than the old leader, which is then restarted:
#                the two elect the server with the newer data, not the higher sid; then
#                the killed leader restarts
#   reconfig4    4 participants with reconfigEnabled=true: `reconfig -remove` a follower,
#                then `-add` it back, then `-remove` another follower, which is stopped (a
#                removed server is a non-voting follower until shut down); then the usual
#                kill of the leader, re-elected by the other two, and its restart
#   reconfig-leader4
#                4 participants with reconfigEnabled=true: `reconfig -remove` the leader
#                itself (Java hands over to a designated leader without an election), then
#                the removed server is stopped; then the usual kill of the leader and its
#                restart
#
# fixtures/NAME/ gets: capture.pcap (tcpdump -i IFACE, snaplen 0, election and quorum
# ports), server.N.log (each server's log trimmed to FastLeaderElection,
# QuorumCnxManager, QuorumPeer and Leader/Learner lines), zoo.cfg (the shared
# part of the config) and README.md (version, date, timeline, who led each round,
# checks). CAPTURE_LATE=1 starts the capture on the running ensemble, after it formed and
# took the first writes (no initial message of the connections open then is in it);
# OUT=DIR writes the fixture to DIR instead of fixtures/NAME. Needs root for tcpdump. Honours ZK_HOME / ZK_JARS (see zk-env.sh);
# KEEP_WORKDIR=1 keeps the ensemble directory (full logs) for inspection.

set -euo pipefail
trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=scripts/zk-env.sh
. "$HERE/zk-env.sh"
ENS="$HERE/ensemble.sh"

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { zk_die "$@"; }

IFACE=lo
PCAPNG=0
ELECTION_ONLY=0
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --iface)
      IFACE=${2:-}
      [[ "$IFACE" =~ ^(lo|any)$ ]] || die "--iface takes lo or any, got '$IFACE'"
      shift 2 ;;
    --pcapng) PCAPNG=1; shift ;;
    --election-only) ELECTION_ONLY=1; shift ;;
    -*) die "unknown option '$1' (see -h)" ;;
    *) POS+=("$1"); shift ;;
  esac
done
[ ${#POS[@]} -eq 2 ] || { usage >&2; exit 2; }
NAME=${POS[0]}
SCENARIO=${POS[1]}
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] || die "NAME must be a plain directory name, got '$NAME'"
STAGGER_SECS=${STAGGER_SECS:-4}

ENS_OPTS=()
SIDS="1 2 3"
case "$SCENARIO" in
  basic3) ENS_OPTS=(--servers "1:participant,2:participant,3:participant") ;;
  observer) ENS_OPTS=(--servers "1:participant,2:participant,3:participant,4:observer"); SIDS="1 2 3 4" ;;
  multiaddr) ENS_OPTS=(--multi-address --servers "1:participant,2:participant,3:participant") ;;
  ipv6) ENS_OPTS=(--ipv6 --servers "1:participant,2:participant,3:participant") ;;
  staggered5)
    ENS_OPTS=(--servers "1:participant,2:participant,3:participant,4:participant,5:participant")
    SIDS="1 2 3 4 5" ;;
  big)
    ENS_OPTS=(--multi-address --servers "1:participant,2:participant,3:participant,4:participant,5:participant,6:observer")
    SIDS="1 2 3 4 5 6" ;;
  mixed-34-38) ENS_OPTS=(--servers "1:participant,2:participant,3:participant"); MIXED="3.4.14 3.4.14 3.8.0" ;;
  mixed-36-39) ENS_OPTS=(--servers "1:participant,2:participant,3:participant"); MIXED="3.6.3 3.6.3 3.9.5" ;;
  late3) ENS_OPTS=(--servers "1:participant,2:participant,3:participant"); LATE=3 ;;
  lagging3) ENS_OPTS=(--servers "1:participant,2:participant,3:participant") ;;
  reconfig4|reconfig-leader4) ENS_OPTS=(--servers "1:participant,2:participant,3:participant,4:participant"); SIDS="1 2 3 4" ;;
  *) die "unknown scenario '$SCENARIO' (basic3, observer, multiaddr, ipv6, staggered5, big, mixed-34-38, mixed-36-39, late3, lagging3, reconfig4, reconfig-leader4)" ;;
esac
if [ "$SCENARIO" = ipv6 ]; then
  PCAP_FILTER="tcp portrange 3881-3889"
  [ "$ELECTION_ONLY" = 1 ] || PCAP_FILTER="tcp portrange 3881-3889 or tcp portrange 2881-2889"
else
  PCAP_FILTER="tcp port 3888 or tcp port 3889"
  [ "$ELECTION_ONLY" = 1 ] || PCAP_FILTER="tcp port 3888 or tcp port 3889 or tcp port 2888 or tcp port 2889"
fi
PORTS_TEXT="election and quorum ports"
[ "$ELECTION_ONLY" = 1 ] && PORTS_TEXT="election ports only"


[ "$(id -u)" = 0 ] || die "tcpdump on $IFACE needs root"
command -v tcpdump >/dev/null 2>&1 || zk_apt_install tcpdump
if [ "$PCAPNG" = 1 ] && ! command -v editcap >/dev/null 2>&1; then
  # editcap is in wireshark-common; the tshark package pulls it in without a GUI.
  zk_apt_install tshark
  command -v editcap >/dev/null 2>&1 || die "editcap still missing after installing tshark"
fi
CAPTURE=capture.pcap
OPTS_TEXT=""
[ "$IFACE" = lo ] || OPTS_TEXT+="--iface $IFACE "
[ "$ELECTION_ONLY" = 0 ] || OPTS_TEXT+="--election-only "
if [ "$PCAPNG" = 1 ]; then CAPTURE=capture.pcapng; OPTS_TEXT+="--pcapng "; fi
case "$SCENARIO" in
  observer) OBSERVER=4 ;;
  big) OBSERVER=6 ;;
  *) OBSERVER="" ;;
esac
zk_env_resolve

# Mixed versions: each server runs its own jars (ensemble.sh --jars); the fixture's version is
# the distinct versions joined by '+', e.g. 3.4.14+3.8.0.
LEGACY_ONLY=0
[[ "$ZK_VERSION" =~ ^3\.[0-4]\. ]] && LEGACY_ONLY=1
if [ -n "${MIXED:-}" ]; then
  sid=0
  versions=""
  LEGACY_ONLY=1
  for v in $MIXED; do
    sid=$((sid + 1))
    jars=$("$HERE/zk-fetch.sh" "$v" | tail -n1) || die "ZooKeeper $v unavailable (scripts/zk-fetch.sh $v)"
    ENS_OPTS+=(--jars "$sid=$jars")
    [[ "+$versions+" == *"+$v+"* ]] || versions="${versions:+$versions+}$v"
    [[ "$v" =~ ^3\.[0-4]\. ]] || LEGACY_ONLY=0
  done
  ZK_VERSION=$versions
  ZK_SOURCE="mixed: $(for v in $MIXED; do printf '%s ' "$v"; done | awk '{for (i = 1; i <= NF; i++) printf "%sserver %d %s", (i > 1 ? ", " : ""), i, $i}')"
fi

# Every ensemble uses the fixed loopback layout, so two at once would talk to each other (and
# end up in each other's captures): hold the machine-wide lock that the Java tests take too.
LOCK="${TMPDIR:-/tmp}/zkfle-loopback-ensemble.lock"
exec 9>>"$LOCK"
if ! flock -n 9; then
  echo "waiting for $LOCK (another loopback ensemble is running)" >&2
  flock 9
fi

OUT=${OUT:-"$ROOT/fixtures/$NAME"}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-rec-$NAME.XXXXXX")
TCPDUMP_PID=""
TIMELINE=""
ROUNDS=""
WRITE_FAILS=0

now() { date +%H:%M:%S.%3N; }
event() {
  echo "[$(now)] $*"
  TIMELINE+="| $(now) | $* |"$'\n'
}

cleanup() {
  local rc=$?
  if [ -f "$WORK/ensemble.env" ]; then "$ENS" stop "$WORK" >/dev/null 2>&1 || true; fi
  if [ -n "$TCPDUMP_PID" ] && kill -0 "$TCPDUMP_PID" 2>/dev/null; then
    kill -INT "$TCPDUMP_PID" 2>/dev/null || true
    wait "$TCPDUMP_PID" 2>/dev/null || true
  fi
  if [ $rc -ne 0 ] || [ "${KEEP_WORKDIR:-0}" = 1 ]; then
    echo "ensemble directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

leader_of() { "$ENS" status "$WORK" | awk '$5 == "LEADING" { print $1 }'; }

# The round (electionEpoch) in which LEADER won: the n.round of the last
# notification it received from itself before its last LEADING line.
round_of() {
  local l=$1 log="$WORK/$1/server.log" line
  line=$(grep -nE ':QuorumPeer@[0-9]+\] - LEADING$' "$log" | tail -n 1 | cut -d: -f1)
  # 3.5+: "Notification: my state:LOOKING; n.sid:L, ... n.round:0x1, ..."
  # 3.4:  "Notification: 1 (message format version), ..., 0x1 (n.round), LOOKING (n.state),
  #        L (n.sid), 0x0 (n.peerEpoch) LOOKING (my state)"
  head -n "${line:-0}" "$log" |
    grep -E "Notification: (my state:LOOKING; n\.sid:$l, |.* $l \(n\.sid\), .* LOOKING \(my state\)$)" | tail -n 1 |
    sed -n -e 's/.*n\.round:\(0x[0-9a-f]*\).*/\1/p' -e 's/.* \(0x[0-9a-f]*\) (n\.round).*/\1/p'
}

wait_stable() {
  local what=$1 l r states
  "$ENS" wait-stable "$WORK" --timeout 90 >/dev/null
  l=$(leader_of)
  r=$(round_of "$l")
  states=$("$ENS" status "$WORK" | awk 'NR > 1 { printf "%s%s:%s", sep, $1, ($3 == "-" ? "down" : $5); sep = " " }')
  event "stable after $what: leader $l (round $r); $states"
  ROUNDS+="| $what | $l | $r | $states |"$'\n'
}

writes() {
  local tag=$1 sid addr
  while read -r sid addr; do
    if zk_cli "$addr" create "/zkfle-$tag-$sid" "written via server $sid" 2>&1 | grep -q "^Created"; then
      :
    else
      WRITE_FAILS=$((WRITE_FAILS + 1))
      echo "warning: write /zkfle-$tag-$sid via $addr failed" >&2
    fi
  done < <("$ENS" status "$WORK" | awk 'NR > 1 && $3 != "-" { print $1, $4 }')
  event "client writes /zkfle-$tag-N through every running server"
}

# ---------------------------------------------------------------- record

echo "recording $SCENARIO into fixtures/$NAME (ZooKeeper $ZK_VERSION, work dir $WORK)"
# Configs only: the servers start once tcpdump listens.
"$ENS" start "$WORK" --no-start "${ENS_OPTS[@]}" >/dev/null
if [ "$SCENARIO" = reconfig4 ] || [ "$SCENARIO" = reconfig-leader4 ]; then
  # reconfig needs it enabled, and a superuser or skipACL.
  for f in "$WORK"/zoo.cfg "$WORK"/*/zoo.cfg; do
    printf 'reconfigEnabled=true\nskipACL=yes\n' >>"$f"
  done
fi

start_capture() {
  tcpdump -i "$IFACE" -s 0 -U -n -w "$WORK/capture.pcap" "$PCAP_FILTER" 2>"$WORK/tcpdump.err" &
  TCPDUMP_PID=$!
  for _ in $(seq 50); do
    grep -q "listening on" "$WORK/tcpdump.err" 2>/dev/null && break
    kill -0 "$TCPDUMP_PID" 2>/dev/null || { cat "$WORK/tcpdump.err" >&2; die "tcpdump exited"; }
    sleep 0.1
  done
  event "tcpdump started: -i $IFACE -s 0 '$PCAP_FILTER'"
}
[ "${CAPTURE_LATE:-0}" = 1 ] || start_capture

if [ "$SCENARIO" = staggered5 ]; then
  for sid in $SIDS; do
    "$ENS" start-node "$WORK" "$sid" >/dev/null
    event "started server $sid"
    sleep "$STAGGER_SECS"
  done
else
  pids=()
  for sid in $SIDS; do
    [ "$sid" = "${LATE:-}" ] && continue
    "$ENS" start-node "$WORK" "$sid" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "a server failed to start (see above)"; done
  event "started servers $(for s in $SIDS; do [ "$s" = "${LATE:-}" ] || printf '%s ' "$s"; done)together"
fi
wait_stable "start"
writes a
if [ "${CAPTURE_LATE:-0}" = 1 ]; then
  # As operators capture: on the running ensemble, its connections long open.
  start_capture
  sleep 3
fi
if [ "$SCENARIO" = reconfig4 ]; then
  l=$(leader_of)
  laddr=$("$ENS" status "$WORK" | awk -v l="$l" '$1 == l { print $4 }')
  reconfig_via() {
    local out
    out=$(zk_cli "$laddr" reconfig "$@" 2>&1)
    grep -q "^Committed new configuration" <<<"$out" || die "reconfig $*: $out"
    event "reconfig $* through leader $l: committed"
  }
  # Two followers: the first is removed and added back, the second removed for good.
  read -r back removed _ < <(for s in $SIDS; do [ "$s" = "$l" ] || printf '%s ' "$s"; done; echo)
  reconfig_via -remove "$back"
  sleep 1
  reconfig_via -add "server.$back=127.0.0.$back:2888:3888:participant;127.0.0.$back:2181"
  sleep 1
  reconfig_via -remove "$removed"
  sleep 1
  "$ENS" stop-node "$WORK" "$removed" >/dev/null
  event "stopped the removed server $removed"
  writes r
fi
if [ "$SCENARIO" = reconfig-leader4 ]; then
  l=$(leader_of)
  laddr=$("$ENS" status "$WORK" | awk -v l="$l" '$1 == l { print $4 }')
  out=$(zk_cli "$laddr" reconfig -remove "$l" 2>&1)
  grep -q "^Committed new configuration" <<<"$out" || die "reconfig -remove $l: $out"
  event "reconfig -remove $l (the leader itself) through leader $l: committed"
  sleep 3
  "$ENS" stop-node "$WORK" "$l" >/dev/null
  event "stopped the removed server $l"
  wait_stable "leader $l removed"
  writes r
fi
if [ -n "${LATE:-}" ]; then
  "$ENS" start-node "$WORK" "$LATE" >/dev/null
  event "started server $LATE late (empty data dir)"
  wait_stable "server $LATE started late"
  writes l
fi

old=$(leader_of)
"$ENS" stop-node "$WORK" "$old" --kill >/dev/null
event "kill -9 leader $old"
sleep 1
wait_stable "leader $old killed"
writes b
if [ "$SCENARIO" = lagging3 ]; then
  new=$(leader_of)
  "$ENS" stop-node "$WORK" "$new" --kill >/dev/null
  event "kill -9 leader $new (the server left alone has newer data than server $old)"
  sleep 2
  "$ENS" start-node "$WORK" "$old" >/dev/null
  event "restarted server $old (older data)"
  wait_stable "server $old restarted with older data"
  writes c
  old=$new
fi

"$ENS" start-node "$WORK" "$old" >/dev/null
event "restarted server $old"
wait_stable "server $old restarted"
sleep 2
"$ENS" stop "$WORK" >/dev/null
event "stopped all servers (SIGTERM)"
sleep 1
kill -INT "$TCPDUMP_PID"
wait "$TCPDUMP_PID" || true
TCPDUMP_PID=""

# ---------------------------------------------------------------- store

rm -rf "$OUT"
mkdir -p "$OUT"
if [ "$PCAPNG" = 1 ]; then
  editcap -F pcapng "$WORK/capture.pcap" "$OUT/capture.pcapng"
else
  cp "$WORK/capture.pcap" "$OUT/capture.pcap"
fi
LINKTYPE=$(tcpdump -r "$OUT/$CAPTURE" -c 1 2>&1 >/dev/null | sed -n 's/.*link-type \([^ ]*\).*/\1/p' | head -n 1)
grep -v '^#' "$WORK/zoo.cfg" >"$OUT/zoo.cfg"
KEEP_RE=':(FastLeaderElection|QuorumCnxManager|QuorumPeer|Leader|Follower|Observer|Learner)(\$[A-Za-z]+)*@[0-9]+\] - '
notif_total=0
for sid in $SIDS; do
  grep -E "$KEEP_RE" "$WORK/$sid/server.log" >"$OUT/server.$sid.log" || true
  n=$(grep -cE '\] - Notification: (my state|.*\(my state\)$)' "$OUT/server.$sid.log" || true)
  notif_total=$((notif_total + n))
  [ "$n" -gt 0 ] || die "server $sid logged no 'Notification:' line (logging backend $ZK_LOG_BACKEND)"
done

# Checks on the capture: packets, V1/V2 initial-message prefixes.
hexdump_of() { od -An -tx1 -v "$1" | tr -d ' \n'; }
packets=$(tcpdump -r "$OUT/$CAPTURE" -nn 2>/dev/null | wc -l)
hex=$(hexdump_of "$OUT/$CAPTURE")
v1=$(grep -o ffffffffffff0000 <<<"$hex" | wc -l || true)
v2=$(grep -o ffffffffffff0001 <<<"$hex" | wc -l || true)
unset hex
if [ $LEGACY_ONLY = 1 ]; then
  # 3.4 and older send the legacy initial message: the sid alone, no version, no address.
  [ "$v1" = 0 ] && [ "$v2" = 0 ] || die "a $ZK_VERSION capture has V1/V2 initial messages"
else
  case "$SCENARIO" in
    multiaddr|big) [ "$v2" -gt 0 ] || die "capture has no V2 initial message (ffffffffffff0001)" ;;
    *) [ "$v1" -gt 0 ] || die "capture has no V1 initial message (ffffffffffff0000)" ;;
  esac
fi
[ "$packets" -gt 0 ] || die "capture is empty"
size=$(wc -c <"$OUT/$CAPTURE")

{
  echo "# Fixture \`$NAME\`: scenario \`$SCENARIO\`"
  echo
  echo "Recorded $(date -u +%Y-%m-%dT%H:%MZ) by \`scripts/record-fixture.sh $OPTS_TEXT$NAME $SCENARIO\`"
  if [ -n "${MIXED:-}" ]; then
    echo "against Java ZooKeeper **$ZK_VERSION** ($ZK_SOURCE; jars from scripts/zk-fetch.sh,"
  else
    echo "against Java ZooKeeper **$ZK_VERSION** ($ZK_SOURCE, $(basename "$(readlink -f "$ZK_JAR")"),"
  fi
  echo "$("$JAVA" -version 2>&1 | head -n1), logging: $ZK_LOG_BACKEND)."
  if [ "$ZK_SOURCE" = ZK_JARS ] && [ -f "$ZK_JARS/SOURCE" ]; then
    echo "Jars: $(cat "$ZK_JARS/SOURCE") (scripts/zk-fetch.sh $ZK_VERSION)."
  fi
  if [[ "$ZK_VERSION" =~ (^|\+)3\.[0-4]\. ]]; then
    echo
    echo "ZooKeeper 3.4 sends the legacy initial message (the sid alone) and 40-byte"
    echo "notifications (format version 1, no config), so the capture names no addresses:"
    echo "decode it with \`zkfle decode --config fixtures/$NAME/zoo.cfg\` to resolve every sid."
  fi
  echo
  echo "## Files"
  echo
  echo "- \`$CAPTURE\`: \`tcpdump -i $IFACE -s 0 -U -w\` with filter \`$PCAP_FILTER\`"
  echo "  ($PORTS_TEXT), link type $LINKTYPE$([ "$PCAPNG" = 1 ] && echo ', converted with `editcap -F pcapng` (the pcap is not kept)'),"
  echo "  $packets packets, $size bytes. Times are the tcpdump host's clock, as are the logs'."
  echo "- \`server.N.log\`: each server's log, trimmed to FastLeaderElection, QuorumCnxManager,"
  echo "  QuorumPeer and Leader/Follower/Observer/Learner lines (stack traces dropped)."
  echo "  FastLeaderElection and QuorumCnxManager logged at DEBUG (\`Sending Notification:\`,"
  echo "  \`Initial message parsed\`), the rest at INFO. $notif_total \`Notification:\` lines in all."
  echo "- \`zoo.cfg\`: the shared part of every server's config. Each server N also had"
  echo "  \`dataDir\`, \`clientPort\`, \`clientPortAddress\` (its own address)$([ -n "$OBSERVER" ] && echo ", and sid $OBSERVER had \`peerType=observer\`")."
  case "$SCENARIO" in multiaddr|big) true ;; *) false ;; esac && echo "  The JVMs ran with \`-Dzookeeper.multiAddress.enabled=true\`."
  echo
  echo "## Layout"
  echo
  echo '```'
  "$ENS" status "$WORK" | awk '{ printf "%-4s %-12s %s\n", $1, $2, $4 }'
  echo '```'
  echo
  echo "Election addresses: see \`zoo.cfg\` (\`server.N=host:quorumPort:electionPort:type\`)."
  echo
  echo "## Who led"
  echo
  echo "Round = the leader's election round (logicalclock, \`n.round\` in its own last notification)."
  echo
  echo "| after | leader | round | states |"
  echo "|---|---|---|---|"
  printf '%s' "$ROUNDS"
  echo
  echo "## Timeline"
  echo
  echo "| time | event |"
  echo "|---|---|"
  printf '%s' "$TIMELINE"
  echo
  echo "## Checks"
  echo
  echo "- initial messages with prefix \`ffffffffffff0000\` (V1, -65536): $v1"
  echo "- initial messages with prefix \`ffffffffffff0001\` (V2, -65535): $v2"
  [ $LEGACY_ONLY = 1 ] && echo "- (legacy initial messages carry no marker; $ZK_VERSION sends only those)"
  echo "- \`Notification:\` log lines: $notif_total"
  echo "- failed client writes: $WRITE_FAILS"
} >"$OUT/README.md"

echo "fixtures/$NAME: $CAPTURE ($LINKTYPE) $size bytes, $packets packets, V1 $v1, V2 $v2, $notif_total Notification: lines"
