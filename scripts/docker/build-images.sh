#!/usr/bin/env bash
# build-images.sh: the Docker images the conformance scenarios run, built on this machine
# without a registry (nothing is pulled).
#
# Usage:
#   scripts/docker/build-images.sh [--print-tags]
#
# Images (each rebuilt only when its inputs change: the hash of the inputs is the label
# zkfle.inputs, compared before building):
#   zkfle/debian-base:bookworm   Debian 12 by debootstrap (minbase + openjdk-17-jre-headless,
#                                gosu, procps, netcat-openbsd), loaded with `docker import`;
#                                the root file system tarball is cached under
#                                ${ZKFLE_CACHE:-~/.cache/zkfle}/docker/
#   zkfle/zookeeper:3.8.0        Debian's `zookeeper` package (its .debs, downloaded into the
#                                cache beside the tarball, installed with dpkg), and Debian's
#                                own zkServer.sh at /usr/share/zookeeper/bin
#   zkfle/zookeeper:3.4.14|3.6.3|3.9.5   the jars scripts/zk-fetch.sh caches
#                                (3.5+: with Debian's Jetty 9.4, Jackson and the servlet API,
#                                which neither Debian's package nor the releases' jars carry, so
#                                that Java's AdminServer runs beside zkfle's, as
#                                `ensemble.sh --admin` runs it locally)
#   zkfle/zkfle:latest           target/release/zkfle (built here with cargo build --release;
#                                ZKFLE_PROFILE=debug: target/debug/zkfle, for CI, whose tests
#                                have built it already: a release build takes minutes)
# The ZooKeeper images keep the interface of Docker's official `zookeeper` image
# (ZOO_MY_ID, ZOO_SERVERS, ZOO_* settings, /conf, /data, /datalog, /logs, ports
# 2181/2888/3888, `zkServer.sh start-foreground`, zkCli.sh on PATH): see docs/docker.md.
#
# Environment: ZKFLE_DOCKER_VERSIONS="3.4.14 3.6.3 3.8.0 3.9.5" (which ZooKeeper images; empty:
# none, only the base and zkfle),
# DEBIAN_MIRROR (default http://deb.debian.org/debian). Needs root (debootstrap, chroot).
# A version whose jars cannot be had is skipped with a message on stderr (exit status 0);
# any other failure exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# shellcheck source=scripts/zk-env.sh
. "$ROOT/scripts/zk-env.sh" # zk_apt: apt-get that waits for the package lock
IMAGE_DIR=$ROOT/scripts/docker/image
CACHE=${ZKFLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkfle}/docker
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=openjdk-17-jre-headless,gosu,procps,netcat-openbsd
# Debian's ZooKeeper 3.8.0 (libzookeeper-java: the jars of Debian's `zookeeper` package, which
# itself only adds init scripts and depends on the full default-jre with its GUI libraries) and
# the logging backend zk-env.sh runs it with.
ZK_DEBS="libzookeeper-java libslf4j-java liblog4j1.2-java"
VERSIONS=${ZKFLE_DOCKER_VERSIONS-3.4.14 3.6.3 3.8.0 3.9.5}

say() { echo "build-images: $*" >&2; }
die() {
  say "$*"
  exit 1
}
hash_of() { sha256sum | cut -c1-16; }
label_of() { docker image inspect -f '{{index .Config.Labels "zkfle.inputs"}}' "$1" 2>/dev/null || true; }

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info failed)"

# --- the Debian base -------------------------------------------------------------------------
base_hash=$(printf '%s\n' "$SUITE" "$BASE_PACKAGES" "$ZK_DEBS" "v2" | hash_of)
BASE_TAR=$CACHE/debian-$SUITE-$base_hash.tar
DEB_DIR=$CACHE/debs-$base_hash
BASE_IMAGE=zkfle/debian-base:$SUITE

make_rootfs() {
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap (apt-get)"
    zk_apt update -qq
    zk_apt install -y -qq debootstrap >/dev/null
  fi
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-rootfs.XXXXXX")
  say "debootstrap $SUITE into $work (a few minutes, once: cached as $BASE_TAR)"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$work/root" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    die "debootstrap failed (log: $work/debootstrap.log)"
  }
  # The .debs of Debian's ZooKeeper, for the 3.8.0 image only (the base stays without it).
  rm -f "$work/root/var/cache/apt/archives/"*.deb
  mount -t proc proc "$work/root/proc"
  if ! chroot "$work/root" apt-get install -y -qq --no-install-recommends --download-only $ZK_DEBS >"$work/debs.log" 2>&1; then
    umount "$work/root/proc"
    tail -n 20 "$work/debs.log" >&2
    die "downloading Debian's zookeeper package failed"
  fi
  umount "$work/root/proc"
  mkdir -p "$DEB_DIR.tmp"
  mv "$work/root/var/cache/apt/archives/"*.deb "$DEB_DIR.tmp/"
  rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin
  tar -C "$work/root" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$DEB_DIR"
  mv "$DEB_DIR.tmp" "$DEB_DIR"
  rm -rf "$work"
}

start=$SECONDS
mkdir -p "$CACHE"
if [ "$(label_of "$BASE_IMAGE")" != "$base_hash" ]; then
  [ -f "$BASE_TAR" ] && [ -d "$DEB_DIR" ] || make_rootfs
  say "docker import $BASE_TAR as $BASE_IMAGE"
  docker import --change "LABEL zkfle.inputs=$base_hash" --change 'CMD ["/bin/bash"]' \
    "$BASE_TAR" "$BASE_IMAGE" >/dev/null
else
  say "$BASE_IMAGE is current"
fi

# --- ZooKeeper images --------------------------------------------------------------------------
# Debian's own zkServer.sh and its environment file, from the `zookeeper` package (whose
# dependencies, the full default-jre among them, the image does without): the 3.8.0 image gets
# them at /usr/share/zookeeper/bin, so that `zkServer.sh status` as Debian ships it can be run
# against any member, zkfle's included. The .deb is fetched once into the cache.
debian_scripts() {
  local into=$1 deb_dir=$CACHE/zookeeper-deb x
  if ! ls "$deb_dir"/zookeeper_*.deb >/dev/null 2>&1; then
    rm -rf "$deb_dir.tmp" && mkdir -p "$deb_dir.tmp"
    fetch_zookeeper_deb() { (cd "$deb_dir.tmp" && zk_apt download -qq zookeeper >/dev/null); }
    fetch_zookeeper_deb || { zk_apt update -qq && fetch_zookeeper_deb; } ||
      die "apt-get download zookeeper failed (Debian's zkServer.sh for the 3.8.0 image)"
    rm -rf "$deb_dir" && mv "$deb_dir.tmp" "$deb_dir"
  fi
  x=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-deb.XXXXXX")
  dpkg-deb -x "$deb_dir"/zookeeper_*.deb "$x"
  cp "$x/usr/share/zookeeper/bin/zkServer.sh" "$x/etc/zookeeper/conf_example/environment" "$into/"
  rm -rf "$x"
}

# Java's AdminServer needs Jetty, Jackson and the servlet API: Debian's packages (Java only,
# arch all; this list is closed under their Depends), fetched once into the cache.
ADMIN_PACKAGES="libjetty9-java libjackson2-databind-java libjackson2-core-java libjackson2-annotations-java libservlet-api-java libel-api-java libjsp-api-java libwebsocket-api-java"
ADMIN_DEBS=$CACHE/admin-debs-$(echo "$SUITE $ADMIN_PACKAGES" | hash_of)
admin_debs() {
  local into=$1
  if ! ls "$ADMIN_DEBS"/*.deb >/dev/null 2>&1; then
    rm -rf "$ADMIN_DEBS.tmp" && mkdir -p "$ADMIN_DEBS.tmp"
    # shellcheck disable=SC2086
    fetch_admin_debs() { (cd "$ADMIN_DEBS.tmp" && zk_apt download -qq $ADMIN_PACKAGES >/dev/null); }
    fetch_admin_debs || { zk_apt update -qq && fetch_admin_debs; } ||
      die "apt-get download of Jetty for Java's AdminServer failed ($ADMIN_PACKAGES)"
    rm -rf "$ADMIN_DEBS" && mv "$ADMIN_DEBS.tmp" "$ADMIN_DEBS"
  fi
  cp "$ADMIN_DEBS"/*.deb "$into/"
}

build_zookeeper() {
  local version=$1 ctx jars="" inputs h image=zkfle/zookeeper:$1
  ctx=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-image.XXXXXX")
  mkdir -p "$ctx/lib" "$ctx/debs" "$ctx/debian"
  cp "$IMAGE_DIR"/docker-entrypoint.sh "$IMAGE_DIR"/zkServer.sh "$IMAGE_DIR"/zkCli.sh \
    "$IMAGE_DIR"/log4j.properties "$IMAGE_DIR"/log4j2.properties "$ROOT/scripts/zk-env.sh" "$ctx/"
  # (3.4 has no AdminServer.)
  [[ "$version" == 3.4.* ]] || admin_debs "$ctx/debs"
  if [ "$version" = 3.8.0 ]; then
    cp "$DEB_DIR"/*.deb "$ctx/debs/"
    debian_scripts "$ctx/debian"
  else
    if ! jars=$(scripts/zk-fetch.sh --cached "$version" 2>/dev/null | tail -n1); then
      if ! jars=$(scripts/zk-fetch.sh "$version" | tail -n1); then
        say "SKIPPED zkfle/zookeeper:$version: scripts/zk-fetch.sh cannot get ZooKeeper $version"
        rm -rf "$ctx"
        return 0
      fi
    fi
    cp "$jars"/*.jar "$ctx/lib/"
    jars=/zookeeper/lib
  fi
  inputs=$( (
    echo "$base_hash $version"
    cat "$IMAGE_DIR/Dockerfile.zookeeper"
    cd "$ctx" && find . -type f | sort | xargs sha256sum
  ) | hash_of)
  if [ "$(label_of "$image")" = "$inputs" ]; then
    say "$image is current"
  else
    say "building $image"
    docker build -q -f "$IMAGE_DIR/Dockerfile.zookeeper" --build-arg "BASE=$BASE_IMAGE" \
      --build-arg "ZK_JARS=$jars" --build-arg "ZK_RELEASE=$version" \
      --label "zkfle.inputs=$inputs" -t "$image" "$ctx" >"$ctx.log" 2>&1 ||
      { cat "$ctx.log" >&2; die "docker build of $image failed"; }
    rm -f "$ctx.log"
  fi
  rm -rf "$ctx"
}

for v in $VERSIONS; do
  build_zookeeper "$v"
done

# --- zkfle --------------------------------------------------------------------------------------
PROFILE=${ZKFLE_PROFILE:-release}
case "$PROFILE" in
  release) say "cargo build --release (zkfle's release binary)"; cargo build --release --quiet --bin zkfle ;;
  debug) say "cargo build (zkfle's debug binary, ZKFLE_PROFILE=debug)"; cargo build --quiet --bin zkfle ;;
  *) die "ZKFLE_PROFILE must be release or debug, not $PROFILE" ;;
esac
ctx=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-image.XXXXXX")
cp "${CARGO_TARGET_DIR:-target}/$PROFILE/zkfle" "$IMAGE_DIR/docker-entrypoint.sh" "$ctx/"
# `zkfle decode --interface` links libpcap: the image gets Debian's libpcap0.8 (and libdbus-1-3,
# its one dependency beyond the base), the host's own bookworm packages, fetched by apt once and
# kept in the cache: a rebuild with them there fetches nothing.
PCAP_DEBS=$CACHE/zkfle-debs
if ! ls "$PCAP_DEBS"/libpcap0.8_*.deb "$PCAP_DEBS"/libdbus-1-3_*.deb >/dev/null 2>&1; then
  rm -rf "$PCAP_DEBS.tmp" && mkdir -p "$PCAP_DEBS.tmp"
  fetch_debs() { (cd "$PCAP_DEBS.tmp" && zk_apt download -qq libpcap0.8 libdbus-1-3 >/dev/null); }
  fetch_debs || { zk_apt update -qq && fetch_debs; } ||
    die "apt-get download libpcap0.8 libdbus-1-3 failed (needed by zkfle's image)"
  rm -rf "$PCAP_DEBS" && mv "$PCAP_DEBS.tmp" "$PCAP_DEBS"
fi
mkdir -p "$ctx/debs"
cp "$PCAP_DEBS"/*.deb "$ctx/debs/"
inputs=$( (
  echo "$base_hash"
  cat "$IMAGE_DIR/Dockerfile.zkfle"
  cd "$ctx" && find . -type f | sort | xargs sha256sum
) | hash_of)
if [ "$(label_of zkfle/zkfle:latest)" = "$inputs" ]; then
  say "zkfle/zkfle:latest is current"
else
  say "building zkfle/zkfle:latest"
  docker build -q -f "$IMAGE_DIR/Dockerfile.zkfle" --build-arg "BASE=$BASE_IMAGE" \
    --label "zkfle.inputs=$inputs" -t zkfle/zkfle:latest "$ctx" >"$ctx.log" 2>&1 ||
    { cat "$ctx.log" >&2; die "docker build of zkfle/zkfle:latest failed"; }
  rm -f "$ctx.log"
fi
rm -rf "$ctx"
say "images ready in $((SECONDS - start)) s"
