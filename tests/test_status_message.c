/* loom_status_set_message: the non-variadic setter for bindings (python/). */
#include "test_util.h"

Test(status_message, taken_as_is_any_length) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_status_set_message(st, LOOM_NOT_FOUND, "100% of 'x' %s %d"), LOOM_NOT_FOUND);
  cr_assert_eq(loom_status_code(st), LOOM_NOT_FOUND);
  cr_assert_str_eq(loom_status_message(st), "100% of 'x' %s %d");
  /* longer than loom_status_set's 1024-byte format buffer: kept whole */
  char big[5000];
  memset(big, 'a', sizeof big - 2);
  big[sizeof big - 2] = 'z';
  big[sizeof big - 1] = 0;
  loom_status_set_message(st, LOOM_INVALID_ARGUMENT, big);
  cr_assert_eq(strlen(loom_status_message(st)), sizeof big - 1);
  cr_assert_eq(loom_status_message(st)[sizeof big - 2], 'z');
  /* then a short one reuses the buffer; NULL is "" */
  loom_status_set(st, LOOM_ABORTED, "n=%d", 3);
  cr_assert_str_eq(loom_status_message(st), "n=3");
  loom_status_set_message(st, LOOM_UNKNOWN, NULL);
  cr_assert_eq(loom_status_code(st), LOOM_UNKNOWN);
  cr_assert_str_eq(loom_status_message(st), "");
  loom_status_clear(st);
  cr_assert_eq(loom_status_code(st), LOOM_OK);
  cr_assert_eq(loom_status_set_message(NULL, LOOM_INTERNAL, "x"), LOOM_INTERNAL);
  loom_status_free(st);
}
