/* distributed/collective_tf.c - the ranks of a collective job launched by TF_CONFIG alone
 * (distributed/collective.h): the trainers in TF's order, chief (or master) first, then the workers by
 * index; rank 0 serves the transport's rendezvous at its TF_CONFIG address. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "distributed/collective.h"
#include "loom/loom_distributed.h"

/* host of "host:port" or "[v6]:port" into out (without brackets). */
static void host_of(const char *addr, char *out, size_t cap) {
  const char *c = strrchr(addr, ':');
  size_t n = c ? (size_t)(c - addr) : strlen(addr);
  if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') addr++, n -= 2;
  snprintf(out, cap, "%.*s", (int)n, addr);
}

int loom__coll_tf_config(const char *json, loom__coll_tf *out, loom_status *st) {
  memset(out, 0, sizeof *out);
  const char *tf = json ? json : getenv("TF_CONFIG");
  if (!tf || !tf[0]) return 0;
  loom_tf_config *c = loom_tf_config_parse(tf, st);
  if (!c) return -1;
  const char *lead = loom_tf_config_num_tasks(c, "master") > 0 ? "master" : "chief";
  int nc = loom_tf_config_num_tasks(c, lead), nw = loom_tf_config_num_tasks(c, "worker");
  const char *type = loom_tf_config_task_type(c);
  int trainer = !strcmp(type, lead) || !strcmp(type, "worker");
  int yes = nc + nw > 0 && loom_tf_config_num_tasks(c, "ps") == 0 && trainer;
  if (yes) {
    out->size = nc + nw;
    out->rank = !strcmp(type, "worker") ? nc + loom_tf_config_task_id(c) : 0;
    snprintf(out->rank0, sizeof out->rank0, "%s", nc ? loom_tf_config_address(c, lead, 0)
                                                     : loom_tf_config_address(c, "worker", 0));
    host_of(loom_tf_config_address(c, type, loom_tf_config_task_id(c)), out->host, sizeof out->host);
    size_t u = 0;
    for (int r = 0; r < out->size && u + 32 < sizeof out->names; r++)
      u += (size_t)snprintf(out->names + u, sizeof out->names - u, "%s%s:%d", r ? "," : "", r < nc ? lead : "worker",
                            r < nc ? r : r - nc);
  }
  loom_tf_config_free(c);
  return yes;
}
