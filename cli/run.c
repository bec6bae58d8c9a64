/* `fa8 run --in DIR --out DIR`: FP8 attention forward + backward on user tensors from .npy files. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "harness.h"
#include "npy.h"
#include "opts.h"

static int load(const char *dir, const char *name, npy_array *a) {
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (npy_read(path, a, err, sizeof err)) { fprintf(stderr, "fa8 run: %s\n", err); return -1; }
  if (a->ndim != 4) {
    fprintf(stderr, "fa8 run: %s: expected 4 dimensions [B, S, heads, D], found %d\n", path, a->ndim);
    return -1;
  }
  for (int i = 0; i < 4; ++i)
    if (a->shape[i] < 1 || a->shape[i] > INT32_MAX) {
      fprintf(stderr, "fa8 run: %s: dimension %d is %" PRId64 " (must be in [1, 2^31))\n", path, i, a->shape[i]);
      return -1;
    }
  const int64_t bad = npy_first_nonfinite(a);
  if (bad >= 0) {
    fprintf(stderr, "fa8 run: %s: non-finite value %g at flat index %" PRId64 "\n", path, (double)a->data[bad], bad);
    return -1;
  }
  return 0;
}

/* mkdir -p: the output directory is created like `fa8 gen --out` does. */
static int make_dirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; ; ++p) {
    const char c = *p;
    if (c == '/' || c == '\0') {
      *p = '\0';
      if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fa8 run: --out %s: cannot create %s: %s\n", path, buf, strerror(errno));
        return -1;
      }
      *p = c;
      if (c == '\0') break;
    }
  }
  return 0;
}

static int same(const char *what, const char *fa, int da, int64_t a, const char *fb, int db, int64_t b) {
  if (a == b) return 0;
  fprintf(stderr, "fa8 run: %s mismatch: %s has %" PRId64 " (dim %d) but %s has %" PRId64 " (dim %d)\n", what, fa, a, da, fb, b, db);
  return -1;
}

static int save(const char *dir, const char *name, int nd, const int64_t *shape, const float *x) {
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (npy_write_f32(path, nd, shape, x, err, sizeof err)) { fprintf(stderr, "fa8 run: %s\n", err); return -1; }
  return 0;
}

int cli_run(int argc, char **argv) {
  const char *in_dir = NULL, *out_dir = NULL, *delta = "matched", *backend = "cpu", *fmt = "e4m3", *grad = "e4m3";
  h_config c;
  h_config_init(&c);
  const opt_spec specs[] = {
    { "in", OPT_STR, &in_dir, 0, 0, "directory with q.npy, k.npy, v.npy, do.npy (float32 or bf16 as <V2)" },
    { "out", OPT_STR, &out_dir, 0, 0, "directory for o, lse, delta, dq, dk, dv .npy and stats.json" },
    { "causal", OPT_FLAG, &c.p.causal, 0, 0, "causal mask, bottom-right aligned (off)" },
    { "scale", OPT_FLOAT, &c.p.softmax_scale, 0, 0, "softmax scale (1/sqrt(hdim_qk))" },
    { "delta", OPT_STR, &delta, 0, 0, "stale | dohat | matched (default) | split" },
    { "backend", OPT_STR, &backend, 0, 0, "cpu (default) | cuda" },
    { "fmt", OPT_STR, &fmt, 0, 0, "Q/K/V FP8 format (e4m3)" },
    { "grad-fmt", OPT_STR, &grad, 0, 0, "dO/dS FP8 format (e4m3 | e5m2)" },
    { "scale-rows", OPT_INT, &c.p.scale_rows, 0, 1 << 24, "rows per quantization scale block, 0 = per-tensor (128)" },
    { "pow2-scales", OPT_FLAG, &c.pow2_scales, 0, 0, "power-of-two scales (on); --no-pow2-scales: amax / fmt max" },
    { "instance", OPT_STR, &c.p.instance, 0, 0, "force a bundle by name" },
    { "threads", OPT_INT, &c.p.num_threads, 0, 4096, "CPU threads, 0 = all cores" },
  };
  const int pr = opts_parse("run", argc, argv, specs, (int)(sizeof specs / sizeof specs[0]));
  if (pr) return pr > 0 ? 0 : 2;
  if (!in_dir || !out_dir) { fprintf(stderr, "fa8 run: --in DIR and --out DIR are required\n"); return 2; }
  if (h_delta_from_name(delta, &c.p.delta)) {
    fprintf(stderr, "fa8 run: --delta '%s' is not one of stale, dohat, matched, split\n", delta);
    return 2;
  }
  if (opts_fmt("run", "fmt", fmt, &c.p.fmt_qkv) || opts_fmt("run", "grad-fmt", grad, &c.p.fmt_grad) ||
      opts_backend("run", backend, &c.p.backend))
    return 2;

  npy_array q = { 0 }, k = { 0 }, v = { 0 }, dout = { 0 };
  int rc = 2;
  if (load(in_dir, "q.npy", &q) || load(in_dir, "k.npy", &k) || load(in_dir, "v.npy", &v) || load(in_dir, "do.npy", &dout)) goto done;
  if (same("batch", "q.npy", 0, q.shape[0], "k.npy", 0, k.shape[0]) || same("batch", "q.npy", 0, q.shape[0], "v.npy", 0, v.shape[0]) ||
      same("batch", "q.npy", 0, q.shape[0], "do.npy", 0, dout.shape[0]) ||
      same("seqlen_q", "q.npy", 1, q.shape[1], "do.npy", 1, dout.shape[1]) ||
      same("seqlen_k", "k.npy", 1, k.shape[1], "v.npy", 1, v.shape[1]) ||
      same("heads", "q.npy", 2, q.shape[2], "do.npy", 2, dout.shape[2]) ||
      same("kv_heads", "k.npy", 2, k.shape[2], "v.npy", 2, v.shape[2]) ||
      same("hdim_qk", "q.npy", 3, q.shape[3], "k.npy", 3, k.shape[3]) ||
      same("hdim_v", "v.npy", 3, v.shape[3], "do.npy", 3, dout.shape[3]))
    goto done;
  if (q.shape[2] % k.shape[2]) {
    fprintf(stderr, "fa8 run: q.npy has %" PRId64 " heads, not a multiple of the %" PRId64 " kv heads of k.npy\n", q.shape[2], k.shape[2]);
    goto done;
  }
  c.p.batch = (int32_t)q.shape[0]; c.p.seqlen_q = (int32_t)q.shape[1]; c.p.heads = (int32_t)q.shape[2];
  c.p.hdim_qk = (int32_t)q.shape[3]; c.p.seqlen_k = (int32_t)k.shape[1]; c.p.kv_heads = (int32_t)k.shape[2];
  c.p.hdim_v = (int32_t)v.shape[3];
  fa8_dispatch_names dn;
  if (fa8_dispatch(&c.p, &dn) != FA8_OK) { fprintf(stderr, "fa8 run: %s\n", fa8_last_error()); goto done; }

  if (make_dirs(out_dir)) goto done;
  h_data d;
  if (h_alloc(&d, &c)) { fprintf(stderr, "fa8 run: out of memory\n"); rc = 1; goto done; }
  memcpy(d.q, q.data, sizeof(float) * (size_t)d.nq);
  memcpy(d.k, k.data, sizeof(float) * (size_t)d.nk);
  memcpy(d.v, v.data, sizeof(float) * (size_t)d.nv);
  memcpy(d.dout, dout.data, sizeof(float) * (size_t)d.no);
  fa8_status st = h_quantize(&d);
  if (st == FA8_OK) st = h_run(&d, c.p.delta);
  if (st != FA8_OK) { fprintf(stderr, "fa8 run: %s: %s\n", fa8_status_string(st), fa8_last_error()); h_free(&d); rc = 1; goto done; }
  const int64_t so[4] = { q.shape[0], q.shape[1], q.shape[2], v.shape[3] };
  const int64_t srow[3] = { q.shape[0], q.shape[2], q.shape[1] };
  rc = save(out_dir, "o.npy", 4, so, d.o32) || save(out_dir, "lse.npy", 3, srow, d.lse) ||
       save(out_dir, "delta.npy", 3, srow, d.delta) || save(out_dir, "dq.npy", 4, q.shape, d.dq) ||
       save(out_dir, "dk.npy", 4, k.shape, d.dk) || save(out_dir, "dv.npy", 4, (const int64_t[4]){ k.shape[0], k.shape[1], k.shape[2], v.shape[3] }, d.dv);
  if (!rc) {
    char path[4096];
    snprintf(path, sizeof path, "%s/stats.json", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "fa8 run: cannot write %s\n", path); rc = 1; }
    else {
      const fa8_rowsum_stats *s = &d.stats;
      fprintf(f, "{\"delta\": \"%s\", \"fwd\": \"%s\", \"delta_instance\": \"%s\", \"bwd\": \"%s\", \"pow2_scales\": %s, \"rows\": %lld,\n"
                 " \"rowsum_pre_mean\": %.6e, \"rowsum_pre_max\": %.6e, \"rowsum_post_mean\": %.6e, \"rowsum_post_max\": %.6e,\n"
                 " \"rowsum_pre_ra_mean\": %.6e, \"rowsum_pre_ra_max\": %.6e, \"rowsum_post_ra_mean\": %.6e, \"rowsum_post_ra_max\": %.6e}\n",
              h_delta_name(c.p.delta), dn.fwd ? dn.fwd : "", dn.delta ? dn.delta : "", dn.bwd ? dn.bwd : "", c.pow2_scales ? "true" : "false", (long long)s->rows,
              s->pre_mean, s->pre_max, s->post_mean, s->post_max, s->pre_ra_mean, s->pre_ra_max, s->post_ra_mean, s->post_ra_max);
      rc = fclose(f) != 0;
    }
  } else rc = 1;
  h_free(&d);
done:
  npy_free(&q); npy_free(&k); npy_free(&v); npy_free(&dout);
  return rc;
}
