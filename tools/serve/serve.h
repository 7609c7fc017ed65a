/* loom-serve: TF Serving's REST API for loom exports (docs/serving.md).
 * serve.c: flags, HTTP (libuv + llhttp), routing, model directory polling, batching.
 * serve_json.c: request decoding (row/columnar/examples) and response encoding.
 * serve_flags.c: the command line.
 * serve_config.c: TF Serving's text-format model config and batching parameters files.
 * serve_metrics.c: request counters and latency histograms, Prometheus text format. */
#ifndef LOOM_SERVE_H
#define LOOM_SERVE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "loom/loom.h"

typedef struct sb {
  char *p;
  size_t n, cap;
  int oom;
} sb;
void sb_put(sb *b, const char *s, size_t n);
void sb_puts(sb *b, const char *s);
void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_json_str(sb *b, const char *s, size_t n);

typedef struct tinfo {
  char *key, *name;
  loom_dtype dt;
  int nd;
  int64_t dims[8];
} tinfo;

typedef struct sigdef {
  char *name, *method;
  int nin, nout;
  tinfo *in, *out;
  int batchable; /* every input's first dim is -1 */
} sigdef;

struct serve_series;

typedef struct version {
  int64_t v;
  char *dir;
  loom_predictor *p;
  int nsig;
  sigdef *sigs;
  atomic_int refs;
  int ok;        /* loaded and serving */
  char *error;   /* load error (ok == 0) */
  uint64_t stamp; /* files' mtimes/sizes at the last load attempt */
  int seen;      /* scan mark */
  struct serve_series *stats[3]; /* per API (serve_api), made on first use; they outlive the version */
  struct version *next;
} version;

enum { K_PREDICT_ROW, K_PREDICT_COL, K_CLASSIFY, K_REGRESS };
enum serve_api { API_PREDICT, API_CLASSIFY, API_REGRESS };

typedef struct job {
  void *conn;
  version *ver;
  const sigdef *sig;
  int kind;
  int64_t rows;
  loom_tensor **in; /* sig->nin tensors with a leading batch dim of rows (row/examples) */
  int status;
  sb out;
  double t_enq;
  double t_start;              /* when its request was complete (latency metric) */
  struct serve_series *series; /* where its reply is counted */
  struct job *next;
} job;

/* serve_json.c: 1 (default): row-format requests for one numeric input take a hand-written
 * scanner; 0: every request goes through cJSON (tests compare the two) */
extern int serve_fast_path;
/* serve_json.c: fills j->in from the parsed body, or returns an HTTP status with *err set. */
int serve_decode(job *j, const char *body, size_t len, char *err, size_t errcap);
/* formats the body of j from outputs (rows [off, off + j->rows) of the batched outputs) */
void serve_encode(job *j, loom_tensor *const *outs, int64_t off, int64_t total_rows);
void serve_error_body(sb *b, const char *msg);
/* splits url (cut in place) /v1/models/{name}[/versions/{v}][/metadata | :predict | :classify |
 * :regress][?query]: *want = v or -1, *meta, verb (empty for status/metadata); -1 when malformed */
int serve_route(char *url, char **name, int64_t *want, int *meta, char verb[32]);
const sigdef *serve_find_sig(const version *v, const char *name);
/* 1 (msg set) when a columnar job's inputs with a batch dimension (the signature's first dim -1;
 * a ragged pair "<k>", "<k>/row_splits" aside) have different numbers of rows */
int serve_col_lengths(const job *j, char *msg, size_t cap);
void job_free_inputs(job *j);

/* serve_flags.c: a table ended by a NULL name. dst: const char ** (FLAG_STR), long long *
 * (FLAG_INT, within [lo, hi]) or int * (FLAG_BOOL); given is set when the flag was on the line. */
enum { FLAG_STR, FLAG_INT, FLAG_BOOL };
typedef struct serve_flag {
  const char *name, *arg, *help;
  int type;
  void *dst;
  long long lo, hi;
  int given;
} serve_flag;
/* 0, or -1 with err naming the flag (an unknown one, a missing or malformed value) */
int serve_parse_flags(int argc, char **argv, serve_flag *flags, char *err, size_t cap);
void serve_print_flags(FILE *out, const serve_flag *flags);

/* serve_config.c: parse TF Serving's text-format files; -1 with err naming the file, line and field */
typedef struct serve_model_cfg {
  char *name, *base_path;
} serve_model_cfg;
int serve_parse_model_config(const char *path, serve_model_cfg **out, int *n, char *err, size_t cap);
void serve_models_free(serve_model_cfg *m, int n);
enum { BP_MAX_BATCH_SIZE, BP_BATCH_TIMEOUT_MICROS, BP_NUM_BATCH_THREADS, BP_MAX_ENQUEUED_BATCHES };
typedef struct serve_batching {
  long long v[4]; /* indexed by BP_*; set[k]: given in the file */
  int set[4];
} serve_batching;
int serve_parse_batching(const char *path, serve_batching *b, char *err, size_t cap);

/* serve_metrics.c (one thread: the loop's): a series counts the replies to one model, version
 * (-1: none resolved) and API by HTTP status, with their latencies. */
typedef struct serve_series serve_series;
serve_series *serve_series_get(const char *model, int64_t version, int api);
void serve_series_observe(serve_series *s, int status, double seconds);
void serve_metrics_http(int status); /* every HTTP reply, by status */
/* the exposition text of the counters and histograms (families with HELP and TYPE lines) */
void serve_metrics_write(sb *b);
void serve_metrics_label(sb *b, const char *value); /* a label value, with \ " and newline escaped */
#endif
