/* ops of the array family: X(Enum, "TFName") */
#define LOOM_ARRAY_OPS(X)
