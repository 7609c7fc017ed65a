import loom.tf as tf
# Premade DNNClassifier on iris from pandas (TF's "Premade Estimators" tutorial).
import os
import sys
import tempfile

import numpy as np
import pandas as pd

IRIS = os.environ.get("IRIS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
CSV_COLUMN_NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 42

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
tf.random.set_seed(SEED)

data = pd.read_csv(IRIS, names=CSV_COLUMN_NAMES, header=0)
data = data.sample(frac=1.0, random_state=SEED).reset_index(drop=True)
train, test = data.iloc[:120], data.iloc[120:]
train_y = train.pop("Species")
test_y = test.pop("Species")


def input_fn(features, labels, training=True, batch_size=16):
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    if training:
        dataset = dataset.shuffle(1000).repeat()
    return dataset.batch(batch_size)


my_feature_columns = []
for key in train.keys():
    my_feature_columns.append(tf.feature_column.numeric_column(key=key))

classifier = tf.estimator.DNNClassifier(
    feature_columns=my_feature_columns,
    hidden_units=[30, 10],
    n_classes=3,
    optimizer=tf.keras.optimizers.legacy.Adagrad(learning_rate=0.1),
    model_dir=tempfile.mkdtemp(),
    config=tf.estimator.RunConfig(tf_random_seed=SEED, save_checkpoints_steps=5000))

classifier.train(input_fn=lambda: input_fn(train, train_y, training=True), steps=5000)
eval_result = classifier.evaluate(input_fn=lambda: input_fn(test, test_y, training=False))
print("Test set accuracy: {accuracy:0.3f}".format(**eval_result))

predictions = classifier.predict(input_fn=lambda: input_fn(test, None, training=False)
                                 if False else tf.data.Dataset.from_tensor_slices(dict(test)).batch(16))
correct = 0
for pred_dict, expected in zip(predictions, test_y):
    class_id = pred_dict["class_ids"][0]
    correct += int(class_id == expected)
print("METRIC accuracy=%.4f predict_accuracy=%.4f global_step=%d" % (
    eval_result["accuracy"], correct / len(test_y), eval_result["global_step"]))
