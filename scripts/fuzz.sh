#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-fuzz (BUILD), replays every input kept in
# fuzz/regression/TARGET/ (inputs that once crashed), then fuzzes each target
# for a while, one at a time.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]   (default 30 s, every target)
# Seeds come from the test fixtures, fuzz/seeds/ and small models trained
# and packed on the fly; corpora grow in BUILD/corpus/TARGET. A crash leaves its
# input in BUILD/artifacts/ and fails the script: add it to
# fuzz/regression/TARGET/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(pac_file pac_structure xgboost_json xgboost_ubjson sklearn_json
  sklearn_stream lightgbm_text forest_file csv trace store_codec gather_request)
# The build: $PACSET_FUZZ_BUILD_DIR when it is configured with the fuzzers
# already (scripts/test.sh's sanitizer build, which runs the tests too), else
# ./build-fuzz, configured here.
B=${PACSET_FUZZ_BUILD_DIR:-build-fuzz}
if ! grep -q '^PACSET_FUZZ:BOOL=ON' "$B/CMakeCache.txt" 2>/dev/null; then
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPACSET_FUZZ=ON -DPACSET_SANITIZE=address,undefined -DPACSET_BUILD_TESTS=OFF \
    -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$B" -j"$(nproc)" --target fuzzers pacset
C=$B/corpus
for t in "${TARGETS[@]}"; do mkdir -p "$C/$t"; done
mkdir -p $B/artifacts
# Seeds: small real files of each kind (fuzz/seeds/ holds the ones no tool
# here writes: forest files, traces, store catalog records).
cp tests/data/lightgbm/*.txt "$C/lightgbm_text/" 2>/dev/null || true
for t in "${TARGETS[@]}"; do
  if [ -d "fuzz/seeds/$t" ]; then cp fuzz/seeds/"$t"/* "$C/$t/"; fi
done
# Seeds made once per build directory (the stamp names this seed set: a
# new set gets a new stamp). One Python run trains small models of every
# kind the importers read; the .pac seeds are those models packed every way
# the reader must handle: leaf records of width 1 and 3, inline classes,
# every postprocess, compact and wide nodes, 256 B and 4 KiB blocks, format
# versions 2 and 3.
if [ ! -f $B/seeds-4.done ]; then
  M=$B/seed-models
  mkdir -p "$M" "$C"/{xgboost_json,xgboost_ubjson,sklearn_json,sklearn_stream,csv,pac_file,pac_structure}
  /usr/bin/python3 - "$C" "$M" tools/pacset-sklearn-export <<'PY'
import importlib.machinery, importlib.util, io, os, sys
import numpy as np, xgboost as xgb
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                              HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                              RandomForestClassifier, RandomForestRegressor)
c, m, exporter = sys.argv[1:4]
# The exporter in this process: no interpreter and scikit-learn import per model.
loader = importlib.machinery.SourceFileLoader("sklearn_export", exporter)
export = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
loader.exec_module(export)
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)); noise = rng.normal(size=300)  # noise: trees of full depth
y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * noise > 0).astype(int); y3 = (X[:, 1] + noise > 0) + y
counts = rng.poisson(np.exp(0.5 * X[:, 2]))
# XGBoost: sigmoid, softmax, class index, identity, exponential.
for name, params, label in [("binary", {"objective": "binary:logistic"}, y),
                            ("multi", {"objective": "multi:softprob", "num_class": 3}, y3),
                            ("softmax", {"objective": "multi:softmax", "num_class": 3}, y3),
                            ("reg", {"objective": "reg:squarederror"}, X[:, 0] + X[:, 1]),
                            ("poisson", {"objective": "count:poisson"}, counts)]:
    b = xgb.train({**params, "max_depth": 3}, xgb.DMatrix(X, label=label), 3)
    open(os.path.join(c, "xgboost_json", name + ".json"), "wb").write(bytes(b.save_raw("json")))
    open(os.path.join(c, "xgboost_ubjson", name + ".ubj"), "wb").write(bytes(b.save_raw("ubj")))
# XGBoost categorical splits (partition-based and one-hot; the JSON holds bare
# NaN split conditions) and DART (weight_drop).
Xc = np.column_stack([rng.integers(0, 40, 300), rng.integers(0, 3, 300), X[:, 0]]).astype(float)
Xc[rng.random(size=Xc.shape) < 0.1] = np.nan
dc = xgb.DMatrix(Xc, label=y, feature_types=["c", "c", "q"], enable_categorical=True)
for name, data, params in [
        ("cat", None, {"tree_method": "hist", "max_cat_to_onehot": 1}),
        ("cat_onehot", None, {"tree_method": "hist", "max_cat_to_onehot": 8}),
        ("dart", xgb.DMatrix(X, label=y), {"booster": "dart", "rate_drop": 0.5})]:
    b = xgb.train({**params, "objective": "binary:logistic", "max_depth": 3}, data or dc, 3)
    open(os.path.join(c, "xgboost_json", name + ".json"), "wb").write(bytes(b.save_raw("json")))
    open(os.path.join(c, "xgboost_ubjson", name + ".ubj"), "wb").write(bytes(b.save_raw("ubj")))
# scikit-learn: 3 classes (leaf records of width 3, inline classes; boosting
# of width 1), 2 classes (sigmoid pair), regressors (identity, mean and sum);
# HistGradientBoosting with a categorical column and NaN (categorical splits).
Xh = X.copy(); Xh[:, 3] = rng.integers(0, 12, 300); Xh[rng.random(Xh.shape) < 0.1] = np.nan
hist = dict(max_iter=3, max_leaf_nodes=5, categorical_features=[3], random_state=0)
for name, est, label in [
        ("hgb", HistGradientBoostingClassifier(**hist).fit(Xh, y3), None),
        ("hgbp", HistGradientBoostingRegressor(loss="poisson", **hist).fit(Xh, counts), None),
        ("rf", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), y3),
        ("gb", GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), y3),
        ("rf2", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), y),
        ("gb2", GradientBoostingClassifier(n_estimators=3, max_depth=3, random_state=0), y),
        ("rfr", RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0), X[:, 0]),
        ("gbr", GradientBoostingRegressor(n_estimators=3, max_depth=3, random_state=0), X[:, 0])]:
    if label is not None:
        est.fit(X, label)
    export.write_atomically(os.path.join(c, "sklearn_json", name + ".json"), export.export(est))
    stream = io.BytesIO()
    export.write_stream(est, stream)
    open(os.path.join(c, "sklearn_stream", name + ".bin"), "wb").write(
        stream.getvalue()[8:])  # the target supplies the magic
np.savetxt(os.path.join(c, "csv", "rows.csv"), X[:5], delimiter=",")
PY
  # LightGBM's text fixtures are float64 models: wide nodes whatever is asked.
  for model in "$C"/xgboost_json/*.json "$C"/sklearn_json/*.json tests/data/lightgbm/*.txt; do
    base=$(basename "${model%.*}")
    case $model in */xgboost_json/*) base=xgb-$base ;; */sklearn_json/*) base=sk-$base ;;
      *) base=lgb-$base ;; esac
    for variant in "4KiB" "256 --wide-nodes" "256 --format-version 2" \
        "4KiB --format-version 2 --layout dfs"; do
      read -r bs opts <<<"$variant"
      # shellcheck disable=SC2086  # opts: several words
      if ! $B/tools/pacset pack "$model" -o "$M/$base-$bs${opts// /}.pac" --block-size "$bs" \
          $opts >/dev/null 2>"$M/pack.err"; then
        # Categorical splits and isolation scores are version 3 only.
        grep -q "format version 3" "$M/pack.err" && continue
        cat "$M/pack.err" >&2
        exit 1
      fi
    done
  done
  cp "$M"/*.pac "$C/pac_file/"
  cp "$M"/*.pac "$C/pac_structure/"
  touch $B/seeds-4.done
fi
export ASAN_OPTIONS=detect_leaks=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# One target: replay its regression inputs, then fuzz it. Its report goes to
# $B/$t.report (printed whole when it ends, so parallel runs do not mix);
# the exit status says whether it passed.
fuzz_one() {
  local t=$1 bin=$B/fuzz/${1}_fuzzer
  if [ -d "fuzz/regression/$t" ] && [ -n "$(ls -A "fuzz/regression/$t")" ]; then
    echo "== $t: replaying fuzz/regression/$t"
    if ! "$bin" -rss_limit_mb=2048 -timeout=25 "fuzz/regression/$t"/* \
        >"$B/$t.replay.log" 2>&1; then
      echo "FAIL: $t regression input (see $B/$t.replay.log)"; tail -30 "$B/$t.replay.log"
      return 1
    fi
  fi
  echo "== $t: ${SECONDS_PER_TARGET}s"
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len=262144 -timeout=25 \
      -rss_limit_mb=2048 -artifact_prefix="$B/artifacts/$t-" -print_final_stats=1 \
      "$C/$t" 2>"$B/$t.log"; then
    echo "FAIL: $t (see $B/$t.log and $B/artifacts/)"; tail -30 "$B/$t.log"
    return 1
  fi
  grep -E "stat::number_of_executed_units|cov:" "$B/$t.log" | tail -2 || true
}
# A fuzzer runs on one core: as many targets at once as there are cores
# (PACSET_FUZZ_JOBS to choose), each for its full time.
jobs=${PACSET_FUZZ_JOBS:-$(nproc)}
status=0
running=()
finish_one() {  # waits for the oldest running target
  local pid=${running[0]%%:*} t=${running[0]#*:}
  running=("${running[@]:1}")
  wait "$pid" || status=1
  cat "$B/$t.report"
}
for t in "${TARGETS[@]}"; do
  [ ${#running[@]} -lt "$jobs" ] || finish_one
  fuzz_one "$t" >"$B/$t.report" 2>&1 &
  running+=("$!:$t")
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
exit $status
