"""tf.data for Estimator input functions, on loom's datasets.

A Dataset records its source and each transformation (batch, shuffle,
repeat, take, prefetch, cache, map); the loom dataset is made when the
estimator calls the input_fn (or when the dataset is iterated) and the
whole pipeline runs in C:
 - Dataset.from_tensor_slices: loom_dataset_from_tensors_taken reads the
   arrays in place (no copy of a C-contiguous array of a loom dtype; one
   converted copy otherwise), never per epoch;
 - TFRecordDataset, TextLineDataset, FixedLengthRecordDataset:
   loom_dataset_records (one scalar string per element; GZIP / ZLIB);
 - experimental.CsvDataset, experimental.make_csv_dataset: loom's CSV reader
   (loom_dataset_csv);
 - Dataset.map(fn): fn is traced once, as TF traces it, with symbolic
   tensors (loom.Output placeholders of the element's dtypes and shapes)
   into a loom graph; loom_dataset_map_graph runs that graph per element
   (a session run in C, no Python per element). The ops fn may use are
   the loom.tf ones that build graph nodes (tf.io.parse_single_example /
   parse_example / decode_csv / decode_raw, tf.cast, tf.reshape,
   arithmetic, tf.strings ...); anything else raises NotImplementedError
   naming it."""
import ctypes as C
import glob as _glob
import os

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Dataset as _LoomDataset, Graph, Output, _Status, _b, STRING, I64, _NP2LOOM, _LOOM2NP, LoomError
from . import random as _random
from . import dtypes as _dt
from . import errors as _errors
from ._surface import missing, unsupported

AUTOTUNE = -1
LABEL = "__labels__"  # the label component of the loom dataset
FEATURES = "__features__"  # the component of an element that is one tensor (not a dict)


def _loom_dtype(dt):
    """numpy dtype (object: strings) -> loom_dtype."""
    if dt is object or np.dtype(dt).kind in "OSU":
        return STRING
    return _NP2LOOM[np.dtype(dt)]


def _np_dtype(code):
    return object if code == STRING else _LOOM2NP[code]


class _Comp:
    """One component of an element: name, numpy dtype (object for strings),
    shape (None: varies), ragged (0 dense; 1 a row, 2 a batch of rows: a
    SparseTensor, loom's values + "<name>/row_splits" pair)."""
    __slots__ = ("name", "dtype", "shape", "ragged")

    def __init__(self, name, dtype, shape, ragged=0):
        self.name, self.dtype, self.shape, self.ragged = name, dtype, tuple(shape), ragged

    def batched(self, n):
        if self.ragged:
            return _Comp(self.name, self.dtype, (None,), 2)
        return _Comp(self.name, self.dtype, (n,) + self.shape)


class SparseTensor:
    """tf.sparse.SparseTensor of a VarLenFeature inside a traced function:
    loom keeps it ragged (values, row_splits); .values is a tensor, the
    other TF views raise NotImplementedError."""

    def __init__(self, indices, values, dense_shape):
        raise unsupported("SparseTensor(indices, values, dense_shape) (making a sparse tensor); loom's sparse "
                          "tensors are the VarLenFeatures tf.io.parse_example gives")

    @classmethod
    def _ragged(cls, values, row_splits, batched):
        """A VarLenFeature's values and row splits (what parsing makes)."""
        t = object.__new__(cls)
        t.values, t._row_splits, t._batched = values, row_splits, batched
        return t

    @property
    def dtype(self):
        return self.values.dtype

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported("sparse.SparseTensor." + name)


class SparseTensorValue:
    """tf.compat.v1.SparseTensorValue: what iterating a dataset gives for a
    VarLenFeature (indices int64 [nnz, rank], values, dense_shape)."""

    def __init__(self, indices, values, dense_shape):
        self.indices, self.values, self.dense_shape = indices, values, dense_shape

    def __repr__(self):
        return "SparseTensorValue(indices=%r, values=%r, dense_shape=%r)" % (self.indices, self.values,
                                                                            self.dense_shape)


def _sparse_value(values, splits, batched):
    """values + row_splits -> SparseTensorValue (TF's layout)."""
    splits = np.asarray(splits, np.int64)
    lens = np.diff(splits)
    if not batched:
        n = len(values)
        return SparseTensorValue(np.arange(n, dtype=np.int64).reshape(n, 1), values, np.array([n], np.int64))
    rows = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    cols = np.concatenate([np.arange(k, dtype=np.int64) for k in lens]) if len(lens) else np.zeros(0, np.int64)
    return SparseTensorValue(np.stack([rows, cols], 1) if len(rows) else np.zeros((0, 2), np.int64), values,
                             np.array([len(lens), int(lens.max()) if len(lens) else 0], np.int64))


def _leaves(struct):
    if isinstance(struct, dict):
        return [n for v in struct.values() for n in _leaves(v)]
    if isinstance(struct, tuple):
        return [n for v in struct for n in _leaves(v)]
    return [struct]


def _fill(struct, values):
    if isinstance(struct, dict):
        return {k: _fill(v, values) for k, v in struct.items()}
    if isinstance(struct, tuple):
        return tuple(_fill(v, values) for v in struct)
    return values[struct]


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


class _DatasetType(type):
    def __getattr__(cls, name):  # tf.data.Dataset.<a static method loom.tf lacks>
        if name.startswith("_"):
            raise AttributeError(name)
        raise missing("data.Dataset.", name)


class Dataset(metaclass=_DatasetType):
    """tf.data.Dataset: a source (arrays, record files, CSV files) and its
    transformations, made into a loom dataset when used."""

    def __init__(self, features, labels, ops=(), source=None, spec=None, struct=None):
        self._features = features  # from_tensor_slices: dict of arrays, or one array
        self._labels = labels      # an array or None
        self._ops = tuple(ops)
        self._source = source      # other sources: a function making the loom dataset
        self._src_spec, self._src_struct = spec, struct
        self._spec_cache = None

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
        return Dataset(self._features, self._labels, self._ops + (op,), self._source, self._src_spec,
                       self._src_struct)

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

    def skip(self, count, name=None):
        return self._with("skip", int(count))

    def shard(self, num_shards, index, name=None):
        """Element i of each pass is kept when i % num_shards == index (TF's Dataset.shard: a worker's share,
        e.g. shard(config.num_worker_replicas, worker index))."""
        num_shards, index = int(num_shards), int(index)
        if num_shards < 1 or not 0 <= index < num_shards:
            raise _errors.InvalidArgumentError(3, "Dataset.shard: num_shards must be >= 1 and index in [0, "
                                               "num_shards), got num_shards %d, index %d" % (num_shards, index))
        return self._with("shard", num_shards, index)

    def filter(self, predicate, name=None):
        """Traces predicate once (a scalar bool of the element) into a loom
        graph, run per element in C (loom_dataset_filter_graph)."""
        spec, struct = self._spec_struct()
        return self._with("filter", _Traced(predicate, spec, struct, predicate=True))

    def prefetch(self, buffer_size, name=None):
        return self._with("prefetch", int(buffer_size))

    def cache(self, filename="", name=None):
        if self._source is None and not self._has_map():
            if filename:
                raise unsupported("data.Dataset.cache(filename)")
            if any(op[0] == "shuffle" for op in self._ops):
                # TF's cache after shuffle replays the first pass's order; loom would reshuffle
                raise NotImplementedError("loom.tf: Dataset.cache() after shuffle() is not supported (it would "
                                          "replay the first order); cache before shuffling")
            return self  # the arrays are in memory already: caching them changes nothing
        return self._with("cache", os.fspath(filename))

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """Traces map_func once with symbolic tensors (as TF does) into a
        loom graph, run per element in C (loom_dataset_map_graph)."""
        spec, struct = self._spec_struct()
        traced = _Traced(map_func, spec, struct)
        return self._with("map", traced)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        """Over a dataset of file names (from_tensor_slices of names, or
        list_files): map_func(name) makes a dataset per file (called with
        the name as bytes, not a symbolic tensor); their elements are
        interleaved in TF's order (loom_dataset_interleave). cycle_length
        None / AUTOTUNE: the number of CPUs this process may use, as TF."""
        names = self._file_names("interleave")
        if cycle_length is None or cycle_length == AUTOTUNE:
            cycle_length = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        cycle, block = int(cycle_length), 1 if block_length is None else int(block_length)
        if cycle < 1 or block < 1:
            raise ValueError("Dataset.interleave: cycle_length and block_length must be >= 1")
        first = map_func(names[0]) if names else None
        if not isinstance(first, Dataset):
            raise NotImplementedError("loom.tf: Dataset.interleave: map_func must return a tf.data dataset of the "
                                      "file it is given (TFRecordDataset(f), TextLineDataset(f), ...), got %s"
                                      % type(first).__name__)
        spec, struct = first._spec_struct()

        def make():
            subs = []
            try:
                for n in self._file_names("interleave"):
                    d = map_func(n)
                    if not isinstance(d, Dataset):
                        raise NotImplementedError("loom.tf: Dataset.interleave: map_func returned %s"
                                                  % type(d).__name__)
                    subs.append(d._loom())
                arr = (C.c_void_p * len(subs))(*[d._release() for d in subs])
            except BaseException:
                for d in subs:
                    d.__del__()
                raise
            st = _Status()
            p = lib.loom_dataset_interleave(len(subs), arr, cycle, block, st.p)
            if not p:
                st.raise_if()
            return _LoomDataset(p)
        return Dataset(None, None, (), make, spec, struct)

    def flat_map(self, map_func, name=None):
        """interleave with cycle_length 1: each file's dataset in turn."""
        return self.interleave(map_func, cycle_length=1, block_length=1)

    def _file_names(self, what):
        """The file names this dataset yields (a dataset of scalar strings:
        from_tensor_slices of names or list_files, shuffled or not), read
        once in order (with its shuffle's seed) when the pipeline is made."""
        spec, struct = self._spec_struct()
        if len(spec) != 1 or spec[0].dtype is not object or spec[0].shape != () or spec[0].ragged or \
                any(op[0] == "repeat" and op[1] < 0 for op in self._ops):
            raise NotImplementedError("loom.tf: Dataset.%s over a dataset other than a finite one of file names "
                                      "(tf.data.Dataset.from_tensor_slices(names) or list_files) is not supported"
                                      % what)
        return [n for n in self]

    @staticmethod
    def range(*args, output_type=None, name=None):  # noqa: A003 - TF's name
        """tf.data.Dataset.range(stop) / (start, stop[, step]): int64 scalars."""
        if not 1 <= len(args) <= 3:
            raise TypeError("Dataset.range takes 1 to 3 positional arguments, got %d" % len(args))
        if any(a is None for a in args):
            raise NotImplementedError("loom.tf: an unbounded Dataset.range is not supported; use repeat()")
        dt = np.int64 if output_type is None else _dt.as_dtype(output_type).as_numpy_dtype
        return Dataset.from_tensor_slices(np.arange(*[int(a) for a in args], dtype=np.int64).astype(dt))

    @staticmethod
    def from_tensors(tensors, name=None):
        """tf.data.Dataset.from_tensors: one element, the whole tensors."""
        def one(x):
            if hasattr(x, "to_dict") and hasattr(x, "columns"):
                return {str(k): np.asarray(x[k])[None] for k in x.columns}
            if isinstance(x, dict):
                return {k: np.asarray(v)[None] for k, v in x.items()}
            return np.asarray(x)[None]
        if isinstance(tensors, tuple):
            return Dataset.from_tensor_slices(tuple(one(t) for t in tensors))
        return Dataset.from_tensor_slices(one(tensors))

    @staticmethod
    def zip(*args, datasets=None, name=None):  # noqa: A003 - TF's name
        """tf.data.Dataset.zip((a, b, ...)): tuples of their elements, until
        the shortest ends (loom_dataset_zip). Dict keys keep their names (they
        must differ between the datasets); zip((features, labels)) is what an
        estimator's input_fn returns."""
        if datasets is None:
            datasets = args[0] if len(args) == 1 else tuple(args)
        if isinstance(datasets, dict):
            raise NotImplementedError("loom.tf: Dataset.zip of a dict of datasets is not supported; give a tuple")
        if not isinstance(datasets, tuple) or not datasets or not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("Dataset.zip: give a tuple of tf.data datasets")
        pair = len(datasets) == 2
        structs, renames, spec = [], [], []
        for i, d in enumerate(datasets):
            sp, st = d._spec_struct()
            if isinstance(st, dict) and all(isinstance(v, str) for v in st.values()):
                ren = {v: k for k, v in st.items()}
                new = {k: k for k in st}
            elif isinstance(st, str):
                nm = (LABEL if i == 1 else FEATURES) if pair else "__t%d" % i
                ren, new = {st: nm}, nm
            else:
                raise NotImplementedError("loom.tf: Dataset.zip of datasets whose elements are tuples is not "
                                          "supported; zip datasets of dicts or of single tensors")
            structs.append(new)
            renames.append(ren)
            spec += [_Comp(ren[c.name], c.dtype, c.shape, c.ragged) for c in sp]
        names = [c.name for c in spec]
        if len(set(names)) != len(names):
            raise ValueError("Dataset.zip: the datasets share keys %s" % sorted({n for n in names if names.count(n) > 1}))
        label = LABEL if pair and structs[1] == LABEL else None

        def make():
            subs = []
            try:
                for d, ren in zip(datasets, renames):
                    subs.append(_rename(d._loom(), ren, label if LABEL in ren.values() else None))
                arr = (C.c_void_p * len(subs))(*[x._release() for x in subs])
            except BaseException:
                for x in subs:
                    x.__del__()
                raise
            st = _Status()
            p = lib.loom_dataset_zip(len(subs), arr, st.p)
            if not p:
                st.raise_if()
            return _LoomDataset(p)
        return Dataset(None, None, (), make, spec, tuple(structs))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None):
        """tf.data.Dataset.list_files: the files matching the pattern(s),
        sorted, then shuffled (shuffle None means True, as TF)."""
        pats = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
        names = sorted({m for p in pats for m in _glob.glob(os.fsdecode(p))})
        if not names:
            raise ValueError("tf.data.Dataset.list_files: no files match %s" % pats)
        ds = Dataset.from_tensor_slices(np.array([n.encode() for n in names], dtype=object))
        return ds.shuffle(len(names), seed=seed) if shuffle is None or shuffle else ds

    def _has_map(self):
        return any(op[0] in ("map", "skip", "filter") for op in self._ops)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise missing("data.Dataset.", name)

    # ---- element spec (tracked here, so that map can trace without building the pipeline)
    def _slices_spec(self):
        def comp(name, a):  # the dtype _convert(a, None, ...) gives, without converting (copying) the array
            dt = object if a.dtype.kind in "OSU" else np.dtype(np.float32) if a.dtype == np.float64 else a.dtype
            return _Comp(name, dt, a.shape[1:])
        if isinstance(self._features, dict):
            spec = [comp(k, v) for k, v in self._features.items()]
            fs = {k: k for k in self._features}
        else:
            spec, fs = [comp(FEATURES, self._features)], FEATURES
        if self._labels is None:
            return spec, fs
        return spec + [comp(LABEL, self._labels)], (fs, LABEL)

    def _spec_struct(self):
        if self._spec_cache is None:
            spec, struct = (self._src_spec, self._src_struct) if self._source else self._slices_spec()
            for op in self._ops:
                if op[0] == "batch":
                    spec = [c.batched(op[1] if op[2] else None) for c in spec]
                elif op[0] == "map":
                    spec, struct = op[1].out_spec, op[1].out_struct
            self._spec_cache = (spec, struct)
        return self._spec_cache

    @property
    def element_spec(self):
        """The element's structure with (dtype, shape) leaves (TF's TensorSpec as a tuple)."""
        spec, struct = self._spec_struct()
        by = {c.name: (_dt.as_dtype(c.dtype), c.shape) for c in spec}
        return _fill(struct, by)

    # ---- into loom
    def _loom(self, hints=None, label_dtype=None):
        """The loom_dataset (a loom.Dataset) of this pipeline; features are
        converted to hints' dtypes ({key: numpy dtype}, the columns')."""
        hints = hints or {}
        general = self._source is not None or self._has_map()
        if self._source is not None:
            ds = self._source()
        else:
            h = {} if general else hints
            if isinstance(self._features, dict):
                arrays = {k: _convert(v, h.get(k), k) for k, v in self._features.items()}
            else:
                arrays = {FEATURES: _convert(self._features, None, "features")}
            if self._labels is not None:
                arrays[LABEL] = _convert(self._labels, None if general else label_dtype, "labels")
            ds = _LoomDataset.from_tensor_slices(arrays, label=LABEL if self._labels is not None else None)
        for op in self._ops:
            kind, args = op[0], op[1:]
            if kind == "prefetch":
                ds = ds._take_over(lib.loom_dataset_prefetch, args[0])
            elif kind == "cache":
                ds = ds._take_over(lib.loom_dataset_cache, _b(args[0]))
            elif kind == "map" or kind == "filter":
                ds = args[0].build(ds)
            elif kind == "skip":
                ds = ds._take_over(lib.loom_dataset_skip, args[0])
            elif kind == "shard":
                ds = ds._take_over(lib.loom_dataset_shard, args[0], args[1])
            else:
                ds = getattr(ds, kind)(*args)
        if general and (hints or label_dtype is not None):
            ds = _conform(ds, hints, label_dtype)
        return ds

    def _features_are_dict(self):
        if self._source is None and not self._has_map():
            return isinstance(self._features, dict)
        struct = self._spec_struct()[1]
        return isinstance(struct, dict) or (isinstance(struct, tuple) and isinstance(struct[0], dict))

    def _without_labels(self):
        """The dataset an estimator's predict reads (TF ignores labels there)."""
        if self._source is None and not self._has_map():
            return Dataset(self._features, None, self._ops)
        return self  # loom's predict skips the label component

    def __iter__(self):
        """Elements as numpy (TF's as_numpy_iterator): the dataset's
        structure, scalar strings as bytes, VarLen features as
        SparseTensorValue; a failing element raises TF's error class."""
        try:
            yield from self._elements()
        except LoomError as e:
            raise _errors.from_loom(e) from None

    def _elements(self):
        if self._source is None and not self._has_map():
            for el in self._loom():
                el = {k: v[()] if v.ndim == 0 else v for k, v in el.items()}  # scalars as numpy scalars / bytes
                lab = el.pop(LABEL, None)
                f = el.pop(FEATURES) if FEATURES in el else el
                yield f if self._labels is None else (f, lab)
            return
        spec, struct = self._spec_struct()
        for el in self._loom():
            vals = {}
            for c in spec:
                v = el[c.name]
                if c.ragged:
                    vals[c.name] = _sparse_value(v, el[c.name + "/row_splits"], c.ragged == 2)
                else:
                    vals[c.name] = v[()] if v.ndim == 0 else v
            yield _fill(struct, vals)

    def as_numpy_iterator(self):
        return iter(self)

    def __repr__(self):
        return "<loom.tf.data.Dataset element_spec=%r>" % (self.element_spec,)


def _conform(ds, hints, label_dtype):
    """Casts components to the estimator's dtypes (a feature column's, the
    label's) with one more traced stage, when any differs."""
    n = lib.loom_dataset_num_components(ds.p)
    label = lib.loom_dataset_label_index(ds.p)
    comps = []
    change = False
    for i in range(n):
        name = lib.loom_dataset_component_name(ds.p, i).decode()
        dt = _np_dtype(lib.loom_dataset_component_dtype(ds.p, i))
        want = label_dtype if i == label else hints.get(name)
        if want is not None and want is not object and dt is not object and np.dtype(want) != np.dtype(dt) and \
                lib.loom_dataset_component_row_splits(ds.p, i) < 0 and not name.endswith("/row_splits"):
            comps.append((name, dt, np.dtype(want)))
            change = True
        elif want is not None and (want is object) != (dt is object) and not name.endswith("/row_splits"):
            raise ValueError("feature %r: the column takes %s, the input is %s" % (
                name, "strings" if want is object else np.dtype(want).name, "strings" if dt is object else
                np.dtype(dt).name))
        else:
            comps.append((name, dt, None))
    if not change:
        return ds
    g = Graph()
    ins, outs, names, ragged = [], [], [], []
    for i, (name, dt, want) in enumerate(comps):
        d = (L.i64 * 8)()
        nd = lib.loom_dataset_component_shape(ds.p, i, d)
        p = g.placeholder(_loom_dtype(dt), tuple(None if d[j] < 0 else d[j] for j in range(nd)), "in%d" % i)
        ins.append(p)
        outs.append(g.cast(p, want) if want is not None else g.identity(p))
        names.append(name)
        ragged.append(2 if lib.loom_dataset_component_row_splits(ds.p, i) >= 0 else 0)
    lname = comps[label][0] if label >= 0 else None
    return _map_graph(ds, g, ins, names, outs, ragged, lname)


def _rename(ds, renames, label):
    """The same components under new names ({old: new}; a ragged pair's
    splits follow its values), label the one named label (None: no label),
    with one more traced identity stage."""
    n = lib.loom_dataset_num_components(ds.p)
    g = Graph()
    ins, outs, names, ragged = [], [], [], []
    i = 0
    while i < n:
        name = lib.loom_dataset_component_name(ds.p, i).decode()
        pair = lib.loom_dataset_component_row_splits(ds.p, i) == i + 1
        for k in range(2 if pair else 1):
            d = (L.i64 * 8)()
            nd = lib.loom_dataset_component_shape(ds.p, i + k, d)
            p = g.placeholder(lib.loom_dataset_component_dtype(ds.p, i + k),
                              tuple(None if d[j] < 0 else d[j] for j in range(nd)), "in%d" % (i + k))
            ins.append(p)
            outs.append(g.identity(p))
        new = renames.get(name, name)
        if pair:
            d = (L.i64 * 8)()
            lib.loom_dataset_component_shape(ds.p, i + 1, d)
            names += [new, new + "/row_splits"]
            ragged += [1 if d[0] == 2 else 2, 0]
            i += 2
        else:
            names.append(new)
            ragged.append(0)
            i += 1
    return _map_graph(ds, g, ins, names, outs, ragged, label)


def _map_graph(ds, g, ins, names, outs, ragged, label):
    """loom_dataset_map_graph (takes ds and g over)."""
    n = len(outs)
    st = _Status()
    ia = (L.Output * max(1, len(ins)))(*[x.c for x in ins])
    oa = (L.Output * n)(*[x.c for x in outs])
    na = (C.c_char_p * n)(*[_b(x) for x in names])
    ra = (L.i32 * n)(*ragged)
    g._own = False  # the dataset frees the graph
    p = lib.loom_dataset_map_graph(ds._release(), g.p, len(ins), ia, n, na, oa, ra, _b(label), st.p)
    if not p:
        st.raise_if()
    return _LoomDataset(p)


class _Traced:
    """A map function traced with symbolic tensors; built anew (traced
    again) each time the pipeline is made, as the loom dataset takes the
    graph over."""

    def __init__(self, fn, in_spec, in_struct, predicate=False):
        self.fn, self.in_spec, self.in_struct, self.predicate = fn, in_spec, in_struct, predicate
        _, _, _, _, _, _, self.out_spec, self.out_struct = self._trace()

    def _trace(self):
        g = Graph()
        ins, sym = [], {}
        for i, c in enumerate(self.in_spec):
            if c.ragged:
                v = g.placeholder(_loom_dtype(c.dtype), (None,), "in%d" % i)
                sp = g.placeholder(I64, (2,) if c.ragged == 1 else (None,), "in%d_splits" % i)
                ins += [v, sp]
                sym[c.name] = SparseTensor._ragged(v, sp, c.ragged == 2)
            else:
                p = g.placeholder(_loom_dtype(c.dtype), c.shape, "in%d" % i)
                ins.append(p)
                sym[c.name] = p
        args = _fill(self.in_struct, sym)
        res = self.fn(*args) if isinstance(self.in_struct, tuple) else self.fn(args)
        if self.predicate:
            if not isinstance(res, Output) or res.dtype != np.bool_ or res.shape != ():
                raise ValueError("Dataset.filter: the predicate must return a scalar tf.bool tensor, got %r" % (res,))
            g._check()
            return g, ins, None, res, None, None, self.in_spec, self.in_struct
        # the output structure: TF's (features, label) pair, a dict, a tuple, or one tensor
        if isinstance(res, list):
            res = tuple(res)
        if isinstance(res, tuple) and len(res) == 2 and not isinstance(res[1], (dict, tuple)) and \
                not isinstance(res[0], tuple):
            fs = {str(k): str(k) for k in res[0]} if isinstance(res[0], dict) else FEATURES
            struct, label = (fs, LABEL), LABEL
            vals = dict(res[0]) if isinstance(res[0], dict) else {FEATURES: res[0]}
            vals[LABEL] = res[1]
        elif isinstance(res, dict):
            struct, label, vals = {str(k): str(k) for k in res}, None, {str(k): v for k, v in res.items()}
        elif isinstance(res, tuple):
            struct, vals = [], {}
            for j, r in enumerate(res):
                if isinstance(r, dict):
                    struct.append({str(k): str(k) for k in r})
                    vals.update({str(k): v for k, v in r.items()})
                elif isinstance(r, tuple):
                    raise NotImplementedError("loom.tf: Dataset.map: a function returning nested tuples is not "
                                              "supported; return (features, label), a dict or a tuple of tensors")
                else:
                    struct.append("__t%d" % j)
                    vals["__t%d" % j] = r
            struct, label = tuple(struct), None
        else:
            struct, label, vals = FEATURES, None, {FEATURES: res}
        names, outs, ragged, spec = [], [], [], []
        inputs = {id(x) for x in ins}
        for name in _leaves(struct):
            v = vals[name]
            if isinstance(v, SparseTensor):
                names += [name, name + "/row_splits"]
                outs += [g.identity(v.values), g.identity(v._row_splits)]
                ragged += [2 if v._batched else 1, 0]
                spec.append(_Comp(name, v.values.dtype, (None,), 2 if v._batched else 1))
                continue
            if not isinstance(v, Output):
                from .serving import constant
                v = g.constant(constant(v)) if not (isinstance(v, np.ndarray) and v.dtype == object) else None
                if v is None:
                    raise NotImplementedError("loom.tf: Dataset.map: a string constant as an output is not supported")
            elif v.graph is not g:
                raise ValueError("Dataset.map: output %r is not built from the function's inputs" % name)
            if id(v) in inputs or v.op == "Placeholder":
                v = g.identity(v)
            names.append(name)
            outs.append(v)
            ragged.append(0)
            spec.append(_Comp(name, v.dtype, v.shape))
        g._check()
        return g, ins, names, outs, ragged, label, spec, struct

    def build(self, ds):
        g, ins, names, outs, ragged, label, _, _ = self._trace()
        if self.predicate:
            st = _Status()
            ia = (L.Output * max(1, len(ins)))(*[x.c for x in ins])
            g._own = False  # the dataset frees the graph
            p = lib.loom_dataset_filter_graph(ds._release(), g.p, len(ins), ia, outs.c, st.p)
            if not p:
                st.raise_if()
            return _LoomDataset(p)
        return _map_graph(ds, g, ins, names, outs, ragged, label)


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


# ---------------------------------------------------------------- sources
_COMPRESSION = {None: 0, "": 0, "GZIP": 1, "ZLIB": 2}


def _compression(c, what):
    if c not in _COMPRESSION:
        raise ValueError("%s: compression_type must be None, \"\", \"GZIP\" or \"ZLIB\", got %r" % (what, c))
    return _COMPRESSION[c]


def _filenames(filenames, what):
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if isinstance(filenames, Dataset):
        raise NotImplementedError("loom.tf: %s(filenames=<a Dataset>): give a file name or a list of them" % what)
    out = [os.fsdecode(f) for f in np.asarray(list(filenames), dtype=object).reshape(-1)]
    if not out:
        raise ValueError("%s: filenames is empty" % what)
    return out


def _records(what, fmt, filenames, compression_type, record_bytes=0, header_bytes=0, footer_bytes=0,
             num_parallel_reads=None):
    paths = _filenames(filenames, what)
    comp = _compression(compression_type, what)
    if num_parallel_reads is not None and len(paths) > 1 and num_parallel_reads != 1:
        # TF reads the files through interleave(cycle_length=num_parallel_reads, block_length=1), in that order
        names = Dataset.from_tensor_slices(np.array([os.fsencode(p) for p in paths], dtype=object))
        return names.interleave(lambda f: _records(what, fmt, f, compression_type, record_bytes, header_bytes,
                                                   footer_bytes), cycle_length=num_parallel_reads, block_length=1)

    def make():
        o = lib.loom_records_options_default()
        o.format, o.compression = fmt, comp
        o.record_bytes, o.header_bytes, o.footer_bytes = record_bytes, header_bytes, footer_bytes
        o.name = _b(FEATURES)
        arr = (C.c_char_p * len(paths))(*[_b(p) for p in paths])
        st = _Status()
        p = lib.loom_dataset_records(len(paths), arr, C.byref(o), st.p)
        if not p:
            st.raise_if()
        return _LoomDataset(p)
    return Dataset(None, None, (), make, [_Comp(FEATURES, object, ())], FEATURES)


def TFRecordDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):  # noqa: N802
    """tf.data.TFRecordDataset: each record's bytes (a scalar string)."""
    return _records("TFRecordDataset", 0, filenames, compression_type, num_parallel_reads=num_parallel_reads)


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):  # noqa: N802
    """tf.data.TextLineDataset: each line, without its line break."""
    return _records("TextLineDataset", 1, filenames, compression_type, num_parallel_reads=num_parallel_reads)


def FixedLengthRecordDataset(filenames, record_bytes, header_bytes=None, footer_bytes=None, buffer_size=None,  # noqa: N802
                             compression_type=None, num_parallel_reads=None, name=None):
    """tf.data.FixedLengthRecordDataset: records of record_bytes bytes after
    header_bytes, before footer_bytes."""
    if int(record_bytes) <= 0:
        raise ValueError("FixedLengthRecordDataset: record_bytes must be > 0, got %r" % (record_bytes,))
    return _records("FixedLengthRecordDataset", 2, filenames, compression_type, int(record_bytes),
                    int(header_bytes or 0), int(footer_bytes or 0), num_parallel_reads)


class _Experimental:
    AUTOTUNE = AUTOTUNE

    def __getattr__(self, name):
        raise missing("data.experimental.", name)


experimental = _Experimental()


def __getattr__(name):
    raise missing("data.", name)


from ._data_csv import CsvDataset, make_csv_dataset, make_batched_features_dataset  # noqa: E402
from ._data_generator import from_generator as _from_generator  # noqa: E402
Dataset.from_generator = staticmethod(_from_generator)
_Experimental.CsvDataset = staticmethod(CsvDataset)
_Experimental.make_csv_dataset = staticmethod(make_csv_dataset)
_Experimental.make_batched_features_dataset = staticmethod(make_batched_features_dataset)
