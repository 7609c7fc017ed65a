/* ops of the reduce family: X(Enum, "TFName") */
#define LOOM_REDUCE_OPS(X)                \
  X(Sum, "Sum")                           \
  X(Mean, "Mean")                         \
  X(Max, "Max")                           \
  X(Min, "Min")                           \
  X(Prod, "Prod")                         \
  X(LogSumExp, "ReduceLogSumExp")         \
  X(ArgMax, "ArgMax")                     \
  X(ArgMin, "ArgMin")                     \
  X(ReduceSumLike, "ReduceSumLike")       \
  X(MatMul, "MatMul")                     \
  X(BatchMatMul, "BatchMatMulV2")         \
  X(BiasAdd, "BiasAdd")                   \
  X(BiasAddGrad, "BiasAddGrad")
