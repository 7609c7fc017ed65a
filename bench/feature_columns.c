/* Feature columns from CSV to the input layer: examples/s of a census-style
 * set of columns (6 numeric, 2 bucketized, 4 vocabulary lists as
 * indicators, 2 hashed columns as embeddings of dimension 8, 1 cross as an
 * indicator) over a census-like CSV (scripts/gen_census_csv.py): dataset
 * read + batch + one session run of input_layer per batch, one thread.
 *   --csv PATH (required)  --batch N (256)  --epochs N (3)  --threads N (1)
 * Output: key=value lines (examples_per_sec = the best epoch, rows, width,
 * batch, epoch_sec_*). bench/peers/tf_feature_columns.py is the TF peer and
 * scripts/bench_feature_columns.sh runs both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "loom/loom_feature_columns.h"
#include "bench_util.h"

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "feature_columns: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

static const char *NUMERIC[] = {"age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"};
static const char *WORKCLASS[] = {"Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
                                  "State-gov", "Without-pay", "Never-worked"};
static const char *EDUCATION[] = {"Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
                                  "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate",
                                  "5th-6th", "Preschool"};
static const char *MARITAL[] = {"Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                                "Married-spouse-absent", "Married-AF-spouse"};
static const char *RELATIONSHIP[] = {"Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"};
#define NV(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

int main(int argc, char **argv) {
  const char *csv = bu_flag(argc, argv, "--csv", NULL);
  int64_t batch = atoll(bu_flag(argc, argv, "--batch", "256"));
  int epochs = atoi(bu_flag(argc, argv, "--epochs", "3"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  /* --cached 1: read every batch first and time only the input_layer runs
   * (run_examples_per_sec; what the columns themselves cost) */
  int cached = atoi(bu_flag(argc, argv, "--cached", "0"));
  if (!csv) {
    fprintf(stderr, "usage: feature_columns --csv census.csv [--batch 256] [--epochs 3] [--threads 1]\n");
    return 2;
  }
  loom_status *st = loom_status_new();
  /* the CSV: 13 columns, all selected; numeric ones as float32 */
  static const char *names[] = {"age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
                                "occupation", "relationship", "capital_gain", "capital_loss", "hours_per_week",
                                "native_country", "label"};
  loom_csv_column cc[13];
  for (int i = 0; i < 13; i++) {
    int str = i == 1 || i == 3 || i == 5 || i == 6 || i == 7 || i == 11;
    cc[i] = (loom_csv_column){.name = names[i],
                              .dtype = str ? LOOM_STRING : (i == 12 ? LOOM_I32 : LOOM_F32),
                              .default_value = str ? "" : "0",
                              .select = 1};
  }
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 13, cc, "label"};
  loom_dataset *ds = loom_dataset_csv(1, &csv, &o, st);
  if (!ds) die("csv", st);
  ds = loom_dataset_batch(ds, batch, 0, st);
  if (!ds) die("batch", st);

  /* the graph: a placeholder per feature, the columns, input_layer */
  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  int nc = loom_dataset_num_components(ds);
  loom_output *ph = calloc((size_t)nc, sizeof(loom_output));
  for (int i = 0; i < nc; i++) {
    if (i == loom_dataset_label_index(ds)) continue;
    int64_t d = -1;
    ph[i] = loom_placeholder(g, loom_dataset_component_dtype(ds, i), 1, &d, loom_dataset_component_name(ds, i));
    if (loom_features_add(f, loom_dataset_component_name(ds, i), ph[i], st)) die("features", st);
  }
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *cols[16];
  int n = 0;
  const loom_fc *num[6];
  for (int i = 0; i < 6; i++) cols[n++] = num[i] = loom_fc_numeric(s, NUMERIC[i], 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  float ab[] = {18, 25, 30, 35, 40, 45, 50, 55, 60, 65}, hb[] = {20, 30, 40, 50, 60};
  cols[n++] = loom_fc_bucketized(s, num[0], 10, ab, st);
  cols[n++] = loom_fc_bucketized(s, num[5], 5, hb, st);
  const loom_fc *edu = loom_fc_vocabulary_list(s, "education", NV(EDUCATION), EDUCATION, 1, -1, st);
  cols[n++] = loom_fc_indicator(s, loom_fc_vocabulary_list(s, "workclass", NV(WORKCLASS), WORKCLASS, 1, -1, st), st);
  cols[n++] = loom_fc_indicator(s, edu, st);
  cols[n++] = loom_fc_indicator(s, loom_fc_vocabulary_list(s, "marital_status", NV(MARITAL), MARITAL, 1, -1, st), st);
  cols[n++] =
      loom_fc_indicator(s, loom_fc_vocabulary_list(s, "relationship", NV(RELATIONSHIP), RELATIONSHIP, 1, -1, st), st);
  const loom_fc *occ = loom_fc_hash_bucket(s, "occupation", 1000, LOOM_STRING, st);
  cols[n++] = loom_fc_embedding(s, occ, 8, NULL, st);
  cols[n++] = loom_fc_embedding(s, loom_fc_hash_bucket(s, "native_country", 1000, LOOM_STRING, st), 8, NULL, st);
  const char *ck[] = {"education", "occupation"};
  cols[n++] = loom_fc_indicator(s, loom_fc_crossed(s, 2, ck, NULL, 100, 0, st), st);
  for (int i = 0; i < n; i++)
    if (!cols[i]) die("columns", st);
  loom_output out;
  if (loom_fc_input_layer(g, f, n, cols, NULL, 1, &out, st)) die("input_layer", st);
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *sess = loom_session_new(g, &so, st);
  if (!sess) die("session", st);
  loom_node *init = loom_global_variables_initializer(g);
  if (loom_session_run(sess, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) die("init", st);

  loom_tensor **vals = calloc((size_t)nc, sizeof(loom_tensor *));
  loom_output *feeds = calloc((size_t)nc, sizeof(loom_output));
  loom_tensor **fv = calloc((size_t)nc, sizeof(loom_tensor *));
  loom_tensor *y = NULL;
  double best = 0, best_data = 0, best_run = 0;
  int64_t rows = 0;
  if (cached) {
    /* all batches in memory, then epochs of session runs only */
    int nb = 0, cap = 64;
    loom_tensor **all = calloc((size_t)cap * (size_t)nc, sizeof(loom_tensor *));
    for (;;) {
      if (nb == cap) {
        all = realloc(all, (size_t)cap * 2 * (size_t)nc * sizeof(loom_tensor *));
        memset(all + (size_t)cap * (size_t)nc, 0, (size_t)cap * (size_t)nc * sizeof(loom_tensor *));
        cap *= 2;
      }
      loom_code rc = loom_dataset_next(ds, all + (size_t)nb * (size_t)nc, st);
      if (rc == LOOM_OUT_OF_RANGE) break;
      if (rc) die("next", st);
      nb++;
    }
    for (int e = 0; e < epochs; e++) {
      rows = 0;
      double t0 = bu_now_us();
      for (int b = 0; b < nb; b++) {
        int k = 0;
        for (int i = 0; i < nc; i++)
          if (ph[i].node) {
            feeds[k] = ph[i];
            fv[k++] = all[(size_t)b * (size_t)nc + (size_t)i];
          }
        if (loom_session_run(sess, feeds, fv, k, &out, &y, 1, NULL, 0, st)) die("run", st);
        rows += loom_tensor_dim(y, 0);
      }
      double sec = (bu_now_us() - t0) / 1e6;
      if (rows / sec > best_run) best_run = rows / sec;
    }
    printf("impl=loom\nmode=cached\nrows=%lld\nbatch=%lld\nwidth=%lld\nrun_examples_per_sec=%.1f\n", (long long)rows,
           (long long)batch, (long long)loom_tensor_dim(y, 1), best_run);
    for (size_t i = 0; i < (size_t)nb * (size_t)nc; i++) loom_tensor_free(all[i]);
    free(all);
    epochs = 0;
  }
  for (int e = 0; e < epochs; e++) {
    if (loom_dataset_reset(ds, st)) die("reset", st);
    rows = 0;
    double t0 = bu_now_us(), data_us = 0, run_us = 0;
    for (;;) {
      double ta = bu_now_us();
      loom_code rc = loom_dataset_next(ds, vals, st);
      double tb = bu_now_us();
      data_us += tb - ta;
      if (rc == LOOM_OUT_OF_RANGE) break;
      if (rc) die("next", st);
      int k = 0;
      for (int i = 0; i < nc; i++)
        if (ph[i].node) {
          feeds[k] = ph[i];
          fv[k++] = vals[i];
        }
      if (loom_session_run(sess, feeds, fv, k, &out, &y, 1, NULL, 0, st)) die("run", st);
      run_us += bu_now_us() - tb;
      rows += loom_tensor_dim(y, 0);
    }
    double sec = (bu_now_us() - t0) / 1e6;
    printf("epoch_sec_%d=%.4f\n", e, sec);
    if (rows / sec > best) {
      best = rows / sec;
      best_data = rows / (data_us / 1e6);
      best_run = rows / (run_us / 1e6);
    }
  }
  if (cached) goto done;
  printf("impl=loom\nrows=%lld\nbatch=%lld\nwidth=%lld\nthreads=%d\nexamples_per_sec=%.1f\n"
         "data_examples_per_sec=%.1f\nrun_examples_per_sec=%.1f\npeak_rss_mb=%.1f\n",
         (long long)rows, (long long)batch, (long long)loom_tensor_dim(y, 1), threads, best, best_data, best_run,
         bu_peak_rss_mb());
done:
  for (int i = 0; i < nc; i++) loom_tensor_free(vals[i]);
  loom_tensor_free(y);
  free(vals);
  free(feeds);
  free(fv);
  free(ph);
  loom_session_free(sess);
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
  loom_dataset_free(ds);
  loom_status_free(st);
  return 0;
}
