/* ops of the sparse family (ragged rows, sparse embedding lookups):
 * X(Enum, "TFName") */
#define LOOM_SPARSE_OPS(X)                              \
  X(DenseToRagged, "LoomDenseToRagged")                 \
  X(SparseEmbedding, "LoomSparseEmbedding")             \
  X(SparseEmbeddingGrad, "LoomSparseEmbeddingGrad")     \
  X(RaggedMultiHot, "LoomRaggedMultiHot")             \
  X(MultiHotConcat, "LoomMultiHotConcat")             \
  X(RaggedPadIndex, "LoomRaggedPadIndex")
