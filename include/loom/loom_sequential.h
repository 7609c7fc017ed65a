/* loom_sequential.h - a layer stack (tf.keras.Sequential) with a loss, an
 * optimizer and metrics ("compile"), trained, evaluated and used for
 * prediction directly (fit / evaluate / predict, a small in-process loop),
 * and converted into an Estimator (tf.keras.estimator.model_to_estimator).
 *
 *   loom_sequential *m = loom_sequential_new(st);
 *   loom_sequential_set_input(m, "image", LOOM_F32, 1, (int64_t[]){784}, st);
 *   loom_sequential_add_reshape(m, 3, (int64_t[]){28, 28, 1}, NULL, st);
 *   loom_sequential_add_conv2d(m, 32, (int64_t[]){3, 3}, &relu_conv, NULL, st);
 *   loom_sequential_add_flatten(m, NULL, st);
 *   loom_sequential_add_dense(m, 10, NULL, NULL, st);
 *   loom_sequential_compile_options c = loom_sequential_compile_options_default();
 *   c.loss = "sparse_categorical_crossentropy";   (from logits: c.from_logits = 1)
 *   c.metrics = (const char *[]){"accuracy"}; c.nmetrics = 1;
 *   loom_sequential_compile(m, &c, st);
 *   loom_sequential_fit(m, train_ds, &fit_options, NULL, st);
 *   loom_estimator *e = loom_sequential_to_estimator(m, model_dir, &config, st);
 *
 * Layers and names. Each layer is one of loom_layers.h's builders, with
 * Keras' default names made unique per model in the order added: "dense",
 * "dense_1", ..., "conv2d", "max_pooling2d", "average_pooling2d",
 * "flatten", "reshape", "dropout", "batch_normalization", "embedding". The
 * variables are therefore Keras' (and model_to_estimator's):
 * dense/kernel [in, units], dense/bias [units], conv2d/kernel [kh, kw, cin,
 * filters], conv2d/bias, batch_normalization/{gamma, beta, moving_mean,
 * moving_variance}, embedding/embeddings [input_dim, output_dim]. An
 * explicit name is used as given (two layers may not share one).
 *
 * The input: one feature (name, dtype, shape without the batch dimension),
 * fed as [batch, dims...]. In fit / evaluate / predict and in the
 * estimator's input_fn datasets, the feature is the component of that name;
 * when the dataset has no such component but exactly one non-label
 * component, that one is used (so IDX's "image" works with the default
 * name "x"). The label is the dataset's label component.
 *
 * Modes: dropout is applied and batch normalization uses (and updates) the
 * batch statistics only while training (fit, or the estimator's TRAIN
 * mode); evaluate and predict use the moving statistics, as Keras.
 *
 * Direct training keeps one graph and one session holding the model's
 * variables (initialised at compile, from the compile seed): a training
 * tower and an inference tower that share them. The graph and session are
 * internal; variables are read and written through
 * loom_sequential_get/set_variable.
 *
 * Losses (SUM_OVER_BATCH_SIZE: the mean over the batch, as Keras), by name:
 *   "sparse_categorical_crossentropy"  labels: int class ids [B] or [B, 1]
 *   "categorical_crossentropy"         labels: one-hot rows [B, C]
 *   "binary_crossentropy"              labels: 0/1, [B] or [B, 1] (the last
 *                                      layer has 1 unit)
 *   "mean_squared_error" / "mse", "mean_absolute_error" / "mae"
 * from_logits (1 by default, as the examples here end in a linear layer):
 * the last layer's output are logits; 0: probabilities (clipped to
 * [1e-7, 1 - 1e-7] before the log, as Keras). Regularization losses of the
 * layers are added. Labels of rank one less than the output (whose last dim
 * is 1) are reshaped to the output's shape for the binary and regression
 * losses.
 * Metrics, by name (the key they are reported under is the name given):
 *   "accuracy" / "acc"  sparse: argmax(output) == label; categorical:
 *                       argmax(output) == argmax(label); binary:
 *                       (output > 0 for logits, > 0.5 for probabilities)
 *                       == label; regression losses: an error.
 *   "mse" / "mean_squared_error", "mae" / "mean_absolute_error".
 * Optimizers, by name (Keras' defaults): "Adam" (0.001, beta1 0.9, beta2
 * 0.999, epsilon 1e-7; the default), "SGD" (0.01), "Adagrad" (0.001,
 * initial accumulator 0.1), "RMSProp" (0.001, rho 0.9, epsilon 1e-7, the
 * mean square starting at 0),
 * "Ftrl" (0.001), "Adadelta" (0.001, rho 0.95, epsilon 1e-7); or a factory.
 *
 * Evaluation loss: the mean of the batch losses (an Estimator's "loss";
 * Keras weights batches by their size: the same when the batches are
 * equal), plus the metrics and "global_step" (the optimizer's iterations).
 *
 * Errors: INVALID_ARGUMENT naming the layer's index, kind and name and what
 * was wrong ("layer 3 (conv2d 'conv2d_1'): expects a rank-4 input [batch,
 * height, width, channels], got rank 2 [-1,1568] (the output of layer 2,
 * flatten 'flatten')"), the unknown loss, metric or optimizer (with the
 * accepted names), an empty stack, a missing input; FAILED_PRECONDITION for
 * fit / evaluate / predict / to_estimator before compile and for adding a
 * layer after it. Layers, input and compile are checked at compile time by
 * building the model once.
 */
#ifndef LOOM_SEQUENTIAL_H
#define LOOM_SEQUENTIAL_H
#include "loom_base.h"
#include "loom_data.h"
#include "loom_estimator.h"
#include "loom_layers.h"
#include "loom_train.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_sequential loom_sequential;

/* A new, empty model (NULL when out of memory); caller frees with
 * loom_sequential_free. */
LOOM_API loom_sequential *loom_sequential_new(loom_status *st);
LOOM_API void loom_sequential_free(loom_sequential *m);

/* The input feature: name (NULL = "x"; copied), dtype (float32 for dense /
 * conv stacks, int32 or int64 for an embedding first), shape without the
 * batch dimension (every dim known; ndim 0..LOOM_MAX_DIMS-1). */
LOOM_API loom_code loom_sequential_set_input(loom_sequential *m, const char *feature, loom_dtype dtype, int ndim,
                                             const int64_t *dims, loom_status *st);

/* ---- layers: each returns the new layer's index (>= 0), or -1 with st set.
 * Options are copied (strings too); NULL options = the defaults; name NULL =
 * Keras' default name. Options' reuse and training fields are ignored (the
 * model decides them). ---- */
LOOM_API int loom_sequential_add_dense(loom_sequential *m, int64_t units, const loom_dense_options *o,
                                       const char *name, loom_status *st);
LOOM_API int loom_sequential_add_conv2d(loom_sequential *m, int64_t filters, const int64_t kernel_size[2],
                                        const loom_conv2d_options *o, const char *name, loom_status *st);
/* strides NULL = pool_size; padding NULL = "valid". */
LOOM_API int loom_sequential_add_max_pooling2d(loom_sequential *m, const int64_t pool_size[2],
                                               const int64_t strides[2], const char *padding, const char *name,
                                               loom_status *st);
LOOM_API int loom_sequential_add_average_pooling2d(loom_sequential *m, const int64_t pool_size[2],
                                                   const int64_t strides[2], const char *padding, const char *name,
                                                   loom_status *st);
LOOM_API int loom_sequential_add_flatten(loom_sequential *m, const char *name, loom_status *st);
/* tf.keras.layers.Reshape: target shape without the batch dimension (one
 * dim may be -1). */
LOOM_API int loom_sequential_add_reshape(loom_sequential *m, int ndim, const int64_t *dims, const char *name,
                                         loom_status *st);
/* rate in [0, 1); seed: op seed or LOOM_SEED_NONE. */
LOOM_API int loom_sequential_add_dropout(loom_sequential *m, double rate, int64_t seed, const char *name,
                                         loom_status *st);
LOOM_API int loom_sequential_add_batch_norm(loom_sequential *m, const loom_batch_norm_options *o, const char *name,
                                            loom_status *st);
/* tf.keras.layers.Embedding: integer ids [B, ...] -> [B, ..., output_dim];
 * variable "<name>/embeddings" [input_dim, output_dim]; initializer NULL =
 * uniform(-0.05, 0.05) (Keras' default). */
LOOM_API int loom_sequential_add_embedding(loom_sequential *m, int64_t input_dim, int64_t output_dim,
                                           const loom_initializer *initializer, const char *name, loom_status *st);

LOOM_API int loom_sequential_num_layers(const loom_sequential *m);
/* Owned by m; valid until loom_sequential_free. NULL when i is out of range. */
LOOM_API const char *loom_sequential_layer_name(const loom_sequential *m, int i);
/* "dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten",
 * "reshape", "dropout", "batch_normalization", "embedding" (static). */
LOOM_API const char *loom_sequential_layer_kind(const loom_sequential *m, int i);

/* ---- compile ---- */
typedef loom_optimizer *(*loom_sequential_optimizer_fn)(loom_graph *g, void *user);
typedef struct loom_sequential_compile_options {
  uint32_t struct_size;
  const char *loss;                  /* required (see above) */
  int32_t from_logits;               /* 1 */
  const char *optimizer;             /* NULL = "Adam" */
  double learning_rate;              /* 0: the optimizer's Keras default */
  loom_sequential_optimizer_fn optimizer_fn; /* not NULL: makes the optimizer (name ignored) */
  void *optimizer_user;
  int32_t nmetrics;
  const char *const *metrics;
  int64_t seed;                      /* graph seed of the direct graph; LOOM_SEED_NONE = none (default 0) */
  int32_t num_threads;               /* direct session's threads, 0 = the default (loom_session.h) */
} loom_sequential_compile_options;
LOOM_API loom_sequential_compile_options loom_sequential_compile_options_default(void);
/* Checks the model (builds it once), creates the direct graph and session
 * and initialises the variables. Once only (FAILED_PRECONDITION after). */
LOOM_API loom_code loom_sequential_compile(loom_sequential *m, const loom_sequential_compile_options *o,
                                           loom_status *st);

/* ---- variables (after compile) ---- */
/* The model's variables in creation order (not global_step, optimizer
 * slots or metric state). */
LOOM_API int loom_sequential_num_variables(const loom_sequential *m);
/* Owned by m; valid until loom_sequential_free; NULL out of range. */
LOOM_API const char *loom_sequential_variable_name(const loom_sequential *m, int i);
/* Copies the dims (capacity LOOM_MAX_DIMS); returns the rank (-1 out of range). */
LOOM_API int loom_sequential_variable_shape(const loom_sequential *m, int i, int64_t *dims);
/* *out: a new tensor (caller frees). NOT_FOUND for an unknown name. */
LOOM_API loom_code loom_sequential_get_variable(loom_sequential *m, const char *name, loom_tensor **out,
                                                loom_status *st);
LOOM_API loom_code loom_sequential_set_variable(loom_sequential *m, const char *name, const loom_tensor *value,
                                                loom_status *st);
/* Writes every model variable (and global_step) to a loom checkpoint file. */
LOOM_API loom_code loom_sequential_save_weights(loom_sequential *m, const char *path, loom_status *st);

/* ---- direct training, evaluation, prediction. Datasets are borrowed and
 * must yield batches (rank of the input + 1). ---- */
typedef struct loom_sequential_fit_options {
  uint32_t struct_size;
  int64_t epochs;          /* 1 */
  int64_t steps_per_epoch; /* 0: an epoch is one pass (until OUT_OF_RANGE; the dataset is reset
                              before each); > 0: this many batches (reset only when it ran out) */
  int32_t verbose;         /* 0; 1: one line per epoch on stdout (loss and metrics) */
} loom_sequential_fit_options;
LOOM_API loom_sequential_fit_options loom_sequential_fit_options_default(void);
/* *history (may be NULL): a new result (caller frees with
 * loom_eval_result_free) with the last epoch's running mean loss, metrics
 * and global_step. */
LOOM_API loom_code loom_sequential_fit(loom_sequential *m, loom_dataset *ds, const loom_sequential_fit_options *o,
                                       loom_eval_result **history, loom_status *st);
/* Resets ds, then runs steps batches (0: until OUT_OF_RANGE) with the
 * inference tower. *out: a new result ("loss", the metrics,
 * "global_step"); caller frees. */
LOOM_API loom_code loom_sequential_evaluate(loom_sequential *m, loom_dataset *ds, int64_t steps,
                                            loom_eval_result **out, loom_status *st);
/* Resets ds, then the outputs of steps batches (0: all) stacked along the
 * batch dimension into *out (a new tensor; caller frees). */
LOOM_API loom_code loom_sequential_predict(loom_sequential *m, loom_dataset *ds, int64_t steps, loom_tensor **out,
                                           loom_status *st);
/* The output for one input batch x [B, dims...] (input dtype). *out as
 * loom_session_run's fetches (NULL -> new; reused when it fits). */
LOOM_API loom_code loom_sequential_predict_batch(loom_sequential *m, const loom_tensor *x, loom_tensor **out,
                                                 loom_status *st);

/* ---- model_to_estimator ---- */
/* A new Estimator (loom_estimator_free frees it; it keeps its own copy of
 * the model, so m may be freed first) whose model_fn builds the same
 * layers with the same variable names: TRAIN minimises the compiled loss
 * with the compiled optimizer (batch normalization's updates run with the
 * train op); EVAL reports "loss" and the compiled metrics under their
 * names; PREDICT gives one prediction keyed by the last layer's name (as
 * model_to_estimator keys outputs), exported as serving_default. When
 * model_dir has no checkpoint yet, the sequential's current weights become
 * the estimator's first checkpoint, <model_dir>/model.ckpt-0 (the TRAIN
 * graph's variables: the model's with the sequential's values, global_step
 * 0), as model_to_estimator's _save_first_checkpoint does; so evaluate,
 * predict and export work at once and training starts from those weights.
 * Beyond TF: when fit created the optimizer's slots (the same names,
 * "dense/kernel/Adam" ...), their values are carried too, so the
 * estimator's training continues the optimizer's state instead of
 * restarting it (slots that do not exist yet are freshly initialised). With a checkpoint there already,
 * it is kept (and used). model_dir / config as
 * loom_estimator_new. Needs a compiled model. */
LOOM_API loom_estimator *loom_sequential_to_estimator(loom_sequential *m, const char *model_dir,
                                                      const loom_run_config *config, loom_status *st);
/* A serving_input_fn for loom_estimator_export: one placeholder [-1,
 * dims...] named after the input feature. user: the loom_sequential (or
 * NULL-safe: INVALID_ARGUMENT). */
LOOM_API loom_code loom_sequential_serving_input_fn(loom_graph *g, loom_features *features,
                                                    loom_features *receivers, void *user, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
