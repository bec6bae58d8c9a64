/* test_reference.c — properties of the FP64 attention reference (backends/cpu/reference.c).
 *
 * Each test checks something that must hold independently of how the reference is written:
 * gradients against central differences of a separate naive forward, exact algebraic identities
 * (delta = dO.O, scale covariance, shift invariance of keys), the emulated flavour's relation to
 * the plain one, determinism across thread counts, and argument validation.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/* ---- fixtures ------------------------------------------------------------------------------ */

typedef struct {
    int B, Sq, Sk, H, Hkv, Dqk, Dv, causal;
} shape;

typedef struct {
    shape s;
    float *q, *k, *v, *dout;
    size_t nq, nk, nv, ndo;
} inputs;

typedef struct {
    fa8_ref_out o;
    size_t no, nl, ndq, ndk, ndv;
} outputs;

static uint64_t rng_state;

static double urand(void) { /* uniform [-1, 1), deterministic */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-52 - 1.0;
}

static float *fill(size_t n, double amp) {
    float *x = malloc(n * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(amp * urand());
    return x;
}

static inputs make_inputs(shape s, uint64_t seed) {
    inputs in = {.s = s};
    rng_state = seed;
    in.nq = (size_t)s.B * s.Sq * s.H * s.Dqk;
    in.nk = (size_t)s.B * s.Sk * s.Hkv * s.Dqk;
    in.nv = (size_t)s.B * s.Sk * s.Hkv * s.Dv;
    in.ndo = (size_t)s.B * s.Sq * s.H * s.Dv;
    in.q = fill(in.nq, 1.5);
    in.k = fill(in.nk, 1.5);
    in.v = fill(in.nv, 1.0);
    in.dout = fill(in.ndo, 1.0);
    return in;
}

static void free_inputs(inputs *in) {
    free(in->q); free(in->k); free(in->v); free(in->dout);
}

static outputs make_outputs(shape s) {
    outputs r;
    r.no = (size_t)s.B * s.Sq * s.H * s.Dv;
    r.nl = (size_t)s.B * s.H * s.Sq;
    r.ndq = (size_t)s.B * s.Sq * s.H * s.Dqk;
    r.ndk = (size_t)s.B * s.Sk * s.Hkv * s.Dqk;
    r.ndv = (size_t)s.B * s.Sk * s.Hkv * s.Dv;
    r.o = (fa8_ref_out){calloc(r.no, 8), calloc(r.nl, 8), calloc(r.nl, 8),
                        calloc(r.ndq, 8), calloc(r.ndk, 8), calloc(r.ndv, 8)};
    cr_assert(r.o.o && r.o.lse && r.o.delta && r.o.dq && r.o.dk && r.o.dv);
    return r;
}

static void free_outputs(outputs *r) {
    free(r->o.o); free(r->o.lse); free(r->o.delta); free(r->o.dq); free(r->o.dk); free(r->o.dv);
}

static fa8_ref_problem problem(const inputs *in, int emulate, fa8_fmt ds_fmt, int bm, int bn, int nthreads) {
    const shape s = in->s;
    return (fa8_ref_problem){s.B, s.Sq, s.Sk, s.H, s.Hkv, s.Dqk, s.Dv, s.causal, 1.0 / sqrt(s.Dqk),
                             in->q, in->k, in->v, in->dout, emulate, ds_fmt, bm, bn, nthreads, FA8_FMT_E4M3, 0};
}

static outputs run(const inputs *in, int emulate, fa8_fmt ds_fmt, int bm, int bn, int nthreads) {
    outputs r = make_outputs(in->s);
    fa8_ref_problem p = problem(in, emulate, ds_fmt, bm, bn, nthreads);
    cr_assert_eq(fa8_reference(&p, &r.o), 0);
    return r;
}

static double maxabs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* max |a - b| / max |b| (norm-wise relative difference; 0 for two zero tensors) */
static double reldiff(const double *a, const double *b, size_t n) {
    double d = 0, m = maxabs(b, n);
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return m > 0 ? d / m : d;
}

/* ||a - b||_2 / ||b||_2 */
static double rel2(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

/* ---- naive double forward, independent of the reference -------------------------------------
 * Loss L = sum O.dO and the outputs O, lse; inputs in double so they can be perturbed by tiny h. */
typedef struct {
    double *q, *k, *v, *dout;
} dinputs;

static double *to_d(const float *x, size_t n) {
    double *y = malloc(n * sizeof *y);
    cr_assert(y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static double naive_loss(shape s, const dinputs *x, double *o_out, double *lse_out) {
    const int g = s.H / s.Hkv;
    const double c = 1.0 / sqrt(s.Dqk);
    double L = 0, *sc = malloc((size_t)s.Sk * sizeof *sc);
    cr_assert(sc);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++)
            for (int i = 0; i < s.Sq; i++) {
                const double *qi = x->q + (((size_t)b * s.Sq + i) * s.H + h) * s.Dqk;
                const double *doi = x->dout + (((size_t)b * s.Sq + i) * s.H + h) * s.Dv;
                double mx = -INFINITY, l = 0;
                for (int j = 0; j < s.Sk; j++) {
                    sc[j] = -INFINITY;
                    if (s.causal && j > i + s.Sk - s.Sq) continue;
                    const double *kj = x->k + (((size_t)b * s.Sk + j) * s.Hkv + h / g) * s.Dqk;
                    double t = 0;
                    for (int d = 0; d < s.Dqk; d++) t += qi[d] * kj[d];
                    sc[j] = c * t;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < s.Sk; j++) l += sc[j] == -INFINITY ? 0 : exp(sc[j] - mx);
                if (lse_out) lse_out[((size_t)b * s.H + h) * s.Sq + i] = l > 0 ? mx + log(l) : -INFINITY;
                for (int e = 0; e < s.Dv; e++) {
                    double oe = 0;
                    for (int j = 0; j < s.Sk; j++) {
                        const double vje = x->v[(((size_t)b * s.Sk + j) * s.Hkv + h / g) * s.Dv + e];
                        if (sc[j] != -INFINITY) oe += exp(sc[j] - mx) / l * vje;
                    }
                    if (o_out) o_out[(((size_t)b * s.Sq + i) * s.H + h) * s.Dv + e] = oe;
                    L += oe * doi[e];
                }
            }
    free(sc);
    return L;
}

/* dL/dx[idx] by central differences of the naive forward, x one of q, k, v. */
static double fd(shape s, dinputs *x, double *t, size_t idx, double h) {
    const double x0 = t[idx];
    t[idx] = x0 + h;
    double lp = naive_loss(s, x, NULL, NULL);
    t[idx] = x0 - h;
    double lm = naive_loss(s, x, NULL, NULL);
    t[idx] = x0;
    return (lp - lm) / (2 * h);
}

/* Gradient check of the plain flavour on one shape: O and lse against the naive forward, then
 * dq/dk/dv at a handful of entries against central differences. */
static void grad_check(shape s, uint64_t seed) {
    inputs in = make_inputs(s, seed);
    outputs r = run(&in, 0, FA8_FMT_F32, 1, 1, 2);
    dinputs x = {to_d(in.q, in.nq), to_d(in.k, in.nk), to_d(in.v, in.nv), to_d(in.dout, in.ndo)};

    double *o = malloc(r.no * 8), *lse = malloc(r.nl * 8);
    cr_assert(o && lse);
    naive_loss(s, &x, o, lse);
    cr_expect_leq(reldiff(r.o.o, o, r.no), 1e-12, "O differs from naive forward");
    for (size_t i = 0; i < r.nl; i++) {
        if (isinf(lse[i]))
            cr_expect(isinf(r.o.lse[i]) && r.o.lse[i] < 0, "lse[%zu] = %g, want -inf", i, r.o.lse[i]);
        else
            cr_expect_leq(fabs(r.o.lse[i] - lse[i]), 1e-12 * fmax(1, fabs(lse[i])), "lse[%zu]", i);
    }

    struct {
        const char *name;
        double *x, *g;
        size_t n;
    } t[3] = {{"q", x.q, r.o.dq, in.nq}, {"k", x.k, r.o.dk, in.nk}, {"v", x.v, r.o.dv, in.nv}};
    for (int w = 0; w < 3; w++) {
        const double gmax = maxabs(t[w].g, t[w].n);
        for (int trial = 0; trial < 8; trial++) {
            size_t idx = (size_t)((urand() + 1) * 0.5 * (double)t[w].n) % t[w].n;
            double want = fd(s, &x, t[w].x, idx, 1e-4), got = t[w].g[idx];
            /* relative, with a floor at 1% of the tensor's largest gradient for tiny entries */
            double tol = 1e-6 * fmax(fabs(want), 1e-2 * gmax) + 1e-13;
            cr_expect_leq(fabs(got - want), tol, "d%s[%zu]: reference %.12g, finite difference %.12g",
                          t[w].name, idx, got, want);
        }
    }
    free(o); free(lse);
    free(x.q); free(x.k); free(x.v); free(x.dout);
    free_outputs(&r);
    free_inputs(&in);
}

/* ---- finite-difference gradient checks -------------------------------------------------------- */

Test(reference_grad, mha) { grad_check((shape){2, 5, 7, 2, 2, 8, 8, 0}, 1); }
Test(reference_grad, gqa) { grad_check((shape){1, 6, 6, 4, 2, 8, 8, 1}, 2); }
Test(reference_grad, mqa) { grad_check((shape){2, 4, 5, 3, 1, 8, 8, 0}, 3); }
Test(reference_grad, mla) { grad_check((shape){1, 5, 6, 2, 1, 24, 16, 1}, 4); }
Test(reference_grad, causal_sq_lt_sk) { grad_check((shape){1, 3, 8, 2, 1, 8, 8, 1}, 5); }
Test(reference_grad, causal_sq_gt_sk) { grad_check((shape){1, 9, 4, 2, 2, 8, 8, 1}, 6); }
Test(reference_grad, sq1) { grad_check((shape){2, 1, 6, 2, 1, 8, 8, 1}, 7); }
Test(reference_grad, sq1_sk1) { grad_check((shape){1, 1, 1, 2, 2, 4, 4, 0}, 8); }

/* Rows with no visible key (causal, Sq > Sk): O = 0, lse = -inf, delta = 0, zero dq. */
Test(reference, empty_rows) {
    shape s = {1, 9, 4, 2, 1, 8, 8, 1};
    inputs in = make_inputs(s, 11);
    outputs r = run(&in, 0, FA8_FMT_F32, 1, 1, 1);
    for (int h = 0; h < s.H; h++)
        for (int i = 0; i < s.Sq; i++) {
            const int empty = i < s.Sq - s.Sk;
            const size_t li = (size_t)h * s.Sq + i, row = (size_t)i * s.H + h;
            cr_expect_eq(isinf(r.o.lse[li]) && r.o.lse[li] < 0, empty, "lse row %d", i);
            if (!empty) continue;
            cr_expect_eq(r.o.delta[li], 0.0);
            for (int d = 0; d < s.Dv; d++) cr_expect_eq(r.o.o[row * s.Dv + d], 0.0);
            for (int d = 0; d < s.Dqk; d++) cr_expect_eq(r.o.dq[row * s.Dqk + d], 0.0);
        }
    free_outputs(&r);
    free_inputs(&in);
}

/* ---- exact identities --------------------------------------------------------------------------- */

/* delta_i = sum_j P_ij dP_ij equals sum_k dO_ik O_ik (O = PV) — the shortcut the kernels use. */
Test(reference, delta_equals_do_dot_o) {
    shape s = {2, 33, 47, 4, 2, 24, 16, 1};
    inputs in = make_inputs(s, 21);
    outputs r = run(&in, 0, FA8_FMT_F32, 1, 1, 3);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++)
            for (int i = 0; i < s.Sq; i++) {
                const size_t row = ((size_t)b * s.Sq + i) * s.H + h;
                double d = 0, a = 0;
                for (int e = 0; e < s.Dv; e++) {
                    d += in.dout[row * s.Dv + e] * r.o.o[row * s.Dv + e];
                    a += fabs(in.dout[row * s.Dv + e] * r.o.o[row * s.Dv + e]);
                }
                const double got = r.o.delta[((size_t)b * s.H + h) * s.Sq + i];
                cr_expect_leq(fabs(got - d), 1e-12 * a + 1e-300, "delta b%d h%d i%d: %.17g vs %.17g", b, h, i,
                              got, d);
            }
    free_outputs(&r);
    free_inputs(&in);
}

/* V -> 2V is exact in float and double: O, delta, dq, dk double exactly; dv, lse unchanged. In the
 * emulated flavour dS doubles, so every tile exponent moves by exactly one and the dS cast commutes
 * with the scaling: the same exact relations must hold. */
static void check_v_scaling(int emulate, fa8_fmt fmt) {
    shape s = {1, 20, 27, 4, 2, 16, 12, 1};
    inputs in = make_inputs(s, 31);
    outputs a = run(&in, emulate, fmt, 8, 4, 2);
    for (size_t i = 0; i < in.nv; i++) in.v[i] *= 2.0f;
    outputs b = run(&in, emulate, fmt, 8, 4, 2);
    for (size_t i = 0; i < a.no; i++) cr_assert_eq(b.o.o[i], 2 * a.o.o[i], "o[%zu]", i);
    for (size_t i = 0; i < a.nl; i++) {
        cr_assert_eq(b.o.lse[i], a.o.lse[i], "lse[%zu]", i);
        cr_assert_eq(b.o.delta[i], 2 * a.o.delta[i], "delta[%zu]", i);
    }
    for (size_t i = 0; i < a.ndq; i++) cr_assert_eq(b.o.dq[i], 2 * a.o.dq[i], "dq[%zu]", i);
    for (size_t i = 0; i < a.ndk; i++) cr_assert_eq(b.o.dk[i], 2 * a.o.dk[i], "dk[%zu]", i);
    for (size_t i = 0; i < a.ndv; i++) cr_assert_eq(b.o.dv[i], a.o.dv[i], "dv[%zu]", i);
    free_outputs(&a);
    free_outputs(&b);
    free_inputs(&in);
}

Test(reference, v_scaling_plain) { check_v_scaling(0, FA8_FMT_F32); }
Test(reference, v_scaling_emulated_e4m3) { check_v_scaling(1, FA8_FMT_E4M3); }
Test(reference, v_scaling_emulated_e5m2fnuz) { check_v_scaling(1, FA8_FMT_E5M2FNUZ); }

/* Softmax shift invariance: K -> K + u (same u for every key) adds c q_i.u to every logit of row i,
 * so P, O, dS, dq, dk, dv are unchanged and lse_i moves by c q_i.u. dq staying put is the row-sum
 * identity sum_j dS_ij = 0 (dq' = dq + c (sum_j dS_ij) u). Inputs on a dyadic grid so that K + u is
 * exact in float. */
Test(reference, key_shift_invariance) {
    shape s = {2, 13, 17, 4, 1, 16, 8, 1};
    inputs in = make_inputs(s, 41);
    for (size_t i = 0; i < in.nk; i++) in.k[i] = roundf(in.k[i] * 32) / 32;
    outputs a = run(&in, 0, FA8_FMT_F32, 1, 1, 2);
    float u[16];
    for (int d = 0; d < s.Dqk; d++) u[d] = (float)round(urand() * 48) / 32;
    for (size_t i = 0; i < in.nk; i++) in.k[i] += u[i % s.Dqk];
    outputs b = run(&in, 0, FA8_FMT_F32, 1, 1, 2);
    cr_expect_leq(reldiff(b.o.o, a.o.o, a.no), 1e-12, "o");
    cr_expect_leq(reldiff(b.o.dq, a.o.dq, a.ndq), 1e-12, "dq (row sums of dS not zero?)");
    cr_expect_leq(reldiff(b.o.dk, a.o.dk, a.ndk), 1e-12, "dk");
    cr_expect_leq(reldiff(b.o.dv, a.o.dv, a.ndv), 1e-12, "dv");
    const double c = 1.0 / sqrt(s.Dqk);
    for (int bb = 0; bb < s.B; bb++)
        for (int h = 0; h < s.H; h++)
            for (int i = 0; i < s.Sq; i++) {
                const float *qi = in.q + (((size_t)bb * s.Sq + i) * s.H + h) * s.Dqk;
                double shift = 0;
                for (int d = 0; d < s.Dqk; d++) shift += c * qi[d] * u[d];
                const size_t li = ((size_t)bb * s.H + h) * s.Sq + i;
                cr_expect_leq(fabs(b.o.lse[li] - a.o.lse[li] - shift), 1e-12 * (1 + fabs(a.o.lse[li])),
                              "lse shift");
            }
    free_outputs(&a);
    free_outputs(&b);
    free_inputs(&in);
}

/* ---- emulated flavour ----------------------------------------------------------------------------- */

/* ds_fmt = F32: no dS cast, so dq/dk match plain; O and dv still carry the E4M3 cast of P, and do
 * not depend on ds_fmt at all. */
Test(emulated, f32_matches_plain) {
    shape s = {1, 40, 56, 4, 2, 32, 32, 1};
    inputs in = make_inputs(s, 51);
    outputs p = run(&in, 0, FA8_FMT_F32, 1, 1, 2);
    outputs e = run(&in, 1, FA8_FMT_F32, 16, 16, 2);
    outputs q = run(&in, 1, FA8_FMT_E4M3, 16, 16, 2);
    cr_expect_leq(reldiff(e.o.dq, p.o.dq, p.ndq), 1e-6, "dq");
    cr_expect_leq(reldiff(e.o.dk, p.o.dk, p.ndk), 1e-6, "dk");
    cr_expect_leq(reldiff(e.o.delta, p.o.delta, p.nl), 1e-12, "delta is exact in both");
    double eo = rel2(e.o.o, p.o.o, p.no);
    cr_expect(eo > 1e-4 && eo < 0.2, "O with E4M3 P: relative error %g", eo);
    for (size_t i = 0; i < p.no; i++) cr_assert_eq(e.o.o[i], q.o.o[i], "o independent of ds_fmt");
    for (size_t i = 0; i < p.ndv; i++) cr_assert_eq(e.o.dv[i], q.o.dv[i], "dv independent of ds_fmt");
    free_outputs(&p);
    free_outputs(&e);
    free_outputs(&q);
    free_inputs(&in);
}

/* E4M3 dS: a few-percent error, never zero and never garbage; E5M2 (one mantissa bit fewer) is
 * worse. Partial tiles on both axes (Sq, Sk not multiples of the block). */
Test(emulated, fp8_error_plausible) {
    shape s = {1, 70, 90, 2, 1, 32, 32, 0};
    inputs in = make_inputs(s, 61);
    outputs p = run(&in, 0, FA8_FMT_F32, 1, 1, 2);
    outputs e4 = run(&in, 1, FA8_FMT_E4M3, 16, 32, 2);
    outputs e5 = run(&in, 1, FA8_FMT_E5M2, 16, 32, 2);
    double q4 = rel2(e4.o.dq, p.o.dq, p.ndq), k4 = rel2(e4.o.dk, p.o.dk, p.ndk);
    double v4 = rel2(e4.o.dv, p.o.dv, p.ndv), q5 = rel2(e5.o.dq, p.o.dq, p.ndq);
    cr_log_info("rel err e4m3: dq %g dk %g dv %g; e5m2 dq %g", q4, k4, v4, q5);
    cr_expect(q4 > 1e-4 && q4 < 0.2, "dq e4m3 rel err %g", q4);
    cr_expect(k4 > 1e-4 && k4 < 0.2, "dk e4m3 rel err %g", k4);
    cr_expect(v4 > 1e-4 && v4 < 0.2, "dv e4m3 rel err %g", v4);
    cr_expect(q5 > q4 && q5 < 0.5, "dq e5m2 rel err %g vs e4m3 %g", q5, q4);
    free_outputs(&p);
    free_outputs(&e4);
    free_outputs(&e5);
    free_inputs(&in);
}

/* Exact check of the dS cast. With K one-hot (k_j = e_j, Dqk = Sk) and c = 1/4, dq_i[j] = c dS_ij
 * exactly, so plain dq exposes dS and emulated dq exposes dŜ. Every element must equal the cast of
 * docs/numerics.md with the tile exponent found here by plain search: the smallest e with
 * amax|dS_tile| <= fmt_max * 2^e. Partial tiles on both axes and causal-masked / empty rows. */
static void check_ds_cast(int bm, int bn) {
    shape s = {1, 37, 24, 4, 1, 24, 8, 1};
    const fa8_fmt fmts[4] = {FA8_FMT_E4M3, FA8_FMT_E5M2, FA8_FMT_E4M3FNUZ, FA8_FMT_E5M2FNUZ};
    inputs in = make_inputs(s, 91);
    for (size_t i = 0; i < in.nq; i++) in.q[i] *= 3; /* logits c*q in [-1.1, 1.1] */
    memset(in.k, 0, in.nk * sizeof(float));
    for (int j = 0; j < s.Sk; j++) in.k[(size_t)j * s.Dqk + j] = 1;

    outputs ref = make_outputs(s);
    fa8_ref_problem p = problem(&in, 0, FA8_FMT_F32, 1, 1, 1);
    p.scale = 0.25;
    cr_assert_eq(fa8_reference(&p, &ref.o), 0);
    for (int f = 0; f < 4; f++) {
        outputs em = make_outputs(s);
        p.emulate = 1;
        p.ds_fmt = fmts[f];
        p.block_m = bm;
        p.block_n = bn;
        cr_assert_eq(fa8_reference(&p, &em.o), 0);
        const double fm = fa8_fmt_max(fmts[f]);
        int ncast = 0, nhigh = 0;
        for (int h = 0; h < s.H; h++)
            for (int i0 = 0; i0 < s.Sq; i0 += bm)
                for (int j0 = 0; j0 < s.Sk; j0 += bn) {
                    const int i1 = i0 + bm < s.Sq ? i0 + bm : s.Sq, j1 = j0 + bn < s.Sk ? j0 + bn : s.Sk;
#define DQ(t, i, j) ((t).o.dq[((size_t)(i) * s.H + h) * s.Dqk + (j)])
                    double amax = 0;
                    for (int i = i0; i < i1; i++)
                        for (int j = j0; j < j1; j++) amax = fmax(amax, fabs(4 * DQ(ref, i, j)));
                    int e = 0, ea, ef;
                    nhigh += amax > 0 && frexp(amax, &ea) > frexp(fm, &ef) + 1.0 / 32; /* coverage */
                    if (amax > 0) {
                        while (amax > ldexp(fm, e)) e++;
                        while (amax <= ldexp(fm, e - 1)) e--;
                    }
                    for (int i = i0; i < i1; i++)
                        for (int j = j0; j < j1; j++) {
                            const double ds = 4 * DQ(ref, i, j), got = 4 * DQ(em, i, j);
                            const float y = (float)ldexp(ds, -e);
                            const double want = ldexp(fa8_decode(fmts[f], fa8_encode(fmts[f], y)), e);
                            cr_assert_eq(got, want, "%s h%d (%d,%d) e=%d: dS %.17g -> %.17g, want %.17g",
                                         fa8_fmt_name(fmts[f]), h, i, j, e, ds, got, want);
                            ncast += got != ds;
                        }
#undef DQ
                }
        cr_expect_gt(ncast, 100, "%s %dx%d: the cast changed only %d values", fa8_fmt_name(fmts[f]), bm,
                     bn, ncast);
        if (bm * bn < 32) /* small tiles: many exponents, so all amax mantissas get covered */
            cr_expect_gt(nhigh, 5, "%s: only %d tiles with amax mantissa above fmt_max's",
                         fa8_fmt_name(fmts[f]), nhigh);
        free_outputs(&em);
    }
    free_outputs(&ref);
    free_inputs(&in);
}

/* Small tiles exercise the exponent rounding (saturation if e is too small); large tiles span many
 * binades, so a too-large e shows up in the subnormal range. */
Test(emulated, ds_cast_exact_small_tiles) { check_ds_cast(3, 5); }
Test(emulated, ds_cast_exact_large_tiles) { check_ds_cast(8, 16); }

/* Work items are independent and each output has a fixed summation order: the thread count must
 * not change a single bit. */
Test(reference, threads_deterministic) {
    shape s = {3, 19, 23, 4, 2, 16, 8, 1};
    inputs in = make_inputs(s, 71);
    for (int emulate = 0; emulate <= 1; emulate++) {
        outputs a = run(&in, emulate, FA8_FMT_E4M3, 8, 8, 1);
        outputs b = run(&in, emulate, FA8_FMT_E4M3, 8, 8, 5);
        outputs c = run(&in, emulate, FA8_FMT_E4M3, 8, 8, 64); /* capped at B*Hkv = 6 */
        cr_expect_eq(memcmp(a.o.o, b.o.o, a.no * 8), 0);
        cr_expect_eq(memcmp(a.o.dq, b.o.dq, a.ndq * 8), 0);
        cr_expect_eq(memcmp(a.o.dk, c.o.dk, a.ndk * 8), 0);
        cr_expect_eq(memcmp(a.o.dv, c.o.dv, a.ndv * 8), 0);
        cr_expect_eq(memcmp(a.o.lse, c.o.lse, a.nl * 8), 0);
        free_outputs(&a);
        free_outputs(&b);
        free_outputs(&c);
    }
    free_inputs(&in);
}

/* ---- validation ------------------------------------------------------------------------------------ */

Test(reference, bad_problems) {
    shape s = {1, 4, 4, 4, 2, 8, 8, 0};
    inputs in = make_inputs(s, 81);
    outputs r = make_outputs(s);
    const fa8_ref_problem good = problem(&in, 0, FA8_FMT_F32, 1, 1, 1);
    fa8_ref_problem p;
    fa8_ref_out o;
    cr_assert_eq(fa8_reference(&good, &r.o), 0);
    cr_expect_eq(fa8_reference(NULL, &r.o), -1);
    cr_expect_eq(fa8_reference(&good, NULL), -1);

#define BAD(field, value)                                                                          \
    do {                                                                                           \
        p = good;                                                                                  \
        p.field = value;                                                                           \
        cr_expect_eq(fa8_reference(&p, &r.o), -1, #field " = " #value);                            \
    } while (0)
    BAD(Hkv, 3); /* H % Hkv != 0 */
    BAD(B, 0);
    BAD(Sq, 0);
    BAD(Sk, 0);
    BAD(H, 0);
    BAD(Hkv, 0);
    BAD(Dqk, 0);
    BAD(Dv, -1);
    BAD(nthreads, 0);
    BAD(scale, NAN);
    BAD(q, NULL);
    BAD(k, NULL);
    BAD(v, NULL);
    BAD(dout, NULL);
#undef BAD
    p = good;
    p.emulate = 1;
    p.ds_fmt = FA8_FMT_E4M3;
    p.block_m = 0;
    cr_expect_eq(fa8_reference(&p, &r.o), -1, "block_m = 0");
    p.block_m = 16;
    p.block_n = 0;
    cr_expect_eq(fa8_reference(&p, &r.o), -1, "block_n = 0");
    p.block_n = 16;
    p.ds_fmt = (fa8_fmt)99;
    cr_expect_eq(fa8_reference(&p, &r.o), -1, "bad ds_fmt");

    double **slots[6] = {&o.o, &o.lse, &o.delta, &o.dq, &o.dk, &o.dv};
    for (int i = 0; i < 6; i++) {
        o = r.o;
        *slots[i] = NULL;
        cr_expect_eq(fa8_reference(&good, &o), -1, "null output %d", i);
    }
    free_outputs(&r);
    free_inputs(&in);
}
