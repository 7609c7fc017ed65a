/* loom_onnx.h - ONNX export of a serving graph.
 *
 * Writes one signature of an exported model (loom_export.h: an export
 * directory, or a graph and a session holding its variables) as an ONNX
 * model (ModelProto, IR version 8, default-domain opset >= 17): the
 * signature's inputs become the graph inputs and its outputs the graph
 * outputs, both named by their signature keys (dims of -1 as symbolic
 * dims); constants and variable values become initializers. loom's NHWC
 * convolutions and pools become ONNX's NCHW Conv / MaxPool / AveragePool
 * between Transposes (the filter is transposed by a Transpose node).
 *
 * Ops written: Identity/StopGradient, the elementwise math and comparison
 * ops, activations (Relu, Relu6, Sigmoid, Tanh, Elu, Selu, LeakyRelu,
 * Softplus), MatMul (Gemm for 2-D with transposes), BatchMatMulV2, BiasAdd,
 * Softmax, LogSoftmax, Conv2D, MaxPool, AvgPool, Reshape, Transpose,
 * ConcatV2, GatherV2, ExpandDims, Squeeze, Slice, Pack, Tile, Cast, ArgMax,
 * ArgMin, Shape, OneHot, Range, the reductions (Sum, Mean, Max, Min, Prod,
 * ReduceLogSumExp), SelectV2, Fill/ZerosLike/OnesLike, Bucketize (the value
 * compared with every boundary, Not(Less) cast to int32 and summed),
 * LoomSparseEmbedding over the rows of a dense id tensor (LoomDenseToRagged
 * dropping nothing; no weights, no max_norm: Gather, negative ids masked,
 * ReduceSum and the combiner's division), and the input layer's
 * LoomMultiHotConcat with dense and int one-hot pieces — which covers the
 * layers, batch normalization in inference form (it is made of elementwise
 * ops), the canned models over numeric and bucketized feature columns (their
 * numeric outputs: logits, probabilities, class ids, predictions) and the
 * demo CNN and MLP.
 * Outputs: with no output keys given, every numeric output of the signature
 * is written and a non-numeric one (a classifier's string "classes" and
 * "all_classes") is skipped, each with an INFO line on the log
 * (loom_log_set); an output named in output_keys that is not numeric is
 * UNIMPLEMENTED.
 * A node of any other op (the string and ragged feature ops such as
 * LoomVocabLookup, hashing, crosses, ...) is UNIMPLEMENTED naming the node
 * and its op; so is a string constant or a string graph input or output.
 */
#ifndef LOOM_ONNX_H
#define LOOM_ONNX_H
#include "loom_base.h"
#include "loom_export.h"
#include "loom_graph.h"
#include "loom_session.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_onnx_options {
  uint32_t struct_size;
  int32_t opset;               /* default-domain opset: 0 = 17, the one written (others INVALID_ARGUMENT) */
  const char *signature;       /* loom_onnx_export: NULL = "serving_default" */
  /* Which of the signature's outputs to write (keys); 0 = every numeric one. */
  int32_t noutputs;
  const char *const *output_keys;
  const char *graph_name;      /* NULL = the signature's name */
} loom_onnx_options;
LOOM_API loom_onnx_options loom_onnx_options_default(void);

/* Converts signature opts->signature of the export directory export_dir
 * (saved_model.loom, signatures.json, variables/variables.ckpt) into an
 * ONNX model file at out_path (replaced when present). NOT_FOUND for an
 * unknown signature or output key, UNIMPLEMENTED naming the node and op for
 * a node ONNX cannot express, INVALID_ARGUMENT for a bad option. */
LOOM_API loom_code loom_onnx_export(const char *export_dir, const char *out_path, const loom_onnx_options *opts,
                                    loom_status *st);
/* The same from a graph and a signature of its placeholders and outputs
 * (as loom_export_write takes them); variable values are read from s. */
LOOM_API loom_code loom_onnx_export_graph(loom_graph *g, loom_session *s, const loom_signature *sig,
                                          const char *out_path, const loom_onnx_options *opts, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
