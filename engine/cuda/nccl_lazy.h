/* engine/cuda/nccl_lazy.h - NCCL, loaded on first use, behind the CUDA backend's device all-reduce
 * (engine/backend.h: comm_*; CUDA=1 and CUDA=emu builds; engine/cuda/nccl_lazy.c). */
#ifndef LOOM_CUDA_NCCL_LAZY_H
#define LOOM_CUDA_NCCL_LAZY_H
#include <stddef.h>
#include <stdint.h>
#include "loom/loom.h"

loom_code loom__nccl_load(char *name, size_t cap, loom_status *st);
loom_code loom__nccl_id(void *id, size_t cap, size_t *n, loom_status *st);
void *loom__nccl_comm_new(void *ctx, const void *id, size_t n, int nranks, int rank, double timeout_s,
                          loom_status *st);
loom_code loom__nccl_allreduce_sum_f32(void *ctx, void *comm, void *buf, int64_t n, double timeout_s,
                                       loom_status *st);
void loom__nccl_comm_free(void *comm);
#endif
