#!/usr/bin/python3
"""pacsetfs integration tests: real FUSE mounts over real stores (RocksDB,
a directory, a redis-server on loopback), real models, real processes.

Every test runs in its own temp directory with a time limit, and every mount
is unmounted whatever happens.

Usage: fs_test.py --pacset PATH --pacsetfs PATH [-k NAME]
"""
import filecmp
import json
import mmap
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
import fslib  # noqa: E402
from fslib import Mount, Redis, run  # noqa: E402

ARGS = None
MODELS = {}


def pacset(*args, check=True, env=None):
    return run([ARGS.pacset, *map(str, args)], check=check, env=env)


def train_models(workdir):
    """A scikit-learn random forest and an XGBoost model on Fashion-MNIST."""
    import joblib
    import numpy as np
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier
    import fashion_mnist
    X, y = fashion_mnist.load("train")
    X, y = X[:4000], y[:4000]
    rf = RandomForestClassifier(n_estimators=24, random_state=0, n_jobs=2).fit(X, y)
    joblib.dump(rf, os.path.join(workdir, "rf.joblib"))
    booster = xgb.train({"objective": "multi:softprob", "num_class": 10, "max_depth": 6,
                         "nthread": 2, "seed": 0}, xgb.DMatrix(X, label=y), 8)
    booster.save_model(os.path.join(workdir, "xgb.json"))
    Xt, _ = fashion_mnist.load("test")
    rows = os.path.join(workdir, "rows.csv")
    np.savetxt(rows, Xt[:300], delimiter=",", fmt="%d")
    np.savetxt(os.path.join(workdir, "one.csv"), Xt[7:8], delimiter=",", fmt="%d")
    for name in ("rf", "xgb"):
        src = os.path.join(workdir, "rf.joblib" if name == "rf" else "xgb.json")
        pac = os.path.join(workdir, f"{name}.pac")
        pacset("pack", src, "-o", pac, "--block-size", "4KiB")
        MODELS[name] = {"src": src, "pac": pac}
    MODELS["rows"] = rows
    MODELS["one"] = os.path.join(workdir, "one.csv")


def predict(model, rows, *flags):
    return pacset("predict", model, "--input", rows, *flags).stdout


class TestEnv:
    def __init__(self, tmp):
        self.tmp = tmp
        self.redis = None

    def store(self, kind):
        if kind == "rocksdb":
            return "rocksdb:" + os.path.join(self.tmp, "rocks")
        if kind == "dir":
            return "dir:" + os.path.join(self.tmp, "dirstore")
        if self.redis is None:
            self.redis = Redis(self.tmp).start()
        return self.redis.uri

    def close(self):
        if self.redis:
            self.redis.stop()


def import_models(store):
    for name in ("rf", "xgb"):
        pacset("import", MODELS[name]["pac"], "--name", name, "--store", store)


# ---------------------------------------------------------------- tests ----

def test_files_are_byte_identical_to_export_and_predict_exactly(env):
    """For every store: cmp with pacset export, and predictions through the
    mount equal predictions from the local .pac file."""
    for kind in ("rocksdb", "dir", "redis"):
        store = env.store(kind)
        import_models(store)
        mp = os.path.join(env.tmp, f"mnt-{kind}")
        with Mount(ARGS.pacsetfs, store, mp):
            assert sorted(os.listdir(mp)) == [".pacsetfs", "rf.pac", "xgb.pac"], os.listdir(mp)
            for name in ("rf", "xgb"):
                exported = os.path.join(env.tmp, f"{kind}-{name}.pac")
                pacset("export", name, "-o", exported, "--store", store)
                assert filecmp.cmp(exported, os.path.join(mp, f"{name}.pac"), shallow=False), \
                    f"{kind}: {name}.pac differs from pacset export"
                assert filecmp.cmp(exported, MODELS[name]["pac"], shallow=False)
                assert os.path.getsize(os.path.join(mp, f"{name}.pac")) == os.path.getsize(exported)
                got = predict(os.path.join(mp, f"{name}.pac"), MODELS["rows"], "--threads", "2")
                want = predict(MODELS[name]["pac"], MODELS["rows"])
                assert got == want, f"{kind}: predictions through the mount differ for {name}"
                assert predict(os.path.join(mp, f"{name}.pac"), MODELS["rows"], "--leaf") == \
                    predict(MODELS[name]["src"], MODELS["rows"], "--leaf")
        print(f"    {kind}: cmp and predictions identical")


def test_reads_across_block_boundaries_return_full_counts(env):
    store = env.store("dir")
    import_models(store)
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt")) as m:
        path = os.path.join(m.mp, "rf.pac")
        with open(MODELS["rf"]["pac"], "rb") as f:
            ref = f.read()
        fd = os.open(path, os.O_RDONLY)
        try:
            for off, n in ((4090, 20), (0, 3 * 4096 + 5), (len(ref) - 10, 100), (len(ref), 10),
                           (8191, 1), (12345, 65536)):
                got = os.pread(fd, n, off)
                assert got == ref[off:off + n], f"pread({n}, {off}) returned wrong bytes"
        finally:
            os.close(fd)


def test_cold_single_row_fetches_exactly_the_analytical_blocks(env):
    """The blocks a cold one-row prediction fetches from the store equal the
    analytical count of `pacset layout-report` plus the metadata blocks read at
    open. No tolerance: kernel readahead is off and pushed blocks come from the
    daemon cache, so nothing else is fetched."""
    store = env.store("rocksdb")
    for name in ("rf", "xgb"):
        for layout in ("pacset", "dfs"):
            pac = os.path.join(env.tmp, f"{name}-{layout}.pac")
            pacset("pack", MODELS[name]["src"], "-o", pac, "--block-size", "4KiB",
                   "--layout", layout)
            pacset("import", pac, "--name", f"{name}-{layout}", "--store", store)
    trace = os.path.join(env.tmp, "trace.bin")
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"), trace=trace) as m:
        for name in ("rf", "xgb"):
            for layout in ("pacset", "dfs"):
                forest = f"{name}-{layout}"
                m.drop(forest)
                predict(os.path.join(m.mp, f"{forest}.pac"), MODELS["one"])
                report = json.loads(pacset("layout-report", MODELS[name]["src"], "--input",
                                           MODELS["one"], "--block-size", "4KiB", "--layouts",
                                           layout, "--json").stdout)["4096"][layout]
                expected = report["blocks_per_row"]["max"] + report["open_blocks"]
                time.sleep(0.1)  # the trace writer flushes every few ms
                names, events = fslib.read_trace(trace)
                ids = [i for i, n in names.items() if n == forest]
                last_drop = max(i for i, e in enumerate(events) if e["type"] == "drop")
                fetched = {e["block"] for e in events[last_drop + 1:]
                           if e["type"] == "access" and e["forest"] in ids and e["source"] == 0}
                assert len(fetched) == expected, \
                    f"{forest}: trace shows {len(fetched)} blocks, analytical count {expected}"
                # The engine asked for them in batches through the gather
                # file (protocol/gather.h), not a FUSE read per block.
                gathers = m.stats()["forests"][forest]["gathers"]
                assert 0 < gathers < len(fetched) / 2, (forest, gathers, len(fetched))
                print(f"    {forest}: {len(fetched)} blocks fetched = {expected} analytical")


def test_eight_processes_predict_exactly_at_once(env):
    store = env.store("rocksdb")
    import_models(store)
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt")) as m:
        m.drop()
        procs = []
        for i in range(8):
            name = "rf" if i % 2 == 0 else "xgb"
            p = subprocess.Popen([ARGS.pacset, "predict", os.path.join(m.mp, f"{name}.pac"),
                                  "--input", MODELS["rows"], "--threads", "2"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append((name, p))
        want = {n: predict(MODELS[n]["pac"], MODELS["rows"]) for n in ("rf", "xgb")}
        for name, p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert out == want[name], f"a concurrent {name} prediction differs"
        s = m.stats()["forests"]
        # Single flight: each block came from the store at most once.
        for name in ("rf", "xgb"):
            blocks = os.path.getsize(MODELS[name]["pac"]) // 4096
            assert s[name]["blocks_fetched"] <= blocks, s[name]


def test_corrupt_block_is_never_served(env):
    """dir store: damage one block on disk. pread of it gets EIO, its
    neighbours still read, and `pacset predict` names forest and block."""
    store = env.store("dir")
    import_models(store)
    stored = os.path.join(env.tmp, "dirstore", "forests", "rf", "1.pac")
    assert os.path.exists(stored), os.listdir(os.path.dirname(stored))
    info = json.loads(pacset("info", MODELS["rf"]["pac"], "--json").stdout)
    bad = info["metadata_blocks"]  # the first bin block: every prediction needs it
    with open(stored, "r+b") as f:
        f.seek(bad * 4096 + 100)
        byte = f.read(1)
        f.seek(bad * 4096 + 100)
        f.write(bytes([byte[0] ^ 0x20]))
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt")) as m:
        path = os.path.join(m.mp, "rf.pac")
        fd = os.open(path, os.O_RDONLY)
        try:
            try:
                os.pread(fd, 4096, bad * 4096)
                raise AssertionError("a corrupt block was served")
            except OSError as e:
                assert e.errno == 5, e  # EIO
            assert len(os.pread(fd, 4096, (bad + 1) * 4096)) == 4096
        finally:
            os.close(fd)
        r = pacset("predict", path, "--input", MODELS["one"], check=False)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert f"block {bad}" in r.stderr and "rf.pac" in r.stderr, r.stderr
        assert "I/O error" in r.stderr, r.stderr
        assert m.stats()["forests"]["rf"]["corrupt_blocks"] >= 1
        assert "checksum" in m.read_log(), m.read_log()
        # The other forest is unaffected.
        assert predict(os.path.join(m.mp, "xgb.pac"), MODELS["rows"]) == \
            predict(MODELS["xgb"]["pac"], MODELS["rows"])
    r = pacset("verify", "rf", "--store", store, check=False)
    assert r.returncode == 1 and f"block {bad} is corrupt" in r.stdout, r.stdout + r.stderr


def test_unreachable_store_gives_eio_within_the_deadline_and_recovers(env):
    store = env.store("redis")
    import_models(store)
    # No read-ahead for page-faulting readers: block 13 must still be uncached
    # when the store stops (a read of block 9 would otherwise read its chunk).
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"),
               options="store_timeout=1500,catalog_refresh=200,fault_readahead=0") as m:
        path = os.path.join(m.mp, "rf.pac")
        fd = os.open(path, os.O_RDONLY)
        try:
            assert len(os.pread(fd, 4096, 0)) == 4096
            for how in ("pause", "stop"):
                if how == "pause":
                    env.redis.pause()     # hung server: connections stall
                else:
                    env.redis.stop()      # dead server: connections refused
                t = time.time()
                try:
                    os.pread(fd, 4096, 9 * 4096 if how == "pause" else 13 * 4096)
                    raise AssertionError("read succeeded with the store down")
                except OSError as e:
                    assert e.errno == 5, e
                took = time.time() - t
                # Bounded by the configured deadline (1.5 s), with slack for a busy machine.
                assert took < 1.5 + 3.0, f"EIO took {took:.1f} s"
                assert m.proc.poll() is None, "the daemon died"
                m.stats()  # still answering
                if how == "pause":
                    env.redis.resume()
                else:
                    env.redis.proc = None
                    env.redis.start()
                deadline = time.time() + 10
                while True:
                    try:
                        data = os.pread(fd, 4096, 9 * 4096 if how == "pause" else 13 * 4096)
                        break
                    except OSError:
                        if time.time() > deadline:
                            raise
                        time.sleep(0.2)
                with open(MODELS["rf"]["pac"], "rb") as f:
                    f.seek(9 * 4096 if how == "pause" else 13 * 4096)
                    assert data == f.read(4096)
                print(f"    store {how}: EIO after {took:.2f} s, recovered")
        finally:
            os.close(fd)


def test_new_generation_for_new_opens_old_one_for_live_mappings(env):
    store = env.store("rocksdb")
    pacset("import", MODELS["rf"]["pac"], "--name", "model", "--store", store)
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"),
               options="catalog_refresh=100") as m:
        path = os.path.join(m.mp, "model.pac")
        old = open(path, "rb")
        old_map = mmap.mmap(old.fileno(), 0, prot=mmap.PROT_READ)
        with open(MODELS["rf"]["pac"], "rb") as f:
            old_bytes = f.read()
        assert old_map[:4096] == old_bytes[:4096]
        pacset("import", MODELS["xgb"]["pac"], "--name", "model", "--store", store)
        time.sleep(0.6)
        with open(MODELS["xgb"]["pac"], "rb") as f:
            new_bytes = f.read()
        with open(path, "rb") as f:
            assert f.read() == new_bytes, "a new open did not see the new generation"
        assert os.path.getsize(path) == len(new_bytes)
        # The live mapping still reads the old generation, all of it.
        assert old_map[:] == old_bytes, "the old mapping changed"
        assert predict(path, MODELS["rows"]) == predict(MODELS["xgb"]["pac"], MODELS["rows"])
        old_map.close()
        old.close()
        # Once released, the old generation is collected by the next import.
        pacset("import", MODELS["xgb"]["pac"], "--name", "model", "--store", store)
        time.sleep(0.4)
        listing = json.loads(pacset("ls", "--json", "--store", store).stdout)
        assert [f["generation"] for f in listing if f["name"] == "model"] == [3]


def test_a_page_faulting_reader_reads_what_it_reads_locally_with_read_ahead(env):
    """The independent reader of tests/spec/ with the file mapped walks one
    tree after another, a page fault per block it touches: through a mount
    (its read-ahead on: the bins whole, windows ahead of forward-moving
    faults, pushed into the page cache) it predicts the same margins and
    leaf ids as on the local file, for cold rows, and the mapping holds the
    local file's bytes."""
    store = env.store("dir")
    import_models(store)
    reader = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec",
                          "pac_reader.py")
    rows = os.path.join(env.tmp, "rows.csv")
    with open(MODELS["rows"]) as f:
        lines = f.readlines()
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt")) as m:
        path = os.path.join(m.mp, "rf.pac")
        for start in (0, 40, 80):
            with open(rows, "w") as f:
                f.writelines(lines[start:start + 3])
            for flag in ("--margin", "--leaf"):
                m.drop("rf")
                got = run(["/usr/bin/python3", reader, path, "--mmap", "--input", rows, flag])
                want = run(["/usr/bin/python3", reader, MODELS["rf"]["pac"], "--mmap", "--input",
                            rows, flag])
                assert got.stdout == want.stdout, (start, flag, got.stdout, want.stdout)
        s = m.stats()["forests"]["rf"]
        assert s["prefetched_blocks"] > 0 and s["pushed_blocks"] > 0, s
        with open(path, "rb") as f, open(MODELS["rf"]["pac"], "rb") as local:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            assert mm[:] == local.read()
            mm.close()
        print(f"    reads {s['reads']}, read ahead {s['prefetched_blocks']}, "
              f"pushed {s['pushed_blocks']}")


def test_a_forest_larger_than_fault_readahead_file_max_gets_only_its_bins_read_ahead(env):
    """Past -o fault_readahead_file_max a page-faulting reader's faults are
    read exactly but for the bins: chunks would read most of a large file
    for one row. The same reader, the same rows and margins either way."""
    store = env.store("dir")
    import_models(store)
    reader = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec",
                          "pac_reader.py")
    info = json.loads(pacset("info", MODELS["rf"]["pac"], "--json").stdout)
    assert info["block_count"] * info["block_size"] > 64 << 10, info
    rows = os.path.join(env.tmp, "rows3.csv")
    with open(MODELS["rows"]) as f:
        lines = f.readlines()
    with open(rows, "w") as f:
        f.writelines(lines[10:13])
    want = run(["/usr/bin/python3", reader, MODELS["rf"]["pac"], "--mmap", "--input", rows,
                "--margin"]).stdout
    ahead = {}
    for label, options in (("default", ""), ("bounded", "fault_readahead_file_max=64K")):
        with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt-" + label),
                   options=options) as m:
            m.drop("rf")
            got = run(["/usr/bin/python3", reader, os.path.join(m.mp, "rf.pac"), "--mmap",
                       "--input", rows, "--margin"]).stdout
            assert got == want, label
            ahead[label] = m.stats()["forests"]["rf"]["prefetched_blocks"]
    assert ahead["bounded"] <= info["bin_blocks"], (ahead, info["bin_blocks"])  # the bins at most
    assert ahead["default"] > info["bin_blocks"], (ahead, info["bin_blocks"])


def test_drop_cache_makes_a_mapped_file_cold(env):
    store = env.store("rocksdb")
    import_models(store)
    trace = os.path.join(env.tmp, "t.bin")
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"), trace=trace) as m:
        path = os.path.join(m.mp, "rf.pac")
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            first = bytes(mm[5 * 4096:5 * 4096 + 10])
            time.sleep(0.2)  # what the daemon reads ahead after the fault's reply
            before = m.stats()["forests"]["rf"]["blocks_fetched"]
            _ = mm[5 * 4096]
            assert m.stats()["forests"]["rf"]["blocks_fetched"] == before  # warm: no fetch
            run([ARGS.pacsetfs, "drop-cache", m.mp, "rf"])
            ahead = m.stats()["forests"]["rf"]["prefetched_blocks"]
            assert bytes(mm[5 * 4096:5 * 4096 + 10]) == first
            # The faulted block, and what the daemon read ahead for it (the
            # bins, when block 5 is one of them: fs/internal/fault_readahead.h).
            time.sleep(0.2)
            s = m.stats()["forests"]["rf"]
            assert s["blocks_fetched"] == before + 1 + s["prefetched_blocks"] - ahead, s
            mm.close()
        r = run([ARGS.pacsetfs, "drop-cache", m.mp, "nosuch"], check=False)
        assert r.returncode == 1 and "nosuch" in r.stderr, r.stderr
        # The forest's own file names it: warm, then cold again.
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(fd, 10, 5 * 4096) == first
            time.sleep(0.2)
            warm = m.stats()["forests"]["rf"]["blocks_fetched"]
            assert os.pread(fd, 10, 5 * 4096) == first
            assert m.stats()["forests"]["rf"]["blocks_fetched"] == warm
            run([ARGS.pacsetfs, "drop-cache", path])
            assert os.pread(fd, 10, 5 * 4096) == first
            assert m.stats()["forests"]["rf"]["blocks_fetched"] > warm
        finally:
            os.close(fd)
        r = run([ARGS.pacsetfs, "drop-cache", path, "other"], check=False)
        assert r.returncode == 1 and "is forest 'rf', not 'other'" in r.stderr, r.stderr
    # A .pac file that is not on a mount says so.
    local = os.path.join(env.tmp, "local.pac")
    with open(local, "wb") as f:
        f.write(b"not on a mount")
    r = run([ARGS.pacsetfs, "drop-cache", local], check=False)
    assert r.returncode == 1 and "is not a forest file of a pacsetfs mount" in r.stderr, r.stderr


def test_killed_daemon_leaves_a_mount_point_that_a_new_mount_recovers(env):
    store = env.store("rocksdb")
    import_models(store)
    mp = os.path.join(env.tmp, "mnt")
    for options in ("no_auto_unmount", ""):
        m = Mount(ARGS.pacsetfs, store, mp, options=options).__enter__()
        try:
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait(timeout=10)
            time.sleep(0.3)
            try:
                os.statvfs(mp)
                state = "clean"
            except OSError as e:
                state = "stale" if e.errno == 107 else str(e)
            with Mount(ARGS.pacsetfs, store, mp) as m2:
                assert predict(os.path.join(m2.mp, "rf.pac"), MODELS["one"]) == \
                    predict(MODELS["rf"]["pac"], MODELS["one"])
            print(f"    killed with {options or 'auto_unmount'}: mount point was {state}; remounted")
        finally:
            m.__exit__(None, None, None)


def fusermount3_watching(mp):
    """Pids of fusermount3 processes whose command line names `mp`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"fusermount3" and mp.encode() in argv:
            pids.append(int(pid))
    return pids


def test_a_daemon_that_ends_takes_its_mount_and_its_fusermount3_with_it(env):
    """With auto_unmount (the default) fusermount3 mounts and stays to watch
    the daemon: however the daemon ends, its mount goes and so does the
    watcher (fs/internal/fusermount.h)."""
    store = env.store("dir")
    import_models(store)
    mp = os.path.join(env.tmp, "mnt")
    for how in ("unmount", "SIGTERM", "SIGKILL"):
        with Mount(ARGS.pacsetfs, store, mp) as m:
            assert predict(os.path.join(mp, "rf.pac"), MODELS["one"]) == \
                predict(MODELS["rf"]["pac"], MODELS["one"])
            assert len(fusermount3_watching(mp)) == 1, how
            if how == "unmount":
                run([ARGS.pacsetfs, "unmount", mp])
            else:
                m.proc.send_signal(getattr(signal, how))
            m.proc.wait(timeout=20)
            deadline = time.time() + 20
            while (fslib.is_mounted(mp) or fusermount3_watching(mp)) and time.time() < deadline:
                time.sleep(0.05)
            assert not fslib.is_mounted(mp), how
            assert fusermount3_watching(mp) == [], how
            if how == "SIGTERM":
                assert m.proc.returncode == 0, m.read_log()


def test_the_daemon_runs_the_systems_fusermount3_not_one_on_its_path(env):
    """A root daemon started with a $PATH that holds a directory another user
    can write must not run that user's fusermount3 to mount or unmount:
    /usr/bin/fusermount3 comes first, as in libfuse."""
    if not os.access("/usr/bin/fusermount3", os.X_OK):
        print("    SKIP: no /usr/bin/fusermount3")
        return
    store = env.store("dir")
    import_models(store)
    bait = os.path.join(env.tmp, "writable-bin")
    os.makedirs(bait)
    ran = os.path.join(env.tmp, "bait-ran")
    with open(os.path.join(bait, "fusermount3"), "w") as f:
        f.write(f"#!/bin/sh\necho \"$@\" >> {ran}\nexit 1\n")
    os.chmod(os.path.join(bait, "fusermount3"), 0o755)
    daemon_env = dict(os.environ, PATH=bait + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    mp = os.path.join(env.tmp, "mnt")
    with Mount(ARGS.pacsetfs, store, mp, env=daemon_env) as m:
        assert predict(os.path.join(mp, "rf.pac"), MODELS["one"]) == \
            predict(MODELS["rf"]["pac"], MODELS["one"])
        assert len(fusermount3_watching(mp)) == 1
        run([ARGS.pacsetfs, "unmount", mp], env=daemon_env)
        m.proc.wait(timeout=20)
        assert not fslib.is_mounted(mp)
    assert not os.path.exists(ran), open(ran).read()


def test_fstab_form_and_bad_options(env):
    store = env.store("rocksdb")
    import_models(store)
    mp = os.path.join(env.tmp, "mnt")
    os.makedirs(mp)
    # What mount.fuse3 runs for an /etc/fstab line: SOURCE MOUNTPOINT -o opts.
    r = run([ARGS.pacsetfs, store, mp, "-o", "ro,dev,suid,nofail,_netdev,allow_other"],
            check=False)
    try:
        assert r.returncode == 0, r.stderr
        assert fslib.is_mounted(mp)
        assert predict(os.path.join(mp, "rf.pac"), MODELS["one"]) == \
            predict(MODELS["rf"]["pac"], MODELS["one"])
    finally:
        run([ARGS.pacsetfs, "unmount", mp], check=False)
    assert not fslib.is_mounted(mp)
    r = run([ARGS.pacsetfs, store, mp, "-o", "bogus=1"], check=False)
    assert r.returncode == 2 and "unknown mount option 'bogus'" in r.stderr, r.stderr
    r = run([ARGS.pacsetfs, "mount", mp, "--store", "rocksdb:/nonexistent/x", "-f"], check=False)
    assert r.returncode == 1 and "/nonexistent/x" in r.stderr, r.stderr
    r = run([ARGS.pacsetfs, "mount", mp, "--store", "ftp://x", "-f"], check=False)
    assert r.returncode == 1 and "ftp" in r.stderr, r.stderr
    r = run([ARGS.pacsetfs, "mount", os.path.join(env.tmp, "nope"), "--store", store, "-f"],
            check=False)
    assert r.returncode == 1 and "nope" in r.stderr, r.stderr
    assert not fslib.is_mounted(mp)


def test_mounting_a_store_that_does_not_exist_yet_serves_an_empty_directory(env):
    # As at boot, before the first import: the store is created empty, and a
    # forest imported later appears without remounting.
    store = "rocksdb:" + os.path.join(env.tmp, "fresh")
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"),
               options="catalog_refresh=100") as m:
        assert os.listdir(m.mp) == [".pacsetfs"], os.listdir(m.mp)
        pacset("import", MODELS["rf"]["pac"], "--name", "late", "--store", store)
        deadline = time.time() + 10
        while "late.pac" not in os.listdir(m.mp):
            assert time.time() < deadline, "an imported forest did not appear"
            time.sleep(0.1)
        assert predict(os.path.join(m.mp, "late.pac"), MODELS["one"]) == \
            predict(MODELS["rf"]["pac"], MODELS["one"])


def test_forest_files_are_read_only(env):
    store = env.store("rocksdb")
    import_models(store)
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt")) as m:
        for flags in (os.O_WRONLY, os.O_RDWR):
            try:
                os.open(os.path.join(m.mp, "rf.pac"), flags)
                raise AssertionError("opened a forest for writing")
            except OSError as e:
                assert e.errno in (30, 13), e  # EROFS / EACCES
        try:
            open(os.path.join(m.mp, "new.pac"), "w")
            raise AssertionError("created a file")
        except OSError:
            pass
        assert not os.path.exists(os.path.join(m.mp, "nosuch.pac"))
        s = m.stats()
        assert "rf" in s["forests"] and s["store"] == store


def test_the_daemon_lifts_its_open_file_limit_to_the_hard_limit(env):
    """A RocksDB store keeps every table file open, twice (once for its io_uring
    reads): the daemon raises its soft limit of descriptors to the hard one, so
    a large store does not run out at the usual soft limit of 1024."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256
    assert hard == resource.RLIM_INFINITY or hard > low, f"hard limit {hard}"
    store = "rocksdb:" + os.path.join(env.tmp, "limits")
    pacset("import", MODELS["rf"]["pac"], "--name", "rf", "--store", store)

    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"), preexec_fn=lower) as m:
        with open(f"/proc/{m.proc.pid}/limits") as f:
            line = next(x for x in f if x.startswith("Max open files"))
        soft_now = line.split()[3]
        want = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        assert soft_now == want, line
        assert predict(os.path.join(m.mp, "rf.pac"), MODELS["one"]) == \
            predict(MODELS["rf"]["pac"], MODELS["one"])


def test_the_daemon_reads_scattered_blocks_past_the_page_cache_unless_told_not_to(env):
    """The daemon caches blocks itself, so by default it reads a dir store's
    scattered blocks with O_DIRECT: they do not land in the page cache a second
    time; with -o no_direct_store_reads they do. Either way the bytes are the
    forest's."""
    import glob
    store = env.store("dir")
    pacset("import", MODELS["rf"]["pac"], "--name", "rf", "--store", store)
    (gen_file,) = glob.glob(os.path.join(store[len("dir:"):], "forests", "rf", "*.pac"))
    with open(MODELS["rf"]["pac"], "rb") as f:
        local = f.read()
    bs = 4096
    nblocks = len(local) // bs
    blocks = [nblocks * k // 9 for k in range(1, 9)]  # far apart: single-block reads
    for options, direct in (("", True), ("no_direct_store_reads", False)):
        try:
            fd = os.open(gen_file, os.O_RDONLY | os.O_DIRECT)
            os.close(fd)
        except OSError:
            print("  skipped: the file system refuses O_DIRECT")
            return
        if not fslib.evict_from_page_cache(gen_file):
            print("  skipped: the file system keeps its pages resident")
            return
        with Mount(ARGS.pacsetfs, store, os.path.join(env.tmp, "mnt"), options=options) as m:
            fd = os.open(os.path.join(m.mp, "rf.pac"), os.O_RDONLY)
            try:
                for b in blocks:
                    assert os.pread(fd, bs, b * bs) == local[b * bs:(b + 1) * bs], (options, b)
            finally:
                os.close(fd)
            resident = fslib.resident_pages(gen_file)
            got = [resident[b] for b in blocks]
            assert got == [not direct] * len(blocks), (options or "default", got)


# ---------------------------------------------------------------- runner ---

def main():
    return fslib.main(sys.modules[__name__], train_models, TestEnv, "filesystem",
                      "pacsetfs-test-")

if __name__ == "__main__":
    sys.exit(main())
