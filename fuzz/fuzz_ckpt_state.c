/* The "checkpoint" state file: latest_checkpoint and a saver's
 * recover_last_checkpoints (which also stats the listed paths). */
#include "fuzz_util.h"

static loom_graph *g;
static loom_saver *sv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g = loom_graph_new();
  int64_t d[1] = {2};
  loom_get_variable(g, "v", LOOM_F32, 1, d, NULL, 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = fz_dir("ckpt_state");
  fz_write(dir, "checkpoint", data, size);
  fz_write(dir, "model.ckpt-1", "x", 1); /* a listed path that exists */
  char buf[512];
  loom_status *st = loom_status_new();
  loom_latest_checkpoint(dir, buf, sizeof buf, st);
  sv = loom_saver_new(g, 0, NULL, 2, st);
  if (sv) loom_saver_recover_last_checkpoints(sv, dir, st);
  loom_saver_free(sv);
  loom_status_free(st);
  return 0;
}
