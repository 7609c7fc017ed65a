/* loom_estimator.h - the Estimator (tf.estimator.Estimator), RunConfig,
 * EstimatorSpec, ModeKeys, in-process evaluation and early stopping
 * (TF_CONFIG: loom_distributed.h).
 *
 * A model_fn builds the model into a fresh graph for one mode and fills an
 * EstimatorSpec; an input_fn returns a dataset (loom_data.h) whose label
 * component becomes `labels` and whose other components become `features`.
 * train / evaluate / predict / export follow TF's semantics (steps vs
 * max_steps, evaluation's mean loss + global_step, predict's
 * yield_single_examples, export directories with timestamps) and fix TF's
 * best-known complaints:
 *  - predict keeps the graph and session of the last call resident and only
 *    re-reads variables when a newer checkpoint exists (no rebuild per call);
 *    several prediction iterators can be interleaved;
 *  - evaluation every N steps runs in process (loom_in_memory_evaluator_hook,
 *    early stopping hooks) without a checkpoint round trip;
 *  - evaluate pins the checkpoint it restores with a hard link next to it
 *    (removed after the restore), so keep_checkpoint_max garbage collection
 *    in a concurrent trainer cannot delete it mid-read; if it vanished
 *    before it could be linked, the newest checkpoint is looked up again.
 *
 * Model directory layout: as TF (checkpoint state file, model.ckpt-<step>
 * (one loom checkpoint file each), events.out.tfevents.*, eval/ or
 * eval_<name>/, export/<timestamp>/).
 */
#ifndef LOOM_ESTIMATOR_H
#define LOOM_ESTIMATOR_H
#include "loom_base.h"
#include "loom_data.h"
#include "loom_distributed.h"
#include "loom_graph.h"
#include "loom_hooks.h"
#include "loom_metrics.h"
#include "loom_session.h"
#include "loom_sparse.h"
#include "loom_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ModeKeys: "train", "eval", "infer" (static strings; NULL for an unknown mode). */
typedef enum loom_mode { LOOM_MODE_TRAIN = 0, LOOM_MODE_EVAL = 1, LOOM_MODE_PREDICT = 2 } loom_mode;
LOOM_API const char *loom_mode_key(loom_mode mode);

/* ---- params (string key/value, copied by the estimator) ---- */
typedef struct loom_params loom_params;
/* new and copy return a new object (NULL when out of memory); caller frees
 * with loom_params_free. */
LOOM_API loom_params *loom_params_new(void);
LOOM_API void loom_params_free(loom_params *p);
LOOM_API loom_params *loom_params_copy(const loom_params *p);
/* Sets (or replaces) key. */
LOOM_API loom_code loom_params_set(loom_params *p, const char *key, const char *value, loom_status *st);
LOOM_API loom_code loom_params_set_double(loom_params *p, const char *key, double value, loom_status *st);
LOOM_API loom_code loom_params_set_int(loom_params *p, const char *key, int64_t value, loom_status *st);
/* NULL when absent (p may be NULL). Owned by p; valid until key is set
 * again or p is freed. */
LOOM_API const char *loom_params_get(const loom_params *p, const char *key);
/* dflt when absent or not a number. */
LOOM_API double loom_params_get_double(const loom_params *p, const char *key, double dflt);
LOOM_API int64_t loom_params_get_int(const loom_params *p, const char *key, int64_t dflt);

/* ---- RunConfig ---- */
typedef struct loom_run_config {
  uint32_t struct_size;
  const char *model_dir;             /* NULL: the constructor's (or TF_CONFIG's, or a temp dir) */
  int32_t has_random_seed;
  int64_t tf_random_seed;
  int64_t save_summary_steps;        /* 100; 0 = no summaries */
  int64_t save_checkpoints_steps;    /* -1 = unset */
  double save_checkpoints_secs;      /* -1 = unset. Both unset: 600 s. Both 0: no checkpoints. Both > 0: error */
  int32_t keep_checkpoint_max;       /* 5; 0 = keep all */
  double keep_checkpoint_every_n_hours; /* 10000 (accepted for compatibility) */
  int64_t log_step_count_steps;      /* 100; must be > 0 */
  int32_t num_threads;               /* session threads, 0 = the default (loom_session.h) */
  loom_device_type device;
  int32_t progress_bar;              /* 1: progress bar with ETA when stdout is a terminal */
  /* Batches the estimator prefetches on a background thread (0 = none, the
   * default): worth it when producing a batch is slow (parsing, map) and a
   * core is free; when the session's threads use every core, the producer
   * competes with them (the batch is then produced inline between steps). */
  int32_t prefetch;
  /* The distribution strategy of train_and_evaluate (TF's RunConfig.train_distribute), a
   * loom_distribute value; docs/distributed.md "Strategies". */
  int32_t train_distribute;
} loom_run_config;
typedef enum loom_distribute {
  LOOM_DISTRIBUTE_AUTO = 0,             /* TF_CONFIG decides: a cluster with "ps" tasks (or this task the
                                           evaluator): parameter server; chief / worker tasks only in a
                                           process mpirun or srun started: collective; otherwise local */
  LOOM_DISTRIBUTE_LOCAL = 1,            /* local training even when TF_CONFIG names a cluster */
  LOOM_DISTRIBUTE_PARAMETER_SERVER = 2, /* TF_CONFIG must name "ps" tasks (INVALID_ARGUMENT otherwise): async,
                                           bounded staleness or sync, as the PS tasks are configured */
  LOOM_DISTRIBUTE_COLLECTIVE = 3        /* synchronous all-reduce over the MPI ranks (MultiWorkerMirrored):
                                           docs/distributed.md "Collective all-reduce" */
} loom_distribute;
LOOM_API loom_run_config loom_run_config_default(void);

/* ---- features (name -> graph output) ---- */
typedef struct loom_features loom_features;
/* A new, empty map (NULL when out of memory); caller frees with
 * loom_features_free (the estimator frees the ones it hands to model_fn). */
LOOM_API loom_features *loom_features_new(void);
LOOM_API void loom_features_free(loom_features *f);
LOOM_API loom_code loom_features_add(loom_features *f, const char *name, loom_output value, loom_status *st);
LOOM_API int loom_features_count(const loom_features *f);
/* Owned by f; valid until loom_features_free. NULL when i is out of range. */
LOOM_API const char *loom_features_name(const loom_features *f, int i);
LOOM_API loom_output loom_features_at(const loom_features *f, int i);
/* {NULL, 0} when absent. For a sparse entry: its values. An absent key also
 * sets the graph's sticky error (INVALID_ARGUMENT naming the key and the keys
 * that exist), so a model_fn that asks for a key the input lacks fails there;
 * probe with loom_features_count/loom_features_name when a key is optional. */
LOOM_API loom_output loom_features_get(const loom_features *f, const char *name);
/* Sparse (ragged) entries (loom_sparse.h): values + row_splits under one
 * name. A name added before (dense or sparse) is INVALID_ARGUMENT. */
LOOM_API loom_code loom_features_add_sparse(loom_features *f, const char *name, loom_sparse value, loom_status *st);
/* 1 when entry i is sparse, 0 when dense or out of range. */
LOOM_API int loom_features_is_sparse(const loom_features *f, int i);
/* The sparse entry called name; {{NULL, 0}, {NULL, 0}} when absent or dense. */
LOOM_API loom_sparse loom_features_get_sparse(const loom_features *f, const char *name);

/* ---- EstimatorSpec ---- */
typedef struct loom_estimator_spec loom_estimator_spec;
typedef enum loom_export_kind {
  LOOM_EXPORT_PREDICT = 0,  /* tensorflow/serving/predict */
  LOOM_EXPORT_CLASSIFY = 1, /* tensorflow/serving/classify: keys "classes", "scores" */
  LOOM_EXPORT_REGRESS = 2   /* tensorflow/serving/regress: key "outputs" */
} loom_export_kind;
typedef enum loom_hook_slot {
  LOOM_HOOKS_TRAINING = 0,
  LOOM_HOOKS_TRAINING_CHIEF = 1,
  LOOM_HOOKS_EVALUATION = 2,
  LOOM_HOOKS_PREDICTION = 3
} loom_hook_slot;
LOOM_API loom_mode loom_spec_mode(const loom_estimator_spec *s);
/* The setters follow loom_base.h's setter rule: each returns LOOM_OK or the
 * failure's code and also records the first failure in the spec, which the
 * estimator reports (INVALID_ARGUMENT or RESOURCE_EXHAUSTED, "EstimatorSpec:
 * loom_spec_add_prediction: duplicate prediction key 'p'") when it
 * validates the spec after model_fn returns. A NULL spec is
 * INVALID_ARGUMENT (nothing to record). A rejected entry is not added. */
/* loss: a float scalar (or shape [1]); loss.node NULL is INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_set_loss(loom_estimator_spec *s, loom_output loss);
/* train_op NULL is INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_set_train_op(loom_estimator_spec *s, loom_node *train_op);
/* predictions dict entry (a single tensor: use key "predictions"). key is
 * copied. A NULL or empty key, a value without a node and a key added
 * before are INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_add_prediction(loom_estimator_spec *s, const char *key, loom_output value);
/* eval_metric_ops entry; name is copied. "loss" and "global_step" are
 * reserved; a NULL or empty name, a metric without value or update op and
 * a name added before are INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_add_eval_metric(loom_estimator_spec *s, const char *name, loom_metric metric);
/* export_outputs entry (name NULL = "serving_default"; name and keys are
 * copied; keys NULL = "output" each). With none, export writes
 * {"serving_default": predict(all predictions)}; with several, one must be
 * "serving_default". n < 1, outputs NULL or without a node, an unknown
 * kind, a NULL or empty key and a name added before are INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_add_export_output(loom_estimator_spec *s, const char *name, loom_export_kind kind,
                                               int n, const char *const *keys, const loom_output *outputs);
/* Adds a hook; the spec takes ownership (freed after the call that built
 * it), also when the call fails (then the hook is freed at once). A NULL
 * hook or an unknown slot is INVALID_ARGUMENT. */
LOOM_API loom_code loom_spec_add_hook(loom_estimator_spec *s, loom_hook_slot slot, loom_hook *hook);

/* The predictions added so far: their count, key i and tensor i (NULL /
 * {NULL, 0} when i is out of range; keys owned by s). */
LOOM_API int loom_spec_prediction_count(const loom_estimator_spec *s);
LOOM_API const char *loom_spec_prediction_key(const loom_estimator_spec *s, int i);
LOOM_API loom_output loom_spec_prediction_value(const loom_estimator_spec *s, int i);
/* Adds eval metric name, replacing one of that name added before (what
 * tf.estimator.add_metrics does with metric_fn's metrics); otherwise as
 * loom_spec_add_eval_metric. */
LOOM_API loom_code loom_spec_put_eval_metric(loom_estimator_spec *s, const char *name, loom_metric metric);

/* ---- model_fn / input_fn ---- */
typedef loom_code (*loom_model_fn)(loom_graph *g, const loom_features *features, loom_output labels, loom_mode mode,
                                   const loom_params *params, const loom_run_config *config,
                                   loom_estimator_spec *spec, void *user, loom_status *st);
/* Returns a new dataset (the estimator frees it). */
typedef loom_dataset *(*loom_input_fn)(loom_mode mode, const loom_params *params, void *user, loom_status *st);
/* Serving input receiver: adds placeholders to g, registers them as
 * receivers (the export signature's inputs) and builds features from them
 * (often the same outputs). */
typedef loom_code (*loom_serving_input_fn)(loom_graph *g, loom_features *features, loom_features *receivers,
                                           void *user, loom_status *st);

/* ---- Estimator ---- */
typedef struct loom_estimator loom_estimator;
/* model_dir NULL: config->model_dir, TF_CONFIG's model_dir, or a new temp
 * dir (with a warning). Both set and different: INVALID_ARGUMENT.
 * warm_start_from: a checkpoint file, a model directory or an export
 * directory; applied to all trainable variables only when model_dir has
 * no checkpoint (a variable the checkpoint lacks is INVALID_ARGUMENT
 * naming both, as TF's ValueError). Returns a new
 * estimator (NULL on failure); caller frees with loom_estimator_free. params
 * and config are copied. */
LOOM_API loom_estimator *loom_estimator_new(loom_model_fn model_fn, void *user, const char *model_dir,
                                            const loom_run_config *config, const loom_params *params,
                                            const char *warm_start_from, loom_status *st);
LOOM_API void loom_estimator_free(loom_estimator *e);
/* The model directory, the resolved RunConfig and the params copy: owned by
 * e; valid until loom_estimator_free (NULL for e NULL). */
LOOM_API const char *loom_estimator_model_dir(const loom_estimator *e);
LOOM_API const loom_run_config *loom_estimator_config(const loom_estimator *e);
LOOM_API const loom_params *loom_estimator_params(const loom_estimator *e);
/* Restricts warm start to variables whose names match the POSIX extended
 * regex (anchored like TF's re.match at the start); NULL = all trainable. */
LOOM_API loom_code loom_estimator_set_warm_start_vars(loom_estimator *e, const char *regex, loom_status *st);

typedef struct loom_train_options {
  uint32_t struct_size;
  int64_t steps;       /* > 0: run this many more steps */
  int64_t max_steps;   /* > 0: stop at this global step (skip if reached). Not both. Neither: until the input ends */
  int32_t nhooks;
  loom_hook *const *hooks;
  int32_t nlisteners;  /* saving listeners (need checkpointing enabled) */
  const loom_checkpoint_listener *const *listeners;
  void *const *listener_selves;
} loom_train_options;
LOOM_API loom_train_options loom_train_options_default(void);
LOOM_API loom_code loom_estimator_train(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                        const loom_train_options *opt, loom_status *st);

typedef struct loom_eval_result loom_eval_result;
LOOM_API int loom_eval_result_count(const loom_eval_result *r);
/* Sorted, incl. "loss", "global_step". Owned by r; valid until
 * loom_eval_result_free (NULL when i is out of range). */
LOOM_API const char *loom_eval_result_key(const loom_eval_result *r, int i);
LOOM_API double loom_eval_result_value(const loom_eval_result *r, int i);
/* NOT_FOUND when absent. */
LOOM_API loom_code loom_eval_result_get(const loom_eval_result *r, const char *key, double *value, loom_status *st);
LOOM_API int64_t loom_eval_result_global_step(const loom_eval_result *r);
LOOM_API void loom_eval_result_free(loom_eval_result *r);

typedef struct loom_eval_options {
  uint32_t struct_size;
  int64_t steps;               /* > 0: this many batches; 0: until the input ends */
  int32_t nhooks;
  loom_hook *const *hooks;
  const char *checkpoint_path; /* NULL: the latest */
  const char *name;            /* NULL: eval/, else eval_<name>/ */
} loom_eval_options;
LOOM_API loom_eval_options loom_eval_options_default(void);
LOOM_API loom_code loom_estimator_evaluate(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                           const loom_eval_options *opt, loom_eval_result **out, loom_status *st);
/* (*out: a new result; caller frees with loom_eval_result_free.) */

typedef struct loom_predict_options {
  uint32_t struct_size;
  int32_t npredict_keys;       /* 0: all */
  const char *const *predict_keys;
  const char *checkpoint_path; /* NULL: the latest (fresh variables when none, with a log line) */
  int32_t yield_single_examples; /* 1 (default): one result per example */
  int32_t nhooks;
  loom_hook *const *hooks;
} loom_predict_options;
LOOM_API loom_predict_options loom_predict_options_default(void);
typedef struct loom_prediction_iter loom_prediction_iter;
/* A new iterator (NULL on failure); caller frees with
 * loom_prediction_iter_free. It holds its own reference to the resident
 * predict graph and session, so it may be freed after e. */
LOOM_API loom_prediction_iter *loom_estimator_predict(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                                      const loom_predict_options *opt, loom_status *st);
/* Advances to the next example (or batch); OUT_OF_RANGE at the end. */
LOOM_API loom_code loom_prediction_next(loom_prediction_iter *it, loom_status *st);
LOOM_API int loom_prediction_count(const loom_prediction_iter *it);
/* Owned by it; valid until loom_prediction_iter_free (NULL when i is out of range). */
LOOM_API const char *loom_prediction_key(const loom_prediction_iter *it, int i);
/* The current value of prediction i: owned by it; valid until the next
 * loom_prediction_next or loom_prediction_iter_free. NULL before the first
 * successful next or when i is out of range. */
LOOM_API const loom_tensor *loom_prediction_value(const loom_prediction_iter *it, int i);
/* The value for key, NULL when absent; owned and valid like
 * loom_prediction_value. */
LOOM_API const loom_tensor *loom_prediction_get(const loom_prediction_iter *it, const char *key);
LOOM_API void loom_prediction_iter_free(loom_prediction_iter *it);

/* export_saved_model: writes <export_dir_base>/<timestamp>/ atomically
 * (temp-<timestamp>/ then rename) from checkpoint_path (NULL: latest;
 * NOT_FOUND when there is none). The path written goes to out_path. The
 * signatures are the model's export outputs; classify / regress ones need
 * one string receiver tensor (serialized tf.Example): over any other
 * receiver they are left out, and serving_default becomes a predict
 * signature over every prediction. */
LOOM_API loom_code loom_estimator_export(loom_estimator *e, loom_serving_input_fn serving_input_fn, void *user,
                                         const char *export_dir_base, const char *checkpoint_path, char *out_path,
                                         size_t cap, loom_status *st);

LOOM_API loom_code loom_estimator_latest_checkpoint(const loom_estimator *e, char *buf, size_t cap,
                                                    loom_status *st);
/* Names (with dtype and shape) in the latest checkpoint; FAILED_PRECONDITION when none. */
LOOM_API loom_code loom_estimator_get_variable_names(const loom_estimator *e, loom_checkpoint_entry_fn fn,
                                                     void *user, loom_status *st);
LOOM_API loom_code loom_estimator_get_variable_value(const loom_estimator *e, const char *name, loom_tensor **out,
                                                     loom_status *st);
/* Calls e's model_fn (with e's params and config) to build its model into
 * g for mode, filling spec: a model_fn that wraps another estimator's model
 * (tf.estimator.add_metrics) calls it with the graph, features, labels and
 * spec it was given. e must outlive the estimator whose model_fn calls it. */
LOOM_API loom_code loom_estimator_call_model_fn(const loom_estimator *e, loom_graph *g, const loom_features *features,
                                                loom_output labels, loom_mode mode, loom_estimator_spec *spec,
                                                loom_status *st);
/* model_dir/eval or model_dir/eval_<name>, into buf; returns buf (the
 * caller's memory), NULL when e or buf is NULL or cap is 0. */
LOOM_API const char *loom_estimator_eval_dir(const loom_estimator *e, const char *name, char *buf, size_t cap);

/* ---- in-process evaluation and early stopping ---- */
/* Evaluates the training session's current variables every every_n_iter
 * steps (and at the end) on input_fn, without checkpoints: the eval graph is
 * built once; variables are copied in memory. Results are written to the
 * eval dir like evaluate's. Returns a new hook (NULL on failure); caller
 * frees with loom_hook_free, or hands it over (loom_spec_add_hook); e must
 * outlive it. */
LOOM_API loom_hook *loom_in_memory_evaluator_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                                  int64_t steps, const char *name, int64_t every_n_iter,
                                                  loom_status *st);
/* The same on TF 2.15's InMemoryEvaluatorHook schedule: it also evaluates
 * once the training session is created (global step of the restored or
 * initial variables), every every_n_iter steps of the call after that, and
 * at the end of the call even when its last step was just evaluated. */
LOOM_API loom_hook *loom_in_memory_evaluator_hook_tf(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                                     int64_t steps, const char *name, int64_t every_n_iter,
                                                     loom_status *st);
/* The latest in-memory evaluation of such a hook (NULL before the first).
 * Owned by the hook; valid until loom_hook_free (later evaluations do not
 * replace it). */
LOOM_API const loom_eval_result *loom_in_memory_evaluator_last(const loom_hook *h);
/* Early stopping: evaluates in process every run_every_steps and stops
 * training when should_stop(result history) says so. Returns a new hook;
 * ownership as loom_in_memory_evaluator_hook. */
typedef int (*loom_early_stop_fn)(void *user, int n, const loom_eval_result *const *history);
LOOM_API loom_hook *loom_early_stopping_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                             int64_t eval_steps, loom_early_stop_fn should_stop, void *user,
                                             int64_t run_every_steps, loom_status *st);
/* tf.estimator.experimental.stop_if_*: metric compared on in-process
 * evaluations after min_steps. Returns a new hook; ownership as
 * loom_in_memory_evaluator_hook. */
typedef enum loom_early_stop_kind {
  LOOM_STOP_IF_HIGHER = 0,      /* metric > threshold */
  LOOM_STOP_IF_LOWER = 1,       /* metric < threshold */
  LOOM_STOP_IF_NO_INCREASE = 2, /* no new maximum for max_steps_without (threshold) global steps */
  LOOM_STOP_IF_NO_DECREASE = 3
} loom_early_stop_kind;
LOOM_API loom_hook *loom_stop_if_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                      int64_t eval_steps, loom_early_stop_kind kind, const char *metric,
                                      double threshold, int64_t min_steps, int64_t run_every_steps,
                                      loom_status *st);

#ifdef __cplusplus
}
#endif
/* train_and_evaluate, TrainSpec/EvalSpec and the exporters */
#include "loom_train_and_evaluate.h"
#endif
