"""scikit-learn IsolationForest through the Python API: score_samples,
decision_function and predict equal the estimator's, bit for bit (the score is
applied with numpy's own power to the path-length sums pacset computes), from
the estimator object, from its joblib file and from a saved .pac file."""
import warnings

import joblib
import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier

import pacset
from conftest import adversarial_rows


def _fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return IsolationForest(random_state=5, **params).fit(X)


@pytest.fixture(scope="module")
def iforests(data):
    X, _ = data
    return {
        "subset-auto": _fit(X, n_estimators=30, max_features=0.5),
        "float-contamination-bootstrap": _fit(X, n_estimators=20, max_samples=100,
                                              contamination=0.07, bootstrap=True,
                                              max_features=0.75),
        "all-columns": _fit(X, n_estimators=10, contamination=0.2),
    }


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), (
        f"{int(np.sum(got != want))} values differ")


@pytest.mark.parametrize("name", ["subset-auto", "float-contamination-bootstrap", "all-columns"])
def test_outputs_equal_the_estimators_bit_for_bit(iforests, data, tmp_path, name):
    est = iforests[name]
    X, _ = data
    rows = np.concatenate([adversarial_rows(est, X, finite_only=True), X])  # X: offset_'s rows
    want_score = est.score_samples(rows)
    want_decision = est.decision_function(rows)
    want_label = est.predict(rows)
    path = tmp_path / "if.joblib"
    joblib.dump(est, path)
    from_object = pacset.load(est)
    from_file = pacset.load(str(path))
    pac = tmp_path / "if.pac"
    from_object.save(str(pac))
    for forest in (from_object, from_file, pacset.open(str(pac))):
        _same_bits(forest.score_samples(rows), want_score)
        _same_bits(forest.decision_function(rows), want_decision)
        labels = forest.predict(rows)
        assert labels.dtype == want_label.dtype
        assert np.array_equal(labels, want_label)


def test_margin_is_the_sum_of_path_lengths(iforests, data):
    est = iforests["subset-auto"]
    X, _ = data
    depths = pacset.load(est).predict_margin(X[:50])
    from sklearn.ensemble._iforest import _average_path_length

    denominator = len(est.estimators_) * _average_path_length([est.max_samples_])
    _same_bits(-(2 ** (-depths / denominator)), est.score_samples(X[:50]))


def test_isolation_methods_are_refused_for_other_models(data):
    X, y = data
    forest = pacset.load(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y))
    with pytest.raises(ValueError, match="IsolationForest.*predict_margin"):
        forest.score_samples(X[:2])
    with pytest.raises(ValueError, match="predict_margin"):
        forest.decision_function(X[:2])
