import loom.tf as tf
# The diamonds data through tf.data's file readers: the training rows are
# written as tf.train.Examples into a GZIP TFRecord file (tf.io.TFRecordWriter),
# a LinearClassifier trains on TFRecordDataset + tf.io.parse_single_example
# (is the price above 2000?) on standardized inputs, and the test rows are evaluated three ways: from
# a TFRecord file, from a CSV with tf.data.experimental.make_csv_dataset, and
# from TextLineDataset + tf.io.decode_csv; the three must agree.
import csv
import os
import sys
import tempfile

import numpy as np

from diamonds import load

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
tf.random.set_seed(SEED)

train_x, train_price, test_x, test_price = load(SEED)
work = tempfile.mkdtemp()
NUM = ["carat", "depth", "table"]


def write_tfrecord(path, x, price):
    with tf.io.TFRecordWriter(path, options="GZIP") as w:
        for i in range(len(price)):
            feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[x[k][i]])) for k in NUM}
            feature["cut"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[x["cut"][i].encode()]))
            feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(price[i] > 2000)]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


write_tfrecord(os.path.join(work, "train.tfrecord.gz"), train_x, train_price)
write_tfrecord(os.path.join(work, "test.tfrecord.gz"), test_x, test_price)
with open(os.path.join(work, "test.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(NUM + ["cut", "label"])
    for i in range(len(test_price)):
        w.writerow(["%r" % float(test_x[k][i]) for k in NUM] + [test_x["cut"][i], int(test_price[i] > 2000)])

spec = {k: tf.io.FixedLenFeature([], tf.float32) for k in NUM}
spec["cut"] = tf.io.FixedLenFeature([], tf.string)
spec["label"] = tf.io.FixedLenFeature([], tf.int64)


def parse(record):
    features = tf.io.parse_single_example(record, spec)
    label = features.pop("label")
    return features, label


def tfrecord_input_fn(name, epochs, shuffle):
    def input_fn():
        ds = tf.data.TFRecordDataset(os.path.join(work, name), compression_type="GZIP").map(parse)
        if shuffle:
            ds = ds.shuffle(200, seed=SEED)
        return ds.repeat(epochs).batch(16)
    return input_fn


def csv_input_fn():
    return tf.data.experimental.make_csv_dataset(os.path.join(work, "test.csv"), batch_size=16, label_name="label",
                                                 num_epochs=1, shuffle=False)


def textline_input_fn():
    defaults = [[0.0], [0.0], [0.0], [""], [0]]

    def parse_line(line):
        carat, depth, table, cut, label = tf.io.decode_csv(line, defaults)
        return {"carat": carat, "depth": depth, "table": table, "cut": cut}, label
    return tf.data.TextLineDataset(os.path.join(work, "test.csv")).skip(1).map(parse_line).batch(16)


def standardize(mean, std):
    return lambda x: (x - mean) / std


# inputs standardized with the training rows' statistics (raw depth and table are ~60)
feature_columns = [tf.feature_column.numeric_column(
    k, normalizer_fn=standardize(float(train_x[k].mean()), float(train_x[k].std()))) for k in NUM] + [
    tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(
        "cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"]))]
est = tf.estimator.LinearClassifier(feature_columns=feature_columns,
                                    optimizer=tf.keras.optimizers.legacy.Ftrl(learning_rate=0.5),
                                    model_dir=os.path.join(work, "model"),
                                    config=tf.estimator.RunConfig(tf_random_seed=SEED))
est.train(tfrecord_input_fn("train.tfrecord.gz", 30, True))
r = est.evaluate(tfrecord_input_fn("test.tfrecord.gz", 1, False))
r_csv = est.evaluate(csv_input_fn)
r_text = est.evaluate(textline_input_fn)
print(r)
print("METRIC accuracy=%.4f auc=%.4f csv_accuracy=%.4f textline_accuracy=%.4f readers_agree=%d global_step=%d" % (
    r["accuracy"], r["auc"], r_csv["accuracy"], r_text["accuracy"],
    int(abs(r["loss"] - r_csv["loss"]) < 1e-4 and abs(r["loss"] - r_text["loss"]) < 1e-4), r["global_step"]))
