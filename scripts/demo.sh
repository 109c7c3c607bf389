#!/usr/bin/env bash
# The main job, end to end, on a fresh Debian 12 machine (as root), on the
# embedded default store (RocksDB): install, build, train a real model, import
# it into RocksDB (packed with PACSET), mount the store with pacsetfs, predict
# through the mount, show the block trace, unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
BIN=$PWD/build/tools
WORK=${PACSET_DEMO_DIR:-$(mktemp -d /tmp/pacset-demo.XXXXXX)}
STORE="rocksdb:$WORK/store"      # the embedded default; /var/lib/pacsetfs/store when installed
MNT="$WORK/models"
mkdir -p "$MNT"
cleanup() {
  if grep -qs " $MNT " /proc/mounts; then "$BIN/pacsetfs" unmount "$MNT" || umount -l "$MNT"; fi
}
trap cleanup EXIT

echo "== 1. training a random forest on Fashion-MNIST with scikit-learn (64 trees)"
/usr/bin/python3 bench/train_models.py --out "$WORK" --rows 20000 --trees 64 --test-rows 200 rf

echo "== 2. importing it into the RocksDB store $STORE (packed with the PACSET layout, 4 KiB blocks)"
"$BIN/pacset" import "$WORK/rf.joblib" --name fashion --store "$STORE" --block-size 4KiB
"$BIN/pacset" ls --store "$STORE"

echo "== 3. mounting the store: every forest is a file"
"$BIN/pacsetfs" mount "$MNT" --store "$STORE"
ls -l "$MNT"

echo "== 4. predicting 200 test rows through the mount, cold, recording the blocks it reads"
"$BIN/pacset-trace" record --mount "$MNT" --cold -o "$WORK/trace.bin" -- \
  "$BIN/pacset" predict "$MNT/fashion.pac" --input "$WORK/test.csv" --output "$WORK/pred.csv" \
  --mark-requests row
echo "first 3 predictions (class probabilities):"
head -3 "$WORK/pred.csv"
/usr/bin/python3 - "$WORK" <<'PY'
import sys, joblib, numpy as np
w = sys.argv[1]
rf = joblib.load(f"{w}/rf.joblib")
X = np.loadtxt(f"{w}/test.csv", delimiter=",", skiprows=1)
ours = np.loadtxt(f"{w}/pred.csv", delimiter=",")
print(f"scikit-learn predict_proba agrees: max |difference| = {np.max(np.abs(ours - rf.predict_proba(X))):.3g}")
PY

echo "== 5. the block trace"
"$BIN/pacset-trace" report "$WORK/trace.bin"
"$BIN/pacset-trace" report "$WORK/trace.bin" --html "$WORK/trace.html" --model "$MNT/fashion.pac" >/dev/null
echo "(heat map and distributions: $WORK/trace.html)"

echo "== 6. unmounting"
"$BIN/pacsetfs" unmount "$MNT"
echo "done; everything is in $WORK"
