/* loom_train.h - builders of the train op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h. */
#ifndef LOOM_TRAIN_H
#define LOOM_TRAIN_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
