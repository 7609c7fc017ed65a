/* bench/ps: the parameter server on loopback, each figure beside its
 * yardstick in the same run, printed as key=value lines.
 *  - dense push+pull MB/s (bytes both ways / time) of 4 MB and 64 MB tensors
 *    (SGD on the PS), vs a plain TCP stream between two processes (target
 *    >= 50%) and TF's 162 MB/s gRPC figure (target >= 10x); best of three
 *    alternating trials of each;
 *  - small-RPC latency: PULL of one scalar, p50/p99 (targets 50 / 500 us),
 *    with the PS's and client's busy_poll_us at 50 and off (the default), beside a
 *    plain TCP ping-pong between two processes (48 bytes each way, blocking
 *    recv: the same two thread wake-ups per round trip as a scalar pull)
 *    and the same ping-pong with both sides polling non-blocking recv;
 *  - sparse rows/s (d = 16, Adagrad, 4096 unique ids per push; target >= 2 M);
 *  - bytes on the wire per training step (3 PS: a partitioned dense layer,
 *    small dense variables, an embedding spread by row mod 3) vs the
 *    analytic payload (gradients + values + ids), counted by the client and
 *    by the servers (target: within 5%).
 * --quick: fewer repetitions (CI smoke run). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_util.h"
#include "loom/loom.h"
#include "loom/loom_distributed.h"
#include "distributed/ps_shm.h"
#include "distributed/ps_parts.h"

/* MB/s of one TCP stream from a child process to this one. */
static double tcp_stream_mbs(size_t total) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &al))
    return 0;
  size_t chunk = 1 << 20;
  char *buf = calloc(1, chunk);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) _exit(1);
    for (size_t sent = 0; sent < total;) {
      ssize_t w = write(fd, buf, chunk < total - sent ? chunk : total - sent);
      if (w <= 0) _exit(1);
      sent += (size_t)w;
    }
    close(fd);
    _exit(0);
  }
  int fd = accept(ls, NULL, NULL);
  double t0 = bu_now_us();
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf, chunk);
    if (r <= 0) break;
    got += (size_t)r;
  }
  double t1 = bu_now_us();
  close(fd);
  close(ls);
  waitpid(pid, NULL, 0);
  free(buf);
  return got == total ? (double)total / (t1 - t0) : 0; /* bytes/us = MB/s */
}

/* p50/p99 in us of a ping-pong of 48-byte messages with a child process:
 * spin 0: blocking recv on both sides; spin 1: both sides poll a
 * non-blocking recv (the floor: no wake-up at all). */
static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static ssize_t recv_all(int fd, char *b, size_t n, int spin) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, b + got, n - got, spin ? MSG_DONTWAIT : 0);
    if (r == 0) return 0;
    if (r < 0) {
      if (spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return (ssize_t)got;
}

static void tcp_pingpong(int n, int spin, double *p50, double *p99) {
  *p50 = *p99 = 0;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &al))
    return;
  pid_t pid = fork();
  if (pid == 0) { /* the echo side */
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) _exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char m[48];
    while (recv_all(fd, m, sizeof m, spin) == (ssize_t)sizeof m)
      if (send(fd, m, sizeof m, 0) != (ssize_t)sizeof m) break;
    close(fd);
    _exit(0);
  }
  int fd = accept(ls, NULL, NULL), one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  double *lat = malloc(sizeof(double) * (size_t)n);
  char m[48] = {1};
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    double t0 = bu_now_us();
    ok = send(fd, m, sizeof m, 0) == (ssize_t)sizeof m && recv_all(fd, m, sizeof m, spin) == (ssize_t)sizeof m;
    lat[i] = bu_now_us() - t0;
  }
  close(fd);
  close(ls);
  waitpid(pid, NULL, 0);
  if (ok) {
    qsort(lat, (size_t)n, sizeof *lat, cmp_dbl);
    *p50 = lat[n / 2];
    *p99 = lat[n * 99 / 100];
  }
  free(lat);
}

static void die(loom_status *st, const char *what) {
  fprintf(stderr, "bench/ps: %s: %s\n", what, loom_status_message(st));
  exit(1);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* bytes in + out counted by n servers */
static int64_t servers_bytes(loom_ps_server **srv, int n) {
  int64_t b = 0;
  for (int i = 0; i < n; i++) {
    loom_ps_server_stats x;
    loom_ps_server_get_stats(srv[i], &x);
    b += (int64_t)(x.bytes_in + x.bytes_out);
  }
  return b;
}

/* Bytes on the wire per training step against the analytic payload. */
static void wire_bytes(int quick, loom_status *st) {
  enum { NPS = 3, NV = 5, D = 16, BATCH = 4096 };
  loom_ps_var_spec vs[NV];
  memset(vs, 0, sizeof vs);
  const char *names[NV] = {"dense/kernel", "dense/bias", "out/kernel", "out/bias", "emb"};
  int64_t dims[NV][2] = {{1024, 256}, {256, 0}, {256, 10}, {10, 0}, {100000, D}};
  int nd[NV] = {2, 1, 2, 1, 2};
  for (int i = 0; i < NV; i++) {
    vs[i].name = names[i];
    vs[i].ndim = nd[i];
    vs[i].dims[0] = dims[i][0];
    vs[i].dims[1] = dims[i][1];
  }
  vs[4].sparse = 1;
  loom_ps_placement *p = loom_ps_placement_new(NV, vs, NPS, LOOM_PS_GREEDY_BYTES, 0, st);
  if (!p) die(st, "placement");
  loom_ps_server *srv[NPS];
  const char *hosts[NPS];
  int ports[NPS];
  for (int i = 0; i < NPS; i++) {
    loom_ps_server_options o = loom_ps_server_options_default();
    o.placement_hash = loom_ps_placement_hash(p);
    o.num_ps = NPS;
    o.num_vars = NV;
    o.ps_index = i;
    if (!(srv[i] = loom_ps_server_start(&o, st))) die(st, "start");
    hosts[i] = "127.0.0.1";
    ports[i] = loom_ps_server_port(srv[i]);
  }
  loom_ps_connect_options co = loom_ps_connect_options_default();
  co.timeout_s = 30;
  co.shm = 1; /* the TCP wire is what this measures */
  loom_ps_cluster *cl = loom_ps_cluster_connect(p, hosts, ports, &co, st);
  if (!cl) die(st, "cluster");
  float *val[NV], *grad[NV];
  int64_t numel[NV];
  for (int i = 0; i < NV; i++) {
    numel[i] = dims[i][0] * (nd[i] == 2 ? dims[i][1] : 1);
    val[i] = calloc((size_t)numel[i], 4);
    grad[i] = malloc((size_t)numel[i] * 4);
    for (int64_t k = 0; k < numel[i]; k++) grad[i][k] = 1e-3f;
    float hyper[8] = {0.01f, 0.1f};
    if (loom_ps_cluster_init_var(cl, i, LOOM_PS_ADAGRAD, hyper, val[i], st)) die(st, "init");
  }
  float *dv[NV] = {val[0], val[1], val[2], val[3], NULL}; /* the embedding travels as rows */
  const float *dg[NV] = {grad[0], grad[1], grad[2], grad[3], NULL};
  if (loom_ps_cluster_pull(cl, dv, st)) die(st, "pull");
  int64_t *ids = malloc(BATCH * 8), *lid = malloc(BATCH * 8);
  float *rows = malloc((size_t)BATCH * D * 4), *back = malloc((size_t)BATCH * D * 4);
  for (int i = 0; i < BATCH * D; i++) rows[i] = 1e-3f;
  int steps = quick ? 3 : 20;
  int64_t s0, r0, ss0, payload = 0;
  struct timespec settle = {0, 50000000}; /* the servers count a reply's bytes when its write completes */
  nanosleep(&settle, NULL);
  loom_ps_cluster_bytes(cl, &s0, &r0);
  ss0 = servers_bytes(srv, NPS);
  uint64_t rng = 88172645463325252ull;
  double t0 = bu_now_us();
  for (int step = 0; step < steps; step++) {
    /* a batch of ids with repeats (Zipf-like: many small ids): deduplicated as the worker does */
    for (int i = 0; i < BATCH; i++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      uint64_t r = rng % 100000;
      ids[i] = (int64_t)(r * r / 100000);
    }
    qsort(ids, BATCH, 8, cmp_i64);
    int nu = 0;
    for (int i = 0; i < BATCH; i++)
      if (!nu || ids[i] != ids[nu - 1]) ids[nu++] = ids[i];
    if (loom_ps_cluster_pushpull(cl, dg, dv, st)) die(st, "pushpull");
    for (int i = 0; i < 4; i++) payload += 2 * 4 * numel[i]; /* gradient up, value down */
    for (int j = 0; j < NPS; j++) { /* rows of shard j: id mod 3 == j, local id / 3 */
      const loom_ps_shard *sh = loom_ps_placement_shard(p, 0);
      for (int k = 0; k < loom_ps_placement_num_shards(p); k++) {
        sh = loom_ps_placement_shard(p, k);
        if (sh->var == 4 && sh->row_begin == j) break;
      }
      int m = 0;
      for (int i = 0; i < nu; i++)
        if (ids[i] % NPS == j) lid[m++] = ids[i] / NPS;
      loom_ps_client *c = loom_ps_cluster_client(cl, sh->ps);
      if (loom_ps_push_rows_at(c, sh->id, lid, m, D, rows, UINT64_MAX, NULL, NULL, st)) die(st, "push_rows");
      if (m && loom_ps_pull_rows(c, sh->id, lid, m, D, back, st)) die(st, "pull_rows");
      payload += (int64_t)m * (8 + 4 * D) * 2; /* ids + gradient rows up; ids up + rows down */
    }
  }
  double dt = bu_now_us() - t0;
  int64_t s1, r1, ss1;
  nanosleep(&settle, NULL);
  loom_ps_cluster_bytes(cl, &s1, &r1);
  ss1 = servers_bytes(srv, NPS);
  double wire = (double)(s1 - s0 + r1 - r0) / steps, ana = (double)payload / steps;
  printf("wire_step_ps=%d\n", NPS);
  printf("wire_bytes_per_step=%.0f\n", wire);
  printf("wire_server_bytes_per_step=%.0f\n", (double)(ss1 - ss0) / steps);
  printf("wire_analytic_payload_bytes_per_step=%.0f\n", ana);
  printf("wire_over_analytic=%.4f\n", wire / ana);
  printf("wire_within_5pct=%d\n", wire / ana <= 1.05 && wire / ana >= 0.95);
  printf("wire_step_ms=%.2f\n", dt / steps / 1000.0);
  loom_ps_cluster_free(cl);
  for (int i = 0; i < NPS; i++) loom_ps_server_stop(srv[i]);
  loom_ps_placement_free(p);
  for (int i = 0; i < NV; i++) free(val[i]), free(grad[i]);
  free(ids), free(lid), free(rows), free(back);
}

/* Client options for the PS s on this host (30 s timeout; every other field its default). */
static loom_ps_connect_options local_opts(loom_ps_server *s) {
  loom_ps_connect_options co = loom_ps_connect_options_default();
  co.host = "127.0.0.1";
  co.port = loom_ps_server_port(s);
  co.timeout_s = 30;
  return co;
}

/* Scalar PULL and PING latency on a PS and a client of their own, both with busy_poll_us = poll. */
static void small_rpc(int nr, int poll, const char *tag) {
  loom_status *st = loom_status_new();
  loom_ps_server_options so = loom_ps_server_options_default();
  so.busy_poll_us = poll;
  loom_ps_server *s = loom_ps_server_start(&so, st);
  if (!s) die(st, "start");
  loom_ps_connect_options co = local_opts(s);
  co.busy_poll_us = poll;
  loom_ps_client *c = loom_ps_connect(&co, st);
  if (!c) die(st, "connect");
  int64_t one = 1;
  float x = 0, hyper[8] = {1e-6f};
  if (loom_ps_init_var(c, 2, 1, &one, LOOM_PS_SGD, hyper, &x, NULL, st)) die(st, "init");
  double *lat = malloc(sizeof(double) * (size_t)nr);
  double cpu0 = bu_cpu_us(), w0 = bu_now_us();
  for (int i = 0; i < nr; i++) {
    uint64_t ver = UINT64_MAX;
    double t0 = bu_now_us();
    if (loom_ps_pull(c, 2, &x, 1, &ver, NULL, st)) die(st, "pull");
    lat[i] = bu_now_us() - t0;
  }
  double cpu = (bu_cpu_us() - cpu0) / (bu_now_us() - w0); /* cores busy (PS + client: one process) */
  qsort(lat, (size_t)nr, sizeof *lat, bu_cmp_d);
  printf("scalar_pull%s_p50_us=%.1f\n", tag, lat[nr / 2]);
  printf("scalar_pull%s_p99_us=%.1f\n", tag, lat[nr * 99 / 100]);
  printf("scalar_pull%s_cpu_cores=%.2f\n", tag, cpu);
  printf("scalar_pull%s_busy_poll_us=%d\n", tag, poll);
  if (!*tag) printf("scalar_pull_target_p50_us=50\nscalar_pull_target_p99_us=500\n");
  for (int i = 0; i < nr; i++) {
    double t0 = bu_now_us();
    if (loom_ps_ping(c, NULL, st)) die(st, "ping");
    lat[i] = bu_now_us() - t0;
  }
  qsort(lat, (size_t)nr, sizeof *lat, bu_cmp_d);
  printf("ping%s_p50_us=%.1f\n", tag, lat[nr / 2]); /* the loop thread alone */
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  free(lat);
  loom_status_free(st);
}

/* One 2 MiB dense push+pull (SGD) through the same-host shared segment vs over loopback TCP, the
 * yardstick being the two 2 MiB memcpys the shm path makes on the client (gradient in, value out);
 * trials alternate and each side keeps its best (the VM is shared). */
static void dense_shm(int quick, loom_status *st) {
  loom_ps_server_options so = loom_ps_server_options_default();
  loom_ps_server *s = loom_ps_server_start(&so, st);
  if (!s) die(st, "start");
  loom_ps_connect_options co = local_opts(s);
  co.part_bytes = -1; /* one frame over TCP, as in the earlier figures */
  co.shm = 1; /* both plain; the second attaches by hand (one variable, no cluster) */
  loom_ps_client *tcp = loom_ps_connect(&co, st), *shm = loom_ps_connect(&co, st);
  if (!tcp || !shm) die(st, "connect");
  const int64_t n = (2 << 20) / 4;
  uint32_t id = 0;
  float hyper[8] = {1e-6f}, *g = calloc((size_t)n, 4), *v = calloc((size_t)n, 4), *y = calloc((size_t)n, 4);
  if (loom_ps_init_var(tcp, id, 1, &n, LOOM_PS_SGD, hyper, v, NULL, st)) die(st, "init");
  int attached = loom__ps_shm_attach(shm, 1, &id, &n, st) == LOOM_OK;
  if (!attached) fprintf(stderr, "bench/ps: shm attach refused: %s\n", loom_status_message(st));
  int reps = quick ? 20 : 300;
  double best_tcp = 1e30, best_shm = 1e30, best_cpy = 1e30;
  for (int trial = 0; trial < (quick ? 1 : 5); trial++) {
    double t0 = bu_now_us();
    for (int r = 0; r < reps; r++)
      if (loom_ps_pushpull(tcp, id, g, v, n, NULL, st)) die(st, "tcp pushpull");
    double t1 = bu_now_us();
    for (int r = 0; r < reps; r++)
      if (loom_ps_pushpull(shm, id, g, v, n, NULL, st)) die(st, "shm pushpull");
    double t2 = bu_now_us();
    for (int r = 0; r < reps; r++) {
      memcpy(y, g, (size_t)n * 4);
      __asm__ volatile("" ::"r"(y) : "memory");
      memcpy(v, y, (size_t)n * 4);
      __asm__ volatile("" ::"r"(v) : "memory");
    }
    double t3 = bu_now_us();
    if ((t1 - t0) / reps < best_tcp) best_tcp = (t1 - t0) / reps;
    if ((t2 - t1) / reps < best_shm) best_shm = (t2 - t1) / reps;
    if ((t3 - t2) / reps < best_cpy) best_cpy = (t3 - t2) / reps;
  }
  loom_ps_server_stats ss;
  loom_ps_server_get_stats(s, &ss);
  printf("dense_pushpull_2mb_transport_shm=%s\n", attached ? "shm" : "tcp(refused)");
  printf("dense_pushpull_2mb_tcp_us=%.1f\n", best_tcp);
  printf("dense_pushpull_2mb_shm_us=%.1f\n", best_shm);
  printf("memcpy_2x2mb_us=%.1f\n", best_cpy);
  printf("dense_pushpull_2mb_shm_over_tcp=%.3f\n", best_shm / best_tcp);
  printf("dense_pushpull_2mb_shm_over_memcpy=%.2f\n", best_shm / best_cpy);
  printf("ps_shm_requests=%lld\n", (long long)ss.shm_requests);
  loom_ps_client_free(tcp);
  loom_ps_client_free(shm);
  loom_ps_server_stop(s);
  free(g), free(v), free(y);
}

/* A 2 MB dense push+pull (the scaling model's shard), one frame vs the pipelined parts (ps_parts.h),
 * alternating trials on one PS; best trial of each. */
static void dense_parts(loom_ps_server *s, int quick) {
  loom_status *st = loom_status_new();
  loom_ps_connect_options co = local_opts(s);
  co.max_frame = 80u << 20;
  co.part_bytes = -1;
  loom_ps_client *c1 = loom_ps_connect(&co, st);
  const char *pb = getenv("LOOM_PS_PART_BYTES"); /* tuning: the part size (default 128 KiB) */
  co.part_bytes = pb && *pb ? (int32_t)atoi(pb) : 0;
  loom_ps_client *cp = loom_ps_connect(&co, st);
  if (!c1 || !cp) die(st, "connect");
  int64_t n = (2 << 20) / 4;
  float *g = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
  float hyper[8] = {1e-6f, 0.1f};
  if (loom_ps_init_var(c1, 7, 1, &n, LOOM_PS_SGD, hyper, v, NULL, st)) die(st, "init");
  int reps = quick ? 5 : 100;
  double best[2] = {1e30, 1e30};
  for (int trial = 0; trial < (quick ? 1 : 5); trial++)
    for (int k = 0; k < 2; k++) {
      loom_ps_client *c = k ? cp : c1;
      if (loom_ps_pushpull(c, 7, g, v, n, NULL, st)) die(st, "pushpull"); /* warm */
      double t0 = bu_now_us();
      for (int r = 0; r < reps; r++)
        if (loom_ps_pushpull(c, 7, g, v, n, NULL, st)) die(st, "pushpull");
      double us = (bu_now_us() - t0) / reps;
      if (us < best[k]) best[k] = us;
    }
  printf("dense_pushpull_2mb_us=%.1f\n", best[0]);
  printf("dense_pushpull_2mb_parts_us=%.1f\n", best[1]);
  printf("dense_pushpull_2mb_parts_speedup=%.3f\n", best[0] / best[1]);
  printf("dense_part_bytes=%d\n", co.part_bytes ? co.part_bytes : 128 << 10);
  /* the parts client's part size after the runs: 0 means it sent one frame too (parts off by
   * LOOM_PS_PART_BYTES, or refused by the PS), so the ratio above compares one frame with itself */
  int64_t pe = loom__ps_parts_elems(cp, n);
  printf("dense_parts_elems=%lld\n", (long long)pe);
  if (pe <= 0) fprintf(stderr, "bench/ps: the parts client used one frame: dense_pushpull_2mb_parts_* are not parts\n");
  loom_ps_client_free(c1);
  loom_ps_client_free(cp);
  free(g);
  free(v);
  loom_status_free(st);
}

int main(int argc, char **argv) {
  int quick = argc > 1 && !strcmp(argv[1], "--quick");
  loom_status *st = loom_status_new();
  if (argc > 1 && !strcmp(argv[1], "--shm")) { /* the shared-memory comparison alone */
    dense_shm(0, st);
    loom_status_free(st);
    return 0;
  }
  loom_ps_server_options so = loom_ps_server_options_default();
  so.max_frame = 80u << 20;
  loom_ps_server *s = loom_ps_server_start(&so, st);
  if (!s) die(st, "start");
  loom_ps_connect_options co = local_opts(s);
  co.max_frame = 80u << 20;
  co.part_bytes = -1; /* the one-frame figures below (the parts: dense_parts) */
  loom_ps_client *c = loom_ps_connect(&co, st);
  if (!c) die(st, "connect");
  if (argc > 1 && !strcmp(argv[1], "--parts")) { /* only the one-frame vs parts figures (tuning the part size) */
    dense_parts(s, 0);
    loom_ps_client_free(c);
    loom_ps_server_stop(s);
    loom_status_free(st);
    return 0;
  }
  loom_ps_server_stats ss;
  loom_ps_server_get_stats(s, &ss);
  printf("ps_shard_threads=%d\n", ss.shard_threads);
  float hyper[8] = {1e-6f, 0.1f};
  size_t sizes[2] = {4u << 20, 64u << 20};
  for (int k = 0; k < 2; k++) {
    int64_t n = (int64_t)(sizes[k] / 4);
    float *g = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
    if (loom_ps_init_var(c, (uint32_t)k, 1, &n, LOOM_PS_SGD, hyper, v, NULL, st)) die(st, "init");
    int reps = quick ? 2 : (k ? 6 : 40);
    loom_ps_pushpull(c, (uint32_t)k, g, v, n, NULL, st); /* warm */
    /* best of 3 trials each, alternating, so that a busy machine (other jobs) biases neither side */
    double mbs = 0, tcp = 0;
    for (int trial = 0; trial < (quick ? 1 : 3); trial++) {
      double t0 = bu_now_us();
      for (int r = 0; r < reps; r++)
        if (loom_ps_pushpull(c, (uint32_t)k, g, v, n, NULL, st)) die(st, "pushpull");
      double m = 2.0 * (double)sizes[k] * reps / (bu_now_us() - t0);
      double t = tcp_stream_mbs(sizes[k] * (size_t)(quick ? 2 : 6));
      if (m > mbs) mbs = m;
      if (t > tcp) tcp = t;
    }
    int mb = (int)(sizes[k] >> 20);
    printf("dense_pushpull_%dmb_mbs=%.0f\n", mb, mbs);
    printf("tcp_stream_%dmb_mbs=%.0f\n", mb, tcp);
    printf("dense_pushpull_%dmb_over_tcp=%.3f\n", mb, mbs / tcp);
    printf("dense_pushpull_%dmb_over_tf_grpc_162=%.1f\n", mb, mbs / 162.0);
    free(g);
    free(v);
  }
  dense_parts(s, quick);
  loom_ps_server_get_stats(s, &ss);
  printf("ps_value_copies=%lld\n", (long long)ss.value_copies); /* copy-on-write of a value still being sent */
  dense_shm(quick, st);
  /* small RPC: the PS and the client with busy_poll_us = 50, then with it off (the default), then the yardsticks */
  int nr = quick ? 1000 : 20000;
  small_rpc(nr, 50, "");
  small_rpc(nr, 0, "_nopoll");
  double p50, p99;
  tcp_pingpong(nr, 0, &p50, &p99);
  printf("tcp_pingpong_p50_us=%.1f\ntcp_pingpong_p99_us=%.1f\n", p50, p99);
  tcp_pingpong(nr, 1, &p50, &p99);
  printf("tcp_pingpong_spin_p50_us=%.1f\ntcp_pingpong_spin_p99_us=%.1f\n", p50, p99);
  /* sparse rows */
  int64_t dims[2] = {1 << 20, 16};
  float *init = calloc((size_t)(dims[0] * dims[1]), 4);
  float ha[8] = {0.01f, 0.1f};
  if (loom_ps_init_var(c, 3, 2, dims, LOOM_PS_ADAGRAD, ha, init, NULL, st)) die(st, "init");
  int64_t ids[4096];
  float *rg = malloc(4096 * 16 * 4);
  for (int i = 0; i < 4096 * 16; i++) rg[i] = 0.001f * (float)(i % 7);
  int pushes = quick ? 20 : 400;
  double t0 = bu_now_us();
  for (int p = 0; p < pushes; p++) {
    for (int i = 0; i < 4096; i++) ids[i] = ((int64_t)i * 257 + p * 4096) % dims[0];
    if (loom_ps_push_rows(c, 3, ids, 4096, 16, rg, st)) die(st, "push_rows");
  }
  double rows = 4096.0 * pushes / ((bu_now_us() - t0) * 1e-6);
  printf("sparse_rows_per_s_m=%.2f\n", rows / 1e6);
  printf("sparse_rows_target_m=2\n");
  loom_ps_shutdown(c, st);
  loom_ps_server_wait(s, 5);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  free(init);
  free(rg);
  wire_bytes(quick, st);
  loom_status_free(st);
  return 0;
}
