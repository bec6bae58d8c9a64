/* `fa8 probe`: the main job on a machine without a GPU. One realistic problem, every delta mode, the
 * same FP8 inputs: dS row-sum residuals before/after the FP8 cast and errors against an FP64 reference. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "harness.h"
#include "opts.h"

typedef struct {
  fa8_rowsum_stats s;
  double err_o, err_dq, err_dk, err_dv, seconds;
  int ran;
} mode_result;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double ratio(double a, double b) { return b > 0 ? a / b : INFINITY; }

static void print_json(const h_config *c, const h_inputs *in, const mode_result *r, double ref_s) {
  const fa8_problem *p = &c->p;
  printf("{\n  \"problem\": {\"batch\": %d, \"seqlen_q\": %d, \"seqlen_k\": %d, \"heads\": %d, \"kv_heads\": %d, "
         "\"hdim_qk\": %d, \"hdim_v\": %d, \"causal\": %s, \"fmt\": \"%s\", \"grad_fmt\": \"%s\", \"scale_rows\": %d, \"v_scale_rows\": %d, \"pow2_scales\": %s, "
         "\"seed\": %llu, \"outlier_channels\": %d, \"outlier_gain\": %g, \"logit_std\": %g, \"reference_seconds\": %.3f},\n",
         p->batch, p->seqlen_q, p->seqlen_k, p->heads, p->kv_heads, p->hdim_qk, p->hdim_v, p->causal ? "true" : "false",
         fa8_fmt_name(p->fmt_qkv), fa8_fmt_name(p->fmt_grad), c->p.scale_rows, h_v_scale_rows(c), c->pow2_scales ? "true" : "false", (unsigned long long)in->seed,
         in->outlier_channels, (double)in->outlier_gain, (double)in->logit_std, ref_s);
  printf("  \"modes\": {");
  int first = 1;
  for (int m = 0; m < 4; ++m) {
    if (!r[m].ran) continue;
    const fa8_rowsum_stats *s = &r[m].s;
    printf("%s\n    \"%s\": {\"rowsum_pre_mean\": %.6e, \"rowsum_pre_max\": %.6e, \"rowsum_post_mean\": %.6e, "
           "\"rowsum_post_max\": %.6e, \"rowsum_pre_ra_mean\": %.6e, \"rowsum_pre_ra_max\": %.6e, "
           "\"rowsum_post_ra_mean\": %.6e, \"rowsum_post_ra_max\": %.6e, \"rows\": %lld, "
           "\"err_o\": %.6e, \"err_dq\": %.6e, \"err_dk\": %.6e, \"err_dv\": %.6e, \"seconds\": %.3f}",
           first ? "" : ",", h_delta_name((fa8_delta_mode)m), s->pre_mean, s->pre_max, s->post_mean, s->post_max,
           s->pre_ra_mean, s->pre_ra_max, s->post_ra_mean, s->post_ra_max, (long long)s->rows,
           r[m].err_o, r[m].err_dq, r[m].err_dk, r[m].err_dv, r[m].seconds);
    first = 0;
  }
  printf("\n  }");
  const mode_result *st = &r[FA8_DELTA_STALE], *ma = &r[FA8_DELTA_MATCHED];
  if (st->ran && ma->ran)
    printf(",\n  \"ratios_stale_over_matched\": {\"rowsum_pre_ra_mean\": %.4g, \"rowsum_post_ra_mean\": %.4g, "
           "\"rowsum_post_mean\": %.4g, \"rowsum_post_max\": %.4g}",
           ratio(st->s.pre_ra_mean, ma->s.pre_ra_mean), ratio(st->s.post_ra_mean, ma->s.post_ra_mean),
           ratio(st->s.post_mean, ma->s.post_mean), ratio(st->s.post_max, ma->s.post_max));
  printf("\n}\n");
}

static void print_table(const h_config *c, const mode_result *r) {
  const fa8_problem *p = &c->p;
  printf("fa8 probe: B=%d H=%d Hkv=%d Sq=%d Sk=%d d=%dx%d %s, Q/K/V %s, dO/dS %s, scale rows %d (V %d), %s scales\n\n", p->batch,
         p->heads, p->kv_heads, p->seqlen_q, p->seqlen_k, p->hdim_qk, p->hdim_v, p->causal ? "causal" : "non-causal",
         fa8_fmt_name(p->fmt_qkv), fa8_fmt_name(p->fmt_grad), c->p.scale_rows, h_v_scale_rows(c), c->pow2_scales ? "power-of-two" : "amax");
  printf("dS row sums |sum_j dS_ij|, rounding-aware (/ sum_j P(|dP|+|delta|)) and by sum_j |dS|:\n");
  printf("%-8s %10s %10s %10s %10s | %10s %10s | %9s %9s %9s %9s\n", "mode", "pre-ra mean", "pre-ra max",
         "post-ra mn", "post-ra mx", "post mean", "post max", "err O", "err dQ", "err dK", "err dV");
  for (int m = 0; m < 4; ++m) {
    if (!r[m].ran) continue;
    const fa8_rowsum_stats *s = &r[m].s;
    printf("%-8s %10.3e %10.3e %10.3e %10.3e | %10.3e %10.3e | %9.3e %9.3e %9.3e %9.3e\n",
           h_delta_name((fa8_delta_mode)m), s->pre_ra_mean, s->pre_ra_max, s->post_ra_mean, s->post_ra_max,
           s->post_mean, s->post_max, r[m].err_o, r[m].err_dq, r[m].err_dk, r[m].err_dv);
  }
  const mode_result *ma = &r[FA8_DELTA_MATCHED];
  if (ma->ran) {
    printf("\nratio to matched      pre-ra mean  post-ra mean  post mean\n");
    for (int m = 0; m < 4; ++m) {
      if (!r[m].ran || m == FA8_DELTA_MATCHED) continue;
      printf("%-20s %12.3g %13.3g %10.3g\n", h_delta_name((fa8_delta_mode)m), ratio(r[m].s.pre_ra_mean, ma->s.pre_ra_mean),
             ratio(r[m].s.post_ra_mean, ma->s.post_ra_mean), ratio(r[m].s.post_mean, ma->s.post_mean));
    }
  }
  printf("\nerrors: ||x - ref|| / ||ref|| against an FP64 reference on the same dequantized inputs (O: FP32 output)\n");
}

int cli_probe(int argc, char **argv) {
  h_config c;
  h_config_init(&c);
  c.p.batch = 1; c.p.heads = 8; c.p.kv_heads = 2; c.p.seqlen_q = c.p.seqlen_k = 1024; c.p.causal = 1;
  h_inputs in;
  h_inputs_default(&in);
  int32_t seqlen = 0, seqlen_q = 0, seqlen_k = 0, json = 0, seed = 1, quiet = 0;
  const char *hdim = "128", *fmt = "e4m3", *grad = "e4m3", *backend = "cpu", *modes = "stale,dohat,matched,split";
  const opt_spec specs[] = {
    { "backend", OPT_STR, &backend, 0, 0, "cpu (default) | cuda" },
    { "batch", OPT_INT, &c.p.batch, 1, 1 << 20, "batch size (1)" },
    { "heads", OPT_INT, &c.p.heads, 1, 1 << 16, "query heads (8)" },
    { "kv-heads", OPT_INT, &c.p.kv_heads, 1, 1 << 16, "key/value heads (2)" },
    { "seqlen", OPT_INT, &seqlen, 1, 1 << 24, "sequence length of queries and keys (1024)" },
    { "seqlen-q", OPT_INT, &seqlen_q, 1, 1 << 24, "query length (overrides --seqlen)" },
    { "seqlen-k", OPT_INT, &seqlen_k, 1, 1 << 24, "key length (overrides --seqlen)" },
    { "hdim", OPT_STR, &hdim, 0, 0, "head dim N or QKxV, e.g. 192x128 (128)" },
    { "causal", OPT_FLAG, &c.p.causal, 0, 0, "causal mask, bottom-right aligned (on; --no-causal)" },
    { "scale", OPT_FLOAT, &c.p.softmax_scale, 0, 0, "softmax scale (1/sqrt(hdim_qk))" },
    { "fmt", OPT_STR, &fmt, 0, 0, "Q/K/V FP8 format (e4m3)" },
    { "grad-fmt", OPT_STR, &grad, 0, 0, "dO/dS FP8 format (e4m3 | e5m2)" },
    { "scale-rows", OPT_INT, &c.p.scale_rows, 0, 1 << 24, "rows per quantization scale block, 0 = per-tensor (128)" },
    { "v-scale-rows", OPT_INT, &c.v_scale_rows, 0, 1 << 24, "V's own rows per scale block, e.g. >= Sk: one per head (0: --scale-rows)" },
    { "pow2-scales", OPT_FLAG, &c.pow2_scales, 0, 0, "power-of-two scales (on); --no-pow2-scales: amax / fmt max" },
    { "modes", OPT_STR, &modes, 0, 0, "delta modes to run (stale,dohat,matched,split)" },
    { "instance", OPT_STR, &c.p.instance, 0, 0, "force a bundle by name (fa8 list --bundles)" },
    { "threads", OPT_INT, &c.p.num_threads, 0, 4096, "CPU threads, 0 = all cores" },
    { "seed", OPT_INT, &seed, 0, INT32_MAX, "input seed (1)" },
    { "outlier-channels", OPT_INT, &in.outlier_channels, 0, 1024, "high-gain channels in Q/K/V/dO (4)" },
    { "outlier-gain", OPT_FLOAT, &in.outlier_gain, 0, 0, "gain of those channels (6)" },
    { "logit-std", OPT_FLOAT, &in.logit_std, 0, 0, "std of the logits c*q.k (3)" },
    { "json", OPT_FLAG, &json, 0, 0, "print JSON instead of a table" },
    { "quiet", OPT_FLAG, &quiet, 0, 0, "no progress on stderr" },
  };
  const int pr = opts_parse("probe", argc, argv, specs, (int)(sizeof specs / sizeof specs[0]));
  if (pr) return pr > 0 ? 0 : 2;
  if (seqlen) c.p.seqlen_q = c.p.seqlen_k = seqlen;
  if (seqlen_q) c.p.seqlen_q = seqlen_q;
  if (seqlen_k) c.p.seqlen_k = seqlen_k;
  in.seed = (uint64_t)seed;
  if (opts_hdim("probe", hdim, &c.p.hdim_qk, &c.p.hdim_v) || opts_fmt("probe", "fmt", fmt, &c.p.fmt_qkv) ||
      opts_fmt("probe", "grad-fmt", grad, &c.p.fmt_grad) || opts_backend("probe", backend, &c.p.backend))
    return 2;
  if (!(in.outlier_gain > 0) || !(in.logit_std > 0)) {
    fprintf(stderr, "fa8 probe: --outlier-gain and --logit-std must be > 0\n");
    return 2;
  }
  int want[4] = { 0, 0, 0, 0 };
  char buf[256];
  snprintf(buf, sizeof buf, "%s", modes);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    fa8_delta_mode m;
    if (h_delta_from_name(tok, &m)) { fprintf(stderr, "fa8 probe: --modes '%s' is not one of stale, dohat, matched, split\n", tok); return 2; }
    want[m] = 1;
  }
  fa8_dispatch_names dn;
  fa8_status st = fa8_dispatch(&c.p, &dn);
  if (st != FA8_OK) { fprintf(stderr, "fa8 probe: %s\n", fa8_last_error()); return 2; }

  h_data d;
  if (h_alloc(&d, &c)) { fprintf(stderr, "fa8 probe: out of memory for this problem\n"); return 1; }
  const double t0 = now();
  h_fill(&d, &in);
  if ((st = h_quantize(&d)) != FA8_OK) { fprintf(stderr, "fa8 probe: quantize: %s\n", fa8_last_error()); h_free(&d); return 1; }
  if (!quiet) fprintf(stderr, "[probe] FP64 reference ...");
  h_ref ref;
  if (h_reference(&d, 0, &ref)) { fprintf(stderr, "\nfa8 probe: reference failed (out of memory?)\n"); h_free(&d); return 1; }
  const double ref_s = now() - t0;
  if (!quiet) fprintf(stderr, " %.1f s\n", ref_s);
  mode_result r[4];
  memset(r, 0, sizeof r);
  for (int m = 0; m < 4; ++m) {
    if (!want[m]) continue;
    if (!quiet) fprintf(stderr, "[probe] %-7s forward + backward ...", h_delta_name((fa8_delta_mode)m));
    const double t1 = now();
    if ((st = h_run(&d, (fa8_delta_mode)m)) != FA8_OK) {
      fprintf(stderr, "\nfa8 probe: %s: %s: %s\n", h_delta_name((fa8_delta_mode)m), fa8_status_string(st), fa8_last_error());
      h_ref_free(&ref); h_free(&d);
      return 1;
    }
    r[m].seconds = now() - t1;
    r[m].s = d.stats;
    r[m].err_o = h_rel_err_f32(d.o32, ref.o, d.no);
    r[m].err_dq = h_rel_err_f32(d.dq, ref.dq, d.nq);
    r[m].err_dk = h_rel_err_f32(d.dk, ref.dk, d.nk);
    r[m].err_dv = h_rel_err_f32(d.dv, ref.dv, d.nv);
    r[m].ran = 1;
    if (!quiet) fprintf(stderr, " %.1f s\n", r[m].seconds);
  }
  if (json) print_json(&c, &in, r, ref_s);
  else print_table(&c, r);
  h_ref_free(&ref);
  h_free(&d);
  return 0;
}
