/* Host checks of device code that has no CPU twin, compiled by clang++-19 (its _Float16 arithmetic is IEEE
 * binary16, as on the device): the gfx90a FP8 decode (templates/hip/fa8_fnuz_f16.h) against fa8_decode for
 * every code of both FNUZ formats, and the GPU dS tile exponent (templates/common/fa8_dev_common.h) against
 * the CPU's rule (templates/cpu/fa8_cpu_tile.h) over all subnormal amax values, a sweep of normal ones and every
 * fmax x 2^k with its neighbours. */
#include <math.h>
#include <stdio.h>
#include "fa8_fp8.h"
#define FA8_DEV static inline
#include "fa8_fnuz_f16.h"
#include "fa8_dev_common.h"
#define restrict __restrict   /* the CPU tile header is C99 */
#include "fa8_cpu_tile.h"

template <fa8_fmt F> static int check(const char *name) {
  int bad = 0;
  for (unsigned c = 0; c < 256; ++c) {
    const float got = (float)fa8_f16_of<F>(c), want = fa8_decode(F, (uint8_t)c);
    if (!(got == want || (got != got && want != want))) {
      if (bad++ < 8) printf("%s code 0x%02x: decoded %g, fa8_decode %g\n", name, c, got, want);
    }
  }
  return bad;
}

static long check_tile_exponent(void) {
  static const float fmax[] = { 240.0f, 448.0f, 57344.0f };
  long bad = 0;
  for (int f = 0; f < 3; ++f)
    for (uint32_t u = 1; u < 0x7F800000u; u += u < 0x00800000u ? 1 : 997) {
      const float x = fa8__float(u);
      const int want = fa8_cpu_tile_exponent(x, fmax[f]), got = fa8_tile_exponent(x, fmax[f]);
      if (got != want && bad++ < 8) printf("tile exponent of %g (fmax %g): GPU %d, CPU %d\n", x, fmax[f], got, want);
    }
  /* the boundaries the sweep above steps over: amax = fmax 2^k exactly (equal mantissas) and its two neighbours,
   * for every k that leaves them finite and nonzero (the GPU's fast path compares mantissas there) */
  for (int f = 0; f < 3; ++f)
    for (int k = -170; k <= 130; ++k) {
      const float b = ldexpf(fmax[f], k);
      const float xs[3] = { b, nextafterf(b, 0.0f), nextafterf(b, INFINITY) };
      for (float x : xs) {
        if (!(x > 0.0f) || !(x < INFINITY)) continue;
        const int want = fa8_cpu_tile_exponent(x, fmax[f]), got = fa8_tile_exponent(x, fmax[f]);
        if (got != want && bad++ < 8) printf("tile exponent of %a (fmax %g): GPU %d, CPU %d\n", x, fmax[f], got, want);
      }
    }
  return bad;
}

int main(void) {
  const int bad = check<FA8_FMT_E4M3FNUZ>("e4m3fnuz") + check<FA8_FMT_E5M2FNUZ>("e5m2fnuz");
  printf("%s: %d decode mismatches over 512 codes\n", bad ? "FAIL" : "ok", bad);
  const long tbad = check_tile_exponent();
  printf("%s: %ld tile-exponent mismatches\n", tbad ? "FAIL" : "ok", tbad);
  return bad || tbad ? 1 : 0;
}
