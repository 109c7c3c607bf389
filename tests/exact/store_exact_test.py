#!/usr/bin/python3
"""Exactness of `pacset predict --store` (predictions straight from a block
store, no mount) against the real XGBoost and scikit-learn.

Models of both libraries are packed at 256 B, 1 KiB, 4 KiB and 64 KiB blocks
(below 4 KiB the header flows over several blocks: format version 2),
imported into a real RocksDB store, a directory store and a real
redis-server on loopback, and predicted from each store on the adversarial
rows of tests/exact (values at thresholds and their float32/float64
neighbours, NaN, +-0, +-inf): XGBoost predictions and margins bit for bit,
scikit-learn within 1e-12 of predict_proba / predict and bit-identical to the
local .pac, leaf ids equal to pred_leaf / apply.

Usage: store_exact_test.py --pacset PATH [--keep DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import xgboost as xgb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "testkit"))
import exactlib  # noqa: E402
import sklearn_exact_test  # noqa: E402
import xgboost_exact_test  # noqa: E402
from fslib import Redis  # noqa: E402

BLOCK_SIZES = ("256", "1KiB", "4KiB", "64KiB")
XGB_MODELS = ("softprob", "binary", "rf", "reg")
SKLEARN_MODELS = ("rf_multi", "gb_binary", "rf_reg", "et_binary")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def xgboost_cases(work, rng):
    """(name, model file, rows csv, want predict, want margin, want leaf, bit-exact)."""
    X, models = xgboost_exact_test.train_models(rng)
    for name, booster in models:
        if name not in XGB_MODELS:
            continue
        rows = xgboost_exact_test.adversarial_rows(booster, X, rng)
        dm = xgb.DMatrix(rows)
        path = os.path.join(work, f"xgb_{name}.json")
        booster.save_model(path)
        yield (f"xgb_{name}", path, exactlib.write_rows(os.path.join(work, f"xgb_{name}.csv"), rows),
               booster.predict(dm), booster.predict(dm, output_margin=True),
               booster.predict(dm, pred_leaf=True).astype(np.int64), True)


def sklearn_cases(work, rng, exporter):
    import joblib
    data = sklearn_exact_test.datasets_for(rng)
    for name, est, key, _ in sklearn_exact_test.train_models(data):
        if name not in SKLEARN_MODELS:
            continue
        X = data[key][0]
        rows = sklearn_exact_test.adversarial_rows(est, X, rng)
        # Packed from the exported JSON: the pickle route is sklearn_exact_test's.
        pickled = os.path.join(work, f"sk_{name}.joblib")
        joblib.dump(est, pickled)
        path = exporter.export(pickled, os.path.join(work, f"sk_{name}.json"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = est.predict_proba(rows) if hasattr(est, "classes_") else est.predict(rows)
            margin = est.decision_function(rows) if hasattr(est, "decision_function") else want
            leaves = est.apply(rows).reshape(len(rows), -1)
        yield (f"sk_{name}", path, exactlib.write_rows(os.path.join(work, f"sk_{name}.csv"), rows),
               want, margin, leaves, False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--keep", help="keep models, rows and stores in this directory")
    args = ap.parse_args()
    rng = np.random.default_rng(20261201)
    checker = exactlib.Checker(args.pacset)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        redis = Redis(work, persist=False).start()
        try:
            stores = {"rocksdb": "rocksdb:" + os.path.join(work, "rocks"),
                      "dir": "dir:" + os.path.join(work, "dirstore"),
                      "redis": redis.uri}
            cases = list(xgboost_cases(work, rng)) + list(sklearn_cases(
                work, rng, exactlib.Exporter(sklearn_exact_test.find_exporter(args.pacset))))
            for name, path, rows, want, want_margin, want_leaf, bit_exact in cases:
                failures_before = len(checker.failures)
                for bs in BLOCK_SIZES:
                    pac = os.path.join(work, f"{name}.{bs}.pac")
                    run([args.pacset, "pack", path, "-o", pac, "--block-size", bs])
                    local = checker.predict(pac, rows)
                    local_margin = checker.predict(pac, rows, "--margin")
                    forest = f"{name}-{bs}"
                    for kind, uri in stores.items():
                        run([args.pacset, "import", pac, "--name", forest, "--store", uri])
                        label = f"{name} {bs} {kind}"
                        got = checker.predict(forest, rows, "--store", uri)
                        got_margin = checker.predict(forest, rows, "--store", uri, "--margin")
                        if bit_exact:
                            checker.same_bits(label, "predict", got, want)
                            checker.same_bits(label, "margin", got_margin, want_margin)
                        else:
                            checker.close(label, "predict", got, want, 1e-12)
                            checker.close(label, "margin", got_margin, want_margin, 1e-12)
                        checker.expect(np.array_equal(got.view(np.uint64), local.view(np.uint64))
                                       and np.array_equal(got_margin.view(np.uint64),
                                                          local_margin.view(np.uint64)),
                                       f"{label}: the store and the local .pac predict differently")
                        if bs in ("256", "4KiB"):
                            checker.same_ints(label, "leaf",
                                              checker.predict(forest, rows, "--store", uri, "--leaf"),
                                              want_leaf)
                verdict = "ok" if len(checker.failures) == failures_before else "MISMATCH"
                print(f"{name:14s} {len(want):5d} rows x {len(BLOCK_SIZES)} block sizes x "
                      f"{len(stores)} stores: {verdict}")
        finally:
            redis.stop()
    return checker.finish()


if __name__ == "__main__":
    sys.exit(main())
