/* estimator/hooks/nan.c - NanTensorHook: stops training (or fails) when the
 * loss is NaN. Helpers in common.c. */
#include <math.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * NanTensorHook
 * ===================================================================== */
typedef struct nan_hook {
  uint32_t magic;
  loom_output loss;
  int fail;
} nan_hook;

static loom_code nan_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  nan_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->loss;
  return LOOM_OK;
}
static int has_nan(const loom_tensor *t) {
  int64_t m = loom_tensor_numel(t);
  if (loom_tensor_dtype(t) == LOOM_F32) {
    const float *d = loom_tensor_data_const(t);
    for (int64_t i = 0; i < m; i++)
      if (isnan(d[i])) return 1;
  } else if (loom_tensor_dtype(t) == LOOM_F64) {
    const double *d = loom_tensor_data_const(t);
    for (int64_t i = 0; i < m; i++)
      if (isnan(d[i])) return 1;
  }
  return 0;
}
static loom_code nan_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  nan_hook *h = self;
  if (!res[0] || !has_nan(res[0])) return LOOM_OK;
  if (h->fail) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "NaN loss during training.");
  loom__log(LOOM_LOG_WARN, "Model diverged with loss = NaN.");
  loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}

loom_hook *loom_nan_tensor_hook(loom_output loss, int fail_on_nan_loss, loom_status *st) {
  if (!loss.node || !loom_output_valid(loss)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "NanTensorHook: loss is not a valid output");
    return NULL;
  }
  static const loom_hook_ops ops = {NULL, NULL, nan_before, nan_after, NULL, loom__hook_plain_destroy};
  nan_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_NAN;
    h->loss = loss;
    h->fail = fail_on_nan_loss;
  }
  return loom__hook_wrap(&ops, h, "NanTensorHook", st);
}
