/* data/graph_map.c - Dataset.map with a traced function: each element of
 * the input is fed to a graph's placeholders and the graph's outputs are
 * the new element (a session run per element, all in C). See loom_data.h
 * (loom_dataset_map_graph). */
#include <stdio.h>
#include <string.h>
#include "data/data_impl.h"
#include "loom/loom_session.h"

typedef struct gmap_ds {
  loom_dataset base;
  loom_dataset *in;
  loom_graph *g;
  loom_session *s;
  int nin, nout;
  loom_output *inputs, *outputs;
  loom_tensor **in_vals;
} gmap_ds;

static loom_code gmap_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  gmap_ds *m = (gmap_ds *)ds;
  loom_code rc = loom_dataset_next(m->in, m->in_vals, st);
  if (rc) return rc;
  rc = loom_session_run(m->s, m->inputs, m->in_vals, m->nin, m->outputs, values, m->nout, NULL, 0, st);
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", loom_status_message(st));
    return loom_status_set(st, rc, "map: the mapped function failed: %s", msg);
  }
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *k = &ds->comp[c];
    int ok = loom_tensor_ndim(values[c]) == k->ndim;
    for (int d = 0; ok && d < k->ndim; d++) ok = k->dims[d] < 0 || k->dims[d] == loom_tensor_dim(values[c], d);
    if (!ok) {
      char a[128], b[128];
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "map: component '%s' came out %s; the traced shape is %s",
                             k->name,
                             loom__dims_str(a, sizeof a, loom_tensor_ndim(values[c]), loom_tensor_dims(values[c])),
                             loom__dims_str(b, sizeof b, k->ndim, k->dims));
    }
  }
  return loom__ds_check_ragged(ds, values, "map", st);
}

static loom_code gmap_reset(loom_dataset *ds, loom_status *st) { return loom_dataset_reset(((gmap_ds *)ds)->in, st); }

static void gmap_destroy(loom_dataset *ds) {
  gmap_ds *m = (gmap_ds *)ds;
  if (m->in_vals)
    for (int i = 0; i < m->nin; i++) loom_tensor_free(m->in_vals[i]);
  loom__free(m->in_vals);
  loom__free(m->inputs);
  loom__free(m->outputs);
  loom_session_free(m->s);
  loom_graph_free(m->g);
  loom_dataset_free(m->in);
}

static const loom_ds_vtable gmap_vt = {"map", gmap_next, NULL, gmap_reset, gmap_destroy, NULL, NULL};

loom_dataset *loom_dataset_map_graph(loom_dataset *in, loom_graph *g, int nin, const loom_output *inputs, int nout,
                                     const char *const *names, const loom_output *outputs, const int32_t *ragged,
                                     const char *label_name, loom_status *st) {
  const char *bad = NULL;
  if (!in)
    bad = "the input dataset is NULL";
  else if (!g)
    bad = "the graph is NULL";
  else if (nin != loom_dataset_num_components(in))
    bad = "nin must equal the input's number of components";
  else if (nout <= 0 || !names || !outputs || (nin > 0 && !inputs))
    bad = nout <= 0 ? "nout must be positive" : "names, outputs or inputs is NULL";
  for (int i = 0; !bad && i < nout; i++) {
    if (!names[i] || !outputs[i].node) bad = "a name or an output is NULL";
    else if (ragged && ragged[i] && (i + 1 >= nout || ragged[i + 1] || loom_output_dtype(outputs[i + 1]) != LOOM_I64))
      bad = "a ragged values output must be followed by its int64 row_splits output";
  }
  for (int i = 0; !bad && i < nin; i++)
    if (loom_output_dtype(inputs[i]) != loom_dataset_component_dtype(in, i)) bad = "an input's dtype differs from its component's";
  if (bad) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "map_graph: %s", bad);
    loom_dataset_free(in);
    loom_graph_free(g);
    return NULL;
  }
  gmap_ds *m = (gmap_ds *)loom__ds_new(sizeof(gmap_ds), &gmap_vt, nout, st);
  if (!m) {
    loom_dataset_free(in);
    loom_graph_free(g);
    return NULL;
  }
  loom_dataset *ds = &m->base;
  m->in = in;
  m->g = g;
  m->nin = nin;
  m->nout = nout;
  m->inputs = loom__calloc((size_t)(nin > 0 ? nin : 1), sizeof *m->inputs);
  m->outputs = loom__calloc((size_t)nout, sizeof *m->outputs);
  m->in_vals = loom__calloc((size_t)(nin > 0 ? nin : 1), sizeof *m->in_vals);
  if (!m->inputs || !m->outputs || !m->in_vals) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "map_graph: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  if (nin) memcpy(m->inputs, inputs, (size_t)nin * sizeof *inputs);
  memcpy(m->outputs, outputs, (size_t)nout * sizeof *outputs);
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1; /* one element at a time: no pool */
  if (!(m->s = loom_session_new(g, &so, st))) {
    loom_dataset_free(ds);
    return NULL;
  }
  int label = -1;
  for (int i = 0; i < nout; i++) {
    loom_code rc;
    if (ragged && ragged[i]) {
      rc = loom__ds_set_ragged(ds, i, names[i], loom_output_dtype(outputs[i]), st);
      if (!rc && ragged[i] == 2) { /* a batch of rows: splits [B + 1] */
        ds->comp[i].batched = ds->comp[i + 1].batched = 1;
        ds->comp[i + 1].dims[0] = -1;
      }
      if (label_name && !strcmp(label_name, names[i]))
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "map_graph: the label '%s' is ragged; labels must be dense",
                             label_name);
      i++;
    } else {
      int64_t dims[LOOM_MAX_DIMS];
      int nd = loom_output_dims(outputs[i], dims);
      if (nd < 0) nd = 0;
      rc = loom__ds_set_comp(ds, i, names[i], loom_output_dtype(outputs[i]), nd, dims, st);
      if (label_name && !strcmp(label_name, names[i])) label = i;
    }
    if (rc) {
      loom_dataset_free(ds);
      return NULL;
    }
  }
  if (label_name && label < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "map_graph: label_name '%s' is not one of the outputs", label_name);
    loom_dataset_free(ds);
    return NULL;
  }
  ds->label = label;
  return ds;
}
