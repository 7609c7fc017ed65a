/* ops of the decode family (tf.io's decoders of strings):
 * X(Enum, "TFName") */
#define LOOM_DECODE_OPS(X)               \
  X(DecodeRaw, "DecodeRaw")              \
  X(DecodeCSV, "DecodeCSV")              \
  X(StringToNumber, "StringToNumber")
