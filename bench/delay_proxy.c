/* bench/delay_proxy.c - a TCP forwarder that adds a fixed one-way delay in
 * each direction (bench/netjob, docs/distributed.md: this kernel has
 * no sch_netem, so `tc qdisc ... netem delay` is not available; rate
 * limits are tbf on veth links, the delay is this program).
 *
 *   delay_proxy DELAY_US LISTEN_HOST:PORT=TARGET_HOST:PORT [...]
 *   delay_proxy DELAY_US LISTEN_HOST:PORT=original
 *
 * "=original" (transparent mode, bench/netjob --collective): the connections
 * arrive by an nftables "redirect" rule, and each one's target is the address
 * it was sent to, read back with SO_ORIGINAL_DST (IPv4).
 * For every accepted connection it connects to the target and copies bytes
 * both ways, in order: each chunk read is held until DELAY_US after it was
 * read, then written. One thread, epoll (level-triggered) plus a timerfd
 * for the next chunk due. Bytes go socket -> pipe -> socket by splice (no
 * copy through user space; the pipe, sized to /proc/sys/fs/pipe-max-size,
 * holds a direction's bytes in flight: 1 MiB here, enough for 10 Gbit/s x
 * 0.8 ms); LOOM_PROXY_COPY=1 copies through a 16 MiB
 * buffer instead. A full buffer stops reading (back-pressure). On SIGTERM/SIGINT it prints
 *   delay_proxy bytes_to_target=N bytes_from_target=N connections=N
 * and exits 0. Not part of the library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define RING (16u << 20)
#define NREC 65536u
#define MAXMAP 16
#define MAXCONN 512 /* a full mesh of 8 Gloo ranks and its rendezvous fit */

typedef struct dir {
  int from, to;
  int pr, pw;        /* splice mode: the pipe that holds the bytes in flight (its size caps them) */
  char *buf;         /* ring of RING bytes */
  uint64_t rd, wr;   /* bytes read from `from`, written to `to` (ring offsets mod RING) */
  uint64_t rec_end[NREC];
  int64_t rec_due[NREC]; /* ns, CLOCK_MONOTONIC */
  uint32_t rh, rt;   /* record queue head/tail */
  int eof, shut;
} dir;

typedef struct conn {
  int used, map;
  int a, b; /* a: the client side, b: the target side */
  dir up, down; /* up: a -> b, down: b -> a */
} conn;

typedef struct mapping {
  int lfd;
  int original; /* transparent: the target is each connection's SO_ORIGINAL_DST */
  struct sockaddr_storage target;
  socklen_t tlen;
} mapping;

static volatile sig_atomic_t g_stop;
static void on_sig(int s) {
  (void)s;
  g_stop = 1;
}
static int64_t delay_ns;
static int use_splice;
static size_t pipe_cap;
static mapping maps[MAXMAP];
static int nmaps;
static conn conns[MAXCONN];
static uint64_t bytes_up, bytes_down, nconn;
static int ep, tfd;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int parse_hp(const char *s, struct sockaddr_storage *ss, socklen_t *len) {
  char host[256];
  const char *c = strrchr(s, ':');
  if (!c || (size_t)(c - s) >= sizeof host) return -1;
  memcpy(host, s, (size_t)(c - s));
  host[c - s] = 0;
  struct addrinfo hints = {0}, *res;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, c + 1, &hints, &res) != 0) return -1;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void dir_init(dir *d, int from, int to) {
  memset(d, 0, offsetof(dir, rec_end));
  d->from = from;
  d->to = to;
  d->rh = d->rt = 0;
  d->eof = d->shut = 0;
  d->pr = d->pw = -1;
  if (use_splice) {
    int p[2];
    if (pipe2(p, O_NONBLOCK) == 0) {
      d->pr = p[0];
      d->pw = p[1];
      fcntl(d->pw, F_SETPIPE_SZ, (int)pipe_cap);
    }
  }
}

static void conn_close(conn *c) {
  if (c->a >= 0) close(c->a);
  if (c->b >= 0) close(c->b);
  free(c->up.buf);
  free(c->down.buf);
  int ps[4] = {c->up.pr, c->up.pw, c->down.pr, c->down.pw};
  for (int i = 0; i < 4; i++)
    if (ps[i] > 0) close(ps[i]);
  c->used = 0;
}

/* a read of r bytes at time now: due to be written delay_ns later */
static void note_read(dir *d, ssize_t r, int64_t now, uint64_t *count) {
  d->rd += (uint64_t)r;
  d->rec_end[d->rt % NREC] = d->rd;
  d->rec_due[d->rt % NREC] = now + delay_ns;
  d->rt++;
  *count += (uint64_t)r;
}

/* the byte offset up to which the delayed bytes are due at time now */
static uint64_t due_limit(dir *d, int64_t now, uint64_t *released) {
  uint64_t lim = *released;
  while (d->rh != d->rt && d->rec_due[d->rh % NREC] <= now) lim = d->rec_end[d->rh++ % NREC];
  return *released = lim;
}

/* the source closed and every byte went out: pass the EOF on */
static void shut_when_drained(dir *d) {
  if (d->eof && d->wr == d->rd && !d->shut) {
    shutdown(d->to, SHUT_WR);
    d->shut = 1;
  }
}

/* splice mode: socket -> pipe -> socket, the pipe holding the delayed bytes
 * (no copy through user space; at most pipe_cap bytes in flight) */
static int dir_pump_splice(dir *d, int64_t now, uint64_t *count, uint64_t *released) {
  while (!d->eof && d->rd - d->wr < pipe_cap && d->rt - d->rh < NREC) {
    ssize_t r = splice(d->from, NULL, d->pw, NULL, pipe_cap - (size_t)(d->rd - d->wr), SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (r > 0) {
      note_read(d, r, now, count);
      continue;
    }
    if (r == 0) {
      d->eof = 1;
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    return -1;
  }
  uint64_t lim = due_limit(d, now, released);
  while (d->wr < lim) {
    ssize_t w = splice(d->pr, NULL, d->to, NULL, (size_t)(lim - d->wr), SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (w > 0) {
      d->wr += (uint64_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (w < 0 && errno == EINTR) continue;
    return -1;
  }
  shut_when_drained(d);
  return 0;
}

/* one direction's progress; -1 on error */
static int dir_pump(dir *d, int64_t now, uint64_t *count, uint64_t *released) {
  if (use_splice) return dir_pump_splice(d, now, count, released);
  /* read what fits */
  while (!d->eof && d->rd - d->wr < RING && d->rt - d->rh < NREC) {
    size_t off = d->rd % RING, room = RING - (size_t)(d->rd - d->wr);
    size_t n = RING - off < room ? RING - off : room;
    ssize_t r = read(d->from, d->buf + off, n);
    if (r > 0) {
      note_read(d, r, now, count);
      continue;
    }
    if (r == 0) {
      d->eof = 1;
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    return -1;
  }
  /* release what is due */
  uint64_t lim = due_limit(d, now, released);
  while (d->wr < lim) {
    size_t off = d->wr % RING, n = (size_t)(lim - d->wr);
    if (n > RING - off) n = RING - off;
    ssize_t w = write(d->to, d->buf + off, n);
    if (w > 0) {
      d->wr += (uint64_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (w < 0 && errno == EINTR) continue;
    return -1;
  }
  shut_when_drained(d);
  return 0;
}

typedef struct cstate {
  uint64_t rel_up, rel_down;
} cstate;
static cstate cst[MAXCONN];

static void set_interest(conn *c, cstate *s) {
  uint32_t ea = 0, eb = 0;
  uint64_t cap = use_splice ? pipe_cap : RING;
  if (!c->up.eof && c->up.rd - c->up.wr < cap) ea |= EPOLLIN;
  if (!c->down.eof && c->down.rd - c->down.wr < cap) eb |= EPOLLIN;
  if (c->up.wr < s->rel_up) eb |= EPOLLOUT;
  if (c->down.wr < s->rel_down) ea |= EPOLLOUT;
  struct epoll_event ev;
  ev.events = ea;
  ev.data.u64 = ((uint64_t)1 << 32) | (uint64_t)(c - conns);
  epoll_ctl(ep, EPOLL_CTL_MOD, c->a, &ev);
  ev.events = eb;
  epoll_ctl(ep, EPOLL_CTL_MOD, c->b, &ev);
}

static void accept_one(int m) {
  int fd = accept(maps[m].lfd, NULL, NULL);
  if (fd < 0) return;
  int k = -1;
  for (int i = 0; i < MAXCONN; i++)
    if (!conns[i].used) {
      k = i;
      break;
    }
  struct sockaddr_storage to = maps[m].target;
  socklen_t tl = maps[m].tlen;
  if (maps[m].original) {
    tl = sizeof(struct sockaddr_in);
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &to, &tl) != 0) {
      fprintf(stderr, "delay_proxy: SO_ORIGINAL_DST of an accepted connection: %s\n", strerror(errno));
      close(fd);
      return;
    }
  }
  int t = socket(to.ss_family, SOCK_STREAM, 0);
  if (k < 0 || t < 0 || connect(t, (struct sockaddr *)&to, tl) != 0) {
    fprintf(stderr, "delay_proxy: connect to the target of mapping %d: %s\n", m, k < 0 ? "too many connections" : strerror(errno));
    close(fd);
    if (t >= 0) close(t);
    return;
  }
  nodelay(fd);
  nodelay(t);
  conn *c = &conns[k];
  memset(c, 0, offsetof(conn, up));
  c->used = 1;
  c->map = m;
  c->a = fd;
  c->b = t;
  dir_init(&c->up, fd, t);
  dir_init(&c->down, t, fd);
  c->up.buf = malloc(RING);
  c->down.buf = malloc(RING);
  memset(&cst[k], 0, sizeof cst[k]);
  if (!c->up.buf || !c->down.buf || (use_splice && (c->up.pr < 0 || c->down.pr < 0))) {
    conn_close(c);
    return;
  }
  struct epoll_event ev = {0};
  ev.data.u64 = ((uint64_t)1 << 32) | (uint64_t)k;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev);
  nconn++;
  set_interest(c, &cst[k]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: delay_proxy DELAY_US LISTEN_HOST:PORT=TARGET_HOST:PORT [...]  (or LISTEN_HOST:PORT=original)\n");
    return 2;
  }
  delay_ns = (int64_t)(atof(argv[1]) * 1000.0);
  /* LOOM_PROXY_COPY=1: copy through user space instead of splice */
  use_splice = !(getenv("LOOM_PROXY_COPY") && atoi(getenv("LOOM_PROXY_COPY")));
  {
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
    long v = 0;
    if (f) {
      if (fscanf(f, "%ld", &v) != 1) v = 0;
      fclose(f);
    }
    pipe_cap = v >= 65536 ? (size_t)v : 65536;
    if (pipe_cap > (4u << 20)) pipe_cap = 4u << 20;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  ep = epoll_create1(0);
  tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  struct epoll_event ev = {0};
  ev.events = EPOLLIN;
  ev.data.u64 = (uint64_t)2 << 32;
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  for (int i = 2; i < argc && nmaps < MAXMAP; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) return fprintf(stderr, "delay_proxy: '%s' is not LISTEN=TARGET\n", argv[i]), 2;
    *eq = 0;
    struct sockaddr_storage ls;
    socklen_t ll;
    mapping *m = &maps[nmaps];
    m->original = !strcmp(eq + 1, "original");
    if (parse_hp(argv[i], &ls, &ll) || (!m->original && parse_hp(eq + 1, &m->target, &m->tlen)))
      return fprintf(stderr, "delay_proxy: cannot resolve %s or %s\n", argv[i], eq + 1), 2;
    m->lfd = socket(ls.ss_family, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(m->lfd, (struct sockaddr *)&ls, ll) || listen(m->lfd, 64))
      return fprintf(stderr, "delay_proxy: bind %s: %s\n", argv[i], strerror(errno)), 1;
    ev.events = EPOLLIN;
    ev.data.u64 = (uint64_t)nmaps;
    epoll_ctl(ep, EPOLL_CTL_ADD, m->lfd, &ev);
    nmaps++;
  }
  fprintf(stderr, "delay_proxy: %d mapping(s), %.1f us each way, %s\n", nmaps, (double)delay_ns / 1000.0,
          use_splice ? "splice through a pipe" : "copy through a 16 MiB buffer");
  struct epoll_event evs[64];
  while (!g_stop) {
    int n = epoll_wait(ep, evs, 64, 200);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; i++) {
      uint64_t u = evs[i].data.u64;
      if ((u >> 32) == 0) accept_one((int)u);
      if ((u >> 32) == 2) {
        uint64_t x;
        if (read(tfd, &x, sizeof x) < 0) {
        }
      }
    }
    /* pump every connection (few), then arm the timer for the next due chunk */
    int64_t now = now_ns(), next = INT64_MAX;
    for (int k = 0; k < MAXCONN; k++) {
      conn *c = &conns[k];
      if (!c->used) continue;
      if (dir_pump(&c->up, now, &bytes_up, &cst[k].rel_up) || dir_pump(&c->down, now, &bytes_down, &cst[k].rel_down) ||
          (c->up.shut && c->down.shut)) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->a, NULL);
        epoll_ctl(ep, EPOLL_CTL_DEL, c->b, NULL);
        conn_close(c);
        continue;
      }
      if (c->up.rh != c->up.rt && c->up.rec_due[c->up.rh % NREC] < next) next = c->up.rec_due[c->up.rh % NREC];
      if (c->down.rh != c->down.rt && c->down.rec_due[c->down.rh % NREC] < next)
        next = c->down.rec_due[c->down.rh % NREC];
      set_interest(c, &cst[k]);
    }
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (next != INT64_MAX) {
      if (next <= now) next = now + 1000;
      its.it_value.tv_sec = next / 1000000000;
      its.it_value.tv_nsec = next % 1000000000;
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
  }
  printf("delay_proxy bytes_to_target=%llu bytes_from_target=%llu connections=%llu\n", (unsigned long long)bytes_up,
         (unsigned long long)bytes_down, (unsigned long long)nconn);
  return 0;
}
