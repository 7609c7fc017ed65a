/* kernels/cpu/parse_example.c - LoomParseExample on the host: each row of
 * the serialized batch is decoded by the shared tf.Example decoder
 * (base/tf_example.c, the one the TFRecord dataset uses) and its features
 * are copied out by the spec table (see parse_example.h). Missing FixedLen
 * features take their default or fail naming the feature and the row; a
 * list of the wrong kind or length fails likewise; bytes that are not a
 * tf.Example fail naming the row. Strings are copied into the run's string
 * arena (defaults point at their constant). */
#include <stdio.h>
#include <string.h>
#include "kernels/cpu/parse_example.h"
#include "base/base.h"
#include "base/tf_example.h"

static void dims_text(char *b, size_t cap, const int64_t *d, int nd) {
  size_t k = (size_t)snprintf(b, cap, "[");
  for (int i = 0; i < nd && k < cap; i++) k += (size_t)snprintf(b + k, cap - k, i ? ", %lld" : "%lld", (long long)d[i]);
  if (k < cap) snprintf(b + k, cap - k, "]");
}

static loom_code copy_strings(loom_tstring *o, const loom_exbytes *b, size_t n, loom_strarena *sa, char *msg,
                              size_t msglen) {
  size_t total = 0;
  for (size_t j = 0; j < n; j++) total += b[j].len;
  char *p = loom__strarena_alloc(sa, total);
  if (!p) {
    snprintf(msg, msglen, "out of memory for %zu bytes of strings", total);
    return LOOM_RESOURCE_EXHAUSTED;
  }
  for (size_t j = 0; j < n; j++) {
    if (b[j].len) memcpy(p, b[j].data, b[j].len);
    o[j].ptr = p;
    o[j].len = b[j].len;
    p += b[j].len;
  }
  return LOOM_OK;
}

loom_code loom__parse_example_run(int nin, const loom_buf *const *in, loom_buf *const *out, int64_t *nnz,
                                  loom_strarena *strings, char *msg, size_t msglen) {
  const loom_buf *S = in[0], *K = in[1], *D = in[2];
  const loom_tstring *ser = S->data, *keys = K->data;
  const int64_t *desc = D->data;
  const int nspec = (int)K->numel;
  const int64_t B = S->numel;
  if (out && !strings) {
    snprintf(msg, msglen, "ParseExample needs a string arena (it runs only in a session)");
    return LOOM_FAILED_PRECONDITION;
  }
  /* per-spec: output slot, default input, element count */
  int slot[64], defin[64];
  int64_t numel[64];
  if (nspec > 64) {
    snprintf(msg, msglen, "at most 64 features, got %d", nspec);
    return LOOM_INVALID_ARGUMENT;
  }
  for (int s = 0, o = 0, d = 3; s < nspec; s++) {
    const int64_t *r = desc + (size_t)s * LOOM_PE_W;
    slot[s] = o;
    o += r[LOOM_PE_KIND] == LOOM_PE_VARLEN ? 2 : 1;
    defin[s] = r[LOOM_PE_HASDEF] ? d++ : -1;
    if (defin[s] >= nin) {
      snprintf(msg, msglen, "feature %d has a default but the node has %d inputs", s, nin);
      return LOOM_INVALID_ARGUMENT;
    }
    numel[s] = 1;
    for (int k = 0; k < (int)r[LOOM_PE_NDIM]; k++) numel[s] *= r[LOOM_PE_DIMS + k];
    if (nnz) nnz[s] = 0;
    if (out && r[LOOM_PE_KIND] == LOOM_PE_VARLEN) ((int64_t *)out[o - 1]->data)[0] = 0;
  }
  loom_code rc = LOOM_OK;
  for (int64_t b = 0; b < B && !rc; b++) {
    int oom = 0;
    loom_example *ex = loom__tfex_unpack((const uint8_t *)ser[b].ptr, ser[b].len, &oom);
    if (!ex) {
      if (oom) {
        snprintf(msg, msglen, "serialized example %lld: out of memory decoding %zu bytes", (long long)b, ser[b].len);
        return LOOM_RESOURCE_EXHAUSTED;
      }
      snprintf(msg, msglen, "serialized example %lld is not a valid tf.Example (protobuf parse failed, %zu bytes)",
               (long long)b, ser[b].len);
      return LOOM_INVALID_ARGUMENT;
    }
    for (int s = 0; s < nspec && !rc; s++) {
      const int64_t *r = desc + (size_t)s * LOOM_PE_W;
      loom_dtype dt = (loom_dtype)r[LOOM_PE_DTYPE];
      const char *key = keys[s].ptr ? keys[s].ptr : "";
      int klen = (int)(keys[s].len > 200 ? 200 : keys[s].len);
      loom_exlist f;
      int found = loom__tfex_find_n(ex, key, keys[s].len, &f);
      if (found && f.kind != loom__tfex_dtype_kind(dt)) {
        snprintf(msg, msglen, "serialized example %lld: feature '%.*s' is a %s, the spec wants %s (%s)",
                 (long long)b, klen, key, loom__tfex_kind_name(f.kind), loom__tfex_kind_name(loom__tfex_dtype_kind(dt)),
                 loom_dtype_name(dt));
        rc = LOOM_INVALID_ARGUMENT;
        break;
      }
      size_t es = dt == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(dt);
      if (r[LOOM_PE_KIND] == LOOM_PE_VARLEN) {
        int64_t n = found ? (int64_t)f.n : 0;
        if (!out) {
          nnz[s] += n;
          continue;
        }
        int64_t *sp = out[slot[s] + 1]->data;
        int64_t at = sp[b];
        sp[b + 1] = at + n;
        if (!n) continue;
        if (at + n > out[slot[s]]->numel) {
          snprintf(msg, msglen, "feature '%.*s': the batch holds more values than counted", klen, key);
          rc = LOOM_INTERNAL;
          break;
        }
        char *dst = (char *)out[slot[s]]->data + (size_t)at * es;
        if (dt == LOOM_F32) memcpy(dst, f.f, (size_t)n * es);
        else if (dt == LOOM_I64) memcpy(dst, f.i, (size_t)n * es);
        else rc = copy_strings((loom_tstring *)dst, f.b, f.n, strings, msg, msglen);
        continue;
      }
      /* FixedLen */
      if (!found) {
        if (defin[s] < 0) {
          snprintf(msg, msglen,
                   "serialized example %lld: feature '%.*s' is required but missing (FixedLenFeature without a "
                   "default)",
                   (long long)b, klen, key);
          rc = LOOM_INVALID_ARGUMENT;
          break;
        }
        if (out && numel[s])
          memcpy((char *)out[slot[s]]->data + (size_t)(b * numel[s]) * es, in[defin[s]]->data, (size_t)numel[s] * es);
        continue;
      }
      if ((int64_t)f.n != numel[s]) {
        char db[128];
        dims_text(db, sizeof db, r + LOOM_PE_DIMS, (int)r[LOOM_PE_NDIM]);
        snprintf(msg, msglen, "serialized example %lld: feature '%.*s' has %zu values, its shape %s needs %lld",
                 (long long)b, klen, key, f.n, db, (long long)numel[s]);
        rc = LOOM_INVALID_ARGUMENT;
        break;
      }
      if (!out || !numel[s]) continue;
      char *dst = (char *)out[slot[s]]->data + (size_t)(b * numel[s]) * es;
      if (dt == LOOM_F32) memcpy(dst, f.f, (size_t)numel[s] * es);
      else if (dt == LOOM_I64) memcpy(dst, f.i, (size_t)numel[s] * es);
      else rc = copy_strings((loom_tstring *)dst, f.b, f.n, strings, msg, msglen);
    }
    loom__tfex_free(ex);
  }
  return rc;
}

loom_code loom__k_parse_example(const loom_kctx *ctx) {
  char msg[512] = "";
  loom_code rc = loom__parse_example_run(ctx->nin, (const loom_buf *const *)ctx->in, ctx->out, NULL, ctx->strings, msg,
                                         sizeof msg);
  return rc ? loom_status_set(ctx->st, rc, "%s", msg) : LOOM_OK;
}
