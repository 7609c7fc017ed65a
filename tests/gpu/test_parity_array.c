/* tests/gpu/test_parity_array.c - GPU vs CPU parity of the layout ops
 * (kernels/cuda/array.cu): BroadcastTo/Like, Transpose, Slice, Tile, Pad,
 * Concat, Pack, Split, SplitV, Unpack, Fill, Range, OneHot, Shape, over every
 * data dtype (f32, f64, i32, i64, u8, bool), with gradients where the op is
 * differentiable. Layout ops are exact: tolerance 0. Multi-output ops, more
 * than 16 pieces (several launches), rank > 4, attribute variants (Pad value
 * saturation, OneHot on/off conversion, negative indices) are hand-written
 * cases. A log hook fails the run if any of these ops falls back to the CPU
 * in the CUDA session. Harness: tests/gpu/parity.h; skips without a device. */
#include "tests/gpu/parity.h"


/* ---- fallback watch: our ops must run on the device ---- */
static const char *const k_ops[] = {"BroadcastTo", "BroadcastLike", "Transpose", "ConcatV2", "Split", "SplitV",
                                    "Slice", "Pack", "Unpack", "Tile", "PadV2", "Fill", "Range", "OneHot", "Shape"};
static int g_fallbacks;
static void log_hook(loom_log_level level, const char *msg, void *user) {
  (void)level;
  (void)user;
  if (!strstr(msg, "runs on the CPU")) return;
  for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++) {
    char pat[64];
    snprintf(pat, sizeof pat, "op %s has", k_ops[i]);
    if (strstr(msg, pat)) {
      printf("FAIL fallback: %s\n", msg);
      g_fallbacks++;
      return;
    }
  }
}

/* ---- single-output cases (the parity.h table) ---- */
static loom_output b_bcast_row(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {1200, 65};
  return loom_broadcast_to(g, i[0], 2, d, NULL);
}
static loom_output b_bcast_mid(loom_graph *g, const loom_output *i) {
  int64_t d[4] = {2, 40, 70, 3};
  return loom_broadcast_to(g, i[0], 4, d, NULL);
}
static loom_output b_bcast_scalar(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {5, 7};
  return loom_broadcast_to(g, i[0], 2, d, NULL);
}
static loom_output b_bcast_u8(loom_graph *g, const loom_output *i) {
  int64_t d[3] = {4, 17, 33};
  return loom_broadcast_to(g, i[0], 3, d, NULL);
}
static loom_output b_bcast_same(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {9, 11};
  return loom_broadcast_to(g, i[0], 2, d, NULL);
}
static loom_output b_bcast_empty(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {0, 3};
  return loom_broadcast_to(g, i[0], 2, d, NULL);
}
static loom_output b_bcast_like(loom_graph *g, const loom_output *i) { return loom_broadcast_like(g, i[0], i[1], NULL); }

static loom_output b_transpose(loom_graph *g, const loom_output *i) { return loom_transpose(g, i[0], 0, NULL, NULL); }
static loom_output b_tr_021(loom_graph *g, const loom_output *i) {
  int64_t p[3] = {0, 2, 1};
  return loom_transpose(g, i[0], 3, p, NULL);
}
static loom_output b_tr_210(loom_graph *g, const loom_output *i) {
  int64_t p[3] = {2, 1, 0};
  return loom_transpose(g, i[0], 3, p, NULL);
}
static loom_output b_tr_102(loom_graph *g, const loom_output *i) {
  int64_t p[3] = {1, 0, 2};
  return loom_transpose(g, i[0], 3, p, NULL);
}
static loom_output b_tr_120(loom_graph *g, const loom_output *i) {
  int64_t p[3] = {1, 2, 0};
  return loom_transpose(g, i[0], 3, p, NULL);
}
static loom_output b_tr_0213(loom_graph *g, const loom_output *i) {
  int64_t p[4] = {0, 2, 1, 3};
  return loom_transpose(g, i[0], 4, p, NULL);
}
static loom_output b_tr_3021(loom_graph *g, const loom_output *i) {
  int64_t p[4] = {3, 0, 2, 1};
  return loom_transpose(g, i[0], 4, p, NULL);
}
static loom_output b_tr_1302(loom_graph *g, const loom_output *i) {
  int64_t p[4] = {1, 3, 0, 2};
  return loom_transpose(g, i[0], 4, p, NULL);
}

static loom_output b_slice(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {3, 5}, s[2] = {40, 30};
  return loom_slice(g, i[0], b, s, NULL);
}
static loom_output b_slice_to_end(loom_graph *g, const loom_output *i) {
  int64_t b[3] = {1, 0, 2}, s[3] = {-1, 3, -1};
  return loom_slice(g, i[0], b, s, NULL);
}
static loom_output b_slice_big(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {7, 13}, s[2] = {280, 270};
  return loom_slice(g, i[0], b, s, NULL);
}
static loom_output b_slice_rows(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {2, 0}, s[2] = {5, -1};
  return loom_slice(g, i[0], b, s, NULL);
}
static loom_output b_slice_empty(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {2, 1}, s[2] = {0, 3};
  return loom_slice(g, i[0], b, s, NULL);
}
static loom_output b_slice_inner4(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {1, 4}, s[2] = {6, 8};
  return loom_slice(g, i[0], b, s, NULL);
}

static loom_output b_tile(loom_graph *g, const loom_output *i) {
  int64_t m[2] = {2, 3};
  return loom_tile(g, i[0], m, NULL);
}
static loom_output b_tile_big(loom_graph *g, const loom_output *i) {
  int64_t m[2] = {300, 40};
  return loom_tile(g, i[0], m, NULL);
}
static loom_output b_tile_zero(loom_graph *g, const loom_output *i) {
  int64_t m[2] = {0, 2};
  return loom_tile(g, i[0], m, NULL);
}
static loom_output b_tile3(loom_graph *g, const loom_output *i) {
  int64_t m[3] = {2, 1, 4};
  return loom_tile(g, i[0], m, NULL);
}
static loom_output b_tile_ones(loom_graph *g, const loom_output *i) {
  int64_t m[2] = {1, 1};
  return loom_tile(g, i[0], m, NULL);
}

static loom_output b_pad(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {1, 2}, a[2] = {3, 4};
  return loom_pad(g, i[0], b, a, 0, NULL);
}
static loom_output b_pad_hw(loom_graph *g, const loom_output *i) {
  int64_t b[4] = {0, 1, 2, 0}, a[4] = {0, 2, 1, 0};
  return loom_pad(g, i[0], b, a, 1.5, NULL);
}
static loom_output b_pad_neg7(loom_graph *g, const loom_output *i) {
  int64_t b[3] = {2, 0, 1}, a[3] = {0, 3, 1};
  return loom_pad(g, i[0], b, a, -7, NULL);
}
static loom_output b_pad_sat(loom_graph *g, const loom_output *i) { /* 300 -> 255 (u8), 1 (bool), INT32_MAX... */
  int64_t b[2] = {1, 1}, a[2] = {1, 1};
  return loom_pad(g, i[0], b, a, 300.7, NULL);
}
static loom_output b_pad_huge(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {1, 0}, a[2] = {0, 2};
  return loom_pad(g, i[0], b, a, 1e20, NULL);
}
static loom_output b_pad_negfrac(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {0, 3}, a[2] = {2, 0};
  return loom_pad(g, i[0], b, a, -3.7, NULL);
}
static loom_output b_pad_big(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {11, 8}, a[2] = {9, 12};
  return loom_pad(g, i[0], b, a, 2, NULL);
}
static loom_output b_pad_none(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {0, 0}, a[2] = {0, 0};
  return loom_pad(g, i[0], b, a, 5, NULL);
}
static loom_output b_pad_from_empty(loom_graph *g, const loom_output *i) {
  int64_t b[2] = {2, 0}, a[2] = {1, 0};
  return loom_pad(g, i[0], b, a, 4.25, NULL);
}
static loom_output b_pad_inner(loom_graph *g, const loom_output *i) { /* widened: 4-aligned inner pads */
  int64_t b[2] = {1, 4}, a[2] = {2, 8};
  return loom_pad(g, i[0], b, a, -1, NULL);
}

static loom_output b_concat0(loom_graph *g, const loom_output *i) { return loom_concat(g, 2, i, 0, NULL); }
static loom_output b_concat1(loom_graph *g, const loom_output *i) { return loom_concat(g, 3, i, 1, NULL); }
static loom_output b_concat_last(loom_graph *g, const loom_output *i) { return loom_concat(g, 2, i, -1, NULL); }
static loom_output b_concat_mid(loom_graph *g, const loom_output *i) { return loom_concat(g, 3, i, 1, NULL); }
static loom_output b_pack0(loom_graph *g, const loom_output *i) { return loom_stack(g, 3, i, 0, NULL); }
static loom_output b_pack1(loom_graph *g, const loom_output *i) { return loom_stack(g, 3, i, 1, NULL); }
static loom_output b_pack_last(loom_graph *g, const loom_output *i) { return loom_stack(g, 2, i, -1, NULL); }
static loom_output b_pack_scalars(loom_graph *g, const loom_output *i) { return loom_stack(g, 3, i, 0, NULL); }

static loom_output b_fill(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {300, 250};
  return loom_fill(g, 2, d, i[0], NULL);
}
static loom_output b_fill_small(loom_graph *g, const loom_output *i) {
  int64_t d[3] = {3, 1, 5};
  return loom_fill(g, 3, d, i[0], NULL);
}
static loom_output b_fill_empty(loom_graph *g, const loom_output *i) {
  int64_t d[2] = {4, 0};
  return loom_fill(g, 2, d, i[0], NULL);
}
static loom_output b_fill_scalar(loom_graph *g, const loom_output *i) { return loom_fill(g, 0, NULL, i[0], NULL); }

static loom_output b_range_f32(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, 0, 10, 0.1, F32, NULL);
}
static loom_output b_range_f32_big(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, -1.3, 8000, 0.1, F32, NULL);
}
static loom_output b_range_f64(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, -3, 7.5, 0.3, F64, NULL);
}
static loom_output b_range_i32(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, 5, -100, -3, I32, NULL);
}
static loom_output b_range_i64(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, -7, 100000, 1, I64, NULL);
}
static loom_output b_range_empty(loom_graph *g, const loom_output *i) {
  (void)i;
  return loom_range(g, 4, 4, 1, I32, NULL);
}

static loom_output b_onehot(loom_graph *g, const loom_output *i) { return loom_one_hot(g, i[0], 10, 1, 0, -1, F32, NULL); }
static loom_output b_onehot_ax0(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 5, 3, -1, 0, I32, NULL);
}
static loom_output b_onehot_ax1(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 7, 0.25, -2.5, 1, F64, NULL);
}
static loom_output b_onehot_u8out(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 6, 300, -4, -1, U8, NULL);
}
static loom_output b_onehot_bool(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 4, 1, 0, -1, BOOL, NULL);
}
static loom_output b_onehot_i64(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 9, -1e30, 7, 2, I64, NULL);
}
static loom_output b_onehot_depth0(loom_graph *g, const loom_output *i) {
  return loom_one_hot(g, i[0], 0, 1, 0, -1, F32, NULL);
}

static loom_output b_shape_i32(loom_graph *g, const loom_output *i) { return loom_shape(g, i[0], I32, NULL); }
static loom_output b_shape_i64(loom_graph *g, const loom_output *i) { return loom_shape(g, i[0], I64, NULL); }

/* through views and into arithmetic: the CUDA session mixes views and kernels */
static loom_output b_chain(loom_graph *g, const loom_output *i) {
  int64_t p[3] = {2, 0, 1}, b[3] = {1, 0, 1}, a[3] = {0, 2, 1};
  loom_output t = loom_transpose(g, loom_expand_dims(g, i[0], 0, NULL), 3, p, NULL);
  t = loom_pad(g, t, b, a, 0.5, NULL);
  loom_output parts[2] = {t, loom_mul(g, t, t, NULL)};
  return loom_concat(g, 2, parts, 1, NULL);
}

static const pcase cases[] = {
    /* broadcast */
    {"broadcast_to row f32", 1, {F32}, {1}, {{65}}, {0}, b_bcast_row, 0, 1},
    {"broadcast_to middle i64", 1, {I64}, {3}, {{40, 1, 3}}, {1000}, b_bcast_mid, 0, 0},
    {"broadcast_to middle f64", 1, {F64}, {3}, {{40, 1, 3}}, {0}, b_bcast_mid, 0, 1},
    {"broadcast_to scalar f64", 1, {F64}, {0}, {{0}}, {0}, b_bcast_scalar, 0, 1},
    {"broadcast_to u8", 1, {U8}, {2}, {{1, 33}}, {0}, b_bcast_u8, 0, 0},
    {"broadcast_to bool", 1, {BOOL}, {3}, {{4, 1, 1}}, {0}, b_bcast_u8, 0, 0},
    {"broadcast_to same shape", 1, {I32}, {2}, {{9, 11}}, {50}, b_bcast_same, 0, 0},
    {"broadcast_to zero-size", 1, {F32}, {2}, {{1, 3}}, {0}, b_bcast_empty, 0, 1},
    {"broadcast_like f32", 2, {F32, F32}, {2, 3}, {{7, 1}, {3, 7, 9}}, {0}, b_bcast_like, 0, 1},
    {"broadcast_like i32 big", 2, {I32, U8}, {1, 3}, {{333}, {250, 1, 333}}, {1 << 30, 0}, b_bcast_like, 0, 0},
    /* transpose */
    {"transpose 2-D f32 (tiled)", 1, {F32}, {2}, {{300, 257}}, {0}, b_transpose, 0, 1},
    {"transpose 2-D f64 ragged", 1, {F64}, {2}, {{33, 47}}, {0}, b_transpose, 0, 1},
    {"transpose 2-D u8", 1, {U8}, {2}, {{70, 90}}, {0}, b_transpose, 0, 0},
    {"transpose 2-D i64 thin", 1, {I64}, {2}, {{3, 1000}}, {1 << 30}, b_transpose, 0, 0},
    {"transpose 2-D bool thin", 1, {BOOL}, {2}, {{1000, 5}}, {0}, b_transpose, 0, 0},
    {"transpose 0,2,1 f64", 1, {F64}, {3}, {{5, 70, 33}}, {0}, b_tr_021, 0, 1},
    {"transpose 2,1,0 i32", 1, {I32}, {3}, {{40, 3, 50}}, {1 << 30}, b_tr_210, 0, 0},
    {"transpose 1,0,2 u8", 1, {U8}, {3}, {{30, 20, 7}}, {0}, b_tr_102, 0, 0},
    {"transpose 1,2,0 f32", 1, {F32}, {3}, {{20, 4, 17}}, {0}, b_tr_120, 0, 1},
    {"transpose 0,2,1,3 f32 (widened)", 1, {F32}, {4}, {{2, 3, 4, 8}}, {0}, b_tr_0213, 0, 1},
    {"transpose 3,0,2,1 i64", 1, {I64}, {4}, {{4, 5, 6, 7}}, {1 << 30}, b_tr_3021, 0, 0},
    {"transpose 1,3,0,2 f32 big", 1, {F32}, {4}, {{20, 30, 8, 17}}, {0}, b_tr_1302, 0, 1},
    {"transpose scalar", 1, {F32}, {0}, {{0}}, {0}, b_transpose, 0, 1},
    {"transpose zero-size", 1, {F32}, {2}, {{0, 5}}, {0}, b_transpose, 0, 1},
    /* slice */
    {"slice f32", 1, {F32}, {2}, {{50, 40}}, {0}, b_slice, 0, 1},
    {"slice to end f64", 1, {F64}, {3}, {{4, 5, 6}}, {0}, b_slice_to_end, 0, 1},
    {"slice to end u8", 1, {U8}, {3}, {{4, 5, 6}}, {0}, b_slice_to_end, 0, 0},
    {"slice big i32", 1, {I32}, {2}, {{300, 300}}, {1 << 30}, b_slice_big, 0, 0},
    {"slice rows bool", 1, {BOOL}, {2}, {{9, 13}}, {0}, b_slice_rows, 0, 0},
    {"slice zero-size", 1, {F32}, {2}, {{5, 6}}, {0}, b_slice_empty, 0, 1},
    {"slice inner 8 of 16 f32", 1, {F32}, {2}, {{8, 16}}, {0}, b_slice_inner4, 0, 1},
    {"slice inner 8 of 16 u8", 1, {U8}, {2}, {{8, 16}}, {0}, b_slice_inner4, 0, 0},
    /* tile */
    {"tile f32", 1, {F32}, {2}, {{3, 5}}, {0}, b_tile, 0, 1},
    {"tile big i32", 1, {I32}, {2}, {{1, 7}}, {1 << 30}, b_tile_big, 0, 0},
    {"tile zero multiple", 1, {F32}, {2}, {{3, 5}}, {0}, b_tile_zero, 0, 1},
    {"tile rank 3 f64", 1, {F64}, {3}, {{5, 3, 2}}, {0}, b_tile3, 0, 1},
    {"tile rank 3 u8", 1, {U8}, {3}, {{5, 3, 2}}, {0}, b_tile3, 0, 0},
    {"tile ones i64", 1, {I64}, {2}, {{6, 7}}, {1 << 30}, b_tile_ones, 0, 0},
    /* pad */
    {"pad f32", 1, {F32}, {2}, {{20, 30}}, {0}, b_pad, 0, 1},
    {"pad NHWC f32 1.5", 1, {F32}, {4}, {{2, 9, 9, 4}}, {0}, b_pad_hw, 0, 1},
    {"pad NHWC f64 1.5", 1, {F64}, {4}, {{2, 5, 7, 3}}, {0}, b_pad_hw, 0, 1},
    {"pad i32 -7", 1, {I32}, {3}, {{3, 4, 5}}, {100}, b_pad_neg7, 0, 0},
    {"pad u8 300.7 -> 255", 1, {U8}, {2}, {{6, 7}}, {0}, b_pad_sat, 0, 0},
    {"pad bool 300.7 -> 1", 1, {BOOL}, {2}, {{6, 7}}, {0}, b_pad_sat, 0, 0},
    {"pad i32 300.7 -> 300", 1, {I32}, {2}, {{6, 7}}, {100}, b_pad_sat, 0, 0},
    {"pad i32 1e20 saturates", 1, {I32}, {2}, {{4, 5}}, {100}, b_pad_huge, 0, 0},
    {"pad i64 1e20 saturates", 1, {I64}, {2}, {{4, 5}}, {100}, b_pad_huge, 0, 0},
    {"pad u8 1e20 saturates", 1, {U8}, {2}, {{4, 5}}, {0}, b_pad_huge, 0, 0},
    {"pad i64 -3.7 -> -3", 1, {I64}, {2}, {{4, 5}}, {100}, b_pad_negfrac, 0, 0},
    {"pad u8 -3.7 -> 0", 1, {U8}, {2}, {{4, 5}}, {0}, b_pad_negfrac, 0, 0},
    {"pad big f32", 1, {F32}, {2}, {{280, 260}}, {0}, b_pad_big, 0, 1},
    {"pad none i64", 1, {I64}, {2}, {{6, 7}}, {100}, b_pad_none, 0, 0},
    {"pad from empty f32", 1, {F32}, {2}, {{0, 3}}, {0}, b_pad_from_empty, 0, 1},
    {"pad from empty i32", 1, {I32}, {2}, {{0, 3}}, {10}, b_pad_from_empty, 0, 0},
    {"pad inner widened f32", 1, {F32}, {2}, {{5, 16}}, {0}, b_pad_inner, 0, 1},
    {"pad inner widened u8", 1, {U8}, {2}, {{5, 16}}, {0}, b_pad_inner, 0, 0},
    /* concat, pack */
    {"concat axis 0 f32", 2, {F32, F32}, {2, 2}, {{3, 5}, {4, 5}}, {0}, b_concat0, 0, 1},
    {"concat axis 1 f32", 3, {F32, F32, F32}, {2, 2, 2}, {{7, 3}, {7, 5}, {7, 1}}, {0}, b_concat1, 0, 1},
    {"concat axis -1 i64", 2, {I64, I64}, {2, 2}, {{9, 4}, {9, 6}}, {1 << 30, 1 << 30}, b_concat_last, 0, 0},
    {"concat middle f64", 3, {F64, F64, F64}, {3, 3, 3}, {{2, 3, 4}, {2, 1, 4}, {2, 5, 4}}, {0}, b_concat_mid, 0, 1},
    {"concat u8 widened", 3, {U8, U8, U8}, {2, 2, 2}, {{5, 16}, {5, 32}, {5, 16}}, {0}, b_concat1, 0, 0},
    {"concat bool", 3, {BOOL, BOOL, BOOL}, {2, 2, 2}, {{5, 3}, {5, 2}, {5, 7}}, {0}, b_concat1, 0, 0},
    {"concat zero-width piece", 3, {F32, F32, F32}, {2, 2, 2}, {{4, 3}, {4, 0}, {4, 2}}, {0}, b_concat1, 0, 1},
    {"concat big f32", 3, {F32, F32, F32}, {2, 2, 2}, {{300, 130}, {300, 120}, {300, 7}}, {0}, b_concat1, 0, 1},
    {"concat zero rows", 3, {I32, I32, I32}, {2, 2, 2}, {{0, 3}, {0, 2}, {0, 1}}, {5, 5, 5}, b_concat1, 0, 0},
    {"pack axis 0 f32", 3, {F32, F32, F32}, {2, 2, 2}, {{4, 5}, {4, 5}, {4, 5}}, {0}, b_pack0, 0, 1},
    {"pack axis 1 i32", 3, {I32, I32, I32}, {2, 2, 2}, {{4, 5}, {4, 5}, {4, 5}}, {99, 99, 99}, b_pack1, 0, 0},
    {"pack axis -1 f64", 2, {F64, F64}, {3, 3}, {{3, 4, 5}, {3, 4, 5}}, {0}, b_pack_last, 0, 1},
    {"pack scalars u8", 3, {U8, U8, U8}, {0, 0, 0}, {{0}, {0}, {0}}, {0}, b_pack_scalars, 0, 0},
    /* fill */
    {"fill f32 big", 1, {F32}, {0}, {{0}}, {0}, b_fill, 1e-6, 1}, /* gradient: a 75000-term sum */
    {"fill f64", 1, {F64}, {0}, {{0}}, {0}, b_fill_small, 0, 1},
    {"fill i64", 1, {I64}, {0}, {{0}}, {1 << 30}, b_fill_small, 0, 0},
    {"fill i32", 1, {I32}, {0}, {{0}}, {1 << 30}, b_fill_small, 0, 0},
    {"fill u8", 1, {U8}, {0}, {{0}}, {0}, b_fill_small, 0, 0},
    {"fill bool", 1, {BOOL}, {0}, {{0}}, {0}, b_fill_small, 0, 0},
    {"fill zero-size", 1, {F32}, {0}, {{0}}, {0}, b_fill_empty, 0, 1},
    {"fill scalar", 1, {F32}, {0}, {{0}}, {0}, b_fill_scalar, 0, 1},
    /* range */
    {"range f32", 0, {0}, {0}, {{0}}, {0}, b_range_f32, 0, 0},
    {"range f32 big", 0, {0}, {0}, {{0}}, {0}, b_range_f32_big, 0, 0},
    {"range f64", 0, {0}, {0}, {{0}}, {0}, b_range_f64, 0, 0},
    {"range i32 down", 0, {0}, {0}, {{0}}, {0}, b_range_i32, 0, 0},
    {"range i64 big", 0, {0}, {0}, {{0}}, {0}, b_range_i64, 0, 0},
    {"range empty", 0, {0}, {0}, {{0}}, {0}, b_range_empty, 0, 0},
    /* one-hot (indices in [0, int_hi): int_hi above depth gives all-off rows) */
    {"one_hot i32 -> f32", 1, {I32}, {1}, {{50}}, {12}, b_onehot, 0, 0},
    {"one_hot big i64 -> f32", 1, {I64}, {2}, {{800, 10}}, {11}, b_onehot, 0, 0},
    {"one_hot axis 0 i64 -> i32", 1, {I64}, {2}, {{6, 7}}, {6}, b_onehot_ax0, 0, 0},
    {"one_hot axis 1 u8 -> f64", 1, {U8}, {3}, {{3, 4, 5}}, {0}, b_onehot_ax1, 0, 0},
    {"one_hot i32 -> u8 saturates", 1, {I32}, {2}, {{5, 4}}, {7}, b_onehot_u8out, 0, 0},
    {"one_hot i32 -> bool", 1, {I32}, {1}, {{30}}, {5}, b_onehot_bool, 0, 0},
    {"one_hot axis 2 -> i64", 1, {I32}, {3}, {{2, 3, 4}}, {10}, b_onehot_i64, 0, 0},
    {"one_hot depth 0", 1, {I32}, {1}, {{5}}, {3}, b_onehot_depth0, 0, 0},
    {"one_hot zero-size", 1, {I64}, {2}, {{0, 4}}, {3}, b_onehot, 0, 0},
    /* shape */
    {"shape f32 -> i32", 1, {F32}, {3}, {{3, 4, 5}}, {0}, b_shape_i32, 0, 0},
    {"shape i64 -> i64", 1, {I64}, {2}, {{0, 7}}, {5}, b_shape_i64, 0, 0},
    {"shape bool 4-D -> i64", 1, {BOOL}, {4}, {{2, 1, 3, 9}}, {0}, b_shape_i64, 0, 0},
    {"shape scalar", 1, {F64}, {0}, {{0}}, {0}, b_shape_i32, 0, 0},
    /* mixed */
    {"expand/transpose/pad/concat chain", 1, {F32}, {2}, {{6, 5}}, {0}, b_chain, 1e-6, 1},
};

/* ---- multi-output and many-piece cases ---- */
#define MAXOUT 40
typedef int (*mbuild_fn)(loom_graph *g, const loom_output *in, loom_output *out); /* returns the output count */
typedef struct {
  const char *name;
  int nin;
  loom_dtype dt[MAXIN];
  int nd[MAXIN];
  int64_t dims[MAXIN][6];
  int64_t int_hi[MAXIN];
  mbuild_fn build;
  int grad;
} mcase;

static void run_mcase(const mcase *c) {
  loom_graph *g = loom_graph_new();
  loom_output in[MAXIN];
  loom_tensor *fv[MAXIN];
  for (int k = 0; k < c->nin; k++) {
    in[k] = loom_placeholder(g, c->dt[k], c->nd[k], c->dims[k], NULL);
    fv[k] = rand_tensor(c->dt[k], c->nd[k], c->dims[k], c->int_hi[k]);
  }
  loom_output fetch[MAXOUT + MAXIN];
  int ny = c->build(g, in, fetch), nx = ny;
  if (c->grad) parity_grads(g, fetch, ny, in, c->dt, c->nin, fetch, &nx, c->name); /* a weight per output */
  parity_run_compare(g, c->name, in, fv, c->nin, fetch, nx, ny, 0, 1e-6);
}

static int m_split3(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_split(g, i[0], 3, 1, o, NULL);
  return 3;
}
static int m_split_axis0(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_split(g, i[0], 4, 0, o, NULL);
  return 4;
}
static int m_split_neg(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_split(g, i[0], 2, -1, o, NULL);
  return 2;
}
static int m_split_big(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_split(g, i[0], 5, 1, o, NULL);
  return 5;
}
static int m_splitv(loom_graph *g, const loom_output *i, loom_output *o) {
  int64_t s[3] = {3, -1, 5};
  loom_split_v(g, i[0], 3, s, 0, o, NULL);
  return 3;
}
static int m_splitv_zero(loom_graph *g, const loom_output *i, loom_output *o) {
  int64_t s[4] = {2, 0, -1, 1};
  loom_split_v(g, i[0], 4, s, 1, o, NULL);
  return 4;
}
static int m_splitv_mid(loom_graph *g, const loom_output *i, loom_output *o) {
  int64_t s[3] = {1, 4, 2};
  loom_split_v(g, i[0], 3, s, 1, o, NULL);
  return 3;
}
static int m_unpack1(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_unstack(g, i[0], 5, 1, o, NULL);
  return 5;
}
static int m_unpack0(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_unstack(g, i[0], 3, 0, o, NULL);
  return 3;
}
static int m_unpack_last(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_unstack(g, i[0], 4, -1, o, NULL);
  return 4;
}
/* 20 and 37 pieces: Split and Concat in several launches */
static int m_split20_concat(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_output p[20], r[20];
  loom_split(g, i[0], 20, 1, p, NULL);
  for (int k = 0; k < 20; k++) r[k] = p[(k * 7) % 20];
  o[0] = loom_concat(g, 20, r, 1, NULL);
  o[1] = p[0];
  o[2] = p[17];
  o[3] = p[19];
  return 4;
}
static int m_splitv37_concat(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_output p[8], r[37], q[3];
  int64_t s[8] = {1, 0, 3, 2, 1, 1, -1, 2};
  loom_split_v(g, i[0], 8, s, 0, p, NULL);
  for (int k = 0; k < 37; k++) r[k] = p[(k * 5) % 8];
  o[0] = loom_concat(g, 37, r, 0, NULL);
  /* along axis 1 (3 rows): [3,3] pieces, [3,3] slices of a [4,3] piece, [3,0] empty ones */
  q[0] = p[2];
  q[1] = loom_slice(g, p[6], (int64_t[2]){1, 0}, (int64_t[2]){3, 3}, NULL);
  q[2] = loom_slice(g, p[2], (int64_t[2]){0, 1}, (int64_t[2]){3, 0}, NULL);
  for (int k = 0; k < 37; k++) r[k] = q[k % 3];
  o[1] = loom_concat(g, 37, r, 1, NULL);
  for (int k = 0; k < 8; k++) o[2 + k] = p[k];
  return 10;
}
static int m_stack20(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_output r[20];
  for (int k = 0; k < 20; k++) r[k] = i[k % 3];
  o[0] = loom_stack(g, 20, r, 1, NULL);
  o[1] = loom_stack(g, 20, r, 0, NULL);
  o[2] = loom_stack(g, 20, r, -1, NULL);
  return 3;
}
static int m_unstack33(loom_graph *g, const loom_output *i, loom_output *o) {
  loom_unstack(g, i[0], 33, 1, o, NULL);
  return 33;
}
/* rank 5 and 6 (beyond the table's rank 4) */
static int m_rank6(loom_graph *g, const loom_output *i, loom_output *o) {
  int64_t p[6] = {5, 3, 1, 0, 4, 2}, b[6] = {0, 1, 0, 1, 0, 2}, sz[6] = {-1, 2, -1, 2, -1, 3}, m[6] = {1, 2, 1, 3, 1, 2};
  int64_t pb[6] = {1, 0, 0, 1, 0, 2}, pa[6] = {0, 1, 0, 0, 2, 1};
  o[0] = loom_transpose(g, i[0], 6, p, NULL);
  o[1] = loom_slice(g, i[0], b, sz, NULL);
  o[2] = loom_tile(g, i[0], m, NULL);
  o[3] = loom_pad(g, i[0], pb, pa, -0.5, NULL);
  int64_t bd[6] = {2, 3, 1, 4, 2, 5};
  o[4] = loom_broadcast_to(g, loom_slice(g, i[0], (int64_t[6]){0, 0, 0, 0, 0, 0}, (int64_t[6]){2, 3, 1, 4, 1, 5}, NULL),
                           6, bd, NULL);
  o[5] = loom_shape(g, i[0], I64, NULL);
  return 6;
}
static int m_tiled_batched(loom_graph *g, const loom_output *i, loom_output *o) {
  int64_t p[5] = {4, 1, 2, 3, 0}, q[5] = {0, 3, 2, 1, 4};
  o[0] = loom_transpose(g, i[0], 5, p, NULL);
  o[1] = loom_transpose(g, i[0], 5, q, NULL);
  return 2;
}

static const mcase mcases[] = {
    {"split 3 axis 1 f32", 1, {F32}, {2}, {{4, 9}}, {0}, m_split3, 1},
    {"split 4 axis 0 i64", 1, {I64}, {2}, {{8, 3}}, {1 << 30}, m_split_axis0, 0},
    {"split 2 axis -1 u8", 1, {U8}, {3}, {{3, 4, 32}}, {0}, m_split_neg, 0},
    {"split 5 big f32", 1, {F32}, {2}, {{300, 250}}, {0}, m_split_big, 1},
    {"splitv axis 0 f32", 1, {F32}, {2}, {{20, 7}}, {0}, m_splitv, 1},
    {"splitv zero piece f64", 1, {F64}, {2}, {{6, 8}}, {0}, m_splitv_zero, 1},
    {"splitv middle bool", 1, {BOOL}, {3}, {{2, 7, 5}}, {0}, m_splitv_mid, 0},
    {"splitv middle i32", 1, {I32}, {3}, {{2, 7, 5}}, {1000}, m_splitv_mid, 0},
    {"unpack axis 1 f32", 1, {F32}, {3}, {{4, 5, 6}}, {0}, m_unpack1, 1},
    {"unpack axis 0 u8", 1, {U8}, {2}, {{3, 10}}, {0}, m_unpack0, 0},
    {"unpack axis -1 f64", 1, {F64}, {3}, {{3, 2, 4}}, {0}, m_unpack_last, 1},
    {"split 20 + concat 20 f32", 1, {F32}, {2}, {{6, 40}}, {0}, m_split20_concat, 1},
    {"splitv 8 + concat 37 f32", 1, {F32}, {2}, {{14, 3}}, {0}, m_splitv37_concat, 1},
    {"splitv 8 + concat 37 i32", 1, {I32}, {2}, {{14, 3}}, {1000}, m_splitv37_concat, 0},
    {"stack 20 f32", 3, {F32, F32, F32}, {2, 2, 2}, {{3, 4}, {3, 4}, {3, 4}}, {0}, m_stack20, 1},
    {"unstack 33 f64", 1, {F64}, {3}, {{2, 33, 3}}, {0}, m_unstack33, 1},
    {"unstack 33 i64", 1, {I64}, {3}, {{2, 33, 3}}, {99}, m_unstack33, 0},
    {"rank 6 f32", 1, {F32}, {6}, {{2, 3, 1, 4, 2, 5}}, {0}, m_rank6, 1},
    {"rank 6 u8", 1, {U8}, {6}, {{2, 3, 1, 4, 2, 5}}, {0}, m_rank6, 0},
    {"batched tiled transposes f32", 1, {F32}, {5}, {{20, 3, 2, 5, 18}}, {0}, m_tiled_batched, 1},
    {"batched tiled transposes i64", 1, {I64}, {5}, {{20, 3, 2, 5, 18}}, {1 << 30}, m_tiled_batched, 0},
};

/* ---- OneHot with negative and out-of-range indices (const input) ---- */
static void one_hot_negative(void) {
  int64_t d[1] = {8};
  loom_tensor *t = loom_tensor_new(I64, 1, d, NULL);
  int64_t v[8] = {-1, 0, 3, 4, -100, 2, 5, 1};
  memcpy(loom_tensor_data(t), v, sizeof v);
  for (int ax = -1; ax <= 0; ax++) {
    loom_graph *g = loom_graph_new();
    loom_output y = loom_one_hot(g, loom_const(g, t, NULL), 4, 2.5, -1, ax, F32, NULL);
    loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
    loom_tensor *a = NULL, *b = NULL;
    if (sc && sg && run(sc, "one_hot negative", NULL, NULL, 0, &y, &a, 1, NULL, 0) &&
        run(sg, "one_hot negative", NULL, NULL, 0, &y, &b, 1, NULL, 0))
      compare(ax ? "one_hot negative indices axis -1" : "one_hot negative indices axis 0", a, b, 0);
    loom_tensor_free(a);
    loom_tensor_free(b);
    loom_session_free(sc);
    loom_session_free(sg);
    loom_graph_free(g);
  }
  loom_tensor_free(t);
}

/* ---- Pad / Fill / Transpose with NaN and -0.0 payloads: bits move unchanged ---- */
static void special_values(void) {
  int64_t d[2] = {3, 4};
  loom_tensor *t = loom_tensor_new(F32, 2, d, NULL);
  float *p = loom_tensor_data(t);
  for (int i = 0; i < 12; i++) p[i] = (float)i - 5.5f;
  p[1] = NAN;
  p[2] = -0.0f;
  p[3] = INFINITY;
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, F32, 2, d, "x");
  int64_t b[2] = {1, 1}, a[2] = {1, 1};
  /* Fill from a -0.0 scalar (a reshaped one-element slice) */
  loom_output v = loom_reshape(g, loom_slice(g, x, (int64_t[2]){0, 2}, (int64_t[2]){1, 1}, NULL), 0, NULL, NULL);
  loom_output y[3] = {loom_pad(g, x, b, a, NAN, NULL), loom_transpose(g, x, 0, NULL, NULL), loom_fill(g, 2, d, v, NULL)};
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  loom_tensor *oc[3] = {0}, *og[3] = {0};
  if (sc && sg && run(sc, "special values", &x, &t, 1, y, oc, 3, NULL, 0) &&
      run(sg, "special values", &x, &t, 1, y, og, 3, NULL, 0)) {
    for (int k = 0; k < 3; k++) {
      size_t n = (size_t)loom_tensor_numel(oc[k]) * 4;
      parity_check(loom_tensor_numel(oc[k]) == loom_tensor_numel(og[k]) &&
                       !memcmp(loom_tensor_data_const(oc[k]), loom_tensor_data_const(og[k]), n),
                   "special values output %d: bits differ", k);
    }
  }
  for (int k = 0; k < 3; k++) {
    loom_tensor_free(oc[k]);
    loom_tensor_free(og[k]);
  }
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
  loom_tensor_free(t);
}

int main(void) {
  if (!parity_gpu_present("test_parity_array")) return 0;
  loom_log_set(log_hook, NULL, LOOM_LOG_INFO);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  for (size_t i = 0; i < sizeof mcases / sizeof mcases[0]; i++) run_mcase(&mcases[i]);
  one_hot_negative();
  special_values();
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  parity_check(!g_fallbacks, "%d layout-op nodes ran on the CPU in a CUDA session", g_fallbacks);
  return parity_report("test_parity_array");
}
