import loom.tf as tf
# A DNNRegressor fed by pandas_input_fn (TF 1.x/2.x Estimator idiom): the
# price of a diamond (in thousands) from its measurements and cut.
import math
import os
import sys
import tempfile

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("DIAMONDS_DIR", os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data"))
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)

df = pd.read_csv(os.path.join(DATA, "diamonds_200.csv"), index_col=0)
df = df.sample(frac=1.0, random_state=SEED)
df["price"] = df["price"] / 1000.0
train, test = df.iloc[:160], df.iloc[160:]
features = ["carat", "depth", "table", "x", "y", "z", "cut"]

feature_columns = [tf.feature_column.numeric_column(k) for k in features[:-1]] + [
    tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(
        "cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"]))]

regressor = tf.estimator.DNNRegressor(
    hidden_units=[32, 16], feature_columns=feature_columns,
    optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=0.01),
    model_dir=tempfile.mkdtemp(), config=tf.estimator.RunConfig(tf_random_seed=SEED))

train_input_fn = tf.compat.v1.estimator.inputs.pandas_input_fn(
    x=train[features], y=train["price"], batch_size=32, num_epochs=None, shuffle=True)
eval_input_fn = tf.compat.v1.estimator.inputs.pandas_input_fn(
    x=test[features], y=test["price"], batch_size=40, num_epochs=1, shuffle=False)

regressor.train(input_fn=train_input_fn, steps=3000)
metrics = regressor.evaluate(input_fn=eval_input_fn)
print(metrics)
print("METRIC rmse=%.4f label_mean=%.4f global_step=%d" % (
    math.sqrt(metrics["average_loss"]), metrics["label/mean"], metrics["global_step"]))
