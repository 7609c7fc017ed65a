/* summary/trace.c - Chrome trace files from session run traces
 * (loom_session_last_trace): {"traceEvents":[{"name","cat":"op","ph":"X",
 * "ts","dur" (microseconds),"pid":0,"tid","args":{"op"}}, ...]}, the format
 * chrome://tracing and Perfetto load. Written atomically (tmp + rename). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base/base.h"
#include "loom/loom_summary.h"

static cJSON *trace_json(const loom_trace_event *ev, int n) {
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
  if (!arr) goto oom;
  for (int i = 0; i < n; i++) {
    const loom_trace_event *e = &ev[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) goto oom;
    cJSON_AddItemToArray(arr, o);
    cJSON *args;
    if (!cJSON_AddStringToObject(o, "name", e->node ? e->node : "") || !cJSON_AddStringToObject(o, "cat", "op") ||
        !cJSON_AddStringToObject(o, "ph", "X") || !cJSON_AddNumberToObject(o, "ts", (double)e->start_ns / 1e3) ||
        !cJSON_AddNumberToObject(o, "dur", (double)e->dur_ns / 1e3) || !cJSON_AddNumberToObject(o, "pid", 0) ||
        !cJSON_AddNumberToObject(o, "tid", e->thread) || !(args = cJSON_AddObjectToObject(o, "args")) ||
        !cJSON_AddStringToObject(args, "op", e->op ? e->op : ""))
      goto oom;
  }
  if (!cJSON_AddStringToObject(root, "displayTimeUnit", "ns")) goto oom;
  return root;
oom:
  cJSON_Delete(root);
  return NULL;
}

loom_code loom_trace_write_chrome(const char *path, const loom_trace_event *ev, int n, loom_status *st) {
  if (!path || !*path) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "chrome trace: path is empty");
  if (n < 0 || (n && !ev)) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "chrome trace %s: no events", path);
  cJSON *root = trace_json(ev, n);
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "chrome trace %s: out of memory", path);
  size_t plen = strlen(path) + 32;
  char *tmp = loom__malloc(plen);
  loom_code rc = LOOM_OK;
  if (!tmp) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "chrome trace %s: out of memory", path);
    goto out;
  }
  static atomic_int seq;
  snprintf(tmp, plen, "%s.tmp%ld.%d", path, (long)getpid(), atomic_fetch_add(&seq, 1));
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    rc = loom_status_set(st, errno == EACCES ? LOOM_PERMISSION_DENIED : errno == ENOENT ? LOOM_NOT_FOUND : LOOM_INTERNAL,
                         "chrome trace: cannot create %s: %s", tmp, strerror(errno));
    goto out;
  }
  size_t len = strlen(text);
  int bad = fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF;
  bad |= fclose(f) != 0;
  if (bad) {
    rc = loom_status_set(st, LOOM_INTERNAL, "chrome trace: writing %s: %s", tmp, strerror(errno));
    unlink(tmp);
    goto out;
  }
  if (rename(tmp, path) != 0) {
    rc = loom_status_set(st, LOOM_INTERNAL, "chrome trace: renaming %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp);
  }
out:
  loom__free(tmp);
  cJSON_free(text);
  return rc;
}
