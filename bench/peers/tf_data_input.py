"""tf.data input pipelines timed under loom.tf or TF 2.15 (the same code;
the first argument picks the import), printing key=value lines:
  tfdata_<side>_<pipeline>_records_per_sec   best of 3 full passes
Pipelines over N = 50,000 rows (4 floats, a string, an int64 label):
  tfrecord_map_batch   TFRecordDataset -> map(parse_single_example) -> batch(256)
  tfrecord_batch_parse TFRecordDataset -> batch(256) -> map(parse_example)
  textline_decode_csv  TextLineDataset -> skip(1) -> map(decode_csv) -> batch(256)
  make_csv_dataset     make_csv_dataset(batch_size=256, num_epochs=1, shuffle=False)
  from_generator_batch Dataset.from_generator(a Python generator of the rows) -> batch(256)
The files are written once into DIR (default /tmp/loom_tfdata_bench) by
whichever side runs first (both write the same bytes). Iteration pulls
every batch into Python (numpy), as an Estimator's input would not: this
measures the pipeline plus the hand-over.
    python bench/peers/tf_data_input.py loom|tf [DIR]"""
import os
import sys
import time

import numpy as np

side = sys.argv[1]
if side == "tf":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import loom.tf as tf
DIR = sys.argv[2] if len(sys.argv) > 2 else "/tmp/loom_tfdata_bench"
N = 50000
os.makedirs(DIR, exist_ok=True)
rec, csvf = os.path.join(DIR, "rows.tfrecord"), os.path.join(DIR, "rows.csv")
if not os.path.exists(rec):
    with tf.io.TFRecordWriter(rec + ".tmp") as w:
        for i in range(N):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "a": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5, 1.0, 2.0, 3.0])),
                "c": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"red" if i % 3 else b"blue"])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))})).SerializeToString())
    os.replace(rec + ".tmp", rec)
if not os.path.exists(csvf):
    with open(csvf + ".tmp", "w") as f:
        f.write("a0,a1,a2,a3,c,label\n")
        for i in range(N):
            f.write("%r,1.0,2.0,3.0,%s,%d\n" % (i * 0.5, "red" if i % 3 else "blue", i % 2))
    os.replace(csvf + ".tmp", csvf)
spec = {"a": tf.io.FixedLenFeature([4], tf.float32), "c": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64)}


def parse(r):
    f = tf.io.parse_single_example(r, spec)
    return f, f.pop("label")


def line(s):
    a0, a1, a2, a3, c, lab = tf.io.decode_csv(s, [[0.0], [0.0], [0.0], [0.0], [""], [0]])
    return {"a0": a0, "a1": a1, "a2": a2, "a3": a3, "c": c}, lab


def rows():
    for i in range(N):
        yield {"a": np.array([i * 0.5, 1.0, 2.0, 3.0], np.float32), "c": b"red" if i % 3 else b"blue"}, i % 2


signature = ({"a": tf.TensorSpec([4], tf.float32), "c": tf.TensorSpec([], tf.string)}, tf.TensorSpec([], tf.int64))
pipelines = {
    "tfrecord_map_batch": lambda: tf.data.TFRecordDataset(rec).map(parse).batch(256),
    "tfrecord_batch_parse": lambda: tf.data.TFRecordDataset(rec).batch(256).map(
        lambda r: tf.io.parse_example(r, spec)),
    "textline_decode_csv": lambda: tf.data.TextLineDataset(csvf).skip(1).map(line).batch(256),
    "make_csv_dataset": lambda: tf.data.experimental.make_csv_dataset(csvf, batch_size=256, label_name="label",
                                                                      num_epochs=1, shuffle=False),
    "from_generator_batch": lambda: tf.data.Dataset.from_generator(rows, output_signature=signature).batch(256),
}
for name, make in pipelines.items():
    best = 1e9
    for _ in range(3):
        ds = make()
        t = time.perf_counter()
        n = 0
        for _b in ds:
            n += 1
        best = min(best, time.perf_counter() - t)
    assert n == (N + 255) // 256, (name, n)
    print("tfdata_%s_%s_records_per_sec=%.0f" % (side, name, N / best), flush=True)
