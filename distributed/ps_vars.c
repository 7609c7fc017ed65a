/* distributed/ps_vars.c - the PS's variables: reference-counted value
 * buffers, optimizer slots, the learning-rate schedule of an update rule, and
 * the optimizer apply (dense ranges with the CRC of the result, rows),
 * copy-on-write of a value a reply still sends. */
#include "distributed/ps_server_impl.h"

vbuf *loom__pss_vbuf_new(int64_t n) {
  vbuf *b = loom__malloc(sizeof *b);
  if (!b) return NULL;
  b->refs = 1;
  b->data = loom__aligned_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!b->data) {
    loom__free(b);
    return NULL;
  }
  return b;
}

void loom__pss_vbuf_release(vbuf *b) {
  if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    loom__aligned_free(b->data);
    loom__free(b);
  }
}

static shard *shard_of(loom_ps_server *s, uint32_t id) { return &s->shards[id % (uint32_t)s->nshards]; }

psvar *loom__pss_var_get(loom_ps_server *s, uint32_t id) {
  shard *sh = shard_of(s, id);
  uint32_t li = id / (uint32_t)s->nshards;
  return li < sh->cap && sh->vars[li].present ? &sh->vars[li] : NULL;
}

float *loom__pss_alloc_floats(int64_t n, float fill) {
  float *p = loom__aligned_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (p)
    for (int64_t i = 0; i < n; i++) p[i] = fill;
  return p;
}

void loom__pss_var_free(psvar *v) {
  loom__pss_vbuf_release(v->vb);
  loom__aligned_free(v->s0);
  loom__aligned_free(v->s1);
  loom__aligned_free(v->s2);
  loom__aligned_free(v->agg);
  loom__free(v->agg_ids);
  loom__free(v->agg_rows);
  loom__free(v->agg_conns);
  loom__free(v->sy_pairs);
  loom__free(v->sy_uids);
  loom__free(v->sy_sum);
  loom__free(v->ws);
  loom__free(v->sched_b);
  loom__free(v->sched_v);
  memset(v, 0, sizeof *v);
}

static loom_buf mkbuf(void *data, int ndim, const int64_t *dims, int64_t numel) {
  loom_buf b;
  memset(&b, 0, sizeof b);
  b.data = data;
  b.dtype = LOOM_F32;
  b.ndim = ndim;
  for (int i = 0; i < ndim; i++) b.dims[i] = dims[i];
  b.numel = numel;
  return b;
}

static loom_buf scalar(float *p) { return mkbuf(p, 0, NULL, 1); }

/* Number of optimizer slots (s0, s1, s2) of a variable and their initial values. */
int loom__pss_opt_slots(loom_ps_optimizer opt, const float *hyper, float init[3]) {
  init[0] = init[1] = init[2] = 0.0f;
  switch (opt) {
  case LOOM_PS_SGD: return 0;
  case LOOM_PS_MOMENTUM: return 1;
  case LOOM_PS_ADAGRAD: init[0] = hyper[1]; return 1;
  case LOOM_PS_ADAM: return 2;
  case LOOM_PS_FTRL: init[0] = hyper[2]; return 2; /* accum, linear */
  case LOOM_PS_RMSPROP:
    if (hyper[4] != 0.0f) { /* mg, ms (TF's "rms" slot, starting at hyper[5]), mom */
      init[1] = hyper[5];
      return 3;
    }
    init[0] = hyper[5]; /* ms, mom */
    return 2;
  case LOOM_PS_ADADELTA: return 2; /* accum, accum_update */
  default: return 0;
  }
}

/* Applies a dense (ids NULL) or sparse gradient with the local kernels, in
 * the kernels' (TF's) input orders. */
/* One kernel call: sparse (ids) on the whole variable, or dense on the elements [off, off + cnt) (the
 * dense optimizers are elementwise, so a piece gives the same bits as the whole). */
/* The learning rate of the variable's next update: its schedule at its step (the local schedule kernel),
 * else hyper[0]. */
static float var_lr(const psvar *v) {
  if (!v->sched_on) return v->hyper[0];
  loom_attrs at;
  memset(&at, 0, sizeof at);
  at.num = v->sched_kind;
  at.alpha = v->sched_p[0];
  at.start = v->sched_p[1];
  at.beta = v->sched_p[2];
  at.limit = v->sched_p[3];
  at.keepdims = v->sched_flag;
  int64_t step = v->step, nb = v->sched_nb, nv = nb + 1;
  float lr = v->hyper[0];
  loom_buf sb = mkbuf(&step, 0, NULL, 1), bb = mkbuf(v->sched_b, 1, &nb, nb), vb = mkbuf(v->sched_v, 1, &nv, nv),
           ob = mkbuf(&lr, 0, NULL, 1);
  sb.dtype = LOOM_I64;
  bb.dtype = LOOM_F64;
  loom_buf *in[3] = {&sb, &bb, &vb}, *out[1] = {&ob};
  loom_kctx k;
  memset(&k, 0, sizeof k);
  k.attrs = &at;
  k.in = in;
  k.nin = v->sched_kind == LOOM_LRS_PIECEWISE ? 3 : 1;
  k.out = out;
  k.nout = 1;
  if (loom__k_lr_schedule(&k) != LOOM_OK) return v->hyper[0];
  return lr;
}

static loom_code kernel_apply(psvar *v, const float *grad, const int64_t *ids, int64_t n, int64_t off, int64_t cnt,
                              loom_status *st) {
  float hl[8];
  memcpy(hl, v->hyper, sizeof hl);
  hl[0] = var_lr(v);
  const float *h = hl;
  float sc[8]; /* scalar inputs, copied so the kernels see the same float values as a local graph's consts */
  int vnd = ids ? v->ndim : 1;
  const int64_t *vdims = ids ? v->dims : &cnt;
  loom_buf var = mkbuf(v->val + off, vnd, vdims, cnt);
  loom_buf sl[3];
  float *sp[3] = {v->s0, v->s1, v->s2};
  for (int i = 0; i < 3; i++) sl[i] = mkbuf(sp[i] ? sp[i] + off : NULL, vnd, vdims, cnt);
  loom_buf bs[8];
  for (int i = 0; i < 8; i++) bs[i] = scalar(&sc[i]);
  loom_buf b1p = scalar(&v->b1p), b2p = scalar(&v->b2p);
  loom_buf g, ix;
  memset(&ix, 0, sizeof ix);
  int64_t gdims[2] = {n, v->row};
  if (ids) {
    g = mkbuf((void *)grad, 2, gdims, n * v->row);
    ix = mkbuf((void *)ids, 1, &n, n);
    ix.dtype = LOOM_I64;
    size_t need = loom__sparse_apply_ws(n, v->row, v->nrows, (v->opt == LOOM_PS_ADAM && h[4] != 0.0f) ||
                                                                 (v->opt == LOOM_PS_RMSPROP && h[6] != 0.0f));
    if (need > v->ws_size) {
      void *w = loom__realloc(v->ws, need);
      if (!w) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "sparse workspace of %zu bytes", need);
      v->ws = w;
      v->ws_size = need;
    }
  } else {
    g = mkbuf((void *)grad, 1, &cnt, cnt);
  }
  loom_attrs at;
  memset(&at, 0, sizeof at);
  loom_kctx k;
  memset(&k, 0, sizeof k);
  k.attrs = &at;
  k.st = st;
  k.ws = v->ws;
  k.ws_size = v->ws_size;
  loom_buf *in[12];
  int m = 0;
  loom_code (*dense)(const loom_kctx *) = NULL, (*sparse)(const loom_kctx *) = NULL;
#define IN(b) (in[m++] = &(b))
#define GRAD() (IN(g), ids ? (void)IN(ix) : (void)0)
  switch (v->opt) {
  case LOOM_PS_SGD: /* var, lr, grad[, indices] */
    sc[0] = h[0];
    IN(var), IN(bs[0]), GRAD();
    dense = loom__k_apply_gradient_descent_f32, sparse = loom__k_sparse_apply_gradient_descent_f32;
    break;
  case LOOM_PS_MOMENTUM: /* var, accum, lr, grad[, indices], momentum */
    sc[0] = h[0], sc[1] = h[1];
    IN(var), IN(sl[0]), IN(bs[0]), GRAD(), IN(bs[1]);
    at.num = h[2] != 0.0f;
    dense = loom__k_apply_momentum_f32, sparse = loom__k_sparse_apply_momentum_f32;
    break;
  case LOOM_PS_ADAGRAD: /* var, accum, lr, grad[, indices] */
    sc[0] = h[0];
    IN(var), IN(sl[0]), IN(bs[0]), GRAD();
    dense = loom__k_apply_adagrad_f32, sparse = loom__k_sparse_apply_adagrad_f32;
    break;
  case LOOM_PS_ADAM: /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad[, indices] */
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2], sc[3] = h[3];
    IN(var), IN(sl[0]), IN(sl[1]), IN(b1p), IN(b2p), IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), GRAD();
    at.num = ids && h[4] == 0.0f ? 2 : 0; /* sparse: LazyAdam unless hyper[4] (TF's Adam: every row's moments) */
    dense = loom__k_apply_adam_f32, sparse = loom__k_sparse_apply_adam_f32;
    break;
  case LOOM_PS_FTRL: /* var, accum, linear, grad[, indices], lr, l1, l2, l2_shrinkage, lr_power */
    sc[0] = h[0], sc[1] = h[3], sc[2] = h[4], sc[3] = h[5], sc[4] = h[1];
    IN(var), IN(sl[0]), IN(sl[1]), GRAD(), IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), IN(bs[4]);
    dense = loom__k_apply_ftrl_f32, sparse = loom__k_sparse_apply_ftrl_f32;
    break;
  case LOOM_PS_RMSPROP: /* var, [mg,] ms, mom, lr, rho, momentum, epsilon, grad[, indices]; num bit 0: Keras' legacy */
    at.num = h[6] != 0.0f ? 1 : 0;
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2], sc[3] = h[3];
    IN(var), IN(sl[0]), IN(sl[1]);
    if (h[4] != 0.0f) IN(sl[2]);
    IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), GRAD();
    if (h[4] != 0.0f)
      dense = loom__k_apply_centered_rmsprop_f32, sparse = loom__k_sparse_apply_centered_rmsprop_f32;
    else
      dense = loom__k_apply_rmsprop_f32, sparse = loom__k_sparse_apply_rmsprop_f32;
    break;
  case LOOM_PS_ADADELTA: /* var, accum, accum_update, lr, rho, epsilon, grad[, indices] */
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2];
    IN(var), IN(sl[0]), IN(sl[1]), IN(bs[0]), IN(bs[1]), IN(bs[2]), GRAD();
    dense = loom__k_apply_adadelta_f32, sparse = loom__k_sparse_apply_adadelta_f32;
    break;
  default: return loom_status_set(st, LOOM_INVALID_ARGUMENT, "optimizer %d", (int)v->opt);
  }
#undef IN
#undef GRAD
  k.in = in;
  k.nin = m;
  return ids ? sparse(&k) : dense(&k);
}

#define APPLY_PIECE ((int64_t)1 << 16) /* floats per dense piece: 256 KiB, in cache for the CRC that follows */

/* Applies a dense (ids NULL) or sparse gradient with the local kernels, in
 * the kernels' (TF's) input orders; copy-on-write first when a reply still
 * sends the value. crc (dense; may be NULL): extended over the new value
 * piece by piece, right after each piece is updated (one pass less over
 * memory than checksumming the reply afterwards). */
loom_code loom__pss_var_cow(loom_ps_server *s, psvar *v, loom_status *st) {
  if (__atomic_load_n(&v->vb->refs, __ATOMIC_ACQUIRE) > 1) { /* a reply is still sending this value: copy on write */
    vbuf *nb = loom__pss_vbuf_new(v->numel);
    if (!nb) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for a copy of %lld floats", (long long)v->numel);
    memcpy(nb->data, v->vb->data, (size_t)v->numel * sizeof(float));
    loom__pss_vbuf_release(v->vb);
    v->vb = nb;
    v->val = nb->data;
    STAT_ADD(s, value_copies, 1);
  }
  return LOOM_OK;
}

/* The end of one applied step (a whole push): TF's _finish advances Adam's beta powers once, and the version. */
void loom__pss_var_step_done(psvar *v) {
  if (v->opt == LOOM_PS_ADAM) {
    v->b1p = v->b1p * v->hyper[1];
    v->b2p = v->b2p * v->hyper[2];
  }
  v->version++;
  v->step++;
}

/* A dense gradient of elements [begin, begin + count) (grad[0] is element begin), in APPLY_PIECE pieces;
 * crc (may be NULL) extended over each updated piece. A whole push and a part (ps_parts.h) share it. */
loom_code loom__pss_var_apply_range(psvar *v, const float *grad, int64_t begin, int64_t count, uint32_t *crc,
                                    loom_status *st) {
  loom_code rc = LOOM_OK;
  for (int64_t o = 0; o < count && !rc; o += APPLY_PIECE) {
    int64_t cnt = count - o < APPLY_PIECE ? count - o : APPLY_PIECE;
    rc = kernel_apply(v, grad + o, NULL, 0, begin + o, cnt, st);
    if (!rc && crc) *crc = loom__crc32c_extend(*crc, v->val + begin + o, (size_t)cnt * 4);
  }
  return rc;
}

loom_code loom__pss_var_apply_crc(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                                  uint32_t *crc, loom_status *st) {
  loom_code rc = loom__pss_var_cow(s, v, st);
  if (rc) return rc;
  if (ids) {
    rc = kernel_apply(v, grad, ids, n, 0, v->numel, st);
  } else {
    rc = loom__pss_var_apply_range(v, grad, 0, v->numel, crc, st);
    if (!rc && v->numel == 0) rc = kernel_apply(v, grad, NULL, 0, 0, 0, st);
  }
  if (rc == LOOM_OK) loom__pss_var_step_done(v);
  return rc;
}

loom_code loom__pss_var_apply(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                              loom_status *st) {
  return loom__pss_var_apply_crc(s, v, grad, ids, n, NULL, st);
}
