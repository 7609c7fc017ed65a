"""tf.estimator.WarmStartSettings / VocabInfo (and loom.WarmStartSettings /
loom.VocabInfo) against TF 2.15's behaviour (fixtures/tf_warm_start.json,
written by scripts/gen_tf_warm_start_fixtures.py): each case trains an old
model, warm-starts a new one with a changed vocabulary, renamed variables
or another selection, trains it one step with SGD(1e-12) and compares what
the checkpoint shows with what TF showed: which old entry each remapped
entry came from, the backup value of the others, and which variables were
warm-started."""
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "tf_warm_start.json")))
FC = tf.feature_column
EST = tf.estimator
TOKS = ["a", "b", "c", "d", "e", "a", "c", "b"]
XS = [0.5, -1.0, 2.0, 1.5, -0.5, 1.0, 0.0, -2.0]
Y2 = [0, 1, 1, 0, 1, 0, 1, 1]
Y3 = ["x", "y", "z", "x", "z", "y", "x", "z"]
EMB = "dnn/input_from_feature_columns/input_layer/%s_embedding/embedding_weights"


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, items in (("old", FIX["old_vocab"]), ("new", FIX["new_vocab"]), ("old_labels", FIX["old_labels"]),
                        ("new_labels", FIX["new_labels"])):
        p = tmp_path / (name + ".txt")
        p.write_text("".join(t + "\n" for t in items))
        out[name] = str(p)
    out["tmp"] = tmp_path
    return out


def input_fn(key="tok", labels=Y2):
    def fn():
        feats = {key: np.array([[t] for t in TOKS]), "x": np.array([[v] for v in XS], np.float32)}
        return feats, np.array([[v] for v in labels])
    return fn


def sgd():
    return tf.keras.optimizers.legacy.SGD(learning_rate=1e-12)


def values(est):
    return {n: est.get_variable_value(n) for n in est.get_variable_names()}


def check(case, old, new, prev=None):
    """What the new checkpoint shows matches the fixture's case."""
    fix = FIX["cases"][case]
    ov, nv = values(old), values(new)
    for name, rows in fix["rows"].items():
        axis = 0 if name != "dnn/logits/kernel" else 1
        n = np.moveaxis(nv[name], axis, 0)
        o = np.moveaxis(ov[(prev or {}).get(name, name)], axis, 0)
        assert len(n) == len(rows), name
        (backup,) = fix["backup"][name]
        for k, j in enumerate(rows):
            want = o[j] if j is not None else np.full(n[k].shape, backup, np.float32)
            np.testing.assert_allclose(n[k], want, rtol=0, atol=1e-6, err_msg="%s entry %d" % (name, k))
        assert any(j is not None for j in rows) and not np.allclose(o[0], 0)  # the check can fail
    for name, warm in fix["warm"].items():
        assert np.allclose(ov[name], nv[name], rtol=0, atol=1e-6) == warm, name


def dnn_cols(key, path, size=None):
    col = FC.categorical_column_with_vocabulary_file(key, path, vocabulary_size=size, num_oov_buckets=1)
    return [FC.embedding_column(col, 3), FC.numeric_column("x")]


def test_embedding_rows_remapped_by_token(files):
    d = files["tmp"]
    old = EST.DNNClassifier([4], dnn_cols("tok", files["old"]), model_dir=str(d / "old"))
    old.train(input_fn(), steps=3)
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start=".*", var_name_to_vocab_info={
        EMB % "tok": EST.VocabInfo(files["new"], 4, 1, files["old"])})
    new = EST.DNNClassifier([4], dnn_cols("tok", files["new"]), model_dir=str(d / "new"), optimizer=sgd(),
                            warm_start_from=ws)
    new.train(input_fn(), steps=1)
    check("dnn_embedding", old, new)


def test_linear_weights_none_selects_only_the_vocab_variable_with_a_backup(files):
    d = files["tmp"]
    oc = [FC.categorical_column_with_vocabulary_file("tok", files["old"], num_oov_buckets=1), FC.numeric_column("x")]
    old = EST.LinearClassifier(oc, model_dir=str(d / "old"))
    old.train(input_fn(), steps=3)
    name = "linear/linear_model/tok/weights"
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start=None, var_name_to_vocab_info={
        name: EST.VocabInfo(files["new"], 3, 1, files["old"], backup_initializer=tf.compat.v1.ones_initializer())})
    nc = [FC.categorical_column_with_vocabulary_file("tok", files["new"], vocabulary_size=3, num_oov_buckets=1),
          FC.numeric_column("x")]
    new = EST.LinearClassifier(nc, model_dir=str(d / "new"), optimizer=sgd(), warm_start_from=ws)
    new.train(input_fn(), steps=1)
    check("linear_backup_none", old, new)


def test_rename_and_list_of_names_from_a_checkpoint_path(files):
    d = files["tmp"]
    old = EST.DNNClassifier([4], dnn_cols("word", files["old"]), model_dir=str(d / "old"))
    old.train(input_fn("word"), steps=3)
    ws = EST.WarmStartSettings(
        os.path.join(old.model_dir, "model.ckpt-3"),
        vars_to_warm_start=["dnn/input_from_feature_columns", "dnn/hiddenlayer_0/kernel"],
        var_name_to_vocab_info={EMB % "tok": EST.VocabInfo(files["new"], 4, 1, files["old"])},
        var_name_to_prev_var_name={EMB % "tok": EMB % "word"})
    new = EST.DNNClassifier([4], dnn_cols("tok", files["new"]), model_dir=str(d / "new"), optimizer=sgd(),
                            warm_start_from=ws)
    new.train(input_fn(), steps=1)
    check("rename_list", old, new, {EMB % "tok": EMB % "word"})


def test_output_layer_columns_remapped_by_label_axis1(files):
    d = files["tmp"]
    cols = [FC.numeric_column("x")]
    old = EST.DNNClassifier([4], cols, n_classes=3, label_vocabulary=FIX["old_labels"], model_dir=str(d / "old"))
    old.train(input_fn(labels=Y3), steps=3)
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start="dnn/hiddenlayer.*|dnn/logits/kernel",
                               var_name_to_vocab_info={"dnn/logits/kernel": EST.VocabInfo(
                                   files["new_labels"], 3, 0, files["old_labels"], axis=1)})
    new = EST.DNNClassifier([4], cols, n_classes=3, label_vocabulary=FIX["new_labels"], model_dir=str(d / "new"),
                            optimizer=sgd(), warm_start_from=ws)
    new.train(input_fn(labels=[v if v != "y" else "w" for v in Y3]), steps=1)
    check("label_axis1", old, new)


def malformed(files, case):
    """The old model's directory and the new model warm-started by the fixture's error case."""
    d = files["tmp"]
    old = EST.DNNClassifier([4], dnn_cols("tok", files["old"]), model_dir=str(d / "old"))
    old.train(input_fn(), steps=1)
    vi = EST.VocabInfo(files["new"], 4, 1, files["old"])
    kw = {
        "missing_vocab_file": dict(var_name_to_vocab_info={
            EMB % "tok": EST.VocabInfo(str(d / "nope.txt"), 4, 1, files["old"])}),
        "prev_name_not_in_checkpoint": dict(var_name_to_prev_var_name={"dnn/hiddenlayer_0/kernel": "dnn/nope"}),
        "new_vocab_size_too_large": dict(var_name_to_vocab_info={
            EMB % "tok": EST.VocabInfo(files["new"], 6, 1, files["old"])}),
        "vocab_info_var_not_in_model": dict(var_name_to_vocab_info={"dnn/nope": vi}),
        "vocab_info_var_not_selected": dict(vars_to_warm_start="dnn/hiddenlayer.*",
                                            var_name_to_vocab_info={EMB % "tok": vi}),
        "vocab_info_with_empty_list": dict(vars_to_warm_start=[], var_name_to_vocab_info={EMB % "tok": vi}),
        "prev_name_var_not_in_model": dict(var_name_to_prev_var_name={"dnn/nope": "dnn/hiddenlayer_0/kernel"}),
        "selected_var_not_in_checkpoint": dict(),  # the new column is "word": its embedding is not there
    }[case]
    key = "word" if case == "selected_var_not_in_checkpoint" else "tok"
    new = EST.DNNClassifier([4], dnn_cols(key, files["new"]), model_dir=str(d / "new"), optimizer=sgd(),
                            warm_start_from=EST.WarmStartSettings(old.model_dir, **kw))
    want = FIX["errors"][case]["type"]
    return new, input_fn(key), ValueError if want == "ValueError" else getattr(tf.errors, want)


@pytest.mark.parametrize("case,named", [("missing_vocab_file", "nope.txt"),
                                        ("prev_name_not_in_checkpoint", "dnn/nope"),
                                        ("new_vocab_size_too_large", "new.txt"),
                                        ("vocab_info_var_not_in_model", "dnn/nope"),
                                        ("vocab_info_var_not_selected", "tok_embedding/embedding_weights"),
                                        ("vocab_info_with_empty_list", "tok_embedding/embedding_weights"),
                                        ("prev_name_var_not_in_model", "dnn/nope"),
                                        ("selected_var_not_in_checkpoint", "word_embedding/embedding_weights")])
def test_malformed_settings_raise_tf_error_class_naming_the_thing(files, case, named):
    new, inp, cls = malformed(files, case)
    with pytest.raises(cls, match=named):
        new.train(inp, steps=1)
    assert new.latest_checkpoint() is None


@pytest.mark.parametrize("case,named", [("prev_name_not_in_checkpoint", "dnn/nope"),
                                        ("vocab_info_var_not_selected", "tok_embedding/embedding_weights"),
                                        ("prev_name_var_not_in_model", "dnn/nope"),
                                        ("selected_var_not_in_checkpoint", "word_embedding/embedding_weights")])
def test_train_and_evaluate_raises_as_train(files, case, named):
    new, inp, cls = malformed(files, case)
    assert cls is ValueError
    with pytest.raises(ValueError, match=named):
        EST.train_and_evaluate(new, EST.TrainSpec(inp, max_steps=1), EST.EvalSpec(inp, steps=1))


def test_list_does_not_need_the_new_optimizer_slots(files):
    # TF names its slots training/<optimizer>/...: a list of the model's names leaves them out, so a
    # checkpoint trained with SGD warm-starts a model trained with Adagrad (TF: no error)
    assert FIX["errors"]["list_new_slots_not_in_checkpoint"] is None
    d = files["tmp"]
    old = EST.DNNClassifier([4], dnn_cols("tok", files["old"]), model_dir=str(d / "old"), optimizer=sgd())
    old.train(input_fn(), steps=1)
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start=["dnn/hiddenlayer_0", "dnn/logits"])
    new = EST.DNNClassifier([4], dnn_cols("tok", files["new"]), model_dir=str(d / "new"), optimizer="Adagrad",
                            warm_start_from=ws)
    new.train(input_fn(), steps=1)
    assert new.get_variable_value("global_step") == 1


def test_settings_arguments_checked_as_tf(tmp_path):
    with pytest.raises(ValueError, match="axis"):
        EST.VocabInfo("new.txt", 4, 1, "old.txt", axis=2)
    with pytest.raises(ValueError, match="vars_to_warm_start"):
        EST.WarmStartSettings("ckpt", vars_to_warm_start=3)
    with pytest.raises(NotImplementedError, match="backup_initializer"):
        EST.VocabInfo("new.txt", 4, 1, "old.txt", backup_initializer=object())._backup_c()
    with pytest.raises(ValueError, match=r"invalid regex.*vars_to_warm_start"):  # Python's re takes it, POSIX not
        EST.LinearClassifier([FC.numeric_column("x")], model_dir=str(tmp_path),
                             warm_start_from=EST.WarmStartSettings("ckpt", ["(?<=a)b"]))
    ws = EST.WarmStartSettings("ckpt")
    assert ws.vars_to_warm_start == ".*" and ws.var_name_to_vocab_info == {} and isinstance(ws, tuple)
    vi = EST.VocabInfo("n.txt", 2, 0, "o.txt")
    assert (vi.old_vocab_size, vi.backup_initializer, vi.axis) == (-1, None, 0)


def test_native_api_lists_renames_and_backup(tmp_path):
    # loom.WarmStartSettings / loom.VocabInfo on the native estimators; vocabularies as lists (a loom extension)
    fc = loom.feature_column
    data = {"word": np.array([[t] for t in TOKS]), "x": np.array([[v] for v in XS], np.float32),
            "label": np.array(Y2, np.int64)}

    def inp(key):
        def fn(mode):
            f = dict(data)
            f[key] = f.pop("word")
            return loom.Dataset.from_tensor_slices(f, label="label").batch(8).repeat()
        return fn

    def model(key, vocab):
        col = fc.vocabulary_list(key, vocab, num_oov_buckets=1)
        return [col, fc.numeric("x")]

    old_vocab, new_vocab = FIX["old_vocab"], FIX["new_vocab"]
    old = loom.LinearClassifier(model("word", old_vocab), model_dir=str(tmp_path / "old"), optimizer="SGD",
                                learning_rate=0.5)
    old.train(inp("word"), steps=3)
    o = old.get_variable_value("linear/linear_model/word/weights")
    ws = loom.WarmStartSettings(str(tmp_path / "old"), vars_to_warm_start=["linear/linear_model/tok"],
                                var_name_to_vocab_info={"linear/linear_model/tok/weights": loom.VocabInfo(
                                    new_vocab, 4, 1, old_vocab, backup_initializer=0.25)},
                                var_name_to_prev_var_name={"linear/linear_model/tok/weights":
                                                           "linear/linear_model/word/weights"})
    new = loom.LinearClassifier(model("tok", new_vocab), model_dir=str(tmp_path / "new"), optimizer="SGD",
                                learning_rate=1e-12, warm_start_from=ws)
    new.train(inp("tok"), steps=1)
    n = new.get_variable_value("linear/linear_model/tok/weights")
    want = np.array([o[old_vocab.index(t)] if t in old_vocab else [0.25] for t in new_vocab] + [[0.25]], np.float32)
    np.testing.assert_allclose(n, want, rtol=0, atol=1e-6)
    assert not np.allclose(o[:4], 0)
    # the x weights were not selected: their initial value (zeros), not the old one
    assert np.allclose(new.get_variable_value("linear/linear_model/x/weights"), 0)
    assert not np.allclose(old.get_variable_value("linear/linear_model/x/weights"), 0)
    # a selected variable the checkpoint lacks is a ValueError in the native API too
    ws = loom.WarmStartSettings(str(tmp_path / "old"), vars_to_warm_start=["linear/linear_model/tok"])
    bad = loom.LinearClassifier(model("tok", new_vocab), model_dir=str(tmp_path / "bad"), warm_start_from=ws)
    with pytest.raises(ValueError, match="linear/linear_model/tok/weights is not in checkpoint"):
        bad.train(inp("tok"), steps=1)
