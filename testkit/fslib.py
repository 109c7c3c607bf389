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


def resident_pages(path):
    """Whether each page of the file at `path` is in the page cache (mincore
    of a shared read-only mapping, which touches no page)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    if size == 0:
        return []
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap " + path)
        try:
            vec = ctypes.create_string_buffer((size + page - 1) // page)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore " + path)
            return [b & 1 == 1 for b in vec.raw]
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def evict_from_page_cache(path):
    """Writes the file back and drops its pages; True if none stays resident
    (on tmpfs they do)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return not any(resident_pages(path))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def die_with_parent():
    """preexec_fn: SIGKILL this child when the test process dies, however it dies."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Redis:
    """A real redis-server with persistence (so a restart keeps data), or
    without (`persist=False`: faster imports): on loopback, or on `host`
    inside network namespace `netns` (see TwoHosts). `extra` is appended to
    its command line; `password` sets requirepass."""

    def __init__(self, workdir, netns=None, host="127.0.0.1", port=None, extra=(), name="redis",
                 password=None, persist=True):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.netns, self.host = netns, host
        self.port = port or free_port()
        self.extra = list(extra)
        self.proc = None
        self.password = password
        self.persist = persist

    def start(self):
        if not os.path.exists("/usr/bin/redis-server"):
            raise AssertionError("redis-server is missing: apt-get install redis-server")
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.proc = subprocess.Popen(
            prefix + ["/usr/bin/redis-server", "--port", str(self.port), "--bind", self.host,
                      "--dir", self.dir, "--save", "", "--protected-mode", "no"]
            + (["--appendonly", "yes", "--appendfsync", "always"] if self.persist
               else ["--appendonly", "no"])
            + self.extra
            + (["--requirepass", self.password] if self.password else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.ping():
                return self
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def ping(self):
        if self.netns:  # reachable only from inside its namespace
            r = subprocess.run(["ip", "netns", "exec", self.netns, "redis-cli", "-h", self.host,
                                "-p", str(self.port), "ping"], capture_output=True, text=True)
            return r.stdout.strip() == "PONG"
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(16)
                return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
        except OSError:
            return False

    def cli(self, *args):
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        return run(prefix + ["redis-cli", "-h", self.host, "-p", str(self.port), *map(str, args)],
                   check=False).stdout.strip()

    @property
    def uri(self):
        return f"redis://{self.host}:{self.port}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)


class RedisCluster:
    """A real Redis Cluster on loopback: `masters` masters with `replicas`
    replicas each (redis-cli --cluster create), cluster bus on free ports."""

    def __init__(self, workdir, masters=3, replicas=1):
        import shutil
        for i in range(masters * (1 + replicas)):  # a new cluster, not an old one's state
            shutil.rmtree(os.path.join(workdir, f"node{i}"), ignore_errors=True)
        self.nodes = [Redis(workdir, name=f"node{i}", extra=[
            "--cluster-enabled", "yes", "--cluster-port", str(free_port()),
            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
            "--repl-diskless-sync-delay", "0"]) for i in range(masters * (1 + replicas))]
        self.replicas = replicas

    def start(self):
        for n in self.nodes:
            n.start()
        run(["redis-cli", "--cluster", "create"] + [f"127.0.0.1:{n.port}" for n in self.nodes] +
            ["--cluster-replicas", str(self.replicas), "--cluster-yes"])
        deadline = time.time() + 30
        while not self.healthy():
            if time.time() > deadline:
                raise AssertionError("the redis cluster did not become healthy")
            time.sleep(0.1)
        return self

    def healthy(self):
        for n in self.nodes:
            if n.proc is None:
                continue
            if "cluster_state:ok" not in n.cli("cluster", "info"):
                return False
            role = n.cli("role").split()
            if role and role[0] == "slave" and "connected" not in role:
                return False
        return True

    def master_of(self, key):
        """The node serving `key` now."""
        for n in self.nodes:
            if n.proc is not None and not n.cli("exists", key).startswith("MOVED") and \
                    n.cli("role").startswith("master"):
                return n
        return None

    @property
    def uri(self):
        return "redis-cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:3])

    def stop(self):
        for n in self.nodes:
            n.stop()


class Mount:
    """`pacsetfs mount -f` in the background; always unmounted on exit.

    With `netns` (see TwoHosts) the daemon runs on that "host": in its network
    namespace and in a private mount namespace (`ip netns exec`), so the mount
    exists only there and vanishes with the daemon. This process reaches it
    through /proc/PID/root (`view`); `run` runs a command on that host."""

    def __init__(self, pacsetfs, store, mountpoint, options="", trace=None, extra=(),
                 netns=None, preexec_fn=None, log=None, env=None):
        self.pacsetfs, self.store, self.mp = pacsetfs, store, mountpoint
        self.env = env  # the daemon's environment (None: this process's)
        self.options, self.trace, self.extra = options, trace, list(extra)
        self.netns, self.preexec_fn = netns, preexec_fn
        self.proc = None
        # Mounts of one path on several hosts need a log each.
        self.log = log or mountpoint.rstrip("/") + ".log"

    @property
    def view(self):
        """The mount point as this process sees it."""
        return f"/proc/{self.proc.pid}/root{self.mp}" if self.netns else self.mp

    def run(self, cmd, check=True, **kw):
        """Runs `cmd` where the mount is (on its host, for netns mounts)."""
        if self.netns:
            cmd = ["nsenter", "-t", str(self.proc.pid), "-m", "-n"] + list(cmd)
        return run(cmd, check=check, **kw)

    def __enter__(self):
        os.makedirs(self.mp, exist_ok=True)
        cmd = [self.pacsetfs, "mount", self.mp, "--store", self.store, "-f"] + self.extra
        if self.options:
            cmd += ["-o", self.options]
        if self.trace:
            cmd += ["--trace", self.trace]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd  # execs pacsetfs: same pid

        def preexec():
            if self.netns:
                die_with_parent()
            if self.preexec_fn:
                self.preexec_fn()
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     preexec_fn=preexec, env=self.env)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pacsetfs exited ({self.proc.returncode}): {self.read_log()}")
            if self._mounted() and self._answers():
                return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise AssertionError(f"mount did not come up: {self.read_log()}")

    def _mounted(self):
        if not self.netns:
            return is_mounted(self.mp)
        try:
            with open(f"/proc/{self.proc.pid}/mounts") as f:
                return any(line.split()[1] == self.mp for line in f)
        except OSError:
            return False

    def _answers(self):
        # Reading stats needs the daemon (stat() can be answered from the
        # kernel's cache even when a previous daemon is dead).
        try:
            with open(os.path.join(self.view, ".pacsetfs", "stats")) as f:
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
                self.run(["fusermount3", "-u", self.mp], check=False, timeout=20)
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
        with open(os.path.join(self.view, ".pacsetfs", "stats")) as f:
            return json.load(f)

    def drop(self, name="*"):
        with open(os.path.join(self.view, ".pacsetfs", "control"), "w") as f:
            f.write(f"drop {name}\n")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class TwoHosts:
    """Two "hosts" as network namespaces joined by a veth pair, with
    169.254.77.1 (host `a`) and 169.254.77.2 (host `b`) on the veth ends: both
    ends are created inside the namespaces, so nothing is added to the root
    namespace. Names carry this process's pid; close() kills every process
    left in them and deletes them, and remove_leftovers() does that for the
    namespaces of test processes that died without closing (killed)."""

    PREFIX = "pacset-test-"
    ADDRESS = {"a": "169.254.77.1", "b": "169.254.77.2"}

    def __init__(self):
        self.remove_leftovers()
        self.ns = {h: f"{self.PREFIX}{os.getpid()}-{h}" for h in ("a", "b")}
        try:
            for h in ("a", "b"):
                run(["ip", "netns", "add", self.ns[h]])
                run(["ip", "-n", self.ns[h], "link", "set", "lo", "up"])
            run(["ip", "-n", self.ns["a"], "link", "add", "veth0", "type", "veth", "peer", "name",
                 "veth0", "netns", self.ns["b"]])
            for h in ("a", "b"):
                run(["ip", "-n", self.ns[h], "addr", "add", self.ADDRESS[h] + "/24", "dev", "veth0"])
                run(["ip", "-n", self.ns[h], "link", "set", "veth0", "up"])
        except BaseException:
            self.close()
            raise

    def run(self, host, cmd, check=True):
        return run(["ip", "netns", "exec", self.ns[host]] + list(cmd), check=check)

    @classmethod
    def _delete(cls, name):
        pids = run(["ip", "netns", "pids", name], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        deadline = time.time() + 10
        while pids and time.time() < deadline:
            pids = run(["ip", "netns", "pids", name], check=False).stdout.split()
            time.sleep(0.05)
        run(["ip", "netns", "del", name], check=False)

    def close(self):
        for name in getattr(self, "ns", {}).values():
            self._delete(name)

    @classmethod
    def remove_leftovers(cls):
        for line in run(["ip", "netns", "list"], check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if not name.startswith(cls.PREFIX):
                continue
            owner = name[len(cls.PREFIX):].split("-")[0]
            if owner.isdigit() and not _pid_alive(int(owner)):
                cls._delete(name)


class MemoryCgroup:
    """A memory cgroup with a hard limit and no swap: cgroup v2 where
    /sys/fs/cgroup is the unified hierarchy with the memory controller, else
    v1 at /sys/fs/cgroup/memory. Processes join it with `enter` as a
    preexec_fn. close() kills what is left in it and removes it; names carry
    this process's pid, so remove_leftovers() removes those of dead test
    processes."""

    PREFIX = "pacset-test-"

    def __init__(self, label, limit_bytes):
        self.v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        self.root = "/sys/fs/cgroup" if self.v2 else "/sys/fs/cgroup/memory"
        if self.v2:
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "memory" not in f.read().split():
                    raise AssertionError("cgroup v2 without the memory controller")
        elif not os.path.isdir(self.root):
            raise AssertionError("no memory cgroup controller (v1 or v2) is mounted")
        self.remove_leftovers()
        self.path = os.path.join(self.root, f"{self.PREFIX}{os.getpid()}-{label}")
        os.mkdir(self.path)
        if self.v2:
            self._write("memory.max", limit_bytes)
            self._write("memory.swap.max", 0)
        else:
            self._write("memory.limit_in_bytes", limit_bytes)
            # No swap: swappiness 0 (a memory+swap limit equal to the memory
            # limit would also do, but then the kernel counts no failures).
            self._write("memory.swappiness", 0)
        self.limit = limit_bytes

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(f"{value}\n")

    def _read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def enter(self):
        """preexec_fn: moves the new process into this cgroup."""
        self._write("cgroup.procs", os.getpid())

    def times_limit_hit(self):
        if self.v2:
            events = dict(line.split() for line in self._read("memory.events").splitlines())
            return int(events.get("max", 0))
        return int(self._read("memory.failcnt"))

    def peak(self):
        return int(self._read("memory.peak" if self.v2 else "memory.max_usage_in_bytes"))

    @staticmethod
    def _remove(path):
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.05)

    def close(self):
        self._remove(self.path)

    @classmethod
    def remove_leftovers(cls):
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory"):
            if not os.path.isdir(root):
                continue
            for name in os.listdir(root):
                owner = name[len(cls.PREFIX):].split("-")[0]
                if name.startswith(cls.PREFIX) and owner.isdigit() and not _pid_alive(int(owner)):
                    cls._remove(os.path.join(root, name))


class RssSampler:
    """Samples a process's RssAnon (heap and stacks: its own memory, not the
    files it maps) every 10 ms in a thread; `peak_anon` and the kernel's
    VmHWM (peak RSS, mapped files included) in bytes."""

    def __init__(self, pid):
        import threading
        self.pid, self.peak_anon, self.hwm = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key == "RssAnon":
                        self.peak_anon = max(self.peak_anon, int(value.split()[0]) * 1024)
                    elif key == "VmHWM":
                        self.hwm = int(value.split()[0]) * 1024
        except OSError:
            pass

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.01)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        return self


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


class Env:
    """Per test: a temp dir and what must be removed whatever happens
    (closed, or stopped, in the reverse order of `add`)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.closers = []

    def add(self, thing):
        self.closers.append(thing)
        return thing

    def close(self):
        for thing in reversed(self.closers):
            try:
                (thing.close if hasattr(thing, "close") else thing.stop)()
            except Exception as e:  # noqa: BLE001 - clean up the rest regardless
                print(f"    cleanup of {type(thing).__name__} failed: {e}")


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


def main(module, prepare, make_env, label, prefix, tools=("pacset", "pacsetfs"), timeout=180):
    """The command line of a test suite: --TOOL PATH for each of `tools` (made
    absolute), -k NAME, --timeout S (default `timeout`). Runs the module's
    test_* functions through run_tests and returns the exit status;
    module.ARGS holds the parsed arguments."""
    import argparse
    ap = argparse.ArgumentParser()
    for tool in tools:
        ap.add_argument("--" + tool, required=True)
    ap.add_argument("-k", default="", help="run tests whose name contains this")
    ap.add_argument("--timeout", type=int, default=timeout, help="seconds per test")
    module.ARGS = ap.parse_args()
    for dest in (tool.replace("-", "_") for tool in tools):
        setattr(module.ARGS, dest, os.path.abspath(getattr(module.ARGS, dest)))
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("FAIL: these tests need root and /dev/fuse")
        return 1
    tests = [(n, f) for n, f in sorted(vars(module).items())
             if n.startswith("test_") and module.ARGS.k in n]
    return run_tests(tests, prepare, make_env, label, module.ARGS.timeout, prefix)

