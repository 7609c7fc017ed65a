/* The optimizer tests' model (tests/test_train.c, tests/test_optim_proximal.c): a [ROWS, COLS]
 * variable "v" of fixed values, a learning-rate constant, a fed gradient "grad" (dense, or SP_N
 * rows at SP_IDX with a repeated index) and the global step, for one optimizer's
 * apply_gradients. */
#ifndef LOOM_TESTS_OPTIM_CASE_H
#define LOOM_TESTS_OPTIM_CASE_H
#include <math.h>
#include "test_util.h"

#define ROWS 5
#define COLS 3
#define NEL (ROWS * COLS)
static const int32_t SP_IDX[4] = {0, 3, 0, 4}; /* row 0 twice */
#define SP_N 4

typedef struct optim_case_graph {
  loom_graph *g;
  loom_variable *v, *global_step;
  loom_output lr;
  loom_gradient grad;
  float v0[NEL];    /* v's initial value */
  int64_t gd[2];    /* the fed gradient's dims */
} optim_case_graph;

static inline optim_case_graph optim_case_graph_new(double lr, int sparse) {
  optim_case_graph o;
  o.g = loom_graph_new();
  int64_t vd[2] = {ROWS, COLS};
  for (int i = 0; i < NEL; i++) o.v0[i] = (float)(0.3 * sin(0.7 * i + 0.2) + 0.05 * i);
  o.v = loom_variable_new(o.g, loom_const_data(o.g, LOOM_F32, 2, vd, o.v0, "v0"), 1, 0, "v");
  o.lr = loom_const_f32(o.g, (float)lr, "lr");
  o.grad = (loom_gradient){{NULL, 0}, {NULL, 0}};
  int64_t idd[1] = {SP_N};
  o.gd[0] = sparse ? SP_N : ROWS;
  o.gd[1] = COLS;
  o.grad.values = loom_placeholder(o.g, LOOM_F32, 2, o.gd, "grad");
  if (sparse) o.grad.indices = loom_const_data(o.g, LOOM_I32, 1, idd, SP_IDX, "idx");
  o.global_step = loom_get_or_create_global_step(o.g);
  return o;
}

#endif
