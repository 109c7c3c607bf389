#!/usr/bin/python3
"""pacset-trace end to end on a real pacsetfs mount: record (cold, per row,
marks from the bundled engine), report, compare, HTML, trace-driven packing,
a daemon killed mid-trace, and the error paths. Every test runs in its own
temp dir with a time limit; every mount is unmounted whatever happens.

Usage: trace_test.py --pacset PATH --pacsetfs PATH --pacset-trace PATH [-k NAME]
"""
import json
import os
import re
import signal
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testkit"))
import fslib  # noqa: E402
from fslib import Mount, run  # noqa: E402

ARGS = None
DATA = {}


def pacset(*args, check=True):
    return run([ARGS.pacset, *map(str, args)], check=check)


def ptrace(*args, check=True):
    return run([ARGS.pacset_trace, *map(str, args)], check=check)


def prepare(workdir):
    import joblib
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    import fashion_mnist
    X, y = fashion_mnist.load("train")
    rf = RandomForestClassifier(n_estimators=16, random_state=0, n_jobs=2).fit(X[:3000], y[:3000])
    DATA["model"] = os.path.join(workdir, "rf.joblib")
    joblib.dump(rf, DATA["model"])
    Xt, _ = fashion_mnist.load("test")
    DATA["rows"] = os.path.join(workdir, "rows.csv")
    np.savetxt(DATA["rows"], Xt[:80], delimiter=",", fmt="%d")
    DATA["pac"] = os.path.join(workdir, "rf.pac")
    pacset("pack", DATA["model"], "-o", DATA["pac"], "--block-size", "4KiB")


def mounted(tmp, name="rf", **kw):
    store = "rocksdb:" + os.path.join(tmp, "store")
    pacset("import", DATA["pac"], "--name", name, "--store", store)
    return Mount(ARGS.pacsetfs, store, os.path.join(tmp, "mnt"), **kw)


def predict_cmd(m, *flags, name="rf"):
    return [ARGS.pacset, "predict", os.path.join(m.mp, f"{name}.pac"), "-i", DATA["rows"], *flags]


# ---------------------------------------------------------------- tests ----

def test_record_report_compare_cold_rows_match_the_analytical_count(tmp):
    # no_push_blocks: the daemon pushes fetched blocks into the page cache from
    # another thread, which can land after a row's eviction and make a page of
    # the next row resident; exact per-row counts need that off.
    with mounted(tmp, options="no_push_blocks") as m:
        trace = os.path.join(tmp, "cold.trace")
        out = os.path.join(tmp, "out.csv")
        # No --mount: the only pacsetfs mount is found in /proc/self/mounts.
        ptrace("record", "--cold", "--per-row", "-o", trace, "--",
               *predict_cmd(m, "-o", out, "--evict-between-rows", "--mark-requests", "row"))
        want = pacset("predict", DATA["pac"], "-i", DATA["rows"]).stdout
        with open(out) as f:
            assert f.read() == want, "marking and evicting per row changed predictions"
        rep = json.loads(ptrace("report", trace, "--json").stdout)
        assert rep["trace"]["format_version"] == 2
        assert rep["requests"]["count"] == 80, rep["requests"]
        forest = rep["forests"][0]
        assert forest["name"] == "rf" and forest["block_size"] == 4096
        cmp = json.loads(ptrace("compare", trace, "--model", DATA["pac"], "-i", DATA["rows"],
                                "--json").stdout)
        assert cmp["checksum_verified"]
        assert cmp["requests_compared"] == 80
        t = cmp["totals"]
        assert t["matched"] == t["analytical"] and t["measured"] == t["analytical"], t
        assert cmp["measured_blocks_per_request"] == cmp["analytical_blocks_per_request"]
        lr = json.loads(pacset("layout-report", DATA["model"], "-i", DATA["rows"], "--block-size",
                               "4KiB", "--layouts", "pacset", "--json").stdout)["4096"]["pacset"]
        assert abs(lr["blocks_per_row"]["mean"] - rep["requests"]["blocks_per_request"]["mean"]) < 1e-9
        text = ptrace("report", trace).stdout
        assert "per request" in text and "rf" in text
        print(f"    {rep['requests']['blocks_per_request']['mean']:.2f} blocks per request, "
              f"= layout-report")


def test_compare_explains_warm_requests_by_the_page_cache(tmp):
    with mounted(tmp) as m:
        trace = os.path.join(tmp, "warm.trace")
        ptrace("record", "--cold", "--per-row", "--mount", m.mp, "-o", trace, "--",
               *predict_cmd(m, "-o", os.devnull))
        cmp = json.loads(ptrace("compare", trace, "--model", DATA["pac"], "-i", DATA["rows"],
                                "--json").stdout)
        t = cmp["totals"]
        assert t["measured"] < t["analytical"], t
        assert t["matched"] + t["resident_in_page_cache"] == t["analytical"], t
        assert t["unexplained_missing"] == 0 and t["extra_other"] == 0, t
        text = ptrace("compare", trace, "--model", DATA["pac"], "-i", DATA["rows"]).stdout
        assert "page cache hit" in text
        # Batch marks (the default when only the variable is set).
        trace2 = os.path.join(tmp, "batch.trace")
        ptrace("record", "--cold", "-o", trace2, "--", *predict_cmd(m, "-o", os.devnull,
                                                                    "--threads", "2"))
        rep = json.loads(ptrace("report", trace2, "--json").stdout)
        assert rep["requests"]["count"] == 1
        # Worker threads' reads belong to the batch (thread -> process records).
        assert rep["requests"]["blocks_per_request"]["max"] > 0, rep["requests"]


def test_html_report_and_layouts_are_well_formed_svg(tmp):
    with mounted(tmp) as m:
        trace = os.path.join(tmp, "t.trace")
        ptrace("record", "--cold", "--per-row", "-o", trace, "--",
               *predict_cmd(m, "-o", os.devnull, "--evict-between-rows", "--mark-requests", "row"))
    html = os.path.join(tmp, "report.html")
    ptrace("report", trace, "--html", html, "--model", DATA["pac"])
    lay = os.path.join(tmp, "layouts.html")
    ptrace("layouts", "--model", DATA["model"], "-i", DATA["rows"], "--layouts", "dfs,pacset",
           "--trace", trace, "-o", lay)
    for path, needles in ((html, ["bins (top levels", "blocks per request", "cache size (log scale)",
                                  "99% hits", 'class="mrc"']),
                          (lay, ["pacset", "dfs", "measured"])):
        with open(path) as f:
            text = f.read()
        svgs = re.findall(r"<svg.*?</svg>", text, re.S)
        assert svgs, path
        for s in svgs:
            ET.fromstring(s)  # raises on malformed XML
        for n in needles:
            assert n in text, (path, n)
        assert "<script" not in text and "http://" not in text.replace(
            "http://www.w3.org/2000/svg", ""), "the report must be self-contained"


def test_the_miss_ratio_curve_predicts_the_daemons_store_fetches(tmp):
    # Record a workload, compute the curve, then run the same reads against a
    # fresh daemon at three cache sizes and compare its store fetches (stats
    # file) with the curve's misses (the daemon's policy, W-TinyLFU). Each row is made cold in the reader
    # (--evict-between-rows), so the daemon sees every row's blocks and its
    # cache is what decides. Fresh daemon = empty page cache and daemon cache.
    # no_push_blocks: a push re-reads its blocks through the daemon cache
    # without a trace record (fs/notifier.cc), which reorders the LRU.
    store = "dir:" + os.path.join(tmp, "store")
    pacset("import", DATA["pac"], "--name", "rf", "--store", store)
    marks = os.path.join(tmp, "marks")

    def workload(mp):
        return [ARGS.pacset, "predict", os.path.join(mp, "rf.pac"), "-i", DATA["rows"],
                "-o", os.devnull, "--mark-requests", "row", "--marks-file", marks,
                "--evict-between-rows"]

    trace = os.path.join(tmp, "w.trace")
    mp = os.path.join(tmp, "mnt")
    with Mount(ARGS.pacsetfs, store, mp, options="no_push_blocks") as m:
        ptrace("record", "--mount", m.mp, "-o", trace, "--", *workload(m.mp))
        recorded = m.stats()["forests"]["rf"]["blocks_fetched"]
    curve = json.loads(ptrace("mrc", trace, "--json").stdout)
    forest = curve["forests"][0]
    fp, accesses = forest["footprint"], forest["accesses"]
    # The default cache holds everything: the recording fetched the cold misses.
    assert recorded == round(forest["cold_misses"]), (recorded, forest["cold_misses"])
    sizes = [fp // 8, fp // 4, fp // 2]
    # The default curve is the daemon's policy (W-TinyLFU, simulated); the
    # exact LRU curve bounds its fetches from above on this traffic.
    mrc = json.loads(ptrace("mrc", trace, "--json", *[f"--at={c}" for c in sizes]).stdout)
    assert mrc["forests"][0]["policy"] == "w-tinylfu", mrc["forests"][0]["policy"]
    lru = json.loads(ptrace("mrc", trace, "--json", "--policy", "lru",
                            *[f"--at={c}" for c in sizes]).stdout)["at"]
    at = mrc["at"]
    report = []
    for c, want, upper in zip(sizes, at, lru):
        assert want["cache"] == c and upper["cache"] == c
        os.remove(marks)
        with Mount(ARGS.pacsetfs, store, mp, options=f"no_push_blocks,cache_size={c}") as m:
            run(workload(m.mp))
            st = m.stats()["forests"]["rf"]
        got, predicted = st["blocks_fetched"], want["misses"]
        assert st["fetched_bytes"] == got * 4096, st  # the cache counts what the curve weighs
        report.append(f"{c // 4096} blocks: predicted {predicted:.0f}, fetched {got}, "
                      f"LRU {upper['misses']:.0f}")
        assert predicted > round(forest["cold_misses"]), (c, want)  # the size matters
        assert abs(got - predicted) <= 0.10 * predicted, report
        assert upper["misses"] >= got, report
    # The text says the same and names the memory for 90/99/99.9% hits.
    text = ptrace("mrc", trace).stdout
    assert "99.9% hits" in text and "rf" in text, text
    print(f"    {accesses} accesses, footprint {fp // 4096} blocks; " + "; ".join(report))


def test_pack_with_weights_from_a_recorded_trace(tmp):
    with mounted(tmp) as m:
        trace = os.path.join(tmp, "t.trace")
        ptrace("record", "--cold", "--per-row", "-o", trace, "--",
               *predict_cmd(m, "-o", os.devnull, "--evict-between-rows", "--mark-requests", "row"))
    out = os.path.join(tmp, "repacked.pac")
    r = pacset("pack", DATA["model"], "-o", out, "--block-size", "4KiB", "--weights-from-trace",
               trace, "--traced-pac", DATA["pac"])
    assert "80 requests replayed" in r.stdout, r.stdout
    info = json.loads(pacset("info", out, "--json").stdout)
    assert info["source"]["cardinality"] == "trace", info["source"]
    assert pacset("predict", out, "-i", DATA["rows"]).stdout == \
        pacset("predict", DATA["pac"], "-i", DATA["rows"]).stdout
    # The traced file must be the one that was mounted.
    other = os.path.join(tmp, "dfs.pac")
    pacset("pack", DATA["model"], "-o", other, "--block-size", "4KiB", "--layout", "dfs")
    r = pacset("pack", DATA["model"], "-o", out, "--weights-from-trace", trace, "--traced-pac",
               other, check=False)
    assert r.returncode == 1 and "not the file traced" in r.stderr, r.stderr
    r = pacset("pack", DATA["model"], "-o", out, "--weights-from-trace", trace, check=False)
    assert r.returncode == 1 and "--traced-pac" in r.stderr, r.stderr


def test_record_finds_the_mount_its_command_reads_among_several(tmp):
    """Other pacsetfs mounts on the machine (another user's, another test's)
    must not confuse record: the command's paths name the mount."""
    decoy_store = "rocksdb:" + os.path.join(tmp, "decoy-store")
    pacset("import", DATA["pac"], "--name", "rf", "--store", decoy_store)
    with Mount(ARGS.pacsetfs, decoy_store, os.path.join(tmp, "decoy")) as decoy, \
            mounted(tmp) as m:
        trace = os.path.join(tmp, "own.trace")
        with open(trace, "w") as f:
            f.write("an earlier output, replaced\n")
        ptrace("record", "--cold", "-o", trace, "--", *predict_cmd(m, "-o", os.devnull))
        rep = json.loads(ptrace("report", trace, "--json").stdout)
        assert rep["trace"]["accesses"] > 0 and rep["forests"][0]["name"] == "rf", rep["trace"]
        assert "trace" not in decoy.stats() and decoy.stats()["forests"] == {}, decoy.stats()
        r = ptrace("record", "-o", os.path.join(tmp, "t3"), "--", "true", check=False)
        assert r.returncode == 1 and "several pacsetfs mounts" in r.stderr, r.stderr


def test_a_daemon_killed_mid_trace_leaves_a_readable_trace(tmp):
    trace = os.path.join(tmp, "killed.trace")
    m = mounted(tmp, trace=trace).__enter__()
    try:
        run(predict_cmd(m, "-o", os.devnull))
        time.sleep(0.2)
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait(timeout=10)
    finally:
        m.__exit__(None, None, None)
    size = os.path.getsize(trace)
    assert size > 64
    full = json.loads(ptrace("report", trace, "--json").stdout)
    assert full["trace"]["accesses"] > 0
    with open(trace, "rb") as f:
        data = f.read()
    cut = os.path.join(tmp, "cut.trace")
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 21])  # mid-record
    rep = json.loads(ptrace("report", cut, "--json").stdout)
    assert rep["trace"]["torn_tail_bytes"] == 27, rep["trace"]
    assert rep["trace"]["records"] == full["trace"]["records"] - 1


def test_errors_are_clear_and_exit_codes_follow_the_convention(tmp):
    notatrace = os.path.join(tmp, "x.csv")
    with open(notatrace, "w") as f:
        f.write("1,2,3\n")
    r = ptrace("report", notatrace, check=False)
    assert r.returncode == 1 and "not a pacsetfs trace" in r.stderr, r.stderr
    with open(notatrace, "wb") as f:
        f.write(b"PACTRACE\x02\x00")
    r = ptrace("report", notatrace, check=False)
    assert r.returncode == 1 and "truncated trace header" in r.stderr, r.stderr
    r = ptrace("report", check=False)
    assert r.returncode == 2, r.returncode
    # With no pacsetfs mount in sight: a private mount namespace where every
    # pacsetfs mount of the machine (another test's, a user's) is detached.
    detach = ('awk \'$3 == "fuse.pacsetfs" {print $2}\' /proc/self/mounts | '
              'while read -r m; do umount -l "$(printf "%b" "$m")"; done; exec "$@"')
    r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", detach, "sh",
             ARGS.pacset_trace, "record", "-o", os.path.join(tmp, "t"), "--", "true"], check=False)
    assert r.returncode == 1 and ("no pacsetfs mount" in r.stderr or "several" in r.stderr), r.stderr
    with mounted(tmp, trace=os.path.join(tmp, "running.trace")) as m:
        r = ptrace("record", "--mount", m.mp, "-o", os.path.join(tmp, "t2"), "--", "true",
                   check=False)
        assert r.returncode == 1 and "already tracing" in r.stderr, r.stderr
        run(predict_cmd(m, "-o", os.devnull))
    r = ptrace("compare", os.path.join(tmp, "running.trace"), "--model", DATA["pac"], "-i",
               DATA["rows"], "--forest", "nosuch", check=False)
    assert r.returncode == 1 and "no forest named 'nosuch'" in r.stderr, r.stderr
    r = ptrace("compare", os.path.join(tmp, "running.trace"), "--model", DATA["pac"], "-i",
               DATA["rows"], check=False)
    assert r.returncode == 1 and "no request marks" in r.stderr, r.stderr
    r = pacset("predict", DATA["pac"], "-i", DATA["rows"], "--mark-requests", "row", check=False)
    assert r.returncode == 1 and "--marks-file" in r.stderr, r.stderr
    r = pacset("predict", DATA["pac"], "-i", DATA["rows"], "--mark-requests", "often", check=False)
    assert r.returncode == 2, r.returncode


# ---------------------------------------------------------------- runner ---

def main():
    return fslib.main(sys.modules[__name__], prepare, lambda tmp: tmp, "pacset-trace",
                      "pacset-trace-test-", tools=("pacset", "pacsetfs", "pacset-trace"))

if __name__ == "__main__":
    sys.exit(main())
