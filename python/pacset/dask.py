"""Predicting dask arrays and dataframes on a distributed cluster.

    from distributed import Client
    import pacset, pacset.dask
    client = Client("scheduler:8786")
    y = pacset.dask.predict(forest, X)            # X: dask.array or dask.dataframe
    y = pacset.dask.predict("/models/f.pac", X)   # every worker maps the file itself

A Forest is broadcast to every worker once (as its packed bytes, see
pacset._dask_serialize) and shared by all their tasks. A path is opened by
each worker process (once, while the file stays the same): on a pacsetfs
mount nothing is shipped and each worker reads only the blocks its rows
touch. The result is lazy, like X: call .compute() or persist it.
"""

import os
import threading

import numpy as np

from . import Forest, _source_family, open as _open_forest

__all__ = ["predict"]

_opened = {}
_opened_lock = threading.Lock()


def _forest_at(path, options):
    """The worker's Forest for `path` opened with pacset.open(**options),
    opened again when the file changes (a re-import on a mount shows up as a
    new file)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _opened_lock:
        cached = _opened.get((path, options))
        if cached is not None and cached[0] == key:
            return cached[1]
    forest = _open_forest(path, **dict(options))
    with _opened_lock:
        _opened[(path, options)] = (key, forest)
    return forest


def _resolve(model):
    """A Forest, or (path, open options) for the worker to open itself."""
    return _forest_at(*model) if isinstance(model, tuple) else model


def _output_spec(model, margin):
    """(columns, dtype) of predictions."""
    forest = _resolve(model)
    cols = forest.num_outputs if margin else forest._core.num_columns(False)
    return cols, np.dtype(forest._out_dtype())


def _predict_block(block, model, margin, n_threads):
    forest = _resolve(model)
    return forest._predict(block, margin, n_threads)


def _predict_partition(df, model, margin, n_threads, columns):
    import pandas as pd

    out = _predict_block(df, model, margin, n_threads)
    if out.ndim == 1:
        return pd.Series(out, index=df.index)
    return pd.DataFrame(out, index=df.index, columns=columns)


def predict(forest_or_path, X, *, margin=False, n_threads=1, client=None, open_options=None):
    """Forest.predict (or predict_margin) over X, a dask.array (2-D; rows may
    be chunked, columns are joined into one chunk) or a dask.dataframe.
    Returns a dask.array for an array, a dask Series / DataFrame for a
    dataframe. n_threads is per task (Dask already runs tasks in parallel).
    Given a path, each worker opens it with pacset.open(path, **open_options)."""
    import dask.array as da
    import dask.dataframe as dd
    from distributed import get_client

    client = client or get_client()
    if isinstance(forest_or_path, (str, os.PathLike)):
        model = (os.fspath(forest_or_path), tuple(sorted((open_options or {}).items())))
        # The path may exist on the workers only: ask one for the output shape.
        cols, dtype = client.submit(_output_spec, model, margin, pure=False).result()
    elif isinstance(forest_or_path, Forest):
        cols, dtype = _output_spec(forest_or_path, margin)
        model = client.scatter(forest_or_path, broadcast=True, hash=False)
    else:
        raise TypeError("forest_or_path must be a pacset.Forest or the path of a .pac file")

    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (rows x features), not {X.ndim}-D")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        if cols == 1:
            return X.map_blocks(
                _predict_block, model, margin, n_threads, dtype=dtype, drop_axis=1,
                chunks=(X.chunks[0],),
            )
        return X.map_blocks(
            _predict_block, model, margin, n_threads, dtype=dtype, chunks=(X.chunks[0], (cols,)),
        )
    if isinstance(X, dd.DataFrame):
        import pandas as pd

        columns = list(range(cols))
        if cols == 1:
            meta = pd.Series([], dtype=dtype)
        else:
            meta = pd.DataFrame({c: pd.Series([], dtype=dtype) for c in columns})
        return X.map_partitions(
            _predict_partition, model, margin, n_threads, columns, meta=meta,
            align_dataframes=False,
        )
    raise TypeError(f"X must be a dask.array or a dask.dataframe, not {type(X).__name__}")
