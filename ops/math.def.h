/* ops of the math family: X(Enum, "TFName") */
#define LOOM_MATH_OPS(X) \
  X(Add, "AddV2")
