#!/usr/bin/python3
"""One-row serving from a local .pac in a memory cgroup holding the process
plus a fraction of the forest, against the same with no limit (issue 35 item
3b). Needs root and the v1 memory controller at /sys/fs/cgroup/memory.

  hot_set_bench.py --bench build/bench/hot_set_bench --pac rf.pac --csv test.csv \
      --fraction 0.125 --keep none,lock-hot --rounds 3

Every run starts with the file's pages dropped from the page cache
(posix_fadvise DONTNEED: charged to nobody), warms up, then measures. The
configurations run interleaved, round after round. The process's own memory
(anonymous, without the warm forest) is measured first, in a cgroup without a
limit, and the limit is that plus FRACTION of the file. Prints one line per
run and a summary: rows/s median [min-max], ratio to no limit, p50/p99, and
whether every run's predictions hashed the same.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CG = "/sys/fs/cgroup/memory"


def drop_file_pages(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run_in_cgroup(name, limit, cmd):
    path = os.path.join(CG, name)
    os.makedirs(path, exist_ok=True)
    try:
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit) if limit else "-1")
        with open(os.path.join(path, "memory.max_usage_in_bytes"), "w") as f:
            f.write("0")
        wrapped = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', path] + cmd
        out = subprocess.run(wrapped, check=True, capture_output=True, text=True, timeout=1800)
        stat = {}
        with open(os.path.join(path, "memory.stat")) as f:
            for line in f:
                k, v = line.split()
                stat[k] = int(v)
        with open(os.path.join(path, "memory.failcnt")) as f:
            failcnt = int(f.read())
        with open(os.path.join(path, "memory.max_usage_in_bytes")) as f:
            peak = int(f.read())
        return json.loads(out.stdout.strip().splitlines()[-1]), stat, failcnt, peak
    finally:
        try:
            os.rmdir(path)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--bench-before", help="another build; a mode ending in @before runs it")
    ap.add_argument("--pac", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--fraction", default="0.125",
                    help="share of the file in memory; a comma-separated list runs each, "
                    "interleaved (e.g. 1,0.5,0.25,0.125,0.0625)")
    ap.add_argument("--keep", default="none", help="comma-separated modes under the limit")
    ap.add_argument("--budget-share", type=float, default=0.75,
                    help="lock/touch at most this share of the forest's memory allowance")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args()

    size = os.path.getsize(args.pac)
    base_cmd = [args.bench, args.pac, args.csv, "--rows", str(args.rows), "--warmup",
                str(args.warmup)]
    tag = "hotset_%d" % os.getpid()

    drop_file_pages(args.pac)
    calib, _, _, _ = run_in_cgroup(tag + "_calib", 0, base_cmd + ["--no-warm-forest"])
    # The cgroup's anonymous memory (the process's own, kernel-side buffers
    # of its rings included) with no warm forest, after as many rows.
    own = max(calib["rss_anon"], calib["cg_rss"])
    fractions = [float(f) for f in args.fraction.split(",")]
    configs = [("no-limit", 0, ["--until-warm"])]
    for fraction in fractions:
        allowance = int(size * fraction)
        limit = own + allowance
        budget = int(allowance * args.budget_share)
        print("file %d bytes; process anon %d; limit %d (+%.4g of the file); keep budget %d" %
              (size, own, limit, fraction, budget), flush=True)
        for name in args.keep.split(","):
            mode = name.split("@")[0]
            extra = ["--keep", mode]
            if mode != "none":
                extra += ["--budget", str(budget), "--every", str(args.every)]
            if name.endswith("@before"):
                extra = ["@before"] + extra
            label = name if len(fractions) == 1 else "%s@%g" % (name, fraction)
            configs.append(("limit/" + label, limit, extra))
    results = {c[0]: [] for c in configs}
    hashes = set()
    for rnd in range(args.rounds):
        for name, lim, extra in configs:
            drop_file_pages(args.pac)
            cmd = base_cmd + extra
            if extra[:1] == ["@before"]:
                cmd = [args.bench_before] + base_cmd[1:] + extra[1:]
            r, stat, failcnt, peak = run_in_cgroup(tag + "_run", lim, cmd)
            r["failcnt"] = failcnt
            r["peak"] = peak
            results[name].append(r)
            hashes.add(r["hash"])
            print("round %d %-24s %8.1f rows/s p50 %7.1f us p99 %8.1f us fetched %7d "
                  "warm %5d locked %9d peak %10d failcnt %d rss %d cache %d" %
                  (rnd, name, r["rows_per_s"], r["p50_us"], r["p99_us"], r["blocks_fetched"],
                   r["warm_requests"], r["locked_bytes"], peak, failcnt, r["cg_rss"], r["cg_cache"]),
                  flush=True)
    base = statistics.median(r["rows_per_s"] for r in results["no-limit"])
    print("\nsummary (median [min-max] over %d rounds):" % args.rounds)
    for name, _, _ in configs:
        rs = results[name]
        v = [r["rows_per_s"] for r in rs]
        print("%-24s rows/s %8.1f [%.1f-%.1f] = %.3fx  p50 %.0f us  p99 %.0f us  fetched/row %.1f" %
              (name, statistics.median(v), min(v), max(v), statistics.median(v) / base,
               statistics.median(r["p50_us"] for r in rs),
               statistics.median(r["p99_us"] for r in rs),
               statistics.median(r["blocks_fetched"] for r in rs) / (args.rows + args.warmup)))
    print("predictions identical in every run:", len(hashes) == 1)
    return 0 if len(hashes) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
