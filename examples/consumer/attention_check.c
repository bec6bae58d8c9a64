/* A small fa8 consumer: FP8 attention forward + backward on the CPU through fa8.h alone, checked against a
 * plain FP64 attention written here. Built three ways by tools/examples (against an install via pkg-config,
 * as a Meson subproject, from a generated bundle); exits 0 only when the results are right.
 *
 * Problem: B=1, S=100 (tails for every tile size), 4 query heads on 2 KV heads, d=64, causal. Checks: the
 * forward's O within 5% (FP8 operands) of the FP64 attention on the original inputs; the backward's dV
 * likewise; Delta-Matching's dS row sums (before the FP8 cast) at FP32 rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa8.h"

enum { B = 1, S = 100, H = 4, HKV = 2, D = 64 };

#define CHECK(call) do { fa8_status s_ = (call); if (s_ != FA8_OK) { \
    fprintf(stderr, "%s failed: %s\n", #call, fa8_last_error()); return 1; } } while (0)

static float urand(unsigned *s) { *s = *s * 1664525u + 1013904223u; return (float)((*s >> 8) * (1.0 / 16777216.0)) * 2 - 1; }

static fa8_tensor seq_tensor(void *data, fa8_dtype t, int heads, int d) {
  fa8_tensor x = { data, t, { (int64_t)S * heads * d, (int64_t)heads * d, d, 1 } };
  return x;
}

static int quantize(float *x, int heads, fa8_fmt fmt, fa8_qtensor *q) {
  fa8_quant_problem qp;
  fa8_quant_problem_init(&qp);
  qp.batch = B; qp.seqlen = S; qp.heads = heads; qp.hdim = D; qp.fmt = fmt; qp.scale_rows = 64;
  memset(q, 0, sizeof *q);
  q->data = seq_tensor(malloc((size_t)S * heads * D), FA8_DTYPE_FP8, heads, D);
  q->scales = malloc(sizeof(float) * (size_t)fa8_quant_scale_count(&qp));
  const fa8_tensor in = seq_tensor(x, FA8_DTYPE_F32, heads, D);
  CHECK(fa8_quantize(&qp, &in, q, NULL, 0, NULL));
  return 0;
}

/* FP64 attention with its backward, GQA by head groups, causal (bottom-right = top-left here: Sq = Sk) */
static void reference(const float *q, const float *k, const float *v, const float *dout, double *o, double *dv) {
  const double c = 1.0 / sqrt(D);
  memset(dv, 0, sizeof(double) * S * HKV * D);
  for (int h = 0; h < H; ++h) {
    const int kh = h / (H / HKV);
    for (int i = 0; i < S; ++i) {
      double p[S], m = -INFINITY, l = 0;
      for (int j = 0; j <= i; ++j) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += (double)q[(i * H + h) * D + d] * k[(j * HKV + kh) * D + d];
        p[j] = s * c;
        m = fmax(m, p[j]);
      }
      for (int j = 0; j <= i; ++j) l += (p[j] = exp(p[j] - m));
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j <= i; ++j) acc += p[j] / l * v[(j * HKV + kh) * D + d];
        o[(i * H + h) * D + d] = acc;
      }
      for (int j = 0; j <= i; ++j)
        for (int d = 0; d < D; ++d) dv[(j * HKV + kh) * D + d] += p[j] / l * dout[(i * H + h) * D + d];
    }
  }
}

static double rel_err(const float *x, const double *ref, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) { num += (x[i] - ref[i]) * (x[i] - ref[i]); den += ref[i] * ref[i]; }
  return sqrt(num / den);
}

int main(void) {
  static float q[S * H * D], k[S * HKV * D], v[S * HKV * D], dout[S * H * D];
  unsigned seed = 12345;
  for (int i = 0; i < S * H * D; ++i) { q[i] = urand(&seed); dout[i] = urand(&seed); }
  for (int i = 0; i < S * HKV * D; ++i) { k[i] = urand(&seed); v[i] = urand(&seed); }

  fa8_qtensor qq, kq, vq, doq;
  if (quantize(q, H, FA8_FMT_E4M3, &qq) || quantize(k, HKV, FA8_FMT_E4M3, &kq) || quantize(v, HKV, FA8_FMT_E4M3, &vq) ||
      quantize(dout, H, FA8_FMT_E4M3, &doq))
    return 1;

  fa8_problem p;
  fa8_problem_init(&p);   /* CPU backend, delta = matched */
  p.batch = B; p.seqlen_q = p.seqlen_k = S; p.heads = H; p.kv_heads = HKV; p.hdim_qk = p.hdim_v = D; p.causal = 1;
  p.collect_stats = 1;
  fa8_dispatch_names names;
  CHECK(fa8_dispatch(&p, &names));
  printf("fa8 %s: forward %s\n  (%s)\nbackward %s\n", FA8_VERSION_STRING, names.fwd, names.fwd_why, names.bwd);

  static uint16_t o[S * H * D];
  static float o32[S * H * D], lse[H * S], delta[H * S], dq[S * H * D], dk[S * HKV * D], dvv[S * HKV * D];
  fa8_fwd_tensors f;
  memset(&f, 0, sizeof f);
  f.q = qq; f.k = kq; f.v = vq;
  f.o = seq_tensor(o, FA8_DTYPE_BF16, H, D);
  f.o_f32 = seq_tensor(o32, FA8_DTYPE_F32, H, D);
  const fa8_tensor rows = { lse, FA8_DTYPE_F32, { (int64_t)H * S, S, 1, 0 } };
  f.lse = rows;
  CHECK(fa8_forward(&p, &f, NULL, 0, NULL));

  fa8_rowsum_stats stats;
  fa8_bwd_tensors b;
  memset(&b, 0, sizeof b);
  b.q = qq; b.k = kq; b.v = vq; b.dout_q = doq;
  b.dout = seq_tensor(dout, FA8_DTYPE_F32, H, D);
  b.o = f.o; b.lse = f.lse;
  b.delta = rows;
  b.delta.data = delta;
  b.dq = seq_tensor(dq, FA8_DTYPE_F32, H, D);
  b.dk = seq_tensor(dk, FA8_DTYPE_F32, HKV, D);
  b.dv = seq_tensor(dvv, FA8_DTYPE_F32, HKV, D);
  b.stats = &stats;
  size_t ws_bytes = 0;
  CHECK(fa8_backward_workspace(&p, &ws_bytes));
  void *ws = ws_bytes ? malloc(ws_bytes) : NULL;
  CHECK(fa8_backward(&p, &b, ws, ws_bytes, NULL));

  static double ro[S * H * D], rdv[S * HKV * D];
  reference(q, k, v, dout, ro, rdv);
  const double eo = rel_err(o32, ro, S * H * D), ev = rel_err(dvv, rdv, S * HKV * D);
  printf("O error %.2e, dV error %.2e vs FP64; matched dS row sums before the cast %.1e (rounding-aware max)\n", eo, ev,
         stats.pre_ra_max);
  const int ok = eo < 5e-2 && ev < 5e-2 && stats.pre_ra_max < 1e-5 && stats.rows == (int64_t)B * H * S;
  printf("%s\n", ok ? "OK" : "FAILED");
  free(ws);
  return ok ? 0 : 1;
}
