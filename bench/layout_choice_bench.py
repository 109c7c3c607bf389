#!/usr/bin/python3
"""Bin parameters chosen by the packer against a fixed bin depth of 2: mean
node blocks per row on test rows, at 4 KiB and 64 KiB, and what choosing
costs `pacset pack`.

  layout_choice_bench.py --pacset build/tools/pacset --model /work/models/rf682/rf.joblib \\
      --rows /work/models/rf682/test.csv [--n-rows 200] [--layouts pacset,bin-block-wdfs] \\
      [--pack-rounds 3] [--block-sizes 4KiB,64KiB]

Blocks per row come from `pacset layout-report` (the engine walks the packed
file for every row): counted, not timed, so they do not depend on the
machine. Columns:
  depth 2      --bin-depth 2 --trees-per-bin fit (what pack did before it chose)
  chosen       the default: parameters chosen from the training cardinalities
               by the expected count (shown as 'expected')
  calibrated   --calibrate with 1,000 other rows of the file (rows n..n+999),
               so the choice is counted on rows that are not measured
Pack time: `pacset pack` with the choice and with depth 2 fixed, the same
binary, interleaved rounds; the layout seconds pack reports (wall clock;
import and writing do not change) and the CPU seconds of the whole pack
(user + system, all threads: less sensitive to a busy machine), min / median
/ max. --baseline adds another pacset
binary's default pack to the rounds (e.g. one built before the choice).
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile


def run(*cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def report(pacset, model, rows, layouts, block_sizes, *extra):
    args = [pacset, "layout-report", model, "--input", rows, "--layouts", ",".join(layouts),
            "--json", *extra]
    for bs in block_sizes:
        args += ["--block-size", bs]
    return json.loads(run(*args))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacset", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rows", required=True, help="CSV with a header line")
    ap.add_argument("--n-rows", type=int, default=200)
    ap.add_argument("--layouts", default="pacset,bin-block-wdfs")
    ap.add_argument("--block-sizes", default="4KiB,64KiB")
    ap.add_argument("--pack-rounds", type=int, default=3)
    ap.add_argument("--baseline", help="another pacset binary whose default pack to time too")
    a = ap.parse_args()
    layouts = a.layouts.split(",")
    block_sizes = a.block_sizes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        with open(a.rows) as f:
            lines = f.readlines()
        measured = os.path.join(tmp, "measured.csv")
        calibrate = os.path.join(tmp, "calibrate.csv")
        with open(measured, "w") as f:
            f.writelines(lines[: 1 + a.n_rows])
        with open(calibrate, "w") as f:
            f.writelines(lines[:1] + lines[1 + a.n_rows: 1 + a.n_rows + 1000])
        model = a.model
        if model.endswith((".joblib", ".pkl")):  # convert once, not once per packing
            model = os.path.join(tmp, "model.json")
            run(os.path.join(os.path.dirname(a.pacset), "pacset-sklearn-export"), a.model, "-o",
                model)

        fixed = report(a.pacset, model, measured, layouts, block_sizes, "--bin-depth", "2",
                       "--trees-per-bin", "fit")
        chosen = report(a.pacset, model, measured, layouts, block_sizes)
        calibrated = report(a.pacset, model, measured, layouts, block_sizes, "--calibrate",
                            calibrate)
        print(f"mean node blocks per row, {a.n_rows} rows of {a.rows}, model {a.model}")
        print(f"{'block':>7} {'layout':<15} {'depth 2':>9} {'chosen':>9} {'(d, bin)':>10} "
              f"{'vs d2':>6} {'expected':>9} {'calibrated':>10} {'(d, bin)':>10} {'vs d2':>6}")
        for bs in fixed:
            for layout in layouts:
                f, c, k = fixed[bs][layout], chosen[bs][layout], calibrated[bs][layout]
                base = f["blocks_per_row"]["mean"]
                cm, km = c["blocks_per_row"]["mean"], k["blocks_per_row"]["mean"]
                print(f"{int(bs) // 1024:>4}KiB {layout:<15} {base:9.2f} {cm:9.2f} "
                      f"{'(%d, %d)' % (c['bin_depth'], c['trees_per_bin']):>10} {cm / base:6.3f} "
                      f"{c['expected_blocks_per_row']:9.2f} {km:10.2f} "
                      f"{'(%d, %d)' % (k['bin_depth'], k['trees_per_bin']):>10} {km / base:6.3f}")

        # What choosing costs pack (64 KiB, the default block size).
        variants = [("chosen", a.pacset, []),
                    ("depth 2", a.pacset, ["--bin-depth", "2", "--trees-per-bin", "fit"])]
        if a.baseline:
            variants.append(("baseline", a.baseline, []))
        times = {name: [] for name, _, _ in variants}
        cpu = {name: [] for name, _, _ in variants}
        for _ in range(a.pack_rounds):
            for name, binary, extra in variants:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                out = run(binary, "pack", model, "-o", os.path.join(tmp, "x.pac"), *extra)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                times[name].append(float(re.search(r"layout ([0-9.]+) s", out).group(1)))
                cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime -
                                 before.ru_stime)
        print(f"\npack {a.model} (64 KiB), {a.pack_rounds} interleaved rounds "
              "(min / median / max):")
        print(f"  {'':<8} {'layout s (wall)':>24}   {'whole pack, CPU s':>24}")
        for name, t in times.items():
            c = cpu[name]
            print(f"  {name:<8} {min(t):6.2f} / {statistics.median(t):6.2f} / {max(t):6.2f}   "
                  f"{min(c):6.2f} / {statistics.median(c):6.2f} / {max(c):6.2f}")
        print(f"  choosing costs x{statistics.median(times['chosen']) / statistics.median(times['depth 2']):.1f}"
              " the fixed layout time")


if __name__ == "__main__":
    main()
