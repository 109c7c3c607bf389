"""pacset's predictions equal the libraries' own, bit for bit, from numpy
(float32/float64, C/Fortran order, strided) and pandas, for forests loaded from
objects, from model files and from saved .pac files."""
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                              GradientBoostingRegressor, HistGradientBoostingClassifier,
                              HistGradientBoostingRegressor, RandomForestClassifier)
from sklearn.tree import DecisionTreeClassifier

import pacset
from conftest import adversarial_rows, input_variants


def _xgb_models(X, y):
    d = xgb.DMatrix(X, label=y)
    yb = (y == 1).astype(int)
    return {
        "xgb-softprob": xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 6,
                                   "eta": 0.3}, d, 12),
        "xgb-binary": xgb.train({"objective": "binary:logistic", "max_depth": 5},
                                xgb.DMatrix(X, label=yb), 15),
        "xgb-regression": xgb.train({"objective": "reg:squarederror", "max_depth": 7,
                                     "base_score": 0.3}, xgb.DMatrix(X, label=X[:, 0] * 2 + y), 10),
        "XGBClassifier": xgb.XGBClassifier(n_estimators=8, max_depth=4).fit(X, yb),
    }


def _sklearn_models(X, y):
    return {
        "RandomForestClassifier": RandomForestClassifier(n_estimators=15, random_state=1).fit(X, y),
        "ExtraTreesRegressor": ExtraTreesRegressor(n_estimators=10, max_depth=9,
                                                   random_state=1).fit(X, X[:, 1] + y),
        "GradientBoostingClassifier-binary": GradientBoostingClassifier(
            n_estimators=12, random_state=1).fit(X, y == 2),
        "GradientBoostingClassifier-multi": GradientBoostingClassifier(
            n_estimators=6, random_state=1).fit(X, y),
        "GradientBoostingRegressor": GradientBoostingRegressor(
            n_estimators=10, random_state=1).fit(X, X[:, 2] - y),
        "DecisionTreeClassifier": DecisionTreeClassifier(random_state=1).fit(X, y),
    }


@pytest.fixture(scope="module")
def xgb_models(data):
    return _xgb_models(*data)


@pytest.fixture(scope="module")
def sk_models(data):
    return _sklearn_models(*data)


def _forests(model, tmp_path, kind):
    """The model as pacset forests: from the object, from its file, from a .pac."""
    out = {"object": pacset.load(model)}
    if kind == "xgb":
        booster = model.get_booster() if hasattr(model, "get_booster") else model
        for ext in ("json", "ubj"):
            path = tmp_path / f"model.{ext}"
            booster.save_model(str(path))
            out[ext] = pacset.load(path)
    else:
        import joblib

        path = tmp_path / "model.joblib"
        joblib.dump(model, path)
        out["joblib"] = pacset.load(path)
    out["object"].save(tmp_path / "model.pac")
    out["pac"] = pacset.open(tmp_path / "model.pac")
    out["pac-4KiB-dfs"] = pacset.load(model, layout="dfs", block_size="4KiB")
    return out


def _same(got, want, label):
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, library {want.dtype}"
    assert got.shape == want.shape, f"{label}: shape {got.shape}, library {want.shape}"
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), (f"{label}: {bad.sum()} values differ, first at {np.argwhere(bad)[0]}: "
                           f"{got[bad][:3]} vs {want[bad][:3]}")


@pytest.mark.parametrize("name", ["xgb-softprob", "xgb-binary", "xgb-regression", "XGBClassifier"])
def test_xgboost_predict_margin_and_leaves_are_bit_identical(name, xgb_models, data, tmp_path):
    model = xgb_models[name]
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    rows = adversarial_rows(booster, data[0])
    forests = _forests(model, tmp_path, "xgb")
    for vname, X in input_variants(rows).items():
        values = np.asarray(X, dtype=np.float64)
        want = booster.inplace_predict(values)
        want_margin = booster.inplace_predict(values, predict_type="margin")
        # A DMatrix (pred_leaf) refuses inf, also values that become inf in float32.
        big = np.abs(np.nan_to_num(values)) > np.finfo(np.float32).max
        finite = ~big.any(axis=1)
        want_leaf = booster.predict(xgb.DMatrix(values[finite]), pred_leaf=True)
        for fname, forest in forests.items():
            label = f"{name} from {fname}, {vname}"
            _same(forest.predict(X), want, label + " predict")
            _same(forest.predict_margin(X), want_margin, label + " margin")
            _same(forest.apply(X)[finite], want_leaf, label + " apply")


@pytest.mark.parametrize("name", ["RandomForestClassifier", "ExtraTreesRegressor",
                                  "GradientBoostingClassifier-binary",
                                  "GradientBoostingClassifier-multi",
                                  "GradientBoostingRegressor", "DecisionTreeClassifier"])
def test_sklearn_predict_margin_and_leaves_equal_the_estimator(name, sk_models, data, tmp_path):
    est = sk_models[name]
    rows = adversarial_rows(est, data[0], finite_only=True)  # scikit-learn 1.2 refuses NaN/inf
    forests = _forests(est, tmp_path, "sklearn")
    classifier = hasattr(est, "predict_proba")
    for vname, X in input_variants(rows).items():
        values = np.asarray(X, dtype=np.float64)
        want = est.predict_proba(values) if classifier else est.predict(values)
        want_margin = est.decision_function(values) if hasattr(est, "decision_function") else want
        want_leaf = est.apply(values)
        for fname, forest in forests.items():
            label = f"{name} from {fname}, {vname}"
            if name == "GradientBoostingClassifier-multi":
                # scikit-learn's softmax is exp(raw - logsumexp(raw)): equal to ~1 ulp.
                got = forest.predict(X)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert np.max(np.abs(got - want)) <= 4e-16, label
                assert (got.argmax(axis=1) == want.argmax(axis=1)).all(), label
            else:
                _same(forest.predict(X), want, label + " predict")
            _same(forest.predict_margin(X), want_margin, label + " margin")
            _same(forest.apply(X), want_leaf, label + " apply")


def _hist_data():
    """Two categorical columns (0: even categories 0..38; 3: only 2, else NaN)
    and NaN in every column."""
    rng = np.random.default_rng(11)
    n = 800
    X = rng.normal(size=(n, 4))
    X[:, 0] = 2 * rng.integers(0, 20, n)
    X[:, 3] = 2.0
    for f in range(4):
        X[rng.random(n) < (0.5 if f == 3 else 0.1), f] = np.nan
    score = (np.nan_to_num(X[:, 0], nan=1) % 4 == 0) + np.nan_to_num(X[:, 1]) - np.isnan(X[:, 3])
    return X, score


def _hist_models():
    X, score = _hist_data()
    y3 = np.digitize(score, np.quantile(score, [0.3, 0.7]))
    cats = [0, 3]
    return X, {
        "binary": HistGradientBoostingClassifier(max_iter=12, categorical_features=cats,
                                                 random_state=1).fit(X, score > 0.5),
        "multiclass": HistGradientBoostingClassifier(max_iter=8, categorical_features=cats,
                                                     random_state=2).fit(X, y3),
        "squared_error": HistGradientBoostingRegressor(max_iter=12, categorical_features=cats,
                                                       random_state=3).fit(X, score),
        "poisson": HistGradientBoostingRegressor(loss="poisson", max_iter=10,
                                                 random_state=4).fit(X, np.exp(score)),
    }


@pytest.fixture(scope="module")
def hist_models():
    return _hist_models()


def _hist_rows(est, X):
    """At and beside every numerical threshold of the first trees, +-inf, NaN;
    in categorical columns every category 0..255 and -0.0, negative,
    non-integer values; ordinary rows with NaN. (Values >= 256 in categorical
    columns are left out: scikit-learn 1.2.1 wraps them, docs/sklearn-export.md.)"""
    rng = np.random.default_rng(0)
    rows = []

    def row_with(f, v):
        r = X[rng.integers(len(X))].copy()
        r[f] = v
        rows.append(r)

    for stage in est._predictors[:3]:
        for p in stage:
            for node in p.nodes[(p.nodes["is_leaf"] == 0) & (p.nodes["is_categorical"] == 0)]:
                t = float(node["num_threshold"])
                for v in (t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), np.inf, -np.inf):
                    row_with(int(node["feature_idx"]), v)
    is_cat = getattr(est, "is_categorical_", None)
    for f in (np.flatnonzero(is_cat) if is_cat is not None else []):
        for v in list(range(256)) + [-0.0, -0.5, -1.0, -1e300, -np.inf, 3.7, 255.9, np.nan]:
            row_with(f, float(v))
    some = X[:200].copy()
    some[rng.random(size=some.shape) < 0.2] = np.nan
    rows.extend(some)
    return np.array(rows, dtype=np.float64)


@pytest.mark.parametrize("name", ["binary", "multiclass", "squared_error", "poisson"])
def test_hist_gradient_boosting_equals_the_estimator(name, hist_models, tmp_path):
    X, models = hist_models
    est = models[name]
    rows = _hist_rows(est, X)
    forests = _forests(est, tmp_path, "sklearn")
    k = len(est.classes_) if hasattr(est, "classes_") else 1
    for vname, Xv in input_variants(rows).items():
        values = np.asarray(Xv, dtype=np.float64)  # what the estimator compares (X_DTYPE)
        want = est.predict_proba(values) if k > 1 else est.predict(values)
        want_margin = est.decision_function(values) if k > 1 else est._raw_predict(values).ravel()
        for fname, forest in forests.items():
            label = f"HistGradientBoosting {name} from {fname}, {vname}"
            # Bit for bit: the Python API applies the links with numpy, as
            # scikit-learn does (pacset predict's C exp may differ by 1 ulp).
            _same(forest.predict(Xv), want, label + " predict")
            _same(forest.predict_margin(Xv), want_margin, label + " margin")
    # No apply() in HistGradientBoosting: the leaf each tree reaches must hold
    # the value that tree's own predictor returns.
    known, f_idx_map = est._bin_mapper.make_known_categories_bitsets()
    predictors = [p for stage in est._predictors for p in stage]
    for fname, forest in forests.items():
        leaves = forest.apply(rows)
        assert leaves.shape == (len(rows), len(predictors)), fname
        for t, p in enumerate(predictors):
            reached = p.nodes[leaves[:, t]]
            assert reached["is_leaf"].all(), f"{fname} tree {t}"
            assert np.array_equal(reached["value"], p.predict(rows, known, f_idx_map, 1)), \
                f"{fname} tree {t}: a row reaches a leaf other than scikit-learn's"


def test_hist_gradient_boosting_reads_a_category_column_by_its_values_as_sklearn_does(
        hist_models):
    X, models = hist_models
    est = models["squared_error"]
    frame = pd.DataFrame(X[:300], columns=[f"f{i}" for i in range(X.shape[1])])
    # Categories that are not 0..k-1: their codes are not their values.
    frame["f0"] = pd.Categorical(frame["f0"], categories=np.arange(38, -2, -2.0))
    _same(pacset.load(est).predict(frame), est.predict(frame), "category column")


def test_thread_counts_give_identical_results(xgb_models, data):
    forest = pacset.load(xgb_models["xgb-softprob"])
    X = np.random.default_rng(5).normal(size=(5000, data[0].shape[1]))
    X[::7, 3] = np.nan
    one = forest.predict(X, n_threads=1)
    for n in (2, 3, 8, None):
        assert np.array_equal(forest.predict(X, n_threads=n), one)
        assert np.array_equal(forest.apply(X, n_threads=n), forest.apply(X, n_threads=1))


def test_predict_releases_the_gil_while_it_walks_the_trees(sk_models, data):
    import threading

    forest = pacset.load(sk_models["RandomForestClassifier"])
    X = np.tile(data[0], (400, 1))  # 600,000 rows: seconds of work on one thread
    done = threading.Event()
    result = {}

    def work():
        result["p"] = forest.predict(X, n_threads=1)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    # Pure-Python work while the other thread predicts: with the GIL held by
    # predict this loop could only run after it, and `done` would be set.
    n = 0
    for _ in range(20000):
        n += 1
    overlapped = not done.is_set()
    t.join()
    assert overlapped, "predict held the GIL: Python code could not run alongside it"
    assert result["p"].shape == (X.shape[0], 3)


def test_empty_input_gives_empty_output(xgb_models, data):
    forest = pacset.load(xgb_models["xgb-softprob"])
    out = forest.predict(np.zeros((0, data[0].shape[1]), dtype=np.float32))
    assert out.shape == (0, 3) and out.dtype == np.float32


@pytest.mark.parametrize("fixture", ["binary.txt", "multiclass.txt", "missing_types.txt",
                                     "categorical_multiclass.txt"])
def test_lightgbm_text_models_predict_what_pacset_predict_does(fixture, request, tmp_path):
    import os
    import subprocess

    pacset_bin = request.config.getoption("--pacset")
    if not pacset_bin:
        pytest.skip("needs --pacset")
    model = os.path.join(os.path.dirname(__file__), "..", "data", "lightgbm", fixture)
    forest = pacset.load(model)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, forest.num_features)) * 3
    X[rng.random(size=X.shape) < 0.1] = np.nan
    X[::17] = 0.0
    (tmp_path / "rows.csv").write_text(
        "\n".join(",".join(repr(float(v)) for v in r) for r in X) + "\n")  # NaN as "nan"
    for flag, method in (([], forest.predict), (["--margin"], forest.predict_margin),
                         (["--leaf"], forest.apply)):
        out = subprocess.run([pacset_bin, "predict", model, "--input", str(tmp_path / "rows.csv"),
                              *flag], capture_output=True, text=True, check=True).stdout
        want = np.array([[float(v) for v in line.split(",")] for line in out.split()])
        got = method(X)
        assert got.dtype == (np.int32 if flag == ["--leaf"] else np.float64)
        assert np.array_equal(got.reshape(len(X), -1), want), f"{fixture} {flag}"


@pytest.mark.parametrize("fixture", ["binary.txt", "multiclass.txt"])
def test_load_packs_a_model_file_byte_for_byte_as_pacset_pack_does(fixture, request, tmp_path):
    import os
    import subprocess

    pacset_bin = request.config.getoption("--pacset")
    if not pacset_bin:
        pytest.skip("needs --pacset")
    model = os.path.join(os.path.dirname(__file__), "..", "data", "lightgbm", fixture)
    for kwargs, flags in (({}, []), ({"bin_depth": 3, "trees_per_bin": "fit"},
                                     ["--bin-depth", "3", "--trees-per-bin", "fit"])):
        cli = tmp_path / "cli.pac"
        subprocess.run([pacset_bin, "pack", model, "-o", str(cli), "--block-size", "4KiB", *flags],
                       capture_output=True, check=True)
        pacset.load(model, block_size="4KiB", **kwargs).save(tmp_path / "py.pac")
        assert (tmp_path / "py.pac").read_bytes() == cli.read_bytes(), kwargs
