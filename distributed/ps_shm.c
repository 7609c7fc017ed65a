/* distributed/ps_shm.c - the same-host shared-memory path of the PS's dense
 * exchange: the PS's mapping checks and the client's segment (ps_shm.h). */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "base/base.h"
#include "distributed/ps_shm.h"

#ifndef F_SEAL_SEAL /* glibc before 2.27 without the kernel headers' names */
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#define MFD_ALLOW_SEALING 0x0002U
#endif

/* ---------------- PS side ---------------- */

static loom_code refuse(loom_status *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static loom_code refuse(loom_status *st, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return loom_status_set(st, LOOM_UNAVAILABLE, "shared memory not reachable: %s", why);
}

loom_code loom__ps_shm_map_open(const uint8_t *body, uint32_t len, uint64_t cap, loom__ps_shm_map *m,
                                loom_status *st) {
  memset(m, 0, sizeof *m);
  if (len != LOOM_PS_SHM_ATTACH_LEN)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "SHM_ATTACH body of %u bytes (expected %u)", len,
                           LOOM_PS_SHM_ATTACH_LEN);
  uint32_t pid = loom__ps_get32(body), fdn = loom__ps_get32(body + 4);
  uint64_t size = loom__ps_get64(body + 8);
  const uint8_t *nonce = body + 16;
  if (cap > LOOM_PS_SHM_MAX) cap = LOOM_PS_SHM_MAX;
  if (size < LOOM_PS_SHM_HDR || size > cap || pid == 0 || pid > (uint32_t)INT32_MAX || fdn > (uint32_t)INT32_MAX)
    return refuse(st, "segment of %llu bytes (at least %u, at most %llu), pid %u, fd %u",
                  (unsigned long long)size, LOOM_PS_SHM_HDR, (unsigned long long)cap, pid, fdn);
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, fdn);
  /* what the path names must be a regular file before it is opened at all (no device, FIFO or terminal
   * is ever opened); O_NONBLOCK + O_NOCTTY in case it is swapped meanwhile, and fstat must then show the
   * same file; anything but a regular file sealed against shrinking is refused */
  struct stat pre, sb;
  if (stat(path, &pre) < 0) return refuse(st, "cannot open %s: %s", path, strerror(errno));
  if (!S_ISREG(pre.st_mode)) return refuse(st, "%s is not a regular file (mode %o)", path, (unsigned)pre.st_mode);
  int fd = open(path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return refuse(st, "cannot open %s: %s", path, strerror(errno));
  loom_code rc = LOOM_OK;
  int seals = -1;
  if (fstat(fd, &sb) < 0) {
    rc = refuse(st, "cannot stat %s: %s", path, strerror(errno));
  } else if (!S_ISREG(sb.st_mode) || sb.st_dev != pre.st_dev || sb.st_ino != pre.st_ino) {
    rc = refuse(st, "%s is not a regular file (mode %o)", path, (unsigned)sb.st_mode);
  } else if ((uint64_t)sb.st_size != size) {
    rc = refuse(st, "%s has %lld bytes, SHM_ATTACH said %llu", path, (long long)sb.st_size, (unsigned long long)size);
  } else if ((seals = fcntl(fd, F_GET_SEALS)) < 0 || !(seals & F_SEAL_SHRINK)) {
    rc = refuse(st, "%s is not sealed against shrinking (%s)", path,
                seals < 0 ? strerror(errno) : "seals without F_SEAL_SHRINK");
  }
  void *base = MAP_FAILED;
  if (!rc) {
    base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) rc = refuse(st, "cannot map %s: %s", path, strerror(errno));
  }
  close(fd); /* the mapping keeps the memory */
  if (rc) return rc;
  uint64_t magic;
  memcpy(&magic, base, 8);
  if (magic != LOOM_PS_SHM_MAGIC || !loom__ps_ct_equal((const uint8_t *)base + 8, nonce, LOOM_PS_NONCE)) {
    munmap(base, (size_t)size);
    return refuse(st, "%s does not hold this connection's nonce", path);
  }
  m->base = base;
  m->size = size;
  return LOOM_OK;
}

void loom__ps_shm_map_close(loom__ps_shm_map *m) {
  if (m && m->base) munmap(m->base, (size_t)m->size);
  if (m) memset(m, 0, sizeof *m);
}

float *loom__ps_shm_map_at(const loom__ps_shm_map *m, uint64_t off, uint64_t n) {
  if (!m->base || off < LOOM_PS_SHM_HDR || off % 4 || off > m->size || n > m->size - off) return NULL;
  return (float *)(m->base + off);
}

/* ---------------- client side ---------------- */

int loom__ps_shm_host_is_local(const char *host) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (!host || getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) return 0;
  struct in_addr a = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
  freeaddrinfo(ai);
  if ((ntohl(a.s_addr) >> 24) == 127) return 1;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return 0;
  int local = 0;
  for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
      local = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr;
  freeifaddrs(ifs);
  return local;
}

static void seg_free(loom__ps_shm_seg *g) {
  if (!g) return;
  if (g->base) munmap(g->base, (size_t)g->size);
  loom__free(g->off);
  loom__free(g->numel);
  loom__free(g);
}

void loom__ps_shm_detach(loom_ps_client *c) {
  if (!c) return;
  seg_free(c->shm);
  c->shm = NULL;
}

/* A slot's bytes: numel floats, padded to 64 bytes so that every slot starts cache-line aligned. */
static uint64_t slot_bytes(int64_t numel) { return ((uint64_t)numel * 4 + 63) & ~(uint64_t)63; }

loom_code loom__ps_shm_attach(loom_ps_client *c, uint32_t n, const uint32_t *ids, const int64_t *numels,
                              loom_status *st) {
  if (c->shm) return LOOM_OK;
  uint32_t nslot = 0;
  uint64_t size = LOOM_PS_SHM_HDR;
  for (uint32_t i = 0; i < n; i++) {
    if (numels[i] < 0 || ids[i] >= (1u << 24))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "shm: variable %u of %lld floats", ids[i], (long long)numels[i]);
    if (ids[i] + 1 > nslot) nslot = ids[i] + 1;
    /* one slot over the limit counts as the limit: n such terms cannot wrap size (numel * 4 could) */
    size += numels[i] > (int64_t)(LOOM_PS_SHM_MAX / 4) ? LOOM_PS_SHM_MAX : slot_bytes(numels[i]);
  }
  if (size > LOOM_PS_SHM_MAX)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "shm: %llu bytes of dense shards exceed the segment limit",
                           (unsigned long long)size);
  loom__ps_shm_seg *g = loom__calloc(1, sizeof *g);
  if (g) {
    g->off = loom__calloc((size_t)nslot + 1, sizeof *g->off);
    g->numel = loom__calloc((size_t)nslot + 1, sizeof *g->numel);
  }
  if (!g || !g->off || !g->numel) {
    seg_free(g);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "shm: no memory for the slot table");
  }
  g->nslot = nslot;
  uint64_t at = LOOM_PS_SHM_HDR;
  for (uint32_t i = 0; i < n; i++) {
    g->off[ids[i]] = at;
    g->numel[ids[i]] = numels[i];
    at += slot_bytes(numels[i]);
  }
  int fd = memfd_create("loom-ps-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  loom_code rc = LOOM_OK;
  if (fd < 0) rc = loom_status_set(st, LOOM_UNAVAILABLE, "shm: memfd_create: %s", strerror(errno));
  if (!rc && ftruncate(fd, (off_t)size) < 0) rc = loom_status_set(st, LOOM_UNAVAILABLE, "shm: ftruncate: %s", strerror(errno));
  if (!rc && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    rc = loom_status_set(st, LOOM_UNAVAILABLE, "shm: sealing the memfd: %s", strerror(errno));
  void *base = MAP_FAILED;
  if (!rc && (base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    rc = loom_status_set(st, LOOM_UNAVAILABLE, "shm: mmap: %s", strerror(errno));
  uint8_t req[LOOM_PS_SHM_ATTACH_LEN];
  if (!rc) {
    g->base = base;
    g->size = size;
    uint64_t magic = LOOM_PS_SHM_MAGIC;
    memcpy(g->base, &magic, 8);
    rc = loom__ps_random(g->base + 8, LOOM_PS_NONCE);
    if (rc) loom_status_set(st, rc, "shm: no random bytes for the nonce");
  }
  if (!rc) {
    loom__ps_put32(req, (uint32_t)getpid());
    loom__ps_put32(req + 4, (uint32_t)fd);
    loom__ps_put64(req + 8, size);
    memcpy(req + 16, g->base + 8, LOOM_PS_NONCE);
    rc = loom__ps_send(c, LOOM_PS_SHM_ATTACH, req, sizeof req, NULL, 0, NULL, 0, st);
    /* the PS opens /proc/<pid>/fd/<fd> before it answers: fd stays open until then */
    if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_SHM_ATTACH, NULL, 0, st);
  }
  if (fd >= 0) close(fd);
  if (rc) {
    seg_free(g);
    return rc;
  }
  c->shm = g;
  return LOOM_OK;
}

float *loom__ps_shm_slot(const loom_ps_client *c, uint32_t id, int64_t numel, uint64_t *off) {
  const loom__ps_shm_seg *g = c ? c->shm : NULL;
  if (!g || id >= g->nslot || !g->off[id] || g->numel[id] != numel) return NULL;
  if (off) *off = g->off[id];
  return (float *)(g->base + g->off[id]);
}

loom_code loom__ps_shm_send(loom_ps_client *c, uint16_t opcode, uint32_t id, uint64_t version, uint64_t off,
                            loom_status *st) {
  uint8_t b[LOOM_PS_SHM_REQ_LEN];
  loom__ps_put32(b, id);
  loom__ps_put32(b + 4, 0);
  loom__ps_put64(b + 8, version);
  loom__ps_put64(b + 16, off);
  return loom__ps_send(c, opcode, b, sizeof b, NULL, 0, NULL, 0, st);
}

loom_code loom__ps_shm_recv(loom_ps_client *c, uint16_t opcode, uint64_t *version, int *changed,
                            loom_status *st) {
  uint8_t out[8];
  loom_code rc = loom__ps_small_reply(c, opcode, out, sizeof out, st);
  if (rc) return rc;
  if (version) *version = loom__ps_get64(out);
  if (changed) *changed = !(c->hdr.flags & LOOM_PS_FLAG_UNCHANGED);
  return LOOM_OK;
}
