#!/usr/bin/python3
"""Bounded input for `pacset` (issue 31 item 7), end to end with the real CLI.

- CSV input with no newline (/dev/zero, a line on standard input that never
  ends) is an error naming the source, the line and the limit (util/csv.h:
  1 MiB + 64 bytes per column), in a bounded amount of memory, for every
  reader of CSV input: predict with a .pac, with a model file and with
  --store (the line-by-line stream, which answers the line with an error and
  goes on), pack --calibrate, layout-report --input. Before, `predict m.pac
  --input /dev/zero` grew past 2 GB in 4 s and a stream's endless line grew
  with it.
- A field over 4 KiB is an error naming line, column and limit.
- A model path that is not a regular file (a FIFO, a directory, a device) is
  refused at once by predict, info, pack, layout-report and import; a FIFO
  used to block the open forever.

Peak memory is the child's own (os.wait4's rusage), with a generous bound;
the only timing is a timeout that turns a hang into a failure. A watchdog
kills a child whose RSS passes 1 GB, so that a regression fails the test
instead of filling the machine's memory.

usage: bounded_input_test.py --pacset PATH
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "lightgbm")
MODEL = os.path.join(DATA, "binary.txt")  # LightGBM, 2 features
LINE_LIMIT = (1 << 20) + 64 * 2  # util/csv.h CsvMaxLineBytes(2)
MAX_RSS_MB = 200  # bounded: a few MB of rows and buffers, far from the 256 MiB fed
HANG_SECONDS = 60  # a call still running then has blocked or is reading without end
GUARD_MB = 1024  # the watchdog kills a child this large
ENDLESS = 256 << 20  # bytes of one line fed on standard input

failures = []


def expect(ok, message):
    if not ok:
        failures.append(message)
        print("FAIL:", message)


class Result:
    def __init__(self, returncode, stdout, stderr, max_rss_mb, timed_out):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.max_rss_mb, self.timed_out = max_rss_mb, timed_out


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0


def run(cmd, stdin_chunks=None):
    """Runs cmd; stdin_chunks (an iterable of bytes) is written to its standard
    input from a thread (a child that exits early just ends the writing).
    Returns its exit status, output and its own peak RSS (os.wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin_chunks is not None else
                             subprocess.DEVNULL, stdout=out, stderr=err)
        timed_out = []
        exited = threading.Event()

        def watchdog():  # a hang or a runaway child fails the test, not the machine
            deadline = time.monotonic() + HANG_SECONDS
            while not exited.wait(0.05):
                hung = time.monotonic() > deadline
                if hung or rss_mb(p.pid) > GUARD_MB:
                    timed_out.append(hung)
                    p.kill()
                    return

        guard = threading.Thread(target=watchdog)
        guard.start()
        feeder = None
        if stdin_chunks is not None:
            def feed():
                try:
                    for chunk in stdin_chunks:
                        p.stdin.write(chunk)
                    p.stdin.close()
                except (BrokenPipeError, ValueError):
                    pass
            feeder = threading.Thread(target=feed)
            feeder.start()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        exited.set()
        guard.join()
        if feeder:
            feeder.join()
        out.seek(0)
        err.seek(0)
        return Result(p.returncode, out.read().decode(errors="replace"),
                      err.read().decode(errors="replace"), usage.ru_maxrss / 1024, any(timed_out))


def endless_line(total, then=b""):
    """`total` bytes of '1' with no newline, then `then`."""
    chunk = b"1" * (1 << 20)
    for _ in range(total // len(chunk)):
        yield chunk
    yield then


def limit_message(source, line=1):
    return (f"{source} line {line}: longer than {LINE_LIMIT} bytes, the limit for a line of "
            f"2 columns (1 MiB + 64 bytes per column)")


def expect_refused_in_bounded_memory(name, r, message):
    expect(not r.timed_out, f"{name}: still running after {HANG_SECONDS} s")
    expect(r.returncode == 1, f"{name}: exit {r.returncode}, stderr {r.stderr[:300]!r}")
    expect(message in r.stderr, f"{name}: stderr {r.stderr[:300]!r} does not say {message!r}")
    expect(r.max_rss_mb < MAX_RSS_MB, f"{name}: peak RSS {r.max_rss_mb:.0f} MB "
                                      f"(bound {MAX_RSS_MB} MB)")
    print(f"{name}: exit {r.returncode}, peak RSS {r.max_rss_mb:.1f} MB")


def csv_without_newlines(pacset, work):
    pac = os.path.join(work, "m.pac")
    r = run([pacset, "pack", MODEL, "-o", pac, "--block-size", "4KiB"])
    expect(r.returncode == 0, f"pack: {r.stderr}")
    store = "dir:" + os.path.join(work, "store")
    r = run([pacset, "import", pac, "--name", "m", "--store", store])
    expect(r.returncode == 0, f"import: {r.stderr}")
    rows = os.path.join(work, "rows.csv")
    with open(rows, "w") as f:
        f.write("1,2\n3,4\n")

    for model in (pac, MODEL):
        kind = "pac" if model == pac else "model file"
        expect_refused_in_bounded_memory(
            f"predict {kind} --input /dev/zero",
            run([pacset, "predict", model, "--input", "/dev/zero"]), limit_message("/dev/zero"))
        expect_refused_in_bounded_memory(
            f"predict {kind} --input - (an endless line)",
            run([pacset, "predict", model, "--input", "-"], endless_line(ENDLESS)),
            limit_message("<stdin>"))
    expect_refused_in_bounded_memory(
        "predict --store --input /dev/zero",
        run([pacset, "predict", "--store", store, "m", "--input", "/dev/zero"]),
        limit_message("/dev/zero"))
    expect_refused_in_bounded_memory(
        "pack --calibrate /dev/zero",
        run([pacset, "pack", MODEL, "-o", os.path.join(work, "c.pac"), "--calibrate",
             "/dev/zero"]), limit_message("/dev/zero"))
    expect_refused_in_bounded_memory(
        "layout-report --input /dev/zero",
        run([pacset, "layout-report", MODEL, "--input", "/dev/zero"]),
        limit_message("/dev/zero"))
    expect_refused_in_bounded_memory(
        "layout-report --calibrate /dev/zero",
        run([pacset, "layout-report", MODEL, "--input", rows, "--calibrate", "/dev/zero"]),
        limit_message("/dev/zero"))

    # The stream answers the endless line with an error as soon as it is past
    # the limit, drops the rest of it, and answers the next line.
    name = "predict --store --input - (an endless line, then a row)"
    r = run([pacset, "predict", "--store", store, "m", "--input", "-"],
            endless_line(ENDLESS, b"\n1,2\n"))
    expect_refused_in_bounded_memory(name, r, limit_message("<stdin>"))
    lines = r.stdout.splitlines()
    expect(len(lines) == 2 and lines[0] == "error: Invalid argument: " + limit_message("<stdin>"),
           f"{name}: stdout {r.stdout[:300]!r}")
    ok = run([pacset, "predict", pac, "--input", rows])
    expect(len(lines) == 2 and lines[1] == ok.stdout.splitlines()[0],
           f"{name}: the row after the endless line got {lines[1:]!r}, "
           f"predict gives {ok.stdout!r}")


def long_field(pacset, work):
    rows = os.path.join(work, "long-field.csv")
    with open(rows, "w") as f:
        f.write("1,2\n3," + " " * 5000 + "4\n")
    r = run([pacset, "predict", MODEL, "--input", rows])
    message = f"{rows} line 2 column 2: longer than 4096 bytes, the limit for a field"
    expect(r.returncode == 1 and message in r.stderr,
           f"a 5 KB field: exit {r.returncode}, stderr {r.stderr[:300]!r}")


def non_regular_model_paths(pacset, work):
    rows = os.path.join(work, "rows.csv")
    fifo = os.path.join(work, "model.pac")
    os.mkfifo(fifo)  # nobody ever writes to it
    cases = [(fifo, f"{fifo} is a FIFO, not a regular file"),
             (work, f"{work} is a directory, not a regular file"),
             ("/dev/zero", "/dev/zero is a character device, not a regular file")]
    for path, message in cases:
        for cmd in (["predict", path, "--input", rows], ["info", path],
                    ["info", path, "--format", "lightgbm"],
                    ["pack", path, "-o", os.path.join(work, "x.pac")],
                    ["layout-report", path, "--input", rows],
                    ["import", path, "--name", "x", "--store", "dir:" + os.path.join(work, "s2")]):
            r = run([pacset, *cmd])
            name = "pacset " + " ".join(cmd[:2])
            expect(not r.timed_out, f"{name}: still running after {HANG_SECONDS} s")
            expect(r.returncode == 1 and message in r.stderr,
                   f"{name}: exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}")
    print(f"non-regular model paths: {len(cases)} kinds refused by predict, info, pack, "
          f"layout-report, import")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pacset-bounded-input-test-") as work:
        csv_without_newlines(args.pacset, work)
        long_field(args.pacset, work)
        non_regular_model_paths(args.pacset, work)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("bounded_input_test: all checks passed")


if __name__ == "__main__":
    main()
