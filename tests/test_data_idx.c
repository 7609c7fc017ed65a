/* IDX datasets (loom_data.h): synthetic raw and gzipped files, malformed
 * files, the real Fashion-MNIST test set. */
#include <zlib.h>
#include "data_util.h"

/* ======================================================================
 * IDX
 * ====================================================================== */
static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
/* n images of r x c pixels (pixel = (i * 7 + k * 3) % 256) and n labels
 * (i % 10); gz: written with zlib. */
static void write_idx(const char *img, const char *lab, int n, int r, int c, int nlabels, int gz) {
  size_t ni = 16 + (size_t)n * r * c, nl = 8 + (size_t)nlabels;
  uint8_t *bi = malloc(ni), *bl = malloc(nl);
  put_be32(bi, 0x803);
  put_be32(bi + 4, (uint32_t)n);
  put_be32(bi + 8, (uint32_t)r);
  put_be32(bi + 12, (uint32_t)c);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < r * c; k++) bi[16 + (size_t)i * r * c + k] = (uint8_t)((i * 7 + k * 3) % 256);
  put_be32(bl, 0x801);
  put_be32(bl + 4, (uint32_t)nlabels);
  for (int i = 0; i < nlabels; i++) bl[8 + i] = (uint8_t)(i % 10);
  if (gz) {
    gzFile f = gzopen(img, "wb");
    cr_assert_eq(gzwrite(f, bi, (unsigned)ni), (int)ni);
    gzclose(f);
    f = gzopen(lab, "wb");
    cr_assert_eq(gzwrite(f, bl, (unsigned)nl), (int)nl);
    gzclose(f);
  } else {
    tu_write_file(img, bi, ni);
    tu_write_file(lab, bl, nl);
  }
  free(bi);
  free(bl);
}

Test(idx, synthetic_raw_and_gzipped) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *img = path_in(dir, "img"), *lab = path_in(dir, "lab"), *imgz = path_in(dir, "img.gz"),
       *labz = path_in(dir, "lab.gz");
  write_idx(img, lab, 5, 2, 3, 5, 0);
  write_idx(imgz, labz, 5, 2, 3, 5, 1);
  for (int gz = 0; gz < 2; gz++) {
    const char *ip = gz ? imgz : img, *lp = gz ? labz : lab;
    loom_dataset *ds = chk(loom_dataset_idx(ip, lp, NULL, st), st);
    cr_assert_eq(loom_dataset_num_components(ds), 2);
    cr_assert_str_eq(loom_dataset_component_name(ds, 0), "image");
    cr_assert_str_eq(loom_dataset_component_name(ds, 1), "label");
    cr_assert_eq(loom_dataset_label_index(ds), 1);
    cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_I32);
    int64_t d[8];
    cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 1);
    cr_assert_eq(d[0], 6);
    loom_tensor *v[2] = {NULL, NULL};
    for (int i = 0; i < 5; i++) {
      next_ok(ds, v, st);
      for (int k = 0; k < 6; k++) cr_assert_eq(F(v[0])[k], (float)((i * 7 + k * 3) % 256) / 255.0f);
      cr_assert_eq(I(v[1])[0], i % 10);
    }
    expect_end(ds, v, st);
    free_vals(v, 2);
    loom_dataset_free(ds);
    /* unflattened, unscaled, limited, batched */
    loom_idx_options o = loom_idx_options_default();
    cr_assert_eq(o.flatten, 1);
    cr_assert_eq(o.scale, 1);
    cr_assert_eq(o.limit, 0);
    o.flatten = 0;
    o.scale = 0;
    o.limit = 3;
    ds = chk(loom_dataset_batch(chk(loom_dataset_idx(ip, lp, &o, st), st), 2, 0, st), st);
    cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 3);
    cr_assert_eq(d[1], 2);
    cr_assert_eq(d[2], 3);
    next_ok(ds, v, st);
    int64_t w[3] = {2, 2, 3};
    expect_shape(v[0], 3, w);
    for (int k = 0; k < 6; k++) cr_assert_eq(F(v[0])[6 + k], (float)((7 + k * 3) % 256));
    next_ok(ds, v, st);
    cr_assert_eq(loom_tensor_dim(v[0], 0), 1);
    cr_assert_eq(I(v[1])[0], 2);
    expect_end(ds, v, st);
    free_vals(v, 2);
    loom_dataset_free(ds);
  }
  /* images only */
  loom_dataset *ds = chk(loom_dataset_idx(imgz, NULL, NULL, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 1);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(img), free(lab), free(imgz), free(labz);
  loom_status_free(st);
}

Test(idx, malformed_files) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *img = path_in(dir, "img"), *lab = path_in(dir, "lab"), *lab4 = path_in(dir, "lab4"), *img4 = path_in(dir, "i4");
  write_idx(img, lab, 5, 2, 3, 5, 0);
  write_idx(img4, lab4, 1, 1, 1, 4, 0);
  /* labels given as images: bad magic */
  cr_assert_null(loom_dataset_idx(lab, lab, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, lab, "0x00000801", NULL);
  /* garbage magic */
  char *junk = path_in(dir, "junk");
  tu_write_file(junk, "hello world, not idx", 20);
  cr_assert_null(loom_dataset_idx(junk, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, junk, "bad magic", NULL);
  /* count mismatch */
  cr_assert_null(loom_dataset_idx(img, lab4, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "5 images but 4 labels", img, lab4);
  /* truncated data, truncated header, empty file */
  size_t n;
  uint8_t *b = tu_read_file(img, &n);
  char *tr = path_in(dir, "trunc");
  tu_write_file(tr, b, n - 1);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", NULL);
  tu_write_file(tr, b, 10);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", "dimensions");
  tu_write_file(tr, b, 0);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", NULL);
  /* a truncated gzip stream */
  char *gzp = path_in(dir, "img.gz");
  gzFile f = gzopen(gzp, "wb");
  gzwrite(f, b, (unsigned)n);
  gzclose(f);
  free(b);
  b = tu_read_file(gzp, &n);
  tu_write_file(gzp, b, n / 2);
  cr_assert_null(loom_dataset_idx(gzp, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, gzp, NULL, NULL);
  free(b);
  /* missing file */
  char *none = path_in(dir, "nope");
  cr_assert_null(loom_dataset_idx(none, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  cr_assert_null(loom_dataset_idx(img, none, NULL, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  cr_assert_null(loom_dataset_idx(NULL, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "images_path", NULL, NULL);
  tu_rmtree(dir);
  free(img), free(lab), free(lab4), free(img4), free(junk), free(tr), free(gzp), free(none);
  loom_status_free(st);
}

#define FMNIST "/usr/share/datasets/fashion-mnist/"
Test(idx, fashion_mnist_t10k) {
  const char *ip = FMNIST "t10k-images-idx3-ubyte.gz", *lp = FMNIST "t10k-labels-idx1-ubyte.gz";
  if (access(ip, R_OK) || access(lp, R_OK)) cr_skip_test("Fashion-MNIST not installed");
  /* independent read with zlib: header and the first label / image */
  uint8_t lh[8 + 16], ih[16 + 784];
  gzFile f = gzopen(lp, "rb");
  cr_assert_eq(gzread(f, lh, sizeof lh), (int)sizeof lh);
  gzclose(f);
  f = gzopen(ip, "rb");
  cr_assert_eq(gzread(f, ih, sizeof ih), (int)sizeof ih);
  gzclose(f);
  cr_assert_eq(lh[2], 0x08);
  cr_assert_eq(lh[3], 0x01);
  cr_assert_eq((lh[4] << 24 | lh[5] << 16 | lh[6] << 8 | lh[7]), 10000);
  cr_assert_eq(ih[11], 28);
  cr_assert_eq(ih[15], 28);
  loom_status *st = loom_status_new();
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_idx(ip, lp, NULL, st), st), 1000, 0, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  int batches = 0;
  long hist[10] = {0};
  while (loom_dataset_next(ds, v, st) == LOOM_OK) {
    int64_t w[2] = {1000, 784};
    expect_shape(v[0], 2, w);
    if (batches == 0) {
      for (int i = 0; i < 16; i++) cr_assert_eq(I(v[1])[i], lh[8 + i], "label %d", i);
      for (int k = 0; k < 784; k++) cr_assert_eq(F(v[0])[k], (float)ih[16 + k] / 255.0f, "pixel %d", k);
    }
    for (int i = 0; i < 1000; i++) {
      int y = I(v[1])[i];
      cr_assert(y >= 0 && y < 10);
      hist[y]++;
    }
    const float *x = F(v[0]);
    for (int k = 0; k < 1000 * 784; k += 997) cr_assert(x[k] >= 0.0f && x[k] <= 1.0f);
    batches++;
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE);
  cr_assert_eq(batches, 10);
  for (int c = 0; c < 10; c++) cr_assert_eq(hist[c], 1000, "class %d: %ld", c, hist[c]); /* balanced test set */
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
}
