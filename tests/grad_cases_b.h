/* Gradient-check cases for the array, nn, random and train families (same row layout as grad_cases_a.h). */
static loom_output b_reshape_23(loom_graph *g, const loom_output *x) {
  int64_t d[2] = {3, 2};
  return loom_reshape(g, x[0], 2, d, NULL);
}

static const grad_case CASES_B[] = {
    {LOOM_OP_Reshape, "reshape", LOOM_F64, 1, {2}, {{2, 3}}, b_reshape_23, -1, 1, 0, 0, 0, 0, 0},
};
