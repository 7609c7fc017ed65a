/* distributed/gloo/gloo_plugin.cc - the collective transport on Gloo's TCP transport
 * (distributed/collective_api.h), built with the C++ compiler into its own shared object
 * (build/libloom_gloo.so) that libloom opens on first use for a job launched by TF_CONFIG alone (no
 * mpirun or srun).
 *
 * Rendezvous: Gloo connects its full mesh through a key-value store (gloo::rendezvous::Store). The
 * Debian Gloo ships a file store (a shared disk), a Redis store (a Redis server) and an in-process
 * one; none fits a TF_CONFIG job, whose only common knowledge is the cluster's addresses. So rank 0
 * (the chief, or worker 0 without a chief) serves a small key-value store at its own TF_CONFIG address
 * for the rendezvous only: the ranks publish their Gloo addresses and the address of a liveness
 * listener, connect the mesh, pass a barrier, and rank 0 closes the store. Every store call has a
 * deadline (the collective timeout).
 *
 * Collectives are Gloo's (ring all-reduce, broadcast, allgather(v), barrier), each with Gloo's timeout
 * set to the collective timeout. When one fails (a peer's connection closed, or the timeout passed),
 * the rank closes its own connections (so that its peers fail now, not at their timeout), every peer's
 * liveness listener is probed (connect and read one byte within a short grace period: a dead process
 * refuses, a stopped one does not answer) and the message names the ranks and TF_CONFIG tasks that did
 * not answer. A failed rank's listener answers on for the grace period and a second more (finalize
 * waits that long), so that its peers, failing in turn, do not count it among the lost.
 *
 * Non-blocking all-reduces (interface version 2): Gloo's collectives block their caller, so the plugin
 * runs them on a thread of its own, started on the first request. Requests queue in the order they are
 * made (the same on every rank, so the ranks' collectives pair up) and the thread runs them one after
 * another with the very code of the blocking all-reduce (the same algorithm on the same sizes: the same
 * bits); it sleeps on a condition variable while the queue is empty. test looks at a request, wait sleeps
 * until it completes. A blocking call first waits for the queue to drain, so the collectives keep their
 * order. A request that fails fails every one after it with the same message (the lost ranks named); a
 * Gloo call still running a while after its own timeout (the collective timeout) fails its waiter
 * anyway, the ranks that do not answer the liveness probe named, and the connections are closed so that
 * the peers fail at once. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "../collective_api.h"

namespace {

using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

int ms_left(double deadline) {
  double l = deadline - now_s();
  if (l <= 0) return 0;
  return l > 1e6 ? 1000000000 : (int)(l * 1000) + 1;
}

/* "host:port" (or "[v6]:port") split; false when malformed. */
bool split_addr(const std::string &a, std::string &host, std::string &port) {
  size_t c = a.rfind(':');
  if (c == std::string::npos || c == 0 || c + 1 >= a.size()) return false;
  host = a.substr(0, c);
  port = a.substr(c + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  for (char ch : port)
    if (ch < '0' || ch > '9') return false;
  return true;
}

/* Sends / receives exactly n bytes before the deadline. */
bool send_all(int fd, const void *p, size_t n, double deadline) {
  const char *c = (const char *)p;
  while (n > 0) {
    struct pollfd q = {fd, POLLOUT, 0};
    int r = poll(&q, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}
bool recv_all(int fd, void *p, size_t n, double deadline) {
  char *c = (char *)p;
  while (n > 0) {
    struct pollfd q = {fd, POLLIN, 0};
    int r = poll(&q, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t k = recv(fd, c, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

/* A connected TCP socket to host:port before the deadline (one attempt), or -1 with why. */
int connect_once(const std::string &host, const std::string &port, double deadline, std::string &why) {
  struct addrinfo hints, *res = nullptr;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (g) {
    why = std::string("cannot resolve ") + host + ": " + gai_strerror(g);
    return -1;
  }
  int out = -1;
  for (struct addrinfo *a = res; a && out < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int fl = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      struct pollfd q = {fd, POLLOUT, 0};
      int r;
      do r = poll(&q, 1, ms_left(deadline));
      while (r < 0 && errno == EINTR);
      int e = 0;
      socklen_t el = sizeof e;
      if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) rc = 0;
      else why = r == 0 ? "connect timed out" : strerror(e ? e : errno);
    } else if (rc < 0) {
      why = strerror(errno);
    }
    if (rc == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      out = fd;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(res);
  return out;
}

/* A listening socket on host (empty: every address) and port ("0": any free one); its port in *bound. */
int listen_on(const std::string &host, const std::string &port, int *bound, std::string &why) {
  struct addrinfo hints, *res = nullptr;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = host.empty() ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int g = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (g && host.empty()) { /* no IPv6: every IPv4 address */
    hints.ai_family = AF_INET;
    g = getaddrinfo(nullptr, port.c_str(), &hints, &res);
  }
  if (g) {
    why = std::string("cannot resolve ") + (host.empty() ? "the wildcard address" : host) + ": " + gai_strerror(g);
    return -1;
  }
  int out = -1;
  for (struct addrinfo *a = res; a && out < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      getsockname(fd, (struct sockaddr *)&ss, &sl);
      *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
      out = fd;
    } else {
      why = strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(res);
  return out;
}

/* ------------------------------------------------------------------ the rendezvous store */
/* Requests: 'S' u32 keylen key u32 vallen val -> 1 byte; 'G' u32 keylen key -> u32 vallen val, sent when
 * the key has been set. */
enum : uint32_t { kMaxKey = 4096, kMaxVal = 16u << 20 };

class KvServer {
 public:
  bool start(const std::string &port, std::string &why) {
    int bound = 0;
    lfd_ = listen_on("", port, &bound, why);
    if (lfd_ < 0) return false;
    acceptor_ = std::thread([this] { accept_loop(); });
    return true;
  }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    if (acceptor_.joinable()) acceptor_.join();
    for (auto &t : conns_) t.join();
    conns_.clear();
    for (int fd : fds_) close(fd);
    fds_.clear();
    if (lfd_ >= 0) close(lfd_);
    lfd_ = -1;
  }
  ~KvServer() { stop(); }

 private:
  void accept_loop() {
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stop_) return;
      }
      struct pollfd q = {lfd_, POLLIN, 0};
      if (poll(&q, 1, 100) <= 0) continue;
      int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) {
        close(fd);
        return;
      }
      fds_.push_back(fd);
      conns_.emplace_back([this, fd] { serve(fd); });
    }
  }
  bool rd(int fd, void *p, size_t n) { return recv_all(fd, p, n, now_s() + 1e9); }
  void serve(int fd) {
    for (;;) {
      char op = 0;
      uint32_t kl = 0, vl = 0;
      if (!rd(fd, &op, 1) || !rd(fd, &kl, 4) || kl > kMaxKey) return;
      std::string key(kl, '\0');
      if (!rd(fd, &key[0], kl)) return;
      if (op == 'S') {
        if (!rd(fd, &vl, 4) || vl > kMaxVal) return;
        std::vector<char> v(vl);
        if (vl && !rd(fd, v.data(), vl)) return;
        {
          std::lock_guard<std::mutex> l(mu_);
          kv_[key] = std::move(v);
        }
        cv_.notify_all();
        char ok = 1;
        if (!send_all(fd, &ok, 1, now_s() + 10)) return;
      } else if (op == 'G') {
        std::vector<char> v;
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait(l, [&] { return stop_ || kv_.count(key); });
          if (stop_) return;
          v = kv_[key];
        }
        vl = (uint32_t)v.size();
        if (!send_all(fd, &vl, 4, now_s() + 10) || (vl && !send_all(fd, v.data(), vl, now_s() + 10))) return;
      } else {
        return;
      }
    }
  }
  int lfd_ = -1;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> kv_;
  std::thread acceptor_;
  std::vector<std::thread> conns_;
  std::vector<int> fds_;
};

std::string task_of(int r);

/* "rank r (type:i)" for a key that ends in a rank number ("loom/probe/1", Gloo's "1"), else the key. */
std::string key_owner(const std::string &key) {
  size_t b = key.find_last_not_of("0123456789");
  b = b == std::string::npos ? 0 : b + 1;
  if (b >= key.size()) return "'" + key + "'";
  return "'" + key + "' from rank " + task_of(atoi(key.c_str() + b));
}

class KvStore : public gloo::rendezvous::Store {
 public:
  KvStore(std::string host, std::string port, std::string who, double timeout)
      : host_(std::move(host)), port_(std::move(port)), who_(std::move(who)), timeout_(timeout) {}
  ~KvStore() override { close_conn(); }
  void close_conn() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void set(const std::string &key, const std::vector<char> &data) override {
    double dl = now_s() + timeout_;
    connect_by(dl);
    uint32_t kl = (uint32_t)key.size(), vl = (uint32_t)data.size();
    char op = 'S', ok = 0;
    if (!send_all(fd_, &op, 1, dl) || !send_all(fd_, &kl, 4, dl) || !send_all(fd_, key.data(), kl, dl) ||
        !send_all(fd_, &vl, 4, dl) || (vl && !send_all(fd_, data.data(), vl, dl)) || !recv_all(fd_, &ok, 1, dl))
      lost("publishing '" + key + "'");
  }
  std::vector<char> get(const std::string &key) override { return get_by(key, now_s() + timeout_); }
  void wait(const std::vector<std::string> &keys) override { wait(keys, std::chrono::milliseconds((long long)(timeout_ * 1e3))); }
  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override {
    double dl = now_s() + (double)t.count() / 1e3;
    for (const auto &k : keys) get_by(k, dl);
  }

 private:
  std::vector<char> get_by(const std::string &key, double dl) {
    connect_by(dl);
    uint32_t kl = (uint32_t)key.size(), vl = 0;
    char op = 'G';
    if (!send_all(fd_, &op, 1, dl) || !send_all(fd_, &kl, 4, dl) || !send_all(fd_, key.data(), kl, dl) ||
        !recv_all(fd_, &vl, 4, dl))
      lost("waiting for " + key_owner(key) + " (a task that has not joined the rendezvous)");
    std::vector<char> v(vl);
    if (vl && !recv_all(fd_, v.data(), vl, dl)) lost("reading '" + key + "'");
    return v;
  }
  /* Connects, retrying until the deadline: rank 0 may start after this rank. */
  void connect_by(double dl) {
    if (fd_ >= 0) return;
    std::string why = "no attempt";
    while (fd_ < 0) {
      fd_ = connect_once(host_, port_, std::min(dl, now_s() + 2.0), why);
      if (fd_ >= 0) return;
      if (now_s() >= dl) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("the rendezvous store served by " + who_ + " at " + host_ + ":" + port_ +
                             " could not be reached within the collective timeout of " + fmt(timeout_) +
                             " s (last error: " + why + ")");
  }
  [[noreturn]] void lost(const std::string &what) {
    close_conn();
    throw std::runtime_error("rendezvous through " + who_ + " at " + host_ + ":" + port_ + ": " + what +
                             " did not complete within the collective timeout of " + fmt(timeout_) +
                             " s (or the store closed)");
  }
  static std::string fmt(double x) {
    char b[32];
    snprintf(b, sizeof b, "%g", x);
    return b;
  }
  std::string host_, port_, who_;
  double timeout_;
  int fd_ = -1;
};

/* ------------------------------------------------------------------ the liveness listener */
class Prober {
 public:
  bool start(const std::string &host, std::string &why) {
    lfd_ = listen_on(host, "0", &port_, why);
    if (lfd_ < 0) return false;
    th_ = std::thread([this] {
      while (!stop_.load()) {
        struct pollfd q = {lfd_, POLLIN, 0};
        if (poll(&q, 1, 100) <= 0) continue;
        int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        char one = 1;
        send_all(fd, &one, 1, now_s() + 1);
        close(fd);
      }
    });
    return true;
  }
  int port() const { return port_; }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
    if (lfd_ >= 0) close(lfd_);
    lfd_ = -1;
  }
  ~Prober() { stop(); }

 private:
  int lfd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread th_;
};

/* ------------------------------------------------------------------ state */
struct State {
  int rank = 0, size = 0;
  std::string store, host, names_csv;
  std::vector<std::string> names;    /* TF_CONFIG task of each rank */
  std::vector<std::string> probe_at; /* each rank's liveness listener, host:port */
  bool configured = false, inited = false;
  std::atomic<bool> failed{false};     /* set by the all-reduce thread too */
  std::atomic<double> failed_at{0.0};
  double timeout = 60.0;
  long long calls = 0;
  uint32_t tag = 0;
  std::shared_ptr<gloo::Context> ctx;
  /* the all-reduce of each size so far: a staging buffer and Gloo's chunked ring on it (built once;
   * every rank asks for the same sizes in the same order, so the ranks' instances pair up; used by one
   * thread at a time: the caller's, or the all-reduce thread's while requests are queued) */
  struct Staged {
    std::vector<float> buf;
    std::unique_ptr<gloo::AllreduceRingChunked<float>> alg;
  };
  std::map<int64_t, Staged> ar;
  std::shared_ptr<gloo::transport::Device> dev;
  Prober prober;
} *g;

State &S() {
  if (!g) g = new State(); /* never freed: Gloo's threads may outlive a failed job's finalize */
  return *g;
}

std::string task_of(int r) {
  State &s = S();
  char b[32];
  snprintf(b, sizeof b, "%d", r);
  std::string out = b;
  if (r >= 0 && r < (int)s.names.size() && !s.names[r].empty()) out += " (" + s.names[r] + ")";
  return out;
}

double probe_grace() { return S().timeout < 2.0 ? S().timeout : 2.0; }

/* The ranks whose liveness listener does not answer within grace seconds ("" when all answer). */
std::string probe_lost() {
  State &s = S();
  double grace = probe_grace();
  std::vector<char> alive((size_t)s.size, 1);
  std::vector<std::thread> th;
  for (int r = 0; r < s.size; r++) {
    if (r == s.rank || r >= (int)s.probe_at.size()) continue;
    th.emplace_back([&, r] {
      std::string h, p, why;
      double dl = now_s() + grace;
      char one = 0;
      int fd = split_addr(s.probe_at[r], h, p) ? connect_once(h, p, dl, why) : -1;
      alive[(size_t)r] = fd >= 0 && recv_all(fd, &one, 1, dl) && one == 1;
      if (fd >= 0) close(fd);
    });
  }
  for (auto &t : th) t.join();
  std::string out;
  for (int r = 0; r < s.size; r++)
    if (!alive[(size_t)r]) out += (out.empty() ? "" : ", ") + task_of(r);
  return out;
}

int fail(char *err, size_t cap, const std::string &msg) {
  snprintf(err, cap, "%s", msg.c_str());
  S().failed = true;
  return 1;
}

std::vector<std::string> split_csv(const std::string &s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    size_t c = s.find(',', b);
    out.push_back(s.substr(b, c == std::string::npos ? std::string::npos : c - b));
    if (c == std::string::npos) break;
    b = c + 1;
  }
  return out;
}

std::chrono::milliseconds tmo() { return std::chrono::milliseconds((long long)(S().timeout * 1e3)); }

/* Closes this rank's connections (its peers' collectives then fail at once); callable from any thread. */
void close_pairs(const std::shared_ptr<gloo::Context> &c) {
  if (!c) return;
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank) continue;
    try {
      auto &p = c->getPair(r);
      if (p) p->close();
    } catch (const std::exception &) {
    }
  }
}

/* ------------------------------------------------------------------ the all-reduce thread */
struct Async {
  std::mutex api; /* every entry point holds it: one caller at a time */
  std::mutex mu;  /* the fields below */
  std::condition_variable work, done;
  std::thread th;
  bool on = false, stop = false, exited = false;
  bool failed = false; /* a request failed, one overran its deadline, or the caller abandoned them */
  std::string err;     /* the first failure's message */
  double failed_at = 0;
  struct Req {
    float *buf = nullptr;
    int64_t n = 0;
    int st = 0; /* 0 free, 1 queued, 2 running, 3 done */
    int rc = 0;
  };
  std::vector<Req> req;
  std::deque<int> q;
  int running = -1;
  double run_since = 0;
  long long started = 0, completed = 0; /* requests, for the messages */
  std::shared_ptr<gloo::Context> ctx;   /* the thread's context, to close its connections from here */
} *ga;

Async &A() {
  if (!ga) ga = new Async(); /* never freed: a thread stuck in Gloo may outlive a failed job's finalize */
  return *ga;
}

int all_reduce_now(float *buf, int64_t n, char *err, size_t cap);

void worker_main() {
  Async &a = A();
  std::unique_lock<std::mutex> l(a.mu);
  for (;;) {
    a.work.wait(l, [&] { return a.stop || !a.q.empty(); });
    if (a.q.empty()) break; /* stopped, nothing left */
    int k = a.q.front();
    a.q.pop_front();
    if (a.failed) { /* an earlier request failed: this one fails with its message */
      a.req[(size_t)k].st = 3;
      a.req[(size_t)k].rc = 1;
      a.done.notify_all();
      continue;
    }
    float *buf = a.req[(size_t)k].buf;
    int64_t n = a.req[(size_t)k].n;
    a.req[(size_t)k].st = 2;
    a.running = k;
    a.run_since = now_s();
    l.unlock();
    char err[1024];
    err[0] = 0;
    int rc = all_reduce_now(buf, n, err, sizeof err);
    l.lock();
    a.running = -1;
    a.req[(size_t)k].st = 3;
    a.req[(size_t)k].rc = rc;
    a.completed++;
    if (rc && !a.failed) {
      a.failed = true;
      a.failed_at = now_s();
      a.err = err;
    }
    a.done.notify_all();
  }
  a.exited = true;
  a.done.notify_all();
}

/* How long past its start a running request may take before its waiter gives up on it: Gloo's own
 * timeout (the collective timeout), the liveness probe after it, and a margin. */
double overrun_s() { return S().timeout + probe_grace() + 5.0; }

/* (a.mu held) When the running request has overrun its deadline: fails the transport, naming the ranks
 * that do not answer the liveness probe, and closes the connections (the peers fail at once). */
void watchdog(std::unique_lock<std::mutex> &l) {
  Async &a = A();
  if (a.failed || a.running < 0 || now_s() < a.run_since + overrun_s()) return;
  a.failed = true;
  a.failed_at = now_s();
  State &s = S();
  a.err = "collective allreduce (request " + std::to_string(a.completed + 1) + ") on rank " + task_of(s.rank) +
          " of " + std::to_string(s.size) + " did not complete within the collective timeout of " +
          std::to_string((long long)s.timeout) + " s: lost rank(s) (dead or stalled, no answer to a liveness probe): ";
  std::shared_ptr<gloo::Context> c = a.ctx;
  l.unlock();
  close_pairs(c);
  std::string lost = probe_lost();
  l.lock();
  a.err += (lost.empty() ? "none (every rank answered; the Gloo call did not return)" : lost) +
           std::string(" [the all-reduce thread's Gloo call ran past its timeout]");
  a.done.notify_all();
}

/* The failure that ended the non-blocking all-reduces, or "". */
std::string async_failure() {
  Async &a = A();
  std::lock_guard<std::mutex> l(a.mu);
  return a.failed ? (a.err.empty() ? std::string("the non-blocking all-reduces were abandoned") : a.err)
                  : std::string();
}

/* Waits until every queued request has completed (a blocking collective comes after them), or the
 * transport failed. */
void drain() {
  Async &a = A();
  std::unique_lock<std::mutex> l(a.mu);
  while (!a.failed && (!a.q.empty() || a.running >= 0)) {
    a.done.wait_for(l, std::chrono::milliseconds(200));
    watchdog(l);
  }
}

/* Stops the thread: joins it, or after a failure leaves it (it may be stuck in Gloo) when it has not
 * ended within a second. */
void worker_stop() {
  Async &a = A();
  std::unique_lock<std::mutex> l(a.mu);
  if (!a.on) return;
  a.stop = true;
  a.work.notify_all();
  bool ended = a.done.wait_for(l, std::chrono::milliseconds((long long)((a.failed ? 1.0 : overrun_s()) * 1e3)), [&] { return a.exited; });
  l.unlock();
  if (ended) a.th.join();
  else a.th.detach();
  l.lock();
  a.on = false;
  a.stop = false;
  a.exited = false;
  a.q.clear();
  a.req.clear();
  a.ctx.reset();
}

/* ------------------------------------------------------------------ the plugin's calls */
int p_init(double timeout_s, char *err, size_t cap) {
  State &s = S();
  if (s.inited) return 0;
  if (timeout_s > 0) s.timeout = timeout_s;
  if (!s.configured)
    return fail(err, cap, "the Gloo transport was not given its rendezvous (rank, size, rank 0's address)");
  struct sigaction sa;
  if (sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  if (s.size == 1) { /* nothing to meet: Gloo's in-process store */
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = s.host;
      s.dev = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(0, 1);
      ctx->setTimeout(tmo());
      gloo::rendezvous::HashStore store;
      ctx->connectFullMesh(store, s.dev);
      s.ctx = ctx;
    } catch (const std::exception &e) {
      return fail(err, cap, std::string("Gloo context of one rank: ") + e.what());
    }
    s.probe_at.assign(1, std::string());
    s.inited = true;
    return 0;
  }
  std::string sh, sp, why;
  if (!split_addr(s.store, sh, sp)) return fail(err, cap, "rendezvous address '" + s.store + "' is not host:port");
  if (sp == "0")
    return fail(err, cap, "rendezvous address " + s.store + " of rank " + task_of(0) +
                              " has port 0: the collective strategy's rank 0 serves the rendezvous at its TF_CONFIG "
                              "address, which needs a fixed port");
  std::unique_ptr<KvServer> server;
  if (s.rank == 0) {
    server.reset(new KvServer());
    if (!server->start(sp, why))
      return fail(err, cap, "rank 0 (" + s.names[0] + ") cannot serve the rendezvous at its TF_CONFIG address " +
                                s.store + ": " + why);
  }
  if (!s.prober.start(s.host, why))
    return fail(err, cap, "cannot listen on this task's host " + s.host + " (its TF_CONFIG address): " + why);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = s.host;
    s.dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(s.rank, s.size);
    ctx->setTimeout(tmo());
    KvStore store(sh, sp, "rank " + task_of(0), s.timeout);
    char mine[512];
    snprintf(mine, sizeof mine, "%s:%d", s.host.c_str(), s.prober.port());
    store.set("loom/probe/" + std::to_string(s.rank), std::vector<char>(mine, mine + strlen(mine)));
    store.set("loom/size/" + std::to_string(s.rank), std::vector<char>(s.names_csv.begin(), s.names_csv.end()));
    if (s.rank == 0) { /* every task must see the same cluster */
      for (int r = 1; r < s.size; r++) {
        std::vector<char> v = store.get("loom/size/" + std::to_string(r));
        std::string theirs(v.begin(), v.end());
        if (theirs != s.names_csv)
          throw std::runtime_error("rank " + std::to_string(r) + "'s TF_CONFIG names the trainers " + theirs +
                                   " where rank 0's names " + s.names_csv);
      }
    }
    ctx->connectFullMesh(store, s.dev);
    s.probe_at.assign((size_t)s.size, std::string());
    for (int r = 0; r < s.size; r++) {
      std::vector<char> v = store.get("loom/probe/" + std::to_string(r));
      s.probe_at[(size_t)r].assign(v.begin(), v.end());
    }
    s.ctx = ctx;
    gloo::BarrierOptions b(s.ctx);
    b.setTimeout(tmo());
    gloo::barrier(b); /* every rank is done with the store */
    store.close_conn();
  } catch (const std::exception &e) {
    if (server) server->stop();
    std::string m = std::string("rendezvous of rank ") + task_of(s.rank) + " of " + std::to_string(s.size) +
                    " failed: " + e.what();
    if (strstr(e.what(), "Timed out")) /* Gloo's own wait (connecting the mesh) */
      m += " (the collective timeout is " + std::to_string((long long)s.timeout) + " s)";
    snprintf(err, cap, "%s", m.c_str());
    s.failed = true;
    return 1;
  }
  if (server) server->stop();
  s.inited = true;
  return 0;
}

int check(char *err, size_t cap) {
  State &s = S();
  if (!s.inited) {
    snprintf(err, cap, "the Gloo transport is not initialized");
    return 1;
  }
  std::string why = async_failure();
  if (!why.empty()) { /* the message that names the lost ranks */
    snprintf(err, cap, "%s", why.c_str());
    s.failed = true;
    return 1;
  }
  if (s.failed) {
    snprintf(err, cap, "the Gloo transport failed earlier (a collective timed out or failed); the job must restart");
    return 1;
  }
  s.calls++;
  return 0;
}

template <class F>
int run(const char *what, F f, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  State &s = S();
  try {
    f(s.ctx, s.tag++);
    return 0;
  } catch (const std::exception &e) {
    /* close this rank's connections at once, so that every peer's collective fails now too (not at its
     * timeout); the liveness listener keeps answering until finalize has lingered (below), so that the
     * peers' probes name only the ranks that are really dead or stalled */
    s.failed_at = now_s();
    s.ar.clear();
    close_pairs(s.ctx); /* the all-reduce thread's reference keeps the context: close explicitly */
    s.ctx.reset();
    std::string lost = probe_lost();
    bool timed = strstr(e.what(), "Timed out") || strstr(e.what(), "timed out") || strstr(e.what(), "timeout");
    char head[512];
    if (timed)
      snprintf(head, sizeof head,
               "collective %s (call %lld) on rank %s of %d did not complete within the collective timeout of %g s",
               what, s.calls, task_of(s.rank).c_str(), s.size, s.timeout);
    else
      snprintf(head, sizeof head, "collective %s (call %lld) on rank %s of %d failed", what, s.calls,
               task_of(s.rank).c_str(), s.size);
    return fail(err, cap,
                std::string(head) + ": lost rank(s) (dead or stalled, no answer to a liveness probe): " +
                    (lost.empty() ? "none (every rank answered; the collective itself failed)" : lost) +
                    " [Gloo: " + e.what() + "]");
  }
}

int p_rank() { return S().rank; }
int p_size() { return S().size; }
void p_set_timeout(double t) {
  std::lock_guard<std::mutex> api(A().api);
  drain(); /* the thread reads the timeout */
  if (t > 0) {
    S().timeout = t;
    if (S().ctx) S().ctx->setTimeout(tmo());
  }
}

/* All-reduces use the staged chunked ring: Gloo's buffer-bound algorithm, built once per size, whose
 * fixed cost per call is lower than that of the per-call all-reduce (gloo::allreduce, which sets up its
 * buffers every call). Every size up to kStagedMax floats (256 MiB) does, not only small ones: a step
 * whose buckets alternate between the two algorithms (small and large buckets) stalls tens of
 * milliseconds at each switch on loopback, where either algorithm alone takes a few. The price is a copy
 * into the staging buffer and back per call, and the staging buffers themselves: at most kStagedSizes
 * sizes and kStagedBytes bytes in all are kept, else the cache starts again (the same on every rank: the
 * ranks ask for the same sizes in the same order, and building an algorithm takes Gloo slots, which must
 * agree). Larger all-reduces use the per-call all-reduce, in place. */
constexpr int64_t kStagedMax = (int64_t)1 << 26;
constexpr size_t kStagedSizes = 64;
constexpr int64_t kStagedBytes = (int64_t)1 << 28;

int all_reduce_now(float *buf, int64_t n, char *err, size_t cap) {
  return run("allreduce",
             [&](std::shared_ptr<gloo::Context> &c, uint32_t tag) {
               if (n <= 0) return;
               State &st = S();
               if (n <= kStagedMax) {
                 auto it = st.ar.find(n);
                 if (it == st.ar.end()) {
                   int64_t bytes = n * (int64_t)sizeof(float);
                   for (auto &e : st.ar) bytes += (int64_t)e.second.buf.size() * (int64_t)sizeof(float);
                   if (st.ar.size() >= kStagedSizes || bytes > kStagedBytes) st.ar.clear();
                   State::Staged &g = st.ar[n];
                   g.buf.resize((size_t)n);
                   g.alg.reset(new gloo::AllreduceRingChunked<float>(c, {g.buf.data()}, (int)n));
                   it = st.ar.find(n);
                 }
                 memcpy(it->second.buf.data(), buf, (size_t)n * sizeof(float));
                 it->second.alg->run();
                 memcpy(buf, it->second.buf.data(), (size_t)n * sizeof(float));
                 return;
               }
               gloo::AllreduceOptions o(c);
               o.setInput(buf, (size_t)n);
               o.setOutput(buf, (size_t)n);
               o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
               o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
               o.setTag(tag);
               o.setTimeout(tmo());
               gloo::allreduce(o);
             },
             err, cap);
}

/* The blocking calls: one caller at a time, after the queued requests. */
#define BLOCKING                                 \
  std::lock_guard<std::mutex> api_lock_(A().api); \
  drain()

int p_allreduce(float *buf, int64_t n, char *err, size_t cap) {
  BLOCKING;
  return all_reduce_now(buf, n, err, cap);
}

int p_broadcast(void *buf, int64_t bytes, int root, char *err, size_t cap) {
  BLOCKING;
  return run("broadcast",
             [&](std::shared_ptr<gloo::Context> &c, uint32_t tag) {
               if (bytes <= 0) return;
               gloo::BroadcastOptions o(c);
               o.setOutput((char *)buf, (size_t)bytes);
               o.setRoot(root);
               o.setTag(tag);
               o.setTimeout(tmo());
               gloo::broadcast(o);
             },
             err, cap);
}

int p_allgather(const void *send, int64_t bytes, void *recv, char *err, size_t cap) {
  BLOCKING;
  return run("allgather",
             [&](std::shared_ptr<gloo::Context> &c, uint32_t tag) {
               if (bytes <= 0) return;
               gloo::AllgatherOptions o(c);
               o.setInput((char *)send, (size_t)bytes);
               o.setOutput((char *)recv, (size_t)bytes * (size_t)c->size);
               o.setTag(tag);
               o.setTimeout(tmo());
               gloo::allgather(o);
             },
             err, cap);
}

int p_allgatherv(const void *send, int64_t bytes, void *recv, const int64_t *counts, char *err, size_t cap) {
  BLOCKING;
  if (counts[S().rank] != bytes) {
    snprintf(err, cap, "Gloo allgatherv: this rank's count %lld differs from its buffer's %lld bytes",
             (long long)counts[S().rank], (long long)bytes);
    S().failed = true;
    return 1;
  }
  return run("allgatherv",
             [&](std::shared_ptr<gloo::Context> &c, uint32_t tag) {
               std::vector<size_t> el((size_t)c->size);
               size_t total = 0;
               for (int r = 0; r < c->size; r++) total += el[(size_t)r] = (size_t)counts[r];
               if (total == 0) return;
               /* Gloo's buffers may not be empty: a rank with nothing to send lends one byte of recv */
               static char none;
               gloo::AllgathervOptions o(c);
               o.setInput(bytes > 0 ? (char *)send : &none, (size_t)bytes);
               o.setOutput((char *)recv, el);
               o.setTag(tag);
               o.setTimeout(tmo());
               gloo::allgatherv(o);
             },
             err, cap);
}

int p_barrier(char *err, size_t cap) {
  BLOCKING;
  return run("barrier",
             [&](std::shared_ptr<gloo::Context> &c, uint32_t tag) {
               gloo::BarrierOptions o(c);
               o.setTag(tag);
               o.setTimeout(tmo());
               gloo::barrier(o);
             },
             err, cap);
}

/* ---- version 2: the non-blocking all-reduce */
int p_iallreduce(float *buf, int64_t n, int *req, char *err, size_t cap) {
  std::lock_guard<std::mutex> api(A().api);
  State &s = S();
  Async &a = A();
  *req = -1;
  if (!s.inited) {
    snprintf(err, cap, "the Gloo transport is not initialized");
    return 1;
  }
  std::unique_lock<std::mutex> l(a.mu);
  if (a.failed || s.failed) {
    l.unlock();
    return check(err, cap);
  }
  if (!a.on) {
    a.stop = a.exited = false;
    a.ctx = s.ctx;
    try {
      a.th = std::thread(worker_main);
    } catch (const std::exception &e) {
      l.unlock();
      return fail(err, cap, std::string("Gloo transport: cannot start the all-reduce thread: ") + e.what());
    }
    a.on = true;
  }
  size_t k = 0;
  while (k < a.req.size() && a.req[k].st != 0) k++;
  if (k == a.req.size()) a.req.emplace_back();
  a.req[k].buf = buf;
  a.req[k].n = n;
  a.req[k].st = 1;
  a.req[k].rc = 0;
  a.q.push_back((int)k);
  a.started++;
  *req = (int)k;
  a.work.notify_one();
  return 0;
}

/* (a.mu held) req names a request in flight, else an error. */
bool valid_req(int req, char *err, size_t cap) {
  Async &a = A();
  if (req >= 0 && req < (int)a.req.size() && a.req[(size_t)req].st != 0) return true;
  snprintf(err, cap, "Gloo transport: no all-reduce request %d in flight", req);
  return false;
}

/* (a.mu held) the failure message for a request that failed or will not complete */
int req_failed(int req, char *err, size_t cap) {
  Async &a = A();
  if (a.req[(size_t)req].st == 3) a.req[(size_t)req].st = 0;
  snprintf(err, cap, "%s", a.err.empty() ? "the non-blocking all-reduces were abandoned" : a.err.c_str());
  S().failed = true;
  return 1;
}

int p_test(int req, int *done, char *err, size_t cap) {
  std::lock_guard<std::mutex> api(A().api);
  Async &a = A();
  *done = 0;
  std::unique_lock<std::mutex> l(a.mu);
  if (!valid_req(req, err, cap)) return 1;
  Async::Req &r = a.req[(size_t)req];
  if (r.st == 3 && r.rc == 0) {
    r.st = 0;
    *done = 1;
    return 0;
  }
  watchdog(l);
  if (a.req[(size_t)req].st == 3 || a.failed) return req_failed(req, err, cap);
  return 0;
}

int p_wait(int req, char *err, size_t cap) {
  std::lock_guard<std::mutex> api(A().api);
  Async &a = A();
  std::unique_lock<std::mutex> l(a.mu);
  if (!valid_req(req, err, cap)) return 1;
  for (;;) {
    Async::Req &r = a.req[(size_t)req];
    if (r.st == 3 && r.rc == 0) {
      r.st = 0;
      return 0;
    }
    if (r.st == 3 || a.failed) return req_failed(req, err, cap);
    a.done.wait_for(l, std::chrono::milliseconds(200));
    watchdog(l);
  }
}

/* The caller gives up on its requests (another rank failed, or its own step did): the transport fails,
 * and the connections close, so that a Gloo call in flight here and the peers' collectives end now. */
void p_abandon() {
  Async &a = A();
  std::shared_ptr<gloo::Context> c;
  {
    std::lock_guard<std::mutex> l(a.mu);
    if (!a.failed) {
      a.failed = true;
      a.failed_at = now_s();
      a.err = "the non-blocking all-reduces were abandoned after a failure";
    }
    c = a.on ? a.ctx : S().ctx; /* without the thread, nothing else touches the caller's context */
    a.done.notify_all();
  }
  S().failed = true;
  if (S().failed_at == 0) S().failed_at = now_s();
  close_pairs(c);
}

void p_abort(int code) { _exit(code); }

int p_finalize() {
  std::lock_guard<std::mutex> api(A().api);
  State &s = S();
  if (!s.inited) return 0;
  double afail = 0;
  {
    Async &a = A();
    std::lock_guard<std::mutex> l(a.mu);
    if (a.failed) afail = a.failed_at;
  }
  if (s.failed || afail > 0) { /* answer the peers' probes a while: they are naming the lost ranks */
    s.inited = false;
    double until = std::max((double)s.failed_at, afail) + probe_grace() + 1.0;
    while (now_s() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    close_pairs(A().ctx);
    worker_stop();
    s.prober.stop();
    return 1;
  }
  worker_stop(); /* idle: every request was waited for */
  s.inited = false;
  s.prober.stop();
  s.ar.clear();
  s.ctx.reset();
  s.dev.reset();
  return 0;
}

loom_coll_api g_api;

} // namespace

/* Before init: this process's rank of size, rank 0's address ("host:port", where it serves the
 * rendezvous), this task's host (Gloo listens there) and the ranks' TF_CONFIG task names, comma-separated
 * ("chief:0,worker:0"). Returns 0, or non-zero with a message in err. */
extern "C" __attribute__((visibility("default"))) int loom_collective_rendezvous(int rank, int size, const char *store,
                                                                                  const char *host, const char *names,
                                                                                  char *err, size_t cap) {
  State &s = S();
  if (s.inited) return 0;
  if (size < 1 || rank < 0 || rank >= size || !store || !host || !names) {
    snprintf(err, cap, "Gloo rendezvous: rank %d of size %d (or an address) is invalid", rank, size);
    return 1;
  }
  s.rank = rank;
  s.size = size;
  s.store = store;
  s.host = host;
  s.names_csv = names;
  s.names = split_csv(names);
  s.configured = true;
  return 0;
}

extern "C" __attribute__((visibility("default"))) const loom_coll_api *loom_collective_plugin(void) {
  static char name[64];
  snprintf(name, sizeof name, "Gloo %d.%d.%d (tcp)", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  g_api.version = LOOM_COLL_API_VERSION;
  g_api.name = name;
  g_api.init = p_init;
  g_api.rank = p_rank;
  g_api.size = p_size;
  g_api.set_timeout = p_set_timeout;
  g_api.allreduce_sum_f32 = p_allreduce;
  g_api.broadcast = p_broadcast;
  g_api.allgather = p_allgather;
  g_api.allgatherv = p_allgatherv;
  g_api.barrier = p_barrier;
  g_api.abort = p_abort;
  g_api.finalize = p_finalize;
  g_api.iallreduce_sum_f32 = p_iallreduce;
  g_api.test = p_test;
  g_api.wait = p_wait;
  g_api.abandon = p_abandon;
  return &g_api;
}
