import loom.tf as tf
# LinearClassifier with vocabulary, bucketized and crossed columns (TF's
# "Build a linear model with Estimators" tutorial, on a small diamonds CSV):
# is a diamond's price above 2000?
import sys
import tempfile

import numpy as np

from diamonds import load, CLARITY_VOCAB

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
tf.random.set_seed(SEED)

train_x, train_price, test_x, test_price = load(SEED)
train_y = (train_price > 2000).astype(np.int64)
test_y = (test_price > 2000).astype(np.int64)

carat = tf.feature_column.numeric_column("carat")
carat_buckets = tf.feature_column.bucketized_column(carat, boundaries=[0.3, 0.4, 0.5, 0.7, 0.9, 1.0, 1.5])
cut = tf.feature_column.categorical_column_with_vocabulary_list(
    "cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"])
color = tf.feature_column.categorical_column_with_vocabulary_list("color", list("DEFGHIJ"))
clarity = tf.feature_column.categorical_column_with_vocabulary_file("clarity", CLARITY_VOCAB)
cut_x_color = tf.feature_column.crossed_column(["cut", "color"], hash_bucket_size=100)
feature_columns = [carat, carat_buckets, cut, color, clarity, cut_x_color,
                   tf.feature_column.numeric_column("depth"), tf.feature_column.numeric_column("table")]


def make_input_fn(data_df, label_df, num_epochs=10, shuffle=True, batch_size=32):
    def input_function():
        ds = tf.data.Dataset.from_tensor_slices((dict(data_df), label_df))
        if shuffle:
            ds = ds.shuffle(1000)
        ds = ds.batch(batch_size).repeat(num_epochs)
        return ds
    return input_function


train_input_fn = make_input_fn(train_x, train_y, num_epochs=100)
eval_input_fn = make_input_fn(test_x, test_y, num_epochs=1, shuffle=False)

linear_est = tf.estimator.LinearClassifier(
    feature_columns=feature_columns,
    optimizer=tf.keras.optimizers.legacy.Ftrl(learning_rate=0.1),
    model_dir=tempfile.mkdtemp(),
    config=tf.estimator.RunConfig(tf_random_seed=SEED))
linear_est.train(train_input_fn)
result = linear_est.evaluate(eval_input_fn)
print(result)

probs = [p["probabilities"][1] for p in linear_est.predict(make_input_fn(test_x, test_y, 1, False))]
pred_acc = float(np.mean((np.array(probs) > 0.5) == test_y))
print("METRIC accuracy=%.4f auc=%.4f predict_accuracy=%.4f global_step=%d" % (
    result["accuracy"], result["auc"], pred_acc, result["global_step"]))
