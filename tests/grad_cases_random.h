/* Gradient-check cases for the random family (ops/random.def.h): Dropout.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- random ---- */
/* rate 0: the mask is all ones, so repeated runs agree (test_sparse_grad.c
 * checks dx == dy * mask_scaled for rate > 0 within one run) */
static loom_output b_dropout0(loom_graph *g, const loom_output *x) {
  return loom_dropout(g, x[0], 0.0, 1, 2, NULL, NULL);
}

static const grad_case CASES_RANDOM[] = {
    {LOOM_OP_Dropout, "dropout_rate0", F64C, 1, {2}, {{3, 4}}, b_dropout0, -1, 1, 0, 0, 0, 0, 0},
};
