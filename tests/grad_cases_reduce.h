/* Gradient-check cases for the reduce family (ops/reduce.def.h): reductions, matrix
 * products, bias add and ReduceSumLike.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- reduce ---- */
#define RED(fn, tag, nax, keep, ...)                                              \
  static loom_output b_##fn##_##tag(loom_graph *g, const loom_output *x) {        \
    static const int64_t ax[] = {__VA_ARGS__};                                    \
    return loom_##fn(g, x[0], nax, ax, keep, NULL);                               \
  }
#define RED_FAMILY(fn)             \
  RED(fn, all, -1, 0, 0)           \
  RED(fn, ax1, 1, 0, 1)            \
  RED(fn, ax02k, 2, 1, 0, 2)       \
  RED(fn, neg, 1, 0, -1)           \
  RED(fn, allk, -1, 1, 0)          \
  RED(fn, none, 0, 0, 0)
RED_FAMILY(reduce_sum)
RED_FAMILY(reduce_mean)
RED_FAMILY(reduce_max)
RED_FAMILY(reduce_min)
RED_FAMILY(reduce_prod)
RED_FAMILY(reduce_logsumexp)

#define MM(fn, ta, tb)                                                            \
  static loom_output b_##fn##_##ta##tb(loom_graph *g, const loom_output *x) {     \
    return loom_##fn(g, x[0], x[1], ta, tb, NULL);                                \
  }
MM(matmul, 0, 0)
MM(matmul, 0, 1)
MM(matmul, 1, 0)
MM(matmul, 1, 1)
MM(batch_matmul, 0, 0)
MM(batch_matmul, 0, 1)
MM(batch_matmul, 1, 0)
MM(batch_matmul, 1, 1)
BIN(bias_add)
static loom_output b_bias_add_grad(loom_graph *g, const loom_output *x) { return loom_bias_add_grad(g, x[0], NULL); }

BIN(reduce_sum_like)

/* a reduction case over a [3,4,2] input */
#define RCASE(OP, fn, tag, lo, hi, away) \
  {LOOM_OP_##OP, #fn "_" #tag, F64C, 1, {3}, {{3, 4, 2}}, b_##fn##_##tag, lo, hi, away, 0, 0, 0, 0}
#define RCASES(OP, fn, lo, hi, away)                                                                          \
  RCASE(OP, fn, all, lo, hi, away), RCASE(OP, fn, ax1, lo, hi, away), RCASE(OP, fn, ax02k, lo, hi, away),     \
      RCASE(OP, fn, neg, lo, hi, away), RCASE(OP, fn, allk, lo, hi, away), RCASE(OP, fn, none, lo, hi, away)

static const grad_case CASES_REDUCE[] = {
    /* reductions: all axes, one axis, two axes keepdims, negative axis, all keepdims, no axis */
    RCASES(Sum, reduce_sum, -1, 1, 0),
    RCASES(Mean, reduce_mean, -1, 1, 0),
    RCASES(Max, reduce_max, -1, 1, 0),
    RCASES(Min, reduce_min, -1, 1, 0),
    RCASES(Prod, reduce_prod, -1.5, 1.5, 0.5),
    RCASES(LogSumExp, reduce_logsumexp, -2, 2, 0),

    /* products: every transpose combination */
    {LOOM_OP_MatMul, "matmul_nn", F64C, 2, {2, 2}, {{3, 4}, {4, 5}}, b_matmul_00, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MatMul, "matmul_nt", F64C, 2, {2, 2}, {{3, 4}, {5, 4}}, b_matmul_01, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MatMul, "matmul_tn", F64C, 2, {2, 2}, {{4, 3}, {4, 5}}, b_matmul_10, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MatMul, "matmul_tt", F64C, 2, {2, 2}, {{4, 3}, {5, 4}}, b_matmul_11, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MatMul, "matmul_vec", F64C, 2, {2, 2}, {{3, 4}, {4, 1}}, b_matmul_00, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_BatchMatMul, "bmm_nn", F64C, 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}, b_batch_matmul_00, -1, 1, 0, 0, 0, 0,
     0},
    {LOOM_OP_BatchMatMul, "bmm_nt", F64C, 2, {3, 3}, {{2, 3, 4}, {2, 2, 4}}, b_batch_matmul_01, -1, 1, 0, 0, 0, 0,
     0},
    {LOOM_OP_BatchMatMul, "bmm_tn", F64C, 2, {3, 3}, {{2, 4, 3}, {2, 4, 2}}, b_batch_matmul_10, -1, 1, 0, 0, 0, 0,
     0},
    {LOOM_OP_BatchMatMul, "bmm_tt", F64C, 2, {3, 3}, {{2, 4, 3}, {2, 2, 4}}, b_batch_matmul_11, -1, 1, 0, 0, 0, 0,
     0},
    {LOOM_OP_BatchMatMul, "bmm_bcast_rank", F64C, 2, {3, 2}, {{2, 3, 4}, {4, 2}}, b_batch_matmul_00, -1, 1, 0, 0, 0,
     0, 0},
    {LOOM_OP_BatchMatMul, "bmm_bcast_dims", F64C, 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, b_batch_matmul_00, -1, 1, 0,
     0, 0, 0, 0},
    {LOOM_OP_BatchMatMul, "bmm_bcast_adj", F64C, 2, {3, 4}, {{1, 4, 3}, {2, 2, 2, 4}}, b_batch_matmul_11, -1, 1, 0,
     0, 0, 0, 0},

    /* bias */
    {LOOM_OP_BiasAdd, "bias_add", F64C, 2, {3, 1}, {{2, 3, 4}, {4}}, b_bias_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_BiasAdd, "bias_add_2d", F64C, 2, {2, 1}, {{5, 3}, {3}}, b_bias_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_BiasAddGrad, "bias_add_grad", F64C, 1, {3}, {{2, 3, 4}}, b_bias_add_grad, -1, 1, 0, 0, 0, 0, 0},
    /* input 1 only supplies the shape */
    {LOOM_OP_ReduceSumLike, "reduce_sum_like", F64C, 2, {3, 2}, {{2, 3, 4}, {1, 4}}, b_reduce_sum_like, -1, 1, 0, 2,
     0, 0, 0},
    {LOOM_OP_ReduceSumLike, "reduce_sum_like_same", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_reduce_sum_like, -1, 1, 0, 2,
     0, 0, 0},
};
