#!/usr/bin/env bash
# The main job, end to end, on a fresh Debian 12 machine (as root):
# install, build, train a real model, pack it with PACSET, predict.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
PACSET=$PWD/build/tools/pacset
WORK=${PACSET_DEMO_DIR:-$(mktemp -d /tmp/pacset-demo.XXXXXX)}
echo "== working in $WORK"
echo "== training a random forest on Fashion-MNIST (scikit-learn, 64 trees)"
/usr/bin/python3 bench/train_models.py --out "$WORK" --rows 20000 --trees 64 --test-rows 200 rf
echo "== packing it with the PACSET layout (4 KiB blocks)"
"$PACSET" pack "$WORK/rf.joblib" -o "$WORK/rf.pac" --block-size 4KiB
"$PACSET" info "$WORK/rf.pac"
echo "== predicting 200 test rows from the packed file (first 3 shown)"
"$PACSET" predict "$WORK/rf.pac" --input "$WORK/test.csv" --output "$WORK/pred.csv" --threads 2
head -3 "$WORK/pred.csv"
/usr/bin/python3 - "$WORK" <<'PY'
import sys, joblib, numpy as np
w = sys.argv[1]
rf = joblib.load(f"{w}/rf.joblib")
X = np.loadtxt(f"{w}/test.csv", delimiter=",", skiprows=1)
ours = np.loadtxt(f"{w}/pred.csv", delimiter=",")
print(f"== scikit-learn agrees: max |difference| = {np.max(np.abs(ours - rf.predict_proba(X))):.3g}")
PY
echo "== blocks each layout makes a row touch"
"$PACSET" layout-report "$WORK/rf.joblib" --input "$WORK/test.csv" --layouts bfs,dfs,pacset
