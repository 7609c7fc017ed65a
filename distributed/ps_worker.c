/* distributed/ps_worker.c - a session that trains against PS tasks.
 *
 * The seam (README "Parameter server"): variables stay ordinary session
 * variables with stable host buffers (engine/variables.h); the worker builds
 * the gradients of the loss with respect to the placed variables, runs them
 * on the session's current values, and one push+pull exchange per PS (all PS
 * in parallel) hands the gradients to the PS's optimizer and writes the new
 * values straight into the session's variable buffers. The optimizer runs
 * only on the PS, with the same kernels, so one worker reproduces local
 * training bit for bit. Steady-state steps reuse the fetched tensors and the
 * connections' buffers: no allocation. */
#include <string.h>
#include "base/base.h"
#include "engine/variables.h"
#include "distributed/ps_client.h"
#include "loom/loom_autodiff.h"
#include "loom/loom_train.h"

struct loom_ps_worker {
  loom_session *s;
  loom_ps_cluster *cl;
  const loom_ps_placement *p;
  int n;
  loom_output *grads;
  loom_output *fetch; /* the non-NULL gradients */
  int *fetch_var;
  int nfetch;
  loom_tensor **gt;
  loom_var_entry **e;
  float **vals;
  const float **g;
};

int loom_ps_var_specs(loom_graph *g, loom_ps_var_spec *out, int cap) {
  int n = 0;
  loom_variable *const *v = loom_trainable_variables(g, &n);
  for (int i = 0; i < n && i < cap; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].name = loom_variable_name(v[i]);
    out[i].ndim = loom_variable_dims(v[i], out[i].dims);
  }
  return n;
}

void loom_ps_worker_free(loom_ps_worker *w) {
  if (!w) return;
  for (int i = 0; i < w->nfetch; i++) loom_tensor_free(w->gt[i]);
  loom__free(w->grads);
  loom__free(w->fetch);
  loom__free(w->fetch_var);
  loom__free(w->gt);
  loom__free(w->e);
  loom__free(w->vals);
  loom__free(w->g);
  loom__free(w);
}

loom_ps_worker *loom_ps_worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p, loom_output loss,
                                   loom_status *st) {
  if (!s || !cl || !p || !loss.node) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_worker_new: NULL session, cluster, placement or loss");
    return NULL;
  }
  if (s->opts.device != LOOM_DEVICE_CPU) {
    loom_status_set(st, LOOM_UNIMPLEMENTED,
                    "loom_ps_worker: CPU sessions only (a device session keeps its variables on the device)");
    return NULL;
  }
  loom_graph *g = loom_session_graph(s);
  int n = loom_ps_placement_num_vars(p);
  loom_ps_worker *w = loom__calloc(1, sizeof *w);
  if (!w) goto oom;
  w->s = s;
  w->cl = cl;
  w->p = p;
  w->n = n;
  size_t k = (size_t)n + 1;
  w->grads = loom__calloc(k, sizeof *w->grads);
  w->fetch = loom__calloc(k, sizeof *w->fetch);
  w->fetch_var = loom__calloc(k, sizeof(int));
  w->gt = loom__calloc(k, sizeof *w->gt);
  w->e = loom__calloc(k, sizeof *w->e);
  w->vals = loom__calloc(k, sizeof *w->vals);
  w->g = loom__calloc(k, sizeof *w->g);
  loom_output *xs = loom__calloc(k, sizeof *xs);
  if (!w->grads || !w->fetch || !w->fetch_var || !w->gt || !w->e || !w->vals || !w->g || !xs) {
    loom__free(xs);
    goto oom;
  }
  for (int i = 0; i < n; i++) {
    const loom_ps_var_spec *vs = loom_ps_placement_var(p, i);
    loom_variable *v = loom_graph_variable(g, vs->name);
    int64_t dims[LOOM_MAX_DIMS];
    int nd = v ? loom_variable_dims(v, dims) : -1;
    int same = v && nd == vs->ndim && loom_variable_dtype(v) == LOOM_F32;
    for (int d = 0; same && d < nd; d++) same = dims[d] == vs->dims[d];
    if (!same) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      v ? "variable %s of the placement has another shape or dtype in the graph (float32 needed)"
                        : "variable %s of the placement is not in the graph",
                      vs->name);
      loom__free(xs);
      loom_ps_worker_free(w);
      return NULL;
    }
    xs[i] = loom_variable_output(v);
  }
  loom_code rc = loom_gradients(g, 1, &loss, NULL, n, xs, w->grads, st);
  loom__free(xs);
  if (rc) {
    loom_ps_worker_free(w);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    const loom_ps_var_spec *vs = loom_ps_placement_var(p, i);
    w->e[i] = loom__var_entry(s, vs->name, st);
    if (!w->e[i]) {
      loom_ps_worker_free(w);
      return NULL;
    }
    w->vals[i] = w->e[i]->data;
    if (w->grads[i].node) {
      w->fetch[w->nfetch] = w->grads[i];
      w->fetch_var[w->nfetch++] = i;
    }
  }
  return w;
oom:
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: out of memory");
  loom_ps_worker_free(w);
  return NULL;
}

loom_code loom_ps_worker_init_vars(loom_ps_worker *w, loom_ps_optimizer opt, const float *hyper, loom_status *st) {
  for (int i = 0; i < w->n; i++) {
    if (!w->e[i]->initialized)
      return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                             "variable %s is not initialized in the chief's session (run the initializer first)",
                             w->e[i]->name);
    loom_code rc = loom_ps_cluster_init_var(w->cl, i, opt, hyper, w->vals[i], st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static void mark_all(loom_ps_worker *w) {
  loom_var_store *vs = loom__var_store(w->s, NULL);
  for (int i = 0; i < w->n; i++)
    if (!w->e[i]->initialized && vs) loom__var_mark_initialized(vs, w->e[i]);
}

loom_code loom_ps_worker_pull(loom_ps_worker *w, loom_status *st) {
  loom_code rc = loom_ps_cluster_pull(w->cl, w->vals, st);
  if (!rc) mark_all(w);
  return rc;
}

loom_code loom_ps_worker_step(loom_ps_worker *w, const loom_output *feeds, loom_tensor *const *feed_values,
                              int nfeeds, loom_status *st) {
  loom_code rc = loom_session_run(w->s, feeds, feed_values, nfeeds, w->fetch, w->gt, w->nfetch, NULL, 0, st);
  if (rc) return rc;
  for (int i = 0; i < w->n; i++) w->g[i] = NULL;
  for (int j = 0; j < w->nfetch; j++) w->g[w->fetch_var[j]] = loom_tensor_data(w->gt[j]);
  rc = loom_ps_cluster_pushpull(w->cl, w->g, w->vals, st);
  if (!rc) mark_all(w);
  return rc;
}
