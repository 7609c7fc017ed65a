/* loom_cli.c - `loom`, the command line for people who do not write C:
 *
 *   loom train|evaluate|predict|export JOB.json [flags]    (loom <command> --help lists them)
 *   loom --help | --version
 *
 * A JSON job file names the data (CSV, TFRecord or IDX), the feature columns
 * (loom_feature_columns.h, with statistics from the analyzer where asked:
 * z-score normalizers, quantile boundaries, vocabularies), a canned model
 * (loom_canned.h) with its options, the RunConfig and the train / eval /
 * predict / export settings. See docs/cli.md and
 * examples/jobs/. Progress goes to stderr, results (metrics as key=value,
 * the export directory) to stdout. Exit codes: 0 done, 1 a runtime error
 * (data, training...), 2 a job-file or command-line error (the message names
 * the key). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "job_json.h"
#include "loom/loom.h"
#include "loom/loom_canned.h"
#include "loom/loom_feature_columns.h"

/* ---------------------------------------------------------------- errors */
static void die(const char *what, const loom_status *st) __attribute__((noreturn));
static void die(const char *what, const loom_status *st) {
  fprintf(stderr, "loom: %s: %s\n", what, st ? loom_status_message(st) : "failed");
  exit(JOB_EXIT_RUNTIME);
}
static void die_msg(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("loom: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(JOB_EXIT_RUNTIME);
}
/* ---------------------------------------------------------------- the command line */
enum { CMD_TRAIN, CMD_EVALUATE, CMD_PREDICT, CMD_EXPORT, NCMD };
static const char *const COMMANDS[NCMD + 1] = {"train", "evaluate", "predict", "export", NULL};
static const char *const COMMAND_HELP[NCMD] = {
    "trains the model of JOB.json, then evaluates it when the job has eval data",
    "evaluates the latest checkpoint; prints the metrics as key=value",
    "reads predict.input (or --input), writes one CSV row per example (or --output)",
    ("writes the servable to <model_dir>/export/<timestamp>/ (export.serving_input \"parsing\": "
     "classify/regress on serialized tf.Example, as TF's canned exports); --format onnx also writes an ONNX model")};
#define FOR_ALL ((1u << NCMD) - 1)
#define FOR(c) (1u << (c))

/* Every flag: the parser reads this table and the help is printed from it. */
typedef struct cli_flag {
  const char *name, *alias; /* "--quiet", "-q" */
  const char *arg;          /* the value's placeholder; NULL = a switch */
  unsigned cmds;            /* FOR(CMD_...) bits of the commands that take it */
  const char *help;
} cli_flag;
enum { F_MODEL_DIR, F_STEPS, F_DATA, F_INPUT, F_OUTPUT, F_FORMAT, F_SIGNATURE, F_ALLOW_RANDOM, F_QUIET, F_HELP, NFLAG };
static const cli_flag FLAGS[NFLAG] = {
    {"--model-dir", NULL, "DIR", FOR_ALL, "the model directory (instead of run_config.model_dir)"},
    {"--steps", NULL, "N", FOR(CMD_TRAIN), "train N steps (instead of train.steps)"},
    {"--data", NULL, "PATH", FOR_ALL, "the training data file (instead of data.train)"},
    {"--input", NULL, "PATH", FOR(CMD_PREDICT), "the examples to predict (instead of predict.input)"},
    {"--output", NULL, "PATH", FOR(CMD_PREDICT) | FOR(CMD_EXPORT),
     "predict: the CSV written (instead of predict.output; - = stdout); export: the ONNX file of the onnx "
     "format (default <export dir>/model.onnx)"},
    {"--format", NULL, "FMT", FOR(CMD_EXPORT), "saved_model (default) or onnx (the export directory and an ONNX model)"},
    {"--signature", NULL, "NAME", FOR(CMD_EXPORT),
     "--format onnx: the signature written (default: predict, else serving_default)"},
    {"--allow-random-weights", NULL, NULL, FOR(CMD_EVALUATE) | FOR(CMD_PREDICT),
     "run without a checkpoint on the initial weights (otherwise a missing checkpoint is an error)"},
    {"--quiet", "-q", NULL, FOR_ALL, "no progress lines on stderr (warnings and errors still go there)"},
    {"--help", "-h", NULL, FOR_ALL, "this help"},
};

/* The usage line of a command (cmd < 0: every command), then its flags with their help (when full). */
static void print_usage(FILE *f, int cmd, int full) {
  int col = fprintf(f, "usage: loom %s JOB.json", cmd < 0 ? "train|evaluate|predict|export" : COMMANDS[cmd]);
  for (int i = 0; i < NFLAG; i++) {
    if (cmd >= 0 && !(FLAGS[i].cmds & FOR(cmd))) continue;
    char item[64];
    int n = snprintf(item, sizeof item, "[%s%s%s]", FLAGS[i].name, FLAGS[i].arg ? " " : "", FLAGS[i].arg ? FLAGS[i].arg : "");
    if (col + 1 + n > 100) col = fprintf(f, "\n           ") - 1;
    col += fprintf(f, " %s", item);
  }
  fputc('\n', f);
  if (cmd < 0) fputs("       loom info | loom --version   (the version, CPU features, kernel clones, BLAS, threads)\n       loom <command> --help\n", f);
  if (!full) return;
  if (cmd < 0) {
    fputs("commands:\n", f);
    for (int c = 0; c < NCMD; c++) fprintf(f, "  %-9s %s\n", COMMANDS[c], COMMAND_HELP[c]);
  } else {
    fprintf(f, "%s\n", COMMAND_HELP[cmd]);
  }
  fputs("flags:\n", f);
  for (int i = 0; i < NFLAG; i++) {
    if (cmd >= 0 && !(FLAGS[i].cmds & FOR(cmd))) continue;
    char head[64];
    snprintf(head, sizeof head, "%s%s%s%s%s", FLAGS[i].alias ? FLAGS[i].alias : "", FLAGS[i].alias ? ", " : "",
             FLAGS[i].name, FLAGS[i].arg ? " " : "", FLAGS[i].arg ? FLAGS[i].arg : "");
    fprintf(f, "  %-26s %s", head, FLAGS[i].help);
    if (cmd < 0 && FLAGS[i].cmds != FOR_ALL) {
      fputs(" (", f);
      for (int c = 0, k = 0; c < NCMD; c++)
        if (FLAGS[i].cmds & FOR(c)) fprintf(f, "%s%s", k++ ? ", " : "", COMMANDS[c]);
      fputc(')', f);
    }
    fputc('\n', f);
  }
  fputs("Exit codes: 0 done, 1 runtime error, 2 job-file or command-line error.\n", f);
}

static int usage_cmd = -1;
static void usage_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("loom: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  print_usage(stderr, usage_cmd, 0);
  exit(JOB_EXIT_JOB);
}

/* `loom --version`. */

static int quiet;
/* "[loom] ..." progress on stderr (not with --quiet). */
static void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void info(const char *fmt, ...) {
  if (quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("[loom] ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static char *xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) die_msg("out of memory");
  return d;
}

/* ---------------------------------------------------------------- the job */
enum { FMT_CSV, FMT_TFRECORD, FMT_IDX };
static const char *const FORMATS[] = {"csv", "tfrecord", "idx", NULL};
static const char *const DTYPE_NAMES[] = {"float32", "float64", "int32", "int64", "string", NULL};
static const loom_dtype DTYPES[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_STRING};

typedef struct mat_comp { /* one materialized component: rows x (elem elements) */
  char *name;
  loom_dtype dt;
  int ndim; /* element rank (without the batch dim) */
  int64_t dims[LOOM_MAX_DIMS];
  int64_t elem;     /* elements per row */
  char *bytes;      /* numeric rows */
  char **strs;      /* string elements */
  int64_t rows, cap;
} mat_comp;

typedef struct job {
  char dir[4096]; /* the job file's directory: relative paths are resolved against it */
  cJSON *root;
  /* data */
  int fmt;
  int ntrain, neval;
  char **train, **eval;
  double eval_fraction;
  uint64_t split_seed;
  int header;
  char delimiter;
  int ncols;
  loom_csv_column *cols;
  const char *label;
  int nspec;
  loom_feature_spec *spec;
  char *idx_train_images, *idx_train_labels, *idx_eval_images, *idx_eval_labels;
  loom_idx_options idx;
  /* the train data's components (features + label) */
  int ncomp;
  char **comp_names;
  loom_dtype *comp_dt;
  int *comp_ndim;
  int64_t (*comp_dims)[LOOM_MAX_DIMS];
  int *comp_splits; /* row_splits component of a ragged one, else -1 */
  int *comp_is_splits;
  /* split */
  int split;
  int nmat;
  mat_comp *mat;
  int64_t *perm;
  int64_t ntrain_rows, neval_rows;
  /* train / eval / predict settings */
  int64_t batch_size, steps, epochs, shuffle_buffer;
  int shuffle;
  uint64_t shuffle_seed;
  int64_t eval_batch_size, eval_steps;
  const char *eval_name;
  /* predict input (csv columns without the label, etc.) */
  const char *predict_input;
  int predict_drop_label;
  int64_t predict_batch;
  /* export: 1 = TF's parsing serving input receiver over the model's columns */
  int serving_parsing;
  int nmodel_cols;
  const loom_fc **model_cols;
  /* run config */
  char *model_dir;
  loom_run_config config;
  /* columns */
  loom_fc_set *set;
  int nfc;
  loom_fc **fcs;
  const char **fc_refs;
  int *fc_used;
  loom_fc_analyzer *an;
  loom_estimator *est;
  /* a classifier's labels (for naming a bad one by file and line) */
  int classifier;
  int64_t n_classes;
  int nlabel_vocab;
  const char **label_vocab;
} job;

/* The CSV reader's options for the job's data (ncols columns described by cols; label or NULL). */
static loom_csv_options csv_options(const job *j, int ncols, const loom_csv_column *cols, const char *label) {
  loom_csv_options o = loom_csv_options_default();
  o.header = j->header;
  o.delimiter = j->delimiter;
  o.ncolumns = ncols;
  o.columns = cols;
  o.label_name = label;
  return o;
}

static char *resolve(const job *j, const char *p) {
  if (!p) return NULL;
  if (p[0] == '/' || !strcmp(j->dir, ".") || !*j->dir) return xstrdup(p);
  size_t n = strlen(j->dir) + strlen(p) + 2;
  char *s = malloc(n);
  if (!s) die_msg("out of memory");
  snprintf(s, n, "%s/%s", j->dir, p);
  return s;
}

static void check_readable(const char *path, const char *file) {
  FILE *f = fopen(file, "rb");
  if (!f) job_fail(path, "cannot open '%s': %s", file, strerror(errno));
  fclose(f);
}

static int mkdirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      *p = '/';
    }
  if (mkdir(buf, 0777) && errno != EEXIST) return -1;
  return 0;
}

/* ---------------------------------------------------------------- data section */
static void parse_paths(job *j, const cJSON *d, const char *path, const char *key, char ***out, int *n,
                        int required) {
  const char **l = j_string_list(d, path, key, n, required);
  *out = *n ? calloc((size_t)*n, sizeof **out) : NULL;
  for (int i = 0; i < *n; i++) {
    (*out)[i] = resolve(j, l[i]);
    check_readable(cJSON_IsArray(j_get(d, key)) ? jp_idx(jp_key(path, key), i) : jp_key(path, key), (*out)[i]);
  }
  free(l);
}

static void parse_idx_part(job *j, const cJSON *d, const char *key, char **images, char **labels, int required) {
  const cJSON *o = j_object(d, "data", key, required);
  if (!o) return;
  const char *p = jp_key("data", key);
  static const char *const keys[] = {"images", "labels", NULL};
  j_keys(o, p, keys);
  *images = resolve(j, j_string(o, p, "images", NULL, 1));
  check_readable(jp_key(p, "images"), *images);
  const char *l = j_string(o, p, "labels", NULL, 0);
  if (l) {
    *labels = resolve(j, l);
    check_readable(jp_key(p, "labels"), *labels);
  }
}

static void parse_data(job *j, const char *data_override) {
  const cJSON *d = j_object(j->root, "", "data", 1);
  j->fmt = j_enum(d, "data", "format", FORMATS, FMT_CSV);
  static const char *const csv_keys[] = {"format", "train", "eval", "eval_fraction", "split_seed", "header",
                                         "delimiter", "columns", "label", NULL};
  static const char *const tfr_keys[] = {"format", "train", "eval", "eval_fraction", "split_seed", "features",
                                         "label", NULL};
  static const char *const idx_keys[] = {"format", "train", "eval", "flatten", "scale", "limit", NULL};
  j_keys(d, "data", j->fmt == FMT_CSV ? csv_keys : j->fmt == FMT_TFRECORD ? tfr_keys : idx_keys);
  if (j->fmt == FMT_IDX) {
    if (data_override) usage_fail("--data: not available for IDX data (give data.train.images instead)");
    parse_idx_part(j, d, "train", &j->idx_train_images, &j->idx_train_labels, 1);
    if (!j->idx_train_labels) job_fail("data.train.labels", "missing (training needs labels)");
    parse_idx_part(j, d, "eval", &j->idx_eval_images, &j->idx_eval_labels, 0);
    if (j->idx_eval_images && !j->idx_eval_labels) job_fail("data.eval.labels", "missing (evaluation needs labels)");
    j->idx = loom_idx_options_default();
    j->idx.flatten = j_bool(d, "data", "flatten", 1);
    j->idx.scale = j_bool(d, "data", "scale", 1);
    j->idx.limit = j_int(d, "data", "limit", 0, 0, INT64_MAX);
    j->label = "label";
    return;
  }
  if (data_override) {
    j->ntrain = 1;
    j->train = calloc(1, sizeof *j->train);
    j->train[0] = xstrdup(data_override);
    FILE *f = fopen(data_override, "rb");
    if (!f) usage_fail("--data: cannot open '%s': %s", data_override, strerror(errno));
    fclose(f);
  } else {
    parse_paths(j, d, "data", "train", &j->train, &j->ntrain, 1);
  }
  parse_paths(j, d, "data", "eval", &j->eval, &j->neval, 0);
  j->eval_fraction = j_number(d, "data", "eval_fraction", 0, 0, 0.99);
  if (j->neval && j->eval_fraction > 0) job_fail("data.eval_fraction", "give either data.eval or data.eval_fraction, not both");
  j->split = j->eval_fraction > 0;
  j->split_seed = (uint64_t)j_int(d, "data", "split_seed", 12345, 0, INT64_MAX);
  j->label = j_string(d, "data", "label", NULL, 0);
  if (j->fmt == FMT_CSV) {
    /* true: the header names the columns (checked), "skip": a first line read unchecked, false: none */
    const cJSON *h = j_get(d, "header");
    if (cJSON_IsString(h) && !strcmp(h->valuestring, "skip"))
      j->header = LOOM_CSV_HEADER_SKIP;
    else if (cJSON_IsString(h))
      job_fail("data.header", "must be true, false or \"skip\", got \"%s\"", h->valuestring);
    else
      j->header = j_bool(d, "data", "header", 1);
    const char *delim = j_string(d, "data", "delimiter", ",", 0);
    if (strlen(delim) != 1) job_fail("data.delimiter", "must be one character, got '%s'", delim);
    j->delimiter = delim[0];
    const cJSON *cols = j_array(d, "data", "columns", 1);
    j->ncols = cJSON_GetArraySize(cols);
    if (j->ncols < 1) job_fail("data.columns", "must not be empty");
    j->cols = calloc((size_t)j->ncols, sizeof *j->cols);
    int i = 0;
    for (const cJSON *c = cols->child; c; c = c->next, i++) {
      const char *p = jp_idx("data.columns", i);
      loom_csv_column *col = &j->cols[i];
      if (cJSON_IsString(c)) { /* shorthand: a float32 column */
        col->name = c->valuestring;
        col->dtype = LOOM_F32;
        col->select = 1;
        continue;
      }
      if (!cJSON_IsObject(c)) job_fail(p, "must be an object ({\"name\": ..., \"type\": ...}) or a column name");
      static const char *const ck[] = {"name", "type", "default", "select", "separator", NULL};
      j_keys(c, p, ck);
      col->name = j_string(c, p, "name", NULL, 1);
      col->dtype = DTYPES[j_enum(c, p, "type", DTYPE_NAMES, 0)];
      const char *dv = j_scalar_text(c, p, "default");
      col->default_value = dv ? xstrdup(dv) : NULL;
      col->select = j_bool(c, p, "select", 1);
      const char *sep = j_string(c, p, "separator", NULL, 0);
      if (sep && strlen(sep) != 1) job_fail(jp_key(p, "separator"), "must be one character, got '%s'", sep);
      col->separator = sep ? sep[0] : 0;
      for (int k = 0; k < i; k++)
        if (!strcmp(j->cols[k].name, col->name)) job_fail(jp_key(p, "name"), "column '%s' given twice", col->name);
    }
    if (j->label) {
      int found = 0;
      for (int k = 0; k < j->ncols; k++) found |= !strcmp(j->cols[k].name, j->label) && j->cols[k].select;
      if (!found) job_fail("data.label", "no selected column named '%s' in data.columns", j->label);
    }
  } else {
    const cJSON *fs = j_array(d, "data", "features", 1);
    j->nspec = cJSON_GetArraySize(fs);
    if (j->nspec < 1) job_fail("data.features", "must not be empty");
    j->spec = calloc((size_t)j->nspec, sizeof *j->spec);
    int i = 0;
    static const char *const kinds[] = {"fixed", "varlen", NULL};
    static const char *const tf_types[] = {"float32", "int64", "string", NULL};
    static const loom_dtype tf_dt[] = {LOOM_F32, LOOM_I64, LOOM_STRING};
    for (const cJSON *c = fs->child; c; c = c->next, i++) {
      const char *p = jp_idx("data.features", i);
      if (!cJSON_IsObject(c)) job_fail(p, "must be an object ({\"name\": ..., \"type\": ...})");
      static const char *const fk[] = {"name", "type", "kind", "shape", "default", NULL};
      j_keys(c, p, fk);
      loom_feature_spec *s = &j->spec[i];
      s->name = j_string(c, p, "name", NULL, 1);
      s->dtype = tf_dt[j_enum(c, p, "type", tf_types, 0)];
      int kind = j_enum(c, p, "kind", kinds, 0);
      int nd = 0;
      int64_t *dims = j_pos_int_array(c, p, "shape", &nd, 0);
      if (nd > 6) job_fail(jp_key(p, "shape"), "at most 6 dimensions");
      s->ndim = nd;
      int64_t numel = 1;
      for (int k = 0; k < nd; k++) numel *= (s->dims[k] = dims[k]);
      free(dims);
      if (kind == 1) {
        s->kind = LOOM_FEATURE_VAR_LEN;
        s->ragged = 1;
        if (nd) job_fail(jp_key(p, "shape"), "a varlen feature has no shape");
        if (j_get(c, "default")) job_fail(jp_key(p, "default"), "a varlen feature has no default");
      }
      const cJSON *dv = j_get(c, "default");
      if (dv) {
        int n = cJSON_IsArray(dv) ? cJSON_GetArraySize(dv) : 1;
        if (n != numel) job_fail(jp_key(p, "default"), "must hold %lld value(s) (the shape's), got %d", (long long)numel, n);
        const cJSON *e = cJSON_IsArray(dv) ? dv->child : dv;
        if (s->dtype == LOOM_STRING) {
          const char **v = calloc((size_t)n, sizeof *v);
          for (int k = 0; k < n; k++, e = e->next) {
            if (!cJSON_IsString(e)) job_fail(jp_key(p, "default"), "must hold strings for a string feature");
            v[k] = e->valuestring;
          }
          s->default_value = v;
        } else if (s->dtype == LOOM_F32) {
          float *v = calloc((size_t)n, sizeof *v);
          for (int k = 0; k < n; k++, e = e->next) {
            if (!cJSON_IsNumber(e)) job_fail(jp_key(p, "default"), "must hold numbers for a float32 feature");
            v[k] = (float)e->valuedouble;
          }
          s->default_value = v;
        } else {
          int64_t *v = calloc((size_t)n, sizeof *v);
          for (int k = 0; k < n; k++, e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble))
              job_fail(jp_key(p, "default"), "must hold integers for an int64 feature");
            v[k] = (int64_t)e->valuedouble;
          }
          s->default_value = v;
        }
      }
      for (int k = 0; k < i; k++)
        if (!strcmp(j->spec[k].name, s->name)) job_fail(jp_key(p, "name"), "feature '%s' given twice", s->name);
    }
    if (j->label) {
      int found = 0;
      for (int k = 0; k < j->nspec; k++) found |= !strcmp(j->spec[k].name, j->label) && !j->spec[k].ragged;
      if (!found) job_fail("data.label", "no fixed-length feature named '%s' in data.features", j->label);
    }
  }
}

/* The source dataset (unbatched): which 0 = train files, 1 = eval files. */
static loom_dataset *open_source(const job *j, int which, int with_label, loom_status *st) {
  if (j->fmt == FMT_IDX) {
    const char *im = which ? j->idx_eval_images : j->idx_train_images;
    const char *lb = which ? j->idx_eval_labels : j->idx_train_labels;
    return loom_dataset_idx(im, with_label ? lb : NULL, &j->idx, st);
  }
  int n = which ? j->neval : j->ntrain;
  const char *const *paths = (const char *const *)(which ? j->eval : j->train);
  if (j->fmt == FMT_CSV) {
    loom_csv_options o = csv_options(j, j->ncols, j->cols, with_label ? j->label : NULL);
    return loom_dataset_csv(n, paths, &o, st);
  }
  return loom_dataset_tfrecord(n, paths, j->nspec, j->spec, with_label ? j->label : NULL, st);
}

static void read_components(job *j, const loom_dataset *ds) {
  int n = j->ncomp = loom_dataset_num_components(ds);
  j->comp_names = calloc((size_t)n, sizeof *j->comp_names);
  j->comp_dt = calloc((size_t)n, sizeof *j->comp_dt);
  j->comp_ndim = calloc((size_t)n, sizeof *j->comp_ndim);
  j->comp_dims = calloc((size_t)n, sizeof *j->comp_dims);
  j->comp_splits = calloc((size_t)n, sizeof *j->comp_splits);
  j->comp_is_splits = calloc((size_t)n, sizeof *j->comp_is_splits);
  for (int i = 0; i < n; i++) {
    j->comp_names[i] = xstrdup(loom_dataset_component_name(ds, i));
    j->comp_dt[i] = loom_dataset_component_dtype(ds, i);
    j->comp_ndim[i] = loom_dataset_component_shape(ds, i, j->comp_dims[i]);
    j->comp_splits[i] = loom_dataset_component_row_splits(ds, i);
  }
  for (int i = 0; i < n; i++)
    if (j->comp_splits[i] >= 0) j->comp_is_splits[j->comp_splits[i]] = 1;
}

/* A feature key of the data (not the label, not a row_splits part): its component, else -1. */
static int find_feature(const job *j, const char *key) {
  for (int i = 0; i < j->ncomp; i++)
    if (!j->comp_is_splits[i] && !strcmp(j->comp_names[i], key) && !(j->label && !strcmp(key, j->label))) return i;
  return -1;
}
static void fail_no_feature(const job *j, const char *path, const char *key) {
  char list[1024] = "";
  size_t len = 0;
  for (int i = 0; i < j->ncomp && len < sizeof list - 64; i++)
    if (!j->comp_is_splits[i] && !(j->label && !strcmp(j->comp_names[i], j->label)))
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", j->comp_names[i]);
  job_fail(path, "no feature '%s' in the data (features: %s)", key, list);
}

/* ---- the train/eval split: the train files read into memory, rows permuted ---- */
static void mat_append(mat_comp *m, const loom_tensor *t) {
  int64_t b = loom_tensor_ndim(t) ? loom_tensor_dim(t, 0) : 1;
  if (m->rows + b > m->cap) {
    int64_t nc = m->cap ? m->cap : 1024;
    while (nc < m->rows + b) nc *= 2;
    if (m->dt == LOOM_STRING)
      m->strs = realloc(m->strs, sizeof *m->strs * (size_t)(nc * m->elem));
    else
      m->bytes = realloc(m->bytes, loom_dtype_size(m->dt) * (size_t)(nc * m->elem));
    if (!m->strs && !m->bytes) die_msg("out of memory");
    m->cap = nc;
  }
  int64_t n = b * m->elem;
  if (m->dt == LOOM_STRING) {
    for (int64_t i = 0; i < n; i++) {
      size_t len = 0;
      const char *s = loom_tensor_get_string(t, i, &len);
      char *c = malloc(len + 1);
      memcpy(c, s, len);
      c[len] = 0;
      m->strs[m->rows * m->elem + i] = c;
    }
  } else {
    size_t es = loom_dtype_size(m->dt);
    memcpy(m->bytes + (size_t)(m->rows * m->elem) * es, loom_tensor_data_const(t), (size_t)n * es);
  }
  m->rows += b;
}

static void materialize(job *j, loom_status *st) {
  loom_dataset *ds = open_source(j, 0, 1, st);
  if (!ds) die("data.train", st);
  j->nmat = j->ncomp;
  j->mat = calloc((size_t)j->nmat, sizeof *j->mat);
  for (int i = 0; i < j->nmat; i++) {
    if (j->comp_splits[i] >= 0 || j->comp_is_splits[i]) {
      job_fail("data.eval_fraction", "the split needs single-valued columns ('%s' is multi-valued); give data.eval",
               j->comp_names[i]);
    }
    mat_comp *m = &j->mat[i];
    m->name = j->comp_names[i];
    m->dt = j->comp_dt[i];
    m->ndim = j->comp_ndim[i];
    memcpy(m->dims, j->comp_dims[i], sizeof m->dims);
    m->elem = 1;
    for (int k = 0; k < m->ndim; k++) m->elem *= m->dims[k];
  }
  ds = loom_dataset_batch(ds, 1024, 0, st);
  if (!ds) die("data.train", st);
  loom_tensor **vals = calloc((size_t)j->nmat, sizeof *vals);
  loom_code rc;
  while ((rc = loom_dataset_next(ds, vals, st)) == LOOM_OK)
    for (int i = 0; i < j->nmat; i++) mat_append(&j->mat[i], vals[i]);
  if (rc != LOOM_OUT_OF_RANGE) die("reading the training data", st);
  for (int i = 0; i < j->nmat; i++) loom_tensor_free(vals[i]);
  free(vals);
  loom_dataset_free(ds);
  int64_t n = j->mat[0].rows;
  j->perm = malloc(sizeof *j->perm * (size_t)(n ? n : 1));
  /* a deterministic permutation (LCG Fisher-Yates, as tests/canned_util.h) */
  for (int64_t i = 0; i < n; i++) j->perm[i] = i;
  uint32_t s = (uint32_t)j->split_seed;
  for (int64_t i = n - 1; i > 0; i--) {
    s = s * 1664525u + 1013904223u;
    int64_t k = (int64_t)((s >> 8) % (uint32_t)(i + 1));
    int64_t t = j->perm[i];
    j->perm[i] = j->perm[k];
    j->perm[k] = t;
  }
  j->neval_rows = (int64_t)llround((double)n * j->eval_fraction);
  j->ntrain_rows = n - j->neval_rows;
  if (j->ntrain_rows < 1 || j->neval_rows < 1)
    die_msg("data.eval_fraction %g of %lld rows leaves an empty part", j->eval_fraction, (long long)n);
  info("data: %lld rows, %lld for training, %lld for evaluation (eval_fraction %g, split_seed %llu)",
          (long long)n, (long long)j->ntrain_rows, (long long)j->neval_rows, j->eval_fraction,
          (unsigned long long)j->split_seed);
}

/* from_tensors over the split part (0 train, 1 eval). */
static loom_dataset *split_part(const job *j, int part, int with_label, loom_status *st) {
  int64_t lo = part ? j->ntrain_rows : 0, cnt = part ? j->neval_rows : j->ntrain_rows;
  const char **names = calloc((size_t)j->nmat, sizeof *names);
  loom_tensor **ts = calloc((size_t)j->nmat, sizeof *ts);
  int n = 0;
  for (int i = 0; i < j->nmat; i++) {
    const mat_comp *m = &j->mat[i];
    if (!with_label && j->label && !strcmp(m->name, j->label)) continue;
    int64_t dims[LOOM_MAX_DIMS];
    dims[0] = cnt;
    memcpy(dims + 1, m->dims, sizeof(int64_t) * (size_t)m->ndim);
    loom_tensor *t = loom_tensor_new(m->dt, m->ndim + 1, dims, st);
    if (!t) die("split", st);
    for (int64_t r = 0; r < cnt; r++) {
      int64_t src = j->perm[lo + r];
      if (m->dt == LOOM_STRING) {
        for (int64_t e = 0; e < m->elem; e++) {
          const char *s = m->strs[src * m->elem + e];
          loom_tensor_set_string(t, r * m->elem + e, s, strlen(s), st);
        }
      } else {
        size_t es = loom_dtype_size(m->dt) * (size_t)m->elem;
        memcpy((char *)loom_tensor_data(t) + (size_t)r * es, m->bytes + (size_t)src * es, es);
      }
    }
    names[n] = m->name;
    ts[n++] = t;
  }
  loom_dataset *ds = loom_dataset_from_tensors(n, names, (const loom_tensor *const *)ts,
                                               with_label ? j->label : NULL, st);
  for (int i = 0; i < n; i++) loom_tensor_free(ts[i]);
  free(ts);
  free(names);
  return ds;
}

static loom_dataset *train_base(const job *j, loom_status *st) {
  return j->split ? split_part(j, 0, 1, st) : open_source(j, 0, 1, st);
}
static int has_eval_data(const job *j) {
  return j->split || (j->fmt == FMT_IDX ? j->idx_eval_images != NULL : j->neval > 0);
}

/* ---- input_fns ---- */
static loom_dataset *train_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  const job *j = user;
  loom_dataset *ds = train_base(j, st);
  if (ds && j->shuffle) ds = loom_dataset_shuffle(ds, j->shuffle_buffer, j->shuffle_seed, 1, st);
  if (ds) ds = loom_dataset_repeat(ds, j->epochs > 0 ? j->epochs : -1, st);
  if (ds) ds = loom_dataset_batch(ds, j->batch_size, 0, st);
  return ds;
}
static loom_dataset *eval_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  const job *j = user;
  loom_dataset *ds = j->split ? split_part(j, 1, 1, st) : open_source(j, 1, 1, st);
  if (ds) ds = loom_dataset_batch(ds, j->eval_batch_size, 0, st);
  return ds;
}
static loom_dataset *predict_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  const job *j = user;
  loom_dataset *ds;
  if (j->fmt == FMT_CSV) {
    loom_csv_column *cols = calloc((size_t)j->ncols, sizeof *cols);
    int n = 0;
    for (int i = 0; i < j->ncols; i++) {
      int is_label = j->label && !strcmp(j->cols[i].name, j->label);
      if (is_label && j->predict_drop_label) continue;
      cols[n] = j->cols[i];
      if (is_label) cols[n].select = 0;
      n++;
    }
    loom_csv_options o = csv_options(j, n, cols, NULL);
    ds = loom_dataset_csv(1, &j->predict_input, &o, st);
    free(cols);
  } else if (j->fmt == FMT_TFRECORD) {
    loom_feature_spec *spec = calloc((size_t)j->nspec, sizeof *spec);
    int n = 0;
    for (int i = 0; i < j->nspec; i++)
      if (!j->label || strcmp(j->spec[i].name, j->label)) spec[n++] = j->spec[i];
    ds = loom_dataset_tfrecord(1, &j->predict_input, n, spec, NULL, st);
    free(spec);
  } else {
    ds = loom_dataset_idx(j->predict_input, NULL, &j->idx, st);
  }
  if (ds) ds = loom_dataset_batch(ds, j->predict_batch, 0, st);
  return ds;
}

/* Serving input: one placeholder per feature of the training data ([-1, element dims...]). */
static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  const job *j = user;
  for (int i = 0; i < j->ncomp; i++) {
    if (j->comp_is_splits[i] || (j->label && !strcmp(j->comp_names[i], j->label))) continue;
    loom_code rc;
    if (j->comp_splits[i] >= 0) {
      int64_t d1 = -1;
      char sn[512];
      snprintf(sn, sizeof sn, "%s/row_splits", j->comp_names[i]);
      loom_sparse sp = {loom_placeholder(g, j->comp_dt[i], 1, &d1, j->comp_names[i]),
                        loom_placeholder(g, LOOM_I64, 1, &d1, sn)};
      rc = loom_features_add_sparse(f, j->comp_names[i], sp, st);
      if (rc == LOOM_OK) rc = loom_features_add_sparse(r, j->comp_names[i], sp, st);
    } else {
      int64_t dims[LOOM_MAX_DIMS];
      dims[0] = -1;
      memcpy(dims + 1, j->comp_dims[i], sizeof(int64_t) * (size_t)j->comp_ndim[i]);
      loom_output x = loom_placeholder(g, j->comp_dt[i], j->comp_ndim[i] + 1, dims, j->comp_names[i]);
      rc = loom_features_add(f, j->comp_names[i], x, st);
      if (rc == LOOM_OK) rc = loom_features_add(r, j->comp_names[i], x, st);
    }
    if (rc != LOOM_OK) return rc;
  }
  return LOOM_OK;
}

/* ---------------------------------------------------------------- feature columns */
static const char *const FC_TYPES[] = {"numeric", "bucketized", "vocabulary", "hash_bucket", "identity",
                                       "crossed", "indicator", "embedding", "weighted", NULL};
enum { FC_NUMERIC, FC_BUCKETIZED, FC_VOCABULARY, FC_HASH, FC_IDENTITY, FC_CROSSED, FC_INDICATOR, FC_EMBEDDING,
       FC_WEIGHTED };

static int find_col(const job *j, int upto, const char *ref) {
  for (int i = upto - 1; i >= 0; i--)
    if (j->fcs[i] && j->fc_refs[i] && !strcmp(j->fc_refs[i], ref)) return i;
  for (int i = upto - 1; i >= 0; i--)
    if (j->fcs[i] && !strcmp(loom_fc_name(j->fcs[i]), ref)) return i;
  return -1;
}
static void fail_no_col(const job *j, const char *path, const char *ref, int upto) {
  char list[1024] = "";
  size_t len = 0;
  for (int i = 0; i < upto && len < sizeof list - 64; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                            j->fc_refs[i] ? j->fc_refs[i] : loom_fc_name(j->fcs[i]));
  job_fail(path, "no column named '%s'%s (columns: %s)", ref, upto < j->nfc ? " before it" : "", *list ? list : "none");
}
/* The column "column" refers to (an earlier one). */
static loom_fc *col_ref(job *j, const cJSON *o, const char *path, const char *key, int upto) {
  const char *ref = j_string(o, path, key, NULL, 1);
  int k = find_col(j, upto, ref);
  if (k < 0) fail_no_col(j, jp_key(path, key), ref, upto);
  j->fc_used[k] = 1;
  return j->fcs[k];
}
static const char *col_key(const job *j, const cJSON *o, const char *path) {
  const char *key = j_string(o, path, "key", NULL, 1);
  if (find_feature(j, key) < 0) fail_no_feature(j, jp_key(path, "key"), key);
  return key;
}

/* Statistics the columns ask of the analyzer, registered before the one pass. */
static void prescan_analysis(job *j, const cJSON *arr, int *need) {
  int i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    if (!cJSON_IsObject(c)) continue;
    const char *p = jp_idx("feature_columns", i);
    const cJSON *t = j_get(c, "type");
    const cJSON *k = j_get(c, "key");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    const char *key = cJSON_IsString(k) ? k->valuestring : "";
    loom_status *st = loom_status_new();
    loom_code rc = LOOM_OK;
    if (!strcmp(type, "numeric") && cJSON_IsString(j_get(c, "normalizer")) &&
        !strcmp(j_get(c, "normalizer")->valuestring, "zscore") && find_feature(j, key) >= 0) {
      rc = loom_fc_analyze_moments(j->an, key, st);
      *need = 1;
    } else if (!strcmp(type, "vocabulary") && j_get(c, "vocabulary") && find_feature(j, key) >= 0) {
      const cJSON *v = j_object(c, p, "vocabulary", 0);
      static const char *const vk[] = {"top_k", "frequency_threshold", NULL};
      j_keys(v, jp_key(p, "vocabulary"), vk);
      int64_t top_k = j_int(v, jp_key(p, "vocabulary"), "top_k", 0, 0, INT64_MAX);
      int64_t thr = j_int(v, jp_key(p, "vocabulary"), "frequency_threshold", 0, 0, INT64_MAX);
      rc = loom_fc_analyze_vocabulary(j->an, key, top_k, thr, st);
      *need = 1;
    } else if (!strcmp(type, "bucketized") && j_get(c, "quantiles")) {
      int64_t q = j_int(c, p, "quantiles", 0, 2, 100000);
      const cJSON *src = j_get(c, "source");
      if (!cJSON_IsString(src)) continue;
      /* the source's raw key: an earlier numeric column named (or keyed) so */
      const char *skey = NULL;
      int m = 0;
      for (const cJSON *d = arr->child; d && d != c; d = d->next, m++) {
        const cJSON *dn = j_get(d, "name"), *dk = j_get(d, "key"), *dt = j_get(d, "type");
        if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "numeric") || !cJSON_IsString(dk)) continue;
        if ((cJSON_IsString(dn) && !strcmp(dn->valuestring, src->valuestring)) ||
            !strcmp(dk->valuestring, src->valuestring))
          skey = dk->valuestring;
      }
      if (skey && find_feature(j, skey) >= 0) {
        rc = loom_fc_analyze_quantiles(j->an, skey, (int)q, st);
        *need = 1;
      }
    }
    if (rc != LOOM_OK) job_fail(p, "%s", loom_status_message(st));
    loom_status_free(st);
  }
}

static loom_combiner parse_combiner(const cJSON *o, const char *path, const char *key, loom_combiner dflt) {
  static const char *const cn[] = {"sum", "mean", "sqrtn", NULL};
  return (loom_combiner)j_enum(o, path, key, cn, (int)dflt);
}

static void build_columns(job *j) {
  const cJSON *arr = j_array(j->root, "", "feature_columns", 1);
  j->nfc = cJSON_GetArraySize(arr);
  if (j->nfc < 1) job_fail("feature_columns", "must not be empty");
  j->set = loom_fc_set_new();
  j->fcs = calloc((size_t)j->nfc, sizeof *j->fcs);
  j->fc_refs = calloc((size_t)j->nfc, sizeof *j->fc_refs);
  j->fc_used = calloc((size_t)j->nfc, sizeof *j->fc_used);
  loom_status *st = loom_status_new();
  /* the analyzer's one pass over the training data */
  j->an = loom_fc_analyzer_new(st);
  int need = 0;
  prescan_analysis(j, arr, &need);
  if (need) {
    loom_dataset *ds = train_base(j, st);
    if (!ds) die("data.train", st);
    ds = loom_dataset_batch(ds, 1024, 0, st);
    if (!ds || loom_fc_analyzer_run(j->an, ds, st) != LOOM_OK) die("analyzing the training data", st);
    loom_dataset_free(ds);
  }
  int i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    const char *p = jp_idx("feature_columns", i);
    if (!cJSON_IsObject(c)) job_fail(p, "must be an object with a \"type\"");
    int type = j_enum(c, p, "type", FC_TYPES, -1);
    loom_fc *fc = NULL;
    loom_status_clear(st);
    switch (type) {
      case FC_NUMERIC: {
        static const char *const k[] = {"type", "name", "key", "shape", "default", "normalizer", NULL};
        j_keys(c, p, k);
        const char *key = col_key(j, c, p);
        int nd = 0;
        int64_t *shape = j_pos_int_array(c, p, "shape", &nd, 0);
        int64_t numel = 1;
        for (int d = 0; d < nd; d++) numel *= shape[d];
        float *dflt = NULL;
        const cJSON *dv = j_get(c, "default");
        if (dv) {
          int n = 1;
          if (cJSON_IsNumber(dv)) {
            dflt = malloc(sizeof *dflt * (size_t)numel);
            for (int64_t e = 0; e < numel; e++) dflt[e] = (float)dv->valuedouble;
          } else {
            dflt = j_float_array(c, p, "default", &n, 1);
            if (n != numel) job_fail(jp_key(p, "default"), "must hold %lld values (the shape's), got %d", (long long)numel, n);
          }
        }
        static const char *const norms[] = {"none", "zscore", NULL};
        int norm = j_enum(c, p, "normalizer", norms, 0);
        int comp = find_feature(j, key);
        loom_dtype dt = j->comp_dt[comp] == LOOM_F64 ? LOOM_F64 : LOOM_F32;
        if (norm == 1) {
          int64_t n = 0;
          const double *mean = NULL, *sd = NULL;
          if (loom_fc_analyzer_moments(j->an, key, &n, &mean, &sd, st) != LOOM_OK)
            job_fail(jp_key(p, "normalizer"), "%s", loom_status_message(st));
          double *sd1 = malloc(sizeof *sd1 * (size_t)(n ? n : 1));
          for (int64_t e = 0; e < n; e++) sd1[e] = sd[e] > 0 ? sd[e] : 1.0; /* a constant feature: x - mean */
          fc = loom_fc_numeric_zscore(j->set, key, nd, shape, dflt, n, mean, sd1, st);
          free(sd1);
        } else {
          fc = loom_fc_numeric(j->set, key, nd, shape, dflt, dt, NULL, NULL, st);
        }
        free(shape);
        free(dflt);
        break;
      }
      case FC_BUCKETIZED: {
        static const char *const k[] = {"type", "name", "source", "boundaries", "quantiles", NULL};
        j_keys(c, p, k);
        loom_fc *src = col_ref(j, c, p, "source", i);
        int nb = 0;
        float *b = j_float_array(c, p, "boundaries", &nb, 0);
        const cJSON *q = j_get(c, "quantiles");
        if (!b == !q) job_fail(p, "give one of \"boundaries\" (a sorted array) or \"quantiles\" (a bucket count)");
        if (q) {
          const float *bb = NULL;
          /* the numeric source's raw key = its name */
          if (loom_fc_analyzer_boundaries(j->an, loom_fc_name(src), &nb, &bb, st) != LOOM_OK)
            job_fail(jp_key(p, "quantiles"), "%s", loom_status_message(st));
          if (nb < 1) job_fail(jp_key(p, "quantiles"), "the data gave no boundaries (too few distinct values)");
          b = malloc(sizeof *b * (size_t)nb);
          memcpy(b, bb, sizeof *b * (size_t)nb);
        }
        fc = loom_fc_bucketized(j->set, src, nb, b, st);
        free(b);
        break;
      }
      case FC_VOCABULARY: {
        static const char *const k[] = {"type", "name", "key", "vocabulary_list", "vocabulary_file", "vocabulary",
                                        "vocabulary_size", "num_oov_buckets", "default_value", NULL};
        j_keys(c, p, k);
        const char *key = col_key(j, c, p);
        int given = !!j_get(c, "vocabulary_list") + !!j_get(c, "vocabulary_file") + !!j_get(c, "vocabulary");
        if (given != 1)
          job_fail(p, "give one of \"vocabulary_list\", \"vocabulary_file\" or \"vocabulary\" (computed: {\"top_k\": N})");
        int64_t oov = j_int(c, p, "num_oov_buckets", 0, 0, INT64_MAX);
        int64_t dv = j_int(c, p, "default_value", -1, -1, INT64_MAX);
        int64_t vsize = j_int(c, p, "vocabulary_size", 0, 1, INT64_MAX);
        loom_dtype dt = j->comp_dt[find_feature(j, key)] == LOOM_STRING ? LOOM_STRING : LOOM_I64;
        const cJSON *vl = j_get(c, "vocabulary_list");
        if (vl) {
          int n = cJSON_IsArray(vl) ? cJSON_GetArraySize(vl) : 0;
          if (n < 1) job_fail(jp_key(p, "vocabulary_list"), "must be a non-empty array");
          if (dt == LOOM_STRING) {
            int m = 0;
            const char **v = j_string_list(c, p, "vocabulary_list", &m, 1);
            fc = loom_fc_vocabulary_list(j->set, key, m, v, oov, dv, st);
            free(v);
          } else {
            int64_t *v = malloc(sizeof *v * (size_t)n);
            int m = 0;
            for (const cJSON *e = vl->child; e; e = e->next, m++) {
              if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble))
                job_fail(jp_idx(jp_key(p, "vocabulary_list"), m), "must be an integer (feature '%s' is integer)", key);
              v[m] = (int64_t)e->valuedouble;
            }
            fc = loom_fc_vocabulary_list_int64(j->set, key, n, v, oov, dv, st);
            free(v);
          }
        } else {
          char *file;
          const char *fp;
          if (j_get(c, "vocabulary_file")) {
            file = resolve(j, j_string(c, p, "vocabulary_file", NULL, 1));
            check_readable(fp = jp_key(p, "vocabulary_file"), file);
          } else {
            fp = jp_key(p, "vocabulary");
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/vocabularies", j->model_dir);
            if (mkdirs(dir)) die_msg("cannot create '%s': %s", dir, strerror(errno));
            size_t n = strlen(dir) + strlen(key) + 8;
            file = malloc(n);
            snprintf(file, n, "%s/%s.txt", dir, key);
            for (char *s = file + strlen(dir) + 1; *s; s++)
              if (*s == '/') *s = '_';
            int64_t written = 0;
            if (loom_fc_analyzer_write_vocabulary(j->an, key, file, &written, st) != LOOM_OK)
              die("writing the vocabulary", st);
            if (written < 1) job_fail(fp, "the data gave an empty vocabulary for '%s'", key);
            info("vocabulary of '%s': %lld entries -> %s", key, (long long)written, file);
          }
          fc = loom_fc_vocabulary_file(j->set, key, file, vsize, oov, dv, dt, st);
          if (!fc && loom_status_code(st) == LOOM_NOT_FOUND) job_fail(fp, "%s", loom_status_message(st));
          free(file);
        }
        break;
      }
      case FC_HASH: {
        static const char *const k[] = {"type", "name", "key", "hash_bucket_size", NULL};
        j_keys(c, p, k);
        const char *key = col_key(j, c, p);
        int64_t n = j_int(c, p, "hash_bucket_size", -1, 2, INT64_MAX);
        if (n < 0) job_fail(jp_key(p, "hash_bucket_size"), "missing (an integer > 1 is required)");
        loom_dtype dt = j->comp_dt[find_feature(j, key)];
        fc = loom_fc_hash_bucket(j->set, key, n, dt == LOOM_STRING ? LOOM_STRING : LOOM_I64, st);
        break;
      }
      case FC_IDENTITY: {
        static const char *const k[] = {"type", "name", "key", "num_buckets", "default_value", NULL};
        j_keys(c, p, k);
        const char *key = col_key(j, c, p);
        int64_t n = j_int(c, p, "num_buckets", -1, 1, INT64_MAX);
        if (n < 0) job_fail(jp_key(p, "num_buckets"), "missing (a positive integer is required)");
        int has = j_get(c, "default_value") != NULL;
        int64_t dv = j_int(c, p, "default_value", 0, 0, n - 1);
        fc = loom_fc_identity(j->set, key, n, has, dv, st);
        break;
      }
      case FC_CROSSED: {
        static const char *const k[] = {"type", "name", "keys", "hash_bucket_size", "hash_key", NULL};
        j_keys(c, p, k);
        const cJSON *ks = j_array(c, p, "keys", 1);
        int n = cJSON_GetArraySize(ks);
        if (n < 2) job_fail(jp_key(p, "keys"), "must hold at least 2 keys");
        const char **raw = calloc((size_t)n, sizeof *raw);
        const loom_fc **cols = calloc((size_t)n, sizeof *cols);
        int m = 0;
        for (const cJSON *e = ks->child; e; e = e->next, m++) {
          const char *ep = jp_idx(jp_key(p, "keys"), m);
          if (cJSON_IsString(e)) {
            if (find_feature(j, e->valuestring) < 0) fail_no_feature(j, ep, e->valuestring);
            raw[m] = e->valuestring;
          } else if (cJSON_IsObject(e)) {
            static const char *const ek[] = {"column", NULL};
            j_keys(e, ep, ek);
            cols[m] = col_ref(j, e, ep, "column", i);
          } else {
            job_fail(ep, "must be a feature key (string) or {\"column\": name}");
          }
        }
        int64_t hb = j_int(c, p, "hash_bucket_size", -1, 2, INT64_MAX);
        if (hb < 0) job_fail(jp_key(p, "hash_bucket_size"), "missing (an integer > 1 is required)");
        uint64_t hk = (uint64_t)j_int(c, p, "hash_key", 0, 0, INT64_MAX);
        fc = loom_fc_crossed(j->set, n, raw, cols, hb, hk, st);
        free(raw);
        free(cols);
        break;
      }
      case FC_INDICATOR: {
        static const char *const k[] = {"type", "name", "column", NULL};
        j_keys(c, p, k);
        fc = loom_fc_indicator(j->set, col_ref(j, c, p, "column", i), st);
        break;
      }
      case FC_EMBEDDING: {
        static const char *const k[] = {"type", "name", "column", "dimension", "combiner", "max_norm", "trainable", NULL};
        j_keys(c, p, k);
        loom_fc *cat = col_ref(j, c, p, "column", i);
        int64_t dim = j_int(c, p, "dimension", -1, 1, INT64_MAX);
        if (dim < 0) job_fail(jp_key(p, "dimension"), "missing (a positive integer is required)");
        loom_fc_embedding_options eo = loom_fc_embedding_options_default();
        eo.combiner = parse_combiner(c, p, "combiner", LOOM_COMBINER_MEAN);
        eo.max_norm = j_number(c, p, "max_norm", 0, 0, 1e30);
        eo.trainable = j_bool(c, p, "trainable", 1);
        fc = loom_fc_embedding(j->set, cat, dim, &eo, st);
        break;
      }
      case FC_WEIGHTED: {
        static const char *const k[] = {"type", "name", "column", "weight_key", NULL};
        j_keys(c, p, k);
        loom_fc *cat = col_ref(j, c, p, "column", i);
        const char *wk = j_string(c, p, "weight_key", NULL, 1);
        if (find_feature(j, wk) < 0) fail_no_feature(j, jp_key(p, "weight_key"), wk);
        fc = loom_fc_weighted(j->set, cat, wk, st);
        break;
      }
    }
    if (!fc) job_fail(p, "%s", loom_status_message(st));
    j->fcs[i] = fc;
    j->fc_refs[i] = j_string(c, p, "name", NULL, 0);
    if (j->fc_refs[i] && find_col(j, i, j->fc_refs[i]) >= 0)
      job_fail(jp_key(p, "name"), "a column named '%s' exists already", j->fc_refs[i]);
  }
  loom_status_free(st);
}

/* ---------------------------------------------------------------- the model */
static const char *const MODEL_TYPES[] = {"linear_classifier", "linear_regressor", "dnn_classifier", "dnn_regressor",
                                          "dnn_linear_combined_classifier", "dnn_linear_combined_regressor",
                                          "baseline_classifier", "baseline_regressor", NULL};

static loom_canned_optimizer parse_optimizer(const cJSON *m, const char *key) {
  loom_canned_optimizer o = {NULL, 0, NULL, NULL};
  const cJSON *v = j_get(m, key);
  if (!v) {
    o.name = strcmp(key, "dnn_optimizer") && strcmp(key, "optimizer") ? "Ftrl" : NULL;
    return o;
  }
  static const char *const names[] = {"Adagrad", "Adam", "Ftrl", "RMSProp", "SGD", NULL};
  const char *p = jp_key("model", key);
  if (cJSON_IsString(v)) {
    o.name = names[j_enum(m, "model", key, names, -1)];
    return o;
  }
  if (!cJSON_IsObject(v)) job_fail(p, "must be an optimizer name or {\"name\": ..., \"learning_rate\": ...}");
  static const char *const k[] = {"name", "learning_rate", NULL};
  j_keys(v, p, k);
  o.name = names[j_enum(v, p, "name", names, -1)];
  o.learning_rate = j_number(v, p, "learning_rate", 0, 1e-30, 1e9);
  return o;
}

/* The columns a model list names (default: every column no other column uses). */
static const loom_fc **model_columns(job *j, const cJSON *m, const char *key, int *n, int required) {
  const cJSON *a = j_array(m, "model", key, 0);
  const loom_fc **out = calloc((size_t)j->nfc, sizeof *out);
  *n = 0;
  if (!a) {
    if (required) job_fail(jp_key("model", key), "missing (an array of column names is required)");
    for (int i = 0; i < j->nfc; i++)
      if (!j->fc_used[i]) out[(*n)++] = j->fcs[i];
    return out;
  }
  int cnt = cJSON_GetArraySize(a);
  if (cnt < 1) job_fail(jp_key("model", key), "must not be empty");
  out = realloc(out, sizeof *out * (size_t)cnt);
  int i = 0;
  for (const cJSON *e = a->child; e; e = e->next, i++) {
    const char *ep = jp_idx(jp_key("model", key), i);
    if (!cJSON_IsString(e)) job_fail(ep, "must be a column name");
    int k = find_col(j, j->nfc, e->valuestring);
    if (k < 0) fail_no_col(j, ep, e->valuestring, j->nfc);
    out[(*n)++] = j->fcs[k];
  }
  return out;
}

/* The model section's type and keys (checked before any data is read). */
static int model_type(const cJSON *m) {
  int type = j_enum(m, "model", "type", MODEL_TYPES, -1);
  int classifier = type % 2 == 0;
  int family = type / 2; /* 0 linear, 1 dnn, 2 combined, 3 baseline */
  const char *common[] = {"type", classifier ? "n_classes" : "label_dimension", "weight_column", "loss_reduction",
                          "warm_start_from", classifier ? "label_vocabulary" : NULL};
  const char *keys[32];
  int nk = 0;
  for (int i = 0; i < 6 && common[i]; i++) keys[nk++] = common[i];
  static const char *const fam[4][12] = {
      {"feature_columns", "optimizer", "sparse_combiner", NULL},
      {"feature_columns", "hidden_units", "optimizer", "activation", "dropout", "batch_norm", NULL},
      {"linear_feature_columns", "dnn_feature_columns", "dnn_hidden_units", "linear_optimizer", "dnn_optimizer",
       "dnn_activation", "dnn_dropout", "batch_norm", "linear_sparse_combiner", NULL},
      {"optimizer", NULL}};
  for (int i = 0; fam[family][i]; i++) keys[nk++] = fam[family][i];
  keys[nk] = NULL;
  j_keys(m, "model", keys);
  return type;
}

static void build_model(job *j) {
  const cJSON *m = j_object(j->root, "", "model", 1);
  int type = model_type(m);
  int classifier = type % 2 == 0;
  int family = type / 2;
  int64_t n_classes = classifier ? j_int(m, "model", "n_classes", 2, 2, INT64_MAX) : 2;
  int64_t label_dim = classifier ? 1 : j_int(m, "model", "label_dimension", 1, 1, INT64_MAX);
  const char *wc = j_string(m, "model", "weight_column", NULL, 0);
  if (wc && find_feature(j, wc) < 0) fail_no_feature(j, "model.weight_column", wc);
  int nvoc = 0;
  const char **voc = classifier ? j_string_list(m, "model", "label_vocabulary", &nvoc, 0) : NULL;
  if (voc && nvoc != n_classes)
    job_fail("model.label_vocabulary", "must hold n_classes (%lld) strings, got %d", (long long)n_classes, nvoc);
  static const char *const reds[] = {"sum_over_batch_size", "sum", NULL};
  loom_reduction red = j_enum(m, "model", "loss_reduction", reds, 0) ? LOOM_REDUCTION_SUM
                                                                        : LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  const char *ws = j_string(m, "model", "warm_start_from", NULL, 0);
  char *wsr = ws ? resolve(j, ws) : NULL;
  if (!j->label) job_fail("data.label", "missing (the model needs a label column)");
  loom_status *st = loom_status_new();
  loom_estimator *e = NULL;
#define COMMON(o)                          \
  o.model_dir = j->model_dir;              \
  o.config = &j->config;                   \
  o.n_classes = n_classes;                 \
  o.label_dimension = label_dim;           \
  o.weight_column = wc;                    \
  o.nlabel_vocabulary = nvoc;              \
  o.label_vocabulary = voc;                \
  o.loss_reduction = red;                  \
  o.warm_start_from = wsr
  int ncol = 0, ncol2 = 0, nh = 0;
  const loom_fc **cols = NULL, **cols2 = NULL;
  int64_t *hidden = NULL;
  if (family == 0) {
    loom_linear_options o = loom_linear_options_default();
    COMMON(o);
    cols = model_columns(j, m, "feature_columns", &ncol, 0);
    o.nfeature_columns = ncol;
    o.feature_columns = cols;
    if (j_get(m, "optimizer")) o.optimizer = parse_optimizer(m, "optimizer");
    o.sparse_combiner = parse_combiner(m, "model", "sparse_combiner", LOOM_COMBINER_SUM);
    e = classifier ? loom_linear_classifier_new(&o, st) : loom_linear_regressor_new(&o, st);
  } else if (family == 1) {
    loom_dnn_options o = loom_dnn_options_default();
    COMMON(o);
    cols = model_columns(j, m, "feature_columns", &ncol, 0);
    o.nfeature_columns = ncol;
    o.feature_columns = cols;
    hidden = j_pos_int_array(m, "model", "hidden_units", &nh, 1);
    o.nhidden_units = nh;
    o.hidden_units = hidden;
    if (j_get(m, "optimizer")) o.optimizer = parse_optimizer(m, "optimizer");
    o.activation = j_string(m, "model", "activation", "relu", 0);
    o.dropout = j_number(m, "model", "dropout", 0, 0, 0.999999);
    o.batch_norm = j_bool(m, "model", "batch_norm", 0);
    e = classifier ? loom_dnn_classifier_new(&o, st) : loom_dnn_regressor_new(&o, st);
  } else if (family == 2) {
    loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
    COMMON(o);
    if (!j_get(m, "linear_feature_columns") && !j_get(m, "dnn_feature_columns"))
      job_fail("model", "give linear_feature_columns, dnn_feature_columns or both");
    if (j_get(m, "linear_feature_columns")) cols = model_columns(j, m, "linear_feature_columns", &ncol, 1);
    if (j_get(m, "dnn_feature_columns")) {
      cols2 = model_columns(j, m, "dnn_feature_columns", &ncol2, 1);
      hidden = j_pos_int_array(m, "model", "dnn_hidden_units", &nh, 1);
    }
    o.nlinear_feature_columns = ncol;
    o.linear_feature_columns = cols;
    o.ndnn_feature_columns = ncol2;
    o.dnn_feature_columns = cols2;
    o.ndnn_hidden_units = nh;
    o.dnn_hidden_units = hidden;
    if (j_get(m, "linear_optimizer")) o.linear_optimizer = parse_optimizer(m, "linear_optimizer");
    if (j_get(m, "dnn_optimizer")) o.dnn_optimizer = parse_optimizer(m, "dnn_optimizer");
    o.dnn_activation = j_string(m, "model", "dnn_activation", "relu", 0);
    o.dnn_dropout = j_number(m, "model", "dnn_dropout", 0, 0, 0.999999);
    o.batch_norm = j_bool(m, "model", "batch_norm", 0);
    o.linear_sparse_combiner = parse_combiner(m, "model", "linear_sparse_combiner", LOOM_COMBINER_SUM);
    e = classifier ? loom_dnn_linear_combined_classifier_new(&o, st) : loom_dnn_linear_combined_regressor_new(&o, st);
  } else {
    loom_baseline_options o = loom_baseline_options_default();
    COMMON(o);
    if (j_get(m, "optimizer")) o.optimizer = parse_optimizer(m, "optimizer");
    e = classifier ? loom_baseline_classifier_new(&o, st) : loom_baseline_regressor_new(&o, st);
  }
#undef COMMON
  if (!e) {
    if (loom_status_code(st) == LOOM_INVALID_ARGUMENT) job_fail("model", "%s", loom_status_message(st));
    die("creating the model", st);
  }
  /* the columns the model reads (the estimator copied its lists): the parsing receiver's spec */
  if (ncol2) {
    cols = realloc(cols, (size_t)(ncol + ncol2) * sizeof *cols);
    if (!cols) die_msg("creating the model: out of memory");
    memcpy(cols + ncol, cols2, (size_t)ncol2 * sizeof *cols);
  }
  j->model_cols = cols;
  j->nmodel_cols = ncol + ncol2;
  free(cols2);
  free(hidden);
  j->classifier = classifier;
  j->n_classes = n_classes;
  j->nlabel_vocab = nvoc;
  j->label_vocab = voc;
  free(wsr);
  loom_status_free(st);
  j->est = e;
}

/* ---------------------------------------------------------------- settings */
static void parse_settings(job *j, const char *model_dir_override, int64_t steps_override, const char *input_override,
                           const char *output_override, const char **output) {
  static const char *const top[] = {"data", "feature_columns", "model", "run_config", "train", "eval", "predict",
                                    "export", "description", NULL};
  j_keys(j->root, "", top);
  (void)model_type(j_object(j->root, "", "model", 1));
  /* run_config */
  const cJSON *rc = j_object(j->root, "", "run_config", 0);
  static const char *const rk[] = {"model_dir", "save_checkpoints_steps", "save_checkpoints_secs",
                                   "save_summary_steps", "keep_checkpoint_max", "random_seed",
                                   "log_step_count_steps", "num_threads", "progress_bar", NULL};
  j_keys(rc, "run_config", rk);
  const char *md = j_string(rc, "run_config", "model_dir", NULL, 0);
  if (model_dir_override)
    j->model_dir = xstrdup(model_dir_override);
  else if (md)
    j->model_dir = resolve(j, md);
  else
    job_fail("run_config.model_dir", "missing (give it here or with --model-dir)");
  loom_run_config c = loom_run_config_default();
  c.save_checkpoints_steps = j_int(rc, "run_config", "save_checkpoints_steps", -1, 0, INT64_MAX);
  c.save_checkpoints_secs = j_number(rc, "run_config", "save_checkpoints_secs", -1, 0, 1e12);
  if (c.save_checkpoints_steps > 0 && c.save_checkpoints_secs > 0)
    job_fail("run_config.save_checkpoints_secs", "give save_checkpoints_steps or save_checkpoints_secs, not both");
  c.save_summary_steps = j_int(rc, "run_config", "save_summary_steps", c.save_summary_steps, 0, INT64_MAX);
  c.keep_checkpoint_max = (int32_t)j_int(rc, "run_config", "keep_checkpoint_max", c.keep_checkpoint_max, 0, 1000000);
  if (j_get(rc, "random_seed")) {
    c.has_random_seed = 1;
    c.tf_random_seed = j_int(rc, "run_config", "random_seed", 0, 0, INT64_MAX);
  }
  c.log_step_count_steps = j_int(rc, "run_config", "log_step_count_steps", c.log_step_count_steps, 1, INT64_MAX);
  c.num_threads = (int32_t)j_int(rc, "run_config", "num_threads", 0, 0, 4096);
  c.progress_bar = j_bool(rc, "run_config", "progress_bar", 1);
  j->config = c;
  /* train */
  const cJSON *t = j_object(j->root, "", "train", 0);
  static const char *const tk[] = {"batch_size", "steps", "epochs", "shuffle", "shuffle_buffer", "shuffle_seed", NULL};
  j_keys(t, "train", tk);
  j->batch_size = j_int(t, "train", "batch_size", 32, 1, INT64_MAX);
  j->steps = j_int(t, "train", "steps", 0, 1, INT64_MAX);
  if (steps_override > 0) j->steps = steps_override;
  j->epochs = j_int(t, "train", "epochs", 0, 1, INT64_MAX);
  j->shuffle = j_bool(t, "train", "shuffle", 1);
  j->shuffle_buffer = j_int(t, "train", "shuffle_buffer", 10000, 1, INT64_MAX);
  j->shuffle_seed = (uint64_t)j_int(t, "train", "shuffle_seed", c.has_random_seed ? c.tf_random_seed : 1, 0, INT64_MAX);
  /* eval */
  const cJSON *ev = j_object(j->root, "", "eval", 0);
  static const char *const ek[] = {"batch_size", "steps", "name", NULL};
  j_keys(ev, "eval", ek);
  j->eval_batch_size = j_int(ev, "eval", "batch_size", j->batch_size > 256 ? j->batch_size : 256, 1, INT64_MAX);
  j->eval_steps = j_int(ev, "eval", "steps", 0, 1, INT64_MAX);
  j->eval_name = j_string(ev, "eval", "name", NULL, 0);
  /* predict */
  const cJSON *pr = j_object(j->root, "", "predict", 0);
  static const char *const pk[] = {"input", "output", "batch_size", NULL};
  j_keys(pr, "predict", pk);
  const char *in = j_string(pr, "predict", "input", NULL, 0);
  j->predict_input = input_override ? xstrdup(input_override) : in ? resolve(j, in) : NULL;
  const char *out = j_string(pr, "predict", "output", NULL, 0);
  *output = output_override ? xstrdup(output_override) : out ? resolve(j, out) : NULL;
  j->predict_batch = j_int(pr, "predict", "batch_size", 256, 1, INT64_MAX);
  /* export */
  const cJSON *ex = j_object(j->root, "", "export", 0);
  static const char *const xk[] = {"dir", "serving_input", NULL};
  j_keys(ex, "export", xk);
  (void)j_string(ex, "export", "dir", NULL, 0);
  static const char *const si[] = {"raw", "parsing", NULL};
  j->serving_parsing = j_enum(ex, "export", "serving_input", si, 0) == 1;
  if (j->serving_parsing && model_type(j_object(j->root, "", "model", 1)) / 2 == 3)
    job_fail("export.serving_input", "\"parsing\" needs a model with feature columns (a baseline model has none; "
                                     "use \"raw\")");
  (void)j_string(j->root, "", "description", NULL, 0);
}

/* ---------------------------------------------------------------- commands */
static void log_sink(loom_log_level level, const char *msg, void *user) {
  (void)user;
  if (quiet && level < LOOM_LOG_WARN) return;
  static const char *const lv[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  fprintf(stderr, "[loom] %s%s%s\n", level == LOOM_LOG_INFO ? "" : lv[level], level == LOOM_LOG_INFO ? "" : ": ",
          msg);
}

static void print_metrics(const loom_eval_result *r) {
  for (int i = 0; i < loom_eval_result_count(r); i++) {
    const char *k = loom_eval_result_key(r, i);
    if (!strcmp(k, "global_step"))
      printf("%s=%lld\n", k, (long long)loom_eval_result_global_step(r));
    else
      printf("%s=%.6g\n", k, loom_eval_result_value(r, i));
  }
  fflush(stdout);
}

/* ---- a label the head rejects, named by file and line ---- */
/* The 1-based line where record rec (0-based, a header line counted) of a CSV file starts, as data/csv.c splits
 * records (a quoted field may span lines; blank lines are skipped); -1 if the file has fewer records. */
static int64_t csv_record_line(const char *path, int64_t rec) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  int64_t line = 1, r = -1;
  int q = 0, start = 1, c;
  while ((c = fgetc(f)) != EOF) {
    if (start && c == '\n') {
      line++;
      continue;
    }
    if (start && c == '\r') continue;
    if (start && ++r == rec) break;
    start = 0;
    if (c == '"') q = !q;
    if (c == '\n') {
      line++;
      start = !q;
    }
  }
  fclose(f);
  return r == rec ? line : -1;
}

/* Why the head rejects label text s (NULL: it does not): a string not in model.label_vocabulary, else a value
 * outside [0, 1] (two classes) or not a class id in [0, n_classes). */
static const char *bad_label(const job *j, const char *s, char *why, size_t cap) {
  if (j->nlabel_vocab) {
    for (int i = 0; i < j->nlabel_vocab; i++)
      if (!strcmp(j->label_vocab[i], s)) return NULL;
    snprintf(why, cap, "is not in model.label_vocabulary");
    return why;
  }
  char *end;
  double v = strtod(s, &end);
  int num = *s && !*end;
  if (j->n_classes == 2 && num && v >= 0 && v <= 1) return NULL;
  if (j->n_classes > 2 && num && v == floor(v) && v >= 0 && v < (double)j->n_classes) return NULL;
  snprintf(why, cap, "is not %s (model.n_classes %lld)", j->n_classes == 2 ? "in [0, 1]" : "a class id in [0, n_classes)",
           (long long)j->n_classes);
  return why;
}

/* Element 0 of a label tensor as text. */
static void label_text(const loom_tensor *v, char *buf, size_t cap) {
  const void *d = loom_tensor_data_const(v);
  size_t len = 0;
  const char *s;
  switch (loom_tensor_dtype(v)) {
    case LOOM_STRING:
      s = loom_tensor_get_string(v, 0, &len);
      snprintf(buf, cap, "%.*s", (int)len, s);
      break;
    case LOOM_F32: snprintf(buf, cap, "%.9g", (double)*(const float *)d); break;
    case LOOM_F64: snprintf(buf, cap, "%.17g", *(const double *)d); break;
    case LOOM_I32: snprintf(buf, cap, "%d", *(const int32_t *)d); break;
    default: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)d); break;
  }
}

/* After a failed train / evaluate of a classifier: exits naming the first label of the data files the head
 * rejects, by file and line (CSV) or file and record (TFRecord); returns when there is none. */
static void report_bad_label(const job *j) {
  if (j->fmt == FMT_IDX || !j->label || !j->classifier) return;
  /* the label alone: a string column of the CSV (the others skipped), or the label's feature spec */
  loom_csv_column *cols = calloc((size_t)(j->ncols ? j->ncols : 1), sizeof *cols);
  loom_feature_spec spec;
  memset(&spec, 0, sizeof spec);
  for (int i = 0; i < j->ncols; i++) {
    cols[i].name = j->cols[i].name;
    cols[i].dtype = LOOM_STRING;
    cols[i].select = !strcmp(j->cols[i].name, j->label);
    cols[i].default_value = cols[i].select ? j->cols[i].default_value : "";
  }
  for (int i = 0; i < j->nspec; i++)
    if (!strcmp(j->spec[i].name, j->label)) spec = j->spec[i];
  loom_status *st = loom_status_new();
  for (int f = 0; f < j->ntrain + j->neval; f++) {
    const char *path = f < j->ntrain ? j->train[f] : j->eval[f - j->ntrain];
    loom_csv_options o = csv_options(j, j->ncols, cols, NULL);
    loom_dataset *ds = j->fmt == FMT_CSV ? loom_dataset_csv(1, &path, &o, st)
                                         : loom_dataset_tfrecord(1, &path, 1, &spec, NULL, st);
    loom_tensor *v = NULL;
    for (int64_t k = 0; ds && loom_dataset_next(ds, &v, st) == LOOM_OK; k++) {
      char text[256], why[128];
      label_text(v, text, sizeof text);
      loom_tensor_free(v);
      v = NULL;
      if (!bad_label(j, text, why, sizeof why)) continue;
      if (j->fmt == FMT_CSV)
        die_msg("%s:%lld: label '%s' (column '%s') %s", path,
                (long long)csv_record_line(path, k + (j->header != 0)), text, j->label, why);
      die_msg("%s: record %lld: label '%s' (feature '%s') %s", path, (long long)k + 1, text, j->label, why);
    }
    loom_dataset_free(ds);
  }
  loom_status_free(st);
  free(cols);
}

/* evaluate / predict need a trained model (TF's Estimator.evaluate: "Could not find trained model in
 * model_dir") unless allow_random; the notice that they run on the initial weights shows even with --quiet. */
static int allow_random_weights;
static void require_checkpoint(const job *j, const char *cmd) {
  char path[4096];
  loom_status *st = loom_status_new();
  loom_code rc = loom_latest_checkpoint(j->model_dir, path, sizeof path, st);
  if (rc != LOOM_OK && rc != LOOM_NOT_FOUND) die("reading the checkpoint state", st);
  loom_status_free(st);
  if (rc == LOOM_OK) return;
  if (!allow_random_weights)
    die_msg("%s: Could not find trained model in model_dir: %s (train first, or give --allow-random-weights to "
            "%s the initial weights)", cmd, j->model_dir, cmd);
  fprintf(stderr, "[loom] WARN: no checkpoint in %s: %s runs on the initial (random) weights (--allow-random-weights)\n",
          j->model_dir, cmd);
}

static void run_evaluate(job *j) {
  if (!has_eval_data(j)) job_fail("data.eval", "missing: evaluation needs data.eval (or data.eval_fraction)");
  require_checkpoint(j, "evaluate");
  loom_status *st = loom_status_new();
  loom_eval_options eo = loom_eval_options_default();
  eo.steps = j->eval_steps;
  eo.name = j->eval_name;
  loom_eval_result *r = NULL;
  if (loom_estimator_evaluate(j->est, eval_input_fn, j, &eo, &r, st) != LOOM_OK) {
    report_bad_label(j);
    die("evaluate", st);
  }
  print_metrics(r);
  loom_eval_result_free(r);
  loom_status_free(st);
}

static void run_train(job *j) {
  if (j->steps <= 0 && j->epochs <= 0) job_fail("train", "give train.steps or train.epochs (or --steps N)");
  loom_status *st = loom_status_new();
  loom_train_options to = loom_train_options_default();
  to.steps = j->steps;
  info("training in %s: batch %lld, %s %lld", j->model_dir, (long long)j->batch_size,
          j->steps > 0 ? "steps" : "epochs", (long long)(j->steps > 0 ? j->steps : j->epochs));
  if (loom_estimator_train(j->est, train_input_fn, j, &to, st) != LOOM_OK) {
    report_bad_label(j);
    die("train", st);
  }
  loom_status_free(st);
  if (has_eval_data(j)) run_evaluate(j);
}

static void csv_cell(FILE *f, const char *s, size_t len) {
  int q = 0;
  for (size_t i = 0; i < len; i++) q |= s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
  if (!q) {
    fwrite(s, 1, len, f);
    return;
  }
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '"') fputc('"', f);
    fputc(s[i], f);
  }
  fputc('"', f);
}

static void write_value(FILE *f, const loom_tensor *t) {
  int64_t n = loom_tensor_numel(t);
  loom_dtype dt = loom_tensor_dtype(t);
  if (dt == LOOM_STRING) {
    /* several strings: one cell, joined by spaces */
    char *buf = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&buf, &blen);
    for (int64_t i = 0; i < n; i++) {
      size_t len = 0;
      const char *s = loom_tensor_get_string(t, i, &len);
      if (i) fputc(' ', m);
      fwrite(s, 1, len, m);
    }
    fclose(m);
    csv_cell(f, buf, blen);
    free(buf);
    return;
  }
  const void *d = loom_tensor_data_const(t);
  for (int64_t i = 0; i < n; i++) {
    if (i) fputc(' ', f);
    switch (dt) {
      case LOOM_F32: fprintf(f, "%.9g", (double)((const float *)d)[i]); break;
      case LOOM_F64: fprintf(f, "%.17g", ((const double *)d)[i]); break;
      case LOOM_I32: fprintf(f, "%d", ((const int32_t *)d)[i]); break;
      case LOOM_I64: fprintf(f, "%lld", (long long)((const int64_t *)d)[i]); break;
      case LOOM_U8:
      case LOOM_BOOL: fprintf(f, "%d", ((const uint8_t *)d)[i]); break;
      default: break;
    }
  }
}

/* Columns in the first line of a CSV file (quotes respected). */
static int csv_count_columns(const char *path, char delim) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  int n = 1, q = 0, c, any = 0;
  while ((c = fgetc(f)) != EOF) {
    any = 1;
    if (c == '"') q = !q;
    else if (!q && c == delim) n++;
    else if (!q && (c == '\n' || c == '\r')) break;
  }
  fclose(f);
  return any ? n : 0;
}

static void run_predict(job *j, const char *output) {
  if (!j->predict_input) job_fail("predict.input", "missing (give it here or with --input)");
  FILE *chk = fopen(j->predict_input, "rb");
  if (!chk) job_fail("predict.input", "cannot open '%s': %s", j->predict_input, strerror(errno));
  fclose(chk);
  if (j->fmt == FMT_CSV && j->label) {
    int nc = csv_count_columns(j->predict_input, j->delimiter);
    if (nc == j->ncols)
      j->predict_drop_label = 0;
    else if (nc == j->ncols - 1)
      j->predict_drop_label = 1;
    else
      die_msg("%s has %d columns; data.columns describes %d (%d without the label)", j->predict_input, nc, j->ncols,
              j->ncols - 1);
  }
  require_checkpoint(j, "predict");
  FILE *f = output && strcmp(output, "-") ? fopen(output, "w") : stdout;
  if (!f) die_msg("cannot create '%s': %s", output, strerror(errno));
  loom_status *st = loom_status_new();
  loom_predict_options po = loom_predict_options_default();
  loom_prediction_iter *it = loom_estimator_predict(j->est, predict_input_fn, j, &po, st);
  if (!it) die("predict", st);
  int64_t rows = 0;
  loom_code rc;
  while ((rc = loom_prediction_next(it, st)) == LOOM_OK) {
    int n = loom_prediction_count(it);
    if (!rows)
      for (int i = 0; i < n; i++) {
        const char *k = loom_prediction_key(it, i);
        if (i) fputc(',', f);
        csv_cell(f, k, strlen(k));
      }
    if (!rows) fputc('\n', f);
    for (int i = 0; i < n; i++) {
      if (i) fputc(',', f);
      write_value(f, loom_prediction_value(it, i));
    }
    fputc('\n', f);
    rows++;
  }
  if (rc != LOOM_OUT_OF_RANGE) die("predict", st);
  loom_prediction_iter_free(it);
  if (f != stdout && fclose(f)) die_msg("writing '%s': %s", output, strerror(errno));
  info("predictions for %lld rows -> %s", (long long)rows, f == stdout ? "stdout" : output);
  loom_status_free(st);
}

/* The signature an ONNX export writes by default: "predict" (every prediction, raw features in), else
 * "serving_default". */
static const char *onnx_default_signature(const char *export_dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/signatures.json", export_dir);
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t len = 0;
  if (f) {
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while (m && (n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
    if (m) fclose(m);
    fclose(f);
  }
  cJSON *root = buf ? cJSON_Parse(buf) : NULL;
  int has_predict = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "predict"));
  cJSON_Delete(root);
  free(buf);
  return has_predict ? "predict" : "serving_default";
}

/* The export directory's signature as an ONNX model (loom_onnx.h) at out_path (NULL: <export_dir>/model.onnx). */
static void export_onnx(const char *export_dir, const char *signature, const char *out_path) {
  char def[4200];
  if (!out_path) {
    snprintf(def, sizeof def, "%s/model.onnx", export_dir);
    out_path = def;
  }
  loom_onnx_options o = loom_onnx_options_default();
  o.signature = signature ? signature : onnx_default_signature(export_dir);
  loom_status *st = loom_status_new();
  if (loom_onnx_export(export_dir, out_path, &o, st) != LOOM_OK) die("export --format onnx", st);
  printf("onnx=%s\n", out_path);
  info("ONNX model of signature '%s' -> %s", o.signature, out_path);
  loom_status_free(st);
}

static void run_export(job *j, int onnx, const char *signature, const char *onnx_out) {
  const cJSON *ex = j_object(j->root, "", "export", 0);
  const char *d = j_string(ex, "export", "dir", NULL, 0);
  char *base;
  if (d) {
    base = resolve(j, d);
  } else {
    size_t n = strlen(j->model_dir) + 8;
    base = malloc(n);
    snprintf(base, n, "%s/export", j->model_dir);
  }
  loom_status *st = loom_status_new();
  char out[4096];
  if (j->serving_parsing) {
    /* serialized tf.Example in (the string tensor "inputs" of classify / regress), parsed by the
     * spec of the model's columns: TF's build_parsing_serving_input_receiver_fn */
    loom_parsing_receiver *r =
        loom_fc_parsing_receiver_new(j->nmodel_cols, (const loom_fc *const *)j->model_cols, st);
    if (!r) die("export.serving_input \"parsing\"", st);
    if (loom_estimator_export(j->est, loom_parsing_serving_input_fn, r, base, NULL, out, sizeof out, st) != LOOM_OK)
      die("export", st);
    loom_parsing_receiver_free(r);
  } else if (loom_estimator_export(j->est, serving_fn, j, base, NULL, out, sizeof out, st) != LOOM_OK) {
    die("export", st);
  }
  printf("export_dir=%s\n", out);
  fflush(stdout);
  if (onnx) export_onnx(out, signature, onnx_out);
  free(base);
  loom_status_free(st);
}

static void job_free(job *j) {
  for (int i = 0; i < j->ntrain; i++) free(j->train[i]);
  for (int i = 0; i < j->neval; i++) free(j->eval[i]);
  free(j->train);
  free(j->eval);
  for (int i = 0; i < j->ncols; i++) free((char *)j->cols[i].default_value);
  free(j->cols);
  for (int i = 0; i < j->nspec; i++) free((void *)j->spec[i].default_value);
  free(j->spec);
  free(j->idx_train_images);
  free(j->idx_train_labels);
  free(j->idx_eval_images);
  free(j->idx_eval_labels);
  for (int i = 0; i < j->nmat; i++) {
    if (j->mat[i].strs)
      for (int64_t k = 0; k < j->mat[i].rows * j->mat[i].elem; k++) free(j->mat[i].strs[k]);
    free(j->mat[i].strs);
    free(j->mat[i].bytes);
  }
  free(j->mat);
  free(j->perm);
  for (int i = 0; i < j->ncomp; i++) free(j->comp_names[i]);
  free(j->comp_names);
  free(j->comp_dt);
  free(j->comp_ndim);
  free(j->comp_dims);
  free(j->comp_splits);
  free(j->comp_is_splits);
  free(j->model_dir);
  free((char *)j->predict_input);
  free(j->fcs);
  free(j->fc_refs);
  free(j->fc_used);
  free(j->model_cols);
  free(j->label_vocab);
}

static const cli_flag *find_flag(const char *a) {
  for (int i = 0; i < NFLAG; i++)
    if (!strcmp(a, FLAGS[i].name) || (FLAGS[i].alias && !strcmp(a, FLAGS[i].alias))) return &FLAGS[i];
  return NULL;
}

/* loom info | loom --version: the version, then what loom sees on this machine and picked. */
static int cmd_info(void) {
  size_t n = loom_runtime_info(NULL, 0);
  char *text = malloc(n + 1);
  if (!text) return 1;
  loom_runtime_info(text, n + 1);
  printf("loom %s\n%s", loom_version(), text);
  free(text);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "info")) return cmd_info();
  const char *cmd = NULL, *jobfile = NULL;
  const char *val[NFLAG] = {0}; /* a flag's value ("" for a switch given) */
  int c = -1;
  /* the command first (flags may come before it), so a flag is checked against it */
  for (int i = 1; i < argc; i++) {
    const cli_flag *fl = find_flag(argv[i]);
    if (fl && fl->arg) i++;
    else if (!fl && argv[i][0] != '-' && !cmd) cmd = argv[i];
  }
  if (cmd) {
    for (int k = 0; k < NCMD; k++)
      if (!strcmp(cmd, COMMANDS[k])) c = k;
    if (c < 0) usage_fail("unknown command '%s' (train, evaluate, predict, export)", cmd);
    usage_cmd = c;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const cli_flag *fl = find_flag(a);
    if (!strcmp(a, "--version") && c < 0) return cmd_info();
    if (fl) {
      if (c >= 0 && !(fl->cmds & FOR(c))) usage_fail("%s is not a flag of '%s' (loom %s --help)", a, cmd, cmd);
      if (fl->arg && i + 1 >= argc) usage_fail("%s needs a value (%s)", a, fl->arg);
      val[fl - FLAGS] = fl->arg ? argv[++i] : "";
    } else if (a[0] == '-' && a[1]) {
      usage_fail("unknown flag '%s'", a);
    } else if (a == cmd) {
      continue;
    } else if (!jobfile) {
      jobfile = a;
    } else {
      usage_fail("unexpected argument '%s'", a);
    }
  }
  if (val[F_HELP]) {
    print_usage(stdout, c, 1);
    return 0;
  }
  if (!cmd) usage_fail("no command given");
  if (!jobfile) usage_fail("no job file given");
  quiet = val[F_QUIET] != NULL;
  allow_random_weights = val[F_ALLOW_RANDOM] != NULL;
  int64_t steps = 0;
  if (val[F_STEPS]) {
    char *end;
    errno = 0;
    long long n = strtoll(val[F_STEPS], &end, 10);
    if (!*val[F_STEPS] || *end || errno || n < 1) usage_fail("--steps: must be a positive integer, got '%s'", val[F_STEPS]);
    steps = n;
  }
  int onnx = 0;
  if (val[F_FORMAT]) {
    if (!strcmp(val[F_FORMAT], "onnx")) onnx = 1;
    else if (strcmp(val[F_FORMAT], "saved_model")) usage_fail("--format: saved_model or onnx, got '%s'", val[F_FORMAT]);
  }
  if (!onnx && val[F_SIGNATURE]) usage_fail("--signature: only with --format onnx");
  if (!onnx && c == CMD_EXPORT && val[F_OUTPUT]) usage_fail("--output: only with --format onnx (export)");
  const char *model_dir = val[F_MODEL_DIR], *data = val[F_DATA], *input = val[F_INPUT], *output_arg = val[F_OUTPUT];
  loom_log_set(log_sink, NULL, LOOM_LOG_INFO);

  job j;
  memset(&j, 0, sizeof j);
  j.root = job_load(jobfile);
  snprintf(j.dir, sizeof j.dir, "%s", jobfile);
  char *slash = strrchr(j.dir, '/');
  if (slash)
    *slash = 0;
  else
    snprintf(j.dir, sizeof j.dir, ".");
  const char *output = NULL;
  parse_settings(&j, model_dir, steps, input, c == CMD_PREDICT ? output_arg : NULL, &output);
  parse_data(&j, data);
  /* the training data's components name the features (and serve the export) */
  loom_status *st = loom_status_new();
  loom_dataset *src = open_source(&j, 0, 1, st);
  if (!src) {
    if (loom_status_code(st) == LOOM_INVALID_ARGUMENT)
      job_fail("data", "%s%s", loom_status_message(st),
               strstr(loom_status_message(st), ": the header names column") ? " (data.header \"skip\" reads a header "
                                                                             "line unchecked)" : "");
    die("data.train", st);
  }
  read_components(&j, src);
  loom_dataset_free(src);
  if (j.label && j.fmt == FMT_IDX) j.label = "label";
  if (j.split) materialize(&j, st);
  if (mkdirs(j.model_dir)) die_msg("cannot create the model_dir '%s': %s", j.model_dir, strerror(errno));
  build_columns(&j);
  build_model(&j);
  switch (c) {
    case CMD_TRAIN: run_train(&j); break;
    case CMD_EVALUATE: run_evaluate(&j); break;
    case CMD_PREDICT: run_predict(&j, output); break;
    default: run_export(&j, onnx, val[F_SIGNATURE], output_arg); break;
  }
  loom_estimator_free(j.est);
  loom_fc_analyzer_free(j.an);
  loom_fc_set_free(j.set);
  job_free(&j);
  free((char *)output);
  cJSON_Delete(j.root);
  loom_status_free(st);
  return 0;
}
