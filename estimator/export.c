/* Export (loom_export_write): the graph pruned to the signatures, the
 * signatures as JSON, and the variables the pruned graph uses, read from a
 * session. Directory layout in include/loom/loom_export.h:
 *   <dir>/saved_model.loom          loom_graph_serialize's format (engine/graph_io.c)
 *   <dir>/signatures.json           {sig: {method_name, inputs: {key: {name,
 *                                   dtype, shape}}, outputs: {...}}}
 *   <dir>/variables/variables.ckpt  a loom checkpoint (engine/checkpoint.c)
 * Tensor names are "<node>:<output>"; dtypes are loom_dtype_name()s;
 * shapes list the static dims (-1 unknown). Input and output keys keep the
 * signature's order (it is the order of loom_predictor_run's arrays). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/fsutil.h"
#include "engine/engine_api.h"
#include "loom/loom_export.h"
#include "loom/loom_train.h"

#define EXPORT_GRAPH_FILE "saved_model.loom"
#define EXPORT_SIG_FILE "signatures.json"
#define EXPORT_VAR_DIR "variables"
#define EXPORT_VAR_FILE "variables/variables.ckpt"


/* Writes a whole file and fsyncs it. */
static loom_code write_file(const char *path, const void *data, size_t n, loom_status *st) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "export: cannot create %s: %s", path, strerror(e));
  }
  const uint8_t *p = data;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = k < 0 ? errno : EIO;
      close(fd);
      return loom_status_set(st, loom__errno_code(e), "export: cannot write %s: %s", path, strerror(e));
    }
    p += k;
    n -= (size_t)k;
  }
  if (fsync(fd) || close(fd)) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "export: cannot write %s: %s", path, strerror(e));
  }
  return LOOM_OK;
}

/* mkdir -p of the parent, then dir itself (so *created says it was made here). */
static loom_code make_dirs(const char *dir, int *created, loom_status *st) {
  char buf[4096];
  size_t L = strlen(dir);
  if (L == 0 || L >= sizeof buf) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: invalid directory name");
  memcpy(buf, dir, L + 1);
  while (L > 1 && buf[L - 1] == '/') buf[--L] = 0;
  char *slash = strrchr(buf, '/');
  if (slash && slash != buf) {
    *slash = 0;
    loom_code rc = loom__mkdir_p(buf, st);
    if (rc) return rc;
    *slash = '/';
  }
  if (mkdir(buf, 0755)) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "export: cannot create directory %s: %s", buf, strerror(e));
  }
  *created = 1;
  return LOOM_OK;
}

/* The export directory: created, or an existing empty one. */
static loom_code prepare_dir(const char *dir, int *created, loom_status *st) {
  *created = 0;
  struct stat sb;
  if (stat(dir, &sb)) {
    if (errno != ENOENT) {
      int e = errno;
      return loom_status_set(st, loom__errno_code(e), "export: cannot use %s: %s", dir, strerror(e));
    }
    return make_dirs(dir, created, st);
  }
  if (!S_ISDIR(sb.st_mode))
    return loom_status_set(st, LOOM_ALREADY_EXISTS, "export: %s exists and is not a directory", dir);
  DIR *d = opendir(dir);
  if (!d) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "export: cannot open directory %s: %s", dir, strerror(e));
  }
  struct dirent *e;
  int nonempty = 0;
  while (!nonempty && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) nonempty = 1;
  closedir(d);
  if (nonempty) return loom_status_set(st, LOOM_ALREADY_EXISTS, "export: directory %s exists and is not empty", dir);
  return LOOM_OK;
}

static int output_of(loom_graph *g, loom_output o) {
  return o.node && loom_graph_node_at(g, loom_node_id(o.node)) == o.node && o.index >= 0 &&
         o.index < loom_node_num_outputs(o.node);
}

static int is_variable(const loom_node *n) { return !strcmp(loom_node_op_name(n), "VariableV2"); }

static loom_code check_keys(const loom_signature *sg, int n, const char *const *keys, const loom_output *outs,
                            loom_graph *g, const char *what, loom_status *st) {
  if (n < 0 || (n && (!keys || !outs)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s: invalid %s list", sg->name, what);
  for (int i = 0; i < n; i++) {
    if (!keys[i] || !keys[i][0])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s: %s %d has no key", sg->name, what, i);
    for (int j = 0; j < i; j++)
      if (!strcmp(keys[i], keys[j]))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s: %s key %s appears twice", sg->name,
                               what, keys[i]);
    if (!output_of(g, outs[i]))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s: %s %s is not an output of the graph",
                             sg->name, what, keys[i]);
  }
  return LOOM_OK;
}

static cJSON *tensor_json(loom_output o) {
  cJSON *t = cJSON_CreateObject();
  if (!t) return NULL;
  char nm[600];
  snprintf(nm, sizeof nm, "%s:%d", loom_node_name(o.node), (int)o.index);
  cJSON *shape = cJSON_CreateArray();
  if (!shape || !cJSON_AddStringToObject(t, "name", nm) ||
      !cJSON_AddStringToObject(t, "dtype", loom_dtype_name(loom_output_dtype(o)))) {
    cJSON_Delete(shape);
    cJSON_Delete(t);
    return NULL;
  }
  cJSON_AddItemToObject(t, "shape", shape);
  int64_t dims[LOOM_MAX_DIMS];
  int nd = loom_output_dims(o, dims);
  for (int i = 0; i < nd; i++) {
    cJSON *d = cJSON_CreateNumber((double)dims[i]);
    if (!d) {
      cJSON_Delete(t);
      return NULL;
    }
    cJSON_AddItemToArray(shape, d);
  }
  return t;
}

static char *signatures_json(int nsig, const loom_signature *sigs) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  for (int s = 0; s < nsig; s++) {
    const loom_signature *sg = &sigs[s];
    cJSON *o = cJSON_CreateObject(), *in = cJSON_CreateObject(), *out = cJSON_CreateObject();
    if (!o || !in || !out) {
      cJSON_Delete(o);
      cJSON_Delete(in);
      cJSON_Delete(out);
      cJSON_Delete(root);
      return NULL;
    }
    cJSON_AddItemToObject(root, sg->name, o);
    cJSON_AddStringToObject(o, "method_name", sg->method_name ? sg->method_name : "tensorflow/serving/predict");
    cJSON_AddItemToObject(o, "inputs", in);
    cJSON_AddItemToObject(o, "outputs", out);
    for (int i = 0; i < sg->ninputs; i++) {
      cJSON *t = tensor_json(sg->inputs[i]);
      if (!t) {
        cJSON_Delete(root);
        return NULL;
      }
      cJSON_AddItemToObject(in, sg->input_keys[i], t);
    }
    for (int i = 0; i < sg->noutputs; i++) {
      cJSON *t = tensor_json(sg->outputs[i]);
      if (!t) {
        cJSON_Delete(root);
        return NULL;
      }
      cJSON_AddItemToObject(out, sg->output_keys[i], t);
    }
  }
  char *txt = cJSON_Print(root);
  cJSON_Delete(root);
  return txt;
}

loom_code loom_export_write(loom_graph *g, loom_session *s, int nsig, const loom_signature *sigs, const char *dir,
                            loom_status *st) {
  if (!g || !s || !dir || !*dir || nsig < 1 || !sigs)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: invalid arguments (graph, session, signatures, dir)");
  if (loom_session_graph(s) != g)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: the session runs another graph");
  if (loom_graph_status(g, st) != LOOM_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", loom_status_message(st));
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "export: the graph has a build error: %s", msg);
  }
  loom_code rc;
  int nroots = 0;
  for (int i = 0; i < nsig; i++) {
    const loom_signature *sg = &sigs[i];
    if (!sg->name || !sg->name[0])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %d has no name", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(sigs[j].name, sg->name))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s appears twice", sg->name);
    if (sg->noutputs < 1)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "export: signature %s has no outputs", sg->name);
    if ((rc = check_keys(sg, sg->ninputs, sg->input_keys, sg->inputs, g, "input", st))) return rc;
    if ((rc = check_keys(sg, sg->noutputs, sg->output_keys, sg->outputs, g, "output", st))) return rc;
    nroots += sg->ninputs + sg->noutputs;
  }
  /* roots: the outputs, and the inputs (a signature input must exist to be fed) */
  loom_node **roots = loom__malloc(sizeof *roots * (size_t)nroots);
  if (!roots) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "export: out of memory");
  int k = 0;
  for (int i = 0; i < nsig; i++) {
    for (int j = 0; j < sigs[i].noutputs; j++) roots[k++] = sigs[i].outputs[j].node;
    for (int j = 0; j < sigs[i].ninputs; j++) roots[k++] = sigs[i].inputs[j].node;
  }
  void *gbuf = NULL;
  size_t gsize = 0;
  char *json = NULL;
  loom_node **order = NULL;
  int cnt = 0, nvars = 0, created = 0, made[3] = {0, 0, 0};
  const char **names = NULL;
  loom_tensor **vals = NULL;
  char path[4200];
  rc = loom_graph_serialize(g, nroots, roots, &gbuf, &gsize, st);
  if (!rc) rc = loom__graph_collect(g, nroots, roots, &order, &cnt, st);
  if (rc) goto done;
  /* the variables' values, read before anything is written */
  for (int i = 0; i < cnt; i++) nvars += is_variable(order[i]);
  names = loom__calloc((size_t)nvars + 1, sizeof *names);
  vals = loom__calloc((size_t)nvars + 1, sizeof *vals);
  if (!names || !vals) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "export: out of memory");
    goto done;
  }
  nvars = 0;
  for (int i = 0; i < cnt && !rc; i++) {
    if (!is_variable(order[i])) continue;
    names[nvars] = loom_node_name(order[i]);
    rc = loom_session_read_variable(s, names[nvars], &vals[nvars], st);
    nvars++;
    if (rc) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", loom_status_message(st));
      loom_status_set(st, rc, "export: reading variable %s: %s", names[nvars - 1], msg);
    }
  }
  if (rc) goto done;
  json = signatures_json(nsig, sigs);
  if (!json) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "export: out of memory writing the signatures");
    goto done;
  }
  if ((rc = prepare_dir(dir, &created, st))) goto done;
  snprintf(path, sizeof path, "%s/%s", dir, EXPORT_GRAPH_FILE);
  if ((rc = write_file(path, gbuf, gsize, st))) goto done;
  made[0] = 1;
  snprintf(path, sizeof path, "%s/%s", dir, EXPORT_SIG_FILE);
  if ((rc = write_file(path, json, strlen(json), st))) goto done;
  made[1] = 1;
  snprintf(path, sizeof path, "%s/%s", dir, EXPORT_VAR_DIR);
  if (mkdir(path, 0755)) {
    int e = errno;
    rc = loom_status_set(st, loom__errno_code(e), "export: cannot create directory %s: %s", path, strerror(e));
    goto done;
  }
  made[2] = 1;
  snprintf(path, sizeof path, "%s/%s", dir, EXPORT_VAR_FILE);
  rc = loom_checkpoint_write(path, nvars, names, (const loom_tensor *const *)vals, st);
done:
  if (rc) { /* leave nothing half-written behind */
    if (made[2]) {
      snprintf(path, sizeof path, "%s/%s", dir, EXPORT_VAR_FILE);
      unlink(path);
      snprintf(path, sizeof path, "%s/%s", dir, EXPORT_VAR_DIR);
      rmdir(path);
    }
    if (made[1]) {
      snprintf(path, sizeof path, "%s/%s", dir, EXPORT_SIG_FILE);
      unlink(path);
    }
    if (made[0]) {
      snprintf(path, sizeof path, "%s/%s", dir, EXPORT_GRAPH_FILE);
      unlink(path);
    }
    if (created) rmdir(dir);
  } else {
    loom_status_clear(st);
  }
  for (int i = 0; vals && i < nvars; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
  loom__free(names);
  loom__free(order);
  if (json) cJSON_free(json);
  loom_buffer_free(gbuf);
  loom__free(roots);
  return rc;
}
