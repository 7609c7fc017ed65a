/* estimator/hooks/final_ops.c - FinalOpsHook: runs given outputs once at
 * the end of the session and keeps their values. Helpers in common.c. */
#include <string.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * FinalOpsHook
 * ===================================================================== */
typedef struct final_hook {
  uint32_t magic;
  int n;
  loom_output *ops;
  loom_tensor **vals;
  int have;
} final_hook;

static loom_code final_end(void *self, loom_session *s, loom_status *st) {
  final_hook *h = self;
  if (!h->n) {
    h->have = 1;
    return LOOM_OK;
  }
  loom_code rc = loom_session_run(s, NULL, NULL, 0, h->ops, h->vals, h->n, NULL, 0, st);
  h->have = rc == LOOM_OK;
  return rc;
}
static void final_destroy(void *self) {
  final_hook *h = self;
  if (h->vals)
    for (int i = 0; i < h->n; i++) loom_tensor_free(h->vals[i]);
  loom__free(h->vals);
  loom__free(h->ops);
  loom__free(h);
}

loom_hook *loom_final_ops_hook(int n, const loom_output *final_ops, loom_status *st) {
  if (n < 0 || (n > 0 && !final_ops)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "FinalOpsHook: invalid final_ops list (n = %d)", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!final_ops[i].node || !loom_output_valid(final_ops[i])) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "FinalOpsHook: final_ops[%d] is not a valid output", i);
      return NULL;
    }
  static const loom_hook_ops ops = {NULL, NULL, NULL, NULL, final_end, final_destroy};
  final_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_FINAL;
    h->n = n;
    h->ops = loom__malloc(sizeof *h->ops * (size_t)(n ? n : 1));
    h->vals = loom__calloc((size_t)(n ? n : 1), sizeof *h->vals);
    if (!h->ops || !h->vals) {
      final_destroy(h);
      h = NULL;
    } else if (n) {
      memcpy(h->ops, final_ops, sizeof *h->ops * (size_t)n);
    }
  }
  return loom__hook_wrap(&ops, h, "FinalOpsHook", st);
}

loom_tensor *const *loom_final_ops_hook_values(const loom_hook *hk, int *n) {
  final_hook *h = loom__hook_self_of(hk, final_destroy, LOOM__HOOK_MAGIC_FINAL);
  if (!h || !h->have) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = h->n;
  return h->vals;
}
