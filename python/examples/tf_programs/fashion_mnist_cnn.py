import loom.tf as tf
# A custom model_fn CNN on Fashion-MNIST (TF's "Build a CNN with Estimators"
# tutorial idiom): conv / pool / dense / dropout layers, numpy_input_fn,
# AdamOptimizer().minimize, an accuracy eval_metric_op. A subset of the data
# keeps the run short.
import gzip
import os
import sys
import tempfile

import numpy as np

DATA = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)


def read_idx(path, count):
    """The first count items of an IDX file (decompressing no more than they need)."""
    with gzip.open(path, "rb") as f:
        head = f.read(4)
        dims = [int.from_bytes(f.read(4), "big") for _ in range(head[3])]
        dims[0] = min(dims[0], count)
        return np.frombuffer(f.read(int(np.prod(dims))), np.uint8).reshape(dims)


train_data = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"), 6000).astype(np.float32) / 255.0
train_labels = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"), 6000).astype(np.int32)
eval_data = read_idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"), 2000).astype(np.float32) / 255.0
eval_labels = read_idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"), 2000).astype(np.int32)


def cnn_model_fn(features, labels, mode):
    input_layer = tf.reshape(features["x"], [-1, 28, 28, 1])
    conv1 = tf.compat.v1.layers.conv2d(inputs=input_layer, filters=16, kernel_size=[5, 5], padding="same",
                                       activation=tf.nn.relu)
    pool1 = tf.compat.v1.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
    conv2 = tf.compat.v1.layers.conv2d(inputs=pool1, filters=32, kernel_size=[5, 5], padding="same",
                                       activation=tf.nn.relu)
    pool2 = tf.compat.v1.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)
    pool2_flat = tf.compat.v1.layers.flatten(pool2)
    dense = tf.compat.v1.layers.dense(inputs=pool2_flat, units=128, activation=tf.nn.relu)
    dropout = tf.compat.v1.layers.dropout(inputs=dense, rate=0.4, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.compat.v1.layers.dense(inputs=dropout, units=10)
    predictions = {"classes": tf.argmax(input=logits, axis=1), "probabilities": tf.nn.softmax(logits)}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode=mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=0.001)
        train_op = optimizer.minimize(loss=loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)
    eval_metric_ops = {"accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=predictions["classes"])}
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


classifier = tf.estimator.Estimator(model_fn=cnn_model_fn, model_dir=tempfile.mkdtemp(),
                                    config=tf.estimator.RunConfig(tf_random_seed=SEED))
train_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(
    x={"x": train_data}, y=train_labels, batch_size=64, num_epochs=None, shuffle=True)
classifier.train(input_fn=train_input_fn, steps=300)
eval_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(
    x={"x": eval_data}, y=eval_labels, num_epochs=1, shuffle=False)
eval_results = classifier.evaluate(input_fn=eval_input_fn)
print(eval_results)
print("METRIC accuracy=%.4f loss=%.4f global_step=%d" % (
    eval_results["accuracy"], eval_results["loss"], eval_results["global_step"]))
