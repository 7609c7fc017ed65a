import loom.tf as tf
# Not a tutorial program: the check that loom.tf and TF 2.15 differ only in
# their random draws (initial weights, shuffle order) on the canned models of
# iris_linear_numpy.py, iris_custom_model_fn.py and regression_pandas.py. Both sides start from the
# same weights (a warm start from a checkpoint holding one seeded set of
# values, written in each side's own format) and train on whole, unshuffled
# batches, so nothing random is left: the metrics must agree to rounding.
# compare.sh's table runs it like the others (PROGRAMS=same_start.py).
import math
import os
import sys
import tempfile

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
IRIS = os.environ.get("IRIS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
DATA = os.environ.get("DIAMONDS_DIR", os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data"))
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
LOOM = tf.__name__.startswith("loom")
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
rng = np.random.default_rng(SEED)


def glorot(fan_in, fan_out):
    lim = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-lim, lim, (fan_in, fan_out)).astype(np.float32)


def dnn_start(sizes):
    """{name: value} of a canned DNN's variables (glorot kernels, small biases)."""
    vals = {}
    for i in range(len(sizes) - 1):
        layer = "dnn/logits" if i == len(sizes) - 2 else "dnn/hiddenlayer_%d" % i
        vals[layer + "/kernel"] = glorot(sizes[i], sizes[i + 1])
        vals[layer + "/bias"] = rng.uniform(-0.1, 0.1, sizes[i + 1]).astype(np.float32)
    return vals


def write_checkpoint(vals):
    """A checkpoint of vals in this side's format; returns what warm_start_from takes."""
    d = tempfile.mkdtemp()
    if LOOM:
        import ctypes as C
        from loom._lib import lib
        from loom import _Status
        lib.loom_tensor_new.restype = C.c_void_p
        lib.loom_tensor_new.argtypes = [C.c_int, C.c_int, C.POINTER(C.c_int64), C.c_void_p]
        lib.loom_tensor_data.restype = C.c_void_p
        lib.loom_tensor_data.argtypes = [C.c_void_p]
        lib.loom_checkpoint_write.argtypes = [C.c_char_p, C.c_int, C.POINTER(C.c_char_p), C.POINTER(C.c_void_p),
                                              C.c_void_p]
        names, ts = [], []
        for k, v in vals.items():
            dims = (C.c_int64 * v.ndim)(*v.shape)
            t = lib.loom_tensor_new(1, v.ndim, dims, None)  # 1: float32
            C.memmove(lib.loom_tensor_data(t), v.ctypes.data, v.nbytes)
            names.append(k.encode())
            ts.append(t)
        st = _Status()
        path = os.path.join(d, "start")
        rc = lib.loom_checkpoint_write(path.encode(), len(names), (C.c_char_p * len(names))(*names),
                                       (C.c_void_p * len(ts))(*ts), st.p)
        st.raise_if(rc)
        return path
    with tf.Graph().as_default():
        for k, v in vals.items():
            tf.compat.v1.get_variable(k, initializer=v)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.train.Saver().save(sess, os.path.join(d, "start"))


# ---- iris: LinearClassifier (zeros, Ftrl) and DNNClassifier (Adam) with label_vocabulary and a weight column
data = np.loadtxt(IRIS, delimiter=",", skiprows=1)
data = data[np.random.default_rng(SEED).permutation(len(data))]
names = np.array(["setosa", "versicolor", "virginica"], dtype=object)
x = {"measurements": data[:, :4].astype(np.float32), "w": np.ones(len(data), np.float32)}
y = names[data[:, 4].astype(int)]
train = {k: v[:120] for k, v in x.items()}
test = {k: v[120:] for k, v in x.items()}
columns = [tf.feature_column.numeric_column("measurements", shape=[4])]
train_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(train, y[:120], batch_size=120, num_epochs=None,
                                                        shuffle=False)
eval_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(test, y[120:], batch_size=30, shuffle=False)
linear = tf.estimator.LinearClassifier(feature_columns=columns, n_classes=3, label_vocabulary=list(names),
                                       weight_column="w", optimizer="Ftrl", model_dir=tempfile.mkdtemp())
linear.train(train_fn, steps=200)
lin = linear.evaluate(eval_fn)
dnn = tf.estimator.DNNClassifier(hidden_units=[16], feature_columns=columns, n_classes=3,
                                 label_vocabulary=list(names), optimizer="Adam", model_dir=tempfile.mkdtemp(),
                                 warm_start_from=tf.estimator.WarmStartSettings(
                                     write_checkpoint(dnn_start([4, 16, 3])), "dnn/.*"))
dnn.train(train_fn, steps=300)
dnn_eval = dnn.evaluate(eval_fn)

# ---- iris: the custom model_fn of iris_custom_model_fn.py (layers.dense, sparse softmax cross entropy,
# compat.v1 AdamOptimizer, metrics.accuracy), integer labels
def my_model(features, labels, mode, params):
    net = features["x"]
    for units in params["hidden_units"]:
        net = tf.compat.v1.layers.dense(net, units=units, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(net, params["n_classes"], activation=None)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1), name="acc_op")
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    train_op = tf.compat.v1.train.AdamOptimizer(learning_rate=0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


start = {}
for i, (a, b) in enumerate([(4, 10), (10, 10), (10, 3)]):
    layer = "dense" if i == 0 else "dense_%d" % i
    start[layer + "/kernel"], start[layer + "/bias"] = glorot(a, b), rng.uniform(-0.1, 0.1, b).astype(np.float32)
custom = tf.estimator.Estimator(model_fn=my_model, model_dir=tempfile.mkdtemp(),
                                params={"hidden_units": [10, 10], "n_classes": 3},
                                warm_start_from=tf.estimator.WarmStartSettings(write_checkpoint(start), "dense.*"))
xi, yi = data[:, :4].astype(np.float32), data[:, 4].astype(np.int64)
custom.train(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": xi[:120]}, yi[:120], batch_size=120,
                                                          num_epochs=None, shuffle=False), steps=300)
custom_eval = custom.evaluate(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": xi[120:]}, yi[120:],
                                                                           batch_size=30, shuffle=False))

# ---- diamonds: the DNNRegressor of regression_pandas.py (Adam 0.003; log price from standardized numeric
# and indicator columns, from pandas)
df = pd.read_csv(os.path.join(DATA, "diamonds_3000.csv"), index_col=0)
df = df[(df[["x", "y", "z"]] > 0).all(axis=1)]
df = df.sample(frac=1.0, random_state=SEED)
df["log_price"] = np.log(df["price"])
n_train = int(0.8 * len(df))
dtrain, dtest = df.iloc[:n_train].copy(), df.iloc[n_train:].copy()
numeric = ["carat", "depth", "table"]
stats = dtrain[numeric].describe().transpose()
for part in (dtrain, dtest):
    part[numeric] = (part[numeric] - stats["mean"]) / stats["std"]
vocabularies = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"], "color": list("DEFGHIJ"),
                "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}
features = numeric + list(vocabularies)
feature_columns = [tf.feature_column.numeric_column(k) for k in numeric] + [
    tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(k, v))
    for k, v in vocabularies.items()]
reg = tf.estimator.DNNRegressor(hidden_units=[32, 16], feature_columns=feature_columns,
                                optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=0.003),
                                model_dir=tempfile.mkdtemp(),
                                warm_start_from=tf.estimator.WarmStartSettings(
                                    write_checkpoint(dnn_start([23, 32, 16, 1])), "dnn/.*"))
reg.train(tf.compat.v1.estimator.inputs.pandas_input_fn(x=dtrain[features], y=dtrain["log_price"],
                                                        batch_size=len(dtrain), num_epochs=None, shuffle=False),
          steps=300)
reg_eval = reg.evaluate(tf.compat.v1.estimator.inputs.pandas_input_fn(
    x=dtest[features], y=dtest["log_price"], batch_size=len(dtest), num_epochs=1, shuffle=False))
print(lin, dnn_eval, custom_eval, reg_eval)
print("METRIC linear_accuracy=%.4f linear_loss=%.6f dnn_accuracy=%.4f dnn_loss=%.6f accuracy=%.4f loss=%.6f "
      "rmse=%.6f" % (lin["accuracy"], lin["loss"], dnn_eval["accuracy"], dnn_eval["loss"], custom_eval["accuracy"],
                     custom_eval["loss"], math.sqrt(reg_eval["average_loss"])))
