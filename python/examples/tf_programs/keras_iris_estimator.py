import loom.tf as tf
# A Keras Sequential turned into an Estimator (TF's "Create an Estimator from
# a Keras model" tutorial idiom) on iris: compile, a short fit, then
# tf.keras.estimator.model_to_estimator, an input_fn keyed by the model's
# input name ("dense_input"), train / evaluate / predict.
import os
import sys
import tempfile

import numpy as np

IRIS = os.environ.get("IRIS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
tf.keras.utils.set_random_seed(SEED)

data = np.loadtxt(IRIS, delimiter=",", skiprows=1)
data = data[np.random.default_rng(SEED).permutation(len(data))]
x, y = data[:, :4].astype(np.float32), data[:, 4].astype(np.int32)
train_x, train_y, test_x, test_y = x[:120], y[:120], x[120:], y[120:]

model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(16, activation="relu", input_shape=(4,)),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(3)])
model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              optimizer=tf.keras.optimizers.Adam(learning_rate=0.01), metrics=["accuracy"])
history = model.fit(train_x, train_y, batch_size=16, epochs=5, verbose=0)
print("keras fit: loss %.4f -> %.4f" % (history.history["loss"][0], history.history["loss"][-1]))


def input_fn(x, y, training):
    dataset = tf.data.Dataset.from_tensor_slices(({"dense_input": x}, y))
    if training:
        dataset = dataset.shuffle(120, seed=SEED).repeat()
    return dataset.batch(32)


estimator = tf.keras.estimator.model_to_estimator(keras_model=model, model_dir=tempfile.mkdtemp(),
                                                   config=tf.estimator.RunConfig(tf_random_seed=SEED))
estimator.train(input_fn=lambda: input_fn(train_x, train_y, True), steps=500)
eval_result = estimator.evaluate(input_fn=lambda: input_fn(test_x, test_y, False))
print(eval_result)
output = model.output_names[0]
predictions = estimator.predict(input_fn=lambda: tf.data.Dataset.from_tensor_slices({"dense_input": test_x}).batch(32))
predict_accuracy = np.mean([np.argmax(p[output]) == label for p, label in zip(predictions, test_y)])
print("METRIC accuracy=%.4f predict_accuracy=%.4f loss=%.4f global_step=%d" % (
    eval_result["accuracy"], predict_accuracy, eval_result["loss"], eval_result["global_step"]))
