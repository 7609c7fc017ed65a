/* loom checkpoint files: list the variables, read each tensor, and restore a
 * saver of two variables ("w" f32[2,3], "global_step" i64) from it (the full
 * path: file CRC, record CRCs, dtype/shape checks). */
#include "fuzz_util.h"

static loom_graph *g;
static loom_session *s;
static loom_saver *sv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g = loom_graph_new();
  int64_t d[2] = {2, 3};
  loom_get_variable(g, "w", LOOM_F32, 2, d, NULL, 1);
  loom_get_or_create_global_step(g);
  s = loom_session_new(g, NULL, NULL);
  sv = loom_saver_new(g, 0, NULL, 0, NULL);
  if (!s || !sv) abort();
  return 0;
}

typedef struct names {
  char n[16][64];
  int k;
} names;
static int collect(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *u) {
  (void)dt;
  (void)ndim;
  (void)dims;
  names *nm = u;
  if (nm->k < 16) snprintf(nm->n[nm->k++], 64, "%s", name);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = fz_dir("checkpoint");
  const char *path = fz_write(dir, "model.ckpt-1", data, size);
  loom_status *st = loom_status_new();
  names nm;
  nm.k = 0;
  if (loom_checkpoint_list_variables(path, collect, &nm, st) == LOOM_OK) {
    for (int i = 0; i < nm.k; i++) {
      loom_tensor *t = NULL;
      loom_checkpoint_read_tensor(path, nm.n[i], &t, st);
      loom_tensor_free(t);
    }
  }
  loom_code rc = loom_saver_restore(sv, s, path, st);
  if (getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: %d tensors, restore: %s\n", nm.k, rc ? loom_status_message(st) : "ok");
  loom_status_free(st);
  return 0;
}
