#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-fuzz, replays every input kept in
# fuzz/regression/TARGET/ (inputs that once crashed), then fuzzes each target
# for a while, one at a time.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]   (default 30 s, every target)
# Seeds come from the test fixtures, fuzz/seeds/ and small models trained
# and packed on the fly; corpora grow in build-fuzz/corpus/TARGET. A crash leaves its
# input in build-fuzz/artifacts/ and fails the script: add it to
# fuzz/regression/TARGET/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(pac_file xgboost_json xgboost_ubjson sklearn_json
  sklearn_stream lightgbm_text forest_file csv trace store_codec gather_request)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPACSET_FUZZ=ON -DPACSET_SANITIZE=address,undefined -DPACSET_BUILD_TESTS=OFF \
  -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzzers pacset
C=build-fuzz/corpus
for t in "${TARGETS[@]}"; do mkdir -p "$C/$t"; done
mkdir -p build-fuzz/artifacts
# Seeds: small real files of each kind (fuzz/seeds/ holds the ones no tool
# here writes: forest files, traces, store catalog records).
cp tests/data/lightgbm/*.txt "$C/lightgbm_text/" 2>/dev/null || true
for t in "${TARGETS[@]}"; do
  if [ -d "fuzz/seeds/$t" ]; then cp fuzz/seeds/"$t"/* "$C/$t/"; fi
done
if [ ! -f build-fuzz/seeds.done ]; then
  /usr/bin/python3 - "$C" tools/pacset-sklearn-export <<'PY'
import os, subprocess, sys, tempfile
import joblib, numpy as np, xgboost as xgb
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
c, exporter = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)); y = (X[:, 0] > 0).astype(int); y3 = (X[:, 1] > 0) + y
for name, params, label in [("binary", {"objective": "binary:logistic"}, y),
                            ("multi", {"objective": "multi:softprob", "num_class": 3}, y3)]:
    b = xgb.train({**params, "max_depth": 3}, xgb.DMatrix(X, label=label), 3)
    open(os.path.join(c, "xgboost_json", name + ".json"), "wb").write(bytes(b.save_raw("json")))
    open(os.path.join(c, "xgboost_ubjson", name + ".ubj"), "wb").write(bytes(b.save_raw("ubj")))
for name, est in [("rf", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)),
                  ("gb", GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0))]:
    est.fit(X, y3)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, name + ".joblib")
        joblib.dump(est, p)
        subprocess.run([sys.executable, exporter, p, "-o",
                        os.path.join(c, "sklearn_json", name + ".json")], check=True)
        if os.path.isdir(os.path.join(c, "sklearn_stream")):  # the target supplies the magic
            stream = subprocess.run([sys.executable, exporter, p, "--stream"], check=True,
                                    capture_output=True).stdout
            open(os.path.join(c, "sklearn_stream", name + ".bin"), "wb").write(stream[8:])
np.savetxt(os.path.join(c, "csv", "rows.csv"), X[:5], delimiter=",")
PY
  build-fuzz/tools/pacset pack "$C/xgboost_json/binary.json" -o "$C/pac_file/seed.pac" \
    --block-size 4KiB >/dev/null
  touch build-fuzz/seeds.done
fi
export ASAN_OPTIONS=detect_leaks=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for t in "${TARGETS[@]}"; do
  bin=build-fuzz/fuzz/${t}_fuzzer
  if [ -d "fuzz/regression/$t" ] && [ -n "$(ls -A "fuzz/regression/$t")" ]; then
    echo "== $t: replaying fuzz/regression/$t"
    if ! "$bin" -rss_limit_mb=2048 -timeout=25 "fuzz/regression/$t"/* \
        >"build-fuzz/$t.replay.log" 2>&1; then
      echo "FAIL: $t regression input (see build-fuzz/$t.replay.log)"; tail -30 "build-fuzz/$t.replay.log"
      status=1; continue
    fi
  fi
  echo "== $t: ${SECONDS_PER_TARGET}s"
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len=262144 -timeout=25 \
      -rss_limit_mb=2048 -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
      "$C/$t" 2>"build-fuzz/$t.log"; then
    echo "FAIL: $t (see build-fuzz/$t.log and build-fuzz/artifacts/)"; tail -30 "build-fuzz/$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "build-fuzz/$t.log" | tail -2
  fi
done
exit $status
