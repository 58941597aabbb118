#!/usr/bin/env bash
# own-loopback.sh: runs a command in a network namespace of its own, whose loopback (all of
# 127.0.0.0/8 and ::1) no other command sees, with a temp directory of its own.
#
# Usage:
#   scripts/own-loopback.sh COMMAND [ARG...]
#
# The Java-backed tests start ensembles on 127.0.0.x with fixed ports and take a machine-wide
# lock (a file in the temp directory: tests/common/join.rs) so that two of them never meet.
# Two commands run under this script each have their own 127.0.0.x and their own lock, so
# scripts/test.sh and scripts/matrix.sh --jobs run them side by side: they mostly wait on
# election timeouts, not on the CPU. Nothing else changes: the file system, the processes and
# the Docker engine are the machine's. Needs root (unshare -n); the exit status is COMMAND's.
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkfle-loopback.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Not exec'd: the trap removes the temp directory after COMMAND.
TMPDIR=$tmp unshare --net -- bash -c 'ip link set lo up && exec "$@"' own-loopback "$@"
