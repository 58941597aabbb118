#!/usr/bin/env bash
# Regenerates what the docs show of the bundled fixtures: every `<!-- output: CMD -->` block in
# README.md and docs/ (tests/docs.rs checks them byte for byte; this runs that test with
# ZKFLE_DOCS_WRITE=1, which rewrites the blocks that differ), and the README's screenshot of the
# timeline page of fixtures/basic3 (docs/img/timeline-basic3.png, and the page's drawing calls
# beside it, docs/img/timeline-basic3.draws, which tests/visual.rs compares; needs chromium:
# scripts/viewers-env.sh). Blocks that need live servers are recorded by scripts/docs-record.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ZKFLE_DOCS_WRITE=1 cargo test --test docs
cargo build --bin zkfle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${CARGO_TARGET_DIR:-target}"/debug/zkfle decode --format html fixtures/basic3/capture.pcap >"$tmp/basic3.html"
chromium=$(command -v chromium || command -v chromium-browser) || {
  echo "docs.sh: chromium is needed for the screenshot (scripts/viewers-env.sh)" >&2
  exit 1
}
# The same window and options as tests/visual.rs, whose checks cover what the page draws.
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --user-data-dir="$tmp/profile" --virtual-time-budget=10000 --window-size=1400,760 \
  --screenshot="$tmp/shot.png" "$tmp/basic3.html" >/dev/null 2>&1
cp "$tmp/shot.png" docs/img/timeline-basic3.png
# The page's drawing calls beside the image: tests/visual.rs checks the image is current by
# them, not by its pixels.
ZKFLE_DOCS_WRITE=1 cargo test --test visual the_readme_image_is_of_todays_page
echo "docs.sh: output blocks checked and rewritten, docs/img/timeline-basic3.png redrawn with its drawing calls (timeline-basic3.draws)" >&2
