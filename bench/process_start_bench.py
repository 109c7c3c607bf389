#!/usr/bin/python3
"""What a whole `pacset` process costs as users run it (issue 34), each
against a baseline measured in the same run, in interleaved rounds:

  version  CPU time (user + system, from wait4) and elapsed time of
           `pacset --version` and `pacsetfs --version` against /bin/true's.
  cold     One row through a whole `pacset predict FILE.pac` process, the
           program and its libraries in memory, the forest cold (page cache
           dropped, then the program's files read back), against a cold
           `cat FILE.pac > /dev/null`; outputs checked against a warm run.
  mount    A fresh daemon: `pacsetfs mount -f` until its stats file answers,
           then one cold row through the mount (page cache dropped before
           the mount), for dir: and rocksdb: stores; elapsed, and the daemon's
           CPU until the mount answered.
  stream   (the last --bin only) Rows per second of `pacset predict FILE.pac --input -` fed one
           line at a time (write a line, wait for its answer) against the
           Python API's per-row loop (pacset.open(FILE).predict(row)), warm,
           answers checked equal.

Each binary directory given with --bin (repeatable, e.g. a build before and
after a change) is measured in the same rounds. Run as root (it writes
/proc/sys/vm/drop_caches); the machine may be loaded by others: rely on the
same-run ratios.

usage: bench/process_start_bench.py --bin build/tools [--bin OLD/tools]
         [--mode version,cold,mount,stream] [--rounds 5] [--pac F.pac | --model M]
         [--rows test.csv] [--python-path build/python]
"""
import argparse
import os
import re
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import minor_faults, packed, program_files, spread, warm  # noqa: E402
from fslib import is_mounted  # noqa: E402  (benchlib puts testkit/ on the path)


def cpu_and_elapsed(argv):
    """(user + system CPU seconds, elapsed seconds) of one run of argv."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    elapsed = time.perf_counter() - t0
    assert os.waitstatus_to_exitcode(status) == 0, f"{argv} failed"
    return ru.ru_utime + ru.ru_stime, elapsed


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def rotated(cases, rnd):
    """The cases in round `rnd`'s order: each starts each round one place
    later, so no binary always runs right after a cache drop or another."""
    k = rnd % len(cases)
    return cases[k:] + cases[:k]


def mode_version(bins, rounds, per_round):
    cases = [("/bin/true", ["/bin/true"])]
    for label, d in bins:
        for tool in ("pacset", "pacsetfs"):
            cases.append((f"{tool} --version ({label})", [os.path.join(d, tool), "--version"]))
    cpu = {n: [] for n, _ in cases}
    wall = {n: [] for n, _ in cases}
    for rnd in range(rounds):
        for name, argv in rotated(cases, rnd):
            c = e = 0.0
            for _ in range(per_round):
                ci, ei = cpu_and_elapsed(argv)
                c += ci
                e += ei
            cpu[name].append(c / per_round)
            wall[name].append(e / per_round)
    base_cpu = sorted(cpu["/bin/true"])[len(cpu["/bin/true"]) // 2]
    print(f"\nversion: mean of {per_round} runs per round, {rounds} rounds, median [min-max]")
    print(f"{'':36} {'CPU ms':>20} {'elapsed ms':>20} {'CPU / true':>11}")
    for name, _ in cases:
        med = sorted(cpu[name])[len(cpu[name]) // 2]
        print(f"{name:36} {spread(cpu[name], 1e3, '{:.2f}'):>20} "
              f"{spread(wall[name], 1e3, '{:.2f}'):>20} {med / base_cpu:>10.2f}x")


def write_one_row(rows, row_file):
    with open(rows) as f:
        lines = [next(f), next(f)]
    if not re.match(r"^[-0-9.eE,nan ]+$", lines[0].strip()):
        lines = lines[1:]
    with open(row_file, "w") as f:
        f.write(lines[0])


def mode_cold(bins, pac, rows, rounds, work):
    row_file = os.path.join(work, "one-row.csv")
    cases = [("cat FILE.pac > /dev/null", ["cat", pac], None)]
    for label, d in bins:
        binary = os.path.join(d, "pacset")
        argv = [binary, "predict", pac, "--input", row_file]
        want = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        cases.append((f"pacset predict, 1 row ({label})", argv, (program_files(binary), want)))
    times = {n: [] for n, _, _ in cases}
    for rnd in range(rounds):
        for name, argv, extra in rotated(cases, rnd):
            drop_caches()
            if extra:
                warm(extra[0])
            t0 = time.perf_counter()
            r = subprocess.run(argv, stdout=subprocess.PIPE if extra else subprocess.DEVNULL,
                               text=True, check=True)
            times[name].append(time.perf_counter() - t0)
            if extra:
                assert r.stdout == extra[1], f"{name}: {r.stdout!r} != {extra[1]!r}"
    base = sorted(times[cases[0][0]])[rounds // 2]
    print(f"\ncold: one row, forest cold, program warm; {os.path.getsize(pac) >> 20} MiB "
          f"file; {rounds} rounds, median [min-max]")
    for name, _, _ in cases:
        med = sorted(times[name])[rounds // 2]
        print(f"{name:40} {spread(times[name], 1e3):>22} ms  {med / base:.2f}x cat")


def answers(mp):
    """Whether a daemon serves `mp` (its stats file needs the daemon)."""
    try:
        if not is_mounted(mp):
            return False
        with open(os.path.join(mp, ".pacsetfs", "stats")) as f:
            return f.read(1) == "{"
    except OSError:
        return False


def mode_mount(bins, pac, rows, rounds, work):
    row_file = os.path.join(work, "one-row.csv")
    pacset = os.path.join(bins[-1][1], "pacset")
    want = subprocess.run([pacset, "predict", pac, "--input", row_file], capture_output=True,
                          text=True, check=True).stdout
    stores = []
    for kind in ("dir", "rocksdb"):
        uri = f"{kind}:{work}/store-{kind}"
        if not os.path.exists(f"{work}/store-{kind}"):
            subprocess.run([pacset, "import", pac, "--name", "forest", "--store", uri],
                           check=True, capture_output=True)
        stores.append((kind, uri))
    cases = [(f"{kind} ({label})", d, uri) for kind, uri in stores for label, d in bins]
    up = {n: [] for n, _, _ in cases}
    cpu = {n: [] for n, _, _ in cases}
    row = {n: [] for n, _, _ in cases}
    faults = {n: [] for n, _, _ in cases}
    mp = os.path.join(work, "mnt")
    for rnd in range(rounds):
        for name, d, uri in rotated(cases, rnd):
            pacsetfs = os.path.join(d, "pacsetfs")
            drop_caches()
            warm(program_files(pacsetfs) + program_files(os.path.join(d, "pacset")))
            os.makedirs(mp, exist_ok=True)
            t0 = time.perf_counter()
            daemon = subprocess.Popen([pacsetfs, "mount", mp, "--store", uri, "-f"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                while not answers(mp):  # polled every 0.2 ms
                    assert daemon.poll() is None and time.perf_counter() - t0 < 30, "no mount"
                    time.sleep(0.0002)
                up[name].append(time.perf_counter() - t0)
                t1 = time.perf_counter()
                r = subprocess.run([os.path.join(d, "pacset"), "predict", f"{mp}/forest.pac",
                                    "--input", row_file], capture_output=True, text=True,
                                   check=True)
                row[name].append(time.perf_counter() - t1)
                assert r.stdout == want, f"{name}: {r.stdout!r} != {want!r}"
                faults[name].append(minor_faults(daemon.pid))
            finally:
                subprocess.run(["fusermount3", "-u", mp], capture_output=True)
                # The daemon's whole CPU (all its threads, those that ended
                # too: the store opens on a thread of its own), from wait4.
                _, _, usage = os.wait4(daemon.pid, 0)
                daemon.returncode = 0
                cpu[name].append(usage.ru_utime + usage.ru_stime)
    print(f"\nmount: a fresh daemon, program warm, store cold; {rounds} rounds, median [min-max];"
          " daemon CPU = its whole life (mount, the row, unmount; wait4: with the children it"
          " waited for, fusermount3 since 0.4.4); faults = the daemon's own page faults until"
          " after the row")
    print(f"{'':44} {'mounted after ms':>20} {'daemon CPU ms':>16} {'first row ms':>20} "
          f"{'faults':>18}")
    for name, _, _ in cases:
        print(f"{name:44} {spread(up[name], 1e3):>20} {spread(cpu[name], 1e3):>16} "
              f"{spread(row[name], 1e3):>20} {spread(faults[name], 1, '{:.0f}'):>18}")


class Stream:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)

    def ask(self, line):
        self.p.stdin.write(line)
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], 60)
        assert ready, "no answer"
        return self.p.stdout.readline()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def mode_stream(bins, pac, rows, rounds, n_rows, python_path):
    import numpy as np
    sys.path.insert(0, python_path)
    import pacset as api
    with open(rows) as f:
        lines = [next(f) for _ in range(n_rows + 1)]
    if not re.match(r"^[-0-9.eE,nan ]+$", lines[0].strip()):
        lines = lines[1:]
    lines = lines[:n_rows]
    X = np.array([[float(v) if v else np.nan for v in ln.strip().split(",")] for ln in lines])
    forest = api.open(pac)
    want = forest.predict(X)
    rates = {"python per-row loop": []}
    for label, _ in bins:
        rates[f"pacset --input - ({label})"] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        got = [forest.predict(X[i:i + 1]) for i in range(len(X))]
        rates["python per-row loop"].append(len(X) / (time.perf_counter() - t0))
        assert np.array_equal(np.concatenate(got), want)
        for label, d in bins:
            s = Stream([os.path.join(d, "pacset"), "predict", pac, "--input", "-"])
            s.ask(lines[0])  # opened and warm: the loop is what is measured
            t0 = time.perf_counter()
            answers = [s.ask(ln) for ln in lines]
            rates[f"pacset --input - ({label})"].append(len(lines) / (time.perf_counter() - t0))
            s.close()
            got = np.array([[float(v) for v in a.split(",")] for a in answers], dtype=want.dtype)
            assert np.array_equal(got, want.reshape(len(X), -1)), "answers differ"
    base = sorted(rates["python per-row loop"])[rounds // 2]
    print(f"\nstream: {len(lines)} rows one at a time, warm; {rounds} rounds, median [min-max]")
    for name, xs in rates.items():
        print(f"{name:36} {spread(xs, 1, '{:.0f}'):>22} rows/s  "
              f"{sorted(xs)[rounds // 2] / base:.2f}x python")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True,
                    help="a directory with pacset and pacsetfs (repeatable)")
    ap.add_argument("--mode", default="version,cold,mount,stream")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pac", help="a packed forest (default: --model packed at 4 KiB)")
    ap.add_argument("--model", default="/work/models/rf682/rf.joblib")
    ap.add_argument("--rows", default="/work/models/rf682/test.csv")
    ap.add_argument("--work", default="/tmp/process-start-bench")
    ap.add_argument("--stream-rows", type=int, default=2000)
    ap.add_argument("--python-path", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    a = ap.parse_args()
    bins = [(f"bin{i}:{d}", os.path.abspath(d)) for i, d in enumerate(a.bin)]
    os.makedirs(a.work, exist_ok=True)
    modes = a.mode.split(",")
    pac = a.pac
    if pac is None and any(m in modes for m in ("cold", "mount", "stream")):
        pac = packed(os.path.join(bins[0][1], "pacset"), a.model, a.work, "4KiB")
    if "version" in modes:
        mode_version(bins, a.rounds, 20)
    write_one_row(a.rows, os.path.join(a.work, "one-row.csv"))
    if "cold" in modes:
        mode_cold(bins, pac, a.rows, a.rounds, a.work)
    if "mount" in modes:
        mode_mount(bins, pac, a.rows, a.rounds, a.work)
    if "stream" in modes:  # the last --bin: a build that streams
        mode_stream(bins[-1:], pac, a.rows, a.rounds, a.stream_rows, a.python_path)


if __name__ == "__main__":
    main()
