/* estimator/data_tfrecord.c - TFRecord dataset of tf.Example, writer. */
#include "estimator/data_impl.h"
#include "estimator/tfrecord.h"

loom_dataset *loom_dataset_tfrecord(int nfiles, const char *const *paths, int nspec, const loom_feature_spec *spec,
                                    const char *label_name, loom_status *st) {
  (void)nfiles, (void)paths, (void)nspec, (void)spec, (void)label_name;
  loom_status_set(st, LOOM_UNIMPLEMENTED, "dataset_tfrecord: not implemented yet");
  return NULL;
}
loom_tfrecord_writer *loom_tfrecord_writer_new(const char *path, loom_status *st) {
  (void)path;
  loom_status_set(st, LOOM_UNIMPLEMENTED, "tfrecord_writer: not implemented yet");
  return NULL;
}
loom_code loom_tfrecord_writer_write(loom_tfrecord_writer *w, const void *record, size_t n, loom_status *st) {
  (void)w, (void)record, (void)n;
  return loom_status_set(st, LOOM_UNIMPLEMENTED, "tfrecord_writer: not implemented yet");
}
loom_code loom_tfrecord_writer_write_example(loom_tfrecord_writer *w, int n, const char *const *names,
                                             const loom_tensor *const *values, loom_status *st) {
  (void)w, (void)n, (void)names, (void)values;
  return loom_status_set(st, LOOM_UNIMPLEMENTED, "tfrecord_writer: not implemented yet");
}
loom_code loom_tfrecord_writer_close(loom_tfrecord_writer *w, loom_status *st) {
  (void)w;
  return loom_status_set(st, LOOM_UNIMPLEMENTED, "tfrecord_writer: not implemented yet");
}
