import loom.tf as tf
# Wide & deep (DNNLinearCombinedClassifier) with train_and_evaluate and a
# LatestExporter on a parsing serving input receiver (TF's wide & deep /
# census idiom, on a small diamonds CSV): is the price above 2000?
import os
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

fc = tf.feature_column
carat = fc.numeric_column("carat")
cut = fc.categorical_column_with_vocabulary_list("cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"])
color = fc.categorical_column_with_hash_bucket("color", hash_bucket_size=20)
clarity = fc.categorical_column_with_vocabulary_file("clarity", CLARITY_VOCAB, num_oov_buckets=1)
wide_columns = [fc.bucketized_column(carat, [0.3, 0.5, 0.7, 1.0, 1.5]), cut, color,
                fc.crossed_column(["cut", "clarity"], hash_bucket_size=50)]
deep_columns = [carat] + [fc.numeric_column(k) for k in ("depth", "table", "x", "y", "z")] + [
    fc.indicator_column(cut), fc.embedding_column(clarity, dimension=4), fc.embedding_column(color, dimension=3)]

model_dir = tempfile.mkdtemp()
estimator = tf.estimator.DNNLinearCombinedClassifier(
    model_dir=model_dir,
    linear_feature_columns=wide_columns,
    dnn_feature_columns=deep_columns,
    dnn_hidden_units=[32, 16],
    dnn_optimizer=tf.keras.optimizers.legacy.Adagrad(learning_rate=0.05),
    config=tf.estimator.RunConfig(tf_random_seed=SEED, save_checkpoints_steps=400))


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices((train_x, train_y)).shuffle(160).repeat().batch(32)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((test_x, test_y)).batch(40)


feature_spec = tf.feature_column.make_parse_example_spec(wide_columns + deep_columns)
serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(feature_spec)
exporter = tf.estimator.LatestExporter("diamonds", serving_input_fn, exports_to_keep=2)

train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=1200)
eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None, exporters=[exporter], throttle_secs=0)
metrics, export_results = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
print(metrics)
exports = sorted(os.listdir(os.path.join(model_dir, "export", "diamonds")))

# Serve the latest export: serialized tf.Example in, the classify signature's scores out.
def make_example(i):
    feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[test_x[k][i]]))
               for k in ("carat", "depth", "table", "x", "y", "z")}
    feature.update({k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[test_x[k][i].encode()]))
                    for k in ("cut", "color", "clarity")})
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


serve = tf.saved_model.load(export_results[-1]).signatures["serving_default"]
scores = serve(inputs=tf.constant([make_example(i) for i in range(len(test_y))]))["scores"].numpy()
serving_accuracy = float(np.mean(np.argmax(scores, axis=1) == test_y))
print("METRIC accuracy=%.4f auc=%.4f global_step=%d exports_kept=%d serving_accuracy=%.4f" % (
    metrics["accuracy"], metrics["auc"], metrics["global_step"], len(exports), serving_accuracy))
