#!/usr/bin/env bash
# Renders /docs of a running service in headless Chromium with background networking off and
# writes a screenshot, to check that the API reference works with no network access.
# Needs Debian's chromium (apt-get install chromium). Usage: scripts/check-docs.sh [base-url] [out.png]
set -euo pipefail
base="${1:-http://127.0.0.1:8080}"
out="${2:-docs.png}"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --window-size=1280,1600 --virtual-time-budget=8000 \
  --dump-dom "$base/docs" 2>/dev/null | grep -q 'opblock-tag' || { echo "docs did not render" >&2; exit 1; }
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --window-size=1280,1600 --virtual-time-budget=8000 \
  --screenshot="$out" "$base/docs" 2>/dev/null
echo "docs rendered; screenshot in $out"
