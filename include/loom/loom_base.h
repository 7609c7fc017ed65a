/* loom_base.h - status codes, status objects, logging, allocator hook, version.
 *
 * Conventions for the whole public API:
 *  - Every fallible call returns loom_code (LOOM_OK == 0) and takes a trailing
 *    `loom_status *st` that may be NULL; when non-NULL it receives the message.
 *  - Constructors return NULL on failure (the status says why).
 *  - Every *_free accepts NULL.
 *
 * Failure rule (which calls report what, and where):
 *  1. A public call that allocates or can fail returns loom_code, or a
 *     pointer that is NULL on failure (constructors, with the status
 *     saying why). Only calls that can neither allocate nor fail (frees,
 *     getters, request_stop, loom_log_set, ...) return void.
 *  2. Setters that fill an object under construction (the EstimatorSpec's
 *     loom_spec_set_* / loom_spec_add_*) return loom_code AND record their
 *     first failure in that object ("sticky"); the owner reports it where
 *     it validates the object, prefixed with the setter's name, so a
 *     caller that ignores the return codes still gets a precise error.
 *  3. The exception: graph builders (every call that adds nodes, scopes,
 *     control dependencies or collection entries to a loom_graph) record
 *     the first error in the graph and return a harmless placeholder (or
 *     void), so model code reads as straight-line code; loom_graph_status
 *     reports the error with the node's name, and the estimator and
 *     sessions check it before using the graph (loom_graph.h).
 *
 * Ownership rule: every public function that returns a pointer says in
 * its own comment who owns the result and how long it stays valid:
 * "caller frees with loom_x_free", "owned by <object>; valid until
 * <event>", or "static string".
 *  - Headers include only <stddef.h> and <stdint.h> and compile as C and C++.
 *
 * Options structs (loom_*_options, loom_run_config, loom_train_spec,
 * loom_eval_spec):
 * the first field is uint32_t struct_size, which the struct's _default()
 * sets to its sizeof. Start from _default() and change fields. A call that
 * takes one rejects struct_size 0 (a zero-initialised struct, or one built
 * field by field) with INVALID_ARGUMENT "<type>: struct_size is 0:
 * initialise it with <type>_default()", and a size larger than its own; a
 * smaller one (a program built against an older header) keeps the
 * defaults for the fields it lacks. A NULL options pointer means the
 * defaults.
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

/* "INVALID_ARGUMENT" etc.; "UNKNOWN_CODE" for values out of range. Static string. */
LOOM_API const char *loom_code_name(loom_code code);
/* "MAJOR.MINOR.PATCH". Static string. */
LOOM_API const char *loom_version(void);

/* A status carries a code and a message. */
typedef struct loom_status loom_status;
/* A new OK status (NULL when out of memory); caller frees with loom_status_free. */
LOOM_API loom_status *loom_status_new(void);
LOOM_API void loom_status_free(loom_status *st);
LOOM_API loom_code loom_status_code(const loom_status *st);
/* Owned by st; valid until st is next set or freed (loom_status_clear
 * empties it in place). "" when OK or st is NULL (then static). */
LOOM_API const char *loom_status_message(const loom_status *st);
/* Sets code and printf-style message; st may be NULL. Returns code. */
LOOM_API loom_code loom_status_set(loom_status *st, loom_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Sets code and message, taken as is (no format: '%' stays '%', any
 * length): for language bindings, whose FFIs call variadic functions
 * poorly, and callbacks that forward an exception's text. st may be NULL;
 * message NULL = "". Returns code. */
LOOM_API loom_code loom_status_set_message(loom_status *st, loom_code code, const char *message);
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
