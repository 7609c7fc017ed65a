/* loom_train.h - training: variables (tf.get_variable / tf.Variable),
 * initializers, in-place assign and scatter ops, optimizers
 * (tf.train.*Optimizer) as ops, learning-rate schedules, gradient clipping,
 * and checkpoints (tf.train.Saver).
 *
 * Variables are TF1 "ref" variables: a VariableV2 node whose output is the
 * variable's buffer in the session's variable store (one store per session,
 * created on first use, keyed by the variable's name). Ops that read the
 * output read the current value with no copy; Assign, AssignAdd, Scatter and
 * Apply nodes write it in place and their output 0 is the same buffer. A
 * run that reads a variable that was never assigned (by its initializer, a
 * checkpoint restore or loom_session_assign_variable) fails with
 * FAILED_PRECONDITION "Attempting to use uninitialized value <name>".
 *
 * Graph builders follow the sticky-error rule of loom_graph.h: on failure the
 * graph records the first error and the call returns a harmless placeholder
 * (a dummy variable, a dummy output, or NULL for loom_node *).
 *
 * Ownership: variables (loom_variable *) and nodes (loom_node *) returned
 * here are owned by their graph and valid until loom_graph_free; the
 * per-function comments say so and name the exceptions. */
#ifndef LOOM_TRAIN_H
#define LOOM_TRAIN_H
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_autodiff.h"
#include "loom_checkpoint.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== *
 * Initializers (tf.initializers.*). Plain values: build one with the
 * functions below and pass its address. Seeds follow TF's graph/op seed
 * rules (loom_graph_get_seed); LOOM_SEED_NONE = no op seed.
 * ===================================================================== */
#define LOOM_SEED_NONE INT64_MIN

typedef enum loom_init_kind {
  LOOM_INIT_DEFAULT = 0, /* glorot_uniform for float variables, zeros otherwise (tf.get_variable) */
  LOOM_INIT_ZEROS = 1,
  LOOM_INIT_ONES = 2,
  LOOM_INIT_CONSTANT = 3,
  LOOM_INIT_RANDOM_UNIFORM = 4,
  LOOM_INIT_RANDOM_NORMAL = 5,
  LOOM_INIT_TRUNCATED_NORMAL = 6,
  LOOM_INIT_VARIANCE_SCALING = 7
} loom_init_kind;

typedef enum loom_fan_mode { LOOM_FAN_IN = 0, LOOM_FAN_OUT = 1, LOOM_FAN_AVG = 2 } loom_fan_mode;
typedef enum loom_init_distribution {
  LOOM_DIST_TRUNCATED_NORMAL = 0,   /* stddev = sqrt(scale/n) / .87962566103423978 */
  LOOM_DIST_UNTRUNCATED_NORMAL = 1, /* stddev = sqrt(scale/n) */
  LOOM_DIST_UNIFORM = 2             /* limit = sqrt(3*scale/n) */
} loom_init_distribution;

typedef struct loom_initializer {
  int32_t kind;         /* loom_init_kind */
  double a, b;          /* CONSTANT: a = value; RANDOM_UNIFORM: [a, b); *NORMAL: mean a, stddev b;
                           VARIANCE_SCALING: scale a */
  int32_t mode;         /* VARIANCE_SCALING: loom_fan_mode */
  int32_t distribution; /* VARIANCE_SCALING: loom_init_distribution */
  int64_t seed;         /* op seed, or LOOM_SEED_NONE */
} loom_initializer;

LOOM_API loom_initializer loom_init_zeros(void);
LOOM_API loom_initializer loom_init_ones(void);
LOOM_API loom_initializer loom_init_constant(double value);
/* TF defaults: uniform [0, 1), normal/truncated mean 0 stddev 1. */
LOOM_API loom_initializer loom_init_random_uniform(double minval, double maxval, int64_t seed);
LOOM_API loom_initializer loom_init_random_normal(double mean, double stddev, int64_t seed);
LOOM_API loom_initializer loom_init_truncated_normal(double mean, double stddev, int64_t seed);
/* fan_in/fan_out as TF: rank 0 -> 1,1; rank 1 -> d0,d0; rank 2 -> d0,d1;
 * rank >= 3 (conv kernels HWIO) -> prod(d[:-2])*d[-2], prod(d[:-2])*d[-1]. */
LOOM_API loom_initializer loom_init_variance_scaling(double scale, loom_fan_mode mode, loom_init_distribution dist,
                                                     int64_t seed);
/* glorot_uniform = variance_scaling(1, FAN_AVG, UNIFORM): limit sqrt(6/(fan_in+fan_out)) */
LOOM_API loom_initializer loom_init_glorot_uniform(int64_t seed);
/* glorot_normal = variance_scaling(1, FAN_AVG, TRUNCATED_NORMAL) */
LOOM_API loom_initializer loom_init_glorot_normal(int64_t seed);
/* he_uniform = variance_scaling(2, FAN_IN, UNIFORM) */
LOOM_API loom_initializer loom_init_he_uniform(int64_t seed);
/* he_normal = variance_scaling(2, FAN_IN, TRUNCATED_NORMAL) */
LOOM_API loom_initializer loom_init_he_normal(int64_t seed);
/* Builds the initial-value tensor of the given shape (a node in g). */
LOOM_API loom_output loom_initializer_build(loom_graph *g, const loom_initializer *init, loom_dtype dtype, int ndim,
                                            const int64_t *dims, const char *name);

/* ===================================================================== *
 * Variables
 * ===================================================================== */
/* loom_variable: declared in loom_checkpoint.h (C99 allows one typedef per name). */

/* Collection names (TF's GraphKeys values). */
#define LOOM_GLOBAL_VARIABLES "variables"
#define LOOM_TRAINABLE_VARIABLES "trainable_variables"
#define LOOM_LOCAL_VARIABLES "local_variables"
#define LOOM_METRIC_VARIABLES "metric_variables"
#define LOOM_MODEL_VARIABLES "model_variables"
#define LOOM_GLOBAL_STEP "global_step"
#define LOOM_UPDATE_OPS "update_ops"
#define LOOM_REGULARIZATION_LOSSES "regularization_losses"
#define LOOM_SUMMARIES "summaries"
#define LOOM_LOSSES "losses"

/* Bits for loom_get_variable_ex's collections argument. */
enum {
  LOOM_COLL_GLOBAL = 1u << 0, /* GLOBAL_VARIABLES */
  LOOM_COLL_LOCAL = 1u << 1,  /* LOCAL_VARIABLES */
  LOOM_COLL_METRIC = 1u << 2, /* METRIC_VARIABLES */
  LOOM_COLL_MODEL = 1u << 3   /* MODEL_VARIABLES */
};

/* Reuse modes of a variable scope. */
enum { LOOM_REUSE_NONE = 0, LOOM_REUSE_TRUE = 1, LOOM_REUSE_AUTO = 2 };

/* tf.variable_scope(name, reuse=...): pushes a variable scope (variables
 * created inside are named "outer/name/var") and a name scope for ops (made
 * unique: "name", "name_1" ... like TF). reuse is inherited by nested scopes
 * (TRUE or AUTO stays on). Pop with loom_variable_scope_pop. */
LOOM_API void loom_variable_scope_push(loom_graph *g, const char *name, int reuse);
LOOM_API void loom_variable_scope_pop(loom_graph *g);
/* Full variable-scope prefix ("" at top level: static). Owned by g; valid
 * until the next loom_variable_scope_push / pop or loom_graph_free. */
LOOM_API const char *loom_variable_scope_name(loom_graph *g);

/* tf.get_variable: full name = "<variable scope>/<name>". Without reuse an
 * existing name is an error (ALREADY_EXISTS "Variable dense/kernel already
 * exists, disallowed. Did you mean to set reuse=True ..."); with reuse a
 * missing name is an error (NOT_FOUND "Variable dense/kernel does not exist
 * ..."), and the shape and dtype must match. initializer NULL = default
 * (glorot_uniform for floats, zeros otherwise). The variable is in
 * GLOBAL_VARIABLES, and TRAINABLE_VARIABLES when trainable != 0. dims must be
 * fully known. The variable is owned by g; valid until loom_graph_free. */
LOOM_API loom_variable *loom_get_variable(loom_graph *g, const char *name, loom_dtype dtype, int ndim,
                                          const int64_t *dims, const loom_initializer *initializer, int trainable);
/* Same with explicit collections (LOOM_COLL_* bits; 0 = GLOBAL). Owned by
 * g; valid until loom_graph_free. */
LOOM_API loom_variable *loom_get_variable_ex(loom_graph *g, const char *name, loom_dtype dtype, int ndim,
                                             const int64_t *dims, const loom_initializer *initializer,
                                             int trainable, uint32_t collections);
/* tf.Variable(initial_value, name=...): name made unique under the current
 * name scope; shape and dtype from initial_value (fully known shape).
 * Owned by g; valid until loom_graph_free. */
LOOM_API loom_variable *loom_variable_new(loom_graph *g, loom_output initial_value, int trainable,
                                          uint32_t collections, const char *name);
/* A variable of g by full name (NULL when absent); owned by g, valid until
 * loom_graph_free. */
LOOM_API loom_variable *loom_graph_variable(loom_graph *g, const char *name);

/* The value to use in the graph (the VariableV2 node's output). */
LOOM_API loom_output loom_variable_output(const loom_variable *v);
/* The VariableV2 node and the full name: owned by v's graph; valid until
 * loom_graph_free ("" for v NULL: static). */
LOOM_API loom_node *loom_variable_node(const loom_variable *v);
LOOM_API const char *loom_variable_name(const loom_variable *v);
LOOM_API loom_dtype loom_variable_dtype(const loom_variable *v);
/* Copies the dims (capacity LOOM_MAX_DIMS); returns the rank. */
LOOM_API int loom_variable_dims(const loom_variable *v, int64_t *dims);
LOOM_API int loom_variable_trainable(const loom_variable *v);
/* The Assign node that sets the initial value ("<name>/Assign"); owned by
 * v's graph; valid until loom_graph_free. */
LOOM_API loom_node *loom_variable_initializer_node(const loom_variable *v);
LOOM_API loom_output loom_variable_initial_value(const loom_variable *v);

/* Collections. Variable collections hold loom_variable *; the others hold
 * outputs (nodes are stored as {node, 0}). Returned arrays are owned by g
 * and valid until that collection changes (an add may move it) or
 * loom_graph_free; the variables in them live until loom_graph_free.
 * Unknown collections are empty (NULL, *n = 0). */
LOOM_API void loom_add_variable_to_collection(loom_graph *g, const char *collection, loom_variable *v);
/* Owned by g; valid until this collection changes or loom_graph_free. */
LOOM_API loom_variable *const *loom_get_variable_collection(loom_graph *g, const char *collection, int *n);
LOOM_API void loom_add_to_collection(loom_graph *g, const char *collection, loom_output value);
LOOM_API void loom_add_node_to_collection(loom_graph *g, const char *collection, loom_node *node);
/* Owned by g; valid until this collection changes or loom_graph_free. */
LOOM_API const loom_output *loom_get_collection(loom_graph *g, const char *collection, int *n);
/* The GLOBAL / TRAINABLE / LOCAL variable collections: owned by g; valid
 * until that collection changes or loom_graph_free. */
LOOM_API loom_variable *const *loom_global_variables(loom_graph *g, int *n);
LOOM_API loom_variable *const *loom_trainable_variables(loom_graph *g, int *n);
LOOM_API loom_variable *const *loom_local_variables(loom_graph *g, int *n);

/* A NoOp node (run it as a target) depending on the initializers of the
 * listed variables / of all GLOBAL_VARIABLES / of all LOCAL_VARIABLES.
 * Owned by g; valid until loom_graph_free. */
LOOM_API loom_node *loom_variables_initializer(loom_graph *g, int n, loom_variable *const *vars, const char *name);
LOOM_API loom_node *loom_global_variables_initializer(loom_graph *g);
LOOM_API loom_node *loom_local_variables_initializer(loom_graph *g);

/* tf.train.get_or_create_global_step: int64 scalar "global_step", zero
 * initialised, not trainable, in GLOBAL_VARIABLES and GLOBAL_STEP. Owned
 * by g; valid until loom_graph_free. */
LOOM_API loom_variable *loom_get_or_create_global_step(loom_graph *g);
/* The existing global step or NULL; owned by g, valid until loom_graph_free. */
LOOM_API loom_variable *loom_get_global_step(loom_graph *g);

/* Session side (loom_session_read_variable, loom_session_assign_variable,
 * loom_session_variable_initialized): loom_checkpoint.h. */

/* ===================================================================== *
 * Raw variable ops. ref must be a variable (a VariableV2 output or the
 * output of another in-place op on it). Output 0 is ref (updated).
 * ===================================================================== */
/* A raw VariableV2 node (no initializer, no collections). */
LOOM_API loom_output loom_variable_v2(loom_graph *g, loom_dtype dtype, int ndim, const int64_t *dims, const char *name);
/* ref = value (same shape and dtype). */
LOOM_API loom_output loom_assign(loom_graph *g, loom_output ref, loom_output value, const char *name);
LOOM_API loom_output loom_assign_add(loom_graph *g, loom_output ref, loom_output value, const char *name);
LOOM_API loom_output loom_assign_sub(loom_graph *g, loom_output ref, loom_output value, const char *name);
/* ref *= value elementwise (same shape; loom's op, used for Adam's beta powers). */
LOOM_API loom_output loom_assign_mul(loom_graph *g, loom_output ref, loom_output value, const char *name);
/* Row updates: indices [n] (int32/int64) of ref's first dimension, updates
 * [n, ref.dims[1:]...]. Update: last write wins; Add/Sub accumulate duplicates. */
LOOM_API loom_output loom_var_scatter_update(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                                         const char *name);
LOOM_API loom_output loom_var_scatter_add(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                                      const char *name);
LOOM_API loom_output loom_var_scatter_sub(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                                      const char *name);

/* Raw optimizer ops (TF's training_ops, float32). Scalars are rank-0 float32
 * outputs. grad has var's shape; the sparse forms take indices [n] and
 * grad rows [n, var.dims[1:]...] and touch only those rows (duplicate indices
 * are summed first, like tf.train.Optimizer). */
LOOM_API loom_output loom_apply_gradient_descent(loom_graph *g, loom_output var, loom_output alpha, loom_output delta,
                                                 const char *name);
LOOM_API loom_output loom_sparse_apply_gradient_descent(loom_graph *g, loom_output var, loom_output alpha,
                                                        loom_output grad, loom_output indices, const char *name);
LOOM_API loom_output loom_apply_momentum(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                         loom_output grad, loom_output momentum, int use_nesterov, const char *name);
LOOM_API loom_output loom_sparse_apply_momentum(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                                loom_output grad, loom_output indices, loom_output momentum,
                                                int use_nesterov, const char *name);
LOOM_API loom_output loom_apply_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                        loom_output grad, const char *name);
LOOM_API loom_output loom_sparse_apply_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                               loom_output grad, loom_output indices, const char *name);
LOOM_API loom_output loom_apply_adam(loom_graph *g, loom_output var, loom_output m, loom_output v,
                                     loom_output beta1_power, loom_output beta2_power, loom_output lr,
                                     loom_output beta1, loom_output beta2, loom_output epsilon, loom_output grad,
                                     int use_nesterov, const char *name);
/* lazy = 0: TF's AdamOptimizer sparse semantics (m and v decay on every row;
 * var moves on every row); lazy != 0: LazyAdam (only the given rows). */
LOOM_API loom_output loom_sparse_apply_adam(loom_graph *g, loom_output var, loom_output m, loom_output v,
                                            loom_output beta1_power, loom_output beta2_power, loom_output lr,
                                            loom_output beta1, loom_output beta2, loom_output epsilon,
                                            loom_output grad, loom_output indices, int lazy, const char *name);
LOOM_API loom_output loom_apply_ftrl(loom_graph *g, loom_output var, loom_output accum, loom_output linear,
                                     loom_output grad, loom_output lr, loom_output l1, loom_output l2,
                                     loom_output l2_shrinkage, loom_output lr_power, const char *name);
LOOM_API loom_output loom_sparse_apply_ftrl(loom_graph *g, loom_output var, loom_output accum, loom_output linear,
                                            loom_output grad, loom_output indices, loom_output lr, loom_output l1,
                                            loom_output l2, loom_output l2_shrinkage, loom_output lr_power,
                                            const char *name);
/* centered: 0, or LOOM_RMSPROP_* flags or'd: CENTERED (ApplyCenteredRMSProp; mg is used only then, pass
 * {NULL,0} otherwise), KERAS_LEGACY (Keras' legacy RMSprop without momentum: var -= lr * grad /
 * (sqrt(ms) + epsilon), epsilon outside the square root, and a sparse update decays every row's ms (and
 * mg) by rho, not only the given rows'; TF's kernels put epsilon inside: lr * grad / sqrt(ms + epsilon)). */
#define LOOM_RMSPROP_CENTERED 1
#define LOOM_RMSPROP_KERAS_LEGACY 2
LOOM_API loom_output loom_apply_rmsprop(loom_graph *g, loom_output var, loom_output mg, loom_output ms,
                                        loom_output mom, loom_output lr, loom_output rho, loom_output momentum,
                                        loom_output epsilon, loom_output grad, int centered, const char *name);
LOOM_API loom_output loom_sparse_apply_rmsprop(loom_graph *g, loom_output var, loom_output mg, loom_output ms,
                                               loom_output mom, loom_output lr, loom_output rho,
                                               loom_output momentum, loom_output epsilon, loom_output grad,
                                               loom_output indices, int centered, const char *name);
LOOM_API loom_output loom_apply_adadelta(loom_graph *g, loom_output var, loom_output accum, loom_output accum_update,
                                         loom_output lr, loom_output rho, loom_output epsilon, loom_output grad,
                                         const char *name);
LOOM_API loom_output loom_sparse_apply_adadelta(loom_graph *g, loom_output var, loom_output accum,
                                                loom_output accum_update, loom_output lr, loom_output rho,
                                                loom_output epsilon, loom_output grad, loom_output indices,
                                                const char *name);
/* ProximalGradientDescent (TF's FOBOS update): prox = var - alpha * grad; var = sign(prox) * max(|prox| -
 * alpha * l1, 0) / (1 + alpha * l2) when l1 > 0, else prox / (1 + alpha * l2). */
LOOM_API loom_output loom_apply_proximal_gradient_descent(loom_graph *g, loom_output var, loom_output alpha,
                                                          loom_output l1, loom_output l2, loom_output delta,
                                                          const char *name);
LOOM_API loom_output loom_sparse_apply_proximal_gradient_descent(loom_graph *g, loom_output var, loom_output alpha,
                                                                 loom_output l1, loom_output l2, loom_output grad,
                                                                 loom_output indices, const char *name);
/* ProximalAdagrad: accum += grad^2, then the proximal update above with the rate lr / sqrt(accum). */
LOOM_API loom_output loom_apply_proximal_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                                 loom_output l1, loom_output l2, loom_output grad, const char *name);
LOOM_API loom_output loom_sparse_apply_proximal_adagrad(loom_graph *g, loom_output var, loom_output accum,
                                                        loom_output lr, loom_output l1, loom_output l2,
                                                        loom_output grad, loom_output indices, const char *name);
/* AdagradDA: ga += grad, gg += grad^2; with T = global_step (an int32 or int64 scalar output):
 * var = -sign(ga) * lr * max(|ga| - T * l1, 0) / (l2 * T * lr + sqrt(gg)) (l1 = 0: -lr * ga / (...)). */
LOOM_API loom_output loom_apply_adagrad_da(loom_graph *g, loom_output var, loom_output gradient_accumulator,
                                           loom_output gradient_squared_accumulator, loom_output grad,
                                           loom_output lr, loom_output l1, loom_output l2, loom_output global_step,
                                           const char *name);
LOOM_API loom_output loom_sparse_apply_adagrad_da(loom_graph *g, loom_output var, loom_output gradient_accumulator,
                                                  loom_output gradient_squared_accumulator, loom_output grad,
                                                  loom_output indices, loom_output lr, loom_output l1,
                                                  loom_output l2, loom_output global_step, const char *name);
/* The gradient scale of one of the raw optimizer ops above (apply: the node of its output, e.g. an
 * optimizer's apply op): the op then updates with grad * scale in place of grad, the product rounded to
 * float32 element by element as the kernel reads it, so the result is bit for bit the update fed a gradient
 * multiplied by scale beforehand (a sparse op sums the rows of a repeated index first and scales the sum:
 * the same bits when scale is a power of two, within float rounding otherwise). The default, 1, reads grad
 * as it is (the unscaled kernels). Data-parallel training uses it to average summed gradients inside the
 * update (scale 1/N) instead of in a pass of its own. scale must be finite and > 0; INVALID_ARGUMENT
 * naming the node for another op or scale. Set it before the graph's first run (a session reads it at
 * every run, but a captured device graph keeps the value it was captured with). The getter returns 1 for
 * the default and for a node that is not an optimizer op. */
LOOM_API loom_code loom_apply_set_gradient_scale(loom_node *apply, float scale, loom_status *st);
LOOM_API float loom_apply_gradient_scale(const loom_node *apply);

/* ===================================================================== *
 * Optimizers (tf.train.*Optimizer). learning_rate is a float32 scalar
 * output (a constant, a placeholder or a schedule below). Options may be
 * NULL (the defaults shown). Slots are variables named like TF
 * ("<var>/Adam", "<var>/Adam_1", ...), non-trainable, in GLOBAL_VARIABLES.
 * ===================================================================== */
typedef struct loom_optimizer loom_optimizer;

typedef struct loom_momentum_options {
  uint32_t struct_size; /* sizeof: set by loom_momentum_options_default() */
  double momentum;      /* 0.9 */
  int32_t use_nesterov; /* 0 */
} loom_momentum_options;
typedef struct loom_adagrad_options {
  uint32_t struct_size; /* sizeof: set by loom_adagrad_options_default() */
  double initial_accumulator_value; /* 0.1 */
} loom_adagrad_options;
typedef struct loom_adam_options {
  uint32_t struct_size; /* sizeof: set by loom_adam_options_default() */
  double beta1, beta2, epsilon; /* 0.9, 0.999, 1e-8 */
  int32_t lazy;                 /* 0; 1 = LazyAdam for sparse gradients */
} loom_adam_options;
typedef struct loom_ftrl_options {
  uint32_t struct_size; /* sizeof: set by loom_ftrl_options_default() */
  double learning_rate_power;       /* -0.5 */
  double initial_accumulator_value; /* 0.1 */
  double l1, l2, l2_shrinkage;      /* 0, 0, 0 */
} loom_ftrl_options;
/* RMSProp's mean-square slot ("rms") starts at initial_rms_value: 1.0 by
 * default, as tf.compat.v1.train.RMSPropOptimizer; Keras' RMSprop (and TF
 * 2's canned estimators, which use it) start it at 0.0. keras_legacy: the
 * update of Keras' legacy RMSprop without momentum (tf.keras.optimizers.
 * legacy.RMSprop, what TF 2's canned estimators build for "RMSProp"): epsilon
 * outside the square root, and sparse gradients decay every row's mean
 * square (LOOM_RMSPROP_KERAS_LEGACY above); it needs momentum 0 (that
 * optimizer uses TF's kernels when momentum is set). */
typedef struct loom_rmsprop_options {
  uint32_t struct_size; /* sizeof: set by loom_rmsprop_options_default() */
  double decay, momentum, epsilon; /* 0.9, 0, 1e-10 */
  int32_t centered;                /* 0 */
  double initial_rms_value;        /* 1.0 (TF 1); 0.0 for Keras' RMSprop */
  int32_t keras_legacy;            /* 0 */
} loom_rmsprop_options;
typedef struct loom_adadelta_options {
  uint32_t struct_size; /* sizeof: set by loom_adadelta_options_default() */
  double rho, epsilon; /* 0.95, 1e-8 */
} loom_adadelta_options;
typedef struct loom_proximal_gradient_descent_options {
  uint32_t struct_size; /* sizeof: set by loom_proximal_gradient_descent_options_default() */
  double l1, l2;        /* l1/l2_regularization_strength: 0, 0 */
} loom_proximal_gradient_descent_options;
typedef struct loom_proximal_adagrad_options {
  uint32_t struct_size;             /* sizeof: set by loom_proximal_adagrad_options_default() */
  double initial_accumulator_value; /* 0.1 */
  double l1, l2;                    /* 0, 0 */
} loom_proximal_adagrad_options;
typedef struct loom_adagrad_da_options {
  uint32_t struct_size;                              /* sizeof: set by loom_adagrad_da_options_default() */
  double initial_gradient_squared_accumulator_value; /* 0.1 */
  double l1, l2;                                     /* 0, 0 */
} loom_adagrad_da_options;

LOOM_API loom_momentum_options loom_momentum_options_default(void);
LOOM_API loom_adagrad_options loom_adagrad_options_default(void);
LOOM_API loom_adam_options loom_adam_options_default(void);
LOOM_API loom_ftrl_options loom_ftrl_options_default(void);
LOOM_API loom_rmsprop_options loom_rmsprop_options_default(void);
LOOM_API loom_adadelta_options loom_adadelta_options_default(void);
LOOM_API loom_proximal_gradient_descent_options loom_proximal_gradient_descent_options_default(void);
LOOM_API loom_proximal_adagrad_options loom_proximal_adagrad_options_default(void);
LOOM_API loom_adagrad_da_options loom_adagrad_da_options_default(void);

/* Each returns a new optimizer, NULL only when out of memory (options with a
 * bad struct_size, see loom_base.h, are the graph's error when the
 * optimizer is applied). Caller frees
 * with loom_optimizer_free (after the graph's last apply; the graph keeps
 * what was built). */
LOOM_API loom_optimizer *loom_optimizer_sgd(loom_output learning_rate);
LOOM_API loom_optimizer *loom_optimizer_momentum(loom_output learning_rate, const loom_momentum_options *o);
LOOM_API loom_optimizer *loom_optimizer_adagrad(loom_output learning_rate, const loom_adagrad_options *o);
LOOM_API loom_optimizer *loom_optimizer_adam(loom_output learning_rate, const loom_adam_options *o);
LOOM_API loom_optimizer *loom_optimizer_ftrl(loom_output learning_rate, const loom_ftrl_options *o);
LOOM_API loom_optimizer *loom_optimizer_rmsprop(loom_output learning_rate, const loom_rmsprop_options *o);
LOOM_API loom_optimizer *loom_optimizer_adadelta(loom_output learning_rate, const loom_adadelta_options *o);
/* tf.compat.v1.train.ProximalGradientDescentOptimizer ("ProximalGradientDescent", no slots). */
LOOM_API loom_optimizer *loom_optimizer_proximal_gradient_descent(loom_output learning_rate,
                                                                  const loom_proximal_gradient_descent_options *o);
/* tf.compat.v1.train.ProximalAdagradOptimizer ("ProximalAdagrad"; slot "accumulator"). */
LOOM_API loom_optimizer *loom_optimizer_proximal_adagrad(loom_output learning_rate,
                                                         const loom_proximal_adagrad_options *o);
/* tf.compat.v1.train.AdagradDAOptimizer ("AdagradDA"; slots "gradient_accumulator" (<var>/AdagradDA) and
 * "gradient_squared_accumulator" (<var>/AdagradDA_1)). Its update reads the global step: apply_gradients /
 * minimize need global_step, and the update uses T = global_step + 1 as read before the increment (TF's
 * optimizer given the global step it increments). */
LOOM_API loom_optimizer *loom_optimizer_adagrad_da(loom_output learning_rate, const loom_adagrad_da_options *o);
LOOM_API void loom_optimizer_free(loom_optimizer *opt);
/* "GradientDescent", "Momentum", "Adagrad", "Adam", "Ftrl", "RMSProp",
 * "Adadelta", "ProximalGradientDescent", "ProximalAdagrad", "AdagradDA" (static strings; "" for opt NULL). */
LOOM_API const char *loom_optimizer_name(const loom_optimizer *opt);
/* The slot variable of var ("m", "v", "accum", "linear", "momentum", "rms",
 * "mg", "accum_update", "accumulator", "gradient_accumulator", "gradient_squared_accumulator") or NULL. Owned by the graph it was built in; valid
 * until loom_graph_free (also after loom_optimizer_free). */
LOOM_API loom_variable *loom_optimizer_get_slot(const loom_optimizer *opt, const loom_variable *var,
                                                const char *slot_name);

/* tf.train.Optimizer.apply_gradients: one update op per (grads[i], vars[i])
 * (grads[i].values.node == NULL -> skipped; indices set -> the sparse
 * kernel), then the optimizer's finishing updates (Adam's beta powers), then,
 * when global_step is given, global_step += 1 after all of them. Returns the
 * train op (run it as a target; owned by g, valid until loom_graph_free);
 * name NULL = the optimizer's name. NULL (and a graph error) on failure. */
LOOM_API loom_node *loom_optimizer_apply_gradients(loom_optimizer *opt, loom_graph *g, int n,
                                                   const loom_gradient *grads, loom_variable *const *vars,
                                                   loom_variable *global_step, const char *name);
/* tf.train.Optimizer.minimize: gradients of loss (loom_gradients_sparse)
 * with respect to vars (nvars == 0: all TRAINABLE_VARIABLES), then
 * apply_gradients. Variables without a gradient are skipped; none at all is
 * an error ("No gradients provided for any variable"). Returns the train
 * op, owned by g (valid until loom_graph_free), or NULL with a graph error. */
LOOM_API loom_node *loom_optimizer_minimize(loom_optimizer *opt, loom_graph *g, loom_output loss, int nvars,
                                            loom_variable *const *vars, loom_variable *global_step,
                                            const char *name);

/* ===================================================================== *
 * Learning-rate schedules (tf.train.*_decay), computed in the graph from
 * global_step (an int32/int64/float scalar output) as one float32 scalar.
 * ===================================================================== */
/* lr * decay_rate ^ (step / decay_steps), floor()ed when staircase. */
LOOM_API loom_output loom_exponential_decay(loom_graph *g, double learning_rate, loom_output global_step,
                                            double decay_steps, double decay_rate, int staircase, const char *name);
/* values[0] while step <= boundaries[0], values[i] while boundaries[i-1] <
 * step <= boundaries[i], values[n] after; n boundaries, n + 1 values. */
LOOM_API loom_output loom_piecewise_constant(loom_graph *g, loom_output global_step, int n, const double *boundaries,
                                             const double *values, const char *name);
/* (lr - end_lr) * (1 - step/decay_steps)^power + end_lr with step capped at
 * decay_steps, or with cycle: decay_steps *= max(1, ceil(step/decay_steps)).
 * TF defaults end_lr 0.0001, power 1. */
LOOM_API loom_output loom_polynomial_decay(loom_graph *g, double learning_rate, loom_output global_step,
                                           double decay_steps, double end_learning_rate, double power, int cycle,
                                           const char *name);
/* lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha) */
LOOM_API loom_output loom_cosine_decay(loom_graph *g, double learning_rate, loom_output global_step,
                                       double decay_steps, double alpha, const char *name);

/* ===================================================================== *
 * Gradient clipping (tf.clip_by_norm, tf.clip_by_global_norm).
 * ===================================================================== */
/* t * clip_norm / max(l2norm(t), clip_norm) (t unchanged when its norm is
 * <= clip_norm). t is float32. */
LOOM_API loom_output loom_clip_by_norm(loom_graph *g, loom_output t, double clip_norm, const char *name);
/* global_norm = sqrt(sum of all squared elements of all t[i]); every t[i] is
 * scaled by clip_norm / max(global_norm, clip_norm). Missing entries
 * ({NULL,0}) stay missing. out[i] receives the clipped tensors; *global_norm
 * (may be NULL) the norm. Works on gradient values (sparse rows too). */
LOOM_API void loom_clip_by_global_norm(loom_graph *g, int n, const loom_output *t, double clip_norm,
                                       loom_output *out, loom_output *global_norm, const char *name);
/* Same on gradients: values are clipped, indices kept. */
LOOM_API void loom_clip_gradients_by_global_norm(loom_graph *g, int n, const loom_gradient *grads, double clip_norm,
                                                 loom_gradient *out, loom_output *global_norm);
/* sqrt(sum of squares) of all t[i] (tf.global_norm). */
LOOM_API loom_output loom_global_norm(loom_graph *g, int n, const loom_output *t, const char *name);

/* Checkpoints (tf.train.Saver): loom_checkpoint.h. */

#ifdef __cplusplus
}
#endif
#endif
