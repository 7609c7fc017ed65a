/* tests/hooks_util.h - what the hook tests (tests/test_hooks_*.c) share: a
 * one-variable model trained by SGD with a global step, stepping helpers,
 * a recording hook (call order, fetched values, injected stops and
 * failures), captured log lines, an init_fn that starts at a given global
 * step, and an event-file reader. */
#ifndef LOOM_TESTS_HOOKS_UTIL_H
#define LOOM_TESTS_HOOKS_UTIL_H
#include <dirent.h>
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */
/* loss = x^2, SGD lr 0.1: x_{k+1} = 0.8 x_k; global_step += 1 per step. */
typedef struct model {
  loom_graph *g;
  loom_variable *gs, *x;
  loom_output loss, xo, gso;
  loom_node *train;
  loom_optimizer *opt;
} model;

static inline model model_new(float x0) {
  model m;
  memset(&m, 0, sizeof m);
  m.g = loom_graph_new();
  m.gs = loom_get_or_create_global_step(m.g);
  loom_initializer init = loom_init_constant(x0);
  m.x = loom_get_variable(m.g, "x", LOOM_F32, 0, NULL, &init, 1);
  m.xo = loom_variable_output(m.x);
  m.gso = loom_variable_output(m.gs);
  m.loss = loom_square(m.g, m.xo, "sq");
  m.opt = loom_optimizer_sgd(loom_const_f32(m.g, 0.1f, "lr"));
  m.train = loom_optimizer_minimize(m.opt, m.g, m.loss, 0, NULL, m.gs, "train");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(m.g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  return m;
}
static inline void model_free(model *m) {
  loom_optimizer_free(m->opt);
  loom_graph_free(m->g);
}
/* x after k steps from x0 (float arithmetic as the kernel does it). */
static inline float x_after(float x0, int k) {
  float x = x0;
  for (int i = 0; i < k; i++) x = x - 0.1f * (2.0f * x);
  return x;
}
static inline int64_t scalar_i64(const loom_tensor *t) {
  cr_assert(t);
  if (loom_tensor_dtype(t) == LOOM_I32) return *(const int32_t *)loom_tensor_data_const(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_I64);
  return *(const int64_t *)loom_tensor_data_const(t);
}
static inline float scalar_f32(const loom_tensor *t) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F32);
  return *(const float *)loom_tensor_data_const(t);
}
static inline int64_t read_step(loom_session *s) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_read_variable(s, "global_step", &t, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t v = scalar_i64(t);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}
/* One training step through the monitored session, fetching the loss. */
static inline loom_code train_step(loom_monitored_session *ms, model *m, loom_tensor **loss, loom_status *st) {
  return loom_monitored_session_run(ms, NULL, NULL, 0, &m->loss, loss, 1, &m->train, 1, st);
}
static inline loom_monitored_session *ms_new(model *m, int nhooks, loom_hook *const *hooks) {
  loom_status *st = loom_status_new();
  loom_monitored_session *ms = loom_monitored_session_new(m->g, NULL, NULL, NULL, nhooks, hooks, st);
  cr_assert(ms, "monitored session: %s", loom_status_message(st));
  loom_status_free(st);
  return ms;
}
/* Runs train steps until should_stop (at most cap); returns the count. */
static inline int train_until_stop(loom_monitored_session *ms, model *m, int cap) {
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  int n = 0;
  while (!loom_monitored_session_should_stop(ms) && n < cap) {
    cr_assert_eq(train_step(ms, m, &loss, st), LOOM_OK, "step %d: %s", n, loom_status_message(st));
    n++;
  }
  loom_tensor_free(loss);
  loom_status_free(st);
  return n;
}
static inline int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  cr_assert(d, "opendir %s", dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
  closedir(d);
  return n;
}

/* ---- a recording hook ---- */
typedef struct rec {
  char *log;  /* shared across hooks: "A.begin B.begin ..." */
  size_t cap;
  const char *name;
  int nfetch;            /* fetches to add in before_run */
  loom_output fetch[4];
  int ntarget;
  loom_node *target[2];
  int nfeed;
  loom_output feed[2];
  loom_tensor *feed_val[2];
  float results[16][4];  /* per after_run: the fetched values (as float) */
  int nres;
  int stop_in_after_run_at;  /* after_run call number (1-based) that requests stop; 0 never */
  int stop_in_before_run_at;
  int fail_after_run_at;     /* after_run call number that fails */
  int fail_before_run_at;
  loom_code fail_code;
  int fail_begin, fail_acs, fail_end;
  int nbr, nar;
  float acs_x;               /* x read in after_create_session */
  int64_t acs_step;
  loom_session *acs_session, *ctx_session;
  int norig;                 /* original fetches seen in before_run */
  loom_output orig0;
} rec;

static inline void rec_log(rec *r, const char *what) {
  size_t n = strlen(r->log);
  snprintf(r->log + n, r->cap - n, "%s%s.%s", n ? " " : "", r->name, what);
}
static inline loom_code rec_begin(void *self, loom_graph *g, loom_status *st) {
  rec *r = self;
  (void)g;
  rec_log(r, "begin");
  if (r->fail_begin) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: begin failed", r->name);
  return LOOM_OK;
}
static inline loom_code rec_acs(void *self, loom_session *s, loom_status *st) {
  rec *r = self;
  rec_log(r, "acs");
  r->acs_session = s;
  loom_tensor *t = NULL;
  if (loom_session_read_variable(s, "x", &t, NULL) == LOOM_OK) r->acs_x = scalar_f32(t);
  loom_tensor_free(t);
  t = NULL;
  if (loom_session_read_variable(s, "global_step", &t, NULL) == LOOM_OK) r->acs_step = scalar_i64(t);
  loom_tensor_free(t);
  if (r->fail_acs) return loom_status_set(st, LOOM_ABORTED, "%s: after_create_session failed", r->name);
  return LOOM_OK;
}
static inline loom_code rec_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  rec *r = self;
  rec_log(r, "br");
  r->nbr++;
  r->ctx_session = loom_hook_context_session(ctx);
  const loom_output *of = NULL;
  r->norig = loom_hook_context_original_fetches(ctx, &of);
  if (r->norig > 0) r->orig0 = of[0];
  cr_assert_eq(a->nfetches, 0);
  cr_assert_eq(a->nfeeds, 0);
  cr_assert_eq(a->ntargets, 0);
  if (r->fail_before_run_at == r->nbr) return loom_status_set(st, r->fail_code, "%s: before_run failed", r->name);
  if (r->stop_in_before_run_at == r->nbr) loom_hook_context_request_stop(ctx);
  a->nfetches = r->nfetch;
  a->fetches = r->fetch;
  a->ntargets = r->ntarget;
  a->targets = r->target;
  a->nfeeds = r->nfeed;
  a->feeds = r->feed;
  a->feed_values = r->feed_val;
  return LOOM_OK;
}
static inline loom_code rec_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  rec *r = self;
  rec_log(r, "ar");
  r->nar++;
  for (int i = 0; i < r->nfetch && r->nres < 16; i++) {
    const loom_tensor *t = res[i];
    cr_assert(t);
    switch (loom_tensor_dtype(t)) {
    case LOOM_F32: r->results[r->nres][i] = scalar_f32(t); break;
    default: r->results[r->nres][i] = (float)scalar_i64(t); break;
    }
  }
  r->nres++;
  if (r->fail_after_run_at == r->nar) return loom_status_set(st, r->fail_code, "%s: after_run failed", r->name);
  if (r->stop_in_after_run_at == r->nar) {
    cr_assert_eq(loom_hook_context_stop_requested(ctx), 0);
    loom_hook_context_request_stop(ctx);
    cr_assert_eq(loom_hook_context_stop_requested(ctx), 1);
  }
  return LOOM_OK;
}
static inline loom_code rec_end(void *self, loom_session *s, loom_status *st) {
  rec *r = self;
  (void)s;
  rec_log(r, "end");
  if (r->fail_end) return loom_status_set(st, LOOM_DATA_LOSS, "%s: end failed", r->name);
  return LOOM_OK;
}
static int rec_destroyed;
static inline void rec_destroy(void *self) {
  (void)self;
  rec_destroyed++;
}
static const loom_hook_ops rec_ops = {rec_begin, rec_acs, rec_before, rec_after, rec_end, rec_destroy};

static char g_log[4096];
static inline rec rec_make(const char *name) {
  rec r;
  memset(&r, 0, sizeof r);
  r.log = g_log;
  r.cap = sizeof g_log;
  r.name = name;
  r.fail_code = LOOM_INTERNAL;
  return r;
}

/* ---- captured log lines ---- */
static char g_lines[64][512];
static int g_nlines;
static inline void capture_log(loom_log_level lvl, const char *msg, void *user) {
  (void)user;
  /* the process's first session names its thread count once (base/cpus.c): not a hook's line */
  if (!strncmp(msg, "session: ", 9) && strstr(msg, " threads: ")) return;
  if (g_nlines < 64) snprintf(g_lines[g_nlines++], 512, "%s%s", lvl >= LOOM_LOG_WARN ? "W:" : "", msg);
}
static inline void capture_start(void) {
  g_nlines = 0;
  loom_log_set(capture_log, NULL, LOOM_LOG_INFO);
}
static inline int find_line(const char *substr) {
  for (int i = 0; i < g_nlines; i++)
    if (strstr(g_lines[i], substr)) return i;
  return -1;
}

/* init_fn: the global initializers, then global_step = *(int64_t *)user. */
static inline loom_code init_at_step(loom_session *s, void *user, loom_status *st) {
  loom_node *t = loom_global_variables_initializer(loom_session_graph(s));
  loom_code rc = loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &t, 1, st);
  if (rc) return rc;
  loom_tensor *v = loom_tensor_scalar_i64(*(const int64_t *)user);
  rc = loom_session_assign_variable(s, "global_step", v, st);
  loom_tensor_free(v);
  return rc;
}
static inline loom_monitored_session *ms_new_at(model *m, int64_t *step, int nhooks, loom_hook *const *hooks) {
  loom_status *st = loom_status_new();
  loom_monitored_session *ms = loom_monitored_session_new(m->g, NULL, init_at_step, step, nhooks, hooks, st);
  cr_assert(ms, "monitored session: %s", loom_status_message(st));
  loom_status_free(st);
  return ms;
}

/* ---- event files ---- */
typedef struct evrec {
  int64_t step;
  int slog;
  char tag[64];
  double value;
  int nvalues;
} evrec;
/* Reads every event after the file_version one. */
static inline int read_events(const char *path, evrec *out, int cap) {
  loom_status *st = loom_status_new();
  loom_event_reader *r = loom_event_reader_open(path, st);
  cr_assert(r, "%s", loom_status_message(st));
  const loom_event *ev;
  int n = 0;
  while (loom_event_reader_next(r, &ev, st) == LOOM_OK) {
    if (ev->file_version || ev->graph_def) continue; /* graph events: test_hooks_summary, test_tensorboard */
    cr_assert(n < cap);
    evrec *e = &out[n++];
    memset(e, 0, sizeof *e);
    e->step = ev->step;
    e->slog = ev->session_log_status;
    e->nvalues = ev->nvalues;
    if (ev->nvalues) {
      snprintf(e->tag, sizeof e->tag, "%s", ev->values[0].tag);
      e->value = ev->values[0].simple_value;
    }
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  loom_event_reader_free(r);
  loom_status_free(st);
  return n;
}

#endif
