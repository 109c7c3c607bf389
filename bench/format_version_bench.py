#!/usr/bin/python3
"""What binding blocks to their file costs (issue 31): format version 3
(block checksums seeded with the file's identity) against version 2 (seed
0), the same forest packed both ways, one pacset, in one run.

  bench/format_version_bench.py --bin build/tools [--model M --rows R]
      [--block-size 4KiB] [--rounds 9] [--work DIR]

Run as root (it writes /proc/sys/vm/drop_caches) while nothing else runs.
Per round, in shuffled order, for each version:
  * cold row: the page cache dropped, the program and the CSV read back, one
    row predicted by a fresh `pacset predict`: wall time of the process and
    the engine's time (--timing);
  * first warm request: every page cached, one request over all test rows
    from a fresh process, which verifies every block it uses once (hashing
    the node region: where a seeded checksum would cost);
  * warm: the same rows, 5 passes in one process (rows/s).
The outputs of both files are compared first (they must be identical).
Figures: median [min-max]; ratios v3/v2 of the medians, 1.00 expected.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {r.stderr}")
    return r


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def rows_per_second(stderr):
    m = re.search(r"= (\d+) rows/s", stderr)
    return float(m.group(1))


def engine_seconds(stderr):
    m = re.search(r"in ([0-9.]+) s =", stderr)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    benchlib.add_common_args(ap)
    ap.add_argument("--block-size", default="4KiB")
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    pacset, _, work = benchlib.setup(a, "pacset-format-bench-")
    files = {}
    for version in (2, 3):
        path = os.path.join(work, f"forest-v{version}-{a.block_size}.pac")
        if not os.path.exists(path):
            run([pacset, "pack", a.model, "-o", path, "--block-size", a.block_size,
                 "--format-version", str(version)])
        files[version] = path
    sizes = {v: os.path.getsize(p) for v, p in files.items()}
    print(f"forest: {a.model}, {a.block_size} blocks: v2 {sizes[2]} bytes, v3 {sizes[3]} bytes")
    outputs = {v: run([pacset, "predict", p, "--input", a.rows]).stdout for v, p in files.items()}
    if outputs[2] != outputs[3]:
        raise SystemExit("the two versions predict differently")
    one_row = os.path.join(work, "one-row.csv")
    with open(a.rows) as src:
        lines = src.read().splitlines()
        header = lines[0] if not re.match(r"^[-0-9.eE+,naNinf ]+$", lines[0]) else None
        data = lines[1:] if header else lines
    results = {v: {"cold wall ms": [], "cold engine ms": [], "first warm rows/s": [],
                   "warm rows/s": []} for v in files}
    rng = random.Random(31)
    for rnd in range(a.rounds):
        order = list(files)
        rng.shuffle(order)
        row = data[rng.randrange(len(data))]
        with open(one_row, "w") as f:
            f.write((header + "\n" if header else "") + row + "\n")
        for v in order:
            p = files[v]
            drop_caches()
            run([pacset, "--version"])  # the program back in memory
            with open(one_row) as f:
                f.read()
            t0 = time.perf_counter()
            r = run([pacset, "predict", p, "--input", one_row, "--timing"])
            results[v]["cold wall ms"].append((time.perf_counter() - t0) * 1000)
            results[v]["cold engine ms"].append(engine_seconds(r.stderr) * 1000)
        for v in order:
            p = files[v]
            with open(p, "rb") as f:  # every page cached
                while f.read(1 << 20):
                    pass
            r = run([pacset, "predict", p, "--input", a.rows, "--timing"])
            results[v]["first warm rows/s"].append(rows_per_second(r.stderr))
            r = run([pacset, "predict", p, "--input", a.rows, "--timing", "--repeat", "5"])
            results[v]["warm rows/s"].append(rows_per_second(r.stderr))
    print(f"{a.rounds} rounds, interleaved; median [min-max]")
    for key in results[2]:
        m2 = statistics.median(results[2][key])
        m3 = statistics.median(results[3][key])
        print(f"  {key:18s} v2 {benchlib.spread(results[2][key])}   "
              f"v3 {benchlib.spread(results[3][key])}   v3/v2 {m3 / m2:.3f}")


if __name__ == "__main__":
    main()
