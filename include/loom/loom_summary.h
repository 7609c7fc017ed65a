/* loom_summary.h - TensorBoard event files, graph summaries, run traces.
 *
 * Event files are what TensorBoard reads: "events.out.tfevents.<secs>.<host>"
 * holding TFRecord-framed (masked CRC32C) Event protobufs. The first event
 * carries file_version "brain.Event:2". Scalars are written as
 * Summary.Value.simple_value, histograms as HistogramProto with TF's
 * default bucket limits, images as Summary.Image holding a PNG.
 *
 * Graph summaries (tf.summary.scalar / histogram / image) are recorded in the
 * graph's "summaries" collection with their tag; a SummarySaver fetches
 * them and hands the values to loom_event_writer_add_graph_summaries.
 */
#ifndef LOOM_SUMMARY_H
#define LOOM_SUMMARY_H
#include "loom_base.h"
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- writing ---- */
typedef struct loom_event_writer loom_event_writer;

/* Creates logdir (and parents) if needed and opens
 * "<logdir>/events.out.tfevents.<unix secs>.<hostname><suffix>" (suffix may
 * be NULL; secs printed as %010lld like TF), writing the file_version event.
 * An existing file is never clobbered: a name already taken (a writer made
 * in the same second) moves to the next second.
 * Buffered: an add_* flushes when >= 2 s passed since the last flush or 32
 * events are pending (so the first event after a quiet spell is on disk at
 * once); flush and free always flush. A writer may be shared by threads.
 * Returns a new writer (NULL on failure); caller frees with
 * loom_event_writer_free. */
LOOM_API loom_event_writer *loom_event_writer_new(const char *logdir, const char *filename_suffix, loom_status *st);
/* Flushes and closes. Accepts NULL. */
LOOM_API void loom_event_writer_free(loom_event_writer *w);
/* The file written. Owned by w; valid until loom_event_writer_free (NULL for w NULL). */
LOOM_API const char *loom_event_writer_path(const loom_event_writer *w);
LOOM_API loom_code loom_event_writer_flush(loom_event_writer *w, loom_status *st);

/* One Event (wall_time now, step) with one simple_value. */
LOOM_API loom_code loom_event_writer_add_scalar(loom_event_writer *w, const char *tag, double value, int64_t step,
                                                loom_status *st);
/* One Event with n simple_values (evaluate writes all metrics at once). */
LOOM_API loom_code loom_event_writer_add_scalars(loom_event_writer *w, int n, const char *const *tags,
                                                 const double *values, int64_t step, loom_status *st);
/* One Event with a HistogramProto of n values (min, max, num, sum,
 * sum_squares, TF's default bucket limits), encoded as TF's
 * EncodeToProto(preserve_zero_buckets=false): every non-empty bucket, and
 * each run of empty buckets collapsed into one zero bucket carrying the
 * run's last limit. A NaN or infinity is INVALID_ARGUMENT ("Nan in summary
 * histogram for: <tag>", as TF). */
LOOM_API loom_code loom_event_writer_add_histogram(loom_event_writer *w, const char *tag, const double *values,
                                                   int64_t n, int64_t step, loom_status *st);
/* One Event with a string-tensor summary value (e.g. evaluate's
 * "checkpoint_path"): a scalar DT_STRING TensorProto with metadata plugin
 * "text", as tf.summary.text. */
LOOM_API loom_code loom_event_writer_add_text(loom_event_writer *w, const char *tag, const char *text, int64_t step,
                                              loom_status *st);
typedef enum loom_session_log_status {
  LOOM_SESSION_LOG_START = 1,
  LOOM_SESSION_LOG_STOP = 2,
  LOOM_SESSION_LOG_CHECKPOINT = 3
} loom_session_log_status;
/* One Event carrying a SessionLog (checkpoint_path may be NULL). */
LOOM_API loom_code loom_event_writer_add_session_log(loom_event_writer *w, loom_session_log_status status,
                                                     const char *checkpoint_path, int64_t step, loom_status *st);

/* ---- graph summaries ---- */
typedef enum loom_summary_kind {
  LOOM_SUMMARY_SCALAR = 0,
  LOOM_SUMMARY_HISTOGRAM = 1,
  LOOM_SUMMARY_IMAGE = 2
} loom_summary_kind;
/* tf.summary.scalar: returns x's identity named "<tag>" (under the current
 * scope) and records it in g's "summaries" output collection (histograms
 * also in "summaries_histogram"). The tag written is that node's full name,
 * as TF's summary_scope makes it: the name given, prefixed by the current
 * scope and made unique ("loss", "loss_1"; TF's family rules aside).
 * x must be a numeric scalar (or one element); an INVALID_ARGUMENT graph
 * error otherwise (unknown dims are checked when the value is written). */
LOOM_API loom_output loom_summary_scalar(loom_graph *g, const char *tag, loom_output x);
/* tf.summary.histogram: any numeric tensor. */
LOOM_API loom_output loom_summary_histogram(loom_graph *g, const char *tag, loom_output x);
/* tf.compat.v1.summary.image: x [batch, height, width, channels] (uint8,
 * float32 or float64; channels 1, 3 or 4 known when building). Each write
 * holds the first min(max_outputs, batch) images as PNGs (Summary.Image,
 * colorspace = channels) tagged "<tag>/image" when max_outputs is 1, else
 * "<tag>/image/0", "<tag>/image/1", ...; floats are mapped to uint8 per
 * image as TF's ImageSummary: over the finite pixels, value * 255 / max
 * when none is negative, else value * 127 / max(|min|, max) + 128 (a scale
 * of 0 below 1e-6), truncated; a pixel with a non-finite channel is red
 * (255, 0, 0, 255 cut to the channels). max_outputs < 1 or another shape
 * or dtype is an INVALID_ARGUMENT graph error. */
LOOM_API loom_output loom_summary_image(loom_graph *g, const char *tag, loom_output x, int max_outputs);
/* The graph's summaries in creation order; returns how many. outputs is
 * the "summaries" collection (valid until it changes); tags point at node
 * names (valid while g lives). The tags and kinds arrays themselves belong
 * to g and are valid until a summary is added to g or g is freed. Any
 * pointer argument may be NULL. */
LOOM_API int loom_graph_summaries(loom_graph *g, const char *const **tags, const loom_summary_kind **kinds,
                                  const loom_output **outputs);
/* Writes one Event at step holding every summary of g, given their fetched
 * values in loom_graph_summaries order. */
LOOM_API loom_code loom_event_writer_add_graph_summaries(loom_event_writer *w, loom_graph *g,
                                                         loom_tensor *const *values, int64_t step, loom_status *st);

/* One Event carrying g as a serialized tensorflow.GraphDef (what
 * tf.summary.FileWriter.add_graph writes and TensorBoard's graph view
 * shows): a NodeDef per node in creation order with the node's full name,
 * loom's op name (its TF-style name, e.g. "MatMul"), its inputs ("node",
 * "node:1", "^node" for control inputs) and the attrs "_output_shapes"
 * (unknown dims -1) and "T" (output 0's dtype); versions.producer 1645 (TF
 * 2.15). The SummarySaverHook (so every Estimator training) writes it once
 * per session, before the session-start log. */
LOOM_API loom_code loom_event_writer_add_graph(loom_event_writer *w, loom_graph *g, loom_status *st);

/* ---- reading (tests, tools) ---- */
typedef struct loom_event_value {
  const char *tag;
  int32_t kind;           /* 0 simple_value (also a float/double scalar tensor),
                             1 histogram, 2 string tensor (its first string),
                             3 anything else (image, audio, ...: tag only) */
  double simple_value;
  double hmin, hmax, hnum, hsum, hsum_squares; /* histogram */
  int32_t nbuckets;
  const double *bucket_limit, *bucket;
  const char *text;       /* kind 2 */
} loom_event_value;
typedef struct loom_event {
  double wall_time;
  int64_t step;
  const char *file_version;   /* non-NULL for the file_version event */
  int32_t nvalues;            /* summary values */
  const loom_event_value *values;
  int32_t session_log_status; /* 0 when the event has no SessionLog */
  const char *checkpoint_path; /* NULL when absent or empty */
  const void *graph_def;       /* the serialized GraphDef of a graph event, else NULL */
  size_t graph_def_size;
} loom_event;
typedef struct loom_event_reader loom_event_reader;
/* A new reader (NULL on failure); caller frees with loom_event_reader_free. */
LOOM_API loom_event_reader *loom_event_reader_open(const char *path, loom_status *st);
/* *ev (and every pointer in it) is owned by r; valid until the next call
 * or loom_event_reader_free. OUT_OF_RANGE at the end; DATA_LOSS
 * naming the file and record for a bad CRC, truncation or an undecodable
 * Event. */
LOOM_API loom_code loom_event_reader_next(loom_event_reader *r, const loom_event **ev, loom_status *st);
LOOM_API void loom_event_reader_free(loom_event_reader *r);

/* ---- run traces (the profiler hook) ---- */
typedef struct loom_trace_event {
  const char *node;  /* node name (borrowed from the graph) */
  const char *op;    /* op type */
  int64_t start_ns;  /* CLOCK_MONOTONIC, relative to the run's start */
  int64_t dur_ns;
  int32_t thread;    /* 0 = the calling thread */
} loom_trace_event;
/* Records per-node timings for the session's runs while on (off by
 * default; costs two clock reads per node when on). */
LOOM_API void loom_session_set_tracing(loom_session *s, int on);
/* Timings of the most recent traced run (owned by s; valid until the next
 * run or loom_session_free; the node and op strings live as long as the
 * graph and the op registry), in execution order; *n = 0 when none. A failed run's trace ends
 * with the step that failed. */
LOOM_API const loom_trace_event *loom_session_last_trace(const loom_session *s, int *n);
/* Writes a Chrome trace (JSON "traceEvents", complete "X" events in
 * microseconds, one per node, args {op}) that chrome://tracing and Perfetto
 * load. Atomic (temporary file + rename). */
LOOM_API loom_code loom_trace_write_chrome(const char *path, const loom_trace_event *ev, int n, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
