/* `fa8 run --in DIR --out DIR` end to end: its outputs equal a direct library call on the same inputs, and
 * every malformed input is refused with a message naming the file and the problem. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"
#include "npy.h"
#include "test_slurp.h"

static char dir_in[256], dir_out[256];

static void make_dirs(void) {
  snprintf(dir_in, sizeof dir_in, "/tmp/fa8_run_in_XXXXXX");
  snprintf(dir_out, sizeof dir_out, "/tmp/fa8_run_out_XXXXXX");
  cr_assert(mkdtemp(dir_in) && mkdtemp(dir_out));
}

static void remove_dirs(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir_in, dir_out);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(run, .init = make_dirs, .fini = remove_dirs, .timeout = 120);

static void put(const char *name, int64_t b, int64_t s, int64_t h, int64_t d, const float *x) {
  char path[512], err[256];
  const int64_t shape[4] = { b, s, h, d };
  snprintf(path, sizeof path, "%s/%s", dir_in, name);
  cr_assert_eq(npy_write_f32(path, 4, shape, x, err, sizeof err), 0, "%s", err);
}

/* Runs `fa8 ARGS`; returns the exit status and the combined output in out. */
static int fa8_cmd(char *out, size_t n, const char *args) {
  const char *exe = getenv("FA8_EXE");
  cr_assert(exe, "FA8_EXE is not set (run through meson test)");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", exe, args);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  size_t len = fread(out, 1, n - 1, p);
  out[len] = '\0';
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int fa8(char *out, size_t n, const char *args) {
  char full[1536];
  snprintf(full, sizeof full, "run %s", args);
  return fa8_cmd(out, n, full);
}

static void write_problem(h_data *d) {
  const fa8_problem *p = &d->cfg.p;
  put("q.npy", p->batch, p->seqlen_q, p->heads, p->hdim_qk, d->q);
  put("k.npy", p->batch, p->seqlen_k, p->kv_heads, p->hdim_qk, d->k);
  put("v.npy", p->batch, p->seqlen_k, p->kv_heads, p->hdim_v, d->v);
  put("do.npy", p->batch, p->seqlen_q, p->heads, p->hdim_v, d->dout);
}

static void setup_problem(h_data *d, int causal) {
  h_config c;
  h_config_init(&c);   /* the library's default quantization, which fa8 run takes unless told */
  c.p.batch = 2; c.p.seqlen_q = 70; c.p.seqlen_k = 90; c.p.heads = 4; c.p.kv_heads = 2;
  c.p.hdim_qk = c.p.hdim_v = 64; c.p.causal = causal;
  cr_assert_eq(h_alloc(d, &c), 0);
  h_inputs in;
  h_inputs_default(&in);
  in.seed = 77;
  h_fill(d, &in);
}

static void expect_same(const char *name, const float *want, int64_t n) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/%s", dir_out, name);
  npy_array a;
  cr_assert_eq(npy_read(path, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(a.count, n, "%s: %lld elements, expected %lld", name, (long long)a.count, (long long)n);
  for (int64_t i = 0; i < n; ++i)
    cr_assert(a.data[i] == want[i] || (isinf(a.data[i]) && isinf(want[i])), "%s[%lld] = %g, library gives %g", name,
              (long long)i, (double)a.data[i], (double)want[i]);
  npy_free(&a);
}

Test(run, outputs_equal_library_call) {
  /* both causal flags, under the default (power-of-two) scales and under --no-pow2-scales (amax scales): the two
     quantizations give different outputs, so a flag the command ignored fails the comparison */
  for (int variant = 0; variant < 4; ++variant) {
    const int causal = variant & 1, amax = variant >> 1;
    h_data d;
    setup_problem(&d, causal);
    cr_assert_eq(d.cfg.pow2_scales, 1, "the library's default quantization is power-of-two scales");
    if (amax) d.cfg.pow2_scales = 0;
    write_problem(&d);
    char out[4096], args[1024];
    snprintf(args, sizeof args, "--in '%s' --out '%s' --delta matched --threads 2%s%s", dir_in, dir_out, causal ? " --causal" : "",
             amax ? " --no-pow2-scales" : "");
    cr_assert_eq(fa8(out, sizeof out, args), 0, "fa8 run failed: %s", out);
    d.cfg.p.causal = causal;
    cr_assert_eq(h_quantize(&d), FA8_OK);
    cr_assert_eq(h_run(&d, FA8_DELTA_MATCHED), FA8_OK, "%s", fa8_last_error());
    expect_same("o.npy", d.o32, d.no);
    expect_same("lse.npy", d.lse, d.nrow);
    expect_same("delta.npy", d.delta, d.nrow);
    expect_same("dq.npy", d.dq, d.nq);
    expect_same("dk.npy", d.dk, d.nk);
    expect_same("dv.npy", d.dv, d.nv);
    char path[512];
    snprintf(path, sizeof path, "%s/stats.json", dir_out);
    FILE *f = fopen(path, "r");
    cr_assert(f, "stats.json missing");
    char buf[2048] = { 0 };
    cr_assert(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    cr_assert(strstr(buf, "\"rowsum_pre_ra_max\"") && strstr(buf, "\"delta\": \"matched\""), "stats.json: %s", buf);
    cr_assert(strstr(buf, amax ? "\"pow2_scales\": false" : "\"pow2_scales\": true"), "stats.json: %s", buf);
    h_free(&d);
  }
}

static int same_tensor(const fa8_tensor *a, const fa8_tensor *b) {
  return a->data == b->data && a->dtype == b->dtype && memcmp(a->stride, b->stride, sizeof a->stride) == 0;
}
static int same_problem(const fa8_problem *a, const fa8_problem *b) {
  return a->batch == b->batch && a->seqlen_q == b->seqlen_q && a->seqlen_k == b->seqlen_k && a->heads == b->heads &&
         a->kv_heads == b->kv_heads && a->hdim_qk == b->hdim_qk && a->hdim_v == b->hdim_v && a->causal == b->causal &&
         a->softmax_scale == b->softmax_scale && a->delta == b->delta && a->fmt_qkv == b->fmt_qkv &&
         a->fmt_grad == b->fmt_grad && a->backend == b->backend && a->scale_rows == b->scale_rows &&
         a->collect_stats == b->collect_stats;
}
/* fa8 bench and fa8 tune time through h_timed_views: the same problem and tensors as h_views but for the FP32 copy of
 * O, which the forward then leaves alone, with O, its remainder and the LSE bit for bit the same */
Test(run, timed_views_drop_only_the_fp32_copy) {
  h_data d;
  setup_problem(&d, 1);
  cr_assert_eq(h_quantize(&d), FA8_OK);
  const fa8_delta_mode modes[] = { FA8_DELTA_STALE, FA8_DELTA_SPLIT };
  for (int m = 0; m < 2; ++m) {
    fa8_problem p, pt;
    fa8_fwd_tensors f, ft;
    fa8_bwd_tensors b, bt;
    h_views(&d, modes[m], &p, &f, &b);
    h_timed_views(&d, modes[m], &pt, &ft, &bt);
    cr_assert_not_null(f.o_f32.data);
    cr_assert_null(ft.o_f32.data, "the timed forward still writes the FP32 copy of O");
    cr_assert(same_problem(&p, &pt), "h_timed_views' problem differs from h_views'");
    const fa8_tensor *ten[][2] = { { &f.q.data, &ft.q.data }, { &f.k.data, &ft.k.data }, { &f.v.data, &ft.v.data },
                                   { &f.q.data_t, &ft.q.data_t }, { &f.k.data_t, &ft.k.data_t }, { &f.v.data_t, &ft.v.data_t },
                                   { &f.o, &ft.o }, { &f.o_rem, &ft.o_rem }, { &f.lse, &ft.lse }, { &b.dout, &bt.dout },
                                   { &b.delta, &bt.delta }, { &b.dq, &bt.dq }, { &b.dk, &bt.dk }, { &b.dv, &bt.dv } };
    for (size_t i = 0; i < sizeof ten / sizeof ten[0]; ++i)
      cr_assert(same_tensor(ten[i][0], ten[i][1]), "h_timed_views differs from h_views in tensor %zu", i);
    cr_assert(f.q.scales == ft.q.scales && f.k.scales == ft.k.scales && f.v.scales == ft.v.scales && b.stats == bt.stats);
    cr_assert_eq(fa8_forward(&p, &f, NULL, 0, NULL), FA8_OK, "%s", fa8_last_error());
    uint16_t *o = malloc(sizeof *o * (size_t)d.no), *orem = malloc(sizeof *orem * (size_t)d.no);
    float *lse = malloc(sizeof *lse * (size_t)d.nrow);
    cr_assert(o && orem && lse);
    memcpy(o, d.o, sizeof *o * (size_t)d.no);
    memcpy(orem, d.orem, sizeof *orem * (size_t)d.no);
    memcpy(lse, d.lse, sizeof *lse * (size_t)d.nrow);
    for (int64_t i = 0; i < d.no; ++i) d.o32[i] = NAN;
    cr_assert_eq(fa8_forward(&pt, &ft, NULL, 0, NULL), FA8_OK, "%s", fa8_last_error());
    for (int64_t i = 0; i < d.no; ++i) cr_assert(isnan(d.o32[i]), "o_f32[%lld] written by the timed forward", (long long)i);
    cr_assert(memcmp(o, d.o, sizeof *o * (size_t)d.no) == 0, "O differs without the FP32 copy");
    if (modes[m] == FA8_DELTA_SPLIT) cr_assert(memcmp(orem, d.orem, sizeof *orem * (size_t)d.no) == 0, "O's remainder differs");
    cr_assert(memcmp(lse, d.lse, sizeof *lse * (size_t)d.nrow) == 0, "the LSE differs without the FP32 copy");
    free(o);
    free(orem);
    free(lse);
  }
  h_free(&d);
}

/* every refusal: exit status 2 (bad input) and a message naming the file and the problem */
static void expect_refusal(const char *extra, const char *needle1, const char *needle2) {
  char out[4096], args[1024];
  snprintf(args, sizeof args, "--in '%s' --out '%s' %s", dir_in, dir_out, extra);
  const int rc = fa8(out, sizeof out, args);
  cr_assert_eq(rc, 2, "expected exit 2 for [%s], got %d: %s", extra, rc, out);
  cr_assert(strstr(out, needle1), "message lacks '%s': %s", needle1, out);
  if (needle2) cr_assert(strstr(out, needle2), "message lacks '%s': %s", needle2, out);
}

Test(run, refuses_malformed_inputs) {
  h_data d;
  setup_problem(&d, 0);
  expect_refusal("", "q.npy", "cannot open");                             /* nothing written yet */
  write_problem(&d);
  /* mismatched shapes are written from a zero buffer large enough for any of them */
  float *z = calloc(3 * 90 * 4 * 64, sizeof(float));
  cr_assert(z);
  put("k.npy", 3, 90, 2, 64, z);                                           /* batch 3 vs 2 */
  expect_refusal("", "batch mismatch", "k.npy");
  put("k.npy", 2, 90, 3, 64, z);                                           /* kv heads 3 vs v's 2 */
  expect_refusal("", "kv_heads mismatch", "v.npy");
  put("k.npy", 2, 90, 2, 64, d.k);
  put("v.npy", 2, 90, 2, 64, d.v);
  put("q.npy", 2, 70, 3, 64, z);                                           /* 3 heads vs do's 4 */
  expect_refusal("", "heads mismatch", "do.npy");
  put("do.npy", 2, 70, 3, 64, z);
  expect_refusal("", "not a multiple", "kv heads");                        /* 3 % 2 */
  write_problem(&d);
  d.q[5] = NAN;
  put("q.npy", 2, 70, 4, 64, d.q);
  expect_refusal("", "q.npy", "non-finite");
  d.q[5] = 0.5f;
  write_problem(&d);
  {
    char path[512], err[256];
    const int64_t shape[3] = { 2, 70, 256 };
    snprintf(path, sizeof path, "%s/q.npy", dir_in);
    cr_assert_eq(npy_write_f32(path, 3, shape, d.q, err, sizeof err), 0);
  }
  expect_refusal("", "q.npy", "4 dimensions");
  write_problem(&d);
  {
    char path[512];
    snprintf(path, sizeof path, "%s/v.npy", dir_in);
    FILE *f = fopen(path, "wb");
    fputs("not an npy file", f);
    fclose(f);
  }
  expect_refusal("", "v.npy", NULL);
  write_problem(&d);
  expect_refusal("--delta fresh", "--delta", "fresh");
  expect_refusal("--grad-fmt e3m4", "--grad-fmt", "e3m4");
  expect_refusal("--backend tpu", "--backend", "tpu");
  expect_refusal("--scale-rows -1", "--scale-rows", "-1");
  expect_refusal("--bogus", "unknown option", "--bogus");
  free(z);
  h_free(&d);
}

Test(run, refuses_unsupported_geometry) {
  h_config c;
  memset(&c, 0, sizeof c);
  fa8_problem_init(&c.p);
  c.p.seqlen_q = c.p.seqlen_k = 8; c.p.hdim_qk = c.p.hdim_v = 80;   /* no d80 instance is generated */
  h_data d;
  cr_assert_eq(h_alloc(&d, &c), 0);
  write_problem(&d);
  expect_refusal("", "80", NULL);
  h_free(&d);
}

Test(run, requires_directories) {
  char out[4096];
  cr_assert_eq(fa8(out, sizeof out, "--in /tmp"), 2);
  cr_assert(strstr(out, "--out"), "%s", out);
}

/* `fa8 bench` refuses bad flags before touching a GPU (exit 2, the value named). */
Test(run, bench_refuses_bad_flags) {
  const char *cases[][2] = { { "bench --modes stale,fresh", "fresh" }, { "bench --hdim 12x", "12x" },
                             { "bench --backend tpu", "tpu" }, { "bench --backend cpu", "probe" },
                             { "bench --reps 0", "--reps" }, { "bench --bogus", "--bogus" },
                             { "bench --scale-rows -1", "--scale-rows" }, { "bench --scale-rows many", "many" },
                             { "bench --modes stale,stale,stale,stale,stale,stale,stale,stale,stale", "stale,stale" },
                             { "bench --modes ,", "--modes" }, { "bench --pow2-scales=yes", "--pow2-scales" },
                             { "bench --v-scale-rows -8", "--v-scale-rows" } };
  char out[2048];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int rc = fa8_cmd(out, sizeof out, cases[i][0]);
    cr_expect_eq(rc, 2, "`fa8 %s` exited %d: %s", cases[i][0], rc, out);
    cr_expect(strstr(out, cases[i][1]) != NULL, "`fa8 %s` does not name '%s': %s", cases[i][0], cases[i][1], out);
  }
}

/* `fa8 probe --v-scale-rows`: V quantized on its own (here one scale per head, under Q/K/dO's 64-row blocks) runs,
 * reports the rows it used, and matched delta still zeroes the row sums before the cast (its pre-cast bound, as in
 * test_attention's probe problem); a bad value is refused naming it. */
Test(run, probe_quantizes_v_on_its_own) {
  char out[8192];
  int rc = fa8_cmd(out, sizeof out, "probe --backend cpu --seqlen 192 --heads 2 --kv-heads 1 --hdim 64 --modes matched "
                                    "--scale-rows 64 --v-scale-rows 192 --threads 1 --json --quiet");
  cr_assert_eq(rc, 0, "fa8 probe exited %d: %s", rc, out);
  cr_expect(strstr(out, "\"scale_rows\": 64, \"v_scale_rows\": 192,") != NULL, "%s", out);
  const char *m = strstr(out, "\"rowsum_pre_ra_max\": ");
  cr_assert(m, "%s", out);
  const double pre = strtod(m + strlen("\"rowsum_pre_ra_max\": "), NULL);
  cr_expect(pre >= 0 && pre < 1e-5, "matched pre-cast row sums %g with V per head: %s", pre, out);
  rc = fa8_cmd(out, sizeof out, "probe --backend cpu --v-scale-rows -3");
  cr_expect(rc == 2 && strstr(out, "--v-scale-rows '-3'") != NULL, "exit %d: %s", rc, out);
}

/* `fa8 tune` on the CPU, end to end: a table and a gain report come out, every candidate was checked and
 * timed, a second run re-measures nothing (the cache), and the runtime uses the table it wrote (overlay). */
Test(run, tune_writes_a_table_the_runtime_uses) {
  char out[16384], args[1200], path[600];
  snprintf(args, sizeof args, "tune --backend cpu --hdim 64 --seqlen 256 --heads 4 --kv-heads 2 --causal no --reps 2 "
           "--warmup 0 --threads 1 --cache '%s/c.tsv' --out '%s/t.csv'", dir_out, dir_out);
  int rc = fa8_cmd(out, sizeof out, args);
  cr_assert_eq(rc, 0, "fa8 tune exited %d: %s", rc, out);
  cr_expect(strstr(out, "measured now, 0 from the cache") != NULL, "%s", out);
  cr_expect(strstr(out, "[tune 1/") != NULL, "no progress line: %s", out);
  snprintf(path, sizeof path, "%s/t.csv", dir_out);
  FILE *f = fopen(path, "r");
  cr_assert(f, "no table at %s", path);
  char line[2048];
  int rows = 0, header = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    if (!header) { header = 1; cr_expect(!strncmp(line, "target,sm_count,device,key,bucket,instance,", 43), "%s", line); continue; }
    ++rows;
    cr_expect(!strncmp(line, "cpu,1,", 6), "row for 1 thread on cpu: %s", line);
    cr_expect(strstr(line, ",s256_bh4,") != NULL, "%s", line);
  }
  fclose(f);
  cr_expect_eq(rows, 2, "one forward and one backward row, got %d", rows);
  snprintf(path, sizeof path, "%s/t.md", dir_out);
  f = fopen(path, "r");
  cr_assert(f, "no gain report at %s", path);
  fclose(f);
  /* the second run, with the first one's table as the overlay: re-measures nothing, and its report names that
   * table's choice and row ("table now") beside the heuristic's */
  snprintf(path, sizeof path, "%s/t.csv", dir_out);
  cr_assert_eq(setenv("FA8_TUNED_TABLE", path, 1), 0);
  snprintf(args, sizeof args, "tune --backend cpu --hdim 64 --seqlen 256 --heads 4 --kv-heads 2 --causal no --reps 2 "
           "--warmup 0 --threads 1 --cache '%s/c.tsv' --out '%s/t2.csv'", dir_out, dir_out);
  rc = fa8_cmd(out, sizeof out, args);
  unsetenv("FA8_TUNED_TABLE");
  cr_assert_eq(rc, 0, "second fa8 tune exited %d: %s", rc, out);
  cr_expect(strstr(out, "(0 measured now,") != NULL, "the second run measured again: %s", out);
  snprintf(path, sizeof path, "%s/t2.md", dir_out);
  char *md = test_slurp(path, NULL);
  cr_assert(md, "no gain report at %s", path);
  cr_expect(strstr(md, "| heuristic | time | table now (row) | time | tuned | time | gain | gain vs table |") != NULL, "%s", md);
  int exact = 0;
  for (const char *q = md; (q = strstr(q, "_w1s1 (exact) | ")) != NULL; ++q) ++exact;
  cr_expect_eq(exact, 2, "both rows should come from the overlay's exact rows:\n%s", md);
  free(md);
  snprintf(args, sizeof args, "list --tuned --backend cpu --hdim 64 --seqlen 200 --heads 4 --kv-heads 2 --threads 1 --overlay '%s/t.csv'", dir_out);
  rc = fa8_cmd(out, sizeof out, args);
  cr_assert_eq(rc, 0, "%s", out);
  cr_expect(strstr(out, "tuned (overlay): exact row") != NULL && strstr(out, "t.csv:3") != NULL, "%s", out);
  /* the sweeps above ran under the default power-of-two scales, so their cache keys say ",pow2"; an amax-scale
   * sweep (--no-pow2-scales) is another quantization: it finds none of them and adds keys of its own */
  snprintf(path, sizeof path, "%s/c.tsv", dir_out);
  char *cache = test_slurp(path, NULL);
  cr_assert(cache, "no cache at %s", path);
  cr_expect(strstr(cache, ",full,matched,pow2\t") != NULL, "%s", cache);
  free(cache);
  snprintf(args, sizeof args, "tune --backend cpu --hdim 64 --seqlen 256 --heads 4 --kv-heads 2 --causal no --reps 2 "
           "--warmup 0 --threads 1 --no-pow2-scales --cache '%s/c.tsv' --out '%s/t3.csv'", dir_out, dir_out);
  rc = fa8_cmd(out, sizeof out, args);
  cr_assert_eq(rc, 0, "amax-scale fa8 tune exited %d: %s", rc, out);
  cr_expect(strstr(out, "measured now, 0 from the cache") != NULL, "the amax sweep reused power-of-two times: %s", out);
  cache = test_slurp(path, NULL);
  cr_assert(cache);
  cr_expect(strstr(cache, ",full,matched\t") != NULL && strstr(cache, ",full,matched,pow2\t") != NULL, "%s", cache);
  free(cache);
  snprintf(path, sizeof path, "%s/t3.md", dir_out);
  md = test_slurp(path, NULL);
  cr_assert(md);
  cr_expect(strstr(md, "amax scales") != NULL, "the report names its quantization: %s", md);
  free(md);
}

/* The committed H200 table is what the runtime picks on an H200, shown without one: fa8 list --tuned --device
 * plans for sm_90a with 132 SMs (builds without sm_90a kernels skip). The expected instances come from the CSV. */
Test(run, list_tuned_plans_for_the_h200_table) {
  char out[8192], path[600], line[1024], fwd[256] = "", bwd[256] = "";
  snprintf(path, sizeof path, "%s/tune/tables/sm_90a-132.csv", getenv("FA8_ROOT"));
  FILE *f = fopen(path, "r");
  cr_assert(f, "%s is missing", path);
  while (fgets(line, sizeof line, f)) {
    char *want = strstr(line, ",fa8_fwd_e4m3_d256v256_gqa_full,s8192_bh64,") ? fwd
               : strstr(line, ",fa8_bwd_e4m3_d256v256_gqa_full,s8192_bh64,") ? bwd : NULL;
    if (!want) continue;
    char *field = line;
    for (int i = 0; i < 5 && field; ++i) field = strchr(field, ',') ? strchr(field, ',') + 1 : NULL;   /* 6th: instance */
    cr_assert(field);
    snprintf(want, 256, "%.*s", (int)strcspn(field, ","), field);
  }
  fclose(f);
  cr_assert(*fwd, "the H200 table has no d256 forward row at s8192_bh64");
  const int rc = fa8_cmd(out, sizeof out, "list --tuned --backend cuda --device sm_90a:132 --hdim 256 --seqlen 8192");
  if (rc != 0 && strstr(out, "in this build")) cr_skip_test("no sm_90a kernels in this build: %s", out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_expect(strstr(out, "on sm_90a (132 SMs)") != NULL, "%s", out);
  char want[300];
  snprintf(want, sizeof want, "fwd   %s\n      tuned (built in): exact row", fwd);
  cr_expect(strstr(out, want) != NULL, "expected %s from the table:\n%s", fwd, out);
  if (*bwd) {
    snprintf(want, sizeof want, "bwd   %s\n      tuned (built in): exact row", bwd);
    cr_expect(strstr(out, want) != NULL, "expected %s from the table:\n%s", bwd, out);
  } else {
    /* no bh64 row (the d256 rows timed only the portable backward and were dropped): the wgmma backward, not the
     * portable mma.sync one a stale row named, by the heuristic or from the nearest bucket (the 8/1 sweep's row) */
    const char *b = strstr(out, "bwd   ");
    cr_assert(b, "%s", out);
    cr_expect(strncmp(b, "bwd   fa8_bwd_sm90a_", 20) == 0 && !strstr(b, "_mma\n") &&
                  (strstr(b, "heuristic") || strstr(b, "nearest bucket")),
              "expected the wgmma backward by heuristic or nearest bucket:\n%s", out);
  }
}

Test(run, tuned_tables_refuse_bad_input) {
  char out[4096], args[700], path[300];
  snprintf(path, sizeof path, "%s/bad.csv", dir_out);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("target,sm_count,device,key,bucket,instance,median_us,p20_us,p80_us,err,runner_up,runner_up_us,fa8_commit,cuda,driver,date\n"
        "cpu,1,x,fa8_fwd_e4m3_d64v64_gqa_full,s256_bh4,fa8_fwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1,fast,,,,,,,,,\n", f);
  fclose(f);
  snprintf(args, sizeof args, "list --tuned --hdim 64 --overlay '%s'", path);
  int rc = fa8_cmd(out, sizeof out, args);
  cr_expect_eq(rc, 2, "%s", out);
  cr_expect(strstr(out, "bad.csv:2") && strstr(out, "median_us 'fast'"), "%s", out);
  snprintf(args, sizeof args, "list --tuned --hdim 64");
  char env_cmd[1600];
  snprintf(env_cmd, sizeof env_cmd, "FA8_TUNED_TABLE='%s' '%s' %s 2>&1", path, getenv("FA8_EXE"), args);
  FILE *p = popen(env_cmd, "r");
  cr_assert(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  const int st = pclose(p);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) != 0, "FA8_TUNED_TABLE with a bad file was accepted: %s", out);
  cr_expect(strstr(out, "FA8_TUNED_TABLE") && strstr(out, "bad.csv:2"), "%s", out);
  const char *cases[][2] = { { "list --tuned --delta fresh", "fresh" }, { "list --tuned --hdim 12x", "12x" },
                             { "list --tuned --backend tpu", "tpu" }, { "list --tuned --seqlen 0", "--seqlen" },
                             { "tune --backend cpu --causal maybe", "maybe" }, { "tune --backend cpu --dirs up", "up" },
                             { "tune --backend cpu --seqlen 0", "--seqlen" }, { "tune --backend cpu --heads 6 --kv-heads 4", "--kv-heads" },
                             { "tune --backend cpu --delta fresh", "fresh" }, { "tune --hdim 12x --backend cpu", "12x" },
                             { "tune --backend cpu --scale-rows -3", "--scale-rows" }, { "tune --backend cpu --scale-rows x", "x" },
                             { "list --tuned --backend cuda --device sm_90a", "sm_90a" },
                             { "list --tuned --backend cuda --device sm_90a:-1", "sm_90a:-1" },
                             { "list --tuned --device sm_90a:132", "cpu" } };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    rc = fa8_cmd(out, sizeof out, cases[i][0]);
    cr_expect_eq(rc, 2, "`fa8 %s` exited %d: %s", cases[i][0], rc, out);
    cr_expect(strstr(out, cases[i][1]) != NULL, "`fa8 %s` does not name '%s': %s", cases[i][0], cases[i][1], out);
  }
}
