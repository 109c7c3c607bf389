#!/usr/bin/python3
"""Warm-cache batch throughput: `pacset predict` on a packed .pac file (in the
page cache) against the training library's own predictor, on the same rows
and the same number of threads, measured in the same run.

  throughput_bench.py --pacset build/tools/pacset [--rows 10000] [--repeat 5]

Models (Debian's Fashion-MNIST): an XGBoost multi:softprob model with 500+
trees and a scikit-learn random forest grown to purity. Times exclude model
loading and CSV parsing on our side and DMatrix construction on XGBoost's
(each side's own input preparation); each figure is the mean of --repeat
passes after one warm-up pass. XGBoost is timed with inplace_predict: predict()
on a DMatrix would return cached predictions after the first call.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testkit"))
import fashion_mnist  # noqa: E402


def pacset_rate(pacset, pac, rows_csv, threads, repeat, layout_note=""):
    subprocess.run([pacset, "predict", pac, "--input", rows_csv, "--output", "/dev/null",
                    "--threads", str(threads)], check=True)  # warm the page cache
    r = subprocess.run([pacset, "predict", pac, "--input", rows_csv, "--output", "/dev/null",
                        "--threads", str(threads), "--repeat", str(repeat), "--timing"],
                       check=True, capture_output=True, text=True)
    m = re.search(r"= (\d+) rows/s", r.stderr)
    return float(m.group(1))


def timed(fn, repeat):
    fn()  # warm-up
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--train-rows", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--xgb-rounds", type=int, default=60, help="x10 classes = trees")
    ap.add_argument("--rf-trees", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    import joblib
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y = fashion_mnist.load("train")
    X, y = X[: a.train_rows], y[: a.train_rows]
    Xt, _ = fashion_mnist.load("test")
    Xt = np.concatenate([Xt] * (a.rows // len(Xt) + 1))[: a.rows]
    with tempfile.TemporaryDirectory() as tmp:
        rows_csv = os.path.join(tmp, "rows.csv")
        np.savetxt(rows_csv, Xt, delimiter=",", fmt="%d")
        booster = xgb.train({"objective": "multi:softprob", "num_class": 10, "max_depth": 6,
                             "nthread": 2, "seed": 0}, xgb.DMatrix(X, label=y), a.xgb_rounds)
        xgb_path = os.path.join(tmp, "xgb.json")
        booster.save_model(xgb_path)
        rf = RandomForestClassifier(n_estimators=a.rf_trees, n_jobs=2, random_state=0).fit(X, y)
        rf_path = os.path.join(tmp, "rf.joblib")
        joblib.dump(rf, rf_path)
        xgb_trees = len(booster.get_dump())
        print(f"models: XGBoost {xgb_trees} trees (depth 6); random forest {a.rf_trees} trees "
              f"({sum(e.tree_.node_count for e in rf.estimators_)} nodes); {a.rows} rows")
        print(f"{'model':<8} {'layout':<8} {'thr':>3} {'library rows/s':>15} {'pacset rows/s':>14}"
              f" {'ratio':>6}")
        for threads in [int(t) for t in a.threads.split(",")]:
            booster.set_param({"nthread": threads})
            lib = a.rows / timed(lambda: booster.inplace_predict(Xt), a.repeat)
            rf.set_params(n_jobs=threads)
            lib_rf = a.rows / timed(lambda: rf.predict_proba(Xt), a.repeat)
            for layout in ("pacset", "dfs"):
                for name, src, lib_rate in (("xgboost", xgb_path, lib), ("sklearn", rf_path, lib_rf)):
                    pac = os.path.join(tmp, f"{name}-{layout}.pac")
                    if not os.path.exists(pac):
                        subprocess.run([a.pacset, "pack", src, "-o", pac, "--layout", layout],
                                       check=True, capture_output=True)
                    ours = pacset_rate(a.pacset, pac, rows_csv, threads, a.repeat)
                    print(f"{name:<8} {layout:<8} {threads:>3} {lib_rate:>15.0f} {ours:>14.0f}"
                          f" {ours / lib_rate:>6.2f}")


if __name__ == "__main__":
    main()
