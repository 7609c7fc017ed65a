/* CPU kernels of the decode family (ops/decode.c): tf.io.decode_raw,
 * tf.io.decode_csv, tf.strings.to_number. Attribute use is listed in
 * ops/decode.c. */
#ifndef LOOM_KERNELS_CPU_DECODE_H
#define LOOM_KERNELS_CPU_DECODE_H
#include "kernels/kernel.h"

/* bytes string [...] -> [..., n] of attrs.dtype; keepdims = little_endian */
loom_code loom__k_decode_raw(const loom_kctx *ctx);
/* (records string [...], na_value string [], select i64 [k], defaults...) -> one [...] per default */
loom_code loom__k_decode_csv(const loom_kctx *ctx);
/* DecodeCSV's workspace: attrs.num + 1 fields */
size_t loom__ws_decode_csv(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                           const loom_buf *const *out);
/* string [...] -> attrs.dtype [...] */
loom_code loom__k_string_to_number(const loom_kctx *ctx);
/* Element size of a DecodeRaw out_type (0: not one). */
int loom__decode_raw_size(loom_dtype dt);

#endif
