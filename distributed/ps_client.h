/* distributed/ps_client.h - internal: the client requests above the connection
 * (ps_conn.h) that the cluster client pipelines across PS tasks. */
#ifndef LOOM_DIST_PS_CLIENT_H
#define LOOM_DIST_PS_CLIENT_H
#include "distributed/ps_conn.h"
#include "loom/loom_distributed.h"

/* loom_ps_reserve_step in two halves, so the reservation of the next step can travel behind this
 * step's exchange (its reply is read after the next run). */
loom_code loom__ps_reserve_send(loom_ps_client *c, int64_t max_steps, loom_status *st);
loom_code loom__ps_reserve_recv(loom_ps_client *c, int64_t *step, int *granted, loom_status *st);

/* Creates shard `shard` of p on pc, the connection to that shard's PS, from the whole variable's value
 * (as loom_ps_cluster_init_var / _init_var_rule do for every shard of a variable): with update rule r
 * (its slot values the whole variable's too), or with opt and hyper when r is NULL. */
loom_code loom__ps_shard_init(loom_ps_client *pc, const loom_ps_placement *p, int shard, loom_ps_optimizer opt,
                              const float *hyper, const loom_ps_update_rule *r, const float *value, loom_status *st);

/* The cluster client's exchange in two halves (all requests out, then all
 * replies in), so the worker can add its row requests to the same round trip. */
int loom__ps_cluster_send_is_write_only(const loom_ps_cluster *c, float *const *values);
loom_code loom__ps_cluster_send(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                loom_status *st);
loom_code loom__ps_cluster_recv(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                loom_status *st);
void loom__ps_cluster_count_dropped(loom_ps_cluster *c, int64_t n);
/* Pipelined shards (ps_parts.h) land in a staging buffer during the send half and reach the values'
 * buffers in the receive half (on: the send may run on another thread while those buffers are in use,
 * overlap_comm's sender thread; off, the default: straight into the values, one copy less). */
void loom__ps_cluster_stage_parts(loom_ps_cluster *c, int on);
/* The version of shard i that the cluster's last pull or push+pull delivered (UINT64_MAX: none). */
uint64_t loom__ps_cluster_version(const loom_ps_cluster *c, int shard);
/* The number of PS tasks this cluster client exchanges dense shards with through shared memory. */
int loom__ps_cluster_shm_attached(const loom_ps_cluster *c);

#endif
