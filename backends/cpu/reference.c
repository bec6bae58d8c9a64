/* reference.c — untiled FP64 attention reference; see reference.h and docs/numerics.md.
 *
 * One work item = (batch b, kv head): it owns the dK/dV rows of that kv head, so items never
 * race. Inside an item, each query head of the group is processed in strips of query rows; per
 * row the scores, P, O, dP, delta and dS are computed at once (one row of Sk doubles each), then
 * the strip's dS is (optionally) quantized per tile and accumulated into dQ, dK, dV in one pass
 * over the keys. Memory per item: O(strip * Sk + Sk * D).
 *
 * Every output element is summed in a fixed order (dQ_i over keys, dK_j/dV_j over group heads
 * then queries), independent of the strip size and thread count, so results are deterministic
 * and emulated-with-F32 dQ/dK are bit-identical to plain.
 */
#define _POSIX_C_SOURCE 200809L
#include "reference.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PLAIN_STRIP 32 /* rows per strip in the plain flavour: reuse of each K/V row in the dK/dV pass */

/* Four partial sums: breaks the add-latency chain (no -ffast-math reassociation needed). */
static double dot(const double *restrict a, const double *restrict b, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int d = 0;
    for (; d + 4 <= n; d += 4) {
        s0 += a[d] * b[d];
        s1 += a[d + 1] * b[d + 1];
        s2 += a[d + 2] * b[d + 2];
        s3 += a[d + 3] * b[d + 3];
    }
    for (; d < n; d++) s0 += a[d] * b[d];
    return (s0 + s1) + (s2 + s3);
}

static void axpy(double *restrict y, double a, const double *restrict x, int n) {
    for (int d = 0; d < n; d++) y[d] += a * x[d];
}

static void to_double(double *restrict dst, const float *restrict src, int n) {
    for (int d = 0; d < n; d++) dst[d] = src[d];
}

/* P̂ = decode(encode(P * 2^s)) / 2^s: the kernels' fixed-scale cast of probabilities (e4m3 x 2^8 for OCP
 * operands, e4m3fnuz x 2^7 for FNUZ ones). */
static double quant_p(double p, fa8_fmt fmt, int scale_log2) {
    const double sc = ldexp(1.0, scale_log2);
    return (double)fa8_decode(fmt, fa8_encode(fmt, (float)(p * sc))) / sc;
}

#define P_FMT_OF(p) ((p)->p_fmt)
#define P_SCALE_OF(p) ((p)->p_scale_log2 ? (p)->p_scale_log2 : FA8_P_SCALE_LOG2_OCP)

/* Smallest integer e with amax <= fmax * 2^e, computed exactly on the frexp mantissas
 * (amax = ma*2^ea, fmax = mf*2^ef, ma, mf in [0.5, 1)): e = ea - ef if ma <= mf, else one more. */
static int tile_exp(double amax, double fmax) {
    int ea, ef;
    if (amax == 0 || !isfinite(amax)) return 0;
    double ma = frexp(amax, &ea), mf = frexp(fmax, &ef);
    return ea - ef + (ma > mf);
}

typedef struct {
    const fa8_ref_problem *p;
    fa8_ref_out *out;
    int tid, nthreads, status;
} worker_arg;

typedef struct {
    int strip;               /* rows per strip */
    double *kd, *vd;         /* [Sk, Dqk], [Sk, Dv]: this kv head's K, V in double */
    double *dkd, *dvd;       /* [Sk, Dqk], [Sk, Dv]: dK, dV accumulators */
    double *qd, *dod, *dqd;  /* [strip, Dqk|Dv|Dqk] */
    double *pm, *ph, *ds;    /* [strip, Sk]: P, P used for dV (P̂ when emulated), dS */
    int *nvis;               /* [strip]: visible keys per row */
} workspace;

static void ws_free(workspace *w) {
    free(w->kd); free(w->vd); free(w->dkd); free(w->dvd);
    free(w->qd); free(w->dod); free(w->dqd);
    free(w->pm); free(w->ph); free(w->ds); free(w->nvis);
}

static int ws_alloc(workspace *w, const fa8_ref_problem *p) {
    size_t sk = (size_t)p->Sk, m = (size_t)(p->emulate ? p->block_m : PLAIN_STRIP);
    if (m > (size_t)p->Sq) m = (size_t)p->Sq;
    memset(w, 0, sizeof *w);
    w->strip = (int)m;
    w->kd = malloc(sk * p->Dqk * sizeof(double));
    w->vd = malloc(sk * p->Dv * sizeof(double));
    w->dkd = malloc(sk * p->Dqk * sizeof(double));
    w->dvd = malloc(sk * p->Dv * sizeof(double));
    w->qd = malloc(m * p->Dqk * sizeof(double));
    w->dod = malloc(m * p->Dv * sizeof(double));
    w->dqd = malloc(m * p->Dqk * sizeof(double));
    w->pm = malloc(m * sk * sizeof(double));
    w->ph = malloc(m * sk * sizeof(double));
    w->ds = malloc(m * sk * sizeof(double));
    w->nvis = malloc(m * sizeof(int));
    if (w->kd && w->vd && w->dkd && w->dvd && w->qd && w->dod && w->dqd && w->pm && w->ph && w->ds &&
        w->nvis)
        return 0;
    ws_free(w);
    return -1;
}

/* Forward + per-row backward quantities for query row i of head h; fills strip row r. */
static void row(const fa8_ref_problem *p, fa8_ref_out *out, workspace *w, int b, int h, int i, int r) {
    const int Sk = p->Sk, Dqk = p->Dqk, Dv = p->Dv;
    const double *qi = w->qd + (size_t)r * Dqk, *doi = w->dod + (size_t)r * Dv;
    double *pm = w->pm + (size_t)r * Sk, *ph = w->ph + (size_t)r * Sk, *ds = w->ds + (size_t)r * Sk;
    double *o = out->o + (((size_t)b * p->Sq + i) * p->H + h) * Dv;
    const size_t li = ((size_t)b * p->H + h) * p->Sq + i;
    int nv = Sk;
    if (p->causal) {
        long last = (long)i + Sk - p->Sq; /* last visible key */
        nv = last < 0 ? 0 : (last >= Sk ? Sk : (int)last + 1);
    }
    w->nvis[r] = nv;
    memset(o, 0, (size_t)Dv * sizeof(double));
    memset(pm, 0, (size_t)Sk * sizeof(double));
    memset(ph, 0, (size_t)Sk * sizeof(double));
    memset(ds, 0, (size_t)Sk * sizeof(double));
    if (nv == 0) { /* no visible key: O = 0, lse = -inf, no gradient */
        out->lse[li] = -INFINITY;
        out->delta[li] = 0;
        return;
    }
    /* scores and softmax */
    double mx = -INFINITY, l = 0;
    for (int j = 0; j < nv; j++) {
        pm[j] = p->scale * dot(qi, w->kd + (size_t)j * Dqk, Dqk);
        if (pm[j] > mx) mx = pm[j];
    }
    for (int j = 0; j < nv; j++) l += pm[j] = exp(pm[j] - mx);
    for (int j = 0; j < nv; j++) {
        pm[j] /= l;
        ph[j] = p->emulate ? quant_p(pm[j], P_FMT_OF(p), P_SCALE_OF(p)) : pm[j];
    }
    out->lse[li] = mx + log(l);
    /* one pass over V: O = P̂V and dP = dO.V (dP kept in ds until delta is known) */
    for (int j = 0; j < nv; j++) {
        const double *vj = w->vd + (size_t)j * Dv;
        axpy(o, ph[j], vj, Dv);
        ds[j] = dot(doi, vj, Dv);
    }
    double delta = 0;
    for (int j = 0; j < nv; j++) delta += pm[j] * ds[j];
    out->delta[li] = delta;
    for (int j = 0; j < nv; j++) ds[j] = pm[j] * (ds[j] - delta);
}

/* Replace dS of strip rows [0, m) by its per-(block_m x block_n)-tile cast. The strip is exactly
 * one query tile in the emulated flavour (strips start at multiples of block_m). Scaling by 2^-e
 * is exact in double; the (float) conversion is part of the kernels' cast. */
static void quantize_ds(const fa8_ref_problem *p, workspace *w, int m) {
    const int Sk = p->Sk;
    const double fm = fa8_fmt_max(p->ds_fmt);
    for (int j0 = 0; j0 < Sk; j0 += p->block_n) {
        const int j1 = j0 + p->block_n < Sk ? j0 + p->block_n : Sk;
        double amax = 0;
        for (int r = 0; r < m; r++)
            for (int j = j0; j < j1; j++) amax = fmax(amax, fabs(w->ds[(size_t)r * Sk + j]));
        const int e = tile_exp(amax, fm);
        for (int r = 0; r < m; r++)
            for (int j = j0; j < j1; j++) {
                double *x = &w->ds[(size_t)r * Sk + j];
                float y = (float)ldexp(*x, -e);
                *x = ldexp((double)fa8_decode(p->ds_fmt, fa8_encode(p->ds_fmt, y)), e);
            }
    }
}

/* Query rows [i0, i0+m) of head h: rows, optional dS cast, then dQ/dK/dV in one pass over keys. */
static void strip(const fa8_ref_problem *p, fa8_ref_out *out, workspace *w, int b, int h, int i0, int m) {
    const int Sk = p->Sk, Dqk = p->Dqk, Dv = p->Dv;
    int jmax = 0;
    for (int r = 0; r < m; r++) {
        const size_t qrow = ((size_t)b * p->Sq + i0 + r) * p->H + h;
        to_double(w->qd + (size_t)r * Dqk, p->q + qrow * Dqk, Dqk);
        to_double(w->dod + (size_t)r * Dv, p->dout + qrow * Dv, Dv);
        memset(w->dqd + (size_t)r * Dqk, 0, (size_t)Dqk * sizeof(double));
        row(p, out, w, b, h, i0 + r, r);
        if (w->nvis[r] > jmax) jmax = w->nvis[r];
    }
    if (p->emulate && fa8_fmt_is_fp8(p->ds_fmt)) quantize_ds(p, w, m);
    /* Keys outer, rows inner: each K/V/dK/dV row is touched once per strip. dQ_i still sums over
     * j in increasing order and dK_j/dV_j over i in increasing order, as with a strip of 1. */
    for (int j = 0; j < jmax; j++) {
        const double *kj = w->kd + (size_t)j * Dqk;
        double *dkj = w->dkd + (size_t)j * Dqk, *dvj = w->dvd + (size_t)j * Dv;
        for (int r = 0; r < m; r++) {
            const double a = p->scale * w->ds[(size_t)r * Sk + j], pv = w->ph[(size_t)r * Sk + j];
            if (a != 0) {
                axpy(w->dqd + (size_t)r * Dqk, a, kj, Dqk);
                axpy(dkj, a, w->qd + (size_t)r * Dqk, Dqk);
            }
            if (pv != 0) axpy(dvj, pv, w->dod + (size_t)r * Dv, Dv);
        }
    }
    for (int r = 0; r < m; r++)
        memcpy(out->dq + (((size_t)b * p->Sq + i0 + r) * p->H + h) * Dqk, w->dqd + (size_t)r * Dqk,
               (size_t)Dqk * sizeof(double));
}

/* Work item (b, kv head kh): all g query heads of the group, then write dK, dV. */
static void item(const fa8_ref_problem *p, fa8_ref_out *out, workspace *w, int b, int kh) {
    const int Sk = p->Sk, Dqk = p->Dqk, Dv = p->Dv, g = p->H / p->Hkv;
    for (int j = 0; j < Sk; j++) {
        const size_t kr = ((size_t)b * Sk + j) * p->Hkv + kh;
        to_double(w->kd + (size_t)j * Dqk, p->k + kr * Dqk, Dqk);
        to_double(w->vd + (size_t)j * Dv, p->v + kr * Dv, Dv);
    }
    memset(w->dkd, 0, (size_t)Sk * Dqk * sizeof(double));
    memset(w->dvd, 0, (size_t)Sk * Dv * sizeof(double));
    for (int h = kh * g; h < (kh + 1) * g; h++)
        for (int i0 = 0; i0 < p->Sq; i0 += w->strip)
            strip(p, out, w, b, h, i0, p->Sq - i0 < w->strip ? p->Sq - i0 : w->strip);
    for (int j = 0; j < Sk; j++) {
        const size_t kr = ((size_t)b * Sk + j) * p->Hkv + kh;
        memcpy(out->dk + kr * Dqk, w->dkd + (size_t)j * Dqk, (size_t)Dqk * sizeof(double));
        memcpy(out->dv + kr * Dv, w->dvd + (size_t)j * Dv, (size_t)Dv * sizeof(double));
    }
}

/* Items tid, tid + nthreads, ... (static round robin; items are equal-sized). */
static void *worker(void *arg) {
    worker_arg *a = arg;
    workspace w;
    if (ws_alloc(&w, a->p)) {
        a->status = -1;
        return NULL;
    }
    const int nitems = a->p->B * a->p->Hkv;
    for (int t = a->tid; t < nitems; t += a->nthreads) item(a->p, a->out, &w, t / a->p->Hkv, t % a->p->Hkv);
    ws_free(&w);
    a->status = 0;
    return NULL;
}

static int valid(const fa8_ref_problem *p, const fa8_ref_out *out) {
    if (!p || !out) return 0;
    if (p->B < 1 || p->Sq < 1 || p->Sk < 1 || p->H < 1 || p->Hkv < 1 || p->Dqk < 1 || p->Dv < 1) return 0;
    if (p->H % p->Hkv != 0 || p->nthreads < 1 || !isfinite(p->scale)) return 0;
    if (!p->q || !p->k || !p->v || !p->dout) return 0;
    if (!out->o || !out->lse || !out->delta || !out->dq || !out->dk || !out->dv) return 0;
    if (p->emulate && (p->block_m < 1 || p->block_n < 1 ||
                       !(fa8_fmt_is_fp8(p->ds_fmt) || p->ds_fmt == FA8_FMT_F32)))
        return 0;
    return 1;
}

int fa8_reference(const fa8_ref_problem *p, fa8_ref_out *out) {
    if (!valid(p, out)) return -1;
    const int nitems = p->B * p->Hkv;
    const int nt = p->nthreads < nitems ? p->nthreads : nitems;
    worker_arg *args = calloc((size_t)nt, sizeof *args);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    char *started = calloc((size_t)nt, 1);
    int rc = (args && th && started) ? 0 : -1;
    for (int t = 0; t < nt && rc == 0; t++) {
        args[t] = (worker_arg){p, out, t, nt, -1};
        /* thread 0 runs on the caller; a thread that cannot be created runs inline too */
        if (t > 0 && pthread_create(&th[t], NULL, worker, &args[t]) == 0) started[t] = 1;
    }
    if (rc == 0) {
        for (int t = 0; t < nt; t++)
            if (!started[t]) worker(&args[t]);
        for (int t = 0; t < nt; t++) {
            if (started[t]) pthread_join(th[t], NULL);
            if (args[t].status) rc = -1;
        }
    }
    free(args);
    free(th);
    free(started);
    return rc;
}
