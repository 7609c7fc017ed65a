/* feature_columns/features.h - internal: what the estimator and the feature-column layers use of
 * the features map (feature_columns/features.c) beyond the public loom_features_* API. */
#ifndef LOOM_FC_FEATURES_H
#define LOOM_FC_FEATURES_H
#include "loom/loom_estimator.h"

/* The graph where loom_features_get reports a missing key (its sticky error). */
void loom__features_bind_graph(loom_features *f, loom_graph *g);
/* The output of key name, {NULL, 0} when absent; reports nothing (for optional keys). */
loom_output loom__features_lookup(const loom_features *f, const char *name);

#endif
