#!/usr/bin/env bash
# Builds the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-fuzz and runs each for a while.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
# Seeds come from the test fixtures and from .pac files packed on the fly.
# A crash leaves its input in build-fuzz/artifacts/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPACSET_FUZZ=ON -DPACSET_SANITIZE=address,undefined -DPACSET_BUILD_TESTS=OFF \
  -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target pac_file_fuzzer model_import_fuzzer csv_fuzzer \
  trace_fuzzer pacset
C=build-fuzz/corpus
mkdir -p "$C/pac" "$C/model" "$C/csv" "$C/trace" build-fuzz/artifacts
# Seeds: small real files of each kind.
for f in tests/data/lightgbm/*.txt; do printf '\x03' | cat - "$f" > "$C/model/lgbm-$(basename "$f")"; done
if [ ! -f "$C/pac/seed.pac" ]; then
  /usr/bin/python3 - "$C" <<'PY'
import sys, os, numpy as np, xgboost as xgb
c = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)); y = (X[:, 0] > 0).astype(int)
b = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(X, label=y), 3)
raw = b.save_raw("json")
open(os.path.join(c, "model", "xgb.json"), "wb").write(b"\x00" + bytes(raw))
np.savetxt(os.path.join(c, "csv", "rows.csv"), X[:5], delimiter=",")
np.savetxt(os.path.join(c, "seed.csv"), X[:5], delimiter=",")
PY
  tail -c +2 "$C/model/xgb.json" > "$C/seed.json"
  build-fuzz/tools/pacset pack "$C/seed.json" -o "$C/pac/seed.pac" --block-size 4KiB >/dev/null
fi
ASAN_OPTIONS=detect_leaks=0
export ASAN_OPTIONS
status=0
for t in pac_file model_import csv trace; do
  echo "== $t: ${SECONDS_PER_TARGET}s"
  dir=$C/${t%_file}; [ "$t" = model_import ] && dir=$C/model; [ "$t" = pac_file ] && dir=$C/pac
  if ! build-fuzz/fuzz/${t}_fuzzer -max_total_time="$SECONDS_PER_TARGET" -max_len=262144 \
      -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 "$dir" 2>build-fuzz/$t.log; then
    echo "FAIL: $t (see build-fuzz/$t.log and build-fuzz/artifacts/)"; tail -30 build-fuzz/$t.log; status=1
  else
    grep -E "stat::number_of_executed_units|Done" build-fuzz/$t.log | tail -1
  fi
done
exit $status
