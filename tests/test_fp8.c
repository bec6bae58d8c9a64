/* Exhaustive tests of runtime/include/fa8_fp8.h.
 *
 * Every expectation is derived from an independent model written straight from the format
 * definitions (double arithmetic, ldexp on the bit fields, brute-force nearest search), never from
 * the header's own bit tricks. Doubles hold every fp8/bf16 value and every midpoint between two
 * adjacent ones exactly, so the model itself does not round. */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fa8_fp8.h"

#define NFMT 4
static const fa8_fmt FMTS[NFMT] = {FA8_FMT_E4M3, FA8_FMT_E5M2, FA8_FMT_E4M3FNUZ, FA8_FMT_E5M2FNUZ};

/* ---- the independent model ------------------------------------------------------------------ */

typedef struct {
    int ebits, mbits, bias;
    int fnuz;    /* no -0, 0x80 is the only NaN */
    int has_inf; /* IEEE-style all-ones exponent */
    double max;
    uint8_t nan; /* canonical NaN */
} spec;

static spec spec_of(fa8_fmt f) {
    switch (f) {
    case FA8_FMT_E4M3: return (spec){4, 3, 7, 0, 0, 448.0, 0x7F};
    case FA8_FMT_E5M2: return (spec){5, 2, 15, 0, 1, 57344.0, 0x7F};
    case FA8_FMT_E4M3FNUZ: return (spec){4, 3, 8, 1, 0, 240.0, 0x80};
    case FA8_FMT_E5M2FNUZ: return (spec){5, 2, 16, 1, 0, 57344.0, 0x80};
    default: cr_assert_fail("bad format"); return (spec){0};
    }
}

/* 0 finite, 1 NaN, 2 infinity */
static int ref_class(fa8_fmt f, unsigned c) {
    spec s = spec_of(f);
    unsigned e = (c >> s.mbits) & ((1u << s.ebits) - 1), m = c & ((1u << s.mbits) - 1);
    unsigned eall = (1u << s.ebits) - 1;
    if (s.fnuz) return c == 0x80 ? 1 : 0;
    if (s.has_inf) return e == eall ? (m ? 1 : 2) : 0;
    return (e == eall && m == (1u << s.mbits) - 1) ? 1 : 0; /* OCP fn: only S.1111.111 */
}

static double ref_decode(fa8_fmt f, unsigned c) {
    spec s = spec_of(f);
    int sg = (c >> 7) & 1;
    int e = (int)((c >> s.mbits) & ((1u << s.ebits) - 1));
    int m = (int)(c & ((1u << s.mbits) - 1));
    int k = ref_class(f, c);
    if (k == 1) return NAN;
    if (k == 2) return sg ? -INFINITY : INFINITY;
    double mag = e == 0 ? ldexp((double)m, 1 - s.bias - s.mbits)
                        : ldexp(1.0 + ldexp((double)m, -s.mbits), e - s.bias);
    return sg ? -mag : mag;
}

/* The model's decode of all 256 codes, cached so the brute-force search stays cheap. */
typedef struct {
    fa8_fmt f;
    spec s;
    double val[256];
    int cls[256];
} table;

static void table_init(table *t, fa8_fmt f) {
    t->f = f;
    t->s = spec_of(f);
    for (unsigned c = 0; c < 256; c++) {
        t->cls[c] = ref_class(f, c);
        t->val[c] = ref_decode(f, c);
    }
}

/* Brute-force RNE + satfinite: nearest finite code; between two distinct values at equal distance
 * the one with an even mantissa (code LSB 0); zero takes the sign of x where -0 exists. */
static unsigned ref_encode(const table *t, double x) {
    if (isnan(x)) return t->s.nan;
    /* Saturation, applied up front: for |x| far above max the double distances |x - v| round to
     * the same value for every code and the search could not rank them. Within [-max, max] the
     * distances to the two neighbours of x are exact, so ties are seen as ties. */
    if (fabs(x) >= t->s.max) x = x > 0 ? t->s.max : -t->s.max;
    int best = -1;
    double bd = 0, bv = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (t->cls[c]) continue;
        double v = t->val[c], d = fabs(x - v);
        int better;
        if (best < 0 || d < bd) better = 1;
        else if (d > bd) better = 0;
        else if (v == bv) better = !!signbit(v) == !!signbit(x); /* +0 vs -0 */
        else better = (c & 1) == 0;
        if (better) {
            best = (int)c;
            bd = d;
            bv = v;
        }
    }
    return (unsigned)best;
}

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float bitsf(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint64_t rng_state;
static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* sorted distinct finite non-negative values of a format (including 0), with their codes */
static int nonneg_values(fa8_fmt f, double *val, unsigned *code) {
    int n = 0;
    for (unsigned c = 0; c < 0x80; c++) {
        if (ref_class(f, c)) continue;
        val[n] = ref_decode(f, c);
        code[n++] = c;
    }
    /* codes are monotonic in value within one sign; assert rather than sort */
    for (int i = 1; i < n; i++) cr_assert(val[i] > val[i - 1], "%s: non-monotonic", fa8_fmt_name(f));
    return n;
}

/* expected code of -|x| given the code of +|x| */
static unsigned negate_code(fa8_fmt f, unsigned c) {
    return (spec_of(f).fnuz && c == 0) ? 0u : (c | 0x80u);
}

/* ---- decode ----------------------------------------------------------------------------------- */

Test(fp8_decode, all_codes_match_spec) {
    for (int i = 0; i < NFMT; i++) {
        fa8_fmt f = FMTS[i];
        for (unsigned c = 0; c < 256; c++) {
            double ref = ref_decode(f, c);
            float got = fa8_decode(f, (uint8_t)c);
            if (isnan(ref)) {
                cr_expect(isnan(got), "%s 0x%02x: expected NaN, got %a", fa8_fmt_name(f), c, got);
                continue;
            }
            cr_expect((double)got == ref, "%s 0x%02x: got %a want %a", fa8_fmt_name(f), c, got, ref);
            cr_expect(!!signbit(got) == !!signbit(ref), "%s 0x%02x: sign of zero", fa8_fmt_name(f), c);
        }
    }
}

Test(fp8_decode, per_format_entry_points_agree) {
    for (unsigned c = 0; c < 256; c++) {
        uint8_t b = (uint8_t)c;
        float r[NFMT] = {fa8_decode_e4m3(b), fa8_decode_e5m2(b), fa8_decode_e4m3fnuz(b), fa8_decode_e5m2fnuz(b)};
        for (int i = 0; i < NFMT; i++) {
            float g = fa8_decode(FMTS[i], b);
            cr_expect(fbits(g) == fbits(r[i]), "%s 0x%02x", fa8_fmt_name(FMTS[i]), c);
        }
    }
}

Test(fp8_decode, known_values) {
    cr_expect(fa8_decode(FA8_FMT_E4M3, 0x7E) == 448.0f);
    cr_expect(fa8_decode(FA8_FMT_E4M3, 0x01) == ldexpf(1.0f, -9));
    cr_expect(isnan(fa8_decode(FA8_FMT_E4M3, 0x7F)) && isnan(fa8_decode(FA8_FMT_E4M3, 0xFF)));
    cr_expect(fa8_decode(FA8_FMT_E4M3, 0x7C) == 384.0f); /* S.1111.xxx is finite in fn */
    cr_expect(fa8_decode(FA8_FMT_E5M2, 0x7B) == 57344.0f);
    cr_expect(fa8_decode(FA8_FMT_E5M2, 0x7C) == INFINITY && fa8_decode(FA8_FMT_E5M2, 0xFC) == -INFINITY);
    cr_expect(isnan(fa8_decode(FA8_FMT_E5M2, 0x7D)) && isnan(fa8_decode(FA8_FMT_E5M2, 0xFF)));
    cr_expect(fa8_decode(FA8_FMT_E5M2, 0x01) == ldexpf(1.0f, -16));
    cr_expect(fa8_decode(FA8_FMT_E4M3FNUZ, 0x7F) == 240.0f);
    cr_expect(fa8_decode(FA8_FMT_E4M3FNUZ, 0x01) == ldexpf(1.0f, -10));
    cr_expect(isnan(fa8_decode(FA8_FMT_E4M3FNUZ, 0x80)) && fa8_decode(FA8_FMT_E4M3FNUZ, 0xFF) == -240.0f);
    cr_expect(fa8_decode(FA8_FMT_E5M2FNUZ, 0x7F) == 57344.0f);
    cr_expect(fa8_decode(FA8_FMT_E5M2FNUZ, 0x01) == ldexpf(1.0f, -17));
    cr_expect(isnan(fa8_decode(FA8_FMT_E5M2FNUZ, 0x80)));
    cr_expect(signbit(fa8_decode(FA8_FMT_E4M3, 0x80)) && fa8_decode(FA8_FMT_E4M3, 0x80) == 0.0f);
    cr_expect(signbit(fa8_decode(FA8_FMT_E5M2, 0x80)));
    cr_expect(isnan(fa8_decode(FA8_FMT_F32, 0)), "F32 is not storable: decode gives NaN");
}

/* ---- encode ----------------------------------------------------------------------------------- */

Test(fp8_encode, round_trip_every_code) {
    for (int i = 0; i < NFMT; i++) {
        fa8_fmt f = FMTS[i];
        spec s = spec_of(f);
        for (unsigned c = 0; c < 256; c++) {
            float v = (float)ref_decode(f, c);
            unsigned want;
            switch (ref_class(f, c)) {
            case 1: want = s.nan; break;                  /* NaN -> canonical NaN */
            case 2: want = (c & 0x80) | 0x7B; break;      /* E5M2 inf saturates */
            default: want = c; break;
            }
            unsigned got = fa8_encode(f, v);
            cr_expect(got == want, "%s 0x%02x (%a): got 0x%02x want 0x%02x", fa8_fmt_name(f), c, v, got, want);
        }
    }
}

Test(fp8_encode, every_tie_and_its_neighbours) {
    for (int i = 0; i < NFMT; i++) {
        fa8_fmt f = FMTS[i];
        const char *nm = fa8_fmt_name(f);
        double val[128];
        unsigned code[128];
        int n = nonneg_values(f, val, code);
        for (int k = 0; k + 1 < n; k++) {
            double mid = (val[k] + val[k + 1]) / 2;
            float m = (float)mid;
            cr_assert((double)m == mid, "%s: midpoint %a not a float", nm, mid);
            unsigned even = (code[k] & 1) ? code[k + 1] : code[k];
            cr_assert(((code[k] ^ code[k + 1]) & 1) == 1, "%s: adjacent codes differ in LSB", nm);
            float up = nextafterf(m, INFINITY), dn = nextafterf(m, -INFINITY);

            cr_expect(fa8_encode(f, m) == even, "%s tie %a: got 0x%02x want 0x%02x", nm, m,
                      fa8_encode(f, m), even);
            cr_expect(fa8_encode(f, up) == code[k + 1], "%s above tie %a", nm, up);
            cr_expect(fa8_encode(f, dn) == code[k], "%s below tie %a", nm, dn);
            cr_expect(fa8_encode(f, -m) == negate_code(f, even), "%s tie %a", nm, -m);
            cr_expect(fa8_encode(f, -up) == negate_code(f, code[k + 1]), "%s above tie %a", nm, -up);
            cr_expect(fa8_encode(f, -dn) == negate_code(f, code[k]), "%s below tie %a", nm, -dn);
        }
    }
}

Test(fp8_encode, boundaries) {
    for (int i = 0; i < NFMT; i++) {
        fa8_fmt f = FMTS[i];
        spec s = spec_of(f);
        const char *nm = fa8_fmt_name(f);
        unsigned maxc = fa8_encode(f, (float)s.max);
        unsigned neg0 = s.fnuz ? 0x00 : 0x80;
        cr_expect(fa8_decode(f, (uint8_t)maxc) == (float)s.max, "%s max code", nm);
        cr_expect(fa8_fmt_max(f) == (float)s.max, "%s fmt_max", nm);

        /* ulp of the top binade: max has an all-ones mantissa (or all-but-one for E4M3) */
        double top_ulp = ldexp(1.0, (int)floor(log2(s.max)) - s.mbits);
        float over[] = {(float)(s.max + top_ulp / 2), (float)(s.max + top_ulp / 2) * 1.0000001f,
                        (float)(s.max + top_ulp), (float)(2 * s.max), nextafterf((float)s.max, INFINITY),
                        1e30f, FLT_MAX, INFINITY};
        for (size_t k = 0; k < sizeof over / sizeof over[0]; k++) {
            cr_expect(fa8_encode(f, over[k]) == maxc, "%s %a must saturate", nm, over[k]);
            cr_expect(fa8_encode(f, -over[k]) == (maxc | 0x80), "%s %a must saturate", nm, -over[k]);
        }
        cr_expect(fa8_encode(f, nextafterf((float)s.max, 0)) == maxc, "%s just below max", nm);
        cr_expect(fa8_encode(f, NAN) == s.nan, "%s NaN", nm);
        cr_expect(fa8_encode(f, -NAN) == s.nan, "%s -NaN", nm);
        cr_expect(fa8_encode(f, bitsf(0x7F800001u)) == s.nan, "%s sNaN", nm);
        cr_expect(fa8_encode(f, bitsf(0xFFFFFFFFu)) == s.nan, "%s NaN payload", nm);

        float tiny = (float)ldexp(1.0, 1 - s.bias - s.mbits); /* smallest subnormal */
        cr_expect(fa8_encode(f, tiny) == 0x01, "%s min subnormal", nm);
        cr_expect(fa8_encode(f, -tiny) == 0x81, "%s -min subnormal", nm);
        cr_expect(fa8_encode(f, tiny / 2) == 0x00, "%s half min subnormal ties to 0", nm);
        cr_expect(fa8_encode(f, -tiny / 2) == neg0, "%s -half min subnormal", nm);
        cr_expect(fa8_encode(f, nextafterf(tiny / 2, 1)) == 0x01, "%s above half", nm);
        cr_expect(fa8_encode(f, -nextafterf(tiny / 2, 1)) == 0x81, "%s -above half", nm);
        cr_expect(fa8_encode(f, nextafterf(tiny / 2, 0)) == 0x00, "%s below half", nm);
        cr_expect(fa8_encode(f, tiny * 1.5f) == 0x02, "%s 1.5 subnormal ties to even", nm);
        cr_expect(fa8_encode(f, tiny * 2.5f) == 0x02, "%s 2.5 subnormal ties to even", nm);
        /* largest subnormal rounding up into the smallest normal */
        float min_norm = (float)ldexp(1.0, 1 - s.bias);
        unsigned top_sub = (1u << s.mbits) - 1;
        cr_expect(fa8_encode(f, min_norm - tiny / 2) == (top_sub + 1), "%s sub->normal carry", nm);
        cr_expect(fa8_encode(f, nextafterf(min_norm - tiny / 2, 0)) == top_sub, "%s below carry", nm);

        cr_expect(fa8_encode(f, 0.0f) == 0x00, "%s +0", nm);
        cr_expect(fa8_encode(f, -0.0f) == neg0, "%s -0", nm);
        float fsub[] = {bitsf(1), bitsf(0x00400000u), bitsf(0x007FFFFFu), FLT_MIN, 1e-30f};
        for (size_t k = 0; k < sizeof fsub / sizeof fsub[0]; k++) {
            cr_expect(fa8_encode(f, fsub[k]) == 0x00, "%s float subnormal %a", nm, fsub[k]);
            cr_expect(fa8_encode(f, -fsub[k]) == neg0, "%s float subnormal %a", nm, -fsub[k]);
        }
    }
    cr_expect(fa8_encode(FA8_FMT_E4M3, 464.0f) == 0x7E, "E4M3 464 would round to 480 (NaN code)");
    cr_expect(fa8_encode(FA8_FMT_E5M2, 61440.0f) == 0x7B, "E5M2 61440 would round to inf");
    cr_expect(fa8_encode(FA8_FMT_E5M2, -INFINITY) == 0xFB);
    cr_expect(fa8_encode(FA8_FMT_E4M3FNUZ, 248.0f) == 0x7F);
}

Test(fp8_encode, per_format_entry_points_agree) {
    rng_state = 0x1234567887654321ull;
    for (int n = 0; n < 100000; n++) {
        float x = bitsf((uint32_t)xorshift64());
        uint8_t r[NFMT] = {fa8_encode_e4m3(x), fa8_encode_e5m2(x), fa8_encode_e4m3fnuz(x), fa8_encode_e5m2fnuz(x)};
        for (int i = 0; i < NFMT; i++) cr_assert(fa8_encode(FMTS[i], x) == r[i], "%s %a", fa8_fmt_name(FMTS[i]), x);
    }
}

/* 2^20 inputs per format: random bit patterns with the exponent confined to the format's range
 * (low mantissa bits sometimes cleared so exact ties are common), all-random bit patterns (NaN, inf,
 * float subnormals, huge), and uniform values over [-1.25 max, 1.25 max]. */
static void brute_force(fa8_fmt f, uint64_t seed) {
    spec s = spec_of(f);
    int elo = 127 + (1 - s.bias - s.mbits) - 3; /* a few binades below the smallest subnormal */
    int ehi = 127 + (int)floor(log2(s.max)) + 2;
    table t;
    table_init(&t, f);
    rng_state = seed;
    int fails = 0;
    for (int n = 0; n < (1 << 20); n++) {
        uint64_t r = xorshift64();
        uint32_t u = (uint32_t)r;
        float x;
        switch ((r >> 32) & 3) {
        case 0:
        case 1: {
            uint32_t e = (uint32_t)(elo + (int)((r >> 40) % (uint64_t)(ehi - elo + 1)));
            uint32_t m = u & 0x7FFFFFu;
            int clr = (int)((r >> 56) % 24);
            if ((r >> 36) & 1) m &= ~((1u << clr) - 1u);
            x = bitsf((u & 0x80000000u) | (e << 23) | m);
            break;
        }
        case 2: x = bitsf(u); break;
        default: x = (float)(((double)u / 4294967296.0 * 2.0 - 1.0) * 1.25 * s.max); break;
        }
        unsigned want = ref_encode(&t, (double)x), got = fa8_encode(f, x);
        if (got != want && fails++ < 10)
            cr_expect(got == want, "%s %a (0x%08x): got 0x%02x want 0x%02x", fa8_fmt_name(f), x, fbits(x), got, want);
    }
    cr_expect(fails == 0, "%s: %d mismatches", fa8_fmt_name(f), fails);
}

Test(fp8_brute_force, e4m3, .timeout = 120) { brute_force(FA8_FMT_E4M3, 0x9E3779B97F4A7C15ull); }
Test(fp8_brute_force, e5m2, .timeout = 120) { brute_force(FA8_FMT_E5M2, 0xD1B54A32D192ED03ull); }
Test(fp8_brute_force, e4m3fnuz, .timeout = 120) { brute_force(FA8_FMT_E4M3FNUZ, 0x8CB92BA72F3D8DD7ull); }
Test(fp8_brute_force, e5m2fnuz, .timeout = 120) { brute_force(FA8_FMT_E5M2FNUZ, 0xABCDEF0123456789ull); }

/* ---- bf16 ------------------------------------------------------------------------------------- */

static int bf16_is_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }

Test(bf16, constructed_ties) {
    /* every finite bf16 prefix hi with low halves just below, at and just above the midpoint */
    for (uint32_t hi = 0; hi < 0x10000; hi++) {
        if ((hi & 0x7F80) == 0x7F80) continue; /* inf/NaN prefixes */
        uint32_t base = hi << 16;
        uint16_t up = (uint16_t)(hi + 1); /* carries into the exponent (0x7F7F -> inf) as RNE must */
        uint16_t even = (hi & 1) ? up : (uint16_t)hi;
        cr_assert(fa8_bf16_from_f32(bitsf(base)) == hi, "exact 0x%04x", hi);
        cr_assert(fa8_bf16_from_f32(bitsf(base | 0x0001)) == hi, "0x%04x+1", hi);
        cr_assert(fa8_bf16_from_f32(bitsf(base | 0x7FFF)) == hi, "0x%04x below tie", hi);
        cr_assert(fa8_bf16_from_f32(bitsf(base | 0x8000)) == even, "0x%04x tie", hi);
        cr_assert(fa8_bf16_from_f32(bitsf(base | 0x8001)) == up, "0x%04x above tie", hi);
        cr_assert(fa8_bf16_from_f32(bitsf(base | 0xFFFF)) == up, "0x%04x top", hi);
    }
}

Test(bf16, specials) {
    cr_expect(fa8_bf16_from_f32(INFINITY) == 0x7F80);
    cr_expect(fa8_bf16_from_f32(-INFINITY) == 0xFF80);
    cr_expect(fa8_bf16_from_f32(FLT_MAX) == 0x7F80, "FLT_MAX rounds up to inf (no saturation)");
    cr_expect(fa8_bf16_from_f32(-0.0f) == 0x8000);
    cr_expect(fa8_bf16_from_f32(1.0f) == 0x3F80);
    cr_expect(fa8_round_bf16(1.0f + ldexpf(1, -8)) == 1.0f, "tie to even");
    cr_expect(fa8_round_bf16(1.0f + 3 * ldexpf(1, -8)) == 1.0f + ldexpf(1, -6), "tie to even (up)");
    cr_expect(isnan(fa8_round_bf16(NAN)));
    /* NaNs whose payload lives only in the low half must stay NaN, not become inf */
    rng_state = 42;
    for (int n = 0; n < 100000; n++) {
        uint32_t u = 0x7F800000u | ((uint32_t)xorshift64() & 0x807FFFFFu);
        if ((u & 0x7FFFFFu) == 0) u |= 1;
        if (n < 23) u = (u & 0x80000000u) | 0x7F800000u | (1u << n);
        uint16_t b = fa8_bf16_from_f32(bitsf(u));
        cr_assert(bf16_is_nan(b), "NaN 0x%08x -> 0x%04x", u, b);
        cr_assert((b & 0x8000) == ((u >> 16) & 0x8000), "NaN sign 0x%08x", u);
    }
}

Test(bf16, round_trip_all_codes) {
    for (uint32_t b = 0; b < 0x10000; b++) {
        float x = fa8_f32_from_bf16((uint16_t)b);
        cr_assert(fbits(x) == b << 16, "widen 0x%04x", b);
        uint16_t back = fa8_bf16_from_f32(x);
        if (bf16_is_nan((uint16_t)b))
            cr_assert(bf16_is_nan(back), "NaN 0x%04x -> 0x%04x", b, back);
        else
            cr_assert(back == b, "0x%04x -> 0x%04x", b, back);
    }
}

Test(bf16, random_vs_nearest) {
    rng_state = 0x0123456789ABCDEFull;
    for (int n = 0; n < (1 << 20); n++) {
        uint32_t u = (uint32_t)xorshift64();
        if ((u & 0x7F800000u) == 0x7F800000u) continue;
        double x = bitsf(u);
        /* candidates: truncation toward zero and the next magnitude up */
        uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
        double dl = fabs(x - (double)bitsf(lo));
        /* past the largest bf16 the next step up is inf, reached as if it were 2^128 */
        double dh = (hi & 0x7F800000u) == 0x7F800000u ? ldexp(1.0, 128) - fabs(x)
                                                      : fabs(x - (double)bitsf(hi));
        uint16_t want = (uint16_t)((dl < dh || (dl == dh && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
        cr_assert(fa8_bf16_from_f32((float)x) == want, "0x%08x: got 0x%04x want 0x%04x", u,
                  fa8_bf16_from_f32((float)x), want);
    }
}

/* ---- FP16 rounding (the split remainder's intermediate) ---------------------------------------- */

/* the value of FP16 code h (sign 1, exponent 5 bias 15, fraction 10) from its fields; inf for exponent 31 */
static double ref_f16(unsigned h) {
    const int e = (h >> 10) & 31, f = h & 1023;
    const double mag = e == 31 ? INFINITY : e == 0 ? ldexp(f, -24) : ldexp(1024 + f, e - 25);
    return (h & 0x8000) ? -mag : mag;
}
/* the nearest non-negative FP16 value to x >= 0, ties to the even code; past 65504 + half a step: inf */
static double ref_nearest_f16(double x) {
    unsigned lo = 0, hi = 0x7BFF; /* largest code with ref_f16(code) <= x, by bisection over the finite codes */
    if (x >= 65520.0) return INFINITY;
    while (lo < hi) {
        const unsigned mid = (lo + hi + 1) / 2;
        if (ref_f16(mid) <= x) lo = mid; else hi = mid - 1;
    }
    if (lo == 0x7BFF) return ref_f16(lo);
    const double a = ref_f16(lo), b = ref_f16(lo + 1);
    return (x - a < b - x || (x - a == b - x && !(lo & 1))) ? a : b;
}

Test(f16, every_code_round_trips) {
    for (unsigned h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue; /* NaN */
        const double v = ref_f16(h);
        cr_assert(fa8_round_f16((float)v) == (float)v, "code 0x%04x (%g) moved to %g", h, v, (double)fa8_round_f16((float)v));
    }
}

Test(f16, every_midpoint_goes_to_even) {
    for (unsigned h = 0; h < 0x7BFF; h++) { /* midpoints between adjacent finite non-negative codes */
        const double a = ref_f16(h), b = ref_f16(h + 1), mid = 0.5 * (a + b);
        const float want = (float)((h & 1) ? b : a), got = fa8_round_f16((float)mid);
        cr_assert((double)(float)mid == mid, "midpoint of 0x%04x is not a float", h);
        cr_assert(got == want, "midpoint of 0x%04x/0x%04x (%.9g): got %.9g want %.9g", h, h + 1, mid, (double)got, (double)want);
        cr_assert(fa8_round_f16(-(float)mid) == -want, "negative midpoint of 0x%04x", h);
    }
    cr_expect(isinf(fa8_round_f16(65520.0f)) && fa8_round_f16(65519.996f) == 65504.0f, "overflow boundary");
    cr_expect(isnan(fa8_round_f16(NAN)) && isinf(fa8_round_f16(INFINITY)), "specials");
}

Test(f16, random_vs_nearest) {
    rng_state = 0x5DEECE66DULL;
    for (int n = 0; n < (1 << 20); n++) {
        uint32_t u = (uint32_t)xorshift64() & 0x7FFFFFFFu;
        if (n & 1) u = 0x30000000u + u % 0x17800000u; /* half of them in and below the FP16 range */
        if (u >= 0x7F800000u) continue;
        const float x = bitsf(u);
        const double want = ref_nearest_f16(x);
        cr_assert((double)fa8_round_f16(x) == want, "0x%08x (%.9g): got %.9g want %.9g", u, (double)x, (double)fa8_round_f16(x), want);
    }
}

/* The split remainder f16(P s) - P^ is exact in FP16, for every P^ code the cast of P s can give (OCP and FNUZ),
 * so a GPU that subtracts FP16 pairs casts the same value as the CPU (docs/numerics.md "Forward") */
Test(f16, split_remainder_is_an_exact_fp16_difference) {
    const fa8_fmt pf[2] = { FA8_FMT_E4M3, FA8_FMT_E4M3FNUZ };
    const float sc[2] = { 256.0f, 128.0f };
    rng_state = 0x2545F4914F6CDD1DULL;
    for (int k = 0; k < 2; k++)
        for (int n = 0; n < (1 << 20); n++) {
            const float p = ldexpf((float)((xorshift64() >> 40) + 1) * 0x1p-24f, -(int)(xorshift64() % 24)); /* (0, 1] */
            const float ps = p * sc[k], ph = fa8_decode(pf[k], fa8_encode(pf[k], ps));
            const float r = fa8_split_rem_scaled(ps, ph);
            cr_assert((double)r == (double)fa8_round_f16(ps) - (double)ph, "p %.9g: FP32 difference rounded", (double)p);
            cr_assert(fa8_round_f16(r) == r, "p %.9g (%s): remainder %.9g is not an FP16 value", (double)p, fa8_fmt_name(pf[k]), (double)r);
            cr_assert(fabs((double)r - ((double)ps - ph)) <= fmax(ldexp(fabs(ps), -11), 0x1p-25), "p %.9g: remainder off P s - P^ by more than FP16's rounding", (double)p);
        }
}

/* ---- format metadata -------------------------------------------------------------------------- */

Test(fmt, names_round_trip) {
    const char *names[] = {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "f32"};
    for (int i = 0; i <= FA8_FMT_F32; i++) {
        const char *nm = fa8_fmt_name((fa8_fmt)i);
        cr_assert_not_null(nm);
        cr_expect_str_eq(nm, names[i]);
        fa8_fmt out = (fa8_fmt)-1;
        cr_expect(fa8_fmt_from_name(nm, &out) == 0 && out == (fa8_fmt)i, "%s", nm);
    }
    cr_expect_null(fa8_fmt_name((fa8_fmt)5));
    cr_expect_null(fa8_fmt_name((fa8_fmt)-1));
    const char *bad[] = {"", "E4M3", "e4m3 ", "e4m", "e4m3fn", "fp8", "e5m2fnuzz", "bf16"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fa8_fmt out = FA8_FMT_E5M2;
        cr_expect(fa8_fmt_from_name(bad[k], &out) == -1, "'%s' accepted", bad[k]);
        cr_expect(out == FA8_FMT_E5M2, "'%s' wrote *out", bad[k]);
    }
    cr_expect(fa8_fmt_from_name(NULL, NULL) == -1);
}

Test(fmt, is_fp8_and_max) {
    for (int i = 0; i < NFMT; i++) cr_expect(fa8_fmt_is_fp8(FMTS[i]));
    cr_expect(!fa8_fmt_is_fp8(FA8_FMT_F32));
    cr_expect(!fa8_fmt_is_fp8((fa8_fmt)7));
    cr_expect(fa8_fmt_max(FA8_FMT_E4M3) == 448.0f);
    cr_expect(fa8_fmt_max(FA8_FMT_E5M2) == 57344.0f);
    cr_expect(fa8_fmt_max(FA8_FMT_E4M3FNUZ) == 240.0f);
    cr_expect(fa8_fmt_max(FA8_FMT_E5M2FNUZ) == 57344.0f);
    cr_expect(fa8_fmt_max(FA8_FMT_F32) == FLT_MAX);
}
