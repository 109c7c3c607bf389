"""A crafted forest (issue 31) reaches the Python package as a file, as Dask
frames from another worker, or through a mount: it raises ValueError naming
what is wrong, whatever path it takes; the process never crashes."""
import os
import sys

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import pacset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "security"))
import pac_craft  # noqa: E402


@pytest.fixture(scope="module")
def rf3(data):
    X, y = data
    est = RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(X, y)
    return pacset.load(est, block_size=4096)


def crafted(forest, edit):
    """The forest's bytes with `edit` applied and every checksum valid again."""
    header, frames = forest.frames()
    p = pac_craft.Pac(b"".join(bytes(f) for f in frames))
    edit(p)
    return header, p.reseal().data


EDITS = {
    # Tree 0 ends on an inline value added to acc[0x7FFFFFFF].
    "inline root, group 0x7fffffff": (lambda p: p.set_tree(0, kind=2, root=0x3F800000,
                                                           group=0x7FFFFFFF),
                                      "tree 0 has output group 2147483647"),
    "group = outputs": (lambda p: p.set_tree(0, group=3), "tree 0 has output group 3"),
    "leaf width 2": (lambda p: p.hset("I", 52, 2), "leaf width 2"),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_crafted_frames_raise_value_error_naming_the_problem(rf3, case):
    edit, words = EDITS[case]
    header, data = crafted(rf3, edit)
    with pytest.raises(ValueError, match=words):
        pacset.Forest.from_frames(header, [data])


@pytest.mark.parametrize("case", list(EDITS))
def test_crafted_files_raise_value_error_naming_the_problem(rf3, case, tmp_path):
    edit, words = EDITS[case]
    _, data = crafted(rf3, edit)
    path = tmp_path / "crafted.pac"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=words):
        pacset.open(path)
    with pytest.raises(ValueError, match=words):
        pacset.load(str(path))


def test_a_shared_subtree_gives_errors_or_predictions_never_a_crash(rf3, data, tmp_path):
    """Tree 1's root made tree 0's: every reference is in bounds; warm
    requests find the sharing when they copy the nodes."""
    def share(p):
        root, _, kind = p.tree(0)
        p.set_tree(1, root=root, kind=kind)
    header, bytes_ = crafted(rf3, share)
    forest = pacset.Forest.from_frames(header, [bytes_])
    X = data[0].astype(np.float32)
    errors = 0
    for _ in range(6):
        try:
            forest.predict(X)
        except ValueError as e:
            assert "tree 1" in str(e)
            errors += 1
    assert errors > 0
