/* test_serve.c - loom-serve (tools/serve/), run as a program on port 0 and
 * queried by real HTTP clients (curl; Python requests when installed): an MLP
 * 4-8-3 exported to <base>/mlp/1; status and metadata in TF Serving's shapes;
 * predictions in the row and columnar formats equal to loom_predictor's; a
 * second signature with two outputs; a version added while the server runs is
 * served; malformed JSON, wrong shapes, unknown model / signature / version,
 * a body over the limit and a connection over the limit get 400/404/413/503
 * with an error naming the problem; :classify and :regress on canned exports; the
 * row-format fast path equal to the cJSON path; SIGTERM exits 0. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "loom/loom.h"
#include "test_util.h"

#ifndef LOOM_SERVE_BIN
#define LOOM_SERVE_BIN "build/loom-serve"
#endif

/* exports an MLP x[-1,4] -> 8 relu -> 3 -> softmax into dir; seed varies the weights.
 * Signatures: serving_default {x} -> {probabilities}; multi {x} -> {logits, probabilities}. */
static void export_mlp(const char *dir, int seed) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, seed);
  int64_t xd[2] = {-1, 4};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.kernel_initializer = loom_init_random_uniform(-1, 1, 10 + seed);
  o.bias_initializer = loom_init_random_uniform(-0.5, 0.5, 20 + seed);
  o.activation = "relu";
  loom_output h = loom_layers_dense(g, x, 8, &o, "dense");
  o.kernel_initializer = loom_init_random_uniform(-1, 1, 30 + seed);
  o.activation = NULL;
  loom_output logits = loom_layers_dense(g, h, 3, &o, "dense_1");
  loom_output probs = loom_softmax(g, logits, "probs");
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK);
  const char *in_keys[1] = {"x"}, *out1[1] = {"probabilities"}, *out2[2] = {"logits", "probabilities"};
  loom_output outs2[2] = {logits, probs};
  loom_signature sigs[2] = {{"serving_default", "tensorflow/serving/predict", 1, in_keys, &x, 1, out1, &probs},
                            {"multi", "tensorflow/serving/predict", 1, in_keys, &x, 2, out2, outs2}};
  cr_assert_eq(loom_export_write(g, s, 2, sigs, dir, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
}

/* loom_predictor's outputs for rows x (n x 4): out[o] gets n x 3 floats */
static void predict_ref(const char *dir, const char *sig, int n, const float *x, int nout, float **out) {
  loom_status *st = loom_status_new();
  loom_predictor_options po = loom_predictor_options_default();
  po.num_threads = 1;
  loom_predictor *p = loom_predictor_load(dir, &po, st);
  cr_assert(p, "%s", loom_status_message(st));
  int64_t d[2] = {n, 4};
  loom_tensor *in = loom_tensor_from_data(LOOM_F32, 2, d, x, st);
  loom_tensor *o[2] = {NULL, NULL};
  cr_assert_eq(loom_predictor_run(p, sig, 1, &in, nout, o, st), LOOM_OK, "%s", loom_status_message(st));
  for (int k = 0; k < nout; k++) {
    out[k] = malloc(sizeof(float) * (size_t)n * 3);
    memcpy(out[k], loom_tensor_data(o[k]), sizeof(float) * (size_t)n * 3);
    loom_tensor_free(o[k]);
  }
  loom_tensor_free(in);
  loom_predictor_free(p);
  loom_status_free(st);
}

typedef struct server {
  pid_t pid;
  int port;
  char base[TU_TMPDIR_CAP];
} server;

static server start_server(const char *extra) {
  server sv;
  tu_tmpdir(sv.base, sizeof sv.base, "serve");
  char d[256];
  snprintf(d, sizeof d, "%s/mlp", sv.base);
  cr_assert_eq(mkdir(d, 0755), 0);
  snprintf(d, sizeof d, "%s/mlp/1", sv.base);
  export_mlp(d, 1);
  int fd[2];
  cr_assert_eq(pipe(fd), 0);
  sv.pid = fork();
  cr_assert(sv.pid >= 0);
  if (sv.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed assertion ends the test process: no orphan server */
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "exec %s --model_base_path %s --host 127.0.0.1 --port 0 --poll_ms 50 --max_body_bytes 4096 %s 2>%s/err.txt",
             LOOM_SERVE_BIN, sv.base, extra ? extra : "", sv.base);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  char line[256] = "";
  cr_assert(fgets(line, sizeof line, f), "loom-serve printed nothing (see %s/err.txt)", sv.base);
  fclose(f);
  const char *c = strrchr(line, ':');
  cr_assert(strstr(line, "listening on") && c, "unexpected first line: %s", line);
  sv.port = atoi(c + 1);
  cr_assert(sv.port > 0, "port 0 was not resolved: %s", line);
  return sv;
}

static void stop_server(server *sv) {
  cr_assert_eq(kill(sv->pid, SIGTERM), 0);
  int s = 0;
  for (int i = 0; i < 500; i++) {
    if (waitpid(sv->pid, &s, WNOHANG) == sv->pid) {
      cr_assert(WIFEXITED(s) && WEXITSTATUS(s) == 0, "loom-serve did not exit 0 on SIGTERM (status %d)", s);
      tu_rmtree(sv->base);
      return;
    }
    usleep(10000);
  }
  kill(sv->pid, SIGKILL);
  cr_assert_fail("loom-serve did not stop within 5 s of SIGTERM");
}

typedef struct reply {
  int status;
  char *body;
} reply;

/* curl: method, path, body (NULL for GET) */
static reply curl(server *sv, const char *path, const char *body) {
  char bf[256], of[256], cmd[1024];
  snprintf(bf, sizeof bf, "%s/req.json", sv->base);
  snprintf(of, sizeof of, "%s/resp.json", sv->base);
  if (body) tu_write_file(bf, body, strlen(body));
  snprintf(cmd, sizeof cmd, "curl -s -S -o %s -w '%%{http_code}' %s%s%s 'http://127.0.0.1:%d%s'", of,
           body ? "-H 'Content-Type: application/json' --data-binary @" : "", body ? bf : "", body ? "" : "",
           sv->port, path);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  char code[32] = "";
  cr_assert(fgets(code, sizeof code, p), "curl printed no status");
  pclose(p);
  reply r = {atoi(code), tu_read_file(of, NULL)};
  cr_assert(r.body, "no body from %s", path);
  return r;
}

static cJSON *parse(reply *r) {
  cJSON *j = cJSON_Parse(r->body);
  cr_assert(j, "reply is not JSON: %s", r->body);
  return j;
}

static void expect_error(server *sv, const char *path, const char *body, int status, const char *needle) {
  reply r = curl(sv, path, body);
  cr_expect_eq(r.status, status, "%s: status %d, want %d (%s)", path, r.status, status, r.body);
  cJSON *j = parse(&r);
  cJSON *e = cJSON_GetObjectItem(j, "error");
  cr_assert(cJSON_IsString(e), "no \"error\" string in %s", r.body);
  cr_expect(strstr(e->valuestring, needle), "error \"%s\" does not name \"%s\"", e->valuestring, needle);
  cJSON_Delete(j);
  free(r.body);
}

static const float X[3][4] = {{0.5f, -1.25f, 2.0f, 0.125f}, {1.0f, 0.0f, -0.5f, 3.0f}, {-2.0f, 0.75f, 0.25f, -1.0f}};

/* checks a JSON [n][3] array against want */
static void expect_rows(const cJSON *a, int n, const float *want) {
  cr_assert(cJSON_IsArray(a) && cJSON_GetArraySize(a) == n);
  for (int r = 0; r < n; r++) {
    const cJSON *row = cJSON_GetArrayItem(a, r);
    cr_assert(cJSON_IsArray(row) && cJSON_GetArraySize(row) == 3);
    for (int k = 0; k < 3; k++) {
      float got = (float)cJSON_GetArrayItem(row, k)->valuedouble;
      cr_expect_eq(got, want[r * 3 + k], "row %d col %d: %.9g != %.9g", r, k, got, want[r * 3 + k]);
    }
  }
}

Test(serve, status_and_metadata) {
  server sv = start_server(NULL);
  reply r = curl(&sv, "/v1/models/mlp", NULL);
  cr_assert_eq(r.status, 200, "%s", r.body);
  cJSON *j = parse(&r);
  cJSON *mv = cJSON_GetObjectItem(j, "model_version_status");
  cr_assert(cJSON_IsArray(mv) && cJSON_GetArraySize(mv) == 1, "%s", r.body);
  cJSON *v0 = cJSON_GetArrayItem(mv, 0);
  cr_expect_str_eq(cJSON_GetObjectItem(v0, "version")->valuestring, "1");
  cr_expect_str_eq(cJSON_GetObjectItem(v0, "state")->valuestring, "AVAILABLE");
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "status"), "error_code")->valuestring, "OK");
  cJSON_Delete(j);
  free(r.body);

  r = curl(&sv, "/v1/models/mlp/metadata", NULL);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model_spec"), "name")->valuestring, "mlp");
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model_spec"), "version")->valuestring, "1");
  cJSON *sd = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "signature_def"),
                                  "signature_def");
  cJSON *def = cJSON_GetObjectItem(sd, "serving_default");
  cr_assert(def, "no serving_default in %s", r.body);
  cr_expect(cJSON_GetObjectItem(sd, "multi"));
  cr_expect_str_eq(cJSON_GetObjectItem(def, "method_name")->valuestring, "tensorflow/serving/predict");
  cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(def, "inputs"), "x");
  cr_assert(x);
  cr_expect_str_eq(cJSON_GetObjectItem(x, "dtype")->valuestring, "DT_FLOAT");
  cJSON *dim = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "tensor_shape"), "dim");
  cr_assert_eq(cJSON_GetArraySize(dim), 2);
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(dim, 0), "size")->valuestring, "-1");
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(dim, 1), "size")->valuestring, "4");
  cJSON *pr = cJSON_GetObjectItem(cJSON_GetObjectItem(def, "outputs"), "probabilities");
  cr_assert(pr);
  cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pr, "tensor_shape"),
                                                                                "dim"), 1), "size")->valuestring, "3");
  cJSON_Delete(j);
  free(r.body);
  stop_server(&sv);
}

Test(serve, predict_row_and_columnar) {
  server sv = start_server(NULL);
  char d1[256];
  snprintf(d1, sizeof d1, "%s/mlp/1", sv.base);
  float *want[2];
  predict_ref(d1, NULL, 3, &X[0][0], 1, want);
  const char *rows = "[[0.5, -1.25, 2.0, 0.125], [1.0, 0.0, -0.5, 3.0], [-2.0, 0.75, 0.25, -1.0]]";
  char body[1024];
  snprintf(body, sizeof body, "{\"instances\": %s}", rows);
  reply r = curl(&sv, "/v1/models/mlp:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  cJSON *j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "predictions"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  /* the same, with named inputs per instance and an explicit version */
  r = curl(&sv, "/v1/models/mlp/versions/1:predict",
           "{\"signature_name\": \"serving_default\", \"instances\": [{\"x\": [0.5, -1.25, 2.0, 0.125]}, "
           "{\"x\": [1.0, 0.0, -0.5, 3.0]}, {\"x\": [-2.0, 0.75, 0.25, -1.0]}]}");
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "predictions"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  /* columnar */
  snprintf(body, sizeof body, "{\"inputs\": {\"x\": %s}}", rows);
  r = curl(&sv, "/v1/models/mlp:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "outputs"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  snprintf(body, sizeof body, "{\"inputs\": %s}", rows);
  r = curl(&sv, "/v1/models/mlp:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "outputs"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  free(want[0]);
  /* two outputs: rows are objects; columns are an object of outputs */
  predict_ref(d1, "multi", 3, &X[0][0], 2, want);
  snprintf(body, sizeof body, "{\"signature_name\": \"multi\", \"instances\": %s}", rows);
  r = curl(&sv, "/v1/models/mlp:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  cJSON *pred = cJSON_GetObjectItem(j, "predictions");
  cr_assert_eq(cJSON_GetArraySize(pred), 3);
  for (int i = 0; i < 3; i++) {
    cJSON *lg = cJSON_GetObjectItem(cJSON_GetArrayItem(pred, i), "logits");
    cJSON *pb = cJSON_GetObjectItem(cJSON_GetArrayItem(pred, i), "probabilities");
    cr_assert(lg && pb, "%s", r.body);
    for (int k = 0; k < 3; k++) {
      cr_expect_eq((float)cJSON_GetArrayItem(lg, k)->valuedouble, want[0][i * 3 + k]);
      cr_expect_eq((float)cJSON_GetArrayItem(pb, k)->valuedouble, want[1][i * 3 + k]);
    }
  }
  cJSON_Delete(j);
  free(r.body);
  snprintf(body, sizeof body, "{\"signature_name\": \"multi\", \"inputs\": %s}", rows);
  r = curl(&sv, "/v1/models/mlp:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  expect_rows(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "outputs"), "logits"), 3, want[0]);
  expect_rows(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "outputs"), "probabilities"), 3, want[1]);
  cJSON_Delete(j);
  free(r.body);
  free(want[0]);
  free(want[1]);
  stop_server(&sv);
}

Test(serve, new_version_is_served) {
  server sv = start_server(NULL);
  char tmp[256], d2[256];
  snprintf(tmp, sizeof tmp, "%s/v2tmp", sv.base);
  snprintf(d2, sizeof d2, "%s/mlp/2", sv.base);
  export_mlp(tmp, 2);
  cr_assert_eq(rename(tmp, d2), 0);
  int seen = 0;
  for (int i = 0; i < 100 && !seen; i++) {
    reply r = curl(&sv, "/v1/models/mlp/versions/2", NULL);
    seen = r.status == 200 && strstr(r.body, "AVAILABLE");
    free(r.body);
    if (!seen) usleep(50000);
  }
  cr_assert(seen, "version 2 not picked up within 5 s");
  float *want[1];
  predict_ref(d2, NULL, 3, &X[0][0], 1, want);
  const char *body =
      "{\"instances\": [[0.5, -1.25, 2.0, 0.125], [1.0, 0.0, -0.5, 3.0], [-2.0, 0.75, 0.25, -1.0]]}";
  reply r = curl(&sv, "/v1/models/mlp:predict", body); /* latest is 2 now */
  cr_assert_eq(r.status, 200, "%s", r.body);
  cJSON *j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "predictions"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  free(want[0]);
  /* version 1 is still served by number, and the status lists both */
  r = curl(&sv, "/v1/models/mlp/versions/1:predict", body);
  cr_expect_eq(r.status, 200, "%s", r.body);
  free(r.body);
  r = curl(&sv, "/v1/models/mlp", NULL);
  cr_expect(strstr(r.body, "\"2\"") && strstr(r.body, "\"1\""), "%s", r.body);
  free(r.body);
  stop_server(&sv);
}

Test(serve, errors_name_the_problem) {
  server sv = start_server(NULL);
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3, 4]", 400, "JSON");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3]]}", 400, "input x");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3, 4], [1, 2]]}", 400, "instance 1");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"inputs\": [[1, 2, 3]]}", 400, "[1,3]");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, \"a\", 3, 4]]}", 400, "number");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"foo\": 1}", 400, "instances");
  expect_error(&sv, "/v1/models/mlp:predict", "{\"signature_name\": \"nosig\", \"instances\": [[1, 2, 3, 4]]}", 404,
               "nosig");
  expect_error(&sv, "/v1/models/nosuch:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404, "nosuch");
  expect_error(&sv, "/v1/models/nosuch", NULL, 404, "nosuch");
  expect_error(&sv, "/v1/models/mlp/versions/7:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404, "7");
  expect_error(&sv, "/v1/models/mlp:explode", "{}", 404, "Malformed request");
  /* over --max_body_bytes 4096 */
  size_t n = 6000;
  char *big = malloc(n + 64);
  strcpy(big, "{\"instances\": [[");
  while (strlen(big) < n) strcat(big, "1.0, 2.0, 3.0, 4.0, ");
  strcat(big, "1.0]]}");
  expect_error(&sv, "/v1/models/mlp:predict", big, 413, "too large");
  free(big);
  /* the server is still fine */
  reply r = curl(&sv, "/v1/models/mlp", NULL);
  cr_expect_eq(r.status, 200);
  free(r.body);
  stop_server(&sv);
}

Test(serve, connection_limit) {
  server sv = start_server("--max_connections 3");
  int fds[3];
  for (int i = 0; i < 3; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sv.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
  }
  usleep(100000);
  expect_error(&sv, "/v1/models/mlp", NULL, 503, "Too many connections");
  for (int i = 0; i < 3; i++) close(fds[i]);
  usleep(100000);
  reply r = curl(&sv, "/v1/models/mlp", NULL);
  cr_expect_eq(r.status, 200, "after closing: %s", r.body);
  free(r.body);
  stop_server(&sv);
}

Test(serve, python_requests) {
  if (system("python3 -c 'import requests' 2>/dev/null") != 0) {
    cr_log_warn("test_serve: Python requests is not installed; its part is skipped");
    return;
  }
  server sv = start_server(NULL);
  char d1[256], py[256], cmd[512];
  snprintf(d1, sizeof d1, "%s/mlp/1", sv.base);
  float *want[1];
  predict_ref(d1, NULL, 3, &X[0][0], 1, want);
  snprintf(py, sizeof py, "%s/check.py", sv.base);
  char script[4096];
  snprintf(script, sizeof script,
           "import requests, sys\n"
           "u = 'http://127.0.0.1:%d/v1/models/mlp'\n"
           "s = requests.Session()\n"
           "r = s.get(u); assert r.status_code == 200, r.text\n"
           "assert r.json()['model_version_status'][0]['state'] == 'AVAILABLE'\n"
           "x = [[0.5, -1.25, 2.0, 0.125], [1.0, 0.0, -0.5, 3.0], [-2.0, 0.75, 0.25, -1.0]]\n"
           "want = [[%.9g, %.9g, %.9g], [%.9g, %.9g, %.9g], [%.9g, %.9g, %.9g]]\n"
           "for i in range(20):\n"
           "  r = s.post(u + ':predict', json={'instances': x}); assert r.status_code == 200, r.text\n"
           "  p = r.json()['predictions']\n"
           "  assert all(abs(a - b) <= 1e-7 * max(1, abs(b)) for pa, pb in zip(p, want) for a, b in zip(pa, pb)), p\n"
           "r = s.post(u + ':predict', json={'inputs': {'x': x}}); assert r.json()['outputs'] == p, r.text\n"
           "r = s.post(u + ':predict', data='{nope'); assert r.status_code == 400 and 'JSON' in r.json()['error']\n"
           "r = s.get(u + '/metadata'); assert 'serving_default' in r.json()['metadata']['signature_def']['signature_def']\n"
           "print('python requests: ok')\n",
           sv.port, want[0][0], want[0][1], want[0][2], want[0][3], want[0][4], want[0][5], want[0][6], want[0][7],
           want[0][8]);
  tu_write_file(py, script, strlen(script));
  snprintf(cmd, sizeof cmd, "python3 %s", py);
  cr_expect_eq(system(cmd), 0, "the Python requests client failed (script %s)", py);
  free(want[0]);
  stop_server(&sv);
}

/* 8 concurrent curls, one row each; each must get its own row back. merge: the batching
 * thread waits up to 3 s for 8 rows, so some requests must have been merged */
static void concurrent_clients(const char *flags, int merge) {
  server sv = start_server(flags);
  char d1[256], cmd[1024];
  snprintf(d1, sizeof d1, "%s/mlp/1", sv.base);
  float *want[1];
  predict_ref(d1, NULL, 3, &X[0][0], 1, want);
  char script[8192] = "";
  for (int i = 0; i < 8; i++) {
    int r = i % 3;
    snprintf(cmd, sizeof cmd,
             "curl -s -o %s/c%d.json -H 'Content-Type: application/json' -d '{\"instances\": [[%.9g, %.9g, %.9g, "
             "%.9g]]}' http://127.0.0.1:%d/v1/models/mlp:predict & ",
             sv.base, i, X[r][0], X[r][1], X[r][2], X[r][3], sv.port);
    strcat(script, cmd);
  }
  strcat(script, "wait");
  cr_assert_eq(system(script), 0);
  for (int i = 0; i < 8; i++) {
    char f[256];
    snprintf(f, sizeof f, "%s/c%d.json", sv.base, i);
    char *b = tu_read_file(f, NULL);
    cJSON *j = cJSON_Parse(b);
    cr_assert(j, "reply %d: %s", i, b);
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "predictions"), 0);
    cr_assert(p, "%s", b);
    for (int k = 0; k < 3; k++)
      cr_expect(fabsf((float)cJSON_GetArrayItem(p, k)->valuedouble - want[0][(i % 3) * 3 + k]) <= 1e-6f, "%s", b);
    cJSON_Delete(j);
    free(b);
  }
  free(want[0]);
  char base[TU_TMPDIR_CAP], ef[256];
  snprintf(base, sizeof base, "%s", sv.base);
  cr_assert_eq(kill(sv.pid, SIGTERM), 0);
  int ws = 0;
  cr_assert_eq(waitpid(sv.pid, &ws, 0), sv.pid);
  cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  snprintf(ef, sizeof ef, "%s/err.txt", base);
  char *err = tu_read_file(ef, NULL), *m = strstr(err, "largest ");
  cr_assert(m, "no statistics line: %s", err);
  /* 8 single-row requests, a batch waiting up to 3 s for 8 rows: some were merged */
  if (merge) cr_expect(atoi(m + 8) > 1, "no request was batched with another: %s", err);
  cr_expect(strstr(err, "stopped (8 predict"), "%s", err);
  free(err);
  tu_rmtree(base);
}
Test(serve, concurrent_clients_are_batched_and_correct) {
  concurrent_clients("--max_batch_size 8 --batch_timeout_micros 3000000", 1); /* a batch closes at 8 rows */
}
/* the default: no batching thread, the loop merges what arrived in one round of I/O */
Test(serve, concurrent_clients_on_the_loop_thread) { concurrent_clients("--max_batch_size 8", 0); }

/* ---- :classify and :regress on canned estimators' exports ----
 * Canned models trained on feature columns (numeric "age", vocabulary "color", hash bucket
 * "city", their cross for the linear ones) and exported with TF's parsing serving input
 * receiver (loom_fc_parsing_receiver_new: one string tensor of serialized tf.Example, parsed
 * in the graph by LoomParseExample). The server turns each JSON example into tf.Example
 * bytes; the model parses them into its features. References: Estimator.predict on the same
 * rows (dense features, no tf.Example at all), and the in-process predictor fed the bytes
 * loom's own TFRecord writer makes (independent of the server's encoder). */
#include "parse_canned_util.h"

/* the JSON example of row r (age has a fraction, so the server writes a float_list) */
static void json_example(char *b, size_t cap, int r) {
  snprintf(b, cap, "{\"age\": %.9g, \"color\": \"%s\", \"city\": [\"%s\"]}", (double)PC_AGE[r], PC_COLOR[r],
           PC_CITY[r]);
}
static char *json_examples(const char *sig) {
  static char body[4096];
  size_t k = (size_t)snprintf(body, sizeof body, "{\"signature_name\": \"%s\", \"examples\": [", sig);
  for (int r = 0; r < PC_ROWS; r++) {
    char e[256];
    json_example(e, sizeof e, r);
    k += (size_t)snprintf(body + k, sizeof body - k, "%s%s", r ? ", " : "", e);
  }
  snprintf(body + k, sizeof body - k, "]}");
  return body;
}

/* the predictor's output key (of signature sig) on the serialized rows */
static loom_tensor *ref_output(const char *dir, char **rows, size_t *lens, const char *sig, const char *key) {
  loom_status *st = loom_status_new();
  loom_predictor *p = loom_predictor_load(dir, NULL, st);
  cr_assert(p, "%s", loom_status_message(st));
  int no = loom_predictor_num_outputs(p, sig), k = -1;
  cr_assert(no > 0 && no <= 16, "signature %s: %d outputs", sig, no);
  for (int i = 0; i < no; i++)
    if (!strcmp(loom_predictor_output_key(p, sig, i), key)) k = i;
  cr_assert(k >= 0, "signature %s has no output %s", sig, key);
  int64_t dn[1] = {PC_ROWS};
  loom_tensor *in = loom_tensor_new(LOOM_STRING, 1, dn, NULL), *outs[16] = {0};
  for (int i = 0; i < PC_ROWS; i++) loom_tensor_set_string(in, i, rows[i], lens[i], NULL);
  cr_assert_eq(loom_predictor_run(p, sig, 1, &in, no, outs, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < no; i++)
    if (i != k) loom_tensor_free(outs[i]);
  loom_tensor_free(in);
  loom_predictor_free(p);
  loom_status_free(st);
  return outs[k];
}

static int wait_available(server *sv, const char *model) {
  char path[256];
  snprintf(path, sizeof path, "/v1/models/%s", model);
  for (int i = 0; i < 200; i++) {
    reply r = curl(sv, path, NULL);
    int ok = r.status == 200 && strstr(r.body, "AVAILABLE");
    free(r.body);
    if (ok) return 1;
    usleep(50000);
  }
  return 0;
}

/* checks a :classify reply against scores / classes [PC_ROWS, 2] (rows from row0) */
static void expect_classify(const reply *r, int n, int row0, const loom_tensor *sc, const loom_tensor *cls) {
  cr_assert_eq(r->status, 200, "%s", r->body);
  cJSON *j = cJSON_Parse(r->body);
  cJSON *res = cJSON_GetObjectItem(j, "result");
  cr_assert(cJSON_IsArray(res) && cJSON_GetArraySize(res) == n, "%s", r->body);
  for (int e = 0; e < n; e++) {
    cJSON *pairs = cJSON_GetArrayItem(res, e);
    cr_assert(cJSON_GetArraySize(pairs) == 2, "%s", r->body);
    for (int c = 0; c < 2; c++) {
      cJSON *pr = cJSON_GetArrayItem(pairs, c);
      size_t ln = 0;
      const char *want = loom_tensor_get_string(cls, (row0 + e) * 2 + c, &ln);
      cJSON *lab = cJSON_GetArrayItem(pr, 0), *scv = cJSON_GetArrayItem(pr, 1);
      cr_assert(cJSON_IsString(lab) && cJSON_IsNumber(scv), "%s", r->body);
      cr_expect(strlen(lab->valuestring) == ln && !memcmp(lab->valuestring, want, ln), "label %s", lab->valuestring);
      cr_expect_eq((float)scv->valuedouble, ((const float *)loom_tensor_data_const(sc))[(row0 + e) * 2 + c],
                   "example %d class %d: %.9g", e, c, scv->valuedouble);
    }
  }
  cJSON_Delete(j);
}

Test(serve, classify_and_regress_canned, .timeout = 240) {
  server sv = start_server(NULL);
  char work[512], dst[1024];
  snprintf(work, sizeof work, "%s/work", sv.base);
  cr_assert_eq(mkdir(work, 0755), 0);
  char *rows[PC_ROWS];
  size_t lens[PC_ROWS];
  pc_serialize(work, rows, lens);
  /* three models appear in the base directory while the server runs */
  const char *models[3] = {"cls", "dnn", "reg"};
  const pc_kind kinds[3] = {PC_LINEAR_CLS, PC_DNN_CLS, PC_LINEAR_REG};
  pc_model m[3];
  loom_tensor *want[3][2]; /* Estimator.predict: probabilities + all_classes, or predictions */
  for (int k = 0; k < 3; k++) {
    pc_train_export(&m[k], kinds[k], work);
    if (kinds[k] == PC_LINEAR_REG) {
      want[k][0] = pc_predict(&m[k], "predictions");
      want[k][1] = NULL;
    } else {
      want[k][0] = pc_predict(&m[k], "probabilities");
      want[k][1] = pc_predict(&m[k], "all_classes");
    }
    snprintf(dst, sizeof dst, "%s/%s", work, models[k]);
    cr_assert_eq(mkdir(dst, 0755), 0);
    snprintf(dst, sizeof dst, "%s/%s/3", work, models[k]);
    cr_assert_eq(rename(m[k].export_dir, dst), 0, "rename %s -> %s", m[k].export_dir, dst);
    char mdir[1024];
    snprintf(mdir, sizeof mdir, "%s/%s", sv.base, models[k]);
    snprintf(dst, sizeof dst, "%s/%s", work, models[k]);
    cr_assert_eq(rename(dst, mdir), 0);
  }
  for (int k = 0; k < 3; k++) cr_assert(wait_available(&sv, models[k]), "model %s was not loaded", models[k]);

  /* metadata: TF's canned signatures: classify / regress on "inputs", predict on "examples" */
  reply r = curl(&sv, "/v1/models/cls/metadata", NULL);
  cr_assert_eq(r.status, 200, "%s", r.body);
  cJSON *j = parse(&r);
  cJSON *sd = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "signature_def"),
                                  "signature_def");
  const char *sigs[3] = {"serving_default", "classification", "predict"};
  const char *meth[3] = {"tensorflow/serving/classify", "tensorflow/serving/classify", "tensorflow/serving/predict"};
  for (int s = 0; s < 3; s++) {
    cJSON *cl = cJSON_GetObjectItem(sd, sigs[s]);
    cr_assert(cl, "no %s signature: %s", sigs[s], r.body);
    cr_expect_str_eq(cJSON_GetObjectItem(cl, "method_name")->valuestring, meth[s]);
    cJSON *in = cJSON_GetObjectItem(cJSON_GetObjectItem(cl, "inputs"), s == 2 ? "examples" : "inputs");
    cr_assert(in, "%s: no input %s: %s", sigs[s], s == 2 ? "examples" : "inputs", r.body);
    cr_expect_str_eq(cJSON_GetObjectItem(in, "dtype")->valuestring, "DT_STRING");
  }
  cJSON_Delete(j);
  free(r.body);

  /* classify, both classifiers: every pair equals Estimator.predict's (all_classes,
   * probabilities) and the predictor's on loom-written bytes; by version and not, by
   * serving_default (the default signature) and by name */
  for (int k = 0; k < 2; k++) {
    snprintf(dst, sizeof dst, "%s/%s/3", sv.base, models[k]);
    loom_tensor *cls = ref_output(dst, rows, lens, "classification", "classes");
    loom_tensor *sc = ref_output(dst, rows, lens, "classification", "scores");
    cr_assert_eq(loom_tensor_numel(sc), 2 * PC_ROWS);
    cr_expect(!memcmp(loom_tensor_data_const(sc), loom_tensor_data_const(want[k][0]), loom_tensor_nbytes(sc)),
              "%s: the predictor on serialized examples and Estimator.predict differ", models[k]);
    for (int pass = 0; pass < 3; pass++) {
      char path[256];
      snprintf(path, sizeof path, pass == 1 ? "/v1/models/%s/versions/3:classify" : "/v1/models/%s:classify",
               models[k]);
      char nosig[4096]; /* no signature_name: serving_default, a classify signature */
      snprintf(nosig, sizeof nosig, "{%s", strstr(json_examples("x"), "\"examples\""));
      r = curl(&sv, path, pass == 2 ? nosig : json_examples("classification"));
      expect_classify(&r, PC_ROWS, 0, want[k][0], want[k][1]);
      expect_classify(&r, PC_ROWS, 0, sc, cls);
      free(r.body);
    }
    loom_tensor_free(cls);
    loom_tensor_free(sc);
  }
  /* the linear classifier learnt the labels: red, green -> "1" */
  for (int e = 0; e < PC_ROWS; e++) {
    const float *s = loom_tensor_data_const(want[0][0]);
    cr_expect((s[e * 2 + 1] > 0.5f) == (pc_label(PC_LINEAR_CLS, e) > 0.5f), "example %d: scores %g %g", e, s[e * 2],
              s[e * 2 + 1]);
  }
  /* context features are merged into every example: {} + context = row 2 */
  {
    char body[512], ex[256];
    json_example(ex, sizeof ex, 2);
    snprintf(body, sizeof body, "{\"signature_name\": \"classification\", \"context\": %s, \"examples\": [{}]}", ex);
    r = curl(&sv, "/v1/models/cls:classify", body);
    expect_classify(&r, 1, 2, want[0][0], want[0][1]);
    free(r.body);
  }

  /* regress: equal to Estimator.predict's predictions and the predictor's outputs */
  snprintf(dst, sizeof dst, "%s/reg/3", sv.base);
  loom_tensor *out = ref_output(dst, rows, lens, "regression", "outputs");
  cr_expect(!memcmp(loom_tensor_data_const(out), loom_tensor_data_const(want[2][0]), loom_tensor_nbytes(out)),
            "the regressor's predictor and Estimator.predict differ");
  r = curl(&sv, "/v1/models/reg:regress", json_examples("regression"));
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  cJSON *res = cJSON_GetObjectItem(j, "result");
  cr_assert(cJSON_IsArray(res) && cJSON_GetArraySize(res) == PC_ROWS, "%s", r.body);
  const float *o = loom_tensor_data_const(want[2][0]);
  for (int e = 0; e < PC_ROWS; e++)
    cr_expect_eq((float)cJSON_GetArrayItem(res, e)->valuedouble, o[e], "example %d", e);
  /* trained towards 1.5 * colour index + age / 50: red < green < blue < white on average */
  float mean[4] = {0}, cnt[4] = {0};
  for (int e = 0; e < PC_ROWS; e++) {
    int ci = pc_color_index(PC_COLOR[e]);
    mean[ci] += o[e];
    cnt[ci] += 1;
  }
  for (int c = 0; c < 4; c++) mean[c] /= cnt[c];
  cr_expect(mean[0] < mean[1] && mean[1] < mean[2] && mean[2] < mean[3], "regression means %g %g %g %g", mean[0],
            mean[1], mean[2], mean[3]);
  cJSON_Delete(j);
  free(r.body);

  /* Python requests gets the same */
  if (system("python3 -c 'import requests' 2>/dev/null") == 0) {
    char py[512], script[4096], cmd[600];
    snprintf(py, sizeof py, "%s/cr.py", sv.base);
    size_t k = (size_t)snprintf(script, sizeof script,
                                "import requests\n"
                                "u = 'http://127.0.0.1:%d/v1/models/'\n"
                                "ex = [{'age': a, 'color': c, 'city': t} for a, c, t in [",
                                sv.port);
    for (int e = 0; e < PC_ROWS; e++)
      k += (size_t)snprintf(script + k, sizeof script - k, "(%.9g, '%s', '%s'), ", (double)PC_AGE[e], PC_COLOR[e],
                            PC_CITY[e]);
    k += (size_t)snprintf(script + k, sizeof script - k, "]]\nwant = [");
    for (int e = 0; e < PC_ROWS; e++) k += (size_t)snprintf(script + k, sizeof script - k, "%.9g, ", (double)o[e]);
    k += (size_t)snprintf(script + k, sizeof script - k, "]\nlab = [");
    for (int e = 0; e < PC_ROWS; e++)
      k += (size_t)snprintf(script + k, sizeof script - k, "%s, ", pc_label(PC_LINEAR_CLS, e) > 0.5f ? "True" : "False");
    snprintf(script + k, sizeof script - k,
             "]\n"
             "r = requests.post(u + 'reg:regress', json={'signature_name': 'regression', 'examples': ex})\n"
             "assert r.status_code == 200, r.text\n"
             "assert all(abs(a - b) <= 1e-6 * max(1, abs(b)) for a, b in zip(r.json()['result'], want)), r.text\n"
             "r = requests.post(u + 'cls:classify', json={'signature_name': 'classification', 'examples': ex})\n"
             "res = r.json()['result']\n"
             "assert [[c for c, s in e] for e in res] == [['0', '1']] * %d, r.text\n"
             "assert [e[1][1] > 0.5 for e in res] == lab, r.text\n"
             "r = requests.post(u + 'reg:classify', json={'examples': ex})\n"
             "assert r.status_code == 400 and 'classification' in r.json()['error'], r.text\n"
             "print('python requests classify/regress: ok')\n",
             PC_ROWS);
    tu_write_file(py, script, strlen(script));
    snprintf(cmd, sizeof cmd, "python3 %s", py);
    cr_expect_eq(system(cmd), 0, "the Python requests client failed (script %s)", py);
  } else {
    cr_log_warn("test_serve: Python requests is not installed; its part is skipped");
  }

  /* errors: a signature of the other kind, examples that are not a list, a feature of null;
   * the model's parser: a required feature missing, an integer where the spec wants floats
   * (the JSON literal 30 becomes an int64_list, as in TF Serving), each naming the feature
   * and the example */
  expect_error(&sv, "/v1/models/cls:regress", "{\"signature_name\": \"classification\", \"examples\": [{}]}", 400,
               "tensorflow/serving/regress");
  expect_error(&sv, "/v1/models/reg:classify", "{\"signature_name\": \"regression\", \"examples\": [{}]}", 400,
               "tensorflow/serving/classify");
  expect_error(&sv, "/v1/models/cls:classify", "{\"signature_name\": \"classification\", \"examples\": 3}", 400,
               "examples");
  expect_error(&sv, "/v1/models/cls:classify",
               "{\"signature_name\": \"classification\", \"examples\": [{\"color\": null}]}", 400, "color");
  expect_error(&sv, "/v1/models/mlp:classify", "{\"examples\": [{\"x\": 1}]}", 400, "classif");
  expect_error(&sv, "/v1/models/cls:classify",
               "{\"examples\": [{\"age\": 1.5, \"color\": \"red\", \"city\": \"oslo\"}, {\"color\": \"red\"}]}", 400,
               "serialized example 1: feature 'age' is required but missing");
  expect_error(&sv, "/v1/models/reg:regress",
               "{\"signature_name\": \"regression\", \"examples\": [{\"age\": 30, \"color\": \"red\"}]}", 400,
               "serialized example 0: feature 'age' is a int64_list, the spec wants float_list");
  /* the literal decides, as in TF Serving: 2.15e1 and 40.0 are floats (40.0 parses where 40 fails) */
  r = curl(&sv, "/v1/models/reg:regress",
           "{\"signature_name\": \"regression\", \"examples\": [{\"age\": 2.15e1, \"color\": \"red\", "
           "\"city\": \"paris\"}, {\"age\": 40.0, \"color\": \"red\", \"city\": \"paris\"}]}");
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  res = cJSON_GetObjectItem(j, "result");
  cr_assert(cJSON_GetArraySize(res) == 2, "%s", r.body);
  cr_expect_eq((float)cJSON_GetArrayItem(res, 0)->valuedouble, o[0], "age 2.15e1 is row 0's 21.5: %s", r.body);
  cJSON_Delete(j);
  free(r.body);
  /* a missing categorical feature is an empty row (its OOV / zero contribution), as in TF */
  r = curl(&sv, "/v1/models/reg:regress", "{\"signature_name\": \"regression\", \"examples\": [{\"age\": 40.5}]}");
  cr_expect_eq(r.status, 200, "%s", r.body);
  free(r.body);
  loom_tensor_free(out);
  for (int k = 0; k < 3; k++) {
    loom_tensor_free(want[k][0]);
    loom_tensor_free(want[k][1]);
    pc_free(&m[k]);
  }
  for (int i = 0; i < PC_ROWS; i++) free(rows[i]);
  stop_server(&sv);
}

/* the row-format fast path (hand-written number scanner) and the cJSON path (columnar) give
 * bitwise the same predictions for numbers at the edges of float parsing */
Test(serve, fast_path_numbers_equal_cjson) {
  server sv = start_server(NULL);
  const char *rows[] = {"[1e-7, -0.0, 3.4028235e38, 1.17549435e-38]", "[0.1, 2.5E+3, -12.5e-3, 123456789012345678901]",
                        "[4.9e-46, 1.0000000000000002, 0.30000000000000004, -7]",
                        "[9007199254740993, 1e22, 1e23, 0.000000000000000000001]"};
  for (int i = 0; i < 4; i++) {
    char b1[512], b2[512];
    snprintf(b1, sizeof b1, "{\"instances\": [%s]}", rows[i]);
    snprintf(b2, sizeof b2, "{\"inputs\": [%s]}", rows[i]);
    reply r1 = curl(&sv, "/v1/models/mlp:predict", b1), r2 = curl(&sv, "/v1/models/mlp:predict", b2);
    cr_assert_eq(r1.status, 200, "%s", r1.body);
    cr_assert_eq(r2.status, 200, "%s", r2.body);
    cJSON *j1 = parse(&r1), *j2 = parse(&r2);
    cJSON *p1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j1, "predictions"), 0);
    cJSON *p2 = cJSON_GetArrayItem(cJSON_GetObjectItem(j2, "outputs"), 0);
    cr_assert(cJSON_GetArraySize(p1) == 3 && cJSON_GetArraySize(p2) == 3, "%s / %s", r1.body, r2.body);
    for (int k = 0; k < 3; k++)
      cr_expect_eq(cJSON_GetArrayItem(p1, k)->valuedouble, cJSON_GetArrayItem(p2, k)->valuedouble, "row %s: %s vs %s",
                   rows[i], r1.body, r2.body);
    cJSON_Delete(j1);
    cJSON_Delete(j2);
    free(r1.body);
    free(r2.body);
  }
  stop_server(&sv);
}
