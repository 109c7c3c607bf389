"""Helpers for the filesystem integration tests: real mounts, real stores,
a real redis-server, with timeouts and guaranteed cleanup."""
import os
import re
import signal
import socket
import struct
import subprocess
import time


def run_or_abort(cmd, mountpoint, timeout):
    """Runs cmd; if it is still running after `timeout` s (stuck on a hung
    mount, where even SIGKILL waits), aborts the mount's FUSE connection
    first, then fails."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        abort_fuse_connection(mountpoint)
        p.kill()
        p.communicate()
        raise AssertionError(f"{' '.join(map(str, cmd))} hung for {timeout} s")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def mounts():
    """(source, mount point, type, options) of every mount, fields unescaped.
    Any byte may appear in a mount point: decoded with surrogateescape, like
    os.fsdecode, so that another mount's odd name cannot break a test."""
    def unescape(field):
        return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
    with open("/proc/self/mounts", encoding="utf-8", errors="surrogateescape") as f:
        return [tuple(unescape(x) for x in line.split()[:4]) for line in f]


def mount_entry(path):
    path = os.path.realpath(path)
    for m in mounts():
        if m[1] == path:
            return m
    return None


def is_mounted(path):
    return mount_entry(path) is not None


def abort_fuse_connection(path):
    """Aborts the FUSE connection of the mount at `path` (frees processes
    stuck on a hung daemon). Returns whether it could. Finds the connection
    in mountinfo: stat() of a hung mount would hang too."""
    path = os.path.abspath(path)  # not realpath: it would stat the hung mount
    dev = None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point == path:
                major, minor = fields[2].split(":")
                dev = os.makedev(int(major), int(minor))
    if dev is None:
        return False
    ctl = f"/sys/fs/fuse/connections/{os.minor(dev)}/abort"
    if not os.path.exists("/sys/fs/fuse/connections/" + str(os.minor(dev))):
        subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"],
                       capture_output=True)
    try:
        with open(ctl, "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """A real redis-server on loopback with persistence (so a restart keeps data)."""

    def __init__(self, workdir, password=None):
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = None
        self.password = password

    def start(self):
        if not os.path.exists("/usr/bin/redis-server"):
            raise AssertionError("redis-server is missing: apt-get install redis-server")
        self.proc = subprocess.Popen(
            ["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--protected-mode", "no"]
            + (["--requirepass", self.password] if self.password else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(64)
                    if reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    @property
    def uri(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)


class Mount:
    """`pacsetfs mount -f` in the background; always unmounted on exit."""

    def __init__(self, pacsetfs, store, mountpoint, options="", trace=None, extra=()):
        self.pacsetfs, self.store, self.mp = pacsetfs, store, mountpoint
        self.options, self.trace, self.extra = options, trace, list(extra)
        self.proc = None
        self.log = mountpoint.rstrip("/") + ".log"

    def __enter__(self):
        os.makedirs(self.mp, exist_ok=True)
        cmd = [self.pacsetfs, "mount", self.mp, "--store", self.store, "-f"] + self.extra
        if self.options:
            cmd += ["-o", self.options]
        if self.trace:
            cmd += ["--trace", self.trace]
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pacsetfs exited ({self.proc.returncode}): {self.read_log()}")
            if is_mounted(self.mp) and self._answers():
                return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise AssertionError(f"mount did not come up: {self.read_log()}")

    def _answers(self):
        # Reading stats needs the daemon (stat() can be answered from the
        # kernel's cache even when a previous daemon is dead).
        try:
            with open(os.path.join(self.mp, ".pacsetfs", "stats")) as f:
                return f.read(1) == "{"
        except OSError:
            return False

    def read_log(self, whole=False):
        try:
            with open(self.log, errors="replace") as f:
                text = f.read()
                return text if whole else text[-2000:]
        except OSError:
            return ""

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            try:
                subprocess.run(["fusermount3", "-u", self.mp], capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:  # a hung daemon: free its waiters
                abort_fuse_connection(self.mp)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                abort_fuse_connection(self.mp)
                self.proc.kill()
                self.proc.wait(timeout=10)
        if is_mounted(self.mp):
            subprocess.run(["umount", "-l", self.mp], capture_output=True)
        self.logf.close()
        # A sanitizer build's daemon reports races and memory errors on its
        # stderr: any report fails the test that ran it.
        log = self.read_log(whole=True)
        if "Sanitizer" in log:
            if exc[0] is None:
                raise AssertionError("the daemon's sanitizer reported:\n" + log[-6000:])
            print("the daemon's sanitizer reported:\n" + log[-6000:])
        return False

    def stats(self):
        import json
        with open(os.path.join(self.mp, ".pacsetfs", "stats")) as f:
            return json.load(f)

    def drop(self, name="*"):
        with open(os.path.join(self.mp, ".pacsetfs", "control"), "w") as f:
            f.write(f"drop {name}\n")


def read_trace(path):
    """Parses a trace (layout/../trace/FORMAT.md) independently of the C++ reader.
    Returns (names, events); events are dicts for block accesses and drops."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"PACTRACE", "not a trace"
    names, chunks, events = {}, {}, []
    body = data[64:]
    for i in range(len(body) // 48):
        r = body[i * 48:(i + 1) * 48]
        t = r[0]
        if t == 1:
            forest, = struct.unpack_from("<I", r, 4)
            total, = struct.unpack_from("<H", r, 2)
            idx, = struct.unpack_from("<I", r, 40)
            chunks.setdefault(forest, {})[idx] = r[8:40]
            name = b"".join(chunks[forest][k] for k in sorted(chunks[forest]))[:total]
            names[forest] = name.decode()
        elif t in (2, 6):
            forest, = struct.unpack_from("<I", r, 4)
            time_ns, gen, block = struct.unpack_from("<QQQ", r, 8)
            nbytes, pid, lat = struct.unpack_from("<III", r, 32)
            events.append({"type": "access" if t == 2 else "drop", "source": r[1],
                           "flags": struct.unpack_from("<H", r, 2)[0], "forest": forest,
                           "time": time_ns, "gen": gen, "block": block, "pid": pid})
    return names, events


def run_tests(tests, prepare, make_env, label, timeout, top_prefix):
    """Runs (name, fn) tests one by one, each in its own temp dir with a time
    limit; whatever happens, nothing under that dir stays mounted. Returns the
    exit status (1 if any test failed)."""
    import tempfile
    import traceback
    failures = 0
    with tempfile.TemporaryDirectory(prefix=top_prefix) as top:
        prepare(top)
        for name, fn in tests:
            tmp = tempfile.mkdtemp(prefix=name[:40] + "-", dir=top)
            env = make_env(tmp)
            signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError(name)))
            signal.alarm(timeout)
            t = time.time()
            try:
                fn(env)
                print(f"PASS {name} ({time.time() - t:.1f} s)")
            except BaseException as e:  # noqa: B902 - report everything, keep going
                failures += 1
                print(f"FAIL {name}: {e}")
                traceback.print_exc()
            finally:
                signal.alarm(0)
                if hasattr(env, "close"):
                    env.close()
                for m in mounts():
                    if m[1].startswith(tmp):
                        abort_fuse_connection(m[1])
                        subprocess.run(["umount", "-l", m[1]])
    print(f"{len(tests) - failures} of {len(tests)} {label} tests passed")
    return 1 if failures else 0


def main(module, prepare, make_env, label, prefix, tools=("pacset", "pacsetfs")):
    """The command line of a test suite: --TOOL PATH for each of `tools`, -k
    NAME, --timeout S. Runs the module's test_* functions through run_tests
    and returns the exit status; module.ARGS holds the parsed arguments."""
    import argparse
    ap = argparse.ArgumentParser()
    for tool in tools:
        ap.add_argument("--" + tool, required=True)
    ap.add_argument("-k", default="", help="run tests whose name contains this")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per test")
    module.ARGS = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("FAIL: these tests need root and /dev/fuse")
        return 1
    tests = [(n, f) for n, f in sorted(vars(module).items())
             if n.startswith("test_") and module.ARGS.k in n]
    return run_tests(tests, prepare, make_env, label, module.ARGS.timeout, prefix)
