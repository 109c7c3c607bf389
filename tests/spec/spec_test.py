#!/usr/bin/python3
"""layout/FORMAT.md is the contract: an independent reader written from it
alone (tests/spec/pac_reader.py) must agree with `pacset predict` bit for bit.

Packs XGBoost models (Debian's python3-xgboost), scikit-learn models
(python3-sklearn, through pacset-sklearn-export) and the LightGBM fixtures
(tests/data/lightgbm) into .pac files (compact and wide nodes, several block
sizes and layouts) and compares, on adversarial rows, the reader's margins,
outputs and leaf ids with `pacset predict --margin`, `pacset predict` and
`pacset predict --leaf`: float32 results by their bits, float64 results by
their bits (NaN equals NaN). The rows put values exactly on every threshold
of the file and on their float32 and float64 neighbours, around LightGBM's
zero band (+-1e-35f), and use NaN, +-0, +-inf, values float32 cannot hold and
a decimal that rounds differently through float64 (FORMAT.md section 6).

usage: spec_test.py --pacset PATH [--keep DIR]
"""
import argparse
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "security"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "exact"))
import exactlib  # noqa: E402
import pac_craft  # noqa: E402
import pac_reader  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
LIGHTGBM = os.path.join(ROOT, "tests", "data", "lightgbm")
# Files written by pacset 0.1 (format versions 1 and 2): still read, exactly.
OLD_FILES = os.path.join(ROOT, "tests", "data", "pac")
EXPORTER = os.path.join(ROOT, "tools", "pacset-sklearn-export")
# Not a float32 midpoint, but its nearest float64 is one (FORMAT.md section 6).
DOUBLE_ROUNDING = "1.0000000596046448"

failures = []
checks = 0


def expect(ok, message):
    global checks
    checks += 1
    if not ok:
        failures.append(message)
        print("FAIL:", message)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def train_xgboost(work, rng):
    import xgboost as xgb
    n, d = 400, 5
    X = rng.normal(size=(n, d)) * np.array([1, 10, 1e-3, 1e3, 1])
    X[:, 4] = np.round(X[:, 4])
    X[rng.random(size=X.shape) < 0.1] = np.nan
    x0, x3 = np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 3])
    y_bin = (x0 + x3 / 1e3 > 0).astype(int)
    y_multi = np.digitize(x0, [-1, 0, 1])
    y_reg = 2 * x0 + rng.normal(size=n)
    y_count = rng.poisson(np.exp(np.clip(x0, -2, 2)))
    specs = [
        ("xgb-binary", {"objective": "binary:logistic", "max_depth": 4, "base_score": 0.3}, y_bin, 8),
        ("xgb-softprob", {"objective": "multi:softprob", "num_class": 4, "max_depth": 3}, y_multi, 4),
        ("xgb-softmax", {"objective": "multi:softmax", "num_class": 4, "max_depth": 3}, y_multi, 4),
        ("xgb-reg", {"objective": "reg:squarederror", "max_depth": 5}, y_reg, 8),
        ("xgb-poisson", {"objective": "count:poisson", "max_depth": 3}, y_count, 6),
        ("xgb-rf", {"objective": "binary:logistic", "num_parallel_tree": 4, "subsample": 0.7,
                    "eta": 1.0, "max_depth": 5}, y_bin, 1),
    ]
    out = []
    for name, params, y, rounds in specs:
        b = xgb.train(dict(params, seed=3, nthread=1), xgb.DMatrix(X, label=y), rounds)
        path = os.path.join(work, name + ".json")
        b.save_model(path)
        out.append((name, path))
    return out


def train_sklearn(work, rng):
    import joblib
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                                  GradientBoostingRegressor, IsolationForest,
                                  RandomForestClassifier, RandomForestRegressor)
    n, d = 300, 4
    X = rng.normal(size=(n, d)) * np.array([1, 100, 1e-4, 1])
    y_bin = (X[:, 0] + X[:, 1] / 100 > 0).astype(int)
    y_multi = np.digitize(X[:, 0], [-0.5, 0.5])
    y_reg = X[:, 0] * 3 + X[:, 2] * 1e4
    specs = [
        ("sk-rf-multi", RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0), y_multi),
        ("sk-rf-binary", RandomForestClassifier(n_estimators=5, random_state=1), y_bin),
        ("sk-rf-reg", RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0), y_reg),
        ("sk-et-reg", ExtraTreesRegressor(n_estimators=4, max_depth=5, random_state=0), y_reg),
        ("sk-gb-binary", GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0),
         y_bin),
        ("sk-gb-multi", GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0),
         y_multi),
        ("sk-gb-reg", GradientBoostingRegressor(n_estimators=6, max_depth=3, random_state=0), y_reg),
        ("sk-iforest", IsolationForest(n_estimators=5, max_features=0.75, contamination=0.1,
                                       random_state=0), None),  # postprocess 6 and section 8
    ]
    out = []
    exporter = exactlib.Exporter(EXPORTER)  # in this process: it has scikit-learn imported
    for name, est, y in specs:
        est.fit(X, y)
        pkl = os.path.join(work, name + ".joblib")
        joblib.dump(est, pkl)
        path = os.path.join(work, name + ".json")
        exporter.export(pkl, path)
        out.append((name, path))
    return out


def lightgbm_fixtures():
    out = []
    for f in sorted(os.listdir(LIGHTGBM)):
        if f.endswith(".txt"):  # categorical*.txt: LightGBM's categorical splits
            out.append(("lgbm-" + f[:-4], os.path.join(LIGHTGBM, f)))
    return out


def forest_file(path, *, task, features, outputs, classes, leaf_width, base, post, alpha, agg,
                f32_input, f32_acc, trees, cats=None):
    """Writes a pacset forest file (model/forest.cc SaveForest: a cereal portable
    binary archive) for forests no library writes but the format allows.
    `trees`: list of (group, nodes) with nodes [(left, right, feature,
    threshold, flags, leaf_values)], node 0 the root, children -1 at leaves.
    `cats`: categorical splits [(left categories, right categories, rule)]
    (file version 2); a categorical node has flag 8 and its split's index as
    threshold."""
    def vec(fmt, values):
        return struct.pack("<Q", len(values)) + struct.pack(f"<{len(values)}{fmt}", *values)

    def text(s):
        return struct.pack("<Q", len(s)) + s.encode()

    offsets, groups, left, right, feat, thr, flags, card, leaves = [0], [], [], [], [], [], [], [], []
    for group, nodes in trees:
        groups.append(group)
        for l, r, f, t, fl, lv in nodes:
            left.append(l)
            right.append(r)
            feat.append(f)
            thr.append(t)
            flags.append(fl)
            card.append(0.0)
            leaves.extend(lv if l < 0 else [0.0] * leaf_width)
        offsets.append(offsets[-1] + len(nodes))
    b = bytearray(b"\x01") + struct.pack("<II", 0x50414346, 1 if cats is None else 2)
    b += struct.pack("<BIIII", task, features, outputs, classes, leaf_width) + vec("d", base)
    b += struct.pack("<BdBBBB", post, alpha, agg, 0 if f32_input else 1, 0 if f32_acc else 1, 0)
    b += text("synthetic") + text("") + text("spec") + text(os.path.basename(path))
    b += vec("Q", offsets) + vec("I", groups) + vec("i", left) + vec("i", right) + vec("I", feat)
    b += vec("d", thr) + vec("B", flags) + vec("d", card) + vec("d", leaves)
    if cats is not None:  # as model/forest.cc AddCategoricalSplit lays the sets out
        words, lf, lw, rf, rw, rules = [], [], [], [], [], []
        for left_set, right_set, rule in cats:
            for cset, first, count in ((left_set, lf, lw), (right_set, rf, rw)):
                top = max((c // 32 + 1 for c in cset), default=0)
                first.append(len(words))
                count.append(top)
                words.extend([0] * top)
                for c in cset:
                    words[first[-1] + c // 32] |= 1 << (c % 32)
            rules.append(rule)
        b += vec("I", lf) + vec("I", lw) + vec("I", rf) + vec("I", rw) + vec("B", rules)
        b += vec("I", words)
    with open(path, "wb") as f:
        f.write(bytes(b))


def random_tree(rng, depth, features, leaf, split):
    """A full tree of `depth` levels (depth 0: a single leaf); split() gives
    each internal node's (threshold, flags)."""
    nodes = []

    def build(d):
        i = len(nodes)
        nodes.append(None)
        if d == 0:
            nodes[i] = (-1, -1, 0, 0.0, 0, leaf())
            return i
        f = int(rng.integers(features))
        t, fl = split()
        l_id = build(d - 1)
        r_id = build(d - 1)
        nodes[i] = (l_id, r_id, f, t, fl, None)
        return i

    build(depth)
    return nodes


def numerical_split(rng, thresholds, flags_choice):
    return lambda: (float(thresholds[int(rng.integers(len(thresholds)))]), flags_choice())


def categorical_split(rng, thresholds, cats):
    """Mostly categorical splits (appended to `cats`) of every rule, outside
    direction and NaN side, on categories up to 100 (sets past word 0, 1 and
    2; empty sets), the rest numerical."""
    def split():
        if rng.random() >= 0.75:
            return float(thresholds[int(rng.integers(len(thresholds)))]), int(rng.integers(2))
        universe = rng.permutation(int(rng.choice([3, 40, 70, 101])))
        n_left = int(rng.integers(len(universe) + 1))
        n_right = int(rng.integers(len(universe) - n_left + 1))
        rule = int(rng.integers(3))
        left_set = sorted(int(c) for c in universe[:n_left])
        right_set = sorted(int(c) for c in universe[n_left:n_left + n_right])
        cats.append((left_set, right_set, rule))
        return float(len(cats) - 1), 8 | int(rng.integers(2)) | int(rng.integers(3)) << 1
    return split


def categorical_models(work, rng):
    """Forests with categorical splits (FORMAT.md §3), float32 and float64
    input; packed like the others but in format version 3 only."""
    out = []
    for f32_input, post, acc in ((True, 1, True), (False, 0, False)):
        name = f"syn-categorical-{'f32' if f32_input else 'f64'}"
        path = os.path.join(work, name + ".forest")
        cats = []
        split = categorical_split(rng, [0.0, 2.5, -1.0, 40.0], cats)
        trees = [(0, random_tree(rng, int(rng.integers(1, 5)), 3, lambda: [float(rng.normal())],
                                 split)) for _ in range(8)]
        forest_file(path, trees=trees, cats=cats, f32_input=f32_input, features=3, outputs=1,
                    classes=2 if post == 1 else 1, leaf_width=1, base=[0.25], post=post,
                    alpha=1.0, agg=0, f32_acc=acc, task=1 if post == 1 else 0)
        out.append((name, path))
    return out


def synthetic_models(work, rng):
    """Forests that exercise every rule of FORMAT.md §3, whether or not an
    importer produces them today."""
    z = float(np.float32(1e-35))
    f32_thresholds = [0.0, -0.0, 1.0, -1.5, float(np.float32(0.1)), z, -z,
                      float(np.float32(3.0e38)), -2.5]
    f64_thresholds = f32_thresholds + [0.1, 1 / 3, math.nextafter(z, 1), -1e-300]
    odd_values = [0.1, 1 / 3, -2 / 3, 1e-40, 7.0, 1e30, -0.0, 0.25]

    def leaf_scalar():
        return [odd_values[int(rng.integers(len(odd_values)))]]

    def zero_flags():
        return int(rng.choice([0, 1, 2 | 4, 2 | 4 | 1, 4, 4 | 1, 2, 3]))

    out = []

    def add(name, depth_range=(0, 4), n_trees=6, leaf=leaf_scalar, groups=1, f32_input=True,
            flags=lambda: int(rng.integers(2)), **kw):
        path = os.path.join(work, name + ".forest")
        ths = f32_thresholds if f32_input else f64_thresholds
        trees = []
        for t in range(n_trees):
            depth = int(rng.integers(depth_range[0], depth_range[1] + 1))
            trees.append((t % groups, random_tree(rng, depth, kw["features"], leaf,
                                                       numerical_split(rng, ths, flags))))
        forest_file(path, trees=trees, f32_input=f32_input, **kw)
        out.append((name, path))

    # float32 accumulation of float64 leaf records (width 1), sigmoid with alpha.
    add("syn-f32acc-records-sigmoid", features=3, outputs=1, classes=2, leaf_width=1,
        base=[0.1], post=1, alpha=0.7, agg=0, f32_acc=True, task=1)
    # Vector leaf records, float32 accumulation, mean with a base score, softmax.
    add("syn-f32acc-vector-mean-softmax", features=3, outputs=3, classes=3, leaf_width=3,
        base=[0.2, -0.1, 0.05], post=2, alpha=1.0, agg=1, f32_acc=True, task=2,
        leaf=lambda: [odd_values[int(rng.integers(len(odd_values)))] for _ in range(3)])
    # Mean with a base score in float64; output 2 has no trees (divided by 1).
    add("syn-f64-mean-base", features=2, outputs=3, classes=1, leaf_width=1, groups=2,
        base=[0.5, -1.25, 3.0], post=0, alpha=1.0, agg=1, f32_acc=False, task=0, f32_input=False)
    # Class index with ties (every leaf 1.0 or 0.0), both precisions.
    for acc in (True, False):
        add(f"syn-classindex-ties-{'f32' if acc else 'f64'}", features=2, outputs=3, classes=3,
            leaf_width=1, groups=3, base=[0.0, 0.0, 0.0], post=3, alpha=1.0, agg=0, f32_acc=acc,
            task=2, leaf=lambda: [float(rng.integers(2))])
    # Sigmoid pair (scikit-learn's binary gradient boosting), both precisions, alpha != 1.
    for acc in (True, False):
        add(f"syn-sigmoid-pair-{'f32' if acc else 'f64'}", features=2, outputs=1, classes=2,
            leaf_width=1, base=[-0.3], post=5, alpha=1.5 if acc else 0.5, agg=0, f32_acc=acc,
            task=1)
    # LightGBM's zero rules on float32 input (compact nodes compare in float32).
    add("syn-zero-rules-f32-input", features=2, outputs=1, classes=1, leaf_width=1, base=[0.0],
        post=0, alpha=1.0, agg=0, f32_acc=False, task=0, flags=zero_flags)
    add("syn-zero-rules-f64-input", features=2, outputs=1, classes=1, leaf_width=1, base=[0.0],
        post=4, alpha=1.0, agg=0, f32_acc=False, task=0, flags=zero_flags, f32_input=False)
    # Single-leaf trees and one-hot leaves (inline classes), exponential in float32.
    add("syn-single-leaves-onehot", depth_range=(0, 2), n_trees=8, features=2, outputs=3,
        classes=3, leaf_width=3, base=[0.0, 0.0, 0.0], post=0, alpha=1.0, agg=1, f32_acc=False,
        task=2, leaf=lambda: [1.0 if k == int(rng.integers(3)) else 0.0 for k in range(3)])
    add("syn-exp-f32", features=2, outputs=1, classes=1, leaf_width=1, base=[0.5], post=4,
        alpha=1.0, agg=0, f32_acc=True, task=0)
    # Infinite leaves make NaN margins: the softmax maximum rule decides.
    add("syn-softmax-inf-f64", features=2, outputs=3, classes=3, leaf_width=1, groups=3,
        base=[0.0, 0.0, 0.0], post=2, alpha=1.0, agg=0, f32_acc=False, task=2,
        leaf=lambda: [[math.inf, -math.inf, 1.0, -2.0][int(rng.integers(4))]])
    return out


def special_values(pac):
    """Per feature: every threshold of the file, its neighbours, and the edge cases."""
    per_feature = [set() for _ in range(pac.num_features)]
    # Every reachable node (read through the reader, so blocks are checked).
    reached = set()
    stack = [t[0] for t in pac.trees if t[2] == 0]
    while stack:
        ref = stack.pop()
        if ref in reached:
            continue
        reached.add(ref)
        t, f, flags, left, right = pac.node(ref)
        if flags & 0x80:  # a categorical split: its categories and their neighbours
            lf, lw, rf, rw, _ = pac.splits[t]
            for first, n in ((lf, lw), (rf, rw)):
                for c in range(32 * n):
                    if pac_reader.in_set(pac, first, n, c):
                        per_feature[f].update((c, c + 0.5, c + 0.99, c - 0.5, c + 1))
            per_feature[f].update((2.0**24, 2.0**31, 2.0**24 - 1, 2.0**31 - 1, 2.0**31 + 1,
                                   -0.5, -1.0, 3.99, 1e10))
        else:
            per_feature[f].add(float(t))
        if (flags >> 3) & 3 == 0:
            stack.append(left)
        if (flags >> 5) & 3 == 0:
            stack.append(right)
    z = float(np.float32(1e-35))
    edge = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, -1e39, 3.5e38, 1e-46, -1e-46,
            z, -z, math.nextafter(z, 1), math.nextafter(-z, -1), math.nextafter(z, 0),
            float(np.nextafter(np.float32(z), np.float32(1))), 1e-36, -1e-36, 0.5]
    out = []
    for vals in per_feature:
        cand = set(edge)
        for t in vals:
            t32 = np.float32(t)
            with np.errstate(over="ignore"):
                for v in (t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf),
                          float(np.nextafter(t32, np.float32(np.inf))),
                          float(np.nextafter(t32, np.float32(-np.inf)))):
                    cand.add(v)
        out.append(sorted(cand, key=lambda v: (math.isnan(v), v)))
    return out


def fmt(v):
    if math.isnan(v):
        return "" if np.random.random() < 0.5 else "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def adversarial_csv(pac, path, rng, n_rows=160):
    cands = special_values(pac)
    lines = [",".join(f"f{i}" for i in range(pac.num_features))]
    for i in range(n_rows):
        fields = []
        for f in range(pac.num_features):
            if i % 17 == 5 and f == 0:
                fields.append(DOUBLE_ROUNDING)
            elif rng.random() < 0.8:
                fields.append(fmt(cands[f][rng.integers(len(cands[f]))]))
            else:
                fields.append(fmt(float(rng.normal() * 10.0 ** int(rng.integers(-3, 4)))))
        lines.append(",".join(fields))
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def same(got_text, want, f32):
    """pacset's printed value vs the reader's, by bits."""
    g = float(got_text)
    w = float(want)
    if math.isnan(g) or math.isnan(w):
        return math.isnan(g) and math.isnan(w)
    if f32:
        return np.float32(g).view(np.uint32) == np.float32(w).view(np.uint32)
    return np.float64(g).view(np.uint64) == np.float64(w).view(np.uint64)


def compare(pacset, label, pac_path, csv_path):
    pac = pac_reader.PacFile(pac_path)
    rows = pac_reader.parse_csv(csv_path)
    f32 = pac.accumulate_precision == 0
    for mode in ("output", "margin", "leaf"):
        flags = {"output": [], "margin": ["--margin"], "leaf": ["--leaf"]}[mode]
        out = run([pacset, "predict", pac_path, "--input", csv_path, *flags]).splitlines()
        expect(len(out) == len(rows), f"{label} {mode}: {len(out)} lines for {len(rows)} rows")
        bad = 0
        first = None
        for r, (line, row) in enumerate(zip(out, rows)):
            got = line.split(",")
            if mode == "leaf":
                want = [str(v) for v in pac_reader.leaves(pac, row)]
                ok = got == want
            else:
                want = pac_reader.predict(pac, row, margin=(mode == "margin"))
                ok = len(got) == len(want) and all(same(g, w, f32) for g, w in zip(got, want))
            if not ok:
                bad += 1
                if first is None:
                    first = (r, line, [str(w) for w in want], row)
        expect(bad == 0, f"{label} {mode}: {bad} of {len(rows)} rows differ; first: row "
                         f"{first[0] if first else ''} pacset {first[1] if first else ''} "
                         f"reader {first[2] if first else ''} input {first[3] if first else ''}")
    return pac


def against_xgboost(pacset, pac_path, model_path, csv_path, label):
    """pacset's predictions from an old file, bit for bit XGBoost's own."""
    import xgboost as xgb
    booster = xgb.Booster()
    booster.load_model(model_path)
    with np.errstate(over="ignore"):  # values beyond float32 become +-inf, as in pacset
        rows = np.array(pac_reader.parse_csv(csv_path), dtype=np.float64).astype(np.float32)
    want = booster.inplace_predict(rows)
    got = np.array([[float(v) for v in line.split(",")]
                    for line in run([pacset, "predict", pac_path, "--input", csv_path])
                    .splitlines()], dtype=np.float32)
    expect(got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32)),
           f"{label}: pacset differs from XGBoost on {np.sum(got != want)} values")


def edits(pac):
    """Hostile edits of a packed file, one per rule of FORMAT.md section 5
    (and some the rules allow): (name, function of a pac_craft.Pac)."""
    K = pac.hget("I", 44)
    table = pac.fixed
    out = [
        ("group = outputs", lambda p: p.set_tree(0, group=K)),
        ("group 0x7fffffff, inline root", lambda p: p.set_tree(0, kind=2, group=0x7FFFFFFF)),
        ("root kind 4", lambda p: p.set_tree(0, kind=4)),
        ("inline class = outputs", lambda p: p.set_tree(0, kind=3, root=K)),
        ("postprocess 9", lambda p: p.hset("B", 33, 9)),
        ("softmax, one output", lambda p: (p.hset("B", 33, 2), p.hset("I", 44, 1),
                                           p.hset("I", 52, 1))),
        ("leaf width 2", lambda p: p.hset("I", 52, 2)),
        ("no node blocks", lambda p: p.hset("Q", 104, 0)),
        ("bins past the region", lambda p: p.hset("Q", 112, p.hget("Q", 104) + 1)),
        ("num_nodes + 1", lambda p: p.hset("Q", 64, p.hget("Q", 64) + 1)),
        ("num_leaf_records + 1", lambda p: p.hset("Q", 72, p.hget("Q", 72) + 1)),
        ("max depth 0", lambda p: p.hset("I", 120, 0)),
        ("one feature", lambda p: p.hset("I", 40, 1)),
        ("no trees", lambda p: p.hset("Q", 56, 0)),
        ("alpha inf", lambda p: p.hset("d", 80, math.inf)),
        ("task 200 (informative)", lambda p: p.hset("B", 32, 200)),
        ("layout 200 (informative)", lambda p: p.hset("B", 38, 200)),
        ("reserved fields set", lambda p: (p.hset("I", 124, 7),
                                           p.hset("Q", 136, 7) if p.version >= 3 else None)),
        ("tree 1's root is tree 0's", lambda p: p.set_tree(1, root=p.tree(0)[0],
                                                           kind=p.tree(0)[2])),
    ]
    for i in range(pac.section_count):
        stype = pac.hget("I", table + 32 * i)
        base = table + 32 * i
        if stype == 4:  # the source info
            out += [
                ("a second tree table", lambda p, b=base: p.hset("I", b, 1)),
                ("unknown optional section past the end",
                 lambda p, b=base: (p.hset("I", b, 77), p.hset("Q", b + 8, 1 << 50))),
                ("unknown required section",
                 lambda p, b=base: (p.hset("I", b, 77), p.hset("I", b + 4, 1))),
                ("source info record size 2", lambda p, b=base: p.hset("I", b + 24, 2)),
            ]
        if stype == 8:  # the postprocess parameters (isolation score)
            def param(p, i, v):
                struct.pack_into("<d", p.data, p.record_offset(8, i), v)
            out += [
                ("isolation score with 1 parameter", lambda p, b=base: p.hset("Q", b + 16, 1)),
                ("parameters for identity", lambda p: p.hset("B", 33, 0)),
                ("isolation score, float32 accumulation", lambda p: p.hset("B", 36, 0)),
                ("isolation denominator -1", lambda p: param(p, 0, -1.0)),
                ("isolation offset NaN", lambda p: param(p, 1, math.nan)),
                ("isolation denominator 0 (allowed)", lambda p: param(p, 0, 0.0)),
                ("parameter section not required", lambda p, b=base: p.hset("I", b + 4, 0)),
            ]
        if stype == 5:
            out.append(("leaf ids too short", lambda p, b=base: p.hset("Q", b + 16, 1)))
    return out


def node_edits(pac):
    """Edits of the first tree's root node (rules 21-22)."""
    root, _, kind = pac.tree(0)
    if kind != 0:
        return []
    lo = pac.hget("Q", 96) * pac.block_size // 16
    hi = lo + pac.hget("Q", 104) * pac.block_size // 16
    return [
        ("root splits on a missing feature", lambda p: p.set_node(root, feature=0xFFFFFF
                                                                  if p.compact() else 1 << 30)),
        ("a child past the node region", lambda p: p.set_node(root, flags=p.node(root)[2] & 0x87,
                                                              left=hi, right=hi)),
        ("a child in a trailer", lambda p: p.set_node(
            root, flags=p.node(root)[2] & 0x87,
            left=lo + p.block_size // 16 - 1, right=lo + p.block_size // 16 - 1)),
        ("a cycle", lambda p: p.set_node(root, flags=p.node(root)[2] & 0x87, left=root,
                                         right=root)),
    ]


def verdicts(pacset, work, pac_path, rng):
    """Crafted files from `pac_path`: pacset and the reader accept and refuse
    the same ones — at open (`pacset info` / the reader's constructor), as a
    whole (`pacset verify --file` / check_structure) — and agree on what the
    accepted ones predict."""
    base = pac_craft.Pac.load(pac_path)
    tally = {"refused at open": 0, "refused as a whole": 0, "accepted": 0}
    for name, edit in edits(base) + node_edits(base):
        p = pac_craft.Pac.load(pac_path)
        edit(p)
        path = os.path.join(work, "hostile.pac")
        p.reseal().save(path)
        label = f"{os.path.basename(pac_path)}, {name}"
        info = subprocess.run([pacset, "info", path], capture_output=True, text=True)
        try:
            reader = pac_reader.PacFile(path)
            reader_open = None
        except (pac_reader.PacError, struct.error, KeyError, OverflowError) as e:
            reader, reader_open = None, str(e)
        expect(info.returncode in (0, 1), f"{label}: pacset info died ({info.returncode})")
        expect((info.returncode == 0) == (reader_open is None),
               f"{label}: pacset info says {info.returncode == 0} ({info.stderr.strip()}), the "
               f"reader {reader_open is None} ({reader_open})")
        verify = subprocess.run([pacset, "verify", "--file", path], capture_output=True,
                                text=True)
        reader_whole = reader_open
        if reader is not None:
            try:
                reader.check_structure()
            except (pac_reader.PacError, struct.error) as e:
                reader_whole = str(e)
        expect(verify.returncode in (0, 1), f"{label}: pacset verify died ({verify.returncode})")
        expect((verify.returncode == 0) == (reader_whole is None),
               f"{label}: pacset verify says {verify.returncode == 0} "
               f"({(verify.stdout + verify.stderr).strip()[-200:]}), the reader "
               f"{reader_whole is None} ({reader_whole})")
        tally["refused at open" if info.returncode else
              "refused as a whole" if verify.returncode else "accepted"] += 1
        if verify.returncode == 0 and reader_whole is None:
            csv_path = os.path.join(work, "hostile.csv")
            adversarial_csv(reader, csv_path, rng, n_rows=40)
            compare(pacset, label, path, csv_path)
    for outcome, n in tally.items():
        expect(n > 0, f"{os.path.basename(pac_path)}: no crafted file was {outcome}")
    print(f"{os.path.basename(pac_path)}: crafted files {tally}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--keep", help="keep the work directory here")
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    np.random.seed(11)
    work = args.keep or tempfile.mkdtemp(prefix="pacset-spec-")
    os.makedirs(work, exist_ok=True)
    try:
        models = (train_xgboost(work, rng) + train_sklearn(work, rng) + lightgbm_fixtures() +
                  synthetic_models(work, rng) + categorical_models(work, rng))
        # Crafted from these: leaf width 1 with groups, leaf width 3 with
        # records and classes, float64 wide nodes, an isolation score (section 8),
        # LightGBM categorical splits.
        hostile_models = {"xgb-softprob", "sk-rf-multi", "lgbm-multiclass", "sk-iforest",
                          "lgbm-categorical_multiclass"}
        # 256-byte blocks: the header flows over two blocks. Format version 2
        # (files for readers before version 3): version 1 at 4 KiB, 2 below.
        variants = [("64k", ["--block-size", "64KiB"]),
                    ("4k-bfs-wide", ["--block-size", "4KiB", "--layout", "bfs", "--wide-nodes"]),
                    ("256", ["--block-size", "256"]),
                    ("4k-v1", ["--block-size", "4KiB", "--format-version", "2"]),
                    ("256-v2", ["--block-size", "256", "--format-version", "2"])]
        seen = set()
        seen_categorical = set()
        for name, model in models:
            for vname, vflags in variants:
                pac_path = os.path.join(work, f"{name}-{vname}.pac")
                if ("categorical" in name or "iforest" in name) and "--format-version" in vflags:
                    r = subprocess.run([args.pacset, "pack", model, "-o", pac_path, *vflags],
                                       capture_output=True, text=True)
                    expect(r.returncode != 0 and "format version 3" in r.stderr,
                           f"{name}: packing in version 2: {r.stderr.strip()}")
                    continue
                run([args.pacset, "pack", model, "-o", pac_path, *vflags])
                csv_path = os.path.join(work, f"{name}-{vname}.csv")
                adversarial_csv(pac_reader.PacFile(pac_path), csv_path, rng)
                pac = compare(args.pacset, f"{name} ({vname})", pac_path, csv_path)
                seen.add((pac.node_format, pac.input_precision, pac.accumulate_precision,
                          pac.postprocess, pac.aggregation, pac.version))
                if pac.splits:
                    seen_categorical.add((pac.node_format, pac.input_precision))
                if vname in ("256", "4k-bfs-wide") and name in hostile_models:
                    verdicts(args.pacset, work, pac_path, rng)
        # Files pacset 0.1 wrote.
        for old in sorted(os.listdir(OLD_FILES)):
            if old.endswith(".pac"):
                pac_path = os.path.join(OLD_FILES, old)
                csv_path = os.path.join(work, old + ".csv")
                adversarial_csv(pac_reader.PacFile(pac_path), csv_path, rng)
                pac = compare(args.pacset, f"pacset 0.1's {old}", pac_path, csv_path)
                if old.startswith("xgb-multi"):
                    against_xgboost(args.pacset, pac_path, os.path.join(OLD_FILES, "xgb-multi.json"),
                                    csv_path, f"pacset 0.1's {old}")
                seen.add((pac.node_format, pac.input_precision, pac.accumulate_precision,
                          pac.postprocess, pac.aggregation, pac.version))
        # The spec's cases must all have been exercised.
        for what, ok in [
            ("compact nodes with float32 input", any(s[0] == 0 and s[1] == 0 for s in seen)),
            ("wide nodes with float32 input", any(s[0] == 1 and s[1] == 0 for s in seen)),
            ("wide nodes with float64 input", any(s[0] == 1 and s[1] == 1 for s in seen)),
            ("float32 accumulation", any(s[2] == 0 for s in seen)),
            ("float64 accumulation", any(s[2] == 1 for s in seen)),
            ("mean aggregation", any(s[4] == 1 for s in seen)),
        ] + [(f"postprocess {p}", any(s[3] == p for s in seen)) for p in range(7)] + [
            (f"format version {v}", any(s[5] == v for s in seen)) for v in (1, 2, 3)] + [
            (f"categorical splits in {'wide' if w else 'compact'} nodes over float{64 if p else 32} "
             "input", (w, p) in seen_categorical) for w in (0, 1) for p in (0, 1)
            if (w, p) != (0, 1)]:
            expect(ok, f"no model exercised {what}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"spec_test: {checks} checks, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
