#!/bin/bash
# zkCli.sh of zkfle's ZooKeeper images: ZooKeeper's command-line client (ZooKeeperMain) on the
# image's classpath, logging warnings only, to stderr. Arguments as ZooKeeper's zkCli.sh:
#   zkCli.sh -server zoo1:2181,zoo2:2181 create /x data
# The 3.4.14 client cannot connect on Java 14+ (it parses InetSocketAddress.toString(), whose
# form changed): in the 3.4.14 image use the client of a 3.5+ image, which speaks to 3.4.
set -euo pipefail
# shellcheck source=/dev/null
. /zookeeper/zk-env.sh
zk_env_resolve
case "$ZK_LOG_BACKEND" in
  log4j1 | reload4j) log=(-Dlog4j.configuration=file:/zookeeper/log4j.properties -Dzkfle.log.threshold=WARN -Dzkfle.log.target=System.err) ;;
  log4j2) log=(-Dlog4j2.configurationFile=/zookeeper/log4j2.properties -Dzkfle.log.threshold=WARN -Dzkfle.log.target=SYSTEM_ERR) ;;
  *) log=() ;;
esac
# shellcheck disable=SC2086
exec "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Dzookeeper.sasl.client=false \
  "${log[@]}" ${CLIENT_JVMFLAGS:-} -cp "$ZK_CLASSPATH" org.apache.zookeeper.ZooKeeperMain "$@"
