#!/usr/bin/env python3
"""Reference behaviour of tf.estimator.WarmStartSettings / VocabInfo
(python/tests/test_tf_warm_start.py) from TF 2.15.

Each case trains an "old" canned estimator for a few steps, then warm-starts
a "new" one (changed vocabulary, renamed column, other selection) and trains
it one step with SGD(learning_rate=1e-12), so its checkpoint holds the
warm-started values. The values themselves depend on TF's random
initialization, so the fixture records what they show about the mapping:
  "rows": per remapped variable, for each entry along the vocabulary axis
    the index of the old entry it was copied from, or null for an entry that
    got the backup initializer, and "backup": the value those entries hold;
  "warm": per other trainable variable, whether it equals its old value
    (warm-started) or not (kept its initial value).
"errors": per malformed setting, the exception class TF raises and its
message.

Writes python/tests/fixtures/tf_warm_start.json.
Run: $(bash scripts/peer_venv.sh tf) scripts/gen_tf_warm_start_fixtures.py
"""
import json
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures",
                   "tf_warm_start.json")
FC = tf.feature_column
EST = tf.estimator

OLD_VOCAB = ["a", "b", "c", "d"]
NEW_VOCAB = ["c", "a", "e", "b"]  # reordered, "e" new, "d" removed
OLD_LABELS = ["x", "y", "z"]
NEW_LABELS = ["z", "w", "x"]
TOKS = ["a", "b", "c", "d", "e", "a", "c", "b"]
XS = [0.5, -1.0, 2.0, 1.5, -0.5, 1.0, 0.0, -2.0]
Y2 = [0, 1, 1, 0, 1, 0, 1, 1]
Y3 = ["x", "y", "z", "x", "z", "y", "x", "z"]
EMB = "dnn/input_from_feature_columns/input_layer/%s_embedding/embedding_weights"

TMP = tempfile.mkdtemp()


def vocab_file(name, items):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write("".join(t + "\n" for t in items))
    return p


OLD_F, NEW_F = vocab_file("old.txt", OLD_VOCAB), vocab_file("new.txt", NEW_VOCAB)
OLD_LF, NEW_LF = vocab_file("old_labels.txt", OLD_LABELS), vocab_file("new_labels.txt", NEW_LABELS)


def input_fn(key="tok", labels=Y2):
    def fn():
        feats = {key: tf.constant([[t] for t in TOKS]), "x": tf.constant([[v] for v in XS], tf.float32)}
        lab = tf.constant([[v] for v in labels])
        return tf.data.Dataset.from_tensors((feats, lab)).repeat()
    return fn


def sgd():
    return tf.keras.optimizers.legacy.SGD(learning_rate=1e-12)


def values(est):
    return {n: est.get_variable_value(n) for n in est.get_variable_names()}


def mapping(new, old, axis):
    """For each entry along axis of new: the old entry it equals, or None."""
    n, o = np.moveaxis(new, axis, 0), np.moveaxis(old, axis, 0)
    rows = []
    for r in n:
        hit = [j for j, q in enumerate(o) if np.allclose(r, q, rtol=0, atol=1e-6)]
        rows.append(hit[0] if len(hit) == 1 else None)
    backup = sorted({round(float(v), 6) + 0.0 for k, r in enumerate(n) if rows[k] is None for v in np.ravel(r)})
    return rows, backup


def record(old, new, remapped, skip=()):
    """remapped: {var: axis}."""
    ov, nv = values(old), values(new)
    out = {"rows": {}, "backup": {}, "warm": {}}
    for name, axis in remapped.items():
        prev = skip[name] if isinstance(skip, dict) and name in skip else name
        out["rows"][name], out["backup"][name] = mapping(nv[name], ov[prev], axis)
    for name in nv:
        if name in remapped or name == "global_step" or name not in ov or "/t_0/" in name:
            continue
        if ov[name].shape == nv[name].shape:
            out["warm"][name] = bool(np.allclose(ov[name], nv[name], rtol=0, atol=1e-6))
    return out


def dnn_cols(key, vocab_path, size=None):
    col = FC.categorical_column_with_vocabulary_file(key, vocab_path, vocabulary_size=size, num_oov_buckets=1)
    return [FC.embedding_column(col, 3), FC.numeric_column("x")]


def case_dnn_embedding():
    old = EST.DNNClassifier([4], dnn_cols("tok", OLD_F), model_dir=tempfile.mkdtemp(dir=TMP))
    old.train(input_fn(), steps=3)
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start=".*", var_name_to_vocab_info={
        EMB % "tok": EST.VocabInfo(NEW_F, 4, 1, OLD_F)})
    new = EST.DNNClassifier([4], dnn_cols("tok", NEW_F), model_dir=tempfile.mkdtemp(dir=TMP), optimizer=sgd(),
                            warm_start_from=ws)
    new.train(input_fn(), steps=1)
    return record(old, new, {EMB % "tok": 0})


def case_linear_backup_none():
    # vars_to_warm_start=None: only the VocabInfo variable; new_vocab_size 3 (the file's first 3 entries)
    oc = [FC.categorical_column_with_vocabulary_file("tok", OLD_F, num_oov_buckets=1), FC.numeric_column("x")]
    old = EST.LinearClassifier(oc, model_dir=tempfile.mkdtemp(dir=TMP))
    old.train(input_fn(), steps=3)
    name = "linear/linear_model/tok/weights"
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start=None, var_name_to_vocab_info={
        name: EST.VocabInfo(NEW_F, 3, 1, OLD_F, backup_initializer=tf.compat.v1.ones_initializer())})
    nc = [FC.categorical_column_with_vocabulary_file("tok", NEW_F, vocabulary_size=3, num_oov_buckets=1),
          FC.numeric_column("x")]
    new = EST.LinearClassifier(nc, model_dir=tempfile.mkdtemp(dir=TMP), optimizer=sgd(), warm_start_from=ws)
    new.train(input_fn(), steps=1)
    return record(old, new, {name: 0})


def case_rename_list():
    # the column "word" became "tok"; a list of names/regexes (GLOBAL variables)
    old = EST.DNNClassifier([4], dnn_cols("word", OLD_F), model_dir=tempfile.mkdtemp(dir=TMP))
    old.train(input_fn("word"), steps=3)
    ws = EST.WarmStartSettings(
        os.path.join(old.model_dir, "model.ckpt-3"),  # a checkpoint prefix, not the directory
        vars_to_warm_start=["dnn/input_from_feature_columns", "dnn/hiddenlayer_0/kernel"],
        var_name_to_vocab_info={EMB % "tok": EST.VocabInfo(NEW_F, 4, 1, OLD_F)},
        var_name_to_prev_var_name={EMB % "tok": EMB % "word"})
    new = EST.DNNClassifier([4], dnn_cols("tok", NEW_F), model_dir=tempfile.mkdtemp(dir=TMP), optimizer=sgd(),
                            warm_start_from=ws)
    new.train(input_fn(), steps=1)
    return record(old, new, {EMB % "tok": 0}, {EMB % "tok": EMB % "word"})


def case_label_axis1():
    cols = [FC.numeric_column("x")]
    old = EST.DNNClassifier([4], cols, n_classes=3, label_vocabulary=OLD_LABELS, model_dir=tempfile.mkdtemp(dir=TMP))
    old.train(input_fn(labels=Y3), steps=3)
    ws = EST.WarmStartSettings(old.model_dir, vars_to_warm_start="dnn/hiddenlayer.*|dnn/logits/kernel",
                               var_name_to_vocab_info={"dnn/logits/kernel": EST.VocabInfo(NEW_LF, 3, 0, OLD_LF,
                                                                                          axis=1)})
    new = EST.DNNClassifier([4], cols, n_classes=3, label_vocabulary=NEW_LABELS, model_dir=tempfile.mkdtemp(dir=TMP),
                            optimizer=sgd(), warm_start_from=ws)
    new.train(input_fn(labels=[v if v != "y" else "w" for v in Y3]), steps=1)
    return record(old, new, {"dnn/logits/kernel": 1})


def errors():
    old = EST.DNNClassifier([4], dnn_cols("tok", OLD_F), model_dir=tempfile.mkdtemp(dir=TMP))
    old.train(input_fn(), steps=1)
    cases = {
        "missing_vocab_file": dict(var_name_to_vocab_info={
            EMB % "tok": EST.VocabInfo(os.path.join(TMP, "nope.txt"), 4, 1, OLD_F)}),
        "prev_name_not_in_checkpoint": dict(var_name_to_prev_var_name={"dnn/hiddenlayer_0/kernel": "dnn/nope"}),
        "new_vocab_size_too_large": dict(var_name_to_vocab_info={EMB % "tok": EST.VocabInfo(NEW_F, 6, 1, OLD_F)}),
        "vocab_info_var_not_in_model": dict(var_name_to_vocab_info={"dnn/nope": EST.VocabInfo(NEW_F, 4, 1, OLD_F)}),
        "vocab_info_var_not_selected": dict(vars_to_warm_start="dnn/hiddenlayer.*", var_name_to_vocab_info={
            EMB % "tok": EST.VocabInfo(NEW_F, 4, 1, OLD_F)}),
        "vocab_info_with_empty_list": dict(vars_to_warm_start=[], var_name_to_vocab_info={
            EMB % "tok": EST.VocabInfo(NEW_F, 4, 1, OLD_F)}),
        "prev_name_var_not_in_model": dict(var_name_to_prev_var_name={"dnn/nope": "dnn/hiddenlayer_0/kernel"}),
        # the new model's column is "word": its embedding is selected (".*") but not in the checkpoint
        "selected_var_not_in_checkpoint": dict(),
    }
    # an old model trained with SGD (no slots) and a list of the model's names: the new model's Adagrad slots
    # (training/Adagrad/...) are not selected, so their absence is no error (None: training succeeded)
    old_sgd = EST.DNNClassifier([4], dnn_cols("tok", OLD_F), model_dir=tempfile.mkdtemp(dir=TMP), optimizer=sgd())
    old_sgd.train(input_fn(), steps=1)
    cases["list_new_slots_not_in_checkpoint"] = dict(vars_to_warm_start=["dnn/hiddenlayer_0", "dnn/logits"])
    out = {}
    for k, kw in cases.items():
        key = "word" if k == "selected_var_not_in_checkpoint" else "tok"
        slots = k == "list_new_slots_not_in_checkpoint"
        new = EST.DNNClassifier([4], dnn_cols(key, NEW_F), model_dir=tempfile.mkdtemp(dir=TMP),
                                optimizer="Adagrad" if slots else sgd(),
                                warm_start_from=EST.WarmStartSettings((old_sgd if slots else old).model_dir, **kw))
        try:
            new.train(input_fn(key), steps=1)
            out[k] = None
        except Exception as e:  # noqa: B902 - recording what TF raises
            msg = getattr(e, "message", None) or str(e)
            lines = [ln.strip() for ln in msg.splitlines() if ln.strip() and "Graph execution" not in ln
                     and not ln.strip().startswith(("Detected at node", "File ", "Node:"))]
            out[k] = {"type": type(e).__name__, "message": (lines or [""])[0].replace(TMP, "<tmp>")[:200]}
    return out


def main():
    fix = {"old_vocab": OLD_VOCAB, "new_vocab": NEW_VOCAB, "old_labels": OLD_LABELS, "new_labels": NEW_LABELS,
           "cases": {"dnn_embedding": case_dnn_embedding(), "linear_backup_none": case_linear_backup_none(),
                     "rename_list": case_rename_list(), "label_axis1": case_label_axis1()},
           "errors": errors()}
    with open(OUT, "w") as f:
        json.dump(fix, f, indent=1, sort_keys=True)
        f.write("\n")
    shutil.rmtree(TMP, ignore_errors=True)
    print(json.dumps(fix, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
