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

/* Why an instance does not fit, or NULL. `rank` counts the checks it passed (a higher rank is a nearer
 * miss); `why` gets a message with the values for the run-time scale rules. rows[] = scale_rows of q, k, v, dO. */
static const char *misfit_r(const fa8_kernel_desc *d, const fa8_problem *p, fa8_dir dir, const fa8__fit *fit, int *rank,
                            char *why, size_t n) {
  int r = 0;
  const int32_t *rows = fit->rows;
#define CHECK(cond, reason) do { if (!(cond)) { if (rank) *rank = r; return reason; } ++r; } while (0)
  CHECK(d->backend == p->backend && d->dir == dir, "direction/backend");
  if (d->backend != FA8_BACKEND_CPU) {   /* GPU code runs on the architecture it was built for only */
    const char *arch = fa8__gpu_arch(d->backend);
    CHECK(arch && strcmp(arch, d->target) == 0, "target architecture");
  }
  CHECK(d->hdim_qk == p->hdim_qk && d->hdim_v == p->hdim_v, "head dims");
  CHECK(d->fmt == p->fmt_qkv, "fmt_qkv");
  CHECK(!((dir == FA8_DIR_DELTA || dir == FA8_DIR_BWD) && d->fmt_grad != p->fmt_grad), "fmt_grad");
  CHECK(d->causal == (p->causal != 0), "causal");
  CHECK(layout_fits(d, p), "layout");
  CHECK(!(dir == FA8_DIR_FWD && (d->variant == FA8_FWD_SPLIT) != (p->delta == FA8_DELTA_SPLIT)), "forward variant");
  CHECK(!(dir == FA8_DIR_DELTA && d->delta != p->delta), "delta mode");
  CHECK(!(d->scale == FA8_SCALE_TENSOR && (rows[0] || rows[1] || rows[2] || rows[3])), "per-tensor scales");
  static const char *names[4] = { "q", "k", "v", "dout_q" };
  /* the scales a direction reduces across rows: the forward's V over keys; the backward's Q and dO over
   * queries (dK, dV) and K over keys (dQ). Indices into rows[]: q 0, k 1, v 2, dout_q 3. */
  /* the wgmma forward also takes K's scale once per key tile (one scalar per row and tile in the logits) */
  const int wgmma = d->pipeline == FA8_PIPE_WGMMA;
  static const int fwd_t[] = { 2, 1 }, bwd_t[] = { 0, 3, 1 };
  const int *ts = dir == FA8_DIR_FWD ? fwd_t : bwd_t;
  const int count = dir == FA8_DIR_FWD ? (wgmma ? 2 : 1) : dir == FA8_DIR_BWD ? 3 : 0;
  for (int i = 0; i < count; ++i) {
    const int t = ts[i];
    const int on_keys = t == 1 || t == 2;           /* K and V rows are keys: BLOCK_N tiles them */
    const int32_t tile = on_keys ? d->block_n : d->block_m;
    const int32_t seq = on_keys ? p->seqlen_k : p->seqlen_q;
    if (!rows_fit(rows[t], tile, seq)) {
      if (why) snprintf(why, n, "%s.scale_rows (%d) is not a multiple of its BLOCK_%s (%d) and does not cover the sequence (%d)",
                        names[t], rows[t], on_keys ? "N" : "M", tile, seq);
      if (rank) *rank = r;
      return "scale rows";
    }
  }
  /* TMA reads the operands as tensor maps: 16-byte aligned bases and byte strides */
  CHECK(!wgmma || fit->tma_ready, "TMA alignment (16-byte aligned FP8 bases and strides, transposed copies present)");
#undef CHECK
  return NULL;
}

static const char *misfit(const fa8_kernel_desc *d, const fa8_problem *p, fa8_dir dir, const fa8__fit *fit) {
  return misfit_r(d, p, dir, fit, NULL, NULL, 0);
}

const char *fa8__misfit(const fa8_kernel_desc *d, const fa8_problem *p, fa8_dir dir, const fa8__fit *fit) {
  return misfit(d, p, dir, fit);
}

static const char *dir_name(fa8_dir d) {
  return d == FA8_DIR_FWD ? "forward" : d == FA8_DIR_DELTA ? "delta" : d == FA8_DIR_BWD ? "backward" : "quantize";
}

static fa8_status no_fit(const fa8_problem *p, fa8_dir dir, const fa8__fit *fit) {
  /* name the nearest miss: the instance that passed the most checks */
  const char *why = NULL, *near = NULL;
  char detail[256] = "", buf[256];
  int best = -1;
  for (size_t i = 0; i < fa8_instance_count; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    int rank = 0;
    buf[0] = '\0';
    const char *m = misfit_r(d, p, dir, fit, &rank, buf, sizeof buf);
    if (m && rank > best && rank >= 2) { best = rank; why = m; near = d->name; snprintf(detail, sizeof detail, "%s", buf); }
  }
  if (why && detail[0])
    return fa8__fail(FA8_ERR_UNSUPPORTED, "no %s instance fits: %s (nearest: %s)", dir_name(dir), detail, near);
  if (why)
    return fa8__fail(FA8_ERR_UNSUPPORTED, "no %s instance fits (hdim %dx%d, heads %d/%d, %s, fmt %s/%s, delta %d): "
                     "nearest %s differs in %s", dir_name(dir), p->hdim_qk, p->hdim_v, p->heads, p->kv_heads,
                     p->causal ? "causal" : "full", fa8_fmt_name(p->fmt_qkv), fa8_fmt_name(p->fmt_grad), (int)p->delta,
                     near, why);
  return fa8__fail(FA8_ERR_UNSUPPORTED, "no %s instance for head dims %dx%d on this backend in this build "
                   "(configure with -Dhdim=%dx%d, or embed a bundle from fa8 gen --hdim %dx%d)", dir_name(dir), p->hdim_qk,
                   p->hdim_v, p->hdim_qk, p->hdim_v, p->hdim_qk, p->hdim_v);
}

static const fa8_kernel_desc *first_fit(const fa8_problem *p, fa8_dir dir, const fa8__fit *fit) {
  for (size_t i = 0; i < fa8_instance_count; ++i)
    if (!misfit(&fa8_instances[i], p, dir, fit)) return &fa8_instances[i];
  return NULL;
}

static fa8_status forced(const fa8_problem *p, const fa8__fit *fit, fa8__plan *out) {
  for (size_t i = 0; i < fa8_bundle_count; ++i) {
    const fa8_bundle_desc *b = &fa8_bundles[i];
    if (strcmp(b->name, p->instance) != 0) continue;
    const fa8_kernel_desc *parts[3] = { b->fwd, b->delta, b->bwd };
    const fa8_dir dirs[3] = { FA8_DIR_FWD, FA8_DIR_DELTA, FA8_DIR_BWD };
    for (int k = 0; k < 3; ++k) {
      char detail[256] = "";
      const char *m = misfit_r(parts[k], p, dirs[k], fit, NULL, detail, sizeof detail);
      if (m) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' does not fit the problem: its %s part differs in %s%s%s",
                              p->instance, dir_name(dirs[k]), m, detail[0] ? ": " : "", detail);
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
    const char *m = misfit(d, p, FA8_DIR_FWD, fit);
    if (m) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' does not fit the problem: it differs in %s", p->instance, m);
    out->fwd = d;
    return FA8_OK;
  }
  return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "instance '%s' is not in this build (fa8 list shows what is)", p->instance);
}

fa8_status fa8__plan_attention(const fa8_problem *p, const fa8__fit *fit, fa8__plan *out) {
  memset(out, 0, sizeof *out);
  if (p->instance) {
    FA8_TRY(forced(p, fit, out));
    snprintf(out->fwd_why, sizeof out->fwd_why, "forced: problem.instance = %s", p->instance);
    snprintf(out->bwd_why, sizeof out->bwd_why, "forced: problem.instance = %s", p->instance);
    if (out->bwd) return FA8_OK;
    snprintf(out->bwd_why, sizeof out->bwd_why, "heuristic");
  }
  fa8_status st = FA8_OK;
  if (!out->fwd) {
    out->fwd = fa8__tuned_pick(p, fit, FA8_DIR_FWD, out->fwd_why, sizeof out->fwd_why, &st);
    if (st != FA8_OK) return st;
    if (!out->fwd) out->fwd = first_fit(p, FA8_DIR_FWD, fit);
  }
  out->bwd = fa8__tuned_pick(p, fit, FA8_DIR_BWD, out->bwd_why, sizeof out->bwd_why, &st);
  if (st != FA8_OK) return st;
  if (!out->bwd) out->bwd = first_fit(p, FA8_DIR_BWD, fit);
  /* the delta prep comes from the bundle of the chosen backward, so their conventions match */
  for (size_t i = 0; out->bwd && i < fa8_bundle_count; ++i)
    if (fa8_bundles[i].bwd == out->bwd && fa8_bundles[i].mode == p->delta) { out->delta = fa8_bundles[i].delta; break; }
  return FA8_OK;
}

fa8_status fa8__require(const fa8_problem *p, const fa8__fit *fit, fa8_dir dir, const fa8_kernel_desc *d) {
  return d ? FA8_OK : no_fit(p, dir, fit);
}

const fa8_kernel_desc *fa8__find_quant(fa8_backend be, fa8_fmt fmt, int32_t hdim, fa8_intype in, fa8_status *st) {
  const char *arch = be == FA8_BACKEND_CPU ? NULL : fa8__gpu_arch(be);
  for (size_t i = 0; i < fa8_instance_count; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    if (d->backend == be && d->dir == FA8_DIR_QUANT && d->fmt == fmt && d->hdim_qk == hdim && d->intype == in &&
        (!arch || strcmp(arch, d->target) == 0))
      return d;
  }
  *st = fa8__fail(FA8_ERR_UNSUPPORTED, "no quantize instance for %s, head dim %d, %s input on this backend in this build",
                  fa8_fmt_name(fmt) ? fa8_fmt_name(fmt) : "invalid format", hdim, in == FA8_IN_BF16 ? "bf16" : "f32");
  return NULL;
}
