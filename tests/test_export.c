/* Graph serialization (round trips run bitwise equal, damaged buffers fail
 * cleanly: every truncation, random flips, flips behind a recomputed CRC),
 * export (pruning, signatures.json, variables), and the resident predictor
 * (bitwise equal to the training session, introspection, input checks,
 * missing/damaged files, concurrent callers, no steady-state allocation). */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_util.h"
#include "base/crc32c.h"
#include "engine/engine_impl.h"

/* ---------------------------------------------------------------- helpers */
static int same_bits(const loom_tensor *a, const loom_tensor *b) {
  if (loom_tensor_dtype(a) != loom_tensor_dtype(b) || loom_tensor_ndim(a) != loom_tensor_ndim(b)) return 0;
  for (int i = 0; i < loom_tensor_ndim(a); i++)
    if (loom_tensor_dim(a, i) != loom_tensor_dim(b, i)) return 0;
  if (loom_tensor_dtype(a) == LOOM_STRING) {
    for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
      size_t la, lb;
      const char *sa = loom_tensor_get_string(a, i, &la), *sb = loom_tensor_get_string(b, i, &lb);
      if (la != lb || (la && memcmp(sa, sb, la))) return 0;
    }
    return 1;
  }
  return loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
         !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}
static void fill_f32(loom_tensor *t, uint32_t seed) {
  float *p = loom_tensor_data(t);
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (float)((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}
static void put_u32le(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void fix_crc(uint8_t *b, size_t n) { put_u32le(b + n - 4, loom__crc32c_masked(b, n - 4)); }

/* ======================================================================
 * A graph with many op kinds
 * ====================================================================== */
typedef struct zoo {
  loom_graph *g;
  loom_output x, img;  /* placeholders [-1,4] f32, [-1,5,5,2] f32 */
  int nfetch;
  const char *fetch[24];
} zoo;

static void build_zoo(zoo *z) {
  loom_graph *g = z->g = loom_graph_new();
  loom_graph_set_random_seed(g, 42);
  int64_t xd[2] = {-1, 4}, id[4] = {-1, 5, 5, 2};
  z->x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  z->img = loom_placeholder(g, LOOM_F32, 4, id, "img");
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = 0.25f * (float)i - 1.3f;
  int64_t wd[2] = {4, 3};
  loom_output W = loom_const_data(g, LOOM_F32, 2, wd, w, "W");
  loom_output mm = loom_matmul(g, z->x, W, 0, 0, "mm");
  loom_output b = loom_const_data(g, LOOM_F32, 1, (int64_t[]){3}, (float[]){0.5f, -0.25f, 1.0f}, "b");
  loom_output h = loom_tanh(g, loom_add(g, mm, b, NULL), "h");
  loom_output lr = loom_leaky_relu(g, mm, 0.3, "lrelu");
  loom_output cat = loom_concat(g, 2, (loom_output[]){h, lr}, 1, "cat");
  loom_output rs = loom_reshape(g, cat, 3, (int64_t[]){-1, 3, 2}, "rs");
  loom_output tr = loom_transpose(g, rs, 3, (int64_t[]){0, 2, 1}, "tr");
  loom_output sm = loom_softmax(g, loom_reshape(g, tr, 2, (int64_t[]){-1, 6}, NULL), "sm");
  loom_output sum = loom_reduce_sum(g, sm, 1, (int64_t[]){1}, 1, "sum");
  loom_output am = loom_argmax(g, cat, 1, LOOM_I64, "am");
  loom_output parts[2];
  loom_split(g, cat, 2, 1, parts, "split");
  /* conv + pool on the image */
  float f[3 * 3 * 2 * 4];
  for (int i = 0; i < 72; i++) f[i] = (float)((i * 7) % 11) / 11.0f - 0.4f;
  loom_output F = loom_const_data(g, LOOM_F32, 4, (int64_t[]){3, 3, 2, 4}, f, "F");
  loom_output conv = loom_conv2d(g, z->img, F, (int64_t[]){1, 1, 1, 1}, LOOM_PADDING_SAME, (int64_t[]){1, 1, 1, 1},
                                 "conv");
  loom_output pool = loom_max_pool(g, loom_relu(g, conv, NULL), (int64_t[]){1, 2, 2, 1}, (int64_t[]){1, 2, 2, 1},
                                   LOOM_PADDING_VALID, "pool");
  /* constants of several dtypes */
  double dv = 2.5;
  loom_output c64 = loom_const_data(g, LOOM_F64, 0, NULL, &dv, "c64");
  loom_output c64f = loom_cast(g, loom_mul(g, c64, c64, NULL), LOOM_F32, "c64f");
  loom_output scaled = loom_mul(g, pool, c64f, "scaled");
  int32_t iv[3] = {1, -2, 3};
  loom_output ci32 = loom_const_data(g, LOOM_I32, 1, (int64_t[]){3}, iv, "ci32");
  loom_output ci32x = loom_add(g, ci32, ci32, "ci32x");
  loom_output ci64 = loom_const_i64(g, -7, "ci64");
  uint8_t u8[4] = {0, 7, 200, 255};
  loom_output cu8 = loom_const_data(g, LOOM_U8, 1, (int64_t[]){4}, u8, "cu8");
  loom_output cu8f = loom_cast(g, cu8, LOOM_F32, "cu8f");
  uint8_t bl[2] = {1, 0};
  loom_output cb = loom_const_data(g, LOOM_BOOL, 1, (int64_t[]){2}, bl, "cbool");
  loom_output cbf = loom_cast(g, cb, LOOM_F32, "cboolf");
  loom_tensor *strs = loom_tensor_new(LOOM_STRING, 1, (int64_t[]){3}, NULL);
  loom_tensor_set_string(strs, 0, "hello", 5, NULL);
  loom_tensor_set_string(strs, 1, "", 0, NULL);
  loom_tensor_set_string(strs, 2, "a\0b", 3, NULL);
  loom_output cs = loom_const(g, strs, "cstr");
  loom_tensor_free(strs);
  loom_output csid = loom_identity(g, cs, "cstr_id");
  /* seeded randomness (same sequence in both sessions) */
  loom_output rnd = loom_random_uniform(g, 2, (int64_t[]){2, 3}, LOOM_F32, -1, 1, 7, 9, "rnd");
  /* control dependencies: a group and a control scope in a name scope */
  loom_node *grp = loom_group(g, 1, &h.node, "grp");
  loom_graph_push_scope(g, "block");
  loom_graph_push_control_deps(g, 1, &grp);
  loom_output dep = loom_mul(g, sum, loom_const_f32(g, 3.0f, "three"), "dep");
  loom_graph_pop_control_deps(g);
  loom_graph_pop_scope(g);
  const char *names[] = {"mm",   "h",      "lrelu", "cat",   "tr",     "sm",   "sum",     "am",    "split",
                         "split:1", "conv", "pool",  "scaled", "ci32x", "ci64", "cu8f",    "cboolf", "cstr",
                         "cstr_id", "rnd",  "block/dep"};
  z->nfetch = (int)(sizeof names / sizeof names[0]);
  for (int i = 0; i < z->nfetch; i++) z->fetch[i] = names[i];
  (void)ci64;
  (void)scaled;
  (void)rnd;
  (void)dep;
  (void)csid;
  (void)cbf;
  (void)cu8f;
  (void)ci32x;
  (void)am;
  (void)parts;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "zoo: %s", loom_status_message(st));
  loom_status_free(st);
}

/* Runs every fetch (by name) of g with the zoo feeds of batch n. */
static void run_zoo(loom_graph *g, const zoo *z, int n, loom_tensor **out) {
  loom_status *st = loom_status_new();
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s);
  loom_tensor *xv = loom_tensor_new(LOOM_F32, 2, (int64_t[]){n, 4}, NULL);
  loom_tensor *iv = loom_tensor_new(LOOM_F32, 4, (int64_t[]){n, 5, 5, 2}, NULL);
  fill_f32(xv, 1);
  fill_f32(iv, 2);
  loom_output feeds[2] = {loom_graph_find_output(g, "x"), loom_graph_find_output(g, "img")};
  loom_tensor *fv[2] = {xv, iv};
  loom_output fetch[24];
  for (int i = 0; i < z->nfetch; i++) {
    fetch[i] = loom_graph_find_output(g, z->fetch[i]);
    cr_assert(fetch[i].node, "no %s", z->fetch[i]);
    out[i] = NULL;
  }
  loom_node *grp = loom_graph_find(g, "grp");
  cr_assert(grp);
  cr_assert_eq(loom_session_run(s, feeds, fv, 2, fetch, out, z->nfetch, &grp, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_tensor_free(xv);
  loom_tensor_free(iv);
  loom_session_free(s);
  loom_status_free(st);
}

static void serialize_all(loom_graph *g, void **buf, size_t *n) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_serialize(g, 0, NULL, buf, n, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}

Test(serialize, round_trip_runs_bitwise_equal) {
  zoo z;
  build_zoo(&z);
  void *buf;
  size_t n;
  serialize_all(z.g, &buf, &n);
  cr_assert(n > 100);
  cr_assert(!memcmp(buf, "LOOMGRPH", 8));
  loom_graph *g2 = loom_graph_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_deserialize(g2, buf, n, st), LOOM_OK, "%s", loom_status_message(st));
  /* same nodes, names, ops, types, edges, in the same order */
  cr_assert_eq(loom_graph_num_nodes(g2), loom_graph_num_nodes(z.g));
  for (int i = 0; i < loom_graph_num_nodes(z.g); i++) {
    loom_node *a = loom_graph_node_at(z.g, i), *b = loom_graph_node_at(g2, i);
    cr_assert_str_eq(loom_node_name(a), loom_node_name(b));
    cr_assert_str_eq(loom_node_op_name(a), loom_node_op_name(b));
    cr_assert_eq(loom_node_num_inputs(a), loom_node_num_inputs(b));
    for (int k = 0; k < loom_node_num_inputs(a); k++) {
      cr_assert_str_eq(loom_node_name(loom_node_input(a, k).node), loom_node_name(loom_node_input(b, k).node));
      cr_assert_eq(loom_node_input(a, k).index, loom_node_input(b, k).index);
    }
    cr_assert_eq(loom_node_num_outputs(a), loom_node_num_outputs(b));
    for (int k = 0; k < loom_node_num_outputs(a); k++) {
      int64_t da[8], db[8];
      loom_output oa = loom_node_output(a, k), ob = loom_node_output(b, k);
      cr_assert_eq(loom_output_dtype(oa), loom_output_dtype(ob));
      int na = loom_output_dims(oa, da), nb = loom_output_dims(ob, db);
      cr_assert_eq(na, nb);
      for (int d = 0; d < na; d++) cr_assert_eq(da[d], db[d], "%s dim %d", loom_node_name(a), d);
    }
  }
  /* the placeholder keeps its declared shape */
  int64_t d[8];
  cr_assert_eq(loom_output_dims(loom_graph_find_output(g2, "x"), d), 2);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], 4);
  /* control dependencies */
  loom_node *dep = loom_graph_find(g2, "block/dep");
  cr_assert(dep);
  cr_assert_eq(dep->nctrl, 1);
  cr_assert_str_eq(dep->ctrl[0]->name, "grp");
  loom_node *grp = loom_graph_find(g2, "grp");
  cr_assert_eq(grp->nctrl, 1);
  cr_assert_str_eq(grp->ctrl[0]->name, "h");
  /* re-serializing gives the same bytes */
  void *buf2;
  size_t n2;
  serialize_all(g2, &buf2, &n2);
  cr_assert_eq(n2, n);
  cr_assert(!memcmp(buf, buf2, n));
  /* both graphs compute the same bits, for two batch sizes */
  for (int bn = 1; bn <= 3; bn += 2) {
    loom_tensor *o1[24], *o2[24];
    run_zoo(z.g, &z, bn, o1);
    run_zoo(g2, &z, bn, o2);
    for (int i = 0; i < z.nfetch; i++) {
      cr_assert(same_bits(o1[i], o2[i]), "fetch %s differs (batch %d)", z.fetch[i], bn);
      loom_tensor_free(o1[i]);
      loom_tensor_free(o2[i]);
    }
  }
  /* the string constant, with its empty and NUL-containing elements */
  loom_tensor *s[24];
  run_zoo(g2, &z, 1, s);
  size_t len;
  const char *e = loom_tensor_get_string(s[17], 2, &len);
  cr_assert_eq(len, 3);
  cr_assert(!memcmp(e, "a\0b", 3));
  loom_tensor_get_string(s[17], 1, &len);
  cr_assert_eq(len, 0);
  for (int i = 0; i < z.nfetch; i++) loom_tensor_free(s[i]);
  loom_buffer_free(buf);
  loom_buffer_free(buf2);
  loom_graph_free(g2);
  loom_graph_free(z.g);
  loom_status_free(st);
}

Test(serialize, roots_prune_to_ancestors) {
  zoo z;
  build_zoo(&z);
  loom_node *root = loom_graph_find(z.g, "block/dep");
  void *buf;
  size_t n;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_serialize(z.g, 1, &root, &buf, &n, st), LOOM_OK, "%s", loom_status_message(st));
  loom_graph *g2 = loom_graph_new();
  cr_assert_eq(loom_graph_deserialize(g2, buf, n, st), LOOM_OK, "%s", loom_status_message(st));
  /* dep <- sum <- sm <- ... <- mm <- x, W; the control input grp <- h; not the image branch */
  cr_assert(loom_graph_find(g2, "block/dep"));
  cr_assert(loom_graph_find(g2, "grp"));
  cr_assert(loom_graph_find(g2, "h"));
  cr_assert(loom_graph_find(g2, "x"));
  cr_assert_null(loom_graph_find(g2, "img"));
  cr_assert_null(loom_graph_find(g2, "conv"));
  cr_assert_null(loom_graph_find(g2, "cstr"));
  cr_assert_null(loom_graph_find(g2, "am"));
  cr_assert(loom_graph_num_nodes(g2) < loom_graph_num_nodes(z.g));
  loom_buffer_free(buf);
  /* a root from another graph */
  cr_assert_eq(loom_graph_serialize(g2, 1, &root, &buf, &n, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "block/dep"), "%s", loom_status_message(st));
  loom_graph_free(g2);
  loom_graph_free(z.g);
  loom_status_free(st);
}

/* Deserializes the n bytes at b into a fresh graph: asserts that it fails
 * with code and that the message names s1 and s2 (each when not NULL). */
static void expect_deserialize_error(const void *b, size_t n, loom_code code, const char *s1, const char *s2) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  cr_assert_eq(loom_graph_deserialize(g, b, n, st), code, "%s: %s", loom_code_name(loom_status_code(st)),
               loom_status_message(st));
  if (s1) cr_assert(strstr(loom_status_message(st), s1), "%s", loom_status_message(st));
  if (s2) cr_assert(strstr(loom_status_message(st), s2), "%s", loom_status_message(st));
  loom_graph_free(g);
  loom_status_free(st);
}

Test(serialize, errors) {
  zoo z;
  build_zoo(&z);
  void *buf;
  size_t n;
  serialize_all(z.g, &buf, &n);
  loom_status *st = loom_status_new();
  /* unknown op: rename "Tanh" to "Tanx" behind a valid CRC */
  uint8_t *b = malloc(n);
  memcpy(b, buf, n);
  uint8_t *hit = memmem(b, n, "\x04\0\0\0Tanh", 8);
  cr_assert(hit);
  hit[7] = 'x';
  fix_crc(b, n);
  expect_deserialize_error(b, n, LOOM_NOT_FOUND, "Tanx", "node h");
  /* CRC */
  memcpy(b, buf, n);
  b[n / 2] ^= 0x10;
  expect_deserialize_error(b, n, LOOM_DATA_LOSS, "CRC", NULL);
  /* magic */
  memcpy(b, buf, n);
  b[0] = 'X';
  expect_deserialize_error(b, n, LOOM_DATA_LOSS, "magic", NULL);
  /* an input referring to a later record (node "mm" input 0 -> a huge index) */
  memcpy(b, buf, n);
  hit = memmem(b, n, "\x02\0\0\0mm\x06\0\0\0MatMul\x02\0\0\0", 16);
  cr_assert(hit);
  put_u32le(hit + 20, 1000);
  fix_crc(b, n);
  expect_deserialize_error(b, n, LOOM_DATA_LOSS, "mm", "earlier");
  /* input count that does not match the op (MatMul takes 2) */
  memcpy(b, buf, n);
  hit = memmem(b, n, "\x02\0\0\0mm\x06\0\0\0MatMul\x02\0\0\0", 16);
  put_u32le(hit + 16, 1);
  fix_crc(b, n);
  expect_deserialize_error(b, n, LOOM_DATA_LOSS, "takes 2 inputs", NULL);
  /* names must be free */
  loom_graph *g2 = loom_graph_new();
  int64_t xd[1] = {3};
  loom_placeholder(g2, LOOM_F32, 1, xd, "mm");
  cr_assert_eq(loom_graph_deserialize(g2, buf, n, st), LOOM_ALREADY_EXISTS);
  cr_assert(strstr(loom_status_message(st), "mm"), "%s", loom_status_message(st));
  loom_graph_free(g2);
  /* an empty buffer */
  expect_deserialize_error(NULL, 0, LOOM_DATA_LOSS, NULL, NULL);
  free(b);
  loom_buffer_free(buf);
  loom_graph_free(z.g);
  loom_status_free(st);
}

Test(serialize, fuzz_truncation_and_flips_fail_cleanly) {
  zoo z;
  build_zoo(&z);
  void *buf;
  size_t n;
  serialize_all(z.g, &buf, &n);
  loom_status *st = loom_status_new();
  /* every proper prefix */
  for (size_t k = 0; k < n; k++) {
    loom_graph *g2 = loom_graph_new();
    loom_code rc = loom_graph_deserialize(g2, buf, k, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "prefix %zu: %s", k, loom_status_message(st));
    loom_graph_free(g2);
  }
  /* random byte flips: the CRC catches them */
  uint8_t *b = malloc(n);
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (int t = 0; t < 1500; t++) {
    memcpy(b, buf, n);
    int flips = 1 + t % 3;
    for (int f = 0; f < flips; f++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      b[r % n] ^= (uint8_t)(1u + (r >> 32) % 255u);
    }
    if (!memcmp(b, buf, n)) continue;
    loom_graph *g2 = loom_graph_new();
    loom_code rc = loom_graph_deserialize(g2, b, n, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "trial %d: %s", t, loom_status_message(st));
    loom_graph_free(g2);
  }
  /* flips behind a recomputed CRC reach the parser: never a crash; a
   * success is a graph that builds */
  int ok = 0, failed = 0;
  for (int t = 0; t < 3000; t++) {
    memcpy(b, buf, n);
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    size_t at = 8 + r % (n - 12);
    b[at] ^= (uint8_t)(1u + (r >> 32) % 255u);
    fix_crc(b, n);
    loom_graph *g2 = loom_graph_new();
    loom_code rc = loom_graph_deserialize(g2, b, n, st);
    if (rc == LOOM_OK) {
      ok++;
      cr_assert_eq(loom_graph_status(g2, NULL), LOOM_OK);
    } else {
      failed++;
      cr_assert(rc == LOOM_DATA_LOSS || rc == LOOM_NOT_FOUND || rc == LOOM_ALREADY_EXISTS, "trial %d: %s %s", t,
                loom_code_name(rc), loom_status_message(st));
      cr_assert(loom_status_message(st)[0]);
    }
    loom_graph_free(g2);
  }
  cr_assert(failed > 0);
  free(b);
  loom_buffer_free(buf);
  loom_graph_free(z.g);
  loom_status_free(st);
}

/* ======================================================================
 * An MLP with variables, trained a little, exported
 * ====================================================================== */
typedef struct mlp {
  loom_graph *g;
  loom_session *s;
  loom_output x, y, logits, probs;
  loom_node *train;
} mlp;

static void build_mlp(mlp *m) {
  loom_graph *g = m->g = loom_graph_new();
  loom_graph_set_random_seed(g, 3);
  int64_t xd[2] = {-1, 20}, yd[1] = {-1};
  m->x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  m->y = loom_placeholder(g, LOOM_I32, 1, yd, "y");
  loom_dense_options o = loom_dense_options_default();
  o.activation = "relu";
  o.bias_initializer = loom_init_random_uniform(-0.1, 0.1, 5);
  loom_output h = loom_layers_dense(g, m->x, 16, &o, NULL);
  h = loom_layers_dense(g, h, 8, &o, NULL);
  loom_dense_options lo = loom_dense_options_default();
  m->logits = loom_layers_dense(g, h, 3, &lo, "logits");
  m->probs = loom_softmax(g, m->logits, "probs");
  loom_output xent;
  loom_sparse_softmax_cross_entropy_with_logits(g, m->logits, m->y, &xent, NULL, "xent");
  loom_output loss = loom_reduce_mean(g, xent, -1, NULL, 0, "loss");
  loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.5f, "lr"));
  m->train = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_or_create_global_step(g), "train");
  loom_optimizer_free(opt);
  loom_node *init = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  m->s = loom_session_new(g, &so, st);
  cr_assert(m->s);
  cr_assert_eq(loom_session_run(m->s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  /* a few training steps so that the values are not the initial ones */
  loom_tensor *xv = loom_tensor_new(LOOM_F32, 2, (int64_t[]){8, 20}, NULL);
  loom_tensor *yv = loom_tensor_new(LOOM_I32, 1, (int64_t[]){8}, NULL);
  fill_f32(xv, 9);
  for (int i = 0; i < 8; i++) ((int32_t *)loom_tensor_data(yv))[i] = i % 3;
  loom_output feeds[2] = {m->x, m->y};
  loom_tensor *fv[2] = {xv, yv};
  for (int k = 0; k < 3; k++)
    cr_assert_eq(loom_session_run(m->s, feeds, fv, 2, NULL, NULL, 0, &m->train, 1, st), LOOM_OK, "%s",
                 loom_status_message(st));
  loom_tensor_free(xv);
  loom_tensor_free(yv);
  loom_status_free(st);
}
static void free_mlp(mlp *m) {
  loom_session_free(m->s);
  loom_graph_free(m->g);
}

static const char *k_in[] = {"x"};
static const char *k_out[] = {"probs", "logits"};
static const char *k_out2[] = {"class_probs"};

static loom_code export_mlp(mlp *m, const char *dir, loom_status *st) {
  loom_output ins[1] = {m->x}, outs[2] = {m->probs, m->logits}, outs2[1] = {m->probs};
  loom_signature sigs[2] = {
      {"serving_default", "tensorflow/serving/predict", 1, k_in, ins, 2, k_out, outs},
      {"predict", "tensorflow/serving/predict", 1, k_in, ins, 1, k_out2, outs2},
  };
  return loom_export_write(m->g, m->s, 2, sigs, dir, st);
}

/* The original session's probs and logits for batch n (input seed). */
static void mlp_expect(mlp *m, int n, uint32_t seed, loom_tensor **xv, loom_tensor **want) {
  *xv = loom_tensor_new(LOOM_F32, 2, (int64_t[]){n, 20}, NULL);
  fill_f32(*xv, seed);
  loom_output fetch[2] = {m->probs, m->logits};
  want[0] = want[1] = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(m->s, &m->x, xv, 1, fetch, want, 2, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_status_free(st);
}

/* Exports m into dir (export_mlp) and loads it back with a pool of threads. */
static loom_predictor *export_and_load(mlp *m, const char *dir, int threads) {
  loom_status *st = loom_status_new();
  cr_assert_eq(export_mlp(m, dir, st), LOOM_OK, "%s", loom_status_message(st));
  loom_predictor_options o = loom_predictor_options_default();
  o.num_threads = threads;
  loom_predictor *p = loom_predictor_load(dir, &o, st);
  cr_assert(p, "load: %s", loom_status_message(st));
  loom_status_free(st);
  return p;
}

Test(export, mlp_predictor_matches_session_bitwise) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  char sub[600];
  snprintf(sub, sizeof sub, "%s/a/b/1700000000", dir); /* parents are created */
  loom_status *st = loom_status_new();
  loom_predictor *p = export_and_load(&m, sub, 1);
  for (int n = 1; n <= 7; n += 6) {
    loom_tensor *xv, *want[2], *got[2] = {NULL, NULL};
    mlp_expect(&m, n, 100 + (uint32_t)n, &xv, want);
    cr_assert_eq(loom_predictor_run(p, NULL, 1, &xv, 2, got, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert(same_bits(got[0], want[0]), "probs differ at batch %d", n);
    cr_assert(same_bits(got[1], want[1]), "logits differ at batch %d", n);
    cr_assert_eq(loom_tensor_dim(got[0], 0), n);
    cr_assert_eq(loom_tensor_dim(got[0], 1), 3);
    /* the other signature, by name */
    loom_tensor *g1 = NULL;
    cr_assert_eq(loom_predictor_run(p, "predict", 1, &xv, 1, &g1, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert(same_bits(g1, want[0]));
    /* rows sum to 1 */
    const float *pr = loom_tensor_data_const(got[0]);
    for (int r = 0; r < n; r++) cr_assert_float_eq(pr[3 * r] + pr[3 * r + 1] + pr[3 * r + 2], 1.0f, 1e-5f);
    loom_tensor_free(g1);
    loom_tensor_free(xv);
    for (int i = 0; i < 2; i++) {
      loom_tensor_free(want[i]);
      loom_tensor_free(got[i]);
    }
  }
  loom_predictor_free(p);
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
}

static int count_ckpt(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *u) {
  (void)dt;
  (void)ndim;
  (void)dims;
  cr_assert(strncmp(name, "global_step", 11), "global_step is not needed by predictions");
  (*(int *)u)++;
  return 0;
}

Test(export, pruned_graph_signatures_and_variables) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_status *st = loom_status_new();
  cr_assert_eq(export_mlp(&m, dir, st), LOOM_OK, "%s", loom_status_message(st)); /* an existing empty dir is fine */
  char path[600];
  /* the graph: predictions only, variables registered, no training nodes */
  snprintf(path, sizeof path, "%s/saved_model.loom", dir);
  size_t n;
  char *gb = tu_read_file(path, &n);
  loom_graph *g2 = loom_graph_new();
  cr_assert_eq(loom_graph_deserialize(g2, gb, n, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < loom_graph_num_nodes(g2); i++) {
    loom_node *x = loom_graph_node_at(g2, i);
    cr_assert_null(strstr(loom_node_op_name(x), "Apply"), "train node %s exported", loom_node_name(x));
    cr_assert_null(strstr(loom_node_name(x), "gradients"), "gradient node %s exported", loom_node_name(x));
    cr_assert_null(strstr(loom_node_name(x), "xent"), "loss node %s exported", loom_node_name(x));
    cr_assert(strcmp(loom_node_name(x), "y"), "label placeholder exported");
  }
  cr_assert(loom_graph_find(g2, "probs"));
  int nv = 0;
  loom_global_variables(g2, &nv);
  cr_assert_eq(nv, 6);
  int nt = 0;
  loom_trainable_variables(g2, &nt);
  cr_assert_eq(nt, 6);
  loom_variable *k = loom_graph_variable(g2, "dense_1/kernel");
  cr_assert(k);
  int64_t kd[8];
  cr_assert_eq(loom_variable_dims(k, kd), 2);
  cr_assert_eq(kd[0], 16);
  cr_assert_eq(kd[1], 8);
  /* the variables file holds those six, with the trained values */
  snprintf(path, sizeof path, "%s/variables/variables.ckpt", dir);
  int cnt = 0;
  cr_assert_eq(loom_checkpoint_list_variables(path, count_ckpt, &cnt, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(cnt, 6);
  loom_tensor *saved = NULL, *live = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(path, "logits/kernel", &saved, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_session_read_variable(m.s, "logits/kernel", &live, st), LOOM_OK);
  cr_assert(same_bits(saved, live));
  /* an imported variable works with the session API */
  loom_session *s2 = loom_session_new(g2, NULL, st);
  cr_assert_eq(loom_session_assign_variable(s2, "logits/kernel", saved, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(loom_session_variable_initialized(s2, "logits/kernel"));
  loom_session_free(s2);
  loom_tensor_free(saved);
  loom_tensor_free(live);
  /* signatures.json */
  snprintf(path, sizeof path, "%s/signatures.json", dir);
  char *js = tu_read_file(path, NULL);
  cr_assert(strstr(js, "\"serving_default\""), "%s", js);
  cr_assert(strstr(js, "\"tensorflow/serving/predict\""), "%s", js);
  cr_assert(strstr(js, "\"x:0\""), "%s", js);
  cr_assert(strstr(js, "\"probs:0\""), "%s", js);
  cr_assert(strstr(js, "\"float32\""), "%s", js);
  cr_assert(strstr(js, "-1"), "%s", js);
  free(js);
  free(gb);
  loom_graph_free(g2);
  /* exporting again into the same (now non-empty) directory */
  cr_assert_eq(export_mlp(&m, dir, st), LOOM_ALREADY_EXISTS);
  cr_assert(strstr(loom_status_message(st), dir), "%s", loom_status_message(st));
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
}

Test(export, whole_graph_round_trip_keeps_initializers_and_collections) {
  mlp m;
  build_mlp(&m);
  void *buf;
  size_t n;
  serialize_all(m.g, &buf, &n);
  loom_graph *g2 = loom_graph_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_deserialize(g2, buf, n, st), LOOM_OK, "%s", loom_status_message(st));
  int n1 = 0, n2 = 0;
  loom_global_variables(m.g, &n1);
  loom_global_variables(g2, &n2);
  cr_assert_eq(n1, n2);
  cr_assert(loom_get_global_step(g2));
  cr_assert_eq(loom_variable_trainable(loom_get_global_step(g2)), 0);
  /* the initializer works on the imported graph, and gives the original's initial values */
  loom_node *init = loom_global_variables_initializer(g2);
  cr_assert_eq(loom_graph_status(g2, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  loom_session *s2 = loom_session_new(g2, &so, st);
  cr_assert_eq(loom_session_run(s2, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_graph *g3 = m.g;
  loom_node *init3 = loom_global_variables_initializer(g3);
  loom_session *s3 = loom_session_new(g3, &so, st);
  cr_assert_eq(loom_session_run(s3, NULL, NULL, 0, NULL, NULL, 0, &init3, 1, st), LOOM_OK);
  loom_tensor *a = NULL, *b = NULL;
  cr_assert_eq(loom_session_read_variable(s2, "dense/kernel", &a, st), LOOM_OK);
  cr_assert_eq(loom_session_read_variable(s3, "dense/kernel", &b, st), LOOM_OK);
  cr_assert(same_bits(a, b), "seeded initializers must give the same values");
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_session_free(s2);
  loom_session_free(s3);
  loom_graph_free(g2);
  loom_buffer_free(buf);
  free_mlp(&m);
  loom_status_free(st);
}

Test(export, signature_introspection_and_input_checks) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_status *st = loom_status_new();
  loom_predictor *p = export_and_load(&m, dir, 1);
  cr_assert_eq(loom_predictor_num_inputs(p, NULL), 1);
  cr_assert_str_eq(loom_predictor_input_key(p, NULL, 0), "x");
  cr_assert_eq(loom_predictor_num_outputs(p, NULL), 2);
  cr_assert_str_eq(loom_predictor_output_key(p, NULL, 0), "probs");
  cr_assert_str_eq(loom_predictor_output_key(p, "serving_default", 1), "logits");
  cr_assert_null(loom_predictor_output_key(p, NULL, 2));
  cr_assert_eq(loom_predictor_num_outputs(p, "predict"), 1);
  cr_assert_str_eq(loom_predictor_output_key(p, "predict", 0), "class_probs");
  cr_assert_eq(loom_predictor_num_inputs(p, "nope"), -1);
  cr_assert_null(loom_predictor_input_key(p, "nope", 0));

  loom_tensor *out[2] = {NULL, NULL};
  /* wrong dtype */
  loom_tensor *xi = loom_tensor_new(LOOM_I32, 2, (int64_t[]){2, 20}, NULL);
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xi, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "input x") && strstr(loom_status_message(st), "int32"), "%s",
            loom_status_message(st));
  /* wrong feature size */
  loom_tensor *xb = loom_tensor_new(LOOM_F32, 2, (int64_t[]){2, 19}, NULL);
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xb, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "input x") && strstr(loom_status_message(st), "[2,19]"), "%s",
            loom_status_message(st));
  /* wrong rank */
  loom_tensor *xr = loom_tensor_new(LOOM_F32, 1, (int64_t[]){20}, NULL);
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xr, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "input x"), "%s", loom_status_message(st));
  /* wrong counts */
  loom_tensor *xg = loom_tensor_new(LOOM_F32, 2, (int64_t[]){2, 20}, NULL);
  loom_tensor *two[2] = {xg, xg};
  cr_assert_eq(loom_predictor_run(p, NULL, 2, two, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "takes 1 input") && strstr(loom_status_message(st), "x"), "%s",
            loom_status_message(st));
  cr_assert_eq(loom_predictor_run(p, NULL, 0, NULL, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xg, 1, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "probs"), "%s", loom_status_message(st));
  loom_tensor *nul = NULL;
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &nul, 2, out, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "input x"), "%s", loom_status_message(st));
  /* unknown signature */
  cr_assert_eq(loom_predictor_run(p, "classify", 1, &xg, 2, out, st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), "classify"), "%s", loom_status_message(st));
  /* still works after the errors */
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xg, 2, out, st), LOOM_OK, "%s", loom_status_message(st));
  loom_tensor_free(out[0]);
  loom_tensor_free(out[1]);
  loom_tensor_free(xi);
  loom_tensor_free(xb);
  loom_tensor_free(xr);
  loom_tensor_free(xg);
  loom_predictor_free(p);
  /* a default signature that is not in the export */
  loom_predictor_options o = loom_predictor_options_default();
  o.signature = "regression";
  cr_assert_null(loom_predictor_load(dir, &o, st));
  cr_assert_eq(loom_status_code(st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), "regression"), "%s", loom_status_message(st));
  o.signature = "predict";
  p = loom_predictor_load(dir, &o, st);
  cr_assert(p, "%s", loom_status_message(st));
  cr_assert_str_eq(loom_predictor_output_key(p, NULL, 0), "class_probs");
  loom_predictor_free(p);
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
}

static void expect_load_error(const char *dir, loom_code code, const char *s1, const char *s2) {
  loom_status *st = loom_status_new();
  loom_predictor *p = loom_predictor_load(dir, NULL, st);
  cr_assert_null(p, "load should fail (%s)", s1);
  cr_assert_eq(loom_status_code(st), code, "%s: %s", loom_code_name(loom_status_code(st)), loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), s1), "%s", loom_status_message(st));
  if (s2) cr_assert(strstr(loom_status_message(st), s2), "%s", loom_status_message(st));
  loom_status_free(st);
}

Test(export, missing_and_damaged_files) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_status *st = loom_status_new();
  char d[600], path[700];
  const char *files[] = {"saved_model.loom", "signatures.json", "variables/variables.ckpt"};
  for (int f = 0; f < 3; f++) {
    /* missing */
    snprintf(d, sizeof d, "%s/missing%d", dir, f);
    cr_assert_eq(export_mlp(&m, d, st), LOOM_OK, "%s", loom_status_message(st));
    snprintf(path, sizeof path, "%s/%s", d, files[f]);
    cr_assert_eq(unlink(path), 0);
    expect_load_error(d, LOOM_NOT_FOUND, files[f], NULL);
    /* damaged: one byte flipped in the middle */
    snprintf(d, sizeof d, "%s/damaged%d", dir, f);
    cr_assert_eq(export_mlp(&m, d, st), LOOM_OK, "%s", loom_status_message(st));
    snprintf(path, sizeof path, "%s/%s", d, files[f]);
    size_t n;
    char *b = tu_read_file(path, &n);
    if (f == 1) b[0] = '['; /* JSON that does not parse as a signature map */
    else b[n / 2] ^= 0x40;
    tu_write_file(path, b, n);
    free(b);
    expect_load_error(d, LOOM_DATA_LOSS, files[f], NULL);
    /* truncated */
    snprintf(d, sizeof d, "%s/truncated%d", dir, f);
    cr_assert_eq(export_mlp(&m, d, st), LOOM_OK, "%s", loom_status_message(st));
    snprintf(path, sizeof path, "%s/%s", d, files[f]);
    b = tu_read_file(path, &n);
    tu_write_file(path, b, n - 9);
    free(b);
    expect_load_error(d, LOOM_DATA_LOSS, files[f], NULL);
  }
  /* the graph's CRC is named */
  snprintf(d, sizeof d, "%s/damaged0", dir);
  expect_load_error(d, LOOM_DATA_LOSS, "saved_model.loom", "CRC");
  /* signatures naming a tensor the graph does not have */
  snprintf(d, sizeof d, "%s/badsig", dir);
  cr_assert_eq(export_mlp(&m, d, st), LOOM_OK, "%s", loom_status_message(st));
  snprintf(path, sizeof path, "%s/signatures.json", d);
  char *js = tu_read_file(path, NULL);
  char *hit = strstr(js, "\"probs:0\"");
  cr_assert(hit);
  memcpy(hit + 1, "prabs", 5);
  tu_write_file(path, js, strlen(js));
  free(js);
  expect_load_error(d, LOOM_DATA_LOSS, "signatures.json", "prabs:0");
  /* no directory at all */
  snprintf(d, sizeof d, "%s/none", dir);
  expect_load_error(d, LOOM_NOT_FOUND, "saved_model.loom", NULL);
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
}

Test(export, argument_and_state_errors) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_status *st = loom_status_new();
  loom_output ins[1] = {m.x}, outs[1] = {m.probs};
  const char *dup[2] = {"p", "p"};
  loom_output outs2[2] = {m.probs, m.logits};
  loom_signature s1 = {"serving_default", NULL, 1, k_in, ins, 2, dup, outs2};
  char d[600];
  snprintf(d, sizeof d, "%s/e1", dir);
  cr_assert_eq(loom_export_write(m.g, m.s, 1, &s1, d, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "appears twice"), "%s", loom_status_message(st));
  cr_assert_neq(access(d, F_OK), 0, "nothing is written on a failure");
  /* an output of another graph */
  loom_graph *other = loom_graph_new();
  loom_output foreign = loom_const_f32(other, 1.0f, "c");
  loom_signature s2 = {"serving_default", NULL, 1, k_in, ins, 1, k_out, &foreign};
  cr_assert_eq(loom_export_write(m.g, m.s, 1, &s2, d, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "probs"), "%s", loom_status_message(st));
  loom_graph_free(other);
  /* a session whose variables were never initialised */
  loom_session *fresh = loom_session_new(m.g, NULL, st);
  loom_signature s3 = {"serving_default", NULL, 1, k_in, ins, 1, k_out, outs};
  cr_assert_eq(loom_export_write(m.g, fresh, 1, &s3, d, st), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(loom_status_message(st), "uninitialized"), "%s", loom_status_message(st));
  cr_assert_neq(access(d, F_OK), 0, "nothing is written on a failure");
  loom_session_free(fresh);
  /* a file in the way */
  snprintf(d, sizeof d, "%s/file", dir);
  tu_write_file(d, "x", 1);
  cr_assert_eq(loom_export_write(m.g, m.s, 1, &s3, d, st), LOOM_ALREADY_EXISTS);
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
}

/* ---- concurrency ---- */
typedef struct worker {
  loom_predictor *p;
  loom_tensor *x[3], *want[3];
  int bad;
} worker;
static void *work(void *arg) {
  worker *w = arg;
  loom_tensor *out[2] = {NULL, NULL};
  loom_status *st = loom_status_new();
  for (int it = 0; it < 60; it++) {
    int k = it % 3;
    if (loom_predictor_run(w->p, NULL, 1, &w->x[k], 2, out, st) || !same_bits(out[0], w->want[k])) w->bad++;
  }
  loom_tensor_free(out[0]);
  loom_tensor_free(out[1]);
  loom_status_free(st);
  return NULL;
}

Test(export, concurrent_callers_get_correct_results) {
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_predictor *p = export_and_load(&m, dir, 2);
  worker w[4];
  pthread_t th[4];
  for (int t = 0; t < 4; t++) {
    w[t].p = p;
    w[t].bad = 0;
    for (int k = 0; k < 3; k++) {
      loom_tensor *want[2];
      mlp_expect(&m, 1 + 2 * k + t, (uint32_t)(t * 10 + k), &w[t].x[k], want);
      w[t].want[k] = want[0];
      loom_tensor_free(want[1]);
    }
  }
  for (int t = 0; t < 4; t++) pthread_create(&th[t], NULL, work, &w[t]);
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < 4; t++) {
    cr_assert_eq(w[t].bad, 0, "thread %d got %d wrong results", t, w[t].bad);
    for (int k = 0; k < 3; k++) {
      loom_tensor_free(w[t].x[k]);
      loom_tensor_free(w[t].want[k]);
    }
  }
  loom_predictor_free(p);
  tu_rmtree(dir);
  free_mlp(&m);
}

/* ---- steady state: no allocation per call ---- */
Test(export, steady_state_run_does_not_allocate) {
  tu_alloc_count_begin();
  mlp m;
  build_mlp(&m);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_export");
  loom_status *st = loom_status_new();
  loom_predictor *p = export_and_load(&m, dir, 1);
  loom_tensor *xv = loom_tensor_new(LOOM_F32, 2, (int64_t[]){4, 20}, NULL);
  fill_f32(xv, 5);
  loom_tensor *out[2] = {NULL, NULL};
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xv, 2, out, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &xv, 2, out, st), LOOM_OK);
  long before = tu_alloc_count();
  for (int i = 0; i < 50; i++) cr_assert_eq(loom_predictor_run(p, NULL, 1, &xv, 2, out, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_assert_eq(after, before, "%ld allocations in 50 steady-state calls", after - before);
  loom_tensor_free(out[0]);
  loom_tensor_free(out[1]);
  loom_tensor_free(xv);
  loom_predictor_free(p);
  tu_rmtree(dir);
  free_mlp(&m);
  loom_status_free(st);
  tu_alloc_count_end();
}
