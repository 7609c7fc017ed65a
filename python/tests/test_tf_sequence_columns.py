"""tf.feature_column's sequence columns and tf.keras.experimental.SequenceFeatures
against TF 2.15 (fixtures/seq_fc/seq_fc.json, from scripts/gen_seq_fc_fixtures.py):
the serialized tf.train.Examples TF wrote, parsed with make_parse_example_spec
of the columns in an input_fn, each column's ids per step, the padded
[batch, T, width] output and sequence_length; TF's errors for sequence columns
where they do not belong; a model over SequenceFeatures that trains."""
import inspect
import json
import os

import numpy as np
import pytest

import loom.tf as tf

fc = tf.feature_column
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "seq_fc")
with open(os.path.join(HERE, "seq_fc.json")) as _f:
    EXP = json.load(_f)
CATS = ["ident", "tok", "itok", "word", "code", "color"]


def columns():
    """The columns of scripts/gen_seq_fc_fixtures.py."""
    return {
        "ident": fc.sequence_categorical_column_with_identity("ident", 6, default_value=5),
        "tok": fc.sequence_categorical_column_with_hash_bucket("tok", 7),
        "itok": fc.sequence_categorical_column_with_hash_bucket("itok", 5, dtype=tf.int64),
        "word": fc.sequence_categorical_column_with_vocabulary_list("word", ["a", "b", "c"], num_oov_buckets=2),
        "code": fc.sequence_categorical_column_with_vocabulary_list("code", [10, 20, 30]),
        "color": fc.sequence_categorical_column_with_vocabulary_file("color", os.path.join(HERE, "colors.txt"),
                                                                     vocabulary_size=3),
        "num": fc.sequence_numeric_column("num"),
        "pair": fc.sequence_numeric_column("pair", shape=(2,), default_value=-1.0),
    }


def table(shape):
    """The fixture script's embedding table formula."""
    i, j = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return (((i * 7 + j * 3) % 11 - 5) / 4.0).astype(np.float32)


def lookup(tab, ids):
    """TF's per-step safe lookup: a row per id >= 0, zeros for an OOV -1 and past the end (-2)."""
    ids = np.asarray(ids)
    return np.where((ids >= 0)[..., None], tab[np.maximum(ids, 0)], 0.0).astype(np.float32)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("seq") / "examples.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for h in EXP["serialized_hex"]:
            w.write(bytes.fromhex(h))
    return path


def run_layer(tmp_path, records, cols, keys=None, variable=None):
    """SequenceFeatures(cols) in a model_fn over the parsed examples (one
    batch of 4): (sequence_input [4, T, w], sequence_length [4], the
    variable's value or None). One training step at learning rate 0 writes
    the checkpoint predict restores."""
    spec = fc.make_parse_example_spec(list(columns().values()))  # every feature of the examples

    def input_fn():
        ds = tf.data.TFRecordDataset(records).batch(4).map(lambda r: tf.io.parse_example(r, spec))
        return ds.map(lambda d: {k: d[k] for k in (keys or d)})  # features only: no labels

    def model_fn(features, labels, mode):
        seq, length = tf.keras.experimental.SequenceFeatures(cols)(features)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"seq": seq, "len": length})
        loss = tf.reduce_mean(seq) * 0.0
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.0).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    if variable:
        est.train(input_fn, steps=1)
    preds = list(est.predict(input_fn))
    seq = np.stack([p["seq"] for p in preds])
    length = np.array([p["len"] for p in preds])
    return seq, length, est.get_variable_value(variable) if variable else None


# ---------------------------------------------------------------- parse spec
def test_make_parse_example_spec_matches_tf():
    spec = fc.make_parse_example_spec(list(columns().values()))
    got = {k: [type(v).__name__, v.dtype.name] for k, v in sorted(spec.items())}
    assert got == EXP["spec"]
    # the wrappers read the same feature
    c = columns()
    assert fc.make_parse_example_spec([fc.embedding_column(c["tok"], 2), fc.indicator_column(c["code"])]) == {
        "tok": tf.io.VarLenFeature(tf.string), "code": tf.io.VarLenFeature(tf.int64)}


# ---------------------------------------------------------------- values against TF
@pytest.mark.parametrize("key", CATS)
def test_categorical_ids_indicator_embedding_and_length_match_tf(tmp_path, records, key):
    e = EXP["columns"][key]
    c = columns()[key]
    assert c.name == key and c.num_buckets == e["num_buckets"]
    emb, ind = fc.embedding_column(c, 3), fc.indicator_column(c)
    name = "sequence_features/%s_embedding/embedding_weights" % key  # TF's, without its layer-count suffix
    seq, length, tab = run_layer(tmp_path, records, [ind, emb], [key], variable=name)
    # sorted by column name: <key>_embedding (3 wide), then <key>_indicator
    got_emb, got_ind = seq[..., :3], seq[..., 3:]
    np.testing.assert_array_equal(got_ind, np.array(e["indicator"], np.float32))
    np.testing.assert_array_equal(length, e["sequence_length"])
    np.testing.assert_array_equal(e["embedding_length"], e["sequence_length"])
    # the ids per step (TF's: hash, vocabulary, OOV buckets, default values), read off the one-hots
    ids = np.array(e["ids"])
    got_ids = np.where(got_ind.sum(-1) > 0, got_ind.argmax(-1), -1)
    np.testing.assert_array_equal(got_ids, np.where(ids == -2, -1, ids))
    # the embedding: one table row per step (TF's output with the formula table is exactly that)
    assert tab.shape == (e["num_buckets"], 3)
    np.testing.assert_allclose(np.array(e["embedding"], np.float32), lookup(table(tab.shape), ids), atol=1e-6)
    np.testing.assert_allclose(got_emb, lookup(tab, ids), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("key", ["num", "pair"])
def test_sequence_numeric_matches_tf(tmp_path, records, key):
    e = EXP["columns"][key]
    seq, length, _ = run_layer(tmp_path, records, [columns()[key]], [key])
    np.testing.assert_array_equal(seq, np.array(e["dense"], np.float32))  # pair's padding is its default -1
    np.testing.assert_array_equal(length, e["sequence_length"])


def test_columns_are_concatenated_by_name(tmp_path, records):
    c = columns()
    seq, length, _ = run_layer(tmp_path, records, [c["pair"], fc.indicator_column(c["ident"])], ["ident", "pair"])
    np.testing.assert_array_equal(seq, np.array(EXP["ident_and_pair"]["dense"], np.float32))
    np.testing.assert_array_equal(length, EXP["ident_and_pair"]["sequence_length"])


# ---------------------------------------------------------------- malformed input
def test_lengths_that_differ_between_columns_fail_the_run(tmp_path, records):
    assert EXP["mismatch_fails"]  # TF fails this batch too
    c = columns()
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence lengths differ.*example 0 has 3 steps"):
        run_layer(tmp_path, records, [fc.indicator_column(c["ident"]), c["num"]], ["ident", "num"])


def test_a_missing_feature_names_the_key(tmp_path, records):
    c = columns()
    with pytest.raises(ValueError, match=r"SequenceFeatures.*column word_indicator.*feature key \"word\" is not in"):
        run_layer(tmp_path, records, [fc.indicator_column(c["word"])], ["ident"])
    with pytest.raises(ValueError, match=r"SequenceFeatures.*column num.*feature key \"num\" is not in"):
        run_layer(tmp_path, records, [c["num"]], ["pair"])


def test_a_dense_input_is_an_error_naming_the_key(tmp_path):
    c = columns()

    def model_fn(features, labels, mode):
        tf.keras.experimental.SequenceFeatures([fc.indicator_column(c["ident"])])(features)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"column ident_indicator: feature \"ident\" must be sparse"):
        est.train(lambda: ({"ident": np.array([[1, 2], [3, -1]], np.int64)}, np.zeros([2, 1], np.float32)), steps=1)


# ---------------------------------------------------------------- where sequence columns do not belong (TF's errors)
def _feats():
    return {"a": np.array([[1], [2]], np.int64), "x": np.array([[0.5], [1.0]], np.float32)}


def _model_fn(layer):
    def model_fn(features, labels, mode):
        layer(features)
    return model_fn


def test_sequence_columns_in_dense_features_input_layer_and_canned_estimators_raise(tmp_path):
    a = fc.sequence_categorical_column_with_identity("a", 5)
    x = fc.sequence_numeric_column("x")
    tr = (lambda: (_feats(), np.array([[0], [1]], np.int32)))
    msg = "categorical_column must not be of type SequenceCategoricalColumn"
    for i, layer in enumerate([tf.keras.layers.DenseFeatures([fc.embedding_column(a, 2)]),
                               lambda f: tf.compat.v1.feature_column.input_layer(f, [fc.indicator_column(a)])]):
        with pytest.raises(ValueError, match=msg):
            tf.estimator.Estimator(_model_fn(layer), model_dir=str(tmp_path / str(i))).train(tr, steps=1)
    with pytest.raises(ValueError, match="column x is a sequence column"):
        tf.estimator.Estimator(_model_fn(lambda f: tf.compat.v1.feature_column.input_layer(f, [x])),
                               model_dir=str(tmp_path / "n")).train(tr, steps=1)
    with pytest.raises(ValueError, match=msg):
        tf.estimator.DNNClassifier([4], [fc.embedding_column(a, 2)], model_dir=str(tmp_path / "d")).train(tr, steps=1)
    with pytest.raises(ValueError, match="column a is a sequence column"):
        tf.estimator.LinearClassifier([a], model_dir=str(tmp_path / "l")).train(tr, steps=1)


def test_sequence_features_takes_only_sequence_columns():
    with pytest.raises(ValueError, match="must be of type SequenceCategoricalColumn to use SequenceFeatures"):
        tf.keras.experimental.SequenceFeatures(
            [fc.embedding_column(fc.categorical_column_with_identity("a", 5), 2)])
    for c in (fc.numeric_column("x"), fc.sequence_categorical_column_with_identity("a", 5)):
        with pytest.raises(ValueError, match="Items of feature_columns must be a SequenceDenseColumn"):
            tf.keras.experimental.SequenceFeatures([c])


# ---------------------------------------------------------------- constructors
def test_constructors_have_tfs_arguments_and_defaults():
    want = {
        "sequence_categorical_column_with_identity": [("key", None), ("num_buckets", None), ("default_value", None)],
        "sequence_categorical_column_with_hash_bucket": [("key", None), ("hash_bucket_size", None),
                                                         ("dtype", tf.string)],
        "sequence_categorical_column_with_vocabulary_file": [
            ("key", None), ("vocabulary_file", None), ("vocabulary_size", None), ("num_oov_buckets", 0),
            ("default_value", None), ("dtype", tf.string)],
        "sequence_categorical_column_with_vocabulary_list": [
            ("key", None), ("vocabulary_list", None), ("dtype", None), ("default_value", -1), ("num_oov_buckets", 0)],
        "sequence_numeric_column": [("key", None), ("shape", (1,)), ("default_value", 0.0), ("dtype", tf.float32),
                                    ("normalizer_fn", None)],
    }
    for name, params in want.items():
        sig = inspect.signature(getattr(fc, name))
        got = [(p.name, None if p.default is inspect.Parameter.empty else p.default) for p in sig.parameters.values()]
        assert got == params, name
    c = fc.sequence_numeric_column("x")
    assert (c.key, c.shape, c.default_value, c.name) == ("x", (1,), 0.0, "x")
    assert fc.sequence_categorical_column_with_vocabulary_list("v", ["p", "q"], num_oov_buckets=3).num_buckets == 5


def test_constructor_errors():
    with pytest.raises(ValueError, match="num_buckets 0 < 1"):
        fc.sequence_categorical_column_with_identity("x", 0)
    with pytest.raises(ValueError, match="shape dimensions must be greater than 0"):
        fc.sequence_numeric_column("x", shape=(0,))
    with pytest.raises(ValueError, match="dtype must be convertible to float"):
        fc.sequence_numeric_column("x", dtype=tf.string)
    with pytest.raises(TypeError, match="normalizer_fn must be a callable"):
        fc.sequence_numeric_column("x", normalizer_fn=3)
    a = fc.sequence_categorical_column_with_identity("a", 4)
    with pytest.raises(NotImplementedError, match="weighted_categorical_column over the sequence column 'a'"):
        fc.weighted_categorical_column(a, "w")
    with pytest.raises(NotImplementedError, match="crossed_column over the sequence column 'a'"):
        fc.crossed_column([a, "b"], 10)
    with pytest.raises(NotImplementedError, match="shared_embeddings over the sequence column 'a'"):
        fc.shared_embeddings([a, fc.sequence_categorical_column_with_identity("b", 4)], 2)


# ---------------------------------------------------------------- a model over SequenceFeatures
def test_a_model_over_sequence_features_trains(tmp_path):
    """Mean over the steps of [embedding, numeric], then a dense layer: the
    label is whether token 1 occurs, which the embedding must learn."""
    rs = np.random.RandomState(0)
    path = str(tmp_path / "train.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for _ in range(64):
            n = rs.randint(1, 6)
            toks = rs.randint(0, 4, n).tolist()
            f = {"tok": tf.train.Feature(int64_list=tf.train.Int64List(value=toks)),
                 "v": tf.train.Feature(float_list=tf.train.FloatList(value=rs.rand(n).tolist())),
                 "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(1 in toks)]))}
            w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
    cols = [fc.embedding_column(fc.sequence_categorical_column_with_identity("tok", 4), 4),
            fc.sequence_numeric_column("v")]
    spec = dict(fc.make_parse_example_spec(cols), label=tf.io.FixedLenFeature([1], tf.int64))

    def input_fn():
        ds = tf.data.TFRecordDataset(path).batch(16).map(lambda r: tf.io.parse_example(r, spec))
        return ds.map(lambda d: ({"tok": d["tok"], "v": d["v"]}, d["label"]))

    def model_fn(features, labels, mode):
        seq, length = tf.keras.experimental.SequenceFeatures(cols)(features)
        steps = tf.maximum(tf.cast(length, tf.float32), 1.0)
        mean = tf.reduce_sum(seq, axis=1) / tf.expand_dims(steps, 1)
        logits = tf.compat.v1.layers.dense(mean, 2)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(tf.reshape(labels, [-1]), logits)
        train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    est.train(input_fn, steps=1)
    first = est.evaluate(input_fn)["loss"]
    est.train(lambda: input_fn().repeat(), steps=60)
    last = est.evaluate(input_fn)["loss"]
    assert np.isfinite(first) and np.isfinite(last)
    assert last < 0.7 * first, (first, last)
    assert est.get_variable_value("sequence_features/tok_embedding/embedding_weights").shape == (4, 4)


def test_exported_model_serves_the_same_sequences(tmp_path, records):
    """export_saved_model with the parsing receiver of the columns' spec: the
    served output on TF's serialized examples is what predict gives."""
    import loom
    c = columns()
    cols = [fc.embedding_column(c["ident"], 2), fc.indicator_column(c["ident"]), c["pair"]]
    spec = fc.make_parse_example_spec(cols)

    def input_fn():
        return tf.data.TFRecordDataset(records).batch(4).map(lambda r: tf.io.parse_example(r, spec))

    def model_fn(features, labels, mode):
        seq, length = tf.keras.experimental.SequenceFeatures(cols)(features)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"seq": seq, "len": length})
        loss = tf.reduce_mean(seq)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    est.train(input_fn, steps=2)
    want = list(est.predict(input_fn))
    recv = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
    path = est.export_saved_model(str(tmp_path / "export"), recv)
    out = loom.Predictor(path).predict([bytes.fromhex(h) for h in EXP["serialized_hex"]])
    np.testing.assert_array_equal(out["seq"], np.stack([w["seq"] for w in want]))
    np.testing.assert_array_equal(out["len"], EXP["ident_and_pair"]["sequence_length"])
    assert out["seq"].shape == (4, 3, 2 + 6 + 2)
