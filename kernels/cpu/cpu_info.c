/* What the CPU backend found and chose at load: the CPU's features, the
 * kernel clones the loader bound (kernels/cpu/isa.h) and the BLAS library. */
#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/isa.h"

size_t loom__cpu_info(char *buf, size_t len);

static int vec_level_detect(void) {
  int level = LOOM_VEC_GENERIC;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = LOOM_VEC_AVX2;
  if (level == LOOM_VEC_AVX2 && __builtin_cpu_supports("avx512f")) level = LOOM_VEC_AVX512;
#endif
  const char *want = getenv("LOOM_CONV_ISA");
  if (want) {
    int w = !strcmp(want, "generic") ? LOOM_VEC_GENERIC : !strcmp(want, "avx2") ? LOOM_VEC_AVX2 : LOOM_VEC_AVX512;
    if (w < level) level = w;
  }
  return level;
}

int loom__cpu_vec_level(void) {
  static int level = -1; /* detected once; racing first calls store the same value */
  int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (l < 0) {
    l = vec_level_detect();
    __atomic_store_n(&level, l, __ATOMIC_RELAXED);
  }
  return l;
}

/* appends like snprintf at buf + *used, never past len */
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...) {
  size_t off = *used < len ? *used : len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf ? buf + off : NULL, buf ? len - off : 0, fmt, ap);
  va_end(ap);
  if (n > 0) *used += (size_t)n;
}

static void cpu_model(char *out, size_t n) {
  snprintf(out, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!strncmp(line, "model name", 10) && colon) {
      colon += colon[1] == ' ' ? 2 : 1;
      colon[strcspn(colon, "\n")] = 0;
      snprintf(out, n, "%s", colon);
      break;
    }
  }
  fclose(f);
}

size_t loom__cpu_info(char *buf, size_t len) {
  size_t used = 0;
  char model[256], feats[256] = "";
  cpu_model(model, sizeof model);
  put(buf, len, &used, "cpu: %s\n", model);
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  static const char *const names[] = {"sse4.2", "popcnt", "avx", "avx2", "fma", "bmi2",
                                      "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni"};
  int on[sizeof names / sizeof *names] = {
      __builtin_cpu_supports("sse4.2"),  __builtin_cpu_supports("popcnt"),   __builtin_cpu_supports("avx"),
      __builtin_cpu_supports("avx2"),    __builtin_cpu_supports("fma"),      __builtin_cpu_supports("bmi2"),
      __builtin_cpu_supports("avx512f"),  __builtin_cpu_supports("avx512bw"),
      __builtin_cpu_supports("avx512dq"), __builtin_cpu_supports("avx512vl"), __builtin_cpu_supports("avx512vnni")};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (on[i]) snprintf(feats + strlen(feats), sizeof feats - strlen(feats), "%s%s", *feats ? " " : "", names[i]);
#else
  snprintf(feats, sizeof feats, "(not probed on this architecture)");
#endif
  put(buf, len, &used, "cpu_features: %s\n", feats);
#if LOOM_HOT_CLONED
  const char *clone = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
                      : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                                            : "default (the build's baseline)";
  put(buf, len, &used, "kernel_clones: %s (built: default, x86-64-v3, x86-64-v4)\n", clone);
#else
  put(buf, len, &used, "kernel_clones: %s\n", "none (one build for one target: NATIVE=1, no ifunc, or an AVX-512 baseline)");
#endif
  const char *cfg = openblas_get_config(), *core = openblas_get_corename();
  put(buf, len, &used, "blas: %s\n", cfg ? cfg : "(unknown)");
  put(buf, len, &used, "blas_core: %s\n", core ? core : "(unknown)");
  put(buf, len, &used, "blas_threads: %s\n", "1 per block (loom's pool cuts large products into blocks)");
  return used;
}
