import ctypes

import numpy as np
import pytest

import loom
from loom import _lib as L


def test_version_and_library():
    assert loom.version() == "0.1.0"
    assert loom.LIBRARY_PATH.endswith("libloom.so")


def test_struct_layouts_match_the_c_library():
    # every options struct with a struct_size: the C default reports sizeof
    for fn, cls in [("loom_session_options_default", L.SessionOptions),
                    ("loom_dense_options_default", L.DenseOptions),
                    ("loom_run_config_default", L.RunConfig),
                    ("loom_train_options_default", L.TrainOptions),
                    ("loom_eval_options_default", L.EvalOptions),
                    ("loom_predict_options_default", L.PredictOptions),
                    ("loom_predictor_options_default", L.PredictorOptions),
                    ("loom_dnn_options_default", L.DNNOptions),
                    ("loom_linear_options_default", L.LinearOptions),
                    ("loom_baseline_options_default", L.BaselineOptions),
                    ("loom_dnn_linear_combined_options_default", L.CombinedOptions),
                    ("loom_train_spec_default", L.TrainSpec),
                    ("loom_eval_spec_default", L.EvalSpec),
                    ("loom_fc_embedding_options_default", L.EmbeddingOptions),
                    ("loom_onnx_options_default", L.OnnxOptions),
                    ("loom_conv2d_options_default", L.Conv2DOptions),
                    ("loom_dropout_options_default", L.DropoutOptions),
                    ("loom_warm_start_settings_default", L.WarmStartSettings),
                    ("loom_binary_head_options_default", L.BinaryHeadOptions),
                    ("loom_multi_class_head_options_default", L.MultiClassHeadOptions),
                    ("loom_multi_label_head_options_default", L.MultiLabelHeadOptions),
                    ("loom_regression_head_options_default", L.RegressionHeadOptions)]:
        assert getattr(L.lib, fn)().struct_size == ctypes.sizeof(cls), fn
    # and the defaults read through the layout are the documented ones
    d = L.lib.loom_dnn_options_default()
    assert d.n_classes == 2 and d.label_dimension == 1 and d.activation == b"relu"
    assert d.optimizer.name == b"Adagrad" and d.dropout == 0.0
    c = L.lib.loom_run_config_default()
    assert c.save_summary_steps == 100 and c.keep_checkpoint_max == 5 and c.log_step_count_steps == 100
    o = L.lib.loom_dense_options_default()
    assert o.use_bias == 1 and o.trainable == 1
    w, v = L.lib.loom_warm_start_settings_default(), L.lib.loom_vocab_info_default()
    assert w.vars_to_warm_start == b".*" and w.nvocab_infos == 0 and v.old_vocab_size == -1 and v.axis == 0


def test_session_matmul_known_values():
    g = loom.Graph()
    x = g.placeholder(np.float32, (None, 3), "x")
    w = g.constant(np.array([[1, 2], [3, 4], [5, 6]], np.float32), name="w")
    y = g.relu(g.matmul(x, w) + g.constant(np.array([-30, 0], np.float32)))
    xv = np.array([[1, 1, 1], [1, 2, 3], [-1, 0, 0]], np.float32)
    with loom.Session(g, num_threads=1) as s:
        out = s.run(y, {x: xv})
        np.testing.assert_array_equal(out, np.maximum(xv @ [[1, 2], [3, 4], [5, 6]] + [-30, 0], 0))
        assert out.dtype == np.float32 and out.shape == (3, 2)
        # several fetches, a feed by name, float64 input converted to the placeholder's float32
        sm, mm = s.run([g.softmax(x), g.reduce_mean(x, axis=1)], {"x": xv.astype(np.float64)})
        e = np.exp(xv - xv.max(1, keepdims=True))
        np.testing.assert_allclose(sm, e / e.sum(1, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(mm, xv.mean(1), rtol=1e-6)


def test_fetched_arrays_own_their_tensors():
    g = loom.Graph()
    x = g.placeholder(np.float32, (2,), "x")
    y = x * 2.0
    s = loom.Session(g)
    outs = [s.run(y, {x: np.array([i, i + 1], np.float32)}) for i in range(50)]
    del s, g  # the arrays outlive the session and the graph
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, [2 * i, 2 * i + 2])


def test_graph_errors_name_the_node():
    g = loom.Graph()
    a = g.placeholder(np.float32, (2, 3), "a")
    b = g.placeholder(np.float32, (4, 5), "b")
    with pytest.raises(loom.LoomError) as e:
        g.matmul(a, b, name="mm")
    assert e.value.code == 3 and "mm" in str(e.value)
    g2 = loom.Graph()
    x = g2.placeholder(np.float32, (None, 2), "x")
    s = loom.Session(g2)
    with pytest.raises(loom.LoomError) as e:
        s.run(x, {x: np.zeros((3, 5), np.float32)})
    assert "x" in str(e.value)


def test_dense_and_sgd_in_a_session():
    # linear regression with a dense layer trained by minimize: known weights
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 2)).astype(np.float32)
    Y = (X @ np.array([[3.0], [-2.0]]) + 0.5).astype(np.float32)
    g = loom.Graph()
    x = g.placeholder(np.float32, (None, 2), "x")
    yl = g.placeholder(np.float32, (None, 1), "y")
    pred = g.dense(x, 1, kernel_initializer="zeros", name="lin")
    loss = g.mean_squared_error(yl, pred)
    train = g.minimize(loss, "sgd", 0.1)
    init = g.global_variables_initializer()
    s = loom.Session(g)
    s.run(targets=[init])
    for _ in range(200):
        s.run(targets=[train], feed_dict={x: X, yl: Y})
    k, b = s.run([g.get("lin/kernel"), g.get("lin/bias")])
    np.testing.assert_allclose(k.ravel(), [3.0, -2.0], atol=1e-3)
    np.testing.assert_allclose(b, [0.5], atol=1e-3)


def test_dataset_from_numpy():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.array([0, 1, 0, 1, 1], np.int32)
    ds = loom.Dataset.from_tensor_slices({"x": x, "y": y}, label="y").batch(2)
    got = list(ds)
    assert [b["x"].shape for b in got] == [(2, 2), (2, 2), (1, 2)]
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in got]), x)
    np.testing.assert_array_equal(np.concatenate([b["y"] for b in got]), y)
    with pytest.raises(loom.LoomError) as e:
        loom.Dataset.from_tensor_slices({"x": x, "y": y[:3]})
    assert "y" in str(e.value) or "x" in str(e.value)
