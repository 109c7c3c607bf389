#!/usr/bin/env bash
# Regenerates docs/trace-report.png and docs/trace-layouts.png: renders the
# HTML of `pacset-trace report --html` and `pacset-trace layouts` (made by
# bench/trace_repack_bench.py: a real mount, real traces) in Debian's
# headless chromium, to check that the reports render in a real browser.
# Root, /dev/fuse; installs chromium if missing (apt-get install chromium).
#   bash scripts/trace-screenshots.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
command -v chromium >/dev/null || apt-get install -y --no-install-recommends chromium
OUT=$(mktemp -d)
/usr/bin/python3 bench/trace_repack_bench.py --build "$BUILD" --out "$OUT" --serve-rows 300
"$BUILD/tools/pacset-trace" report "$OUT/eval-forest.trace" --html "$OUT/report.html" \
  --model "$OUT/before.pac"
shot() {  # html png width height
  local profile
  profile=$(mktemp -d)
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --hide-scrollbars --window-size="$3,$4" --screenshot="$2" "file://$1" 2>/dev/null
  rm -rf "$profile"
  test -s "$2"
}
shot "$OUT/report.html" docs/trace-report.png 1200 1500
shot "$OUT/layouts.html" docs/trace-layouts.png 1100 900
echo "wrote docs/trace-report.png and docs/trace-layouts.png (inputs in $OUT)"
