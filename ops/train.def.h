/* ops of the train family: X(Enum, "TFName")
 * (Ref* are TF's ref-variable scatter ops; the array family's ScatterAdd /
 * ScatterUpdate enums are the functional TensorScatter* ops.) */
#define LOOM_TRAIN_OPS(X)                                       \
  X(VariableV2, "VariableV2")                                   \
  X(Assign, "Assign")                                           \
  X(AssignAdd, "AssignAdd")                                     \
  X(AssignSub, "AssignSub")                                     \
  X(AssignMul, "AssignMul")                                     \
  X(RefScatterUpdate, "ScatterUpdate")                          \
  X(RefScatterAdd, "ScatterAdd")                                \
  X(RefScatterSub, "ScatterSub")                                \
  X(ApplyGradientDescent, "ApplyGradientDescent")               \
  X(SparseApplyGradientDescent, "SparseApplyGradientDescent")   \
  X(ApplyMomentum, "ApplyMomentum")                             \
  X(SparseApplyMomentum, "SparseApplyMomentum")                 \
  X(ApplyAdagrad, "ApplyAdagrad")                               \
  X(SparseApplyAdagrad, "SparseApplyAdagrad")                   \
  X(ApplyAdam, "ApplyAdam")                                     \
  X(SparseApplyAdam, "SparseApplyAdam")                         \
  X(ApplyFtrlV2, "ApplyFtrlV2")                                 \
  X(SparseApplyFtrlV2, "SparseApplyFtrlV2")                     \
  X(ApplyRMSProp, "ApplyRMSProp")                               \
  X(SparseApplyRMSProp, "SparseApplyRMSProp")                   \
  X(ApplyCenteredRMSProp, "ApplyCenteredRMSProp")               \
  X(SparseApplyCenteredRMSProp, "SparseApplyCenteredRMSProp")   \
  X(ApplyAdadelta, "ApplyAdadelta")                             \
  X(SparseApplyAdadelta, "SparseApplyAdadelta")                 \
  X(LearningRateSchedule, "LearningRateSchedule")               \
  X(ApplyProximalGradientDescent, "ApplyProximalGradientDescent") \
  X(SparseApplyProximalGradientDescent, "SparseApplyProximalGradientDescent") \
  X(ApplyProximalAdagrad, "ApplyProximalAdagrad")               \
  X(SparseApplyProximalAdagrad, "SparseApplyProximalAdagrad")   \
  X(ApplyAdagradDA, "ApplyAdagradDA")                           \
  X(SparseApplyAdagradDA, "SparseApplyAdagradDA")
