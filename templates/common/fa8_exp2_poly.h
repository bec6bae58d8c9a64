/* 2^x on the FMA pipe (no MUFU), shared by the CUDA forward (templates/cuda/fa8_cuda_sm90.cuh) and its host
 * test (tests/test_exp2_poly.c), so the test checks the very arithmetic the kernels run. C99, C++ and CUDA.
 *
 * x = j + f with j = rint(x): adding 1.5 x 2^23 leaves j in the low mantissa bits of t, and f = x - (t - 1.5 x 2^23)
 * is exact, in [-1/2, 1/2]. 2^f comes from a minimax polynomial with p(0) = 1 exactly (an integer x, such as a
 * row maximum's 2^P_SCALE_LOG2, gives exactly 2^x), and j is added to its exponent field. Relative error
 * (FP32 Horner, all f): degree 3 1.02e-4, degree 4 2.9e-6. x is clamped at -127 first so the exponent field
 * cannot wrap: results under 2^-126 come out as zero or a denormal, which the FP8 casts and FTZ sums treat as
 * zero (MUFU.EX2.FTZ flushes them). Valid for x <= 128. */
#ifndef FA8_EXP2_POLY_H
#define FA8_EXP2_POLY_H

#include "fa8_fp8.h"   /* FA8_HD, fa8__bits, fa8__float */
#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <math.h>
#endif

#define FA8_EXP2_SHIFT 12582912.0f   /* 1.5 x 2^23 */

FA8_HD static inline float fa8_exp2_poly_scale(float p, float t) {
  return fa8__float(fa8__bits(p) + (fa8__bits(t) << 23));
}
FA8_HD static inline float fa8_exp2_poly3(float x) {
  x = fmaxf(x, -127.0f);
  const float t = x + FA8_EXP2_SHIFT;
  const float f = x - (t - FA8_EXP2_SHIFT);
  const float p = fmaf(fmaf(fmaf(0.05500870570540428f, f, 0.2422105371952057f), f, 0.6932829022407532f), f, 1.0f);
  return fa8_exp2_poly_scale(p, t);
}
FA8_HD static inline float fa8_exp2_poly4(float x) {
  x = fmaxf(x, -127.0f);
  const float t = x + FA8_EXP2_SHIFT;
  const float f = x - (t - FA8_EXP2_SHIFT);
  const float p = fmaf(fmaf(fmaf(fmaf(0.009582829661667347f, f, 0.05590638145804405f), f, 0.24024099111557007f), f,
                            0.6931241750717163f), f, 1.0f);
  return fa8_exp2_poly_scale(p, t);
}

#endif
