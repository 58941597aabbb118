#!/usr/bin/env bash
# zk-env.sh: find a Java ZooKeeper and work out how to run and log it.
#
# Sourced by ensemble.sh and record-fixture.sh; also runnable on its own:
#   scripts/zk-env.sh --print     version, source, logging backend and classpath
#
# Where ZooKeeper comes from, first match wins:
#   ZK_JARS=/some/dir   a folder of jars (e.g. pyspark's deps/jars); only the jars
#                       ZooKeeper needs are picked from it
#   ZK_HOME=/some/dir   an Apache ZooKeeper binary distribution
#                       ($ZK_HOME/lib/*.jar and $ZK_HOME/*.jar)
#   otherwise           the Debian package `zookeeper` (/usr/share/java), installed
#                       with apt-get when /usr/share/java/zookeeper.jar is missing
#
# After zk_env_resolve these are set:
#   ZK_SOURCE        ZK_JARS | ZK_HOME | debian
#   ZK_JAR           the server jar
#   ZK_VERSION       e.g. 3.8.0
#   ZK_CLASSPATH     colon-separated jars
#   ZK_LOG_BACKEND   log4j1 | reload4j | logback | log4j2 | none
#   JAVA             the java binary ($JAVA_HOME/bin/java or java on PATH)
# zk_log_config DIR writes the logging config for that backend into DIR, and
# zk_server_jvm_flags LOGFILE [extra...] fills the array ZK_JVM_FLAGS.

_zk_env_usage() {
  sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

zk_die() {
  echo "error: $*" >&2
  exit 1
}

zk_warn() {
  echo "warning: $*" >&2
}

# apt-get install the given Debian packages (only called when something is missing).
# apt-get with its arguments, waiting (up to 10 minutes) while another apt or dpkg holds the
# package lock, as on a machine whose unattended upgrades or other builds are installing:
# DPkg::Lock::Timeout waits for dpkg's lock, and a refused lists lock (apt-get update) is
# retried.
zk_apt() {
  local err tries=0
  err=$(mktemp)
  while ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>"$err"; do
    if grep -qE "Could not get lock|Unable to lock|is held by process" "$err" && [ $tries -lt 120 ]; then
      [ $tries -eq 0 ] && echo "apt-get $1: the package lock is held; waiting" >&2
      tries=$((tries + 1))
      sleep 5
      continue
    fi
    cat "$err" >&2
    rm -f "$err"
    return 1
  done
  rm -f "$err"
}

zk_apt_install() {
  command -v apt-get >/dev/null 2>&1 ||
    zk_die "need Debian package(s) $* but apt-get is not available; set ZK_HOME or ZK_JARS instead"
  [ "$(id -u)" = 0 ] || zk_die "need Debian package(s) $*; run as root or install them: apt-get install -y $*"
  echo "installing Debian package(s): $*" >&2
  zk_apt update -qq >&2 || zk_die "apt-get update failed"
  zk_apt install -y -qq "$@" >&2 || zk_die "apt-get install $* failed"
}

zk_find_java() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    JAVA="$JAVA_HOME/bin/java"
  elif command -v java >/dev/null 2>&1; then
    JAVA=$(command -v java)
  else
    zk_apt_install default-jre-headless
    JAVA=$(command -v java) || zk_die "java still not found after installing default-jre-headless"
  fi
}

# Print the first jar in DIR whose base name matches the extended regex RE.
_zk_pick() {
  local dir=$1 re=$2 f
  for f in "$dir"/*.jar; do
    [ -e "$f" ] || continue
    if [[ "$(basename "$f")" =~ $re ]]; then
      echo "$f"
      return 0
    fi
  done
  return 1
}

# Is the server jar one of the non-server artifacts (tests, sources, recipes...)?
_zk_main_jar_re='^zookeeper(-[0-9][0-9A-Za-z.+-]*)?\.jar$'
_zk_not_main_re='(tests|sources|javadoc|jute|recipes|contrib|it|client|prometheus|compatibility)'

_zk_main_jar_in() {
  local dir=$1 f b
  for f in "$dir"/zookeeper*.jar; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    [[ "$b" =~ $_zk_main_jar_re ]] || continue
    [[ "$b" =~ $_zk_not_main_re ]] && continue
    echo "$f"
    return 0
  done
  return 1
}

# Classify the slf4j binding available among the jars in the colon list $1 and
# print the backend name. Preference: log4j2, logback, reload4j, log4j1.
_zk_backend_of() {
  local cp=":$1:"
  if [[ "$cp" =~ /log4j-core-2[^/:]*\.jar: ]] && [[ "$cp" =~ /log4j-slf4j2?-impl[^/:]*\.jar: ]]; then
    echo log4j2
  elif [[ "$cp" =~ /logback-classic[^/:]*\.jar: ]]; then
    echo logback
  elif [[ "$cp" =~ /slf4j-reload4j[^/:]*\.jar: ]] && [[ "$cp" =~ /reload4j[^/:]*\.jar: ]]; then
    echo reload4j
  elif [[ "$cp" =~ /slf4j-log4j12[^/:]*\.jar: ]] && [[ "$cp" =~ /log4j-1\.2[^/:]*\.jar: ]]; then
    echo log4j1
  else
    echo none
  fi
}

# Drop the slf4j bindings (and their backends) that lost to $2 from the colon list
# $1, so slf4j does not pick one at random.
_zk_keep_one_binding() {
  local cp=$1 backend=$2 out="" j b drop
  local IFS=:
  for j in $cp; do
    b=$(basename "$j")
    drop=0
    case "$b" in
      log4j-slf4j-impl*|log4j-slf4j2-impl*) [ "$backend" = log4j2 ] || drop=1 ;;
      logback-classic*) [ "$backend" = logback ] || drop=1 ;;
      slf4j-reload4j*) [ "$backend" = reload4j ] || drop=1 ;;
      slf4j-log4j12*) [ "$backend" = log4j1 ] || drop=1 ;;
      slf4j-simple*|slf4j-nop*|slf4j-jdk14*|slf4j-jcl*|log4j-over-slf4j*|logback-access*) drop=1 ;;
    esac
    [ $drop = 1 ] || out="${out:+$out:}$j"
  done
  echo "$out"
}

# Jars ZooKeeper needs, picked by name from a folder that may hold many others.
_zk_jars_from_folder() {
  local dir=$1 f b out=""
  local keep='^(zookeeper-jute|netty-|slf4j-api|metrics-core|commons-cli|commons-io|commons-lang|snappy-java|jline|audience-annotations|spotbugs-annotations|jackson-(core|databind|annotations)|log4j-1\.2|log4j-(api|core)-2|log4j-slf4j2?-impl|reload4j|slf4j-(log4j12|reload4j)|logback-(classic|core))'
  for f in "$dir"/*.jar; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    [[ "$b" =~ $keep ]] || continue
    [[ "$b" =~ (sources|javadoc|tests)\.jar$ ]] && continue
    out="${out:+$out:}$f"
  done
  echo "$out"
}

# Version from jar name, else manifest, else dpkg, else org.apache.zookeeper.Version.
_zk_detect_version() {
  local jar=$1 real v=""
  real=$(readlink -f "$jar")
  if [[ "$(basename "$real")" =~ ^zookeeper-([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.-]*)\.jar$ ]]; then
    v=${BASH_REMATCH[1]}
  fi
  if [ -z "$v" ] && command -v unzip >/dev/null 2>&1; then
    v=$(unzip -p "$real" META-INF/MANIFEST.MF 2>/dev/null |
      sed -n 's/^Implementation-Version: *\([^[:space:]]*\).*/\1/p' | head -n1)
  fi
  if [ -z "$v" ] && [ "$ZK_SOURCE" = debian ] && command -v dpkg-query >/dev/null 2>&1; then
    v=$(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null | sed 's/-[^-]*$//')
  fi
  if [ -z "$v" ]; then
    v=$("$JAVA" -cp "$ZK_CLASSPATH" org.apache.zookeeper.Version 2>/dev/null | head -n1 |
      sed -n 's/^\([0-9][0-9.]*\).*/\1/p')
  fi
  echo "${v:-unknown}"
}

# The jars Java's AdminServer (Jetty, the servlet API, Jackson) needs, from Debian's packages
# (installed when missing), colon-separated. Neither Debian's zookeeper package nor the
# PyPI-borne jars carry them; without them Java logs "Unable to load jetty" and runs no
# AdminServer. ensemble.sh --admin puts them on its servers' classpath.
zk_admin_classpath() {
  local d=/usr/share/java cp="" f missing=()
  [ -e "$d/jetty9-server.jar" ] || missing+=(libjetty9-java)
  [ -e "$d/jackson-databind.jar" ] || missing+=(libjackson2-databind-java)
  [ -e "$d/servlet-api.jar" ] || missing+=(libservlet-api-java)
  [ ${#missing[@]} -eq 0 ] || zk_apt_install "${missing[@]}" >&2
  for f in jetty9-server.jar jetty9-servlet.jar jetty9-util.jar jetty9-util-ajax.jar jetty9-http.jar \
    jetty9-io.jar jetty9-security.jar servlet-api.jar jackson-databind.jar jackson-core.jar \
    jackson-annotations.jar; do
    [ -e "$d/$f" ] && cp="${cp:+$cp:}$d/$f"
  done
  echo "$cp"
}

zk_env_resolve() {
  [ -n "${ZK_CLASSPATH:-}" ] && [ -n "${ZK_VERSION:-}" ] && [ -n "${ZK_LOG_BACKEND:-}" ] &&
    [ -n "${JAVA:-}" ] && return 0
  zk_find_java
  local cp="" d
  if [ -n "${ZK_JARS:-}" ]; then
    [ -d "$ZK_JARS" ] || zk_die "ZK_JARS=$ZK_JARS is not a directory"
    ZK_SOURCE=ZK_JARS
    ZK_JAR=$(_zk_main_jar_in "$ZK_JARS") ||
      zk_die "ZK_JARS=$ZK_JARS holds no zookeeper-<version>.jar"
    cp="$ZK_JAR:$(_zk_jars_from_folder "$ZK_JARS")"
  elif [ -n "${ZK_HOME:-}" ]; then
    [ -d "$ZK_HOME" ] || zk_die "ZK_HOME=$ZK_HOME is not a directory"
    ZK_SOURCE=ZK_HOME
    ZK_JAR=$(_zk_main_jar_in "$ZK_HOME/lib" || _zk_main_jar_in "$ZK_HOME") ||
      zk_die "ZK_HOME=$ZK_HOME has no zookeeper-<version>.jar in lib/ or at the top (a source release? use a binary distribution, apache-zookeeper-X.Y.Z-bin)"
    cp=$ZK_JAR
    for d in "$ZK_HOME/lib" "$ZK_HOME"; do
      for f in "$d"/*.jar; do
        [ -e "$f" ] || continue
        [ "$f" = "$ZK_JAR" ] && continue
        [[ "$(basename "$f")" =~ (sources|javadoc|tests)\.jar$ ]] && continue
        cp="$cp:$f"
      done
    done
  else
    ZK_SOURCE=debian
    d=/usr/share/java
    [ -e "$d/zookeeper.jar" ] || zk_apt_install zookeeper
    [ -e "$d/slf4j-log4j12.jar" ] || zk_apt_install libslf4j-java
    [ -e "$d/log4j-1.2.jar" ] || zk_apt_install liblog4j1.2-java
    ZK_JAR=$d/zookeeper.jar
    # zookeeper.jar's manifest Class-Path names most of these too; listing them
    # keeps the classpath explicit. slf4j-log4j12 + log4j-1.2 are the backend:
    # the Debian package ships no slf4j binding of its own (slf4j would go NOP).
    for f in zookeeper.jar zookeeper-jute.jar \
      netty-buffer.jar netty-codec.jar netty-common.jar netty-handler.jar netty-resolver.jar \
      netty-transport.jar netty-transport-native-epoll.jar netty-transport-native-unix-common.jar \
      slf4j-api.jar slf4j-log4j12.jar log4j-1.2.jar metrics-core.jar \
      commons-cli.jar commons-io.jar snappy-java.jar jline.jar; do
      [ -e "$d/$f" ] && cp="${cp:+$cp:}$d/$f"
    done
  fi
  ZK_LOG_BACKEND=$(_zk_backend_of "$cp")
  ZK_CLASSPATH=$(_zk_keep_one_binding "$cp" "$ZK_LOG_BACKEND")
  if [ "$ZK_LOG_BACKEND" = none ]; then
    zk_warn "no usable slf4j binding among the jars (log4j2, logback, reload4j or slf4j-log4j12+log4j-1.2): servers will log nothing"
  fi
  ZK_VERSION=$(_zk_detect_version "$ZK_JAR")
  export ZK_SOURCE ZK_JAR ZK_VERSION ZK_CLASSPATH ZK_LOG_BACKEND JAVA
}

# Write the logging config for $ZK_LOG_BACKEND into DIR. The file each JVM logs
# to comes from the system property zkfle.log.file (see zk_server_jvm_flags).
# Root level INFO is enough for FastLeaderElection's `Notification:` lines and
# QuorumPeer's LOOKING/FOLLOWING/LEADING/OBSERVING lines. FastLeaderElection and
# QuorumCnxManager log at ZK_ELECTION_LOG_LEVEL (default DEBUG): that adds the
# `Sending Notification:` lines and each connection's parsed initial message,
# which is what a capture is checked against; it is quiet outside elections.
ZK_ELECTION_LOG_LEVEL=${ZK_ELECTION_LOG_LEVEL:-DEBUG}
# ZooKeeper's own pattern. %C{1} is the bare class name in log4j 1.x and log4j2;
# logback reads {1} as an abbreviation length (o.a.z.s.q.QuorumPeer), so it gets %C{0}.
ZK_LOG_PATTERN='%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n'

# Write stdin to FILE through a temporary file renamed over it. An ensemble's servers share
# one logging config and each launch writes it again: written in place, a JVM starting at that
# moment could read it truncated and log nothing at all (seen once in CI: log4j's "No appenders
# could be found", and a server whose election state never showed in its log).
_zk_write_atomic() {
  local dest=$1 tmp
  tmp=$(mktemp "$dest.XXXXXX") || return 1
  chmod 644 "$tmp"
  cat >"$tmp" && mv -f "$tmp" "$dest" || { rm -f "$tmp"; return 1; }
}
zk_log_config() {
  local dir=$1
  mkdir -p "$dir"
  case "$ZK_LOG_BACKEND" in
    log4j1|reload4j)
      _zk_write_atomic "$dir/log4j.properties" <<EOF
# generated by zkfle scripts/zk-env.sh
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=\${zkfle.log.file}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=$ZK_LOG_PATTERN
log4j.logger.org.apache.zookeeper.server.quorum.FastLeaderElection=$ZK_ELECTION_LOG_LEVEL
log4j.logger.org.apache.zookeeper.server.quorum.QuorumCnxManager=$ZK_ELECTION_LOG_LEVEL
EOF
      ;;
    logback)
      local lb_pattern=${ZK_LOG_PATTERN/'%C{1}'/'%C{0}'}
      _zk_write_atomic "$dir/logback.xml" <<EOF
<!-- generated by zkfle scripts/zk-env.sh -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>\${zkfle.log.file}</file>
    <append>true</append>
    <encoder><pattern>$lb_pattern</pattern></encoder>
  </appender>
  <logger name="org.apache.zookeeper.server.quorum.FastLeaderElection" level="$ZK_ELECTION_LOG_LEVEL"/>
  <logger name="org.apache.zookeeper.server.quorum.QuorumCnxManager" level="$ZK_ELECTION_LOG_LEVEL"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
      ;;
    log4j2)
      _zk_write_atomic "$dir/log4j2.properties" <<EOF
# generated by zkfle scripts/zk-env.sh
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = \${sys:zkfle.log.file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = $ZK_LOG_PATTERN
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.fle.name = org.apache.zookeeper.server.quorum.FastLeaderElection
logger.fle.level = $ZK_ELECTION_LOG_LEVEL
logger.qcm.name = org.apache.zookeeper.server.quorum.QuorumCnxManager
logger.qcm.level = $ZK_ELECTION_LOG_LEVEL
EOF
      ;;
    none) ;;
    *) zk_die "unknown logging backend '$ZK_LOG_BACKEND'" ;;
  esac
}

# Fill ZK_JVM_FLAGS with the flags for one server JVM logging to LOGFILE, with the
# logging config in CONFDIR (written by zk_log_config). Extra args are appended.
zk_server_jvm_flags() {
  local logfile=$1 confdir=$2
  shift 2
  ZK_JVM_FLAGS=(
    -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    "-Dzkfle.log.file=$logfile"
    # No Jetty admin server (port 8080 would clash between servers), no JMX,
    # no four-letter words beyond `srvr`.
    -Dzookeeper.admin.enableServer=false
    -Dzookeeper.jmx.log4j.disable=true
    -Dzookeeper.4lw.commands.whitelist=srvr
    -Dzookeeper.audit.enable=false
  )
  case "$ZK_LOG_BACKEND" in
    log4j1|reload4j) ZK_JVM_FLAGS+=("-Dlog4j.configuration=file:$confdir/log4j.properties") ;;
    logback) ZK_JVM_FLAGS+=("-Dlogback.configurationFile=$confdir/logback.xml") ;;
    log4j2) ZK_JVM_FLAGS+=("-Dlog4j2.configurationFile=$confdir/log4j2.properties"
      "-Dlog4j.configurationFile=$confdir/log4j2.properties") ;;
  esac
  ZK_JVM_FLAGS+=("$@")
}

# zkCli.sh-equivalent client command (does not depend on /usr/share/zookeeper/bin):
#   zk_cli HOST:PORT cmd args...
# The 3.4.x client cannot connect on Java 14+ (it parses InetSocketAddress.toString(), whose
# unresolved form changed: "Unable to canonicalize address 127.0.0.1/<unresolved>:2181"), so
# for a 3.4 server the client classes come from Debian's package when it is installed (the
# 3.5+ client speaks to 3.4 servers for plain create/get).
zk_cli() {
  # Resolves Java and the jars itself, so it works straight after sourcing this file.
  zk_env_resolve
  local server=$1 cp=$ZK_CLASSPATH
  shift
  if [[ "${ZK_VERSION:-}" =~ ^3\.[0-4]\. ]] && [ -e /usr/share/java/zookeeper.jar ]; then
    cp=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar
    for f in netty-buffer netty-codec netty-common netty-handler netty-resolver netty-transport \
      netty-transport-native-unix-common jline commons-cli; do
      [ -e "/usr/share/java/$f.jar" ] && cp="$cp:/usr/share/java/$f.jar"
    done
  fi
  "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -Dzookeeper.log.file=/dev/null \
    -Dzookeeper.sasl.client=false \
    -Dlog4j.configuration=file:/dev/null -Dlog4j2.configurationFile=/dev/null \
    -cp "$cp" org.apache.zookeeper.ZooKeeperMain -server "$server" "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    -h|--help) _zk_env_usage; exit 0 ;;
    --print)
      zk_env_resolve
      echo "version:  $ZK_VERSION"
      echo "source:   $ZK_SOURCE"
      echo "jar:      $ZK_JAR"
      echo "logging:  $ZK_LOG_BACKEND"
      echo "java:     $JAVA"
      echo "classpath:"
      tr ':' '\n' <<<"$ZK_CLASSPATH" | sed 's/^/  /'
      ;;
    *) _zk_env_usage >&2; exit 2 ;;
  esac
fi
