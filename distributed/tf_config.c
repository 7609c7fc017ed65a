/* distributed/tf_config.c - the TF_CONFIG cluster spec (loom_distributed.h).
 *
 * TF_CONFIG follows TF RunConfig's rules
 * (_init_distributed_setting_from_environment_var):
 *  - no "cluster" (or an empty one): local mode, task worker/0 (any other
 *    task is rejected), chief, 0 ps, 1 worker, master = session_master or "";
 *  - a cluster with a "master" job (legacy): no "chief" job allowed, exactly
 *    one master, no evaluator task; master plays the chief's role;
 *  - otherwise exactly one "chief", except in a cluster of "worker" tasks alone (no "ps": a
 *    collective job, TF's MultiWorkerMirroredStrategy convention), where worker 0 is the chief;
 *    task type and index required; the
 *    evaluator is outside the cluster (cluster treated as {}, 0 ps,
 *    0 workers, master "", global id -1) and must have index 0; any other
 *    type must be a job of the cluster with the index in range;
 *  - master: session_master when given, "" when the cluster has one node,
 *    else "grpc://" + the task's address;
 *  - global id: the chief (or master) 0, then the other jobs in alphabetical
 *    order, ps last, tasks by index within a job. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "loom/loom_distributed.h"

/* ----------------------------------------------------------- TF_CONFIG */
typedef struct tfc_job {
  char *name;
  int32_t n;
  char **addrs;
} tfc_job;

struct loom_tf_config {
  int32_t njobs;      /* the cluster (0 for local mode and the evaluator) */
  tfc_job *jobs;
  char *task_type;
  int32_t task_id;
  int32_t is_chief;
  int32_t num_ps, num_workers;
  int32_t global_id;
  char *master;
  char *model_dir;
};

void loom_tf_config_free(loom_tf_config *c) {
  if (!c) return;
  for (int32_t j = 0; j < c->njobs; j++) {
    for (int32_t i = 0; i < c->jobs[j].n; i++) loom__free(c->jobs[j].addrs[i]);
    loom__free(c->jobs[j].addrs);
    loom__free(c->jobs[j].name);
  }
  loom__free(c->jobs);
  loom__free(c->task_type);
  loom__free(c->master);
  loom__free(c->model_dir);
  loom__free(c);
}

static const tfc_job *tfc_find(const loom_tf_config *c, const char *job) {
  if (!c || !job) return NULL;
  for (int32_t j = 0; j < c->njobs; j++)
    if (strcmp(c->jobs[j].name, job) == 0) return &c->jobs[j];
  return NULL;
}

static int tfc_count(const loom_tf_config *c, const char *job) {
  const tfc_job *jb = tfc_find(c, job);
  return jb ? jb->n : 0;
}

static void tfc_clear_cluster(loom_tf_config *c) {
  for (int32_t j = 0; j < c->njobs; j++) {
    for (int32_t i = 0; i < c->jobs[j].n; i++) loom__free(c->jobs[j].addrs[i]);
    loom__free(c->jobs[j].addrs);
    loom__free(c->jobs[j].name);
  }
  loom__free(c->jobs);
  c->jobs = NULL;
  c->njobs = 0;
}

#define TFC_OOM() loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "TF_CONFIG: out of memory")

/* An address of the cluster: "host:port" with a non-empty host (a name or IPv4 address of letters,
 * digits, '.', '-', '_', or an IPv6 address in brackets) and a decimal port 0..65535 (0: bind a free
 * port and publish it through model_dir). 1 when valid; else 0 with why filled. */
static int tfc_addr_ok(const char *a, char *why, size_t cap) {
  const char *c = strrchr(a, ':');
  if (!*a) return snprintf(why, cap, "is empty"), 0;
  if (!c) return snprintf(why, cap, "has no \":port\""), 0;
  size_t hl = (size_t)(c - a);
  if (hl == 0) return snprintf(why, cap, "has an empty host"), 0;
  if (a[0] == '[') {
    if (hl < 3 || a[hl - 1] != ']') return snprintf(why, cap, "has an unterminated or empty [IPv6] host"), 0;
    for (size_t i = 1; i + 1 < hl; i++)
      if (!strchr("0123456789abcdefABCDEF:.", a[i])) return snprintf(why, cap, "has a malformed [IPv6] host"), 0;
  } else {
    for (size_t i = 0; i < hl; i++) {
      char ch = a[i];
      int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
               ch == '-' || ch == '_';
      if (!ok)
        return snprintf(why, cap, "has a host with the character '%c' (an IPv6 address needs [brackets])",
                        (ch >= 0x20 && ch < 0x7f) ? ch : '?'),
               0;
    }
  }
  const char *p = c + 1;
  size_t pl = strlen(p);
  long port = 0;
  for (size_t i = 0; i < pl; i++) {
    if (p[i] < '0' || p[i] > '9') return snprintf(why, cap, "has a port that is not a number"), 0;
    if (port <= 65535) port = port * 10 + (p[i] - '0');
  }
  if (pl == 0) return snprintf(why, cap, "has an empty port"), 0;
  if (port > 65535) return snprintf(why, cap, "has a port out of range (0-65535)"), 0;
  return 1;
}

/* Reads "cluster" into c->jobs. */
static loom_code tfc_read_cluster(loom_tf_config *c, const cJSON *cl, loom_status *st) {
  if (!cl || cJSON_IsNull(cl)) return LOOM_OK;
  if (!cJSON_IsObject(cl))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"cluster\" must be an object of job -> [addresses]");
  int n = cJSON_GetArraySize(cl);
  if (n == 0) return LOOM_OK;
  c->jobs = loom__calloc((size_t)n, sizeof(tfc_job));
  if (!c->jobs) return TFC_OOM();
  const cJSON *job;
  cJSON_ArrayForEach(job, cl) {
    const char *name = job->string ? job->string : "";
    if (!*name) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"cluster\" has a job with an empty name");
    if (tfc_find(c, name))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"cluster\" job \"%s\" appears twice", name);
    if (!cJSON_IsArray(job))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "TF_CONFIG: \"cluster\".\"%s\" must be an array of address strings", name);
    tfc_job *jb = &c->jobs[c->njobs];
    jb->name = loom__strdup(name);
    if (!jb->name) return TFC_OOM();
    c->njobs++;
    int na = cJSON_GetArraySize(job);
    if (na > 0) {
      jb->addrs = loom__calloc((size_t)na, sizeof(char *));
      if (!jb->addrs) return TFC_OOM();
    }
    const cJSON *a;
    int i = 0;
    cJSON_ArrayForEach(a, job) {
      if (!cJSON_IsString(a))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "TF_CONFIG: \"cluster\".\"%s\"[%d] must be an address string", name, i);
      char why[128];
      if (!tfc_addr_ok(a->valuestring, why, sizeof why))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "TF_CONFIG: \"cluster\".\"%s\"[%d] address \"%.200s\" %s (expected host:port)", name, i,
                               a->valuestring, why);
      jb->addrs[i] = loom__strdup(a->valuestring);
      if (!jb->addrs[i]) return TFC_OOM();
      jb->n = ++i;
    }
  }
  return LOOM_OK;
}

/* Optional string member; *out NULL when absent. */
static loom_code tfc_string(const cJSON *obj, const char *key, const char *where, const char **out,
                            loom_status *st) {
  *out = NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v || cJSON_IsNull(v)) return LOOM_OK;
  if (!cJSON_IsString(v))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: %s\"%s\" must be a string", where, key);
  *out = v->valuestring;
  return LOOM_OK;
}

static int tfc_valid_type(const char *t) {
  static const char *const types[] = {"chief", "worker", "ps", "evaluator", "master"};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (strcmp(t, types[i]) == 0) return 1;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* TF's _get_global_id_in_cluster. */
static int tfc_global_id(const loom_tf_config *c, const char *chief_type) {
  const char *order[64];
  const char **ord = order;
  const char **heap = NULL;
  if (c->njobs + 1 > (int32_t)(sizeof order / sizeof *order)) {
    heap = loom__malloc((size_t)(c->njobs + 1) * sizeof(char *));
    if (!heap) return -1;
    ord = heap;
  }
  int n = 0;
  ord[n++] = chief_type;
  int first_other = n;
  for (int32_t j = 0; j < c->njobs; j++)
    if (strcmp(c->jobs[j].name, chief_type) != 0 && strcmp(c->jobs[j].name, "ps") != 0) ord[n++] = c->jobs[j].name;
  qsort(ord + first_other, (size_t)(n - first_other), sizeof(char *), cmp_str);
  if (tfc_find(c, "ps")) ord[n++] = "ps";
  int id = -1, next = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(ord[i], c->task_type) == 0) {
      id = next + c->task_id;
      break;
    }
    next += tfc_count(c, ord[i]);
  }
  loom__free(heap);
  return id;
}

static loom_code tfc_set_master(loom_tf_config *c, const char *session_master, loom_status *st) {
  const char *m = "";
  char *grpc = NULL;
  if (session_master) {
    m = session_master;
  } else if (!(c->njobs == 1 && c->jobs[0].n == 1)) {
    const tfc_job *jb = tfc_find(c, c->task_type);
    const char *addr = jb->addrs[c->task_id];
    size_t len = strlen(addr) + sizeof "grpc://";
    grpc = loom__malloc(len);
    if (!grpc) return TFC_OOM();
    snprintf(grpc, len, "grpc://%s", addr);
  }
  c->master = grpc ? grpc : loom__strdup(m);
  if (!c->master) return TFC_OOM();
  return LOOM_OK;
}

static loom_code tfc_parse_obj(loom_tf_config *c, const cJSON *root, loom_status *st) {
  loom_code rc;
  if (!cJSON_IsObject(root))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: the top level must be a JSON object");
  const char *model_dir = NULL, *session_master = NULL;
  if ((rc = tfc_string(root, "model_dir", "", &model_dir, st))) return rc;
  if ((rc = tfc_string(root, "session_master", "", &session_master, st))) return rc;
  if (model_dir) {
    c->model_dir = loom__strdup(model_dir);
    if (!c->model_dir) return TFC_OOM();
  }
  if ((rc = tfc_read_cluster(c, cJSON_GetObjectItemCaseSensitive(root, "cluster"), st))) return rc;

  /* task */
  const cJSON *task = cJSON_GetObjectItemCaseSensitive(root, "task");
  if (task && !cJSON_IsNull(task) && !cJSON_IsObject(task))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"task\" must be an object {\"type\": ..., \"index\": ...}");
  if (task && cJSON_IsNull(task)) task = NULL;
  const char *type = NULL;
  if (task && (rc = tfc_string(task, "type", "\"task\".", &type, st))) return rc;
  if (type && !*type) type = NULL; /* TF: `if not task_type` */
  int has_index = 0;
  int64_t index = 0;
  const cJSON *idx = task ? cJSON_GetObjectItemCaseSensitive(task, "index") : NULL;
  if (idx && !cJSON_IsNull(idx)) {
    double d = idx->valuedouble;
    if (!cJSON_IsNumber(idx) || !(d == floor(d)) || fabs(d) > 2147483647.0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"task\".\"index\" must be an integer");
    has_index = 1;
    index = (int64_t)d;
  }
  if (type && !tfc_valid_type(type))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"task\".\"type\" \"%s\" is not one of chief, worker, ps, evaluator, master",
                           type);

  if (c->njobs == 0) {
    /* local mode */
    if (type && strcmp(type, "worker") != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "TF_CONFIG: if \"cluster\" is not set, \"task\".\"type\" must be \"worker\" (got \"%s\")",
                             type);
    if (index != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "TF_CONFIG: if \"cluster\" is not set, \"task\".\"index\" must be 0 (got %lld)",
                             (long long)index);
    c->task_type = loom__strdup("worker");
    c->master = loom__strdup(session_master ? session_master : "");
    if (!c->task_type || !c->master) return TFC_OOM();
    c->task_id = 0;
    c->is_chief = 1;
    c->num_ps = 0;
    c->num_workers = 1;
    c->global_id = 0;
    return LOOM_OK;
  }

  /* distributed */
  int legacy = tfc_find(c, "master") != NULL;
  const char *chief_type = legacy ? "master" : "chief";
  if (legacy && tfc_find(c, "chief"))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"cluster\" has a \"master\" job, so a \"chief\" job is not supported");
  /* a cluster of workers alone (no chief, no ps: a collective job): worker 0 is the chief */
  int workers_only = !legacy && !tfc_find(c, "chief") && !tfc_find(c, "ps") && tfc_count(c, "worker") > 0;
  if (!workers_only && !tfc_find(c, chief_type))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"cluster\" must have one \"%s\" node (only a cluster of \"worker\" tasks "
                           "without \"ps\" tasks, a collective job, may have none: its worker 0 is the chief)",
                           chief_type);
  if (!workers_only && tfc_count(c, chief_type) != 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"cluster\" must have exactly one \"%s\" node (has %d)", chief_type,
                           tfc_count(c, chief_type));
  if (!type)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"cluster\" is set, so \"task\".\"type\" must be set");
  if (!has_index)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"cluster\" is set, so \"task\".\"index\" must be set");
  if (index < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: \"task\".\"index\" must be non-negative (got %lld)",
                           (long long)index);
  c->task_type = loom__strdup(type);
  if (!c->task_type) return TFC_OOM();
  c->task_id = (int32_t)index;

  if (strcmp(type, "evaluator") == 0) {
    if (legacy)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "TF_CONFIG: \"cluster\" has a \"master\" job, so \"task\".\"type\" \"evaluator\" is not "
                             "supported");
    if (index != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "TF_CONFIG: \"task\".\"index\" of the evaluator must be 0 (got %lld)", (long long)index);
    /* the evaluator is not part of the training cluster */
    tfc_clear_cluster(c);
    c->master = loom__strdup("");
    if (!c->master) return TFC_OOM();
    c->is_chief = 0;
    c->num_ps = 0;
    c->num_workers = 0;
    c->global_id = -1;
    return LOOM_OK;
  }
  const tfc_job *jb = tfc_find(c, type);
  if (!jb)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"task\".\"type\" \"%s\" is not a job of \"cluster\"", type);
  if (index >= jb->n)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG: \"task\".\"index\" %lld is out of range for job \"%s\" with %d task%s",
                           (long long)index, type, jb->n, jb->n == 1 ? "" : "s");
  if ((rc = tfc_set_master(c, session_master, st))) return rc;
  c->is_chief = workers_only ? strcmp(type, "worker") == 0 && index == 0 : strcmp(type, chief_type) == 0;
  c->num_ps = tfc_count(c, "ps");
  c->num_workers = tfc_count(c, "worker") + tfc_count(c, chief_type);
  c->global_id = tfc_global_id(c, chief_type);
  if (c->global_id < 0) return TFC_OOM();
  return LOOM_OK;
}

loom_tf_config *loom_tf_config_parse(const char *json, loom_status *st) {
  if (!json) json = getenv("TF_CONFIG");
  if (!json) json = "";
  const char *p = json;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  loom_tf_config *c = loom__calloc(1, sizeof *c);
  if (!c) {
    TFC_OOM();
    return NULL;
  }
  loom_code rc;
  if (!*p) {
    cJSON *empty = cJSON_CreateObject();
    if (!empty) {
      TFC_OOM();
      loom_tf_config_free(c);
      return NULL;
    }
    rc = tfc_parse_obj(c, empty, st);
    cJSON_Delete(empty);
  } else {
    const char *errp = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &errp, 1);
    if (!root) {
      long off = errp ? (long)(errp - json) : -1;
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: malformed JSON near offset %ld: %.32s", off,
                           errp ? errp : "");
    } else {
      rc = tfc_parse_obj(c, root, st);
      cJSON_Delete(root);
    }
  }
  if (rc) {
    loom_tf_config_free(c);
    return NULL;
  }
  return c;
}

const char *loom_tf_config_task_type(const loom_tf_config *c) { return c ? c->task_type : NULL; }
int loom_tf_config_task_id(const loom_tf_config *c) { return c ? c->task_id : 0; }
int loom_tf_config_is_chief(const loom_tf_config *c) { return c ? c->is_chief : 0; }
int loom_tf_config_num_ps_replicas(const loom_tf_config *c) { return c ? c->num_ps : 0; }
int loom_tf_config_num_worker_replicas(const loom_tf_config *c) { return c ? c->num_workers : 0; }
int loom_tf_config_global_id(const loom_tf_config *c) { return c ? c->global_id : -1; }
const char *loom_tf_config_master(const loom_tf_config *c) { return c ? c->master : NULL; }
const char *loom_tf_config_model_dir(const loom_tf_config *c) { return c ? c->model_dir : NULL; }
int loom_tf_config_num_tasks(const loom_tf_config *c, const char *job) { return tfc_count(c, job); }
const char *loom_tf_config_address(const loom_tf_config *c, const char *job, int index) {
  const tfc_job *jb = tfc_find(c, job);
  if (!jb || index < 0 || index >= jb->n) return NULL;
  return jb->addrs[index];
}

