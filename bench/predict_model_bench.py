#!/usr/bin/python3
"""`pacset predict` on a model file against the same model packed, warm, one
thread: both go through the bundled engine, so they should run at the same
speed (a model file is packed in memory first; loading is not timed).

  predict_model_bench.py --pacset build/tools/pacset [--baseline OLD_PACSET] \\
      --model /work/models/xgb1030/xgb.json --model /work/models/rf682/rf.joblib \\
      --rows /work/models/xgb1030/test.csv [--repeat 10] [--rounds 3] [--threads 1]

Rows/s from `--repeat N --timing` (CSV reading, model loading and packing
excluded), rounds interleaved, min / median / max shown. --baseline runs
another pacset binary on the same files in the same rounds (e.g. one built
before this change, whose model-file path used the reference predictor).
Outputs are checked: the model file and the .pac must predict the same bytes.
A scikit-learn pickle is exported to JSON once (pacset-sklearn-export) so that
every run does not unpickle it; that is the same forest.
"""
import argparse
import filecmp
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(*cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def rate(pacset, model, rows, repeat, threads):
    out = run(pacset, "predict", model, "--input", rows, "--output", "/dev/null", "--threads",
              str(threads), "--repeat", str(repeat), "--timing")
    return float(re.search(r"= (\d+) rows/s", out.stderr).group(1))


def spread(values):
    return f"{min(values):8.0f} / {statistics.median(values):8.0f} / {max(values):8.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--baseline", help="another pacset binary to measure in the same rounds")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rows", required=True, help="CSV rows (header allowed)")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    binaries = [("new", a.pacset)] + ([("baseline", a.baseline)] if a.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.model:
            name = os.path.basename(model)
            if model.endswith((".joblib", ".pkl")):
                exported = os.path.join(tmp, name + ".json")
                run(os.path.join(os.path.dirname(a.pacset), "pacset-sklearn-export"), model, "-o",
                    exported)
                model = exported
            pac = os.path.join(tmp, name + ".pac")
            run(a.pacset, "pack", model, "-o", pac)
            # Same outputs from both inputs (and warm page cache for the .pac).
            outs = []
            for path in (model, pac):
                outs.append(os.path.join(tmp, f"out{len(outs)}.csv"))
                run(a.pacset, "predict", path, "--input", a.rows, "--output", outs[-1])
            if not filecmp.cmp(outs[0], outs[1], shallow=False):
                sys.exit(f"{name}: the model file and the .pac predict differently")
            results = {}
            for _ in range(a.rounds):
                for bname, binary in binaries:
                    for kind, path in (("model file", model), (".pac", pac)):
                        results.setdefault((bname, kind), []).append(
                            rate(binary, path, a.rows, a.repeat, a.threads))
            print(f"{name}: rows/s, {a.threads} thread(s), --repeat {a.repeat}, {a.rounds} rounds "
                  "(min / median / max)")
            for (bname, kind), values in results.items():
                print(f"  {bname:<9} {kind:<11} {spread(values)}")
            for bname, _ in binaries:
                ratio = (statistics.median(results[(bname, "model file")]) /
                         statistics.median(results[(bname, ".pac")]))
                print(f"  {bname:<9} model file / .pac = {ratio:.2f}")


if __name__ == "__main__":
    main()
