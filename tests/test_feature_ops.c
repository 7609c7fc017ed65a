/* Feature ops (loom_sparse.h) against TF 2.15: Fingerprint64,
 * StringToHashBucketFast (strings and integers), AsString, Bucketize, the
 * vocabulary lookup (lists and files, OOV buckets, defaults), CheckIds and
 * SparseCrossHashed. The fixtures under tests/fixtures/fc/ were written by
 * scripts/gen_fc_fixtures.py from TF's own ops; every value here is
 * compared bit for bit. The ops run through real sessions with fed
 * placeholders, so the host pass (string outputs, data-dependent shapes) is
 * exercised. Then malformed inputs: each must fail with its code and a
 * message naming what was wrong. */
#include "test_util.h"
#include "loom/loom_sparse.h"
#include "loom/loom_export.h"

/* ------------------------------------------------------------ fixtures */

static FILE *fx_open(const char *name) {
  char p[512];
  const char *dir = getenv("LOOM_FC_FIXTURES");
  snprintf(p, sizeof p, "%s/%s", dir ? dir : "tests/fixtures/fc", name);
  FILE *f = fopen(p, "r");
  cr_assert(f, "cannot open fixture %s (run the tests from the repository root)", p);
  return f;
}
static void fx_path(char *p, size_t cap, const char *name) {
  const char *dir = getenv("LOOM_FC_FIXTURES");
  snprintf(p, cap, "%s/%s", dir ? dir : "tests/fixtures/fc", name);
}

/* Reads one line into a growing buffer; NULL at the end. */
static char *fx_line(FILE *f) {
  static char *buf;
  static size_t cap;
  if (!buf) {
    cap = 1 << 16;
    buf = malloc(cap);
  }
  size_t n = 0;
  int c;
  while ((c = fgetc(f)) != EOF && c != '\n') {
    if (n + 2 > cap) buf = realloc(buf, cap *= 2);
    buf[n++] = (char)c;
  }
  if (c == EOF && n == 0) return NULL;
  buf[n] = 0;
  return buf;
}

/* "x<hex>" -> bytes (malloc'd, NUL-terminated), length in *len. */
static char *fx_hex(const char *tok, size_t *len) {
  cr_assert(tok && tok[0] == 'x', "bad hex token %s", tok ? tok : "(null)");
  size_t n = strlen(tok + 1) / 2;
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(tok + 1 + 2 * i, "%2x", &v);
    s[i] = (char)v;
  }
  s[n] = 0;
  *len = n;
  return s;
}

typedef struct strs {
  int64_t n, cap;
  char **s;
  size_t *len;
} strs;
static void strs_push(strs *a, char *s, size_t len) {
  if (a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 64;
    a->s = realloc(a->s, (size_t)a->cap * sizeof *a->s);
    a->len = realloc(a->len, (size_t)a->cap * sizeof *a->len);
  }
  a->s[a->n] = s;
  a->len[a->n++] = len;
}
static void strs_free(strs *a) {
  for (int64_t i = 0; i < a->n; i++) free(a->s[i]);
  free(a->s);
  free(a->len);
  memset(a, 0, sizeof *a);
}
static loom_tensor *strs_tensor(const strs *a, int64_t from, int64_t n) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  cr_assert(t);
  for (int64_t i = 0; i < n; i++) cr_assert(loom_tensor_set_string(t, i, a->s[from + i], a->len[from + i], NULL) == 0);
  return t;
}
static loom_tensor *i64_tensor(const int64_t *v, int64_t n) { return loom_tensor_from_data(LOOM_I64, 1, &n, v, NULL); }

/* One session run: feeds, fetches (outputs fetched into out[]); asserts OK. */
static void run_ok(loom_session *s, int nf, const loom_output *feeds, loom_tensor *const *vals, int nx,
                   const loom_output *fetches, loom_tensor **out) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, feeds, vals, nf, fetches, out, nx, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_status_free(st);
}
static loom_session *session_ok(loom_graph *g) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  loom_status_free(st);
  return s;
}
static const int64_t *i64s(const loom_tensor *t) {
  cr_assert(t && loom_tensor_dtype(t) == LOOM_I64, "want an int64 tensor, got %s",
            t ? loom_dtype_name(loom_tensor_dtype(t)) : "none");
  return loom_tensor_data_const(t);
}

/* ------------------------------------------------------------ hashing */

Test(feature_ops, fingerprint64_and_hash_buckets_match_tf) {
  FILE *f = fx_open("hash.txt");
  long long n, nb[3];
  cr_assert(sscanf(fx_line(f), "%lld %lld %lld %lld", &n, &nb[0], &nb[1], &nb[2]) == 4);
  strs a = {0};
  uint64_t *fp = malloc((size_t)n * sizeof *fp);
  int64_t *want[3];
  for (int j = 0; j < 3; j++) want[j] = malloc((size_t)n * sizeof(int64_t));
  int lens_seen[4] = {0};
  for (long long i = 0; i < n; i++) {
    char *line = fx_line(f), tok[4096];
    cr_assert(line);
    unsigned long long h;
    long long b0, b1, b2;
    cr_assert(sscanf(line, "%4095s %llu %lld %lld %lld", tok, &h, &b0, &b1, &b2) == 5, "line %lld", i + 2);
    size_t len;
    char *s = fx_hex(tok, &len);
    strs_push(&a, s, len);
    fp[i] = h;
    want[0][i] = b0, want[1][i] = b1, want[2][i] = b2;
    lens_seen[len == 0 ? 0 : len <= 32 ? 1 : len <= 64 ? 2 : 3]++;
    cr_assert_eq(loom_fingerprint64(s, len), (uint64_t)h, "Fingerprint64 of %zu bytes %s: got %llu want %llu", len,
                 tok, (unsigned long long)loom_fingerprint64(s, len), h);
  }
  fclose(f);
  cr_assert(n >= 5000 && lens_seen[0] && lens_seen[1] > 100 && lens_seen[2] > 100 && lens_seen[3] > 100);
  /* the same strings through a session */
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "s");
  loom_output y[3];
  for (int j = 0; j < 3; j++) y[j] = loom_string_to_hash_bucket_fast(g, x, nb[j], NULL);
  loom_session *s = session_ok(g);
  loom_tensor *xv = strs_tensor(&a, 0, a.n), *out[3] = {NULL, NULL, NULL};
  run_ok(s, 1, &x, &xv, 3, y, out);
  for (int j = 0; j < 3; j++) {
    const int64_t *o = i64s(out[j]);
    cr_assert_eq(loom_tensor_numel(out[j]), n);
    for (long long i = 0; i < n; i++)
      cr_assert_eq(o[i], want[j][i], "string %lld, %lld buckets: got %lld want %lld", i, nb[j], (long long)o[i],
                   (long long)want[j][i]);
    loom_tensor_free(out[j]);
    free(want[j]);
  }
  loom_tensor_free(xv);
  loom_session_free(s);
  loom_graph_free(g);
  strs_free(&a);
  free(fp);
}

Test(feature_ops, fingerprint_cat64_hand_values) {
  /* FingerprintCat64 from its definition (kMul = 0xc6a4a7935bd1e995):
   * r = a ^ kMul; r ^= ShiftMix(b * kMul) * kMul; r *= kMul; r = ShiftMix(ShiftMix(r) * kMul) */
  const uint64_t K = 0xc6a4a7935bd1e995ull;
  uint64_t pairs[4][2] = {{0, 0}, {1, 2}, {LOOM_CROSS_HASH_KEY, 12345}, {~0ull, ~0ull}};
  for (int i = 0; i < 4; i++) {
    uint64_t a = pairs[i][0], b = pairs[i][1], t = b * K, r = a ^ K;
    r ^= (t ^ (t >> 47)) * K;
    r *= K;
    r = (r ^ (r >> 47)) * K;
    r ^= r >> 47;
    cr_assert_eq(loom_fingerprint_cat64(a, b), r, "pair %d", i);
  }
  cr_assert_neq(loom_fingerprint_cat64(1, 2), loom_fingerprint_cat64(2, 1));
  /* n = 0 with a NULL pointer is the empty string's fingerprint */
  cr_assert_eq(loom_fingerprint64(NULL, 0), loom_fingerprint64("", 0));
}

Test(feature_ops, int_hashing_and_as_string_match_tf) {
  FILE *f = fx_open("int_hash.txt");
  long long n, nb[3];
  cr_assert(sscanf(fx_line(f), "%lld %lld %lld %lld", &n, &nb[0], &nb[1], &nb[2]) == 4);
  int64_t *v = malloc((size_t)n * sizeof *v), *want[3];
  char **txt = malloc((size_t)n * sizeof *txt);
  for (int j = 0; j < 3; j++) want[j] = malloc((size_t)n * sizeof(int64_t));
  int extremes = 0;
  for (long long i = 0; i < n; i++) {
    char t[64];
    long long x, b0, b1, b2;
    cr_assert(sscanf(fx_line(f), "%lld %63s %lld %lld %lld", &x, t, &b0, &b1, &b2) == 5);
    v[i] = x;
    txt[i] = strdup(t);
    want[0][i] = b0, want[1][i] = b1, want[2][i] = b2;
    extremes += x == INT64_MIN || x == INT64_MAX;
  }
  fclose(f);
  cr_assert(n >= 5000 && extremes == 2);
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_I64, 1, &d, "x");
  loom_output fetch[5];
  for (int j = 0; j < 3; j++) fetch[j] = loom_string_to_hash_bucket_fast(g, x, nb[j], NULL);
  fetch[3] = loom_as_string(g, x, "text");
  /* a host-pass string output consumed by an ordinary op */
  fetch[4] = loom_string_to_hash_bucket_fast(g, fetch[3], nb[2], NULL);
  loom_session *s = session_ok(g);
  loom_tensor *xv = i64_tensor(v, n), *out[5] = {0};
  for (int rep = 0; rep < 2; rep++) { /* twice: the second run reuses the plan and the arena */
    run_ok(s, 1, &x, &xv, 5, fetch, out);
    for (int j = 0; j < 3; j++) {
      const int64_t *o = i64s(out[j]);
      for (long long i = 0; i < n; i++)
        cr_assert_eq(o[i], want[j][i], "value %lld (%lld buckets): got %lld want %lld", (long long)v[i], nb[j],
                     (long long)o[i], (long long)want[j][i]);
    }
    cr_assert_eq(loom_tensor_dtype(out[3]), LOOM_STRING);
    for (long long i = 0; i < n; i++) {
      size_t len;
      const char *p = loom_tensor_get_string(out[3], i, &len);
      cr_assert(len == strlen(txt[i]) && !memcmp(p, txt[i], len), "as_string(%lld) = %.*s, TF gives %s",
                (long long)v[i], (int)len, p, txt[i]);
      cr_assert_eq(i64s(out[4])[i], want[2][i]);
    }
  }
  for (int j = 0; j < 5; j++) loom_tensor_free(out[j]);
  loom_tensor_free(xv);
  loom_session_free(s);
  loom_graph_free(g);
  /* int32 inputs hash like the same int64 values */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_I32, 1, &d, "x32");
  loom_output y = loom_string_to_hash_bucket_fast(g, x, nb[2], NULL);
  int32_t *v32 = malloc((size_t)n * sizeof *v32);
  int64_t *w32 = malloc((size_t)n * sizeof *w32);
  int64_t m = 0;
  for (long long i = 0; i < n; i++)
    if (v[i] >= INT32_MIN && v[i] <= INT32_MAX) {
      v32[m] = (int32_t)v[i];
      w32[m++] = want[2][i];
    }
  cr_assert(m > 1000);
  loom_tensor *x32 = loom_tensor_from_data(LOOM_I32, 1, &m, v32, NULL);
  loom_tensor *o32 = tu_run1(g, 1, &x, &x32, y);
  for (int64_t i = 0; i < m; i++) cr_assert_eq(i64s(o32)[i], w32[i], "int32 %d", v32[i]);
  loom_tensor_free(x32);
  loom_tensor_free(o32);
  loom_graph_free(g);
  free(v32);
  free(w32);
  for (long long i = 0; i < n; i++) free(txt[i]);
  free(txt);
  free(v);
  for (int j = 0; j < 3; j++) free(want[j]);
}

/* ------------------------------------------------------------ bucketize */

static loom_dtype dt_of(const char *s) {
  if (!strcmp(s, "float32")) return LOOM_F32;
  if (!strcmp(s, "float64")) return LOOM_F64;
  if (!strcmp(s, "int32")) return LOOM_I32;
  if (!strcmp(s, "int64")) return LOOM_I64;
  cr_assert_fail("unknown dtype %s", s);
  return LOOM_DTYPE_INVALID;
}

Test(feature_ops, bucketize_matches_tf) {
  FILE *f = fx_open("bucketize.txt");
  char *line;
  int blocks = 0;
  long long per_dtype[LOOM_DTYPE_COUNT] = {0};
  while ((line = fx_line(f))) {
    char dts[16];
    int nb, off;
    cr_assert(sscanf(line, "B %15s %d%n", dts, &nb, &off) == 2, "bad block header %s", line);
    loom_dtype dt = dt_of(dts);
    float *b = malloc((size_t)(nb ? nb : 1) * sizeof *b);
    char *p = line + off;
    for (int j = 0; j < nb; j++) {
      unsigned bits;
      int k;
      cr_assert(sscanf(p, " %x%n", &bits, &k) == 1);
      p += k;
      memcpy(&b[j], &bits, 4);
    }
    long long n;
    cr_assert(sscanf(fx_line(f), "N %lld", &n) == 1);
    void *x = malloc((size_t)n * 8);
    int32_t *want = malloc((size_t)n * sizeof *want);
    for (long long i = 0; i < n; i++) {
      char tok[64];
      int w;
      cr_assert(sscanf(fx_line(f), "%63s %d", tok, &w) == 2);
      want[i] = w;
      if (dt == LOOM_F32) {
        uint32_t u = (uint32_t)strtoul(tok, NULL, 16);
        memcpy((float *)x + i, &u, 4);
      } else if (dt == LOOM_F64) {
        uint64_t u = strtoull(tok, NULL, 16);
        memcpy((double *)x + i, &u, 8);
      } else if (dt == LOOM_I32) {
        ((int32_t *)x)[i] = (int32_t)strtoll(tok, NULL, 10);
      } else {
        ((int64_t *)x)[i] = strtoll(tok, NULL, 10);
      }
    }
    loom_graph *g = loom_graph_new();
    int64_t d = -1, dn = n;
    loom_output xp = loom_placeholder(g, dt, 1, &d, "x");
    loom_output y = loom_bucketize(g, xp, nb, b, "bucketize");
    loom_tensor *xv = loom_tensor_from_data(dt, 1, &dn, x, NULL);
    loom_tensor *o = tu_run1(g, 1, &xp, &xv, y);
    cr_assert_eq(loom_tensor_dtype(o), LOOM_I32);
    const int32_t *ov = loom_tensor_data_const(o);
    for (long long i = 0; i < n; i++)
      cr_assert_eq(ov[i], want[i], "block %d (%s, %d boundaries) element %lld: got %d want %d", blocks, dts, nb, i,
                   ov[i], want[i]);
    per_dtype[dt] += n;
    loom_tensor_free(xv);
    loom_tensor_free(o);
    loom_graph_free(g);
    free(x);
    free(want);
    free(b);
    blocks++;
  }
  fclose(f);
  cr_assert(blocks >= 20);
  cr_assert(per_dtype[LOOM_F32] >= 5000 && per_dtype[LOOM_F64] >= 5000 && per_dtype[LOOM_I32] >= 5000 &&
            per_dtype[LOOM_I64] >= 5000);
}

/* ------------------------------------------------------------ vocabulary */

/* Keys of 1..3 bytes (category codes) take their own first-slot path in
 * the kernel: a vocabulary of many short keys (probe chains, keys that share
 * bytes and differ in length), every key and misses of each length, against
 * a linear search; with OOV buckets a miss lands in [n, n + oov). */
Test(feature_ops, vocabulary_lookup_short_keys) {
  enum { NK = 300 };
  static char kbuf[NK][4];
  const char *keys[NK];
  int nk = 0;
  for (int i = 0; i < 26 && nk < NK; i++) snprintf(kbuf[nk], 4, "%c", 'A' + i), keys[nk] = kbuf[nk], nk++;
  for (int i = 0; i < 150 && nk < NK; i++)
    snprintf(kbuf[nk], 4, "%c%c", 'A' + i % 26, 'a' + i / 26), keys[nk] = kbuf[nk], nk++;
  for (int i = 0; nk < NK - 2; i++)
    snprintf(kbuf[nk], 4, "%c%d", 'A' + i % 26, i / 26), keys[nk] = kbuf[nk], nk++;
  keys[nk++] = "SI2"; /* ... and a 4-byte key next to 3-byte ones */
  keys[nk++] = "SI2x";
  char qbuf[2 * NK + 8][8];
  const char *qs[2 * NK + 8];
  int nq = 0;
  for (int i = 0; i < nk; i++) qs[nq++] = keys[i];
  static const char *miss[] = {"a", "zz", "Zz", "SI1", "SI", "S", "Ab", "~~~", "A99"};
  for (int i = 0; i < 9; i++) snprintf(qbuf[i], 8, "%s", miss[i]), qs[nq++] = qbuf[i];
  for (int oov = 0; oov <= 5; oov += 5) {
    loom_graph *g = loom_graph_new();
    int64_t d = -1;
    loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
    loom_output y = loom_vocab_lookup_strings(g, x, nk, keys, oov, -1, "lookup");
    loom_tensor *xv = loom_tensor_new(LOOM_STRING, 1, (int64_t[]){nq}, NULL);
    for (int i = 0; i < nq; i++) loom_tensor_set_string(xv, i, qs[i], strlen(qs[i]), NULL);
    loom_tensor *o = tu_run1(g, 1, &x, &xv, y);
    for (int i = 0; i < nq; i++) {
      int64_t want = -1;
      for (int k = 0; k < nk; k++)
        if (!strcmp(keys[k], qs[i])) want = k;
      int64_t got = i64s(o)[i];
      if (want >= 0 || !oov) cr_assert_eq(got, want, "oov %d: '%s' got %lld want %lld", oov, qs[i], (long long)got, (long long)want);
      else cr_assert(got >= nk && got < nk + oov, "oov %d: miss '%s' got %lld", oov, qs[i], (long long)got);
    }
    loom_tensor_free(o);
    loom_tensor_free(xv);
    loom_graph_free(g);
  }
}

Test(feature_ops, vocabulary_lookup_matches_tf) {
  FILE *f = fx_open("vocab.txt");
  char *line;
  int configs = 0;
  long long queries = 0;
  while ((line = fx_line(f))) {
    char kind[8], src[8];
    long long oov, dflt, vsize;
    cr_assert(sscanf(line, "V %7s %7s %lld %lld %lld", kind, src, &oov, &dflt, &vsize) == 5, "bad header %s", line);
    int is_str = !strcmp(kind, "str");
    strs keys = {0};
    int64_t *ikeys = NULL, nk = 0;
    loom_vocab v = {0};
    if (!strcmp(src, "list")) {
      long long n;
      cr_assert(sscanf(fx_line(f), "K %lld", &n) == 1);
      ikeys = malloc((size_t)(n ? n : 1) * sizeof *ikeys);
      for (long long i = 0; i < n; i++) {
        char *t = fx_line(f);
        if (is_str) {
          size_t len;
          char *hs_ = fx_hex(t, &len);
            strs_push(&keys, hs_, len);
        } else {
          ikeys[i] = strtoll(t, NULL, 10);
        }
      }
      nk = n;
    } else {
      char p[512];
      fx_path(p, sizeof p, is_str ? "vocab_str.txt" : "vocab_int.txt");
      loom_status *st = loom_status_new();
      cr_assert(loom_vocab_read_file(p, vsize, !is_str, &v, st) == LOOM_OK, "%s", loom_status_message(st));
      loom_status_free(st);
      if (vsize > 0) cr_assert_eq(v.n, vsize);
    }
    long long nq;
    cr_assert(sscanf(fx_line(f), "Q %lld", &nq) == 1);
    strs qs = {0};
    int64_t *qi = malloc((size_t)nq * sizeof *qi), *want = malloc((size_t)nq * sizeof *want);
    for (long long i = 0; i < nq; i++) {
      char tok[512];
      long long w;
      cr_assert(sscanf(fx_line(f), "%511s %lld", tok, &w) == 2);
      want[i] = w;
      if (is_str) {
        size_t len;
        char *hs_ = fx_hex(tok, &len);
            strs_push(&qs, hs_, len);
      } else {
        qi[i] = strtoll(tok, NULL, 10);
      }
    }
    loom_graph *g = loom_graph_new();
    int64_t d = -1;
    loom_output x = loom_placeholder(g, is_str ? LOOM_STRING : LOOM_I64, 1, &d, "x");
    loom_output y;
    if (is_str)
      y = loom_vocab_lookup_strings(g, x, v.keys ? v.n : nk, v.keys ? (const char *const *)v.keys : (const char *const *)keys.s,
                                    oov, dflt, "lookup");
    else
      y = loom_vocab_lookup_int64(g, x, v.ikeys ? v.n : nk, v.ikeys ? v.ikeys : ikeys, oov, dflt, "lookup");
    loom_tensor *xv = is_str ? strs_tensor(&qs, 0, nq) : i64_tensor(qi, nq);
    loom_tensor *o = tu_run1(g, 1, &x, &xv, y);
    for (long long i = 0; i < nq; i++)
      cr_assert_eq(i64s(o)[i], want[i], "config %d (%s %s oov %lld default %lld) query %lld: got %lld want %lld",
                   configs, kind, src, oov, dflt, i, (long long)i64s(o)[i], (long long)want[i]);
    /* the table is part of the graph: a serialized and reloaded graph gives the same ids */
    void *bytes = NULL;
    size_t nbytes = 0;
    loom_node *root = y.node;
    loom_status *st = loom_status_new();
    cr_assert(loom_graph_serialize(g, 1, &root, &bytes, &nbytes, st) == LOOM_OK, "%s", loom_status_message(st));
    loom_graph *g2 = loom_graph_new();
    cr_assert(loom_graph_deserialize(g2, bytes, nbytes, st) == LOOM_OK, "%s", loom_status_message(st));
    loom_output x2 = loom_graph_find_output(g2, "x"), y2 = loom_graph_find_output(g2, "lookup");
    cr_assert(x2.node && y2.node);
    loom_tensor *o2 = tu_run1(g2, 1, &x2, &xv, y2);
    cr_assert(!memcmp(i64s(o2), i64s(o), (size_t)nq * 8), "reloaded graph gives other ids");
    loom_tensor_free(o2);
    loom_graph_free(g2);
    loom_buffer_free(bytes);
    loom_status_free(st);
    /* int32 queries against an int64 vocabulary */
    if (!is_str) {
      loom_graph *g3 = loom_graph_new();
      loom_output x3 = loom_placeholder(g3, LOOM_I32, 1, &d, "x");
      loom_output y3 = loom_vocab_lookup_int64(g3, x3, v.ikeys ? v.n : nk, v.ikeys ? v.ikeys : ikeys, oov, dflt, NULL);
      int32_t *q32 = malloc((size_t)nq * sizeof *q32);
      int64_t *w32 = malloc((size_t)nq * sizeof *w32), m = 0;
      for (long long i = 0; i < nq; i++)
        if (qi[i] >= INT32_MIN && qi[i] <= INT32_MAX) q32[m] = (int32_t)qi[i], w32[m++] = want[i];
      if (m) {
        loom_tensor *x32 = loom_tensor_from_data(LOOM_I32, 1, &m, q32, NULL);
        loom_tensor *o3 = tu_run1(g3, 1, &x3, &x32, y3);
        for (int64_t i = 0; i < m; i++) cr_assert_eq(i64s(o3)[i], w32[i], "int32 query %d", q32[i]);
        loom_tensor_free(o3);
        loom_tensor_free(x32);
      }
      free(q32);
      free(w32);
      loom_graph_free(g3);
    }
    queries += nq;
    loom_tensor_free(xv);
    loom_tensor_free(o);
    loom_graph_free(g);
    strs_free(&keys);
    strs_free(&qs);
    free(ikeys);
    free(qi);
    free(want);
    loom_vocab_free(&v);
    configs++;
  }
  fclose(f);
  cr_assert(configs >= 9 && queries >= 5000, "%d configs, %lld queries", configs, queries);
}

/* ------------------------------------------------------------ crosses */

Test(feature_ops, sparse_cross_hashed_matches_tf) {
  FILE *f = fx_open("cross.txt");
  char *line;
  int configs = 0;
  long long produced = 0;
  while ((line = fx_line(f))) {
    int k, off;
    long long nb;
    unsigned long long key;
    cr_assert(sscanf(line, "C %d %lld %llu%n", &k, &nb, &key, &off) == 3, "bad header %s", line);
    int is_str[3];
    char *p = line + off;
    for (int j = 0; j < k; j++) {
      char kind[8];
      int m;
      cr_assert(sscanf(p, " %7s%n", kind, &m) == 1);
      p += m;
      is_str[j] = !strcmp(kind, "str");
    }
    long long rows;
    cr_assert(sscanf(fx_line(f), "R %lld", &rows) == 1);
    strs sv[3] = {{0}};
    int64_t *iv[3], ni[3] = {0}, *splits[3], *wsplits = malloc((size_t)(rows + 1) * 8), *want = NULL, nw = 0, cw = 0;
    for (int j = 0; j < k; j++) {
      iv[j] = malloc(8 * 4096);
      splits[j] = malloc((size_t)(rows + 1) * 8);
      splits[j][0] = 0;
    }
    wsplits[0] = 0;
    for (long long r = 0; r < rows; r++) {
      for (int j = 0; j < k; j++) {
        char *t = fx_line(f), *save = NULL;
        int n = atoi(strtok_r(t, " ", &save));
        for (int i = 0; i < n; i++) {
          char *tok = strtok_r(NULL, " ", &save);
          if (is_str[j]) {
            size_t len;
            char *hs_ = fx_hex(tok, &len);
            strs_push(&sv[j], hs_, len);
          } else {
            cr_assert(ni[j] < 4096);
            iv[j][ni[j]++] = strtoll(tok, NULL, 10);
          }
        }
        splits[j][r + 1] = splits[j][r] + n;
      }
      char *t = fx_line(f), *save = NULL;
      int n = atoi(strtok_r(t, " ", &save));
      for (int i = 0; i < n; i++) {
        if (nw == cw) want = realloc(want, (size_t)(cw = cw ? 2 * cw : 1024) * 8);
        want[nw++] = strtoll(strtok_r(NULL, " ", &save), NULL, 10);
      }
      wsplits[r + 1] = nw;
    }
    loom_graph *g = loom_graph_new();
    int64_t d = -1;
    loom_sparse in[3];
    loom_output feeds[6];
    loom_tensor *vals[6];
    for (int j = 0; j < k; j++) {
      char nm[32];
      snprintf(nm, sizeof nm, "v%d", j);
      in[j].values = feeds[2 * j] = loom_placeholder(g, is_str[j] ? LOOM_STRING : LOOM_I64, 1, &d, nm);
      snprintf(nm, sizeof nm, "s%d", j);
      in[j].row_splits = feeds[2 * j + 1] = loom_placeholder(g, LOOM_I64, 1, &d, nm);
      vals[2 * j] = is_str[j] ? strs_tensor(&sv[j], 0, sv[j].n) : i64_tensor(iv[j], ni[j]);
      vals[2 * j + 1] = i64_tensor(splits[j], rows + 1);
    }
    loom_sparse y = loom_sparse_cross_hashed(g, k, in, nb, key, "cross");
    loom_session *s = session_ok(g);
    loom_output fetch[2] = {y.values, y.row_splits};
    loom_tensor *out[2] = {0};
    run_ok(s, 2 * k, feeds, vals, 2, fetch, out);
    cr_assert_eq(loom_tensor_numel(out[0]), nw, "config %d: %lld crossed values, TF has %lld", configs,
                 (long long)loom_tensor_numel(out[0]), (long long)nw);
    cr_assert_eq(loom_tensor_numel(out[1]), rows + 1);
    for (long long r = 0; r <= rows; r++) cr_assert_eq(i64s(out[1])[r], wsplits[r], "config %d row_splits[%lld]", configs, r);
    for (int64_t i = 0; i < nw; i++)
      cr_assert_eq(i64s(out[0])[i], want[i], "config %d value %lld: got %lld want %lld", configs, (long long)i,
                   (long long)i64s(out[0])[i], (long long)want[i]);
    produced += nw;
    /* a second run with only the first 10 rows: the data-dependent shapes change */
    loom_tensor *v2[6];
    for (int j = 0; j < k; j++) {
      int64_t nv = splits[j][10];
      v2[2 * j] = is_str[j] ? strs_tensor(&sv[j], 0, nv) : i64_tensor(iv[j], nv);
      v2[2 * j + 1] = i64_tensor(splits[j], 11);
    }
    run_ok(s, 2 * k, feeds, v2, 2, fetch, out);
    cr_assert_eq(loom_tensor_numel(out[0]), wsplits[10]);
    cr_assert(!memcmp(i64s(out[0]), want, (size_t)wsplits[10] * 8));
    for (int j = 0; j < 2 * k; j++) loom_tensor_free(v2[j]);
    for (int j = 0; j < 2 * k; j++) loom_tensor_free(vals[j]);
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
    loom_session_free(s);
    loom_graph_free(g);
    for (int j = 0; j < k; j++) {
      strs_free(&sv[j]);
      free(iv[j]);
      free(splits[j]);
    }
    free(wsplits);
    free(want);
    configs++;
  }
  fclose(f);
  cr_assert(configs == 5 && produced >= 3000, "%d configs, %lld values", configs, produced);
}

Test(feature_ops, cross_order_last_input_fastest_and_int32) {
  /* one row: a = {1, 2}, b = {10, 20, 30} (int32) -> 6 ids, b varying fastest */
  loom_graph *g = loom_graph_new();
  int64_t va[2] = {1, 2}, sa[2] = {0, 2}, sb[2] = {0, 3}, d2 = 2, d3 = 3;
  int32_t vb[3] = {10, 20, 30};
  loom_sparse in[2];
  in[0].values = loom_const_data(g, LOOM_I64, 1, &d2, va, "a");
  in[0].row_splits = loom_const_data(g, LOOM_I64, 1, &d2, sa, "sa");
  in[1].values = loom_const_data(g, LOOM_I32, 1, &d3, vb, "b");
  in[1].row_splits = loom_const_data(g, LOOM_I64, 1, &d2, sb, "sb");
  const int64_t nb = 1000003;
  loom_sparse y = loom_sparse_cross_hashed(g, 2, in, nb, LOOM_CROSS_HASH_KEY, "cross");
  loom_tensor *o = tu_run1(g, 0, NULL, NULL, y.values);
  cr_assert_eq(loom_tensor_numel(o), 6);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      uint64_t h = loom_fingerprint_cat64(loom_fingerprint_cat64(LOOM_CROSS_HASH_KEY, (uint64_t)va[i]), (uint64_t)vb[j]);
      cr_assert_eq(i64s(o)[i * 3 + j], (int64_t)(h % (uint64_t)nb), "combination (%d, %d)", i, j);
    }
  loom_tensor_free(o);
  loom_graph_free(g);
}

/* ------------------------------------------------------------ check ids */

Test(feature_ops, check_ids_values_and_default) {
  loom_graph *g = loom_graph_new();
  int64_t d = -1, n = 6;
  int32_t ids[6] = {0, 3, 4, -1, 2, 100};
  loom_output x = loom_placeholder(g, LOOM_I32, 1, &d, "ids");
  loom_output y = loom_check_ids(g, x, 4, 1, 0, "identity");
  loom_tensor *xv = loom_tensor_from_data(LOOM_I32, 1, &n, ids, NULL);
  loom_tensor *o = tu_run1(g, 1, &x, &xv, y);
  const int64_t want[6] = {0, 3, 0, 0, 2, 0};
  cr_assert(!memcmp(i64s(o), want, sizeof want));
  loom_tensor_free(o);
  /* without a default, id 4 fails the run naming the node and the id */
  loom_output z = loom_check_ids(g, x, 4, 0, 0, "my_column");
  char msg[512];
  cr_assert_eq(tu_run_err(g, 1, &x, &xv, z, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "my_column") && strstr(msg, "id 4 ") && strstr(msg, "[0, 4)"), "message: %s", msg);
  loom_tensor_free(xv);
  loom_graph_free(g);
  /* a default outside [0, num_buckets) is a build error */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_I64, 1, &d, "ids");
  loom_check_ids(g, x, 4, 1, 4, "bad_default");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "bad_default") && strstr(loom_status_message(st), "default_value 4"),
            "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}

/* ------------------------------------------------------------ malformed input */

static void expect_graph_error(loom_graph *g, loom_code code, const char *a, const char *b) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), code, "code %s: %s", loom_code_name(loom_graph_status(g, st)),
               loom_status_message(st));
  const char *m = loom_status_message(st);
  cr_assert(strstr(m, a) && (!b || strstr(m, b)), "message \"%s\" should name \"%s\" and \"%s\"", m, a, b ? b : "");
  loom_status_free(st);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

Test(feature_ops, vocab_file_errors_name_file_and_line) {
  char dir[TU_TMPDIR_CAP], p[256];
  tu_tmpdir(dir, sizeof dir, "fcvocab");
  loom_vocab v;
  loom_status *st = loom_status_new();
  /* missing file */
  snprintf(p, sizeof p, "%s/missing.txt", dir);
  cr_assert_eq(loom_vocab_read_file(p, 0, 0, &v, st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), p), "%s", loom_status_message(st));
  cr_assert(v.n == 0 && !v.keys && !v.ikeys);
  /* a line that is not an int64 */
  snprintf(p, sizeof p, "%s/ints.txt", dir);
  write_file(p, "1\n-2\n3x\n4\n");
  cr_assert_eq(loom_vocab_read_file(p, 0, 1, &v, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), p) && strstr(loom_status_message(st), "line 3") &&
                strstr(loom_status_message(st), "3x"),
            "%s", loom_status_message(st));
  /* ... but vocab_size 2 stops before it */
  cr_assert_eq(loom_vocab_read_file(p, 2, 1, &v, st), LOOM_OK);
  cr_assert(v.n == 2 && v.ikeys[0] == 1 && v.ikeys[1] == -2);
  loom_vocab_free(&v);
  /* int64 overflow */
  write_file(p, "9223372036854775807\n9223372036854775808\n");
  cr_assert_eq(loom_vocab_read_file(p, 0, 1, &v, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "line 2"), "%s", loom_status_message(st));
  /* vocab_size larger than the file */
  snprintf(p, sizeof p, "%s/words.txt", dir);
  write_file(p, "a\nb\nc");
  cr_assert_eq(loom_vocab_read_file(p, 4, 0, &v, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), p) && strstr(loom_status_message(st), "3 lines"), "%s",
            loom_status_message(st));
  /* the last line without "\n" and "\r\n" endings */
  write_file(p, "a\r\nbb\r\nc");
  cr_assert_eq(loom_vocab_read_file(p, 0, 0, &v, st), LOOM_OK);
  cr_assert(v.n == 3 && !strcmp(v.keys[0], "a") && !strcmp(v.keys[1], "bb") && !strcmp(v.keys[2], "c"));
  loom_vocab_free(&v);
  /* an empty line (TF: "empty line found") */
  write_file(p, "a\n\nb\n");
  cr_assert_eq(loom_vocab_read_file(p, 0, 0, &v, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), p) && strstr(loom_status_message(st), "line 2"), "%s",
            loom_status_message(st));
  /* duplicate key in a file: the lookup builder names it */
  write_file(p, "apple\npear\napple\n");
  cr_assert_eq(loom_vocab_read_file(p, 0, 0, &v, st), LOOM_OK);
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_vocab_lookup_strings(g, x, v.n, (const char *const *)v.keys, 0, -1, "fruit_lookup");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "fruit_lookup", "duplicate key \"apple\"");
  loom_graph_free(g);
  loom_vocab_free(&v);
  loom_status_free(st);
  tu_rmtree(dir);
}

Test(feature_ops, build_errors_name_the_node) {
  int64_t d = -1;
  /* duplicate int64 key */
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_I64, 1, &d, "x");
  const int64_t keys[4] = {5, -7, 9, -7};
  loom_vocab_lookup_int64(g, x, 4, keys, 2, -1, "ints");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "ints", "duplicate key -7");
  loom_graph_free(g);
  /* unsorted boundaries */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 1, &d, "x");
  const float b[3] = {0.0f, 2.0f, 1.0f};
  loom_bucketize(g, x, 3, b, "age_buckets");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "age_buckets", "boundaries[2]");
  loom_graph_free(g);
  /* dtype mismatch: int64 keys against a string vocabulary, strings into Bucketize, floats into AsString */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_I64, 1, &d, "x");
  const char *words[2] = {"a", "b"};
  loom_vocab_lookup_strings(g, x, 2, words, 0, -1, "words");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "words", "int64");
  loom_graph_free(g);
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_bucketize(g, x, 3, (const float[]){0, 1, 2}, "bk");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "bk", "string");
  loom_graph_free(g);
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 1, &d, "x");
  loom_as_string(g, x, "txt");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "txt", "float32");
  loom_graph_free(g);
  /* num_buckets 0 */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_string_to_hash_bucket_fast(g, x, 0, "hb");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "hb", "num_buckets");
  loom_graph_free(g);
  /* crosses: a float input, rows that differ */
  g = loom_graph_new();
  loom_sparse in[2];
  in[0].values = loom_placeholder(g, LOOM_F32, 1, &d, "v0");
  in[0].row_splits = loom_placeholder(g, LOOM_I64, 1, &d, "s0");
  in[1] = in[0];
  loom_sparse_cross_hashed(g, 2, in, 10, LOOM_CROSS_HASH_KEY, "crossf");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "crossf", "float32");
  loom_graph_free(g);
}

Test(feature_ops, run_errors_name_the_node) {
  /* cross inputs with different row counts / broken row_splits, fed */
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_sparse in[2];
  loom_output feeds[4];
  for (int j = 0; j < 2; j++) {
    in[j].values = feeds[2 * j] = loom_placeholder(g, LOOM_I64, 1, &d, j ? "v1" : "v0");
    in[j].row_splits = feeds[2 * j + 1] = loom_placeholder(g, LOOM_I64, 1, &d, j ? "s1" : "s0");
  }
  loom_sparse y = loom_sparse_cross_hashed(g, 2, in, 10, LOOM_CROSS_HASH_KEY, "user_x_item");
  int64_t v[3] = {1, 2, 3}, s3[3] = {0, 1, 3}, s2[2] = {0, 3}, bad[3] = {0, 4, 3};
  loom_tensor *vals[4] = {i64_tensor(v, 3), i64_tensor(s3, 3), i64_tensor(v, 3), i64_tensor(s2, 2)};
  char msg[512];
  loom_status *st = loom_status_new();
  loom_session *s = session_ok(g);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, feeds, vals, 4, &y.values, &out, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  cr_assert(strstr(msg, "user_x_item") && strstr(msg, "rows"), "%s", msg);
  loom_tensor_free(vals[3]);
  vals[3] = i64_tensor(bad, 3);
  cr_assert_eq(loom_session_run(s, feeds, vals, 4, &y.values, &out, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "user_x_item") && strstr(loom_status_message(st), "decrease"), "%s",
            loom_status_message(st));
  /* the session still works after the errors */
  loom_tensor_free(vals[3]);
  vals[3] = i64_tensor(s3, 3);
  cr_assert_eq(loom_session_run(s, feeds, vals, 4, &y.values, &out, 1, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert_eq(loom_tensor_numel(out), 1 * 1 + 2 * 2);
  loom_tensor_free(out);
  for (int j = 0; j < 4; j++) loom_tensor_free(vals[j]);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(feature_ops, vocab_edge_semantics) {
  /* empty vocabulary: every id is an OOV bucket or the default; empty string key */
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_output a = loom_vocab_lookup_strings(g, x, 0, NULL, 3, -1, "empty_oov");
  loom_output b = loom_vocab_lookup_strings(g, x, 0, NULL, 0, -9, "empty_default");
  const char *words[3] = {"", "b", "c"};
  loom_output c = loom_vocab_lookup_strings(g, x, 3, words, 0, -1, "with_empty");
  strs q = {0};
  strs_push(&q, strdup(""), 0);
  strs_push(&q, strdup("b"), 1);
  strs_push(&q, strdup("zz"), 2);
  loom_tensor *xv = strs_tensor(&q, 0, 3);
  loom_session *s = session_ok(g);
  loom_output f[3] = {a, b, c};
  loom_tensor *o[3] = {0};
  run_ok(s, 1, &x, &xv, 3, f, o);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(i64s(o[0])[i], (int64_t)(loom_fingerprint64(q.s[i], q.len[i]) % 3));
    cr_assert_eq(i64s(o[1])[i], -9);
  }
  const int64_t wc[3] = {0, 1, -1};
  cr_assert(!memcmp(i64s(o[2]), wc, sizeof wc));
  for (int i = 0; i < 3; i++) loom_tensor_free(o[i]);
  loom_tensor_free(xv);
  loom_session_free(s);
  loom_graph_free(g);
  strs_free(&q);
  /* OOV buckets with default_value 1: TF 2.15's index_table_from_tensor(["a","b","c"],
   * num_oov_buckets=2, default_value=1).lookup(["b","a","zz"]) gives [3, 0, 3]: "b" sits at
   * the default's position and is hashed like a miss */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  const char *abc[3] = {"a", "b", "c"};
  loom_output y = loom_vocab_lookup_strings(g, x, 3, abc, 2, 1, NULL);
  strs q2 = {0};
  strs_push(&q2, strdup("b"), 1);
  strs_push(&q2, strdup("a"), 1);
  strs_push(&q2, strdup("zz"), 2);
  xv = strs_tensor(&q2, 0, 3);
  loom_tensor *r = tu_run1(g, 1, &x, &xv, y);
  const int64_t wr[3] = {3, 0, 3};
  cr_assert(!memcmp(i64s(r), wr, sizeof wr), "got %lld %lld %lld", (long long)i64s(r)[0], (long long)i64s(r)[1],
            (long long)i64s(r)[2]);
  loom_tensor_free(r);
  loom_tensor_free(xv);
  loom_graph_free(g);
  strs_free(&q2);
}

/* Vocabularies of every size class (1 key, small ones whose index puts every
 * key in its first slot, 20000 keys whose index has probe chains): every
 * key finds its own position, keys of every length (0..40 bytes, so each
 * hash and compare path), and misses go to the default / the OOV buckets
 * (Fingerprint64 of the key, as TF). */
Test(feature_ops, vocabularies_of_every_size_find_every_key) {
  const int64_t sizes[4] = {1, 7, 300, 20000};
  for (int si = 0; si < 4; si++) {
    int64_t n = sizes[si];
    char **keys = malloc((size_t)n * sizeof *keys);
    int64_t *ik = malloc((size_t)n * sizeof *ik);
    for (int64_t i = 0; i < n; i++) {
      keys[i] = malloc(48);
      int len = (int)(i % 41);
      snprintf(keys[i], 48, "%lld-", (long long)i);
      size_t l = strlen(keys[i]);
      for (int k = (int)l; k < len; k++) keys[i][k] = (char)('a' + (i * 7 + k) % 26);
      keys[i][len > (int)l ? len : (int)l] = 0;
      if (i == 0) keys[i][0] = 0; /* the empty key */
      ik[i] = (i * 1000003) ^ (i << 40);
    }
    int64_t nq = 2 * n;
    loom_graph *g = loom_graph_new();
    int64_t d = -1;
    loom_output xs = loom_placeholder(g, LOOM_STRING, 1, &d, "xs");
    loom_output xi = loom_placeholder(g, LOOM_I64, 1, &d, "xi");
    loom_output ys = loom_vocab_lookup_strings(g, xs, n, (const char *const *)keys, 3, -1, "s");
    loom_output yi = loom_vocab_lookup_int64(g, xi, n, ik, 0, -5, "i");
    cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
    loom_tensor *qs = loom_tensor_new(LOOM_STRING, 1, &nq, NULL);
    loom_tensor *qi = loom_tensor_new(LOOM_I64, 1, &nq, NULL);
    int64_t *qiv = loom_tensor_data(qi);
    char miss[64];
    for (int64_t i = 0; i < n; i++) {
      int64_t j = (i * 31) % n; /* every key, in another order */
      loom_tensor_set_string(qs, 2 * i, keys[j], strlen(keys[j]), NULL);
      snprintf(miss, sizeof miss, "%s~", keys[j]);
      loom_tensor_set_string(qs, 2 * i + 1, miss, strlen(miss), NULL);
      qiv[2 * i] = ik[j];
      qiv[2 * i + 1] = ik[j] + 1;
    }
    loom_status *st = loom_status_new();
    loom_session *s = loom_session_new(g, NULL, st);
    loom_output feeds[2] = {xs, xi}, fetch[2] = {ys, yi};
    loom_tensor *fv[2] = {qs, qi}, *out[2] = {NULL, NULL};
    cr_assert_eq(loom_session_run(s, feeds, fv, 2, fetch, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    const int64_t *os = loom_tensor_data_const(out[0]), *oi = loom_tensor_data_const(out[1]);
    for (int64_t i = 0; i < n; i++) {
      int64_t j = (i * 31) % n;
      cr_assert_eq(os[2 * i], j, "n %lld: key \"%s\" -> %lld", (long long)n, keys[j], (long long)os[2 * i]);
      snprintf(miss, sizeof miss, "%s~", keys[j]);
      int64_t want = n + (int64_t)(loom_fingerprint64(miss, strlen(miss)) % 3);
      cr_assert_eq(os[2 * i + 1], want, "n %lld: miss \"%s\"", (long long)n, miss);
      cr_assert_eq(oi[2 * i], j, "n %lld: int key %lld", (long long)n, (long long)ik[j]);
      int hit = 0; /* ik[j] + 1 may be another key */
      for (int64_t k = 0; k < n && !hit; k++) hit = ik[k] == ik[j] + 1;
      if (!hit) cr_assert_eq(oi[2 * i + 1], -5);
    }
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
    loom_tensor_free(qs);
    loom_tensor_free(qi);
    loom_session_free(s);
    loom_status_free(st);
    loom_graph_free(g);
    for (int64_t i = 0; i < n; i++) free(keys[i]);
    free(keys);
    free(ik);
  }
}

/* Keys of 1..40 bytes that differ from each other in one byte only, at
 * every position: each finds its own id (the short-key compare covers
 * every byte). */
Test(feature_ops, vocabulary_keys_differing_in_one_byte) {
  enum { MAXL = 40 };
  char *keys[MAXL * (MAXL + 1)];
  int64_t n = 0;
  for (int len = 1; len <= MAXL; len++)
    for (int k = -1; k < len; k++) {
      char *s = malloc((size_t)len + 1);
      memset(s, 'a', (size_t)len);
      if (k >= 0) s[k] = 'b';
      s[len] = 0;
      keys[n++] = s;
    }
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_output y = loom_vocab_lookup_strings(g, x, n, (const char *const *)keys, 0, -1, "v");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_tensor *q = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  for (int64_t i = 0; i < n; i++) loom_tensor_set_string(q, n - 1 - i, keys[i], strlen(keys[i]), NULL);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, &x, &q, 1, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const int64_t *o = loom_tensor_data_const(out);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(o[n - 1 - i], i, "key \"%s\" -> %lld", keys[i], (long long)o[n - 1 - i]);
  loom_tensor_free(out);
  loom_tensor_free(q);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
  for (int64_t i = 0; i < n; i++) free(keys[i]);
}
