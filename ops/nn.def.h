/* ops of the nn family: X(Enum, "TFName") */
#define LOOM_NN_OPS(X)
