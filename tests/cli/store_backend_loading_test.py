#!/usr/bin/python3
"""Store backends are loaded only when a command opens such a store
(store/internal/backend_plugin.h), end to end with the real CLI.

- `pacset predict FILE.pac` and a dir: store map no RocksDB, no hiredis and
  no backend plugin: the test reads /proc/PID/maps of a live `--input -`
  process after it has answered a row.
- `pacset predict --store rocksdb:...` maps the rocksdb plugin and
  librocksdb (and no hiredis): the same check sees a loaded backend, so it
  can fail; its answers equal the local file's.
- `pacset predict --store redis://...` (a real redis-server on a free
  loopback port) maps the redis plugin and hiredis (and no RocksDB), and,
  where the build links the C++ runtime into the programs and the redis
  plugin (--redis-plugin-runtime static), no libstdc++.so: loading a second
  runtime was most of such a process's open.
- Neither `pacset` nor `pacsetfs` names RocksDB or hiredis among the
  libraries it needs (readelf -d).
- A daemon over a dir: store maps no backend; over a rocksdb: store, one
  with RocksDB built in (--pacsetfs-rocksdb builtin, CMake's
  PACSET_BUILTIN_ROCKSDB) maps neither the plugin nor librocksdb.so, even as
  a copy with no plugin directory beside it, and one without (plugin: the
  sanitizer builds) maps the plugin; the forest file each serves equals the
  .pac byte for byte.
- A copy of `pacset` whose plugin directory (../lib/pacset next to it) lacks
  the plugin, or holds another plugin under its name, refuses a rocksdb:
  store with an error naming the file, and still predicts from a file.

usage: store_backend_loading_test.py --pacset PATH --pacsetfs PATH
                                    --pacsetfs-rocksdb {builtin,plugin}
                                    --redis-plugin-runtime {static,shared}
"""
import argparse
import glob
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
from fslib import Mount, Redis  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "lightgbm")
MODEL = os.path.join(DATA, "binary.txt")  # LightGBM, 2 features
ROW = "0.5,1.5"
BACKENDS = {"rocksdb": re.compile(r"librocksdb|store-rocksdb\.so"),
            "hiredis": re.compile(r"libhiredis|store-redis\.so")}


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}"
    return r.stdout


def mapped_after_one_row(argv):
    """(answer, the files mapped by the process) once it has answered ROW."""
    p = subprocess.Popen(argv + ["--input", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        p.stdin.write(ROW + "\n")
        p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], 60)
        assert ready, f"{' '.join(argv)}: no answer within 60 s"
        answer = p.stdout.readline().rstrip("\n")
        with open(f"/proc/{p.pid}/maps") as f:
            files = {line.split()[-1] for line in f if len(line.split()) >= 6}
        _, err = p.communicate(timeout=60)  # closes standard input: the end
        assert p.returncode == 0, f"{' '.join(argv)}: exit {p.returncode}: {err.strip()}"
        return answer, files
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def loaded(files):
    return {name for name, pattern in BACKENDS.items() if any(pattern.search(f) for f in files)}


def needed(binary):
    out = run(["readelf", "-d", binary])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def plugin_dir_of(pacset):
    """The directory the build put the plugins in (lib/.../pacset beside tools/)."""
    found = glob.glob(os.path.join(os.path.dirname(os.path.abspath(pacset)), "..", "lib", "**",
                                   "store-rocksdb.so"), recursive=True)
    assert found, f"no store-rocksdb.so in the build tree of {pacset}"
    return os.path.dirname(found[0])


def refused(pacset, store, pac, expect_message, expect):
    r = subprocess.run([pacset, "import", pac, "--name", "m", "--store", store],
                       capture_output=True, text=True, timeout=120)
    expect(r.returncode == 1 and expect_message in r.stderr,
           f"{pacset} import --store rocksdb: exits {r.returncode}: {r.stderr.strip()!r}")
    ok = subprocess.run([pacset, "predict", pac, "--input", "-"], input=ROW + "\n",
                        capture_output=True, text=True, timeout=120)
    expect(ok.returncode == 0 and ok.stdout.strip() != "",
           f"{pacset} still predicts from a file: {ok.returncode} {ok.stderr.strip()!r}")


def check_redis(pacset, static_runtime, pac, want, work, expect):
    """A forest in a real redis-server: the backend the process maps, and the
    C++ runtime (the program's and the plugin's own, linked in)."""
    redis = Redis(work, persist=False).start()
    try:
        run([pacset, "import", pac, "--name", "m", "--store", redis.uri])
        answer, files = mapped_after_one_row([pacset, "predict", "m", "--store", redis.uri])
    finally:
        redis.stop()
    expect(answer == want, f"predict --store redis://: answered {answer!r} (the .pac: {want!r})")
    got = loaded(files)
    expect(got == {"hiredis"}, f"predict --store redis://: loaded backends {sorted(got)}, "
           "expected ['hiredis']")
    runtimes = sorted(f for f in files if re.search(r"/libstdc\+\+\.so", f))
    if static_runtime:
        expect(not runtimes, f"predict --store redis:// maps {runtimes or 'no libstdc++.so'}: "
               "the program and the redis plugin have the C++ runtime linked in")


def check_missing_and_wrong_plugins(pacset, pac, work, expect):
    build_plugins = plugin_dir_of(pacset)
    rel = os.path.relpath(build_plugins, os.path.dirname(os.path.abspath(pacset)))
    copy_bin = os.path.join(work, "copy", "bin")
    os.makedirs(copy_bin)
    copy = shutil.copy(pacset, copy_bin)
    plugins = os.path.join(copy_bin, rel)  # as the loader spells it: BIN/../lib/...
    os.makedirs(plugins)
    store = "rocksdb:" + os.path.join(work, "copy-store")
    # A fallback install directory of the plugins would be found instead.
    installed = (glob.glob("/usr/lib/*/pacset/store-rocksdb.so") +
                 glob.glob("/usr/local/lib/pacset/store-rocksdb.so") +
                 glob.glob("/usr/local/lib/*/pacset/store-rocksdb.so"))
    if not installed:
        refused(copy, store, pac, f"looked for {plugins}/store-rocksdb.so", expect)
    else:
        print(f"skip: the missing plugin ({installed[0]} is installed)")
    shutil.copy(os.path.join(build_plugins, "store-redis.so"),
                os.path.join(plugins, "store-rocksdb.so"))
    refused(copy, store, pac, f"{plugins}/store-rocksdb.so is not the rocksdb plugin", expect)


def check_daemons(pacsetfs, builtin, stores, pac, work, expect):
    """A daemon over each store: the backends it maps, and its forest file."""
    with open(pac, "rb") as f:
        want = f.read()
    # Built in, a copy of the program with no plugin directory beside it must
    # still serve a rocksdb: store.
    copy_bin = os.path.join(work, "daemon-copy", "bin")
    os.makedirs(copy_bin)
    copy = shutil.copy(pacsetfs, copy_bin)
    cases = [("dir:", pacsetfs, stores["dir"], set()),
             ("rocksdb:, built in" if builtin else "rocksdb:, the plugin",
              copy if builtin else pacsetfs, stores["rocksdb"], set() if builtin else {"rocksdb"})]
    for i, (name, program, store, backends) in enumerate(cases):
        with Mount(program, store, os.path.join(work, f"mnt{i}")) as m:
            with open(os.path.join(m.mp, "m.pac"), "rb") as f:
                served = f.read()
            with open(f"/proc/{m.proc.pid}/maps") as f:
                files = {line.split()[-1] for line in f if len(line.split()) >= 6}
        expect(served == want, f"daemon over {name}: serves the .pac's {len(want)} bytes "
               f"({len(served)} read, {'equal' if served == want else 'different'})")
        got = loaded(files)
        expect(got == backends, f"daemon over {name}: loaded backends {sorted(got)}, "
               f"expected {sorted(backends)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--pacsetfs", required=True)
    ap.add_argument("--pacsetfs-rocksdb", required=True, choices=("builtin", "plugin"))
    ap.add_argument("--redis-plugin-runtime", required=True, choices=("static", "shared"))
    args = ap.parse_args()
    failures = []

    def expect(ok, message):
        print(("ok: " if ok else "FAIL: ") + message)
        if not ok:
            failures.append(message)

    for binary in (args.pacset, args.pacsetfs):
        libs = needed(binary)
        bad = [lib for lib in libs if BACKENDS["rocksdb"].search(lib) or
               BACKENDS["hiredis"].search(lib)]
        expect(libs and not bad, f"{os.path.basename(binary)} needs {libs}: no store backend")

    with tempfile.TemporaryDirectory(prefix="backend-loading-") as work:
        pac = os.path.join(work, "m.pac")
        run([args.pacset, "pack", MODEL, "-o", pac, "--block-size", "4096"])
        dir_store = "dir:" + os.path.join(work, "dir")
        rocksdb_store = "rocksdb:" + os.path.join(work, "rocksdb")
        for store in (dir_store, rocksdb_store):
            run([args.pacset, "import", pac, "--name", "m", "--store", store])
        want, _ = mapped_after_one_row([args.pacset, "predict", pac])
        cases = [
            ("predict FILE.pac", [args.pacset, "predict", pac], set()),
            ("predict MODEL (packed in memory)", [args.pacset, "predict", MODEL], set()),
            ("predict --store dir:", [args.pacset, "predict", "m", "--store", dir_store], set()),
            ("predict --store rocksdb:", [args.pacset, "predict", "m", "--store", rocksdb_store],
             {"rocksdb"}),
        ]
        for name, argv, backends in cases:
            answer, files = mapped_after_one_row(argv)
            expect(answer == want, f"{name}: answered {answer!r} (the .pac: {want!r})")
            got = loaded(files)
            expect(got == backends, f"{name}: loaded backends {sorted(got)}, "
                   f"expected {sorted(backends)}")
        check_redis(args.pacset, args.redis_plugin_runtime == "static", pac, want, work, expect)
        check_missing_and_wrong_plugins(args.pacset, pac, work, expect)
        check_daemons(args.pacsetfs, args.pacsetfs_rocksdb == "builtin",
                      {"dir": dir_store, "rocksdb": rocksdb_store}, pac, work, expect)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
