/* tests/gpu/test_optim_fallback_cuda.c - the optimizer ops without a CUDA
 * kernel (ApplyProximalGradientDescent, ApplyProximalAdagrad,
 * ApplyAdagradDA and their SparseApply forms) in a CUDA session: they run on
 * the CPU with copies (the variable and its slots down, updated, back up),
 * so a CUDA session trains to the same values as a CPU session. A model
 * with a dense layer (the Apply ops) and an embedding (a sparse gradient
 * with repeated ids: the SparseApply ops) trains 4 steps with each
 * optimizer in both sessions; the losses, the variables and the slots are
 * compared after every step. Skips without a CUDA device. */
#include "tests/gpu/parity.h"

enum { B = 8, IN = 4, E = 6, D = 3 };

/* the CPU fallbacks the session logged, per op name */
static int g_fallbacks;
static const char *g_expect[2];
static void on_log(loom_log_level level, const char *msg, void *user) {
  (void)level;
  (void)user;
  for (int i = 0; i < 2; i++) {
    char pat[96];
    snprintf(pat, sizeof pat, "op %s has no", g_expect[i]);
    if (g_expect[i] && strstr(msg, pat)) g_fallbacks |= 1 << i;
  }
}

static loom_optimizer *make_opt(int kind, loom_output lr) {
  if (kind == 0) {
    loom_proximal_gradient_descent_options o = loom_proximal_gradient_descent_options_default();
    o.l1 = 0.01;
    o.l2 = 0.05;
    return loom_optimizer_proximal_gradient_descent(lr, &o);
  }
  if (kind == 1) {
    loom_proximal_adagrad_options o = loom_proximal_adagrad_options_default();
    o.l1 = 0.01;
    o.l2 = 0.05;
    return loom_optimizer_proximal_adagrad(lr, &o);
  }
  loom_adagrad_da_options o = loom_adagrad_da_options_default();
  o.l1 = 0.01;
  o.l2 = 0.05;
  return loom_optimizer_adagrad_da(lr, &o);
}

static void train_case(int kind) {
  static const char *const names[3] = {"ProximalGradientDescent", "ProximalAdagrad", "AdagradDA"};
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {B, IN}, yd[2] = {B, 1}, ed[2] = {E, D}, vd[2] = {D, 1}, idd[1] = {B};
  static const int32_t ids[B] = {0, 2, 2, 5, 1, 0, 3, 2}; /* row 4 never, rows 0 and 2 repeated */
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x"), y = loom_placeholder(g, LOOM_F32, 2, yd, "y");
  loom_initializer ei = loom_init_random_normal(0, 0.3, 7), vi = loom_init_random_normal(0, 0.3, 8);
  loom_variable *emb = loom_get_variable(g, "emb", LOOM_F32, 2, ed, &ei, 1);
  loom_variable *v = loom_get_variable(g, "v", LOOM_F32, 2, vd, &vi, 1);
  loom_output rows = loom_gather(g, loom_variable_output(emb), loom_const_data(g, LOOM_I32, 1, idd, ids, "ids"), 0, NULL);
  loom_output pred = loom_add(g, parity_dense(g, x, IN, 1, 0, "fc"),
                              loom_matmul(g, rows, loom_variable_output(v), 0, 0, NULL), NULL);
  loom_output loss = loom_reduce_mean(g, loom_square(g, loom_sub(g, pred, y, NULL), NULL), -1, NULL, 0, NULL);
  loom_optimizer *opt = make_opt(kind, loom_const_f32(g, 0.1f, NULL));
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_or_create_global_step(g), NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *cpu = session(g, LOOM_DEVICE_CPU), *gpu = session(g, LOOM_DEVICE_CUDA);
  if (!parity_check(train && init && cpu && gpu, "%s: building the model and its sessions", names[kind])) goto done;
  char dense_op[64], sparse_op[64];
  snprintf(dense_op, sizeof dense_op, "Apply%s", names[kind]);
  snprintf(sparse_op, sizeof sparse_op, "SparseApply%s", names[kind]);
  g_expect[0] = dense_op;
  g_expect[1] = sparse_op;
  g_fallbacks = 0;
  run(cpu, "init", NULL, NULL, 0, NULL, NULL, 0, &init, 1);
  run(gpu, "init", NULL, NULL, 0, NULL, NULL, 0, &init, 1);
  loom_tensor *fx = rand_tensor(LOOM_F32, 2, xd, 0), *fy = rand_tensor(LOOM_F32, 2, yd, 0);
  loom_output feeds[2] = {x, y};
  loom_tensor *fv[2] = {fx, fy};
  for (int step = 1; step <= 4; step++) {
    char what[160];
    loom_tensor *lc = NULL, *lg = NULL;
    snprintf(what, sizeof what, "%s step %d loss", names[kind], step);
    run(cpu, what, feeds, fv, 2, &loss, &lc, 1, &train, 1);
    run(gpu, what, feeds, fv, 2, &loss, &lg, 1, &train, 1);
    if (lc && lg) compare(what, lc, lg, 1e-5);
    loom_tensor_free(lc);
    loom_tensor_free(lg);
    int nv = 0;
    loom_variable *const *vars = loom_global_variables(g, &nv);
    for (int i = 0; i < nv; i++) {
      const char *vn = loom_variable_name(vars[i]);
      loom_tensor *a = NULL, *b = NULL;
      loom_status *st = loom_status_new();
      loom_code rc = loom_session_read_variable(cpu, vn, &a, st);
      if (!rc) rc = loom_session_read_variable(gpu, vn, &b, st);
      snprintf(what, sizeof what, "%s step %d variable %s", names[kind], step, vn);
      if (parity_check(rc == LOOM_OK, "%s: %s", what, loom_status_message(st))) compare(what, a, b, 1e-5);
      loom_status_free(st);
      loom_tensor_free(a);
      loom_tensor_free(b);
    }
  }
  parity_check(g_fallbacks == 3, "%s: the CUDA session ran %s and %s on the CPU (logged: %d)", names[kind], dense_op,
               sparse_op, g_fallbacks);
  g_expect[0] = g_expect[1] = NULL;
  loom_tensor_free(fx);
  loom_tensor_free(fy);
done:
  loom_session_free(cpu);
  loom_session_free(gpu);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

int main(void) {
  if (!parity_gpu_present("test_optim_fallback_cuda")) return 0;
  loom_log_set(on_log, NULL, LOOM_LOG_INFO);
  for (int kind = 0; kind < 3; kind++) train_case(kind);
  return parity_report("test_optim_fallback_cuda");
}
