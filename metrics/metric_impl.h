/* metrics/metric_impl.h - internal: the builder context shared by the metric
 * files (variable scope, the metric's local variables, its state
 * assignments) and TF's common input preprocessing. */
#ifndef LOOM_METRIC_IMPL_H
#define LOOM_METRIC_IMPL_H
#include "loom/loom.h"
#include "loom/loom_metrics.h"
#include "ops/build_util.h"

enum { LM_MAX_VARS = 8, LM_MAX_ASSIGNS = 8 };

typedef struct lm_ctx {
  loom_graph *g;
  int nvars;
  loom_variable *vars[LM_MAX_VARS];
  int nassign;
  loom_node *assigns[LM_MAX_ASSIGNS];
  int update_deps; /* control deps pushed by loom__metric_update_begin */
  char where[512]; /* the metric's scope, for messages */
} lm_ctx;

/* Enters the metric's variable scope: name as given, or default_name made
 * unique ("auc", "auc_1", ...). */
void loom__metric_begin(lm_ctx *c, loom_graph *g, const char *name, const char *default_name);
/* A zero-initialised float local metric variable "<scope>/<name>". */
loom_variable *loom__metric_var(lm_ctx *c, const char *name, loom_dtype dt, int ndim, const int64_t *dims);
/* v += delta, recorded as a state assignment; returns the assign's output. */
loom_output loom__metric_assign_add(lm_ctx *c, loom_variable *v, loom_output delta);
/* v[idx[i]] += upd[i], recorded likewise. */
loom_output loom__metric_scatter_add(lm_ctx *c, loom_variable *v, loom_output idx, loom_output upd);
/* Nodes built between begin and end run after every recorded assignment. */
void loom__metric_update_begin(lm_ctx *c);
void loom__metric_update_end(lm_ctx *c);
/* Builds the reset node, leaves the scope and returns the metric. */
loom_metric loom__metric_end(lm_ctx *c, loom_output value, loom_output update);
/* After a graph error: leaves the scope; value and update are `x`. */
loom_metric loom__metric_fail(lm_ctx *c, loom_output x);

/* metrics._remove_squeezable_dimensions(predictions, labels, weights):
 * labels (may be NULL) vs predictions squeezed like
 * confusion_matrix.remove_squeezable_dimensions; then weights (may be NULL
 * or invalid) squeezed / expanded by one trailing dim to predictions' rank.
 * Checks predictions vs labels compatibility; returns 0 on error. */
int loom__metric_squeeze(lm_ctx *c, loom_output *predictions, loom_output *labels, loom_output *weights);

/* TF's mean() body in the current scope: "total" and "count" variables;
 * values are cast to float32; weights (may be invalid) broadcast. */
void loom__metric_mean_core(lm_ctx *c, loom_output values, loom_output weights, loom_output *value,
                            loom_output *update);

#endif
