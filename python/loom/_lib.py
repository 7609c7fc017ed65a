"""ctypes declarations of the part of loom's public C API (include/loom/*.h)
that the package uses. Struct layouts mirror the headers field by field;
tests/test_layout.py checks every struct that has a struct_size field
against the size the C library reports in it."""
import ctypes as C
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
# The library a wheel bundles beside the package (python/setup.py copies build/libloom.so).
BUNDLED = os.path.join(_here, "libloom.so")


# The C library's ABI version (its SONAME libloom.so.N) whose struct layouts this package mirrors.
SOVERSION = 1


def _candidates():
    """Where libloom is looked for, first match wins: LOOM_LIBRARY; the copy the
    wheel bundles; build/libloom.so of a source checkout (python/loom/ ->
    build/); lib/ of an install prefix (PREFIX, this Python's prefix, /usr/local,
    /usr, where `make install` puts it); the loader's cache (ldconfig)."""
    env = os.environ.get("LOOM_LIBRARY")
    if env:
        yield env
    yield BUNDLED
    yield os.path.join(_here, "..", "..", "build", "libloom.so")
    seen = set()
    for prefix in (os.environ.get("PREFIX"), sys.prefix, "/usr/local", "/usr"):
        if prefix and prefix not in seen:
            seen.add(prefix)
            yield os.path.join(prefix, "lib", "libloom.so.%d" % SOVERSION)
            yield os.path.join(prefix, "lib", "libloom.so")


def _find_library():
    for c in _candidates():
        if os.path.exists(c):
            return os.path.abspath(c)
    import ctypes.util  # only here: it imports subprocess, which the rest of the package does not need
    return ctypes.util.find_library("loom") or "libloom.so.%d" % SOVERSION  # the loader's search path


LIBRARY_PATH = _find_library()
try:
    lib = C.CDLL(LIBRARY_PATH)
except OSError as e:  # pragma: no cover
    raise ImportError(
        "loom: cannot load the C library (%s): install the wheel `make wheel` builds (it bundles "
        "libloom.so), or `make install` the library, or set LOOM_LIBRARY to libloom.so's path" % e) from e

vp = C.c_void_p
cs = C.c_char_p
i32 = C.c_int32
i64 = C.c_int64
u32 = C.c_uint32
dbl = C.c_double
cint = C.c_int
P = C.POINTER


class Output(C.Structure):
    _fields_ = [("node", vp), ("index", i32)]


class SessionOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("num_threads", i32), ("device", cint), ("device_index", i32)]


class Initializer(C.Structure):
    _fields_ = [("kind", i32), ("a", dbl), ("b", dbl), ("mode", i32), ("distribution", i32), ("seed", i64)]


class Regularizer(C.Structure):
    _fields_ = [("kind", i32), ("l1", dbl), ("l2", dbl)]


class DenseOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("activation", cs), ("use_bias", i32), ("kernel_initializer", Initializer),
                ("bias_initializer", Initializer), ("kernel_regularizer", Regularizer),
                ("bias_regularizer", Regularizer), ("trainable", i32), ("reuse", i32)]


class RunConfig(C.Structure):
    _fields_ = [("struct_size", u32), ("model_dir", cs), ("has_random_seed", i32), ("tf_random_seed", i64),
                ("save_summary_steps", i64), ("save_checkpoints_steps", i64), ("save_checkpoints_secs", dbl),
                ("keep_checkpoint_max", i32), ("keep_checkpoint_every_n_hours", dbl),
                ("log_step_count_steps", i64), ("num_threads", i32), ("device", cint), ("progress_bar", i32),
                ("prefetch", i32), ("train_distribute", i32)]


class TrainOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("steps", i64), ("max_steps", i64), ("nhooks", i32), ("hooks", vp),
                ("nlisteners", i32), ("listeners", vp), ("listener_selves", vp)]


class EvalOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("steps", i64), ("nhooks", i32), ("hooks", vp), ("checkpoint_path", cs),
                ("name", cs)]


class PredictOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("npredict_keys", i32), ("predict_keys", P(cs)), ("checkpoint_path", cs),
                ("yield_single_examples", i32), ("nhooks", i32), ("hooks", vp)]


class PredictorOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("num_threads", i32), ("signature", cs)]


CANNED_OPTIMIZER_FN = C.CFUNCTYPE(vp, vp, vp)


class CannedOptimizer(C.Structure):
    _fields_ = [("name", cs), ("learning_rate", dbl), ("fn", CANNED_OPTIMIZER_FN), ("user", vp)]


_COMMON = [("model_dir", cs), ("config", P(RunConfig)), ("n_classes", i64), ("label_dimension", i64),
           ("weight_column", cs), ("nlabel_vocabulary", i32), ("label_vocabulary", P(cs)),
           ("loss_reduction", cint), ("warm_start_from", cs), ("warm_start", vp)]


class LinearOptions(C.Structure):
    _fields_ = [("struct_size", u32)] + _COMMON + [
        ("nfeature_columns", i32), ("feature_columns", P(vp)), ("optimizer", CannedOptimizer),
        ("sparse_combiner", cint)]


class DNNOptions(C.Structure):
    _fields_ = [("struct_size", u32)] + _COMMON + [
        ("nhidden_units", i32), ("hidden_units", P(i64)), ("nfeature_columns", i32), ("feature_columns", P(vp)),
        ("optimizer", CannedOptimizer), ("activation", cs), ("dropout", dbl), ("batch_norm", i32)]


class BaselineOptions(C.Structure):
    _fields_ = [("struct_size", u32)] + _COMMON + [("optimizer", CannedOptimizer)]


MODEL_FN = C.CFUNCTYPE(cint, vp, vp, Output, cint, vp, vp, vp, vp, vp)
INPUT_FN = C.CFUNCTYPE(vp, cint, vp, vp, vp)
SERVING_INPUT_FN = C.CFUNCTYPE(cint, vp, vp, vp, vp, vp)
DEALLOC = C.CFUNCTYPE(None, vp, C.c_size_t, vp)


def _d(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


B = Output  # builders return loom_output
# base
_d("loom_status_new", vp)
_d("loom_status_free", None, vp)
_d("loom_status_code", cint, vp)
_d("loom_status_message", cs, vp)
_d("loom_status_set_message", cint, vp, cint, cs)
_d("loom_code_name", cs, cint)
_d("loom_version", cs)
# tensors
_d("loom_tensor_new", vp, cint, cint, P(i64), vp)
_d("loom_tensor_wrap", vp, cint, cint, P(i64), vp, C.c_size_t, DEALLOC, vp, vp)
_d("loom_tensor_free", None, vp)
_d("loom_tensor_dtype", cint, vp)
_d("loom_tensor_ndim", cint, vp)
_d("loom_tensor_dims", P(i64), vp)
_d("loom_tensor_numel", i64, vp)
_d("loom_tensor_nbytes", C.c_size_t, vp)
_d("loom_tensor_data", vp, vp)
_d("loom_tensor_set_string", cint, vp, i64, cs, C.c_size_t, vp)
_d("loom_tensor_get_string", vp, vp, i64, P(C.c_size_t))
# graph
_d("loom_graph_new", vp)
_d("loom_graph_free", None, vp)
_d("loom_graph_status", cint, vp, vp)
_d("loom_graph_set_random_seed", None, vp, i64)
_d("loom_graph_find_output", Output, vp, cs)
_d("loom_graph_num_nodes", cint, vp)
_d("loom_node_name", cs, vp)
_d("loom_node_op_name", cs, vp)
_d("loom_output_dtype", cint, Output)
_d("loom_output_dims", cint, Output, P(i64))
_d("loom_placeholder", B, vp, cint, cint, P(i64), cs)
_d("loom_const_data", B, vp, cint, cint, P(i64), vp, cs)
_d("loom_identity", B, vp, Output, cs)
for _n in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "less", "greater"):
    _d("loom_" + _n, B, vp, Output, Output, cs)
for _n in ("neg", "abs", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu", "softplus", "softmax",
           "log_softmax", "stop_gradient"):
    _d("loom_" + _n, B, vp, Output, cs)
_d("loom_matmul", B, vp, Output, Output, cint, cint, cs)
_d("loom_bias_add", B, vp, Output, Output, cs)
_d("loom_reshape", B, vp, Output, cint, P(i64), cs)
_d("loom_transpose", B, vp, Output, cint, P(i64), cs)
_d("loom_concat", B, vp, cint, P(Output), i64, cs)
_d("loom_cast", B, vp, Output, cint, cs)
_d("loom_argmax", B, vp, Output, i64, cint, cs)
for _n in ("sum", "mean", "max", "min"):
    _d("loom_reduce_" + _n, B, vp, Output, cint, P(i64), cint, cs)
_d("loom_sparse_softmax_cross_entropy_with_logits", B, vp, Output, Output, P(Output), P(Output), cs)
_d("loom_losses_mean_squared_error", B, vp, Output, Output, Output, cs, cs, cint)
_d("loom_dense_options_default", DenseOptions)
_d("loom_layers_dense", B, vp, Output, i64, P(DenseOptions), cs)
_d("loom_init_zeros", Initializer)
_d("loom_init_constant", Initializer, dbl)
_d("loom_init_glorot_uniform", Initializer, i64)
_d("loom_init_random_normal", Initializer, dbl, dbl, i64)
# variables, optimizers
_d("loom_get_variable", vp, vp, cs, cint, cint, P(i64), P(Initializer), cint)
_d("loom_variable_new", vp, vp, Output, cint, u32, cs)
_d("loom_variable_output", Output, vp)
_d("loom_global_variables_initializer", vp, vp)
_d("loom_get_or_create_global_step", vp, vp)
_d("loom_optimizer_sgd", vp, Output)
_d("loom_optimizer_adam", vp, Output, vp)
_d("loom_optimizer_adagrad", vp, Output, vp)
_d("loom_optimizer_proximal_gradient_descent", vp, Output, vp)
_d("loom_optimizer_proximal_adagrad", vp, Output, vp)
_d("loom_optimizer_adagrad_da", vp, Output, vp)
_d("loom_optimizer_free", None, vp)
_d("loom_optimizer_minimize", vp, vp, vp, Output, cint, vp, vp, cs)
# sessions
_d("loom_session_options_default", SessionOptions)
_d("loom_session_new", vp, vp, P(SessionOptions), vp)
_d("loom_session_free", None, vp)
_d("loom_session_run", cint, vp, P(Output), P(vp), cint, P(Output), P(vp), cint, P(vp), cint, vp)
# export / predictor
_d("loom_predictor_options_default", PredictorOptions)
_d("loom_predictor_load", vp, cs, P(PredictorOptions), vp)
_d("loom_predictor_free", None, vp)
_d("loom_predictor_num_inputs", cint, vp, cs)
_d("loom_predictor_input_key", cs, vp, cs, cint)
_d("loom_predictor_num_outputs", cint, vp, cs)
_d("loom_predictor_output_key", cs, vp, cs, cint)
_d("loom_predictor_num_signatures", cint, vp)
_d("loom_predictor_signature_name", cs, vp, cint)
_d("loom_predictor_input_dtype", cint, vp, cs, cint)
_d("loom_predictor_input_shape", cint, vp, cs, cint, P(i64))
_d("loom_predictor_output_dtype", cint, vp, cs, cint)
_d("loom_predictor_run", cint, vp, cs, cint, P(vp), cint, P(vp), vp)
# datasets
_d("loom_dataset_from_tensors", vp, cint, P(cs), P(vp), cs, vp)
_d("loom_dataset_from_tensors_taken", vp, cint, P(cs), P(vp), cs, vp)
_d("loom_dataset_batch", vp, vp, i64, cint, vp)
_d("loom_dataset_shuffle", vp, vp, i64, C.c_uint64, cint, vp)
_d("loom_dataset_repeat", vp, vp, i64, vp)
_d("loom_dataset_take", vp, vp, i64, vp)
_d("loom_dataset_next", cint, vp, P(vp), vp)
_d("loom_dataset_reset", cint, vp, vp)
_d("loom_dataset_free", None, vp)
_d("loom_dataset_num_components", cint, vp)
_d("loom_dataset_component_name", cs, vp, cint)
# estimator
_d("loom_run_config_default", RunConfig)
_d("loom_train_options_default", TrainOptions)
_d("loom_eval_options_default", EvalOptions)
_d("loom_predict_options_default", PredictOptions)
_d("loom_params_new", vp)
_d("loom_params_free", None, vp)
_d("loom_params_set", cint, vp, cs, cs, vp)
_d("loom_estimator_new", vp, MODEL_FN, vp, cs, P(RunConfig), vp, cs, vp)
_d("loom_estimator_free", None, vp)
_d("loom_estimator_model_dir", cs, vp)
_d("loom_estimator_train", cint, vp, INPUT_FN, vp, P(TrainOptions), vp)
_d("loom_estimator_evaluate", cint, vp, INPUT_FN, vp, P(EvalOptions), P(vp), vp)
_d("loom_eval_result_count", cint, vp)
_d("loom_eval_result_key", cs, vp, cint)
_d("loom_eval_result_value", dbl, vp, cint)
_d("loom_eval_result_free", None, vp)
_d("loom_estimator_predict", vp, vp, INPUT_FN, vp, P(PredictOptions), vp)
_d("loom_prediction_next", cint, vp, vp)
_d("loom_prediction_count", cint, vp)
_d("loom_prediction_key", cs, vp, cint)
_d("loom_prediction_value", vp, vp, cint)
_d("loom_prediction_iter_free", None, vp)
_d("loom_estimator_export", cint, vp, SERVING_INPUT_FN, vp, cs, cs, C.c_char_p, C.c_size_t, vp)
_d("loom_estimator_get_variable_value", cint, vp, cs, P(vp), vp)
_d("loom_features_count", cint, vp)
_d("loom_features_name", cs, vp, cint)
_d("loom_features_at", Output, vp, cint)
_d("loom_features_add", cint, vp, cs, Output, vp)
_d("loom_spec_set_loss", cint, vp, Output)
_d("loom_spec_set_train_op", cint, vp, vp)
_d("loom_spec_add_prediction", cint, vp, cs, Output)
# canned + feature columns
_d("loom_fc_set_new", vp)
_d("loom_fc_set_free", None, vp)
_d("loom_fc_numeric", vp, vp, cs, cint, P(i64), P(C.c_float), cint, vp, vp, vp)
_d("loom_fc_name", cs, vp)
# the parsing serving input receiver (serialized tf.Example in) and tf.Example bytes
_d("loom_fc_parsing_receiver_new", vp, cint, P(vp), vp)
_d("loom_parsing_receiver_free", None, vp)
PARSING_SERVING_INPUT_FN = SERVING_INPUT_FN(C.cast(lib.loom_parsing_serving_input_fn, vp).value)
_d("loom_example_serialize", vp, cint, P(cs), P(vp), vp)
_d("loom_dnn_options_default", DNNOptions)
_d("loom_linear_options_default", LinearOptions)
_d("loom_baseline_options_default", BaselineOptions)
for _n in ("dnn_classifier", "dnn_regressor"):
    _d("loom_%s_new" % _n, vp, P(DNNOptions), vp)
for _n in ("linear_classifier", "linear_regressor"):
    _d("loom_%s_new" % _n, vp, P(LinearOptions), vp)
for _n in ("baseline_classifier", "baseline_regressor"):
    _d("loom_%s_new" % _n, vp, P(BaselineOptions), vp)
# ONNX export (loom_onnx.h) and the log sink its notes go to
class OnnxOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("opset", i32), ("signature", cs), ("noutputs", i32),
                ("output_keys", P(cs)), ("graph_name", cs)]


LOG_FN = C.CFUNCTYPE(None, cint, cs, vp)
_d("loom_onnx_options_default", OnnxOptions)
_d("loom_onnx_export", cint, cs, cs, P(OnnxOptions), vp)
_d("loom_log_set", None, vp, vp, cint)

# ---- used by loom.tf (the TF 2.15 Estimator surface)
class CombinedOptions(C.Structure):
    _fields_ = [("struct_size", u32)] + _COMMON + [
        ("nlinear_feature_columns", i32), ("linear_feature_columns", P(vp)), ("linear_optimizer", CannedOptimizer),
        ("ndnn_feature_columns", i32), ("dnn_feature_columns", P(vp)), ("dnn_optimizer", CannedOptimizer),
        ("ndnn_hidden_units", i32), ("dnn_hidden_units", P(i64)), ("dnn_activation", cs), ("dnn_dropout", dbl),
        ("batch_norm", i32), ("linear_sparse_combiner", cint)]


class EmbeddingOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("combiner", cint), ("initializer", P(Initializer)), ("max_norm", dbl), ("trainable", i32),
                ("shared_name", cs)]


class FeatureSpec(C.Structure):
    _fields_ = [("name", cs), ("dtype", cint), ("varlen", i32), ("ndim", i32), ("dims", i64 * 8),
                ("default_value", vp), ("kind", i32), ("allow_missing", i32), ("index_key", cs),
                ("value_key", cs), ("size", i64), ("already_sorted", i32), ("ragged", i32)]


class TrainSpec(C.Structure):
    _fields_ = [("struct_size", u32), ("input_fn", INPUT_FN), ("input_user", vp), ("max_steps", i64),
                ("nhooks", i32), ("hooks", vp), ("nlisteners", i32), ("listeners", vp), ("listener_selves", vp)]


class EvalSpec(C.Structure):
    _fields_ = [("struct_size", u32), ("input_fn", INPUT_FN), ("input_user", vp), ("steps", i64), ("name", cs),
                ("nhooks", i32), ("hooks", vp), ("nexporters", i32), ("exporters", P(vp)),
                ("start_delay_secs", dbl), ("throttle_secs", dbl)]


CHECKPOINT_ENTRY_FN = C.CFUNCTYPE(cint, cs, cint, cint, P(i64), vp)

_d("loom_fc_bucketized", vp, vp, vp, cint, P(C.c_float), vp)
_d("loom_fc_identity", vp, vp, cs, i64, cint, i64, vp)
_d("loom_fc_vocabulary_list", vp, vp, cs, i64, P(cs), i64, i64, vp)
_d("loom_fc_vocabulary_list_int64", vp, vp, cs, i64, P(i64), i64, i64, vp)
_d("loom_fc_vocabulary_file", vp, vp, cs, cs, i64, i64, i64, cint, vp)
_d("loom_fc_hash_bucket", vp, vp, cs, i64, cint, vp)
_d("loom_fc_crossed", vp, vp, cint, P(cs), P(vp), i64, C.c_uint64, vp)
_d("loom_fc_weighted", vp, vp, vp, cs, vp)
_d("loom_fc_indicator", vp, vp, vp, vp)
_d("loom_fc_sequence_categorical", vp, vp, vp, vp)
_d("loom_fc_sequence_numeric", vp, vp, cs, cint, P(i64), C.c_double, cint, vp)
_d("loom_fc_sequence_numeric_normalized", vp, vp, cs, cint, P(i64), C.c_double, cint, vp, vp, vp)
# numeric_column's normalizer_fn from Python: ctypes callbacks cannot return a
# loom_output, so C's loom_fc_normalizer_via_out calls one that writes it.
NORMALIZER_OUT_FN = C.CFUNCTYPE(cint, vp, Output, P(Output), vp)


class NormalizerOut(C.Structure):  # loom_fc_normalizer_out
    _fields_ = [("fn", NORMALIZER_OUT_FN), ("user", vp)]


NORMALIZER_VIA_OUT = C.cast(lib.loom_fc_normalizer_via_out, vp)
_d("loom_fc_embedding_options_default", EmbeddingOptions)
_d("loom_fc_embedding", vp, vp, vp, i64, P(EmbeddingOptions), vp)
_d("loom_fc_num_buckets", i64, vp)
_d("loom_fc_dense_width", i64, vp)
_d("loom_fc_make_parse_example_spec", cint, cint, P(vp), P(cint), P(P(FeatureSpec)), vp)
_d("loom_fc_parse_spec_free", None, cint, P(FeatureSpec))
_d("loom_parsing_receiver_new", vp, cint, P(FeatureSpec), vp)
_d("loom_dnn_linear_combined_options_default", CombinedOptions)
for _n in ("dnn_linear_combined_classifier", "dnn_linear_combined_regressor"):
    _d("loom_%s_new" % _n, vp, P(CombinedOptions), vp)
_d("loom_estimator_set_warm_start_vars", cint, vp, cs, vp)


class VocabInfo(C.Structure):
    _fields_ = [("var_name", cs), ("new_vocab_file", cs), ("new_vocab_size", i64), ("new_vocab", P(cs)),
                ("num_oov_buckets", i64), ("old_vocab_file", cs), ("old_vocab_size", i64), ("old_vocab", P(cs)),
                ("backup_initializer", P(Initializer)), ("axis", i32)]


class WarmStartSettings(C.Structure):
    _fields_ = [("struct_size", u32), ("ckpt_to_initialize_from", cs), ("vars_to_warm_start", cs),
                ("nvar_regexes", i32), ("var_regexes", P(cs)), ("nvocab_infos", i32), ("vocab_infos", P(VocabInfo)),
                ("nprev_names", i32), ("new_names", P(cs)), ("prev_names", P(cs))]


_d("loom_vocab_info_default", VocabInfo)
_d("loom_warm_start_settings_default", WarmStartSettings)
_d("loom_estimator_set_warm_start_settings", cint, vp, P(WarmStartSettings), vp)
_d("loom_latest_checkpoint", cint, cs, C.c_char_p, C.c_size_t, vp)
_d("loom_checkpoint_list_variables", cint, cs, CHECKPOINT_ENTRY_FN, vp, vp)
_d("loom_estimator_latest_checkpoint", cint, vp, C.c_char_p, C.c_size_t, vp)
_d("loom_estimator_get_variable_names", cint, vp, CHECKPOINT_ENTRY_FN, vp, vp)
_d("loom_eval_result_global_step", i64, vp)
_d("loom_dataset_prefetch", vp, vp, i64, vp)
_d("loom_stop_at_step_hook", vp, i64, i64, vp)
_d("loom_hook_free", None, vp)
_d("loom_train_spec_default", TrainSpec)
_d("loom_eval_spec_default", EvalSpec)
_d("loom_latest_exporter", vp, cs, SERVING_INPUT_FN, vp, cint, vp)
_d("loom_best_exporter", vp, cs, SERVING_INPUT_FN, vp, vp, vp, cint, vp)
_d("loom_final_exporter", vp, cs, SERVING_INPUT_FN, vp, vp)
_d("loom_exporter_free", None, vp)
_d("loom_train_and_evaluate", cint, vp, P(TrainSpec), P(EvalSpec), P(vp), vp)
_d("loom_run_job", cint, vp, P(TrainSpec), P(EvalSpec), vp, P(vp), vp)
_d("loom_train_collective", cint, vp, P(TrainSpec), vp)
_d("loom_tae_result_metrics", vp, vp)
_d("loom_tae_result_num_exports", cint, vp)
_d("loom_tae_result_export_name", cs, vp, cint)
_d("loom_tae_result_export_path", cs, vp, cint)
_d("loom_tae_result_free", None, vp)
_d("loom_tf_config_parse", vp, cs, vp)
_d("loom_tf_config_free", None, vp)
_d("loom_tf_config_task_type", cs, vp)
_d("loom_tf_config_task_id", cint, vp)
_d("loom_tf_config_is_chief", cint, vp)
_d("loom_tf_config_num_ps_replicas", cint, vp)
_d("loom_tf_config_num_worker_replicas", cint, vp)
_d("loom_tf_config_global_id", cint, vp)
_d("loom_tf_config_master", cs, vp)
_d("loom_tf_config_num_tasks", cint, vp, cs)
_d("loom_activation_valid", cint, cs)
_d("loom_fc_shared_embeddings", cint, vp, cint, P(vp), i64, P(EmbeddingOptions), P(vp), vp)


class Metric(C.Structure):
    _fields_ = [("value", Output), ("update", Output), ("reset", vp)]


_d("loom_spec_add_eval_metric", cint, vp, cs, Metric)
_d("loom_spec_add_export_output", cint, vp, cs, cint, cint, P(cs), P(Output))
_d("loom_metrics_accuracy", Metric, vp, Output, Output, Output, cs)
_d("loom_metrics_mean", Metric, vp, Output, Output, cs)
_d("loom_losses_sparse_softmax_cross_entropy", Output, vp, Output, Output, Output, cs, cs, cint)
_d("loom_activation", Output, vp, Output, cs, cs)
_d("loom_slice", Output, vp, Output, P(i64), P(i64), cs)
_d("loom_squeeze", Output, vp, Output, cint, P(i64), cs)
_d("loom_expand_dims", Output, vp, Output, i64, cs)
_d("loom_shape", Output, vp, Output, cint, cs)
_d("loom_range", Output, vp, dbl, dbl, dbl, cint, cs)
_d("loom_fill", Output, vp, cint, P(i64), Output, cs)
_d("loom_leaky_relu", Output, vp, Output, dbl, cs)
_d("loom_gelu", Output, vp, Output, cint, cs)


class Conv2DOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("strides", i64 * 2), ("padding", cs), ("dilation_rate", i64 * 2), ("activation", cs),
                ("use_bias", i32), ("kernel_initializer", Initializer), ("bias_initializer", Initializer),
                ("kernel_regularizer", Regularizer), ("bias_regularizer", Regularizer), ("trainable", i32),
                ("reuse", i32)]


class DropoutOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("training", i32), ("training_flag", Output), ("seed", i64)]


_d("loom_conv2d_options_default", Conv2DOptions)
_d("loom_layers_conv2d", Output, vp, Output, i64, P(i64), P(Conv2DOptions), cs)
_d("loom_layers_max_pooling2d", Output, vp, Output, P(i64), P(i64), cs, cs)
_d("loom_layers_average_pooling2d", Output, vp, Output, P(i64), P(i64), cs, cs)
_d("loom_layers_flatten", Output, vp, Output, cs)
_d("loom_dropout_options_default", DropoutOptions)
_d("loom_layers_dropout", Output, vp, Output, dbl, P(DropoutOptions), cs)


# ---- tf.data sources, the traced map and tf.io (loom.tf.data, loom.tf.io)
class RecordsOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("format", i32), ("compression", i32), ("record_bytes", i64),
                ("header_bytes", i64), ("footer_bytes", i64), ("name", cs)]


class CsvColumn(C.Structure):
    _fields_ = [("name", cs), ("dtype", cint), ("default_value", cs), ("select", i32), ("separator", C.c_char)]


class CsvOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("header", i32), ("delimiter", C.c_char), ("ncolumns", i32),
                ("columns", P(CsvColumn)), ("label_name", cs)]


_d("loom_records_options_default", RecordsOptions)
_d("loom_dataset_records", vp, cint, P(cs), P(RecordsOptions), vp)
_d("loom_dataset_map_graph", vp, vp, vp, cint, P(Output), cint, P(cs), P(Output), P(i32), cs, vp)
_d("loom_csv_options_default", CsvOptions)
_d("loom_dataset_csv", vp, cint, P(cs), P(CsvOptions), vp)
_d("loom_dataset_cache", vp, vp, cs, vp)
_d("loom_dataset_component_dtype", cint, vp, cint)
_d("loom_dataset_component_shape", cint, vp, cint, P(i64))
_d("loom_dataset_label_index", cint, vp)
_d("loom_dataset_component_row_splits", cint, vp, cint)
_d("loom_tfrecord_writer_new_compressed", vp, cs, cint, vp)
_d("loom_tfrecord_writer_write", cint, vp, C.c_char_p, C.c_size_t, vp)
_d("loom_tfrecord_writer_close", cint, vp, vp)
_d("loom_parse_example_num_outputs", cint, cint, P(FeatureSpec))
_d("loom_parse_example", cint, vp, Output, cint, P(FeatureSpec), cint, P(Output), cs)
_d("loom_as_string", Output, vp, Output, cs)
_d("loom_string_to_hash_bucket_fast", Output, vp, Output, i64, cs)
_d("loom_decode_raw", Output, vp, Output, cint, cint, cs)
_d("loom_string_to_number", Output, vp, Output, cint, cs)
_d("loom_decode_csv", cint, vp, Output, cint, P(vp), C.c_char, cint, cs, cint, P(i64), P(Output), cs)
_d("loom_dataset_skip", vp, vp, i64, vp)
_d("loom_dataset_shard", vp, vp, i64, i64, vp)
_d("loom_dataset_filter_graph", vp, vp, vp, cint, P(Output), Output, vp)
_d("loom_dataset_interleave", vp, cint, P(vp), i64, i64, vp)
_d("loom_dataset_zip", vp, cint, P(vp), vp)


# heads (loom_head.h)
class BinaryHeadOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("weight_column", cs), ("nthresholds", i32), ("thresholds", P(dbl)),
                ("nlabel_vocabulary", i32), ("label_vocabulary", P(cs)), ("loss_reduction", cint), ("name", cs)]


class MultiClassHeadOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("n_classes", i64), ("weight_column", cs), ("nlabel_vocabulary", i32),
                ("label_vocabulary", P(cs)), ("loss_reduction", cint), ("name", cs)]


class MultiLabelHeadOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("n_classes", i64), ("weight_column", cs), ("nthresholds", i32),
                ("thresholds", P(dbl)), ("nlabel_vocabulary", i32), ("label_vocabulary", P(cs)),
                ("loss_reduction", cint), ("name", cs)]


class RegressionHeadOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("label_dimension", i64), ("weight_column", cs), ("loss_reduction", cint),
                ("compute_full_loss", i32), ("name", cs)]


HEAD_TRAIN_OP_FN = C.CFUNCTYPE(vp, vp, Output, vp)
_d("loom_binary_head_options_default", BinaryHeadOptions)
_d("loom_multi_class_head_options_default", MultiClassHeadOptions)
_d("loom_multi_label_head_options_default", MultiLabelHeadOptions)
_d("loom_regression_head_options_default", RegressionHeadOptions)
_d("loom_binary_class_head_new", vp, P(BinaryHeadOptions), vp)
_d("loom_multi_class_head_new", vp, P(MultiClassHeadOptions), vp)
_d("loom_multi_label_head_new", vp, P(MultiLabelHeadOptions), vp)
for _n in ("regression", "poisson_regression", "logistic_regression"):
    _d("loom_%s_head_new" % _n, vp, P(RegressionHeadOptions), vp)
_d("loom_multi_head_new", vp, cint, P(vp), P(dbl), vp)
_d("loom_head_free", None, vp)
_d("loom_head_logits_dimension", i64, vp)
_d("loom_head_name", cs, vp)
_d("loom_head_create_spec", cint, vp, vp, vp, cint, Output, Output, HEAD_TRAIN_OP_FN, vp, vp, vp)
_d("loom_head_create_spec_multi", cint, vp, vp, vp, cint, Output, P(Output), HEAD_TRAIN_OP_FN, vp, vp, vp)
HEAD_PREDICTION_FN = C.CFUNCTYPE(None, cs, Output, vp)
_d("loom_head_loss", Output, vp, vp, vp, Output, P(Output), vp)
_d("loom_head_predictions", cint, vp, vp, Output, HEAD_PREDICTION_FN, vp, vp)
