/* TensorBoard event files, graph summaries and run traces (loom_summary.h):
 * round trips of every event kind through the reader, the TFRecord framing
 * checked byte by byte with an independent bitwise CRC32C, corruption and
 * truncation -> DATA_LOSS, TF's histogram buckets against hand-worked
 * values and a straightforward reference, graph summaries through a
 * session run, per-node traces and Chrome trace JSON. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <float.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>
#include <unistd.h>
#include "test_util.h"
#include "proto/event.pb-c.h"

/* ---------------------------------------------------------------- helpers */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and
 * TFRecord's mask, independent of the library's implementation. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}
static uint32_t masked(const uint8_t *p, size_t n) {
  uint32_t c = crc32c_bitwise(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Walks the records of a file, checking lengths and both masked CRCs;
 * returns the number of records and fills offs/lens (data offset, length). */
static int walk_records(const uint8_t *b, size_t n, size_t *offs, size_t *lens, int cap) {
  size_t pos = 0;
  int k = 0;
  while (pos < n) {
    cr_assert(pos + 12 <= n, "record %d: header truncated", k);
    uint64_t len = le(b + pos, 8);
    cr_assert_eq((uint32_t)le(b + pos + 8, 4), masked(b + pos, 8), "record %d: length CRC", k);
    cr_assert(pos + 16 + len <= n, "record %d: data truncated", k);
    cr_assert_eq((uint32_t)le(b + pos + 12 + len, 4), masked(b + pos + 12, (size_t)len), "record %d: data CRC", k);
    if (k < cap) {
      offs[k] = pos + 12;
      lens[k] = (size_t)len;
    }
    pos += 16 + (size_t)len;
    k++;
  }
  return k;
}

/* Appends one record (computing its CRCs here) to a file. */
static void append_record(const char *path, const uint8_t *data, size_t n) {
  uint8_t head[12], tail[4];
  put_le(head, n, 8);
  put_le(head + 8, masked(head, 8), 4);
  put_le(tail, masked(data, n), 4);
  FILE *f = fopen(path, "ab");
  cr_assert(f);
  cr_assert_eq(fwrite(head, 1, 12, f), 12u);
  if (n) cr_assert_eq(fwrite(data, 1, n, f), n);
  cr_assert_eq(fwrite(tail, 1, 4, f), 4u);
  fclose(f);
}

static double now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static loom_event_writer *new_writer(const char *dir, const char *suffix) {
  loom_status *st = loom_status_new();
  loom_event_writer *w = loom_event_writer_new(dir, suffix, st);
  cr_assert(w, "writer: %s", loom_status_message(st));
  loom_status_free(st);
  return w;
}
static loom_event_reader *open_reader(const char *path) {
  loom_status *st = loom_status_new();
  loom_event_reader *r = loom_event_reader_open(path, st);
  cr_assert(r, "reader: %s", loom_status_message(st));
  loom_status_free(st);
  return r;
}
static const loom_event *next_ok(loom_event_reader *r) {
  loom_status *st = loom_status_new();
  const loom_event *e = NULL;
  loom_code rc = loom_event_reader_next(r, &e, st);
  cr_assert_eq(rc, LOOM_OK, "next: %s %s", loom_code_name(rc), loom_status_message(st));
  cr_assert(e);
  loom_status_free(st);
  return e;
}
static void expect_end(loom_event_reader *r) {
  const loom_event *e = NULL;
  cr_assert_eq(loom_event_reader_next(r, &e, NULL), LOOM_OUT_OF_RANGE);
}
static int count_events(const char *path) {
  loom_event_reader *r = open_reader(path);
  const loom_event *e;
  int n = 0;
  while (loom_event_reader_next(r, &e, NULL) == LOOM_OK) n++;
  loom_event_reader_free(r);
  return n;
}

/* TF's default bucket limits, built here from their definition. */
static int ref_limits(double *l, int cap) {
  double pos[1000];
  int m = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos[m++] = v;
  int k = 0;
  cr_assert(2 * m + 3 <= cap);
  l[k++] = -DBL_MAX;
  for (int i = m - 1; i >= 0; i--) l[k++] = -pos[i];
  l[k++] = 0.0;
  for (int i = 0; i < m; i++) l[k++] = pos[i];
  l[k++] = DBL_MAX;
  return k;
}
/* Straightforward reference: linear scan for the bucket, then TF's
 * collapse of empty runs. Returns the number of encoded buckets. */
static int ref_histogram(const double *x, int n, double *olim, double *ocnt) {
  static double lim[2000], cnt[2000];
  int nl = ref_limits(lim, 2000);
  memset(cnt, 0, sizeof cnt);
  for (int i = 0; i < n; i++) {
    int b = 0;
    while (b < nl - 1 && !(lim[b] > x[i])) b++;
    cnt[b] += 1;
  }
  int k = 0;
  for (int i = 0; i < nl;) {
    double end = lim[i], c = cnt[i];
    i++;
    if (c <= 0)
      while (i < nl && cnt[i] <= 0) end = lim[i], c = cnt[i], i++;
    olim[k] = end;
    ocnt[k] = c;
    k++;
  }
  return k;
}

/* ------------------------------------------------------------- round trip */
Test(events, every_kind_round_trips) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  char sub[600];
  snprintf(sub, sizeof sub, "%s/a/b", dir); /* parents are created */
  double t0 = now_wall();
  loom_event_writer *w = new_writer(sub, ".suffix");
  const char *path = loom_event_writer_path(w);
  /* name: <logdir>/events.out.tfevents.<10 digits>.<host>.suffix */
  char host[256];
  cr_assert_eq(gethostname(host, sizeof host), 0);
  char want_prefix[700];
  snprintf(want_prefix, sizeof want_prefix, "%s/events.out.tfevents.", sub);
  cr_assert(!strncmp(path, want_prefix, strlen(want_prefix)), "path %s", path);
  const char *p = path + strlen(want_prefix);
  for (int i = 0; i < 10; i++) cr_assert(p[i] >= '0' && p[i] <= '9', "path %s", path);
  long long secs = atoll(p);
  cr_assert(secs >= (long long)t0 && secs <= (long long)t0 + 5, "secs %lld", secs);
  char tail[400];
  snprintf(tail, sizeof tail, ".%s.suffix", host);
  cr_assert_str_eq(p + 10, tail);

  loom_status *st = loom_status_new();
  cr_assert_eq(loom_event_writer_add_scalar(w, "loss", 0.25, 7, st), LOOM_OK, "%s", loom_status_message(st));
  const char *tags[3] = {"accuracy", "auc", "global_step"};
  double vals[3] = {0.875, -3.5, 1e6};
  cr_assert_eq(loom_event_writer_add_scalars(w, 3, tags, vals, 100, st), LOOM_OK);
  double hv[6] = {-1.5, 0, 0, 0.5, 3, 3};
  cr_assert_eq(loom_event_writer_add_histogram(w, "weights", hv, 6, 101, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_event_writer_add_text(w, "checkpoint_path", "/m/model.ckpt-100", 102, st), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_session_log(w, LOOM_SESSION_LOG_START, NULL, 0, st), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_session_log(w, LOOM_SESSION_LOG_CHECKPOINT, "/m/model.ckpt-100", 100, st),
               LOOM_OK);
  cr_assert_eq(loom_event_writer_add_session_log(w, LOOM_SESSION_LOG_STOP, NULL, 200, st), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_scalar(w, "neg_step", 1.0f / 3, -5, st), LOOM_OK);
  char *saved = strdup(path);
  loom_event_writer_free(w);
  double t1 = now_wall();

  loom_event_reader *r = open_reader(saved);
  const loom_event *e = next_ok(r);
  cr_assert_str_eq(e->file_version, "brain.Event:2");
  cr_assert(e->wall_time >= t0 - 1e-3 && e->wall_time <= t1 + 1e-3, "wall_time %f", e->wall_time);
  cr_assert_eq(e->nvalues, 0);
  cr_assert_eq(e->step, 0);
  double last_wall = e->wall_time;

  e = next_ok(r);
  cr_assert_null(e->file_version);
  cr_assert_eq(e->step, 7);
  cr_assert_eq(e->nvalues, 1);
  cr_assert_str_eq(e->values[0].tag, "loss");
  cr_assert_eq(e->values[0].kind, 0);
  cr_assert_eq(e->values[0].simple_value, 0.25);
  cr_assert(e->wall_time >= last_wall && e->wall_time <= t1 + 1e-3);
  cr_assert_eq(e->session_log_status, 0);

  e = next_ok(r);
  cr_assert_eq(e->step, 100);
  cr_assert_eq(e->nvalues, 3);
  for (int i = 0; i < 3; i++) {
    cr_assert_str_eq(e->values[i].tag, tags[i]);
    cr_assert_eq(e->values[i].kind, 0);
    cr_assert_eq(e->values[i].simple_value, vals[i]); /* all exact in float */
  }

  e = next_ok(r);
  cr_assert_eq(e->step, 101);
  cr_assert_eq(e->nvalues, 1);
  const loom_event_value *h = &e->values[0];
  cr_assert_str_eq(h->tag, "weights");
  cr_assert_eq(h->kind, 1);
  cr_assert_eq(h->hmin, -1.5);
  cr_assert_eq(h->hmax, 3);
  cr_assert_eq(h->hnum, 6);
  cr_assert_eq(h->hsum, 5);
  cr_assert_eq(h->hsum_squares, 2.25 + 0.25 + 9 + 9);
  /* By hand: runs of empty buckets collapse into one zero bucket ending at
   * the run's last limit. -1.5 falls in the bucket whose limit is the first
   * one above it (in (-1.5, -1.5/1.1]); 0 in the one ending at 1e-12;
   * 0.5 in (0.5, 0.55]; 3 in (3, 3.3]. */
  cr_assert_eq(h->nbuckets, 9);
  const double want_counts[9] = {0, 1, 0, 2, 0, 1, 0, 2, 0};
  for (int i = 0; i < 9; i++) cr_assert_eq(h->bucket[i], want_counts[i], "bucket %d", i);
  cr_assert(h->bucket_limit[1] > -1.5 && h->bucket_limit[1] <= -1.5 / 1.1 + 1e-12, "%.17g", h->bucket_limit[1]);
  cr_assert(h->bucket_limit[0] <= -1.5 && h->bucket_limit[0] > -1.5 * 1.1, "%.17g", h->bucket_limit[0]);
  cr_assert(fabs(h->bucket_limit[0] * 1.0 / h->bucket_limit[1] - 1.1) < 1e-9);
  cr_assert_eq(h->bucket_limit[2], 0.0);
  cr_assert_eq(h->bucket_limit[3], 1e-12);
  cr_assert(h->bucket_limit[5] > 0.5 && h->bucket_limit[5] <= 0.55 + 1e-12, "%.17g", h->bucket_limit[5]);
  cr_assert(h->bucket_limit[4] <= 0.5 && fabs(h->bucket_limit[5] / h->bucket_limit[4] - 1.1) < 1e-9);
  cr_assert(h->bucket_limit[7] > 3 && h->bucket_limit[7] <= 3.3 + 1e-12, "%.17g", h->bucket_limit[7]);
  cr_assert(h->bucket_limit[6] <= 3 && fabs(h->bucket_limit[7] / h->bucket_limit[6] - 1.1) < 1e-9);
  cr_assert_eq(h->bucket_limit[8], DBL_MAX);

  e = next_ok(r);
  cr_assert_eq(e->step, 102);
  cr_assert_eq(e->nvalues, 1);
  cr_assert_str_eq(e->values[0].tag, "checkpoint_path");
  cr_assert_eq(e->values[0].kind, 2);
  cr_assert_str_eq(e->values[0].text, "/m/model.ckpt-100");

  e = next_ok(r);
  cr_assert_eq(e->session_log_status, 1);
  cr_assert_null(e->checkpoint_path);
  cr_assert_eq(e->nvalues, 0);
  e = next_ok(r);
  cr_assert_eq(e->session_log_status, 3);
  cr_assert_eq(e->step, 100);
  cr_assert_str_eq(e->checkpoint_path, "/m/model.ckpt-100");
  e = next_ok(r);
  cr_assert_eq(e->session_log_status, 2);
  cr_assert_eq(e->step, 200);
  e = next_ok(r);
  cr_assert_eq(e->step, -5);
  cr_assert_eq(e->values[0].simple_value, (double)(1.0f / 3)); /* stored as float, as TF */
  expect_end(r);
  expect_end(r);
  loom_event_reader_free(r);
  loom_status_free(st);
  free(saved);
  tu_rmtree(dir);
}

/* The framing, checked independently of the library's reader and CRC, and
 * the protobuf fields TensorBoard relies on, decoded with protobuf-c. */
Test(events, framing_and_wire_format) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  cr_assert_eq(loom_event_writer_add_scalar(w, "x", 1.5, 3, NULL), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_text(w, "note", "hi \"there\"", 4, NULL), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_histogram(w, "h", NULL, 0, 5, NULL), LOOM_OK); /* empty histogram */
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);

  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  size_t offs[8], lens[8];
  cr_assert_eq(walk_records(b, n, offs, lens, 8), 4);
  /* record 0 by hand: field 1 (wall_time, fixed64) then field 3
   * (file_version, length-delimited "brain.Event:2") */
  cr_assert_eq(lens[0], 9u + 2u + 13u);
  const uint8_t *d = b + offs[0];
  cr_assert_eq(d[0], 0x09);
  cr_assert_eq(d[9], 0x1a);
  cr_assert_eq(d[10], 13);
  cr_assert(!memcmp(d + 11, "brain.Event:2", 13));

  Tensorflow__Event *ev = tensorflow__event__unpack(NULL, lens[1], b + offs[1]);
  cr_assert(ev);
  cr_assert_eq(ev->step, 3);
  cr_assert_eq(ev->what_case, TENSORFLOW__EVENT__WHAT_SUMMARY);
  cr_assert_eq(ev->summary->n_value, 1u);
  cr_assert_str_eq(ev->summary->value[0]->tag, "x");
  cr_assert_eq(ev->summary->value[0]->value_case, TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE);
  cr_assert_eq(ev->summary->value[0]->simple_value, 1.5f);
  tensorflow__event__free_unpacked(ev, NULL);

  /* text: scalar DT_STRING tensor with plugin "text", as tf.summary.text */
  ev = tensorflow__event__unpack(NULL, lens[2], b + offs[2]);
  cr_assert(ev);
  Tensorflow__Summary__Value *v = ev->summary->value[0];
  cr_assert_eq(v->value_case, TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR);
  cr_assert_eq(v->tensor->dtype, TENSORFLOW__DATA_TYPE__DT_STRING);
  cr_assert(v->tensor->tensor_shape);
  cr_assert_eq(v->tensor->tensor_shape->n_dim, 0u);
  cr_assert_eq(v->tensor->n_string_val, 1u);
  cr_assert_eq(v->tensor->string_val[0].len, strlen("hi \"there\""));
  cr_assert(!memcmp(v->tensor->string_val[0].data, "hi \"there\"", v->tensor->string_val[0].len));
  cr_assert(v->metadata && v->metadata->plugin_data);
  cr_assert_str_eq(v->metadata->plugin_data->plugin_name, "text");
  tensorflow__event__free_unpacked(ev, NULL);

  /* empty histogram: TF keeps one (DBL_MAX, 0) bucket; min/max are the
   * untouched initial values */
  ev = tensorflow__event__unpack(NULL, lens[3], b + offs[3]);
  cr_assert(ev);
  Tensorflow__HistogramProto *hp = ev->summary->value[0]->histo;
  cr_assert(hp);
  cr_assert_eq(hp->n_bucket, 1u);
  cr_assert_eq(hp->bucket_limit[0], DBL_MAX);
  cr_assert_eq(hp->bucket[0], 0.0);
  cr_assert_eq(hp->num, 0.0);
  cr_assert_eq(hp->min, DBL_MAX);
  cr_assert_eq(hp->max, -DBL_MAX);
  tensorflow__event__free_unpacked(ev, NULL);
  free(b);
  free(path);
  tu_rmtree(dir);
}

/* ------------------------------------------------------------- histogram */
Test(events, histogram_matches_reference) {
  /* values over many magnitudes, both signs, zeros, exact limits */
  double lim[2000];
  int nl = ref_limits(lim, 2000);
  cr_assert_eq(nl, 1551, "TF's default limit count"); /* 774 per sign + 0 + 2 x DBL_MAX */
  double x[300];
  int n = 0;
  uint64_t s = 12345;
  for (int i = 0; i < 200; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(s >> 11) / 9007199254740992.0;      /* [0,1) */
    double mag = pow(10.0, -14 + 36 * u);                    /* 1e-14 .. 1e22 */
    x[n++] = (s >> 7) & 1 ? mag : -mag;
  }
  x[n++] = 0;
  x[n++] = -0.0;
  x[n++] = lim[800];  /* exactly a limit: goes to the next bucket */
  x[n++] = lim[10];
  x[n++] = -DBL_MAX;
  x[n++] = DBL_MAX;
  x[n++] = 1e-300;
  static double rl[2000], rc[2000];
  int k = ref_histogram(x, n, rl, rc);

  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_event_writer_add_histogram(w, "h", x, n, 1, st), LOOM_OK, "%s", loom_status_message(st));
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);
  loom_event_reader *r = open_reader(path);
  next_ok(r);
  const loom_event *e = next_ok(r);
  const loom_event_value *h = &e->values[0];
  cr_assert_eq(h->nbuckets, k);
  double total = 0, sum = 0, sq = 0, mn = DBL_MAX, mx = -DBL_MAX;
  for (int i = 0; i < k; i++) {
    cr_assert_eq(h->bucket_limit[i], rl[i], "limit %d: %.17g vs %.17g", i, h->bucket_limit[i], rl[i]);
    cr_assert_eq(h->bucket[i], rc[i], "bucket %d", i);
    total += h->bucket[i];
    /* no two zero buckets in a row */
    if (i) cr_assert(h->bucket[i] > 0 || h->bucket[i - 1] > 0, "zero run not collapsed at %d", i);
  }
  for (int i = 0; i < n; i++) {
    sum += x[i];
    sq += x[i] * x[i];
    mn = fmin(mn, x[i]);
    mx = fmax(mx, x[i]);
  }
  cr_assert_eq(total, n);
  cr_assert_eq(h->hnum, n);
  cr_assert_eq(h->hmin, mn);
  cr_assert_eq(h->hmax, mx);
  cr_assert_eq(h->hsum, sum);
  cr_assert_eq(h->hsum_squares, sq);
  /* a value equal to limit 800 counts in bucket 801 */
  int found = 0;
  for (int i = 0; i < k; i++)
    if (h->bucket_limit[i] == lim[801]) found = h->bucket[i] >= 1;
  cr_assert(found);
  loom_event_reader_free(r);

  /* NaN / infinity: INVALID_ARGUMENT naming the tag, nothing written */
  w = new_writer(dir, ".2");
  double bad[3] = {1, NAN, 2};
  cr_assert_eq(loom_event_writer_add_histogram(w, "acts", bad, 3, 1, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "Nan in summary histogram for: acts"), "%s", loom_status_message(st));
  bad[1] = -INFINITY;
  cr_assert_eq(loom_event_writer_add_histogram(w, "acts", bad, 3, 1, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "Infinity in summary histogram for: acts"));
  cr_assert_eq(loom_event_writer_add_histogram(w, "acts", NULL, 3, 1, st), LOOM_INVALID_ARGUMENT);
  char *p2 = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);
  cr_assert_eq(count_events(p2), 1);
  free(p2);
  free(path);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ------------------------------------------------------------ corruption */
Test(events, corruption_and_truncation_are_data_loss) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  for (int i = 0; i < 4; i++) cr_assert_eq(loom_event_writer_add_scalar(w, "loss", i, i, NULL), LOOM_OK);
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);
  size_t n;
  uint8_t *orig = tu_read_file(path, &n);
  size_t offs[8], lens[8];
  cr_assert_eq(walk_records(orig, n, offs, lens, 8), 5);
  loom_status *st = loom_status_new();
  char bad[700];
  snprintf(bad, sizeof bad, "%s/bad.tfevents", dir);
  const loom_event *e;

  /* every single flipped byte of record 2 -> DATA_LOSS at record 2 */
  size_t start = offs[2] - 12, end = offs[2] + lens[2] + 4;
  for (size_t pos = start; pos < end; pos++) {
    uint8_t *c = malloc(n);
    memcpy(c, orig, n);
    c[pos] ^= 0x20;
    tu_write_file(bad, c, n);
    free(c);
    loom_event_reader *r = open_reader(bad);
    next_ok(r);
    next_ok(r);
    loom_code rc = loom_event_reader_next(r, &e, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "flip at %zu: %s", pos, loom_code_name(rc));
    const char *m = loom_status_message(st);
    cr_assert(strstr(m, bad), "message names the file: %s", m);
    cr_assert(strstr(m, "record 2"), "message names the record: %s", m);
    cr_assert(strstr(m, pos < offs[2] ? "length CRC" : "data CRC"), "%s", m);
    loom_event_reader_free(r);
  }

  /* truncated anywhere inside the last record */
  size_t last = offs[4] - 12;
  for (size_t cut = last + 1; cut < n; cut += 3) {
    tu_write_file(bad, orig, cut);
    loom_event_reader *r = open_reader(bad);
    for (int i = 0; i < 4; i++) next_ok(r);
    cr_assert_eq(loom_event_reader_next(r, &e, st), LOOM_DATA_LOSS, "cut at %zu", cut);
    cr_assert(strstr(loom_status_message(st), "truncated"), "%s", loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), "record 4"), "%s", loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), bad));
    loom_event_reader_free(r);
  }
  /* cut exactly at a record boundary: a clean (shorter) file */
  tu_write_file(bad, orig, last);
  cr_assert_eq(count_events(bad), 4);

  /* well-framed record whose data is not an Event */
  tu_write_file(bad, orig, n);
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x80};
  append_record(bad, junk, sizeof junk);
  loom_event_reader *r = open_reader(bad);
  for (int i = 0; i < 5; i++) next_ok(r);
  cr_assert_eq(loom_event_reader_next(r, &e, st), LOOM_DATA_LOSS);
  cr_assert(strstr(loom_status_message(st), "record 5"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "cannot decode an Event"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), bad));
  loom_event_reader_free(r);

  /* missing file -> NOT_FOUND with the path; empty file -> no events */
  char missing[700];
  snprintf(missing, sizeof missing, "%s/none", dir);
  cr_assert_null(loom_event_reader_open(missing, st));
  cr_assert_eq(loom_status_code(st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), missing));
  tu_write_file(bad, orig, 0);
  cr_assert_eq(count_events(bad), 0);
  free(orig);
  free(path);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* --------------------------------------------------- writer API contract */
Test(events, flush_policy_and_no_clobber) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  const char *path = loom_event_writer_path(w);
  /* the file_version event is on disk at once */
  cr_assert_eq(count_events(path), 1);
  /* every FLUSH_EVENTS (32) events reach the file without an explicit flush */
  for (int i = 0; i < 40; i++) cr_assert_eq(loom_event_writer_add_scalar(w, "s", i, i, NULL), LOOM_OK);
  int seen = count_events(path);
  cr_assert(seen >= 33 && seen <= 41, "seen %d", seen);
  cr_assert_eq(loom_event_writer_flush(w, NULL), LOOM_OK);
  cr_assert_eq(count_events(path), 41);

  /* a second writer in the same directory (same second) gets its own file */
  loom_event_writer *w2 = new_writer(dir, NULL);
  cr_assert_str_neq(loom_event_writer_path(w2), path);
  cr_assert_eq(loom_event_writer_add_scalar(w2, "t", 1, 1, NULL), LOOM_OK);
  loom_event_writer_free(w2);
  loom_event_writer_free(w);
  cr_assert_eq(count_entries(dir), 2);
  tu_rmtree(dir);
}

Test(events, writer_errors) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_status *st = loom_status_new();
  cr_assert_null(loom_event_writer_new(NULL, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  char file[700];
  snprintf(file, sizeof file, "%s/plain", dir);
  tu_write_file(file, (const uint8_t *)"x", 1);
  cr_assert_null(loom_event_writer_new(file, NULL, st));
  cr_assert_neq(loom_status_code(st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), file), "%s", loom_status_message(st));
  char under[800];
  snprintf(under, sizeof under, "%s/sub", file); /* a directory under a file */
  cr_assert_null(loom_event_writer_new(under, NULL, st));
  cr_assert_neq(loom_status_code(st), LOOM_OK);

  loom_event_writer *w = new_writer(dir, NULL);
  const char *tags[2] = {"a", NULL};
  double v[2] = {1, 2};
  cr_assert_eq(loom_event_writer_add_scalars(w, 2, tags, v, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_scalars(w, -1, tags, v, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_scalar(w, "", 1, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_text(w, "t", NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_session_log(w, (loom_session_log_status)9, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_scalar(NULL, "a", 1, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_flush(NULL, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_event_writer_add_scalars(w, 0, NULL, NULL, 9, st), LOOM_OK); /* an empty Summary */
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);
  loom_event_writer_free(NULL);
  loom_event_reader_free(NULL);
  cr_assert_eq(count_events(path), 2);
  free(path);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* -------------------------------------------------------- graph summaries */
Test(events, graph_summaries_round_trip_through_a_run) {
  loom_graph *g = loom_graph_new();
  int64_t d3[1] = {3};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d3, "x");
  loom_output total = loom_reduce_sum(g, x, -1, NULL, 0, "total_sum");
  loom_output s1 = loom_summary_scalar(g, "total", total);
  loom_output s2 = loom_summary_histogram(g, "xs", x);
  loom_graph_push_scope(g, "block");
  loom_output mean = loom_reduce_mean(g, x, -1, NULL, 0, NULL);
  loom_output s3 = loom_summary_scalar(g, "mean", mean);
  loom_graph_pop_scope(g);
  loom_output s4 = loom_summary_scalar(g, "total", loom_const_i64(g, 42, NULL)); /* same tag: made unique */
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_str_eq(loom_node_name(s1.node), "total");
  cr_assert_str_eq(loom_node_op_name(s1.node), "Identity");

  const char *const *tags;
  const loom_summary_kind *kinds;
  const loom_output *outs;
  cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, &outs), 4);
  const char *want_tags[4] = {"total", "xs", "block/mean", "total_1"};
  const loom_summary_kind want_kinds[4] = {LOOM_SUMMARY_SCALAR, LOOM_SUMMARY_HISTOGRAM, LOOM_SUMMARY_SCALAR,
                                           LOOM_SUMMARY_SCALAR};
  const loom_output want_outs[4] = {s1, s2, s3, s4};
  for (int i = 0; i < 4; i++) {
    cr_assert_str_eq(tags[i], want_tags[i]);
    cr_assert_eq(kinds[i], want_kinds[i]);
    cr_assert_eq(outs[i].node, want_outs[i].node);
  }
  cr_assert_eq(loom_graph_summaries(g, NULL, NULL, NULL), 4);
  int nc = 0;
  loom_get_collection(g, "summaries", &nc);
  cr_assert_eq(nc, 4);

  loom_session *s = loom_session_new(g, NULL, st);
  float xv[3] = {1.5f, -2.0f, 4.0f};
  loom_tensor *xt = tu_f32(1, d3, xv);
  loom_tensor *vals[4] = {0};
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, outs, vals, 4, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));

  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  cr_assert_eq(loom_event_writer_add_graph_summaries(w, g, vals, 17, st), LOOM_OK, "%s", loom_status_message(st));
  /* a wrong value: a scalar summary given three values */
  loom_tensor *wrong[4] = {xt, vals[1], vals[2], vals[3]};
  cr_assert_eq(loom_event_writer_add_graph_summaries(w, g, wrong, 18, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "total"), "%s", loom_status_message(st));
  loom_tensor *nulls[4] = {vals[0], NULL, vals[2], vals[3]};
  cr_assert_eq(loom_event_writer_add_graph_summaries(w, g, nulls, 18, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "xs"), "%s", loom_status_message(st));
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);

  loom_event_reader *r = open_reader(path);
  next_ok(r);
  const loom_event *e = next_ok(r);
  cr_assert_eq(e->step, 17);
  cr_assert_eq(e->nvalues, 4);
  cr_assert_str_eq(e->values[0].tag, "total");
  cr_assert_eq(e->values[0].kind, 0);
  cr_assert_eq(e->values[0].simple_value, 3.5);
  cr_assert_str_eq(e->values[1].tag, "xs");
  cr_assert_eq(e->values[1].kind, 1);
  cr_assert_eq(e->values[1].hnum, 3);
  cr_assert_eq(e->values[1].hmin, -2.0);
  cr_assert_eq(e->values[1].hmax, 4.0);
  cr_assert_eq(e->values[1].hsum, 3.5);
  cr_assert_eq(e->values[1].hsum_squares, 2.25 + 4 + 16);
  double hb[16], hc[16];
  double xd[3] = {1.5, -2.0, 4.0};
  int k = ref_histogram(xd, 3, hb, hc);
  cr_assert_eq(e->values[1].nbuckets, k);
  for (int i = 0; i < k; i++) {
    cr_assert_eq(e->values[1].bucket_limit[i], hb[i]);
    cr_assert_eq(e->values[1].bucket[i], hc[i]);
  }
  cr_assert_str_eq(e->values[2].tag, "block/mean");
  cr_assert_eq(e->values[2].simple_value, (double)(3.5f / 3.0f));
  cr_assert_str_eq(e->values[3].tag, "total_1");
  cr_assert_eq(e->values[3].simple_value, 42);
  expect_end(r);
  loom_event_reader_free(r);

  for (int i = 0; i < 4; i++) loom_tensor_free(vals[i]);
  loom_tensor_free(xt);
  loom_session_free(s);
  loom_graph_free(g);
  free(path);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* The tags/kinds arrays belong to their graph: listing many other graphs
 * leaves them in place (they used to live in a 16-entry process-wide table
 * that evicted them), and adding a summary rebuilds them. */
Test(events, graph_summary_arrays_belong_to_the_graph) {
  loom_graph *g = loom_graph_new();
  loom_summary_scalar(g, "a", loom_const_f32(g, 1.0f, NULL));
  const char *const *tags = NULL;
  const loom_summary_kind *kinds = NULL;
  cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, NULL), 1);
  cr_assert(tags && kinds);
  const char *const *tags0 = tags;
  for (int i = 0; i < 40; i++) {
    loom_graph *o = loom_graph_new();
    loom_summary_histogram(o, "h", loom_const_f32(o, 2.0f, NULL));
    const char *const *ot = NULL;
    const loom_summary_kind *ok = NULL;
    cr_assert_eq(loom_graph_summaries(o, &ot, &ok, NULL), 1);
    cr_assert_str_eq(ot[0], "h");
    cr_assert_eq(ok[0], LOOM_SUMMARY_HISTOGRAM);
    loom_graph_free(o);
  }
  cr_assert_str_eq(tags[0], "a"); /* still readable: ASan would flag a freed table entry */
  cr_assert_eq(kinds[0], LOOM_SUMMARY_SCALAR);
  cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, NULL), 1);
  cr_assert_eq(tags, tags0, "an unchanged graph keeps its arrays");
  loom_summary_histogram(g, "b", loom_const_f32(g, 3.0f, NULL));
  cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, NULL), 2);
  cr_assert_str_eq(tags[0], "a");
  cr_assert_str_eq(tags[1], "b");
  cr_assert_eq(kinds[0], LOOM_SUMMARY_SCALAR);
  cr_assert_eq(kinds[1], LOOM_SUMMARY_HISTOGRAM);
  loom_graph_free(g);
}

Test(events, graph_summary_build_errors) {
  loom_status *st = loom_status_new();
  /* not a scalar */
  loom_graph *g = loom_graph_new();
  int64_t d23[2] = {2, 3};
  loom_output m = loom_placeholder(g, LOOM_F32, 2, d23, "m");
  loom_summary_scalar(g, "matrix", m);
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "matrix"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "[2,3]"), "%s", loom_status_message(st));
  cr_assert_eq(loom_graph_summaries(g, NULL, NULL, NULL), 0);
  loom_graph_free(g);
  /* strings are not numeric */
  g = loom_graph_new();
  loom_output sp = loom_placeholder(g, LOOM_STRING, 0, NULL, "s");
  loom_summary_histogram(g, "strings", sp);
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "strings"), "%s", loom_status_message(st));
  loom_graph_free(g);
  /* empty tag */
  g = loom_graph_new();
  loom_summary_scalar(g, "", loom_const_f32(g, 1, NULL));
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  loom_graph_free(g);
  /* unknown dims are checked when written; [1,1] is one value */
  g = loom_graph_new();
  int64_t du[1] = {-1};
  loom_output u = loom_placeholder(g, LOOM_F64, 1, du, "u");
  loom_summary_scalar(g, "u", u);
  int64_t d11[2] = {1, 1};
  loom_summary_scalar(g, "one", loom_placeholder(g, LOOM_F32, 2, d11, "p11"));
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_graph_summaries(g, NULL, NULL, NULL), 2);
  loom_graph_free(g);
  cr_assert_eq(loom_graph_summaries(NULL, NULL, NULL, NULL), 0);
  loom_status_free(st);
}

/* ------------------------------------------------------------------ traces */
Test(events, session_trace_and_chrome_json) {
  loom_graph *g = loom_graph_new();
  int64_t d4[1] = {4};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d4, "x");
  loom_output y = loom_mul(g, x, loom_const_f32(g, 2, "two"), "y");
  loom_output z = loom_add(g, y, loom_const_f32(g, 1, "one"), "z");
  loom_output t = loom_reduce_sum(g, z, -1, NULL, 0, "t");
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  float xv[4] = {1, 2, 3, 4};
  loom_tensor *xt = tu_f32(1, d4, xv);
  loom_tensor *out = NULL;
  int n = -1;
  /* off by default */
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &t, &out, 1, NULL, 0, st), LOOM_OK);
  cr_assert_null(loom_session_last_trace(s, &n));
  cr_assert_eq(n, 0);
  loom_tensor_free(out);

  loom_session_set_tracing(s, 1);
  for (int rep = 0; rep < 2; rep++) { /* the second run reuses the plan */
    out = NULL;
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, &t, &out, 1, NULL, 0, st), LOOM_OK);
    cr_assert_eq(((float *)loom_tensor_data(out))[0], 24.0f);
    loom_tensor_free(out);
    const loom_trace_event *ev = loom_session_last_trace(s, &n);
    loom_session_stats stats;
    loom_session_get_stats(s, &stats);
    cr_assert_eq(n, stats.nodes_run, "one event per executed node: %d vs %d", n, stats.nodes_run);
    cr_assert(n >= 3);
    int seen_y = 0, seen_z = 0, seen_t = 0;
    for (int i = 0; i < n; i++) {
      cr_assert(ev[i].node && loom_graph_find(g, ev[i].node), "node %s", ev[i].node);
      cr_assert_str_eq(ev[i].op, loom_node_op_name(loom_graph_find(g, ev[i].node)));
      cr_assert(ev[i].start_ns >= 0 && ev[i].dur_ns >= 0);
      cr_assert_eq(ev[i].thread, 0);
      if (i) cr_assert(ev[i].start_ns >= ev[i - 1].start_ns + ev[i - 1].dur_ns, "sequential, monotone");
      for (int j = 0; j < i; j++) cr_assert_str_neq(ev[i].node, ev[j].node);
      seen_y += !strcmp(ev[i].node, "y");
      seen_z += !strcmp(ev[i].node, "z");
      seen_t += !strcmp(ev[i].node, "t");
    }
    cr_assert(seen_y && seen_z && seen_t);
    cr_assert_str_eq(ev[n - 1].node, "t");
  }

  /* Chrome trace of the last run, parsed back */
  const loom_trace_event *ev = loom_session_last_trace(s, &n);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  char path[700];
  snprintf(path, sizeof path, "%s/timeline-2.json", dir);
  cr_assert_eq(loom_trace_write_chrome(path, ev, n, st), LOOM_OK, "%s", loom_status_message(st));
  size_t len;
  char *text = (char *)tu_read_file(path, &len);
  text[len] = 0;
  cJSON *root = cJSON_Parse(text);
  cr_assert(root, "JSON parses");
  cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  cr_assert(cJSON_IsArray(arr));
  cr_assert_eq(cJSON_GetArraySize(arr), n);
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_GetArrayItem(arr, i);
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, ev[i].node);
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "ph")->valuestring, "X");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "cat")->valuestring, "op");
    cr_assert(fabs(cJSON_GetObjectItemCaseSensitive(o, "ts")->valuedouble - ev[i].start_ns / 1e3) < 1e-6);
    cr_assert(fabs(cJSON_GetObjectItemCaseSensitive(o, "dur")->valuedouble - ev[i].dur_ns / 1e3) < 1e-6);
    cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "pid")->valueint, 0);
    cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "tid")->valueint, 0);
    cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(args, "op")->valuestring, ev[i].op);
  }
  cJSON_Delete(root);
  free(text);

  /* names needing escapes; overwrite atomically, no temporary left over */
  loom_trace_event odd[2] = {{"a\"b\\c\n\x01/d", "Op\"", 1500, 2250, 0}, {"é", NULL, 4000, 1, 3}};
  cr_assert_eq(loom_trace_write_chrome(path, odd, 2, st), LOOM_OK);
  text = (char *)tu_read_file(path, &len);
  text[len] = 0;
  root = cJSON_Parse(text);
  cr_assert(root);
  arr = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  cr_assert_eq(cJSON_GetArraySize(arr), 2);
  cJSON *o0 = cJSON_GetArrayItem(arr, 0), *o1 = cJSON_GetArrayItem(arr, 1);
  cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o0, "name")->valuestring, "a\"b\\c\n\x01/d");
  cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o0, "args"), "op")->valuestring,
                   "Op\"");
  cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o0, "ts")->valuedouble, 1.5);
  cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o0, "dur")->valuedouble, 2.25);
  cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o1, "name")->valuestring, "é");
  cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o1, "tid")->valueint, 3);
  cJSON_Delete(root);
  free(text);
  cr_assert_eq(count_entries(dir), 1);

  /* empty trace; errors */
  cr_assert_eq(loom_trace_write_chrome(path, NULL, 0, st), LOOM_OK);
  text = (char *)tu_read_file(path, &len);
  text[len] = 0;
  root = cJSON_Parse(text);
  cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "traceEvents")), 0);
  cJSON_Delete(root);
  free(text);
  cr_assert_eq(loom_trace_write_chrome(path, NULL, 3, st), LOOM_INVALID_ARGUMENT);
  char nodir[800];
  snprintf(nodir, sizeof nodir, "%s/missing/t.json", dir);
  cr_assert_neq(loom_trace_write_chrome(nodir, odd, 2, st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), "missing"), "%s", loom_status_message(st));

  /* tracing off again: runs work, the trace of the last traced run stays */
  loom_session_set_tracing(s, 0);
  out = NULL;
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &t, &out, 1, NULL, 0, st), LOOM_OK);
  loom_tensor_free(out);
  int n2;
  cr_assert_eq(loom_session_last_trace(s, &n2), ev);
  cr_assert_eq(n2, n);
  cr_assert_null(loom_session_last_trace(NULL, &n2));
  cr_assert_eq(n2, 0);

  loom_tensor_free(xt);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* Events other writers produce: TF2-style scalar tensors (float_val or
 * tensor_content), values of other kinds, and a histogram whose parallel
 * arrays disagree (DATA_LOSS). Built here with protobuf-c. */
static void append_event(const char *path, Tensorflow__Event *ev) {
  size_t n = tensorflow__event__get_packed_size(ev);
  uint8_t *b = malloc(n ? n : 1);
  cr_assert_eq(tensorflow__event__pack(ev, b), n);
  append_record(path, b, n);
  free(b);
}
Test(events, reads_other_writers_values) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  char path[700];
  snprintf(path, sizeof path, "%s/events.out.tfevents.1.other", dir);
  Tensorflow__TensorProto t1 = TENSORFLOW__TENSOR_PROTO__INIT, t2 = TENSORFLOW__TENSOR_PROTO__INIT,
                          t3 = TENSORFLOW__TENSOR_PROTO__INIT;
  float fv = 2.5f;
  t1.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
  t1.n_float_val = 1;
  t1.float_val = &fv;
  double dv = -0.125;
  t2.dtype = TENSORFLOW__DATA_TYPE__DT_DOUBLE;
  t2.tensor_content.len = 8;
  t2.tensor_content.data = (uint8_t *)&dv;
  int32_t iv = 3;
  t3.dtype = TENSORFLOW__DATA_TYPE__DT_INT32;
  t3.n_int_val = 1;
  t3.int_val = &iv;
  Tensorflow__Summary__Image img = TENSORFLOW__SUMMARY__IMAGE__INIT;
  Tensorflow__Summary__Value v[4];
  Tensorflow__Summary__Value *pv[4];
  const char *tags[4] = {"tf2/scalar", "tf2/double", "ints", "picture"};
  for (int i = 0; i < 4; i++) {
    tensorflow__summary__value__init(&v[i]);
    v[i].tag = (char *)tags[i];
    v[i].value_case = i < 3 ? TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR : TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE;
    pv[i] = &v[i];
  }
  v[0].tensor = &t1;
  v[1].tensor = &t2;
  v[2].tensor = &t3;
  v[3].image = &img;
  Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
  sum.n_value = 4;
  sum.value = pv;
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.wall_time = 1234.5;
  ev.step = 9;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  append_event(path, &ev);
  /* a histogram with 2 limits and 1 count */
  double lim[2] = {1, 2}, cnt[1] = {5};
  Tensorflow__HistogramProto h = TENSORFLOW__HISTOGRAM_PROTO__INIT;
  h.n_bucket_limit = 2;
  h.bucket_limit = lim;
  h.n_bucket = 1;
  h.bucket = cnt;
  Tensorflow__Summary__Value hv = TENSORFLOW__SUMMARY__VALUE__INIT, *phv = &hv;
  hv.tag = (char *)"bad_histo";
  hv.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
  hv.histo = &h;
  sum.n_value = 1;
  sum.value = &phv;
  append_event(path, &ev);

  loom_event_reader *r = open_reader(path);
  const loom_event *e = next_ok(r);
  cr_assert_eq(e->wall_time, 1234.5);
  cr_assert_eq(e->step, 9);
  cr_assert_eq(e->nvalues, 4);
  cr_assert_eq(e->values[0].kind, 0);
  cr_assert_eq(e->values[0].simple_value, 2.5);
  cr_assert_eq(e->values[1].kind, 0);
  cr_assert_eq(e->values[1].simple_value, -0.125);
  cr_assert_eq(e->values[2].kind, 3);
  cr_assert_str_eq(e->values[2].tag, "ints");
  cr_assert_eq(e->values[3].kind, 3);
  cr_assert_str_eq(e->values[3].tag, "picture");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_event_reader_next(r, &e, st), LOOM_DATA_LOSS);
  cr_assert(strstr(loom_status_message(st), "bad_histo"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "record 1"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), path), "%s", loom_status_message(st));
  loom_event_reader_free(r);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* The tags/kinds arrays stay right across many graphs (the table keyed by
 * graph evicts old entries) and across a freed graph's address reused. */
Test(events, summaries_of_many_graphs) {
  loom_graph *gs[24];
  char tag[32];
  for (int i = 0; i < 24; i++) {
    gs[i] = loom_graph_new();
    for (int j = 0; j <= i % 3; j++) {
      snprintf(tag, sizeof tag, "g%d_s%d", i, j);
      if (j == 1) loom_summary_histogram(gs[i], tag, loom_const_f32(gs[i], (float)j, NULL));
      else loom_summary_scalar(gs[i], tag, loom_const_f32(gs[i], (float)j, NULL));
    }
  }
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < 24; i++) {
      const char *const *tags;
      const loom_summary_kind *kinds;
      int n = loom_graph_summaries(gs[i], &tags, &kinds, NULL);
      cr_assert_eq(n, i % 3 + 1);
      for (int j = 0; j < n; j++) {
        snprintf(tag, sizeof tag, "g%d_s%d", i, j);
        cr_assert_str_eq(tags[j], tag);
        cr_assert_eq(kinds[j], j == 1 ? LOOM_SUMMARY_HISTOGRAM : LOOM_SUMMARY_SCALAR);
      }
    }
  for (int i = 0; i < 24; i++) loom_graph_free(gs[i]);
  for (int i = 0; i < 24; i++) {
    loom_graph *g = loom_graph_new();
    loom_summary_histogram(g, "only", loom_const_f32(g, 1, NULL));
    const char *const *tags;
    const loom_summary_kind *kinds;
    cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, NULL), 1);
    cr_assert_str_eq(tags[0], "only");
    cr_assert_eq(kinds[0], LOOM_SUMMARY_HISTOGRAM);
    loom_graph_free(g);
  }
}

/* The pixels of an 8-bit PNG whose rows all use filter 0 (what the writer
 * makes): IHDR's size and colour type checked, IDAT inflated with zlib. */
static void png_pixels(const ProtobufCBinaryData *png, int w, int h, int ctype, uint8_t *out, int ch) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  cr_assert(png->len > 8 && !memcmp(png->data, sig, 8));
  size_t i = 8;
  uint8_t idat[4096];
  size_t nidat = 0;
  while (i + 12 <= png->len) {
    const uint8_t *c = png->data + i;
    uint32_t n = ((uint32_t)c[0] << 24) | ((uint32_t)c[1] << 16) | ((uint32_t)c[2] << 8) | c[3];
    if (!memcmp(c + 4, "IHDR", 4)) {
      cr_assert_eq(((uint32_t)c[8] << 24 | (uint32_t)c[9] << 16 | (uint32_t)c[10] << 8 | c[11]), (uint32_t)w);
      cr_assert_eq(((uint32_t)c[12] << 24 | (uint32_t)c[13] << 16 | (uint32_t)c[14] << 8 | c[15]), (uint32_t)h);
      cr_assert_eq(c[16], 8);
      cr_assert_eq(c[17], ctype);
    } else if (!memcmp(c + 4, "IDAT", 4)) {
      cr_assert(nidat + n <= sizeof idat);
      memcpy(idat + nidat, c + 8, n);
      nidat += n;
    }
    i += 12 + n;
  }
  uint8_t raw[4096];
  uLongf nraw = sizeof raw;
  cr_assert_eq(uncompress(raw, &nraw, idat, nidat), Z_OK);
  cr_assert_eq(nraw, (uLongf)(h * (1 + w * ch)));
  for (int y = 0; y < h; y++) {
    cr_assert_eq(raw[y * (1 + w * ch)], 0);
    memcpy(out + y * w * ch, raw + y * (1 + w * ch) + 1, (size_t)(w * ch));
  }
}

/* tf.compat.v1.summary.image: tags "<tag>/image" for max_outputs 1, else
 * "<tag>/image/<i>" for the first min(max_outputs, batch) images; uint8
 * pixels as given, floats mapped per image (x * 255 / max without
 * negatives, else x * 127 / max(|min|, max) + 128, truncated; a non-finite
 * pixel red); the shape, dtype and max_outputs checks. */
Test(events, image_summaries) {
  loom_graph *g = loom_graph_new();
  int64_t du[4] = {2, 2, 2, 3}, df[4] = {3, 1, 3, 1};
  loom_output u = loom_placeholder(g, LOOM_U8, 4, du, "u");
  loom_output f = loom_placeholder(g, LOOM_F32, 4, df, "f");
  loom_output s1 = loom_summary_image(g, "rgb", u, 1);
  loom_output s2 = loom_summary_image(g, "gray", f, 2);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  const char *const *tags;
  const loom_summary_kind *kinds;
  const loom_output *outs;
  cr_assert_eq(loom_graph_summaries(g, &tags, &kinds, &outs), 2);
  cr_assert_eq(kinds[0], LOOM_SUMMARY_IMAGE);
  cr_assert_eq(kinds[1], LOOM_SUMMARY_IMAGE);
  cr_assert_eq(outs[0].node, s1.node);
  cr_assert_eq(outs[1].node, s2.node);

  loom_tensor *ut = loom_tensor_new(LOOM_U8, 4, du, NULL), *ft = loom_tensor_new(LOOM_F32, 4, df, NULL);
  uint8_t *up = loom_tensor_data(ut);
  for (int i = 0; i < 24; i++) up[i] = (uint8_t)(i * 10);
  const float fv[9] = {0.0f, 2.0f, 1.0f, -1.0f, 0.5f, NAN, 7.0f, 7.0f, 7.0f};
  memcpy(loom_tensor_data(ft), fv, sizeof fv);
  loom_session *s = loom_session_new(g, NULL, st);
  loom_output feeds[2] = {u, f};
  loom_tensor *fvals[2] = {ut, ft}, *vals[2] = {0};
  cr_assert_eq(loom_session_run(s, feeds, fvals, 2, outs, vals, 2, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_events");
  loom_event_writer *w = new_writer(dir, NULL);
  cr_assert_eq(loom_event_writer_add_graph_summaries(w, g, vals, 9, st), LOOM_OK, "%s", loom_status_message(st));
  char *path = strdup(loom_event_writer_path(w));
  loom_event_writer_free(w);

  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  size_t offs[4], lens[4];
  cr_assert_eq(walk_records(b, n, offs, lens, 4), 2);
  Tensorflow__Event *ev = tensorflow__event__unpack(NULL, lens[1], b + offs[1]);
  cr_assert(ev && ev->summary);
  cr_assert_eq(ev->step, 9);
  cr_assert_eq(ev->summary->n_value, 3u);
  const char *want_tags[3] = {"rgb/image", "gray/image/0", "gray/image/1"};
  for (int i = 0; i < 3; i++) {
    Tensorflow__Summary__Value *v = ev->summary->value[i];
    cr_assert_str_eq(v->tag, want_tags[i]);
    cr_assert_eq(v->value_case, TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE);
  }
  Tensorflow__Summary__Image *im = ev->summary->value[0]->image;
  cr_assert_eq(im->height, 2);
  cr_assert_eq(im->width, 2);
  cr_assert_eq(im->colorspace, 3);
  uint8_t px[12];
  png_pixels(&im->encoded_image_string, 2, 2, 2, px, 3);
  for (int i = 0; i < 12; i++) cr_assert_eq(px[i], i * 10); /* the first image only */
  im = ev->summary->value[1]->image;
  cr_assert_eq(im->height, 1);
  cr_assert_eq(im->width, 3);
  cr_assert_eq(im->colorspace, 1);
  png_pixels(&im->encoded_image_string, 3, 1, 0, px, 1);
  cr_assert_eq(px[0], 0);   /* 0 * 255 / 2 */
  cr_assert_eq(px[1], 255); /* 2 * 255 / 2 */
  cr_assert_eq(px[2], 127); /* 1 * 127.5 = 127.5, truncated */
  png_pixels(&ev->summary->value[2]->image->encoded_image_string, 3, 1, 0, px, 1);
  cr_assert_eq(px[0], 1);   /* -1 * 127 / 1 + 128 */
  cr_assert_eq(px[1], 191); /* 0.5 * 127 + 128 = 191.5 */
  cr_assert_eq(px[2], 255); /* NaN: red's first channel */
  tensorflow__event__free_unpacked(ev, NULL);
  free(b);

  /* the reader lists an image value by its tag */
  loom_event_reader *r = open_reader(path);
  next_ok(r);
  const loom_event *e = next_ok(r);
  cr_assert_eq(e->nvalues, 3);
  cr_assert_str_eq(e->values[1].tag, "gray/image/0");
  cr_assert_eq(e->values[1].kind, 3);
  expect_end(r);
  loom_event_reader_free(r);

  for (int i = 0; i < 2; i++) loom_tensor_free(vals[i]);
  loom_tensor_free(ut);
  loom_tensor_free(ft);
  loom_session_free(s);
  loom_graph_free(g);
  free(path);
  tu_rmtree(dir);

  /* building errors */
  int64_t bad[4] = {1, 2, 2, 2};
  g = loom_graph_new();
  loom_summary_image(g, "two", loom_placeholder(g, LOOM_F32, 4, bad, "x"), 3);
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "summary image two: the tensor must be 4-D"), "%s",
            loom_status_message(st));
  loom_graph_free(g);
  g = loom_graph_new();
  loom_summary_image(g, "ints", loom_placeholder(g, LOOM_I32, 4, du, "x"), 3);
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "uint8, float32 or float64"), "%s", loom_status_message(st));
  loom_graph_free(g);
  g = loom_graph_new();
  loom_summary_image(g, "none", loom_placeholder(g, LOOM_U8, 4, du, "x"), 0);
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "max_outputs must be at least 1"), "%s", loom_status_message(st));
  loom_graph_free(g);
  loom_status_free(st);
}
