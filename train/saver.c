/* train/saver.c - tf.train.Saver's graph side: loom_saver_new resolves a
 * list of graph variables (default: GLOBAL_VARIABLES) into the names the
 * engine's saver (engine/checkpoint.c) saves and restores. */
#include <string.h>
#include "train/train_impl.h"

loom_saver *loom_saver_new(loom_graph *g, int nvars, loom_variable *const *vars, int keep_max, loom_status *st) {
  if (!g) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: graph is NULL");
    return NULL;
  }
  int n = nvars;
  loom_variable *const *list = vars;
  if (n <= 0 || !list) list = loom_global_variables(g, &n);
  const char **names = loom__calloc((size_t)(n > 0 ? n : 1), sizeof *names);
  if (!names) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!list[i] || !list[i]->node || list[i]->g != g) {
      loom__free(names);
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: variable %d is not a variable of this graph", i);
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(names[j], list[i]->name)) {
        loom__free(names);
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: variable %s is listed twice", list[i]->name);
        return NULL;
      }
    names[i] = list[i]->name;
  }
  loom_saver *sv = loom__saver_new_names(g, n, names, keep_max, st);
  loom__free(names);
  return sv;
}
