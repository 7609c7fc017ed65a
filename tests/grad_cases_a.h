/* Gradient-check cases for the core, math and reduce families. Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */
BIN(add)
static loom_output b_identity(loom_graph *g, const loom_output *x) { return loom_identity(g, x[0], NULL); }

static const grad_case CASES_A[] = {
    {LOOM_OP_Identity, "identity", LOOM_F64, 1, {2}, {{2, 3}}, b_identity, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Add, "add_bcast", LOOM_F64, 2, {2, 1}, {{3, 4}, {4}}, b_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Add, "add_bcast2", LOOM_F64, 2, {2, 2}, {{3, 1}, {1, 4}}, b_add, -1, 1, 0, 0, 0, 0, 0},
};
