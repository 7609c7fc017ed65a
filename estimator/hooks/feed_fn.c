/* estimator/hooks/feed_fn.c - FeedFnHook: feeds each step from a user
 * function. Helpers in common.c. */
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * FeedFnHook
 * ===================================================================== */
enum { FEED_CAP = 64 };
typedef struct feed_hook {
  uint32_t magic;
  loom_feed_fn fn;
  void *user;
  loom_output feeds[FEED_CAP];
  loom_tensor *vals[FEED_CAP];
} feed_hook;

static loom_code feed_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  feed_hook *h = self;
  int k = h->fn(h->user, FEED_CAP, h->feeds, h->vals);
  if (k < 0) return loom_status_set(st, LOOM_OUT_OF_RANGE, "FeedFnHook: feed_fn reported the end of its input");
  if (k > FEED_CAP)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn returned %d feeds (at most %d)", k,
                           FEED_CAP);
  for (int i = 0; i < k; i++)
    if (!h->vals[i])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn left value %d NULL", i);
  a->nfeeds = k;
  a->feeds = h->feeds;
  a->feed_values = h->vals;
  return LOOM_OK;
}

loom_hook *loom_feed_fn_hook(loom_feed_fn fn, void *user, loom_status *st) {
  if (!fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "FeedFnHook: feed_fn is NULL");
    return NULL;
  }
  static const loom_hook_ops ops = {NULL, NULL, feed_before, NULL, NULL, loom__hook_plain_destroy};
  feed_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_FEED;
    h->fn = fn;
    h->user = user;
  }
  return loom__hook_wrap(&ops, h, "FeedFnHook", st);
}
