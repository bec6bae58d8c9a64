/* `fa8 tune`: the autotuner (docs/tuning.md). For one device it measures every candidate instance of this
 * build (configure with -Dprofile=tuning for the full candidate set; the constraints already pruned it) per
 * head geometry, causal flag, sequence length and direction, and writes the tuned table the build compiles
 * in (a CSV under tune/tables) plus a gain report against the heuristic choice and against the choice of the
 * tables the build already consults (built in, overlay): what re-tuning changes for this problem.
 *   * every candidate is first run on a small check problem with sequence tails and compared with the FP64
 *     reference: one that fails or is less accurate than the heuristic's instance (1.5x + 2e-3) is never timed;
 *   * launch failures cost infinity, never a crash;
 *   * timing: the candidates of one problem that passed their checks are timed together, in rounds (warm-up
 *     rounds, then every round runs each candidate once, each run timed: device events on a GPU, the wall clock
 *     on the CPU), median / p20 / p80 per candidate. Timed one after another, each straight after its check on
 *     an idle GPU, every candidate was first-measured on a cool GPU (fa8 bench saw the same kernel 5-6 % slower
 *     when it was timed second, bench/NOTES.md); in rounds, drift and heat fall on all of them alike. GPU inputs
 *     rotate over enough copies to exceed the L2 cache; the runtime zeroes the gradient accumulators on every
 *     call, so repetitions are independent;
 *   * an append-only cache keyed by (target, SM count, generator hash, candidate, problem) makes a restarted
 *     or extended sweep re-measure nothing it has. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "cli.h"
#include "gpu_mem.h"
#include "harness.h"
#include "opts.h"

#define MAXC 128
#define L2_BYTES (50.0 * 1024 * 1024)   /* H200: 50 MB; larger than every L2 fa8 targets today */

typedef struct { char key[512], status[256]; double med, p20, p80, err; } centry;
typedef struct { centry *e; size_t n, cap; FILE *fh; } cache_t;

static int mkdirs(const char *path) {   /* the parent folders of a file path */
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *s = buf + 1; *s; ++s)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      *s = '/';
    }
  return 0;
}

static void cache_add(cache_t *c, const centry *e) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    centry *g = realloc(c->e, c->cap * sizeof *g);
    if (!g) return;
    c->e = g;
  }
  c->e[c->n++] = *e;
}
static const centry *cache_find(const cache_t *c, const char *key) {
  for (size_t i = c->n; i-- > 0;)
    if (!strcmp(c->e[i].key, key)) return &c->e[i];
  return NULL;
}
/* lines: key \t status \t median_us \t p20_us \t p80_us \t err; malformed lines are skipped with a warning */
static int cache_open(cache_t *c, const char *path, int fresh) {
  memset(c, 0, sizeof *c);
  if (mkdirs(path)) { fprintf(stderr, "fa8 tune: --cache %s: cannot create its folder: %s\n", path, strerror(errno)); return -1; }
  FILE *in = fresh ? NULL : fopen(path, "r");
  if (in) {
    char line[1200];
    int ln = 0;
    while (fgets(line, sizeof line, in)) {
      ++ln;
      centry e;
      memset(&e, 0, sizeof e);
      if (sscanf(line, "%511[^\t]\t%255[^\t]\t%lf\t%lf\t%lf\t%lf", e.key, e.status, &e.med, &e.p20, &e.p80, &e.err) != 6) {
        fprintf(stderr, "fa8 tune: %s:%d: not a cache line, ignored\n", path, ln);
        continue;
      }
      cache_add(c, &e);
    }
    fclose(in);
  }
  c->fh = fopen(path, fresh ? "w" : "a");
  if (!c->fh) { fprintf(stderr, "fa8 tune: --cache %s: cannot write: %s\n", path, strerror(errno)); return -1; }
  return 0;
}
static void cache_put(cache_t *c, const centry *e) {
  cache_add(c, e);
  fprintf(c->fh, "%s\t%s\t%.6g\t%.6g\t%.6g\t%.6g\n", e->key, e->status, e->med, e->p20, e->p80, e->err);
  fflush(c->fh);
}

/* ---- running one forced candidate ---- */
typedef struct { h_data *d; int n, i, backward; fa8_delta_mode mode; const char *name; } runner;

static int call_once(void *ctx) {
  runner *r = ctx;
  h_data *d = &r->d[r->i];
  r->i = (r->i + 1) % r->n;
  fa8_problem p;
  fa8_fwd_tensors f;
  fa8_bwd_tensors b;
  h_timed_views(d, r->mode, &p, &f, &b);
  p.instance = r->name;
  p.collect_stats = 0;
  return r->backward ? fa8_backward(&p, &b, NULL, 0, NULL) != FA8_OK : fa8_forward(&p, &f, NULL, 0, NULL) != FA8_OK;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* sorted timings in ms; 0 ok */
static int time_it(runner *r, int gpu, int warmup, int reps, double *t) {
  if (gpu) return h_gpu_times_ms(call_once, r, warmup, reps, t);
  for (int i = 0; i < warmup; ++i) if (call_once(r)) return -1;
  for (int i = 0; i < reps; ++i) {
    const double a = now_s();
    if (call_once(r)) return -1;
    t[i] = (now_s() - a) * 1e3;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  return 0;
}

/* The candidates that passed their checks, timed in rounds: `warmup` untimed rounds, then `reps` rounds of one
 * timed run of each (run[k], times into t[k * reps ...], sorted). A candidate whose run fails drops out of later
 * rounds with failed[k] = 1 and its error message in why[k]. */
static void time_rounds(runner *run, int n, int gpu, int warmup, int reps, double *t, int *failed, char (*why)[256]) {
  for (int k = 0; k < n; ++k) failed[k] = 0;
  for (int w = 0; w < warmup; ++w)
    for (int k = 0; k < n; ++k) {
      double x;
      if (!failed[k] && time_it(&run[k], gpu, 0, 1, &x)) { failed[k] = 1; snprintf(why[k], 256, "failed: %s", fa8_last_error()); }
    }
  for (int rep = 0; rep < reps; ++rep)
    for (int k = 0; k < n; ++k) {
      if (failed[k]) continue;
      if (time_it(&run[k], gpu, 0, 1, &t[(size_t)k * reps + rep])) { failed[k] = 1; snprintf(why[k], 256, "failed: %s", fa8_last_error()); }
    }
  for (int k = 0; k < n; ++k)
    if (!failed[k]) qsort(&t[(size_t)k * reps], (size_t)reps, sizeof *t, cmp_d);
}

/* one progress line per candidate whose result is known */
static void progress(int done, int total, double t0, const int32_t *geo, int causal, long long seq, int dir, const char *name,
                     const char *status, double med_us) {
  const double el = now_s() - t0;
  fprintf(stderr, "[tune %d/%d] d%dx%d %s S=%lld %s %s: %s%s%.1f us (eta %.0f s)\n", done, total, geo[0], geo[1],
          causal ? "causal" : "full", seq, dir ? "bwd" : "fwd", name, status, *status ? " " : "", med_us,
          done ? el / done * (total - done) : 0.0);
}

/* accuracy of a forced candidate on the check problem against the FP64 reference */
static double check_error(h_data *chk, const h_ref *ref, const char *name, int backward, fa8_delta_mode mode, char *msg, size_t n) {
  chk->cfg.p.instance = name;
  fa8_status st = h_run(chk, mode);
  chk->cfg.p.instance = NULL;
  if (st != FA8_OK) { snprintf(msg, n, "failed: %s", fa8_last_error()); return INFINITY; }
  if (!backward) return h_rel_err_f32(chk->o32, ref->o, chk->no);
  const double a = h_rel_err_f32(chk->dq, ref->dq, chk->nq), b = h_rel_err_f32(chk->dk, ref->dk, chk->nk);
  const double c = h_rel_err_f32(chk->dv, ref->dv, chk->nv);
  return fmax(a, fmax(b, c));
}


typedef struct { char name[160]; double med, p20, p80, err; int ok; } result;
/* a candidate's known result (cache entry) into its row of the problem's results; 1 if it is usable */
static int take_result(result *r, const centry *e) {
  r->ok = !strcmp(e->status, "ok");
  r->med = e->med; r->p20 = e->p20; r->p80 = e->p80; r->err = e->err;
  return r->ok;
}


/* the candidate (an instance, or a bundle for the backward) a dispatch chose, NULL when none of them */
static const char *dispatched(const fa8_dispatch_names *dn, int dir, const char *const *names, int cnt) {
  for (int i = 0; i < cnt; ++i)
    if (!strcmp(dir ? fa8_bundle_backward(names[i]) : names[i], dir ? dn->bwd : dn->fwd)) return names[i];
  return NULL;
}

static void clean(char *s) { for (; *s; ++s) if (*s == ',' || *s == '\t' || *s == '\n') *s = ' '; }

int cli_tune(int argc, char **argv) {
  const char *backend = "cuda", *hdims = "128", *seqlens = "4096", *causal_s = "both", *dirs = "fwd,bwd", *delta_s = "matched";
  const char *cache_path = NULL, *out_path = NULL, *report_path = NULL, *label = NULL;
  int32_t heads = 64, kv = 8, batch = 1, reps = 0, warmup = -1, threads = 0, fresh = 0, scale_rows = 128;
  h_config cdef;
  h_config_init(&cdef);
  int32_t pow2 = cdef.pow2_scales;   /* the library's default quantization unless told */
  const opt_spec specs[] = {
    { "backend", OPT_STR, &backend, 0, 0, "cuda (default) | cpu" },
    { "hdim", OPT_STR, &hdims, 0, 0, "head dims, comma separated: N or QKxV (128)" },
    { "seqlen", OPT_STR, &seqlens, 0, 0, "sequence lengths, comma separated (4096); each is one bucket" },
    { "heads", OPT_INT, &heads, 1, 1 << 16, "query heads (64)" },
    { "kv-heads", OPT_INT, &kv, 1, 1 << 16, "key/value heads (8)" },
    { "batch", OPT_INT, &batch, 1, 1 << 16, "batch (1)" },
    { "causal", OPT_STR, &causal_s, 0, 0, "both | yes | no (both)" },
    { "dirs", OPT_STR, &dirs, 0, 0, "fwd,bwd (both)" },
    { "delta", OPT_STR, &delta_s, 0, 0, "delta mode the backward is timed in (matched)" },
    { "reps", OPT_INT, &reps, 1, 10000, "timed repetitions (GPU 20, CPU 5)" },
    { "warmup", OPT_INT, &warmup, 0, 1000, "warm-up runs (GPU 3, CPU 1)" },
    { "threads", OPT_INT, &threads, 0, 4096, "CPU threads (0: all cores)" },
    { "cache", OPT_STR, &cache_path, 0, 0, "append-only measurement cache (tune/cache/TARGET-SMS.tsv)" },
    { "out", OPT_STR, &out_path, 0, 0, "the tuned table to write (tune/tables/TARGET-SMS.csv)" },
    { "report", OPT_STR, &report_path, 0, 0, "gain report, Markdown (OUT with .md)" },
    { "device-label", OPT_STR, &label, 0, 0, "device column of the table (the device name)" },
    { "fresh", OPT_FLAG, &fresh, 0, 0, "ignore (and restart) the cache" },
    { "scale-rows", OPT_INT, &scale_rows, 0, 1 << 24, "quantizer scale block rows (128; 0: per-tensor scales)" },
    { "pow2-scales", OPT_FLAG, &pow2, 0, 0, "power-of-two scales (on); --no-pow2-scales: amax / fmt max" },
  };
  const int pr = opts_parse("tune", argc, argv, specs, (int)(sizeof specs / sizeof specs[0]));
  if (pr) return pr > 0 ? 0 : 2;
  fa8_problem base;
  fa8_problem_init(&base);
  if (opts_backend("tune", backend, &base.backend)) return 2;
  base.num_threads = threads;
  base.scale_rows = scale_rows;   /* the quantization of the check and timed problems, and of the candidate lists */
  if (heads % kv) { fprintf(stderr, "fa8 tune: --heads %d is not a multiple of --kv-heads %d\n", heads, kv); return 2; }
  fa8_delta_mode mode;
  if (h_delta_from_name(delta_s, &mode)) { fprintf(stderr, "fa8 tune: --delta '%s' is not a delta mode\n", delta_s); return 2; }
  int causal_set[2], nc = 0;
  if (!strcmp(causal_s, "both")) { causal_set[nc++] = 0; causal_set[nc++] = 1; }
  else if (!strcmp(causal_s, "yes")) causal_set[nc++] = 1;
  else if (!strcmp(causal_s, "no")) causal_set[nc++] = 0;
  else { fprintf(stderr, "fa8 tune: --causal '%s' is not both, yes or no\n", causal_s); return 2; }
  int want_dir[2] = { 0, 0 };
  {
    char b[64];
    snprintf(b, sizeof b, "%s", dirs);
    for (char *t = strtok(b, ","); t; t = strtok(NULL, ",")) {
      if (!strcmp(t, "fwd")) want_dir[0] = 1;
      else if (!strcmp(t, "bwd")) want_dir[1] = 1;
      else { fprintf(stderr, "fa8 tune: --dirs '%s' is not fwd or bwd\n", t); return 2; }
    }
  }
  int64_t seqs[32];
  int ns = 0;
  {
    char b[512];
    snprintf(b, sizeof b, "%s", seqlens);
    for (char *t = strtok(b, ","); t; t = strtok(NULL, ",")) {
      char *e;
      const long v = strtol(t, &e, 10);
      if (*e || v < 1 || v > (1 << 24) || ns == 32) { fprintf(stderr, "fa8 tune: --seqlen '%s' is not a length in 1..2^24 (32 at most)\n", t); return 2; }
      seqs[ns++] = v;
    }
  }
  int32_t geo[32][2];
  int ng = 0;
  {
    char b[512];
    snprintf(b, sizeof b, "%s", hdims);
    for (char *t = strtok(b, ","); t; t = strtok(NULL, ",")) {
      if (ng == 32 || opts_hdim("tune", t, &geo[ng][0], &geo[ng][1])) return 2;
      ++ng;
    }
  }
  const int gpu = base.backend != FA8_BACKEND_CPU;
  if (gpu && h_gpu_count() == 0) { fprintf(stderr, "fa8 tune: no CUDA device (use --backend cpu to tune the CPU kernels)\n"); return 1; }
  if (!reps) reps = gpu ? 20 : 5;
  if (warmup < 0) warmup = gpu ? 3 : 1;
  const char *target, *devname;
  int32_t sms;
  if (fa8_device_info(&base, &target, &sms, &devname) != FA8_OK) { fprintf(stderr, "fa8 tune: %s\n", fa8_last_error()); return 1; }
  char defcache[256], defout[256], defreport[300], dev[160];
  snprintf(defcache, sizeof defcache, "tune/cache/%s-%d.tsv", target, sms);
  snprintf(defout, sizeof defout, "tune/tables/%s-%d.csv", target, sms);
  if (!cache_path) cache_path = defcache;
  if (!out_path) out_path = defout;
  if (!report_path) {
    snprintf(defreport, sizeof defreport, "%s", out_path);
    char *dot = strrchr(defreport, '.');
    if (dot && !strcmp(dot, ".csv")) *dot = '\0';
    strncat(defreport, ".md", sizeof defreport - strlen(defreport) - 1);
    report_path = defreport;
  }
  snprintf(dev, sizeof dev, "%s", label ? label : devname);
  clean(dev);
  cache_t cache;
  if (cache_open(&cache, cache_path, fresh)) return 1;
  char cuda[32], driver[64], date[16], commit[64];
  cuda[0] = driver[0] = '\0';
  if (gpu) h_gpu_versions(cuda, sizeof cuda, driver, sizeof driver);
  {
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tt));
    const char *c = getenv("FA8_COMMIT");
    snprintf(commit, sizeof commit, "%s", c && *c ? c : "unknown");
    clean(commit);
  }
  if (mkdirs(out_path) || mkdirs(report_path)) { fprintf(stderr, "fa8 tune: cannot create the folders of %s: %s\n", out_path, strerror(errno)); return 1; }
  FILE *tab = fopen(out_path, "w"), *rep = fopen(report_path, "w");
  if (!tab || !rep) { fprintf(stderr, "fa8 tune: cannot write %s / %s: %s\n", out_path, report_path, strerror(errno)); return 1; }
  fprintf(tab, "# fa8 tune on %s (%s, %d SMs), generator %s, %s; cache %s; %d-row %s scales\n", dev, target, sms, fa8_generator_hash(), date,
          cache_path, scale_rows, pow2 ? "power-of-two" : "amax");
  fprintf(tab, "target,sm_count,device,key,bucket,instance,median_us,p20_us,p80_us,err,runner_up,runner_up_us,fa8_commit,cuda,driver,date\n");
  fprintf(rep, "# fa8 tune: %s (%s, %d SMs), %s\n\nB=%d, H=%d/%d, delta %s for the backward, scale blocks of %d rows (0: per-tensor), %s scales; times are medians of %d runs.\n\n"
               "| d | causal | S | dir | heuristic | time | table now (row) | time | tuned | time | gain | gain vs table | candidates (ok/total) |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
          dev, target, sms, date, batch, heads, kv, delta_s, scale_rows, pow2 ? "power-of-two" : "amax", reps);
  /* progress: the number of (candidate, problem) measurements is known after listing */
  int total = 0, done = 0, measured = 0;
  const double t0 = now_s();
  for (int gi = 0; gi < ng; ++gi)
    for (int ci = 0; ci < nc; ++ci)
      for (int si = 0; si < ns; ++si)
        for (int dir = 0; dir < 2; ++dir) {
          if (!want_dir[dir]) continue;
          fa8_problem p = base;
          p.batch = batch; p.heads = heads; p.kv_heads = kv; p.seqlen_q = p.seqlen_k = (int32_t)seqs[si];
          p.hdim_qk = geo[gi][0]; p.hdim_v = geo[gi][1]; p.causal = causal_set[ci]; p.delta = mode;
          int cnt = 0;
          if (fa8_candidates(&p, dir, NULL, 0, &cnt) == FA8_OK) total += cnt;
        }
  int rc = 0;
  for (int gi = 0; gi < ng && !rc; ++gi)
    for (int ci = 0; ci < nc && !rc; ++ci) {
      /* the check problem: one KV group, tails on both sequence ends of every tile size */
      h_config cc;
      h_config_init(&cc);
      cc.p = base;
      cc.pow2_scales = pow2;
      cc.p.batch = 1; cc.p.heads = heads / kv; cc.p.kv_heads = 1; cc.p.seqlen_q = cc.p.seqlen_k = 300;
      cc.p.hdim_qk = geo[gi][0]; cc.p.hdim_v = geo[gi][1]; cc.p.causal = causal_set[ci];
      cc.p.collect_stats = 1;
      h_data chk;
      if (h_alloc(&chk, &cc)) { fprintf(stderr, "fa8 tune: out of memory\n"); rc = 1; break; }
      h_inputs in;
      h_inputs_default(&in);
      const uint64_t seed0 = in.seed;
      h_fill(&chk, &in);
      h_ref ref;
      if (h_quantize(&chk) != FA8_OK || h_reference(&chk, 0, &ref)) {
        fprintf(stderr, "fa8 tune: check problem d%dx%d: %s\n", geo[gi][0], geo[gi][1], fa8_last_error());
        h_free(&chk);
        rc = 1;
        break;
      }
      for (int si = 0; si < ns && !rc; ++si)
        for (int dir = 0; dir < 2 && !rc; ++dir) {
          if (!want_dir[dir]) continue;
          h_config tc = cc;
          tc.p.batch = batch; tc.p.heads = heads; tc.p.kv_heads = kv; tc.p.seqlen_q = tc.p.seqlen_k = (int32_t)seqs[si];
          tc.p.collect_stats = 0;
          fa8_problem p = tc.p;
          p.delta = mode;
          const char *names[MAXC];
          int cnt = 0;
          if (fa8_candidates(&p, dir, names, MAXC, &cnt) != FA8_OK || cnt == 0) {
            fprintf(stderr, "fa8 tune: d%dx%d %s S=%lld %s: no candidate in this build (%s)\n", geo[gi][0], geo[gi][1],
                    p.causal ? "causal" : "full", (long long)seqs[si], dir ? "bwd" : "fwd", cnt ? fa8_last_error() : "none fits");
            continue;
          }
          if (cnt > MAXC) cnt = MAXC;
          /* the heuristic's choice, with every tuned table switched off */
          fa8_tuning_enable(0);
          fa8_dispatch_names dn;
          const fa8_status dst = fa8_dispatch(&p, &dn);
          fa8_tuning_enable(1);
          const char *heur = dst == FA8_OK ? dispatched(&dn, dir, names, cnt) : NULL;
          /* the choice of the tables this build consults now (built in, overlay), and which row made it */
          const char *tnow = NULL, *trow = "no row";
          if (fa8_dispatch(&p, &dn) == FA8_OK) {
            const char *why = dir ? dn.bwd_why : dn.fwd_why;
            trow = strstr(why, "exact row") ? "exact" : strstr(why, "nearest bucket") ? "nearest" : strncmp(why, "tuned", 5) ? "no row" : "other SMs";
            tnow = dispatched(&dn, dir, names, cnt);
          }
          char msg[256] = "";
          const double err_heur = heur ? check_error(&chk, &ref, heur, dir, mode, msg, sizeof msg) : INFINITY;
          /* timing inputs, rotated over copies that together exceed the L2 on a GPU */
          h_data tim[8];
          int nt = 0;
          {
            h_data first;
            if (h_alloc(&first, &tc)) { fprintf(stderr, "fa8 tune: out of memory for S=%lld\n", (long long)seqs[si]); rc = 1; break; }
            h_fill(&first, &in);
            tim[nt++] = first;
            const double bytes = 2.0 * (double)(first.nq + first.nk + first.nv + first.no) + 6.0 * (double)first.no;
            const int want = gpu ? (int)fmin(8, ceil(2 * L2_BYTES / bytes)) : 1;
            while (nt < want) {
              if (h_alloc(&tim[nt], &tc)) break;
              in.seed += 1;
              h_fill(&tim[nt], &in);
              ++nt;
            }
            in.seed = seed0;
            int bad = 0;
            for (int i = 0; i < nt; ++i) bad |= h_quantize(&tim[i]) != FA8_OK;
            if (bad) { fprintf(stderr, "fa8 tune: quantize: %s\n", fa8_last_error()); rc = 1; }
            /* the backward consumes the forward's O and LSE: produce them once with the heuristic forward */
            for (int i = 0; dir && !rc && i < nt; ++i)
              if (h_run(&tim[i], mode) != FA8_OK) { fprintf(stderr, "fa8 tune: forward: %s\n", fa8_last_error()); rc = 1; }
          }
          result res[MAXC];
          int nok = 0;
          /* the candidates that pass their checks (index into names, cache entry so far), timed together below */
          static int pend[MAXC];
          static centry pe[MAXC];
          int np = 0;
          for (int i = 0; i < cnt && !rc; ++i) {
            result *r = &res[i];
            memset(r, 0, sizeof *r);
            snprintf(r->name, sizeof r->name, "%s", names[i]);
            char key[512];
            /* a quantization other than 128-row amax scales gets its own key (the caches committed before
               power-of-two scales became the default hold amax-scale keys, so theirs stay as they were) */
            char rows[32] = "", quant[48];
            if (scale_rows != 128) snprintf(rows, sizeof rows, ",rows%d", scale_rows);
            snprintf(quant, sizeof quant, "%s%s", rows, pow2 ? ",pow2" : "");
            snprintf(key, sizeof key, "%s|%d|%s|%s|B%d,H%d,Hkv%d,S%lld,%s,%s%s", target, sms, fa8_generator_hash(), names[i],
                     batch, heads, kv, (long long)seqs[si], p.causal ? "causal" : "full", delta_s, quant);
            const centry *hit = cache_find(&cache, key);
            centry e;
            if (hit) {
              e = *hit;
            } else {
              memset(&e, 0, sizeof e);
              snprintf(e.key, sizeof e.key, "%s", key);
              msg[0] = '\0';
              /* a candidate whose kernel spills (local memory) is never timed: ptxas's choice, not the tile's */
              int32_t regs = 0, lbytes = 0;
              const char *which = NULL;
              if (gpu && fa8_instance_resources(names[i], &regs, &lbytes, &which) == FA8_OK && lbytes > 0) {
                snprintf(e.status, sizeof e.status, "spills: %s uses %d bytes of local memory per thread", which, (int)lbytes);
                e.err = -1;
              } else if (!isfinite(e.err = check_error(&chk, &ref, names[i], dir, mode, msg, sizeof msg))) {
                snprintf(e.status, sizeof e.status, "%s", msg[0] ? msg : "failed");
                e.err = -1;
              } else if (e.err > 1.5 * err_heur + 2e-3) {
                snprintf(e.status, sizeof e.status, "inaccurate: error %.3g vs the heuristic's %.3g", e.err, err_heur);
              } else {
                pend[np] = i;
                pe[np++] = e;
                continue;
              }
              clean(e.status);
              cache_put(&cache, &e);
            }
            nok += take_result(r, &e);
            ++done;
            progress(done, total, t0, geo[gi], p.causal, seqs[si], dir, names[i], r->ok ? "" : e.status, r->med);
          }
          if (np && !rc) {
            runner run[MAXC];
            int failed[MAXC];
            static char why[MAXC][256];
            double *t = malloc((size_t)np * reps * sizeof *t);
            if (!t) { fprintf(stderr, "fa8 tune: out of memory for %d x %d timings\n", np, reps); rc = 1; }
            for (int k = 0; k < np && !rc; ++k) run[k] = (runner){ tim, nt, 0, dir, mode, names[pend[k]] };
            if (!rc) time_rounds(run, np, gpu, warmup, reps, t, failed, why);
            for (int k = 0; k < np && !rc; ++k) {
              centry *e = &pe[k];
              result *r = &res[pend[k]];
              if (failed[k]) {
                snprintf(e->status, sizeof e->status, "%s", why[k]);
              } else {
                const double *tk = &t[(size_t)k * reps];
                snprintf(e->status, sizeof e->status, "ok");
                e->med = 1e3 * tk[reps / 2];
                e->p20 = 1e3 * tk[(reps - 1) / 5];
                e->p80 = 1e3 * tk[(4 * (reps - 1)) / 5];
              }
              ++measured;
              clean(e->status);
              cache_put(&cache, e);
              nok += take_result(r, e);
              ++done;
              progress(done, total, t0, geo[gi], p.causal, seqs[si], dir, names[pend[k]], r->ok ? "" : e->status, r->med);
            }
            free(t);
          }
          for (int i = 0; i < nt; ++i) h_free(&tim[i]);
          if (rc) break;
          int w = -1, ru = -1, hi = -1, ti = -1;
          for (int i = 0; i < cnt; ++i) {
            if (heur && !strcmp(res[i].name, heur)) hi = i;
            if (tnow && !strcmp(res[i].name, tnow)) ti = i;
            if (!res[i].ok) continue;
            if (w < 0 || res[i].med < res[w].med || (res[i].med == res[w].med && strcmp(res[i].name, res[w].name) < 0)) { ru = w; w = i; }
            else if (ru < 0 || res[i].med < res[ru].med) ru = i;
          }
          if (w < 0) { fprintf(stderr, "fa8 tune: no candidate passed for d%dx%d S=%lld\n", geo[gi][0], geo[gi][1], (long long)seqs[si]); continue; }
          const char *win = dir ? fa8_bundle_backward(res[w].name) : res[w].name;
          const char *run_up = ru >= 0 ? (dir ? fa8_bundle_backward(res[ru].name) : res[ru].name) : "";
          int64_t bseq, bbh;   /* the runtime's own bucketing, so the row is found for this problem */
          fa8_tuning_bucket(&p, &bseq, &bbh);
          char runner_us[32] = "";
          if (ru >= 0) snprintf(runner_us, sizeof runner_us, "%.3f", res[ru].med);
          fprintf(tab, "%s,%d,%s,%s,s%lld_bh%lld,%s,%.3f,%.3f,%.3f,%.4g,%s,%s,%s,%s,%s,%s\n", target, sms, dev,
                  fa8_instance_key(win), (long long)bseq, (long long)bbh, win,
                  res[w].med, res[w].p20, res[w].p80, res[w].err, run_up, runner_us, commit, cuda, driver, date);
          fflush(tab);
          const int hok = hi >= 0 && res[hi].ok;
          char ht[32] = "n/a", gain[32] = "n/a";
          if (hok) {
            snprintf(ht, sizeof ht, "%.1f us", res[hi].med);
            snprintf(gain, sizeof gain, "%.1f%%", 100.0 * (res[hi].med / res[w].med - 1.0));
          }
          const int tok = ti >= 0 && res[ti].ok;
          char tt[32] = "n/a", tgain[32] = "n/a";
          if (tok) {
            snprintf(tt, sizeof tt, "%.1f us", res[ti].med);
            snprintf(tgain, sizeof tgain, "%.1f%%", 100.0 * (res[ti].med / res[w].med - 1.0));
          }
          fprintf(rep, "| %dx%d | %s | %lld | %s | %s | %s | %s (%s) | %s | %s | %.1f us | %s | %s | %d/%d |\n", geo[gi][0],
                  geo[gi][1], p.causal ? "yes" : "no", (long long)seqs[si], dir ? "bwd" : "fwd",
                  heur ? (dir ? fa8_bundle_backward(heur) : heur) : "none", ht,
                  tnow ? (dir ? fa8_bundle_backward(tnow) : tnow) : "none", trow, tt, win, res[w].med, gain, tgain, nok, cnt);
          fflush(rep);
        }
      h_ref_free(&ref);
      h_free(&chk);
    }
  fclose(tab);
  fclose(rep);
  fclose(cache.fh);
  free(cache.e);
  fprintf(stderr, "fa8 tune: %d candidates (%d measured now, %d from the cache) in %.0f s -> %s, %s\n", done, measured,
          done - measured, now_s() - t0, out_path, report_path);
  return rc;
}
