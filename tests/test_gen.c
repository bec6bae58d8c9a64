/* Tests of the kernel generator (the gen/fa8 Lua modules) and of `fa8 gen|list|targets|decode`.
 *
 * Two kinds of checks:
 *   - Lua checks (lua_runner.h) load the generator's modules in-process and assert properties of the config
 *     model directly: predicates, naming, bundles, shadowing. They fail through assert()/error().
 *   - CLI checks run the real fa8 binary (FA8_EXE, else build/cli/fa8) through the shell and assert exit
 *     codes, messages and the files it writes.
 * Every test gets its own temporary directory (mkdtemp, removed afterwards), exported to Lua as
 * FA8_TEST_TMP. The binary runs with FA8_ROOT = this source tree, so Lua checks and CLI checks see the same
 * generator. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lua_runner.h"
#include "test_slurp.h"

/* ---- fixtures ------------------------------------------------------------------------------------- */

static char g_tmp[64];

static void make_tmp(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/fa8_test_gen_XXXXXX");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); abort(); }
    setenv("FA8_TEST_TMP", g_tmp, 1);
    if (!getenv("FA8_EXE") || !*getenv("FA8_EXE")) setenv("FA8_EXE", FA8_BUILD_ROOT "/cli/fa8", 1);
    if (!getenv("FA8_ROOT") || !*getenv("FA8_ROOT")) setenv("FA8_ROOT", FA8_SOURCE_ROOT, 1);
}

/* Buffers the helpers return live until the end of the test (freed in .fini): tests can use them freely
 * and LeakSanitizer still sees every allocation released. */
static void *g_keep[4096];
static int g_nkeep;
static void *keep(void *p) {
    if (p && g_nkeep < (int)(sizeof g_keep / sizeof g_keep[0])) g_keep[g_nkeep++] = p;
    return p;
}

static void remove_tmp(void) {
    while (g_nkeep > 0) free(g_keep[--g_nkeep]);
    if (!g_tmp[0] || strncmp(g_tmp, "/tmp/fa8_test_gen_", 18) != 0) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_tmp);
}

/* .init/.fini of the suite run around every test, in the test's own process (also after a failed assert) */
TestSuite(gen, .init = make_tmp, .fini = remove_tmp);

/* ---- helpers -------------------------------------------------------------------------------------- */

static void spit(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(content, f);
    fclose(f);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* g_tmp/name, malloc'd (each test is a short-lived process: not freed) */
static char *tmp_path(const char *name) {
    size_t n = strlen(g_tmp) + strlen(name) + 2;
    char *p = keep(malloc(n));
    snprintf(p, n, "%s/%s", g_tmp, name);
    return p;
}

typedef struct {
    int code;  /* exit status; -1 when it did not exit normally (a crash) */
    char *out; /* stdout */
    char *err; /* stderr */
} proc;

/* Runs `sh -c "'$FA8_EXE' ARGS"`, capturing stdout and stderr separately (through files in g_tmp).
 * ARGS is a printf format and is shell syntax: quote globs. */
static proc fa8(const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/.stdout' 2>'%s/.stderr'", getenv("FA8_EXE"), args, g_tmp, g_tmp);
    int st = system(cmd);
    proc p = {-1, NULL, NULL};
    if (st != -1 && WIFEXITED(st)) p.code = WEXITSTATUS(st);
    /* the shell reports a child killed by a signal as 128+N: treat it as a crash, never as an exit code */
    if (p.code > 128) p.code = -1;
    char path[512];
    snprintf(path, sizeof path, "%s/.stdout", g_tmp);
    p.out = test_slurp(path, NULL);
    snprintf(path, sizeof path, "%s/.stderr", g_tmp);
    p.err = test_slurp(path, NULL);
    if (!p.out) p.out = strdup("");
    if (!p.err) p.err = strdup("");
    keep(p.out);
    keep(p.err);
    return p;
}

/* Runs a shell command with output to a log file; returns its exit status (or -1). */
static int shell(const char *log, const char *fmt, ...) {
    char c[4096], cmd[5000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s >'%s' 2>&1", c, log);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Sorted names of the plain files in `dir`. Returns the count; names are malloc'd. */
static int list_dir(const char *dir, char **names, int max) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.') continue;
        names[n++] = keep(strdup(e->d_name));
    }
    closedir(d);
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; --j) {
            char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t;
        }
    return n;
}

/* Lua checks: PRELUDE is prepended to every chunk (compile-time string concatenation). */
#define PRELUDE                                                                                          \
    "local TMP = assert(os.getenv('FA8_TEST_TMP'), 'FA8_TEST_TMP unset')\n"                              \
    "local FA8 = assert(os.getenv('FA8_EXE'), 'FA8_EXE unset')\n"                                        \
    "local ROOT = require('fa8.emit').root\n"                                                            \
    "local schema = require('fa8.schema')\n"                                                             \
    "local targets = require('fa8.targets')\n"                                                           \
    "local naming = require('fa8.naming')\n"                                                             \
    "local constraints = require('fa8.constraints')\n"                                                   \
    "local enumerate = require('fa8.enumerate')\n"                                                       \
    "local bundle = require('fa8.bundle')\n"                                                             \
    "local reg = targets.registry()\n"                                                                   \
    "local function q(s) assert(not s:find(\"'\", 1, true)); return \"'\" .. s .. \"'\" end\n"           \
    "local function has(s, sub) return tostring(s):find(sub, 1, true) ~= nil end\n"                      \
    "local function read(p) local f = assert(io.open(p, 'rb')); local s = f:read('a'); f:close(); return s end\n" \
    "-- run fa8 through popen (stderr merged); returns output, exit code\n"                              \
    "local function run(args)\n"                                                                         \
    "  local p = assert(io.popen(q(FA8) .. ' ' .. args .. ' 2>&1', 'r'))\n"                              \
    "  local out = p:read('a'); local _, how, code = p:close()\n"                                        \
    "  return out, how == 'exit' and code or -1\n"                                                       \
    "end\n"                                                                                              \
    "-- fn must raise an error whose message contains every further argument\n"                         \
    "local function expect_error(fn, ...)\n"                                                             \
    "  local ok, msg = pcall(fn)\n"                                                                      \
    "  assert(not ok, 'expected an error, got none')\n"                                                  \
    "  for _, sub in ipairs({...}) do assert(has(msg, sub), ('error <%s> lacks <%s>'):format(msg, sub)) end\n" \
    "  return msg\n"                                                                                     \
    "end\n"                                                                                              \
    "-- crafted configs: BASE per direction, overridden by `over` (d = both head dims)\n"                \
    "local BASE = {\n"                                                                                   \
    "  quant = { fmt = 'e4m3', hdim = 64, intype = 'f32', scale = 'block' },\n"                          \
    "  fwd = { fmt = 'e4m3', hdim_qk = 64, hdim_v = 64, layout = 'gqa', causal = false, variant = 'std', scale = 'block' },\n" \
    "  delta = { fmt = 'e4m3', fmt_grad = 'e4m3', hdim_qk = 64, hdim_v = 64, layout = 'gqa', causal = false, delta = 'stale', scale = 'block' },\n" \
    "  bwd = { fmt = 'e4m3', fmt_grad = 'e4m3', hdim_qk = 64, hdim_v = 64, layout = 'gqa', causal = false, scale = 'block' },\n" \
    "}\n"                                                                                                \
    "local function mk(tname, dir, over, tile, pipe)\n"                                                  \
    "  local tg = assert(reg.by_name[tname], tname)\n"                                                   \
    "  local f = { dir = dir }\n"                                                                        \
    "  for k, v in pairs(BASE[dir]) do f[k] = v end\n"                                                   \
    "  for k, v in pairs(over or {}) do if k == 'd' then f.hdim_qk, f.hdim_v = v, v else f[k] = v end end\n" \
    "  tile = tile or { 64, 64, 1, 1 }\n"                                                                \
    "  local c = { functional = f, target = tg, tuning = { block_m = tile[1], block_n = tile[2],\n"       \
    "    warps = tile[3], stages = tile[4], pipeline = pipe or tg.pipelines[1], vperm = tile.vperm == true,\n" \
    "    unitskip = tile.unitskip == true, qheads = tile.qheads or 0 } }\n"                             \
    "  schema.check(c)   -- crafted configs are well-formed: only the predicate under test objects\n"    \
    "  c.name = naming.encode(c)\n"                                                                      \
    "  return c\n"                                                                                       \
    "end\n"

static void lua_ok_impl(const char *code, const char *what) {
    static char err[16384];
    int rc = lua_check(code, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: Lua check failed:\n%s", what, err);
}
#define LUA_OK(code) lua_ok_impl(PRELUDE code, __func__)

/* =================================================================================================== */
/* 1. lua_runner itself: a check can pass, can fail, and starts from a clean, correctly configured state */

Test(gen, lua_runner_passes_and_fails) {
    char err[256];
    cr_assert_eq(lua_check("assert(1 + 1 == 2)", err, sizeof err), 0, "%s", err);
    cr_assert_str_empty(err);
    cr_assert_neq(lua_check("assert(false, 'boom from assert')", err, sizeof err), 0);
    cr_assert(strstr(err, "boom from assert"), "message not copied: %s", err);
    cr_assert_neq(lua_check("error('boom from error')", err, sizeof err), 0);
    cr_assert(strstr(err, "boom from error"), "message not copied: %s", err);
    cr_assert_neq(lua_check("this is not Lua", err, sizeof err), 0, "a syntax error must fail");
    cr_assert(strstr(err, "syntax error") || strstr(err, "expected"), "%s", err);
    /* a short buffer gets a truncated, terminated message */
    char small[8];
    cr_assert_neq(lua_check("error('0123456789abcdef', 0)", small, sizeof small), 0);
    cr_assert_str_eq(small, "0123456");
}

Test(gen, lua_runner_fresh_state_and_paths) {
    char err[1024];
    cr_assert_eq(lua_check("LEAKED = 1", err, sizeof err), 0, "%s", err);
    cr_assert_eq(lua_check("assert(LEAKED == nil, 'state shared between calls')", err, sizeof err), 0, "%s", err);
    /* the generator's modules come from this source tree, the libraries from Lua's default path */
    cr_assert_eq(lua_check("assert(package.searchpath('fa8.schema', package.path) == '" FA8_SOURCE_ROOT
                           "/gen/fa8/schema.lua', package.path)\n"
                           "assert(require('fa8.emit').root == '" FA8_SOURCE_ROOT "')\n"
                           "assert(require('dkjson') and require('pl.template') and require('argparse'))",
                           err, sizeof err),
                 0, "%s", err);
}

/* =================================================================================================== */
/* 2. Constraints: each named predicate rejects a crafted config, naming the figure and the limit, and
 *    accepts a valid one. Every predicate must be exercised both ways (a new one needs a case here). */

Test(gen, predicates_reject_and_accept) {
    LUA_OK(
        "local seen_rej, seen_acc = {}, {}\n"
        "local function rejects(pred, c, ...)\n"
        "  local p = assert(constraints.by_name[pred], 'no predicate ' .. pred)\n"
        "  local ok, why = p.fn(c)\n"
        "  assert(not ok, pred .. ' accepted ' .. c.name)\n"
        "  for _, s in ipairs({...}) do assert(has(why, s), ('%s on %s: reason <%s> lacks <%s>'):format(pred, c.name, why, s)) end\n"
        "  local all, reason = constraints.check(c)\n"
        "  assert(not all and reason:match('^[%w_]+: .+'), 'check() accepted ' .. c.name)\n"
        "  seen_rej[pred] = true\n"
        "end\n"
        "local function accepts(pred, c)\n"
        "  local ok, why = constraints.by_name[pred].fn(c)\n"
        "  assert(ok, ('%s rejected %s: %s'):format(pred, c.name, tostring(why)))\n"
        "  seen_acc[pred] = true\n"
        "end\n"
        "-- smem on sm_89: fwd d256, 128x128, 2 stages, as templates/cuda/fwd.cu.tpl lays it out (rows padded by 16 B):\n"
        "-- Q 128*272 + K 2*128*272 + V^t 2*256*144 + P 128*144 + K scales 2*128*4 + V scales 2*4 = 197640 B\n"
        "local big = mk('sm_89', 'fwd', { d = 256 }, { 128, 128, 8, 2 })\n"
        "rejects('smem_fits', big, 'shared memory', '197640', '101376', 'sm_89')\n"
        "assert(select(2, constraints.check(big)):match('^smem_fits: '), 'smem_fits should be the first failure')\n"
        "accepts('smem_fits', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 4, 2 }))\n"
        "-- the figures are each kernel's own layout (its static_assert holds the template to it): the d128 wgmma\n"
        "-- backward with 4 stages needs its dQ staging slabs too (263344 B: it failed to launch on the H200 when the\n"
        "-- model counted 193 KB), 2 stages fit; sm_89's 64x32 d256 portable backward needs 114976 B of 101376\n"
        "rejects('smem_fits', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 4 }, 'wgmma'), '263344', '232448', 'sm_90a')\n"
        "accepts('smem_fits', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 2 }, 'wgmma'))\n"
        "rejects('smem_fits', mk('sm_89', 'bwd', { d = 256 }, { 64, 32, 8, 1 }), '114976', '101376')\n"
        "accepts('smem_fits', mk('sm_89', 'bwd', { d = 256 }, { 32, 32, 4, 1 }))\n"
        "-- mma: the forward takes one or two warps per 16 rows (two split O's columns): 64 rows on 4 or 8 warps, not 6 or 16\n"
        "rejects('warps_cover_tile', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 6, 2 }), 'BLOCK_M 64', '6 warps', '16 rows', '(4 or 8)')\n"
        "rejects('warps_cover_tile', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 16, 2 }), 'BLOCK_M 64', '16 warps')\n"
        "accepts('warps_cover_tile', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 8, 2 }))\n"
        "accepts('warps_cover_tile', mk('sm_89', 'fwd', { d = 128 }, { 128, 64, 8, 2 }))\n"
        "-- two warps per row group split V's 8-column MMA tiles: d_v 8 has one\n"
        "rejects('warps_cover_tile', mk('sm_89', 'fwd', { d = 8 }, { 64, 32, 8, 2 }), 'head dim 8', '2 column groups of 8')\n"
        "-- sm_90a lowers FP8 mma.sync to F16 (targets.lua fp8_lowered): its d256 forward does not fit one warp per 16 rows\n"
        "-- (nvcc 13 spilled 260-544 bytes there), two warps do; sm_89 keeps one (168 registers, no spills)\n"
        "rejects('regs_fit', mk('sm_90a', 'fwd', { d = 256 }, { 64, 32, 4, 2 }, 'mma'), 'register estimate 272', '255', 'sm_90a')\n"
        "accepts('regs_fit', mk('sm_90a', 'fwd', { d = 256 }, { 64, 32, 8, 2 }, 'mma'))\n"
        "accepts('regs_fit', mk('sm_89', 'fwd', { d = 256 }, { 64, 32, 4, 2 }))\n"
        "-- wgmma: 12 warps = producer + 2 consumer warpgroups, so BLOCK_M must be 128\n"
        "rejects('warps_cover_tile', mk('sm_90a', 'fwd', { d = 128 }, { 64, 128, 12, 2 }), 'BLOCK_M 64', '64 x 2')\n"
        "rejects('warps_cover_tile', mk('sm_90a', 'fwd', { d = 128 }, { 64, 128, 6, 2 }), 'warpgroups', '6 warps')\n"
        "accepts('warps_cover_tile', mk('sm_90a', 'fwd', { d = 128 }, { 128, 128, 12, 2 }))\n"
        "accepts('warps_cover_tile', mk('sm_90a', 'fwd', { d = 128 }, { 64, 128, 8, 2 }))\n"
        "-- cpu: one thread, one stage per tile\n"
        "rejects('warps_cover_tile', mk('cpu', 'fwd', {}, { 64, 64, 2, 1 }), 'w1s1')\n"
        "accepts('warps_cover_tile', mk('cpu', 'fwd', {}, { 64, 64, 1, 1 }))\n"
        "-- f32 (quantization off) is a cpu-only test format\n"
        "local f32gpu = mk('sm_89', 'fwd', { fmt = 'f32' }, { 64, 64, 4, 2 })\n"
        "rejects('test_format_cpu_only', f32gpu, 'f32', 'cpu')\n"
        "rejects('fmt_supported', f32gpu, 'f32', 'sm_89')\n"
        "accepts('test_format_cpu_only', mk('cpu', 'fwd', { fmt = 'f32' }))\n"
        "rejects('fmt_supported', mk('sm_89', 'bwd', { fmt_grad = 'e4m3fnuz' }, { 64, 64, 4, 2 }), 'e4m3fnuz', 'sm_89')\n"
        "rejects('fmt_supported', mk('gfx942', 'fwd', { fmt = 'e4m3' }, { 128, 64, 4, 1 }), 'e4m3', 'gfx942')\n"
        "accepts('fmt_supported', mk('gfx90a', 'fwd', { fmt = 'e4m3fnuz' }, { 128, 64, 4, 1 }))   -- emulated counts\n"
        "-- head dim vs the MMA K of the pipeline: 80 is fine for K=16 (gfx942), not for K=32 (sm_89)\n"
        "rejects('hdim_divides_mma_k', mk('sm_89', 'fwd', { d = 80 }, { 64, 64, 4, 2 }), 'head dim 80', 'K=32')\n"
        "accepts('hdim_divides_mma_k', mk('gfx942', 'fwd', { d = 80, fmt = 'e4m3fnuz' }, { 128, 64, 4, 1 }))\n"
        "accepts('hdim_divides_mma_k', mk('sm_89', 'fwd', { d = 96 }, { 64, 64, 4, 2 }))\n"
        "rejects('hdim_limits', mk('cpu', 'fwd', { d = 72 }), '72', 'multiple of 16')\n"
        "rejects('hdim_limits', mk('cpu', 'quant', { hdim = 272 }), '272', '256')\n"
        "accepts('hdim_limits', mk('cpu', 'fwd', { hdim_qk = 192, hdim_v = 128, layout = 'mla' }))\n"
        "-- registers: 4 warps hold O (128x256) and S (128x128) in FP32: (32768+16384)/128 + 48 = 432\n"
        "rejects('regs_fit', mk('sm_89', 'fwd', { d = 256 }, { 128, 128, 4, 1 }), 'register estimate 432', '255', 'sm_89')\n"
        "-- HIP backward, per lane: dK + dV fragments (32 x 256 / 64 each at one wave), P and dP^ (2 x 32), 220 + d/4:\n"
        "-- one wave cannot hold d192 or d256; two waves (half the columns each) at 64 x 32 can, with streamed LDS\n"
        "local h256, h192 = { d = 256, fmt = 'e4m3fnuz', fmt_grad = 'e4m3fnuz' }, { d = 192, fmt = 'e4m3fnuz', fmt_grad = 'e5m2fnuz' }\n"
        "rejects('regs_fit', mk('gfx942', 'bwd', h256, { 32, 32, 1, 1 }), 'register estimate 604', '512', 'gfx942')\n"
        "rejects('regs_fit', mk('gfx90a', 'bwd', h192, { 32, 32, 1, 1 }), 'register estimate 524', '512', 'gfx90a')\n"
        "for _, tn in ipairs({ 'gfx942', 'gfx90a' }) do\n"
        "  for _, g in ipairs({ h256, h192 }) do\n"
        "    local c = mk(tn, 'bwd', g, { 64, 32, 2, 1 })\n"
        "    accepts('regs_fit', c); accepts('smem_fits', c)\n"
        "    assert(constraints.check(c), c.name)\n"
        "    local r = constraints.resources(c)\n"
        "    -- clang-19 (check-gcn): d256 62224 B LDS, 455-463 VGPR+AGPR; d192 48912 B, 382-385\n"
        "    local want = g.d == 256 and { 62232, 476 } or { 48920, 428 }\n"
        "    assert(r.stream and r.smem_bytes == want[1] and r.regs == want[2],\n"
        "      ('%s: stream %s, %d B, %d regs'):format(c.name, tostring(r.stream), r.smem_bytes, r.regs))\n"
        "  end\n"
        "end\n"
        "-- wgmma bwd, per consumer thread: dK + dV (64 + 64), then max(S^t + dP^t = BLOCK_M, dQ 32 + fragments 32) + 40\n"
        "rejects('regs_fit', mk('sm_90a', 'bwd', { d = 128 }, { 128, 128, 12, 2 }, 'wgmma'), 'register estimate 296', '240')\n"
        "accepts('regs_fit', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 2 }, 'wgmma'))\n"
        "rejects('regs_fit', mk('sm_90a', 'bwd', { d = 192 }, { 64, 128, 12, 2 }, 'wgmma'), 'register estimate 296')\n"
        "rejects('warps_cover_tile', mk('sm_90a', 'bwd', { d = 128 }, { 128, 128, 12, 2 }, 'wgmma'), 'BLOCK_M 64', 'BLOCK_N 64 x 2')\n"
        "-- d > 128: the head-dim-split backward (bwd_wgmma_wide), one 64-key tile, two consumer warpgroups: dK + dV\n"
        "-- (d/4 + d/4), max(S^t + dP^t 32, dQ d/4) + 40 within the 232 its 40-register producer leaves; shared memory\n"
        "-- as its Smem struct (d256: one Q^t / dO^t buffer, 231800 B; d192, MLA: two); a third Q / dO stage does not fit\n"
        "local s256 = mk('sm_90a', 'bwd', { d = 256 }, { 64, 64, 12, 2 }, 'wgmma')\n"
        "assert(constraints.check(s256))\n"
        "local r256 = constraints.resources(s256)\n"
        "assert(r256.regs == 232 and r256.reg_budget == 232 and r256.smem_bytes == 231800, ('d256 64x64: %d regs, %d B'):format(r256.regs, r256.smem_bytes))\n"
        "assert(constraints.wgmma_bwd_wide_tstages(s256) == 1)\n"
        "local mla = mk('sm_90a', 'bwd', { hdim_qk = 192, hdim_v = 128, layout = 'mla' }, { 64, 64, 12, 2 }, 'wgmma')\n"
        "assert(constraints.check(mla) and constraints.wgmma_bwd_wide_tstages(mla) == 2)\n"
        "rejects('smem_fits', mk('sm_90a', 'bwd', { d = 256 }, { 64, 64, 12, 3 }, 'wgmma'), 'shared memory', '232448')\n"
        "rejects('warps_cover_tile', mk('sm_90a', 'bwd', { d = 256 }, { 64, 64, 16, 2 }, 'wgmma'), 'BLOCK_N 64 x 3')\n"
        "assert(constraints.check(mk('sm_90a', 'delta', { d = 256, delta = 'matched' }, { 64, 64, 12, 2 }, 'wgmma')))\n"
        "accepts('regs_fit', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 4, 2 }))\n"
        "rejects('pipeline_on_target', mk('cpu', 'fwd', {}, { 64, 64, 1, 1 }, 'mma'), 'mma', 'cpu')\n"
        "accepts('pipeline_on_target', mk('sm_90a', 'fwd', { d = 128 }, { 64, 64, 4, 2 }, 'mma'))\n"
        "rejects('tile_divides_mma', mk('sm_89', 'fwd', { d = 128 }, { 64, 48, 4, 2 }), 'BLOCK_N 48', 'K=32')\n"
        "rejects('tile_divides_mma', mk('gfx942', 'fwd', { fmt = 'e4m3fnuz' }, { 48, 64, 4, 1 }), 'BLOCK_M 48', 'M=32')\n"
        "accepts('tile_divides_mma', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 4, 2 }))\n"
        "rejects('threads_fit', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 64, 2 }), '2048 threads', '1024')\n"
        "accepts('threads_fit', mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 32, 2 }))\n"
        "-- wgmma operands travel in 64-byte swizzle chunks: BLOCK_N 96 does not split into them; head dim 96 runs\n"
        "-- padded to 128 in the d <= 128 kernels, but a head dim above 128 must be whole chunks (the wide backward)\n"
        "accepts('wgmma_swizzle_chunks', mk('sm_90a', 'fwd', { d = 96 }, { 128, 128, 12, 2 }))\n"
        "accepts('wgmma_swizzle_chunks', mk('sm_90a', 'bwd', { d = 96 }, { 64, 128, 12, 2 }))\n"
        "rejects('wgmma_swizzle_chunks', mk('sm_90a', 'fwd', { d = 160 }, { 128, 128, 12, 3 }), '160x160', '64-byte')\n"
        "rejects('wgmma_swizzle_chunks', mk('sm_90a', 'fwd', { d = 128 }, { 128, 96, 12, 2 }), 'BLOCK_N 96')\n"
        "accepts('wgmma_swizzle_chunks', mk('sm_90a', 'fwd', { hdim_qk = 192, hdim_v = 128, layout = 'mla' }, { 128, 64, 12, 2 }))\n"
        "accepts('wgmma_swizzle_chunks', mk('sm_90a', 'fwd', { d = 96 }, { 64, 64, 4, 2 }, 'mma'))\n"
        "-- vperm: the wgmma forward's option only (its spare producer warps permute V^t)\n"
        "rejects('vperm_wgmma_fwd', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 2, vperm = true }, 'wgmma'), 'vperm', 'wgmma bwd')\n"
        "rejects('vperm_wgmma_fwd', mk('sm_90a', 'fwd', { d = 128 }, { 64, 64, 4, 2, vperm = true }, 'mma'), 'mma fwd')\n"
        "accepts('vperm_wgmma_fwd', mk('sm_90a', 'fwd', { d = 128 }, { 128, 128, 12, 2, vperm = true }, 'wgmma'))\n"
        "-- unitskip: the wgmma forward's option only (its vote guards that kernel's O rescale)\n"
        "rejects('unitskip_wgmma_fwd', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 2, unitskip = true }, 'wgmma'), 'unitskip', 'wgmma bwd')\n"
        "rejects('unitskip_wgmma_fwd', mk('sm_90a', 'fwd', { d = 128 }, { 64, 64, 4, 2, unitskip = true }, 'mma'), 'mma fwd')\n"
        "rejects('unitskip_wgmma_fwd', mk('cpu', 'fwd', { d = 64 }, { 64, 64, 1, 1, unitskip = true }), 'scalar fwd')\n"
        "accepts('unitskip_wgmma_fwd', mk('sm_90a', 'fwd', { d = 128 }, { 192, 128, 16, 3, vperm = true, unitskip = true }, 'wgmma'))\n"
        "-- O's TMA-store staging (constraints.wgmma_fwd_o_staging, the template's O_TMA): one 64 x v BF16 tile per\n"
        "-- consumer warpgroup, two for split (O and its remainder); none where Q + the K / V ring + staging + 2 KB\n"
        "-- pass sm_90a's 232448 B (d256: 229376 B of Q and ring; MLA split: 260096 B in all)\n"
        "local function fw(over, tile) return mk('sm_90a', 'fwd', over, tile, 'wgmma') end\n"
        "local t3 = { 192, 128, 16, 3, vperm = true }\n"
        "local std128, split128 = fw({ d = 128 }, t3), fw({ d = 128, variant = 'split' }, t3)\n"
        "assert(constraints.wgmma_fwd_o_staging(std128) == 3 * 64 * 128 * 2)\n"
        "assert(constraints.wgmma_fwd_o_staging(split128) == 2 * 3 * 64 * 128 * 2)\n"
        "assert(constraints.wgmma_fwd_o_staging(fw({ d = 96 }, { 128, 128, 12, 2 })) == 2 * 64 * 128 * 2, 'd96 stages its padded 128 columns')\n"
        "assert(constraints.wgmma_fwd_o_staging(fw({ d = 256 }, { 128, 128, 12, 3 })) == 0)\n"
        "local mla = { hdim_qk = 192, hdim_v = 128, layout = 'mla' }\n"
        "assert(constraints.wgmma_fwd_o_staging(fw(mla, t3)) == 3 * 64 * 128 * 2)\n"
        "mla.variant = 'split'\n"
        "assert(constraints.wgmma_fwd_o_staging(fw(mla, t3)) == 0)\n"
        "-- the launch's shared memory counts it: split's second tile, and the 1 KB placeholder where none fits\n"
        "assert(constraints.cuda_smem(split128) - constraints.cuda_smem(std128) == 3 * 64 * 128 * 2)\n"
        "assert(constraints.cuda_smem(fw({ d = 256, variant = 'split' }, { 128, 128, 12, 3 })) == constraints.cuda_smem(fw({ d = 256 }, { 128, 128, 12, 3 })))\n"
        "-- qheads: the causal wgmma backward's grid, with head groups (an MHA instance's group is one head)\n"
        "rejects('qheads_wgmma_bwd_causal', mk('sm_90a', 'bwd', { d = 128 }, { 64, 128, 12, 2, qheads = 4 }, 'wgmma'), 'qheads 4', 'non-causal')\n"
        "rejects('qheads_wgmma_bwd_causal', mk('sm_90a', 'bwd', { d = 128, causal = true, layout = 'mha' }, { 64, 128, 12, 2, qheads = 2 }, 'wgmma'), 'causal mha')\n"
        "rejects('qheads_wgmma_bwd_causal', mk('sm_90a', 'bwd', { d = 128, causal = true }, { 64, 64, 8, 1, qheads = 4 }, 'mma'), 'mma causal gqa bwd')\n"
        "rejects('qheads_wgmma_bwd_causal', mk('sm_90a', 'fwd', { d = 128, causal = true }, { 128, 128, 12, 2, qheads = 4 }, 'wgmma'), 'fwd')\n"
        "accepts('qheads_wgmma_bwd_causal', mk('sm_90a', 'bwd', { d = 128, causal = true }, { 64, 128, 12, 2, qheads = 4 }, 'wgmma'))\n"
        "accepts('qheads_wgmma_bwd_causal', mk('sm_90a', 'bwd', { hdim_qk = 192, hdim_v = 128, layout = 'mla', causal = true }, { 64, 64, 12, 2, qheads = 2 }, 'wgmma'))\n"
        "-- HIP (templates/hip): LDS as the kernels lay it out, 32 rows per wave, wave64\n"
        "local fnuz, fnuz_g = { d = 128, fmt = 'e4m3fnuz' }, { d = 128, fmt = 'e4m3fnuz', fmt_grad = 'e4m3fnuz' }\n"
        "-- the backward keeps its tiles resident where they fit (d128 64x32: 58136 B) and streams the query side\n"
        "-- where they do not (d128 64x64: 77848 B resident, 51224 B streamed); d256 64x64 fits neither way\n"
        "local g256 = { d = 256, fmt = 'e4m3fnuz', fmt_grad = 'e4m3fnuz' }\n"
        "rejects('smem_fits', mk('gfx942', 'bwd', g256, { 64, 64, 2, 1 }), '86040', '65536', 'gfx942')\n"
        "accepts('smem_fits', mk('gfx942', 'bwd', fnuz_g, { 64, 32, 2, 1 }))\n"
        "local r128 = constraints.resources(mk('gfx942', 'bwd', fnuz_g, { 64, 32, 2, 1 }))\n"
        "assert(r128.smem_bytes == 58136 and not r128.stream, 'd128 64x32: resident, 58136 B')\n"
        "r128 = constraints.resources(mk('gfx942', 'bwd', fnuz_g, { 64, 64, 2, 1 }))\n"
        "assert(r128.smem_bytes == 51224 and r128.stream, 'd128 64x64: streamed, 51224 B')\n"
        "rejects('warps_cover_tile', mk('gfx942', 'fwd', fnuz, { 128, 64, 2, 1 }), 'BLOCK_M 128', '2 waves', '32 rows')\n"
        "rejects('warps_cover_tile', mk('gfx90a', 'bwd', fnuz_g, { 64, 128, 8, 1 }), 'head dim 128', '8 waves x 32')\n"
        "accepts('warps_cover_tile', mk('gfx942', 'fwd', fnuz, { 128, 64, 4, 1 }))\n"
        "local w32 = mk('gfx942', 'fwd', fnuz, { 128, 64, 4, 1 })\n"
        "w32.target = setmetatable({ name = 'gfx942w32', warp_size = 32 }, { __index = w32.target })\n"
        "rejects('wave_size', w32, 'wave size of 64', 'gfx942w32', '32')\n"
        "accepts('wave_size', mk('gfx90a', 'fwd', fnuz, { 128, 64, 4, 1 }))\n"
        "for _, p in ipairs(constraints.predicates) do\n"
        "  assert(seen_rej[p.name] and seen_acc[p.name], 'predicate ' .. p.name .. ' has no reject/accept case here')\n"
        "end\n"
        "-- a valid config passes check() as a whole\n"
        "assert(constraints.check(mk('sm_89', 'fwd', { d = 128 }, { 64, 64, 4, 2 })))\n"
        "assert(constraints.check(mk('sm_90a', 'fwd', { d = 128 }, { 128, 128, 12, 2 })))\n");
}

/* Property: whatever the shipped profiles emit, for every built-in target, passes every predicate and fits
 * the target's limits; what they prune carries a reason that the named predicate reproduces. */
Test(gen, profiles_emit_only_valid_instances) {
    LUA_OK(
        "for _, pname in ipairs({ 'minimal', 'default', 'tuning' }) do\n"
        "  for _, tg in ipairs(reg.list) do\n"
        "    local res = enumerate.run({ registry = reg, profile = pname, targets = { tg.name } })\n"
        "    local where = pname .. '/' .. tg.name\n"
        "    assert(#res.instances > 0, where .. ': no instances')\n"
        "    local names = {}\n"
        "    for _, c in ipairs(res.instances) do\n"
        "      assert(not names[c.name], where .. ': duplicate ' .. c.name); names[c.name] = true\n"
        "      schema.check(c, c.name)\n"
        "      for _, p in ipairs(constraints.predicates) do\n"
        "        local ok, why = p.fn(c)\n"
        "        assert(ok, ('%s: %s fails %s: %s'):format(where, c.name, p.name, tostring(why)))\n"
        "      end\n"
        "      local r = constraints.resources(c)\n"
        "      assert(r.smem_bytes <= tg.smem_bytes, c.name .. ' smem over the limit')\n"
        "      assert(r.regs <= tg.regs_per_thread, c.name .. ' regs over the limit')\n"
        "      assert(c.tuning.warps * tg.warp_size <= tg.max_threads, c.name .. ' too many threads')\n"
        "      assert(c.resources.smem_bytes == r.smem_bytes and c.resources.regs == r.regs, c.name .. ' stale resources')\n"
        "    end\n"
        "    for _, rj in ipairs(res.rejected) do\n"
        "      assert(not names[rj.name], where .. ': rejected and emitted: ' .. rj.name)\n"
        "      local pred, why = rj.reason:match('^([%w_]+): (.+)$')\n"
        "      assert(pred and constraints.by_name[pred] and #why > 0, where .. ': bad reason for ' .. rj.name .. ': ' .. rj.reason)\n"
        "      local c = naming.decode(rj.name, reg)\n"
        "      local ok, again = constraints.check(c)\n"
        "      assert(not ok and again == rj.reason, ('%s: %s: recorded <%s>, recomputed <%s>'):format(where, rj.name, rj.reason, tostring(again)))\n"
        "    end\n"
        "  end\n"
        "end\n"
        "-- the GPU tuning sets are big enough that something is always pruned: the reasons path is exercised\n"
        "local res = enumerate.run({ registry = reg, profile = 'tuning', targets = { 'sm_89' } })\n"
        "assert(#res.rejected > 0)\n");
}

/* `fa8 list --rejected`: one line per pruned config, "NAME  predicate: reason". */
Test(gen, cli_rejected_lists_reasons) {
    static const char *preds[] = {"pipeline_on_target", "fmt_supported", "hdim_limits", "hdim_divides_mma_k",
                                  "tile_divides_mma", "warps_cover_tile", "wgmma_swizzle_chunks", "vperm_wgmma_fwd", "qheads_wgmma_bwd_causal",
                                  "threads_fit", "smem_fits", "regs_fit", "test_format_cpu_only"};
    proc p = fa8("list --target sm_90a,sm_89 --profile tuning --rejected");
    cr_assert_eq(p.code, 0, "exit %d: %s", p.code, p.err);
    int lines = 0, smem = 0, regs = 0;
    for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n")) {
        ++lines;
        cr_assert(strncmp(line, "fa8_", 4) == 0, "line does not start with a name: %s", line);
        char *sep = strstr(line, "  ");
        cr_assert_not_null(sep, "no reason on line: %s", line);
        sep += 2;
        int known = 0;
        for (size_t i = 0; i < sizeof preds / sizeof *preds; ++i) {
            size_t n = strlen(preds[i]);
            if (strncmp(sep, preds[i], n) == 0 && sep[n] == ':' && sep[n + 1] == ' ' && sep[n + 2]) known = 1;
        }
        cr_assert(known, "reason does not start with a predicate name: %s", line);
        smem += strstr(sep, "smem_fits: shared memory") != NULL;
        regs += strstr(sep, "regs_fit: register estimate") != NULL;
    }
    cr_assert_gt(lines, 0, "the GPU tuning sets prune nothing?");
    cr_assert(smem > 0 && regs > 0, "expected smem and register rejections in the GPU tuning sets (got %d, %d)", smem, regs);
}

/* =================================================================================================== */
/* 3. Naming: name -> config -> name is the identity for everything any profile emits on any target, and
 *    the decoded config equals the one the enumerator built. Malformed names fail with clear messages. */

Test(gen, naming_round_trip) {
    LUA_OK(
        "local function same(a, b, path)\n"
        "  if type(a) ~= 'table' then assert(a == b, ('%s: %s ~= %s'):format(path, tostring(a), tostring(b))); return end\n"
        "  assert(type(b) == 'table', path .. ' missing')\n"
        "  for k, v in pairs(a) do same(v, b[k], path .. '.' .. k) end\n"
        "  for k in pairs(b) do assert(a[k] ~= nil, path .. '.' .. k .. ' extra') end\n"
        "end\n"
        "local n = 0\n"
        "for _, pname in ipairs({ 'minimal', 'default', 'tuning' }) do\n"
        "  for _, tg in ipairs(reg.list) do\n"
        "    local res = enumerate.run({ registry = reg, profile = pname, targets = { tg.name } })\n"
        "    for _, c in ipairs(res.instances) do\n"
        "      local d = naming.decode(c.name, reg)\n"
        "      assert(naming.encode(d) == c.name, c.name .. ' re-encodes as ' .. naming.encode(d))\n"
        "      assert(d.target == c.target, c.name .. ': decoded to target ' .. d.target.name)\n"
        "      same(c.functional, d.functional, c.name .. ' functional')\n"
        "      same(c.tuning, d.tuning, c.name .. ' tuning')\n"
        "      assert(c.name:match('^[a-z_][a-z0-9_]*$'), c.name .. ' is not a C identifier')\n"
        "      n = n + 1\n"
        "    end\n"
        "  end\n"
        "end\n"
        "assert(n > 1000, 'suspiciously few instances: ' .. n)\n"
        "-- the profiles leave some axes out (per-tensor scaling, mqa): a crafted product covers every value\n"
        "local m = 0\n"
        "local function rt(c)\n"
        "  local name = naming.encode(c)\n"
        "  local d = naming.decode(name, reg)\n"
        "  same(c.functional, d.functional, name .. ' functional'); same(c.tuning, d.tuning, name .. ' tuning')\n"
        "  assert(naming.encode(d) == name); m = m + 1\n"
        "end\n"
        "for _, tp in ipairs({ { 'cpu', 'scalar' }, { 'sm_90a', 'wgmma' }, { 'sm_90a', 'mma' }, { 'gfx942', 'mfma' } }) do\n"
        "  local tile = { 128, 64, 8, 3 }\n"
        "  for _, sc in ipairs({ 'block', 'tensor' }) do\n"
        "    for _, it in ipairs({ 'f32', 'bf16' }) do rt(mk(tp[1], 'quant', { scale = sc, intype = it, hdim = 96 }, tile, tp[2])) end\n"
        "    for _, geo in ipairs({ { 64, 64, 'mha' }, { 128, 128, 'mqa' }, { 256, 256, 'gqa' }, { 192, 128, 'mla' } }) do\n"
        "      for _, causal in ipairs({ false, true }) do\n"
        "        local g = { hdim_qk = geo[1], hdim_v = geo[2], layout = geo[3], causal = causal, scale = sc }\n"
        "        for _, v in ipairs({ 'std', 'split' }) do g.variant = v; rt(mk(tp[1], 'fwd', g, tile, tp[2])) end\n"
        "        g.variant = nil\n"
        "        for _, fg in ipairs({ 'e4m3', 'e5m2' }) do\n"
        "          g.fmt_grad = fg\n"
        "          rt(mk(tp[1], 'bwd', g, tile, tp[2]))\n"
        "          for _, dm in ipairs(schema.enums.delta.values) do g.delta = dm; rt(mk(tp[1], 'delta', g, tile, tp[2])) end\n"
        "          g.delta = nil\n"
        "        end\n"
        "      end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "assert(m == 4 * 2 * (2 + 4 * 2 * (2 + 2 * (1 + 4))), m)\n");
}

Test(gen, naming_decode_failures) {
    LUA_OK(
        "local function bad(name, ...)\n"
        "  return expect_error(function() naming.decode(name, reg) end, \"cannot decode instance name '\" .. name .. \"'\", ...)\n"
        "end\n"
        "bad('fa8_fwd_sm99_e4m3_d64v64_gqa_full_m64n64_w4s2', \"unknown target tag 'sm99'\")\n"
        "bad('fa8_fwd_sm89_e4m3_d64v64_gqa_full_m64x64_w4s2', \"tile token 'm64x64'\")\n"
        "bad('fa8_fwd_sm89_e4m3_d64v64_gqa_full_64n64_w4s2', \"tile token '64n64'\")\n"
        "bad('fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w4s2_mma_extra', \"unexpected trailing token 'extra'\")\n"
        "bad('fa8_quant_cpu_e4m3_d64_f32_m64n64_w1s1_w1s1', \"unexpected token 'w1s1'\")\n"
        "bad('fa8_quant_sm90a_e4m3_d64_f32_m64n64_w4s1_mma_mma', \"unexpected trailing token 'mma'\")\n"
        "-- the target's first pipeline is implied; spelling it out is a second name for one config\n"
        "bad('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s2_wgmma', 'default pipeline is never spelled out')\n"
        "bad('fa8_quant_cpu_e4m3_d64_f32_m64n64_w1s1_scalar', 'default pipeline is never spelled out')\n"
        "bad('fa8_fwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1_mfma', \"pipeline 'mfma' is not available on target cpu\")\n"
        "bad('fa8_quant_cpu_e4m3_d064_f32_m64n64_w1s1', 'not canonical')\n"
        "bad('fa8_bwd_cpu_e4m3xe4m3_d64v64_gqa_full_m64n64_w1s1', 'not canonical')\n"
        "bad('fa8_fwd_cpu_e4m3xe5m2_d64v64_gqa_full_m64n64_w1s1', 'gradient format')\n"
        "bad('fa8_fwd_cpu_e4m3_d64_gqa_full_m64n64_w1s1', \"geometry 'd64'\")\n"
        "bad('fa8_fwd_cpu_e4m3_d64v64_xqa_full_m64n64_w1s1', \"unknown layout 'xqa'\")\n"
        "bad('fa8_fwd_cpu_e4m3_d64v64_gqa_half_m64n64_w1s1', \"mask 'half'\")\n"
        "bad('fa8_delta_cpu_e4m3_d64v64_gqa_full_fresh_m64n64_w1s1', \"unknown delta mode 'fresh'\")\n"
        "bad('fa8_fwd_cpu_e9m9_d64v64_gqa_full_m64n64_w1s1', \"unknown format token 'e9m9'\")\n"
        "bad('fa8_conv_cpu_e4m3_d64_f32_m64n64_w1s1', \"unknown direction 'conv'\")\n"
        "bad('fa8_quant_cpu_e4m3_d64_f32', 'missing tile')\n"
        "bad('fa9_quant_cpu_e4m3_d64_f32_m64n64_w1s1', 'does not start with fa8_')\n"
        "bad('FA8_quant_cpu_e4m3_d64_f32_m64n64_w1s1', 'not a lower-case identifier')\n"
        "-- the valid spellings of the same configs decode\n"
        "assert(naming.decode('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s2', reg).tuning.pipeline == 'wgmma')\n"
        "assert(naming.decode('fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w4s2_mma', reg).tuning.pipeline == 'mma')\n"
        "assert(naming.decode('fa8_bwd_cpu_e4m3xe5m2_d64v64_gqa_full_m64n64_w1s1', reg).functional.fmt_grad == 'e5m2')\n"
        "-- vperm: a token of its own after w<W>s<S>, before a pipeline; off is never spelled out\n"
        "local vp = naming.decode('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_split_m128n128_w12s3_vperm', reg)\n"
        "assert(vp.tuning.vperm == true and vp.tuning.stages == 3 and vp.functional.variant == 'split')\n"
        "assert(naming.functional_key(vp) == 'fa8_fwd_e4m3_d128v128_gqa_full_split', naming.functional_key(vp))\n"
        "assert(naming.decode('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s3', reg).tuning.vperm == false)\n"
        "bad('fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w4s2_mma_vperm', \"unexpected trailing token 'vperm'\")\n"
        "bad('fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w4s2_vperm_vperm', \"unexpected token 'vperm'\")\n"
        "-- a hand-made record: vperm is required and boolean\n"
        "local rec = schema.copy(vp)\n"
        "rec.tuning.vperm = 'yes'\n"
        "expect_error(function() schema.check(rec, 'rec') end, 'rec', 'vperm must be true or false', 'yes')\n"
        "rec.tuning.vperm = nil\n"
        "expect_error(function() schema.check(rec, 'rec') end, \"tuning lacks field 'vperm'\")\n"
        "-- unitskip: its own token after vperm's, before a pipeline; off is never spelled out\n"
        "local us = naming.decode('fa8_fwd_sm90a_e4m3_d128v128_gqa_causal_m192n128_w16s3_vperm_unitskip', reg)\n"
        "assert(us.tuning.unitskip == true and us.tuning.vperm == true and us.tuning.block_m == 192 and us.functional.causal)\n"
        "assert(naming.functional_key(us) == 'fa8_fwd_e4m3_d128v128_gqa_causal', naming.functional_key(us))\n"
        "assert(naming.encode(us) == 'fa8_fwd_sm90a_e4m3_d128v128_gqa_causal_m192n128_w16s3_vperm_unitskip')\n"
        "local u1 = naming.decode('fa8_fwd_sm90a_e4m3_d256v256_gqa_full_m128n128_w12s3_unitskip', reg)\n"
        "assert(u1.tuning.unitskip == true and u1.tuning.vperm == false)\n"
        "assert(vp.tuning.unitskip == false)\n"
        "bad('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m192n128_w16s3_unitskip_vperm', \"unexpected token 'vperm'\")\n"
        "bad('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m192n128_w16s3_unitskip_unitskip', \"unexpected token 'unitskip'\")\n"
        "bad('fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w4s2_mma_unitskip', \"unexpected trailing token 'unitskip'\")\n"
        "-- and it is required and boolean\n"
        "rec = schema.copy(us)\n"
        "rec.tuning.unitskip = 1\n"
        "expect_error(function() schema.check(rec, 'rec') end, 'rec', 'unitskip must be true or false', '1')\n"
        "rec.tuning.unitskip = nil\n"
        "expect_error(function() schema.check(rec, 'rec') end, \"tuning lacks field 'unitskip'\")\n"
        "-- qheads: qh<N> after unitskip's place, before a pipeline; 0 (the whole group) is never spelled out\n"
        "local qh = naming.decode('fa8_bwd_sm90a_e4m3_d128v128_gqa_causal_m64n128_w12s2_qh4', reg)\n"
        "assert(qh.tuning.qheads == 4 and math.type(qh.tuning.qheads) == 'integer' and qh.functional.causal)\n"
        "assert(naming.functional_key(qh) == 'fa8_bwd_e4m3_d128v128_gqa_causal', naming.functional_key(qh))   -- the same key as qh0's\n"
        "assert(naming.encode(qh) == 'fa8_bwd_sm90a_e4m3_d128v128_gqa_causal_m64n128_w12s2_qh4')\n"
        "assert(naming.decode('fa8_bwd_sm90a_e4m3_d128v128_gqa_causal_m64n128_w12s2', reg).tuning.qheads == 0)\n"
        "assert(vp.tuning.qheads == 0 and us.tuning.qheads == 0)\n"
        "bad('fa8_bwd_sm90a_e4m3_d128v128_gqa_causal_m64n128_w12s2_qh0', 'qh0 (the whole group) is never spelled out')\n"
        "bad('fa8_bwd_sm90a_e4m3_d128v128_gqa_causal_m64n128_w12s2_qh4_qh2', \"unexpected token 'qh2'\")\n"
        "bad('fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m192n128_w16s3_qh4_unitskip', \"unexpected token 'unitskip'\")\n"
        "-- and it is required, a non-negative integer\n"
        "rec = schema.copy(qh)\n"
        "for _, v in ipairs({ -1, 1.5, 'four' }) do\n"
        "  rec.tuning.qheads = v\n"
        "  expect_error(function() schema.check(rec, 'rec') end, 'rec', 'qheads must be a non-negative integer', tostring(v))\n"
        "end\n"
        "rec.tuning.qheads = nil\n"
        "expect_error(function() schema.check(rec, 'rec') end, \"tuning lacks field 'qheads'\")\n");
}

/* =================================================================================================== */
/* 4. Bundles: a backward bundle is refused when its parts disagree on a convention or on the geometry;
 *    dispatch order: an instance shadowed by an earlier, more permissive one is refused. */

Test(gen, bundle_refuses_mismatches) {
    LUA_OK(
        "local fwd, fwd_split = mk('cpu', 'fwd'), mk('cpu', 'fwd', { variant = 'split' })\n"
        "local bwd = mk('cpu', 'bwd')\n"
        "local function delta(mode, over, tile)\n"
        "  over = over or {}; over.delta = mode\n"
        "  return mk('cpu', 'delta', over, tile)\n"
        "end\n"
        "-- split delta needs the split forward's remainder output\n"
        "expect_error(function() bundle.make(fwd, delta('split'), bwd) end, 'rem_scale_log2', fwd.name)\n"
        "-- delta rows are padded per BLOCK_M: prep and backward must tile rows alike\n"
        "expect_error(function() bundle.make(fwd, delta('stale', {}, { 128, 64, 1, 1 }), bwd) end,\n"
        "  'BLOCK_M 128', \"backward's 64\")\n"
        "-- geometry, format, mask between delta prep and backward\n"
        "expect_error(function() bundle.make(fwd, delta('stale', { d = 128 }), bwd) end, 'hdim_qk=128', 'hdim_qk=64')\n"
        "expect_error(function() bundle.make(fwd, delta('stale', { causal = true }), bwd) end, 'causal=true', 'causal=false')\n"
        "expect_error(function() bundle.make(fwd, delta('stale', { fmt = 'e5m2' }), bwd) end, 'fmt=e5m2', 'fmt=e4m3')\n"
        "expect_error(function() bundle.make(fwd, delta('stale', { fmt_grad = 'e5m2' }), bwd) end, 'fmt_grad=e5m2')\n"
        "-- ... and between the forward and the backward pair\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { d = 128 }), delta('stale'), bwd) end, 'hdim_qk', 'produces hdim_qk=128')\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { hdim_qk = 192, hdim_v = 128, layout = 'mla' }),\n"
        "  delta('stale', { hdim_qk = 192, hdim_v = 64, layout = 'mla' }), mk('cpu', 'bwd', { hdim_qk = 192, hdim_v = 64, layout = 'mla' })) end,\n"
        "  'hdim_v')\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { fmt = 'e5m2' }), delta('stale'), bwd) end, 'produces fmt=e5m2')\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { causal = true }), delta('stale'), bwd) end, 'produces causal=true')\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { scale = 'tensor' }), delta('stale'), bwd) end, 'scale')\n"
        "expect_error(function() bundle.make(mk('cpu', 'fwd', { layout = 'mha' }), delta('stale'), bwd) end, 'layout')\n"
        "-- structure\n"
        "expect_error(function() bundle.make(mk('sm_89', 'fwd', {}, { 64, 64, 4, 2 }), delta('stale'), bwd) end, 'different architectures')\n"
        "expect_error(function() bundle.check({ name = 'b', fwd = bwd, delta = delta('stale'), bwd = fwd }) end, 'must be fwd, delta and bwd')\n"
        "expect_error(function() bundle.check({ name = 'b', fwd = fwd, delta = delta('stale') }) end, 'missing bwd')\n");
}

Test(gen, bundle_accepts_matching) {
    LUA_OK(
        "local fwd, fwd_split, bwd = mk('cpu', 'fwd'), mk('cpu', 'fwd', { variant = 'split' }), mk('cpu', 'bwd')\n"
        "for _, mode in ipairs({ 'stale', 'dohat', 'matched' }) do\n"
        "  local b = bundle.make(fwd, mk('cpu', 'delta', { delta = mode }), bwd)\n"
        "  assert(b.mode == mode and b.name == 'fa8_bundle_cpu_e4m3_d64v64_gqa_full_' .. mode .. '_m64n64_w1s1', b.name)\n"
        "end\n"
        "assert(bundle.make(fwd_split, mk('cpu', 'delta', { delta = 'split' }), bwd).mode == 'split')\n"
        "-- BLOCK_N may differ: only rows are padded per tile\n"
        "bundle.make(fwd, mk('cpu', 'delta', {}, { 64, 128, 1, 1 }), bwd)\n"
        "-- MLA geometry and mixed gradient format\n"
        "local mla = { hdim_qk = 192, hdim_v = 128, layout = 'mla', causal = true }\n"
        "local g = { hdim_qk = 192, hdim_v = 128, layout = 'mla', causal = true, fmt_grad = 'e5m2' }\n"
        "bundle.make(mk('cpu', 'fwd', mla), mk('cpu', 'delta', g), mk('cpu', 'bwd', g))\n"
        "-- every bundle the default profile makes refers to emitted instances and pairs split with split\n"
        "local res = enumerate.run({ registry = reg, profile = 'default', targets = { 'cpu' } })\n"
        "local by = {}\n"
        "for _, c in ipairs(res.instances) do by[c.name] = c end\n"
        "assert(#res.bundles > 0)\n"
        "for _, b in ipairs(res.bundles) do\n"
        "  bundle.check(b)\n"
        "  assert(by[b.fwd.name] and by[b.delta.name] and by[b.bwd.name], b.name .. ' refers to a missing instance')\n"
        "  assert((b.fwd.functional.variant == 'split') == (b.mode == 'split'), b.name)\n"
        "end\n");
}

Test(gen, shadow_check_order) {
    LUA_OK(
        "local tile = { 64, 64, 1, 1 }\n"
        "local mha, gqa = mk('cpu', 'fwd', { layout = 'mha' }, tile), mk('cpu', 'fwd', { layout = 'gqa' }, tile)\n"
        "-- a gqa kernel accepts every mha problem: listed first, it hides the mha specialization\n"
        "expect_error(function() enumerate.shadow_check({ gqa, mha }) end, mha.name, gqa.name, 'can never be selected')\n"
        "enumerate.shadow_check({ mha, gqa })\n"
        "local mqa = mk('cpu', 'fwd', { layout = 'mqa' }, tile)\n"
        "expect_error(function() enumerate.shadow_check({ mha, gqa, mqa }) end, mqa.name)\n"
        "enumerate.shadow_check({ mha, mqa, gqa })\n"
        "-- block scaling covers per-tensor scaling (a scale stride of 0)\n"
        "local pt = mk('cpu', 'fwd', { layout = 'mha', scale = 'tensor' }, tile)\n"
        "expect_error(function() enumerate.shadow_check({ mha, pt }) end, pt.name)\n"
        "enumerate.shadow_check({ pt, mha })\n"
        "-- different tiles, formats or masks never shadow each other, in either order\n"
        "local other = mk('cpu', 'fwd', { layout = 'mha' }, { 128, 64, 1, 1 })\n"
        "enumerate.shadow_check({ gqa, other }); enumerate.shadow_check({ other, gqa })\n"
        "local causal = mk('cpu', 'fwd', { layout = 'mha', causal = true }, tile)\n"
        "enumerate.shadow_check({ gqa, causal })\n"
        "-- the tuning profile emits mha twins: each precedes its gqa twin\n"
        "local res = enumerate.run({ registry = reg, profile = 'tuning', targets = { 'cpu' } })\n"
        "local pos, twins = {}, 0\n"
        "for i, c in ipairs(res.instances) do pos[c.name] = i end\n"
        "for name, i in pairs(pos) do\n"
        "  local g = name:gsub('_mha_', '_gqa_', 1)\n"
        "  if g ~= name and pos[g] then twins = twins + 1; assert(i < pos[g], name .. ' after ' .. g) end\n"
        "end\n"
        "assert(twins > 0, 'no mha/gqa twins in the tuning profile')\n");
}

/* =================================================================================================== */
/* 5. User target files: a new GPU described in a Lua file is enumerated under its tag; broken files are
 *    refused with exit code 2 and a message naming the file and the field. */

#define GOOD_TARGET                                                                                      \
    "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120a',\n"                   \
    "  description = 'a test GPU', smem_bytes = 101376, regs_per_thread = 255, warp_size = 32,\n"         \
    "  max_threads = 1024, fp8 = { 'e4m3', 'e5m2' }, mma = { mma = { m = 16, n = 8, k = 32 } },\n"       \
    "  pipelines = { 'mma' } }\n"

Test(gen, user_target_file_enumerates) {
    const char *f = tmp_path("sm120x.lua");
    spit(f, GOOD_TARGET);
    proc p = fa8("list --targets-file '%s' --target sm_120x", f);
    cr_assert_eq(p.code, 0, "exit %d: %s", p.code, p.err);
    int n = 0, fwd = 0, bwd = 0;
    for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n")) {
        ++n;
        cr_assert(strncmp(line, "fa8_", 4) == 0 && strstr(line, "_sm120x_"), "not an sm120x instance: %s", line);
        fwd += strncmp(line, "fa8_fwd_sm120x_", 15) == 0;
        bwd += strncmp(line, "fa8_bwd_sm120x_", 15) == 0;
    }
    cr_assert(n > 0 && fwd > 0 && bwd > 0, "%d instances, %d fwd, %d bwd", n, fwd, bwd);
    /* the user target also shows in `fa8 targets` and its names decode with the same file */
    proc t = fa8("targets --targets-file '%s'", f);
    cr_assert_eq(t.code, 0, "%s", t.err);
    cr_assert(strstr(t.out, "sm_120x") && strstr(t.out, "a test GPU"), "%s", t.out);
    proc d = fa8("decode --targets-file '%s' fa8_fwd_sm120x_e4m3_d128v128_gqa_full_m64n64_w4s2", f);
    cr_assert_eq(d.code, 0, "%s", d.err);
    cr_assert(strstr(d.out, "\"target\":\"sm_120x\""), "%s", d.out);
    /* two targets at once, built-in and user */
    proc both = fa8("list --targets-file '%s' --target sm_120x,sm_89 --hdim 128", f);
    cr_assert_eq(both.code, 0, "%s", both.err);
    cr_assert(strstr(both.out, "_sm120x_") && strstr(both.out, "_sm89_"), "%s", both.out);
}

Test(gen, user_target_file_malformed) {
    static const struct {
        const char *file, *content, *expect[3];
    } cases[] = {
        {"no_arch.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', smem_bytes = 1, regs_per_thread = 1,\n"
         "  warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"missing field 'arch'", "sm_120x"}},
        {"no_name.lua",
         "return { tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1, regs_per_thread = 1,\n"
         "  warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"missing field 'name'"}},
        {"bad_tag.lua",
         "return { name = 'sm_120x', tag = 'sm_120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } },\n"
         "  pipelines = { 'mma' } }\n",
         {"tag 'sm_120x'", "[a-z][a-z0-9]*"}},
        {"dup_name.lua",
         "return { name = 'sm_89', tag = 'sm89b', backend = 'cuda', arch = 'sm_89', smem_bytes = 1, regs_per_thread = 1,\n"
         "  warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"'sm_89'", "defined twice"}},
        {"dup_tag.lua",
         "return { name = 'sm_89b', tag = 'sm89', backend = 'cuda', arch = 'sm_89', smem_bytes = 1, regs_per_thread = 1,\n"
         "  warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"tag 'sm89'", "already used by 'sm_89'"}},
        {"raises.lua", "local boom = nil\nreturn boom.in_the_target_file\n",
         {"error while reading targets file", "raises.lua:2:", "boom"}},
        {"syntax.lua", "return { name = \n", {"cannot load targets file"}},
        {"uses_globals.lua", "return { name = string.upper('x') }\n", {"error while reading targets file", "string"}},
        {"not_table.lua", "return 42\n", {"must return a target entry"}},
        {"typo_field.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem = 1, smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } },\n"
         "  pipelines = { 'mma' } }\n",
         {"unknown field 'smem'"}},
        {"bad_type.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 'lots',\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } },\n"
         "  pipelines = { 'mma' } }\n",
         {"field 'smem_bytes' must be a number"}},
        {"bad_backend.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'metal', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = { mma = { m = 16, n = 8, k = 32 } },\n"
         "  pipelines = { 'mma' } }\n",
         {"backend 'metal'"}},
        {"bad_pipeline.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = { tc = { m = 16, n = 8, k = 32 } },\n"
         "  pipelines = { 'tc' } }\n",
         {"field 'pipelines'", "'tc'"}},
        {"no_shape.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, mma = {}, pipelines = { 'mma' } }\n",
         {"mma.mma"}},
        {"bad_fmt.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = { 'e4m3', 'fp8' },\n"
         "  mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"field 'fp8'", "'fp8'"}},
        {"bad_lowered.lua",
         "return { name = 'sm_120x', tag = 'sm120x', backend = 'cuda', arch = 'sm_120', smem_bytes = 1,\n"
         "  regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {}, fp8_lowered = { 'wgmma' },\n"
         "  mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } }\n",
         {"field 'fp8_lowered'", "pipeline 'wgmma'", "(mma)"}},
        {"dup_in_file.lua", /* a list of entries; the file's environment is empty: no globals */
         "local function t(tag) return { name = 'sm_120x', tag = tag, backend = 'cuda', arch = 'sm_120',\n"
         "  smem_bytes = 1, regs_per_thread = 1, warp_size = 32, max_threads = 1024, fp8 = {},\n"
         "  mma = { mma = { m = 16, n = 8, k = 32 } }, pipelines = { 'mma' } } end\n"
         "return { t('sm120x'), t('other') }\n",
         {"'sm_120x'", "defined twice"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        const char *f = tmp_path(cases[i].file);
        spit(f, cases[i].content);
        proc p = fa8("list --targets-file '%s' --target sm_120x", f);
        cr_assert_eq(p.code, 2, "%s: exit %d (want 2), stderr: %s", cases[i].file, p.code, p.err);
        cr_assert(strstr(p.err, f), "%s: stderr does not name the file: %s", cases[i].file, p.err);
        for (int k = 0; k < 3 && cases[i].expect[k]; ++k)
            cr_assert(strstr(p.err, cases[i].expect[k]), "%s: stderr lacks <%s>: %s", cases[i].file, cases[i].expect[k],
                      p.err);
        cr_assert_str_empty(p.out, "%s: wrote to stdout on error: %s", cases[i].file, p.out);
    }
    /* a file that does not exist */
    proc p = fa8("targets --targets-file '%s'", tmp_path("absent.lua"));
    cr_assert_eq(p.code, 2, "%s", p.err);
    cr_assert(strstr(p.err, "absent.lua") && strstr(p.err, "cannot load"), "%s", p.err);
}

/* =================================================================================================== */
/* 6. Determinism: two runs give byte-identical trees; a rerun into the same directory writes nothing
 *    (so Ninja does not rebuild) and leaves modification times alone. */

Test(gen, gen_is_deterministic) {
    const char *a = tmp_path("A"), *b = tmp_path("B");
    cr_assert_eq(chdir(g_tmp), 0);
    proc pa = fa8("gen --target cpu --profile minimal --out '%s'", a);
    cr_assert_eq(pa.code, 0, "%s", pa.err);
    /* a different working directory must not matter either */
    cr_assert_eq(chdir("/"), 0);
    proc pb = fa8("gen --target cpu --profile minimal --out '%s'", b);
    cr_assert_eq(pb.code, 0, "%s", pb.err);
    char *na[1024], *nb[1024];
    int ca = list_dir(a, na, 1024), cb = list_dir(b, nb, 1024);
    cr_assert_gt(ca, 10, "only %d files in %s", ca, a);
    cr_assert_eq(ca, cb, "%d files vs %d", ca, cb);
    for (int i = 0; i < ca; ++i) {
        cr_assert_str_eq(na[i], nb[i]);
        char pa_[1024], pb_[1024];
        snprintf(pa_, sizeof pa_, "%s/%s", a, na[i]);
        snprintf(pb_, sizeof pb_, "%s/%s", b, nb[i]);
        size_t la = 0, lb = 0;
        char *x = test_slurp(pa_, &la), *y = test_slurp(pb_, &lb);
        cr_assert(x && y && la > 0, "cannot read %s", na[i]);
        cr_assert(la == lb && memcmp(x, y, la) == 0, "%s differs between two runs", na[i]);
        free(x);
        free(y);
    }
    char man[1024];
    snprintf(man, sizeof man, "%s/manifest.json", a);
    struct stat before, after;
    cr_assert_eq(stat(man, &before), 0);
    sleep(1); /* a rewrite would now show a different mtime even on 1 s resolution filesystems */
    proc again = fa8("gen --target cpu --profile minimal --out '%s'", a);
    cr_assert_eq(again.code, 0, "%s", again.err);
    cr_assert(strstr(again.out, " 0 written,"), "second run wrote files: %s", again.out);
    char unchanged[64];
    snprintf(unchanged, sizeof unchanged, "%d unchanged", ca);
    cr_assert(strstr(again.out, unchanged), "want <%s>: %s", unchanged, again.out);
    cr_assert_eq(stat(man, &after), 0);
    cr_assert(before.st_mtim.tv_sec == after.st_mtim.tv_sec && before.st_mtim.tv_nsec == after.st_mtim.tv_nsec,
              "manifest.json was rewritten");
}

/* =================================================================================================== */
/* 7. Golden output: one small instance and its manifest, byte for byte. When a template or the generator
 *    changes on purpose, regenerate with tools/update-golden and review the diff. */

#define GOLDEN_NAME "fa8_quant_cpu_e4m3_d64_f32_m64n64_w1s1"
/* keep identical to tools/update-golden: the manifest records the command line */
#define GOLDEN_ARGS "gen --target cpu --profile minimal --kernels 'fa8_quant_cpu_e4m3_d64_f32_*' --out '%s'"

/* first line where two texts differ, for the failure message */
static void first_diff(const char *a, const char *b, char *msg, size_t n) {
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') { ++line; la = a + 1; lb = b + 1; }
        ++a, ++b;
    }
    int ea = (int)strcspn(la, "\n"), eb = (int)strcspn(lb, "\n");
    snprintf(msg, n, "line %d:\n  golden:    %.*s\n  generated: %.*s", line, ea, la, eb, lb);
}

/* "generator_hash":"<16 hex>" -> "generator_hash":"<generator_hash>" (as tools/update-golden stores it) */
static void mask_hash(char *s) {
    char *p = strstr(s, "\"generator_hash\":\"");
    if (!p) return;
    p += strlen("\"generator_hash\":\"");
    char *e = strchr(p, '"');
    if (!e) return;
    const char *m = "<generator_hash>";
    memmove(p + strlen(m), e, strlen(e) + 1);
    memcpy(p, m, strlen(m));
}

Test(gen, golden_quant_instance) {
    const char *out = tmp_path("golden");
    proc p = fa8(GOLDEN_ARGS, out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    cr_assert(strstr(p.out, "1 instances"), "the filter should select exactly one instance: %s", p.out);
    static const struct { const char *golden, *generated; int mask; } files[] = {
        {GOLDEN_NAME ".c", GOLDEN_NAME ".c", 0},
        {"manifest_minimal_quant.json", "manifest.json", 1},
    };
    for (size_t i = 0; i < 2; ++i) {
        char gp[1024], np[1024], msg[2048];
        snprintf(gp, sizeof gp, "%s/tests/golden/%s", FA8_SOURCE_ROOT, files[i].golden);
        snprintf(np, sizeof np, "%s/%s", out, files[i].generated);
        size_t lg = 0, ln = 0;
        char *g = keep(test_slurp(gp, &lg)), *n = keep(test_slurp(np, &ln));
        cr_assert_not_null(g, "missing golden file %s: run tools/update-golden", gp);
        cr_assert_not_null(n, "fa8 gen did not write %s", files[i].generated);
        if (files[i].mask) { mask_hash(n); ln = strlen(n); }
        if (lg != ln || memcmp(g, n, lg) != 0) {
            first_diff(g, n, msg, sizeof msg);
            cr_assert_fail("%s differs from tests/golden/%s at %s\n"
                           "If the change is intended, run tools/update-golden and review `git diff tests/golden`.",
                           files[i].generated, files[i].golden, msg);
        }
    }
}

/* =================================================================================================== */
/* 8. Bad input: every refusal exits 2 (never 0, never a crash or a Lua traceback), says what was wrong on
 *    stderr and writes nothing to stdout; a refused gen leaves no output directory behind. */

Test(gen, bad_input_exits_2) {
    spit(tmp_path("regular"), "a regular file\n");
    char regular[512], under[512], nodir[512];
    snprintf(regular, sizeof regular, "%s/regular", g_tmp);
    snprintf(under, sizeof under, "%s/regular/sub", g_tmp);
    snprintf(nodir, sizeof nodir, "%s/never", g_tmp);
    /* where: the path substituted for %s: 0 a fresh path, 1 a path under a regular file, 2 the file itself */
    static const struct { const char *args, *expect[3]; int leaves_no_dir, where; } cases[] = {
        {"list --target sm_99", {"unknown target 'sm_99'"}, 0, 0},
        {"list --target cpu,sm_99", {"'sm_99'"}, 0, 0},
        {"gen --target nosuch --out '%s'", {"'nosuch'"}, 1, 0},
        {"list --hdim 100", {"100", "not supported"}, 0, 0},
        {"gen --hdim 100 --out '%s'", {"100"}, 1, 0},
        {"list --hdim 64x", {"'64x'"}, 0, 0},
        {"list --hdim 0", {"head dim 0"}, 0, 0},
        {"list --hdim 272", {"272"}, 0, 0},
        {"list --layout foo", {"--layout 'foo'"}, 0, 0},
        {"list --layout gqa,foo", {"'foo'"}, 0, 0},
        {"list --delta foo", {"--delta 'foo'"}, 0, 0},
        {"list --profile foo", {"profile 'foo'"}, 0, 0},
        {"list --kernels 'nomatch*'", {"no instance matches", "nomatch*"}, 0, 0},
        {"gen --kernels 'nomatch*' --out '%s'", {"nomatch*"}, 1, 0},
        {"gen --target cpu --out /proc/fa8_cannot", {"/proc/fa8_cannot"}, 0, 0},
        {"gen --target cpu --profile minimal --out '%s'", {"regular/sub"}, 0, 1},
        {"gen --target cpu --profile minimal --out '%s'", {"regular", "not a directory"}, 0, 2},
        {"gen --target cpu", {"--out"}, 0, 0},
        {"list --bogus", {"--bogus"}, 0, 0},
        {"gen --out '%s' --frobnicate", {"--frobnicate"}, 1, 0},
        {"frobnicate", {"frobnicate"}, 0, 0},
        {"decode fa8_nope", {"fa8_nope"}, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        char args[1024];
        const char *path = cases[i].where == 1 ? under : cases[i].where == 2 ? regular : nodir;
        snprintf(args, sizeof args, cases[i].args, path);
        proc p = fa8("%s", args);
        cr_assert_eq(p.code, 2, "`fa8 %s`: exit %d (want 2); stderr: %s", args, p.code, p.err);
        for (int k = 0; k < 3 && cases[i].expect[k]; ++k)
            cr_assert(strstr(p.err, cases[i].expect[k]), "`fa8 %s`: stderr lacks <%s>: %s", args, cases[i].expect[k],
                      p.err);
        cr_assert(!strstr(p.err, "traceback") && !strstr(p.err, "generator failed") && !strstr(p.err, "internal:"),
                  "`fa8 %s` crashed inside the generator: %s", args, p.err);
        cr_assert_str_empty(p.out, "`fa8 %s` wrote to stdout: %s", args, p.out);
        if (cases[i].leaves_no_dir) cr_assert(!exists(nodir), "`fa8 %s` left %s behind", args, nodir);
    }
    /* the regular file is still a regular file */
    char *content = keep(test_slurp(regular, NULL));
    cr_assert_str_eq(content, "a regular file\n");
}

/* =================================================================================================== */
/* 9. A generated directory is a self-contained bundle: every head geometry, profile default, builds with
 *    its own Makefile into libfa8.a (the runtime API over exactly these instances, and the instances);
 *    manifest.json describes exactly the instances the enumerator selects (test-only formats left out). */

Test(gen, bundle_dir_compiles_standalone, .timeout = 900) {
    const char *out = tmp_path("bundle");
    proc p = fa8("gen --target cpu --profile default --hdim 64,96,128,192,256,192x128 --out '%s'", out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    static const char *required[] = {"README.md", "Makefile", "meson.build", "manifest.json", "fa8_desc.h",
                                     "fa8_instances.h", "fa8_instances.c", "fa8_fp8.h", "fa8_types.h",
                                     "fa8_kernel_abi.h", "fa8_cpu_tile.h", "fa8.h", "api.c", "dispatch.c",
                                     "tuned.c", "cpu_exec.c", "cuda_absent.c"};
    for (size_t i = 0; i < sizeof required / sizeof *required; ++i) {
        char f[1024];
        snprintf(f, sizeof f, "%s/%s", out, required[i]);
        size_t n = 0;
        char *s = test_slurp(f, &n);
        cr_assert(s && n > 0, "bundle lacks %s", required[i]);
        free(s);
    }
    /* manifest vs enumerator, manifest vs directory, support headers vs their sources (before make adds .o) */
    LUA_OK(
        "local json = require('dkjson')\n"
        "local dir = TMP .. '/bundle'\n"
        "local m, _, err = json.decode(read(dir .. '/manifest.json'))\n"
        "assert(m, 'manifest.json does not parse: ' .. tostring(err))\n"
        "local res = enumerate.run({ registry = reg, profile = 'default', targets = { 'cpu' }, no_test_formats = true,\n"
        "  hdims = enumerate.parse_hdims('64,96,128,192,256,192x128') })\n"
        "assert(#m.instances == #res.instances, ('manifest lists %d instances, enumerator %d'):format(#m.instances, #res.instances))\n"
        "local geos = {}\n"
        "for i, c in ipairs(res.instances) do\n"
        "  local e = m.instances[i]\n"
        "  assert(e.name == c.name, ('instance %d: manifest %s, enumerator %s'):format(i, e.name, c.name))\n"
        "  assert(e.target == 'cpu' and e.key == c.key, e.name)\n"
        "  assert(e.functional.fmt ~= 'f32', 'a test-only f32 instance in a user bundle: ' .. e.name)\n"
        "  assert(type(e.functional) == 'table' and type(e.tuning) == 'table', e.name .. ' lacks functional/tuning')\n"
        "  for k, v in pairs(c.functional) do assert(e.functional[k] == v, e.name .. ' functional.' .. k) end\n"
        "  for _, k in ipairs(schema.tuning_fields) do assert(e.tuning[k] == c.tuning[k], e.name .. ' tuning.' .. k) end\n"
        "  assert(e.resources and e.resources.smem_bytes == c.resources.smem_bytes, e.name .. ' resources')\n"
        "  assert(io.open(dir .. '/' .. e.name .. '.c'), 'no source for ' .. e.name)\n"
        "  if c.functional.dir == 'fwd' then geos[c.functional.hdim_qk .. 'x' .. c.functional.hdim_v] = true end\n"
        "end\n"
        "for _, g in ipairs({ '64x64', '96x96', '128x128', '192x192', '256x256', '192x128' }) do\n"
        "  assert(geos[g], 'no forward for head geometry ' .. g)\n"
        "end\n"
        "assert(#m.bundles == #res.bundles and #m.bundles > 0, 'bundle count')\n"
        "local names = {}\n"
        "for _, e in ipairs(m.instances) do names[e.name] = true end\n"
        "for _, b in ipairs(m.bundles) do assert(names[b.fwd] and names[b.delta] and names[b.bwd], b.name) end\n"
        "assert(m.profile == 'default' and m.fa8_version == read(ROOT .. '/VERSION'):gsub('%s+', ''))\n"
        "-- files: exactly what is in the directory, besides the manifest itself\n"
        "local listed = {}\n"
        "for _, f in ipairs(m.files) do listed[f] = true end\n"
        "local n = 0\n"
        "for f in io.popen('ls ' .. q(dir)):lines() do\n"
        "  if f ~= 'manifest.json' then assert(listed[f], f .. ' not in manifest.files'); n = n + 1 end\n"
        "end\n"
        "assert(n == #m.files, ('manifest.files has %d entries, directory %d files'):format(#m.files, n))\n"
        "-- support headers are verbatim copies\n"
        "for _, s in ipairs({ 'runtime/include/fa8_fp8.h', 'runtime/include/fa8_types.h', 'runtime/include/fa8.h',\n"
        "    'runtime/include/fa8_kernel_abi.h', 'templates/cpu/fa8_cpu_tile.h', 'runtime/src/dispatch.c' }) do\n"
        "  assert(read(ROOT .. '/' .. s) == read(dir .. '/' .. s:match('[^/]+$')), s .. ' copy differs')\n"
        "end\n");
    /* CFLAGS on the command line, as users do: the bundle's FA8_CFLAGS (-std=c11 -ffp-contract=off) must
     * survive it; -O0 keeps this test fast */
    const char *log = tmp_path("make.log");
    int rc = shell(log, "make -C '%s' -j2 CFLAGS=-O0", out);
    char *text = keep(test_slurp(log, NULL));
    cr_assert_eq(rc, 0, "make failed (%d):\n%.4000s", rc, text ? text : "");
    cr_assert(strstr(text, "-ffp-contract=off") && strstr(text, "-std=c11"), "compiled without the bundle's flags:\n%.2000s", text);
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/libfa8.a", out);
    struct stat st;
    cr_assert(stat(lib, &st) == 0 && st.st_size > 0, "no libfa8.a");
    /* the archive defines every instance's entry points and the descriptor table */
    LUA_OK(
        "local dir = TMP .. '/bundle'\n"
        "local syms = {}\n"
        "local p = assert(io.popen('nm -g --defined-only ' .. q(dir .. '/libfa8.a')))\n"
        "for line in p:lines() do local s = line:match(' [TDRB] ([%w_]+)$'); if s then syms[s] = true end end\n"
        "p:close()\n"
        "local m = require('dkjson').decode(read(dir .. '/manifest.json'))\n"
        "for _, e in ipairs(m.instances) do\n"
        "  assert(syms[e.name] and syms[e.name .. '_items'], 'libfa8.a does not define ' .. e.name)\n"
        "end\n"
        "assert(syms.fa8_instances and syms.fa8_instance_count and syms.fa8_bundles and syms.fa8_tuned_rows, 'no descriptor table')\n"
        "for _, f in ipairs({ 'fa8_quantize', 'fa8_forward', 'fa8_backward', 'fa8_dispatch', 'fa8_tuning_overlay' }) do\n"
        "  assert(syms[f], 'libfa8.a lacks the API function ' .. f)\n"
        "end\n");
}

/* =================================================================================================== */
/* 10. The spine acceptance: sm_90a enumerates wgmma and mma instances for every head geometry; decode
 *     prints the config as JSON. */

Test(gen, sm90a_lists_wgmma_and_mma_per_geometry) {
    LUA_OK(
        "local out, code = run('list --target sm_90a')\n"
        "assert(code == 0, out)\n"
        "local seen = {}\n"
        "for line in out:gmatch('[^\\n]+') do\n"
        "  local name = assert(line:match('^(fa8_[%w_]+)'), line)\n"
        "  local dir, geo = name:match('^fa8_(%a+)_sm90a_[%w]+_d(%d+v%d+)_')\n"
        "  if geo then\n"
        "    -- wgmma is sm_90a's first pipeline: its names carry no pipeline token\n"
        "    local pipe = name:match('_mma$') and 'mma' or (name:gsub('_unitskip$', ''):gsub('_vperm$', ''):match('_w%d+s%d+$') and 'wgmma') or name\n"
        "    seen[dir .. '/' .. geo .. '/' .. pipe] = true\n"
        "  end\n"
        "end\n"
        "-- every geometry has the portable path in every direction\n"
        "for _, g in ipairs({ '64v64', '96v96', '128v128', '192v192', '256v256', '192v128' }) do\n"
        "  for _, dir in ipairs({ 'fwd', 'delta', 'bwd' }) do assert(seen[dir .. '/' .. g .. '/mma'], 'no mma ' .. dir .. ' for d' .. g) end\n"
        "end\n"
        "-- the wgmma forward exists for every geometry (d96 padded to 128)\n"
        "for _, g in ipairs({ '64v64', '96v96', '128v128', '192v192', '256v256', '192v128' }) do\n"
        "  assert(seen['fwd/' .. g .. '/wgmma'], 'no wgmma forward for d' .. g)\n"
        "end\n"
        "-- a wgmma forward is listed before the mma forward of the same key, so dispatch prefers it\n"
        "local pos = {}\n"
        "local i = 0\n"
        "for line in out:gmatch('[^\\n]+') do i = i + 1; pos[line:match('^(fa8_[%w_]+)')] = i end\n"
        "assert(pos['fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s2'] < pos['fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m64n64_w4s2_mma'])\n"
        "-- the wgmma backward (with its delta preps) ships for every head dim (up to 128 at 64 keys per warpgroup,\n"
        "-- d96 padded to 128; above as the head-dim-split 64 x 64 tile), listed before the mma backward of its key\n"
        "for _, g in ipairs({ '64v64', '96v96', '128v128', '192v192', '256v256', '192v128' }) do\n"
        "  for _, dir in ipairs({ 'delta', 'bwd' }) do assert(seen[dir .. '/' .. g .. '/wgmma'], 'no wgmma ' .. dir .. ' for d' .. g) end\n"
        "end\n"
        "assert(pos['fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n128_w12s2'] < pos['fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n64_w8s1_mma'])\n"
        "local mma256\n"
        "for n, p in pairs(pos) do if n:match('^fa8_bwd_sm90a_e4m3_d256v256_gqa_full_.*_mma$') then mma256 = math.min(mma256 or p, p) end end\n"
        "assert(mma256, 'no mma backward for d256')\n"
        "assert(pos['fa8_bwd_sm90a_e4m3_d256v256_gqa_full_m64n64_w12s2'] < mma256)\n"
        "-- d96 runs the d128 tiles: the padded dims are what the register and shared-memory models price\n"
        "local rej = run('list --target sm_90a --hdim 96 --rejected')\n"
        "assert(not rej:find('wgmma_swizzle_chunks', 1, true), rej)\n");
}

/* The HIP shipping set has a backward for every head geometry on both AMD targets, in every delta mode's
 * bundle, causal or not; d192 and d256 take two waves at 64 x 32 with the streamed LDS layout
 * (templates/hip/bwd.hip.tpl), the smaller head dims keep their resident tiles. */
Test(gen, hip_backward_every_geometry) {
    LUA_OK(
        "local res = enumerate.run({ registry = reg, profile = 'default', targets = { 'gfx942', 'gfx90a' } })\n"
        "local seen = {}\n"
        "for _, b in ipairs(res.bundles) do\n"
        "  local f, t = b.bwd.functional, b.bwd.tuning\n"
        "  local key = ('%s/%dx%d/%s/%s/%s'):format(b.bwd.target.name, f.hdim_qk, f.hdim_v, f.fmt_grad, tostring(f.causal), b.mode)\n"
        "  seen[key] = b.bwd\n"
        "  if f.hdim_v >= 192 then\n"
        "    assert(t.block_m == 64 and t.block_n == 32 and t.warps == 2, b.bwd.name)\n"
        "    assert(b.bwd.resources.stream and b.delta.tuning.block_m == 64, b.name)\n"
        "  else assert(not b.bwd.resources.stream, b.bwd.name .. ' should stay resident') end\n"
        "end\n"
        "for _, tn in ipairs({ 'gfx942', 'gfx90a' }) do\n"
        "  for _, g in ipairs(schema.head_geometries) do\n"
        "    for _, fg in ipairs({ 'e4m3fnuz', 'e5m2fnuz' }) do\n"
        "      for _, causal in ipairs({ 'false', 'true' }) do\n"
        "        for _, m in ipairs({ 'stale', 'dohat', 'matched', 'split' }) do\n"
        "          local key = ('%s/%dx%d/%s/%s/%s'):format(tn, g[1], g[2], fg, causal, m)\n"
        "          assert(seen[key], 'no HIP backward bundle ' .. key)\n"
        "        end\n"
        "      end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "-- the template gets the layout the model sized\n"
        "local out, code = run('gen --target gfx942 --hdim 128,256 --kernels ' .. q('fa8_bwd_*_full_*') .. ' --no-bundle-files -q --out ' .. q(TMP .. '/hipbwd'))\n"
        "assert(code == 0, out)\n"
        "local function stream_of(name) return read(TMP .. '/hipbwd/' .. name .. '.hip'):match('constexpr bool STREAM = (%a+);') end\n"
        "assert(stream_of('fa8_bwd_gfx942_e4m3fnuz_d256v256_gqa_full_m64n32_w2s1') == 'true')\n"
        "assert(stream_of('fa8_bwd_gfx942_e4m3fnuz_d128v128_gqa_full_m64n32_w2s1') == 'false')\n");
}

Test(gen, decode_prints_config_json) {
    LUA_OK(
        "local a = 'fa8_fwd_sm90a_e4m3_d128v128_gqa_causal_m64n64_w4s2_mma'\n"
        "local b = 'fa8_delta_cpu_e4m3xe5m2_d192v128_mla_full_split_m64n64_w1s1'\n"
        "local out, code = run('decode ' .. a .. ' ' .. b)\n"
        "assert(code == 0, out)\n"
        "local l = assert(require('dkjson').decode(out), out)\n"
        "assert(#l == 2, 'want two configs')\n"
        "local x, y = l[1], l[2]\n"
        "assert(x.name == a and x.target == 'sm_90a' and x.key == 'fa8_fwd_e4m3_d128v128_gqa_causal', x.key)\n"
        "local f, t = x.functional, x.tuning\n"
        "assert(f.dir == 'fwd' and f.fmt == 'e4m3' and f.hdim_qk == 128 and f.hdim_v == 128 and f.layout == 'gqa')\n"
        "assert(f.causal == true and f.variant == 'std' and f.scale == 'block')\n"
        "assert(t.block_m == 64 and t.block_n == 64 and t.warps == 4 and t.stages == 2 and t.pipeline == 'mma')\n"
        "assert(x.resources.smem_bytes > 0 and x.resources.regs > 0)\n"
        "assert(y.functional.fmt_grad == 'e5m2' and y.functional.delta == 'split' and y.functional.layout == 'mla')\n"
        "assert(y.functional.hdim_qk == 192 and y.functional.hdim_v == 128 and y.tuning.pipeline == 'scalar')\n");
}

/* =================================================================================================== */
/* #line directives: the k-th line after `#line N "templates/X"` is line N+k-1 of X (with $(...)
 * substitutions matched as wildcards), for every directive of every generated file, so compiler errors
 * point at template lines. A synthetic template with Lua loops checks files with many directives. */

#define LINE_CHECK                                                                                       \
    "-- template line -> anchored Lua pattern: literal text, $(...) substitutions match anything\n"      \
    "local function pattern(tl)\n"                                                                       \
    "  local out, i = {}, 1\n"                                                                           \
    "  while true do\n"                                                                                  \
    "    local s, e = tl:find('%$%b()', i)\n"                                                            \
    "    local lit = s and tl:sub(i, s - 1) or tl:sub(i)\n"                                              \
    "    out[#out + 1] = lit:gsub('[%^%$%(%)%%%.%[%]%*%+%-%?]', '%%%0')\n"                               \
    "    if not s then break end\n"                                                                      \
    "    out[#out + 1] = '.-'; i = e + 1\n"                                                              \
    "  end\n"                                                                                            \
    "  return '^' .. table.concat(out) .. '$'\n"                                                         \
    "end\n"                                                                                              \
    "local function lines(s)\n"                                                                          \
    "  local t = {}\n"                                                                                   \
    "  for l in (s:sub(-1) == '\\n' and s or s .. '\\n'):gmatch('([^\\n]*)\\n') do t[#t + 1] = l end\n" \
    "  return t\n"                                                                                       \
    "end\n"                                                                                              \
    "-- checks `text` (an expansion) against templates under `root`; returns the number of directives\n" \
    "local function check_lines(text, root, what)\n"                                                     \
    "  local cache, file, n, directives = {}, nil, nil, 0\n"                                             \
    "  for i, l in ipairs(lines(text)) do\n"                                                             \
    "    local ln, f = l:match('^#line (%d+) \"([^\"]+)\"$')\n"                                          \
    "    if ln then\n"                                                                                   \
    "      file, n, directives = f, tonumber(ln), directives + 1\n"                                      \
    "      cache[f] = cache[f] or lines(read(root .. '/' .. f))\n"                                       \
    "    else\n"                                                                                         \
    "      assert(file, what .. ': line ' .. i .. ' precedes every #line directive')\n"                  \
    "      local tl = cache[file][n]\n"                                                                  \
    "      assert(tl, ('%s:%d claims %s:%d, past its end'):format(what, i, file, n))\n"                  \
    "      assert(tl:sub(1, 1) ~= '%', ('%s:%d maps to Lua line %s:%d'):format(what, i, file, n))\n"     \
    "      assert(l:match(pattern(tl)), ('%s:%d is <%s> but %s:%d is <%s>'):format(what, i, l, file, n, tl))\n" \
    "      n = n + 1\n"                                                                                  \
    "    end\n"                                                                                          \
    "  end\n"                                                                                            \
    "  return directives\n"                                                                              \
    "end\n"

Test(gen, line_directives_map_to_template_lines) {
    const char *out = tmp_path("lines");
    proc p = fa8("gen --target cpu --profile minimal --out '%s'", out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    LUA_OK(LINE_CHECK
        "local dir = TMP .. '/lines'\n"
        "local m = require('dkjson').decode(read(dir .. '/manifest.json'))\n"
        "local per_dir = {}\n"
        "for _, e in ipairs(m.instances) do\n"
        "  local text = read(dir .. '/' .. e.name .. '.c')\n"
        "  local k = check_lines(text, ROOT, e.name)\n"
        "  assert(k >= 1, e.name .. ' has no #line directive')\n"
        "  assert(has(text, '#line 1 \"templates/cpu/' .. e.functional.dir .. '.c.tpl\"'), e.name .. ': wrong template')\n"
        "  per_dir[e.functional.dir] = true\n"
        "end\n"
        "for _, d in ipairs({ 'quant', 'fwd', 'delta', 'bwd' }) do assert(per_dir[d], 'no ' .. d .. ' instance checked') end\n");
}

/* --line-root (what the build passes, so nvcc's dependency files name templates that exist): every #line path
 * carries the prefix and still maps to the template's lines; the manifest's recorded command leaves it out. */
Test(gen, line_root_prefixes_directives) {
    const char *out = tmp_path("lines-root");
    proc p = fa8("gen --target cpu --profile minimal --kernels 'fa8_fwd_*' --line-root '%s' --out '%s'", FA8_SOURCE_ROOT, out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    LUA_OK(LINE_CHECK
        "local dir = TMP .. '/lines-root'\n"
        "local m = require('dkjson').decode(read(dir .. '/manifest.json'))\n"
        "assert(not m.command:find('line%-root'), m.command)\n"
        "assert(#m.instances >= 1, 'no instance')\n"
        "for _, e in ipairs(m.instances) do\n"
        "  local text = read(dir .. '/' .. e.name .. '.c')\n"
        "  assert(has(text, '#line 1 \"' .. ROOT .. '/templates/cpu/fwd.c.tpl\"'), e.name .. ': no prefixed directive')\n"
        "  assert(not text:find('\\n#line %d+ \"templates/'), e.name .. ': an unprefixed directive')\n"
        "  -- the prefixed paths are absolute: check them against the file system root\n"
        "  assert(check_lines(text, '', e.name) >= 1)\n"
        "end\n");
}

/* a --line-root without the templates under it would write #line paths that name nothing: refused, named */
Test(gen, line_root_must_hold_the_templates) {
    const char *bad = tmp_path("no-such-root");
    proc p = fa8("gen --target cpu --profile minimal --kernels 'fa8_fwd_*' --line-root '%s' --out '%s'", bad, tmp_path("lines-bad"));
    cr_assert_eq(p.code, 2, "exit %d, stderr: %s", p.code, p.err);
    cr_assert(strstr(p.err, bad) && strstr(p.err, "no templates/ directory"), "%s", p.err);
}

Test(gen, line_directives_survive_lua_loops) {
    /* a template in a scratch root: loops, a conditional, Lua lines between literal runs */
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/templates/t", g_tmp);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tdir);
    cr_assert_eq(system(cmd), 0);
    spit(tmp_path("templates/t/loop.c.tpl"),
         "/* $(title) */\n"
         "int head;\n"
         "% for i = 1, n do\n"
         "int a$(i) = $(i * 2);\n"
         "int b$(i);\n"
         "%   if i % 2 == 0 then\n"
         "int even$(i);\n"
         "%   end\n"
         "% end\n"
         "int tail;\n"
         "% local unused = 1\n"
         "int last; /* $(n) */\n");
    LUA_OK(LINE_CHECK
        "local emit = require('fa8.emit')\n"
        "emit.root = TMP\n"
        "local text = emit.expand('t/loop.c.tpl', { title = 'x', n = 4 })\n"
        "local k = check_lines(text, TMP, 'loop.c')\n"
        "-- line 1, then each iteration's body and each even-branch, then after the loop, then the last line\n"
        "assert(k == 1 + 4 + 2 + 1 + 1, ('%d directives:\\n%s'):format(k, text))\n"
        "assert(has(text, 'int a3 = 6;') and has(text, 'int even4;') and not has(text, 'int even3;'), text)\n"
        "-- negative control: the checker notices a directive that is off by one\n"
        "local shifted = text:gsub('#line 4 ', '#line 5 ', 1)\n"
        "assert(not pcall(check_lines, shifted, TMP, 'shifted'), 'an off-by-one #line went unnoticed')\n");
}

/* Tuned tables at build time (gen/fa8/tuned.lua): malformed files are refused with file:line; rows name
 * canonical instances of their key and target; the instances they name are built with their parts (a
 * backward with its delta preps and bundles, a GPU instance with its CPU twin); rows for head geometries the
 * build does not cover are left out; the generated C array is sorted for the runtime's binary search. */
Test(gen, tuned_tables_at_build_time) {
    LUA_OK(
        "local tuned = require('fa8.tuned')\n"
        "local H = table.concat(tuned.columns, ',') .. '\\n'\n"
        "local function row(t) return table.concat(t, ',') .. '\\n' end\n"
        "local FWD = { 'cpu', '2', 'ci', 'fa8_fwd_e4m3_d64v64_gqa_full', 's1024_bh8', 'fa8_fwd_cpu_e4m3_d64v64_gqa_full_m128n64_w1s1', '100', '', '', '', '', '', 'c', '', '', 'd' }\n"
        "local BWD = { 'cpu', '0', 'ci', 'fa8_bwd_e4m3_d64v64_gqa_full', 's512_bh8', 'fa8_bwd_cpu_e4m3_d64v64_gqa_full_m128n64_w1s1', '300', '', '', '', '', '', 'c', '', '', 'd' }\n"
        "local function with(t, i, v) local c = { table.unpack(t) }; c[i] = v; return c end\n"
        "-- parse errors carry file:line and the bad value\n"
        "expect_error(function() tuned.parse('t.csv', 'a,b\\n') end, 't.csv:1', 'header')\n"
        "expect_error(function() tuned.parse('t.csv', '# c\\n') end, 't.csv', 'no header')\n"
        "expect_error(function() tuned.parse('t.csv', H .. 'cpu,2\\n') end, 't.csv:2', '2 fields')\n"
        "expect_error(function() tuned.parse('t.csv', '# x\\n' .. H .. row(with(FWD, 5, 's1000_bh8'))) end, 't.csv:3', 's1000_bh8')\n"
        "expect_error(function() tuned.parse('t.csv', H .. row(with(FWD, 7, '0'))) end, 't.csv:2', 'median_us')\n"
        "expect_error(function() tuned.parse('t.csv', H .. row(with(FWD, 2, '-1'))) end, 't.csv:2', \"sm_count '-1'\")\n"
        "expect_error(function() tuned.parse('t.csv', H .. row(with(FWD, 4, 'quant'))) end, 't.csv:2', \"key 'quant'\")\n"
        "expect_error(function() tuned.load_dir(TMP .. '/no-such-dir') end, 'no-such-dir', 'not a directory')\n"
        "local out, code = run('gen --target cpu --hdim 64 --tuned-dir ' .. q(TMP .. '/no-such-dir') .. ' --out ' .. q(TMP .. '/x'))\n"
        "assert(code == 2 and has(out, 'no-such-dir'), out)\n"
        "local rows = tuned.parse('t.csv', H .. row(FWD) .. row(BWD))\n"
        "assert(#rows == 2 and rows[1].seq == 1024 and rows[1].bh == 8 and rows[1].line == 2 and rows[2].sm_count == 0)\n"
        "-- a row's instance must decode, be canonical, and belong to the row's key and target\n"
        "local bad = tuned.parse('t.csv', H .. row(with(FWD, 4, 'fa8_fwd_e4m3_d128v128_gqa_full')))[1]\n"
        "expect_error(function() tuned.config_of(bad, reg) end, 't.csv:2', 'has key fa8_fwd_e4m3_d64v64_gqa_full')\n"
        "bad = tuned.parse('t.csv', H .. row(with(FWD, 1, 'sm_89')))[1]\n"
        "expect_error(function() tuned.config_of(bad, reg) end, 't.csv:2', 'for target cpu')\n"
        "bad = tuned.parse('t.csv', H .. row(with(FWD, 6, 'fa8_fwd_cpu_e4m3_d64v64_gqa_full_m128n64_w1s1_scalar')))[1]\n"
        "expect_error(function() tuned.config_of(bad, reg) end, 't.csv:2')\n"
        "-- enumeration builds what the rows name, with the backward's parts\n"
        "local res = enumerate.run({ registry = reg, profile = 'default', targets = { 'cpu' }, tuned_rows = rows })\n"
        "local names = {}\n"
        "for _, c in ipairs(res.instances) do names[c.name] = true end\n"
        "assert(names['fa8_fwd_cpu_e4m3_d64v64_gqa_full_m128n64_w1s1'] and names['fa8_bwd_cpu_e4m3_d64v64_gqa_full_m128n64_w1s1'])\n"
        "for _, m in ipairs({ 'stale', 'dohat', 'matched', 'split' }) do\n"
        "  assert(names['fa8_delta_cpu_e4m3_d64v64_gqa_full_' .. m .. '_m128n64_w1s1'], m)\n"
        "  local found = false\n"
        "  for _, b in ipairs(res.bundles) do found = found or b.name == 'fa8_bundle_cpu_e4m3_d64v64_gqa_full_' .. m .. '_m128n64_w1s1' end\n"
        "  assert(found, 'no bundle for ' .. m)\n"
        "end\n"
        "assert(#res.tuned == 2)\n"
        "-- the heuristic order is unchanged: the profile's own tile still comes first\n"
        "local first\n"
        "for _, c in ipairs(res.instances) do if not first and c.key == 'fa8_fwd_e4m3_d64v64_gqa_full' then first = c.name end end\n"
        "assert(first == 'fa8_fwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1', first)\n"
        "-- rows for head geometries the build leaves out are left out too\n"
        "res = enumerate.run({ registry = reg, profile = 'default', targets = { 'cpu' }, hdims = { { 128, 128 } }, tuned_rows = rows })\n"
        "assert(#res.tuned == 0)\n"
        "for _, c in ipairs(res.instances) do assert(not c.name:find('d64v64', 1, true), c.name) end\n"
        "-- so are rows whose pipeline the build filters out (fa8 list --pipelines)\n"
        "res = enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a' }, pipelines = { 'wgmma' },\n"
        "  tuned_rows = tuned.parse('p.csv', H .. row({ 'sm_90a', '132', 'H200', 'fa8_bwd_e4m3_d128v128_gqa_full', 's8192_bh64', 'fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n64_w4s1_mma', '3000', '', '', '', '', '', 'c', '', '', 'd' })) })\n"
        "assert(#res.tuned == 0)\n"
        "-- a row naming a config the constraints refuse stops the build, naming the row\n"
        "local unbuildable = tuned.parse('u.csv', H .. row(with(with(FWD, 6, 'fa8_fwd_cpu_e4m3_d64v64_gqa_full_m1024n1024_w1s1'), 4, 'fa8_fwd_e4m3_d64v64_gqa_full')))\n"
        "expect_error(function() enumerate.run({ registry = reg, profile = 'default', targets = { 'cpu' }, tuned_rows = unbuildable }) end,\n"
        "  'u.csv:2', 'cannot be built')\n"
        "-- a GPU row brings its CPU twin when the build mirrors\n"
        "local G = { 'sm_90a', '132', 'H200', 'fa8_fwd_e4m3_d128v128_gqa_full', 's8192_bh64', 'fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s3', '3000', '', '', '', '', '', 'c', '', '', 'd' }\n"
        "res = enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a', 'cpu' }, pipelines = { 'scalar', 'mma', 'wgmma' },\n"
        "  mirror_cpu = true, tuned_rows = tuned.parse('g.csv', H .. row(G)) })\n"
        "names = {}\n"
        "for _, c in ipairs(res.instances) do names[c.name] = true end\n"
        "assert(names['fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s3'], 'the tuned GPU instance is built')\n"
        "assert(names['fa8_fwd_cpu_e4m3_d128v128_gqa_full_m128n128_w1s1'], 'and its CPU twin')\n"
        "-- a name filter (fa8 gen --kernels) that leaves out a row's instance leaves out the row: it has nothing to\n"
        "-- dispatch to (the descriptor table once indexed a missing instance and the generator crashed)\n"
        "local both = tuned.parse('k.csv', H .. row(G) .. row({ 'sm_90a', '132', 'H200', 'fa8_bwd_e4m3_d128v128_gqa_full', 's8192_bh64', 'fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n128_w12s2', '3000', '', '', '', '', '', 'c', '', '', 'd' }))\n"
        "res = enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a' }, pipelines = { 'wgmma' },\n"
        "  kernels = 'fa8_fwd_*', tuned_rows = both })\n"
        "assert(#res.tuned == 1 and res.tuned[1].instance == G[6], #res.tuned)\n"
        "for _, c in ipairs(res.instances) do assert(c.name:find('^fa8_fwd_'), c.name) end\n"
        "res = enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a' }, pipelines = { 'wgmma' }, tuned_rows = both })\n"
        "assert(#res.tuned == 2)\n"
        "-- the C array is sorted by (target, key, seq, bh, sm desc, median, instance)\n"
        "local s = tuned.sorted(tuned.parse('t.csv', H .. row(FWD) .. row(BWD) .. row(with(FWD, 5, 's256_bh8'))))\n"
        "assert(s[1].key:find('bwd') and s[2].seq == 256 and s[3].seq == 1024)\n");
}

/* The tables committed under tune/tables are files of record the build compiles in: each parses, and every row's
 * instance is buildable for its target in the shipping profile (with its parts and CPU twin). A template or
 * constraint change that makes a tuned tile unbuildable fails here, naming the row, instead of in a user's build. */
Test(gen, committed_tuned_tables_build) {
    LUA_OK(
        "local tuned = require('fa8.tuned')\n"
        "local rows = tuned.load_dir(os.getenv('FA8_ROOT') .. '/tune/tables')\n"
        "local by_target = {}\n"
        "for _, r in ipairs(rows) do by_target[r.target] = by_target[r.target] or {}; table.insert(by_target[r.target], r) end\n"
        "for tname, trows in pairs(by_target) do\n"
        "  local tg = {}\n"
        "  if tname ~= 'cpu' then tg = { tname, 'cpu' } else tg = { 'cpu' } end\n"
        "  local res = enumerate.run({ registry = reg, profile = 'default', targets = tg, mirror_cpu = tname ~= 'cpu', tuned_rows = trows })\n"
        "  local names = {}\n"
        "  for _, c in ipairs(res.instances) do names[c.name] = true end\n"
        "  for _, r in ipairs(trows) do assert(names[r.instance], ('%s:%d: %s not built'):format(r.path, r.line, r.instance)) end\n"
        "  assert(#res.tuned == #trows, tname .. ': rows left out')\n"
        "end\n");
}

/* tune/merge.lua: a sweep's rows replace the committed rows of the same target, SM count, key and bucket that
 * its quantization speaks for (a 128-row sweep keeps a 192-key tile's per-tensor row; a per-tensor sweep replaces
 * only such rows), everything else stays line for line, the new rows go last under the --note lines, and the
 * result parses; bad input (usage, a malformed table, a missing file, a bad --scale-rows) is refused naming it,
 * and nothing is written then. */
Test(gen, tune_merge_script) {
    LUA_OK(
        "local script = q(ROOT .. '/tune/merge.lua')\n"
        "local function sh(args)\n"
        "  local p = assert(io.popen('lua5.4 ' .. script .. ' ' .. args .. ' 2>&1', 'r'))\n"
        "  local out = p:read('a'); local _, how, code = p:close()\n"
        "  return out, how == 'exit' and code or -1\n"
        "end\n"
        "local tuned = require('fa8.tuned')\n"
        "local H = table.concat(tuned.columns, ',') .. '\\n'\n"
        "local function row(key, bucket, inst, us) return ('sm_90a,132,H200,%s,%s,%s,%s,,,,,,c,13.0,580,d\\n'):format(key, bucket, inst, us) end\n"
        "local K1, K2 = 'fa8_fwd_e4m3_d128v128_gqa_full', 'fa8_fwd_e4m3_d64v64_gqa_full'\n"
        "local I1, I2 = 'fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m192n128_w16s3_vperm', 'fa8_fwd_sm90a_e4m3_d64v64_gqa_full_m192n128_w16s3_vperm'\n"
        "local old = '# header comment\\n' .. H .. '# block A\\n' .. row(K1, 's8192_bh64', I1, '2500') .. row(K1, 's8192_bh64', I1 .. '_x', '2600')\n"
        "  .. row(K2, 's8192_bh64', I2, '2000') .. '# block B\\n' .. row(K1, 's2048_bh64', I1, '240') .. '\\n'\n"
        "local new = '# fa8 tune\\n' .. H .. row(K1, 's8192_bh64', I1 .. '_unitskip', '2440') .. row(K1, 's4096_bh64', I1 .. '_unitskip', '700')\n"
        "local T, N, O = TMP .. '/merge-old.csv', TMP .. '/merge-new.csv', TMP .. '/merge-out.csv'\n"
        "for p, t in pairs({ [T] = old, [N] = new }) do local f = assert(io.open(p, 'w')); f:write(t); f:close() end\n"
        "local out, code = sh(q(T) .. ' ' .. q(N) .. ' --note ' .. q('rows from the unitskip sweep') .. ' --out ' .. q(O))\n"
        "assert(code == 0, out)\n"
        "assert(has(out, 'replaced ' .. K1 .. ' s8192_bh64: ' .. I1 .. ' (2500.0 us), ' .. I1 .. '_x (2600.0 us) -> ' .. I1 .. '_unitskip (2440.0 us)'), out)\n"
        "assert(has(out, 'added ' .. K1 .. ' s4096_bh64: (none) -> ' .. I1 .. '_unitskip (700.0 us)'), out)\n"
        "local f = assert(io.open(O)); local got = f:read('a'); f:close()\n"
        "local want = '# header comment\\n' .. H .. '# block A\\n' .. row(K2, 's8192_bh64', I2, '2000') .. '# block B\\n'\n"
        "  .. row(K1, 's2048_bh64', I1, '240') .. '# rows from the unitskip sweep\\n' .. row(K1, 's8192_bh64', I1 .. '_unitskip', '2440')\n"
        "  .. row(K1, 's4096_bh64', I1 .. '_unitskip', '700')\n"
        "assert(got == want, got)\n"
        "assert(#tuned.parse(O, got) == 4)\n"
        "-- a 192-key tile (per-tensor scales only) beside the 128-row rows: a 128-row sweep keeps it, a per-tensor\n"
        "-- sweep replaces it alone\n"
        "local P = 'fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n192_w12s2'\n"
        "local T2 = TMP .. '/merge-old2.csv'\n"
        "f = assert(io.open(T2, 'w')); f:write(H .. row(K1, 's8192_bh64', I1, '2500') .. row(K1, 's8192_bh64', P, '2450')); f:close()\n"
        "out, code = sh(q(T2) .. ' ' .. q(N) .. ' --out ' .. q(O))\n"
        "assert(code == 0 and has(out, 'kept ' .. P .. ' (2450.0 us) (not a 128-row sweep'), out)\n"
        "f = assert(io.open(O)); got = f:read('a'); f:close()\n"
        "assert(got == H .. row(K1, 's8192_bh64', P, '2450') .. row(K1, 's8192_bh64', I1 .. '_unitskip', '2440')\n"
        "  .. row(K1, 's4096_bh64', I1 .. '_unitskip', '700'), got)\n"
        "local N0 = TMP .. '/merge-new0.csv'\n"
        "f = assert(io.open(N0, 'w')); f:write(H .. row(K1, 's8192_bh64', P .. '_vperm', '2400')); f:close()\n"
        "out, code = sh(q(T2) .. ' ' .. q(N0) .. ' --scale-rows 0 --out ' .. q(O))\n"
        "assert(code == 0 and has(out, 'replaced ' .. K1 .. ' s8192_bh64: ' .. P .. ' (2450.0 us) -> ' .. P .. '_vperm (2400.0 us); kept ' .. I1), out)\n"
        "f = assert(io.open(O)); got = f:read('a'); f:close()\n"
        "assert(got == H .. row(K1, 's8192_bh64', I1, '2500') .. row(K1, 's8192_bh64', P .. '_vperm', '2400'), got)\n"
        "out, code = sh(q(T2) .. ' ' .. q(N0) .. ' --scale-rows -4 --out ' .. q(TMP .. '/merge-none.csv'))\n"
        "assert(code == 2 and has(out, \"--scale-rows '-4'\"), out)\n"
        "-- without --out the table is rewritten in place\n"
        "out, code = sh(q(T) .. ' ' .. q(N))\n"
        "f = assert(io.open(T)); got = f:read('a'); f:close()\n"
        "assert(code == 0 and has(got, I1 .. '_unitskip') and not has(got, I1 .. '_x'), out)\n"
        "-- bad input: nothing written, the culprit named\n"
        "out, code = sh(q(T))\n"
        "assert(code == 2 and has(out, 'usage') and has(out, '1 file argument'), out)\n"
        "out, code = sh(q(T) .. ' ' .. q(N) .. ' --frobnicate')\n"
        "assert(code == 2 and has(out, \"unknown option '--frobnicate'\"), out)\n"
        "out, code = sh(q(T) .. ' ' .. q(N) .. ' --note')\n"
        "assert(code == 2 and has(out, '--note needs a value'), out)\n"
        "local bad = TMP .. '/merge-bad.csv'\n"
        "f = assert(io.open(bad, 'w')); f:write(H .. 'sm_90a,x\\n'); f:close()\n"
        "out, code = sh(q(T) .. ' ' .. q(bad) .. ' --out ' .. q(TMP .. '/merge-none.csv'))\n"
        "assert(code == 1 and has(out, 'merge-bad.csv:2'), out)\n"
        "assert(io.open(TMP .. '/merge-none.csv') == nil, 'a refused merge wrote its output')\n"
        "out, code = sh(q(T) .. ' ' .. q(TMP .. '/merge-missing.csv'))\n"
        "assert(code == 1 and has(out, 'merge-missing.csv'), out)\n"
        "f = assert(io.open(bad, 'w')); f:write('# only a comment\\n' .. H); f:close()\n"
        "out, code = sh(q(T) .. ' ' .. q(bad))\n"
        "assert(code == 1 and has(out, 'no rows to merge'), out)\n");
}

/* tune/gain-vs-default.lua: bad input gets a clear error (usage; an unknown argument; a malformed table names file:line; a missing cache
 * names its path), and on the committed H200 table and cache every row finds the shipping choice's time. */
Test(gen, gain_vs_default_script) {
    LUA_OK(
        "local script = q(ROOT .. '/tune/gain-vs-default.lua')\n"
        "local function sh(args)\n"
        "  local p = assert(io.popen('lua5.4 ' .. script .. ' ' .. args .. ' 2>&1', 'r'))\n"
        "  local out = p:read('a'); local _, how, code = p:close()\n"
        "  return out, how == 'exit' and code or -1\n"
        "end\n"
        "local out, code = sh('')\n"
        "assert(code == 2 and has(out, 'usage'), out)\n"
        "local bad = TMP .. '/bad-table.csv'\n"
        "local f = assert(io.open(bad, 'w')); f:write(table.concat(require('fa8.tuned').columns, ',') .. '\\nsm_90a,x\\n'); f:close()\n"
        "out, code = sh(q(bad) .. ' ' .. q(TMP .. '/none.tsv'))\n"
        "assert(code == 1 and has(out, 'bad-table.csv:2'), out)\n"
        "local T, C = q(ROOT .. '/tune/tables/sm_90a-132.csv'), q(ROOT .. '/tune/cache/sm_90a-132.tsv')\n"
        "out, code = sh(T .. ' ' .. q(TMP .. '/no-such-cache.tsv'))\n"
        "assert(code == 1 and has(out, 'no-such-cache.tsv'), out)\n"
        "out, code = sh(T .. ' ' .. C .. ' notes.txt')\n"
        "assert(code == 2 and has(out, \"'notes.txt' is neither\"), out)\n"
        "-- the committed table's rows come from these sweeps (the tile sweep, the wgmma backward's, the forward tiles' and\n"
        "-- the split forward's of 2026-11-30, the d64/d128 forward's under 128-row blocks and per-tensor scales, and\n"
        "-- the forward's with and without vperm, standard and split, and again with vperm's permuters two units in flight\n"
        "-- under 128-row blocks and per-tensor scales, the re-tune of every forward row under persistent grids, the\n"
        "-- d128 forward's with three consumer warpgroups of 2026-12-01, and the d128, d64 and MLA forwards' (standard\n"
        "-- and split) with the third ring stage of 2026-12-02, the d256 / MLA split forwards' at S=2K/4K of the same day,\n"
        "-- the d128 standard forward's with and without unitskip of 2026-12-04, the causal backwards' qheads sweeps and the\n"
        "-- 8/1 (B x H = 8) sweep of every head dim the same day, the d96 sweeps of 2026-12-06, and the same day's forward\n"
        "-- re-sweep of d256 / MLA after O's TMA store and of d64 with unitskip, standard and split, and the d128, d64\n"
        "-- and d256 forwards' under power-of-two scales, the quantizer's default since that day, and the rest of the\n"
        "-- forward rows under it (d128 at S=2K/4K, every split row, d256 and MLA at S=2K, the d128 B x H = 8 rows)):\n"
        "-- every row is timed in one of their caches, per-tensor rows against the default's per-tensor time\n"
        "-- (except the d > 128 backwards, whose shipping default became the head-dim-split wgmma backward after the\n"
        "-- sweeps: no cache times it yet)\n"
        "local more = {}\n"
        "for _, c in ipairs({ 'wgmma-bwd-v0', 'fwd-bn192', 'fwd-split', 'fwd-blocks', 'fwd-pertensor', 'fwd-vperm', 'fwd-vperm-split', 'fwd-vperm-pairs', 'fwd-vperm-pairs-split', 'fwd-vperm-pt', 'fwd-vperm-pt-split', 'fwd-retune', 'fwd-retune-split', 'fwd-retune-pt', 'fwd-3wg', 'fwd-3wg-pt', 'fwd-3wg-s3', 'fwd-3wg-split', 'fwd-s3-d64-mla', 'fwd-split-d64-mla', 'split-256-mla-s2k4k', 'fwd-unitskip', 'bwd-qheads', 'bwd-qheads-64-256', 'bh8', 'd96', 'd96-split', 'd96-bwd', 'fwd-o-tma', 'fwd-o-tma-split', 'fwd-d64-unitskip', 'fwd-d64-unitskip-split', 'fwd-pow2', 'fwd-pow2-d64', 'fwd-pow2-d256', 'fwd-pow2-split', 'bh8-pow2' }) do more[#more + 1] = q(ROOT .. '/tune/cache/' .. c .. '.tsv') end\n"
        "out, code = sh(T .. ' ' .. C .. ' ' .. table.concat(more, ' '))\n"
        "assert(code == 0 and has(out, 'Geometric-mean speed-up'), out)\n"
        "-- a per-tensor sweep's row is compared within its sweep: the 192-key tile against the default's per-tensor time\n"
        "assert(out:find('| fa8_fwd_e4m3_d64v64_gqa_causal | s8192_bh64 (per-tensor scales) | fa8_fwd_sm90a_e4m3_d64v64_gqa_causal_m128n128_w12s2 | 1559.4 | fa8_fwd_sm90a_e4m3_d64v64_gqa_causal_m128n192_w12s2 | 1249.9 | +24.8% |', 1, true), out)\n"
        "for line in out:gmatch('[^\\n]+') do\n"
        "  if has(line, 'not timed') then assert(line:find('_d256v256_[%w_]+_m64n64_w12s2 |') or line:find('_d192v%d+_[%w_]+_m64n64_w12s2 |'), line) end\n"
        "end\n"
        "out, code = sh(T .. ' ' .. C)\n"
        "assert(code == 0 and has(out, 'not timed'), 'the first sweep alone did not time the wgmma backward: ' .. out)\n");
}

/* Untuned, a build with several tiles per key (the tuning profile) dispatches the tile the shipping profile
 * would, so the tuner's gain report compares against the real default, not against the smallest tile. */
Test(gen, tuning_profile_heuristic_is_the_shipping_choice) {
    LUA_OK(
        "for _, t in ipairs({ 'cpu', 'sm_90a' }) do\n"
        "  for _, hd in ipairs({ { 64, 64 }, { 128, 128 }, { 256, 256 } }) do\n"
        "    local function firsts(profile)\n"
        "      local f = {}\n"
        "      for _, c in ipairs(enumerate.run({ registry = reg, profile = profile, targets = { t }, hdims = { hd } }).instances) do\n"
        "        if (c.functional.dir == 'fwd' or c.functional.dir == 'bwd') and not f[c.key] then f[c.key] = c.name end\n"
        "      end\n"
        "      return f\n"
        "    end\n"
        "    local ship, tun, n = firsts('default'), firsts('tuning'), 0\n"
        "    for key, name in pairs(ship) do\n"
        "      if tun[key] then n = n + 1; assert(tun[key] == name, ('%s: tuning build picks %s, shipping %s'):format(key, tun[key], name)) end\n"
        "    end\n"
        "    assert(n > 0, t .. ': no shared key')\n"
        "  end\n"
        "end\n");
}

/* vperm and unitskip (schema.lua) are wgmma forward options: the tuning set times every wgmma forward tile with
 * and without each, nothing else carries them, and the shipping tiles leave them off (a default every sweep has
 * timed). Their tokens come in that order, after w<W>s<S>. */
Test(gen, vperm_and_unitskip_only_on_wgmma_forwards) {
    LUA_OK(
        "local hd = { { 64, 64 }, { 128, 128 }, { 256, 256 } }\n"
        "local res = enumerate.run({ registry = reg, profile = 'tuning', targets = { 'sm_90a' }, hdims = hd })\n"
        "local tun, pruned = res.instances, {}\n"
        "-- a twin the register model prunes (split d128 on three warpgroups with vperm spilled) is the one exception\n"
        "for _, r in ipairs(res.rejected) do if r.reason:find('register estimate', 1, true) then pruned[r.name] = true end end\n"
        "local names = {}\n"
        "for _, c in ipairs(tun) do names[c.name] = true end\n"
        "-- name with the field's token on: vperm right after w<W>s<S>, unitskip after vperm\n"
        "local function with(c, field)\n"
        "  local w = c.name:match('^(.-_w%d+s%d+)')\n"
        "  local vp = (c.tuning.vperm or field == 'vperm') and '_vperm' or ''\n"
        "  local us = (c.tuning.unitskip or field == 'unitskip') and '_unitskip' or ''\n"
        "  return w .. vp .. us\n"
        "end\n"
        "for _, field in ipairs({ 'vperm', 'unitskip' }) do\n"
        "  local on = 0\n"
        "  for _, c in ipairs(tun) do\n"
        "    if c.tuning[field] then\n"
        "      on = on + 1\n"
        "      assert(c.functional.dir == 'fwd' and c.tuning.pipeline == 'wgmma', c.name)\n"
        "      assert(c.name:match('_' .. field .. '_') or c.name:match('_' .. field .. '$'), c.name)\n"
        "      local off = c.name:gsub('_' .. field, '')\n"
        "      assert(names[off] or pruned[off], c.name .. ' has no twin without ' .. field .. ' in the tuning set')\n"
        "    elseif c.functional.dir == 'fwd' and c.tuning.pipeline == 'wgmma' then\n"
        "      local twin = with(c, field)\n"
        "      assert(names[twin] or pruned[twin], c.name .. ' has no ' .. field .. ' twin (' .. twin .. ') in the tuning set')\n"
        "    else\n"
        "      assert(not c.name:match('_' .. field), c.name)\n"
        "    end\n"
        "  end\n"
        "  assert(on > 0, 'no ' .. field .. ' instance in the tuning set')\n"
        "end\n"
        "for _, c in ipairs(enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a' }, hdims = hd }).instances) do\n"
        "  assert(not c.tuning.vperm and not c.tuning.unitskip, 'the shipping tiles turn vperm or unitskip on: ' .. c.name)\n"
        "end\n");
}

/* qheads (schema.lua): the tuning set times every causal wgmma backward with head groups with 4, 2 and 1 query heads
 * per CTA beside the whole group; each such backward has a bundle per delta mode, named apart, whose delta prep is
 * the one of its tile without qheads (the field shapes the backward's grid only); nothing else carries it. */
Test(gen, qheads_only_on_causal_wgmma_backwards) {
    LUA_OK(
        "local hd = { { 64, 64 }, { 128, 128 }, { 192, 128 } }\n"
        "local res = enumerate.run({ registry = reg, profile = 'tuning', targets = { 'sm_90a' }, hdims = hd })\n"
        "local names, on = {}, 0\n"
        "for _, c in ipairs(res.instances) do names[c.name] = c end\n"
        "for _, c in ipairs(res.instances) do\n"
        "  local f, t = c.functional, c.tuning\n"
        "  if t.qheads > 0 then\n"
        "    on = on + 1\n"
        "    assert(f.dir == 'bwd' and t.pipeline == 'wgmma' and f.causal and f.layout ~= 'mha', c.name)\n"
        "    assert(c.name:match('_qh' .. t.qheads .. '$'), c.name)\n"
        "    assert(names[c.name:gsub('_qh%d+$', '')], c.name .. ' has no twin without qheads')\n"
        "  elseif f.dir == 'bwd' and t.pipeline == 'wgmma' and f.causal and f.layout ~= 'mha' then\n"
        "    for _, q in ipairs({ 4, 2, 1 }) do assert(names[c.name .. '_qh' .. q], c.name .. ' has no qh' .. q .. ' twin') end\n"
        "  end\n"
        "end\n"
        "assert(on >= 6, 'qheads twins: ' .. on)\n"
        "local per = {}\n"
        "for _, b in ipairs(res.bundles) do\n"
        "  assert(b.delta.tuning.qheads == 0 and b.fwd.tuning.qheads == 0, b.name)\n"
        "  if b.bwd.tuning.qheads > 0 then\n"
        "    assert(b.name:match('_qh' .. b.bwd.tuning.qheads .. '$'), b.name)\n"
        "    per[b.bwd.name] = (per[b.bwd.name] or 0) + 1\n"
        "  end\n"
        "end\n"
        "for n, c in pairs(names) do\n"
        "  if c.tuning.qheads > 0 then assert(per[n] == 4, n .. ' has ' .. tostring(per[n]) .. ' bundles, not one per delta mode') end\n"
        "end\n"
        "for _, c in ipairs(enumerate.run({ registry = reg, profile = 'default', targets = { 'sm_90a' }, hdims = hd }).instances) do\n"
        "  assert(c.tuning.qheads == 0, 'a shipping tile sets qheads: ' .. c.name)\n"
        "end\n");
}

/* A bundle with CUDA targets: the CUDA host side instead of its stub, one nvcc rule per architecture that
 * lists exactly that architecture's sources, every file once. (CI compiles it through the main build's
 * templates; tools/examples links the CPU bundle.) */
Test(gen, cuda_bundle_build_files) {
    LUA_OK(
        "local dir = TMP .. '/cb'\n"
        "local out, code = run('gen --target cpu,sm_90a,sm_89 --hdim 64 --profile minimal --out ' .. q(dir))\n"
        "assert(code == 0, out)\n"
        "local m = require('dkjson').decode(read(dir .. '/manifest.json'))\n"
        "local seen = {}\n"
        "for _, f in ipairs(m.files) do assert(not seen[f], f .. ' listed twice'); seen[f] = true end\n"
        "assert(seen['cuda_backend.c'] and not seen['cuda_absent.c'], 'a CUDA bundle carries the CUDA host side')\n"
        "local mk = read(dir .. '/Makefile')\n"
        "assert(has(mk, '-gencode=arch=compute_90a,code=sm_90a') and has(mk, '-gencode=arch=compute_89,code=sm_89'))\n"
        "for _, e in ipairs(m.instances) do\n"
        "  if e.target ~= 'cpu' then\n"
        "    local tag = e.target:gsub('_', '')\n"
        "    local block = mk:match('CU_' .. tag .. ' = \\\\\\n(.-)\\nCU_OBJS')\n"
        "    assert(block and has(block, e.name .. '.cu'), e.name .. ' is not in the ' .. tag .. ' rule')\n"
        "  end\n"
        "end\n"
        "local mb = read(dir .. '/meson.build')\n"
        "assert(has(mb, \"find_program('nvcc'\") and has(mb, 'compute_90a,code=sm_90a'), 'meson.build lacks the nvcc rules')\n");
}

/* A generated file of `fa8 gen --out DIR` (caller frees); a missing one fails the test. */
static char *read_generated(const char *dir, const char *file) {
    char f[1024];
    snprintf(f, sizeof f, "%s/%s", dir, file);
    size_t n = 0;
    char *s = test_slurp(f, &n);
    cr_assert(s, "%s was not generated", file);
    return s;
}

/* d96 on the wgmma path (constraints.wgmma_hdims): the kernels compute on the head dims rounded up to a 64-byte
 * chunk, and the real ones bound the tensor maps and the stores; the d128 instances' real and padded dims agree. */
Test(gen, wgmma_d96_runs_padded_to_128) {
    const char *out = tmp_path("d96");
    proc p = fa8("gen --target sm_90a --profile default --hdim 96,128 --kernels 'fa8_fwd_sm90a_e4m3_d*_gqa_full_m128n128_w12s2,"
                 "fa8_bwd_sm90a_e4m3_d*_gqa_full_m64n128_w12s2' --out '%s'", out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    static const struct { const char *file, *want; } cases[] = {
        { "fa8_fwd_sm90a_e4m3_d96v96_gqa_full_m128n128_w12s2.cu", "DQK = 128, DV = 128," },
        { "fa8_fwd_sm90a_e4m3_d96v96_gqa_full_m128n128_w12s2.cu", "DQK_REAL = 96, DV_REAL = 96;" },
        { "fa8_bwd_sm90a_e4m3_d96v96_gqa_full_m64n128_w12s2.cu", "DQK_REAL = 96, DV_REAL = 96;" },
        { "fa8_bwd_sm90a_e4m3_d96v96_gqa_full_m64n128_w12s2.cu", "m64n128k32" },
        { "fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n128_w12s2.cu", "DQK_REAL = 128, DV_REAL = 128;" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        char *s = read_generated(out, cases[i].file);
        cr_assert(strstr(s, cases[i].want) != NULL, "%s lacks '%s'", cases[i].file, cases[i].want);
        free(s);
    }
}

/* The portable backward leaves ptxas its own occupancy target: on sm_90a (FP8 mma.sync lowered to F16) ptxas aims at
 * two CTAs an SM at d64/d192 and spills a little, and that ran 27 % (d64) and 7 % (d192) faster than one CTA
 * without spills (H100, bench/experiments/portable-bwd-ptxas-choice.md). A minimum CTA count would trade that back. */
Test(gen, mma_bwd_leaves_ptxas_its_occupancy) {
    const char *out = tmp_path("minb");
    proc p = fa8("gen --target sm_90a,sm_89 --profile default --hdim 64,192 --pipelines mma "
                 "--kernels 'fa8_bwd_*_e4m3_d*_gqa_full_*' --out '%s'", out);
    cr_assert_eq(p.code, 0, "%s", p.err);
    static const char *const files[] = { "fa8_bwd_sm90a_e4m3_d64v64_gqa_full_m64n64_w8s1_mma.cu",
                                         "fa8_bwd_sm90a_e4m3_d192v192_gqa_full_m64n32_w8s1_mma.cu",
                                         "fa8_bwd_sm89_e4m3_d64v64_gqa_full_m64n64_w8s1.cu" };
    for (size_t i = 0; i < sizeof files / sizeof *files; ++i) {
        char *s = read_generated(out, files[i]);
        cr_expect(strstr(s, "__launch_bounds__(WARPS * 32)") != NULL, "%s: the kernel does not declare __launch_bounds__(WARPS * 32)",
                  files[i]);
        free(s);
    }
}
