#define LOOM_CORE_OPS(X) \
  X(Placeholder, "Placeholder") \
  X(Const, "Const") \
  X(NoOp, "NoOp") \
  X(Identity, "Identity")
