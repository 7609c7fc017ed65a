/* A constant-rate HTTP/1.1 load generator for bench/serve.sh (wrk2's method; wrk2 is not in
 * Debian and Debian's wrk only runs closed loops). Requests are scheduled at fixed times
 * t0 + i / rate, whether or not the server has answered the earlier ones; each goes out on an
 * idle keep-alive connection as soon as one is free, and its latency is measured from its
 * scheduled time, not from when it was sent, so a server that falls behind shows the queueing
 * in the percentiles (no coordinated omission). One thread, epoll, a timerfd for the schedule.
 *   loadgen --port P [--host 127.0.0.1] --path /v1/models/m:predict --body FILE
 *           [--rate 10000] [--conns 16] [--duration 10] [--warmup 1]
 * Prints key=value lines: target_rate, achieved_rate, requests, errors, late (requests that
 * waited for a free connection), p50_us, p90_us, p99_us, p999_us, max_us (after the warmup). */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct lconn {
  int fd, busy;
  size_t sent;
  double t_sched;
  char buf[65536];
  size_t got;
} lconn;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static const char *flag(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return def;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static char *req;
static size_t req_n;

/* writes (the rest of) the request; 0 on success or EAGAIN (EPOLLOUT resumes), -1 on error */
static int send_more(lconn *c) {
  while (c->sent < req_n) {
    ssize_t k = write(c->fd, req + c->sent, req_n - c->sent);
    if (k < 0) return errno == EAGAIN ? 0 : -1;
    c->sent += (size_t)k;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *host = flag(argc, argv, "--host", "127.0.0.1"), *path = flag(argc, argv, "--path", NULL),
             *bodyf = flag(argc, argv, "--body", NULL);
  int port = atoi(flag(argc, argv, "--port", "0")), nconn = atoi(flag(argc, argv, "--conns", "16"));
  double rate = atof(flag(argc, argv, "--rate", "10000")), dur = atof(flag(argc, argv, "--duration", "10")),
         warm = atof(flag(argc, argv, "--warmup", "1"));
  if (!path || !bodyf || port <= 0 || rate <= 0 || nconn < 1 || dur <= 0) {
    fprintf(stderr, "usage: loadgen --port P --path PATH --body FILE [--rate R] [--conns C] [--duration S] [--warmup S]\n");
    return 2;
  }
  FILE *f = fopen(bodyf, "rb");
  if (!f) return perror(bodyf), 1;
  fseek(f, 0, SEEK_END);
  long bn = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *body = malloc((size_t)bn + 1);
  if (!body || fread(body, 1, (size_t)bn, f) != (size_t)bn) return fprintf(stderr, "cannot read %s\n", bodyf), 1;
  fclose(f);
  req = malloc((size_t)bn + 512);
  int hn = snprintf(req, 512,
                    "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: %ld\r\n\r\n",
                    path, host, port, bn);
  memcpy(req + hn, body, (size_t)bn);
  req_n = (size_t)hn + (size_t)bn;

  int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)-1};
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  lconn *cs = calloc((size_t)nconn, sizeof *cs);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  for (int i = 0; i < nconn; i++) {
    cs[i].fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(cs[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(cs[i].fd, (struct sockaddr *)&a, sizeof a)) return perror("connect"), 1;
    fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
    ev.events = EPOLLIN;
    ev.data.u64 = (uint64_t)i;
    epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
  }
  size_t cap = (size_t)(rate * (dur + warm)) + 16;
  double *lat = malloc(cap * sizeof *lat);
  size_t nlat = 0;
  long long issued = 0, done = 0, errors = 0, late = 0, measured_done = 0;
  double tlast = 0, t0 = now_s() + 0.01, tend = t0 + warm + dur, tmeas = t0 + warm;
  int *idle = malloc(sizeof(int) * (size_t)nconn), nidle = nconn;
  for (int i = 0; i < nconn; i++) idle[i] = nconn - 1 - i;
  struct epoll_event evs[64];
  for (;;) {
    double t = now_s();
    /* requests due by now, in schedule order, onto idle connections */
    long long due = t >= tend ? (long long)((tend - t0) * rate) : (long long)((t - t0) * rate) + 1;
    if (t < t0) due = 0;
    while (issued < due && nidle > 0) {
      lconn *c = &cs[idle[--nidle]];
      c->busy = 1;
      c->sent = 0;
      c->got = 0;
      c->t_sched = t0 + (double)issued / rate;
      if (t - c->t_sched > 1e-3) late++;
      issued++;
      if (send_more(c)) return fprintf(stderr, "loadgen: write failed: %s\n", strerror(errno)), 1;
      if (c->sent < req_n) {
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u64 = (uint64_t)(c - cs);
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
      }
    }
    if (t >= tend && nidle == nconn) break;
    if (t >= tend + 5) {
      fprintf(stderr, "loadgen: %d requests unanswered 5 s after the end\n", nconn - nidle);
      break;
    }
    /* wake at the next scheduled time (or for replies) */
    if (issued < due || t >= tend) {
      struct itimerspec its = {0};
      timerfd_settime(tfd, 0, &its, NULL);
    } else {
      double next = t0 + (double)issued / rate;
      struct itimerspec its = {0};
      its.it_value.tv_sec = (time_t)next;
      its.it_value.tv_nsec = (long)((next - (double)(time_t)next) * 1e9);
      if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
      timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    }
    int n = epoll_wait(ep, evs, 64, t >= tend ? 100 : 1000);
    for (int e = 0; e < n; e++) {
      if (evs[e].data.u64 == (uint64_t)-1) {
        uint64_t x;
        if (read(tfd, &x, sizeof x) < 0) { /* spurious: the loop recomputes */
        }
        continue;
      }
      lconn *c = &cs[evs[e].data.u64];
      if ((evs[e].events & EPOLLOUT) && c->sent < req_n) {
        if (send_more(c)) return fprintf(stderr, "loadgen: write failed\n"), 1;
        if (c->sent == req_n) {
          ev.events = EPOLLIN;
          ev.data.u64 = evs[e].data.u64;
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
      }
      if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      for (;;) {
        ssize_t k = read(c->fd, c->buf + c->got, sizeof c->buf - 1 - c->got);
        if (k == 0 || (k < 0 && errno != EAGAIN)) return fprintf(stderr, "loadgen: the server closed a connection\n"), 1;
        if (k < 0) break;
        c->got += (size_t)k;
        c->buf[c->got] = 0;
        char *he = strstr(c->buf, "\r\n\r\n");
        if (!he) {
          if (c->got + 1 >= sizeof c->buf) return fprintf(stderr, "loadgen: reply header too large\n"), 1;
          continue;
        }
        char *cl = strcasestr(c->buf, "content-length:");
        size_t need = (size_t)(he + 4 - c->buf) + (cl && cl < he ? (size_t)strtoul(cl + 15, NULL, 10) : 0);
        if (need >= sizeof c->buf) return fprintf(stderr, "loadgen: reply too large\n"), 1;
        if (c->got < need) continue;
        if (c->got > need) return fprintf(stderr, "loadgen: bytes after a reply\n"), 1;
        double tr = now_s();
        if (strncmp(c->buf, "HTTP/1.1 200", 12)) errors++;
        done++;
        if (c->t_sched >= tmeas && nlat < cap) lat[nlat++] = (tr - c->t_sched) * 1e6, measured_done++, tlast = tr;
        c->busy = 0;
        c->got = 0;
        idle[nidle++] = (int)evs[e].data.u64;
        break;
      }
    }
  }
  double span = tlast > tmeas ? tlast - tmeas : dur;
  qsort(lat, nlat, sizeof *lat, cmp_d);
#define PCT(p) (nlat ? lat[(size_t)((double)(nlat - 1) * (p))] : 0)
  printf("target_rate=%.0f\nachieved_rate=%.0f\nrequests=%zu\nerrors=%lld\nlate=%lld\n", rate,
         (double)measured_done / span, nlat, errors, late);
  printf("p50_us=%.0f\np90_us=%.0f\np99_us=%.0f\np999_us=%.0f\nmax_us=%.0f\n", PCT(0.5), PCT(0.9), PCT(0.99),
         PCT(0.999), nlat ? lat[nlat - 1] : 0);
  for (int i = 0; i < nconn; i++) close(cs[i].fd);
  return 0;
}
