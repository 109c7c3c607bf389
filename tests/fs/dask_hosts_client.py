#!/usr/bin/python3
"""The Dask client of dask_hosts_test.py, run on one of its hosts (a network
namespace: only the scheduler's namespace address reaches the cluster).

Predicts the rows of ROWS.npy with pacset.dask.predict(MODEL, X), MODEL being
a path that exists on the workers only, X a dask array of CHUNK-row chunks:
the first len(HOSTS) equal shares of the rows computed on the workers of one
host each (worker restrictions), all at once. Writes OUT/predictions.npy and
OUT/placement.json: for each prediction chunk, the worker that computed it
(from the scheduler's task stream).

Usage: dask_hosts_client.py --scheduler ADDR --model PATH --rows ROWS.npy
                            --chunk N --hosts IP,IP --out DIR
"""
import argparse
import json
import os
import re

import dask.array as da
import numpy as np
from distributed import Client, get_task_stream

import pacset.dask


def prediction_chunk(key, y, shares, chunks_per_share):
    """The chunk of y a task key computed, or None for other tasks. Keys are
    (name, index) with y's name or, when Dask fused the prediction with the
    slicing, "..._predict_block-getitem-TOKEN" with a share's token."""
    m = re.match(r"\('([\w-]+)', (\d+)\)$", key)
    if not m or "predict_block" not in m.group(1):
        return None
    name, index = m.group(1), int(m.group(2))
    if name == y.name:
        return index
    for i, part in enumerate(shares):
        if name.endswith("-" + part.name.rsplit("-", 1)[-1]):
            return i * chunks_per_share + index
    return None


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--scheduler", "--model", "--rows", "--hosts", "--out"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--chunk", type=int, required=True)
    args = ap.parse_args()
    hosts = args.hosts.split(",")
    rows = np.load(args.rows)
    with Client(args.scheduler, timeout=60) as client:
        client.wait_for_workers(len(hosts), timeout=60)
        workers = {h: [w for w in client.scheduler_info()["workers"] if w.split("//")[-1].split(":")[0] == h]
                   for h in hosts}
        assert all(workers.values()), f"a host has no worker: {workers}"
        X = da.from_array(rows, chunks=(args.chunk, -1))
        # Only the blocks the rows' walks need: no sequential read of the
        # whole node region for a large request (pacset.open's
        # sequential_reads), so each host's trace names its rows' blocks.
        y = pacset.dask.predict(args.model, X, open_options={"sequential_reads": False})
        share = len(rows) // len(hosts)
        assert share % args.chunk == 0, "a host's share must be whole chunks"
        shares = [y[i * share:(i + 1) * share] for i in range(len(hosts))]
        with get_task_stream(client) as stream:
            parts = [client.compute(part, workers=workers[h], allow_other_workers=False)
                     for part, h in zip(shares, hosts)]
            got = np.concatenate(client.gather(parts))
        placement = {}
        for task in stream.data:
            chunk = prediction_chunk(str(task["key"]), y, shares, share // args.chunk)
            if chunk is not None:
                placement[chunk] = task["worker"]
    np.save(os.path.join(args.out, "predictions.npy"), got)
    with open(os.path.join(args.out, "placement.json"), "w") as f:
        json.dump({"workers": workers, "chunks": placement}, f)


if __name__ == "__main__":
    main()
