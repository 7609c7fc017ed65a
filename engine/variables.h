/* engine/variables.h - internal: the session's variable store (the graph
 * side of variables is train/, which sees only engine/variable_api.h).
 *
 * The store is an object behind a small vtable so that something other than
 * local memory (a parameter-server client) can back variables later: it
 * must hand out stable, 64-byte aligned host buffers (bound into plans at
 * specialization) and may synchronise them around runs (before_run /
 * after_run). */
#ifndef LOOM_VARIABLES_H
#define LOOM_VARIABLES_H
#include "engine/session_impl.h"
#include "loom/loom_checkpoint.h"
#include "engine/variable_api.h"

typedef struct loom_var_entry {
  char *name;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  void *data;          /* 64-byte aligned, never moves while the session lives */
  int32_t initialized; /* set by Assign, restore, loom_session_assign_variable */
} loom_var_entry;

typedef struct loom_var_store loom_var_store;
typedef struct loom_var_store_ops {
  /* NULL when absent. */
  loom_var_entry *(*lookup)(loom_var_store *vs, const char *name);
  /* A new zero-filled, uninitialised entry (name must be absent). */
  loom_var_entry *(*create)(loom_var_store *vs, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                            loom_status *st);
  int64_t (*count)(loom_var_store *vs);
  loom_var_entry *(*at)(loom_var_store *vs, int64_t i);
  /* Optional (NULL for local memory): called around every run. */
  loom_code (*before_run)(loom_var_store *vs, loom_session *s, const loom_plan *p, loom_status *st);
  loom_code (*after_run)(loom_var_store *vs, loom_session *s, const loom_plan *p, loom_status *st);
  void (*destroy)(loom_var_store *vs);
} loom_var_store_ops;

struct loom_var_store {
  const loom_var_store_ops *ops;
  int64_t n_uninit; /* entries with initialized == 0 (the run check is free when 0) */
};

/* The session's store, created (local memory) on first use; NULL only when
 * out of memory (st says so). */
loom_var_store *loom__var_store(loom_session *s, loom_status *st);
/* Replaces the session's store (before any run). Takes ownership. */
void loom__var_store_install(loom_session *s, loom_var_store *vs);
void loom__var_mark_initialized(loom_var_store *vs, loom_var_entry *e);
/* The entry of the graph's variable `name`, created from the graph's
 * VariableV2 node when missing. NOT_FOUND when g has no such variable. */
loom_var_entry *loom__var_entry(loom_session *s, const char *name, loom_status *st);
/* VariableV2's bind function. */
loom_code loom__var_bind(struct loom_session *s, const loom_node *n, loom_buf *out, loom_status *st);

#endif
