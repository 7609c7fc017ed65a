/* loom-serve: TF Serving's JSON request/response formats.
 *   predict, row format      {"signature_name": s, "instances": [inst, ...]}  -> {"predictions": [...]}
 *   predict, columnar format {"signature_name": s, "inputs": value | {key: value}} -> {"outputs": ...}
 *   classify / regress       {"signature_name": s, "context": {...}, "examples": [{feature: value}]}
 *                            -> {"result": [[[label, score], ...], ...]} / {"result": [v, ...]}
 * Strings may be given as {"b64": "..."}. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"

/* ------------------------------------------------------------ buffer */
static int sb_reserve(sb *b, size_t more) {
  if (b->oom) return -1;
  if (b->n + more + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}
void sb_put(sb *b, const char *s, size_t n) {
  if (sb_reserve(b, n)) return;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }
void sb_printf(sb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[256];
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if ((size_t)k < sizeof tmp) {
    sb_put(b, tmp, (size_t)k);
    return;
  }
  if (sb_reserve(b, (size_t)k)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}
void sb_json_str(sb *b, const char *s, size_t n) {
  sb_put(b, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    sb_put(b, s + run, i - run);
    run = i + 1;
    switch (c) {
    case '"': sb_put(b, "\\\"", 2); break;
    case '\\': sb_put(b, "\\\\", 2); break;
    case '\n': sb_put(b, "\\n", 2); break;
    case '\r': sb_put(b, "\\r", 2); break;
    case '\t': sb_put(b, "\\t", 2); break;
    default: sb_printf(b, "\\u%04x", c);
    }
  }
  sb_put(b, s + run, n - run);
  sb_put(b, "\"", 1);
}
void serve_error_body(sb *b, const char *msg) {
  sb_puts(b, "{\"error\": ");
  sb_json_str(b, msg, strlen(msg));
  sb_puts(b, "}");
}

int serve_route(char *url, char **name, int64_t *want, int *meta, char verb[32]) {
  char *q = strchr(url, '?');
  if (q) *q = 0;
  *want = -1;
  *meta = 0;
  verb[0] = 0;
  if (strncmp(url, "/v1/models/", 11) || !url[11]) return -1;
  char *nm = url + 11, *rest = nm + strcspn(nm, "/:");
  char sep = *rest;
  if (rest == nm) return -1;
  *rest = 0;
  *name = nm;
  if (!sep) return 0;
  char *p = rest + 1;
  if (sep == '/' && !strncmp(p, "versions/", 9)) {
    p += 9;
    if (*p < '0' || *p > '9') return -1;
    char *e;
    errno = 0;
    long long v = strtoll(p, &e, 10);
    if (errno) return -1;
    *want = v;
    p = e;
    sep = *p;
    if (!sep) return 0;
    p++;
  }
  if (sep == '/' && !strcmp(p, "metadata")) *meta = 1;
  else if (sep == ':' && (!strcmp(p, "predict") || !strcmp(p, "classify") || !strcmp(p, "regress"))) strcpy(verb, p);
  else return -1;
  return 0;
}

const sigdef *serve_find_sig(const version *v, const char *name) {
  for (int i = 0; i < v->nsig; i++)
    if (!strcmp(v->sigs[i].name, name)) return &v->sigs[i];
  return NULL;
}

void job_free_inputs(job *j) {
  if (!j->in) return;
  for (int i = 0; j->sig && i < j->sig->nin; i++) loom_tensor_free(j->in[i]);
  free(j->in);
  j->in = NULL;
}

/* ------------------------------------------------------------ decoding */
typedef struct dctx {
  char *err;
  size_t cap;
} dctx;
#define FAIL(code, ...) (snprintf(d->err, d->cap, __VA_ARGS__), (code))

static void shape_str(char *buf, size_t cap, int nd, const int64_t *dims) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  for (int i = 0; i < nd && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? ",%lld" : "%lld", (long long)dims[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

static int is_b64(const cJSON *v) {
  return cJSON_IsObject(v) && v->child && !v->child->next && v->child->string && !strcmp(v->child->string, "b64") &&
         cJSON_IsString(v->child);
}

static int b64val(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}
/* decodes into a malloc'd buffer; -1 on bad input */
static long b64_decode(const char *s, char **out) {
  size_t n = strlen(s);
  char *o = malloc(n * 3 / 4 + 4);
  if (!o) return -1;
  long k = 0;
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '=') break;
    int v = b64val((unsigned char)s[i]);
    if (v < 0) {
      free(o);
      return -1;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o[k++] = (char)((acc >> bits) & 0xff);
    }
  }
  *out = o;
  return k;
}

/* the shape of a nested JSON array, from its first elements */
static int json_shape(const cJSON *v, int64_t *dims) {
  int nd = 0;
  while (cJSON_IsArray(v)) {
    if (nd >= 8) return -1;
    dims[nd++] = cJSON_GetArraySize(v);
    v = v->child;
    if (!v) break;
  }
  return nd;
}

static int put_scalar(dctx *d, const cJSON *v, loom_dtype dt, loom_tensor *t, int64_t idx, const char *key) {
  if (dt == LOOM_STRING) {
    if (cJSON_IsString(v)) {
      if (loom_tensor_set_string(t, idx, v->valuestring, strlen(v->valuestring), NULL)) return FAIL(500, "out of memory");
      return 0;
    }
    if (is_b64(v)) {
      char *buf = NULL;
      long n = b64_decode(v->child->valuestring, &buf);
      if (n < 0) return FAIL(400, "input %s: invalid base64 in a \"b64\" value", key);
      int rc = loom_tensor_set_string(t, idx, buf, (size_t)n, NULL) ? 500 : 0;
      free(buf);
      return rc ? FAIL(500, "out of memory") : 0;
    }
    return FAIL(400, "input %s: expected a string (or {\"b64\": ...}) for a DT_STRING element", key);
  }
  double x;
  if (cJSON_IsNumber(v)) x = v->valuedouble;
  else if (cJSON_IsBool(v)) x = cJSON_IsTrue(v) ? 1 : 0;
  else
    return FAIL(400, "input %s: expected a number for a %s element, got %s", key, loom_dtype_name(dt),
                cJSON_IsString(v) ? "a string" : cJSON_IsArray(v) ? "a list (too many dimensions)"
                                 : cJSON_IsObject(v) ? "an object" : "null");
  void *p = loom_tensor_data(t);
  switch (dt) {
  case LOOM_F32: ((float *)p)[idx] = (float)x; break;
  case LOOM_F64: ((double *)p)[idx] = x; break;
  case LOOM_I32:
  case LOOM_I64:
  case LOOM_U8:
  case LOOM_BOOL:
    if (x != floor(x)) return FAIL(400, "input %s: %g is not an integer (%s)", key, x, loom_dtype_name(dt));
    if (dt == LOOM_I32) ((int32_t *)p)[idx] = (int32_t)x;
    else if (dt == LOOM_I64) ((int64_t *)p)[idx] = (int64_t)x;
    else ((uint8_t *)p)[idx] = (uint8_t)x;
    break;
  default: return FAIL(400, "input %s: dtype %s is not supported over JSON", key, loom_dtype_name(dt));
  }
  return 0;
}

/* fills t from flat index *idx with v, which must have the shape dims[lvl..nd) */
static int fill(dctx *d, const cJSON *v, int lvl, int nd, const int64_t *dims, loom_dtype dt, loom_tensor *t,
                int64_t *idx, const char *key, const char *where) {
  if (lvl == nd) {
    if (cJSON_IsArray(v))
      return FAIL(400, "input %s%s: a list where a scalar was expected (too many dimensions)", key, where);
    return put_scalar(d, v, dt, t, (*idx)++, key);
  }
  if (!cJSON_IsArray(v))
    return FAIL(400, "input %s%s: expected a list of %lld at dimension %d, got a scalar", key, where,
                (long long)dims[lvl], lvl);
  if (cJSON_GetArraySize(v) != dims[lvl])
    return FAIL(400, "input %s%s: ragged or wrong length at dimension %d: %d elements, expected %lld", key, where, lvl,
                cJSON_GetArraySize(v), (long long)dims[lvl]);
  for (const cJSON *e = v->child; e; e = e->next) {
    int rc = fill(d, e, lvl + 1, nd, dims, dt, t, idx, key, where);
    if (rc) return rc;
  }
  return 0;
}

/* checks a tensor shape against the signature's (dims of -1 match anything) */
static int check_shape(dctx *d, const tinfo *ti, int nd, const int64_t *dims) {
  int ok = nd == ti->nd;
  for (int i = 0; ok && i < nd; i++) ok = ti->dims[i] < 0 || ti->dims[i] == dims[i];
  if (ok) return 0;
  char a[128], b[128];
  shape_str(a, sizeof a, nd, dims);
  shape_str(b, sizeof b, ti->nd, ti->dims);
  return FAIL(400, "input %s: shape %s does not match the signature's %s (dtype %s)", ti->key, a, b,
              loom_dtype_name(ti->dt));
}

/* the signature's input keys, "a, b, c" */
static void key_list(char *buf, size_t cap, const sigdef *sg) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < sg->nin && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", sg->in[i].key);
}
/* an object naming inputs: each of its keys must be one of the signature's */
static int check_keys(dctx *d, const sigdef *sg, const cJSON *obj, const char *where) {
  for (const cJSON *e = obj->child; e; e = e->next) {
    int k = 0;
    while (k < sg->nin && strcmp(sg->in[k].key, e->string)) k++;
    if (k < sg->nin) continue;
    char keys[512];
    key_list(keys, sizeof keys, sg);
    return FAIL(400, "%s has an unknown input '%s': signature %s takes %s", where, e->string, sg->name, keys);
  }
  return 0;
}

static int decode_row(dctx *d, job *j, const cJSON *inst) {
  const sigdef *sg = j->sig;
  if (!cJSON_IsArray(inst)) return FAIL(400, "\"instances\" must be a list");
  int rows = cJSON_GetArraySize(inst);
  if (rows == 0) return FAIL(400, "\"instances\" is empty");
  j->rows = rows;
  int64_t r0 = 0;
  for (const cJSON *e = inst->child; e; e = e->next, r0++) {
    if (!cJSON_IsObject(e) || (sg->nin == 1 && is_b64(e))) continue;
    char where[64];
    snprintf(where, sizeof where, "instance %lld", (long long)r0);
    int rc = check_keys(d, sg, e, where);
    if (rc) return rc;
  }
  for (int i = 0; i < sg->nin; i++) {
    const tinfo *ti = &sg->in[i];
    if (ti->nd == 0) return FAIL(400, "input %s is a scalar: use the columnar format (\"inputs\")", ti->key);
    /* the value of input i in instance r */
    int64_t dims[9];
    int nd = -1;
    int64_t r = 0, idx = 0;
    loom_tensor *t = NULL;
    for (const cJSON *e = inst->child; e; e = e->next, r++) {
      const cJSON *v = e;
      if (cJSON_IsObject(e) && !(sg->nin == 1 && is_b64(e))) {
        v = cJSON_GetObjectItemCaseSensitive(e, ti->key);
        if (!v) return FAIL(400, "instance %lld has no input %s", (long long)r, ti->key);
      } else if (sg->nin > 1) {
        return FAIL(400, "instance %lld must be an object naming the %d inputs", (long long)r, sg->nin);
      }
      if (!t) {
        dims[0] = rows;
        nd = json_shape(v, dims + 1);
        if (nd < 0) return FAIL(400, "input %s: too many dimensions", ti->key);
        int rc = check_shape(d, ti, nd + 1, dims);
        if (rc) return rc;
        t = loom_tensor_new(ti->dt, nd + 1, dims, NULL);
        if (!t) return FAIL(500, "out of memory");
        j->in[i] = t;
      }
      char where[64];
      snprintf(where, sizeof where, " (instance %lld)", (long long)r);
      int rc = fill(d, v, 0, nd, dims + 1, ti->dt, t, &idx, ti->key, where);
      if (rc) return rc;
    }
  }
  return 0;
}

static int decode_col(dctx *d, job *j, const cJSON *in) {
  const sigdef *sg = j->sig;
  /* an object is a map of inputs (a tensor value is never an object, but {"b64": ...}) */
  int named = cJSON_IsObject(in) && !(sg->nin == 1 && is_b64(in));
  if (sg->nin > 1 && !cJSON_IsObject(in))
    return FAIL(400, "\"inputs\" must be an object naming the signature's %d inputs", sg->nin);
  if (named) {
    int rc = check_keys(d, sg, in, "\"inputs\"");
    if (rc) return rc;
  }
  j->rows = -1;
  for (int i = 0; i < sg->nin; i++) {
    const tinfo *ti = &sg->in[i];
    const cJSON *v = named ? cJSON_GetObjectItemCaseSensitive(in, ti->key) : in;
    if (!v) return FAIL(400, "\"inputs\" has no input %s", ti->key);
    int64_t dims[8];
    int nd = json_shape(v, dims);
    if (nd < 0) return FAIL(400, "input %s: too many dimensions", ti->key);
    int rc = check_shape(d, ti, nd, dims);
    if (rc) return rc;
    loom_tensor *t = loom_tensor_new(ti->dt, nd, dims, NULL);
    if (!t) return FAIL(500, "out of memory");
    j->in[i] = t;
    int64_t idx = 0;
    if ((rc = fill(d, v, 0, nd, dims, ti->dt, t, &idx, ti->key, ""))) return rc;
    int64_t r = nd ? dims[0] : -2;
    if (i == 0) j->rows = r;
    else if (j->rows != r) j->rows = -2;
  }
  if (j->rows < 1 || !sg->batchable) j->rows = -1; /* not batched with others */
  return 0;
}

int serve_col_lengths(const job *j, char *msg, size_t cap) {
  const sigdef *sg = j->sig;
  if (j->kind != K_PREDICT_COL || !j->in) return 0;
  int first = -1;
  for (int i = 0; i < sg->nin; i++) {
    const tinfo *ti = &sg->in[i];
    if (!j->in[i] || ti->nd < 1 || ti->dims[0] != -1 || loom_tensor_ndim(j->in[i]) < 1) continue;
    /* a ragged input is two: "<k>" (values) and "<k>/row_splits" (rows + 1); neither counts rows */
    size_t kl = strlen(ti->key);
    int ragged = kl > 11 && !strcmp(ti->key + kl - 11, "/row_splits");
    for (int k = 0; k < sg->nin && !ragged; k++)
      ragged = strlen(sg->in[k].key) == kl + 11 && !strncmp(sg->in[k].key, ti->key, kl) &&
               !strcmp(sg->in[k].key + kl, "/row_splits");
    if (ragged) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    int64_t a = loom_tensor_dim(j->in[first], 0), b = loom_tensor_dim(j->in[i], 0);
    if (a == b) continue;
    snprintf(msg, cap,
             "\"inputs\": the inputs have different lengths: %s has %lld rows, %s has %lld (every input with a "
             "batch dimension needs one value per row)",
             sg->in[first].key, (long long)a, ti->key, (long long)b);
    return 1;
  }
  return 0;
}

/* ---- tf.Example (protobuf wire format) for classify / regress */
static void pb_varint(sb *b, uint64_t v) {
  char t[10];
  int n = 0;
  do {
    t[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  sb_put(b, t, (size_t)n);
}
static void pb_len(sb *b, int field, const char *p, size_t n) {
  pb_varint(b, ((uint64_t)field << 3) | 2);
  pb_varint(b, n);
  sb_put(b, p, n);
}
/* TF Serving decides int64_list or float_list by the JSON literal: 2 is an
 * int64, 2.0 and 2e0 are floats. cJSON keeps only the double, so before
 * decoding examples the body is scanned for its number literals (outside
 * strings, in document order, which is the order of a depth-first walk of
 * the tree) and the number nodes written with a '.', 'e' or 'E' get this bit
 * in their type (above cJSON's type byte and flags; cJSON_IsNumber and
 * cJSON_Delete ignore it). When the counts disagree nothing is marked and
 * integral values are int64, as before. */
#define SERVE_FLOAT_LITERAL (1 << 14)
static size_t scan_literals(const char *b, size_t n, unsigned char *flags, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    char c = b[i];
    if (c == '"') {
      for (i++; i < n && b[i] != '"'; i++)
        if (b[i] == '\\') i++;
      i++;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      int fl = 0;
      for (; i < n && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' ||
                       (b[i] >= '0' && b[i] <= '9'));
           i++)
        if (b[i] == '.' || b[i] == 'e' || b[i] == 'E') fl = 1;
      if (k < cap) flags[k] = (unsigned char)fl;
      k++;
    } else {
      i++;
    }
  }
  return k;
}
static size_t count_numbers(const cJSON *v) {
  size_t k = cJSON_IsNumber(v) ? 1 : 0;
  for (const cJSON *c = v->child; c; c = c->next) k += count_numbers(c);
  return k;
}
static void mark_numbers(cJSON *v, const unsigned char *flags, size_t *k) {
  if (cJSON_IsNumber(v) && flags[(*k)++]) v->type |= SERVE_FLOAT_LITERAL;
  for (cJSON *c = v->child; c; c = c->next) mark_numbers(c, flags, k);
}
static void mark_float_literals(cJSON *root, const char *body, size_t len) {
  size_t want = count_numbers(root);
  if (!want) return;
  unsigned char *flags = malloc(want);
  if (!flags) return;
  if (scan_literals(body, len, flags, want) == want) {
    size_t k = 0;
    mark_numbers(root, flags, &k);
  }
  free(flags);
}

/* one Feature message from a JSON scalar or list */
static int feature_msg(dctx *d, const cJSON *v, const char *name, sb *f) {
  const cJSON *first = cJSON_IsArray(v) ? v->child : v;
  const cJSON *it = cJSON_IsArray(v) ? v->child : v;
  sb list = {0};
  int kind = 0; /* 1 bytes, 2 float, 3 int64 */
  if (!first) kind = 2;
  else if (cJSON_IsString(first) || is_b64(first)) kind = 1;
  else if (cJSON_IsNumber(first)) {
    kind = 3;
    for (const cJSON *e = it; e; e = cJSON_IsArray(v) ? e->next : NULL)
      if (cJSON_IsNumber(e) && (e->valuedouble != floor(e->valuedouble) || (e->type & SERVE_FLOAT_LITERAL))) kind = 2;
  } else {
    return FAIL(400, "example feature %s: expected numbers or strings", name);
  }
  for (const cJSON *e = it; e; e = cJSON_IsArray(v) ? e->next : NULL) {
    if (kind == 1) {
      if (cJSON_IsString(e)) pb_len(&list, 1, e->valuestring, strlen(e->valuestring));
      else if (is_b64(e)) {
        char *buf;
        long n = b64_decode(e->child->valuestring, &buf);
        if (n < 0) return free(list.p), FAIL(400, "example feature %s: invalid base64", name);
        pb_len(&list, 1, buf, (size_t)n);
        free(buf);
      } else return free(list.p), FAIL(400, "example feature %s: mixes strings and other values", name);
    } else {
      if (!cJSON_IsNumber(e)) return free(list.p), FAIL(400, "example feature %s: mixes numbers and other values", name);
      if (kind == 2) {
        float x = (float)e->valuedouble;
        sb_put(&list, (const char *)&x, 4);
      } else pb_varint(&list, (uint64_t)(int64_t)e->valuedouble);
    }
  }
  sb inner = {0};
  if (kind == 1) sb_put(&inner, list.p ? list.p : "", list.n);
  else pb_len(&inner, 1, list.p ? list.p : "", list.n); /* packed */
  pb_len(f, kind, inner.p ? inner.p : "", inner.n);
  free(list.p);
  free(inner.p);
  return 0;
}
static int add_features(dctx *d, const cJSON *obj, sb *feats) {
  for (const cJSON *e = obj ? obj->child : NULL; e; e = e->next) {
    sb f = {0}, entry = {0};
    int rc = feature_msg(d, e, e->string, &f);
    if (rc) return free(f.p), rc;
    pb_len(&entry, 1, e->string, strlen(e->string));
    pb_len(&entry, 2, f.p ? f.p : "", f.n);
    pb_len(feats, 1, entry.p, entry.n);
    free(f.p);
    free(entry.p);
  }
  return 0;
}

static int decode_examples(dctx *d, job *j, const cJSON *root) {
  const sigdef *sg = j->sig;
  const char *want = j->kind == K_CLASSIFY ? "tensorflow/serving/classify" : "tensorflow/serving/regress";
  if (strcmp(sg->method, want))
    return FAIL(400, "Expected %s signature method_name to be %s. Was: %s",
                j->kind == K_CLASSIFY ? "classification" : "regression", want, sg->method);
  if (sg->nin != 1 || sg->in[0].dt != LOOM_STRING)
    return FAIL(400, "signature %s must take one string input (serialized tf.Example)", sg->name);
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(root, "examples");
  const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(root, "context");
  if (!cJSON_IsArray(ex)) return FAIL(400, "\"examples\" is missing or not a list");
  if (ctx && !cJSON_IsObject(ctx)) return FAIL(400, "\"context\" must be an object");
  int n = cJSON_GetArraySize(ex);
  if (n == 0) return FAIL(400, "\"examples\" is empty");
  int64_t dims[1] = {n};
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, dims, NULL);
  if (!t) return FAIL(500, "out of memory");
  j->in[0] = t;
  j->rows = n;
  int64_t r = 0;
  for (const cJSON *e = ex->child; e; e = e->next, r++) {
    if (!cJSON_IsObject(e)) return FAIL(400, "example %lld is not an object", (long long)r);
    sb feats = {0}, exm = {0};
    int rc = add_features(d, ctx, &feats);
    if (!rc) rc = add_features(d, e, &feats);
    if (!rc) {
      pb_len(&exm, 1, feats.p ? feats.p : "", feats.n);
      if (loom_tensor_set_string(t, r, exm.p ? exm.p : "", exm.n, NULL)) rc = FAIL(500, "out of memory");
    }
    free(feats.p);
    free(exm.p);
    if (rc) return rc;
  }
  return 0;
}

int serve_fast_path = 1;

/* ---- fast path: {"signature_name": "s", "instances": [[n, ...], ...]} for one numeric input.
 * A hand-written scanner for the common row-format request straight into a float/double
 * buffer (no cJSON tree). Anything it does not recognise, or any input it would reject,
 * returns 0 and the request goes through cJSON, which gives the error messages; it accepts
 * only what the cJSON path accepts and gives the same values (numbers are parsed to double,
 * correctly rounded, then converted as the cJSON path converts them). */
typedef struct fscan {
  const char *p, *e;
  double *v; /* values, row-major */
  size_t n, cap;
  int nd;           /* rank of one instance (-1 until the first scalar) */
  int64_t dims[8];  /* its dims (0 until the first list at that level closes) */
} fscan;

static void fs_ws(fscan *f) {
  while (f->p < f->e && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r' || *f->p == '\t')) f->p++;
}
static const double P10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* one JSON number (strict grammar); 0 on anything else */
static int fs_num(fscan *f, double *out) {
  const char *s = f->p, *e = f->e;
  int neg = 0;
  if (s < e && *s == '-') neg = 1, s++;
  if (s >= e || *s < '0' || *s > '9') return 0;
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  if (*s == '0') s++;
  else
    while (s < e && *s >= '0' && *s <= '9') {
      if (digits < 19) m = m * 10 + (uint64_t)(*s - '0'), digits += m != 0;
      else exp10++;
      s++;
    }
  if (s < e && *s == '.') {
    s++;
    if (s >= e || *s < '0' || *s > '9') return 0;
    while (s < e && *s >= '0' && *s <= '9') {
      if (digits < 19) m = m * 10 + (uint64_t)(*s - '0'), digits += m != 0, exp10--;
      s++;
    }
  }
  if (s < e && (*s == 'e' || *s == 'E')) {
    s++;
    int en = 0, ex = 0;
    if (s < e && (*s == '+' || *s == '-')) en = *s == '-', s++;
    if (s >= e || *s < '0' || *s > '9') return 0;
    while (s < e && *s >= '0' && *s <= '9') {
      if (ex < 100000) ex = ex * 10 + (*s - '0');
      s++;
    }
    exp10 += en ? -ex : ex;
  }
  if (s < e && ((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' || *s == '+' || *s == '-')) return 0;
  double x;
  if (digits < 19 && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
    /* exact m and an exact power of ten: one correctly rounded operation (Clinger) */
    x = exp10 < 0 ? (double)m / P10[-exp10] : (double)m * P10[exp10];
  } else {
    char buf[64];
    size_t k = (size_t)(s - f->p);
    if (k >= sizeof buf) return 0;
    memcpy(buf, f->p, k);
    buf[k] = 0;
    x = strtod(buf, NULL);
    *out = x;
    f->p = s;
    return 1;
  }
  *out = neg ? -x : x;
  f->p = s;
  return 1;
}
/* the value at level lvl of an instance (lvl 0 = the instance): the first scalar fixes the
 * rank (nd), the first list closed at each level its length; every later one must agree */
static int fs_list(fscan *f, int lvl) {
  fs_ws(f);
  if (f->p >= f->e) return 0;
  if (*f->p != '[') {
    if (f->nd < 0) f->nd = lvl;
    else if (lvl != f->nd) return 0;
    double x;
    if (!fs_num(f, &x)) return 0;
    if (f->n == f->cap) {
      size_t cap = f->cap ? f->cap * 2 : 1024;
      double *v = realloc(f->v, cap * sizeof *v);
      if (!v) return 0;
      f->v = v;
      f->cap = cap;
    }
    f->v[f->n++] = x;
    return 1;
  }
  if (lvl >= 8 || (f->nd >= 0 && lvl >= f->nd)) return 0;
  f->p++;
  int64_t k = 0;
  for (;;) {
    if (!fs_list(f, lvl + 1)) return 0;
    k++;
    fs_ws(f);
    if (f->p >= f->e) return 0;
    if (*f->p == ',') {
      f->p++;
      continue;
    }
    if (*f->p++ != ']') return 0;
    break;
  }
  if (!f->dims[lvl]) f->dims[lvl] = k;
  return f->dims[lvl] == k;
}
/* "...": a string without escapes; 0 when it has any */
static int fs_str(fscan *f, const char **s, size_t *n) {
  fs_ws(f);
  if (f->p >= f->e || *f->p != '"') return 0;
  const char *b = ++f->p;
  while (f->p < f->e && *f->p != '"') {
    if (*f->p == '\\' || (unsigned char)*f->p < 0x20) return 0;
    f->p++;
  }
  if (f->p >= f->e) return 0;
  *s = b;
  *n = (size_t)(f->p - b);
  f->p++;
  return 1;
}

/* 1: decoded into j (0 when the request needs the general path) */
static int fast_row(job *j, const char *body, size_t len) {
  fscan f = {.p = body, .e = body + len, .nd = -1};
  static __thread double *keep; /* the value buffer, reused across requests on this thread */
  static __thread size_t keep_cap;
  f.v = keep;
  f.cap = keep_cap;
  const char *sig = "serving_default";
  size_t sig_n = strlen(sig);
  int have_inst = 0, have_sig = 0, ok = 0;
  int64_t rows = 0;
  fs_ws(&f);
  if (f.p >= f.e || *f.p++ != '{') goto out;
  for (;;) {
    const char *k;
    size_t kn;
    if (!fs_str(&f, &k, &kn)) goto out;
    fs_ws(&f);
    if (f.p >= f.e || *f.p++ != ':') goto out;
    if (kn == 14 && !memcmp(k, "signature_name", 14) && !have_sig) {
      if (!fs_str(&f, &sig, &sig_n)) goto out;
      have_sig = 1;
    } else if (kn == 9 && !memcmp(k, "instances", 9) && !have_inst) {
      fs_ws(&f);
      if (f.p >= f.e || *f.p++ != '[') goto out;
      for (;;) {
        if (!fs_list(&f, 0) || f.nd == 0) goto out; /* scalar instances: the general path */
        rows++;
        fs_ws(&f);
        if (f.p >= f.e) goto out;
        if (*f.p == ',') {
          f.p++;
          continue;
        }
        if (*f.p++ != ']') goto out;
        break;
      }
      have_inst = 1;
    } else {
      goto out;
    }
    fs_ws(&f);
    if (f.p >= f.e) goto out;
    if (*f.p == ',') {
      f.p++;
      continue;
    }
    if (*f.p++ != '}') goto out;
    break;
  }
  fs_ws(&f);
  if (f.p != f.e || !have_inst || rows < 1) goto out;
  /* the signature: one f32/f64 input of rank nd + 1 */
  const sigdef *sg = NULL;
  for (int i = 0; i < j->ver->nsig; i++)
    if (strlen(j->ver->sigs[i].name) == sig_n && !memcmp(j->ver->sigs[i].name, sig, sig_n)) sg = &j->ver->sigs[i];
  if (!sg || sg->nin != 1 || (sg->in[0].dt != LOOM_F32 && sg->in[0].dt != LOOM_F64) || sg->in[0].nd != f.nd + 1)
    goto out;
  int64_t dims[9];
  dims[0] = rows;
  int64_t numel = rows;
  for (int d = 0; d < f.nd; d++) {
    dims[d + 1] = f.dims[d];
    numel *= f.dims[d];
  }
  for (int d = 0; d <= f.nd; d++)
    if (sg->in[0].dims[d] >= 0 && sg->in[0].dims[d] != dims[d]) goto out;
  if ((size_t)numel != f.n) goto out;
  loom_tensor **in = calloc(2, sizeof *in);
  loom_tensor *t = in ? loom_tensor_new(sg->in[0].dt, f.nd + 1, dims, NULL) : NULL;
  if (!t) {
    free(in);
    goto out;
  }
  if (sg->in[0].dt == LOOM_F32) {
    float *o = loom_tensor_data(t);
    for (size_t i = 0; i < f.n; i++) o[i] = (float)f.v[i];
  } else {
    memcpy(loom_tensor_data(t), f.v, f.n * sizeof(double));
  }
  in[0] = t;
  j->sig = sg;
  j->in = in;
  j->rows = rows;
  j->kind = K_PREDICT_ROW;
  ok = 1;
out:
  keep = f.v;
  keep_cap = f.cap;
  return ok;
}

int serve_decode(job *j, const char *body, size_t len, char *err, size_t errcap) {
  dctx dd = {err, errcap}, *d = &dd;
  if (j->kind == K_PREDICT_ROW && serve_fast_path && fast_row(j, body, len)) return 0;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
  if (!root) {
    long at = end ? (long)(end - body) : 0;
    return FAIL(400, "JSON Parse error: malformed JSON at byte %ld of %zu", at, len);
  }
  int rc = 0;
  if (!cJSON_IsObject(root)) {
    rc = FAIL(400, "JSON Value: the request body is not an object");
    goto out;
  }
  const cJSON *sn = cJSON_GetObjectItemCaseSensitive(root, "signature_name");
  const char *name = cJSON_IsString(sn) ? sn->valuestring : "serving_default";
  if (sn && !cJSON_IsString(sn)) {
    rc = FAIL(400, "\"signature_name\" must be a string");
    goto out;
  }
  j->sig = serve_find_sig(j->ver, name);
  if (!j->sig) {
    rc = FAIL(404, "Serving signature name: \"%s\" not found in signature def", name);
    goto out;
  }
  j->in = calloc((size_t)j->sig->nin + 1, sizeof *j->in);
  if (!j->in) {
    rc = FAIL(500, "out of memory");
    goto out;
  }
  if (j->kind == K_CLASSIFY || j->kind == K_REGRESS) {
    mark_float_literals(root, body, len);
    rc = decode_examples(d, j, root);
    goto out;
  }
  const cJSON *inst = cJSON_GetObjectItemCaseSensitive(root, "instances");
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
  if (inst && in) rc = FAIL(400, "JSON Value: the request has both \"instances\" and \"inputs\"; use one");
  else if (!inst && !in) rc = FAIL(400, "Missing 'inputs' or 'instances' key");
  else if (inst) {
    j->kind = K_PREDICT_ROW;
    rc = decode_row(d, j, inst);
  } else {
    j->kind = K_PREDICT_COL;
    rc = decode_col(d, j, in);
  }
out:
  cJSON_Delete(root);
  return rc;
}

/* ------------------------------------------------------------ encoding */
static void put_elem(sb *b, const loom_tensor *t, int64_t i) {
  const void *p = loom_tensor_data_const(t);
  char tmp[40];
  int k;
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32:
  case LOOM_F64: {
    double x = loom_tensor_dtype(t) == LOOM_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
    if (isnan(x)) sb_puts(b, "NaN");
    else if (isinf(x)) sb_puts(b, x > 0 ? "Infinity" : "-Infinity");
    else {
      k = snprintf(tmp, sizeof tmp, loom_tensor_dtype(t) == LOOM_F32 ? "%.9g" : "%.17g", x);
      sb_put(b, tmp, (size_t)k);
    }
    return;
  }
  case LOOM_I32: k = snprintf(tmp, sizeof tmp, "%d", ((const int32_t *)p)[i]); break;
  case LOOM_I64: k = snprintf(tmp, sizeof tmp, "%lld", (long long)((const int64_t *)p)[i]); break;
  case LOOM_U8: k = snprintf(tmp, sizeof tmp, "%u", ((const uint8_t *)p)[i]); break;
  case LOOM_BOOL: sb_puts(b, ((const uint8_t *)p)[i] ? "true" : "false"); return;
  case LOOM_STRING: {
    size_t n = 0;
    const char *s = loom_tensor_get_string(t, i, &n);
    sb_json_str(b, s ? s : "", s ? n : 0);
    return;
  }
  default: sb_puts(b, "null"); return;
  }
  sb_put(b, tmp, (size_t)k);
}
/* the sub-tensor at flat offset start with dims[lvl..nd) */
static void put_value(sb *b, const loom_tensor *t, int64_t *i, int lvl, int nd, const int64_t *dims) {
  if (lvl == nd) {
    put_elem(b, t, (*i)++);
    return;
  }
  sb_put(b, "[", 1);
  for (int64_t k = 0; k < dims[lvl]; k++) {
    if (k) sb_put(b, ", ", 2);
    put_value(b, t, i, lvl + 1, nd, dims);
  }
  sb_put(b, "]", 1);
}
static int64_t inner_numel(const loom_tensor *t) {
  int64_t n = 1;
  for (int i = 1; i < loom_tensor_ndim(t); i++) n *= loom_tensor_dim(t, i);
  return n;
}

void serve_encode(job *j, loom_tensor *const *outs, int64_t off, int64_t total) {
  const sigdef *sg = j->sig;
  sb *b = &j->out;
  /* every output must split along the batch dimension, except one columnar job alone */
  int whole = j->kind == K_PREDICT_COL && (j->rows < 0 || total == j->rows);
  if (!whole)
    for (int o = 0; o < sg->nout; o++)
      if (loom_tensor_ndim(outs[o]) < 1 || loom_tensor_dim(outs[o], 0) != total) {
        char msg[256];
        snprintf(msg, sizeof msg, "output %s has %d dimensions with %lld rows: it cannot be split into %lld instances",
                 sg->out[o].key, loom_tensor_ndim(outs[o]),
                 (long long)(loom_tensor_ndim(outs[o]) ? loom_tensor_dim(outs[o], 0) : 0), (long long)total);
        j->status = 400;
        b->n = 0;
        serve_error_body(b, msg);
        return;
      }
  j->status = 200;
  if (j->kind == K_PREDICT_COL) {
    sb_puts(b, "{\"outputs\": ");
    if (sg->nout > 1) sb_puts(b, "{");
    for (int o = 0; o < sg->nout; o++) {
      const loom_tensor *t = outs[o];
      if (sg->nout > 1) {
        if (o) sb_puts(b, ", ");
        sb_json_str(b, sg->out[o].key, strlen(sg->out[o].key));
        sb_puts(b, ": ");
      }
      int64_t dims[9];
      int nd = loom_tensor_ndim(t);
      memcpy(dims, loom_tensor_dims(t), sizeof(int64_t) * (size_t)nd);
      int64_t i = 0;
      if (!whole) {
        dims[0] = j->rows;
        i = off * inner_numel(t);
      }
      put_value(b, t, &i, 0, nd, dims);
    }
    if (sg->nout > 1) sb_puts(b, "}");
    sb_puts(b, "}");
    return;
  }
  if (j->kind == K_PREDICT_ROW) {
    sb_puts(b, "{\"predictions\": [");
    for (int64_t r = 0; r < j->rows; r++) {
      if (r) sb_puts(b, ", ");
      if (sg->nout > 1) sb_puts(b, "{");
      for (int o = 0; o < sg->nout; o++) {
        const loom_tensor *t = outs[o];
        if (sg->nout > 1) {
          if (o) sb_puts(b, ", ");
          sb_json_str(b, sg->out[o].key, strlen(sg->out[o].key));
          sb_puts(b, ": ");
        }
        int64_t i = (off + r) * inner_numel(t);
        put_value(b, t, &i, 1, loom_tensor_ndim(t), loom_tensor_dims(t));
      }
      if (sg->nout > 1) sb_puts(b, "}");
    }
    sb_puts(b, "]}");
    return;
  }
  /* classify: pairs of (classes, scores); regress: "outputs" */
  const loom_tensor *cls = NULL, *sc = NULL, *reg = NULL;
  for (int o = 0; o < sg->nout; o++) {
    if (!strcmp(sg->out[o].key, "classes")) cls = outs[o];
    else if (!strcmp(sg->out[o].key, "scores")) sc = outs[o];
    else if (!strcmp(sg->out[o].key, "outputs")) reg = outs[o];
  }
  if (j->kind == K_REGRESS) {
    if (!reg && sg->nout == 1) reg = outs[0];
    if (!reg || inner_numel(reg) != 1) {
      j->status = 400;
      b->n = 0;
      serve_error_body(b, "regression signature needs one output \"outputs\" with one value per example");
      return;
    }
    sb_puts(b, "{\"result\": [");
    for (int64_t r = 0; r < j->rows; r++) {
      if (r) sb_puts(b, ", ");
      put_elem(b, reg, off + r);
    }
    sb_puts(b, "]}");
    return;
  }
  if (!cls && !sc) {
    j->status = 400;
    b->n = 0;
    serve_error_body(b, "classification signature needs a \"classes\" or \"scores\" output");
    return;
  }
  int64_t k = inner_numel(sc ? sc : cls);
  sb_puts(b, "{\"result\": [");
  for (int64_t r = 0; r < j->rows; r++) {
    if (r) sb_puts(b, ", ");
    sb_puts(b, "[");
    for (int64_t c = 0; c < k; c++) {
      if (c) sb_puts(b, ", ");
      sb_puts(b, "[");
      if (cls) put_elem(b, cls, (off + r) * k + c);
      else sb_puts(b, "\"\""); /* TF Serving leaves the label empty without "classes" */
      sb_puts(b, ", ");
      if (sc) put_elem(b, sc, (off + r) * k + c);
      else sb_puts(b, "0");
      sb_puts(b, "]");
    }
    sb_puts(b, "]");
  }
  sb_puts(b, "]}");
}
