/* loom-serve: TF Serving's text-format configuration files.
 *   --model_config_file         ModelServerConfig: model_config_list { config { name: base_path:
 *                               model_platform: [model_version_policy { all {} }] } ... }
 *   --batching_parameters_file  BatchingParameters: max_batch_size { value: N } and likewise
 *                               batch_timeout_micros, num_batch_threads, max_enqueued_batches
 * A strict reader of protobuf's text format for exactly these messages: fields, nested messages in
 * { } or < >, optional ':' before a message, quoted strings with C escapes (adjacent ones joined),
 * numbers and identifiers, '[a, b]' lists, ',' or ';' after a field, '#' comments. A field these
 * messages do not have, or one of theirs loom-serve does not implement, is an error naming it and
 * its line. (Debian's only text-format parser is C++ libprotobuf's TextFormat, which would need
 * generated C++ for the two messages; protobuf-c has no text format.) */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"

typedef struct tp_node {
  char *name;
  char *value; /* a scalar's text (a string unescaped); NULL for a message */
  int line;
  struct tp_node *child, *next;
} tp_node;

typedef struct tp {
  const char *p, *e;
  int line;
  char *err;
  size_t cap;
  const char *file;
} tp;

/* "file: line N: message" into err; returns -1 */
static int cfg_fail(char *err, size_t cap, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int cfg_fail(char *err, size_t cap, const char *file, int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err, cap, "%s: line %d: %s", file, line, msg);
  return -1;
}
#define tp_fail(t, ...) cfg_fail((t)->err, (t)->cap, (t)->file, (t)->line, __VA_ARGS__)
#define node_fail(err, cap, file, n, ...) cfg_fail(err, cap, file, (n)->line, __VA_ARGS__)

static void tp_free(tp_node *n) {
  while (n) {
    tp_node *next = n->next;
    tp_free(n->child);
    free(n->name);
    free(n->value);
    free(n);
    n = next;
  }
}

static void tp_ws(tp *t) {
  while (t->p < t->e) {
    char c = *t->p;
    if (c == '\n') t->line++;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') t->p++;
    else if (c == '#')
      while (t->p < t->e && *t->p != '\n') t->p++;
    else break;
  }
}
static int is_ident(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

/* a quoted string (and any adjacent ones) appended to *out */
static int tp_string(tp *t, sb *out) {
  while (t->p < t->e && (*t->p == '"' || *t->p == '\'')) {
    char q = *t->p++;
    while (t->p < t->e && *t->p != q) {
      char c = *t->p++;
      if (c == '\n') return tp_fail(t, "a string is not closed on its line");
      if (c == '\\') {
        if (t->p >= t->e) break;
        c = *t->p++;
        switch (c) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case '\\': case '\'': case '"': break;
        default: return tp_fail(t, "unsupported escape \\%c in a string", c);
        }
      }
      sb_put(out, &c, 1);
    }
    if (t->p >= t->e) return tp_fail(t, "a string is not closed");
    t->p++;
    tp_ws(t);
  }
  return out->oom ? tp_fail(t, "out of memory") : 0;
}

static int tp_message(tp *t, tp_node **out, char close, int depth);

/* one scalar value: string, number or identifier */
static int tp_scalar(tp *t, char **value) {
  sb v = {0};
  if (t->p < t->e && (*t->p == '"' || *t->p == '\'')) {
    if (tp_string(t, &v)) return free(v.p), -1;
    *value = v.p ? v.p : strdup("");
    return *value ? 0 : tp_fail(t, "out of memory");
  }
  const char *b = t->p;
  while (t->p < t->e && (is_ident(*t->p, 0) || *t->p == '-' || *t->p == '+' || *t->p == '.')) t->p++;
  if (t->p == b) {
    if (t->p >= t->e) return tp_fail(t, "expected a value before the end of the file");
    return *t->p > ' ' && *t->p < 127 ? tp_fail(t, "expected a value, got '%c'", *t->p)
                                      : tp_fail(t, "expected a value, got byte 0x%02x", (unsigned char)*t->p);
  }
  *value = strndup(b, (size_t)(t->p - b));
  tp_ws(t);
  return *value ? 0 : tp_fail(t, "out of memory");
}

static tp_node *tp_add(tp_node ***tail, const char *name, size_t n, int line) {
  tp_node *f = calloc(1, sizeof *f);
  if (!f || !(f->name = strndup(name, n))) return free(f), NULL;
  f->line = line;
  **tail = f;
  *tail = &f->next;
  return f;
}

/* fields up to close ('}', '>' or 0 for the end of the text) */
static int tp_message(tp *t, tp_node **out, char close, int depth) {
  tp_node **tail = out;
  *out = NULL;
  if (depth > 16) return tp_fail(t, "messages nested too deeply");
  for (;;) {
    tp_ws(t);
    if (t->p >= t->e) return close ? tp_fail(t, "'%c' expected before the end of the file", close) : 0;
    if (close && *t->p == close) {
      t->p++;
      return 0;
    }
    if (!is_ident(*t->p, 1))
      return *t->p > ' ' && *t->p < 127 ? tp_fail(t, "expected a field name, got '%c'", *t->p)
                                        : tp_fail(t, "expected a field name, got byte 0x%02x", (unsigned char)*t->p);
    const char *nm = t->p;
    while (t->p < t->e && is_ident(*t->p, 0)) t->p++;
    size_t nn = (size_t)(t->p - nm);
    int line = t->line;
    tp_ws(t);
    int colon = t->p < t->e && *t->p == ':';
    if (colon) t->p++, tp_ws(t);
    if (t->p < t->e && (*t->p == '{' || *t->p == '<')) {
      char c = *t->p++ == '{' ? '}' : '>';
      tp_node *f = tp_add(&tail, nm, nn, line);
      if (!f) return tp_fail(t, "out of memory");
      if (tp_message(t, &f->child, c, depth + 1)) return -1;
    } else if (!colon) {
      return tp_fail(t, "':' or '{' expected after field %.*s", (int)nn, nm);
    } else if (t->p < t->e && *t->p == '[') { /* a list of scalars: one node per element */
      t->p++;
      tp_ws(t);
      while (t->p < t->e && *t->p != ']') {
        tp_node *f = tp_add(&tail, nm, nn, line);
        if (!f) return tp_fail(t, "out of memory");
        if (tp_scalar(t, &f->value)) return -1;
        if (t->p < t->e && *t->p == ',') t->p++, tp_ws(t);
      }
      if (t->p >= t->e) return tp_fail(t, "']' expected");
      t->p++;
    } else {
      tp_node *f = tp_add(&tail, nm, nn, line);
      if (!f) return tp_fail(t, "out of memory");
      if (tp_scalar(t, &f->value)) return -1;
    }
    tp_ws(t);
    if (t->p < t->e && (*t->p == ',' || *t->p == ';')) t->p++;
  }
}

/* reads path and parses it into *root */
static int tp_parse_file(const char *path, tp_node **root, char *err, size_t cap) {
  *root = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(err, cap, "cannot open %s: %s", path, strerror(errno)), -1;
  sb text = {0};
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0 && text.n < (1u << 20)) sb_put(&text, buf, k);
  int bad = ferror(f) || text.oom;
  fclose(f);
  if (bad) return free(text.p), snprintf(err, cap, "cannot read %s", path), -1;
  if (text.n >= (1u << 20)) return free(text.p), snprintf(err, cap, "%s: larger than 1 MiB", path), -1;
  tp t = {text.p ? text.p : "", (text.p ? text.p : "") + text.n, 1, err, cap, path};
  int rc = tp_message(&t, root, 0, 0);
  free(text.p);
  if (rc) {
    tp_free(*root);
    *root = NULL;
  }
  return rc;
}

/* a string field: exactly one, a scalar */
static int take_string(const tp_node *f, char **dst, const char *file, char *err, size_t cap) {
  if (!f->value) return node_fail(err, cap, file, f, "%s must be a string, not a message", f->name);
  if (*dst) return node_fail(err, cap, file, f, "%s is given twice", f->name);
  *dst = strdup(f->value);
  return *dst ? 0 : node_fail(err, cap, file, f, "out of memory");
}

void serve_models_free(serve_model_cfg *m, int n) {
  for (int i = 0; m && i < n; i++) free(m[i].name), free(m[i].base_path);
  free(m);
}

/* model_version_policy: only all {} (loom-serve serves every version directory) */
static int check_policy(const tp_node *f, const char *file, char *err, size_t cap) {
  if (f->value || !f->child || f->child->next || strcmp(f->child->name, "all") || f->child->child ||
      f->child->value)
    return node_fail(err, cap, file, f,
                     "model_version_policy: loom-serve serves every version directory; only "
                     "model_version_policy { all {} } is accepted");
  return 0;
}

static int read_config(const tp_node *c, serve_model_cfg *m, const char *file, char *err, size_t cap) {
  if (c->value) return node_fail(err, cap, file, c, "config must be a message { name: ... base_path: ... }");
  char *platform = NULL;
  int rc = 0;
  for (const tp_node *f = c->child; f && !rc; f = f->next) {
    if (!strcmp(f->name, "name")) rc = take_string(f, &m->name, file, err, cap);
    else if (!strcmp(f->name, "base_path")) rc = take_string(f, &m->base_path, file, err, cap);
    else if (!strcmp(f->name, "model_platform")) rc = take_string(f, &platform, file, err, cap);
    else if (!strcmp(f->name, "model_version_policy")) rc = check_policy(f, file, err, cap);
    else if (!strcmp(f->name, "version_labels") || !strcmp(f->name, "logging_config") ||
             !strcmp(f->name, "model_type"))
      rc = node_fail(err, cap, file, f, "config field %s is not supported by loom-serve", f->name);
    else
      rc = node_fail(err, cap, file, f,
                     "unknown field '%s' in config (fields: name, base_path, model_platform, "
                     "model_version_policy)",
                     f->name);
  }
  if (!rc && platform && strcmp(platform, "tensorflow") && strcmp(platform, "loom"))
    rc = node_fail(err, cap, file, c, "model_platform '%s': loom-serve serves loom exports (\"tensorflow\" or \"loom\")",
                   platform);
  free(platform);
  if (rc) return rc;
  if (!m->name || !m->name[0]) return node_fail(err, cap, file, c, "a config has no name");
  if (strchr(m->name, '/') || strchr(m->name, ':') || strchr(m->name, '?'))
    return node_fail(err, cap, file, c, "model name '%s' has a '/', ':' or '?' (it must fit in a URL path)", m->name);
  if (!m->base_path || !m->base_path[0])
    return node_fail(err, cap, file, c, "model %s has no base_path", m->name);
  return 0;
}

int serve_parse_model_config(const char *path, serve_model_cfg **out, int *nout, char *err, size_t cap) {
  *out = NULL;
  *nout = 0;
  tp_node *root;
  if (tp_parse_file(path, &root, err, cap)) return -1;
  int rc = 0, n = 0, lists = 0;
  serve_model_cfg *m = NULL;
  for (const tp_node *f = root; f && !rc; f = f->next) {
    if (strcmp(f->name, "model_config_list")) {
      rc = node_fail(err, cap, path, f, "%s: %s", f->name,
                     !strcmp(f->name, "custom_model_config") ? "not supported by loom-serve"
                                                              : "unknown field (ModelServerConfig has model_config_list)");
      break;
    }
    if (f->value || lists++) {
      rc = node_fail(err, cap, path, f, "model_config_list must be given once, as a message { config { ... } }");
      break;
    }
    for (const tp_node *c = f->child; c && !rc; c = c->next) {
      if (strcmp(c->name, "config")) {
        rc = node_fail(err, cap, path, c, "unknown field '%s' in model_config_list (it holds config { ... })",
                       c->name);
        break;
      }
      serve_model_cfg *mm = realloc(m, sizeof *m * (size_t)(n + 1));
      if (!mm) {
        rc = node_fail(err, cap, path, c, "out of memory");
        break;
      }
      m = mm;
      memset(&m[n], 0, sizeof *m);
      rc = read_config(c, &m[n++], path, err, cap);
      for (int k = 0; !rc && k < n - 1; k++)
        if (!strcmp(m[k].name, m[n - 1].name)) rc = node_fail(err, cap, path, c, "model %s is configured twice", m[k].name);
    }
  }
  if (!rc && n == 0) rc = (snprintf(err, cap, "%s: no model (model_config_list { config { ... } })", path), -1);
  tp_free(root);
  if (rc) {
    serve_models_free(m, n);
    return -1;
  }
  *out = m;
  *nout = n;
  return 0;
}

int serve_parse_batching(const char *path, serve_batching *b, char *err, size_t cap) {
  static const char *const names[4] = {"max_batch_size", "batch_timeout_micros", "num_batch_threads",
                                       "max_enqueued_batches"};
  tp_node *root;
  if (tp_parse_file(path, &root, err, cap)) return -1;
  int rc = 0;
  for (const tp_node *f = root; f && !rc; f = f->next) {
    int k = 0;
    while (k < 4 && strcmp(f->name, names[k])) k++;
    if (k == 4) {
      static const char *const known[] = {"thread_pool_name", "allowed_batch_sizes", "pad_variable_length_inputs",
                                          "max_execution_batch_size", "enable_large_batch_splitting",
                                          "batch_padding_policy", NULL};
      int tf = 0;
      for (int i = 0; known[i]; i++) tf |= !strcmp(f->name, known[i]);
      rc = node_fail(err, cap, path, f, "%s: %s", f->name,
                     tf ? "not supported by loom-serve"
                        : "unknown field (BatchingParameters: max_batch_size, batch_timeout_micros, "
                          "num_batch_threads, max_enqueued_batches)");
      break;
    }
    /* google.protobuf.Int64Value: { value: N } */
    const tp_node *v = f->child;
    if (f->value || !v || v->next || strcmp(v->name, "value") || !v->value) {
      rc = node_fail(err, cap, path, f, "%s must be written %s { value: N }", f->name, f->name);
      break;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v->value, &end, 10);
    long long lo = k == 1 ? 0 : 1;
    if (errno || *end || x < lo || x > (k == 1 ? 3600000000LL : 1000000000LL)) {
      rc = node_fail(err, cap, path, v, "%s: '%s' is not an integer %s", f->name, v->value,
                     k == 1 ? ">= 0 (at most an hour)" : ">= 1");
      break;
    }
    if (b->set[k]) {
      rc = node_fail(err, cap, path, f, "%s is given twice", f->name);
      break;
    }
    b->v[k] = x;
    b->set[k] = 1;
  }
  tp_free(root);
  return rc;
}
