"""pandas `category` columns: pacset reads their category codes, as XGBoost
does (enable_categorical=True), missing values as NaN; forests trained on
categorical features predict from such frames what the library predicts."""
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import pacset


def _frame(rng, n=600, categories=("red", "green", "blue", "cyan", "plum")):
    """Two category columns (one with missing values), two numeric ones."""
    colour = pd.Categorical(rng.choice(categories, n), categories=list(categories))
    size_codes = rng.integers(-1, 40, n)  # -1: missing
    size = pd.Categorical.from_codes(size_codes, categories=[f"s{i}" for i in range(40)])
    return pd.DataFrame({
        "x": rng.normal(size=n),
        "colour": colour,
        "size": size,
        "y": rng.normal(size=n).astype(np.float32),
    })


def _codes(frame):
    """What a category column means to the libraries: its codes, NaN for -1."""
    out = np.empty(frame.shape, dtype=np.float64)
    for j, (_, col) in enumerate(frame.items()):
        if isinstance(col.dtype, pd.CategoricalDtype):
            c = col.cat.codes.to_numpy().astype(np.float64)
            c[c < 0] = np.nan
            out[:, j] = c
        else:
            out[:, j] = col.to_numpy(dtype=np.float64)
    return out


@pytest.fixture(scope="module")
def frame():
    return _frame(np.random.default_rng(5))


def test_category_columns_predict_as_their_codes_with_missing_as_nan(frame):
    # A numeric model over the codes: the frame and the codes must give the
    # same rows, bit for bit.
    X = _codes(frame)
    target = np.nan_to_num(X[:, 2]) * 0.1 + X[:, 0]
    booster = xgb.train({"max_depth": 6}, xgb.DMatrix(X, label=target), 8)
    forest = pacset.load(booster)
    got = forest.predict(frame)
    want = booster.inplace_predict(X.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(forest.predict(frame), forest.predict(X))


def test_xgboost_categorical_model_predicts_a_category_frame_as_xgboost_does(frame, tmp_path):
    rng = np.random.default_rng(6)
    X = frame
    y = (X["colour"].cat.codes.to_numpy() % 2) + 0.5 * X["x"].to_numpy() + rng.normal(size=len(X))
    clf = xgb.XGBClassifier(n_estimators=12, max_depth=5, tree_method="hist",
                            enable_categorical=True, max_cat_to_onehot=2)
    clf.fit(X, (y > 0.5).astype(int))
    booster = clf.get_booster()
    # Rows the training frame never had: every code, and missing values.
    test = _frame(np.random.default_rng(7), n=300)
    want = booster.inplace_predict(test)
    for forest in (pacset.load(booster), pacset.load(str(_saved(booster, tmp_path)))):
        got = forest.predict(test)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        margin = forest.predict_margin(test)
        want_margin = booster.inplace_predict(test, predict_type="margin")
        np.testing.assert_array_equal(margin.view(np.uint32), want_margin.view(np.uint32))


def _saved(booster, tmp_path):
    path = tmp_path / "categorical.json"
    booster.save_model(str(path))
    return path


def test_a_string_column_is_a_value_error_that_says_to_use_a_category():
    forest = pacset.load(xgb.train({}, xgb.DMatrix(np.zeros((4, 2)), label=[0, 1, 0, 1]), 1))
    with pytest.raises(ValueError, match="category"):
        forest.predict(pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0]}))
