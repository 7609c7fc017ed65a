/* Model comparison for the multi-process training tests (all-reduce, its launchers, NCCL):
 * how far two models trained in different ways are apart. Include after test_util.h. */
#ifndef LOOM_TESTS_CKPT_COMPARE_H
#define LOOM_TESTS_CKPT_COMPARE_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "test_util.h"

typedef struct {
  const char *pa, *pb;
  double worst;
  int n;
} tu__ckpt_cmp;

static int tu__ckpt_cmp_entry(const char *name, loom_dtype dt, int nd, const int64_t *dims, void *u) {
  (void)nd;
  (void)dims;
  tu__ckpt_cmp *c = u;
  if (dt != LOOM_F32) return 0;
  loom_tensor *a = NULL, *b = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(c->pa, name, &a, NULL), LOOM_OK, "%s in %s", name, c->pa);
  cr_assert_eq(loom_checkpoint_read_tensor(c->pb, name, &b, NULL), LOOM_OK, "%s in %s", name, c->pb);
  cr_assert_eq(loom_tensor_numel(a), loom_tensor_numel(b), "%s", name);
  const float *x = loom_tensor_data_const(a), *y = loom_tensor_data_const(b);
  double diff = 0, mag = 0;
  for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
    diff = fmax(diff, fabs((double)x[i] - (double)y[i]));
    mag = fmax(mag, fabs((double)y[i]));
  }
  c->worst = fmax(c->worst, diff / fmax(mag, 1e-30));
  c->n++;
  loom_tensor_free(a);
  loom_tensor_free(b);
  return 0;
}

/* The largest |a - b| / max |b| over every float variable (the optimizer's slots included) of the
 * latest checkpoints of model_dirs da and db, which must both be at step; the number of variables
 * compared goes to *nvars. */
static inline double tu_compare_ckpts(const char *da, const char *db, int64_t step, int *nvars) {
  char pa[1024], pb[1024], want[64];
  cr_assert_eq(loom_latest_checkpoint(da, pa, sizeof pa, NULL), LOOM_OK, "no checkpoint in %s", da);
  cr_assert_eq(loom_latest_checkpoint(db, pb, sizeof pb, NULL), LOOM_OK, "no checkpoint in %s", db);
  snprintf(want, sizeof want, "model.ckpt-%lld", (long long)step);
  cr_assert(strstr(pa, want) && strstr(pb, want), "checkpoints %s and %s are not at step %lld", pa, pb,
            (long long)step);
  tu__ckpt_cmp c = {pa, pb, 0, 0};
  cr_assert_eq(loom_checkpoint_list_variables(pa, tu__ckpt_cmp_entry, &c, NULL), LOOM_OK);
  *nvars = c.n;
  return c.worst;
}

/* Every rank printed the same `variables_checksum=` (np lines in out): bitwise identical models. */
static inline void tu_same_checksums(const char *out, int np) {
  char first[32] = "";
  int n = 0;
  for (const char *p = out; (p = strstr(p, "variables_checksum=")); p++, n++) {
    char cs[32];
    cr_assert_eq(sscanf(p, "variables_checksum=%16s", cs), 1);
    if (!first[0]) snprintf(first, sizeof first, "%s", cs);
    cr_assert_str_eq(cs, first, "ranks' checksums differ:\n%s", out);
  }
  cr_assert_eq(n, np, "expected %d checksum lines:\n%s", np, out);
}
#endif
