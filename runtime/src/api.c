/* The public entry points: validate, dispatch, fill the kernel ABI, run on the selected backend. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa8_internal.h"

void fa8_problem_init(fa8_problem *p) {
  memset(p, 0, sizeof *p);
  p->batch = p->seqlen_q = p->seqlen_k = p->heads = p->kv_heads = 1;
  p->hdim_qk = p->hdim_v = 128;
  p->delta = FA8_DELTA_MATCHED;
  p->fmt_qkv = p->fmt_grad = FA8_FMT_E4M3;
  p->backend = FA8_BACKEND_CPU;
  p->scale_rows = 128;   /* fa8_quant_problem_init's */
}

void fa8_quant_problem_init(fa8_quant_problem *p) {
  memset(p, 0, sizeof *p);
  p->batch = p->seqlen = p->heads = 1;
  p->hdim = 128;
  p->fmt = FA8_FMT_E4M3;
  p->scale_rows = 128;
  /* power-of-two scales: exact descaling, and the convention of block-scaled FP8 training (Transformer Engine's
   * Float8BlockScaling, MXFP8's E8M0); docs/numerics.md has the measurements behind the default */
  p->pow2_scales = 1;
  p->backend = FA8_BACKEND_CPU;
}

int64_t fa8_quant_scale_count(const fa8_quant_problem *p) {
  if (p->scale_rows == 0) return 1;
  return (int64_t)p->batch * p->heads * fa8__nblocks(p->seqlen, p->scale_rows);
}

/* ---- ABI conversion ---- */
static fa8_cten cten(const fa8_tensor *t) { fa8_cten c = { t->data, t->stride[0], t->stride[1], t->stride[2] }; return c; }
static fa8_ten ten(const fa8_tensor *t) { fa8_ten c = { t->data, t->stride[0], t->stride[1], t->stride[2] }; return c; }
/* Can TMA read this FP8 tensor (16-byte aligned base, byte strides multiples of 16)? */
static int tma_ready(const fa8_tensor *t) {
  if (!t->data || (uintptr_t)t->data % 16) return 0;
  for (int i = 0; i < 3; ++i)
    if (t->stride[i] % 16) return 0;
  return 1;
}

static fa8_ctent ctent(const fa8_tensor *t) { fa8_ctent c = { t->data, t->stride[0], t->stride[1], t->stride[2] }; return c; }
static fa8_crow crow(const fa8_tensor *t) { fa8_crow c = { (const float *)t->data, t->stride[0], t->stride[1] }; return c; }
static fa8_row row(const fa8_tensor *t) { fa8_row c = { (float *)t->data, t->stride[0], t->stride[1] }; return c; }

static fa8_scales scales(const fa8_qtensor *q, int64_t H, int64_t S) {
  fa8_scales s = { q->scales, 0, 0, INT32_MAX };
  if (q->scale_rows > 0) {
    const int64_t nb = fa8__nblocks(S, q->scale_rows);
    s.sb = H * nb; s.sh = nb; s.rows = q->scale_rows;
  }
  return s;
}

static float softmax_scale(const fa8_problem *p) {
  return p->softmax_scale > 0.0f ? p->softmax_scale : 1.0f / sqrtf((float)p->hdim_qk);
}

static fa8_status backend_ok(fa8_backend be) {
  if ((int)be < 0 || be > FA8_BACKEND_HIP) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "backend (%d) is not a valid fa8_backend", (int)be);
  return be == FA8_BACKEND_CPU ? FA8_OK : fa8__gpu_check_device(be);
}

static fa8_status run(const fa8_kernel_desc *d, const void *args, int32_t num_threads, void *stream) {
  return d->backend == FA8_BACKEND_CPU ? fa8__cpu_run(d, args, num_threads) : fa8__gpu_run(d, args, stream);
}

/* ---- quantize ---- */
static size_t quant_ws(const fa8_quant_problem *p) {
  return p->backend != FA8_BACKEND_CPU && p->scale_rows == 0 ? 16 : 0;   /* device amax + scale for per-tensor */
}

fa8_status fa8_quantize_workspace(const fa8_quant_problem *p, size_t *bytes) {
  fa8__clear_error();
  if (!p) return fa8__fail(FA8_ERR_NULL_POINTER, "problem is NULL");
  if (!bytes) return fa8__fail(FA8_ERR_NULL_POINTER, "bytes is NULL");
  FA8_TRY(backend_ok(p->backend));
  *bytes = quant_ws(p);
  return FA8_OK;
}

fa8_status fa8_quantize(const fa8_quant_problem *p, const fa8_tensor *x, fa8_qtensor *out, void *workspace,
                        size_t workspace_bytes, void *stream) {
  fa8__clear_error();
  if (!p) return fa8__fail(FA8_ERR_NULL_POINTER, "problem is NULL");
  if (!out) return fa8__fail(FA8_ERR_NULL_POINTER, "out is NULL");
  const int64_t dims[4] = { p->batch, p->seqlen, p->heads, p->hdim };
  const char *names[4] = { "batch", "seqlen", "heads", "hdim" };
  for (int i = 0; i < 4; ++i)
    if (dims[i] < 1) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s (%" PRId64 ") must be >= 1", names[i], dims[i]);
  if (!fa8_fmt_is_fp8(p->fmt))
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "fmt (%d) is not an FP8 format", (int)p->fmt);
  if (p->scale_rows < 0)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "scale_rows (%d) must be >= 0 (0: per-tensor)", p->scale_rows);
  if (p->num_threads < 0) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "num_threads (%d) must be >= 0", p->num_threads);
  FA8_TRY(backend_ok(p->backend));
  const fa8_dtype in_types[2] = { FA8_DTYPE_F32, FA8_DTYPE_BF16 };
  FA8_TRY(fa8__check_seq_tensor("x", x, 2, in_types, p->batch, p->seqlen, p->heads, p->hdim));
  out->fmt = p->fmt;
  out->scale_rows = p->scale_rows;
  FA8_TRY(fa8__check_qtensor("out", out, p->fmt, p->batch, p->seqlen, p->heads, p->hdim));
  const int gpu = p->backend != FA8_BACKEND_CPU;
  if (gpu) FA8_TRY(fa8__check_gpu_fp8("out", out, 0));
  if (workspace_bytes < quant_ws(p) || (quant_ws(p) && (!workspace || (uintptr_t)workspace % 16)))
    return fa8__fail(FA8_ERR_WORKSPACE, "workspace (%p, %zu bytes) is below fa8_quantize_workspace (%zu bytes, 16-byte aligned)",
                     workspace, workspace_bytes, quant_ws(p));
  fa8_status st = FA8_OK;
  const fa8_intype in = x->dtype == FA8_DTYPE_BF16 ? FA8_IN_BF16 : FA8_IN_F32;
  const fa8_kernel_desc *d = fa8__find_quant(p->backend, p->fmt, p->hdim, in, &st);
  if (!d) return st;

  fa8_quant_args a;
  memset(&a, 0, sizeof a);
  a.B = p->batch; a.S = p->seqlen; a.H = p->heads; a.D = p->hdim;
  a.x = cten(x);
  a.out = ten(&out->data);
  if (out->data_t.data) { fa8_tent t = { out->data_t.data, out->data_t.stride[0], out->data_t.stride[1], out->data_t.stride[2] }; a.out_t = t; }
  a.pow2_scale = p->pow2_scales;
  const int64_t nb = fa8__nblocks(p->seqlen, p->scale_rows);
  fa8_scales_out so = { out->scales, (int64_t)p->heads * nb, nb, p->scale_rows > 0 ? p->scale_rows : INT32_MAX };
  float fixed;
  if (p->scale_rows == 0 && gpu) {
    /* the GPU reduces the amax on the device, into the workspace */
    a.fixed_scale = (const float *)workspace;
    so.sb = so.sh = 0;
  } else if (p->scale_rows == 0) {
    /* per-tensor: one amax over everything, then every block uses that scale */
    float amax = 0.0f;
    for (int64_t b = 0; b < p->batch; ++b)
      for (int64_t s = 0; s < p->seqlen; ++s)
        for (int64_t h = 0; h < p->heads; ++h) {
          const char *base = (const char *)x->data + (b * x->stride[0] + s * x->stride[1] + h * x->stride[2]) * (in == FA8_IN_BF16 ? 2 : 4);
          for (int64_t k = 0; k < p->hdim; ++k) {
            const float v = in == FA8_IN_BF16 ? fa8_f32_from_bf16(((const uint16_t *)base)[k]) : ((const float *)base)[k];
            if (!isfinite(v))
              return fa8__fail(FA8_ERR_NONFINITE, "x holds a non-finite value (%g) at [b=%" PRId64 ", s=%" PRId64 ", h=%" PRId64 ", d=%" PRId64 "]",
                               (double)v, b, s, h, k);
            amax = fabsf(v) > amax ? fabsf(v) : amax;
          }
        }
    fixed = fa8_scale_from_amax(amax, p->fmt, p->pow2_scales);
    out->scales[0] = fixed;
    a.fixed_scale = &fixed;
    so.sb = so.sh = 0;
  }
  a.scale = so;
  FA8_TRY(run(d, &a, p->num_threads, stream));
  if (p->scale_rows > 0 && !gpu)
    for (int64_t b = 0; b < p->batch; ++b)
      for (int64_t h = 0; h < p->heads; ++h)
        for (int64_t k = 0; k < nb; ++k)
          if (isnan(out->scales[b * so.sb + h * so.sh + k]))
            return fa8__fail(FA8_ERR_NONFINITE, "x holds NaN/Inf in scale block [b=%" PRId64 ", h=%" PRId64 ", rows %" PRId64 "..%" PRId64 "]",
                             b, h, k * p->scale_rows, (k + 1) * p->scale_rows - 1 < p->seqlen - 1 ? (k + 1) * p->scale_rows - 1 : (int64_t)p->seqlen - 1);
  return FA8_OK;
}

/* ---- attention ---- */
static const fa8_dtype BF16[1] = { FA8_DTYPE_BF16 }, F32[1] = { FA8_DTYPE_F32 }, IN[2] = { FA8_DTYPE_F32, FA8_DTYPE_BF16 };

/* The saved output (o, o_rem) is BF16; with quantization off (the f32 test format) it is FP32. */
static const fa8_dtype *o_dtype(const fa8_problem *p) { return p->fmt_qkv == FA8_FMT_F32 ? F32 : BF16; }

static fa8_status check_qkv(const fa8_problem *p, const fa8_qtensor *q, const fa8_qtensor *k, const fa8_qtensor *v) {
  FA8_TRY(fa8__check_qtensor("q", q, p->fmt_qkv, p->batch, p->seqlen_q, p->heads, p->hdim_qk));
  FA8_TRY(fa8__check_qtensor("k", k, p->fmt_qkv, p->batch, p->seqlen_k, p->kv_heads, p->hdim_qk));
  return fa8__check_qtensor("v", v, p->fmt_qkv, p->batch, p->seqlen_k, p->kv_heads, p->hdim_v);
}

fa8_status fa8_forward_workspace(const fa8_problem *p, size_t *bytes) {
  fa8__clear_error();
  FA8_TRY(fa8__check_problem(p));
  FA8_TRY(backend_ok(p->backend));
  if (!bytes) return fa8__fail(FA8_ERR_NULL_POINTER, "bytes is NULL");
  *bytes = 0;
  return FA8_OK;
}

fa8_status fa8_forward(const fa8_problem *p, const fa8_fwd_tensors *t, void *workspace, size_t workspace_bytes,
                       void *stream) {
  (void)workspace; (void)workspace_bytes;
  fa8__clear_error();
  FA8_TRY(fa8__check_problem(p));
  FA8_TRY(backend_ok(p->backend));
  if (!t) return fa8__fail(FA8_ERR_NULL_POINTER, "tensors is NULL");
  FA8_TRY(check_qkv(p, &t->q, &t->k, &t->v));
  if (p->backend != FA8_BACKEND_CPU) {   /* the forward reads V K-major (PV reduces over keys) */
    FA8_TRY(fa8__check_gpu_fp8("q", &t->q, 0));
    FA8_TRY(fa8__check_gpu_fp8("k", &t->k, 0));
    FA8_TRY(fa8__check_gpu_fp8("v", &t->v, 1));
  }
  FA8_TRY(fa8__check_seq_tensor("o", &t->o, 1, o_dtype(p), p->batch, p->seqlen_q, p->heads, p->hdim_v));
  if (t->o_f32.data) FA8_TRY(fa8__check_seq_tensor("o_f32", &t->o_f32, 1, F32, p->batch, p->seqlen_q, p->heads, p->hdim_v));
  if (p->delta == FA8_DELTA_SPLIT) {
    if (!t->o_rem.data) return fa8__fail(FA8_ERR_NULL_POINTER, "o_rem.data is NULL: delta mode split writes the output's BF16 remainder there");
    FA8_TRY(fa8__check_seq_tensor("o_rem", &t->o_rem, 1, o_dtype(p), p->batch, p->seqlen_q, p->heads, p->hdim_v));
  }
  FA8_TRY(fa8__check_row_tensor("lse", &t->lse, p->batch, p->heads, p->seqlen_q));
  const fa8__fit fit = { { t->q.scale_rows, t->k.scale_rows, t->v.scale_rows, 0 },
                         tma_ready(&t->q.data) && tma_ready(&t->k.data) && tma_ready(&t->v.data_t) };
  fa8__plan plan;
  FA8_TRY(fa8__plan_attention(p, &fit, &plan));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_FWD, plan.fwd));

  fa8_fwd_args a;
  memset(&a, 0, sizeof a);
  a.B = p->batch; a.Sq = p->seqlen_q; a.Sk = p->seqlen_k; a.H = p->heads; a.Hkv = p->kv_heads;
  a.softmax_scale = softmax_scale(p);
  a.q = cten(&t->q.data); a.k = cten(&t->k.data); a.v = cten(&t->v.data);
  if (t->k.data_t.data) a.kt = ctent(&t->k.data_t);
  if (t->v.data_t.data) a.vt = ctent(&t->v.data_t);
  a.q_scale = scales(&t->q, p->heads, p->seqlen_q);
  a.k_scale = scales(&t->k, p->kv_heads, p->seqlen_k);
  a.v_scale = scales(&t->v, p->kv_heads, p->seqlen_k);
  a.o = ten(&t->o);
  if (t->o_f32.data) a.o_f32 = ten(&t->o_f32);
  if (p->delta == FA8_DELTA_SPLIT) a.o_rem = ten(&t->o_rem);
  a.lse = row(&t->lse);
  return run(plan.fwd, &a, p->num_threads, stream);
}

static size_t stats_bytes(const fa8_problem *p) {
  return p->collect_stats ? (size_t)5 * (size_t)p->batch * (size_t)p->heads * (size_t)p->seqlen_q * sizeof(double) : 0;
}

fa8_status fa8_backward_workspace(const fa8_problem *p, size_t *bytes) {
  fa8__clear_error();
  FA8_TRY(fa8__check_problem(p));
  FA8_TRY(backend_ok(p->backend));
  if (!bytes) return fa8__fail(FA8_ERR_NULL_POINTER, "bytes is NULL");
  *bytes = stats_bytes(p);
  return FA8_OK;
}

/* Mean and max of per-row normalized residuals over rows with a nonzero rounding-aware scale. */
static void reduce_stats(const double *pre, const double *post, const double *apre, const double *apost,
                         const double *ra, int64_t n, fa8_rowsum_stats *s) {
  memset(s, 0, sizeof *s);
  for (int64_t i = 0; i < n; ++i) {
    if (!(ra[i] > 0.0)) continue;
    const double v[4] = { apre[i] > 0 ? fabs(pre[i]) / apre[i] : 0.0, apost[i] > 0 ? fabs(post[i]) / apost[i] : 0.0,
                          fabs(pre[i]) / ra[i], fabs(post[i]) / ra[i] };
    double *mean[4] = { &s->pre_mean, &s->post_mean, &s->pre_ra_mean, &s->post_ra_mean };
    double *mx[4] = { &s->pre_max, &s->post_max, &s->pre_ra_max, &s->post_ra_max };
    for (int k = 0; k < 4; ++k) { *mean[k] += v[k]; if (v[k] > *mx[k]) *mx[k] = v[k]; }
    ++s->rows;
  }
  if (s->rows) {
    s->pre_mean /= (double)s->rows; s->post_mean /= (double)s->rows;
    s->pre_ra_mean /= (double)s->rows; s->post_ra_mean /= (double)s->rows;
  }
}

fa8_status fa8_backward(const fa8_problem *p, const fa8_bwd_tensors *t, void *workspace, size_t workspace_bytes,
                        void *stream) {
  fa8__clear_error();
  FA8_TRY(fa8__check_problem(p));
  FA8_TRY(backend_ok(p->backend));
  if (!t) return fa8__fail(FA8_ERR_NULL_POINTER, "tensors is NULL");
  const int64_t B = p->batch, Sq = p->seqlen_q, Sk = p->seqlen_k, H = p->heads, Hkv = p->kv_heads;
  FA8_TRY(check_qkv(p, &t->q, &t->k, &t->v));
  FA8_TRY(fa8__check_qtensor("dout_q", &t->dout_q, p->fmt_grad, B, Sq, H, p->hdim_v));
  const int gpu = p->backend != FA8_BACKEND_CPU;
  if (gpu) {   /* dK = dS^t Q, dV = P^t dO, dQ = dS K reduce over rows: they read Q, dO and K K-major */
    FA8_TRY(fa8__check_gpu_fp8("q", &t->q, 1));
    FA8_TRY(fa8__check_gpu_fp8("k", &t->k, 1));
    FA8_TRY(fa8__check_gpu_fp8("v", &t->v, 0));
    FA8_TRY(fa8__check_gpu_fp8("dout_q", &t->dout_q, 1));
  }
  if (p->delta == FA8_DELTA_STALE) {
    if (!t->dout.data) return fa8__fail(FA8_ERR_NULL_POINTER, "dout.data is NULL: delta mode stale reads dO before its FP8 cast");
    FA8_TRY(fa8__check_seq_tensor("dout", &t->dout, 2, IN, B, Sq, H, p->hdim_v));
  }
  FA8_TRY(fa8__check_seq_tensor("o", &t->o, 1, o_dtype(p), B, Sq, H, p->hdim_v));
  if (p->delta == FA8_DELTA_SPLIT) {
    if (!t->o_rem.data) return fa8__fail(FA8_ERR_NULL_POINTER, "o_rem.data is NULL: delta mode split reads the forward's BF16 remainder");
    FA8_TRY(fa8__check_seq_tensor("o_rem", &t->o_rem, 1, o_dtype(p), B, Sq, H, p->hdim_v));
  }
  FA8_TRY(fa8__check_row_tensor("lse", &t->lse, B, H, Sq));
  FA8_TRY(fa8__check_row_tensor("delta", &t->delta, B, H, Sq));
  FA8_TRY(fa8__check_seq_tensor("dq", &t->dq, 1, F32, B, Sq, H, p->hdim_qk));
  FA8_TRY(fa8__check_seq_tensor("dk", &t->dk, 1, F32, B, Sk, Hkv, p->hdim_qk));
  FA8_TRY(fa8__check_seq_tensor("dv", &t->dv, 1, F32, B, Sk, Hkv, p->hdim_v));
  const size_t need = stats_bytes(p);
  if (p->collect_stats) {
    if (!t->stats) return fa8__fail(FA8_ERR_NULL_POINTER, "stats is NULL but collect_stats is set");
    if (!workspace || workspace_bytes < need)
      return fa8__fail(FA8_ERR_WORKSPACE, "workspace_bytes (%zu) is less than fa8_backward_workspace (%zu)",
                       workspace ? workspace_bytes : (size_t)0, need);
    if ((uintptr_t)workspace % sizeof(double))
      return fa8__fail(FA8_ERR_MISALIGNED, "workspace (%p) is not 8-byte aligned", workspace);
  }
  const fa8__fit fit = { { t->q.scale_rows, t->k.scale_rows, t->v.scale_rows, t->dout_q.scale_rows },
                         /* the Hopper backward reads every operand and its transposed copy through TMA */
                         tma_ready(&t->q.data) && tma_ready(&t->k.data) && tma_ready(&t->v.data_t) &&
                         tma_ready(&t->dout_q.data) && tma_ready(&t->q.data_t) && tma_ready(&t->k.data_t) &&
                         tma_ready(&t->v.data) && tma_ready(&t->dout_q.data_t) };
  fa8__plan plan;
  FA8_TRY(fa8__plan_attention(p, &fit, &plan));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_BWD, plan.bwd));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_DELTA, plan.delta));
  const float c = softmax_scale(p);

  fa8_delta_args da;
  memset(&da, 0, sizeof da);
  da.B = p->batch; da.Sq = p->seqlen_q; da.Sk = p->seqlen_k; da.H = p->heads; da.Hkv = p->kv_heads;
  da.softmax_scale = c;
  da.q = cten(&t->q.data); da.k = cten(&t->k.data); da.v = cten(&t->v.data); da.do_hat = cten(&t->dout_q.data);
  da.q_scale = scales(&t->q, H, Sq); da.k_scale = scales(&t->k, Hkv, Sk);
  da.v_scale = scales(&t->v, Hkv, Sk); da.do_scale = scales(&t->dout_q, H, Sq);
  if (t->dout.data) { da.dout = cten(&t->dout); da.dout_type = t->dout.dtype == FA8_DTYPE_BF16 ? FA8_IN_BF16 : FA8_IN_F32; }
  da.o = cten(&t->o);
  if (p->delta == FA8_DELTA_SPLIT) da.o_rem = cten(&t->o_rem);
  da.lse = crow(&t->lse);
  da.delta = row(&t->delta);
  FA8_TRY(run(plan.delta, &da, p->num_threads, stream));

  fa8_bwd_args ba;
  memset(&ba, 0, sizeof ba);
  ba.B = da.B; ba.Sq = da.Sq; ba.Sk = da.Sk; ba.H = da.H; ba.Hkv = da.Hkv; ba.softmax_scale = c;
  ba.q = da.q; ba.k = da.k; ba.v = da.v; ba.do_hat = da.do_hat;
  if (t->q.data_t.data) ba.qt = ctent(&t->q.data_t);
  if (t->k.data_t.data) ba.kt = ctent(&t->k.data_t);
  if (t->dout_q.data_t.data) ba.dot = ctent(&t->dout_q.data_t);
  ba.q_scale = da.q_scale; ba.k_scale = da.k_scale; ba.v_scale = da.v_scale; ba.do_scale = da.do_scale;
  ba.lse = da.lse;
  ba.delta = crow(&t->delta);
  ba.dq = ten(&t->dq); ba.dk = ten(&t->dk); ba.dv = ten(&t->dv);
  const int64_t n = B * H * Sq;
  if (p->collect_stats) {
    double *w = (double *)workspace;
    ba.diag.pre = w; ba.diag.post = w + n; ba.diag.abs_pre = w + 2 * n; ba.diag.abs_post = w + 3 * n; ba.diag.ra = w + 4 * n;
    ba.diag.sb = H * Sq; ba.diag.sh = Sq;
  }
  if (gpu && p->collect_stats) FA8_TRY(fa8__gpu_memset(p->backend, workspace, need, stream));   /* accumulated with atomics */
  FA8_TRY(run(plan.bwd, &ba, p->num_threads, stream));
  if (!p->collect_stats) return FA8_OK;
  if (!gpu) {
    reduce_stats(ba.diag.pre, ba.diag.post, ba.diag.abs_pre, ba.diag.abs_post, ba.diag.ra, n, t->stats);
    return FA8_OK;
  }
  /* GPU: statistics are opt-in diagnostics, so copying them back (and waiting) here is acceptable */
  double *h = (double *)malloc(need);
  if (!h) return fa8__fail(FA8_ERR_OUT_OF_MEMORY, "no host memory for the row statistics (%zu bytes)", need);
  fa8_status st = fa8__gpu_download(p->backend, h, workspace, need, stream);
  if (st == FA8_OK) reduce_stats(h, h + n, h + 2 * n, h + 3 * n, h + 4 * n, n, t->stats);
  free(h);
  return st;
}

fa8_status fa8_dispatch(const fa8_problem *p, fa8_dispatch_names *out) {
  fa8__clear_error();
  FA8_TRY(fa8__check_problem(p));
  FA8_TRY(backend_ok(p->backend));
  if (!out) return fa8__fail(FA8_ERR_NULL_POINTER, "out is NULL");
  const fa8__fit fit = fa8__fit_of_problem(p);
  fa8__plan plan;
  FA8_TRY(fa8__plan_attention(p, &fit, &plan));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_FWD, plan.fwd));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_BWD, plan.bwd));
  FA8_TRY(fa8__require(p, &fit, FA8_DIR_DELTA, plan.delta));
  static _Thread_local char fwd_why[sizeof plan.fwd_why], bwd_why[sizeof plan.bwd_why];
  memcpy(fwd_why, plan.fwd_why, sizeof fwd_why);
  memcpy(bwd_why, plan.bwd_why, sizeof bwd_why);
  out->fwd = plan.fwd ? plan.fwd->name : NULL;
  out->delta = plan.delta ? plan.delta->name : NULL;
  out->bwd = plan.bwd ? plan.bwd->name : NULL;
  out->fwd_why = fwd_why;
  out->bwd_why = bwd_why;
  return FA8_OK;
}
