#!/bin/bash
# zkServer.sh of zkfle's ZooKeeper images (the jars-only releases carry no bin/ scripts; one
# script for all four keeps them alike): the classpath and logging backend come from
# /zookeeper/zk-env.sh, the repository's scripts/zk-env.sh (ZK_JARS=/zookeeper/lib, or
# Debian's package when ZK_JARS is empty). Logs go to the console (`docker logs`).
#   zkServer.sh start-foreground [zoo.cfg]   run the server (the image's CMD)
#   zkServer.sh status                       its `srvr` answer (Mode: leader|follower|...)
#   zkServer.sh version                      the release
# JVMFLAGS and SERVER_JVMFLAGS are added to the JVM's flags, as zkEnv.sh does.
set -euo pipefail
# shellcheck source=/dev/null
. /zookeeper/zk-env.sh
cfg=${2:-${ZOOCFGDIR:-/conf}/zoo.cfg}
case "${1:-}" in
  start-foreground)
    zk_env_resolve
    case "$ZK_LOG_BACKEND" in
      log4j1 | reload4j) log=(-Dlog4j.configuration=file:/zookeeper/log4j.properties) ;;
      log4j2) log=(-Dlog4j2.configurationFile=/zookeeper/log4j2.properties) ;;
      *) log=() ;;
    esac
    # Java's AdminServer, where the image carries Debian's Jetty (3.5+ images).
    admin_cp=""
    [ -e /usr/share/java/jetty9-server.jar ] && admin_cp=":$(zk_admin_classpath)"
    # shellcheck disable=SC2086
    exec "$JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
      "-Dzookeeper.log.dir=${ZOO_LOG_DIR:-/logs}" -Dzookeeper.jmx.log4j.disable=true \
      -Dzookeeper.audit.enable=false "${log[@]}" ${JVMFLAGS:-} ${SERVER_JVMFLAGS:-} \
      -cp "$ZK_CLASSPATH$admin_cp:${ZOOCFGDIR:-/conf}" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
    ;;
  status)
    port=$(sed -n 's/^clientPort=//p' "$cfg" | head -n1)
    exec 3<>/dev/tcp/127.0.0.1/"${port:-2181}"
    printf srvr >&3
    cat <&3
    ;;
  version)
    echo "Apache ZooKeeper ${ZK_RELEASE:-unknown} (zkfle's image)"
    ;;
  *)
    echo "usage: zkServer.sh start-foreground|status|version [zoo.cfg]" >&2
    exit 2
    ;;
esac
