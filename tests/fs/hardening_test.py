#!/usr/bin/python3
"""pacsetfs against a hostile local user, a crash-prone shutdown and a busy
machine: regression tests of issue 13 on real mounts.

The attacker is a second local user (`nobody`, through setpriv). Every test
runs in its own temp dir (traversable by that user) with a time limit, and
every mount is unmounted whatever happens.

Usage: hardening_test.py --pacset PATH --pacsetfs PATH [-k NAME]
"""
import ctypes
import errno
import json
import os
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
import fslib  # noqa: E402
from fslib import Mount, Redis, run  # noqa: E402

ARGS = None
DATA = {}
ATTACKER = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def pacset(*args, check=True, env=None):
    return run([ARGS.pacset, *map(str, args)], check=check, env=env)


def as_attacker(*cmd):
    return run([*ATTACKER, *map(str, cmd)], check=False)


def prepare(workdir):
    """Two small forests with the same features (so one can replace the other)."""
    import joblib
    import numpy as np
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier
    import fashion_mnist
    os.chmod(workdir, 0o755)
    X, y = fashion_mnist.load("train")
    X, y = X[:2000], y[:2000]
    rf = RandomForestClassifier(n_estimators=8, random_state=0, n_jobs=2).fit(X, y)
    joblib.dump(rf, os.path.join(workdir, "rf.joblib"))
    booster = xgb.train({"objective": "multi:softprob", "num_class": 10, "max_depth": 4,
                         "nthread": 2, "seed": 0}, xgb.DMatrix(X, label=y), 4)
    booster.save_model(os.path.join(workdir, "xgb.json"))
    Xt, _ = fashion_mnist.load("test")
    DATA["rows"] = os.path.join(workdir, "rows.csv")
    np.savetxt(DATA["rows"], Xt[:40], delimiter=",", fmt="%d")
    for name, src in (("rf", "rf.joblib"), ("xgb", "xgb.json")):
        DATA[name] = os.path.join(workdir, f"{name}.pac")
        pacset("pack", os.path.join(workdir, src), "-o", DATA[name], "--block-size", "4KiB")
        with open(DATA[name], "rb") as f:
            DATA[name + "_bytes"] = f.read()
        DATA[name + "_want"] = pacset("predict", DATA[name], "--input", DATA["rows"]).stdout


def make_env(tmp):
    os.chmod(tmp, 0o755)  # the attacker may walk to the mount point
    return tmp


def rocksdb_store(tmp, *names):
    store = "rocksdb:" + os.path.join(tmp, "store")
    for n in names or ("rf",):
        pacset("import", DATA[n], "--name", n, "--store", store)
    return store


def write_control(mp, data):
    """One write to the control file; returns the errno (0: accepted)."""
    fd = os.open(os.path.join(mp, ".pacsetfs", "control"), os.O_WRONLY)
    try:
        os.write(fd, data if isinstance(data, bytes) else data.encode())
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def predicts_exactly(mp, name="rf"):
    return pacset("predict", os.path.join(mp, f"{name}.pac"), "--input",
                  DATA["rows"]).stdout == DATA[name + "_want"]


# ---------------------------------------------------------------- tests ----

def test_other_users_read_an_allow_other_mount_but_cannot_use_its_control_file(tmp):
    store = rocksdb_store(tmp)
    trace = os.path.join(tmp, "t.trace")
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt"), options="allow_other",
               trace=trace) as m:
        r = as_attacker("sha256sum", os.path.join(m.mp, "rf.pac"))
        assert r.returncode == 0, r.stderr
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        for cmd in ("drop *", f"trace start {victim}", "trace stop"):
            r = as_attacker("sh", "-c", f"printf '%s\\n' '{cmd}' > {m.mp}/.pacsetfs/control")
            assert r.returncode != 0 and "Permission denied" in r.stderr, (cmd, r.stderr)
        with open(victim) as f:
            assert f.read() == "precious\n", "the daemon wrote a file for another user"
        assert "trace" in m.stats(), "another user stopped the trace"
        assert "dropped caches" not in m.read_log(), m.read_log()
        # The mounting user (root here) still can.
        assert write_control(m.mp, "drop *") == 0


def test_trace_files_are_created_never_followed_nor_overwritten(tmp):
    store = rocksdb_store(tmp)
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    link = os.path.join(tmp, "link.trace")
    os.symlink(victim, link)
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt")) as m:
        # O_EXCL: a symbolic link is an existing name, wherever it points.
        got = write_control(m.mp, f"trace start {link}")
        assert got == errno.EEXIST, (got, m.read_log())
        assert write_control(m.mp, f"trace start {victim}") == errno.EEXIST
        with open(victim) as f:
            assert f.read() == "precious\n", "trace start overwrote a file"
        assert os.path.islink(link)
        assert write_control(m.mp, "trace start /nonexistent-dir/t.trace") == errno.ENOENT
        fresh = os.path.join(tmp, "fresh.trace")
        assert write_control(m.mp, f"trace start {fresh}") == 0
        assert predicts_exactly(m.mp)
        assert write_control(m.mp, "trace stop") == 0
        st = os.lstat(fresh)
        assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 == 0, oct(st.st_mode)
        with open(fresh, "rb") as f:
            assert f.read(8) == b"PACTRACE"
        assert "already exists" in m.read_log(), m.read_log()
    # At mount time too: the mount fails and names the file.
    r = run([ARGS.pacsetfs, "mount", os.path.join(tmp, "mnt"), "--store", store, "-f",
             "--trace", victim], check=False, timeout=30)
    assert r.returncode == 1 and victim in r.stderr and "exists" in r.stderr, r.stderr
    with open(victim) as f:
        assert f.read() == "precious\n"


def test_ro_makes_a_read_only_mount_without_a_control_file(tmp):
    store = rocksdb_store(tmp)
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt"), options="ro") as m:
        options = fslib.mount_entry(m.mp)[3].split(",")
        assert "ro" in options, options
        try:
            os.open(os.path.join(m.mp, ".pacsetfs", "control"), os.O_WRONLY)
            raise AssertionError("opened the control file of a read-only mount")
        except OSError as e:
            assert e.errno == errno.EROFS, e
        r = run([ARGS.pacsetfs, "drop-cache", m.mp], check=False)
        assert r.returncode == 1 and "Read-only" in r.stderr, r.stderr
        assert predicts_exactly(m.mp)


def test_bytes_that_are_not_utf8_do_not_crash_the_daemon(tmp):
    store = rocksdb_store(tmp)
    mp = os.path.join(tmp, os.fsdecode(b"mnt\xff\xfe"))
    with Mount(ARGS.pacsetfs, store, mp) as m:
        assert os.fsencode(m.mp) == os.fsencode(tmp) + b"/mnt\xff\xfe"
        assert "\ufffd" in m.stats()["mountpoint"]
        assert write_control(m.mp, b"drop \xff\n") == errno.ENOENT
        path = os.path.join(os.fsencode(tmp), b"\xff.trace")
        assert write_control(m.mp, b"trace start " + path + b"\n") == 0
        s = m.stats()
        assert "\ufffd" in s["trace"]["path"] and "\ufffd" in s["mountpoint"], s
        assert write_control(m.mp, "trace stop") == 0
        assert predicts_exactly(m.mp)
        assert m.proc.poll() is None, m.read_log()


def test_the_redis_password_is_never_shown(tmp):
    secret = "Pw-7f3a91c2-secret"
    redis = Redis(tmp, password=secret).start()
    try:
        plain = redis.uri
        uri = plain.replace("redis://", f"redis://:{secret}@")
        pacset("import", DATA["rf"], "--name", "rf", "--store", uri)
        with Mount(ARGS.pacsetfs, uri, os.path.join(tmp, "mnt")) as m:
            assert predicts_exactly(m.mp)
            entry = fslib.mount_entry(m.mp)
            assert secret not in " ".join(entry), entry
            shown = []
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if secret.encode() in cmdline:
                    shown.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            assert not shown, f"the password is on a command line: {shown}"
            assert secret not in json.dumps(m.stats())
            assert "***" in m.stats()["store"]
        assert secret not in m.read_log() and "serving" in m.read_log(), m.read_log()
        for bad in (f"redis://:{secret}@127.0.0.1:99999", f"redis://:{secret}@127.0.0.1:1"):
            r = pacset("ls", "--store", bad, check=False)
            assert r.returncode != 0 and secret not in r.stderr + r.stdout, r.stderr
            r = run([ARGS.pacsetfs, "mount", os.path.join(tmp, "mnt"), "--store", bad, "-f"],
                    check=False, timeout=30)
            assert r.returncode != 0 and secret not in r.stderr, r.stderr
        # Ways to give the password that never reach a command line.
        pwfile = os.path.join(tmp, "redis.pw")
        with open(os.open(pwfile, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(secret + "\n")
        with Mount(ARGS.pacsetfs, plain, os.path.join(tmp, "mnt"),
                   options=f"password_file={pwfile}") as m:
            assert predicts_exactly(m.mp)
        env = dict(os.environ, REDISCLI_AUTH=secret)
        assert "rf" in pacset("ls", "--store", plain, env=env).stdout
        r = pacset("ls", "--store", plain, check=False)
        assert r.returncode == 1 and "password" in r.stderr, r.stderr
    finally:
        redis.stop()


def test_a_comma_in_a_store_path_injects_no_mount_option(tmp):
    store = "dir:" + os.path.join(tmp, "d,allow_other")
    pacset("import", DATA["rf"], "--name", "rf", "--store", store)
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt")) as m:
        entry = fslib.mount_entry(m.mp)
        assert "allow_other" not in entry[3].split(","), entry
        r = as_attacker("ls", m.mp)
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
        assert predicts_exactly(m.mp)


def test_a_background_daemon_exits_cleanly_with_a_rocksdb_store(tmp):
    """What the Type=forking unit does: mount in the background, unmount. The
    daemon must exit with status 0 (it segfaulted on every exit)."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    store = rocksdb_store(tmp)
    mp = os.path.join(tmp, "mnt")
    os.makedirs(mp)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0  # the daemon becomes our child
    try:
        r = run([ARGS.pacsetfs, "mount", mp, "--store", store], check=False, timeout=30)
        assert r.returncode == 0, r.stderr
        assert fslib.is_mounted(mp)
        assert predicts_exactly(mp)
        run([ARGS.pacsetfs, "unmount", mp])
        deadline = time.time() + 20
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                break
            assert time.time() < deadline, "the daemon did not exit after unmount"
            time.sleep(0.05)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
            f"the daemon ended with status {status:#x} (signal {os.WTERMSIG(status)})"
        # A store error still reaches the terminal before the daemon detaches.
        r = run([ARGS.pacsetfs, "mount", mp, "--store", "rocksdb:/nonexistent/x"], check=False,
                timeout=30)
        assert r.returncode == 1 and "/nonexistent/x" in r.stderr, r.stderr
        assert not fslib.is_mounted(mp)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        if fslib.is_mounted(mp):
            run(["umount", "-l", mp], check=False)


READER = r"""
import mmap, os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
with open(path, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    end, n = time.time() + seconds, 0
    while time.time() < end:
        for off in range(0, len(m), 4096):
            n += m[off]
    print(n)
"""


def test_drop_with_one_worker_thread_never_deadlocks_readers(tmp):
    store = rocksdb_store(tmp, "rf", "xgb")
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt"), options="threads=1") as m:
        readers = [subprocess.Popen([sys.executable, "-c", READER,
                                     os.path.join(m.mp, f"{n}.pac"), "6"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for n in ("rf", "xgb", "rf")]
        try:
            drops = 0
            end = time.time() + 5
            while time.time() < end:
                r = fslib.run_or_abort([ARGS.pacsetfs, "drop-cache", m.mp], m.mp, 20)
                assert r.returncode == 0, r.stderr
                drops += 1
            for p in readers:
                try:
                    out, err = p.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    fslib.abort_fuse_connection(m.mp)
                    raise AssertionError("a reader hung (deadlock)")
                assert p.returncode == 0, err
        finally:
            for p in readers:
                if p.poll() is None:
                    p.kill()
        assert predicts_exactly(m.mp)
        print(f"    {drops} drops while 3 readers faulted with one worker thread")


def test_a_slow_store_pin_does_not_stall_reads_of_cached_blocks(tmp):
    """Opening a new generation pins it in the store. With the store hung,
    a read of a block the daemon has cached must still be answered: the pin
    must not hold the lock that reads need. Checked by order, not by time: the
    store resumes only after the read returns, so the open can succeed only
    if the read came back while its pin was still waiting."""
    redis = Redis(tmp).start()
    try:
        pacset("import", DATA["rf"], "--name", "rf", "--store", redis.uri)
        with Mount(ARGS.pacsetfs, redis.uri, os.path.join(tmp, "mnt"),
                   options="no_push_blocks,store_timeout=20000,catalog_refresh=100") as m:
            path = os.path.join(m.mp, "rf.pac")
            fd = os.open(path, os.O_RDONLY)
            try:
                assert os.pread(fd, 4096, 5 * 4096) == DATA["rf_bytes"][5 * 4096:6 * 4096]
                # In the daemon's cache, out of the page cache: the next read
                # is a request that the daemon answers without the store.
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                pacset("import", DATA["xgb"], "--name", "rf", "--store", redis.uri)
                deadline = time.time() + 10
                while os.stat(path).st_size != len(DATA["xgb_bytes"]):
                    assert time.time() < deadline, "the new generation did not appear"
                    time.sleep(0.05)
                hits = m.stats()["forests"]["rf"]["cache_hits"]
                redis.pause()
                result = {}
                opener = threading.Thread(target=_try_open, args=(path, result))
                opener.start()
                time.sleep(0.5)  # let the open reach its pin
                data = os.pread(fd, 4096, 5 * 4096)
                redis.resume()
                opener.join(timeout=60)
                assert data == DATA["rf_bytes"][5 * 4096:6 * 4096]
                assert m.stats()["forests"]["rf"]["cache_hits"] > hits, "the read missed the cache"
                assert result.get("error") is None, \
                    f"the read waited for the pin of another open ({result})"
            finally:
                os.close(fd)
    finally:
        redis.stop()


def _try_open(path, result):
    try:
        os.close(os.open(path, os.O_RDONLY))
    except OSError as e:
        result["error"] = e


def test_a_command_that_only_starts_like_drop_is_refused(tmp):
    store = rocksdb_store(tmp)
    trace = os.path.join(tmp, "t.trace")
    with Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt"), trace=trace) as m:
        for cmd in ("dropX", "drop", "drop  rf", "trace", "trace start", "drop rf extra"):
            assert write_control(m.mp, cmd + "\n") in (errno.EINVAL, errno.ENOENT), cmd
        assert "dropped caches" not in m.read_log(), m.read_log()
        assert write_control(m.mp, "drop rf\n") == 0
        assert "dropped caches for rf" in m.read_log()


# ---------------------------------------------------------------- runner ---

def main():
    return fslib.main(sys.modules[__name__], prepare, make_env, "hardening",
                      "pacsetfs-hardening-")

if __name__ == "__main__":
    sys.exit(main())
