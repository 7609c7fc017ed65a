/* Vocabulary files (loom_vocab_read_file): strings and int64 keys, all lines
 * or the first 3. */
#include "loom/loom_sparse.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fz_dir("vocab");
  const char *path = fz_write(dir, "vocab.txt", data + 1, size - 1);
  loom_vocab v;
  memset(&v, 0, sizeof v);
  loom_status *st = loom_status_new();
  if (loom_vocab_read_file(path, (data[0] & 2) ? 3 : 0, data[0] & 1, &v, st) == LOOM_OK) loom_vocab_free(&v);
  loom_status_free(st);
  return 0;
}
