/* parse_canned_util.h - canned estimators trained on a few feature columns
 * (numeric "age", vocabulary "color", hash bucket "city", and for the linear
 * models their cross) and exported with the parsing serving input receiver
 * (loom_fc_parsing_receiver_new); the rows as serialized tf.Example written
 * by loom's TFRecord writer; Estimator.predict on the same rows as the
 * reference. Used by test_parse_example.c and test_serve.c. */
#ifndef LOOM_TEST_PARSE_CANNED_UTIL_H
#define LOOM_TEST_PARSE_CANNED_UTIL_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "test_util.h"

enum { PC_ROWS = 8 };
static const float PC_AGE[PC_ROWS] = {21.5f, 35.25f, 48.75f, 62.5f, 19.125f, 33.5f, 57.75f, 44.25f};
static const char *const PC_COLOR[PC_ROWS] = {"red", "green", "blue", "white", "green", "red", "white", "blue"};
static const char *const PC_CITY[PC_ROWS] = {"paris", "oslo", "rome", "lima", "oslo", "lima", "paris", "rome"};
static const char *const PC_COLORS[4] = {"red", "green", "blue", "white"};

typedef enum { PC_LINEAR_CLS = 0, PC_DNN_CLS = 1, PC_LINEAR_REG = 2, PC_DNN_REG = 3 } pc_kind;

static int pc_color_index(const char *c) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(c, PC_COLORS[i])) return i;
  return -1;
}
/* classifiers: red and green are 1; regressors: 1.5 * colour index + age / 50 */
static float pc_label(pc_kind k, int r) {
  int ci = pc_color_index(PC_COLOR[r]);
  return k <= PC_DNN_CLS ? (float)(ci < 2) : 1.5f * (float)ci + PC_AGE[r] / 50.0f;
}

typedef struct pc_input {
  pc_kind kind;
  int repeat; /* rows repeated (training) */
} pc_input;

static loom_dataset *pc_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  const pc_input *in = user;
  int n = PC_ROWS * in->repeat;
  int64_t d[2] = {n, 1};
  loom_tensor *age = loom_tensor_new(LOOM_F32, 2, d, NULL), *color = loom_tensor_new(LOOM_STRING, 2, d, NULL),
              *city = loom_tensor_new(LOOM_STRING, 2, d, NULL), *y = loom_tensor_new(LOOM_F32, 2, d, NULL);
  for (int i = 0; i < n; i++) {
    int r = i % PC_ROWS;
    ((float *)loom_tensor_data(age))[i] = PC_AGE[r];
    loom_tensor_set_string(color, i, PC_COLOR[r], strlen(PC_COLOR[r]), NULL);
    loom_tensor_set_string(city, i, PC_CITY[r], strlen(PC_CITY[r]), NULL);
    ((float *)loom_tensor_data(y))[i] = pc_label(in->kind, r);
  }
  const char *names[4] = {"age", "city", "color", "label"};
  const loom_tensor *cols[4] = {age, city, color, y};
  loom_dataset *ds = loom_dataset_from_tensors(mode == LOOM_MODE_PREDICT ? 3 : 4, names, cols,
                                               mode == LOOM_MODE_PREDICT ? NULL : "label", st);
  loom_tensor_free(age), loom_tensor_free(color), loom_tensor_free(city), loom_tensor_free(y);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, mode == LOOM_MODE_PREDICT ? PC_ROWS : 8, 0, st);
  return ds;
}

typedef struct pc_model {
  pc_kind kind;
  loom_fc_set *set;
  loom_estimator *e;
  loom_parsing_receiver *recv;
  char export_dir[1024];
} pc_model;

/* trains model kind under work and exports it with the parsing receiver (m->export_dir) */
static void pc_train_export(pc_model *m, pc_kind kind, const char *work) {
  loom_status *st = loom_status_new();
  memset(m, 0, sizeof *m);
  m->kind = kind;
  m->set = loom_fc_set_new();
  const loom_fc *age = loom_fc_numeric(m->set, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  const loom_fc *color = loom_fc_vocabulary_list(m->set, "color", 4, PC_COLORS, 0, -1, st);
  const loom_fc *city = loom_fc_hash_bucket(m->set, "city", 10, LOOM_STRING, st);
  cr_assert(age && color && city, "%s", loom_status_message(st));
  const loom_fc *pair[2] = {color, NULL}; /* TF's rule: a hashed column is crossed by its raw key */
  const char *const raw[2] = {NULL, "city"};
  const loom_fc *cross = loom_fc_crossed(m->set, 2, raw, pair, 20, 0, st);
  cr_assert(cross, "%s", loom_status_message(st));
  char md[1024];
  snprintf(md, sizeof md, "%s/model_%d", work, (int)kind);
  if (kind == PC_LINEAR_CLS || kind == PC_LINEAR_REG) {
    const loom_fc *cols[4] = {age, color, city, cross};
    loom_linear_options o = loom_linear_options_default();
    o.model_dir = md;
    o.nfeature_columns = 4;
    o.feature_columns = cols;
    m->e = kind == PC_LINEAR_CLS ? loom_linear_classifier_new(&o, st) : loom_linear_regressor_new(&o, st);
    cr_assert(m->e, "%s", loom_status_message(st));
    m->recv = loom_fc_parsing_receiver_new(4, cols, st);
  } else {
    const loom_fc *emb = loom_fc_embedding(m->set, color, 3, NULL, st), *ind = loom_fc_indicator(m->set, city, st);
    cr_assert(emb && ind, "%s", loom_status_message(st));
    const loom_fc *cols[3] = {age, emb, ind};
    static const int64_t hidden[2] = {8, 4};
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = md;
    o.nfeature_columns = 3;
    o.feature_columns = cols;
    o.nhidden_units = 2;
    o.hidden_units = hidden;
    o.optimizer.name = "Adagrad";
    o.optimizer.learning_rate = 0.1;
    m->e = kind == PC_DNN_CLS ? loom_dnn_classifier_new(&o, st) : loom_dnn_regressor_new(&o, st);
    cr_assert(m->e, "%s", loom_status_message(st));
    m->recv = loom_fc_parsing_receiver_new(3, cols, st);
  }
  cr_assert(m->recv, "%s", loom_status_message(st));
  pc_input in = {kind, 4};
  loom_train_options to = loom_train_options_default();
  to.steps = 80;
  cr_assert_eq(loom_estimator_train(m->e, pc_input_fn, &in, &to, st), LOOM_OK, "%s", loom_status_message(st));
  char eb[1100];
  snprintf(eb, sizeof eb, "%s/export_%d", work, (int)kind);
  cr_assert_eq(loom_estimator_export(m->e, loom_parsing_serving_input_fn, m->recv, eb, NULL, m->export_dir,
                                     sizeof m->export_dir, st),
               LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}

static void pc_free(pc_model *m) {
  loom_estimator_free(m->e);
  loom_parsing_receiver_free(m->recv);
  loom_fc_set_free(m->set);
}

/* Estimator.predict's key on the PC_ROWS rows (one batch); caller frees */
static loom_tensor *pc_predict(pc_model *m, const char *key) {
  loom_status *st = loom_status_new();
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  pc_input in = {m->kind, 1};
  loom_prediction_iter *it = loom_estimator_predict(m->e, pc_input_fn, &in, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  cr_assert_eq(loom_prediction_next(it, st), LOOM_OK, "%s", loom_status_message(st));
  const loom_tensor *v = loom_prediction_get(it, key);
  cr_assert(v, "no prediction %s", key);
  loom_tensor *c = loom_tensor_copy(v, st);
  cr_assert(c, "%s", loom_status_message(st));
  loom_prediction_iter_free(it);
  loom_status_free(st);
  return c;
}

/* the rows as serialized tf.Example (loom's TFRecord writer; features age [1] float, color and
 * city [1] bytes), rows[r] malloc'd */
static void pc_serialize(const char *dir, char **rows, size_t *lens) {
  char path[1024];
  snprintf(path, sizeof path, "%s/pc_rows.tfrecord", dir);
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w, "%s", loom_status_message(st));
  for (int r = 0; r < PC_ROWS; r++) {
    int64_t d1[1] = {1};
    loom_tensor *a = loom_tensor_from_data(LOOM_F32, 1, d1, &PC_AGE[r], NULL);
    loom_tensor *c = loom_tensor_new(LOOM_STRING, 1, d1, NULL), *t = loom_tensor_new(LOOM_STRING, 1, d1, NULL);
    loom_tensor_set_string(c, 0, PC_COLOR[r], strlen(PC_COLOR[r]), NULL);
    loom_tensor_set_string(t, 0, PC_CITY[r], strlen(PC_CITY[r]), NULL);
    const char *names[3] = {"age", "color", "city"};
    const loom_tensor *vals[3] = {a, c, t};
    cr_assert_eq(loom_tfrecord_writer_write_example(w, 3, names, vals, st), LOOM_OK, "%s", loom_status_message(st));
    loom_tensor_free(a), loom_tensor_free(c), loom_tensor_free(t);
  }
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  size_t fn = 0, off = 0;
  char *f = tu_read_file(path, &fn);
  cr_assert(f);
  for (int r = 0; r < PC_ROWS; r++) {
    uint64_t len;
    cr_assert(off + 16 <= fn);
    memcpy(&len, f + off, 8); /* TFRecord framing: u64 length, u32 crc, data, u32 crc */
    rows[r] = malloc(len ? len : 1);
    memcpy(rows[r], f + off + 12, len);
    lens[r] = (size_t)len;
    off += 16 + len;
  }
  cr_assert_eq(off, fn);
  free(f);
  loom_status_free(st);
}

#endif
