/* ops of the random family: X(Enum, "TFName") */
#define LOOM_RANDOM_OPS(X)                       \
  X(RandomUniform, "RandomUniform")              \
  X(RandomStandardNormal, "RandomStandardNormal") \
  X(TruncatedNormal, "TruncatedNormal")          \
  X(Dropout, "Dropout")
