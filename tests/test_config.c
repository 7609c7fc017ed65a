/* ModeKeys, params, RunConfig defaults, TF_CONFIG (TF's RunConfig rules:
 * local mode, chief clusters, legacy master clusters, the evaluator, global
 * ids, master strings, every error naming its field) and the features map. */
#include "test_util.h"

/* ------------------------------------------------------------ helpers */
typedef struct want {
  const char *type;
  int id, chief, nps, nworkers, gid;
  const char *master;
} want;

static loom_tf_config *parse_ok(const char *json) {
  loom_status *st = loom_status_new();
  loom_tf_config *c = loom_tf_config_parse(json, st);
  cr_assert(c, "parse failed: %s\njson: %s", loom_status_message(st), json ? json : "(env)");
  cr_assert_eq(loom_status_code(st), LOOM_OK);
  loom_status_free(st);
  return c;
}

static void expect_cfg(const loom_tf_config *c, want w) {
  cr_assert_str_eq(loom_tf_config_task_type(c), w.type);
  cr_assert_eq(loom_tf_config_task_id(c), w.id, "task_id %d want %d", loom_tf_config_task_id(c), w.id);
  cr_assert_eq(loom_tf_config_is_chief(c), w.chief, "is_chief %d want %d", loom_tf_config_is_chief(c), w.chief);
  cr_assert_eq(loom_tf_config_num_ps_replicas(c), w.nps, "num_ps %d want %d", loom_tf_config_num_ps_replicas(c),
               w.nps);
  cr_assert_eq(loom_tf_config_num_worker_replicas(c), w.nworkers, "num_workers %d want %d",
               loom_tf_config_num_worker_replicas(c), w.nworkers);
  cr_assert_eq(loom_tf_config_global_id(c), w.gid, "global_id %d want %d", loom_tf_config_global_id(c), w.gid);
  cr_assert_str_eq(loom_tf_config_master(c), w.master);
}

static void check(const char *json, want w) {
  loom_tf_config *c = parse_ok(json);
  expect_cfg(c, w);
  loom_tf_config_free(c);
}

/* Parse must fail with INVALID_ARGUMENT and a message containing each of the
 * NULL-terminated substrings. */
static void expect_err(const char *json, const char *sub1, const char *sub2) {
  loom_status *st = loom_status_new();
  loom_tf_config *c = loom_tf_config_parse(json, st);
  cr_assert_null(c, "parse of %s should fail", json);
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT, "code %s for %s",
               loom_code_name(loom_status_code(st)), json);
  const char *m = loom_status_message(st);
  cr_assert(strstr(m, "TF_CONFIG"), "message '%s' does not say TF_CONFIG", m);
  cr_assert(strstr(m, sub1), "message '%s' does not contain '%s'", m, sub1);
  if (sub2) cr_assert(strstr(m, sub2), "message '%s' does not contain '%s'", m, sub2);
  loom_status_free(st);
  /* NULL status is fine too */
  cr_assert_null(loom_tf_config_parse(json, NULL));
}

/* ----------------------------------------------------------- ModeKeys */
Test(config, mode_keys) {
  cr_assert_str_eq(loom_mode_key(LOOM_MODE_TRAIN), "train");
  cr_assert_str_eq(loom_mode_key(LOOM_MODE_EVAL), "eval");
  cr_assert_str_eq(loom_mode_key(LOOM_MODE_PREDICT), "infer");
  cr_assert_null(loom_mode_key((loom_mode)7));
}

/* ------------------------------------------------------------- params */
Test(config, params_set_get_replace_order) {
  loom_params *p = loom_params_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_params_set(p, "optimizer", "adam", st), LOOM_OK);
  cr_assert_eq(loom_params_set(p, "hidden", "10,20", st), LOOM_OK);
  cr_assert_str_eq(loom_params_get(p, "optimizer"), "adam");
  cr_assert_str_eq(loom_params_get(p, "hidden"), "10,20");
  cr_assert_null(loom_params_get(p, "missing"));
  cr_assert_eq(loom_params_set(p, "optimizer", "sgd", st), LOOM_OK);
  cr_assert_str_eq(loom_params_get(p, "optimizer"), "sgd");
  /* many keys: growth keeps all */
  for (int i = 0; i < 40; i++) {
    char k[16], v[16];
    snprintf(k, sizeof k, "k%d", i);
    snprintf(v, sizeof v, "v%d", i * 3);
    cr_assert_eq(loom_params_set(p, k, v, st), LOOM_OK);
  }
  for (int i = 0; i < 40; i++) {
    char k[16], v[16];
    snprintf(k, sizeof k, "k%d", i);
    snprintf(v, sizeof v, "v%d", i * 3);
    cr_assert_str_eq(loom_params_get(p, k), v);
  }
  loom_params *c = loom_params_copy(p);
  loom_params_free(p); /* the copy is independent */
  cr_assert_str_eq(loom_params_get(c, "optimizer"), "sgd");
  cr_assert_str_eq(loom_params_get(c, "k39"), "v117");
  cr_assert_eq(loom_params_get_int(c, "k39", -1), -1); /* "v117" is not a number */
  loom_params_free(c);
  loom_params *e = loom_params_copy(NULL);
  cr_assert(e);
  cr_assert_null(loom_params_get(e, "x"));
  loom_params_free(e);
  loom_params_free(NULL);
  loom_status_free(st);
}

Test(config, params_numbers) {
  loom_params *p = loom_params_new();
  cr_assert_eq(loom_params_set_double(p, "lr", 0.1, NULL), LOOM_OK);
  cr_assert_str_eq(loom_params_get(p, "lr"), "0.10000000000000001"); /* %.17g */
  cr_assert(loom_params_get_double(p, "lr", 0) == 0.1);              /* exact round trip */
  double odd = 1.0 / 3.0;
  loom_params_set_double(p, "third", odd, NULL);
  cr_assert(loom_params_get_double(p, "third", 0) == odd);
  loom_params_set_double(p, "tiny", 5e-324, NULL);
  cr_assert(loom_params_get_double(p, "tiny", 0) == 5e-324); /* subnormal: strtod says ERANGE, value kept */
  loom_params_set(p, "under", "1e-400", NULL);
  cr_assert(loom_params_get_double(p, "under", 7) == 0.0);
  loom_params_set_double(p, "neg", -2.5e10, NULL);
  cr_assert_str_eq(loom_params_get(p, "neg"), "-25000000000");
  cr_assert(loom_params_get_double(p, "neg", 0) == -2.5e10);

  cr_assert_eq(loom_params_set_int(p, "steps", 1000, NULL), LOOM_OK);
  cr_assert_str_eq(loom_params_get(p, "steps"), "1000");
  cr_assert_eq(loom_params_get_int(p, "steps", -1), 1000);
  cr_assert(loom_params_get_double(p, "steps", -1) == 1000.0);
  loom_params_set_int(p, "min", INT64_MIN, NULL);
  cr_assert_str_eq(loom_params_get(p, "min"), "-9223372036854775808");
  cr_assert_eq(loom_params_get_int(p, "min", 0), INT64_MIN);
  loom_params_set_int(p, "max", INT64_MAX, NULL);
  cr_assert_eq(loom_params_get_int(p, "max", 0), INT64_MAX);

  /* bad numbers -> dflt */
  const char *bad_int[] = {"", "abc", "12abc", "1.5", "3e2", "99999999999999999999", "-99999999999999999999", " 7x",
                           "0x"};
  for (size_t i = 0; i < sizeof bad_int / sizeof *bad_int; i++) {
    loom_params_set(p, "b", bad_int[i], NULL);
    cr_assert_eq(loom_params_get_int(p, "b", 42), 42, "get_int('%s') should give dflt", bad_int[i]);
  }
  const char *bad_dbl[] = {"", "abc", "1.5x", "1e", "--1", "1e999", "0.1 2"};
  for (size_t i = 0; i < sizeof bad_dbl / sizeof *bad_dbl; i++) {
    loom_params_set(p, "b", bad_dbl[i], NULL);
    cr_assert(loom_params_get_double(p, "b", 4.5) == 4.5, "get_double('%s') should give dflt", bad_dbl[i]);
  }
  /* good forms */
  loom_params_set(p, "b", "-17", NULL);
  cr_assert_eq(loom_params_get_int(p, "b", 0), -17);
  loom_params_set(p, "b", "3e2", NULL);
  cr_assert(loom_params_get_double(p, "b", 0) == 300.0);
  loom_params_set(p, "b", ".25", NULL);
  cr_assert(loom_params_get_double(p, "b", 0) == 0.25);
  /* absent key and NULL params */
  cr_assert_eq(loom_params_get_int(p, "absent", 9), 9);
  cr_assert(loom_params_get_double(p, "absent", 9.5) == 9.5);
  cr_assert_null(loom_params_get(NULL, "lr"));
  cr_assert_eq(loom_params_get_int(NULL, "lr", 3), 3);
  cr_assert(loom_params_get_double(NULL, "lr", 3.5) == 3.5);
  cr_assert_null(loom_params_get(p, NULL));
  loom_params_free(p);
}

Test(config, params_bad_arguments) {
  loom_params *p = loom_params_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_params_set(p, NULL, "v", st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "key"), "%s", loom_status_message(st));
  cr_assert_eq(loom_params_set(p, "", "v", st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "key"), "%s", loom_status_message(st));
  cr_assert_eq(loom_params_set(p, "k", NULL, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "'k'"), "%s", loom_status_message(st));
  cr_assert_eq(loom_params_set(NULL, "k", "v", st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_params_set_int(NULL, "k", 1, NULL), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_params_set_double(p, NULL, 1, NULL), LOOM_INVALID_ARGUMENT);
  cr_assert_null(loom_params_get(p, "k"));
  loom_status_free(st);
  loom_params_free(p);
}

/* ---------------------------------------------------------- RunConfig */
Test(config, run_config_defaults) {
  loom_run_config c = loom_run_config_default();
  cr_assert_eq(c.struct_size, sizeof(loom_run_config));
  cr_assert_null(c.model_dir);
  cr_assert_eq(c.has_random_seed, 0);
  cr_assert_eq(c.save_summary_steps, 100);
  cr_assert_eq(c.save_checkpoints_steps, -1);
  cr_assert(c.save_checkpoints_secs == -1.0);
  cr_assert_eq(c.keep_checkpoint_max, 5);
  cr_assert(c.keep_checkpoint_every_n_hours == 10000.0);
  cr_assert_eq(c.log_step_count_steps, 100);
  cr_assert_eq(c.num_threads, 0);
  cr_assert_eq(c.device, LOOM_DEVICE_CPU);
  cr_assert_eq(c.progress_bar, 1);
  cr_assert_eq(c.prefetch, 0);
}

/* ---------------------------------------------------- TF_CONFIG: local */
Test(config, tf_config_local_mode) {
  want local = {"worker", 0, 1, 0, 1, 0, ""};
  check("", local);
  check("  \n", local);
  check("{}", local);
  check("{\"cluster\": {}}", local);
  check("{\"cluster\": null, \"task\": null}", local);
  check("{\"task\": {\"type\": \"worker\", \"index\": 0}}", local);
  check("{\"task\": {\"type\": \"worker\"}}", local);
  check("{\"task\": {\"index\": 0}}", local);
  check("{\"environment\": \"cloud\", \"rpc_layer\": \"grpc\"}", local); /* unknown keys ignored */
  loom_tf_config *c = parse_ok("{\"model_dir\": \"/tmp/m\"}");
  expect_cfg(c, local);
  cr_assert_str_eq(loom_tf_config_model_dir(c), "/tmp/m");
  cr_assert_eq(loom_tf_config_num_tasks(c, "worker"), 0);
  cr_assert_null(loom_tf_config_address(c, "worker", 0));
  loom_tf_config_free(c);
  c = parse_ok("{}");
  cr_assert_null(loom_tf_config_model_dir(c));
  loom_tf_config_free(c);
  /* TF: local mode's master is session_master when given */
  check("{\"session_master\": \"grpc://remote:1\"}", (want){"worker", 0, 1, 0, 1, 0, "grpc://remote:1"});
}

Test(config, tf_config_local_mode_errors) {
  expect_err("{\"task\": {\"type\": \"chief\", \"index\": 0}}", "\"task\".\"type\"", "\"worker\"");
  expect_err("{\"task\": {\"type\": \"ps\", \"index\": 0}}", "\"task\".\"type\"", "ps");
  expect_err("{\"task\": {\"type\": \"evaluator\", \"index\": 0}}", "\"task\".\"type\"", "evaluator");
  expect_err("{\"task\": {\"type\": \"worker\", \"index\": 1}}", "\"task\".\"index\"", "must be 0");
  expect_err("{\"cluster\": {}, \"task\": {\"index\": 3}}", "\"task\".\"index\"", "3");
}

/* ----------------------------------------------- TF_CONFIG: chief cluster */
#define CLUSTER5                                                                                                    \
  "\"cluster\": {\"chief\": [\"host0:2222\"], \"worker\": [\"host1:2222\", \"host2:2222\"], "                       \
  "\"ps\": [\"host3:2222\", \"host4:2222\"]}"

Test(config, tf_config_chief_cluster_every_task) {
  /* order for global ids: chief(1) worker(2) ps(2) -> chief 0, worker 1..2, ps 3..4 */
  check("{" CLUSTER5 ", \"task\": {\"type\": \"chief\", \"index\": 0}}",
        (want){"chief", 0, 1, 2, 3, 0, "grpc://host0:2222"});
  check("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 0}}",
        (want){"worker", 0, 0, 2, 3, 1, "grpc://host1:2222"});
  check("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 1}}",
        (want){"worker", 1, 0, 2, 3, 2, "grpc://host2:2222"});
  check("{" CLUSTER5 ", \"task\": {\"type\": \"ps\", \"index\": 0}}", (want){"ps", 0, 0, 2, 3, 3, "grpc://host3:2222"});
  check("{" CLUSTER5 ", \"task\": {\"type\": \"ps\", \"index\": 1}}", (want){"ps", 1, 0, 2, 3, 4, "grpc://host4:2222"});
  /* the same with the task first and ps listed first in the cluster */
  check("{\"task\": {\"index\": 1, \"type\": \"worker\"}, \"cluster\": {\"ps\": [\"p0:1\", \"p1:1\"], \"worker\": "
        "[\"w0:1\", \"w1:1\"], \"chief\": [\"c0:1\"]}}",
        (want){"worker", 1, 0, 2, 3, 2, "grpc://w1:1"});

  loom_tf_config *c = parse_ok("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 1}, \"model_dir\": "
                               "\"gs://bucket/m\"}");
  cr_assert_str_eq(loom_tf_config_model_dir(c), "gs://bucket/m");
  cr_assert_eq(loom_tf_config_num_tasks(c, "chief"), 1);
  cr_assert_eq(loom_tf_config_num_tasks(c, "worker"), 2);
  cr_assert_eq(loom_tf_config_num_tasks(c, "ps"), 2);
  cr_assert_eq(loom_tf_config_num_tasks(c, "evaluator"), 0);
  cr_assert_eq(loom_tf_config_num_tasks(c, NULL), 0);
  cr_assert_str_eq(loom_tf_config_address(c, "chief", 0), "host0:2222");
  cr_assert_str_eq(loom_tf_config_address(c, "worker", 1), "host2:2222");
  cr_assert_str_eq(loom_tf_config_address(c, "ps", 0), "host3:2222");
  cr_assert_null(loom_tf_config_address(c, "ps", 2));
  cr_assert_null(loom_tf_config_address(c, "ps", -1));
  cr_assert_null(loom_tf_config_address(c, "nope", 0));
  loom_tf_config_free(c);
}

Test(config, tf_config_global_id_alphabetical) {
  /* jobs chief(1), worker(2), alpha(2), ps(2) in JSON order worker, ps, alpha:
   * global order chief, alpha, worker, ps -> chief 0, alpha 1..2, worker 3..4, ps 5..6 */
  const char *cl = "\"cluster\": {\"worker\": [\"w0:1\", \"w1:1\"], \"ps\": [\"p0:1\", \"p1:1\"], \"chief\": "
                   "[\"c0:1\"], \"alpha\": [\"a0:1\", \"a1:1\"]}";
  char buf[512];
  snprintf(buf, sizeof buf, "{%s, \"task\": {\"type\": \"worker\", \"index\": 0}}", cl);
  check(buf, (want){"worker", 0, 0, 2, 3, 3, "grpc://w0:1"});
  snprintf(buf, sizeof buf, "{%s, \"task\": {\"type\": \"worker\", \"index\": 1}}", cl);
  check(buf, (want){"worker", 1, 0, 2, 3, 4, "grpc://w1:1"});
  snprintf(buf, sizeof buf, "{%s, \"task\": {\"type\": \"ps\", \"index\": 1}}", cl);
  check(buf, (want){"ps", 1, 0, 2, 3, 6, "grpc://p1:1"});
  snprintf(buf, sizeof buf, "{%s, \"task\": {\"type\": \"chief\", \"index\": 0}}", cl);
  check(buf, (want){"chief", 0, 1, 2, 3, 0, "grpc://c0:1"});
}

Test(config, tf_config_master_strings) {
  /* a single-node cluster runs locally: master "" */
  check("{\"cluster\": {\"chief\": [\"only:1\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
        (want){"chief", 0, 1, 0, 1, 0, ""});
  /* one job with two tasks is not a single node */
  check("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w:1\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
        (want){"chief", 0, 1, 0, 2, 0, "grpc://c:1"});
  /* an empty ps job still counts as a job (TF's cluster_spec.jobs) */
  check("{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": []}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
        (want){"chief", 0, 1, 0, 1, 0, "grpc://c:1"});
  /* session_master wins */
  check("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 1}, \"session_master\": \"grpc://sm:9\"}",
        (want){"worker", 1, 0, 2, 3, 2, "grpc://sm:9"});
  check("{\"cluster\": {\"chief\": [\"only:1\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}, \"session_master\": "
        "\"local\"}",
        (want){"chief", 0, 1, 0, 1, 0, "local"});
}

Test(config, tf_config_evaluator) {
  want ev = {"evaluator", 0, 0, 0, 0, -1, ""};
  loom_tf_config *c = parse_ok("{" CLUSTER5 ", \"task\": {\"type\": \"evaluator\", \"index\": 0}, \"model_dir\": "
                               "\"/m\"}");
  expect_cfg(c, ev);
  /* not part of the cluster: the cluster is {} */
  cr_assert_eq(loom_tf_config_num_tasks(c, "chief"), 0);
  cr_assert_eq(loom_tf_config_num_tasks(c, "worker"), 0);
  cr_assert_null(loom_tf_config_address(c, "chief", 0));
  cr_assert_str_eq(loom_tf_config_model_dir(c), "/m");
  loom_tf_config_free(c);
  /* master stays "" even with session_master (TF uses eval_session_master for it) */
  check("{" CLUSTER5 ", \"task\": {\"type\": \"evaluator\", \"index\": 0}, \"session_master\": \"grpc://x:1\"}", ev);
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"evaluator\", \"index\": 1}}", "\"task\".\"index\"", "evaluator");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"evaluator\"}}", "\"task\".\"index\"", "must be set");
  /* the cluster still needs its chief (unless it is workers alone: tf_config_worker_only_cluster) */
  expect_err("{\"cluster\": {\"worker\": [\"w:1\"], \"ps\": [\"p:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": "
             "0}}",
             "\"chief\"", NULL);
}

/* A cluster of workers alone (no chief, no ps: TF's MultiWorkerMirroredStrategy convention): worker 0 is
 * the chief; global ids are the worker indices. */
Test(config, tf_config_worker_only_cluster) {
#define WCLUSTER "\"cluster\": {\"worker\": [\"w0:2222\", \"w1:2222\", \"w2:2222\"]}"
  check("{" WCLUSTER ", \"task\": {\"type\": \"worker\", \"index\": 0}}",
        (want){"worker", 0, 1, 0, 3, 0, "grpc://w0:2222"});
  check("{" WCLUSTER ", \"task\": {\"type\": \"worker\", \"index\": 2}}",
        (want){"worker", 2, 0, 0, 3, 2, "grpc://w2:2222"});
  /* the evaluator beside it */
  check("{" WCLUSTER ", \"task\": {\"type\": \"evaluator\", \"index\": 0}}", (want){"evaluator", 0, 0, 0, 0, -1, ""});
  /* one worker alone is still a cluster of one node */
  check("{\"cluster\": {\"worker\": [\"w0:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
        (want){"worker", 0, 1, 0, 1, 0, ""});
  expect_err("{" WCLUSTER ", \"task\": {\"type\": \"worker\", \"index\": 3}}", "\"task\".\"index\"", "\"worker\"");
  expect_err("{" WCLUSTER ", \"task\": {\"type\": \"chief\", \"index\": 0}}", "\"task\".\"type\"", "\"chief\"");
#undef WCLUSTER
}

/* ----------------------------------------------- TF_CONFIG: legacy master */
#define MCLUSTER "\"cluster\": {\"master\": [\"m0:1\"], \"worker\": [\"w0:1\", \"w1:1\", \"w2:1\"], \"ps\": [\"p0:1\"]}"

Test(config, tf_config_legacy_master) {
  /* order: master 0, worker 1..3, ps 4 */
  check("{" MCLUSTER ", \"task\": {\"type\": \"master\", \"index\": 0}}", (want){"master", 0, 1, 1, 4, 0, "grpc://m0:1"});
  check("{" MCLUSTER ", \"task\": {\"type\": \"worker\", \"index\": 0}}", (want){"worker", 0, 0, 1, 4, 1, "grpc://w0:1"});
  check("{" MCLUSTER ", \"task\": {\"type\": \"worker\", \"index\": 2}}", (want){"worker", 2, 0, 1, 4, 3, "grpc://w2:1"});
  check("{" MCLUSTER ", \"task\": {\"type\": \"ps\", \"index\": 0}}", (want){"ps", 0, 0, 1, 4, 4, "grpc://p0:1"});
  check("{\"cluster\": {\"master\": [\"m:1\"]}, \"task\": {\"type\": \"master\", \"index\": 0}}",
        (want){"master", 0, 1, 0, 1, 0, ""});
  /* errors */
  expect_err("{\"cluster\": {\"master\": [\"m:1\"], \"chief\": [\"c:1\"]}, \"task\": {\"type\": \"master\", \"index\": "
             "0}}",
             "\"master\"", "\"chief\"");
  expect_err("{" MCLUSTER ", \"task\": {\"type\": \"evaluator\", \"index\": 0}}", "\"evaluator\"", "\"master\"");
  expect_err("{\"cluster\": {\"master\": [\"m:1\", \"m:2\"]}, \"task\": {\"type\": \"master\", \"index\": 0}}",
             "exactly one \"master\"", NULL);
  expect_err("{" MCLUSTER ", \"task\": {\"type\": \"chief\", \"index\": 0}}", "\"task\".\"type\"", "chief");
}

/* ---------------------------------------------------- TF_CONFIG: errors */
Test(config, tf_config_structure_errors) {
  expect_err("{", "malformed JSON", NULL);
  expect_err("{\"cluster\": }", "malformed JSON", NULL);
  expect_err("{} trailing", "malformed JSON", NULL);
  expect_err("[1, 2]", "top level", NULL);
  expect_err("\"str\"", "top level", NULL);
  expect_err("{\"cluster\": [\"a:1\"]}", "\"cluster\"", "object");
  expect_err("{\"cluster\": {\"worker\": \"w:1\"}}", "\"cluster\".\"worker\"", "array");
  expect_err("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w:1\", 7]}}", "\"cluster\".\"worker\"[1]",
             "string");
  expect_err("{\"cluster\": {\"chief\": {\"0\": \"c:1\"}}}", "\"cluster\".\"chief\"", "array");
  expect_err("{\"cluster\": {\"chief\": [\"c:1\"], \"chief\": [\"d:1\"]}}", "\"chief\"", "twice");
  expect_err("{\"task\": [\"worker\", 0]}", "\"task\"", "object");
  expect_err("{\"task\": {\"type\": 3, \"index\": 0}}", "\"task\".\"type\"", "string");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 1.5}}", "\"task\".\"index\"", "integer");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": \"1\"}}", "\"task\".\"index\"", "integer");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": true}}", "\"task\".\"index\"", "integer");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 1e12}}", "\"task\".\"index\"", "integer");
  expect_err("{\"task\": {\"type\": \"worker\", \"index\": 0.5}}", "\"task\".\"index\"", "integer");
  expect_err("{\"model_dir\": 5}", "\"model_dir\"", "string");
  expect_err("{\"session_master\": [\"x\"]}", "\"session_master\"", "string");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"trainer\", \"index\": 0}}", "\"task\".\"type\"", "trainer");
}

Test(config, tf_config_distributed_errors) {
  /* no chief (with a ps job: a cluster of workers alone is a collective job) / two chiefs */
  expect_err("{\"cluster\": {\"worker\": [\"w:1\", \"w:2\"], \"ps\": [\"p:1\"]}, \"task\": {\"type\": \"worker\", "
             "\"index\": 0}}",
             "\"cluster\"", "one \"chief\"");
  expect_err("{\"cluster\": {\"ps\": [\"p:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}", "\"cluster\"",
             "one \"chief\"");
  expect_err("{\"cluster\": {\"chief\": [\"c:1\", \"c:2\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
             "exactly one \"chief\"", "2");
  expect_err("{\"cluster\": {\"chief\": []}, \"task\": {\"type\": \"chief\", \"index\": 0}}", "exactly one \"chief\"",
             NULL);
  /* task type and index required */
  expect_err("{" CLUSTER5 "}", "\"task\".\"type\"", "must be set");
  expect_err("{" CLUSTER5 ", \"task\": {\"index\": 0}}", "\"task\".\"type\"", "must be set");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"\", \"index\": 0}}", "\"task\".\"type\"", "must be set");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\"}}", "\"task\".\"index\"", "must be set");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": null}}", "\"task\".\"index\"", "must be set");
  /* in range */
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": -1}}", "\"task\".\"index\"", "non-negative");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"worker\", \"index\": 2}}", "\"task\".\"index\"", "\"worker\"");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"chief\", \"index\": 1}}", "\"task\".\"index\"", "\"chief\"");
  expect_err("{" CLUSTER5 ", \"task\": {\"type\": \"ps\", \"index\": 2}}", "\"task\".\"index\"", "2 tasks");
  /* type must be a job of the cluster */
  expect_err("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w:1\"]}, \"task\": {\"type\": \"ps\", \"index\": "
             "0}}",
             "\"task\".\"type\"", "\"ps\"");
}

/* Every address of the cluster is checked at parse time, whatever the task (the evaluator's cluster
 * included): the error names the job, the index and the address. */
Test(config, tf_config_malformed_addresses) {
  static const struct {
    const char *addr, *why;
  } bad[] = {{"127.0.0.1:abc", "not a number"}, {"127.0.0.1:65536", "out of range"},
             {"127.0.0.1:99999999999999999999", "out of range"}, {":2222", "empty host"},
             {"127.0.0.1", "no \":port\""}, {"", "is empty"}, {"127.0.0.1:", "empty port"},
             {"::1:2222", "[brackets]"}, {"[::1:2222", "[IPv6]"}, {"h st:1", "character ' '"},
             {"host:-1", "not a number"}, {"[]:1", "[IPv6]"}};
  static const char *const types[] = {"chief", "worker", "ps", "evaluator"};
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
    for (size_t t = 0; t < 4; t++) {
      char js[512], where[128];
      snprintf(js, sizeof js,
               "{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w:1\"], \"ps\": [\"p:1\", \"%s\"]}, "
               "\"task\": {\"type\": \"%s\", \"index\": 0}}",
               bad[b].addr, types[t]);
      snprintf(where, sizeof where, "\"cluster\".\"ps\"[1] address \"%s\"", bad[b].addr);
      expect_err(js, where, bad[b].why);
    }
  /* valid forms: names, IPv4, [IPv6], port 0 (published through model_dir) and 65535 */
  loom_tf_config *c = parse_ok("{\"cluster\": {\"chief\": [\"tfjob-chief-0.default.svc:2222\"], \"ps\": "
                               "[\"[::1]:0\", \"10.0.0.5:65535\", \"my_host-1:0\"]}, \"task\": {\"type\": \"ps\", "
                               "\"index\": 0}}");
  cr_expect_str_eq(loom_tf_config_address(c, "ps", 0), "[::1]:0");
  loom_tf_config_free(c);
}

/* ------------------------------------------------ TF_CONFIG: environment */
Test(config, tf_config_from_env) {
  cr_assert_eq(unsetenv("TF_CONFIG"), 0);
  loom_tf_config *c = parse_ok(NULL);
  expect_cfg(c, (want){"worker", 0, 1, 0, 1, 0, ""});
  loom_tf_config_free(c);

  cr_assert_eq(setenv("TF_CONFIG", "", 1), 0);
  c = parse_ok(NULL);
  expect_cfg(c, (want){"worker", 0, 1, 0, 1, 0, ""});
  loom_tf_config_free(c);

  cr_assert_eq(setenv("TF_CONFIG", "{" CLUSTER5 ", \"task\": {\"type\": \"ps\", \"index\": 1}, \"model_dir\": \"/e\"}",
                      1),
               0);
  c = parse_ok(NULL);
  expect_cfg(c, (want){"ps", 1, 0, 2, 3, 4, "grpc://host4:2222"});
  cr_assert_str_eq(loom_tf_config_model_dir(c), "/e");
  loom_tf_config_free(c);
  /* an explicit string takes precedence over the environment */
  c = parse_ok("{}");
  expect_cfg(c, (want){"worker", 0, 1, 0, 1, 0, ""});
  loom_tf_config_free(c);

  cr_assert_eq(setenv("TF_CONFIG", "{\"task\": {\"type\": \"ps\"}}", 1), 0);
  expect_err(NULL, "\"task\".\"type\"", NULL);
  cr_assert_eq(setenv("TF_CONFIG", "not json", 1), 0);
  expect_err(NULL, "malformed JSON", NULL);
  unsetenv("TF_CONFIG");
}

Test(config, tf_config_null_accessors) {
  loom_tf_config_free(NULL);
  cr_assert_null(loom_tf_config_task_type(NULL));
  cr_assert_null(loom_tf_config_master(NULL));
  cr_assert_null(loom_tf_config_model_dir(NULL));
  cr_assert_eq(loom_tf_config_num_tasks(NULL, "worker"), 0);
  cr_assert_null(loom_tf_config_address(NULL, "worker", 0));
  cr_assert_eq(loom_tf_config_global_id(NULL), -1);
}

/* ----------------------------------------------------------- features */
Test(config, features_map) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 1, (int64_t[]){-1}, "x");
  loom_output y = loom_placeholder(g, LOOM_F32, 1, (int64_t[]){-1}, "y");
  loom_features *f = loom_features_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_features_count(f), 0);
  cr_assert_null(loom_features_get(f, "x").node);
  cr_assert_eq(loom_features_add(f, "x", x, st), LOOM_OK);
  cr_assert_eq(loom_features_add(f, "age", y, st), LOOM_OK);
  cr_assert_eq(loom_features_count(f), 2);
  /* insertion order */
  cr_assert_str_eq(loom_features_name(f, 0), "x");
  cr_assert_str_eq(loom_features_name(f, 1), "age");
  cr_assert_eq(loom_features_at(f, 0).node, x.node);
  cr_assert_eq(loom_features_at(f, 1).node, y.node);
  cr_assert_eq(loom_features_get(f, "age").node, y.node);
  cr_assert_eq(loom_features_get(f, "age").index, y.index);
  /* absent */
  loom_output none = loom_features_get(f, "height");
  cr_assert_null(none.node);
  cr_assert_eq(none.index, 0);
  cr_assert_null(loom_features_get(f, NULL).node);
  cr_assert_null(loom_features_name(f, 2));
  cr_assert_null(loom_features_name(f, -1));
  cr_assert_null(loom_features_at(f, 5).node);
  /* duplicate */
  cr_assert_eq(loom_features_add(f, "x", y, st), LOOM_ALREADY_EXISTS);
  cr_assert(strstr(loom_status_message(st), "'x'"), "%s", loom_status_message(st));
  cr_assert_eq(loom_features_count(f), 2);
  cr_assert_eq(loom_features_get(f, "x").node, x.node); /* unchanged */
  /* bad names */
  cr_assert_eq(loom_features_add(f, NULL, x, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_features_add(f, "", x, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "name"), "%s", loom_status_message(st));
  cr_assert_eq(loom_features_add(NULL, "z", x, NULL), LOOM_INVALID_ARGUMENT);
  /* growth */
  for (int i = 0; i < 30; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    cr_assert_eq(loom_features_add(f, name, (i % 2) ? x : y, st), LOOM_OK);
  }
  cr_assert_eq(loom_features_count(f), 32);
  cr_assert_str_eq(loom_features_name(f, 31), "f29");
  cr_assert_eq(loom_features_get(f, "f29").node, x.node);
  cr_assert_eq(loom_features_get(f, "f28").node, y.node);
  cr_assert_eq(loom_features_count(NULL), 0);
  cr_assert_null(loom_features_get(NULL, "x").node);
  loom_features_free(f);
  loom_features_free(NULL);
  loom_status_free(st);
  loom_graph_free(g);
}
