/* The parameter server's wire protocol, through its public API: a PS
 * (loom_ps_server_start on 127.0.0.1, an HMAC token, max_frame 1 MiB, a
 * model_dir for SAVE/RESTORE) gets one new TCP connection per input that
 * carries the input; then the connection is half-closed and every reply is
 * read until the PS closes it (a PS that neither answers nor closes within
 * 10 s is a hang: abort). While fuzzing, a PS lives for up to 256 inputs
 * (see server()), so an input may meet variables an earlier one created: a
 * crash found then may need the inputs before it to reproduce. Replays
 * (LOOM_FUZZ_REPLAY, set by fuzz.sh) use a fresh PS per input.
 *
 * Byte 0 picks how the rest is sent:
 *   bits 0-1  the PS's consistency: 0 ASYNC, 1 BOUNDED (staleness 1),
 *             2 SYNC (2 replicas, a 20 ms step deadline), 3 ASYNC without a
 *             model_dir (SAVE/RESTORE refused);
 *   bit 2     the harness does the handshake first (HELLO, reads CHALLENGE,
 *             AUTH with the MAC computed from the PS's nonce, reads WELCOME),
 *             so what follows reaches the request handlers; without it the
 *             input's bytes are the handshake (HELLO/AUTH decoding: a random
 *             server nonce means no AUTH from the input can pass);
 *   bit 3     (with bit 2) the HELLO's 24 bytes of fields come from the input
 *             (protocol range, counts, placement hash), nonce fixed;
 *   bit 4     (with bit 2) the AUTH's MAC is wrong in one bit;
 *   bit 6     (with bit 2) the HELLO carries a client id (64 bytes), so the
 *             mutating requests go through the PS's duplicate window (the id
 *             is the same for every input: windows meet earlier inputs' ids);
 *   bit 5     framed: the rest is records [opcode u8][tweak u8][len u16 LE]
 *             [len body bytes] that the harness sends as frames with a valid
 *             header (magic, version, request id, CRC-32C of the body) unless
 *             the tweak bits say otherwise (1: reply flag, 2: bad CRC, 4: bad
 *             magic, 8: bad version, 16: body_len one more than sent, 32:
 *             status != 0, 64: the previous frame's request id again, a
 *             re-send; 128: opcode + 256); without it the rest is sent
 *             as raw bytes. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include "loom/loom_distributed.h"
#include "distributed/wire.h"
#include "fuzz_util.h"

static const char TOKEN[] = "fuzz-ps-token-0123456789";
#define PH 0x0123456789abcdefull
#define NUM_PS 1
#define NUM_VARS 3

static int send_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads exactly n bytes (0), EOF/error (-1); a wait of 10 s is a hang (abort). */
static int recv_exact(int fd, void *p, size_t n) {
  uint8_t *b = p;
  while (n) {
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, 10000);
    if (r == 0) {
      fprintf(stderr, "fuzz_ps_frame: the PS neither answered nor closed the connection in 10 s\n");
      abort();
    }
    if (r < 0 && errno == EINTR) continue;
    ssize_t k = recv(fd, b, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* One reply frame: its header decoded (body up to cap kept); -1 on EOF or a bad frame. */
static int recv_frame(int fd, loom_ps_hdr *h, uint8_t *body, size_t cap) {
  uint8_t hb[LOOM_PS_HDR];
  char why[160];
  if (recv_exact(fd, hb, sizeof hb)) return -1;
  if (loom__ps_hdr_decode(hb, (uint32_t)cap, h, why, sizeof why)) return -1;
  if (h->body_len && recv_exact(fd, body, h->body_len)) return -1;
  return 0;
}

static int send_frame(int fd, uint16_t opcode, const void *body, uint32_t len) {
  uint8_t hb[LOOM_PS_HDR];
  static uint64_t rid;
  loom__ps_hdr_encode(hb, opcode, 0, ++rid, body, len, 0);
  if (send_all(fd, hb, sizeof hb)) return -1;
  return len ? send_all(fd, body, len) : 0;
}

/* HELLO, CHALLENGE, AUTH, WELCOME; returns the bytes of the input it used. */
static size_t handshake(int fd, int flags, const uint8_t *in, size_t n) {
  size_t used = 0;
  uint8_t hello[32 + LOOM_PS_NONCE];
  memset(hello, 0, sizeof hello);
  uint32_t hello_len = (flags & 64) ? 32 + LOOM_PS_NONCE : 24 + LOOM_PS_NONCE;
  loom__ps_put64(hello + 24 + LOOM_PS_NONCE, 0x10ADull);
  if ((flags & 8) && n >= 24) {
    memcpy(hello, in, 24);
    used = 24;
  } else {
    uint16_t v = LOOM_PS_VERSION;
    memcpy(hello, &v, 2);
    memcpy(hello + 2, &v, 2);
    loom__ps_put32(hello + 4, NUM_PS);
    loom__ps_put32(hello + 8, NUM_VARS);
    loom__ps_put64(hello + 16, PH);
  }
  for (int i = 0; i < LOOM_PS_NONCE; i++) hello[24 + i] = (uint8_t)(i * 7 + 1);
  if (send_frame(fd, LOOM_PS_HELLO, hello, hello_len)) return used;
  loom_ps_hdr h;
  uint8_t body[LOOM_PS_HANDSHAKE_MAX + 512];
  if (recv_frame(fd, &h, body, sizeof body) || h.opcode != LOOM_PS_CHALLENGE || h.status ||
      h.body_len != LOOM_PS_NONCE)
    return used;
  uint8_t mac[LOOM_PS_MAC];
  loom__ps_auth_mac(TOKEN, sizeof TOKEN - 1, hello + 24, body, loom__ps_get64(hello + 16), mac);
  if (flags & 16) mac[5] ^= 0x10;
  if (send_frame(fd, LOOM_PS_AUTH, mac, sizeof mac)) return used;
  recv_frame(fd, &h, body, sizeof body); /* WELCOME (or the refusal) */
  return used;
}

/* Sends the records of the framed mode. */
static void send_records(int fd, const uint8_t *p, size_t n) {
  static uint8_t out[LOOM_PS_HDR + 65536 + 8];
  uint64_t rid = 1000;
  while (n >= 4) {
    uint8_t op = p[0], tw = p[1];
    size_t len = (size_t)p[2] | (size_t)p[3] << 8;
    p += 4;
    n -= 4;
    if (len > n) len = n;
    uint16_t opcode = (uint16_t)(op | ((tw & 128) ? 256 : 0));
    memcpy(out + LOOM_PS_HDR, p, len);
    if (!(tw & 64)) rid++;
    loom__ps_hdr_encode(out, opcode, (tw & 1) ? LOOM_PS_FLAG_REPLY : 0, rid, out + LOOM_PS_HDR, (uint32_t)len,
                        (tw & 32) ? 3u : 0u);
    if (tw & 2) out[24] ^= 1;
    if (tw & 4) out[0] ^= 0x20;
    if (tw & 8) out[4] = 9;
    if (tw & 16) loom__ps_put32(out + 20, (uint32_t)len + 1);
    if (send_all(fd, out, LOOM_PS_HDR + len)) return;
    p += len;
    n -= len;
  }
  if (n) send_all(fd, p, n);
}

/* One PS per consistency mode, started on first use and started afresh
 * every RESTART_EVERY inputs and whenever it has stopped (SHUTDOWN). A PS
 * per input would keep each input's outcome its own, but costs a loop
 * thread and a bind per input, and an input that creates variable
 * 1,000,000 makes the PS allocate and clear its ~200 MB variable table
 * (the table is indexed by id): 130-370 inputs/s instead of thousands. */
#define RESTART_EVERY 256
static loom_ps_server *srv[4];
static int srv_uses[4];

static void servers_stop(void) {
  for (int i = 0; i < 4; i++) {
    loom_ps_server_stop(srv[i]);
    srv[i] = NULL;
  }
}

static loom_ps_server *server(int m) {
  /* replays (`make fuzz-replay`, fuzz.sh sets LOOM_FUZZ_REPLAY): a fresh PS per input, so that each
   * committed input's outcome is its own and `make test` does not depend on the corpus's order */
  static int every;
  if (!every) every = getenv("LOOM_FUZZ_REPLAY") ? 1 : RESTART_EVERY;
  if (srv[m] && srv_uses[m] < every && !loom_ps_server_wait(srv[m], 0)) {
    srv_uses[m]++;
    return srv[m];
  }
  loom_ps_server_stop(srv[m]);
  srv[m] = NULL;
  srv_uses[m] = 1;
  loom_ps_server_options o = loom_ps_server_options_default();
  o.token = TOKEN;
  o.token_len = sizeof TOKEN - 1;
  o.placement_hash = PH;
  o.num_ps = NUM_PS;
  o.num_vars = NUM_VARS;
  o.max_frame = 1u << 20;
  o.handshake_timeout_s = 5;
  o.model_dir = fz_dir("ps_frame");
  switch (m) {
  case 1:
    o.consistency = LOOM_PS_BOUNDED;
    o.staleness = 1;
    break;
  case 2:
    o.consistency = LOOM_PS_SYNC;
    o.replicas_to_aggregate = 2;
    o.sync_timeout_s = 0.02;
    break;
  case 3: o.model_dir = NULL; break;
  default: break;
  }
  loom_status *st = loom_status_new();
  srv[m] = loom_ps_server_start(&o, st);
  if (!srv[m]) {
    fprintf(stderr, "fuzz_ps_frame: the PS did not start: %s\n", loom_status_message(st));
    abort();
  }
  loom_status_free(st);
  return srv[m];
}

static int connect_to(loom_ps_server *s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)loom_ps_server_port(s));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_dir("ps_frame"); /* the model_dir; also silences loom's log */
  /* OpenSSL registers its own cleanup with atexit when first used: use it
   * here, before servers_stop is registered, so that servers_stop runs
   * first and the loop threads end while OpenSSL can still free their
   * per-thread state (else LeakSanitizer reports it at exit). */
  uint8_t b[1];
  if (loom__ps_random(b, 1) != LOOM_OK) abort();
  atexit(servers_stop); /* runs before fz_dir's cleanup (registered first) */
  /* The PS's loop thread takes the default stack size. Under ASan every
   * thread start and exit clears the shadow of its whole stack (1 MiB for 8
   * MiB), which was most of an input's time here: 1 MiB stacks instead
   * (the loop thread's deepest path, SAVE, needs far less). */
  pthread_attr_t at;
  if (pthread_attr_init(&at) == 0) {
    pthread_attr_setstacksize(&at, 1u << 20);
    pthread_setattr_default_np(&at);
    pthread_attr_destroy(&at);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int flags = data[0];
  const uint8_t *rest = data + 1;
  size_t n = size - 1;
  int m = flags & 3;
  loom_ps_server *s = server(m);
  int fd = connect_to(s);
  if (fd < 0) { /* it was stopping after a SHUTDOWN (that ends asynchronously): a new one */
    srv_uses[m] = RESTART_EVERY;
    s = server(m);
    fd = connect_to(s);
  }
  if (fd < 0) {
    perror("fuzz_ps_frame: connect");
    abort();
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (flags & 4) {
    size_t used = handshake(fd, flags, rest, n);
    rest += used;
    n -= used;
  }
  if (flags & 32)
    send_records(fd, rest, n);
  else if (n)
    send_all(fd, rest, n);
  shutdown(fd, SHUT_WR);
  static uint8_t sink[1 << 16];
  for (;;) { /* every reply, until the PS closes the connection */
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, 10000);
    if (r == 0) {
      fprintf(stderr, "fuzz_ps_frame: the PS did not close a half-closed connection in 10 s\n");
      abort();
    }
    if (r < 0 && errno == EINTR) continue;
    ssize_t k = recv(fd, sink, sizeof sink, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
  }
  close(fd);
  if (getenv("LOOM_FUZZ_VERBOSE")) { /* seeds should get far: say how far */
    loom_ps_server_stats ss;
    loom_ps_server_get_stats(s, &ss);
    fprintf(stderr, "fuzz: %lld frames, %lld rejected, %lld updates, %lld bytes out\n", (long long)ss.frames,
            (long long)ss.rejected, (long long)ss.updates, (long long)ss.bytes_out);
  }
  return 0;
}
