#!/usr/bin/python3
"""Trains the reference models used by the demo and the benchmarks, with
Debian's python3-sklearn / python3-xgboost on Debian's Fashion-MNIST.

  train_models.py --out DIR [--rows N] [--trees T] [--test-rows M] rf|xgb|...

Writes DIR/rf.joblib (RandomForestClassifier), DIR/xgb.json (XGBoost
multi:softprob) and DIR/test.csv (test rows, with a header line).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=60000)
    ap.add_argument("--trees", type=int, default=64)
    ap.add_argument("--depth", type=int, default=8, help="max depth for xgb")
    ap.add_argument("--test-rows", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("models", nargs="+", choices=["rf", "xgb", "rfreg"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    X, y = fashion_mnist.load("train")
    X, y = X[: a.rows], y[: a.rows]
    Xt, _ = fashion_mnist.load("test")
    Xt = Xt[: a.test_rows]
    with open(os.path.join(a.out, "test.csv"), "w") as f:
        f.write(",".join(f"px{i}" for i in range(X.shape[1])) + "\n")
        for r in Xt:
            f.write(",".join(str(int(v)) for v in r) + "\n")
    for m in a.models:
        t = time.time()
        if m == "rf":
            import joblib
            from sklearn.ensemble import RandomForestClassifier
            est = RandomForestClassifier(n_estimators=a.trees, n_jobs=a.jobs, random_state=0)
            est.fit(X, y)
            joblib.dump(est, os.path.join(a.out, "rf.joblib"))
            nodes = sum(e.tree_.node_count for e in est.estimators_)
        elif m == "rfreg":
            import joblib
            from sklearn.ensemble import RandomForestRegressor
            est = RandomForestRegressor(n_estimators=a.trees, n_jobs=a.jobs, random_state=0)
            est.fit(X, y.astype(float))
            joblib.dump(est, os.path.join(a.out, "rfreg.joblib"))
            nodes = sum(e.tree_.node_count for e in est.estimators_)
        else:
            import xgboost as xgb
            rounds = max(1, a.trees // 10)
            booster = xgb.train({"objective": "multi:softprob", "num_class": 10,
                                 "max_depth": a.depth, "nthread": a.jobs, "seed": 0},
                                xgb.DMatrix(X, label=y), rounds)
            booster.save_model(os.path.join(a.out, "xgb.json"))
            nodes = sum(int(t.count("\n")) for t in booster.get_dump())
        print(f"trained {m}: {a.trees} trees, {nodes} nodes, {time.time() - t:.1f} s",
              file=sys.stderr)


if __name__ == "__main__":
    main()
