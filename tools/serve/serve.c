/* loom-serve: TF Serving's REST API over loom exports (flags: loom-serve --help; docs/serving.md).
 * The models: --model_name NAME --model_base_path DIR (DIR/<version>/, TF Serving's meaning),
 * --model_config_file FILE (TF Serving's ModelServerConfig), or --model_base_path DIR alone
 * (every DIR/<model>/<version>/). A version directory holds a loom export (saved_model.loom,
 * signatures.json, variables/). One libuv loop does the HTTP (llhttp) and the JSON decoding;
 * the resident predictors run on the loop or on batching threads, merging the queued requests
 * of one signature (up to max_batch_size rows, waiting at most batch_timeout_micros for more).
 * The model directories are polled for new and removed versions. Besides TF Serving's routes:
 * GET /healthz (alive), GET /readyz (every model has a version loaded) and
 * GET /monitoring/prometheus/metrics. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <llhttp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <uv.h>
#include "serve.h"

/* messages and paths are cut at their buffers on purpose (paths over 4 KiB are not served) */
#pragma GCC diagnostic ignored "-Wformat-truncation"

typedef struct model {
  char *name;
  char *dir;         /* its base path: DIR/<version>/ */
  int configured;    /* named by the flags or the config file (kept when its directory is missing) */
  version *versions; /* highest first */
  struct model *next;
} model;

static struct {
  const char *base, *host;
  int port, max_batch, max_conns, poll_ms, threads, batch_thread, nworkers, scanned;
  long batch_timeout_us;
  long long max_queued_rows; /* 0: no limit; else max_enqueued_batches * max_batch_size */
  long long qrows;           /* rows waiting in the queue (S.mu) */
  size_t max_body;
  uv_loop_t *loop;
  uv_tcp_t server;
  uv_timer_t poll;
  uv_async_t done_async;
  uv_check_t check;
  uv_signal_t sigterm, sigint;
  model *models;
  int nconns, stopping;
  /* batching queue */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *qhead, *qtail;
  int qstop;
  job *dhead, *dtail; /* done, for the loop */
  pthread_t *workers;
  long nreq, nbatch, maxbatch; /* worker statistics, printed at exit */
  llhttp_settings_t hs;
} S;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ------------------------------------------------------------ versions */
static void sig_clear(sigdef *s) {
  free(s->name);
  free(s->method);
  for (int i = 0; s->in && i < s->nin; i++) free(s->in[i].key), free(s->in[i].name);
  for (int i = 0; s->out && i < s->nout; i++) free(s->out[i].key), free(s->out[i].name);
  free(s->in);
  free(s->out);
}
static void version_unref(version *v) {
  if (atomic_fetch_sub(&v->refs, 1) != 1) return;
  loom_predictor_free(v->p);
  for (int i = 0; i < v->nsig; i++) sig_clear(&v->sigs[i]);
  free(v->sigs);
  free(v->dir);
  free(v->error);
  free(v);
}

static loom_dtype dtype_by_name(const char *s) {
  for (int d = 1; d < LOOM_DTYPE_COUNT; d++)
    if (!strcmp(loom_dtype_name((loom_dtype)d), s)) return (loom_dtype)d;
  return LOOM_DTYPE_INVALID;
}
static int parse_tensors(const cJSON *obj, int *n, tinfo **out) {
  *n = cJSON_GetArraySize(obj);
  *out = calloc((size_t)*n + 1, sizeof **out);
  if (!*out) return -1;
  int i = 0;
  for (const cJSON *t = obj ? obj->child : NULL; t; t = t->next, i++) {
    tinfo *ti = &(*out)[i];
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name"), *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype"),
                *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!cJSON_IsString(nm) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 8) return -1;
    ti->key = strdup(t->string);
    ti->name = strdup(nm->valuestring);
    ti->dt = dtype_by_name(dt->valuestring);
    for (const cJSON *e = sh->child; e; e = e->next) ti->dims[ti->nd++] = (int64_t)e->valuedouble;
  }
  return 0;
}
/* signatures.json: dtypes and shapes for metadata and request checks */
static int load_sigs(version *v, char *err, size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/signatures.json", v->dir);
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(err, cap, "cannot open %s: %s", path, strerror(errno)), -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!text || got != (size_t)n) return free(text), snprintf(err, cap, "cannot read %s", path), -1;
  text[n] = 0;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsObject(root)) return cJSON_Delete(root), snprintf(err, cap, "%s is not a JSON object", path), -1;
  v->nsig = cJSON_GetArraySize(root);
  v->sigs = calloc((size_t)v->nsig + 1, sizeof *v->sigs);
  int i = 0, rc = v->sigs ? 0 : -1;
  for (const cJSON *s = root->child; s && !rc; s = s->next, i++) {
    sigdef *sg = &v->sigs[i];
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "method_name");
    sg->name = strdup(s->string);
    sg->method = strdup(cJSON_IsString(m) ? m->valuestring : "tensorflow/serving/predict");
    rc = parse_tensors(cJSON_GetObjectItemCaseSensitive(s, "inputs"), &sg->nin, &sg->in) ||
         parse_tensors(cJSON_GetObjectItemCaseSensitive(s, "outputs"), &sg->nout, &sg->out);
    sg->batchable = sg->nin > 0;
    for (int k = 0; k < sg->nin; k++)
      if (sg->in[k].nd < 1 || sg->in[k].dims[0] != -1) sg->batchable = 0;
  }
  cJSON_Delete(root);
  if (rc) snprintf(err, cap, "%s: a signature lacks name/dtype/shape", path);
  return rc;
}

static uint64_t dir_stamp(const char *dir) {
  const char *files[] = {"saved_model.loom", "signatures.json", "variables/variables.ckpt", "variables"};
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < 4; i++) {
    char p[4096];
    struct stat fst;
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    uint64_t x = stat(p, &fst) ? 0 : (uint64_t)fst.st_mtim.tv_sec * 1000000007ull + (uint64_t)fst.st_mtim.tv_nsec +
                                          (uint64_t)fst.st_size * 31;
    h = (h ^ x) * 1099511628211ull;
  }
  return h;
}

static void version_load(version *v) {
  char err[1024] = "";
  loom_status *st = loom_status_new();
  loom_predictor_options po = loom_predictor_options_default();
  po.num_threads = S.threads;
  v->p = loom_predictor_load(v->dir, &po, st);
  if (!v->p) snprintf(err, sizeof err, "%s", loom_status_message(st));
  else if (load_sigs(v, err, sizeof err)) {
    loom_predictor_free(v->p);
    v->p = NULL;
  }
  loom_status_free(st);
  free(v->error);
  v->error = v->p ? NULL : strdup(err);
  v->ok = v->p != NULL;
}

static int is_number(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static model *find_model(const char *name) {
  for (model *m = S.models; m; m = m->next)
    if (!strcmp(m->name, name)) return m;
  return NULL;
}

static void scan_model(model *m) {
  const char *mdir = m->dir;
  for (version *v = m->versions; v; v = v->next) v->seen = 0;
  DIR *d = opendir(mdir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!is_number(e->d_name) || strlen(e->d_name) > 18) continue;
    char vdir[4096];
    snprintf(vdir, sizeof vdir, "%s/%s", mdir, e->d_name);
    struct stat fst;
    if (stat(vdir, &fst) || !S_ISDIR(fst.st_mode)) continue;
    int64_t num = strtoll(e->d_name, NULL, 10);
    version *v = m->versions;
    while (v && v->v != num) v = v->next;
    uint64_t stamp = dir_stamp(vdir);
    if (v) {
      v->seen = 1;
      if (v->ok || v->stamp == stamp) continue;
      /* a failed load is retried when its files change */
      for (int i = 0; i < v->nsig; i++) sig_clear(&v->sigs[i]);
      free(v->sigs);
      v->sigs = NULL;
      v->nsig = 0;
    } else {
      v = calloc(1, sizeof *v);
      if (!v) continue;
      v->v = num;
      v->dir = strdup(vdir);
      atomic_init(&v->refs, 1);
      version **pp = &m->versions;
      while (*pp && (*pp)->v > num) pp = &(*pp)->next;
      v->next = *pp;
      *pp = v;
      v->seen = 1;
    }
    v->stamp = stamp;
    double t0 = now_us();
    version_load(v);
    if (v->ok)
      fprintf(stderr, "loom-serve: loaded model %s version %lld (%.1f ms)\n", m->name, (long long)num,
              (now_us() - t0) / 1e3);
    else
      fprintf(stderr, "loom-serve: model %s version %lld failed to load: %s\n", m->name, (long long)num, v->error);
  }
  if (d) closedir(d);
  for (version **pp = &m->versions; *pp;) {
    version *v = *pp;
    if (v->seen) {
      pp = &v->next;
      continue;
    }
    *pp = v->next;
    fprintf(stderr, "loom-serve: unloaded model %s version %lld\n", m->name, (long long)v->v);
    version_unref(v);
  }
}

static model *add_model(const char *name, const char *dir, int configured) {
  model *m = calloc(1, sizeof *m);
  if (!m || !(m->name = strdup(name)) || !(m->dir = strdup(dir))) {
    if (m) free(m->name);
    free(m);
    return NULL;
  }
  m->configured = configured;
  model **pp = &S.models; /* in the order given */
  while (*pp) pp = &(*pp)->next;
  *pp = m;
  return m;
}

/* --model_base_path alone: every subdirectory of S.base is a model */
static void scan_base(void) {
  DIR *d = S.base ? opendir(S.base) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    struct stat fst;
    snprintf(p, sizeof p, "%s/%s", S.base, e->d_name);
    if (stat(p, &fst) || !S_ISDIR(fst.st_mode) || find_model(e->d_name)) continue;
    if (is_number(e->d_name) && !S.scanned) {
      char f[4200];
      snprintf(f, sizeof f, "%s/saved_model.loom", p);
      if (!stat(f, &fst))
        fprintf(stderr,
                "loom-serve: %s looks like a version directory, but with --model_base_path alone every "
                "subdirectory is a model: add --model_name NAME to serve %s as one model (TF Serving's meaning)\n",
                p, S.base);
    }
    add_model(e->d_name, p, 0);
  }
  if (d) closedir(d);
  for (model *m = S.models; m; m = m->next) scan_model(m);
  S.scanned = 1;
}
static void on_poll(uv_timer_t *t) {
  (void)t;
  scan_base();
}

/* ------------------------------------------------------------ connections */
typedef struct conn {
  uv_tcp_t h;
  llhttp_t parser;
  char *url;
  size_t url_n;
  sb body;
  int too_large, busy, closing, keep, reading;
  char *left; /* unparsed bytes after a paused message */
  size_t left_n;
} conn;

static void conn_closed(uv_handle_t *h) {
  conn *c = h->data;
  free(c->url);
  free(c->body.p);
  free(c->left);
  free(c);
  S.nconns--;
}
static void conn_close(conn *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_read_stop((uv_stream_t *)&c->h);
  c->reading = 0;
  if (!c->busy) uv_close((uv_handle_t *)&c->h, conn_closed);
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 413: return "Payload Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

typedef struct wreq {
  uv_write_t w;
  conn *c;
  char *buf;
  int close;
} wreq;
static void resume_conn(conn *c);
static void on_written(uv_write_t *w, int status) {
  wreq *r = (wreq *)w;
  free(r->buf);
  conn *c = r->c;
  c->busy = 0;
  if (c->closing) uv_close((uv_handle_t *)&c->h, conn_closed);
  else if (status < 0 || r->close) conn_close(c);
  else resume_conn(c);
  free(r);
}
/* sends a reply (body taken over; JSON, or ctype) and goes on with the connection */
static void send_reply_as(conn *c, int status, sb *body, int close, const char *ctype) {
  if (S.stopping) close = 1;
  serve_metrics_http(status);
  char head[256];
  int hn = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                    reason(status), ctype ? ctype : "application/json", body->n, close ? "Connection: close\r\n" : "");
  uv_buf_t bufs[2] = {uv_buf_init(head, (unsigned)hn), uv_buf_init(body->p ? body->p : "", (unsigned)body->n)};
  if (c->closing) {
    free(body->p);
    memset(body, 0, sizeof *body);
    c->busy = 0;
    uv_close((uv_handle_t *)&c->h, conn_closed);
    return;
  }
  int k = uv_try_write((uv_stream_t *)&c->h, bufs, 2);
  size_t total = (size_t)hn + body->n;
  if (k == (int)total) {
    free(body->p);
    memset(body, 0, sizeof *body);
    c->busy = 0;
    if (close) conn_close(c);
    else resume_conn(c);
    return;
  }
  if (k < 0) k = 0;
  wreq *r = calloc(1, sizeof *r);
  char *rest = malloc(total - (size_t)k + 1);
  if (!r || !rest) {
    free(r);
    free(rest);
    free(body->p);
    memset(body, 0, sizeof *body);
    c->busy = 0;
    conn_close(c);
    return;
  }
  size_t o = 0;
  if ((size_t)k < (size_t)hn) {
    memcpy(rest, head + k, (size_t)hn - (size_t)k);
    o = (size_t)hn - (size_t)k;
    memcpy(rest + o, body->p, body->n);
    o += body->n;
  } else {
    memcpy(rest, body->p + ((size_t)k - (size_t)hn), total - (size_t)k);
    o = total - (size_t)k;
  }
  free(body->p);
  memset(body, 0, sizeof *body);
  r->c = c;
  r->buf = rest;
  r->close = close;
  uv_buf_t b = uv_buf_init(rest, (unsigned)o);
  if (uv_write(&r->w, (uv_stream_t *)&c->h, &b, 1, on_written)) {
    free(rest);
    free(r);
    c->busy = 0;
    conn_close(c);
  }
}
static void send_reply(conn *c, int status, sb *body, int close) { send_reply_as(c, status, body, close, NULL); }
static void send_error(conn *c, int status, const char *msg, int close) {
  sb b = {0};
  serve_error_body(&b, msg);
  send_reply(c, status, &b, close);
}

/* ------------------------------------------------------------ batching */
static void push_done(job *j) {
  pthread_mutex_lock(&S.mu);
  j->next = NULL;
  if (S.dtail) S.dtail->next = j;
  else S.dhead = j;
  S.dtail = j;
  pthread_mutex_unlock(&S.mu);
  uv_async_send(&S.done_async);
}

static int same_inner(const job *a, const job *b) {
  if (a->ver != b->ver || a->sig != b->sig || b->rows < 1 || a->kind == K_PREDICT_COL || b->kind == K_PREDICT_COL)
    return 0;
  for (int i = 0; i < a->sig->nin; i++) {
    int nd = loom_tensor_ndim(a->in[i]);
    if (nd != loom_tensor_ndim(b->in[i]) || loom_tensor_dtype(a->in[i]) == LOOM_STRING) return 0;
    for (int k = 1; k < nd; k++)
      if (loom_tensor_dim(a->in[i], k) != loom_tensor_dim(b->in[i], k)) return 0;
  }
  return 1;
}

static void run_batch(job **js, int n, loom_status *st) {
  const sigdef *sg = js[0]->sig;
  loom_tensor *ins[64] = {0}, *outs[64] = {0};
  int64_t total = 0;
  for (int k = 0; k < n; k++) total += js[k]->rows;
  int merged = n > 1;
  for (int i = 0; i < sg->nin; i++) {
    if (!merged) {
      ins[i] = js[0]->in[i];
      continue;
    }
    int64_t dims[9];
    int nd = loom_tensor_ndim(js[0]->in[i]);
    memcpy(dims, loom_tensor_dims(js[0]->in[i]), sizeof(int64_t) * (size_t)nd);
    dims[0] = total;
    ins[i] = loom_tensor_new(loom_tensor_dtype(js[0]->in[i]), nd, dims, NULL);
    char *p = ins[i] ? loom_tensor_data(ins[i]) : NULL;
    for (int k = 0; p && k < n; k++) {
      size_t nb = loom_tensor_nbytes(js[k]->in[i]);
      memcpy(p, loom_tensor_data(js[k]->in[i]), nb);
      p += nb;
    }
  }

  loom_code rc = sg->nin > 64 || sg->nout > 64
                     ? loom_status_set(st, LOOM_UNIMPLEMENTED, "signature %s has more than 64 inputs or outputs", sg->name)
                     : loom_predictor_run(js[0]->ver->p, sg->name, sg->nin, ins, sg->nout, outs, st);
  if (rc == LOOM_OK) {
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
      serve_encode(js[k], outs, off, merged ? total : js[k]->rows);
      off += js[k]->rows;
    }
  } else {
    /* columns of different lengths fail inside the model (whose op names mean nothing to the
     * client); a signature may have inputs of unrelated lengths, so this is said only then */
    char msg[1024];
    int lengths = rc == LOOM_INVALID_ARGUMENT && n == 1 && serve_col_lengths(js[0], msg, sizeof msg);
    for (int k = 0; k < n; k++) {
      js[k]->status = rc == LOOM_INVALID_ARGUMENT || rc == LOOM_NOT_FOUND || rc == LOOM_OUT_OF_RANGE ? 400 : 500;
      js[k]->out.n = 0;
      serve_error_body(&js[k]->out, lengths ? msg : loom_status_message(st));
    }
  }
  for (int i = 0; merged && i < sg->nin; i++) loom_tensor_free(ins[i]);
  for (int o = 0; o < sg->nout && o < 64; o++) loom_tensor_free(outs[o]);
}

/* takes the first queued job and every queued job that can join it (S.mu held); waits up to
 * --batch_timeout_micros for more when wait is set. Jobs count in S.qrows until their batch runs
 * (a request larger than the limit is taken when nothing waits). */
static int take_batch(job **batch, int wait) {
  job *j0 = S.qhead;
  S.qhead = j0->next;
  if (!S.qhead) S.qtail = NULL;
  int n = 1;
  int64_t rows = j0->rows;
  batch[0] = j0;
  double deadline = j0->t_enq + (double)S.batch_timeout_us;
  for (;;) {
    job **pp = &S.qhead, *prev = NULL;
    while (*pp && j0->rows > 0 && rows < S.max_batch) {
      job *j = *pp;
      if (same_inner(j0, j) && rows + j->rows <= S.max_batch) {
        *pp = j->next;
        if (S.qtail == j) S.qtail = prev;
        batch[n++] = j;
        rows += j->rows;
      } else {
        prev = j;
        pp = &j->next;
      }
    }
    if (!wait || j0->rows <= 0 || rows >= S.max_batch || S.batch_timeout_us <= 0 || S.qstop) break;
    double t = now_us();
    if (t >= deadline) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double w = deadline - t;
    ts.tv_sec += (time_t)(w / 1e6);
    ts.tv_nsec += (long)((w - (double)(long)(w / 1e6) * 1e6) * 1e3);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&S.cv, &S.mu, &ts);
  }
  S.qrows -= rows > 0 ? rows : 1; /* a batch leaves the queue when it starts to run */
  S.nreq += n;
  S.nbatch++;
  if (n > S.maxbatch) S.maxbatch = n;
  return n;
}

static void *worker_main(void *arg) {
  (void)arg;
  loom_status *st = loom_status_new();
  job **batch = calloc((size_t)S.max_batch + 1, sizeof *batch);
  pthread_mutex_lock(&S.mu);
  for (;;) {
    while (!S.qhead && !S.qstop) pthread_cond_wait(&S.cv, &S.mu);
    if (!S.qhead) break;
    int n = take_batch(batch, 1);
    pthread_mutex_unlock(&S.mu);
    run_batch(batch, n, st);
    for (int k = 0; k < n; k++) push_done(batch[k]);
    pthread_mutex_lock(&S.mu);
  }
  pthread_mutex_unlock(&S.mu);
  free(batch);
  loom_status_free(st);
  return NULL;
}

static void job_free(job *j) {
  job_free_inputs(j);
  free(j->out.p);
  if (j->ver) version_unref(j->ver);
  free(j);
}

static void on_done(uv_async_t *a) {
  (void)a;
  pthread_mutex_lock(&S.mu);
  job *j = S.dhead;
  S.dhead = S.dtail = NULL;
  pthread_mutex_unlock(&S.mu);
  double t = now_us();
  while (j) {
    job *next = j->next;
    conn *c = j->conn;
    serve_series_observe(j->series, j->status, (t - j->t_start) / 1e6);
    send_reply(c, j->status, &j->out, !c->keep);
    job_free(j);
    j = next;
  }
}

/* Without a batching thread (--batch_thread 0): the loop runs the queued requests after each
 * round of I/O callbacks (a uv_check handle), merging those that arrived in that round. */
static void on_check(uv_check_t *h) {
  (void)h;
  static job **batch;
  static loom_status *st;
  if (!S.qhead) return;
  if (!batch) batch = calloc((size_t)S.max_batch + 1, sizeof *batch);
  if (!st) st = loom_status_new();
  if (!batch || !st) return;
  pthread_mutex_lock(&S.mu);
  while (S.qhead) {
    int n = take_batch(batch, 0);
    pthread_mutex_unlock(&S.mu);
    run_batch(batch, n, st);
    double t = now_us();
    for (int k = 0; k < n; k++) {
      conn *c = batch[k]->conn;
      serve_series_observe(batch[k]->series, batch[k]->status, (t - batch[k]->t_start) / 1e6);
      send_reply(c, batch[k]->status, &batch[k]->out, !c->keep);
      job_free(batch[k]);
    }
    pthread_mutex_lock(&S.mu);
  }
  pthread_mutex_unlock(&S.mu);
}

/* ------------------------------------------------------------ routing */
static version *pick_version(model *m, int64_t want, char *err, size_t cap) {
  for (version *v = m->versions; v; v = v->next)
    if (v->ok && (want < 0 || v->v == want)) return v;
  if (want < 0) snprintf(err, cap, "Servable not found for request: Latest(%s)", m->name);
  else snprintf(err, cap, "Servable not found for request: Specific(%s, %lld)", m->name, (long long)want);
  return NULL;
}

static void status_body(sb *b, model *m, int64_t want) {
  sb_puts(b, "{\n \"model_version_status\": [");
  int first = 1;
  for (version *v = m->versions; v; v = v->next) {
    if (want >= 0 && v->v != want) continue;
    sb_printf(b, "%s\n  {\n   \"version\": \"%lld\",\n   \"state\": \"%s\",\n   \"status\": {\n    \"error_code\": \"%s\",\n"
                 "    \"error_message\": ",
              first ? "" : ",", (long long)v->v, v->ok ? "AVAILABLE" : "END", v->ok ? "OK" : "UNKNOWN");
    sb_json_str(b, v->error ? v->error : "", v->error ? strlen(v->error) : 0);
    sb_puts(b, "\n   }\n  }");
    first = 0;
  }
  sb_puts(b, "\n ]\n}\n");
}

static const char *tf_dtype(loom_dtype d) {
  switch (d) {
  case LOOM_F32: return "DT_FLOAT";
  case LOOM_F64: return "DT_DOUBLE";
  case LOOM_I32: return "DT_INT32";
  case LOOM_I64: return "DT_INT64";
  case LOOM_U8: return "DT_UINT8";
  case LOOM_BOOL: return "DT_BOOL";
  case LOOM_STRING: return "DT_STRING";
  default: return "DT_INVALID";
  }
}
static void tensors_json(sb *b, int n, const tinfo *t) {
  sb_puts(b, "{");
  for (int i = 0; i < n; i++) {
    sb_puts(b, i ? ", " : "");
    sb_json_str(b, t[i].key, strlen(t[i].key));
    sb_printf(b, ": {\"dtype\": \"%s\", \"tensor_shape\": {\"dim\": [", tf_dtype(t[i].dt));
    for (int k = 0; k < t[i].nd; k++) sb_printf(b, "%s{\"size\": \"%lld\", \"name\": \"\"}", k ? ", " : "", (long long)t[i].dims[k]);
    sb_puts(b, "], \"unknown_rank\": false}, \"name\": ");
    char nm[512];
    snprintf(nm, sizeof nm, "%s%s", t[i].name, strchr(t[i].name, ':') ? "" : ":0");
    sb_json_str(b, nm, strlen(nm));
    sb_puts(b, "}");
  }
  sb_puts(b, "}");
}
static void metadata_body(sb *b, model *m, version *v) {
  sb_puts(b, "{\"model_spec\": {\"name\": ");
  sb_json_str(b, m->name, strlen(m->name));
  sb_printf(b, ", \"signature_name\": \"\", \"version\": \"%lld\"}, \"metadata\": {\"signature_def\": {\"signature_def\": {",
            (long long)v->v);
  for (int s = 0; s < v->nsig; s++) {
    const sigdef *sg = &v->sigs[s];
    sb_puts(b, s ? ", " : "");
    sb_json_str(b, sg->name, strlen(sg->name));
    sb_puts(b, ": {\"inputs\": ");
    tensors_json(b, sg->nin, sg->in);
    sb_puts(b, ", \"outputs\": ");
    tensors_json(b, sg->nout, sg->out);
    sb_puts(b, ", \"method_name\": ");
    sb_json_str(b, sg->method, strlen(sg->method));
    sb_puts(b, "}");
  }
  sb_puts(b, "}}}}\n");
}

/* GET /readyz: 200 once every model has a version loaded, else 503 naming what is missing (with
 * --model_base_path alone, a subdirectory without version directories is not a model yet) */
static void ready_reply(conn *c) {
  sb b = {0};
  char why[1024] = "";
  int any = 0;
  for (model *m = S.models; m && !why[0]; m = m->next) {
    version *v = m->versions;
    while (v && !v->ok) v = v->next;
    any |= v != NULL;
    if (v || (!m->versions && !m->configured)) continue; /* a discovered directory without versions: no model */
    if (m->versions)
      snprintf(why, sizeof why, "model %s: no version loaded (version %lld: %s)", m->name,
               (long long)m->versions->v, m->versions->error ? m->versions->error : "not loaded");
    else snprintf(why, sizeof why, "model %s: no version directory under %s", m->name, m->dir);
  }
  if (!any && !why[0]) snprintf(why, sizeof why, "no model version under --model_base_path %s", S.base ? S.base : "");
  if (why[0]) {
    sb_puts(&b, "{\"ready\": false, \"error\": ");
    sb_json_str(&b, why, strlen(why));
    sb_puts(&b, "}\n");
  } else {
    sb_puts(&b, "{\"ready\": true}\n");
  }
  send_reply(c, why[0] ? 503 : 200, &b, !c->keep);
}

/* the routes outside /v1/models: 1 when path is one of them (and answered) */
static int handle_static(conn *c, int method, const char *url) {
  size_t n = strcspn(url, "?");
  int health = n == 8 && !memcmp(url, "/healthz", 8), ready = n == 7 && !memcmp(url, "/readyz", 7);
  int metrics = n == 30 && !memcmp(url, "/monitoring/prometheus/metrics", 30);
  if (!health && !ready && !metrics) return 0;
  if (method != HTTP_GET) {
    char err[256];
    snprintf(err, sizeof err, "Malformed request: %s %.*s (use GET)", llhttp_method_name(method), (int)n, url);
    send_error(c, 405, err, !c->keep);
    return 1;
  }
  sb b = {0};
  if (ready) {
    ready_reply(c);
  } else if (health) {
    sb_puts(&b, "{\"status\": \"ok\"}\n");
    send_reply(c, 200, &b, !c->keep);
  } else {
    serve_metrics_write(&b);
    /* the batching counters are the workers' (S.mu); the versions' states the loop's */
    pthread_mutex_lock(&S.mu);
    long nreq = S.nreq, nbatch = S.nbatch;
    pthread_mutex_unlock(&S.mu);
    sb_printf(&b,
              "# HELP loom_serve_batches_total Batches run by the predictors (requests merged into one run).\n"
              "# TYPE loom_serve_batches_total counter\nloom_serve_batches_total %ld\n"
              "# HELP loom_serve_batched_requests_total Requests run in those batches.\n"
              "# TYPE loom_serve_batched_requests_total counter\nloom_serve_batched_requests_total %ld\n",
              nbatch, nreq);
    sb_puts(&b, "# HELP loom_serve_model_version_available 1 when a version is loaded and serving, 0 when it "
                "failed to load.\n# TYPE loom_serve_model_version_available gauge\n");
    for (model *m = S.models; m; m = m->next)
      for (version *v = m->versions; v; v = v->next) {
        sb_puts(&b, "loom_serve_model_version_available{model_name=\"");
        serve_metrics_label(&b, m->name);
        sb_printf(&b, "\",version=\"%lld\"} %d\n", (long long)v->v, v->ok);
      }
    send_reply_as(c, 200, &b, !c->keep, "text/plain; version=0.0.4; charset=utf-8");
  }
  return 1;
}

static void handle(conn *c) {
  char err[1024];
  int method = llhttp_get_method(&c->parser);
  char *url = c->url ? c->url : "";
  char *name = NULL, verb[32] = "";
  int64_t want = -1;
  int meta = 0;
  double t_start = now_us();
  if (handle_static(c, method, url)) return;
  snprintf(err, sizeof err, "Malformed request: %s %s", llhttp_method_name(method), url);
  if (serve_route(url, &name, &want, &meta, verb)) {
    send_error(c, 404, err, !c->keep);
    return;
  }
  model *m = find_model(name);
  if (!m || !m->versions) {
    if (want >= 0) snprintf(err, sizeof err, "Servable not found for request: Specific(%s, %lld)", name, (long long)want);
    else snprintf(err, sizeof err, "Servable not found for request: Latest(%s)", name);
    send_error(c, 404, err, !c->keep);
    return;
  }
  sb b = {0};
  if (!verb[0]) {
    if (method != HTTP_GET) {
      snprintf(err, sizeof err, "Malformed request: %s %s (use GET)", llhttp_method_name(method), c->url);
      send_error(c, 405, err, !c->keep);
      return;
    }
    if (meta) {
      version *v = pick_version(m, want, err, sizeof err);
      if (!v) return send_error(c, 404, err, !c->keep);
      metadata_body(&b, m, v);
    } else {
      int any = 0;
      for (version *v = m->versions; v; v = v->next) any |= want < 0 || v->v == want;
      if (!any) {
        snprintf(err, sizeof err, "Could not find version %lld of model %s", (long long)want, name);
        return send_error(c, 404, err, !c->keep);
      }
      status_body(&b, m, want);
    }
    send_reply(c, 200, &b, !c->keep);
    return;
  }
  int api = !strcmp(verb, "classify") ? API_CLASSIFY : !strcmp(verb, "regress") ? API_REGRESS : API_PREDICT;
  if (method != HTTP_POST) {
    snprintf(err, sizeof err, "Malformed request: %s %s (use POST)", llhttp_method_name(method), c->url);
    serve_series_observe(serve_series_get(m->name, -1, api), 405, (now_us() - t_start) / 1e6);
    return send_error(c, 405, err, !c->keep);
  }
  version *v = pick_version(m, want, err, sizeof err);
  if (!v) {
    serve_series_observe(serve_series_get(m->name, -1, api), 404, (now_us() - t_start) / 1e6);
    return send_error(c, 404, err, !c->keep);
  }
  if (!v->stats[api]) v->stats[api] = serve_series_get(m->name, v->v, api);
  job *j = calloc(1, sizeof *j);
  if (!j) return send_error(c, 500, "out of memory", 1);
  j->conn = c;
  j->ver = v;
  j->series = v->stats[api];
  j->t_start = t_start;
  atomic_fetch_add(&v->refs, 1);
  j->kind = api == API_CLASSIFY ? K_CLASSIFY : api == API_REGRESS ? K_REGRESS : K_PREDICT_ROW;
  int status = serve_decode(j, c->body.p ? c->body.p : "", c->body.n, err, sizeof err);
  if (status) {
    serve_series_observe(j->series, status, (now_us() - t_start) / 1e6);
    send_error(c, status, err, !c->keep);
    job_free(j);
    return;
  }
  long long rows = j->rows > 0 ? j->rows : 1;
  j->t_enq = now_us();
  pthread_mutex_lock(&S.mu);
  if (S.max_queued_rows > 0 && S.qrows > 0 && S.qrows + rows > S.max_queued_rows) {
    pthread_mutex_unlock(&S.mu);
    snprintf(err, sizeof err,
             "The batching queue is full: %lld rows wait, the limit is %lld (max_enqueued_batches x max_batch_size); "
             "try again later",
             S.qrows, S.max_queued_rows);
    serve_series_observe(j->series, 503, (now_us() - t_start) / 1e6);
    send_error(c, 503, err, !c->keep);
    job_free(j);
    return;
  }
  S.qrows += rows;
  c->busy = 1;
  if (S.qtail) S.qtail->next = j;
  else S.qhead = j;
  S.qtail = j;
  if (S.batch_thread) pthread_cond_signal(&S.cv);
  pthread_mutex_unlock(&S.mu);
}

/* ------------------------------------------------------------ HTTP parsing */
static int on_begin(llhttp_t *p) {
  conn *c = p->data;
  c->url_n = 0;
  c->body.n = 0;
  c->too_large = 0;
  return 0;
}
static int on_url(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (c->url_n + n > 8192) return -1;
  char *u = realloc(c->url, c->url_n + n + 1);
  if (!u) return -1;
  memcpy(u + c->url_n, at, n);
  c->url = u;
  c->url_n += n;
  u[c->url_n] = 0;
  return 0;
}
static int on_headers(llhttp_t *p) {
  conn *c = p->data;
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > S.max_body) c->too_large = 1;
  return c->too_large ? HPE_PAUSED : 0;
}
static int on_body(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (c->body.n + n > S.max_body) {
    c->too_large = 1;
    return -1;
  }
  sb_put(&c->body, at, n);
  return c->body.oom ? -1 : 0;
}
static int on_complete(llhttp_t *p) {
  conn *c = p->data;
  c->busy = 1; /* the reply resumes parsing */
  return HPE_PAUSED;
}

static void feed(conn *c, const char *data, size_t n) {
  llhttp_errno_t e = llhttp_execute(&c->parser, data, n);
  if (e == HPE_OK) return;
  if (e == HPE_PAUSED && !c->too_large) {
    const char *pos = llhttp_get_error_pos(&c->parser);
    size_t used = pos ? (size_t)(pos - data) : n;
    if (used < n) {
      char *l = malloc(n - used);
      if (l) memcpy(l, data + used, n - used);
      free(c->left);
      c->left = l;
      c->left_n = l ? n - used : 0;
    }
    /* reading goes on while the request runs (bytes that come meanwhile are kept in c->left by
     * on_read): stopping and restarting it would cost two epoll_ctl calls per request */
    c->keep = llhttp_should_keep_alive(&c->parser);
    handle(c);
    return;
  }
  c->busy = 1;
  uv_read_stop((uv_stream_t *)&c->h);
  c->reading = 0;
  if (c->too_large) {
    char msg[256];
    snprintf(msg, sizeof msg, "Request body too large: the limit is %zu bytes (--max_body_bytes)", S.max_body);
    send_error(c, 413, msg, 1);
  } else {
    char msg[256];
    snprintf(msg, sizeof msg, "Malformed HTTP request: %s", llhttp_get_error_reason(&c->parser));
    send_error(c, 400, msg, 1);
  }
}

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b) {
  (void)h;
  static __thread char buf[65536];
  (void)sz;
  *b = uv_buf_init(buf, sizeof buf);
}
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  conn *c = s->data;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n <= 0) return;
  if (c->busy) { /* a pipelined request while one runs: kept for resume_conn */
    char *l = realloc(c->left, c->left_n + (size_t)n);
    if (!l) {
      conn_close(c);
      return;
    }
    memcpy(l + c->left_n, b->base, (size_t)n);
    c->left = l;
    c->left_n += (size_t)n;
    if (c->left_n > S.max_body + 65536) { /* enough queued: wait for the reply */
      uv_read_stop(s);
      c->reading = 0;
    }
    return;
  }
  feed(c, b->base, (size_t)n);
}
static void resume_conn(conn *c) {
  if (c->closing) return;
  if (S.stopping) {
    conn_close(c);
    return;
  }
  llhttp_resume(&c->parser);
  if (c->left) {
    char *l = c->left;
    size_t n = c->left_n;
    c->left = NULL;
    c->left_n = 0;
    feed(c, l, n);
    free(l);
    if (c->busy || c->closing) return;
  }
  if (!c->reading) {
    uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
    c->reading = 1;
  }
}

static void on_conn(uv_stream_t *srv, int status) {
  if (status < 0) return;
  conn *c = calloc(1, sizeof *c);
  if (!c) return;
  uv_tcp_init(S.loop, &c->h);
  c->h.data = c;
  S.nconns++;
  if (uv_accept(srv, (uv_stream_t *)&c->h)) {
    uv_close((uv_handle_t *)&c->h, conn_closed);
    return;
  }
  uv_tcp_nodelay(&c->h, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &S.hs);
  c->parser.data = c;
  if (S.nconns > S.max_conns || S.stopping) {
    char msg[160];
    snprintf(msg, sizeof msg, "Too many connections: the limit is %d (--max_connections)", S.max_conns);
    c->busy = 1;
    send_error(c, 503, msg, 1);
    return;
  }
  uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
  c->reading = 1;
}

/* ------------------------------------------------------------ shutdown */
static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (h->type == UV_TCP && h != (uv_handle_t *)&S.server) {
    conn *c = h->data;
    if (!c->busy) conn_close(c);
    else c->keep = 0;
  }
}
static void on_signal(uv_signal_t *s, int sig) {
  (void)s;
  if (S.stopping) return;
  fprintf(stderr, "loom-serve: signal %d, shutting down\n", sig);
  S.stopping = 1;
  uv_close((uv_handle_t *)&S.server, NULL);
  uv_timer_stop(&S.poll);
  uv_close((uv_handle_t *)&S.poll, NULL);
  /* finish the queued work, send its replies, close every connection */
  pthread_mutex_lock(&S.mu);
  S.qstop = 1;
  pthread_cond_broadcast(&S.cv);
  pthread_mutex_unlock(&S.mu);
  if (S.batch_thread)
    for (int i = 0; i < S.nworkers; i++) pthread_join(S.workers[i], NULL);
  else on_check(&S.check);
  on_done(&S.done_async);
  uv_close((uv_handle_t *)&S.check, NULL);
  uv_walk(S.loop, close_walk, NULL);
  uv_close((uv_handle_t *)&S.done_async, NULL);
  uv_close((uv_handle_t *)&S.sigterm, NULL);
  uv_close((uv_handle_t *)&S.sigint, NULL);
}

static int given(const serve_flag *flags, const char *name) {
  for (; flags->name; flags++)
    if (!strcmp(flags->name, name)) return flags->given;
  return 0;
}
static int usage_error(const char *msg) {
  fprintf(stderr, "loom-serve: %s\n", msg);
  return 2;
}

int main(int argc, char **argv) {
  const char *base = NULL, *name = NULL, *config = NULL, *bp_file = NULL, *host = "0.0.0.0";
  long long port = 8501, rest_port = 8501, max_batch = 32, timeout_us = 0, max_body = 16777216, max_conns = 1024,
            poll_ms = 1000, poll_s = 1, threads = 1, intra = 0, batch_thread = 0, fast_path = 1;
  int batching = 0;
  serve_flag flags[] = {
      {"model_name", "NAME", "serve --model_base_path as this one model (TF Serving)", FLAG_STR, &name, 0, 0, 0},
      {"model_base_path", "DIR",
       "with --model_name: the model's directory, DIR/<version>/ (TF Serving); alone: a directory of models, "
       "DIR/<model>/<version>/",
       FLAG_STR, &base, 0, 0, 0},
      {"model_config_file", "FILE",
       "TF Serving's ModelServerConfig in text format: model_config_list { config { name: base_path: } ... }",
       FLAG_STR, &config, 0, 0, 0},
      {"rest_api_port", "PORT", "the HTTP port (default 8501; 0 picks a free one, printed)", FLAG_INT, &rest_port, 0,
       65535, 0},
      {"port", "PORT",
       "TF Serving's gRPC port: loom-serve has no gRPC API, so with --rest_api_port it is not opened; "
       "alone it is the HTTP port",
       FLAG_INT, &port, 0, 65535, 0},
      {"host", "ADDR", "the address to listen on (default 0.0.0.0; IPv6 too)", FLAG_STR, &host, 0, 0, 0},
      {"enable_batching", "", "TF Serving's batching: batching threads wait up to batch_timeout_micros for rows",
       FLAG_BOOL, &batching, 0, 0, 0},
      {"batching_parameters_file", "FILE",
       "TF Serving's BatchingParameters in text format (max_batch_size, batch_timeout_micros, "
       "num_batch_threads, max_enqueued_batches); needs --enable_batching",
       FLAG_STR, &bp_file, 0, 0, 0},
      {"max_batch_size", "N", "most rows run as one batch (default 32; 1000 with --enable_batching)", FLAG_INT,
       &max_batch, 1, 1000000, 0},
      {"batch_timeout_micros", "US", "wait up to US for more rows (default 0; > 0 implies --batch_thread 1)",
       FLAG_INT, &timeout_us, 0, 3600000000LL, 0},
      {"max_body_bytes", "N", "largest request body (default 16777216; larger: 413)", FLAG_INT, &max_body, 1,
       (long long)1 << 40, 0},
      {"max_connections", "N", "open connections (default 1024; more: 503)", FLAG_INT, &max_conns, 1, 1000000, 0},
      {"poll_ms", "MS", "poll the model directories every MS (default 1000)", FLAG_INT, &poll_ms, 10, 86400000, 0},
      {"file_system_poll_wait_seconds", "S", "the same in seconds (TF Serving); 0 = scan once at startup", FLAG_INT,
       &poll_s, 0, 86400, 0},
      {"threads", "N", "threads per predictor (default 1; 0 = cores)", FLAG_INT, &threads, 0, 1024, 0},
      {"tensorflow_intra_op_parallelism", "N", "the same (TF Serving's name)", FLAG_INT, &intra, 0, 1024, 0},
      {"batch_thread", "0|1", "1: run the predictors on a batching thread (default 0: on the loop)", FLAG_INT,
       &batch_thread, 0, 1, 0},
      {"json_fast_path", "1|0", "0: decode every request with cJSON (default 1: a scanner for numeric rows)",
       FLAG_INT, &fast_path, 0, 1, 0},
      {NULL, NULL, NULL, 0, NULL, 0, 0, 0}};
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: loom-serve --model_name NAME --model_base_path DIR [flags]\n"
             "       loom-serve --model_config_file FILE [flags]\n"
             "       loom-serve --model_base_path DIR [flags]   (every DIR/<model>/ is a model)\n"
             "TF Serving's REST API over loom exports (docs/serving.md). Flags (--name=value or --name value):\n");
      serve_print_flags(stdout, flags);
      printf("Routes: GET /v1/models/NAME[/versions/N][/metadata], POST /v1/models/NAME[/versions/N]:predict|"
             ":classify|:regress,\n        GET /healthz, GET /readyz, GET /monitoring/prometheus/metrics\n");
      return 0;
    }
  char err[1024];
  if (serve_parse_flags(argc, argv, flags, err, sizeof err)) return usage_error(err);
  if (config && (base || name))
    return usage_error("--model_config_file names the models: it cannot be combined with --model_base_path or "
                       "--model_name");
  if (!config && !base)
    return usage_error("--model_base_path DIR (with --model_name NAME) or --model_config_file FILE is required "
                       "(see --help)");
  if (name && !name[0]) return usage_error("--model_name is empty");
  if (bp_file && !batching)
    return usage_error("--batching_parameters_file is given but batching is off: add --enable_batching");
  struct stat fst;
  if (config) {
    serve_model_cfg *mc;
    int n;
    if (serve_parse_model_config(config, &mc, &n, err, sizeof err)) return usage_error(err);
    for (int i = 0; i < n; i++)
      if (!add_model(mc[i].name, mc[i].base_path, 1)) return usage_error("out of memory");
    serve_models_free(mc, n);
  } else if (name) {
    if (!add_model(name, base, 1)) return usage_error("out of memory");
  } else {
    if (stat(base, &fst) || !S_ISDIR(fst.st_mode)) {
      snprintf(err, sizeof err, "--model_base_path %s is not a directory", base);
      return usage_error(err);
    }
    S.base = base;
  }
  for (model *m = S.models; m; m = m->next)
    if (stat(m->dir, &fst) || !S_ISDIR(fst.st_mode))
      fprintf(stderr, "loom-serve: model %s: %s is not a directory (yet): not ready until a version appears\n",
              m->name, m->dir);
  /* batching: TF Serving's BatchingParameters defaults, the file's values, then the flags */
  long long nworkers = 1, max_enq = 0;
  if (batching) {
    serve_batching bp = {{1000, 0, 0, 10}, {0, 0, 0, 0}};
    if (bp_file && serve_parse_batching(bp_file, &bp, err, sizeof err)) return usage_error(err);
    if (!given(flags, "max_batch_size")) max_batch = bp.v[BP_MAX_BATCH_SIZE];
    if (!given(flags, "batch_timeout_micros")) timeout_us = bp.v[BP_BATCH_TIMEOUT_MICROS];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    nworkers = bp.set[BP_NUM_BATCH_THREADS] ? bp.v[BP_NUM_BATCH_THREADS] : cores > 0 ? cores : 1;
    max_enq = bp.v[BP_MAX_ENQUEUED_BATCHES];
    batch_thread = 1;
  }
  if (given(flags, "rest_api_port") && given(flags, "port"))
    fprintf(stderr, "loom-serve: --port=%lld is TF Serving's gRPC port; loom-serve has no gRPC API and does not open "
                    "it (HTTP on --rest_api_port=%lld)\n", port, rest_port);
  S.host = host;
  S.port = (int)(given(flags, "rest_api_port") || !given(flags, "port") ? rest_port : port);
  S.max_batch = (int)max_batch;
  S.batch_timeout_us = (long)timeout_us;
  S.max_body = (size_t)max_body;
  S.max_conns = (int)max_conns;
  S.poll_ms = given(flags, "file_system_poll_wait_seconds") && !given(flags, "poll_ms") ? (int)(poll_s * 1000) : (int)poll_ms;
  S.threads = (int)(given(flags, "tensorflow_intra_op_parallelism") && !given(flags, "threads") ? intra : threads);
  S.nworkers = (int)nworkers;
  S.max_queued_rows = max_enq * max_batch;
  serve_fast_path = fast_path != 0; /* 0: cJSON for every request */
  /* a batch timeout needs a thread that can wait; without one the loop runs the batches */
  S.batch_thread = given(flags, "batch_thread") ? batch_thread != 0 : batching || S.batch_timeout_us > 0;
  if (!S.batch_thread) S.nworkers = 0;
  signal(SIGPIPE, SIG_IGN);
  S.loop = uv_default_loop();
  pthread_mutex_init(&S.mu, NULL);
  pthread_cond_init(&S.cv, NULL);
  llhttp_settings_init(&S.hs);
  S.hs.on_message_begin = on_begin;
  S.hs.on_url = on_url;
  S.hs.on_headers_complete = on_headers;
  S.hs.on_body = on_body;
  S.hs.on_message_complete = on_complete;

  scan_base();
  struct sockaddr_storage addr;
  int rc = strchr(S.host, ':') ? uv_ip6_addr(S.host, S.port, (struct sockaddr_in6 *)&addr)
                               : uv_ip4_addr(S.host, S.port, (struct sockaddr_in *)&addr);
  if (rc) {
    fprintf(stderr, "loom-serve: bad --host %s: %s\n", S.host, uv_strerror(rc));
    return 2;
  }
  uv_tcp_init(S.loop, &S.server);
  if ((rc = uv_tcp_bind(&S.server, (struct sockaddr *)&addr, 0)) ||
      (rc = uv_listen((uv_stream_t *)&S.server, 1024, on_conn))) {
    fprintf(stderr, "loom-serve: cannot listen on %s:%d: %s\n", S.host, S.port, uv_strerror(rc));
    return 1;
  }
  struct sockaddr_storage got;
  int glen = sizeof got;
  uv_tcp_getsockname(&S.server, (struct sockaddr *)&got, &glen);
  int bound = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                              : ((struct sockaddr_in *)&got)->sin_port);
  uv_async_init(S.loop, &S.done_async, on_done);
  uv_timer_init(S.loop, &S.poll);
  if (S.poll_ms > 0) uv_timer_start(&S.poll, on_poll, (uint64_t)S.poll_ms, (uint64_t)S.poll_ms);
  uv_signal_init(S.loop, &S.sigterm);
  uv_signal_start(&S.sigterm, on_signal, SIGTERM);
  uv_signal_init(S.loop, &S.sigint);
  uv_signal_start(&S.sigint, on_signal, SIGINT);
  uv_check_init(S.loop, &S.check);
  if (!S.batch_thread) uv_check_start(&S.check, on_check); /* else the batching thread takes the queue */
  S.workers = calloc((size_t)S.nworkers + 1, sizeof *S.workers);
  for (int i = 0; i < S.nworkers && S.workers; i++) pthread_create(&S.workers[i], NULL, worker_main, NULL);
  printf("loom-serve: listening on %s:%d\n", S.host, bound);
  fflush(stdout);
  uv_run(S.loop, UV_RUN_DEFAULT);
  uv_loop_close(S.loop);
  for (model *m = S.models, *mn; m; m = mn) {
    mn = m->next;
    for (version *v = m->versions, *vn; v; v = vn) {
      vn = v->next;
      version_unref(v);
    }
    free(m->name);
    free(m->dir);
    free(m);
  }
  fprintf(stderr, "loom-serve: stopped (%ld predict/classify/regress requests in %ld batches, largest %ld)\n", S.nreq,
          S.nbatch, S.maxbatch);
  return 0;
}
