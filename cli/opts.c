#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(const char *cmd, const opt_spec *s, int n) {
  printf("usage: fa8 %s [options]\n", cmd);
  for (int i = 0; i < n; ++i) {
    const char *arg = s[i].kind == OPT_FLAG ? "" : s[i].kind == OPT_STR ? " STR" : s[i].kind == OPT_INT ? " N" : " X";
    printf("  --%s%s%*s%s\n", s[i].name, arg, (int)(24 - strlen(s[i].name) - strlen(arg)) > 1 ? (int)(24 - strlen(s[i].name) - strlen(arg)) : 1, "", s[i].help);
  }
}

int opts_parse(const char *cmd, int argc, char **argv, const opt_spec *specs, int n) {
  for (int i = 0; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(cmd, specs, n); return 1; }
    if (strncmp(a, "--", 2) != 0) { fprintf(stderr, "fa8 %s: unexpected argument '%s'\n", cmd, a); return -1; }
    a += 2;
    const char *eq = strchr(a, '=');
    const size_t len = eq ? (size_t)(eq - a) : strlen(a);
    int neg = 0;
    const opt_spec *s = NULL;
    for (int k = 0; k < n && !s; ++k) {
      if (strlen(specs[k].name) == len && !strncmp(specs[k].name, a, len)) s = &specs[k];
      else if (specs[k].kind == OPT_FLAG && len == strlen(specs[k].name) + 3 && !strncmp(a, "no-", 3) &&
               !strncmp(a + 3, specs[k].name, len - 3)) { s = &specs[k]; neg = 1; }
    }
    if (!s) { fprintf(stderr, "fa8 %s: unknown option '--%.*s' (see fa8 %s --help)\n", cmd, (int)len, a, cmd); return -1; }
    if (s->kind == OPT_FLAG) {
      if (eq) { fprintf(stderr, "fa8 %s: option --%s takes no value\n", cmd, s->name); return -1; }
      *(int32_t *)s->dst = !neg;
      continue;
    }
    const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!v) { fprintf(stderr, "fa8 %s: option --%s needs a value\n", cmd, s->name); return -1; }
    char *end = NULL;
    errno = 0;
    if (s->kind == OPT_INT) {
      const long long x = strtoll(v, &end, 10);
      if (!*v || *end || errno || x < s->min || x > s->max) {
        fprintf(stderr, "fa8 %s: --%s '%s' is not an integer in [%lld, %lld]\n", cmd, s->name, v, (long long)s->min, (long long)s->max);
        return -1;
      }
      *(int32_t *)s->dst = (int32_t)x;
    } else if (s->kind == OPT_FLOAT) {
      const float x = strtof(v, &end);
      if (!*v || *end || errno || !isfinite(x)) { fprintf(stderr, "fa8 %s: --%s '%s' is not a finite number\n", cmd, s->name, v); return -1; }
      *(float *)s->dst = x;
    } else {
      *(const char **)s->dst = v;
    }
  }
  return 0;
}

int opts_hdim(const char *cmd, const char *s, int32_t *qk, int32_t *v) {
  int a = 0, b = 0, used = 0;
  if (sscanf(s, "%dx%d%n", &a, &b, &used) == 2 && s[used] == '\0') { /* QKxV */ }
  else if (sscanf(s, "%d%n", &a, &used) == 1 && s[used] == '\0') b = a;
  else { fprintf(stderr, "fa8 %s: --hdim '%s': expected N or QKxV (e.g. 128 or 192x128)\n", cmd, s); return -1; }
  if (a < 1 || b < 1 || a > 1024 || b > 1024) { fprintf(stderr, "fa8 %s: --hdim '%s': head dims must be in [1, 1024]\n", cmd, s); return -1; }
  *qk = a; *v = b;
  return 0;
}

int opts_fmt(const char *cmd, const char *opt, const char *s, fa8_fmt *out) {
  if (fa8_fmt_from_name(s, out) != 0 || !fa8_fmt_is_fp8(*out)) {
    fprintf(stderr, "fa8 %s: --%s '%s' is not an FP8 format (e4m3, e5m2, e4m3fnuz, e5m2fnuz)\n", cmd, opt, s);
    return -1;
  }
  return 0;
}

int opts_backend(const char *cmd, const char *s, fa8_backend *out) {
  if (!strcmp(s, "cpu")) *out = FA8_BACKEND_CPU;
  else if (!strcmp(s, "cuda")) *out = FA8_BACKEND_CUDA;
  else if (!strcmp(s, "hip")) *out = FA8_BACKEND_HIP;
  else { fprintf(stderr, "fa8 %s: --backend '%s' is not one of cpu, cuda, hip\n", cmd, s); return -1; }
  return 0;
}
