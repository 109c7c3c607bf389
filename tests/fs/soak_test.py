#!/usr/bin/python3
"""Soak test of a pacsetfs mount, bounded in time: concurrent readers (pread
threads and `pacset predict` processes, which map the file), drops of the
caches, re-imports of the forest under the readers, and store outages (the
redis-server paused), with exactness checked on every read throughout.

Rules checked:
  * every read that succeeds returns exactly the bytes of the generation the
    reader opened (told apart by size: the two forests differ in size);
  * every prediction that succeeds equals the local .pac's prediction of one
    of the two forests;
  * a read or prediction fails only during an outage (or within the fetch
    deadline after it), and only with EIO (exit status 1 for predict);
  * the daemon stays up, serves exactly after the last outage, and never
    reports a corrupt block.

Usage: soak_test.py --pacset PATH --pacsetfs PATH [--seconds 150]
"""
import argparse
import errno
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
import fslib  # noqa: E402
from fslib import Mount, Redis, run  # noqa: E402

STORE_TIMEOUT_MS = 1500


class Soak:
    def __init__(self, args, workdir):
        self.args, self.workdir = args, workdir
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.outages = []  # [start, end or None]
        self.failures = []
        self.counts = {"reads": 0, "read_errors": 0, "predictions": 0, "prediction_errors": 0,
                       "drops": 0, "imports": 0, "failed_imports": 0, "outages": 0}

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def fail(self, what):
        with self.lock:
            self.failures.append(what)
        self.stop.set()

    def in_outage(self, t0, t1):
        """Whether [t0, t1] overlaps an outage, widened by the fetch deadline
        and the daemon's quiet period after it."""
        grace = STORE_TIMEOUT_MS / 1000 + 3
        with self.lock:
            return any(t0 <= (end if end else float("inf")) + grace and t1 >= start
                       for start, end in self.outages)

    # ------------------------------------------------------------ setup ----
    def prepare(self):
        import joblib
        import numpy as np
        import xgboost as xgb
        from sklearn.ensemble import RandomForestClassifier
        import fashion_mnist
        X, y = fashion_mnist.load("train")
        X, y = X[:3000], y[:3000]
        rf = RandomForestClassifier(n_estimators=12, random_state=0, n_jobs=2).fit(X, y)
        joblib.dump(rf, os.path.join(self.workdir, "rf.joblib"))
        booster = xgb.train({"objective": "multi:softprob", "num_class": 10, "max_depth": 6,
                             "nthread": 2, "seed": 0}, xgb.DMatrix(X, label=y), 6)
        booster.save_model(os.path.join(self.workdir, "xgb.json"))
        Xt, _ = fashion_mnist.load("test")
        self.rows = os.path.join(self.workdir, "rows.csv")
        np.savetxt(self.rows, Xt[:60], delimiter=",", fmt="%d")
        self.pac, self.bytes, self.want = {}, {}, {}
        for name, src in (("rf", "rf.joblib"), ("xgb", "xgb.json")):
            self.pac[name] = os.path.join(self.workdir, f"{name}.pac")
            run([self.args.pacset, "pack", os.path.join(self.workdir, src), "-o", self.pac[name],
                 "--block-size", "4KiB"])
            with open(self.pac[name], "rb") as f:
                self.bytes[name] = f.read()
            self.want[name] = run([self.args.pacset, "predict", self.pac[name], "--input",
                                   self.rows]).stdout
        assert len(self.bytes["rf"]) != len(self.bytes["xgb"]), "sizes must tell them apart"
        self.by_size = {len(b): b for b in self.bytes.values()}

    # ---------------------------------------------------------- workers ----
    def byte_reader(self, seed):
        rnd = random.Random(seed)
        path = os.path.join(self.mp, "m.pac")
        while not self.stop.is_set():
            t0 = time.time()
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as e:
                if not (e.errno == errno.EIO and self.in_outage(t0, time.time())):
                    self.fail(f"open failed outside an outage: {e}")
                self.count("read_errors")
                time.sleep(0.05)
                continue
            try:
                want = self.by_size.get(os.fstat(fd).st_size)
                if want is None:
                    self.fail(f"m.pac has size {os.fstat(fd).st_size}, neither forest's")
                    return
                for _ in range(rnd.randint(5, 40)):
                    off = rnd.randrange(len(want))
                    n = rnd.choice((1, 100, 4096, 4097, 3 * 4096 + 7, 65536))
                    t0 = time.time()
                    try:
                        got = os.pread(fd, n, off)
                    except OSError as e:
                        if not (e.errno == errno.EIO and self.in_outage(t0, time.time())):
                            self.fail(f"pread({n}, {off}) failed outside an outage: {e}")
                        self.count("read_errors")
                        continue
                    if got != want[off:off + n]:
                        self.fail(f"pread({n}, {off}) returned wrong bytes: "
                                  + self.describe(got, off, want))
                        return
                    self.count("reads")
            finally:
                os.close(fd)

    def describe(self, got, off, want):
        """What a wrong read is: its length, zeros, or bytes found elsewhere in
        this forest or the other one (a block of another generation)."""
        other = next(b for b in self.bytes.values() if b is not want)
        n = len(got)
        what = [f"{n} bytes (wanted {len(want[off:off + n])})"]
        if n and got == bytes(n):
            what.append("all zeros")
        for label, data in (("this forest", want), ("the other forest", other)):
            at = data.find(got) if n else -1
            if at >= 0:
                what.append(f"found in {label} at {at} (block {at // 4096}+{at % 4096})")
        for label, data in (("this forest", want), ("the other forest", other)):
            head = got[:min(n, 512)]
            at = data.find(head) if head else -1
            if at >= 0 and data.find(got) < 0:
                what.append(f"its first {len(head)} bytes found in {label} at {at}")
        same = sum(1 for a, b in zip(got, want[off:off + n]) if a == b)
        what.append(f"{same} of {n} bytes agree")
        return ", ".join(what)

    def predictor(self):
        path = os.path.join(self.mp, "m.pac")
        while not self.stop.is_set():
            t0 = time.time()
            r = run([self.args.pacset, "predict", path, "--input", self.rows, "--threads", "2"],
                    check=False, timeout=120)
            if r.returncode == 0:
                if r.stdout not in (self.want["rf"], self.want["xgb"]):
                    self.fail("a prediction through the mount differs from both forests'")
                    return
                self.count("predictions")
            elif r.returncode == 1 and self.in_outage(t0, time.time()):
                self.count("prediction_errors")
            else:
                self.fail(f"predict failed ({r.returncode}) outside an outage: {r.stderr[-500:]}")
                return

    def dropper(self):
        rnd = random.Random(7)
        ctl = os.path.join(self.mp, ".pacsetfs", "control")
        while not self.stop.wait(0.3):
            fd = os.open(ctl, os.O_WRONLY)
            try:
                os.write(fd, f"drop {rnd.choice(('m', 'other', '*'))}\n".encode())
                self.count("drops")
            except OSError as e:
                self.fail(f"drop failed: {e}")
            finally:
                os.close(fd)

    def importer(self):
        names = ["xgb", "rf"]
        i = 0
        while not self.stop.wait(2.0):
            t0 = time.time()
            r = run([self.args.pacset, "import", self.pac[names[i % 2]], "--name", "m", "--store",
                     self.redis.uri], check=False, timeout=60)
            if r.returncode == 0:
                self.count("imports")
                i += 1
            elif self.in_outage(t0, time.time()):
                self.count("failed_imports")
            else:
                self.fail(f"import failed outside an outage: {r.stderr[-500:]}")

    def outage_maker(self, seconds):
        for at in (seconds / 3, 2 * seconds / 3):
            if self.stop.wait(max(0, self.start + at - time.time())):
                return
            with self.lock:
                self.outages.append([time.time(), None])
            self.redis.pause()
            self.stop.wait(3.0)
            self.redis.resume()
            with self.lock:
                self.outages[-1][1] = time.time()
            self.count("outages")

    # -------------------------------------------------------------- run ----
    def run(self, seconds):
        self.prepare()
        self.redis = Redis(self.workdir).start()
        try:
            for name, pac in (("m", self.pac["rf"]), ("other", self.pac["xgb"])):
                run([self.args.pacset, "import", pac, "--name", name, "--store", self.redis.uri])
            self.mp = os.path.join(self.workdir, "mnt")
            options = f"store_timeout={STORE_TIMEOUT_MS},catalog_refresh=100,cache_size=1M"
            with Mount(self.args.pacsetfs, self.redis.uri, self.mp, options=options) as m:
                self.start = time.time()
                workers = [threading.Thread(target=self.byte_reader, args=(s,)) for s in range(3)]
                workers += [threading.Thread(target=self.predictor),
                            threading.Thread(target=self.dropper),
                            threading.Thread(target=self.importer),
                            threading.Thread(target=self.outage_maker, args=(seconds,))]
                for w in workers:
                    w.start()
                self.stop.wait(seconds)
                self.stop.set()
                for w in workers:
                    w.join(timeout=180)
                    if w.is_alive():
                        fslib.abort_fuse_connection(self.mp)
                        self.fail("a worker hung")
                # Quiet again: the daemon is up and serves exactly.
                assert m.proc.poll() is None, "the daemon died: " + m.read_log()
                with open(os.path.join(self.mp, "m.pac"), "rb") as f:
                    assert f.read() in self.bytes.values(), "m.pac differs after the soak"
                stats = m.stats()["forests"]
                assert all(s["corrupt_blocks"] == 0 for s in stats.values()), stats
        finally:
            self.redis.stop()
        print("soak:", ", ".join(f"{v} {k}" for k, v in self.counts.items()))
        for f in self.failures:
            print("FAIL", f)
        assert self.counts["reads"] > 0 and self.counts["predictions"] > 0
        assert self.counts["imports"] > 0 and self.counts["drops"] > 0
        return not self.failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--pacsetfs", required=True)
    ap.add_argument("--seconds", type=float, default=150)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("FAIL: the soak test needs root and /dev/fuse")
        return 1
    with tempfile.TemporaryDirectory(prefix="pacsetfs-soak-") as workdir:
        try:
            ok = Soak(args, workdir).run(args.seconds)
        finally:
            for m in fslib.mounts():
                if m[1].startswith(workdir):
                    fslib.abort_fuse_connection(m[1])
                    subprocess.run(["umount", "-l", m[1]])
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
