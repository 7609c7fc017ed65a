/* ops/train_ops.h - train-op builders with no public form, for train/
 * (the learning-rate schedules). Includes no engine-private header. */
#ifndef LOOM_OPS_TRAIN_OPS_H
#define LOOM_OPS_TRAIN_OPS_H
#include "loom/loom_graph.h"
#include "kernels/cpu/optim.h" /* LOOM_LRS_* */

/* One LearningRateSchedule node of kind LOOM_LRS_*: input global_step plus
 * nextra (<= 2) extra inputs (piecewise boundaries and values); lr, decay_steps,
 * beta, limit and flag are the kernel's attributes (kernels/cpu/optim.c). */
loom_output loom__lr_schedule(loom_graph *g, int kind, loom_output step, int nextra, const loom_output *extra,
                              double lr, double decay_steps, double beta, double limit, int flag, const char *name,
                              const char *defname);

#endif
