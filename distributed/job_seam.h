/* distributed/job_seam.h - internal: what distributed/job.c (the parameter-server strategy) uses of
 * the PS worker beyond the public API. */
#ifndef LOOM_DIST_JOB_SEAM_H
#define LOOM_DIST_JOB_SEAM_H
#include "loom/loom_autodiff.h"
#include "loom/loom_distributed.h"

/* loom_ps_worker_new with the gradients given (grads[var], one per variable of p; values.node NULL: the
 * variable is not pushed) instead of those of a loss: the model's own (ps_rules.h). */
loom_ps_worker *loom__ps_worker_new_grads(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p,
                                          const loom_gradient *grads, loom_status *st);
/* loom_ps_worker_init_vars with each variable's update rule (rules[var]; NULL: not updated). */
loom_code loom__ps_worker_init_vars_rules(loom_ps_worker *w, const loom_ps_update_rule *const *rules,
                                          loom_status *st);
/* The gradient outputs loom_ps_worker_step fetches (owned by w). */
int loom__ps_worker_fetches(const loom_ps_worker *w, const loom_output **fetches);
/* The exchange of loom_ps_worker_step on values fetched by the caller's own
 * run (gt[i] = the value of fetches[i]). */
loom_code loom__ps_worker_exchange(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st);
/* The same in two halves (loom_job_options.overlap_comm): _send pushes the
 * gradients and asks for the new values (gt may be reused once it returns);
 * _recv reads the replies into the session's variable buffers and must run
 * while no session run uses them. Between the two, the connections carry
 * nothing else of this worker's except requests queued behind (STEP_INC). */
loom_code loom__ps_worker_exchange_send(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st);
loom_code loom__ps_worker_exchange_recv(loom_ps_worker *w, loom_status *st);
/* _send in two: _prepare reads gt (copy != 0: the dense gradients copied
 * into the worker's buffers, so gt may be reused at once); _post sends from
 * the worker's own state and may run on another thread while the session
 * runs when _post_is_write_only (no reply is read during the send, so the
 * variable buffers are not written). */
loom_code loom__ps_worker_exchange_prepare(loom_ps_worker *w, loom_tensor *const *gt, int copy, loom_status *st);
loom_code loom__ps_worker_exchange_post(loom_ps_worker *w, loom_status *st);
int loom__ps_worker_post_is_write_only(const loom_ps_worker *w);

#endif
