/* distributed/ps_restore.h - internal: a starting PS task restores the newest complete state of its
 * shard (distributed/ps_restore.c says which files compete and how). */
#ifndef LOOM_DIST_PS_RESTORE_H
#define LOOM_DIST_PS_RESTORE_H
#include "loom/loom_distributed.h"

typedef struct loom__ps_restore_in {
  const char *model_dir;       /* the job's model_dir (the PS's own, shared with the chief) */
  const loom_ps_placement *p;  /* the job's placement */
  int ps_index, num_ps;
  const char *self_dir;        /* the PS's own saves, relative to model_dir (loom_ps_server_options.self_save_dir) */
  int model_rules;             /* 1: the model's own update rules (the chief creates shards from model.ckpt) */
  loom_ps_optimizer opt;       /* the job-level PS optimizer and its hyperparameters (model_rules 0: for shards
                                  created from model.ckpt) */
  const float *hyper;
  loom_ps_connect_options co;  /* a loopback connection to the PS itself (host, port, token, placement) */
  const char *name;            /* "job ps:0" for the log line */
} loom__ps_restore_in;

/* Restores the newest candidate; LOOM_OK with *from NULL when there is none. A PS-side shard whose digest
 * differs from the chief's manifest is DATA_LOSS (the PS must not serve it). *from (may be NULL): a
 * static description of the source restored. */
loom_code loom__ps_restore_newest(const loom__ps_restore_in *in, const char **from, loom_status *st);

#endif
