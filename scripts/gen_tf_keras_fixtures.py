#!/usr/bin/env python3
"""Reference values for loom.tf's Keras Sequential and learning-rate decays
(python/tests/test_tf_keras.py) from TF 2.15.

Writes python/tests/fixtures/tf_keras.json:
  "keras": per case the model (layers, compile arguments), the initial
    weights (set on both sides), the data, and after fit (shuffle=False):
    the per-epoch history, the final weights, evaluate() and predict();
  "decays": per tf.compat.v1.train.*_decay call the learning rate at a list
    of global steps.

Run: $(scripts/peer_venv.sh tf) scripts/gen_tf_keras_fixtures.py
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures", "tf_keras.json")
L = tf.keras.layers


def data(seed, n, shape, kind, classes=3):
    rng = np.random.RandomState(seed)
    if kind == "ids":
        x = rng.randint(0, 10, (n,) + tuple(shape)).astype(np.int32)
        return x, (x[:, 0] % 3).astype(np.int32)
    x = rng.randn(n, *shape).astype(np.float32)
    flat = x.reshape(n, -1)
    if kind == "sparse":
        y = np.argmax(flat[:, :classes], 1).astype(np.int32)
    elif kind == "binary":
        y = (flat[:, 0] - flat[:, 1] > 0).astype(np.float32)
    else:
        y = (flat @ rng.randn(flat.shape[1]).astype(np.float32) * 0.5 + 1.0).astype(np.float32)
    return x, y


# name -> (layers spec, input shape, data kind, compile kwargs, fit kwargs)
CASES = {
    "mlp_softmax_sgd": ([("Dense", dict(units=8, activation="relu")), ("Dense", dict(units=3, activation="softmax"))],
                        (4,), "sparse", dict(optimizer=("SGD", 0.1), loss="sparse_categorical_crossentropy",
                                             metrics=["accuracy"]), dict(batch_size=16, epochs=3)),
    "mlp_logits_adam": ([("Dense", dict(units=6, activation="tanh")), ("Dropout", dict(rate=0.0)),
                         ("Dense", dict(units=3))], (5,), "sparse",
                        dict(optimizer=("Adam", 0.01), loss=("SparseCategoricalCrossentropy", dict(from_logits=True)),
                             metrics=["accuracy"]), dict(batch_size=8, epochs=2)),
    "regression_mse_sgd": ([("Dense", dict(units=4, activation="relu")), ("Dense", dict(units=1))], (3,), "reg",
                           dict(optimizer=("SGD", 0.02), loss="mse", metrics=["mae"]),
                               dict(batch_size=16, epochs=3)),
    "binary_sigmoid_adagrad": ([("Dense", dict(units=4, activation="relu")),
                                ("Dense", dict(units=1, activation="sigmoid"))], (4,), "binary",
                               dict(optimizer=("Adagrad", 0.1), loss="binary_crossentropy", metrics=["accuracy"]),
                               dict(batch_size=16, epochs=2)),
    "cnn_adam": ([("Reshape", dict(target_shape=(6, 6, 1))), ("Conv2D", dict(filters=2, kernel_size=3,
                                                                             activation="relu")),
                  ("MaxPooling2D", dict(pool_size=2)), ("Flatten", {}), ("Dense", dict(units=3))], (36,), "sparse",
                 dict(optimizer=("Adam", 0.01), loss=("SparseCategoricalCrossentropy", dict(from_logits=True)),
                      metrics=["accuracy"]), dict(batch_size=8, epochs=2)),
    "cnn_same_avgpool_sgd": ([("Reshape", dict(target_shape=(4, 4, 2))),
                              ("Conv2D", dict(filters=3, kernel_size=(2, 2), strides=(1, 1), padding="same",
                                              activation="tanh")),
                              ("AveragePooling2D", dict(pool_size=2, strides=2)), ("Flatten", {}),
                              ("Dense", dict(units=3, activation="softmax"))], (32,), "sparse",
                             dict(optimizer=("SGD", 0.1), loss="sparse_categorical_crossentropy",
                                  metrics=["accuracy"]), dict(batch_size=12, epochs=2)),
    "embedding_batchnorm_adam": ([("Embedding", dict(input_dim=10, output_dim=4)), ("Flatten", {}),
                                  ("BatchNormalization", {}), ("Dense", dict(units=3))], (3,), "ids",
                                 dict(optimizer=("Adam", 0.02), loss=("SparseCategoricalCrossentropy",
                                                                      dict(from_logits=True)),
                                      metrics=["accuracy"]), dict(batch_size=16, epochs=3)),
}


def build(spec, shape):
    dtype = "int32" if spec[0][0] == "Embedding" else "float32"
    m = tf.keras.Sequential([tf.keras.Input(shape=shape, dtype=dtype)] + [getattr(L, k)(**kw) for k, kw in spec])
    return m


def keras_case(i, name):
    spec, shape, kind, comp, fitkw = CASES[name]
    x, y = data(10 + i, 48, shape, kind)
    tf.keras.utils.set_random_seed(i)
    m = build(spec, shape)
    rng = np.random.RandomState(100 + i)
    w0 = [(rng.randn(*w.shape) * 0.5).astype(np.float32) for w in m.get_weights()]
    # a variance is positive
    w0 = [np.abs(w) + 0.5 if "moving_variance" in v.name else w for w, v in zip(w0, m.weights)]
    m.set_weights(w0)
    opt_name, lr = comp["optimizer"]
    opt = getattr(tf.keras.optimizers, opt_name)(learning_rate=lr)
    loss = comp["loss"]
    if isinstance(loss, tuple):
        loss = getattr(tf.keras.losses, loss[0])(**loss[1])
    m.compile(optimizer=opt, loss=loss, metrics=comp["metrics"])
    h = m.fit(x, y, shuffle=False, verbose=0, **fitkw)
    ev = m.evaluate(x, y, batch_size=fitkw["batch_size"], verbose=0, return_dict=True)
    pred = m.predict(x[:4], verbose=0)
    return {"layers": [[k, {kk: list(v) if isinstance(v, tuple) else v for kk, v in kw.items()}] for k, kw in spec],
            "input_shape": list(shape), "compile": {"optimizer": [opt_name, lr], "loss": comp["loss"],
                                                    "metrics": comp["metrics"]},
            "fit": fitkw, "x": x.tolist(), "x_dtype": str(x.dtype), "y": y.tolist(),
            "weights0": [w.tolist() for w in w0],
            "history": {k: [float(v) for v in vs] for k, vs in h.history.items()},
            "weights": [w.tolist() for w in m.get_weights()], "evaluate": {k: float(v) for k, v in ev.items()},
            "predict": pred.tolist()}


STEPS = [0, 1, 3, 5, 10, 15, 20, 33, 50, 100, 150]
DECAYS = [
    ("exponential_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5)),
    ("exponential_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5, staircase=True)),
    ("piecewise_constant", dict(boundaries=[10, 50], values=[1.0, 0.5, 0.1])),
    ("polynomial_decay", dict(learning_rate=0.1, decay_steps=50)),
    ("polynomial_decay", dict(learning_rate=0.1, decay_steps=50, end_learning_rate=0.01, power=2.0)),
    ("polynomial_decay", dict(learning_rate=0.1, decay_steps=40, end_learning_rate=0.01, power=0.5, cycle=True)),
    ("cosine_decay", dict(learning_rate=0.1, decay_steps=100)),
    ("cosine_decay", dict(learning_rate=0.1, decay_steps=100, alpha=0.2)),
    ("inverse_time_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5)),
    ("inverse_time_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5, staircase=True)),
    ("natural_exp_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5)),
    ("natural_exp_decay", dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5, staircase=True)),
]


def decay_values(fn, kw):
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.placeholder(tf.int64, [])
        step = {"x": gs} if fn == "piecewise_constant" else {"global_step": gs}
        lr = getattr(tf.compat.v1.train, fn)(**step, **kw)
        with tf.compat.v1.Session(graph=g) as s:
            return [float(s.run(lr, {gs: st})) for st in STEPS]


def main():
    out = {"tf_version": tf.__version__, "keras": {n: keras_case(i, n) for i, n in enumerate(CASES)},
           "decay_steps": STEPS, "decays": [[fn, kw, decay_values(fn, kw)] for fn, kw in DECAYS]}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
