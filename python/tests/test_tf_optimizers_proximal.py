"""tf.compat.v1.train.ProximalGradientDescentOptimizer, ProximalAdagradOptimizer and AdagradDAOptimizer
against TF 2.15 (fixtures/tf_optimizers_proximal.json, written by scripts/gen_tf_proximal_fixtures.py): the
same fixed model (a linear part with dense gradients, an embedding with a sparse gradient that repeats rows
and leaves one out) trained the same steps; every variable and slot, by TF's names, must match."""
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "tf_optimizers_proximal.json")))
TRAIN = tf.compat.v1.train


def _train(case):
    g = loom.Graph()
    var = {k: g.variable(k, np.shape(v), initializer=np.array(v, np.float32)) for k, v in FIX["init"].items()}
    x = g.constant(np.array(FIX["x"], np.float32))
    ids = g.constant(np.array(FIX["ids"], np.int64))
    y = g.constant(np.array(FIX["y"], np.float32))
    pred = g.matmul(x, var["w"]) + g.matmul(tf.nn.embedding_lookup(var["emb"], ids), var["v"]) + var["b"]
    loss = g.reduce_mean(g.square(pred - y))
    kw = dict(case["kwargs"])
    if case["optimizer"] == "AdagradDAOptimizer":
        kw["global_step"] = TRAIN.get_global_step()
    train = getattr(TRAIN, case["optimizer"])(**kw).minimize(loss, global_step=TRAIN.get_global_step())
    s = loom.Session(g)
    s.run(targets=[g.global_variables_initializer()])
    losses = [float(s.run([loss], targets=[train])[0]) for _ in range(FIX["steps"])]
    return g, s, losses


@pytest.mark.parametrize("name", sorted(FIX["cases"]))
def test_matches_tf(name):
    case = FIX["cases"][name]
    g, s, losses = _train(case)
    # the loss each step reads the variables before that step's update (TF's run([train, loss]) too)
    np.testing.assert_allclose(losses, case["losses"], rtol=2e-6)
    for vname, want in sorted(case["values"].items()):
        got = s.run(g.get(vname))
        if vname == "global_step":
            assert int(got) == want == FIX["steps"]
            continue
        np.testing.assert_allclose(got, np.array(want, np.float32), rtol=2e-6, atol=2e-7, err_msg=vname)
    # the same variables (slots by TF's names): the variable list of a checkpoint
    names = {n for n in case["values"]}
    for v in ("w", "v", "b", "emb"):
        for suffix in ("ProximalGradientDescent", "ProximalAdagrad", "ProximalAdagrad_1", "AdagradDA",
                       "AdagradDA_1", "AdagradDA_2"):
            full = v + "/" + suffix
            if full in names:
                g.get(full)
            else:
                with pytest.raises(KeyError):
                    g.get(full)


@pytest.mark.parametrize("cls", ["ProximalGradientDescent", "ProximalAdagrad", "AdagradDA"])
def test_the_embedding_takes_the_sparse_kernel(cls):
    case = next(c for c in FIX["cases"].values() if c["optimizer"] == cls + "Optimizer")
    assert sorted(case["ops"]) == ["ResourceApply" + cls, "ResourceSparseApply" + cls]  # TF's
    g, _, _ = _train(case)
    assert g.get("%s/update_emb/SparseApply%s" % (cls, cls)).op == "SparseApply" + cls
    for v in ("w", "v", "b"):
        assert g.get("%s/update_%s/Apply%s" % (cls, v, cls)).op == "Apply" + cls


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        TRAIN.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="initial_gradient_squared_accumulator_value must be positive"):
        TRAIN.AdagradDAOptimizer(0.1, TRAIN.get_global_step(), initial_gradient_squared_accumulator_value=-1)
    with pytest.raises(ValueError, match="l1_regularization_strength must be a number >= 0, got -0.1"):
        TRAIN.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=-0.1)
    with pytest.raises(ValueError, match="l2_regularization_strength must be a number >= 0"):
        TRAIN.ProximalAdagradOptimizer(0.1, l2_regularization_strength=-1)
    with pytest.raises(NotImplementedError, match="AdagradDAOptimizer\\(global_step=5\\)"):
        TRAIN.AdagradDAOptimizer(0.1, 5)
    with pytest.raises(TypeError):
        TRAIN.AdagradDAOptimizer(0.1)  # global_step is required, as TF's
    assert TRAIN.ProximalAdagradOptimizer(0.1).get_name() == "ProximalAdagrad"
    assert TRAIN.AdagradDAOptimizer(0.1, TRAIN.get_global_step()).get_name() == "AdagradDA"
    assert TRAIN.ProximalGradientDescentOptimizer(0.1).get_name() == "ProximalGradientDescent"


def test_native_graph_minimize_takes_them():
    # one step from w = 1 with the gradient 2 (loss 2w), TF's defaults: l1 = l2 = 0
    for kind, want in (("proximal_gradient_descent", 1 - 0.1 * 2),
                       ("proximal_adagrad", 1 - 0.1 * 2 / np.sqrt(0.1 + 4)),  # accumulator from 0.1
                       ("adagrad_da", -0.1 * 2 / np.sqrt(0.1 + 4))):  # T = 1, l2 = 0: -lr g / sqrt(0.1 + g^2)
        g = loom.Graph()
        w = g.variable("w", [1], initializer=np.ones(1, np.float32))
        train = g.minimize(g.reduce_sum(w * g.constant(np.float32(2.0))), kind, 0.1)
        s = loom.Session(g)
        s.run(targets=[g.global_variables_initializer()])
        s.run(targets=[train])
        np.testing.assert_allclose(s.run(w), [want], rtol=1e-6, err_msg=kind)
    with pytest.raises(ValueError, match="optimizer 'lamb' is not one of"):
        loom.Graph().minimize(None, "lamb")
