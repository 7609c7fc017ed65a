/* The floor: an MLP 784-512-256-10 training step hand-written in plain C +
 * OpenBLAS, no framework. Same recipe, flags and output keys as
 * bench/mlp_train.c, so loom's overhead is a ratio measured in one run.
 *   --opt sgd|adam --lr F --epochs N --threads N --seed N --steps N (0 = full epochs)
 */
#include <cblas.h>
#include <math.h>
#include <xmmintrin.h>
#include <pmmintrin.h>
#include "bench_util.h"

#define B 128
static const int L[4] = {784, 512, 256, 10};

typedef struct {
  float *w[3], *b[3], *dw[3], *db[3];
  float *mw[3], *vw[3], *mb[3], *vb[3];
  float *h[3];   /* activations after relu (h[2] = logits) */
  float *dh[3];
  float *x;
} net;

static double blas_us;

static void gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *Bm, int ldb, float beta,
                 float *C, int ldc) {
  double t = bu_now_us();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda,
              Bm, ldb, beta, C, ldc);
  blas_us += bu_now_us() - t;
}

static float *falloc(int64_t n) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  memset(p, 0, (size_t)n * 4);
  return p;
}

static void forward(net *m, int bs) {
  const float *in = m->x;
  for (int l = 0; l < 3; l++) {
    int NI = L[l], NO = L[l + 1];
    float *h = m->h[l];
    for (int r = 0; r < bs; r++) memcpy(h + (int64_t)r * NO, m->b[l], (size_t)NO * 4);
    gemm(0, 0, bs, NO, NI, in, NI, m->w[l], NO, 1.0f, h, NO);
    if (l < 2)
      for (int64_t i = 0; i < (int64_t)bs * NO; i++) h[i] = h[i] > 0 ? h[i] : 0;
    in = h;
  }
}

/* mean softmax cross-entropy; writes dlogits into dh[2]; returns loss */
static float xent(net *m, const uint8_t *y, int bs) {
  float loss = 0;
  for (int r = 0; r < bs; r++) {
    float *z = m->h[2] + r * 10, *d = m->dh[2] + r * 10;
    float mx = z[0];
    for (int k = 1; k < 10; k++) mx = z[k] > mx ? z[k] : mx;
    float s = 0;
    for (int k = 0; k < 10; k++) s += (d[k] = expf(z[k] - mx));
    loss += logf(s) + mx - z[y[r]];
    for (int k = 0; k < 10; k++) d[k] = (d[k] / s - (k == y[r])) / (float)bs;
  }
  return loss / (float)bs;
}

static void backward(net *m, int bs) {
  for (int l = 2; l >= 0; l--) {
    int NI = L[l], NO = L[l + 1];
    const float *in = l ? m->h[l - 1] : m->x;
    float *d = m->dh[l];
    gemm(1, 0, NI, NO, bs, in, NI, d, NO, 0.0f, m->dw[l], NO);
    for (int o = 0; o < NO; o++) m->db[l][o] = 0;
    for (int r = 0; r < bs; r++)
      for (int o = 0; o < NO; o++) m->db[l][o] += d[(int64_t)r * NO + o];
    if (l) {
      float *dp = m->dh[l - 1];
      gemm(0, 1, bs, NI, NO, d, NO, m->w[l], NO, 0.0f, dp, NI);
      const float *hp = m->h[l - 1];
      for (int64_t i = 0; i < (int64_t)bs * NI; i++) dp[i] = hp[i] > 0 ? dp[i] : 0;
    }
  }
}

static void update(net *m, int adam, float lr, int64_t t) {
  float lr_t = lr;
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  if (adam) lr_t = lr * sqrtf(1 - powf(b2, (float)t)) / (1 - powf(b1, (float)t));
  for (int l = 0; l < 3; l++) {
    int64_t nw = (int64_t)L[l] * L[l + 1];
    for (int part = 0; part < 2; part++) {
      float *restrict w = part ? m->b[l] : m->w[l];
      const float *restrict g = part ? m->db[l] : m->dw[l];
      int64_t n = part ? L[l + 1] : nw;
      if (!adam) {
        for (int64_t i = 0; i < n; i++) w[i] -= lr * g[i];
      } else {
        float *restrict mm = part ? m->mb[l] : m->mw[l], *restrict vv = part ? m->vb[l] : m->vw[l];
        for (int64_t i = 0; i < n; i++) {
          mm[i] = mm[i] + (g[i] - mm[i]) * (1 - b1);
          vv[i] = vv[i] + (g[i] * g[i] - vv[i]) * (1 - b2);
          w[i] -= lr_t * mm[i] / (sqrtf(vv[i]) + eps);
        }
      }
    }
  }
}

int main(int argc, char **argv) {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  const char *opt = bu_flag(argc, argv, "--opt", "sgd");
  int adam = !strcmp(opt, "adam");
  float lr = (float)atof(bu_flag(argc, argv, "--lr", adam ? "0.001" : "0.1"));
  int epochs = atoi(bu_flag(argc, argv, "--epochs", "1"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  int64_t max_steps = atoll(bu_flag(argc, argv, "--steps", "0"));
  uint64_t seed = (uint64_t)atoll(bu_flag(argc, argv, "--seed", "1")) * 0x9E3779B97F4A7C15ull + 1;
  openblas_set_num_threads(threads);
  bu_mnist d;
  if (bu_load_fashion(&d, bu_flag(argc, argv, "--data", BU_FASHION_DIR))) return 1;
  net m;
  memset(&m, 0, sizeof m);
  uint64_t st = seed;
  for (int l = 0; l < 3; l++) {
    int64_t nw = (int64_t)L[l] * L[l + 1];
    m.w[l] = falloc(nw);
    m.b[l] = falloc(L[l + 1]);
    bu_init_uniform(m.w[l], nw, L[l], &st);
    bu_init_uniform(m.b[l], L[l + 1], L[l], &st);
    m.dw[l] = falloc(nw);
    m.db[l] = falloc(L[l + 1]);
    m.mw[l] = falloc(nw);
    m.vw[l] = falloc(nw);
    m.mb[l] = falloc(L[l + 1]);
    m.vb[l] = falloc(L[l + 1]);
    m.h[l] = falloc((int64_t)B * L[l + 1]);
    m.dh[l] = falloc((int64_t)B * L[l + 1]);
  }
  m.x = falloc((int64_t)B * 784);
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)d.ntrain);
  for (int64_t i = 0; i < d.ntrain; i++) idx[i] = (int32_t)i;
  int64_t steps_per_epoch = d.ntrain / B;
  int64_t total = max_steps > 0 ? max_steps : steps_per_epoch * epochs;
  double *times = malloc(sizeof(double) * (size_t)total);
  uint8_t yb[B];
  uint64_t shuf = seed ^ 0xABCDEF;
  int64_t t = 0;
  double blas_total = 0, step_total = 0;
  float loss = 0;
  for (int64_t s = 0; s < total; s++) {
    int64_t k = s % steps_per_epoch;
    if (k == 0) bu_shuffle(idx, d.ntrain, &shuf);
    double t0 = bu_now_us();
    blas_us = 0;
    for (int r = 0; r < B; r++) {
      const uint8_t *px = d.train_x + (int64_t)idx[k * B + r] * 784;
      float *xr = m.x + (int64_t)r * 784;
      for (int j = 0; j < 784; j++) xr[j] = (float)px[j] * (1.0f / 255.0f);
      yb[r] = d.train_y[idx[k * B + r]];
    }
    forward(&m, B);
    loss = xent(&m, yb, B);
    backward(&m, B);
    update(&m, adam, lr, ++t);
    times[s] = bu_now_us() - t0;
    blas_total += blas_us;
    step_total += times[s];
  }
  /* test accuracy */
  int64_t correct = 0;
  for (int64_t s = 0; s + B <= d.ntest; s += B) {
    for (int r = 0; r < B; r++)
      for (int j = 0; j < 784; j++) m.x[(int64_t)r * 784 + j] = (float)d.test_x[(s + r) * 784 + j] / 255.0f;
    forward(&m, B);
    for (int r = 0; r < B; r++) {
      int am = 0;
      for (int c = 1; c < 10; c++)
        if (m.h[2][r * 10 + c] > m.h[2][r * 10 + am]) am = c;
      correct += am == d.test_y[s + r];
    }
  }
  int64_t tested = d.ntest / B * B;
  double med = bu_median(times, (int)total);
  printf("impl=floor\nopt=%s\nthreads=%d\nsteps=%lld\nfinal_loss=%.4f\n", opt, threads, (long long)total, loss);
  printf("step_us=%.1f\nsteps_per_sec=%.1f\ntest_accuracy=%.4f\npeak_rss_mb=%.1f\nblas_fraction=%.3f\n", med,
         1e6 / med, (double)correct / (double)tested, bu_peak_rss_mb(), blas_total / step_total);
  return 0;
}
