/* job_json.h - checked access to a loom job file (cJSON): every lookup names
 * the key path ("model.hidden_units", "feature_columns[3].key"), unknown keys
 * are errors, and a job-file error ends the program with exit code 2. */
#ifndef LOOM_TOOLS_JOB_JSON_H
#define LOOM_TOOLS_JOB_JSON_H
#include <cjson/cJSON.h>
#include <stdint.h>

#define JOB_EXIT_JOB 2     /* the job file (or the command line) is wrong */
#define JOB_EXIT_RUNTIME 1 /* training, evaluation, ... failed */

/* The job file's name, used in messages. */
void job_set_file(const char *path);
/* "loom: <file>: <path>: <message>" on stderr, exit 2. */
void job_fail(const char *path, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Parses the file (exit 2 with the line and column of a syntax error). */
cJSON *job_load(const char *path);

/* "<parent>.<key>" / "<parent>[i]" in a rotating static buffer (8 live at a time). */
const char *jp_key(const char *parent, const char *key);
const char *jp_idx(const char *parent, int i);

/* Fails on a key of o not in allowed (NULL-terminated). */
void j_keys(const cJSON *o, const char *path, const char *const *allowed);
/* o[key] or NULL (absent or JSON null). */
const cJSON *j_get(const cJSON *o, const char *key);
/* Typed lookups: absent -> dflt (or an error "missing" when required). */
const cJSON *j_object(const cJSON *o, const char *path, const char *key, int required);
const cJSON *j_array(const cJSON *o, const char *path, const char *key, int required);
const char *j_string(const cJSON *o, const char *path, const char *key, const char *dflt, int required);
double j_number(const cJSON *o, const char *path, const char *key, double dflt, double lo, double hi);
int64_t j_int(const cJSON *o, const char *path, const char *key, int64_t dflt, int64_t lo, int64_t hi);
int j_bool(const cJSON *o, const char *path, const char *key, int dflt);
/* One of choices (NULL-terminated): its index; absent -> dflt (-1 = required). */
int j_enum(const cJSON *o, const char *path, const char *key, const char *const *choices, int dflt);
/* Array of positive integers (n >= 1): malloc'd, *n set. Absent -> NULL, *n 0 (or required error). */
int64_t *j_pos_int_array(const cJSON *o, const char *path, const char *key, int *n, int required);
/* Array of numbers (n >= 1): malloc'd floats. */
float *j_float_array(const cJSON *o, const char *path, const char *key, int *n, int required);
/* A string or an array of strings (n >= 1): malloc'd array of borrowed strings. */
const char **j_string_list(const cJSON *o, const char *path, const char *key, int *n, int required);
/* A number or a string as text (CSV defaults); NULL when absent. Result owned by a static buffer ring. */
const char *j_scalar_text(const cJSON *o, const char *path, const char *key);
#endif
