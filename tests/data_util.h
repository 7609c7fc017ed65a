/* tests/data_util.h - what the dataset tests (tests/test_data_*.c) share:
 * paths in a temporary folder, stepping a dataset with checked status and
 * end of input, expected error messages, shapes, and typed views of a
 * tensor's data. */
#ifndef LOOM_TESTS_DATA_UTIL_H
#define LOOM_TESTS_DATA_UTIL_H
#include "test_util.h"

/* dir/name (caller frees). */
static inline char *path_in(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

static inline loom_dataset *chk(loom_dataset *ds, loom_status *st) {
  cr_assert(ds, "dataset: %s", loom_status_message(st));
  return ds;
}
static inline void next_ok(loom_dataset *ds, loom_tensor **v, loom_status *st) {
  loom_code rc = loom_dataset_next(ds, v, st);
  cr_assert_eq(rc, LOOM_OK, "next: %s: %s", loom_code_name(rc), loom_status_message(st));
}
static inline void expect_end(loom_dataset *ds, loom_tensor **v, loom_status *st) {
  loom_code rc = loom_dataset_next(ds, v, st);
  cr_assert_eq(rc, LOOM_OUT_OF_RANGE, "expected the end, got %s: %s", loom_code_name(rc), loom_status_message(st));
  cr_assert_str_eq(loom_status_message(st), "End of sequence");
}
/* Asserts code and that the message contains each of up to 3 substrings. */
static inline void expect_msg(loom_code got, loom_code want, loom_status *st, const char *a, const char *b,
                              const char *c) {
  cr_assert_eq(got, want, "code %s (want %s): %s", loom_code_name(got), loom_code_name(want), loom_status_message(st));
  const char *m = loom_status_message(st);
  const char *subs[3] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (subs[i]) cr_assert(strstr(m, subs[i]), "message '%s' lacks '%s'", m, subs[i]);
}
static inline void free_vals(loom_tensor **v, int n) {
  for (int i = 0; i < n; i++) {
    loom_tensor_free(v[i]);
    v[i] = NULL;
  }
}
static inline void expect_shape(const loom_tensor *t, int nd, const int64_t *dims) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_ndim(t), nd, "rank %d want %d", loom_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "dim %d: %lld want %lld", i, (long long)loom_tensor_dim(t, i),
                 (long long)dims[i]);
}
static inline const float *F(const loom_tensor *t) { return loom_tensor_data_const(t); }
static inline const int32_t *I(const loom_tensor *t) { return loom_tensor_data_const(t); }
static inline const int64_t *L(const loom_tensor *t) { return loom_tensor_data_const(t); }

/* The default of the float feature "w" in test_data_tfrecord.c's spec; the
 * feature-kind tests use it as a default where none is allowed. */
static const float k_wdef = 0.5f;

#endif
