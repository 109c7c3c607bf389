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

Categorical models (enable_categorical=True, hist; partition-based and
one-hot splits; up to 300 categories; mixed with numerical features; NaN in
training) are checked on every category seen and unseen and on values that
are no category (negative, -0.0, non-integer, 2^24 and its neighbours, huge,
+-inf, NaN). DART models (rate_drop > 0) are checked against Booster.predict,
whose float32 (0 + leaf) * weight pacset reproduces; inplace_predict weighs
((base + leaf) - base) * weight, which is the same only for a zero base margin,
so inf rows (inplace_predict only) are checked for those models alone.

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


def train_categorical_models(rng):
    """Mixed categorical/numerical data: features 0-2 categorical (300, 12
    and 4 categories), 3-4 numerical; a tenth of the cells missing."""
    n = 800
    sizes = (300, 12, 4)
    X = np.column_stack([rng.integers(0, k, size=n) for k in sizes] +
                        [rng.normal(size=n), rng.normal(size=n) * 100]).astype(np.float64)
    X[rng.random(size=X.shape) < 0.1] = np.nan
    effect = [rng.normal(size=k) for k in sizes]
    score = sum(np.where(np.isnan(X[:, j]), 0.3, effect[j][np.nan_to_num(X[:, j]).astype(int)])
                for j in range(3)) + np.nan_to_num(X[:, 3]) * 0.5
    y_reg = score + rng.normal(size=n) * 0.1
    y_bin = (score > np.median(score)).astype(int)
    y_multi = np.digitize(score, np.quantile(score, [0.33, 0.66])).astype(int)
    types = ["c", "c", "c", "q", "q"]
    specs = [
        ("cat_reg", {"objective": "reg:squarederror", "max_cat_to_onehot": 1, "max_depth": 5},
         y_reg, 12),
        ("cat_binary", {"objective": "binary:logistic", "max_cat_to_onehot": 1, "max_depth": 4},
         y_bin, 10),
        ("cat_multi", {"objective": "multi:softprob", "num_class": 3, "max_cat_to_onehot": 1,
                       "max_depth": 4}, y_multi, 5),
        # One-hot splits for the 12- and 4-category features, partitions for the 300.
        ("cat_onehot", {"objective": "reg:squarederror", "max_cat_to_onehot": 16,
                        "max_depth": 5}, y_reg, 10),
    ]
    models = []
    for name, params, y, rounds in specs:
        params = dict(params, tree_method="hist", seed=7, nthread=1)
        dm = xgb.DMatrix(X, label=y, feature_types=types, enable_categorical=True)
        models.append((name, xgb.train(params, dm, rounds)))
    return X, types, sizes, models


def train_dart_models(X, rng):
    """DART with trees really dropped (rate_drop > 0). binary:logistic with
    base_score 0.5 has base margin 0, so inplace_predict agrees with
    Booster.predict there; reg:squarederror's base margin 0.5 makes them differ."""
    y_reg = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1]) * 0.1 + rng.normal(size=len(X))
    y_bin = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) / 1e3 > 0).astype(int)
    dart = {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0, "seed": 7, "nthread": 1}
    specs = [
        ("dart_binary", {"objective": "binary:logistic", "max_depth": 4, "base_score": 0.5},
         y_bin, 15, True),
        ("dart_reg", {"objective": "reg:squarederror", "max_depth": 5, "base_score": 0.5,
                      "normalize_type": "forest", "sample_type": "weighted"}, y_reg, 15, False),
    ]
    return [(name, xgb.train(dict(params, **dart), xgb.DMatrix(X, label=y), rounds), agrees)
            for name, params, y, rounds, agrees in specs]


def categorical_rows(X, sizes, rng, extra_rows):
    """Every category seen and unseen of each categorical feature, and values
    that are no category, each in a real row with the rest untouched."""
    two24 = np.float64(2 ** 24)
    specials = [-1.0, -0.5, -0.0, 0.0, 0.5, 3.99, 2.9999999999, -1e-45, 1e-45,
                two24 - 1, two24, two24 + 2, np.float64(np.nextafter(np.float32(two24), 0)),
                two24 - 0.25, two24 + 1, 2.0 ** 31, 2.0 ** 32 + 3, 1e30, -1e30, np.nan]
    rows = []
    for f, k in enumerate(sizes):
        values = list(range(k + 5)) + [k + 0.5, k - 0.5, 1000.0] + specials
        for v in values:
            r = X[rng.integers(len(X))].copy()
            r[f] = v
            rows.append(r)
    rows.extend(extra_rows)
    return np.array(rows, dtype=np.float64)


def thresholds_of(booster, limit_trees=6):
    """(feature, threshold) pairs from the model's own JSON dump."""
    model = json.loads(booster.save_raw("json"))
    out = []
    booster_json = model["learner"]["gradient_booster"]
    trees = booster_json.get("gbtree", booster_json)["model"]["trees"]  # DART nests a gbtree
    for tree in trees[:limit_trees]:
        kinds = tree.get("split_type", [0] * len(tree["left_children"]))
        for f, t, left, kind in zip(tree["split_indices"], tree["split_conditions"],
                                    tree["left_children"], kinds):
            if left != -1 and kind == 0:
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


def check_model(checker, pacset, work, name, booster, rows, infs, dmatrix_args=None,
                inplace_agrees=True):
    """pacset predictions, margins and leaves against Booster.predict on
    `rows`, and predictions and margins against inplace_predict on `infs`
    (when inplace_predict computes what Booster.predict does); from the JSON
    and UBJSON files and from three packed layouts."""
    dm = xgb.DMatrix(rows, **(dmatrix_args or {}))
    want_pred = booster.predict(dm)
    want_margin = booster.predict(dm, output_margin=True)
    want_leaf = booster.predict(dm, pred_leaf=True).astype(np.int64)
    if inplace_agrees:
        want_inf_pred = booster.inplace_predict(infs)
        want_inf_margin = booster.inplace_predict(infs, predict_type="margin")
    rows_csv = exactlib.write_rows(os.path.join(work, f"{name}_rows.csv"), rows)
    infs_csv = exactlib.write_rows(os.path.join(work, f"{name}_inf.csv"), infs, header=False)
    failures_before = len(checker.failures)
    for ext in ("json", "ubj"):
        path = os.path.join(work, f"{name}.{ext}")
        booster.save_model(path)
        label = f"{name}.{ext}"
        checker.same_bits(label, "predict", checker.predict(path, rows_csv), want_pred)
        checker.same_bits(label, "margin", checker.predict(path, rows_csv, "--margin"),
                          want_margin)
        checker.same_ints(label, "leaf", checker.predict(path, rows_csv, "--leaf"), want_leaf)
        if inplace_agrees:
            checker.same_bits(label, "predict(inf)", checker.predict(path, infs_csv),
                              want_inf_pred)
            checker.same_bits(label, "margin(inf)", checker.predict(path, infs_csv, "--margin"),
                              want_inf_margin)
        checker.same_bits(label, "predict(4 threads)",
                          checker.predict(path, rows_csv, "--threads", "4"), want_pred)
    # Every packed layout predicts the same bits (bundled mmap engine).
    for layout, bs in (("pacset", "4KiB"), ("dfs", "64KiB"), ("bin-bfs", "8KiB")):
        pac = os.path.join(work, f"{name}.{layout}.pac")
        subprocess.run([pacset, "pack", os.path.join(work, f"{name}.json"), "-o", pac,
                        "--layout", layout, "--block-size", bs], check=True, capture_output=True)
        label = f"{name}.{layout}.pac"
        checker.same_bits(label, "predict", checker.predict(pac, rows_csv), want_pred)
        checker.same_bits(label, "margin", checker.predict(pac, rows_csv, "--margin"), want_margin)
        checker.same_ints(label, "leaf", checker.predict(pac, rows_csv, "--leaf"), want_leaf)
        if inplace_agrees:
            checker.same_bits(label, "predict(inf)", checker.predict(pac, infs_csv),
                              want_inf_pred)
        checker.same_bits(label, "predict(3 threads)",
                          checker.predict(pac, rows_csv, "--threads", "3"), want_pred)
    verdict = ("predictions, margins and leaves identical"
               if len(checker.failures) == failures_before else "MISMATCH")
    print(f"{name}: {len(rows)} + {len(infs) if inplace_agrees else 0} rows, "
          f"{booster.num_boosted_rounds()} rounds: {verdict}")
    return want_margin


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
            check_model(checker, args.pacset, work, name, booster,
                        adversarial_rows(booster, X, rng), inf_rows(X, rng))

        for name, booster, inplace_agrees in train_dart_models(X, rng):
            rows = adversarial_rows(booster, X, rng)
            want_margin = check_model(checker, args.pacset, work, name, booster, rows,
                                      inf_rows(X, rng), inplace_agrees=inplace_agrees)
            # The two predict paths of XGBoost itself, for the record.
            inplace = booster.inplace_predict(rows, predict_type="margin")
            differ = int(np.count_nonzero(inplace.view(np.uint32) !=
                                          want_margin.astype(np.float32).view(np.uint32)))
            print(f"{name}: inplace_predict margins differ from Booster.predict in "
                  f"{differ} of {len(rows)} rows")
            checker.expect(differ == 0 or not inplace_agrees,
                           f"{name}: inplace_predict was expected to agree, {differ} rows differ")

        Xc, types, sizes, cat_models = train_categorical_models(rng)
        for name, booster in cat_models:
            rows = categorical_rows(Xc, sizes, rng, adversarial_rows(booster, Xc, rng))
            want_margin = check_model(checker, args.pacset, work, name, booster, rows,
                                      inf_rows(Xc, rng),
                                      {"feature_types": types, "enable_categorical": True})
            # inplace_predict (numpy float64 in, float32 inside) routes categories the same.
            inplace = booster.inplace_predict(rows, predict_type="margin")
            checker.same_bits(name, "inplace_predict margin vs Booster.predict",
                              inplace.reshape(len(rows), -1), want_margin)
    return checker.finish()


if __name__ == "__main__":
    sys.exit(main())
