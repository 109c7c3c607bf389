"""Loads Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)."""
import gzip
import os

import numpy as np

ROOT = "/usr/share/datasets/fashion-mnist"


def _read(name, offset):
    with gzip.open(os.path.join(ROOT, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(split="train"):
    prefix = "train" if split == "train" else "t10k"
    X = _read(f"{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float64)
    y = _read(f"{prefix}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return X, y
