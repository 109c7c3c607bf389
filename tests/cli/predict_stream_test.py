#!/usr/bin/python3
"""`pacset predict MODEL --input -` streams for every MODEL: a .pac file, a
model file (packed in memory) and a forest in a store (dir:), end to end
with the real CLI driven through pipes.

- Each row is answered before the next line is written: the test writes a
  line, then waits (select, with a timeout, so a regression fails instead of
  hanging) for its answer while standard input stays open. A program that
  reads all of standard input first never answers and fails here.
- The answers equal those of the same rows given as a file.
- A header line and blank lines get no answer; a bad row gets a line
  "error: ..." and the stream goes on; the exit status is then 1, with the
  count of failed rows on stderr.

usage: predict_stream_test.py --pacset PATH
"""
import argparse
import os
import select
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "lightgbm")
MODEL = os.path.join(DATA, "binary.txt")  # LightGBM, 2 features
ROWS = ["0.5,1.5", "-1,2", "3,", "0,0", "2.5,-0.5"]  # the third has a missing value
ANSWER_SECONDS = 30  # generous: the only timing is a hang turned into a failure


class Stream:
    """A `pacset predict ... --input -` process, one line at a time."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def answer(self):
        """The next output line; fails if none comes within ANSWER_SECONDS."""
        ready, _, _ = select.select([self.p.stdout], [], [], ANSWER_SECONDS)
        assert ready, f"no answer within {ANSWER_SECONDS} s while the next line is not written"
        return self.p.stdout.readline().rstrip("\n")

    def finish(self):
        try:  # closes standard input: the end of the stream
            rest, err = self.p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("the stream did not end after standard input was closed")
        return self.p.returncode, rest, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def run(argv, stdin=None):
    r = subprocess.run(argv, capture_output=True, text=True, input=stdin, timeout=120)
    assert r.returncode == 0, f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}"
    return r.stdout


def check_stream(name, argv, want):
    s = Stream(argv + ["--input", "-"])
    try:
        s.send("x,y")  # a header: no answer
        for i, line in enumerate(ROWS[:3]):
            s.send(line)
            got = s.answer()
            assert got == want[i], f"{name}: row {i} answered {got!r}, the file gives {want[i]!r}"
        s.send("1,zz")
        got = s.answer()
        assert got.startswith("error: ") and "<stdin> line 5" in got, f"{name}: {got!r}"
        s.send("1,2,3")
        got = s.answer()
        assert got.startswith("error: ") and "expected 2 columns, found 3" in got, f"{name}: {got!r}"
        s.send("")  # blank: no answer
        for i, line in enumerate(ROWS[3:], start=3):
            s.send(line)
            got = s.answer()
            assert got == want[i], f"{name}: row {i} answered {got!r}, the file gives {want[i]!r}"
        rc, rest, err = s.finish()
    finally:
        s.kill()
    assert rest == "", f"{name}: output after the last row: {rest!r}"
    assert rc == 1 and "2 of 7 rows could not be answered" in err, f"{name}: {rc} {err!r}"
    print(f"ok: {name}: {len(ROWS)} rows and 2 errors answered line by line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    args = ap.parse_args()
    pacset = args.pacset
    with tempfile.TemporaryDirectory(prefix="predict-stream-") as work:
        pac = os.path.join(work, "m.pac")
        rows = os.path.join(work, "rows.csv")
        with open(rows, "w") as f:
            f.write("\n".join(ROWS) + "\n")
        run([pacset, "pack", MODEL, "-o", pac, "--block-size", "4096"])
        store = "dir:" + os.path.join(work, "store")
        run([pacset, "import", pac, "--name", "m", "--store", store])
        want = run([pacset, "predict", pac, "--input", rows]).splitlines()
        assert len(want) == len(ROWS), want
        cases = [
            (".pac file", [pacset, "predict", pac]),
            ("model file", [pacset, "predict", MODEL]),
            ("dir store", [pacset, "predict", "m", "--store", store]),
            (".pac file --leaf", [pacset, "predict", pac, "--leaf"]),
        ]
        failed = 0
        for name, argv in cases:
            w = want
            if name.endswith("--leaf"):
                w = run(argv + ["--input", rows]).splitlines()
            try:
                check_stream(name, argv, w)
            except AssertionError as e:
                failed += 1
                print(f"FAIL: {e}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
