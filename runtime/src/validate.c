/* Argument validation: every check names the argument and the value it rejects. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include "fa8_internal.h"

static const char *dtype_name(fa8_dtype d) {
  switch (d) {
    case FA8_DTYPE_F32: return "f32";
    case FA8_DTYPE_BF16: return "bf16";
    case FA8_DTYPE_FP8: return "fp8";
  }
  return "unknown";
}

static int dtype_size(fa8_dtype d) { return d == FA8_DTYPE_F32 ? 4 : d == FA8_DTYPE_BF16 ? 2 : 1; }

int64_t fa8__nblocks(int64_t S, int32_t scale_rows) {
  return scale_rows <= 0 || scale_rows >= S ? 1 : (S + scale_rows - 1) / scale_rows;
}

static fa8_status positive(const char *what, int64_t v) {
  if (v < 1) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s (%" PRId64 ") must be >= 1", what, v);
  return FA8_OK;
}

static fa8_status fmt_ok(const char *what, fa8_fmt f) {
  if ((int)f < 0 || f > FA8_FMT_F32) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s (%d) is not a valid fa8_fmt", what, (int)f);
  return FA8_OK;
}

fa8_status fa8__check_problem(const fa8_problem *p) {
  if (!p) return fa8__fail(FA8_ERR_NULL_POINTER, "problem is NULL");
  FA8_TRY(positive("batch", p->batch));
  FA8_TRY(positive("seqlen_q", p->seqlen_q));
  FA8_TRY(positive("seqlen_k", p->seqlen_k));
  FA8_TRY(positive("heads", p->heads));
  FA8_TRY(positive("kv_heads", p->kv_heads));
  FA8_TRY(positive("hdim_qk", p->hdim_qk));
  FA8_TRY(positive("hdim_v", p->hdim_v));
  if (p->heads % p->kv_heads != 0)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "heads (%d) is not a multiple of kv_heads (%d)", p->heads, p->kv_heads);
  if (!isfinite(p->softmax_scale) || p->softmax_scale < 0.0f)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "softmax_scale (%g) must be finite and > 0 (0 selects 1/sqrt(hdim_qk))",
                     (double)p->softmax_scale);
  if ((int)p->delta < 0 || p->delta > FA8_DELTA_SPLIT)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "delta (%d) is not a valid fa8_delta_mode", (int)p->delta);
  FA8_TRY(fmt_ok("fmt_qkv", p->fmt_qkv));
  FA8_TRY(fmt_ok("fmt_grad", p->fmt_grad));
  if ((int)p->backend < 0 || p->backend > FA8_BACKEND_HIP)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "backend (%d) is not a valid fa8_backend", (int)p->backend);
  if (p->num_threads < 0) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "num_threads (%d) must be >= 0", p->num_threads);
  if (p->scale_rows < 0) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "scale_rows (%d) must be >= 0 (0: per-tensor)", p->scale_rows);
  return FA8_OK;
}

/* Strides must be non-negative and map distinct indices to distinct elements: sorted by stride, each
 * dimension of extent > 1 must step over the whole span of the smaller ones. */
static fa8_status check_strides(const char *name, const int64_t *ext, const int64_t *st, int nd) {
  int idx[4], n = 0;
  for (int i = 0; i < nd; ++i) {
    if (st[i] < 0) return fa8__fail(FA8_ERR_BAD_STRIDES, "%s.stride[%d] is %" PRId64 " (negative strides are not supported)", name, i, st[i]);
    if (st[i] == 0 && ext[i] > 1) return fa8__fail(FA8_ERR_BAD_STRIDES, "%s.stride[%d] is 0 for a dimension of extent %" PRId64 " (its elements would alias)", name, i, ext[i]);
    if (ext[i] > 1) idx[n++] = i;
  }
  for (int a = 1; a < n; ++a)                      /* insertion sort by stride */
    for (int b = a; b > 0 && st[idx[b]] < st[idx[b - 1]]; --b) { int t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t; }
  for (int a = 1; a < n; ++a) {
    const int lo = idx[a - 1], hi = idx[a];
    if (st[hi] < st[lo] * ext[lo])
      return fa8__fail(FA8_ERR_BAD_STRIDES, "%s strides overlap: stride[%d]=%" PRId64 " < stride[%d]=%" PRId64 " x extent %" PRId64,
                       name, hi, st[hi], lo, st[lo], ext[lo]);
  }
  return FA8_OK;
}

static fa8_status check_view(const char *name, const fa8_tensor *t, int nd_dtypes, const fa8_dtype *dtypes,
                             const int64_t ext[4], int contiguous_dim) {
  if (!t) return fa8__fail(FA8_ERR_NULL_POINTER, "%s is NULL", name);
  if (!t->data) return fa8__fail(FA8_ERR_NULL_POINTER, "%s.data is NULL", name);
  int ok = 0;
  for (int i = 0; i < nd_dtypes; ++i) ok |= t->dtype == dtypes[i];
  if (!ok)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s.dtype is %s, expected %s%s%s", name, dtype_name(t->dtype),
                     dtype_name(dtypes[0]), nd_dtypes > 1 ? " or " : "", nd_dtypes > 1 ? dtype_name(dtypes[1]) : "");
  const int es = dtype_size(t->dtype);
  if ((uintptr_t)t->data % (uintptr_t)es)
    return fa8__fail(FA8_ERR_MISALIGNED, "%s.data (%p) is not aligned to its %d-byte elements", name, t->data, es);
  if (t->stride[contiguous_dim] != 1 && ext[contiguous_dim] > 1)
    return fa8__fail(FA8_ERR_BAD_STRIDES, "%s.stride[%d] is %" PRId64 "; the innermost dimension must be contiguous (1)",
                     name, contiguous_dim, t->stride[contiguous_dim]);
  return check_strides(name, ext, t->stride, contiguous_dim + 1);
}

fa8_status fa8__check_seq_tensor(const char *name, const fa8_tensor *t, int nd_dtypes, const fa8_dtype *dtypes,
                                 int64_t B, int64_t S, int64_t H, int64_t D) {
  const int64_t ext[4] = { B, S, H, D };
  return check_view(name, t, nd_dtypes, dtypes, ext, 3);
}

fa8_status fa8__check_row_tensor(const char *name, const fa8_tensor *t, int64_t B, int64_t H, int64_t S) {
  const int64_t ext[4] = { B, H, S, 1 };
  const fa8_dtype f32 = FA8_DTYPE_F32;
  return check_view(name, t, 1, &f32, ext, 2);
}

fa8_status fa8__check_qtensor(const char *name, const fa8_qtensor *q, fa8_fmt fmt, int64_t B, int64_t S, int64_t H,
                              int64_t D) {
  char sub[96];
  if (!q) return fa8__fail(FA8_ERR_NULL_POINTER, "%s is NULL", name);
  if (q->fmt != fmt)
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s.fmt is %s but the problem expects %s", name,
                     fa8_fmt_name(q->fmt) ? fa8_fmt_name(q->fmt) : "invalid", fa8_fmt_name(fmt));
  const fa8_dtype want = fmt == FA8_FMT_F32 ? FA8_DTYPE_F32 : FA8_DTYPE_FP8;
  snprintf(sub, sizeof sub, "%s.data", name);   /* field paths: q.data.stride[3], q.data_t.data, ... */
  FA8_TRY(fa8__check_seq_tensor(sub, &q->data, 1, &want, B, S, H, D));
  if (q->data_t.data) {
    const int64_t ext[4] = { B, H, D, (S + 15) / 16 * 16 };
    snprintf(sub, sizeof sub, "%s.data_t", name);
    FA8_TRY(check_view(sub, &q->data_t, 1, &want, ext, 3));
  }
  if (!q->scales) return fa8__fail(FA8_ERR_NULL_POINTER, "%s.scales is NULL", name);
  if (q->scale_rows < 0) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s.scale_rows (%d) must be >= 0 (0: per-tensor)", name, q->scale_rows);
  return FA8_OK;
}

/* GPU kernels stage FP8 rows and transposed columns with 16-byte cp.async copies: every row start must be
 * 16-byte aligned. need_t: the instance reads the transposed copy (it is then required). */
fa8_status fa8__check_gpu_fp8(const char *name, const fa8_qtensor *q, int need_t) {
  if (q->fmt == FA8_FMT_F32)
    return fa8__fail(FA8_ERR_UNSUPPORTED, "%s.fmt f32 (quantization off) exists on the cpu backend only", name);
  if ((uintptr_t)q->data.data % 16)
    return fa8__fail(FA8_ERR_MISALIGNED, "%s.data.data (%p) must be 16-byte aligned on a GPU backend", name, q->data.data);
  for (int i = 0; i < 3; ++i)
    if (q->data.stride[i] % 16)
      return fa8__fail(FA8_ERR_BAD_STRIDES, "%s.data.stride[%d] (%" PRId64 ") must be a multiple of 16 on a GPU backend",
                       name, i, q->data.stride[i]);
  if (!q->data_t.data) {
    if (need_t)
      return fa8__fail(FA8_ERR_NULL_POINTER, "%s.data_t is NULL: on a GPU backend this kernel reads the K-major copy "
                       "fa8_quantize writes there", name);
    return FA8_OK;
  }
  if ((uintptr_t)q->data_t.data % 16)
    return fa8__fail(FA8_ERR_MISALIGNED, "%s.data_t.data (%p) must be 16-byte aligned on a GPU backend", name, q->data_t.data);
  for (int i = 0; i < 3; ++i)
    if (q->data_t.stride[i] % 16)
      return fa8__fail(FA8_ERR_BAD_STRIDES, "%s.data_t.stride[%d] (%" PRId64 ") must be a multiple of 16 on a GPU backend",
                       name, i, q->data_t.stride[i]);
  return FA8_OK;
}
