/* examples/synthetic.h - the synthetic classification data of the distributed examples (dist_job.c,
 * allreduce_job.c): deterministic in the example's index, so every process of a job can make its own
 * share. Header-only (each example is one program). */
#ifndef LOOM_EXAMPLES_SYNTHETIC_H
#define LOOM_EXAMPLES_SYNTHETIC_H
#include <stdint.h>
#include <stdlib.h>
#include "loom/loom.h"

/* Example i: nf features in x, its class of nc in *y; with embed > 0 an id in [0, embed) that carries the
 * class for even ids (learnable only through an embedding), else *id = 0. */
static inline void synth_example(int i, int nf, int nc, float *x, int32_t *y, int32_t *id, int64_t embed) {
  float best = -1e30f;
  int cls = 0;
  for (int f = 0; f < nf; f++) x[f] = (float)(((i * 131 + f * 71) % 97) / 97.0 - 0.5);
  for (int c = 0; c < nc; c++) {
    float s = 0;
    for (int f = 0; f < nf; f++) s += x[f] * (float)(((c * 37 + f * 13) % 11) - 5);
    if (s > best) best = s, cls = c;
  }
  *id = embed > 0 ? (int32_t)((i * 7919) % embed) : 0;
  if (embed > 0 && *id % 2 == 0) cls = *id % nc;
  *y = cls;
}

/* A dataset of the n examples in x [n, nf], y [n] and (embed > 0) ids [n]: features "x" (and "id"),
 * label "label". Frees the three arrays. */
static inline loom_dataset *synth_dataset(int64_t n, int nf, float *x, int32_t *y, int32_t *ids, int64_t embed,
                                          loom_status *st) {
  int64_t xd[2] = {n, nf}, yd[1] = {n};
  loom_tensor *xt = loom_tensor_from_data(LOOM_F32, 2, xd, x, st);
  loom_tensor *yt = loom_tensor_from_data(LOOM_I32, 1, yd, y, st);
  loom_tensor *it = loom_tensor_from_data(LOOM_I32, 1, yd, ids, st);
  free(x);
  free(y);
  free(ids);
  const char *names[3] = {"x", "label", "id"};
  const loom_tensor *arr[3] = {xt, yt, it};
  loom_dataset *ds = xt && yt && it ? loom_dataset_from_tensors(embed > 0 ? 3 : 2, names, arr, "label", st) : NULL;
  loom_tensor_free(xt);
  loom_tensor_free(yt);
  loom_tensor_free(it);
  return ds;
}

#endif
