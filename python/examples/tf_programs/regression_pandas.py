import loom.tf as tf
# A DNNRegressor fed by pandas_input_fn (the TF 1.x/2.x Estimator idiom): the
# log price of a diamond from its carat, depth and table (standardized with the
# training split's mean and standard deviation, as TF's regression tutorials
# do) and its cut, color and clarity (one-hot). 3,000 rows of the diamonds
# data (tests/fixtures/data/diamonds_3000.csv), 80% for training.
import math
import os
import sys
import tempfile

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("DIAMONDS_DIR", os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data"))
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)

df = pd.read_csv(os.path.join(DATA, "diamonds_3000.csv"), index_col=0)
df = df[(df[["x", "y", "z"]] > 0).all(axis=1)]  # rows without their measurements are errors in the data
df = df.sample(frac=1.0, random_state=SEED)
df["log_price"] = np.log(df["price"])
n_train = int(0.8 * len(df))
train, test = df.iloc[:n_train].copy(), df.iloc[n_train:].copy()

numeric = ["carat", "depth", "table"]
stats = train[numeric].describe().transpose()
for part in (train, test):
    part[numeric] = (part[numeric] - stats["mean"]) / stats["std"]
vocabularies = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"], "color": list("DEFGHIJ"),
                "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}
features = numeric + list(vocabularies)
feature_columns = [tf.feature_column.numeric_column(k) for k in numeric] + [
    tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(k, v))
    for k, v in vocabularies.items()]

regressor = tf.estimator.DNNRegressor(
    hidden_units=[32, 16], feature_columns=feature_columns,
    optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=0.003),
    model_dir=tempfile.mkdtemp(), config=tf.estimator.RunConfig(tf_random_seed=SEED))

train_input_fn = tf.compat.v1.estimator.inputs.pandas_input_fn(
    x=train[features], y=train["log_price"], batch_size=128, num_epochs=None, shuffle=True)
eval_input_fn = tf.compat.v1.estimator.inputs.pandas_input_fn(
    x=test[features], y=test["log_price"], batch_size=len(test), num_epochs=1, shuffle=False)

regressor.train(input_fn=train_input_fn, steps=2000)
metrics = regressor.evaluate(input_fn=eval_input_fn)
print(metrics)
print("METRIC rmse=%.4f label_mean=%.4f global_step=%d" % (
    math.sqrt(metrics["average_loss"]), metrics["label/mean"], metrics["global_step"]))
