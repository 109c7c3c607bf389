#!/usr/bin/python3
"""Exactness against the real XGBoost (Debian's python3-xgboost), from the
model file and from packed .pac files in several layouts.

Trains small models of every supported objective (including random-forest
mode and training data with missing values, so both default directions
occur), saves them as JSON and UBJSON, and checks that `pacset predict`
gives bit-identical float32 predictions and margins and identical leaf
indices (pred_leaf) on adversarial rows: values exactly at thresholds,
their float32 neighbours, float64 values that are not float32 values,
+-0, NaN, +-inf (inf rows go through inplace_predict, because XGBoost's
DMatrix rejects inf), huge values.

Usage: xgboost_exact_test.py --pacset PATH [--keep DIR] [--extra-input CSV]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import xgboost as xgb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exactlib  # noqa: E402


def train_models(rng):
    n, d = 600, 8
    X = rng.normal(size=(n, d)) * np.array([1, 10, 0.01, 1e3, 1, 1, 5, 1])
    X[:, 5] = np.round(X[:, 5])  # many ties: thresholds land on data values
    X[rng.random(size=X.shape) < 0.1] = np.nan  # missing values -> both default directions
    y_reg = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1]) * 0.1 + rng.normal(size=n)
    y_bin = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) / 1e3 > 0).astype(int)
    y_multi = (np.digitize(np.nan_to_num(X[:, 0]), [-1, 0, 1])).astype(int)
    y_count = rng.poisson(np.exp(np.clip(np.nan_to_num(X[:, 0]), -2, 2)))
    specs = [
        ("reg", {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.3}, y_reg, 40),
        ("binary", {"objective": "binary:logistic", "max_depth": 5, "base_score": 0.3}, y_bin, 40),
        ("softprob", {"objective": "multi:softprob", "num_class": 4, "max_depth": 4}, y_multi, 15),
        ("softmax", {"objective": "multi:softmax", "num_class": 4, "max_depth": 4}, y_multi, 10),
        ("rf", {"objective": "binary:logistic", "num_parallel_tree": 8, "subsample": 0.7,
                "colsample_bynode": 0.7, "eta": 1.0, "max_depth": 8}, y_bin, 1),
        ("rf_multi", {"objective": "multi:softprob", "num_class": 4, "num_parallel_tree": 3,
                      "subsample": 0.7, "max_depth": 5}, y_multi, 3),
        ("poisson", {"objective": "count:poisson", "max_depth": 4}, y_count, 20),
        ("logitraw", {"objective": "binary:logitraw", "max_depth": 3}, y_bin, 10),
        ("exact_method", {"objective": "reg:squarederror", "tree_method": "exact", "max_depth": 7},
         y_reg, 10),
    ]
    models = []
    for name, params, y, rounds in specs:
        params = dict(params, seed=7, nthread=1)
        booster = xgb.train(params, xgb.DMatrix(X, label=y), rounds)
        models.append((name, booster))
    return X, models


def thresholds_of(booster, limit_trees=6):
    """(feature, threshold) pairs from the model's own JSON dump."""
    model = json.loads(booster.save_raw("json"))
    out = []
    for tree in model["learner"]["gradient_booster"]["model"]["trees"][:limit_trees]:
        for f, t, left in zip(tree["split_indices"], tree["split_conditions"],
                              tree["left_children"]):
            if left != -1:
                out.append((f, np.float32(t)))
    return out


def adversarial_rows(booster, X, rng):
    d = X.shape[1]
    base = np.nan_to_num(X[:50], nan=0.0)
    rows = [np.zeros(d), -np.zeros(d), np.full(d, np.nan)]
    for f, t in thresholds_of(booster):
        t32 = np.float32(t)
        up = np.nextafter(t32, np.float32(np.inf))
        down = np.nextafter(t32, np.float32(-np.inf))
        t64 = np.float64(t32)
        # float64 values strictly between float32 neighbours: they round to
        # t32 or a neighbour when XGBoost casts the input to float32.
        candidates = [t32, up, down, t64 + (np.float64(up) - t64) * 0.25,
                      t64 - (t64 - np.float64(down)) * 0.25,
                      t64 + (np.float64(up) - t64) * 0.5, t64 - (t64 - np.float64(down)) * 0.5,
                      np.nextafter(t64, np.inf), np.nextafter(t64, -np.inf), np.nan, 0.0, -0.0,
                      1e30, -1e30, 1e-45, -1e-45]
        for v in candidates:
            r = base[rng.integers(len(base))].copy()
            r[f] = v
            rows.append(r)
    rows.extend(X[:100])  # real rows, with their missing values
    rows.extend(rng.normal(size=(100, d)) * 100)
    return np.array(rows, dtype=np.float64)


def inf_rows(X, rng):
    d = X.shape[1]
    rows = [np.full(d, np.inf), np.full(d, -np.inf)]
    for f in range(d):
        for v in (np.inf, -np.inf, 1e300, -1e300):  # 1e300 overflows to inf in float32
            r = np.nan_to_num(X[rng.integers(len(X))], nan=0.0).copy()
            r[f] = v
            rows.append(r)
    return np.array(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--keep", help="keep models and rows in this directory")
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    checker = exactlib.Checker(args.pacset)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        X, models = train_models(rng)
        for name, booster in models:
            rows = adversarial_rows(booster, X, rng)
            infs = inf_rows(X, rng)
            dm = xgb.DMatrix(rows)
            want_pred = booster.predict(dm)
            want_margin = booster.predict(dm, output_margin=True)
            want_leaf = booster.predict(dm, pred_leaf=True).astype(np.int64)
            want_inf_pred = booster.inplace_predict(infs)
            want_inf_margin = booster.inplace_predict(infs, predict_type="margin")
            rows_csv = exactlib.write_rows(os.path.join(work, f"{name}_rows.csv"), rows)
            infs_csv = exactlib.write_rows(os.path.join(work, f"{name}_inf.csv"), infs,
                                           header=False)
            failures_before = len(checker.failures)
            for ext in ("json", "ubj"):
                path = os.path.join(work, f"{name}.{ext}")
                booster.save_model(path)
                label = f"{name}.{ext}"
                checker.same_bits(label, "predict", checker.predict(path, rows_csv), want_pred)
                checker.same_bits(label, "margin", checker.predict(path, rows_csv, "--margin"),
                                  want_margin)
                checker.same_ints(label, "leaf", checker.predict(path, rows_csv, "--leaf"),
                                  want_leaf)
                checker.same_bits(label, "predict(inf)", checker.predict(path, infs_csv),
                                  want_inf_pred)
                checker.same_bits(label, "margin(inf)",
                                  checker.predict(path, infs_csv, "--margin"), want_inf_margin)
                checker.same_bits(label, "predict(4 threads)",
                                  checker.predict(path, rows_csv, "--threads", "4"), want_pred)
            # Every packed layout predicts the same bits (bundled mmap engine).
            for layout, bs in (("pacset", "4KiB"), ("dfs", "64KiB"), ("bin-bfs", "8KiB")):
                pac = os.path.join(work, f"{name}.{layout}.pac")
                subprocess.run([args.pacset, "pack", os.path.join(work, f"{name}.json"), "-o", pac,
                                "--layout", layout, "--block-size", bs], check=True,
                               capture_output=True)
                label = f"{name}.{layout}.pac"
                checker.same_bits(label, "predict", checker.predict(pac, rows_csv), want_pred)
                checker.same_bits(label, "margin", checker.predict(pac, rows_csv, "--margin"),
                                  want_margin)
                checker.same_ints(label, "leaf", checker.predict(pac, rows_csv, "--leaf"),
                                  want_leaf)
                checker.same_bits(label, "predict(inf)", checker.predict(pac, infs_csv),
                                  want_inf_pred)
                checker.same_bits(label, "predict(3 threads)",
                                  checker.predict(pac, rows_csv, "--threads", "3"), want_pred)
            verdict = ("predictions, margins and leaves identical"
                       if len(checker.failures) == failures_before else "MISMATCH")
            print(f"{name}: {len(rows)} + {len(infs)} rows, {booster.num_boosted_rounds()} rounds:"
                  f" {verdict}")
        # A categorical model must be refused clearly, not mispredicted.
        Xc = rng.integers(0, 4, size=(200, 2)).astype(float)
        dmc = xgb.DMatrix(Xc, label=Xc[:, 0] > 1, feature_types=["c", "q"],
                          enable_categorical=True)
        cat = xgb.train({"tree_method": "hist", "max_cat_to_onehot": 1, "max_depth": 2}, dmc, 2)
        cat_path = os.path.join(work, "categorical.json")
        cat.save_model(cat_path)
        rc, err = checker.run_fail(cat_path, exactlib.write_rows(os.path.join(work, "c.csv"), Xc))
        checker.expect(rc == 1 and "categorical" in err,
                       f"categorical model: expected exit 1 naming categorical splits, got {rc}: {err}")
    return checker.finish()


if __name__ == "__main__":
    sys.exit(main())
