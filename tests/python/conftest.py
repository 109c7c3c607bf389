"""Shared fixtures for the Python package tests: small real models trained at
test time with Debian's xgboost and scikit-learn, and adversarial rows."""
import json
import os

import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption("--pacset", default=os.environ.get("PACSET_BIN"), help="the pacset binary")
    parser.addoption("--pacsetfs", default=os.environ.get("PACSETFS_BIN"), help="the pacsetfs binary")


@pytest.fixture(scope="session")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=1500, n_features=8, n_informative=6, n_classes=3,
                               random_state=3)
    X[:, 5] = np.round(X[:, 5])  # ties at thresholds between integers
    return X, y


def _xgb_thresholds(booster):
    model = json.loads(booster.save_raw("json"))
    out = []
    for tree in model["learner"]["gradient_booster"]["model"]["trees"][:8]:
        for f, t, left in zip(tree["split_indices"], tree["split_conditions"], tree["left_children"]):
            if left != -1:
                out.append((f, float(t)))
    return out


def _sklearn_thresholds(est):
    trees = np.asarray(getattr(est, "estimators_", [est]), dtype=object).ravel()
    # An IsolationForest fitted on column subsets: tree i reads X[:, estimators_features_[i]].
    subsets = getattr(est, "estimators_features_", None)
    if subsets is None or getattr(est, "_max_features", None) == getattr(est, "n_features_in_", 0):
        subsets = [None] * len(trees)
    out = []
    for t, cols in list(zip(trees, subsets))[:8]:
        tr = t.tree_
        internal = tr.children_left != -1
        features = tr.feature[internal] if cols is None else np.asarray(cols)[tr.feature[internal]]
        out.extend(zip(features.tolist(), tr.threshold[internal].tolist()))
    return out


def adversarial_rows(model, X, finite_only=False, seed=0):
    """Rows with one feature at each split threshold, its float32 and float64
    neighbours and half-ulp midpoints (rounding ties); ±0, large and tiny
    values; NaN and ±inf unless finite_only (scikit-learn 1.2 refuses them);
    and ordinary rows."""
    rng = np.random.default_rng(seed)
    pairs = _xgb_thresholds(model) if hasattr(model, "save_raw") else _sklearn_thresholds(model)
    rows = []
    for f, t in pairs[:300]:
        t32 = np.float32(t)
        cands = [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)]
        for g in (t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))):
            g64 = np.float64(g)
            cands.append(g64)
            for h in (np.nextafter(g, np.float32(np.inf)), np.nextafter(g, np.float32(-np.inf))):
                cands.append((g64 + np.float64(h)) / 2)
        for v in cands:
            r = X[rng.integers(len(X))].copy()
            r[f] = v
            rows.append(r)
    specials = [0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40]
    if not finite_only:
        specials += [np.nan, np.inf, -np.inf, 1e300, -1e300]
    for v in specials:
        rows.append(np.full(X.shape[1], v))
        for f in range(X.shape[1]):
            r = X[rng.integers(len(X))].copy()
            r[f] = v
            rows.append(r)
    rows.extend(X[:200])
    return np.array(rows, dtype=np.float64)


def input_variants(X):
    """The same rows as float64/float32, C/Fortran order, a strided view, pandas."""
    import pandas as pd

    with np.errstate(over="ignore"):
        x32 = X.astype(np.float32)  # 1e300 becomes inf, as the libraries make it
    wide = np.zeros((X.shape[0] * 2, X.shape[1] * 3))
    wide[::2, ::3] = X
    mixed = pd.DataFrame(x32)
    mixed[0] = X[:, 0]  # float64 column among float32 columns
    return {
        "float64-C": np.ascontiguousarray(X),
        "float64-F": np.asfortranarray(X),
        "float32-C": x32,
        "float32-F": np.asfortranarray(x32),
        "float64-strided": wide[::2, ::3],
        "pandas-float32": pd.DataFrame(x32, columns=[f"f{i}" for i in range(X.shape[1])]),
        "pandas-float64": pd.DataFrame(X),
        "pandas-mixed": mixed,
    }
