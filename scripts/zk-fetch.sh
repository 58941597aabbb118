#!/usr/bin/env bash
# zk-fetch.sh: fetch and cache the jars of one Java ZooKeeper release line.
#
# Usage:
#   scripts/zk-fetch.sh VERSION        fetch if not cached; print the ZK_JARS folder
#                                      (last line of stdout; progress goes to stderr)
#   scripts/zk-fetch.sh --list         the versions this script knows and where they come from
#   scripts/zk-fetch.sh --cached VERSION   print the folder if cached, else exit 3 (no network)
#   scripts/zk-fetch.sh -h
#
# Versions:
#   3.8.0    Debian's `zookeeper` package (installed by zk-env.sh with apt-get): prints
#            `debian` instead of a folder; run ensemble.sh with ZK_JARS unset
#   3.9.5    PyPI source package pyspark 4.3.0, deps/jars/ (log4j2)
#   3.6.3    PyPI source package pyspark 3.5.7, deps/jars/ (log4j2)
#   3.4.14   PyPI source package pyspark 3.1.3, deps/jars/ (log4j 1.2 + slf4j-log4j12)
#
# Each pyspark source package is 200-460 MB; only the jars ZooKeeper needs are kept:
#   ${ZKFLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkfle}/zookeeper-VERSION/jars/
# (a few MB), with a .complete stamp; the package itself is deleted after extraction.
# The cache lives outside the repository: never commit jars.
#
# ZK_FETCH_TARBALL=/path/pyspark-X.tar.gz uses that package instead of downloading it.
#
#   ZK_JARS="$(scripts/zk-fetch.sh 3.4.14 | tail -n1)" scripts/ensemble.sh start DIR
#
# Exit status: 0 fetched or cached; 2 usage; 3 the version cannot be had on this machine
# (registry unreachable, pip missing, archive without the jars): the reason is on stderr,
# and callers must report the version as skipped, loudly.

set -euo pipefail

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
unavailable() {
  echo "zk-fetch: ZooKeeper $VERSION unavailable: $*" >&2
  exit 3
}

CACHE=${ZKFLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkfle}

# VERSION -> pyspark source package that carries it.
pyspark_for() {
  case "$1" in
    3.9.5) echo 4.3.0 ;;
    3.6.3) echo 3.5.7 ;;
    3.4.14) echo 3.1.3 ;;
    *) return 1 ;;
  esac
}

# Jars ZooKeeper (any of these versions) needs from deps/jars; zk-env.sh picks among them.
KEEP_RE='^(zookeeper-[0-9]|zookeeper-jute-|netty-(buffer|codec|common|handler|resolver|transport)[-.0-9A-Za-z]*\.jar$|netty-[0-9]|slf4j-api-|slf4j-log4j12-|slf4j-reload4j-|reload4j-|log4j-1\.2\.|log4j-(api|core|slf4j-impl|slf4j2-impl)-2|logback-(classic|core)-|commons-(cli|io|lang|lang3)-|metrics-core-|snappy-java-|jline-|audience-annotations-|spotbugs-annotations-|jackson-(core|databind|annotations)-)'
SKIP_RE='(sources|javadoc|tests)\.jar$|native-(kqueue|epoll)-.*-(osx|windows|.*aarch|riscv)|tcnative|-http|-socks|-dns|-proxy|-haproxy|-memcache|-mqtt|-redis|-smtp|-stomp|-xml|-sctp|-udt|-rxtx|-compression|-marshalling|-protobuf|jackson-core-asl'

jar_dir() { echo "$CACHE/zookeeper-$1/jars"; }

cached() {
  local d
  d=$(jar_dir "$1")
  [ -f "$d/.complete" ] && ls "$d"/zookeeper-"$1".jar >/dev/null 2>&1
}

fetch() {
  local v=$1 spark dl tarball out start
  spark=$(pyspark_for "$v") || {
    echo "zk-fetch: unknown version '$v' (see --list)" >&2
    exit 2
  }
  out=$(jar_dir "$v")
  if cached "$v"; then
    echo "$out"
    return 0
  fi
  command -v pip >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1 ||
    unavailable "neither pip nor pip3 is on PATH"
  local pip
  pip=$(command -v pip || command -v pip3)
  mkdir -p "$CACHE"
  dl=$(mktemp -d "$CACHE/dl-pyspark-$spark.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$dl'" EXIT
  start=$SECONDS
  if [ -n "${ZK_FETCH_TARBALL:-}" ]; then
    # A pyspark-X.tar.gz already at hand (e.g. copied from another machine's cache).
    [ "$(basename "$ZK_FETCH_TARBALL")" = "pyspark-$spark.tar.gz" ] ||
      unavailable "ZK_FETCH_TARBALL=$ZK_FETCH_TARBALL is not pyspark-$spark.tar.gz"
    ln -s "$(readlink -f "$ZK_FETCH_TARBALL")" "$dl/pyspark-$spark.tar.gz"
  else
  echo "zk-fetch: ZooKeeper $v: downloading pyspark==$spark source package (hundreds of MB)..." >&2
  if ! "$pip" download --no-deps --no-binary :all: --disable-pip-version-check --no-cache-dir -q \
    -d "$dl" "pyspark==$spark" >"$dl/pip.log" 2>&1; then
    tail -n 15 "$dl/pip.log" >&2
    unavailable "pip download pyspark==$spark failed (log above)"
  fi
  fi
  tarball=$(ls "$dl"/pyspark-"$spark".tar.gz 2>/dev/null | head -n1)
  [ -n "$tarball" ] || unavailable "pip download left no pyspark-$spark.tar.gz in $dl"
  echo "zk-fetch: downloaded $(du -hL "$tarball" | cut -f1) in $((SECONDS - start)) s; extracting deps/jars" >&2
  # Archive layout: pyspark-X/deps/jars/*.jar
  local names
  names=$(tar -tzf "$tarball" | grep -E '^[^/]+/deps/jars/[^/]+\.jar$' || true)
  [ -n "$names" ] || unavailable "pyspark-$spark.tar.gz has no */deps/jars/*.jar"
  local want=()
  local n b
  while read -r n; do
    b=${n##*/}
    [[ "$b" =~ $KEEP_RE ]] || continue
    [[ "$b" =~ $SKIP_RE ]] && continue
    want+=("$n")
  done <<<"$names"
  printf '%s\n' "${want[@]}" | grep -q "/zookeeper-$v.jar$" ||
    unavailable "pyspark-$spark.tar.gz has no deps/jars/zookeeper-$v.jar"
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  tar -xzf "$tarball" -C "$out.tmp" --strip-components=3 "${want[@]}"
  echo "pyspark==$spark (PyPI source package), deps/jars/, fetched $(date -u +%Y-%m-%dT%H:%MZ)" >"$out.tmp/SOURCE"
  touch "$out.tmp/.complete"
  rm -rf "$out"
  mv "$out.tmp" "$out"
  echo "zk-fetch: ZooKeeper $v: ${#want[@]} jars in $out ($((SECONDS - start)) s in all)" >&2
  echo "$out"
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --list)
    echo "3.8.0   debian (apt-get install zookeeper)"
    for v in 3.9.5 3.6.3 3.4.14; do
      printf '%-7s pyspark==%s  %s\n' "$v" "$(pyspark_for "$v")" \
        "$(cached "$v" && jar_dir "$v" || echo '(not cached)')"
    done
    ;;
  --cached)
    VERSION=${2:?--cached needs a VERSION}
    [ "$VERSION" = 3.8.0 ] && { echo debian; exit 0; }
    cached "$VERSION" && jar_dir "$VERSION" || exit 3
    ;;
  "") usage >&2; exit 2 ;;
  *)
    VERSION=$1
    if [ "$VERSION" = 3.8.0 ]; then
      # zk-env.sh installs Debian's package on first use; make sure it can.
      if [ ! -e /usr/share/java/zookeeper.jar ]; then
        (unset ZK_JARS ZK_HOME; . "$(dirname "$0")/zk-env.sh"; zk_env_resolve >&2) ||
          unavailable "Debian package zookeeper could not be installed"
      fi
      echo debian
      exit 0
    fi
    fetch "$VERSION"
    ;;
esac
