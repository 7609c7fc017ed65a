/* ops/op_common.h - shared helpers for op definitions and builders. */
#ifndef LOOM_OP_COMMON_H
#define LOOM_OP_COMMON_H
#include <string.h>
#include <stdio.h>
#include "engine/engine_impl.h"
#include "ops/op_list.h"
#include "loom/loom.h"

/* Shape-function helpers. Each returns LOOM_OK or writes c->msg. */
loom_code loom__shape_fail(loom_shape_ctx *c, loom_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* out[0] = in[0] (dtype and shape). */
loom_code loom__shape_same(loom_shape_ctx *c);
/* out[0] = broadcast(in[0], in[1]); dtypes must match; out dtype = in[0]'s. */
loom_code loom__shape_broadcast(loom_shape_ctx *c);
/* Checks input i's dtype is one of the mask bits (1u << dtype). */
loom_code loom__shape_check_dtype(loom_shape_ctx *c, int i, uint32_t mask);
#define LOOM_DT(d) (1u << (d))
#define LOOM_DT_FLOAT (LOOM_DT(LOOM_F32) | LOOM_DT(LOOM_F64))
#define LOOM_DT_INT (LOOM_DT(LOOM_I32) | LOOM_DT(LOOM_I64))
#define LOOM_DT_NUM (LOOM_DT_FLOAT | LOOM_DT_INT | LOOM_DT(LOOM_U8))
/* "[2,?,3]" for messages (static rotating buffers; fine for one message). */
const char *loom__tdesc_str(const loom_tdesc *d);
/* Normalizes axis into [0, rank) (negative counts from the end). -1 on error. */
int64_t loom__norm_axis(int64_t axis, int rank);
/* Size limit of every shape a shape fn produces: loom_tensor_new's bound
 * (engine/tensor.c), under which element counts and byte sizes computed from
 * the dims cannot overflow. */
#define LOOM_MAX_NUMEL (INT64_MAX / 16)
/* Index of the dim of d[0..n) at which the product of the known (> 0) dims
 * passes LOOM_MAX_NUMEL (so a zero dim does not excuse a huge one, whatever
 * the order); -1 when it never does. */
int loom__dims_too_large_at(int n, const int64_t *d);
/* Fails naming `what`[i] = value and the shape when attribute shape d[0..n)
 * passes LOOM_MAX_NUMEL; LOOM_OK otherwise. */
loom_code loom__shape_check_attr_size(loom_shape_ctx *c, const char *what, int n, const int64_t *d);

/* Builder helpers: add a node and return output 0 (or the dummy). */
loom_output loom__build1(loom_graph *g, int op, const char *name, loom_output a, const loom_attrs *attrs);
loom_output loom__build2(loom_graph *g, int op, const char *name, loom_output a, loom_output b,
                         const loom_attrs *attrs);
loom_output loom__buildn(loom_graph *g, int op, const char *name, int nin, const loom_output *in,
                         const loom_attrs *attrs);

#endif
