/* `fa8 bench`: forward and backward times of one problem on a GPU backend, per delta mode, as JSON lines.
 * CUDA events around each call, warm-up, median of repetitions. FLOPs: forward 2*B*H*Sq*Sk*(dqk + dv)
 * (= 4*B*H*S^2*d for dqk = dv), backward 2.5x that, both halved for causal; the backward time of `matched`
 * includes its delta-prep pass. The modes are timed in interleaved rounds (each round runs every mode's forward,
 * then its backward, once), so that the GPU's clock and power drift during a call falls on every mode alike:
 * timed one mode after another, the same forward kernel measured 3-6 % slower as the second mode than as the
 * first on the H200 (bench/NOTES.md, 2026-12-01), which biased every Delta-Matching cost line.
 * The forwards are then also timed alone ("fwd_alone_ms"): warm-up, then back-to-back forwards with no backward
 * between them, each between its own events, as bench/run.py times torch SDPA and cuDNN's FP8 SDPA, so a forward
 * can be set beside theirs under one protocol. These run in rounds too (each round every mode's forward once):
 * timed one mode after another, the same d256 kernel read 4.43, then 4.96 ms as the second mode at the power cap
 * (bench/results/2026-12-04-h200-unitskip-final). The rounds' forward ("fwd_ms") follows a backward each time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "gpu_mem.h"
#include "harness.h"
#include "opts.h"

enum { MAX_MODES = 8, WARMUP_ROUNDS = 3 };
typedef struct { fa8_problem p; fa8_fwd_tensors f; fa8_bwd_tensors b; void *ws; size_t wsb; } call;
static int fwd(void *c) { call *k = c; return fa8_forward(&k->p, &k->f, NULL, 0, NULL) != FA8_OK; }
static int bwd(void *c) { call *k = c; return fa8_backward(&k->p, &k->b, k->ws, k->wsb, NULL) != FA8_OK; }
static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* WARMUP_ROUNDS, then `reps` timed rounds; each round runs every mode's forward once, with_bwd: each followed by
 * its backward. Mode i's round-r forward goes to tf[2 i reps + r] (with_bwd: its backward to tb[2 i reps + r];
 * without, the forwards alone to tf[i reps + r]). 0 ok, 1 after a failed call (named on stderr). */
static int time_rounds(call *k, const char **names, int n, int reps, int with_bwd, double *tf, double *tb) {
  const int stride = with_bwd ? 2 : 1;
  for (int r = -WARMUP_ROUNDS; r < reps; ++r)
    for (int i = 0; i < n; ++i) {
      double f, b;
      if (h_gpu_times_ms(fwd, &k[i], 0, 1, &f) || (with_bwd && h_gpu_times_ms(bwd, &k[i], 0, 1, &b))) {
        fprintf(stderr, "fa8 bench: %s%s: %s\n", names[i], with_bwd ? "" : " alone", fa8_last_error());
        return 1;
      }
      if (r < 0) continue;
      tf[stride * i * reps + r] = f;
      if (with_bwd) tb[stride * i * reps + r] = b;
    }
  return 0;
}
static double median_ms(double *x, int n) {   /* sorts x */
  qsort(x, (size_t)n, sizeof *x, cmp_double);
  return x[n / 2];
}

int cli_bench(int argc, char **argv) {
  h_config c;
  h_config_init(&c);
  c.p.backend = FA8_BACKEND_CUDA;
  c.p.batch = 1; c.p.heads = 64; c.p.kv_heads = 64; c.p.seqlen_q = c.p.seqlen_k = 4096;
  int32_t seqlen = 0, reps = 20;
  const char *hdim = "128", *backend = "cuda", *modes = "stale,dohat,matched,split";
  const opt_spec specs[] = {
    { "backend", OPT_STR, &backend, 0, 0, "cuda (default) | cpu" },
    { "batch", OPT_INT, &c.p.batch, 1, 1 << 20, "batch (1)" },
    { "heads", OPT_INT, &c.p.heads, 1, 1 << 16, "query heads (64)" },
    { "kv-heads", OPT_INT, &c.p.kv_heads, 1, 1 << 16, "key/value heads (64)" },
    { "seqlen", OPT_INT, &seqlen, 1, 1 << 24, "sequence length (4096)" },
    { "hdim", OPT_STR, &hdim, 0, 0, "head dim N or QKxV (128)" },
    { "causal", OPT_FLAG, &c.p.causal, 0, 0, "causal (off)" },
    { "modes", OPT_STR, &modes, 0, 0, "delta modes (all)" },
    { "reps", OPT_INT, &reps, 1, 10000, "timed repetitions (20)" },
    { "scale-rows", OPT_INT, &c.p.scale_rows, 0, 1 << 24, "quantizer scale block rows (128; 0: per-tensor scales)" },
    { "v-scale-rows", OPT_INT, &c.v_scale_rows, 0, 1 << 24, "V's own scale block rows, e.g. >= S: one per head (0: --scale-rows)" },
    { "pow2-scales", OPT_FLAG, &c.pow2_scales, 0, 0, "power-of-two scales (on); --no-pow2-scales: amax / fmt max" },
  };
  const int pr = opts_parse("bench", argc, argv, specs, (int)(sizeof specs / sizeof specs[0]));
  if (pr) return pr > 0 ? 0 : 2;
  if (seqlen) c.p.seqlen_q = c.p.seqlen_k = seqlen;
  if (opts_hdim("bench", hdim, &c.p.hdim_qk, &c.p.hdim_v) || opts_backend("bench", backend, &c.p.backend)) return 2;
  if (c.p.backend == FA8_BACKEND_CPU) { fprintf(stderr, "fa8 bench: times GPU kernels; use fa8 probe on the CPU\n"); return 2; }
  {   /* every mode name is checked before any GPU work */
    char chk[128];
    snprintf(chk, sizeof chk, "%s", modes);
    fa8_delta_mode m;
    int n = 0;
    for (char *tok = strtok(chk, ","); tok; tok = strtok(NULL, ","), ++n)
      if (h_delta_from_name(tok, &m)) { fprintf(stderr, "fa8 bench: --modes '%s' is not a delta mode\n", tok); return 2; }
    if (n == 0 || n > MAX_MODES) {
      fprintf(stderr, "fa8 bench: --modes '%s' must name 1 to %d delta modes\n", modes, MAX_MODES);
      return 2;
    }
  }
  if (h_gpu_count() == 0) { fprintf(stderr, "fa8 bench: no CUDA device\n"); return 1; }
  h_data d;
  if (h_alloc(&d, &c)) { fprintf(stderr, "fa8 bench: out of memory\n"); return 1; }
  h_inputs in;
  h_inputs_default(&in);
  h_fill(&d, &in);
  if (h_quantize(&d) != FA8_OK) { fprintf(stderr, "fa8 bench: quantize: %s\n", fa8_last_error()); h_free(&d); return 1; }
  const double flops = 2.0 * c.p.batch * c.p.heads * (double)c.p.seqlen_q * c.p.seqlen_k * (c.p.hdim_qk + c.p.hdim_v) *
                       (c.p.causal ? 0.5 : 1.0);
  char buf[128];
  snprintf(buf, sizeof buf, "%s", modes);
  const char *names[MAX_MODES];
  call k[MAX_MODES];
  fa8_dispatch_names dn[MAX_MODES];
  int n = 0, rc = 0;
  for (char *tok = strtok(buf, ","); tok && !rc; tok = strtok(NULL, ","), ++n) {
    fa8_delta_mode m;
    h_delta_from_name(tok, &m);   /* checked above */
    names[n] = tok;
    h_timed_views(&d, m, &k[n].p, &k[n].f, &k[n].b);
    k[n].p.collect_stats = 0;
    k[n].ws = NULL; k[n].wsb = 0;
    if (fa8_dispatch(&k[n].p, &dn[n]) != FA8_OK) { fprintf(stderr, "fa8 bench: %s: %s\n", tok, fa8_last_error()); rc = 1; }
  }
  /* t[(2 n + i) * reps + r]: mode i's forward alone in round r, after the forward-and-backward rounds */
  double *t = rc ? NULL : malloc(sizeof(double) * 3 * (size_t)n * (size_t)reps);
  if (!rc && !t) { fprintf(stderr, "fa8 bench: out of memory\n"); rc = 1; }
  /* t[(2 i + dir) * reps + r]: mode i, forward (dir 0) or backward (1), round r; a backward follows its own forward */
  if (!rc) rc = time_rounds(k, names, n, reps, 1, t, t + reps);
  if (!rc) rc = time_rounds(k, names, n, reps, 0, t + 2 * (size_t)n * reps, NULL);
  for (int i = 0; i < n && !rc; ++i) {
    const double tf = median_ms(&t[(2 * i) * reps], reps), tb = median_ms(&t[(2 * i + 1) * reps], reps);
    const double ta = median_ms(&t[(2 * n + i) * reps], reps);   /* the forwards alone */
    printf("{\"system\": \"fa8-%s\", \"B\": %d, \"H\": %d, \"Hkv\": %d, \"S\": %d, \"dqk\": %d, \"dv\": %d, \"causal\": %s, "
           "\"scale_rows\": %d, \"v_scale_rows\": %d, \"pow2_scales\": %s, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_tflops\": %.2f, \"bwd_tflops\": %.2f, "
           "\"fwd_alone_ms\": %.4f, \"fwd_alone_tflops\": %.2f, \"fwd\": \"%s\", \"bwd\": \"%s\"}\n",
           names[i], c.p.batch, c.p.heads, c.p.kv_heads, c.p.seqlen_q, c.p.hdim_qk, c.p.hdim_v, c.p.causal ? "true" : "false",
           c.p.scale_rows, h_v_scale_rows(&c), c.pow2_scales ? "true" : "false", tf, tb, flops / tf * 1e-9, 2.5 * flops / tb * 1e-9, ta, flops / ta * 1e-9, dn[i].fwd, dn[i].bwd);
  }
  fflush(stdout);
  free(t);
  h_free(&d);
  return rc;
}
