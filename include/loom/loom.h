/* loom.h - umbrella header of the loom runtime. */
#ifndef LOOM_H
#define LOOM_H
#include "loom_base.h"
#include "loom_tensor.h"
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_math.h"
#include "loom_reduce.h"
#include "loom_array.h"
#include "loom_nn.h"
#include "loom_random.h"
#include "loom_autodiff.h"
#include "loom_train.h"
#include "loom_layers.h"
#include "loom_losses.h"
#include "loom_metrics.h"
#include "loom_data.h"
#include "loom_summary.h"
#include "loom_hooks.h"
#include "loom_export.h"
#include "loom_estimator.h"
#include "loom_distributed.h"
#endif
