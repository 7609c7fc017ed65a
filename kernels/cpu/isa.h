/* Run-time instruction-set dispatch of the hot CPU kernels.
 *
 * The default build compiles for a portable baseline (x86-64-v2, see the
 * Makefile); LOOM_HOT on a kernel's inner loop function makes GCC emit it
 * three times -- for that baseline, for x86-64-v3 (AVX2, FMA, BMI2) and for
 * x86-64-v4 (AVX-512 F/BW/DQ/VL) -- plus an ifunc resolver that the dynamic
 * loader runs once (before main) to bind the one the CPU supports. The static
 * inline helpers such a function calls are inlined into each clone and so
 * get its instruction set too. A call through the resolved pointer costs what
 * any call through a function pointer costs; the kernels' loops are reached
 * that way already (loom__parallel_for callbacks).
 *
 * Off (plain functions) with NATIVE=1 (-march=native already targets the
 * build machine), outside GCC on x86-64 with glibc (ifunc), and when the
 * baseline itself already has AVX-512 (nothing to gain). LOOM_CPU_ISA_NAME()
 * names the clone the loader picked, for benchmarks' output. */
#ifndef LOOM_KERNELS_CPU_ISA_H
#define LOOM_KERNELS_CPU_ISA_H

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) && \
    defined(__GLIBC__) && defined(__ELF__) && !defined(LOOM_NATIVE) && !defined(__AVX512F__) && \
    !defined(LOOM_NO_CLONES)
#define LOOM_HOT __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#define LOOM_HOT_CLONED 1
#else
#define LOOM_HOT
#define LOOM_HOT_CLONED 0
#endif

/* A helper that must be inlined into each clone of its LOOM_HOT caller (a helper that is not
 * inlined runs the baseline's code). */
#if defined(__GNUC__)
#define LOOM_FORCE_INLINE static inline __attribute__((always_inline))
#else
#define LOOM_FORCE_INLINE static inline
#endif

/* The widest vectors the hand-tiled kernels use on this CPU (the convolution's, kernels/cpu/conv_tiles.h,
 * and the dense products', kernels/cpu/gemm_tiles.c): AVX-512 (F, with AVX2 and FMA), AVX2 + FMA, or the
 * build's baseline. LOOM_CONV_ISA=generic|avx2 lowers it (tests, benchmarks); a level the CPU lacks is
 * never returned. Detected once (kernels/cpu/cpu_info.c). */
enum { LOOM_VEC_GENERIC, LOOM_VEC_AVX2, LOOM_VEC_AVX512 };
int loom__cpu_vec_level(void);

#endif
