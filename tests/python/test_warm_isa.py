"""PACSET_ISA caps the warm loop's instruction set (engine/internal/warm_simd.h):
with each value, in a fresh process (the variable is read once), a .pac file
predicts XGBoost's bits on adversarial rows — rows with and without NaN
through the SIMD kernels the machine has — and names what it used.
pacset.open(isa=...) asks for one in-process; a categorical XGBoost model
with NaN keeps its bits there, through the kernels (warm_simd_rows)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import xgboost as xgb

import pacset
from conftest import adversarial_rows

CHILD = r"""
import sys
import numpy as np
import pacset
pac, rows_path, out_path = sys.argv[1:4]
X = np.load(rows_path)
forest = pacset.open(pac)
for _ in range(3):  # enough warm work to build the warm forest
    forest.predict(X, n_threads=1)
np.save(out_path, np.stack([forest.predict(X, n_threads=t) for t in (1, 2)]))
info = forest._core.info()
print(info["warm_isa"], info["warm_simd_rows"])
"""


def _run(pac, rows_path, out_path, isa):
    env = dict(os.environ)
    env.pop("PACSET_ISA", None)
    if isa is not None:
        env["PACSET_ISA"] = isa
    out = subprocess.run([sys.executable, "-c", CHILD, str(pac), str(rows_path), str(out_path)],
                         env=env, check=True, capture_output=True, text=True).stdout.split()
    return out[0], int(out[1]), np.load(out_path)


def test_every_isa_predicts_xgboosts_bits(data, tmp_path):
    X, y = data
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 10},
                        xgb.DMatrix(X, label=y), 20)
    rows = adversarial_rows(booster, X)
    finite = rows[~np.isnan(rows).any(axis=1)]
    pac = tmp_path / "m.pac"
    pacset.load(booster).save(str(pac))
    order = ["scalar", "avx2", "avx512"]
    for name, X_ in (("with NaN", rows), ("without NaN", finite)):
        want = booster.inplace_predict(X_)
        rows_path = tmp_path / "rows.npy"
        np.save(rows_path, X_)
        for isa in (None, "scalar", "avx2", "avx512"):
            used, simd_rows, got = _run(pac, rows_path, tmp_path / "out.npy", isa)
            assert used in order, used
            if isa is not None:
                assert order.index(used) <= order.index(isa), (isa, used)
            for g in got:
                assert np.array_equal(g, want), (name, isa, used)
            if used == "scalar":
                assert simd_rows == 0, (name, isa)
            else:
                assert simd_rows > 0, (name, isa, used)


def test_an_unknown_pacset_isa_is_an_error_naming_it(data, tmp_path):
    X, y = data
    booster = xgb.train({"objective": "reg:squarederror", "max_depth": 4},
                        xgb.DMatrix(X, label=y), 5)
    pac = tmp_path / "m.pac"
    pacset.load(booster).save(str(pac))
    rows_path = tmp_path / "rows.npy"
    np.save(rows_path, X[:50].astype(np.float32))
    for accepted in ("", "auto"):
        used, _, got = _run(pac, rows_path, tmp_path / "out.npy", accepted)
        assert used in ("scalar", "avx2", "avx512"), used
        assert np.array_equal(got[0], booster.inplace_predict(X[:50].astype(np.float32)))
    env = dict(os.environ, PACSET_ISA="avx3")
    child = subprocess.run([sys.executable, "-c", CHILD, str(pac), str(rows_path),
                            str(tmp_path / "out2.npy")],
                           env=env, capture_output=True, text=True)
    assert child.returncode != 0
    assert "PACSET_ISA=avx3: expected scalar, avx2, avx512 or auto" in child.stderr, child.stderr
    assert not (tmp_path / "out2.npy").exists()


def test_open_isa_runs_the_kernels_asked_for_on_categorical_rows_with_nan(tmp_path):
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 70, size=(3000, 3)).astype(np.float32)
    num = rng.normal(size=(3000, 3)).astype(np.float32)
    X = np.hstack([codes, num])
    y = (codes[:, 0] % 3 == 0) ^ (num[:, 0] > 0)
    d = xgb.DMatrix(X, label=y, feature_types=["c"] * 3 + ["q"] * 3, enable_categorical=True)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 6, "tree_method": "hist",
                         "max_cat_to_onehot": 1}, d, 30)
    rows = X[:600].copy()
    rows[::7] = np.nan  # whole rows of NaN
    rows[1::5, 0] = rng.choice([-1.0, -0.5, -0.0, 69.5, 70.0, 1e9, np.inf, -np.inf], size=120)
    rows[2::5, 3] = np.nan
    want = booster.inplace_predict(rows)
    pac = tmp_path / "m.pac"
    pacset.load(booster).save(str(pac))
    with pytest.raises(ValueError, match="isa must be auto, scalar, avx2 or avx512"):
        pacset.open(str(pac), isa="avx3")
    order = ["scalar", "avx2", "avx512"]
    for isa in order:
        forest = pacset.open(str(pac), isa=isa)
        for _ in range(3):  # enough warm work to build the warm forest
            got = forest.predict(rows, n_threads=1)
            assert np.array_equal(got, want), isa
        info = forest._core.info()
        assert order.index(info["warm_isa"]) <= order.index(isa), (isa, info["warm_isa"])
        if info["warm_isa"] == "scalar":
            assert info["warm_simd_rows"] == 0, isa
        else:  # every row of the last requests took a kernel
            assert info["warm_simd_rows"] >= len(rows), (isa, info["warm_simd_rows"])
