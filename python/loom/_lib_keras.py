"""ctypes declarations of loom's public C API used by loom.tf's Keras layer,
Python hooks and learning-rate schedules: loom_sequential.h, loom_hooks.h,
the schedules of loom_train.h. Struct layouts mirror the headers field by
field (tests/test_layout.py's rule: each struct_size is checked in
test_tf_keras.py against the size the C library reports)."""
import ctypes as C

from . import _lib as L
from ._lib import lib, vp, cs, i32, i64, u32, dbl, cint, P, Output, Initializer, Regularizer, DenseOptions, \
    Conv2DOptions

_d = L._d
SEED_NONE = -(1 << 63)


# ---- loom_sequential.h
class BatchNormOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("axis", i32), ("momentum", dbl), ("epsilon", dbl), ("center", i32),
                ("scale", i32), ("beta_initializer", Initializer), ("gamma_initializer", Initializer),
                ("moving_mean_initializer", Initializer), ("moving_variance_initializer", Initializer),
                ("beta_regularizer", Regularizer), ("gamma_regularizer", Regularizer), ("training", i32),
                ("training_flag", Output), ("trainable", i32), ("reuse", i32)]


SEQ_OPTIMIZER_FN = C.CFUNCTYPE(vp, vp, vp)


class SeqCompileOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("loss", cs), ("from_logits", i32), ("optimizer", cs),
                ("learning_rate", dbl), ("optimizer_fn", SEQ_OPTIMIZER_FN), ("optimizer_user", vp),
                ("nmetrics", i32), ("metrics", P(cs)), ("seed", i64), ("num_threads", i32)]


class SeqFitOptions(C.Structure):
    _fields_ = [("struct_size", u32), ("epochs", i64), ("steps_per_epoch", i64), ("verbose", i32)]


_d("loom_batch_norm_options_default", BatchNormOptions)
_d("loom_sequential_new", vp, vp)
_d("loom_sequential_free", None, vp)
_d("loom_sequential_set_input", cint, vp, cs, cint, cint, P(i64), vp)
_d("loom_sequential_add_dense", cint, vp, i64, P(DenseOptions), cs, vp)
_d("loom_sequential_add_conv2d", cint, vp, i64, P(i64), P(Conv2DOptions), cs, vp)
_d("loom_sequential_add_max_pooling2d", cint, vp, P(i64), P(i64), cs, cs, vp)
_d("loom_sequential_add_average_pooling2d", cint, vp, P(i64), P(i64), cs, cs, vp)
_d("loom_sequential_add_flatten", cint, vp, cs, vp)
_d("loom_sequential_add_reshape", cint, vp, cint, P(i64), cs, vp)
_d("loom_sequential_add_dropout", cint, vp, dbl, i64, cs, vp)
_d("loom_sequential_add_batch_norm", cint, vp, P(BatchNormOptions), cs, vp)
_d("loom_sequential_add_embedding", cint, vp, i64, i64, P(Initializer), cs, vp)
_d("loom_sequential_num_layers", cint, vp)
_d("loom_sequential_layer_name", cs, vp, cint)
_d("loom_sequential_layer_kind", cs, vp, cint)
_d("loom_sequential_compile_options_default", SeqCompileOptions)
_d("loom_sequential_compile", cint, vp, P(SeqCompileOptions), vp)
_d("loom_sequential_num_variables", cint, vp)
_d("loom_sequential_variable_name", cs, vp, cint)
_d("loom_sequential_variable_shape", cint, vp, cint, P(i64))
_d("loom_sequential_get_variable", cint, vp, cs, P(vp), vp)
_d("loom_sequential_set_variable", cint, vp, cs, vp, vp)
_d("loom_sequential_save_weights", cint, vp, cs, vp)
_d("loom_sequential_fit_options_default", SeqFitOptions)
_d("loom_sequential_fit", cint, vp, vp, P(SeqFitOptions), P(vp), vp)
_d("loom_sequential_evaluate", cint, vp, vp, i64, P(vp), vp)
_d("loom_sequential_predict", cint, vp, vp, i64, P(vp), vp)
_d("loom_sequential_to_estimator", vp, vp, cs, P(L.RunConfig), vp)
SEQ_SERVING_INPUT_FN = L.SERVING_INPUT_FN(C.cast(lib.loom_sequential_serving_input_fn, vp).value)
_d("loom_init_ones", Initializer)
_d("loom_init_random_uniform", Initializer, dbl, dbl, i64)

# ---- loom_hooks.h
class HookRunArgs(C.Structure):
    _fields_ = [("nfetches", i32), ("fetches", P(Output)), ("nfeeds", i32), ("feeds", P(Output)),
                ("feed_values", P(vp)), ("ntargets", i32), ("targets", P(vp))]


HOOK_BEGIN = C.CFUNCTYPE(cint, vp, vp, vp)
HOOK_AFTER_CREATE = C.CFUNCTYPE(cint, vp, vp, vp)
HOOK_BEFORE_RUN = C.CFUNCTYPE(cint, vp, vp, P(HookRunArgs), vp)
HOOK_AFTER_RUN = C.CFUNCTYPE(cint, vp, vp, P(vp), vp)
HOOK_END = C.CFUNCTYPE(cint, vp, vp, vp)
HOOK_DESTROY = C.CFUNCTYPE(None, vp)


class HookOps(C.Structure):
    _fields_ = [("begin", HOOK_BEGIN), ("after_create_session", HOOK_AFTER_CREATE), ("before_run", HOOK_BEFORE_RUN),
                ("after_run", HOOK_AFTER_RUN), ("end", HOOK_END), ("destroy", HOOK_DESTROY)]


_d("loom_hook_new", vp, P(HookOps), vp, cs)
_d("loom_hook_context_request_stop", None, vp)
_d("loom_hook_context_stop_requested", cint, vp)
_d("loom_logging_tensor_hook", vp, cint, P(cs), P(Output), i64, dbl, cint, vp)
_d("loom_step_counter_hook", vp, i64, dbl, vp, vp)
_d("loom_nan_tensor_hook", vp, Output, cint, vp)
_d("loom_checkpoint_saver_hook", vp, cs, dbl, i64, vp, cint, vp, cint, vp, vp, vp)
_d("loom_summary_saver_hook", vp, i64, dbl, vp, vp)
_d("loom_profiler_hook", vp, i64, dbl, cs, vp)
_d("loom_global_step_waiter_hook", vp, i64, vp)
_d("loom_final_ops_hook", vp, cint, P(Output), vp)
_d("loom_final_ops_hook_values", P(vp), vp, P(cint))
_d("loom_event_writer_new", vp, cs, cs, vp)
_d("loom_event_writer_free", None, vp)
_d("loom_spec_add_hook", cint, vp, cint, vp)
_d("loom_graph_find", vp, vp, cs)
_d("loom_get_global_step", vp, vp)

# ---- learning-rate schedules (loom_train.h)
_d("loom_exponential_decay", Output, vp, dbl, Output, dbl, dbl, cint, cs)
_d("loom_piecewise_constant", Output, vp, Output, cint, P(dbl), P(dbl), cs)
_d("loom_polynomial_decay", Output, vp, dbl, Output, dbl, dbl, dbl, cint, cs)
_d("loom_cosine_decay", Output, vp, dbl, Output, dbl, dbl, cs)
_d("loom_optimizer_momentum", vp, Output, vp)
_d("loom_optimizer_rmsprop", vp, Output, vp)
_d("loom_optimizer_ftrl", vp, Output, vp)
_d("loom_optimizer_adadelta", vp, Output, vp)
_d("loom_get_or_create_global_step", vp, vp)
_d("loom_variable_output", Output, vp)
_d("loom_floor", Output, vp, Output, cs) if hasattr(lib, "loom_floor") else None
