/* Allocation through a replaceable hook, logging, status objects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <stdint.h>
#include "base/base.h"

static void *libc_malloc(size_t n, void *u) { (void)u; return malloc(n); }
static void *libc_realloc(void *p, size_t n, void *u) { (void)u; return realloc(p, n); }
static void libc_free(void *p, void *u) { (void)u; free(p); }

static loom_allocator g_alloc = {libc_malloc, libc_realloc, libc_free, NULL};

void loom_set_allocator(const loom_allocator *a) {
  if (!a) {
    g_alloc = (loom_allocator){libc_malloc, libc_realloc, libc_free, NULL};
    return;
  }
  g_alloc = *a;
}

void *loom__malloc(size_t n) { return g_alloc.malloc_fn(n ? n : 1, g_alloc.user_data); }
void *loom__calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = loom__malloc(n * size);
  size_t total = n * size;
  if (p) memset(p, 0, total ? total : 1);
  return p;
}
void *loom__realloc(void *p, size_t n) { return g_alloc.realloc_fn(p, n ? n : 1, g_alloc.user_data); }
void loom__free(void *p) {
  if (p) g_alloc.free_fn(p, g_alloc.user_data);
}
char *loom__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = loom__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* Aligned blocks: over-allocate and keep the original pointer just before. */
void *loom__aligned_alloc(size_t n) {
  if (n > SIZE_MAX - 64 - sizeof(void *)) return NULL;
  char *raw = loom__malloc(n + 64 + sizeof(void *));
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)(raw + sizeof(void *)) + 63) & ~(uintptr_t)63;
  ((void **)a)[-1] = raw;
  return (void *)a;
}
void loom__aligned_free(void *p) {
  if (p) loom__free(((void **)p)[-1]);
}

/* ---- logging ---- */
static void default_log(loom_log_level lvl, const char *msg, void *u) {
  (void)u;
  static const char *names[] = {"debug", "info", "warn", "error"};
  fprintf(stderr, "loom %s: %s\n", names[lvl & 3], msg);
}
static loom_log_fn g_log = default_log;
static void *g_log_user;
static loom_log_level g_log_min = LOOM_LOG_WARN;

void loom_log_set(loom_log_fn fn, void *user_data, loom_log_level min_level) {
  g_log = fn ? fn : default_log;
  g_log_user = fn ? user_data : NULL;
  g_log_min = min_level;
}

void loom__log(loom_log_level lvl, const char *fmt, ...) {
  if (lvl < g_log_min) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log(lvl, buf, g_log_user);
}

/* ---- status ---- */
struct loom_status {
  loom_code code;
  char *msg;  /* kept across set/clear and reused when the new message fits */
  size_t cap;
};

static const char *code_names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                   "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                   "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                   "UNAVAILABLE", "DATA_LOSS"};

const char *loom_code_name(loom_code c) {
  if ((int)c < 0 || c >= LOOM_CODE_COUNT) return "UNKNOWN_CODE";
  return code_names[c];
}

const char *loom_version(void) { return "0.1.0"; }

loom_status *loom_status_new(void) { return loom__calloc(1, sizeof(loom_status)); }
void loom_status_free(loom_status *st) {
  if (!st) return;
  loom__free(st->msg);
  loom__free(st);
}
loom_code loom_status_code(const loom_status *st) { return st ? st->code : LOOM_OK; }
const char *loom_status_message(const loom_status *st) { return st && st->msg ? st->msg : ""; }
void loom_status_clear(loom_status *st) {
  if (!st) return;
  st->code = LOOM_OK;
  if (st->msg) st->msg[0] = 0;
}
/* Copies text (len bytes, then a NUL) as st's message. */
static loom_code status_set_text(loom_status *st, loom_code code, const char *text, size_t n) {
  /* Reuse the message buffer: a status set on every pass over a dataset
   * (end of sequence) or in a loop allocates once. */
  size_t len = n + 1;
  if (len > st->cap) {
    size_t cap = len < 64 ? 64 : len;
    char *m = loom__realloc(st->msg, cap);
    if (!m) { /* keep the code; the message may be stale or empty */
      if (st->msg) st->msg[0] = 0;
      st->code = code;
      return code;
    }
    st->msg = m;
    st->cap = cap;
  }
  memcpy(st->msg, text, n);
  st->msg[n] = 0;
  st->code = code;
  return code;
}
loom_code loom_status_set(loom_status *st, loom_code code, const char *fmt, ...) {
  if (!st) return code;
  char buf[1024];
  buf[0] = 0;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
  }
  return status_set_text(st, code, buf, strlen(buf));
}
loom_code loom_status_set_message(loom_status *st, loom_code code, const char *message) {
  if (!st) return code;
  return status_set_text(st, code, message ? message : "", message ? strlen(message) : 0);
}
