"""tf.data for Estimator input functions, on loom's in-memory dataset.

Dataset.from_tensor_slices records the arrays and each transformation
(batch, shuffle, repeat, take, prefetch, cache); the loom dataset is made
when the estimator calls the input_fn: the arrays are copied once into
loom_dataset_from_tensors (not per epoch) and the pipeline runs in C."""
import numpy as np

from .._lib import lib
from .. import Dataset as _LoomDataset
from . import random as _random
from ._surface import missing, unsupported

AUTOTUNE = -1
LABEL = "__labels__"  # the label component of the loom dataset


def _columns(x, what):
    """numpy arrays of a structure element: a dict (or a pandas DataFrame) of
    arrays, or one array (a pandas Series, a list)."""
    if hasattr(x, "to_dict") and hasattr(x, "columns"):  # pandas DataFrame
        return {str(k): _array(x[k], k) for k in x.columns}
    if isinstance(x, dict):
        return {str(k): _array(v, k) for k, v in x.items()}
    return _array(x, what)


def _array(v, key):
    if hasattr(v, "to_numpy"):  # pandas
        v = v.to_numpy()
    a = np.asarray(v)
    if a.dtype.kind == "U":
        a = a.astype(object)
    if a.ndim == 0:
        raise ValueError("from_tensor_slices: %r is a scalar; slicing needs at least one dimension" % (key,))
    return a


class Dataset:
    """tf.data.Dataset made by from_tensor_slices, with its transformations."""

    def __init__(self, features, labels, ops=()):
        self._features = features  # dict of arrays, or one array
        self._labels = labels      # an array or None
        self._ops = tuple(ops)

    @staticmethod
    def from_tensor_slices(tensors, name=None):
        if isinstance(tensors, tuple):
            if len(tensors) != 2:
                raise NotImplementedError("loom.tf: from_tensor_slices of a tuple of %d: give (features, labels)"
                                          % len(tensors))
            f, lab = _columns(tensors[0], "features"), _columns(tensors[1], "labels")
            if isinstance(lab, dict):
                raise NotImplementedError("loom.tf: labels as a dict (multi-head) are not supported")
        else:
            f, lab = _columns(tensors, "features"), None
        rows = {k: len(v) for k, v in (f.items() if isinstance(f, dict) else [("features", f)])}
        if lab is not None:
            rows["labels"] = len(lab)
        if len(set(rows.values())) > 1:
            raise ValueError("from_tensor_slices: dimension 0 differs between components: %s" % rows)
        return Dataset(f, lab)

    def _with(self, *op):
        return Dataset(self._features, self._labels, self._ops + (op,))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        if int(batch_size) < 1:
            raise ValueError("Dataset.batch: batch_size must be >= 1, got %r" % (batch_size,))
        return self._with("batch", int(batch_size), bool(drop_remainder))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        if int(buffer_size) < 1:
            raise ValueError("Dataset.shuffle: buffer_size must be >= 1, got %r" % (buffer_size,))
        seed = _random.op_seed(seed)
        return self._with("shuffle", int(buffer_size), seed,
                          True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration))

    def repeat(self, count=None, name=None):
        return self._with("repeat", -1 if count is None else int(count))

    def take(self, count, name=None):
        return self._with("take", int(count))

    def prefetch(self, buffer_size, name=None):
        return self._with("prefetch", int(buffer_size))

    def cache(self, filename="", name=None):
        if filename:
            raise unsupported("data.Dataset.cache(filename)")
        if any(op[0] == "shuffle" for op in self._ops):
            # TF's cache after shuffle replays the first pass's order; loom would reshuffle
            raise NotImplementedError("loom.tf: Dataset.cache() after shuffle() is not supported (it would replay "
                                      "the first order); cache before shuffling")
        return self  # the arrays are in memory already: caching them changes nothing

    def __getattr__(self, name):
        raise missing("data.Dataset.", name)

    # ---- into loom
    def _loom(self, hints=None, label_dtype=None):
        """The loom_dataset (a loom.Dataset) of this pipeline; features are
        converted to hints' dtypes ({key: numpy dtype}, the columns')."""
        hints = hints or {}
        if isinstance(self._features, dict):
            arrays = {k: _convert(v, hints.get(k), k) for k, v in self._features.items()}
        else:
            arrays = {"__features__": self._features}
        if self._labels is not None:
            arrays[LABEL] = _convert(self._labels, label_dtype, "labels")
        ds = _LoomDataset.from_tensor_slices(arrays, label=LABEL if self._labels is not None else None)
        for op in self._ops:
            kind, args = op[0], op[1:]
            if kind == "prefetch":
                ds = ds._take_over(lib.loom_dataset_prefetch, args[0])
            else:
                ds = getattr(ds, kind)(*args)
        return ds

    def __iter__(self):
        """Elements as numpy: (features, labels) or features, as TF's
        as_numpy_iterator."""
        for el in self._loom():
            lab = el.pop(LABEL, None)
            f = el.pop("__features__") if "__features__" in el else el
            yield f if self._labels is None else (f, lab)

    def as_numpy_iterator(self):
        return iter(self)


def _convert(a, dt, key):
    if dt is None:
        if a.dtype == np.float64:
            return a.astype(np.float32)  # TF models compute in float32
        return a
    if dt is object:
        if a.dtype.kind not in "OSU":
            raise ValueError("feature %r: the column takes strings, the input is %s" % (key, a.dtype))
        return a
    if a.dtype.kind in "OSU":
        raise ValueError("feature %r: the column takes %s, the input is strings" % (key, np.dtype(dt).name))
    return a if a.dtype == dt else a.astype(dt)


class _Experimental:
    AUTOTUNE = AUTOTUNE

    def __getattr__(self, name):
        raise missing("data.experimental.", name)


experimental = _Experimental()


def __getattr__(name):
    raise missing("data.", name)
