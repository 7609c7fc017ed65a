/* Serialized graphs (saved_model.loom's format): loom_graph_deserialize into
 * an empty graph, then serialize what was imported back (a round trip of
 * whatever was accepted). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_dir("graph");
  loom_graph *g = loom_graph_new();
  loom_status *st = loom_status_new();
  if (loom_graph_deserialize(g, data, size, st) == LOOM_OK) {
    void *buf = NULL;
    size_t n = 0;
    if (loom_graph_serialize(g, 0, NULL, &buf, &n, st) == LOOM_OK) loom_buffer_free(buf);
  }
  loom_graph_free(g);
  loom_status_free(st);
  return 0;
}
