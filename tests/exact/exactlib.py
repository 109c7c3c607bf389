"""Shared helpers for the exactness tests: run `pacset predict`, compare."""
import contextlib
import importlib.machinery
import importlib.util
import io
import subprocess
import warnings

import numpy as np


def write_rows(path, rows, header=True):
    """CSV with repr() floats (round-trip exact); NaN as an empty field."""
    with open(path, "w") as f:
        if header:
            f.write(",".join(f"f{i}" for i in range(rows.shape[1])) + "\n")
        for r in rows:
            f.write(",".join("" if np.isnan(v) else repr(float(v)) for v in r) + "\n")
    return path


class Exporter:
    """pacset-sklearn-export (the file `pacset` runs) loaded as a module, its
    main() run in this process: run(ARGS...) -> (exit status, standard error).
    A run of the program is ~1.3 s of python3 starting and importing
    scikit-learn, which a test that trains models has done already; `pacset`
    still runs the program itself (--stream) for every pickle it is given."""

    def __init__(self, path):
        loader = importlib.machinery.SourceFileLoader("pacset_sklearn_export", path)
        self.module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name,
                                                                                      loader))
        loader.exec_module(self.module)

    def run(self, *args):
        err = io.StringIO()
        try:
            # catch_warnings restores the filters and the showwarning main() sets.
            with contextlib.redirect_stderr(err), warnings.catch_warnings():
                status = self.module.main(list(args))
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 1
        return status, err.getvalue()

    def export(self, model, out, *flags):
        """Exports MODEL to OUT, or stops the test with the exporter's error."""
        status, err = self.run(model, "-o", out, *flags)
        if status != 0:
            raise SystemExit(f"pacset-sklearn-export {model} failed ({status}): {err.strip()}")
        return out


class Checker:
    def __init__(self, pacset):
        self.pacset = pacset
        self.failures = []
        self.checks = 0

    def predict(self, model, rows_csv, *flags):
        out = subprocess.run([self.pacset, "predict", model, "--input", rows_csv, *flags],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"pacset predict {model} {' '.join(flags)} failed "
                             f"({out.returncode}): {out.stderr.strip()}")
        lines = [l for l in out.stdout.splitlines() if l]
        return np.array([[float(v) for v in l.split(",")] for l in lines])

    def run_fail(self, model, rows_csv, *flags):
        out = subprocess.run([self.pacset, "predict", model, "--input", rows_csv, *flags],
                             capture_output=True, text=True)
        return out.returncode, out.stderr.strip()

    def expect(self, ok, message):
        self.checks += 1
        if not ok:
            self.failures.append(message)
            print("FAIL:", message)

    def same_bits(self, label, what, got, want):
        """float32 outputs must have identical bits."""
        want = np.asarray(want, dtype=np.float32).reshape(len(got), -1)
        got32 = got.astype(np.float32)
        if got32.shape != want.shape:
            return self.expect(False, f"{label} {what}: shape {got32.shape} != {want.shape}")
        diff = np.nonzero(got32.view(np.uint32) != want.view(np.uint32))
        self.expect(len(diff[0]) == 0,
                    f"{label} {what}: {len(diff[0])} values differ, first at row {diff[0][:1]} "
                    f"col {diff[1][:1]}: got {got32[diff][:3]} want {want[diff][:3]}")

    def same_float64(self, label, what, got, want):
        """float64 outputs must have identical bits (NaN equal to NaN)."""
        want = np.asarray(want, dtype=np.float64).reshape(len(got), -1)
        if got.shape != want.shape:
            return self.expect(False, f"{label} {what}: shape {got.shape} != {want.shape}")
        diff = np.nonzero((got.view(np.uint64) != want.view(np.uint64))
                          & ~(np.isnan(got) & np.isnan(want)))
        self.expect(len(diff[0]) == 0,
                    f"{label} {what}: {len(diff[0])} values differ, first at row {diff[0][:1]} "
                    f"col {diff[1][:1]}: got {got[diff][:3]} want {want[diff][:3]}")

    def close(self, label, what, got, want, tol):
        want = np.asarray(want, dtype=np.float64).reshape(len(got), -1)
        if got.shape != want.shape:
            return self.expect(False, f"{label} {what}: shape {got.shape} != {want.shape}")
        err = np.max(np.abs(got - want)) if got.size else 0.0
        self.expect(err <= tol, f"{label} {what}: max abs difference {err} > {tol}")
        return err

    def same_ints(self, label, what, got, want):
        want = np.asarray(want).reshape(len(got), -1)
        if got.shape != want.shape:
            return self.expect(False, f"{label} {what}: shape {got.shape} != {want.shape}")
        diff = np.nonzero(got.astype(np.int64) != want.astype(np.int64))
        self.expect(len(diff[0]) == 0,
                    f"{label} {what}: {len(diff[0])} leaf indices differ, first row "
                    f"{diff[0][:1]} tree {diff[1][:1]}")

    def finish(self):
        if self.failures:
            print(f"{len(self.failures)} of {self.checks} checks FAILED")
            return 1
        print(f"all {self.checks} checks passed")
        return 0
