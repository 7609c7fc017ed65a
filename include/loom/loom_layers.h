/* loom_layers.h - layers with tf.compat.v1.layers semantics (tf.layers.dense,
 * conv2d, max_pooling2d, average_pooling2d, flatten, dropout,
 * batch_normalization), activations by name, weight regularizers
 * (tf.contrib.layers.l1/l2/l1_l2_regularizer) and sparse embedding lookups
 * (tf.nn.embedding_lookup_sparse).
 *
 * Layers are graph builders. A layer with variables opens a variable scope
 * (loom_variable_scope_push) named after the layer and creates its variables
 * there with loom_get_variable, so the names are TF's: "dense/kernel",
 * "dense/bias", "conv2d_1/kernel", "batch_normalization/moving_mean" ...;
 * its ops are named inside the matching name scope ("dense/MatMul",
 * "dense/BiasAdd", "dense/Relu"). name == NULL gives TF's default layer
 * name ("dense", "conv2d", "max_pooling2d", "flatten", "dropout",
 * "batch_normalization"), made unique: the first unused of "dense",
 * "dense_1", "dense_2", ... (a name is used when a node or a variable of the
 * current scope starts with it). An explicit name is taken as given; with
 * reuse (LOOM_REUSE_TRUE / LOOM_REUSE_AUTO in the options) the layer shares
 * the variables of an earlier layer of the same name, like TF's reuse=True.
 *
 * Variables take the input's dtype (float32 or float64). Options structs
 * must be initialised with their _default() function; a NULL options
 * pointer means the defaults. Errors follow the sticky rule of loom_graph.h:
 * the first error is recorded in the graph (naming the layer) and the
 * builder returns a harmless placeholder output. */
#ifndef LOOM_LAYERS_H
#define LOOM_LAYERS_H
#include "loom_graph.h"
#include "loom_train.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== *
 * Activations by name
 * ===================================================================== */
/* Applies the activation called `activation` to x: "relu", "relu6", "elu",
 * "selu", "sigmoid", "tanh", "softplus", "gelu" (exact erf form, as
 * tf.nn.gelu's default), "leaky_relu" (alpha 0.2, tf.nn.leaky_relu's
 * default), "softmax" (over the last axis, as Keras'), "linear" or NULL or
 * "" (x itself, no node). Any other name is an
 * INVALID_ARGUMENT graph error "Unknown activation function: <name>" (the
 * accepted names are listed in the message). */
LOOM_API loom_output loom_activation(loom_graph *g, loom_output x, const char *activation, const char *name);
/* 1 when loom_activation accepts the name, 0 otherwise. */
LOOM_API int loom_activation_valid(const char *activation);

/* ===================================================================== *
 * Regularizers (tf.contrib.layers / tf.compat.v1 semantics)
 *   l1(scale)            = scale * sum(|w|)
 *   l2(scale)            = scale * sum(w^2) / 2     (scale * tf.nn.l2_loss(w);
 *                          NOTE: tf.keras.regularizers.l2(s) is s * sum(w^2),
 *                          without the 1/2 - pass 2*s to get Keras' value)
 *   l1_l2(s1, s2)        = l1(s1) + l2(s2)
 * A scale of 0 gives no loss (as TF returns None); a negative scale is an
 * INVALID_ARGUMENT graph error when the regularizer is applied. Layers add
 * the losses of their regularizers to the "regularization_losses"
 * collection; sum them with loom_losses_get_regularization_loss
 * (loom_losses.h, tf.losses.get_regularization_loss).
 * ===================================================================== */
typedef enum loom_regularizer_kind {
  LOOM_REG_NONE = 0,
  LOOM_REG_L1 = 1,
  LOOM_REG_L2 = 2,
  LOOM_REG_L1_L2 = 3
} loom_regularizer_kind;

typedef struct loom_regularizer {
  int32_t kind;   /* loom_regularizer_kind */
  double l1, l2;  /* scales */
} loom_regularizer;

LOOM_API loom_regularizer loom_no_regularizer(void);
LOOM_API loom_regularizer loom_l1_regularizer(double scale);
LOOM_API loom_regularizer loom_l2_regularizer(double scale);
LOOM_API loom_regularizer loom_l1_l2_regularizer(double scale_l1, double scale_l2);

/* The regularization loss of w (a scalar of w's dtype), or {NULL,0} when the
 * regularizer gives none (NONE, or every scale 0). Does not touch
 * collections. */
LOOM_API loom_output loom_regularizer_apply(loom_graph *g, const loom_regularizer *r, loom_output w,
                                            const char *name);
/* tf.group(*tf.get_collection(collection)): a NoOp depending on the node of
 * every output in the collection (e.g. LOOM_UPDATE_OPS, whose entries batch
 * normalization adds), or NULL when the collection is empty (or on a graph
 * error, sticky rule). The node is owned by g; valid until loom_graph_free.
 * Typical use,
 * like TF's `with tf.control_dependencies(update_ops): train = minimize()`:
 *   loom_node *u = loom_group_collection(g, LOOM_UPDATE_OPS, "update_ops");
 *   if (u) loom_graph_push_control_deps(g, 1, &u);
 *   loom_node *train = loom_optimizer_minimize(...);
 *   if (u) loom_graph_pop_control_deps(g); */
LOOM_API loom_node *loom_group_collection(loom_graph *g, const char *collection, const char *name);

/* ===================================================================== *
 * tf.layers.dense: y = activation(x @ kernel + bias)
 * x [..., in] with `in` known (rank >= 2; rank > 2 inputs are reshaped to
 * [-1, in] and back, which needs every dim but one known). Variables
 * "<name>/kernel" [in, units] and "<name>/bias" [units]. Output [..., units].
 * ===================================================================== */
typedef struct loom_dense_options {
  uint32_t struct_size; /* sizeof: set by loom_dense_options_default() */
  const char *activation;              /* NULL: linear (see loom_activation) */
  int32_t use_bias;                    /* 1 */
  loom_initializer kernel_initializer; /* glorot_uniform, no op seed */
  loom_initializer bias_initializer;   /* zeros */
  loom_regularizer kernel_regularizer; /* none; loss -> "regularization_losses" */
  loom_regularizer bias_regularizer;   /* none */
  int32_t trainable;                   /* 1: variables in TRAINABLE_VARIABLES */
  int32_t reuse;                       /* LOOM_REUSE_NONE / _TRUE / _AUTO */
} loom_dense_options;
LOOM_API loom_dense_options loom_dense_options_default(void);
LOOM_API loom_output loom_layers_dense(loom_graph *g, loom_output x, int64_t units, const loom_dense_options *o,
                                       const char *name);

/* ===================================================================== *
 * tf.layers.conv2d (data_format channels_last): x [N,H,W,Cin] (Cin known),
 * kernel "<name>/kernel" [kh,kw,Cin,filters], bias "<name>/bias" [filters].
 * Output [N,OH,OW,filters]. padding "valid" (TF's default) or "same" (any
 * case). Strides > 1 together with a dilation rate > 1 is an error, as in TF.
 * ===================================================================== */
typedef struct loom_conv2d_options {
  uint32_t struct_size; /* sizeof: set by loom_conv2d_options_default() */
  int64_t strides[2];                  /* {1, 1} */
  const char *padding;                 /* "valid" (NULL = "valid") */
  int64_t dilation_rate[2];            /* {1, 1} */
  const char *activation;              /* NULL: linear */
  int32_t use_bias;                    /* 1 */
  loom_initializer kernel_initializer; /* glorot_uniform (fans as TF for HWIO kernels) */
  loom_initializer bias_initializer;   /* zeros */
  loom_regularizer kernel_regularizer; /* none */
  loom_regularizer bias_regularizer;   /* none */
  int32_t trainable;                   /* 1 */
  int32_t reuse;                       /* LOOM_REUSE_NONE */
} loom_conv2d_options;
LOOM_API loom_conv2d_options loom_conv2d_options_default(void);
LOOM_API loom_output loom_layers_conv2d(loom_graph *g, loom_output x, int64_t filters, const int64_t kernel_size[2],
                                        const loom_conv2d_options *o, const char *name);

/* ===================================================================== *
 * tf.layers.max_pooling2d / average_pooling2d (channels_last): windows
 * pool_size [ph, pw], strides [sh, sw] (NULL = pool_size, Keras' default),
 * padding "valid" or "same" (NULL = "valid"). Ops in name scope
 * "max_pooling2d" / "average_pooling2d" (or name).
 * ===================================================================== */
LOOM_API loom_output loom_layers_max_pooling2d(loom_graph *g, loom_output x, const int64_t pool_size[2],
                                               const int64_t strides[2], const char *padding, const char *name);
LOOM_API loom_output loom_layers_average_pooling2d(loom_graph *g, loom_output x, const int64_t pool_size[2],
                                                   const int64_t strides[2], const char *padding,
                                                   const char *name);

/* tf.layers.flatten: x [N, d1, d2, ...] -> [N, d1*d2*...] (the batch dim is
 * kept and may be unknown; rank 1 gives [N, 1]). The non-batch dims must be
 * known unless the batch dim is (then the rest becomes -1). */
LOOM_API loom_output loom_layers_flatten(loom_graph *g, loom_output x, const char *name);

/* ===================================================================== *
 * "training" arguments: TF layers take a Python bool or a bool tensor.
 * loom: `training` (0/1, decided when building) unless `training_flag` is
 * set to a bool scalar output (decided at run time, e.g. a placeholder).
 * ===================================================================== */

/* tf.layers.dropout: identity (x itself, no node) when not training;
 * otherwise the Dropout op: each element kept with probability 1 - rate and
 * scaled by 1 / (1 - rate). With a training_flag both paths are built and
 * Select picks one. rate in [0, 1). */
typedef struct loom_dropout_options {
  uint32_t struct_size; /* sizeof: set by loom_dropout_options_default() */
  int32_t training;          /* 0 */
  loom_output training_flag; /* {NULL, 0}: use `training` */
  int64_t seed;              /* op seed, LOOM_SEED_NONE = none (TF's graph/op seed rules) */
} loom_dropout_options;
LOOM_API loom_dropout_options loom_dropout_options_default(void);
LOOM_API loom_output loom_layers_dropout(loom_graph *g, loom_output x, double rate, const loom_dropout_options *o,
                                         const char *name);

/* ===================================================================== *
 * tf.layers.batch_normalization. Variables (shape [C], C = x.dims[axis],
 * known): "<name>/gamma" (when scale), "<name>/beta" (when center),
 * "<name>/moving_mean" and "<name>/moving_variance" (not trainable, in
 * GLOBAL_VARIABLES).
 *   training:  mean, var = moments of x over every axis but `axis`
 *              (biased variance, as tf.nn.moments);
 *              y = (x - mean) * rsqrt(var + epsilon) * gamma + beta
 *              and two update ops, added to the "update_ops" collection
 *              (LOOM_UPDATE_OPS), that are NOT run by anything else:
 *                moving_mean     -= (moving_mean - mean) * (1 - momentum)
 *                moving_variance -= (moving_variance - var) * (1 - momentum)
 *              i.e. moving = moving * momentum + batch * (1 - momentum)
 *              (TF's non-fused path; TF's fused kernel would use the
 *              n/(n-1)-corrected variance for the moving update).
 *   inference: y = (x - moving_mean) * rsqrt(moving_variance + epsilon)
 *              * gamma + beta; no update ops.
 * With a training_flag, both statistics are built and selected at run
 * time; the update ops are still added and leave the moving statistics
 * unchanged when the flag is false (TF: momentum 1 when not training).
 * ===================================================================== */
typedef struct loom_batch_norm_options {
  uint32_t struct_size; /* sizeof: set by loom_batch_norm_options_default() */
  int32_t axis;                                 /* -1 (the channels of NHWC) */
  double momentum;                              /* 0.99 */
  double epsilon;                               /* 1e-3 */
  int32_t center;                               /* 1: beta */
  int32_t scale;                                /* 1: gamma */
  loom_initializer beta_initializer;            /* zeros */
  loom_initializer gamma_initializer;           /* ones */
  loom_initializer moving_mean_initializer;     /* zeros */
  loom_initializer moving_variance_initializer; /* ones */
  loom_regularizer beta_regularizer;            /* none */
  loom_regularizer gamma_regularizer;           /* none */
  int32_t training;                             /* 0 */
  loom_output training_flag;                    /* {NULL, 0}: use `training` */
  int32_t trainable;                            /* 1 */
  int32_t reuse;                                /* LOOM_REUSE_NONE */
} loom_batch_norm_options;
LOOM_API loom_batch_norm_options loom_batch_norm_options_default(void);
LOOM_API loom_output loom_layers_batch_normalization(loom_graph *g, loom_output x, const loom_batch_norm_options *o,
                                                     const char *name);

/* ===================================================================== *
 * Embedding lookups
 * ===================================================================== */
/* tf.nn.embedding_lookup (one partition): rows of params [V, D...] picked
 * by ids (int32/int64, any shape) -> ids.shape + [D...]. The gradient with
 * respect to params is sparse (IndexedSlices). */
LOOM_API loom_output loom_embedding_lookup(loom_graph *g, loom_output params, loom_output ids, const char *name);

/* tf.nn.embedding_lookup_sparse over ragged ids: row r of the result
 * combines the embeddings of the ids ids[i] with segment_ids[i] == r
 * (ids and segment_ids [nnz], int32 or int64; segment_ids need not be
 * sorted) into out [num_rows, D]:
 *   "sum":   sum of the rows;
 *   "mean":  sum / count (TF's default combiner);
 *   "sqrtn": sum / sqrt(count);
 * empty rows give zeros. combiner NULL = "mean"; another name is an error.
 * Built as Gather + UnsortedSegmentSum/Mean/SqrtN; num_rows must be known
 * when building (UnsortedSegment* takes num_segments as an attribute).
 * For a ragged tensor (values + row_splits) compute segment_ids with
 * loom_row_splits_to_segment_ids below and feed them with the values. */
LOOM_API loom_output loom_embedding_lookup_sparse(loom_graph *g, loom_output params, loom_output ids,
                                                  loom_output segment_ids, int64_t num_rows, const char *combiner,
                                                  const char *name);

/* Host helper (no graph): the segment ids of a ragged tensor's values from
 * its row_splits [nrows + 1] (int32 or int64: 0 = s[0] <= s[1] <= ...;
 * value i belongs to row r when s[r] <= i < s[r+1]). *segment_ids must be
 * NULL (a new tensor [s[nrows]] of row_splits' dtype, caller frees) or a
 * tensor from an earlier call (reused when dtype and length match).
 * INVALID_ARGUMENT (naming the offending split) for splits that do not
 * start at 0 or decrease. *nrows (may be NULL) receives the row count. */
LOOM_API loom_code loom_row_splits_to_segment_ids(const loom_tensor *row_splits, loom_tensor **segment_ids,
                                                  int64_t *nrows, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
