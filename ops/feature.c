/* Feature ops: Bucketize, AsString, StringToHashBucketFast, VocabLookup,
 * CheckIds, SparseCrossHashed (loom_sparse.h). */
#include "ops/op_common.h"

void loom__register_feature(loom_op_def *t) { (void)t; }
