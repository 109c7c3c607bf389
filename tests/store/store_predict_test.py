#!/usr/bin/python3
"""`pacset predict --store URI NAME` end to end: a real redis-server on
loopback, a real directory store and a real RocksDB store, the real CLI.

  * round trips per row are bounded: one pipelined MultiGet per round of the
    traversal, and redis's own INFO commandstats counts each block read once;
  * --input - answers each line before the next one is written;
  * a redis-server that stops answering or dies mid-stream gives an error
    line within the store timeout, and the stream recovers when it is back;
  * a corrupt block in redis or in a dir store is an error naming the block;
  * unreachable stores, missing forests, bad names and options that make no
    sense with --store are clear errors;
  * file and stream input, every store and the local .pac give identical
    answers (exactness against the libraries: tests/exact/store_exact_test.py).

Usage: store_predict_test.py --pacset PATH [-k NAME]
"""
import argparse
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import xgboost as xgb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
from fslib import Redis, free_port  # noqa: E402

ARGS = None


def pacset(*args, check=True, stdin=None):
    r = subprocess.run([ARGS.pacset, *map(str, args)], capture_output=True, text=True,
                       input=stdin, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"pacset {' '.join(map(str, args))} failed ({r.returncode}): "
                             f"{r.stderr.strip()}")
    return r


def resp(port, *args):
    """One command to redis over RESP; the reply (bytes, int, list or None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        f = s.makefile("rb")

        def read():
            line = f.readline()[:-2]
            kind, rest = line[:1], line[1:]
            if kind == b"+":
                return rest
            if kind == b"-":
                raise AssertionError(f"redis error: {rest.decode()}")
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2]
            if kind == b"*":
                return [read() for _ in range(int(rest))]
            raise AssertionError(f"bad reply {line!r}")
        return read()


def command_calls(port):
    """{command: calls} from INFO commandstats."""
    text = resp(port, "INFO", "commandstats").decode()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"cmdstat_([a-z|]+):calls=(\d+)", text)}


class Env:
    def __init__(self, tmp):
        self.tmp = tmp
        self.redis = Redis(tmp, persist=False).start()
        self.stores = {"redis": self.redis.uri,
                       "dir": "dir:" + os.path.join(tmp, "dirstore"),
                       "rocksdb": "rocksdb:" + os.path.join(tmp, "rocks")}
        rng = np.random.default_rng(5)
        X = rng.normal(size=(800, 8))
        y = (np.digitize(X[:, 0] + 0.3 * X[:, 1], [-1, 0, 1])).astype(int)
        self.booster = xgb.train({"objective": "multi:softprob", "num_class": 4, "max_depth": 8,
                                  "seed": 1, "nthread": 1}, xgb.DMatrix(X, label=y), 25)
        self.model = os.path.join(tmp, "model.json")
        self.booster.save_model(self.model)
        self.X = rng.normal(size=(40, 8))
        self.X[3, 2] = np.nan
        self.rows = os.path.join(tmp, "rows.csv")
        self.lines = [",".join("" if np.isnan(v) else repr(float(v)) for v in r) for r in self.X]
        with open(self.rows, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        self.one = os.path.join(tmp, "one.csv")
        with open(self.one, "w") as f:
            f.write(self.lines[0] + "\n")
        self.want = self.booster.predict(xgb.DMatrix(self.X))
        self.pacs = {}
        for bs in ("256", "4KiB"):
            pac = os.path.join(tmp, f"model-{bs}.pac")
            pacset("pack", self.model, "-o", pac, "--block-size", bs)
            self.pacs[bs] = pac
        self.info = json.loads(pacset("info", self.pacs["256"], "--json").stdout)

    def import_all(self, name="model", bs="256", stores=None):
        for kind in stores or self.stores:
            pacset("import", self.pacs[bs], "--name", name, "--store", self.stores[kind])

    def close(self):
        self.redis.stop()


def as_bits(line):
    return np.array([float(v) for v in line.split(",")], dtype=np.float32).view(np.uint32)


def expect_row(line, want):
    assert not line.startswith("error"), line
    assert np.array_equal(as_bits(line), np.asarray(want, dtype=np.float32).view(np.uint32)), \
        (line, want)


class Stream:
    """`pacset predict --store ... --input -` with pipes, line by line."""

    def __init__(self, *args):
        self.p = subprocess.Popen([ARGS.pacset, "predict", *map(str, args), "--input", "-"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def answer(self, timeout):
        """The next output line, or None if none comes within `timeout` s."""
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not ready:
            return None
        return self.p.stdout.readline().rstrip("\n")

    def finish(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        err = self.p.stderr.read()
        return self.p.wait(timeout=60), rest, err


# ---------------------------------------------------------------- tests ----

def test_redis_reads_each_block_once_in_one_pipeline_per_round(env):
    env.import_all(stores=["redis"])
    port = env.redis.port
    bound = 2 + env.info["max_depth"] + 2  # metadata reads + a walk's longest chain of blocks
    for rows, label in ((env.one, "one row"), (env.rows, "40 rows")):
        resp(port, "CONFIG", "RESETSTAT")
        r = pacset("predict", "model", "--store", env.redis.uri, "--input", rows, "--timing")
        calls = command_calls(port)
        m = re.search(r"read (\d+) blocks .* in (\d+) rounds, (\d+) MultiGets", r.stderr)
        assert m, r.stderr
        blocks, rounds, multigets = map(int, m.groups())
        # Redis counts every block read once (a MultiGet is one pipeline of
        # GETs: one round trip), and MultiGets are bounded by the depth.
        assert calls.get("get", 0) == blocks, (calls, r.stderr)
        assert multigets <= bound, f"{label}: {multigets} MultiGets, depth {env.info['max_depth']}"
        assert blocks >= 4 * multigets, f"{label}: only {blocks} blocks in {multigets} round trips"
        others = sum(v for k, v in calls.items() if k != "get")
        assert others <= 12, f"{label}: {calls}"  # ping, lookup, pin, unpin: not per block
        print(f"    {label}: {blocks} blocks (GETs) in {multigets} pipelines ({rounds} rounds), "
              f"{others} other commands: {calls}")


def test_stream_answers_each_line_before_the_next_is_written(env):
    env.import_all(stores=["redis"])
    s = Stream("model", "--store", env.redis.uri)
    try:
        s.send(",".join(f"f{i}" for i in range(8)))  # a header: no answer
        for i in range(3):
            s.send(env.lines[i])
            line = s.answer(30)
            assert line is not None, f"no answer to line {i} while the next is not written"
            expect_row(line, env.want[i])
        s.send("1,2,x,4,5,6,7,8")
        line = s.answer(30)
        assert line.startswith("error: ") and "<stdin> line 5 column 3" in line, line
        s.send("1,2,3")
        line = s.answer(30)
        assert line.startswith("error: ") and "expected 8 columns, found 3" in line, line
        s.send("")  # a blank line: no answer
        s.send(env.lines[3])  # has a missing value
        expect_row(s.answer(30), env.want[3])
    finally:
        rc, rest, err = s.finish()
    assert rest == "", rest
    assert rc == 1 and "2 of 6 rows could not be answered" in err, (rc, err)


def test_a_redis_that_hangs_or_dies_mid_stream_gives_an_error_line_within_the_timeout(env):
    env.import_all(stores=["redis"])
    s = Stream("model", "--store", env.redis.uri, "--store-timeout", "1000", "--cache-size", "0")
    try:
        s.send(env.lines[0])
        expect_row(s.answer(30), env.want[0])
        env.redis.pause()
        t0 = time.time()
        s.send(env.lines[1])
        line = s.answer(1 + 10)  # the 1 s timeout, plus slack for a loaded machine
        waited = time.time() - t0
        env.redis.resume()
        assert line is not None, "no answer within the store timeout"
        assert line.startswith("error: ") and "no reply within" in line, line
        print(f"    hung redis: error after {waited:.2f} s (store timeout 1 s)")
        s.send(env.lines[2])  # back: the same process answers again
        expect_row(s.answer(30), env.want[2])
        env.redis.stop()
        t0 = time.time()
        s.send(env.lines[4])
        line = s.answer(1 + 10)
        assert line is not None and line.startswith("error: "), line
        assert "cannot connect" in line or "closed the connection" in line, line
        print(f"    dead redis: error after {time.time() - t0:.2f} s")
    finally:
        s.finish()


def test_a_corrupt_block_in_redis_or_a_dir_store_is_an_error_naming_it(env):
    env.import_all(name="bad", stores=["redis", "dir"])
    block = env.info["metadata_blocks"]  # the first bin block: every row needs it
    # redis: flip a payload byte of the stored block.
    gen = json.loads(pacset("ls", "--store", env.redis.uri, "--json").stdout)
    gen = next(f["generation"] for f in gen if f["name"] == "bad")
    key = f"pacset:blk:bad:{gen}:{block}"
    byte = resp(env.redis.port, "GETRANGE", key, 10, 10)
    resp(env.redis.port, "SETRANGE", key, 10, bytes([byte[0] ^ 0x04]))
    # dir: the same in the generation's file.
    path = os.path.join(env.tmp, "dirstore", "forests", "bad", "1.pac")
    with open(path, "r+b") as f:
        f.seek(block * 256 + 10)
        b = f.read(1)
        f.seek(block * 256 + 10)
        f.write(bytes([b[0] ^ 0x04]))
    for kind in ("redis", "dir"):
        r = pacset("predict", "bad", "--store", env.stores[kind], "--input", env.one, check=False)
        assert r.returncode == 1, (kind, r.returncode, r.stdout)
        assert f"forest 'bad' generation" in r.stderr and f"block {block}: checksum mismatch" \
            in r.stderr, (kind, r.stderr)
        assert r.stdout == "", r.stdout


def test_a_password_in_the_store_uri_is_hidden_from_other_users(env):
    # A serving process runs for long and any local user reads its command
    # line: the password is overwritten once the arguments are parsed.
    secret = "s3cret-" + os.urandom(4).hex()
    redis = Redis(os.path.join(env.tmp, "authed"), persist=False, password=secret).start()
    try:
        uri = f"redis://:{secret}@127.0.0.1:{redis.port}"
        os.environ["REDISCLI_AUTH"] = secret  # the import's own command line stays clean too
        try:
            pacset("import", env.pacs["256"], "--name", "model", "--store",
                   f"redis://127.0.0.1:{redis.port}")
        finally:
            del os.environ["REDISCLI_AUTH"]
        s = Stream("model", "--store", uri)
        try:
            s.send(env.lines[0])
            expect_row(s.answer(30), env.want[0])
            with open(f"/proc/{s.p.pid}/cmdline", "rb") as f:
                cmdline = f.read()
        finally:
            rc, rest, err = s.finish()
        assert rc == 0 and rest == "", (rc, rest, err)
        assert secret.encode() not in cmdline, cmdline
        assert b"redis://:" + b"*" * len(secret) + b"@" in cmdline, cmdline
    finally:
        redis.stop()


def test_unreachable_stores_missing_forests_and_bad_options_are_clear_errors(env):
    env.import_all(stores=["dir"])
    port = free_port()
    t0 = time.time()
    r = pacset("predict", "model", "--store", f"redis://127.0.0.1:{port}", "--input", env.one,
               "--store-timeout", "1000", check=False)
    assert r.returncode == 1 and "cannot connect to redis 127.0.0.1" in r.stderr, r.stderr
    assert time.time() - t0 < 1 + 10
    cases = [
        (["nothing", "--store", env.stores["dir"]], "no forest named 'nothing'"),
        (["a/b", "--store", env.stores["dir"]], "invalid forest name"),
        (["model", "--store", "dir:" + os.path.join(env.tmp, "nowhere")], "no store at"),
        (["model", "--store", "nosuch:x"], "unknown scheme"),
        (["model", "--store", env.stores["dir"], "--no-verify"], "always verified"),
        (["model", "--store", env.stores["dir"], "--cache-size", "lots"], "cache size 'lots'"),
        (["model", "--store", env.stores["dir"], "--mark-requests", "row", "--marks-file", "/x"],
         "not with --store"),
    ]
    for args, expect in cases:
        r = pacset("predict", *args, "--input", env.one, check=False)
        assert r.returncode == 1 and expect in r.stderr, (args, r.returncode, r.stderr)
    r = pacset("predict", "model", "--store", env.stores["dir"], "--input", env.one,
               "--store-timeout", "0", check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)


def test_every_store_file_and_stream_input_and_the_local_pac_agree(env):
    local = pacset("predict", env.pacs["256"], "--input", env.rows).stdout
    for i, line in enumerate(local.splitlines()):
        expect_row(line, env.want[i])
    env.import_all()
    for kind, uri in env.stores.items():
        batch = pacset("predict", "model", "--store", uri, "--input", env.rows).stdout
        assert batch == local, kind
        stream = pacset("predict", "model", "--store", uri, "--input", "-",
                        stdin="\n".join(env.lines) + "\n").stdout
        assert stream == local, kind
        threads = pacset("predict", "model", "--store", uri, "--input", env.rows, "--threads", "3",
                         "--cache-size", "4K").stdout
        assert threads == local, kind
    leaves = pacset("predict", env.pacs["256"], "--input", env.rows, "--leaf").stdout
    assert pacset("predict", "model", "--store", env.stores["redis"], "--input", env.rows,
                  "--leaf").stdout == leaves


def test_isolation_forests_and_categorical_forests_predict_from_every_store_as_the_library(env):
    """The models of issue 32 from a store: IsolationForest's three outputs
    (--method) and an XGBoost categorical forest, as scikit-learn and
    XGBoost give them (scores within 2 ulps: C's pow against numpy's)."""
    import joblib
    from sklearn.ensemble import IsolationForest

    rng = np.random.default_rng(9)
    X = rng.normal(size=(400, 8))
    forest = IsolationForest(n_estimators=20, max_features=0.75, random_state=0).fit(X)
    model = os.path.join(env.tmp, "iforest.joblib")
    joblib.dump(forest, model)
    pac = os.path.join(env.tmp, "iforest.pac")
    pacset("pack", model, "-o", pac, "--block-size", "1KiB")
    rows32 = env.X.astype(np.float32).astype(np.float64)  # sklearn validates X as float32
    finite = os.path.join(env.tmp, "finite.csv")
    with open(finite, "w") as f:
        f.write("\n".join(",".join(repr(float(v)) for v in r) for r in np.nan_to_num(rows32)) + "\n")
    X32 = np.nan_to_num(rows32)
    wants = {"score_samples": forest.score_samples(X32),
             "decision_function": forest.decision_function(X32),
             "predict": forest.predict(X32).astype(np.float64)}
    codes = rng.integers(0, 30, size=(600, 2)).astype(np.float32)
    Xc = np.hstack([codes, rng.normal(size=(600, 2)).astype(np.float32)])
    d = xgb.DMatrix(Xc, label=(codes[:, 0] % 3 == 0).astype(int), feature_types=["c", "c", "q", "q"],
                    enable_categorical=True)
    booster = xgb.train({"objective": "binary:logistic", "tree_method": "hist", "max_depth": 5,
                         "max_cat_to_onehot": 1}, d, 10)
    cat_model = os.path.join(env.tmp, "categorical.json")
    booster.save_model(cat_model)
    cat_pac = os.path.join(env.tmp, "categorical.pac")
    pacset("pack", cat_model, "-o", cat_pac, "--block-size", "1KiB")
    cat_rows = np.vstack([Xc[:30], [[-1, 31, 0, 0], [2.5, 1e9, np.nan, 0], [np.nan, -0.0, 1, 1]]])
    cat_csv = os.path.join(env.tmp, "categorical.csv")
    with open(cat_csv, "w") as f:
        f.write("\n".join(",".join("" if np.isnan(v) else repr(float(v)) for v in r)
                          for r in cat_rows) + "\n")
    cat_want = booster.inplace_predict(cat_rows.astype(np.float32))
    for kind, uri in env.stores.items():
        pacset("import", pac, "--name", "iforest", "--store", uri)
        pacset("import", cat_pac, "--name", "categorical", "--store", uri)
        for method, want in wants.items():
            out = pacset("predict", "iforest", "--store", uri, "--input", finite, "--method",
                         method).stdout.split()
            got = np.array([float(v) for v in out])
            assert got.shape == want.shape, f"{kind} {method}: {len(got)} rows"
            if method == "predict":
                assert np.array_equal(got, want), f"{kind} predict"
            else:
                # Within 2 ulps of the score (decision_function is score - offset_).
                ulp = np.spacing(np.abs(wants["score_samples"]))
                assert np.all(np.abs(got - want) <= 2 * ulp), \
                    f"{kind} {method}: {got[:3]} vs {want[:3]}"
        out = pacset("predict", "categorical", "--store", uri, "--input", cat_csv).stdout.split()
        got = np.array([float(v) for v in out], dtype=np.float32)
        assert np.array_equal(got.view(np.uint32), cat_want.view(np.uint32)), \
            f"{kind} categorical: {got[:3]} vs {cat_want[:3]}"


# ---------------------------------------------------------------- runner ---

def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("-k", default="", help="run tests whose name contains this")
    ARGS = ap.parse_args()
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and ARGS.k in n]
    failed = 0
    for name, fn in tests:
        with tempfile.TemporaryDirectory(prefix="pacset-store-predict-") as tmp:
            env = Env(tmp)
            t0 = time.time()
            try:
                fn(env)
                print(f"ok   {name} ({time.time() - t0:.1f} s)")
            except Exception:  # noqa: BLE001 - report every failure, run the rest
                failed += 1
                print(f"FAIL {name}")
                traceback.print_exc()
            finally:
                env.close()
    print(f"{len(tests) - failed} of {len(tests)} store prediction tests passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
