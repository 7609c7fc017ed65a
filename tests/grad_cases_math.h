/* Gradient-check cases for the math family (ops/math.def.h): binary arithmetic with
 * broadcasting, unary functions and activations, clip and select, and the
 * activation gradient helpers (second derivatives; inputs in TF's order).
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- math: binary ---- */
BIN(add)
BIN(sub)
BIN(mul)
BIN(div)
BIN(pow)
BIN(maximum)
BIN(minimum)
/* x * x: both inputs of Mul are the same tensor (two paths summed) */
static loom_output b_mul_self(loom_graph *g, const loom_output *x) { return loom_mul(g, x[0], x[0], NULL); }

/* ---- math: unary ---- */
UN(neg)
UN(abs)
UN(exp)
UN(log)
UN(log1p)
UN(sqrt)
UN(rsqrt)
UN(square)
UN(reciprocal)
UN(tanh)
UN(sigmoid)
UN(relu)
UN(relu6)
UN(elu)
UN(selu)
UN(softplus)
static loom_output b_leaky_relu(loom_graph *g, const loom_output *x) { return loom_leaky_relu(g, x[0], 0.2, NULL); }
static loom_output b_gelu(loom_graph *g, const loom_output *x) { return loom_gelu(g, x[0], 0, NULL); }
static loom_output b_gelu_tanh(loom_graph *g, const loom_output *x) { return loom_gelu(g, x[0], 1, NULL); }

/* clip(3 * t, lo - 1, hi + 1) with every input in [-1, 1]: t hits both bounds
 * and the interior; lo in [-2, 0] and hi in [0, 2] */
static loom_output b_clip(loom_graph *g, const loom_output *x) {
  loom_output three = loom_const_data(g, LOOM_F64, 0, NULL, &(double){3.0}, NULL);
  loom_output one = loom_const_data(g, LOOM_F64, 0, NULL, &(double){1.0}, NULL);
  return loom_clip_by_value(g, loom_mul(g, x[0], three, NULL), loom_sub(g, x[1], one, NULL),
                            loom_add(g, x[2], one, NULL), NULL);
}
/* select(x0 > 0, x1, x2): x0 only makes the condition */
static loom_output b_select(loom_graph *g, const loom_output *x) {
  loom_output zero = loom_const_data(g, LOOM_F64, 0, NULL, &(double){0.0}, NULL);
  return loom_select(g, loom_greater(g, x[0], zero, NULL), x[1], x[2], NULL);
}

/* ---- second order: the gradient helpers ---- */
BIN(relu_grad)
BIN(relu6_grad)
BIN(sigmoid_grad)
BIN(tanh_grad)
BIN(elu_grad)
BIN(selu_grad)
BIN(softplus_grad)
BIN(rsqrt_grad)
BIN(sqrt_grad)
static loom_output b_leaky_relu_grad(loom_graph *g, const loom_output *x) {
  return loom_leaky_relu_grad(g, x[0], x[1], 0.2, NULL);
}
static loom_output b_gelu_grad(loom_graph *g, const loom_output *x) { return loom_gelu_grad(g, x[0], x[1], 0, NULL); }
static loom_output b_gelu_grad_tanh(loom_graph *g, const loom_output *x) {
  return loom_gelu_grad(g, x[0], x[1], 1, NULL);
}

/* a two-input case of shapes [3,4] and [3,4] */
#define G2CASE(OP, label, fn, lo, hi, away) \
  {LOOM_OP_##OP, label, F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_##fn, lo, hi, away, 0, 0, 0, 0}

static const grad_case CASES_MATH[] = {
    /* binary arithmetic, with broadcasting both ways and rank-0 */
    {LOOM_OP_Add, "add_same", F64C, 2, {2, 2}, {{2, 3}, {2, 3}}, b_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Add, "add_bcast", F64C, 2, {2, 1}, {{3, 4}, {4}}, b_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Add, "add_bcast2", F64C, 2, {2, 2}, {{3, 1}, {1, 4}}, b_add, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Sub, "sub_same", F64C, 2, {2, 2}, {{2, 3}, {2, 3}}, b_sub, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Sub, "sub_bcast", F64C, 2, {1, 3}, {{4}, {2, 3, 4}}, b_sub, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Sub, "sub_scalar", F64C, 2, {2, 0}, {{2, 3}, {0}}, b_sub, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Mul, "mul_same", F64C, 2, {2, 2}, {{2, 3}, {2, 3}}, b_mul, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Mul, "mul_bcast", F64C, 2, {3, 2}, {{2, 1, 4}, {3, 1}}, b_mul, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Mul, "mul_scalar", F64C, 2, {0, 2}, {{0}, {3, 2}}, b_mul, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Mul, "mul_self", F64C, 1, {2}, {{2, 3}}, b_mul_self, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Div, "div_same", F64C, 2, {2, 2}, {{2, 3}, {2, 3}}, b_div, -2, 2, 0.3, 0, 0, 0, 0},
    {LOOM_OP_Div, "div_bcast", F64C, 2, {2, 2}, {{3, 1}, {1, 4}}, b_div, -2, 2, 0.3, 0, 0, 0, 0},
    {LOOM_OP_Div, "div_bcast_x", F64C, 2, {1, 2}, {{4}, {3, 4}}, b_div, -2, 2, 0.3, 0, 0, 0, 0},
    {LOOM_OP_Pow, "pow_same", F64C, 2, {2, 2}, {{2, 3}, {2, 3}}, b_pow, 0.5, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_Pow, "pow_bcast", F64C, 2, {2, 1}, {{3, 4}, {4}}, b_pow, 0.5, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_Pow, "pow_bcast_x", F64C, 2, {0, 2}, {{0}, {2, 3}}, b_pow, 0.5, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_Maximum, "maximum_same", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_maximum, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Maximum, "maximum_bcast", F64C, 2, {2, 1}, {{3, 4}, {4}}, b_maximum, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Maximum, "maximum_bcast2", F64C, 2, {2, 2}, {{3, 1}, {1, 4}}, b_maximum, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Minimum, "minimum_same", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_minimum, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Minimum, "minimum_bcast", F64C, 2, {0, 2}, {{0}, {3, 4}}, b_minimum, -1, 1, 0, 0, 0, 0, 0},

    /* unary */
    {LOOM_OP_Neg, "neg", F64C, 1, {2}, {{2, 3}}, b_neg, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Neg, "neg_scalar", F64C, 1, {0}, {{0}}, b_neg, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Abs, "abs", F64C, 1, {2}, {{3, 4}}, b_abs, -2, 2, 0.1, 0, 0, 0, 0},
    {LOOM_OP_Exp, "exp", F64C, 1, {2}, {{3, 4}}, b_exp, -2, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_Log, "log", F64C, 1, {2}, {{3, 4}}, b_log, 0.2, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Log1p, "log1p", F64C, 1, {2}, {{3, 4}}, b_log1p, -0.7, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Sqrt, "sqrt", F64C, 1, {2}, {{3, 4}}, b_sqrt, 0.2, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Rsqrt, "rsqrt", F64C, 1, {2}, {{3, 4}}, b_rsqrt, 0.2, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Square, "square", F64C, 1, {2}, {{3, 4}}, b_square, -2, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_Reciprocal, "reciprocal", F64C, 1, {2}, {{3, 4}}, b_reciprocal, -2, 2, 0.3, 0, 0, 0, 0},
    {LOOM_OP_Tanh, "tanh", F64C, 1, {2}, {{3, 4}}, b_tanh, -3, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Sigmoid, "sigmoid", F64C, 1, {2}, {{3, 4}}, b_sigmoid, -4, 4, 0, 0, 0, 0, 0},
    {LOOM_OP_Relu, "relu", F64C, 1, {2}, {{3, 4}}, b_relu, -2, 2, 0.05, 0, 0, 0, 0},
    {LOOM_OP_Relu6, "relu6", F64C, 1, {2}, {{3, 4}}, b_relu6, -3, 5.8, 0.05, 0, 0, 0, 0},
    {LOOM_OP_Relu6, "relu6_saturated", F64C, 1, {2}, {{3, 4}}, b_relu6, 6.2, 9, 0, 0, 0, 0, 0},
    {LOOM_OP_Elu, "elu", F64C, 1, {2}, {{3, 4}}, b_elu, -3, 2, 0.05, 0, 0, 0, 0},
    {LOOM_OP_Selu, "selu", F64C, 1, {2}, {{3, 4}}, b_selu, -3, 2, 0.05, 0, 0, 0, 0},
    {LOOM_OP_LeakyRelu, "leaky_relu", F64C, 1, {2}, {{3, 4}}, b_leaky_relu, -2, 2, 0.05, 0, 0, 0, 0},
    {LOOM_OP_Softplus, "softplus", F64C, 1, {2}, {{3, 4}}, b_softplus, -5, 5, 0, 0, 0, 0, 0},
    {LOOM_OP_Gelu, "gelu", F64C, 1, {2}, {{3, 4}}, b_gelu, -3, 3, 0, 0, 0, 0, 0},
    {LOOM_OP_Gelu, "gelu_tanh", F64C, 1, {2}, {{3, 4}}, b_gelu_tanh, -3, 3, 0, 0, 0, 0, 0},

    /* clip: bounds per column ([3]) and scalar; select with three-way broadcasting */
    {LOOM_OP_ClipByValue, "clip_bcast", F64C, 3, {2, 1, 0}, {{4, 3}, {3}, {0}}, b_clip, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_ClipByValue, "clip_same", F64C, 3, {2, 2, 2}, {{2, 3}, {2, 3}, {2, 3}}, b_clip, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Select, "select_same", F64C, 3, {2, 2, 2}, {{2, 3}, {2, 3}, {2, 3}}, b_select, -1, 1, 0, 1, 0, 0, 0},
    {LOOM_OP_Select, "select_bcast", F64C, 3, {2, 1, 2}, {{2, 3}, {3}, {2, 1}}, b_select, -1, 1, 0, 1, 0, 0, 0},
    {LOOM_OP_Select, "select_bcast_cond", F64C, 3, {1, 2, 0}, {{3}, {4, 3}, {0}}, b_select, -1, 1, 0, 1, 0, 0, 0},

    /* gradient helpers (second derivatives); inputs in TF's argument order */
    G2CASE(ReluGrad, "relu_grad", relu_grad, -2, 2, 0.05),
    G2CASE(Relu6Grad, "relu6_grad", relu6_grad, -3, 5.8, 0.05),
    G2CASE(SigmoidGrad, "sigmoid_grad", sigmoid_grad, -1, 1, 0),
    G2CASE(TanhGrad, "tanh_grad", tanh_grad, -1, 1, 0),
    {LOOM_OP_TanhGrad, "tanh_grad_bcast", F64C, 2, {2, 1}, {{3, 4}, {4}}, b_tanh_grad, -1, 1, 0, 0, 0, 0, 0},
    G2CASE(EluGrad, "elu_grad", elu_grad, -2, 2, 0.05),
    G2CASE(SeluGrad, "selu_grad", selu_grad, -2, 2, 0.05),
    G2CASE(LeakyReluGrad, "leaky_relu_grad", leaky_relu_grad, -2, 2, 0.05),
    G2CASE(SoftplusGrad, "softplus_grad", softplus_grad, -3, 3, 0),
    {LOOM_OP_SoftplusGrad, "softplus_grad_bcast", F64C, 2, {1, 2}, {{4}, {3, 4}}, b_softplus_grad, -3, 3, 0, 0, 0, 0,
     0},
    G2CASE(GeluGrad, "gelu_grad", gelu_grad, -3, 3, 0),
    G2CASE(GeluGrad, "gelu_grad_tanh", gelu_grad_tanh, -3, 3, 0),
    G2CASE(RsqrtGrad, "rsqrt_grad", rsqrt_grad, 0.5, 2, 0),
    G2CASE(SqrtGrad, "sqrt_grad", sqrt_grad, 0.5, 2, 0),
};
