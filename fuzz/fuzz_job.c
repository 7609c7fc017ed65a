/* The command line's job files (tools/): the JSON is checked, the data
 * opened (paths relative to examples/jobs/, as the example jobs use), the
 * feature columns (with the analyzer) and the canned model built; nothing is
 * trained. The CLI ends a job-file error with exit(2): here exit returns to
 * the fuzzer with longjmp (what such an exit leaves allocated is not counted:
 * this target runs with leak detection off, fuzz/job.asan_options and -detect_leaks=0
 * in fuzz/job.options, and -close_fd_mask=2 silences the
 * CLI's messages: fuzz/job.options). The model_dir is always a private
 * directory. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "fuzz_util.h"

static jmp_buf fz_jb;
static int fz_armed;
static _Noreturn void fz_exit(int code) {
  if (fz_armed) longjmp(fz_jb, code ? code : 1);
  exit(code);
}
int loom_cli_main(int argc, char **argv);
#define exit fz_exit
#define main loom_cli_main
#include "../tools/job_json.c"
#include "../tools/loom_cli.c"
#undef main
#undef exit

static char jobs_dir[PATH_MAX];
static job J;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (!realpath("examples/jobs", jobs_dir)) {
    fprintf(stderr, "fuzz_job: run from the repository root (examples/jobs)\n");
    abort();
  }
  quiet = 1;
  loom_log_set(fz_quiet, NULL, LOOM_LOG_ERROR);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = fz_dir("job");
  const char *path = fz_write(dir, "job.json", data, size);
  char jobfile[600], model_dir[600];
  snprintf(jobfile, sizeof jobfile, "%s", path);
  snprintf(model_dir, sizeof model_dir, "%s/model", dir);
  static const char *output;
  static loom_status *st;
  output = NULL;
  st = loom_status_new();
  memset(&J, 0, sizeof J);
  fz_armed = 1;
  if (setjmp(fz_jb) == 0) {
    J.root = job_load(jobfile);
    snprintf(J.dir, sizeof J.dir, "%s", jobs_dir);
    parse_settings(&J, model_dir, 0, NULL, NULL, &output);
    parse_data(&J, NULL);
    loom_dataset *src = open_source(&J, 0, 1, st);
    if (src) {
      read_components(&J, src);
      loom_dataset_free(src);
      if (J.label && J.fmt == FMT_IDX) J.label = "label";
      if (J.split) materialize(&J, st);
      build_columns(&J);
      build_model(&J);
    }
    if (getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: job built: %s\n", J.est ? "estimator" : "no estimator");
  }
  fz_armed = 0;
  loom_estimator_free(J.est);
  loom_fc_analyzer_free(J.an);
  loom_fc_set_free(J.set);
  job_free(&J);
  free((char *)output);
  cJSON_Delete(J.root);
  loom_status_free(st);
  return 0;
}
