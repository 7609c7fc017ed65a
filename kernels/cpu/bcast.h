/* kernels/cpu/bcast.h - NumPy broadcasting plan shared by elementwise kernels.
 *
 * loom__bcast_init describes how up to LOOM_BCAST_MAXIN inputs map onto an
 * output: output dims of size 1 are dropped and adjacent dims are merged when
 * every input is laid out contiguously (or broadcast) across both, so
 *   same shapes          -> 1 dim,  inner strides (1,1)
 *   tensor + scalar      -> 1 dim,  inner strides (1,0)
 *   [N,C] + [C] (bias)   -> 2 dims, strides a (C,1), b (0,1)
 *   [N,C] + [N,1]        -> 2 dims, strides a (C,1), b (1,0)
 * After coalescing the innermost stride of every input is 0 (broadcast) or 1
 * (contiguous), so kernels run their inner loop as one of a few tight,
 * vectorizable loops and walk the outer dims with an odometer.
 *
 * A kernel splits the flat output range [0, numel) into chunks (possibly in
 * the middle of a row): loom__bcast_seek positions an iterator at a flat
 * index and loom__bcast_next_row advances to the start of the next row.
 * Internal header. */
#ifndef LOOM_KERNELS_CPU_BCAST_H
#define LOOM_KERNELS_CPU_BCAST_H
#include <stdint.h>
#include "kernels/kernel.h"

#define LOOM_BCAST_MAXIN 3

typedef struct loom_bcast {
  int32_t ndim;                                /* >= 1 */
  int32_t nin;
  int64_t numel;                               /* output elements (may be 0) */
  int64_t dims[LOOM_MAX_DIMS];                 /* coalesced output dims */
  int64_t st[LOOM_BCAST_MAXIN][LOOM_MAX_DIMS]; /* element strides per input; 0 = broadcast */
} loom_bcast;

typedef struct loom_bcast_it {
  int64_t idx[LOOM_MAX_DIMS];  /* index of the current row in the outer dims */
  int64_t off[LOOM_BCAST_MAXIN]; /* element offset of each input at the current position */
  int64_t j;                   /* position within the current row */
} loom_bcast_it;

/* Builds the plan for inputs in[0..nin) broadcast onto out's shape (each input
 * must be broadcast-compatible with out: the shape function checked it). */
static inline void loom__bcast_init(loom_bcast *p, int nin, const loom_buf *const *in, const loom_buf *out) {
  int n = out->ndim;
  int64_t kd[LOOM_MAX_DIMS], ks[LOOM_BCAST_MAXIN][LOOM_MAX_DIMS];
  int64_t run[LOOM_BCAST_MAXIN];
  int nk = 0;
  p->nin = nin;
  p->numel = out->numel;
  for (int k = 0; k < nin; k++) run[k] = 1;
  /* innermost first: strides of each input over the output's dims */
  for (int i = n - 1; i >= 0; i--) {
    int64_t d = out->dims[i];
    int64_t s[LOOM_BCAST_MAXIN];
    for (int k = 0; k < nin; k++) {
      int ik = i - (n - in[k]->ndim);
      int64_t dk = ik >= 0 ? in[k]->dims[ik] : 1;
      s[k] = dk == 1 ? 0 : run[k];
      run[k] *= dk;
    }
    if (d == 1) continue;
    kd[nk] = d;
    for (int k = 0; k < nin; k++) ks[k][nk] = s[k];
    nk++;
  }
  /* kd[0] is the innermost kept dim; merge outward into p (outer-first). */
  if (nk == 0) {
    p->ndim = 1;
    p->dims[0] = 1;
    for (int k = 0; k < nin; k++) p->st[k][0] = 1;
    return;
  }
  /* merged dims, innermost first */
  int64_t md[LOOM_MAX_DIMS], ms[LOOM_BCAST_MAXIN][LOOM_MAX_DIMS];
  int nm = 0;
  for (int i = 0; i < nk; i++) {
    if (nm > 0) {
      int ok = 1;
      for (int k = 0; k < nin; k++)
        if (ks[k][i] != ms[k][nm - 1] * md[nm - 1]) ok = 0;
      if (ok) {
        md[nm - 1] *= kd[i];
        continue;
      }
    }
    md[nm] = kd[i];
    for (int k = 0; k < nin; k++) ms[k][nm] = ks[k][i];
    nm++;
  }
  p->ndim = nm;
  for (int i = 0; i < nm; i++) {
    p->dims[nm - 1 - i] = md[i];
    for (int k = 0; k < nin; k++) p->st[k][nm - 1 - i] = ms[k][i];
  }
}

/* Innermost dim length and the innermost stride (0 or 1) of input k. */
static inline int64_t loom__bcast_inner(const loom_bcast *p) { return p->dims[p->ndim - 1]; }
static inline int64_t loom__bcast_istride(const loom_bcast *p, int k) { return p->st[k][p->ndim - 1]; }

/* Positions it at flat output index `flat`. nin must equal p->nin (pass it as a
 * constant so the per-input loops unroll). */
static inline void loom__bcast_seek(const loom_bcast *p, int nin, int64_t flat, loom_bcast_it *it) {
  int last = p->ndim - 1;
  int64_t inner = p->dims[last];
  int64_t row = flat / inner;
  it->j = flat - row * inner;
  for (int k = 0; k < nin; k++) it->off[k] = it->j * p->st[k][last];
  for (int d = last - 1; d >= 0; d--) {
    it->idx[d] = row % p->dims[d];
    row /= p->dims[d];
    for (int k = 0; k < nin; k++) it->off[k] += it->idx[d] * p->st[k][d];
  }
}

/* Moves it from any position in a row to the start of the next row. */
static inline void loom__bcast_next_row(const loom_bcast *p, int nin, loom_bcast_it *it) {
  int last = p->ndim - 1;
  for (int k = 0; k < nin; k++) it->off[k] -= it->j * p->st[k][last];
  it->j = 0;
  for (int d = last - 1; d >= 0; d--) {
    it->idx[d]++;
    for (int k = 0; k < nin; k++) it->off[k] += p->st[k][d];
    if (it->idx[d] < p->dims[d]) return;
    for (int k = 0; k < nin; k++) it->off[k] -= p->st[k][d] * p->dims[d];
    it->idx[d] = 0;
  }
}

#endif
