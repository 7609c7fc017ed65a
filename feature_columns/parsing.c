/* feature_columns/parsing.c - TF's build_parsing_serving_input_receiver_fn:
 * a serving input receiver whose one receiver tensor ("examples", the
 * placeholder "input_example_tensor", string [-1]) holds serialized
 * tf.Example, parsed in the graph by LoomParseExample into the features
 * dict (FixedLen dense, VarLen sparse/ragged). From a feature spec, or from
 * feature columns through make_parse_example_spec. */
#include <string.h>
#include "base/base.h"
#include "loom/loom_feature_columns.h"

struct loom_parsing_receiver {
  int nspec;
  loom_feature_spec *spec; /* names and defaults owned (loom_fc_parse_spec_free) */
};

void loom_parsing_receiver_free(loom_parsing_receiver *r) {
  if (!r) return;
  loom_fc_parse_spec_free(r->nspec, r->spec);
  loom__free(r);
}

static int64_t spec_numel(const loom_feature_spec *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim && d < 8; d++) n *= s->dims[d] > 0 ? s->dims[d] : 0;
  return n;
}

loom_parsing_receiver *loom_parsing_receiver_new(int nspec, const loom_feature_spec *spec, loom_status *st) {
  if (nspec < 1 || nspec > 64 || !spec) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "parsing_serving_input_receiver: %s",
                    !spec ? "spec is NULL" : "between 1 and 64 features are parsed");
    return NULL;
  }
  for (int i = 0; i < nspec; i++) {
    const loom_feature_spec *s = &spec[i];
    if (!s->name || !s->name[0]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "parsing_serving_input_receiver: feature spec %d has no name", i);
      return NULL;
    }
    int varlen = s->kind == LOOM_FEATURE_VAR_LEN || s->varlen;
    if (!varlen && s->kind != LOOM_FEATURE_FIXED_LEN) {
      loom_status_set(st, LOOM_UNIMPLEMENTED,
                      "parsing_serving_input_receiver: feature '%s': only FixedLenFeature and VarLenFeature are "
                      "parsed in a serving graph",
                      s->name);
      return NULL;
    }
    if (!varlen && (s->ndim < 0 || s->ndim > 7)) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "parsing_serving_input_receiver: feature '%s': ndim %d outside [0, 7]",
                      s->name, s->ndim);
      return NULL;
    }
  }
  loom_parsing_receiver *r = loom__calloc(1, sizeof *r);
  if (r) r->spec = loom__calloc((size_t)nspec, sizeof *r->spec);
  if (!r || !r->spec) goto oom;
  for (int i = 0; i < nspec; i++) {
    const loom_feature_spec *s = &spec[i];
    loom_feature_spec *d = &r->spec[i];
    *d = *s;
    d->name = NULL;
    d->default_value = NULL;
    r->nspec = i + 1;
    if (!(d->name = loom__strdup(s->name))) goto oom;
    int varlen = s->kind == LOOM_FEATURE_VAR_LEN || s->varlen;
    if (varlen || !s->default_value) continue;
    int64_t n = spec_numel(s);
    if (s->dtype == LOOM_STRING) {
      /* one block: the pointer array, then the bytes */
      const char *const *sv = s->default_value;
      size_t bytes = (size_t)(n ? n : 1) * sizeof(char *);
      for (int64_t j = 0; j < n; j++) bytes += (sv[j] ? strlen(sv[j]) : 0) + 1;
      char **p = loom__malloc(bytes);
      if (!p) goto oom;
      char *q = (char *)(p + (n ? n : 1));
      for (int64_t j = 0; j < n; j++) {
        size_t l = sv[j] ? strlen(sv[j]) : 0;
        memcpy(q, sv[j] ? sv[j] : "", l + 1);
        p[j] = q;
        q += l + 1;
      }
      d->default_value = p;
    } else {
      size_t bytes = (size_t)(n ? n : 1) * (s->dtype == LOOM_I64 ? 8 : 4);
      void *p = loom__malloc(bytes);
      if (!p) goto oom;
      if (n) memcpy(p, s->default_value, bytes);
      d->default_value = p;
    }
  }
  return r;
oom:
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "parsing_serving_input_receiver: out of memory");
  loom_parsing_receiver_free(r);
  return NULL;
}

loom_parsing_receiver *loom_fc_parsing_receiver_new(int n, const loom_fc *const *cols, loom_status *st) {
  int nspec = 0;
  loom_feature_spec *spec = NULL;
  if (loom_fc_make_parse_example_spec(n, cols, &nspec, &spec, st)) return NULL;
  if (nspec == 0) {
    loom_fc_parse_spec_free(nspec, spec);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "parsing_serving_input_receiver: the columns read no feature");
    return NULL;
  }
  loom_parsing_receiver *r = loom__calloc(1, sizeof *r);
  if (!r) {
    loom_fc_parse_spec_free(nspec, spec);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "parsing_serving_input_receiver: out of memory");
    return NULL;
  }
  r->nspec = nspec;
  r->spec = spec;
  return r;
}

int loom_parsing_receiver_num_features(const loom_parsing_receiver *r) { return r ? r->nspec : 0; }
const loom_feature_spec *loom_parsing_receiver_spec(const loom_parsing_receiver *r) { return r ? r->spec : NULL; }

loom_code loom_parse_example_features(loom_graph *g, loom_output serialized, int nspec, const loom_feature_spec *spec,
                                      loom_features *features, const char *name, loom_status *st) {
  if (!g || !features) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "parse_example_features: %s is NULL", g ? "features" : "graph");
  int nout = loom_parse_example_num_outputs(nspec, spec);
  loom_output out[128];
  if (nout > 128 || nout < 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "parse_example_features: %d outputs (1 to 128)", nout);
  if (loom_parse_example(g, serialized, nspec, spec, nout, out, name) != nout) return loom_graph_status(g, st);
  loom_code rc = LOOM_OK;
  for (int i = 0, o = 0; i < nspec && !rc; i++) {
    if (spec[i].kind == LOOM_FEATURE_VAR_LEN || spec[i].varlen) {
      loom_sparse sp = {out[o], out[o + 1]};
      rc = loom_features_add_sparse(features, spec[i].name, sp, st);
      o += 2;
    } else {
      rc = loom_features_add(features, spec[i].name, out[o++], st);
    }
  }
  return rc;
}

loom_code loom_parsing_serving_input_fn(loom_graph *g, loom_features *features, loom_features *receivers, void *user,
                                        loom_status *st) {
  const loom_parsing_receiver *r = user;
  if (!r) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "parsing_serving_input_fn: user (the receiver) is NULL");
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, d, "input_example_tensor");
  loom_code rc = loom_parse_example_features(g, x, r->nspec, r->spec, features, "ParseExample", st);
  return rc ? rc : loom_features_add(receivers, "examples", x, st);
}
