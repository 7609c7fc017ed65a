"""loom.tf: TF 2.15's Estimator API on loom, so that a TF Estimator program
runs with its import line changed to `import loom.tf as tf`.

Covered: tf.estimator (RunConfig with TF_CONFIG's cluster properties, the
eight canned estimators, train / evaluate / predict / export_saved_model,
TrainSpec / EvalSpec / train_and_evaluate, exporters), tf.feature_column,
tf.data.Dataset.from_tensor_slices with batch / shuffle / repeat / take /
prefetch / cache, tf.compat.v1.estimator.inputs.numpy_input_fn /
pandas_input_fn, tf.compat.v1.logging, tf.random.set_seed; a custom model_fn
of tf.compat.v1.layers, feature-column input layers (_fc_layers.py), math / array / nn
ops (math_ops.py, _array_ops.py), variables and scopes (_variables.py, _graph_ops.py),
tf.compat.v1 losses, metrics, summaries (_v1_ops.py) and optimizers (ops.py);
tf.compat.v1.estimator's v1 canned estimators (estimator/_v1.py); Estimator.train
under a TF_CONFIG cluster runs the task's role (estimator/__init__.py). A TF symbol
loom.tf does not provide raises NotImplementedError naming it and what to
use instead (docs/python.md lists the surface)."""
from . import dtypes, errors, feature_column, data, estimator, nn, random, optimizers as _optimizers
from . import distribute, config
from . import inputs as _inputs
from . import ops as _ops
from . import _hooks
from . import _session_config
from . import _learning_rate
from . import serving as _serving
from .serving import constant  # noqa: F401
from .ops import argmax, cast, reshape, reduce_mean, reduce_sum, reduce_max, reduce_min  # noqa: F401
from .compat_placeholder import placeholder as _placeholder
from .dtypes import (DType, as_dtype, float16, float32, float64, int8, int16, int32, int64, uint8,  # noqa: F401
                     bool, string)
from .feature_column import FixedLenFeature as _FixedLen, VarLenFeature as _VarLen
from ._surface import Namespace, missing
from .._lib import lib as _lib
from .. import _lib as _L

__version__ = "2.15.0"  # the TF API this layer follows
VERSION = __version__


def _log_level(level):
    """TF's logging levels (absl: DEBUG 10, INFO 20, WARN 30, ERROR 40, FATAL 50) -> loom_log_level."""
    return 0 if level <= 10 else 1 if level <= 20 else 2 if level <= 30 else 3


_verbosity = [30]
import logging as _pylogging  # noqa: E402
import sys as _sys  # noqa: E402
# TF's Python logger: tf.compat.v1.logging and LoggingTensorHook write to it; as TF's tf_logging does, it gets a
# handler on stderr when logging is not configured, and set_verbosity sets its level (TF's default WARN).
_tf_log = _pylogging.getLogger("tensorflow")
if not _pylogging.getLogger().handlers and not _tf_log.handlers:
    _h = _pylogging.StreamHandler(_sys.stderr)
    _h.setFormatter(_pylogging.Formatter(_pylogging.BASIC_FORMAT))
    _tf_log.addHandler(_h)
if _tf_log.level == _pylogging.NOTSET:
    _tf_log.setLevel(_verbosity[0])


def _set_verbosity(level):
    _verbosity[0] = int(level)
    _tf_log.setLevel(int(level))
    _lib.loom_log_set(None, None, _log_level(int(level)))


def get_logger():
    """tf.get_logger: Python's "tensorflow" logger (what tf.compat.v1.logging writes to)."""
    return _tf_log


def _log_fn(level, name):
    def f(msg, *args, **kwargs):
        _tf_log.log(level, msg, *args, **kwargs)
    f.__name__ = f.__qualname__ = name
    return f


logging = Namespace("compat.v1.logging", DEBUG=10, INFO=20, WARN=30, WARNING=30, ERROR=40, FATAL=50,
                    set_verbosity=_set_verbosity, get_verbosity=lambda: _verbosity[0],
                    debug=_log_fn(10, "debug"), info=_log_fn(20, "info"), warn=_log_fn(30, "warn"),
                    warning=_log_fn(30, "warning"), error=_log_fn(40, "error"), fatal=_log_fn(50, "fatal"),
                    log=lambda level, msg, *args, **kwargs: _tf_log.log(level, msg, *args, **kwargs))
from . import io as _io
from . import math_ops as _m
from .math_ops import add, subtract, multiply, divide, maximum, minimum, exp, sqrt, square, concat, expand_dims, \
    squeeze, equal, less, greater  # noqa: F401
io = Namespace("io", FixedLenFeature=_FixedLen, VarLenFeature=_VarLen,
               FixedLenSequenceFeature=_io.FixedLenSequenceFeature, parse_example=_io.parse_example,
               parse_single_example=_io.parse_single_example, TFRecordWriter=_io.TFRecordWriter,
               TFRecordOptions=_io.TFRecordOptions, TFRecordCompressionType=_io.TFRecordCompressionType,
               decode_raw=_io.decode_raw, decode_csv=_io.decode_csv)
def _gfile_copy(src, dst, overwrite=False):
    import shutil
    if not overwrite and _os.path.exists(dst):
        raise FileExistsError(dst)
    shutil.copyfile(src, dst)


import os as _os  # noqa: E402
import glob as _glob  # noqa: E402
io.gfile = Namespace("io.gfile", glob=lambda pattern: sorted(_glob.glob(pattern)), exists=_os.path.exists,
                     isdir=_os.path.isdir, listdir=_os.listdir, makedirs=lambda p: _os.makedirs(p, exist_ok=True),
                     mkdir=_os.mkdir, remove=_os.remove, rmtree=__import__("shutil").rmtree, GFile=open,
                     copy=_gfile_copy, rename=lambda s, d, overwrite=False: _os.replace(s, d) if overwrite
                     else _os.rename(s, d))
strings = Namespace("strings", to_number=_io.string_to_number, as_string=_io.as_string,
                    to_hash_bucket_fast=_io.to_hash_bucket_fast)
sparse = Namespace("sparse", SparseTensor=data.SparseTensor)
SparseTensor = data.SparseTensor
from ._data_generator import TensorSpec  # noqa: E402
from . import _keras
_keras_optimizers = Namespace("keras.optimizers", Adagrad=_optimizers.Adagrad, Adam=_optimizers.Adam,
                              Ftrl=_optimizers.Ftrl, RMSprop=_optimizers.RMSprop, SGD=_optimizers.SGD,
                              schedules=_optimizers.schedules,
                              legacy=Namespace("keras.optimizers.legacy", Adagrad=_optimizers.Adagrad,
                                               Adam=_optimizers.Adam, Ftrl=_optimizers.Ftrl,
                                               RMSprop=_optimizers.RMSprop, SGD=_optimizers.SGD))
keras = Namespace("keras", Sequential=_keras.Sequential, Input=_keras.Input, layers=_keras.layers,
                  models=_keras.models, estimator=_keras.estimator, backend=_keras.backend,
                  callbacks=_keras.callbacks, initializers=_keras.initializers, regularizers=_keras.regularizers,
                  optimizers=_keras_optimizers,
                  activations=Namespace("keras.activations", relu=nn.relu, elu=nn.elu, selu=nn.selu, tanh=nn.tanh,
                                        sigmoid=nn.sigmoid, softplus=nn.softplus, gelu=nn.gelu,
                                        softmax=nn.softmax, linear="linear"),
                  utils=Namespace("keras.utils", set_random_seed=random.set_seed),
                  losses=Namespace("keras.losses", Reduction=Namespace(
                      "keras.losses.Reduction", SUM_OVER_BATCH_SIZE="sum_over_batch_size", SUM="sum",
                      AUTO="auto", NONE="none"), **_keras.losses_ns))
losses = Namespace("losses", Reduction=keras.losses.Reduction)
from . import _array_ops as _a
from ._array_ops import (matmul, transpose, stack, tile, gather, one_hot, where, clip_by_value, zeros_like,  # noqa
                         ones_like, identity, stop_gradient, sigmoid, tanh, negative, sign, floor, round,
                         not_equal, less_equal, greater_equal, logical_and, logical_or, logical_not, reduce_prod,
                         reduce_logsumexp, argmin)
abs = _m.abs  # noqa: A001 - TF's name
_MATH_EXTRA = {k: getattr(_a, k) for k in (
    "sigmoid", "tanh", "negative", "sign", "floor", "ceil", "round", "reciprocal", "log1p", "rsqrt", "not_equal",
    "less_equal", "greater_equal", "logical_and", "logical_or", "logical_not", "reduce_prod", "reduce_logsumexp",
    "argmin", "reduce_variance", "reduce_std", "divide_no_nan", "reduce_any", "reduce_all")}
reduce_any, reduce_all = _a.reduce_any, _a.reduce_all
from . import _shape_ops  # noqa: E402
slice, split, unstack, pad = _shape_ops.slice, _shape_ops.split, _shape_ops.unstack, _shape_ops.pad  # noqa: A001
pow = _m.pow  # noqa: A001 - TF's name
from . import _model_fn_ops as _mfo  # noqa: E402
_MATH_EXTRA.update(top_k=nn.top_k, in_top_k=nn.in_top_k, zero_fraction=nn.zero_fraction, add_n=_mfo.add_n)
add_n = _mfo.add_n
math = Namespace("math", **_MATH_EXTRA, argmax=argmax, reduce_mean=reduce_mean, reduce_sum=reduce_sum,
                 reduce_max=reduce_max,
                 reduce_min=reduce_min, add=_m.add, subtract=_m.subtract, multiply=_m.multiply, divide=_m.divide,
                 maximum=_m.maximum, minimum=_m.minimum, exp=_m.exp, log=_m.log, sqrt=_m.sqrt, square=_m.square,
                 abs=_m.abs, pow=_m.pow, equal=_m.equal, less=_m.less, greater=_m.greater,
                 softplus=nn.softplus)
from .estimator import _v1 as _est_v1
from . import _v1_ops
from . import _graph_ops as _gops
from . import _fc_layers as _fcl
_keras.layers.DenseFeatures = _fcl.DenseFeatures
keras.experimental = Namespace("keras.experimental", SequenceFeatures=_fcl.SequenceFeatures)
from . import _variables as _vars
from ._graph_ops import control_dependencies, group, zeros, ones, shape, range, name_scope  # noqa: F401,A004
from ._nn_ops import gradients  # noqa: F401
from ._variables import Variable  # noqa: F401
random.truncated_normal, random.normal, random.uniform = _vars.truncated_normal, _vars.random_normal, \
    _vars.random_uniform
_v1_losses = Namespace("compat.v1.losses", **{k: getattr(_v1_ops, k) for k in (
                           "sparse_softmax_cross_entropy", "softmax_cross_entropy", "sigmoid_cross_entropy",
                           "mean_squared_error", "absolute_difference", "huber_loss", "log_loss", "hinge_loss",
                           "compute_weighted_loss")}, Reduction=Namespace(
                           "compat.v1.losses.Reduction", NONE="none", SUM="weighted_sum",
                           SUM_OVER_BATCH_SIZE="weighted_sum_over_batch_size", MEAN="weighted_mean",
                           SUM_BY_NONZERO_WEIGHTS="weighted_sum_by_nonzero_weights",
                           SUM_OVER_NONZERO_WEIGHTS="weighted_sum_by_nonzero_weights"))
_v1_train = Namespace("compat.v1.train", get_global_step=_ops.get_global_step,
                      get_or_create_global_step=_ops.get_global_step,
                      SessionRunHook=_hooks.SessionRunHook, SessionRunArgs=_hooks.SessionRunArgs,
                      SessionRunContext=_hooks.SessionRunContext, SessionRunValues=_hooks.SessionRunValues,
                      LoggingTensorHook=_hooks.LoggingTensorHook, StopAtStepHook=_hooks.StopAtStepHook,
                      CheckpointSaverHook=_hooks.CheckpointSaverHook, SummarySaverHook=_hooks.SummarySaverHook,
                      StepCounterHook=_hooks.StepCounterHook, ProfilerHook=_hooks.ProfilerHook,
                      GlobalStepWaiterHook=_hooks.GlobalStepWaiterHook, NanTensorHook=_hooks.NanTensorHook,
                      FeedFnHook=_hooks.FeedFnHook, CheckpointSaverListener=estimator.CheckpointSaverListener,
                      **{k: getattr(_learning_rate, k) for k in _learning_rate.__all__},
                      GradientDescentOptimizer=_ops.GradientDescentOptimizer, AdamOptimizer=_ops.AdamOptimizer,
                      AdagradOptimizer=_ops.AdagradOptimizer, MomentumOptimizer=_ops.MomentumOptimizer,
                      RMSPropOptimizer=_ops.RMSPropOptimizer, FtrlOptimizer=_ops.FtrlOptimizer,
                      AdadeltaOptimizer=_ops.AdadeltaOptimizer,
                      ProximalGradientDescentOptimizer=_ops.ProximalGradientDescentOptimizer,
                      ProximalAdagradOptimizer=_ops.ProximalAdagradOptimizer,
                      AdagradDAOptimizer=_ops.AdagradDAOptimizer, latest_checkpoint=_v1_ops.latest_checkpoint)
from . import _nn_ops  # noqa: E402
_v1_nn = Namespace("compat.v1.nn", **{k: v for k, v in vars(nn).items() if not k.startswith("_") and not isinstance(
    v, type(nn)) and k not in ("missing", "activation_name")})
_v1_nn.__dict__.update(conv2d=_nn_ops.conv2d_v1, conv2d_transpose=_nn_ops.conv2d_transpose_v1,
                       max_pool=_nn_ops.max_pool_v1, avg_pool=_nn_ops.avg_pool_v1, moments=_nn_ops.moments_v1,
                       dropout=_nn_ops.dropout_v1)
_v1_nn.__dict__.update(in_top_k=_mfo.in_top_k_v1,
                       weighted_cross_entropy_with_logits=_mfo.weighted_cross_entropy_with_logits_v1)
_v1_losses.get_regularization_loss = _mfo.get_regularization_loss
_v1_losses.get_regularization_losses = _mfo.get_regularization_losses
_v1_losses.add_loss = _mfo.add_loss
_v1 = Namespace("compat.v1", logging=logging, estimator=Namespace(
    "compat.v1.estimator", inputs=Namespace("compat.v1.estimator.inputs", numpy_input_fn=_inputs.numpy_input_fn,
                                            pandas_input_fn=_inputs.pandas_input_fn),
    **{k: getattr(_est_v1 if k in _est_v1.__all__ else estimator, k) for k in estimator.__all__}),
    feature_column=Namespace("compat.v1.feature_column", input_layer=_fcl.input_layer,
                             linear_model=_fcl.linear_model,
                             **{k: getattr(feature_column, k) for k in feature_column.__all__}),
    data=data, placeholder=_placeholder, set_random_seed=random.set_seed,
    initializers=Namespace("compat.v1.initializers", constant=_vars.constant_initializer, zeros=_vars.zeros_initializer,
                           ones=_vars.ones_initializer, random_normal=_vars.random_normal_initializer,
                           random_uniform=_vars.random_uniform_initializer,
                           truncated_normal=_vars.truncated_normal_initializer,
                           glorot_uniform=_vars.glorot_uniform_initializer,
                           glorot_normal=_vars.glorot_normal_initializer, he_normal=_keras.initializers.HeNormal,
                           he_uniform=_keras.initializers.HeUniform),
    io=io, python_io=Namespace("compat.v1.python_io", TFRecordWriter=_io.TFRecordWriter,
                               TFRecordOptions=_io.TFRecordOptions,
                               TFRecordCompressionType=_io.TFRecordCompressionType),
    decode_csv=_io.decode_csv, decode_raw=_io.decode_raw, parse_example=_io.parse_example,
    parse_single_example=_io.parse_single_example, FixedLenFeature=_FixedLen, VarLenFeature=_VarLen,
    losses=_v1_losses, nn=_v1_nn, keras=keras, train=_v1_train,
    layers=Namespace("compat.v1.layers", dense=_ops.dense, conv2d=_ops.conv2d, max_pooling2d=_ops.max_pooling2d,
                     average_pooling2d=_ops.average_pooling2d, flatten=_ops.flatten, dropout=_ops.dropout,
                     batch_normalization=_gops.batch_normalization),
    GraphKeys=_gops.GraphKeys, get_collection=_gops.get_collection, control_dependencies=_gops.control_dependencies,
    get_variable=_vars.get_variable, add_to_collection=_mfo.add_to_collection,
    trainable_variables=_mfo.trainable_variables,
    global_variables=_mfo.global_variables,
    **{k: getattr(_vars, k) for k in ("zeros_initializer", "ones_initializer", "constant_initializer",
                                      "random_uniform_initializer", "random_normal_initializer",
                                      "truncated_normal_initializer", "glorot_uniform_initializer",
                                      "glorot_normal_initializer")},
    group=_gops.group, variable_scope=_gops.variable_scope, AUTO_REUSE=_gops.AUTO_REUSE, name_scope=_gops.name_scope,
    metrics=Namespace("compat.v1.metrics", accuracy=_v1_ops.accuracy, mean=_v1_ops.mean, auc=_v1_ops.auc,
                      mean_squared_error=_v1_ops.mean_squared_error_metric,
                      **{k: getattr(_v1_ops, k) for k in (
                          "root_mean_squared_error", "mean_absolute_error", "precision", "recall", "true_positives",
                          "false_positives", "true_negatives", "false_negatives") + _v1_ops.MORE_METRICS}),
    summary=Namespace("compat.v1.summary", scalar=_v1_ops.scalar, histogram=_v1_ops.histogram,
                      image=_v1_ops.image),
    argmax=argmax, add_n=_mfo.add_n, cast=cast, reshape=reshape, reduce_mean=reduce_mean, reduce_sum=reduce_sum,
    get_default_graph=_hooks.get_default_graph, ConfigProto=_session_config.ConfigProto,
    GPUOptions=_session_config.GPUOptions, gradients=gradients, Variable=Variable,
    truncated_normal=_vars.truncated_normal, random_normal=_vars.random_normal,
    random_uniform=_vars.random_uniform, random=Namespace(
        "compat.v1.random", set_random_seed=random.set_seed, truncated_normal=_vars.truncated_normal,
        normal=_vars.random_normal, uniform=_vars.random_uniform))
from . import _clip_ops
clip_by_global_norm, clip_by_norm, IndexedSlices = (_clip_ops.clip_by_global_norm, _clip_ops.clip_by_norm,
                                                    _clip_ops.IndexedSlices)
linalg = Namespace("linalg", global_norm=_clip_ops.global_norm, matmul=matmul)
_v1.__dict__.update(distribute=Namespace("compat.v1.distribute", experimental=distribute._v1_experimental,
                                         MultiWorkerMirroredStrategy=distribute.MultiWorkerMirroredStrategy))
_v1.__dict__.update(clip_by_global_norm=clip_by_global_norm, clip_by_norm=clip_by_norm,
                    global_norm=_clip_ops.global_norm, IndexedSlices=IndexedSlices)
compat = Namespace("compat", v1=_v1)
initializers = keras.initializers
train = Namespace("train", latest_checkpoint=_v1_ops.latest_checkpoint, Example=_serving.Example,
                  Features=_serving.Features, Feature=_serving.Feature,
                  BytesList=_serving.BytesList, FloatList=_serving.FloatList, Int64List=_serving.Int64List)
saved_model = Namespace("saved_model", load=_serving.load)


def __getattr__(name):
    raise missing("", name)

# tf.compat.v1 holds TF 1's whole API: the top-level ops and types it shares with TF 2 (TF 1's deprecated
# argument aliases, e.g. keep_dims, are not taken)
for _k in ("DType", "SparseTensor", "VERSION", "abs", "add", "argmin", "as_dtype", "bool", "clip_by_value", "concat",
           "constant", "divide", "dtypes", "equal", "errors", "exp", "expand_dims", "float16", "float32", "float64",
           "floor", "gather", "greater", "greater_equal", "identity", "int16", "int32", "int64", "int8", "less",
           "less_equal", "linalg", "logical_and", "logical_not", "logical_or", "math", "matmul", "maximum", "minimum",
           "multiply", "negative", "not_equal", "one_hot", "ones", "ones_like", "pad", "pow", "range", "reduce_all",
           "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_min", "reduce_prod", "round", "saved_model",
           "shape", "sigmoid", "sign", "slice", "sparse", "split", "sqrt", "square", "squeeze", "stack",
           "stop_gradient", "string", "strings", "subtract", "tanh", "tile", "transpose", "uint8", "unstack", "where",
           "zeros", "zeros_like"):
    _v1.__dict__.setdefault(_k, globals()[_k])
