#!/usr/bin/python3
"""A page-faulting reader's cold row: a local file against pacsetfs mounts
(issue 34, item 4).

  bench/fault_reader_bench.py --bin build/tools [--old-pacsetfs OLD/pacsetfs]
      [--options LABEL=OPTS ...] [--stores dir,rocksdb] [--rounds 5] [--work DIR]

The reader is the independent one of tests/spec/pac_reader.py with the file
mapped (`PacFile(path, mapped=True)`: MAP_SHARED, read-only), walking one
tree after another in Python: it knows nothing of pacsetfs, its gather file
or the engine, and every block it touches is a page fault, the case "any
mmap engine" promises. It runs as one persistent worker process, so Python
and numpy stay in memory; each run times opening the forest (header, tree
table: the metadata blocks) and predicting one row, then unmaps it.

The forest (rf682 by default) is packed at 4 KiB and imported into each
store; one running daemon per store and daemon variant (this build's
pacsetfs, each --options set on it, --old-pacsetfs) serves it for the whole
benchmark. Every run is cold: the page cache dropped (`sync; echo 3 >
/proc/sys/vm/drop_caches`, so the stores' files too) and, through a mount,
the daemon's cache and the file's pages dropped (`drop forest` on the
control file). Each round predicts one row (another row each round) on the
local .pac and through every mount, in a shuffled order; the predictions
must be the same bits. Printed per place: the reader's time, median [min -
max]; "added" = the per-round difference to the local file in the same
round (median [min - max]); the reader's major faults; and for mounts the
blocks the daemon fetched and read ahead, its CPU time, and FUSE reads.
Run as root, while nothing else measures (or say that something did).
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testkit"))
sys.path.insert(0, HERE)
from benchlib import add_common_args, cpu_seconds, packed, setup, spread  # noqa: E402
from fslib import Mount, run  # noqa: E402


def worker():
    """Reads {"path", "row"} lines; answers {"seconds", "majflt", "out"}."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "spec"))
    import pac_reader
    for line in sys.stdin:
        job = json.loads(line)
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        t0 = time.perf_counter()
        pac = pac_reader.PacFile(job["path"], mapped=True)
        out = pac_reader.predict(pac, job["row"])
        seconds = time.perf_counter() - t0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - f0
        pac.data.close()
        print(json.dumps({"seconds": seconds, "majflt": faults,
                          "out": [repr(float(v)) for v in out]}), flush=True)


def drop_page_cache():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def forest_stats(m):
    return m.stats()["forests"].get("forest", {})


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stores", default="dir,rocksdb")
    ap.add_argument("--old-pacsetfs", help="also through this pacsetfs (a baseline build)")
    ap.add_argument("--options", action="append", default=[],
                    help="LABEL=OPTS: also this build's pacsetfs with -o OPTS (repeatable)")
    ap.add_argument("--no-default", action="store_true",
                    help="only the --options variants and --old-pacsetfs, not this build as is")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker()
    pacset, pacsetfs, work = setup(a, "fault-reader-bench-")
    pac = packed(pacset, a.model, work, "4096")
    with open(a.rows) as f:
        lines = [x for x in f.read().splitlines() if x.strip()]
    try:
        [float(x) for x in lines[0].split(",")]
    except ValueError:
        lines = lines[1:]  # a header
    stores = {}
    for kind in a.stores.split(","):
        uri = {"dir": "dir:", "rocksdb": "rocksdb:"}[kind] + os.path.join(work, "store-" + kind)
        if "forest" not in run([pacset, "ls", "--store", uri], check=False).stdout:
            run([pacset, "import", pac, "--name", "forest", "--store", uri])
        stores[kind] = uri
    daemons = [] if a.no_default else [("", pacsetfs, "")]
    for o in a.options:
        label, _, opts = o.partition("=")
        daemons.append((" " + label, pacsetfs, opts))
    if a.old_pacsetfs:
        daemons.append((" old", a.old_pacsetfs, ""))
    mounts = {}
    reader = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--bin", a.bin,
                               "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    res = {}
    try:
        for kind, uri in stores.items():
            for label, daemon, opts in daemons:
                where = kind + label
                mp = os.path.join(work, "mnt-" + where.replace(" ", "-"))
                mounts[where] = Mount(daemon, uri, mp, options=opts).__enter__()
        for rnd in range(a.rounds):
            row = [float(x) if x.strip() else float("nan")
                   for x in lines[(rnd * 37) % len(lines)].split(",")]
            order = ["local"] + list(mounts)
            random.Random(rnd).shuffle(order)
            outs = {}
            for where in order:
                drop_page_cache()
                m = mounts.get(where)
                if m:
                    m.drop("forest")
                    s0, cpu0 = forest_stats(m), cpu_seconds(m.proc.pid)
                path = os.path.join(m.mp, "forest.pac") if m else pac
                reader.stdin.write(json.dumps({"path": path, "row": row}) + "\n")
                reader.stdin.flush()
                r = json.loads(reader.stdout.readline())
                if m:
                    s1 = forest_stats(m)
                    r["cpu"] = cpu_seconds(m.proc.pid) - cpu0
                    for k in ("blocks_fetched", "prefetched_blocks", "reads", "pushed_blocks"):
                        r[k] = s1.get(k, 0) - s0.get(k, 0)
                outs[where] = r["out"]
                res.setdefault(where, []).append(r)
            if len({json.dumps(o) for o in outs.values()}) != 1:
                raise SystemExit(f"round {rnd}: predictions differ: {outs}")
    finally:
        reader.stdin.close()
        reader.wait()
        for m in mounts.values():
            m.__exit__(None, None, None)
    print(f"one cold row, page-faulting reader (tests/spec/pac_reader.py, mapped), "
          f"{os.path.basename(a.model)} at 4 KiB, {a.rounds} interleaved rounds, "
          f"median [min-max]; added = per round, minus the local file:")
    local = [r["seconds"] for r in res["local"]]
    for where, rs in res.items():
        secs = [r["seconds"] for r in rs]
        line = f"  {where:18s} {spread(secs, 1e3)} ms  faults {statistics.median(r['majflt'] for r in rs):5.0f}"
        if where != "local":
            added = [s - b for s, b in zip(secs, local)]
            line += (f"  added {spread(added, 1e3)} ms  FUSE reads "
                     f"{statistics.median(r['reads'] for r in rs):5.0f}  fetched "
                     f"{statistics.median(r['blocks_fetched'] for r in rs):5.0f}  read ahead "
                     f"{statistics.median(r['prefetched_blocks'] for r in rs):5.0f}  daemon CPU "
                     f"{spread([r['cpu'] for r in rs], 1e3)} ms")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
