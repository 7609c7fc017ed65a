/* ops of the reduce family: X(Enum, "TFName") */
#define LOOM_REDUCE_OPS(X)
