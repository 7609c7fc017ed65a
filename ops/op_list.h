/* ops/op_list.h - every op, declared once. Each family lists its ops in
 * ops/<family>.def.h as X(Enum, "TFName"); this file stitches them into
 * enum loom_op_type and the name table. Append new ops at the end of their
 * family list. */
#ifndef LOOM_OP_LIST_H
#define LOOM_OP_LIST_H

#include "ops/core.def.h"
#include "ops/math.def.h"
#include "ops/reduce.def.h"
#include "ops/array.def.h"
#include "ops/nn.def.h"
#include "ops/random.def.h"
#include "ops/train.def.h"
#include "ops/feature.def.h"
#include "ops/sparse.def.h"
#include "ops/decode.def.h"

#define LOOM_OP_LIST(X) \
  LOOM_CORE_OPS(X)      \
  LOOM_MATH_OPS(X)      \
  LOOM_REDUCE_OPS(X)    \
  LOOM_ARRAY_OPS(X)     \
  LOOM_NN_OPS(X)        \
  LOOM_RANDOM_OPS(X)    \
  LOOM_TRAIN_OPS(X)     \
  LOOM_FEATURE_OPS(X)   \
  LOOM_SPARSE_OPS(X)    \
  LOOM_DECODE_OPS(X)

typedef enum loom_op_type {
#define LOOM_X_ENUM(e, n) LOOM_OP_##e,
  LOOM_OP_LIST(LOOM_X_ENUM)
#undef LOOM_X_ENUM
  LOOM_OP_COUNT
} loom_op_type;

/* Family registration functions (each in ops/<family>.c). */
struct loom_op_def;
void loom__register_core(struct loom_op_def *t);
void loom__register_decode(struct loom_op_def *t);
void loom__register_math(struct loom_op_def *t);
void loom__register_reduce(struct loom_op_def *t);
void loom__register_array(struct loom_op_def *t);
void loom__register_nn(struct loom_op_def *t);
void loom__register_random(struct loom_op_def *t);
void loom__register_train(struct loom_op_def *t);
void loom__register_feature(struct loom_op_def *t);
void loom__register_sparse(struct loom_op_def *t);

#endif
