/* Attention harness (see harness.h). */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_mem.h"
#include "reference.h"

static const char *DELTA_NAMES[4] = { "stale", "dohat", "matched", "split" };

const char *h_delta_name(fa8_delta_mode m) { return (int)m >= 0 && m <= FA8_DELTA_SPLIT ? DELTA_NAMES[m] : "?"; }

int h_delta_from_name(const char *s, fa8_delta_mode *out) {
  for (int i = 0; i < 4; ++i)
    if (strcmp(s, DELTA_NAMES[i]) == 0) { *out = (fa8_delta_mode)i; return 0; }
  return -1;
}

static int64_t nblk(int64_t S, int32_t rows) { return rows <= 0 || rows >= S ? 1 : (S + rows - 1) / rows; }
/* scales of a [B, S, H, D] operand quantized in blocks of `rows` rows per (b, h); 0: one for the tensor */
static int64_t nscales(int64_t B, int64_t S, int64_t H, int32_t rows) { return rows == 0 ? 1 : B * H * nblk(S, rows); }

static int64_t spad(int64_t s) { return (s + 15) / 16 * 16; }

int32_t h_v_scale_rows(const h_config *cfg) { return cfg->v_scale_rows > 0 ? cfg->v_scale_rows : cfg->p.scale_rows; }

/* device buffers: inputs, codes (row and transposed), scales, outputs, workspaces */
static int gpu_alloc(h_data *d, int64_t sq, int64_t sk, int64_t sv) {
  const fa8_problem *p = &d->cfg.p;
  const int64_t B = p->batch, H = p->heads, Hkv = p->kv_heads;
  int ok = 1;
  d->g.on = 1;
#define G(ptr, n) ok &= ((ptr) = h_gpu_alloc((size_t)(n))) != NULL
  G(d->g.q, d->nq * 4); G(d->g.k, d->nk * 4); G(d->g.v, d->nv * 4); G(d->g.dout, d->no * 4);
  G(d->g.q8, d->nq); G(d->g.k8, d->nk); G(d->g.v8, d->nv); G(d->g.do8, d->no);
  G(d->g.q8t, B * H * p->hdim_qk * spad(p->seqlen_q)); G(d->g.k8t, B * Hkv * p->hdim_qk * spad(p->seqlen_k));
  G(d->g.v8t, B * Hkv * p->hdim_v * spad(p->seqlen_k)); G(d->g.do8t, B * H * p->hdim_v * spad(p->seqlen_q));
  G(d->g.qs, sq * 4); G(d->g.ks, sk * 4); G(d->g.vs, sv * 4); G(d->g.dos, sq * 4);
  G(d->g.o, d->no * 2); G(d->g.orem, d->no * 2); G(d->g.o32, d->no * 4); G(d->g.lse, d->nrow * 4);
  G(d->g.delta, d->nrow * 4); G(d->g.dq, d->nq * 4); G(d->g.dk, d->nk * 4); G(d->g.dv, d->nv * 4);
  G(d->g.ws, d->ws_bytes); G(d->g.qws, 16);
#undef G
  return ok ? 0 : -1;
}

int h_alloc(h_data *d, const h_config *cfg) {
  memset(d, 0, sizeof *d);
  d->cfg = *cfg;
  const fa8_problem *p = &cfg->p;
  const int64_t B = p->batch, Sq = p->seqlen_q, Sk = p->seqlen_k, H = p->heads, Hkv = p->kv_heads;
  d->nq = B * Sq * H * p->hdim_qk;
  d->nk = B * Sk * Hkv * p->hdim_qk;
  d->nv = B * Sk * Hkv * p->hdim_v;
  d->no = B * Sq * H * p->hdim_v;
  d->nrow = B * H * Sq;
  const size_t es = cfg->quantize_off ? 4 : 1;
  const int64_t sq = nscales(B, Sq, H, cfg->p.scale_rows);
  const int64_t sk = nscales(B, Sk, Hkv, cfg->p.scale_rows), sv = nscales(B, Sk, Hkv, h_v_scale_rows(cfg));
  int ok = 1;
#define A(ptr, n, sz) ok &= ((ptr) = calloc((size_t)(n) > 0 ? (size_t)(n) : 1, (sz))) != NULL
  A(d->q, d->nq, 4); A(d->k, d->nk, 4); A(d->v, d->nv, 4); A(d->dout, d->no, 4);
  A(d->q8, d->nq, es); A(d->k8, d->nk, es); A(d->v8, d->nv, es); A(d->do8, d->no, es);
  A(d->qs, sq, 4); A(d->ks, sk, 4); A(d->vs, sv, 4); A(d->dos, sq, 4);
  A(d->qh, d->nq, 4); A(d->kh, d->nk, 4); A(d->vh, d->nv, 4); A(d->doh, d->no, 4);
  A(d->o, d->no, 4); A(d->orem, d->no, 4);   /* BF16, or FP32 with quantization off */ A(d->o32, d->no, 4);
  A(d->lse, d->nrow, 4); A(d->delta, d->nrow, 4);
  A(d->dq, d->nq, 4); A(d->dk, d->nk, 4); A(d->dv, d->nv, 4);
#undef A
  fa8_problem pp = *p;
  pp.collect_stats = 1;
  if (ok && fa8_backward_workspace(&pp, &d->ws_bytes) == FA8_OK) ok &= (d->ws = malloc(d->ws_bytes ? d->ws_bytes : 8)) != NULL;
  if (ok && cfg->p.backend != FA8_BACKEND_CPU) ok = gpu_alloc(d, sq, sk, sv) == 0;
  if (!ok) { h_free(d); return -1; }
  return 0;
}

void h_free(h_data *d) {
  void *g[] = { d->g.q, d->g.k, d->g.v, d->g.dout, d->g.q8, d->g.k8, d->g.v8, d->g.do8, d->g.q8t, d->g.k8t, d->g.v8t,
                d->g.do8t, d->g.qs, d->g.ks, d->g.vs, d->g.dos, d->g.o, d->g.orem, d->g.o32, d->g.lse, d->g.delta,
                d->g.dq, d->g.dk, d->g.dv, d->g.ws, d->g.qws };
  for (size_t i = 0; i < sizeof g / sizeof g[0]; ++i) h_gpu_free(g[i]);
  void *ptrs[] = { d->q, d->k, d->v, d->dout, d->q8, d->k8, d->v8, d->do8, d->qs, d->ks, d->vs, d->dos,
                   d->qh, d->kh, d->vh, d->doh, d->o, d->orem, d->o32, d->lse, d->delta, d->dq, d->dk, d->dv, d->ws };
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; ++i) free(ptrs[i]);
  memset(d, 0, sizeof *d);
}

/* ---- inputs ---- */
static uint64_t rng_next(uint64_t s[4]) {   /* xoshiro256** */
  const uint64_t r = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9, t = s[1] << 17;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = s[3] << 45 | s[3] >> 19;
  return r;
}
static double rng_unit(uint64_t s[4]) { return ((double)(rng_next(s) >> 11) + 0.5) * 0x1.0p-53; }
static double rng_normal(uint64_t s[4]) {
  return sqrt(-2.0 * log(rng_unit(s))) * cos(6.283185307179586 * rng_unit(s));
}
static void rng_seed(uint64_t s[4], uint64_t seed) {
  for (int i = 0; i < 4; ++i) {   /* splitmix64 */
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    s[i] = z ^ (z >> 31);
  }
}

void h_config_init(h_config *c) {
  memset(c, 0, sizeof *c);
  fa8_problem_init(&c->p);
  fa8_quant_problem qd;
  fa8_quant_problem_init(&qd);
  c->pow2_scales = qd.pow2_scales;
}

void h_inputs_default(h_inputs *in) {
  in->seed = 1;
  in->outlier_channels = 4;
  in->outlier_gain = 6.0f;
  in->logit_std = 3.0f;
}

/* Every row of a [rows, D] tensor: gain_c * (mu_c + N(0,1)) * alpha; outlier channels share a mean so
 * they add coherent logit contributions, as high-gain QK-norm channels do. */
static void fill_tensor(float *x, int64_t rows, int D, const float *gain, const float *mu, double alpha, uint64_t s[4]) {
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < D; ++c) x[r * D + c] = (float)(alpha * gain[c] * (mu[c] + rng_normal(s)));
}

void h_fill(h_data *d, const h_inputs *in) {
  const fa8_problem *p = &d->cfg.p;
  uint64_t s[4];
  rng_seed(s, in->seed);
  const int Dq = p->hdim_qk, Dv = p->hdim_v;
  float *gq = malloc(sizeof(float) * (size_t)(Dq > Dv ? Dq : Dv)), *mq = malloc(sizeof(float) * (size_t)(Dq > Dv ? Dq : Dv));
  float *gv = malloc(sizeof(float) * (size_t)Dv), *mv = malloc(sizeof(float) * (size_t)Dv);
  if (!gq || !mq || !gv || !mv) abort();
  double g4 = 0.0;
  for (int c = 0; c < Dq; ++c) {
    const int out = c < in->outlier_channels;
    gq[c] = out ? in->outlier_gain : 1.0f;
    mq[c] = out ? (c % 2 ? -1.0f : 1.0f) : 0.0f;
    g4 += pow(gq[c], 4) * (1.0 + 2.0 * mq[c] * mq[c]);   /* var of a product of two such channels */
  }
  for (int c = 0; c < Dv; ++c) { gv[c] = c < in->outlier_channels ? in->outlier_gain : 1.0f; mv[c] = 0.0f; }
  const double c = p->softmax_scale > 0 ? p->softmax_scale : 1.0 / sqrt((double)Dq);
  const double alpha = sqrt(in->logit_std / (c * sqrt(g4)));
  fill_tensor(d->q, d->nq / Dq, Dq, gq, mq, alpha, s);
  fill_tensor(d->k, d->nk / Dq, Dq, gq, mq, alpha, s);
  fill_tensor(d->v, d->nv / Dv, Dv, gv, mv, 1.0, s);
  fill_tensor(d->dout, d->no / Dv, Dv, gv, mv, 1e-3, s);
  free(gq); free(mq); free(gv); free(mv);
}

/* ---- quantization ---- */
static fa8_tensor seq_view(void *data, fa8_dtype dt, int64_t S, int64_t H, int64_t D) {
  fa8_tensor t = { data, dt, { S * H * D, H * D, D, 1 } };
  return t;
}

static fa8_status quant_one(h_data *d, int32_t rows, const float *x, void *codes, float *scales, float *deq, int64_t S, int64_t H,
                            int64_t D, fa8_fmt fmt, void *gx, void *gcodes, void *gcodes_t, float *gscales) {
  const h_config *cfg = &d->cfg;
  const int64_t B = cfg->p.batch, n = B * S * H * D;
  if (cfg->quantize_off) {
    memcpy(codes, x, (size_t)n * sizeof(float));
    memcpy(deq, x, (size_t)n * sizeof(float));
    const int64_t ns = nscales(B, S, H, rows);
    for (int64_t i = 0; i < ns; ++i) scales[i] = 1.0f;
    return FA8_OK;
  }
  fa8_quant_problem qp;
  fa8_quant_problem_init(&qp);
  qp.batch = (int32_t)B; qp.seqlen = (int32_t)S; qp.heads = (int32_t)H; qp.hdim = (int32_t)D;
  qp.fmt = fmt; qp.scale_rows = rows; qp.pow2_scales = cfg->pow2_scales;
  qp.backend = cfg->p.backend; qp.num_threads = cfg->p.num_threads;
  const int gpu = d->g.on;
  const fa8_tensor xt = seq_view(gpu ? gx : (void *)x, FA8_DTYPE_F32, S, H, D);
  fa8_qtensor out;
  memset(&out, 0, sizeof out);
  out.data = seq_view(gpu ? gcodes : codes, FA8_DTYPE_FP8, S, H, D);
  out.scales = gpu ? gscales : scales;
  if (gpu) {   /* GPU MMAs read K-major copies: [B, H, D, S_pad] */
    fa8_tensor t = { gcodes_t, FA8_DTYPE_FP8, { H * D * spad(S), D * spad(S), spad(S), 1 } };
    out.data_t = t;
    if (h_gpu_put(gx, x, (size_t)(B * S * H * D) * 4)) return FA8_ERR_BACKEND;
  }
  fa8_status st = fa8_quantize(&qp, &xt, &out, gpu ? d->g.qws : NULL, gpu ? 16 : 0, NULL);
  if (st != FA8_OK) return st;
  const int64_t nsc = nscales(B, S, H, rows);
  if (gpu && (h_gpu_get(codes, gcodes, (size_t)(B * S * H * D)) || h_gpu_get(scales, gscales, (size_t)nsc * 4)))
    return FA8_ERR_BACKEND;
  const int64_t nb = nblk(S, rows);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const float sc = rows == 0 ? scales[0] : scales[(b * H + h) * nb + s / (rows >= S ? S : rows)];
        const int64_t base = ((b * S + s) * H + h) * D;
        for (int64_t k = 0; k < D; ++k) deq[base + k] = fa8_decode(fmt, ((uint8_t *)codes)[base + k]) * sc;
      }
  return FA8_OK;
}

fa8_status h_quantize(h_data *d) {
  const fa8_problem *p = &d->cfg.p;
  const int32_t rows = p->scale_rows;
  fa8_status st;
  if ((st = quant_one(d, rows, d->q, d->q8, d->qs, d->qh, p->seqlen_q, p->heads, p->hdim_qk, p->fmt_qkv, d->g.q, d->g.q8, d->g.q8t, d->g.qs))) return st;
  if ((st = quant_one(d, rows, d->k, d->k8, d->ks, d->kh, p->seqlen_k, p->kv_heads, p->hdim_qk, p->fmt_qkv, d->g.k, d->g.k8, d->g.k8t, d->g.ks))) return st;
  if ((st = quant_one(d, h_v_scale_rows(&d->cfg), d->v, d->v8, d->vs, d->vh, p->seqlen_k, p->kv_heads, p->hdim_v, p->fmt_qkv, d->g.v, d->g.v8, d->g.v8t, d->g.vs))) return st;
  return quant_one(d, rows, d->dout, d->do8, d->dos, d->doh, p->seqlen_q, p->heads, p->hdim_v, p->fmt_grad, d->g.dout, d->g.do8, d->g.do8t, d->g.dos);
}

/* ---- runs ---- */
static fa8_qtensor qview(h_data *d, int32_t rows, void *codes, float *scales, int64_t S, int64_t H, int64_t D, fa8_fmt fmt,
                         void *codes_t) {
  fa8_qtensor q;
  memset(&q, 0, sizeof q);
  q.data = seq_view(codes, d->cfg.quantize_off ? FA8_DTYPE_F32 : FA8_DTYPE_FP8, S, H, D);
  if (codes_t) {
    fa8_tensor t = { codes_t, FA8_DTYPE_FP8, { H * D * spad(S), D * spad(S), spad(S), 1 } };
    q.data_t = t;
  }
  q.scales = scales;
  q.scale_rows = rows;
  q.fmt = d->cfg.quantize_off ? FA8_FMT_F32 : fmt;
  return q;
}

static fa8_tensor row_view(float *x, int64_t H, int64_t S) {
  fa8_tensor t = { x, FA8_DTYPE_F32, { H * S, S, 1, 0 } };
  return t;
}

void h_views(h_data *d, fa8_delta_mode mode, fa8_problem *pp, fa8_fwd_tensors *fp, fa8_bwd_tensors *bp) {
  fa8_problem p = d->cfg.p;
  p.delta = mode;
  p.collect_stats = !d->cfg.stats_off;
  if (d->cfg.quantize_off) p.fmt_qkv = p.fmt_grad = FA8_FMT_F32;
  const int64_t Sq = p.seqlen_q, Sk = p.seqlen_k, H = p.heads, Hkv = p.kv_heads;
  const int gpu = d->g.on;
#define BUF(name) (gpu ? (void *)d->g.name : (void *)d->name)
  fa8_fwd_tensors f;
  memset(&f, 0, sizeof f);
  f.q = qview(d, p.scale_rows, BUF(q8), BUF(qs), Sq, H, p.hdim_qk, p.fmt_qkv, gpu ? d->g.q8t : NULL);
  f.k = qview(d, p.scale_rows, BUF(k8), BUF(ks), Sk, Hkv, p.hdim_qk, p.fmt_qkv, gpu ? d->g.k8t : NULL);
  f.v = qview(d, h_v_scale_rows(&d->cfg), BUF(v8), BUF(vs), Sk, Hkv, p.hdim_v, p.fmt_qkv, gpu ? d->g.v8t : NULL);
  const fa8_dtype odt = d->cfg.quantize_off ? FA8_DTYPE_F32 : FA8_DTYPE_BF16;
  f.o = seq_view(BUF(o), odt, Sq, H, p.hdim_v);
  f.o_f32 = seq_view(BUF(o32), FA8_DTYPE_F32, Sq, H, p.hdim_v);
  f.o_rem = seq_view(BUF(orem), odt, Sq, H, p.hdim_v);
  f.lse = row_view(BUF(lse), H, Sq);
  fa8_bwd_tensors b;
  memset(&b, 0, sizeof b);
  b.q = f.q; b.k = f.k; b.v = f.v;
  b.dout_q = qview(d, p.scale_rows, BUF(do8), BUF(dos), Sq, H, p.hdim_v, p.fmt_grad, gpu ? d->g.do8t : NULL);
  b.dout = seq_view(BUF(dout), FA8_DTYPE_F32, Sq, H, p.hdim_v);
  b.o = f.o; b.o_rem = f.o_rem; b.lse = f.lse;
  b.delta = row_view(BUF(delta), H, Sq);
  b.dq = seq_view(BUF(dq), FA8_DTYPE_F32, Sq, H, p.hdim_qk);
  b.dk = seq_view(BUF(dk), FA8_DTYPE_F32, Sk, Hkv, p.hdim_qk);
  b.dv = seq_view(BUF(dv), FA8_DTYPE_F32, Sk, Hkv, p.hdim_v);
  b.stats = d->cfg.stats_off ? NULL : &d->stats;
#undef BUF
  *pp = p; *fp = f; *bp = b;
}

void h_timed_views(h_data *d, fa8_delta_mode mode, fa8_problem *p, fa8_fwd_tensors *f, fa8_bwd_tensors *b) {
  h_views(d, mode, p, f, b);
  f->o_f32.data = NULL;
}

fa8_status h_run(h_data *d, fa8_delta_mode mode) {
  fa8_problem p;
  fa8_fwd_tensors f;
  fa8_bwd_tensors b;
  h_views(d, mode, &p, &f, &b);
  const int gpu = d->g.on;
#define BUF(name) (gpu ? (void *)d->g.name : (void *)d->name)
  fa8_status st = fa8_forward(&p, &f, NULL, 0, NULL);
  if (st != FA8_OK) return st;
  st = fa8_backward(&p, &b, BUF(ws), d->ws_bytes, NULL);
#undef BUF
  if (st != FA8_OK || !gpu) return st;
  /* bring the results back for comparison */
  const struct { void *h; const void *g; int64_t n; } back[] = {
    { d->o, d->g.o, d->no * 2 }, { d->orem, d->g.orem, d->no * 2 }, { d->o32, d->g.o32, d->no * 4 },
    { d->lse, d->g.lse, d->nrow * 4 }, { d->delta, d->g.delta, d->nrow * 4 }, { d->dq, d->g.dq, d->nq * 4 },
    { d->dk, d->g.dk, d->nk * 4 }, { d->dv, d->g.dv, d->nv * 4 } };
  for (size_t i = 0; i < sizeof back / sizeof back[0]; ++i)
    if (h_gpu_get(back[i].h, back[i].g, (size_t)back[i].n)) return FA8_ERR_BACKEND;
  return FA8_OK;
}

/* ---- references ---- */
int h_reference(const h_data *d, int emulate, h_ref *r) {
  const fa8_problem *p = &d->cfg.p;
  memset(r, 0, sizeof *r);
  int ok = 1;
#define A(ptr, n) ok &= ((ptr) = calloc((size_t)(n), sizeof(double))) != NULL
  A(r->o, d->no); A(r->lse, d->nrow); A(r->delta, d->nrow); A(r->dq, d->nq); A(r->dk, d->nk); A(r->dv, d->nv);
#undef A
  if (!ok) { h_ref_free(r); return -1; }
  fa8_ref_problem rp;
  memset(&rp, 0, sizeof rp);
  rp.B = p->batch; rp.Sq = p->seqlen_q; rp.Sk = p->seqlen_k; rp.H = p->heads; rp.Hkv = p->kv_heads;
  rp.Dqk = p->hdim_qk; rp.Dv = p->hdim_v; rp.causal = p->causal;
  rp.scale = p->softmax_scale > 0 ? p->softmax_scale : 1.0 / sqrt((double)p->hdim_qk);
  rp.q = d->qh; rp.k = d->kh; rp.v = d->vh; rp.dout = d->doh;
  rp.emulate = emulate;
  rp.ds_fmt = d->cfg.quantize_off ? FA8_FMT_F32 : p->fmt_grad;
  rp.p_fmt = fa8_p_format(p->fmt_qkv);
  rp.p_scale_log2 = fa8_p_scale_log2(p->fmt_qkv);
  /* the emulated reference casts dS per tile: use the dispatched backward's tile */
  rp.block_m = rp.block_n = 64;
  fa8_problem pp = *p;
  if (d->cfg.quantize_off) pp.fmt_qkv = pp.fmt_grad = FA8_FMT_F32;
  fa8_dispatch_names dn;
  const char *tile = fa8_dispatch(&pp, &dn) == FA8_OK && dn.bwd ? strstr(dn.bwd, "_m") : NULL;
  while (tile && sscanf(tile, "_m%dn%d_", &rp.block_m, &rp.block_n) != 2) tile = strstr(tile + 1, "_m");
  rp.nthreads = p->num_threads > 0 ? p->num_threads : 2;
  fa8_ref_out o = { r->o, r->lse, r->delta, r->dq, r->dk, r->dv };
  if (fa8_reference(&rp, &o) != 0) { h_ref_free(r); return -1; }
  return 0;
}

void h_ref_free(h_ref *r) {
  free(r->o); free(r->lse); free(r->delta); free(r->dq); free(r->dk); free(r->dv);
  memset(r, 0, sizeof *r);
}

double h_rel_err_f32(const float *x, const double *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) { const double e = (double)x[i] - ref[i]; num += e * e; den += ref[i] * ref[i]; }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

double h_rel_err_bf16(const uint16_t *x, const double *ref, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = (double)fa8_f32_from_bf16(x[i]) - ref[i];
    num += e * e; den += ref[i] * ref[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}
