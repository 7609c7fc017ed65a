/* ops of the nn family: X(Enum, "TFName") */
#define LOOM_NN_OPS(X)                                                  \
  X(Softmax, "Softmax")                                                 \
  X(LogSoftmax, "LogSoftmax")                                           \
  X(SoftmaxCrossEntropyWithLogits, "SoftmaxCrossEntropyWithLogits")     \
  X(SparseSoftmaxCrossEntropyWithLogits, "SparseSoftmaxCrossEntropyWithLogits") \
  X(SigmoidCrossEntropyWithLogits, "SigmoidCrossEntropyWithLogits")     \
  X(Conv2D, "Conv2D")                                                   \
  X(Conv2DBackpropInput, "Conv2DBackpropInput")                         \
  X(Conv2DBackpropFilter, "Conv2DBackpropFilter")                       \
  X(MaxPool, "MaxPool")                                                 \
  X(AvgPool, "AvgPool")                                                 \
  X(MaxPoolGrad, "MaxPoolGrad")                                         \
  X(AvgPoolGrad, "AvgPoolGrad")                                         \
  X(L2Normalize, "L2Normalize")
