/* ops of the random family: X(Enum, "TFName") */
#define LOOM_RANDOM_OPS(X)
