"""loom.tf's tf.data / tf.io against TF 2.15: the files and the values in
tests/fixtures/tfdata/ were written and read by TF 2.15
(scripts/gen_tfdata_fixtures.py); loom reads the same files and must give
the same values, and writes byte-identical TFRecord files and tf.Examples.
No TF at test time."""
import gzip
import json
import os
import zlib

import numpy as np
import pytest

import loom.tf as tf
from loom.tf.data import SparseTensorValue

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "tfdata")
EXP = json.load(open(os.path.join(FIX, "expected.json")))


def f(name):
    return os.path.join(FIX, name)


def j(x):
    """loom values -> the JSON form the generator wrote (bytes as latin-1 text)."""
    if isinstance(x, SparseTensorValue):
        return {"indices": j(x.indices), "values": j(x.values), "dense_shape": j(x.dense_shape)}
    if isinstance(x, dict):
        return {k: j(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [j(v) for v in x]
    if isinstance(x, np.ndarray):
        return [j(v) for v in x.tolist()] if x.dtype == object else x.tolist()
    if isinstance(x, bytes):
        return x.decode("latin-1")
    if isinstance(x, np.generic):
        return x.item()
    return x


def example(i):
    """The generator's example(i), built with loom.tf's tf.train classes."""
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i + 0.5, -i / 4])),
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[1000 + i])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"t%d_%d" % (i, k) for k in range(i % 3)])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))


SPEC = {"x": tf.io.FixedLenFeature([2], tf.float32), "id": tf.io.FixedLenFeature([], tf.int64),
        "tags": tf.io.VarLenFeature(tf.string), "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1)}


# ---------------------------------------------------------------- tf.train.Example, TFRecordWriter
def test_example_serialization_is_byte_identical_to_tf():
    assert [example(i).SerializeToString().hex() for i in range(6)] == EXP["examples_hex"]
    single = [tf.train.Example(features=tf.train.Features(feature={
        "v": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5, -2.0]))})),
        tf.train.Example(features=tf.train.Features(feature={
            "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[-1, 0, 1 << 40]))})),
        tf.train.Example(features=tf.train.Features(feature={
            "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"", b"abc\x00"]))}))]
    assert [e.SerializeToString().hex() for e in single] == EXP["single_hex"]
    assert single[2].features.feature["s"].bytes_list.value == [b"", b"abc\x00"]
    assert single[2].features.feature["s"].WhichOneof("kind") == "bytes_list"
    # TF's bytes -> tf.train.Example.FromString -> SerializeToString gives TF's bytes back
    for h in EXP["examples_hex"] + EXP["single_hex"]:
        ex = tf.train.Example.FromString(bytes.fromhex(h))
        assert ex.SerializeToString().hex() == h
    ex = tf.train.Example()
    ex.ParseFromString(bytes.fromhex(EXP["single_hex"][1]))
    assert ex.features.feature["n"].int64_list.value == [-1, 0, 1 << 40]
    assert tf.train.Example.FromString(bytes.fromhex(EXP["examples_hex"][4])) == example(4)


@pytest.mark.parametrize("opt,fixture,unpack", [("", "examples.tfrecord", None),
                                                 ("GZIP", "examples.tfrecord.gz", gzip.decompress),
                                                 ("ZLIB", "examples.tfrecord.zz", zlib.decompress)])
def test_tfrecord_writer_matches_tf(tmp_path, opt, fixture, unpack):
    path = str(tmp_path / "out")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=opt) if opt else None) as w:
        for i in range(6):
            w.write(example(i).SerializeToString())
    mine, theirs = open(path, "rb").read(), open(f(fixture), "rb").read()
    if unpack is None:
        assert mine == theirs  # byte for byte: framing, masked CRC32C, the Examples
    else:  # the compressed bytes depend on zlib's settings; the streams decompress to the same records
        assert unpack(mine) == unpack(theirs) == open(f("examples.tfrecord"), "rb").read()
    got = [r.hex() for r in tf.data.TFRecordDataset(path, compression_type=opt)]
    assert got == EXP["records_hex"]


# ---------------------------------------------------------------- reading TF's files
@pytest.mark.parametrize("fixture,comp", [("examples.tfrecord", None), ("examples.tfrecord.gz", "GZIP"),
                                          ("examples.tfrecord.zz", "ZLIB")])
def test_tfrecord_dataset_reads_tf_files(fixture, comp):
    ds = tf.data.TFRecordDataset([f(fixture)], compression_type=comp)
    assert [r.hex() for r in ds] == EXP["records_hex"]
    assert ds.element_spec == (tf.string, ())


def test_parse_single_example_and_parse_example_match_tf():
    ds = tf.data.TFRecordDataset(f("examples.tfrecord.gz"), compression_type="GZIP")
    got = [j(el) for el in ds.map(lambda r: tf.io.parse_single_example(r, SPEC))]
    assert got == EXP["parse_single"]
    got = j(next(iter(ds.batch(4).map(lambda r: tf.io.parse_example(r, SPEC)))))
    assert got == EXP["parse_batch"]
    # eagerly, on the bytes
    recs = [bytes.fromhex(h) for h in EXP["records_hex"]]
    assert j(tf.io.parse_single_example(recs[2], SPEC)) == EXP["parse_single"][2]
    assert j(tf.io.parse_example(np.array(recs[:4], dtype=object), SPEC)) == EXP["parse_batch"]


def test_map_with_tf_ops_then_batch_matches_tf():
    def parse_fn(r):
        feats = tf.io.parse_single_example(r, SPEC)
        lab = feats.pop("label")
        return {"x2": feats["x"] * 2.0 + 1.0, "id": tf.cast(feats["id"], tf.float32), "tags": feats["tags"]}, lab

    ds = tf.data.TFRecordDataset(f("examples.tfrecord")).map(parse_fn).batch(4)
    assert [j(b) for b in ds] == EXP["map_batch"]
    spec = ds.element_spec
    assert spec[0]["x2"] == (tf.float32, (None, 2)) and spec[1] == (tf.int64, (None,))


def test_text_line_dataset_matches_tf():
    assert [j(x) for x in tf.data.TextLineDataset(f("lines.txt"))] == EXP["lines"]
    assert [j(x) for x in tf.data.TextLineDataset(f("lines.txt.gz"), compression_type="GZIP")] == EXP["lines_gz"]
    got = tf.io.decode_csv(np.array([b"alpha,1", b"\"q,uoted\",3", b",", b"beta,"], dtype=object), [["dflt"], [-7]])
    assert j(got) == EXP["lines_decoded"]
    # TextLineDataset + skip + map(decode_csv) in the graph: what TF's CsvDataset gave for the same file
    defaults = [tf.int32, [0.0], ["none"], [-1], [0]]
    ds = tf.data.TextLineDataset(f("data.csv")).skip(1).map(lambda line: tuple(tf.io.decode_csv(line, defaults)[:4]))
    assert [j(x) for x in ds] == EXP["csv_dataset"]
    # filter with a traced predicate
    ds = tf.data.TextLineDataset(f("data.csv")).skip(1).filter(
        lambda line: tf.greater(tf.io.decode_csv(line, defaults)[0], 4))
    assert [j(x) for x in ds] == ["5,7,,50,1", "6,3.5,fi,60,0"]


def test_fixed_length_records_and_decode_raw_match_tf():
    ds = tf.data.FixedLengthRecordDataset(f("fixed.bin"), 4, header_bytes=3, footer_bytes=2)
    assert [j(x) for x in ds] == EXP["fixed"]
    zz = tf.data.FixedLengthRecordDataset([f("fixed.bin.zz")], record_bytes=4, header_bytes=3, footer_bytes=2,
                                          compression_type="ZLIB")
    assert [j(x) for x in zz] == EXP["fixed_zz"]
    assert [j(x) for x in ds.map(lambda r: tf.io.decode_raw(r, tf.uint8))] == EXP["fixed_u8"]
    assert [j(x) for x in ds.map(lambda r: tf.io.decode_raw(r, tf.int32))] == EXP["fixed_i32_le"]
    assert [j(x) for x in ds.map(lambda r: tf.io.decode_raw(r, tf.int32, little_endian=False))] == EXP["fixed_i32_be"]
    # (fixed_f32 holds denormals, which loom's sessions flush to zero; float32 is checked on normal values below)


def test_decode_raw_float32_and_float64_against_numpy(tmp_path):
    vals = np.array([[1.5, -2.25], [3e38, 1e-30], [0.0, -7.0]], np.float32)
    p = tmp_path / "floats.bin"
    p.write_bytes(vals.astype("<f4").tobytes())
    ds = tf.data.FixedLengthRecordDataset(str(p), 8).map(lambda r: tf.io.decode_raw(r, tf.float32))
    np.testing.assert_array_equal(np.stack(list(ds)), vals)
    be = vals.astype(">f8").tobytes()
    got = tf.io.decode_raw(np.array([be], dtype=object), tf.float64, little_endian=False)
    np.testing.assert_array_equal(got, vals.astype(np.float64).reshape(1, -1))


def test_make_csv_dataset_matches_tf():
    ds = tf.data.experimental.make_csv_dataset(f("data.csv"), batch_size=4, label_name="flag", num_epochs=1,
                                               shuffle=False)
    assert [j(b) for b in ds] == EXP["make_csv"]
    feats, lab = ds.element_spec
    assert {k: v[0].name for k, v in feats.items()} == EXP["make_csv_spec"]
    assert lab[0].name == EXP["make_csv_label_dtype"]
    ds = tf.data.experimental.make_csv_dataset(f("data.csv"), batch_size=3, select_columns=["name", "score", "id"],
                                               column_defaults=[0, -1.0, "?"], num_epochs=1, shuffle=False)
    assert [j(b) for b in ds] == EXP["make_csv_select"]
    # num_epochs=None repeats and drops the remainder, as TF
    ds = tf.data.experimental.make_csv_dataset(f("data.csv"), batch_size=4, label_name="flag", shuffle=False)
    assert ds.element_spec[1][1] == (4,)
    batches = list(ds.take(3))
    assert [list(b[0]["id"]) for b in batches] == [[1, 2, 3, 4], [5, 6, 1, 2], [3, 4, 5, 6]]


def test_csv_dataset_matches_tf():
    ds = tf.data.experimental.CsvDataset(f("data.csv"), [tf.int32, [0.0], ["none"], [-1]], header=True,
                                         select_cols=[0, 1, 2, 3])
    assert [j(r) for r in ds] == EXP["csv_dataset"]
    assert ds.element_spec == ((tf.int32, ()), (tf.float32, ()), (tf.string, ()), (tf.int32, ()))


# ---------------------------------------------------------------- estimators
COLS = [tf.feature_column.numeric_column("a"), tf.feature_column.numeric_column("b"),
        tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"]))]
TSPEC = {"a": tf.io.FixedLenFeature([], tf.float32), "b": tf.io.FixedLenFeature([], tf.float32),
         "color": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}


def tfrecord_input_fn(epochs):
    def parse(r):
        feats = tf.io.parse_single_example(r, TSPEC)
        return feats, feats.pop("label")
    return tf.data.TFRecordDataset(f("train.tfrecord")).map(parse).repeat(epochs).batch(20)


def csv_input_fn(epochs):
    return tf.data.experimental.make_csv_dataset(f("train.csv"), batch_size=20, label_name="label",
                                                 num_epochs=epochs, shuffle=False)


def test_linear_classifier_trains_from_tfrecord_and_from_csv(tmp_path):
    res = {}
    for name, fn in (("tfrecord", tfrecord_input_fn), ("csv", csv_input_fn)):
        est = tf.estimator.LinearClassifier(COLS, model_dir=str(tmp_path / name), optimizer="Ftrl")
        est.train(lambda: fn(5), steps=50)
        res[name] = est.evaluate(lambda: fn(1))
        preds = list(est.predict(lambda: fn(1)))
        assert len(preds) == 200
    assert res["tfrecord"]["accuracy"] > 0.9, res
    assert res["tfrecord"]["global_step"] == 50
    # the same examples in the same order through both readers: the same model
    assert res["csv"]["loss"] == pytest.approx(res["tfrecord"]["loss"], rel=1e-5)
    assert res["csv"]["accuracy"] == res["tfrecord"]["accuracy"]


# ---------------------------------------------------------------- errors
def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="compression_type"):
        tf.data.TFRecordDataset(f("examples.tfrecord"), compression_type="LZ4")
    with pytest.raises(Exception, match="GZIP"):  # a compressed file read as plain: the hint names the option
        list(tf.data.TFRecordDataset(f("examples.tfrecord.gz")))
    with pytest.raises(NotImplementedError, match="FixedLenSequenceFeature"):
        tf.io.FixedLenSequenceFeature([], tf.float32)
    with pytest.raises(NotImplementedError, match="tf.sparse.to_dense"):
        tf.sparse.to_dense
    with pytest.raises(NotImplementedError, match="tf.data.Dataset.unbatch"):
        tf.data.TFRecordDataset(f("examples.tfrecord")).unbatch
    with pytest.raises(NotImplementedError, match="tf.data.Dataset.choose_from_datasets"):
        tf.data.Dataset.choose_from_datasets
    with pytest.raises(ValueError, match="scalar tf.bool"):
        tf.data.TextLineDataset(f("lines.txt")).filter(lambda line: line)
    bad = tf.data.TextLineDataset(f("lines.txt")).map(lambda line: tf.io.parse_single_example(line, SPEC))
    with pytest.raises(Exception, match="map: the mapped function failed"):
        list(bad)
    p = tmp_path / "part.bin"
    p.write_bytes(b"HDR" + b"abcd" + b"xy" + b"FT")
    with pytest.raises(Exception, match="not a multiple of the record length"):
        list(tf.data.FixedLengthRecordDataset(str(p), 4, header_bytes=3, footer_bytes=2))


def test_varlen_features_reach_canned_estimators_the_same_either_way(tmp_path):
    """parse_single_example + batch and batch + parse_example give the same
    ragged batches, so the same model; both train a hashed VarLen column."""
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "tags": tf.io.VarLenFeature(tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

    def single():
        def parse(r):
            feats = tf.io.parse_single_example(r, spec)
            return {"x": feats["x"], "tags": feats["tags"]}, feats["label"]
        return tf.data.TFRecordDataset(f("examples.tfrecord")).map(parse).batch(4)

    def batched():
        return tf.data.TFRecordDataset(f("examples.tfrecord")).batch(4).map(
            lambda r: tf.io.parse_example(r, spec)).map(lambda d: ({"x": d["x"], "tags": d["tags"]}, d["label"]))

    cols = [tf.feature_column.numeric_column("x", shape=[2]),
            tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_hash_bucket("tags", 10))]
    res = []
    for i, fn in enumerate((single, batched)):
        est = tf.estimator.LinearClassifier(cols, model_dir=str(tmp_path / str(i)), optimizer="SGD")
        est.train(fn)  # to the end of the data: 2 batches
        res.append(est.evaluate(fn))
    assert res[0]["global_step"] == res[1]["global_step"] == 2
    assert res[0]["loss"] == res[1]["loss"] and np.isfinite(res[0]["loss"])


def test_cache_to_a_file_replays_the_parsed_elements(tmp_path):
    cache = str(tmp_path / "parsed.cache")
    ds = tf.data.TFRecordDataset(f("examples.tfrecord")).map(lambda r: tf.io.parse_single_example(r, SPEC)) \
        .cache(cache).repeat(2)
    got = [j(el) for el in ds]
    assert got == EXP["parse_single"] * 2
    assert os.path.exists(cache)
    # a later dataset over the same cache reads the file, not its input
    again = tf.data.TextLineDataset(f("lines.txt")).map(lambda r: tf.io.parse_single_example(r, SPEC)).cache(cache)
    assert [j(el) for el in again] == EXP["parse_single"]


def test_list_files_interleave_and_flat_map_in_tf_order():
    files = tf.data.Dataset.list_files(f("shard-*-of-3.tfrecord"), shuffle=False)
    vspec = {"v": tf.io.FixedLenFeature([], tf.int64)}
    ds = files.interleave(
        lambda name: tf.data.TFRecordDataset(name).map(lambda r: tf.io.parse_single_example(r, vspec)["v"]),
        cycle_length=2, block_length=2)
    assert [j(x) for x in ds] == EXP["interleave_2_2"]
    ds = files.flat_map(tf.data.TFRecordDataset).map(lambda r: tf.io.parse_single_example(r, vspec)["v"])
    assert [j(x) for x in ds] == EXP["flat_map"]
    # shuffled file names: the same elements, each file's in its order
    got = [j(x) for x in tf.data.Dataset.list_files(f("shard-*-of-3.tfrecord"), seed=5).flat_map(
        tf.data.TFRecordDataset).map(lambda r: tf.io.parse_single_example(r, vspec)["v"])]
    assert sorted(got) == sorted(EXP["flat_map"])
    assert tf.io.gfile.glob(f("shard-*-of-3.tfrecord")) == sorted(tf.io.gfile.glob(f("shard-*")))
    # num_parallel_reads reads several files in TF's interleaved order
    shards = tf.io.gfile.glob(f("shard-*-of-3.tfrecord"))
    got = [j(x) for x in tf.data.TFRecordDataset(shards, num_parallel_reads=2).map(
        lambda r: tf.io.parse_single_example(r, vspec)["v"])]
    assert got == EXP["parallel_reads_2"]
    with pytest.raises(ValueError, match="no files match"):
        tf.data.Dataset.list_files(f("nothing-*"))


def test_compressed_csv_and_na_value_through_text_lines():
    ds = tf.data.experimental.make_csv_dataset(f("data.csv.gz"), batch_size=4, label_name="flag", num_epochs=1,
                                               shuffle=False, compression_type="GZIP")
    assert [j(b) for b in ds] == EXP["make_csv_gz"] == EXP["make_csv"]
    ds = tf.data.experimental.CsvDataset(f("data.csv.gz"), [tf.int32, [0.0], ["none"], [-1]], header=True,
                                         select_cols=[0, 1, 2, 3], compression_type="GZIP", na_value="ann")
    assert [j(r) for r in ds] == EXP["csv_dataset_gz_na"]


def test_range_from_tensors_and_zip(tmp_path):
    assert [int(v) for v in tf.data.Dataset.range(2, 10, 3)] == [2, 5, 8]
    assert [j(x) for x in tf.data.Dataset.from_tensors(({"a": [1.0, 2.0]}, [0, 1]))] == [[{"a": [1.0, 2.0]}, [0, 1]]]
    assert [j(x) for x in tf.data.Dataset.zip((tf.data.Dataset.range(3), tf.data.Dataset.range(10, 20)))] == \
        [[0, 10], [1, 11], [2, 12]]
    # zip((features, labels)) feeds an estimator: the second dataset is the label
    feats = tf.data.TFRecordDataset(f("train.tfrecord")).map(lambda r: tf.io.parse_single_example(
        r, {k: v for k, v in TSPEC.items() if k != "label"}))
    labels = tf.data.TFRecordDataset(f("train.tfrecord")).map(
        lambda r: tf.io.parse_single_example(r, {"label": TSPEC["label"]})["label"])
    zipped = tf.data.Dataset.zip((feats, labels))
    assert zipped.element_spec[1] == (tf.int64, ())
    res = []
    for i, fn in enumerate((lambda: zipped.batch(20), lambda: tfrecord_input_fn(1))):
        est = tf.estimator.LinearClassifier(COLS, model_dir=str(tmp_path / str(i)), optimizer="Ftrl")
        est.train(fn)
        res.append(est.evaluate(fn))
    assert res[0]["global_step"] == res[1]["global_step"] == 10
    assert res[0]["loss"] == res[1]["loss"]
    with pytest.raises(ValueError, match="share keys"):
        tf.data.Dataset.zip((feats, feats))


def test_make_batched_features_dataset_matches_tf():
    ds = tf.data.experimental.make_batched_features_dataset(f("examples.tfrecord"), batch_size=4, features=SPEC,
                                                            label_key="label", num_epochs=1, shuffle=False)
    assert [j(b) for b in ds] == EXP["batched_features"]
    # with make_parse_example_spec of the columns, as TF programs build it
    spec = tf.feature_column.make_parse_example_spec(
        COLS + [tf.feature_column.numeric_column("label", dtype=tf.int64)])
    ds = tf.data.experimental.make_batched_features_dataset(f("train.tfrecord"), 50, spec, label_key="label",
                                                            num_epochs=1, shuffle=True, shuffle_seed=3)
    feats, lab = next(iter(ds))
    assert sorted(feats) == ["a", "b", "color"] and feats["a"].shape == (50, 1) and lab.shape == (50, 1)


def test_shard_as_tf():
    """Dataset.shard(n, i): element j of each pass kept when j % n == i, before or after repeat as in TF 2.15
    (a worker's share of an input_fn's data); a bad index raises InvalidArgumentError at the call."""
    d = tf.data.Dataset.from_tensor_slices(np.arange(7))
    assert [int(x) for x in d.shard(3, 1)] == [1, 4]
    assert [int(x) for x in tf.data.Dataset.from_tensor_slices(np.arange(5)).shard(2, 1).repeat(2)] == [1, 3, 1, 3]
    assert [int(x) for x in tf.data.Dataset.from_tensor_slices(np.arange(5)).repeat(2).shard(2, 1)] == [1, 3, 0, 2, 4]
    assert [b.tolist() for b in d.shard(3, 1).batch(2)] == [[1, 4]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="index 2"):
        d.shard(2, 2)
    import loom
    nat = loom.Dataset.from_tensor_slices({"x": np.arange(6, dtype=np.float32)}).shard(2, 0)
    assert [float(e["x"]) for e in nat] == [0.0, 2.0, 4.0]
