#!/usr/bin/env bash
# Fails when a folder includes a header of a folder above it. The layers,
# lowest first (docs/architecture.md); the libraries of CMakeLists.txt link
# in the same order:
#   util < model < layout < protocol, store < engine < trace (analysis) < fs < tools
# trace/ itself (the format and the writer the daemon links) stays on util;
# trace/analysis/ reads forests through the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [util]="util"
  [model]="model util"
  [layout]="layout model util"
  [protocol]="protocol util"
  [store]="store layout model util"
  [engine]="engine store protocol layout model util"
  [trace]="trace util"
  [trace/analysis]="trace/analysis trace engine store protocol layout model util"
  [fs]="fs trace store protocol layout model util"
)
status=0
for dir in "${!allowed[@]}"; do
  files=$(git ls-files "$dir/*.cc" "$dir/*.h")
  [ "$dir" = trace ] && files=$(echo "$files" | grep -v '^trace/analysis/' || true)
  for f in $files; do
    while read -r inc; do
      top=${inc%%/*}
      [ "$top" = trace ] && [[ $inc == trace/analysis/* ]] && top=trace/analysis
      case " ${allowed[$dir]} " in
        *" $top "*) ;;
        *) echo "check-layers: $f includes $inc ($dir may include: ${allowed[$dir]})" >&2; status=1 ;;
      esac
    done < <(grep -oE '^#include "[a-z_]+/[^"]+"' "$f" | sed 's/#include "//; s/"$//')
  done
done
[ $status -eq 0 ] && echo "check-layers: every include goes down"
exit $status
