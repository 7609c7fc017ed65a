"""tf.data.experimental's CSV and batched-features readers
(CsvDataset, make_csv_dataset, make_batched_features_dataset) on loom's
CSV reader (loom_dataset_csv), or on TextLineDataset + tf.io.decode_csv
where loom's reader cannot (compressed files, na_value, no quoting)."""
import csv as _csv
import ctypes as C
import glob as _glob
import os

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Dataset as _LoomDataset, _Status, _b, STRING
from . import dtypes as _dt
from .data import (AUTOTUNE, Dataset, TextLineDataset, TFRecordDataset, _Comp, _compression,
                   _filenames)

_CSV_LOOM = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.int64): 4}


def _default(d, what):
    """A record_defaults / column_defaults entry -> (numpy dtype or object, default text or None)."""
    if isinstance(d, _dt.DType) or isinstance(d, type) or isinstance(d, np.dtype):
        t = _dt.as_dtype(d)
        return t.as_numpy_dtype, None
    from .serving import constant
    a = constant(d) if not isinstance(d, np.ndarray) else d
    a = np.asarray(a)
    if a.size > 1:
        raise ValueError("%s: a default must have at most one element, got %r" % (what, d))
    dt = object if a.dtype.kind in "OSU" else a.dtype
    if dt is not object and np.dtype(dt) not in _CSV_LOOM:
        raise ValueError("%s: a column's dtype must be float32, float64, int32, int64 or string, got %s"
                         % (what, a.dtype))
    if a.size == 0:
        return dt, None
    v = a.reshape(-1)[0]
    text = v.decode() if isinstance(v, bytes) else str(v) if dt is object else repr(v.item())
    return dt, text


def _text_lines(path, compression, encoding="utf-8"):
    """The lines of a text file, plain or GZIP / ZLIB (read lazily: type
    inference and the header need only the first ones)."""
    import gzip
    import zlib
    if compression == 1:
        with gzip.open(path, "rt", newline="", encoding=encoding) as f:
            yield from f
        return
    if compression == 2:
        z, buf = zlib.decompressobj(), b""
        with open(path, "rb") as f:
            while True:
                chunk = f.read(65536)
                buf += z.decompress(chunk) if chunk else z.flush()
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    yield ln.decode(encoding) + "\n"
                if not chunk:
                    break
        if buf:
            yield buf.decode(encoding)
        return
    with open(path, newline="", encoding=encoding) as f:
        yield from f


def _first_row(path, delim, compression=0):
    for row in _csv.reader(_text_lines(path, compression), delimiter=delim):
        return row
    return []


def _csv_text(paths, kinds, select, ncol, header, delim, quote, na_value, compression):
    """CSV through TextLineDataset + tf.io.decode_csv, one file after another
    (what CsvDataset does when loom's CSV reader cannot: compressed files,
    na_value, use_quote_delim=False). Elements: a tuple of the selected
    columns."""
    from . import io as _io
    defaults = []
    for dt, text in kinds:
        if text is None:
            defaults.append(np.zeros(0, dtype=dt))
        elif dt is object:
            defaults.append(np.array([text.encode()], dtype=object))
        else:
            defaults.append(np.array([float(text) if np.dtype(dt).kind == "f" else int(text)], dtype=dt))
    sel = None if select == list(range(len(kinds))) and ncol == len(kinds) else select
    comp = {0: "", 1: "GZIP", 2: "ZLIB"}[compression]

    def per_file(name):
        d = TextLineDataset(name, compression_type=comp)
        if header:
            d = d.skip(1)
        return d.map(lambda line: tuple(_io.decode_csv(line, defaults, delim, quote, na_value, sel)))
    files = Dataset.from_tensor_slices(np.array([os.fsencode(p) for p in paths], dtype=object))
    return files.flat_map(per_file)


def _csv_source(paths, names, kinds, select, header, delim, label):
    """loom_dataset_csv over every column of the files; kinds[i] = (dtype,
    default text) of selected column i (select: their indices)."""
    ncol = len(names)
    sel = dict(zip(select, kinds))

    def make():
        cols = (L.CsvColumn * ncol)()
        keep = []
        for i in range(ncol):
            cols[i].name = _b(names[i] if i in sel and names[i] else "__c%d" % i)
            dt, text = sel.get(i, (object, None))
            cols[i].dtype = STRING if dt is object else _CSV_LOOM[np.dtype(dt)]
            if text is not None:
                b = _b(text)
                keep.append(b)
                cols[i].default_value = b
            cols[i].select = int(i in sel)
        o = lib.loom_csv_options_default()
        o.header, o.delimiter, o.ncolumns, o.columns, o.label_name = header, _b(delim), ncol, cols, _b(label)
        arr = (C.c_char_p * len(paths))(*[_b(p) for p in paths])
        st = _Status()
        p = lib.loom_dataset_csv(len(paths), arr, C.byref(o), st.p)
        if not p:
            st.raise_if()
        return _LoomDataset(p)
    return make


def _csv_via_text(compression_type, use_quote_delim, na_value, what):
    """Whether the CSV goes through TextLineDataset + decode_csv (loom's CSV
    reader reads plain files, RFC 4180 quotes, empty fields as missing)."""
    _compression(compression_type, what)
    return compression_type not in (None, "") or not use_quote_delim or na_value not in ("", None)


def CsvDataset(filenames, record_defaults, compression_type=None, buffer_size=None, header=False,  # noqa: N802
               field_delim=",", use_quote_delim=True, na_value="", select_cols=None, exclude_cols=None, name=None):
    """tf.data.experimental.CsvDataset: a tuple of scalars per line, one per
    (selected) column, of the record_defaults' dtypes."""
    text = _csv_via_text(compression_type, use_quote_delim, na_value, "CsvDataset")
    comp = _compression(compression_type, "CsvDataset")
    paths = _filenames(filenames, "CsvDataset")
    kinds = [_default(d, "CsvDataset record_defaults") for d in record_defaults]
    ncol = len(_first_row(paths[0], field_delim, comp))
    if select_cols is not None and exclude_cols is not None:
        raise ValueError("CsvDataset: select_cols and exclude_cols are mutually exclusive")
    if select_cols is not None:
        select = [int(i) for i in select_cols]
        if select != sorted(set(select)):
            raise ValueError("CsvDataset: select_cols must be sorted ascending without duplicates, got %s" % select)
    elif exclude_cols is not None:
        ex = {int(i) for i in exclude_cols}
        select = [i for i in range(ncol) if i not in ex]
    else:
        select = list(range(len(kinds)))
    if len(select) != len(kinds):
        raise ValueError("CsvDataset: %d record_defaults for %d selected columns" % (len(kinds), len(select)))
    if select and select[-1] >= ncol:
        raise ValueError("CsvDataset: column %d selected, but %s has %d columns" % (select[-1], paths[0], ncol))
    if text:
        return _csv_text(paths, kinds, select, ncol, header, field_delim, use_quote_delim, na_value, comp)
    names = ["__c%d" % i for i in range(ncol)]
    spec = [_Comp(names[i], k[0], ()) for i, k in zip(select, kinds)]
    return Dataset(None, None, (), _csv_source(paths, names, kinds, select, 2 if header else 0, field_delim, None),
                   spec, tuple(c.name for c in spec))


def _fits(v, t):
    try:
        if t in (np.int32, np.int64):
            n = int(v)
            return bool(np.iinfo(t).min <= n <= np.iinfo(t).max)
        with np.errstate(over="ignore"):
            return bool(t(v) < np.inf)
    except (ValueError, OverflowError):
        return False


def _infer(values):
    """TF's make_csv_dataset type inference: per column the first of int32,
    int64, float32, float64, string that every non-empty value parses as;
    string when all are empty."""
    order = [np.int32, np.int64, np.float32, np.float64, object]
    i = None
    for v in values:
        if v == "":
            continue
        j = 0 if i is None else i
        while j < 4 and not _fits(v, order[j]):
            j += 1
        i = j
    return object if i is None else order[i]


def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None, label_name=None,
                     select_columns=None, field_delim=",", use_quote_delim=True, na_value="", header=True,
                     num_epochs=None, shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     prefetch_buffer_size=None, num_parallel_reads=None, sloppy=False, num_rows_for_inference=100,
                     compression_type=None, ignore_errors=False, encoding="utf-8"):
    """tf.data.experimental.make_csv_dataset: batches of ({column: values},
    labels) (or of {column: values} without label_name) read by loom's CSV
    reader; types inferred from the first num_rows_for_inference rows as TF
    does when column_defaults is not given."""
    text = _csv_via_text(compression_type, use_quote_delim, na_value, "make_csv_dataset")
    comp = _compression(compression_type, "make_csv_dataset")
    if ignore_errors:
        raise NotImplementedError("loom.tf: make_csv_dataset(ignore_errors=True) is not supported")
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
    paths = []
    for pat in patterns:
        found = sorted(_glob.glob(os.fsdecode(pat)))
        if not found:
            raise ValueError("make_csv_dataset: no files match %r" % (pat,))
        paths += found
    first = _first_row(paths[0], field_delim, comp)
    if column_names is None:
        if not header:
            raise ValueError("Expected `column_names` or `header` argument to be provided.")
        column_names = first
    column_names = [str(c) for c in column_names]
    if len(set(column_names)) != len(column_names):
        raise ValueError("Expected `column_names` to be unique, got %s" % column_names)
    if len(first) != len(column_names):
        raise ValueError("make_csv_dataset: %s has %d columns, column_names names %d" % (paths[0], len(first),
                                                                                          len(column_names)))
    if select_columns is not None:
        idx = []
        for c in select_columns:
            if isinstance(c, str):
                if c not in column_names:
                    raise ValueError("Value %r in `select_columns` is not a column name" % c)
                idx.append(column_names.index(c))
            else:
                idx.append(int(c))
        select = sorted(set(idx))
    else:
        select = list(range(len(column_names)))
    if label_name is not None and label_name not in [column_names[i] for i in select]:
        raise ValueError("`label_name` provided must be one of the columns: %s" % [column_names[i] for i in select])
    if column_defaults is not None:
        kinds = [_default(d, "make_csv_dataset column_defaults") for d in column_defaults]
        if len(kinds) != len(select):
            raise ValueError("make_csv_dataset: %d column_defaults for %d columns" % (len(kinds), len(select)))
    else:
        rows = []
        for p in paths:
            r = _csv.reader(_text_lines(p, comp, encoding), delimiter=field_delim)
            if header:
                next(r, None)
            for row in r:
                rows.append([v if v != na_value else "" for v in row])
                if len(rows) >= num_rows_for_inference:
                    break
            if len(rows) >= num_rows_for_inference:
                break
        kinds = []
        for i in select:
            t = _infer([row[i] if i < len(row) else "" for row in rows])
            kinds.append((t, "" if t is object else "0"))
    names = column_names
    if text:
        sel_names = [names[i] for i in select]

        def to_dict(*cols):
            d = dict(zip(sel_names, cols))
            return (d, d.pop(label_name)) if label_name is not None else d
        ds = _csv_text(paths, kinds, select, len(names), header, field_delim, use_quote_delim, na_value,
                       comp).map(to_dict)
    else:
        src = _csv_source(paths, names, kinds, select, 2 if header else 0, field_delim, label_name)
        spec = [_Comp(names[i], k[0], ()) for i, k in zip(select, kinds)]
        feats = {names[i]: names[i] for i in select if names[i] != label_name}
        ds = Dataset(None, None, (), src, spec, (feats, label_name) if label_name is not None else feats)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)
    return ds.prefetch(prefetch_buffer_size or AUTOTUNE)


def make_batched_features_dataset(file_pattern, batch_size, features, reader=None, label_key=None, reader_args=None,
                                  num_epochs=None, shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                                  prefetch_buffer_size=None, reader_num_threads=None, parser_num_threads=None,
                                  sloppy_ordering=False, drop_final_batch=False):
    """tf.data.experimental.make_batched_features_dataset: batches of
    tf.io.parse_example(features) of the records of the matching files
    (TFRecordDataset unless reader says otherwise), shuffled and repeated
    before batching as TF does, ({features}, label) with label_key."""
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
    names = []
    for pat in patterns:
        found = sorted(_glob.glob(os.fsdecode(pat)))
        if not found:
            raise ValueError("make_batched_features_dataset: no files match %r" % (pat,))
        names += found
    if label_key is not None and label_key not in features:
        raise ValueError("The `label_key` provided (%r) must be one of the `features` keys." % (label_key,))
    reader = TFRecordDataset if reader is None else reader
    args = list(reader_args or [])
    files = Dataset.from_tensor_slices(np.array([n.encode() for n in names], dtype=object))
    if shuffle:
        files = files.shuffle(len(names), seed=shuffle_seed)
    ds = files.interleave(lambda f: reader(f, *args), cycle_length=reader_num_threads or 1)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    ds = ds.repeat(num_epochs).batch(batch_size, drop_remainder=drop_final_batch or num_epochs is None)
    from . import io as _io
    ds = ds.map(lambda x: _io.parse_example(x, features))
    if label_key is not None:
        ds = ds.map(lambda d: (d, d.pop(label_key)))
    return ds.prefetch(prefetch_buffer_size or AUTOTUNE)
