/* fa8_fp8.h — FP8 (OCP E4M3/E5M2, AMD/Graphcore FNUZ variants) and BF16 scalar numerics.
 *
 * Header-only; compiles as C99, C++, CUDA C++ and HIP C++. This is the reference the CPU backend
 * uses and that GPU kernels must match bit for bit, so encoding follows the hardware conversions
 * (PTX cvt.rn.satfinite): round to nearest even on the exact value, saturate to the largest
 * finite code, NaN -> the format's canonical NaN.
 *
 * All rounding is done in integer arithmetic on the float's bits: going through double (or a
 * magic-number add) would round twice for some inputs.
 */
#ifndef FA8_FP8_H
#define FA8_FP8_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FA8_HD __host__ __device__
#else
#define FA8_HD
#endif

typedef enum {
    FA8_FMT_E4M3 = 0,     /* OCP "fn": bias 7, no inf, NaN = S.1111.111, max 448 */
    FA8_FMT_E5M2 = 1,     /* OCP, IEEE-like: bias 15, +-inf, max 57344 */
    FA8_FMT_E4M3FNUZ = 2, /* bias 8, no inf, no -0 (0x80 = NaN), max 240 */
    FA8_FMT_E5M2FNUZ = 3, /* bias 16, no inf, no -0 (0x80 = NaN), max 57344 */
    FA8_FMT_F32 = 4       /* test-only "no quantization" pseudo-format; not storable in a byte */
} fa8_fmt;

/* ---- float <-> bits ---------------------------------------------------------------------------
 * A union is well defined in C99 and documented as supported by GCC, Clang, NVCC and hipcc in C++;
 * it avoids <string.h> so the header stays usable in device-only translation units. */
typedef union {
    float f;
    uint32_t u;
} fa8__fbits;

FA8_HD static inline uint32_t fa8__bits(float x) {
    fa8__fbits v;
    v.f = x;
    return v.u;
}

FA8_HD static inline float fa8__float(uint32_t u) {
    fa8__fbits v;
    v.u = u;
    return v.f;
}

/* ---- format queries ------------------------------------------------------------------------- */

FA8_HD static inline int fa8_fmt_is_fp8(fa8_fmt f) {
    return f == FA8_FMT_E4M3 || f == FA8_FMT_E5M2 || f == FA8_FMT_E4M3FNUZ || f == FA8_FMT_E5M2FNUZ;
}

/* P's FP8 format and fixed scale per format family (docs/numerics.md "P per FP8 family"): the matrix unit
 * takes P and V in one family, so OCP operands cast P as e4m3(P * 2^8) and FNUZ operands (AMD CDNA3) as
 * e4m3fnuz(P * 2^7) (max 240); both cover P >= 2^-14 with normal numbers. The split remainder f16(P s) - P^
 * (fa8_split_rem_scaled) is cast to the family's e5m2 under P's scale s (the generator's REM_FMT). gen/fa8/schema.lua holds the
 * same numbers (checked by fa8_desc.h). */
#define FA8_P_SCALE_LOG2_OCP 8
#define FA8_P_SCALE_LOG2_FNUZ 7
FA8_HD static inline int fa8_fmt_is_fnuz(fa8_fmt f) { return f == FA8_FMT_E4M3FNUZ || f == FA8_FMT_E5M2FNUZ; }
FA8_HD static inline fa8_fmt fa8_p_format(fa8_fmt qkv) { return fa8_fmt_is_fnuz(qkv) ? FA8_FMT_E4M3FNUZ : FA8_FMT_E4M3; }
FA8_HD static inline int fa8_p_scale_log2(fa8_fmt qkv) {
    return fa8_fmt_is_fnuz(qkv) ? FA8_P_SCALE_LOG2_FNUZ : FA8_P_SCALE_LOG2_OCP;
}

/* Largest finite value; F32 gives FLT_MAX (spelled as bits to avoid <float.h>); bad formats 0. */
FA8_HD static inline float fa8_fmt_max(fa8_fmt f) {
    switch (f) {
    case FA8_FMT_E4M3: return 448.0f;
    case FA8_FMT_E5M2: return 57344.0f;
    case FA8_FMT_E4M3FNUZ: return 240.0f;
    case FA8_FMT_E5M2FNUZ: return 57344.0f;
    case FA8_FMT_F32: return fa8__float(0x7F7FFFFFu);
    }
    return 0.0f;
}

static inline const char *fa8_fmt_name(fa8_fmt f) {
    switch (f) {
    case FA8_FMT_E4M3: return "e4m3";
    case FA8_FMT_E5M2: return "e5m2";
    case FA8_FMT_E4M3FNUZ: return "e4m3fnuz";
    case FA8_FMT_E5M2FNUZ: return "e5m2fnuz";
    case FA8_FMT_F32: return "f32";
    }
    return 0;
}

static inline int fa8__streq(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* 0 and *out set on success; -1 (and *out untouched) for NULL or an unknown name. */
static inline int fa8_fmt_from_name(const char *s, fa8_fmt *out) {
    int i;
    if (!s) return -1;
    for (i = FA8_FMT_E4M3; i <= FA8_FMT_F32; i++) {
        if (fa8__streq(s, fa8_fmt_name((fa8_fmt)i))) {
            if (out) *out = (fa8_fmt)i;
            return 0;
        }
    }
    return -1;
}

/* ---- generic decode / encode ----------------------------------------------------------------
 * Parameterised by the format's mantissa width and exponent bias; the per-format wrappers pass
 * constants so the compiler folds everything. `kind`: 0 = OCP fn (E4M3), 1 = IEEE-like (E5M2),
 * 2 = FNUZ. */
#define FA8__FN 0
#define FA8__IEEE 1
#define FA8__FNUZ 2

FA8_HD static inline float fa8__decode(uint8_t code, int mbits, int bias, int kind) {
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t mag = code & 0x7Fu;
    const uint32_t mant = mag & ((1u << mbits) - 1u);
    const uint32_t exp = mag >> mbits;
    const uint32_t expmax = 0x7Fu >> mbits; /* all-ones exponent field */

    if (kind == FA8__FNUZ && code == 0x80u) return fa8__float(0x7FC00000u);
    if (kind == FA8__FN && mag == 0x7Fu) return fa8__float(sign | 0x7FC00000u);
    if (kind == FA8__IEEE && exp == expmax)
        return fa8__float(sign | (mant ? 0x7FC00000u : 0x7F800000u));

    if (exp == 0) {
        /* subnormal: mant * 2^(1-bias-mbits); the product is exact (a small integer times a
         * power of two that is a normal float for every format) */
        float scale = fa8__float((uint32_t)(1 - bias - mbits + 127) << 23);
        return fa8__float(sign | fa8__bits((float)mant * scale));
    }
    return fa8__float(sign | ((exp - (uint32_t)bias + 127u) << 23) | (mant << (23 - mbits)));
}

/* v >> s rounded to nearest, ties to even; 1 <= s <= 31 */
FA8_HD static inline uint32_t fa8__shr_rne(uint32_t v, int s) {
    uint32_t q = v >> s;
    uint32_t r = v & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1);
    if (r > half || (r == half && (q & 1u))) q++;
    return q;
}

/* maxcode: magnitude code of the largest finite value (saturation target). */
FA8_HD static inline uint8_t fa8__encode(float x, int mbits, int bias, int kind, uint32_t maxcode) {
    const uint32_t u = fa8__bits(x);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    const int fexp = (int)(a >> 23); /* biased float exponent field */
    const int emin = 1 - bias;       /* unbiased exponent of the smallest normal fp8 */
    uint32_t mag;

    if (a > 0x7F800000u) return kind == FA8__FNUZ ? 0x80u : 0x7Fu;

    if (fexp - 127 >= emin) {
        /* normal target: rebias the exponent in place; the carry of a mantissa round-up moves into
         * the exponent field, which is exactly the next binade. Inf lands far above maxcode. */
        mag = fa8__shr_rne(a - ((uint32_t)(127 - bias) << 23), 23 - mbits);
    } else {
        /* subnormal target (and float subnormals): integer significand sig * 2^lsb, rounded to
         * the fp8 subnormal quantum 2^(emin-mbits). Rounding up out of the largest subnormal
         * yields code 1<<mbits, i.e. the smallest normal, as it should. */
        uint32_t sig = (a & 0x7FFFFFu) | (fexp ? 0x800000u : 0u);
        int lsb = (fexp ? fexp : 1) - 127 - 23;
        int s = (emin - mbits) - lsb; /* > 0 because fexp - 127 < emin */
        mag = fa8__shr_rne(sig, s > 31 ? 31 : s);
    }
    if (mag > maxcode) mag = maxcode;
    if (kind == FA8__FNUZ && mag == 0) return 0; /* no -0 in FNUZ: 0x80 is NaN */
    return (uint8_t)(sign | mag);
}

/* ---- per-format entry points ---------------------------------------------------------------- */

FA8_HD static inline float fa8_decode_e4m3(uint8_t c) { return fa8__decode(c, 3, 7, FA8__FN); }
FA8_HD static inline float fa8_decode_e5m2(uint8_t c) { return fa8__decode(c, 2, 15, FA8__IEEE); }
FA8_HD static inline float fa8_decode_e4m3fnuz(uint8_t c) { return fa8__decode(c, 3, 8, FA8__FNUZ); }
FA8_HD static inline float fa8_decode_e5m2fnuz(uint8_t c) { return fa8__decode(c, 2, 16, FA8__FNUZ); }

FA8_HD static inline uint8_t fa8_encode_e4m3(float x) { return fa8__encode(x, 3, 7, FA8__FN, 0x7Eu); }
FA8_HD static inline uint8_t fa8_encode_e5m2(float x) { return fa8__encode(x, 2, 15, FA8__IEEE, 0x7Bu); }
FA8_HD static inline uint8_t fa8_encode_e4m3fnuz(float x) { return fa8__encode(x, 3, 8, FA8__FNUZ, 0x7Fu); }
FA8_HD static inline uint8_t fa8_encode_e5m2fnuz(float x) { return fa8__encode(x, 2, 16, FA8__FNUZ, 0x7Fu); }

/* Exact value of a code; NaN codes -> NaN, E5M2 inf codes -> +-inf. F32 or a bad format -> NaN. */
FA8_HD static inline float fa8_decode(fa8_fmt f, uint8_t code) {
    switch (f) {
    case FA8_FMT_E4M3: return fa8_decode_e4m3(code);
    case FA8_FMT_E5M2: return fa8_decode_e5m2(code);
    case FA8_FMT_E4M3FNUZ: return fa8_decode_e4m3fnuz(code);
    case FA8_FMT_E5M2FNUZ: return fa8_decode_e5m2fnuz(code);
    case FA8_FMT_F32: break;
    }
    return fa8__float(0x7FC00000u);
}

/* RNE, saturate-to-finite, canonical NaN. F32 or a bad format -> 0 (not storable; callers must not
 * ask). */
FA8_HD static inline uint8_t fa8_encode(fa8_fmt f, float x) {
    switch (f) {
    case FA8_FMT_E4M3: return fa8_encode_e4m3(x);
    case FA8_FMT_E5M2: return fa8_encode_e5m2(x);
    case FA8_FMT_E4M3FNUZ: return fa8_encode_e4m3fnuz(x);
    case FA8_FMT_E5M2FNUZ: return fa8_encode_e5m2fnuz(x);
    case FA8_FMT_F32: break;
    }
    return 0;
}

/* ---- block scales --------------------------------------------------------------------------- */

/* Quantization scale of a block from its amax (docs/numerics.md): amax / fmt_max, optionally rounded up to
 * a power of two (so descaling is exact and amax / scale <= fmt_max still holds); an all-zero block gets 1;
 * a non-finite amax gives NaN (the runtime reports such blocks); scales never go below 2^-126, so 1/scale is
 * finite. Shared by every backend's quantizer. */
FA8_HD static inline float fa8_scale_from_amax(float amax, fa8_fmt f, int pow2) {
    if (!(amax == amax) || fa8__bits(amax) == 0x7F800000u) return fa8__float(0x7FC00000u);
    if (amax == 0.0f) return 1.0f;
    float s = amax / fa8_fmt_max(f);
    if (pow2) {
        uint32_t u = fa8__bits(s);
        if (u & 0x007FFFFFu) {                       /* not a power of two yet */
            if (u >= 0x00800000u) u = (u & 0xFF800000u) + 0x00800000u;    /* normal: next exponent */
            else { uint32_t p = 1u; while (p < u) p <<= 1; u = p; }        /* subnormal: next power of two */
        }
        s = fa8__float(u);
    }
    /* tiny blocks: keep 1/scale finite (2^-126 is the smallest normal, a power of two) */
    return s < 0x1p-126f ? 0x1p-126f : s;
}

/* ---- BF16 ----------------------------------------------------------------------------------- */

/* RNE; no saturation (values that round past the largest bf16 become inf, as in hardware).
 * NaN keeps its sign and top payload bits and is forced quiet so truncation cannot make it inf. */
FA8_HD static inline uint16_t fa8_bf16_from_f32(float x) {
    uint32_t u = fa8__bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

FA8_HD static inline float fa8_f32_from_bf16(uint16_t b) { return fa8__float((uint32_t)b << 16); }

FA8_HD static inline float fa8_round_bf16(float x) { return fa8_f32_from_bf16(fa8_bf16_from_f32(x)); }

/* ---- FP16 rounding -------------------------------------------------------------------------- */

/* x rounded to the nearest FP16 value, ties to even, as a float: what cvt.rn.f16.f32 gives (FP16 subnormals
 * kept, quantum 2^-24; past the largest FP16 value, 65504, it rounds to inf; NaN stays NaN). The split
 * remainder's intermediate (fa8_split_rem_scaled, docs/numerics.md "Forward"). */
FA8_HD static inline float fa8_round_f16(float x) {
    const uint32_t u = fa8__bits(x), sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    const int fexp = (int)(a >> 23);
    if (a >= 0x7F800000u) return x;
    if (fexp >= 127 - 14) { /* FP16 normal range: 10 mantissa bits; a carry moves into the exponent */
        uint32_t r = fa8__shr_rne(a, 13) << 13;
        if (r > 0x477FE000u) r = 0x7F800000u;
        return fa8__float(sign | r);
    }
    /* FP16 subnormals: multiples of 2^-24 (the count fits a float's significand exactly) */
    const uint32_t sig = (a & 0x7FFFFFu) | (fexp ? 0x800000u : 0u);
    const int s = -24 - ((fexp ? fexp : 1) - 127 - 23); /* >= 14 here */
    const uint32_t q = fa8__shr_rne(sig, s > 31 ? 31 : s);
    return fa8__float(sign | fa8__bits((float)q * 0x1p-24f));
}

/* The split forward's remainder under P's scale s (docs/numerics.md "Forward"): R = f16(P s) - P^, where P^ is
 * the decoded FP8 code of P s. The difference of two FP16 values this close is exact (in FP16 too), so every
 * backend casts the same value to the remainder's FP8 format; going through FP16 lets a GPU form it two values
 * per instruction from the packed P^ codes. */
FA8_HD static inline float fa8_split_rem_scaled(float ps, float p_hat) { return fa8_round_f16(ps) - p_hat; }

#endif /* FA8_FP8_H */
