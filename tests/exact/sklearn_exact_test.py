#!/usr/bin/python3
"""Exactness against the real scikit-learn (Debian's python3-sklearn).

Trains small forests and boosted ensembles of every supported estimator with
fixed seeds, saves them with joblib (one with pickle, as .pkl), and checks
that `pacset predict` gives what scikit-learn gives on adversarial rows:
values exactly at every split threshold of the first trees, their float64 and
float32 neighbours, float64 values that are not float32 values (half a float32
ulp either side, and one float64 ulp beyond), +-0, subnormals, +-1e30, plus
real and random rows.

  predict_proba / predict    within 1e-12, with identical argmax
  decision_function          --margin, within 1e-12 (GradientBoosting)
  apply                      --leaf, identical node ids in every tree

IsolationForest (check_isolation_forest): the sum of path lengths (--margin)
bit for bit against the library's own pieces; score_samples within 1 ulp
(numpy's SIMD power vs C's pow; docs/sklearn-export.md) and equal to the
documented formula with C's pow bit for bit; decision_function (--method)
within 2 ulps of the score; predict (--method) identical except where the
library's decision is within 2 ulps of 0; leaves identical.

scikit-learn 1.2.1 rejects NaN, so rows with missing values are checked
against the documented rule instead (docs/sklearn-export.md): NaN goes to the
child with more training samples, to the right on a tie; the expected leaves
are computed here from the tree arrays. Error paths are checked too: a file
that is not a model, an unsupported estimator, and no usable python.

HistGradientBoosting (trained with NaN, with and without categorical
features) is checked on rows with values at and beside every numerical
threshold, +-inf, NaN, and in categorical columns every category 0..255
(seen in training or not), -0.0, negative, non-integer and huge values:

  decision_function          --margin, bit-identical
  predict (identity losses), binary predict_proba
                             bit-identical
  multiclass predict_proba, poisson predict
                             within (2K + 1) ulps relative (K classes; 1 for
                             poisson): numpy's exp differs from libm's by up
                             to 1 ulp on CPUs where numpy has a SIMD exp
  --leaf                     each tree's leaf holds the value that tree's
                             TreePredictor.predict returns (HistGradientBoosting
                             has no apply())

A categorical value >= 256 is an unknown category for pacset (the missing
direction), where scikit-learn 1.2.1 wraps it to uint8 (docs/sklearn-export.md):
such rows are compared with scikit-learn given NaN there, and the wrapping
itself is checked so that the documentation stays true.

Each model is read by pacset from its pickle (pacset runs pacset-sklearn-export
--stream itself), from the exported JSON and from JSON with base64 arrays; the
JSON files are written by the exporter's main() run in this process (a run of
the program is ~1.3 s of python3 starting and importing scikit-learn, which
this process has done already).

Usage: sklearn_exact_test.py --pacset PATH [--keep DIR]
"""
import argparse
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

import joblib
import numpy as np
from sklearn import datasets
from sklearn._loss.loss import HalfGammaLoss
from sklearn.ensemble import (AdaBoostClassifier, ExtraTreesClassifier, ExtraTreesRegressor,
                              GradientBoostingClassifier, GradientBoostingRegressor,
                              HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                              IsolationForest, RandomForestClassifier, RandomForestRegressor)
from sklearn.ensemble._iforest import _average_path_length
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exactlib  # noqa: E402

TOLERANCE = 1e-12
THRESHOLD_TREES = 3  # adversarial rows at every split of the first trees
MAX_THRESHOLDS = 400  # per model, sampled when there are more


def datasets_for(rng):
    Xb, yb = datasets.make_classification(n_samples=500, n_features=8, n_informative=5,
                                          n_redundant=1, random_state=1)
    Xm, ym = datasets.make_classification(n_samples=600, n_features=10, n_informative=6,
                                          n_classes=4, n_clusters_per_class=1, random_state=2)
    Xr, yr = datasets.make_regression(n_samples=400, n_features=6, noise=5.0, random_state=3)
    Xmany, ymany = datasets.make_classification(n_samples=900, n_features=8, n_informative=8,
                                                n_redundant=0, n_classes=12,
                                                n_clusters_per_class=1, random_state=4)
    Xi, yi = datasets.load_iris(return_X_y=True)
    Xd, yd = datasets.load_diabetes(return_X_y=True)
    Xb = Xb * np.array([1, 10, 0.01, 1e3, 1, 1, 5, 1])  # several scales
    Xb[:, 5] = np.round(Xb[:, 5])  # ties: thresholds between integers
    names = np.array(["setosa", "versicolor", "virginica"])
    return {
        "binary": (Xb, yb), "multi": (Xm, ym), "reg": (Xr, yr), "many": (Xmany, ymany),
        "iris": (Xi, yi), "iris_names": (Xi, names[yi]), "diabetes": (Xd, yd),
    }


def train_models(data):
    """(name, estimator, dataset key, file extension)."""
    specs = [
        ("rf_binary", RandomForestClassifier(n_estimators=20, max_depth=8, random_state=1),
         "binary"),
        ("rf_multi", RandomForestClassifier(n_estimators=15, min_samples_leaf=3, random_state=2),
         "multi"),
        ("rf_iris_labels", RandomForestClassifier(n_estimators=10, max_depth=3, random_state=3),
         "iris_names"),
        ("rf_balanced", RandomForestClassifier(n_estimators=8, max_depth=5,
                                               class_weight="balanced", random_state=4), "multi"),
        ("et_binary", ExtraTreesClassifier(n_estimators=20, min_samples_leaf=2, random_state=5),
         "binary"),
        ("et_multi", ExtraTreesClassifier(n_estimators=12, max_depth=6, random_state=6), "iris"),
        ("rf_reg", RandomForestRegressor(n_estimators=20, max_depth=10, random_state=7), "reg"),
        ("et_reg", ExtraTreesRegressor(n_estimators=10, min_samples_leaf=3, random_state=8),
         "diabetes"),
        ("gb_binary", GradientBoostingClassifier(n_estimators=30, max_depth=3, subsample=0.8,
                                                 random_state=9), "binary"),
        ("gb_exponential", GradientBoostingClassifier(loss="exponential", n_estimators=15,
                                                      max_depth=2, random_state=10), "binary"),
        ("gb_multi", GradientBoostingClassifier(n_estimators=20, max_depth=2, learning_rate=0.3,
                                                random_state=11), "multi"),
        ("gb_reg", GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=12),
         "diabetes"),
        ("gb_huber", GradientBoostingRegressor(loss="huber", n_estimators=10, max_depth=4,
                                               learning_rate=0.05, random_state=13), "reg"),
        ("dt_many_classes", DecisionTreeClassifier(max_depth=5, random_state=14), "many"),
        ("dt_reg", DecisionTreeRegressor(max_depth=6, random_state=15), "diabetes"),
    ]
    models = []
    for name, est, key in specs:
        X, y = data[key]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        models.append((name, est, key, ".pkl" if name == "dt_reg" else ".joblib"))
    return models


def tree_list(est):
    """The fitted trees in pacset's order (GradientBoosting: stage-major)."""
    if hasattr(est, "tree_"):
        return [est]
    stages = np.asarray(est.estimators_, dtype=object)
    if stages.ndim == 2:
        return [stages[i, k] for i in range(stages.shape[0]) for k in range(stages.shape[1])]
    return list(est.estimators_)


def tree_columns(est, n_features):
    """Per tree (pacset's order), the estimator columns its feature ids name:
    an IsolationForest fitted on column subsets gives tree i
    X[:, estimators_features_[i]] (_compute_chunked_score_samples)."""
    trees = tree_list(est)
    if isinstance(est, IsolationForest) and est._max_features != n_features:
        return [np.asarray(f) for f in est.estimators_features_]
    return [np.arange(n_features)] * len(trees)


def adversarial_rows(est, X, rng):
    d = X.shape[1]
    pairs = []
    for t, cols in list(zip(tree_list(est), tree_columns(est, d)))[:THRESHOLD_TREES]:
        tr = t.tree_
        internal = tr.children_left != -1
        pairs.extend(zip(cols[tr.feature[internal]].tolist(), tr.threshold[internal].tolist()))
    if len(pairs) > MAX_THRESHOLDS:
        pairs = [pairs[i] for i in rng.choice(len(pairs), MAX_THRESHOLDS, replace=False)]
    rows = []
    base = X[rng.integers(len(X), size=len(pairs) * 16 + 1)]
    b = 0
    for f, t in pairs:
        t = np.float64(t)
        t32 = np.float32(t)  # nearest float32
        candidates = [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)]
        for g in (t32, np.nextafter(t32, np.float32(np.inf)),
                  np.nextafter(t32, np.float32(-np.inf))):
            g64 = np.float64(g)
            candidates.append(g64)
            for h in (np.nextafter(g, np.float32(np.inf)), np.nextafter(g, np.float32(-np.inf))):
                h64 = np.float64(h)
                mid = (g64 + h64) / 2  # half a float32 ulp away: not a float32, a rounding tie
                candidates.extend([mid, np.nextafter(mid, g64), np.nextafter(mid, h64)])
        for v in dict.fromkeys(float(c) for c in candidates):
            r = base[b].copy()
            b = (b + 1) % len(base)
            r[f] = v
            rows.append(r)
    special = [0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 1e-320, float(np.finfo(np.float32).max)]
    for v in special:
        rows.append(np.full(d, v))
        for f in range(d):
            r = X[rng.integers(len(X))].copy()
            r[f] = v
            rows.append(r)
    rows.extend(X[rng.choice(len(X), size=min(200, len(X)), replace=False)])
    rows.extend(rng.normal(size=(100, d)) * X.std(axis=0) * 3 + X.mean(axis=0))
    return np.array(rows, dtype=np.float64)


def nan_rows(est, X, rng):
    d = X.shape[1]
    rows = [np.full(d, np.nan)]
    for t, cols in list(zip(tree_list(est), tree_columns(est, d)))[:THRESHOLD_TREES]:
        tr = t.tree_
        for f in np.unique(cols[tr.feature[tr.children_left != -1]]):
            r = X[rng.integers(len(X))].copy()
            r[f] = np.nan
            rows.append(r)
    some = X[rng.integers(len(X), size=300)].copy()
    some[rng.random(size=some.shape) < 0.3] = np.nan
    rows.extend(some)
    return np.array(rows, dtype=np.float64)


def documented_leaves(est, X):
    """Leaf ids by the documented rule: float32(x) <= threshold goes left; NaN
    goes to the child with more n_node_samples, right on a tie."""
    n = len(X)
    out = []
    for t, cols in zip(tree_list(est), tree_columns(est, X.shape[1])):
        X32 = X[:, cols].astype(np.float32)
        tr = t.tree_
        left, right = tr.children_left, tr.children_right
        samples = tr.n_node_samples
        node = np.zeros(n, dtype=np.int64)
        active = left[node] != -1
        while active.any():
            idx = np.nonzero(active)[0]
            nd = node[idx]
            x = X32[idx, tr.feature[nd]].astype(np.float64)
            go_left = np.where(np.isnan(x), samples[left[nd]] > samples[right[nd]],
                               x <= tr.threshold[nd])
            node[idx] = np.where(go_left, left[nd], right[nd])
            active = left[node] != -1
        out.append(node)
    return np.stack(out, axis=1)


class Stats:
    def __init__(self):
        self.models = 0
        self.rows = 0
        self.nan_rows = 0
        self.values = 0
        self.identical = 0
        self.max_diff = 0.0
        self.leaves = 0

    def values_compared(self, got, want):
        want = np.asarray(want, dtype=np.float64).reshape(got.shape)
        self.values += got.size
        self.identical += int(np.sum(got.view(np.uint64) == want.view(np.uint64)))
        if got.size:
            self.max_diff = max(self.max_diff, float(np.max(np.abs(got - want))))


def save_and_export(checker, work, name, est, ext, exporter):
    """Saves `est` as NAME.EXT (pickle for .pkl, else joblib) and exports it
    with pacset-sklearn-export to NAME.json: (model path, json path), or None
    after recording the exporter's failure."""
    path = os.path.join(work, name + ext)
    if ext == ".pkl":
        with open(path, "wb") as f:
            pickle.dump(est, f)
    else:
        joblib.dump(est, path)
    json_path = os.path.join(work, name + ".json")
    status, err = exporter.run(path, "-o", json_path)
    if status != 0:
        checker.expect(False, f"{name}: pacset-sklearn-export failed ({status}): {err.strip()}")
        return None
    return path, json_path


def check_model(checker, stats, work, name, est, ext, X, rng, exporter):
    saved = save_and_export(checker, work, name, est, ext, exporter)
    if saved is None:
        return
    path, json_path = saved
    rows = adversarial_rows(est, X, rng)
    rows_csv = exactlib.write_rows(os.path.join(work, name + "_rows.csv"), rows)
    failures_before = len(checker.failures)
    is_classifier = hasattr(est, "classes_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = est.predict_proba(rows) if is_classifier else est.predict(rows)
        want_leaf = est.apply(rows).reshape(len(rows), -1)
        # decision_function for GradientBoostingClassifier; the others' margin
        # is their prediction (mean of leaf vectors, or the raw regression).
        want_margin = est.decision_function(rows) if hasattr(est, "decision_function") else want
    # The pickle end to end (pacset runs the exporter), then the exported JSON.
    got = checker.predict(path, rows_csv)
    err = checker.close(name, "predict", got, want, TOLERANCE)
    stats.values_compared(got, want)
    if is_classifier:
        same = np.argmax(got, axis=1) == np.argmax(np.asarray(want).reshape(got.shape), axis=1)
        checker.expect(bool(same.all()),
                       f"{name} argmax: {int((~same).sum())} rows differ, first "
                       f"{np.nonzero(~same)[0][:3]}")
    got_json = checker.predict(json_path, rows_csv)
    checker.expect(np.array_equal(got_json.view(np.uint64), got.view(np.uint64)),
                   f"{name}: the exported JSON and the pickle predict differently")
    # The base64 array encoding (used for big forests) predicts the same bits.
    b64_path = os.path.join(work, name + ".b64.json")
    status, export_err = exporter.run(path, "-o", b64_path, "--arrays", "base64")
    checker.expect(status == 0, f"{name}: --arrays base64 failed: {export_err}")
    if status == 0:
        got_b64 = checker.predict(b64_path, rows_csv)
        checker.expect(np.array_equal(got_b64.view(np.uint64), got.view(np.uint64)),
                       f"{name}: base64 arrays and the pickle predict differently")
    # And through a packed .pac file (the bundled mmap engine), packed from
    # the JSON (a pickle is read the same way by pack as by predict above;
    # the plain pickle is packed as such).
    pac_path = os.path.join(work, name + ".pac")
    pack_from = path if ext == ".pkl" else json_path
    packed = subprocess.run([checker.pacset, "pack", pack_from, "-o", pac_path, "--block-size", "4KiB"],
                            capture_output=True, text=True)
    checker.expect(packed.returncode == 0, f"{name}: pacset pack failed: {packed.stderr}")
    if packed.returncode == 0:
        got_pac = checker.predict(pac_path, rows_csv)
        checker.expect(np.array_equal(got_pac.view(np.uint64), got.view(np.uint64)),
                       f"{name}: the packed .pac and the pickle predict differently")
        checker.same_ints(name, "leaf (.pac)", checker.predict(pac_path, rows_csv, "--leaf"),
                          want_leaf)
    got_margin = checker.predict(json_path, rows_csv, "--margin")
    err = max(err or 0.0, checker.close(name, "margin", got_margin, want_margin, TOLERANCE) or 0.0)
    stats.values_compared(got_margin, want_margin)
    got_leaf = checker.predict(json_path, rows_csv, "--leaf")
    checker.same_ints(name, "leaf", got_leaf, want_leaf)
    checker.same_ints(name, "leaf (documented rule, no NaN)", got_leaf,
                      documented_leaves(est, rows))
    stats.leaves += got_leaf.size
    # Missing values: the documented rule.
    nans = nan_rows(est, X, rng)
    nans_csv = exactlib.write_rows(os.path.join(work, name + "_nan.csv"), nans)
    got_nan_leaf = checker.predict(json_path, nans_csv, "--leaf")
    checker.same_ints(name, "leaf (NaN rows)", got_nan_leaf, documented_leaves(est, nans))
    stats.leaves += got_nan_leaf.size
    stats.models += 1
    stats.rows += len(rows)
    stats.nan_rows += len(nans)
    verdict = "ok" if len(checker.failures) == failures_before else "MISMATCH"
    print(f"{name:16s} {type(est).__name__:27s} {len(tree_list(est)):3d} trees  "
          f"{len(rows):5d} rows + {len(nans):4d} NaN rows  max |diff| {err:.3g}  {verdict}")


def isolation_models(data):
    """(name, fitted IsolationForest, dataset key): column subsets or not,
    contamination 'auto' or a float, bootstrap on and off, one sample per
    tree (denominator 0)."""
    specs = [
        ("if_auto_subset", IsolationForest(n_estimators=25, max_features=0.6, random_state=21),
         "binary"),
        ("if_float_boot", IsolationForest(n_estimators=15, max_samples=64, contamination=0.1,
                                          bootstrap=True, max_features=0.5, random_state=22),
         "diabetes"),
        ("if_all_columns", IsolationForest(n_estimators=12, contamination=0.05, random_state=23),
         "reg"),
        ("if_one_sample", IsolationForest(n_estimators=3, max_samples=1, random_state=24), "iris"),
    ]
    out = []
    for name, est, key in specs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(data[key][0])
        out.append((name, est, key))
    return out


def isolation_depths(est, X):
    """score_samples' `depths`, from the library's own pieces in its own order
    (IsolationForest._compute_score_samples)."""
    depths = np.zeros(len(X), order="f")
    for tree, cols in zip(est.estimators_, tree_columns(est, X.shape[1])):
        Xt = X[:, cols]
        leaves = tree.apply(Xt)
        node_indicator = tree.decision_path(Xt)
        depths += (np.ravel(node_indicator.sum(axis=1))
                   + _average_path_length(tree.tree_.n_node_samples[leaves]) - 1.0)
    return depths


def ulps(a, b):
    """Distance in float64 ulps (same-sign finite values)."""
    return np.abs(np.asarray(a, np.float64).view(np.int64) - np.asarray(b, np.float64).view(np.int64))


def check_isolation_forest(checker, stats, work, name, est, X, rng, exporter):
    saved = save_and_export(checker, work, name, est, ".joblib", exporter)
    if saved is None:
        return
    path, json_path = saved
    failures_before = len(checker.failures)
    rows = np.concatenate([adversarial_rows(est, X, rng), X])  # X: offset_'s own rows
    rows_csv = exactlib.write_rows(os.path.join(work, name + "_rows.csv"), rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_score = est.score_samples(rows)
        want_decision = est.decision_function(rows)
        want_label = est.predict(rows)
    want_depths = isolation_depths(est, rows)
    denominator = len(est.estimators_) * _average_path_length([est.max_samples_])
    # The oracle's depths are the library's: they give its scores bit for bit.
    again = -(2 ** (-np.divide(want_depths, denominator, out=np.ones_like(want_depths),
                               where=denominator != 0)))
    checker.expect(np.array_equal(again.view(np.uint64), want_score.view(np.uint64)),
                   f"{name}: the test's depths do not reproduce score_samples")

    # The sum of path lengths, bit for bit, by every route.
    for label, model in (("pickle", path), ("json", json_path)):
        got_depths = checker.predict(model, rows_csv, "--margin")[:, 0]
        checker.expect(np.array_equal(got_depths.view(np.uint64), want_depths.view(np.uint64)),
                       f"{name} --margin ({label}): {int(np.sum(got_depths != want_depths))} "
                       f"rows differ from the library's depths")
    stats.values_compared(got_depths.reshape(-1, 1), want_depths)

    # The methods from the JSON: each read of the pickle runs the exporter.
    got_score = checker.predict(json_path, rows_csv)[:, 0]
    stats.values_compared(got_score.reshape(-1, 1), want_score)
    d = float(np.ravel(denominator)[0])
    formula = np.array([-math.pow(2.0, -(m / d if d != 0 else 1.0)) for m in want_depths])
    checker.expect(np.array_equal(got_score.view(np.uint64), formula.view(np.uint64)),
                   f"{name}: score is not -pow(2, -(depths / d)) with C's pow")
    score_ulps = ulps(got_score, want_score)
    checker.expect(int(score_ulps.max()) <= 1,
                   f"{name}: score_samples {int(score_ulps.max())} ulps from the library's")

    got_decision = checker.predict(json_path, rows_csv, "--method", "decision_function")[:, 0]
    decision_tol = 2 * np.spacing(np.abs(want_score))
    bad = np.abs(got_decision - want_decision) > decision_tol
    checker.expect(not bad.any(), f"{name}: decision_function beyond 2 ulps of the score at "
                                  f"rows {np.nonzero(bad)[0][:3]}")
    got_label = checker.predict(json_path, rows_csv, "--method", "predict")[:, 0]
    differ = got_label != want_label
    checker.expect(not (differ & (np.abs(want_decision) > decision_tol)).any(),
                   f"{name}: predict differs at rows {np.nonzero(differ)[0][:3]} whose decision "
                   "is not within 2 ulps of 0")
    checker.expect(set(np.unique(got_label)) <= {-1.0, 1.0}, f"{name}: labels other than -1/1")

    # A packed .pac predicts the same bits; leaves are the library's.
    pac_path = os.path.join(work, name + ".pac")
    packed = subprocess.run([checker.pacset, "pack", json_path, "-o", pac_path, "--block-size",
                             "4KiB"],
                            capture_output=True, text=True)
    checker.expect(packed.returncode == 0, f"{name}: pacset pack failed: {packed.stderr}")
    if packed.returncode == 0:
        got_pac = checker.predict(pac_path, rows_csv, "--method", "decision_function")[:, 0]
        checker.expect(np.array_equal(got_pac.view(np.uint64), got_decision.view(np.uint64)),
                       f"{name}: the packed .pac and the JSON differ")
    want_leaf = np.stack([t.apply(rows[:, cols]) for t, cols in
                          zip(est.estimators_, tree_columns(est, rows.shape[1]))], axis=1)
    got_leaf = checker.predict(json_path, rows_csv, "--leaf")
    checker.same_ints(name, "leaf", got_leaf, want_leaf)
    stats.leaves += got_leaf.size
    # NaN: the library rejects it; pacset follows the documented rule.
    nans = nan_rows(est, X, rng)
    nans_csv = exactlib.write_rows(os.path.join(work, name + "_nan.csv"), nans)
    checker.same_ints(name, "leaf (NaN rows)", checker.predict(json_path, nans_csv, "--leaf"),
                      documented_leaves(est, nans))
    stats.models += 1
    stats.rows += len(rows)
    stats.nan_rows += len(nans)
    verdict = "ok" if len(checker.failures) == failures_before else "MISMATCH"
    print(f"{name:16s} {'IsolationForest':27s} {len(est.estimators_):3d} trees  {len(rows):5d} "
          f"rows + {len(nans):4d} NaN rows  score: {int(np.sum(score_ulps == 0))} identical, "
          f"{int(np.sum(score_ulps == 1))} 1 ulp off; predict differs on "
          f"{int(differ.sum())} rows  {verdict}")


def check_isolation_errors(checker, work, data):
    """--method is refused clearly where it has no meaning."""
    X, y = data["iris"]
    rows_csv = exactlib.write_rows(os.path.join(work, "iris_method_rows.csv"), X[:5])
    forest = os.path.join(work, "rf_for_method.joblib")
    joblib.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y), forest)
    rc, err = checker.run_fail(forest, rows_csv, "--method", "predict")
    checker.expect(rc != 0 and "not an IsolationForest" in err and "--margin" in err
                   and len(err.splitlines()) == 1,
                   f"--method on a RandomForest: expected one line naming what to do, got {rc}: "
                   f"{err}")
    iforest = os.path.join(work, "if_for_method.joblib")
    joblib.dump(IsolationForest(n_estimators=2, random_state=0).fit(X), iforest)
    rc, err = checker.run_fail(iforest, rows_csv, "--method", "predict", "--margin")
    checker.expect(rc != 0 and "--margin" in err, f"--method with --margin: got {rc}: {err}")
    rc, err = checker.run_fail(iforest, rows_csv, "--method", "proba")
    checker.expect(rc != 0 and "score_samples" in err, f"--method proba: got {rc}: {err}")


# ---- HistGradientBoosting ----

HIST_CATEGORY_PROBES = [-0.0, -0.5, -1.0, -256.0, -1e10, 3.7, 254.5, 255.5, 256.0, 257.0, 300.0,
                        511.0, 70000.0, 2.0**31 - 1, 2.0**31, 2.0**32 + 3, 1e10, 1e300,
                        np.inf, -np.inf, np.nan]
ULP = 2.0**-52


def hist_data(rng):
    """Rows with NaN in every column; categorical columns 0 (even values
    0..198: odd ones and 200..255 never seen), 3 (0..9) and 5 (only category
    4, else NaN: a split whose left bitset sklearn never fills)."""
    n = 1500
    X = np.empty((n, 6))
    X[:, 0] = 2 * rng.integers(0, 100, n)
    X[:, 1] = rng.normal(size=n)
    X[:, 2] = np.round(rng.normal(size=n) * 4) / 4  # ties
    X[:, 3] = rng.integers(0, 10, n)
    X[:, 4] = rng.exponential(size=n) * 1e3
    X[:, 5] = 4.0
    for f in range(6):
        X[rng.random(n) < (0.5 if f == 5 else 0.08), f] = np.nan
    score = (np.nan_to_num(X[:, 0], nan=7) % 6 == 0) * 1.5 + np.nan_to_num(X[:, 1]) \
        + (np.nan_to_num(X[:, 3], nan=3) % 3) * 0.7 - np.isnan(X[:, 5]) * 0.8 \
        + np.log1p(np.nan_to_num(X[:, 4])) * 0.2 + rng.normal(size=n) * 0.3
    return X, score


def train_hist_models(X, score):
    cats = [0, 3, 5]
    q = np.quantile(score, [0.33, 0.66])
    y3 = np.digitize(score, q)
    yb = (score > np.median(score)).astype(int)
    specs = [
        ("hgb_binary_cat", HistGradientBoostingClassifier(max_iter=25, categorical_features=cats,
                                                          random_state=1), yb, ".joblib"),
        ("hgb_binary_num", HistGradientBoostingClassifier(max_iter=20, max_leaf_nodes=15,
                                                          random_state=2), yb, ".pkl"),
        ("hgb_multi_cat", HistGradientBoostingClassifier(max_iter=15, categorical_features=cats,
                                                         learning_rate=0.3, random_state=3),
         np.array(["low", "mid", "high"])[y3], ".joblib"),
        ("hgb_multi_num", HistGradientBoostingClassifier(max_iter=10, random_state=4), y3,
         ".joblib"),
        ("hgb_squared_cat", HistGradientBoostingRegressor(max_iter=30, categorical_features=cats,
                                                          random_state=5), score, ".pkl"),
        ("hgb_absolute", HistGradientBoostingRegressor(loss="absolute_error", max_iter=15,
                                                       random_state=6), score, ".joblib"),
        ("hgb_quantile_cat", HistGradientBoostingRegressor(loss="quantile", quantile=0.8,
                                                           max_iter=15, categorical_features=cats,
                                                           random_state=7), score, ".joblib"),
        ("hgb_poisson_cat", HistGradientBoostingRegressor(loss="poisson", max_iter=20,
                                                          categorical_features=cats,
                                                          random_state=8),
         np.exp(score / 2), ".joblib"),
    ]
    models = []
    for name, est, y, ext in specs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        models.append((name, est, ext))
    return models


def hist_rows(est, X, rng):
    """Adversarial rows (module docstring); values >= 256 in categorical columns included."""
    d = X.shape[1]
    base = X[rng.integers(len(X), size=4000)]
    rows = []

    def row_with(f, v):
        r = base[len(rows) % len(base)].copy()
        r[f] = v
        rows.append(r)

    for stage in est._predictors[:THRESHOLD_TREES]:
        for p in stage:
            for node in p.nodes[p.nodes["is_leaf"] == 0]:
                if node["is_categorical"]:
                    continue
                t = float(node["num_threshold"])
                for v in (t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), np.inf, -np.inf):
                    row_with(int(node["feature_idx"]), v)
    is_cat = getattr(est, "is_categorical_", None)
    categorical = np.flatnonzero(is_cat) if is_cat is not None else []
    for f in categorical:
        for v in list(range(256)) + HIST_CATEGORY_PROBES:
            row_with(f, float(v))
    for v in (0.0, -0.0, np.nan, np.inf, -np.inf, 1e300):
        rows.append(np.full(d, v))
    rows.extend(X[rng.choice(len(X), size=200, replace=False)])
    noisy = X[rng.integers(len(X), size=200)].copy()
    noisy[rng.random(size=noisy.shape) < 0.3] = np.nan
    rows.extend(noisy)
    return np.array(rows, dtype=np.float64)


def hist_oracle_rows(est, rows):
    """The rows scikit-learn is asked about: a categorical value >= 256 (an
    unknown category for pacset) replaced by NaN (the same direction)."""
    out = rows.copy()
    is_cat = getattr(est, "is_categorical_", None)
    if is_cat is not None:
        cols = out[:, np.flatnonzero(is_cat)]
        cols[cols >= 256] = np.nan
        out[:, np.flatnonzero(is_cat)] = cols
    return out


def hist_tree_values(est, rows):
    """Each tree's own output per row: TreePredictor.predict, in pacset's tree order."""
    known, f_idx_map = est._bin_mapper.make_known_categories_bitsets()
    return [(p, p.predict(rows, known, f_idx_map, 1))
            for stage in est._predictors for p in stage]


def check_wrapping(checker, name, est, X):
    """What docs/sklearn-export.md says scikit-learn 1.2.1 does with a
    categorical value >= 256 (x86-64): [256, 2^31) wraps modulo 256, 2^31 and
    above (+inf too) act as category 0."""
    is_cat = getattr(est, "is_categorical_", None)
    if is_cat is None or not sklearn_version_is("1.2."):
        return
    f = int(np.flatnonzero(is_cat)[0])
    probes = [(256.0, 0.0), (257.0, 1.0), (300.0, 44.0), (70000.0, 112.0), (2.0**31 - 1, 255.0),
              (2.0**31, 0.0), (1e10, 0.0), (np.inf, 0.0)]
    rows = np.repeat(X[:1], len(probes), axis=0)
    same = rows.copy()
    rows[:, f] = [v for v, _ in probes]
    same[:, f] = [c for _, c in probes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = est._raw_predict(rows), est._raw_predict(same)
    checker.expect(np.array_equal(a, b),
                   f"{name}: scikit-learn no longer wraps categorical values >= 256 as "
                   f"docs/sklearn-export.md says (rows {np.nonzero((a != b).any(axis=1))[0]})")


def sklearn_version_is(prefix):
    import sklearn
    return sklearn.__version__.startswith(prefix)


def check_hist_model(checker, stats, work, name, est, ext, X, rng, exporter):
    saved = save_and_export(checker, work, name, est, ext, exporter)
    if saved is None:
        return
    path, json_path = saved
    rows = hist_rows(est, X, rng)
    oracle = hist_oracle_rows(est, rows)
    rows_csv = exactlib.write_rows(os.path.join(work, name + "_rows.csv"), rows)
    failures_before = len(checker.failures)
    is_classifier = hasattr(est, "classes_")
    k = len(est.classes_) if is_classifier else 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = est.predict_proba(oracle) if is_classifier else est.predict(oracle)
        want_margin = est._raw_predict(oracle)
        want_label = est.predict(oracle)
    got = checker.predict(path, rows_csv)
    stats.values_compared(got, want)
    want = np.asarray(want, dtype=np.float64).reshape(got.shape)
    if (is_classifier and k > 2) or getattr(est, "loss", "") == "poisson":
        rtol = (2 * k + 1) * ULP
        bad = np.abs(got - want) > rtol * np.abs(want)
        checker.expect(not bad.any(), f"{name}: {int(bad.sum())} predictions differ by more than "
                                      f"{2 * k + 1} ulps relative, first row "
                                      f"{np.nonzero(bad)[0][:1]}")
    else:
        checker.same_float64(name, "predict", got, want)
    err = float(np.max(np.abs(got - want)))
    if is_classifier:
        labels = est.classes_[np.argmax(got, axis=1)]
        checker.expect(bool((labels == want_label).all()),
                       f"{name}: predicted classes differ in {int((labels != want_label).sum())} rows")
    got_margin = checker.predict(json_path, rows_csv, "--margin")
    checker.same_float64(name, "margin", got_margin, want_margin)
    stats.values_compared(got_margin, want_margin)
    # Every route predicts the same bits: the JSON, base64 arrays, a packed .pac.
    got_json = checker.predict(json_path, rows_csv)
    checker.same_float64(name, "JSON vs pickle", got_json, got)
    if name == "hgb_binary_cat":  # one model suffices
        b64_path = os.path.join(work, name + ".b64.json")
        status, export_err = exporter.run(path, "-o", b64_path, "--arrays", "base64")
        checker.expect(status == 0, f"{name}: --arrays base64 failed: {export_err}")
        if status == 0:
            checker.same_float64(name, "base64 vs pickle", checker.predict(b64_path, rows_csv), got)
    pac_path = os.path.join(work, name + ".pac")
    packed = subprocess.run([checker.pacset, "pack", json_path, "-o", pac_path, "--block-size",
                             "4KiB"], capture_output=True, text=True)
    checker.expect(packed.returncode == 0, f"{name}: pacset pack failed: {packed.stderr}")
    if packed.returncode == 0:
        checker.same_float64(name, ".pac vs pickle", checker.predict(pac_path, rows_csv), got)
        checker.same_float64(name, ".pac margin", checker.predict(pac_path, rows_csv, "--margin"),
                             got_margin)
    # Leaves: the node pacset reaches holds the value the tree itself returns.
    got_leaf = checker.predict(json_path, rows_csv, "--leaf").astype(np.int64)
    trees = hist_tree_values(est, oracle)
    checker.expect(got_leaf.shape == (len(rows), len(trees)),
                   f"{name}: --leaf shape {got_leaf.shape}, expected {(len(rows), len(trees))}")
    if got_leaf.shape == (len(rows), len(trees)):
        for t, (p, values) in enumerate(trees):
            leaf = got_leaf[:, t]
            ok = (leaf >= 0) & (leaf < len(p.nodes))
            ok[ok] &= (p.nodes["is_leaf"][leaf[ok]] == 1) & \
                (p.nodes["value"][leaf[ok]] == values[ok])
            checker.expect(bool(ok.all()), f"{name} tree {t}: {int((~ok).sum())} rows reach a "
                                           f"leaf other than sklearn's, first {np.nonzero(~ok)[0][:3]}")
        stats.leaves += got_leaf.size
    check_wrapping(checker, name, est, X)
    stats.models += 1
    stats.rows += len(rows)
    verdict = "ok" if len(checker.failures) == failures_before else "MISMATCH"
    print(f"{name:16s} {type(est).__name__:31s} {len(trees):3d} trees  {len(rows):5d} rows  "
          f"max |diff| {err:.3g}  {verdict}")


def check_errors(checker, work, data):
    X, y = data["iris"]
    rows_csv = exactlib.write_rows(os.path.join(work, "iris_rows.csv"), X[:5])

    garbage = os.path.join(work, "garbage.joblib")
    with open(garbage, "wb") as f:
        f.write(b"\x80\x04this is not a pickle")
    rc, err = checker.run_fail(garbage, rows_csv)
    checker.expect(rc == 1 and "cannot load" in err and "Traceback" not in err
                   and len(err.splitlines()) == 1,
                   f"garbage file: expected exit 1 and one line 'cannot load', got {rc}: {err}")

    not_model = os.path.join(work, "dict.pkl")
    with open(not_model, "wb") as f:
        pickle.dump({"weights": [1, 2, 3]}, f)
    rc, err = checker.run_fail(not_model, rows_csv)
    checker.expect(rc == 1 and "dict" in err and "not supported" in err,
                   f"pickled dict: expected exit 1 naming dict as not supported, got {rc}: {err}")

    unsupported = os.path.join(work, "adaboost.joblib")
    joblib.dump(AdaBoostClassifier(n_estimators=3, random_state=0).fit(X, y), unsupported)
    rc, err = checker.run_fail(unsupported, rows_csv)
    checker.expect(rc == 1 and "AdaBoostClassifier" in err and "not supported" in err
                   and "fit one of these instead" in err,
                   f"AdaBoostClassifier: expected exit 1 'not supported' naming what to do "
                   f"instead, got {rc}: {err}")

    # A HistGradientBoosting loss given as an object (here gamma, which 1.2.1
    # only has as a loss class): refused, naming the supported losses.
    gamma = os.path.join(work, "hgb_gamma.joblib")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joblib.dump(HistGradientBoostingRegressor(loss=HalfGammaLoss(), max_iter=3)
                    .fit(X, y + 1.0), gamma)
    rc, err = checker.run_fail(gamma, rows_csv)
    checker.expect(rc == 1 and "not supported" in err and "poisson" in err
                   and len(err.splitlines()) == 1,
                   f"HistGradientBoostingRegressor(loss=HalfGammaLoss()): expected exit 1 naming "
                   f"the supported losses, got {rc}: {err}")

    multi = os.path.join(work, "multi_output.joblib")
    joblib.dump(RandomForestRegressor(n_estimators=2, random_state=0).fit(X, np.c_[y, y]), multi)
    rc, err = checker.run_fail(multi, rows_csv)
    checker.expect(rc == 1 and "multi-output" in err and "not supported" in err,
                   f"multi-output: expected exit 1 'multi-output ... not supported', "
                   f"got {rc}: {err}")

    good = os.path.join(work, "small.joblib")
    joblib.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y), good)
    env = dict(os.environ, PACSET_PYTHON="/nonexistent")
    out = subprocess.run([checker.pacset, "predict", good, "--input", rows_csv],
                         capture_output=True, text=True, env=env)
    err = out.stderr.strip()
    checker.expect(out.returncode == 1 and "install" in err and "python3-sklearn" in err,
                   f"PACSET_PYTHON=/nonexistent: expected exit 1 and an install hint, "
                   f"got {out.returncode}: {err}")

    # A python without scikit-learn (e.g. a pyenv one on PATH): exporter exit 3.
    for candidate in (shutil.which("python3"), "/usr/local/bin/python3"):
        if not candidate or os.path.realpath(candidate) == os.path.realpath(sys.executable):
            continue
        probe = subprocess.run([candidate, "-c", "import sklearn"], capture_output=True)
        if probe.returncode == 0:
            continue
        env = dict(os.environ, PACSET_PYTHON=candidate)
        out = subprocess.run([checker.pacset, "predict", good, "--input", rows_csv],
                             capture_output=True, text=True, env=env)
        err = out.stderr.strip()
        checker.expect(out.returncode == 1
                       and "apt-get install python3-sklearn python3-joblib" in err,
                       f"PACSET_PYTHON={candidate} (no sklearn): expected the apt-get hint, "
                       f"got {out.returncode}: {err}")
        break


def find_exporter(pacset):
    beside = os.path.join(os.path.dirname(os.path.abspath(pacset)), "pacset-sklearn-export")
    if os.path.exists(beside):
        return beside
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "tools", "pacset-sklearn-export")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--keep", help="keep models and rows in this directory")
    args = ap.parse_args()
    if not os.access(args.pacset, os.X_OK):
        print(f"sklearn_exact_test: {args.pacset} is not an executable", file=sys.stderr)
        return 2
    rng = np.random.default_rng(20261130)
    checker = exactlib.Checker(args.pacset)
    stats = Stats()
    exporter = exactlib.Exporter(find_exporter(args.pacset))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        data = datasets_for(rng)
        for name, est, key, ext in train_models(data):
            check_model(checker, stats, work, name, est, ext, data[key][0], rng, exporter)
        for name, est, key in isolation_models(data):
            check_isolation_forest(checker, stats, work, name, est, data[key][0], rng, exporter)
        X_hist, score = hist_data(rng)
        for name, est, ext in train_hist_models(X_hist, score):
            check_hist_model(checker, stats, work, name, est, ext, X_hist, rng, exporter)
        check_errors(checker, work, data)
        check_isolation_errors(checker, work, data)
    print(f"scikit-learn exactness: {stats.models} models, {stats.rows} rows "
          f"+ {stats.nan_rows} rows with NaN; {stats.values} predictions/margins compared, "
          f"{stats.identical} bit-identical, max |diff| {stats.max_diff:.3g} "
          f"(tolerance {TOLERANCE:g}); {stats.leaves} leaf ids compared")
    return checker.finish()


if __name__ == "__main__":
    sys.exit(main())
