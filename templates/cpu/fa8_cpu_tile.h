/* CPU tile operations used by the generated portable-C kernels (the templates in templates/cpu).
 * They implement docs/numerics.md literally. Every reduction runs sequentially over its index, and the loops
 * are ordered so the innermost loop runs over independent outputs: compilers vectorize them without
 * reassociating a sum, so results do not depend on the vector width or the compiler. */
#ifndef FA8_CPU_TILE_H
#define FA8_CPU_TILE_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "fa8_fp8.h"
#include "fa8_kernel_abi.h"

#define FA8_LOG2E 1.44269504088896340736f
#define FA8_LN2 0.693147180559945309417f

static inline int fa8_cpu_min(int a, int b) { return a < b ? a : b; }
static inline int fa8_cpu_max(int a, int b) { return a > b ? a : b; }

/* Scale of sequence row `row` of (b, head). */
static inline float fa8_cpu_scale(const fa8_scales *s, int b, int h, int row) {
  return s->ptr[(int64_t)b * s->sb + (int64_t)h * s->sh + row / s->rows];
}

static inline const void *fa8_cpu_row(const fa8_cten *t, int b, int s, int h, int esize) {
  return (const char *)t->ptr + ((int64_t)b * t->sb + (int64_t)s * t->ss + (int64_t)h * t->sh) * esize;
}
static inline void *fa8_cpu_row_out(const fa8_ten *t, int b, int s, int h, int esize) {
  return (char *)t->ptr + ((int64_t)b * t->sb + (int64_t)s * t->ss + (int64_t)h * t->sh) * esize;
}

/* Decode one operand row to FP32 code values (scales are applied to tile products, not here).
 * The f32 pseudo-format (quantization off, tests only) stores plain floats. */
static inline void fa8_cpu_decode_row(float *dst, const void *src, int n, fa8_fmt fmt) {
  if (fmt == FA8_FMT_F32) { memcpy(dst, src, (size_t)n * sizeof(float)); return; }
  const uint8_t *c = (const uint8_t *)src;
  for (int i = 0; i < n; ++i) dst[i] = fa8_decode(fmt, c[i]);
}

/* Cast to a format and back, as an FP8 MMA operand would see it (code value, scale excluded). */
static inline float fa8_cpu_cast(fa8_fmt fmt, float x) {
  return fmt == FA8_FMT_F32 ? x : fa8_decode(fmt, fa8_encode(fmt, x));
}

static inline float fa8_cpu_load_bf16(const void *p, int k) { return fa8_f32_from_bf16(((const uint16_t *)p)[k]); }
static inline float fa8_cpu_load_in(const void *p, int k, fa8_intype t) {
  return t == FA8_IN_BF16 ? fa8_cpu_load_bf16(p, k) : ((const float *)p)[k];
}

/* C[m][n] = sum_k A[m][k] * Bt[k][n], sequential over k.  A: lda, Bt: ldb, C: ldc (row-major). */
static inline void fa8_cpu_mm_abt(float *restrict C, int ldc, const float *restrict A, int lda,
                                  const float *restrict Bt, int ldb, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    float *restrict c = C + (int64_t)i * ldc;
    for (int j = 0; j < n; ++j) c[j] = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
      const float a = A[(int64_t)i * lda + kk];
      const float *restrict b = Bt + (int64_t)kk * ldb;
      for (int j = 0; j < n; ++j) c[j] += a * b[j];
    }
  }
}

/* C[m][n] = sum_k At[k][m] * B[k][n], sequential over k (a transposed-A product: Pt.dO, dSt.Q). */
static inline void fa8_cpu_mm_atb(float *restrict C, int ldc, const float *restrict At, int lda,
                                  const float *restrict B, int ldb, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    float *restrict c = C + (int64_t)i * ldc;
    for (int j = 0; j < n; ++j) c[j] = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
      const float a = At[(int64_t)kk * lda + i];
      const float *restrict b = B + (int64_t)kk * ldb;
      for (int j = 0; j < n; ++j) c[j] += a * b[j];
    }
  }
}

/* acc[m][n] += f * T[m][n]: a tile product joins its accumulator after its descale. */
static inline void fa8_cpu_axpy_tile(float *restrict acc, int lda, const float *restrict T, int ldt, int m, int n,
                                     float f) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) acc[(int64_t)i * lda + j] += f * T[(int64_t)i * ldt + j];
}

/* Logits of a tile in the log2 domain: t_ij = raw_ij * ((sq_i * sk_j) * (c * log2 e)); masked -> -inf.
 * Causal visibility (bottom-right aligned): key j visible to query i iff j <= i + Sk - Sq. */
static inline void fa8_cpu_logits(float *restrict T, int ldt, const float *restrict raw, int ldr,
                                  const float *qs, const float *ks, float cl2e, int m0, int n0, int m, int n,
                                  int causal, int diag_off) {
  for (int i = 0; i < m; ++i) {
    const int jmax = causal ? (m0 + i + diag_off - n0) : n - 1;   /* last visible column of this row */
    for (int j = 0; j < n; ++j)
      T[(int64_t)i * ldt + j] = j <= jmax ? raw[(int64_t)i * ldr + j] * ((qs[i] * ks[j]) * cl2e) : -INFINITY;
  }
}

/* Power-of-two exponent e with amax <= fmax * 2^e (smallest such e; 0 for an all-zero tile). */
static inline int fa8_cpu_tile_exponent(float amax, float fmax) {
  if (!(amax > 0.0f)) return 0;
  int e;
  float r = frexpf(amax / fmax, &e);       /* amax/fmax = r * 2^e, r in [0.5, 1) */
  if (r == 0.5f) e -= 1;                   /* exact power of two: 2^(e-1) suffices */
  /* amax/fmax is rounded; make sure the bound holds for amax itself */
  while (amax > ldexpf(fmax, e)) ++e;
  while (e > -126 && amax <= ldexpf(fmax, e - 1)) --e;
  return e;
}

/* P and dP^ of one (query tile, key tile) as the backward recomputes them. The matched delta prep and the
 * main backward both call this, so the delta is built from bit-identical P and dP^.
 *   P_ij   = exp2(t_ij - lse2_i)            (lse2 = LSE * log2 e; masked or empty rows -> 0)
 *   dP^_ij = raw_ij * (sdo_i * sv_j)        (raw = decoded dO^ . decoded V^, FP32) */
static inline void fa8_cpu_p_dp(float *restrict P, float *restrict dP, int ld, float *restrict raw,
                                const float *q, int ldq, const float *kt, int ldk,
                                const float *dout, int ldo, const float *vt, int ldv,
                                const float *qs, const float *ks, const float *dos, const float *vs,
                                const float *lse2, float cl2e, int m0, int n0, int m, int n, int dqk, int dv,
                                int causal, int diag_off) {
  fa8_cpu_mm_abt(raw, ld, q, ldq, kt, ldk, m, n, dqk);
  fa8_cpu_logits(P, ld, raw, ld, qs, ks, cl2e, m0, n0, m, n, causal, diag_off);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float *p = &P[(int64_t)i * ld + j];
      *p = (lse2[i] == -INFINITY || *p == -INFINITY) ? 0.0f : exp2f(*p - lse2[i]);
    }
  fa8_cpu_mm_abt(dP, ld, dout, ldo, vt, ldv, m, n, dv);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) dP[(int64_t)i * ld + j] *= dos[i] * vs[j];
}

#endif
