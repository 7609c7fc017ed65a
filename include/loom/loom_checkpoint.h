/* loom_checkpoint.h - the session's variables and checkpoints: reading and
 * assigning a variable's value in a session (its variable store), and
 * checkpoint files with tf.train.Saver semantics. Graph-side variables
 * (tf.get_variable, collections, initializers) are in loom_train.h, which
 * includes this header. */
#ifndef LOOM_CHECKPOINT_H
#define LOOM_CHECKPOINT_H
#include "loom_graph.h"
#include "loom_session.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_variable loom_variable; /* loom_train.h */

/* Session side: a copy of the variable's current value. *out must be NULL
 * (a new tensor the caller frees) or a tensor from an earlier call, reused
 * when dtype and element count match. NOT_FOUND when g has no such
 * variable, FAILED_PRECONDITION when it was never initialised. */
LOOM_API loom_code loom_session_read_variable(loom_session *s, const char *name, loom_tensor **out, loom_status *st);
/* Sets the variable's value (same dtype and shape) and marks it initialised. */
LOOM_API loom_code loom_session_assign_variable(loom_session *s, const char *name, const loom_tensor *value,
                                                loom_status *st);
/* 1 when the variable has a value in this session, 0 otherwise. */
LOOM_API int loom_session_variable_initialized(loom_session *s, const char *name);

/* ===================================================================== *
 * Checkpoints (tf.train.Saver). See loom's checkpoint format in
 * engine/checkpoint.c: one file per checkpoint, CRC32C-protected. A
 * checkpoint "path" is the file's path ("dir/model.ckpt-200").
 * ===================================================================== */
typedef struct loom_saver loom_saver;

/* Saves vars (nvars == 0: every GLOBAL_VARIABLE of g at this moment). Keeps
 * the newest keep_max checkpoints it wrote (<= 0: keep all). Returns a new
 * saver (NULL on failure); caller frees with loom_saver_free. g must outlive
 * it. */
LOOM_API loom_saver *loom_saver_new(loom_graph *g, int nvars, loom_variable *const *vars, int keep_max,
                                    loom_status *st);
LOOM_API void loom_saver_free(loom_saver *sv);
/* Writes "<prefix>-<global_step>" (just "<prefix>" when global_step < 0);
 * prefix may be a directory (then "<dir>/model.ckpt"). The write is atomic
 * (temporary file, fsync, rename). Updates the directory's "checkpoint"
 * state file and deletes checkpoints beyond keep_max. Returns the path
 * (owned by sv; valid until the next loom_saver_save or loom_saver_free)
 * or NULL on error. */
LOOM_API const char *loom_saver_save(loom_saver *sv, loom_session *s, const char *prefix, int64_t global_step,
                                     loom_status *st);
/* Restores every saver variable from path (a checkpoint file, or a
 * directory: its latest checkpoint). Nothing is written unless all
 * variables are found with matching dtype and shape and their data is
 * intact. NOT_FOUND "Key <name> not found in checkpoint", INVALID_ARGUMENT
 * for a dtype/shape mismatch, DATA_LOSS for a damaged file. */
LOOM_API loom_code loom_saver_restore(loom_saver *sv, loom_session *s, const char *path, loom_status *st);
/* Adopts the checkpoints listed in dir's "checkpoint" state file (that
 * still exist) as this saver's earlier saves, for keep_max accounting
 * (tf.train.Saver.recover_last_checkpoints). */
LOOM_API loom_code loom_saver_recover_last_checkpoints(loom_saver *sv, const char *dir, loom_status *st);

/* tf.train.latest_checkpoint: the path in dir's "checkpoint" state file
 * (joined with dir when relative), copied into buf. NOT_FOUND when there is
 * none. */
LOOM_API loom_code loom_latest_checkpoint(const char *dir, char *buf, size_t cap, loom_status *st);

/* Calls fn for every tensor in the checkpoint (in file order). A nonzero
 * return from fn stops the walk. */
typedef int (*loom_checkpoint_entry_fn)(const char *name, loom_dtype dtype, int ndim, const int64_t *dims,
                                        void *user_data);
LOOM_API loom_code loom_checkpoint_list_variables(const char *path, loom_checkpoint_entry_fn fn, void *user_data,
                                                  loom_status *st);
/* A new tensor with the saved value of name (caller frees). */
LOOM_API loom_code loom_checkpoint_read_tensor(const char *path, const char *name, loom_tensor **out,
                                               loom_status *st);
/* Writes named tensors as a checkpoint file (atomic), without a session. */
LOOM_API loom_code loom_checkpoint_write(const char *path, int n, const char *const *names,
                                         const loom_tensor *const *tensors, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
