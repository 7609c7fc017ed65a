/* CPU kernels of the feature family (ops/feature.c): hashing, bucketizing,
 * vocabulary lookup, id checks, hashed crosses. Attribute use is listed in
 * ops/feature.c. */
#ifndef LOOM_KERNELS_CPU_FEATURE_H
#define LOOM_KERNELS_CPU_FEATURE_H
#include "kernels/kernel.h"

loom_code loom__k_bucketize_f32(const loom_kctx *ctx);
loom_code loom__k_bucketize_f64(const loom_kctx *ctx);
loom_code loom__k_bucketize_i32(const loom_kctx *ctx);
loom_code loom__k_bucketize_i64(const loom_kctx *ctx);
/* int32/int64 -> decimal text in ctx->strings (host pass only) */
loom_code loom__k_as_string_int(const loom_kctx *ctx);
/* string/int32/int64 -> Fingerprint64(text) % attrs.seed */
loom_code loom__k_hash_bucket_fast(const loom_kctx *ctx);
/* (x, keys, index) -> ids; x string/int32/int64 */
loom_code loom__k_vocab_lookup(const loom_kctx *ctx);
loom_code loom__k_check_ids(const loom_kctx *ctx);
/* (values_0, splits_0, ..., values_k-1, splits_k-1) -> (values, splits) */
loom_code loom__k_cross_hashed(const loom_kctx *ctx);
size_t loom__ws_cross_hashed(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                             const loom_buf *const *out);

/* Slot in a vocabulary index (open addressing, linear probing, `cap` a
 * power of two, entries = key positions or -1) where probing for hash h
 * starts. Shared with the builder that makes the index (ops/feature.c). */
static inline uint64_t loom__vocab_slot(uint64_t h, int64_t cap) { return h & (uint64_t)(cap - 1); }
/* The index hash of an int64 key: Fingerprint64 of its 8 little-endian bytes. */
uint64_t loom__vocab_hash_int(int64_t v);

#endif
