/* distributed/job_env.c - TF_CONFIG from a launcher's environment (mpirun,
 * Slurm), loom_job.h. Roles by rank: 0 chief, 1..num_ps ps, the last rank
 * the evaluator (when asked), the others workers; hosts from Slurm's node
 * list (block distribution, or SLURM_STEP_TASKS_PER_NODE), LOOM_JOB_HOST
 * or 127.0.0.1 under mpirun; port port_base + rank, or 0 (rendezvous
 * through model_dir, see loom_job.h). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "loom/loom_job.h"

void loom_job_string_free(char *s) { loom__free(s); }

typedef struct strlist {
  char **v;
  int n, cap;
} strlist;

static int sl_add(strlist *l, const char *s, size_t len) {
  if (l->n == l->cap) {
    int nc = l->cap ? l->cap * 2 : 16;
    char **nv = loom__realloc(l->v, sizeof *nv * (size_t)nc);
    if (!nv) return 0;
    l->v = nv;
    l->cap = nc;
  }
  char *c = loom__malloc(len + 1);
  if (!c) return 0;
  memcpy(c, s, len);
  c[len] = 0;
  l->v[l->n++] = c;
  return 1;
}

static void sl_free(strlist *l) {
  for (int i = 0; i < l->n; i++) loom__free(l->v[i]);
  loom__free(l->v);
}

/* Slurm's hostlist syntax: "n[01-03,07],gpu5,a[1-2]b" (one bracket group per name). */
static int expand_nodelist(const char *s, strlist *out, loom_status *st) {
  const char *p = s;
  while (*p) {
    const char *start = p;
    while (*p && *p != ',' && *p != '[') p++;
    size_t plen = (size_t)(p - start);
    if (*p == '[') {
      const char *close = strchr(p, ']');
      if (!close) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s': '[' without ']'", s);
        return 0;
      }
      const char *suf = close + 1, *se = suf;
      while (*se && *se != ',') se++;
      char pre[256], sfx[256];
      if (plen >= sizeof pre || (size_t)(se - suf) >= sizeof sfx) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s': a name is too long", s);
        return 0;
      }
      memcpy(pre, start, plen);
      pre[plen] = 0;
      memcpy(sfx, suf, (size_t)(se - suf));
      sfx[se - suf] = 0;
      const char *r = p + 1;
      while (r < close) {
        const char *re = r;
        while (re < close && *re != ',') re++;
        char a[32] = "", b[32] = "";
        const char *dash = memchr(r, '-', (size_t)(re - r));
        size_t al = (size_t)((dash ? dash : re) - r);
        if (al == 0 || al >= sizeof a) {
          loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s': bad range", s);
          return 0;
        }
        memcpy(a, r, al);
        if (dash) {
          size_t bl = (size_t)(re - dash - 1);
          if (bl == 0 || bl >= sizeof b) {
            loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s': bad range", s);
            return 0;
          }
          memcpy(b, dash + 1, bl);
        } else {
          memcpy(b, a, al + 1);
        }
        for (const char *q = a; *q; q++)
          if (!isdigit((unsigned char)*q)) goto bad;
        for (const char *q = b; *q; q++)
          if (!isdigit((unsigned char)*q)) goto bad;
        long lo = atol(a), hi = atol(b);
        if (hi < lo || hi - lo > 100000) goto bad;
        int width = (int)strlen(a);
        for (long k = lo; k <= hi; k++) {
          char name[600];
          int n = snprintf(name, sizeof name, "%s%0*ld%s", pre, width, k, sfx);
          if (!sl_add(out, name, (size_t)n)) {
            loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
            return 0;
          }
        }
        r = re < close ? re + 1 : re;
      }
      p = se;
    } else if (plen > 0 && !sl_add(out, start, plen)) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      return 0;
    }
    if (*p == ',') p++;
  }
  if (out->n == 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s' names no node", s);
    return 0;
  }
  return 1;
bad:
  loom_status_set(st, LOOM_INVALID_ARGUMENT, "node list '%s': bad range", s);
  return 0;
}

static int env_int(const char *name, long *v) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long x = strtol(s, &end, 10);
  if (*end) return -1;
  *v = x;
  return 1;
}

/* The node of task r: SLURM_STEP_TASKS_PER_NODE ("2(x3),1") or blocks. */
static const char *slurm_host(const strlist *nodes, long r, long n) {
  const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
  if (!tpn) tpn = getenv("SLURM_TASKS_PER_NODE");
  if (tpn && *tpn) {
    long acc = 0;
    int node = 0;
    const char *p = tpn;
    while (*p && node < nodes->n) {
      char *end;
      long cnt = strtol(p, &end, 10), rep = 1;
      if (end == p) break;
      p = end;
      if (*p == '(' && p[1] == 'x') {
        rep = strtol(p + 2, &end, 10);
        p = end;
        if (*p == ')') p++;
      }
      for (long k = 0; k < rep && node < nodes->n; k++, node++) {
        if (r < acc + cnt) return nodes->v[node];
        acc += cnt;
      }
      if (*p == ',') p++;
    }
  }
  long idx = r * nodes->n / (n > 0 ? n : 1);
  return nodes->v[idx < nodes->n ? idx : nodes->n - 1];
}

static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return 0;
    if (*buf && *len + (size_t)n < *cap) {
      *len += (size_t)n;
      return 1;
    }
    size_t nc = (*cap ? *cap * 2 : 1024) + (size_t)n;
    char *nb = loom__realloc(*buf, nc);
    if (!nb) return 0;
    *buf = nb;
    *cap = nc;
  }
}

char *loom_job_tf_config_from_env(const char *launcher, int num_ps, int evaluator, int port_base, loom_status *st) {
  long rank = -1, size = -1;
  int slurm;
  if (launcher && strcmp(launcher, "mpi") && strcmp(launcher, "slurm")) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "launcher '%s' is not mpi or slurm", launcher);
    return NULL;
  }
  if (num_ps < 1 || port_base < 0 || port_base > 65535) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "num_ps must be >= 1 (got %d) and port_base in [0, 65535] (got %d)",
                    num_ps, port_base);
    return NULL;
  }
  if (launcher)
    slurm = !strcmp(launcher, "slurm");
  else
    slurm = getenv("SLURM_PROCID") != NULL && getenv("OMPI_COMM_WORLD_RANK") == NULL;
  const char *rn, *sn;
  if (slurm) {
    rn = "SLURM_PROCID";
    sn = "SLURM_NTASKS";
  } else if (getenv("OMPI_COMM_WORLD_RANK")) {
    rn = "OMPI_COMM_WORLD_RANK";
    sn = "OMPI_COMM_WORLD_SIZE";
  } else if (getenv("PMIX_RANK")) {
    rn = "PMIX_RANK";
    sn = getenv("OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  } else {
    rn = "PMI_RANK";
    sn = "PMI_SIZE";
  }
  if (!slurm && !getenv("OMPI_COMM_WORLD_RANK") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "mpi launcher: none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK is set (run under mpirun)");
    return NULL;
  }
  int a = env_int(rn, &rank), b = env_int(sn, &size);
  if (a <= 0 || b <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s launcher: %s and %s must be set to integers (got '%s', '%s')",
                    slurm ? "slurm" : "mpi", rn, sn, getenv(rn) ? getenv(rn) : "(unset)",
                    getenv(sn) ? getenv(sn) : "(unset)");
    return NULL;
  }
  long need = 1 + num_ps + (evaluator ? 1 : 0);
  if (size < need || rank < 0 || rank >= size) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "%s=%ld, %s=%ld: a job with %d PS%s needs at least %ld tasks and a rank below their count", rn,
                    rank, sn, size, num_ps, evaluator ? " and an evaluator" : "", need);
    return NULL;
  }
  strlist nodes = {0};
  if (slurm) {
    const char *nl = getenv("SLURM_STEP_NODELIST");
    if (!nl) nl = getenv("SLURM_JOB_NODELIST");
    if (!nl || !*nl) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "slurm launcher: SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) is unset");
      return NULL;
    }
    if (!expand_nodelist(nl, &nodes, st)) {
      sl_free(&nodes);
      return NULL;
    }
  }
  const char *local = getenv("LOOM_JOB_HOST");
  if (!local || !*local) local = "127.0.0.1";
  long nwork = size - need + (evaluator ? 0 : 0);
  long eval_rank = evaluator ? size - 1 : -1;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int ok = 1;
#define HOST(r) (slurm ? slurm_host(&nodes, (r), size) : local)
#define PORT(r) (port_base ? port_base + (int)(r) : 0)
  ok &= appendf(&buf, &len, &cap, "{\"cluster\": {\"chief\": [\"%s:%d\"], \"ps\": [", HOST(0), PORT(0));
  for (long i = 0; i < num_ps && ok; i++)
    ok &= appendf(&buf, &len, &cap, "%s\"%s:%d\"", i ? ", " : "", HOST(1 + i), PORT(1 + i));
  ok &= appendf(&buf, &len, &cap, "]");
  if (nwork > 0) {
    ok &= appendf(&buf, &len, &cap, ", \"worker\": [");
    for (long i = 0; i < nwork && ok; i++)
      ok &= appendf(&buf, &len, &cap, "%s\"%s:%d\"", i ? ", " : "", HOST(1 + num_ps + i), PORT(1 + num_ps + i));
    ok &= appendf(&buf, &len, &cap, "]");
  }
  const char *type;
  long index;
  if (rank == 0)
    type = "chief", index = 0;
  else if (rank <= num_ps)
    type = "ps", index = rank - 1;
  else if (rank == eval_rank)
    type = "evaluator", index = 0;
  else
    type = "worker", index = rank - 1 - num_ps;
  ok &= appendf(&buf, &len, &cap, "}, \"task\": {\"type\": \"%s\", \"index\": %ld}, \"environment\": \"cloud\"}", type,
                index);
#undef HOST
#undef PORT
  sl_free(&nodes);
  if (!ok) {
    loom__free(buf);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  return buf;
}
