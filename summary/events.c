/* summary/events.c - TensorBoard event files (loom_summary.h): the event
 * writer, TF's default histogram, graph-summary events and the reader.
 *
 * File: "<logdir>/events.out.tfevents.<%010lld secs>.<hostname><suffix>",
 * TFRecord-framed (base/record_io.h) tensorflow.Event protobufs
 * (proto/event.proto); the first record carries file_version
 * "brain.Event:2".
 *
 * Flushing: the FILE is buffered. An add_* flushes when at least
 * FLUSH_SECS passed since the last flush or FLUSH_EVENTS events are
 * pending, so a first event after a quiet spell reaches the file at once
 * and a stream of events at least every FLUSH_SECS (TensorBoard tails the
 * file); loom_event_writer_flush and _free always flush. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "base/base.h"
#include "base/fsutil.h"
#include "base/record_io.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"
#include "proto/event.pb-c.h"
#include "engine/engine_api.h" /* control inputs of a node (graph_def) */
#include <zlib.h>                /* PNG: deflate and the chunk CRC */
#include "summary/summary_internal.h"

#define FLUSH_SECS 2.0
#define FLUSH_EVENTS 32

/* ---- protobuf-c allocations go through loom's allocator hook ---- */
static void *pb_alloc(void *ud, size_t n) {
  (void)ud;
  return loom__malloc(n ? n : 1);
}
static void pb_free(void *ud, void *p) {
  (void)ud;
  loom__free(p);
}
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ================================================================ writer */
struct loom_event_writer {
  pthread_mutex_t mu;
  FILE *f;
  char *path;
  int pending;       /* events written since the last flush */
  double last_flush; /* CLOCK_MONOTONIC seconds */
};

/* mkdir -p */

static loom_code do_flush(loom_event_writer *w, loom_status *st) {
  w->pending = 0;
  w->last_flush = loom__mono_secs();
  if (fflush(w->f) != 0)
    return loom_status_set(st, loom__errno_code(errno), "flushing event file %s: %s", w->path, strerror(errno));
  return LOOM_OK;
}

/* Serializes ev (wall_time set here) and appends it as one record. */
static loom_code write_event(loom_event_writer *w, Tensorflow__Event *ev, loom_status *st) {
  ev->wall_time = wall_now();
  size_t n = tensorflow__event__get_packed_size(ev);
  uint8_t *buf = loom__malloc(n ? n : 1);
  if (!buf) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory serializing an event");
  size_t got = tensorflow__event__pack(ev, buf);
  loom_code rc = LOOM_OK;
  pthread_mutex_lock(&w->mu);
  if (got != n) {
    rc = loom_status_set(st, LOOM_INTERNAL, "serializing an event for %s: %zu bytes, expected %zu", w->path, got, n);
  } else {
    rc = loom__tfrecord_write(w->f, buf, n, w->path, st);
    if (!rc && (++w->pending >= FLUSH_EVENTS || loom__mono_secs() - w->last_flush >= FLUSH_SECS)) rc = do_flush(w, st);
  }
  pthread_mutex_unlock(&w->mu);
  loom__free(buf);
  return rc;
}

static long long ev_last_secs; /* the newest second this process named an event file with (atomic access) */

loom_event_writer *loom_event_writer_new(const char *logdir, const char *filename_suffix, loom_status *st) {
  if (!logdir || !*logdir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer: logdir is empty");
    return NULL;
  }
  if (loom__mkdir_p(logdir, st)) return NULL;
  char host[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = 0;
  const char *suffix = filename_suffix ? filename_suffix : "";
  size_t cap = strlen(logdir) + strlen(host) + strlen(suffix) + 64;
  loom_event_writer *w = loom__calloc(1, sizeof *w);
  char *path = loom__malloc(cap);
  if (!w || !path) {
    loom__free(w);
    loom__free(path);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "event writer: out of memory");
    return NULL;
  }
  /* Never clobber another writer's file: a name taken (a writer created in
   * the same second) moves on to the next second, so names sort in creation
   * order (TensorBoard reads a run's files in name order). This process
   * starts after the newest second it has used: writers made faster than
   * one a second (a loop of short train/evaluate calls) used to probe every
   * name they had taken and, 1000 names ahead, failed with EEXIST; now only
   * other processes' files are probed. */
  long long secs = (long long)time(NULL), last = __atomic_load_n(&ev_last_secs, __ATOMIC_RELAXED);
  if (secs <= last) secs = last + 1;
  FILE *f = NULL;
  int tries = 0;
  for (; tries < 1000 && !f; tries++, secs++) {
    snprintf(path, cap, "%s%sevents.out.tfevents.%010lld.%s%s", logdir,
             logdir[strlen(logdir) - 1] == '/' ? "" : "/", secs, host, suffix);
    f = fopen(path, "wbx");
    if (!f && errno != EEXIST) break;
  }
  if (f) {
    long long used = secs - 1; /* the loop stepped past the name taken */
    while (last < used &&
           !__atomic_compare_exchange_n(&ev_last_secs, &last, used, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  }
  if (!f && tries == 1000) {
    loom_status_set(st, LOOM_ALREADY_EXISTS,
                    "event writer: no free file name in %s (the next 1000 seconds' names are taken, up to %s)", logdir,
                    path);
    loom__free(path);
    loom__free(w);
    return NULL;
  }
  if (!f) {
    loom_status_set(st, loom__errno_code(errno), "event writer: cannot create %s: %s", path, strerror(errno));
    loom__free(path);
    loom__free(w);
    return NULL;
  }
  pthread_mutex_init(&w->mu, NULL);
  w->f = f;
  w->path = path;
  w->last_flush = loom__mono_secs();
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
  ev.file_version = (char *)"brain.Event:2";
  if (write_event(w, &ev, st) || do_flush(w, st)) {
    fclose(w->f);
    unlink(w->path);
    pthread_mutex_destroy(&w->mu);
    loom__free(w->path);
    loom__free(w);
    return NULL;
  }
  return w;
}

void loom_event_writer_free(loom_event_writer *w) {
  if (!w) return;
  if (fflush(w->f) != 0 || fclose(w->f) != 0)
    loom__log(LOOM_LOG_ERROR, "closing event file %s: %s", w->path, strerror(errno));
  pthread_mutex_destroy(&w->mu);
  loom__free(w->path);
  loom__free(w);
}

const char *loom_event_writer_path(const loom_event_writer *w) { return w ? w->path : NULL; }

loom_code loom_event_writer_flush(loom_event_writer *w, loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer is NULL");
  pthread_mutex_lock(&w->mu);
  loom_code rc = do_flush(w, st);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

/* ---- summary values ---- */
static loom_code write_summary(loom_event_writer *w, int n, Tensorflow__Summary__Value **vals, int64_t step,
                               loom_status *st) {
  Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
  sum.n_value = (size_t)n;
  sum.value = vals;
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.step = step;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  return write_event(w, &ev, st);
}

loom_code loom_event_writer_add_scalars(loom_event_writer *w, int n, const char *const *tags, const double *values,
                                        int64_t step, loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer is NULL");
  if (n < 0 || (n && (!tags || !values)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_scalars: invalid argument lists");
  for (int i = 0; i < n; i++)
    if (!tags[i] || !*tags[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_scalars: tag %d is empty", i);
  Tensorflow__Summary__Value *v = loom__calloc((size_t)(n ? n : 1), sizeof *v);
  Tensorflow__Summary__Value **pv = loom__calloc((size_t)(n ? n : 1), sizeof *pv);
  loom_code rc;
  if (!v || !pv) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (int i = 0; i < n; i++) {
      tensorflow__summary__value__init(&v[i]);
      v[i].tag = (char *)tags[i];
      v[i].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
      v[i].simple_value = (float)values[i];
      pv[i] = &v[i];
    }
    rc = write_summary(w, n, pv, step, st);
  }
  loom__free(v);
  loom__free(pv);
  return rc;
}

loom_code loom_event_writer_add_scalar(loom_event_writer *w, const char *tag, double value, int64_t step,
                                       loom_status *st) {
  return loom_event_writer_add_scalars(w, 1, &tag, &value, step, st);
}

/* ---- TF's default histogram (tensorflow/core/lib/histogram) ----
 * Limits: -DBL_MAX, -1e20.., ..., -1e-12, 0, 1e-12, ..., ~1e20, DBL_MAX
 * with |limits| growing by x1.1 from 1e-12 while below 1e20. A value v
 * counts in the first bucket whose limit is > v. Encoding (EncodeToProto
 * with preserve_zero_buckets = false) collapses each run of empty buckets
 * into one zero bucket carrying the run's last limit. */
static double *g_limits;
static int g_nlimits;
static pthread_once_t g_limits_once = PTHREAD_ONCE_INIT;
static void init_limits(void) {
  int npos = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) npos++;
  int n = 2 * (npos + 1) + 1;
  double *l = malloc((size_t)n * sizeof *l); /* process lifetime: libc, not the hook */
  if (!l) return;
  /* l[npos + 1] = 0; positives above it, their negatives mirrored below */
  int i = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1, i++) {
    l[npos + 2 + i] = v;
    l[npos - i] = -v;
  }
  l[npos + 1] = 0.0;
  l[0] = -DBL_MAX;
  l[n - 1] = DBL_MAX;
  g_limits = l;
  g_nlimits = n;
}

/* Fills h (min, max, num, sum, sum_squares, encoded buckets); the bucket
 * arrays are allocated with loom__malloc (free with histo_release).
 * INVALID_ARGUMENT for a NaN or infinity (as TF's HistogramSummary). */
static loom_code histo_build(Tensorflow__HistogramProto *h, const char *tag, const double *x, int64_t n,
                             loom_status *st) {
  pthread_once(&g_limits_once, init_limits);
  if (!g_limits) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory (histogram limits)");
  const int nl = g_nlimits;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "Nan in summary histogram for: %s", tag);
    if (isinf(x[i])) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "Infinity in summary histogram for: %s", tag);
  }
  double *counts = loom__calloc((size_t)nl, sizeof *counts);
  double *ol = loom__malloc((size_t)nl * sizeof *ol), *oc = loom__malloc((size_t)nl * sizeof *oc);
  if (!counts || !ol || !oc) {
    loom__free(counts);
    loom__free(ol);
    loom__free(oc);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory (histogram %s)", tag);
  }
  double mn = DBL_MAX, mx = -DBL_MAX, sum = 0, sq = 0;
  const int zero_bucket = (nl - 3) / 2 + 2; /* the first limit > 0 (1e-12) */
  const double inv_log11 = 1.0 / log(1.1);
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    /* upper_bound (first limit > v), from a guess by the logarithm (the
     * limits grow by 1.1 from 1e-12) moved to the exact place by the same
     * comparisons a binary search makes: the result is the search's; a
     * histogram of ReLU activations (half zeros) no longer pays ~11
     * unpredictable branches a value */
    int lo;
    if (v == 0.0) {
      lo = zero_bucket;
    } else {
      double a = fabs(v);
      double e = a < 1e-12 ? -1.0 : floor(log(a * 1e12) * inv_log11);
      int step = e > (double)nl ? nl : (int)e;
      lo = v > 0 ? zero_bucket + 1 + step : zero_bucket - 2 - step;
      if (lo < 0) lo = 0;
      if (lo > nl) lo = nl;
    }
    while (lo > 0 && g_limits[lo - 1] > v) lo--;
    while (lo < nl && g_limits[lo] <= v) lo++;
    if (lo >= nl) lo = nl - 1; /* v == DBL_MAX */
    counts[lo] += 1.0;
    if (mn > v) mn = v;
    if (mx < v) mx = v;
    sum += v;
    sq += v * v;
  }
  int k = 0;
  for (int i = 0; i < nl;) {
    double end = g_limits[i], c = counts[i];
    i++;
    if (c <= 0.0)
      while (i < nl && counts[i] <= 0.0) {
        end = g_limits[i];
        c = counts[i];
        i++;
      }
    ol[k] = end;
    oc[k] = c;
    k++;
  }
  loom__free(counts);
  h->min = mn;
  h->max = mx;
  h->num = (double)n;
  h->sum = sum;
  h->sum_squares = sq;
  h->n_bucket_limit = h->n_bucket = (size_t)k;
  h->bucket_limit = ol;
  h->bucket = oc;
  return LOOM_OK;
}
static void histo_release(Tensorflow__HistogramProto *h) {
  loom__free(h->bucket_limit);
  loom__free(h->bucket);
  h->bucket_limit = h->bucket = NULL;
  h->n_bucket_limit = h->n_bucket = 0;
}

loom_code loom_event_writer_add_histogram(loom_event_writer *w, const char *tag, const double *values, int64_t n,
                                          int64_t step, loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer is NULL");
  if (!tag || !*tag) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_histogram: tag is empty");
  if (n < 0 || (n && !values)) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_histogram %s: no values", tag);
  Tensorflow__HistogramProto h = TENSORFLOW__HISTOGRAM_PROTO__INIT;
  loom_code rc = histo_build(&h, tag, values, n, st);
  if (rc) return rc;
  Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT, *pv = &v;
  v.tag = (char *)tag;
  v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
  v.histo = &h;
  rc = write_summary(w, 1, &pv, step, st);
  histo_release(&h);
  return rc;
}

loom_code loom_event_writer_add_text(loom_event_writer *w, const char *tag, const char *text, int64_t step,
                                     loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer is NULL");
  if (!tag || !*tag) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_text: tag is empty");
  if (!text) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_text %s: text is NULL", tag);
  /* As tf.summary.text: a scalar DT_STRING tensor, plugin "text". */
  Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  ProtobufCBinaryData sv = {strlen(text), (uint8_t *)text};
  Tensorflow__TensorProto t = TENSORFLOW__TENSOR_PROTO__INIT;
  t.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
  t.tensor_shape = &shape;
  t.n_string_val = 1;
  t.string_val = &sv;
  Tensorflow__SummaryMetadata__PluginData pd = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  pd.plugin_name = (char *)"text";
  Tensorflow__SummaryMetadata md = TENSORFLOW__SUMMARY_METADATA__INIT;
  md.plugin_data = &pd;
  Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT, *pv = &v;
  v.tag = (char *)tag;
  v.metadata = &md;
  v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
  v.tensor = &t;
  return write_summary(w, 1, &pv, step, st);
}

loom_code loom_event_writer_add_session_log(loom_event_writer *w, loom_session_log_status status,
                                            const char *checkpoint_path, int64_t step, loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event writer is NULL");
  if (status < LOOM_SESSION_LOG_START || status > LOOM_SESSION_LOG_CHECKPOINT)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_session_log: unknown status %d", (int)status);
  Tensorflow__SessionLog sl = TENSORFLOW__SESSION_LOG__INIT;
  sl.status = (Tensorflow__SessionLog__SessionStatus)status;
  if (checkpoint_path) sl.checkpoint_path = (char *)checkpoint_path;
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.step = step;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SESSION_LOG;
  ev.session_log = &sl;
  return write_event(w, &ev, st);
}

/* ---- graph summaries: one Event holding every summary of g ---- */
static loom_code tensor_doubles(const loom_tensor *t, const char *tag, double **out, int64_t *n, loom_status *st) {
  int64_t m = loom_tensor_numel(t);
  loom_dtype dt = loom_tensor_dtype(t);
  const void *p = loom_tensor_data_const(t);
  double *d = loom__malloc((size_t)(m ? m : 1) * sizeof *d);
  if (!d) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory (summary %s)", tag);
  for (int64_t i = 0; i < m; i++) {
    switch (dt) {
      case LOOM_F32: d[i] = ((const float *)p)[i]; break;
      case LOOM_F64: d[i] = ((const double *)p)[i]; break;
      case LOOM_I32: d[i] = ((const int32_t *)p)[i]; break;
      case LOOM_I64: d[i] = (double)((const int64_t *)p)[i]; break;
      case LOOM_U8: d[i] = ((const uint8_t *)p)[i]; break;
      case LOOM_BOOL: d[i] = ((const uint8_t *)p)[i] != 0; break;
      default:
        loom__free(d);
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "summary %s: value of dtype %s is not numeric", tag,
                               loom_dtype_name(dt));
    }
  }
  *out = d;
  *n = m;
  return LOOM_OK;
}

/* ---- image summaries: TF's ImageSummary mapping to uint8 and a PNG ---- */
static void be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static uint8_t *png_chunk(uint8_t *p, const char *type, const uint8_t *data, uint32_t len) {
  be32(p, len);
  memcpy(p + 4, type, 4);
  if (len) memcpy(p + 8, data, len);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, p + 4, (uInt)len + 4);
  be32(p + 8 + len, (uint32_t)crc);
  return p + 12 + len;
}

/* An 8-bit PNG of h rows of w pixels of ch (1, 3, 4) channels, each row
 * filter 0, deflated by zlib; *out owned by the caller. */
static int png_encode(const uint8_t *pix, int64_t h, int64_t w, int ch, uint8_t **out, size_t *len) {
  size_t row = (size_t)w * (size_t)ch, raw_n = (size_t)h * (row + 1);
  uint8_t *raw = loom__malloc(raw_n ? raw_n : 1);
  if (!raw) return 0;
  for (int64_t y = 0; y < h; y++) {
    raw[(size_t)y * (row + 1)] = 0;
    memcpy(raw + (size_t)y * (row + 1) + 1, pix + (size_t)y * row, row);
  }
  uLongf zn = compressBound((uLong)raw_n);
  uint8_t *z = loom__malloc(zn);
  if (!z || compress2(z, &zn, raw, (uLong)raw_n, Z_DEFAULT_COMPRESSION) != Z_OK) {
    loom__free(raw);
    loom__free(z);
    return 0;
  }
  loom__free(raw);
  size_t n = 8 + (12 + 13) + (12 + zn) + 12;
  uint8_t *o = loom__malloc(n), *p = o;
  if (!o) {
    loom__free(z);
    return 0;
  }
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  memcpy(p, sig, 8);
  p += 8;
  uint8_t ihdr[13];
  be32(ihdr, (uint32_t)w);
  be32(ihdr + 4, (uint32_t)h);
  ihdr[8] = 8;                                       /* bit depth */
  ihdr[9] = ch == 1 ? 0 : ch == 3 ? 2 : 6;           /* gray, RGB, RGBA */
  ihdr[10] = ihdr[11] = ihdr[12] = 0;                /* deflate, filter method 0, no interlace */
  p = png_chunk(p, "IHDR", ihdr, 13);
  p = png_chunk(p, "IDAT", z, (uint32_t)zn);
  p = png_chunk(p, "IEND", NULL, 0);
  loom__free(z);
  *out = o;
  *len = (size_t)(p - o);
  return 1;
}

/* Image b of t [batch, h, w, ch] as uint8 pixels (TF's ImageSummary mapping for floats). */
static void image_pixels(const loom_tensor *t, int64_t b, uint8_t *px) {
  const int64_t *d = loom_tensor_dims(t);
  int64_t hw = d[1] * d[2], ch = d[3], n = hw * ch;
  loom_dtype dt = loom_tensor_dtype(t);
  const void *p = loom_tensor_data_const(t);
  if (dt == LOOM_U8) {
    memcpy(px, (const uint8_t *)p + b * n, (size_t)n);
    return;
  }
#define V(i) (dt == LOOM_F32 ? (double)((const float *)p)[b * n + (i)] : ((const double *)p)[b * n + (i)])
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < hw; i++) {
    int finite = 1;
    for (int64_t c = 0; c < ch; c++) finite &= isfinite(V(i * ch + c)) != 0;
    if (!finite) continue;
    for (int64_t c = 0; c < ch; c++) {
      double v = (float)V(i * ch + c); /* TF takes the bounds in float */
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  float scale, offset;
  if (lo < 0) {
    float m = (float)fmax(fabs(lo), fabs(hi));
    scale = m < 1e-6f ? 0.0f : 127.0f / m;
    offset = 128.0f;
  } else {
    scale = hi < 1e-6 ? 0.0f : 255.0f / (float)hi;
    offset = 0.0f;
  }
  static const uint8_t bad[4] = {255, 0, 0, 255};
  for (int64_t i = 0; i < hw; i++) {
    int finite = 1;
    for (int64_t c = 0; c < ch; c++) finite &= isfinite(V(i * ch + c)) != 0;
    for (int64_t c = 0; c < ch; c++) {
      if (!finite) {
        px[i * ch + c] = bad[c];
      } else if (dt == LOOM_F32) {
        px[i * ch + c] = (uint8_t)(int)((float)V(i * ch + c) * scale + offset);
      } else {
        px[i * ch + c] = (uint8_t)(int)(V(i * ch + c) * (double)scale + (double)offset);
      }
    }
  }
#undef V
}

/* The Summary.Values of image summary tag (value t): the first
 * min(max_outputs, batch) images, into v/img (room for max_outputs). */
static loom_code image_values(const loom_tensor *t, const char *tag, int max_outputs, Tensorflow__Summary__Value *v,
                              Tensorflow__Summary__Image *img, char **tags, int *count, loom_status *st) {
  *count = 0;
  loom_dtype dt = loom_tensor_dtype(t);
  const int64_t *d = loom_tensor_dims(t);
  if (loom_tensor_ndim(t) != 4 || (d[3] != 1 && d[3] != 3 && d[3] != 4) ||
      (dt != LOOM_U8 && dt != LOOM_F32 && dt != LOOM_F64)) {
    char dims[128];
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "summary image %s: needs a [batch, height, width, 1, 3 or 4] "
                           "uint8 or float tensor, got %s %s", tag, loom_dtype_name(dt),
                           loom__dims_str(dims, sizeof dims, loom_tensor_ndim(t), d));
  }
  int64_t k = d[0] < max_outputs ? d[0] : max_outputs;
  uint8_t *px = loom__malloc((size_t)(d[1] * d[2] * d[3]) + 1);
  if (!px) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory (summary image %s)", tag);
  for (int64_t b = 0; b < k; b++) {
    image_pixels(t, b, px);
    uint8_t *png = NULL;
    size_t len = 0;
    size_t tl = strlen(tag) + 32;
    tags[b] = loom__malloc(tl);
    if (!tags[b] || !png_encode(px, d[1], d[2], (int)d[3], &png, &len)) {
      loom__free(px);
      *count = (int)b + (tags[b] != NULL);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory (summary image %s)", tag);
    }
    if (max_outputs == 1) snprintf(tags[b], tl, "%s/image", tag);
    else snprintf(tags[b], tl, "%s/image/%lld", tag, (long long)b);
    tensorflow__summary__image__init(&img[b]);
    img[b].height = (int32_t)d[1];
    img[b].width = (int32_t)d[2];
    img[b].colorspace = (int32_t)d[3];
    img[b].encoded_image_string.data = png;
    img[b].encoded_image_string.len = len;
    tensorflow__summary__value__init(&v[b]);
    v[b].tag = tags[b];
    v[b].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE;
    v[b].image = &img[b];
    *count = (int)b + 1;
  }
  loom__free(px);
  return LOOM_OK;
}

loom_code loom_event_writer_add_graph_summaries(loom_event_writer *w, loom_graph *g, loom_tensor *const *values,
                                                int64_t step, loom_status *st) {
  if (!w || !g) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_graph_summaries: writer or graph is NULL");
  const char *const *tags;
  const loom_summary_kind *kinds;
  const loom_output *outs;
  int n = loom_graph_summaries(g, &tags, &kinds, &outs);
  if (n && !values) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_graph_summaries: values is NULL");
  if (n && (!tags || !kinds)) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory listing summaries");
  /* room: one value per summary, max_outputs per image summary */
  int total = 0, *imax = loom__calloc((size_t)(n ? n : 1), sizeof *imax);
  if (!imax) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) {
    imax[i] = kinds[i] == LOOM_SUMMARY_IMAGE ? loom__summary_image_max(g, outs[i].node) : 1;
    total += imax[i];
  }
  Tensorflow__Summary__Value *v = loom__calloc((size_t)(total ? total : 1), sizeof *v);
  Tensorflow__Summary__Value **pv = loom__calloc((size_t)(total ? total : 1), sizeof *pv);
  Tensorflow__HistogramProto *h = loom__calloc((size_t)(n ? n : 1), sizeof *h);
  Tensorflow__Summary__Image *img = loom__calloc((size_t)(total ? total : 1), sizeof *img);
  char **itags = loom__calloc((size_t)(total ? total : 1), sizeof *itags);
  loom_code rc = LOOM_OK;
  int nv = 0;
  if (!v || !pv || !h || !img || !itags) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n && !rc; i++) {
    const loom_tensor *t = values[i];
    tensorflow__histogram_proto__init(&h[i]);
    if (!t) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "summary %s: value %d is NULL", tags[i], i);
      break;
    }
    if (kinds[i] == LOOM_SUMMARY_IMAGE) {
      int k = 0;
      rc = image_values(t, tags[i], imax[i], v + nv, img + nv, itags + nv, &k, st);
      for (int j = 0; j < k; j++, nv++) pv[nv] = &v[nv];
      continue;
    }
    tensorflow__summary__value__init(&v[nv]);
    pv[nv] = &v[nv];
    v[nv].tag = (char *)tags[i];
    double *d = NULL;
    int64_t m = 0;
    if ((rc = tensor_doubles(t, tags[i], &d, &m, st))) break;
    if (kinds[i] == LOOM_SUMMARY_HISTOGRAM) {
      rc = histo_build(&h[i], tags[i], d, m, st);
      v[nv].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
      v[nv].histo = &h[i];
    } else if (m != 1) {
      char dims[128];
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "summary %s: a scalar summary needs one value, got shape %s",
                           tags[i], loom__dims_str(dims, sizeof dims, loom_tensor_ndim(t), loom_tensor_dims(t)));
    } else {
      v[nv].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
      v[nv].simple_value = (float)d[0];
    }
    nv++;
    loom__free(d);
  }
  if (!rc) rc = write_summary(w, nv, pv, step, st);
  for (int i = 0; h && i < n; i++) histo_release(&h[i]);
  for (int i = 0; img && itags && i < total; i++) {
    loom__free(img[i].encoded_image_string.data);
    loom__free(itags[i]);
  }
  loom__free(imax);
  loom__free(v);
  loom__free(pv);
  loom__free(h);
  loom__free(img);
  loom__free(itags);
  return rc;
}

/* ================================================================ graph */
static Tensorflow__DataType tf_dtype(loom_dtype d) {
  switch (d) {
    case LOOM_F32: return TENSORFLOW__DATA_TYPE__DT_FLOAT;
    case LOOM_F64: return TENSORFLOW__DATA_TYPE__DT_DOUBLE;
    case LOOM_I32: return TENSORFLOW__DATA_TYPE__DT_INT32;
    case LOOM_I64: return TENSORFLOW__DATA_TYPE__DT_INT64;
    case LOOM_U8: return TENSORFLOW__DATA_TYPE__DT_UINT8;
    case LOOM_BOOL: return TENSORFLOW__DATA_TYPE__DT_BOOL;
    case LOOM_STRING: return TENSORFLOW__DATA_TYPE__DT_STRING;
    default: return TENSORFLOW__DATA_TYPE__DT_INVALID;
  }
}

/* Everything one node's NodeDef points to, freed together. */
typedef struct gnode {
  Tensorflow__NodeDef nd;
  char **inputs;
  Tensorflow__NodeDef__AttrEntry ent[2], *pent[2];
  Tensorflow__AttrValue av[2];
  Tensorflow__AttrValue__ListValue lv;
  Tensorflow__TensorShapeProto *shp, **pshp;
  Tensorflow__TensorShapeProto__Dim *dims, **pdims;
  Tensorflow__DataType *types;
} gnode;

static void gnode_free(gnode *x) {
  if (x->inputs)
    for (size_t i = 0; i < x->nd.n_input; i++) loom__free(x->inputs[i]);
  loom__free(x->inputs);
  loom__free(x->shp);
  loom__free(x->pshp);
  loom__free(x->dims);
  loom__free(x->pdims);
  loom__free(x->types);
}

static int gnode_fill(gnode *x, const loom_node *n) {
  tensorflow__node_def__init(&x->nd);
  x->nd.name = (char *)loom_node_name(n);
  x->nd.op = (char *)loom_node_op_name(n);
  int nin = loom_node_num_inputs(n), nctrl = loom__node_num_control_inputs(n), nout = loom_node_num_outputs(n);
  x->inputs = loom__calloc((size_t)(nin + nctrl) + 1, sizeof *x->inputs);
  if (!x->inputs) return 0;
  for (int i = 0; i < nin; i++) {
    loom_output o = loom_node_input(n, i);
    const char *pn = loom_node_name(o.node);
    size_t cap = strlen(pn) + 16;
    char *s = loom__malloc(cap);
    if (!s) return 0;
    if (o.index == 0)
      snprintf(s, cap, "%s", pn);
    else
      snprintf(s, cap, "%s:%d", pn, o.index);
    x->inputs[x->nd.n_input++] = s;
  }
  for (int i = 0; i < nctrl; i++) {
    const char *pn = loom_node_name(loom__node_control_input(n, i));
    size_t cap = strlen(pn) + 2;
    char *s = loom__malloc(cap);
    if (!s) return 0;
    snprintf(s, cap, "^%s", pn);
    x->inputs[x->nd.n_input++] = s;
  }
  x->nd.input = x->inputs;
  if (nout <= 0) return 1;
  /* attrs: "_output_shapes" (TensorBoard shows them on edges) and, from
   * output 0, "T" (the element type) */
  size_t nd_total = 0;
  for (int i = 0; i < nout; i++) {
    int r = loom_output_ndim(loom_node_output((loom_node *)n, i));
    nd_total += r > 0 ? (size_t)r : 0;
  }
  x->shp = loom__calloc((size_t)nout, sizeof *x->shp);
  x->pshp = loom__calloc((size_t)nout, sizeof *x->pshp);
  x->dims = loom__calloc(nd_total + 1, sizeof *x->dims);
  x->pdims = loom__calloc(nd_total + 1, sizeof *x->pdims);
  x->types = loom__calloc((size_t)nout, sizeof *x->types);
  if (!x->shp || !x->pshp || !x->dims || !x->pdims || !x->types) return 0;
  size_t k = 0;
  for (int i = 0; i < nout; i++) {
    loom_output o = loom_node_output((loom_node *)n, i);
    int64_t d[LOOM_MAX_DIMS];
    int r = loom_output_dims(o, d);
    tensorflow__tensor_shape_proto__init(&x->shp[i]);
    x->pshp[i] = &x->shp[i];
    if (r < 0) x->shp[i].unknown_rank = 1;
    x->shp[i].dim = x->pdims + k;
    for (int j = 0; j < r; j++, k++) {
      tensorflow__tensor_shape_proto__dim__init(&x->dims[k]);
      x->dims[k].size = d[j];
      x->pdims[k] = &x->dims[k];
    }
    x->shp[i].n_dim = r > 0 ? (size_t)r : 0;
    x->types[i] = tf_dtype(loom_output_dtype(o));
  }
  tensorflow__attr_value__list_value__init(&x->lv);
  x->lv.n_shape = (size_t)nout;
  x->lv.shape = x->pshp;
  for (int a = 0; a < 2; a++) {
    tensorflow__node_def__attr_entry__init(&x->ent[a]);
    tensorflow__attr_value__init(&x->av[a]);
    x->ent[a].value = &x->av[a];
    x->pent[a] = &x->ent[a];
  }
  x->ent[0].key = "_output_shapes";
  x->av[0].value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
  x->av[0].list = &x->lv;
  x->ent[1].key = "T";
  x->av[1].value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
  x->av[1].type = x->types[0];
  x->nd.n_attr = 2;
  x->nd.attr = x->pent;
  return 1;
}

loom_code loom_event_writer_add_graph(loom_event_writer *w, loom_graph *g, loom_status *st) {
  if (!w || !g) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "add_graph: writer or graph is NULL");
  int nn = loom_graph_num_nodes(g);
  gnode *x = loom__calloc(nn > 0 ? (size_t)nn : 1, sizeof *x);
  Tensorflow__NodeDef **pn = loom__calloc(nn > 0 ? (size_t)nn : 1, sizeof *pn);
  loom_code rc = LOOM_OK;
  if (!x || !pn) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "add_graph: out of memory");
  for (int i = 0; !rc && i < nn; i++) {
    if (!gnode_fill(&x[i], loom_graph_node_at(g, i)))
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "add_graph: out of memory");
    pn[i] = &x[i].nd;
  }
  if (!rc) {
    Tensorflow__VersionDef ver;
    tensorflow__version_def__init(&ver);
    ver.producer = 1645; /* TF 2.15's GraphDef version */
    Tensorflow__GraphDef gd;
    tensorflow__graph_def__init(&gd);
    gd.n_node = (size_t)nn;
    gd.node = pn;
    gd.versions = &ver;
    size_t len = tensorflow__graph_def__get_packed_size(&gd);
    uint8_t *buf = loom__malloc(len ? len : 1);
    if (!buf) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "add_graph: out of memory");
    } else {
      tensorflow__graph_def__pack(&gd, buf);
      Tensorflow__Event ev;
      tensorflow__event__init(&ev);
      ev.step = 0;
      ev.what_case = TENSORFLOW__EVENT__WHAT_GRAPH_DEF;
      ev.graph_def.data = buf;
      ev.graph_def.len = len;
      rc = write_event(w, &ev, st);
      loom__free(buf);
    }
  }
  for (int i = 0; x && i < nn; i++) gnode_free(&x[i]);
  loom__free(x);
  loom__free(pn);
  return rc;
}

/* ================================================================ reader */
struct loom_event_reader {
  loom_tfrecord_reader tf;
  Tensorflow__Event *msg;
  loom_event ev;
  loom_event_value *vals;
  char **texts; /* NUL-terminated copies of string values */
  int capvals;
};

loom_event_reader *loom_event_reader_open(const char *path, loom_status *st) {
  if (!path) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "event reader: path is NULL");
    return NULL;
  }
  loom_event_reader *r = loom__calloc(1, sizeof *r);
  if (!r) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "event reader: out of memory");
    return NULL;
  }
  if (loom__tfrecord_open(&r->tf, path, st)) {
    loom__free(r);
    return NULL;
  }
  return r;
}

static void reader_reset(loom_event_reader *r) {
  if (r->msg) tensorflow__event__free_unpacked(r->msg, &pb_allocator);
  r->msg = NULL;
  for (int i = 0; i < r->capvals; i++) {
    loom__free(r->texts[i]);
    r->texts[i] = NULL;
  }
  memset(&r->ev, 0, sizeof r->ev);
}

static loom_code bad_record(loom_event_reader *r, loom_status *st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static loom_code bad_record(loom_event_reader *r, loom_status *st, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return loom_status_set(st, LOOM_DATA_LOSS, "%s: record %lld: %s", r->tf.path, (long long)r->tf.index - 1, why);
}

static char *dup_bytes(const uint8_t *p, size_t n) {
  char *s = loom__malloc(n + 1);
  if (s) {
    if (n) memcpy(s, p, n);
    s[n] = 0;
  }
  return s;
}

/* A scalar float/double tensor (TF2's scalar summaries) -> *out. */
static int tensor_scalar(const Tensorflow__TensorProto *t, double *out) {
  if (!t) return 0;
  if (t->dtype == TENSORFLOW__DATA_TYPE__DT_FLOAT) {
    if (t->n_float_val >= 1) return *out = t->float_val[0], 1;
    if (t->tensor_content.len == 4) {
      float f;
      memcpy(&f, t->tensor_content.data, 4);
      return *out = f, 1;
    }
  } else if (t->dtype == TENSORFLOW__DATA_TYPE__DT_DOUBLE) {
    if (t->n_double_val >= 1) return *out = t->double_val[0], 1;
    if (t->tensor_content.len == 8) {
      memcpy(out, t->tensor_content.data, 8);
      return 1;
    }
  }
  return 0;
}

loom_code loom_event_reader_next(loom_event_reader *r, const loom_event **ev, loom_status *st) {
  if (!r || !ev) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "event reader: NULL argument");
  *ev = NULL;
  reader_reset(r);
  const uint8_t *data;
  size_t n;
  loom_code rc = loom__tfrecord_next(&r->tf, &data, &n, st);
  if (rc) return rc;
  r->msg = tensorflow__event__unpack(&pb_allocator, n, data);
  if (!r->msg) return bad_record(r, st, "cannot decode an Event protobuf (%zu bytes)", n);
  Tensorflow__Event *m = r->msg;
  loom_event *e = &r->ev;
  e->wall_time = m->wall_time;
  e->step = m->step;
  if (m->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION) e->file_version = m->file_version;
  if (m->what_case == TENSORFLOW__EVENT__WHAT_GRAPH_DEF) {
    e->graph_def = m->graph_def.data ? m->graph_def.data : (const uint8_t *)"";
    e->graph_def_size = m->graph_def.len;
  }
  if (m->what_case == TENSORFLOW__EVENT__WHAT_SESSION_LOG && m->session_log) {
    e->session_log_status = (int32_t)m->session_log->status;
    if (m->session_log->checkpoint_path && *m->session_log->checkpoint_path)
      e->checkpoint_path = m->session_log->checkpoint_path;
  }
  if (m->what_case == TENSORFLOW__EVENT__WHAT_SUMMARY && m->summary && m->summary->n_value) {
    size_t nv = m->summary->n_value;
    if (nv > INT32_MAX) return bad_record(r, st, "%zu summary values", nv);
    if ((int)nv > r->capvals) {
      loom_event_value *nvals = loom__realloc(r->vals, nv * sizeof *nvals);
      if (nvals) r->vals = nvals;
      char **nt = nvals ? loom__realloc(r->texts, nv * sizeof *nt) : NULL;
      if (nt) r->texts = nt;
      if (!nvals || !nt) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading %s", r->tf.path);
      for (size_t i = (size_t)r->capvals; i < nv; i++) r->texts[i] = NULL;
      r->capvals = (int)nv;
    }
    for (size_t i = 0; i < nv; i++) {
      const Tensorflow__Summary__Value *sv = m->summary->value[i];
      loom_event_value *o = &r->vals[i];
      memset(o, 0, sizeof *o);
      o->tag = sv->tag;
      o->kind = 3;
      switch (sv->value_case) {
        case TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE:
          o->kind = 0;
          o->simple_value = sv->simple_value;
          break;
        case TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO: {
          const Tensorflow__HistogramProto *h = sv->histo;
          if (!h) break;
          if (h->n_bucket != h->n_bucket_limit)
            return bad_record(r, st, "histogram %s has different bucket and bucket_limit counts", sv->tag);
          o->kind = 1;
          o->hmin = h->min;
          o->hmax = h->max;
          o->hnum = h->num;
          o->hsum = h->sum;
          o->hsum_squares = h->sum_squares;
          o->nbuckets = (int32_t)h->n_bucket;
          o->bucket_limit = h->bucket_limit;
          o->bucket = h->bucket;
          break;
        }
        case TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR: {
          const Tensorflow__TensorProto *t = sv->tensor;
          if (t && t->dtype == TENSORFLOW__DATA_TYPE__DT_STRING) {
            o->kind = 2;
            const ProtobufCBinaryData *b = t->n_string_val ? &t->string_val[0] : NULL;
            r->texts[i] = dup_bytes(b ? b->data : NULL, b ? b->len : 0);
            if (!r->texts[i]) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading %s", r->tf.path);
            o->text = r->texts[i];
          } else if (tensor_scalar(t, &o->simple_value)) {
            o->kind = 0;
          }
          break;
        }
        default: break;
      }
    }
    e->nvalues = (int32_t)nv;
    e->values = r->vals;
  }
  *ev = e;
  return LOOM_OK;
}

void loom_event_reader_free(loom_event_reader *r) {
  if (!r) return;
  reader_reset(r);
  loom__tfrecord_close(&r->tf);
  loom__free(r->vals);
  loom__free(r->texts);
  loom__free(r);
}
