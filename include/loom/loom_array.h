/* loom_array.h - builders of the array op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h. */
#ifndef LOOM_ARRAY_H
#define LOOM_ARRAY_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
