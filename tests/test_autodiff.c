/* Driver-level tests of loom_gradients: path summing, grad_ys, unreachable
 * inputs, StopGradient, the UNIMPLEMENTED error, and gradient semantics that
 * finite differences cannot check (ties, zeros, unknown dims, f32). */
#include "test_util.h"
#include "ops/op_list.h"
#include "engine/engine_impl.h"

static loom_output ph_f32(loom_graph *g, int ndim, const int64_t *dims, const char *name) {
  return loom_placeholder(g, LOOM_F32, ndim, dims, name);
}
static loom_output cf32(loom_graph *g, int ndim, const int64_t *dims, const float *v) {
  return loom_const_data(g, LOOM_F32, ndim, dims, v, NULL);
}

/* d sum(y) / d x, asserting success; returns the gradient output. */
static loom_output grad1(loom_graph *g, loom_output y, loom_output x) {
  loom_output gr = {NULL, 0};
  loom_status *st = loom_status_new();
  loom_code rc = loom_gradients(g, 1, &y, NULL, 1, &x, &gr, st);
  cr_assert_eq(rc, LOOM_OK, "gradients: %s", loom_status_message(st));
  cr_assert(gr.node, "no gradient");
  loom_status_free(st);
  return gr;
}

/* Runs grad with x fed by (ndim, dims, data) and checks the f32 result. */
static void expect_grad(loom_graph *g, loom_output x, int ndim, const int64_t *dims, const float *xv,
                        loom_output gr, const float *want) {
  loom_tensor *t = tu_f32(ndim, dims, xv);
  loom_tensor *out = tu_run1(g, 1, &x, &t, gr);
  tu_expect_f32(out, ndim, dims, want, 1e-5);
  loom_tensor_free(out);
  loom_tensor_free(t);
}

Test(autodiff, paths_are_summed) {
  /* y = x*x + x: dy/dx = 2x + 1 */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = ph_f32(g, 1, d, "x");
  loom_output y = loom_add(g, loom_mul(g, x, x, NULL), x, NULL);
  loom_output gr = grad1(g, y, x);
  float xv[3] = {1, -2, 0.5f}, want[3] = {3, -3, 2};
  expect_grad(g, x, 1, d, xv, gr, want);
  loom_graph_free(g);
}

Test(autodiff, several_ys_are_summed) {
  /* ys = {2x, x^2}: d(sum 2x + sum x^2)/dx = 2 + 2x */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {2};
  loom_output x = ph_f32(g, 1, d, "x");
  float two = 2;
  loom_output ys[2] = {loom_mul(g, x, cf32(g, 0, NULL, &two), NULL), loom_square(g, x, NULL)};
  loom_output gr = {NULL, 0};
  cr_assert_eq(loom_gradients(g, 2, ys, NULL, 1, &x, &gr, NULL), LOOM_OK);
  float xv[2] = {1, -3}, want[2] = {4, -4};
  expect_grad(g, x, 1, d, xv, gr, want);
  loom_graph_free(g);
}

Test(autodiff, grad_ys_weight_the_outputs) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = ph_f32(g, 1, d, "x");
  float three = 3, w[3] = {1, 10, -2};
  loom_output y = loom_mul(g, x, cf32(g, 0, NULL, &three), NULL);
  loom_output gy = cf32(g, 1, d, w);
  loom_output gr = {NULL, 0};
  cr_assert_eq(loom_gradients(g, 1, &y, &gy, 1, &x, &gr, NULL), LOOM_OK);
  float xv[3] = {5, 6, 7}, want[3] = {3, 30, -6};
  expect_grad(g, x, 1, d, xv, gr, want);
  loom_graph_free(g);
}

Test(autodiff, unrelated_x_gets_null) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {2};
  loom_output x = ph_f32(g, 1, d, "x"), z = ph_f32(g, 1, d, "z");
  loom_output y = loom_exp(g, x, NULL);
  loom_output xs[2] = {z, x}, gr[2];
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 2, xs, gr, NULL), LOOM_OK);
  cr_assert_null(gr[0].node);
  cr_assert_not_null(gr[1].node);
  /* x reaching y only through a non-differentiable op (a comparison) */
  loom_output c = loom_select(g, loom_greater(g, z, x, NULL), x, x, NULL);
  loom_output g2[1];
  cr_assert_eq(loom_gradients(g, 1, &c, NULL, 1, &z, g2, NULL), LOOM_OK);
  cr_assert_null(g2[0].node);
  loom_graph_free(g);
}

Test(autodiff, stop_gradient_cuts_the_path) {
  /* y = x * stop(x): dy/dx = stop(x) = x (one path only) */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = ph_f32(g, 1, d, "x");
  loom_output y = loom_mul(g, x, loom_stop_gradient(g, x, NULL), NULL);
  loom_output gr = grad1(g, y, x);
  float xv[3] = {1, -2, 4};
  expect_grad(g, x, 1, d, xv, gr, xv);
  /* nothing but a StopGradient between x and y: no gradient at all */
  loom_output y2 = loom_exp(g, loom_stop_gradient(g, x, NULL), NULL);
  loom_output g2 = {NULL, 0};
  cr_assert_eq(loom_gradients(g, 1, &y2, NULL, 1, &x, &g2, NULL), LOOM_OK);
  cr_assert_null(g2.node);
  loom_graph_free(g);
}

Test(autodiff, missing_gradient_is_unimplemented_naming_the_op) {
  /* Criterion runs each test in its own process: unregistering a gradient
   * here affects no other test. */
  loom_graph *g = loom_graph_new();
  loom__op_table()[LOOM_OP_Exp].grad = NULL;
  int64_t d[1] = {2};
  loom_output x = ph_f32(g, 1, d, "x");
  loom_output y = loom_square(g, loom_exp(g, x, "myexp"), NULL);
  loom_output gr = {NULL, 0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 1, &x, &gr, st), LOOM_UNIMPLEMENTED);
  const char *m = loom_status_message(st);
  cr_assert(strstr(m, "myexp") && strstr(m, "Exp"), "message: %s", m);
  cr_assert_null(gr.node);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(autodiff, bad_arguments) {
  loom_graph *g = loom_graph_new(), *h = loom_graph_new();
  int64_t d[1] = {2};
  loom_output x = ph_f32(g, 1, d, "x"), hx = ph_f32(h, 1, d, "hx");
  loom_output y = loom_exp(g, x, NULL), gr = {NULL, 0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(NULL, 1, &y, NULL, 1, &x, &gr, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_gradients(g, 0, &y, NULL, 1, &x, &gr, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 1, &hx, &gr, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "xs[0]"), "%s", loom_status_message(st));
  cr_assert_eq(loom_gradients(g, 1, &hx, NULL, 1, &x, &gr, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "ys[0]"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
  loom_graph_free(h);
}

/* ---- semantics finite differences cannot see ---- */

Test(autodiff, maximum_minimum_ties_go_to_x) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  float yv[3] = {1, 5, -1};
  loom_output x = ph_f32(g, 1, d, "x"), y = cf32(g, 1, d, yv);
  loom_output xs[2] = {x, y}, gmax[2], gmin[2];
  loom_output mx = loom_maximum(g, x, y, NULL), mn = loom_minimum(g, x, y, NULL);
  cr_assert_eq(loom_gradients(g, 1, &mx, NULL, 2, xs, gmax, NULL), LOOM_OK);
  cr_assert_eq(loom_gradients(g, 1, &mn, NULL, 2, xs, gmin, NULL), LOOM_OK);
  float xv[3] = {1, 2, 0};
  float wx_max[3] = {1, 0, 1}, wy_max[3] = {0, 1, 0}, wx_min[3] = {1, 1, 0}, wy_min[3] = {0, 0, 1};
  expect_grad(g, x, 1, d, xv, gmax[0], wx_max);
  expect_grad(g, x, 1, d, xv, gmax[1], wy_max);
  expect_grad(g, x, 1, d, xv, gmin[0], wx_min);
  expect_grad(g, x, 1, d, xv, gmin[1], wy_min);
  loom_graph_free(g);
}

Test(autodiff, reduce_max_min_split_ties_equally) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {2, 3};
  loom_output x = ph_f32(g, 2, d, "x");
  int64_t ax = 1;
  loom_output gmax = grad1(g, loom_reduce_max(g, x, 1, &ax, 0, NULL), x);
  loom_output gmin = grad1(g, loom_reduce_min(g, x, -1, NULL, 0, NULL), x);
  float xv[6] = {3, 3, 1, -1, -1, -1};
  float wmax[6] = {0.5f, 0.5f, 0, 1.f / 3, 1.f / 3, 1.f / 3};
  float wmin[6] = {0, 0, 0, 1.f / 3, 1.f / 3, 1.f / 3};
  expect_grad(g, x, 2, d, xv, gmax, wmax);
  expect_grad(g, x, 2, d, xv, gmin, wmin);
  loom_graph_free(g);
}

Test(autodiff, reduce_prod_with_zeros) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, 3};
  loom_output x = ph_f32(g, 2, d, "x");
  int64_t ax = 1;
  loom_output gr = grad1(g, loom_reduce_prod(g, x, 1, &ax, 0, NULL), x);
  /* row 0: no zero; row 1: one zero; row 2: two zeros */
  float xv[9] = {2, 3, 4, 2, 0, 5, 0, 7, 0};
  float want[9] = {12, 8, 6, 0, 10, 0, 0, 0, 0};
  expect_grad(g, x, 2, d, xv, gr, want);
  loom_graph_free(g);
}

Test(autodiff, pow_negative_base) {
  /* TF: d/dy of x^y is 0 where x <= 0; d/dx = y * x^(y-1) */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  float ev[3] = {3, 2, 2};
  loom_output x = ph_f32(g, 1, d, "x"), e = loom_placeholder(g, LOOM_F32, 1, d, "e");
  loom_output z = loom_pow(g, x, e, NULL);
  loom_output xs[2] = {x, e}, gr[2];
  cr_assert_eq(loom_gradients(g, 1, &z, NULL, 2, xs, gr, NULL), LOOM_OK);
  float xv[3] = {-2, 0, 3};
  loom_tensor *vals[2] = {tu_f32(1, d, xv), tu_f32(1, d, ev)};
  loom_output feeds[2] = {x, e};
  loom_tensor *gx = tu_run1(g, 2, feeds, vals, gr[0]), *ge = tu_run1(g, 2, feeds, vals, gr[1]);
  float wx[3] = {12, 0, 6}, we[3] = {0, 0, 9 * logf(3)};
  tu_expect_f32(gx, 1, d, wx, 1e-5);
  tu_expect_f32(ge, 1, d, we, 1e-5);
  loom_tensor_free(gx);
  loom_tensor_free(ge);
  loom_tensor_free(vals[0]);
  loom_tensor_free(vals[1]);
  loom_graph_free(g);
}

Test(autodiff, clip_bounds_get_the_clipped_gradient) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {2, 3}, dl[1] = {3};
  loom_output t = ph_f32(g, 2, d, "t");
  float lov[3] = {0, -1, 0}, hiv = 1;
  loom_output lo = cf32(g, 1, dl, lov), hi = cf32(g, 0, NULL, &hiv);
  loom_output y = loom_clip_by_value(g, t, lo, hi, NULL);
  loom_output xs[3] = {t, lo, hi}, gr[3];
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 3, xs, gr, NULL), LOOM_OK);
  float tv[6] = {-1, 0.5f, 2, 0.2f, -3, 1};
  float wt[6] = {0, 1, 0, 1, 0, 1}, wlo[3] = {1, 1, 0}, whi[1] = {1};
  expect_grad(g, t, 2, d, tv, gr[0], wt);
  loom_tensor *tt = tu_f32(2, d, tv), *gl = tu_run1(g, 1, &t, &tt, gr[1]), *gh = tu_run1(g, 1, &t, &tt, gr[2]);
  tu_expect_f32(gl, 1, dl, wlo, 1e-6);
  tu_expect_f32(gh, 0, NULL, whi, 1e-6);
  loom_tensor_free(gl);
  loom_tensor_free(gh);
  loom_tensor_free(tt);
  loom_graph_free(g);
}

/* ---- unknown dims: the gradients are built without static shapes ---- */

Test(autodiff, reductions_with_unknown_dims) {
  loom_graph *g = loom_graph_new();
  int64_t pd[3] = {-1, 3, -1}, d[3] = {2, 3, 2};
  loom_output x = ph_f32(g, 3, pd, "x");
  int64_t ax02[2] = {0, 2}, ax1 = -2;
  loom_output mean02 = grad1(g, loom_reduce_mean(g, x, 2, ax02, 0, NULL), x);
  loom_output mean_all = grad1(g, loom_reduce_mean(g, x, -1, NULL, 0, NULL), x);
  loom_output mean1k = grad1(g, loom_reduce_mean(g, x, 1, &ax1, 1, NULL), x);
  loom_output sum02 = grad1(g, loom_reduce_sum(g, x, 2, ax02, 0, NULL), x);
  loom_output max1 = grad1(g, loom_reduce_max(g, x, 1, &ax1, 0, NULL), x);
  loom_output lse1 = grad1(g, loom_reduce_logsumexp(g, x, 1, &ax1, 0, NULL), x);
  float xv[12], w4[12], w12[12], w3[12], one[12], wmax[12], wlse[12];
  for (int i = 0; i < 12; i++) {
    xv[i] = (float)((i * 7) % 5) - 2.f + 0.1f * (float)i;
    w4[i] = 0.25f;
    w12[i] = 1.f / 12;
    w3[i] = 1.f / 3;
    one[i] = 1;
  }
  /* over axis 1 (size 3) for each (i, k) */
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 2; k++) {
      int best = 0;
      double s = 0;
      for (int j = 0; j < 3; j++) {
        if (xv[i * 6 + j * 2 + k] > xv[i * 6 + best * 2 + k]) best = j;
        s += exp(xv[i * 6 + j * 2 + k]);
      }
      for (int j = 0; j < 3; j++) {
        wmax[i * 6 + j * 2 + k] = j == best ? 1.f : 0.f;
        wlse[i * 6 + j * 2 + k] = (float)(exp(xv[i * 6 + j * 2 + k]) / s);
      }
    }
  expect_grad(g, x, 3, d, xv, mean02, w4);
  expect_grad(g, x, 3, d, xv, mean_all, w12);
  expect_grad(g, x, 3, d, xv, mean1k, w3);
  expect_grad(g, x, 3, d, xv, sum02, one);
  expect_grad(g, x, 3, d, xv, max1, wmax);
  expect_grad(g, x, 3, d, xv, lse1, wlse);
  /* the same graph with another batch size */
  int64_t d2[3] = {4, 3, 1};
  float w12b[12];
  for (int i = 0; i < 12; i++) w12b[i] = 0.25f;
  expect_grad(g, x, 3, d2, xv, mean02, w12b);
  loom_graph_free(g);
}

Test(autodiff, matmul_bias_relu_mean_unknown_batch) {
  /* loss = mean(relu(x W + b)); x [?,2], W [2,2], b [2] */
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {-1, 2}, wd[2] = {2, 2}, bd[1] = {2};
  float Wv[4] = {1, -1, 2, 1}, bv[2] = {0.5f, -0.5f};
  loom_output x = ph_f32(g, 2, pd, "x"), W = cf32(g, 2, wd, Wv), b = cf32(g, 1, bd, bv);
  loom_output h = loom_relu(g, loom_bias_add(g, loom_matmul(g, x, W, 0, 0, NULL), b, NULL), NULL);
  loom_output loss = loom_reduce_mean(g, h, -1, NULL, 0, NULL);
  loom_output xs[3] = {x, W, b}, gr[3];
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 3, xs, gr, NULL), LOOM_OK);
  int64_t d[2] = {2, 2};
  float xv[4] = {1, 1, -1, 0.5f};
  /* z = x W + b: row0 = [1+2+.5, -1+1-.5] = [3.5, -.5]; row1 = [-1+1+.5, 1+.5-.5] = [.5, 1]
   * dz = 0.25 * (z > 0) = [[.25, 0], [.25, .25]] */
  float wx[4] = {0.25f * 1 + 0, 0.25f * 2, 0.25f * 1 - 0.25f, 0.25f * 2 + 0.25f};
  expect_grad(g, x, 2, d, xv, gr[0], wx);
  /* dW = x^T dz = [[.25 - .25, -.25], [.25 + .125, .125]] */
  float wW[4] = {0, -0.25f, 0.375f, 0.125f}, wb[2] = {0.5f, 0.25f};
  expect_grad(g, x, 2, d, xv, gr[1], wW);
  loom_tensor *t = tu_f32(2, d, xv), *gb = tu_run1(g, 1, &x, &t, gr[2]);
  tu_expect_f32(gb, 1, bd, wb, 1e-6);
  loom_tensor_free(gb);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(autodiff, batch_matmul_broadcast_unknown_batch) {
  /* a [?,2,2] x b [2,1]: db sums over the batch */
  loom_graph *g = loom_graph_new();
  int64_t pd[3] = {-1, 2, 2}, bd[2] = {2, 1};
  float bv[2] = {1, 2};
  loom_output a = ph_f32(g, 3, pd, "a"), b = cf32(g, 2, bd, bv);
  loom_output y = loom_batch_matmul(g, a, b, 0, 0, NULL);
  loom_output xs[2] = {a, b}, gr[2];
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 2, xs, gr, NULL), LOOM_OK);
  int64_t d[3] = {2, 2, 2};
  float av[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float wa[8] = {1, 2, 1, 2, 1, 2, 1, 2}, wb[2] = {1 + 3 + 5 + 7, 2 + 4 + 6 + 8};
  expect_grad(g, a, 3, d, av, gr[0], wa);
  loom_tensor *t = tu_f32(3, d, av), *gbv = tu_run1(g, 1, &a, &t, gr[1]);
  tu_expect_f32(gbv, 2, bd, wb, 1e-6);
  loom_tensor_free(gbv);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(autodiff, f32_elementwise_gradients) {
  /* the scalar constants of the gradient builders take the input's dtype */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = ph_f32(g, 1, d, "x");
  loom_output gsq = grad1(g, loom_square(g, x, NULL), x);
  loom_output gl1p = grad1(g, loom_log1p(g, x, NULL), x);
  loom_output gsel = grad1(g, loom_select(g, loom_greater(g, x, loom_zeros_like(g, x, NULL), NULL), x,
                                          loom_neg(g, x, NULL), NULL),
                           x);
  float xv[3] = {1, -0.5f, 2};
  float wsq[3] = {2, -1, 4}, wl1p[3] = {0.5f, 2, 1.f / 3}, wsel[3] = {1, -1, 1};
  expect_grad(g, x, 1, d, xv, gsq, wsq);
  expect_grad(g, x, 1, d, xv, gl1p, wl1p);
  expect_grad(g, x, 1, d, xv, gsel, wsel);
  loom_graph_free(g);
}

Test(autodiff, second_derivatives) {
  /* d2/dx2 tanh(x) = -2 tanh(x) (1 - tanh(x)^2); d2/dx2 sum(x^3) = 6x */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = ph_f32(g, 1, d, "x");
  loom_output g1 = grad1(g, loom_tanh(g, x, NULL), x);
  loom_output g2 = grad1(g, g1, x);
  loom_output c1 = grad1(g, loom_mul(g, loom_mul(g, x, x, NULL), x, NULL), x);
  loom_output c2 = grad1(g, c1, x);
  float xv[3] = {0.5f, -1, 2}, wt[3], wc[3];
  for (int i = 0; i < 3; i++) {
    float t = tanhf(xv[i]);
    wt[i] = -2 * t * (1 - t * t);
    wc[i] = 6 * xv[i];
  }
  expect_grad(g, x, 1, d, xv, g2, wt);
  expect_grad(g, x, 1, d, xv, c2, wc);
  loom_graph_free(g);
}
