"""What loom.tf does not provide fails loudly: a TF symbol missing here
raises NotImplementedError naming it and what to use instead, where the
program uses it (module and namespace __getattr__), never a silently
different behaviour."""
import types

# Alternatives for symbols TF Estimator programs commonly use that loom.tf lacks.
ALTERNATIVES = {
    "compat.v1.layers": "tf.compat.v1.layers dense, conv2d, max_pooling2d, average_pooling2d, flatten, dropout, "
                        "batch_normalization, or a model on loom.Graph with loom.Estimator",
    "nn": "the tf.nn activations, softmax, sparse_softmax_cross_entropy_with_logits, "
          "weighted_cross_entropy_with_logits, log_poisson_loss, top_k, in_top_k, zero_fraction, conv2d, "
          "max_pool2d, avg_pool2d, conv2d_transpose, moments, batch_normalization, or loom.Graph",
    "compat.v1.nn": "the tf.compat.v1.nn activations, softmax, sparse_softmax_cross_entropy_with_logits, "
                    "weighted_cross_entropy_with_logits, log_poisson_loss, top_k, in_top_k, zero_fraction, conv2d, "
                    "max_pool, avg_pool, conv2d_transpose, moments, batch_normalization, dropout, or loom.Graph",
    "data.Dataset": "the sources TFRecordDataset, TextLineDataset, FixedLengthRecordDataset, "
                    "experimental.CsvDataset / make_csv_dataset or Dataset.from_tensor_slices, with map, filter, "
                    "batch, shuffle, repeat, take, skip, prefetch, cache",
    "data.experimental": "tf.data.experimental.make_csv_dataset or CsvDataset",
    "io": "tf.io.parse_example / parse_single_example / decode_csv / decode_raw, TFRecordWriter",
    "sparse": "keep VarLenFeatures as they are parsed: feature columns read them (loom's ragged pairs)",
    "strings": "tf.strings.to_number, as_string or to_hash_bucket_fast",
    "keras": "tf.keras.Sequential with the layers of tf.keras.layers that loom has, or loom's native API",
    "keras.layers": "Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Reshape, Dropout, BatchNormalization, "
                    "Embedding in a tf.keras.Sequential",
    "keras.Sequential": "fit / evaluate / predict / get_weights / set_weights, or "
                        "tf.keras.estimator.model_to_estimator for the rest of the Estimator API",
    "keras.Sequential.save": "get_weights() (numpy arrays to keep with numpy.save) and set_weights() on the same "
                             "Sequential, or tf.keras.estimator.model_to_estimator(model).export_saved_model(...) "
                             "for a model to serve (tf.saved_model.load reads it)",
    "keras.Sequential.save_weights": "get_weights() (numpy arrays to keep with numpy.save) and set_weights()",
    "keras.Sequential.load_weights": "set_weights() with the arrays get_weights() gave",
    "keras.models.load_model": "rebuild the tf.keras.Sequential and set_weights() with the arrays get_weights() "
                               "gave, or tf.saved_model.load(export_dir) for an exported model",
    "keras.callbacks": "call fit(epochs=1) in a loop and act between epochs (fit returns a History), or "
                       "tf.keras.estimator.model_to_estimator with SessionRunHooks",
    "distribute": "tf.distribute.MultiWorkerMirroredStrategy() or "
                  "tf.compat.v1.distribute.experimental.ParameterServerStrategy() as RunConfig(train_distribute=...), "
                  "or none: run the same script in every task of the TF_CONFIG cluster (ps included); "
                  "tf.estimator.train_and_evaluate (or Estimator.train with max_steps) runs the task's role "
                  "(docs/python.md, Distributed)",
    "compat.v1.train.Server": "no server object: call tf.estimator.train_and_evaluate (or Estimator.train with "
                              "max_steps) in the ps task too: loom serves the variables there from TF_CONFIG",
    "compat.v1.train.ClusterSpec": "tf.estimator.RunConfig().cluster_spec (the cluster of TF_CONFIG)",
    "train.ClusterSpec": "tf.estimator.RunConfig().cluster_spec (the cluster of TF_CONFIG)",
    "train.Server": "no server object: call tf.estimator.train_and_evaluate (or Estimator.train with max_steps) in "
                    "the ps task too: loom serves the variables there from TF_CONFIG",
    "summary": "tf.compat.v1.summary.scalar / histogram / image in a model_fn (the estimator writes them every "
               "save_summary_steps)",
}


# loom.tf's implementation modules (attributes of the package as Python imports them, not TF
# symbols); scripts/gen_tf_surface.py leaves them out of docs/tf-surface.md.
INTERNAL_MODULES = ("inputs", "ops", "serving", "optimizers", "compat_placeholder", "math_ops")
# Helpers of loom.tf's modules that are public Python names but not TF symbols (left out of the page too).
INTERNAL_NAMES = ("tf.nn.activation_name", "tf.data.FEATURES", "tf.data.LABEL", "tf.data.I64", "tf.data.STRING",
                  "tf.random.op_seed", "tf.errors.from_loom")


def unsupported(symbol):
    alt = None
    for k, v in ALTERNATIVES.items():
        if symbol == k or symbol.startswith(k + "."):
            alt = v
    return NotImplementedError(
        "loom.tf does not provide tf.%s; instead: %s (docs/python.md, \"TF 2.15 Estimator programs\", lists what it "
        "covers)" % (symbol, alt or "use loom's native API (import loom)"))


def missing(prefix, name):
    """What a module/namespace __getattr__ raises for `name`."""
    if name.startswith("_"):  # private names and probes by Python itself (pickle, inspect, hasattr)
        return AttributeError(name)
    return unsupported(prefix + name)


class Namespace(types.ModuleType):
    """A TF module path (tf.compat.v1.logging ...) holding what loom.tf
    provides; any other attribute raises NotImplementedError naming it."""

    def __init__(self, path, **attrs):
        super().__init__("loom.tf." + path)
        self._path = path
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        raise missing(self._path + ".", name)
