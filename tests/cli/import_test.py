#!/usr/bin/python3
"""`pacset import` end to end on real stores (issue 13 items 7, 13 and 14).

- Concurrent imports into one RocksDB store: each one succeeds or says that
  the store is busy; none fails with a raw RocksDB error (the info-LOG
  rotation race gave "IO error ... LOG.old" in 3 of 44 imports).
- The success line reports the generation this import published (its block
  count and size), also when other writers publish the same name at once
  (dir: stores admit concurrent writers).
- A 40 KB UBJSON document of nested arrays is refused with a message, not a
  stack overflow (exit 139).
- pacset-sklearn-export -o replaces a symlink planted at its output instead
  of writing through it (issue 13 item 5's sibling).

usage: import_test.py --pacset PATH
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "lightgbm")
MODELS = ["binary.txt", "multiclass.txt", "random_forest.txt", "regression.txt",
          "missing_types.txt", "single_leaf.txt"]
LINE = re.compile(r"^imported (\S+) as '([^']+)' generation (\d+): (\d+) blocks of (.+) \((.+)\)$")

failures = []


def expect(ok, message):
    if not ok:
        failures.append(message)
        print("FAIL:", message)


def run(cmd, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def human(b):
    """FormatByteSize (util/size.h), as `pacset import` prints sizes."""
    if b >= 1 << 30:
        return f"{b / (1 << 30):.2f} GiB"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.2f} MiB"
    if b >= 1024:
        return f"{b / 1024:.1f} KiB"
    return f"{b} B"


def concurrent_rocksdb_imports(pacset, work):
    """Rounds of 12 simultaneous imports into one RocksDB store."""
    store = "rocksdb:" + os.path.join(work, "rocks")
    jobs = []
    for rnd in range(4):
        jobs.append([(f"{m}", f"r{rnd}-{i}") for i, m in enumerate(MODELS * 2)])
    outcomes = {"ok": 0, "busy": 0}
    published = set()
    for batch in jobs:
        with concurrent.futures.ThreadPoolExecutor(len(batch)) as pool:
            results = list(pool.map(
                lambda job: (job, run([pacset, "import", os.path.join(DATA, job[0]), "--name",
                                       job[1], "--store", store, "--block-size", "4KiB"])),
                batch))
        batch_ok = sum(1 for _, r in results if r.returncode == 0)
        # The writer holding the lock always finishes: a round in which every
        # import says "busy" would mean none of them could write at all.
        expect(batch_ok >= 1, f"no import of a round of {len(batch)} succeeded: "
                              f"{[r.stderr.strip() for _, r in results][:2]}")
        for (model, name), r in results:
            if r.returncode == 0:
                outcomes["ok"] += 1
                published.add(name)
                expect(LINE.match(r.stdout.strip().splitlines()[-1]) is not None,
                       f"import {name}: unexpected success line {r.stdout!r}")
            elif "is busy" in r.stderr:
                outcomes["busy"] += 1
            else:
                expect(False, f"import {model} as {name} failed with neither success nor 'busy' "
                              f"(exit {r.returncode}): {r.stderr.strip()}")
            expect("LOG.old" not in r.stderr, f"import {name}: raw RocksDB error {r.stderr!r}")
    print(f"concurrent rocksdb imports: {outcomes['ok']} succeeded, {outcomes['busy']} busy, "
          f"{len(failures)} other failures")
    ls = run([pacset, "ls", "--json", "--store", store])
    expect(ls.returncode == 0, f"pacset ls: {ls.stderr}")
    if ls.returncode == 0:
        names = {f["name"] for f in json.loads(ls.stdout)}
        expect(names == published, f"store lists {sorted(names ^ published)} differently from "
                                   f"the imports that reported success")
    v = run([pacset, "verify", "--store", store])
    expect(v.returncode == 0, f"pacset verify after concurrent imports: {v.stdout} {v.stderr}")


def concurrent_first_imports_create_the_store_once(pacset, work):
    """Eight first imports into a store that does not exist yet: the store is
    created once and none of them finds it half made ("not empty and not a
    ... store")."""
    for rnd in range(4):
        for kind in ("rocksdb", "dir"):
            store = f"{kind}:" + os.path.join(work, f"fresh-{kind}-{rnd}")
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                results = list(pool.map(
                    lambda i: run([pacset, "import", os.path.join(DATA, MODELS[i % len(MODELS)]),
                                   "--name", f"m{i}", "--store", store, "--block-size", "4KiB"]),
                    range(8)))
            expect(any(r.returncode == 0 for r in results),
                   f"no first import into a new {kind} store succeeded")
            for i, r in enumerate(results):
                expect(r.returncode == 0 or "is busy" in r.stderr,
                       f"first import {i} into a new {kind} store: exit {r.returncode}: "
                       f"{r.stderr.strip()}")


def success_line_reports_own_generation(pacset, work):
    """Many writers of one name in a dir: store at once; each line describes its own file."""
    store = "dir:" + os.path.join(work, "dirstore")
    # Expected size of each model's .pac, packed with the same options.
    expected = {}
    for i, m in enumerate(MODELS):
        bs = "4KiB" if i % 2 else "8KiB"
        pac = os.path.join(work, f"{m}.pac")
        r = run([pacset, "pack", os.path.join(DATA, m), "-o", pac, "--block-size", bs])
        expect(r.returncode == 0, f"pack {m}: {r.stderr}")
        expected[m] = (bs, os.path.getsize(pac))
    jobs = [MODELS[i % len(MODELS)] for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(
            lambda m: (m, run([pacset, "import", os.path.join(DATA, m), "--name", "shared",
                               "--store", store, "--block-size", expected[m][0]])), jobs))
    gens = []
    for m, r in results:
        if r.returncode != 0:
            # A writer that loses a publish race is told to import again.
            expect("import again" in r.stderr or "busy" in r.stderr,
                   f"import {m}: exit {r.returncode}: {r.stderr.strip()}")
            continue
        match = LINE.match(r.stdout.strip().splitlines()[-1])
        expect(match is not None, f"import {m}: unexpected line {r.stdout!r}")
        if not match:
            continue
        bs, size = expected[m]
        block_bytes = 4096 if bs == "4KiB" else 8192
        got = (int(match.group(4)), match.group(5), match.group(6))
        want = (size // block_bytes, human(block_bytes), human(size))
        expect(got == want, f"import {m} generation {match.group(3)}: line says {got}, "
                            f"its file is {want}")
        gens.append(int(match.group(3)))
    expect(len(gens) == len(set(gens)), f"generations reported twice: {sorted(gens)}")
    print(f"success lines: {len(gens)} imports, each reporting its own generation's size")


def deep_ubjson_is_refused(pacset, work):
    path = os.path.join(work, "deep.ubj")
    with open(path, "wb") as f:
        f.write(b"{i\x01a" + b"[" * 40000)
    for cmd in (["pack", path, "-o", os.path.join(work, "deep.pac")],
                ["import", path, "--name", "deep", "--store", "dir:" + os.path.join(work, "d2")]):
        r = run([pacset, *cmd])
        expect(r.returncode == 1 and "nested deeper than 128 levels" in r.stderr,
               f"pacset {cmd[0]} of a deeply nested UBJSON file: exit {r.returncode}, "
               f"stderr {r.stderr.strip()[:300]!r}")


def exporter_replaces_a_symlinked_output(work):
    """pacset-sklearn-export -o opened the path with open(..., "w"), following
    a symlink planted there into a victim file."""
    import joblib
    import numpy as np
    from sklearn.tree import DecisionTreeRegressor
    model = os.path.join(work, "tree.joblib")
    X = np.arange(20.0).reshape(10, 2)
    joblib.dump(DecisionTreeRegressor(max_depth=2).fit(X, X[:, 0]), model)
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    out = os.path.join(work, "exported.json")
    os.symlink(victim, out)
    exporter = os.path.join(os.path.dirname(DATA), "..", "..", "tools", "pacset-sklearn-export")
    r = run([sys.executable, exporter, model, "-o", out])
    expect(r.returncode == 0, f"pacset-sklearn-export: {r.stderr.strip()}")
    with open(victim) as f:
        expect(f.read() == "precious\n", "pacset-sklearn-export wrote through a symlink")
    expect(not os.path.islink(out) and json.load(open(out))["format"] == "pacset-sklearn",
           "pacset-sklearn-export did not replace the symlink with its output")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pacset-import-test-") as work:
        deep_ubjson_is_refused(args.pacset, work)
        concurrent_rocksdb_imports(args.pacset, work)
        concurrent_first_imports_create_the_store_once(args.pacset, work)
        success_line_reports_own_generation(args.pacset, work)
        exporter_replaces_a_symlinked_output(work)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("import_test: all checks passed")


if __name__ == "__main__":
    main()
