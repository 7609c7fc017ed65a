/* CSV datasets (loom_data.h): RFC 4180 quoting, defaults, column
 * selection, CRLF, errors naming file and line. */
#include "data_util.h"

/* ======================================================================
 * CSV
 * ====================================================================== */
Test(csv, quoting_defaults_selection_crlf) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "a.csv");
  const char *text =
      "f,i,s,skip,d\r\n"
      "1.5,7,plain,x,2.25\r\n"
      "-2,,\"with,comma\",y,\n"
      "3e2, 9 ,\"say \"\"hi\"\"\",z,-1\n"
      "\n"
      "0.25,-4,\"two\nlines\",\"q,\"\"\",8\n"
      ",5,,w,1";
  tu_write_file(p, text, strlen(text));
  loom_csv_column cols[5] = {
      {NULL, LOOM_F32, "-1", 1, 0},
      {NULL, LOOM_I64, "42", 1, 0},
      {NULL, LOOM_STRING, "none", 1, 0},
      {NULL, LOOM_STRING, NULL, 0, 0},
      {"target", LOOM_F64, "0.5", 1, 0},
  };
  loom_csv_options o = {sizeof(loom_csv_options), LOOM_CSV_HEADER_SKIP, ',', 5, cols, "target"}; /* renames the header's d */
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 4);
  cr_assert_str_eq(loom_dataset_component_name(ds, 0), "f");
  cr_assert_str_eq(loom_dataset_component_name(ds, 1), "i");
  cr_assert_str_eq(loom_dataset_component_name(ds, 2), "s");
  cr_assert_str_eq(loom_dataset_component_name(ds, 3), "target");
  cr_assert_eq(loom_dataset_label_index(ds), 3);
  cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_I64);
  cr_assert_eq(loom_dataset_component_dtype(ds, 3), LOOM_F64);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 0);
  const float wf[5] = {1.5f, -2.0f, 300.0f, 0.25f, -1.0f};
  const int64_t wi[5] = {7, 42, 9, -4, 5};
  const char *ws[5] = {"plain", "with,comma", "say \"hi\"", "two\nlines", "none"};
  const double wd[5] = {2.25, 0.5, -1.0, 8.0, 1.0};
  loom_tensor *v[4] = {NULL};
  for (int pass = 0; pass < 2; pass++) {
    for (int r = 0; r < 5; r++) {
      next_ok(ds, v, st);
      cr_assert_eq(loom_tensor_ndim(v[0]), 0);
      cr_assert_eq(F(v[0])[0], wf[r], "row %d f", r);
      cr_assert_eq(L(v[1])[0], wi[r], "row %d i", r);
      cr_assert_str_eq(loom_tensor_get_string(v[2], 0, NULL), ws[r], "row %d s", r);
      cr_assert_eq(((const double *)loom_tensor_data_const(v[3]))[0], wd[r], "row %d d", r);
    }
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 4);
  loom_dataset_free(ds);
  /* batched, and two files (each with its header); no header + explicit names */
  char *p2 = path_in(dir, "b.csv");
  tu_write_file(p2, "f,i,s,skip,d\n9,1,a,b,2\n", 23);
  const char *two[2] = {p, p2};
  ds = chk(loom_dataset_batch(chk(loom_dataset_csv(2, two, &o, st), st), 4, 0, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 4);
  cr_assert_str_eq(loom_tensor_get_string(v[2], 1, NULL), "with,comma");
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 2);
  cr_assert_eq(F(v[0])[1], 9.0f);
  cr_assert_eq(L(v[1])[1], 1);
  expect_end(ds, v, st);
  free_vals(v, 4);
  loom_dataset_free(ds);
  char *p3 = path_in(dir, "c.csv");
  tu_write_file(p3, "1;2\n3;4\n", 8);
  loom_csv_column c2[2] = {{"a", LOOM_I32, NULL, 1, 0}, {"b", LOOM_F32, NULL, 1, 0}};
  loom_csv_options o2 = {sizeof(loom_csv_options), 0, ';', 2, c2, NULL};
  const char *one[1] = {p3};
  ds = chk(loom_dataset_csv(1, one, &o2, st), st);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[0])[0], 1);
  cr_assert_eq(F(v[1])[0], 2.0f);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[0])[0], 3);
  expect_end(ds, v, st);
  free_vals(v, 4);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p), free(p2), free(p3);
  loom_status_free(st);
}

/* Builds a dataset over text with 3 columns a:int32, b:float32, c:string
 * (no defaults) and returns the code of the first failing next (or OK). */
static loom_code csv_run(const char *dir, const char *text, loom_status *st, char **path_out) {
  char *p = path_in(dir, "bad.csv");
  tu_write_file(p, text, strlen(text));
  loom_csv_column cols[3] = {{"a", LOOM_I32, NULL, 1, 0}, {"b", LOOM_F32, NULL, 1, 0}, {"c", LOOM_STRING, NULL, 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 0, ',', 3, cols, NULL};
  const char *paths[1] = {p};
  *path_out = p;
  loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
  if (!ds) return loom_status_code(st);
  loom_tensor *v[3] = {NULL};
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
  }
  free_vals(v, 3);
  loom_dataset_free(ds);
  return rc == LOOM_OUT_OF_RANGE ? LOOM_OK : rc;
}

Test(csv, errors_name_file_and_line) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p, want[512];
  cr_assert_eq(csv_run(dir, "1,2,x\n3,4,y\n", st, &p), LOOM_OK);
  free(p);
  loom_code rc = csv_run(dir, "1,2,x\n3,4\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "expected 3 fields, found 2", NULL);
  free(p);
  rc = csv_run(dir, "1,2,x\n\"multi\nline\",2,3\n5,6,7,8\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p); /* the quoted field fails to parse as int32 on record line 2 */
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "'a'", "int32");
  free(p);
  rc = csv_run(dir, "1,2,x\n\"1\",\"2\",\"a\nb\"\n5,6,7,8\n", st, &p);
  snprintf(want, sizeof want, "%s:4:", p); /* line numbers count the newline inside quotes */
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "found 4", NULL);
  free(p);
  rc = csv_run(dir, "1,2,x\n1,abc,x\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "column 'b'", "'abc'");
  free(p);
  rc = csv_run(dir, "1,2,x\n\n\n7x,2,x\n", st, &p);
  snprintf(want, sizeof want, "%s:4:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "column 'a'", "'7x'");
  free(p);
  rc = csv_run(dir, "99999999999,2,x\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "int32", NULL);
  free(p);
  rc = csv_run(dir, "1,,x\n", st, &p);
  snprintf(want, sizeof want, "%s:1:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "'b' is empty", "no default");
  free(p);
  rc = csv_run(dir, "1,2,\"open\n3,4,5\n", st, &p);
  snprintf(want, sizeof want, "%s:1:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "unterminated", NULL);
  free(p);
  rc = csv_run(dir, "1,2,\"ab\"c\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "after the closing quote", NULL);
  free(p);
  rc = csv_run(dir, "1,2,a\"b\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "quote inside an unquoted field", NULL);
  free(p);
  /* the error is sticky until reset */
  char *q = path_in(dir, "s.csv");
  tu_write_file(q, "1,2,x\nbad\n3,4,z\n", 16);
  loom_csv_column cols[3] = {{"a", LOOM_I32, NULL, 1, 0}, {"b", LOOM_F32, NULL, 1, 0}, {"c", LOOM_STRING, NULL, 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 0, ',', 3, cols, NULL};
  const char *paths[1] = {q};
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, st), st);
  loom_tensor *v[3] = {NULL};
  next_ok(ds, v, st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, ":2:", NULL, NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, ":2:", NULL, NULL);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  next_ok(ds, v, st);
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* construction errors */
  o.label_name = "zzz";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "label_name", "'zzz'", NULL);
  o.label_name = NULL;
  cols[1].dtype = LOOM_BOOL;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[1]", "bool", NULL);
  cols[1].dtype = LOOM_F32;
  cols[1].default_value = "nan?";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "default_value", "'nan?'", NULL);
  cols[1].default_value = NULL;
  cols[0].name = NULL;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[0]", "header", NULL);
  cols[0].name = "a";
  cols[2].name = "a";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'a'", NULL, NULL);
  cols[2].name = "c";
  o.header = 1; /* header "1,2,x" has 3 fields: fine; a 2-column description is not */
  o.ncolumns = 2;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, ":1:", "header has 3 columns", NULL);
  char *none = path_in(dir, "missing.csv");
  const char *np[1] = {none};
  o.ncolumns = 3;
  cr_assert_null(loom_dataset_csv(1, np, &o, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  tu_rmtree(dir);
  free(q), free(none);
  loom_status_free(st);
}

/* header = 1 checks the header against the names given: swapped or misspelled names are INVALID_ARGUMENT
 * naming the file, line 1, the header's name and the expected one (at construction, and for a later file
 * when it is opened); an empty header field and an unselected column are not checked; LOOM_CSV_HEADER_SKIP
 * reads the same file unchecked. */
Test(csv, header_checked_against_the_names) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hdr");
  char *good = path_in(dir, "good.csv"), *swap = path_in(dir, "swap.csv"), *typo = path_in(dir, "typo.csv");
  tu_write_file(good, ",x,y,note\n1,2,3,a\n", 18);
  tu_write_file(swap, "id,y,x,note\n4,5,6,b\n", 20);
  tu_write_file(typo, "id,x,yy,remark\n7,8,9,c\n", 23);
  loom_csv_column cols[4] = {{"id", LOOM_I64, NULL, 1, 0}, {"x", LOOM_F32, NULL, 1, 0}, {"y", LOOM_F32, NULL, 1, 0},
                             {"comment", LOOM_STRING, NULL, 0, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 4, cols, "y"};
  const char *p1[1] = {good};
  loom_dataset *ds = chk(loom_dataset_csv(1, p1, &o, st), st); /* "" names nothing; "note" is not selected */
  loom_dataset_free(ds);
  const char *p2[1] = {swap};
  cr_assert_null(loom_dataset_csv(1, p2, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "swap.csv:1: the header names column 2 'y'",
             "but columns[1] is 'x'", NULL);
  const char *p3[1] = {typo};
  cr_assert_null(loom_dataset_csv(1, p3, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "typo.csv:1: the header names column 3 'yy'",
             "but columns[2] is 'y'", NULL);
  /* columns named by the first file's header ("x", "y"): a later file is checked against them when it is
     opened (the row of good.csv, then the error) */
  const char *p4[2] = {good, swap};
  cols[1].name = cols[2].name = NULL;
  ds = chk(loom_dataset_csv(2, p4, &o, st), st);
  loom_tensor *v[3] = {NULL};
  next_ok(ds, v, st);
  cr_assert_eq(F(v[1])[0], 2.0f);
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "swap.csv:1: the header names column 2 'y'",
             "but columns[1] is 'x'", NULL);
  free_vals(v, 3);
  loom_dataset_free(ds);
  cols[1].name = "x";
  cols[2].name = "y";
  /* unchecked */
  o.header = LOOM_CSV_HEADER_SKIP;
  ds = chk(loom_dataset_csv(1, p2, &o, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(F(v[1])[0], 5.0f, "column x is the file's second column, whatever its header says");
  free_vals(v, 3);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(good), free(swap), free(typo);
}

/* ======================================================================
 * loom_csv_read_tensors: a whole file, one tensor per column
 * ====================================================================== */
Test(csv, read_tensors_one_tensor_per_column) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "t.csv");
  const char *text = "price,n,name,skip,tags\n"
                     "1.5,7,\"a,b\",x,1|2\n"
                     ",-3,plain,y,\n"
                     "2e3,9,\"q\"\"\",z,4|5|6\n";
  tu_write_file(p, text, strlen(text));
  loom_csv_column cols[5] = {{NULL, LOOM_F32, "-1", 1, 0},
                             {NULL, LOOM_I64, NULL, 1, 0},
                             {NULL, LOOM_STRING, NULL, 1, 0},
                             {NULL, LOOM_STRING, NULL, 0, 0},
                             {NULL, LOOM_I32, NULL, 1, '|'}};
  loom_csv_options o = loom_csv_options_default();
  o.ncolumns = 5;
  o.columns = cols;
  o.label_name = "price"; /* ignored: the label is one of the tensors */
  int n = -1;
  char **names = NULL;
  loom_tensor **t = NULL;
  cr_assert_eq(loom_csv_read_tensors(p, &o, &n, &names, &t, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(n, 5);
  const char *want_names[5] = {"price", "n", "name", "tags", "tags/row_splits"};
  for (int i = 0; i < 5; i++) cr_assert_str_eq(names[i], want_names[i]);
  int64_t three = 3, four = 4, five = 5;
  expect_shape(t[0], 1, &three);
  cr_assert_eq(loom_tensor_dtype(t[0]), LOOM_F32);
  cr_assert_eq(F(t[0])[0], 1.5f);
  cr_assert_eq(F(t[0])[1], -1.0f);
  cr_assert_eq(F(t[0])[2], 2000.0f);
  expect_shape(t[1], 1, &three);
  cr_assert_eq(loom_tensor_dtype(t[1]), LOOM_I64);
  cr_assert_eq(L(t[1])[1], -3);
  cr_assert_eq(L(t[1])[2], 9);
  expect_shape(t[2], 1, &three);
  cr_assert_str_eq(loom_tensor_get_string(t[2], 0, NULL), "a,b");
  cr_assert_str_eq(loom_tensor_get_string(t[2], 2, NULL), "q\"");
  expect_shape(t[3], 1, &five);
  cr_assert_eq(loom_tensor_dtype(t[3]), LOOM_I32);
  static const int32_t want_tags[5] = {1, 2, 4, 5, 6};
  for (int i = 0; i < 5; i++) cr_assert_eq(I(t[3])[i], want_tags[i]);
  expect_shape(t[4], 1, &four);
  static const int64_t want_splits[4] = {0, 2, 2, 5};
  for (int i = 0; i < 4; i++) cr_assert_eq(L(t[4])[i], want_splits[i]);
  loom_csv_tensors_free(n, names, t);

  /* a header alone: tensors of 0 rows */
  tu_write_file(p, "price,n,name,skip,tags\n", 23);
  cr_assert_eq(loom_csv_read_tensors(p, &o, &n, &names, &t, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t zero = 0, one = 1;
  expect_shape(t[0], 1, &zero);
  expect_shape(t[4], 1, &one);
  loom_csv_tensors_free(n, names, t);

  /* errors name the file, the line and the column; outputs stay empty */
  const char *bad = "price,n,name,skip,tags\n1,2,a,b,3\n4,oops,c,d,5\n";
  tu_write_file(p, bad, strlen(bad));
  n = 9;
  cr_assert_neq(loom_csv_read_tensors(p, &o, &n, &names, &t, st), LOOM_OK);
  char where[600];
  snprintf(where, sizeof where, "%s:3: column 'n'", p);
  cr_assert(strstr(loom_status_message(st), where), "%s", loom_status_message(st));
  cr_assert(n == 0 && names == NULL && t == NULL);
  char *missing = path_in(dir, "missing.csv");
  cr_assert_neq(loom_csv_read_tensors(missing, &o, &n, &names, &t, st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), missing), "%s", loom_status_message(st));
  free(missing);
  free(p);
  tu_rmtree(dir);
  loom_status_free(st);
}
