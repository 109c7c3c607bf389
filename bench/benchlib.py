"""Shared by the Python store and scale benchmarks: common arguments, tool
paths, a work directory, a forest packed once per block size, spreads, CPU
and redis counters, and a program's files to read back after a cache drop."""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testkit"))
from fslib import run  # noqa: E402


def add_common_args(ap):
    """--bin, --model, --rows, --work (the rf682 reference forest by default)."""
    ap.add_argument("--bin", required=True, help="directory with pacset and pacsetfs")
    ap.add_argument("--model", default="/work/models/rf682/rf.joblib")
    ap.add_argument("--rows", default="/work/models/rf682/test.csv")
    ap.add_argument("--work", help="keep packed models here (default: a temp dir)")


def setup(a, prefix):
    """(pacset, pacsetfs, work directory) from the common arguments."""
    work = a.work or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    return (os.path.abspath(os.path.join(a.bin, "pacset")),
            os.path.abspath(os.path.join(a.bin, "pacsetfs")), work)


def packed(pacset, model, work, block_size):
    """The model packed with `block_size` blocks (done once per work dir); a
    .pac model is used as it is."""
    if model.endswith(".pac"):
        return model
    pac = os.path.join(work, f"forest-{block_size}.pac")
    if not os.path.exists(pac):
        run([pacset, "pack", model, "-o", pac, "--block-size", block_size])
    return pac


def block_size(pacset, pac):
    """The block size a .pac file was packed with (from `pacset info`; a .pac
    given as the model keeps its own, whatever --block-sizes says)."""
    return json.loads(run([pacset, "info", pac, "--json"]).stdout)["block_size"]


def spread(xs, scale=1.0, fmt="{:.1f}"):
    """median [min-max]"""
    xs = [x * scale for x in xs]
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def minor_faults(pid):
    """Minor page faults of a process so far: its threads' (ended ones too),
    not its children's (/proc/PID/stat field 10)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_usec_per_get(nodes):
    """Server CPU per GET (microseconds) over fslib.Redis nodes, since their
    last CONFIG RESETSTAT."""
    calls = usec = 0
    for n in nodes:
        for line in n.cli("info", "commandstats").splitlines():
            if line.startswith("cmdstat_get:"):
                fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
                calls += int(fields["calls"])
                usec += int(fields["usec"])
    return usec / calls if calls else float("nan")


def program_files(binary):
    """The program, the shared libraries it loads and its store plugins with
    theirs (ldd), as real paths: what stays in memory when a benchmark calls
    the program warm and only the forest cold."""
    binary = os.path.realpath(shutil.which(binary) or binary)
    files = [binary, "/etc/ld.so.cache"]
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    files += re.findall(r"=> (/\S+)", out)
    files += re.findall(r"^\s*(/\S+) \(", out, re.M)  # the dynamic loader
    # Where the program looks for them (store/internal/backend_plugin.h):
    # lib/pacset/ of a build tree, lib/<multiarch>/pacset/ once installed.
    lib = os.path.join(os.path.dirname(binary), "..", "lib")
    for plugin in glob.glob(f"{lib}/pacset/*.so") + glob.glob(f"{lib}/*/pacset/*.so"):
        out = subprocess.run(["ldd", plugin], capture_output=True, text=True).stdout
        files += [plugin] + re.findall(r"=> (/\S+)", out)  # and what it loads (librocksdb...)
    return sorted(set(os.path.realpath(f) for f in files))


def read_whole(path):
    """Reads the file at `path` to its end (into the page cache)."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def warm(files):
    """Reads back every file of `files` (after a cache drop)."""
    for f in files:
        read_whole(f)
