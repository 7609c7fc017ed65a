/* TensorBoard as the client: a short Estimator training
 * writes its event files; TensorBoard's own reader (EventAccumulator, from
 * PyPI's tensorboard, through tests/tensorboard_check.py) loads them and
 * must see what loom's reader sees: the scalars (loss, global_step/sec),
 * the histogram summary, the image summary (1x1 PNGs), and the graph (GraphDef with loom's node and op
 * names, inputs that resolve, accepted by the graph plugin's
 * prepare_graph_for_ui). Python: the TF virtualenv when it exists (it
 * includes tensorboard), else scripts/peer_venv.sh tb (made once, cached);
 * skipped with a message when neither can be had (PyPI unreachable). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "test_util.h"

#define NX 16
#define NF 3
static float X[NX * NF], Y[NX];

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  (void)user;
  for (int i = 0; i < NX; i++) {
    Y[i] = 0.25f;
    for (int j = 0; j < NF; j++) {
      X[i * NF + j] = (float)((i * 5 + j * 3) % 7) / 7.0f - 0.3f;
      Y[i] += (float)(j + 1) * X[i * NF + j];
    }
  }
  int64_t xd[2] = {NX, NF}, yd[2] = {NX, 1};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, Y, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 4, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)params;
  (void)cfg;
  (void)user;
  (void)st;
  loom_output x = loom_features_get(f, "x");
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_constant(0.1);
  loom_output pred = loom_layers_dense(g, x, 1, &d, "linear");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output zero = {NULL, 0};
  loom_output loss = loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_summary_histogram(g, "pred_hist", pred);
  const int64_t img[4] = {-1, 1, 1, 1}; /* each prediction as a 1x1 gray image */
  loom_summary_image(g, "pred_img", loom_reshape(g, pred, 4, img, NULL), 2);
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.05f, "lr"));
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return LOOM_OK;
}

/* What loom's reader sees. */
#define CAP 256
typedef struct seen {
  int ns, nh, ngraph;
  char stag[CAP][64];
  int64_t sstep[CAP];
  double sval[CAP];
  char htag[CAP][64];
  int64_t hstep[CAP];
  double h[CAP][5]; /* min max num sum sum_squares */
  int hbuckets[CAP];
} seen;

static void read_loom(const char *dir, seen *s) {
  memset(s, 0, sizeof *s);
  char cmd[512], path[1024];
  snprintf(cmd, sizeof cmd, "ls %s/events.out.tfevents.* 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  while (fgets(path, sizeof path, p)) {
    path[strcspn(path, "\n")] = 0;
    loom_event_reader *r = loom_event_reader_open(path, NULL);
    cr_assert(r, "open %s", path);
    const loom_event *ev;
    while (loom_event_reader_next(r, &ev, NULL) == LOOM_OK) {
      if (ev->graph_def) s->ngraph++;
      for (int i = 0; i < ev->nvalues; i++) {
        const loom_event_value *v = &ev->values[i];
        if (v->kind == 0 && s->ns < CAP) {
          snprintf(s->stag[s->ns], 64, "%s", v->tag);
          s->sstep[s->ns] = ev->step;
          s->sval[s->ns++] = v->simple_value;
        } else if (v->kind == 1 && s->nh < CAP) {
          snprintf(s->htag[s->nh], 64, "%s", v->tag);
          s->hstep[s->nh] = ev->step;
          double hv[5] = {v->hmin, v->hmax, v->hnum, v->hsum, v->hsum_squares};
          memcpy(s->h[s->nh], hv, sizeof hv);
          s->hbuckets[s->nh++] = v->nbuckets;
        }
      }
    }
    loom_event_reader_free(r);
  }
  pclose(p);
}

/* The python that has tensorboard, or "" (then the caller skips). */
static void find_python(char *py, size_t cap) {
  FILE *p = popen("root=\"${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}\"; "
                  "if [ -f \"$root/tf/.ok\" ]; then echo \"$root/tf/bin/python\"; else "
                  "mkdir -p \"$root\" && flock \"$root/.tb.lock\" timeout 600 bash scripts/peer_venv.sh tb 2>/dev/null; fi",
                  "r");
  cr_assert(p);
  py[0] = 0;
  if (!fgets(py, (int)cap, p)) py[0] = 0;
  int rc = pclose(p);
  py[strcspn(py, "\n")] = 0;
  if (rc != 0) py[0] = 0;
}

static int count_tag(const seen *s, const char *tag) {
  int n = 0;
  for (int i = 0; i < s->ns; i++) n += !strcmp(s->stag[i], tag);
  return n;
}

Test(tensorboard, event_accumulator_reads_what_loom_wrote, .timeout = 700) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tb");
  loom_status *st = loom_status_new();
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.prefetch = 0;
  c.save_summary_steps = 5;
  c.log_step_count_steps = 5;
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_train_options o = loom_train_options_default();
  o.steps = 20;
  cr_assert_eq(loom_estimator_train(e, input_fn, NULL, &o, st), LOOM_OK, "%s", loom_status_message(st));
  loom_estimator_free(e);
  seen s;
  read_loom(dir, &s);
  /* what loom wrote, by loom's reader */
  cr_assert_eq(count_tag(&s, "loss"), 4, "loss at steps 0, 5, 10, 15");
  cr_assert_geq(count_tag(&s, "global_step/sec"), 1);
  cr_assert_eq(s.nh, 4, "pred_hist at steps 0, 5, 10, 15: %d", s.nh);
  cr_assert_eq(s.ngraph, 1, "one graph event");

  char py[1024];
  find_python(py, sizeof py);
  if (!py[0]) {
    fprintf(stderr, "SKIPPED: TensorBoard reading loom's event files: no virtualenv with tensorboard "
                    "(scripts/peer_venv.sh tb failed: PyPI unreachable?)\n");
    loom_status_free(st);
    tu_rmtree(dir);
    cr_skip_test("no tensorboard virtualenv");
  }
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "timeout 300 '%s' tests/tensorboard_check.py '%s' 2>&1", py, dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  size_t cap = 1 << 22, len = 0;
  char *all = malloc(cap);
  size_t k;
  while ((k = fread(all + len, 1, cap - 1 - len, p)) > 0) len += k;
  all[len] = 0;
  int rc = pclose(p);
  cr_assert_eq(rc, 0, "tensorboard_check.py failed:\n%.4000s", all);
  char *line = strstr(all, "tensorboard_check: {");
  cr_assert(line, "no result line:\n%.4000s", all);
  cJSON *j = cJSON_Parse(line + strlen("tensorboard_check: "));
  cr_assert(j, "bad JSON");

  /* scalars: every value loom wrote, same step, same float */
  cJSON *sc = cJSON_GetObjectItem(j, "scalars");
  int nmatched = 0;
  for (int i = 0; i < s.ns; i++) {
    cJSON *lst = cJSON_GetObjectItem(sc, s.stag[i]);
    cr_assert(lst, "TensorBoard has no scalar tag '%s'", s.stag[i]);
    int found = 0;
    cJSON *pt;
    cJSON_ArrayForEach(pt, lst) {
      if ((int64_t)cJSON_GetArrayItem(pt, 0)->valuedouble == s.sstep[i] &&
          (float)cJSON_GetArrayItem(pt, 1)->valuedouble == (float)s.sval[i])
        found = 1;
    }
    cr_expect(found, "scalar %s at step %lld = %g not seen by TensorBoard", s.stag[i], (long long)s.sstep[i], s.sval[i]);
    nmatched += found;
  }
  cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sc, "loss")), 4);
  cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sc, "global_step/sec")), count_tag(&s, "global_step/sec"));
  for (int i = 0; i < 4; i++)
    cr_expect(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(sc, "loss"), i), 1)->valuedouble > 0);

  /* histograms: min, max, num, sum, sum_squares, bucket count; buckets add up to num */
  cJSON *hl = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "histograms"), "pred_hist");
  cr_assert(hl, "TensorBoard has no histogram 'pred_hist'");
  cr_assert_eq(cJSON_GetArraySize(hl), s.nh);
  for (int i = 0; i < s.nh; i++) {
    cJSON *hv = cJSON_GetArrayItem(hl, i);
    cr_expect_eq((int64_t)cJSON_GetArrayItem(hv, 0)->valuedouble, s.hstep[i]);
    for (int q = 0; q < 5; q++)
      cr_expect_eq(cJSON_GetArrayItem(hv, 1 + q)->valuedouble, s.h[i][q], "histogram %d field %d: %.17g vs %.17g", i, q,
                   cJSON_GetArrayItem(hv, 1 + q)->valuedouble, s.h[i][q]);
    cr_expect_eq(cJSON_GetArrayItem(hv, 6)->valueint, s.hbuckets[i]);
    cr_expect_eq(cJSON_GetArrayItem(hv, 7)->valuedouble, 4.0, "bucket counts add up to the batch of 4");
  }

  /* images: "pred_img/image/0" and "/1" (max_outputs 2 of the batch of 4), 1x1 PNGs, written with the histograms */
  for (int im = 0; im < 2; im++) {
    char tag[32];
    snprintf(tag, sizeof tag, "pred_img/image/%d", im);
    cJSON *il = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "images"), tag);
    cr_assert(il, "TensorBoard has no image '%s'", tag);
    cr_assert_eq(cJSON_GetArraySize(il), s.nh);
    for (int i = 0; i < s.nh; i++) {
      cJSON *iv = cJSON_GetArrayItem(il, i);
      cr_expect_eq((int64_t)cJSON_GetArrayItem(iv, 0)->valuedouble, s.hstep[i]);
      cr_expect_eq(cJSON_GetArrayItem(iv, 1)->valueint, 1);
      cr_expect_eq(cJSON_GetArrayItem(iv, 2)->valueint, 1);
      cr_expect(cJSON_IsTrue(cJSON_GetArrayItem(iv, 3)), "image %s %d is a PNG", tag, i);
    }
  }
  cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "images")), 2);

  /* the graph */
  cJSON *gr = cJSON_GetObjectItem(j, "graph");
  cr_assert(gr && cJSON_IsArray(gr), "TensorBoard found no graph");
  int nn = cJSON_GetArraySize(gr);
  cr_expect_gt(nn, 20, "%d nodes", nn);
  cr_expect_eq(cJSON_GetObjectItem(j, "ui_graph_nodes")->valueint, nn, "the graph plugin keeps every node");
  int has_matmul = 0, has_gstep = 0, has_hist = 0, nin = 0;
  cJSON *node;
  cJSON_ArrayForEach(node, gr) {
    const char *name = cJSON_GetArrayItem(node, 0)->valuestring, *op = cJSON_GetArrayItem(node, 1)->valuestring;
    cr_expect(name[0] && op[0], "node '%s' op '%s'", name, op);
    if (!strcmp(op, "MatMul") && !strncmp(name, "linear/", 7)) has_matmul = 1;
    if (!strcmp(name, "global_step")) has_gstep = 1;
    if (strstr(name, "pred_hist")) has_hist = 1;
    cJSON *in;
    cJSON_ArrayForEach(in, cJSON_GetArrayItem(node, 2)) {
      /* "name", "name:1" or "^name": the producer is a node of the graph */
      char ref[512];
      snprintf(ref, sizeof ref, "%s", in->valuestring + (in->valuestring[0] == '^'));
      char *colon = strrchr(ref, ':');
      if (colon) *colon = 0;
      int ok = 0;
      cJSON *other;
      cJSON_ArrayForEach(other, gr) ok |= !strcmp(cJSON_GetArrayItem(other, 0)->valuestring, ref);
      cr_expect(ok, "node %s: input '%s' is not a node", name, in->valuestring);
      nin++;
    }
  }
  cr_expect(has_matmul, "a MatMul node under linear/");
  cr_expect(has_gstep, "the global_step node");
  cr_expect(has_hist, "the pred_hist summary node");
  cr_expect_gt(nin, nn / 2, "edges: %d", nin);
  fprintf(stderr, "tensorboard: %d scalars, %d histograms, graph of %d nodes and %d edges read by EventAccumulator\n",
          nmatched, s.nh, nn, nin);
  cJSON_Delete(j);
  free(all);
  loom_status_free(st);
  tu_rmtree(dir);
}
