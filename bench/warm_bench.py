#!/usr/bin/python3
"""Warm inference speed (issue 16): pacset's engine on a .pac file in the page
cache against the library's own fastest predictor, same float32 rows.

Rows: the 10,000 Fashion-MNIST test rows (testkit/fashion_mnist.py), float32,
C order, loaded once (no CSV parsing is timed). For each model and thread
count, rounds alternate pacset and the library (interleaved), and the outputs
are checked against the library's before timing.

Models (each packed with `pacset pack` into --workdir, reused when present):
  xgb1030   /work/models/xgb1030/xgb.json: 1,030-tree multi:softprob, depth 12;
            library: Booster.inplace_predict (nthread = threads). Bit-exact.
  rf682     /work/models/rf682/rf.joblib: 682-tree RandomForestClassifier to
            purity; library: predict_proba (n_jobs = threads). Bit-exact.
            Packed with --rf-block-sizes (default 64KiB and 4KiB).
  xgb256    a 256-tree XGBoost reg:squarederror model, depth 8, trained here on
            the 60,000 training rows (cached in --workdir). Bit-exact.
  lgbm      a LightGBM text model (--lgbm-model), checked bit-exact (a
            200-tree regression was). LightGBM is not packaged in
            Debian 12: the library baseline runs only with --lgbm-lib (a built
            lib_lightgbm.so, called through its C API with ctypes, float32
            rows); without it the row says "no library" and checks against
            pacset's in-memory predictor of the same model instead.

The cost of the warm path is printed per model: the warm forest's bytes and
build time (it is built by the first large warm request), and the time of a
first one-row request (which does not wait for it).

usage: PYTHONPATH=build/python bench/warm_bench.py [--rounds 7] [--workdir DIR]
         [--pacset build/tools/pacset] [--models xgb1030,rf682,xgb256,lgbm]
         [--lgbm-model FILE] [--lgbm-lib lib_lightgbm.so]
Absolute times depend on the machine; the ratios are the result. The warm
loop uses the widest SIMD kernel the CPU has (engine/internal/warm_simd.h);
PACSET_ISA=scalar|avx2|avx512 caps it, to compare.
"""

import argparse
import ctypes
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testkit"))
import benchlib  # noqa: E402
import fashion_mnist  # noqa: E402

TARGET = 2.0  # issue 16: >= 2x the library, each model, 1 and 2 threads
SCALING_TARGET = 1.8  # 2 threads >= 1.8x of 1 thread


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def timed_both(fn, reps=1):
    """(wall seconds, CPU seconds of this process) per call of `reps` calls
    back to back: on a loaded machine the CPU time of a one-thread run is
    the steadier figure."""
    c, t = time.process_time(), time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps, (time.process_time() - c) / reps


def reps_for(fn):
    """Calls per timed sample: enough back-to-back calls to fill ~0.2 s (at
    most 10), so that a sample measures steady batch scoring. A single short
    call after idle time measures the hypervisor waking the second vCPU
    instead (a 2-thread 15 ms request took 17-24 ms after 0.2 s idle here,
    15 ms back to back); without idle time before it, the libraries' OpenMP
    workers still spinning from their last call (GOMP_SPINCOUNT) take a core
    from whatever is timed next."""
    (_, c) = timed(fn)
    return max(1, min(10, int(0.2 / max(c, 1e-6))))


def settle():
    """Lets the libraries' OpenMP workers stop spinning before a sample."""
    time.sleep(0.2)


def spread(ts):
    return f"{benchlib.spread(ts, 1e3)} ms (median [min-max], n={len(ts)})"


def pack(args, model, name, block_size="64KiB"):
    """`model` packed once per --workdir (a directory per model name)."""
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    return benchlib.packed(args.pacset, model, work, block_size)


def warm_up_file(path):
    """Reads the file once so its pages are in the page cache (warm)."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


class LightGBMLib:
    """LightGBM's C API through ctypes: float32 row-major input."""

    def __init__(self, lib_path, model_path):
        self.lib = ctypes.CDLL(lib_path)
        self.handle = ctypes.c_void_p()
        iters = ctypes.c_int()
        if self.lib.LGBM_BoosterCreateFromModelfile(model_path.encode(), ctypes.byref(iters),
                                                    ctypes.byref(self.handle)) != 0:
            raise RuntimeError("LightGBM could not load " + model_path)
        k = ctypes.c_int()
        self.lib.LGBM_BoosterGetNumClasses(self.handle, ctypes.byref(k))
        self.num_class = k.value

    def predict(self, X, threads):
        n, m = X.shape
        out = np.empty(n * self.num_class, dtype=np.float64)
        out_len = ctypes.c_int64()
        rc = self.lib.LGBM_BoosterPredictForMat(
            self.handle, X.ctypes.data_as(ctypes.c_void_p), 0, ctypes.c_int32(n),
            ctypes.c_int32(m), 1, 0, 0, -1, f"num_threads={threads}".encode(),
            ctypes.byref(out_len), out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
        if rc != 0:
            raise RuntimeError("LGBM_BoosterPredictForMat failed")
        return out.reshape(n, -1) if self.num_class > 1 else out


def xgb256_model(args):
    path = os.path.join(args.workdir, "xgb256-reg.json")
    if not os.path.exists(path):
        import xgboost as xgb

        X, y = fashion_mnist.load("train")
        booster = xgb.train({"objective": "reg:squarederror", "max_depth": 8, "nthread": 2,
                             "tree_method": "hist", "seed": 0},
                            xgb.DMatrix(X.astype(np.float32), label=y.astype(np.float32)), 256)
        booster.save_model(path + ".tmp.json")
        os.rename(path + ".tmp.json", path)
    return path


def cases(args):
    """(label, .pac path, library predict(threads) or None, check(ours, lib))."""
    import pacset

    exact = np.array_equal
    names = args.models.split(",")
    if "xgb1030" in names:
        import xgboost as xgb

        booster = xgb.Booster(model_file=args.xgb)

        def lib(t, b=booster):
            b.set_param({"nthread": t})
            return b.inplace_predict(args.X)
        yield ("xgb1030 (1,030 trees, depth 12, 10 classes)", pack(args, args.xgb, "xgb1030"),
               lib, exact)
    if "rf682" in names:
        import joblib

        est = joblib.load(args.rf)

        def lib(t, e=est):
            e.set_params(n_jobs=t)
            return e.predict_proba(args.X)
        for bs in args.rf_block_sizes.split(","):
            yield (f"rf682 (682 trees to purity), {bs} blocks",
                   pack(args, args.rf, "rf682", bs), lib, exact)
        del est
    if "xgb256" in names:
        import xgboost as xgb

        path = xgb256_model(args)
        booster = xgb.Booster(model_file=path)

        def lib(t, b=booster):
            b.set_param({"nthread": t})
            return b.inplace_predict(args.X)
        yield "xgb256 (256 trees regression, depth 8)", pack(args, path, "xgb256"), lib, exact
    if "lgbm" in names:
        if not args.lgbm_model:
            print("\n== lgbm: skipped (no --lgbm-model)")
            return
        pac = pack(args, args.lgbm_model, "lgbm")
        label = f"lgbm ({os.path.basename(args.lgbm_model)})"
        if args.lgbm_lib:
            lgb = LightGBMLib(args.lgbm_lib, args.lgbm_model)
            yield label, pac, lambda t: lgb.predict(args.X, t), exact
        else:
            ref = pacset.load(args.lgbm_model)
            yield label + ", no library", pac, None, None
            args.lgbm_ref = ref


def run_case(args, label, pac, lib, check):
    import pacset

    warm_up_file(pac)
    forest = pacset.open(pac)
    # A first request of one row walks the file as it is (it never waits for
    # the warm forest); the first large request builds the warm forest.
    (_, t_row) = timed(lambda: forest.predict(args.X[:1], n_threads=1))
    (_, t_first) = timed(lambda: forest.predict(args.X, n_threads=1))
    live = forest._core.info()  # live engine figures (Forest.info is taken at open)
    print(f"\n== {label}: {pac} ({os.path.getsize(pac) / 1e6:.1f} MB)")
    print(f"  first request, 1 row: {t_row * 1e3:.2f} ms; first {args.X.shape[0]}-row request "
          f"(builds the warm forest): {t_first * 1e3:.0f} ms")
    print(f"  warm forest: {live.get('warm_path_bytes', 0) / 1e6:.1f} MB, built in "
          f"{live.get('warm_path_build_seconds', 0) * 1e3:.1f} ms; instructions: "
          f"{live.get('warm_isa', '?')} (PACSET_ISA={os.environ.get('PACSET_ISA', 'unset')})")
    n = args.X.shape[0]
    per_thread = {}
    for threads in (1, 2):
        ours = lambda: forest.predict(args.X, n_threads=threads)  # noqa: E731
        got = ours()
        if lib is not None:
            want = lib(threads)
            ok = check(got, want)
            if not ok:
                sys.exit(f"{label}: outputs differ from the library "
                         f"(max |diff| {np.max(np.abs(got - want))})")
        elif getattr(args, "lgbm_ref", None) is not None:
            assert np.array_equal(got, args.lgbm_ref.predict(args.X, n_threads=1))
        t_ours, t_lib, c_ours, c_lib = [], [], [], []
        reps_ours = reps_for(ours)
        reps_lib = reps_for(lambda: lib(threads)) if lib is not None else 1
        for _ in range(args.rounds):  # interleaved
            settle()
            w, c = timed_both(ours, reps_ours)
            t_ours.append(w)
            c_ours.append(c)
            if lib is not None:
                settle()
                w, c = timed_both(lambda: lib(threads), reps_lib)
                t_lib.append(w)
                c_lib.append(c)
        mo = statistics.median(t_ours)
        per_thread[threads] = mo
        print(f"  {threads} thread(s): pacset {n / mo:10.0f} rows/s  {spread(t_ours)}, "
              f"{reps_ours} call(s) a sample")
        if lib is not None:
            ml = statistics.median(t_lib)
            r = ml / mo
            print(f"  {threads} thread(s): library {n / ml:9.0f} rows/s  {spread(t_lib)}, "
                  f"{reps_lib} call(s) a sample")
            print(f"  {threads} thread(s): ratio {r:.2f}x (target >= {TARGET}x: "
                  f"{'met' if r >= TARGET else 'MISSED'}; per-round range "
                  f"{min(t_lib) / max(t_ours):.2f}-{max(t_lib) / min(t_ours):.2f}x)")
            if threads == 1:
                rc = statistics.median(c_lib) / statistics.median(c_ours)
                print(f"  1 thread: CPU time pacset {spread(c_ours)}, library {spread(c_lib)}: "
                      f"ratio {rc:.2f}x")
    live = forest._core.info()
    print(f"  rows walked by the SIMD kernels: {live.get('warm_simd_rows', 0)}")
    s = per_thread[1] / per_thread[2]
    print(f"  2 threads / 1 thread: {s:.2f}x (target >= {SCALING_TARGET}x: "
          f"{'met' if s >= SCALING_TARGET else 'MISSED'})")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pacset", default="build/tools/pacset")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workdir", default="/tmp/pacset-warm-bench")
    ap.add_argument("--models", default="xgb1030,rf682,xgb256,lgbm")
    ap.add_argument("--rf", default="/work/models/rf682/rf.joblib")
    ap.add_argument("--rf-block-sizes", default="64KiB,4KiB")
    ap.add_argument("--xgb", default="/work/models/xgb1030/xgb.json")
    ap.add_argument("--lgbm-model", default=None)
    ap.add_argument("--lgbm-lib", default=None)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    X, _ = fashion_mnist.load("test")
    args.X = np.ascontiguousarray(X.astype(np.float32))
    print(f"{args.X.shape[0]} rows x {args.X.shape[1]} float32 features, "
          f"{os.cpu_count()} CPUs, {args.rounds} interleaved rounds")
    for label, pac, lib, check in cases(args):
        run_case(args, label, pac, lib, check)


if __name__ == "__main__":
    main()
