#!/usr/bin/python3
"""Warm prediction speed of the models issue 32 added, against the library
that trained them, in the same run: XGBoost with categorical features
(partition and one-hot splits), XGBoost DART, scikit-learn
HistGradientBoosting (numeric with NaN, and categorical) and IsolationForest.

  PYTHONPATH=build/python bench/model_coverage_bench.py [--rounds 7]
      [--rows 20000] [--trees 200] [--threads 2] [--only NAME]
      [--isa-baseline scalar|avx2] [--blocks --pacset build/tools/pacset]

Each model is trained here with fixed seeds, loaded with pacset.load (the
library object itself), and both sides predict the same rows given as each
library reads them fastest (XGBoost: inplace_predict on float32 numpy;
scikit-learn: its predict / predict_proba / score_samples on float64 numpy,
which it reads without a copy). Outputs are checked first (bit for bit
where pacset claims it, else the stated tolerance). Rounds interleave the
two sides in shuffled order; figures are rows/s, median [min-max], and the
ratio of the medians. Absolute figures depend on the machine. The share of
pacset's rows that took a SIMD kernel (the engine's warm_simd_rows) is shown.
--isa-baseline adds a third side, the same forest opened with
pacset.open(isa=...) (e.g. "scalar": the scalar lanes), and the ratio of the
medians of pacset against it.

--blocks instead counts, for the categorical XGBoost and HistGradientBoosting
models and the same models trained with the category codes as numbers, the
blocks one cold row touches (`pacset layout-report`, 1,000 rows, PACSET
layout at 4 KiB and 64 KiB: node blocks per row and the metadata blocks read
at open, which hold the category sets) and the bytes of the category sets
(`pacset info`).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import pacset


def timed(fn, X):
    t0 = time.perf_counter()
    fn(X)
    return len(X) / (time.perf_counter() - t0)


def spread(xs):
    return f"{statistics.median(xs):,.0f} [{min(xs):,.0f}-{max(xs):,.0f}]"


def categorical_data(rng, n, n_cat=6, n_num=6, cats=60):
    codes = rng.integers(0, cats, size=(n, n_cat)).astype(np.float32)
    num = rng.normal(size=(n, n_num)).astype(np.float32)
    num[rng.random(num.shape) < 0.05] = np.nan
    X = np.hstack([codes, num])
    y = ((codes[:, 0] % 3 == 0) + 0.3 * np.nan_to_num(num[:, 0]) +
         0.2 * (codes[:, 1] > cats / 2) + rng.normal(size=n) * 0.3)
    return X, y, n_cat


def xgb_categorical(rng, a, onehot):
    import xgboost as xgb
    X, y, n_cat = categorical_data(rng, 20000)
    types = ["c"] * n_cat + ["q"] * (X.shape[1] - n_cat)
    d = xgb.DMatrix(X, label=(y > 0.5).astype(int), feature_types=types, enable_categorical=True)
    b = xgb.train({"objective": "binary:logistic", "max_depth": 6, "tree_method": "hist",
                   "max_cat_to_onehot": 1000 if onehot else 1, "nthread": a.threads}, d, a.trees)
    Xt, _, _ = categorical_data(rng, a.rows)
    return b, Xt, lambda X: b.inplace_predict(X), "bits"


def xgb_dart(rng, a):
    import xgboost as xgb
    X = rng.normal(size=(20000, 12)).astype(np.float32)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=len(X)) * 0.2 > 0.5
    # binary:logistic: XGBoost 1.7.4's inplace_predict and Booster.predict
    # agree on DART only with a base margin of 0 (pacset matches
    # Booster.predict; tests/exact/xgboost_exact_test.py).
    b = xgb.train({"booster": "dart", "objective": "binary:logistic", "rate_drop": 0.1,
                   "max_depth": 6, "nthread": a.threads}, xgb.DMatrix(X, label=y), a.trees)
    Xt = rng.normal(size=(a.rows, 12)).astype(np.float32)
    return b, Xt, lambda X: b.inplace_predict(X), "bits"


def hgb(rng, a, categorical):
    from sklearn.ensemble import HistGradientBoostingClassifier
    X, y, n_cat = categorical_data(rng, 20000)
    X = X.astype(np.float64)
    mask = [True] * n_cat + [False] * (X.shape[1] - n_cat) if categorical else None
    est = HistGradientBoostingClassifier(max_iter=a.trees, max_depth=6, categorical_features=mask,
                                         early_stopping=False, random_state=0)
    est.fit(X, (y > 0.5).astype(int))
    Xt, _, _ = categorical_data(rng, a.rows)
    return est, Xt.astype(np.float64), est.predict_proba, 1e-12


def iforest(rng, a):
    from sklearn.ensemble import IsolationForest
    X = rng.normal(size=(20000, 12))
    est = IsolationForest(n_estimators=a.trees, random_state=0).fit(X)
    Xt = rng.normal(size=(a.rows, 12)) * 1.5
    return est, Xt, est.score_samples, 1e-12


def check(name, got, want, how):
    got = np.asarray(got).reshape(len(want), -1)
    want = np.asarray(want).reshape(len(want), -1)
    if how == "bits":
        ok = np.array_equal(got.astype(np.float32).view(np.uint32),
                            want.astype(np.float32).view(np.uint32))
    else:
        ok = np.allclose(got, want, rtol=0, atol=how)
    if not ok:
        raise SystemExit(f"{name}: pacset and the library disagree; not timing it")


def cold_blocks(a):
    import joblib
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier
    work = tempfile.mkdtemp(prefix="pacset-coverage-")
    X, y, n_cat = categorical_data(np.random.default_rng(1), 20000)
    rows, _, _ = categorical_data(np.random.default_rng(2), 1000)
    csv = os.path.join(work, "rows.csv")
    np.savetxt(csv, rows, delimiter=",", fmt="%r")
    label = (y > 0.5).astype(int)
    models = []
    for kind in ("c", "q"):
        d = xgb.DMatrix(X, label=label, feature_types=[kind] * n_cat + ["q"] * (X.shape[1] - n_cat),
                        enable_categorical=kind == "c")
        b = xgb.train({"objective": "binary:logistic", "max_depth": 6, "tree_method": "hist",
                       "max_cat_to_onehot": 1}, d, a.trees)
        models.append((f"xgboost {'categorical' if kind == 'c' else 'codes as numbers'}",
                       os.path.join(work, f"xgb-{kind}.json")))
        b.save_model(models[-1][1])
    for cat in (True, False):
        mask = [True] * n_cat + [False] * (X.shape[1] - n_cat) if cat else None
        est = HistGradientBoostingClassifier(max_iter=a.trees, max_depth=6, early_stopping=False,
                                             random_state=0, categorical_features=mask)
        est.fit(X.astype(np.float64), label)
        models.append((f"hgb {'categorical' if cat else 'codes as numbers'}",
                       os.path.join(work, f"hgb-{int(cat)}.joblib")))
        joblib.dump(est, models[-1][1])
    print("model                          block   node blocks/row (mean)  opened  category sets")
    for name, path in models:
        pac = path + ".pac"
        subprocess.run([a.pacset, "pack", path, "-o", pac], check=True, capture_output=True)
        info = subprocess.run([a.pacset, "info", pac], check=True, capture_output=True, text=True)
        sets = next((l.split("sets ")[1].split(" (")[0] for l in info.stdout.splitlines()
                     if l.startswith("categorical:")), "-")
        report = subprocess.run([a.pacset, "layout-report", path, "--input", csv, "--layouts",
                                 "pacset", "--block-size", "4KiB", "--block-size", "64KiB",
                                 "--json"], check=True, capture_output=True, text=True)
        for block_size, layouts in json.loads(report.stdout).items():
            r = layouts["pacset"]
            print(f"{name:30s} {int(block_size) // 1024:3d} KiB  "
                  f"{r['blocks_per_row']['mean']:10.2f}             {r['open_blocks']:5d}  {sets}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--trees", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only")
    ap.add_argument("--isa-baseline", choices=["scalar", "avx2", "avx512"])
    ap.add_argument("--blocks", action="store_true")
    ap.add_argument("--pacset", default="build/tools/pacset")
    a = ap.parse_args()
    if a.blocks:
        return cold_blocks(a)
    makers = {
        "xgb-categorical-partition": lambda r: xgb_categorical(r, a, onehot=False),
        "xgb-categorical-onehot": lambda r: xgb_categorical(r, a, onehot=True),
        "xgb-dart": lambda r: xgb_dart(r, a),
        "hgb-numeric-nan": lambda r: hgb(r, a, categorical=False),
        "hgb-categorical": lambda r: hgb(r, a, categorical=True),
        "isolation-forest": lambda r: iforest(r, a),
    }
    print(f"{a.rows} rows, {a.trees} trees, {a.threads} threads, {a.rounds} interleaved rounds; "
          "rows/s median [min-max]")
    for name, make in makers.items():
        if a.only and a.only != name:
            continue
        rng = np.random.default_rng(1)
        model, X, library, how = make(rng)
        forest = pacset.load(model)

        def predictor(f):
            if name == "isolation-forest":
                return lambda X: f.score_samples(X, n_threads=a.threads)
            return lambda X: f.predict(X, n_threads=a.threads)

        sides = {"pacset": predictor(forest), "library": library}
        tmp = tempfile.TemporaryDirectory(prefix="pacset-coverage-")
        if a.isa_baseline:
            forest.save(os.path.join(tmp.name, "m.pac"))
            base = pacset.open(os.path.join(tmp.name, "m.pac"), isa=a.isa_baseline)
            sides[f"pacset isa={a.isa_baseline}"] = predictor(base)
        want = library(X)
        for side, fn in sides.items():
            if side != "library":
                check(f"{name} ({side})", fn(X), want, how)
            fn(X)  # warm
        simd_before = forest._core.info()["warm_simd_rows"]
        times = {side: [] for side in sides}
        for _ in range(a.rounds):
            order = list(times)
            random.shuffle(order)
            for side in order:
                times[side].append(timed(sides[side], X))
        simd = (forest._core.info()["warm_simd_rows"] - simd_before) / (a.rounds * len(X))
        med = {side: statistics.median(t) for side, t in times.items()}
        line = (f"{name:28s} pacset {spread(times['pacset'])}  library {spread(times['library'])}"
                f"  ratio {med['pacset'] / med['library']:.2f}x  simd rows {simd:.0%}")
        for side in sides:
            if side.startswith("pacset isa="):
                line += (f"\n{'':28s} {side} {spread(times[side])}  ratio to library "
                         f"{med[side] / med['library']:.2f}x, pacset to it "
                         f"{med['pacset'] / med[side]:.2f}x")
        print(line, flush=True)
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
