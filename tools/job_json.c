/* job_json.c - checked job-file access (see job_json.h). */
#include "job_json.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_file = "job";

void job_set_file(const char *path) { g_file = path; }

void job_fail(const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "loom: %s: ", g_file);
  if (path && *path) fprintf(stderr, "%s: ", path);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(JOB_EXIT_JOB);
}

cJSON *job_load(const char *path) {
  job_set_file(path);
  FILE *f = fopen(path, "rb");
  if (!f) job_fail(NULL, "cannot open the job file: %s", strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) job_fail(NULL, "out of memory");
  buf[n] = 0;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(buf, &end, 1);
  if (!j) {
    const char *at = end ? end : cJSON_GetErrorPtr();
    int line = 1, col = 1;
    for (const char *p = buf; at && p < at && *p; p++) {
      if (*p == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    if (!at || !*at) {
      free(buf);
      job_fail(NULL, "line %d, column %d: invalid JSON (unexpected end of file)", line, col);
    }
    /* the line of the error, trimmed, as context */
    const char *ls = at, *le = at;
    while (ls > buf && ls[-1] != '\n') ls--;
    while (*le && *le != '\n' && *le != '\r') le++;
    while (ls < le && (*ls == ' ' || *ls == '\t')) ls++;
    char ctx[80];
    snprintf(ctx, sizeof ctx, "%.*s%s", (int)(le - ls > 72 ? 72 : le - ls), ls, le - ls > 72 ? "..." : "");
    free(buf);
    job_fail(NULL, "line %d, column %d: invalid JSON in: %s", line, col, ctx);
  }
  free(buf);
  if (!cJSON_IsObject(j)) job_fail(NULL, "the job must be a JSON object");
  return j;
}

static char g_ring[8][512];
static int g_ringi;
static char *ring(void) { return g_ring[g_ringi++ & 7]; }

const char *jp_key(const char *parent, const char *key) {
  char *b = ring();
  if (parent && *parent)
    snprintf(b, 512, "%s.%s", parent, key);
  else
    snprintf(b, 512, "%s", key);
  return b;
}
const char *jp_idx(const char *parent, int i) {
  char *b = ring();
  snprintf(b, 512, "%s[%d]", parent ? parent : "", i);
  return b;
}

void j_keys(const cJSON *o, const char *path, const char *const *allowed) {
  for (const cJSON *c = o ? o->child : NULL; c; c = c->next) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(c->string, allowed[i]);
    if (!ok) {
      char list[1024] = "";
      size_t len = 0;
      for (int i = 0; allowed[i] && len < sizeof list - 64; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", allowed[i]);
      job_fail(jp_key(path, c->string), "unknown key (known here: %s)", list);
    }
  }
  /* duplicate keys: cJSON keeps both; the first would win silently */
  for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
    for (const cJSON *d = c->next; d; d = d->next)
      if (!strcmp(c->string, d->string)) job_fail(jp_key(path, c->string), "key given twice");
}

const cJSON *j_get(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static const char *kind(const cJSON *v) {
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "null";
}

const cJSON *j_object(const cJSON *o, const char *path, const char *key, int required) {
  const cJSON *v = j_get(o, key);
  if (!v && required) job_fail(jp_key(path, key), "missing (an object is required)");
  if (v && !cJSON_IsObject(v)) job_fail(jp_key(path, key), "must be an object, got %s", kind(v));
  return v;
}
const cJSON *j_array(const cJSON *o, const char *path, const char *key, int required) {
  const cJSON *v = j_get(o, key);
  if (!v && required) job_fail(jp_key(path, key), "missing (an array is required)");
  if (v && !cJSON_IsArray(v)) job_fail(jp_key(path, key), "must be an array, got %s", kind(v));
  return v;
}
const char *j_string(const cJSON *o, const char *path, const char *key, const char *dflt, int required) {
  const cJSON *v = j_get(o, key);
  if (!v) {
    if (required) job_fail(jp_key(path, key), "missing (a string is required)");
    return dflt;
  }
  if (!cJSON_IsString(v)) job_fail(jp_key(path, key), "must be a string, got %s", kind(v));
  if (!*v->valuestring) job_fail(jp_key(path, key), "must not be empty");
  return v->valuestring;
}
double j_number(const cJSON *o, const char *path, const char *key, double dflt, double lo, double hi) {
  const cJSON *v = j_get(o, key);
  if (!v) return dflt;
  if (!cJSON_IsNumber(v)) job_fail(jp_key(path, key), "must be a number, got %s", kind(v));
  if (!(v->valuedouble >= lo && v->valuedouble <= hi))
    job_fail(jp_key(path, key), "must be in [%g, %g], got %g", lo, hi, v->valuedouble);
  return v->valuedouble;
}
int64_t j_int(const cJSON *o, const char *path, const char *key, int64_t dflt, int64_t lo, int64_t hi) {
  const cJSON *v = j_get(o, key);
  if (!v) return dflt;
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9e15)
    job_fail(jp_key(path, key), "must be an integer, got %s", cJSON_IsNumber(v) ? "a fraction" : kind(v));
  int64_t x = (int64_t)v->valuedouble;
  if (x < lo || x > hi) {
    if (hi == INT64_MAX)
      job_fail(jp_key(path, key), "must be >= %lld, got %lld", (long long)lo, (long long)x);
    job_fail(jp_key(path, key), "must be in [%lld, %lld], got %lld", (long long)lo, (long long)hi, (long long)x);
  }
  return x;
}
int j_bool(const cJSON *o, const char *path, const char *key, int dflt) {
  const cJSON *v = j_get(o, key);
  if (!v) return dflt;
  if (!cJSON_IsBool(v)) job_fail(jp_key(path, key), "must be true or false, got %s", kind(v));
  return cJSON_IsTrue(v);
}
int j_enum(const cJSON *o, const char *path, const char *key, const char *const *choices, int dflt) {
  const char *s = j_string(o, path, key, NULL, dflt < 0);
  if (!s) return dflt;
  for (int i = 0; choices[i]; i++)
    if (!strcmp(s, choices[i])) return i;
  char list[1024] = "";
  size_t len = 0;
  for (int i = 0; choices[i] && len < sizeof list - 64; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", choices[i]);
  job_fail(jp_key(path, key), "unknown value '%s' (one of: %s)", s, list);
}
int64_t *j_pos_int_array(const cJSON *o, const char *path, const char *key, int *n, int required) {
  *n = 0;
  const cJSON *v = j_get(o, key);
  if (!v) {
    if (required) job_fail(jp_key(path, key), "missing (a non-empty array of positive integers is required)");
    return NULL;
  }
  int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (m < 1) job_fail(jp_key(path, key), "must be a non-empty array of positive integers");
  int64_t *out = malloc(sizeof *out * (size_t)m);
  int i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) || c->valuedouble < 1 || c->valuedouble > 1e12)
      job_fail(jp_key(path, key), "must be a non-empty array of positive integers (item %d is not)", i);
    out[i] = (int64_t)c->valuedouble;
  }
  *n = m;
  return out;
}
float *j_float_array(const cJSON *o, const char *path, const char *key, int *n, int required) {
  *n = 0;
  const cJSON *v = j_get(o, key);
  if (!v) {
    if (required) job_fail(jp_key(path, key), "missing (a non-empty array of numbers is required)");
    return NULL;
  }
  int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (m < 1) job_fail(jp_key(path, key), "must be a non-empty array of numbers");
  float *out = malloc(sizeof *out * (size_t)m);
  int i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    if (!cJSON_IsNumber(c)) job_fail(jp_key(path, key), "must be a non-empty array of numbers (item %d is %s)", i, kind(c));
    out[i] = (float)c->valuedouble;
  }
  *n = m;
  return out;
}
const char **j_string_list(const cJSON *o, const char *path, const char *key, int *n, int required) {
  *n = 0;
  const cJSON *v = j_get(o, key);
  if (!v) {
    if (required) job_fail(jp_key(path, key), "missing (a string or a non-empty array of strings is required)");
    return NULL;
  }
  if (cJSON_IsString(v)) {
    if (!*v->valuestring) job_fail(jp_key(path, key), "must not be empty");
    const char **out = malloc(sizeof *out);
    out[0] = v->valuestring;
    *n = 1;
    return out;
  }
  int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (m < 1) job_fail(jp_key(path, key), "must be a string or a non-empty array of strings, got %s", kind(v));
  const char **out = malloc(sizeof *out * (size_t)m);
  int i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    if (!cJSON_IsString(c) || !*c->valuestring)
      job_fail(jp_idx(jp_key(path, key), i), "must be a non-empty string, got %s", kind(c));
    out[i] = c->valuestring;
  }
  *n = m;
  return out;
}
const char *j_scalar_text(const cJSON *o, const char *path, const char *key) {
  const cJSON *v = j_get(o, key);
  if (!v) return NULL;
  if (cJSON_IsString(v)) return v->valuestring;
  if (cJSON_IsNumber(v)) {
    char *b = ring();
    if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
      snprintf(b, 512, "%lld", (long long)v->valuedouble);
    else
      snprintf(b, 512, "%.17g", v->valuedouble);
    return b;
  }
  job_fail(jp_key(path, key), "must be a number or a string, got %s", kind(v));
}
