/* TFRecord framing + tf.Example parsing with a feature spec covering every
 * kind: FixedLen f32[2] with a default, FixedLen string scalar, VarLen i64
 * (ragged), FixedLenSequence f32[2] (allow_missing), SparseFeature f32[5];
 * label the i64 scalar "y". Byte 0 bit 0 batches by 2. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fz_dir("tfrecord");
  const char *path = fz_write(dir, "in.tfrecord", data + 1, size - 1);
  static const float dflt[2] = {1.5f, -2.0f};
  static const int64_t ydef = 7;
  loom_feature_spec spec[6];
  memset(spec, 0, sizeof spec);
  spec[0].name = "x";
  spec[0].dtype = LOOM_F32;
  spec[0].ndim = 1;
  spec[0].dims[0] = 2;
  spec[0].default_value = dflt;
  spec[1].name = "s";
  spec[1].dtype = LOOM_STRING;
  spec[2].name = "ids";
  spec[2].dtype = LOOM_I64;
  spec[2].kind = LOOM_FEATURE_VAR_LEN;
  spec[2].varlen = 1;
  spec[2].ragged = 1;
  spec[3].name = "seq";
  spec[3].dtype = LOOM_F32;
  spec[3].kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE;
  spec[3].ndim = 1;
  spec[3].dims[0] = 2;
  spec[3].allow_missing = 1;
  spec[4].name = "sp";
  spec[4].dtype = LOOM_F32;
  spec[4].kind = LOOM_FEATURE_SPARSE;
  spec[4].size = 5;
  spec[4].index_key = "sp_idx";
  spec[4].value_key = "sp_val";
  spec[5].name = "y";
  spec[5].dtype = LOOM_I64;
  spec[5].default_value = &ydef;
  const char *paths[1] = {path};
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_tfrecord(1, paths, 6, spec, "y", st);
  if (ds && (data[0] & 1)) ds = loom_dataset_batch(ds, 2, 0, st);
  if (!ds && getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: no dataset: %s\n", loom_status_message(st));
  fz_drain(ds, 64);
  loom_status_free(st);
  return 0;
}
