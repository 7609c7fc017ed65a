"""Writes python/tests/fixtures/tf_estimator_extras.json from TF 2.15 (+
tensorflow-estimator) for python/tests/test_tf_estimator_extras.py:
  - classifier_parse_example_spec / regressor_parse_example_spec dicts and
    the error class of a label key the columns already parse;
  - the CheckpointSaverListener call sequence of Estimator.train(
    saving_listeners=...) and of CheckpointSaverHook(listeners=...), and the
    final global step when after_save asks to stop;
  - InMemoryEvaluatorHook's evaluations (the eval dir's events: step, loss,
    a metric) for a deterministic linear model.
Run: $(bash scripts/peer_venv.sh tf) scripts/gen_tf_estimator_extras_fixtures.py"""
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

fc = tf.feature_column
OUT = os.path.join(os.path.dirname(__file__), "..", "python", "tests", "fixtures", "tf_estimator_extras.json")


def spec_json(spec):
    out = {}
    for k, v in sorted(spec.items()):
        if isinstance(v, tf.io.VarLenFeature):
            out[k] = ["var", v.dtype.name]
        else:
            d = v.default_value
            if d is not None:
                d = np.asarray(d).ravel().tolist()
            out[k] = ["fixed", list(v.shape), v.dtype.name, d]
    return out


def parse_specs():
    cols = [fc.numeric_column("a", shape=(2,)), fc.bucketized_column(fc.numeric_column("b"), [0.0, 1.0]),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["x", "y"])),
            fc.embedding_column(fc.categorical_column_with_hash_bucket("d", 10), 2)]
    cases = {
        "classifier_default": tf.estimator.classifier_parse_example_spec(cols, "label"),
        "classifier_full": tf.estimator.classifier_parse_example_spec(
            cols, "label", label_dtype=tf.string, label_default="no", weight_column="w"),
        "classifier_weight_column": tf.estimator.classifier_parse_example_spec(
            cols, "label", label_default=0, weight_column=fc.numeric_column("w", default_value=1.0)),
        "regressor_default": tf.estimator.regressor_parse_example_spec(cols, "price"),
        "regressor_full": tf.estimator.regressor_parse_example_spec(
            cols, "price", label_dtype=tf.float32, label_default=[0.5, 1.5], label_dimension=2, weight_column="w"),
    }
    out = {k: spec_json(v) for k, v in cases.items()}
    errors = {}
    for name, call in (("label_in_columns", lambda: tf.estimator.classifier_parse_example_spec(cols, "a")),
                       ("weight_not_numeric", lambda: tf.estimator.regressor_parse_example_spec(
                           cols, "y", weight_column=fc.categorical_column_with_identity("w", 3)))):
        try:
            call()
            errors[name] = None
        except Exception as e:  # noqa: BLE001
            errors[name] = type(e).__name__
    out["errors"] = errors
    return out


X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.25], [2.0, 1.0]], np.float32)
Y = np.array([[1.0], [-0.5], [2.0], [0.0]], np.float32)


def model_fn(features, labels, mode):
    w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
    pred = tf.matmul(features["x"], w) + b
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op, eval_metric_ops={
        "mae": tf.compat.v1.metrics.mean_absolute_error(labels, pred)})


def train_input():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(2)


def eval_input():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2)


class Recorder(tf.estimator.CheckpointSaverListener):
    def __init__(self, stop_at=None):
        self.calls, self.stop_at = [], stop_at

    def begin(self):
        self.calls.append(["begin"])

    def before_save(self, session, global_step_value):
        self.calls.append(["before_save", int(global_step_value)])

    def after_save(self, session, global_step_value):
        self.calls.append(["after_save", int(global_step_value)])
        return self.stop_at is not None and global_step_value >= self.stop_at

    def end(self, session, global_step_value):
        self.calls.append(["end", int(global_step_value)])


def listeners():
    out = {}
    d = tempfile.mkdtemp()
    try:
        def est(sub, **cfg):
            return tf.estimator.Estimator(model_fn, os.path.join(d, sub), tf.estimator.RunConfig(**cfg))
        # train(saving_listeners=...) with the config's saver: two calls on one model dir
        r = Recorder()
        e = est("a", save_checkpoints_steps=3)
        e.train(train_input, steps=7, saving_listeners=[r])
        e.train(train_input, steps=2, saving_listeners=[r])
        out["train_every_3"] = {"calls": r.calls, "global_step": int(e.get_variable_value("global_step"))}
        # after_save returning True stops training
        r = Recorder(stop_at=4)
        e = est("b", save_checkpoints_steps=2)
        e.train(train_input, steps=20, saving_listeners=[r])
        out["stop_at_4"] = {"calls": r.calls, "global_step": int(e.get_variable_value("global_step"))}
        # a CheckpointSaverHook of the user's with listeners (the config saves nothing)
        r = Recorder()
        e = est("c", save_checkpoints_steps=None, save_checkpoints_secs=None)
        e.train(train_input, steps=5, hooks=[tf.estimator.CheckpointSaverHook(
            os.path.join(d, "c"), save_steps=2, listeners=[r])])
        out["hook_every_2"] = {"calls": r.calls}
        # saving_listeners without any saver
        try:
            e.train(train_input, steps=1, saving_listeners=[Recorder()])
            out["no_saver_error"] = None
        except Exception as ex:  # noqa: BLE001
            out["no_saver_error"] = type(ex).__name__
        try:
            est("d").train(train_input, steps=1, saving_listeners=[object()])
            out["bad_listener_error"] = None
        except Exception as ex:  # noqa: BLE001
            out["bad_listener_error"] = type(ex).__name__
    finally:
        shutil.rmtree(d)
    return out


def eval_events(eval_dir):
    rows = []
    for f in sorted(os.listdir(eval_dir)):
        if not f.startswith("events.out.tfevents"):
            continue
        for ev in tf.compat.v1.train.summary_iterator(os.path.join(eval_dir, f)):
            vals = {v.tag: v.simple_value for v in ev.summary.value if v.WhichOneof("value") == "simple_value"}
            if "loss" in vals:
                rows.append([int(ev.step), vals["loss"], vals["mae"]])
    return rows


def in_memory():
    out = {}
    d = tempfile.mkdtemp()
    try:
        for case, kw, steps in (("every_3_named", dict(every_n_iter=3, name="mem"), 7),
                                ("default_steps_1", dict(steps=1), 4)):
            e = tf.estimator.Estimator(model_fn, os.path.join(d, case),
                                       tf.estimator.RunConfig(save_checkpoints_steps=100))
            h = tf.estimator.experimental.InMemoryEvaluatorHook(e, eval_input, **kw)
            e.train(train_input, steps=steps, hooks=[h])
            sub = "eval" if kw.get("name") is None else "eval_" + kw["name"]
            out[case] = {"eval_dir": sub, "events": eval_events(os.path.join(d, case, sub)),
                         "evaluate": {k: float(v) for k, v in e.evaluate(eval_input, name="check").items()}}
    finally:
        shutil.rmtree(d)
    return out


def main():
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    out = {"parse_specs": parse_specs(), "listeners": listeners(), "in_memory": in_memory()}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
