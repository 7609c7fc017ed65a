"""Writes tests/fixtures/tfdata/: files TF 2.15 wrote and what TF 2.15 reads
from them, for python/tests/test_tf_data.py (loom.tf's tf.data / tf.io).

    $(bash scripts/peer_venv.sh tf) scripts/gen_tfdata_fixtures.py

Files (all small):
  examples.tfrecord / .gz / .zz  six tf.train.Examples (x float [2], id int64, tags bytes 0..2 values,
                                 label int64) written by tf.io.TFRecordWriter ("", GZIP, ZLIB)
  single.tfrecord                three one-feature Examples (their bytes do not depend on map order)
  train.tfrecord                 200 Examples (a, b floats; color bytes; label int64) for LinearClassifier
  lines.txt / lines.txt.gz       text with CRLF, LF, an empty line and no final line break
  fixed.bin / fixed.bin.zz       a 3-byte header, 4-byte records, a 2-byte footer
  data.csv                       a header and 6 rows: ints, floats, strings, empty and quoted fields
  data.csv.gz                    the same, GZIP-compressed
  shard-K-of-3.tfrecord          3, 1 and 4 one-feature Examples (list_files + interleave / flat_map)
  expected.json                  what TF read: the serialized Examples (hex), parse_single_example and
                                 parse_example results, the text lines, the fixed-length records and
                                 decode_raw of them, decode_csv, CsvDataset and make_csv_dataset
                                 batches."""
import json
import os
import sys

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tfdata")
os.makedirs(OUT, exist_ok=True)


def p(name):
    return os.path.join(OUT, name)


def j(x):
    """TF values -> JSON (bytes as text, arrays as lists)."""
    if isinstance(x, tf.SparseTensor):
        return {"indices": j(x.indices), "values": j(x.values), "dense_shape": j(x.dense_shape)}
    if isinstance(x, dict):
        return {k: j(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [j(v) for v in x]
    if hasattr(x, "numpy"):
        x = x.numpy()
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return [j(v) for v in x.tolist()] if x.ndim else j(x.item())
        return x.tolist()
    if isinstance(x, bytes):
        return x.decode("latin-1")
    if isinstance(x, np.generic):
        return x.item()
    return x


def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i + 0.5, -i / 4])),
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[1000 + i])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"t%d_%d" % (i, k) for k in range(i % 3)])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))


exp = {"tf_version": tf.__version__}
sers = [example(i).SerializeToString() for i in range(6)]
exp["examples_hex"] = [s.hex() for s in sers]
for name, opt in (("examples.tfrecord", ""), ("examples.tfrecord.gz", "GZIP"), ("examples.tfrecord.zz", "ZLIB")):
    with tf.io.TFRecordWriter(p(name), opt) as w:
        for s in sers:
            w.write(s)
single = [tf.train.Example(features=tf.train.Features(feature={
    "v": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5, -2.0]))})),
    tf.train.Example(features=tf.train.Features(feature={
        "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[-1, 0, 1 << 40]))})),
    tf.train.Example(features=tf.train.Features(feature={
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"", b"abc\x00"]))}))]
with tf.io.TFRecordWriter(p("single.tfrecord")) as w:
    for e in single:
        w.write(e.SerializeToString())
exp["single_hex"] = [e.SerializeToString().hex() for e in single]

spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "id": tf.io.FixedLenFeature([], tf.int64),
        "tags": tf.io.VarLenFeature(tf.string), "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1)}
ds = tf.data.TFRecordDataset(p("examples.tfrecord.gz"), compression_type="GZIP")
exp["records_hex"] = [r.numpy().hex() for r in ds]
exp["parse_single"] = [j(tf.io.parse_single_example(r, spec)) for r in ds]
exp["parse_batch"] = j(next(iter(ds.batch(4).map(lambda r: tf.io.parse_example(r, spec)))))


def parse_fn(r):
    f = tf.io.parse_single_example(r, spec)
    lab = f.pop("label")
    return {"x2": f["x"] * 2.0 + 1.0, "id": tf.cast(f["id"], tf.float32), "tags": f["tags"]}, lab


exp["map_batch"] = [j(b) for b in tf.data.TFRecordDataset(p("examples.tfrecord")).map(parse_fn).batch(4)]

# train.tfrecord: a linearly separable problem for LinearClassifier
rng = np.random.RandomState(0)
A, Bv = rng.randn(200).astype(np.float32), rng.randn(200).astype(np.float32)
colors = np.array([b"red", b"green", b"blue"])[rng.randint(0, 3, 200)]
label = ((A + 2 * Bv + (colors == b"red") * 1.5) > 0.5).astype(np.int64)
with tf.io.TFRecordWriter(p("train.tfrecord")) as w:
    for i in range(200):
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "a": tf.train.Feature(float_list=tf.train.FloatList(value=[A[i]])),
            "b": tf.train.Feature(float_list=tf.train.FloatList(value=[Bv[i]])),
            "color": tf.train.Feature(bytes_list=tf.train.BytesList(value=[colors[i]])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label[i]]))})).SerializeToString())
with open(p("train.csv"), "w") as f:
    f.write("a,b,color,label\n")
    for i in range(200):
        f.write("%r,%r,%s,%d\n" % (float(A[i]), float(Bv[i]), colors[i].decode(), label[i]))

# text lines
text = b"alpha,1\r\nbeta,2\n\n\"q,uoted\",3\ngamma,4"
open(p("lines.txt"), "wb").write(text)
with tf.io.TFRecordWriter(p("unused"), "GZIP"):
    pass
os.remove(p("unused"))
import gzip  # noqa: E402
open(p("lines.txt.gz"), "wb").write(gzip.compress(text, mtime=0))
exp["lines"] = [j(x) for x in tf.data.TextLineDataset(p("lines.txt"))]
exp["lines_gz"] = [j(x) for x in tf.data.TextLineDataset(p("lines.txt.gz"), compression_type="GZIP")]
exp["lines_decoded"] = j(tf.io.decode_csv(tf.constant([b"alpha,1", b"\"q,uoted\",3", b",", b"beta,"]),
                                          [["dflt"], [-7]]))

# fixed-length records
fixed = b"HDR" + np.arange(8, dtype="<i2").tobytes() + b"FT"
open(p("fixed.bin"), "wb").write(fixed)
import zlib  # noqa: E402
open(p("fixed.bin.zz"), "wb").write(zlib.compress(fixed))
fds = tf.data.FixedLengthRecordDataset(p("fixed.bin"), 4, header_bytes=3, footer_bytes=2)
exp["fixed"] = [j(x) for x in fds]
exp["fixed_zz"] = [j(x) for x in tf.data.FixedLengthRecordDataset(p("fixed.bin.zz"), 4, header_bytes=3, footer_bytes=2,
                                                                  compression_type="ZLIB")]
exp["fixed_u8"] = [j(tf.io.decode_raw(x, tf.uint8)) for x in fds]
exp["fixed_i32_le"] = [j(tf.io.decode_raw(x, tf.int32)) for x in fds]
exp["fixed_i32_be"] = [j(tf.io.decode_raw(x, tf.int32, little_endian=False)) for x in fds]
exp["fixed_f32"] = [j(tf.io.decode_raw(x, tf.float32)) for x in fds]

# CSV
csv_text = ("id,score,name,count,flag\n"
            "1,0.5,ann,10,1\n"
            "2,,\"bo, b\",20,0\n"
            "3,1e3,cy,,1\n"
            "4,-2.25,\"d\"\"q\",40,0\n"
            "5,7,,50,1\n"
            "6,3.5,fi,60,0\n")
open(p("data.csv"), "w").write(csv_text)
mk = tf.data.experimental.make_csv_dataset(p("data.csv"), batch_size=4, label_name="flag", num_epochs=1,
                                           shuffle=False)
exp["make_csv"] = [j(b) for b in mk]
exp["make_csv_spec"] = {k: v.dtype.name for k, v in mk.element_spec[0].items()}
exp["make_csv_label_dtype"] = mk.element_spec[1].dtype.name
mk2 = tf.data.experimental.make_csv_dataset(p("data.csv"), batch_size=3, select_columns=["name", "score", "id"],
                                            column_defaults=[0, -1.0, "?"], num_epochs=1, shuffle=False)
exp["make_csv_select"] = [j(b) for b in mk2]
cds = tf.data.experimental.CsvDataset(p("data.csv"), [tf.int32, [0.0], ["none"], [-1]], header=True,
                                      select_cols=[0, 1, 2, 3])
exp["csv_dataset"] = [j(r) for r in cds]
exp["batched_features"] = [j(b) for b in tf.data.experimental.make_batched_features_dataset(
    p("examples.tfrecord"), batch_size=4, features=spec, label_key="label", num_epochs=1, shuffle=False)]

# compressed CSV and na_value (loom reads these through TextLineDataset + decode_csv)
open(p("data.csv.gz"), "wb").write(gzip.compress(csv_text.encode(), mtime=0))
exp["make_csv_gz"] = [j(b) for b in tf.data.experimental.make_csv_dataset(
    p("data.csv.gz"), batch_size=4, label_name="flag", num_epochs=1, shuffle=False, compression_type="GZIP")]
exp["csv_dataset_gz_na"] = [j(r) for r in tf.data.experimental.CsvDataset(
    p("data.csv.gz"), [tf.int32, [0.0], ["none"], [-1]], header=True, select_cols=[0, 1, 2, 3],
    compression_type="GZIP", na_value="ann")]

# sharded files: list_files + interleave / flat_map
for k, n in enumerate((3, 1, 4)):
    with tf.io.TFRecordWriter(p("shard-%d-of-3.tfrecord" % k)) as w:
        for i in range(n):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "v": tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * k + i]))})).SerializeToString())
vspec = {"v": tf.io.FixedLenFeature([], tf.int64)}
files = tf.data.Dataset.list_files(p("shard-*-of-3.tfrecord"), shuffle=False)
exp["interleave_2_2"] = [j(x) for x in files.interleave(
    lambda f: tf.data.TFRecordDataset(f).map(lambda r: tf.io.parse_single_example(r, vspec)["v"]),
    cycle_length=2, block_length=2)]
exp["flat_map"] = [j(x) for x in files.flat_map(tf.data.TFRecordDataset).map(
    lambda r: tf.io.parse_single_example(r, vspec)["v"])]
shards = sorted(tf.io.gfile.glob(p("shard-*-of-3.tfrecord")))
exp["parallel_reads_2"] = [j(tf.io.parse_single_example(r, vspec)["v"])
                           for r in tf.data.TFRecordDataset(shards, num_parallel_reads=2)]
json.dump(exp, open(p("expected.json"), "w"), indent=1, sort_keys=True)
print("wrote", OUT, file=sys.stderr)
