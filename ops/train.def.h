/* ops of the train family: X(Enum, "TFName") */
#define LOOM_TRAIN_OPS(X)
