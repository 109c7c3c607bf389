#!/usr/bin/python3
"""Trace-driven repacking benchmark: blocks per request before and after
`pacset pack --weights-from-trace`, on traffic whose distribution differs
from the training data.

The model (a scikit-learn random forest on Debian's Fashion-MNIST) is trained
on data where classes 0-4 are common and 5-9 rare, so its training counts
(the default layout weights) describe traffic that never comes: the served
rows are mostly classes 5-9. We mount the packed forest with pacsetfs, record
a trace of one sample of that traffic with `pacset-trace record`, repack with
the trace's weights, and count blocks per request on a second, held-out
sample of the same traffic: analytically (engine paths) and measured through
the mount (each row cold: --evict-between-rows).

Usage (root, /dev/fuse): trace_repack_bench.py --build BUILD_DIR [--out DIR]
Prints a table and writes DIR/results.json and DIR/layouts.html.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testkit"))
import fashion_mnist  # noqa: E402
from fslib import Mount, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="build directory with tools/pacset etc.")
    ap.add_argument("--out", default=None, help="where to keep results (default: a temp dir)")
    ap.add_argument("--trees", type=int, default=32)
    ap.add_argument("--train-rows", type=int, default=8000)
    ap.add_argument("--serve-rows", type=int, default=400, help="rows per serving sample")
    ap.add_argument("--block-size", default="4KiB")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    tools = os.path.join(os.path.abspath(a.build), "tools")
    pacset, pacsetfs, ptrace = (os.path.join(tools, n) for n in ("pacset", "pacsetfs", "pacset-trace"))
    out = a.out or tempfile.mkdtemp(prefix="trace-repack-")
    os.makedirs(out, exist_ok=True)
    import joblib
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    rng = np.random.default_rng(a.seed)

    # Training: classes 0-4 make 90% of the rows, 5-9 only 10%.
    X, y = fashion_mnist.load("train")
    common, rare = np.where(y < 5)[0], np.where(y >= 5)[0]
    n_common = int(a.train_rows * 0.9)
    idx = np.concatenate([rng.choice(common, n_common, replace=False),
                          rng.choice(rare, a.train_rows - n_common, replace=False)])
    t = time.time()
    rf = RandomForestClassifier(n_estimators=a.trees, random_state=a.seed, n_jobs=2)
    rf.fit(X[idx], y[idx])
    model = os.path.join(out, "rf.joblib")
    joblib.dump(rf, model)
    print(f"trained {a.trees} trees on {a.train_rows} rows (90% classes 0-4) in {time.time() - t:.1f} s")

    # Serving: 90% classes 5-9; two disjoint samples (trace, evaluation).
    Xt, yt = fashion_mnist.load("test")
    hot, cold = rng.permutation(np.where(yt >= 5)[0]), rng.permutation(np.where(yt < 5)[0])
    n_hot = int(a.serve_rows * 0.9)
    samples = {}
    for k, name in enumerate(("serve_trace", "serve_eval")):
        rows = np.concatenate([hot[k * n_hot:(k + 1) * n_hot],
                               cold[k * (a.serve_rows - n_hot):(k + 1) * (a.serve_rows - n_hot)]])
        path = os.path.join(out, f"{name}.csv")
        np.savetxt(path, Xt[rng.permutation(rows)], delimiter=",", fmt="%d")
        samples[name] = path

    def pack(dst, *extra):
        run([pacset, "pack", model, "-o", dst, "--block-size", a.block_size, *extra])
        return dst

    before = pack(os.path.join(out, "before.pac"))
    store = "rocksdb:" + os.path.join(out, "store")
    run([pacset, "import", before, "--name", "forest", "--store", store])
    mp = os.path.join(out, "mnt")

    def record(trace, forest, rows, evict=True):
        cmd = [ptrace, "record", "--cold", "--per-row", "--mount", mp, "-o", trace, "--",
               pacset, "predict", os.path.join(mp, f"{forest}.pac"), "-i", rows,
               "-o", os.devnull, "--mark-requests", "row"]
        if evict:
            cmd.append("--evict-between-rows")
        t0 = time.time()
        run(cmd)
        return time.time() - t0

    results = {"config": vars(a)}
    with Mount(pacsetfs, store, mp):
        secs = record(os.path.join(out, "serve.trace"), "forest", samples["serve_trace"])
        results["record_seconds"] = secs
        after = pack(os.path.join(out, "after.pac"), "--weights-from-trace",
                     os.path.join(out, "serve.trace"), "--traced-pac", before)
        oracle = pack(os.path.join(out, "oracle.pac"), "--calibrate", samples["serve_trace"])
        run([pacset, "import", after, "--name", "after", "--store", store])
        time.sleep(1.0)  # the mount sees the new forest at its next catalog refresh
        measured = {}
        for forest in ("forest", "after"):
            trace = os.path.join(out, f"eval-{forest}.trace")
            record(trace, forest, samples["serve_eval"])
            rep = json.loads(run([ptrace, "report", trace, "--json"]).stdout)
            measured[forest] = rep["requests"]["blocks_per_request"]
            warm = os.path.join(out, f"warm-{forest}.trace")
            record(warm, forest, samples["serve_eval"], evict=False)
            rep = json.loads(run([ptrace, "report", warm, "--json"]).stdout)
            measured[forest + "-warm"] = {"store_fetches": rep["forests"][0]["blocks_fetched_from_store"]}
    lay = json.loads(run([ptrace, "layouts", "--pac", before, "--pac", after, "--pac", oracle,
                          "-i", samples["serve_eval"], "--json",
                          "-o", os.path.join(out, "layouts.html")]).stdout)
    analytical = {d["label"]: d["blocks_per_request"] for d in lay}
    results["analytical"] = analytical
    results["measured"] = measured
    print(f"\nblocks per request on held-out serving rows ({a.serve_rows} rows, block {a.block_size}):")
    print(f"  {'packing':44s} {'mean':>7s} {'median':>7s} {'p95':>5s} {'max':>5s}")
    names = {"before.pac": "training weights (default)", "after.pac": "weights from the trace",
             "oracle.pac": "--calibrate on the traced rows (oracle)"}
    for label, d in analytical.items():
        print(f"  {names[label]:44s} {d['mean']:7.2f} {d['median']:7.1f} {d['p95']:5d} {d['max']:5d}")
    b, t = analytical["before.pac"]["mean"], analytical["after.pac"]["mean"]
    o = analytical["oracle.pac"]["mean"]
    print(f"  after/before = {t / b:.3f}; oracle/before = {o / b:.3f}")
    print(f"  measured through the mount (cold rows): before {measured['forest']['mean']:.2f}, "
          f"after {measured['after']['mean']:.2f} blocks per request")
    print(f"  warm page cache, whole sample: before {measured['forest-warm']['store_fetches']} "
          f"blocks fetched, after {measured['after-warm']['store_fetches']}")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nresults in {out}")


if __name__ == "__main__":
    main()
