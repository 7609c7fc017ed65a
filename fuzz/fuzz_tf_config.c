/* TF_CONFIG JSON (loom_tf_config_parse) and every accessor. */
#include "loom/loom_distributed.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  loom_status *st = loom_status_new();
  loom_tf_config *c = loom_tf_config_parse(s, st);
  if (c) {
    volatile size_t sink = 0;
    const char *t = loom_tf_config_task_type(c);
    sink += t ? strlen(t) : 0;
    sink += (size_t)loom_tf_config_task_id(c) + (size_t)loom_tf_config_is_chief(c);
    sink += (size_t)loom_tf_config_num_ps_replicas(c) + (size_t)loom_tf_config_num_worker_replicas(c);
    sink += (size_t)loom_tf_config_global_id(c);
    const char *m = loom_tf_config_master(c);
    sink += m ? strlen(m) : 0;
    m = loom_tf_config_model_dir(c);
    sink += m ? strlen(m) : 0;
    (void)sink;
    loom_tf_config_free(c);
  }
  loom_status_free(st);
  free(s);
  return 0;
}
