#!/usr/bin/python3
"""Cold predictions against the disk's own limits (issue 10), in one run.

  bench/cold_bench.py --bin build/tools --old-bin OLD/build/tools \\
      --model /work/models/rf682/rf.joblib --rows /work/models/rf682/test.csv \\
      [--work DIR] [--rounds 7] [--block-sizes 4KiB,64KiB] [--mount] [--fio]

Run as root (it writes /proc/sys/vm/drop_caches) while nothing else measures.
--old-bin is a build of the engine to compare with (e.g. `main` built in a
separate directory); without it only the new engine runs. --fio needs fio
(`apt-get install fio`; a benchmark tool, not a dependency of the tests).

For the forest packed at each block size (packed once into --work):
  * cold: one row, 10 rows, 100 rows (different rows each round), each a fresh
    `pacset predict` after dropping the page cache; the programs (whole
    executable and shared libraries) and the CSV are then read back, so only
    the model is cold. Wall time of the process;
    bytes it read from the disk (getrusage ru_inblock); blocks the new engine
    fetched (its --timing line). Baseline in the same rounds: `cat
    forest.pac > /dev/null`, cold. Outputs of new and old engine compared.
  * warm: batch throughput on the whole test CSV with every page cached,
    rows/s of the new engine (verifying blocks, and --no-verify) and the old.
  * --mount: 1, 10 and 100 cold rows and a cold `cat` of the whole file
    through pacsetfs mounts of a RocksDB and a dir store holding the 4 KiB
    packing (--mount-block-size for another), against the same on the local .pac, interleaved, the page cache
    dropped for every run; with --daemon fresh a new daemon for every run
    (no daemon or RocksDB cache survives, and its first request also pays
    for starting its threads), with --daemon running one daemon per store
    for the whole benchmark whose cache `pacsetfs drop-cache` empties before
    every run (the daemon keeps no RocksDB block cache); in every case, local
    too, the files the daemons map (programs, store plugins, libraries) are
    read back after the drop, as the programs are; the daemon's CPU time
    per block fetched and bytes it read from the disk. --mount-max-in-flight
    64,128 runs the engine through the mount with each bound (default: none
    given, the engine's own).
    --old-pacsetfs adds the same through a baseline daemon (predicting with
    the --old-bin engine when given).
    --mount-only skips everything else but --fio.
  * --fio: random 4 KiB reads (O_DIRECT, libaio) at queue depth 1 and 32 on
    the disk of --work: the device's own limits.
Every figure is the median over rounds with [min - max]; the order of the
measurements is shuffled in each round.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import program_files, read_whole  # noqa: E402  (puts testkit/ on the path)
from fslib import Mount  # noqa: E402


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run(cmd, **kw):
    """Wall seconds, bytes read from disk, stdout, stderr of a command."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "TIME %I"] + cmd, capture_output=True, text=True,
                       **kw)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    lines = r.stderr.strip().splitlines()
    inblock = int(lines[-1].split()[1])
    return wall, inblock * 512, r.stdout, "\n".join(lines[:-1])


def spread(xs, unit="ms", scale=1e3):
    xs = sorted(xs)
    return (f"{statistics.median(xs) * scale:8.1f} {unit} "
            f"[{xs[0] * scale:.1f} - {xs[-1] * scale:.1f}]")


def engine_seconds(stderr):
    """The prediction time pacset --timing reports (no process start, CSV, open)."""
    m = re.search(r"passes in ([0-9.]+) s", stderr)
    return float(m.group(1)) if m else None


def fetched(stderr):
    m = re.search(r"(\d+) blocks fetched in (\d+) rounds", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def read_back(*programs):
    """After dropping the page cache: only the model is cold. The programs
    and their libraries are read back whole: running `--version` alone leaves
    most of a program's code on the disk, and the engine's first walk (or a
    running daemon) then waits for page faults that read it (~4 ms of a cold
    row's engine time)."""
    for program in programs:
        subprocess.run([program, "--version"], capture_output=True)
        for path in program_files(program):
            read_whole(path)


def read_back_mapped(pids, skip_under):
    """Reads back whole every file the processes `pids` map (a running
    daemon's program, its store plugin and the libraries that loads: ldd does
    not list what dlopen brought), but nothing under `skip_under` (the
    forests and stores). Done for every case alike: after a cache drop, the
    daemons left running page their code back in at their next request or
    catalog refresh, and a case measured while they do reads the disk beside
    them (a local row came out 55 ms in one run, 17 ms alone)."""
    seen = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                maps = f.read()
        except OSError:
            continue
        for line in maps.splitlines():
            fields = line.split(None, 5)
            path = fields[5] if len(fields) == 6 else ""
            if not path.startswith("/") or path in seen or path.startswith(skip_under):
                continue
            seen.add(path)
            try:
                read_whole(path)
            except OSError:
                pass


def write_rows(header, lines, path):
    with open(path, "w") as f:
        f.write(header)
        f.writelines(lines)


def fio(directory, depth):
    path = os.path.join(directory, "fio.dat")
    r = subprocess.run(["fio", "--name=rr", f"--filename={path}", "--size=2G", "--rw=randread",
                        "--bs=4k", f"--iodepth={depth}", "--ioengine=libaio", "--direct=1",
                        "--runtime=8", "--time_based", "--output-format=json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["jobs"][0]["read"]["iops"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with the new pacset (and pacsetfs)")
    ap.add_argument("--old-bin", help="directory with the pacset to compare with")
    ap.add_argument("--model", required=True)
    ap.add_argument("--rows", required=True, help="CSV rows with a header (the test rows)")
    ap.add_argument("--work", default="/tmp/cold-bench")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--block-sizes", default="4KiB,64KiB")
    ap.add_argument("--warm-repeat", type=int, default=2)
    ap.add_argument("--max-in-flight", type=int, help="pass --max-in-flight N to the new engine")
    ap.add_argument("--mount", action="store_true", help="also through pacsetfs (dir, rocksdb)")
    ap.add_argument("--mount-only", action="store_true", help="only --mount (and --fio)")
    ap.add_argument("--old-pacsetfs", help="--mount: also through this pacsetfs (a baseline build)")
    ap.add_argument("--daemon", default="fresh,running",
                    help="--mount: fresh (a new daemon per run) and/or running (caches dropped)")
    ap.add_argument("--mount-max-in-flight", default="0",
                    help="--mount: the engine's --max-in-flight through the mount (a list; "
                         "0: the engine's own default)")
    ap.add_argument("--mount-block-size", default="4KiB",
                    help="--mount: the block size of the forest served through the mount")
    ap.add_argument("--mount-block-io", default="auto",
                    help="--mount: the engine's --block-io values to run through each mount "
                         "(e.g. auto,gather-file: the forest file's own gathers against the "
                         "gather file's, as older engines do)")
    ap.add_argument("--mount-what", default="1,10,100,cat",
                    help="--mount: which runs (row counts and cat), e.g. 1")
    ap.add_argument("--fio", action="store_true", help="also the device's random-read IOPS")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    new = os.path.join(a.bin, "pacset")
    old = os.path.join(a.old_bin, "pacset") if a.old_bin else None
    engines = {"new": new, "old": old} if old else {"new": new}
    with open(a.rows) as f:
        header, *lines = f.readlines()
    rng = random.Random(1)

    if a.fio:
        print(f"device ({a.work}): random 4 KiB reads, O_DIRECT: "
              f"depth 1 {fio(a.work, 1):,.0f} IOPS, depth 32 {fio(a.work, 32):,.0f} IOPS")
        os.unlink(os.path.join(a.work, "fio.dat"))

    def predict(engine, pac, csv, extra=()):
        cmd = [engines[engine], "predict", pac, "-i", csv, "--timing"] + list(extra)
        if engine == "new" and a.max_in_flight:
            cmd += ["--max-in-flight", str(a.max_in_flight)]
        return cmd

    for bs in ([] if a.mount_only else a.block_sizes.split(",")):
        pac = os.path.join(a.work, f"forest-{bs}.pac")
        if not os.path.exists(pac):
            subprocess.run([new, "pack", a.model, "-o", pac, "--block-size", bs], check=True)
        size = os.path.getsize(pac)
        info = json.loads(subprocess.run([new, "info", pac, "--json"], capture_output=True,
                                         text=True, check=True).stdout)
        print(f"\n=== {os.path.basename(a.model)} packed at {bs}: {size / 2**20:.1f} MiB, "
              f"{info['num_trees']} trees, {info['node_blocks']} node blocks ===")
        sizes = (1, 10, 100)
        res = {}  # label -> list of (wall, bytes, blocks, rounds)
        for rnd in range(a.rounds):
            csvs = {}
            for n in sizes:
                start = (rnd * n) % max(1, len(lines) - n)
                csvs[n] = os.path.join(a.work, f"cold-{n}.csv")
                write_rows(header, lines[start:start + n], csvs[n])
            jobs = [("cat whole file", None, None)]
            for n in sizes:
                for e in engines:
                    jobs.append((f"{e} {n} row{'s' if n > 1 else ''}", e, n))
            rng.shuffle(jobs)
            outputs = {}
            for label, e, n in jobs:
                drop_caches()
                if e is None:
                    subprocess.run(["cat", "--version"], capture_output=True)
                    t = time.perf_counter()
                    subprocess.run(["cat", pac], stdout=subprocess.DEVNULL, check=True)
                    wall = time.perf_counter() - t
                    res.setdefault(label, []).append((wall, size, None, None, wall))
                    continue
                read_back(engines[e])
                with open(csvs[n]) as f:
                    f.read()
                wall, nbytes, out, err = run(predict(e, pac, csvs[n]))
                blocks, rounds = fetched(err)
                res.setdefault(label, []).append((wall, nbytes, blocks, rounds,
                                                  engine_seconds(err)))
                outputs[(e, n)] = out
            for n in sizes:
                if old and outputs[("new", n)] != outputs[("old", n)]:
                    raise SystemExit(f"outputs differ for {n} cold rows ({bs})")
        base = statistics.median(x[0] for x in res["cat whole file"])
        print(f"cold, {a.rounds} rounds: predict = the engine's own time (--timing: no process "
              f"start, CSV or open), x = / cat of the whole file; wall = the whole process")
        for label in ["cat whole file"] + [f"{e} {n} row{'s' if n > 1 else ''}" for n in sizes
                                           for e in engines]:
            xs = res[label]
            walls = [x[0] for x in xs]
            engine = [x[4] for x in xs]
            mb = statistics.median(x[1] for x in xs) / 2**20
            extra = ""
            if xs[0][2] is not None:
                extra = (f"  blocks fetched {statistics.median(x[2] for x in xs):7.0f} in "
                         f"{statistics.median(x[3] for x in xs):5.0f} rounds")
            print(f"  {label:16s} predict {spread(engine)}  x{statistics.median(engine) / base:5.2f}"
                  f"  wall {spread(walls)}  read {mb:5.1f} MiB{extra}")

        # Warm: everything cached.
        subprocess.run(["cat", pac], stdout=subprocess.DEVNULL, check=True)
        variants = [("new", ()), ("new --no-verify", ("--no-verify",))]
        if old:
            variants.append(("old", ()))
        rates = {}
        for rnd in range(a.rounds):
            rng.shuffle(variants)
            for label, extra in variants:
                e = label.split()[0]
                _, _, _, err = run(predict(e, pac, a.rows, list(extra) +
                                           ["--repeat", str(a.warm_repeat), "-o", "/dev/null"]))
                rate = float(re.search(r"= (\d+) rows/s", err).group(1))
                rates.setdefault(label, []).append(rate)
        ref = statistics.median(rates["old"]) if old else None
        print(f"warm, {len(lines)} rows x {a.warm_repeat}, one thread, {a.rounds} rounds:")
        for label, xs in sorted(rates.items()):
            rel = f"  x{statistics.median(xs) / ref:.3f} of old" if ref else ""
            print(f"  {label:16s} {spread(xs, 'rows/s', 1)}{rel}")

    if a.mount or a.mount_only:
        mount_bench(a, new, header, lines)


def proc_cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu_ns(pid):
    """CPU time of the process's live threads in ns (schedstat): /proc/PID/stat
    counts in clock ticks (10 ms), a cold row's daemon CPU is a few ticks."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def proc_read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        return int(next(x for x in f if x.startswith("read_bytes:")).split()[1])


def quiesce(pids, quiet=0.05, limit=3.0):
    """Waits until the processes `pids` have read nothing from the disk and
    used no CPU for `quiet` seconds (at most `limit`), so that no case is
    measured beside a daemon still busy with the previous one (deferred
    pushes, a catalog refresh). Returns the seconds waited."""
    def sample():
        total = []
        for pid in pids:
            try:
                total.append((proc_read_bytes(pid), proc_cpu_ns(pid)))
            except OSError:
                pass
        return total
    t0 = time.time()
    last = sample()
    while time.time() - t0 < limit:
        time.sleep(quiet)
        now = sample()
        if now == last:
            break
        last = now
    return time.time() - t0


def fetched_blocks(m):
    """Blocks the daemon of Mount m fetched from the store for `forest` so far."""
    return m.stats()["forests"].get("forest", {}).get("blocks_fetched", 0)


def mount_bench(a, new, header, lines):
    """Cold predictions and a cold `cat` through pacsetfs against the same on
    the local .pac, interleaved: every run gets a fresh daemon (no daemon
    cache, no RocksDB cache) and a dropped page cache."""
    daemons = {"": os.path.join(a.bin, "pacsetfs")}
    if a.old_pacsetfs:
        daemons[" old"] = a.old_pacsetfs
    # The old daemon's rows run the old engine too (--old-bin), when given.
    old_engine = os.path.join(a.old_bin, "pacset") if a.old_bin else new
    bs = a.mount_block_size
    pac = os.path.join(a.work, f"forest-{bs}.pac")
    if not os.path.exists(pac):
        subprocess.run([new, "pack", a.model, "-o", pac, "--block-size", bs], check=True)
    suffix = "" if bs == "4KiB" else "-" + bs
    stores = {"rocksdb": "rocksdb:" + os.path.join(a.work, "rocks" + suffix),
              "dir": "dir:" + os.path.join(a.work, "dirstore" + suffix)}
    for uri in set(stores.values()):
        listing = subprocess.run([new, "ls", "--store", uri], capture_output=True, text=True)
        if "forest" not in listing.stdout:
            subprocess.run([new, "import", pac, "--name", "forest", "--store", uri], check=True,
                           capture_output=True)
    chosen = a.mount_what.split(",")
    sizes = tuple(int(x) for x in chosen if x != "cat")
    what = [f"{n} row{'s' if n > 1 else ''}" for n in sizes] + (["cat"] if "cat" in chosen else [])
    modes = a.daemon.split(",")
    bounds = [int(x) for x in a.mount_max_in_flight.split(",")]
    ios = a.mount_block_io.split(",")
    mounts = {}  # where -> (uri, daemon, mode, in-flight bound, --block-io)
    for kind, uri in stores.items():
        for d, daemon in daemons.items():
            for mode in modes:
                for bound in bounds:
                    for io in ios:
                        where = kind + d + ("" if mode == "fresh" else " run") + \
                            ("" if len(bounds) == 1 else f" {bound}") + \
                            ("" if len(ios) == 1 else f" {io}")
                        mounts[where] = (uri, daemon, mode, bound, io)
    running = {}  # (uri, daemon) -> Mount kept for the whole benchmark
    for where, (uri, daemon, mode, _, _) in mounts.items():
        if mode == "running" and (uri, daemon) not in running:
            m = Mount(daemon, uri, os.path.join(a.work, "mnt-run-" + where.split()[0] +
                                                str(len(running))))
            running[(uri, daemon)] = m.__enter__()
    res = {}  # (where, what) -> list of dicts
    try:
        for rnd in range(a.rounds):
            csvs = {}
            for n in sizes:
                start = (rnd * 131 + n) % max(1, len(lines) - n)
                csvs[n] = os.path.join(a.work, f"cold-mount-{n}.csv")
                write_rows(header, lines[start:start + n], csvs[n])
            jobs = [(where, w) for where in ["local"] + list(mounts) for w in what]
            random.Random(1000 + rnd).shuffle(jobs)
            outputs = {}
            for where, w in jobs:
                n = int(w.split()[0]) if w != "cat" else None

                def cmd(path, bound=None, engine=new, io="auto"):
                    if n is None:  # the whole file in reads of 128 KiB, as cat does
                        return ["dd", "if=" + path, "of=/dev/null", "bs=128K", "status=none"]
                    extra = ["--max-in-flight", str(bound)] if bound else []
                    if io != "auto":
                        extra += ["--block-io", io]
                    return [engine, "predict", path, "-i", csvs[n], "--timing"] + extra
                row = {}
                daemon_pids = [m.proc.pid for m in running.values()]
                stores_and_forests = os.path.realpath(a.work) + "/"
                quiesce(daemon_pids)
                if where == "local":
                    drop_caches()
                    read_back(cmd(pac)[0])
                    read_back_mapped(daemon_pids, stores_and_forests)
                    wall, _, out, err = run(cmd(pac))
                else:
                    uri, daemon, mode, bound, io = mounts[where]
                    engine = old_engine if " old" in where else new

                    def measure(m):
                        drop_caches()
                        # The engine this row runs (the old one for an old
                        # daemon's rows), not always the new one: a program
                        # left cold pages itself in during the row.
                        read_back(cmd(pac, engine=engine)[0], daemon)
                        read_back_mapped(sorted(set(daemon_pids + [m.proc.pid])),
                                         stores_and_forests)
                        pid = m.proc.pid
                        cpu0, io0 = proc_cpu_seconds(pid), proc_read_bytes(pid)
                        ns0 = proc_cpu_ns(pid)
                        blocks0 = fetched_blocks(m)
                        r = run(cmd(os.path.join(m.mp, "forest.pac"), bound, engine, io))
                        # Pushes deferred until gathers are quiet (the gather
                        # file's) may run after the process ends: they count.
                        time.sleep(0.1)
                        row["daemon_cpu"] = proc_cpu_seconds(pid) - cpu0
                        row["daemon_ns"] = proc_cpu_ns(pid) - ns0
                        row["disk"] = proc_read_bytes(pid) - io0
                        row["blocks"] = fetched_blocks(m) - blocks0
                        return r
                    if mode == "running":
                        m = running[(uri, daemon)]
                        m.drop("forest")  # the daemon cache and the file's page cache
                        wall, _, out, err = measure(m)
                    else:
                        # A fresh daemon: no block cache and no RocksDB cache survive.
                        with Mount(daemon, uri,
                                   os.path.join(a.work, "mnt-" + where.replace(" ", "-"))) as m:
                            wall, _, out, err = measure(m)
                row["wall"] = wall
                row["engine"] = engine_seconds(err) if n is not None else wall
                res.setdefault((where, w), []).append(row)
                if n is not None:
                    outputs.setdefault(n, {})[where] = out
            for n, outs in outputs.items():
                if len(set(outs.values())) != 1:
                    raise SystemExit(f"{n} cold rows: predictions differ between " + ", ".join(outs))
    finally:
        for m in running.values():
            m.__exit__(None, None, None)
    print(f"\ncold through pacsetfs ({bs} blocks; the page cache dropped for every run and "
          f"a fresh daemon, or for ' run' a running one whose cache was emptied), "
          f"{a.rounds} interleaved rounds, median [min - max]; x = / the same on "
          f"the local .pac; predict = the engine's own time (--timing), wall = the process; "
          f"daemon CPU per block fetched, disk = bytes the daemon read:")
    for w in what:
        base = statistics.median(r["engine"] for r in res[("local", w)])
        base_wall = statistics.median(r["wall"] for r in res[("local", w)])
        for where in ["local"] + list(mounts):
            xs = res[(where, w)]
            eng = [r["engine"] for r in xs]
            line = (f"  {w:8s} {where:23s} {'predict' if w != 'cat' else 'wall   '} {spread(eng)}"
                    f"  x{statistics.median(eng) / base:5.2f}")
            if w != "cat":
                walls = [r["wall"] for r in xs]
                line += f"  wall {spread(walls)}  x{statistics.median(walls) / base_wall:5.2f}"
            if where != "local":
                us = [r["daemon_ns"] / max(1, r["blocks"]) / 1e3 for r in xs]
                # utime + stime (/proc/PID/stat) summed over the rounds: ticks
                # of 10 ms are too coarse for one run.
                ticks = sum(r["daemon_cpu"] for r in xs) / max(1, sum(r["blocks"] for r in xs))
                line += (f"  blocks {statistics.median(r['blocks'] for r in xs):6.0f}"
                         f"  daemon CPU {spread(us, 'us/block', 1)} (stat: {ticks * 1e6:.1f})"
                         f"  disk {statistics.median(r['disk'] for r in xs) / 2**20:5.1f} MiB")
            print(line)


if __name__ == "__main__":
    main()
