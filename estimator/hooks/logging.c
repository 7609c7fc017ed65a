/* estimator/hooks/logging.c - the hooks that report progress:
 * LoggingTensorHook (tensor values every N steps or seconds and/or at the
 * end, with a terminal progress bar when the total is known) and
 * StepCounterHook (global steps per second, logged and written as a
 * summary). Helpers in common.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "estimator/hooks/hooks_impl.h"

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
    h->magic = LOOM__HOOK_MAGIC_LOG;
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
  return loom__hook_wrap(&ops, h, "LoggingTensorHook", st);
}

void loom_logging_tensor_hook_set_total_steps(loom_hook *hk, int64_t total_steps) {
  log_hook *h = loom__hook_self_of(hk, log_destroy, LOOM__HOOK_MAGIC_LOG);
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
  loom__gstep gs;
  char tag[300];
  loom_step_timer timer;
  int have_last;
  int64_t last_gs;
  int check_count;
} counter_hook;

static loom_code counter_begin(void *self, loom_graph *g, loom_status *st) {
  counter_hook *h = self;
  loom_code rc = loom__gstep_find(&h->gs, g, "StepCounterHook", st);
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
  int64_t step = loom__hook_tensor_step(res[0]);
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
  loom__gstep_free(&h->gs);
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
    h->magic = LOOM__HOOK_MAGIC_COUNTER;
    h->every_secs = every_n_secs;
    h->every_steps = every_n_steps;
    h->w = writer;
    h->timer.last_step = -1;
  }
  return loom__hook_wrap(&ops, h, "StepCounterHook", st);
}
