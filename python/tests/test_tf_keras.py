"""loom.tf's tf.keras.Sequential, model_to_estimator, Python SessionRunHooks
and learning-rate decays, against TF 2.15's values (fixtures/tf_keras.json,
written by scripts/gen_tf_keras_fixtures.py under TF 2.15)."""
import ctypes as C
import json
import logging
import os

import numpy as np
import pytest

import loom
import loom.tf as tf
from loom import _lib_keras as K

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "tf_keras.json")))


def test_struct_sizes_match_the_library():
    for make, cls in ((K.lib.loom_sequential_compile_options_default, K.SeqCompileOptions),
                      (K.lib.loom_rmsprop_options_default, K.RMSPropOptions),
                      (K.lib.loom_sequential_fit_options_default, K.SeqFitOptions),
                      (K.lib.loom_batch_norm_options_default, K.BatchNormOptions)):
        assert make().struct_size == C.sizeof(cls), cls.__name__


# ---------------------------------------------------------------- Keras
def _model(case):
    tf.keras.backend.clear_session()
    layers = [getattr(tf.keras.layers, k)(**kw) for k, kw in case["layers"]]
    m = tf.keras.Sequential([tf.keras.Input(shape=tuple(case["input_shape"]), dtype=case["x_dtype"])] + layers)
    opt_name, lr = case["compile"]["optimizer"][:2]
    opt_kw = case["compile"]["optimizer"][2] if len(case["compile"]["optimizer"]) > 2 else {}
    loss = case["compile"]["loss"]
    if isinstance(loss, list):
        loss = getattr(tf.keras.losses, loss[0])(**loss[1])
    m.compile(optimizer=getattr(tf.keras.optimizers, opt_name)(learning_rate=lr, **opt_kw), loss=loss,
              metrics=case["compile"]["metrics"])
    m.set_weights([np.array(w, np.float32) for w in case["weights0"]])
    return m


@pytest.mark.parametrize("name", sorted(FIX["keras"]))
def test_sequential_fit_evaluate_predict_match_tf(name):
    case = FIX["keras"][name]
    m = _model(case)
    x = np.array(case["x"], case["x_dtype"])
    y = np.array(case["y"])
    h = m.fit(x, y, shuffle=False, verbose=0, **case["fit"])
    assert isinstance(h, tf.keras.callbacks.History)
    assert sorted(h.history) == sorted(case["history"]) and list(h.history)[0] == "loss"
    assert h.epoch == list(range(case["fit"]["epochs"]))
    for k, v in case["history"].items():
        np.testing.assert_allclose(h.history[k], v, rtol=2e-4, atol=2e-5, err_msg=k)
    for got, want in zip(m.get_weights(), case["weights"]):
        np.testing.assert_allclose(got, np.array(want, np.float32), rtol=1e-3, atol=2e-5)
    ev = m.evaluate(x, y, batch_size=case["fit"]["batch_size"], verbose=0, return_dict=True)
    for k, v in case["evaluate"].items():
        np.testing.assert_allclose(ev[k], v, rtol=2e-4, atol=2e-5, err_msg=k)
    lst = m.evaluate(x, y, batch_size=case["fit"]["batch_size"], verbose=0)
    assert lst == [ev["loss"]] + [ev[k] for k in case["compile"]["metrics"]]
    np.testing.assert_allclose(m.predict(x[:4], verbose=0), np.array(case["predict"]), rtol=1e-4, atol=1e-5)


def test_sequential_names_input_and_validation_data():
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential()
    m.add(tf.keras.layers.Dense(4, activation="relu", input_shape=(3,)))
    m.add(tf.keras.layers.Dense(1))
    m2 = tf.keras.Sequential([tf.keras.layers.Dense(2, input_dim=3)])
    assert [layer.name for layer in m.layers] == ["dense", "dense_1"]  # Keras' per-process names
    assert m2.layers[0].name == "dense_2" and m2.input_names == ["dense_2_input"]
    assert m.input_names == ["dense_input"] and m.output_names == ["dense_1"]
    m.compile(optimizer="sgd", loss="mse")
    x = np.random.RandomState(0).randn(40, 3).astype(np.float32)
    y = x.sum(1)
    h = m.fit(x, y, batch_size=10, epochs=2, validation_split=0.25, verbose=0)
    assert sorted(h.history) == ["loss", "val_loss"] and len(h.history["val_loss"]) == 2
    assert np.isclose(h.history["val_loss"][-1], m.evaluate(x[30:], y[30:], batch_size=10, verbose=0), rtol=1e-5)
    assert isinstance(m.evaluate(x, y, verbose=0), float)  # no metrics: the loss alone, as Keras
    assert m.count_params() == 3 * 4 + 4 + 4 + 1


def test_sequential_lazy_input_shape_from_fit():
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)])
    m.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    assert not m.built
    x = np.random.RandomState(1).rand(32, 2, 3).astype(np.float32)
    m.fit(x, (x[:, 0, 0] > 0.5).astype(np.int32), batch_size=8, epochs=1, verbose=0)
    assert m.built and m.input_names == ["flatten_input"]
    assert [w.shape for w in m.get_weights()] == [(6, 2), (2,)]


def test_unsupported_keras_raises_naming_it():
    tf.keras.backend.clear_session()
    with pytest.raises(NotImplementedError, match="tf.keras.layers.LSTM"):
        tf.keras.layers.LSTM(4)
    with pytest.raises(NotImplementedError, match="kernel_constraint"):
        tf.keras.layers.Dense(4, kernel_constraint=lambda w: w)
    with pytest.raises(NotImplementedError, match="activation"):
        tf.keras.layers.Dense(4, activation="hard_sigmoid")
    m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(2,))])
    with pytest.raises(NotImplementedError, match="hinge"):
        m.compile(optimizer="adam", loss="hinge")
    with pytest.raises(NotImplementedError, match="metrics"):
        m.compile(optimizer="adam", loss="mse", metrics=["auc"])
    with pytest.raises(NotImplementedError, match="callbacks"):
        m.compile(optimizer="adam", loss="mse")
        m.fit(np.zeros((2, 2)), np.zeros(2), callbacks=[object()])
    with pytest.raises(NotImplementedError, match="tf.keras.Sequential.save"):
        m.save("x")


def test_rmsprop_is_keras_in_sequential_and_legacy_in_canned_estimators():
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
    m.compile(loss="mse")  # Keras' default optimizer: RMSprop (the mean square starting at 0)
    o = tf.keras.optimizers.RMSprop(rho=0.8, momentum=0.5, epsilon=1e-6, centered=True)._options()
    assert (o.decay, o.momentum, o.epsilon, o.centered, o.initial_rms_value) == (0.8, 0.5, 1e-6, 1, 0.0)
    assert K.lib.loom_rmsprop_options_default().initial_rms_value == 1.0  # TF 1's RMSPropOptimizer
    # canned estimators: Keras' legacy RMSprop, epsilon outside the square root without momentum, TF's
    # kernel (inside) with it
    assert tf.keras.optimizers.RMSprop()._canned_options().keras_legacy == 1
    assert tf.keras.optimizers.RMSprop(momentum=0.5)._canned_options().keras_legacy == 0
    with pytest.raises(ValueError, match="rho must be in"):
        tf.keras.optimizers.RMSprop(rho=1.5)._options()


def test_layer_error_names_the_layer():
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential([tf.keras.layers.Dense(4, input_shape=(3,)), tf.keras.layers.Conv2D(2, 3)])
    with pytest.raises(ValueError, match="conv2d"):
        m.compile(optimizer="adam", loss="mse")


def test_model_to_estimator_keys_features_by_input_name_and_starts_from_weights(tmp_path):
    tf.keras.backend.clear_session()
    rng = np.random.RandomState(3)
    x = rng.randn(96, 4).astype(np.float32)
    y = (x[:, 0] + x[:, 2] > 0).astype(np.int32)
    m = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                             tf.keras.layers.Dropout(0.1), tf.keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=0.05), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    m.fit(x, y, batch_size=16, epochs=3, verbose=0)
    keras_eval = m.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    keras_pred = m.predict(x[:5], verbose=0)
    est = tf.keras.estimator.model_to_estimator(keras_model=m, model_dir=str(tmp_path))
    assert isinstance(est, tf.estimator.Estimator)

    def eval_fn():
        return tf.data.Dataset.from_tensor_slices(({"dense_input": x}, y)).batch(32)
    ev = est.evaluate(eval_fn)
    assert ev["global_step"] == 0  # model.ckpt-0: the model's weights
    np.testing.assert_allclose(ev["accuracy"], keras_eval["accuracy"], rtol=1e-6)
    np.testing.assert_allclose(ev["loss"], keras_eval["loss"], rtol=1e-5)
    preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"dense_input": x[:5]}).batch(5)))
    assert list(preds[0]) == ["dense_1"]  # keyed by the output layer's name, as TF
    np.testing.assert_allclose(np.stack([p["dense_1"] for p in preds]), keras_pred, rtol=1e-5, atol=1e-6)
    # exported with a raw receiver keyed by the input name, served with tf.saved_model.load
    ph = tf.compat.v1.placeholder(tf.float32, [None, 4], name="dense_input")
    path = est.export_saved_model(str(tmp_path / "export"),
                                  tf.estimator.export.build_raw_serving_input_receiver_fn({"dense_input": ph}))
    served = tf.saved_model.load(path.decode()).signatures["serving_default"](dense_input=tf.constant(x[:5]))
    np.testing.assert_allclose(served["dense_1"].numpy(), keras_pred, rtol=1e-5, atol=1e-6)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"dense_input": x}, y)).repeat().batch(16), steps=20)
    assert est.evaluate(eval_fn)["global_step"] == 20
    names = est.get_variable_names()
    assert {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"} <= set(names)
    with pytest.raises(ValueError, match="compile"):
        tf.keras.estimator.model_to_estimator(keras_model=tf.keras.Sequential([tf.keras.layers.Dense(1)]))


# ---------------------------------------------------------------- learning-rate decays
@pytest.mark.parametrize("i", range(len(FIX["decays"])))
def test_decay_matches_tf(i):
    fn, kw, want = FIX["decays"][i]
    g = loom.Graph()
    gs = g.placeholder(np.int64, [], name="global_step")
    if fn == "piecewise_constant":
        lr = tf.compat.v1.train.piecewise_constant(gs, **kw)
    else:
        lr = getattr(tf.compat.v1.train, fn)(global_step=gs, **kw)
    with loom.Session(g) as s:
        got = [float(s.run(lr, {gs: np.int64(step)})) for step in FIX["decay_steps"]]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9, err_msg="%s %s" % (fn, kw))


def test_decay_requires_global_step():
    with pytest.raises(ValueError, match="global_step"):
        tf.compat.v1.train.exponential_decay(0.1, None, 10, 0.5)


# ---------------------------------------------------------------- hooks
def _data():
    rng = np.random.RandomState(0)
    x = rng.randn(64, 4).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32)


def _model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="out")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    gs = tf.compat.v1.train.get_global_step()
    lr = tf.compat.v1.train.exponential_decay(0.1, gs, 10, 0.5, name="lr")
    train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=gs)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input(x, y, epochs=None):
    return tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=epochs, shuffle=False)


class Recorder(tf.estimator.SessionRunHook):
    def __init__(self, stop_at=None):
        self.calls, self.results, self.stop_at = [], [], stop_at

    def begin(self):
        self.calls.append("begin")
        self.gs = tf.compat.v1.train.get_global_step()

    def after_create_session(self, session, coord):
        self.calls.append(("after_create_session", int(session.run(self.gs))))

    def before_run(self, run_context):
        self.calls.append("before_run")
        return tf.estimator.SessionRunArgs({"step": self.gs, "lr": "lr", "kernel": "out/kernel:0"})

    def after_run(self, run_context, run_values):
        self.calls.append("after_run")
        self.results.append(run_values.results)
        if self.stop_at and run_values.results["step"] >= self.stop_at:
            run_context.request_stop()

    def end(self, session):
        self.calls.append(("end", int(session.run(self.gs))))


def test_python_hook_lifecycle_fetches_and_stop(tmp_path):
    x, y = _data()
    est = tf.estimator.Estimator(_model_fn, model_dir=str(tmp_path))
    h = Recorder(stop_at=4)
    est.train(_input(x, y), hooks=[h], steps=50)
    assert h.calls[:2] == ["begin", ("after_create_session", 0)]
    assert h.calls[2:-1] == ["before_run", "after_run"] * 4 and h.calls[-1] == ("end", 4)
    # loom fetches a variable after the step's update (loom_hooks.h): steps 1..4
    assert [int(r["step"]) for r in h.results] == [1, 2, 3, 4]
    # the learning rate of each step: 0.1 * 0.5 ** (step_before / 10), TF's exponential_decay
    np.testing.assert_allclose([float(r["lr"]) for r in h.results], [0.1 * 0.5 ** (s / 10) for s in range(4)],
                               rtol=1e-6)
    assert h.results[-1]["kernel"].shape == (4, 2)
    np.testing.assert_allclose(h.results[-1]["kernel"], est.get_variable_value("out/kernel"), rtol=1e-6)
    assert est.evaluate(_input(x, y, 1), hooks=[Recorder()])["global_step"] == 4


def test_hook_exception_surfaces_unchanged(tmp_path):
    x, y = _data()
    est = tf.estimator.Estimator(_model_fn, model_dir=str(tmp_path))

    class Boom(Exception):
        pass

    class Bad(tf.estimator.SessionRunHook):
        def after_run(self, run_context, run_values):
            raise Boom("from after_run")
    with pytest.raises(Boom, match="from after_run"):
        est.train(_input(x, y), hooks=[Bad()], steps=3)

    class BadFetch(tf.estimator.SessionRunHook):
        def before_run(self, run_context):
            return tf.estimator.SessionRunArgs("no_such_tensor")
    with pytest.raises(ValueError, match="no_such_tensor"):
        est.train(_input(x, y), hooks=[BadFetch()], steps=1)


def test_logging_tensor_hook_by_graph_name(tmp_path, caplog):
    x, y = _data()
    est = tf.estimator.Estimator(_model_fn, model_dir=str(tmp_path))
    caplog.set_level(logging.INFO, logger="tensorflow")
    est.train(_input(x, y), steps=5, hooks=[tf.compat.v1.train.LoggingTensorHook({"lr": "lr", "step": "global_step"},
                                                                                 every_n_iter=2)])
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    assert len(lines) == 3 and lines[0] == "lr = 0.1, step = 1"  # iterations 0, 2, 4
    assert lines[1].startswith("lr = %s, step = 3 (" % np.float32(0.1 * 0.5 ** 0.2))
    caplog.clear()
    est.train(_input(x, y), steps=3, hooks=[tf.compat.v1.train.LoggingTensorHook(
        ["global_step"], at_end=True, formatter=lambda v: "at %d" % v["global_step"])])
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == ["at 8"]


def test_c_hooks_checkpoint_saver_summary_profiler_stop(tmp_path):
    x, y = _data()
    est = tf.estimator.Estimator(_model_fn, model_dir=str(tmp_path / "m"),
                                 config=tf.estimator.RunConfig(save_checkpoints_steps=1000))
    ck, prof, summ = tmp_path / "ck", tmp_path / "prof", tmp_path / "summ"
    est.train(_input(x, y), steps=100, hooks=[
        tf.compat.v1.train.CheckpointSaverHook(str(ck), save_steps=3),
        tf.compat.v1.train.ProfilerHook(save_steps=4, output_dir=str(prof)),
        tf.compat.v1.train.SummarySaverHook(save_steps=2, output_dir=str(summ)),
        tf.compat.v1.train.StopAtStepHook(num_steps=7)])
    assert est.evaluate(_input(x, y, 1))["global_step"] == 7
    saved = sorted(int(f.split("-")[1]) for f in os.listdir(ck) if f.startswith("model.ckpt-"))
    assert saved == [0, 3, 6, 7]
    assert sorted(os.listdir(prof)) == ["timeline-4.json"]
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(summ))
    with pytest.raises(ValueError, match="exactly one"):
        tf.compat.v1.train.CheckpointSaverHook(str(ck))


def test_estimator_spec_training_hooks(tmp_path):
    x, y = _data()
    rec = Recorder()

    def model_fn(features, labels, mode):
        spec = _model_fn(features, labels, mode)
        spec.training_hooks = [rec, tf.compat.v1.train.NanTensorHook(spec.loss)]
        return spec
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_input(x, y), steps=3)
    assert [int(r["step"]) for r in rec.results] == [1, 2, 3]


def test_sequential_on_tf_data_datasets():
    case = FIX["keras"]["mlp_softmax_sgd"]
    x, y = np.array(case["x"], np.float32), np.array(case["y"], np.int32)
    m = _model(case)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(case["fit"]["batch_size"])
    h = m.fit(ds, epochs=case["fit"]["epochs"], verbose=0)  # the same batches as TF's fit(shuffle=False)
    for k, v in case["history"].items():
        np.testing.assert_allclose(h.history[k], v, rtol=2e-4, atol=2e-5, err_msg=k)
    ev = m.evaluate(tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16), verbose=0, return_dict=True)
    np.testing.assert_allclose(ev["loss"], case["evaluate"]["loss"], rtol=2e-4)
    np.testing.assert_allclose(m.predict(tf.data.Dataset.from_tensor_slices(x[:4]).batch(2)), case["predict"],
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        m.fit(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8), epochs=1)
    h = m.fit(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8), epochs=2, steps_per_epoch=3, verbose=0)
    assert len(h.history["loss"]) == 2
