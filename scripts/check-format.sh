#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what .clang-format makes of it.
# `bash scripts/check-format.sh --fix` rewrites them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format "$f" | cmp -s "$f" - || bad+=("$f")
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "check-format: not formatted with .clang-format (fix: bash scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
