/* loom_train_and_evaluate.h - tf.estimator.train_and_evaluate in local mode:
 * TrainSpec, EvalSpec, and the exporters (LatestExporter, BestExporter,
 * FinalExporter). Included by loom_estimator.h.
 *
 * Local mode, as TF's: one train() call to train_spec.max_steps with a
 * checkpoint-saver listener. After every checkpoint save except the first
 * one of the session (the one at session creation), the listener evaluates
 * when no evaluation ran yet or at least throttle_secs have passed since
 * the last one, then runs every exporter; when training ends, the final
 * checkpoint is evaluated (and exported) unless its step was just
 * evaluated. Evaluation frequency is therefore bounded by the checkpoint
 * frequency (RunConfig save_checkpoints_steps / save_checkpoints_secs;
 * checkpointing must be on). start_delay_secs is used only by a
 * distributed evaluator (as in TF, local mode ignores it).
 *
 * Evaluation runs in process when the EvalSpec has no hooks: the eval graph
 * is built once and, right after each save, receives the training
 * session's variable values, i.e. exactly the values of the checkpoint just
 * written (no checkpoint read back), on a fresh dataset from
 * EvalSpec.input_fn (called per evaluation, as TF does, so a seeded shuffle
 * gives each evaluation the same batches); its events in model_dir/eval[_<name>]
 * carry that checkpoint's path. With eval hooks each evaluation is a
 * loom_estimator_evaluate of the checkpoint (a fresh graph, so the hooks
 * see the whole begin..end lifecycle each time).
 *
 * Exporters write <model_dir>/export/<exporter name>/<timestamp>/ with
 * loom_estimator_export from the evaluated checkpoint.
 */
#ifndef LOOM_TRAIN_AND_EVALUATE_H
#define LOOM_TRAIN_AND_EVALUATE_H
#include "loom_estimator.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- exporters (tf.estimator.Exporter) ---- */
typedef struct loom_exporter loom_exporter;
/* A custom exporter. export: may write one export under export_path
 * (= <model_dir>/export/<name>, created by the callee as needed) from
 * checkpoint_path; it writes the export's directory into out (cap bytes)
 * or leaves out "" when it exported nothing. begin (may be NULL) runs once
 * at the start of loom_train_and_evaluate with the eval event directory.
 * destroy (may be NULL) frees self. */
typedef struct loom_exporter_ops {
  loom_code (*begin)(void *self, loom_estimator *e, const char *eval_dir, loom_status *st);
  loom_code (*export_fn)(void *self, loom_estimator *e, const char *export_path, const char *checkpoint_path,
                         const loom_eval_result *eval_result, int is_the_final_export, char *out, size_t cap,
                         loom_status *st);
  void (*destroy)(void *self);
} loom_exporter_ops;
/* name: non-empty, no '/', not "." or ".." (copied). Returns a new exporter
 * (NULL on failure; ops->destroy is then not called); caller frees with
 * loom_exporter_free. */
LOOM_API loom_exporter *loom_exporter_new(const char *name, const loom_exporter_ops *ops, void *self,
                                          loom_status *st);
LOOM_API void loom_exporter_free(loom_exporter *x);
/* Owned by x; valid until loom_exporter_free ("" for NULL: static). */
LOOM_API const char *loom_exporter_name(const loom_exporter *x);

/* LatestExporter: exports after every evaluation and keeps the newest
 * exports_to_keep (5 in TF; 0 = keep all) timestamped exports of its
 * directory. New exporter, ownership as loom_exporter_new. */
LOOM_API loom_exporter *loom_latest_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                             int exports_to_keep, loom_status *st);
/* BestExporter: exports when the evaluation is better than the best so far
 * (compare_fn(user, best, current) != 0; NULL = TF's _loss_smaller: a
 * strictly lower "loss"). At the start of loom_train_and_evaluate it
 * reloads the best of the past evaluations from the event files of the
 * EvalSpec's eval directory (model_dir/eval or eval_<name>), as TF does, so
 * a restarted job exports only a model better than every earlier one
 * (unlike TF, the reload happens before the first evaluation of this run,
 * so a fresh job exports its first model). Events lacking a metric that
 * compare_fn reads are skipped by the default compare. exports_to_keep as
 * above. New exporter, ownership as loom_exporter_new. */
typedef int (*loom_compare_fn)(void *user, const loom_eval_result *best, const loom_eval_result *current);
LOOM_API loom_exporter *loom_best_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                           loom_compare_fn compare_fn, void *compare_user, int exports_to_keep,
                                           loom_status *st);
/* The best result a BestExporter knows (reloaded or seen); NULL before
 * any or when x is not a BestExporter. Owned by x; valid until the next
 * train_and_evaluate with x or loom_exporter_free. */
LOOM_API const loom_eval_result *loom_best_exporter_best(const loom_exporter *x);
/* FinalExporter: exports only the final evaluation (global_step >=
 * max_steps; with max_steps 0, the evaluation at the end of training).
 * New exporter, ownership as loom_exporter_new. */
LOOM_API loom_exporter *loom_final_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                            loom_status *st);

/* ---- specs ---- */
typedef struct loom_train_spec {
  uint32_t struct_size;
  loom_input_fn input_fn;  /* required */
  void *input_user;
  int64_t max_steps;       /* > 0: train to this global step; 0: until the input ends (TF's None) */
  int32_t nhooks;          /* borrowed */
  loom_hook *const *hooks;
  int32_t nlisteners;      /* saving listeners, run before the evaluation listener */
  const loom_checkpoint_listener *const *listeners;
  void *const *listener_selves;
} loom_train_spec;
LOOM_API loom_train_spec loom_train_spec_default(void);

typedef struct loom_eval_spec {
  uint32_t struct_size;
  loom_input_fn input_fn;  /* required */
  void *input_user;
  int64_t steps;           /* 100; 0: until the input ends (TF's None) */
  const char *name;        /* NULL: eval/, else eval_<name>/ */
  int32_t nhooks;          /* borrowed */
  loom_hook *const *hooks;
  int32_t nexporters;      /* borrowed; names must be distinct */
  loom_exporter *const *exporters;
  double start_delay_secs; /* 120 (distributed evaluator only) */
  double throttle_secs;    /* 600: minimum seconds between evaluations */
} loom_eval_spec;
LOOM_API loom_eval_spec loom_eval_spec_default(void);

/* ---- result ---- */
typedef struct loom_tae_result loom_tae_result;
/* The last evaluation's metrics (NULL when none ran, e.g. no checkpoint).
 * Owned by r; valid until loom_tae_result_free. */
LOOM_API const loom_eval_result *loom_tae_result_metrics(const loom_tae_result *r);
/* The last evaluation's export results: one per exporter, in EvalSpec
 * order; path NULL when that exporter did not export. Owned by r. */
LOOM_API int loom_tae_result_num_exports(const loom_tae_result *r);
LOOM_API const char *loom_tae_result_export_name(const loom_tae_result *r, int i);
LOOM_API const char *loom_tae_result_export_path(const loom_tae_result *r, int i);
/* Every evaluation of the call (global steps, oldest first). */
LOOM_API int loom_tae_result_num_evaluations(const loom_tae_result *r);
LOOM_API int64_t loom_tae_result_evaluation_step(const loom_tae_result *r, int i);
LOOM_API void loom_tae_result_free(loom_tae_result *r);

/* Trains and evaluates (local mode; see the top of this header). *out: a
 * new result (caller frees with loom_tae_result_free), NULL on failure.
 * INVALID_ARGUMENT naming the field for bad specs: a NULL input_fn,
 * negative max_steps, steps, throttle_secs or start_delay_secs, a NULL or
 * repeated exporter, checkpointing disabled in RunConfig. When model_dir's
 * checkpoint is already at max_steps, training is skipped and that
 * checkpoint is evaluated and exported (the final evaluation). */
LOOM_API loom_code loom_train_and_evaluate(loom_estimator *e, const loom_train_spec *train_spec,
                                           const loom_eval_spec *eval_spec, loom_tae_result **out, loom_status *st);

#ifdef __cplusplus
}
#endif
/* distributed jobs: roles from TF_CONFIG, launchers */
#include "loom_job.h"
#endif
