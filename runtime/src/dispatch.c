/* Dispatch: the first instance in the generated table (most specialized first) that fits the problem.
 * A forced instance name (problem->instance) may name a bundle or a forward instance. */
#include <stdio.h>
#include <string.h>
#include "fa8_internal.h"

static int layout_fits(const fa8_kernel_desc *d, const fa8_problem *p) {
  const int same = p->hdim_qk == p->hdim_v;
  switch (d->layout) {
    case FA8_LAYOUT_MHA: return same && p->heads == p->kv_heads;
    case FA8_LAYOUT_MQA: return same && p->kv_heads == 1;
    case FA8_LAYOUT_GQA: return same;
    case FA8_LAYOUT_MLA: return !same;
  }
  return 0;
}

/* A scale must be constant along a reduction that crosses rows: rows % tile == 0, or one block only. */
static int rows_fit(int32_t rows, int32_t tile, int32_t seqlen) {
  return rows == 0 || rows >= seqlen || rows % tile == 0;
}

/* rows[] = scale_rows of q, k, v, dO */
static const char *misfit(const fa8_kernel_desc *d, const fa8_problem *p, fa8_dir dir, const int32_t rows[4]) {
  if (d->backend != p->backend || d->dir != dir) return "direction/backend";
  if (d->fmt != p->fmt_qkv) return "fmt_qkv";
  if ((dir == FA8_DIR_DELTA || dir == FA8_DIR_BWD) && d->fmt_grad != p->fmt_grad) return "fmt_grad";
  if (d->hdim_qk != p->hdim_qk || d->hdim_v != p->hdim_v) return "head dims";
  if (d->causal != (p->causal != 0)) return "causal";
  if (!layout_fits(d, p)) return "layout";
  if (dir == FA8_DIR_FWD && (d->variant == FA8_FWD_SPLIT) != (p->delta == FA8_DELTA_SPLIT)) return "forward variant";
  if (dir == FA8_DIR_DELTA && d->delta != p->delta) return "delta mode";
  if (d->scale == FA8_SCALE_TENSOR && (rows[0] || rows[1] || rows[2] || rows[3])) return "per-tensor scales";
  if (dir == FA8_DIR_FWD && !rows_fit(rows[2], d->block_n, p->seqlen_k)) return "v.scale_rows vs BLOCK_N";
  if (dir == FA8_DIR_BWD) {
    if (!rows_fit(rows[0], d->block_m, p->seqlen_q)) return "q.scale_rows vs BLOCK_M";
    if (!rows_fit(rows[3], d->block_m, p->seqlen_q)) return "dout_q.scale_rows vs BLOCK_M";
    if (!rows_fit(rows[1], d->block_n, p->seqlen_k)) return "k.scale_rows vs BLOCK_N";
  }
  return NULL;
}

static const char *dir_name(fa8_dir d) {
  return d == FA8_DIR_FWD ? "forward" : d == FA8_DIR_DELTA ? "delta" : d == FA8_DIR_BWD ? "backward" : "quantize";
}

static fa8_status no_fit(const fa8_problem *p, fa8_dir dir, const int32_t rows[4]) {
  /* name the best near miss: an instance with the same geometry that failed on something else */
  const char *why = NULL, *near = NULL;
  for (size_t i = 0; i < fa8_instance_count; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    if (d->backend != p->backend || d->dir != dir || d->hdim_qk != p->hdim_qk || d->hdim_v != p->hdim_v) continue;
    const char *m = misfit(d, p, dir, rows);
    if (m && !why) { why = m; near = d->name; }
  }
  if (why)
    return fa8__fail(FA8_ERR_UNSUPPORTED, "no %s instance fits (hdim %dx%d, heads %d/%d, %s, fmt %s/%s, delta %d): "
                     "nearest %s differs in %s", dir_name(dir), p->hdim_qk, p->hdim_v, p->heads, p->kv_heads,
                     p->causal ? "causal" : "full", fa8_fmt_name(p->fmt_qkv), fa8_fmt_name(p->fmt_grad), (int)p->delta,
                     near, why);
  return fa8__fail(FA8_ERR_UNSUPPORTED, "no %s instance for head dims %dx%d on this backend in this build "
                   "(configure with -Dhdim=%dx%d, or embed a bundle from fa8 gen --hdim %dx%d)", dir_name(dir), p->hdim_qk, p->hdim_v, p->hdim_qk, p->hdim_v, p->hdim_qk, p->hdim_v);
}

static const fa8_kernel_desc *first_fit(const fa8_problem *p, fa8_dir dir, const int32_t rows[4]) {
  for (size_t i = 0; i < fa8_instance_count; ++i)
    if (!misfit(&fa8_instances[i], p, dir, rows)) return &fa8_instances[i];
  return NULL;
}

static fa8_status forced(const fa8_problem *p, const int32_t rows[4], fa8__plan *out) {
  for (size_t i = 0; i < fa8_bundle_count; ++i) {
    const fa8_bundle_desc *b = &fa8_bundles[i];
    if (strcmp(b->name, p->instance) != 0) continue;
    const fa8_kernel_desc *parts[3] = { b->fwd, b->delta, b->bwd };
    const fa8_dir dirs[3] = { FA8_DIR_FWD, FA8_DIR_DELTA, FA8_DIR_BWD };
    for (int k = 0; k < 3; ++k) {
      const char *m = misfit(parts[k], p, dirs[k], rows);
      if (m) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' does not fit the problem: its %s part differs in %s",
                              p->instance, dir_name(dirs[k]), m);
    }
    out->fwd = b->fwd; out->delta = b->delta; out->bwd = b->bwd;
    return FA8_OK;
  }
  for (size_t i = 0; i < fa8_instance_count; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    if (strcmp(d->name, p->instance) != 0) continue;
    if (d->dir != FA8_DIR_FWD)
      return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' is a %s instance: force a bundle (fa8_bundle_...) or a forward",
                       p->instance, dir_name(d->dir));
    const char *m = misfit(d, p, FA8_DIR_FWD, rows);
    if (m) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' does not fit the problem: it differs in %s", p->instance, m);
    out->fwd = d;
    return FA8_OK;
  }
  return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' is not in this build (fa8 list shows what is)", p->instance);
}

fa8_status fa8__plan_attention(const fa8_problem *p, const int32_t rows[4], fa8__plan *out) {
  memset(out, 0, sizeof *out);
  if (p->instance) {
    FA8_TRY(forced(p, rows, out));
    if (out->bwd) return FA8_OK;
  }
  if (!out->fwd) out->fwd = first_fit(p, FA8_DIR_FWD, rows);
  out->bwd = first_fit(p, FA8_DIR_BWD, rows);
  /* the delta prep comes from the bundle of the chosen backward, so their conventions match */
  for (size_t i = 0; out->bwd && i < fa8_bundle_count; ++i)
    if (fa8_bundles[i].bwd == out->bwd && fa8_bundles[i].mode == p->delta) { out->delta = fa8_bundles[i].delta; break; }
  return FA8_OK;
}

fa8_status fa8__require(const fa8_problem *p, const int32_t rows[4], fa8_dir dir, const fa8_kernel_desc *d) {
  return d ? FA8_OK : no_fit(p, dir, rows);
}

const fa8_kernel_desc *fa8__find_quant(fa8_backend be, fa8_fmt fmt, int32_t hdim, fa8_intype in, fa8_status *st) {
  for (size_t i = 0; i < fa8_instance_count; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    if (d->backend == be && d->dir == FA8_DIR_QUANT && d->fmt == fmt && d->hdim_qk == hdim && d->intype == in) return d;
  }
  *st = fa8__fail(FA8_ERR_UNSUPPORTED, "no quantize instance for %s, head dim %d, %s input on this backend in this build",
                  fa8_fmt_name(fmt) ? fa8_fmt_name(fmt) : "invalid format", hdim, in == FA8_IN_BF16 ? "bf16" : "f32");
  return NULL;
}
