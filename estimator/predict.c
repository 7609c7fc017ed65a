/* estimator/predict.c - Estimator.predict with a resident graph
 * and session, and Estimator.export.
 *
 * Predict keeps the graph and session of the last call (keyed by the
 * input's element spec): a later call with the same spec reuses them, and
 * re-reads variables only when the newest checkpoint changed. Iterators
 * hold a reference, so several may be interleaved; a context replaced while
 * iterators use it lives until the last one is freed. Calls with hooks (the
 * caller's or the spec's prediction hooks) build a private graph and run it
 * through a monitored session. */
#include "estimator/estimator_impl.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct est_pred_ctx {
  int32_t refs;
  int32_t cached;       /* held by the estimator's cache */
  est_built b;
  loom_session *s;      /* NULL when a monitored session owns it */
  /* element spec of the dataset it was built for */
  int32_t ncomp, label_index;
  char **names;
  loom_dtype *dtypes;
  int32_t *ndims;
  int64_t *dims;        /* ncomp * LOOM_MAX_DIMS */
  char ckpt[4096];      /* restored checkpoint ("" = fresh variables) */
  struct timespec mtime;
} est_pred_ctx;

static void ctx_free(est_pred_ctx *c) {
  if (!c) return;
  loom_session_free(c->s);
  loom__est_built_free(&c->b);
  for (int i = 0; c->names && i < c->ncomp; i++) loom__free(c->names[i]);
  loom__free(c->names);
  loom__free(c->dtypes);
  loom__free(c->ndims);
  loom__free(c->dims);
  loom__free(c);
}

static void ctx_release(est_pred_ctx *c) {
  if (c && --c->refs <= 0 && !c->cached) ctx_free(c);
}

/* The estimator's cache slot lets go of c (freed now unless iterators use it). */
static void cache_release(void *p) {
  est_pred_ctx *c = p;
  if (!c) return;
  c->cached = 0;
  if (c->refs <= 0) ctx_free(c);
}

/* Empties the estimator's cache slot. */
static void cache_drop(loom_estimator *e) {
  est_pred_ctx *c = e->pred_cache;
  e->pred_cache = NULL;
  e->pred_cache_free = NULL;
  cache_release(c);
}

/* Makes c the estimator's resident context; loom_estimator_free releases it
 * through the destructor left in the slot. */
static void cache_set(loom_estimator *e, est_pred_ctx *c) {
  cache_drop(e);
  e->pred_cache = c;
  e->pred_cache_free = cache_release;
  c->cached = 1;
}

static loom_code ctx_record_spec(est_pred_ctx *c, const loom_dataset *ds, loom_status *st) {
  int n = loom_dataset_num_components(ds);
  c->ncomp = n;
  c->label_index = loom_dataset_label_index(ds);
  c->names = loom__calloc((size_t)n + 1, sizeof(char *));
  c->dtypes = loom__calloc((size_t)n + 1, sizeof(loom_dtype));
  c->ndims = loom__calloc((size_t)n + 1, sizeof(int32_t));
  c->dims = loom__calloc((size_t)(n + 1) * LOOM_MAX_DIMS, sizeof(int64_t));
  if (!c->names || !c->dtypes || !c->ndims || !c->dims)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) {
    if (!(c->names[i] = loom__strdup(loom_dataset_component_name(ds, i))))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    c->dtypes[i] = loom_dataset_component_dtype(ds, i);
    c->ndims[i] = loom_dataset_component_shape(ds, i, c->dims + (size_t)i * LOOM_MAX_DIMS);
  }
  return LOOM_OK;
}

static int ctx_matches(const est_pred_ctx *c, const loom_dataset *ds) {
  if (c->ncomp != loom_dataset_num_components(ds) || c->label_index != loom_dataset_label_index(ds)) return 0;
  for (int i = 0; i < c->ncomp; i++) {
    int64_t d[LOOM_MAX_DIMS];
    int nd = loom_dataset_component_shape(ds, i, d);
    if (strcmp(c->names[i], loom_dataset_component_name(ds, i)) || c->dtypes[i] != loom_dataset_component_dtype(ds, i) ||
        nd != c->ndims[i] || memcmp(d, c->dims + (size_t)i * LOOM_MAX_DIMS, sizeof(int64_t) * (size_t)nd))
      return 0;
  }
  return 1;
}

static void file_mtime(const char *path, struct timespec *ts) {
  struct stat sb;
  memset(ts, 0, sizeof *ts);
  if (path && *path && stat(path, &sb) == 0) *ts = sb.st_mtim;
}

/* ------------------------------------------------------------- iterator */
struct loom_prediction_iter {
  loom_estimator *e;
  est_pred_ctx *ctx;
  loom_monitored_session *ms;
  loom_dataset *ds;
  int32_t nds;
  loom_tensor **dsvals, **feedvals;
  int32_t nsel;
  int32_t *sel;
  loom_output *fetch;
  loom_tensor **batch, **cur;
  int32_t single;
  int64_t rows, row;
  int32_t have; /* cur/batch hold a valid result */
};

loom_predict_options loom_predict_options_default(void) {
  loom_predict_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.yield_single_examples = 1;
  return o;
}

void loom_prediction_iter_free(loom_prediction_iter *it) {
  if (!it) return;
  if (it->ms) loom_monitored_session_close(it->ms, NULL);
  for (int i = 0; it->dsvals && i < it->nds; i++) loom_tensor_free(it->dsvals[i]);
  for (int i = 0; i < it->nsel; i++) {
    if (it->batch) loom_tensor_free(it->batch[i]);
    if (it->cur) loom_tensor_free(it->cur[i]);
  }
  loom__free(it->dsvals);
  loom__free(it->feedvals);
  loom__free(it->sel);
  loom__free(it->fetch);
  loom__free(it->batch);
  loom__free(it->cur);
  loom_dataset_free(it->ds);
  ctx_release(it->ctx);
  loom__free(it);
}

static loom_code new_ctx(loom_estimator *e, loom_dataset *ds, est_pred_ctx **out, loom_status *st) {
  est_pred_ctx *c = loom__calloc(1, sizeof *c);
  if (!c) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_code rc = ctx_record_spec(c, ds, st);
  if (rc == LOOM_OK) rc = loom__est_build(e, LOOM_MODE_PREDICT, ds, NULL, NULL, &c->b, st);
  if (rc != LOOM_OK) {
    ctx_free(c);
    return rc;
  }
  *out = c;
  return LOOM_OK;
}

/* Restores (or initialises) the context's session for ckpt. */
static loom_code ctx_load(loom_estimator *e, est_pred_ctx *c, const char *ckpt, loom_status *st) {
  if (!c->s) {
    loom_session_options so = loom__est_session_options(e);
    c->s = loom_session_new(c->b.g, &so, st);
    if (!c->s) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (!ckpt)
    loom__log(LOOM_LOG_INFO, "Could not find trained model in model_dir: %s, running initialization to predict.",
              e->model_dir);
  loom_code rc = loom__est_init_session(e, c->s, c->b.g, ckpt, 0, st);
  if (rc != LOOM_OK) return rc;
  snprintf(c->ckpt, sizeof c->ckpt, "%s", ckpt ? ckpt : "");
  file_mtime(ckpt, &c->mtime);
  return LOOM_OK;
}

typedef struct pred_init {
  loom_estimator *e;
  est_pred_ctx *c;
  const char *ckpt;
} pred_init;

static loom_code pred_init_cb(loom_session *s, void *user, loom_status *st) {
  pred_init *pi = user;
  return loom__est_init_session(pi->e, s, pi->c->b.g, pi->ckpt, 0, st);
}

loom_prediction_iter *loom_estimator_predict(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                             const loom_predict_options *opt, loom_status *st) {
  if (!e || !input_fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator or input_fn is NULL");
    return NULL;
  }
  loom_predict_options o = loom_predict_options_default();
  if (LOOM__OPTS_TAKE(&o, opt, "predict", loom_predict_options, st)) return NULL;
  loom_prediction_iter *it = loom__calloc(1, sizeof *it);
  if (!it) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  it->e = e;
  it->single = o.yield_single_examples != 0;
  it->ds = input_fn(LOOM_MODE_PREDICT, e->params, input_user, st);
  if (!it->ds) {
    if (!st || loom_status_code(st) == LOOM_OK)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "input_fn returned no dataset in mode infer");
    goto fail;
  }
  if (e->config.prefetch > 0 && !(it->ds = loom_dataset_prefetch(it->ds, e->config.prefetch, st))) goto fail;

  char ckbuf[4096];
  const char *ckpt = NULL;
  if (o.checkpoint_path) {
    snprintf(ckbuf, sizeof ckbuf, "%s", o.checkpoint_path);
    ckpt = ckbuf;
  } else if (loom__est_latest(e, ckbuf, sizeof ckbuf)) {
    ckpt = ckbuf;
  }
  /* Reuse the resident context when the input spec matches. */
  est_pred_ctx *c = e->pred_cache;
  if (o.nhooks == 0 && c && ctx_matches(c, it->ds)) {
    struct timespec mt;
    file_mtime(ckpt, &mt);
    int same = !strcmp(c->ckpt, ckpt ? ckpt : "") && mt.tv_sec == c->mtime.tv_sec && mt.tv_nsec == c->mtime.tv_nsec;
    if (!same && c->refs > 0) {
      cache_drop(e); /* in use: detach, build a fresh one */
      c = NULL;
    } else if (!same && ctx_load(e, c, ckpt, st) != LOOM_OK) {
      cache_drop(e);
      goto fail;
    }
  } else {
    c = NULL;
  }
  if (!c) {
    if (new_ctx(e, it->ds, &c, st) != LOOM_OK) goto fail;
    int hooked = o.nhooks > 0 || c->b.spec.nhooks[LOOM_HOOKS_PREDICTION] > 0;
    if (hooked) {
      est_hook_list hl;
      memset(&hl, 0, sizeof hl);
      for (int i = 0; i < o.nhooks; i++) loom__hl_add(&hl, o.hooks[i], 0);
      for (int i = 0; i < c->b.spec.nhooks[LOOM_HOOKS_PREDICTION]; i++)
        loom__hl_add(&hl, c->b.spec.hooks[LOOM_HOOKS_PREDICTION][i], 0);
      pred_init pi = {e, c, ckpt};
      loom_session_options so = loom__est_session_options(e);
      if (hl.oom)
        loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predict: out of memory collecting hooks");
      else
        it->ms = loom_monitored_session_new(c->b.g, &so, pred_init_cb, &pi, hl.n, hl.items, st);
      loom__hl_free(&hl);
      if (!it->ms) {
        ctx_free(c);
        goto fail;
      }
    } else {
      if (ctx_load(e, c, ckpt, st) != LOOM_OK) {
        ctx_free(c);
        goto fail;
      }
      cache_set(e, c);
    }
  }
  it->ctx = c;
  c->refs++;

  /* Selected predictions. */
  const loom_estimator_spec *sp = &c->b.spec;
  int nsel = o.npredict_keys > 0 ? o.npredict_keys : sp->npred;
  it->sel = loom__calloc((size_t)nsel + 1, sizeof(int32_t));
  it->fetch = loom__calloc((size_t)nsel + 1, sizeof(loom_output));
  it->batch = loom__calloc((size_t)nsel + 1, sizeof(loom_tensor *));
  it->cur = loom__calloc((size_t)nsel + 1, sizeof(loom_tensor *));
  it->nds = loom_dataset_num_components(it->ds);
  it->dsvals = loom__calloc((size_t)it->nds + 1, sizeof(loom_tensor *));
  it->feedvals = loom__calloc((size_t)c->b.ncomp + 1, sizeof(loom_tensor *));
  if (!it->sel || !it->fetch || !it->batch || !it->cur || !it->dsvals || !it->feedvals) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int k = 0; k < nsel; k++) {
    int idx = k;
    if (o.npredict_keys > 0) {
      idx = -1;
      for (int j = 0; j < sp->npred; j++)
        if (o.predict_keys[k] && !strcmp(o.predict_keys[k], sp->pred_keys[j])) idx = j;
      if (idx < 0) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "predict: predict_keys entry '%s' is not a prediction key",
                        o.predict_keys[k] ? o.predict_keys[k] : "(null)");
        goto fail;
      }
    }
    it->sel[k] = idx;
    it->fetch[k] = sp->preds[idx];
  }
  it->nsel = nsel;
  return it;
fail:
  loom_prediction_iter_free(it);
  return NULL;
}

static loom_code slice_row(loom_tensor *src, int64_t row, loom_tensor **dst, loom_status *st) {
  int nd = loom_tensor_ndim(src);
  const int64_t *d = loom_tensor_dims(src);
  loom_dtype dt = loom_tensor_dtype(src);
  int64_t per = loom_tensor_numel(src) / (d[0] ? d[0] : 1);
  if (*dst && (loom_tensor_dtype(*dst) != dt || loom_tensor_numel(*dst) != per || dt == LOOM_STRING)) {
    loom_tensor_free(*dst);
    *dst = NULL;
  }
  if (!*dst) {
    *dst = loom_tensor_new(dt, nd - 1, d + 1, st);
    if (!*dst) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  } else if (loom_tensor_reshape(*dst, nd - 1, d + 1, st) != LOOM_OK) {
    return loom_status_code(st);
  }
  if (dt == LOOM_STRING) {
    for (int64_t i = 0; i < per; i++) {
      size_t len = 0;
      const char *s = loom_tensor_get_string(src, row * per + i, &len);
      loom_code rc = loom_tensor_set_string(*dst, i, s, len, st);
      if (rc != LOOM_OK) return rc;
    }
    return LOOM_OK;
  }
  size_t esz = loom_dtype_size(dt);
  memcpy(loom_tensor_data(*dst), (const char *)loom_tensor_data_const(src) + (size_t)(row * per) * esz,
         (size_t)per * esz);
  return LOOM_OK;
}

loom_code loom_prediction_next(loom_prediction_iter *it, loom_status *st) {
  if (!it) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "iterator is NULL");
  est_pred_ctx *c = it->ctx;
  while (!it->single || it->row >= it->rows) {
    it->have = 0;
    if (it->ms && loom_monitored_session_should_stop(it->ms))
      return loom_status_set(st, LOOM_OUT_OF_RANGE, "prediction stopped by a hook");
    loom_code rc = loom_dataset_next(it->ds, it->dsvals, st);
    if (rc != LOOM_OK) return rc; /* OUT_OF_RANGE at the end */
    for (int i = 0; i < c->b.ncomp; i++) it->feedvals[i] = it->dsvals[c->b.comp_index[i]];
    if (it->ms)
      rc = loom_monitored_session_run(it->ms, c->b.inputs, it->feedvals, c->b.ncomp, it->fetch, it->batch, it->nsel,
                                      NULL, 0, st);
    else
      rc = loom_session_run(c->s, c->b.inputs, it->feedvals, c->b.ncomp, it->fetch, it->batch, it->nsel, NULL, 0, st);
    if (rc != LOOM_OK) return rc;
    if (!it->single) {
      it->have = 1;
      return LOOM_OK;
    }
    int64_t rows = -1;
    for (int k = 0; k < it->nsel; k++) {
      const char *key = c->b.spec.pred_keys[it->sel[k]];
      if (loom_tensor_ndim(it->batch[k]) < 1)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "predict: prediction '%s' is a scalar; yield_single_examples needs a batch dimension",
                               key);
      int64_t r = loom_tensor_dim(it->batch[k], 0);
      if (rows >= 0 && r != rows)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "predict: batch length of predictions should be same: '%s' has %lld, others %lld", key,
                               (long long)r, (long long)rows);
      rows = r;
    }
    it->rows = rows < 0 ? 0 : rows;
    it->row = 0;
  }
  for (int k = 0; k < it->nsel; k++) {
    loom_code rc = slice_row(it->batch[k], it->row, &it->cur[k], st);
    if (rc != LOOM_OK) return rc;
  }
  it->row++;
  it->have = 1;
  return LOOM_OK;
}

int loom_prediction_count(const loom_prediction_iter *it) { return it ? it->nsel : 0; }
const char *loom_prediction_key(const loom_prediction_iter *it, int i) {
  return (it && i >= 0 && i < it->nsel) ? it->ctx->b.spec.pred_keys[it->sel[i]] : NULL;
}
const loom_tensor *loom_prediction_value(const loom_prediction_iter *it, int i) {
  if (!it || !it->have || i < 0 || i >= it->nsel) return NULL;
  return it->single ? it->cur[i] : it->batch[i];
}
const loom_tensor *loom_prediction_get(const loom_prediction_iter *it, const char *key) {
  for (int i = 0; it && key && i < it->nsel; i++)
    if (!strcmp(loom_prediction_key(it, i), key)) return loom_prediction_value(it, i);
  return NULL;
}

/* ----------------------------------------------------------------- export */
static const char *method_name(loom_export_kind k) {
  switch (k) {
  case LOOM_EXPORT_CLASSIFY: return "tensorflow/serving/classify";
  case LOOM_EXPORT_REGRESS: return "tensorflow/serving/regress";
  default: return "tensorflow/serving/predict";
  }
}

loom_code loom_estimator_export(loom_estimator *e, loom_serving_input_fn serving_input_fn, void *user,
                                const char *export_dir_base, const char *checkpoint_path, char *out_path,
                                size_t cap, loom_status *st) {
  if (!e || !serving_input_fn || !export_dir_base)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: estimator, serving_input_fn or export_dir_base is NULL");
  char ckpt[4096];
  if (checkpoint_path)
    snprintf(ckpt, sizeof ckpt, "%s", checkpoint_path);
  else if (!loom__est_latest(e, ckpt, sizeof ckpt))
    return loom_status_set(st, LOOM_NOT_FOUND, "Couldn't find trained model at %s.", e->model_dir);
  est_built b;
  loom_code rc = loom__est_build(e, LOOM_MODE_PREDICT, NULL, serving_input_fn, user, &b, st);
  if (rc != LOOM_OK) return rc;
  loom_session_options so = loom__est_session_options(e);
  loom_session *s = loom_session_new(b.g, &so, st);
  loom_signature sigs[32];
  const char *in_keys[64];
  loom_output in_outs[64];
  char *owned_keys[64] = {0}; /* "<name>/row_splits" of sparse receivers */
  int nrec = loom_features_count(b.receivers), nin = 0, nsig = 0;
  char dir[4096], tmp[4096];
  if (!s) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    goto out;
  }
  if ((rc = loom__est_init_session(e, s, b.g, ckpt, 0, st)) != LOOM_OK) goto out;
  /* a sparse (ragged) receiver is two signature inputs: "<name>" (values)
   * and "<name>/row_splits" */
  for (int i = 0; i < nrec && nin < 64; i++) {
    const char *name = loom_features_name(b.receivers, i);
    in_keys[nin] = name;
    in_outs[nin++] = loom_features_at(b.receivers, i);
    if (!loom_features_is_sparse(b.receivers, i) || nin >= 64) continue;
    size_t nl = strlen(name);
    char *k = loom__malloc(nl + sizeof "/row_splits");
    if (!k) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "export: out of memory");
      goto out;
    }
    memcpy(k, name, nl);
    memcpy(k + nl, "/row_splits", sizeof "/row_splits");
    owned_keys[nin] = k;
    in_keys[nin] = k;
    in_outs[nin++] = loom_features_get_sparse(b.receivers, name).row_splits;
  }
  int single_string = nin == 1 && loom_output_dtype(in_outs[0]) == LOOM_STRING;
  if (b.spec.nexp == 0) {
    sigs[0] = (loom_signature){"serving_default", method_name(LOOM_EXPORT_PREDICT), nin, in_keys, in_outs,
                               b.spec.npred, (const char *const *)b.spec.pred_keys, b.spec.preds};
    nsig = 1;
  } else {
    for (int i = 0; i < b.spec.nexp && nsig < 32; i++) {
      est_export_out *x = &b.spec.exps[i];
      if (x->kind != LOOM_EXPORT_PREDICT && !single_string) {
        /* classify / regress take one string tensor of serialized tf.Example (the parsing
         * receiver); over any other receiver they cannot be served, as in TF. serving_default
         * becomes a predict signature over every prediction (what a model_fn without export
         * outputs gets), so TF Serving's :predict works without a signature_name. */
        loom__log(LOOM_LOG_DEBUG, "Export: signature '%s' (%s) needs a single string receiver tensor; %s.", x->name,
                  method_name(x->kind), strcmp(x->name, "serving_default") ? "left out" : "exported as predict");
        if (!strcmp(x->name, "serving_default") && b.spec.npred > 0)
          sigs[nsig++] = (loom_signature){x->name, method_name(LOOM_EXPORT_PREDICT), nin, in_keys, in_outs,
                                          b.spec.npred, (const char *const *)b.spec.pred_keys, b.spec.preds};
        continue;
      }
      /* TF: classify and regress signatures take the serialized examples
       * as "inputs"; predict keeps the receiver's key ("examples") */
      static const char *const inputs_key[1] = {"inputs"};
      sigs[nsig++] = (loom_signature){x->name, method_name(x->kind), nin,
                                      x->kind == LOOM_EXPORT_PREDICT ? in_keys : inputs_key, in_outs,
                                      x->n, (const char *const *)x->keys, x->outputs};
    }
    if (nsig == 0) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "Export includes no signatures: the classify / regress export outputs need a single "
                           "string receiver tensor (serialized tf.Example) and the model has no predictions.");
      goto out;
    }
  }
  if ((rc = loom__mkdir_p(export_dir_base, st)) != LOOM_OK) goto out;
  {
    long long ts = (long long)time(NULL);
    struct stat sb;
    for (;; ts++) {
      snprintf(dir, sizeof dir, "%s/%lld", export_dir_base, ts);
      snprintf(tmp, sizeof tmp, "%s/temp-%lld", export_dir_base, ts);
      if (stat(dir, &sb) != 0 && stat(tmp, &sb) != 0) break;
    }
  }
  if ((rc = loom_export_write(b.g, s, nsig, sigs, tmp, st)) != LOOM_OK) goto out;
  if (rename(tmp, dir) != 0) {
    rc = loom_status_set(st, LOOM_INTERNAL, "export: cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    goto out;
  }
  if (out_path && cap) snprintf(out_path, cap, "%s", dir);
  loom__log(LOOM_LOG_INFO, "Exported model from %s to %s", ckpt, dir);
out:
  for (int i = 0; i < 64; i++) loom__free(owned_keys[i]);
  loom_session_free(s);
  loom__est_built_free(&b);
  return rc;
}
