/* Backend-neutral device numerics of the GPU kernels (docs/numerics.md): the pieces every GPU backend computes
 * the same way, whatever its matrix unit and fragment layouts — scale lookup, masking and the causal key
 * range, the log2-domain logits, the online-softmax update, P from the saved LSE, dS,
 * the dS tile exponent and the delta row terms. templates/cuda/fa8_cuda_tile.cuh and
 * templates/hip/fa8_hip_tile.h include it after defining FA8_DEV (their device-function qualifier) and the
 * float functions exp2f, log2f, fmaxf, fabsf, ldexpf (CUDA's own; HIP's wrap clang builtins, since HIP
 * kernels are built without ROCm headers). */
#ifndef FA8_DEV_COMMON_H
#define FA8_DEV_COMMON_H

#include <stdint.h>
#include "fa8_fp8.h"
#include "fa8_kernel_abi.h"

#ifndef FA8_DEV
#error "define FA8_DEV (the backend's device-function qualifier) before including fa8_dev_common.h"
#endif

#define FA8_LOG2E 1.44269504088896340736f
#define FA8_LN2 0.693147180559945309417f

/* ---- index math ---- */
/* scale of sequence row `row` of (b, h): block scales are [B, H, nblk] with `rows` rows per block */
FA8_DEV float fa8_scale_at(const fa8_scales &s, int b, int h, int row) {
  return s.ptr[(int64_t)b * s.sb + (int64_t)h * s.sh + row / s.rows];
}
/* element offset of (b, s, h) in a [B, S, H, D] tensor */
FA8_DEV int64_t fa8_off(int64_t sb, int64_t ss, int64_t sh, int b, int s, int h) {
  return (int64_t)b * sb + (int64_t)s * ss + (int64_t)h * sh;
}
/* a key is visible to a query row when both exist and (causal) it is not in the row's future; the causal
 * diagonal is bottom-right aligned: diag = Sk - Sq */
FA8_DEV bool fa8_visible(int row, int col, int Sq, int Sk, int diag, bool causal) {
  return row < Sq && col < Sk && (!causal || col <= row + diag);
}
/* rows [r0, r1) x keys [c0, c1) all visible (interior tiles skip the per-element mask): both ranges inside
 * their sequences and, causal, the last key not in the first row's future */
FA8_DEV bool fa8_block_visible(int r0, int r1, int c1, int Sq, int Sk, int diag, bool causal) {
  return r1 <= Sq && c1 <= Sk && (!causal || c1 - 1 <= r0 + diag);
}
/* keys [0, end) a query tile whose last row is `last_row` can see */
FA8_DEV int fa8_key_end(int last_row, int Sk, int diag, bool causal) {
  if (!causal) return Sk;
  const int e = last_row + diag + 1;
  return e < 0 ? 0 : (e < Sk ? e : Sk);
}

/* ---- softmax ---- */
/* logit in the log2 domain: raw FP8 product x (q scale x k scale) x c log2(e); masked -> -inf */
FA8_DEV float fa8_logit2(float acc, float qs, float ks, float cl2e, bool vis) {
  return vis ? acc * ((qs * ks) * cl2e) : -INFINITY;
}
/* online-softmax factor that moves a row's running sum and output from max m_old to m_new */
FA8_DEV float fa8_softmax_alpha(float m_old, float m_new) {
  return m_new == -INFINITY ? 1.0f : exp2f(m_old - m_new);
}
/* P of a logit under the running max (forward) */
FA8_DEV float fa8_prob_running(float t, float m) { return m == -INFINITY ? 0.0f : exp2f(t - m); }
/* P recomputed from the saved LSE (log2 domain) in the delta prep and the backward */
FA8_DEV float fa8_prob_lse(float t, float lse2, bool vis) {
  return (!vis || lse2 == -INFINITY) ? 0.0f : exp2f(t - lse2);
}
/* saved LSE (natural log) of a row with running max m (log2 domain) and sum lsum; no visible key: -inf */
FA8_DEV float fa8_lse_out(float m, float lsum) { return lsum > 0.0f ? (m + log2f(lsum)) * FA8_LN2 : -INFINITY; }

/* ---- backward ---- */
/* P and the descaled dP^ of one element as the backward recomputes them (the matched delta prep too): raw
 * S and dP accumulators, row scales (q, dO), key scales (k, v), the saved LSE in the log2 domain */
FA8_DEV void fa8_p_dpv(float &p, float &dpv, float sc, float dp, float qs, float ks, float dos, float vs, float cl2e,
                       float lse2, bool vis) {
  p = fa8_prob_lse(sc * ((qs * ks) * cl2e), lse2, vis);
  dpv = dp * (dos * vs);
}
/* dS = P (dP^ - delta) */
FA8_DEV float fa8_ds(float p, float dpv, float delta) { return p * (dpv - delta); }

/* 2^e, exactly ldexpf(1, e): from the bits where 2^e is a normal float (ldexpf is a chain of ~15 instructions on the
 * GPU, and the backward takes two per dS tile on its critical path) */
FA8_DEV float fa8_pow2(int e) { return e >= -126 && e <= 127 ? fa8__float((uint32_t)(e + 127) << 23) : ldexpf(1.0f, e); }

/* exact ilogb of a positive finite float, from its bits (no libm on every device) */
FA8_DEV int fa8_ilogb_pos(float x) {
  const uint32_t u = fa8__bits(x);
  if ((u >> 23) != 0) return (int)(u >> 23) - 127;
  return (int)(fa8__bits(x * 8388608.0f) >> 23) - 127 - 23;   /* subnormal: x 2^23 is exact and normal */
}
/* Power-of-two exponent e with amax <= fmax * 2^e (smallest; 0 for an all-zero tile): the CPU's
 * fa8_cpu_tile_exponent step for step (its frexpf start spelled with fa8_ilogb_pos, then the same loops), so
 * the tile scale agrees even for subnormal amax. */
FA8_DEV int fa8_tile_exponent(float amax, float fmax) {
  if (!(amax > 0.0f)) return 0;
  /* Fast path, the same answer: with amax = ma 2^ea and fmax = mf 2^ef normal (ma, mf in [1, 2)), the smallest e
   * with amax <= fmax 2^e is ea - ef, or one more where ma > mf; where that e lies well inside the normal range,
   * r below is normal and the loops end exactly there. The GPU backward computes this once per dS tile on the
   * path to its dK/dV/dQ GEMMs, where the division and the ldexpf loops were a serial chain of ~100
   * instructions (test_hip_decode.cpp checks this function against the CPU's rule on every subnormal amax, a
   * sweep of normal ones and every fmax x 2^k with its neighbours, where the mantissa compare decides). */
  const uint32_t ua = fa8__bits(amax), uf = fa8__bits(fmax);
  const int fa = (int)(ua >> 23), ff = (int)(uf >> 23);
  if (fa >= 1 && fa <= 254 && ff >= 1 && ff <= 254) {
    const int e = fa - ff + ((ua & 0x7FFFFFu) > (uf & 0x7FFFFFu) ? 1 : 0);
    if (e >= -120 && e <= 120) return e;
  }
  const float r = amax / fmax;
  int e = 0;                                   /* frexpf(r): r = m 2^e, m in [0.5, 1); a power of two: e - 1 */
  if (r > 0.0f) {
    const int k = fa8_ilogb_pos(r);
    e = ldexpf(1.0f, k) == r ? k : k + 1;
  }
  while (amax > ldexpf(fmax, e)) ++e;
  while (e > -126 && amax <= ldexpf(fmax, e - 1)) --e;
  return e;
}

/* FP8 code -> float for streaming passes, each backend's own (defined after this header: CUDA decodes the OCP
 * formats by its hardware cvt, HIP calls fa8_decode); the same value as fa8_decode for every code */
template <fa8_fmt F> FA8_DEV float fa8_dec_stream(uint8_t c);

/* ---- delta (row modes) ---- */
/* one term of delta_i = sum_k dO_ik O_ik for the row modes: stale reads dO before its cast (float or BF16),
 * dohat the decoded dO^ (its row scale applied once after the sum), split adds the saved remainder to O */
template <fa8_fmt FMT_GRAD, bool STALE, bool SPLIT>
FA8_DEV float fa8_delta_term(const fa8_delta_args &a, int b, int i, int h, int k) {
  const uint16_t *o = (const uint16_t *)a.o.ptr + fa8_off(a.o.sb, a.o.ss, a.o.sh, b, i, h);
  if (STALE) {
    const int64_t off = fa8_off(a.dout.sb, a.dout.ss, a.dout.sh, b, i, h);
    const float d = a.dout_type == FA8_IN_BF16 ? fa8_f32_from_bf16(((const uint16_t *)a.dout.ptr)[off + k])
                                               : ((const float *)a.dout.ptr)[off + k];
    return d * fa8_f32_from_bf16(o[k]);
  }
  const uint8_t *d = (const uint8_t *)a.do_hat.ptr + fa8_off(a.do_hat.sb, a.do_hat.ss, a.do_hat.sh, b, i, h);
  float ov = fa8_f32_from_bf16(o[k]);
  if (SPLIT) ov += fa8_f32_from_bf16(((const uint16_t *)a.o_rem.ptr)[fa8_off(a.o_rem.sb, a.o_rem.ss, a.o_rem.sh, b, i, h) + k]);
  return fa8_dec_stream<FMT_GRAD>(d[k]) * ov;
}
/* the row's delta from its summed terms */
template <bool STALE>
FA8_DEV float fa8_delta_finish(const fa8_delta_args &a, int b, int h, int i, float sum) {
  return STALE ? sum : sum * fa8_scale_at(a.do_scale, b, h, i);
}

#endif
