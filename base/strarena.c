/* Bump allocator for string bytes (base/strarena.h). */
#include <stdint.h>
#include "base/base.h"
#include "base/strarena.h"

struct loom_strarena_chunk {
  loom_strarena_chunk *next;
  size_t cap;
  char data[];
};

char *loom__strarena_alloc(loom_strarena *a, size_t n) {
  if (!a) return NULL;
  loom_strarena_chunk *c = a->head;
  if (!c || c->cap - a->used < n) {
    size_t cap = c ? c->cap * 2 : 65536;
    while (cap < n) cap *= 2;
    loom_strarena_chunk *m = loom__malloc(sizeof *m + cap);
    if (!m) return NULL;
    m->next = c;
    m->cap = cap;
    a->head = c = m;
    a->used = 0;
  }
  char *p = c->data + a->used;
  a->used += n;
  return p;
}

void loom__strarena_reset(loom_strarena *a) {
  if (!a || !a->head) return;
  loom_strarena_chunk *keep = a->head; /* the newest is the largest */
  loom_strarena_chunk *c = keep->next;
  while (c) {
    loom_strarena_chunk *n = c->next;
    loom__free(c);
    c = n;
  }
  keep->next = NULL;
  a->used = 0;
}

void loom__strarena_free(loom_strarena *a) {
  if (!a) return;
  loom_strarena_chunk *c = a->head;
  while (c) {
    loom_strarena_chunk *n = c->next;
    loom__free(c);
    c = n;
  }
  a->head = NULL;
  a->used = 0;
}
