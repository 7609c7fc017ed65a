/* Graph serialization: loom's own binary graph format.
 *
 * ---------------------------------------------------------------------
 * LOOM GRAPH FORMAT, version 1. Every integer is little-endian, doubles
 * are their IEEE-754 bits as u64; there is no padding.
 *
 *   header
 *     char[8]  magic "LOOMGRPH"
 *     u32      version = 1
 *     u32      flags = 0
 *     u32      has_seed       the graph-level random seed (0/1)
 *     i64      seed
 *     i64      next_op_seed   op seeds already drawn from it
 *     u32      N, the number of nodes
 *   N node records, in a topological order (every input and control
 *   input refers to an earlier record), each
 *     u32 L, u8[L]  name (1 <= L <= 511, no NUL; unique)
 *     u32 L, u8[L]  op name (TF-style, e.g. "MatMul"; 1 <= L <= 127)
 *     u32      nin, then nin x (u32 node index, u32 output index)
 *     u32      nctrl, then nctrl x u32 node index (control inputs)
 *     u32      nout, then nout x (u32 dtype, u32 rank <= 8, i64 dims[rank])
 *              dims of -1 are unknown (a placeholder's declared [-1,784])
 *     attributes, every field of loom_attrs except its pointers, 396 bytes:
 *              u32 dtype, i64 axis, i64 num, i32 keepdims, i32 transpose_a,
 *              i32 transpose_b, i32 naxes, i64 axes[8], i32 nshape,
 *              i64 shape[8], i64 size[8], i64 strides[4], i64 ksize[4],
 *              i64 dilations[4], i32 padding, f64 alpha, f64 beta,
 *              f64 start, f64 limit, f64 delta, f64 epsilon, u64 seed,
 *              u64 seed2
 *     u8       has_value: 1 for a Const (its tensor follows), else 0
 *              u32 dtype, u32 rank, i64 dims[rank], then
 *                non-string: u64 B (= numel * dtype size), u8[B]
 *                string: numel x (u64 len, u8[len])
 *     u32      variable flags: 0 except for the registered variables
 *              (VariableV2 nodes with a loom_variable): bit 0 set,
 *              bit 1 trainable, bit 2 made by get_variable, bit 3
 *              GLOBAL_VARIABLES, bit 4 LOCAL_VARIABLES, bit 5
 *              METRIC_VARIABLES, bit 6 MODEL_VARIABLES, bit 7 GLOBAL_STEP;
 *              when bit 0 is set: i32 the record index of the variable's
 *              initializer (its "<name>/Assign", a later Assign record
 *              whose input 0 is the variable), or -1
 *   trailer
 *     u32      masked CRC32C (base/crc32c.h) of every byte before it
 *
 * Ops are stored by name, so the op table may be reordered. The reader
 * checks the CRC first and then every length, count, index, dtype and
 * rank before using it, so a damaged buffer is DATA_LOSS and never read
 * out of bounds; an unknown op is NOT_FOUND.
 * --------------------------------------------------------------------- */
#include <string.h>
#include <stdio.h>
#include "engine/engine_impl.h"
#include "loom/loom_export.h"
#include "engine/variables.h"
#include "base/crc32c.h"

#define G_MAGIC "LOOMGRPH"
#define G_VERSION 1u
#define G_HEADER (8 + 4 + 4 + 4 + 8 + 8 + 4)
#define G_MAX_NAME 511u
#define G_MAX_OPNAME 127u
#define G_ATTR_BYTES 396u
/* smallest record: two 1-byte names, nin, nctrl, nout, attrs, has_value, flags */
#define G_MIN_RECORD (4 + 1 + 4 + 1 + 4 + 4 + 4 + G_ATTR_BYTES + 1 + 4)

/* the record's variable word: LOOM_VARMETA_* (engine/variable_api.h) */
enum { VF_VAR = LOOM_VARMETA_VAR, VF_ALL = LOOM_VARMETA_ALL };

void loom_buffer_free(void *data) { loom__free(data); }

/* ======================================================================
 * Collecting the nodes roots need
 * ====================================================================== */
static int node_in_graph(const loom_graph *g, const loom_node *n) {
  return n && n->graph == g && n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n;
}

static const loom_node *edge(const loom_node *n, int k) { return k < n->nin ? n->in[k].node : n->ctrl[k - n->nin]; }

loom_code loom__graph_collect(loom_graph *g, int n, loom_node *const *roots, loom_node ***order, int *count,
                              loom_status *st) {
  *order = NULL;
  *count = 0;
  int N = g->nnodes;
  uint8_t *need = loom__calloc((size_t)N + 1, 1);
  uint8_t *state = loom__calloc((size_t)N + 1, 1); /* 0 new, 1 on the stack, 2 done */
  int32_t *stack = loom__malloc(((size_t)N + 1) * 2 * sizeof *stack);
  loom_node **out = loom__malloc(((size_t)N + 1) * sizeof *out);
  loom_code rc = LOOM_OK;
  if (!need || !state || !stack || !out) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph serialization: out of memory");
    goto done;
  }
  /* 1. what the roots need */
  if (n == 0) {
    memset(need, 1, (size_t)N);
  } else {
    for (int r = 0; r < n; r++) {
      if (!node_in_graph(g, roots[r])) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "graph serialization: root %d (%s) is not a node of this graph",
                             r, roots[r] ? roots[r]->name : "NULL");
        goto done;
      }
      if (need[roots[r]->id]) continue;
      int sp = 0;
      stack[sp++] = roots[r]->id;
      need[roots[r]->id] = 1;
      while (sp) {
        const loom_node *x = g->nodes[stack[--sp]];
        for (int k = 0; k < x->nin + x->nctrl; k++) {
          const loom_node *m = edge(x, k);
          if (!node_in_graph(g, m)) {
            rc = loom_status_set(st, LOOM_INTERNAL, "%s: an input node is not in the graph", x->name);
            goto done;
          }
          if (!need[m->id]) {
            need[m->id] = 1;
            stack[sp++] = m->id;
          }
        }
      }
    }
  }
  /* 2. post-order DFS started from the needed nodes in creation order: when
   * creation order is topological the result is creation order */
  int cnt = 0;
  for (int id0 = 0; id0 < N; id0++) {
    if (!need[id0] || state[id0] == 2) continue;
    int sp = 0;
    stack[sp++] = id0;
    stack[sp++] = 0;
    state[id0] = 1;
    while (sp) {
      int id = stack[sp - 2], k = stack[sp - 1];
      loom_node *x = g->nodes[id];
      if (k < x->nin + x->nctrl) {
        stack[sp - 1] = k + 1;
        const loom_node *m = edge(x, k);
        if (!node_in_graph(g, m)) {
          rc = loom_status_set(st, LOOM_INTERNAL, "%s: an input node is not in the graph", x->name);
          goto done;
        }
        if (state[m->id] == 1) {
          rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "graph serialization: %s: the graph has a cycle through %s",
                               x->name, m->name);
          goto done;
        }
        if (state[m->id] == 0) {
          state[m->id] = 1;
          stack[sp++] = m->id;
          stack[sp++] = 0;
        }
      } else {
        state[id] = 2;
        out[cnt++] = x;
        sp -= 2;
      }
    }
  }
  *order = out;
  *count = cnt;
  out = NULL;
done:
  loom__free(need);
  loom__free(state);
  loom__free(stack);
  loom__free(out);
  return rc;
}

/* ======================================================================
 * Writer
 * ====================================================================== */
typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  int oom;
} wbuf;

static void wb_bytes(wbuf *w, const void *d, size_t k) {
  if (w->oom || !k) return;
  if (w->n + k > w->cap) {
    size_t nc = w->cap ? w->cap : 4096;
    while (nc < w->n + k) nc *= 2;
    uint8_t *np = loom__realloc(w->p, nc);
    if (!np) {
      w->oom = 1;
      return;
    }
    w->p = np;
    w->cap = nc;
  }
  memcpy(w->p + w->n, d, k);
  w->n += k;
}
static void wb_u8(wbuf *w, uint8_t v) { wb_bytes(w, &v, 1); }
static void wb_u32(wbuf *w, uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
  wb_bytes(w, b, 4);
}
static void wb_u64(wbuf *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  wb_bytes(w, b, 8);
}
static void wb_i32(wbuf *w, int32_t v) { wb_u32(w, (uint32_t)v); }
static void wb_i64(wbuf *w, int64_t v) { wb_u64(w, (uint64_t)v); }
static void wb_f64(wbuf *w, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  wb_u64(w, u);
}
static void wb_str(wbuf *w, const char *s) {
  size_t L = strlen(s);
  wb_u32(w, (uint32_t)L);
  wb_bytes(w, s, L);
}
static int host_le(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}
/* Elements of esz bytes, little-endian. */
static void wb_elems(wbuf *w, const void *data, size_t nbytes, size_t esz) {
  if (host_le() || esz == 1) {
    wb_bytes(w, data, nbytes);
    return;
  }
  const uint8_t *p = data;
  for (size_t i = 0; i < nbytes; i += esz)
    for (size_t j = 0; j < esz; j++) wb_u8(w, p[i + esz - 1 - j]);
}

static void wb_attrs(wbuf *w, const loom_attrs *a) {
  wb_u32(w, (uint32_t)a->dtype);
  wb_i64(w, a->axis);
  wb_i64(w, a->num);
  wb_i32(w, a->keepdims);
  wb_i32(w, a->transpose_a);
  wb_i32(w, a->transpose_b);
  wb_i32(w, a->naxes);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) wb_i64(w, a->axes[i]);
  wb_i32(w, a->nshape);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) wb_i64(w, a->shape[i]);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) wb_i64(w, a->size[i]);
  for (int i = 0; i < 4; i++) wb_i64(w, a->strides[i]);
  for (int i = 0; i < 4; i++) wb_i64(w, a->ksize[i]);
  for (int i = 0; i < 4; i++) wb_i64(w, a->dilations[i]);
  wb_i32(w, a->padding);
  wb_f64(w, a->alpha);
  wb_f64(w, a->beta);
  wb_f64(w, a->start);
  wb_f64(w, a->limit);
  wb_f64(w, a->delta);
  wb_f64(w, a->epsilon);
  wb_u64(w, a->seed);
  wb_u64(w, a->seed2);
}

static void wb_tensor(wbuf *w, const loom_tensor *t) {
  wb_u32(w, (uint32_t)t->dtype);
  wb_u32(w, (uint32_t)t->ndim);
  for (int i = 0; i < t->ndim; i++) wb_i64(w, t->dims[i]);
  if (t->dtype == LOOM_STRING) {
    const loom_tstring *s = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
      size_t len = s && s[i].ptr ? s[i].len : 0;
      wb_u64(w, (uint64_t)len);
      if (len) wb_bytes(w, s[i].ptr, len);
    }
  } else {
    wb_u64(w, (uint64_t)t->nbytes);
    wb_elems(w, t->data, t->nbytes, loom_dtype_size(t->dtype));
  }
}

loom_code loom_graph_serialize(loom_graph *g, int n, loom_node *const *roots, void **data, size_t *size,
                               loom_status *st) {
  if (!g || !data || !size || n < 0 || (n > 0 && !roots))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "graph_serialize: invalid arguments");
  *data = NULL;
  *size = 0;
  if (g->err_code)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "graph_serialize: the graph has a build error: %s",
                           g->err_msg ? g->err_msg : "");
  loom_node **order = NULL;
  int cnt = 0;
  loom_code rc = loom__graph_collect(g, n, roots, &order, &cnt, st);
  if (rc) return rc;
  int32_t *pos = loom__malloc(((size_t)g->nnodes + 1) * sizeof *pos);
  wbuf w = {0};
  if (!pos) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_serialize: out of memory");
    goto done;
  }
  for (int i = 0; i < g->nnodes; i++) pos[i] = -1;
  for (int i = 0; i < cnt; i++) pos[order[i]->id] = i;
  /* what cannot be written */
  for (int i = 0; i < cnt; i++) {
    const loom_node *x = order[i];
    size_t L = strlen(x->name), LO = strlen(x->def->name);
    if (L < 1 || L > G_MAX_NAME || LO < 1 || LO > G_MAX_OPNAME) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "graph_serialize: %s: the node or op name is too long", x->name);
      goto done;
    }
    if ((x->def->flags & LOOM_OPF_CONST) && !x->value) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "graph_serialize: %s: a constant without a value", x->name);
      goto done;
    }
    if (!(x->def->flags & LOOM_OPF_CONST) && (x->value || x->attrs.value)) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "graph_serialize: %s: op %s holds a tensor attribute", x->name,
                           x->def->name);
      goto done;
    }
    if (x->attrs.resource && !(x->def->flags & LOOM_OPF_VARIABLE)) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "graph_serialize: %s: op %s holds a resource that cannot be saved",
                           x->name, x->def->name);
      goto done;
    }
    if (x->def->bind && !(x->def->flags & (LOOM_OPF_CONST | LOOM_OPF_VARIABLE))) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "graph_serialize: %s: op %s binds external memory", x->name,
                           x->def->name);
      goto done;
    }
  }
  wb_bytes(&w, G_MAGIC, 8);
  wb_u32(&w, G_VERSION);
  wb_u32(&w, 0);
  wb_u32(&w, g->has_seed ? 1u : 0u);
  wb_i64(&w, g->seed);
  wb_i64(&w, g->next_op_seed);
  wb_u32(&w, (uint32_t)cnt);
  for (int i = 0; i < cnt; i++) {
    const loom_node *x = order[i];
    wb_str(&w, x->name);
    wb_str(&w, x->def->name);
    wb_u32(&w, (uint32_t)x->nin);
    for (int k = 0; k < x->nin; k++) {
      wb_u32(&w, (uint32_t)pos[x->in[k].node->id]);
      wb_u32(&w, (uint32_t)x->in[k].index);
    }
    wb_u32(&w, (uint32_t)x->nctrl);
    for (int k = 0; k < x->nctrl; k++) wb_u32(&w, (uint32_t)pos[x->ctrl[k]->id]);
    wb_u32(&w, (uint32_t)x->nout);
    for (int k = 0; k < x->nout; k++) {
      wb_u32(&w, (uint32_t)x->out[k].dtype);
      wb_u32(&w, (uint32_t)x->out[k].ndim);
      for (int d = 0; d < x->out[k].ndim; d++) wb_i64(&w, x->out[k].dims[d]);
    }
    wb_attrs(&w, &x->attrs);
    if (x->def->flags & LOOM_OPF_CONST) {
      wb_u8(&w, 1);
      wb_tensor(&w, x->value);
    } else {
      wb_u8(&w, 0);
    }
    const loom_graph_var_hooks *vh = loom__graph_var_hooks();
    loom_node *vinit = NULL;
    uint32_t f = (x->def->flags & LOOM_OPF_VARIABLE) && vh->describe ? vh->describe(g, x, &vinit) : 0u;
    if (f & VF_VAR) {
      int32_t init = -1;
      if (vinit && node_in_graph(g, vinit) && pos[vinit->id] > i && (vinit->def->flags & LOOM_OPF_ASSIGN) &&
          vinit->nin >= 1 && vinit->in[0].node == x)
        init = pos[vinit->id];
      wb_u32(&w, f);
      wb_i32(&w, init);
    } else {
      wb_u32(&w, 0);
    }
  }
  if (!w.oom) wb_u32(&w, loom__crc32c_masked(w.p, w.n));
  if (w.oom) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_serialize: out of memory");
    goto done;
  }
  *data = w.p;
  *size = w.n;
  w.p = NULL;
  loom_status_clear(st);
done:
  loom__free(w.p);
  loom__free(pos);
  loom__free(order);
  return rc;
}

/* ======================================================================
 * Reader
 * ====================================================================== */
typedef struct rbuf {
  const uint8_t *p;
  size_t n, off;
  int bad;
} rbuf;

static int rb_take(rbuf *r, size_t k, const uint8_t **out) {
  if (r->bad || r->n - r->off < k) {
    r->bad = 1;
    return 0;
  }
  *out = r->p + r->off;
  r->off += k;
  return 1;
}
static uint32_t rb_u32(rbuf *r) {
  const uint8_t *b;
  if (!rb_take(r, 4, &b)) return 0;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
  return v;
}
static uint64_t rb_u64(rbuf *r) {
  const uint8_t *b;
  if (!rb_take(r, 8, &b)) return 0;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}
static uint8_t rb_u8(rbuf *r) {
  const uint8_t *b;
  return rb_take(r, 1, &b) ? b[0] : 0;
}
static int32_t rb_i32(rbuf *r) { return (int32_t)rb_u32(r); }
static int64_t rb_i64(rbuf *r) { return (int64_t)rb_u64(r); }
static double rb_f64(rbuf *r) {
  uint64_t u = rb_u64(r);
  double v;
  memcpy(&v, &u, 8);
  return v;
}
static size_t rb_left(const rbuf *r) { return r->bad ? 0 : r->n - r->off; }

typedef struct rec {
  char *name;
  int32_t op;
  int32_t nin, nctrl, nout;
  uint32_t *in;   /* 2 per input: record, output */
  uint32_t *ctrl;
  loom_tdesc *out;
  loom_attrs attrs;
  loom_tensor *value;
  uint32_t vflags;
  int32_t init;
} rec;

static void recs_free(rec *rs, int n) {
  if (!rs) return;
  for (int i = 0; i < n; i++) {
    loom__free(rs[i].name);
    loom__free(rs[i].in);
    loom__free(rs[i].ctrl);
    loom__free(rs[i].out);
    loom_tensor_free(rs[i].value);
  }
  loom__free(rs);
}

/* The flags of op id op (0 when unknown). */
static uint32_t op_flags(int op) {
  const loom_op_def *d = loom__op_def(op);
  return d ? d->flags : 0u;
}

/* A string of 1..maxlen bytes without NUL, copied into buf (cap > maxlen). */
static int rb_str(rbuf *r, char *buf, uint32_t maxlen) {
  uint32_t L = rb_u32(r);
  const uint8_t *b;
  if (r->bad || L < 1 || L > maxlen || !rb_take(r, L, &b)) return 0;
  if (memchr(b, 0, L)) return 0;
  memcpy(buf, b, L);
  buf[L] = 0;
  return 1;
}

/* dims: ndim entries >= lo, with a guarded product (elements). */
static int dims_ok(int ndim, const int64_t *dims, int64_t lo) {
  for (int i = 0; i < ndim; i++)
    if (dims[i] < lo || dims[i] > ((int64_t)1 << 48)) return 0;
  return 1;
}

#define BAD(...)                                                            \
  do {                                                                      \
    rc = loom_status_set(st, LOOM_DATA_LOSS, "serialized graph: " __VA_ARGS__); \
    goto fail;                                                              \
  } while (0)

static loom_code read_tensor(rbuf *r, loom_tensor **out, int idx, const char *name, loom_status *st) {
  loom_code rc = LOOM_OK;
  *out = NULL;
  uint32_t dt = rb_u32(r), rank = rb_u32(r);
  if (r->bad) BAD("record %d (%s): truncated constant", idx, name);
  if (dt < 1 || dt >= LOOM_DTYPE_COUNT) BAD("record %d (%s): constant has invalid dtype %u", idx, name, dt);
  if (rank > LOOM_MAX_DIMS) BAD("record %d (%s): constant has rank %u (> %d)", idx, name, rank, LOOM_MAX_DIMS);
  int64_t dims[LOOM_MAX_DIMS];
  for (uint32_t i = 0; i < rank; i++) dims[i] = rb_i64(r);
  if (r->bad) BAD("record %d (%s): truncated constant", idx, name);
  if (!dims_ok((int)rank, dims, 0)) BAD("record %d (%s): constant has an invalid dimension", idx, name);
  /* numel, bounded by the bytes left (every element takes >= 1 byte, 8 for strings) */
  uint64_t numel = 1, left = rb_left(r);
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) {
      numel = 0;
      break;
    }
  }
  if (numel) {
    for (uint32_t i = 0; i < rank; i++) {
      numel *= (uint64_t)dims[i];
      if (numel > left) BAD("record %d (%s): constant is larger than the buffer", idx, name);
    }
  }
  size_t esz = loom_dtype_size((loom_dtype)dt);
  if (dt == LOOM_STRING) {
    if (numel * 8 > left) BAD("record %d (%s): constant is larger than the buffer", idx, name);
  } else {
    uint64_t B = rb_u64(r);
    if (r->bad || B != numel * esz || B > rb_left(r))
      BAD("record %d (%s): constant data length does not match its shape", idx, name);
  }
  loom_tensor *t = loom_tensor_new((loom_dtype)dt, (int)rank, dims, st);
  if (!t) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  *out = t;
  if (dt == LOOM_STRING) {
    for (uint64_t i = 0; i < numel; i++) {
      uint64_t len = rb_u64(r);
      const uint8_t *b;
      if (r->bad || len > rb_left(r) || !rb_take(r, (size_t)len, &b))
        BAD("record %d (%s): truncated string constant", idx, name);
      if (len && loom_tensor_set_string(t, (int64_t)i, (const char *)b, (size_t)len, st))
        return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    }
  } else if (t->nbytes) {
    const uint8_t *b = NULL;
    if (!rb_take(r, t->nbytes, &b)) BAD("record %d (%s): truncated constant", idx, name);
    if (host_le() || esz == 1) {
      memcpy(t->data, b, t->nbytes);
    } else {
      uint8_t *d = t->data;
      for (size_t i = 0; i < t->nbytes; i += esz)
        for (size_t j = 0; j < esz; j++) d[i + j] = b[i + esz - 1 - j];
    }
  }
  return LOOM_OK;
fail:
  return rc;
}

static loom_code read_attrs(rbuf *r, loom_attrs *a, int idx, const char *name, loom_status *st) {
  loom_code rc = LOOM_OK;
  memset(a, 0, sizeof *a);
  uint32_t dt = rb_u32(r);
  a->axis = rb_i64(r);
  a->num = rb_i64(r);
  a->keepdims = rb_i32(r);
  a->transpose_a = rb_i32(r);
  a->transpose_b = rb_i32(r);
  a->naxes = rb_i32(r);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) a->axes[i] = rb_i64(r);
  a->nshape = rb_i32(r);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) a->shape[i] = rb_i64(r);
  for (int i = 0; i < LOOM_MAX_DIMS; i++) a->size[i] = rb_i64(r);
  for (int i = 0; i < 4; i++) a->strides[i] = rb_i64(r);
  for (int i = 0; i < 4; i++) a->ksize[i] = rb_i64(r);
  for (int i = 0; i < 4; i++) a->dilations[i] = rb_i64(r);
  a->padding = rb_i32(r);
  a->alpha = rb_f64(r);
  a->beta = rb_f64(r);
  a->start = rb_f64(r);
  a->limit = rb_f64(r);
  a->delta = rb_f64(r);
  a->epsilon = rb_f64(r);
  a->seed = rb_u64(r);
  a->seed2 = rb_u64(r);
  if (r->bad) BAD("record %d (%s): truncated attributes", idx, name);
  if (dt >= LOOM_DTYPE_COUNT) BAD("record %d (%s): attribute dtype %u is out of range", idx, name, dt);
  a->dtype = (loom_dtype)dt;
  if (a->naxes < -1 || a->naxes > LOOM_MAX_DIMS)
    BAD("record %d (%s): attribute naxes %d is out of range", idx, name, (int)a->naxes);
  if (a->nshape < 0 || a->nshape > LOOM_MAX_DIMS)
    BAD("record %d (%s): attribute nshape %d is out of range", idx, name, (int)a->nshape);
  if (a->padding != LOOM_PAD_VALID && a->padding != LOOM_PAD_SAME)
    BAD("record %d (%s): attribute padding %d is out of range", idx, name, (int)a->padding);
  /* Integer attributes within ranges no real graph leaves, so that shape
   * functions never multiply crafted values into an overflow. */
  const int64_t big = (int64_t)1 << 32, small = (int64_t)1 << 24;
  if (a->axis < -big || a->axis > big || a->num < -big || a->num > big)
    BAD("record %d (%s): attribute axis or num is out of range", idx, name);
  for (int i = 0; i < LOOM_MAX_DIMS; i++)
    if (a->axes[i] < -big || a->axes[i] > big) BAD("record %d (%s): attribute axes is out of range", idx, name);
  int64_t ps = 1, pz = 1;
  for (int i = 0; i < LOOM_MAX_DIMS; i++) {
    if (a->shape[i] < -big || a->shape[i] > big || a->size[i] < -big || a->size[i] > big)
      BAD("record %d (%s): attribute shape or size is out of range", idx, name);
    int64_t s = a->shape[i] < 0 ? -a->shape[i] : a->shape[i], z = a->size[i] < 0 ? -a->size[i] : a->size[i];
    if (s > 1) ps = ps > ((int64_t)1 << 56) / s ? ((int64_t)1 << 56) + 1 : ps * s;
    if (z > 1) pz = pz > ((int64_t)1 << 56) / z ? ((int64_t)1 << 56) + 1 : pz * z;
  }
  if (ps > ((int64_t)1 << 56) || pz > ((int64_t)1 << 56))
    BAD("record %d (%s): attribute shape or size has too many elements", idx, name);
  for (int i = 0; i < 4; i++)
    if (a->strides[i] < -small || a->strides[i] > small || a->ksize[i] < -small || a->ksize[i] > small ||
        a->dilations[i] < -small || a->dilations[i] > small)
      BAD("record %d (%s): attribute strides, ksize or dilations is out of range", idx, name);
  return LOOM_OK;
fail:
  return rc;
}

/* dtype/rank equal, known dims equal */
static int desc_compatible(const loom_tdesc *a, const loom_tdesc *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i]) return 0;
  return 1;
}

loom_code loom_graph_deserialize(loom_graph *g, const void *data, size_t size, loom_status *st) {
  if (!g || (!data && size)) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "graph_deserialize: invalid arguments");
  if (g->err_code)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "graph_deserialize: the graph has a build error: %s",
                           g->err_msg ? g->err_msg : "");
  const uint8_t *p = data;
  loom_code rc = LOOM_OK;
  rec *rs = NULL;
  loom_node **built = NULL;
  int N = 0;
  if (size < G_HEADER + 4) BAD("%zu bytes is shorter than a header and a trailer", size);
  if (memcmp(p, G_MAGIC, 8)) BAD("bad magic (not a loom graph)");
  {
    uint32_t want = 0;
    for (int i = 0; i < 4; i++) want |= (uint32_t)p[size - 4 + i] << (8 * i);
    if (loom__crc32c_masked(p, size - 4) != want) BAD("CRC mismatch (the data is damaged or truncated)");
  }
  rbuf r = {p, size - 4, 8, 0};
  uint32_t version = rb_u32(&r), flags = rb_u32(&r), has_seed = rb_u32(&r);
  int64_t seed = rb_i64(&r), next_op_seed = rb_i64(&r);
  uint32_t n32 = rb_u32(&r);
  if (r.bad) BAD("truncated header");
  if (version != G_VERSION) BAD("unsupported format version %u (this build reads version %u)", version, G_VERSION);
  if (flags != 0 || has_seed > 1) BAD("invalid header flags");
  if ((uint64_t)n32 * G_MIN_RECORD > rb_left(&r)) BAD("node count %u does not fit in %zu bytes", n32, size);
  N = (int)n32;
  rs = loom__calloc((size_t)N + 1, sizeof *rs);
  built = loom__calloc((size_t)N + 1, sizeof *built);
  if (!rs || !built) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
    goto fail;
  }
  /* 1. parse and check every record */
  char name[G_MAX_NAME + 1], opname[G_MAX_OPNAME + 1];
  for (int i = 0; i < N; i++) {
    rec *x = &rs[i];
    if (!rb_str(&r, name, G_MAX_NAME)) BAD("record %d: invalid or truncated node name", i);
    if (!(x->name = loom__strdup(name))) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
      goto fail;
    }
    if (!rb_str(&r, opname, G_MAX_OPNAME)) BAD("record %d (%s): invalid or truncated op name", i, name);
    x->op = loom__op_find(opname);
    if (x->op < 0) {
      rc = loom_status_set(st, LOOM_NOT_FOUND, "serialized graph: node %s: op %s is not registered in this build",
                           name, opname);
      goto fail;
    }
    const loom_op_def *def = loom__op_def(x->op);
    uint32_t nin = rb_u32(&r);
    if (r.bad || (uint64_t)nin * 8 > rb_left(&r)) BAD("record %d (%s): input count %u is out of range", i, name, nin);
    if (def->nin >= 0 && nin != (uint32_t)def->nin)
      BAD("record %d (%s): op %s takes %d inputs, the record has %u", i, name, def->name, def->nin, nin);
    if (def->nin < 0 && nin < 1 && !(def->flags & LOOM_OPF_EMPTY_OK))
      BAD("record %d (%s): op %s needs at least one input", i, name, def->name);
    x->nin = (int32_t)nin;
    x->in = loom__malloc(((size_t)nin + 1) * 2 * sizeof *x->in);
    if (!x->in) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
      goto fail;
    }
    for (uint32_t k = 0; k < nin; k++) {
      uint32_t src = rb_u32(&r), oi = rb_u32(&r);
      if (r.bad) BAD("record %d (%s): truncated inputs", i, name);
      if (src >= (uint32_t)i) BAD("record %d (%s): input %u refers to record %u, not an earlier one", i, name, k, src);
      if (oi >= (uint32_t)rs[src].nout)
        BAD("record %d (%s): input %u refers to output %u of %s, which has %d outputs", i, name, k, oi, rs[src].name,
            (int)rs[src].nout);
      x->in[2 * k] = src;
      x->in[2 * k + 1] = oi;
    }
    uint32_t nctrl = rb_u32(&r);
    if (r.bad || (uint64_t)nctrl * 4 > rb_left(&r))
      BAD("record %d (%s): control input count %u is out of range", i, name, nctrl);
    x->nctrl = (int32_t)nctrl;
    x->ctrl = loom__malloc(((size_t)nctrl + 1) * sizeof *x->ctrl);
    if (!x->ctrl) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
      goto fail;
    }
    for (uint32_t k = 0; k < nctrl; k++) {
      x->ctrl[k] = rb_u32(&r);
      if (r.bad) BAD("record %d (%s): truncated control inputs", i, name);
      if (x->ctrl[k] >= (uint32_t)i)
        BAD("record %d (%s): control input %u refers to record %u, not an earlier one", i, name, k, x->ctrl[k]);
    }
    uint32_t nout = rb_u32(&r);
    if (r.bad || (uint64_t)nout * 8 > rb_left(&r)) BAD("record %d (%s): output count %u is out of range", i, name, nout);
    if (def->nout >= 0 && nout != (uint32_t)def->nout)
      BAD("record %d (%s): op %s has %d outputs, the record has %u", i, name, def->name, def->nout, nout);
    x->nout = (int32_t)nout;
    x->out = loom__calloc((size_t)nout + 1, sizeof *x->out);
    if (!x->out) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
      goto fail;
    }
    for (uint32_t k = 0; k < nout; k++) {
      uint32_t dt = rb_u32(&r), rank = rb_u32(&r);
      if (r.bad) BAD("record %d (%s): truncated outputs", i, name);
      if (dt >= LOOM_DTYPE_COUNT) BAD("record %d (%s): output %u has invalid dtype %u", i, name, k, dt);
      if (rank > LOOM_MAX_DIMS) BAD("record %d (%s): output %u has rank %u (> %d)", i, name, k, rank, LOOM_MAX_DIMS);
      x->out[k].dtype = (loom_dtype)dt;
      x->out[k].ndim = (int32_t)rank;
      for (uint32_t d = 0; d < rank; d++) x->out[k].dims[d] = rb_i64(&r);
      if (r.bad) BAD("record %d (%s): truncated outputs", i, name);
      if (!dims_ok((int)rank, x->out[k].dims, -1)) BAD("record %d (%s): output %u has an invalid dimension", i, name, k);
    }
    if ((rc = read_attrs(&r, &x->attrs, i, name, st))) goto fail;
    uint8_t has_value = rb_u8(&r);
    if (r.bad) BAD("record %d (%s): truncated record", i, name);
    if (has_value > 1 || (has_value == 1) != ((op_flags(x->op) & LOOM_OPF_CONST) != 0))
      BAD("record %d (%s): invalid constant flag %u for op %s", i, name, has_value, def->name);
    if (has_value && (rc = read_tensor(&r, &x->value, i, name, st))) goto fail;
    x->vflags = rb_u32(&r);
    x->init = -1;
    if (r.bad) BAD("record %d (%s): truncated record", i, name);
    if (x->vflags) {
      if (!(op_flags(x->op) & LOOM_OPF_VARIABLE) || !(x->vflags & VF_VAR) || (x->vflags & ~(uint32_t)VF_ALL))
        BAD("record %d (%s): invalid variable flags 0x%x for op %s", i, name, x->vflags, def->name);
      x->init = rb_i32(&r);
      if (r.bad) BAD("record %d (%s): truncated record", i, name);
      if (x->init < -1 || (x->init >= 0 && (x->init <= i || x->init >= N)))
        BAD("record %d (%s): initializer index %d is out of range", i, name, (int)x->init);
    }
  }
  if (rb_left(&r)) BAD("%zu unexpected bytes after the last record", rb_left(&r));
  for (int i = 0; i < N; i++) {
    const rec *x = &rs[i];
    if (x->init < 0) continue;
    const rec *a = &rs[x->init];
    if (!(op_flags(a->op) & LOOM_OPF_ASSIGN) || a->nin < 1 || a->in[0] != (uint32_t)i)
      BAD("record %d (%s): its initializer %s is not an Assign of it", i, x->name, a->name);
  }

  /* 2. build, at the root name scope with no control dependencies */
  int base = g->nnodes;
  loom_root_scope rsv;
  loom__root_scope_enter(g, &rsv);
  loom_output ins_small[16];
  for (int i = 0; i < N && !rc; i++) {
    rec *x = &rs[i];
    loom_node *prev = loom_graph_find(g, x->name);
    if (prev) {
      if (prev->id >= base) rc = loom_status_set(st, LOOM_DATA_LOSS, "serialized graph: node name %s appears twice", x->name);
      else
        rc = loom_status_set(st, LOOM_ALREADY_EXISTS, "graph_deserialize: the graph already has a node named %s",
                             x->name);
      break;
    }
    loom_output *ins = x->nin <= 16 ? ins_small : loom__malloc((size_t)x->nin * sizeof *ins);
    if (!ins) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "graph_deserialize: out of memory");
      break;
    }
    for (int k = 0; k < x->nin; k++) {
      ins[k].node = built[x->in[2 * k]];
      ins[k].index = (int32_t)x->in[2 * k + 1];
    }
    loom_attrs a = x->attrs;
    a.value = x->value;
    a.resource = NULL;
    loom_node *nd = loom__graph_add(g, x->op, x->name, NULL, x->nin, ins, &a, x->nout);
    if (ins != ins_small) loom__free(ins);
    if (!nd) {
      loom_code gc = g->err_code ? g->err_code : LOOM_INTERNAL;
      rc = loom_status_set(st, gc == LOOM_RESOURCE_EXHAUSTED ? gc : LOOM_DATA_LOSS,
                           "serialized graph: node %s cannot be rebuilt: %s", x->name,
                           g->err_msg ? g->err_msg : loom_code_name(gc));
      break;
    }
    if (x->value) {
      nd->value = x->value; /* the node owns it now */
      x->value = NULL;
    }
    built[i] = nd;
    if (strcmp(nd->name, x->name)) {
      rc = loom_status_set(st, LOOM_INTERNAL, "graph_deserialize: node %s was renamed %s", x->name, nd->name);
      break;
    }
    for (int k = 0; k < x->nout; k++)
      if (!desc_compatible(&nd->out[k], &x->out[k])) {
        char b1[96], b2[96];
        rc = loom_status_set(st, LOOM_DATA_LOSS,
                             "serialized graph: node %s: output %d is recorded as %s %s but rebuilds as %s %s", x->name,
                             k, loom_dtype_name(x->out[k].dtype),
                             loom__dims_str(b1, sizeof b1, x->out[k].ndim, x->out[k].dims),
                             loom_dtype_name(nd->out[k].dtype),
                             loom__dims_str(b2, sizeof b2, nd->out[k].ndim, nd->out[k].dims));
        break;
      }
    for (int k = 0; !rc && k < x->nctrl; k++) loom_node_add_control_input(nd, built[x->ctrl[k]]);
    if (!rc && g->err_code)
      rc = loom_status_set(st, g->err_code, "graph_deserialize: %s", g->err_msg ? g->err_msg : "");
  }
  /* 3. variables */
  for (int i = 0; i < N && !rc; i++) {
    const rec *x = &rs[i];
    if (!(op_flags(x->op) & LOOM_OPF_VARIABLE)) continue; /* raw variables too: no collections, not trainable */
    const loom_graph_var_hooks *vh = loom__graph_var_hooks();
    if (vh->import && vh->import(g, built[i], x->init >= 0 ? built[x->init] : NULL, x->vflags))
      rc = loom_status_set(st, g->err_code ? g->err_code : LOOM_INTERNAL, "graph_deserialize: %s",
                           g->err_msg ? g->err_msg : "cannot register a variable");
  }
  loom__root_scope_leave(g, &rsv);
  if (rc) goto fail;
  if (has_seed) {
    g->has_seed = 1;
    g->seed = seed;
    if (next_op_seed > g->next_op_seed) g->next_op_seed = next_op_seed;
  }
  recs_free(rs, N);
  loom__free(built);
  loom_status_clear(st);
  return LOOM_OK;
fail:
  recs_free(rs, N);
  loom__free(built);
  return rc;
}
