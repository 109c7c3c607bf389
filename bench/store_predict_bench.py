#!/usr/bin/python3
"""Predicting straight from Redis, without a mount (issue 11), in one run.

  bench/store_predict_bench.py --bin build/tools \\
      --model /work/models/rf682/rf.joblib --rows /work/models/rf682/test.csv \\
      [--work DIR] [--rounds 7] [--block-sizes 256,1KiB,4KiB,64KiB] [--stream-rows 2000]

Run as root (it writes /proc/sys/vm/drop_caches) while nothing else measures.
The forest is packed once per block size into --work (reused when there) and
imported into a real redis-server on a free loopback port (no persistence:
Redis holds every block in memory, as in the paper's deployment).

  * cold one row and cold 10 rows (different rows each round): a fresh
    `pacset predict --store redis://... NAME` process, so its block cache is
    empty; wall time of the process (start, connect, open, predict). Blocks,
    bytes, rounds and MultiGets (redis: pipelined round trips) it read, from its --timing line.
  * the baseline in the same rounds: the same rows through a pacsetfs mount of
    the same Redis store (4 KiB and 64 KiB blocks; a mount refuses smaller
    ones), a fresh daemon for every run and the page cache dropped, so no
    daemon or kernel cache survives.
  * a warm process: --input - fed the test rows twice; rows/s of the second
    pass (every block it needs already in its cache) and of the first (cold
    process, the cache filling up). Time measured by this script from the
    first line written to the last answer read.
After every page-cache drop the programs are read back (pacset, pacsetfs,
redis-server, their libraries and the store plugins with theirs): the
program is warm, the forest cold. Outputs of every path are compared with
the local .pac's. Every figure is the
median over rounds with [min - max]; the order is shuffled in each round.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import program_files, warm  # noqa: E402  (puts testkit/ on the path)
from fslib import Mount, Redis  # noqa: E402


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return wall, r.stdout, r.stderr


def spread(xs, unit="ms", scale=1e3):
    xs = sorted(xs)
    return (f"{statistics.median(xs) * scale:8.1f} {unit} "
            f"[{xs[0] * scale:.1f} - {xs[-1] * scale:.1f}]")


STORE_LINE = re.compile(r"read (\d+) blocks \((\d+) bytes\) from the store in (\d+) rounds, "
                        r"(\d+) MultiGets")


def store_reads(stderr):
    """Blocks, bytes, rounds, MultiGets; seconds to open; seconds to predict."""
    m = STORE_LINE.search(stderr)
    o = re.search(r"opened the store and the forest in ([0-9.]+) s", stderr)
    p = re.search(r"passes in ([0-9.]+) s", stderr)
    if not (m and o and p):
        raise SystemExit(f"no store statistics in: {stderr}")
    return tuple(int(x) for x in m.groups()) + (float(o.group(1)), float(p.group(1)))


def write_rows(header, lines, path):
    with open(path, "w") as f:
        f.write(header)
        f.writelines(lines)


def stream(cmd, header, lines, passes):
    """Feeds `lines` `passes` times to a --input - process; the seconds from
    the first line written to the last answer of each pass, and the answers."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, bufsize=1)
    p.stdin.write(header)
    p.stdin.flush()
    t0 = time.perf_counter()

    def feed():
        for _ in range(passes):
            p.stdin.writelines(lines)
        p.stdin.close()

    writer = threading.Thread(target=feed)
    writer.start()
    ends, answers = [], []
    for _ in range(passes):
        got = [p.stdout.readline() for _ in lines]
        ends.append(time.perf_counter())
        answers.append(got)
    writer.join()
    rest = p.stdout.read()
    err = p.stderr.read()
    if p.wait() != 0 or rest:
        raise SystemExit(f"stream failed ({p.returncode}): {err[-2000:]}")
    seconds = [ends[0] - t0] + [ends[i] - ends[i - 1] for i in range(1, passes)]
    return seconds, answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with pacset and pacsetfs")
    ap.add_argument("--model", required=True)
    ap.add_argument("--rows", required=True, help="CSV rows with a header (the test rows)")
    ap.add_argument("--work", default="/tmp/store-predict-bench")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--block-sizes", default="256,1KiB,4KiB,64KiB")
    ap.add_argument("--mount-block-sizes", default="4KiB,64KiB")
    ap.add_argument("--stream-rows", type=int, default=2000)
    a = ap.parse_args()
    pacset = os.path.join(a.bin, "pacset")
    pacsetfs = os.path.join(a.bin, "pacsetfs")
    os.makedirs(a.work, exist_ok=True)
    with open(a.rows) as f:
        header, lines = f.readline(), f.readlines()
    sizes = a.block_sizes.split(",")
    mount_sizes = [s for s in a.mount_block_sizes.split(",") if s]
    for bs in sorted(set(sizes) | set(mount_sizes)):
        pac = os.path.join(a.work, f"forest-{bs}.pac")
        if not os.path.exists(pac):
            print(f"packing at {bs} ...", flush=True)
            subprocess.run([pacset, "pack", a.model, "-o", pac + ".tmp", "--block-size", bs],
                           check=True, capture_output=True)
            os.rename(pac + ".tmp", pac)
    redis = Redis(a.work, persist=False).start()
    try:
        for bs in sorted(set(sizes) | set(mount_sizes)):
            subprocess.run([pacset, "import", os.path.join(a.work, f"forest-{bs}.pac"), "--name",
                            f"f-{bs}", "--store", redis.uri], check=True, capture_output=True)
        bench(a, pacset, pacsetfs, redis, header, lines, sizes, mount_sizes)
    finally:
        redis.stop()


def bench(a, pacset, pacsetfs, redis, header, lines, sizes, mount_sizes):
    # Read back after every cache drop: the forest is what is cold, not the
    # code (a store plugin and its libraries read from the disk during the
    # open took ~16 ms of a cold row's ~20 ms open).
    programs = program_files(pacset) + program_files(pacsetfs) + program_files(
        "/usr/bin/redis-server")
    one, ten = os.path.join(a.work, "one.csv"), os.path.join(a.work, "ten.csv")
    wall, reads = {}, {}
    for rnd in range(a.rounds):
        batches = {"1 row": (one, lines[rnd:rnd + 1]),
                   "10 rows": (ten, lines[100 + 10 * rnd:110 + 10 * rnd])}
        for path, rows in batches.values():
            write_rows(header, rows, path)
        _, expected_one, _ = run([pacset, "predict", os.path.join(a.work, "forest-4KiB.pac"),
                                  "-i", one])
        _, expected_ten, _ = run([pacset, "predict", os.path.join(a.work, "forest-4KiB.pac"),
                                  "-i", ten])
        expected = {"1 row": expected_one, "10 rows": expected_ten}
        order = [("store", bs, n) for bs in sizes for n in batches] + \
                [("mount", bs, n) for bs in mount_sizes for n in batches] + [("start", "", "")]
        random.Random(rnd).shuffle(order)
        for kind, bs, n in order:
            key = (kind, bs, n)
            if kind == "start":  # the floor of every cold process: start and exit
                drop_caches()
                warm(programs)
                wall.setdefault(key, []).append(run([pacset, "--version"])[0])
                continue
            csv = batches[n][0]
            if kind == "store":
                drop_caches()
                warm(programs)
                t, out, err = run([pacset, "predict", "--store", redis.uri, f"f-{bs}", "-i", csv,
                                   "--timing"])
                reads.setdefault(key, []).append(store_reads(err))
            else:
                # A fresh daemon: no block cache survives; a new mount's file
                # has an empty page cache.
                with Mount(pacsetfs, redis.uri, os.path.join(a.work, "mnt")) as m:
                    drop_caches()
                    warm(programs)
                    t, out, err = run([pacset, "predict", os.path.join(m.mp, f"f-{bs}.pac"), "-i",
                                       csv])
            if out != expected[n]:
                raise SystemExit(f"{kind} {bs} {n}: outputs differ from the local .pac")
            wall.setdefault(key, []).append(t)
    print(f"\ncold predictions, Redis on loopback, {a.rounds} rounds (median [min - max]); "
          "store: a fresh `pacset predict --store` process; mount: a fresh pacsetfs daemon")
    print(f"  process start and exit (`pacset --version`): {spread(wall[('start', '', '')])}")
    for n in ("1 row", "10 rows"):
        base_key = ("mount", "4KiB", n)
        base = statistics.median(wall[base_key]) if base_key in wall else None
        print(f"\n  {n}:")
        for kind, bs in [("store", s) for s in sizes] + [("mount", s) for s in mount_sizes]:
            w = wall[(kind, bs, n)]
            line = f"    {kind:5s} {bs:>6s} {spread(w)}"
            if base:
                line += f"  x{statistics.median(w) / base:5.2f} of mount 4KiB"
            if kind == "store":
                r = reads[(kind, bs, n)]
                blocks = statistics.mean(x[0] for x in r)
                kib = statistics.mean(x[1] for x in r) / 1024
                rounds = statistics.mean(x[2] for x in r)
                mgets = statistics.mean(x[3] for x in r)
                line += (f"  {blocks:7.0f} blocks {kib:8.0f} KiB {rounds:4.0f} rounds "
                         f"{mgets:4.0f} MultiGets (mean, metadata included); in the process: "
                         f"open {spread([x[4] for x in r])}, predict {spread([x[5] for x in r])}")
            print(line, flush=True)
    rows = lines[:a.stream_rows]
    print(f"\nwarm process, --input -, {len(rows)} rows fed twice (one line in, one line out):")
    _, expected_all, _ = run([pacset, "predict", os.path.join(a.work, "forest-4KiB.pac"), "-i",
                              a.rows])
    expected_lines = expected_all.splitlines(keepends=True)[:len(rows)]
    for bs in sizes:
        seconds, answers = stream([pacset, "predict", "--store", redis.uri, f"f-{bs}", "-i", "-"],
                                  header, rows, 2)
        for got in answers:
            if got != expected_lines:
                raise SystemExit(f"stream {bs}: answers differ from the local .pac")
        print(f"    store {bs:>6s}  first pass {len(rows) / seconds[0]:8.0f} rows/s, "
              f"second pass {len(rows) / seconds[1]:8.0f} rows/s", flush=True)


if __name__ == "__main__":
    main()
