#!/usr/bin/env bash
# Renders an `offgen compare` report.html headless in Chromium and saves a screenshot, to look at
# the report as a person would.  Usage: tools/screenshot_report.sh REPORT_HTML OUT_PNG [WIDTHxHEIGHT]
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 REPORT_HTML OUT_PNG [WIDTHxHEIGHT]" >&2
  exit 2
fi
html=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1400x2000}
browser=$(command -v chromium-headless-shell || command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z "$browser" ]]; then
  echo "no Chromium found (Debian: apt-get install chromium-headless-shell)" >&2
  exit 3
fi
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$out" "file://$html" >/dev/null 2>&1
[[ -s "$out" ]] || { echo "Chromium wrote no screenshot" >&2; exit 1; }
echo "$out"
