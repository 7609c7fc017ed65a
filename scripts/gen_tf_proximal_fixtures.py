#!/usr/bin/env python3
"""Reference values of tf.compat.v1.train.ProximalGradientDescentOptimizer,
ProximalAdagradOptimizer and AdagradDAOptimizer
(python/tests/test_tf_optimizers_proximal.py) from TF 2.15.

A fixed model in a tf.compat.v1 graph: pred = x @ w + embedding_lookup(emb,
ids) @ v + b, loss = mean((pred - y)^2), fixed initial values and data; ids
repeat rows and leave one out, so emb's gradient is sparse (TF's
SparseApply* kernels, a repeated index summed first) while w, v and b take
the dense kernels. Each case trains STEPS steps with minimize(loss,
global_step) and records every variable and slot (by TF's variable names)
and the global step.

Writes python/tests/fixtures/tf_optimizers_proximal.json.
Run: $(bash scripts/peer_venv.sh tf) scripts/gen_tf_proximal_fixtures.py
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures",
                   "tf_optimizers_proximal.json")
STEPS = 6
X = [[0.5, -1.0, 2.0], [1.5, 0.3, -0.7], [-0.2, 0.8, 0.1], [1.0, 1.0, -1.0], [0.0, -0.5, 0.9], [2.0, 0.1, 0.4]]
IDS = [0, 2, 2, 1, 0, 3]  # rows 0 and 2 twice, row 4 never
Y = [[1.0], [-0.5], [0.3], [2.0], [-1.2], [0.7]]
INIT = {"w": [[0.1], [-0.2], [0.05]], "v": [[0.3], [-0.1]], "b": [0.02],
        "emb": [[0.1, -0.2], [0.0, 0.3], [-0.05, 0.02], [0.2, 0.2], [0.4, -0.4]]}
# name -> (optimizer class name, constructor keyword arguments); AdagradDA also gets global_step
CASES = {
    "pgd": ("ProximalGradientDescentOptimizer", dict(learning_rate=0.1)),
    "pgd_l1_l2": ("ProximalGradientDescentOptimizer",
                  dict(learning_rate=0.1, l1_regularization_strength=0.05, l2_regularization_strength=0.2)),
    "pgd_l2": ("ProximalGradientDescentOptimizer", dict(learning_rate=0.2, l2_regularization_strength=0.5)),
    "padagrad": ("ProximalAdagradOptimizer", dict(learning_rate=0.2)),
    "padagrad_l1_l2": ("ProximalAdagradOptimizer",
                       dict(learning_rate=0.2, initial_accumulator_value=0.3, l1_regularization_strength=0.05,
                            l2_regularization_strength=0.1)),
    "adagrad_da": ("AdagradDAOptimizer", dict(learning_rate=0.3)),
    "adagrad_da_l1_l2": ("AdagradDAOptimizer",
                         dict(learning_rate=0.3, initial_gradient_squared_accumulator_value=0.2,
                              l1_regularization_strength=0.02, l2_regularization_strength=0.1)),
    "adagrad_da_l2": ("AdagradDAOptimizer", dict(learning_rate=0.5, l2_regularization_strength=0.3)),
}


def run_case(cls, kwargs):
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        gs = v1.train.get_or_create_global_step()
        var = {k: v1.Variable(np.array(val, np.float32), name=k) for k, val in INIT.items()}
        pred = (tf.matmul(tf.constant(X, tf.float32), var["w"])
                + tf.matmul(tf.nn.embedding_lookup(var["emb"], tf.constant(IDS, tf.int64)), var["v"]) + var["b"])
        loss = tf.reduce_mean(tf.square(pred - tf.constant(Y, tf.float32)))
        kw = dict(kwargs)
        if cls == "AdagradDAOptimizer":
            kw["global_step"] = gs
        opt = getattr(v1.train, cls)(**kw)
        train = opt.minimize(loss, global_step=gs)
        ops = sorted({op.type for op in g.get_operations() if "Apply" in op.type})
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            losses = [float(s.run([train, loss])[1]) for _ in range(STEPS)]
            values = {v.op.name: s.run(v).tolist() for v in v1.global_variables()}
    return {"ops": ops, "losses": losses, "values": values}


def main():
    out = {"tf_version": tf.__version__, "steps": STEPS, "x": X, "ids": IDS, "y": Y, "init": INIT,
           "cases": {name: dict(optimizer=cls, kwargs=kw, **run_case(cls, kw)) for name, (cls, kw) in CASES.items()}}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
