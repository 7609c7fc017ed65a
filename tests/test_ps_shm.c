/* tests/test_ps_shm.c - the parameter server's same-host shared-memory path (distributed/ps_shm.h):
 * bit-identical to TCP, PULL/PUSH through the segment, every refused attach falls back with its reason,
 * offsets checked, a killed client's segment unmapped, TCP bytes down to small frames. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include "test_util.h"
#include "loom/loom_distributed.h"
#include "distributed/ps_client.h"
#include "distributed/ps_shm.h"
#include "distributed/wire.h"

#define TOKEN "shm-test-token-0123456789"
#define OK(call)                                                                                                  \
  do {                                                                                                            \
    loom_code rc_ = (call);                                                                                       \
    cr_assert_eq(rc_, LOOM_OK, "%s: %s", #call, loom_status_message(st));                                        \
  } while (0)

static loom_ps_server *start(uint64_t hash, int num_vars, loom_ps_consistency cons) {
  loom_ps_server_options o = loom_ps_server_options_default();
  o.placement_hash = hash;
  o.num_ps = 1;
  o.num_vars = num_vars;
  o.token = TOKEN;
  o.token_len = strlen(TOKEN);
  o.consistency = cons;
  if (cons == LOOM_PS_BOUNDED) o.staleness = 1;
  if (cons == LOOM_PS_SYNC) o.replicas_to_aggregate = 1;
  loom_status *st = loom_status_new();
  loom_ps_server *s = loom_ps_server_start(&o, st);
  cr_assert(s, "start: %s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

static loom_ps_connect_options copts(loom_ps_server *s, uint64_t hash, int shm_off) {
  loom_ps_connect_options o = loom_ps_connect_options_default();
  o.host = "127.0.0.1";
  o.port = loom_ps_server_port(s);
  o.token = TOKEN;
  o.token_len = strlen(TOKEN);
  o.placement_hash = hash;
  o.num_ps = 1;
  o.timeout_s = 5;
  o.shm = shm_off;
  return o;
}

static loom_ps_client *client(loom_ps_server *s, uint64_t hash) {
  loom_ps_connect_options o = copts(s, hash, 1);
  loom_status *st = loom_status_new();
  loom_ps_client *c = loom_ps_connect(&o, st);
  cr_assert(c, "connect: %s", loom_status_message(st));
  loom_status_free(st);
  return c;
}

static loom_ps_server_stats stats(loom_ps_server *s) {
  loom_ps_server_stats x;
  memset(&x, 0, sizeof x);
  loom_ps_server_get_stats(s, &x);
  return x;
}

static void hyper_of(loom_ps_optimizer opt, float h[8]) {
  memset(h, 0, 8 * sizeof(float));
  h[0] = 0.05f;
  if (opt == LOOM_PS_ADAGRAD) h[1] = 0.1f;
  if (opt == LOOM_PS_ADAM) h[1] = 0.9f, h[2] = 0.999f, h[3] = 1e-8f;
}

static float gval(int step, int v, int64_t i) { return (float)((i * 7 + step * 13 + v * 5) % 17 - 8) * 0.01f; }

/* Two variables (one of 2 MiB split in two shards by min_slice), the same init and gradients on two PS:
 * one cluster through shared memory, one over TCP; the values are bit-identical after every step, and
 * the shared-memory cluster's TCP bytes are small frames only. */
static void same_as_tcp(loom_ps_optimizer opt) {
  loom_status *st = loom_status_new();
  loom_ps_var_spec vs[2];
  memset(vs, 0, sizeof vs);
  vs[0].name = "w";
  vs[0].ndim = 2;
  vs[0].dims[0] = 512;
  vs[0].dims[1] = 1024;
  vs[1].name = "b";
  vs[1].ndim = 1;
  vs[1].dims[0] = 33;
  loom_ps_placement *p = loom_ps_placement_new(2, vs, 1, LOOM_PS_GREEDY_BYTES, 0, st);
  cr_assert(p, "%s", loom_status_message(st));
  uint64_t hash = loom_ps_placement_hash(p);
  loom_ps_server *sa = start(hash, 2, LOOM_PS_ASYNC), *sb = start(hash, 2, LOOM_PS_ASYNC);
  const char *hosts[1] = {"127.0.0.1"};
  int pa[1] = {loom_ps_server_port(sa)}, pb[1] = {loom_ps_server_port(sb)};
  loom_ps_connect_options oa = copts(sa, hash, 0), ob = copts(sb, hash, 1);
  loom_ps_cluster *ca = loom_ps_cluster_connect(p, hosts, pa, &oa, st);
  cr_assert(ca, "%s", loom_status_message(st));
  loom_ps_cluster *cb = loom_ps_cluster_connect(p, hosts, pb, &ob, st);
  cr_assert(cb, "%s", loom_status_message(st));
  cr_assert_eq(loom__ps_cluster_shm_attached(ca), 1);
  cr_assert_eq(loom__ps_cluster_shm_attached(cb), 0);
  int64_t n[2] = {512 * 1024, 33};
  float *init[2], *va[2], *vb[2], *g[2];
  float h[8];
  hyper_of(opt, h);
  for (int v = 0; v < 2; v++) {
    init[v] = malloc((size_t)n[v] * 4);
    va[v] = malloc((size_t)n[v] * 4);
    vb[v] = malloc((size_t)n[v] * 4);
    g[v] = malloc((size_t)n[v] * 4);
    for (int64_t i = 0; i < n[v]; i++) init[v][i] = (float)((i * 3 + v) % 11) * 0.1f - 0.5f;
    OK(loom_ps_cluster_init_var(ca, v, opt, h, init[v], st));
    OK(loom_ps_cluster_init_var(cb, v, opt, h, init[v], st));
  }
  OK(loom_ps_cluster_pull(ca, va, st));
  OK(loom_ps_cluster_pull(cb, vb, st));
  for (int v = 0; v < 2; v++) cr_assert(!memcmp(va[v], init[v], (size_t)n[v] * 4));
  int64_t sa0, ra0, sb0, rb0;
  loom_ps_cluster_bytes(ca, &sa0, &ra0);
  loom_ps_cluster_bytes(cb, &sb0, &rb0);
  const int steps = 6;
  for (int step = 0; step < steps; step++) {
    for (int v = 0; v < 2; v++)
      for (int64_t i = 0; i < n[v]; i++) g[v][i] = gval(step, v, i);
    OK(loom_ps_cluster_pushpull(ca, (const float *const *)g, va, st));
    OK(loom_ps_cluster_pushpull(cb, (const float *const *)g, vb, st));
    for (int v = 0; v < 2; v++)
      cr_assert(!memcmp(va[v], vb[v], (size_t)n[v] * 4), "opt %d step %d var %d differs", opt, step, v);
  }
  /* a pull of unchanged shards writes nothing and moves 16 + 32 bytes per shard; the values still agree */
  OK(loom_ps_cluster_pull(ca, va, st));
  for (int v = 0; v < 2; v++) cr_assert(!memcmp(va[v], vb[v], (size_t)n[v] * 4));
  cr_assert(memcmp(va[0], init[0], (size_t)n[0] * 4), "the variable moved");
  int64_t sa1, ra1, sb1, rb1;
  loom_ps_cluster_bytes(ca, &sa1, &ra1);
  loom_ps_cluster_bytes(cb, &sb1, &rb1);
  int shards = loom_ps_placement_num_shards(p);
  /* shm: per shard per exchange a 56-byte request and a 40-byte reply; TCP: the gradient and the value */
  cr_assert_leq(sa1 - sa0, (int64_t)(steps + 1) * shards * 56, "shm sent %lld bytes", (long long)(sa1 - sa0));
  cr_assert_leq(ra1 - ra0, (int64_t)(steps + 1) * shards * 40, "shm received %lld bytes", (long long)(ra1 - ra0));
  cr_assert_geq(sb1 - sb0, (int64_t)steps * (n[0] + n[1]) * 4);
  cr_assert_geq(rb1 - rb0, (int64_t)steps * (n[0] + n[1]) * 4);
  loom_ps_server_stats xa = stats(sa), xb = stats(sb);
  cr_assert_eq(xa.shm_attaches, 1);
  cr_assert_eq(xa.shm_requests, (int64_t)(steps + 2) * shards);
  cr_assert_eq(xb.shm_attaches + xb.shm_requests + xb.shm_refused, 0);
  cr_assert_eq(xa.updates, xb.updates);
  loom_ps_cluster_free(ca);
  loom_ps_cluster_free(cb);
  loom_ps_server_stop(sa);
  loom_ps_server_stop(sb);
  loom_ps_placement_free(p);
  for (int v = 0; v < 2; v++) free(init[v]), free(va[v]), free(vb[v]), free(g[v]);
  loom_status_free(st);
}

Test(ps, shm_sgd_bit_identical_to_tcp_and_small_frames) { same_as_tcp(LOOM_PS_SGD); }
Test(ps, shm_adam_bit_identical_to_tcp) { same_as_tcp(LOOM_PS_ADAM); }
Test(ps, shm_adagrad_bit_identical_to_tcp) { same_as_tcp(LOOM_PS_ADAGRAD); }

/* The public single-variable calls of an attached client: PUSH, PULL (unchanged: nothing written),
 * PUSHPULL, and PUSH_AT's read_version under BOUNDED(1), against a TCP-only client on a twin PS. */
Test(ps, shm_pull_push_pushpull_and_push_at_like_tcp) {
  loom_status *st = loom_status_new();
  loom_ps_server *sa = start(7, 1, LOOM_PS_BOUNDED), *sb = start(7, 1, LOOM_PS_BOUNDED);
  loom_ps_client *a = client(sa, 7), *b = client(sb, 7);
  const int64_t n = 3000;
  uint32_t id = 0;
  int64_t dims[1] = {n};
  float *x = malloc(n * 4), *ya = malloc(n * 4), *yb = malloc(n * 4), *gr = malloc(n * 4), h[8];
  for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.25f;
  hyper_of(LOOM_PS_ADAM, h);
  OK(loom_ps_init_var(a, id, 1, dims, LOOM_PS_ADAM, h, x, NULL, st));
  OK(loom_ps_init_var(b, id, 1, dims, LOOM_PS_ADAM, h, x, NULL, st));
  OK(loom__ps_shm_attach(a, 1, &id, &n, st));
  cr_assert(a->shm);
  for (int64_t i = 0; i < n; i++) gr[i] = gval(1, 0, i);
  uint64_t va = 0, vb = 0;
  OK(loom_ps_push(a, id, gr, n, &va, st));
  OK(loom_ps_push(b, id, gr, n, &vb, st));
  cr_assert_eq(va, 1);
  cr_assert_eq(vb, 1);
  int cha = -1, chb = -1;
  uint64_t have_a = UINT64_MAX, have_b = UINT64_MAX;
  OK(loom_ps_pull(a, id, ya, n, &have_a, &cha, st));
  OK(loom_ps_pull(b, id, yb, n, &have_b, &chb, st));
  cr_assert(cha == 1 && chb == 1 && have_a == 1 && have_b == 1);
  cr_assert(!memcmp(ya, yb, n * 4));
  cr_assert(memcmp(ya, x, n * 4));
  memset(ya, 0x7f, n * 4); /* unchanged: not written */
  OK(loom_ps_pull(a, id, ya, n, &have_a, &cha, st));
  cr_assert_eq(cha, 0);
  cr_assert_eq(((uint32_t *)ya)[5], 0x7f7f7f7fu);
  OK(loom_ps_pushpull(a, id, gr, ya, n, &va, st));
  OK(loom_ps_pushpull(b, id, gr, yb, n, &vb, st));
  cr_assert(va == 2 && vb == 2);
  cr_assert(!memcmp(ya, yb, n * 4));
  OK(loom_ps_push(a, id, gr, n, &va, st)); /* version 3 */
  OK(loom_ps_push(b, id, gr, n, &vb, st));
  int apa = -1, apb = -1;
  OK(loom_ps_push_at(a, id, gr, n, 1, &va, &apa, st)); /* read at 1, the PS at 3: dropped (staleness 1) */
  OK(loom_ps_push_at(b, id, gr, n, 1, &vb, &apb, st));
  cr_assert(apa == 0 && apb == 0 && va == 3 && vb == 3);
  OK(loom_ps_push_at(a, id, gr, n, 2, &va, &apa, st)); /* read at 2: applied */
  OK(loom_ps_push_at(b, id, gr, n, 2, &vb, &apb, st));
  cr_assert(apa == 1 && apb == 1 && va == 4 && vb == 4);
  have_a = have_b = UINT64_MAX;
  OK(loom_ps_pull(a, id, ya, n, &have_a, NULL, st));
  OK(loom_ps_pull(b, id, yb, n, &have_b, NULL, st));
  cr_assert(!memcmp(ya, yb, n * 4));
  loom_ps_server_stats xa = stats(sa), xb = stats(sb);
  cr_assert_eq(xa.stale_dropped, 1);
  cr_assert_eq(xb.stale_dropped, 1);
  cr_assert_eq(xa.shm_requests, 8);
  loom_ps_client_free(a);
  loom_ps_client_free(b);
  loom_ps_server_stop(sa);
  loom_ps_server_stop(sb);
  free(x), free(ya), free(yb), free(gr);
  loom_status_free(st);
}

/* An ASYNC PS (placement hash) holding variable 0: n floats, all init, SGD at learning rate lr; and a
 * client of it. */
static loom_ps_client *sgd_var(uint64_t hash, int64_t n, float init, float lr, loom_ps_server **s) {
  *s = start(hash, 1, LOOM_PS_ASYNC);
  loom_ps_client *c = client(*s, hash);
  loom_status *st = loom_status_new();
  float *x = malloc((size_t)n * 4), h[8] = {lr};
  cr_assert(x);
  for (int64_t i = 0; i < n; i++) x[i] = init;
  int64_t dims[1] = {n};
  OK(loom_ps_init_var(c, 0, 1, dims, LOOM_PS_SGD, h, x, NULL, st));
  free(x);
  loom_status_free(st);
  return c;
}

/* Sends an SHM_ATTACH body; returns the reply's code with its message in st. */
static loom_code raw_attach(loom_ps_client *c, uint32_t pid, uint32_t fd, uint64_t size, const uint8_t *nonce,
                            loom_status *st) {
  uint8_t b[LOOM_PS_SHM_ATTACH_LEN];
  loom__ps_put32(b, pid);
  loom__ps_put32(b + 4, fd);
  loom__ps_put64(b + 8, size);
  memcpy(b + 16, nonce, LOOM_PS_NONCE);
  loom_code rc = loom__ps_send(c, LOOM_PS_SHM_ATTACH, b, sizeof b, NULL, 0, NULL, 0, st);
  return rc ? rc : loom__ps_small_reply(c, LOOM_PS_SHM_ATTACH, NULL, 0, st);
}

/* A memfd of size bytes holding nonce in its header; sealed against shrinking when seal. */
static int make_memfd(uint64_t size, const uint8_t *nonce, int seal) {
  int fd = memfd_create("shm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, (off_t)size), 0);
  uint64_t magic = LOOM_PS_SHM_MAGIC;
  cr_assert_eq(pwrite(fd, &magic, 8, 0), 8);
  cr_assert_eq(pwrite(fd, nonce, LOOM_PS_NONCE, 8), LOOM_PS_NONCE);
  if (seal) cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  return fd;
}

static void expect_refused(loom_ps_client *c, uint32_t pid, uint32_t fd, uint64_t size, const uint8_t *nonce,
                           loom_code code, const char *why) {
  loom_status *st = loom_status_new();
  loom_code rc = raw_attach(c, pid, fd, size, nonce, st);
  cr_assert_eq(rc, code, "%s: code %d: %s", why, rc, loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), why), "expected '%s' in: %s", why, loom_status_message(st));
  int64_t step = -1; /* the connection goes on over TCP */
  OK(loom_ps_step_inc(c, 1, &step, st));
  loom_status_free(st);
}

Test(ps, shm_attach_refusals_named_and_the_ps_keeps_serving) {
  loom_status *st = loom_status_new();
  loom_ps_server *s = start(9, 1, LOOM_PS_ASYNC);
  loom_ps_client *c = client(s, 9);
  uint8_t nonce[LOOM_PS_NONCE], other[LOOM_PS_NONCE];
  memset(nonce, 0xa5, sizeof nonce);
  memset(other, 0x5a, sizeof other);
  const uint64_t size = 3 * 4096;
  uint32_t me = (uint32_t)getpid();
  expect_refused(c, me, 999999, size, nonce, LOOM_UNAVAILABLE, "shared memory not reachable: cannot open");
  expect_refused(c, 0x7ffffff0u, 3, size, nonce, LOOM_UNAVAILABLE, "cannot open /proc/");
  int unsealed = make_memfd(size, nonce, 0);
  expect_refused(c, me, (uint32_t)unsealed, size, nonce, LOOM_UNAVAILABLE, "not sealed against shrinking");
  int sealed = make_memfd(size, nonce, 1);
  expect_refused(c, me, (uint32_t)sealed, size + 4096, nonce, LOOM_UNAVAILABLE, "bytes, SHM_ATTACH said");
  expect_refused(c, me, (uint32_t)sealed, size, other, LOOM_UNAVAILABLE, "does not hold this connection's nonce");
  expect_refused(c, me, (uint32_t)sealed, (uint64_t)1 << 40, nonce, LOOM_UNAVAILABLE, "at most");
  expect_refused(c, me, (uint32_t)sealed, 100, nonce, LOOM_UNAVAILABLE, "at least");
  char tmpl[] = "/tmp/loom-shm-XXXXXX"; /* a regular file: no seals */
  int file = mkstemp(tmpl);
  cr_assert(file >= 0);
  unlink(tmpl);
  cr_assert_eq(ftruncate(file, (off_t)size), 0);
  expect_refused(c, me, (uint32_t)file, size, nonce, LOOM_UNAVAILABLE, "not sealed");
  int pp[2];
  cr_assert_eq(pipe(pp), 0);
  expect_refused(c, me, (uint32_t)pp[0], size, nonce, LOOM_UNAVAILABLE, "not a regular file");
  loom_ps_server_stats x = stats(s);
  cr_assert_eq(x.shm_refused, 9);
  cr_assert_eq(x.shm_attaches, 0);
  /* the right one is accepted; a second attach on the connection is refused */
  cr_assert_eq(raw_attach(c, me, (uint32_t)sealed, size, nonce, st), LOOM_OK, "%s", loom_status_message(st));
  expect_refused(c, me, (uint32_t)sealed, size, nonce, LOOM_FAILED_PRECONDITION, "attached to this connection already");
  /* another client is served meanwhile */
  loom_ps_client *d = client(s, 9);
  int64_t step = -1;
  OK(loom_ps_step_inc(d, 0, &step, st));
  cr_assert_eq(step, 10);
  cr_assert_eq(stats(s).shm_attaches, 1);
  loom_ps_client_free(d);
  loom_ps_client_free(c);
  close(unsealed), close(sealed), close(file), close(pp[0]), close(pp[1]);
  loom_ps_server_stop(s);
  loom_status_free(st);
}

/* SYNC: the PS refuses the segment; the cluster client goes on over TCP and works. */
Test(ps, shm_refused_under_sync_cluster_falls_back_to_tcp) {
  loom_status *st = loom_status_new();
  loom_ps_var_spec vs;
  memset(&vs, 0, sizeof vs);
  vs.name = "w";
  vs.ndim = 1;
  vs.dims[0] = 100;
  loom_ps_placement *p = loom_ps_placement_new(1, &vs, 1, LOOM_PS_GREEDY_BYTES, 0, st);
  uint64_t hash = loom_ps_placement_hash(p);
  loom_ps_server *s = start(hash, 1, LOOM_PS_SYNC);
  const char *hosts[1] = {"127.0.0.1"};
  int port[1] = {loom_ps_server_port(s)};
  loom_ps_connect_options o = copts(s, hash, 0);
  loom_ps_cluster *c = loom_ps_cluster_connect(p, hosts, port, &o, st);
  cr_assert(c, "%s", loom_status_message(st));
  cr_assert_eq(loom__ps_cluster_shm_attached(c), 0);
  cr_assert_eq(stats(s).shm_refused, 1);
  float w[100], g[100], h[8] = {0.5f};
  for (int i = 0; i < 100; i++) w[i] = (float)i, g[i] = 2.0f;
  OK(loom_ps_cluster_init_var(c, 0, LOOM_PS_SGD, h, w, st));
  float *vals[1] = {w};
  OK(loom_ps_cluster_pull(c, vals, st));
  const float *gs[1] = {g};
  OK(loom_ps_cluster_pushpull(c, gs, vals, st));
  for (int i = 0; i < 100; i++) cr_assert_eq(w[i], (float)i - 1.0f);
  loom_ps_cluster_free(c);
  loom_ps_server_stop(s);
  loom_ps_placement_free(p);
  loom_status_free(st);
}

/* Offsets inside the header, past the end, unaligned or overflowing are refused OUT_OF_RANGE; nothing
 * is applied; the connection goes on. */
Test(ps, shm_offset_out_of_range_refused) {
  loom_status *st = loom_status_new();
  const int64_t n = 1000;
  uint32_t id = 0;
  loom_ps_server *s;
  loom_ps_client *c = sgd_var(11, n, 1.0f, 0.1f, &s);
  OK(loom__ps_shm_attach(c, 1, &id, &n, st));
  uint64_t size = c->shm->size, bad[] = {0, 8, size - 4, LOOM_PS_SHM_HDR + 2, UINT64_MAX - 3, size};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    uint64_t v = 0;
    OK(loom__ps_shm_send(c, LOOM_PS_SHM_PUSH, id, UINT64_MAX, bad[k], st));
    loom_code rc = loom__ps_shm_recv(c, LOOM_PS_SHM_PUSH, &v, NULL, st);
    cr_assert_eq(rc, LOOM_OUT_OF_RANGE, "offset %llu: %d %s", (unsigned long long)bad[k], rc, loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), "not inside the shared segment"), "%s", loom_status_message(st));
  }
  uint64_t ver = UINT64_MAX;
  float y[1000];
  OK(loom_ps_pull(c, id, y, n, &ver, NULL, st));
  cr_assert_eq(ver, 0);
  cr_assert_eq(y[999], 1.0f);
  cr_assert_eq(stats(s).updates, 0);
  /* a slot whose byte count wraps 64 bits is over the segment limit (it made a 4 KiB segment) */
  loom_ps_client *d = client(s, 11);
  int64_t huge = (int64_t)1 << 62;
  cr_assert_eq(loom__ps_shm_attach(d, 1, &id, &huge, st), LOOM_RESOURCE_EXHAUSTED, "%s", loom_status_message(st));
  cr_assert(!d->shm);
  loom_ps_client_free(d);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  loom_status_free(st);
}

static int maps_count(const char *what) {
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert(f);
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strstr(line, what) != NULL;
  fclose(f);
  return n;
}

static int wait_maps(const char *what, int want) {
  for (int i = 0; i < 100; i++) {
    if (maps_count(what) == want) return 1;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* A client killed with its segment attached (and one that closes): the PS unmaps the segment with the
 * connection and keeps serving; the variable holds what was applied. */
Test(ps, shm_client_killed_or_closing_segment_unmapped) {
  loom_status *st = loom_status_new();
  const int64_t n = 4096;
  uint32_t id = 0;
  loom_ps_server *s;
  loom_ps_client *c = sgd_var(13, n, 0.0f, 1.0f, &s);
  float *x = malloc(n * 4), *g = malloc(n * 4);
  for (int i = 0; i < n; i++) g[i] = 1.0f;
  cr_assert_eq(maps_count("loom-ps-shm"), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) { /* the child: attach, push, and die without closing anything */
    loom_ps_client *k = client(s, 13);
    loom_status *s2 = loom_status_new();
    if (loom__ps_shm_attach(k, 1, &id, &n, s2) || loom_ps_push(k, id, g, n, NULL, s2)) _exit(3);
    raise(SIGKILL);
    _exit(4);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
  cr_assert(wait_maps("loom-ps-shm", 0), "the PS still maps the killed client's segment");
  cr_assert_eq(stats(s).shm_attaches, 1);
  uint64_t ver = UINT64_MAX;
  OK(loom_ps_pull(c, id, x, n, &ver, NULL, st));
  cr_assert_eq(ver, 1);
  cr_assert_eq(x[17], -1.0f);
  /* closing normally: the client's and the PS's mappings both go */
  loom_ps_client *d = client(s, 13);
  OK(loom__ps_shm_attach(d, 1, &id, &n, st));
  cr_assert(wait_maps("loom-ps-shm", 2), "client + PS mappings: %d", maps_count("loom-ps-shm"));
  OK(loom_ps_push(d, id, g, n, NULL, st));
  loom_ps_client_free(d);
  cr_assert(wait_maps("loom-ps-shm", 0), "left: %d", maps_count("loom-ps-shm"));
  ver = UINT64_MAX;
  OK(loom_ps_pull(c, id, x, n, &ver, NULL, st));
  cr_assert(ver == 2 && x[0] == -2.0f);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  free(x), free(g);
  loom_status_free(st);
}

/* The duplicate window: a push sent through shared memory and re-sent over TCP after a reconnect (the
 * segment went with the connection) is answered from the window, not applied twice. */
Test(ps, shm_push_resent_over_tcp_after_reconnect_not_applied_twice) {
  loom_status *st = loom_status_new();
  const int64_t n = 2048;
  uint32_t id = 0;
  loom_ps_server *s;
  loom_ps_client *c = sgd_var(15, n, 0.0f, 1.0f, &s);
  float *g = malloc(n * 4), *y = malloc(n * 4);
  for (int i = 0; i < n; i++) g[i] = 1.0f;
  OK(loom__ps_shm_attach(c, 1, &id, &n, st));
  uint64_t v = 0;
  OK(loom_ps_push(c, id, g, n, &v, st));
  cr_assert_eq(v, 1);
  OK(loom_ps_client_reconnect(c, st));
  cr_assert(!c->shm);
  loom_ps_client_retry_last(c);
  OK(loom_ps_push(c, id, g, n, &v, st)); /* the same request id, now over TCP */
  cr_assert(loom_ps_client_last_duplicate(c));
  cr_assert_eq(v, 1);
  OK(loom__ps_shm_attach(c, 1, &id, &n, st));
  OK(loom_ps_pushpull(c, id, g, y, n, &v, st));
  cr_assert_eq(v, 2);
  cr_assert_eq(y[7], -2.0f);
  OK(loom_ps_client_reconnect(c, st));
  loom_ps_client_retry_last(c);
  memset(y, 0, n * 4);
  OK(loom_ps_pushpull(c, id, g, y, n, &v, st)); /* re-sent PUSHPULL: the current value, not applied */
  cr_assert(loom_ps_client_last_duplicate(c));
  cr_assert_eq(v, 2);
  cr_assert_eq(y[7], -2.0f);
  cr_assert_eq(stats(s).updates, 2);
  cr_assert_eq(stats(s).duplicates, 2);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  free(g), free(y);
  loom_status_free(st);
}
