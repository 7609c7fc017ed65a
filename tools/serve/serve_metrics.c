/* loom-serve: the counters behind GET /monitoring/prometheus/metrics, in Prometheus' text
 * exposition format (version 0.0.4). Only the loop thread touches them, so there are no locks.
 *   loom_serve_requests_total{model_name, version, api, code}    counter
 *   loom_serve_request_latency_seconds{model_name, version, api}  histogram
 *   loom_serve_http_responses_total{code}                         counter, every HTTP reply */
#include <stdlib.h>
#include <string.h>
#include "serve.h"

static const double BUCKETS[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                 0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
#define NBUCKETS (int)(sizeof BUCKETS / sizeof BUCKETS[0])
#define NCODES 8

struct serve_series {
  char *model;
  int64_t version;
  int api;
  int codes[NCODES];
  unsigned long long count[NCODES];
  unsigned long long le[NBUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
  double sum;
  struct serve_series *next;
};

static serve_series *all, **tail = &all;
static unsigned long long http[600];
static const char *const API[3] = {"predict", "classify", "regress"};

serve_series *serve_series_get(const char *model, int64_t ver, int api) {
  for (serve_series *s = all; s; s = s->next)
    if (s->version == ver && s->api == api && !strcmp(s->model, model)) return s;
  serve_series *s = calloc(1, sizeof *s);
  if (!s || !(s->model = strdup(model))) {
    free(s);
    return NULL;
  }
  s->version = ver;
  s->api = api;
  *tail = s;
  tail = &s->next;
  return s;
}

void serve_series_observe(serve_series *s, int status, double seconds) {
  if (!s) return;
  int k = 0; /* slots 0 .. NCODES - 2 hold one code each; the last one counts the rest ("other") */
  while (k < NCODES - 1 && s->codes[k] && s->codes[k] != status) k++;
  if (k < NCODES - 1 && !s->codes[k]) s->codes[k] = status;
  s->count[k]++;
  if (seconds < 0) seconds = 0;
  int b = 0;
  while (b < NBUCKETS && seconds > BUCKETS[b]) b++;
  s->le[b]++;
  s->sum += seconds;
}

void serve_metrics_http(int status) {
  if (status >= 100 && status < 600) http[status]++;
}

void serve_metrics_label(sb *b, const char *v) {
  for (; *v; v++) {
    if (*v == '\\') sb_puts(b, "\\\\");
    else if (*v == '"') sb_puts(b, "\\\"");
    else if (*v == '\n') sb_puts(b, "\\n");
    else sb_put(b, v, 1);
  }
}
static void series_labels(sb *b, const serve_series *s) {
  sb_puts(b, "model_name=\"");
  serve_metrics_label(b, s->model);
  if (s->version >= 0) sb_printf(b, "\",version=\"%lld\",api=\"%s\"", (long long)s->version, API[s->api]);
  else sb_printf(b, "\",version=\"\",api=\"%s\"", API[s->api]);
}

void serve_metrics_write(sb *b) {
  sb_puts(b, "# HELP loom_serve_requests_total Predict, classify and regress requests answered, by model, version, "
             "API and HTTP status code.\n# TYPE loom_serve_requests_total counter\n");
  for (const serve_series *s = all; s; s = s->next)
    for (int k = 0; k < NCODES; k++) {
      if (!s->count[k]) continue;
      sb_puts(b, "loom_serve_requests_total{");
      series_labels(b, s);
      if (s->codes[k]) sb_printf(b, ",code=\"%d\"} %llu\n", s->codes[k], s->count[k]);
      else sb_printf(b, ",code=\"other\"} %llu\n", s->count[k]);
    }
  sb_puts(b, "# HELP loom_serve_request_latency_seconds Time from a complete request to its reply, by model, "
             "version and API.\n# TYPE loom_serve_request_latency_seconds histogram\n");
  for (const serve_series *s = all; s; s = s->next) {
    unsigned long long cum = 0;
    for (int i = 0; i <= NBUCKETS; i++) {
      cum += s->le[i];
      sb_puts(b, "loom_serve_request_latency_seconds_bucket{");
      series_labels(b, s);
      if (i < NBUCKETS) sb_printf(b, ",le=\"%g\"} %llu\n", BUCKETS[i], cum);
      else sb_printf(b, ",le=\"+Inf\"} %llu\n", cum);
    }
    sb_puts(b, "loom_serve_request_latency_seconds_sum{");
    series_labels(b, s);
    sb_printf(b, "} %.9g\nloom_serve_request_latency_seconds_count{", s->sum);
    series_labels(b, s);
    sb_printf(b, "} %llu\n", cum);
  }
  sb_puts(b, "# HELP loom_serve_http_responses_total HTTP replies of every kind, by status code.\n"
             "# TYPE loom_serve_http_responses_total counter\n");
  for (int c = 100; c < 600; c++)
    if (http[c]) sb_printf(b, "loom_serve_http_responses_total{code=\"%d\"} %llu\n", c, http[c]);
}
