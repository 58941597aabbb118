#!/usr/bin/env bash
# Installs what tests/visual.rs and tests/wireshark.rs drive, when missing: Debian's
# `chromium` (the timeline page, headless) and `tshark` (the generated Lua dissector).
# Non-interactive: the question whether non-root users may capture is answered "no".
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
if [ ${#missing[@]} -eq 0 ]; then
  echo "chromium: $(chromium --version 2>/dev/null | head -n1)"
  echo "tshark: $(tshark --version 2>/dev/null | head -n1)"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "viewers-env: run as root (sudo) to install ${missing[*]}" >&2; exit 1; }
echo "installing ${missing[*]} (apt-get)"
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
# shellcheck source=scripts/zk-env.sh
. "$(dirname "$0")/zk-env.sh"
zk_apt update -qq
zk_apt install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "chromium: $(chromium --version 2>/dev/null | head -n1)"
echo "tshark: $(tshark --version 2>/dev/null | head -n1)"
