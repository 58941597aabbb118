#!/usr/bin/env bash
# conformance.sh: zkfle as a voter in Dockerised ZooKeeper ensembles, under faults.
#
# Usage:
#   scripts/docker/conformance.sh [--versions "3.4.14 3.6.3 3.8.0 3.9.5"] [--scenarios "..."]
#                                 [--ci] [--no-upgrade] [--no-build] [--keep]
#
# --ci (what scripts/test.sh runs, to stay within CI's time): every scenario on 3.9.5, `start`
# and the repros that need no member (`repro`'s first part) on the other versions, hostname-join
# on 3.8.0 too (ZKFLE_JOIN_TRIALS joins of each kind: 3 with --ci, else 5), and the
# rolling upgrade (which runs all four versions with zkfle).
#
# For each version: scripts/docker/compose.yml (zoo1 = `zkfle join --wire auto`, sid 1; zoo2-4 =
# Java servers of that version, zkfle's own images from build-images.sh) is started on its
# bridge, and these scenarios run one after the other on that ensemble (each heals its fault):
#   start            all four agree on one leader; a capture of the bridge's election traffic
#                    (tcpdump of 172.28.0.0/24 port 3888) decodes with every sid known and its
#                    summary names that leader;
#                    `zkfle probe --all` agrees with every member's `srvr` (zkfle's too) and the leader's `mntr`;
#                    zkfle answers `ruok`, and its `mntr` has every key a Java follower's has;
#                    its AdminServer's monitor and its Prometheus /metrics read it as a follower,
#                    and (3.5+) its AdminServer's commands have every key a Java follower's do
#   leader-isolated  the leader's container off the bridge (docker network disconnect)
#   split-minority   the leader alone on one side (iptables in each container's netns)
#   split-majority   one Java follower alone; the leader's side (with zkfle) keeps writing
#   paused-leader    docker pause of the leader
#   slow-lossy       tc netem (delay 150ms +-50ms, 10% loss) on the leader's and zkfle's links
#                    (without netem in the kernel: tc tbf 256 kbit/s + 10% loss by iptables)
#   zkfle-cut        zkfle cut off from its leader (both directions), then healed
#   hostname-join    zoo1 joins by hostname, as Java and as zkfle --release VERSION, each right
#                    after the Java servers cached a failed lookup of zoo1: zkfle's join
#                    within 1 s of Java's (the median of the trials' differences), the
#                    same initial messages and answers to a probe, Debian's zkServer.sh
#                    status reads zkfle as a follower
#   rolling-restart  every container restarted, one at a time, zkfle included
#   repro            (last: it breaks servers) every `zkfle repro`, zkfle in a container of its
#                    own on the bridge (in the member's network namespace when it plays one),
#                    against this version's Java containers, as tests/repro_java.rs does with local processes; the
#                    verdicts must equal the local matrix (`zkfle repro --list`'s `measured`)
#                    and the servers' logs must say what each verdict says
# then, unless --no-upgrade, the rolling upgrade 3.4.14 -> 3.6.3 -> 3.8.0 -> 3.9.5, one Java
# container at a time, zkfle voting and following throughout; a capture of it shows zkfle's
# wire form following each peer (40-byte notifications to 3.4.14, the 3.5+ form after); once
# Java 3.8.0 and 3.9.5 followers serve together, zkfle's monitoring (as `start` checks it)
# beside each, and Debian's zkServer.sh status reading zkfle as a follower.
#
# ZKFLE_PROFILE=debug: zkfle's debug build (target/debug/zkfle) on the host and in its image,
# as scripts/test.sh runs it (its tests have built it; a release build takes minutes);
# release by default.
#
# Every scenario checks, within the bound it prints: the Java servers and zkfle agree on one
# leader (probe: one LEADING, the rest FOLLOWING it; srvr, zkfle's included: the same modes; mntr on the leader:
# every follower synced, zkfle included); writes made through a Java client (zkCli.sh in a
# container) before the fault read back from every Java server afterwards.
#
# Prints a table scenario x version (pass / FAIL / skipped: reason) and the repro matrix
# (repro x version, the shape of docs/repro.md's) at the end and exits 1 when anything failed.
# With no Docker engine it says so loudly, marks everything skipped, exits 0.
# Logs, captures and each container's output: ${ZKFLE_CONFORMANCE_DIR:-$TMPDIR/zkfle-conformance}.
# Only the project's own containers and bridge (172.28.0.0/24, or ZKFLE_DOCKER_SUBNET's) get traffic.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

ALL_VERSIONS="3.4.14 3.6.3 3.8.0 3.9.5"
ALL_SCENARIOS="start leader-isolated split-minority split-majority paused-leader slow-lossy zkfle-cut hostname-join rolling-restart repro"
UPGRADE_PATH="3.4.14 3.6.3 3.8.0 3.9.5"
VERSIONS=$ALL_VERSIONS
SCENARIOS=$ALL_SCENARIOS
UPGRADE=true
BUILD=true
KEEP=false
# Versions that get every scenario; the others get `start` and `repro` only (--ci), and
# hostname-join on the releases issue 44's acceptance names.
FULL_VERSIONS=""
JOIN_CI_VERSIONS="3.8.0 3.9.5"
while [ $# -gt 0 ]; do
  case "$1" in
    --versions) VERSIONS=$2; shift 2 ;;
    --ci) FULL_VERSIONS=3.9.5; shift ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --no-upgrade) UPGRADE=false; shift ;;
    --no-build) BUILD=false; shift ;;
    --keep) KEEP=true; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "conformance: unknown argument $1" >&2; exit 2 ;;
  esac
done

# ZKFLE_CONFORMANCE_PROJECT, ZKFLE_DOCKER_SUBNET and ZKFLE_DOCKER_BRIDGE give a second run its
# own containers, /24 and bridge, beside the first (scripts/test.sh runs two side by side).
PROJECT=${ZKFLE_CONFORMANCE_PROJECT:-zkfle-conformance}
SUBNET=${ZKFLE_DOCKER_SUBNET:-172.28.0}
export ZKFLE_DOCKER_SUBNET=$SUBNET
NET=${PROJECT}_zkfle
OUT=${ZKFLE_CONFORMANCE_DIR:-${TMPDIR:-/tmp}/zkfle-conformance}
ZKFLE=${CARGO_TARGET_DIR:-$ROOT/target}/${ZKFLE_PROFILE:-release}/zkfle
ZKFLE_IMAGE=zkfle/zkfle:latest
mkdir -p "$OUT"
declare -A RESULT
# The repro scenario's verdicts (REPRO_VERDICT[row|version]) and its rows, in the order of
# docs/repro.md's matrix.
REPRO_ROWS="port-out-of-range bad-config-server-id ZOOKEEPER-3769 ZOOKEEPER-2164 ZOOKEEPER-4787 ZOOKEEPER-3109 ZOOKEEPER-3109(maxTimeToWaitForEpoch=0) ZOOKEEPER-4685 ZOOKEEPER-2201"
declare -A REPRO_VERDICT
REPRO_MEMBERS="server.1=$SUBNET.11:2888:3888;2181 server.2=$SUBNET.12:2888:3888;2181 server.3=$SUBNET.13:2888:3888;2181"

# The local matrix's verdict for ROW on VERSION. The row with the fix switched on is not in the
# matrix: tests/repro_java.rs asserts 3.4 vulnerable (no such setting), 3.6+ not_vulnerable.
repro_expected() {
  case "$1" in
    *maxTimeToWaitForEpoch*) [[ "$2" == 3.4.* ]] && echo vulnerable || echo not_vulnerable ;;
    *) "$ZKFLE" repro --list --format json | jq -r --arg n "$1" --arg v "$2" 'select(.name == $n) | .measured[$v]' ;;
  esac
}

log() { echo "[$(date +%H:%M:%S)] $*"; }
now_ms() { date +%s%3N; }

# --- the report ---------------------------------------------------------------------------------
report() {
  local s v cols="$VERSIONS" line
  echo
  echo "== conformance in Docker: scenario x version"
  line="| scenario |"
  for v in $cols; do line="$line $v |"; done
  echo "$line"
  line="|---|"
  for v in $cols; do line="$line---|"; done
  echo "$line"
  for s in $SCENARIOS; do
    line="| $s |"
    for v in $cols; do line="$line ${RESULT[$s|$v]:-not run} |"; done
    echo "$line"
  done
  if [[ " $SCENARIOS " == *" repro "* ]]; then
    echo
    echo "== zkfle repro in Docker: repro x version (each verdict; where it differs from the local matrix, the local one in brackets)"
    line="| repro |"
    for v in $cols; do line="$line $v |"; done
    echo "$line"
    line="|---|"
    for v in $cols; do line="$line---|"; done
    echo "$line"
    local r got want
    for r in $REPRO_ROWS; do
      line="| $r |"
      for v in $cols; do
        got=${REPRO_VERDICT[$r|$v]:-}
        if [ -z "$got" ]; then
          got=${RESULT[repro|$v]:-not run}
          [[ "$got" == skipped* ]] || got="not run"
        else
          want=$(repro_expected "$r" "$v")
          [ "$got" = "$want" ] || [[ "$got" == skipped* ]] || got="$got [local: $want]"
        fi
        line="$line $got |"
      done
      echo "$line"
    done
  fi
  if $UPGRADE; then
    echo
    echo "| rolling upgrade ${UPGRADE_PATH// / -> } | ${RESULT[upgrade]:-not run} |"
  fi
}

skip_all() {
  local why=$1 s v
  for s in $SCENARIOS; do for v in $VERSIONS; do RESULT[$s|$v]="skipped: $why"; done; done
  RESULT[upgrade]="skipped: $why"
}

# --- Docker present? ------------------------------------------------------------------------------
COMPOSE=()
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
fi
if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "!! SKIPPED: the Docker conformance scenarios need a Docker engine, and none answers here" >&2
  echo "!!   (docker $(command -v docker >/dev/null && echo 'is installed but `docker info` fails' || echo 'is not installed'))" >&2
  skip_all "no Docker engine"
  report
  exit 0
fi
if [ ${#COMPOSE[@]} = 0 ]; then
  echo "!! SKIPPED: the Docker conformance scenarios need Docker Compose (docker compose or docker-compose)" >&2
  skip_all "no Docker Compose"
  report
  exit 0
fi
for tool in tcpdump jq nsenter iptables tc; do
  if ! command -v $tool >/dev/null 2>&1; then
    case $tool in
      tcpdump | jq) pkg=$tool ;; nsenter) pkg=util-linux ;; iptables) pkg=iptables ;; tc) pkg=iproute2 ;;
    esac
    log "installing $pkg (apt-get) for $tool"
    (. "$ROOT/scripts/zk-env.sh" && zk_apt install -y -qq "$pkg" >/dev/null) ||
      { echo "conformance: $tool is missing and apt-get install $pkg failed" >&2; exit 1; }
  fi
done

if $BUILD; then
  build_start=$SECONDS
  needed=$VERSIONS
  $UPGRADE && needed="$needed $UPGRADE_PATH"
  needed=$(tr ' ' '\n' <<<"$needed" | sort -uV | xargs)
  ZKFLE_DOCKER_VERSIONS=$needed scripts/docker/build-images.sh 2>&1 | tee "$OUT/build.log" ||
    { echo "conformance: building the images failed ($OUT/build.log)" >&2; exit 1; }
  log "images: $((SECONDS - build_start)) s"
fi
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
have_image "$ZKFLE_IMAGE" || { echo "conformance: no $ZKFLE_IMAGE (run scripts/docker/build-images.sh)" >&2; exit 1; }

# --- the ensemble -----------------------------------------------------------------------------------
dc() { ZKFLE_IMAGE=$ZKFLE_IMAGE ZKFLE_RELEASE=${V:-3.9.5} "${COMPOSE[@]}" -p "$PROJECT" -f scripts/docker/compose.yml "$@"; }
# Each service's container and its process (for nsenter), looked up once after every change of
# containers (refresh_ids) rather than at each use: docker calls take seconds on a busy machine.
declare -A CID PID
refresh_ids() {
  local s
  CID=()
  PID=()
  for s in "${ALL[@]}"; do
    CID[$s]=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
      --filter "label=com.docker.compose.service=$s" | head -n1)
    [ -n "${CID[$s]}" ] && PID[$s]=$(docker inspect -f '{{.State.Pid}}' "${CID[$s]}")
  done
}
cid() { echo "${CID[$1]:-}"; }
pid_of() { echo "${PID[$1]:-0}"; }
ip_of() { echo "$SUBNET.1${1#zoo}"; }
JAVA=(zoo2 zoo3 zoo4)
ALL=(zoo1 zoo2 zoo3 zoo4)

teardown() {
  join_rm
  release_address zoo1 zoo3
  dc down -v --remove-orphans >/dev/null 2>&1
  CID=()
  PID=()
}

# Saves every container's output under $OUT/$1/.
save_logs() {
  local dir=$OUT/$1 s
  mkdir -p "$dir"
  for s in "${ALL[@]}"; do
    [ -n "$(cid "$s")" ] && docker logs "$(cid "$s")" >"$dir/$s.log" 2>&1
  done
}

# A four-letter word from the host to a Java server's client port (2181 on the bridge).
fourlw() {
  timeout 3 bash -c 'exec 3<>/dev/tcp/$0/2181 && printf %s "$1" >&3 && cat <&3' "$(ip_of "$1")" "$2" 2>/dev/null
}

# `zkfle probe` of the given servers from a throwaway container on the bridge, as JSON lines.
probe() {
  local args=() s
  for s in "$@"; do args+=("$s:3888"); done
  docker run --rm --network "$NET" --entrypoint zkfle "$ZKFLE_IMAGE" \
    probe --all --format json --timeout 2 "${args[@]}" 2>/dev/null
}

# Do these members agree on one leader, as the election (probe), the Java servers (srvr) and
# the leader's Zab (mntr: every other member synced) tell? Prints the leader's name on success,
# why not on stderr otherwise.
agree_once() {
  local members=("$@") rows leader="" s state l mode synced
  rows=$(probe "${members[@]}")
  for s in "${members[@]}"; do
    state=$(jq -r --arg s "$s:3888" 'select(.server == $s) | .state // "error: \(.error)"' <<<"$rows" | head -n1)
    l=$(jq -r --arg s "$s:3888" 'select(.server == $s) | .leader // empty' <<<"$rows" | head -n1)
    case "$state" in
      LEADING) [ "$l" = "${s#zoo}" ] || { echo "why: $s LEADING but votes for $l"; return 1; } ;;
      FOLLOWING) ;;
      *) echo "why: $s: ${state:-no answer}"; return 1 ;;
    esac
    if [ -z "$leader" ]; then
      leader=$l
    elif [ "$leader" != "$l" ]; then
      echo "why: $s backs $l, another member backs $leader"
      return 1
    fi
  done
  local in=false
  for s in "${members[@]}"; do [ "$s" = "zoo$leader" ] && in=true; done
  $in || { echo "why: all back $leader, which is not among ${members[*]}"; return 1; }
  # zoo1 is zkfle: its client port answers srvr as a Java member's does.
  for s in "${members[@]}"; do
    mode=$(fourlw "$s" srvr | sed -n 's/^Mode: //p')
    if [ "$s" = "zoo$leader" ]; then
      [ "$mode" = leader ] || { echo "why: $s: srvr says '${mode:-no answer}', probe says LEADING"; return 1; }
    else
      [ "$mode" = follower ] || { echo "why: $s: srvr says '${mode:-no answer}', probe says FOLLOWING"; return 1; }
    fi
  done
  synced=$(fourlw "zoo$leader" mntr | sed -n 's/^zk_synced_followers[[:space:]]*//p')
  if [ "${synced:-x}" != "$((${#members[@]} - 1))" ]; then
    echo "why: leader zoo$leader: zk_synced_followers=${synced:-?}, want $((${#members[@]} - 1))"
    return 1
  fi
  echo "zoo$leader"
}

# agree BOUND_S MEMBERS...: waits until they agree; sets AGREED (the leader) and LAST_AGREE_MS;
# fails after BOUND_S with the last reason on stderr.
AGREED=""
LAST_AGREE_MS=0
agree() {
  local bound=$1 start answer
  shift
  start=$(now_ms)
  while :; do
    if answer=$(agree_once "$@"); then
      LAST_AGREE_MS=$(($(now_ms) - start))
      AGREED=$answer
      return 0
    fi
    if [ $(($(now_ms) - start)) -gt $((bound * 1000)) ]; then
      echo "no agreement among $* within ${bound} s: ${answer#why: }" >&2
      return 1
    fi
    sleep 1
  done
}

# The Java client: zkCli.sh in a container on the bridge. The 3.4.14 client cannot connect on
# Java 17 (docs/versions.md), so 3.4.14 ensembles are written and read with a 3.5+ client.
CLIENT_IMAGE=""
pick_client() {
  local v=$1 c
  for c in "$v" 3.9.5 3.8.0 3.6.3; do
    [[ "$c" == 3.4.* ]] && continue
    have_image "zkfle/zookeeper:$c" && { CLIENT_IMAGE=zkfle/zookeeper:$c; return 0; }
  done
  echo "conformance: no 3.5+ ZooKeeper image for the client" >&2
  return 1
}
zkcli() {
  local server=$1
  shift
  timeout 60 docker run --rm --network "$NET" --entrypoint /zookeeper/bin/zkCli.sh "$CLIENT_IMAGE" \
    -server "$server" "$@" 2>&1
}
# write PATH DATA SERVERS...: creates the znode through a client connected to those servers.
# zkCli.sh runs its one command at once and gives up on a connection loss (a server that is
# not serving closes the connection), so a write is tried up to 5 times, 2 s apart; a znode
# found to exist already (the previous try committed) counts as written.
write() {
  local path=$1 data=$2 out conn try
  shift 2
  conn=$(printf '%s:2181,' "$@")
  for try in 1 2 3 4 5; do
    out=$(zkcli "${conn%,}" create "$path" "$data")
    grep -q "^Created $path" <<<"$out" && return 0
    grep -q "Node already exists" <<<"$out" && return 0
    sleep 2
  done
  echo "write $path through $* (5 tries): $out" >&2
  return 1
}
# read_back PATH DATA SERVERS...: reads it from each of those servers alone (up to 3 tries
# each, for the same reason as write).
read_back() {
  local path=$1 data=$2 s out try
  shift 2
  for s in "$@"; do
    for try in 1 2 3; do
      out=$(zkcli "$s:2181" get "$path")
      grep -qx "$data" <<<"$out" && continue 2
      sleep 2
    done
    echo "read $path from $s: want '$data', got: $out" >&2
    return 1
  done
}

# --- faults -------------------------------------------------------------------------------------
netns() {
  local s=$1
  shift
  nsenter -t "$(pid_of "$s")" -n "$@"
}
# cut A B: no packet between containers A and B, both directions (silent drops).
cut() {
  netns "$1" iptables -I INPUT -s "$(ip_of "$2")" -j DROP
  netns "$1" iptables -I OUTPUT -d "$(ip_of "$2")" -j DROP
  netns "$2" iptables -I INPUT -s "$(ip_of "$1")" -j DROP
  netns "$2" iptables -I OUTPUT -d "$(ip_of "$1")" -j DROP
}
heal_cuts() {
  local s
  for s in "${ALL[@]}"; do
    [ -n "$(cid "$s")" ] && netns "$s" iptables -F 2>/dev/null
  done
}
disconnect() { docker network disconnect "$NET" "$(cid "$1")"; }
reconnect() { docker network connect --ip "$(ip_of "$1")" --alias "$1" "$NET" "$(cid "$1")"; }

# The tcpdump a scenario started (its pid), stopped by the scenario or, after a failure, by
# the main loop.
PCAP_PID=""
stop_capture() {
  if [ -n "$PCAP_PID" ]; then
    kill "$PCAP_PID" 2>/dev/null
    wait "$PCAP_PID" 2>/dev/null
    PCAP_PID=""
  fi
}

# --- scenarios ------------------------------------------------------------------------------------
# Each prints what it does; returns 0 on pass. $V is the version, $LEADER the current leader,
# $SEQ a counter for znode names.
SEQ=0
znode() { SEQ=$((SEQ + 1)); echo "/conformance-$1-$SEQ"; }
others_of() {
  local s out=()
  for s in "${JAVA[@]}"; do [ "$s" = "$1" ] || out+=("$s"); done
  echo "${out[@]}"
}

# Writes a znode before the fault (through the whole ensemble); the caller reads it back after.
before_fault() {
  BEFORE_PATH=$(znode "$1")
  BEFORE_DATA="$1-$V-$SEQ"
  write "$BEFORE_PATH" "$BEFORE_DATA" "${JAVA[@]}"
}
after_heal() {
  local bound=$1 t
  agree "$bound" "${ALL[@]}" && LEADER=$AGREED || return 1
  t=$LAST_AGREE_MS
  read_back "$BEFORE_PATH" "$BEFORE_DATA" "${JAVA[@]}" || return 1
  log "  healed: all four agree on $LEADER after ${t} ms (bound ${bound} s); $BEFORE_PATH reads back from every Java server"
}

# After a failed scenario the next one starts from a fresh ensemble, so that one failure
# does not fail the rest.
fresh_ensemble() {
  log "  (the previous scenario failed: a fresh ensemble first)"
  teardown
  ZK_IMAGE=zkfle/zookeeper:$V dc up -d >>"$OUT/$V/up.log" 2>&1 || return 1
  refresh_ids
  agree 120 "${ALL[@]}" && LEADER=$AGREED
}

sc_start() {
  local cap=$OUT/$V/start.pcap summary winner sids
  mkdir -p "$OUT/$V"
  teardown
  tcpdump -i any -s 0 -U -w "$cap" "net $SUBNET.0/24 and tcp port 3888" 2>"$OUT/$V/tcpdump.log" &
  PCAP_PID=$!
  ZK_IMAGE=zkfle/zookeeper:$V dc up -d >"$OUT/$V/up.log" 2>&1 || { cat "$OUT/$V/up.log"; stop_capture; return 1; }
  refresh_ids
  agree 120 "${ALL[@]}" && LEADER=$AGREED || { stop_capture; return 1; }
  log "  all four agree on $LEADER ${LAST_AGREE_MS} ms after docker-compose up (bound 120 s, JVM start-up included)"
  sleep 1
  stop_capture
  # Java's configs name the servers by hostname, which the host cannot resolve: the sids of
  # the containers' addresses come from --sid-map, as docs/docker.md shows.
  local map=() s
  for s in "${ALL[@]}"; do map+=(--sid-map "$(ip_of "$s"):3888=${s#zoo}"); done
  "$ZKFLE" decode --format jsonl "${map[@]}" "$cap" >"$OUT/$V/start.jsonl" ||
    { echo "zkfle decode failed on $cap" >&2; return 1; }
  local n unknown errors
  n=$(jq -c 'select(.type != "error")' "$OUT/$V/start.jsonl" | wc -l)
  unknown=$(jq -c 'select(.type != "error" and (.from_sid == null or .to_sid == null))' "$OUT/$V/start.jsonl" | wc -l)
  errors=$(jq -c 'select(.type == "error" and .severity == "error")' "$OUT/$V/start.jsonl" | wc -l)
  # Senders among the members (the probes of `agree` are in the capture too, as a non-member).
  sids=$(jq -r 'select(.type == "notification" and .from_sid >= 1 and .from_sid <= 4) | .from_sid' "$OUT/$V/start.jsonl" | sort -u | xargs)
  summary=$("$ZKFLE" decode --summary --format jsonl "${map[@]}" "$cap")
  winner=$(jq -r '[.rounds[] | select(.winner != null)] | last | .winner' <<<"$summary")
  log "  capture: $n messages, $unknown with an unknown sid, $errors errors; senders among the members: $sids; summary's last winner: $winner"
  [ "$n" -gt 0 ] && [ "$unknown" = 0 ] && [ "$errors" = 0 ] && [ "$sids" = "1 2 3 4" ] || return 1
  [ "zoo$winner" = "$LEADER" ] || { echo "the capture's summary elects $winner, the ensemble $LEADER" >&2; return 1; }
  # `probe --all` (run by agree) agrees with srvr; writes work.
  before_fault start || return 1
  read_back "$BEFORE_PATH" "$BEFORE_DATA" "${JAVA[@]}" || return 1
  monitoring_as_java
}

# zkfle's four-letter words beside a Java follower's: ruok, and every key of the Java
# follower's mntr in zkfle's (its gauges and metric families, the per-namespace writes of the
# znode just written included), but the reads per namespace: Java's client reads were served
# by Java servers only. zkfle presents as the version (`--release $V`): 3.4's fixed mntr for
# 3.4.14, 3.5+'s metrics otherwise.
# monitoring_as_java [FOLLOWER VERSION]: against that Java follower of that version (in a
# mixed ensemble), else the first Java follower of this scenario's version.
monitoring_as_java() {
  # (`command cut`: `cut` is this script's partition function.)
  local s follower=${1:-} z j missing ruok V=${2:-$V}
  ruok=$(fourlw zoo1 ruok)
  [ "$ruok" = imok ] || { echo "zkfle's ruok: '$ruok'" >&2; return 1; }
  for s in "${JAVA[@]}"; do
    [ -z "$follower" ] || break
    fourlw "$s" srvr | grep -q '^Mode: follower' && { follower=$s; break; }
  done
  [ -n "$follower" ] || { echo "no Java follower answers srvr" >&2; return 1; }
  z=$(fourlw zoo1 mntr | command cut -f1 | sort)
  j=$(fourlw "$follower" mntr | command cut -f1 | grep -v '_read_per_namespace$' | sort)
  missing=$(comm -13 <(echo "$z") <(echo "$j") | xargs)
  if [ -z "$missing" ]; then
    log "  zkfle's ruok: imok; its mntr has every key of $follower's ($(wc -l <<<"$j") keys)"
  else
    echo "zkfle's mntr lacks what Java $V's follower $follower has: $missing" >&2
    return 1
  fi
  # zkfle's AdminServer (Java's default: on, port 8080) and Prometheus endpoint (scripts/docker/
  # zoo.cfg names Java's provider: port 7000). The 3.5+ images carry Debian's Jetty, so the
  # Java follower's AdminServer answers too: every command a monitoring tool reads has its
  # keys in zkfle's answer. The provider's jars cannot be had here, so /metrics is zkfle's
  # alone: a follower, the Java follower's node count, and a page promtool parses.
  local monitor page nodes java_nodes try code same="as $follower's" cmd theirs ours
  if [[ "$V" != 3.4.* ]]; then
    for try in $(seq 30); do
      [ "$(http_get "$follower" 8080 /commands/ruok | jq -r '.command' 2>/dev/null)" = ruok ] && break
      sleep 1
    done
    for cmd in ruok leader server_stats stats is_read_only configuration dirs voting_view \
      zabstate connections watch_summary watches observers monitor; do
      theirs=$(http_get "$follower" 8080 "/commands/$cmd" | jq -r 'keys[]' 2>/dev/null | sort)
      ours=$(http_get zoo1 8080 "/commands/$cmd" | jq -r 'keys[]' 2>/dev/null | sort)
      [ -n "$theirs" ] || { echo "Java $V's follower $follower: no AdminServer answer to /commands/$cmd" >&2; return 1; }
      missing=$(comm -13 <(echo "$ours") <(echo "$theirs") | grep -v '_read_per_namespace$' | xargs)
      [ -z "$missing" ] || { echo "zkfle's /commands/$cmd lacks what Java $V's follower $follower has: $missing" >&2; return 1; }
    done
    log "  zkfle's AdminServer answers 14 commands with every key Java $V's follower $follower gives"
  fi
  monitor=$(http_get zoo1 8080 /commands/monitor)
  [ "$(jq -r '.server_state' <<<"$monitor" 2>/dev/null)" = follower ] ||
    { echo "zkfle's AdminServer /commands/monitor: ${monitor:-no answer}" >&2; return 1; }
  missing=$(comm -13 <(jq -r 'keys[]' <<<"$monitor" | sort) <(sed 's/^zk_//' <<<"$z" | sort) | xargs)
  [ -z "$missing" ] || { echo "zkfle's AdminServer monitor lacks what its mntr has: $missing" >&2; return 1; }
  for try in 1 2 3 4 5; do
    page=$(http_get zoo1 7000 /metrics)
    nodes=$(awk '$1 == "znode_count" {print $2}' <<<"$page")
    java_nodes=$(fourlw "$follower" mntr | awk '$1 == "zk_znode_count" {print $2}')
    [ -n "$nodes" ] && [ "${nodes%.0}" = "$java_nodes" ] && break
    sleep 1
  done
  [ -n "$nodes" ] && [ "${nodes%.0}" = "$java_nodes" ] ||
    { echo "zkfle's /metrics: znode_count ${nodes:-absent}, $follower's mntr ${java_nodes:-?}" >&2; return 1; }
  if command -v promtool >/dev/null 2>&1; then
    code=0
    promtool check metrics <<<"$page" >/dev/null 2>&1 || code=$?
    # 3: it parses, and lints Java's own names (counters without _total ...), which zkfle keeps.
    [ "$code" = 0 ] || [ "$code" = 3 ] || { echo "promtool cannot parse zkfle's /metrics (exit $code)" >&2; return 1; }
    log "  zkfle's AdminServer monitor: follower, every mntr key; its /metrics: znode_count $java_nodes $same, parsed by promtool"
  else
    log "  zkfle's AdminServer monitor: follower, every mntr key; its /metrics: znode_count $java_nodes $same (!! no promtool here: not parsed)"
  fi
}

# http_get SERVICE PORT PATH: the body of an HTTP GET (HTTP/1.0, so the server closes).
http_get() {
  timeout 5 bash -c 'exec 3<>/dev/tcp/$0/$1 &&
    printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$0" >&3 && cat <&3' \
    "$(ip_of "$1")" "$2" "$3" 2>/dev/null | sed '1,/^\r\{0,1\}$/d'
}

sc_leader-isolated() {
  before_fault isolated || return 1
  local old=$LEADER rest
  rest=$(others_of "$old")
  log "  docker network disconnect $old (the leader)"
  disconnect "$old"
  # shellcheck disable=SC2086
  agree 40 zoo1 $rest && LEADER=$AGREED || { reconnect "$old"; return 1; }
  log "  the other three agree on $LEADER after ${LAST_AGREE_MS} ms (bound 40 s)"
  reconnect "$old"
  after_heal 60
}

sc_split-minority() {
  before_fault minority || return 1
  local old=$LEADER rest s
  rest=$(others_of "$old")
  log "  partition: {$old (the leader)} | {zoo1 $rest}"
  for s in zoo1 $rest; do cut "$old" "$s"; done
  # shellcheck disable=SC2086
  agree 40 zoo1 $rest && LEADER=$AGREED || { heal_cuts; return 1; }
  log "  the majority side agrees on $LEADER after ${LAST_AGREE_MS} ms (bound 40 s)"
  heal_cuts
  after_heal 60
}

sc_split-majority() {
  before_fault majority || return 1
  local old=$LEADER lone rest s p
  rest=$(others_of "$old")
  lone=${rest%% *}
  rest=${rest#* }
  log "  partition: {$lone} | {zoo1 $old (the leader) $rest}"
  for s in zoo1 "$old" "$rest"; do cut "$lone" "$s"; done
  sleep 6 # > syncLimit*tickTime: $lone has lost the leader
  # The leader's side is three of four voters, zkfle among them: a write commits only with
  # zkfle's acknowledgement.
  p=$(znode majority-during)
  write "$p" "during-$SEQ" "$old" "$rest" || { heal_cuts; return 1; }
  agree 20 zoo1 "$old" "$rest" && LEADER=$AGREED || { heal_cuts; return 1; }
  [ "$LEADER" = "$old" ] || { echo "the majority side changed leader: $old -> $LEADER" >&2; heal_cuts; return 1; }
  log "  the majority side keeps $old and commits $p (zkfle's ACK needed)"
  heal_cuts
  after_heal 60 || return 1
  [ "$LEADER" = "$old" ] || { echo "after healing, $LEADER leads instead of $old" >&2; return 1; }
  read_back "$p" "during-$SEQ" "$lone"
}

sc_paused-leader() {
  before_fault paused || return 1
  local old=$LEADER rest
  rest=$(others_of "$old")
  log "  docker pause $old (the leader)"
  docker pause "$(cid "$old")" >/dev/null
  # shellcheck disable=SC2086
  agree 40 zoo1 $rest && LEADER=$AGREED || { docker unpause "$(cid "$old")" >/dev/null; return 1; }
  log "  the other three agree on $LEADER after ${LAST_AGREE_MS} ms (bound 40 s)"
  docker unpause "$(cid "$old")" >/dev/null
  after_heal 60
}

# A slow and lossy link on a container: tc netem (delay 150ms +-50ms, 10% loss) where the
# kernel has it; without sch_netem (this project's VM kernel), a token bucket of 256 kbit/s
# (tc tbf: queueing delay under load) and 10% random loss each way (iptables statistic).
impair() {
  if netns "$1" tc qdisc add dev eth0 root netem delay 150ms 50ms loss 10% 2>/dev/null; then
    echo "netem delay 150ms 50ms loss 10%"
    return 0
  fi
  netns "$1" tc qdisc add dev eth0 root tbf rate 256kbit burst 16kb latency 400ms &&
    netns "$1" iptables -I INPUT -m statistic --mode random --probability 0.1 -j DROP &&
    netns "$1" iptables -I OUTPUT -m statistic --mode random --probability 0.1 -j DROP &&
    echo "no netem in this kernel: tbf rate 256kbit + 10% random loss each way (iptables statistic)"
}
unimpair() {
  netns "$1" tc qdisc del dev eth0 root 2>/dev/null
  netns "$1" iptables -F
}

sc_slow-lossy() {
  before_fault slow || return 1
  local old=$LEADER p how
  how=$(impair "$old") && impair zoo1 >/dev/null || { unimpair "$old"; unimpair zoo1; return 1; }
  log "  $how on $old (the leader) and zoo1 (zkfle)"
  p=$(znode slow-during)
  if ! write "$p" "during-$SEQ" "${JAVA[@]}" || ! { agree 60 "${ALL[@]}" && LEADER=$AGREED; }; then
    unimpair "$old"
    unimpair zoo1
    return 1
  fi
  log "  over the slow links: a write commits; all four agree on $LEADER after ${LAST_AGREE_MS} ms (bound 60 s)"
  sleep 10 # the ensemble runs on the impaired links for a while (5 x tickTime)
  agree 60 "${ALL[@]}" && LEADER=$AGREED || { unimpair "$old"; unimpair zoo1; return 1; }
  log "  10 s later: all four agree on $LEADER"
  unimpair "$old"
  unimpair zoo1
  after_heal 30 || return 1
  read_back "$p" "during-$SEQ" "${JAVA[@]}"
}

sc_zkfle-cut() {
  before_fault zkfle-cut || return 1
  local old=$LEADER
  log "  partition: zoo1 (zkfle) | $old (the leader); both still reach the other servers"
  cut zoo1 "$old"
  sleep 8 # > syncLimit*tickTime on both sides: the leader drops zkfle's session, zkfle its leader
  local synced
  synced=$(fourlw "$old" mntr | sed -n 's/^zk_synced_followers[[:space:]]*//p')
  log "  while cut: the leader counts ${synced:-?} synced followers (2 Java, zkfle not)"
  [ "$synced" = 2 ] || { echo "the leader still counts zkfle as synced (zk_synced_followers=$synced)" >&2; heal_cuts; return 1; }
  heal_cuts
  after_heal 60 || return 1
  [ "$LEADER" = "$old" ] || { echo "cutting zkfle off changed the leader: $old -> $LEADER" >&2; return 1; }
}

# hostname-join: zoo1 joins a running ensemble by its hostname, as a Java server of $V and as
# zkfle (`join --release $V`), JOIN_TRIALS times each, alternately, each from an empty data
# directory into a fresh ensemble of zoo2-zoo4 that has never seen zoo1 (Java caches a
# successful lookup for 30 s, so a trial after another would find zoo1's address cached).
# Each join starts right after every Java server failed to look zoo1 up (a dial from sid 1
# announcing zoo1:3888, which each dials back), so each holds the failure Java caches for 10 s
# (networkaddress.cache.negative.ttl), as servers started before a member's container do. The
# time is from `docker run` until zoo1's srvr says follower. Pass: the median of the trials'
# differences (zkfle's join minus the Java join just before it) is at most 1 s (issue 44); in a capture, zoo1's initial messages and its answers to a
# non-member (a probe) are field by field the same for both; Debian's own zkServer.sh (3.8.0's
# image) reads zkfle's status as a follower.
JOIN_TRIALS=${ZKFLE_JOIN_TRIALS:-5}
[ -n "$FULL_VERSIONS" ] && JOIN_TRIALS=${ZKFLE_JOIN_TRIALS:-3}
JOIN_CONTAINER=$PROJECT-zoo1
join_rm() { docker rm -f -v "$JOIN_CONTAINER" >/dev/null 2>&1 || true; }
# Every Java server tries zoo1:3888 now (a V1 initial message from sid 1, in one write, as
# Java reads it): while zoo1 does not exist, each one's lookup fails and is cached.
poison_lookup() {
  local s
  for s in "${JAVA[@]}"; do
    timeout 2 bash -c 'exec 3<>/dev/tcp/$0/3888 &&
      printf "\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x09zoo1:3888" >&3 &&
      sleep 0.2' "$(ip_of "$s")" 2>/dev/null || true
  done
}
# zoo2-zoo4 started afresh (new containers, new volumes), serving without zoo1; returns 11 s
# after they agreed on a leader. Java does not look a name up again while a failure is
# cached (a cache hit does not extend it), so the lookups of zoo1 the servers failed while
# starting, which end with their first election, must have expired for the next failure,
# poison_lookup's, to be cached for its full 10 s: each join then meets the same cache. (Timed
# from the containers' start instead, a JVM that started slowly on a busy machine still held
# its first failure when the poison came, which then did not renew it, and its join was 10 s
# shorter than the next trial's: the 3.9.5 run of 2026-12-07, Java 2.9 s, zkfle 13.4 s.)
fresh_trio() {
  local agreed
  dc rm -sfv "${JAVA[@]}" >/dev/null 2>&1
  ZK_IMAGE=zkfle/zookeeper:$V dc up -d --no-deps "${JAVA[@]}" >>"$OUT/$V/up.log" 2>&1 || return 1
  refresh_ids
  agree 120 "${JAVA[@]}" >/dev/null && LEADER=$AGREED || return 1
  agreed=$(now_ms)
  while [ $(($(now_ms) - agreed)) -lt 11000 ]; do sleep 0.2; done
}
# join_once KIND: starts zoo1 as KIND (java|zkfle); prints the milliseconds until it follows.
join_once() {
  local kind=$1 start mode
  local net=(--name "$JOIN_CONTAINER" --hostname zoo1 --network "$NET" --ip "$(ip_of zoo1)"
    --network-alias zoo1 -e ZOO_MY_ID=1)
  join_rm
  poison_lookup
  start=$(now_ms)
  if [ "$kind" = java ]; then
    docker run -d "${net[@]}" -e ZOO_SERVERS="server.1=zoo1:2888:3888;2181 server.2=zoo2:2888:3888;2181 server.3=zoo3:2888:3888;2181 server.4=zoo4:2888:3888;2181" \
      -e ZOO_STANDALONE_ENABLED=false -e ZOO_ADMINSERVER_ENABLED=false \
      -e ZOO_4LW_COMMANDS_WHITELIST=srvr,mntr,ruok "zkfle/zookeeper:$V" >/dev/null || return 1
  else
    docker run -d "${net[@]}" -e RUST_LOG=warn -v "$ROOT/scripts/docker/zoo.cfg:/conf/zoo.cfg:ro" \
      "$ZKFLE_IMAGE" zkfle join --config /conf/zoo.cfg --data-dir /data --release "$V" >/dev/null || return 1
  fi
  while :; do
    mode=$(timeout 1 bash -c 'exec 3<>/dev/tcp/$0/2181 && printf srvr >&3 && cat <&3' "$(ip_of zoo1)" 2>/dev/null |
      sed -n 's/^Mode: //p')
    [ "$mode" = follower ] && break
    if [ $(($(now_ms) - start)) -gt 60000 ]; then
      echo "zoo1 ($kind) not following within 60 s (srvr Mode: ${mode:-none})" >&2
      docker logs "$JOIN_CONTAINER" >"$OUT/$V/hostname-join-$kind.log" 2>&1
      return 1
    fi
    sleep 0.1
  done
  echo $(($(now_ms) - start))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
sc_hostname-join() {
  local cap=$OUT/$V/hostname-join.pcap t kind ms ok=0 java=() zkfle=() windows=()
  mkdir -p "$OUT/$V"
  log "  zoo1 (zkfle) removed; ${JOIN_TRIALS} joins each as Java $V and as zkfle --release $V, by hostname, each into a fresh zoo2-zoo4 whose lookups of zoo1 failed and are cached"
  dc rm -sfv zoo1 >/dev/null 2>&1
  refresh_ids
  tcpdump -i any -s 0 -U -w "$cap" "net $SUBNET.0/24 and tcp port 3888" 2>"$OUT/$V/tcpdump-join.log" &
  PCAP_PID=$!
  sleep 1
  for t in $(seq "$JOIN_TRIALS"); do
    for kind in java zkfle; do
      join_rm
      fresh_trio || { ok=1; break 2; }
      local from=$(now_ms)
      ms=$(join_once "$kind") || { ok=1; break 2; }
      # A non-member asks zoo1 for its vote; its answer is compared below.
      probe zoo1 >/dev/null
      if [ "$kind" = zkfle ] && [ "$t" = 1 ] && have_image zkfle/zookeeper:3.8.0; then
        local status
        status=$(debian_status "$JOIN_CONTAINER")
        if grep -q "^Mode: follower" <<<"$status"; then
          log "  Debian's zkServer.sh status in zoo1's network namespace: $(grep '^Mode' <<<"$status")"
        else
          echo "Debian's zkServer.sh status on zkfle: $status" >&2
          ok=1
        fi
      fi
      windows+=("$kind $from $(now_ms)")
      if [ "$kind" = java ]; then java+=("$ms"); else zkfle+=("$ms"); fi
      log "    join $t as $kind: follower after $ms ms"
    done
  done
  sleep 1
  stop_capture
  join_rm
  ZK_IMAGE=zkfle/zookeeper:$V dc up -d zoo1 >>"$OUT/$V/up.log" 2>&1 || return 1
  refresh_ids
  agree 120 "${ALL[@]}" && LEADER=$AGREED || return 1
  [ "$ok" = 0 ] || return 1
  local jm zm dm i diffs=()
  jm=$(printf '%s\n' "${java[@]}" | median)
  zm=$(printf '%s\n' "${zkfle[@]}" | median)
  # Each trial's zkfle join against the Java join just before it: how long Java's cached
  # failure still had to run differs from trial to trial by seconds (more so on a busy
  # machine), and a pair shares it.
  for i in "${!java[@]}"; do diffs+=($((zkfle[i] - java[i]))); done
  dm=$(printf '%s\n' "${diffs[@]}" | median)
  log "  median join: Java $V ${jm} ms (${java[*]}), zkfle ${zm} ms (${zkfle[*]}); zkfle - Java, trial by trial: ${diffs[*]} ms, median ${dm} ms (bound: 1000 ms)"
  [ "$dm" -le 1000 ] || { echo "zkfle joins ${dm} ms later than Java (median of the trials' differences)" >&2; ok=1; }
  # The capture: what zoo1 sent as its initial message, and its answers to the probes, by kind.
  local map=() s w jsonl=$OUT/$V/hostname-join.jsonl
  for s in "${ALL[@]}"; do map+=(--sid-map "$(ip_of "$s"):3888=${s#zoo}"); done
  "$ZKFLE" decode --format jsonl "${map[@]}" "$cap" >"$jsonl" || { echo "zkfle decode failed on $cap" >&2; return 1; }
  local -A said
  for w in "${windows[@]}"; do
    read -r kind from to <<<"$w"
    said[$kind]+=$(jq -c --arg ip "$(ip_of zoo1)" --argjson from "$from" --argjson to "$to" '
      select(.time * 1000 >= $from and .time * 1000 <= $to and (.src | startswith($ip + ":")))
      | if .type == "initial" then {initial: {protocol_version, sid, addresses}}
        elif .type == "notification" and .to_sid == 9223372036854775806 then
          {answer: {state, leader, peer_epoch, version, config, size}}
        else empty end' "$jsonl" | sort -u)$'\n'
  done
  local jset zset
  jset=$(sort -u <<<"${said[java]:-}" | sed '/^$/d')
  zset=$(sort -u <<<"${said[zkfle]:-}" | sed '/^$/d')
  log "  zoo1's initial messages and answers to a non-member, as Java $V:"
  sed 's/^/      /' <<<"$jset"
  if [ -z "$jset" ] || [ "$jset" != "$zset" ]; then
    echo "zkfle's differ:" >&2
    sed 's/^/      /' <<<"$zset" >&2
    ok=1
  else
    log "  zkfle's: the same"
  fi
  return $ok
}

sc_rolling-restart() {
  before_fault restart || return 1
  local s p
  for s in zoo1 "${JAVA[@]}"; do
    [ "$s" = "$LEADER" ] && continue
    restart_one "$s" || return 1
  done
  restart_one "$LEADER" || return 1
  after_heal 60
}
restart_one() {
  local s=$1 p
  log "  docker restart $s"
  docker restart -t 10 "$(cid "$s")" >/dev/null || return 1
  refresh_ids
  agree 90 "${ALL[@]}" && LEADER=$AGREED || return 1
  p=$(znode "restart-$s")
  write "$p" "$s" "${JAVA[@]}" || return 1
  log "    all four agree on $LEADER after ${LAST_AGREE_MS} ms (bound 90 s); $p written"
}

# debian_status CONTAINER: Debian's own `zkServer.sh status` (the 3.8.0 image's copy) run in
# CONTAINER's network namespace with its /conf, as an operator on that host runs it.
debian_status() {
  docker run --rm --network "container:$1" --volumes-from "$1" \
    --entrypoint /usr/share/zookeeper/bin/zkServer.sh zkfle/zookeeper:3.8.0 status /conf/zoo.cfg 2>&1
}

# Once the ensemble mixes Java 3.8.0 and 3.9.5 followers (the upgrade's last step, first
# server), zkfle's monitoring beside a Java follower of each: its ruok, mntr, AdminServer and
# /metrics as `start` checks them, and Debian's zkServer.sh status reading it as a follower.
mixed_monitoring() {
  local s f38="" f39="" status
  $MIXED_CHECKED && return 0
  for s in "${JAVA[@]}"; do
    fourlw "$s" srvr | grep -q '^Mode: follower' || continue
    case "${VERSION_OF[$s]}" in
      3.8.0) f38=${f38:-$s} ;;
      3.9.5) f39=${f39:-$s} ;;
    esac
  done
  [ -n "$f38" ] && [ -n "$f39" ] || return 0
  MIXED_CHECKED=true
  # zkfle presents as the release it was started as (3.4.14 here: 3.4's mntr); upgraded as
  # the Java servers are, it is restarted presenting as 3.9.5 (same data volume).
  V=3.9.5 ZK_IMAGE=zkfle/zookeeper:3.9.5 dc up -d --no-deps zoo1 >>"$OUT/upgrade-up.log" 2>&1 ||
    { tail -n 20 "$OUT/upgrade-up.log"; return 1; }
  refresh_ids
  agree 90 "${ALL[@]}" && LEADER=$AGREED || return 1
  log "  zkfle restarted presenting as 3.9.5 (--release): all four agree on $LEADER after ${LAST_AGREE_MS} ms"
  log "  mixed ensemble (Java 3.8.0 follower $f38, 3.9.5 follower $f39, zkfle): its monitoring beside each"
  monitoring_as_java "$f38" 3.8.0 || return 1
  monitoring_as_java "$f39" 3.9.5 || return 1
  if have_image zkfle/zookeeper:3.8.0; then
    status=$(debian_status "$(cid zoo1)")
    grep -q "^Mode: follower" <<<"$status" ||
      { echo "Debian's zkServer.sh status on zkfle in the mixed ensemble: $status" >&2; return 1; }
    log "  Debian's zkServer.sh status in zoo1's network namespace: $(grep '^Mode' <<<"$status")"
  fi
}

run_upgrade() {
  local from=${UPGRADE_PATH%% *} v s p start=$SECONDS order
  V=$from
  pick_client 3.9.5 || return 1
  teardown
  log "rolling upgrade: starting at $from"
  # The election traffic of the whole upgrade, to check that zkfle's wire form follows each
  # peer: 40-byte notifications to a 3.4 server, 44+N bytes (with the config) once it is 3.5+.
  local cap=$OUT/upgrade.pcap
  declare -A LEFT_34
  tcpdump -i any -s 0 -U -w "$cap" "net $SUBNET.0/24 and tcp port 3888" 2>"$OUT/upgrade-tcpdump.log" &
  PCAP_PID=$!
  ZK_IMAGE=zkfle/zookeeper:$from dc up -d >"$OUT/upgrade-up.log" 2>&1 || { cat "$OUT/upgrade-up.log"; stop_capture; return 1; }
  refresh_ids
  agree 120 "${ALL[@]}" && LEADER=$AGREED || return 1
  log "  all four agree on $LEADER (zkfle following $from)"
  declare -gA VERSION_OF=()
  for s in "${JAVA[@]}"; do VERSION_OF[$s]=$from; done
  MIXED_CHECKED=false
  BEFORE_PATH=$(znode upgrade)
  BEFORE_DATA=upgrade-$from
  write "$BEFORE_PATH" "$BEFORE_DATA" "${JAVA[@]}" || return 1
  local prev=$from extra
  for v in ${UPGRADE_PATH#* }; do
    # Followers first, the leader last (as operators do).
    order=()
    for s in "${JAVA[@]}"; do [ "$s" = "$LEADER" ] || order+=("$s"); done
    order+=("$LEADER")
    for s in "${order[@]}"; do
      # A server that synced by DIFF since 3.4 has txn logs and no snapshot (3.4 and a
      # DIFF-synced 3.5+ follower write none until snapCount txns), and 3.5.5+ refuse such a
      # data directory ("No snapshot found, but there are log entries", ZOOKEEPER-3056)
      # unless snapshot.trust.empty=true, the documented setting for upgrades from 3.4: it is
      # given while the data directory holds no snapshot.
      extra=""
      if ! docker exec "$(cid "$s")" sh -c 'ls /data/version-2/snapshot.* >/dev/null 2>&1'; then
        extra=snapshot.trust.empty=true
      fi
      log "  $s ($prev) -> $v (docker-compose up --no-deps: new container, same volumes${extra:+; no snapshot in /data: ZOO_CFG_EXTRA=$extra})"
      # While one Java server is away, the three left include zkfle: this write needs its ACK.
      [[ "$prev" == 3.4.* ]] && LEFT_34[$s]=$(date +%s.%N)
      docker stop -t 10 "$(cid "$s")" >/dev/null
      p=$(znode "upgrade-$v-$s")
      write "$p" "$v-$s" $(others_of "$s") || return 1
      ZOO_CFG_EXTRA=$extra ZK_IMAGE=zkfle/zookeeper:$v dc up -d --no-deps "$s" >>"$OUT/upgrade-up.log" 2>&1 ||
        { tail -n 20 "$OUT/upgrade-up.log"; return 1; }
      refresh_ids
      agree 90 "${ALL[@]}" && LEADER=$AGREED || return 1
      read_back "$p" "$v-$s" "$s" || return 1
      log "    all four agree on $LEADER after ${LAST_AGREE_MS} ms (bound 90 s); $p (written while $s was away) reads back from it"
      VERSION_OF[$s]=$v
      mixed_monitoring || return 1
    done
    prev=$v
  done
  read_back "$BEFORE_PATH" "$BEFORE_DATA" "${JAVA[@]}" || return 1
  log "  upgrade done in $((SECONDS - start)) s; $BEFORE_PATH (written on $from) reads back from every server"
  sleep 1
  stop_capture
  local map=() jl=$OUT/upgrade.jsonl before after
  for s in "${ALL[@]}"; do map+=(--sid-map "$(ip_of "$s"):3888=${s#zoo}"); done
  "$ZKFLE" decode --format jsonl "${map[@]}" "$cap" >"$jl" || { echo "zkfle decode failed on $cap" >&2; return 1; }
  for s in "${JAVA[@]}"; do
    before=$(jq -r --argjson to "${s#zoo}" --argjson t "${LEFT_34[$s]}" \
      'select(.type == "notification" and .from_sid == 1 and .to_sid == $to and .time < $t) | .size' "$jl" | tail -n1)
    after=$(jq -r --argjson to "${s#zoo}" \
      'select(.type == "notification" and .from_sid == 1 and .to_sid == $to) | .size' "$jl" | tail -n1)
    log "  zkfle's last notification to $s: $before bytes while it ran $from, $after bytes at the end (3.9.5)"
    [ "$before" = 40 ] || { echo "zkfle spoke to $s ($from) in ${before:-no} ${before:+byte }notification, not the 40-byte 3.4 form" >&2; return 1; }
    [ "${after:-0}" -gt 44 ] || { echo "zkfle still speaks to $s (3.9.5) in ${after:-no} ${after:+byte }notifications, not the 3.5+ form with the config" >&2; return 1; }
  done
}

# --- repros -----------------------------------------------------------------------------------------
# `zkfle repro` against this version's Java containers, zkfle in a container of its own: the
# same plan as tests/repro_java.rs runs on local processes, so that the two matrices compare.
#  1. Against the running ensemble (destructive, so this scenario comes last): ZOOKEEPER-2164,
#     ZOOKEEPER-4787 and ZOOKEEPER-3769 (as member 3, which 3.4 needs) against zoo2,
#     port-out-of-range against zoo3, bad-config-server-id against zoo4. ZOOKEEPER-2164 runs in
#     zoo2's network namespace (docker run --network container:...): a server that dials 0.0.0.0
#     reaches its own host, which is where zkfle must listen to see it.
#  2. A fresh ensemble of three members by IP address (the member repros bind the address of
#     the member they play, and match configs by IP), tickTime 500, initLimit 10, syncLimit 5 as
#     the local test: zoo2 and zoo3 run, member 1's container is never started; a container
#     holds its address (and zoo3's while zoo3 is stopped) with nothing listening, and zkfle
#     runs in that container's network namespace when it plays that member. zoo2 and zoo3
#     commit a client session's writes, zoo3 stops, zoo2 LOOKs: ZOOKEEPER-4685 and
#     ZOOKEEPER-3109 as member 1; zoo2 again with leader.maxTimeToWaitForEpoch=0:
#     ZOOKEEPER-3109 as member 3; zoo3 back, and against their leader ZOOKEEPER-2201 as
#     member 1 (writes through zoo2's client port).
# Each verdict is compared with the local matrix (`zkfle repro --list --format json`, its
# `measured`), and the servers' own logs (docker logs) must say what the verdict says.

# repro_run ROW NAME TARGET DOCKER-NETWORK-ARGS... -- REPRO-ARGS...: runs the repro from a
# container, records its verdict as REPRO_VERDICT[ROW|$V], prints it with its evidence; fails
# when it differs from the local matrix.
REPRO_DIFF=""
repro_run() {
  local row=$1 name=$2 target=$3 net=() out verdict want
  shift 3
  while [ "$1" != -- ]; do net+=("$1"); shift; done
  shift
  out=$(timeout 180 docker run --rm "${net[@]}" -v "$OUT/$V/repro.cfg:/conf/repro.cfg:ro" \
    --entrypoint zkfle "$ZKFLE_IMAGE" repro "$name" --target "$(ip_of "$target"):3888" \
    --format json --timeout 1.5 "$@" 2>"$OUT/$V/repro-$row.err")
  echo "$out" >"$OUT/$V/repro-$row.json"
  verdict=$(jq -r '.verdict // empty' <<<"$out" 2>/dev/null)
  want=$(repro_expected "$row" "$V")
  REPRO_VERDICT[$row|$V]=${verdict:-error}
  log "  $row against $target: ${verdict:-no verdict} (local: $want)"
  jq -r '.evidence[]? | "      " + .' <<<"$out" 2>/dev/null
  if [ "$verdict" != "$want" ]; then
    [ -n "$verdict" ] || sed 's/^/      stderr: /' "$OUT/$V/repro-$row.err"
    REPRO_DIFF="$REPRO_DIFF $row"
    return 1
  fi
}

# jlog SERVICE [FROM_LINE]: the Java server's log (its console) from that line on.
jlog() { docker logs "$(cid "$1")" 2>&1 | tail -n +"${2:-1}"; }
jlog_lines() { docker logs "$(cid "$1")" 2>&1 | wc -l; }
# logged SERVICE FROM_LINE TEXT: the server logged TEXT (fixed string) since that line.
logged() {
  # (grep reads it all: with -q it would stop early and fail the pipe, under pipefail)
  jlog "$1" "$2" | grep -F -- "$3" >/dev/null && log "    $1 logged: $3" && return 0
  echo "$1 did not log '$3' (docker logs of $1, saved under $OUT/$V/)" >&2
  return 1
}
verdict_is() { [ "${REPRO_VERDICT[$1|$V]:-}" = "$2" ]; }

# wait_state SERVICE BOUND_S REGEX: waits until the server's election port answers a probe
# with a state matching REGEX.
wait_state() {
  local s=$1 bound=$2 want=$3 start state
  start=$SECONDS
  while :; do
    state=$(probe "$s" | jq -r --arg s "$s:3888" 'select(.server == $s) | .state // empty' 2>/dev/null | head -n1)
    [[ "$state" =~ ^($want)$ ]] && return 0
    [ $((SECONDS - start)) -ge "$bound" ] && { echo "$s: ${state:-no answer}, not $want, after ${bound} s" >&2; return 1; }
    sleep 1
  done
}

# hold_address SERVICE: a container on the bridge with that service's address and nothing
# listening, for a member whose server is down (its host up: connections to it are refused at
# once, as to a local process that is not running). Without it the address does not answer
# ARP, and a 3.4 server's election sender, which connects synchronously, waits out its 5 s
# connect time-out for each such member before it sends anything (docs/repro.md).
hold_address() {
  docker run -d --rm --name "$PROJECT-hold-$1" --network "$NET" --ip "$(ip_of "$1")" \
    --entrypoint sleep "$ZKFLE_IMAGE" infinity >/dev/null
}
release_address() {
  local s names=()
  for s in "$@"; do names+=("$PROJECT-hold-$s"); done
  docker rm -f -v "${names[@]}" >/dev/null 2>&1
}

repro_member_dc() {
  ZK_SERVERS=$REPRO_MEMBERS ZK_TICK_TIME=500 ZK_INIT_LIMIT=10 ZK_SYNC_LIMIT=5 \
    ZK_IMAGE=zkfle/zookeeper:$V dc "$@" >>"$OUT/$V/repro-up.log" 2>&1
}

sc_repro() {
  local ok=0 t0 mark member=(--network "container:$PROJECT-hold-zoo1") w
  mkdir -p "$OUT/$V"
  REPRO_DIFF=""
  {
    echo "tickTime=500"
    echo "initLimit=10"
    echo "syncLimit=5"
    echo "clientPort=2181"
    for w in $REPRO_MEMBERS; do echo "${w%%;*}"; done
  } >"$OUT/$V/repro.cfg"

  t0=$SECONDS
  log "  part 1: the running ensemble (zoo1 zkfle join, zoo2-4 Java $V)"
  repro_run ZOOKEEPER-2164 ZOOKEEPER-2164 zoo2 --network "container:$(cid zoo2)" -- || ok=1
  repro_run ZOOKEEPER-4787 ZOOKEEPER-4787 zoo2 --network "$NET" -- || ok=1
  mark=$(jlog_lines zoo2)
  repro_run ZOOKEEPER-3769 ZOOKEEPER-3769 zoo2 --network "$NET" -- --destructive --peer-sid 3 || ok=1
  if verdict_is ZOOKEEPER-3769 vulnerable; then
    logged zoo2 "$mark" 'Exception in thread "WorkerReceiver' || ok=1
  else
    logged zoo2 "$mark" BufferUnderflowException || ok=1
  fi
  repro_run port-out-of-range port-out-of-range zoo3 --network "$NET" -- --destructive || ok=1
  if verdict_is port-out-of-range vulnerable; then logged zoo3 1 "port out of range:70000" || ok=1; fi
  repro_run bad-config-server-id bad-config-server-id zoo4 --network "$NET" -- --destructive || ok=1
  if verdict_is bad-config-server-id vulnerable; then
    logged zoo4 1 'NumberFormatException: For input string: "x"' || ok=1
  fi
  save_logs "$V/repro-part1"
  log "  part 1: $((SECONDS - t0)) s"

  if [ -n "$FULL_VERSIONS" ] && [[ " $FULL_VERSIONS " != *" $V "* ]]; then
    for w in ZOOKEEPER-4685 ZOOKEEPER-3109 "ZOOKEEPER-3109(maxTimeToWaitForEpoch=0)" ZOOKEEPER-2201; do
      REPRO_VERDICT[$w|$V]="skipped: --ci runs the member repros on $FULL_VERSIONS only (time)"
    done
    log "  part 2 (the member repros) skipped: --ci runs it on $FULL_VERSIONS only"
    [ -z "$REPRO_DIFF" ] || echo "differs from the local matrix:$REPRO_DIFF" >&2
    return $ok
  fi
  t0=$SECONDS
  log "  part 2: zoo2 and zoo3 (Java $V) of members 1-3 by IP address; member 1 never started"
  teardown
  repro_member_dc up -d --no-deps zoo2 zoo3 || { tail -n 20 "$OUT/$V/repro-up.log"; return 1; }
  refresh_ids
  hold_address zoo1 || return 1
  wait_state zoo2 120 'LEADING|FOLLOWING' || return 1
  # One client session is three transactions (createSession, create, closeSession): enough
  # for ZOOKEEPER-4685's DIFF to have a PROPOSAL to ACK before NEWLEADER.
  write /zkfle-repro-4685 a zoo2 zoo3 || return 1
  docker stop -t 5 "$(cid zoo3)" >/dev/null
  hold_address zoo3 || return 1
  wait_state zoo2 30 LOOKING || return 1
  log "  zoo2 and zoo3 committed a client session's writes; zoo3 stopped; zoo2 LOOKING"
  mark=$(jlog_lines zoo2)
  repro_run ZOOKEEPER-4685 ZOOKEEPER-4685 zoo2 "${member[@]}" -- --destructive --peer-sid 1 --config /conf/repro.cfg || ok=1
  if verdict_is ZOOKEEPER-4685 vulnerable; then
    logged zoo2 "$mark" "is from a different epoch" && logged zoo2 "$mark" "only synced with sids" || ok=1
  fi
  wait_state zoo2 30 LOOKING || return 1
  mark=$(jlog_lines zoo2)
  repro_run ZOOKEEPER-3109 ZOOKEEPER-3109 zoo2 "${member[@]}" -- --destructive --peer-sid 1 --config /conf/repro.cfg || ok=1
  if verdict_is ZOOKEEPER-3109 vulnerable; then
    logged zoo2 "$mark" "Timeout while waiting for epoch from quorum" || ok=1
  fi
  # zoo2 again, its zoo.cfg with the fix switched on (a new container on the same volumes).
  docker stop -t 5 "$(cid zoo2)" >/dev/null
  ZOO_CFG_EXTRA=leader.maxTimeToWaitForEpoch=0 repro_member_dc up -d --no-deps zoo2 || return 1
  refresh_ids
  wait_state zoo2 120 LOOKING || return 1
  log "  zoo2 restarted with leader.maxTimeToWaitForEpoch=0, LOOKING"
  mark=$(jlog_lines zoo2)
  repro_run "ZOOKEEPER-3109(maxTimeToWaitForEpoch=0)" ZOOKEEPER-3109 zoo2 --network "container:$PROJECT-hold-zoo3" -- \
    --destructive --peer-sid 3 --config /conf/repro.cfg || ok=1
  if verdict_is "ZOOKEEPER-3109(maxTimeToWaitForEpoch=0)" not_vulnerable; then
    logged zoo2 "$mark" "Quit leading due to voter changed mind" || ok=1
  fi
  release_address zoo3
  docker start "$(cid zoo3)" >/dev/null
  refresh_ids
  wait_state zoo2 60 'LEADING|FOLLOWING' || return 1
  log "  zoo3 started again: zoo2 and zoo3 have a leader"
  local marks=() s
  for s in zoo2 zoo3; do marks+=("$(jlog_lines "$s")"); done
  repro_run ZOOKEEPER-2201 ZOOKEEPER-2201 zoo2 "${member[@]}" -- --destructive --peer-sid 1 \
    --config /conf/repro.cfg --client "$SUBNET.12:2181" || ok=1
  if verdict_is ZOOKEEPER-2201 not_vulnerable; then
    # The leader (either) gives up on zkfle's stalled socket and says goodbye.
    { jlog zoo2 "${marks[0]}"; jlog zoo3 "${marks[1]}"; } | grep -F GOODBYE >/dev/null &&
      log "    the leader logged: ******* GOODBYE" || { echo "no leader logged GOODBYE" >&2; ok=1; }
  fi
  save_logs "$V/repro"
  log "  part 2: $((SECONDS - t0)) s"
  [ -z "$REPRO_DIFF" ] || echo "differs from the local matrix:$REPRO_DIFF" >&2
  return $ok
}

# --- main --------------------------------------------------------------------------------------------
trap 'stop_capture; teardown; exit 130' INT TERM
total_start=$SECONDS
FAILED=0
for V in $VERSIONS; do
  if ! have_image "zkfle/zookeeper:$V"; then
    for scen in $SCENARIOS; do RESULT[$scen|$V]="skipped: no image (ZooKeeper $V unavailable, see build log)"; done
    echo "!! SKIPPED: ZooKeeper $V: no image zkfle/zookeeper:$V" >&2
    continue
  fi
  pick_client "$V" || exit 1
  started=false
  last_failed=false
  rm -f "$OUT/$V-"*.out
  for scen in $SCENARIOS; do
    if [ -n "$FULL_VERSIONS" ] && [ "$scen" != start ] && [ "$scen" != repro ] && [[ " $FULL_VERSIONS " != *" $V "* ]] &&
      ! { [ "$scen" = hostname-join ] && [[ " $JOIN_CI_VERSIONS " == *" $V "* ]]; }; then
      if [ "$scen" = hostname-join ]; then
        RESULT[$scen|$V]="skipped: --ci runs it on $JOIN_CI_VERSIONS only (time)"
      else
        RESULT[$scen|$V]="skipped: --ci runs it on $FULL_VERSIONS only (time)"
      fi
      continue
    fi
    if [ "$scen" != start ] && ! $started; then
      RESULT[$scen|$V]="skipped: the ensemble did not start"
      continue
    fi
    log "== $scen, ZooKeeper $V"
    t0=$SECONDS
    if [ "$scen" != start ] && [ "$last_failed" = true ] && ! fresh_ensemble >"$OUT/$V-$scen.out" 2>&1; then
      RESULT[$scen|$V]="FAIL (no fresh ensemble)"
      FAILED=1
    elif "sc_$scen" >>"$OUT/$V-$scen.out" 2>&1; then
      RESULT[$scen|$V]="pass ($((SECONDS - t0)) s)"
      [ "$scen" = start ] && started=true
      last_failed=false
    else
      RESULT[$scen|$V]="FAIL"
      FAILED=1
      last_failed=true
    fi
    stop_capture
    sed 's/^/   /' "$OUT/$V-$scen.out"
    log "   ${RESULT[$scen|$V]}"
    save_logs "$V/$scen"
    heal_cuts 2>/dev/null
  done
  # the start scenario must run first; without it nothing else is set up
  $KEEP || teardown
done

if $UPGRADE; then
  missing=""
  for v in $UPGRADE_PATH; do have_image "zkfle/zookeeper:$v" || missing="$missing $v"; done
  if [ -n "$missing" ]; then
    RESULT[upgrade]="skipped: no image for$missing"
  else
    log "== rolling upgrade ${UPGRADE_PATH// / -> }"
    t0=$SECONDS
    if run_upgrade >"$OUT/upgrade.out" 2>&1; then
      RESULT[upgrade]="pass ($((SECONDS - t0)) s)"
    else
      RESULT[upgrade]="FAIL"
      FAILED=1
    fi
    stop_capture
    sed 's/^/   /' "$OUT/upgrade.out"
    save_logs upgrade
    $KEEP || teardown
  fi
fi

report
echo
echo "(Docker conformance: $((SECONDS - total_start)) s; logs in $OUT)"
exit $FAILED
