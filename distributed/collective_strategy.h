/* distributed/collective_strategy.h - internal: the collective (all-reduce) strategy of the training loop
 * (distributed/strategy.h, TF's MultiWorkerMirroredStrategy), on the transport of distributed/collective.h.
 *
 * Every rank holds every variable and runs the same program. At the start (after every rank restored
 * model_dir's latest checkpoint, if any) each variable is broadcast from rank 0, after a check that every
 * rank built the same variables (names, dtypes, shapes: a difference fails every rank naming both sides).
 * Each step runs the forward and backward pass and fetches the gradients the train op's apply ops consume;
 * dense gradients are summed by all-reduce in fusion buckets of bucket_bytes (0: one bucket per step) and
 * divided by the number of ranks; sparse gradients (an embedding's rows and ids) are gathered from every
 * rank (allgather; rows divided by the number of ranks); then the model's own train op runs with those
 * gradients fed in place of the local ones (its optimizer slots stay local and identical). Rank 0 is the
 * chief (checkpoints, summaries, export). At the end every rank compares a checksum of all its variables
 * with the others' (DATA_LOSS when they differ). */
#ifndef LOOM_DIST_COLLECTIVE_STRATEGY_H
#define LOOM_DIST_COLLECTIVE_STRATEGY_H
#include "distributed/strategy.h"

/* Initializes the transport (collective timeout timeout_s, <= 0: the default) and returns the strategy
 * (NULL on failure); free with loom__collective_strategy_free. */
loom__strategy *loom__collective_strategy_new(double timeout_s, int64_t bucket_bytes, loom_status *st);
void loom__collective_strategy_free(loom__strategy *s);

#endif
