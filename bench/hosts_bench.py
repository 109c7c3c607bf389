#!/usr/bin/python3
"""Two hosts, one redis store: batch prediction rows/s per host and both at once.

  hosts_bench.py --bin build/tools [--model M] [--rows CSV] [--batch 500] [--rounds 5]

The hosts are network namespaces joined by a veth pair (testkit/fslib.py
TwoHosts); redis runs on host a, each host mounts the store with its own
pacsetfs (host b reaches redis over the veth). For each of --rounds rounds,
in an order rotated every round, three configurations: host a alone, host b
alone, a and b at once. Each runs `pacset predict --threads 2` on the same
--batch rows from its own mount:
  * cold: after `drop *` on the mounts involved (kernel pages and daemon
    caches; redis holds the store in memory, it is not a cache);
  * warm: right after, `--repeat 3 --timing` (the engine's own rows/s).
Reported: per host and, for a+b, the sum, as median [min-max] over rounds;
"x one host" is a+b's sum over the median of a and b alone. Every output is
checked against `pacset predict` on the local .pac.

Both hosts share this machine's CPUs, so a+b measures contention for the
store and the CPUs, not what two machines would do.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

from benchlib import add_common_args, packed, setup, spread
from fslib import Mount, Redis, TwoHosts


def predict_on(mounts, batch, want, warm):
    """Runs predict on every mount at once; rows/s per mount."""
    procs = []
    for m in mounts:
        cmd = ["nsenter", "-t", str(m.proc.pid), "-m", "-n", ARGS.pacset, "predict",
               os.path.join(m.mp, "forest.pac"), "-i", batch, "--threads", "2"]
        if warm:
            cmd += ["-o", "/dev/null", "--repeat", "3", "--timing"]
        procs.append((m, time.perf_counter(), subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    rates = {}
    rows = sum(1 for _ in open(batch)) - 1  # header
    for m, t0, p in procs:
        out, err = p.communicate()
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"predict on {m.netns} failed: {err}")
        if warm:
            rates[m.netns] = float(re.search(r"= (\d+) rows/s", err).group(1))
        else:
            if out != want:
                raise SystemExit(f"predictions on {m.netns} differ from the local .pac's")
            rates[m.netns] = rows / wall
    return rates


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block-size", default="64KiB")
    ARGS = ap.parse_args()
    ARGS.pacset, pacsetfs, work = setup(ARGS, "hosts-bench-")
    pac = packed(ARGS.pacset, ARGS.model, work, ARGS.block_size)
    batch = os.path.join(work, "batch.csv")
    with open(ARGS.rows) as src, open(batch, "w") as dst:
        for i, line in enumerate(src):
            if i > ARGS.batch:
                break
            dst.write(line)
    want = subprocess.run([ARGS.pacset, "predict", pac, "-i", batch], check=True,
                          capture_output=True, text=True).stdout
    print(f"forest {os.path.getsize(pac) / 2**20:.0f} MiB ({ARGS.block_size} blocks), "
          f"batch {ARGS.batch} rows, {ARGS.rounds} rounds")

    hosts = TwoHosts()
    redis = None
    try:
        redis = Redis(work, netns=hosts.ns["a"], host=TwoHosts.ADDRESS["a"], port=6379,
                      extra=["--appendfsync", "everysec"]).start()
        t = time.perf_counter()
        hosts.run("a", [ARGS.pacset, "import", pac, "--name", "forest", "--store", redis.uri])
        print(f"import from host a: {os.path.getsize(pac) / (time.perf_counter() - t) / 1e6:.0f}"
              " MB/s")
        with Mount(pacsetfs, redis.uri, os.path.join(work, "mnt-a"), netns=hosts.ns["a"]) as ma, \
                Mount(pacsetfs, redis.uri, os.path.join(work, "mnt-b"), netns=hosts.ns["b"]) as mb:
            configs = {"a": [ma], "b": [mb], "a+b": [ma, mb]}
            results = {(c, k, h): [] for c in configs for k in ("cold", "warm")
                       for h in ("a", "b", "sum")}
            order = list(configs)
            for r in range(ARGS.rounds):
                for c in order[r % 3:] + order[:r % 3]:
                    for m in configs[c]:
                        m.drop("*")
                    for kind in ("cold", "warm"):
                        rates = predict_on(configs[c], batch, want, kind == "warm")
                        for ns, rate in rates.items():
                            results[(c, kind, ns[-1])].append(rate)
                        results[(c, kind, "sum")].append(sum(rates.values()))
            print(f"\n{'config':<7}{'kind':<6}{'host a rows/s':>26}{'host b rows/s':>26}"
                  f"{'total rows/s':>26}{'x one host':>12}")
            for kind in ("cold", "warm"):
                one = statistics.median(results[("a", kind, "a")] + results[("b", kind, "b")])
                for c in configs:
                    cols = [spread(results[(c, kind, h)], fmt="{:.0f}") if results[(c, kind, h)]
                            else ""
                            for h in ("a", "b", "sum")]
                    ratio = statistics.median(results[(c, kind, "sum")]) / one
                    print(f"{c:<7}{kind:<6}{cols[0]:>26}{cols[1]:>26}{cols[2]:>26}{ratio:12.2f}")
            for m in (ma, mb):
                s = m.stats()["forests"]["forest"]
                print(f"{m.netns}: {s['blocks_fetched']} blocks fetched, fetch latency p50 <"
                      f" {s['fetch_latency_us']['p50_upper']} us, p99 <"
                      f" {s['fetch_latency_us']['p99_upper']} us")
    finally:
        if redis:
            redis.stop()
        hosts.close()


if __name__ == "__main__":
    main()
