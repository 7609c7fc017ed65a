/* loom-serve: TF Serving's REST API for loom exports (docs/serving.md).
 * serve.c: HTTP (libuv + llhttp), routing, model directory polling, batching.
 * serve_json.c: request decoding (row/columnar/examples) and response encoding. */
#ifndef LOOM_SERVE_H
#define LOOM_SERVE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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
  struct version *next;
} version;

enum { K_PREDICT_ROW, K_PREDICT_COL, K_CLASSIFY, K_REGRESS };

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
void job_free_inputs(job *j);
#endif
