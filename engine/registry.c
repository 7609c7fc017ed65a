/* engine/registry.c - the op registry: a table of op definitions that ops/
 * installs (it owns the storage and the names) and the engine looks up by id
 * or by name. The engine itself knows no op. See engine_impl.h. */
#include <string.h>
#include "engine/engine_impl.h"

static loom_op_def *g_table;
static int g_count;

void loom__registry_install(loom_op_def *table, int count) {
  g_table = table;
  g_count = table && count > 0 ? count : 0;
}

loom_op_def *loom__op_table(void) { return g_table; }
int loom__op_count(void) { return g_count; }

const loom_op_def *loom__op_def(int op) { return (op >= 0 && op < g_count) ? &g_table[op] : NULL; }

int loom__op_find(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < g_count; i++)
    if (g_table[i].name && !strcmp(g_table[i].name, name)) return i;
  return -1;
}

int loom__op_with_flags(uint32_t flags) {
  for (int i = 0; i < g_count; i++)
    if ((g_table[i].flags & flags) == flags) return i;
  return -1;
}

const char *loom__registry_error(void) {
  return "no op is registered: the op library (ops/) was not linked or its registration did not run";
}
