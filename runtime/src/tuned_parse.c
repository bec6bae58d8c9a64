/* Parser of tuned tables (the CSV `fa8 tune` writes; docs/tuning.md), shared by the runtime's overlay loader
 * and the fuzz target. Every refusal names source:line and the bad value; nothing is kept from a table with
 * one bad line. Instances are resolved through a lookup function (the build's instance table). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa8_internal.h"

static const char *const COLUMNS =
    "target,sm_count,device,key,bucket,instance,median_us,p20_us,p80_us,err,runner_up,runner_up_us,fa8_commit,cuda,driver,date";
#define NCOL 16


static int is_pow2(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

static int parse_i64(const char *s, int64_t *out) {
  if (!*s) return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno) return 0;
  *out = v;
  return 1;
}

static int parse_num(const char *s, double *out) {
  if (!*s) return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

/* "s8192_bh64" */
static int parse_bucket(const char *s, int64_t *seq, int64_t *bh) {
  if (s[0] != 's') return 0;
  const char *u = strstr(s, "_bh");
  if (!u || u == s + 1) return 0;
  char a[32];
  size_t n = (size_t)(u - s - 1);
  if (n >= sizeof a) return 0;
  memcpy(a, s + 1, n);
  a[n] = '\0';
  for (const char *c = a; *c; ++c) if (*c < '0' || *c > '9') return 0;
  for (const char *c = u + 3; *c; ++c) if (*c < '0' || *c > '9') return 0;
  if (!parse_i64(a, seq) || !parse_i64(u + 3, bh)) return 0;
  return is_pow2(*seq) && is_pow2(*bh) && *seq <= (1 << 24) && *bh <= (1 << 24);
}

#define PFAIL(...) do { free(out); char m_[512]; snprintf(m_, sizeof m_, __VA_ARGS__); \
    return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s:%d: %s", source, line_no, m_); } while (0)

fa8_status fa8__tuned_parse(const char *text, size_t len, const char *source, fa8__find_fn find, fa8__trow **rows,
                            size_t *count) {
  *rows = NULL;
  *count = 0;
  fa8__trow *out = NULL;
  size_t n = 0, cap = 0;
  int line_no = 0, header = 0;
  size_t pos = 0;
  char line[4096];
  while (pos < len) {
    size_t end = pos;
    while (end < len && text[end] != '\n') ++end;
    ++line_no;
    size_t ll = end - pos;
    if (ll && text[pos + ll - 1] == '\r') --ll;
    if (ll >= sizeof line) PFAIL("line longer than %zu bytes", sizeof line - 1);
    memcpy(line, text + pos, ll);
    line[ll] = '\0';
    pos = end + (end < len);
    if (memchr(line, '\0', ll)) PFAIL("NUL byte in the line");
    const char *t = line;
    while (*t == ' ' || *t == '\t') ++t;
    if (!*t || *t == '#') continue;
    if (!header) {
      if (strcmp(line, COLUMNS)) PFAIL("the header must be exactly: %s", COLUMNS);
      header = 1;
      continue;
    }
    char *f[NCOL + 1];
    int nf = 0;
    f[nf++] = line;
    for (char *c = line; *c; ++c)
      if (*c == ',') {
        *c = '\0';
        if (nf > NCOL) PFAIL("more than %d fields", NCOL);
        f[nf++] = c + 1;
      }
    if (nf != NCOL) PFAIL("%d fields, the header has %d", nf, NCOL);
    fa8__trow r;
    memset(&r, 0, sizeof r);
    if (!f[0][0] || strlen(f[0]) >= sizeof r.target) PFAIL("target '%s' is not a target name", f[0]);
    snprintf(r.target, sizeof r.target, "%s", f[0]);
    int64_t sm;
    if (!parse_i64(f[1], &sm) || sm < 0 || sm > 1 << 20) PFAIL("sm_count '%s' is not an integer >= 0", f[1]);
    r.sm_count = (int32_t)sm;
    if (strlen(f[3]) >= sizeof r.key || (strncmp(f[3], "fa8_fwd_", 8) && strncmp(f[3], "fa8_bwd_", 8)))
      PFAIL("key '%s' is not a forward or backward functional key", f[3]);
    snprintf(r.key, sizeof r.key, "%s", f[3]);
    if (!parse_bucket(f[4], &r.seq, &r.bh)) PFAIL("bucket '%s' is not s<S>_bh<BH> with powers of two", f[4]);
    const fa8_kernel_desc *d = find(f[5]);
    if (!d) PFAIL("instance '%s' is not in this build (fa8 list shows what is; rebuild with its table in tune/tables)", f[5]);
    if (strcmp(d->key, r.key)) PFAIL("instance '%s' has key %s, the row says %s", f[5], d->key, r.key);
    if (strcmp(d->target, r.target)) PFAIL("instance '%s' is for target %s, the row says %s", f[5], d->target, r.target);
    if (d->dir != FA8_DIR_FWD && d->dir != FA8_DIR_BWD) PFAIL("only forward and backward instances are tuned, not '%s'", f[5]);
    r.instance = d;
    if (!parse_num(f[6], &r.median_us) || !(r.median_us > 0)) PFAIL("median_us '%s' is not a number > 0", f[6]);
    const int optional[] = { 7, 8, 9, 11 };
    for (int k = 0; k < 4; ++k) {
      double x;
      if (f[optional[k]][0] && (!parse_num(f[optional[k]], &x) || x < 0))
        PFAIL("field %d ('%s') is not a number >= 0", optional[k] + 1, f[optional[k]]);
    }
    snprintf(r.source, sizeof r.source, "%s:%d", source, line_no);
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      fa8__trow *g = realloc(out, cap * sizeof *out);
      if (!g) { free(out); return fa8__fail(FA8_ERR_OUT_OF_MEMORY, "%s: out of memory", source); }
      out = g;
    }
    out[n++] = r;
  }
  if (!header) { free(out); return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "%s: no header line (an empty table)", source); }
  *rows = out;
  *count = n;
  return FA8_OK;
}
#undef PFAIL

