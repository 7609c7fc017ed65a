/* estimator/hooks/hooks_std.c - the standard SessionRunHooks
 * (tf.compat.v1.train.basic_session_run_hooks): StopAtStep, LoggingTensor
 * (with a terminal progress bar), StepCounter, NanTensor, CheckpointSaver
 * (+ listeners), SummarySaver, FinalOps, FeedFn, GlobalStepWaiter, Profiler.
 *
 * Hooks that need the global step each step fetch the global_step variable's
 * output (an int64 scalar; loom fetches a variable's value at the end of the
 * run, i.e. after the train op's increment). Hooks that fetch nothing on a
 * step add nothing to it. Every hook keeps its fetch arrays in its own state,
 * so steps allocate nothing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "estimator/hooks/hooks_impl.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"

/* Tags at the start of every hook state, so the typed accessors can check
 * what they were given. */
enum {
  MAGIC_STOP = 0x484b0001u,
  MAGIC_LOG,
  MAGIC_COUNTER,
  MAGIC_NAN,
  MAGIC_CKPT,
  MAGIC_SUMMARY,
  MAGIC_FINAL,
  MAGIC_FEED,
  MAGIC_WAITER,
  MAGIC_PROFILER
};

/* ===================================================================== *
 * Shared helpers
 * ===================================================================== */
/* Wraps self in a hook; on failure frees self through ops->destroy. */
static loom_hook *wrap(const loom_hook_ops *ops, void *self, const char *name, loom_status *st) {
  loom_hook *h = self ? loom_hook_new(ops, self, name) : NULL;
  if (!h) {
    if (self) ops->destroy(self);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    return NULL;
  }
  loom_status_clear(st);
  return h;
}

/* The state of a standard hook, identified by its destroy op (each
 * accessor's hook kind has its own), after checking the magic tag. */
static void *self_of(const loom_hook *h, void (*destroy)(void *), uint32_t magic) {
  const loom_hook_ops *ops = loom__hook_ops(h);
  if (!ops || ops->destroy != destroy) return NULL;
  uint32_t *p = loom_hook_self(h);
  return p && *p == magic ? p : NULL;
}

/* The graph's global step: its output and its variable name (copied into
 * *name, freeing the previous one). */
typedef struct gstep {
  loom_output out;
  char *name;
  loom_tensor *tmp; /* read buffer, reused */
} gstep;

static loom_code gstep_find(gstep *gs, loom_graph *g, const char *hook, loom_status *st) {
  loom_variable *v = loom_get_global_step(g);
  if (!v) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "Global step should be created to use %s.", hook);
  char *nm = loom__strdup(loom_variable_name(v));
  if (!nm) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", hook);
  loom__free(gs->name);
  gs->name = nm;
  gs->out = loom_variable_output(v);
  return LOOM_OK;
}
static void gstep_free(gstep *gs) {
  loom__free(gs->name);
  loom_tensor_free(gs->tmp);
}
static int64_t tensor_step(const loom_tensor *t) { return (int64_t)loom__tensor_scalar_f64(t); }
/* The session's current global step. */
static loom_code gstep_read(gstep *gs, loom_session *s, int64_t *step, loom_status *st) {
  loom_code rc = loom_session_read_variable(s, gs->name, &gs->tmp, st);
  if (rc) return rc;
  *step = tensor_step(gs->tmp);
  return LOOM_OK;
}


/* "name" or "name:i" of an output into buf. */
static void output_name(char *buf, size_t cap, loom_output o) {
  if (o.index) snprintf(buf, cap, "%s:%d", loom_node_name(o.node), (int)o.index);
  else snprintf(buf, cap, "%s", loom_node_name(o.node));
}

/* Appends to buf (len *n, capacity cap), truncating. */
static void app(char *buf, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void app(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
  if (*n >= cap - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, cap - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k < cap - *n ? (size_t)k : cap - *n - 1;
}

/* A tensor's value the way numpy prints it: a scalar, or "[a b c]" (at most
 * 16 elements, then "..."). */
static void format_value(char *buf, size_t cap, size_t *n, const loom_tensor *t) {
  if (!t) {
    app(buf, cap, n, "None");
    return;
  }
  int64_t m = loom_tensor_numel(t);
  int scalar = loom_tensor_ndim(t) == 0;
  if (!scalar) app(buf, cap, n, "[");
  const void *d = loom_tensor_data_const(t);
  for (int64_t i = 0; i < m && i < 16; i++) {
    if (i) app(buf, cap, n, " ");
    switch (loom_tensor_dtype(t)) {
    case LOOM_F32: app(buf, cap, n, "%.7g", (double)((const float *)d)[i]); break;
    case LOOM_F64: app(buf, cap, n, "%.10g", ((const double *)d)[i]); break;
    case LOOM_I32: app(buf, cap, n, "%d", ((const int32_t *)d)[i]); break;
    case LOOM_I64: app(buf, cap, n, "%lld", (long long)((const int64_t *)d)[i]); break;
    case LOOM_U8: app(buf, cap, n, "%u", (unsigned)((const uint8_t *)d)[i]); break;
    case LOOM_BOOL: app(buf, cap, n, "%s", ((const uint8_t *)d)[i] ? "True" : "False"); break;
    case LOOM_STRING: {
      size_t len = 0;
      const char *s = loom_tensor_get_string(t, i, &len);
      app(buf, cap, n, "%s%.*s%s", scalar ? "" : "'", (int)(len > 64 ? 64 : len), s ? s : "", scalar ? "" : "'");
      break;
    }
    default: app(buf, cap, n, "?"); break;
    }
  }
  if (m > 16) app(buf, cap, n, " ...");
  if (!scalar) app(buf, cap, n, "]");
}

/* ===================================================================== *
 * StopAtStepHook
 * ===================================================================== */
typedef struct stop_hook {
  uint32_t magic;
  int64_t num_steps, last_step_arg, last_step;
  gstep gs;
  loom_hook *hook;
} stop_hook;

static loom_code stop_begin(void *self, loom_graph *g, loom_status *st) {
  stop_hook *h = self;
  return gstep_find(&h->gs, g, "StopAtStepHook", st);
}
static loom_code stop_acs(void *self, loom_session *s, loom_status *st) {
  stop_hook *h = self;
  int64_t step;
  loom_code rc = gstep_read(&h->gs, s, &step, st);
  if (rc) return rc;
  h->last_step = h->num_steps > 0 ? step + h->num_steps : h->last_step_arg;
  if (step >= h->last_step) loom__hook_request_stop_early(h->hook);
  return LOOM_OK;
}
static loom_code stop_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  stop_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code stop_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  stop_hook *h = self;
  if (tensor_step(res[0]) >= h->last_step) loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static void stop_destroy(void *self) {
  stop_hook *h = self;
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_stop_at_step_hook(int64_t num_steps, int64_t last_step, loom_status *st) {
  if (num_steps < 0 || last_step < 0 || (num_steps > 0) == (last_step > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "StopAtStepHook: exactly one of num_steps (%lld) and last_step (%lld) must be > 0, the other 0",
                    (long long)num_steps, (long long)last_step);
    return NULL;
  }
  static const loom_hook_ops ops = {stop_begin, stop_acs, stop_before, stop_after, NULL, stop_destroy};
  stop_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_STOP;
    h->num_steps = num_steps;
    h->last_step_arg = last_step;
    h->last_step = last_step;
  }
  loom_hook *hk = wrap(&ops, h, "StopAtStepHook", st);
  if (hk) h->hook = hk;
  return hk;
}

/* ===================================================================== *
 * LoggingTensorHook (+ progress bar)
 * ===================================================================== */
typedef struct log_hook {
  uint32_t magic;
  int n;
  char **tags;
  loom_output *tensors;
  int64_t every_n_iter;
  double every_n_secs;
  int at_end, only_at_end;
  loom_step_timer timer;
  int64_t iter;
  int trigger;
  loom_tensor **end_vals;
  /* progress bar */
  int64_t total;
  int tty;   /* stdout is a terminal (checked in begin) */
  int bar;   /* tty && total > 0: the bar replaces the log lines */
  double t0, last_draw;
  char values[256];
} log_hook;

static loom_code log_begin(void *self, loom_graph *g, loom_status *st) {
  log_hook *h = self;
  (void)g;
  if (!h->only_at_end) loom_step_timer_init(&h->timer, h->every_n_secs, h->every_n_iter, NULL);
  h->timer.last_step = -1;
  h->iter = 0;
  h->tty = isatty(STDOUT_FILENO);
  h->bar = h->tty && h->total > 0;
  h->t0 = h->last_draw = loom__mono_secs();
  h->values[0] = 0;
  return LOOM_OK;
}

static void fmt_secs(char *buf, size_t cap, double secs) {
  if (!(secs >= 0) || secs > 1e8) {
    snprintf(buf, cap, "?");
    return;
  }
  long s = (long)(secs + 0.5);
  if (s >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

/* "\r 45% [=====>     ] 450/1000  123.4 steps/s  ETA 0:04  loss = ..." cut
 * to the terminal's width so it never wraps. */
static void bar_draw(log_hook *h, int final) {
  double now = loom__mono_secs();
  h->last_draw = now;
  double el = now - h->t0;
  double rate = el > 0 ? (double)h->iter / el : 0;
  int64_t done = h->iter < h->total ? h->iter : h->total;
  double frac = (double)done / (double)h->total;
  enum { W = 30 };
  char bar[W + 1];
  int fill = (int)(frac * W);
  for (int i = 0; i < W; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
  if (fill >= W) bar[W - 1] = '=';
  bar[W] = 0;
  char eta[32];
  fmt_secs(eta, sizeof eta, rate > 0 ? (double)(h->total - done) / rate : -1);
  char tm[32];
  fmt_secs(tm, sizeof tm, el);
  char line[512];
  size_t n = 0;
  app(line, sizeof line, &n, "\r%3d%% [%s] %lld/%lld  %.1f steps/s  %s %s", (int)(frac * 100), bar, (long long)h->iter,
      (long long)h->total, rate, final ? "time" : "ETA", final ? tm : eta);
  if (h->values[0]) app(line, sizeof line, &n, "  %s", h->values);
  struct winsize ws;
  if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 8 && n > (size_t)ws.ws_col)
    n = ws.ws_col; /* "\r" counts as one column; the line stays one short of wrapping */
  line[n] = 0;
  fputs(line, stdout);
  fputs("\033[K", stdout);
  if (final) fputc('\n', stdout);
  fflush(stdout);
}

static void log_values(log_hook *h, loom_tensor *const *vals) {
  char buf[1024];
  size_t n = 0;
  for (int i = 0; i < h->n; i++) {
    app(buf, sizeof buf, &n, "%s%s = ", i ? ", " : "", h->tags[i]);
    format_value(buf, sizeof buf, &n, vals[i]);
  }
  int first = h->timer.last_step < 0;
  double es = 0;
  loom_step_timer_update(&h->timer, h->iter, &es, NULL);
  if (h->bar) {
    size_t k = n < sizeof h->values - 1 ? n : sizeof h->values - 1;
    memcpy(h->values, buf, k);
    h->values[k] = 0;
    return;
  }
  if (first) loom__log(LOOM_LOG_INFO, "%s", buf);
  else loom__log(LOOM_LOG_INFO, "%s (%.3f sec)", buf, es);
}

static loom_code log_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  log_hook *h = self;
  h->trigger = !h->only_at_end && loom_step_timer_should_trigger(&h->timer, h->iter);
  /* at_end: the tensors may depend on fed inputs (datasets are fed from
   * outside the graph), so end() cannot re-run them; keep the last step's
   * values instead. */
  if (h->trigger || h->at_end) {
    a->nfetches = h->n;
    a->fetches = h->tensors;
  }
  return LOOM_OK;
}
static loom_code log_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  log_hook *h = self;
  if (h->trigger || h->at_end) {
    if (h->at_end) {
      if (!h->end_vals && !(h->end_vals = loom__calloc((size_t)h->n, sizeof *h->end_vals)))
        return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "LoggingTensorHook: out of memory");
      for (int i = 0; i < h->n; i++) {
        loom_tensor *d = h->end_vals[i];
        loom_dtype dt = loom_tensor_dtype(res[i]);
        if (d && dt != LOOM_STRING && loom_tensor_dtype(d) == dt && loom_tensor_numel(d) == loom_tensor_numel(res[i]) &&
            loom_tensor_reshape(d, loom_tensor_ndim(res[i]), loom_tensor_dims(res[i]), NULL) == LOOM_OK) {
          memcpy(loom_tensor_data(d), loom_tensor_data_const(res[i]), loom_tensor_nbytes(res[i])); /* no malloc per step */
          continue;
        }
        loom_tensor_free(d);
        if (!(h->end_vals[i] = loom_tensor_copy(res[i], st))) return loom_status_code(st);
      }
    }
    if (h->trigger) log_values(h, res);
  }
  h->iter++;
  if (h->bar && (h->trigger || h->iter >= h->total || loom__mono_secs() - h->last_draw >= 0.1)) bar_draw(h, 0);
  return LOOM_OK;
}
static loom_code log_end(void *self, loom_session *s, loom_status *st) {
  log_hook *h = self;
  if (h->at_end && h->end_vals) log_values(h, h->end_vals);
  if (h->bar) bar_draw(h, 1);
  return LOOM_OK;
}
static void log_destroy(void *self) {
  log_hook *h = self;
  for (int i = 0; i < h->n; i++) {
    if (h->tags) loom__free(h->tags[i]);
    if (h->end_vals) loom_tensor_free(h->end_vals[i]);
  }
  loom__free(h->tags);
  loom__free(h->tensors);
  loom__free(h->end_vals);
  loom__free(h);
}

loom_hook *loom_logging_tensor_hook(int n, const char *const *tags, const loom_output *tensors, int64_t every_n_iter,
                                    double every_n_secs, int at_end, loom_status *st) {
  if (n <= 0 || !tensors) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "LoggingTensorHook: no tensors to log (n = %d)", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!tensors[i].node || !loom_output_valid(tensors[i])) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "LoggingTensorHook: tensor %d is not a valid output", i);
      return NULL;
    }
  int only_at_end = at_end && every_n_iter == 0 && every_n_secs == 0;
  if (every_n_iter < 0 || !(every_n_secs >= 0) || (!only_at_end && (every_n_iter > 0) == (every_n_secs > 0))) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "LoggingTensorHook: either at_end and/or exactly one of every_n_iter (%lld) and every_n_secs (%g) "
                    "must be given",
                    (long long)every_n_iter, every_n_secs);
    return NULL;
  }
  static const loom_hook_ops ops = {log_begin, NULL, log_before, log_after, log_end, log_destroy};
  log_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_LOG;
    h->n = n;
    h->every_n_iter = every_n_iter;
    h->every_n_secs = every_n_secs;
    h->at_end = at_end;
    h->only_at_end = only_at_end;
    h->timer.last_step = -1;
    h->tags = loom__calloc((size_t)n, sizeof *h->tags);
    h->tensors = loom__malloc(sizeof *h->tensors * (size_t)n);
    int ok = h->tags && h->tensors;
    for (int i = 0; ok && i < n; i++) {
      h->tensors[i] = tensors[i];
      char nm[512];
      if (tags && tags[i]) snprintf(nm, sizeof nm, "%s", tags[i]);
      else output_name(nm, sizeof nm, tensors[i]);
      ok = (h->tags[i] = loom__strdup(nm)) != NULL;
    }
    if (!ok) {
      log_destroy(h);
      h = NULL;
    }
  }
  return wrap(&ops, h, "LoggingTensorHook", st);
}

void loom_logging_tensor_hook_set_total_steps(loom_hook *hk, int64_t total_steps) {
  log_hook *h = self_of(hk, log_destroy, MAGIC_LOG);
  if (h) {
    h->total = total_steps > 0 ? total_steps : 0;
    h->bar = h->tty && h->total > 0; /* also when set after begin */
  }
}

/* ===================================================================== *
 * StepCounterHook
 * ===================================================================== */
typedef struct counter_hook {
  uint32_t magic;
  double every_secs;
  int64_t every_steps;
  loom_event_writer *w;
  gstep gs;
  char tag[300];
  loom_step_timer timer;
  int have_last;
  int64_t last_gs;
  int check_count;
} counter_hook;

static loom_code counter_begin(void *self, loom_graph *g, loom_status *st) {
  counter_hook *h = self;
  loom_code rc = gstep_find(&h->gs, g, "StepCounterHook", st);
  if (rc) return rc;
  snprintf(h->tag, sizeof h->tag, "%s/sec", h->gs.name);
  return LOOM_OK;
}
static loom_code counter_acs(void *self, loom_session *s, loom_status *st) {
  counter_hook *h = self;
  loom_step_timer_init(&h->timer, h->every_secs, h->every_steps, NULL);
  h->have_last = 0;
  h->check_count = 0;
  return LOOM_OK;
}
static loom_code counter_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  counter_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code counter_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  counter_hook *h = self;
  int64_t step = tensor_step(res[0]);
  if (loom_step_timer_should_trigger(&h->timer, step)) {
    int first = h->timer.last_step < 0;
    double es;
    int64_t en;
    loom_step_timer_update(&h->timer, step, &es, &en);
    if (!first && es > 0) {
      double rate = (double)en / es;
      if (h->w) {
        loom_code rc = loom_event_writer_add_scalar(h->w, h->tag, rate, step, st);
        if (rc) return rc;
      }
      loom__log(LOOM_LOG_INFO, "%s: %g", h->tag, rate);
    }
  }
  if (h->have_last && step == h->last_gs) {
    if (++h->check_count % 20 == 0) {
      h->check_count = 0;
      loom__log(LOOM_LOG_WARN,
                "It seems that global step has not been increased. Current value (could be stable): %lld vs "
                "previous value: %lld. You could increase the global step by passing the global step to "
                "the optimizer's minimize.",
                (long long)step, (long long)h->last_gs);
    }
  } else {
    h->check_count = 0;
  }
  h->have_last = 1;
  h->last_gs = step;
  return LOOM_OK;
}
static void counter_destroy(void *self) {
  counter_hook *h = self;
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_step_counter_hook(int64_t every_n_steps, double every_n_secs, loom_event_writer *writer,
                                  loom_status *st) {
  if (every_n_steps < 0 || !(every_n_secs >= 0) || (every_n_steps > 0) == (every_n_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "StepCounterHook: exactly one of every_n_steps (%lld) and every_n_secs (%g) must be > 0",
                    (long long)every_n_steps, every_n_secs);
    return NULL;
  }
  static const loom_hook_ops ops = {counter_begin, counter_acs, counter_before, counter_after, NULL, counter_destroy};
  counter_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_COUNTER;
    h->every_secs = every_n_secs;
    h->every_steps = every_n_steps;
    h->w = writer;
    h->timer.last_step = -1;
  }
  return wrap(&ops, h, "StepCounterHook", st);
}

/* ===================================================================== *
 * NanTensorHook
 * ===================================================================== */
typedef struct nan_hook {
  uint32_t magic;
  loom_output loss;
  int fail;
} nan_hook;

static loom_code nan_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  nan_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->loss;
  return LOOM_OK;
}
static int has_nan(const loom_tensor *t) {
  int64_t m = loom_tensor_numel(t);
  if (loom_tensor_dtype(t) == LOOM_F32) {
    const float *d = loom_tensor_data_const(t);
    for (int64_t i = 0; i < m; i++)
      if (isnan(d[i])) return 1;
  } else if (loom_tensor_dtype(t) == LOOM_F64) {
    const double *d = loom_tensor_data_const(t);
    for (int64_t i = 0; i < m; i++)
      if (isnan(d[i])) return 1;
  }
  return 0;
}
static loom_code nan_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  nan_hook *h = self;
  if (!res[0] || !has_nan(res[0])) return LOOM_OK;
  if (h->fail) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "NaN loss during training.");
  loom__log(LOOM_LOG_WARN, "Model diverged with loss = NaN.");
  loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static void plain_destroy(void *self) { loom__free(self); }

loom_hook *loom_nan_tensor_hook(loom_output loss, int fail_on_nan_loss, loom_status *st) {
  if (!loss.node || !loom_output_valid(loss)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "NanTensorHook: loss is not a valid output");
    return NULL;
  }
  static const loom_hook_ops ops = {NULL, NULL, nan_before, nan_after, NULL, plain_destroy};
  nan_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_NAN;
    h->loss = loss;
    h->fail = fail_on_nan_loss;
  }
  return wrap(&ops, h, "NanTensorHook", st);
}

/* ===================================================================== *
 * CheckpointSaverHook
 * ===================================================================== */
typedef struct ckpt_hook {
  uint32_t magic;
  char *dir, *prefix;
  double secs;
  int64_t steps;
  loom_saver *user_saver, *own_saver;
  int keep_max;
  loom_event_writer *w;
  int nl;
  const loom_checkpoint_listener **l;
  void **ls;
  loom_step_timer timer;
  gstep gs;
} ckpt_hook;

static loom_saver *ckpt_saver(ckpt_hook *h) { return h->user_saver ? h->user_saver : h->own_saver; }

/* Saves at step; *stop = a listener asked to stop. */
static loom_code ckpt_save(ckpt_hook *h, loom_session *s, int64_t step, int *stop, loom_status *st) {
  loom_code rc;
  *stop = 0;
  if (h->nl) loom__log(LOOM_LOG_INFO, "Calling checkpoint listeners before saving checkpoint %lld...", (long long)step);
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->before_save && (rc = h->l[i]->before_save(h->ls ? h->ls[i] : NULL, s, step, st))) return rc;
  loom__log(LOOM_LOG_INFO, "Saving checkpoints for %lld into %s.", (long long)step, h->prefix);
  const char *path = loom_saver_save(ckpt_saver(h), s, h->prefix, step, st);
  if (!path) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  if (h->w && (rc = loom_event_writer_add_session_log(h->w, LOOM_SESSION_LOG_CHECKPOINT, path, step, st))) return rc;
  if (h->nl) loom__log(LOOM_LOG_INFO, "Calling checkpoint listeners after saving checkpoint %lld...", (long long)step);
  for (int i = 0; i < h->nl; i++) {
    int sv = 0;
    if (h->l[i]->after_save && (rc = h->l[i]->after_save(h->ls ? h->ls[i] : NULL, s, step, &sv, st))) return rc;
    if (sv) *stop = 1;
  }
  return LOOM_OK;
}

static loom_code ckpt_begin(void *self, loom_graph *g, loom_status *st) {
  ckpt_hook *h = self;
  loom_code rc = gstep_find(&h->gs, g, "CheckpointSaverHook", st);
  if (rc) return rc;
  /* a default saver is built for each session's graph */
  loom_saver_free(h->own_saver);
  h->own_saver = NULL;
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->begin && (rc = h->l[i]->begin(h->ls ? h->ls[i] : NULL, st))) return rc;
  return LOOM_OK;
}
static loom_code ckpt_acs(void *self, loom_session *s, loom_status *st) {
  ckpt_hook *h = self;
  loom_code rc = loom__mkdir_p(h->dir, st);
  if (rc) return rc;
  if (!h->user_saver) {
    h->own_saver = loom_saver_new(loom_session_graph(s), 0, NULL, h->keep_max, st);
    if (!h->own_saver) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    /* earlier runs' checkpoints count towards keep_max (no state file yet: none) */
    char state[4200];
    snprintf(state, sizeof state, "%s/checkpoint", h->dir);
    if (!access(state, F_OK) && (rc = loom_saver_recover_last_checkpoints(h->own_saver, h->dir, st))) return rc;
  }
  int64_t step;
  if ((rc = gstep_read(&h->gs, s, &step, st))) return rc;
  int stop;
  if ((rc = ckpt_save(h, s, step, &stop, st))) return rc;
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  return LOOM_OK;
}
static loom_code ckpt_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  ckpt_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code ckpt_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  ckpt_hook *h = self;
  int64_t step = tensor_step(res[0]);
  if (!loom_step_timer_should_trigger(&h->timer, step)) return LOOM_OK;
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  int stop;
  loom_code rc = ckpt_save(h, loom_hook_context_session(ctx), step, &stop, st);
  if (rc) return rc;
  if (stop) loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static loom_code ckpt_end(void *self, loom_session *s, loom_status *st) {
  ckpt_hook *h = self;
  int64_t step;
  loom_code rc = gstep_read(&h->gs, s, &step, st);
  if (rc) return rc;
  if (step != h->timer.last_step) {
    int stop;
    if ((rc = ckpt_save(h, s, step, &stop, st))) return rc;
  }
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->end && (rc = h->l[i]->end(h->ls ? h->ls[i] : NULL, s, step, st))) return rc;
  return LOOM_OK;
}
static void ckpt_destroy(void *self) {
  ckpt_hook *h = self;
  loom__free(h->dir);
  loom__free(h->prefix);
  loom_saver_free(h->own_saver);
  loom__free(h->l);
  loom__free(h->ls);
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_checkpoint_saver_hook(const char *dir, double save_secs, int64_t save_steps, loom_saver *saver,
                                      int keep_max, loom_event_writer *writer, int nlisteners,
                                      const loom_checkpoint_listener *const *listeners, void *const *listener_selves,
                                      loom_status *st) {
  if (!dir || !*dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: checkpoint_dir is empty");
    return NULL;
  }
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "CheckpointSaverHook: exactly one of save_secs (%g) and save_steps (%lld) must be > 0", save_secs,
                    (long long)save_steps);
    return NULL;
  }
  if (nlisteners < 0 || (nlisteners > 0 && !listeners)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: invalid listener list (%d listeners)",
                    nlisteners);
    return NULL;
  }
  for (int i = 0; i < nlisteners; i++)
    if (!listeners[i]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: listener %d is NULL", i);
      return NULL;
    }
  static const loom_hook_ops ops = {ckpt_begin, ckpt_acs, ckpt_before, ckpt_after, ckpt_end, ckpt_destroy};
  ckpt_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_CKPT;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "dir/" -> "dir" */
    h->dir = loom__malloc(n + 1);
    h->prefix = loom__malloc(n + 16);
    h->secs = save_secs;
    h->steps = save_steps;
    h->user_saver = saver;
    h->keep_max = keep_max;
    h->w = writer;
    h->nl = nlisteners;
    h->timer.last_step = -1;
    int ok = h->dir && h->prefix;
    if (ok) {
      memcpy(h->dir, dir, n);
      h->dir[n] = 0;
      snprintf(h->prefix, n + 16, "%s/model.ckpt", h->dir);
    }
    if (ok && nlisteners) {
      h->l = loom__malloc(sizeof *h->l * (size_t)nlisteners);
      ok = h->l != NULL;
      if (ok) memcpy(h->l, listeners, sizeof *h->l * (size_t)nlisteners);
      if (ok && listener_selves) {
        h->ls = loom__malloc(sizeof *h->ls * (size_t)nlisteners);
        ok = h->ls != NULL;
        if (ok) memcpy(h->ls, listener_selves, sizeof *h->ls * (size_t)nlisteners);
      }
    }
    if (!ok) {
      ckpt_destroy(h);
      h = NULL;
    }
  }
  return wrap(&ops, h, "CheckpointSaverHook", st);
}

/* ===================================================================== *
 * SummarySaverHook
 * ===================================================================== */
typedef struct summary_hook {
  uint32_t magic;
  int64_t steps;
  double secs;
  loom_event_writer *w;
  loom_graph *g;
  gstep gs;
  loom_output *fetch; /* [global_step, summaries...] */
  int nfetch, capfetch;
  loom_step_timer timer;
  int first, request;
  int64_t next_step;
} summary_hook;

static loom_code summary_begin(void *self, loom_graph *g, loom_status *st) {
  summary_hook *h = self;
  loom_code rc = gstep_find(&h->gs, g, "SummarySaverHook", st);
  if (rc) return rc;
  const loom_output *outs = NULL;
  int n = loom_graph_summaries(g, NULL, NULL, &outs);
  if (n + 1 > h->capfetch) {
    loom_output *p = loom__realloc(h->fetch, sizeof *p * (size_t)(n + 1));
    if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "SummarySaverHook: out of memory");
    h->fetch = p;
    h->capfetch = n + 1;
  }
  h->fetch[0] = h->gs.out;
  if (n) memcpy(h->fetch + 1, outs, sizeof *outs * (size_t)n);
  h->nfetch = n + 1;
  h->g = g;
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  h->first = 1;
  h->next_step = 0;
  return LOOM_OK;
}
static loom_code summary_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  summary_hook *h = self;
  h->request = h->first || loom_step_timer_should_trigger(&h->timer, h->next_step);
  a->nfetches = h->request ? h->nfetch : 1;
  a->fetches = h->fetch;
  return LOOM_OK;
}
static loom_code summary_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  summary_hook *h = self;
  int64_t step = tensor_step(res[0]);
  loom_code rc;
  if (h->first && (rc = loom_event_writer_add_session_log(h->w, LOOM_SESSION_LOG_START, NULL, step, st))) return rc;
  if (h->request) {
    loom_step_timer_update(&h->timer, step, NULL, NULL);
    if (h->nfetch > 1 && (rc = loom_event_writer_add_graph_summaries(h->w, h->g, res + 1, step, st))) return rc;
  }
  h->first = 0;
  h->next_step = step + 1;
  return LOOM_OK;
}
static loom_code summary_end(void *self, loom_session *s, loom_status *st) {
  summary_hook *h = self;
  return loom_event_writer_flush(h->w, st);
}
static void summary_destroy(void *self) {
  summary_hook *h = self;
  loom__free(h->fetch);
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_summary_saver_hook(int64_t save_steps, double save_secs, loom_event_writer *writer, loom_status *st) {
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "SummarySaverHook: exactly one of save_steps (%lld) and save_secs (%g) must be > 0",
                    (long long)save_steps, save_secs);
    return NULL;
  }
  if (!writer) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "SummarySaverHook: writer is NULL");
    return NULL;
  }
  static const loom_hook_ops ops = {summary_begin, NULL, summary_before, summary_after, summary_end, summary_destroy};
  summary_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_SUMMARY;
    h->steps = save_steps;
    h->secs = save_secs;
    h->w = writer;
    h->timer.last_step = -1;
  }
  return wrap(&ops, h, "SummarySaverHook", st);
}

/* ===================================================================== *
 * FinalOpsHook
 * ===================================================================== */
typedef struct final_hook {
  uint32_t magic;
  int n;
  loom_output *ops;
  loom_tensor **vals;
  int have;
} final_hook;

static loom_code final_end(void *self, loom_session *s, loom_status *st) {
  final_hook *h = self;
  if (!h->n) {
    h->have = 1;
    return LOOM_OK;
  }
  loom_code rc = loom_session_run(s, NULL, NULL, 0, h->ops, h->vals, h->n, NULL, 0, st);
  h->have = rc == LOOM_OK;
  return rc;
}
static void final_destroy(void *self) {
  final_hook *h = self;
  if (h->vals)
    for (int i = 0; i < h->n; i++) loom_tensor_free(h->vals[i]);
  loom__free(h->vals);
  loom__free(h->ops);
  loom__free(h);
}

loom_hook *loom_final_ops_hook(int n, const loom_output *final_ops, loom_status *st) {
  if (n < 0 || (n > 0 && !final_ops)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "FinalOpsHook: invalid final_ops list (n = %d)", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!final_ops[i].node || !loom_output_valid(final_ops[i])) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "FinalOpsHook: final_ops[%d] is not a valid output", i);
      return NULL;
    }
  static const loom_hook_ops ops = {NULL, NULL, NULL, NULL, final_end, final_destroy};
  final_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_FINAL;
    h->n = n;
    h->ops = loom__malloc(sizeof *h->ops * (size_t)(n ? n : 1));
    h->vals = loom__calloc((size_t)(n ? n : 1), sizeof *h->vals);
    if (!h->ops || !h->vals) {
      final_destroy(h);
      h = NULL;
    } else if (n) {
      memcpy(h->ops, final_ops, sizeof *h->ops * (size_t)n);
    }
  }
  return wrap(&ops, h, "FinalOpsHook", st);
}

loom_tensor *const *loom_final_ops_hook_values(const loom_hook *hk, int *n) {
  final_hook *h = self_of(hk, final_destroy, MAGIC_FINAL);
  if (!h || !h->have) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = h->n;
  return h->vals;
}

/* ===================================================================== *
 * FeedFnHook
 * ===================================================================== */
enum { FEED_CAP = 64 };
typedef struct feed_hook {
  uint32_t magic;
  loom_feed_fn fn;
  void *user;
  loom_output feeds[FEED_CAP];
  loom_tensor *vals[FEED_CAP];
} feed_hook;

static loom_code feed_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  feed_hook *h = self;
  int k = h->fn(h->user, FEED_CAP, h->feeds, h->vals);
  if (k < 0) return loom_status_set(st, LOOM_OUT_OF_RANGE, "FeedFnHook: feed_fn reported the end of its input");
  if (k > FEED_CAP)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn returned %d feeds (at most %d)", k,
                           FEED_CAP);
  for (int i = 0; i < k; i++)
    if (!h->vals[i])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn left value %d NULL", i);
  a->nfeeds = k;
  a->feeds = h->feeds;
  a->feed_values = h->vals;
  return LOOM_OK;
}

loom_hook *loom_feed_fn_hook(loom_feed_fn fn, void *user, loom_status *st) {
  if (!fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn is NULL");
    return NULL;
  }
  static const loom_hook_ops ops = {NULL, NULL, feed_before, NULL, NULL, plain_destroy};
  feed_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_FEED;
    h->fn = fn;
    h->user = user;
  }
  return wrap(&ops, h, "FeedFnHook", st);
}

/* ===================================================================== *
 * GlobalStepWaiterHook
 * ===================================================================== */
typedef struct waiter_hook {
  uint32_t magic;
  int64_t wait;
  int started;
  gstep gs;
} waiter_hook;

static loom_code waiter_begin(void *self, loom_graph *g, loom_status *st) {
  waiter_hook *h = self;
  h->started = 0;
  return gstep_find(&h->gs, g, "GlobalStepWaiterHook", st);
}
static loom_code waiter_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  waiter_hook *h = self;
  if (h->started) return LOOM_OK;
  if (h->wait <= 0) {
    h->started = 1;
    return LOOM_OK;
  }
  loom_session *s = loom_hook_context_session(ctx);
  int64_t last_logged = 0;
  for (int polls = 0;; polls++) {
    int64_t step;
    loom_code rc = gstep_read(&h->gs, s, &step, st);
    if (rc) return rc;
    if (step >= h->wait) {
      h->started = 1;
      return LOOM_OK;
    }
    if (!polls) {
      loom__log(LOOM_LOG_INFO, "Waiting for global step %lld before starting training.", (long long)h->wait);
    } else if (step - last_logged > 1000) {
      loom__log(LOOM_LOG_INFO, "Waiting for global step %lld before starting training. Current step is %lld.",
                (long long)h->wait, (long long)step);
      last_logged = step;
    }
    struct timespec ts = {0, 500000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
  }
}
static void waiter_destroy(void *self) {
  waiter_hook *h = self;
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_global_step_waiter_hook(int64_t wait_until_step, loom_status *st) {
  if (wait_until_step < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "GlobalStepWaiterHook: wait_until_step (%lld) must be >= 0",
                    (long long)wait_until_step);
    return NULL;
  }
  static const loom_hook_ops ops = {waiter_begin, NULL, waiter_before, NULL, NULL, waiter_destroy};
  waiter_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_WAITER;
    h->wait = wait_until_step;
  }
  return wrap(&ops, h, "GlobalStepWaiterHook", st);
}

/* ===================================================================== *
 * ProfilerHook
 * ===================================================================== */
typedef struct profiler_hook {
  uint32_t magic;
  int64_t steps;
  double secs;
  char *dir;
  gstep gs;
  loom_step_timer timer;
  int request;
  int64_t next_step;
  loom_session *traced;
} profiler_hook;

static loom_code prof_begin(void *self, loom_graph *g, loom_status *st) {
  profiler_hook *h = self;
  return gstep_find(&h->gs, g, "ProfilerHook", st);
}
static loom_code prof_acs(void *self, loom_session *s, loom_status *st) {
  profiler_hook *h = self;
  loom_code rc = loom__mkdir_p(h->dir, st);
  if (rc) return rc;
  int64_t step;
  if ((rc = gstep_read(&h->gs, s, &step, st))) return rc;
  /* the first trace comes save_steps (or save_secs) after the start */
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  h->next_step = step + 1;
  h->traced = NULL;
  return LOOM_OK;
}
static loom_code prof_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  profiler_hook *h = self;
  h->request = loom_step_timer_should_trigger(&h->timer, h->next_step);
  if (h->request) {
    h->traced = loom_hook_context_session(ctx);
    loom_session_set_tracing(h->traced, 1);
  }
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code prof_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  profiler_hook *h = self;
  int64_t step = tensor_step(res[0]);
  h->next_step = step + 1;
  if (!h->request) return LOOM_OK;
  loom_session *s = loom_hook_context_session(ctx);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  int n = 0;
  const loom_trace_event *ev = loom_session_last_trace(s, &n);
  loom_session_set_tracing(s, 0);
  h->traced = NULL;
  size_t cap = strlen(h->dir) + 48;
  char *path = loom__malloc(cap);
  if (!path) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ProfilerHook: out of memory");
  snprintf(path, cap, "%s/timeline-%lld.json", h->dir, (long long)step);
  loom_code rc = loom_trace_write_chrome(path, ev, n, st);
  if (!rc) loom__log(LOOM_LOG_INFO, "Saved profile of step %lld to %s (%d nodes)", (long long)step, path, n);
  loom__free(path);
  return rc;
}
static loom_code prof_end(void *self, loom_session *s, loom_status *st) {
  profiler_hook *h = self;
  if (h->traced) loom_session_set_tracing(h->traced, 0);
  h->traced = NULL;
  return LOOM_OK;
}
static void prof_destroy(void *self) {
  profiler_hook *h = self;
  loom__free(h->dir);
  gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_profiler_hook(int64_t save_steps, double save_secs, const char *output_dir, loom_status *st) {
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "ProfilerHook: exactly one of save_steps (%lld) and save_secs (%g) must be > 0",
                    (long long)save_steps, save_secs);
    return NULL;
  }
  if (!output_dir || !*output_dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ProfilerHook: output_dir is empty");
    return NULL;
  }
  static const loom_hook_ops ops = {prof_begin, prof_acs, prof_before, prof_after, prof_end, prof_destroy};
  profiler_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = MAGIC_PROFILER;
    h->steps = save_steps;
    h->secs = save_secs;
    h->timer.last_step = -1;
    if (!(h->dir = loom__strdup(output_dir))) {
      loom__free(h);
      h = NULL;
    }
  }
  return wrap(&ops, h, "ProfilerHook", st);
}
