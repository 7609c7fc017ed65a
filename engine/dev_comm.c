/* engine/dev_comm.c - the all-reduce between processes on a device session's device, through its
 * backend's comm_* calls (engine/engine_api.h; CUDA: engine/cuda/nccl_lazy.c). */
#include <stdio.h>
#include <string.h>
#include "engine/backend.h"
#include "engine/engine_api.h"

struct loom__dev_comm {
  loom_session *s;
  const loom_backend_i *be;
  void *ctx, *comm;
  double timeout_s;
};

int loom__session_on_device(const loom_session *s) { return loom__dev_backend(s) != NULL; }

int loom__dev_count(loom_device_type dev) { return loom__backend_device_count(dev); }

static const loom_backend_i *comm_backend(loom_session *s, loom_status *st) {
  const loom_backend_i *be = loom__dev_backend(s);
  if (!be) {
    loom_status_set(st, LOOM_FAILED_PRECONDITION, "the session runs on the CPU");
    return NULL;
  }
  if (!be->comm_load) {
    loom_status_set(st, LOOM_UNAVAILABLE, "the %s backend has no all-reduce between processes", be->name);
    return NULL;
  }
  return be;
}

loom_code loom__dev_comm_load(loom_session *s, char *name, size_t cap, loom_status *st) {
  const loom_backend_i *be = comm_backend(s, st);
  return be ? be->comm_load(name, cap, st) : loom_status_code(st);
}

loom_code loom__dev_comm_id(loom_session *s, void *id, size_t cap, size_t *n, loom_status *st) {
  const loom_backend_i *be = comm_backend(s, st);
  return be ? be->comm_id(id, cap, n, st) : loom_status_code(st);
}

loom__dev_comm *loom__dev_comm_new(loom_session *s, const void *id, size_t n, int nranks, int rank, double timeout_s,
                                   loom_status *st) {
  const loom_backend_i *be = comm_backend(s, st);
  if (!be) return NULL;
  loom__dev_comm *c = loom__calloc(1, sizeof *c);
  if (!c) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  c->s = s;
  c->be = be;
  c->ctx = loom__dev_context(s);
  c->timeout_s = timeout_s;
  if (be->begin_run) be->begin_run(c->ctx); /* the session's device current on this thread */
  if (!(c->comm = be->comm_new(c->ctx, id, n, nranks, rank, timeout_s, st))) {
    loom__free(c);
    return NULL;
  }
  return c;
}

loom_code loom__dev_comm_allreduce_host(loom__dev_comm *c, float *buf, int64_t n, loom_status *st) {
  size_t bytes = (size_t)n * sizeof(float);
  if (n <= 0) return LOOM_OK;
  /* the device buffer comes from the session's caching pool and goes back to it after each call, so that
   * the communicator holds nothing of the session's (it may outlive the session) */
  void *dbuf = c->be->buffer_alloc(c->ctx, bytes, st);
  if (!dbuf) return loom_status_code(st);
  if (c->be->begin_run) c->be->begin_run(c->ctx);
  loom_code rc = c->be->copy_h2d(c->ctx, dbuf, buf, bytes, st);
  /* returns when the sum is in dbuf (the stream idle) or the timeout aborted the communicator */
  if (rc == LOOM_OK) rc = c->be->comm_allreduce_sum_f32(c->ctx, c->comm, dbuf, n, c->timeout_s, st);
  if (rc == LOOM_OK) rc = c->be->copy_d2h(c->ctx, buf, dbuf, bytes, st);
  c->be->buffer_free(c->ctx, dbuf);
  return rc;
}

/* The communicator only: it holds nothing of the session's, which may be gone by now. */
void loom__dev_comm_free(loom__dev_comm *c) {
  if (!c) return;
  c->be->comm_free(c->comm);
  loom__free(c);
}
