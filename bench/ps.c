/* bench/ps: the parameter server on loopback, each figure beside its
 * yardstick in the same run.
 *  - dense push+pull MB/s (bytes both ways / time) of 4 MB and 64 MB tensors
 *    (SGD on the PS), vs a plain TCP stream between two processes;
 *  - small-RPC latency: PULL of one scalar, p50/p99;
 *  - sparse rows/s (d = 16, Adagrad, 4096 unique ids per push). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_util.h"
#include "loom/loom.h"
#include "loom/loom_distributed.h"

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

static void die(loom_status *st, const char *what) {
  fprintf(stderr, "bench/ps: %s: %s\n", what, loom_status_message(st));
  exit(1);
}

int main(int argc, char **argv) {
  int quick = argc > 1 && !strcmp(argv[1], "--quick");
  loom_status *st = loom_status_new();
  loom_ps_server_options so = loom_ps_server_options_default();
  so.max_frame = 80u << 20;
  loom_ps_server *s = loom_ps_server_start(&so, st);
  if (!s) die(st, "start");
  loom_ps_connect_options co = {0};
  co.host = "127.0.0.1";
  co.port = loom_ps_server_port(s);
  co.timeout_s = 30;
  co.max_frame = 80u << 20;
  loom_ps_client *c = loom_ps_connect(&co, st);
  if (!c) die(st, "connect");
  float hyper[8] = {1e-6f, 0.1f};
  size_t sizes[2] = {4u << 20, 64u << 20};
  printf("%-44s %12s %12s\n", "benchmark", "value", "yardstick");
  for (int k = 0; k < 2; k++) {
    int64_t n = (int64_t)(sizes[k] / 4);
    float *g = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
    if (loom_ps_init_var(c, (uint32_t)k, 1, &n, LOOM_PS_SGD, hyper, v, NULL, st)) die(st, "init");
    int reps = quick ? 2 : (k ? 5 : 40);
    loom_ps_pushpull(c, (uint32_t)k, g, v, n, NULL, st); /* warm */
    double t0 = bu_now_us();
    for (int r = 0; r < reps; r++)
      if (loom_ps_pushpull(c, (uint32_t)k, g, v, n, NULL, st)) die(st, "pushpull");
    double mbs = 2.0 * (double)sizes[k] * reps / (bu_now_us() - t0);
    double tcp = tcp_stream_mbs(sizes[k] * (size_t)(quick ? 2 : 8));
    char name[64];
    snprintf(name, sizeof name, "dense push+pull %zu MB (MB/s vs TCP)", sizes[k] >> 20);
    printf("%-44s %12.0f %12.0f   (%.0f%% of TCP, %.1fx TF's 162 MB/s)\n", name, mbs, tcp, 100 * mbs / tcp,
           mbs / 162.0);
    free(g);
    free(v);
  }
  /* small RPC */
  int64_t one = 1;
  float x = 0;
  if (loom_ps_init_var(c, 2, 1, &one, LOOM_PS_SGD, hyper, &x, NULL, st)) die(st, "init");
  int nr = quick ? 1000 : 20000;
  double *lat = malloc(sizeof(double) * (size_t)nr);
  for (int i = 0; i < nr; i++) {
    uint64_t ver = UINT64_MAX;
    double t0 = bu_now_us();
    if (loom_ps_pull(c, 2, &x, 1, &ver, NULL, st)) die(st, "pull");
    lat[i] = bu_now_us() - t0;
  }
  qsort(lat, (size_t)nr, sizeof *lat, bu_cmp_d);
  printf("%-44s %12.1f %12s\n", "scalar PULL p50 (us)", lat[nr / 2], "<= 50");
  printf("%-44s %12.1f %12s\n", "scalar PULL p99 (us)", lat[nr * 99 / 100], "<= 500");
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
  printf("%-44s %12.2f %12s\n", "sparse rows/s (M, d=16 Adagrad, 1 worker)", rows / 1e6, ">= 2");
  int64_t sent, recvd;
  loom_ps_client_bytes(c, &sent, &recvd);
  printf("%-44s %12lld\n", "client bytes sent", (long long)sent);
  loom_ps_shutdown(c, st);
  loom_ps_server_wait(s, 5);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  free(init);
  free(rg);
  free(lat);
  loom_status_free(st);
  return 0;
}
