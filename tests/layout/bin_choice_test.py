#!/usr/bin/python3
"""The bin depth and trees per bin that `pacset pack` chooses, checked on a
real forest and real rows.

Trains a scikit-learn random forest to purity on Debian's Fashion-MNIST,
packs it with the chosen parameters, then packs it again with every
candidate forced and counts the blocks each makes real rows touch (`pacset
layout-report`: the engine walks the packed file, a count independent of
the packer's). Two ways of choosing:
- with --calibrate rows, the packer counts on those rows: the chosen
  candidate must touch the fewest blocks on them, and every candidate's
  recorded count must be the engine's;
- from the training cardinalities alone it uses an expected count, which
  tracks the measured one on held-out rows within a few percent: the chosen
  candidate must be within 3% of the best, and the expected count must order
  every two candidates whose measured counts differ by more than 8%.
Also: --bin-depth / --trees-per-bin force a choice, `pacset info` shows the
choice (text and --json), and the chosen layout predicts exactly what
scikit-learn and the model file predict.

Usage: bin_choice_test.py --pacset PATH [--keep DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import joblib
import numpy as np
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exact"))
import exactlib  # noqa: E402
import fashion_mnist  # noqa: E402

BLOCK_SIZES = ("4KiB", "16KiB")


def run(*cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def measured_blocks_per_row(pacset, model, rows_csv, block_size, depth, trees, calibrate=None):
    report = json.loads(run(pacset, "layout-report", model, "--input", rows_csv, "--layouts",
                            "pacset", "--block-size", block_size, "--bin-depth", str(depth),
                            "--trees-per-bin", trees, "--json",
                            *(["--calibrate", calibrate] if calibrate else [])))
    entry = next(iter(report.values()))["pacset"]
    return entry["blocks_per_row"]["mean"], entry["bin_depth"], entry["trees_per_bin"]


def check_choice(checker, pacset, model, rows_csv, bs, calibrate):
    """Packs with the chosen parameters; measures every candidate on rows_csv.
    Returns the packed file."""
    label = f"{bs} {'calibrated' if calibrate else 'training'}"
    pac = rows_csv[:-4] + f"-{bs}-{'cal' if calibrate else 'train'}.pac"
    run(pacset, "pack", model, "-o", pac, "--block-size", bs,
        *(["--calibrate", calibrate] if calibrate else []))
    info = json.loads(run(pacset, "info", pac, "--json"))
    choice = info["source"]["bin_choice"]
    checker.expect(choice["bin_depth"] == "chosen" and choice["trees_per_bin"] == "chosen"
                   and choice["scored_by"] == ("rows" if calibrate else "expected"),
                   f"{label}: both parameters chosen by default: {choice}")
    candidates, chosen = choice["candidates"], choice["chosen"]
    checker.expect(len(candidates) >= 3, f"{label}: several candidates: {candidates}")
    checker.expect(info["bin_depth"] == candidates[chosen]["bin_depth"],
                   f"{label}: header depth {info['bin_depth']} is the chosen candidate's")
    measured = []
    for i, c in enumerate(candidates):
        trees = "fit" if c["trees_per_bin"] == 0 else str(c["trees_per_bin"])
        mean, depth, largest = measured_blocks_per_row(pacset, model, rows_csv, bs, c["bin_depth"],
                                                       trees, calibrate)
        checker.expect(depth == c["bin_depth"] and largest == c["largest_bin"],
                       f"{label}: forcing depth {c['bin_depth']} trees {trees} gives that "
                       f"layout (got depth {depth}, largest bin {largest})")
        measured.append(mean)
        print(f"{label}: depth {c['bin_depth']} trees/bin {trees:>4}: chooser "
              f"{c['blocks_per_row']:8.2f}, measured {mean:8.2f}{'  <- chosen' if i == chosen else ''}")
    best = min(measured)
    checker.expect(max(measured) > 1.05 * best,
                   f"{label}: the candidates differ enough to make the choice matter: {measured}")
    if calibrate:
        checker.expect(measured[chosen] <= best + 1e-9,
                       f"{label}: the chosen candidate touches {measured[chosen]:.2f} blocks per "
                       f"row, another only {best:.2f}")
        for c, m in zip(candidates, measured):
            checker.expect(abs(c["blocks_per_row"] - m) <= 0.005,
                           f"{label}: depth {c['bin_depth']}: the chooser counted "
                           f"{c['blocks_per_row']}, the engine {m:.4f}")
    else:
        checker.expect(measured[chosen] <= 1.03 * best,
                       f"{label}: the chosen candidate touches {measured[chosen]:.2f} blocks per "
                       f"row, more than 3% above the best {best:.2f}")
        for i, a in enumerate(candidates):
            for j, b in enumerate(candidates):
                if measured[i] > 1.08 * measured[j]:
                    checker.expect(a["blocks_per_row"] > b["blocks_per_row"],
                                   f"{label}: the expected count orders depth {a['bin_depth']} "
                                   f"and depth {b['bin_depth']} against the measured one")
    # The default layout-report packs the same way as pack.
    mean, depth, _ = measured_blocks_per_row(pacset, model, rows_csv, bs, "auto", "auto",
                                             calibrate)
    checker.expect(depth == info["bin_depth"] and abs(mean - measured[chosen]) < 1e-9,
                   f"{label}: layout-report's default is pack's choice")
    return pac


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--keep", help="keep the model, rows and packed files in this directory")
    args = ap.parse_args()
    checker = exactlib.Checker(args.pacset)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        return run_checks(checker, args.pacset, work)


def run_checks(checker, pacset, work):
    X, y = fashion_mnist.load("train")
    Xt, _ = fashion_mnist.load("test")
    forest = RandomForestClassifier(n_estimators=32, random_state=0, n_jobs=1)
    forest.fit(X[:4000], y[:4000])
    model = os.path.join(work, "rf.joblib")
    joblib.dump(forest, model)
    # Exported once, so the many packings below do not each start Python.
    exported = os.path.join(work, "rf.json")
    run(os.path.join(os.path.dirname(pacset), "pacset-sklearn-export"), model, "-o", exported)
    rows_csv = exactlib.write_rows(os.path.join(work, "rows.csv"), Xt[:300].astype(np.float64))

    for bs in BLOCK_SIZES:
        for calibrate in (None, rows_csv):
            pac = check_choice(checker, pacset, exported, rows_csv, bs, calibrate)
            # Chosen parameters predict exactly what scikit-learn and the model file predict.
            from_pac = checker.predict(pac, rows_csv)
            checker.close(f"{bs} {pac}", "predict", from_pac, forest.predict_proba(Xt[:300]),
                          1e-12)
            checker.expect(np.array_equal(from_pac, checker.predict(model, rows_csv)),
                           f"{pac}: the .pac and the model file predict the same")

    # Forcing: the given values are packed and recorded as forced.
    pac = os.path.join(work, "forced.pac")
    run(pacset, "pack", exported, "-o", pac, "--block-size", "4KiB", "--bin-depth", "1",
        "--trees-per-bin", "fit")
    info = json.loads(run(pacset, "info", pac, "--json"))
    checker.expect(info["bin_depth"] == 1 and "bin_choice" not in info["source"],
                   f"--bin-depth 1 --trees-per-bin fit packs depth 1 with nothing chosen: {info}")
    run(pacset, "pack", exported, "-o", pac, "--block-size", "4KiB", "--bin-depth", "6")
    info = json.loads(run(pacset, "info", pac, "--json"))
    choice = info["source"]["bin_choice"]
    checker.expect(info["bin_depth"] == 6 and choice["bin_depth"] == "forced"
                   and choice["trees_per_bin"] == "chosen"
                   and all(c["bin_depth"] == 6 for c in choice["candidates"]),
                   f"--bin-depth 6 alone forces the depth, chooses the trees per bin: {choice}")
    out = subprocess.run([pacset, "pack", exported, "-o", pac, "--bin-depth", "0"],
                         capture_output=True, text=True)
    checker.expect(out.returncode == 2 or "--bin-depth '0'" in out.stderr,
                   f"--bin-depth 0 is refused clearly: {out.returncode} {out.stderr.strip()}")

    # pacset info (text) says what was chosen and why.
    text = run(pacset, "info", os.path.join(work, "rows-4KiB-train.pac"))
    checker.expect("bin choice:" in text and "fewest expected blocks per row" in text
                   and "<- packed" in text, f"pacset info shows the choice:\n{text}")
    print(text)
    return checker.finish()


if __name__ == "__main__":
    sys.exit(main())
