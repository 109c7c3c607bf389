"""pacset: decision forests packed for few I/O blocks per prediction.

    import pacset
    forest = pacset.load(model)          # a model file or a fitted xgboost / scikit-learn object
    forest.save("forest.pac")
    forest = pacset.open("/models/forest.pac")   # a mapping: a local file or a pacsetfs mount
    p = forest.predict(X)                # numpy (float32/float64, C or Fortran order) or pandas

Predictions are exactly the training library's (see docs/exactness.md); NaN
is a missing value. Bad input raises ValueError saying what is wrong.
`pacset.dask.predict` runs a forest over dask arrays and dataframes.
"""

import json
import os

import numpy as np

from . import _core
from ._core import PacsetError

__all__ = ["Forest", "PacsetError", "load", "open"]

_PAC_MAGIC = b"PACSET\r\n"
_PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle")
_FRAME_FORMAT = "pacset-pac"


# The packer's "choose for me" and "as many trees as fit a block" (layout/pack.h
# kChooseBins, kTreesPerBinFit), spelt as `pacset pack` spells them.
_CHOOSE_BINS = 0
_TREES_PER_BIN_FIT = 0xFFFFFFFF


def _bin_option(value, name, words):
    if isinstance(value, str):
        if value not in words:
            raise ValueError(f"{name} must be a number or one of {', '.join(sorted(words))}")
        return words[value]
    if int(value) < 1:
        raise ValueError(f"{name} must be at least 1 (or 'auto')")
    return int(value)


def _pack_options(layout, block_size, bin_depth, trees_per_bin, leaf_ids):
    if isinstance(block_size, str):
        block_size = _core.parse_byte_size(block_size.strip(), "block_size")
    return {
        "layout": str(layout),
        "block_size": int(block_size),
        "bin_depth": _bin_option(bin_depth, "bin_depth", {"auto": _CHOOSE_BINS}),
        "trees_per_bin": _bin_option(
            trees_per_bin, "trees_per_bin", {"auto": _CHOOSE_BINS, "fit": _TREES_PER_BIN_FIT}
        ),
        "leaf_ids": bool(leaf_ids),
    }


def _threads(n_threads):
    if n_threads is None:
        return 0  # one per core
    n = int(n_threads)
    if n < 0:
        raise ValueError(f"n_threads must be positive or None, not {n_threads}")
    return n


def _is_pandas_frame(x):
    return type(x).__module__.startswith("pandas.") and hasattr(x, "dtypes") and hasattr(x, "to_numpy")


def _frame_rows(X, category_values=False):
    """A pandas DataFrame as a 2-D numpy array. Numeric and bool columns are
    read as numbers (missing values, pd.NA included, as NaN); `category`
    columns as their category codes, as XGBoost reads them
    (enable_categorical=True), with a missing value as NaN. The codes follow
    the column's own categories: a frame must list them as the training
    frame did (pd.Categorical(values, categories=the training categories)).
    With category_values (scikit-learn forests: its check_array converts a
    category column to its values) a category column is read by its values,
    which must be numbers. float32 when every column is float32 or read as
    codes, else float64."""
    import pandas as pd

    if X.ndim != 2:
        raise ValueError("expected a DataFrame of rows")
    categorical = []
    all_f32 = True
    for name, dtype in X.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype) and category_values:
            if not pd.api.types.is_numeric_dtype(dtype.categories.dtype):
                raise ValueError(f"column {name!r} has {dtype.categories.dtype} categories; "
                                 "scikit-learn reads a category column by its values, which "
                                 "must be numbers (as in training): pass the numbers")
            categorical.append(False)
            all_f32 = all_f32 and dtype.categories.dtype == np.float32
            continue
        if isinstance(dtype, pd.CategoricalDtype):
            categorical.append(True)
            if len(dtype.categories) > 1 << 24:
                raise ValueError(f"column {name!r} has {len(dtype.categories)} categories; "
                                 "pacset reads at most 2^24")
            continue
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise ValueError(f"column {name!r} has dtype {dtype}; pacset needs numeric or "
                             "category columns (encode strings as a pandas category)")
        categorical.append(False)
        all_f32 = all_f32 and dtype == np.float32
    dtype = np.float32 if all_f32 else np.float64
    if not any(categorical):
        return X.to_numpy(dtype=dtype, na_value=np.nan)
    out = np.empty(X.shape, dtype=dtype)
    for j, is_cat in enumerate(categorical):
        column = X.iloc[:, j]
        if is_cat:
            codes = column.cat.codes.to_numpy()
            out[:, j] = codes
            out[codes < 0, j] = np.nan
        else:
            out[:, j] = column.to_numpy(dtype=dtype, na_value=np.nan)
    return out


def _rows(X, category_values=False):
    """X as a 2-D float32/float64 numpy array, read in place when it is one
    (category_values: see _frame_rows)."""
    if _is_pandas_frame(X):
        X = _frame_rows(X, category_values)
    elif not isinstance(X, np.ndarray):
        if hasattr(X, "toarray") or hasattr(X, "tocsr"):
            raise ValueError("sparse matrices are not supported; pass a dense array")
        try:
            X = np.asarray(X)
        except (ValueError, TypeError) as e:
            raise ValueError(f"X is not a 2-D array of numbers: {e}") from None
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features), not {X.ndim}-D with shape {X.shape}")
    kind = X.dtype.kind
    if kind == "f" and X.dtype.itemsize in (4, 8):
        if not X.dtype.isnative:
            X = X.astype(X.dtype.newbyteorder("="))
        return X
    if kind in "fiub":
        return X.astype(np.float64)
    raise ValueError(f"X has dtype {X.dtype}; pacset needs numbers (float32 or float64 are read in place)")


def _source_family(source):
    fmt = source.get("source_format", "")
    for family in ("xgboost", "sklearn", "lightgbm"):
        if fmt.startswith(family):
            return family
    return "arrays"


class Forest:
    """A packed forest: a mapping of a .pac file or the packed bytes in memory.

    Immutable; predict, predict_margin and apply may run from many threads at
    once (they release the GIL while they walk the trees).
    """

    __slots__ = ("_core", "_info", "_source")

    def __init__(self, core):
        self._core = core
        self._info = core.info()
        text = self._info.pop("source_json")
        try:
            self._source = json.loads(text) if text else {}
        except ValueError:
            self._source = {}

    # ---- what it is ----
    @property
    def num_features(self):
        return self._info["num_features"]

    @property
    def num_trees(self):
        return self._info["num_trees"]

    @property
    def num_outputs(self):
        return self._info["num_outputs"]

    @property
    def num_classes(self):
        return self._info["num_classes"]

    @property
    def task(self):
        return self._info["task"]

    @property
    def source(self):
        """Where the forest came from (format, library version, objective, layout)."""
        return dict(self._source)

    @property
    def info(self):
        return dict(self._info)

    @property
    def path(self):
        """The mapped .pac file, or None for a forest held in memory."""
        return self._core.path or None

    @property
    def nbytes(self):
        return self._core.nbytes

    @property
    def build_seconds(self):
        """For a forest built here (load, from_arrays): seconds spent importing
        or building it, laying it out and encoding it; {} for an opened one."""
        return dict(self._core.build_seconds)

    def __repr__(self):
        where = self._core.path or "in memory"
        return (
            f"<pacset.Forest {self.task}, {self.num_trees} trees, {self.num_features} features, "
            f"{self.nbytes} bytes, {where}>"
        )

    # ---- predictions ----
    def _family(self):
        return _source_family(self._source)

    def _out_dtype(self):
        if self._family() == "xgboost":
            return np.float32
        if self._family() == "arrays" and self._info["float32_outputs"]:
            return np.float32
        return np.float64

    def _reads_category_values(self):
        """scikit-learn converts a DataFrame's category column to its values
        (check_array), XGBoost and LightGBM read its codes."""
        return self._family() == "sklearn"

    def _predict(self, X, margin, n_threads):
        X = _rows(X, self._reads_category_values())
        f32 = self._out_dtype() == np.float32
        out = self._core.predict(X, margin, _threads(n_threads), f32)
        if out.shape[1] == 1:
            out = out[:, 0]
        return out

    def predict(self, X, *, n_threads=None):
        """What the library predicts: XGBoost Booster.predict (float32),
        scikit-learn predict_proba for classifiers and predict for regressors
        (float64), IsolationForest.predict (int64: -1 outlier, 1 inlier),
        LightGBM predict. One column comes back 1-D."""
        if self._is_isolation_forest():
            decision = self.decision_function(X, n_threads=n_threads)
            labels = np.ones_like(decision, dtype=int)  # as IsolationForest.predict
            labels[decision < 0] = -1
            return labels
        link = self._numpy_link()
        if link is not None:
            return link(self._predict(X, True, n_threads))
        return self._predict(X, False, n_threads)

    def _numpy_link(self):
        """HistGradientBoosting's softmax and exp links, as scikit-learn 1.2
        computes them with numpy (utils.extmath.softmax, LogLink.inverse):
        numpy's exp can differ from C's (which `pacset predict` uses) by 1
        ulp where numpy has its own SIMD exp, so the Python API applies
        numpy's to pacset's exact margins. None for other forests."""
        if self._family() != "sklearn" or not str(self._source.get("objective", "")).startswith(
            "HistGradientBoosting"
        ):
            return None
        post = self._info.get("postprocess")
        if post == "softmax":

            def softmax(raw):
                p = np.array(raw, dtype=np.float64)
                p -= np.max(p, axis=1).reshape((-1, 1))
                np.exp(p, out=p)
                p /= np.sum(p, axis=1).reshape((-1, 1))
                return p

            return softmax
        if post == "exponential":
            return lambda raw: np.exp(np.asarray(raw, dtype=np.float64))
        return None

    # ---- scikit-learn IsolationForest ----
    def _is_isolation_forest(self):
        return "isolation_denominator" in self._info

    def score_samples(self, X, *, n_threads=None):
        """IsolationForest.score_samples, bit for bit: the trees' path lengths
        are summed by pacset (predict_margin), and the score is computed here
        with numpy's own power, as scikit-learn does (C's pow, which `pacset
        predict` uses, can differ from numpy's by 1 ulp)."""
        if not self._is_isolation_forest():
            raise ValueError(
                "score_samples is an IsolationForest method; this forest is a "
                f"{self.source.get('objective', self.task)}: use predict or predict_margin"
            )
        depths = np.asarray(self._predict(X, True, n_threads), dtype=np.float64)
        denominator = self._info["isolation_denominator"]
        # IsolationForest._compute_score_samples, then score_samples' negation.
        scores = 2 ** (
            -np.divide(depths, denominator, out=np.ones_like(depths), where=denominator != 0)
        )
        return -scores

    def decision_function(self, X, *, n_threads=None):
        """IsolationForest.decision_function: score_samples - offset_. For
        other models use predict_margin."""
        if not self._is_isolation_forest():
            raise ValueError(
                "decision_function here is the IsolationForest method; for this forest's raw "
                "scores use predict_margin"
            )
        return self.score_samples(X, n_threads=n_threads) - self._info["isolation_offset"]

    def predict_margin(self, X, *, n_threads=None):
        """Raw scores before the link function: XGBoost output_margin=True,
        scikit-learn decision_function (gradient boosting; forests: the mean
        of the trees' outputs; IsolationForest: the sum over the trees of
        the path lengths, score_samples' `depths`), LightGBM raw_score=True."""
        return self._predict(X, True, n_threads)

    def apply(self, X, *, n_threads=None):
        """The leaf each row reaches in each tree, as the library numbers and
        shapes them: XGBoost pred_leaf (float32, rows x trees), scikit-learn
        apply (int64 rows x trees; one tree: 1-D; gradient boosting: float64
        rows x stages x outputs), LightGBM pred_leaf (int32)."""
        X = _rows(X, self._reads_category_values())
        leaves = self._core.apply(X, _threads(n_threads))
        family = self._family()
        if family == "xgboost":
            return leaves.astype(np.float32)
        if family == "sklearn":
            estimator = self._source.get("objective", "")
            if estimator == "GradientBoostingClassifier":
                k = self.num_outputs
                return leaves.astype(np.float64).reshape(leaves.shape[0], -1, k)
            if estimator == "GradientBoostingRegressor":
                return leaves.astype(np.float64)
            if estimator.startswith(("DecisionTree", "ExtraTree")) and not estimator.startswith(
                "ExtraTrees"
            ):
                return leaves[:, 0].astype(np.int64)
            return leaves.astype(np.int64)
        return leaves

    # ---- bytes ----
    def save(self, path):
        """Writes the .pac file (atomically: a crash leaves the old file or the new one)."""
        self._core.save(os.fspath(path))

    def frames(self):
        """(header, frames): the packed bytes as memoryviews of this forest's
        storage (the mapping or the buffer), no copy. Dask ships forests this way."""
        header = {"format": _FRAME_FORMAT, "version": 1, "nbytes": self.nbytes}
        return header, [memoryview(self._core)]

    @classmethod
    def from_frames(cls, header, frames):
        """The inverse of frames(). One contiguous frame is read in place
        (kept alive by the forest); several frames are joined first (a copy)."""
        if not isinstance(header, dict) or header.get("format") != _FRAME_FORMAT:
            raise ValueError(f"not pacset frames: header {header!r}")
        frames = list(frames)
        if len(frames) == 1:
            buf = frames[0]
            try:
                memoryview(buf).cast("B")
            except TypeError:  # not C-contiguous
                buf = bytes(memoryview(buf))
        else:
            buf = b"".join(memoryview(f).cast("B") for f in frames)
        if memoryview(buf).nbytes != header.get("nbytes", -1):
            raise ValueError(
                f"the frames hold {memoryview(buf).nbytes} bytes, the header says {header.get('nbytes')}"
            )
        return cls(_core.from_buffer(buf, "<forest from frames>"))

    def __reduce_ex__(self, protocol):
        # Protocol 5 can pass the bytes out of band (no copy); older ones copy.
        import pickle

        header, frames = self.frames()
        wrap = pickle.PickleBuffer if protocol >= 5 else bytes
        return (Forest.from_frames, (header, [wrap(f) for f in frames]))

    # ---- building ----
    @classmethod
    def from_arrays(
        cls,
        trees,
        *,
        num_features,
        num_outputs=1,
        num_classes=1,
        leaf_width=1,
        task="regression",
        postprocess="identity",
        sigmoid_alpha=1.0,
        aggregation="sum",
        base_score=0.0,
        decision="<=",
        input_precision="float32",
        accumulate_precision="float64",
        objective="",
        layout="pacset",
        block_size=65536,
        bin_depth=2,
        trees_per_bin="auto",
        leaf_ids=True,
    ):
        """A forest from flat numpy arrays, one dict per tree, read in place:

        left_child, right_child   child ids (int), -1 at leaves
        feature                   split feature (int), ignored at leaves
        threshold                 split value (float), ignored at leaves
        default_left              optional (bool): missing values go left
        leaf_value                leaf_width values per node, read at leaves
        cardinality               optional training counts per node
        group                     optional output index of the tree (leaf_width 1)

        A row goes left when x <= threshold (decision="<=", scikit-learn) or
        x < threshold (decision="<", XGBoost), x first rounded to
        input_precision. The margin of output k is base_score[k] plus the
        leaves of its trees (aggregation "sum"; "mean" divides by their
        number), then postprocess: identity, sigmoid, softmax, class-index,
        exponential or sigmoid-pair.

        Packing options as in load(), except that bin_depth is 2 unless given
        ("auto" tries several depths, each a full placement: the flat builder
        stays quick for very large trees).
        """
        base = np.atleast_1d(np.asarray(base_score, dtype=np.float64))
        if base.size == 1 and num_outputs > 1:
            base = np.full(num_outputs, base[0])
        spec = {
            "num_features": int(num_features),
            "num_outputs": int(num_outputs),
            "num_classes": int(num_classes),
            "leaf_width": int(leaf_width),
            "task": task,
            "postprocess": postprocess,
            "sigmoid_alpha": float(sigmoid_alpha),
            "aggregation": aggregation,
            "base_score": [float(b) for b in base],
            "decision": decision,
            "input_precision": input_precision,
            "accumulate_precision": accumulate_precision,
            "objective": str(objective),
        }
        if isinstance(trees, dict):
            trees = [trees]
        trees = [{k: (v if k == "group" else np.asarray(v)) for k, v in t.items()} for t in trees]
        pack = _pack_options(layout, block_size, bin_depth, trees_per_bin, leaf_ids)
        return cls(_core.from_arrays(spec, trees, pack))


def open(path, *, verify_blocks=True, max_in_flight=None, sequential_reads=True, isa="auto"):
    """Maps a .pac file (a local file or NAME.pac on a pacsetfs mount): only
    the blocks predictions touch are read.

    verify_blocks: check each block's checksum and index the first time it is
    used (a corrupt block raises instead of predicting wrongly; ~2% warm).
    max_in_flight: most blocks one request reads at once while it waits
    (default: for a local file 512 KiB of blocks, at least 32 — 128 at 4 KiB —
    read through io_uring, 32 with threads of preads; 128 through a pacsetfs
    mount).
    sequential_reads: a request of many rows that would touch a large part of
    the forest (at least one tree walk per 8 node blocks) reads the node
    region sequentially, which is faster; False reads only the blocks the
    rows' walks need (what a per-host block trace should show).
    isa: the widest instruction set warm predictions may use: "auto" (the
    widest this CPU has, capped by PACSET_ISA), "scalar", "avx2" or "avx512"
    (capped by the CPU); info()["warm_isa"] says which one runs."""
    if max_in_flight is not None and int(max_in_flight) < 1:
        raise ValueError("max_in_flight must be at least 1")
    return Forest(_core.open(os.fspath(path), bool(verify_blocks),
                             0 if max_in_flight is None else int(max_in_flight),
                             bool(sequential_reads), str(isa)))


def _sklearn_forest(est, name, pack):
    from . import _sklearn_export as sk

    try:
        doc, trees, value_width = sk.describe(est)
        arrays = []
        for tree_est, output in trees:
            a = sk.tree_arrays(tree_est, value_width)
            if doc["aggregation"] == "sum":
                a["output"] = int(output)
            arrays.append(a)
    except sk.ExportError as e:
        raise ValueError(str(e)) from None
    if "init_raw_prediction" in doc:
        doc["init_raw_prediction"] = [float(x) for x in doc["init_raw_prediction"]]
    if "known_category_bitsets" in doc:
        doc["known_category_bitsets"] = [int(w) for w in doc["known_category_bitsets"]]
    return Forest(_core.load_sklearn(doc, arrays, name, pack))


def _xgboost_forest(model, pack):
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    try:
        raw = booster.save_raw(raw_format="ubj")
        ubjson = True
    except (TypeError, ValueError):
        raw = booster.save_raw(raw_format="json")
        ubjson = False
    return Forest(_core.load_xgboost(bytes(raw), ubjson, "<xgboost.Booster>", pack))


def load(
    model,
    *,
    format="auto",
    layout="pacset",
    block_size=65536,
    bin_depth="auto",
    trees_per_bin="auto",
    leaf_ids=True,
):
    """Packs a model in memory and returns its Forest.

    layout, block_size, bin_depth, trees_per_bin and leaf_ids are `pacset
    pack`'s options with its defaults: bin_depth and trees_per_bin "auto"
    choose the bins that give the fewest blocks per row (trees_per_bin "fit":
    as many trees as fit a block).

    model: a path (XGBoost .json/.ubj, LightGBM text, scikit-learn
    .joblib/.pkl -- unpickling runs code: only files you trust -- or a .pac,
    which is opened), or a fitted object: xgboost.Booster, XGBClassifier,
    XGBRegressor, scikit-learn RandomForest*, ExtraTrees*, GradientBoosting*,
    HistGradientBoosting*, DecisionTree*, ExtraTree*, IsolationForest (their tree
    arrays are read directly).
    """
    pack = _pack_options(layout, block_size, bin_depth, trees_per_bin, leaf_ids)
    if isinstance(model, (str, bytes, os.PathLike)):
        path = os.fsdecode(model)
        head = _core.read_head(path, 8)  # refuses a FIFO or a device at once (ValueError)
        if head == _PAC_MAGIC:
            return open(path)
        pickled = head[:1] == b"\x80" or path.endswith(_PICKLE_SUFFIXES)
        if format in ("sklearn-pickle",) or (format == "auto" and pickled):
            import joblib

            return _sklearn_forest(joblib.load(path), os.path.basename(path), pack)
        return Forest(_core.load_file(path, format, pack))
    module = type(model).__module__
    if module.startswith("xgboost"):
        return _xgboost_forest(model, pack)
    if module.startswith("sklearn"):
        return _sklearn_forest(model, f"<{type(model).__name__}>", pack)
    raise TypeError(
        f"cannot load a {module}.{type(model).__name__}: expected a model file path, an "
        "xgboost Booster/XGBClassifier/XGBRegressor or a scikit-learn tree ensemble"
    )


from . import _dask_serialize  # noqa: E402  (registers Forest with Dask when it is imported)

_dask_serialize.install()
