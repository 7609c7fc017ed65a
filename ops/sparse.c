/* Sparse ops: DenseToRagged, SparseEmbedding (+ its gradient op),
 * RaggedMultiHot (loom_sparse.h). */
#include "ops/op_common.h"

void loom__register_sparse(loom_op_def *t) { (void)t; }
