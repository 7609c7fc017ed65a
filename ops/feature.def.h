/* ops of the feature family (hashing, bucketizing, vocabulary lookup,
 * crosses): X(Enum, "TFName") */
#define LOOM_FEATURE_OPS(X)                             \
  X(Bucketize, "Bucketize")                             \
  X(AsString, "AsString")                               \
  X(StringToHashBucketFast, "StringToHashBucketFast")   \
  X(VocabLookup, "LoomVocabLookup")                     \
  X(CheckIds, "LoomCheckIds")                           \
  X(SparseCrossHashed, "LoomRaggedCrossHashed")       \
  X(ParseExample, "LoomParseExample")
