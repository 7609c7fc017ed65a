/* loom_math.h - builders of the math op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h.
 *
 * Binary ops broadcast like NumPy (and TF): shapes are aligned at the right;
 * each pair of dims must be equal or one of them 1. Both inputs must have the
 * same dtype. dtypes: float32 and float64 for every op below; int32 and int64
 * also for add, sub, mul, div, maximum, minimum, neg, abs, square, sign, the
 * comparisons, clip_by_value and select; uint8 also for the comparisons and
 * select; bool for equal, not_equal, the logical ops and select.
 * Integer add/sub/mul/neg/abs/square wrap around on overflow. */
#ifndef LOOM_MATH_H
#define LOOM_MATH_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- binary arithmetic ---- */
/* a + b (TF AddV2). */
LOOM_API loom_output loom_add(loom_graph *g, loom_output a, loom_output b, const char *name);
/* a - b (TF Sub). */
LOOM_API loom_output loom_sub(loom_graph *g, loom_output a, loom_output b, const char *name);
/* a * b (TF Mul). */
LOOM_API loom_output loom_mul(loom_graph *g, loom_output a, loom_output b, const char *name);
/* a / b (TF RealDiv). Integers divide truncating toward zero; a zero divisor
 * fails the run with INVALID_ARGUMENT "integer division by zero". */
LOOM_API loom_output loom_div(loom_graph *g, loom_output a, loom_output b, const char *name);
/* a ** b, floats only (TF Pow). */
LOOM_API loom_output loom_pow(loom_graph *g, loom_output a, loom_output b, const char *name);
/* Elementwise max / min (TF Maximum / Minimum); a NaN in either input gives NaN. */
LOOM_API loom_output loom_maximum(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_minimum(loom_graph *g, loom_output a, loom_output b, const char *name);

/* ---- unary (output has x's shape and dtype) ---- */
/* -x (TF Neg). */
LOOM_API loom_output loom_neg(loom_graph *g, loom_output x, const char *name);
/* |x| (TF Abs). */
LOOM_API loom_output loom_abs(loom_graph *g, loom_output x, const char *name);
/* e^x (TF Exp). */
LOOM_API loom_output loom_exp(loom_graph *g, loom_output x, const char *name);
/* Natural log (TF Log). */
LOOM_API loom_output loom_log(loom_graph *g, loom_output x, const char *name);
/* log(1 + x), accurate near 0 (TF Log1p). */
LOOM_API loom_output loom_log1p(loom_graph *g, loom_output x, const char *name);
/* Square root (TF Sqrt). */
LOOM_API loom_output loom_sqrt(loom_graph *g, loom_output x, const char *name);
/* 1 / sqrt(x) (TF Rsqrt). */
LOOM_API loom_output loom_rsqrt(loom_graph *g, loom_output x, const char *name);
/* x * x (TF Square). */
LOOM_API loom_output loom_square(loom_graph *g, loom_output x, const char *name);
/* Hyperbolic tangent (TF Tanh). */
LOOM_API loom_output loom_tanh(loom_graph *g, loom_output x, const char *name);
/* 1 / (1 + e^-x) (TF Sigmoid). */
LOOM_API loom_output loom_sigmoid(loom_graph *g, loom_output x, const char *name);
/* max(x, 0) (TF Relu). */
LOOM_API loom_output loom_relu(loom_graph *g, loom_output x, const char *name);
/* min(max(x, 0), 6) (TF Relu6). */
LOOM_API loom_output loom_relu6(loom_graph *g, loom_output x, const char *name);
/* x > 0 ? x : e^x - 1 (TF Elu, alpha 1). */
LOOM_API loom_output loom_elu(loom_graph *g, loom_output x, const char *name);
/* scale * (x > 0 ? x : alpha * (e^x - 1)) with TF's constants
 * scale = 1.0507009873554805, alpha = 1.6732632423543772 (TF Selu). */
LOOM_API loom_output loom_selu(loom_graph *g, loom_output x, const char *name);
/* x > 0 ? x : alpha * x (TF LeakyRelu; TF's default alpha is 0.2).
 * Stored in attrs.alpha. */
LOOM_API loom_output loom_leaky_relu(loom_graph *g, loom_output x, double alpha, const char *name);
/* log(1 + e^x), computed as max(x, 0) + log1p(e^-|x|) so it neither
 * overflows for large x nor loses precision for very negative x (TF Softplus). */
LOOM_API loom_output loom_softplus(loom_graph *g, loom_output x, const char *name);
/* GELU (TF Gelu). approximate == 0: exact 0.5 * x * (1 + erf(x / sqrt(2)));
 * approximate != 0: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
 * The flag is stored in attrs.num (0 or 1). */
LOOM_API loom_output loom_gelu(loom_graph *g, loom_output x, int approximate, const char *name);
/* -1, 0 or 1 by the sign of x; floats keep NaN and signed zeros (TF Sign).
 * Not differentiable. */
LOOM_API loom_output loom_sign(loom_graph *g, loom_output x, const char *name);
/* Round down / up / to nearest with ties to even, floats only (TF Floor,
 * Ceil, Round; Round(2.5) = 2, Round(-0.5) = -0). Not differentiable. */
LOOM_API loom_output loom_floor(loom_graph *g, loom_output x, const char *name);
LOOM_API loom_output loom_ceil(loom_graph *g, loom_output x, const char *name);
LOOM_API loom_output loom_round(loom_graph *g, loom_output x, const char *name);
/* 1 / x, floats only (TF Reciprocal). */
LOOM_API loom_output loom_reciprocal(loom_graph *g, loom_output x, const char *name);

/* min(max(t, clip_min), clip_max) (TF ClipByValue). clip_min and clip_max
 * have t's dtype and broadcast to t's shape (scalars typically); the output
 * has t's shape. */
LOOM_API loom_output loom_clip_by_value(loom_graph *g, loom_output t, loom_output clip_min, loom_output clip_max,
                                        const char *name);

/* ---- comparisons: bool output, broadcasting; not differentiable ---- */
LOOM_API loom_output loom_equal(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_not_equal(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_less(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_less_equal(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_greater(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_greater_equal(loom_graph *g, loom_output a, loom_output b, const char *name);

/* ---- logic on bool tensors (broadcasting); not differentiable ---- */
LOOM_API loom_output loom_logical_and(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_logical_or(loom_graph *g, loom_output a, loom_output b, const char *name);
LOOM_API loom_output loom_logical_not(loom_graph *g, loom_output a, const char *name);

/* cond ? x : y elementwise (TF SelectV2). cond is bool; x and y share a
 * dtype; all three broadcast together. No gradient flows to cond. */
LOOM_API loom_output loom_select(loom_graph *g, loom_output cond, loom_output x, loom_output y, const char *name);

/* ---- gradient helpers (used by autodiff; floats only; broadcasting; not
 * themselves differentiable). Argument order follows TF. ---- */
/* dy * (y > 0), y = relu(x) (TF ReluGrad). */
LOOM_API loom_output loom_relu_grad(loom_graph *g, loom_output dy, loom_output y, const char *name);
/* dy * (0 < y < 6) (TF Relu6Grad). */
LOOM_API loom_output loom_relu6_grad(loom_graph *g, loom_output dy, loom_output y, const char *name);
/* dy * y * (1 - y), y = sigmoid(x) (TF SigmoidGrad). */
LOOM_API loom_output loom_sigmoid_grad(loom_graph *g, loom_output y, loom_output dy, const char *name);
/* dy * (1 - y^2), y = tanh(x) (TF TanhGrad). */
LOOM_API loom_output loom_tanh_grad(loom_graph *g, loom_output y, loom_output dy, const char *name);
/* y > 0 ? dy : dy * (y + 1), y = elu(x) (TF EluGrad). */
LOOM_API loom_output loom_elu_grad(loom_graph *g, loom_output dy, loom_output y, const char *name);
/* y > 0 ? dy * scale : dy * (y + scale * alpha), y = selu(x) (TF SeluGrad). */
LOOM_API loom_output loom_selu_grad(loom_graph *g, loom_output dy, loom_output y, const char *name);
/* x > 0 ? dy : dy * alpha (TF LeakyReluGrad); alpha in attrs.alpha. */
LOOM_API loom_output loom_leaky_relu_grad(loom_graph *g, loom_output dy, loom_output x, double alpha,
                                          const char *name);
/* dy * sigmoid(x) (TF SoftplusGrad). */
LOOM_API loom_output loom_softplus_grad(loom_graph *g, loom_output dy, loom_output x, const char *name);
/* dy * d gelu(x)/dx for the exact or (approximate != 0) tanh form (TF GeluGrad);
 * the flag is stored in attrs.num. */
LOOM_API loom_output loom_gelu_grad(loom_graph *g, loom_output dy, loom_output x, int approximate, const char *name);
/* dy * -0.5 * y^3, y = rsqrt(x) (TF RsqrtGrad). */
LOOM_API loom_output loom_rsqrt_grad(loom_graph *g, loom_output y, loom_output dy, const char *name);
/* dy * 0.5 / y, y = sqrt(x) (TF SqrtGrad). */
LOOM_API loom_output loom_sqrt_grad(loom_graph *g, loom_output y, loom_output dy, const char *name);

#ifdef __cplusplus
}
#endif
#endif
