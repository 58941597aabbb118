#!/bin/bash
# docker-entrypoint.sh of zkfle's images (ZooKeeper and zkfle alike). It behaves as the
# entrypoint of Docker's official `zookeeper` image, so one compose file runs either:
#   - started as root with `zkServer.sh` (or `zkfle`), it hands /data, /datalog and /logs to
#     the zookeeper user and re-runs itself as that user (gosu);
#   - when $ZOO_CONF_DIR/zoo.cfg does not exist it is written from the ZOO_* variables:
#     dataDir, dataLogDir, tickTime, initLimit, syncLimit, autopurge.*, maxClientCnxns,
#     standaloneEnabled, admin.enableServer, one line per word of ZOO_SERVERS (default
#     server.1=localhost:2888:3888;2181), 4lw.commands.whitelist, then ZOO_CFG_EXTRA's words;
#   - when $ZOO_DATA_DIR/myid does not exist it is written from ZOO_MY_ID (default 1).
# One difference, for rolling upgrades from 3.4: in a 3.4 image (ZK_RELEASE=3.4.*) the
# 3.5+ server form `server.N=host:2888:3888;2181` is written as `server.N=host:2888:3888`
# plus `clientPort=2181` (ZOO_PORT), which is what 3.4 reads; 3.5+ images write the lines as
# given, as the official image does.
set -e

if [[ ("$1" = zkServer.sh || "$1" = zkfle) && "$(id -u)" = 0 ]]; then
  chown -R zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
  exec gosu zookeeper "$0" "$@"
fi

legacy=false
[[ "${ZK_RELEASE:-}" == 3.4.* ]] && legacy=true

if [[ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]]; then
  CONFIG="$ZOO_CONF_DIR/zoo.cfg"
  {
    if $legacy; then
      echo "clientPort=${ZOO_PORT:-2181}"
    fi
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=$ZOO_TICK_TIME"
    echo "initLimit=$ZOO_INIT_LIMIT"
    echo "syncLimit=$ZOO_SYNC_LIMIT"
    echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
    echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
    echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
    if ! $legacy; then
      echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
      echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    fi
  } >>"$CONFIG"
  if [[ -z $ZOO_SERVERS ]]; then
    ZOO_SERVERS="server.1=localhost:2888:3888;2181"
  fi
  for server in $ZOO_SERVERS; do
    if $legacy; then
      server=${server%%;*}
    fi
    echo "$server" >>"$CONFIG"
  done
  if [[ -n $ZOO_4LW_COMMANDS_WHITELIST ]]; then
    echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >>"$CONFIG"
  fi
  for cfg_extra_entry in $ZOO_CFG_EXTRA; do
    echo "$cfg_extra_entry" >>"$CONFIG"
  done
fi

if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
  echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi

exec "$@"
