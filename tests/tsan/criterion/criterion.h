/* A stand-in for <criterion/criterion.h> used by `make tsan` only.
 *
 * Criterion cannot start under ThreadSanitizer (its boxfort "inheritable
 * arena" fails: "Could not initialize inheritable arena: Resource temporarily
 * unavailable", Criterion issue #274), so the TSan build compiles the same
 * test files against this header instead: Test() registers the function,
 * main() runs every test in this one process (no fork), the cr_assert and
 * cr_expect families check their condition and a failure ends the test with
 * a message (cr_expect is fatal here too). It prints Criterion's closing
 * "Synthesis" line, which scripts/run_tests.sh reads. */
#ifndef LOOM_TSAN_CRITERION_SHIM_H
#define LOOM_TSAN_CRITERION_SHIM_H
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shim_opts {
  void (*init)(void);
  void (*fini)(void);
  double timeout;
  int disabled;
} shim_opts;
typedef struct shim_test {
  const char *suite, *name;
  void (*fn)(void);
  shim_opts o;
} shim_test;
static shim_test shim_tests[512];
static int shim_ntests;
static jmp_buf shim_jmp;
static int shim_failed;

static void shim_register(const char *suite, const char *name, void (*fn)(void), shim_opts o) {
  if (shim_ntests < 512) shim_tests[shim_ntests++] = (shim_test){suite, name, fn, o};
}

static void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
static void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...) {
  fprintf(stderr, "[----] %s:%d: Assertion Failed: %s\n[----]   ", file, line, expr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  shim_failed = 1;
  longjmp(shim_jmp, 1);
}

#define Test(suite, name, ...)                                                                     \
  static void suite##_##name##_impl(void);                                                         \
  __attribute__((constructor)) static void suite##_##name##_reg(void) {                           \
    shim_register(#suite, #name, suite##_##name##_impl, (shim_opts){__VA_ARGS__});                 \
  }                                                                                                \
  static void suite##_##name##_impl(void)

#define cr_assert(c, ...)                                                    \
  do {                                                                       \
    if (!(c)) shim_fail(__FILE__, __LINE__, #c, " " __VA_ARGS__);            \
  } while (0)
#define cr_expect(c, ...) cr_assert(c, __VA_ARGS__)
#define cr_skip_test(...) do { fprintf(stderr, "[SKIP] " __VA_ARGS__); fprintf(stderr, "\n"); longjmp(shim_jmp, 2); } while (0)
#define cr_assert_fail(...) shim_fail(__FILE__, __LINE__, "cr_assert_fail", " " __VA_ARGS__)
#define cr_assert_not(c, ...) cr_assert(!(c), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(!strcmp((a), (b)), __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)), __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) cr_assert(fabs((double)(a) - (double)(b)) <= (eps), __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) cr_assert(!memcmp((a), (b), (n)), __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cr_assert_eq(a, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) cr_assert_neq(a, b, __VA_ARGS__)
#define cr_expect_null(p, ...) cr_assert_null(p, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) cr_assert_str_eq(a, b, __VA_ARGS__)
#define cr_expect_not(c, ...) cr_assert_not(c, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) cr_assert_lt(a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) cr_assert_gt(a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) cr_assert_leq(a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) cr_assert_geq(a, b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...) cr_assert_float_eq(a, b, eps, __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr)) /* a line each, as Criterion's */
#define cr_log_warn(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))

static int shim_run_one(const shim_test *t) {
  shim_failed = 0;
  if (!setjmp(shim_jmp)) {
    if (t->o.init) t->o.init();
    t->fn();
    if (t->o.fini) t->o.fini();
  }
  return shim_failed;
}

/* --filter suite/name runs one test (a '*' ends a prefix match); other arguments are ignored. */
int main(int argc, char **argv) {
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--filter=", 9)) filter = argv[i] + 9;
    if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
  }
  int pass = 0, fail = 0, run = 0;
  for (int i = 0; i < shim_ntests; i++) {
    shim_test *t = &shim_tests[i];
    if (t->o.disabled) continue;
    char full[256];
    snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
    if (filter) {
      const char *star = strchr(filter, '*');
      size_t n = star ? (size_t)(star - filter) : strlen(filter) + 1;
      if (strncmp(full, filter, n)) continue;
    }
    run++;
    if (shim_run_one(t)) {
      fprintf(stderr, "[FAIL] %s::%s\n", t->suite, t->name);
      fail++;
    } else {
      pass++;
    }
  }
  fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0 \n", run, pass, fail);
  return fail ? 1 : 0;
}
#endif
