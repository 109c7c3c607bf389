"""Zero-copy frames: a forest's frames are memoryviews of its own storage (the
mapping of a .pac file, or the packed buffer), Dask serializes a Forest with
pacset's dask serializer into exactly those frames, and deserializing reads
the frames in place."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import pacset


def address(buf):
    return np.frombuffer(buf, dtype=np.uint8).__array_interface__["data"][0]


def mapped_ranges(path):
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                yield lo, hi


@pytest.fixture(scope="module")
def forest(data):
    X, y = data
    return pacset.load(RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y))


def test_frames_of_an_opened_file_are_views_of_its_mapping(forest, tmp_path, data):
    forest.save(tmp_path / "f.pac")
    opened = pacset.open(tmp_path / "f.pac")
    header, frames = opened.frames()
    assert len(frames) == 1 and isinstance(frames[0], memoryview) and frames[0].readonly
    assert frames[0].nbytes == os.path.getsize(tmp_path / "f.pac") == header["nbytes"]
    start = address(frames[0])
    assert any(lo <= start and start + frames[0].nbytes <= hi
               for lo, hi in mapped_ranges(tmp_path / "f.pac")), "the frame is not the file's mapping"
    assert bytes(frames[0]) == (tmp_path / "f.pac").read_bytes()


def test_from_frames_reads_a_contiguous_frame_in_place(forest, data):
    header, frames = forest.frames()
    assert address(frames[0]) == address(memoryview(forest._core))
    buf = np.frombuffer(bytes(frames[0]), dtype=np.uint8).copy()  # writable, owned by numpy
    rebuilt = pacset.Forest.from_frames(header, [buf])
    assert address(memoryview(rebuilt._core)) == address(buf)  # no copy
    assert np.array_equal(rebuilt.predict(data[0]), forest.predict(data[0]))
    # Several frames (Dask splits large ones) are joined.
    cut = [frames[0][:1000], frames[0][1000:]]
    assert np.array_equal(pacset.Forest.from_frames(header, cut).predict(data[0]),
                          forest.predict(data[0]))


def test_dask_serializes_a_forest_with_the_dask_serializer_without_copying(forest, data):
    from distributed.protocol import deserialize, serialize

    header, frames = serialize(forest)
    assert header["serializer"] == "dask"
    assert len(frames) == 1 and isinstance(frames[0], memoryview)
    assert address(frames[0]) == address(memoryview(forest._core))
    back = deserialize(header, frames)
    assert isinstance(back, pacset.Forest)
    assert address(memoryview(back._core)) == address(frames[0])
    assert np.array_equal(back.predict(data[0]), forest.predict(data[0]))


@pytest.mark.parametrize("order", ["pacset first", "distributed first"])
def test_the_serializer_is_registered_whichever_is_imported_first(order, tmp_path, forest):
    forest.save(tmp_path / "f.pac")
    imports = ["import pacset", "from distributed.protocol import serialize"]
    if order == "distributed first":
        imports.reverse()
    code = "; ".join(imports + [f"f = pacset.open({str(tmp_path / 'f.pac')!r})",
                                "print(serialize(f)[0]['serializer'])"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dask"


def test_pickle_protocol_5_passes_the_bytes_out_of_band(forest, data):
    buffers = []
    blob = pickle.dumps(forest, protocol=5, buffer_callback=buffers.append)
    assert len(blob) < 1000 and len(buffers) == 1
    assert address(buffers[0].raw()) == address(memoryview(forest._core))
    back = pickle.loads(blob, buffers=buffers)
    assert np.array_equal(back.predict(data[0]), forest.predict(data[0]))
    assert np.array_equal(pickle.loads(pickle.dumps(forest)).predict(data[0]),
                          forest.predict(data[0]))
