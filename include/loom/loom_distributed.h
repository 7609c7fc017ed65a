/* loom_distributed.h - distributed training: the cluster spec from
 * TF_CONFIG (the JSON Kubeflow's TFJob and tf.estimator.RunConfig read).
 * The parameter server and the job roles built on it come here too.
 *
 * Ownership: loom_tf_config_parse returns a new object the caller frees
 * with loom_tf_config_free; the strings its getters return belong to it and
 * stay valid until it is freed. */
#ifndef LOOM_DISTRIBUTED_H
#define LOOM_DISTRIBUTED_H

#include "loom_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- TF_CONFIG ---- */
typedef struct loom_tf_config loom_tf_config;
/* Parses TF_CONFIG JSON (json NULL: the TF_CONFIG environment variable;
 * unset or empty: local mode). Validates TF's rules (one chief, task type
 * and index present and in range, no master with chief, evaluator index 0,
 * local mode only worker 0) with INVALID_ARGUMENT naming the problem.
 * Returns a new object (NULL on failure); caller frees with
 * loom_tf_config_free. */
LOOM_API loom_tf_config *loom_tf_config_parse(const char *json, loom_status *st);
LOOM_API void loom_tf_config_free(loom_tf_config *c);
/* "worker" in local mode. Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_task_type(const loom_tf_config *c);
LOOM_API int loom_tf_config_task_id(const loom_tf_config *c);
LOOM_API int loom_tf_config_is_chief(const loom_tf_config *c);
LOOM_API int loom_tf_config_num_ps_replicas(const loom_tf_config *c);
LOOM_API int loom_tf_config_num_worker_replicas(const loom_tf_config *c);
/* TF's global_id_in_cluster (chief 0, other types alphabetically, ps last);
 * -1 for the evaluator. */
LOOM_API int loom_tf_config_global_id(const loom_tf_config *c);
/* "" local, "grpc://host:port". Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_master(const loom_tf_config *c);
/* NULL when absent. Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_model_dir(const loom_tf_config *c);
/* Number of tasks of a job in the cluster (0 when absent) and their
 * addresses (NULL when absent; owned by c; valid until loom_tf_config_free). */
LOOM_API int loom_tf_config_num_tasks(const loom_tf_config *c, const char *job);
LOOM_API const char *loom_tf_config_address(const loom_tf_config *c, const char *job, int index);

#ifdef __cplusplus
}
#endif

#endif
