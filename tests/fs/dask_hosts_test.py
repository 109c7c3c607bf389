#!/usr/bin/python3
"""Dask across hosts, on real mounts: two hosts (network namespaces joined
by a veth pair, fslib.TwoHosts) share one redis store; each host mounts it
with pacsetfs at the same path in its own mount namespace and runs one Dask
worker inside that mount namespace; the scheduler runs on host a, the client
too (dask_hosts_client.py). pacset.dask.predict(path, X) over 100,000 rows
is exact against XGBoost, and each host's block-access trace holds only the
blocks its own rows need (pacset-trace compare: the analytical blocks of
those rows, PacEngine::TouchedBlocks), plus metadata.

Every test runs in its own temp dir with a time limit; processes,
namespaces, mounts and servers are removed whatever happens.

Usage: dask_hosts_test.py --pacset PATH --pacsetfs PATH --pacset-trace PATH
       [-k NAME]   (PYTHONPATH must reach the built package: build/python)
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
import fslib  # noqa: E402
from fslib import Env, Mount, Redis, TwoHosts, die_with_parent, run  # noqa: E402

ARGS = None
DATA = {}
ROWS = 100_000
CHUNK = 10_000
FEATURES = 16
PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))


def pacset(*args, check=True):
    return run([ARGS.pacset, *map(str, args)], check=check)


def ptrace(*args, check=True):
    return run([ARGS.pacset_trace, *map(str, args)], check=check)


def split_thresholds(model_json):
    """{feature: float32 thresholds} of an XGBoost JSON model (its floats
    round-trip float32 exactly)."""
    import numpy as np
    with open(model_json) as f:
        trees = json.load(f)["learner"]["gradient_booster"]["model"]["trees"]
    out = {}
    for t in trees:
        for left, feat, cond in zip(t["left_children"], t["split_indices"], t["split_conditions"]):
            if left != -1:
                out.setdefault(feat, []).append(cond)
    return {f: np.unique(np.array(v, dtype=np.float32)) for f, v in out.items()}


def adversarial_rows(rng, thresholds):
    """ROWS rows; the first half has feature 0 below zero, the second at or
    above it (so the two halves take different paths in most trees). About
    a tenth of the other cells are split thresholds or their float32
    neighbours, and some are NaN, +-0 or +-inf."""
    import numpy as np
    X = rng.uniform(-1, 1, size=(ROWS, FEATURES)).astype(np.float32)
    half = ROWS // 2
    X[:half, 0] = -np.abs(X[:half, 0]) - np.float32(1e-6)
    X[half:, 0] = np.abs(X[half:, 0])
    for f, thr in thresholds.items():
        if f == 0:
            continue
        near = np.concatenate([thr, np.nextafter(thr, np.float32(-np.inf)),
                               np.nextafter(thr, np.float32(np.inf))])
        hit = rng.random(ROWS) < 0.1
        X[hit, f] = rng.choice(near, size=hit.sum())
    specials = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf], dtype=np.float32)
    cells = rng.random((ROWS, FEATURES)) < 0.03
    cells[:, 0] = False
    X[cells] = rng.choice(specials, size=cells.sum())
    # Feature 0 at its own thresholds, each half keeping its sign.
    thr0 = thresholds.get(0, np.array([], dtype=np.float32))
    for lo, hi, keep in ((0, half, thr0 < 0), (half, ROWS, thr0 >= 0)):
        if keep.any():
            hit = np.flatnonzero(rng.random(hi - lo) < 0.1) + lo
            X[hit, 0] = rng.choice(thr0[keep], size=len(hit))
    return X


def write_rows_csv(path, X):
    """Each float32 exactly (the shortest decimal of its double value)."""
    with open(path, "w") as f:
        for row in X.tolist():
            f.write(",".join(map(repr, row)) + "\n")


def prepare(workdir):
    """An XGBoost random forest (16 trees of depth 16, trained with missing
    values; 532 blocks of 4 KiB packed) whose trees all split on feature 0
    first: the target jumps there and depends on other features on each
    side, so the two halves of the rows need different subtrees. And the
    rows."""
    import numpy as np
    import xgboost as xgb
    TwoHosts.remove_leftovers()
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(12_000, FEATURES)).astype(np.float32)
    y = (2.0 * (X[:, 0] >= 0)
         + np.where(X[:, 0] < 0, np.sin(4 * X[:, 1]) * np.cos(3 * X[:, 2]) + X[:, 5],
                    np.cos(4 * X[:, 3]) * X[:, 4] - X[:, 6])
         + 0.05 * rng.normal(size=len(X)))
    missing = rng.random(X.shape) < 0.03
    missing[:, 0] = False
    X[missing] = np.nan
    booster = xgb.train({"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 16,
                         "num_parallel_tree": 16, "subsample": 0.7, "eta": 1.0,
                         "min_child_weight": 0, "lambda": 0, "max_bin": 1024, "nthread": 1,
                         "seed": 0}, xgb.DMatrix(X, label=y), 1)
    DATA["json"] = os.path.join(workdir, "model.json")
    booster.save_model(DATA["json"])
    DATA["pac"] = os.path.join(workdir, "model.pac")
    pacset("pack", DATA["json"], "-o", DATA["pac"], "--block-size", "4KiB")
    rows = adversarial_rows(rng, split_thresholds(DATA["json"]))
    DATA["npy"] = os.path.join(workdir, "rows.npy")
    np.save(DATA["npy"], rows)
    DATA["csv"] = os.path.join(workdir, "rows.csv")
    write_rows_csv(DATA["csv"], rows)
    DATA["want"] = booster.inplace_predict(rows)


class DaskOnHosts:
    """A Dask scheduler on host `scheduler_host` and one single-threaded
    worker (no nanny) per mount, inside that mount's network and mount
    namespaces (nsenter into its daemon), so that the worker sees the mount
    at its path. Ports are fixed: the namespaces are the test's own. Every
    process dies with the test; close() stops them all."""

    PORT = 8786

    def __init__(self, tmp, hosts, mounts, scheduler_host="a"):
        self.tmp, self.procs, self.workers = tmp, [], {}
        self.env = dict(os.environ, DASK_TEMPORARY_DIRECTORY=tmp,
                        DASK_CONFIG=os.path.join(tmp, "dask-config"), PYTHONDONTWRITEBYTECODE="1")
        ip = TwoHosts.ADDRESS[scheduler_host]
        self.address = f"tcp://{ip}:{self.PORT}"
        try:
            self._start("scheduler", ["ip", "netns", "exec", hosts.ns[scheduler_host], PYTHON,
                                      "-m", "distributed.cli.dask_scheduler", "--host", ip,
                                      "--port", str(self.PORT), "--no-dashboard"],
                        ready="Scheduler at:")
            for h, m in mounts.items():
                self.workers[h] = self._start(
                    f"worker-{h}",
                    ["nsenter", "-t", str(m.proc.pid), "-m", "-n", PYTHON, "-m",
                     "distributed.cli.dask_worker", self.address, "--host", TwoHosts.ADDRESS[h],
                     "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", f"host-{h}",
                     "--local-directory", os.path.join(tmp, f"dask-{h}"),
                     "--death-timeout", "60"],
                    ready="Registered to:")
        except BaseException:
            self.close()
            raise

    def _start(self, label, cmd, ready):
        log = os.path.join(self.tmp, label + ".log")
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.tmp, preexec_fn=die_with_parent)
        self.procs.append(proc)
        deadline = time.time() + 60
        while True:
            with open(log, errors="replace") as f:
                text = f.read()
            if ready in text:
                return proc
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"dask {label} did not start: {text[-2000:]}")
            time.sleep(0.1)

    def close(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def mark(marks, begin, pid, first_row, rows):
    """One request of process `pid` over input rows [first_row, first_row + rows)."""
    ptrace("mark", "begin" if begin else "end", 1, "--marks", marks, "--pid", pid,
           "--first-row", first_row, "--rows", rows)


def compare(trace, marks, out):
    ptrace("merge", trace, marks, "-o", out)
    return json.loads(ptrace("compare", out, "--model", DATA["pac"], "-i", DATA["csv"],
                             "--json").stdout)


def blocks_read(trace):
    """The distinct blocks of the forest a trace shows read (fslib's own
    reader, independent of pacset-trace)."""
    names, events = fslib.read_trace(trace)
    return {e["block"] for e in events if e["type"] == "access" and names.get(e["forest"]) == "model"}


# ---------------------------------------------------------------- tests ----

def test_dask_workers_on_two_hosts_predict_exactly_and_read_only_their_rows_blocks(env):
    """The client sends the first 50,000 rows to host a's worker and the rest
    to host b's (worker restrictions, checked on the task stream). The
    100,000 predictions equal XGBoost's bit for bit. Each host's trace,
    taken as one request of its worker process over its rows, reads exactly
    the blocks those rows need (none missing, none extra but metadata); the
    same trace taken over the other host's rows has blocks those rows do not
    need and misses blocks they do, and the two hosts' sets of blocks differ."""
    import numpy as np
    hosts = env.add(TwoHosts())
    redis = env.add(Redis(env.tmp, netns=hosts.ns["a"], host=TwoHosts.ADDRESS["a"], port=6379))
    redis.start()
    hosts.run("a", [ARGS.pacset, "import", DATA["pac"], "--name", "model", "--store", redis.uri])
    mp = os.path.join(env.tmp, "models")  # the same path on both hosts
    path = os.path.join(mp, "model.pac")
    traces = {h: os.path.join(env.tmp, f"{h}.trace") for h in "ab"}
    mounts = {h: Mount(ARGS.pacsetfs, redis.uri, mp, trace=traces[h], netns=hosts.ns[h],
                       log=os.path.join(env.tmp, f"mount-{h}.log")) for h in "ab"}
    half = ROWS // 2
    rows_of = {"a": (0, half), "b": (half, half)}
    marks = {(h, whose): os.path.join(env.tmp, f"{h}-{whose}.marks") for h in "ab" for whose in "ab"}
    out = os.path.join(env.tmp, "out")
    os.makedirs(out)
    with mounts["a"], mounts["b"], DaskOnHosts(env.tmp, hosts, mounts) as dask:
        t = time.time()
        for begin in (True, False):
            if not begin:
                run(["ip", "netns", "exec", hosts.ns["a"], PYTHON,
                     os.path.join(HERE, "dask_hosts_client.py"), "--scheduler", dask.address,
                     "--model", path, "--rows", DATA["npy"], "--chunk", str(CHUNK),
                     "--hosts", ",".join(TwoHosts.ADDRESS[h] for h in "ab"), "--out", out],
                    env=dask.env, timeout=240)
                took = time.time() - t
            # Each host's worker marked as one request over its own rows and,
            # in a second marks file, over the other host's rows.
            for (h, whose), file in marks.items():
                mark(file, begin, dask.workers[h].pid, *rows_of[whose])
        stats = {h: m.stats()["forests"]["model"] for h, m in mounts.items()}
    got = np.load(os.path.join(out, "predictions.npy"))
    assert got.dtype == DATA["want"].dtype and got.shape == DATA["want"].shape, (got.dtype, got.shape)
    bad = np.flatnonzero(got.view(np.uint32) != DATA["want"].view(np.uint32))
    assert len(bad) == 0, f"{len(bad)} rows differ from XGBoost, first row {bad[0]}: " \
                          f"{got[bad[0]]!r} vs {DATA['want'][bad[0]]!r}"

    with open(os.path.join(out, "placement.json")) as f:
        placement = json.load(f)
    for h, ip in TwoHosts.ADDRESS.items():
        first, count = rows_of[h]
        for chunk in range(first // CHUNK, (first + count) // CHUNK):
            worker = placement["chunks"].get(str(chunk))
            assert worker in placement["workers"][ip], \
                f"chunk {chunk} ran on {worker}, not on host {h} ({placement['workers'][ip]})"

    own, cross, read = {}, {}, {}
    for h in "ab":
        read[h] = blocks_read(traces[h])
        own[h] = compare(traces[h], marks[h, h], traces[h] + ".own")
        other = "b" if h == "a" else "a"
        cross[h] = compare(traces[h], marks[h, other], traces[h] + ".cross")
        c = own[h]
        assert c["checksum_verified"] and c["dropped_events"] == 0, c
        assert c["requests_compared"] == 1, c
        t = c["totals"]
        assert t["rows"] == half and t["analytical"] > 0, t
        # Every block its rows need was read, and nothing else but metadata
        # (kernel readahead is off on a pacsetfs mount and the engine maps
        # with MADV_RANDOM, so "readahead-like" extras are unneeded reads too).
        assert t["matched"] == t["analytical"] and t["unexplained_missing"] == 0, (h, t)
        assert t["extra_other"] == 0 and t["extra_readahead"] == 0, (h, t)
        assert t["measured"] == t["matched"] + t["extra_metadata"], (h, t)
        # Nothing else was read on this host.
        assert c["accesses_outside_requests"] == 0, c
        x = cross[h]["totals"]
        # Over the other host's rows the same trace has reads those rows do
        # not need (compare calls the ones near a needed block readahead)
        # and misses blocks they do need.
        assert x["extra_other"] + x["extra_readahead"] > 0 and x["unexplained_missing"] > 0, \
            f"host {h}'s trace fits host {other}'s rows too: {x}"
        assert stats[h]["blocks_fetched"] > 0, stats[h]
    assert read["a"] - read["b"] and read["b"] - read["a"], "the hosts read the same blocks"
    block_count = own["a"]["block_count"]
    print(f"    100,000 rows exact in {took:.1f} s; blocks read of {block_count}: "
          f"a {len(read['a'])}, b {len(read['b'])}, both {len(read['a'] & read['b'])} "
          f"(readahead-like: a {own['a']['totals']['extra_readahead']}, "
          f"b {own['b']['totals']['extra_readahead']}); "
          f"a's trace over b's rows: {cross['a']['totals']['extra_other']} blocks not needed, "
          f"{cross['a']['totals']['unexplained_missing']} needed but not read")


# ---------------------------------------------------------------- runner ---

def main():
    if not os.path.exists("/usr/bin/nsenter"):
        print("FAIL: nsenter (util-linux) is missing")
        return 1
    return fslib.main(sys.modules[__name__], prepare, Env, "dask across hosts",
                      "pacsetfs-dask-hosts-test-", tools=("pacset", "pacsetfs", "pacset-trace"),
                      timeout=300)


if __name__ == "__main__":
    sys.exit(main())
