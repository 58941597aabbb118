#!/usr/bin/env bash
# ensemble.sh: run real Java ZooKeeper ensembles (QuorumPeerMain) on loopback.
#
# Usage:
#   scripts/ensemble.sh start DIR [options]   write configs and start the servers
#   scripts/ensemble.sh stop DIR              stop every server of DIR (TERM, then KILL)
#   scripts/ensemble.sh stop-node DIR N [--kill]   stop server N (--kill: kill -9 at once)
#   scripts/ensemble.sh start-node DIR N      (re)start server N of an existing DIR
#   scripts/ensemble.sh status DIR            pid and last election state of each server
#   scripts/ensemble.sh cli DIR N CMD ARGS...  a ZooKeeper client command against server N,
#                                             e.g. cli DIR 2 create /a hello (zkCli.sh's commands)
#   scripts/ensemble.sh wait-stable DIR [--timeout 60]
#                                             wait until every running server has decided
#                                             and exactly one leads; exit 1 on timeout
#   scripts/ensemble.sh -h                    this text
#
# start options:
#   --servers "1:participant,2:participant,3:participant,4:observer"
#                       the members (default: three participants). A third field
#                       `external` lists a member in the config without starting it
#                       (e.g. a sid reserved for a zkfle node): "1:participant:external"
#   --extra-server "5:participant:127.0.0.5"
#                       one more member at the given host, listed but never started
#                       (repeatable); ports follow the layout below
#   --multi-address     two election addresses per server, with
#                       -Dzookeeper.multiAddress.enabled=true (initial message V2)
#   --ipv6              every server on [::1] (ports differ per server, see below)
#   --tick MS           tickTime (2000)    --init-limit N (10)    --sync-limit N (5)
#   --no-start          write the configs only; start servers later with start-node
#   --host N=ADDR       server N listens on ADDR instead of 127.0.0.N (repeatable)
#   --netns N=NAME      run server N inside network namespace NAME (`ip netns exec`;
#                       repeatable), e.g. one namespace per host for multi-host captures
#   --admin             each server runs Java's AdminServer at its host, port 8080
#                       (admin.serverAddress=127.0.0.N; Debian's Jetty on its classpath,
#                       installed when missing): ipv4 layout only
#   --jars N=DIR        run server N from the jars in DIR (as ZK_JARS would), or from
#                       Debian's package with N=debian: a mixed-version ensemble, e.g.
#                       --jars 1="$(scripts/zk-fetch.sh 3.4.14)" --jars 2=debian (repeatable;
#                       the others use ZK_JARS / ZK_HOME / Debian as usual)
#
# Layout (server N):
#   default          127.0.0.N   quorum 2888  election 3888  client 127.0.0.N:2181
#   --multi-address  as default plus 127.0.1.N quorum 2889 election 3889
#                    server.N=127.0.0.N:2888:3888|127.0.1.N:2889:3889
#   --ipv6           [::1]       quorum 2880+N election 3880+N client [::1]:2180+N
#
# Files: DIR/zoo.cfg (shared part), DIR/N/zoo.cfg (per server: dataDir, client
# address, peerType), DIR/external-N.cfg (an external member's: the shared part and its
# client address, for `zkfle join --config`), DIR/N/data/myid, DIR/N/server.log (ZooKeeper's log, INFO),
# DIR/N/stdout.log (JVM stdout/stderr), DIR/N/pid, DIR/ensemble.env (layout).
# DIR/server.jvmflags, when present: more JVM flags for every server (whitespace-separated,
# as zkServer.sh's SERVER_JVMFLAGS), e.g. -Djava.security.auth.login.config=DIR/jaas.conf.
# The Java ZooKeeper comes from ZK_JARS, ZK_HOME or the Debian package (zk-env.sh).

set -euo pipefail
trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/zk-env.sh
. "$HERE/zk-env.sh"

usage() {
  sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() { zk_die "$@"; }

MAIN_CLASS=org.apache.zookeeper.server.quorum.QuorumPeerMain
# QuorumPeer's run loop logs the bare state name on each transition, e.g.
#   ... [QuorumPeer[myid=3](plain=127.0.0.3:2181)(secure=disabled):QuorumPeer@1549] - LEADING
STATE_RE='(LOOKING|FOLLOWING|LEADING|OBSERVING)$'
STATE_LINE_RE=":QuorumPeer@[0-9]+\\] - $STATE_RE"

# ---------------------------------------------------------------- layout

# Loads DIR/ensemble.env: MODE (ipv4|multi|ipv6) and MEMBERS (lines "sid type started host").
load_env() {
  local dir=$1
  [ -f "$dir/ensemble.env" ] || die "$dir is not an ensemble directory (no ensemble.env); run '$0 start $dir' first"
  # shellcheck disable=SC1091
  . "$dir/ensemble.env"
}

# Host (for server lines and binding) of member SID, given its configured host override.
member_host() {
  local sid=$1 host=${2:--}
  if [ "$host" != - ]; then echo "$host"
  elif [ "$MODE" = ipv6 ]; then echo "::1"
  else echo "127.0.0.$sid"; fi
}

# "quorumPort electionPort clientPort" of member SID.
member_ports() {
  local sid=$1
  if [ "$MODE" = ipv6 ]; then echo "$((2880 + sid)) $((3880 + sid)) $((2180 + sid))"
  else echo "2888 3888 2181"; fi
}

bracket() { if [[ "$1" == *:* ]]; then echo "[$1]"; else echo "$1"; fi; }

server_line() {
  local sid=$1 type=$2 host=$3 q e c h
  read -r q e c <<<"$(member_ports "$sid")"
  h=$(bracket "$(member_host "$sid" "$host")")
  if [ "$MODE" = multi ]; then
    # Each address is host:quorumPort:electionPort[:type]; addresses joined by '|'.
    echo "server.$sid=$h:$q:$e:$type|127.0.1.$sid:$((q + 1)):$((e + 1)):$type"
  else
    echo "server.$sid=$h:$q:$e:$type"
  fi
}

# "host port" pairs a server binds (client, quorum, election), one per line.
member_binds() {
  local sid=$1 host=$2 q e c h
  read -r q e c <<<"$(member_ports "$sid")"
  h=$(member_host "$sid" "$host")
  printf '%s %s\n' "$h" "$c" "$h" "$q" "$h" "$e"
  if [ "$MODE" = multi ]; then printf '%s %s\n' "127.0.1.$sid" $((q + 1)) "127.0.1.$sid" $((e + 1)); fi
}

client_addr() {
  local sid=$1 host=$2 q e c
  read -r q e c <<<"$(member_ports "$sid")"
  echo "$(bracket "$(member_host "$sid" "$host")"):$c"
}

# ---------------------------------------------------------------- processes

node_pid() {
  local dir=$1 sid=$2 pid
  [ -f "$dir/$sid/pid" ] || return 1
  pid=$(cat "$dir/$sid/pid")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # Only a live java started on this very config counts (pids get reused).
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$dir/$sid/zoo.cfg" || return 1
  echo "$pid"
}

# Is HOST:PORT already listened on? (Java binds IPv4 as [::ffff:a.b.c.d] on a
# dual-stack JVM, so that form counts too.)
port_taken() {
  local host=$1 port=$2
  command -v ss >/dev/null 2>&1 || return 1
  ss -Hltn 2>/dev/null | awk '{print $4}' |
    grep -qxF -e "$(bracket "$host"):$port" -e "[::ffff:$host]:$port" \
      -e "0.0.0.0:$port" -e "*:$port" -e "[::]:$port"
}

log_tail() {
  local dir=$1 sid=$2 f
  for f in "$dir/$sid/server.log" "$dir/$sid/stdout.log"; do
    [ -s "$f" ] || continue
    echo "---- tail of $f" >&2
    tail -n 25 "$f" >&2
  done
}

# Last "Peer state changed: ..." phase, e.g. "following - broadcast".
last_phase() {
  local log=$1
  [ -f "$log" ] || { echo -; return; }
  { grep -E ':QuorumPeer@[0-9]+\] - Peer state changed: ' "$log" || true; } | tail -n 1 |
    sed -n 's/.*Peer state changed: //p' | grep . || echo -
}

# Has server SID reached the broadcast phase? 3.6+ log "Peer state changed: ... -
# broadcast"; 3.4 and 3.5 do not, so for them ask the server itself: `srvr` answers
# "Mode: leader|follower|observer" only once it serves (synced with its leader).
synced() {
  local dir=$1 sid=$2 host=$3 log=$1/$2/server.log addr h p reply
  if grep -qE ':QuorumPeer@[0-9]+\] - Peer state changed: ' "$log" 2>/dev/null; then
    [[ "$(last_phase "$log")" == *" - broadcast" ]]
    return
  fi
  addr=$(client_addr "$sid" "$host")
  p=${addr##*:}
  h=${addr%:*}
  h=${h#[}
  h=${h%]}
  # A server in a namespace of its own is asked from inside it (3.4 has no phase lines).
  local ns netns=()
  ns=$(node_netns "$sid")
  [ -z "$ns" ] || netns=(ip netns exec "$ns")
  reply=$(${netns[@]+"${netns[@]}"} timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf srvr >&3; cat <&3' "$h" "$p" 2>/dev/null) || return 1
  [[ "$reply" =~ Mode:\ (leader|follower|observer) ]]
}

last_state() {
  local log=$1
  [ -f "$log" ] || { echo -; return; }
  { grep -E "$STATE_LINE_RE" "$log" || true; } | tail -n 1 | grep -oE "$STATE_RE" || echo -
}

check_ports() {
  local sid=$1 host=$2 h p
  while read -r h p; do
    if port_taken "$h" "$p"; then
      die "server $sid: $(bracket "$h"):$p is already in use (another ensemble? see 'ss -ltnp')"
    fi
  done < <(member_binds "$sid" "$host")
}

# The --jars entry of server SID ("" if none).
node_jars() {
  local sid=$1 line
  for line in ${NODE_JARS:-}; do
    [ "${line%%=*}" = "$sid" ] && { echo "${line#*=}"; return 0; }
  done
  echo ""
}

# The --netns entry of server SID ("" if none).
node_netns() {
  local sid=$1 line
  for line in ${NODE_NETNS:-}; do
    [ "${line%%=*}" = "$sid" ] && { echo "${line#*=}"; return 0; }
  done
  echo ""
}

# Launch server SID in the background; does not wait. A server with its own --jars runs
# from those, resolved afresh in a subshell.
launch_node() {
  local jars
  jars=$(node_jars "$2")
  if [ -z "$jars" ]; then
    _launch_node "$@"
    return
  fi
  (
    unset ZK_CLASSPATH ZK_VERSION ZK_LOG_BACKEND ZK_SOURCE ZK_JAR ZK_HOME
    if [ "$jars" = debian ]; then unset ZK_JARS; else export ZK_JARS=$jars; fi
    zk_env_resolve
    zk_log_config "$1"
    echo "=== server $2: ZooKeeper $ZK_VERSION ($ZK_SOURCE, logging: $ZK_LOG_BACKEND)" >>"$1/$2/stdout.log"
    _launch_node "$@"
  )
}

_launch_node() {
  local dir=$1 sid=$2 host=$3 h p
  if node_pid "$dir" "$sid" >/dev/null; then
    echo "server $sid already running (pid $(node_pid "$dir" "$sid"))"
    return 1
  fi
  local ns netns=()
  ns=$(node_netns "$sid")
  # In its own namespace a server's ports cannot clash with this host's.
  if [ -n "$ns" ]; then netns=(ip netns exec "$ns"); else check_ports "$sid" "$host"; fi
  local extra=()
  if [ "$MODE" = multi ]; then extra+=(-Dzookeeper.multiAddress.enabled=true); fi
  if [ -f "$dir/server.jvmflags" ]; then
    local more=()
    read -r -a more <"$dir/server.jvmflags" || true
    extra+=(${more[@]+"${more[@]}"})
  fi
  zk_server_jvm_flags "$dir/$sid/server.log" "$dir" "${extra[@]}"
  echo "=== $(date -Is) start server $sid" >>"$dir/$sid/stdout.log"
  # Remember where this start's log begins, to wait for its first state line.
  if [ -f "$dir/$sid/server.log" ]; then wc -l <"$dir/$sid/server.log"; else echo 0; fi >"$dir/$sid/.logmark"
  # setsid: the server must outlive this script and not get its signals.
  # --admin: Jetty and the rest the AdminServer needs.
  local cp=$ZK_CLASSPATH
  if [ -f "$dir/server.classpath" ]; then cp="$cp:$(cat "$dir/server.classpath")"; fi
  setsid ${netns[@]+"${netns[@]}"} "$JAVA" "${ZK_JVM_FLAGS[@]}" -cp "$cp" "$MAIN_CLASS" "$dir/$sid/zoo.cfg" \
    >>"$dir/$sid/stdout.log" 2>&1 </dev/null &
  echo $! >"$dir/$sid/pid"
}

# Wait until each launched server logged its first election state, or fail loudly.
await_started() {
  local dir=$1 deadline sid pending mark
  shift
  deadline=$((SECONDS + 30))
  pending=("$@")
  while [ ${#pending[@]} -gt 0 ]; do
    local still=()
    for sid in "${pending[@]}"; do
      # kill -0 rather than node_pid: just after the fork, before exec, the
      # child's cmdline is still this script's.
      if ! kill -0 "$(cat "$dir/$sid/pid")" 2>/dev/null; then
        log_tail "$dir" "$sid"
        die "server $sid exited during start-up (logs above)"
      fi
      mark=$(cat "$dir/$sid/.logmark" 2>/dev/null || echo 0)
      # awk reads the log itself: `tail | grep -q` fails under pipefail once the log outgrows
      # a pipe's buffer (grep -q exits at its match and tail dies of SIGPIPE), and a server
      # that logs DEBUG that fast was then reported as never started.
      if awk -v mark="$mark" -v re="QuorumPeer.* - $STATE_RE" 'NR > mark && $0 ~ re { found = 1; exit } END { exit !found }' "$dir/$sid/server.log" 2>/dev/null; then
        echo "server $sid up (pid $(cat "$dir/$sid/pid"))"
      else
        still+=("$sid")
      fi
    done
    pending=(${still[@]+"${still[@]}"})
    [ ${#pending[@]} -eq 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      for sid in "${pending[@]}"; do log_tail "$dir" "$sid"; done
      die "server(s) ${pending[*]} logged no election state within 30 s (logs above)"
    fi
    sleep 0.5
  done
}

stop_node() {
  local dir=$1 sid=$2 kill9=$3 pid i
  if ! pid=$(node_pid "$dir" "$sid"); then
    rm -f "$dir/$sid/pid"
    return 0
  fi
  if [ "$kill9" = 1 ]; then
    kill -9 "$pid" 2>/dev/null || true
  else
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "server $sid (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "server $sid (pid $pid) did not die"
  echo "=== $(date -Is) server $sid stopped$([ "$kill9" = 1 ] && echo ' (kill -9)')" >>"$dir/$sid/stdout.log"
  rm -f "$dir/$sid/pid"
  echo "server $sid stopped (pid $pid$([ "$kill9" = 1 ] && echo ', kill -9'))"
}

# ---------------------------------------------------------------- commands

cmd_start() {
  local dir=$1
  shift
  local servers="1:participant,2:participant,3:participant" mode=ipv4 tick=2000 init=10 sync=5 nostart=0 admin=0
  local extras=() node_jars="" node_netns="" hosts=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --servers) servers=${2:?--servers needs a value}; shift 2 ;;
      --extra-server) extras+=("${2:?--extra-server needs a value}"); shift 2 ;;
      --multi-address) [ "$mode" = ipv6 ] && die "--multi-address and --ipv6 do not mix"; mode=multi; shift ;;
      --ipv6) [ "$mode" = multi ] && die "--multi-address and --ipv6 do not mix"; mode=ipv6; shift ;;
      --tick) tick=${2:?}; shift 2 ;;
      --init-limit) init=${2:?}; shift 2 ;;
      --sync-limit) sync=${2:?}; shift 2 ;;
      --no-start) nostart=1; shift ;;
      --admin) admin=1; shift ;;
      --host)
        [[ "${2:-}" =~ ^[0-9]+=[^[:space:]]+$ ]] || die "--host needs N=ADDR"
        hosts+="${hosts:+ }$2"; shift 2 ;;
      --netns)
        [[ "${2:-}" =~ ^[0-9]+=[A-Za-z0-9._-]+$ ]] || die "--netns needs N=NAME"
        node_netns+="${node_netns:+ }$2"; shift 2 ;;
      --jars)
        [[ "${2:-}" =~ ^[0-9]+=.+$ ]] || die "--jars needs N=DIR (or N=debian)"
        [ "${2#*=}" = debian ] || [ -d "${2#*=}" ] || die "--jars $2: not a directory"
        node_jars+="${node_jars:+ }$2"; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) die "start: unknown option '$1' (see -h)" ;;
    esac
  done
  for v in "$tick" "$init" "$sync"; do [[ "$v" =~ ^[0-9]+$ ]] || die "not a number: $v"; done

  # Parse members into lines "sid type started host".
  local members="" spec sid type flag host seen=" "
  local IFS_old=$IFS
  IFS=, read -r -a specs <<<"$servers"
  IFS=$IFS_old
  for spec in "${specs[@]}"; do
    IFS=: read -r sid type flag <<<"$spec"
    [[ "$sid" =~ ^[0-9]+$ ]] && [ "$sid" -ge 1 ] && [ "$sid" -le 255 ] || die "bad sid in '$spec' (1..255)"
    [[ "$type" =~ ^(participant|observer)$ ]] || die "bad type in '$spec' (participant|observer)"
    case "${flag:-}" in
      "") flag=1 ;;
      external) flag=0 ;;
      *) die "bad flag in '$spec' (only 'external')" ;;
    esac
    [[ "$seen" == *" $sid "* ]] && die "sid $sid listed twice"
    seen+="$sid "
    host=-
    for h in $hosts; do [ "${h%%=*}" = "$sid" ] && host=${h#*=}; done
    members+="$sid $type $flag $host"$'\n'
  done
  for spec in ${extras[@]+"${extras[@]}"}; do
    sid=${spec%%:*}; type=${spec#*:}; host=${type#*:}; type=${type%%:*}
    [[ "$sid" =~ ^[0-9]+$ ]] && [ "$sid" -ge 1 ] && [ "$sid" -le 255 ] || die "bad sid in --extra-server '$spec'"
    [[ "$type" =~ ^(participant|observer)$ ]] || die "bad type in --extra-server '$spec'"
    [ -n "$host" ] && [ "$host" != "$spec" ] || die "--extra-server '$spec': expected SID:TYPE:HOST"
    [[ "$seen" == *" $sid "* ]] && die "sid $sid listed twice"
    seen+="$sid "
    members+="$sid $type 0 $host"$'\n'
  done
  [ "$mode" = ipv6 ] && [[ "$seen" =~ \ ([0-9]{2,})\  ]] &&
    zk_warn "--ipv6 ports are 2880+N/3880+N/2180+N: sids >= 10 leave the 3881-3889 election range"

  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  MODE=$mode
  zk_env_resolve

  # The shared part of the configuration.
  local common
  common=$(
    echo "# generated by zkfle scripts/ensemble.sh ($mode layout, ZooKeeper $ZK_VERSION)"
    echo "tickTime=$tick"
    echo "initLimit=$init"
    echo "syncLimit=$sync"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr"
    while read -r sid type flag host; do
      [ -n "$sid" ] || continue
      server_line "$sid" "$type" "$host"
    done <<<"$members"
  )
  local newenv
  newenv=$(printf 'MODE=%q\nMEMBERS=%q\nNODE_JARS=%q\nNODE_NETNS=%q\n' "$mode" "$members" "$node_jars" "$node_netns")
  NODE_JARS=$node_jars
  NODE_NETNS=$node_netns

  # Idempotent: a running ensemble with the same layout just gets its missing
  # servers started; a different layout must be stopped first.
  local running=()
  if [ -f "$dir/ensemble.env" ]; then
    while read -r sid type flag host; do
      [ -n "$sid" ] || continue
      if node_pid "$dir" "$sid" >/dev/null; then running+=("$sid"); fi
    done < <(MEMBERS=""; . "$dir/ensemble.env"; echo "$MEMBERS")
    if [ ${#running[@]} -gt 0 ] && { [ "$newenv" != "$(cat "$dir/ensemble.env")" ] ||
      [ "$common" != "$(cat "$dir/zoo.cfg" 2>/dev/null)" ]; }; then
      die "servers ${running[*]} of $dir are running with another layout; '$0 stop $dir' first"
    fi
  fi
  echo "$newenv" >"$dir/ensemble.env"
  echo "$common" >"$dir/zoo.cfg"
  if [ $admin = 1 ]; then
    [ "$mode" = ipv4 ] || die "--admin: the ipv4 layout only"
    zk_admin_classpath >"$dir/server.classpath"
  else
    rm -f "$dir/server.classpath"
  fi
  zk_log_config "$dir"

  local q e c
  while read -r sid type flag host; do
    [ -n "$sid" ] || continue
    read -r q e c <<<"$(member_ports "$sid")"
    if [ "$flag" != 1 ]; then
      # An external member (zkfle) gets a config of its own too, with its client address.
      {
        echo "$common"
        echo "# server $sid (external: not run by this script)"
        echo "clientPort=$c"
        echo "clientPortAddress=$(member_host "$sid" "$host")"
        if [ "$type" = observer ]; then echo "peerType=observer"; fi
        if [ $admin = 1 ]; then
          echo "admin.enableServer=true"
          echo "admin.serverAddress=$(member_host "$sid" "$host")"
          echo "admin.serverPort=8080"
        fi
      } >"$dir/external-$sid.cfg"
      continue
    fi
    mkdir -p "$dir/$sid/data"
    echo "$sid" >"$dir/$sid/data/myid"
    {
      echo "$common"
      echo "# server $sid"
      echo "dataDir=$dir/$sid/data"
      echo "clientPort=$c"
      echo "clientPortAddress=$(member_host "$sid" "$host")"
      if [ "$type" = observer ]; then echo "peerType=observer"; fi
      if [ $admin = 1 ]; then
        echo "admin.enableServer=true"
        echo "admin.serverAddress=$(member_host "$sid" "$host")"
        echo "admin.serverPort=8080"
      fi
    } >"$dir/$sid/zoo.cfg"
  done <<<"$members"

  echo "ZooKeeper $ZK_VERSION ($ZK_SOURCE, logging: $ZK_LOG_BACKEND), $mode layout, in $dir"
  if [ $nostart = 1 ]; then
    echo "configs written; start servers with: $0 start-node $dir N"
    return 0
  fi
  # Check every port first, so a clash starts nothing.
  while read -r sid type flag host; do
    [ -n "$sid" ] && [ "$flag" = 1 ] || continue
    node_pid "$dir" "$sid" >/dev/null || [ -n "$(node_netns "$sid")" ] || check_ports "$sid" "$host"
  done <<<"$members"
  local started=()
  while read -r sid type flag host; do
    [ -n "$sid" ] || continue
    if [ "$flag" = 1 ]; then
      if node_pid "$dir" "$sid" >/dev/null; then
        echo "server $sid already running (pid $(node_pid "$dir" "$sid"))"
        continue
      fi
      launch_node "$dir" "$sid" "$host"
      started+=("$sid")
    else
      echo "server $sid ($type, $(client_addr "$sid" "$host")) listed, not started (external)"
    fi
  done <<<"$members"
  [ ${#started[@]} -gt 0 ] && await_started "$dir" "${started[@]}"
  return 0
}

member_of() {
  local sid=$1 s type flag host
  while read -r s type flag host; do
    [ "$s" = "$sid" ] && { echo "$type $flag $host"; return 0; }
  done <<<"$MEMBERS"
  return 1
}

cmd_start_node() {
  local dir=$1 sid=$2 info type flag host
  load_env "$dir"
  info=$(member_of "$sid") || die "server $sid is not a member of $dir"
  read -r type flag host <<<"$info"
  [ -f "$dir/$sid/zoo.cfg" ] || die "server $sid is external (listed, not run by this script)"
  zk_env_resolve
  if launch_node "$dir" "$sid" "$host"; then await_started "$dir" "$sid"; fi
}

cmd_stop() {
  local dir=$1 sid type flag host
  load_env "$dir"
  while read -r sid type flag host; do
    [ -n "$sid" ] || continue
    stop_node "$dir" "$sid" 0
  done <<<"$MEMBERS"
}

cmd_stop_node() {
  local dir=$1 sid=$2 kill9=0
  shift 2
  case "${1:-}" in
    --kill) kill9=1 ;;
    "") ;;
    *) die "stop-node: unknown option '$1'" ;;
  esac
  load_env "$dir"
  member_of "$sid" >/dev/null || die "server $sid is not a member of $dir"
  stop_node "$dir" "$sid" "$kill9"
}

cmd_status() {
  local dir=$1 sid type flag host pid
  load_env "$dir"
  printf '%-4s %-12s %-8s %-22s %s\n' SID TYPE PID CLIENT STATE
  while read -r sid type flag host; do
    [ -n "$sid" ] || continue
    if [ "$flag" = 0 ]; then
      printf '%-4s %-12s %-8s %-22s %s\n' "$sid" "$type" - "$(client_addr "$sid" "$host")" external
    elif pid=$(node_pid "$dir" "$sid"); then
      printf '%-4s %-12s %-8s %-22s %s\n' "$sid" "$type" "$pid" "$(client_addr "$sid" "$host")" "$(last_state "$dir/$sid/server.log")"
    else
      printf '%-4s %-12s %-8s %-22s %s\n' "$sid" "$type" - "$(client_addr "$sid" "$host")" "stopped (last: $(last_state "$dir/$sid/server.log"))"
    fi
  done <<<"$MEMBERS"
}

# One look: sets STABLE_SUMMARY; returns 0 if every live server decided and
# reached the broadcast phase, with exactly one leader.
stable_once() {
  local dir=$1 sid type flag host st leaders=0 live=0 undecided=""
  while read -r sid type flag host; do
    [ -n "$sid" ] && [ "$flag" = 1 ] || continue
    node_pid "$dir" "$sid" >/dev/null || continue
    live=$((live + 1))
    st=$(last_state "$dir/$sid/server.log")
    case "$st" in
      LEADING) leaders=$((leaders + 1)) ;;
      FOLLOWING|OBSERVING) ;;
      *) undecided+=" $sid:$st"; continue ;;
    esac
    # Decided is not enough: the learner must also have synced with the leader.
    synced "$dir" "$sid" "$host" || undecided+=" $sid:$st-syncing"
  done <<<"$MEMBERS"
  STABLE_SUMMARY="live=$live leaders=$leaders undecided=[${undecided# }]"
  [ "$live" -gt 0 ] && [ "$leaders" = 1 ] && [ -z "$undecided" ]
}

cmd_wait_stable() {
  local dir=$1 timeout=60 ok=0 deadline sid type flag host
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --timeout) timeout=${2:?}; shift 2 ;;
      *) die "wait-stable: unknown option '$1'" ;;
    esac
  done
  load_env "$dir"
  deadline=$((SECONDS + timeout))
  while :; do
    # Stable twice in a row, 1 s apart, so a state about to change is not taken.
    if stable_once "$dir"; then
      ok=$((ok + 1))
      [ $ok -ge 2 ] && break
    else
      ok=0
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "not stable after ${timeout} s: $STABLE_SUMMARY" >&2
      while read -r sid type flag host; do
        [ -n "$sid" ] && [ "$flag" = 1 ] || continue
        log_tail "$dir" "$sid"
      done <<<"$MEMBERS"
      exit 1
    fi
    sleep 1
  done
  echo "stable: $STABLE_SUMMARY"
  cmd_status "$dir"
}

cmd_cli() {
  local dir=$1 n=$2 sid type flag host
  shift 2
  load_env "$dir"
  while read -r sid type flag host; do
    if [ "$sid" = "$n" ]; then
      zk_cli "$(client_addr "$sid" "$host")" "$@"
      return
    fi
  done <<<"$MEMBERS"
  die "cli: no server $n in $dir"
}

# ---------------------------------------------------------------- main

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case "$cmd" in
  -h|--help|help) usage; exit 0 ;;
esac
[ $# -ge 1 ] || die "$cmd: missing DIR (see -h)"
DIR_ARG=$1
shift
if [ "$cmd" != start ]; then
  [ -d "$DIR_ARG" ] || die "no such directory: $DIR_ARG"
  DIR_ARG=$(cd "$DIR_ARG" && pwd)
fi
case "$cmd" in
  start) cmd_start "$DIR_ARG" "$@" ;;
  stop) [ $# -eq 0 ] || die "stop takes only DIR"; cmd_stop "$DIR_ARG" ;;
  start-node) [ $# -eq 1 ] || die "usage: start-node DIR N"; cmd_start_node "$DIR_ARG" "$1" ;;
  stop-node) [ $# -ge 1 ] || die "usage: stop-node DIR N [--kill]"; cmd_stop_node "$DIR_ARG" "$@" ;;
  status) cmd_status "$DIR_ARG" ;;
  wait-stable) cmd_wait_stable "$DIR_ARG" "$@" ;;
  cli) [ $# -ge 2 ] || die "usage: cli DIR N CMD ARGS..."; cmd_cli "$DIR_ARG" "$@" ;;
  *) die "unknown command '$cmd' (see -h)" ;;
esac
