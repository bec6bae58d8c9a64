/* Exact FNUZ FP8 -> FP16 decode for CDNA2 (gfx90a), which has no FP8 hardware (fa8_hip_tile.h feeds the
 * result to FP16 MFMA). Its own header so the host test (tests/test_hip_decode.cpp) checks the same code;
 * the includer defines FA8_DEV and includes fa8_fp8.h. */
#ifndef FA8_FNUZ_F16_H
#define FA8_FNUZ_F16_H

/* An FNUZ code's bits placed in an FP16 word read as a power of two times its value (the exponent fields
 * line up, subnormals included), so the decode is exact: e4m3fnuz x 2^7, e5m2fnuz x 2^-1 (or one exponent
 * step lower); 0x80 is NaN. */
template <fa8_fmt F> FA8_DEV _Float16 fa8_f16_of(unsigned c) {
  static_assert(F == FA8_FMT_E4M3FNUZ || F == FA8_FMT_E5M2FNUZ, "CDNA2 decodes the FNUZ formats");
  _Float16 h;
  if (F == FA8_FMT_E4M3FNUZ) {
    h = __builtin_bit_cast(_Float16, (unsigned short)(((c & 0x80u) << 8) | ((c & 0x7Fu) << 7))) * (_Float16)128.0f;
  } else {   /* exponent fields >= 2 only need the FP16 exponent lowered by one (the top one, 31, is finite here) */
    const unsigned short bits = (unsigned short)(c << 8);
    h = (c & 0x7Cu) >= 0x08u ? __builtin_bit_cast(_Float16, (unsigned short)(bits - 0x0400u)) : __builtin_bit_cast(_Float16, bits) * (_Float16)0.5f;
  }
  return c == 0x80u ? __builtin_bit_cast(_Float16, (unsigned short)0x7E00u) : h;
}
#endif
