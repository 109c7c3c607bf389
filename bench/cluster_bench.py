#!/usr/bin/python3
"""Redis Cluster against one redis server as the store: import MB/s and cold
single-row latency, and the per-block costs behind them.

  cluster_bench.py --bin build/tools [--model M] [--rows CSV] [--queries 20] [--rounds 3]

Stores, all on loopback on this machine: one redis-server; a Redis Cluster
of three masters with a replica each (block writes wait for a replica's
acknowledgement); the same cluster without replicas. Every server runs with
appendfsync everysec (the default persistence of an AOF), none with fsync on
every write.
  * import: `pacset import` of the packed forest (process start to exit,
    store freshly emptied by `pacset rm`), --rounds times, in an order
    rotated every round;
  * cold single row: one pacsetfs mount per store; for each of --queries
    rows, every store in turn (rotated): `drop *` on its mount, then
    `pacset predict` of that one row (process start to exit), checked
    against the local .pac's prediction;
  * per block: blocks fetched per cold row and the daemon's fetch latency
    (stats), the daemon's CPU time per fetched block (/proc, all its work:
    FUSE requests, store calls, checksums, pushes), and the server's CPU
    time per GET (INFO commandstats).
Figures are median [min-max]. The cluster's masters share this machine's
two cores with everything else: this measures the cost of routing and
replication, not the capacity of three machines.
"""
import argparse
import os
import time

from benchlib import add_common_args, cpu_seconds, packed, redis_usec_per_get, setup, spread
from fslib import Mount, Redis, RedisCluster, run

EVERYSEC = ["--appendfsync", "everysec"]


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block-size", default="64KiB")
    a = ap.parse_args()
    pacset, pacsetfs, work = setup(a, "cluster-bench-")
    pac = packed(pacset, a.model, work, a.block_size)
    size = os.path.getsize(pac)
    with open(a.rows) as f:
        lines = f.readlines()
    queries = []
    for i in range(a.queries):
        q = os.path.join(work, f"q{i}.csv")
        with open(q, "w") as f:
            f.write(lines[1 + i * 37 % (len(lines) - 1)])
        queries.append((q, run([pacset, "predict", pac, "-i", q]).stdout))
    print(f"forest {size / 2**20:.0f} MiB ({a.block_size} blocks), {a.queries} queries, "
          f"{a.rounds} import rounds")

    single = Redis(work, extra=EVERYSEC, name="single")
    replicated = RedisCluster(os.path.join(work, "c1"), replicas=1)
    plain = RedisCluster(os.path.join(work, "c0"), replicas=0)
    for c in (replicated, plain):
        for n in c.nodes:
            n.extra += EVERYSEC
    stores = {"redis": single, "cluster+replicas": replicated, "cluster": plain}
    try:
        for s in stores.values():
            s.start()
        imports = {name: [] for name in stores}
        for r in range(a.rounds):
            names = list(stores)
            for name in names[r % 3:] + names[:r % 3]:
                uri = stores[name].uri
                run([pacset, "rm", "forest", "--store", uri], check=False)
                t = time.perf_counter()
                run([pacset, "import", pac, "--name", "forest", "--store", uri])
                imports[name].append(size / (time.perf_counter() - t) / 1e6)

        cold = {name: [] for name in stores}
        mounts = {}
        try:
            for name, s in stores.items():
                mounts[name] = Mount(pacsetfs, s.uri, os.path.join(work, f"mnt-{name}")).__enter__()
            for s in stores.values():
                for n in getattr(s, "nodes", [s]):
                    n.cli("config", "resetstat")
            cpu0 = {name: cpu_seconds(m.proc.pid) for name, m in mounts.items()}
            names = list(stores)
            for i, (q, want) in enumerate(queries):
                for name in names[i % 3:] + names[:i % 3]:
                    m = mounts[name]
                    m.drop("*")
                    t = time.perf_counter()
                    out = run([pacset, "predict", os.path.join(m.mp, "forest.pac"), "-i", q]).stdout
                    cold[name].append(time.perf_counter() - t)
                    if out != want:
                        raise SystemExit(f"{name}: prediction of query {i} differs")
            print(f"\n{'store':<18}{'import MB/s':>22}{'cold 1-row ms':>24}{'blocks/row':>12}"
                  f"{'fetch p50/p99 us':>18}{'daemon us/block':>16}{'server us/GET':>15}")
            for name, s in stores.items():
                st = mounts[name].stats()["forests"]["forest"]
                lat = st["fetch_latency_us"]
                usec = redis_usec_per_get(getattr(s, "nodes", [s]))
                daemon = (cpu_seconds(mounts[name].proc.pid) - cpu0[name]) * 1e6 / st["blocks_fetched"]
                print(f"{name:<18}{spread(imports[name], fmt='{:.0f}'):>22}"
                      f"{spread(cold[name], 1000.0):>24}{st['blocks_fetched'] / a.queries:12.1f}"
                      f"{'<%d/<%d' % (lat['p50_upper'], lat['p99_upper']):>18}{daemon:16.1f}"
                      f"{usec:15.1f}")
        finally:
            for m in mounts.values():
                m.__exit__(None, None, None)
    finally:
        for s in stores.values():
            s.stop()


if __name__ == "__main__":
    main()
