/* test_api.c — the public API (fa8.h): every bad input gets a status and a message naming the bad argument
 * and its value, never a crash; and the positive properties callers rely on: defaults, dispatch names,
 * strided views equal contiguous ones bit for bit, per-tensor scales end to end, thread safety.
 *
 * The problems use geometries of the minimal profile (d64, d128, d192x128, E4M3), so the suite also runs in the
 * sanitizer build; checks that need more (E5M2 gradients, other head dims) skip when the build lacks them. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa8.h"
#include "harness.h"

/* ---- expectations on a call ---------------------------------------------------------------- */

static void expect_impl(fa8_status got, fa8_status want, const char *call, const char *const *subs, const char *file,
                        int line) {
  const char *msg = fa8_last_error();
  cr_assert_eq(got, want, "%s:%d: %s returned %d (%s), expected %d (%s); fa8_last_error: '%s'", file, line, call,
               (int)got, fa8_status_string(got), (int)want, fa8_status_string(want), msg);
  if (want != FA8_OK) cr_assert(msg && msg[0], "%s:%d: %s failed with an empty fa8_last_error()", file, line, call);
  for (int i = 0; subs[i]; ++i)
    cr_expect(strstr(msg, subs[i]), "%s:%d: %s: fa8_last_error '%s' does not contain '%s'", file, line, call, msg, subs[i]);
}
/* EXPECT(call, status, "substring", ...): the status (fatal) and every substring of fa8_last_error() (reported,
 * the test goes on so one run lists every unclear message) */
#define EXPECT(call, want, ...) expect_impl((call), (want), #call, (const char *const[]){ __VA_ARGS__, NULL }, __FILE__, __LINE__)
#define EXPECT_OK(call) expect_impl((call), FA8_OK, #call, (const char *const[]){ NULL }, __FILE__, __LINE__)

/* ---- random numbers ------------------------------------------------------------------------- */

static uint64_t rng_state;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return ((double)(rng_state >> 11) + 0.5) * 0x1.0p-53;
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

/* ---- tensors in a layout -------------------------------------------------------------------- */

typedef struct {
  void *p;
  int64_t n;    /* elements allocated */
  int es;       /* element size */
  int kind;     /* 0 seq [B,S,H,D], 1 row [B,H,S], 2 transposed [B,H,D,S_pad] */
  int64_t e[4]; /* logical extents in stride order of the view */
  fa8_tensor t;
} tbuf;

static int dsize(fa8_dtype d) { return d == FA8_DTYPE_F32 ? 4 : d == FA8_DTYPE_BF16 ? 2 : 1; }

/* Sequence tensor [B,S,H,D]. strided: stored [B,H,S,D] with padded rows and heads. */
static void tb_seq(tbuf *b, fa8_dtype dt, int64_t B, int64_t S, int64_t H, int64_t D, int strided) {
  memset(b, 0, sizeof *b);
  b->es = dsize(dt);
  b->kind = 0;
  b->e[0] = B; b->e[1] = S; b->e[2] = H; b->e[3] = D;
  int64_t *st = b->t.stride;
  if (!strided) { st[3] = 1; st[2] = D; st[1] = H * D; st[0] = S * H * D; }
  else { st[3] = 1; st[1] = D + 8; st[2] = S * (D + 8) + 16; st[0] = H * st[2] + 24; }
  b->n = B * st[0];
  b->t.dtype = dt;
  b->p = malloc((size_t)(b->n * b->es));
  cr_assert(b->p);
  memset(b->p, 0xAB, (size_t)(b->n * b->es));
  b->t.data = b->p;
}

/* Row statistics [B,H,S] (F32). */
static void tb_row(tbuf *b, int64_t B, int64_t H, int64_t S, int strided) {
  memset(b, 0, sizeof *b);
  b->es = 4;
  b->kind = 1;
  b->e[0] = B; b->e[1] = H; b->e[2] = S; b->e[3] = 1;
  int64_t *st = b->t.stride;
  if (!strided) { st[2] = 1; st[1] = S; st[0] = H * S; }
  else { st[2] = 1; st[1] = S + 3; st[0] = H * (S + 3) + 5; }
  st[3] = 0;
  b->n = B * st[0];
  b->t.dtype = FA8_DTYPE_F32;
  b->p = malloc((size_t)(b->n * 4));
  cr_assert(b->p);
  memset(b->p, 0xAB, (size_t)(b->n * 4));
  b->t.data = b->p;
}

/* Transposed FP8 copy [B,H,D,S_pad]. */
static void tb_trans(tbuf *b, int64_t B, int64_t H, int64_t D, int64_t S, int strided) {
  memset(b, 0, sizeof *b);
  const int64_t sp = (S + 15) / 16 * 16, pitch = strided ? sp + 16 : sp;
  b->es = 1;
  b->kind = 2;
  b->e[0] = B; b->e[1] = H; b->e[2] = D; b->e[3] = sp;
  int64_t *st = b->t.stride;
  st[3] = 1; st[2] = pitch; st[1] = D * pitch; st[0] = H * D * pitch;
  b->n = B * st[0];
  b->t.dtype = FA8_DTYPE_FP8;
  b->p = malloc((size_t)b->n);
  cr_assert(b->p);
  memset(b->p, 0xAB, (size_t)b->n);
  b->t.data = b->p;
}

static void tb_free(tbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

/* Element offset of logical index i[4] (in the tensor's own index order). */
static int64_t tb_off(const tbuf *b, const int64_t i[4]) {
  const int64_t *st = b->t.stride;
  return b->kind == 1 ? i[0] * st[0] + i[1] * st[1] + i[2] * st[2] : i[0] * st[0] + i[1] * st[1] + i[2] * st[2] + i[3] * st[3];
}

/* Compares two tensors of the same logical shape element by element (bytes); 1 equal. */
static int tb_equal(const tbuf *a, const tbuf *b, const char *name) {
  cr_assert_eq(a->es, b->es);
  int64_t i[4];
  for (i[0] = 0; i[0] < a->e[0]; ++i[0])
    for (i[1] = 0; i[1] < a->e[1]; ++i[1])
      for (i[2] = 0; i[2] < a->e[2]; ++i[2])
        for (i[3] = 0; i[3] < a->e[3]; ++i[3]) {
          const char *x = (const char *)a->p + tb_off(a, i) * a->es, *y = (const char *)b->p + tb_off(b, i) * b->es;
          if (memcmp(x, y, (size_t)a->es) != 0) {
            cr_log_error("%s differs at [%lld,%lld,%lld,%lld]", name, (long long)i[0], (long long)i[1], (long long)i[2],
                         (long long)i[3]);
            return 0;
          }
        }
  return 1;
}

/* Every element outside the logical view still holds the 0xAB fill. */
static int tb_padding_untouched(const tbuf *a, const char *name) {
  unsigned char *mark = calloc((size_t)a->n, 1);
  cr_assert(mark);
  int64_t i[4];
  for (i[0] = 0; i[0] < a->e[0]; ++i[0])
    for (i[1] = 0; i[1] < a->e[1]; ++i[1])
      for (i[2] = 0; i[2] < a->e[2]; ++i[2])
        for (i[3] = 0; i[3] < a->e[3]; ++i[3]) mark[tb_off(a, i)] = 1;
  int ok = 1;
  for (int64_t k = 0; k < a->n && ok; ++k)
    if (!mark[k])
      for (int j = 0; j < a->es; ++j)
        if (((const unsigned char *)a->p)[k * a->es + j] != 0xAB) {
          cr_log_error("%s: padding element %lld was written", name, (long long)k);
          ok = 0;
          break;
        }
  free(mark);
  return ok;
}

/* ---- a complete problem: inputs, quantized operands, outputs -------------------------------- */

typedef struct {
  int B, Sq, Sk, H, Hkv, Dqk, Dv, causal;
  fa8_delta_mode delta;
  fa8_fmt fmt_grad;
  int rows;      /* scale_rows of q, k, v, dO (0: per tensor) */
  int strided;   /* every tensor through non-contiguous strides */
  int with_t;    /* transposed copies of the quantized operands */
  int dout_bf16; /* dO (the unquantized one) in BF16 */
  int threads;
  uint64_t seed;
} kcfg;

typedef struct {
  kcfg c;
  fa8_problem p;
  int quantized; /* 0: no quant instance for this geometry (codes zero, scales one) */
  tbuf xq, xk, xv, xdo, q8, k8, v8, do8, q8t, k8t, v8t, do8t, o, o32, orem, lse, delta, dq, dk, dv;
  float *qs, *ks, *vs, *dos; /* room for any scale_rows >= 1 */
  fa8_fwd_tensors f;
  fa8_bwd_tensors bw;
  void *ws;
  size_t ws_bytes;
  fa8_rowsum_stats stats;
} kit;

static kcfg kcfg_default(void) {
  kcfg c = { .B = 2, .Sq = 70, .Sk = 90, .H = 4, .Hkv = 2, .Dqk = 64, .Dv = 64, .causal = 1,
             .delta = FA8_DELTA_MATCHED, .fmt_grad = FA8_FMT_E4M3, .rows = 64, .threads = 2, .seed = 11 };
  return c;
}

static void fill_input(tbuf *x, double amp, int outliers) {
  int64_t i[4];
  for (i[0] = 0; i[0] < x->e[0]; ++i[0])
    for (i[1] = 0; i[1] < x->e[1]; ++i[1])
      for (i[2] = 0; i[2] < x->e[2]; ++i[2])
        for (i[3] = 0; i[3] < x->e[3]; ++i[3]) {
          const double g = i[3] < outliers ? 8.0 : 1.0;
          const float v = (float)(amp * g * nrand());
          const int64_t o = tb_off(x, i);
          if (x->t.dtype == FA8_DTYPE_BF16) ((uint16_t *)x->p)[o] = fa8_bf16_from_f32(v);
          else ((float *)x->p)[o] = v;
        }
}

static fa8_qtensor qview(tbuf *codes, tbuf *t, float *scales, int rows, fa8_fmt fmt, int with_t) {
  fa8_qtensor q;
  memset(&q, 0, sizeof q);
  q.data = codes->t;
  if (with_t) q.data_t = t->t;
  q.scales = scales;
  q.scale_rows = rows;
  q.fmt = fmt;
  return q;
}

static int quant_into(kit *k, tbuf *x, fa8_qtensor *q, int64_t S, int64_t H, int64_t D, fa8_fmt fmt) {
  fa8_quant_problem qp;
  fa8_quant_problem_init(&qp);
  qp.batch = k->c.B; qp.seqlen = (int32_t)S; qp.heads = (int32_t)H; qp.hdim = (int32_t)D;
  qp.fmt = fmt; qp.scale_rows = k->c.rows; qp.num_threads = k->c.threads;
  const fa8_status st = fa8_quantize(&qp, &x->t, q, NULL, 0, NULL);
  if (st == FA8_ERR_UNSUPPORTED) return 0;
  cr_assert_eq(st, FA8_OK, "fa8_quantize: %s", fa8_last_error());
  return 1;
}

static void kit_init(kit *k, kcfg c) {
  memset(k, 0, sizeof *k);
  k->c = c;
  fa8_problem_init(&k->p);
  fa8_problem *p = &k->p;
  p->batch = c.B; p->seqlen_q = c.Sq; p->seqlen_k = c.Sk; p->heads = c.H; p->kv_heads = c.Hkv;
  p->hdim_qk = c.Dqk; p->hdim_v = c.Dv; p->causal = c.causal; p->delta = c.delta; p->fmt_grad = c.fmt_grad;
  p->num_threads = c.threads; p->collect_stats = 1;
  const int s = c.strided;
  rng_state = c.seed;
  tb_seq(&k->xq, FA8_DTYPE_F32, c.B, c.Sq, c.H, c.Dqk, s);
  tb_seq(&k->xk, FA8_DTYPE_F32, c.B, c.Sk, c.Hkv, c.Dqk, s);
  tb_seq(&k->xv, FA8_DTYPE_F32, c.B, c.Sk, c.Hkv, c.Dv, s);
  tb_seq(&k->xdo, c.dout_bf16 ? FA8_DTYPE_BF16 : FA8_DTYPE_F32, c.B, c.Sq, c.H, c.Dv, s);
  fill_input(&k->xq, 0.4, 2);
  fill_input(&k->xk, 0.4, 2);
  fill_input(&k->xv, 1.0, 3);
  fill_input(&k->xdo, 1e-2, 3);
  tb_seq(&k->q8, FA8_DTYPE_FP8, c.B, c.Sq, c.H, c.Dqk, s);
  tb_seq(&k->k8, FA8_DTYPE_FP8, c.B, c.Sk, c.Hkv, c.Dqk, s);
  tb_seq(&k->v8, FA8_DTYPE_FP8, c.B, c.Sk, c.Hkv, c.Dv, s);
  tb_seq(&k->do8, FA8_DTYPE_FP8, c.B, c.Sq, c.H, c.Dv, s);
  tb_trans(&k->q8t, c.B, c.H, c.Dqk, c.Sq, s);
  tb_trans(&k->k8t, c.B, c.Hkv, c.Dqk, c.Sk, s);
  tb_trans(&k->v8t, c.B, c.Hkv, c.Dv, c.Sk, s);
  tb_trans(&k->do8t, c.B, c.H, c.Dv, c.Sq, s);
  const size_t nsq = (size_t)c.B * c.H * c.Sq + 1, nsk = (size_t)c.B * c.Hkv * c.Sk + 1;
  k->qs = malloc(nsq * 4); k->dos = malloc(nsq * 4); k->ks = malloc(nsk * 4); k->vs = malloc(nsk * 4);
  cr_assert(k->qs && k->dos && k->ks && k->vs);
  const fa8_fmt fq = FA8_FMT_E4M3;
  fa8_qtensor q = qview(&k->q8, &k->q8t, k->qs, c.rows, fq, c.with_t), kk = qview(&k->k8, &k->k8t, k->ks, c.rows, fq, c.with_t),
              v = qview(&k->v8, &k->v8t, k->vs, c.rows, fq, c.with_t),
              d = qview(&k->do8, &k->do8t, k->dos, c.rows, c.fmt_grad, c.with_t);
  k->quantized = quant_into(k, &k->xq, &q, c.Sq, c.H, c.Dqk, fq) && quant_into(k, &k->xk, &kk, c.Sk, c.Hkv, c.Dqk, fq) &&
                 quant_into(k, &k->xv, &v, c.Sk, c.Hkv, c.Dv, fq) && quant_into(k, &k->xdo, &d, c.Sq, c.H, c.Dv, c.fmt_grad);
  if (!k->quantized) { /* geometry without quant instances: inputs for validation only */
    memset(k->q8.p, 0, (size_t)k->q8.n); memset(k->k8.p, 0, (size_t)k->k8.n);
    memset(k->v8.p, 0, (size_t)k->v8.n); memset(k->do8.p, 0, (size_t)k->do8.n);
    for (size_t i = 0; i < nsq; ++i) k->qs[i] = k->dos[i] = 1.0f;
    for (size_t i = 0; i < nsk; ++i) k->ks[i] = k->vs[i] = 1.0f;
  }
  tb_seq(&k->o, FA8_DTYPE_BF16, c.B, c.Sq, c.H, c.Dv, s);
  tb_seq(&k->o32, FA8_DTYPE_F32, c.B, c.Sq, c.H, c.Dv, s);
  tb_seq(&k->orem, FA8_DTYPE_BF16, c.B, c.Sq, c.H, c.Dv, s);
  tb_row(&k->lse, c.B, c.H, c.Sq, s);
  tb_row(&k->delta, c.B, c.H, c.Sq, s);
  tb_seq(&k->dq, FA8_DTYPE_F32, c.B, c.Sq, c.H, c.Dqk, s);
  tb_seq(&k->dk, FA8_DTYPE_F32, c.B, c.Sk, c.Hkv, c.Dqk, s);
  tb_seq(&k->dv, FA8_DTYPE_F32, c.B, c.Sk, c.Hkv, c.Dv, s);
  k->f.q = q; k->f.k = kk; k->f.v = v;
  k->f.o = k->o.t; k->f.o_f32 = k->o32.t; k->f.o_rem = k->orem.t; k->f.lse = k->lse.t;
  k->bw.q = q; k->bw.k = kk; k->bw.v = v; k->bw.dout_q = d;
  k->bw.dout = k->xdo.t; k->bw.o = k->o.t; k->bw.o_rem = k->orem.t; k->bw.lse = k->lse.t; k->bw.delta = k->delta.t;
  k->bw.dq = k->dq.t; k->bw.dk = k->dk.t; k->bw.dv = k->dv.t;
  k->bw.stats = &k->stats;
  cr_assert_eq(fa8_backward_workspace(p, &k->ws_bytes), FA8_OK, "%s", fa8_last_error());
  k->ws = malloc(k->ws_bytes + 64);
  cr_assert(k->ws);
}

static void kit_free(kit *k) {
  tbuf *all[] = { &k->xq, &k->xk, &k->xv, &k->xdo, &k->q8, &k->k8, &k->v8, &k->do8, &k->q8t, &k->k8t, &k->v8t, &k->do8t,
                  &k->o, &k->o32, &k->orem, &k->lse, &k->delta, &k->dq, &k->dk, &k->dv };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tb_free(all[i]);
  free(k->qs); free(k->ks); free(k->vs); free(k->dos); free(k->ws);
  memset(k, 0, sizeof *k);
}

static fa8_status kit_fwd(kit *k) { return fa8_forward(&k->p, &k->f, NULL, 0, NULL); }
static fa8_status kit_bwd(kit *k) { return fa8_backward(&k->p, &k->bw, k->ws, k->ws_bytes, NULL); }

/* A kit whose forward and backward succeed as built (the baseline every validation test mutates). */
static void kit_valid(kit *k, kcfg c) {
  kit_init(k, c);
  cr_assert(k->quantized, "no quantize instances for the baseline problem");
  EXPECT_OK(kit_fwd(k));
  EXPECT_OK(kit_bwd(k));
}

static int is_missing(fa8_status st) {
  return st == FA8_ERR_UNSUPPORTED && (strstr(fa8_last_error(), "in this build") || strstr(fa8_last_error(), "no quantize"));
}

/* ==== status strings and defaults ============================================================ */

Test(status, strings_cover_every_status) {
  const char *seen[10];
  for (int s = FA8_OK; s <= FA8_ERR_OUT_OF_MEMORY; ++s) {
    const char *str = fa8_status_string((fa8_status)s);
    cr_assert(str && str[0], "status %d has no string", s);
    cr_assert(strcmp(str, "unknown status") != 0, "status %d is unknown to fa8_status_string", s);
    for (int t = 0; t < s; ++t) cr_assert(strcmp(seen[t], str) != 0, "statuses %d and %d share the string '%s'", t, s, str);
    seen[s] = str;
  }
  cr_assert_str_eq(fa8_status_string(FA8_OK), "success");
  cr_assert(strstr(fa8_status_string(FA8_ERR_NONFINITE), "finite"));
  cr_assert(strstr(fa8_status_string(FA8_ERR_WORKSPACE), "workspace"));
  cr_assert_str_eq(fa8_status_string((fa8_status)10), "unknown status");
  cr_assert_str_eq(fa8_status_string((fa8_status)-1), "unknown status");
  cr_assert_str_eq(fa8_status_string((fa8_status)12345), "unknown status");
}

Test(init, problem_defaults) {
  fa8_problem p;
  memset(&p, 0x5A, sizeof p);
  fa8_problem_init(&p);
  cr_assert_eq(p.batch, 1); cr_assert_eq(p.seqlen_q, 1); cr_assert_eq(p.seqlen_k, 1);
  cr_assert_eq(p.heads, 1); cr_assert_eq(p.kv_heads, 1);
  cr_assert_eq(p.hdim_qk, 128); cr_assert_eq(p.hdim_v, 128);
  cr_assert_eq(p.causal, 0);
  cr_assert_eq(p.softmax_scale, 0.0f);
  cr_assert_eq(p.delta, FA8_DELTA_MATCHED);
  cr_assert_eq(p.fmt_qkv, FA8_FMT_E4M3); cr_assert_eq(p.fmt_grad, FA8_FMT_E4M3);
  cr_assert_eq(p.backend, FA8_BACKEND_CPU);
  cr_assert_null(p.instance);
  cr_assert_eq(p.num_threads, 0);
  cr_assert_eq(p.collect_stats, 0);
  /* the defaults form a valid problem */
  size_t ws = 1;
  EXPECT_OK(fa8_forward_workspace(&p, &ws));
  cr_assert_eq(ws, 0);
  EXPECT_OK(fa8_backward_workspace(&p, &ws));
  cr_assert_eq(ws, 0);
  fa8_dispatch_names n;
  const fa8_status st = fa8_dispatch(&p, &n);
  if (!is_missing(st)) {
    EXPECT_OK(st);
    cr_assert(n.fwd && n.delta && n.bwd);
    cr_assert(strstr(n.delta, "matched"));
  }
}

Test(init, quant_problem_defaults) {
  fa8_quant_problem q;
  memset(&q, 0x5A, sizeof q);
  fa8_quant_problem_init(&q);
  cr_assert_eq(q.batch, 1); cr_assert_eq(q.seqlen, 1); cr_assert_eq(q.heads, 1); cr_assert_eq(q.hdim, 128);
  cr_assert_eq(q.fmt, FA8_FMT_E4M3);
  cr_assert_eq(q.scale_rows, 128);
  cr_assert_eq(q.pow2_scales, 1);   /* power-of-two scales by default (docs/numerics.md) */
  cr_assert_eq(q.backend, FA8_BACKEND_CPU);
  cr_assert_eq(q.num_threads, 0);
  cr_assert_eq(fa8_quant_scale_count(&q), 1);
}

/* ==== NULL problem / tensors ================================================================= */

Test(null, problem) {
  kit k;
  kit_valid(&k, kcfg_default());
  size_t b;
  fa8_dispatch_names n;
  EXPECT(fa8_forward(NULL, &k.f, NULL, 0, NULL), FA8_ERR_NULL_POINTER, "problem");
  EXPECT(fa8_backward(NULL, &k.bw, k.ws, k.ws_bytes, NULL), FA8_ERR_NULL_POINTER, "problem");
  EXPECT(fa8_dispatch(NULL, &n), FA8_ERR_NULL_POINTER, "problem");
  EXPECT(fa8_forward_workspace(NULL, &b), FA8_ERR_NULL_POINTER, "problem");
  EXPECT(fa8_backward_workspace(NULL, &b), FA8_ERR_NULL_POINTER, "problem");
  fa8_qtensor out = k.f.q;
  EXPECT(fa8_quantize(NULL, &k.xq.t, &out, NULL, 0, NULL), FA8_ERR_NULL_POINTER, "problem");
  kit_free(&k);
}

Test(null, tensors_and_outputs) {
  kit k;
  kit_valid(&k, kcfg_default());
  EXPECT(fa8_forward(&k.p, NULL, NULL, 0, NULL), FA8_ERR_NULL_POINTER, "tensors");
  EXPECT(fa8_backward(&k.p, NULL, k.ws, k.ws_bytes, NULL), FA8_ERR_NULL_POINTER, "tensors");
  EXPECT(fa8_dispatch(&k.p, NULL), FA8_ERR_NULL_POINTER, "out");
  EXPECT(fa8_forward_workspace(&k.p, NULL), FA8_ERR_NULL_POINTER, "bytes");
  EXPECT(fa8_backward_workspace(&k.p, NULL), FA8_ERR_NULL_POINTER, "bytes");
  fa8_quant_problem qp;
  fa8_quant_problem_init(&qp);
  qp.batch = 2; qp.seqlen = 70; qp.heads = 4; qp.hdim = 64; qp.scale_rows = 64;
  fa8_qtensor out = k.f.q;
  EXPECT(fa8_quantize(&qp, NULL, &out, NULL, 0, NULL), FA8_ERR_NULL_POINTER, "x");
  EXPECT(fa8_quantize(&qp, &k.xq.t, NULL, NULL, 0, NULL), FA8_ERR_NULL_POINTER, "out");
  EXPECT_OK(fa8_quantize(&qp, &k.xq.t, &out, NULL, 0, NULL));
  kit_free(&k);
}

/* ==== problem fields, through every entry point that takes an fa8_problem ===================== */

typedef struct {
  const char *label;
  fa8_status st;
  const char *s1, *s2;
} pcase;

static void mutate_problem(fa8_problem *p, int i) {
  switch (i) {
    case 0: p->batch = 0; break;
    case 1: p->batch = -2; break;
    case 2: p->seqlen_q = 0; break;
    case 3: p->seqlen_k = -1; break;
    case 4: p->heads = 0; break;
    case 5: p->kv_heads = -4; break;
    case 6: p->hdim_qk = 0; break;
    case 7: p->hdim_v = -64; break;
    case 8: p->heads = 6; p->kv_heads = 4; break;
    case 9: p->heads = 4; p->kv_heads = 8; break;
    case 10: p->softmax_scale = NAN; break;
    case 11: p->softmax_scale = -0.125f; break;
    case 12: p->softmax_scale = INFINITY; break;
    case 13: p->delta = (fa8_delta_mode)4; break;
    case 14: p->delta = (fa8_delta_mode)-1; break;
    case 15: p->fmt_qkv = (fa8_fmt)5; break;
    case 16: p->fmt_grad = (fa8_fmt)-1; break;
    case 17: p->backend = (fa8_backend)3; break;
    case 18: p->backend = (fa8_backend)-1; break;
    case 19: p->num_threads = -2; break;
    case 20: p->backend = FA8_BACKEND_CUDA; break;
    case 21: p->backend = FA8_BACKEND_HIP; break;
    case 22: p->kv_heads = 0; p->heads = 0; break;
  }
}

static const pcase PROBLEM_CASES[] = {
  { "batch 0", FA8_ERR_INVALID_ARGUMENT, "batch (0)", "must be >= 1" },
  { "batch -2", FA8_ERR_INVALID_ARGUMENT, "batch (-2)", NULL },
  { "seqlen_q 0", FA8_ERR_INVALID_ARGUMENT, "seqlen_q (0)", NULL },
  { "seqlen_k -1", FA8_ERR_INVALID_ARGUMENT, "seqlen_k (-1)", NULL },
  { "heads 0", FA8_ERR_INVALID_ARGUMENT, "heads (0)", NULL },
  { "kv_heads -4", FA8_ERR_INVALID_ARGUMENT, "kv_heads (-4)", NULL },
  { "hdim_qk 0", FA8_ERR_INVALID_ARGUMENT, "hdim_qk (0)", NULL },
  { "hdim_v -64", FA8_ERR_INVALID_ARGUMENT, "hdim_v (-64)", NULL },
  { "heads 6 / kv_heads 4", FA8_ERR_INVALID_ARGUMENT, "heads (6)", "kv_heads (4)" },
  { "heads 4 / kv_heads 8", FA8_ERR_INVALID_ARGUMENT, "heads (4)", "kv_heads (8)" },
  { "softmax_scale NaN", FA8_ERR_INVALID_ARGUMENT, "softmax_scale", "nan" },
  { "softmax_scale -0.125", FA8_ERR_INVALID_ARGUMENT, "softmax_scale (-0.125)", NULL },
  { "softmax_scale inf", FA8_ERR_INVALID_ARGUMENT, "softmax_scale (inf)", NULL },
  { "delta 4", FA8_ERR_INVALID_ARGUMENT, "delta (4)", "fa8_delta_mode" },
  { "delta -1", FA8_ERR_INVALID_ARGUMENT, "delta (-1)", NULL },
  { "fmt_qkv 5", FA8_ERR_INVALID_ARGUMENT, "fmt_qkv (5)", "fa8_fmt" },
  { "fmt_grad -1", FA8_ERR_INVALID_ARGUMENT, "fmt_grad (-1)", NULL },
  { "backend 3", FA8_ERR_INVALID_ARGUMENT, "backend (3)", "fa8_backend" },
  { "backend -1", FA8_ERR_INVALID_ARGUMENT, "backend (-1)", NULL },
  { "num_threads -2", FA8_ERR_INVALID_ARGUMENT, "num_threads (-2)", NULL },
  { "backend cuda", FA8_ERR_UNSUPPORTED, "cuda", NULL },
  { "backend hip", FA8_ERR_UNSUPPORTED, "hip", NULL },
  { "heads 0 / kv_heads 0", FA8_ERR_INVALID_ARGUMENT, "heads (0)", NULL },
};

static void check_problem_case(kit *k, int i, int entry) {
  const pcase *c = &PROBLEM_CASES[i];
  fa8_problem p = k->p;
  mutate_problem(&p, i);
  fa8_status st = FA8_OK;
  size_t bytes = 12345;
  fa8_dispatch_names n = { 0 };
  const char *names[5] = { "fa8_forward", "fa8_backward", "fa8_dispatch", "fa8_forward_workspace", "fa8_backward_workspace" };
  switch (entry) {
    case 0: st = fa8_forward(&p, &k->f, NULL, 0, NULL); break;
    case 1: st = fa8_backward(&p, &k->bw, k->ws, k->ws_bytes, NULL); break;
    case 2: st = fa8_dispatch(&p, &n); break;
    case 3: st = fa8_forward_workspace(&p, &bytes); break;
    case 4: st = fa8_backward_workspace(&p, &bytes); break;
  }
  const char *msg = fa8_last_error();
  cr_expect_eq(st, c->st, "%s with %s: status %d (%s), expected %d (%s); message '%s'", names[entry], c->label, (int)st,
               fa8_status_string(st), (int)c->st, fa8_status_string(c->st), msg);
  cr_expect(strstr(msg, c->s1), "%s with %s: message '%s' does not contain '%s'", names[entry], c->label, msg, c->s1);
  if (c->s2) cr_expect(strstr(msg, c->s2), "%s with %s: message '%s' does not contain '%s'", names[entry], c->label, msg, c->s2);
}

Test(problem, invalid_fields_every_entry_point) {
  kit k;
  kit_valid(&k, kcfg_default());
  for (int i = 0; i < (int)(sizeof PROBLEM_CASES / sizeof PROBLEM_CASES[0]); ++i)
    for (int e = 0; e < 5; ++e) check_problem_case(&k, i, e);
  kit_free(&k);
}

Test(problem, failing_calls_do_not_write_outputs) {
  kit k;
  kit_init(&k, kcfg_default());
  cr_assert(k.quantized);
  fa8_problem p = k.p;
  p.heads = 6; p.kv_heads = 4;
  EXPECT(fa8_forward(&p, &k.f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, "heads (6)");
  EXPECT(fa8_backward(&p, &k.bw, k.ws, k.ws_bytes, NULL), FA8_ERR_INVALID_ARGUMENT, "kv_heads (4)");
  const tbuf *outs[] = { &k.o, &k.o32, &k.orem, &k.lse, &k.delta, &k.dq, &k.dk, &k.dv };
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; ++i)
    for (int64_t j = 0; j < outs[i]->n * outs[i]->es; ++j)
      cr_assert_eq(((unsigned char *)outs[i]->p)[j], 0xAB, "output %zu written by a failing call", i);
  kit_free(&k);
}

/* ==== quantize: problem and tensors ========================================================== */

Test(quantize, invalid_problem) {
  kit k;
  kit_valid(&k, kcfg_default());
  fa8_quant_problem base;
  fa8_quant_problem_init(&base);
  base.batch = 2; base.seqlen = 70; base.heads = 4; base.hdim = 64; base.scale_rows = 64;
  fa8_qtensor out = k.f.q;
  fa8_quant_problem p;
  EXPECT_OK(fa8_quantize(&base, &k.xq.t, &out, NULL, 0, NULL));
#define QP(stmt, st, ...) do { p = base; stmt; out = k.f.q; EXPECT(fa8_quantize(&p, &k.xq.t, &out, NULL, 0, NULL), st, __VA_ARGS__); } while (0)
  QP(p.batch = 0, FA8_ERR_INVALID_ARGUMENT, "batch (0)");
  QP(p.seqlen = -1, FA8_ERR_INVALID_ARGUMENT, "seqlen (-1)");
  QP(p.heads = 0, FA8_ERR_INVALID_ARGUMENT, "heads (0)");
  QP(p.hdim = -8, FA8_ERR_INVALID_ARGUMENT, "hdim (-8)");
  QP(p.fmt = FA8_FMT_F32, FA8_ERR_INVALID_ARGUMENT, "fmt (4)", "FP8");
  QP(p.fmt = (fa8_fmt)9, FA8_ERR_INVALID_ARGUMENT, "fmt (9)");
  QP(p.fmt = (fa8_fmt)-3, FA8_ERR_INVALID_ARGUMENT, "fmt (-3)");
  QP(p.scale_rows = -1, FA8_ERR_INVALID_ARGUMENT, "scale_rows (-1)");
  QP(p.backend = FA8_BACKEND_CUDA, FA8_ERR_UNSUPPORTED, "cuda");
  QP(p.backend = FA8_BACKEND_HIP, FA8_ERR_UNSUPPORTED, "hip");
  QP(p.backend = (fa8_backend)7, FA8_ERR_INVALID_ARGUMENT, "backend (7)");
  QP(p.num_threads = -1, FA8_ERR_INVALID_ARGUMENT, "num_threads (-1)");
#undef QP
  /* an unsupported head dim: its own tensors */
  float *x80 = calloc(2 * 3 * 80, sizeof(float));
  uint8_t *c80 = calloc(2 * 3 * 80, 1);
  float sc[8];
  cr_assert(x80 && c80);
  fa8_quant_problem q = base;
  q.batch = 1; q.seqlen = 2; q.heads = 3; q.hdim = 80;
  fa8_tensor xt = { x80, FA8_DTYPE_F32, { 2 * 3 * 80, 3 * 80, 80, 1 } };
  fa8_qtensor o80;
  memset(&o80, 0, sizeof o80);
  o80.data = (fa8_tensor){ c80, FA8_DTYPE_FP8, { 2 * 3 * 80, 3 * 80, 80, 1 } };
  o80.scales = sc;
  EXPECT(fa8_quantize(&q, &xt, &o80, NULL, 0, NULL), FA8_ERR_UNSUPPORTED, "head dim 80", "e4m3");
  free(x80); free(c80);
  kit_free(&k);
}

Test(quantize, invalid_tensors) {
  kit k;
  kit_valid(&k, kcfg_default());
  fa8_quant_problem p;
  fa8_quant_problem_init(&p);
  p.batch = 2; p.seqlen = 70; p.heads = 4; p.hdim = 64; p.scale_rows = 64;
  fa8_tensor x;
  fa8_qtensor out;
#define QT(stmt, st, ...) do { x = k.xq.t; out = k.f.q; out.data_t = k.q8t.t; stmt; EXPECT(fa8_quantize(&p, &x, &out, NULL, 0, NULL), st, __VA_ARGS__); } while (0)
  QT((void)0, FA8_OK, "");
  QT(x.data = NULL, FA8_ERR_NULL_POINTER, "x.data");
  QT(x.dtype = FA8_DTYPE_FP8, FA8_ERR_INVALID_ARGUMENT, "x.dtype is fp8", "f32 or bf16");
  QT(x.dtype = (fa8_dtype)7, FA8_ERR_INVALID_ARGUMENT, "x.dtype");
  QT(x.data = (char *)x.data + 2, FA8_ERR_MISALIGNED, "x.data", "4-byte");
  QT(x.stride[3] = 2, FA8_ERR_BAD_STRIDES, "x.stride[3] is 2");
  QT(x.stride[0] = -x.stride[0], FA8_ERR_BAD_STRIDES, "x.stride[0]", "negative");
  QT(x.stride[1] = 64, FA8_ERR_BAD_STRIDES, "x strides overlap"); /* rows overlap the 4 heads */
  QT(x.stride[2] = 32, FA8_ERR_BAD_STRIDES, "x strides overlap");
  QT(out.data.data = NULL, FA8_ERR_NULL_POINTER, "out.data");
  QT(out.scales = NULL, FA8_ERR_NULL_POINTER, "out.scales");
  QT(out.data.dtype = FA8_DTYPE_BF16, FA8_ERR_INVALID_ARGUMENT, "out.data.dtype is bf16", "fp8");
  QT(out.data.stride[3] = 3, FA8_ERR_BAD_STRIDES, "out.data.stride[3] is 3");
  QT(out.data.stride[2] = 0, FA8_ERR_BAD_STRIDES, "out.data"); /* every head written to the same codes */
  QT(out.data_t.stride[3] = 2, FA8_ERR_BAD_STRIDES, "out.data_t.stride[3] is 2");
  QT(out.data_t.stride[2] = 70, FA8_ERR_BAD_STRIDES, "out.data_t strides overlap"); /* S_pad = 80 */
  QT(out.data_t.dtype = FA8_DTYPE_F32, FA8_ERR_INVALID_ARGUMENT, "out.data_t.dtype is f32");
  /* out->fmt and out->scale_rows are outputs: whatever they held is overwritten */
  QT((out.fmt = FA8_FMT_E5M2, out.scale_rows = -9), FA8_OK, "");
  cr_assert_eq(out.fmt, FA8_FMT_E4M3);
  cr_assert_eq(out.scale_rows, 64);
#undef QT
  kit_free(&k);
}

/* ==== forward tensors ========================================================================= */

Test(forward, invalid_tensors) {
  kit k;
  kit_valid(&k, kcfg_default());
  fa8_problem p;
  fa8_fwd_tensors f;
#define FT(stmt, st, ...) do { p = k.p; f = k.f; stmt; EXPECT(fa8_forward(&p, &f, NULL, 0, NULL), st, __VA_ARGS__); } while (0)
  FT((void)0, FA8_OK, "");
  /* NULL data, each tensor named */
  FT(f.q.data.data = NULL, FA8_ERR_NULL_POINTER, "q.data");
  FT(f.k.data.data = NULL, FA8_ERR_NULL_POINTER, "k.data");
  FT(f.v.data.data = NULL, FA8_ERR_NULL_POINTER, "v.data");
  FT(f.q.scales = NULL, FA8_ERR_NULL_POINTER, "q.scales");
  FT(f.k.scales = NULL, FA8_ERR_NULL_POINTER, "k.scales");
  FT(f.v.scales = NULL, FA8_ERR_NULL_POINTER, "v.scales");
  FT(f.o.data = NULL, FA8_ERR_NULL_POINTER, "o.data");
  FT(f.lse.data = NULL, FA8_ERR_NULL_POINTER, "lse.data");
  FT((p.delta = FA8_DELTA_SPLIT, f.o_rem.data = NULL), FA8_ERR_NULL_POINTER, "o_rem", "split");
  /* optional outputs */
  FT(f.o_f32.data = NULL, FA8_OK, "");
  FT(f.o_rem.data = NULL, FA8_OK, "");                      /* not split: o_rem unused */
  FT((f.o_rem.dtype = FA8_DTYPE_FP8, f.o_rem.stride[3] = 9), FA8_OK, "");
  /* misaligned */
  FT(f.o.data = (char *)f.o.data + 1, FA8_ERR_MISALIGNED, "o.data", "2-byte");
  FT(f.o_f32.data = (char *)f.o_f32.data + 2, FA8_ERR_MISALIGNED, "o_f32.data", "4-byte");
  FT(f.lse.data = (char *)f.lse.data + 2, FA8_ERR_MISALIGNED, "lse.data");
  FT((p.delta = FA8_DELTA_SPLIT, f.o_rem.data = (char *)f.o_rem.data + 1), FA8_ERR_MISALIGNED, "o_rem");
  /* strides */
  FT(f.o.stride[3] = 2, FA8_ERR_BAD_STRIDES, "o.stride[3] is 2", "contiguous");
  FT(f.q.data.stride[3] = 0, FA8_ERR_BAD_STRIDES, "q.data.stride[3] is 0");
  FT(f.o.stride[1] = -f.o.stride[1], FA8_ERR_BAD_STRIDES, "o.stride[1]", "negative");
  FT(f.o.stride[1] = 64, FA8_ERR_BAD_STRIDES, "o strides overlap");   /* H = 4 heads of 64 in a 64 stride */
  FT(f.k.data.stride[0] = 10, FA8_ERR_BAD_STRIDES, "k.data strides overlap");
  FT(f.o.stride[2] = 0, FA8_ERR_BAD_STRIDES, "o");                    /* 4 heads written to one place */
  FT(f.o_f32.stride[0] = 0, FA8_ERR_BAD_STRIDES, "o_f32");            /* both batches aliased */
  FT(f.lse.stride[2] = 2, FA8_ERR_BAD_STRIDES, "lse.stride[2] is 2");
  FT(f.lse.stride[1] = 69, FA8_ERR_BAD_STRIDES, "lse strides overlap");
  FT(f.lse.stride[1] = 0, FA8_ERR_BAD_STRIDES, "lse");
  FT(f.k.data_t = k.k8t.t, FA8_OK, "");
  FT((f.k.data_t = k.k8t.t, f.k.data_t.stride[2] = 90), FA8_ERR_BAD_STRIDES, "k.data_t strides overlap"); /* S_pad 96 */
  FT((f.v.data_t = k.v8t.t, f.v.data_t.stride[3] = 64), FA8_ERR_BAD_STRIDES, "v.data_t.stride[3]");
  /* dtypes and formats */
  FT(f.o.dtype = FA8_DTYPE_F32, FA8_ERR_INVALID_ARGUMENT, "o.dtype is f32", "bf16");
  FT(f.o_f32.dtype = FA8_DTYPE_BF16, FA8_ERR_INVALID_ARGUMENT, "o_f32.dtype is bf16", "f32");
  FT(f.lse.dtype = FA8_DTYPE_BF16, FA8_ERR_INVALID_ARGUMENT, "lse.dtype is bf16");
  FT(f.q.data.dtype = FA8_DTYPE_BF16, FA8_ERR_INVALID_ARGUMENT, "q.data.dtype is bf16", "fp8");
  FT((p.delta = FA8_DELTA_SPLIT, f.o_rem.dtype = FA8_DTYPE_F32), FA8_ERR_INVALID_ARGUMENT, "o_rem", "f32");
  FT(f.q.fmt = FA8_FMT_E5M2, FA8_ERR_INVALID_ARGUMENT, "q.fmt is e5m2", "e4m3");
  FT(f.k.fmt = FA8_FMT_F32, FA8_ERR_INVALID_ARGUMENT, "k.fmt is f32", "e4m3");
  FT(f.v.fmt = (fa8_fmt)9, FA8_ERR_INVALID_ARGUMENT, "v.fmt is invalid");
  FT(p.fmt_qkv = FA8_FMT_E5M2, FA8_ERR_INVALID_ARGUMENT, "q.fmt is e4m3", "e5m2");
  FT(f.k.scale_rows = -3, FA8_ERR_INVALID_ARGUMENT, "k.scale_rows (-3)");
#undef FT
  kit_free(&k);
}

/* ==== backward tensors ======================================================================== */

Test(backward, invalid_tensors) {
  kit k;
  kit_valid(&k, kcfg_default());
  fa8_problem p;
  fa8_bwd_tensors t;
  void *ws;
  size_t wsb;
#define BT(stmt, st, ...) do { p = k.p; t = k.bw; ws = k.ws; wsb = k.ws_bytes; stmt; EXPECT(fa8_backward(&p, &t, ws, wsb, NULL), st, __VA_ARGS__); } while (0)
  BT((void)0, FA8_OK, "");
  BT(t.q.data.data = NULL, FA8_ERR_NULL_POINTER, "q.data");
  BT(t.k.scales = NULL, FA8_ERR_NULL_POINTER, "k.scales");
  BT(t.v.data.data = NULL, FA8_ERR_NULL_POINTER, "v.data");
  BT(t.dout_q.data.data = NULL, FA8_ERR_NULL_POINTER, "dout_q.data");
  BT(t.dout_q.scales = NULL, FA8_ERR_NULL_POINTER, "dout_q.scales");
  BT(t.o.data = NULL, FA8_ERR_NULL_POINTER, "o.data");
  BT(t.lse.data = NULL, FA8_ERR_NULL_POINTER, "lse.data");
  BT(t.delta.data = NULL, FA8_ERR_NULL_POINTER, "delta.data");
  BT(t.dq.data = NULL, FA8_ERR_NULL_POINTER, "dq.data");
  BT(t.dk.data = NULL, FA8_ERR_NULL_POINTER, "dk.data");
  BT(t.dv.data = NULL, FA8_ERR_NULL_POINTER, "dv.data");
  BT((p.delta = FA8_DELTA_STALE, t.dout.data = NULL), FA8_ERR_NULL_POINTER, "dout", "stale");
  BT((p.delta = FA8_DELTA_SPLIT, t.o_rem.data = NULL), FA8_ERR_NULL_POINTER, "o_rem", "split");
  /* not needed by the mode: may be absent */
  BT(t.dout.data = NULL, FA8_OK, "");
  BT(t.o_rem.data = NULL, FA8_OK, "");
  BT((p.delta = FA8_DELTA_DOHAT, t.dout.data = NULL, t.o_rem.data = NULL), FA8_OK, "");
  /* misaligned */
  BT(t.dq.data = (char *)t.dq.data + 2, FA8_ERR_MISALIGNED, "dq.data", "4-byte");
  BT(t.dv.data = (char *)t.dv.data + 1, FA8_ERR_MISALIGNED, "dv.data");
  BT(t.o.data = (char *)t.o.data + 1, FA8_ERR_MISALIGNED, "o.data", "2-byte");
  BT(t.delta.data = (char *)t.delta.data + 2, FA8_ERR_MISALIGNED, "delta.data");
  BT((p.delta = FA8_DELTA_STALE, t.dout.data = (char *)t.dout.data + 2), FA8_ERR_MISALIGNED, "dout");
  /* strides */
  BT(t.dk.stride[3] = 4, FA8_ERR_BAD_STRIDES, "dk.stride[3] is 4");
  BT(t.dv.stride[0] = -1, FA8_ERR_BAD_STRIDES, "dv.stride[0]", "negative");
  BT(t.dq.stride[1] = 64, FA8_ERR_BAD_STRIDES, "dq strides overlap");  /* [B,S,H,D] with H = 4 > 1 */
  BT(t.dk.stride[2] = 0, FA8_ERR_BAD_STRIDES, "dk");                    /* both kv heads summed into one place */
  BT(t.delta.stride[1] = 0, FA8_ERR_BAD_STRIDES, "delta");
  BT(t.delta.stride[2] = 3, FA8_ERR_BAD_STRIDES, "delta.stride[2] is 3");
  BT(t.dout_q.data.stride[1] = 100, FA8_ERR_BAD_STRIDES, "dout_q.data strides overlap");
  /* dtypes / formats */
  BT(t.dq.dtype = FA8_DTYPE_BF16, FA8_ERR_INVALID_ARGUMENT, "dq.dtype is bf16", "f32");
  BT(t.dk.dtype = FA8_DTYPE_FP8, FA8_ERR_INVALID_ARGUMENT, "dk.dtype is fp8", "f32");
  BT(t.o.dtype = FA8_DTYPE_F32, FA8_ERR_INVALID_ARGUMENT, "o.dtype is f32", "bf16");
  BT((p.delta = FA8_DELTA_STALE, t.dout.dtype = FA8_DTYPE_FP8), FA8_ERR_INVALID_ARGUMENT, "dout", "fp8");
  BT(t.dout_q.fmt = FA8_FMT_E5M2, FA8_ERR_INVALID_ARGUMENT, "dout_q.fmt is e5m2", "e4m3");
  BT(p.fmt_grad = FA8_FMT_E5M2, FA8_ERR_INVALID_ARGUMENT, "dout_q.fmt is e4m3", "e5m2");
  BT(t.dout_q.scale_rows = -64, FA8_ERR_INVALID_ARGUMENT, "dout_q.scale_rows (-64)");
  /* statistics and workspace */
  BT(t.stats = NULL, FA8_ERR_NULL_POINTER, "stats", "collect_stats");
  BT(ws = NULL, FA8_ERR_WORKSPACE, "workspace");
  char need[64], less[64];
  snprintf(need, sizeof need, "(%zu)", k.ws_bytes);
  snprintf(less, sizeof less, "(%zu)", k.ws_bytes - 8);
  BT(wsb = k.ws_bytes - 8, FA8_ERR_WORKSPACE, "workspace_bytes", need, less);
  BT(wsb = 0, FA8_ERR_WORKSPACE, "workspace_bytes (0)", need);
  BT(ws = (char *)k.ws + 4, FA8_ERR_MISALIGNED, "workspace");
  BT((p.collect_stats = 0, ws = NULL, wsb = 0, t.stats = NULL), FA8_OK, "");
#undef BT
  kit_free(&k);
}

/* ==== unsupported problems ===================================================================== */

Test(unsupported, head_dim) {
  kcfg c = kcfg_default();
  c.Dqk = c.Dv = 80;
  kit k;
  kit_init(&k, c);
  cr_assert(!k.quantized, "this build has a d80 quantizer; pick another unsupported head dim");
  EXPECT(kit_fwd(&k), FA8_ERR_UNSUPPORTED, "80x80", "forward");
  EXPECT(kit_bwd(&k), FA8_ERR_UNSUPPORTED, "80x80");
  fa8_dispatch_names n;
  EXPECT(fa8_dispatch(&k.p, &n), FA8_ERR_UNSUPPORTED, "80x80");
  /* the message says how to get the instance */
  cr_assert(strstr(fa8_last_error(), "fa8 gen") || strstr(fa8_last_error(), "-Dhdim"), "unhelpful: %s", fa8_last_error());
  kit_free(&k);
  /* qk != v without an MLA instance for it */
  c = kcfg_default();
  c.Dqk = 128; c.Dv = 64;
  kit_init(&k, c);
  EXPECT(kit_fwd(&k), FA8_ERR_UNSUPPORTED, "128x64");
  EXPECT(kit_bwd(&k), FA8_ERR_UNSUPPORTED, "128x64");
  EXPECT(fa8_dispatch(&k.p, &n), FA8_ERR_UNSUPPORTED, "128x64");
  kit_free(&k);
}

Test(unsupported, format) {
  kit k;
  kit_valid(&k, kcfg_default());
  fa8_problem p = k.p;
  p.fmt_qkv = FA8_FMT_E5M2;   /* E5M2 serves gradients; no build has E5M2 Q/K/V attention */
  fa8_fwd_tensors f = k.f;
  f.q.fmt = f.k.fmt = f.v.fmt = FA8_FMT_E5M2;
  EXPECT(fa8_forward(&p, &f, NULL, 0, NULL), FA8_ERR_UNSUPPORTED, "e5m2", "fmt_qkv");
  fa8_dispatch_names n;
  EXPECT(fa8_dispatch(&p, &n), FA8_ERR_UNSUPPORTED, "e5m2");
  kit_free(&k);
}

/* ==== forced instances ========================================================================= */

static void bundle_of(const char *delta_name, char *out, size_t n) {
  const char *rest = strstr(delta_name, "fa8_delta_");
  cr_assert(rest == delta_name, "unexpected delta instance name %s", delta_name);
  snprintf(out, n, "fa8_bundle_%s", delta_name + strlen("fa8_delta_"));
}

Test(forced, instance_names) {
  kit k;
  kit_valid(&k, kcfg_default()); /* d64, causal, matched */
  fa8_dispatch_names dn, dn2;
  EXPECT_OK(fa8_dispatch(&k.p, &dn));
  char bundle[256], other[256];
  bundle_of(dn.delta, bundle, sizeof bundle);
  fa8_problem p = k.p;
  size_t ws;

  /* not in the build */
  p.instance = "fa8_no_such_instance_x";
  EXPECT(fa8_forward(&p, &k.f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, "fa8_no_such_instance_x", "not in this build");
  EXPECT(fa8_backward(&p, &k.bw, k.ws, k.ws_bytes, NULL), FA8_ERR_INVALID_ARGUMENT, "fa8_no_such_instance_x");
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, "fa8_no_such_instance_x", "not in this build");
  EXPECT_OK(fa8_forward_workspace(&p, &ws));
  p.instance = "";
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, "not in this build");

  /* the bundle of the dispatched instances: same names, same results */
  p.instance = bundle;
  EXPECT_OK(fa8_dispatch(&p, &dn2));
  cr_assert_str_eq(dn2.fwd, dn.fwd);
  cr_assert_str_eq(dn2.delta, dn.delta);
  cr_assert_str_eq(dn2.bwd, dn.bwd);
  kit k2;
  kit_init(&k2, kcfg_default());
  k2.p.instance = bundle;
  EXPECT_OK(kit_fwd(&k2));
  EXPECT_OK(kit_bwd(&k2));
  cr_assert(tb_equal(&k.o, &k2.o, "o") && tb_equal(&k.dq, &k2.dq, "dq") && tb_equal(&k.dk, &k2.dk, "dk") &&
            tb_equal(&k.dv, &k2.dv, "dv") && tb_equal(&k.delta, &k2.delta, "delta"));
  kit_free(&k2);

  /* a bundle for another delta mode, for full attention, for another head dim */
  cr_assert(strstr(bundle, "_matched_") && strstr(bundle, "_causal_") && strstr(bundle, "_d64v64_"), "%s", bundle);
  snprintf(other, sizeof other, "%.*s_stale_%s", (int)(strstr(bundle, "_matched_") - bundle), bundle, strstr(bundle, "_matched_") + 9);
  p.instance = other;
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, other, "does not fit", "delta");
  EXPECT(fa8_forward(&p, &k.f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, "does not fit");
  EXPECT(fa8_backward(&p, &k.bw, k.ws, k.ws_bytes, NULL), FA8_ERR_INVALID_ARGUMENT, "does not fit", "delta");
  fa8_problem p2 = p;
  p2.delta = FA8_DELTA_STALE; /* now it fits */
  EXPECT_OK(fa8_dispatch(&p2, &dn2));
  cr_assert(strstr(dn2.delta, "stale"));

  char full[256];
  snprintf(full, sizeof full, "%.*s_full_%s", (int)(strstr(bundle, "_causal_") - bundle), bundle, strstr(bundle, "_causal_") + 8);
  p.instance = full;
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, full, "does not fit", "causal");

  char d128[256];
  snprintf(d128, sizeof d128, "%.*s_d128v128_%s", (int)(strstr(bundle, "_d64v64_") - bundle), bundle, strstr(bundle, "_d64v64_") + 8);
  p.instance = d128;
  p2 = k.p; p2.hdim_qk = p2.hdim_v = 128; p2.instance = NULL;
  if (fa8_dispatch(&p2, &dn2) == FA8_OK) /* d128 built: its bundle exists but does not fit a d64 problem */
    EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, d128, "does not fit", "head dims");

  /* a delta or backward instance cannot be forced alone */
  p.instance = dn.delta;
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, dn.delta, "delta instance", "bundle");
  EXPECT(fa8_forward(&p, &k.f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, "delta instance");
  p.instance = dn.bwd;
  EXPECT(fa8_backward(&p, &k.bw, k.ws, k.ws_bytes, NULL), FA8_ERR_INVALID_ARGUMENT, dn.bwd, "backward instance");

  /* a forward instance may be forced; the rest is dispatched */
  p.instance = dn.fwd;
  EXPECT_OK(fa8_dispatch(&p, &dn2));
  cr_assert_str_eq(dn2.fwd, dn.fwd);
  cr_assert_str_eq(dn2.bwd, dn.bwd);
  cr_assert_str_eq(dn2.delta, dn.delta);
  /* the split forward does not fit a matched problem */
  p2 = k.p;
  p2.delta = FA8_DELTA_SPLIT;
  EXPECT_OK(fa8_dispatch(&p2, &dn2));
  cr_assert(strstr(dn2.fwd, "split"));
  p.instance = dn2.fwd;
  EXPECT(fa8_dispatch(&p, &dn2), FA8_ERR_INVALID_ARGUMENT, "does not fit", "forward variant");
  EXPECT(fa8_forward(&p, &k.f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, "does not fit", "forward variant");
  kit_free(&k);
}

/* ==== scale_rows vs the tile ================================================================== */

/* fa8_dispatch and fa8_candidates have no tensors: they assume the problem's scale_rows (fa8_quantize's 128 unless
 * set), so they name what fa8_forward would run on tensors quantized that way, and refuse what it would refuse */
Test(scale_rows, dispatch_assumes_the_problems_quantization) {
  fa8_problem p;
  fa8_problem_init(&p);
  cr_expect_eq(p.scale_rows, 128);
  p.hdim_qk = p.hdim_v = 64; p.seqlen_q = p.seqlen_k = 200;
  fa8_dispatch_names dn;
  EXPECT_OK(fa8_dispatch(&p, &dn));
  p.scale_rows = 0;   /* per-tensor */
  EXPECT_OK(fa8_dispatch(&p, &dn));
  p.scale_rows = 32;  /* not a multiple of the CPU forward's 64-key tile, and not covering the sequence */
  EXPECT(fa8_dispatch(&p, &dn), FA8_ERR_UNSUPPORTED, "v.scale_rows (32)", "BLOCK_N");
  int n = -1;
  EXPECT_OK(fa8_candidates(&p, 0, NULL, 0, &n));
  cr_expect_eq(n, 0, "%d forward candidates for 32-row scale blocks", n);
  p.scale_rows = 256;   /* covers the sequence: one block */
  EXPECT_OK(fa8_dispatch(&p, &dn));
  EXPECT_OK(fa8_candidates(&p, 0, NULL, 0, &n));
  cr_expect_gt(n, 0);
  p.scale_rows = -4;
  EXPECT(fa8_dispatch(&p, &dn), FA8_ERR_INVALID_ARGUMENT, "scale_rows (-4)");
}

Test(scale_rows, must_divide_the_tile) {
  kit k;
  kit_valid(&k, kcfg_default()); /* BLOCK_M = BLOCK_N = 64, Sq 70, Sk 90 */
  fa8_fwd_tensors f = k.f;
  fa8_bwd_tensors b = k.bw;
  f.v.scale_rows = 32;
  EXPECT(fa8_forward(&k.p, &f, NULL, 0, NULL), FA8_ERR_UNSUPPORTED, "v.scale_rows", "BLOCK_N");
  f = k.f;
  f.k.scale_rows = f.q.scale_rows = 32; /* per-row scales along the forward's reductions over head dims: fine */
  EXPECT_OK(fa8_forward(&k.p, &f, NULL, 0, NULL));
  b.q.scale_rows = 32;
  EXPECT(fa8_backward(&k.p, &b, k.ws, k.ws_bytes, NULL), FA8_ERR_UNSUPPORTED, "q.scale_rows", "BLOCK_M");
  b = k.bw;
  b.k.scale_rows = 80;
  EXPECT(fa8_backward(&k.p, &b, k.ws, k.ws_bytes, NULL), FA8_ERR_UNSUPPORTED, "k.scale_rows", "BLOCK_N");
  b = k.bw;
  b.dout_q.scale_rows = 48;
  EXPECT(fa8_backward(&k.p, &b, k.ws, k.ws_bytes, NULL), FA8_ERR_UNSUPPORTED, "dout_q.scale_rows", "BLOCK_M");
  /* one block covering the sequence always fits, so does any multiple of the tile */
  /* (the scale arrays hold the 64-row scales; only validation is under test here, the values are finite) */
  b = k.bw;
  b.k.scale_rows = 90; b.q.scale_rows = 128; b.dout_q.scale_rows = 70;
  EXPECT_OK(fa8_backward(&k.p, &b, k.ws, k.ws_bytes, NULL));
  f = k.f;
  f.v.scale_rows = 1000;
  EXPECT_OK(fa8_forward(&k.p, &f, NULL, 0, NULL));
  f.v.scale_rows = 128;
  EXPECT_OK(fa8_forward(&k.p, &f, NULL, 0, NULL));
  fa8_dispatch_names dn;
  EXPECT_OK(fa8_dispatch(&k.p, &dn));
  char bundle[256];
  bundle_of(dn.delta, bundle, sizeof bundle);
  fa8_problem p = k.p;
  p.instance = bundle;
  f = k.f;
  f.v.scale_rows = 32;
  EXPECT(fa8_forward(&p, &f, NULL, 0, NULL), FA8_ERR_INVALID_ARGUMENT, bundle, "v.scale_rows", "BLOCK_N");
  kit_free(&k);
}

/* ==== dispatch names ========================================================================== */

Test(dispatch, names) {
  static const int geo[][2] = { { 64, 64 }, { 96, 96 }, { 128, 128 }, { 192, 192 }, { 256, 256 }, { 192, 128 } };
  static const char *modes[] = { "stale", "dohat", "matched", "split" };
  int checked = 0;
  for (size_t g = 0; g < sizeof geo / sizeof geo[0]; ++g)
    for (int causal = 0; causal < 2; ++causal)
      for (int d = 0; d < 4; ++d)
        for (int fg = 0; fg < 2; ++fg) {
          fa8_problem p;
          fa8_problem_init(&p);
          p.hdim_qk = geo[g][0]; p.hdim_v = geo[g][1]; p.causal = causal; p.delta = (fa8_delta_mode)d;
          p.fmt_grad = fg ? FA8_FMT_E5M2 : FA8_FMT_E4M3;
          p.heads = 8; p.kv_heads = 2; p.batch = 3; p.seqlen_q = 1000; p.seqlen_k = 17;
          fa8_dispatch_names n;
          const fa8_status st = fa8_dispatch(&p, &n);
          /* every profile builds d64, d128 and d192x128 with E4M3 gradients; the rest may be missing */
          const int guaranteed = fg == 0 && ((geo[g][0] == 64 && geo[g][1] == 64) || (geo[g][0] == 128 && geo[g][1] == 128) ||
                                             (geo[g][0] == 192 && geo[g][1] == 128));
          if (!guaranteed && st == FA8_ERR_UNSUPPORTED) continue;
          EXPECT_OK(st);
          char dims[32];
          snprintf(dims, sizeof dims, "_d%dv%d_", geo[g][0], geo[g][1]);
          const char *mask = causal ? "_causal" : "_full";
          const char *layout = geo[g][0] != geo[g][1] ? "_mla_" : "_gqa_";
          const char *names[3] = { n.fwd, n.delta, n.bwd }, *prefix[3] = { "fa8_fwd_cpu_", "fa8_delta_cpu_", "fa8_bwd_cpu_" };
          for (int i = 0; i < 3; ++i) {
            cr_assert(names[i], "dispatch returned OK with a NULL name");
            cr_assert(strncmp(names[i], prefix[i], strlen(prefix[i])) == 0, "%s does not start with %s", names[i], prefix[i]);
            cr_assert(strstr(names[i], dims), "%s does not name %s", names[i], dims);
            cr_assert(strstr(names[i], mask), "%s does not name %s", names[i], mask);
            cr_assert(strstr(names[i], layout), "%s does not name %s", names[i], layout);
            cr_assert(strstr(names[i], "e4m3"), "%s", names[i]);
          }
          cr_assert(strstr(n.delta, modes[d]), "delta instance %s does not name mode %s", n.delta, modes[d]);
          cr_assert_eq(strstr(n.fwd, "_split") != NULL, d == FA8_DELTA_SPLIT, "forward %s for delta %s", n.fwd, modes[d]);
          cr_assert_eq(strstr(n.bwd, "e5m2") != NULL, fg == 1, "backward %s for fmt_grad %s", n.bwd, fg ? "e5m2" : "e4m3");
          cr_assert_eq(strstr(n.delta, "e5m2") != NULL, fg == 1, "delta %s for fmt_grad %s", n.delta, fg ? "e5m2" : "e4m3");
          /* independent of batch, sequence lengths and the exact head counts */
          fa8_problem q = p;
          q.heads = q.kv_heads = 1; q.batch = 1; q.seqlen_q = 1; q.seqlen_k = 4096;
          fa8_dispatch_names n2;
          EXPECT_OK(fa8_dispatch(&q, &n2));
          cr_assert_str_eq(n2.fwd, n.fwd); cr_assert_str_eq(n2.delta, n.delta); cr_assert_str_eq(n2.bwd, n.bwd);
          ++checked;
        }
  cr_assert_geq(checked, 3 * 2 * 4, "too few geometries dispatched (%d)", checked);
  /* d128 causal matched, the brief's example */
  fa8_problem p;
  fa8_problem_init(&p);
  p.causal = 1;
  fa8_dispatch_names n;
  EXPECT_OK(fa8_dispatch(&p, &n));
  cr_assert(strstr(n.fwd, "d128v128") && strstr(n.fwd, "causal"), "%s", n.fwd);
  cr_assert(strstr(n.delta, "d128v128") && strstr(n.delta, "causal") && strstr(n.delta, "matched"), "%s", n.delta);
  cr_assert(strstr(n.bwd, "d128v128") && strstr(n.bwd, "causal"), "%s", n.bwd);
}

/* ==== strided views are bit-identical to contiguous ones ====================================== */

static void compare_kits(kit *a, kit *b) {
  const struct { tbuf *x, *y; const char *name; } pairs[] = {
    { &a->q8, &b->q8, "q codes" }, { &a->k8, &b->k8, "k codes" }, { &a->v8, &b->v8, "v codes" }, { &a->do8, &b->do8, "dO codes" },
    { &a->o, &b->o, "o" }, { &a->o32, &b->o32, "o_f32" }, { &a->lse, &b->lse, "lse" }, { &a->delta, &b->delta, "delta" },
    { &a->dq, &b->dq, "dq" }, { &a->dk, &b->dk, "dk" }, { &a->dv, &b->dv, "dv" },
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i)
    cr_assert(tb_equal(pairs[i].x, pairs[i].y, pairs[i].name), "%s differs between the layouts", pairs[i].name);
  if (a->c.delta == FA8_DELTA_SPLIT) cr_assert(tb_equal(&a->orem, &b->orem, "o_rem"), "o_rem differs between the layouts");
  cr_assert_eq(memcmp(&a->stats, &b->stats, sizeof a->stats), 0, "row-sum statistics differ between the layouts");
  const float *sa[4] = { a->qs, a->ks, a->vs, a->dos }, *sb[4] = { b->qs, b->ks, b->vs, b->dos };
  const int64_t heads[4] = { a->c.H, a->c.Hkv, a->c.Hkv, a->c.H }, seq[4] = { a->c.Sq, a->c.Sk, a->c.Sk, a->c.Sq };
  for (int i = 0; i < 4; ++i) {
    const int64_t rows = a->c.rows, nblk = rows == 0 || rows >= seq[i] ? 1 : (seq[i] + rows - 1) / rows;
    const int64_t n = rows == 0 ? 1 : a->c.B * heads[i] * nblk;
    cr_assert_eq(memcmp(sa[i], sb[i], (size_t)n * 4), 0, "scales %d differ between the layouts", i);
  }
}

static void strided_case(kcfg c) {
  kit a, b;
  kit_init(&a, c);
  if (!a.quantized) { kit_free(&a); cr_skip_test("geometry not in this build"); }
  fa8_status st = kit_fwd(&a);
  if (is_missing(st)) { kit_free(&a); cr_skip_test("%s", fa8_last_error()); }
  EXPECT_OK(st);
  EXPECT_OK(kit_bwd(&a));
  cr_assert_gt(a.stats.rows, 0);
  c.strided = 1;
  c.with_t = 1;
  kit_init(&b, c);
  EXPECT_OK(kit_fwd(&b));
  EXPECT_OK(kit_bwd(&b));
  compare_kits(&a, &b);
  /* outputs wrote nothing outside their views; the transposed copies are right */
  const struct { tbuf *x; const char *name; } outs[] = {
    { &b.q8, "q codes" }, { &b.k8, "k codes" }, { &b.v8, "v codes" }, { &b.do8, "dO codes" }, { &b.o, "o" },
    { &b.o32, "o_f32" }, { &b.lse, "lse" }, { &b.delta, "delta" }, { &b.dq, "dq" }, { &b.dk, "dk" }, { &b.dv, "dv" },
  };
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; ++i)
    cr_assert(tb_padding_untouched(outs[i].x, outs[i].name), "%s wrote outside its view", outs[i].name);
  if (c.delta == FA8_DELTA_SPLIT) cr_assert(tb_padding_untouched(&b.orem, "o_rem"));
  const struct { tbuf *t, *r; int64_t S; } tr[] = { { &b.q8t, &b.q8, c.Sq }, { &b.k8t, &b.k8, c.Sk }, { &b.v8t, &b.v8, c.Sk }, { &b.do8t, &b.do8, c.Sq } };
  for (int i = 0; i < 4; ++i) {
    int64_t ti[4], ri[4];
    for (ti[0] = 0; ti[0] < tr[i].t->e[0]; ++ti[0])
      for (ti[1] = 0; ti[1] < tr[i].t->e[1]; ++ti[1])
        for (ti[2] = 0; ti[2] < tr[i].t->e[2]; ++ti[2])
          for (ti[3] = 0; ti[3] < tr[i].t->e[3]; ++ti[3]) {
            const uint8_t v = ((uint8_t *)tr[i].t->p)[tb_off(tr[i].t, ti)];
            if (ti[3] >= tr[i].S) { cr_assert_eq(v, 0, "transposed padding not zero"); continue; }
            ri[0] = ti[0]; ri[1] = ti[3]; ri[2] = ti[1]; ri[3] = ti[2];
            cr_assert_eq(v, ((uint8_t *)tr[i].r->p)[tb_off(tr[i].r, ri)], "transposed copy %d wrong", i);
          }
    cr_assert(tb_padding_untouched(tr[i].t, "transposed copy"));
  }
  kit_free(&a);
  kit_free(&b);
}

Test(strided, gqa_causal_matched) { strided_case(kcfg_default()); }

Test(strided, mla_split) {
  kcfg c = kcfg_default();
  c.B = 1; c.Sq = 100; c.Sk = 77; c.H = 2; c.Hkv = 1; c.Dqk = 192; c.Dv = 128; c.causal = 0; c.delta = FA8_DELTA_SPLIT;
  c.rows = 128; c.seed = 21;
  strided_case(c);
}

Test(strided, stale_bf16_dout_per_tensor) {
  kcfg c = kcfg_default();
  c.B = 2; c.Sq = 65; c.Sk = 130; c.H = 2; c.Hkv = 2; c.Dqk = c.Dv = 128; c.causal = 1; c.delta = FA8_DELTA_STALE;
  c.rows = 0; c.dout_bf16 = 1; c.seed = 31;
  strided_case(c);
}

Test(strided, dohat_e5m2_grad) {
  kcfg c = kcfg_default();
  c.B = 1; c.Sq = 64; c.Sk = 64; c.H = 3; c.Hkv = 3; c.causal = 0; c.delta = FA8_DELTA_DOHAT;
  c.fmt_grad = FA8_FMT_E5M2; c.seed = 41;
  strided_case(c);
}

/* ==== per-tensor scales end to end ============================================================= */

/* Per-tensor scaling (scale_rows 0) runs forward and backward, gives finite outputs close to the FP64 reference
 * on the dequantized operands, and equals a block-scaled run whose every block carries the same scale. */
Test(per_tensor, end_to_end) {
  kcfg c = kcfg_default();
  c.rows = 0;
  c.Sq = 150; c.Sk = 150; c.seed = 51;
  kit k;
  kit_init(&k, c);
  cr_assert(k.quantized);
  EXPECT_OK(kit_fwd(&k));
  EXPECT_OK(kit_bwd(&k));
  cr_assert_eq(k.stats.rows, (int64_t)c.B * c.H * c.Sq);
  /* same codes, the per-tensor scale spread over 64-row blocks */
  kit b;
  c.rows = 64;
  kit_init(&b, c);
  const int64_t nq = (int64_t)c.B * c.H * 3, nk = (int64_t)c.B * c.Hkv * 3;
  for (int64_t i = 0; i < nq; ++i) { b.qs[i] = k.qs[0]; b.dos[i] = k.dos[0]; }
  for (int64_t i = 0; i < nk; ++i) { b.ks[i] = k.ks[0]; b.vs[i] = k.vs[0]; }
  memcpy(b.q8.p, k.q8.p, (size_t)k.q8.n); memcpy(b.k8.p, k.k8.p, (size_t)k.k8.n);
  memcpy(b.v8.p, k.v8.p, (size_t)k.v8.n); memcpy(b.do8.p, k.do8.p, (size_t)k.do8.n);
  EXPECT_OK(kit_fwd(&b));
  EXPECT_OK(kit_bwd(&b));
  cr_assert(tb_equal(&k.o, &b.o, "o") && tb_equal(&k.lse, &b.lse, "lse") && tb_equal(&k.delta, &b.delta, "delta") &&
            tb_equal(&k.dq, &b.dq, "dq") && tb_equal(&k.dk, &b.dk, "dk") && tb_equal(&k.dv, &b.dv, "dv"),
            "per-tensor scales differ from the same scale in every block");
  kit_free(&b);
  kit_free(&k);

  /* accuracy against the FP64 reference, through the harness (per-tensor vs per-block) */
  double err[2][4];
  for (int mode = 0; mode < 2; ++mode) {
    h_config cfg;
    memset(&cfg, 0, sizeof cfg);
    fa8_problem_init(&cfg.p);
    cfg.p.batch = 1; cfg.p.seqlen_q = 200; cfg.p.seqlen_k = 200; cfg.p.heads = 2; cfg.p.kv_heads = 1;
    cfg.p.hdim_qk = cfg.p.hdim_v = 64; cfg.p.causal = 1; cfg.p.num_threads = 2;
    cfg.p.scale_rows = mode == 0 ? 0 : 64;
    h_data d;
    cr_assert_eq(h_alloc(&d, &cfg), 0);
    h_inputs in;
    h_inputs_default(&in);
    in.seed = 61;
    h_fill(&d, &in);
    EXPECT_OK(h_quantize(&d));
    EXPECT_OK(h_run(&d, FA8_DELTA_MATCHED));
    h_ref r;
    cr_assert_eq(h_reference(&d, 0, &r), 0);
    err[mode][0] = h_rel_err_bf16(d.o, r.o, d.no);
    err[mode][1] = h_rel_err_f32(d.dq, r.dq, d.nq);
    err[mode][2] = h_rel_err_f32(d.dk, r.dk, d.nk);
    err[mode][3] = h_rel_err_f32(d.dv, r.dv, d.nv);
    h_ref_free(&r);
    h_free(&d);
  }
  const char *what[4] = { "o", "dq", "dk", "dv" };
  const double tol[4] = { 0.025, 0.1, 0.06, 0.06 };
  for (int i = 0; i < 4; ++i) {
    cr_log_info("per-tensor %s rel err %.4g (per-block %.4g)", what[i], err[0][i], err[1][i]);
    cr_assert(err[0][i] < tol[i], "per-tensor %s relative error %.4g >= %.3g (per-block: %.4g)", what[i], err[0][i], tol[i], err[1][i]);
  }
}

/* ==== determinism and defaults ================================================================= */

Test(runs, thread_count_and_default_scale_invariant) {
  kcfg c = kcfg_default();
  c.threads = 1;
  kit a;
  kit_valid(&a, c);
  const int threads[] = { 0, 3, 7 };
  for (int i = 0; i < 3; ++i) {
    c.threads = threads[i];
    kit b;
    kit_valid(&b, c);
    compare_kits(&a, &b);
    kit_free(&b);
  }
  /* softmax_scale 0 selects 1/sqrt(hdim_qk) exactly */
  c.threads = 2;
  kit b;
  kit_init(&b, c);
  b.p.softmax_scale = 1.0f / sqrtf(64.0f);
  EXPECT_OK(kit_fwd(&b));
  EXPECT_OK(kit_bwd(&b));
  compare_kits(&a, &b);
  kit_free(&b);
  /* a different scale changes the result */
  kit_init(&b, c);
  b.p.softmax_scale = 0.2f;
  EXPECT_OK(kit_fwd(&b));
  int same = 1;
  for (int64_t i = 0; i < a.lse.n && same; ++i) same = memcmp((float *)a.lse.p + i, (float *)b.lse.p + i, 4) == 0;
  cr_assert(!same, "softmax_scale 0.2 gives the same LSE as the default");
  kit_free(&b);
  kit_free(&a);
}

Test(runs, workspace_sizes_and_stats_rows) {
  kcfg c = kcfg_default();
  c.Sq = 90; c.Sk = 70; /* causal with Sq > Sk: the first 20 query rows see no key */
  kit k;
  kit_init(&k, c);
  size_t b = 99;
  EXPECT_OK(fa8_forward_workspace(&k.p, &b));
  cr_assert_eq(b, 0);
  EXPECT_OK(fa8_backward_workspace(&k.p, &b));
  cr_assert_eq(b, 5 * sizeof(double) * (size_t)c.B * c.H * c.Sq);
  fa8_problem p = k.p;
  p.collect_stats = 0;
  EXPECT_OK(fa8_backward_workspace(&p, &b));
  cr_assert_eq(b, 0);
  EXPECT_OK(kit_fwd(&k));
  k.ws_bytes = 5 * sizeof(double) * (size_t)c.B * c.H * c.Sq; /* exactly the queried size */
  EXPECT_OK(kit_bwd(&k));
  cr_assert_eq(k.stats.rows, (int64_t)c.B * c.H * c.Sk, "rows with a visible key: %lld", (long long)k.stats.rows);
  cr_assert(k.stats.pre_ra_max < 1e-3, "matched delta: pre-cast row sums %.3g", k.stats.pre_ra_max);
  /* rows without a visible key: O = 0, LSE = -inf, zero dQ */
  for (int64_t bb = 0; bb < c.B; ++bb)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t s = 0; s < c.Sq - c.Sk; ++s) {
        const int64_t ri[4] = { bb, h, s, 0 };
        cr_assert(isinf(((float *)k.lse.p)[tb_off(&k.lse, ri)]) && ((float *)k.lse.p)[tb_off(&k.lse, ri)] < 0);
        for (int64_t d = 0; d < c.Dqk; ++d) {
          const int64_t qi[4] = { bb, s, h, d };
          cr_assert_eq(((float *)k.dq.p)[tb_off(&k.dq, qi)], 0.0f);
          cr_assert_eq(((uint16_t *)k.o.p)[tb_off(&k.o, qi)] & 0x7FFF, 0);
        }
      }
  kit_free(&k);
}

/* ==== thread safety ============================================================================ */

typedef struct {
  kit *k;
  int iters;
  int ok;
  char err_seen[512];
  pthread_barrier_t *bar;
  int which;
} worker_arg;

static void *worker(void *arg) {
  worker_arg *w = (worker_arg *)arg;
  w->ok = 1;
  /* 1. each thread provokes its own error, waits for the other to do the same, then reads its own message */
  fa8_problem p = w->k->p;
  if (w->which == 0) p.batch = -17;
  else p.heads = 7, p.kv_heads = 3;
  fa8_dispatch_names n;
  const fa8_status st = fa8_dispatch(&p, &n);
  pthread_barrier_wait(w->bar); /* both threads have failed a call */
  snprintf(w->err_seen, sizeof w->err_seen, "%s", fa8_last_error());
  if (st != FA8_ERR_INVALID_ARGUMENT) w->ok = 0;
  /* 2. concurrent forwards (and backwards) on different problems */
  for (int i = 0; i < w->iters; ++i) {
    if (fa8_forward(&w->k->p, &w->k->f, NULL, 0, NULL) != FA8_OK) w->ok = 0;
    if (fa8_backward(&w->k->p, &w->k->bw, w->k->ws, w->k->ws_bytes, NULL) != FA8_OK) w->ok = 0;
  }
  return NULL;
}

Test(threads, concurrent_calls_match_sequential, .timeout = 120) {
  kcfg ca = kcfg_default(), cb = kcfg_default();
  cb.Dqk = cb.Dv = 128; cb.causal = 0; cb.H = 6; cb.Hkv = 3; cb.Sq = 100; cb.Sk = 140; cb.delta = FA8_DELTA_STALE;
  cb.seed = 71; cb.threads = 3;
  kit ra, rb, a, b; /* sequential references, and the kits the threads write */
  kit_valid(&ra, ca);
  kit_valid(&rb, cb);
  kit_init(&a, ca);
  kit_init(&b, cb);
  /* the main thread has an error of its own */
  fa8_problem pm = ra.p;
  pm.seqlen_q = 0;
  size_t ws;
  EXPECT(fa8_forward_workspace(&pm, &ws), FA8_ERR_INVALID_ARGUMENT, "seqlen_q (0)");
  pthread_barrier_t bar;
  cr_assert_eq(pthread_barrier_init(&bar, NULL, 2), 0);
  worker_arg wa = { &a, 3, 0, "", &bar, 0 }, wb = { &b, 3, 0, "", &bar, 1 };
  pthread_t ta, tb;
  cr_assert_eq(pthread_create(&ta, NULL, worker, &wa), 0);
  cr_assert_eq(pthread_create(&tb, NULL, worker, &wb), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  pthread_barrier_destroy(&bar);
  cr_assert(wa.ok && wb.ok, "a concurrent call failed");
  cr_assert(strstr(wa.err_seen, "batch (-17)"), "thread A sees '%s'", wa.err_seen);
  cr_assert(strstr(wb.err_seen, "heads (7)") && strstr(wb.err_seen, "kv_heads (3)"), "thread B sees '%s'", wb.err_seen);
  cr_assert(strstr(fa8_last_error(), "seqlen_q (0)"), "the main thread's error changed to '%s'", fa8_last_error());
  compare_kits(&ra, &a);
  compare_kits(&rb, &b);
  kit_free(&ra); kit_free(&rb); kit_free(&a); kit_free(&b);
}
