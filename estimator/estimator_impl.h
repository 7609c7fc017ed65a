/* estimator/estimator_impl.h - internals shared by the estimator's files.
 * Not installed. Who calls whom (no two files call each other):
 *   estimator.c (construction, train, evaluate) -> build.c
 *   predict.c   (predict, export)              -> build.c, spec.c's types
 *   hooks/in_memory_eval.c                     -> build.c, estimator.c (eval helpers)
 *   cluster.c   (train_and_evaluate's dispatch by role, loom_run_job) -> estimator.c (train),
 *                train_and_evaluate.c (local mode, evaluation), distributed/job.c (strategy, PS task)
 *   train_and_evaluate.c                       -> build.c, estimator.c (eval helpers), exporters.c
 *   exporters.c (Latest/Best/FinalExporter)    -> estimator.c (eval results), the public export API
 *   build.c     (graph per mode, session init, checkpoints, hook lists) -> spec.c
 *   spec.c      (EstimatorSpec)                -> nothing in estimator/
 * The estimator frees predict's resident context through the destructor
 * predict.c stores with it (pred_cache_free), not by calling predict.c. */
#ifndef LOOM_ESTIMATOR_IMPL_H
#define LOOM_ESTIMATOR_IMPL_H
#include "engine/engine_api.h"
#include "base/fsutil.h"
#include "distributed/strategy.h"
#include "loom/loom_data.h"
#include "loom/loom_estimator.h"
#include "loom/loom_export.h"
#include "loom/loom_hooks.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"

typedef struct est_export_out {
  char *name;
  loom_export_kind kind;
  int32_t n;
  char **keys;
  loom_output *outputs;
} est_export_out;

struct loom_estimator_spec {
  loom_mode mode;
  loom_graph *g;
  int has_loss;
  loom_output loss;
  loom_node *train_op;
  int32_t npred;
  char **pred_keys;
  loom_output *preds;
  int32_t nmet;
  char **met_names;
  loom_metric *mets;
  int32_t nexp;
  est_export_out *exps;
  int32_t nhooks[4];
  loom_hook **hooks[4];
  /* The first failure of a loom_spec_* setter (sticky: spec_validate
   * reports it with the setter's name; no allocation, so OOM fits too). */
  loom_code err;
  char err_msg[256];
};

struct loom_eval_result {
  int32_t n;
  char **keys;
  double *values;
  int64_t global_step;
};

struct loom_estimator {
  loom_model_fn model_fn;
  void *user;
  char *model_dir;
  loom_run_config config;
  loom_params *params;
  char *warm_start_from;
  char *warm_start_regex;
  int is_chief;
  /* predict.c's resident graph + session and its destructor, both set by
   * predict.c; loom_estimator_free calls pred_cache_free(pred_cache). */
  void *pred_cache;
  void (*pred_cache_free)(void *pred_cache);
  /* Set by estimator/canned: user_free(user) in loom_estimator_free (the
   * canned model's state); warm_start_fn replaces warm_start_from's warm
   * start when set (WarmStartSettings), warm_start_free frees its state. */
  void (*user_free)(void *user);
  void *warm_start_state;
  loom_code (*warm_start_fn)(void *state, loom_session *s, loom_graph *g, loom_status *st);
  void (*warm_start_free)(void *state);
};

/* ---- spec.c ---- */
/* Frees what the spec holds (its hooks included) and zeroes it. */
void loom__spec_clear(loom_estimator_spec *s);
/* TF's EstimatorSpec validation for the spec's mode. */
loom_code loom__spec_validate(const loom_estimator_spec *s, loom_status *st);

/* ---- build.c ---- */
/* The hooks of one call. */
typedef struct est_hook_list {
  int32_t n, cap;
  loom_hook **items;
  uint8_t *owned; /* created by the estimator: freed with the list */
  int oom;        /* an add failed (an owned hook was freed then) */
} est_hook_list;
void loom__hl_add(est_hook_list *l, loom_hook *h, int own);
void loom__hl_free(est_hook_list *l);

/* Pins the checkpoint to restore (given, or the newest; *have = 0 when
 * there is none) as `pin`; unpin after the restore. */
/* The global_step stored in checkpoint file ckpt (int32 or int64); missing
 * when the file or the tensor cannot be read (estimator.c). */
int64_t loom__ckpt_global_step(const char *ckpt, int64_t missing);
loom_code loom__est_pin_checkpoint(const loom_estimator *e, const char *given, char *ckpt, size_t cap, char *pin,
                                   size_t pcap, int *have, loom_status *st);
void loom__est_unpin_checkpoint(const char *ckpt, const char *pin);

/* A graph built for one mode: placeholders for the input components, the
 * model_fn's spec. */
typedef struct est_built {
  loom_graph *g;
  loom_variable *global_step;
  loom_estimator_spec spec;
  loom_features *features;
  loom_features *receivers; /* export only */
  int32_t ncomp;            /* dataset components (feeds) */
  int32_t *comp_index;      /* dataset component index of feed i */
  loom_output *inputs;      /* placeholders, one per feed */
  loom_output labels;
} est_built;

/* The hooks of a training call, in TF's order: the caller's hooks (borrowed), NaN loss, the loss/step
 * logging hook (progress_total > 0: its progress bar's total), the spec's training hooks, and a stop
 * at steps / max_steps when either is set. */
void loom__est_add_train_hooks(est_hook_list *hl, const loom_estimator *e, const est_built *b, loom_output gs_out,
                               int nhooks, loom_hook *const *hooks, int64_t steps, int64_t max_steps,
                               int64_t progress_total, loom_status *st);
/* The chief's hooks: the checkpoint saver (when e's RunConfig saves checkpoints) with its listeners, the
 * spec's chief hooks, the step counter and the summary saver, writing to writer. */
void loom__est_add_chief_hooks(est_hook_list *hl, const loom_estimator *e, const est_built *b,
                               loom_event_writer *writer, int nlisteners,
                               const loom_checkpoint_listener *const *listeners, void *const *listener_selves,
                               loom_status *st);

loom_code loom__est_build(loom_estimator *e, loom_mode mode, loom_dataset *ds, loom_serving_input_fn serving,
                          void *serving_user, est_built *b, loom_status *st);
void loom__est_built_free(est_built *b);
/* Restores ckpt (NULL: fresh init + warm start when allowed) and runs the
 * local initializers. */
loom_code loom__est_init_session(loom_estimator *e, loom_session *s, loom_graph *g, const char *ckpt,
                                 int allow_warm_start, loom_status *st);
/* The latest checkpoint of model_dir into buf; 0 when none. */
int loom__est_latest(const loom_estimator *e, char *buf, size_t cap);
loom_session_options loom__est_session_options(const loom_estimator *e);
char *loom__path_join(const char *a, const char *b);
/* Resolves a warm start source (checkpoint file, model directory, export
 * directory) to a checkpoint file; 0 when there is none. */
int loom__est_warm_start_path(const char *from, char *buf, size_t cap);

/* ---- estimator.c: evaluation, shared with hooks/in_memory_eval.c ---- */
loom_eval_result *loom__eval_result_new(int n, char *const *keys, const double *values, int64_t step);
loom_eval_result *loom__eval_result_copy(const loom_eval_result *r);
loom_code loom__est_write_eval(loom_estimator *e, const char *name, const loom_eval_result *r,
                               const char *ckpt, loom_status *st);
/* Evaluation state over a built EVAL graph: the loss mean metric plus the
 * spec's metrics; shared with the in-memory evaluator. */
typedef struct est_eval_ops {
  int32_t n;            /* "loss", the spec's metrics, then "global_step" (last) */
  char **names;
  loom_output *values;
  loom_node *update;    /* group of all update ops */
} est_eval_ops;

void loom__est_eval_ops_free(est_eval_ops *o);
loom_code loom__est_eval_ops(est_built *b, est_eval_ops *o, loom_status *st);
loom_code loom__est_eval_run(loom_estimator *e, loom_monitored_session *ms, loom_dataset *ds, est_built *b,
                             est_eval_ops *o, int64_t steps, loom_eval_result **out, loom_status *st);

/* ---- exporters.c, used by train_and_evaluate.c ---- */
loom_code loom__exporter_begin(loom_exporter *x, loom_estimator *e, const char *eval_dir, loom_status *st);
/* out: the export directory written, "" when the exporter exported nothing. */
loom_code loom__exporter_export(loom_exporter *x, loom_estimator *e, const char *export_path, const char *ckpt,
                                const loom_eval_result *r, int is_final, char *out, size_t cap, loom_status *st);
/* 1 for a FinalExporter. */
int loom__exporter_is_final(const loom_exporter *x);


/* features: feature_columns/features.h (the map lives below the estimator) */
#include "feature_columns/features.h"

/* ---- estimator.c: the one training loop ---- */
/* Estimator.train under strategy s (NULL: local; distributed/strategy.h). */
loom_code loom__est_train(loom_estimator *e, loom_input_fn input_fn, void *input_user, const loom_train_options *opt,
                          loom__strategy *s, loom_status *st);

/* ---- train_and_evaluate.c, used by cluster.c (the dispatch by role) ---- */
/* train_and_evaluate in local mode. */
loom_code loom__tae_local(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                          loom_tae_result **out, loom_status *st);
typedef struct loom__tae_eval loom__tae_eval;
/* INVALID_ARGUMENT naming the field of ts or es that is wrong (es NULL: training alone, ts only). */
loom_code loom__tae_check_specs(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                loom_status *st);
loom__tae_eval *loom__tae_eval_new(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                   loom_status *st);
/* Evaluates model_dir's latest checkpoint (of global step `step`) and runs the exporters. */
loom_code loom__tae_eval_latest(loom__tae_eval *x, int64_t step, loom_status *st);
int64_t loom__tae_eval_last_step(const loom__tae_eval *x); /* -1 before the first */
loom_tae_result *loom__tae_eval_take(loom__tae_eval *x);  /* the result, handed over */
void loom__tae_eval_free(loom__tae_eval *x);

/* Whether g has a scalar summary tagged "loss" (the model_fn wrote its own). */
int loom__est_has_loss_summary(loom_graph *g);

#endif
