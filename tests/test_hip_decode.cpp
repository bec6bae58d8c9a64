/* The gfx90a FP8 decode (templates/hip/fa8_fnuz_f16.h) against fa8_decode for every code of both FNUZ formats,
 * compiled for the host by clang++-19 (its _Float16 arithmetic is IEEE binary16, as on the device). */
#include <stdio.h>
#include "fa8_fp8.h"
#define FA8_DEV static inline
#include "fa8_fnuz_f16.h"

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

int main(void) {
  const int bad = check<FA8_FMT_E4M3FNUZ>("e4m3fnuz") + check<FA8_FMT_E5M2FNUZ>("e5m2fnuz");
  printf("%s: %d mismatches over 512 codes\n", bad ? "FAIL" : "ok", bad);
  return bad ? 1 : 0;
}
