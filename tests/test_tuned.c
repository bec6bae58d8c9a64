/* Tuned tables at run time (runtime/src/tuned*.c, docs/tuning.md): the CSV parser refuses malformed rows
 * naming file:line and the bad value; the lookup policy (overlay before the built-in table; exact row, then
 * any SM count, then the nearest bucket, then the heuristic; ties broken by exact SM count, median, name,
 * file:line) holds on explicit rows; the public overlay API changes what fa8_dispatch picks and says why. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa8_internal.h"

#define HEADER "target,sm_count,device,key,bucket,instance,median_us,p20_us,p80_us,err,runner_up,runner_up_us,fa8_commit,cuda,driver,date\n"
#define FWD "fa8_fwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1"
#define FWD_KEY "fa8_fwd_e4m3_d64v64_gqa_full"
#define BWD "fa8_bwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1"
#define BWD_KEY "fa8_bwd_e4m3_d64v64_gqa_full"

static const fa8_kernel_desc *find(const char *name) {
  for (size_t i = 0; i < fa8_instance_count; ++i)
    if (!strcmp(fa8_instances[i].name, name)) return &fa8_instances[i];
  return NULL;
}

static fa8_status parse(const char *text, fa8__trow **rows, size_t *n) {
  return fa8__tuned_parse(text, strlen(text), "t.csv", find, rows, n);
}

Test(tuned, parses_a_table) {
  fa8__trow *rows;
  size_t n;
  const char *t = "# comment\n\n" HEADER
                  "cpu,2,ci box,"FWD_KEY",s1024_bh8,"FWD",100.5,90,110,0.01,,,abc,,,2026-11-29\r\n"
                  "cpu,0,ci,"BWD_KEY",s512_bh4,"BWD",3e2,,,,,,x,,,d";   /* CRLF, no final newline */
  cr_assert_eq(parse(t, &rows, &n), FA8_OK, "%s", fa8_last_error());
  cr_assert_eq(n, 2);
  cr_expect_str_eq(rows[0].target, "cpu");
  cr_expect_eq(rows[0].sm_count, 2);
  cr_expect_eq(rows[0].seq, 1024);
  cr_expect_eq(rows[0].bh, 8);
  cr_expect_eq(rows[0].instance, find(FWD));
  cr_expect_float_eq(rows[0].median_us, 100.5, 1e-12);
  cr_expect_str_eq(rows[0].source, "t.csv:4");
  cr_expect_eq(rows[1].sm_count, 0);
  cr_expect_str_eq(rows[1].source, "t.csv:5");
  free(rows);
}

Test(tuned, refuses_malformed_rows_naming_file_and_line) {
  static const struct { const char *text, *want[2]; } cases[] = {
    { "", { "t.csv", "no header" } },
    { "# only a comment\n", { "no header", NULL } },
    { "target,sm_count\n", { "t.csv:1", "header must be exactly" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,"FWD",100\n", { "t.csv:2", "fields" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,,extra\n", { "t.csv:2", "17 fields" } },
    { HEADER "cpu,-1,ci,"FWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "sm_count '-1'" } },
    { HEADER "cpu,x,ci,"FWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "sm_count 'x'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1000_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "bucket 's1000_bh8'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",1024x8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "bucket '1024x8'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,fa8_fwd_cpu_nope,100,,,,,,,,,\n", { "t.csv:2", "'fa8_fwd_cpu_nope' is not in this build" } },
    { HEADER "cpu,2,ci,"BWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "has key "FWD_KEY } },
    { HEADER "sm_90a,2,ci,"FWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "for target cpu" } },
    { HEADER "cpu,2,ci,quant,s1024_bh8,"FWD",100,,,,,,,,,\n", { "t.csv:2", "key 'quant'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,"FWD",0,,,,,,,,,\n", { "t.csv:2", "median_us '0'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,"FWD",nan,,,,,,,,,\n", { "t.csv:2", "median_us 'nan'" } },
    { HEADER "cpu,2,ci,"FWD_KEY",s1024_bh8,"FWD",5,-3,,,,,,,,\n", { "t.csv:2", "'-3'" } },
    { HEADER "# fine\n" HEADER, { "t.csv:3", "sm_count 'sm_count'" } },   /* a second header is a row of bad fields */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    fa8__trow *rows = (fa8__trow *)1;
    size_t n = 7;
    const fa8_status st = parse(cases[i].text, &rows, &n);
    cr_expect_neq(st, FA8_OK, "case %zu was accepted", i);
    cr_expect(rows == NULL && n == 0, "case %zu: a refused table still returned rows", i);
    for (int k = 0; k < 2 && cases[i].want[k]; ++k)
      cr_expect(strstr(fa8_last_error(), cases[i].want[k]) != NULL, "case %zu: '%s' lacks '%s'", i, fa8_last_error(), cases[i].want[k]);
  }
}

/* ---- the lookup policy on explicit rows ---- */

static fa8__trow row(const char *inst, int sm, int64_t seq, int64_t bh, double us, int line) {
  fa8__trow r;
  memset(&r, 0, sizeof r);
  const fa8_kernel_desc *d = find(inst);
  cr_assert_not_null(d, "%s is not in this build", inst);
  snprintf(r.target, sizeof r.target, "%s", d->target);
  snprintf(r.key, sizeof r.key, "%s", d->key);
  r.sm_count = sm; r.seq = seq; r.bh = bh; r.instance = d; r.median_us = us;
  snprintf(r.source, sizeof r.source, "x.csv:%d", line);
  return r;
}

static fa8_problem problem(int S, int causal) {
  fa8_problem p;
  fa8_problem_init(&p);
  p.batch = 1; p.heads = 8; p.kv_heads = 2; p.seqlen_q = p.seqlen_k = S;
  p.hdim_qk = p.hdim_v = 64; p.causal = causal;
  return p;
}

static const char *pick(const fa8__trow *ov, size_t nov, const fa8__trow *tb, size_t ntb, fa8_problem p, char *why, size_t n) {
  const fa8__fit fit = { { 0, 0, 0, 0 }, 1 };
  const fa8_kernel_desc *d = fa8__tuned_select(ov, nov, tb, ntb, &p, &fit, FA8_DIR_FWD, "cpu", 2, why, n);
  return d ? d->name : NULL;
}

Test(tuned, fallback_order) {
  char why[400];
  const fa8_problem p = problem(1000, 0);   /* bucket s1024_bh8, 2 threads */
  int64_t bs, bb;
  fa8_tuning_bucket(&p, &bs, &bb);
  cr_expect(bs == 1024 && bb == 8, "bucket s%lld_bh%lld", (long long)bs, (long long)bb);
  fa8__trow t[4] = { row(FWD, 0, 8192, 8, 50, 1),    /* nearest bucket, 3 steps away */
                     row(FWD, 0, 512, 8, 90, 2),     /* nearest bucket, 1 step away */
                     row(FWD, 7, 1024, 8, 80, 3),    /* same bucket, another SM count */
                     row(FWD, 2, 1024, 8, 99, 4) };  /* exact */
  cr_assert_str_eq(pick(NULL, 0, t, 4, p, why, sizeof why), FWD);
  cr_expect(strstr(why, "exact row x.csv:4"), "%s", why);
  pick(NULL, 0, t, 3, p, why, sizeof why);
  cr_expect(strstr(why, "x.csv:3") && strstr(why, "another count"), "%s", why);
  pick(NULL, 0, t, 2, p, why, sizeof why);
  cr_expect(strstr(why, "nearest bucket s512_bh8") && strstr(why, "x.csv:2"), "%s", why);
  cr_expect_null(pick(NULL, 0, NULL, 0, p, why, sizeof why));
  cr_expect(!strncmp(why, "heuristic", 9), "%s", why);
}

Test(tuned, rows_that_do_not_apply_are_skipped) {
  char why[400];
  fa8__trow t[2] = { row(FWD, 2, 1024, 8, 10, 1), row(FWD, 2, 1024, 8, 10, 2) };
  snprintf(t[1].target, sizeof t[1].target, "sm_90a");   /* another target */
  /* a causal problem: the non-causal instance of the rows does not fit */
  cr_expect_null(pick(NULL, 0, t, 2, problem(1000, 1), why, sizeof why), "%s", why);
  /* the other target's row never wins, even when it would be exact */
  cr_expect_str_eq(pick(NULL, 0, &t[1], 1, problem(1000, 0), why, sizeof why) ? "picked" : "none", "none");
}

Test(tuned, ties_are_broken_deterministically) {
  char why[400], why2[400];
  const fa8_problem p = problem(1000, 0);
  /* same level and distance: the faster median wins, whatever the order */
  fa8__trow a[2] = { row(FWD, 0, 512, 8, 20, 1), row(FWD, 0, 2048, 8, 10, 2) };
  fa8__trow b[2] = { a[1], a[0] };
  pick(NULL, 0, a, 2, p, why, sizeof why);
  pick(NULL, 0, b, 2, p, why2, sizeof why2);
  cr_expect(strstr(why, "x.csv:2") && !strcmp(why, why2), "%s | %s", why, why2);
  /* equal in everything but the row: the first file:line, in either order */
  fa8__trow c[2] = { row(FWD, 0, 512, 8, 10, 5), row(FWD, 0, 512, 8, 10, 3) };
  fa8__trow d[2] = { c[1], c[0] };
  pick(NULL, 0, c, 2, p, why, sizeof why);
  pick(NULL, 0, d, 2, p, why2, sizeof why2);
  cr_expect(strstr(why, "x.csv:3") && !strcmp(why, why2), "%s | %s", why, why2);
  /* an exact SM count beats "any" at the same bucket */
  fa8__trow e[2] = { row(FWD, 0, 1024, 8, 1, 1), row(FWD, 2, 1024, 8, 50, 2) };
  pick(NULL, 0, e, 2, p, why, sizeof why);
  cr_expect(strstr(why, "x.csv:2") && strstr(why, "exact"), "%s", why);
}

Test(tuned, overlay_is_searched_first) {
  char why[400];
  const fa8_problem p = problem(1000, 0);
  fa8__trow ov = row(FWD, 0, 8192, 8, 500, 9), tb = row(FWD, 2, 1024, 8, 1, 1);
  pick(&ov, 1, &tb, 1, p, why, sizeof why);
  cr_expect(strstr(why, "overlay") && strstr(why, "x.csv:9"), "%s", why);
  /* an overlay without a row for this key leaves the table in charge */
  fa8__trow other = row(BWD, 2, 1024, 8, 1, 4);
  pick(&other, 1, &tb, 1, p, why, sizeof why);
  cr_expect(strstr(why, "built in") && strstr(why, "x.csv:1"), "%s", why);
}

/* ---- the public API ---- */

static char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/fa8_tuned_XXXXXX");
  const int fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

Test(tuned, overlay_api_changes_dispatch_and_says_why) {
  fa8_problem p = problem(1000, 0);
  fa8_dispatch_names n;
  cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK, "%s", fa8_last_error());
  cr_expect(!strstr(n.fwd_why, "overlay"), "%s", n.fwd_why);   /* the heuristic, or this build's own table */
  char *path = write_tmp(HEADER "cpu,0,ci,"FWD_KEY",s1024_bh8,"FWD",100,,,,,,,,,\n"
                                "cpu,0,ci,"BWD_KEY",s2048_bh8,"BWD",300,,,,,,,,,\n");
  cr_assert_eq(fa8_tuning_overlay(path), FA8_OK, "%s", fa8_last_error());
  cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK, "%s", fa8_last_error());
  cr_expect_str_eq(n.fwd, FWD);
  cr_expect(strstr(n.fwd_why, "overlay") && strstr(n.fwd_why, ":2"), "%s", n.fwd_why);
  cr_expect(strstr(n.bwd_why, "nearest bucket s2048_bh8") && strstr(n.bwd_why, ":3"), "%s", n.bwd_why);
  fa8_tuning_enable(0);
  cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK);
  cr_expect(strstr(n.fwd_why, "disabled"), "%s", n.fwd_why);
  fa8_tuning_enable(1);
  /* a bad file is refused with file:line and leaves the previous overlay in place */
  char *bad = write_tmp(HEADER "cpu,0,ci,"FWD_KEY",s1024_bh8,"FWD",-5,,,,,,,,,\n");
  cr_expect_neq(fa8_tuning_overlay(bad), FA8_OK);
  cr_expect(strstr(fa8_last_error(), ":2") && strstr(fa8_last_error(), "median_us '-5'"), "%s", fa8_last_error());
  cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK);
  cr_expect(strstr(n.fwd_why, "overlay"), "%s", n.fwd_why);
  cr_expect_neq(fa8_tuning_overlay("/nonexistent/t.csv"), FA8_OK);
  cr_expect(strstr(fa8_last_error(), "/nonexistent/t.csv"), "%s", fa8_last_error());
  cr_assert_eq(fa8_tuning_overlay(NULL), FA8_OK);
  cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK);
  cr_expect(!strstr(n.fwd_why, "overlay"), "%s", n.fwd_why);
}

Test(tuned, candidates_and_keys) {
  fa8_problem p = problem(1000, 0);
  const char *names[64];
  int cnt = 0;
  cr_assert_eq(fa8_candidates(&p, 0, names, 64, &cnt), FA8_OK, "%s", fa8_last_error());
  cr_assert_gt(cnt, 0);
  int has = 0;
  for (int i = 0; i < cnt && i < 64; ++i) {
    has |= !strcmp(names[i], FWD);
    cr_expect_str_eq(fa8_instance_key(names[i]), FWD_KEY);
  }
  cr_expect(has, "the dispatcher's forward is a candidate");
  p.delta = FA8_DELTA_SPLIT;
  cr_assert_eq(fa8_candidates(&p, 1, names, 64, &cnt), FA8_OK);
  cr_assert_gt(cnt, 0);
  for (int i = 0; i < cnt && i < 64; ++i) {
    cr_expect(strstr(names[i], "fa8_bundle_cpu_") && strstr(names[i], "_split_"), "%s", names[i]);
    cr_expect_str_eq(fa8_instance_key(names[i]), BWD_KEY);
    cr_expect_not_null(fa8_bundle_backward(names[i]));
  }
  cr_expect_null(fa8_instance_key("fa8_nope"));
}

/* fa8_instance_resources answers for CUDA instances only, and names what it refuses */
Test(tuned, instance_resources_refusals) {
  int32_t regs = -1, lb = -1;
  const char *which = NULL;
  cr_expect_eq(fa8_instance_resources(NULL, &regs, &lb, &which), FA8_ERR_NULL_POINTER);
  cr_expect_eq(fa8_instance_resources(FWD, NULL, &lb, &which), FA8_ERR_NULL_POINTER);
  cr_expect_eq(fa8_instance_resources("fa8_nope", &regs, &lb, &which), FA8_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(fa8_last_error(), "'fa8_nope'"), "%s", fa8_last_error());
  cr_expect_eq(fa8_instance_resources(FWD, &regs, &lb, &which), FA8_ERR_UNSUPPORTED);
  cr_expect(strstr(fa8_last_error(), FWD) && strstr(fa8_last_error(), "CUDA instances only"), "%s", fa8_last_error());
}

/* The table compiled into this build (tune/tables): every CPU row is found through the binary search and
 * used for a problem in its bucket, with the row named in the reason. */
Test(tuned, builtin_rows_are_used) {
  size_t used = 0;
  for (size_t i = 0; i < fa8_tuned_count; ++i) {
    const fa8_tuned_row *r = &fa8_tuned_rows[i];
    const fa8_kernel_desc *d = r->instance;
    if (strcmp(r->target, "cpu")) continue;   /* GPU rows need their device */
    fa8_problem p;
    fa8_problem_init(&p);
    p.batch = 1; p.seqlen_q = p.seqlen_k = (int32_t)r->seq; p.heads = (int32_t)r->bh;
    p.kv_heads = d->layout == FA8_LAYOUT_MHA || p.heads == 1 ? p.heads : d->layout == FA8_LAYOUT_MQA ? 1 : p.heads / 2;
    p.hdim_qk = d->hdim_qk; p.hdim_v = d->hdim_v; p.causal = d->causal; p.fmt_qkv = d->fmt;
    if (d->dir == FA8_DIR_BWD) p.fmt_grad = d->fmt_grad;
    p.delta = d->dir == FA8_DIR_FWD && d->variant == FA8_FWD_SPLIT ? FA8_DELTA_SPLIT : FA8_DELTA_MATCHED;
    p.num_threads = r->sm_count;
    fa8_dispatch_names n;
    cr_assert_eq(fa8_dispatch(&p, &n), FA8_OK, "row %s: %s", r->source, fa8_last_error());
    const char *name = d->dir == FA8_DIR_FWD ? n.fwd : n.bwd, *why = d->dir == FA8_DIR_FWD ? n.fwd_why : n.bwd_why;
    cr_expect(strstr(why, "tuned (built in)") != NULL, "row %s: %s", r->source, why);
    cr_expect_str_eq(fa8_instance_key(name), r->key, "row %s picked %s", r->source, name);
    ++used;
  }
  if (!used) cr_skip_test("no CPU rows in this build's tuned tables");
}

/* The tuner API refuses what it cannot use, naming it. */
Test(tuned, tuner_api_refuses_bad_arguments) {
  fa8_problem p = problem(1000, 0);
  const char *names[4];
  int cnt = 0;
  cr_expect_eq(fa8_candidates(NULL, 0, names, 4, &cnt), FA8_ERR_NULL_POINTER);
  cr_expect_eq(fa8_candidates(&p, 0, names, 4, NULL), FA8_ERR_NULL_POINTER);
  cr_expect_eq(fa8_candidates(&p, 0, NULL, 4, &cnt), FA8_ERR_NULL_POINTER);
  cr_expect(strstr(fa8_last_error(), "NULL") != NULL, "%s", fa8_last_error());
  p.heads = 0;
  cr_expect_eq(fa8_candidates(&p, 0, names, 4, &cnt), FA8_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(fa8_last_error(), "heads") != NULL, "%s", fa8_last_error());
  p = problem(1000, 0);
  const char *target, *name;
  int32_t sm;
  cr_expect_eq(fa8_device_info(&p, NULL, &sm, &name), FA8_ERR_NULL_POINTER);
  cr_expect_eq(fa8_device_info(&p, &target, &sm, &name), FA8_OK);
  cr_expect_str_eq(target, "cpu");
  cr_expect_gt(sm, 0);
  cr_expect_null(fa8_bundle_backward(NULL));
  cr_expect_null(fa8_bundle_backward("fa8_bundle_nope"));
}

/* fa8_plan_for_device: bad input is refused with the value named; a GPU backend planned for a target answers for
 * it (fa8_device_info) and clearing it restores the machine's own answer. */
Test(tuned, plan_for_device) {
  cr_expect_eq(fa8_plan_for_device(FA8_BACKEND_CPU, "sm_90a", 132), FA8_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(fa8_last_error(), "cpu") != NULL, "%s", fa8_last_error());
  cr_expect_eq(fa8_plan_for_device(FA8_BACKEND_CUDA, "sm_90a", -3), FA8_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(fa8_last_error(), "-3") != NULL, "%s", fa8_last_error());
  cr_expect_eq(fa8_plan_for_device(FA8_BACKEND_CUDA, "", 1), FA8_ERR_INVALID_ARGUMENT);
  cr_expect_eq(fa8_plan_for_device((fa8_backend)9, "sm_90a", 1), FA8_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(fa8_last_error(), "9") != NULL, "%s", fa8_last_error());
  cr_assert_eq(fa8_plan_for_device(FA8_BACKEND_CUDA, "sm_90a", 132), FA8_OK, "%s", fa8_last_error());
  fa8_problem p;
  fa8_problem_init(&p);
  p.backend = FA8_BACKEND_CUDA;
  const char *target = NULL, *name = NULL;
  int32_t sms = 0;
  cr_expect_eq(fa8_device_info(&p, &target, &sms, &name), FA8_OK, "%s", fa8_last_error());
  cr_expect(target && strcmp(target, "sm_90a") == 0 && sms == 132, "%s %d", target ? target : "(null)", sms);
  cr_assert_eq(fa8_plan_for_device(FA8_BACKEND_CUDA, NULL, 0), FA8_OK);
  target = NULL;
  if (fa8_device_info(&p, &target, &sms, &name) == FA8_OK)   /* a machine with a GPU answers for its own */
    cr_expect(!(target && strcmp(target, "sm_90a") == 0 && sms == 132 && strstr(name, "planned")), "still planned");
}
