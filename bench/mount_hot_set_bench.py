#!/usr/bin/python3
"""One-row serving through a pacsetfs mount whose memory is a fraction of the
forest (docs/scale.md): the daemon's block cache is `-o cache_size=FRACTION`
of the file and the reader (bench/hot_set_bench through the mount) runs in a
memory cgroup of its own memory plus --reader-margin. By default the daemon
puts nothing in the forest file's page cache (`-o no_push_blocks`, the reader
gathering through the gather file, `--gather-file`), so its cache is the only
copy of the forest in memory. With the gather on the forest file (the
default of a mount) every block is pushed into the page cache, charged to the
daemon's cgroup: --daemon-extra then limits the daemon to its cache plus that
(the daemon's own memory is its cache plus 17-29 MB on rf682: with 12 MiB
over the cache the cgroup's OOM killer ends it; with 64 MiB it runs, but that
much page cache holds most of the forest). Needs root, /dev/fuse and a
memory cgroup.

  mount_hot_set_bench.py --bin build --pac rf.pac --csv test.csv \
      --fraction 1,0.5,0.25,0.125,0.0625 --rounds 3 --warmup 300 --rows 500

Every run is a fresh daemon (empty cache) on a dir: store holding the forest,
and a fresh reader; the fractions run interleaved, round after round. Prints
one line per run and a summary: rows/s median [min-max], p50/p99, the
daemon's store fetches per row, and whether every run's predictions hashed
the same as the local file's with no limit (run first).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testkit.fslib import MemoryCgroup, Mount  # noqa: E402

MiB = 1 << 20


def cg_stat(cg):
    return dict((k, int(v)) for k, v in (line.split() for line in cg._read("memory.stat").splitlines()))


def bench_cmd(args, pac, extra=()):
    return [os.path.join(args.bin, "bench", "hot_set_bench"), pac, args.csv, "--rows", str(args.rows),
            "--warmup", str(args.warmup)] + list(extra)


def run_reader(cmd, limit, label):
    cg = MemoryCgroup(label, limit if limit else (1 << 40))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, preexec_fn=cg.enter)
        if out.returncode != 0:
            raise SystemExit("%s failed (%d): %s" % (cmd[0], out.returncode, out.stderr[-2000:]))
        return json.loads(out.stdout.strip().splitlines()[-1]), cg.times_limit_hit()
    finally:
        cg.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="build directory (tools/, bench/)")
    ap.add_argument("--pac", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--fraction", default="0.5,0.125")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--reader-margin", type=int, default=4 * MiB)
    ap.add_argument("--daemon-extra", type=int, default=0,
                    help="run the daemon in a cgroup of cache_size plus this (0: no limit)")
    ap.add_argument("--options", default="no_push_blocks", help="more mount options")
    ap.add_argument("--reader-flags", default="--gather-file",
                    help="hot_set_bench flags through the mount")
    args = ap.parse_args()

    tools = os.path.join(args.bin, "tools")
    size = os.path.getsize(args.pac)
    tmp = tempfile.mkdtemp(prefix="mount-hot-set-")
    try:
        store = "dir:" + os.path.join(tmp, "store")
        subprocess.run([os.path.join(tools, "pacset"), "import", args.pac, "--name", "f", "--store",
                        store], check=True, capture_output=True)
        ref, _ = run_reader(bench_cmd(args, args.pac, ["--until-warm"]), 0, "local")
        print("local, no limit: %.1f rows/s p50 %.0f us p99 %.0f us" %
              (ref["rows_per_s"], ref["p50_us"], ref["p99_us"]), flush=True)
        mp = os.path.join(tmp, "mnt")

        def mounted(fraction):
            cache = int(size * fraction)
            dcg = MemoryCgroup("daemon", cache + args.daemon_extra if args.daemon_extra else 1 << 40)
            opts = "cache_size=%d" % cache + ("," + args.options if args.options else "")
            return dcg, Mount(os.path.join(tools, "pacsetfs"), store, mp, options=opts,
                              preexec_fn=dcg.enter)

        # The reader's own memory through the mount (no warm forest), as in
        # hot_set_bench.py.
        dcg, m = mounted(1.0)
        with m:
            calib, _ = run_reader(bench_cmd(args, os.path.join(mp, "f.pac"),
                                            ["--no-warm-forest"] + args.reader_flags.split()),
                                  0, "calib")
        dcg.close()
        own = max(calib["rss_anon"], calib["cg_rss"])
        limit = own + args.reader_margin
        print("file %d bytes; reader anon %d; reader limit %d; daemon limit cache + %d" %
              (size, own, limit, args.daemon_extra), flush=True)
        fractions = [float(f) for f in args.fraction.split(",")]
        results = {f: [] for f in fractions}
        same = True
        for rnd in range(args.rounds):
            for f in fractions:
                dcg, m = mounted(f)
                try:
                    with m:
                        r, failcnt = run_reader(bench_cmd(args, os.path.join(mp, "f.pac"),
                                                          args.reader_flags.split()), limit, "rd")
                        st = m.stats()["forests"]["f"]
                        ds = cg_stat(dcg)
                        r.update(failcnt=failcnt, store_fetches=st["blocks_fetched"],
                                 daemon_rss=ds["rss"], daemon_cache=ds["cache"],
                                 daemon_failcnt=dcg.times_limit_hit(),
                                 fetch_p50=st["fetch_latency_us"]["p50"])
                finally:
                    dcg.close()
                same = same and r["hash"] == ref["hash"]
                results[f].append(r)
                print("round %d cache %-7g %7.1f rows/s p50 %7.0f us p99 %7.0f us store fetches %7d "
                      "reader failcnt %d daemon rss %d page cache %d failcnt %d fetch p50 %.0f us" %
                      (rnd, f, r["rows_per_s"], r["p50_us"], r["p99_us"], r["store_fetches"],
                       failcnt, r["daemon_rss"], r["daemon_cache"], r["daemon_failcnt"],
                       r["fetch_p50"]), flush=True)
        print("\nsummary (median [min-max] over %d rounds; local no limit %.1f rows/s):" %
              (args.rounds, ref["rows_per_s"]))
        for f in fractions:
            rs = results[f]
            v = [r["rows_per_s"] for r in rs]
            print("cache %-7g rows/s %7.1f [%.1f-%.1f] = %.3fx local  p50 %.0f us  p99 %.0f us  "
                  "store fetches/row %.1f" %
                  (f, statistics.median(v), min(v), max(v), statistics.median(v) / ref["rows_per_s"],
                   statistics.median(r["p50_us"] for r in rs),
                   statistics.median(r["p99_us"] for r in rs),
                   statistics.median(r["store_fetches"] for r in rs) / (args.rows + args.warmup)))
        print("predictions identical to the local file's in every run:", same)
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
