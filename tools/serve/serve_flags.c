/* loom-serve: command-line flags in TF Serving's forms: --name=value or --name value; a boolean
 * also as --name alone (true) or --name=true|false|1|0. Unknown flags, stray arguments, missing
 * or malformed values are errors naming the flag. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"

static int parse_value(const serve_flag *f, const char *v, char *err, size_t cap) {
  if (f->type == FLAG_STR) {
    *(const char **)f->dst = v;
    return 0;
  }
  if (f->type == FLAG_BOOL) {
    int b = !strcmp(v, "true") || !strcmp(v, "1") ? 1 : !strcmp(v, "false") || !strcmp(v, "0") ? 0 : -1;
    if (b < 0) return snprintf(err, cap, "--%s: '%s' is not a boolean (true, false, 1 or 0)", f->name, v), -1;
    *(int *)f->dst = b;
    return 0;
  }
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < f->lo || x > f->hi)
    return snprintf(err, cap, "--%s: '%s' is not an integer in [%lld, %lld]", f->name, v, f->lo, f->hi), -1;
  *(long long *)f->dst = x;
  return 0;
}

int serve_parse_flags(int argc, char **argv, serve_flag *flags, char *err, size_t cap) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) || !a[2])
      return snprintf(err, cap, "unexpected argument '%s' (flags are --name=value or --name value; see --help)", a),
             -1;
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    serve_flag *f = flags;
    while (f->name && (strlen(f->name) != n || memcmp(f->name, name, n))) f++;
    if (!f->name) return snprintf(err, cap, "unknown flag --%.*s (see loom-serve --help)", (int)n, name), -1;
    const char *v = eq ? eq + 1 : NULL;
    if (!v && f->type == FLAG_BOOL) {
      const char *nx = i + 1 < argc ? argv[i + 1] : "";
      v = !strcmp(nx, "true") || !strcmp(nx, "false") || !strcmp(nx, "1") || !strcmp(nx, "0") ? argv[++i] : "true";
    } else if (!v) {
      if (i + 1 >= argc) return snprintf(err, cap, "--%s needs a value (--%s=%s)", f->name, f->name, f->arg), -1;
      v = argv[++i];
    }
    if (parse_value(f, v, err, cap)) return -1;
    f->given = 1;
  }
  return 0;
}

void serve_print_flags(FILE *out, const serve_flag *flags) {
  for (const serve_flag *f = flags; f->name; f++) {
    char left[96];
    snprintf(left, sizeof left, "--%s%s%s", f->name, f->type == FLAG_BOOL ? "[=" : "=",
             f->type == FLAG_BOOL ? "true|false]" : f->arg);
    fprintf(out, "  %-36s %s\n", left, f->help);
  }
}
