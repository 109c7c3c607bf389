#!/usr/bin/python3
"""The crafted forests of issue 31, through the command line as a user runs it.

Each file is a small model packed by `pacset pack` with one field edited and
every checksum made valid again (pac_craft.py): a 3-class random forest (leaf
width 3) whose tree 0 ends on an inline value added to group 0x7FFFFFFF,
0xFFFFFFFF, 5, 4096 or 3 (= the output count); a 3-class gradient-boosted
forest (leaf width 1) whose header claims leaf width 3 with tree 0 in group
64 or 10^6; and their kin with wide nodes and 256-byte blocks. On the code
before the fix these crashed `pacset predict` (SIGSEGV), wrote past a heap
block or silently changed the margins, and `pacset import` accepted them.

Now `pacset predict` (with --margin and --leaf), `pacset import` (dir: and
rocksdb: stores) and `pacset verify --file` each exit 1 with an error naming
what is wrong (tree 0's group) and print no prediction; nothing is
published. Run with a pacset built
with AddressSanitizer (scripts/test.sh does), a memory error fails the run too.

usage: hostile_pac_test.py --pacset PATH
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pac_craft  # noqa: E402

EXPORTER = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "pacset-sklearn-export")

failures = []
checks = 0


def expect(ok, message):
    global checks
    checks += 1
    if not ok:
        failures.append(message)
        print("FAIL:", message)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def models(work):
    """(name, model path): a 3-class random forest and gradient boosting."""
    import joblib
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    rng = np.random.default_rng(31)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.3)
    np.savetxt(os.path.join(work, "rows.csv"), X[:20], delimiter=",", fmt="%.9g")
    out = []
    for name, est in [("rf3", RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0)),
                      ("gb3", GradientBoostingClassifier(n_estimators=3, max_depth=3,
                                                         random_state=0))]:
        est.fit(X, y)
        pkl = os.path.join(work, name + ".joblib")
        joblib.dump(est, pkl)
        js = os.path.join(work, name + ".json")
        r = run([sys.executable, EXPORTER, pkl, "-o", js])
        if r.returncode != 0:
            raise SystemExit(f"export {name}: {r.stderr}")
        out.append((name, js))
    return out


def crafted(pacset, work, name, model):
    """(label, path) of every crafted file made from `model`."""
    files = []
    for shape, flags in [("4k", ["--block-size", "4KiB"]),
                         ("4k-wide", ["--block-size", "4KiB", "--wide-nodes"]),
                         ("256", ["--block-size", "256"])]:
        pac = os.path.join(work, f"{name}-{shape}.pac")
        r = run([pacset, "pack", model, "-o", pac, *flags])
        if r.returncode != 0:
            raise SystemExit(f"pack {name}: {r.stderr}")
        base = pac_craft.Pac.load(pac)
        leaf_width = base.hget("I", 52)
        edits = []
        if leaf_width > 1:  # the random forest
            for group in (0x7FFFFFFF, 0xFFFFFFFF, 4096, 5, 3):
                edits.append((f"inline root, group {group:#x}",
                              lambda p, g=group: p.set_tree(0, kind=2, root=0x3F800000, group=g),
                              [f"tree 0 has output group {group}"]))
            root, _, kind = base.tree(0)
            if kind == 0:  # a root's left child made an inline value, group 5
                def child_inline(p, root=root):
                    t, f, fl, left, right = p.node(root)
                    p.set_node(root, flags=(fl & ~(3 << 3)) | (2 << 3), left=0x3F800000)
                    p.set_tree(0, group=5)
                edits.append(("left child inline, group 5", child_inline,
                              ["tree 0 has output group 5"]))
        else:  # gradient boosting: claim leaf width 3 and move tree 0's group
            # Refused for the group, or before it for leaf records that no
            # longer fit the node region at the wider width.
            for group in (64, 10 ** 6):
                edits.append((f"leaf width 3, group {group}",
                              lambda p, g=group: (p.hset("I", 52, 3), p.set_tree(0, group=g)),
                              [f"tree 0 has output group {group}",
                               "leaf records do not fit the node region"]))
        for label, edit, messages in edits:
            p = pac_craft.Pac.load(pac)
            edit(p)
            path = os.path.join(work, f"{name}-{shape}-{len(files)}.pac")
            p.reseal().save(path)
            files.append((f"{name} {shape}: {label}", path, messages))
    return files


def refused(r, label, what, messages):
    """Exit 1 with an error saying what is wrong; no sanitizer report."""
    expect(r.returncode == 1, f"{label}: {what} exited {r.returncode} (want 1): "
                              f"{r.stderr.strip()[-300:]}")
    expect("Sanitizer" not in r.stderr, f"{label}: {what}: {r.stderr[-2000:]}")
    expect(any(m in r.stderr for m in messages),
           f"{label}: {what} did not say {messages}: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pacset-hostile-") as work:
        rows = os.path.join(work, "rows.csv")
        files = []
        for name, model in models(work):
            files += crafted(args.pacset, work, name, model)
        expect(len(files) >= 20, f"only {len(files)} crafted files")
        stores = {"dir": "dir:" + os.path.join(work, "dir-store"),
                  "rocksdb": "rocksdb:" + os.path.join(work, "rocks")}
        for i, (label, path, messages) in enumerate(files):
            for extra in ([], ["--margin"], ["--leaf"]):
                r = run([args.pacset, "predict", path, "--input", rows, *extra])
                refused(r, label, "predict " + " ".join(extra), messages)
                expect(r.stdout == "", f"{label}: predict printed {r.stdout[:200]!r}")
            refused(run([args.pacset, "verify", "--file", path]), label, "verify --file", messages)
            for kind, uri in stores.items():
                r = run([args.pacset, "import", path, "--name", f"h{i}", "--store", uri])
                refused(r, label, f"import into {kind}", messages)
        # Nothing was published.
        for kind, uri in stores.items():
            r = run([args.pacset, "ls", "--store", uri])
            published = [line for line in r.stdout.splitlines()[1:] if line.strip()]
            expect(published == [], f"{kind} store holds {published}")
    print(f"hostile_pac_test: {checks} checks, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
