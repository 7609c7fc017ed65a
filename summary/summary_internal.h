/* summary/summary_internal.h - what summary/events.c reads of summary/summary.c. */
#ifndef LOOM_SUMMARY_INTERNAL_H
#define LOOM_SUMMARY_INTERNAL_H
#include "loom/loom_graph.h"

/* The max_outputs of the image summary whose node is n (3, TF's default, when unknown). */
int loom__summary_image_max(loom_graph *g, const loom_node *n);

#endif
