/* test_example_serialize.c - loom_example_serialize (loom_data.h): a
 * tf.Example's bytes without a file (what a binding feeds an export's
 * classify / regress "inputs"). Checked against hand-encoded protobuf bytes
 * of a one-feature example, against the record loom's TFRecord writer writes
 * for a three-feature one (same bytes), and on bad arguments (NULL names,
 * a NULL value, n < 0: NULL and a message naming them). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include "loom/loom.h"
#include "test_util.h"

Test(example_serialize, one_float_feature_is_the_hand_encoded_protobuf) {
  loom_status *st = loom_status_new();
  int64_t d1 = 1;
  float v = 1.5f;
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 1, &d1, &v, NULL);
  const char *names[1] = {"x"};
  const loom_tensor *vals[1] = {x};
  loom_tensor *s = loom_example_serialize(1, names, vals, st);
  cr_assert(s, "%s", loom_status_message(st));
  cr_expect_eq(loom_tensor_ndim(s), 0);
  cr_expect_eq(loom_tensor_dtype(s), LOOM_STRING);
  /* Example{features(1){feature(1) entry{key(1) "x", value(2) Feature{float_list(2) FloatList{value(1) packed [1.5]}}}}} */
  static const uint8_t want[] = {0x0a, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, 'x',  0x12, 0x08,
                                 0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0xc0, 0x3f};
  size_t len = 0;
  const char *b = loom_tensor_get_string(s, 0, &len);
  cr_assert_eq(len, sizeof want, "%zu bytes", len);
  cr_expect(!memcmp(b, want, sizeof want), "bytes differ from the hand-encoded example");
  loom_tensor_free(s);
  /* no features: an empty features message (0a 00), as TF's Example(features=Features()) */
  s = loom_example_serialize(0, NULL, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  b = loom_tensor_get_string(s, 0, &len);
  cr_expect(len == 2 && b[0] == 0x0a && b[1] == 0, "%zu bytes", len);
  loom_tensor_free(s);
  loom_tensor_free(x);
  loom_status_free(st);
}

Test(example_serialize, equals_the_writers_record) {
  char dir[TU_TMPDIR_CAP], path[512];
  tu_tmpdir(dir, sizeof dir, "example_serialize");
  snprintf(path, sizeof path, "%s/one.tfrecord", dir);
  loom_status *st = loom_status_new();
  int64_t d3 = 3, d2 = 2, d1 = 1;
  float xv[3] = {1.5f, -2.0f, 3.25f};
  int64_t iv = 7;
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 1, &d3, xv, NULL);
  loom_tensor *id = loom_tensor_from_data(LOOM_I64, 1, &d1, &iv, NULL);
  loom_tensor *tag = loom_tensor_new(LOOM_STRING, 1, &d2, NULL);
  loom_tensor_set_string(tag, 0, "a", 1, NULL);
  loom_tensor_set_string(tag, 1, "bc", 2, NULL);
  const char *names[3] = {"x", "id", "tag"};
  const loom_tensor *vals[3] = {x, id, tag};
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w);
  cr_assert_eq(loom_tfrecord_writer_write_example(w, 3, names, vals, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  size_t fn = 0;
  char *f = tu_read_file(path, &fn);
  uint64_t rl;
  cr_assert(f && fn >= 16);
  memcpy(&rl, f, 8); /* TFRecord framing: u64 length, u32 crc, data, u32 crc */
  cr_assert_eq(fn, 16 + rl);
  loom_tensor *s = loom_example_serialize(3, names, vals, st);
  cr_assert(s, "%s", loom_status_message(st));
  size_t len = 0;
  const char *b = loom_tensor_get_string(s, 0, &len);
  cr_expect_eq(len, rl);
  cr_expect(len == rl && !memcmp(b, f + 12, len), "the bytes differ from the writer's record");
  cr_expect(len > 20 && memmem(b, len, "bc", 2), "no 'bc' in the bytes");
  loom_tensor_free(s);
  free(f);
  /* errors name what is wrong; nothing is returned */
  cr_expect_null(loom_example_serialize(3, NULL, vals, st));
  cr_expect(strstr(loom_status_message(st), "names"), "%s", loom_status_message(st));
  const loom_tensor *bad[3] = {x, NULL, tag};
  cr_expect_null(loom_example_serialize(3, names, bad, st));
  cr_expect(strstr(loom_status_message(st), "'id'"), "%s", loom_status_message(st));
  cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_expect_null(loom_example_serialize(-1, names, vals, st));
  cr_expect(strstr(loom_status_message(st), "negative"), "%s", loom_status_message(st));
  loom_tensor_free(x);
  loom_tensor_free(id);
  loom_tensor_free(tag);
  loom_status_free(st);
  tu_rmtree(dir);
}
