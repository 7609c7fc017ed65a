/* loom_export.h - graph serialization, exported (servable) models, and the
 * resident predictor.
 *
 * An export directory holds:
 *   saved_model.loom       the serving graph (loom's own binary format:
 *                          magic, version, nodes with op names, inputs,
 *                          control inputs, attributes and constants,
 *                          CRC32C-protected), pruned to what the
 *                          signatures need
 *   signatures.json        {signature: {method_name, inputs: {key:
 *                          {name, dtype, shape}}, outputs: {...}}}
 *   variables/variables.ckpt  the variables' values (a loom checkpoint)
 * The writer fills a directory; the estimator writes into
 * export/temp-<ts>/ and renames it to export/<ts>/ (atomic).
 */
#ifndef LOOM_EXPORT_H
#define LOOM_EXPORT_H
#include "loom_base.h"
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- graph serialization ---- */
/* Serializes the nodes needed by the n roots (all nodes when n == 0) into a
 * malloc'd buffer (*data, *size; free with loom_buffer_free). Variables are
 * serialized as VariableV2 nodes (name, dtype, shape), not their values.
 * UNIMPLEMENTED naming the node for a node that cannot be serialized. */
LOOM_API loom_code loom_graph_serialize(loom_graph *g, int n, loom_node *const *roots, void **data, size_t *size,
                                        loom_status *st);
LOOM_API void loom_buffer_free(void *data);
/* Rebuilds serialized nodes into g (which should be empty; names must be
 * free). DATA_LOSS for a damaged buffer, NOT_FOUND for an unknown op. The
 * imported variables are registered as graph variables (loom_graph_variable
 * finds them). Nodes keep their exact names (imported at the root scope,
 * with no control dependencies pushed); a name already used in g is
 * ALREADY_EXISTS. After a failure g may hold some of the nodes and a
 * sticky error: free it. */
LOOM_API loom_code loom_graph_deserialize(loom_graph *g, const void *data, size_t size, loom_status *st);

/* ---- export ---- */
typedef struct loom_signature {
  const char *name;        /* "serving_default", "predict", "classification", ... */
  const char *method_name; /* "tensorflow/serving/predict", ".../classify", ".../regress" */
  int32_t ninputs;
  const char *const *input_keys;
  const loom_output *inputs;   /* placeholders of g */
  int32_t noutputs;
  const char *const *output_keys;
  const loom_output *outputs;
} loom_signature;
/* Writes an export into dir (created; must not exist or be empty): the
 * graph pruned to the signatures' outputs, the signatures, and the current
 * values of every variable the pruned graph uses, read from s. */
LOOM_API loom_code loom_export_write(loom_graph *g, loom_session *s, int nsig, const loom_signature *sigs,
                                     const char *dir, loom_status *st);

/* ---- resident predictor ---- */
typedef struct loom_predictor loom_predictor;
typedef struct loom_predictor_options {
  uint32_t struct_size;
  int32_t num_threads;     /* 0 = the default (loom_session.h) */
  const char *signature;   /* default signature; NULL = "serving_default" */
} loom_predictor_options;
LOOM_API loom_predictor_options loom_predictor_options_default(void);
/* Loads an export directory once: graph, signatures, variable values.
 * Returns a new predictor (NULL on failure); caller frees with
 * loom_predictor_free. */
LOOM_API loom_predictor *loom_predictor_load(const char *export_dir, const loom_predictor_options *opts,
                                             loom_status *st);
LOOM_API void loom_predictor_free(loom_predictor *p);
/* Signature introspection (signature NULL = the default; -1 / NULL for an
 * unknown signature or index). When opts->signature is NULL and the export
 * has no "serving_default", NULL names no signature (NOT_FOUND on run).
 * The key strings are owned by p; valid until loom_predictor_free. */
LOOM_API int loom_predictor_num_inputs(const loom_predictor *p, const char *signature);
LOOM_API const char *loom_predictor_input_key(const loom_predictor *p, const char *signature, int i);
LOOM_API int loom_predictor_num_outputs(const loom_predictor *p, const char *signature);
LOOM_API const char *loom_predictor_output_key(const loom_predictor *p, const char *signature, int i);
/* Signature names, in the export's order (for bindings that list them):
 * the count (-1 for p NULL) and name i (NULL out of range; owned by p,
 * valid until loom_predictor_free). */
LOOM_API int loom_predictor_num_signatures(const loom_predictor *p);
LOOM_API const char *loom_predictor_signature_name(const loom_predictor *p, int i);
/* Static type of input / output i of a signature (what a binding needs to
 * convert its arrays before loom_predictor_run): the dtype
 * (LOOM_DTYPE_INVALID for an unknown signature or index), and the rank with
 * up to LOOM_MAX_DIMS dims written to dims (-1 = unknown, e.g. the batch);
 * -1 for an unknown signature or index. */
LOOM_API loom_dtype loom_predictor_input_dtype(const loom_predictor *p, const char *signature, int i);
LOOM_API int loom_predictor_input_shape(const loom_predictor *p, const char *signature, int i, int64_t *dims);
LOOM_API loom_dtype loom_predictor_output_dtype(const loom_predictor *p, const char *signature, int i);
LOOM_API int loom_predictor_output_shape(const loom_predictor *p, const char *signature, int i, int64_t *dims);
/* Runs a signature: inputs in input-key order (all required), outputs in
 * output-key order (in/out, reused like loom_session_run's fetches).
 * Thread-safe: concurrent callers are serialized per predictor (use one
 * predictor per thread for parallel throughput). No graph rebuild and no
 * file access per call. NOT_FOUND for an unknown signature, INVALID_ARGUMENT
 * naming the input for a wrong dtype or shape. */
LOOM_API loom_code loom_predictor_run(loom_predictor *p, const char *signature, int ninputs,
                                      loom_tensor *const *inputs, int noutputs, loom_tensor **outputs,
                                      loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
