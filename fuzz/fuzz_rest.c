/* The REST server's request handling (tools/serve/, docs/serving.md): raw bytes
 * from a client, as loom-serve's loop gets them, through the same steps without the sockets:
 * llhttp with the server's limits (URL <= 8 KiB, body <= 64 KiB here), serve_route on the
 * URL, serve_decode of the body (predict row / columnar, classify, regress) against a fixed
 * set of signatures (one f32 [-1,4] input; two inputs f64 [-1,2,3] and i64 [-1]; a string
 * input [-1] with classify/regress method names), then serve_encode of the decoded inputs as
 * if they were the outputs (and, for columnar requests, the check of the inputs' lengths that names
 * them when a run fails). Several pipelined requests in one input are handled in turn.
 * Beyond no crash/leak/UB, one property: when the hand-written fast path accepts a
 * row-format request, the cJSON path must accept it too and give bitwise the same tensor. */
#include <llhttp.h>
#include "fuzz_util.h" /* before serve.h: its fz_rm has a parameter named sb */
#include "../tools/serve/serve_json.c"

static tinfo T_X[1] = {{"x", "x", LOOM_F32, 2, {-1, 4}}};
static tinfo T_AB[2] = {{"a", "a", LOOM_F64, 3, {-1, 2, 3}}, {"b", "b", LOOM_I64, 1, {-1}}};
static tinfo T_S[1] = {{"examples", "input_example_tensor", LOOM_STRING, 1, {-1}}};
static tinfo T_CLS[2] = {{"classes", "classes", LOOM_STRING, 2, {-1, 2}}, {"scores", "scores", LOOM_F32, 2, {-1, 2}}};
static tinfo T_REG[1] = {{"outputs", "outputs", LOOM_F32, 2, {-1, 1}}};
static sigdef SIGS[5] = {
    {"serving_default", "tensorflow/serving/predict", 1, 1, T_X, T_X, 1},
    {"two", "tensorflow/serving/predict", 2, 2, T_AB, T_AB, 1},
    {"strings", "tensorflow/serving/predict", 1, 1, T_S, T_S, 1},
    {"classification", "tensorflow/serving/classify", 1, 2, T_S, T_CLS, 1},
    {"regression", "tensorflow/serving/regress", 1, 1, T_S, T_REG, 1},
};
static version VER = {.v = 1, .nsig = 5, .sigs = SIGS, .ok = 1};

typedef struct req {
  char url[8193];
  size_t url_n;
  sb body;
  int too_large, done;
} req;

static int on_begin(llhttp_t *p) {
  req *r = p->data;
  r->url_n = 0;
  r->url[0] = 0;
  r->body.n = 0;
  r->too_large = 0;
  return 0;
}
static int on_url(llhttp_t *p, const char *at, size_t n) {
  req *r = p->data;
  if (r->url_n + n > 8192) return -1;
  memcpy(r->url + r->url_n, at, n);
  r->url_n += n;
  r->url[r->url_n] = 0;
  return 0;
}
static int on_headers(llhttp_t *p) {
  req *r = p->data;
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 65536) r->too_large = 1;
  return r->too_large ? HPE_PAUSED : 0;
}
static int on_body(llhttp_t *p, const char *at, size_t n) {
  req *r = p->data;
  if (r->body.n + n > 65536) return r->too_large = 1, -1;
  sb_put(&r->body, at, n);
  return r->body.oom ? -1 : 0;
}
static int on_complete(llhttp_t *p) {
  ((req *)p->data)->done = 1;
  return HPE_PAUSED;
}

/* the fast path and cJSON agree on what the fast path accepts */
static void check_fast(const char *body, size_t n) {
  job a = {.ver = &VER, .kind = K_PREDICT_ROW}, b = {.ver = &VER, .kind = K_PREDICT_ROW};
  char err[512];
  if (!fast_row(&a, body, n)) return;
  serve_fast_path = 0;
  int rc = serve_decode(&b, body, n, err, sizeof err);
  serve_fast_path = 1;
  if (rc || a.sig != b.sig || a.rows != b.rows || loom_tensor_nbytes(a.in[0]) != loom_tensor_nbytes(b.in[0]) ||
      loom_tensor_dtype(a.in[0]) != loom_tensor_dtype(b.in[0]) ||
      memcmp(loom_tensor_data(a.in[0]), loom_tensor_data(b.in[0]), loom_tensor_nbytes(a.in[0]))) {
    fprintf(stderr, "fuzz_rest: the fast path accepted a request the cJSON path %s: %.*s\n",
            rc ? "rejects" : "decodes differently", (int)(n < 400 ? n : 400), body);
    abort();
  }
  job_free_inputs(&a);
  job_free_inputs(&b);
}

static void handle(req *r) {
  char *name = NULL, verb[32];
  int64_t want;
  int meta;
  if (serve_route(r->url, &name, &want, &meta, verb) || !verb[0]) return;
  job j = {.ver = &VER};
  j.kind = !strcmp(verb, "classify") ? K_CLASSIFY : !strcmp(verb, "regress") ? K_REGRESS : K_PREDICT_ROW;
  const char *body = r->body.p ? r->body.p : "";
  if (j.kind == K_PREDICT_ROW) check_fast(body, r->body.n);
  char err[512];
  int status = serve_decode(&j, body, r->body.n, err, sizeof err);
  if (status == 0) {
    /* the message a failed columnar run gets: only columnar jobs have one */
    char msg[1024];
    if (serve_col_lengths(&j, msg, sizeof msg) && j.kind != K_PREDICT_COL) {
      fprintf(stderr, "fuzz_rest: a %d job reports columns of different lengths: %s\n", j.kind, msg);
      abort();
    }
    /* the decoded inputs as outputs: encode rows [0, rows) of a batch of rows */
    loom_tensor *outs[2] = {j.in[0], j.sig->nin > 1 ? j.in[1] : j.in[0]};
    sigdef as_out = *j.sig;
    as_out.nout = as_out.nin;
    as_out.out = as_out.in;
    if (j.kind == K_CLASSIFY || j.kind == K_REGRESS) as_out = *j.sig; /* its classes/scores/outputs keys */
    const sigdef *keep = j.sig;
    j.sig = &as_out;
    int64_t rows = j.rows > 0 ? j.rows : (loom_tensor_ndim(outs[0]) ? loom_tensor_dim(outs[0], 0) : 1);
    if (j.kind == K_CLASSIFY || j.kind == K_REGRESS) {
      /* outputs of the right shape: [rows, 2] strings and floats, [rows, 1] floats */
      int64_t d2[2] = {rows, 2}, d1[2] = {rows, 1};
      loom_tensor *c = loom_tensor_new(LOOM_STRING, 2, d2, NULL), *s = loom_tensor_new(LOOM_F32, 2, d2, NULL),
                  *o = loom_tensor_new(LOOM_F32, 2, d1, NULL);
      for (int64_t i = 0; c && i < 2 * rows; i++) loom_tensor_set_string(c, i, i % 2 ? "1" : "0", 1, NULL);
      loom_tensor *co[2] = {c, s};
      if (c && s && o) serve_encode(&j, j.kind == K_CLASSIFY ? co : &o, 0, rows);
      loom_tensor_free(c);
      loom_tensor_free(s);
      loom_tensor_free(o);
    } else {
      serve_encode(&j, outs, 0, rows);
    }
    j.sig = keep;
    if (j.out.n && !j.out.oom) {
      cJSON *back = cJSON_ParseWithLength(j.out.p, j.out.n);
      /* NaN and +-Infinity are written as TF Serving writes them (not strict JSON) */
      int nonfinite = strstr(j.out.p, "NaN") || strstr(j.out.p, "Infinity");
      if (!back && j.status == 200 && !nonfinite) {
        fprintf(stderr, "fuzz_rest: the reply is not JSON: %.*s\n", (int)(j.out.n < 400 ? j.out.n : 400), j.out.p);
        abort();
      }
      cJSON_Delete(back);
    }
  } else {
    serve_error_body(&j.out, err);
  }
  job_free_inputs(&j);
  free(j.out.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llhttp_settings_t hs;
  llhttp_settings_init(&hs);
  hs.on_message_begin = on_begin;
  hs.on_url = on_url;
  hs.on_headers_complete = on_headers;
  hs.on_body = on_body;
  hs.on_message_complete = on_complete;
  llhttp_t p;
  llhttp_init(&p, HTTP_REQUEST, &hs);
  req *r = calloc(1, sizeof *r);
  if (!r) return 0;
  p.data = r;
  const char *at = (const char *)data, *end = at + size;
  for (int msgs = 0; at < end && msgs < 16; msgs++) {
    r->done = 0;
    llhttp_errno_t e = llhttp_execute(&p, at, (size_t)(end - at));
    if (e != HPE_PAUSED || r->too_large || !r->done) break;
    const char *pos = llhttp_get_error_pos(&p);
    handle(r);
    if (!pos || pos <= at || !llhttp_should_keep_alive(&p)) break;
    at = pos;
    llhttp_resume(&p);
  }
  free(r->body.p);
  free(r);
  return 0;
}
