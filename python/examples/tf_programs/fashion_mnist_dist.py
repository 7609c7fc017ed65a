import loom.tf as tf
# The distributed-MNIST Estimator tutorial's idiom on Fashion-MNIST: a custom
# model_fn trained with tf.estimator.train_and_evaluate. Without TF_CONFIG it
# trains in this process; under a TF_CONFIG naming ps, chief, worker and
# evaluator tasks every process runs this same script and does its role (the
# PS serves the variables, chief and worker train, the evaluator evaluates
# each checkpoint; TF_CONFIG's "model_dir" is the shared directory). A tenth
# of the training images keeps the run short; the learning rate decays until
# the model has settled (seeds then differ by ~0.2 points on the 10,000 test
# images).
import gzip
import json
import os
import sys
import tempfile

import numpy as np

DATA = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
MAX_STEPS = int(os.environ.get("MAX_STEPS", "1500"))
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)


def read_idx(path, limit):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)[:limit]


def images(name, limit):
    return (read_idx(os.path.join(DATA, name), limit).reshape(-1, 784) / 255.0).astype(np.float32)


def labels(name, limit):
    return read_idx(os.path.join(DATA, name), limit).astype(np.int32)


def model_fn(features, labels, mode, params):
    net = features["image"]
    for units in params["hidden_units"]:
        net = tf.compat.v1.layers.dense(net, units, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(net, 10)
    classes = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes, "logits": logits})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        global_step = tf.compat.v1.train.get_global_step()
        learning_rate = tf.compat.v1.train.exponential_decay(params["learning_rate"], global_step, 200, 0.7,
                                                             staircase=True)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          train_op=optimizer.minimize(loss, global_step=global_step))
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes)
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})


def train_input_fn():
    x, y = images("train-images-idx3-ubyte.gz", 6000), labels("train-labels-idx1-ubyte.gz", 6000)
    return tf.data.Dataset.from_tensor_slices(({"image": x}, y)).shuffle(6000, seed=SEED).repeat().batch(50)


def eval_input_fn():
    x, y = images("t10k-images-idx3-ubyte.gz", 10000), labels("t10k-labels-idx1-ubyte.gz", 10000)
    return tf.data.Dataset.from_tensor_slices(({"image": x}, y)).batch(200)


tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
model_dir = tf_config.get("model_dir") or tempfile.mkdtemp()
config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=SEED, save_checkpoints_steps=200)
print("task %s:%d of %d worker(s), %d ps" % (config.task_type, config.task_id, config.num_worker_replicas,
                                               config.num_ps_replicas))
estimator = tf.estimator.Estimator(model_fn=model_fn, config=config,
                                   params={"hidden_units": [128], "learning_rate": 0.2})
train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=MAX_STEPS)
eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=1)
result = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
if result is not None and result[0] is not None:  # local mode and the evaluator report the last evaluation
    metrics = result[0]
    print("METRIC accuracy=%.4f loss=%.4f global_step=%d" % (metrics["accuracy"], metrics["loss"],
                                                           metrics["global_step"]))
