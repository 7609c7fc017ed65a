"""TF 2.15 reads the TFRecord files loom wrote (tests/test_data_tfrecord_write.c).

usage: tfrecord_check.py <dir>   (dir/manifest.json written by the C test)

manifest.json:
  {"files": [{"path": "...", "compression": "" | "GZIP" | "ZLIB"}, ...],
   "features": [{"name": "x", "kind": "fixed" | "varlen", "dtype": "float32" | "int64" | "string",
                 "shape": [..]}, ...],
   "records": [{"x": [flat values], ...}, ...]}
Every file must hold exactly the records, read with tf.data.TFRecordDataset
(compression_type) + tf.io.parse_single_example (FixedLenFeature /
VarLenFeature). float32 values are compared exactly (loom writes float32).
Prints "tfrecord_check: OK <file> <n> records" per file; exits 1 on a mismatch.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

DT = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}


def main(d):
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    spec = {}
    for ft in m["features"]:
        if ft["kind"] == "fixed":
            spec[ft["name"]] = tf.io.FixedLenFeature(ft["shape"], DT[ft["dtype"]])
        else:
            spec[ft["name"]] = tf.io.VarLenFeature(DT[ft["dtype"]])
    bad = 0
    for fe in m["files"]:
        path = os.path.join(d, fe["path"])
        ds = tf.data.TFRecordDataset(path, compression_type=fe["compression"] or None)
        got = [tf.io.parse_single_example(r, spec) for r in ds]
        if len(got) != len(m["records"]):
            print(f"tfrecord_check: {path}: {len(got)} records, expected {len(m['records'])}")
            bad += 1
            continue
        for i, (g, want) in enumerate(zip(got, m["records"])):
            for ft in m["features"]:
                name = ft["name"]
                v = g[name]
                if isinstance(v, tf.SparseTensor):
                    v = v.values
                v = np.asarray(v.numpy()).reshape(-1)
                w = want[name]
                if ft["dtype"] == "string":
                    ok = [x.decode() for x in v] == w
                elif ft["dtype"] == "float32":
                    ok = v.shape == (len(w),) and np.array_equal(v, np.array(w, dtype=np.float32))
                else:
                    ok = v.shape == (len(w),) and np.array_equal(v, np.array(w, dtype=np.int64))
                if not ok:
                    print(f"tfrecord_check: {path}: record {i} feature {name}: TF read {v!r}, expected {w!r}")
                    bad += 1
        if not bad:
            print(f"tfrecord_check: OK {fe['path']} {len(got)} records")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
