/* The forward's FMA-pipe 2^x (templates/common/fa8_exp2_poly.h, the header the CUDA kernels include) against
 * FP64 exp2 over a dense sweep of every input range the softmax feeds it (x <= 2^P_SCALE_LOG2's exponent: logits
 * minus the running max plus log2 of P's cast scale). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include "../templates/common/fa8_exp2_poly.h"

typedef float (*exp2_fn)(float);

/* the largest relative error over every 97th float of [lo_bits, hi_bits] (one sign), and the offending input */
static double worst_rel(exp2_fn fn, uint32_t lo_bits, uint32_t hi_bits, float *at) {
  double worst = 0.0;
  for (uint64_t u = lo_bits; u <= hi_bits; u += 97) {
    const float x = fa8__float((uint32_t)u);
    const double want = exp2((double)x), got = fn(x);
    const double rel = fabs(got - want) / want;
    if (!(rel <= worst)) { worst = rel; *at = x; }
  }
  return worst;
}

static void check_accuracy(exp2_fn fn, double bound, const char *name) {
  float at = 0.0f;
  /* [0, 8.5] and [-126, -0]: normal results (P x 2^8 <= 2^8 at a row's maximum, FFMA rounding above it) */
  const double up = worst_rel(fn, 0u, fa8__bits(8.5f), &at);
  cr_expect(up <= bound, "%s: relative error %.3g at x = %.9g over [0, 8.5] (bound %.3g)", name, up, at, bound);
  const double down = worst_rel(fn, 0x80000000u, fa8__bits(-126.0f), &at);
  cr_expect(down <= bound, "%s: relative error %.3g at x = %.9g over [-126, 0] (bound %.3g)", name, down, at, bound);
}

Test(exp2_poly, degree3_relative_error) { check_accuracy(fa8_exp2_poly3, 1.03e-4, "degree 3"); }
Test(exp2_poly, degree4_relative_error) { check_accuracy(fa8_exp2_poly4, 3.0e-6, "degree 4"); }

/* p(0) = 1 exactly: an integer x (a row's maximum gives x = P_SCALE_LOG2) comes out as the exact power of two,
 * so the FP8 cast of the row maximum's P is exact, as with MUFU.EX2 */
Test(exp2_poly, integers_exact) {
  for (int j = -126; j <= 8; ++j) {
    cr_expect(fa8_exp2_poly3((float)j) == ldexpf(1.0f, j), "degree 3: 2^%d gave %a", j, (double)fa8_exp2_poly3((float)j));
    cr_expect(fa8_exp2_poly4((float)j) == ldexpf(1.0f, j), "degree 4: 2^%d gave %a", j, (double)fa8_exp2_poly4((float)j));
  }
}

/* below 2^-126 the exponent field must not wrap: results stay in [0, 2^-125], never negative, huge or NaN
 * (FTZ arithmetic then treats them as zero, as MUFU.EX2.FTZ flushes them) */
Test(exp2_poly, underflow_stays_tiny) {
  const float tiny = ldexpf(1.0f, -125);
  for (uint64_t u = fa8__bits(-126.0f); u <= fa8__bits(-3.0e38f); u += 4099) {
    const float x = fa8__float((uint32_t)u), a = fa8_exp2_poly3(x), b = fa8_exp2_poly4(x);
    cr_assert(a >= 0.0f && a <= tiny, "degree 3: x = %.9g gave %a", (double)x, (double)a);
    cr_assert(b >= 0.0f && b <= tiny, "degree 4: x = %.9g gave %a", (double)x, (double)b);
  }
  cr_expect(fa8_exp2_poly3(-INFINITY) == 0.0f && fa8_exp2_poly4(-INFINITY) == 0.0f, "2^-inf is not 0");
}
