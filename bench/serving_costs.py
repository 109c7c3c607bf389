#!/usr/bin/python3
"""The per-row and per-block costs of serving single-row predictions from a
redis store through pacsetfs, measured on one forest: the inputs of the
estimate in docs/scale.md.

  serving_costs.py --bin build/tools --model M.joblib|M.json|M.pac [--rows CSV]
                   [--block-sizes 4KiB,64KiB] [--queries 30] [--batches 10,100,1000]

For each block size (the forest packed with the pacset layout):
  * blocks/row cold: store fetches of one row after `drop *` (mean of
    --queries rows);
  * new blocks/row warm: store fetches per row of a batch of N rows from
    cold, i.e. what a row costs when the blocks of the N-1 rows before it
    are cached (the cache this takes is N's unique blocks, also shown);
  * engine CPU per row, warm (`--threads 1 --repeat`, pages cached);
  * daemon CPU per fetched block (all its work: FUSE, store call, checksum,
    push into the page cache) and redis CPU per GET (INFO commandstats).
Redis runs on loopback with appendfsync everysec. Timings are CPU times
(not wall), so they hold on a shared machine better than latencies do.
"""
import argparse
import os
import re

from benchlib import (add_common_args, block_size, cpu_seconds, packed, redis_usec_per_get,
                      setup)
from fslib import Mount, Redis, run


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--block-sizes", default="4KiB,64KiB")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--batches", default="10,100,1000")
    a = ap.parse_args()
    pacset, pacsetfs, work = setup(a, "serving-costs-")
    with open(a.rows) as f:
        lines = [line for line in f if line[:1].isdigit() or line[:1] == "-"]
    batches = [int(b) for b in a.batches.split(",")]
    files = {}
    for n in batches:
        files[n] = os.path.join(work, f"batch{n}.csv")
        with open(files[n], "w") as f:
            f.writelines(lines[-n:])  # the last rows: not those of the single-row queries
    queries = []
    for i in range(a.queries):
        q = os.path.join(work, f"q{i}.csv")
        with open(q, "w") as f:
            f.write(lines[i * 7])
        queries.append(q)

    redis = Redis(work, extra=["--appendfsync", "everysec"], name="costs-redis").start()
    try:
        print(f"{'block':>6} {'size MiB':>9} {'cold blocks/row':>16} "
              + " ".join(f"{'new/row @' + str(n):>12} {'(cache MiB)':>11}" for n in batches)
              + f" {'engine ms/row':>14} {'daemon us/blk':>14} {'redis us/GET':>13}")
        for bs in a.block_sizes.split(","):
            pac = packed(pacset, a.model, work, bs)
            block = block_size(pacset, pac)
            name = f"f{bs}"
            run([pacset, "import", pac, "--name", name, "--store", redis.uri])
            with Mount(pacsetfs, redis.uri, os.path.join(work, f"mnt-{bs}")) as m:
                path = os.path.join(m.mp, f"{name}.pac")

                def fetched():  # a forest appears in the stats once opened
                    return m.stats()["forests"].get(name, {}).get("blocks_fetched", 0)
                redis.cli("config", "resetstat")
                cpu0, f0 = cpu_seconds(m.proc.pid), fetched()
                for q in queries:
                    m.drop("*")
                    run([pacset, "predict", path, "-i", q])
                cold = (fetched() - f0) / len(queries)
                daemon_us = (cpu_seconds(m.proc.pid) - cpu0) * 1e6 / max(1, fetched() - f0)
                redis_us = redis_usec_per_get([redis])
                per_batch = []
                for n in batches:
                    m.drop("*")
                    f1 = fetched()
                    run([pacset, "predict", path, "-i", files[n], "-o", "/dev/null"])
                    unique = fetched() - f1
                    per_batch.append((unique / n, unique * block / 2**20))
                r = run([pacset, "predict", path, "-i", files[batches[-1]], "-o", "/dev/null",
                         "--threads", "1", "--repeat", "3", "--timing"])
                rate = float(re.search(r"= (\d+) rows/s", r.stderr).group(1))
            run([pacset, "rm", name, "--store", redis.uri])
            print(f"{bs:>6} {os.path.getsize(pac) / 2**20:9.0f} {cold:16.1f} "
                  + " ".join(f"{x:12.2f} {mib:11.1f}" for x, mib in per_batch)
                  + f" {1000 / rate:14.3f} {daemon_us:14.1f} {redis_us:13.1f}")
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
