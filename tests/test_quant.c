/* test_quant.c — fa8_quantize (CPU quant instances) against an independent FP64 model.
 *
 * For every block the test recomputes, from the inputs alone:
 *   amax (FP64 max of |x| over the block's rows x D, exact for float inputs),
 *   scale = (float)amax / fmt_max  (pow2: the smallest power of two p with amax <= fmt_max * p, found in FP64),
 *   codes = fa8_encode(fmt, x * (1.0f / scale))  (the contract of docs/numerics.md, bit-exact),
 * and checks the error bound of the dequantized value, the transposed copy and its zero padding, that nothing
 * outside the outputs is written, and the NaN/Inf reporting (FA8_ERR_NONFINITE naming the block or index).
 * Instances missing from a build (e.g. the minimal profile) are skipped, never counted as passes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa8.h"

/* ---- random inputs -------------------------------------------------------------------------- */

typedef struct { uint64_t s[4]; } rng;

static uint64_t rng_next(rng *r) { /* xoshiro256** */
  uint64_t *s = r->s;
  const uint64_t x = s[1] * 5, res = (x << 7 | x >> 57) * 9, t = s[1] << 17;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = s[3] << 45 | s[3] >> 19;
  return res;
}
static void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; ++i) { /* splitmix64 */
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    r->s[i] = z ^ (z >> 31);
  }
}
static double rng_unit(rng *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1.0p-53; }
static double rng_normal(rng *r) { return sqrt(-2.0 * log(rng_unit(r))) * cos(6.283185307179586 * rng_unit(r)); }

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (v << 7); }

/* Logical [B,S,H,D] values: normal, a few outlier channels (gain up to 2^10), a per-row gain in 2^[-8,8], some
 * elements 2^10..2^40 times smaller (they underflow to FP8 subnormals or zero inside their block), a few exact
 * zeros, and an overall magnitude 2^[-20,20] per case: a huge dynamic range in every block. */
static void gen_values(float *x, int64_t rows, int D, uint64_t seed) {
  rng r;
  rng_seed(&r, seed);
  double *gain = malloc(sizeof(double) * (size_t)D);
  cr_assert(gain);
  for (int c = 0; c < D; ++c) gain[c] = 1.0;
  const int nout = 1 + (int)(rng_next(&r) % 6);
  for (int i = 0; i < nout; ++i) gain[rng_next(&r) % (uint64_t)D] = ldexp(1.0, 4 + (int)(rng_next(&r) % 7));
  const double overall = ldexp(1.0, (int)(rng_next(&r) % 41) - 20);
  for (int64_t i = 0; i < rows; ++i) {
    const double rowg = ldexp(1.0, (int)(rng_next(&r) % 17) - 8) * overall;
    for (int c = 0; c < D; ++c) {
      const double u = rng_unit(&r);
      double v = rng_normal(&r) * gain[c] * rowg;
      if (u < 0.03) v = 0.0;
      else if (u < 0.08) v *= ldexp(1.0, -10 - (int)(rng_next(&r) % 31));
      x[i * D + c] = (float)v;
    }
  }
  free(gain);
}

/* ---- format facts (from the format definitions, not the codec) ------------------------------ */

typedef struct { int mbits; double max, half_sub; uint8_t maxcode; } fmt_spec;

static fmt_spec spec_of(fa8_fmt f) {
  /* half_sub: half the subnormal quantum 2^(1 - bias - mbits) */
  if (f == FA8_FMT_E4M3) return (fmt_spec){ 3, 448.0, ldexp(1.0, 1 - 7 - 3 - 1), 0x7E };
  return (fmt_spec){ 2, 57344.0, ldexp(1.0, 1 - 15 - 2 - 1), 0x7B };
}

static int code_is_special(fa8_fmt f, uint8_t c) { /* NaN or Inf code */
  return f == FA8_FMT_E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7C) == 0x7C;
}

/* The smallest power of two p with amax <= fmt_max * p (FP64, exact). */
static double pow2_ref(double amax, double fmax) {
  int e;
  frexp(amax / fmax, &e);
  double p = ldexp(1.0, e);
  while (p / 2 * fmax >= amax) p /= 2;
  while (p * fmax < amax) p *= 2;
  return p;
}

/* ---- one quantization case ------------------------------------------------------------------ */

typedef struct {
  int B, S, H, D;
  fa8_fmt fmt;
  fa8_dtype in;       /* F32 or BF16 */
  int rows;           /* scale_rows, 0 = per tensor */
  int pow2;
  int threads;
  int with_t;         /* also write the transposed copy */
  int tpitch_extra;   /* data_t stride[2] = S_pad + tpitch_extra */
  int relaxed_scale;  /* check the scale's properties only (finite, > 0, 1/scale finite, amax/scale <= max) */
  uint64_t seed;
} qcase;

typedef struct {
  qcase c;
  int64_t n, nblk, nscale, spad, tpitch, tbytes;
  float *x;           /* values as the quantizer sees them (bf16-rounded for bf16 inputs) */
  void *xin;          /* the input buffer handed to fa8_quantize */
  uint8_t *codes, *codes_t;
  float *scales;      /* nscale + 8 entries, sentinel-filled */
} qrun;

#define SCALE_SENTINEL (-7.25f)

static void case_name(const qcase *c, char *buf, size_t n) {
  snprintf(buf, n, "%s %s B=%d S=%d H=%d D=%d rows=%d pow2=%d threads=%d seed=%llu", fa8_fmt_name(c->fmt),
           c->in == FA8_DTYPE_BF16 ? "bf16" : "f32", c->B, c->S, c->H, c->D, c->rows, c->pow2, c->threads,
           (unsigned long long)c->seed);
}

static void qrun_alloc(qrun *r, const qcase *c) {
  memset(r, 0, sizeof *r);
  r->c = *c;
  r->n = (int64_t)c->B * c->S * c->H * c->D;
  r->nblk = c->rows <= 0 || c->rows >= c->S ? 1 : (c->S + c->rows - 1) / c->rows;
  r->nscale = c->rows == 0 ? 1 : (int64_t)c->B * c->H * r->nblk;
  r->spad = (c->S + 15) / 16 * 16;
  r->tpitch = r->spad + c->tpitch_extra;
  r->tbytes = (int64_t)c->B * c->H * c->D * r->tpitch;
  r->x = malloc(sizeof(float) * (size_t)r->n);
  r->xin = malloc((c->in == FA8_DTYPE_BF16 ? 2 : 4) * (size_t)r->n);
  r->codes = malloc((size_t)r->n);
  r->codes_t = malloc((size_t)r->tbytes);
  r->scales = malloc(sizeof(float) * (size_t)(r->nscale + 8));
  cr_assert(r->x && r->xin && r->codes && r->codes_t && r->scales);
  memset(r->codes, 0xAB, (size_t)r->n);
  memset(r->codes_t, 0xAB, (size_t)r->tbytes);
  for (int64_t i = 0; i < r->nscale + 8; ++i) r->scales[i] = SCALE_SENTINEL;
}

static void qrun_free(qrun *r) {
  free(r->x); free(r->xin); free(r->codes); free(r->codes_t); free(r->scales);
  memset(r, 0, sizeof *r);
}

/* Stores logical values into the input buffer; r->x becomes what the quantizer sees. */
static void qrun_set_input(qrun *r, const float *vals) {
  for (int64_t i = 0; i < r->n; ++i) {
    if (r->c.in == FA8_DTYPE_BF16) {
      const uint16_t b = fa8_bf16_from_f32(vals[i]);
      ((uint16_t *)r->xin)[i] = b;
      r->x[i] = fa8_f32_from_bf16(b);
    } else {
      ((float *)r->xin)[i] = vals[i];
      r->x[i] = vals[i];
    }
  }
}

static fa8_status qrun_quantize(qrun *r) {
  const qcase *c = &r->c;
  fa8_quant_problem p;
  fa8_quant_problem_init(&p);
  p.batch = c->B; p.seqlen = c->S; p.heads = c->H; p.hdim = c->D;
  p.fmt = c->fmt; p.scale_rows = c->rows; p.pow2_scales = c->pow2; p.num_threads = c->threads;
  const int64_t H = c->H, D = c->D, S = c->S;
  fa8_tensor x = { r->xin, c->in, { S * H * D, H * D, D, 1 } };
  fa8_qtensor out;
  memset(&out, 0, sizeof out);
  out.data = (fa8_tensor){ r->codes, FA8_DTYPE_FP8, { S * H * D, H * D, D, 1 } };
  if (c->with_t) out.data_t = (fa8_tensor){ r->codes_t, FA8_DTYPE_FP8, { H * D * r->tpitch, D * r->tpitch, r->tpitch, 1 } };
  out.scales = r->scales;
  out.scale_rows = 12345; /* set by fa8_quantize */
  out.fmt = (fa8_fmt)3;
  const fa8_status st = fa8_quantize(&p, &x, &out, NULL, 0, NULL);
  if (st == FA8_OK) {
    cr_assert_eq(out.fmt, c->fmt, "fa8_quantize must set out->fmt");
    cr_assert_eq(out.scale_rows, c->rows, "fa8_quantize must set out->scale_rows");
  }
  return st;
}

/* The block (rows [s0, s1)) of scale index k for (b, h). */
static void block_rows(const qrun *r, int64_t k, int *s0, int *s1) {
  const int rows = r->c.rows <= 0 || r->c.rows >= r->c.S ? r->c.S : r->c.rows;
  *s0 = (int)(k * rows);
  *s1 = *s0 + rows < r->c.S ? *s0 + rows : r->c.S;
}

static int64_t xidx(const qrun *r, int b, int s, int h, int d) {
  return (((int64_t)b * r->c.S + s) * r->c.H + h) * r->c.D + d;
}

/* Expected scale from an FP64 amax. */
static float expected_scale(double amax, const qcase *c) {
  const fmt_spec sp = spec_of(c->fmt);
  if (amax == 0.0) return 1.0f;
  if (c->pow2) return (float)pow2_ref(amax, sp.max);
  return (float)amax / (float)sp.max;
}

static int fail_count;
static char first_fail[1024];

/* Records a verification failure (the first one is kept for the assertion message); returns 0. */
static int qfail(const qrun *r, const char *fmt, ...) {
  char name[256], msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  case_name(&r->c, name, sizeof name);
  if (!fail_count++) snprintf(first_fail, sizeof first_fail, "[%s] %s", name, msg);
  cr_log_error("[%s] %s", name, msg);
  return 0;
}
#define QFAIL(...) return qfail(r, __VA_ARGS__)

/* Checks one (b, h, block) with its reported scale; 1 ok, 0 a failure was logged. skip_nonfinite: the block
 * holds NaN/Inf and only its NaN scale is checked. */
static int check_block(const qrun *r, int b, int h, int s0, int s1, float scale, int nonfinite) {
  const qcase *c = &r->c;
  const fmt_spec sp = spec_of(c->fmt);
  if (nonfinite) {
    if (!isnan(scale)) QFAIL("block b=%d h=%d rows %d..%d holds NaN/Inf but its scale is %a, expected NaN", b, h, s0, s1 - 1, scale);
    return 1;
  }
  double amax = 0.0;
  int64_t amax_at = -1;
  for (int s = s0; s < s1; ++s)
    for (int d = 0; d < c->D; ++d) {
      const double v = fabs((double)r->x[xidx(r, b, s, h, d)]);
      if (v > amax) { amax = v; amax_at = xidx(r, b, s, h, d); }
    }
  const float want = expected_scale(amax, c);
  if (c->relaxed_scale) {
    if (!(scale > 0.0f) || !isfinite(scale) || !isfinite(1.0f / scale))
      QFAIL("block b=%d h=%d rows %d..%d (amax %a): scale %a is unusable (zero, or its reciprocal overflows)", b, h, s0,
            s1 - 1, amax, scale);
    if (amax / (double)scale > sp.max * (1.0 + 0x1.0p-20))
      QFAIL("block b=%d h=%d: amax %a / scale %a = %.9g exceeds the format max", b, h, amax, scale, amax / scale);
  } else if (memcmp(&want, &scale, sizeof want) != 0)
    QFAIL("block b=%d h=%d rows %d..%d: scale %a, expected %a (amax %a)", b, h, s0, s1 - 1, scale, want, amax);
  if (c->pow2 && amax > 0.0 && !c->relaxed_scale) {
    int e;
    const double m = frexp((double)scale, &e);
    if (m != 0.5) QFAIL("pow2 scale %a is not a power of two", scale);
    if (amax / (double)scale > sp.max) QFAIL("pow2 scale %a too small: amax/scale = %.17g > %g", scale, amax / scale, sp.max);
    if (amax / ((double)scale / 2) <= sp.max) QFAIL("pow2 scale %a not the smallest: amax/(scale/2) = %.17g", scale, amax / scale * 2);
  }
  const float inv = 1.0f / scale;
  for (int s = s0; s < s1; ++s)
    for (int d = 0; d < c->D; ++d) {
      const int64_t i = xidx(r, b, s, h, d);
      const float xv = r->x[i];
      const uint8_t code = r->codes[i], wantc = fa8_encode(c->fmt, xv * inv);
      if (code != wantc)
        QFAIL("code at [b=%d s=%d h=%d d=%d] is 0x%02x, expected fa8_encode(%a * (1/%a)) = 0x%02x", b, s, h, d, code, xv,
              scale, wantc);
      if (code_is_special(c->fmt, code)) QFAIL("code 0x%02x at [b=%d s=%d h=%d d=%d] is NaN/Inf", code, b, s, h, d);
      /* half an ulp of the format relative to |x| (+ FP32 rounding of x * (1/scale)), or half a subnormal step */
      const double deq = (double)fa8_decode(c->fmt, code) * (double)scale;
      const double err = fabs((double)xv - deq);
      const double bound = (ldexp(1.0, -(sp.mbits + 1)) + 0x1.0p-21) * fabs((double)xv) + sp.half_sub * (double)scale * (1.0 + 0x1.0p-21);
      if (!(err <= bound))
        QFAIL("dequantized [b=%d s=%d h=%d d=%d] = %.9g for x = %.9g: error %.3g > bound %.3g (scale %a)", b, s, h, d, deq,
              (double)xv, err, bound, scale);
      if (c->with_t) {
        const uint8_t tc = r->codes_t[(((int64_t)b * c->H + h) * c->D + d) * r->tpitch + s];
        if (tc != code) QFAIL("data_t[b=%d h=%d d=%d s=%d] is 0x%02x, row code is 0x%02x", b, h, d, s, tc, code);
      }
    }
  /* the largest element lands on the largest finite code (not NaN, not a smaller value) unless pow2 rounding
   * left headroom */
  if (!c->pow2 && amax > 0.0 && !c->relaxed_scale) {
    const uint8_t code = r->codes[amax_at];
    if ((code & 0x7F) != sp.maxcode)
      QFAIL("the block's amax %a encodes to 0x%02x, expected the max code 0x%02x", amax, code, sp.maxcode);
  }
  return 1;
}

/* Verifies a successful (or partially failed, nonfinite blocks marked) run. nonfinite(b,h,k) -> 1 if the block
 * was poisoned. */
static int verify(const qrun *r, const unsigned char *poisoned) {
  const qcase *c = &r->c;
  for (int b = 0; b < c->B; ++b)
    for (int h = 0; h < c->H; ++h)
      for (int64_t k = 0; k < r->nblk; ++k) {
        int s0, s1;
        block_rows(r, k, &s0, &s1);
        const float scale = c->rows == 0 ? r->scales[0] : r->scales[((int64_t)b * c->H + h) * r->nblk + k];
        const int bad = poisoned ? poisoned[((int64_t)b * c->H + h) * r->nblk + k] : 0;
        if (c->rows == 0) {
          /* per tensor: one amax over everything */
          double amax = 0.0;
          for (int64_t i = 0; i < r->n; ++i) amax = fabs((double)r->x[i]) > amax ? fabs((double)r->x[i]) : amax;
          const float want = expected_scale(amax, c);
          if (memcmp(&want, &scale, sizeof want) != 0) QFAIL("per-tensor scale %a, expected %a (amax %a)", scale, want, amax);
          /* every (b,h) block shares it; check codes against that scale */
          const float inv = 1.0f / scale;
          const fmt_spec sp = spec_of(c->fmt);
          for (int s = s0; s < s1; ++s)
            for (int d = 0; d < c->D; ++d) {
              const int64_t i = xidx(r, b, s, h, d);
              const uint8_t code = r->codes[i], wantc = fa8_encode(c->fmt, r->x[i] * inv);
              if (code != wantc) QFAIL("per-tensor code at [b=%d s=%d h=%d d=%d] is 0x%02x, expected 0x%02x", b, s, h, d, code, wantc);
              const double err = fabs((double)r->x[i] - (double)fa8_decode(c->fmt, code) * scale);
              const double bound = (ldexp(1.0, -(sp.mbits + 1)) + 0x1.0p-21) * fabs((double)r->x[i]) + sp.half_sub * (double)scale * (1.0 + 0x1.0p-21);
              if (!(err <= bound)) QFAIL("per-tensor dequantized error %.3g > %.3g at i=%lld", err, bound, (long long)i);
              if (c->with_t && r->codes_t[(((int64_t)b * c->H + h) * c->D + d) * r->tpitch + s] != code)
                QFAIL("per-tensor data_t mismatch at [b=%d h=%d d=%d s=%d]", b, h, d, s);
            }
        } else if (!check_block(r, b, h, s0, s1, scale, bad)) {
          return 0;
        }
      }
  /* scales beyond the count are untouched */
  for (int64_t i = r->nscale; i < r->nscale + 8; ++i)
    if (r->scales[i] != SCALE_SENTINEL) QFAIL("scales[%lld] written beyond the %lld scales", (long long)i, (long long)r->nscale);
  /* transposed copy: padding columns [S, S_pad) zero, columns [S_pad, pitch) untouched; without data_t: untouched */
  for (int b = 0; b < c->B; ++b)
    for (int h = 0; h < c->H; ++h)
      for (int d = 0; d < c->D; ++d) {
        const uint8_t *row = r->codes_t + (((int64_t)b * c->H + h) * c->D + d) * r->tpitch;
        for (int64_t s = 0; s < r->tpitch; ++s) {
          const uint8_t want = !c->with_t || s >= r->spad ? 0xAB : s >= c->S ? 0x00 : row[s];
          if (row[s] != want)
            QFAIL("data_t[b=%d h=%d d=%d s=%lld] is 0x%02x, expected 0x%02x (S=%d, S_pad=%lld, pitch=%lld)", b, h, d,
                  (long long)s, row[s], want, c->S, (long long)r->spad, (long long)r->tpitch);
        }
      }
  return 1;
}

/* Runs one case end to end. Returns 1 ran, 0 skipped (instance not in this build). */
static int run_case(const qcase *c) {
  qrun run, *r = &run;
  qrun_alloc(r, c);
  float *vals = malloc(sizeof(float) * (size_t)r->n);
  cr_assert(vals);
  gen_values(vals, r->n / c->D, c->D, c->seed);
  qrun_set_input(r, vals);
  free(vals);
  const fa8_status st = qrun_quantize(r);
  if (st == FA8_ERR_UNSUPPORTED && strstr(fa8_last_error(), "no quantize instance")) {
    qrun_free(r);
    return 0;
  }
  char name[256];
  case_name(c, name, sizeof name);
  cr_assert_eq(st, FA8_OK, "[%s] fa8_quantize: %s (%s)", name, fa8_status_string(st), fa8_last_error());
  cr_assert(verify(r, NULL), "%s", first_fail);
  qrun_free(r);
  return 1;
}

/* The full matrix for one (format, input type): head dims x S (with tails) x scale_rows x pow2. */
static void sweep(fa8_fmt fmt, fa8_dtype in, int pow2) {
  static const int DS[] = { 64, 96, 128, 192, 256 };
  static const int SS[] = { 1, 77, 128, 300 };
  static const int ROWS[] = { 64, 128, 100, 0 };
  static const int BH[][2] = { { 2, 3 }, { 1, 1 }, { 3, 2 } };
  int ran = 0, skipped = 0, k = 0;
  for (size_t di = 0; di < sizeof DS / sizeof DS[0]; ++di)
    for (size_t si = 0; si < sizeof SS / sizeof SS[0]; ++si)
      for (size_t ri = 0; ri < sizeof ROWS / sizeof ROWS[0]; ++ri, ++k) {
        qcase c = { 0 };
        c.B = BH[k % 3][0]; c.H = BH[k % 3][1];
        c.S = SS[si]; c.D = DS[di]; c.fmt = fmt; c.in = in; c.rows = ROWS[ri]; c.pow2 = pow2;
        c.threads = k % 4;  /* 0 (all cores), 1, 2, 3 */
        c.with_t = k % 5 != 4;
        c.tpitch_extra = k % 3 == 1 ? 16 : 0;
        uint64_t seed = 0x5eed;
        seed = mix(seed, (uint64_t)fmt); seed = mix(seed, (uint64_t)in); seed = mix(seed, (uint64_t)pow2);
        seed = mix(seed, (uint64_t)c.D); seed = mix(seed, (uint64_t)c.S); seed = mix(seed, (uint64_t)c.rows);
        c.seed = seed;
        if (run_case(&c)) ++ran;
        else ++skipped;
      }
  if (!ran) cr_skip_test("no %s %s quantize instances in this build", fa8_fmt_name(fmt), in == FA8_DTYPE_BF16 ? "bf16" : "f32");
  if (skipped) cr_log_info("%d cases skipped: head dims not in this build", skipped);
}

TestSuite(quant, .timeout = 240);

Test(quant, e4m3_f32) { sweep(FA8_FMT_E4M3, FA8_DTYPE_F32, 0); }
Test(quant, e4m3_f32_pow2) { sweep(FA8_FMT_E4M3, FA8_DTYPE_F32, 1); }
Test(quant, e4m3_bf16) { sweep(FA8_FMT_E4M3, FA8_DTYPE_BF16, 0); }
Test(quant, e4m3_bf16_pow2) { sweep(FA8_FMT_E4M3, FA8_DTYPE_BF16, 1); }
Test(quant, e5m2_f32) { sweep(FA8_FMT_E5M2, FA8_DTYPE_F32, 0); }
Test(quant, e5m2_f32_pow2) { sweep(FA8_FMT_E5M2, FA8_DTYPE_F32, 1); }
Test(quant, e5m2_bf16) { sweep(FA8_FMT_E5M2, FA8_DTYPE_BF16, 0); }
Test(quant, e5m2_bf16_pow2) { sweep(FA8_FMT_E5M2, FA8_DTYPE_BF16, 1); }

/* scale_rows >= S: one block per (b, h) covering every row */
Test(quant, scale_rows_at_least_seqlen) {
  const int rows[] = { 300, 301, 4096 };
  for (int i = 0; i < 3; ++i) {
    qcase c = { .B = 2, .S = 300, .H = 2, .D = 64, .fmt = FA8_FMT_E4M3, .in = FA8_DTYPE_F32, .rows = rows[i],
                .threads = 2, .with_t = 1, .seed = 77 + (uint64_t)i };
    if (!run_case(&c)) cr_skip_test("no e4m3 d64 quantize instance");
  }
}

/* ---- special blocks -------------------------------------------------------------------------- */

static qrun make_run(qcase c) {
  qrun r;
  qrun_alloc(&r, &c);
  float *vals = malloc(sizeof(float) * (size_t)r.n);
  cr_assert(vals);
  gen_values(vals, r.n / c.D, c.D, c.seed);
  qrun_set_input(&r, vals);
  free(vals);
  return r;
}

static void set_x(qrun *r, int b, int s, int h, int d, float v) {
  const int64_t i = xidx(r, b, s, h, d);
  if (r->c.in == FA8_DTYPE_BF16) {
    ((uint16_t *)r->xin)[i] = fa8_bf16_from_f32(v);
    r->x[i] = fa8_f32_from_bf16(((uint16_t *)r->xin)[i]);
  } else {
    ((float *)r->xin)[i] = v;
    r->x[i] = v;
  }
}

/* 1 when the status says this build has no instance for the case (it is then skipped, not passed). */
static int missing(fa8_status st) { return st == FA8_ERR_UNSUPPORTED && strstr(fa8_last_error(), "no quantize instance"); }

static void skip_if_missing(fa8_status st) {
  if (missing(st)) cr_skip_test("%s", fa8_last_error());
}

/* An all-zero block (+0 and, separately, -0) gets scale 1 and zero codes; its neighbours are unaffected. */
Test(quant, zero_block) {
  for (int variant = 0; variant < 4; ++variant) {
    const int pow2 = variant & 1, negzero = variant >> 1;
    const fa8_fmt fmt = variant == 1 ? FA8_FMT_E5M2 : FA8_FMT_E4M3;
    qrun r = make_run((qcase){ .B = 2, .S = 200, .H = 3, .D = 128, .fmt = fmt, .in = FA8_DTYPE_F32, .rows = 64,
                               .pow2 = pow2, .threads = 3, .with_t = 1, .seed = 900 + (uint64_t)variant });
    /* block 1 of (b=1, h=2): rows 64..127 */
    for (int s = 64; s < 128; ++s)
      for (int d = 0; d < r.c.D; ++d) set_x(&r, 1, s, 2, d, negzero ? -0.0f : 0.0f);
    const fa8_status st = qrun_quantize(&r);
    if (missing(st) && fmt == FA8_FMT_E5M2) { qrun_free(&r); continue; }
    skip_if_missing(st);
    cr_assert_eq(st, FA8_OK, "%s", fa8_last_error());
    cr_assert_eq(r.scales[(1 * 3 + 2) * r.nblk + 1], 1.0f, "all-zero block scale %a, expected 1", r.scales[(1 * 3 + 2) * r.nblk + 1]);
    for (int s = 64; s < 128; ++s)
      for (int d = 0; d < r.c.D; ++d) {
        const uint8_t code = r.codes[xidx(&r, 1, s, 2, d)];
        if (negzero) cr_assert(code == 0x00 || code == 0x80, "-0 encodes to 0x%02x", code);
        else cr_assert_eq(code, 0x00, "zero encodes to 0x%02x at s=%d d=%d", code, s, d);
        cr_assert_eq(fa8_decode(fmt, code), 0.0f);
      }
    cr_assert(verify(&r, NULL), "%s", first_fail);
    qrun_free(&r);
  }
}

/* A block holding NaN / +Inf / -Inf: FA8_ERR_NONFINITE naming (b, h, rows), its scale NaN, every other block
 * quantized exactly as usual. */
Test(quant, nonfinite_block_named) {
  static const struct { int S, rows, b, h, s, blk; const char *span; } cases[] = {
    { 300, 100, 1, 2, 150, 1, "rows 100..199" },
    { 300, 128, 0, 1, 299, 2, "rows 256..299" },    /* tail block */
    { 77, 64, 1, 0, 0, 0, "rows 0..63" },
    { 77, 128, 0, 2, 76, 0, "rows 0..76" },          /* one block, rows >= S */
  };
  const float bad[] = { NAN, INFINITY, -INFINITY, -NAN };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    for (int k = 0; k < 4; ++k) {
      const fa8_dtype in = k % 2 ? FA8_DTYPE_BF16 : FA8_DTYPE_F32;
      qrun r = make_run((qcase){ .B = 2, .S = cases[i].S, .H = 3, .D = 64, .fmt = k < 2 ? FA8_FMT_E4M3 : FA8_FMT_E5M2,
                                 .in = in, .rows = cases[i].rows, .pow2 = (int)(i & 1), .threads = 2, .with_t = 1,
                                 .seed = 1000 + i * 4 + (uint64_t)k });
      set_x(&r, cases[i].b, cases[i].s, cases[i].h, 17, bad[k]);
      const fa8_status st = qrun_quantize(&r);
      if (missing(st) && k >= 2) { qrun_free(&r); continue; } /* no E5M2 quantizer in this build */
      skip_if_missing(st);
      char want_b[32], want_h[32];
      snprintf(want_b, sizeof want_b, "b=%d", cases[i].b);
      snprintf(want_h, sizeof want_h, "h=%d", cases[i].h);
      cr_assert_eq(st, FA8_ERR_NONFINITE, "case %zu/%d: status %s (%s)", i, k, fa8_status_string(st), fa8_last_error());
      const char *msg = fa8_last_error();
      cr_assert(strstr(msg, want_b) && strstr(msg, want_h) && strstr(msg, cases[i].span),
                "case %zu/%d: message '%s' does not name %s, %s, %s", i, k, msg, want_b, want_h, cases[i].span);
      unsigned char *poisoned = calloc((size_t)r.nscale, 1);
      cr_assert(poisoned);
      poisoned[((int64_t)cases[i].b * 3 + cases[i].h) * r.nblk + cases[i].blk] = 1;
      cr_assert(verify(&r, poisoned), "case %zu/%d: the other blocks are not quantized correctly: %s", i, k, first_fail);
      free(poisoned);
      qrun_free(&r);
    }
}

/* Two poisoned blocks: the first in (b, h, block) order is named, both get NaN scales. */
Test(quant, nonfinite_two_blocks_first_named) {
  qrun r = make_run((qcase){ .B = 2, .S = 256, .H = 2, .D = 64, .fmt = FA8_FMT_E4M3, .in = FA8_DTYPE_F32, .rows = 64,
                             .threads = 2, .with_t = 0, .seed = 4242 });
  set_x(&r, 1, 200, 1, 3, INFINITY);  /* b=1 h=1 block 3 */
  set_x(&r, 0, 70, 1, 63, NAN);       /* b=0 h=1 block 1: first */
  const fa8_status st = qrun_quantize(&r);
  skip_if_missing(st);
  cr_assert_eq(st, FA8_ERR_NONFINITE);
  const char *msg = fa8_last_error();
  cr_assert(strstr(msg, "b=0") && strstr(msg, "h=1") && strstr(msg, "rows 64..127"), "message: %s", msg);
  unsigned char poisoned[2 * 2 * 4] = { 0 };
  poisoned[(0 * 2 + 1) * 4 + 1] = poisoned[(1 * 2 + 1) * 4 + 3] = 1;
  cr_assert(verify(&r, poisoned), "%s", first_fail);
  qrun_free(&r);
}

/* Per-tensor scaling with a NaN/Inf: FA8_ERR_NONFINITE naming the element's index. */
Test(quant, nonfinite_per_tensor_named) {
  const float bad[] = { NAN, -INFINITY };
  for (int k = 0; k < 2; ++k) {
    qrun r = make_run((qcase){ .B = 2, .S = 77, .H = 3, .D = 128, .fmt = FA8_FMT_E4M3,
                               .in = k ? FA8_DTYPE_BF16 : FA8_DTYPE_F32, .rows = 0, .threads = 2, .with_t = 1,
                               .seed = 5000 + (uint64_t)k });
    set_x(&r, 1, 5 + k, 2, 7 * k + 9, bad[k]);
    const fa8_status st = qrun_quantize(&r);
    skip_if_missing(st);
    cr_assert_eq(st, FA8_ERR_NONFINITE, "status %s (%s)", fa8_status_string(st), fa8_last_error());
    char want[96];
    snprintf(want, sizeof want, "b=1, s=%d, h=2, d=%d", 5 + k, 7 * k + 9);
    cr_assert(strstr(fa8_last_error(), want), "message '%s' does not name %s", fa8_last_error(), want);
    qrun_free(&r);
  }
}

/* Saturation: the codec saturates values beyond the max, +-Inf included (satfinite: never NaN/Inf codes, also
 * for E5M2 which has Inf codes); in a block the largest element
 * sits on the max code and none of the codes is special (checked in verify); a block with one huge outlier
 * flushes the small values to the subnormal/zero codes without error. */
Test(quant, saturation_and_outliers) {
  const fa8_fmt fmts[2] = { FA8_FMT_E4M3, FA8_FMT_E5M2 };
  for (int f = 0; f < 2; ++f) {
    const fmt_spec sp = spec_of(fmts[f]);
    const float beyond[] = { (float)sp.max * 1.07f, (float)sp.max * 2.0f, 1e30f, 3.4e38f, INFINITY };
    for (int i = 0; i < 5; ++i) {
      const uint8_t cp = fa8_encode(fmts[f], beyond[i]), cn = fa8_encode(fmts[f], -beyond[i]);
      cr_assert_eq(cp, sp.maxcode, "%s encode(%g) = 0x%02x, expected 0x%02x", fa8_fmt_name(fmts[f]), beyond[i], cp, sp.maxcode);
      cr_assert_eq(cn, 0x80 | sp.maxcode, "%s encode(-%g) = 0x%02x", fa8_fmt_name(fmts[f]), beyond[i], cn);
    }
    for (int pow2 = 0; pow2 < 2; ++pow2) {
      qrun r = make_run((qcase){ .B = 1, .S = 130, .H = 2, .D = 64, .fmt = fmts[f], .in = FA8_DTYPE_F32, .rows = 64,
                                 .pow2 = pow2, .threads = 1, .with_t = 1, .seed = 6000 + (uint64_t)(f * 2 + pow2) });
      set_x(&r, 0, 3, 1, 5, 3.0e37f);     /* a huge outlier: the rest of its block underflows */
      set_x(&r, 0, 70, 0, 0, -1.0e-30f);  /* a tiny negative amax-holder in an otherwise small block */
      for (int d = 0; d < 64; ++d)
        for (int s = 64; s < 128; ++s) set_x(&r, 0, s, 0, d, ldexpf(1.0f, -110) * (float)((d * 7 + s) % 13 - 6));
      const fa8_status st = qrun_quantize(&r);
      if (missing(st) && f == 1) { qrun_free(&r); continue; }
      skip_if_missing(st);
      cr_assert_eq(st, FA8_OK, "%s", fa8_last_error());
      cr_assert(verify(&r, NULL), "%s", first_fail);
      qrun_free(&r);
    }
  }
}

/* Blocks whose amax is tiny (but normal, or subnormal) still get a usable scale: finite and nonzero with a
 * finite reciprocal, amax/scale within the format; no NaN codes, nothing saturated to a wrong magnitude, the
 * dequantized error within the format's bound. (amax / fmt_max below 2^-128 makes 1/scale overflow to inf: zeros
 * then encode as NaN (0 * inf) and everything else saturates. The scale itself is checked by its properties
 * only, so a fix may clamp it.) */
Test(quant, tiny_amax_blocks) {
  const float amaxes[] = { 1.0e-30f, 1.0e-36f, 1.0e-37f, 1.0e-38f, 3.0e-41f, 1.4e-45f };
  const fa8_fmt fmts[2] = { FA8_FMT_E4M3, FA8_FMT_E5M2 };
  int failures = 0;
  char first[1536] = "";
  for (int f = 0; f < 2; ++f)
    for (int pow2 = 0; pow2 < 2; ++pow2)
      for (size_t a = 0; a < sizeof amaxes / sizeof amaxes[0]; ++a) {
        qrun r = make_run((qcase){ .B = 1, .S = 64, .H = 1, .D = 64, .fmt = fmts[f], .in = FA8_DTYPE_F32, .rows = 64,
                                   .pow2 = pow2, .threads = 1, .with_t = 0, .relaxed_scale = 1,
                                   .seed = 7000 + a });
        for (int s = 0; s < 64; ++s)
          for (int d = 0; d < 64; ++d) set_x(&r, 0, s, 0, d, (s + d) % 3 == 0 ? 0.0f : amaxes[a] * (float)((s * 64 + d) % 9) / 8.0f);
        set_x(&r, 0, 0, 0, 1, amaxes[a]);
        const fa8_status st = qrun_quantize(&r);
        if (missing(st) && f == 1) { qrun_free(&r); continue; }
        skip_if_missing(st);
        cr_assert_eq(st, FA8_OK, "%s", fa8_last_error());
        const int before = fail_count;
        verify(&r, NULL);
        if (fail_count != before) {
          if (!failures)
            snprintf(first, sizeof first, "%s pow2=%d amax=%g: scale %a, codes[0]=0x%02x for x=0: %s", fa8_fmt_name(fmts[f]),
                     pow2, (double)amaxes[a], r.scales[0], r.codes[0], first_fail);
          ++failures;
        }
        qrun_free(&r);
      }
  cr_assert_eq(failures, 0, "%d tiny-amax configurations quantize wrongly; first: %s", failures, first);
}

/* Non-contiguous views: x read as [B,H,S,D] through strides with padded rows, codes written with a padded row
 * pitch; codes/scales equal the contiguous run and the padding is untouched. */
Test(quant, strided_views_match_contiguous) {
  for (int k = 0; k < 4; ++k) {
    const fa8_dtype in = k & 1 ? FA8_DTYPE_BF16 : FA8_DTYPE_F32;
    const int rows = k & 2 ? 0 : 64;
    qrun r = make_run((qcase){ .B = 2, .S = 100, .H = 3, .D = 128, .fmt = k == 3 ? FA8_FMT_E5M2 : FA8_FMT_E4M3, .in = in,
                               .rows = rows, .pow2 = k == 1, .threads = 2, .with_t = 1, .seed = 8000 + (uint64_t)k });
    fa8_status st = qrun_quantize(&r);
    if (missing(st) && k == 3) { qrun_free(&r); continue; }
    skip_if_missing(st);
    cr_assert_eq(st, FA8_OK, "%s", fa8_last_error());
    cr_assert(verify(&r, NULL), "%s", first_fail);
    const int64_t B = 2, S = 100, H = 3, D = 128, es = in == FA8_DTYPE_BF16 ? 2 : 4;
    /* x physical [B,H,S,D], row pitch D+5, head pitch S*(D+5)+3, batch pitch H*hp+11 */
    const int64_t xs1 = D + 5, xs2 = S * xs1 + 3, xs0 = H * xs2 + 11;
    /* codes [B,S,H,D] with row pitch H*D+7 between sequence rows and D+1 between heads */
    const int64_t cs2 = D + 1, cs1 = H * cs2 + 7, cs0 = S * cs1 + 13;
    char *xb = malloc((size_t)(B * xs0 * es));
    uint8_t *cb = malloc((size_t)(B * cs0));
    float *sc = malloc(sizeof(float) * (size_t)(r.nscale + 8));
    cr_assert(xb && cb && sc);
    memset(xb, 0x7F, (size_t)(B * xs0 * es)); /* NaN-ish padding: must never be read */
    memset(cb, 0xAB, (size_t)(B * cs0));
    for (int64_t i = 0; i < r.nscale + 8; ++i) sc[i] = SCALE_SENTINEL;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h)
          memcpy(xb + (b * xs0 + h * xs2 + s * xs1) * es, (char *)r.xin + (((b * S + s) * H + h) * D) * es, (size_t)(D * es));
    fa8_quant_problem p;
    fa8_quant_problem_init(&p);
    p.batch = 2; p.seqlen = 100; p.heads = 3; p.hdim = 128; p.fmt = r.c.fmt; p.scale_rows = rows; p.pow2_scales = r.c.pow2;
    p.num_threads = 3;
    fa8_tensor x = { xb, in, { xs0, xs1, xs2, 1 } };
    fa8_qtensor out;
    memset(&out, 0, sizeof out);
    out.data = (fa8_tensor){ cb, FA8_DTYPE_FP8, { cs0, cs1, cs2, 1 } };
    out.scales = sc;
    st = fa8_quantize(&p, &x, &out, NULL, 0, NULL);
    cr_assert_eq(st, FA8_OK, "%s", fa8_last_error());
    for (int64_t i = 0; i < r.nscale; ++i) cr_assert_eq(memcmp(&sc[i], &r.scales[i], 4), 0, "scale %lld differs", (long long)i);
    for (int64_t i = r.nscale; i < r.nscale + 8; ++i) cr_assert_eq(sc[i], SCALE_SENTINEL);
    unsigned char *mark = calloc((size_t)(B * cs0), 1);
    cr_assert(mark);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t o = b * cs0 + s * cs1 + h * cs2 + d;
            mark[o] = 1;
            cr_assert_eq(cb[o], r.codes[((b * S + s) * H + h) * D + d], "strided code differs at [%lld,%lld,%lld,%lld]",
                         (long long)b, (long long)s, (long long)h, (long long)d);
          }
    for (int64_t o = 0; o < B * cs0; ++o)
      if (!mark[o]) cr_assert_eq(cb[o], 0xAB, "padding byte %lld of the strided codes was written", (long long)o);
    free(mark); free(xb); free(cb); free(sc);
    qrun_free(&r);
  }
}

/* The result does not depend on the thread count. */
Test(quant, thread_count_invariant) {
  qrun ref = make_run((qcase){ .B = 3, .S = 333, .H = 4, .D = 128, .fmt = FA8_FMT_E4M3, .in = FA8_DTYPE_BF16, .rows = 64,
                               .threads = 1, .with_t = 1, .seed = 9000 });
  fa8_status st = qrun_quantize(&ref);
  skip_if_missing(st);
  cr_assert_eq(st, FA8_OK);
  const int threads[] = { 0, 2, 5, 64 };
  for (int i = 0; i < 4; ++i) {
    qcase c = ref.c;
    c.threads = threads[i];
    qrun r = make_run(c);
    cr_assert_eq(qrun_quantize(&r), FA8_OK);
    cr_assert_eq(memcmp(r.codes, ref.codes, (size_t)r.n), 0, "codes differ with %d threads", threads[i]);
    cr_assert_eq(memcmp(r.codes_t, ref.codes_t, (size_t)r.tbytes), 0, "data_t differs with %d threads", threads[i]);
    cr_assert_eq(memcmp(r.scales, ref.scales, sizeof(float) * (size_t)r.nscale), 0, "scales differ with %d threads", threads[i]);
    qrun_free(&r);
  }
  qrun_free(&ref);
}

Test(quant, scale_count) {
  fa8_quant_problem p;
  fa8_quant_problem_init(&p);
  p.batch = 3; p.heads = 5; p.seqlen = 300;
  p.scale_rows = 128; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5 * 3);
  p.scale_rows = 100; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5 * 3);
  p.scale_rows = 64; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5 * 5);
  p.scale_rows = 300; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5);
  p.scale_rows = 1000; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5);
  p.scale_rows = 0; cr_assert_eq(fa8_quant_scale_count(&p), 1);
  p.seqlen = 1; p.scale_rows = 64; cr_assert_eq(fa8_quant_scale_count(&p), 3 * 5);
}
