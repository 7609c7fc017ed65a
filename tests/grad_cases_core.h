/* Gradient-check cases for the core family (ops/core.def.h): Identity.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- core ---- */
static loom_output b_identity(loom_graph *g, const loom_output *x) { return loom_identity(g, x[0], NULL); }

static const grad_case CASES_CORE[] = {
    {LOOM_OP_Identity, "identity", F64C, 1, {2}, {{2, 3}}, b_identity, -1, 1, 0, 0, 0, 0, 0},
};
