#!/usr/bin/env python3
"""Rewrites the tree_sizes= line of LightGBM text models after a hand edit.

LightGBM (GBDT::LoadModelFromString) finds tree i at the byte offset
sum(tree_sizes[:i]) from the first "Tree=" line; a block runs from its "Tree="
line to the next "Tree=" or "end of trees" line. Usage: update_tree_sizes.py FILE...
"""
import re
import sys

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        text = f.read().decode()
    starts = [m.start() for m in re.finditer(r"^Tree=", text, re.M)]
    end = re.search(r"^end of trees$", text, re.M).start()
    sizes = [b - a for a, b in zip(starts, starts[1:] + [end])]
    text = re.sub(r"^tree_sizes=.*$", "tree_sizes=" + " ".join(map(str, sizes)), text,
                  count=1, flags=re.M)
    with open(path, "wb") as f:
        f.write(text.encode())
