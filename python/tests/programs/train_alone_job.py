import loom.tf as tf
# A TF 2.15 custom-model_fn script that calls Estimator.train() alone (no
# train_and_evaluate). Run by test_tf_distributed.py once per TF_CONFIG role:
# chief and worker train through the PS, the ps task serves until the chief
# ends the job, the chief then evaluates the final checkpoint locally; an
# evaluator task gets TF's ValueError; without ps tasks chief and worker are
# the ranks of the collective strategy. Synthetic data: 3 Gaussian blobs. CANNED=1: a
# DNNClassifier instead of the custom model_fn; NORMALIZER=1 as well: its
# column with a normalizer_fn (each process traces it into its own graphs).
import json
import os

import numpy as np

MAX_STEPS = int(os.environ.get("MAX_STEPS", "300"))
rng = np.random.RandomState(0)
centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], np.float32)
y = rng.randint(0, 3, 1500).astype(np.int32)
x = (centers[y] + rng.normal(0, 0.7, (1500, 4))).astype(np.float32)


def model_fn(features, labels, mode, params):
    net = tf.compat.v1.layers.dense(features["x"], params["hidden"], activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(net, 3)
    classes = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=opt.minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        "accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes)})


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x[:1000]}, y[:1000])).shuffle(1000, seed=1).repeat().batch(32)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x[1000:]}, y[1000:])).batch(100)


model_dir = json.loads(os.environ["TF_CONFIG"])["model_dir"]
config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=0, save_checkpoints_steps=100)
print("task %s:%d" % (config.task_type, config.task_id), flush=True)
if os.environ.get("CANNED"):  # a canned estimator, its Adagrad applied on the PS
    traced = []

    def normalizer(v):
        traced.append(v.shape)
        return (v - 0.5) * 2.0
    col = tf.feature_column.numeric_column("x", shape=[4], normalizer_fn=normalizer if os.environ.get("NORMALIZER")
                                           else None)
    est = tf.estimator.DNNClassifier([16], [col], n_classes=3,
                                     optimizer=tf.keras.optimizers.Adagrad(learning_rate=0.3), config=config)
else:
    est = tf.estimator.Estimator(model_fn=model_fn, config=config, params={"hidden": 16})
assert est.train(train_input_fn, max_steps=MAX_STEPS) is est
print("TRAINED %s" % config.task_type, flush=True)
if os.environ.get("NORMALIZER"):
    print("NORMALIZER traced %d" % len(traced), flush=True)
if config.is_chief:
    m = est.evaluate(eval_input_fn)
    print("METRIC accuracy=%.4f global_step=%d" % (m["accuracy"], m["global_step"]), flush=True)
