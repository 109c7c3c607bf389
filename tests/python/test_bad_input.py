"""Every bad input is a ValueError that says what is wrong; nothing crashes."""
import os
import signal

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import BaggingRegressor, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import pacset


@pytest.fixture(scope="module")
def forest(data):
    X, y = data
    return pacset.load(RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0).fit(X, y))


def bad_inputs(n):
    ok = np.zeros((4, n))
    return {
        "too few columns": (ok[:, :-1], "columns"),
        "too many columns": (np.zeros((4, n + 1)), "columns"),
        "1-D": (ok[0], "2-D"),
        "3-D": (ok.reshape(2, 2, n), "2-D"),
        "scalar": (1.5, "2-D"),
        "ragged rows": ([[0.0] * n, [0.0] * (n - 1)], "not a 2-D array"),
        "strings": (np.full((4, n), "x"), "dtype"),
        "bytes": (np.full((4, n), b"x"), "dtype"),
        "objects": (np.array([[object()] * n] * 4), "dtype"),
        "complex": (ok.astype(np.complex128), "dtype"),
        "datetime": (np.zeros((4, n), dtype="datetime64[s]"), "dtype"),
        "None": (None, "2-D"),
        "string column": (pd.DataFrame({f"c{i}": ["a"] * 4 if i == 0 else [0.0] * 4
                                        for i in range(n)}), "column 'c0'"),
        # scikit-learn reads a category column by its values: strings are no numbers.
        "categorical column": (pd.DataFrame({f"c{i}": pd.Categorical(["x"] * 4) if i == 1 else [0.0] * 4
                                             for i in range(n)}), "column 'c1'"),
        "narrow DataFrame": (pd.DataFrame(ok[:, :2]), "columns"),
    }


@pytest.mark.parametrize("case", list(bad_inputs(8)))
@pytest.mark.parametrize("method", ["predict", "predict_margin", "apply"])
def test_bad_rows_raise_value_error_naming_the_problem(forest, case, method):
    X, words = bad_inputs(forest.num_features)[case]
    with pytest.raises(ValueError, match=words):
        getattr(forest, method)(X)


def test_integer_bool_and_nullable_inputs_are_read_as_numbers(forest, data):
    X = np.round(data[0][:50] * 3)
    want = forest.predict(X)
    assert np.array_equal(forest.predict(X.astype(np.int64)), want)
    frame = pd.DataFrame(X).astype("Float64")
    frame.iloc[0, 0] = pd.NA  # a nullable missing value is NaN
    expect = X.copy()
    expect[0, 0] = np.nan
    assert np.array_equal(forest.predict(frame), forest.predict(expect))
    assert forest.predict(np.zeros((3, forest.num_features), dtype=bool)).shape == (3,)


def test_bad_n_threads_is_a_value_error(forest):
    with pytest.raises(ValueError, match="n_threads"):
        forest.predict(np.zeros((2, forest.num_features)), n_threads=-1)


def test_apply_without_leaf_ids_is_a_value_error(data):
    X, y = data
    f = pacset.load(RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y), leaf_ids=False)
    with pytest.raises(ValueError, match="leaf ids"):
        f.apply(X)


def test_unsupported_estimators_are_refused(data):
    X, y = data
    with pytest.raises(ValueError, match="BaggingRegressor.*not supported"):
        pacset.load(BaggingRegressor(n_estimators=3).fit(X, y))
    with pytest.raises(ValueError, match="Pipeline"):
        pacset.load(make_pipeline(StandardScaler(), RandomForestRegressor(n_estimators=2)).fit(X, y))
    with pytest.raises(TypeError, match="cannot load"):
        pacset.load(object())


def test_hist_gradient_boosting_pacset_cannot_reproduce_is_refused_saying_what_to_do(data):
    from sklearn._loss.loss import HalfGammaLoss
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = data
    with pytest.raises(ValueError, match="HalfGammaLoss.*not supported.*poisson.*fit with"):
        pacset.load(HistGradientBoostingRegressor(loss=HalfGammaLoss(), max_iter=2)
                    .fit(X, y + 1.0))
    # scikit-learn >= 1.4 re-encodes categorical DataFrame columns first
    # (_preprocessor): pacset would predict from the wrong codes.
    est = HistGradientBoostingRegressor(max_iter=2).fit(X, y)
    est._preprocessor = object()
    with pytest.raises(ValueError, match="re-encodes.*OrdinalEncoder"):
        pacset.load(est)


def test_bad_pack_options_are_value_errors(data):
    X, y = data
    est = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    for kwargs in ({"layout": "zigzag"}, {"block_size": 1000}, {"block_size": "lots"},
                   {"bin_depth": "deep"}, {"bin_depth": 0}, {"bin_depth": 17},
                   {"trees_per_bin": "many"}, {"trees_per_bin": -1}):
        with pytest.raises(ValueError):
            pacset.load(est, **kwargs)


def test_corrupt_or_truncated_pac_files_are_value_errors(forest, tmp_path):
    path = tmp_path / "f.pac"
    forest.save(path)
    data = bytearray(path.read_bytes())
    (tmp_path / "short.pac").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated"):
        pacset.open(tmp_path / "short.pac")
    data[100] ^= 0xFF  # inside the header: its checksum no longer matches
    (tmp_path / "flipped.pac").write_bytes(data)
    with pytest.raises(ValueError, match="checksum"):
        pacset.open(tmp_path / "flipped.pac")
    with pytest.raises(FileNotFoundError):
        pacset.open(tmp_path / "missing.pac")
    (tmp_path / "junk.json").write_text("{ not json")
    with pytest.raises(ValueError, match="junk.json"):
        pacset.load(tmp_path / "junk.json")


def test_bad_frames_are_value_errors(forest):
    header, frames = forest.frames()
    with pytest.raises(ValueError, match="not pacset frames"):
        pacset.Forest.from_frames({"format": "other"}, frames)
    with pytest.raises(ValueError, match="frames hold"):
        pacset.Forest.from_frames(header, [bytes(frames[0])[:-1]])
    junk = bytearray(frames[0])
    junk[:8] = b"NOTPACST"
    with pytest.raises(ValueError):
        pacset.Forest.from_frames(header, [junk])


def _within(seconds, fn):
    """fn(), or a failure when it blocks longer than `seconds` (SIGALRM
    interrupts a blocked open(2); the handler's exception ends the call)."""
    def hung(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("name", ["model.pac", "model.json", "model.joblib"])
def test_a_fifo_model_path_is_refused_at_once(tmp_path, name):
    # Nobody writes to the FIFO: opening it for reading used to wait forever.
    fifo = tmp_path / name
    os.mkfifo(fifo)
    for call in (pacset.load, pacset.open):
        with pytest.raises(ValueError, match="is a FIFO, not a regular file"):
            _within(20, lambda: call(fifo))


def test_a_device_or_directory_model_path_is_refused(tmp_path):
    for path, kind in (("/dev/zero", "a character device"), (str(tmp_path), "a directory")):
        for call in (pacset.load, pacset.open):
            with pytest.raises(ValueError, match=f"is {kind}, not a regular file"):
                _within(20, lambda: call(path))
