/* The resident predictor: an export directory (estimator/export.c) loaded
 * once into its own graph and session; each call maps the signature's
 * inputs to feeds and runs the session's cached plan (no graph walk, no
 * file access, and no allocation once the caller's output tensors have the
 * right size and the input shapes repeat). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/base.h"
#include "loom/loom.h"
#include "loom/loom_export.h"
#include "loom/loom_train.h"

#define DEFAULT_SIGNATURE "serving_default"

/* The static type of a fed output: dims of -1 are unknown. */
typedef struct psig_desc {
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
} psig_desc;

typedef struct psig {
  char *name, *method;
  int32_t nin, nout;
  char **in_keys, **out_keys;
  loom_output *in, *out;
  psig_desc *in_desc; /* the fed outputs' static types */
} psig;

struct loom_predictor {
  loom_graph *g;
  loom_session *s;
  pthread_mutex_t mu;
  int32_t nsig;
  psig *sigs;
  int32_t def; /* default signature index, -1 when absent */
};

loom_predictor_options loom_predictor_options_default(void) {
  loom_predictor_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.num_threads = 0;
  o.signature = NULL;
  return o;
}

static void psig_clear(psig *sg) {
  loom__free(sg->name);
  loom__free(sg->method);
  for (int i = 0; sg->in_keys && i < sg->nin; i++) loom__free(sg->in_keys[i]);
  for (int i = 0; sg->out_keys && i < sg->nout; i++) loom__free(sg->out_keys[i]);
  loom__free(sg->in_keys);
  loom__free(sg->out_keys);
  loom__free(sg->in);
  loom__free(sg->out);
  loom__free(sg->in_desc);
}

void loom_predictor_free(loom_predictor *p) {
  if (!p) return;
  for (int i = 0; p->sigs && i < p->nsig; i++) psig_clear(&p->sigs[i]);
  loom__free(p->sigs);
  loom_session_free(p->s);
  loom_graph_free(p->g);
  pthread_mutex_destroy(&p->mu);
  loom__free(p);
}

/* Reads a whole file (NUL-terminated copy). */
static loom_code slurp(const char *path, char **out, size_t *len, loom_status *st) {
  *out = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return loom_status_set(st, e == ENOENT || e == ENOTDIR ? LOOM_NOT_FOUND : LOOM_PERMISSION_DENIED,
                           "predictor: cannot open %s: %s", path, strerror(e));
  }
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s is not a regular file", path);
  }
  size_t n = (size_t)sb.st_size;
  char *buf = loom__malloc(n + 1);
  if (!buf) {
    close(fd);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory reading %s", path);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  if (got != n) {
    loom__free(buf);
    return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: short read (%zu of %zu bytes)", path, got, n);
  }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return LOOM_OK;
}

static loom_dtype dtype_by_name(const char *s) {
  for (int d = 1; d < LOOM_DTYPE_COUNT; d++)
    if (!strcmp(loom_dtype_name((loom_dtype)d), s)) return (loom_dtype)d;
  return LOOM_DTYPE_INVALID;
}

static char *dup_or_oom(const char *s, int *oom) {
  char *d = loom__strdup(s);
  if (!d) *oom = 1;
  return d;
}

/* One "inputs"/"outputs" object of a signature. */
static loom_code parse_tensors(loom_predictor *p, const char *file, psig *sg, const cJSON *obj, int is_in,
                               loom_status *st) {
  const char *what = is_in ? "inputs" : "outputs";
  if (!cJSON_IsObject(obj))
    return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s: \"%s\" is missing or not an object", file,
                           sg->name, what);
  int n = cJSON_GetArraySize(obj);
  char **keys = loom__calloc((size_t)n + 1, sizeof *keys);
  loom_output *outs = loom__calloc((size_t)n + 1, sizeof *outs);
  psig_desc *desc = is_in ? loom__calloc((size_t)n + 1, sizeof *desc) : NULL;
  if (is_in) {
    sg->in_keys = keys;
    sg->in = outs;
    sg->in_desc = desc;
  } else {
    sg->out_keys = keys;
    sg->out = outs;
  }
  if (!keys || !outs || (is_in && !desc))
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
  int i = 0, oom = 0;
  for (const cJSON *t = obj->child; t; t = t->next, i++) {
    if (!t->string || !t->string[0])
      return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s: %s entry %d has no key", file, sg->name,
                             what, i);
    keys[i] = dup_or_oom(t->string, &oom);
    if (is_in) sg->nin = i + 1;
    else sg->nout = i + 1;
    if (oom) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!cJSON_IsString(nm) || !cJSON_IsString(dt) || !cJSON_IsArray(sh))
      return loom_status_set(st, LOOM_DATA_LOSS,
                             "predictor: %s: signature %s %s %s: needs \"name\", \"dtype\" (strings) and \"shape\" "
                             "(an array)",
                             file, sg->name, is_in ? "input" : "output", t->string);
    loom_output o = loom_graph_find_output(p->g, nm->valuestring);
    if (!o.node)
      return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s %s %s: tensor %s is not in the graph",
                             file, sg->name, is_in ? "input" : "output", t->string, nm->valuestring);
    loom_dtype want = dtype_by_name(dt->valuestring);
    if (want != loom_output_dtype(o))
      return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s %s %s: dtype %s, but the graph's %s is %s",
                             file, sg->name, is_in ? "input" : "output", t->string, dt->valuestring, nm->valuestring,
                             loom_dtype_name(loom_output_dtype(o)));
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_output_dims(o, dims), ok = cJSON_GetArraySize(sh) == nd, d = 0;
    for (const cJSON *e = sh->child; ok && e; e = e->next, d++) ok = cJSON_IsNumber(e) && e->valuedouble == (double)dims[d];
    if (!ok)
      return loom_status_set(st, LOOM_DATA_LOSS,
                             "predictor: %s: signature %s %s %s: the shape does not match the graph's %s", file,
                             sg->name, is_in ? "input" : "output", t->string, nm->valuestring);
    for (int j = 0; j < i; j++)
      if (!strcmp(keys[j], keys[i]))
        return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s: %s key %s appears twice", file,
                               sg->name, what, keys[i]);
    outs[i] = o;
    if (is_in) {
      desc[i].dtype = want;
      desc[i].ndim = nd;
      memcpy(desc[i].dims, dims, sizeof(int64_t) * (size_t)nd);
    }
  }
  return LOOM_OK;
}

static loom_code parse_signatures(loom_predictor *p, const char *file, const char *text, loom_status *st) {
  const char *errp = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &errp, 1);
  if (!root)
    return loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s is not valid JSON (error at byte %ld)", file,
                           errp ? (long)(errp - text) : -1L);
  loom_code rc = LOOM_OK;
  int n = cJSON_IsObject(root) ? cJSON_GetArraySize(root) : 0;
  if (n < 1) {
    rc = loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s holds no signatures", file);
    goto done;
  }
  p->sigs = loom__calloc((size_t)n, sizeof *p->sigs);
  if (!p->sigs) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
    goto done;
  }
  for (const cJSON *s = root->child; s && !rc; s = s->next) {
    psig *sg = &p->sigs[p->nsig++];
    int oom = 0;
    sg->name = dup_or_oom(s->string ? s->string : "", &oom);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "method_name");
    sg->method = dup_or_oom(cJSON_IsString(m) ? m->valuestring : "", &oom);
    if (oom) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
      break;
    }
    if (!sg->name[0] || !cJSON_IsObject(s)) {
      rc = loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %d is not a named object", file, p->nsig - 1);
      break;
    }
    for (int j = 0; j < p->nsig - 1; j++)
      if (!strcmp(p->sigs[j].name, sg->name)) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s appears twice", file, sg->name);
        break;
      }
    if (!rc) rc = parse_tensors(p, file, sg, cJSON_GetObjectItemCaseSensitive(s, "inputs"), 1, st);
    if (!rc) rc = parse_tensors(p, file, sg, cJSON_GetObjectItemCaseSensitive(s, "outputs"), 0, st);
    if (!rc && sg->nout < 1) rc = loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s: signature %s has no outputs", file, sg->name);
  }
done:
  cJSON_Delete(root);
  return rc;
}

static int is_variable(const loom_node *n) { return !strcmp(loom_node_op_name(n), "VariableV2"); }

/* Every VariableV2 of the imported graph, restored from the checkpoint. */
static loom_code restore_variables(loom_predictor *p, const char *ckpt, loom_status *st) {
  int nv = 0;
  for (int i = 0; i < loom_graph_num_nodes(p->g); i++) nv += is_variable(loom_graph_node_at(p->g, i));
  if (nv == 0) {
    if (access(ckpt, R_OK))
      return loom_status_set(st, LOOM_NOT_FOUND, "predictor: cannot open %s: %s", ckpt, strerror(errno));
    return LOOM_OK;
  }
  loom_variable **vars = loom__calloc((size_t)nv, sizeof *vars);
  if (!vars) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
  int k = 0;
  for (int i = 0; i < loom_graph_num_nodes(p->g); i++) {
    loom_node *n = loom_graph_node_at(p->g, i);
    if (!is_variable(n)) continue;
    vars[k] = loom_graph_variable(p->g, loom_node_name(n));
    if (!vars[k]) {
      loom__free(vars);
      return loom_status_set(st, LOOM_INTERNAL, "predictor: variable %s was not registered on import",
                             loom_node_name(n));
    }
    k++;
  }
  loom_code rc = LOOM_OK;
  loom_saver *sv = loom_saver_new(p->g, nv, vars, 0, st);
  if (!sv) rc = loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  else rc = loom_saver_restore(sv, p->s, ckpt, st);
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", loom_status_message(st));
    loom_status_set(st, rc, "predictor: restoring the variables: %s", msg);
  }
  loom_saver_free(sv);
  loom__free(vars);
  return rc;
}

loom_predictor *loom_predictor_load(const char *export_dir, const loom_predictor_options *opts, loom_status *st) {
  if (!export_dir || !*export_dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: export_dir is NULL or empty");
    return NULL;
  }
  loom_predictor_options o = loom_predictor_options_default();
  if (LOOM__OPTS_TAKE(&o, opts, "predictor", loom_predictor_options, st)) return NULL;
  loom_predictor *p = loom__calloc(1, sizeof *p);
  if (!p) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  p->def = -1;
  char path[4200];
  char *buf = NULL;
  size_t len = 0;
  loom_code rc;
  /* the graph */
  snprintf(path, sizeof path, "%s/saved_model.loom", export_dir);
  if ((rc = slurp(path, &buf, &len, st))) goto fail;
  p->g = loom_graph_new();
  if (!p->g) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "predictor: out of memory");
    goto fail;
  }
  rc = loom_graph_deserialize(p->g, buf, len, st);
  loom__free(buf);
  buf = NULL;
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", loom_status_message(st));
    loom_status_set(st, rc, "predictor: %s: %s", path, msg);
    goto fail;
  }
  /* the signatures */
  snprintf(path, sizeof path, "%s/signatures.json", export_dir);
  if ((rc = slurp(path, &buf, &len, st))) goto fail;
  if (memchr(buf, 0, len)) {
    rc = loom_status_set(st, LOOM_DATA_LOSS, "predictor: %s contains NUL bytes", path);
    goto fail;
  }
  rc = parse_signatures(p, path, buf, st);
  loom__free(buf);
  buf = NULL;
  if (rc) goto fail;
  const char *want = o.signature ? o.signature : DEFAULT_SIGNATURE;
  for (int i = 0; i < p->nsig; i++)
    if (!strcmp(p->sigs[i].name, want)) p->def = i;
  if (p->def < 0 && o.signature) {
    rc = loom_status_set(st, LOOM_NOT_FOUND, "predictor: %s has no signature %s", export_dir, o.signature);
    goto fail;
  }
  /* the session and the variables */
  loom_session_options so = loom_session_options_default();
  so.num_threads = o.num_threads;
  p->s = loom_session_new(p->g, &so, st);
  if (!p->s) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    goto fail;
  }
  snprintf(path, sizeof path, "%s/variables/variables.ckpt", export_dir);
  if ((rc = restore_variables(p, path, st))) goto fail;
  loom_status_clear(st);
  return p;
fail:
  loom__free(buf);
  loom_predictor_free(p);
  return NULL;
}

static const psig *find_sig(const loom_predictor *p, const char *signature) {
  if (!p) return NULL;
  if (!signature) return p->def >= 0 ? &p->sigs[p->def] : NULL;
  for (int i = 0; i < p->nsig; i++)
    if (!strcmp(p->sigs[i].name, signature)) return &p->sigs[i];
  return NULL;
}

int loom_predictor_num_inputs(const loom_predictor *p, const char *signature) {
  const psig *sg = find_sig(p, signature);
  return sg ? sg->nin : -1;
}
const char *loom_predictor_input_key(const loom_predictor *p, const char *signature, int i) {
  const psig *sg = find_sig(p, signature);
  return sg && i >= 0 && i < sg->nin ? sg->in_keys[i] : NULL;
}
int loom_predictor_num_outputs(const loom_predictor *p, const char *signature) {
  const psig *sg = find_sig(p, signature);
  return sg ? sg->nout : -1;
}
const char *loom_predictor_output_key(const loom_predictor *p, const char *signature, int i) {
  const psig *sg = find_sig(p, signature);
  return sg && i >= 0 && i < sg->nout ? sg->out_keys[i] : NULL;
}

int loom_predictor_num_signatures(const loom_predictor *p) { return p ? p->nsig : -1; }
const char *loom_predictor_signature_name(const loom_predictor *p, int i) {
  return p && i >= 0 && i < p->nsig ? p->sigs[i].name : NULL;
}
loom_dtype loom_predictor_input_dtype(const loom_predictor *p, const char *signature, int i) {
  const psig *sg = find_sig(p, signature);
  return sg && i >= 0 && i < sg->nin ? sg->in_desc[i].dtype : LOOM_DTYPE_INVALID;
}
int loom_predictor_input_shape(const loom_predictor *p, const char *signature, int i, int64_t *dims) {
  const psig *sg = find_sig(p, signature);
  if (!sg || i < 0 || i >= sg->nin) return -1;
  const psig_desc *d = &sg->in_desc[i];
  if (dims)
    for (int k = 0; k < d->ndim && k < LOOM_MAX_DIMS; k++) dims[k] = d->dims[k];
  return d->ndim;
}
loom_dtype loom_predictor_output_dtype(const loom_predictor *p, const char *signature, int i) {
  const psig *sg = find_sig(p, signature);
  return sg && i >= 0 && i < sg->nout ? loom_output_dtype(sg->out[i]) : LOOM_DTYPE_INVALID;
}
int loom_predictor_output_shape(const loom_predictor *p, const char *signature, int i, int64_t *dims) {
  const psig *sg = find_sig(p, signature);
  if (!sg || i < 0 || i >= sg->nout) return -1;
  if (!dims) return loom_output_ndim(sg->out[i]);
  return loom_output_dims(sg->out[i], dims);
}

static loom_code check_input(const psig *sg, int i, const loom_tensor *t, loom_status *st) {
  if (!t)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: signature %s input %s: the tensor is NULL", sg->name,
                           sg->in_keys[i]);
  const psig_desc *d = &sg->in_desc[i];
  loom_dtype dt = loom_tensor_dtype(t);
  int nd = loom_tensor_ndim(t);
  const int64_t *dims = loom_tensor_dims(t);
  if (dt != d->dtype)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: signature %s input %s: dtype %s, expected %s",
                           sg->name, sg->in_keys[i], loom_dtype_name(dt), loom_dtype_name(d->dtype));
  int ok = nd == d->ndim;
  for (int k = 0; ok && k < d->ndim; k++) ok = d->dims[k] < 0 || d->dims[k] == dims[k];
  if (!ok) {
    char b1[96], b2[96];
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: signature %s input %s: shape %s is incompatible with %s",
                           sg->name, sg->in_keys[i], loom__dims_str(b1, sizeof b1, nd, dims),
                           loom__dims_str(b2, sizeof b2, d->ndim, d->dims));
  }
  return LOOM_OK;
}

/* "a, b, c" (cut short to fit). */
static const char *key_list(char *buf, size_t cap, int n, char *const *keys) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n && len + 1 < cap; i++) {
    int k = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", keys[i]);
    if (k < 0) break;
    len += (size_t)k;
  }
  return buf;
}

loom_code loom_predictor_run(loom_predictor *p, const char *signature, int ninputs, loom_tensor *const *inputs,
                             int noutputs, loom_tensor **outputs, loom_status *st) {
  if (!p) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor is NULL");
  const psig *sg = find_sig(p, signature);
  if (!sg)
    return loom_status_set(st, LOOM_NOT_FOUND, "predictor: no signature %s in this export",
                           signature ? signature : DEFAULT_SIGNATURE);
  char keys[512];
  if (ninputs != sg->nin || (ninputs && !inputs))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: signature %s takes %d inputs (%s), got %d", sg->name,
                           (int)sg->nin, key_list(keys, sizeof keys, sg->nin, sg->in_keys), ninputs);
  if (noutputs != sg->nout || !outputs)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "predictor: signature %s has %d outputs (%s), got %d", sg->name,
                           (int)sg->nout, key_list(keys, sizeof keys, sg->nout, sg->out_keys), noutputs);
  for (int i = 0; i < ninputs; i++) {
    loom_code rc = check_input(sg, i, inputs[i], st);
    if (rc) return rc;
  }
  pthread_mutex_lock(&p->mu);
  loom_code rc = loom_session_run(p->s, sg->in, inputs, ninputs, sg->out, outputs, noutputs, NULL, 0, st);
  pthread_mutex_unlock(&p->mu);
  return rc;
}
