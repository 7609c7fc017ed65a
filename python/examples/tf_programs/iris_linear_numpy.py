import loom.tf as tf
# LinearClassifier on iris through numpy_input_fn, with string labels
# (label_vocabulary) and a weight column; then a DNNClassifier warm-started
# from a first one's checkpoint and exported with a raw serving receiver.
import os
import sys
import tempfile

import numpy as np

IRIS = os.environ.get("IRIS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)

data = np.loadtxt(IRIS, delimiter=",", skiprows=1)
data = data[np.random.default_rng(SEED).permutation(len(data))]
names = np.array(["setosa", "versicolor", "virginica"], dtype=object)
x = {"measurements": data[:, :4].astype(np.float32), "w": np.ones(len(data), np.float32)}
y = names[data[:, 4].astype(int)]
train = {k: v[:120] for k, v in x.items()}
test = {k: v[120:] for k, v in x.items()}

columns = [tf.feature_column.numeric_column("measurements", shape=[4])]
linear = tf.estimator.LinearClassifier(
    feature_columns=columns, n_classes=3, label_vocabulary=list(names), weight_column="w",
    optimizer="Ftrl", model_dir=tempfile.mkdtemp(), config=tf.estimator.RunConfig(tf_random_seed=SEED))
# whole unshuffled batches: the linear model starts at zero, so its steps do not depend on a seed, and
# the DNNs' depend only on their initial weights
train_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(train, y[:120], batch_size=120, num_epochs=None,
                                                        shuffle=False)
eval_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(test, y[120:], batch_size=30, shuffle=False)
linear.train(train_fn, steps=1500)
lin = linear.evaluate(eval_fn)
print(lin)

first_dir = tempfile.mkdtemp()
first = tf.estimator.DNNClassifier(hidden_units=[16], feature_columns=columns, n_classes=3,
                                   label_vocabulary=list(names), optimizer="Adam", model_dir=first_dir,
                                   config=tf.estimator.RunConfig(tf_random_seed=SEED))
first.train(train_fn, steps=300)
warm = tf.estimator.DNNClassifier(hidden_units=[16], feature_columns=columns, n_classes=3,
                                  label_vocabulary=list(names), optimizer="Adam", model_dir=tempfile.mkdtemp(),
                                  warm_start_from=tf.estimator.WarmStartSettings(first_dir, "dnn/.*"),
                                  config=tf.estimator.RunConfig(tf_random_seed=SEED + 1))
warm.train(train_fn, steps=1)
same = np.allclose(warm.get_variable_value("dnn/hiddenlayer_0/kernel"),
                   first.get_variable_value("dnn/hiddenlayer_0/kernel"), atol=0.05)
warm.train(train_fn, steps=700)
dnn = warm.evaluate(eval_fn)


def serving_input_receiver_fn():
    inputs = {"measurements": tf.compat.v1.placeholder(tf.float32, [None, 4])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


export_dir = warm.export_saved_model(tempfile.mkdtemp(), serving_input_receiver_fn)
print(dnn)
print("METRIC linear_accuracy=%.4f dnn_accuracy=%.4f warm_started=%d exported=%d" % (
    lin["accuracy"], dnn["accuracy"], same, os.path.isdir(export_dir)))
