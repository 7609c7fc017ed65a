/* Steps folded into the step before them (engine/fuse.c): a BiasAdd and a
 * Relu after a Conv2D, a ReluGrad after a MaxPoolGrad. Each case runs the
 * same graph twice: fetching only the chain's end (folded: fewer kernels run,
 * nodes_run) and fetching an intermediate as well (nothing can be folded),
 * and the two results must be equal bit for bit, at 1 and 2 threads. */
#include "test_util.h"
#include "kernels/cpu/nn.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}
static loom_tensor *rand_tensor(loom_dtype dt, int ndim, const int64_t *dims, double zero_frac) {
  loom_tensor *t = loom_tensor_new(dt, ndim, dims, NULL);
  cr_assert(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    double v = urand();
    if (fabs(v) < zero_frac) v = 0; /* exact zeros: ties in the pools, Relu's and ReluGrad's boundary */
    if (dt == LOOM_F32) ((float *)loom_tensor_data(t))[i] = (float)v;
    else ((double *)loom_tensor_data(t))[i] = v;
  }
  return t;
}
static loom_output const_of(loom_graph *g, const loom_tensor *t, const char *name) {
  return loom_const_data(g, loom_tensor_dtype(t), loom_tensor_ndim(t), loom_tensor_dims(t), loom_tensor_data_const(t),
                         name);
}

/* Runs fetches[0..nf) at `threads`; returns fetch 0 and the kernels run. */
static loom_tensor *run_fetch(loom_graph *g, loom_output x, loom_tensor *xt, int nf, const loom_output *fetches,
                              int threads, int32_t *nodes_run) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_tensor *out[3] = {NULL, NULL, NULL};
  for (int rep = 0; rep < 2; rep++) /* the second run reuses the plan */
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetches, out, nf, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  *nodes_run = stats.nodes_run;
  for (int i = 1; i < nf; i++) loom_tensor_free(out[i]);
  loom_session_free(s);
  loom_status_free(st);
  return out[0];
}

static void expect_same(const loom_tensor *a, const loom_tensor *b, const char *what) {
  cr_assert_eq(loom_tensor_nbytes(a), loom_tensor_nbytes(b), "%s", what);
  cr_assert(!memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a)),
            "%s: folded and separate steps differ", what);
}

/* end + end (a fetched value is never folded away: the fetch may be written in place) fetched alone vs
 * beside `inter`: equal values, `folded` kernels fewer. */
static void check_folding(loom_graph *g, loom_output x, loom_tensor *xt, loom_output chain_end, loom_output inter,
                          int folded, const char *what) {
  loom_output end = loom_add(g, chain_end, chain_end, NULL);
  for (int threads = 1; threads <= 2; threads++) {
    int32_t n1, n2;
    loom_output both[2] = {end, inter};
    loom_tensor *a = run_fetch(g, x, xt, 1, &end, threads, &n1);
    loom_tensor *b = run_fetch(g, x, xt, 2, both, threads, &n2);
    expect_same(a, b, what);
    cr_assert_eq(n1, n2 - folded, "%s (%d threads): %d kernels run, the unfolded plan %d, expected %d folded", what,
                 threads, n1, n2, folded);
    loom_tensor_free(a);
    loom_tensor_free(b);
  }
}

typedef struct {
  int64_t n, h, w, c, kh, kw, o, stride;
  int padding;
} conv_case;

/* Whether the convolution k's input gradient from a routing MaxPoolGrad is made from the pool's winners
 * directly (kernels/cpu/nn.h: loom__conv_dx_winners_fit): then it sums its terms in another order than
 * the Winograd loops over the routed gradient. */
/* A convolution's attributes as its kernels read them: NHWC strides (stride, stride), dilation 1. */
static loom_attrs conv_attrs(int64_t stride, int padding) {
  loom_attrs at;
  memset(&at, 0, sizeof at);
  for (int i = 0; i < 4; i++) at.strides[i] = at.dilations[i] = 1;
  at.strides[1] = at.strides[2] = stride;
  at.padding = padding == LOOM_PADDING_SAME ? LOOM_PAD_SAME : LOOM_PAD_VALID;
  return at;
}
static loom_buf buf_of(loom_dtype dt, int64_t n0, int64_t n1, int64_t n2, int64_t n3, void *data) {
  loom_buf b = {data, dt, 4, {n0, n1, n2, n3}, n0 * n1 * n2 * n3};
  return b;
}
static int dx_from_winners(loom_dtype dt, conv_case k) {
  const loom_attrs at = conv_attrs(k.stride, k.padding);
  const int64_t oh = k.padding == LOOM_PADDING_SAME ? k.h : k.h - k.kh + 1, ow = k.padding == LOOM_PADDING_SAME ? k.w : k.w - k.kw + 1;
  loom_buf f = buf_of(dt, k.kh, k.kw, k.c, k.o, NULL), dy = buf_of(dt, k.n, oh, ow, k.o, NULL),
           dx = buf_of(dt, k.n, k.h, k.w, k.c, NULL);
  return loom__conv_dx_winners_fit(&at, &f, &dy, &dx);
}

/* An input gradient from the pool's winners against the unfolded plan's (the Winograd loops over the
 * written routed gradient: within their rounding, ~1e-5 of the largest element in f32), or, where
 * the Winograd loops make both, equal bit for bit. */
static void expect_input_gradient(const loom_tensor *got, const loom_tensor *ref, int winners, const char *what) {
  if (!winners) {
    cr_assert_eq(loom_tensor_nbytes(got), loom_tensor_nbytes(ref), "%s", what);
    cr_assert(!memcmp(loom_tensor_data_const(got), loom_tensor_data_const(ref), loom_tensor_nbytes(got)),
              "%s: the input gradient: folded and separate steps differ", what);
    return;
  }
  const int f32 = loom_tensor_dtype(ref) == LOOM_F32;
  const int64_t n = loom_tensor_numel(ref);
  cr_assert_eq(loom_tensor_numel(got), n, "%s", what);
#define AT(t, i) (f32 ? (double)((const float *)loom_tensor_data_const(t))[i] : ((const double *)loom_tensor_data_const(t))[i])
  double big = 0;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(AT(ref, i)));
  cr_assert(big > 0, "%s: the input gradient is not zero", what);
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs(AT(got, i) - AT(ref, i)) <= (f32 ? 1e-4 : 1e-11) * big, "%s: input gradient [%lld] %.9g, the "
              "unfolded plan's %.9g (largest %.3g)", what, (long long)i, AT(got, i), AT(ref, i), big);
#undef AT
}

static void conv_chain(loom_dtype dt, conv_case k, int relu) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {k.n, k.h, k.w, k.c}, wd[4] = {k.kh, k.kw, k.c, k.o}, bd[1] = {k.o};
  int64_t st[4] = {1, k.stride, k.stride, 1}, dil[4] = {1, 1, 1, 1};
  loom_tensor *wt = rand_tensor(dt, 4, wd, 0), *bt = rand_tensor(dt, 1, bd, 0.1);
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_output conv = loom_conv2d(g, x, const_of(g, wt, "w"), st, k.padding, dil, "conv");
  loom_output ba = loom_bias_add(g, conv, const_of(g, bt, "b"), "ba");
  loom_output end = relu ? loom_relu(g, ba, "relu") : ba;
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.05);
  char what[160];
  snprintf(what, sizeof what, "%s conv %lldx%lldx%lld k%lldx%lld o%lld s%lld %s", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k.h, (long long)k.w, (long long)k.c, (long long)k.kh, (long long)k.kw, (long long)k.o,
           (long long)k.stride, relu ? "+bias+relu" : "+bias");
  check_folding(g, x, xt, end, conv, relu ? 2 : 1, what);
  loom_tensor_free(xt);
  loom_tensor_free(wt);
  loom_tensor_free(bt);
  loom_graph_free(g);
}

/* Every path of the Conv2D kernel: the direct loops (first-layer rows and 12-pixel tiles), Winograd,
 * pointwise, im2col; output channels below, at and past a vector. */
static const conv_case CONVS[] = {
    {3, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, {2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME},
    {2, 9, 7, 3, 3, 3, 5, 1, LOOM_PADDING_SAME},    {2, 8, 8, 6, 1, 1, 20, 1, LOOM_PADDING_VALID},
    {1, 11, 10, 4, 3, 3, 7, 2, LOOM_PADDING_VALID}, {2, 7, 7, 40, 3, 3, 33, 1, LOOM_PADDING_SAME},
};

Test(fuse, conv_bias_relu_f32) {
  for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) conv_chain(LOOM_F32, CONVS[i], 1);
}
Test(fuse, conv_bias_f32_and_f64) {
  for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) {
    conv_chain(LOOM_F32, CONVS[i], 0);
    conv_chain(LOOM_F64, CONVS[i], 1);
  }
}

/* The values the folded chain replaces: conv + b, then max(., 0), computed here from the conv's own
 * output (so a kernel that skipped or doubled the bias fails, not only one that differs from itself). */
/* A [2, 6, 6, 3] placeholder x (fed xt), a 3x3 SAME convolution to 8 channels (random filter) and a
 * random bias constant (bt), not yet added. */
typedef struct {
  loom_graph *g;
  loom_output x, conv, bias;
  loom_tensor *wt, *bt, *xt;
} small_conv;
static small_conv small_conv_new(void) {
  small_conv c;
  int64_t xd[4] = {2, 6, 6, 3}, wd[4] = {3, 3, 3, 8}, bd[1] = {8};
  int64_t st[4] = {1, 1, 1, 1}, dil[4] = {1, 1, 1, 1};
  c.g = loom_graph_new();
  c.wt = rand_tensor(LOOM_F32, 4, wd, 0);
  c.bt = rand_tensor(LOOM_F32, 1, bd, 0);
  c.x = loom_placeholder(c.g, LOOM_F32, 4, xd, "x");
  c.conv = loom_conv2d(c.g, c.x, const_of(c.g, c.wt, "w"), st, LOOM_PADDING_SAME, dil, "conv");
  c.bias = const_of(c.g, c.bt, "b");
  c.xt = rand_tensor(LOOM_F32, 4, xd, 0);
  return c;
}
static void small_conv_free(small_conv *c) {
  loom_tensor_free(c->xt);
  loom_tensor_free(c->wt);
  loom_tensor_free(c->bt);
  loom_graph_free(c->g);
}

Test(fuse, conv_bias_relu_values) {
  small_conv sc = small_conv_new();
  loom_graph *g = sc.g;
  loom_output x = sc.x, conv = sc.conv;
  loom_tensor *xt = sc.xt, *bt = sc.bt;
  loom_output relu = loom_relu(g, loom_bias_add(g, conv, sc.bias, "ba"), "relu");
  int32_t n;
  loom_tensor *y = run_fetch(g, x, xt, 1, &relu, 2, &n);
  loom_tensor *c = run_fetch(g, x, xt, 1, &conv, 2, &n);
  const float *yv = loom_tensor_data(y), *cv = loom_tensor_data(c), *b = loom_tensor_data(bt);
  int neg = 0;
  for (int64_t i = 0; i < loom_tensor_numel(y); i++) {
    float v = cv[i] + b[i % 8];
    neg += v < 0;
    cr_assert_eq(yv[i], v < 0 ? 0.0f : v, "element %lld", (long long)i);
  }
  cr_assert(neg > 10 && neg < loom_tensor_numel(y) - 10, "the case exercises both sides of the Relu (%d negative)", neg);
  loom_tensor_free(y);
  loom_tensor_free(c);
  small_conv_free(&sc);
}

/* Not folded: the conv output read by another op too (the add), the BiasAdd output read twice. */
Test(fuse, not_folded_when_read_elsewhere) {
  small_conv sc = small_conv_new();
  loom_graph *g = sc.g;
  loom_output x = sc.x, conv = sc.conv;
  loom_tensor *xt = sc.xt, *bt = sc.bt;
  loom_output ba = loom_bias_add(g, conv, sc.bias, "ba");
  loom_output relu = loom_relu(g, ba, "relu");
  loom_output sum1 = loom_add(g, relu, conv, "sum1"); /* conv read twice: nothing folds */
  loom_output sum2 = loom_add(g, relu, ba, "sum2");   /* ba read twice: only the BiasAdd folds */
  int32_t n1, n2;
  loom_tensor *a = run_fetch(g, x, xt, 1, &sum1, 1, &n1);
  cr_assert_eq(n1, 4, "conv, bias_add, relu, add: %d kernels", n1);
  loom_tensor *b = run_fetch(g, x, xt, 1, &sum2, 1, &n2);
  cr_assert_eq(n2, 3, "conv (+bias), relu, add: %d kernels", n2);
  const float *av = loom_tensor_data(a), *bv = loom_tensor_data(b);
  loom_tensor *c = run_fetch(g, x, xt, 1, &conv, 1, &n1);
  const float *cv = loom_tensor_data(c), *bias = loom_tensor_data(bt);
  for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
    float v = cv[i] + bias[i % 8], r = v < 0 ? 0.0f : v;
    cr_assert_eq(av[i], r + cv[i]);
    cr_assert_eq(bv[i], r + v);
  }
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_tensor_free(c);
  small_conv_free(&sc);
}

/* relu -> max_pool, and the gradient max_pool_grad -> relu_grad over the relu's output (features x: the
 * mask folds into the windows) or over another tensor (z: a pass over each image). */
static void pool_chain(loom_dtype dt, int64_t c, int64_t k, int64_t s, int padding, int other_features) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {3, 10, 9, c}, ks[4] = {1, k, k, 1}, ss[4] = {1, s, s, 1};
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_output r = loom_relu(g, x, "r");
  loom_output y = loom_max_pool(g, r, ks, ss, padding, "pool");
  loom_tensor *dyt = NULL, *zt = rand_tensor(dt, 4, xd, 0.2);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  int64_t yd[4];
  cr_assert_eq(loom_output_dims(y, yd), 4);
  dyt = rand_tensor(dt, 4, yd, 0.1);
  loom_output dx = loom_max_pool_grad(g, r, y, const_of(g, dyt, "dy"), ks, ss, padding, "mpg");
  loom_output d = loom_relu_grad(g, dx, other_features ? const_of(g, zt, "z") : r, "rg");
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.3);
  char what[128];
  snprintf(what, sizeof what, "%s pool %lldx%lld/%lld C=%lld %s features", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k, (long long)k, (long long)s, (long long)c, other_features ? "other" : "pooled");
  check_folding(g, x, xt, d, dx, 1, what);
  loom_tensor_free(xt);
  loom_tensor_free(dyt);
  loom_tensor_free(zt);
  loom_graph_free(g);
}

Test(fuse, max_pool_grad_relu_grad) {
  const int64_t cs[3] = {16, 20, 5};
  for (int i = 0; i < 3; i++)
    for (int other = 0; other <= 1; other++) {
      pool_chain(LOOM_F32, cs[i], 2, 2, LOOM_PADDING_VALID, other); /* windows that tile the image */
      pool_chain(LOOM_F32, cs[i], 2, 2, LOOM_PADDING_SAME, other);
      pool_chain(LOOM_F32, cs[i], 3, 2, LOOM_PADDING_SAME, other); /* overlapping windows */
      pool_chain(LOOM_F64, cs[i], 2, 2, LOOM_PADDING_SAME, other);
    }
}

/* A training step: the bias a variable the optimizer updates after the forward pass reads it. Three
 * steps folded and three not give the same bias bit for bit, and the same filter within rounding (its
 * gradient from the pool's winners). */
static void train3(int fold, float *bias_out, float *w_out) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {4, 8, 8, 2}, wd[4] = {3, 3, 2, 6}, bd[1] = {6}, ks[4] = {1, 2, 2, 1};
  int64_t st4[4] = {1, 1, 1, 1}, dil[4] = {1, 1, 1, 1};
  rng_state = 7;
  loom_tensor *w0 = rand_tensor(LOOM_F32, 4, wd, 0), *b0 = rand_tensor(LOOM_F32, 1, bd, 0);
  loom_variable *w = loom_variable_new(g, const_of(g, w0, "w0"), 1, 0, "w");
  loom_variable *b = loom_variable_new(g, const_of(g, b0, "b0"), 1, 0, "b");
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output conv = loom_conv2d(g, x, loom_variable_output(w), st4, LOOM_PADDING_SAME, dil, "conv");
  loom_output r = loom_relu(g, loom_bias_add(g, conv, loom_variable_output(b), "ba"), "relu");
  loom_output pool = loom_max_pool(g, r, ks, ks, LOOM_PADDING_VALID, "pool");
  loom_output loss = loom_reduce_sum(g, loom_mul(g, pool, pool, NULL), -1, NULL, 0, "loss");
  loom_status *st = loom_status_new();
  loom_output xs[2] = {loom_variable_output(w), loom_variable_output(b)}, gr[2];
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 2, xs, gr, st), LOOM_OK, "%s", loom_status_message(st));
  loom_output lr = loom_const_f32(g, 0.01f, "lr");
  loom_output u0 = loom_apply_gradient_descent(g, xs[0], lr, gr[0], "upd_w");
  loom_output u1 = loom_apply_gradient_descent(g, xs[1], lr, gr[1], "upd_b");
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_tensor *xt = rand_tensor(LOOM_F32, 4, xd, 0);
  loom_node *targets[2] = {u0.node, u1.node};
  for (int step = 0; step < 3; step++) {
    loom_output f[2] = {loss, conv}; /* fetching the conv output keeps its chain unfolded */
    loom_tensor *out[2] = {NULL, NULL};
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, f, out, fold ? 1 : 2, targets, 2, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
  }
  loom_tensor *wv = NULL, *bv = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &xs[0], &wv, 1, NULL, 0, st), LOOM_OK);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &xs[1], &bv, 1, NULL, 0, st), LOOM_OK);
  memcpy(w_out, loom_tensor_data(wv), sizeof(float) * 3 * 3 * 2 * 6);
  memcpy(bias_out, loom_tensor_data(bv), sizeof(float) * 6);
  loom_tensor_free(wv);
  loom_tensor_free(bv);
  loom_tensor_free(xt);
  loom_tensor_free(w0);
  loom_tensor_free(b0);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(fuse, training_with_variable_bias) {
  float b1[6], b2[6], w1[108], w2[108];
  train3(1, b1, w1);
  train3(0, b2, w2);
  cr_assert(!memcmp(b1, b2, sizeof b1), "bias after 3 steps: folded %g, separate %g", b1[0], b2[0]);
  for (int i = 0; i < 108; i++) /* the filter gradient from the pool's winners: its products in another order */
    cr_assert(fabsf(w1[i] - w2[i]) <= 1e-6f * (fabsf(w2[i]) + 1), "filter %d after 3 steps: folded %.9g, separate %.9g", i,
              w1[i], w2[i]);
  float b0[6];
  rng_state = 7;
  for (int i = 0; i < 108; i++) (void)urand();
  for (int i = 0; i < 6; i++) b0[i] = (float)urand();
  int moved = 0;
  for (int i = 0; i < 6; i++) moved += b1[i] != b0[i];
  cr_assert(moved > 0, "the bias was trained");
}

/* BiasAddGrad over the folded MaxPoolGrad + ReluGrad: the per-image sums it adds up equal a double
 * sum of the gradient it reads (fetched from the unfolded plan), and the same at 1 and 2 threads. */
static void pool_bias_grad(loom_dtype dt, int64_t c, int64_t k, int64_t s) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {5, 12, 12, c}, ks[4] = {1, k, k, 1}, ss[4] = {1, s, s, 1};
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_output r = loom_relu(g, x, "r");
  loom_output y = loom_max_pool(g, r, ks, ss, LOOM_PADDING_SAME, "pool");
  int64_t yd[4];
  cr_assert_eq(loom_output_dims(y, yd), 4);
  loom_tensor *dyt = rand_tensor(dt, 4, yd, 0.1), *xt = rand_tensor(dt, 4, xd, 0.3);
  loom_output dx = loom_max_pool_grad(g, r, y, const_of(g, dyt, "dy"), ks, ss, LOOM_PADDING_SAME, "mpg");
  loom_output d = loom_relu_grad(g, dx, r, "rg");
  loom_output bg = loom_bias_add_grad(g, d, "bg");
  loom_output user = loom_add(g, d, d, "user"); /* d's other reader (a convolution's gradient in a CNN) */
  loom_output f_fold[2] = {bg, user}, f_sep[3] = {bg, user, dx};
  loom_tensor *t1, *t2, *sep, *dv;
  int32_t n;
  t1 = run_fetch(g, x, xt, 2, f_fold, 1, &n);
  t2 = run_fetch(g, x, xt, 2, f_fold, 2, &n);
  expect_same(t1, t2, "bias gradient at 1 and 2 threads");
  sep = run_fetch(g, x, xt, 3, f_sep, 1, &n);
  dv = run_fetch(g, x, xt, 1, &d, 1, &n);
  const int64_t rows = loom_tensor_numel(dv) / c;
  for (int64_t j = 0; j < c; j++) {
    double want = 0, mag = 0;
    for (int64_t q = 0; q < rows; q++) {
      double v = dt == LOOM_F32 ? ((float *)loom_tensor_data(dv))[q * c + j] : ((double *)loom_tensor_data(dv))[q * c + j];
      want += v;
      mag += fabs(v);
    }
    double got = dt == LOOM_F32 ? ((float *)loom_tensor_data(t1))[j] : ((double *)loom_tensor_data(t1))[j];
    double old = dt == LOOM_F32 ? ((float *)loom_tensor_data(sep))[j] : ((double *)loom_tensor_data(sep))[j];
    double tol = (dt == LOOM_F32 ? 1e-6 : 1e-14) * (mag + 1);
    cr_assert(fabs(got - want) <= tol, "channel %lld: folded %.9g, double sum %.9g", (long long)j, got, want);
    cr_assert(fabs(old - want) <= tol, "channel %lld: separate %.9g, double sum %.9g", (long long)j, old, want);
    cr_assert(mag > 0, "channel %lld has gradient", (long long)j);
  }
  loom_tensor_free(t1);
  loom_tensor_free(t2);
  loom_tensor_free(sep);
  loom_tensor_free(dv);
  loom_tensor_free(xt);
  loom_tensor_free(dyt);
  loom_graph_free(g);
}

Test(fuse, bias_add_grad_over_max_pool_grad) {
  pool_bias_grad(LOOM_F32, 16, 2, 2);
  pool_bias_grad(LOOM_F32, 21, 3, 2);
  pool_bias_grad(LOOM_F64, 16, 2, 2);
}

/* Conv2D -> BiasAdd -> Relu -> 2x2 stride-2 MaxPool: the pool folded too where the output's rows
 * and columns are even (3 steps), not where they are odd or the window is 3x3 (2 steps). */
static void conv_pool_chain(loom_dtype dt, conv_case k, int64_t win, int pool_padding, int folded, int tail) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {k.n, k.h, k.w, k.c}, wd[4] = {k.kh, k.kw, k.c, k.o}, bd[1] = {k.o};
  int64_t st[4] = {1, k.stride, k.stride, 1}, dil[4] = {1, 1, 1, 1}, ks[4] = {1, win, win, 1}, ps[4] = {1, 2, 2, 1};
  loom_tensor *wt = rand_tensor(dt, 4, wd, 0), *bt = rand_tensor(dt, 1, bd, 0.1);
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_output conv = loom_conv2d(g, x, const_of(g, wt, "w"), st, k.padding, dil, "conv");
  loom_output relu = loom_relu(g, loom_bias_add(g, conv, const_of(g, bt, "b"), "ba"), "relu");
  loom_output pool = loom_max_pool(g, relu, ks, ps, pool_padding, "pool");
  /* tail: an elementwise op that writes over the pool's output in place (moved with it when folding
   * gives the pool a new buffer) */
  if (tail) pool = loom_tanh(g, pool, "tail");
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.05);
  char what[160];
  snprintf(what, sizeof what, "%s conv %lldx%lldx%lld k%lld o%lld +bias+relu+pool%lld", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k.h, (long long)k.w, (long long)k.c, (long long)k.kh, (long long)k.o, (long long)win);
  check_folding(g, x, xt, pool, conv, folded, what);
  loom_tensor_free(xt);
  loom_tensor_free(wt);
  loom_tensor_free(bt);
  loom_graph_free(g);
}

Test(fuse, conv_bias_relu_max_pool) {
  const conv_case even[] = {{3, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME},  /* direct loops, first-layer rows */
                            {2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, /* Winograd, per 4x4 block */
                            {2, 8, 6, 6, 1, 1, 20, 1, LOOM_PADDING_VALID},   /* pointwise */
                            {2, 10, 8, 3, 3, 3, 5, 1, LOOM_PADDING_SAME},    /* direct, 12-pixel tiles */
                            {1, 13, 9, 4, 3, 3, 7, 2, LOOM_PADDING_SAME}};   /* im2col (strided), 7x5 out: odd */
  for (int i = 0; i < 4; i++) {
    conv_pool_chain(LOOM_F32, even[i], 2, LOOM_PADDING_VALID, 3, 0);
    conv_pool_chain(LOOM_F32, even[i], 2, LOOM_PADDING_SAME, 3, 1);
    conv_pool_chain(LOOM_F64, even[i], 2, LOOM_PADDING_SAME, 3, 0);
    conv_pool_chain(LOOM_F32, even[i], 3, LOOM_PADDING_SAME, 2, 0); /* 3x3 windows: not folded */
  }
  conv_pool_chain(LOOM_F32, even[4], 2, LOOM_PADDING_SAME, 2, 0);   /* odd output: not folded */
  /* Winograd blocks clipped at the last row and column: 10x6 outputs; 7x9 (odd: bias and relu only) */
  const conv_case wino[] = {{2, 10, 6, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, {2, 7, 9, 16, 5, 5, 24, 1, LOOM_PADDING_SAME}};
  conv_pool_chain(LOOM_F32, wino[0], 2, LOOM_PADDING_VALID, 3, 0);
  conv_pool_chain(LOOM_F64, wino[0], 2, LOOM_PADDING_VALID, 3, 1);
  conv_pool_chain(LOOM_F32, wino[1], 2, LOOM_PADDING_SAME, 2, 0);
}

static void conv_pool_grad(loom_dtype dt, conv_case k);

/* The same with the 2x2 Winograd tiles (LOOM_CONV_WINOGRAD=2, read once per process; Criterion runs
 * each test in its own): whole and clipped blocks. */
Test(fuse, conv_bias_relu_max_pool_winograd_2x2) {
  setenv("LOOM_CONV_WINOGRAD", "2", 1);
  const conv_case wino[] = {{2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, {2, 10, 6, 16, 5, 5, 32, 1, LOOM_PADDING_SAME},
                            {2, 7, 9, 16, 5, 5, 24, 1, LOOM_PADDING_SAME}};
  conv_pool_chain(LOOM_F32, wino[0], 2, LOOM_PADDING_VALID, 3, 0);
  conv_pool_chain(LOOM_F32, wino[1], 2, LOOM_PADDING_VALID, 3, 1);
  conv_pool_chain(LOOM_F64, wino[1], 2, LOOM_PADDING_SAME, 3, 0);
  conv_pool_chain(LOOM_F32, wino[2], 2, LOOM_PADDING_SAME, 2, 0);
  conv_pool_grad(LOOM_F32, wino[0]); /* the pool's winners recorded, the blocks not written to y */
  conv_pool_grad(LOOM_F64, wino[1]);
}

/* Conv2D -> BiasAdd -> Relu -> MaxPool and the gradient MaxPoolGrad -> ReluGrad over the same Relu
 * output (ties among the Relu's zeros, maxima that are 0): the pool folded into the convolution, the
 * ReluGrad into the MaxPoolGrad, and the result equals the unfolded plan's. */
static void conv_pool_grad(loom_dtype dt, conv_case k) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {k.n, k.h, k.w, k.c}, wd[4] = {k.kh, k.kw, k.c, k.o}, bd[1] = {k.o};
  int64_t st[4] = {1, k.stride, k.stride, 1}, dil[4] = {1, 1, 1, 1}, ks[4] = {1, 2, 2, 1};
  loom_tensor *wt = rand_tensor(dt, 4, wd, 0), *bt = rand_tensor(dt, 1, bd, 0.1);
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_output conv = loom_conv2d(g, x, const_of(g, wt, "w"), st, k.padding, dil, "conv");
  loom_output relu = loom_relu(g, loom_bias_add(g, conv, const_of(g, bt, "b"), "ba"), "relu");
  loom_output pool = loom_max_pool(g, relu, ks, ks, LOOM_PADDING_VALID, "pool");
  int64_t pd[4];
  cr_assert_eq(loom_output_dims(pool, pd), 4);
  loom_tensor *dyt = rand_tensor(dt, 4, pd, 0.1);
  loom_output dy = loom_add(g, pool, const_of(g, dyt, "dy"), "dy"); /* read after the pool */
  loom_output dx = loom_max_pool_grad(g, relu, pool, dy, ks, ks, LOOM_PADDING_VALID, "mpg");
  loom_output d = loom_relu_grad(g, dx, relu, "rg");
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.05);
  char what[160];
  snprintf(what, sizeof what, "%s conv %lldx%lldx%lld o%lld pool gradient", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k.h, (long long)k.w, (long long)k.c, (long long)k.o);
  /* folded: BiasAdd, Relu, MaxPool, ReluGrad; with conv fetched only the ReluGrad (a searching MaxPoolGrad) */
  check_folding(g, x, xt, d, conv, 3, what);
  loom_tensor_free(xt);
  loom_tensor_free(dyt);
  loom_tensor_free(wt);
  loom_tensor_free(bt);
  loom_graph_free(g);
}

Test(fuse, conv_pool_and_its_gradient) {
  const conv_case cs[] = {{3, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, /* direct, 16 channels */
                          {2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, /* Winograd, 32 */
                          {2, 10, 8, 3, 3, 3, 5, 1, LOOM_PADDING_SAME},    /* direct, 5 channels */
                          {2, 8, 6, 6, 1, 1, 20, 1, LOOM_PADDING_VALID}};  /* pointwise, 20 */
  for (int i = 0; i < 4; i++) {
    conv_pool_grad(LOOM_F32, cs[i]);
    conv_pool_grad(LOOM_F64, cs[i]);
  }
}

/* Runs fetches[0..nf) at `threads`; out[0..nf) the values, *nodes_run the kernels run. */
static void run_all(loom_graph *g, loom_output x, loom_tensor *xt, int nf, const loom_output *fetches, int threads,
                    loom_tensor **out, int32_t *nodes_run) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s, "%s", loom_status_message(st));
  for (int rep = 0; rep < 2; rep++) {
    for (int i = 0; i < nf; i++) {
      if (rep) loom_tensor_free(out[i]);
      out[i] = NULL;
    }
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetches, out, nf, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
  }
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  *nodes_run = stats.nodes_run;
  loom_session_free(s);
  loom_status_free(st);
}

/* A layer and the start of its backward pass: relu(conv(x, w) + b), its 2x2 stride-2 pool, and
 * rg = ReluGrad(MaxPoolGrad(relu, pool, pool + dyt), relu) (dyt random; x a placeholder). */
typedef struct {
  loom_graph *g;
  loom_output x, w, relu, pool, rg;
  loom_tensor *wt, *bt, *dyt;
  int64_t xd[4], wd[4];
} pool_layer;
static const int64_t ONES[4] = {1, 1, 1, 1};
static pool_layer pool_layer_new(loom_dtype dt, conv_case k) {
  pool_layer l;
  const int64_t ks[4] = {1, 2, 2, 1}, bd[1] = {k.o};
  const int64_t xd[4] = {k.n, k.h, k.w, k.c}, wd[4] = {k.kh, k.kw, k.c, k.o};
  memcpy(l.xd, xd, sizeof xd);
  memcpy(l.wd, wd, sizeof wd);
  l.g = loom_graph_new();
  l.wt = rand_tensor(dt, 4, wd, 0);
  l.bt = rand_tensor(dt, 1, bd, 0.1);
  l.x = loom_placeholder(l.g, dt, 4, xd, "x");
  l.w = const_of(l.g, l.wt, "w");
  l.relu = loom_relu(l.g, loom_bias_add(l.g, loom_conv2d(l.g, l.x, l.w, ONES, k.padding, ONES, "conv"),
                                        const_of(l.g, l.bt, "b"), "ba"), "relu");
  l.pool = loom_max_pool(l.g, l.relu, ks, ks, LOOM_PADDING_VALID, "pool");
  int64_t pd[4];
  cr_assert_eq(loom_output_dims(l.pool, pd), 4);
  l.dyt = rand_tensor(dt, 4, pd, 0.1);
  loom_output dy = loom_add(l.g, l.pool, const_of(l.g, l.dyt, "dy"), "dy");
  l.rg = loom_relu_grad(l.g, loom_max_pool_grad(l.g, l.relu, l.pool, dy, ks, ks, LOOM_PADDING_VALID, "mpg"),
                        l.relu, "rg");
  return l;
}
static void pool_layer_free(pool_layer *l) {
  loom_tensor_free(l->dyt);
  loom_tensor_free(l->wt);
  loom_tensor_free(l->bt);
  loom_graph_free(l->g);
}

/* A first layer's backward pass: MaxPoolGrad -> ReluGrad -> Conv2DBackpropFilter (and a BiasAddGrad,
 * and in one case a Conv2DBackpropInput reading the same gradient). Fetching the filter (and bias)
 * gradient alone folds the ReluGrad and, where `fold`, the filter gradient into the MaxPoolGrad (its dy
 * made image by image, never written); fetching the ReluGrad's result too folds nothing in the
 * backward pass. The filter gradients are equal bit for bit, at 1, 2 and 3 threads; the bias
 * gradients within rounding (the column sums are added in another order). */
static void layer_grad(loom_dtype dt, conv_case k, int with_dx, int fold) {
  pool_layer l = pool_layer_new(dt, k);
  loom_graph *g = l.g;
  const int64_t *xd = l.xd, *wd = l.wd, *st = ONES, *dil = ONES;
  loom_output x = l.x, w = l.w, rg = l.rg;
  loom_output f[4] = {loom_conv2d_backprop_filter(g, x, wd, rg, st, k.padding, dil, "dw"),
                      loom_bias_add_grad(g, rg, "db"), {NULL, 0}, {NULL, 0}};
  int nf = 2;
  if (with_dx) f[nf++] = loom_conv2d_backprop_input(g, xd, w, rg, st, k.padding, dil, "dx");
  f[nf] = rg;
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.05);
  char what[160];
  snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld k%lldx%lld o%lld%s", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k.n, (long long)k.h, (long long)k.w, (long long)k.c, (long long)k.kh, (long long)k.kw,
           (long long)k.o, with_dx ? " with dx" : "");
  loom_tensor *ref[4] = {NULL}, *got[4] = {NULL};
  int32_t nref, ngot;
  run_all(g, x, xt, nf + 1, f, 1, ref, &nref);
  for (int threads = 1; threads <= 3; threads++) {
    run_all(g, x, xt, nf, f, threads, got, &ngot);
    cr_assert_eq(ngot, nref - 1 - fold, "%s (%d threads): %d kernels run, %d with the ReluGrad fetched, expected %d fewer",
                 what, threads, ngot, nref, 1 + fold);
    expect_same(got[0], ref[0], what);
    if (with_dx) expect_same(got[2], ref[2], what);
    const int64_t n = loom_tensor_numel(ref[1]);
    for (int64_t j = 0; j < n; j++) {
      double a = dt == LOOM_F32 ? ((float *)loom_tensor_data(got[1]))[j] : ((double *)loom_tensor_data(got[1]))[j];
      double b = dt == LOOM_F32 ? ((float *)loom_tensor_data(ref[1]))[j] : ((double *)loom_tensor_data(ref[1]))[j];
      cr_assert(fabs(a - b) <= (dt == LOOM_F32 ? 1e-5 : 1e-13) * (fabs(b) + 1), "%s: bias gradient %lld: %.9g vs %.9g",
                what, (long long)j, a, b);
    }
    for (int i = 0; i < nf; i++) loom_tensor_free(got[i]);
  }
  double mag = 0;
  for (int64_t j = 0; j < loom_tensor_numel(ref[0]); j++)
    mag += fabs(dt == LOOM_F32 ? ((float *)loom_tensor_data(ref[0]))[j] : ((double *)loom_tensor_data(ref[0]))[j]);
  cr_assert(mag > 0, "%s: the filter gradient is not zero", what);
  for (int i = 0; i <= nf; i++) loom_tensor_free(ref[i]);
  loom_tensor_free(xt);
  pool_layer_free(&l);
}

Test(fuse, filter_gradient_over_max_pool_grad) {
  /* odd outputs (no pool folded, no winners recorded: the MaxPoolGrad searches its windows): a first
   * layer; 11 images: the filter gradient's two partitions split image 5 */
  layer_grad(LOOM_F32, (conv_case){3, 27, 27, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 0, 1);
  layer_grad(LOOM_F32, (conv_case){11, 27, 27, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 0, 1);
  layer_grad(LOOM_F64, (conv_case){11, 27, 27, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 0, 1);
  /* 5 output channels (no full vector), 3x3 over 3 input channels, VALID */
  layer_grad(LOOM_F32, (conv_case){2, 9, 7, 3, 3, 3, 5, 1, LOOM_PADDING_SAME}, 0, 1);
  layer_grad(LOOM_F32, (conv_case){2, 11, 10, 3, 3, 3, 5, 1, LOOM_PADDING_VALID}, 0, 1);
  /* not folded: the gradient also read by the input gradient; a 4x4 window over 8 channels (neither
   * these loops nor the winners') */
  layer_grad(LOOM_F32, (conv_case){3, 27, 27, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 1, 0);
  layer_grad(LOOM_F32, (conv_case){2, 12, 12, 8, 4, 4, 8, 1, LOOM_PADDING_SAME}, 0, 0);
}

/* The filter gradient from the pool's winners: the same backward pass over a layer whose pool records
 * its winners (a second layer's: many input channels), the filter gradient computed inside the
 * MaxPoolGrad from the pooled values (kernels/cpu/conv_winners.h). Against the unfolded plan (the
 * ReluGrad's result fetched: nothing folds in the backward pass, no winners recorded): two kernels
 * fewer, and the filter gradient equal to the sum over dy's pixels computed here in double (within
 * f32's or f64's rounding of the sum of the products' magnitudes); equal bit for bit at 1, 2 and 3
 * threads; the input gradient equal to the unfolded plan's (where it runs Winograd, made from the
 * pooled values and winners: the result then not written at all). */
static void winners_grad(loom_dtype dt, conv_case k, int folded, int with_dx, int halve) {
  pool_layer l = pool_layer_new(dt, k);
  loom_graph *g = l.g;
  const int64_t *xd = l.xd, *wd = l.wd, *st = ONES, *dil = ONES;
  loom_output x = l.x, w = l.w, rg = l.rg;
  int64_t yd[4];
  cr_assert_eq(loom_output_dims(l.relu, yd), 4);
  /* halve: the filter gradient over x and the gradient reshaped to twice the images of half the rows
   * (the same convolution's data seen another way: an alias of the result with other dims) */
  conv_case kr = k;
  int64_t ydr[4] = {yd[0], yd[1], yd[2], yd[3]};
  loom_output xdw = x, rgdw = rg;
  if (halve) {
    kr.n *= 2;
    kr.h /= 2;
    ydr[0] *= 2;
    ydr[1] /= 2;
    int64_t x2[4] = {kr.n, kr.h, kr.w, kr.c};
    xdw = loom_reshape(g, x, 4, x2, "x2");
    rgdw = loom_reshape(g, rg, 4, ydr, "rg2");
  }
  loom_output f[4] = {loom_conv2d_backprop_filter(g, xdw, wd, rgdw, st, k.padding, dil, "dw"),
                      loom_bias_add_grad(g, rg, "db"), loom_conv2d_backprop_input(g, xd, w, rg, st, k.padding, dil, "dx"),
                      rg};
  const int nf = with_dx ? 3 : 2; /* without dx nothing else reads rg: the MaxPoolGrad writes no result */
  f[nf] = rg;
  loom_tensor *xt = rand_tensor(dt, 4, xd, 0.05);
  char what[160];
  snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld k%lldx%lld o%lld %s%s%s", dt == LOOM_F64 ? "f64" : "f32",
           (long long)k.n, (long long)k.h, (long long)k.w, (long long)k.c, (long long)k.kh, (long long)k.kw,
           (long long)k.o, k.padding == LOOM_PADDING_SAME ? "SAME" : "VALID", with_dx ? " with dx" : "",
           halve ? " reshaped" : "");
  loom_tensor *ref[4] = {NULL}, *got[3] = {NULL}, *first = NULL, *first_dx = NULL;
  int32_t nref, ngot;
  run_all(g, x, xt, nf + 1, f, 1, ref, &nref);
  /* dw[kh][kw][c][o] = sum over (n, oh, ow) of x[n][oh + kh - pt][ow + kw - pl][c] * rg[n][oh][ow][o] */
  const int64_t pt = k.padding == LOOM_PADDING_SAME ? (k.kh - 1) / 2 : 0, pl = k.padding == LOOM_PADDING_SAME ? (k.kw - 1) / 2 : 0;
  const int64_t nw = k.kh * k.kw * k.c * k.o;
  double *want = calloc((size_t)nw, sizeof *want), *mag = calloc((size_t)nw, sizeof *mag);
  cr_assert(want && mag);
#define VAL(t, i) (dt == LOOM_F32 ? (double)((const float *)loom_tensor_data_const(t))[i] : ((const double *)loom_tensor_data_const(t))[i])
  for (int64_t n = 0; n < kr.n; n++)
    for (int64_t oh = 0; oh < ydr[1]; oh++)
      for (int64_t ow = 0; ow < ydr[2]; ow++)
        for (int64_t o = 0; o < k.o; o++) {
          double d = VAL(ref[nf], ((n * ydr[1] + oh) * ydr[2] + ow) * k.o + o);
          if (d == 0) continue;
          for (int64_t kh = 0; kh < k.kh; kh++)
            for (int64_t kw = 0; kw < k.kw; kw++) {
              int64_t ih = oh + kh - pt, iw = ow + kw - pl;
              if (ih < 0 || ih >= kr.h || iw < 0 || iw >= kr.w) continue;
              for (int64_t c = 0; c < k.c; c++) {
                double p = VAL(xt, ((n * kr.h + ih) * kr.w + iw) * k.c + c) * d;
                want[((kh * k.kw + kw) * k.c + c) * k.o + o] += p;
                mag[((kh * k.kw + kw) * k.c + c) * k.o + o] += fabs(p);
              }
            }
        }
  for (int threads = 1; threads <= 3; threads++) {
    run_all(g, x, xt, nf, f, threads, got, &ngot);
    cr_assert_eq(ngot, nref - 1 - folded, "%s (%d threads): %d kernels run, %d with the ReluGrad fetched, expected %d fewer",
                 what, threads, ngot, nref, 1 + folded);
    /* folded: the products summed exactly; not: the unfolded plan's loops (Winograd's rounding) */
    const double tol = dt == LOOM_F32 ? (folded ? 2e-6 : 1e-4) : (folded ? 1e-14 : 1e-11);
    for (int64_t i = 0; i < nw; i++)
      cr_assert(fabs(VAL(got[0], i) - want[i]) <= tol * (mag[i] + 1e-30), "%s (%d threads): dw[%lld] %.9g, want %.9g",
                what, threads, (long long)i, VAL(got[0], i), want[i]);
    if (with_dx) { /* the input gradient: from the winners, or reading the written result */
      expect_input_gradient(got[2], ref[2], folded && dx_from_winners(dt, k), what);
      if (threads == 1) first_dx = loom_tensor_copy(got[2], NULL);
      else expect_same(got[2], first_dx, what);
    }
    for (int64_t j = 0; j < k.o; j++) /* the bias gradient: column sums (of the pooled values) in double */
      cr_assert(fabs(VAL(got[1], j) - VAL(ref[1], j)) <= (dt == LOOM_F32 ? 1e-5 : 1e-13) * (fabs(VAL(ref[1], j)) + 1),
                "%s: bias gradient %lld: %.9g vs %.9g", what, (long long)j, VAL(got[1], j), VAL(ref[1], j));
    if (!first) first = got[0];
    else {
      expect_same(got[0], first, what);
      loom_tensor_free(got[0]);
    }
    for (int i = 1; i < nf; i++) loom_tensor_free(got[i]);
  }
#undef VAL
  double total = 0;
  for (int64_t i = 0; i < nw; i++) total += fabs(want[i]);
  cr_assert(total > 0, "%s: the filter gradient is not zero", what);
  free(want);
  free(mag);
  loom_tensor_free(first);
  loom_tensor_free(first_dx);
  for (int i = 0; i < 4; i++) loom_tensor_free(ref[i]);
  loom_tensor_free(xt);
  pool_layer_free(&l);
}

Test(fuse, filter_gradient_from_the_pools_winners) {
  /* the CNN's second layer (5x5, 16 -> 32 channels: vectors over input channels), beside its input
   * gradient and alone */
  winners_grad(LOOM_F32, (conv_case){2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  winners_grad(LOOM_F64, (conv_case){2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  winners_grad(LOOM_F32, (conv_case){2, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  /* the first layer (one input channel: vectors over output channels), alone (the result never
   * written, the bias gradient from the pooled values) and beside dx; 11 images: 6 of the 8
   * partitions hold two, 2 none */
  winners_grad(LOOM_F32, (conv_case){3, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  winners_grad(LOOM_F64, (conv_case){11, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  winners_grad(LOOM_F32, (conv_case){3, 28, 28, 1, 5, 5, 16, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  /* vectors over input channels, 3x3: over 3, 5 and 20 channels (a vector's part, one and a part),
   * 7 and 9 output channels; VALID */
  winners_grad(LOOM_F32, (conv_case){11, 8, 6, 5, 3, 3, 7, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  winners_grad(LOOM_F32, (conv_case){3, 10, 12, 20, 3, 3, 9, 1, LOOM_PADDING_VALID}, 1, 0, 0);
  winners_grad(LOOM_F64, (conv_case){3, 10, 12, 20, 3, 3, 9, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  winners_grad(LOOM_F32, (conv_case){2, 8, 10, 3, 3, 3, 9, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  winners_grad(LOOM_F64, (conv_case){2, 8, 10, 3, 3, 3, 9, 1, LOOM_PADDING_VALID}, 1, 1, 0);
  /* vectors over output channels with 5 and 9 of them (no whole vector: the pooled values and
   * codes copied whole vectors apart, so that no lane reads past them; the bias gradient's channels
   * past the last block), over 1 and 2 input channels, 3x3 and 5x5 */
  winners_grad(LOOM_F32, (conv_case){2, 8, 10, 1, 3, 3, 5, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  winners_grad(LOOM_F64, (conv_case){2, 8, 10, 1, 3, 3, 5, 1, LOOM_PADDING_VALID}, 1, 1, 0);
  winners_grad(LOOM_F32, (conv_case){3, 12, 12, 2, 5, 5, 9, 1, LOOM_PADDING_SAME}, 1, 0, 0);
  winners_grad(LOOM_F32, (conv_case){3, 12, 12, 2, 5, 5, 9, 1, LOOM_PADDING_SAME}, 1, 1, 0);
  /* not folded: a 4x4 window; the gradient seen through a reshape (other dims than the pool's) */
  winners_grad(LOOM_F32, (conv_case){2, 12, 12, 8, 4, 4, 8, 1, LOOM_PADDING_SAME}, 0, 1, 0);
  winners_grad(LOOM_F32, (conv_case){2, 28, 28, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 0, 0, 1);
}

/* LOOM_FOLD=0 (read once per process; Criterion runs each test in its own) runs every step. */
Test(fuse, turned_off_by_environment) {
  setenv("LOOM_FOLD", "0", 1);
  small_conv sc = small_conv_new();
  loom_output relu = loom_relu(sc.g, loom_bias_add(sc.g, sc.conv, sc.bias, "ba"), "relu");
  loom_output end = loom_add(sc.g, relu, relu, "end");
  int32_t n;
  loom_tensor *t = run_fetch(sc.g, sc.x, sc.xt, 1, &end, 1, &n);
  cr_assert_eq(n, 4, "conv, bias_add, relu, add each ran: %d kernels", n);
  loom_tensor_free(t);
  small_conv_free(&sc);
}

/* The kernels' side of the routed input gradient, each called directly on buffers made here. A
 * Conv2DBackpropInput whose ctx names a routing MaxPoolGrad (kernels/kernel.h: routed) makes its dy
 * from that step's pooled values and winners: with its own dy all NaN (so that any read of it would
 * show), its result equals bit for bit the same kernel's over dy routed here by hand, serially and
 * over 2 and 3 threads, or, where it sums the winners' terms directly (5x5 SAME on AVX-512 with whole
 * vectors of channels: loom__conv_dx_winners_fit), is within rounding of dx summed here in double,
 * the same bits at every thread count. A MaxPoolGrad marked unwritten leaves its result as it was (a sentinel) and
 * gives the column sums of the pooled values at winners. */
static loom_kctx kctx_of(const loom_attrs *at, int nin, loom_buf **in, loom_buf **out, loom_status *st) {
  loom_kctx c = {0};
  c.attrs = at;
  c.nin = nin;
  c.nout = 1;
  c.in = in;
  c.out = out;
  c.st = st;
  return c;
}
static void routed_kernels(loom_dtype dt, int64_t N, int64_t PH, int64_t PW, int64_t C, int64_t Cx, int padding) {
  const size_t es = dt == LOOM_F32 ? 4 : 8;
  const int64_t H = 2 * PH, W = 2 * PW, XH = padding == LOOM_PADDING_SAME ? H : H + 4,
                XW = padding == LOOM_PADDING_SAME ? W : W + 4, np = N * PH * PW * C;
  const loom_attrs at = conv_attrs(1, padding);
  int64_t fd[4] = {5, 5, Cx, C};
  loom_tensor *ft = rand_tensor(dt, 4, fd, 0);
  int64_t pd[4] = {N, PH, PW, C};
  loom_tensor *pt = rand_tensor(dt, 4, pd, 0.05);
  uint8_t *code = malloc((size_t)np);
  char *dy = calloc((size_t)(N * H * W * C), es), *nan_dy = malloc((size_t)(N * H * W * C) * es);
  char *ref = malloc((size_t)(N * XH * XW * Cx) * es), *got = malloc((size_t)(N * XH * XW * Cx) * es);
  cr_assert(code && dy && nan_dy && ref && got);
  for (int64_t i = 0; i < np; i++) code[i] = (uint8_t)((urand() + 1) * 2.5); /* 0-4: 4 is no winner */
  for (int64_t i = 0; i < N * H * W * C; i++) {
    if (dt == LOOM_F32) ((float *)nan_dy)[i] = NAN;
    else ((double *)nan_dy)[i] = NAN;
  }
  for (int64_t n = 0; n < N; n++) /* dy by hand: each pooled value at its winner */
    for (int64_t y = 0; y < PH; y++)
      for (int64_t x = 0; x < PW; x++)
        for (int64_t c = 0; c < C; c++) {
          const int64_t q = ((n * PH + y) * PW + x) * C + c;
          if (code[q] == 4) continue;
          const int64_t o = ((n * H + 2 * y + code[q] / 2) * W + 2 * x + code[q] % 2) * C + c;
          memcpy(dy + o * (int64_t)es, (const char *)loom_tensor_data_const(pt) + q * (int64_t)es, es);
        }
  loom_buf F = buf_of(dt, 5, 5, Cx, C, loom_tensor_data(ft)), DY = buf_of(dt, N, H, W, C, dy),
           DX = buf_of(dt, N, XH, XW, Cx, ref), DP = buf_of(dt, N, PH, PW, C, loom_tensor_data(pt));
  cr_assert(loom__conv_dx_routable(&at, &F, &DY, &DX), "the input gradient runs the Winograd loops");
  loom_buf *in[2] = {&F, &DY}, *out[1] = {&DX}, *mpg_in[3] = {&DY, &DY, &DP};
  size_t ws_size = loom__ws_conv2d_backprop_input(&at, 2, (const loom_buf *const *)in, 1, (const loom_buf *const *)out);
  void *ws = aligned_alloc(64, (ws_size + 63) / 64 * 64);
  cr_assert(ws);
  loom_status *st = loom_status_new();
  loom_epilogue mpg_epi, dx_epi;
  memset(&mpg_epi, 0, sizeof mpg_epi);
  memset(&dx_epi, 0, sizeof dx_epi);
  mpg_epi.argmax = code;
  loom_kctx mpg = {0}, c = kctx_of(&at, 2, in, out, st);
  mpg.in = mpg_in;
  mpg.epi = &mpg_epi;
  dx_epi.routed = &mpg;
  dx_epi.route = dt == LOOM_F32 ? loom__max_pool_route_image_f32 : loom__max_pool_route_image_f64;
  c.ws = ws;
  c.ws_size = ws_size;
  loom_code (*k)(const loom_kctx *) = dt == LOOM_F32 ? loom__k_conv2d_backprop_input_f32 : loom__k_conv2d_backprop_input_f64;
  cr_assert_eq(k(&c), LOOM_OK, "%s", loom_status_message(st));
  DY.data = nan_dy;
  DX.data = got;
  c.epi = &dx_epi;
  /* from the winners directly (another order of the sums): against dx summed here in double from the
   * pooled values, winners and filter, within f32 or f64 rounding of each element's terms */
  const int winners = loom__conv_dx_winners_fit(&at, &F, &DY, &DX);
  const int64_t pad = padding == LOOM_PADDING_SAME ? 2 : 0;
  double *exact = calloc((size_t)DX.numel, sizeof *exact), *mag = calloc((size_t)DX.numel, sizeof *mag);
  char *first = malloc((size_t)DX.numel * es);
  cr_assert(exact && mag && first);
#define EL(p, i) (dt == LOOM_F32 ? (double)((const float *)(p))[i] : ((const double *)(p))[i])
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < H; oh++)
      for (int64_t ow = 0; ow < W; ow++)
        for (int64_t o = 0; o < C; o++) {
          const double d = EL(dy, ((n * H + oh) * W + ow) * C + o);
          if (d == 0) continue;
          for (int64_t kh = 0; kh < 5; kh++)
            for (int64_t kw = 0; kw < 5; kw++) {
              const int64_t ih = oh + kh - pad, iw = ow + kw - pad;
              if (ih < 0 || ih >= XH || iw < 0 || iw >= XW) continue;
              for (int64_t cx = 0; cx < Cx; cx++) {
                const double p = d * EL(loom_tensor_data_const(ft), ((kh * 5 + kw) * Cx + cx) * C + o);
                exact[((n * XH + ih) * XW + iw) * Cx + cx] += p;
                mag[((n * XH + ih) * XW + iw) * Cx + cx] += fabs(p);
              }
            }
        }
  for (int threads = 1; threads <= 3; threads++) {
    c.pool = threads > 1 ? loom__pool_new(threads) : NULL;
    memset(got, 0, (size_t)DX.numel * es);
    cr_assert_eq(k(&c), LOOM_OK, "%s", loom_status_message(st));
    char what[120];
    snprintf(what, sizeof what, "%s N=%lld %lldx%lld C=%lld -> %lld %s (%d threads)", dt == LOOM_F32 ? "f32" : "f64",
             (long long)N, (long long)H, (long long)W, (long long)C, (long long)Cx,
             padding == LOOM_PADDING_SAME ? "SAME" : "VALID", threads);
    if (!winners) {
      cr_assert(!memcmp(ref, got, (size_t)DX.numel * es), "%s: the routed input gradient differs from the one over dy",
                what);
    } else {
      for (int64_t i = 0; i < DX.numel; i++)
        cr_assert(fabs(EL(got, i) - exact[i]) <= (dt == LOOM_F32 ? 2e-6 : 1e-14) * (mag[i] + 1e-30),
                  "%s: the input gradient from the winners [%lld] %.9g, want %.9g", what, (long long)i, EL(got, i),
                  exact[i]);
      if (threads == 1) memcpy(first, got, (size_t)DX.numel * es);
      else cr_assert(!memcmp(first, got, (size_t)DX.numel * es), "%s: differs from 1 thread's", what);
    }
    if (c.pool) loom__pool_free(c.pool);
  }
#undef EL
  free(exact);
  free(mag);
  free(first);
  /* the MaxPoolGrad marked unwritten: its result untouched, the column sums of the kept pooled values */
  loom_attrs pa;
  memset(&pa, 0, sizeof pa);
  pa.ksize[0] = pa.ksize[3] = pa.strides[0] = pa.strides[3] = 1;
  pa.ksize[1] = pa.ksize[2] = pa.strides[1] = pa.strides[2] = 2;
  pa.padding = LOOM_PAD_VALID;
  double *colsum = calloc((size_t)(N * C), sizeof *colsum);
  cr_assert(colsum);
  mpg_epi.unwritten = 1;
  mpg_epi.colsum = colsum;
  DY.data = nan_dy; /* the MaxPoolGrad's result, prefilled: NaN */
  loom_buf X = buf_of(dt, N, H, W, C, nan_dy), P = buf_of(dt, N, PH, PW, C, nan_dy);
  loom_buf *pin[3] = {&X, &P, &DP}, *pout[1] = {&DY};
  loom_kctx m = kctx_of(&pa, 3, pin, pout, st);
  m.epi = &mpg_epi;
  cr_assert_eq((dt == LOOM_F32 ? loom__k_max_pool_grad_f32 : loom__k_max_pool_grad_f64)(&m), LOOM_OK, "%s",
               loom_status_message(st));
  for (int64_t i = 0; i < N * H * W * C; i++)
    cr_assert(dt == LOOM_F32 ? isnan(((float *)nan_dy)[i]) : isnan(((double *)nan_dy)[i]),
              "the unwritten MaxPoolGrad wrote its result at %lld", (long long)i);
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      double want = 0;
      for (int64_t w = 0; w < PH * PW; w++) {
        const int64_t q = (n * PH * PW + w) * C + ch;
        if (code[q] < 4)
          want += dt == LOOM_F32 ? ((const float *)loom_tensor_data_const(pt))[q] : ((const double *)loom_tensor_data_const(pt))[q];
      }
      cr_assert(fabs(colsum[n * C + ch] - want) <= 1e-12 * (fabs(want) + 1), "column sum (%lld, %lld): %.17g, want %.17g",
                (long long)n, (long long)ch, colsum[n * C + ch], want);
    }
  free(colsum);
  loom_status_free(st);
  free(ws);
  free(code);
  free(dy);
  free(nan_dy);
  free(ref);
  free(got);
  loom_tensor_free(ft);
  loom_tensor_free(pt);
}

Test(fuse, routed_input_gradient_kernels) {
  routed_kernels(LOOM_F32, 3, 7, 7, 32, 16, LOOM_PADDING_SAME); /* the CNN's second layer */
  routed_kernels(LOOM_F64, 3, 7, 7, 32, 16, LOOM_PADDING_SAME);
  routed_kernels(LOOM_F32, 2, 5, 6, 20, 9, LOOM_PADDING_VALID);  /* channels past whole blocks; VALID */
  routed_kernels(LOOM_F32, 5, 3, 4, 8, 12, LOOM_PADDING_SAME);   /* fewer channels than a block */
}

/* The routed input gradient in a plan. Without a filter gradient: the input and bias gradients alone
 * (the MaxPoolGrad writes no result; the bias gradient's column sums from its own pass over the pooled
 * values). With another reader of the result (a pool of it, summed): the result written for it and
 * the input gradient still made from the pooled values. Both against the unfolded plan (the
 * ReluGrad's result fetched), at 1, 2 and 3 threads: the input gradient and the other reader's value
 * bit for bit, the bias within rounding. */
static void routed_plan(loom_dtype dt, conv_case k, int other_reader) {
  pool_layer l = pool_layer_new(dt, k);
  const int64_t ks[4] = {1, 2, 2, 1};
  loom_output f[4];
  int nf = 0;
  if (other_reader) { /* the pool an intermediate value, summed over its images */
    const int64_t ax[1] = {0};
    f[nf++] = loom_reduce_sum(l.g, loom_max_pool(l.g, l.rg, ks, ks, LOOM_PADDING_VALID, "rg_pool"), 1, ax, 0,
                              "rg_pool_sum");
  }
  f[nf++] = loom_bias_add_grad(l.g, l.rg, "db");
  f[nf++] = loom_conv2d_backprop_input(l.g, l.xd, l.w, l.rg, ONES, k.padding, ONES, "dx");
  f[nf] = l.rg;
  loom_tensor *xt = rand_tensor(dt, 4, l.xd, 0.05), *ref[4] = {NULL}, *got[4] = {NULL}, *first_dx = NULL;
  int32_t nref, ngot;
  run_all(l.g, l.x, xt, nf + 1, f, 1, ref, &nref);
  for (int threads = 1; threads <= 3; threads++) {
    run_all(l.g, l.x, xt, nf, f, threads, got, &ngot);
    cr_assert_eq(ngot, nref - 1, "%d threads: %d kernels run, %d with the ReluGrad fetched", threads, ngot, nref);
    expect_input_gradient(got[nf - 1], ref[nf - 1], dx_from_winners(dt, k), "the routed input gradient");
    if (threads == 1) first_dx = loom_tensor_copy(got[nf - 1], NULL);
    else expect_same(got[nf - 1], first_dx, "the routed input gradient at 1 and more threads");
    if (other_reader) expect_same(got[0], ref[0], "the other reader of the result");
    const loom_tensor *gb = got[nf - 2], *rb = ref[nf - 2];
    for (int64_t j = 0; j < k.o; j++) {
      double a = dt == LOOM_F32 ? ((const float *)loom_tensor_data_const(gb))[j] : ((const double *)loom_tensor_data_const(gb))[j];
      double b = dt == LOOM_F32 ? ((const float *)loom_tensor_data_const(rb))[j] : ((const double *)loom_tensor_data_const(rb))[j];
      cr_assert(fabs(a - b) <= (dt == LOOM_F32 ? 1e-5 : 1e-13) * (fabs(b) + 1), "bias gradient %lld: %.9g vs %.9g",
                (long long)j, a, b);
    }
    for (int i = 0; i < nf; i++) loom_tensor_free(got[i]);
  }
  for (int i = 0; i <= nf; i++) loom_tensor_free(ref[i]);
  loom_tensor_free(first_dx);
  loom_tensor_free(xt);
  pool_layer_free(&l);
}

Test(fuse, routed_input_gradient_in_a_plan) {
  routed_plan(LOOM_F32, (conv_case){3, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 0);
  routed_plan(LOOM_F64, (conv_case){2, 12, 10, 9, 5, 5, 20, 1, LOOM_PADDING_VALID}, 0);
  routed_plan(LOOM_F32, (conv_case){3, 14, 14, 16, 5, 5, 32, 1, LOOM_PADDING_SAME}, 1);
}
