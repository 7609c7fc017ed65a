import loom.tf as tf
# A custom model_fn (TF's "Creating Custom Estimators" idiom) on iris through
# numpy_input_fn: dense layers with an L2 penalty on their kernels, sparse
# softmax cross entropy plus the regularization loss, AdamOptimizer minimize
# with the global step and a decaying learning rate, an accuracy eval metric
# op.
import os
import sys
import tempfile

import numpy as np

IRIS = os.environ.get("IRIS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)

data = np.loadtxt(IRIS, delimiter=",", skiprows=1)
data = data[np.random.default_rng(SEED).permutation(len(data))]
x, y = data[:, :4].astype(np.float32), data[:, 4].astype(np.int64)


def my_model(features, labels, mode, params):
    l2 = tf.keras.regularizers.l2(params["l2"])
    net = features["x"]
    for units in params["hidden_units"]:
        net = tf.compat.v1.layers.dense(net, units=units, activation=tf.nn.relu, kernel_regularizer=l2)
    logits = tf.compat.v1.layers.dense(net, params["n_classes"], activation=None, kernel_regularizer=l2)
    predicted_classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"class_ids": predicted_classes, "probabilities": tf.nn.softmax(logits), "logits": logits}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    loss += tf.compat.v1.losses.get_regularization_loss()
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    metrics = {"accuracy": accuracy}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    learning_rate = tf.compat.v1.train.exponential_decay(0.01, tf.compat.v1.train.get_global_step(), 250, 0.5,
                                                         staircase=True)
    optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=learning_rate)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


classifier = tf.estimator.Estimator(
    model_fn=my_model, model_dir=tempfile.mkdtemp(), config=tf.estimator.RunConfig(tf_random_seed=SEED),
    params={"hidden_units": [10, 10], "n_classes": 3, "l2": 0.03})
classifier.train(input_fn=tf.compat.v1.estimator.inputs.numpy_input_fn(
    {"x": x[:120]}, y[:120], batch_size=20, num_epochs=None, shuffle=True), steps=2000)
eval_result = classifier.evaluate(input_fn=tf.compat.v1.estimator.inputs.numpy_input_fn(
    {"x": x[120:]}, y[120:], batch_size=30, shuffle=False))
print(eval_result)
preds = list(classifier.predict(input_fn=tf.compat.v1.estimator.inputs.numpy_input_fn(
    {"x": x[120:]}, batch_size=30, shuffle=False)))
pred_acc = np.mean([p["class_ids"] == t for p, t in zip(preds, y[120:])])
print("METRIC accuracy=%.4f predict_accuracy=%.4f global_step=%d" % (
    eval_result["accuracy"], pred_acc, eval_result["global_step"]))
