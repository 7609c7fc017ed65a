/* distributed/collective_strategy.h - internal: the collective (all-reduce) strategy of the training loop
 * (distributed/strategy.h, TF's MultiWorkerMirroredStrategy), on the transport of distributed/collective.h.
 *
 * Every rank holds every variable and runs the same program. At the start (after every rank restored
 * model_dir's latest checkpoint, if any) each variable is broadcast from rank 0, after a check that every
 * rank built the same variables (names, dtypes, shapes: a difference fails every rank naming both sides).
 * Each step runs the forward and backward pass and fetches the gradients the train op's apply ops consume;
 * dense gradients are summed by all-reduce in fusion buckets of bucket_bytes (0: one bucket per step; the
 * first up to $LOOM_COLLECTIVE_FIRST_BUCKET_BYTES, 1 MiB), in reverse order of the variables' creation,
 * each bucket's non-blocking all-reduce started during the backward pass as soon as the session's run
 * observer reports its last gradient final ($LOOM_COLLECTIVE_OVERLAP=0: blocking, after the run; the same
 * sums), and divided by the number of ranks; sparse gradients (an embedding's rows and ids) are gathered
 * from every rank (allgather; rows divided by the number of ranks) or, when smaller and the optimizer's
 * densified update equals its sparse one, summed as a dense table; then the model's own train op runs
 * with those gradients fed in place of the local ones (its optimizer slots stay local and identical).
 * A traced step (the ProfilerHook) gets the buckets' spans on track 1 and the update's ops. Rank 0 is the
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
