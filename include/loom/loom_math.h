/* loom_math.h - builders of the math op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h. */
#ifndef LOOM_MATH_H
#define LOOM_MATH_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* a + b with broadcasting (TF AddV2). */
LOOM_API loom_output loom_add(loom_graph *g, loom_output a, loom_output b, const char *name);

#ifdef __cplusplus
}
#endif
#endif
