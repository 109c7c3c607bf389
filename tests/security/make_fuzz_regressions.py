#!/usr/bin/python3
"""Writes the crafted .pac files of issue 31 that fuzz/regression/pac_structure/
holds (checked in; this records how they were made).

usage: make_fuzz_regressions.py PACSET CORPUS OUT_DIR

PACSET is a pacset binary, CORPUS scripts/fuzz.sh's corpus directory
(build-fuzz/corpus: sklearn_json/rf.json and xgboost_json/multi.json, the
three-class models it trains). The models are packed with 256-byte blocks
as format version 2, which pacset 0.1 and the readers before issue 31's
fixes read too, then edited with pac_craft.py (every checksum made valid
again), so each file reaches the rule it breaks.
"""
import os
import subprocess
import sys
import tempfile

import pac_craft

INLINE_ONE = 0x3F800000  # the float32 1.0 as an inline value
KIND_NODE, KIND_INLINE_VALUE = 0, 2


def pack(pacset, model, *extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.pac")
        subprocess.run([pacset, "pack", model, "-o", out, "--block-size", "256",
                        "--format-version", "2", *extra], check=True, stdout=subprocess.DEVNULL)
        return pac_craft.Pac.load(out)


def main(pacset, corpus, out):
    rf = os.path.join(corpus, "sklearn_json", "rf.json")  # 3 classes: leaf width 3
    xgb = os.path.join(corpus, "xgboost_json", "multi.json")  # 3 groups: leaf width 1
    files = {}
    # An inline value at tree 0's root adds to acc[group]: every group is
    # checked against the outputs whatever the leaf width.
    for group in (0x7FFFFFFF, 0xFFFFFFFF, 5, 3, 4096):
        p = pack(pacset, rf)
        p.set_tree(0, root=INLINE_ONE, group=group, kind=KIND_INLINE_VALUE)
        label = f"{group:x}" if group > 0xFFFF else str(group)
        files[f"rf3-tree0-inline-root-group-{label}.pac"] = p
    # Scalar leaves (inline values: XGBoost's are float32) under a header
    # that claims leaf width 3: tree groups were only checked for width 1.
    p = pack(pacset, xgb)
    p.hset("I", 52, 3)
    p.set_tree(0, group=64)
    files["xgb3-leaf-width-3-tree0-group-64.pac"] = p
    # Tree 1's root is tree 0's: every reference in bounds, a node reached twice.
    p = pack(pacset, xgb)
    root, _, kind = p.tree(0)
    assert kind == KIND_NODE
    p.set_tree(1, root=root)
    files["xgb3-tree1-root-is-tree0-root.pac"] = p
    # One internal node more than the trees hold.
    p = pack(pacset, xgb)
    p.hset("Q", 64, p.hget("Q", 64) + 1)
    files["xgb3-num-nodes-one-too-many.pac"] = p
    # No node region at all, wide nodes.
    p = pack(pacset, rf, "--wide-nodes")
    p.hset("Q", 104, 0)
    files["rf3-wide-node-block-count-0.pac"] = p
    os.makedirs(out, exist_ok=True)
    for name, p in files.items():
        p.reseal().save(os.path.join(out, name))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
