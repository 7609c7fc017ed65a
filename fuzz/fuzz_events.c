/* TensorBoard event files through the reader (loom_event_reader). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = fz_dir("events");
  const char *path = fz_write(dir, "events.out.tfevents.1.fuzz", data, size);
  loom_status *st = loom_status_new();
  loom_event_reader *r = loom_event_reader_open(path, st);
  if (r) {
    const loom_event *ev = NULL;
    for (int i = 0; i < 256 && loom_event_reader_next(r, &ev, st) == LOOM_OK; i++) {
    }
    loom_event_reader_free(r);
  }
  loom_status_free(st);
  return 0;
}
