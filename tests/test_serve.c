/* test_serve.c - loom-serve (tools/serve/), run as a program on port 0 and
 * queried by real HTTP clients (curl; Python requests when installed): an MLP
 * 4-8-3 exported to <base>/mlp/1; status and metadata in TF Serving's shapes;
 * predictions in the row and columnar formats equal to loom_predictor's; a
 * second signature with two outputs; a version added while the server runs is
 * served; malformed JSON, wrong shapes, unknown model / signature / version,
 * a body over the limit and a connection over the limit get 400/404/413/503
 * with an error naming the problem; :classify and :regress on canned exports; the
 * row-format fast path equal to the cJSON path; SIGTERM exits 0. For operators: TF Serving's
 * flags and config files, bad flags and files exiting 2, /healthz, /readyz and the Prometheus
 * metrics, the batching queue limit, a raw export's serving_default and the messages for an
 * unknown input key and columns of different lengths. */
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

/* a fresh base directory with mlp/1 */
static server make_base(void) {
  server sv;
  tu_tmpdir(sv.base, sizeof sv.base, "serve");
  char d[256];
  snprintf(d, sizeof d, "%s/mlp", sv.base);
  cr_assert_eq(mkdir(d, 0755), 0);
  snprintf(d, sizeof d, "%s/mlp/1", sv.base);
  export_mlp(d, 1);
  return sv;
}

/* runs loom-serve with args (stderr to <base>/err.txt) and reads the port it prints */
static void launch(server *sv, const char *args) {
  int fd[2];
  cr_assert_eq(pipe(fd), 0);
  sv->pid = fork();
  cr_assert(sv->pid >= 0);
  if (sv->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed assertion ends the test process: no orphan server */
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec %s %s 2>%s/err.txt", LOOM_SERVE_BIN, args, sv->base);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  char line[256] = "";
  cr_assert(fgets(line, sizeof line, f), "loom-serve %s printed nothing (see %s/err.txt)", args, sv->base);
  fclose(f);
  const char *c = strrchr(line, ':');
  cr_assert(strstr(line, "listening on") && c, "unexpected first line: %s", line);
  sv->port = atoi(c + 1);
  cr_assert(sv->port > 0, "port 0 was not resolved: %s", line);
}

static server start_server(const char *extra) {
  server sv = make_base();
  char args[1024];
  snprintf(args, sizeof args, "--model_base_path %s --host 127.0.0.1 --port 0 --poll_ms 50 --max_body_bytes 4096 %s",
           sv.base, extra ? extra : "");
  launch(&sv, args);
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

  /* /readyz with a directory of models: a subdirectory without versions is not a model yet; a
   * model whose only version fails to load is not ready, named with the load error */
  char d[512];
  snprintf(d, sizeof d, "%s/empty", sv.base);
  cr_assert_eq(mkdir(d, 0755), 0);
  usleep(200000);
  r = curl(&sv, "/readyz", NULL);
  cr_expect_eq(r.status, 200, "%s", r.body);
  free(r.body);
  snprintf(d, sizeof d, "%s/broken", sv.base);
  cr_assert_eq(mkdir(d, 0755), 0);
  snprintf(d, sizeof d, "%s/broken/1", sv.base);
  cr_assert_eq(mkdir(d, 0755), 0);
  int seen = 0;
  for (int i = 0; i < 100 && !seen; i++) {
    r = curl(&sv, "/readyz", NULL);
    seen = r.status == 503 && strstr(r.body, "model broken: no version loaded (version 1: ");
    free(r.body);
    if (!seen) usleep(50000);
  }
  cr_expect(seen, "/readyz does not report the broken model");
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

/* ---- operators' flags, readiness, metrics, clear request errors ---- */

/* runs loom-serve with args to completion (at most 20 s); its exit status, stderr in *err (malloc'd) */
static int run_serve(const char *dir, const char *args, char **err) {
  char cmd[2048], ef[512];
  snprintf(ef, sizeof ef, "%s/run_err.txt", dir);
  snprintf(cmd, sizeof cmd, "timeout 20 %s %s >/dev/null 2>%s", LOOM_SERVE_BIN, args, ef);
  int s = system(cmd);
  *err = tu_read_file(ef, NULL);
  cr_assert(*err, "no stderr file for %s", args);
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

/* the mlp's predictions on X through a server, against loom_predictor's */
static void expect_mlp_predictions(server *sv, const char *model, const char *export_dir) {
  float *want[1];
  predict_ref(export_dir, NULL, 3, &X[0][0], 1, want);
  char path[256];
  snprintf(path, sizeof path, "/v1/models/%s:predict", model);
  reply r = curl(sv, path, "{\"instances\": [[0.5, -1.25, 2.0, 0.125], [1.0, 0.0, -0.5, 3.0], [-2.0, 0.75, 0.25, -1.0]]}");
  cr_assert_eq(r.status, 200, "%s: %s", path, r.body);
  cJSON *j = parse(&r);
  expect_rows(cJSON_GetObjectItem(j, "predictions"), 3, want[0]);
  cJSON_Delete(j);
  free(r.body);
  free(want[0]);
}

static char *file_text(const char *dir, const char *name, const char *text) {
  static char path[8][512];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 512, "%s/%s", dir, name);
  tu_write_file(p, text, strlen(text));
  return p;
}

/* TF Serving's command lines: --flag=value and --flag value; --model_name with --model_base_path
 * (the model's own directory); --port beside --rest_api_port (gRPC: not opened, said so);
 * --model_config_file; --enable_batching with a batching parameters file; TF's poll and thread flags */
Test(serve, tf_serving_flags) {
  server sv = make_base();
  char args[2048], d1[512], d2[512];
  snprintf(d1, sizeof d1, "%s/mlp/1", sv.base);
  /* --flag=value */
  snprintf(args, sizeof args,
           "--model_name=mlp --model_base_path=%s/mlp --rest_api_port=0 --port=8500 --host=127.0.0.1 "
           "--file_system_poll_wait_seconds=1 --tensorflow_intra_op_parallelism=1",
           sv.base);
  launch(&sv, args);
  reply r = curl(&sv, "/v1/models/mlp", NULL);
  cr_expect(r.status == 200 && strstr(r.body, "AVAILABLE"), "%s", r.body);
  free(r.body);
  expect_mlp_predictions(&sv, "mlp", d1);
  char ef[512];
  snprintf(ef, sizeof ef, "%s/err.txt", sv.base);
  char *err = tu_read_file(ef, NULL);
  cr_expect(err && strstr(err, "--port=8500 is TF Serving's gRPC port") && strstr(err, "does not open"), "%s", err);
  free(err);
  cr_assert_eq(kill(sv.pid, SIGTERM), 0);
  int ws = 0;
  cr_assert_eq(waitpid(sv.pid, &ws, 0), sv.pid);
  cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

  /* --flag value, batching from TF Serving's text-format parameters file (comments, both braces) */
  const char *bp = file_text(sv.base, "batching.txt",
                             "# TF Serving's BatchingParameters\n"
                             "max_batch_size { value: 8 }\n"
                             "batch_timeout_micros { value: 1000 }\n"
                             "num_batch_threads < value: 2 >\n"
                             "max_enqueued_batches { value: 100 }\n");
  snprintf(args, sizeof args,
           "--model_name mlp --model_base_path %s/mlp --rest_api_port 0 --port 8500 --host 127.0.0.1 "
           "--enable_batching --batching_parameters_file %s",
           sv.base, bp);
  launch(&sv, args);
  expect_mlp_predictions(&sv, "mlp", d1);
  cr_assert_eq(kill(sv.pid, SIGTERM), 0);
  cr_assert_eq(waitpid(sv.pid, &ws, 0), sv.pid);
  cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  err = tu_read_file(ef, NULL);
  cr_expect(err && strstr(err, "stopped (1 predict"), "%s", err);
  free(err);

  /* --model_config_file: two models, one of them a second export elsewhere */
  snprintf(d2, sizeof d2, "%s/elsewhere/7", sv.base);
  char d2p[512];
  snprintf(d2p, sizeof d2p, "%s/elsewhere", sv.base);
  cr_assert_eq(mkdir(d2p, 0755), 0);
  export_mlp(d2, 2);
  char conf[2048];
  snprintf(conf, sizeof conf,
           "model_config_list {\n"
           "  config {\n    name: 'first'\n    base_path: \"%s/mlp\"\n    model_platform: \"tensorflow\"\n  }\n"
           "  config: {\n    name: \"second\" base_path: \"%s\"\n"
           "    model_version_policy { all {} }\n  },\n"
           "}\n",
           sv.base, d2p);
  const char *cf = file_text(sv.base, "models.config", conf);
  snprintf(args, sizeof args, "--model_config_file=%s --rest_api_port=0 --host 127.0.0.1", cf);
  launch(&sv, args);
  expect_mlp_predictions(&sv, "first", d1);
  expect_mlp_predictions(&sv, "second", d2);
  r = curl(&sv, "/v1/models/second/versions/7", NULL);
  cr_expect(r.status == 200 && strstr(r.body, "AVAILABLE"), "%s", r.body);
  free(r.body);
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404, "mlp");
  stop_server(&sv);
}

/* unknown flags and bad values exit 2 naming the flag; --help lists every flag */
Test(serve, bad_flags_exit_2_naming_the_flag) {
  server sv = make_base();
  char args[1024], *err;
  struct {
    const char *args, *needle;
  } bad[] = {
      {"--model_base_path %s --bogus", "unknown flag --bogus"},
      {"--model_base_path %s --bogus=1", "unknown flag --bogus"},
      {"--model_base_path %s --rest_api_port", "--rest_api_port needs a value"},
      {"--model_base_path %s --rest_api_port=eighty", "--rest_api_port: 'eighty' is not an integer"},
      {"--model_base_path %s --port 70000", "--port: '70000' is not an integer in [0, 65535]"},
      {"--model_base_path %s --enable_batching=maybe", "--enable_batching: 'maybe' is not a boolean"},
      {"--model_base_path %s stray", "unexpected argument 'stray'"},
      {"--model_base_path %s -port=1", "unexpected argument '-port=1'"},
      {"--model_base_path %s/none", "is not a directory"},
      {"--model_base_path %s --batching_parameters_file=/dev/null", "add --enable_batching"},
      {"--model_base_path %s --model_config_file=/dev/null", "cannot be combined"},
      {"--rest_api_port=0 --host 127.0.0.1", "--model_base_path DIR (with --model_name NAME) or --model_config_file FILE"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (strstr(bad[i].args, "%s")) snprintf(args, sizeof args, bad[i].args, sv.base);
    else snprintf(args, sizeof args, "%s", bad[i].args);
    int rc = run_serve(sv.base, args, &err);
    cr_expect_eq(rc, 2, "loom-serve %s: exit %d (stderr: %s)", args, rc, err);
    cr_expect(strstr(err, bad[i].needle), "loom-serve %s: stderr \"%s\" does not say \"%s\"", args, err, bad[i].needle);
    free(err);
  }
  /* the config files: each error names the file, the line and the field */
  struct {
    const char *file, *text, *needle;
  } cfg[] = {
      {"models.config", "model_config_list { config { name: 'a' base_path: '/x' } }\nmodel_server: 1\n",
       "line 2: model_server: unknown field"},
      {"models.config", "model_config_list {\n config {\n  name: 'a'\n  base_path: '/x'\n  bas_path: '/y'\n }\n}\n",
       "line 5: unknown field 'bas_path' in config"},
      {"models.config", "model_config_list { config { name: 'a' } }", "model a has no base_path"},
      {"models.config", "model_config_list { config { name: 'a' base_path: '/x' model_platform: 'onnx' } }",
       "model_platform 'onnx'"},
      {"models.config",
       "model_config_list { config { name: 'a' base_path: '/x'\n model_version_policy { latest { num_versions: 2 } } } }",
       "line 2: model_version_policy"},
      {"models.config", "model_config_list { config { name: 'a' base_path: '/x' } config { name: 'a' base_path: '/y' } }",
       "model a is configured twice"},
      {"models.config", "model_config_list { config { name: 'a' base_path: '/x' }", "'}' expected"},
      {"models.config", "", "no model"},
      {"batching.txt", "max_batch_size { value: 0 }", "max_batch_size: '0' is not an integer >= 1"},
      {"batching.txt", "max_batch_size: 8", "max_batch_size must be written max_batch_size { value: N }"},
      {"batching.txt", "batch_timeout_micros { value: 5 }\nallowed_batch_sizes: [2, 4]",
       "line 2: allowed_batch_sizes: not supported"},
      {"batching.txt", "max_batch_siz { value: 8 }", "max_batch_siz: unknown field"},
  };
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    const char *f = file_text(sv.base, cfg[i].file, cfg[i].text);
    if (!strcmp(cfg[i].file, "batching.txt"))
      snprintf(args, sizeof args, "--model_base_path %s --enable_batching --batching_parameters_file %s", sv.base, f);
    else snprintf(args, sizeof args, "--model_config_file %s", f);
    int rc = run_serve(sv.base, args, &err);
    cr_expect_eq(rc, 2, "%s with \"%s\": exit %d (stderr: %s)", cfg[i].file, cfg[i].text, rc, err);
    cr_expect(strstr(err, cfg[i].needle) && strstr(err, f), "%s with \"%s\": stderr \"%s\" does not say \"%s\"",
              cfg[i].file, cfg[i].text, err, cfg[i].needle);
    free(err);
  }
  /* --help: every flag, exit 0 */
  char cmd[1024], hf[512];
  snprintf(hf, sizeof hf, "%s/help.txt", sv.base);
  snprintf(cmd, sizeof cmd, "timeout 20 %s --help >%s 2>&1", LOOM_SERVE_BIN, hf);
  cr_expect_eq(system(cmd), 0);
  char *help = tu_read_file(hf, NULL);
  const char *all[] = {"model_name", "model_base_path", "model_config_file", "rest_api_port", "port", "host",
                       "enable_batching", "batching_parameters_file", "max_batch_size", "batch_timeout_micros",
                       "max_body_bytes", "max_connections", "poll_ms", "file_system_poll_wait_seconds", "threads",
                       "tensorflow_intra_op_parallelism", "batch_thread", "json_fast_path"};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "  --%s=", all[i]);
    if (!strcmp(all[i], "enable_batching")) snprintf(want, sizeof want, "  --%s[=true|false]", all[i]);
    cr_expect(strstr(help, want), "--help does not list %s:\n%s", want, help);
  }
  cr_expect(strstr(help, "/readyz") && strstr(help, "/monitoring/prometheus/metrics"), "%s", help);
  free(help);
  tu_rmtree(sv.base);
}

/* a sample's value in Prometheus text ("name{labels} value"); -1 when absent */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
  return -1;
}

static char *get_metrics(server *sv) {
  char cmd[1536], of[512];
  snprintf(of, sizeof of, "%s/metrics.txt", sv->base);
  snprintf(cmd, sizeof cmd, "curl -s -S -f -D %s/metrics.head -o %s http://127.0.0.1:%d/monitoring/prometheus/metrics",
           sv->base, of, sv->port);
  cr_assert_eq(system(cmd), 0, "GET /monitoring/prometheus/metrics failed");
  snprintf(of, sizeof of, "%s/metrics.head", sv->base);
  char *head = tu_read_file(of, NULL);
  cr_expect(strstr(head, "Content-Type: text/plain; version=0.0.4"), "%s", head);
  free(head);
  snprintf(of, sizeof of, "%s/metrics.txt", sv->base);
  return tu_read_file(of, NULL);
}

/* every line is a comment (# HELP / # TYPE, each family once, TYPE before its samples) or a sample
 * "name{label="value",...} number" with a valid metric name */
static void expect_exposition_format(const char *text) {
  char typed[32][80];
  int ntyped = 0;
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    cr_assert(e, "the text does not end with a newline");
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(e - p), p);
    p = e + 1;
    char name[80] = "";
    if (!strncmp(line, "# TYPE ", 7) || !strncmp(line, "# HELP ", 7)) {
      cr_assert(sscanf(line + 7, "%79s", name) == 1, "%s", line);
      if (line[2] == 'T') {
        for (int i = 0; i < ntyped; i++) cr_expect(strcmp(typed[i], name), "family %s typed twice", name);
        cr_assert(ntyped < 32);
        snprintf(typed[ntyped++], sizeof typed[0], "%s", name);
        const char *t = line + 7 + strlen(name) + 1;
        cr_expect(!strcmp(t, "counter") || !strcmp(t, "histogram") || !strcmp(t, "gauge"), "%s", line);
      }
      continue;
    }
    size_t k = 0;
    while (line[k] == '_' || line[k] == ':' || (line[k] >= 'a' && line[k] <= 'z') || (line[k] >= 'A' && line[k] <= 'Z') ||
           (k && line[k] >= '0' && line[k] <= '9'))
      k++;
    cr_assert(k > 0 && (line[k] == '{' || line[k] == ' '), "not a sample: %s", line);
    snprintf(name, sizeof name, "%.*s", (int)k, line);
    int known = 0; /* the family: the name, or a histogram's name less _bucket / _sum / _count */
    for (int i = 0; i < ntyped; i++) {
      size_t tl = strlen(typed[i]);
      known |= !strncmp(name, typed[i], tl) &&
               (!name[tl] || !strcmp(name + tl, "_bucket") || !strcmp(name + tl, "_sum") || !strcmp(name + tl, "_count"));
    }
    cr_expect(known, "sample %s before its # TYPE line", line);
    const char *v = strrchr(line, ' ');
    char *end;
    strtod(v + 1, &end);
    cr_expect(*end == 0 && end > v + 1, "no number at the end of %s", line);
    if (line[k] == '{') cr_expect(strstr(line, "} ") == v - 1 && strstr(line, "=\""), "labels: %s", line);
  }
}

/* the latency histogram of one series: cumulative buckets, +Inf == _count; returns _count */
static double expect_histogram(const char *text, const char *labels) {
  static const char *const les[] = {"5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
                                    "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"};
  double prev = 0, last = -1;
  for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
    char s[512];
    snprintf(s, sizeof s, "loom_serve_request_latency_seconds_bucket{%s,le=\"%s\"}", labels, les[i]);
    double v = sample(text, s);
    cr_assert(v >= 0, "no %s in\n%s", s, text);
    cr_expect(v >= prev, "%s = %g < the bucket below (%g)", s, v, prev);
    prev = last = v;
  }
  char s[512];
  snprintf(s, sizeof s, "loom_serve_request_latency_seconds_count{%s}", labels);
  double count = sample(text, s);
  cr_expect_eq(count, last, "%s = %g, the +Inf bucket %g", s, count, last);
  snprintf(s, sizeof s, "loom_serve_request_latency_seconds_sum{%s}", labels);
  double sum = sample(text, s);
  cr_expect(sum > 0 && sum < count * 10, "%s = %g for %g requests", s, sum, count);
  return count;
}

/* /healthz, /readyz (503 naming the model without a version until one appears), TF Serving's
 * model status, and the Prometheus metrics: counts by status that grow with the requests, errors
 * counted, a histogram whose buckets add up to its count */
Test(serve, readiness_and_metrics) {
  server sv = make_base();
  char conf[1024], args[1024], later[512];
  snprintf(later, sizeof later, "%s/later", sv.base);
  snprintf(conf, sizeof conf,
           "model_config_list { config { name: 'mlp' base_path: '%s/mlp' } config { name: 'later' base_path: '%s' } }",
           sv.base, later);
  snprintf(args, sizeof args, "--model_config_file %s --rest_api_port 0 --host 127.0.0.1 --poll_ms 50",
           file_text(sv.base, "models.config", conf));
  launch(&sv, args);
  reply r = curl(&sv, "/healthz", NULL);
  cr_expect_eq(r.status, 200, "%s", r.body);
  free(r.body);
  expect_error(&sv, "/readyz", NULL, 503, "model later: no version directory");
  r = curl(&sv, "/v1/models/mlp", NULL);
  cr_expect(r.status == 200 && strstr(r.body, "\"state\": \"AVAILABLE\""), "%s", r.body);
  free(r.body);
  /* the second model appears: ready */
  char tmp[512], d[600];
  snprintf(tmp, sizeof tmp, "%s/tmp_later", sv.base);
  cr_assert_eq(mkdir(tmp, 0755), 0);
  snprintf(d, sizeof d, "%s/3", tmp);
  export_mlp(d, 3);
  cr_assert_eq(rename(tmp, later), 0);
  int ready = 0;
  for (int i = 0; i < 100 && !ready; i++) {
    r = curl(&sv, "/readyz", NULL);
    ready = r.status == 200;
    if (ready) cr_expect(strstr(r.body, "\"ready\": true"), "%s", r.body);
    free(r.body);
    if (!ready) usleep(50000);
  }
  cr_assert(ready, "/readyz still 503 5 s after the model appeared");

  char *m0 = get_metrics(&sv);
  expect_exposition_format(m0);
  const char *ok = "loom_serve_requests_total{model_name=\"mlp\",version=\"1\",api=\"predict\",code=\"200\"}";
  const char *bad = "loom_serve_requests_total{model_name=\"mlp\",version=\"1\",api=\"predict\",code=\"400\"}";
  const char *nov = "loom_serve_requests_total{model_name=\"mlp\",version=\"\",api=\"predict\",code=\"404\"}";
  const char *lab = "model_name=\"mlp\",version=\"1\",api=\"predict\"";
  cr_expect_eq(sample(m0, ok), -1, "%s", m0); /* nothing predicted yet */
  for (int i = 0; i < 3; i++) {
    r = curl(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3, 4]]}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    free(r.body);
  }
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3]]}", 400, "input x");
  expect_error(&sv, "/v1/models/mlp/versions/9:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404, "9");
  char *m1 = get_metrics(&sv);
  expect_exposition_format(m1);
  cr_expect_eq(sample(m1, ok), 3, "%s", m1);
  cr_expect_eq(sample(m1, bad), 1, "%s", m1);
  cr_expect_eq(sample(m1, nov), 1, "%s", m1);
  cr_expect_eq(expect_histogram(m1, lab), 4, "the histogram counts the 3 + 1 requests of version 1");
  for (int i = 0; i < 2; i++) {
    r = curl(&sv, "/v1/models/later:predict", "{\"instances\": [[1, 2, 3, 4]]}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    free(r.body);
    r = curl(&sv, "/v1/models/mlp:predict", "{\"inputs\": [[1, 2, 3, 4], [5, 6, 7, 8]]}");
    cr_expect_eq(r.status, 200, "%s", r.body);
    free(r.body);
  }
  char *m2 = get_metrics(&sv);
  expect_exposition_format(m2);
  cr_expect_eq(sample(m2, ok), 5, "%s", m2);
  cr_expect_eq(sample(m2, bad), 1, "%s", m2);
  cr_expect_eq(
      sample(m2, "loom_serve_requests_total{model_name=\"later\",version=\"3\",api=\"predict\",code=\"200\"}"), 2);
  cr_expect_eq(expect_histogram(m2, lab), 6);
  cr_expect_eq(expect_histogram(m2, "model_name=\"later\",version=\"3\",api=\"predict\""), 2);
  cr_expect_eq(sample(m2, "loom_serve_model_version_available{model_name=\"later\",version=\"3\"}"), 1, "%s", m2);
  /* every HTTP reply: the metrics pages, the status, health and readiness probes included */
  cr_expect(sample(m2, "loom_serve_http_responses_total{code=\"200\"}") >= 9, "%s", m2);
  cr_expect(sample(m2, "loom_serve_http_responses_total{code=\"503\"}") >= 1, "%s", m2);
  /* Prometheus' own parser reads it (Debian's python3-prometheus-client, when installed) */
  const char *py = system("python3 -c 'import prometheus_client' 2>/dev/null") == 0 ? "python3"
                   : system("/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null") == 0 ? "/usr/bin/python3"
                                                                                                 : NULL;
  if (py) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s -c \"import sys\nfrom prometheus_client.parser import text_string_to_metric_families as f\n"
             "fams = {m.name: m for m in f(open('%s/metrics.txt').read())}\n"
             "h = fams['loom_serve_request_latency_seconds']; assert h.type == 'histogram', h.type\n"
             "c = fams['loom_serve_requests']; assert c.type == 'counter', c.type\n"
             "n = sum(s.value for s in c.samples if s.labels.get('model_name') == 'mlp' and s.labels.get('version') == '1')\n"
             "assert n == 6, n\n\"",
             py, sv.base);
    cr_expect_eq(system(cmd), 0, "prometheus_client could not parse the metrics (%s/metrics.txt)", sv.base);
  } else {
    cr_log_warn("test_serve: python3-prometheus-client is not installed; its parse of the metrics is skipped");
  }
  free(m0);
  free(m1);
  free(m2);
  stop_server(&sv);
}

/* --enable_batching: a full queue (max_enqueued_batches x max_batch_size rows waiting) answers 503 */
Test(serve, batching_queue_limit) {
  server sv = make_base();
  const char *bp = file_text(sv.base, "batching.txt",
                             "max_batch_size { value: 2 } batch_timeout_micros { value: 3000000 }\n"
                             "num_batch_threads { value: 1 } max_enqueued_batches { value: 1 }\n");
  char args[1024], cmd[1024];
  snprintf(args, sizeof args,
           "--model_name mlp --model_base_path %s/mlp --rest_api_port=0 --host 127.0.0.1 --enable_batching=true "
           "--batching_parameters_file=%s",
           sv.base, bp);
  launch(&sv, args);
  /* one row waits up to 3 s for a second; two more rows do not fit beside it */
  snprintf(cmd, sizeof cmd,
           "curl -s -o %s/a.json -w '%%{http_code}' -d '{\"instances\": [[1, 2, 3, 4]]}' "
           "http://127.0.0.1:%d/v1/models/mlp:predict > %s/a.code &",
           sv.base, sv.port, sv.base);
  cr_assert_eq(system(cmd), 0);
  usleep(500000);
  expect_error(&sv, "/v1/models/mlp:predict", "{\"instances\": [[1, 2, 3, 4], [5, 6, 7, 8]]}", 503,
               "batching queue is full");
  char f[512];
  snprintf(f, sizeof f, "%s/a.code", sv.base);
  char *code = NULL;
  for (int i = 0; i < 100; i++) { /* the first request is answered when its batch times out */
    free(code);
    code = tu_read_file(f, NULL);
    if (code && atoi(code) == 200) break;
    usleep(100000);
  }
  cr_expect(code && atoi(code) == 200, "the waiting request: %s", code ? code : "(no reply)");
  free(code);
  char *m = get_metrics(&sv);
  cr_expect_eq(
      sample(m, "loom_serve_requests_total{model_name=\"mlp\",version=\"1\",api=\"predict\",code=\"503\"}"), 1, "%s",
      m);
  free(m);
  stop_server(&sv);
}

/* A canned DNN exported with a raw receiver (one placeholder per feature, as `loom export` does by
 * default): no warnings, a serving_default signature, so :predict needs no signature_name and
 * equals Estimator.predict; an unknown input key is named with the keys the signature takes;
 * columns of different lengths are named with their lengths, not as a failure of the model's ops */
static loom_code raw_serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  const char *names[3] = {"age", "color", "city"};
  const loom_dtype dt[3] = {LOOM_F32, LOOM_STRING, LOOM_STRING};
  int64_t d[2] = {-1, 1};
  for (int i = 0; i < 3; i++) {
    loom_output x = loom_placeholder(g, dt[i], 2, d, names[i]);
    loom_code rc = loom_features_add(f, names[i], x, st);
    if (rc == LOOM_OK) rc = loom_features_add(r, names[i], x, st);
    if (rc != LOOM_OK) return rc;
  }
  return LOOM_OK;
}
static void count_warnings(loom_log_level level, const char *msg, void *user) {
  if (level >= LOOM_LOG_WARN) {
    ++*(int *)user;
    fprintf(stderr, "test_serve: export warned: %s\n", msg);
  }
}

Test(serve, raw_export_serving_default_and_clear_errors, .timeout = 120) {
  server sv = start_server(NULL);
  char work[512], eb[600], dir[1024], dst[1024];
  snprintf(work, sizeof work, "%s/work", sv.base);
  cr_assert_eq(mkdir(work, 0755), 0);
  pc_model m;
  pc_train_export(&m, PC_DNN_CLS, work);
  loom_tensor *want = pc_predict(&m, "probabilities");
  loom_status *st = loom_status_new();
  snprintf(eb, sizeof eb, "%s/raw_export", work);
  int warnings = 0;
  loom_log_set(count_warnings, &warnings, LOOM_LOG_DEBUG);
  loom_code rc = loom_estimator_export(m.e, raw_serving_fn, NULL, eb, NULL, dir, sizeof dir, st);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  cr_assert_eq(rc, LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(warnings, 0, "the raw export printed %d warnings", warnings);
  snprintf(dst, sizeof dst, "%s/raw", work);
  cr_assert_eq(mkdir(dst, 0755), 0);
  snprintf(dst, sizeof dst, "%s/raw/1", work);
  cr_assert_eq(rename(dir, dst), 0);
  snprintf(dst, sizeof dst, "%s/raw", work);
  snprintf(dir, sizeof dir, "%s/raw", sv.base);
  cr_assert_eq(rename(dst, dir), 0);
  cr_assert(wait_available(&sv, "raw"), "the raw export was not loaded");

  /* metadata: serving_default is a predict signature over the three features */
  reply r = curl(&sv, "/v1/models/raw/metadata", NULL);
  cJSON *j = parse(&r);
  cJSON *sd = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"),
                                                                          "signature_def"),
                                                      "signature_def"),
                                  "serving_default");
  cr_assert(sd, "no serving_default: %s", r.body);
  cr_expect_str_eq(cJSON_GetObjectItem(sd, "method_name")->valuestring, "tensorflow/serving/predict");
  cr_expect(cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "inputs"), "city"), "%s", r.body);
  cr_expect(cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "outputs"), "probabilities"), "%s", r.body);
  cJSON_Delete(j);
  free(r.body);

  /* :predict without signature_name, row format: Estimator.predict's probabilities */
  char body[4096];
  size_t k = (size_t)snprintf(body, sizeof body, "{\"instances\": [");
  for (int e = 0; e < PC_ROWS; e++)
    k += (size_t)snprintf(body + k, sizeof body - k, "%s{\"age\": [%.9g], \"color\": [\"%s\"], \"city\": [\"%s\"]}",
                          e ? ", " : "", (double)PC_AGE[e], PC_COLOR[e], PC_CITY[e]);
  snprintf(body + k, sizeof body - k, "]}");
  r = curl(&sv, "/v1/models/raw:predict", body);
  cr_assert_eq(r.status, 200, "%s", r.body);
  j = parse(&r);
  cJSON *pred = cJSON_GetObjectItem(j, "predictions");
  cr_assert(cJSON_GetArraySize(pred) == PC_ROWS, "%s", r.body);
  const float *w = loom_tensor_data_const(want);
  for (int e = 0; e < PC_ROWS; e++) {
    cJSON *p = cJSON_GetObjectItem(cJSON_GetArrayItem(pred, e), "probabilities");
    cr_assert(cJSON_GetArraySize(p) == 2, "%s", r.body);
    for (int c = 0; c < 2; c++)
      cr_expect_eq((float)cJSON_GetArrayItem(p, c)->valuedouble, w[e * 2 + c], "row %d class %d", e, c);
  }
  cJSON_Delete(j);
  free(r.body);

  /* an unknown key: named, with the expected ones (row and columnar); a missing key: named */
  expect_error(&sv, "/v1/models/raw:predict",
               "{\"instances\": [{\"age\": [30], \"colour\": [\"red\"], \"city\": [\"oslo\"]}]}", 400,
               "instance 0 has an unknown input 'colour': signature serving_default takes age, color, city");
  expect_error(&sv, "/v1/models/raw:predict",
               "{\"inputs\": {\"age\": [[30]], \"color\": [[\"red\"]], \"town\": [[\"oslo\"]]}}", 400,
               "\"inputs\" has an unknown input 'town': signature serving_default takes age, color, city");
  expect_error(&sv, "/v1/models/raw:predict", "{\"instances\": [{\"age\": [30], \"color\": [\"red\"]}]}", 400,
               "instance 0 has no input city");
  /* columns of different lengths: the columns and their lengths */
  r = curl(&sv, "/v1/models/raw:predict",
           "{\"inputs\": {\"age\": [[30], [40], [50]], \"color\": [[\"red\"]], \"city\": [[\"a\"], [\"b\"], [\"c\"]]}}");
  cr_expect_eq(r.status, 400, "%s", r.body);
  cr_expect(strstr(r.body, "different lengths: age has 3 rows, color has 1"), "%s", r.body);
  cr_expect(!strstr(r.body, "Loom") && !strstr(r.body, "piece"), "an op's message leaked: %s", r.body);
  free(r.body);
  /* the same columns, all of length 2: fine */
  r = curl(&sv, "/v1/models/raw:predict",
           "{\"inputs\": {\"age\": [[30], [40]], \"color\": [[\"red\"], [\"blue\"]], \"city\": [[\"a\"], [\"b\"]]}}");
  cr_expect_eq(r.status, 200, "%s", r.body);
  free(r.body);
  loom_tensor_free(want);
  loom_status_free(st);
  pc_free(&m);
  stop_server(&sv);
}
