#!/usr/bin/python3
"""pacsetfs on a forest of more than 1 GB packed.

  mount_bench.py --bin build/tools [--trees 48] [--rows 500000] [--work DIR]

Trains a scikit-learn ExtraTreesRegressor grown to purity (about 1M nodes a
tree) and measures, in one run:
  * import into a RocksDB and a directory store (MB/s of .pac written);
  * cold single-row latency, time to first prediction (process start to exit),
    each after `drop *` on the mounts and dropping every clean page of the
    machine (/proc/sys/vm/drop_caches, so the stores' own files are cold too):
      - `pacset predict` through a pacsetfs mount (RocksDB store, dir store),
      - `pacset predict` on the same .pac on local disk,
      - loading the whole model with joblib and predicting one row with
        scikit-learn;
    and the peak RSS of each;
  * warm batch throughput through the mount vs the same file outside it.
Ratios are against baselines measured in the same run; absolute times vary
from machine to machine.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testkit"))
from fslib import Mount  # noqa: E402

PY = "/usr/bin/python3"


def drop_all_caches():
    """Cold means cold everywhere: the store's own files too (needs root)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed_run(cmd):
    """Wall seconds and peak RSS (KiB) of a command (GNU time)."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    rss = int(r.stderr.strip().splitlines()[-1])
    return wall, rss, r.stdout


def summary(xs):
    return f"p50 {statistics.median(xs) * 1000:8.1f} ms  mean {statistics.mean(xs) * 1000:8.1f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with pacset and pacsetfs")
    ap.add_argument("--trees", type=int, default=48)
    ap.add_argument("--rows", type=int, default=500000)
    ap.add_argument("--queries", type=int, default=10, help="cold single-row predictions each")
    ap.add_argument("--block-size", default="64KiB")
    ap.add_argument("--work", help="keep everything here (default: a temp dir)")
    a = ap.parse_args()
    pacset, pacsetfs = os.path.join(a.bin, "pacset"), os.path.join(a.bin, "pacsetfs")
    work = a.work or tempfile.mkdtemp(prefix="mount-bench-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "big.joblib")
    queries = os.path.join(work, "q")
    os.makedirs(queries, exist_ok=True)
    if not os.path.exists(model):
        import joblib
        import numpy as np
        from sklearn.datasets import make_regression
        from sklearn.ensemble import ExtraTreesRegressor
        X, y = make_regression(n_samples=a.rows, n_features=16, noise=10.0, random_state=0)
        t = time.time()
        est = ExtraTreesRegressor(n_estimators=a.trees, n_jobs=2, random_state=0).fit(X, y)
        nodes = sum(e.tree_.node_count for e in est.estimators_)
        print(f"trained {a.trees} trees, {nodes} nodes in {time.time() - t:.0f} s")
        joblib.dump(est, model)
        rng = np.random.default_rng(1)
        Xq = rng.normal(size=(max(a.queries, 10000), 16))
        np.savetxt(os.path.join(work, "batch.csv"), Xq, delimiter=",")
        for i in range(a.queries):
            np.savetxt(os.path.join(queries, f"{i}.csv"), Xq[i:i + 1], delimiter=",")
    pac = os.path.join(work, "big.pac")
    if not os.path.exists(pac):
        t = time.time()
        subprocess.run([pacset, "pack", model, "-o", pac, "--block-size", a.block_size], check=True)
        print(f"packed in {time.time() - t:.0f} s (sklearn export + import + layout + write)")
    size = os.path.getsize(pac)
    print(f"model: {os.path.getsize(model) / 2**30:.2f} GiB pickle, {size / 2**30:.2f} GiB .pac")

    stores = {"rocksdb": "rocksdb:" + os.path.join(work, "rocks"),
              "dir": "dir:" + os.path.join(work, "dirstore")}
    for name, uri in stores.items():
        listing = subprocess.run([pacset, "ls", "--store", uri], capture_output=True, text=True)
        if " big " in listing.stdout or "\nbig " in listing.stdout:
            continue
        t = time.time()
        subprocess.run([pacset, "import", pac, "--name", "big", "--store", uri], check=True,
                       capture_output=True)
        s = time.time() - t
        print(f"import into {name}: {s:.1f} s = {size / s / 1e6:.0f} MB/s")

    qfiles = [os.path.join(queries, f"{i}.csv") for i in range(a.queries)]
    results = {}
    with Mount(pacsetfs, stores["rocksdb"], os.path.join(work, "mnt-rocks")) as mr, \
            Mount(pacsetfs, stores["dir"], os.path.join(work, "mnt-dir")) as md:
        for label, m in (("mount rocksdb", mr), ("mount dir", md)):
            walls, rss = [], 0
            for q in qfiles:
                m.drop("big")
                drop_all_caches()
                w, r, _ = timed_run([pacset, "predict", os.path.join(m.mp, "big.pac"), "-i", q])
                walls.append(w)
                rss = max(rss, r)
            results[label] = (walls, rss)
        walls, rss = [], 0
        for q in qfiles:
            drop_all_caches()
            w, r, _ = timed_run([pacset, "predict", pac, "-i", q])
            walls.append(w)
            rss = max(rss, r)
        results["local .pac"] = (walls, rss)
        walls, rss = [], 0
        for q in qfiles[: max(2, a.queries // 5)]:  # each load reads the whole model
            drop_all_caches()
            w, r, _ = timed_run([PY, "-c", "import joblib, numpy as np, sys; "
                                 "m = joblib.load(sys.argv[1]); "
                                 "print(m.predict(np.loadtxt(sys.argv[2], delimiter=',')"
                                 ".reshape(1, -1))[0])", model, q])
            walls.append(w)
            rss = max(rss, r)
        results["sklearn load+predict"] = (walls, rss)
        base = statistics.median(results["local .pac"][0])
        print(f"\ncold single-row prediction, time to first prediction ({a.queries} rows):")
        for label, (walls, rss) in results.items():
            print(f"  {label:22s} {summary(walls)}  peak RSS {rss / 1024:8.1f} MiB  "
                  f"x{statistics.median(walls) / base:6.2f} of local .pac")

        batch = os.path.join(work, "batch.csv")
        rates = {}
        for label, path in (("local .pac", pac), ("mount rocksdb", os.path.join(mr.mp, "big.pac")),
                            ("mount dir", os.path.join(md.mp, "big.pac"))):
            subprocess.run([pacset, "predict", path, "-i", batch, "-o", "/dev/null"], check=True)
            r = subprocess.run([pacset, "predict", path, "-i", batch, "-o", "/dev/null",
                                "--repeat", "3", "--timing", "--threads", "2"],
                               capture_output=True, text=True, check=True)
            rates[label] = float(re.search(r"= (\d+) rows/s", r.stderr).group(1))
        print("\nwarm batch throughput (10,000 rows x 3, 2 threads, pages cached):")
        for label, rate in rates.items():
            print(f"  {label:22s} {rate:10.0f} rows/s  x{rate / rates['local .pac']:.2f} of local")


if __name__ == "__main__":
    main()
