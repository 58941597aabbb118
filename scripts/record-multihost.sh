#!/usr/bin/env bash
# record-multihost.sh: record a Java ZooKeeper ensemble as operators capture real ones: one
# host per server, one tcpdump per host.
#
# Usage:
#   scripts/record-multihost.sh NAME [SERVERS]   write fixtures/NAME/ (replacing it); SERVERS 3 (default) or 5
#   scripts/record-multihost.sh -h
#
# Layout: server N runs in its own network namespace `zkfle-mh-N` (ensemble.sh --netns),
# with one interface eth0 at 198.51.100.N/24 (TEST-NET-2, RFC 5737: a documentation range,
# used only inside these namespaces). eth0 is one end of a veth pair; the other end is a port
# of the bridge br0, which lives in a namespace of its own made by `unshare -n` (held open by
# a sleeping process), so that no firewall rule of this machine (Docker's among them) sees
# the traffic. Nothing is routed to or from the machine's own namespaces.
#
# Scenario (SCENARIO, default kill): start every server together, wait until stable, client
# writes through every server, then:
#   kill        kill -9 the leader, wait, writes, restart it, wait, stop
#   stop        stop the leader with SIGTERM (as zkServer.sh stop does), wait, writes,
#               restart it, wait, stop
#   restart     stop the leader with SIGTERM and start it again at once (as
#               zkServer.sh restart does), wait, writes, stop
#   partition   cut the leader off (its bridge port leaves the bridge), wait for a new leader,
#               writes, heal, wait, stop
#   freeze      SIGSTOP the leader (a GC pause, a stopped VM), wait for a new leader, writes,
#               SIGCONT, wait, stop
#   quorumloss  (3 servers) one follower already stopped before the capture (with LATE=1);
#               the leader's only follower stops (SIGTERM), the leader loses its quorum;
#               the follower restarts 5 s later, the two elect a leader; the third restarts
#   probes      zkfle probe and zkfle doctor against the ensemble (from host 1), then the
#               kill scenario
#
# fixtures/NAME/ gets: host.N.pcap (tcpdump -i eth0 -s 0 -U inside namespace N, TCP ports
# 3888 and 2888: election and quorum traffic as that host saw it), server.N.log (each
# server's log trimmed to FastLeaderElection, QuorumCnxManager, QuorumPeer and
# Leader/Learner lines), zoo.cfg and README.md (version, timeline, who led each round).
# The clocks of the captures are all this machine's clock (namespaces share it), so tests
# shift them by known offsets to play unsynchronised hosts. Needs root.
#
# Environment:
#   LATE=1                  start the captures on the running ensemble, after it formed and
#                           took the first writes, as operators capture: no initial message
#                           of the connections open then is in the captures
#   SCENARIO=NAME           what happens (above; default kill)
#   OUT=DIR                 write the fixture to DIR instead of fixtures/NAME
#   NETEM="delay 3ms 1ms"   a netem qdisc on every host's eth0 (tc qdisc ... netem $NETEM):
#                           links with transit time and jitter, as between real hosts, so
#                           that a segment's two copies differ by more than loopback's
#                           microseconds (default: none)
#   NAMES=1                 the servers name each other by host name (zk1..zkN, from
#                           /etc/netns/zkfle-mh-N/hosts, which `ip netns exec` mounts over
#                           /etc/hosts), as Docker and Kubernetes ensembles do: the configs and
#                           initial messages then carry names, the captures IPs
#   ZK_JARS / ZK_HOME       the ZooKeeper to record (scripts/zk-env.sh)

set -euo pipefail
trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=scripts/zk-env.sh
. "$HERE/zk-env.sh"
ENS="$HERE/ensemble.sh"

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { zk_die "$@"; }

case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
NAME=$1
N=${2:-3}
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] || die "NAME must be a plain directory name, got '$NAME'"
[[ "$N" =~ ^(3|5)$ ]] || die "SERVERS must be 3 or 5, got '$N'"
[ "$(id -u)" = 0 ] || die "network namespaces and tcpdump need root"
command -v tcpdump >/dev/null 2>&1 || zk_apt_install tcpdump
command -v ip >/dev/null 2>&1 || zk_apt_install iproute2
zk_env_resolve

NET=198.51.100
PREFIX=zkfle-mh
FILTER="tcp port 3888 or tcp port 2888"
OUT=${OUT:-"$ROOT/fixtures/$NAME"}
SCENARIO=${SCENARIO:-kill}
case "$SCENARIO" in kill|stop|restart|partition|freeze|quorumloss|probes) ;; *) die "SCENARIO must be kill, stop, restart, partition, freeze, quorumloss or probes, got '$SCENARIO'" ;; esac
[ "$SCENARIO" != quorumloss ] || [ "$N" = 3 ] || die "SCENARIO=quorumloss needs 3 servers"
ZKFLE_BIN=${ZKFLE_BIN:-"${CARGO_TARGET_DIR:-$ROOT/target}/release/zkfle"}
if [ "$SCENARIO" = probes ]; then [ -x "$ZKFLE_BIN" ] || die "SCENARIO=probes needs $ZKFLE_BIN (cargo build --release)"; fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-mh-$NAME.XXXXXX")
BRIDGE_PID=""
TCPDUMP_PIDS=()
TIMELINE=""
ROUNDS=""

now() { date -u +%H:%M:%S.%3N; }
event() {
  echo "[$(now)] $*"
  TIMELINE+="| $(now) | $* |"$'\n'
}

cleanup() {
  local rc=$? p i
  if [ -f "$WORK/ens/ensemble.env" ]; then "$ENS" stop "$WORK/ens" >/dev/null 2>&1 || true; fi
  for p in ${TCPDUMP_PIDS[@]+"${TCPDUMP_PIDS[@]}"}; do
    kill -INT "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  for i in $(seq "$N"); do
    ip netns del "$PREFIX-$i" 2>/dev/null || true
    if [ "${NAMES:-0}" = 1 ]; then rm -rf "/etc/netns/$PREFIX-$i"; fi
  done
  if [ -n "$BRIDGE_PID" ]; then kill "$BRIDGE_PID" 2>/dev/null || true; fi
  if [ $rc -ne 0 ] || [ "${KEEP_WORKDIR:-0}" = 1 ]; then
    echo "work directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- network

for i in $(seq "$N"); do
  ip netns pids "$PREFIX-$i" >/dev/null 2>&1 && die "namespace $PREFIX-$i exists (another recording?); 'ip netns del $PREFIX-$i' if not"
done
# The bridge's namespace: made by unshare -n, held by a sleeping process.
unshare -n sleep infinity &
BRIDGE_PID=$!
sleep 0.2
kill -0 "$BRIDGE_PID" || die "unshare -n failed"
br() { nsenter -t "$BRIDGE_PID" -n "$@"; }
br ip link set lo up
br ip link add br0 type bridge
br ip link set br0 up
for i in $(seq "$N"); do
  ip netns add "$PREFIX-$i"
  ip -n "$PREFIX-$i" link set lo up
  ip link add "mh$i-eth0" type veth peer name "mh$i-br"
  ip link set "mh$i-eth0" netns "$PREFIX-$i"
  ip -n "$PREFIX-$i" link set "mh$i-eth0" name eth0
  ip -n "$PREFIX-$i" addr add "$NET.$i/24" dev eth0
  ip -n "$PREFIX-$i" link set eth0 up
  if [ -n "${NETEM:-}" ]; then
    # shellcheck disable=SC2086 # netem's arguments, split as tc takes them
    ip netns exec "$PREFIX-$i" tc qdisc add dev eth0 root netem $NETEM ||
      die "NETEM: tc could not add a netem qdisc (this kernel may lack sch_netem)"
  fi
  ip link set "mh$i-br" netns "$BRIDGE_PID"
  br ip link set "mh$i-br" master br0
  br ip link set "mh$i-br" up
done
event "namespaces $PREFIX-1..$N on bridge br0 (in its own namespace), $NET.1-$N${NETEM:+; netem '$NETEM' on every eth0}"

# ---------------------------------------------------------------- ensemble and captures

opts=(--servers "$(seq -s, "$N" | sed 's/\([0-9]\)/\1:participant/g')")
if [ "${NAMES:-0}" = 1 ]; then
  for i in $(seq "$N"); do
    mkdir -p "/etc/netns/$PREFIX-$i"
    { echo "127.0.0.1 localhost"; for j in $(seq "$N"); do echo "$NET.$j zk$j"; done; } \
      >"/etc/netns/$PREFIX-$i/hosts"
  done
  for i in $(seq "$N"); do opts+=(--host "$i=zk$i" --netns "$i=$PREFIX-$i"); done
  event "servers named zk1..zk$N (/etc/netns/$PREFIX-N/hosts: zkN is $NET.N)"
else
  for i in $(seq "$N"); do opts+=(--host "$i=$NET.$i" --netns "$i=$PREFIX-$i"); done
fi
"$ENS" start "$WORK/ens" --no-start "${opts[@]}" >/dev/null

start_captures() {
  local i
  for i in $(seq "$N"); do
    ip netns exec "$PREFIX-$i" tcpdump -i eth0 -s 0 -U -n -w "$WORK/host.$i.pcap" "$FILTER" 2>"$WORK/tcpdump.$i.err" &
    TCPDUMP_PIDS+=($!)
  done
  for i in $(seq "$N"); do
    for _ in $(seq 50); do
      grep -q "listening on" "$WORK/tcpdump.$i.err" 2>/dev/null && break
      sleep 0.1
    done
    grep -q "listening on" "$WORK/tcpdump.$i.err" || { cat "$WORK/tcpdump.$i.err" >&2; die "tcpdump in $PREFIX-$i did not start"; }
  done
  event "tcpdump started in each namespace: -i eth0 -s 0 '$FILTER'"
}
[ "${LATE:-0}" = 1 ] || start_captures

leader_of() { "$ENS" status "$WORK/ens" | awk '$5 == "LEADING" { print $1 }'; }
wait_stable() {
  local what=$1 l states
  "$ENS" wait-stable "$WORK/ens" --timeout 90 >/dev/null
  l=$(leader_of)
  states=$("$ENS" status "$WORK/ens" | awk 'NR > 1 { printf "%s%s:%s", sep, $1, ($3 == "-" ? "down" : $5); sep = " " }')
  event "stable after $what: leader $l; $states"
  ROUNDS+="| $what | $l | $states |"$'\n'
}
writes() {
  local tag=$1 sid
  for sid in $("$ENS" status "$WORK/ens" | awk 'NR > 1 && $3 != "-" { print $1 }'); do
    ip netns exec "$PREFIX-$sid" bash -c '. "$0/zk-env.sh"; zk_env_resolve; zk_cli "$1" create "$2" "$3"' \
      "$HERE" "$NET.$sid:2181" "/zkfle-$tag-$sid" "written via server $sid" 2>&1 | grep -q "^Created" ||
      echo "warning: write /zkfle-$tag-$sid via server $sid failed" >&2
  done
  event "client writes /zkfle-$tag-N through every running server"
}

pids=()
for i in $(seq "$N"); do
  "$ENS" start-node "$WORK/ens" "$i" >/dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "a server failed to start (see above)"; done
event "started servers 1-$N together"
wait_stable "start"
writes a
old=$(leader_of)
down=""
if [ "$SCENARIO" = quorumloss ]; then
  # The follower down before the capture: the larger one, so the leader keeps the other.
  down=$("$ENS" status "$WORK/ens" | awk -v l="$old" 'NR > 1 && $1 != l { s = $1 } END { print s }')
  "$ENS" stop-node "$WORK/ens" "$down" >/dev/null
  event "stopped follower $down (SIGTERM): leader $old keeps one follower"
  sleep 2
fi
if [ "${LATE:-0}" = 1 ]; then
  start_captures
  sleep 3
fi
# Waits until a server other than $1 leads (the old one may still think it leads).
wait_new_leader() {
  local old=$1 l
  for _ in $(seq 300); do
    l=$("$ENS" status "$WORK/ens" | awk -v o="$old" '$5 == "LEADING" && $1 != o { print $1 }')
    if [ -n "$l" ]; then event "new leader $l"; return 0; fi
    sleep 0.1
  done
  die "no new leader within 30 s"
}
node_pid_of() { cat "$WORK/ens/$1/pid"; }
case "$SCENARIO" in
  kill|probes)
    if [ "$SCENARIO" = probes ]; then
      ip netns exec "$PREFIX-1" "$ZKFLE_BIN" probe "$NET.$old:3888" >"$WORK/probe.out" 2>&1 || true
      event "zkfle probe $NET.$old:3888 from host 1: $(head -n1 "$WORK/probe.out")"
      sleep 1
      ip netns exec "$PREFIX-1" "$ZKFLE_BIN" doctor "$NET.1:3888" >"$WORK/doctor.out" 2>&1 || true
      event "zkfle doctor $NET.1:3888 from host 1 (it probes every member): $(tail -n1 "$WORK/doctor.out")"
      sleep 2
    fi
    "$ENS" stop-node "$WORK/ens" "$old" --kill >/dev/null
    event "kill -9 leader $old"
    sleep 1
    wait_stable "leader $old killed"
    writes b
    "$ENS" start-node "$WORK/ens" "$old" >/dev/null
    event "restarted server $old"
    wait_stable "server $old restarted"
    ;;
  stop)
    "$ENS" stop-node "$WORK/ens" "$old" >/dev/null
    event "stopped leader $old (SIGTERM)"
    sleep 1
    wait_stable "leader $old stopped"
    writes b
    "$ENS" start-node "$WORK/ens" "$old" >/dev/null
    event "restarted server $old"
    wait_stable "server $old restarted"
    ;;
  restart)
    "$ENS" stop-node "$WORK/ens" "$old" >/dev/null
    event "stopped leader $old (SIGTERM)"
    "$ENS" start-node "$WORK/ens" "$old" >/dev/null
    event "restarted server $old"
    sleep 1
    wait_stable "leader $old restarted"
    writes b
    ;;
  partition)
    br ip link set "mh$old-br" nomaster
    event "leader $old cut off (its bridge port left the bridge)"
    wait_new_leader "$old"
    sleep 2
    writes b
    br ip link set "mh$old-br" master br0
    event "leader $old healed"
    sleep 2
    wait_stable "leader $old healed"
    ;;
  freeze)
    kill -STOP "$(node_pid_of "$old")"
    event "leader $old frozen (SIGSTOP)"
    wait_new_leader "$old"
    sleep 2
    writes b
    kill -CONT "$(node_pid_of "$old")"
    event "leader $old resumed (SIGCONT)"
    sleep 2
    wait_stable "leader $old resumed"
    ;;
  quorumloss)
    last=$("$ENS" status "$WORK/ens" | awk -v l="$old" 'NR > 1 && $1 != l && $3 != "-" { print $1 }')
    "$ENS" stop-node "$WORK/ens" "$last" >/dev/null
    event "stopped follower $last (SIGTERM): leader $old is left without a quorum"
    sleep 5
    "$ENS" start-node "$WORK/ens" "$last" >/dev/null
    event "restarted server $last"
    wait_stable "server $last restarted"
    writes b
    "$ENS" start-node "$WORK/ens" "$down" >/dev/null
    event "restarted server $down"
    wait_stable "server $down restarted"
    ;;
esac
sleep 2
"$ENS" stop "$WORK/ens" >/dev/null
event "stopped all servers (SIGTERM)"
sleep 1
for p in "${TCPDUMP_PIDS[@]}"; do kill -INT "$p"; wait "$p" || true; done
TCPDUMP_PIDS=()

# ---------------------------------------------------------------- store

rm -rf "$OUT"
mkdir -p "$OUT"
grep -v '^#' "$WORK/ens/zoo.cfg" >"$OUT/zoo.cfg"
KEEP_RE=':(FastLeaderElection|QuorumCnxManager|QuorumPeer|Leader|Follower|Observer|Learner)(\$[A-Za-z]+)*@[0-9]+\] - '
files=""
for i in $(seq "$N"); do
  cp "$WORK/host.$i.pcap" "$OUT/host.$i.pcap"
  grep -E "$KEEP_RE" "$WORK/ens/$i/server.log" >"$OUT/server.$i.log" || true
  n=$(grep -c '\] - Notification: ' "$OUT/server.$i.log" || true)
  [ "$n" -gt 0 ] || die "server $i logged no 'Notification:' line"
  files+="- \`host.$i.pcap\`: $(tcpdump -r "$OUT/host.$i.pcap" -nn 2>/dev/null | wc -l) packets, $(wc -c <"$OUT/host.$i.pcap") bytes; \`server.$i.log\`: $n \`Notification:\` lines"$'\n'
done
{
  echo "# Fixture \`$NAME\`: $N hosts, one capture each"
  echo
  echo "Recorded $(date -u +%Y-%m-%dT%H:%MZ) by \`${LATE:+LATE=1 }${SCENARIO:+SCENARIO=$SCENARIO }scripts/record-multihost.sh $NAME $N\` against Java"
  echo "ZooKeeper **$ZK_VERSION** ($ZK_SOURCE; $("$JAVA" -version 2>&1 | head -n1))."
  echo
  echo "Server N ran in network namespace \`$PREFIX-N\` at $NET.N (eth0, a veth pair to the bridge"
  echo "br0, which had a namespace of its own made by \`unshare -n\`). Each \`host.N.pcap\` is"
  echo "\`tcpdump -i eth0 -s 0 -U -w\` inside namespace N with filter \`$FILTER\` (election and quorum ports): the"
  echo "election and quorum traffic as that host saw it. A connection between two servers is in"
  echo "both of their captures; \`zkfle decode host.*.pcap\` reports it once. All namespaces share"
  echo "this machine's clock, so the captures agree on time; the tests shift them by known offsets."
  if [ "${NAMES:-0}" = 1 ]; then
    echo "The servers named each other zk1..zk$N (each namespace's /etc/hosts: zkN is $NET.N), as"
    echo "Docker and Kubernetes ensembles do: the configs carried in notifications name them so"
    echo "(3.6 and 3.8 advertise the resolved IPs in their initial messages; 3.4 advertises none), the"
    echo "captures show only IPs. zkfle tells the leader of a quorum connection (and, for 3.4 with"
    echo "\`--config\`, every election acceptor) by the IP each sid dials from."
  fi
  if [ "${LATE:-0}" = 1 ]; then
    echo "The captures began on the running ensemble (LATE=1), after it formed and took the first"
    echo "writes: they hold no initial message of the connections open then, as operators' do."
  fi
  if [ -n "${NETEM:-}" ]; then
    echo "Every eth0 had \`tc qdisc add dev eth0 root netem $NETEM\`: each segment spent that long"
    echo "between its sender's capture and its receiver's."
  fi
  echo
  echo "## Files"
  echo
  printf '%s' "$files"
  echo "- \`zoo.cfg\`: the shared part of every server's config."
  echo
  echo "## Timeline (UTC)"
  echo
  echo "| time | event |"
  echo "|---|---|"
  printf '%s' "$TIMELINE"
  echo
  echo "## Rounds"
  echo
  echo "| after | leader | states |"
  echo "|---|---|---|"
  printf '%s' "$ROUNDS"
} >"$OUT/README.md"
event "fixture written to ${OUT#"$ROOT/"}"
