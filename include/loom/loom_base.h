/* loom_base.h - status codes, status objects, logging, allocator hook, version.
 *
 * Conventions for the whole public API:
 *  - Every fallible call returns loom_code (LOOM_OK == 0) and takes a trailing
 *    `loom_status *st` that may be NULL; when non-NULL it receives the message.
 *  - Constructors return NULL on failure (the status says why).
 *  - Every *_free accepts NULL.
 *  - Headers include only <stddef.h> and <stdint.h> and compile as C and C++.
 */
#ifndef LOOM_BASE_H
#define LOOM_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LOOM_API __declspec(dllexport)
#else
#define LOOM_API __attribute__((visibility("default")))
#endif

#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0

/* TensorFlow's canonical codes, same numeric values. Append-only. */
typedef enum loom_code {
  LOOM_OK = 0,
  LOOM_CANCELLED = 1,
  LOOM_UNKNOWN = 2,
  LOOM_INVALID_ARGUMENT = 3,
  LOOM_DEADLINE_EXCEEDED = 4,
  LOOM_NOT_FOUND = 5,
  LOOM_ALREADY_EXISTS = 6,
  LOOM_PERMISSION_DENIED = 7,
  LOOM_RESOURCE_EXHAUSTED = 8,
  LOOM_FAILED_PRECONDITION = 9,
  LOOM_ABORTED = 10,
  LOOM_OUT_OF_RANGE = 11,
  LOOM_UNIMPLEMENTED = 12,
  LOOM_INTERNAL = 13,
  LOOM_UNAVAILABLE = 14,
  LOOM_DATA_LOSS = 15,
  LOOM_CODE_COUNT
} loom_code;

/* "INVALID_ARGUMENT" etc.; "UNKNOWN_CODE" for values out of range. */
LOOM_API const char *loom_code_name(loom_code code);
LOOM_API const char *loom_version(void);

/* A status carries a code and a message. Caller frees with loom_status_free. */
typedef struct loom_status loom_status;
LOOM_API loom_status *loom_status_new(void);
LOOM_API void loom_status_free(loom_status *st);
LOOM_API loom_code loom_status_code(const loom_status *st);
/* Borrowed; valid until the status is next set or freed. "" when OK. */
LOOM_API const char *loom_status_message(const loom_status *st);
/* Sets code and printf-style message; st may be NULL. Returns code. */
LOOM_API loom_code loom_status_set(loom_status *st, loom_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
LOOM_API void loom_status_clear(loom_status *st);

/* Logging. The default sink writes WARN and above to stderr. */
typedef enum loom_log_level {
  LOOM_LOG_DEBUG = 0,
  LOOM_LOG_INFO = 1,
  LOOM_LOG_WARN = 2,
  LOOM_LOG_ERROR = 3
} loom_log_level;
typedef void (*loom_log_fn)(loom_log_level level, const char *message, void *user_data);
/* fn == NULL restores the default sink. Messages below min_level are dropped. */
LOOM_API void loom_log_set(loom_log_fn fn, void *user_data, loom_log_level min_level);

/* Allocator hook: every allocation loom makes goes through these (tests count
 * them to prove a steady-state step does not allocate). NULL restores libc.
 * Set it before creating any loom object; memory must be freed by the
 * allocator that made it. */
typedef struct loom_allocator {
  void *(*malloc_fn)(size_t size, void *user_data);
  void *(*realloc_fn)(void *ptr, size_t size, void *user_data);
  void (*free_fn)(void *ptr, void *user_data);
  void *user_data;
} loom_allocator;
LOOM_API void loom_set_allocator(const loom_allocator *a);

#ifdef __cplusplus
}
#endif
#endif
