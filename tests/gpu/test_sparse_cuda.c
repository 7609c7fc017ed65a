/* tests/gpu/test_sparse_cuda.c - the sparse op family on a CUDA session.
 * SparseEmbedding and its gradient have CPU kernels only, so a CUDA session
 * runs them on the CPU per node while the sparse optimizer kernels run on
 * the device, which must skip the pruned entries' no-row index
 * (LOOM_NO_ROW_I32/I64) as the CPU kernels do. For each optimizer (SGD,
 * Adagrad, FTRL, lazy Adam, Momentum) and both id dtypes, three steps on a
 * CPU session and on a CUDA session of the same graph must give the same
 * table and slots, and the rows no kept id looks up must stay bit-unchanged
 * on the device. One more case feeds dense ids through DenseToRagged (the
 * session's host pass). Skips (exit 0) without a CUDA device. */
#include "tests/gpu/parity.h"

enum { V = 12, D = 5 };

static loom_optimizer *make_opt(loom_graph *g, int k, const char **slots) {
  loom_output lr = loom_const_f32(g, 0.1f, "lr");
  slots[0] = slots[1] = NULL;
  switch (k) {
  case 0: return loom_optimizer_sgd(lr);
  case 1: {
    loom_adagrad_options o = loom_adagrad_options_default();
    slots[0] = "accum";
    return loom_optimizer_adagrad(lr, &o);
  }
  case 2: {
    loom_ftrl_options o = loom_ftrl_options_default();
    o.l1 = 0.01;
    slots[0] = "accum";
    slots[1] = "linear";
    return loom_optimizer_ftrl(lr, &o);
  }
  case 3: {
    loom_adam_options o = loom_adam_options_default();
    o.lazy = 1;
    slots[0] = "m";
    slots[1] = "v";
    return loom_optimizer_adam(lr, &o);
  }
  default: {
    loom_momentum_options o = loom_momentum_options_default();
    slots[0] = "momentum";
    return loom_optimizer_momentum(lr, &o);
  }
  }
}

static const char *OPT_NAMES[5] = {"sgd", "adagrad", "ftrl", "lazy_adam", "momentum"};

/* Trains 3 steps on dev; out[0] = table before, out[1..nf] = table and slots after. */
static int train(int k, int ids32, int ragged_from_dense, loom_device_type dev, loom_tensor **before, loom_tensor **after,
                 int *nf) {
  loom_graph *g = loom_graph_new();
  int64_t td[2] = {V, D};
  loom_initializer init = loom_init_random_uniform(-1, 1, 11);
  loom_variable *v = loom_get_variable(g, "table", LOOM_F32, 2, td, &init, 1);
  /* rows {1, -1, 4, 7(w 0)}, {}, {3, 4, 9(w -2), 1}: touched 1, 3, 4 */
  static const int64_t ids[8] = {1, -1, 4, 7, 3, 4, 9, 1}, sp[4] = {0, 4, 4, 8};
  static const float w[8] = {1, 1, 0.5f, 0, 2, 1, -2, 0.25f};
  int64_t n8 = 8, n4 = 4;
  loom_sparse rag;
  loom_output x = {NULL, 0};
  loom_tensor *xv = NULL;
  if (ragged_from_dense) {
    /* dense [3, 3] padded with -1: rows {1, 4}, {}, {3, 4, 1} */
    x = loom_placeholder(g, LOOM_I64, 2, (int64_t[]){-1, 3}, "x");
    rag = loom_dense_to_ragged(g, x, 1, -1, "ragged");
    static const int64_t xd[9] = {1, 4, -1, -1, -1, -1, 3, 4, 1};
    xv = loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){3, 3}, xd, NULL);
  } else {
    rag.values = loom_const_data(g, LOOM_I64, 1, &n8, ids, "ids");
    rag.row_splits = loom_const_data(g, LOOM_I64, 1, &n4, sp, "splits");
  }
  if (ids32) rag.values = loom_cast(g, rag.values, LOOM_I32, "ids32");
  loom_output wt = ragged_from_dense ? (loom_output){NULL, 0} : loom_const_data(g, LOOM_F32, 1, &n8, w, "w");
  loom_output y = loom_sparse_embedding(g, loom_variable_output(v), rag, wt, LOOM_COMBINER_SQRTN, 0.9, "emb");
  loom_output loss = loom_reduce_sum(g, loom_square(g, loom_sub(g, y, loom_const_f32(g, 0.3f, NULL), NULL), NULL), -1,
                                     NULL, 0, "loss");
  const char *slots[2];
  loom_optimizer *opt = make_opt(g, k, slots);
  loom_node *trainop = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *initop = loom_global_variables_initializer(g);
  loom_output fetch[3];
  *nf = 0;
  fetch[(*nf)++] = loom_variable_output(v);
  for (int j = 0; j < 2 && slots[j]; j++) fetch[(*nf)++] = loom_variable_output(loom_optimizer_get_slot(opt, v, slots[j]));
  int ok = 0;
  loom_session *s = session(g, dev);
  if (s) {
    ok = run(s, "init", NULL, NULL, 0, NULL, NULL, 0, &initop, 1) &&
         run(s, "before", NULL, NULL, 0, fetch, before, 1, NULL, 0);
    for (int step = 0; ok && step < 3; step++)
      ok = run(s, OPT_NAMES[k], x.node ? &x : NULL, x.node ? &xv : NULL, x.node ? 1 : 0, NULL, NULL, 0, &trainop, 1);
    ok = ok && run(s, "after", NULL, NULL, 0, fetch, after, *nf, NULL, 0);
  }
  loom_session_free(s);
  loom_tensor_free(xv);
  loom_optimizer_free(opt);
  loom_graph_free(g);
  return ok;
}

int main(void) {
  if (!parity_gpu_present("test_sparse_cuda")) return 0;
  static const int touched[V] = {0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < 5; k++)
    for (int mode = 0; mode < 3; mode++) { /* 0: int64 ids, 1: int32 ids, 2: from DenseToRagged */
      loom_tensor *cb = NULL, *gb = NULL, *ca[3] = {NULL}, *ga[3] = {NULL};
      int nf = 0;
      char what[96];
      snprintf(what, sizeof what, "%s/%s", OPT_NAMES[k], mode == 0 ? "ids64" : mode == 1 ? "ids32" : "dense_to_ragged");
      if (!train(k, mode == 1, mode == 2, LOOM_DEVICE_CPU, &cb, ca, &nf) ||
          !train(k, mode == 1, mode == 2, LOOM_DEVICE_CUDA, &gb, ga, &nf)) {
        parity_check(0, "%s: a run failed", what);
      } else {
        compare(what, gb, cb, 0);
        for (int j = 0; j < nf; j++) compare(what, ga[j], ca[j], 1e-5);
        const float *b = loom_tensor_data_const(gb), *a = loom_tensor_data_const(ga[0]);
        for (int r = 0; r < V; r++) {
          int same = memcmp(a + r * D, b + r * D, D * sizeof(float)) == 0;
          parity_check(same == !touched[r], "%s: row %d %s on the device", what, r,
                       touched[r] ? "did not change" : "changed");
        }
      }
      loom_tensor_free(cb);
      loom_tensor_free(gb);
      for (int j = 0; j < 3; j++) {
        loom_tensor_free(ca[j]);
        loom_tensor_free(ga[j]);
      }
    }
  return parity_report("test_sparse_cuda");
}
